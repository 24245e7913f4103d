//! The roles, written once for both QUIC stacks (crate::stack): a server that serves every
//! connection until it is stopped, and a client that connects, opens its paths, runs one
//! workload (crate::app), fetches the server's counters and closes.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::app::{self, StatsFn, Workload, TIMEOUT_PREFIX};
use crate::layer::LayerConfig;
use crate::link::Link;
use crate::options::config::Common;
use crate::options::metrics::{ms, path_reports, Metrics};
use crate::options::multipath::MpArgs;
use crate::options::qlog::{self, Logs};
use crate::options::transport::QUIC_MTU;
use crate::quic::{Closed, QuicConn, QuicEndpoint};
use crate::socket::{FecSocket, SocketConfig};
use crate::stack::{SocketOf, Stack};
use crate::stop::{Stop, STOPPED_PREFIX};

/// Where a client binds and the paths it opens.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClientSetup {
    pub bind: SocketAddr,
    /// Path i: (local address, server address); path 1 is the connection's first (its local
    /// address, when given, is also the source of the datagrams the stack sends without one).
    pub paths: Vec<(Option<IpAddr>, SocketAddr)>,
}

impl ClientSetup {
    /// One path to `server`, from `bind` (None: any address of the server's family, any port).
    pub fn single(server: SocketAddr, bind: Option<SocketAddr>) -> Self {
        ClientSetup {
            bind: bind.unwrap_or_else(|| unspecified(server, 0)),
            paths: vec![(None, server)],
        }
    }

    /// One path per `--local-addresses` entry (crate::options::multipath), from a socket on the wildcard
    /// address: each path's datagrams carry their own source address.
    pub fn multipath(mp: &MpArgs, server: SocketAddr) -> Self {
        ClientSetup {
            bind: unspecified(server, 0),
            paths: mp.client_paths(server),
        }
    }
}

/// The wildcard address of `like`'s family, at `port`.
pub fn unspecified(like: SocketAddr, port: u16) -> SocketAddr {
    match like {
        SocketAddr::V4(_) => SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), port),
        SocketAddr::V6(_) => SocketAddr::new(IpAddr::V6(Ipv6Addr::UNSPECIFIED), port),
    }
}

/// The socket of an endpoint of `stack` with `common`'s FEC options.
fn socket_config<S: Stack>(
    stack: &S,
    common: &Common,
    default_local: Option<IpAddr>,
    server: bool,
) -> Result<SocketConfig, String> {
    let multipath = stack.multipath();
    let qlog = Logs::new(&common.capture, server, multipath.is_some())?;
    Ok(SocketConfig {
        layer: LayerConfig {
            scheme: common.fec,
            signal: common.signal,
            flush_after: common.flush_after(),
            max_payload: usize::from(QUIC_MTU),
            multipath,
            // Tail mode is single-path (the options refuse it with --multipath).
            tail: if multipath.is_some() {
                None
            } else {
                common.tail.cap()
            },
            protect: common.fec_protect,
        },
        rcvbuf: common.rcvbuf,
        sndbuf: common.sndbuf,
        default_local,
        qlog,
        test_send_delay: Duration::from_micros(common.test_send_delay_us),
        test_ignore_repairs: common.test_ignore_repairs,
        test_recovery_delay: Duration::from_micros(common.test_recovery_delay_us),
    })
}

// ---------------------------------------------------------------- server

/// A server endpoint at `listen`; with multipath framing, on the wildcard address at `listen`'s
/// port, so that every per-path server address reaches it. `link`: `fecq loopback`'s.
pub fn server_endpoint<S: Stack>(
    stack: &S,
    common: &Common,
    listen: SocketAddr,
    link: Option<Link>,
) -> Result<(S::Endpoint, Arc<SocketOf<S>>), String> {
    let addr = match stack.multipath() {
        Some(_) => unspecified(listen, listen.port()),
        None => listen,
    };
    let socket = FecSocket::bind(addr, socket_config(stack, common, None, true)?, link)?;
    let endpoint = stack.endpoint(common, &socket, true)?;
    Ok((endpoint, socket))
}

/// Accept connections until the endpoint is closed.
pub async fn serve<S: Stack>(stack: Arc<S>, endpoint: S::Endpoint, socket: Arc<SocketOf<S>>) {
    while let Some(handshake) = stack.accept(&endpoint, &socket).await {
        let (stack, socket) = (stack.clone(), socket.clone());
        tokio::spawn(async move {
            if let Ok(conn) = handshake.await {
                socket.track_connection(&conn);
                stack.server_connected(&conn);
                let stats = stats_fn::<S>(&conn, socket.clone());
                app::serve_connection(conn, stats).await;
            }
            if socket.qlog().is_some() {
                qlog::flush_all();
            }
        });
    }
}

/// The `stats` reply of a connection over `socket`.
pub fn stats_fn<S: Stack>(conn: &S::Conn, socket: Arc<SocketOf<S>>) -> StatsFn {
    let conn = conn.clone();
    Arc::new(move || {
        // The transfer is over: send the repairs of its partial last blocks now rather than when
        // the idle timer would, so `repair_sent` includes the tail protection the transfer
        // triggered (they are on the wire before the reply is).
        socket.transfer_over(conn.remote_address());
        socket.flush_peer(conn.remote_address());
        serde_json::to_vec(&S::side_stats(&conn, &socket)).map_err(|e| e.to_string())
    })
}

// ---------------------------------------------------------------- client

/// A client endpoint as `setup` says.
pub fn client_endpoint<S: Stack>(
    stack: &S,
    common: &Common,
    setup: &ClientSetup,
    link: Option<Link>,
) -> Result<(S::Endpoint, Arc<SocketOf<S>>), String> {
    let socket = FecSocket::bind(
        setup.bind,
        socket_config(stack, common, setup.paths[0].0, false)?,
        link,
    )?;
    let endpoint = stack.endpoint(common, &socket, false)?;
    Ok((endpoint, socket))
}

/// Client role: run a workload against a server, with the overall timeout; the metrics, written
/// by the caller. A `stop` ends the workload at once and the client `STOP_GRACE` later, with the
/// server's counters if they arrived by then (crate::stop).
pub async fn client_main<S: Stack>(
    stack: &S,
    common: &Common,
    setup: &ClientSetup,
    workload: Workload,
    link: Option<Link>,
    stop: &Stop,
) -> (Metrics, Result<(), String>) {
    let started = Instant::now();
    let mut m = app::metrics_header(common, &workload);
    m.multipath = stack.multipath_info(setup.paths.len());
    let (endpoint, socket) = match client_endpoint(stack, common, setup, link) {
        Ok(x) => x,
        Err(e) => return (m, Err(e)),
    };
    let run = tokio::time::timeout(
        common.timeout(),
        run_client(
            stack, &endpoint, &socket, setup, workload, common, &mut m, stop, started,
        ),
    );
    let res = tokio::select! {
        r = run => match r {
            Ok(r) => r,
            Err(_) => Err(format!("{TIMEOUT_PREFIX}{} s", common.timeout)),
        },
        _ = stop.grace_over() => Err(stopped(started)),
    };
    endpoint.close(0, b"bye");
    if res.is_err() {
        // The connection may still be open (timeout): give its close a chance to go out.
        let _ = tokio::time::timeout(Duration::from_secs(1), endpoint.wait_idle()).await;
    }
    if socket.qlog().is_some() {
        qlog::flush_all();
    }
    (m, res)
}

/// Connect, open the paths, run the workload (until done, or a stop), fetch the server's counters,
/// close. On error, `m.error` says why and whatever was measured so far stays in `m`.
#[allow(clippy::too_many_arguments)]
async fn run_client<S: Stack>(
    stack: &S,
    endpoint: &S::Endpoint,
    socket: &SocketOf<S>,
    setup: &ClientSetup,
    workload: Workload,
    common: &Common,
    m: &mut Metrics,
    stop: &Stop,
    started: Instant,
) -> Result<(), String> {
    let t0 = Instant::now();
    let server = setup.paths[0].1;
    let conn = endpoint.connect(server).await?;
    m.handshake_ms = Some(ms(t0.elapsed()));
    socket.track_connection(&conn);
    stack.client_connected(&conn, &setup.paths[1..]).await?;
    if let Some(info) = m.multipath.as_mut() {
        info.paths_established = S::open_paths(&conn);
    }
    // Everything before the workload's first request: what `dct_ms` leaves out (a multipath
    // client's wait for its paths included).
    m.setup_ms = Some(ms(started.elapsed()));
    let result = tokio::select! {
        r = app::run_workload(&conn, workload.clone(), m) => r.map_err(|e| {
            explain_lost_connection::<S>(e, &conn, socket, server, common.idle_timeout())
        }),
        _ = stop.requested() => {
            // Should the grace end before the server answers: the client's own counters now.
            m.client = Some(S::side_stats(&conn, socket));
            Err(stopped(t0))
        }
    };
    // Counters are fetched even after a failed workload, if the connection still works. The
    // client's are read on both sides of the server's (path reports keep the earlier count).
    let before_stats = S::side_stats(&conn, socket);
    socket.transfer_over(conn.remote_address());
    let sender = app::fetch_server_stats(&conn).await;
    let receiver = S::side_stats(&conn, socket);
    if let Some(info) = m.multipath.as_mut() {
        info.blocks_with_losses = socket.blocks_with_losses(conn.remote_address());
        m.paths = path_reports(&setup.paths, &before_stats, &receiver, sender.as_ref().ok());
    }
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

/// The error of a client stopped by a signal, `since` its start.
fn stopped(since: Instant) -> String {
    format!("{STOPPED_PREFIX}{:.1} s", since.elapsed().as_secs_f64())
}

/// Application close without waiting for the draining period: the server has answered the
/// `stats` request, so everything both sides need was delivered; waiting for 3 PTOs (what
/// `wait_idle` does, ~0.25 s on a 20 ms path) would only delay the exit. Returns once the
/// CONNECTION_CLOSE packet has gone to the socket (the stack counts a datagram as sent under the
/// connection lock it holds while handing it to the socket), or after `CLOSE_SEND_CAP`. If that
/// packet is lost, the server's connection ends at its idle timeout (or with the server).
async fn close_now<C: QuicConn>(conn: &C, code: u32, reason: &[u8]) {
    const CLOSE_SEND_CAP: Duration = Duration::from_millis(100);
    let before = conn.datagrams_sent();
    conn.close(code, reason);
    let deadline = Instant::now() + CLOSE_SEND_CAP;
    while conn.datagrams_sent() == before && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
}

/// The stacks report a read on a lost connection as "connection lost": say why it was lost,
/// from the connection's close reason. An idle timeout is silent (nothing is sent, the peer may
/// still be there): it ends a connection whose packets stopped getting through for the idle
/// timeout, e.g. when a long loss burst outlasts the exponentially backed-off probe timeouts.
fn explain_lost_connection<S: Stack>(
    error: String,
    conn: &S::Conn,
    socket: &SocketOf<S>,
    server: SocketAddr,
    idle_timeout: Duration,
) -> String {
    match conn.closed() {
        Some(Closed::TimedOut) => {
            let silent = socket
                .last_received(server)
                .map(|t| format!("{:.1} s", t.elapsed().as_secs_f64()))
                .unwrap_or_else(|| "ever".to_string());
            format!(
                "{error}: connection timed out: no packet received from the server for {silent} \
                 (idle timeout {} s)",
                idle_timeout.as_secs_f64()
            )
        }
        Some(Closed::Other(reason)) if error.ends_with("connection lost") => {
            format!("{error}: {reason}")
        }
        _ => error,
    }
}
