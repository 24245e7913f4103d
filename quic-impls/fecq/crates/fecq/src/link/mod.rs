//! The simulated link of `fecq loopback`, applied to wire datagrams (after the FEC layer) before
//! they reach the socket: a seeded loss process and, optionally, a rate-limited tail-drop queue.
//! IO-free like the FEC layer: the adapter asks [`Link::admit`] what to do with each datagram and
//! sends what [`Link::pop_due`] releases when its time comes. One loss process and one queue per
//! path (in the order paths are first used), each with its own seed.

pub mod loss;

use std::collections::{HashMap, VecDeque};
use std::time::{Duration, Instant};

use crate::layer::{Outgoing, PathKey};
use crate::link::loss::LossProcess;

/// `fecq loopback --rate-mbit`: a simulated bottleneck on the send side. Datagrams leave at
/// `bytes_per_sec` in FIFO order (each departs when the previous one has been "serialised");
/// beyond `limit_bytes` queued (200 ms at the rate) they are dropped, as a tail-drop router queue
/// would. The QUIC stack's sends are then ACK-clocked by this link, as over a real bottleneck.
struct Shaper {
    bytes_per_sec: f64,
    limit_bytes: usize,
    /// When the link finishes sending what is queued.
    busy_until: Instant,
    queued_bytes: usize,
    queue: VecDeque<(Instant, Outgoing)>,
}

impl Shaper {
    fn new(bits_per_sec: f64, now: Instant) -> Self {
        let bytes_per_sec = bits_per_sec / 8.0;
        Shaper {
            bytes_per_sec,
            limit_bytes: ((bytes_per_sec * 0.2) as usize).max(16 * 1024),
            busy_until: now,
            queued_bytes: 0,
            queue: VecDeque::new(),
        }
    }

    /// Queue a datagram; false if the queue is full (the datagram is dropped).
    fn enqueue(&mut self, item: Outgoing, now: Instant) -> bool {
        let len = item.data.len();
        if self.queued_bytes + len > self.limit_bytes {
            return false;
        }
        let start = self.busy_until.max(now);
        self.busy_until = start + Duration::from_secs_f64(len as f64 / self.bytes_per_sec);
        self.queued_bytes += len;
        self.queue.push_back((self.busy_until, item));
        true
    }

    fn pop_due(&mut self, now: Instant) -> Option<Outgoing> {
        if self.queue.front().is_some_and(|(due, _)| *due <= now) {
            let (_, item) = self.queue.pop_front()?;
            self.queued_bytes -= item.data.len();
            return Some(item);
        }
        None
    }
}

struct PathLink {
    loss: LossProcess,
    shaper: Option<Shaper>,
}

/// What the link did with a datagram.
#[derive(Debug, PartialEq, Eq)]
pub enum Admit {
    /// Send it now.
    Send(Outgoing),
    /// Queued behind the rate limit; `first`: the queue was empty (wake the release task).
    Queued { first: bool },
    /// Lost (loss model or full queue).
    Dropped,
}

/// The loss process of path `index` (0-based, in order of first use).
pub type LossFactory = Box<dyn Fn(u64) -> LossProcess + Send>;

pub struct Link {
    factory: LossFactory,
    paths: HashMap<PathKey, PathLink>,
}

impl Link {
    pub fn new(factory: LossFactory) -> Self {
        Link {
            factory,
            paths: HashMap::new(),
        }
    }

    /// Every path follows its own copy of `process` (e.g. a known loss pattern, single path).
    pub fn each_path(process: LossProcess) -> Self {
        Link::new(Box::new(move |_| process.clone()))
    }

    pub fn admit(&mut self, o: Outgoing, now: Instant) -> Admit {
        let n = self.paths.len() as u64;
        let factory = &self.factory;
        let path = self.paths.entry(o.path).or_insert_with(|| {
            let loss = factory(n);
            let shaper = loss.rate_bps.map(|bps| Shaper::new(bps, now));
            PathLink { loss, shaper }
        });
        if path.loss.lose() {
            return Admit::Dropped;
        }
        match path.shaper.as_mut() {
            None => Admit::Send(o),
            Some(sh) => {
                if !sh.enqueue(o, now) {
                    Admit::Dropped
                } else {
                    Admit::Queued {
                        first: sh.queue.len() == 1,
                    }
                }
            }
        }
    }

    /// Datagrams whose departure time has come, and when the next one is due.
    pub fn pop_due(&mut self, now: Instant, out: &mut Vec<Outgoing>) -> Option<Instant> {
        let mut next: Option<Instant> = None;
        for p in self.paths.values_mut() {
            if let Some(sh) = p.shaper.as_mut() {
                while let Some(o) = sh.pop_due(now) {
                    out.push(o);
                }
                if let Some((due, _)) = sh.queue.front() {
                    next = Some(next.map_or(*due, |n| n.min(*due)));
                }
            }
        }
        next
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::link::loss::LossModel;

    fn out(i: u8, path: PathKey) -> Outgoing {
        Outgoing {
            path,
            data: vec![i; 1000],
            ecn: 0,
            repair: false,
        }
    }

    #[test]
    fn each_path_draws_its_own_losses_and_rate() {
        let a = PathKey::new(None, "127.0.0.1:1".parse().unwrap());
        let b = PathKey::new(None, "127.0.0.2:1".parse().unwrap());
        let mut link = Link::new(Box::new(|i| {
            LossProcess::at_indices(if i == 0 { vec![1] } else { vec![0] }).with_rate(Some(8e6))
        }));
        let t0 = Instant::now();
        let verdicts: Vec<Admit> = [(0, a), (1, a), (2, b), (3, b)]
            .into_iter()
            .map(|(i, p)| link.admit(out(i, p), t0))
            .collect();
        assert_eq!(verdicts[1], Admit::Dropped);
        assert_eq!(verdicts[2], Admit::Dropped);
        assert_eq!(verdicts[0], Admit::Queued { first: true });
        let mut due = Vec::new();
        // 1000 bytes at 1 MB/s: 1 ms each.
        let next = link.pop_due(t0, &mut due);
        assert!(due.is_empty() && next.is_some());
        link.pop_due(t0 + Duration::from_millis(2), &mut due);
        assert_eq!(due.len(), 2);
        let _ = LossModel::Uniform;
    }
}
