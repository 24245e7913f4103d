//! The receiver's bounded memory of recent source symbols, shared by all decoders.
//!
//! Everything is kept relative to the highest source symbol id received (`top`; repairs never
//! move it): ids more than `keep` below it are forgotten, repairs reaching more than `keep` above
//! it are ignored, and each collection also has a hard size cap, so the state stays
//! bounded whatever ids a peer sends.

use std::collections::BTreeSet;

/// One slot of the ring of recent ids: the delivered id it holds (if any) and that id's symbol.
/// Slot of id = id mod ring size.
#[derive(Default)]
struct Slot {
    id: Option<u32>,
    symbol: Vec<u8>,
}

pub(crate) struct Window {
    /// Delivered ids (received or recovered) and their symbols (`[ecn][len][payload]`), for
    /// duplicates and decoding. Ids tracked lie in [floor, top + keep]: 2 keep + 1 ids, so a ring
    /// of 2 keep + 2 slots never holds two of them at once, and ids below the floor are simply
    /// ignored when read (no per-datagram tree operations or allocations).
    ring: Vec<Slot>,
    /// Ids covered by a repair and not delivered yet: lost unless recovered in time.
    missing: BTreeSet<u32>,
    top: u32,
    keep: u32,
    /// Last source id seen too far ahead of `top` to be trusted (see `plausible_source`).
    far: Option<u32>,
    /// How many such ids in a row, each a little ahead of the previous one.
    far_run: u8,
    /// Missing ids given up on (fell out of the window).
    pub unrecoverable: u64,
    /// The latest of those ids, until the decoder's owner takes them (at most GIVEN_UP_KEPT).
    pub given_up: Vec<u32>,
    /// Buffers of overwritten symbols, reused for new ones (no allocation per datagram).
    spare: Vec<Vec<u8>>,
}

/// Most given-up ids remembered until taken (`Decoder::take_given_up`): an owner that never takes
/// them costs nothing more than this.
pub const GIVEN_UP_KEPT: usize = 64;

/// Most spare symbol buffers kept.
const MAX_SPARE: usize = 4;

impl Window {
    pub fn new(keep: u32) -> Self {
        Window {
            ring: (0..2 * keep as usize + 2)
                .map(|_| Slot::default())
                .collect(),
            missing: BTreeSet::new(),
            top: 0,
            keep,
            far: None,
            far_run: 0,
            unrecoverable: 0,
            given_up: Vec::new(),
            spare: Vec::new(),
        }
    }

    /// Lowest id still tracked; anything below is stale.
    pub fn floor(&self) -> u32 {
        self.top.saturating_sub(self.keep)
    }

    pub fn is_stale(&self, id: u32) -> bool {
        id < self.floor()
    }

    fn slot(&self, id: u32) -> Option<&Slot> {
        let slot = &self.ring[id as usize % self.ring.len()];
        (slot.id == Some(id) && !self.is_stale(id)).then_some(slot)
    }

    pub fn is_delivered(&self, id: u32) -> bool {
        self.slot(id).is_some()
    }

    pub fn symbol(&self, id: u32) -> Option<&[u8]> {
        self.slot(id)
            .map(|s| s.symbol.as_slice())
            .filter(|s| !s.is_empty())
    }

    /// Ids in `ids` that were neither delivered nor are stale.
    pub fn count_missing(&self, ids: impl Iterator<Item = u32>) -> usize {
        ids.filter(|&id| !self.is_delivered(id)).count()
    }

    /// Approximate bytes held (symbols plus a fixed cost per entry).
    pub fn state_bytes(&self) -> usize {
        self.ring
            .iter()
            .map(|s| s.symbol.capacity() + 32)
            .sum::<usize>()
            + self.spare.iter().map(|s| s.capacity() + 24).sum::<usize>()
            + 32 * self.missing.len()
    }

    /// The most `state_bytes` can reach with symbols of at most `max_symbol` bytes (a reused
    /// buffer's capacity can reach twice that).
    pub fn state_limit(&self, max_symbol: usize) -> usize {
        let cap = self.keep as usize + 1;
        self.ring.len() * (2 * max_symbol + 32) + MAX_SPARE * (2 * max_symbol + 24) + 32 * cap
    }

    pub fn keep(&self) -> u32 {
        self.keep
    }

    /// Whether a repair reaching up to `last` is within reach of the window.
    pub fn within_reach(&self, last: u32) -> bool {
        u64::from(last) <= u64::from(self.top) + u64::from(self.keep)
    }

    /// Whether a source id may move the window. An id more than `keep` ahead of `top` (a corrupt
    /// header, or a gap longer than the window) is only trusted after `FAR_CONFIRM` such ids in
    /// a row, each a little ahead of the previous one, so stray datagrams cannot blind the
    /// decoder while a real jump is followed after a few datagrams.
    pub fn plausible_source(&mut self, id: u32) -> bool {
        const FAR_CONFIRM: u8 = 3;
        if self.within_reach(id) {
            self.far = None;
            self.far_run = 0;
            return true;
        }
        let follows = self.far.is_some_and(|f| f < id && id - f <= self.keep);
        self.far_run = if follows { self.far_run + 1 } else { 1 };
        self.far = Some(id);
        if self.far_run >= FAR_CONFIRM {
            self.far = None;
            self.far_run = 0;
            return true;
        }
        false
    }

    /// Move the window forward to include `id`, forgetting what falls behind.
    pub fn advance(&mut self, id: u32) {
        if id > self.top {
            self.top = id;
            self.evict();
        }
    }

    /// Record a delivered source (received or recovered) and keep its symbol.
    pub fn deliver(&mut self, id: u32, symbol: Vec<u8>) {
        if !self.missing.is_empty() {
            self.missing.remove(&id);
        }
        let n = self.ring.len();
        let slot = &mut self.ring[id as usize % n];
        slot.id = Some(id);
        let old = std::mem::replace(&mut slot.symbol, symbol);
        self.recycle(old);
    }

    /// An empty buffer for a symbol: a forgotten symbol's if there is one.
    pub fn symbol_buffer(&mut self) -> Vec<u8> {
        self.spare.pop().unwrap_or_default()
    }

    fn recycle(&mut self, mut buffer: Vec<u8>) {
        if self.spare.len() < MAX_SPARE {
            buffer.clear();
            self.spare.push(buffer);
        }
    }

    /// A repair covers `id`, which has not arrived.
    pub fn note_missing(&mut self, id: u32) {
        if !self.is_delivered(id) && !self.is_stale(id) {
            self.missing.insert(id);
            self.evict();
        }
    }

    /// Give up on every missing id (end of a test or of a connection).
    pub fn expire_all(&mut self) {
        self.unrecoverable += self.missing.len() as u64;
        self.missing.clear();
    }

    fn evict(&mut self) {
        let floor = self.floor();
        let cap = self.keep as usize + 1;
        while let Some(&id) = self.missing.first() {
            if id >= floor && self.missing.len() <= cap {
                break;
            }
            self.missing.pop_first();
            self.unrecoverable += 1;
            if self.given_up.len() < GIVEN_UP_KEPT {
                self.given_up.push(id);
            }
        }
    }
}
