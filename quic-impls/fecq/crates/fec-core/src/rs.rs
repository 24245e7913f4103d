//! Systematic Reed-Solomon (n, k) block code on top of the `reed-solomon-simd` crate.
//!
//! Source symbols are grouped in blocks of k consecutive ids; each full block gets n − k repair
//! shards. A block cut short by a flush (k' < k symbols) gets ceil(k' (n − k) / k) repairs, which
//! keeps the code rate. Shards are the blocks' symbols zero-padded to the longest one, rounded up
//! to an even length (the crate's requirement). Any k of a block's k + r shards recover it.

use std::collections::BTreeMap;

use reed_solomon_simd::{ReedSolomonDecoder, ReedSolomonEncoder};

use crate::frame;
use crate::linear::Rejected;
use crate::window::Window;

fn shard_len(longest: usize) -> usize {
    (longest.max(2) + 1) & !1
}

fn pad_into(scratch: &mut Vec<u8>, symbol: &[u8], len: usize) {
    scratch.clear();
    scratch.extend_from_slice(symbol);
    scratch.resize(len, 0);
}

pub(crate) struct RsEncoder {
    n: u16,
    k: u16,
    first: u32,
    /// Symbols of the current block: the first `filled` buffers (the others are kept for reuse).
    block: Vec<Vec<u8>>,
    filled: usize,
    coder: Option<ReedSolomonEncoder>,
}

impl RsEncoder {
    pub fn new(n: u16, k: u16) -> Self {
        RsEncoder {
            n,
            k,
            first: 0,
            block: Vec::with_capacity(usize::from(k)),
            filled: 0,
            coder: None,
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
        let ready = match &mut self.coder {
            Some(coder) => coder.reset(k, r, shard).is_ok(),
            None => match ReedSolomonEncoder::new(k, r, shard) {
                Ok(coder) => {
                    self.coder = Some(coder);
                    true
                }
                Err(_) => false,
            },
        };
        if let (true, Some(coder)) = (ready, self.coder.as_mut()) {
            let mut ok = true;
            for symbol in block.iter_mut() {
                symbol.resize(shard, 0);
                ok &= coder.add_original_shard(&symbol[..]).is_ok();
            }
            if ok {
                if let Ok(result) = coder.encode() {
                    for (index, data) in result.recovery_iter().enumerate() {
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
    coder: Option<ReedSolomonDecoder>,
    scratch: Vec<u8>,
}

impl RsDecoder {
    pub fn new(n: u16, k: u16, max_blocks: usize) -> Self {
        RsDecoder {
            k_max: k as u8,
            r_max: (n - k) as u8,
            max_blocks,
            blocks: BTreeMap::new(),
            coder: None,
            scratch: Vec::new(),
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
        if k > self.k_max || r > self.r_max || !data.len().is_multiple_of(2) {
            return Err(Rejected::Malformed);
        }
        let last = first
            .checked_add(u32::from(k) - 1)
            .ok_or(Rejected::Malformed)?;
        if window.is_stale(first) || !window.within_reach(last) {
            return Err(Rejected::Stale);
        }
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
        self.blocks
            .retain(|&first, b| first.saturating_add(u32::from(b.k)) > floor);
        while self.blocks.len() > self.max_blocks {
            self.blocks.pop_first();
        }
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
        if available.iter().any(|(_, s)| s.len() > block.shard) {
            block.done = true; // inconsistent with its repairs: not decodable
            return;
        }
        let (k, r, shard) = (usize::from(block.k), usize::from(block.r), block.shard);
        let ready = match &mut self.coder {
            Some(coder) => coder.reset(k, r, shard).is_ok(),
            None => match ReedSolomonDecoder::new(k, r, shard) {
                Ok(coder) => {
                    self.coder = Some(coder);
                    true
                }
                Err(_) => false,
            },
        };
        let Some(coder) = self.coder.as_mut().filter(|_| ready) else {
            return;
        };
        let mut ok = true;
        for (index, symbol) in available {
            pad_into(&mut self.scratch, symbol, shard);
            ok &= coder.add_original_shard(index, &self.scratch).is_ok();
        }
        for (&index, data) in &block.repairs {
            ok &= coder.add_recovery_shard(usize::from(index), data).is_ok();
        }
        block.done = true;
        block.repairs.clear();
        if !ok {
            return;
        }
        if let Ok(result) = coder.decode() {
            for (index, data) in result.restored_original_iter() {
                let id = first + index as u32;
                if !window.is_delivered(id) {
                    recovered.push((id, data.to_vec()));
                }
            }
        }
    }
}
