//! The application protocol: each request is one line on a new bidirectional stream.
//!   `download SIZE`                       -> SIZE bytes of a known pattern, then FIN
//!   `upload SIZE` + SIZE pattern bytes    -> `ok SIZE` once all were checked (transfer.rs)
//!   `exchange REQ RESP` + REQ pattern bytes -> RESP pattern bytes (request/response, transfer.rs)
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
use crate::transfer::{self, ReqResp};

/// Byte at `offset` of every download: position-dependent, so a misplaced chunk is detected.
pub fn pattern_byte(offset: u64) -> u8 {
    (offset ^ (offset >> 8) ^ (offset >> 16) ^ (offset >> 24)) as u8
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Workload {
    Download { size: u64 },
    Messages(messages::Params),
    Upload { size: u64 },
    ReqResp(ReqResp),
}

impl Workload {
    pub fn name(&self) -> &'static str {
        match self {
            Workload::Download { .. } => "download",
            Workload::Messages(_) => "messages",
            Workload::Upload { .. } => "upload",
            Workload::ReqResp(_) => "reqresp",
        }
    }

    /// Whether the client sends most of the data (uploads; exchanges whose requests are larger
    /// than their responses): the metrics' top-level transport keys then describe the client.
    pub fn client_sends(&self) -> bool {
        match self {
            Workload::Upload { .. } => true,
            Workload::ReqResp(p) => p.request > p.response,
            _ => false,
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
    let (line, first) = read_request_line(&mut recv).await?;
    let words: Vec<&str> = line.split_whitespace().collect();
    match words.as_slice() {
        ["upload", size] => transfer::serve_upload(&mut send, &mut recv, size, &first).await,
        ["exchange", request, response] => {
            transfer::serve_exchange(&mut send, &mut recv, request, response, &first).await
        }
        ["download", size] => {
            let size: u64 = size.parse().map_err(|_| format!("bad size {size:?}"))?;
            transfer::send_pattern(&mut send, size).await?;
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

/// A request's first line (without its `\n`; the whole stream if it ends first) and the bytes
/// after it that came with it (an upload's first data bytes).
async fn read_request_line<R: QuicRecv>(recv: &mut R) -> Result<(String, Vec<u8>), String> {
    const MAX_LINE: usize = 256;
    let mut buf = Vec::new();
    loop {
        if let Some(i) = buf.iter().position(|&b| b == b'\n') {
            let rest = buf.split_off(i + 1);
            buf.pop();
            return Ok((String::from_utf8_lossy(&buf).into_owned(), rest));
        }
        if buf.len() > MAX_LINE {
            return Err(format!(
                "request: no line end in its first {MAX_LINE} bytes"
            ));
        }
        match recv.read_chunk(64 * 1024).await {
            Ok(Some(bytes)) => buf.extend_from_slice(&bytes),
            Ok(None) => return Ok((String::from_utf8_lossy(&buf).into_owned(), Vec::new())),
            Err(e) => return Err(format!("request: {e}")),
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
        repair_cc: common.repair_cc.to_string(),
        initial_window: common.initial_window,
        max_window: common.max_window,
        reorder_packets: common.reorder_packets,
        reorder_time: common.reorder_time,
        ack_eliciting_threshold: common.ack_eliciting_threshold,
        max_ack_delay_ms: common.max_ack_delay,
        keepalive_s: common.keepalive,
        size: match workload {
            Workload::Download { size } | Workload::Upload { size } => Some(*size),
            Workload::Messages(_) | Workload::ReqResp(_) => None,
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
        Ok(s) => set_sides(m, &workload, s, receiver),
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
        Workload::Upload { size } => {
            // DCT: stream opened (t_req) -> the server's confirmation read (transfer.rs).
            transfer::upload(conn, size, m).await?;
            m.dct_ms = Some(ms(t_req.elapsed()));
        }
        Workload::ReqResp(p) => {
            transfer::exchanges(conn, p, m).await?;
            m.dct_ms = Some(ms(t_req.elapsed()));
        }
    }
    Ok(())
}

/// The sides' counters into the metrics: the top-level transport keys from the data sender (the
/// server, or the client when it sends most of the data), `sender`/`client` as they are.
pub fn set_sides(m: &mut Metrics, workload: &Workload, server: SideStats, client: SideStats) {
    if workload.client_sends() {
        m.set_transport_client_sends(server, client);
    } else {
        m.set_transport(server, client);
    }
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
