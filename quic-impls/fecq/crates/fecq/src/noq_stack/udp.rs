//! noq's socket glue: noq-udp's calls for the shared socket (crate::socket), and noq's
//! `AsyncUdpSocket` over it. The socket is bound to the wildcard address and serves every path:
//! noq sets each transmit's source address, and the socket reports each datagram's destination
//! address (crate::socket keys the paths by both).

use std::io::{self, IoSliceMut};
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use noq::udp::{RecvMeta, Transmit, UdpSocketState};
use noq::{AsyncUdpSocket, UdpSender};

use super::paths::quic_paths;
use crate::socket::{udp_crate_calls, FecSocket, PathNow, SocketGlue, WritableWait};

/// noq-udp under the shared socket.
#[derive(Debug)]
pub struct NoqUdp;

impl SocketGlue for NoqUdp {
    // noq-udp's `try_send`: every error goes back to noq (its `send`, which drops them, is
    // deprecated).
    udp_crate_calls!(noq::udp, try_send);
    type Conn = noq::Connection;

    fn gro_segments(state: &UdpSocketState) -> usize {
        state.gro_segments().get()
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
        Box::pin(WritableWait::new(self.0.clone()))
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

impl UdpSender for WritableWait<NoqUdp> {
    /// Sends at once, or waits for room in the socket while the send gets `WouldBlock`.
    fn poll_send(
        self: Pin<&mut Self>,
        transmit: &Transmit<'_>,
        cx: &mut Context<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        loop {
            let sent = this.socket().send(
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
            std::task::ready!(this.poll_writable(cx))?;
        }
    }
}
