//! XOR block code with interleaving (thesis §4.1.1).
//!
//! `interleave` = I blocks of `k` = K source symbols are interleaved over a span of K·I
//! consecutive source symbols: block j holds the symbols at positions j, j + I, ..., j + (K-1)·I
//! of the span. Each block gets one repair, the XOR of its (padded) symbols, sent as soon as its
//! last symbol is sent. A burst of up to I consecutive losses hits every block at most once, so
//! all of it is recovered; two losses in one block are not recoverable.

use crate::frame;
use crate::gf256;

pub(crate) struct XorEncoder {
    k: u8,
    interleave: u8,
    /// Id of the first source symbol of the current span.
    base: u32,
    /// Source symbols sent in the current span.
    in_span: u16,
    /// Running XOR and member count of each interleaved block.
    acc: Vec<Vec<u8>>,
    members: Vec<u8>,
}

impl XorEncoder {
    pub fn new(k: u8, interleave: u8) -> Self {
        XorEncoder {
            k,
            interleave,
            base: 0,
            in_span: 0,
            acc: vec![Vec::new(); usize::from(interleave)],
            members: vec![0; usize::from(interleave)],
        }
    }

    pub fn on_source(&mut self, id: u32, ecn: u8, payload: &[u8], out: &mut Vec<Vec<u8>>) {
        if self.in_span == 0 {
            self.base = id;
        }
        let j = usize::from(self.in_span % u16::from(self.interleave));
        let acc = &mut self.acc[j];
        // XOR the symbol [ecn][len][payload] in without building it.
        let mut prefix = [0u8; frame::SYMBOL_PREFIX];
        let payload = &payload[..payload.len().min(usize::from(u16::MAX))];
        prefix[0] = ecn & 0b11;
        prefix[1..].copy_from_slice(&(payload.len() as u16).to_be_bytes());
        let len = frame::SYMBOL_PREFIX + payload.len();
        if acc.len() < len {
            acc.resize(len, 0);
        }
        gf256::xor_into(acc, &prefix);
        gf256::xor_into(&mut acc[frame::SYMBOL_PREFIX..], payload);
        self.members[j] += 1;
        self.in_span += 1;
        if self.members[j] == self.k {
            self.emit(j, out);
        }
        if self.in_span == u16::from(self.k) * u16::from(self.interleave) {
            self.in_span = 0;
        }
    }

    /// Send the repairs of the partly filled blocks and start a new span. Returns whether
    /// anything was sent.
    pub fn flush(&mut self, out: &mut Vec<Vec<u8>>) -> bool {
        let mut sent = false;
        for j in 0..self.acc.len() {
            if self.members[j] > 0 {
                self.emit(j, out);
                sent = true;
            }
        }
        self.in_span = 0;
        sent
    }

    fn emit(&mut self, j: usize, out: &mut Vec<Vec<u8>>) {
        let first = self.base.wrapping_add(j as u32);
        out.push(frame::xor_repair(
            first,
            self.members[j],
            self.interleave,
            &self.acc[j],
        ));
        self.acc[j].clear();
        self.members[j] = 0;
    }
}
