//! The noq adapter: a noq `AsyncUdpSocket` over one UDP socket (bound to the wildcard address,
//! so it serves every path) that runs every QUIC datagram through the IO-free FEC layer
//! (crate::layer, via the adapter core crate::driver), with multipath framing.
//!
//! Paths are keyed by (local IP, remote address): noq sets `Transmit::src_ip` per path and we
//! report `RecvMeta::dst_ip` for what arrives. A recovered datagram is handed to noq with the
//! `addr` and `dst_ip` of the path it was *sent* on (the layer knows it), so its CE mark reaches
//! that path's congestion controller. GSO: the sender declares one segment per transmit (noq
//! then builds no batches), and any batch that still comes is split by `segment_size`; received
//! GRO batches are split by `stride`.

use std::collections::HashMap;
use std::fmt;
use std::io::{self, IoSliceMut};
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::{Arc, Mutex, Weak};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use fec_core::Scheme;
use noq::udp::{EcnCodepoint, RecvMeta, Transmit, UdpSocketState};
use noq::{AsyncUdpSocket, UdpSender};
use tokio::io::Interest;

use crate::driver::{Core, Wire};
use crate::layer::{Counters, LayerConfig, Outgoing, PathKey};
use crate::link::Link;
use crate::socket::set_buffer;

pub struct MpSocket {
    io: tokio::net::UdpSocket,
    state: UdpSocketState,
    scheme: Scheme,
    flush_after: Duration,
    core: Mutex<Core>,
    recv_buf: Mutex<Vec<u8>>,
    /// Source address of datagrams noq sends without one (the client's first path, before
    /// noq learnt its local address): the address of path 1, so the policy routing of the
    /// topology sends it by path 1 and the layer keys it as path 1.
    default_local: Option<IpAddr>,
    link_wake: tokio::sync::Notify,
    /// Connections over this socket: their paths' RTTs cap the flush thresholds.
    connections: Mutex<Vec<noq::Connection>>,
}

impl fmt::Debug for MpSocket {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MpSocket")
            .field("scheme", &self.scheme.to_string())
            .finish_non_exhaustive()
    }
}

struct NoqWire<'a> {
    io: &'a tokio::net::UdpSocket,
    state: &'a UdpSocketState,
}

impl Wire for NoqWire<'_> {
    fn send(&self, o: &Outgoing) -> io::Result<()> {
        let transmit = Transmit {
            destination: o.path.remote,
            ecn: EcnCodepoint::from_bits(o.ecn),
            contents: &o.data,
            segment_size: None,
            src_ip: o.path.local,
        };
        self.io.try_io(Interest::WRITABLE, || {
            self.state.try_send(self.io.into(), &transmit)
        })
    }
}

impl MpSocket {
    /// Wrap a bound UDP socket. Must be called inside a tokio runtime (it spawns the flush task).
    pub fn new(
        sock: std::net::UdpSocket,
        cfg: LayerConfig,
        rcvbuf: usize,
        sndbuf: usize,
        default_local: Option<IpAddr>,
        link: Option<Link>,
        shaped: bool,
    ) -> io::Result<Arc<Self>> {
        set_buffer(&sock, libc::SO_RCVBUFFORCE, libc::SO_RCVBUF, rcvbuf);
        set_buffer(&sock, libc::SO_SNDBUFFORCE, libc::SO_SNDBUF, sndbuf);
        let state = UdpSocketState::new((&sock).into())?;
        let gro = state.gro_segments().get();
        sock.set_nonblocking(true)?;
        let io = tokio::net::UdpSocket::from_std(sock)?;
        let socket = Arc::new(MpSocket {
            io,
            state,
            scheme: cfg.scheme,
            flush_after: cfg.flush_after,
            core: Mutex::new(Core::new(cfg, link)),
            recv_buf: Mutex::new(vec![0u8; crate::driver::recv_buffer_len(gro)]),
            default_local,
            link_wake: tokio::sync::Notify::new(),
            connections: Mutex::new(Vec::new()),
        });
        if socket.scheme != Scheme::None {
            tokio::spawn(flush_task(Arc::downgrade(&socket)));
        }
        if shaped {
            tokio::spawn(link_task(Arc::downgrade(&socket)));
        }
        Ok(socket)
    }

    fn wire(&self) -> NoqWire<'_> {
        NoqWire {
            io: &self.io,
            state: &self.state,
        }
    }

    /// What noq's endpoint owns: a handle on this socket.
    pub fn handle(self: &Arc<Self>) -> Box<dyn AsyncUdpSocket> {
        Box::new(Handle(self.clone()))
    }

    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.io.local_addr()
    }

    /// Counters of every path of `remote`'s connection.
    pub fn paths(&self, remote: SocketAddr) -> Vec<(PathKey, Counters)> {
        self.core.lock().unwrap().layer().paths(remote)
    }

    pub fn blocks_with_losses(&self, remote: SocketAddr) -> u64 {
        self.core.lock().unwrap().layer().blocks_with_losses(remote)
    }

    pub fn last_received(&self, remote: SocketAddr) -> Option<Instant> {
        self.core.lock().unwrap().layer().last_received(remote)
    }

    pub fn track_connection(&self, conn: &noq::Connection) {
        let mut conns = self.connections.lock().unwrap();
        conns.retain(|c| c.close_reason().is_none());
        conns.push(conn.clone());
    }

    /// Send the repairs of every partial block of `remote`'s connection now.
    pub fn flush_peer(&self, remote: SocketAddr) {
        let mut core = self.core.lock().unwrap();
        core.flush_now(&self.wire(), Instant::now(), remote);
        self.wake_link(&mut core);
    }

    fn flush_idle(&self) {
        // Path RTTs first, without our lock: noq sends (taking it) with the connection's lock
        // held, so taking them in the other order could deadlock.
        let rtts: Vec<(PathKey, Duration)> = {
            let mut conns = self.connections.lock().unwrap();
            conns.retain(|c| c.close_reason().is_none());
            conns.iter().flat_map(super::open_paths).collect()
        };
        let mut core = self.core.lock().unwrap();
        for (key, rtt) in rtts {
            let key = self.keyed(key);
            core.layer_mut().set_rtt(key, Some(rtt));
        }
        core.flush_idle(&self.wire(), Instant::now());
        self.wake_link(&mut core);
    }

    fn wake_link(&self, core: &mut Core) {
        if core.take_wake() {
            self.link_wake.notify_one();
        }
    }

    /// The layer's key of a path noq names with `local` possibly unset.
    pub fn keyed(&self, key: PathKey) -> PathKey {
        PathKey::new(key.local.or(self.default_local), key.remote)
    }

    fn try_send(&self, transmit: &Transmit) -> io::Result<()> {
        let path = self.keyed(PathKey::new(transmit.src_ip, transmit.destination));
        let mut core = self.core.lock().unwrap();
        let res = core.send(
            &self.wire(),
            Instant::now(),
            path,
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
            // Hand over everything decoded so far before reading more (see socket.rs).
            let mut n = 0;
            while n < bufs.len().min(meta.len()) {
                let Some(item) = core.pop_ready() else {
                    break;
                };
                if item.payload.len() > bufs[n].len() {
                    continue;
                }
                bufs[n][..item.payload.len()].copy_from_slice(&item.payload);
                let mut m = RecvMeta::default();
                m.addr = item.path.remote;
                m.len = item.payload.len();
                m.stride = item.payload.len();
                m.ecn = EcnCodepoint::from_bits(item.ecn);
                m.dst_ip = item.path.local;
                meta[n] = m;
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
                    let path = self.keyed(PathKey::new(m.dst_ip, m.addr));
                    let now = Instant::now();
                    let mut offset = 0;
                    while offset < m.len {
                        let len = stride.min(m.len - offset);
                        core.receive(now, path, &recv_buf[offset..offset + len], ecn);
                        offset += len;
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
                Err(e) => return Poll::Ready(Err(e)),
            }
        }
    }
}

async fn flush_task(socket: Weak<MpSocket>) {
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

async fn link_task(socket: Weak<MpSocket>) {
    loop {
        let Some(s) = socket.upgrade() else { return };
        let next_due = s
            .core
            .lock()
            .unwrap()
            .release_due(&s.wire(), Instant::now());
        let deadline = next_due.unwrap_or_else(|| Instant::now() + Duration::from_millis(50));
        tokio::select! {
            _ = tokio::time::sleep_until(deadline.into()) => {}
            _ = s.link_wake.notified() => {}
        }
    }
}

#[derive(Debug)]
struct Handle(Arc<MpSocket>);

impl AsyncUdpSocket for Handle {
    fn create_sender(&self) -> Pin<Box<dyn UdpSender>> {
        Box::pin(Sender {
            socket: self.0.clone(),
            fut: None,
        })
    }

    fn poll_recv(
        &mut self,
        cx: &mut Context<'_>,
        bufs: &mut [IoSliceMut<'_>],
        meta: &mut [RecvMeta],
    ) -> Poll<io::Result<usize>> {
        self.0.poll_recv(cx, bufs, meta)
    }

    fn local_addr(&self) -> io::Result<SocketAddr> {
        self.0.io.local_addr()
    }

    fn may_fragment(&self) -> bool {
        // Keeps noq's path MTU discovery off: datagrams stay at QUIC_MTU plus the FEC header.
        true
    }
}

type WritableFuture = Pin<Box<dyn std::future::Future<Output = io::Result<()>> + Send + Sync>>;

struct Sender {
    socket: Arc<MpSocket>,
    fut: Option<WritableFuture>,
}

impl fmt::Debug for Sender {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Sender").finish_non_exhaustive()
    }
}

impl UdpSender for Sender {
    fn poll_send(
        self: Pin<&mut Self>,
        transmit: &Transmit<'_>,
        cx: &mut Context<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        loop {
            match this.socket.try_send(transmit) {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                other => return Poll::Ready(other),
            }
            if this.fut.is_none() {
                let socket = this.socket.clone();
                this.fut = Some(Box::pin(async move { socket.io.writable().await }));
            }
            let res = std::task::ready!(this.fut.as_mut().unwrap().as_mut().poll(cx));
            this.fut = None;
            res?;
        }
    }
}

/// The counters of one path of the layer, by the QUIC path it belongs to.
pub fn path_map(paths: &[(PathKey, Counters)]) -> HashMap<PathKey, Counters> {
    paths.iter().copied().collect()
}
