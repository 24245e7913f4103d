//! Systematic Reed-Solomon (n, k) block code on top of the `reed-solomon-erasure` crate
//! (Vandermonde-derived generator over GF(2^8), pure Rust), with fec-core's GF(2^8) slice kernels.
//!
//! Source symbols are grouped in blocks of k consecutive ids; each full block gets n − k repair
//! shards. A block cut short by a flush (k' < k symbols) gets ceil(k' (n − k) / k) repairs, which
//! keeps the code rate. Shards are the blocks' symbols zero-padded to the longest one, rounded up
//! to an even length (kept from the wire format's first version). Any k of a block's k + r
//! shards recover it.

use std::collections::BTreeMap;

use reed_solomon_erasure::galois_8;
use reed_solomon_erasure::{Field, ReedSolomon};

use crate::frame;
use crate::gf256;
use crate::linear::Rejected;
use crate::window::Window;

/// GF(2^8) for `reed-solomon-erasure`: the crate's own scalar arithmetic (its `galois_8` field, same
/// polynomial 0x11D as [`gf256`]), so the code is exactly the crate's, but slices are multiplied
/// with fec-core's kernels (AVX2 when the CPU has it, checked at run time) instead of the crate's
/// pure-Rust table loop.
pub enum Gf {}

impl Field for Gf {
    const ORDER: usize = 256;
    type Elem = u8;

    fn add(a: u8, b: u8) -> u8 {
        a ^ b
    }
    fn mul(a: u8, b: u8) -> u8 {
        <galois_8::Field as Field>::mul(a, b)
    }
    fn div(a: u8, b: u8) -> u8 {
        <galois_8::Field as Field>::div(a, b)
    }
    fn exp(a: u8, n: usize) -> u8 {
        <galois_8::Field as Field>::exp(a, n)
    }
    fn zero() -> u8 {
        0
    }
    fn one() -> u8 {
        1
    }
    fn nth_internal(n: usize) -> u8 {
        <galois_8::Field as Field>::nth_internal(n)
    }
    fn mul_slice(c: u8, input: &[u8], out: &mut [u8]) {
        assert_eq!(input.len(), out.len());
        out.fill(0);
        gf256::mul_add(out, input, c);
    }
    fn mul_slice_add(c: u8, input: &[u8], out: &mut [u8]) {
        assert_eq!(input.len(), out.len());
        gf256::mul_add(out, input, c);
    }
}

/// A few codecs by (k, r): building one inverts a k × k matrix, so full blocks and the odd
/// flushed block reuse theirs. Each codec also caches its decoding matrices per loss pattern.
#[derive(Default)]
struct Codecs {
    list: Vec<((usize, usize), ReedSolomon<Gf>)>,
}

impl Codecs {
    const MAX: usize = 4;

    fn get(&mut self, k: usize, r: usize) -> Option<&ReedSolomon<Gf>> {
        let at = match self.list.iter().position(|(kr, _)| *kr == (k, r)) {
            Some(at) => at,
            None => {
                let codec = ReedSolomon::new(k, r).ok()?;
                if self.list.len() == Self::MAX {
                    self.list.remove(0);
                }
                self.list.push(((k, r), codec));
                self.list.len() - 1
            }
        };
        Some(&self.list[at].1)
    }
}

fn shard_len(longest: usize) -> usize {
    (longest.max(2) + 1) & !1
}

pub(crate) struct RsEncoder {
    n: u16,
    k: u16,
    first: u32,
    /// Symbols of the current block: the first `filled` buffers (the others are kept for reuse).
    block: Vec<Vec<u8>>,
    filled: usize,
    codecs: Codecs,
    parity: Vec<Vec<u8>>,
}

impl RsEncoder {
    pub fn new(n: u16, k: u16) -> Self {
        RsEncoder {
            n,
            k,
            first: 0,
            block: Vec::with_capacity(usize::from(k)),
            filled: 0,
            codecs: Codecs::default(),
            parity: Vec::new(),
        }
    }

    pub fn on_source(&mut self, id: u32, ecn: u8, payload: &[u8], out: &mut Vec<Vec<u8>>) {
        if self.filled == 0 {
            self.first = id;
        }
        if self.filled == self.block.len() {
            self.block.push(Vec::new());
        }
        frame::write_symbol(&mut self.block[self.filled], ecn, payload);
        self.filled += 1;
        if self.filled == usize::from(self.k) {
            self.emit(self.n - self.k, out);
        }
    }

    pub fn flush(&mut self, out: &mut Vec<Vec<u8>>) -> bool {
        if self.filled == 0 {
            return false;
        }
        let k_now = self.filled as u32;
        let per_block = u32::from(self.n - self.k);
        let r = (k_now * per_block).div_ceil(u32::from(self.k)).max(1);
        self.emit(r as u16, out);
        true
    }

    fn emit(&mut self, r: u16, out: &mut Vec<Vec<u8>>) {
        let k = self.filled;
        self.filled = 0;
        let block = &mut self.block[..k];
        let shard = shard_len(block.iter().map(Vec::len).max().unwrap_or(0));
        let r = usize::from(r);
        let Some(codec) = self.codecs.get(k, r) else {
            return;
        };
        for symbol in block.iter_mut() {
            symbol.resize(shard, 0);
        }
        self.parity.resize_with(r, Vec::new);
        for p in &mut self.parity[..r] {
            p.resize(shard, 0);
        }
        if codec.encode_sep(block, &mut self.parity[..r]).is_ok() {
            for (index, data) in self.parity[..r].iter().enumerate() {
                out.push(frame::rs_repair(
                    self.first,
                    k as u8,
                    r as u8,
                    index as u8,
                    data,
                ));
            }
        }
    }
}

struct Block {
    k: u8,
    r: u8,
    shard: usize,
    repairs: BTreeMap<u8, Vec<u8>>,
    done: bool,
}

pub(crate) struct RsDecoder {
    k_max: u8,
    r_max: u8,
    max_blocks: usize,
    blocks: BTreeMap<u32, Block>,
    codecs: Codecs,
    /// The k + r shards of the block being decoded, and whether each is present.
    shards: Vec<(Vec<u8>, bool)>,
    /// Blocks decoded with source symbols missing, or dropped before they were done.
    lossy: u64,
    /// End (first id + k) of the furthest block a repair has shown; ids start at 0.
    seen_end: u32,
    /// Id ranges between the blocks repairs have shown: blocks all of whose repairs were lost,
    /// which the decoder knows only as that gap. Judged (lossy or not) once old enough that no
    /// late source of theirs is still on its way, while their ids are still in the window.
    unseen: BTreeMap<u32, u32>,
}

impl RsDecoder {
    pub fn new(n: u16, k: u16, max_blocks: usize) -> Self {
        RsDecoder {
            k_max: k as u8,
            r_max: (n - k) as u8,
            max_blocks,
            blocks: BTreeMap::new(),
            codecs: Codecs::default(),
            shards: Vec::new(),
            lossy: 0,
            seen_end: 0,
            unseen: BTreeMap::new(),
        }
    }

    #[allow(clippy::too_many_arguments)]
    pub fn add_repair(
        &mut self,
        window: &mut Window,
        first: u32,
        k: u8,
        r: u8,
        index: u8,
        data: &[u8],
        recovered: &mut Vec<(u32, Vec<u8>)>,
    ) -> Result<(), Rejected> {
        if k > self.k_max || r > self.r_max || index >= r || !data.len().is_multiple_of(2) {
            return Err(Rejected::Malformed);
        }
        let last = first
            .checked_add(u32::from(k) - 1)
            .ok_or(Rejected::Malformed)?;
        if window.is_stale(first) || !window.within_reach(last) {
            return Err(Rejected::Stale);
        }
        if first > self.seen_end {
            self.unseen.insert(self.seen_end, first);
        }
        self.seen_end = self.seen_end.max(last.saturating_add(1));
        let block = self.blocks.entry(first).or_insert_with(|| Block {
            k,
            r,
            shard: data.len(),
            repairs: BTreeMap::new(),
            done: false,
        });
        if block.k != k || block.r != r || block.shard != data.len() {
            return Err(Rejected::Malformed);
        }
        if block.done {
            return Ok(());
        }
        block.repairs.insert(index, data.to_vec());
        for id in first..=last {
            window.note_missing(id);
        }
        self.try_decode(window, first, recovered);
        self.drop_old(window);
        Ok(())
    }

    /// A source symbol arrived (already recorded in `window`): it may complete a block.
    pub fn add_source(&mut self, window: &Window, id: u32, recovered: &mut Vec<(u32, Vec<u8>)>) {
        let Some((&first, block)) = self.blocks.range(..=id).next_back() else {
            return;
        };
        if !block.done && id - first < u32::from(block.k) {
            self.try_decode(window, first, recovered);
        }
    }

    pub fn pending(&self) -> usize {
        self.blocks.values().filter(|b| !b.done).count()
    }

    /// Blocks that missed a source symbol: decoded or dropped so, or still pending (a block is
    /// pending only while a source symbol of it is missing), plus the gaps between shown blocks
    /// that miss a source (one each: a lower bound, a gap may hold several blocks; a block after
    /// the last shown one is not seen at all).
    pub fn blocks_with_losses(&self, window: &Window) -> u64 {
        let gaps = self
            .unseen
            .iter()
            .filter(|&(&start, &end)| Self::gap_lossy(window, start, end))
            .count();
        self.lossy + self.pending() as u64 + gaps as u64
    }

    fn gap_lossy(window: &Window, start: u32, end: u32) -> bool {
        (start..end).any(|id| !window.is_stale(id) && !window.is_delivered(id))
    }

    /// Bytes held by the stored repairs.
    pub fn state_bytes(&self) -> usize {
        self.blocks
            .values()
            .map(|b| 64 + b.repairs.values().map(|r| r.len() + 48).sum::<usize>())
            .sum()
    }

    /// The most `state_bytes` can reach with repairs of at most `max_data` bytes.
    pub fn state_limit(&self, max_data: usize) -> usize {
        // +1 block: the cap is enforced right after a block is added.
        (self.max_blocks + 1) * (64 + usize::from(self.r_max) * (max_data + 48))
    }

    fn drop_old(&mut self, window: &Window) {
        let floor = window.floor();
        // A gap half a window behind the newest source: its late sources would have come by now.
        let settled = floor.saturating_add(window.keep() / 2);
        while let Some((&start, &end)) = self.unseen.first_key_value() {
            if end > settled && self.unseen.len() <= self.max_blocks {
                break;
            }
            self.unseen.pop_first();
            self.lossy += u64::from(Self::gap_lossy(window, start, end));
        }
        let mut dropped_undone = 0;
        self.blocks.retain(|&first, b| {
            let keep = first.saturating_add(u32::from(b.k)) > floor;
            dropped_undone += u64::from(!keep && !b.done);
            keep
        });
        while self.blocks.len() > self.max_blocks {
            if let Some((_, b)) = self.blocks.pop_first() {
                dropped_undone += u64::from(!b.done);
            }
        }
        self.lossy += dropped_undone;
    }

    fn try_decode(&mut self, window: &Window, first: u32, recovered: &mut Vec<(u32, Vec<u8>)>) {
        let Some(block) = self.blocks.get_mut(&first) else {
            return;
        };
        let ids = first..first + u32::from(block.k);
        let missing = window.count_missing(ids.clone());
        if missing == 0 {
            block.done = true;
            block.repairs.clear();
            return;
        }
        let available: Vec<(usize, &[u8])> = ids
            .clone()
            .filter_map(|id| Some(((id - first) as usize, window.symbol(id)?)))
            .collect();
        if available.len() + block.repairs.len() < usize::from(block.k) {
            return;
        }
        self.lossy += 1; // missing > 0 and done below, decoded or not
        if available.iter().any(|(_, s)| s.len() > block.shard) {
            block.done = true; // inconsistent with its repairs: not decodable
            return;
        }
        let (k, r, shard) = (usize::from(block.k), usize::from(block.r), block.shard);
        self.shards.resize_with(k + r, Default::default);
        let shards = &mut self.shards[..k + r];
        for (buf, present) in shards.iter_mut() {
            buf.clear();
            buf.resize(shard, 0);
            *present = false;
        }
        for (index, symbol) in available {
            let (buf, present) = &mut shards[index];
            buf[..symbol.len()].copy_from_slice(symbol);
            *present = true;
        }
        for (&index, data) in &block.repairs {
            if let Some((buf, present)) = shards.get_mut(k + usize::from(index)) {
                buf.copy_from_slice(data);
                *present = true;
            }
        }
        block.done = true;
        block.repairs.clear();
        let Some(codec) = self.codecs.get(k, r) else {
            return;
        };
        if codec.reconstruct_data(shards).is_ok() {
            for (index, (data, present)) in shards[..k].iter().enumerate() {
                let id = first + index as u32;
                if !*present && !window.is_delivered(id) {
                    recovered.push((id, data.clone()));
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// fec-core's slice kernels give exactly the crate's own `galois_8` code.
    #[test]
    fn kernel_field_matches_the_crates_field() {
        let (k, r, len) = (20, 10, 1202);
        let data: Vec<Vec<u8>> = (0..k)
            .map(|i| (0..len).map(|j| (i * 31 + j * 7 + j / 5) as u8).collect())
            .collect();
        let ours = ReedSolomon::<Gf>::new(k, r).unwrap();
        let theirs = ReedSolomon::<galois_8::Field>::new(k, r).unwrap();
        let mut a = vec![vec![0u8; len]; r];
        let mut b = vec![vec![1u8; len]; r];
        ours.encode_sep(&data, &mut a).unwrap();
        theirs.encode_sep(&data, &mut b).unwrap();
        assert_eq!(a, b);
        // And the kernels agree on every coefficient.
        for c in 0..=255u8 {
            let (mut x, mut y) = (data[1].clone(), data[1].clone());
            Gf::mul_slice_add(c, &data[0], &mut x);
            <galois_8::Field as Field>::mul_slice_add(c, &data[0], &mut y);
            assert_eq!(x, y, "coefficient {c}");
        }
    }
}
