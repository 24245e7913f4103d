//! The noq adapter (noq 1.4, quinn's multipath fork, draft-ietf-quic-multipath): what is specific
//! to noq, and nothing else — socket glue (`udp`), congestion controller glue (`cc`), transport
//! configuration and endpoint setup (here), crypto glue (`crypto`: what each packet carries, for
//! `--fec-protect stream`), its paths (`paths`: listing, opening, keeping alive).
//! With multipath framing (crate::layer: per-path or connection-wide source blocks, repairs on
//! the same, another or every path).
//!
//! The client opens one path per local address it is given (path i leaves from local address i
//! towards server address i; the topology's policy routing sends it by path i); the server binds
//! the wildcard address so that every per-path server address reaches it (crate::run).
//!
//! Scheduling: noq has no pluggable scheduler. What it does (noq-proto 1.4.0,
//! `Connection::poll_transmit`): it walks the open paths in path-id order and fills the first
//! one whose congestion window (and pacer) has room, spilling to the next when it is blocked;
//! paths marked backup are used only when no available path can send. That is "lowest path id
//! first, overflow when window-limited", not min-RTT: this build names it `lowest-id`. fecq's
//! noq-proto patch (noq-proto/, README.md) makes the walk's order a transport setting: `min-rtt`,
//! `round-robin`, `highrb`, `backup`.

pub mod cc;
pub mod crypto;
pub mod paths;
pub mod udp;

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use noq::{ClientConfig, Connection, Endpoint, EndpointConfig, ServerConfig};

use crate::layer::{Multipath, MAX_PATHS};
use crate::options::config::Common;
use crate::options::metrics::{ms, MultipathInfo, PathSide, SideStats};
use crate::options::multipath::{seconds, MpArgs, Scheduler};
use crate::options::qlog::Logs;
use crate::options::tls;
use crate::options::transport::transport_config;
use crate::stack::{SocketOf, Stack};
use paths::{open_path, quic_paths, remote_address, spawn_pinger};

/// noq as fecq's QUIC stack, with the multipath options.
#[derive(Clone, Debug)]
pub struct Noq {
    pub args: MpArgs,
}

crate::quic::impl_quic!(noq, remote_address: paths::remote_address, read_chunk: read_chunk);

/// noq's ordered `read_chunk` returns the bytes.
async fn read_chunk(s: &mut noq::RecvStream, max: usize) -> Result<Option<bytes::Bytes>, String> {
    s.read_chunk(max).await.map_err(|e| e.to_string())
}

fn scheduler(s: Scheduler) -> noq_proto::PathScheduler {
    match s {
        Scheduler::LowestId => noq_proto::PathScheduler::LowestId,
        Scheduler::MinRtt => noq_proto::PathScheduler::MinRtt,
        Scheduler::RoundRobin => noq_proto::PathScheduler::RoundRobin,
        Scheduler::HighRb => noq_proto::PathScheduler::HighRb,
        Scheduler::Backup => noq_proto::PathScheduler::Backup,
    }
}

/// noq-proto asks for each connection's qlog: a file in `--qlog-dir` (crate::options::qlog).
struct QlogFactory(Arc<Logs>);

impl noq_proto::QlogFactory for QlogFactory {
    fn for_connection(
        &self,
        _side: noq_proto::Side,
        remote: SocketAddr,
        initial_dst_cid: noq_proto::ConnectionId,
        _now: std::time::Instant,
    ) -> Option<noq_proto::QlogConfig> {
        let log = self.0.open(Some(remote), Some(initial_dst_cid.to_string()));
        let mut config = noq_proto::QlogConfig::new(log.stack_writer(false));
        config.start_time(log.start).title(Some("fecq".to_string()));
        Some(config)
    }
}

impl Noq {
    /// fecq's transport settings, plus noq's own: multipath; qlog into `qlog` if given.
    fn transport(&self, common: &Common, qlog: Option<&Arc<Logs>>) -> noq::TransportConfig {
        // Multipath keeps its paths alive itself (`--path-keepalive`), not the connection.
        let mut t = transport_config!(noq, common, keep_alive: None);
        // One datagram per transmit: the FEC layer frames datagrams one by one (a batch would be
        // split anyway), and veth would carry a GSO batch as one packet past the dropper.
        t.enable_segmentation_offload(false);
        t.max_concurrent_multipath_paths(MAX_PATHS as u32);
        // Path failure: a path that hears nothing for the path idle timeout is abandoned (its
        // packets in flight are then declared lost and resent on the others); the keep-alive
        // PINGs make sure a live but idle path always hears something.
        t.default_path_max_idle_timeout(seconds(self.args.path_idle_timeout));
        t.default_path_keep_alive_interval(seconds(self.args.path_keepalive));
        t.path_scheduler(scheduler(self.args.scheduler));
        if let Some(logs) = qlog {
            t.qlog_factory(Arc::new(QlogFactory(logs.clone())));
        }
        t
    }
}

impl Stack for Noq {
    type Conn = Connection;
    type Endpoint = Endpoint;
    type Glue = udp::NoqUdp;

    fn multipath(&self) -> Option<Multipath> {
        Some(self.args.layer_multipath())
    }

    fn multipath_info(&self, paths: usize) -> Option<MultipathInfo> {
        Some(self.args.info(paths))
    }

    fn endpoint(
        &self,
        common: &Common,
        socket: &Arc<SocketOf<Noq>>,
        server: bool,
    ) -> Result<Endpoint, String> {
        let transport = Arc::new(self.transport(common, socket.qlog()));
        let server_config = if server {
            let inner = Arc::new(
                noq::crypto::rustls::QuicServerConfig::try_from(tls::server_rustls(
                    &common.capture,
                )?)
                .map_err(|e| e.to_string())?,
            );
            let crypto: Arc<dyn noq::crypto::ServerConfig> = match socket.sent_packets() {
                Some(packets) => Arc::new(crypto::RecordingServer {
                    inner,
                    packets: packets.clone(),
                }),
                None => inner,
            };
            let mut config = ServerConfig::with_crypto(crypto);
            config.transport_config(transport.clone());
            Some(config)
        } else {
            None
        };
        let endpoint = Endpoint::new_with_abstract_socket(
            EndpointConfig::default(),
            server_config,
            Box::new(udp::Handle(socket.clone())),
            Arc::new(noq::TokioRuntime),
        )
        .map_err(|e| format!("endpoint: {e}"))?;
        if !server {
            let inner = Arc::new(
                noq::crypto::rustls::QuicClientConfig::try_from(tls::client_rustls(
                    &common.capture,
                )?)
                .map_err(|e| e.to_string())?,
            );
            let crypto: Arc<dyn noq::crypto::ClientConfig> = match socket.sent_packets() {
                Some(packets) => Arc::new(crypto::RecordingClient {
                    inner,
                    packets: packets.clone(),
                }),
                None => inner,
            };
            let mut client = ClientConfig::new(crypto);
            client.transport_config(transport);
            endpoint.set_default_client_config(client);
        }
        Ok(endpoint)
    }

    async fn client_connected(
        &self,
        conn: &Connection,
        more_paths: &[(Option<IpAddr>, SocketAddr)],
    ) -> Result<(), String> {
        if !more_paths.is_empty() && !conn.is_multipath_enabled() {
            return Err(
                "the server did not negotiate multipath (is it run with --multipath?)".into(),
            );
        }
        for (local, remote) in more_paths {
            open_path(conn, *local, *remote).await?;
        }
        spawn_pinger(conn, self.args.keepalive());
        Ok(())
    }

    fn server_connected(&self, conn: &Connection) {
        spawn_pinger(conn, self.args.keepalive());
    }

    fn open_paths(conn: &Connection) -> usize {
        quic_paths(conn).len()
    }

    fn side_stats(conn: &Connection, socket: &SocketOf<Noq>) -> SideStats {
        // QUIC's and the layer's counters from one moment (FecSocket::paths_with).
        let ((s, quic), layer) =
            socket.paths_with(remote_address(conn), || (conn.stats(), quic_paths(conn)));
        let mut side = SideStats {
            quic_packets_sent: s.udp_tx.datagrams,
            quic_bytes_sent: s.udp_tx.bytes,
            lost: s.lost_packets,
            lost_bytes: s.lost_bytes,
            datagram_frames_sent: s.frame_tx.datagram,
            congestion_events: quic.iter().map(|(_, _, p)| p.congestion_events).sum(),
            cwnd: quic.iter().map(|(_, _, p)| p.cwnd).sum(),
            rtt_ms: quic
                .iter()
                .map(|(_, _, p)| ms(p.rtt))
                .fold(f64::NAN, f64::min),
            ..Default::default()
        };
        for (key, c) in &layer {
            side.packets_sent += c.wire_datagrams_sent;
            side.bytes_sent += c.wire_bytes_sent;
            side.repair_sent += c.repair_sent;
            side.plain_sent += c.plain_sent;
            side.wire_datagrams_received += c.wire_datagrams_received;
            side.recovered += c.recovered;
            side.fec_ignored += c.ignored;
            side.wire_dropped += c.wire_dropped;
            side.send_dropped += c.send_dropped;
            let q = quic
                .iter()
                .find(|(_, k, _)| socket.key(k.local, k.remote) == *key)
                .map(|(id, _, p)| (*id, p));
            side.paths.push(PathSide {
                local: key
                    .local
                    .map_or_else(|| "*".to_string(), |ip| ip.to_string()),
                remote: key.remote.to_string(),
                quic_path_id: q.map(|(id, _)| id),
                packets_sent: c.wire_datagrams_sent,
                bytes_sent: c.wire_bytes_sent,
                repair_sent: c.repair_sent,
                packets_received: c.wire_datagrams_received,
                bytes_received: c.wire_bytes_received,
                recovered: c.recovered,
                fec_ignored: c.ignored,
                wire_dropped: c.wire_dropped,
                quic_packets_sent: q.map_or(0, |(_, p)| p.sent_packets),
                lost: q.map_or(0, |(_, p)| p.lost_packets),
                lost_bytes: q.map_or(0, |(_, p)| p.lost_bytes),
                congestion_events: q.map_or(0, |(_, p)| p.congestion_events),
                cwnd: q.map_or(0, |(_, p)| p.cwnd),
                rtt_ms: q.map(|(_, p)| ms(p.rtt)),
            });
        }
        if side.rtt_ms.is_nan() {
            side.rtt_ms = 0.0;
        }
        side
    }
}
