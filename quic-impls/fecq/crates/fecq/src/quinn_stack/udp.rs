//! quinn's socket glue: quinn-udp's calls for the shared socket (crate::socket), and quinn's
//! `AsyncUdpSocket` over it (quinn drives it through `Endpoint::new_with_abstract_socket`).

use std::io::{self, IoSliceMut};
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use quinn::udp::{RecvMeta, Transmit, UdpSocketState};
use quinn::{AsyncUdpSocket, UdpPoller};

use super::cc;
use crate::layer::PathKey;
use crate::socket::{udp_crate_calls, FecSocket, PathNow, SocketGlue, WritableWait};

/// quinn-udp under the shared socket.
#[derive(Debug)]
pub struct QuinnUdp;

impl SocketGlue for QuinnUdp {
    // quinn-udp's `send`, as quinn's own tokio socket calls it: errors other than WouldBlock are
    // logged and dropped (the datagram is then lost, as far as QUIC knows).
    udp_crate_calls!(quinn::udp, send);
    type Conn = quinn::Connection;

    fn gro_segments(state: &UdpSocketState) -> usize {
        state.gro_segments()
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
        Box::pin(WritableWait::new(self))
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

impl UdpPoller for WritableWait<QuinnUdp> {
    fn poll_writable(self: Pin<&mut Self>, cx: &mut Context) -> Poll<io::Result<()>> {
        WritableWait::poll_writable(self.get_mut(), cx)
    }
}
