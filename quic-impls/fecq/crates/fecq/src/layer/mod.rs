//! The FEC layer, IO-free: QUIC datagrams and clock readings in, wire datagrams out (and the
//! reverse). No sockets, no async runtime, no QUIC stack types: the shared socket (crate::socket,
//! under either QUIC stack) owns the IO and calls [`FecLayer::send`], [`FecLayer::receive`] and
//! [`FecLayer::poll_flush`] through the adapter core (crate::driver), as quinn calls quinn-proto.
//!
//! By concept: `config` (what configures it), `datagram` (paths and the datagrams crossing the
//! boundary), `counters`, `group` (the per-connection state and its table), `route` (which path
//! each encoder output goes out on), `flush` (when a partial block is flushed), `tail` (tail
//! mode's decision); this file is the engine that ties them.
//!
//! **Paths and groups.** Every datagram belongs to a *path*, keyed by (local IP, remote address)
//! ([`PathKey`]): that is all a socket knows (multipath QUIC puts no path id on the wire that a
//! layer below QUIC could read without its keys). Paths are gathered in *groups*, one per peer
//! connection (`group`).
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
//!
//! **Source symbols.** With [`Protect::Stream`] (the default) only the QUIC datagrams the stack
//! says carry application data ([`Content::Data`]: a STREAM or DATAGRAM frame, crate::content)
//! are source symbols; the others ([`Content::Control`]: handshake, ACK-only and other control
//! packets) go out as fec-core *plain* datagrams (a 1-byte header, in the multipath envelope too):
//! no repair covers them, they bring no repair due, and the flush pace and tail mode do not count
//! them (a sender that sends only ACKs is quiet). [`Protect::All`]: every datagram is a source, and
//! so is every one with `none` (plain QUIC on the wire). What each datagram carries is also what a
//! trace says of it (`FecEventKind::DatagramSent`), whatever is protected.

mod config;
mod counters;
mod datagram;
mod events;
pub mod flush;
mod group;
mod route;
mod tail;
#[cfg(test)]
mod tests;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use fec_core::{Decoder, DecoderStats, Delivered, Scheme};

pub use config::{Blocks, LayerConfig, Multipath, Protect, RepairPath, Signal, TailBudget};
pub use counters::Counters;
pub use datagram::{Content, Incoming, Outgoing, PathKey, ECN_CE, ECN_ECT0};
pub use events::{FecEvent, FecEventKind};
pub use group::MAX_PATHS;

use group::Groups;
use route::{envelope, route};
use tail::{tail_decision, Tail};

pub struct FecLayer {
    cfg: LayerConfig,
    groups: Groups,
    scratch: Vec<Vec<u8>>,
    delivered: Vec<Delivered>,
    framed: Vec<u8>,
    /// What it did, for a trace; None (the default): nothing is recorded (self::events).
    events: Option<Vec<FecEvent>>,
    given_up: Vec<u32>,
}

/// Datagrams the decoder had no use for: malformed, duplicated, or covering forgotten symbols.
fn ignored(s: &DecoderStats) -> u64 {
    s.malformed + s.duplicates + s.stale
}

impl FecLayer {
    pub fn new(cfg: LayerConfig) -> Self {
        FecLayer {
            groups: Groups::new(cfg.multipath.is_some()),
            cfg,
            scratch: Vec::new(),
            delivered: Vec::new(),
            framed: Vec::new(),
            events: None,
            given_up: Vec::new(),
        }
    }

    pub fn config(&self) -> &LayerConfig {
        &self.cfg
    }

    /// Record what the layer does as [`FecEvent`]s (for a trace), taken with
    /// [`FecLayer::take_events`]. Off by default: then nothing is recorded.
    pub fn record_events(&mut self) {
        self.events.get_or_insert_with(Vec::new);
    }

    /// The events recorded since the last call (none when not recording).
    pub fn take_events(&mut self, out: &mut Vec<FecEvent>) {
        if let Some(events) = self.events.as_mut() {
            out.append(events);
        }
    }

    /// Record that the transfer with `remote` is over at this end (`FecEventKind::TransferOver`),
    /// when recording.
    pub fn mark_transfer_over(&mut self, remote: SocketAddr) {
        let group = self.groups.key_of(remote);
        if let Some(events) = self.events.as_mut() {
            events.push(FecEvent {
                time: Instant::now(),
                group,
                path: 0,
                kind: FecEventKind::TransferOver,
            });
        }
    }

    /// The key of the group (connection) that datagrams from or to `remote` belong to.
    pub fn group_key(&self, remote: SocketAddr) -> SocketAddr {
        self.groups.key_of(remote)
    }

    /// Record the datagrams among `out[from..]` (sent at `now`), in order, when recording: each
    /// repair, and each QUIC datagram with what it carries (`content`: that of the stack's
    /// datagram this send was; None for a flush, which sends repairs only).
    fn note_sent(&mut self, now: Instant, out: &[Outgoing], from: usize, content: Option<Content>) {
        let Some(events) = self.events.as_mut() else {
            return;
        };
        let enveloped = self.cfg.multipath.is_some() && self.cfg.scheme != Scheme::None;
        for o in out.iter().skip(from) {
            let kind = match (o.repair, content) {
                (true, _) => {
                    let body = if enveloped { &o.data[1..] } else { &o.data[..] };
                    let Some((block, symbol)) = events::repair_ids(body) else {
                        continue;
                    };
                    FecEventKind::RepairSent {
                        block,
                        symbol,
                        bytes: o.data.len(),
                    }
                }
                (false, Some(c)) => FecEventKind::DatagramSent {
                    bytes: o.data.len(),
                    app_data: c == Content::Data,
                },
                (false, None) => continue,
            };
            let path = self.groups.get(o.path.remote).map_or(0, |g| {
                g.paths.iter().position(|p| p.key == o.path).unwrap_or(0)
            });
            events.push(FecEvent {
                time: now,
                group: self.groups.key_of(o.path.remote),
                path,
                kind,
            });
        }
    }

    /// Multipath framing in use (a scheme other than `none`, multipath options given).
    /// Whether a wire datagram is a repair (for `--test-ignore-repairs`, a deliberately broken
    /// receiver).
    pub fn is_repair(&self, data: &[u8]) -> bool {
        let body = if self.enveloped() {
            data.get(1..).unwrap_or_default()
        } else {
            data
        };
        self.cfg.scheme != Scheme::None && events::repair_ids(body).is_some()
    }

    fn enveloped(&self) -> bool {
        self.cfg.multipath.is_some() && self.cfg.scheme != Scheme::None
    }

    /// Whether a QUIC datagram with this content is a source symbol (self's doc, "Source
    /// symbols"). With `none` every datagram is (plain QUIC on the wire either way): what a
    /// datagram carries then only names it in a trace (`DatagramSent`), and changes nothing.
    pub fn protects(&self, content: Content) -> bool {
        self.cfg.protect == Protect::All
            || self.cfg.scheme == Scheme::None
            || content == Content::Data
    }

    /// Send one QUIC datagram on `path` with ECN bits `ecn`, carrying `content` (as the stack's
    /// adapter learnt it): a source datagram and any repairs now due, or a plain datagram when it
    /// is not protected ([`FecLayer::protects`]). Returns false (nothing pushed) if the path
    /// cannot be tracked.
    pub fn send(
        &mut self,
        now: Instant,
        path: PathKey,
        payload: &[u8],
        ecn: u8,
        content: Content,
        out: &mut Vec<Outgoing>,
    ) -> bool {
        let enveloped = self.enveloped();
        let protect = self.protects(content);
        let before = out.len();
        let cfg = &self.cfg;
        let Some((group, i)) = self.groups.locate(path, now) else {
            return false;
        };
        let f = match cfg.multipath {
            Some(Multipath {
                blocks: Blocks::PerPath,
                ..
            }) => i,
            _ => 0,
        };
        let flow = group.flow(f, cfg, i);
        if !protect {
            // No source symbol: on its own path, touching neither the flow's block, its pace
            // nor its last path.
            self.scratch.clear();
            let body = if enveloped {
                self.framed.clear();
                self.framed.push(i as u8);
                self.framed.extend_from_slice(payload);
                &self.framed[..]
            } else {
                payload
            };
            flow.enc.pass(body, ecn, &mut self.scratch);
            let flow_id = enveloped.then_some(f as u8);
            for d in self.scratch.drain(..) {
                let data = envelope(flow_id, d);
                let c = &mut group.paths[i].counters;
                c.wire_datagrams_sent += 1;
                c.wire_bytes_sent += data.len() as u64;
                c.plain_sent += 1;
                out.push(Outgoing {
                    path,
                    data,
                    ecn,
                    repair: false,
                });
            }
            self.note_sent(now, out, before, Some(content));
            return true;
        }
        flow.flush.on_send(now);
        flow.last_path = i;
        flow.since_tail += 1;
        self.scratch.clear();
        let body = if enveloped {
            self.framed.clear();
            self.framed.push(i as u8);
            self.framed.extend_from_slice(payload);
            &self.framed[..]
        } else {
            payload
        };
        if cfg.tail.is_some() {
            flow.enc.protect_quiet(body, ecn, &mut self.scratch);
        } else {
            flow.enc.protect(body, ecn, &mut self.scratch);
        }
        let flow_id = enveloped.then_some(f as u8);
        route(
            group,
            cfg.multipath,
            f,
            flow_id,
            ecn,
            &mut self.scratch,
            out,
        );
        self.note_sent(now, out, before, Some(content));
        true
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
        let group_key = self.groups.key_of(path.remote);
        let Some((group, i)) = self.groups.locate(path, now) else {
            return;
        };
        let p = &mut group.paths[i];
        p.last_received = Some(now);
        p.counters.wire_datagrams_received += 1;
        p.counters.wire_bytes_received += data.len() as u64;
        let (flow, body) = match (enveloped, data.split_first()) {
            (false, _) => (0u8, data),
            (true, Some((&f, rest))) if usize::from(f) < max_flows => (f, rest),
            (true, _) => {
                p.counters.ignored += 1;
                return;
            }
        };
        let dec = group
            .decoders
            .entry(flow)
            .or_insert_with(|| Decoder::new(scheme));
        let delivered = &mut self.delivered;
        delivered.clear();
        let before = ignored(&dec.stats());
        dec.receive(body, delivered);
        group.paths[i].counters.ignored += ignored(&dec.stats()) - before;
        // For a trace: the repair this datagram is (its block), the symbols given up.
        let repair_block = match self.events {
            Some(_) => events::repair_ids(body).map(|(block, _)| block),
            None => None,
        };
        if let Some(events) = self.events.as_mut() {
            self.given_up.clear();
            dec.take_given_up(&mut self.given_up);
            if let Some(&block) = self.given_up.first() {
                events.push(FecEvent {
                    time: now,
                    group: group_key,
                    path: i,
                    kind: FecEventKind::BlockAbandoned {
                        block,
                        symbols: self.given_up.len() as u32,
                    },
                });
            }
        }
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
                if let Some(events) = self.events.as_mut() {
                    for kind in [
                        FecEventKind::SourceRecovered {
                            block: repair_block,
                            symbol: d.symbol,
                        },
                        FecEventKind::RecoverySignalled {
                            symbol: d.symbol,
                            trigger: signal,
                        },
                    ] {
                        events.push(FecEvent {
                            time: now,
                            group: group_key,
                            path: target,
                            kind,
                        });
                    }
                }
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

    /// The path's current RTT estimate: caps the flush threshold of the flows it carries.
    pub fn set_rtt(&mut self, path: PathKey, rtt: Option<Duration>) {
        if let Some(p) = self.groups.path_mut(path) {
            p.rtt = rtt;
        }
    }

    /// Tail mode: the path's congestion window room, as the stack sees it now.
    pub fn set_tail_budget(&mut self, path: PathKey, budget: Option<TailBudget>) {
        if let Some(p) = self.groups.path_mut(path) {
            p.budget = budget;
        }
    }

    /// Flush the partial blocks of flows whose sender went quiet (self::flush).
    pub fn poll_flush(&mut self, now: Instant, out: &mut Vec<Outgoing>) {
        let before = out.len();
        for key in self.groups.keys() {
            self.flush_group(key, Some(now), out);
        }
        self.note_sent(now, out, before, None);
    }

    /// Send the repairs of every partial block of `remote`'s connection now (the `stats` request
    /// does this so the counters include the transfer's tail repairs). Tail mode sends nothing
    /// here: its repairs go out only when the sender goes quiet, within the window.
    pub fn flush_now(&mut self, remote: SocketAddr, out: &mut Vec<Outgoing>) {
        let key = self.groups.key_of(remote);
        let before = out.len();
        self.flush_group(key, None, out);
        self.note_sent(Instant::now(), out, before, None);
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
        let scratch = &mut self.scratch;
        let Some(group) = self.groups.by_key_mut(key) else {
            return;
        };
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
                None => flow.enc.flush(scratch),
                Some(n) => {
                    flow.since_tail = 0;
                    if n > 0 {
                        flow.enc.tail_repairs(n, scratch);
                        let c = &mut group.paths[flow.last_path].counters;
                        c.tail_repairs += n as u64;
                        c.tails += 1;
                    }
                }
            }
            let flow_id = enveloped.then_some(f as u8);
            route(group, multipath, f, flow_id, ECN_ECT0, scratch, out);
        }
    }

    /// Count a datagram the loopback link dropped on `path`.
    pub fn record_drop(&mut self, path: PathKey) {
        if let Some(p) = self.groups.path_mut(path) {
            p.counters.wire_dropped += 1;
        }
    }

    /// Count a datagram the adapter dropped before the wire on `path` (backlog full, send error).
    pub fn record_send_drop(&mut self, path: PathKey) {
        if let Some(p) = self.groups.path_mut(path) {
            p.counters.send_dropped += 1;
        }
    }

    /// Counters of every path of `remote`'s connection, in the order they were first seen.
    pub fn paths(&self, remote: SocketAddr) -> Vec<(PathKey, Counters)> {
        self.groups
            .get(remote)
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
        self.groups.get(remote).map_or(0, |g| {
            g.decoders
                .values()
                .map(|d| d.stats().blocks_with_losses)
                .sum()
        })
    }

    /// When the last datagram from `remote`'s connection arrived, on any path.
    pub fn last_received(&self, remote: SocketAddr) -> Option<Instant> {
        self.groups
            .get(remote)
            .and_then(|g| g.paths.iter().filter_map(|p| p.last_received).max())
    }
}
