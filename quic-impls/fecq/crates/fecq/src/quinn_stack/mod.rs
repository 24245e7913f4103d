//! The quinn adapter (quinn 0.11, single path): what is specific to quinn, and nothing else —
//! socket glue (`udp`), congestion controller glue (`cc`), transport configuration and endpoint
//! setup (here), crypto glue (`crypto`: what each packet carries, for `--fec-protect stream`).
//! Single path: one FEC flow per peer address, fec-core's wire format unchanged.
//! qlog (`--qlog-dir`): quinn-proto 0.11 keeps its qlog stream in the `TransportConfig`, so each
//! connection gets a transport config of its own — the client's at its endpoint, each server
//! connection's when it is accepted (`Stack::accept`).

pub mod cc;
pub mod crypto;
pub mod udp;

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use quinn::crypto::rustls::{QuicClientConfig, QuicServerConfig};
use quinn::{ClientConfig, Endpoint, EndpointConfig, ServerConfig};

use crate::layer::{Counters, Multipath};
use crate::options::config::Common;
use crate::options::metrics::{MultipathInfo, SideStats};
use crate::options::qlog::ConnLog;
use crate::options::tls;
use crate::options::transport::transport_config;
use crate::quic::{Handshake, QuicEndpoint};
use crate::stack::{SocketOf, Stack};

/// quinn as fecq's QUIC stack.
#[derive(Clone, Copy, Debug, Default)]
pub struct Quinn;

crate::quic::impl_quic!(
    quinn,
    remote_address: quinn::Connection::remote_address,
    read_chunk: read_chunk
);

/// quinn's `read_chunk` takes an `ordered` flag and returns the bytes with their offset.
async fn read_chunk(s: &mut quinn::RecvStream, max: usize) -> Result<Option<bytes::Bytes>, String> {
    s.read_chunk(max, true)
        .await
        .map(|c| c.map(|c| c.bytes))
        .map_err(|e| e.to_string())
}

/// fecq's transport settings, with a qlog stream into `log` if given.
fn transport(common: &Common, log: Option<&Arc<ConnLog>>) -> quinn::TransportConfig {
    let mut t = transport_config!(quinn, common, keep_alive: common.keepalive_interval());
    if let Some(log) = log {
        let mut config = quinn_proto::QlogConfig::default();
        config
            .writer(log.stack_writer(true))
            .start_time(log.start)
            .title(Some("fecq".to_string()));
        t.qlog_stream(config.into_stream());
    }
    t
}

/// What a server with `--qlog-dir` needs to give each connection its own transport config.
struct QlogServer {
    crypto: Arc<dyn quinn::crypto::ServerConfig>,
    common: Common,
}

/// The server's QUIC crypto: rustls, its packet keys recording what they seal when the socket
/// needs to know (`--fec-protect stream`: crypto::RecordingServer).
fn server_crypto(
    common: &Common,
    socket: &SocketOf<Quinn>,
) -> Result<Arc<dyn quinn::crypto::ServerConfig>, String> {
    let inner = Arc::new(
        QuicServerConfig::try_from(tls::server_rustls(&common.capture)?)
            .map_err(|e| e.to_string())?,
    );
    Ok(match socket.sent_packets() {
        Some(packets) => Arc::new(crypto::RecordingServer {
            inner,
            packets: packets.clone(),
        }),
        None => inner,
    })
}

/// The client's QUIC crypto, as [`server_crypto`].
fn client_crypto(
    common: &Common,
    socket: &SocketOf<Quinn>,
) -> Result<Arc<dyn quinn::crypto::ClientConfig>, String> {
    let inner = Arc::new(
        QuicClientConfig::try_from(tls::client_rustls(&common.capture)?)
            .map_err(|e| e.to_string())?,
    );
    Ok(match socket.sent_packets() {
        Some(packets) => Arc::new(crypto::RecordingClient {
            inner,
            packets: packets.clone(),
        }),
        None => inner,
    })
}

impl Stack for Quinn {
    type Conn = quinn::Connection;
    type Endpoint = Endpoint;
    type Glue = udp::QuinnUdp;

    fn multipath(&self) -> Option<Multipath> {
        None
    }

    fn multipath_info(&self, _paths: usize) -> Option<MultipathInfo> {
        None
    }

    fn endpoint(
        &self,
        common: &Common,
        socket: &Arc<SocketOf<Quinn>>,
        server: bool,
    ) -> Result<Endpoint, String> {
        let logs = socket.qlog();
        let client_log = logs.filter(|_| !server).map(|l| l.open(None, None));
        let transport = Arc::new(transport(common, client_log.as_ref()));
        let server_config = if server {
            let crypto = server_crypto(common, socket)?;
            if let Some(logs) = logs {
                let _ = logs.stack.set(Box::new(QlogServer {
                    crypto: crypto.clone(),
                    common: common.clone(),
                }));
            }
            let mut config = ServerConfig::with_crypto(crypto);
            config.transport_config(transport.clone());
            Some(config)
        } else {
            None
        };
        let mut endpoint = Endpoint::new_with_abstract_socket(
            EndpointConfig::default(),
            server_config,
            socket.clone(),
            Arc::new(quinn::TokioRuntime),
        )
        .map_err(|e| format!("endpoint: {e}"))?;
        if !server {
            let mut client = ClientConfig::new(client_crypto(common, socket)?);
            client.transport_config(transport);
            endpoint.set_default_client_config(client);
        }
        Ok(endpoint)
    }

    async fn accept(
        &self,
        endpoint: &Endpoint,
        socket: &Arc<SocketOf<Quinn>>,
    ) -> Option<Handshake<quinn::Connection>> {
        let qlog = socket.qlog().and_then(|logs| {
            let server = logs.stack.get()?.downcast_ref::<QlogServer>()?;
            Some((logs, server))
        });
        let Some((logs, server)) = qlog else {
            return QuicEndpoint::accept(endpoint).await;
        };
        let incoming = endpoint.accept().await?;
        let log = logs.open(
            Some(incoming.remote_address()),
            Some(incoming.orig_dst_cid().to_string()),
        );
        let mut config = ServerConfig::with_crypto(server.crypto.clone());
        config.transport_config(Arc::new(transport(&server.common, Some(&log))));
        let connecting = incoming.accept_with(Arc::new(config));
        Some(Box::pin(async move {
            connecting
                .map_err(|e| e.to_string())?
                .await
                .map_err(|e| e.to_string())
        }))
    }

    async fn client_connected(
        &self,
        _conn: &quinn::Connection,
        _more_paths: &[(Option<IpAddr>, SocketAddr)],
    ) -> Result<(), String> {
        Ok(())
    }

    fn server_connected(&self, _conn: &quinn::Connection) {}

    fn open_paths(_conn: &quinn::Connection) -> usize {
        1
    }

    fn side_stats(conn: &quinn::Connection, socket: &SocketOf<Quinn>) -> SideStats {
        // QUIC's and the layer's counters from one moment (FecSocket::paths_with).
        let (s, paths) = socket.paths_with(conn.remote_address(), || conn.stats());
        let mut fec = Counters::default();
        for (_, c) in &paths {
            fec.add(c);
        }
        SideStats {
            packets_sent: fec.wire_datagrams_sent,
            bytes_sent: fec.wire_bytes_sent,
            repair_sent: fec.repair_sent,
            quic_packets_sent: s.udp_tx.datagrams,
            quic_bytes_sent: s.udp_tx.bytes,
            lost: s.path.lost_packets,
            lost_bytes: s.path.lost_bytes,
            congestion_events: s.path.congestion_events,
            cwnd: s.path.cwnd,
            rtt_ms: s.path.rtt.as_secs_f64() * 1e3,
            wire_datagrams_received: fec.wire_datagrams_received,
            recovered: fec.recovered,
            fec_ignored: fec.ignored,
            plain_sent: fec.plain_sent,
            wire_dropped: fec.wire_dropped,
            datagram_frames_sent: s.frame_tx.datagram,
            send_dropped: fec.send_dropped,
            paths: Vec::new(),
            tail_repairs: fec.tail_repairs,
            tails: fec.tails,
        }
    }
}
