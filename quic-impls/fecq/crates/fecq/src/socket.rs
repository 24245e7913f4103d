//! The quinn adapter: a quinn `AsyncUdpSocket` over a real UDP socket that runs every QUIC
//! datagram through the IO-free FEC layer (crate::layer, via the adapter core crate::driver):
//! quinn's sends become source + repair datagrams, received datagrams come back decoded, and
//! recovered ones are given to quinn ECN-CE marked (`Signal::Ce`, so the sender's controller
//! backs off once, without a retransmission) or as they were sent (`Signal::Hide`).
//! Single path: one FEC flow per peer address, fec-core's wire format unchanged.
//! `fecq loopback` puts its simulated link (crate::link) between the layer and the socket.

use std::collections::HashMap;
use std::fmt;
use std::io::{self, IoSliceMut};
use std::net::SocketAddr;
use std::os::fd::AsRawFd;
use std::pin::Pin;
use std::sync::{Arc, Mutex, Weak};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use fec_core::Scheme;
use quinn::udp::{EcnCodepoint, RecvMeta, Transmit, UdpSocketState};
use quinn::{AsyncUdpSocket, UdpPoller};
use tokio::io::Interest;

use crate::driver::{Core, Wire};
use crate::layer::{LayerConfig, Outgoing, PathKey, TailBudget};
use crate::link::Link;
use crate::loss::LossProcess;

pub use crate::layer::Signal;
/// Counters of one peer (kept under its historical name).
pub type PeerCounters = crate::layer::Counters;

/// The largest QUIC datagram quinn may hand us (its MTU, with path MTU discovery off); the FEC
/// The largest QUIC datagram quinn may hand us (its MTU, with path MTU discovery off); the FEC
/// header comes on top, so a 1200-byte QUIC packet travels in at most 1200 + overhead bytes.
pub const QUIC_MTU: u16 = 1200;

#[derive(Clone, Debug)]
pub struct FecOptions {
    pub scheme: Scheme,
    pub signal: Signal,
    /// Least idle time after which a partial block is flushed (repairs sent for what it holds);
    /// the actual threshold follows the peer's send pace (crate::flush).
    pub flush_after: Duration,
    pub rcvbuf: usize,
    pub sndbuf: usize,
    /// Tail mode's cap of repairs per tail (None: block mode); crate::tail.
    pub tail: Option<usize>,
}

impl FecOptions {
    pub fn layer_config(&self, multipath: Option<crate::layer::Multipath>) -> LayerConfig {
        LayerConfig {
            scheme: self.scheme,
            signal: self.signal,
            flush_after: self.flush_after,
            max_payload: usize::from(QUIC_MTU),
            multipath,
            tail: self.tail,
        }
    }
}

/// Ask for `bytes` of socket buffer; as root, SO_*BUFFORCE goes past net.core.[rw]mem_max.
pub fn set_buffer(
    sock: &std::net::UdpSocket,
    force: libc::c_int,
    plain: libc::c_int,
    bytes: usize,
) {
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

/// The loopback link of a socket whose sends all follow one loss process (single path).
pub fn single_path_link(loss: Option<LossProcess>) -> Option<Link> {
    loss.map(|lp| Link::new(Box::new(move |_| lp.clone())))
}

pub struct FecSocket {
    io: tokio::net::UdpSocket,
    state: UdpSocketState,
    opts: FecOptions,
    core: Mutex<Core>,
    /// Scratch space for one (possibly GRO-coalesced) receive; only poll_recv takes it, after
    /// `core`.
    recv_buf: Mutex<Vec<u8>>,
    /// Wakes the link task when its queue was empty (loopback `--rate-mbit` only).
    link_wake: tokio::sync::Notify,
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

/// The socket as the adapter core sees it.
struct QuinnWire<'a> {
    io: &'a tokio::net::UdpSocket,
    state: &'a UdpSocketState,
}

impl Wire for QuinnWire<'_> {
    fn send(&self, o: &Outgoing) -> io::Result<()> {
        let transmit = Transmit {
            destination: o.path.remote,
            ecn: EcnCodepoint::from_bits(o.ecn),
            contents: &o.data,
            segment_size: None,
            src_ip: o.path.local,
        };
        self.io.try_io(Interest::WRITABLE, || {
            self.state.send(self.io.into(), &transmit)
        })
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
        let gro = state.gro_segments();
        sock.set_nonblocking(true)?;
        let io = tokio::net::UdpSocket::from_std(sock)?;
        let shaped = loss.as_ref().is_some_and(|l| l.rate_bps.is_some());
        let core = Core::new(opts.layer_config(None), single_path_link(loss));
        let socket = Arc::new(FecSocket {
            io,
            state,
            opts,
            core: Mutex::new(core),
            recv_buf: Mutex::new(vec![0u8; crate::driver::recv_buffer_len(gro)]),
            link_wake: tokio::sync::Notify::new(),
            connections: Mutex::new(HashMap::new()),
        });
        if socket.opts.scheme != Scheme::None {
            tokio::spawn(flush_task(Arc::downgrade(&socket)));
        }
        if shaped {
            tokio::spawn(link_task(Arc::downgrade(&socket)));
        }
        Ok(socket)
    }

    fn wire(&self) -> QuinnWire<'_> {
        QuinnWire {
            io: &self.io,
            state: &self.state,
        }
    }

    pub fn options(&self) -> &FecOptions {
        &self.opts
    }

    /// Counters for one peer (zero if it was never seen or was evicted).
    pub fn peer_counters(&self, peer: SocketAddr) -> PeerCounters {
        self.core.lock().unwrap().layer().counters(peer)
    }

    /// When the last datagram from `peer` arrived (None if none did, or it was evicted).
    pub fn last_received(&self, peer: SocketAddr) -> Option<Instant> {
        self.core.lock().unwrap().layer().last_received(peer)
    }

    /// Sum over all peers, for an endpoint with one connection (the client, loopback).
    pub fn total_counters(&self) -> PeerCounters {
        self.core.lock().unwrap().layer().total()
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
        let tail = self.opts.tail.is_some();
        let rtts: Vec<(SocketAddr, Duration, Option<TailBudget>)> = {
            let mut conns = self.connections.lock().unwrap();
            conns.retain(|_, c| c.close_reason().is_none());
            conns
                .iter()
                .map(|(a, c)| {
                    (
                        *a,
                        c.rtt(),
                        tail.then(|| crate::tail::quinn_budget(c)).flatten(),
                    )
                })
                .collect()
        };
        let mut core = self.core.lock().unwrap();
        for (addr, rtt, budget) in rtts {
            let path = PathKey::new(None, addr);
            core.layer_mut().set_rtt(path, Some(rtt));
            if tail {
                core.layer_mut().set_tail_budget(path, budget);
            }
        }
        core.flush_idle(&self.wire(), Instant::now());
        self.wake_link(&mut core);
    }

    /// Send the repairs of `peer`'s partial block now, without waiting for the sender to go
    /// quiet (the `stats` request does this so the counters include the transfer's tail repairs).
    pub fn flush_peer(&self, peer: SocketAddr) {
        let mut core = self.core.lock().unwrap();
        core.flush_now(&self.wire(), Instant::now(), peer);
        self.wake_link(&mut core);
    }

    fn wake_link(&self, core: &mut Core) {
        if core.take_wake() {
            self.link_wake.notify_one();
        }
    }

    /// The bound address, as a message on failure.
    pub fn local_addr_checked(&self) -> Result<SocketAddr, String> {
        self.io
            .local_addr()
            .map_err(|e| format!("local address: {e}"))
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

/// Release the link's datagrams when their time comes (loopback `--rate-mbit` only).
async fn link_task(socket: Weak<FecSocket>) {
    loop {
        let Some(s) = socket.upgrade() else { return };
        let next_due = s
            .core
            .lock()
            .unwrap()
            .release_due(&s.wire(), Instant::now());
        // Wait for the next departure, or for a datagram queued into an empty queue (a
        // notification sent meanwhile is kept as a permit); re-check at least every 50 ms so the
        // task ends soon after the socket is gone.
        let deadline = next_due.unwrap_or_else(|| Instant::now() + Duration::from_millis(50));
        tokio::select! {
            _ = tokio::time::sleep_until(deadline.into()) => {}
            _ = s.link_wake.notified() => {}
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
        let mut core = self.core.lock().unwrap();
        let res = core.send(
            &self.wire(),
            Instant::now(),
            PathKey::new(None, transmit.destination),
            transmit.contents,
            transmit.segment_size,
            transmit.ecn.map_or(0, |e| e as u8),
        );
        self.wake_link(&mut core);
        res
    }

    fn poll_recv(
        &self,
        cx: &mut Context,
        bufs: &mut [IoSliceMut<'_>],
        meta: &mut [RecvMeta],
    ) -> Poll<io::Result<usize>> {
        let mut core = self.core.lock().unwrap();
        let mut recv_buf = self.recv_buf.lock().unwrap();
        loop {
            // Hand over everything decoded so far (received and recovered) before reading more:
            // a repair datagram consumed below must not end the poll while a recovery is ready.
            let mut n = 0;
            while n < bufs.len().min(meta.len()) {
                let Some(item) = core.pop_ready() else {
                    break;
                };
                if item.payload.len() > bufs[n].len() {
                    continue; // cannot be a datagram quinn sent at our MTU: ignore it
                }
                bufs[n][..item.payload.len()].copy_from_slice(&item.payload);
                meta[n] = recv_meta(
                    item.path.remote,
                    item.payload.len(),
                    EcnCodepoint::from_bits(item.ecn),
                );
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
                let mut slices = [IoSliceMut::new(&mut recv_buf)];
                self.io.try_io(Interest::READABLE, || {
                    self.state.recv((&self.io).into(), &mut slices, &mut rmeta)
                })
            };
            match res {
                Ok(_) => {
                    let m = rmeta[0];
                    let stride = if m.stride == 0 { m.len } else { m.stride };
                    let ecn = m.ecn.map_or(0, |e| e as u8);
                    let now = Instant::now();
                    let mut offset = 0;
                    while offset < m.len {
                        let len = stride.min(m.len - offset);
                        core.receive(
                            now,
                            PathKey::new(None, m.addr),
                            &recv_buf[offset..offset + len],
                            ecn,
                        );
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
