//! One UDP socket through the FEC layer, written once for both QUIC stacks. The stack's socket glue
//! (quinn_stack::udp, noq_stack::udp: its `AsyncUdpSocket`) hands every transmit to
//! [`FecSocket::send`] and polls [`FecSocket::poll_recv`]; the [`SocketGlue`] trait is what the
//! socket needs of the stack in turn (its UDP crate's calls and what its connections tell the flush
//! policy). Here: the adapter core (crate::driver: the layer, send backlog, decoded queue, loopback
//! link) under one lock, the flush task (partial blocks of senders gone quiet, with the RTTs and,
//! in tail mode, the window room of the connections over the socket) and the loopback link's
//! release task. Quinn's sends become source + repair datagrams, received datagrams come back
//! decoded, and recovered ones are given to the stack ECN-CE marked (`Signal::Ce`) or as sent
//! (`Signal::Hide`).
//!
//! Paths are keyed by (local IP, remote address) with multipath framing: the stack sets each
//! transmit's source address, the socket reports each datagram's destination address, and a
//! recovered datagram is handed over with the addresses of the path it was *sent* on (the layer
//! knows it), so its CE mark reaches that path's congestion controller. Single path, by the remote
//! address alone. GSO batches that still come (the stacks are told one segment per transmit) are
//! split by segment size, received GRO batches by stride.
//!
//! What each datagram carries (`--fec-protect stream`: only application data is protected; with
//! `--qlog-dir`, each datagram's `fecq:datagram_sent` says it) comes from the packets the stack
//! sealed: its crypto glue records them in the socket's [`SentPackets`] (crate::content), which
//! [`FecSocket::send`] reads for each datagram.

use std::fmt;
use std::future::Future;
use std::io::{self, IoSliceMut};
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::{Arc, Mutex, Weak};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use fec_core::Scheme;
use tokio::io::Interest;

use crate::content::SentPackets;
use crate::driver::{Core, Wire};
use crate::layer::{
    Content, Counters, FecEvent, Incoming, LayerConfig, Outgoing, PathKey, Protect, TailBudget,
};
use crate::link::Link;
use crate::options::qlog::Logs;
use crate::quic::QuicConn;

/// What the shared socket needs from a QUIC stack. quinn-udp and noq-udp have the same API in
/// separate types: the calls on them are written once ([`udp_crate_calls`]), and the stack's glue
/// adds what differs.
pub trait SocketGlue: Send + Sync + Sized + 'static {
    /// The UDP crate's `UdpSocketState`.
    type State: Send + Sync;
    /// The UDP crate's `RecvMeta`.
    type Meta;
    /// The stack's connection.
    type Conn: QuicConn;
    fn state(sock: &std::net::UdpSocket) -> io::Result<Self::State>;
    /// Datagrams one receive may coalesce (GRO).
    fn gro_segments(state: &Self::State) -> usize;
    /// Send one datagram on `io` now: `WouldBlock` when the socket has no room.
    fn send(state: &Self::State, io: &tokio::net::UdpSocket, o: &Outgoing) -> io::Result<()>;
    /// Receive one datagram, or one GRO batch of them, into `buf`.
    fn recv(
        state: &Self::State,
        io: &tokio::net::UdpSocket,
        buf: &mut [u8],
    ) -> io::Result<Received>;
    /// The metadata the stack gets with a decoded datagram.
    fn meta(d: &Incoming) -> Self::Meta;
    /// `conn`'s paths now, for the flush policy (RTT caps; tail mode: window room when `tail`).
    fn paths(conn: &Self::Conn, tail: bool, out: &mut Vec<PathNow>);
}

/// The [`SocketGlue`] calls that are the same for quinn-udp and noq-udp, written once:
/// `udp_crate_calls!(quinn::udp, send);` inside the stack's `impl SocketGlue` gives its `State`,
/// `Meta`, `state`, `send` (through the UDP crate's method `$send`), `recv` and `meta`.
///
/// A macro rather than a trait or generic function: noq-udp is a fork of quinn-udp, so the two
/// crates' `Transmit`, `RecvMeta`, `EcnCodepoint` and `UdpSocketState` are separate types with the
/// same fields and methods. No trait covers them, and one written here would need each crate to
/// implement the same field-by-field conversions again, which are all these calls are.
macro_rules! udp_crate_calls {
    ($($udp:ident)::+, $send:ident) => {
        type State = $($udp)::+::UdpSocketState;
        type Meta = $($udp)::+::RecvMeta;

        fn state(sock: &::std::net::UdpSocket) -> ::std::io::Result<Self::State> {
            $($udp)::+::UdpSocketState::new(sock.into())
        }

        fn send(
            state: &Self::State,
            io: &::tokio::net::UdpSocket,
            o: &$crate::layer::Outgoing,
        ) -> ::std::io::Result<()> {
            let transmit = $($udp)::+::Transmit {
                destination: o.path.remote,
                ecn: $($udp)::+::EcnCodepoint::from_bits(o.ecn),
                contents: &o.data,
                segment_size: None,
                src_ip: o.path.local,
            };
            state.$send(io.into(), &transmit)
        }

        fn recv(
            state: &Self::State,
            io: &::tokio::net::UdpSocket,
            buf: &mut [u8],
        ) -> ::std::io::Result<$crate::socket::Received> {
            let mut meta = [$($udp)::+::RecvMeta::default()];
            state.recv(io.into(), &mut [::std::io::IoSliceMut::new(buf)], &mut meta)?;
            let m = meta[0];
            Ok($crate::socket::Received {
                from: m.addr,
                local: m.dst_ip,
                len: m.len,
                stride: m.stride,
                ecn: m.ecn.map_or(0, |e| e as u8),
            })
        }

        /// A recovered datagram gets the addresses of the path it was sent on, so its CE mark
        /// reaches that path's congestion controller. Starts from default (`RecvMeta` is
        /// non-exhaustive in some versions of the crates) and sets `stride = len`: one datagram
        /// per buffer.
        #[allow(clippy::field_reassign_with_default)]
        fn meta(d: &$crate::layer::Incoming) -> Self::Meta {
            let mut m = $($udp)::+::RecvMeta::default();
            m.addr = d.path.remote;
            m.len = d.payload.len();
            m.stride = d.payload.len();
            m.ecn = $($udp)::+::EcnCodepoint::from_bits(d.ecn);
            m.dst_ip = d.path.local;
            m
        }
    };
}
pub(crate) use udp_crate_calls;

/// What one receive got.
#[derive(Clone, Copy, Debug)]
pub struct Received {
    pub from: SocketAddr,
    /// The datagram's destination address, when the socket reports it.
    pub local: Option<IpAddr>,
    pub len: usize,
    /// Bytes of each datagram of a GRO batch (0: one datagram).
    pub stride: usize,
    pub ecn: u8,
}

/// One QUIC path of a connection as the stack sees it now (its local IP may be unset).
#[derive(Clone, Copy, Debug)]
pub struct PathNow {
    pub key: PathKey,
    pub rtt: Duration,
    /// Tail mode: the congestion window's room (None: not known).
    pub budget: Option<TailBudget>,
}

/// How a socket is set up: the layer's configuration, the socket buffers, and the source address
/// of datagrams a multipath stack sends without one.
#[derive(Clone, Debug)]
pub struct SocketConfig {
    pub layer: LayerConfig,
    pub rcvbuf: usize,
    pub sndbuf: usize,
    /// The client's path 1 address: noq leaves the source of path 1's first datagrams unset until
    /// it learns it, and the topology's policy routing must send them by path 1 (which the layer
    /// then keys them as).
    pub default_local: Option<IpAddr>,
    /// `--qlog-dir`: the endpoint's qlog files (crate::options::qlog); the layer then records its events.
    pub qlog: Option<Arc<Logs>>,
    /// `--test-send-delay-us` (TEST ONLY): a sleep before each datagram the stack sends; zero: none.
    pub test_send_delay: Duration,
    /// `--test-ignore-repairs` (TEST ONLY): repairs received are dropped unread.
    pub test_ignore_repairs: bool,
    /// `--test-recovery-delay-us` (TEST ONLY): a sleep per datagram the layer rebuilt; zero: none.
    pub test_recovery_delay: Duration,
}

/// Bytes of the receive buffer for one (possibly GRO-coalesced) receive of up to `gro_segments`
/// datagrams: a batch longer than the buffer would be truncated by the kernel, and the datagrams
/// cut off lost (a 64 KiB buffer lost ~5 % of a 1 MB download's datagrams on veth, where batches
/// reach 64 segments of 1208 bytes).
pub fn recv_buffer_len(gro_segments: usize) -> usize {
    gro_segments.max(1) * usize::from(u16::MAX)
}

pub struct FecSocket<G: SocketGlue> {
    io: tokio::net::UdpSocket,
    state: G::State,
    scheme: Scheme,
    flush_after: Duration,
    tail: bool,
    /// Multipath framing: paths keyed by local address too (module doc).
    multipath: bool,
    default_local: Option<IpAddr>,
    core: Mutex<Core>,
    /// Scratch space for one (possibly GRO-coalesced) receive; only poll_recv takes it, after
    /// `core`.
    recv_buf: Mutex<Vec<u8>>,
    /// Wakes the link task when its queue was empty (loopback `--rate-mbit` only).
    link_wake: tokio::sync::Notify,
    /// Wakes the backlog task when datagrams wait in the send backlog (see `backlog_task`).
    backlog_wake: tokio::sync::Notify,
    /// Connections over this socket: their paths' RTTs cap the flush thresholds. Never locked
    /// together with a connection's own lock held elsewhere (see flush_idle).
    connections: Mutex<Vec<G::Conn>>,
    /// `--qlog-dir` (None: nothing recorded, nothing written).
    qlog: Option<Arc<Logs>>,
    /// What the stack's packets carry, recorded by its crypto glue when the layer protects only
    /// application data or a qlog names it (None: every datagram is protected, or there is no
    /// FEC, and no qlog).
    packets: Option<Arc<SentPackets>>,
    /// `--test-send-delay-us` (TEST ONLY: a deliberately slowed build); zero: none.
    test_send_delay: Duration,
    /// `--test-ignore-repairs` (TEST ONLY: a build whose FEC stopped recovering).
    test_ignore_repairs: bool,
    /// `--test-recovery-delay-us` (TEST ONLY: a build whose recovery got slower); zero: none.
    test_recovery_delay: Duration,
}

impl<G: SocketGlue> fmt::Debug for FecSocket<G> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FecSocket")
            .field("scheme", &self.scheme.to_string())
            .field("multipath", &self.multipath)
            .finish_non_exhaustive()
    }
}

/// The socket as the adapter core sees it.
struct UdpWire<'a, G: SocketGlue> {
    io: &'a tokio::net::UdpSocket,
    state: &'a G::State,
}

impl<G: SocketGlue> Wire for UdpWire<'_, G> {
    fn send(&self, o: &Outgoing) -> io::Result<()> {
        self.io
            .try_io(Interest::WRITABLE, || G::send(self.state, self.io, o))
    }
}

/// Ask for `bytes` of socket buffer; as root, SO_*BUFFORCE goes past net.core.[rw]mem_max.
fn set_buffer(sock: &std::net::UdpSocket, force: libc::c_int, plain: libc::c_int, bytes: usize) {
    use std::os::fd::AsRawFd;
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

impl<G: SocketGlue> FecSocket<G> {
    /// Bind `addr` and wrap it (errors as messages). Must be called inside a tokio runtime.
    pub fn bind(
        addr: SocketAddr,
        cfg: SocketConfig,
        link: Option<Link>,
    ) -> Result<Arc<Self>, String> {
        let sock =
            std::net::UdpSocket::bind(addr).map_err(|e| format!("cannot bind {addr}: {e}"))?;
        Self::new(sock, cfg, link).map_err(|e| format!("socket setup: {e}"))
    }

    /// Wrap a bound UDP socket; `link`: `fecq loopback`'s simulated link (crate::link) between
    /// the layer and the socket. Must be called inside a tokio runtime (it spawns the flush task,
    /// and the link's release task).
    pub fn new(
        sock: std::net::UdpSocket,
        cfg: SocketConfig,
        link: Option<Link>,
    ) -> io::Result<Arc<Self>> {
        set_buffer(&sock, libc::SO_RCVBUFFORCE, libc::SO_RCVBUF, cfg.rcvbuf);
        set_buffer(&sock, libc::SO_SNDBUFFORCE, libc::SO_SNDBUF, cfg.sndbuf);
        let state = G::state(&sock)?;
        let gro = G::gro_segments(&state);
        sock.set_nonblocking(true)?;
        let io = tokio::net::UdpSocket::from_std(sock)?;
        let linked = link.is_some();
        // The layer's `protects` decides what the content changes: nothing under `all` or `none`,
        // where it is known only for the qlog's `fecq:datagram_sent`.
        let by_content = cfg.layer.protect == Protect::Stream && cfg.layer.scheme != Scheme::None;
        let packets = (by_content || cfg.qlog.is_some()).then(|| Arc::new(SentPackets::new()));
        let socket = Arc::new(FecSocket {
            io,
            state,
            scheme: cfg.layer.scheme,
            flush_after: cfg.layer.flush_after,
            tail: cfg.layer.tail.is_some(),
            multipath: cfg.layer.multipath.is_some(),
            default_local: cfg.default_local,
            core: Mutex::new(Core::new(cfg.layer, link)),
            recv_buf: Mutex::new(vec![0u8; recv_buffer_len(gro)]),
            link_wake: tokio::sync::Notify::new(),
            backlog_wake: tokio::sync::Notify::new(),
            connections: Mutex::new(Vec::new()),
            qlog: cfg.qlog,
            packets,
            test_send_delay: cfg.test_send_delay,
            test_ignore_repairs: cfg.test_ignore_repairs,
            test_recovery_delay: cfg.test_recovery_delay,
        });
        if socket.qlog.is_some() {
            socket.core.lock().unwrap().layer_mut().record_events();
        }
        if socket.scheme != Scheme::None {
            tokio::spawn(flush_task(Arc::downgrade(&socket)));
        }
        tokio::spawn(backlog_task(Arc::downgrade(&socket)));
        if linked {
            tokio::spawn(link_task(Arc::downgrade(&socket)));
        }
        Ok(socket)
    }

    fn wire(&self) -> UdpWire<'_, G> {
        UdpWire {
            io: &self.io,
            state: &self.state,
        }
    }

    /// Where the stack's crypto glue records what its packets carry (crate::content); None when
    /// neither the layer nor a qlog needs to know it (`--fec-protect all` or `--fec none`, and no
    /// `--qlog-dir`).
    pub fn sent_packets(&self) -> Option<&Arc<SentPackets>> {
        self.packets.as_ref()
    }

    /// The endpoint's qlog files (`--qlog-dir`), for the stack's own events.
    pub fn qlog(&self) -> Option<&Arc<Logs>> {
        self.qlog.as_ref()
    }

    /// Write what the layer recorded since the last call into the connections' qlog files
    /// (nothing to do without `--qlog-dir`).
    fn write_events(&self, core: &mut Core) {
        let Some(logs) = self.qlog.as_ref() else {
            return;
        };
        let mut events: Vec<FecEvent> = Vec::new();
        core.layer_mut().take_events(&mut events);
        if !events.is_empty() {
            let layer = core.layer();
            logs.write(&events, |remote| layer.group_key(remote));
        }
    }

    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.io.local_addr()
    }

    /// Until the socket is writable (a send got `WouldBlock`).
    pub async fn writable(&self) -> io::Result<()> {
        self.io.writable().await
    }

    /// The layer's key of a path the stack names by (`local`, `remote`), `local` possibly unset.
    pub fn key(&self, local: Option<IpAddr>, remote: SocketAddr) -> PathKey {
        if self.multipath {
            PathKey::new(local.or(self.default_local), remote)
        } else {
            PathKey::new(None, remote)
        }
    }

    /// Counters of every path of `remote`'s connection, in the order the layer first saw them.
    pub fn paths(&self, remote: SocketAddr) -> Vec<(PathKey, Counters)> {
        self.core.lock().unwrap().layer().paths(remote)
    }

    /// `read_stack()` (the stack's own counters) with the layer's counters of `remote`'s paths
    /// from the same moment: the stack hands each datagram to this socket under the lock its
    /// counters are read under, so when no datagram went through the layer while the stack's
    /// counters were read, both count the same datagrams. The connection's driver keeps sending
    /// (ACKs, pings) while a side reads, so a read a datagram crossed is taken again.
    pub fn paths_with<T>(
        &self,
        remote: SocketAddr,
        read_stack: impl Fn() -> T,
    ) -> (T, Vec<(PathKey, Counters)>) {
        const ATTEMPTS: usize = 100;
        let sent = |paths: &[(PathKey, Counters)]| -> u64 {
            paths.iter().map(|(_, c)| c.wire_datagrams_sent).sum()
        };
        let mut before = self.paths(remote);
        for _ in 1..ATTEMPTS {
            let stack = read_stack();
            let after = self.paths(remote);
            if sent(&after) == sent(&before) {
                return (stack, after);
            }
            before = after;
        }
        // Never quiet for a hundred reads: the last one, a datagram or so apart.
        (read_stack(), self.paths(remote))
    }

    /// Sum over the paths of `remote`'s connection (zero if never seen or evicted).
    pub fn counters(&self, remote: SocketAddr) -> Counters {
        self.core.lock().unwrap().layer().counters(remote)
    }

    /// Sum over all peers, for an endpoint with one connection (the client, loopback).
    pub fn total_counters(&self) -> Counters {
        self.core.lock().unwrap().layer().total()
    }

    pub fn blocks_with_losses(&self, remote: SocketAddr) -> u64 {
        self.core.lock().unwrap().layer().blocks_with_losses(remote)
    }

    /// When the last datagram from `remote`'s connection arrived (None if none did, or it was
    /// evicted).
    pub fn last_received(&self, remote: SocketAddr) -> Option<Instant> {
        self.core.lock().unwrap().layer().last_received(remote)
    }

    /// Let the flush policy of this connection's paths use their RTTs (and, in tail mode, the
    /// window's room).
    pub fn track_connection(&self, conn: &G::Conn) {
        let mut conns = self.connections.lock().unwrap();
        conns.retain(|c| !c.is_closed());
        conns.push(conn.clone());
    }

    /// Mark in the connection's qlog that its transfer is over at this end: what it sends from
    /// then on (the `stats` exchange) is no data of the transfer (nothing without `--qlog-dir`).
    pub fn transfer_over(&self, remote: SocketAddr) {
        let mut core = self.core.lock().unwrap();
        core.layer_mut().mark_transfer_over(remote);
        self.write_events(&mut core);
    }

    /// Send the repairs of every partial block of `remote`'s connection now, without waiting for
    /// the sender to go quiet (the `stats` request does this so the counters include the
    /// transfer's tail repairs).
    pub fn flush_peer(&self, remote: SocketAddr) {
        let mut core = self.core.lock().unwrap();
        core.flush_now(&self.wire(), Instant::now(), remote);
        self.write_events(&mut core);
        self.wake_tasks(&mut core);
    }

    /// Flush the partial blocks of peers that went quiet (crate::layer::flush), and the backlog.
    fn flush_idle(&self) {
        // The paths' RTTs first, without our lock: the stack sends (taking it) with the
        // connection's lock held, so taking them in the other order could deadlock.
        let mut paths = Vec::new();
        {
            let mut conns = self.connections.lock().unwrap();
            conns.retain(|c| !c.is_closed());
            for c in conns.iter() {
                G::paths(c, self.tail, &mut paths);
            }
        }
        let mut core = self.core.lock().unwrap();
        for p in paths {
            let key = self.key(p.key.local, p.key.remote);
            core.layer_mut().set_rtt(key, Some(p.rtt));
            if self.tail {
                core.layer_mut().set_tail_budget(key, p.budget);
            }
        }
        core.flush_idle(&self.wire(), Instant::now());
        self.write_events(&mut core);
        self.wake_tasks(&mut core);
    }

    fn wake_tasks(&self, core: &mut Core) {
        if core.take_wake() {
            self.link_wake.notify_one();
        }
        if core.backlogged() > 0 {
            self.backlog_wake.notify_one();
        }
    }

    /// Send what waits in the backlog, as far as the socket takes it; whether some still waits.
    fn retry_backlog(&self) -> bool {
        let mut core = self.core.lock().unwrap();
        let _ = core.retry_backlog(&self.wire());
        core.backlogged() > 0
    }

    /// The stack's transmit: `contents` from `src_ip` (None: the kernel's choice) to
    /// `destination`, one datagram or a GSO batch of `segment_size` bytes each, ECN bits `ecn`;
    /// each datagram protected or not as its last packet's record says (crate::content).
    /// `WouldBlock` while older datagrams wait for socket space: the stack retries when the
    /// socket is writable.
    pub fn send(
        &self,
        src_ip: Option<IpAddr>,
        destination: SocketAddr,
        contents: &[u8],
        segment_size: Option<usize>,
        ecn: u8,
    ) -> io::Result<()> {
        if !self.test_send_delay.is_zero() {
            // TEST ONLY (`--test-send-delay-us`): a slow sender, one sleep per datagram of the batch.
            let datagrams = segment_size.map_or(1, |s| contents.len().div_ceil(s.max(1)).max(1));
            std::thread::sleep(self.test_send_delay * u32::try_from(datagrams).unwrap_or(u32::MAX));
        }
        let path = self.key(src_ip, destination);
        let packets = self.packets.as_deref();
        let mut core = self.core.lock().unwrap();
        let res = core.send(
            &self.wire(),
            Instant::now(),
            path,
            contents,
            segment_size,
            ecn,
            |d| packets.map_or(Content::Data, |p| p.take(d)),
        );
        self.write_events(&mut core);
        self.wake_tasks(&mut core);
        res
    }

    /// The stack's receive: decoded datagrams (received and recovered) into `bufs`, one each,
    /// with their metadata.
    pub fn poll_recv(
        &self,
        cx: &mut Context,
        bufs: &mut [IoSliceMut<'_>],
        meta: &mut [G::Meta],
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
                    continue; // cannot be a datagram the stack sent at our MTU: ignore it
                }
                bufs[n][..item.payload.len()].copy_from_slice(&item.payload);
                meta[n] = G::meta(&item);
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
            let res = self.io.try_io(Interest::READABLE, || {
                G::recv(&self.state, &self.io, &mut recv_buf)
            });
            match res {
                Ok(r) => {
                    let stride = if r.stride == 0 { r.len } else { r.stride };
                    let path = self.key(r.local, r.from);
                    let now = Instant::now();
                    let mut offset = 0;
                    while offset < r.len {
                        let len = stride.min(r.len - offset);
                        let datagram = &recv_buf[offset..offset + len];
                        if !(self.test_ignore_repairs && core.is_repair(datagram)) {
                            let rebuilt = core.receive(now, path, datagram, r.ecn);
                            if rebuilt > 0 && !self.test_recovery_delay.is_zero() {
                                // TEST ONLY (`--test-recovery-delay-us`): a slow decoder, its
                                // rebuilt datagrams (and this endpoint) held up.
                                std::thread::sleep(self.test_recovery_delay * rebuilt);
                            }
                        }
                        offset += len;
                    }
                    self.write_events(&mut core);
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
                Err(e) => return Poll::Ready(Err(e)),
            }
        }
    }
}

type WritableFuture = Pin<Box<dyn Future<Output = io::Result<()>> + Send + Sync>>;

/// A stack's wait for room in the socket after a send got `WouldBlock` (quinn's `UdpPoller`,
/// noq's `UdpSender`): the [`FecSocket::writable`] future, kept across polls until it is ready.
pub struct WritableWait<G: SocketGlue> {
    socket: Arc<FecSocket<G>>,
    fut: Option<WritableFuture>,
}

impl<G: SocketGlue> WritableWait<G> {
    pub fn new(socket: Arc<FecSocket<G>>) -> Self {
        WritableWait { socket, fut: None }
    }

    pub fn socket(&self) -> &FecSocket<G> {
        &self.socket
    }

    /// Ready once the socket is writable; the next call after that starts a new wait.
    pub fn poll_writable(&mut self, cx: &mut Context) -> Poll<io::Result<()>> {
        let socket = &self.socket;
        let fut = self.fut.get_or_insert_with(|| {
            let socket = socket.clone();
            Box::pin(async move { socket.writable().await })
        });
        let res = fut.as_mut().poll(cx);
        if res.is_ready() {
            self.fut = None;
        }
        res
    }
}

impl<G: SocketGlue> fmt::Debug for WritableWait<G> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WritableWait").finish_non_exhaustive()
    }
}

async fn flush_task<G: SocketGlue>(socket: Weak<FecSocket<G>>) {
    let period = match socket.upgrade() {
        Some(s) => (s.flush_after / 2).max(Duration::from_millis(1)),
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

/// Send the backlog as soon as the socket is writable. A datagram waits in the backlog when the
/// socket had no room for it, or when tokio did not yet know the socket to be writable: a socket's
/// readiness is unknown until the runtime's reactor has seen it (its first event), and tokio's
/// `try_io` does not try the send until then. The stack was told the datagram was sent, so nothing
/// else would send it before the stack's next transmit: with multipath and no FEC (no flush task),
/// the client's first Initial waited for noq's probe timeout, ~1 s (issue 49: `handshake_ms`
/// 1012 ms multipath against 12 ms single path; on the wire, the Initial left with its probe).
async fn backlog_task<G: SocketGlue>(socket: Weak<FecSocket<G>>) {
    // Re-checked at least every 50 ms so the task ends soon after the socket is gone.
    const RECHECK: Duration = Duration::from_millis(50);
    loop {
        let Some(s) = socket.upgrade() else { return };
        if s.core.lock().unwrap().backlogged() == 0 {
            tokio::select! {
                _ = s.backlog_wake.notified() => {}
                _ = tokio::time::sleep(RECHECK) => {}
            }
            continue;
        }
        // Writable (at once if tokio already knows it is; a send that found it full cleared that).
        let _ = tokio::time::timeout(RECHECK, s.writable()).await;
        s.retry_backlog();
    }
}

/// Release the link's datagrams when their time comes (loopback only).
async fn link_task<G: SocketGlue>(socket: Weak<FecSocket<G>>) {
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
