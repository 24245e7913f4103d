//! The FEC layer, IO-free: QUIC datagrams and clock readings in, wire datagrams out (and the
//! reverse). No sockets, no async runtime, no QUIC stack types: the adapters (`socket.rs` under
//! quinn, `mp::socket` under noq) own the IO and call [`FecLayer::send`], [`FecLayer::receive`]
//! and [`FecLayer::poll_flush`], as quinn calls quinn-proto.
//!
//! **Paths and groups.** Every datagram belongs to a *path*, keyed by (local IP, remote address)
//! ([`PathKey`]): that is all a socket knows (multipath QUIC puts no path id on the wire that a
//! layer below QUIC could read without its keys). Paths are gathered in *groups*, one per peer
//! connection: single-path, a group is one remote address (today's fecq); multipath, a group is
//! one remote UDP port (fecq opens one socket per endpoint, so every path of a connection has the
//! same peer port, and a peer with a different port is another connection).
//!
//! **Single-path wire format** (no [`Multipath`] options): exactly fec-core's framing.
//!
//! **Multipath wire format** (a scheme other than `none`): `[flow u8]` then a fec-core datagram
//! whose protected payload is `[origin u8][QUIC datagram]`. `flow` names the sender's encoder
//! (its path index with per-path blocks, 0 with connection-wide blocks), so a repair sent on
//! another path still reaches the right decoder; `origin` is the sender's index of the path the
//! QUIC datagram was sent on. It is inside the protected symbol, so a *recovered* datagram comes
//! back with it: the receiver maps the sender's origin index to its own path (learnt from
//! received source datagrams) and hands the datagram to QUIC as if it had arrived there, so the
//! recovered-loss signal (ECN-CE) reaches the congestion controller of the path that lost it.
//! With `none` nothing is added: plain QUIC on the wire.

use std::collections::HashMap;
use std::fmt;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::str::FromStr;
use std::time::{Duration, Instant};

use fec_core::{Decoder, DecoderStats, Delivered, Encoder, Scheme};
use serde::Serialize;

use crate::flush::FlushPolicy;

/// ECN codepoints as their two IP-header bits (0 = not ECN-capable).
pub const ECN_ECT0: u8 = 0b10;
pub const ECN_CE: u8 = 0b11;

/// Groups whose FEC state is kept at once; the least recently active one is evicted beyond this,
/// so the memory held stays bounded whatever arrives.
const MAX_GROUPS: usize = 256;
/// Paths (and flows) of one group: path and flow indices fit the 1-byte wire fields.
pub const MAX_PATHS: usize = 16;

/// How a recovered datagram is shown to QUIC.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Signal {
    /// ECN-CE marked: the sender's congestion controller reacts as to a loss, nothing is
    /// retransmitted.
    Ce,
    /// As sent: the loss is hidden from congestion control.
    Hide,
}

impl FromStr for Signal {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "ce" => Ok(Signal::Ce),
            "hide" => Ok(Signal::Hide),
            _ => Err(format!("unknown signal mode {s:?} (allowed: ce, hide)")),
        }
    }
}

impl fmt::Display for Signal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Signal::Ce => "ce",
            Signal::Hide => "hide",
        })
    }
}

/// Which datagrams form a FEC source block (multipath).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Blocks {
    /// One encoder per path: a block holds the datagrams of one path.
    PerPath,
    /// One encoder per connection: a block holds datagrams of every path, in sending order.
    Connection,
}

/// Where repair datagrams go (multipath).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RepairPath {
    /// On the path of the block's last source datagram.
    Same,
    /// On the next path (in the order paths were first seen), so a path's outage does not take
    /// the repairs of its own datagrams with it.
    Other,
    /// Spread over every path in turn.
    All,
}

macro_rules! named_enum {
    ($t:ty, $what:literal, $($name:literal => $v:expr),+) => {
        impl FromStr for $t {
            type Err = String;
            fn from_str(s: &str) -> Result<Self, String> {
                match s {
                    $($name => Ok($v),)+
                    _ => Err(format!(concat!("unknown ", $what, " {:?} (allowed: {})"), s,
                                     [$($name),+].join(", "))),
                }
            }
        }
        impl fmt::Display for $t {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                $(if *self == $v { return f.write_str($name); })+
                unreachable!()
            }
        }
    };
}
named_enum!(Blocks, "FEC block mode", "path" => Blocks::PerPath, "connection" => Blocks::Connection);
named_enum!(RepairPath, "repair path", "same" => RepairPath::Same, "other" => RepairPath::Other,
            "all" => RepairPath::All);

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Multipath {
    pub blocks: Blocks,
    pub repair: RepairPath,
}

#[derive(Clone, Debug)]
pub struct LayerConfig {
    pub scheme: Scheme,
    pub signal: Signal,
    /// Least idle time after which a partial block is flushed (crate::flush).
    pub flush_after: Duration,
    /// Largest QUIC datagram the stack hands over (a hint for the encoders).
    pub max_payload: usize,
    /// None: single-path framing, one path per remote address.
    pub multipath: Option<Multipath>,
    /// Tail mode (`Some(cap)`): no repairs while the sender sends; when it goes quiet, up to
    /// `cap` repairs over its last W datagrams, as many as the congestion window has room for
    /// ([`TailBudget`]). None: block mode, repairs as the scheme says.
    pub tail: Option<usize>,
}

/// What the QUIC stack tells the layer about a path's congestion window, for tail mode.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TailBudget {
    /// Bytes the congestion window has room for now (window − bytes in flight, an upper bound
    /// of the latter: see cc.rs).
    pub room_bytes: u64,
    /// That upper bound of the bytes in flight (unacknowledged).
    pub in_flight_bytes: u64,
    /// The stack had nothing more to send at its last transmission (as it told its congestion
    /// controller with the last ACKs, none sent since): a pause is the end of its data, not a
    /// wait for window room or pacing.
    pub app_limited: bool,
    /// Data-carrying frames (STREAM, DATAGRAM, CRYPTO) the stack has sent so far: a tail is
    /// only worth sending when it grew since the last one (ACK-only packets need no repair).
    pub data_frames: u64,
}

/// (local IP, remote address): a path as a socket sees it. `local` is None when the stack left
/// the source address to the kernel (single-path quinn).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PathKey {
    pub local: Option<IpAddr>,
    pub remote: SocketAddr,
}

impl PathKey {
    pub fn new(local: Option<IpAddr>, remote: SocketAddr) -> Self {
        PathKey { local, remote }
    }
}

impl fmt::Display for PathKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.local {
            Some(ip) => write!(f, "{ip} -> {}", self.remote),
            None => write!(f, "* -> {}", self.remote),
        }
    }
}

/// Counters of one path, as seen by this endpoint's FEC layer.
#[derive(Clone, Copy, Debug, Default, Serialize, PartialEq, Eq)]
pub struct Counters {
    /// Datagrams put on the wire (source + repair), including those a loopback loss model dropped.
    pub wire_datagrams_sent: u64,
    pub wire_bytes_sent: u64,
    /// Repair datagrams sent on this path (whichever path's datagrams they protect).
    pub repair_sent: u64,
    /// Datagrams the in-process loss model or shaper dropped (loopback only).
    pub wire_dropped: u64,
    /// Datagrams the adapter dropped before the wire: its send backlog was full, or the socket
    /// refused them with an error other than "would block" (counted in `wire_datagrams_sent`).
    pub send_dropped: u64,
    pub wire_datagrams_received: u64,
    pub wire_bytes_received: u64,
    /// QUIC datagrams sent on this path by the peer that the decoder rebuilt from repairs
    /// (wherever the repairs arrived).
    pub recovered: u64,
    /// QUIC datagrams handed to QUIC as this path's (received + recovered).
    pub delivered: u64,
    /// Datagrams the decoder could not use (malformed, truncated, stale or duplicates).
    pub ignored: u64,
    /// Tail mode: repairs sent when the sender went quiet (included in `repair_sent`), and the
    /// number of such tails.
    pub tail_repairs: u64,
    pub tails: u64,
}

impl Counters {
    pub fn add(&mut self, o: &Counters) {
        self.wire_datagrams_sent += o.wire_datagrams_sent;
        self.wire_bytes_sent += o.wire_bytes_sent;
        self.repair_sent += o.repair_sent;
        self.wire_dropped += o.wire_dropped;
        self.send_dropped += o.send_dropped;
        self.wire_datagrams_received += o.wire_datagrams_received;
        self.wire_bytes_received += o.wire_bytes_received;
        self.recovered += o.recovered;
        self.delivered += o.delivered;
        self.ignored += o.ignored;
        self.tail_repairs += o.tail_repairs;
        self.tails += o.tails;
    }
}

/// A wire datagram to send: on `path` (source address `path.local`, to `path.remote`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Outgoing {
    pub path: PathKey,
    pub data: Vec<u8>,
    /// ECN bits to send it with.
    pub ecn: u8,
    pub repair: bool,
}

/// A QUIC datagram for the stack, as received on `path` (for a recovered one: the path it was
/// sent on).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Incoming {
    pub path: PathKey,
    pub payload: Vec<u8>,
    /// ECN bits to show the stack (CE for a recovered datagram with `Signal::Ce`).
    pub ecn: u8,
    pub recovered: bool,
}

struct PathState {
    key: PathKey,
    counters: Counters,
    last_received: Option<Instant>,
    rtt: Option<Duration>,
    /// Tail mode: the stack's window room (None: not told, no window limit).
    budget: Option<TailBudget>,
}

/// One sending encoder and its flush pace.
struct Flow {
    enc: Encoder,
    flush: FlushPolicy,
    /// Path of the last source datagram (repairs with `RepairPath::Same` go there).
    last_path: usize,
    /// Tail mode: source datagrams since the last tail, and the stack's data-frame count then.
    since_tail: usize,
    data_frames_at_tail: u64,
}

struct Group {
    paths: Vec<PathState>,
    flows: Vec<Flow>,
    /// Decoders by the sender's flow id.
    decoders: HashMap<u8, Decoder>,
    /// Sender's origin index -> our path index (learnt from received source datagrams).
    origins: HashMap<u8, usize>,
    /// Next path for `RepairPath::All`.
    rr: usize,
    last_active: Instant,
}

pub struct FecLayer {
    cfg: LayerConfig,
    groups: HashMap<SocketAddr, Group>,
    scratch: Vec<Vec<u8>>,
    delivered: Vec<Delivered>,
    framed: Vec<u8>,
}

/// Datagrams the decoder had no use for: malformed, duplicated, or covering forgotten symbols.
fn ignored(s: &DecoderStats) -> u64 {
    s.malformed + s.duplicates + s.stale
}

impl FecLayer {
    pub fn new(cfg: LayerConfig) -> Self {
        FecLayer {
            cfg,
            groups: HashMap::new(),
            scratch: Vec::new(),
            delivered: Vec::new(),
            framed: Vec::new(),
        }
    }

    pub fn config(&self) -> &LayerConfig {
        &self.cfg
    }

    /// Multipath framing in use (a scheme other than `none`, multipath options given).
    fn enveloped(&self) -> bool {
        self.cfg.multipath.is_some() && self.cfg.scheme != Scheme::None
    }

    fn group_key(&self, remote: SocketAddr) -> SocketAddr {
        match self.cfg.multipath {
            None => remote,
            Some(_) => SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), remote.port()),
        }
    }

    /// The group of `path` and the path's index in it (None: the group already has
    /// MAX_PATHS paths).
    fn locate(&mut self, path: PathKey, now: Instant) -> Option<(&mut Group, usize)> {
        let key = self.group_key(path.remote);
        if !self.groups.contains_key(&key) && self.groups.len() >= MAX_GROUPS {
            let oldest = self
                .groups
                .iter()
                .min_by_key(|(_, g)| g.last_active)
                .map(|(k, _)| *k);
            if let Some(k) = oldest {
                self.groups.remove(&k);
            }
        }
        let group = self.groups.entry(key).or_insert_with(|| Group {
            paths: Vec::new(),
            flows: Vec::new(),
            decoders: HashMap::new(),
            origins: HashMap::new(),
            rr: 0,
            last_active: now,
        });
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

    /// Protect one QUIC datagram sent on `path` with ECN bits `ecn`; pushes the source datagram
    /// and any repairs now due. Returns false (nothing pushed) if the path cannot be tracked.
    pub fn send(
        &mut self,
        now: Instant,
        path: PathKey,
        payload: &[u8],
        ecn: u8,
        out: &mut Vec<Outgoing>,
    ) -> bool {
        let enveloped = self.enveloped();
        let cfg = self.cfg.clone();
        let mut scratch = std::mem::take(&mut self.scratch);
        let mut framed = std::mem::take(&mut self.framed);
        let sent = match self.locate(path, now) {
            None => false,
            Some((group, i)) => {
                let f = match cfg.multipath {
                    Some(Multipath {
                        blocks: Blocks::PerPath,
                        ..
                    }) => i,
                    _ => 0,
                };
                while group.flows.len() <= f {
                    group.flows.push(Flow {
                        enc: Encoder::new(cfg.scheme, cfg.max_payload + 1),
                        flush: FlushPolicy::new(cfg.flush_after),
                        last_path: i,
                        since_tail: 0,
                        data_frames_at_tail: 0,
                    });
                }
                let flow = &mut group.flows[f];
                flow.flush.on_send(now);
                flow.last_path = i;
                flow.since_tail += 1;
                scratch.clear();
                let body = if enveloped {
                    framed.clear();
                    framed.push(i as u8);
                    framed.extend_from_slice(payload);
                    &framed[..]
                } else {
                    payload
                };
                if cfg.tail.is_some() {
                    flow.enc.protect_quiet(body, ecn, &mut scratch);
                } else {
                    flow.enc.protect(body, ecn, &mut scratch);
                }
                let flow_id = enveloped.then_some(f as u8);
                route(group, cfg.multipath, f, flow_id, ecn, &mut scratch, out);
                true
            }
        };
        self.scratch = scratch;
        self.framed = framed;
        sent
    }

    /// Feed one wire datagram received on `path` with ECN bits `ecn`; pushes every QUIC datagram
    /// it delivers (itself, and any it allowed to recover).
    pub fn receive(
        &mut self,
        now: Instant,
        path: PathKey,
        data: &[u8],
        ecn: u8,
        out: &mut Vec<Incoming>,
    ) {
        let enveloped = self.enveloped();
        let scheme = self.cfg.scheme;
        let signal = self.cfg.signal;
        let max_flows = if self.cfg.multipath.is_some() {
            MAX_PATHS
        } else {
            1
        };
        let mut delivered = std::mem::take(&mut self.delivered);
        if let Some((group, i)) = self.locate(path, now) {
            let p = &mut group.paths[i];
            p.last_received = Some(now);
            p.counters.wire_datagrams_received += 1;
            p.counters.wire_bytes_received += data.len() as u64;
            let (flow, body) = match (enveloped, data.split_first()) {
                (false, _) => (0u8, data),
                (true, Some((&f, rest))) if usize::from(f) < max_flows => (f, rest),
                (true, _) => {
                    p.counters.ignored += 1;
                    self.delivered = delivered;
                    return;
                }
            };
            let dec = group
                .decoders
                .entry(flow)
                .or_insert_with(|| Decoder::new(scheme));
            delivered.clear();
            let before = ignored(&dec.stats());
            dec.receive(body, &mut delivered);
            group.paths[i].counters.ignored += ignored(&dec.stats()) - before;
            for d in delivered.drain(..) {
                let (target, payload) = if enveloped {
                    let Some((&origin, rest)) = d.payload.split_first() else {
                        group.paths[i].counters.ignored += 1;
                        continue;
                    };
                    let target = if d.recovered {
                        group.origins.get(&origin).copied().unwrap_or(i)
                    } else {
                        group.origins.insert(origin, i);
                        i
                    };
                    (target, rest.to_vec())
                } else {
                    (i, d.payload)
                };
                let tp = &mut group.paths[target];
                tp.counters.delivered += 1;
                let out_ecn = if d.recovered {
                    tp.counters.recovered += 1;
                    match signal {
                        Signal::Ce => ECN_CE,
                        Signal::Hide => d.ecn,
                    }
                } else if scheme == Scheme::None {
                    ecn
                } else if ecn == ECN_CE {
                    // A received datagram keeps the mark the network gave it.
                    ECN_CE
                } else {
                    d.ecn
                };
                out.push(Incoming {
                    path: tp.key,
                    payload,
                    ecn: out_ecn,
                    recovered: d.recovered,
                });
            }
        }
        self.delivered = delivered;
    }

    /// The path's current RTT estimate: caps the flush threshold of the flows it carries.
    pub fn set_rtt(&mut self, path: PathKey, rtt: Option<Duration>) {
        let key = self.group_key(path.remote);
        if let Some(g) = self.groups.get_mut(&key) {
            if let Some(p) = g.paths.iter_mut().find(|p| p.key == path) {
                p.rtt = rtt;
            }
        }
    }

    /// Tail mode: the path's congestion window room, as the stack sees it now.
    pub fn set_tail_budget(&mut self, path: PathKey, budget: Option<TailBudget>) {
        let key = self.group_key(path.remote);
        if let Some(g) = self.groups.get_mut(&key) {
            if let Some(p) = g.paths.iter_mut().find(|p| p.key == path) {
                p.budget = budget;
            }
        }
    }

    /// Flush the partial blocks of flows whose sender went quiet (crate::flush).
    pub fn poll_flush(&mut self, now: Instant, out: &mut Vec<Outgoing>) {
        let keys: Vec<SocketAddr> = self.groups.keys().copied().collect();
        for key in keys {
            self.flush_group(key, Some(now), out);
        }
    }

    /// Send the repairs of every partial block of `remote`'s connection now (the `stats` request
    /// does this so the counters include the transfer's tail repairs). Tail mode sends nothing
    /// here: its repairs go out only when the sender goes quiet, within the window.
    pub fn flush_now(&mut self, remote: SocketAddr, out: &mut Vec<Outgoing>) {
        let key = self.group_key(remote);
        self.flush_group(key, None, out);
    }

    /// Flush the flows of one group: those idle at `now`, or all of them (None).
    fn flush_group(&mut self, key: SocketAddr, now: Option<Instant>, out: &mut Vec<Outgoing>) {
        if self.cfg.tail.is_some() && now.is_none() {
            return;
        }
        let enveloped = self.enveloped();
        let multipath = self.cfg.multipath;
        let tail = self.cfg.tail;
        let repair_size = (self.cfg.max_payload + self.cfg.scheme.header_overhead()) as u64;
        let mut scratch = std::mem::take(&mut self.scratch);
        if let Some(group) = self.groups.get_mut(&key) {
            for f in 0..group.flows.len() {
                let rtt = group.paths[group.flows[f].last_path].rtt;
                let flow = &mut group.flows[f];
                flow.flush.set_rtt(rtt);
                if now.is_some_and(|now| !flow.flush.should_flush(now)) {
                    continue;
                }
                let count = match tail {
                    None => None,
                    Some(cap) => {
                        let budget = group.paths[flow.last_path].budget;
                        match tail_decision(cap, flow, budget, repair_size) {
                            // Keep the tail pending: retried at the next check.
                            Tail::Wait => continue,
                            Tail::Send(n) => Some(n),
                        }
                    }
                };
                if !flow.flush.take_pending() {
                    continue;
                }
                scratch.clear();
                // Repairs only: a placeholder in front so `route` sees them as repairs.
                scratch.push(Vec::new());
                match count {
                    None => flow.enc.flush(&mut scratch),
                    Some(n) => {
                        flow.since_tail = 0;
                        if n > 0 {
                            flow.enc.tail_repairs(n, &mut scratch);
                            let c = &mut group.paths[flow.last_path].counters;
                            c.tail_repairs += n as u64;
                            c.tails += 1;
                        }
                    }
                }
                let flow_id = enveloped.then_some(f as u8);
                route(group, multipath, f, flow_id, ECN_ECT0, &mut scratch, out);
            }
        }
        self.scratch = scratch;
    }

    /// Count a datagram the loopback link dropped on `path`.
    pub fn record_drop(&mut self, path: PathKey) {
        if let Some(c) = self.path_counters_mut(path) {
            c.wire_dropped += 1;
        }
    }

    /// Count a datagram the adapter dropped before the wire on `path` (backlog full, send error).
    pub fn record_send_drop(&mut self, path: PathKey) {
        if let Some(c) = self.path_counters_mut(path) {
            c.send_dropped += 1;
        }
    }

    fn path_counters_mut(&mut self, path: PathKey) -> Option<&mut Counters> {
        let key = self.group_key(path.remote);
        let g = self.groups.get_mut(&key)?;
        g.paths
            .iter_mut()
            .find(|p| p.key == path)
            .map(|p| &mut p.counters)
    }

    /// Counters of every path of `remote`'s connection, in the order they were first seen.
    pub fn paths(&self, remote: SocketAddr) -> Vec<(PathKey, Counters)> {
        self.groups
            .get(&self.group_key(remote))
            .map(|g| g.paths.iter().map(|p| (p.key, p.counters)).collect())
            .unwrap_or_default()
    }

    /// Sum over the paths of `remote`'s connection (zero if never seen or evicted).
    pub fn counters(&self, remote: SocketAddr) -> Counters {
        let mut t = Counters::default();
        for (_, c) in self.paths(remote) {
            t.add(&c);
        }
        t
    }

    /// Sum over every connection (an endpoint with one connection: the client, loopback).
    pub fn total(&self) -> Counters {
        let mut t = Counters::default();
        for g in self.groups.values() {
            for p in &g.paths {
                t.add(&p.counters);
            }
        }
        t
    }

    /// Blocks of `remote`'s data that missed a source datagram, over its decoders (Reed-Solomon
    /// only: fec-core `DecoderStats::blocks_with_losses`).
    pub fn blocks_with_losses(&self, remote: SocketAddr) -> u64 {
        self.groups.get(&self.group_key(remote)).map_or(0, |g| {
            g.decoders
                .values()
                .map(|d| d.stats().blocks_with_losses)
                .sum()
        })
    }

    /// When the last datagram from `remote`'s connection arrived, on any path.
    pub fn last_received(&self, remote: SocketAddr) -> Option<Instant> {
        self.groups
            .get(&self.group_key(remote))
            .and_then(|g| g.paths.iter().filter_map(|p| p.last_received).max())
    }
}

enum Tail {
    /// Not yet: the stack may still have data to send, or no room (checked again later).
    Wait,
    /// Send this many repairs now (0: none, the tail is done).
    Send(usize),
}

/// Tail mode: what to do now that `flow`'s sender went quiet. Nothing if the stack sent no data
/// since the last tail (ACK-only packets) or everything is acknowledged already. Wait while the
/// stack is not known to be out of data (a pause in the middle of a transfer, blocked by the
/// window) or the window has no room for one repair. Otherwise at most `cap`, at most one per
/// source datagram sent since the last tail and per datagram in flight (more could not rebuild
/// more of them), at most what the window has room for. Without a budget (a stack that cannot
/// tell), `cap` and the datagram count only.
fn tail_decision(
    cap: usize,
    flow: &mut Flow,
    budget: Option<TailBudget>,
    repair_size: u64,
) -> Tail {
    let count = cap.min(flow.since_tail);
    let Some(b) = budget else {
        return Tail::Send(count);
    };
    if b.data_frames <= flow.data_frames_at_tail || b.in_flight_bytes == 0 {
        flow.data_frames_at_tail = b.data_frames;
        return Tail::Send(0);
    }
    let room = (b.room_bytes / repair_size.max(1)) as usize;
    if !b.app_limited || room == 0 {
        return Tail::Wait;
    }
    flow.data_frames_at_tail = b.data_frames;
    let unacked = b.in_flight_bytes.div_ceil(repair_size.max(1)) as usize;
    Tail::Send(count.min(room).min(unacked))
}

/// Put the encoder's output on paths: `produced[0]` is the source datagram (on the flow's last
/// path), the rest are repairs (on the path `RepairPath` says). `flow_id`: the envelope byte.
fn route(
    group: &mut Group,
    multipath: Option<Multipath>,
    flow: usize,
    flow_id: Option<u8>,
    ecn: u8,
    produced: &mut Vec<Vec<u8>>,
    out: &mut Vec<Outgoing>,
) {
    let src = group.flows[flow].last_path;
    let n = group.paths.len();
    for (j, d) in produced.drain(..).enumerate() {
        let repair = j > 0;
        if !repair && d.is_empty() {
            continue; // the placeholder of a flush
        }
        let target = match (repair, multipath.map(|m| m.repair)) {
            (false, _) | (true, None) | (true, Some(RepairPath::Same)) => src,
            (true, Some(RepairPath::Other)) => (src + 1) % n,
            (true, Some(RepairPath::All)) => {
                group.rr = (group.rr + 1) % n;
                group.rr
            }
        };
        let data = match flow_id {
            Some(f) => {
                let mut v = Vec::with_capacity(d.len() + 1);
                v.push(f);
                v.extend_from_slice(&d);
                v
            }
            None => d,
        };
        let c = &mut group.paths[target].counters;
        c.wire_datagrams_sent += 1;
        c.wire_bytes_sent += data.len() as u64;
        if repair {
            c.repair_sent += 1;
        }
        out.push(Outgoing {
            path: group.paths[target].key,
            data,
            ecn,
            repair,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addr(s: &str) -> SocketAddr {
        s.parse().unwrap()
    }

    fn cfg(scheme: &str, multipath: Option<Multipath>) -> LayerConfig {
        LayerConfig {
            scheme: scheme.parse().unwrap(),
            signal: Signal::Ce,
            flush_after: Duration::from_millis(10),
            max_payload: 1200,
            multipath,
            tail: None,
        }
    }

    fn payload(i: usize) -> Vec<u8> {
        (0..300).map(|j| (i * 7 + j) as u8).collect()
    }

    /// Send `n` datagrams alternating over `send_paths`, drop those whose index is in `lost`,
    /// deliver the rest to the receiver on the mirrored path; returns what the receiver got.
    fn exchange(
        scheme: &str,
        mp: Option<Multipath>,
        send_paths: &[PathKey],
        n: usize,
        lost: &[usize],
    ) -> (FecLayer, FecLayer, Vec<Incoming>, Vec<Outgoing>) {
        let mut tx = FecLayer::new(cfg(scheme, mp));
        let mut rx = FecLayer::new(cfg(scheme, mp));
        let now = Instant::now();
        let mut wire = Vec::new();
        for i in 0..n {
            tx.send(
                now,
                send_paths[i % send_paths.len()],
                &payload(i),
                ECN_ECT0,
                &mut wire,
            );
        }
        tx.poll_flush(now + Duration::from_secs(1), &mut wire);
        let mut got = Vec::new();
        let mut source_index = 0;
        for o in &wire {
            let drop = !o.repair && lost.contains(&source_index);
            if !o.repair {
                source_index += 1;
            }
            if drop {
                continue;
            }
            // The receiver sees the mirrored path: its local IP is the sender's remote IP.
            let seen = PathKey::new(
                Some(o.path.remote.ip()),
                SocketAddr::new(o.path.local.unwrap(), 4000),
            );
            rx.receive(now, seen, &o.data, o.ecn, &mut got);
        }
        (tx, rx, got, wire)
    }

    fn two_paths() -> [PathKey; 2] {
        [
            PathKey::new(Some("10.0.1.1".parse().unwrap()), addr("10.0.9.1:443")),
            PathKey::new(Some("10.0.2.1".parse().unwrap()), addr("10.0.9.1:443")),
        ]
    }

    #[test]
    fn single_path_framing_is_fec_core_framing() {
        let mut layer = FecLayer::new(cfg("rs:3,2", None));
        let mut enc = Encoder::new("rs:3,2".parse().unwrap(), 1201);
        let path = PathKey::new(None, addr("127.0.0.1:9"));
        let (mut a, mut b) = (Vec::new(), Vec::new());
        for i in 0..4 {
            layer.send(Instant::now(), path, &payload(i), ECN_ECT0, &mut a);
            enc.protect(&payload(i), ECN_ECT0, &mut b);
        }
        let a: Vec<Vec<u8>> = a.into_iter().map(|o| o.data).collect();
        assert_eq!(a, b);
    }

    #[test]
    fn per_path_blocks_recover_on_the_path_that_lost() {
        let mp = Multipath {
            blocks: Blocks::PerPath,
            repair: RepairPath::Same,
        };
        let paths = two_paths();
        // rs:3,2 per path: datagrams 0,2 are path 0's first block, 1,3 path 1's.
        let (_, rx, got, wire) = exchange("rs:3,2", Some(mp), &paths, 8, &[3]);
        assert_eq!(got.len(), 8);
        let rec: Vec<&Incoming> = got.iter().filter(|d| d.recovered).collect();
        assert_eq!(rec.len(), 1);
        assert_eq!(rec[0].payload, payload(3));
        assert_eq!(rec[0].ecn, ECN_CE);
        // Delivered as if received on path 1 (mirrored): local 10.0.9.1, remote 10.0.2.1.
        assert_eq!(
            rec[0].path.remote.ip(),
            "10.0.2.1".parse::<IpAddr>().unwrap()
        );
        let counters = rx.paths(addr("10.0.2.1:4000"));
        assert_eq!(counters.len(), 2);
        assert_eq!(counters[1].1.recovered, 1);
        assert_eq!(counters[0].1.recovered, 0);
        // Repairs stayed on their own path.
        for o in wire.iter().filter(|o| o.repair) {
            assert_eq!(
                o.data[0] as usize,
                paths.iter().position(|p| *p == o.path).unwrap()
            );
        }
    }

    #[test]
    fn repairs_on_the_other_path_still_reach_their_decoder() {
        let mp = Multipath {
            blocks: Blocks::PerPath,
            repair: RepairPath::Other,
        };
        let paths = two_paths();
        let (tx, _, got, wire) = exchange("rs:3,2", Some(mp), &paths, 8, &[0, 5]);
        assert_eq!(got.len(), 8);
        assert_eq!(got.iter().filter(|d| d.recovered).count(), 2);
        for o in wire.iter().filter(|o| o.repair) {
            // Flow f's repairs leave by the other path.
            assert_ne!(
                o.data[0] as usize,
                paths.iter().position(|p| *p == o.path).unwrap()
            );
        }
        let c = tx.paths(paths[0].remote);
        assert_eq!(c[0].1.repair_sent + c[1].1.repair_sent, 4);
    }

    #[test]
    fn connection_blocks_span_paths_and_recovered_datagrams_keep_their_path() {
        let mp = Multipath {
            blocks: Blocks::Connection,
            repair: RepairPath::All,
        };
        let paths = two_paths();
        // rs:4,2: blocks of 2 datagrams across both paths, 2 repairs each: lose a whole block.
        let (_, rx, got, wire) = exchange("rs:4,2", Some(mp), &paths, 6, &[2, 3]);
        assert_eq!(got.len(), 6);
        let rec: Vec<&Incoming> = got.iter().filter(|d| d.recovered).collect();
        assert_eq!(rec.len(), 2);
        let mut by_payload: Vec<(Vec<u8>, IpAddr)> = rec
            .iter()
            .map(|d| (d.payload.clone(), d.path.remote.ip()))
            .collect();
        by_payload.sort();
        let mut want = vec![
            (payload(2), "10.0.1.1".parse().unwrap()),
            (payload(3), "10.0.2.1".parse().unwrap()),
        ];
        want.sort();
        assert_eq!(by_payload, want);
        assert!(wire.iter().all(|o| o.data[0] == 0));
        let c = rx.paths(addr("10.0.1.1:4000"));
        assert_eq!(c[0].1.recovered + c[1].1.recovered, 2);
        assert_eq!(c[0].1.recovered, 1);
    }

    #[test]
    fn none_is_plain_quic_also_multipath() {
        let mp = Multipath {
            blocks: Blocks::PerPath,
            repair: RepairPath::All,
        };
        let (_, _, got, wire) = exchange("none", Some(mp), &two_paths(), 4, &[]);
        assert_eq!(wire.len(), 4);
        assert_eq!(wire[1].data, payload(1));
        assert_eq!(got.len(), 4);
    }

    #[test]
    fn garbage_is_counted_not_delivered() {
        let mp = Multipath {
            blocks: Blocks::PerPath,
            repair: RepairPath::Same,
        };
        let mut rx = FecLayer::new(cfg("rs:3,2", Some(mp)));
        let path = two_paths()[0];
        let mut got = Vec::new();
        for d in [
            &[][..],
            &[200u8, 1, 2][..],
            &[0u8][..],
            &[0u8, 0x10, 0, 0, 0, 0][..],
        ] {
            rx.receive(Instant::now(), path, d, 0, &mut got);
        }
        assert!(got.is_empty());
        assert_eq!(rx.counters(path.remote).ignored, 4);
        assert_eq!(rx.counters(path.remote).wire_datagrams_received, 4);
    }

    fn tail_cfg(cap: usize) -> LayerConfig {
        LayerConfig {
            tail: Some(cap),
            ..cfg("rlc:6,4,20", None)
        }
    }

    /// One repair datagram's size as the layer budgets it.
    const REPAIR: u64 = 1200 + 13; // RLC repair header (10) + symbol prefix (3)

    /// Tail mode, single path: send `n` datagrams, then let the sender go quiet with `budget`.
    fn tail_send(cap: usize, n: usize, budget: Option<TailBudget>) -> (FecLayer, Vec<Outgoing>) {
        let mut tx = FecLayer::new(tail_cfg(cap));
        let path = PathKey::new(None, addr("10.0.0.2:443"));
        let t0 = Instant::now();
        let mut wire = Vec::new();
        for i in 0..n {
            tx.send(t0, path, &payload(i), ECN_ECT0, &mut wire);
            // Not quiet yet: the flush check between sends emits nothing.
            tx.poll_flush(t0, &mut wire);
        }
        assert!(wire.iter().all(|o| !o.repair), "a repair while sending");
        tx.set_tail_budget(path, budget);
        tx.poll_flush(t0 + Duration::from_secs(1), &mut wire);
        (tx, wire)
    }

    fn budget(room_repairs: u64, data_frames: u64) -> Option<TailBudget> {
        Some(TailBudget {
            room_bytes: room_repairs * REPAIR,
            in_flight_bytes: 30 * 1200,
            app_limited: true,
            data_frames,
        })
    }

    #[test]
    fn tail_mode_sends_repairs_only_when_quiet_up_to_the_cap() {
        let (tx, wire) = tail_send(3, 30, budget(100, 30));
        let repairs: Vec<&Outgoing> = wire.iter().filter(|o| o.repair).collect();
        assert_eq!(repairs.len(), 3);
        assert!(
            wire[..30].iter().all(|o| !o.repair),
            "repairs come after the data"
        );
        let c = tx.total();
        assert_eq!((c.tail_repairs, c.tails, c.repair_sent), (3, 1, 3));
    }

    #[test]
    fn tail_mode_stays_within_the_window_room() {
        for room in [0, 1, 2] {
            let (_, wire) = tail_send(3, 30, budget(room, 30));
            assert_eq!(wire.iter().filter(|o| o.repair).count() as u64, room);
        }
        // Room for less than one repair datagram: none.
        let (_, wire) = tail_send(
            3,
            30,
            Some(TailBudget {
                room_bytes: REPAIR - 1,
                ..budget(0, 30).unwrap()
            }),
        );
        assert_eq!(wire.iter().filter(|o| o.repair).count(), 0);
    }

    #[test]
    fn tail_mode_sends_no_more_repairs_than_new_datagrams_nor_after_acks_only() {
        let (mut tx, wire) = tail_send(3, 2, budget(100, 2));
        assert_eq!(wire.iter().filter(|o| o.repair).count(), 2);
        // More datagrams but no new data frame (ACK-only packets): no tail.
        let path = PathKey::new(None, addr("10.0.0.2:443"));
        let t1 = Instant::now() + Duration::from_secs(2);
        let mut more = Vec::new();
        for i in 0..4 {
            tx.send(t1, path, &payload(i), ECN_ECT0, &mut more);
        }
        tx.set_tail_budget(path, budget(100, 2));
        tx.poll_flush(t1 + Duration::from_secs(1), &mut more);
        assert_eq!(more.iter().filter(|o| o.repair).count(), 0);
        // The `stats` request's flush sends nothing in tail mode.
        tx.send(t1, path, &payload(9), ECN_ECT0, &mut more);
        tx.flush_now(path.remote, &mut more);
        assert_eq!(more.iter().filter(|o| o.repair).count(), 0);
    }

    #[test]
    fn tail_mode_waits_while_the_stack_may_still_send_and_skips_what_is_acknowledged() {
        let path = PathKey::new(None, addr("10.0.0.2:443"));
        let busy = TailBudget {
            app_limited: false,
            ..budget(100, 30).unwrap()
        };
        let (mut tx, wire) = tail_send(3, 30, Some(busy));
        assert_eq!(wire.iter().filter(|o| o.repair).count(), 0);
        // The stack then tells it had nothing more to send: the pending tail goes out.
        let later = Instant::now() + Duration::from_secs(2);
        let mut more = Vec::new();
        tx.set_tail_budget(path, budget(100, 30));
        tx.poll_flush(later, &mut more);
        assert_eq!(more.iter().filter(|o| o.repair).count(), 3);
        // One datagram's bytes in flight: one repair is enough.
        let (_, wire) = tail_send(
            3,
            30,
            Some(TailBudget {
                in_flight_bytes: 900,
                ..budget(100, 30).unwrap()
            }),
        );
        assert_eq!(wire.iter().filter(|o| o.repair).count(), 1);
        // Everything acknowledged: no tail.
        let (_, wire) = tail_send(
            3,
            30,
            Some(TailBudget {
                in_flight_bytes: 0,
                ..budget(100, 30).unwrap()
            }),
        );
        assert_eq!(wire.iter().filter(|o| o.repair).count(), 0);
    }

    #[test]
    fn tail_repairs_rebuild_the_lost_last_datagrams() {
        for lost in [vec![29], vec![27, 29], vec![10, 28, 29]] {
            let (_, wire) = tail_send(3, 30, budget(100, 30));
            let mut rx = FecLayer::new(tail_cfg(3));
            let from = PathKey::new(None, addr("10.0.0.1:5000"));
            let mut got = Vec::new();
            let mut source = 0;
            for o in &wire {
                if !o.repair {
                    source += 1;
                    if lost.contains(&(source - 1)) {
                        continue;
                    }
                }
                rx.receive(Instant::now(), from, &o.data, o.ecn, &mut got);
            }
            assert_eq!(got.len(), 30, "lost {lost:?}");
            let mut rec: Vec<Vec<u8>> = got
                .iter()
                .filter(|d| d.recovered)
                .map(|d| d.payload.clone())
                .collect();
            rec.sort();
            let mut want: Vec<Vec<u8>> = lost.iter().map(|&i| payload(i)).collect();
            want.sort();
            assert_eq!(rec, want);
        }
    }

    #[test]
    fn block_mode_is_unchanged_by_the_tail_code() {
        // rlc:6,4,20 in block mode: 2 repairs after every 4 datagrams, as before.
        let (_, _, got, wire) = exchange("rlc:6,4,20", None, &two_paths()[..1], 8, &[]);
        assert_eq!(wire.iter().filter(|o| o.repair).count(), 4);
        assert_eq!(got.len(), 8);
    }

    #[test]
    fn names_parse_and_print() {
        for s in ["path", "connection"] {
            assert_eq!(s.parse::<Blocks>().unwrap().to_string(), s);
        }
        for s in ["same", "other", "all"] {
            assert_eq!(s.parse::<RepairPath>().unwrap().to_string(), s);
        }
        assert!("x"
            .parse::<RepairPath>()
            .unwrap_err()
            .contains("same, other, all"));
    }
}
