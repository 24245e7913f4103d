//! The layer's state, per connection: a *group* of paths with their counters, the sending flows
//! (an encoder and its flush pace each) and the decoders of what the peer sends; and the table of
//! groups, bounded (the least recently active group is evicted beyond [`MAX_GROUPS`]).
//!
//! A group is one peer connection: single-path, one remote address; multipath, one remote UDP
//! port (fecq opens one socket per endpoint, so every path of a connection has the same peer
//! port, and a peer with a different port is another connection).
//!
//! The lookups the engine makes for every datagram are `#[inline]`: this module is another
//! codegen unit than the engine's, where a plain call would not be inlined.

use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::{Duration, Instant};

use fec_core::{Decoder, Encoder};

use super::config::{LayerConfig, TailBudget};
use super::counters::Counters;
use super::datagram::PathKey;
use super::flush::FlushPolicy;

/// Groups whose FEC state is kept at once; the least recently active one is evicted beyond this,
/// so the memory held stays bounded whatever arrives.
const MAX_GROUPS: usize = 256;
/// Paths (and flows) of one group: path and flow indices fit the 1-byte wire fields.
pub const MAX_PATHS: usize = 16;

pub(super) struct PathState {
    pub key: PathKey,
    pub counters: Counters,
    pub last_received: Option<Instant>,
    pub rtt: Option<Duration>,
    /// Tail mode: the stack's window room (None: not told, no window limit).
    pub budget: Option<TailBudget>,
}

/// One sending encoder and its flush pace.
pub(super) struct Flow {
    pub enc: Encoder,
    pub flush: FlushPolicy,
    /// Path of the last source datagram (repairs with `RepairPath::Same` go there).
    pub last_path: usize,
    /// Tail mode: source datagrams since the last tail, and the stack's data-frame count then.
    pub since_tail: usize,
    pub data_frames_at_tail: u64,
}

pub(super) struct Group {
    pub paths: Vec<PathState>,
    pub flows: Vec<Flow>,
    /// Decoders by the sender's flow id.
    pub decoders: HashMap<u8, Decoder>,
    /// Sender's origin index -> our path index (learnt from received source datagrams).
    pub origins: HashMap<u8, usize>,
    /// Next path for `RepairPath::All`.
    pub rr: usize,
    last_active: Instant,
}

impl Group {
    fn new(now: Instant) -> Self {
        Group {
            paths: Vec::new(),
            flows: Vec::new(),
            decoders: HashMap::new(),
            origins: HashMap::new(),
            rr: 0,
            last_active: now,
        }
    }

    /// Flow `f`, created (with those before it) on first use; `path`: the path that starts it.
    #[inline]
    pub fn flow(&mut self, f: usize, cfg: &LayerConfig, path: usize) -> &mut Flow {
        while self.flows.len() <= f {
            self.flows.push(Flow {
                enc: Encoder::new(cfg.scheme, cfg.max_payload + 1),
                flush: FlushPolicy::new(cfg.flush_after),
                last_path: path,
                since_tail: 0,
                data_frames_at_tail: 0,
            });
        }
        &mut self.flows[f]
    }

    #[inline]
    fn path_mut(&mut self, key: PathKey) -> Option<&mut PathState> {
        self.paths.iter_mut().find(|p| p.key == key)
    }
}

/// Every group, by its key (see the module doc).
pub(super) struct Groups {
    map: HashMap<SocketAddr, Group>,
    /// Multipath framing: a group per remote port, not per remote address.
    by_port: bool,
}

impl Groups {
    pub fn new(multipath: bool) -> Self {
        Groups {
            map: HashMap::new(),
            by_port: multipath,
        }
    }

    #[inline]
    fn key(&self, remote: SocketAddr) -> SocketAddr {
        if self.by_port {
            SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), remote.port())
        } else {
            remote
        }
    }

    /// The group of `path` (created, evicting the least recently active one when the table is
    /// full) and the path's index in it (added on first use); None: the group already has
    /// MAX_PATHS paths.
    #[inline]
    pub fn locate(&mut self, path: PathKey, now: Instant) -> Option<(&mut Group, usize)> {
        let key = self.key(path.remote);
        if !self.map.contains_key(&key) && self.map.len() >= MAX_GROUPS {
            let oldest = self
                .map
                .iter()
                .min_by_key(|(_, g)| g.last_active)
                .map(|(k, _)| *k);
            if let Some(k) = oldest {
                self.map.remove(&k);
            }
        }
        let group = self.map.entry(key).or_insert_with(|| Group::new(now));
        group.last_active = now;
        let index = match group.paths.iter().position(|p| p.key == path) {
            Some(i) => i,
            None if group.paths.len() < MAX_PATHS => {
                group.paths.push(PathState {
                    key: path,
                    counters: Counters::default(),
                    last_received: None,
                    rtt: None,
                    budget: None,
                });
                group.paths.len() - 1
            }
            None => return None,
        };
        Some((group, index))
    }

    /// The group of `remote`'s connection, if it is known.
    #[inline]
    pub fn get(&self, remote: SocketAddr) -> Option<&Group> {
        self.map.get(&self.key(remote))
    }

    /// The group with this key (as [`Groups::keys`] gives them).
    pub fn by_key_mut(&mut self, key: SocketAddr) -> Option<&mut Group> {
        self.map.get_mut(&key)
    }

    pub fn key_of(&self, remote: SocketAddr) -> SocketAddr {
        self.key(remote)
    }

    pub fn keys(&self) -> Vec<SocketAddr> {
        self.map.keys().copied().collect()
    }

    pub fn values(&self) -> impl Iterator<Item = &Group> {
        self.map.values()
    }

    /// The state of a path already seen (None: never seen, or its group was evicted).
    #[inline]
    pub fn path_mut(&mut self, path: PathKey) -> Option<&mut PathState> {
        let key = self.key(path.remote);
        self.map.get_mut(&key)?.path_mut(path)
    }
}
