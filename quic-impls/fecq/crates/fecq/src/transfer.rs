//! Client-sent data: the `upload` and request/response (`exchange`) requests of the application
//! protocol (app.rs). Every byte a side sends is the position-dependent pattern
//! (`app::pattern_byte`, from offset 0 on each stream) and the receiving side checks every byte.
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
//! previous response ended).

use serde::Serialize;

use crate::app::{ms, pattern_byte};
use crate::metrics::Metrics;
use crate::quic::{QuicConn, QuicRecv, QuicSend};

/// The stream reset code of a request the server refused (corrupt, short or long data).
pub const RESET_BAD_REQUEST: u32 = 2;
const CHUNK: usize = 64 * 1024;

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

/// What a request/response run reports (flattened into the metrics JSON).
#[derive(Clone, Debug, Default, Serialize, PartialEq)]
pub struct ExchangeReport {
    /// Exchanges asked for, request and response sizes in bytes.
    pub exchanges: u32,
    pub request: u64,
    pub response: u64,
    /// Exchanges completed (request verified by the server, response verified by the client).
    pub exchanges_done: u32,
    /// Each completed exchange's time, in order: stream opened -> response's FIN read.
    pub exchange_ms: Vec<f64>,
    /// Median (mean of the middle two for an even count) and 95th percentile (nearest rank:
    /// the ceil(0.95 n)-th smallest) of `exchange_ms`; null before the first exchange completes.
    pub exchange_median_ms: Option<f64>,
    pub exchange_p95_ms: Option<f64>,
}

impl ExchangeReport {
    fn record(&mut self, t_ms: f64) {
        self.exchange_ms.push(t_ms);
        self.exchanges_done = self.exchange_ms.len() as u32;
        self.exchange_median_ms = median(&self.exchange_ms);
        self.exchange_p95_ms = nearest_rank(&self.exchange_ms, 0.95);
    }
}

pub fn median(values: &[f64]) -> Option<f64> {
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    let n = v.len();
    match n {
        0 => None,
        _ if n % 2 == 1 => Some(v[n / 2]),
        _ => Some((v[n / 2 - 1] + v[n / 2]) / 2.0),
    }
}

/// The ceil(q n)-th smallest value (q in (0, 1]).
pub fn nearest_rank(values: &[f64], q: f64) -> Option<f64> {
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    if v.is_empty() {
        return None;
    }
    let rank = ((q * v.len() as f64).ceil() as usize).clamp(1, v.len());
    Some(v[rank - 1])
}

/// The offset of the first byte of `data` that is not the pattern, `data` starting at `offset`.
pub fn first_mismatch(offset: u64, data: &[u8]) -> Option<u64> {
    data.iter()
        .enumerate()
        .position(|(i, &b)| b != pattern_byte(offset + i as u64))
        .map(|i| offset + i as u64)
}

/// Write `size` bytes of the pattern (from offset 0).
pub async fn send_pattern<S: QuicSend>(send: &mut S, size: u64) -> Result<(), String> {
    let mut offset = 0u64;
    let mut chunk = Vec::with_capacity(CHUNK);
    while offset < size {
        let n = (size - offset).min(CHUNK as u64);
        chunk.clear();
        chunk.extend((offset..offset + n).map(pattern_byte));
        send.write_all(&chunk).await?;
        offset += n;
    }
    Ok(())
}

/// Checks a stream that must carry exactly `size` bytes of the pattern, fed chunk by chunk.
#[derive(Debug)]
pub struct PatternCheck {
    size: u64,
    pub received: u64,
}

impl PatternCheck {
    pub fn new(size: u64) -> Self {
        PatternCheck { size, received: 0 }
    }

    /// The next bytes in order: an error at the first wrong byte or a byte past `size`.
    pub fn feed(&mut self, data: &[u8]) -> Result<(), String> {
        if let Some(at) = first_mismatch(self.received, data) {
            if at < self.size {
                return Err(format!("corrupt byte at offset {at}"));
            }
        }
        if self.received + data.len() as u64 > self.size {
            return Err(format!("more than the announced {} bytes", self.size));
        }
        self.received += data.len() as u64;
        Ok(())
    }

    /// The end of the stream: an error if it came early.
    pub fn end(&self) -> Result<u64, String> {
        if self.received != self.size {
            return Err(format!(
                "stream ended after {} of {} bytes",
                self.received, self.size
            ));
        }
        Ok(self.received)
    }
}

/// Read a stream to its end, checking it carries exactly `size` pattern bytes; `first` are bytes
/// of it already read (after a request line); `progress` gets the verified count as it grows.
pub async fn receive_pattern<R: QuicRecv>(
    recv: &mut R,
    first: &[u8],
    size: u64,
    mut progress: impl FnMut(u64),
) -> Result<u64, String> {
    let mut check = PatternCheck::new(size);
    check.feed(first)?;
    loop {
        match recv.read_chunk(CHUNK).await {
            Ok(Some(bytes)) => {
                check.feed(&bytes)?;
                progress(check.received);
            }
            Ok(None) => return check.end(),
            Err(e) => return Err(format!("read after {} bytes: {e}", check.received)),
        }
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

/// Upload `size` bytes and wait for the server's confirmation; `bytes_app` is set once confirmed.
pub async fn upload<C: QuicConn>(conn: &C, size: u64, m: &mut Metrics) -> Result<(), String> {
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
    m.bytes_app = size;
    Ok(())
}

/// The exchanges one after the other; `m.exchanges` holds the times of those completed (kept
/// when a later one fails) and `bytes_app` their bytes (requests and responses, all verified).
pub async fn exchanges<C: QuicConn>(conn: &C, p: ReqResp, m: &mut Metrics) -> Result<(), String> {
    m.exchanges = Some(ExchangeReport {
        exchanges: p.exchanges,
        request: p.request,
        response: p.response,
        ..Default::default()
    });
    for i in 0..p.exchanges {
        let t0 = std::time::Instant::now();
        exchange(conn, p)
            .await
            .map_err(|e| format!("exchange {} of {}: {e}", i + 1, p.exchanges))?;
        let t = ms(t0.elapsed());
        m.bytes_app += p.request + p.response;
        if let Some(report) = m.exchanges.as_mut() {
            report.record(t);
        }
    }
    Ok(())
}

async fn exchange<C: QuicConn>(conn: &C, p: ReqResp) -> Result<(), String> {
    let (mut send, mut recv) = conn.open_bi().await?;
    send.write_all(format!("exchange {} {}\n", p.request, p.response).as_bytes())
        .await
        .map_err(|e| format!("request: {e}"))?;
    send_pattern(&mut send, p.request)
        .await
        .map_err(|e| format!("request: {e}"))?;
    send.finish().map_err(|e| format!("request: {e}"))?;
    receive_pattern(&mut recv, &[], p.response, |_| {})
        .await
        .map_err(|e| format!("response: {e}"))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pattern(from: u64, n: u64) -> Vec<u8> {
        (from..from + n).map(pattern_byte).collect()
    }

    #[test]
    fn pattern_check_accepts_exact_data_in_any_chunking() {
        let data = pattern(0, 70_000);
        for cut in [0usize, 1, 255, 256, 65_536, 69_999, 70_000] {
            let mut c = PatternCheck::new(70_000);
            c.feed(&data[..cut]).unwrap();
            c.feed(&data[cut..]).unwrap();
            assert_eq!(c.end(), Ok(70_000));
        }
    }

    #[test]
    fn pattern_check_names_the_corrupt_byte() {
        for at in [0usize, 1, 300, 49_999] {
            let mut data = pattern(0, 50_000);
            data[at] ^= 0x01;
            let mut c = PatternCheck::new(50_000);
            let err = c
                .feed(&data[..1000.min(at + 1)])
                .and_then(|_| c.feed(&data[1000.min(at + 1)..]));
            assert_eq!(err, Err(format!("corrupt byte at offset {at}")));
        }
    }

    #[test]
    fn pattern_check_refuses_short_and_long_streams() {
        let mut c = PatternCheck::new(100);
        c.feed(&pattern(0, 99)).unwrap();
        assert_eq!(c.end(), Err("stream ended after 99 of 100 bytes".into()));
        let mut c = PatternCheck::new(100);
        assert_eq!(
            c.feed(&pattern(0, 101)),
            Err("more than the announced 100 bytes".into())
        );
    }

    #[test]
    fn median_and_nearest_rank_p95() {
        assert_eq!(median(&[]), None);
        assert_eq!(median(&[3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), Some(2.5));
        let v: Vec<f64> = (1..=20).map(f64::from).collect();
        assert_eq!(nearest_rank(&v, 0.95), Some(19.0));
        assert_eq!(nearest_rank(&v[..10], 0.95), Some(10.0));
        assert_eq!(nearest_rank(&[7.0], 0.95), Some(7.0));
    }
}
