//! The layer's counters, per path.

use serde::Serialize;

/// Counters of one path, as seen by this endpoint's FEC layer.
#[derive(Clone, Copy, Debug, Default, Serialize, PartialEq, Eq)]
pub struct Counters {
    /// Datagrams put on the wire (source + repair), including those a loopback loss model dropped.
    pub wire_datagrams_sent: u64,
    pub wire_bytes_sent: u64,
    /// Repair datagrams sent on this path (whichever path's datagrams they protect).
    pub repair_sent: u64,
    /// QUIC datagrams sent on this path unprotected (`Protect::Stream`: no application data in
    /// them), included in `wire_datagrams_sent`: no source symbols.
    pub plain_sent: u64,
    /// Datagrams the in-process loss model or shaper dropped (loopback only).
    pub wire_dropped: u64,
    /// Datagrams the adapter dropped before the wire: its send backlog was full, or the socket
    /// refused them with an error other than "would block" (counted in `wire_datagrams_sent`).
    pub send_dropped: u64,
    pub wire_datagrams_received: u64,
    pub wire_bytes_received: u64,
    /// QUIC datagrams sent on this path by the peer that the decoder rebuilt from repairs
    /// (wherever the repairs arrived).
    pub recovered: u64,
    /// QUIC datagrams handed to QUIC as this path's (received + recovered).
    pub delivered: u64,
    /// Datagrams the decoder could not use (malformed, truncated, stale or duplicates).
    pub ignored: u64,
    /// Tail mode: repairs sent when the sender went quiet (included in `repair_sent`), and the
    /// number of such tails.
    pub tail_repairs: u64,
    pub tails: u64,
}

impl Counters {
    pub fn add(&mut self, o: &Counters) {
        self.wire_datagrams_sent += o.wire_datagrams_sent;
        self.wire_bytes_sent += o.wire_bytes_sent;
        self.repair_sent += o.repair_sent;
        self.plain_sent += o.plain_sent;
        self.wire_dropped += o.wire_dropped;
        self.send_dropped += o.send_dropped;
        self.wire_datagrams_received += o.wire_datagrams_received;
        self.wire_bytes_received += o.wire_bytes_received;
        self.recovered += o.recovered;
        self.delivered += o.delivered;
        self.ignored += o.ignored;
        self.tail_repairs += o.tail_repairs;
        self.tails += o.tails;
    }
}
