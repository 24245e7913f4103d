//! quinn's socket glue: quinn-udp's calls for the shared socket (crate::socket), and quinn's
//! `AsyncUdpSocket` over it (quinn drives it through `Endpoint::new_with_abstract_socket`).

use std::fmt;
use std::io::{self, IoSliceMut};
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use quinn::udp::{EcnCodepoint, RecvMeta, Transmit, UdpSocketState};
use quinn::{AsyncUdpSocket, UdpPoller};

use super::cc;
use crate::layer::{Incoming, Outgoing, PathKey};
use crate::socket::{FecSocket, PathNow, Received, SocketGlue};

/// quinn-udp under the shared socket.
#[derive(Debug)]
pub struct QuinnUdp;

impl SocketGlue for QuinnUdp {
    type State = UdpSocketState;
    type Meta = RecvMeta;
    type Conn = quinn::Connection;

    fn state(sock: &std::net::UdpSocket) -> io::Result<UdpSocketState> {
        UdpSocketState::new(sock.into())
    }

    fn gro_segments(state: &UdpSocketState) -> usize {
        state.gro_segments()
    }

    fn send(state: &UdpSocketState, io: &tokio::net::UdpSocket, o: &Outgoing) -> io::Result<()> {
        let transmit = Transmit {
            destination: o.path.remote,
            ecn: EcnCodepoint::from_bits(o.ecn),
            contents: &o.data,
            segment_size: None,
            src_ip: o.path.local,
        };
        state.send(io.into(), &transmit)
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

    /// Starts from default (RecvMeta is non-exhaustive in some quinn-udp versions) and sets
    /// `stride = len`: one datagram per buffer.
    #[allow(clippy::field_reassign_with_default)]
    fn meta(d: &Incoming) -> RecvMeta {
        let mut m = RecvMeta::default();
        m.addr = d.path.remote;
        m.len = d.payload.len();
        m.stride = d.payload.len();
        m.ecn = EcnCodepoint::from_bits(d.ecn);
        m.dst_ip = d.path.local;
        m
    }

    fn paths(conn: &quinn::Connection, tail: bool, out: &mut Vec<PathNow>) {
        out.push(PathNow {
            key: PathKey::new(None, conn.remote_address()),
            rtt: conn.rtt(),
            budget: if tail { cc::tail_budget(conn) } else { None },
        });
    }
}

impl AsyncUdpSocket for FecSocket<QuinnUdp> {
    fn create_io_poller(self: Arc<Self>) -> Pin<Box<dyn UdpPoller>> {
        Box::pin(Poller {
            socket: self,
            fut: None,
        })
    }

    fn try_send(&self, transmit: &Transmit) -> io::Result<()> {
        self.send(
            transmit.src_ip,
            transmit.destination,
            transmit.contents,
            transmit.segment_size,
            transmit.ecn.map_or(0, |e| e as u8),
        )
    }

    fn poll_recv(
        &self,
        cx: &mut Context,
        bufs: &mut [IoSliceMut<'_>],
        meta: &mut [RecvMeta],
    ) -> Poll<io::Result<usize>> {
        FecSocket::poll_recv(self, cx, bufs, meta)
    }

    fn local_addr(&self) -> io::Result<SocketAddr> {
        FecSocket::local_addr(self)
    }

    fn may_fragment(&self) -> bool {
        // Keeps quinn's path MTU discovery off: datagrams stay at QUIC_MTU plus the FEC header.
        true
    }
}

type WritableFuture = Pin<Box<dyn std::future::Future<Output = io::Result<()>> + Send + Sync>>;

struct Poller {
    socket: Arc<FecSocket<QuinnUdp>>,
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
            self.fut = Some(Box::pin(async move { socket.writable().await }));
        }
        let res = self.fut.as_mut().unwrap().as_mut().poll(cx);
        if res.is_ready() {
            self.fut = None;
        }
        res
    }
}
