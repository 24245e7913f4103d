//! The application protocol: each request is one line on a new bidirectional stream.
//!   `download SIZE`                       -> SIZE bytes of a known pattern, then FIN
//!   `messages MODE RATE PACKETS DURATION` -> the real-time workload (see messages.rs)
//!   `stats`                               -> the server's SideStats for this connection (JSON)

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use quinn::{Connection, Endpoint};

use crate::config::Common;
use crate::messages;
use crate::metrics::{Metrics, SideStats};
use crate::quic::{QuicConn, QuicRecv, QuicSend};
use crate::socket::FecSocket;

/// Byte at `offset` of every download: position-dependent, so a misplaced chunk is detected.
pub fn pattern_byte(offset: u64) -> u8 {
    (offset ^ (offset >> 8) ^ (offset >> 16) ^ (offset >> 24)) as u8
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Workload {
    Download { size: u64 },
    Messages(messages::Params),
}

impl Workload {
    pub fn name(&self) -> &'static str {
        match self {
            Workload::Download { .. } => "download",
            Workload::Messages(_) => "messages",
        }
    }
}

// ---------------------------------------------------------------- server

/// The server's reply to a `stats` request on a connection: its SideStats as JSON, after the
/// transfer's tail repairs were sent. Given by the stack's adapter.
pub type StatsFn = Arc<dyn Fn() -> Result<Vec<u8>, String> + Send + Sync>;

/// Accept connections until the endpoint is closed (quinn).
pub async fn serve(endpoint: Endpoint, socket: Arc<FecSocket>) {
    while let Some(incoming) = endpoint.accept().await {
        let socket = socket.clone();
        tokio::spawn(async move {
            if let Ok(conn) = incoming.await {
                socket.track_connection(&conn);
                let stats = stats_fn(&conn, socket);
                serve_connection(conn, stats).await;
            }
        });
    }
}

/// The `stats` reply of a quinn connection over `socket`.
pub fn stats_fn(conn: &Connection, socket: Arc<FecSocket>) -> StatsFn {
    let conn = conn.clone();
    Arc::new(move || {
        // The transfer is over: send the repairs of its partial last block now rather than when
        // the idle timer would, so `repair_sent` includes the tail protection the transfer
        // triggered (they are on the wire before the reply is).
        socket.flush_peer(conn.remote_address());
        serde_json::to_vec(&SideStats::of_peer(&conn, &socket)).map_err(|e| e.to_string())
    })
}

/// Serve the requests of one connection until it ends.
pub async fn serve_connection<C: QuicConn>(conn: C, stats: StatsFn) {
    while let Some((send, recv)) = conn.accept_bi().await {
        let conn = conn.clone();
        let stats = stats.clone();
        tokio::spawn(async move {
            if let Err(e) = serve_request(&conn, &stats, send, recv).await {
                eprintln!("fecq server: {}: {e}", conn.remote_address());
            }
        });
    }
}

async fn serve_request<C: QuicConn>(
    conn: &C,
    stats: &StatsFn,
    mut send: C::Send,
    mut recv: C::Recv,
) -> Result<(), String> {
    let req = recv
        .read_to_end(256)
        .await
        .map_err(|e| format!("request: {e}"))?;
    let line = String::from_utf8_lossy(&req);
    let words: Vec<&str> = line.split_whitespace().collect();
    match words.as_slice() {
        ["download", size] => {
            let size: u64 = size.parse().map_err(|_| format!("bad size {size:?}"))?;
            let mut offset = 0u64;
            let mut chunk = Vec::with_capacity(64 * 1024);
            while offset < size {
                let n = (size - offset).min(64 * 1024);
                chunk.clear();
                chunk.extend((offset..offset + n).map(pattern_byte));
                send.write_all(&chunk).await?;
                offset += n;
            }
            send.finish()
        }
        ["messages", rest @ ..] => {
            let params = messages::Params::parse_request(rest)?;
            messages::send(conn, &mut send, params).await
        }
        ["stats"] => {
            let text = stats()?;
            send.write_all(&text).await?;
            send.finish()
        }
        _ => {
            send.reset(1);
            Err(format!("unknown request {line:?}"))
        }
    }
}

// ---------------------------------------------------------------- client

/// Fill `m` with the metrics header (what was asked).
pub fn metrics_header(common: &Common, workload: &Workload) -> Metrics {
    Metrics {
        workload: workload.name().to_string(),
        fec: common.fec.to_string(),
        signal: common.signal.to_string(),
        cc: common.cc.to_string(),
        size: match workload {
            Workload::Download { size } => Some(*size),
            Workload::Messages(_) => None,
        },
        ..Default::default()
    }
}

/// Connect, run the workload, fetch the server's counters, close. On error, `m.error` says why
/// and whatever was measured so far stays in `m`.
pub async fn run_client(
    endpoint: &Endpoint,
    socket: &FecSocket,
    server: SocketAddr,
    workload: Workload,
    idle_timeout: Duration,
    m: &mut Metrics,
) -> Result<(), String> {
    let t0 = Instant::now();
    let conn = endpoint
        .connect(server, "localhost")
        .map_err(|e| format!("connect: {e}"))?
        .await
        .map_err(|e| format!("handshake: {e}"))?;
    m.handshake_ms = Some(ms(t0.elapsed()));
    socket.track_connection(&conn);
    let result = run_workload(&conn, workload, m)
        .await
        .map_err(|e| explain_lost_connection(e, &conn, socket, idle_timeout));
    // Counters are fetched even after a failed workload, if the connection still works.
    let sender = fetch_server_stats(&conn).await;
    let receiver = SideStats::of_peer(&conn, socket);
    match sender {
        Ok(s) => m.set_transport(s, receiver),
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

/// Application close without waiting for the draining period: the server has answered the
/// `stats` request, so everything both sides need was delivered; waiting for 3 PTOs (what
/// `Endpoint::wait_idle` does, ~0.25 s on a 20 ms path) would only delay the exit. Returns once
/// the CONNECTION_CLOSE packet has gone to the socket (quinn counts a datagram in `udp_tx` under
/// the connection lock it holds while handing it to the socket), or after `CLOSE_SEND_CAP`.
/// If that packet is lost, the server's connection ends at its idle timeout (or with the server).
async fn close_now(conn: &Connection, code: u32, reason: &[u8]) {
    const CLOSE_SEND_CAP: Duration = Duration::from_millis(100);
    let before = conn.stats().udp_tx.datagrams;
    conn.close(code.into(), reason);
    let deadline = Instant::now() + CLOSE_SEND_CAP;
    while conn.stats().udp_tx.datagrams == before && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
}

/// Run the workload on an established connection (any stack), filling `m`.
pub async fn run_workload<C: QuicConn>(
    conn: &C,
    workload: Workload,
    m: &mut Metrics,
) -> Result<(), String> {
    let t_req = Instant::now();
    match workload {
        Workload::Download { size } => {
            let (mut send, mut recv) = conn.open_bi().await?;
            send.write_all(format!("download {size}\n").as_bytes())
                .await
                .map_err(|e| format!("request: {e}"))?;
            send.finish().map_err(|e| format!("request: {e}"))?;
            let mut received = 0u64;
            loop {
                match recv.read_chunk(64 * 1024).await {
                    Ok(Some(bytes)) => {
                        if let Some(i) = bytes
                            .iter()
                            .enumerate()
                            .position(|(i, &b)| b != pattern_byte(received + i as u64))
                        {
                            return Err(format!("corrupt byte at offset {}", received + i as u64));
                        }
                        received += bytes.len() as u64;
                        m.bytes_app = received;
                    }
                    Ok(None) => break,
                    Err(e) => return Err(format!("read after {received} bytes: {e}")),
                }
            }
            if received != size {
                return Err(format!("incomplete download: {received} of {size} bytes"));
            }
            m.dct_ms = Some(ms(t_req.elapsed()));
        }
        Workload::Messages(params) => {
            let (report, bytes, res) = messages::receive(conn, params).await;
            m.bytes_app = bytes;
            m.messages = Some(report);
            res?;
            m.dct_ms = Some(ms(t_req.elapsed()));
        }
    }
    Ok(())
}

/// quinn reports a read on a lost connection as "connection lost": say why it was lost, from
/// the connection's close reason. An idle timeout is silent (nothing is sent, the peer may
/// still be there): it ends a connection whose packets stopped getting through for the idle
/// timeout, e.g. when a long loss burst outlasts the exponentially backed-off probe timeouts.
fn explain_lost_connection(
    error: String,
    conn: &Connection,
    socket: &FecSocket,
    idle_timeout: Duration,
) -> String {
    match conn.close_reason() {
        Some(quinn::ConnectionError::TimedOut) => {
            let silent = socket
                .last_received(conn.remote_address())
                .map(|t| format!("{:.1} s", t.elapsed().as_secs_f64()))
                .unwrap_or_else(|| "ever".to_string());
            format!(
                "{error}: connection timed out: no packet received from the server for {silent} \
                 (idle timeout {} s)",
                idle_timeout.as_secs_f64()
            )
        }
        Some(reason) if error.ends_with("connection lost") => format!("{error}: {reason}"),
        _ => error,
    }
}

/// Ask the server for its view of the connection (the `stats` request).
pub async fn fetch_server_stats<C: QuicConn>(conn: &C) -> Result<SideStats, String> {
    let (mut send, mut recv) = conn.open_bi().await?;
    send.write_all(b"stats\n")
        .await
        .map_err(|e| format!("request: {e}"))?;
    send.finish().map_err(|e| format!("request: {e}"))?;
    let body = recv.read_to_end(1 << 20).await?;
    serde_json::from_slice(&body).map_err(|e| format!("bad stats reply: {e}"))
}

pub fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// How the error of a run that reached `--timeout` begins (the CLI exits with 124 then).
pub const TIMEOUT_PREFIX: &str = "timeout after ";

/// Client role: run a workload against a server, with the overall timeout, and write metrics.
pub async fn client_main(
    common: &Common,
    server: SocketAddr,
    bind: SocketAddr,
    workload: Workload,
    loss: Option<crate::loss::LossProcess>,
) -> (Metrics, Result<(), String>) {
    let mut m = metrics_header(common, &workload);
    let (endpoint, socket) = match common.client_endpoint(bind, loss) {
        Ok(x) => x,
        Err(e) => return (m, Err(e)),
    };
    let res = match tokio::time::timeout(
        common.timeout(),
        run_client(
            &endpoint,
            &socket,
            server,
            workload,
            Duration::from_secs_f64(common.idle_timeout),
            &mut m,
        ),
    )
    .await
    {
        Ok(r) => r,
        Err(_) => Err(format!("{TIMEOUT_PREFIX}{} s", common.timeout)),
    };
    endpoint.close(0u32.into(), b"bye");
    if res.is_err() {
        // The connection may still be open (timeout): give its close a chance to go out.
        let _ = tokio::time::timeout(Duration::from_secs(1), endpoint.wait_idle()).await;
    }
    (m, res)
}
