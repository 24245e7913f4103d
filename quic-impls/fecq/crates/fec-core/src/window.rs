//! The receiver's bounded memory of recent source symbols, shared by all decoders.
//!
//! Everything is kept relative to the highest symbol id seen (`top`): ids more than `keep`
//! below it are forgotten, and each collection also has a hard size cap, so the state stays
//! bounded whatever ids a peer sends.

use std::collections::{BTreeMap, BTreeSet};

pub(crate) struct Window {
    /// Symbols (`[ecn][len][payload]`) of recently delivered sources, for decoding.
    known: BTreeMap<u32, Vec<u8>>,
    /// Ids delivered recently (received or recovered), to drop duplicates.
    delivered: BTreeSet<u32>,
    /// Ids covered by a repair and not delivered yet: lost unless recovered in time.
    missing: BTreeSet<u32>,
    top: u32,
    keep: u32,
    /// Missing ids given up on (fell out of the window).
    pub unrecoverable: u64,
}

impl Window {
    pub fn new(keep: u32) -> Self {
        Window {
            known: BTreeMap::new(),
            delivered: BTreeSet::new(),
            missing: BTreeSet::new(),
            top: 0,
            keep,
            unrecoverable: 0,
        }
    }

    /// Lowest id still tracked; anything below is stale.
    pub fn floor(&self) -> u32 {
        self.top.saturating_sub(self.keep)
    }

    pub fn is_stale(&self, id: u32) -> bool {
        id < self.floor()
    }

    pub fn is_delivered(&self, id: u32) -> bool {
        self.delivered.contains(&id)
    }

    pub fn symbol(&self, id: u32) -> Option<&[u8]> {
        self.known.get(&id).map(Vec::as_slice)
    }

    /// Ids in `ids` that were neither delivered nor are stale.
    pub fn count_missing(&self, ids: impl Iterator<Item = u32>) -> usize {
        ids.filter(|&id| !self.is_delivered(id)).count()
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
        self.delivered.insert(id);
        self.missing.remove(&id);
        self.known.insert(id, symbol);
        self.evict();
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
        while let Some(&id) = self.known.keys().next() {
            if id >= floor && self.known.len() <= cap {
                break;
            }
            self.known.remove(&id);
        }
        while let Some(&id) = self.delivered.first() {
            if id >= floor && self.delivered.len() <= 2 * cap {
                break;
            }
            self.delivered.pop_first();
        }
        while let Some(&id) = self.missing.first() {
            if id >= floor && self.missing.len() <= cap {
                break;
            }
            self.missing.pop_first();
            self.unrecoverable += 1;
        }
    }
}
