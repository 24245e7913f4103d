//! IO-free packet-level forward erasure correction for fecq.
//!
//! An [`Encoder`] turns each outgoing datagram into a framed *source* datagram (a 5-byte header:
//! kind, ECN bits, symbol id; see [`frame`]) and emits *repair* datagrams as the [`Scheme`]
//! requires; a datagram the caller does not want protected is sent *plain* ([`Encoder::pass`]:
//! a 1-byte header, no symbol, covered by no repair). A [`Decoder`] takes received datagrams in
//! any order, hands back every source payload once (and every plain one as received), and
//! recovers lost sources from repairs. Nothing here does IO or reads a clock: the caller
//! decides when to [`Encoder::flush`] a partial block.
//!
//! Codes: `none` (no header at all), XOR with interleaving, Reed-Solomon (n, k) via
//! `reed-solomon-erasure`, and a sliding-window random linear code over GF(2^8).

pub mod bench;
pub mod frame;
mod gf256;
mod linear;
mod rlc;
pub(crate) mod rs;
mod scheme;
mod window;
mod xor;

pub use scheme::Scheme;
pub use window::GIVEN_UP_KEPT;

use linear::{LinearDecoder, Rejected};
use rlc::RlcEncoder;
use rs::{RsDecoder, RsEncoder};
use window::Window;
use xor::XorEncoder;

/// Counters of an [`Encoder`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct EncoderStats {
    /// Source datagrams framed.
    pub source_sent: u64,
    /// Repair datagrams emitted.
    pub repair_sent: u64,
    /// Bytes of the repair datagrams (headers included).
    pub repair_bytes: u64,
    /// Calls to [`Encoder::flush`] that emitted repairs.
    pub flushes: u64,
    /// Datagrams sent plain ([`Encoder::pass`]): not source symbols.
    pub plain_sent: u64,
}

enum EncoderCode {
    None,
    Xor(XorEncoder),
    Rs(RsEncoder),
    Rlc(RlcEncoder),
}

/// The sending side of one connection direction.
pub struct Encoder {
    scheme: Scheme,
    code: EncoderCode,
    next_id: u32,
    stats: EncoderStats,
}

impl Encoder {
    /// `max_payload` is the largest source datagram the caller will protect. It is only a hint:
    /// repair sizes follow the datagrams actually sent (any length up to 65535 bytes works).
    pub fn new(scheme: Scheme, max_payload: usize) -> Self {
        let code = match scheme {
            Scheme::None => EncoderCode::None,
            Scheme::Xor { k, interleave } => {
                EncoderCode::Xor(XorEncoder::new(k.min(255) as u8, interleave.min(255) as u8))
            }
            Scheme::ReedSolomon { n, k } => EncoderCode::Rs(RsEncoder::new(n, k)),
            Scheme::Rlc { n, k, window } => EncoderCode::Rlc(RlcEncoder::new(n, k, window)),
        };
        let _ = max_payload; // symbols are sized per block from what is actually sent
        Encoder {
            scheme,
            code,
            next_id: 0,
            stats: EncoderStats::default(),
        }
    }

    pub fn scheme(&self) -> Scheme {
        self.scheme
    }

    /// Frame one outgoing datagram; pushes the framed source datagram, then any repair datagrams
    /// now due. `ecn` is the datagram's ECN codepoint (2 bits), carried in the header so that a
    /// recovered copy gets it back.
    pub fn protect(&mut self, payload: &[u8], ecn: u8, out: &mut Vec<Vec<u8>>) {
        self.stats.source_sent += 1;
        if let EncoderCode::None = self.code {
            out.push(payload.to_vec());
            return;
        }
        let id = self.next_id;
        self.next_id = self.next_id.wrapping_add(1);
        out.push(frame::source(id, ecn, payload));
        let before = out.len();
        match &mut self.code {
            EncoderCode::None => {}
            EncoderCode::Xor(x) => x.on_source(id, ecn, payload, out),
            EncoderCode::Rs(r) => r.on_source(id, ecn, payload, out),
            EncoderCode::Rlc(r) => r.on_source(id, ecn, payload, out),
        }
        self.count_repairs(&out[before..]);
    }

    /// Frame one outgoing datagram *without* protecting it: a plain datagram (1-byte header,
    /// [`frame::plain`]; with `none`, the payload as is). It is no source symbol: it takes no
    /// symbol id, no repair covers it, and it brings no repair due nor any closer.
    pub fn pass(&mut self, payload: &[u8], ecn: u8, out: &mut Vec<Vec<u8>>) {
        self.stats.plain_sent += 1;
        if let EncoderCode::None = self.code {
            out.push(payload.to_vec());
        } else {
            out.push(frame::plain(ecn, payload));
        }
    }

    /// Tail mode: frame one outgoing datagram and remember it for later repairs, emitting none
    /// now; [`Encoder::tail_repairs`] sends them when the sender goes quiet. Only the sliding-window
    /// code keeps a window to cover (see [`Scheme::supports_tail`]); the others frame the source
    /// and then behave as [`Encoder::protect`] does.
    pub fn protect_quiet(&mut self, payload: &[u8], ecn: u8, out: &mut Vec<Vec<u8>>) {
        let EncoderCode::Rlc(r) = &mut self.code else {
            return self.protect(payload, ecn, out);
        };
        self.stats.source_sent += 1;
        let id = self.next_id;
        self.next_id = self.next_id.wrapping_add(1);
        out.push(frame::source(id, ecn, payload));
        r.remember(id, ecn, payload);
    }

    /// Tail mode: emit `count` repairs over the last W source datagrams now (sliding-window code
    /// only; 0 for the others); returns how many were emitted.
    pub fn tail_repairs(&mut self, count: usize, out: &mut Vec<Vec<u8>>) -> usize {
        let EncoderCode::Rlc(r) = &mut self.code else {
            return 0;
        };
        let before = out.len();
        let sent = r.emit_count(count, out);
        if sent > 0 {
            self.stats.flushes += 1;
        }
        self.count_repairs(&out[before..]);
        sent
    }

    /// Emit repairs for a partial block/window (the adapter calls it after a short idle time).
    /// Calling it again with nothing new sent emits nothing.
    pub fn flush(&mut self, out: &mut Vec<Vec<u8>>) {
        let before = out.len();
        let sent = match &mut self.code {
            EncoderCode::None => false,
            EncoderCode::Xor(x) => x.flush(out),
            EncoderCode::Rs(r) => r.flush(out),
            EncoderCode::Rlc(r) => r.flush(out),
        };
        if sent {
            self.stats.flushes += 1;
        }
        self.count_repairs(&out[before..]);
    }

    pub fn stats(&self) -> EncoderStats {
        self.stats
    }

    fn count_repairs(&mut self, repairs: &[Vec<u8>]) {
        self.stats.repair_sent += repairs.len() as u64;
        self.stats.repair_bytes += repairs.iter().map(|r| r.len() as u64).sum::<u64>();
    }
}

/// One datagram handed to the receiver.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Delivered {
    pub payload: Vec<u8>,
    /// ECN codepoint the *sender* gave the datagram (from the FEC header; 0 for `none`). For a
    /// received datagram, the ECN bits the socket saw (e.g. CE set by the network) matter more.
    pub ecn: u8,
    /// Rebuilt from repairs rather than received.
    pub recovered: bool,
    /// Its source symbol id (0 for `none`, which numbers nothing, and for a plain datagram).
    pub symbol: u32,
}

/// Counters of a [`Decoder`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DecoderStats {
    /// Source datagrams received and delivered (duplicates excluded).
    pub received_source: u64,
    /// Plain (unprotected) datagrams received and delivered.
    pub received_plain: u64,
    /// Repair datagrams received (well-formed ones).
    pub received_repair: u64,
    /// Source datagrams rebuilt from repairs and delivered.
    pub recovered: u64,
    /// Source datagrams covered by a repair that were neither received nor recovered before the
    /// decoder gave up on them (they fell out of its window, or [`Decoder::expire_all`]).
    pub unrecoverable: u64,
    /// Datagrams ignored as not well-formed for this scheme (and decodings that produced an
    /// inconsistent symbol).
    pub malformed: u64,
    /// Source datagrams received again after being delivered (received or recovered).
    pub duplicates: u64,
    /// Repairs (counted in `received_repair`) ignored because they cover symbols the decoder no
    /// longer remembers, or reach too far ahead of the symbols it has seen.
    pub stale: u64,
    /// Reed-Solomon only (0 for the other codes): blocks that missed at least one source symbol
    /// when they were decoded or given up, or still miss one (a burst's spread over blocks). A
    /// block whose repairs were all lost is known only as a gap between the blocks repairs showed:
    /// a gap missing a source counts once (a lower bound).
    pub blocks_with_losses: u64,
}

enum DecoderCode {
    None,
    Linear(LinearDecoder),
    Rs(RsDecoder),
}

/// The receiving side of one connection direction. Its memory is bounded by the scheme's
/// parameters whatever the peer sends: it remembers a window of recent symbol ids
/// (3 × the code's span + 64) and a capped number of pending repairs.
pub struct Decoder {
    scheme: Scheme,
    code: DecoderCode,
    window: Window,
    stats: DecoderStats,
    recovered: Vec<(u32, Vec<u8>)>,
}

impl Decoder {
    pub fn new(scheme: Scheme) -> Self {
        let (span, code) = match scheme {
            Scheme::None => (0, DecoderCode::None),
            Scheme::Xor { k, interleave } => (
                u32::from(k) * u32::from(interleave),
                DecoderCode::Linear(LinearDecoder::new(2 * usize::from(interleave) + 16)),
            ),
            Scheme::ReedSolomon { n, k } => {
                (u32::from(k), DecoderCode::Rs(RsDecoder::new(n, k, 16)))
            }
            Scheme::Rlc { k, window, .. } => (
                u32::from(window) + u32::from(k),
                DecoderCode::Linear(LinearDecoder::new((2 * usize::from(window) + 16).min(128))),
            ),
        };
        Decoder {
            scheme,
            code,
            window: Window::new(3 * span + 64),
            stats: DecoderStats::default(),
            recovered: Vec::new(),
        }
    }

    pub fn scheme(&self) -> Scheme {
        self.scheme
    }

    /// Feed one received datagram; pushes its source payload (if it is a source datagram) and
    /// every datagram it allowed to recover. Never panics; bad input is counted in stats.
    pub fn receive(&mut self, datagram: &[u8], out: &mut Vec<Delivered>) {
        if let DecoderCode::None = self.code {
            self.stats.received_source += 1;
            out.push(Delivered {
                payload: datagram.to_vec(),
                ecn: 0,
                recovered: false,
                symbol: 0,
            });
            return;
        }
        let Some(parsed) = frame::parse(datagram) else {
            self.stats.malformed += 1;
            return;
        };
        let result = match parsed {
            frame::Frame::Source { id, ecn, payload } => {
                self.on_source(id, ecn, payload, out);
                Ok(false)
            }
            frame::Frame::Plain { ecn, payload } => {
                self.stats.received_plain += 1;
                out.push(Delivered {
                    payload: payload.to_vec(),
                    ecn,
                    recovered: false,
                    symbol: 0,
                });
                return;
            }
            repair => self.on_repair(repair),
        };
        match result {
            Ok(true) => self.stats.received_repair += 1,
            Ok(false) => {}
            Err(Rejected::Malformed) => self.stats.malformed += 1,
            Err(Rejected::Stale) => {
                self.stats.received_repair += 1;
                self.stats.stale += 1;
            }
        }
        self.deliver_recovered(out);
    }

    /// The source symbol ids given up on (fell out of the window while missing) since the last
    /// call, in order (the first [`GIVEN_UP_KEPT`] of them when not taken for longer; for traces).
    pub fn take_given_up(&mut self, out: &mut Vec<u32>) {
        out.append(&mut self.window.given_up);
    }

    /// Give up on every source symbol still missing (counted as unrecoverable).
    pub fn expire_all(&mut self) {
        self.window.expire_all();
    }

    /// Repairs (or Reed-Solomon blocks) waiting for more symbols.
    pub fn pending(&self) -> usize {
        match &self.code {
            DecoderCode::None => 0,
            DecoderCode::Linear(l) => l.pending(),
            DecoderCode::Rs(r) => r.pending(),
        }
    }

    /// Approximate bytes of decoder state (symbols, pending repairs and bookkeeping).
    pub fn state_bytes(&self) -> usize {
        self.window.state_bytes()
            + match &self.code {
                DecoderCode::None => 0,
                DecoderCode::Linear(l) => l.state_bytes(),
                DecoderCode::Rs(r) => r.state_bytes(),
            }
    }

    /// The bound on [`Decoder::state_bytes`] when received datagrams are at most
    /// `max_datagram` bytes, whatever they contain.
    pub fn state_limit(&self, max_datagram: usize) -> usize {
        let max_symbol = max_datagram + frame::SYMBOL_PREFIX;
        self.window.state_limit(max_symbol)
            + match &self.code {
                DecoderCode::None => 0,
                DecoderCode::Linear(l) => {
                    l.state_limit(2 * self.window.keep() as usize + 1, max_symbol)
                }
                DecoderCode::Rs(r) => r.state_limit(max_datagram),
            }
    }

    pub fn stats(&self) -> DecoderStats {
        DecoderStats {
            unrecoverable: self.window.unrecoverable,
            blocks_with_losses: match &self.code {
                DecoderCode::Rs(r) => r.blocks_with_losses(&self.window),
                _ => 0,
            },
            ..self.stats
        }
    }

    fn on_source(&mut self, id: u32, ecn: u8, payload: &[u8], out: &mut Vec<Delivered>) {
        if self.window.is_delivered(id) {
            self.stats.duplicates += 1;
            return;
        }
        self.stats.received_source += 1;
        out.push(Delivered {
            payload: payload.to_vec(),
            ecn,
            recovered: false,
            symbol: id,
        });
        if self.window.is_stale(id) || !self.window.plausible_source(id) {
            return; // too old to help any repair, or an id not trusted yet
        }
        self.window.advance(id);
        let mut symbol = self.window.symbol_buffer();
        frame::write_symbol(&mut symbol, ecn, payload);
        self.learn(id, symbol);
    }

    /// Record a delivered symbol and let the code use it.
    fn learn(&mut self, id: u32, symbol: Vec<u8>) {
        match &mut self.code {
            DecoderCode::None => {}
            DecoderCode::Linear(l) => {
                l.add_source(&self.window, id, &symbol, &mut self.recovered);
                self.window.deliver(id, symbol);
            }
            DecoderCode::Rs(r) => {
                self.window.deliver(id, symbol);
                r.add_source(&self.window, id, &mut self.recovered);
            }
        }
    }

    /// Ok(true) for a well-formed repair.
    fn on_repair(&mut self, repair: frame::Frame<'_>) -> Result<bool, Rejected> {
        let recovered = &mut self.recovered;
        match (repair, &mut self.code, self.scheme) {
            (
                frame::Frame::XorRepair {
                    first,
                    count,
                    stride,
                    data,
                },
                DecoderCode::Linear(l),
                Scheme::Xor { k, interleave },
            ) => {
                if u16::from(count) > k || u16::from(stride) != interleave {
                    return Err(Rejected::Malformed);
                }
                let last = first
                    .checked_add(u32::from(count - 1) * u32::from(stride))
                    .ok_or(Rejected::Malformed)?;
                if !self.window.within_reach(last) {
                    return Err(Rejected::Stale);
                }
                let terms = (0..u32::from(count)).map(|i| (first + i * u32::from(stride), 1));
                l.add_repair(&mut self.window, terms, data, recovered)?;
                Ok(true)
            }
            (
                frame::Frame::RlcRepair {
                    repair_id,
                    first,
                    count,
                    data,
                },
                DecoderCode::Linear(l),
                Scheme::Rlc { window, .. },
            ) => {
                if u16::from(count) > window {
                    return Err(Rejected::Malformed);
                }
                let last = first
                    .checked_add(u32::from(count) - 1)
                    .ok_or(Rejected::Malformed)?;
                if !self.window.within_reach(last) {
                    return Err(Rejected::Stale);
                }
                if (first..=last).all(|id| self.window.symbol(id).is_some()) {
                    return Ok(true); // nothing to recover: skip the coefficients
                }
                let coefs = rlc::coefficients(repair_id, usize::from(count));
                let terms = (first..=last).zip(coefs);
                l.add_repair(&mut self.window, terms, data, recovered)?;
                Ok(true)
            }
            (
                frame::Frame::RsRepair {
                    first,
                    k,
                    r,
                    index,
                    data,
                },
                DecoderCode::Rs(rs),
                _,
            ) => {
                rs.add_repair(&mut self.window, first, k, r, index, data, recovered)?;
                Ok(true)
            }
            _ => Err(Rejected::Malformed),
        }
    }

    fn deliver_recovered(&mut self, out: &mut Vec<Delivered>) {
        while !self.recovered.is_empty() {
            let mut batch = std::mem::take(&mut self.recovered);
            batch.sort_unstable_by_key(|&(id, _)| id);
            for (id, padded) in batch {
                self.deliver_one(id, &padded, out);
            }
        }
    }

    fn deliver_one(&mut self, id: u32, padded: &[u8], out: &mut Vec<Delivered>) {
        {
            if self.window.is_delivered(id) {
                return;
            }
            let Some((ecn, payload)) = frame::unpack_symbol(padded) else {
                self.stats.malformed += 1;
                return;
            };
            self.stats.recovered += 1;
            out.push(Delivered {
                payload: payload.to_vec(),
                ecn,
                recovered: true,
                symbol: id,
            });
            let mut symbol = self.window.symbol_buffer();
            symbol.extend_from_slice(&padded[..frame::SYMBOL_PREFIX + payload.len()]);
            self.learn(id, symbol);
        }
    }
}
