//! The application protocol: each request is one line on a new bidirectional stream.
//!   `download SIZE`                       -> SIZE bytes of a known pattern, then FIN
//!   `upload SIZE` + SIZE pattern bytes    -> `ok SIZE` once all were checked (transfer.rs)
//!   `exchange REQ RESP` + REQ pattern bytes -> RESP pattern bytes (request/response, transfer.rs)
//!   `messages MODE RATE PACKETS DURATION` -> the real-time workload (see messages.rs)
//!   `stats`                               -> the server's SideStats for this connection (JSON)
//! A page load (page.rs) is `exchange` requests on concurrent streams, as its graph starts them.
//!
//! Both sides are generic over the QUIC stack (crate::quic); the roles that set up endpoints and
//! connections are crate::run.

pub mod messages;
pub mod page;
pub mod pattern;
pub mod transfer;

use std::sync::Arc;
use std::time::Instant;

use crate::options::config::Common;
use crate::options::metrics::{ms, ExchangeReport, Metrics, SideStats};
use crate::quic::{QuicConn, QuicRecv, QuicSend};
use pattern::{first_mismatch, send_pattern};
use transfer::ReqResp;

#[derive(Clone, Debug, PartialEq)]
pub enum Workload {
    Download { size: u64 },
    Messages(messages::Params),
    Upload { size: u64 },
    ReqResp(ReqResp),
    Page(Arc<page::Page>),
}

impl Workload {
    pub fn name(&self) -> &'static str {
        match self {
            Workload::Download { .. } => "download",
            Workload::Messages(_) => "messages",
            Workload::Upload { .. } => "upload",
            Workload::ReqResp(_) => "reqresp",
            Workload::Page(_) => "page",
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
/// transfer's tail repairs were sent (crate::run::stats_fn).
pub type StatsFn = Arc<dyn Fn() -> Result<Vec<u8>, String> + Send + Sync>;

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
            send_pattern(&mut send, size).await?;
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
        fec_protect: common.fec_protect.to_string(),
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
            Workload::Messages(_) | Workload::ReqResp(_) | Workload::Page(_) => None,
        },
        ..Default::default()
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
                        if let Some(at) = first_mismatch(received, &bytes) {
                            return Err(format!("corrupt byte at offset {at}"));
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
            m.bytes_app = transfer::upload(conn, size).await?;
            m.dct_ms = Some(ms(t_req.elapsed()));
        }
        Workload::ReqResp(p) => {
            let report =
                m.exchanges
                    .insert(ExchangeReport::new(p.exchanges, p.request, p.response));
            let res = transfer::exchanges(conn, p, report).await;
            // The bytes of the exchanges completed, requests and responses, all verified.
            m.bytes_app = u64::from(report.exchanges_done) * (p.request + p.response);
            res?;
            m.dct_ms = Some(ms(t_req.elapsed()));
        }
        Workload::Page(graph) => {
            // The report and bytes_app (the downloads ended, all verified) fill in as the load
            // goes, so a failure or a timeout keeps what happened.
            let report = m.page.insert(graph.report());
            page::load(conn, &graph, report, &mut m.bytes_app).await?;
            // dct_ms: the page load time (the load activity's end), not the last byte's arrival.
            m.dct_ms = report.load_ms;
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

/// How the error of a run that reached `--timeout` begins (the CLI exits with 124 then).
pub const TIMEOUT_PREFIX: &str = "timeout after ";
