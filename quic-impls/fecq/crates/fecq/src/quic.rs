//! What fecq's application protocol (app.rs, messages.rs) needs from a QUIC stack, so that it is
//! written once for both stacks: quinn (single path) and noq (its multipath fork, whose
//! connection and stream API is quinn's). The impls are textually identical for both crates,
//! hence one macro instantiated per crate.

use std::future::Future;
use std::net::SocketAddr;

use bytes::Bytes;

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
    fn remote_address(&self) -> SocketAddr;
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

macro_rules! impl_quic {
    ($q:ident) => {
        impl QuicConn for $q::Connection {
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
            fn send_datagram(&self, data: Bytes) -> Result<(), String> {
                $q::Connection::send_datagram(self, data).map_err(|e| format!("send_datagram: {e}"))
            }
            async fn read_datagram(&self) -> Result<Bytes, String> {
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
            fn remote_address(&self) -> SocketAddr {
                remote_address!($q, self)
            }
        }

        impl QuicSend for $q::SendStream {
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

        impl QuicRecv for $q::RecvStream {
            async fn read_to_end(&mut self, limit: usize) -> Result<Vec<u8>, String> {
                $q::RecvStream::read_to_end(self, limit)
                    .await
                    .map_err(|e| format!("read: {e}"))
            }
            async fn read_chunk(&mut self, max: usize) -> Result<Option<Bytes>, String> {
                read_chunk_ordered!($q, self, max)
            }
            async fn read_exact(&mut self, buf: &mut [u8]) -> Result<bool, String> {
                match $q::RecvStream::read_exact(self, buf).await {
                    Ok(()) => Ok(true),
                    Err($q::ReadExactError::FinishedEarly(0)) => Ok(false),
                    Err(e) => Err(format!("stream read: {e}")),
                }
            }
        }
    };
}

/// quinn's `read_chunk` takes an `ordered` flag and returns a chunk with its offset; noq's
/// ordered stream returns the bytes.
macro_rules! read_chunk_ordered {
    (quinn, $s:expr, $max:expr) => {
        quinn::RecvStream::read_chunk($s, $max, true)
            .await
            .map(|c| c.map(|c| c.bytes))
            .map_err(|e| e.to_string())
    };
    (noq, $s:expr, $max:expr) => {
        noq::RecvStream::read_chunk($s, $max)
            .await
            .map_err(|e| e.to_string())
    };
}

/// quinn has one path; under noq, the remote address of the lowest-numbered open path.
macro_rules! remote_address {
    (quinn, $c:expr) => {
        quinn::Connection::remote_address($c)
    };
    (noq, $c:expr) => {
        crate::mp::remote_address($c)
    };
}

impl_quic!(quinn);
impl_quic!(noq);
