//! What the layer did, as events for a trace (fecq's qlog, crate::options::qlog): recorded only when asked
//! for ([`super::FecLayer::record_events`]), so a layer without a trace formats and keeps nothing.

use std::net::SocketAddr;
use std::time::Instant;

use fec_core::frame::{self, Frame};

use super::config::Signal;

/// One thing the FEC layer did, on the path with index `path` (in the order the connection's
/// paths were first used) of the connection whose group key is `group`.
#[derive(Clone, Debug, PartialEq)]
pub struct FecEvent {
    pub time: Instant,
    /// The connection's group key (crate::layer's table: the peer's address or port).
    pub group: SocketAddr,
    pub path: usize,
    pub kind: FecEventKind,
}

#[derive(Clone, Debug, PartialEq)]
pub enum FecEventKind {
    /// A repair symbol sent: `block` is the first source symbol id it covers, `symbol` its
    /// index in that block (Reed-Solomon), its repair id (RLC) or 0 (XOR: one per block).
    RepairSent {
        block: u32,
        symbol: u32,
        bytes: usize,
    },
    /// A QUIC datagram the stack sent, as it went on the wire (source or plain datagram: `bytes`
    /// with the layer's framing, the UDP payload), and whether it carries application data
    /// ([`Content::Data`](super::Content::Data): a STREAM or DATAGRAM frame, or contents not
    /// known; crate::content). One per datagram, in the order sent among the repairs.
    DatagramSent { bytes: usize, app_data: bool },
    /// The workload's transfer is over at this end (its `stats` exchange begins): the datagrams it
    /// sends from here on carry no data of the transfer, whatever their frames (the stats request
    /// and reply are stream data too).
    TransferOver,
    /// A source symbol rebuilt from repairs; `block`: the first source id of the repair whose
    /// arrival rebuilt it (None: a source datagram's arrival completed it).
    SourceRecovered { block: Option<u32>, symbol: u32 },
    /// Source symbols the decoder gave up on (they fell out of its window still missing):
    /// `block` is the first of them, `symbols` how many went at once.
    BlockAbandoned { block: u32, symbols: u32 },
    /// A recovered datagram handed to the stack as a congestion signal (`Ce`: ECN-CE marked) or
    /// hidden from it (`Hide`): one per recovered datagram.
    RecoverySignalled { symbol: u32, trigger: Signal },
}

/// (first source id covered, symbol within it) of a repair datagram (fec-core framing).
pub(super) fn repair_ids(datagram: &[u8]) -> Option<(u32, u32)> {
    match frame::parse(datagram)? {
        Frame::Source { .. } | Frame::Plain { .. } => None,
        Frame::XorRepair { first, .. } => Some((first, 0)),
        Frame::RsRepair { first, index, .. } => Some((first, u32::from(index))),
        Frame::RlcRepair {
            repair_id, first, ..
        } => Some((first, repair_id)),
    }
}
