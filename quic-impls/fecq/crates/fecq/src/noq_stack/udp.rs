//! noq's socket glue: noq-udp's calls for the shared socket (crate::socket), and noq's
//! `AsyncUdpSocket` over it. The socket is bound to the wildcard address and serves every path:
//! noq sets each transmit's source address, and the socket reports each datagram's destination
//! address (crate::socket keys the paths by both).

use std::fmt;
use std::io::{self, IoSliceMut};
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use noq::udp::{EcnCodepoint, RecvMeta, Transmit, UdpSocketState};
use noq::{AsyncUdpSocket, UdpSender};

use super::paths::quic_paths;
use crate::layer::{Incoming, Outgoing};
use crate::socket::{FecSocket, PathNow, Received, SocketGlue};

/// noq-udp under the shared socket.
#[derive(Debug)]
pub struct NoqUdp;

impl SocketGlue for NoqUdp {
    type State = UdpSocketState;
    type Meta = RecvMeta;
    type Conn = noq::Connection;

    fn state(sock: &std::net::UdpSocket) -> io::Result<UdpSocketState> {
        UdpSocketState::new(sock.into())
    }

    fn gro_segments(state: &UdpSocketState) -> usize {
        state.gro_segments().get()
    }

    fn send(state: &UdpSocketState, io: &tokio::net::UdpSocket, o: &Outgoing) -> io::Result<()> {
        let transmit = Transmit {
            destination: o.path.remote,
            ecn: EcnCodepoint::from_bits(o.ecn),
            contents: &o.data,
            segment_size: None,
            src_ip: o.path.local,
        };
        state.try_send(io.into(), &transmit)
    }

    fn recv(
        state: &UdpSocketState,
        io: &tokio::net::UdpSocket,
        buf: &mut [u8],
    ) -> io::Result<Received> {
        let mut meta = [RecvMeta::default()];
        state.recv(io.into(), &mut [IoSliceMut::new(buf)], &mut meta)?;
        let m = meta[0];
        Ok(Received {
            from: m.addr,
            local: m.dst_ip,
            len: m.len,
            stride: m.stride,
            ecn: m.ecn.map_or(0, |e| e as u8),
        })
    }

    /// A recovered datagram gets the addresses of the path it was sent on, so its CE mark
    /// reaches that path's congestion controller. One datagram per buffer.
    fn meta(d: &Incoming) -> RecvMeta {
        let mut m = RecvMeta::default();
        m.addr = d.path.remote;
        m.len = d.payload.len();
        m.stride = d.payload.len();
        m.ecn = EcnCodepoint::from_bits(d.ecn);
        m.dst_ip = d.path.local;
        m
    }

    fn paths(conn: &noq::Connection, _tail: bool, out: &mut Vec<PathNow>) {
        out.extend(quic_paths(conn).into_iter().map(|(_, key, stats)| PathNow {
            key,
            rtt: stats.rtt,
            budget: None,
        }));
    }
}

/// What noq's endpoint owns: a handle on the shared socket.
#[derive(Debug)]
pub struct Handle(pub Arc<FecSocket<NoqUdp>>);

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
        self.0.local_addr()
    }

    fn may_fragment(&self) -> bool {
        // Keeps noq's path MTU discovery off: datagrams stay at QUIC_MTU plus the FEC header.
        true
    }
}

type WritableFuture = Pin<Box<dyn std::future::Future<Output = io::Result<()>> + Send + Sync>>;

struct Sender {
    socket: Arc<FecSocket<NoqUdp>>,
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
            let sent = this.socket.send(
                transmit.src_ip,
                transmit.destination,
                transmit.contents,
                transmit.segment_size,
                transmit.ecn.map_or(0, |e| e as u8),
            );
            match sent {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                other => return Poll::Ready(other),
            }
            if this.fut.is_none() {
                let socket = this.socket.clone();
                this.fut = Some(Box::pin(async move { socket.writable().await }));
            }
            let res = std::task::ready!(this.fut.as_mut().unwrap().as_mut().poll(cx));
            this.fut = None;
            res?;
        }
    }
}
