//! The FEC socket: a quinn `AsyncUdpSocket` that wraps a real UDP socket and runs every QUIC
//! datagram through a per-peer FEC encoder (out) and decoder (in).
//!
//! Out: each QUIC datagram becomes a source datagram with a small FEC header; the encoder adds
//! repair datagrams as its scheme says; a partial block is flushed after a short idle time.
//! In: the decoder hands back received and recovered QUIC datagrams; a recovered one is given to
//! quinn ECN-CE marked (`Signal::Ce`, so the sender's controller backs off once, without a
//! retransmission) or as it was sent (`Signal::Hide`).
//! `fecq loopback` adds a seeded loss process that drops datagrams just before they are sent.

use std::collections::{HashMap, VecDeque};
use std::fmt;
use std::io::{self, IoSliceMut};
use std::net::SocketAddr;
use std::os::fd::AsRawFd;
use std::pin::Pin;
use std::str::FromStr;
use std::sync::{Arc, Mutex, Weak};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use fec_core::{Decoder, DecoderStats, Delivered, Encoder, Scheme};
use quinn::udp::{EcnCodepoint, RecvMeta, Transmit, UdpSocketState};
use quinn::{AsyncUdpSocket, UdpPoller};
use serde::Serialize;
use tokio::io::Interest;

use crate::flush::FlushPolicy;
use crate::loss::LossProcess;

/// How a recovered datagram is shown to quinn.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Signal {
    /// ECN-CE marked: quinn's congestion controller reacts as to a loss, nothing is retransmitted.
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

/// The largest QUIC datagram quinn may hand us (its MTU, with path MTU discovery off); the FEC
/// header comes on top, so a 1200-byte QUIC packet travels in at most 1200 + overhead bytes.
pub const QUIC_MTU: u16 = 1200;
/// Peers whose FEC state is kept at once; the least recently active one is evicted beyond this,
/// so the memory held stays bounded whatever arrives.
const MAX_PEERS: usize = 256;
/// Datagrams waiting for socket space; beyond this they are dropped (as a full queue would).
const MAX_BACKLOG: usize = 1024;
/// Received-and-decoded datagrams waiting for quinn; beyond this the oldest is dropped.
const MAX_READY: usize = 4096;

#[derive(Clone, Debug)]
pub struct FecOptions {
    pub scheme: Scheme,
    pub signal: Signal,
    /// Least idle time after which a partial block is flushed (repairs sent for what it holds);
    /// the actual threshold follows the peer's send pace (crate::flush).
    pub flush_after: Duration,
    pub rcvbuf: usize,
    pub sndbuf: usize,
}

/// Counters for one peer, as seen by this endpoint's FEC layer.
#[derive(Clone, Copy, Debug, Default, Serialize)]
pub struct PeerCounters {
    /// Datagrams put on the wire (source + repair), including those the loss model dropped.
    pub wire_datagrams_sent: u64,
    pub wire_bytes_sent: u64,
    pub repair_sent: u64,
    /// Datagrams the in-process loss model dropped (loopback only).
    pub wire_dropped: u64,
    pub wire_datagrams_received: u64,
    pub wire_bytes_received: u64,
    /// QUIC datagrams the decoder rebuilt from repair datagrams.
    pub recovered: u64,
    /// QUIC datagrams handed to quinn (received + recovered).
    pub delivered: u64,
    /// Datagrams the decoder could not use (malformed, truncated, stale or duplicates) and ignored.
    pub ignored: u64,
}

struct Peer {
    enc: Encoder,
    dec: Decoder,
    counters: PeerCounters,
    last_active: Instant,
    /// When a datagram last arrived from this peer (for the error text of an idle timeout).
    last_received: Option<Instant>,
    /// Send pace and the partial-block flush decision (crate::flush).
    flush: FlushPolicy,
}

struct Ready {
    from: SocketAddr,
    payload: Vec<u8>,
    ecn: Option<EcnCodepoint>,
}

/// A datagram on its way out: destination, bytes, ECN codepoint.
type Outgoing = (SocketAddr, Vec<u8>, Option<EcnCodepoint>);

/// `fecq loopback --rate-mbit`: a simulated bottleneck on the send side. Datagrams leave at
/// `bytes_per_sec` in FIFO order (each departs when the previous one has been "serialised");
/// beyond `limit_bytes` queued (200 ms at the rate) they are dropped, as a tail-drop router queue
/// would. quinn's sends are then ACK-clocked by this link, as over a real bottleneck.
struct Shaper {
    bytes_per_sec: f64,
    limit_bytes: usize,
    /// When the link finishes sending what is queued.
    busy_until: Instant,
    queued_bytes: usize,
    queue: VecDeque<(Instant, Outgoing)>,
}

impl Shaper {
    fn new(bits_per_sec: f64) -> Self {
        let bytes_per_sec = bits_per_sec / 8.0;
        Shaper {
            bytes_per_sec,
            limit_bytes: ((bytes_per_sec * 0.2) as usize).max(16 * 1024),
            busy_until: Instant::now(),
            queued_bytes: 0,
            queue: VecDeque::new(),
        }
    }

    /// Queue a datagram; false if the queue is full (the datagram is dropped).
    fn enqueue(&mut self, item: Outgoing) -> bool {
        let len = item.1.len();
        if self.queued_bytes + len > self.limit_bytes {
            return false;
        }
        let start = self.busy_until.max(Instant::now());
        self.busy_until = start + Duration::from_secs_f64(len as f64 / self.bytes_per_sec);
        self.queued_bytes += len;
        self.queue.push_back((self.busy_until, item));
        true
    }

    /// The next datagram whose time has come.
    fn pop_due(&mut self, now: Instant) -> Option<Outgoing> {
        if self.queue.front().is_some_and(|(due, _)| *due <= now) {
            let (_, item) = self.queue.pop_front()?;
            self.queued_bytes -= item.1.len();
            return Some(item);
        }
        None
    }
}

struct Inner {
    peers: HashMap<SocketAddr, Peer>,
    backlog: VecDeque<Outgoing>,
    ready: VecDeque<Ready>,
    loss: Option<LossProcess>,
    shaper: Option<Shaper>,
    /// Scratch space for one (possibly GRO-coalesced) receive.
    recv_buf: Vec<u8>,
    out: Vec<Vec<u8>>,
    delivered: Vec<Delivered>,
}

pub struct FecSocket {
    io: tokio::net::UdpSocket,
    state: UdpSocketState,
    opts: FecOptions,
    inner: Mutex<Inner>,
    /// Wakes the shaper task when its queue was empty (loopback `--rate-mbit` only).
    shaper_wake: tokio::sync::Notify,
    /// Connections over this socket, by peer address: their RTT caps the flush threshold.
    /// Never locked together with a connection's own lock held elsewhere (see flush_idle).
    connections: Mutex<HashMap<SocketAddr, quinn::Connection>>,
}

impl fmt::Debug for FecSocket {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FecSocket")
            .field("scheme", &self.opts.scheme.to_string())
            .field("signal", &self.opts.signal)
            .finish_non_exhaustive()
    }
}

/// Ask for `bytes` of socket buffer; as root, SO_*BUFFORCE goes past net.core.[rw]mem_max.
fn set_buffer(sock: &std::net::UdpSocket, force: libc::c_int, plain: libc::c_int, bytes: usize) {
    let value = bytes.min(i32::MAX as usize) as libc::c_int;
    for opt in [force, plain] {
        // SAFETY: setsockopt on a valid, open descriptor with a correctly sized int option.
        let rc = unsafe {
            libc::setsockopt(
                sock.as_raw_fd(),
                libc::SOL_SOCKET,
                opt,
                &value as *const libc::c_int as *const libc::c_void,
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            )
        };
        if rc == 0 {
            return;
        }
    }
}

impl FecSocket {
    /// Wrap a bound UDP socket. Must be called inside a tokio runtime (it spawns the flush task).
    pub fn new(
        sock: std::net::UdpSocket,
        opts: FecOptions,
        loss: Option<LossProcess>,
    ) -> io::Result<Arc<Self>> {
        set_buffer(&sock, libc::SO_RCVBUFFORCE, libc::SO_RCVBUF, opts.rcvbuf);
        set_buffer(&sock, libc::SO_SNDBUFFORCE, libc::SO_SNDBUF, opts.sndbuf);
        let state = UdpSocketState::new((&sock).into())?;
        sock.set_nonblocking(true)?;
        let io = tokio::net::UdpSocket::from_std(sock)?;
        let shaper = loss.as_ref().and_then(|l| l.rate_bps).map(Shaper::new);
        let shaped = shaper.is_some();
        let socket = Arc::new(FecSocket {
            io,
            state,
            opts,
            inner: Mutex::new(Inner {
                peers: HashMap::new(),
                backlog: VecDeque::new(),
                ready: VecDeque::new(),
                loss,
                shaper,
                recv_buf: vec![0u8; 65536],
                out: Vec::new(),
                delivered: Vec::new(),
            }),
            shaper_wake: tokio::sync::Notify::new(),
            connections: Mutex::new(HashMap::new()),
        });
        if socket.opts.scheme != Scheme::None {
            tokio::spawn(flush_task(Arc::downgrade(&socket)));
        }
        if shaped {
            tokio::spawn(shaper_task(Arc::downgrade(&socket)));
        }
        Ok(socket)
    }

    pub fn options(&self) -> &FecOptions {
        &self.opts
    }

    /// Counters for one peer (zero if it was never seen or was evicted).
    pub fn peer_counters(&self, peer: SocketAddr) -> PeerCounters {
        let inner = self.inner.lock().unwrap();
        inner
            .peers
            .get(&peer)
            .map(|p| p.counters)
            .unwrap_or_default()
    }

    /// When the last datagram from `peer` arrived (None if none did, or it was evicted).
    pub fn last_received(&self, peer: SocketAddr) -> Option<Instant> {
        let inner = self.inner.lock().unwrap();
        inner.peers.get(&peer).and_then(|p| p.last_received)
    }

    /// Sum over all peers, for an endpoint with one connection (the client, loopback).
    pub fn total_counters(&self) -> PeerCounters {
        let inner = self.inner.lock().unwrap();
        let mut t = PeerCounters::default();
        for p in inner.peers.values() {
            let c = &p.counters;
            t.wire_datagrams_sent += c.wire_datagrams_sent;
            t.wire_bytes_sent += c.wire_bytes_sent;
            t.repair_sent += c.repair_sent;
            t.wire_dropped += c.wire_dropped;
            t.wire_datagrams_received += c.wire_datagrams_received;
            t.wire_bytes_received += c.wire_bytes_received;
            t.recovered += c.recovered;
            t.delivered += c.delivered;
            t.ignored += c.ignored;
        }
        t
    }

    fn peer<'a>(&self, peers: &'a mut HashMap<SocketAddr, Peer>, addr: SocketAddr) -> &'a mut Peer {
        if !peers.contains_key(&addr) && peers.len() >= MAX_PEERS {
            let oldest = peers
                .iter()
                .min_by_key(|(_, p)| p.last_active)
                .map(|(a, _)| *a);
            if let Some(a) = oldest {
                peers.remove(&a);
            }
        }
        let now = Instant::now();
        peers.entry(addr).or_insert_with(|| Peer {
            enc: Encoder::new(self.opts.scheme, usize::from(QUIC_MTU)),
            dec: Decoder::new(self.opts.scheme),
            counters: PeerCounters::default(),
            last_active: now,
            last_received: None,
            flush: FlushPolicy::new(self.opts.flush_after),
        })
    }

    /// Put one framed datagram on the wire (or drop it, if the loss model says so).
    fn send_wire(
        &self,
        loss: &mut Option<LossProcess>,
        shaper: &mut Option<Shaper>,
        counters: &mut PeerCounters,
        to: SocketAddr,
        data: &[u8],
        ecn: Option<EcnCodepoint>,
    ) -> io::Result<()> {
        if let Some(lp) = loss.as_mut() {
            if lp.lose() {
                counters.wire_dropped += 1;
                return Ok(());
            }
        }
        if let Some(sh) = shaper.as_mut() {
            if !sh.enqueue((to, data.to_vec(), ecn)) {
                counters.wire_dropped += 1;
            } else if sh.queue.len() == 1 {
                self.shaper_wake.notify_one();
            }
            return Ok(());
        }
        self.send_now(to, data, ecn)
    }

    fn send_now(&self, to: SocketAddr, data: &[u8], ecn: Option<EcnCodepoint>) -> io::Result<()> {
        let transmit = Transmit {
            destination: to,
            ecn,
            contents: data,
            segment_size: None,
            src_ip: None,
        };
        self.io.try_io(Interest::WRITABLE, || {
            self.state.send((&self.io).into(), &transmit)
        })
    }

    /// Send what the encoder produced; what does not fit in the socket now waits in the backlog.
    fn send_out(&self, inner: &mut Inner, to: SocketAddr, ecn: Option<EcnCodepoint>) {
        let Inner {
            peers,
            backlog,
            loss,
            shaper,
            out,
            ..
        } = inner;
        let Some(peer) = peers.get_mut(&to) else {
            out.clear();
            return;
        };
        for d in out.drain(..) {
            peer.counters.wire_datagrams_sent += 1;
            peer.counters.wire_bytes_sent += d.len() as u64;
            if !backlog.is_empty() {
                if backlog.len() < MAX_BACKLOG {
                    backlog.push_back((to, d, ecn));
                }
                continue;
            }
            match self.send_wire(loss, shaper, &mut peer.counters, to, &d, ecn) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => backlog.push_back((to, d, ecn)),
                // Other send errors (e.g. unreachable) are a lost datagram, as on a real network.
                Err(_) => {}
            }
        }
    }

    /// Try to empty the backlog; WouldBlock if it could not.
    fn drain_backlog(&self, inner: &mut Inner) -> io::Result<()> {
        while let Some((to, d, ecn)) = inner.backlog.pop_front() {
            let mut scratch = PeerCounters::default();
            match self.send_wire(
                &mut inner.loss,
                &mut inner.shaper,
                &mut scratch,
                to,
                &d,
                ecn,
            ) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    inner.backlog.push_front((to, d, ecn));
                    return Err(e);
                }
                Err(_) => {}
            }
            if scratch.wire_dropped > 0 {
                if let Some(p) = inner.peers.get_mut(&to) {
                    p.counters.wire_dropped += scratch.wire_dropped;
                }
            }
        }
        Ok(())
    }

    /// Let the flush policy of this connection's peer use its RTT (crate::flush).
    pub fn track_connection(&self, conn: &quinn::Connection) {
        let mut conns = self.connections.lock().unwrap();
        conns.retain(|_, c| c.close_reason().is_none());
        conns.insert(conn.remote_address(), conn.clone());
    }

    /// Flush the partial blocks of peers that went quiet (crate::flush), and the backlog.
    fn flush_idle(&self) {
        // RTTs first, without our lock: quinn calls try_send (which takes it) with the
        // connection's lock held, so taking them in the other order could deadlock.
        let rtts: Vec<(SocketAddr, Duration)> = {
            let mut conns = self.connections.lock().unwrap();
            conns.retain(|_, c| c.close_reason().is_none());
            conns.iter().map(|(a, c)| (*a, c.rtt())).collect()
        };
        let mut inner = self.inner.lock().unwrap();
        let _ = self.drain_backlog(&mut inner);
        for (addr, rtt) in rtts {
            if let Some(p) = inner.peers.get_mut(&addr) {
                p.flush.set_rtt(Some(rtt));
            }
        }
        let now = Instant::now();
        let idle: Vec<SocketAddr> = inner
            .peers
            .iter()
            .filter(|(_, p)| p.flush.should_flush(now))
            .map(|(a, _)| *a)
            .collect();
        for addr in idle {
            self.flush_locked(&mut inner, addr);
        }
    }

    /// Send the repairs of `peer`'s partial block now, without waiting for the sender to go
    /// quiet (the `stats` request does this so the counters include the transfer's tail repairs).
    pub fn flush_peer(&self, peer: SocketAddr) {
        let mut inner = self.inner.lock().unwrap();
        self.flush_locked(&mut inner, peer);
    }

    fn flush_locked(&self, inner: &mut Inner, addr: SocketAddr) {
        let Some(peer) = inner.peers.get_mut(&addr) else {
            return;
        };
        if !peer.flush.take_pending() {
            return;
        }
        inner.out.clear();
        peer.enc.flush(&mut inner.out);
        peer.counters.repair_sent += inner.out.len() as u64;
        self.send_out(inner, addr, Some(EcnCodepoint::Ect0));
    }

    fn receive_wire(
        &self,
        inner: &mut Inner,
        from: SocketAddr,
        datagram_len: usize,
        offset: usize,
        ecn: Option<EcnCodepoint>,
    ) {
        let Inner {
            peers,
            ready,
            recv_buf,
            delivered,
            ..
        } = inner;
        let peer = self.peer(peers, from);
        peer.last_active = Instant::now();
        peer.last_received = Some(peer.last_active);
        peer.counters.wire_datagrams_received += 1;
        peer.counters.wire_bytes_received += datagram_len as u64;
        delivered.clear();
        let before = ignored(&peer.dec.stats());
        peer.dec
            .receive(&recv_buf[offset..offset + datagram_len], delivered);
        peer.counters.ignored += ignored(&peer.dec.stats()) - before;
        for d in delivered.drain(..) {
            peer.counters.delivered += 1;
            let ecn = if d.recovered {
                peer.counters.recovered += 1;
                match self.opts.signal {
                    Signal::Ce => Some(EcnCodepoint::Ce),
                    Signal::Hide => EcnCodepoint::from_bits(d.ecn),
                }
            } else if self.opts.scheme == Scheme::None {
                ecn
            } else {
                // A received datagram keeps the mark the network gave it (CE included).
                match ecn {
                    Some(EcnCodepoint::Ce) => Some(EcnCodepoint::Ce),
                    _ => EcnCodepoint::from_bits(d.ecn),
                }
            };
            if ready.len() >= MAX_READY {
                ready.pop_front();
            }
            ready.push_back(Ready {
                from,
                payload: d.payload,
                ecn,
            });
        }
    }
}

/// Metadata of one datagram handed to quinn. Starts from default (RecvMeta is non-exhaustive in
/// some quinn-udp versions) and sets `stride = len`: one datagram per buffer.
#[allow(clippy::field_reassign_with_default)]
fn recv_meta(from: SocketAddr, len: usize, ecn: Option<EcnCodepoint>) -> RecvMeta {
    let mut m = RecvMeta::default();
    m.addr = from;
    m.len = len;
    m.stride = len;
    m.ecn = ecn;
    m.dst_ip = None;
    m
}

/// Datagrams the decoder had no use for: malformed, duplicated, or covering forgotten symbols.
fn ignored(s: &DecoderStats) -> u64 {
    s.malformed + s.duplicates + s.stale
}

async fn flush_task(socket: Weak<FecSocket>) {
    let period = match socket.upgrade() {
        Some(s) => (s.opts.flush_after / 2).max(Duration::from_millis(1)),
        None => return,
    };
    let mut tick = tokio::time::interval(period);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        match socket.upgrade() {
            Some(s) => s.flush_idle(),
            None => return,
        }
    }
}

/// Release the shaper's datagrams when their time comes (loopback `--rate-mbit` only).
async fn shaper_task(socket: Weak<FecSocket>) {
    loop {
        let Some(s) = socket.upgrade() else { return };
        let next_due = {
            let mut inner = s.inner.lock().unwrap();
            let now = Instant::now();
            let sh = inner.shaper.as_mut().expect("shaper task without a shaper");
            while let Some((to, d, ecn)) = sh.pop_due(now) {
                // A full socket buffer or an unreachable peer is a lost datagram here.
                let _ = s.send_now(to, &d, ecn);
            }
            sh.queue.front().map(|(due, _)| *due)
        };
        // Wait for the next departure, or for a datagram queued into an empty queue (a
        // notification sent meanwhile is kept as a permit); re-check at least every 50 ms so the
        // task ends soon after the socket is gone.
        let deadline = next_due.unwrap_or_else(|| Instant::now() + Duration::from_millis(50));
        tokio::select! {
            _ = tokio::time::sleep_until(deadline.into()) => {}
            _ = s.shaper_wake.notified() => {}
        }
    }
}

impl AsyncUdpSocket for FecSocket {
    fn create_io_poller(self: Arc<Self>) -> Pin<Box<dyn UdpPoller>> {
        Box::pin(Poller {
            socket: self,
            fut: None,
        })
    }

    fn try_send(&self, transmit: &Transmit) -> io::Result<()> {
        let mut guard = self.inner.lock().unwrap();
        let inner = &mut *guard;
        // Refuse new work while older datagrams wait: quinn retries when writable.
        self.drain_backlog(inner)?;
        let ecn_bits = transmit.ecn.map_or(0, |e| e as u8);
        let seg = transmit
            .segment_size
            .unwrap_or(transmit.contents.len())
            .max(1);
        for chunk in transmit.contents.chunks(seg) {
            let peer = self.peer(&mut inner.peers, transmit.destination);
            let now = Instant::now();
            peer.flush.on_send(now);
            peer.last_active = now;
            inner.out.clear();
            peer.enc.protect(chunk, ecn_bits, &mut inner.out);
            // One source datagram per QUIC datagram; anything beyond it is repair.
            peer.counters.repair_sent += inner.out.len().saturating_sub(1) as u64;
            self.send_out(inner, transmit.destination, transmit.ecn);
        }
        Ok(())
    }

    fn poll_recv(
        &self,
        cx: &mut Context,
        bufs: &mut [IoSliceMut<'_>],
        meta: &mut [RecvMeta],
    ) -> Poll<io::Result<usize>> {
        let mut guard = self.inner.lock().unwrap();
        let inner = &mut *guard;
        loop {
            // Hand over everything decoded so far (received and recovered) before reading more:
            // a repair datagram consumed below must not end the poll while a recovery is ready.
            let mut n = 0;
            while n < bufs.len().min(meta.len()) {
                let Some(item) = inner.ready.pop_front() else {
                    break;
                };
                if item.payload.len() > bufs[n].len() {
                    continue; // cannot be a datagram quinn sent at our MTU: ignore it
                }
                bufs[n][..item.payload.len()].copy_from_slice(&item.payload);
                meta[n] = recv_meta(item.from, item.payload.len(), item.ecn);
                n += 1;
            }
            if n > 0 {
                return Poll::Ready(Ok(n));
            }
            match self.io.poll_recv_ready(cx) {
                Poll::Ready(Ok(())) => {}
                Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                Poll::Pending => return Poll::Pending,
            }
            let mut rmeta = [RecvMeta::default()];
            let res = {
                let mut slices = [IoSliceMut::new(&mut inner.recv_buf)];
                self.io.try_io(Interest::READABLE, || {
                    self.state.recv((&self.io).into(), &mut slices, &mut rmeta)
                })
            };
            match res {
                Ok(_) => {
                    let m = rmeta[0];
                    let stride = if m.stride == 0 { m.len } else { m.stride };
                    let mut offset = 0;
                    while offset < m.len {
                        let len = stride.min(m.len - offset);
                        self.receive_wire(inner, m.addr, len, offset, m.ecn);
                        offset += len;
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
                Err(e) => return Poll::Ready(Err(e)),
            }
        }
    }

    fn local_addr(&self) -> io::Result<SocketAddr> {
        self.io.local_addr()
    }

    fn may_fragment(&self) -> bool {
        // Keeps quinn's path MTU discovery off: datagrams stay at QUIC_MTU plus the FEC header.
        true
    }
}

type WritableFuture = Pin<Box<dyn std::future::Future<Output = io::Result<()>> + Send + Sync>>;

struct Poller {
    socket: Arc<FecSocket>,
    fut: Option<WritableFuture>,
}

impl fmt::Debug for Poller {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Poller").finish_non_exhaustive()
    }
}

impl UdpPoller for Poller {
    fn poll_writable(mut self: Pin<&mut Self>, cx: &mut Context) -> Poll<io::Result<()>> {
        if self.fut.is_none() {
            let socket = self.socket.clone();
            self.fut = Some(Box::pin(async move { socket.io.writable().await }));
        }
        let res = self.fut.as_mut().unwrap().as_mut().poll(cx);
        if res.is_ready() {
            self.fut = None;
        }
        res
    }
}

impl FecSocket {
    /// The bound address, as a message on failure.
    pub fn local_addr_checked(&self) -> Result<SocketAddr, String> {
        self.io
            .local_addr()
            .map_err(|e| format!("local address: {e}"))
    }
}
