//! Sliding-window random linear code over GF(2^8), after RFC 8681's structure: after every K
//! source symbols, N − K repairs, each a random linear combination of the last W source symbols.
//! Coefficients come from a deterministic generator seeded with the repair id, so receivers
//! recompute them (RFC 8681 uses TinyMT32 for this; ours is splitmix64, so the coefficients are
//! not bit-compatible with RFC 8681 implementations, only the scheme is the same).

use std::collections::VecDeque;

use crate::frame;
use crate::gf256;

const SEED: u64 = 0x8681_fec0_2019_0003;

fn splitmix64(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// The `count` non-zero coefficients of repair `repair_id`, in source-id order.
pub fn coefficients(repair_id: u32, count: usize) -> Vec<u8> {
    let mut state = SEED ^ (u64::from(repair_id) << 16);
    let mut out = Vec::with_capacity(count);
    while out.len() < count {
        for byte in splitmix64(&mut state).to_le_bytes() {
            if byte != 0 && out.len() < count {
                out.push(byte);
            }
        }
    }
    out
}

pub(crate) struct RlcEncoder {
    repairs_per_step: u8,
    k: u16,
    window: usize,
    symbols: VecDeque<(u32, Vec<u8>)>,
    since_repair: u16,
    next_repair_id: u32,
    scratch: Vec<u8>,
}

impl RlcEncoder {
    pub fn new(n: u16, k: u16, window: u16) -> Self {
        RlcEncoder {
            repairs_per_step: (n - k) as u8,
            k,
            window: usize::from(window),
            symbols: VecDeque::with_capacity(usize::from(window) + 1),
            since_repair: 0,
            next_repair_id: 0,
            scratch: Vec::new(),
        }
    }

    pub fn on_source(&mut self, id: u32, ecn: u8, payload: &[u8], out: &mut Vec<Vec<u8>>) {
        self.remember(id, ecn, payload);
        if self.since_repair >= self.k {
            self.emit(out);
        }
    }

    /// Add a source symbol to the window without emitting the repairs the scheme would
    /// (tail mode: repairs come only from [`RlcEncoder::emit_count`]).
    pub fn remember(&mut self, id: u32, ecn: u8, payload: &[u8]) {
        // Reuse the buffer of the symbol leaving the window.
        let mut symbol = if self.symbols.len() == self.window {
            self.symbols.pop_front().map(|(_, s)| s).unwrap_or_default()
        } else {
            Vec::new()
        };
        frame::write_symbol(&mut symbol, ecn, payload);
        self.symbols.push_back((id, symbol));
        self.since_repair = self.since_repair.saturating_add(1);
    }

    /// Send repairs over the current window if sources were sent since the last ones.
    pub fn flush(&mut self, out: &mut Vec<Vec<u8>>) -> bool {
        if self.since_repair == 0 {
            return false;
        }
        self.emit(out);
        true
    }

    fn emit(&mut self, out: &mut Vec<Vec<u8>>) {
        self.emit_count(usize::from(self.repairs_per_step), out);
    }

    /// Emit `count` repairs over the current window (the last W source symbols) now; returns
    /// how many were emitted (0 with an empty window).
    pub fn emit_count(&mut self, count: usize, out: &mut Vec<Vec<u8>>) -> usize {
        self.since_repair = 0;
        let Some(&(first, _)) = self.symbols.front() else {
            return 0;
        };
        let width = self.symbols.iter().map(|(_, s)| s.len()).max().unwrap_or(0);
        for _ in 0..count {
            let repair_id = self.next_repair_id;
            self.next_repair_id = self.next_repair_id.wrapping_add(1);
            let coefs = coefficients(repair_id, self.symbols.len());
            self.scratch.clear();
            self.scratch.resize(width, 0);
            for ((_, symbol), &c) in self.symbols.iter().zip(&coefs) {
                gf256::mul_add(&mut self.scratch, symbol, c);
            }
            out.push(frame::rlc_repair(
                repair_id,
                first,
                self.symbols.len() as u8,
                &self.scratch,
            ));
        }
        count
    }
}
