//! What crosses the layer's boundary: a path as a socket sees it, the wire datagrams going out and
//! the QUIC datagrams coming back, with their ECN bits.

use std::fmt;
use std::net::{IpAddr, SocketAddr};

/// ECN codepoints as their two IP-header bits (0 = not ECN-capable).
pub const ECN_ECT0: u8 = 0b10;
pub const ECN_CE: u8 = 0b11;

/// (local IP, remote address): a path as a socket sees it. `local` is None when the stack left
/// the source address to the kernel (single-path quinn).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PathKey {
    pub local: Option<IpAddr>,
    pub remote: SocketAddr,
}

impl PathKey {
    pub fn new(local: Option<IpAddr>, remote: SocketAddr) -> Self {
        PathKey { local, remote }
    }
}

impl fmt::Display for PathKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.local {
            Some(ip) => write!(f, "{ip} -> {}", self.remote),
            None => write!(f, "* -> {}", self.remote),
        }
    }
}

/// What the stack put in a QUIC datagram, as its adapter learnt it (crate::content): whether it
/// is a source symbol under [`Protect::Stream`](super::Protect::Stream).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Content {
    /// Application data (a STREAM or DATAGRAM frame), or contents not known: protected.
    Data,
    /// Nothing of the application's: handshake (CRYPTO), ACK, PING, PADDING, flow-control and
    /// other control frames only.
    Control,
}

/// A wire datagram to send: on `path` (source address `path.local`, to `path.remote`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Outgoing {
    pub path: PathKey,
    pub data: Vec<u8>,
    /// ECN bits to send it with.
    pub ecn: u8,
    pub repair: bool,
}

/// A QUIC datagram for the stack, as received on `path` (for a recovered one: the path it was
/// sent on).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Incoming {
    pub path: PathKey,
    pub payload: Vec<u8>,
    /// ECN bits to show the stack (CE for a recovered datagram with `Signal::Ce`).
    pub ecn: u8,
    pub recovered: bool,
}
