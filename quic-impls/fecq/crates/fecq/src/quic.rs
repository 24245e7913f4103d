//! The QUIC calls fecq's shared code makes (the application protocol: app.rs, messages.rs,
//! transfer.rs; the roles: run.rs), so that it is written once for both stacks: quinn (single
//! path) and noq (its multipath fork, whose endpoint, connection and stream API is quinn's). The
//! impls are textually the same for both crates, hence one macro, [`impl_quic!`], that each
//! stack's adapter instantiates with the two calls that differ.

use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;

use bytes::Bytes;

/// Why a connection ended, as far as the shared code tells causes apart.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Closed {
    /// The idle timeout: nothing was received for that long (silent, the peer may still be up).
    TimedOut,
    /// Anything else, as the stack words it.
    Other(String),
}

pub trait QuicConn: Clone + Send + Sync + 'static {
    type Send: QuicSend;
    type Recv: QuicRecv;
    fn open_bi(&self) -> impl Future<Output = Result<(Self::Send, Self::Recv), String>> + Send;
    /// The next stream the peer opens; None once the connection is gone.
    fn accept_bi(&self) -> impl Future<Output = Option<(Self::Send, Self::Recv)>> + Send;
    fn send_datagram(&self, data: Bytes) -> Result<(), String>;
    fn read_datagram(&self) -> impl Future<Output = Result<Bytes, String>> + Send;
    fn max_datagram_size(&self) -> Option<usize>;
    /// DATAGRAM frames the stack has put in packets so far (the rest of what the application
    /// sent is still queued, or was dropped from the queue).
    fn datagram_frames_sent(&self) -> u64;
    /// UDP datagrams the stack has handed to its socket so far.
    fn datagrams_sent(&self) -> u64;
    /// The peer's address (under noq: the lowest-numbered open path's).
    fn remote_address(&self) -> SocketAddr;
    /// Why the connection ended; None while it is open.
    fn closed(&self) -> Option<Closed>;
    fn is_closed(&self) -> bool;
    /// Close it with an application error code and reason (sent to the peer).
    fn close(&self, code: u32, reason: &[u8]);
}

pub trait QuicSend: Send + 'static {
    fn write_all(&mut self, data: &[u8]) -> impl Future<Output = Result<(), String>> + Send;
    fn finish(&mut self) -> Result<(), String>;
    fn reset(&mut self, code: u32);
}

pub trait QuicRecv: Send + 'static {
    fn read_to_end(&mut self, limit: usize)
        -> impl Future<Output = Result<Vec<u8>, String>> + Send;
    /// The next bytes in order; None at the end of the stream.
    fn read_chunk(
        &mut self,
        max: usize,
    ) -> impl Future<Output = Result<Option<Bytes>, String>> + Send;
    /// Fill `buf`: Ok(true) when filled, Ok(false) when the stream ended cleanly before its first
    /// byte.
    fn read_exact(&mut self, buf: &mut [u8]) -> impl Future<Output = Result<bool, String>> + Send;
}

/// A connection's handshake under way (a server's incoming connection).
pub type Handshake<C> = Pin<Box<dyn Future<Output = Result<C, String>> + Send>>;

pub trait QuicEndpoint: Clone + Send + Sync + 'static {
    type Conn: QuicConn;
    /// Connect to `server` (any server name: fecq's client accepts any certificate, tls.rs).
    fn connect(
        &self,
        server: SocketAddr,
    ) -> impl Future<Output = Result<Self::Conn, String>> + Send;
    /// The next incoming connection's handshake; None once the endpoint is closed.
    fn accept(&self) -> impl Future<Output = Option<Handshake<Self::Conn>>> + Send;
    fn close(&self, code: u32, reason: &[u8]);
    /// Until every connection is closed and drained.
    fn wait_idle(&self) -> impl Future<Output = ()> + Send;
}

/// The impls of the traits above for a stack crate `$q` (quinn or noq). The two calls whose
/// signatures differ between the crates come from the adapter: `$remote(&$q::Connection) ->
/// SocketAddr` and `async $read_chunk(&mut $q::RecvStream, usize) -> Result<Option<Bytes>, String>`.
macro_rules! impl_quic {
    ($q:ident, remote_address: $remote:path, read_chunk: $read_chunk:path) => {
        impl $crate::quic::QuicConn for $q::Connection {
            type Send = $q::SendStream;
            type Recv = $q::RecvStream;
            async fn open_bi(&self) -> Result<(Self::Send, Self::Recv), String> {
                $q::Connection::open_bi(self)
                    .await
                    .map_err(|e| format!("open: {e}"))
            }
            async fn accept_bi(&self) -> Option<(Self::Send, Self::Recv)> {
                $q::Connection::accept_bi(self).await.ok()
            }
            fn send_datagram(&self, data: bytes::Bytes) -> Result<(), String> {
                $q::Connection::send_datagram(self, data).map_err(|e| format!("send_datagram: {e}"))
            }
            async fn read_datagram(&self) -> Result<bytes::Bytes, String> {
                $q::Connection::read_datagram(self)
                    .await
                    .map_err(|e| format!("datagram read: {e}"))
            }
            fn max_datagram_size(&self) -> Option<usize> {
                $q::Connection::max_datagram_size(self)
            }
            fn datagram_frames_sent(&self) -> u64 {
                self.stats().frame_tx.datagram
            }
            fn datagrams_sent(&self) -> u64 {
                self.stats().udp_tx.datagrams
            }
            fn remote_address(&self) -> std::net::SocketAddr {
                $remote(self)
            }
            fn closed(&self) -> Option<$crate::quic::Closed> {
                $q::Connection::close_reason(self).map(|reason| match reason {
                    $q::ConnectionError::TimedOut => $crate::quic::Closed::TimedOut,
                    other => $crate::quic::Closed::Other(other.to_string()),
                })
            }
            fn is_closed(&self) -> bool {
                $q::Connection::close_reason(self).is_some()
            }
            fn close(&self, code: u32, reason: &[u8]) {
                $q::Connection::close(self, code.into(), reason)
            }
        }

        impl $crate::quic::QuicSend for $q::SendStream {
            async fn write_all(&mut self, data: &[u8]) -> Result<(), String> {
                $q::SendStream::write_all(self, data)
                    .await
                    .map_err(|e| format!("write: {e}"))
            }
            fn finish(&mut self) -> Result<(), String> {
                $q::SendStream::finish(self).map_err(|e| format!("finish: {e}"))
            }
            fn reset(&mut self, code: u32) {
                let _ = $q::SendStream::reset(self, code.into());
            }
        }

        impl $crate::quic::QuicRecv for $q::RecvStream {
            async fn read_to_end(&mut self, limit: usize) -> Result<Vec<u8>, String> {
                $q::RecvStream::read_to_end(self, limit)
                    .await
                    .map_err(|e| format!("read: {e}"))
            }
            async fn read_chunk(&mut self, max: usize) -> Result<Option<bytes::Bytes>, String> {
                $read_chunk(self, max).await
            }
            async fn read_exact(&mut self, buf: &mut [u8]) -> Result<bool, String> {
                match $q::RecvStream::read_exact(self, buf).await {
                    Ok(()) => Ok(true),
                    Err($q::ReadExactError::FinishedEarly(0)) => Ok(false),
                    Err(e) => Err(format!("stream read: {e}")),
                }
            }
        }

        impl $crate::quic::QuicEndpoint for $q::Endpoint {
            type Conn = $q::Connection;
            async fn connect(&self, server: std::net::SocketAddr) -> Result<Self::Conn, String> {
                $q::Endpoint::connect(self, server, "localhost")
                    .map_err(|e| format!("connect: {e}"))?
                    .await
                    .map_err(|e| format!("handshake: {e}"))
            }
            async fn accept(&self) -> Option<$crate::quic::Handshake<Self::Conn>> {
                let incoming = $q::Endpoint::accept(self).await?;
                Some(Box::pin(async move {
                    incoming.await.map_err(|e| e.to_string())
                }))
            }
            fn close(&self, code: u32, reason: &[u8]) {
                $q::Endpoint::close(self, code.into(), reason)
            }
            async fn wait_idle(&self) {
                $q::Endpoint::wait_idle(self).await
            }
        }
    };
}
pub(crate) use impl_quic;
