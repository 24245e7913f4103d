//! What every socket does around the IO-free FEC layer, written once and still IO-free: the send
//! backlog (datagrams waiting for socket space), the queue of decoded datagrams waiting for the
//! QUIC stack, and the loopback link between the layer and the socket. The shared socket
//! (crate::socket) holds a `Core` under its lock and supplies a [`Wire`]: how to put one datagram
//! on its UDP socket. No async runtime here.

use std::collections::VecDeque;
use std::io;
use std::net::SocketAddr;
use std::time::Instant;

use crate::layer::{Content, FecLayer, Incoming, LayerConfig, Outgoing, PathKey};
use crate::link::{Admit, Link};

/// Datagrams waiting for socket space; beyond this they are dropped (as a full queue would).
const MAX_BACKLOG: usize = 1024;
/// Received-and-decoded datagrams waiting for the stack; beyond this the oldest is dropped.
const MAX_READY: usize = 4096;

/// One UDP socket, as the core sees it.
pub trait Wire {
    /// Send one datagram now, from `o.path.local` (if set) to `o.path.remote`; `WouldBlock`
    /// when the socket has no room.
    fn send(&self, o: &Outgoing) -> io::Result<()>;
}

pub struct Core {
    layer: FecLayer,
    link: Option<Link>,
    backlog: VecDeque<Outgoing>,
    ready: VecDeque<Incoming>,
    out: Vec<Outgoing>,
    /// The link queued a datagram into its empty queue: its release task must be woken.
    wake: bool,
}

impl Core {
    pub fn new(cfg: LayerConfig, link: Option<Link>) -> Self {
        Core {
            layer: FecLayer::new(cfg),
            link,
            backlog: VecDeque::new(),
            ready: VecDeque::new(),
            out: Vec::new(),
            wake: false,
        }
    }

    pub fn layer(&self) -> &FecLayer {
        &self.layer
    }

    pub fn layer_mut(&mut self) -> &mut FecLayer {
        &mut self.layer
    }

    pub fn has_link(&self) -> bool {
        self.link.is_some()
    }

    /// Whether the link's release task must be woken (and clear the flag).
    pub fn take_wake(&mut self) -> bool {
        std::mem::take(&mut self.wake)
    }

    /// The stack's send: `contents` holds one datagram, or several of `segment` bytes each
    /// (a GSO batch, split here); `content` tells what each datagram carries (crate::content).
    /// Refuses new work (`WouldBlock`) while older datagrams wait for socket space: the stack
    /// retries when the socket is writable (nothing asked of `content` then).
    #[allow(clippy::too_many_arguments)]
    pub fn send(
        &mut self,
        wire: &impl Wire,
        now: Instant,
        path: PathKey,
        contents: &[u8],
        segment: Option<usize>,
        ecn: u8,
        mut content: impl FnMut(&[u8]) -> Content,
    ) -> io::Result<()> {
        self.drain_backlog(wire)?;
        let seg = segment.unwrap_or(contents.len()).max(1);
        for chunk in contents.chunks(seg) {
            self.out.clear();
            let c = content(chunk);
            self.layer.send(now, path, chunk, ecn, c, &mut self.out);
            self.send_out(wire, now);
        }
        Ok(())
    }

    /// Whether a wire datagram is a repair (FecLayer::is_repair).
    pub fn is_repair(&self, data: &[u8]) -> bool {
        self.layer.is_repair(data)
    }

    /// One wire datagram received on `path`: decoded datagrams join the ready queue. Returns how
    /// many of them were rebuilt from repairs.
    pub fn receive(&mut self, now: Instant, path: PathKey, data: &[u8], ecn: u8) -> u32 {
        let mut got = Vec::new();
        self.layer.receive(now, path, data, ecn, &mut got);
        let rebuilt = got.iter().filter(|d| d.recovered).count() as u32;
        for d in got {
            if self.ready.len() >= MAX_READY {
                self.ready.pop_front();
            }
            self.ready.push_back(d);
        }
        rebuilt
    }

    pub fn pop_ready(&mut self) -> Option<Incoming> {
        self.ready.pop_front()
    }

    /// Datagrams waiting in the backlog for socket space (the socket's backlog task sends them as
    /// soon as the socket is writable: crate::socket).
    pub fn backlogged(&self) -> usize {
        self.backlog.len()
    }

    /// Send what the backlog holds, as far as the socket takes it; `WouldBlock` if some still waits.
    pub fn retry_backlog(&mut self, wire: &impl Wire) -> io::Result<()> {
        self.drain_backlog(wire)
    }

    /// Flush the partial blocks of flows that went quiet, and retry the backlog.
    pub fn flush_idle(&mut self, wire: &impl Wire, now: Instant) {
        let _ = self.drain_backlog(wire);
        self.out.clear();
        self.layer.poll_flush(now, &mut self.out);
        self.send_out(wire, now);
    }

    /// Send the repairs of `remote`'s partial blocks now.
    pub fn flush_now(&mut self, wire: &impl Wire, now: Instant, remote: SocketAddr) {
        self.out.clear();
        self.layer.flush_now(remote, &mut self.out);
        self.send_out(wire, now);
    }

    /// Release what the link's rate limit lets go at `now` (send errors are losses); returns
    /// when the next datagram is due.
    pub fn release_due(&mut self, wire: &impl Wire, now: Instant) -> Option<Instant> {
        let link = self.link.as_mut()?;
        let mut due = Vec::new();
        let next = link.pop_due(now, &mut due);
        for o in &due {
            let _ = wire.send(o);
        }
        next
    }

    fn send_out(&mut self, wire: &impl Wire, now: Instant) {
        let mut out = std::mem::take(&mut self.out);
        for o in out.drain(..) {
            if !self.backlog.is_empty() {
                if self.backlog.len() < MAX_BACKLOG {
                    self.backlog.push_back(o);
                } else {
                    self.layer.record_send_drop(o.path);
                }
                continue;
            }
            match self.send_wire(wire, o, now) {
                Ok(()) => {}
                Err((e, o)) if e.kind() == io::ErrorKind::WouldBlock => self.backlog.push_back(o),
                // Other send errors (e.g. unreachable) are a lost datagram, as on a real network.
                Err((_, o)) => self.layer.record_send_drop(o.path),
            }
        }
        self.out = out;
    }

    /// Try to empty the backlog; `WouldBlock` if it could not.
    fn drain_backlog(&mut self, wire: &impl Wire) -> io::Result<()> {
        let now = Instant::now();
        while let Some(o) = self.backlog.pop_front() {
            match self.send_wire(wire, o, now) {
                Ok(()) => {}
                Err((e, o)) if e.kind() == io::ErrorKind::WouldBlock => {
                    self.backlog.push_front(o);
                    return Err(e);
                }
                Err((_, o)) => self.layer.record_send_drop(o.path),
            }
        }
        Ok(())
    }

    /// Through the loopback link (if any), then the socket. Gives the datagram back with the
    /// error, so a `WouldBlock` one can wait in the backlog.
    fn send_wire(
        &mut self,
        wire: &impl Wire,
        o: Outgoing,
        now: Instant,
    ) -> Result<(), (io::Error, Outgoing)> {
        let o = match self.link.as_mut() {
            None => o,
            Some(link) => {
                let path = o.path;
                match link.admit(o, now) {
                    Admit::Send(o) => o,
                    Admit::Queued { first } => {
                        self.wake |= first;
                        return Ok(());
                    }
                    Admit::Dropped => {
                        self.layer.record_drop(path);
                        return Ok(());
                    }
                }
            }
        };
        wire.send(&o).map_err(|e| (e, o))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layer::{Protect, Signal};
    use crate::link::loss::LossProcess;
    use std::cell::RefCell;
    use std::time::Duration;

    /// A socket with room for `room` datagrams.
    struct Mock {
        room: RefCell<usize>,
        sent: RefCell<Vec<Outgoing>>,
    }

    impl Wire for Mock {
        fn send(&self, o: &Outgoing) -> io::Result<()> {
            let mut room = self.room.borrow_mut();
            if *room == 0 {
                return Err(io::ErrorKind::WouldBlock.into());
            }
            *room -= 1;
            self.sent.borrow_mut().push(o.clone());
            Ok(())
        }
    }

    fn cfg() -> LayerConfig {
        LayerConfig {
            scheme: "xor:2".parse().unwrap(),
            signal: Signal::Ce,
            flush_after: Duration::from_millis(10),
            max_payload: 1200,
            multipath: None,
            tail: None,
            protect: Protect::Stream,
        }
    }

    fn data(_: &[u8]) -> Content {
        Content::Data
    }

    #[test]
    fn backlog_holds_what_the_socket_refuses_and_gso_batches_are_split() {
        let mut core = Core::new(cfg(), None);
        let wire = Mock {
            room: RefCell::new(2),
            sent: RefCell::default(),
        };
        let path = PathKey::new(None, "127.0.0.1:9".parse().unwrap());
        // Two 100-byte datagrams in one batch: 2 sources + 1 XOR repair; room for 2.
        core.send(&wire, Instant::now(), path, &[7u8; 200], Some(100), 2, data)
            .unwrap();
        assert_eq!(wire.sent.borrow().len(), 2);
        let e = core
            .send(&wire, Instant::now(), path, &[1u8; 10], None, 2, data)
            .unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::WouldBlock);
        *wire.room.borrow_mut() = 10;
        core.send(&wire, Instant::now(), path, &[1u8; 10], None, 2, data)
            .unwrap();
        let sent = wire.sent.borrow();
        assert_eq!(sent.len(), 4);
        assert!(sent[2].repair && !sent[3].repair);
        assert_eq!(core.layer().counters(path.remote).wire_datagrams_sent, 4);
    }

    #[test]
    fn each_datagram_of_a_batch_is_protected_or_not_as_its_content_says() {
        let mut core = Core::new(cfg(), None);
        let wire = Mock {
            room: RefCell::new(100),
            sent: RefCell::default(),
        };
        let path = PathKey::new(None, "127.0.0.1:9".parse().unwrap());
        // A batch of 4: control, data, control, data (the first byte tells, here).
        let batch: Vec<u8> = [0u8, 1, 0, 1].iter().flat_map(|&b| [b; 50]).collect();
        let content = |d: &[u8]| match d[0] {
            0 => Content::Control,
            _ => Content::Data,
        };
        core.send(&wire, Instant::now(), path, &batch, Some(50), 2, content)
            .unwrap();
        let sent = wire.sent.borrow();
        let kinds: Vec<(u8, bool)> = sent.iter().map(|o| (o.data[0] >> 4, o.repair)).collect();
        // plain, source, plain, source, then xor:2's repair over the two sources.
        assert_eq!(
            kinds,
            [(5, false), (1, false), (5, false), (1, false), (2, true)]
        );
        let c = core.layer().counters(path.remote);
        assert_eq!(
            (c.plain_sent, c.repair_sent, c.wire_datagrams_sent),
            (2, 1, 5)
        );
    }

    #[test]
    fn a_full_backlog_drops_and_counts_the_drops() {
        let mut core = Core::new(cfg(), None);
        let wire = Mock {
            room: RefCell::new(0),
            sent: RefCell::default(),
        };
        let path = PathKey::new(None, "127.0.0.1:9".parse().unwrap());
        // One datagram waits in the backlog; then the layer's own flushes pile up behind it.
        core.send(&wire, Instant::now(), path, &[7u8; 100], None, 2, data)
            .unwrap();
        for _ in 0..MAX_BACKLOG + 5 {
            core.out.push(Outgoing {
                path,
                data: vec![1; 10],
                ecn: 2,
                repair: true,
            });
            core.send_out(&wire, Instant::now());
        }
        assert_eq!(core.backlog.len(), MAX_BACKLOG);
        assert_eq!(core.layer().counters(path.remote).send_dropped, 6);
    }

    #[test]
    fn link_drops_are_counted_on_their_path() {
        let link = Link::new(Box::new(|_| LossProcess::at_indices(vec![0])));
        let mut core = Core::new(cfg(), Some(link));
        let wire = Mock {
            room: RefCell::new(10),
            sent: RefCell::default(),
        };
        let path = PathKey::new(None, "127.0.0.1:9".parse().unwrap());
        core.send(&wire, Instant::now(), path, &[7u8; 100], None, 2, data)
            .unwrap();
        let c = core.layer().counters(path.remote);
        assert_eq!((c.wire_datagrams_sent, c.wire_dropped), (1, 1));
        assert!(wire.sent.borrow().is_empty());
    }
}
