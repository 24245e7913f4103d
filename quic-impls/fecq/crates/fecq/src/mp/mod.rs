//! Multipath fecq: the same FEC layer (crate::layer) under noq 1.4 (quinn's multipath fork,
//! draft-ietf-quic-multipath), with multipath framing (per-path or connection-wide source
//! blocks, repairs on the same, another or every path).
//!
//! The client opens one path per local address it is given (path i leaves from local address i
//! towards server address i; the topology's policy routing sends it by path i); the server binds
//! the wildcard address so that every per-path server address reaches it. The application
//! protocol (downloads, messages in datagram or stream mode, the `stats` request) is app.rs's,
//! unchanged.
//!
//! Scheduling: noq has no pluggable scheduler. What it does (noq-proto 1.4.0,
//! `Connection::poll_transmit`): it walks the open paths in path-id order and fills the first
//! one whose congestion window (and pacer) has room, spilling to the next when it is blocked;
//! paths marked backup are used only when no available path can send. That is "lowest path id
//! first, overflow when window-limited", not min-RTT: this build names it `lowest-id`. The
//! vendored, patched noq-proto (vendor/, README.md) makes the walk's order a transport setting:
//! `min-rtt`, `round-robin`, `highrb`.

pub mod cc;
pub mod socket;

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::Args;
use noq::{
    ClientConfig, Connection, Endpoint, EndpointConfig, FourTuple, IdleTimeout, PathId, PathStatus,
    ServerConfig, TransportConfig, VarInt,
};

use crate::app::{self, StatsFn, Workload};
use crate::config::Common;
use crate::layer::{Blocks, LayerConfig, Multipath, PathKey, RepairPath, MAX_PATHS};
use crate::link::Link;
use crate::metrics::{Metrics, MultipathInfo, PathReport, PathSide, SideStats};
use crate::socket::QUIC_MTU;
use crate::tls;
use socket::MpSocket;

/// Path ids probed when listing a connection's paths (ids are not reused; a run opens a few).
const PATH_ID_SCAN: u32 = 64;

/// Packet schedulers (noq-proto patched, vendor/noq-proto-1.4.0-scheduler.patch).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scheduler {
    /// noq's own: lowest path id first, the next path when its window is full.
    LowestId,
    /// Lowest smoothed RTT first.
    MinRtt,
    /// Each packet on the next path in turn (a blocked path passes its turn).
    RoundRobin,
    /// Thesis §5.9: first path drawn with probability ∝ its remaining congestion window.
    HighRb,
    /// Paths 2… carry data only once path 1 (QUIC path 0) is abandoned (its idle timeout).
    Backup,
}

const SCHEDULERS: [(&str, Scheduler); 5] = [
    ("lowest-id", Scheduler::LowestId),
    ("min-rtt", Scheduler::MinRtt),
    ("round-robin", Scheduler::RoundRobin),
    ("highrb", Scheduler::HighRb),
    ("backup", Scheduler::Backup),
];

impl Scheduler {
    fn proto(self) -> noq_proto::PathScheduler {
        match self {
            Scheduler::LowestId => noq_proto::PathScheduler::LowestId,
            Scheduler::MinRtt => noq_proto::PathScheduler::MinRtt,
            Scheduler::RoundRobin => noq_proto::PathScheduler::RoundRobin,
            Scheduler::HighRb => noq_proto::PathScheduler::HighRb,
            Scheduler::Backup => noq_proto::PathScheduler::Backup,
        }
    }
}

impl std::str::FromStr for Scheduler {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        SCHEDULERS
            .iter()
            .find(|(name, _)| *name == s)
            .map(|(_, v)| *v)
            .ok_or_else(|| {
                let names: Vec<&str> = SCHEDULERS.iter().map(|(n, _)| *n).collect();
                format!("unknown scheduler {s:?} (allowed: {})", names.join(", "))
            })
    }
}

impl std::fmt::Display for Scheduler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let name = SCHEDULERS.iter().find(|(_, v)| v == self).map(|(n, _)| *n);
        f.write_str(name.unwrap_or("?"))
    }
}

#[derive(Args, Clone, Debug)]
pub struct MpArgs {
    /// Multipath QUIC (noq) with multipath FEC framing; both ends must say it
    #[arg(long)]
    pub multipath: bool,
    /// Client: open one path per local address (comma-separated); path i leaves from address i
    #[arg(long, value_delimiter = ',')]
    pub local_addresses: Vec<IpAddr>,
    /// Client: the server address of each path (comma-separated ADDR or ADDR:PORT; the port
    /// defaults to --server's; default: --server for every path)
    #[arg(long, value_delimiter = ',', value_parser = parse_server_address)]
    pub server_addresses: Vec<SocketAddr>,
    /// Client: use only the first N paths of --local-addresses (and --server-addresses)
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=16))]
    pub paths: Option<u32>,
    /// FEC source blocks: path (one encoder per path) | connection (one across all paths)
    #[arg(long, default_value = "path")]
    pub fec_blocks: Blocks,
    /// Where repair datagrams go: same (the block's path) | other (the next path) | all (in turn)
    #[arg(long, default_value = "same")]
    pub repair_path: RepairPath,
    /// Packet scheduler: lowest-id (noq's own) | min-rtt | round-robin | highrb | backup (README.md)
    #[arg(long, default_value = "lowest-id")]
    pub scheduler: Scheduler,
    /// Abandon a path that received nothing for this many seconds (0: never; then a dead path
    /// ends the connection at its idle timeout); the lower of both ends' values applies
    #[arg(long, default_value_t = 1.0)]
    pub path_idle_timeout: f64,
    /// Keep every path alive with a PING after this many seconds without sending on it (0: off)
    #[arg(long, default_value_t = 0.2)]
    pub path_keepalive: f64,
}

/// ADDR:PORT, or ADDR alone (port 0: --server's port).
fn parse_server_address(s: &str) -> Result<SocketAddr, String> {
    s.parse::<SocketAddr>()
        .or_else(|_| s.parse::<IpAddr>().map(|ip| SocketAddr::new(ip, 0)))
        .map_err(|_| format!("{s:?} is neither ADDR nor ADDR:PORT"))
}

impl MpArgs {
    /// Multipath options without --multipath, or inconsistent ones, are usage errors. The server
    /// takes the client's path lists and ignores them (it binds every address), so that one
    /// descriptor argument can give both ends their multipath options.
    pub fn check(&self) -> Result<(), String> {
        for (name, v) in [
            ("--path-idle-timeout", self.path_idle_timeout),
            ("--path-keepalive", self.path_keepalive),
        ] {
            if !(0.0..=3600.0).contains(&v) {
                return Err(format!("{name} {v} must be in [0, 3600] seconds"));
            }
        }
        let extra = !self.local_addresses.is_empty()
            || !self.server_addresses.is_empty()
            || self.paths.is_some()
            || self.fec_blocks != Blocks::PerPath
            || self.repair_path != RepairPath::Same
            || self.scheduler != Scheduler::LowestId
            || self.path_idle_timeout != 1.0
            || self.path_keepalive != 0.2;
        if !self.multipath {
            return if extra {
                Err(
                    "--local-addresses, --server-addresses, --paths, --fec-blocks, \
                     --repair-path, --scheduler, --path-idle-timeout and --path-keepalive need \
                     --multipath"
                        .into(),
                )
            } else {
                Ok(())
            };
        }
        if let Some(n) = self.paths {
            if n as usize > self.local_addresses.len().max(1) {
                return Err(format!(
                    "--paths {n}: only {} local address(es) given (--local-addresses)",
                    self.local_addresses.len()
                ));
            }
        }
        if self.local_addresses.len() > MAX_PATHS {
            return Err(format!(
                "--local-addresses: at most {MAX_PATHS} paths, got {}",
                self.local_addresses.len()
            ));
        }
        if !self.server_addresses.is_empty()
            && self.server_addresses.len() != self.local_addresses.len()
        {
            return Err(format!(
                "--server-addresses gives {} addresses for {} paths (--local-addresses): one per \
                 path",
                self.server_addresses.len(),
                self.local_addresses.len()
            ));
        }
        Ok(())
    }

    /// The PING interval of every path (None: no keep-alive).
    pub fn keepalive(&self) -> Option<Duration> {
        seconds(self.path_keepalive)
    }

    fn layer_multipath(&self) -> Multipath {
        Multipath {
            blocks: self.fec_blocks,
            repair: self.repair_path,
        }
    }

    /// (local address, server address) of each path the client opens.
    pub fn client_paths(&self, server: SocketAddr) -> Vec<(Option<IpAddr>, SocketAddr)> {
        if self.local_addresses.is_empty() {
            return vec![(None, server)];
        }
        let n = self.paths.map_or(usize::MAX, |n| n as usize);
        self.local_addresses
            .iter()
            .take(n)
            .enumerate()
            .map(|(i, ip)| {
                let mut to = *self.server_addresses.get(i).unwrap_or(&server);
                if to.port() == 0 {
                    to.set_port(server.port());
                }
                (Some(*ip), to)
            })
            .collect()
    }
}

fn unspecified(like: SocketAddr, port: u16) -> SocketAddr {
    match like {
        SocketAddr::V4(_) => SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), port),
        SocketAddr::V6(_) => SocketAddr::new(IpAddr::V6(Ipv6Addr::UNSPECIFIED), port),
    }
}

/// The remote address of the lowest-numbered open path (the connection's first address once
/// every path is gone).
pub fn remote_address(conn: &Connection) -> SocketAddr {
    quic_paths(conn)
        .first()
        .map(|(_, key, _)| key.remote)
        .unwrap_or_else(|| unspecified("0.0.0.0:0".parse().unwrap(), 0))
}

/// The open paths of a connection: id, (local IP, remote), stats.
pub fn quic_paths(conn: &Connection) -> Vec<(u32, PathKey, noq::PathStats)> {
    (0..PATH_ID_SCAN)
        .filter_map(|i| {
            let path = conn.path(PathId::from(i))?;
            let tuple = path.network_path().ok()?;
            Some((
                i,
                PathKey::new(tuple.local_ip(), tuple.remote()),
                path.stats(),
            ))
        })
        .collect()
}

/// (path, RTT) of every open path, for the flush thresholds.
pub fn open_paths(conn: &Connection) -> Vec<(PathKey, Duration)> {
    quic_paths(conn)
        .into_iter()
        .map(|(_, key, stats)| (key, stats.rtt))
        .collect()
}

/// Seconds as a duration, 0 as None.
fn seconds(s: f64) -> Option<Duration> {
    (s > 0.0).then(|| Duration::from_secs_f64(s))
}

fn transport(common: &Common, mp: &MpArgs) -> TransportConfig {
    let mut t = TransportConfig::default();
    t.packet_threshold(common.reorder_packets);
    t.time_threshold(common.reorder_time);
    t.ack_frequency_config(crate::config::ack_frequency_config!(
        noq::AckFrequencyConfig,
        common.ack_request()
    ));
    t.congestion_controller_factory(Arc::new(cc::ScaledFactory {
        algo: common.cc,
        scale: common.window_scale(),
        limits: common.window_limits(),
    }));
    // Path MTU discovery off: every QUIC datagram is at most QUIC_MTU, the FEC header on top.
    t.mtu_discovery_config(None);
    t.initial_mtu(QUIC_MTU);
    // One datagram per transmit: the FEC layer frames datagrams one by one (a batch would be
    // split anyway), and veth would carry a GSO batch as one packet past the dropper.
    t.enable_segmentation_offload(false);
    t.max_idle_timeout(Some(IdleTimeout::from(VarInt::from_u32(
        (common.idle_timeout * 1e3).round() as u32,
    ))));
    t.stream_receive_window(VarInt::from_u32(16 << 20));
    t.receive_window(VarInt::from_u32(32 << 20));
    t.send_window(32 << 20);
    t.datagram_receive_buffer_size(Some(8 << 20));
    t.datagram_send_buffer_size(8 << 20);
    t.max_concurrent_multipath_paths(MAX_PATHS as u32);
    // Path failure: a path that hears nothing for the path idle timeout is abandoned (its
    // packets in flight are then declared lost and resent on the others); the keep-alive PINGs
    // make sure a live but idle path always hears something.
    t.default_path_max_idle_timeout(seconds(mp.path_idle_timeout));
    t.default_path_keep_alive_interval(seconds(mp.path_keepalive));
    t.path_scheduler(mp.scheduler.proto());
    t
}

fn layer_config(common: &Common, mp: &MpArgs) -> LayerConfig {
    LayerConfig {
        scheme: common.fec,
        signal: common.signal,
        flush_after: Duration::from_millis(common.flush_ms.max(1)),
        max_payload: usize::from(QUIC_MTU),
        multipath: Some(mp.layer_multipath()),
        // Tail mode is single-path (the CLI refuses it with --multipath).
        tail: None,
    }
}

fn bind(
    common: &Common,
    mp: &MpArgs,
    addr: SocketAddr,
    default_local: Option<IpAddr>,
    link: Option<Link>,
    shaped: bool,
) -> Result<Arc<MpSocket>, String> {
    let sock = std::net::UdpSocket::bind(addr).map_err(|e| format!("cannot bind {addr}: {e}"))?;
    MpSocket::new(
        sock,
        layer_config(common, mp),
        common.rcvbuf,
        common.sndbuf,
        default_local,
        link,
        shaped,
    )
    .map_err(|e| format!("socket setup: {e}"))
}

/// A noq server endpoint on the wildcard address at `listen`'s port (every per-path server
/// address reaches it).
pub fn server_endpoint(
    common: &Common,
    mp: &MpArgs,
    listen: SocketAddr,
    link: Option<Link>,
    shaped: bool,
) -> Result<(Endpoint, Arc<MpSocket>), String> {
    let socket = bind(
        common,
        mp,
        unspecified(listen, listen.port()),
        None,
        link,
        shaped,
    )?;
    let crypto = noq::crypto::rustls::QuicServerConfig::try_from(tls::server_rustls()?)
        .map_err(|e| e.to_string())?;
    let mut server = ServerConfig::with_crypto(Arc::new(crypto));
    server.transport_config(Arc::new(transport(common, mp)));
    let endpoint = Endpoint::new_with_abstract_socket(
        EndpointConfig::default(),
        Some(server),
        socket.handle(),
        Arc::new(noq::TokioRuntime),
    )
    .map_err(|e| format!("endpoint: {e}"))?;
    Ok((endpoint, socket))
}

/// Accept connections until the endpoint is closed; `keepalive`: the PING interval of every path
/// (`--path-keepalive`).
pub async fn serve(endpoint: Endpoint, socket: Arc<MpSocket>, keepalive: Option<Duration>) {
    while let Some(incoming) = endpoint.accept().await {
        let socket = socket.clone();
        tokio::spawn(async move {
            if let Ok(conn) = incoming.await {
                socket.track_connection(&conn);
                spawn_pinger(&conn, keepalive);
                let stats: StatsFn = {
                    let conn = conn.clone();
                    Arc::new(move || {
                        // Tail repairs of every path's partial block first (see app::serve).
                        socket.flush_peer(remote_address(&conn));
                        serde_json::to_vec(&side_stats(&conn, &socket)).map_err(|e| e.to_string())
                    })
                };
                app::serve_connection(conn, stats).await;
            }
        });
    }
}

/// One endpoint's view of a multipath connection: totals and per path.
pub fn side_stats(conn: &Connection, socket: &MpSocket) -> SideStats {
    // QUIC's counters before the layer's, so the layer's wire count is never behind (metrics.rs).
    let s = conn.stats();
    let quic = quic_paths(conn);
    let layer = socket.paths(remote_address(conn));
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
            .map(|(_, _, p)| p.rtt.as_secs_f64() * 1e3)
            .fold(f64::NAN, f64::min),
        ..Default::default()
    };
    for (key, c) in &layer {
        side.packets_sent += c.wire_datagrams_sent;
        side.bytes_sent += c.wire_bytes_sent;
        side.repair_sent += c.repair_sent;
        side.wire_datagrams_received += c.wire_datagrams_received;
        side.recovered += c.recovered;
        side.fec_ignored += c.ignored;
        side.wire_dropped += c.wire_dropped;
        side.send_dropped += c.send_dropped;
        let q = quic
            .iter()
            .find(|(_, k, _)| socket.keyed(*k) == *key)
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
            rtt_ms: q.map(|(_, p)| p.rtt.as_secs_f64() * 1e3),
        });
    }
    if side.rtt_ms.is_nan() {
        side.rtt_ms = 0.0;
    }
    side
}

/// The client's per-path report: its view of path i and the server's view of the same path
/// (the server's path whose local address is path i's server address and whose remote IP is
/// path i's client address).
fn path_reports(
    paths: &[(Option<IpAddr>, SocketAddr)],
    client: &SideStats,
    server: Option<&SideStats>,
) -> Vec<PathReport> {
    paths
        .iter()
        .enumerate()
        .map(|(i, (local, remote))| {
            let local_s = local.map_or_else(|| "*".to_string(), |ip| ip.to_string());
            let mine = client
                .paths
                .iter()
                .find(|p| p.local == local_s && p.remote == remote.to_string())
                .cloned();
            let theirs = server.and_then(|s| {
                s.paths
                    .iter()
                    .find(|p| {
                        p.local == remote.ip().to_string()
                            && p.remote
                                .parse::<SocketAddr>()
                                .is_ok_and(|a| local.is_none_or(|ip| a.ip() == ip))
                    })
                    .cloned()
            });
            PathReport {
                path: i + 1,
                client_address: local_s,
                server_address: remote.to_string(),
                client: mine,
                server: theirs,
            }
        })
        .collect()
}

/// PING every open path every `interval` until the connection ends. noq's per-path keep-alive
/// only fires on a path this end has not *sent* on, and the ACKs of a path's data may travel on
/// another path: a client receiving a download on path 2 and acknowledging it on path 1 sends
/// nothing on path 2, so without these PINGs the server's path 2 hears nothing and is abandoned
/// at its idle timeout although it works.
fn spawn_pinger(conn: &Connection, interval: Option<Duration>) {
    let Some(interval) = interval else { return };
    let weak = conn.weak_handle();
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(interval);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            let Some(conn) = weak.upgrade() else { return };
            if conn.close_reason().is_some() {
                return;
            }
            for i in 0..PATH_ID_SCAN {
                if let Some(path) = conn.path(PathId::from(i)) {
                    let _ = path.ping();
                }
            }
        }
    });
}

/// Open path i (i ≥ 1) once the server has issued connection ids for it.
async fn open_path(
    conn: &Connection,
    local: Option<IpAddr>,
    remote: SocketAddr,
) -> Result<(), String> {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        match conn
            .open_path(FourTuple::new(remote, local), PathStatus::Available)
            .await
        {
            Ok(_) => return Ok(()),
            // Right after the handshake the server has not yet issued CIDs for new paths.
            Err(noq::PathError::RemoteCidsExhausted) if Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(5)).await
            }
            Err(e) => {
                return Err(format!(
                    "cannot open the path {} -> {remote}: {e}",
                    local.map_or_else(|| "*".to_string(), |ip| ip.to_string())
                ))
            }
        }
    }
}

/// Connect, open the paths, run the workload, fetch the server's counters, close.
async fn run_client(
    endpoint: &Endpoint,
    socket: &MpSocket,
    paths: &[(Option<IpAddr>, SocketAddr)],
    workload: Workload,
    keepalive: Option<Duration>,
    m: &mut Metrics,
) -> Result<(), String> {
    let t0 = Instant::now();
    let conn = endpoint
        .connect(paths[0].1, "localhost")
        .map_err(|e| format!("connect: {e}"))?
        .await
        .map_err(|e| format!("handshake: {e}"))?;
    m.handshake_ms = Some(app::ms(t0.elapsed()));
    socket.track_connection(&conn);
    if paths.len() > 1 && !conn.is_multipath_enabled() {
        return Err("the server did not negotiate multipath (is it run with --multipath?)".into());
    }
    for (local, remote) in &paths[1..] {
        open_path(&conn, *local, *remote).await?;
    }
    spawn_pinger(&conn, keepalive);
    if let Some(info) = m.multipath.as_mut() {
        info.paths_established = quic_paths(&conn).len();
    }
    let result =
        app::run_workload(&conn, workload, m)
            .await
            .map_err(|e| match conn.close_reason() {
                Some(noq::ConnectionError::TimedOut) => format!("{e}: connection timed out"),
                Some(reason) if e.ends_with("connection lost") => format!("{e}: {reason}"),
                _ => e,
            });
    let sender = app::fetch_server_stats(&conn).await;
    let receiver = side_stats(&conn, socket);
    if let Some(info) = m.multipath.as_mut() {
        info.blocks_with_losses = socket.blocks_with_losses(remote_address(&conn));
    }
    m.paths = path_reports(paths, &receiver, sender.as_ref().ok());
    match sender {
        Ok(s) => app::set_sides(m, &workload, s, receiver),
        Err(e) => {
            m.client = Some(receiver);
            if result.is_ok() {
                close_now(&conn, 1, b"stats failed").await;
                return Err(format!("server stats: {e}"));
            }
        }
    }
    close_now(&conn, 0, b"done").await;
    result
}

/// Application close without the draining period (see app::close_now).
async fn close_now(conn: &Connection, code: u32, reason: &[u8]) {
    const CLOSE_SEND_CAP: Duration = Duration::from_millis(100);
    let before = conn.stats().udp_tx.datagrams;
    conn.close(code.into(), reason);
    let deadline = Instant::now() + CLOSE_SEND_CAP;
    while conn.stats().udp_tx.datagrams == before && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
}

/// Client role, multipath: run a workload against a server over the given paths.
pub async fn client_main(
    common: &Common,
    mp: &MpArgs,
    server: SocketAddr,
    workload: Workload,
    link: Option<Link>,
    shaped: bool,
) -> (Metrics, Result<(), String>) {
    let mut m = app::metrics_header(common, &workload);
    let paths = mp.client_paths(server);
    m.multipath = Some(MultipathInfo {
        scheduler: mp.scheduler.to_string(),
        fec_blocks: mp.fec_blocks.to_string(),
        repair_path: mp.repair_path.to_string(),
        paths_requested: paths.len(),
        paths_established: 0,
        blocks_with_losses: 0,
    });
    let socket = match bind(common, mp, unspecified(server, 0), paths[0].0, link, shaped) {
        Ok(s) => s,
        Err(e) => return (m, Err(e)),
    };
    let crypto = match tls::client_rustls()
        .and_then(|c| noq::crypto::rustls::QuicClientConfig::try_from(c).map_err(|e| e.to_string()))
    {
        Ok(c) => c,
        Err(e) => return (m, Err(e)),
    };
    let endpoint = match Endpoint::new_with_abstract_socket(
        EndpointConfig::default(),
        None,
        socket.handle(),
        Arc::new(noq::TokioRuntime),
    ) {
        Ok(e) => e,
        Err(e) => return (m, Err(format!("endpoint: {e}"))),
    };
    let mut client = ClientConfig::new(Arc::new(crypto));
    client.transport_config(Arc::new(transport(common, mp)));
    endpoint.set_default_client_config(client);
    let res = match tokio::time::timeout(
        common.timeout(),
        run_client(&endpoint, &socket, &paths, workload, mp.keepalive(), &mut m),
    )
    .await
    {
        Ok(r) => r,
        Err(_) => Err(format!("timeout after {} s", common.timeout)),
    };
    endpoint.close(0u32.into(), b"bye");
    if res.is_err() {
        let _ = tokio::time::timeout(Duration::from_secs(1), endpoint.wait_idle()).await;
    }
    (m, res)
}
