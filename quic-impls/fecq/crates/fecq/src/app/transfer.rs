//! Client-sent data: the `upload` and request/response (`exchange`) requests of the application
//! protocol (app.rs). Every byte a side sends is the position-dependent pattern (crate::app::pattern,
//! from offset 0 on each stream) and the receiving side checks every byte.
//!
//!   `upload SIZE\n` + SIZE bytes, FIN   -> the server checks them, then replies `ok SIZE\n`, FIN
//!                                          (or `error WHY\n`, FIN: corrupt byte, short or long)
//!   `exchange REQ RESP\n` + REQ bytes, FIN -> the server checks them, then sends RESP bytes, FIN
//!                                          (a bad request: the stream is reset, code 2)
//!
//! Times (client side, `Instant`): an upload's DCT starts when the client opens its stream, just
//! before it writes the request line and the first data byte (opening a stream is local: the
//! handshake gave the stream credit, nothing waits for the network), and ends when the server's
//! confirmation has been read to its FIN. An exchange's time likewise runs from opening its
//! stream to the response's FIN; exchanges are sequential (the next stream is opened after the
//! previous response ended). A page load (page.rs) makes its downloads exchanges, concurrently.

use crate::app::pattern::{receive_pattern, send_pattern};
use crate::options::metrics::{ms, ExchangeReport};
use crate::quic::{QuicConn, QuicRecv, QuicSend};

/// The stream reset code of a request the server refused (corrupt, short or long data).
pub const RESET_BAD_REQUEST: u32 = 2;

/// Request/response workload: `exchanges` sequential exchanges of `request` bytes from the client
/// and `response` bytes from the server, on one connection.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ReqResp {
    pub exchanges: u32,
    pub request: u64,
    pub response: u64,
}

impl ReqResp {
    pub fn check(&self) -> Result<(), String> {
        if self.exchanges == 0 || self.exchanges > 100_000 {
            return Err(format!(
                "--exchanges {} must be in 1..=100000",
                self.exchanges
            ));
        }
        Ok(())
    }
}

fn parse_size(word: &str) -> Result<u64, String> {
    word.parse().map_err(|_| format!("bad size {word:?}"))
}

// ---------------------------------------------------------------- server

/// `upload SIZE`: check the data, then confirm (`ok SIZE`) or say why not (`error …`).
pub async fn serve_upload<S: QuicSend, R: QuicRecv>(
    send: &mut S,
    recv: &mut R,
    size: &str,
    first: &[u8],
) -> Result<(), String> {
    let size = parse_size(size)?;
    match receive_pattern(recv, first, size, |_| {}).await {
        Ok(n) => {
            send.write_all(format!("ok {n}\n").as_bytes()).await?;
            send.finish()
        }
        Err(e) => {
            let _ = send.write_all(format!("error {e}\n").as_bytes()).await;
            let _ = send.finish();
            Err(format!("upload of {size} bytes: {e}"))
        }
    }
}

/// `exchange REQ RESP`: check the request's REQ bytes, then send RESP bytes.
pub async fn serve_exchange<S: QuicSend, R: QuicRecv>(
    send: &mut S,
    recv: &mut R,
    request: &str,
    response: &str,
    first: &[u8],
) -> Result<(), String> {
    let (request, response) = (parse_size(request)?, parse_size(response)?);
    if let Err(e) = receive_pattern(recv, first, request, |_| {}).await {
        send.reset(RESET_BAD_REQUEST);
        return Err(format!("exchange request of {request} bytes: {e}"));
    }
    send_pattern(send, response).await?;
    send.finish()
}

// ---------------------------------------------------------------- client

/// Upload `size` bytes and wait for the server's confirmation; the bytes confirmed.
pub async fn upload<C: QuicConn>(conn: &C, size: u64) -> Result<u64, String> {
    let (mut send, mut recv) = conn.open_bi().await?;
    send.write_all(format!("upload {size}\n").as_bytes())
        .await
        .map_err(|e| format!("request: {e}"))?;
    send_pattern(&mut send, size)
        .await
        .map_err(|e| format!("upload: {e}"))?;
    send.finish().map_err(|e| format!("upload: {e}"))?;
    let reply = recv
        .read_to_end(1024)
        .await
        .map_err(|e| format!("upload confirmation: {e}"))?;
    let reply = String::from_utf8_lossy(&reply);
    if reply.trim_end() != format!("ok {size}") {
        return Err(format!(
            "server did not confirm the upload: {}",
            reply.trim_end()
        ));
    }
    Ok(size)
}

/// The exchanges one after the other; `report` gets the time of each one completed (kept when
/// a later one fails).
pub async fn exchanges<C: QuicConn>(
    conn: &C,
    p: ReqResp,
    report: &mut ExchangeReport,
) -> Result<(), String> {
    for i in 0..p.exchanges {
        let t0 = std::time::Instant::now();
        exchange(conn, p.request, p.response, |_| {})
            .await
            .map_err(|e| format!("exchange {} of {}: {e}", i + 1, p.exchanges))?;
        report.record(ms(t0.elapsed()));
    }
    Ok(())
}

/// One exchange on a new stream: `request` bytes up, `response` bytes down, both checked;
/// `progress` gets the response's verified byte count as it grows (page.rs notes a first byte).
pub async fn exchange<C: QuicConn>(
    conn: &C,
    request: u64,
    response: u64,
    progress: impl FnMut(u64),
) -> Result<(), String> {
    let (mut send, mut recv) = conn.open_bi().await?;
    send.write_all(format!("exchange {request} {response}\n").as_bytes())
        .await
        .map_err(|e| format!("request: {e}"))?;
    send_pattern(&mut send, request)
        .await
        .map_err(|e| format!("request: {e}"))?;
    send.finish().map_err(|e| format!("request: {e}"))?;
    receive_pattern(&mut recv, &[], response, progress)
        .await
        .map_err(|e| format!("response: {e}"))?;
    Ok(())
}
