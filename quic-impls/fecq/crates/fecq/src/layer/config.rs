//! What configures the FEC layer: the code, how recovered datagrams are shown to QUIC, the flush
//! floor, the multipath framing options and tail mode; and what the stack tells it about a path's
//! congestion window (tail mode).

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use fec_core::Scheme;

/// How a recovered datagram is shown to QUIC.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Signal {
    /// ECN-CE marked: the sender's congestion controller reacts as to a loss, nothing is
    /// retransmitted.
    Ce,
    /// As sent: the loss is hidden from congestion control.
    Hide,
}

impl FromStr for Signal {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "ce" => Ok(Signal::Ce),
            "hide" => Ok(Signal::Hide),
            _ => Err(format!("unknown signal mode {s:?} (allowed: ce, hide)")),
        }
    }
}

impl fmt::Display for Signal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Signal::Ce => "ce",
            Signal::Hide => "hide",
        })
    }
}

/// Which datagrams form a FEC source block (multipath).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Blocks {
    /// One encoder per path: a block holds the datagrams of one path.
    PerPath,
    /// One encoder per connection: a block holds datagrams of every path, in sending order.
    Connection,
}

/// Where repair datagrams go (multipath).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RepairPath {
    /// On the path of the block's last source datagram.
    Same,
    /// On the next path (in the order paths were first seen), so a path's outage does not take
    /// the repairs of its own datagrams with it.
    Other,
    /// Spread over every path in turn.
    All,
}

macro_rules! named_enum {
    ($t:ty, $what:literal, $($name:literal => $v:expr),+) => {
        impl FromStr for $t {
            type Err = String;
            fn from_str(s: &str) -> Result<Self, String> {
                match s {
                    $($name => Ok($v),)+
                    _ => Err(format!(concat!("unknown ", $what, " {:?} (allowed: {})"), s,
                                     [$($name),+].join(", "))),
                }
            }
        }
        impl fmt::Display for $t {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                $(if *self == $v { return f.write_str($name); })+
                unreachable!()
            }
        }
    };
}
named_enum!(Blocks, "FEC block mode", "path" => Blocks::PerPath, "connection" => Blocks::Connection);
named_enum!(RepairPath, "repair path", "same" => RepairPath::Same, "other" => RepairPath::Other,
            "all" => RepairPath::All);

/// Which QUIC datagrams become source symbols (`--fec-protect`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Protect {
    /// Only those that carry application data (a STREAM or DATAGRAM frame: crate::content), as
    /// the 2019 paper's FEC protected stream data only. The others (handshake CRYPTO, ACK, PING,
    /// PADDING, flow-control and other control frames) are sent plain: no repair covers them and
    /// they bring none due.
    Stream,
    /// Every QUIC datagram (fecq before issue 59).
    All,
}

named_enum!(Protect, "FEC protection", "stream" => Protect::Stream, "all" => Protect::All);

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Multipath {
    pub blocks: Blocks,
    pub repair: RepairPath,
}

#[derive(Clone, Debug)]
pub struct LayerConfig {
    pub scheme: Scheme,
    pub signal: Signal,
    /// Least idle time after which a partial block is flushed (crate::flush).
    pub flush_after: Duration,
    /// Largest QUIC datagram the stack hands over (a hint for the encoders).
    pub max_payload: usize,
    /// None: single-path framing, one path per remote address.
    pub multipath: Option<Multipath>,
    /// Tail mode (`Some(cap)`): no repairs while the sender sends; when it goes quiet, up to
    /// `cap` repairs over its last W datagrams, as many as the congestion window has room for
    /// ([`TailBudget`]). None: block mode, repairs as the scheme says.
    pub tail: Option<usize>,
    /// Which datagrams are source symbols: those the stack says carry application data
    /// ([`Protect::Stream`]), or all.
    pub protect: Protect,
}

/// What the QUIC stack tells the layer about a path's congestion window, for tail mode.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TailBudget {
    /// Bytes the congestion window has room for now (window − bytes in flight, an upper bound
    /// of the latter: see cc.rs).
    pub room_bytes: u64,
    /// That upper bound of the bytes in flight (unacknowledged).
    pub in_flight_bytes: u64,
    /// The stack had nothing more to send at its last transmission (as it told its congestion
    /// controller with the last ACKs, none sent since): a pause is the end of its data, not a
    /// wait for window room or pacing.
    pub app_limited: bool,
    /// Data-carrying frames (STREAM, DATAGRAM, CRYPTO) the stack has sent so far: a tail is
    /// only worth sending when it grew since the last one (ACK-only packets need no repair).
    pub data_frames: u64,
}
