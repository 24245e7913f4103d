//! What one endpoint knows about a connection, and the metrics JSON the client writes.

use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::socket::{FecSocket, PeerCounters};

/// One endpoint's view of a connection: quinn's counters plus its FEC layer's.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct SideStats {
    /// Datagrams put on the wire by the FEC layer (QUIC source datagrams + repair datagrams).
    pub packets_sent: u64,
    /// Bytes of those datagrams (UDP payload: QUIC packets, FEC headers, repair symbols).
    pub bytes_sent: u64,
    pub repair_sent: u64,
    /// QUIC packets quinn sent, and their bytes (without FEC headers and repairs).
    pub quic_packets_sent: u64,
    pub quic_bytes_sent: u64,
    /// Packets quinn declared lost (each one's frames are retransmitted as needed).
    pub lost: u64,
    pub lost_bytes: u64,
    pub congestion_events: u64,
    pub cwnd: u64,
    pub rtt_ms: f64,
    /// Datagrams received from the peer and recovered from the peer's repairs.
    pub wire_datagrams_received: u64,
    pub recovered: u64,
    /// Datagrams the decoder ignored (malformed, truncated, duplicated, stale).
    pub fec_ignored: u64,
    /// Datagrams the in-process loss model dropped (loopback only).
    pub wire_dropped: u64,
    /// DATAGRAM frames (unreliable application datagrams) QUIC put in packets; the application's
    /// datagrams beyond this were dropped from, or still waited in, QUIC's datagram send queue.
    #[serde(default)]
    pub datagram_frames_sent: u64,
    /// Datagrams the FEC adapter dropped before the wire (send backlog full, send error).
    #[serde(default)]
    pub send_dropped: u64,
    /// Multipath only: this endpoint's view of each path.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub paths: Vec<PathSide>,
    /// Tail FEC (`--fec-mode tail`): repairs sent when this endpoint went quiet (included in
    /// `repair_sent`), and how many tails carried them.
    #[serde(default)]
    pub tail_repairs: u64,
    #[serde(default)]
    pub tails: u64,
}

/// One endpoint's view of one path (multipath): its FEC layer's counters for the path's
/// (local IP, remote address) and the QUIC stack's counters of the path it belongs to.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct PathSide {
    /// This endpoint's IP address on the path, and the peer's address.
    pub local: String,
    pub remote: String,
    /// The QUIC path id (None: the FEC layer saw the path but QUIC no longer has it open).
    pub quic_path_id: Option<u32>,
    /// Datagrams (and bytes) put on the wire on this path: QUIC source datagrams + repairs.
    pub packets_sent: u64,
    pub bytes_sent: u64,
    /// Repair datagrams sent on this path (whichever path's datagrams they protect).
    pub repair_sent: u64,
    /// Datagrams received on this path, and their bytes.
    pub packets_received: u64,
    pub bytes_received: u64,
    /// Datagrams the peer sent on this path that were lost and rebuilt from repairs.
    pub recovered: u64,
    pub fec_ignored: u64,
    pub wire_dropped: u64,
    /// QUIC's counters of the path: packets sent, declared lost (and their bytes), congestion
    /// events, congestion window and smoothed RTT.
    pub quic_packets_sent: u64,
    pub lost: u64,
    pub lost_bytes: u64,
    pub congestion_events: u64,
    pub cwnd: u64,
    pub rtt_ms: Option<f64>,
}

/// One path in the client's metrics file: the client's and the server's view of it.
#[derive(Clone, Debug, Default, Serialize)]
pub struct PathReport {
    /// 1-based, in the order of `--local-addresses`.
    pub path: usize,
    pub client_address: String,
    pub server_address: String,
    pub client: Option<PathSide>,
    pub server: Option<PathSide>,
}

/// The multipath settings of a run and what came of them.
#[derive(Clone, Debug, Default, Serialize)]
pub struct MultipathInfo {
    pub scheduler: String,
    pub fec_blocks: String,
    pub repair_path: String,
    pub paths_requested: usize,
    pub paths_established: usize,
    /// Reed-Solomon blocks of the data the client received that missed a source datagram
    /// (recovered or not: fec-core `DecoderStats::blocks_with_losses`); 0 for other codes.
    pub blocks_with_losses: u64,
}

impl SideStats {
    pub fn collect(s: quinn::ConnectionStats, fec: PeerCounters) -> Self {
        SideStats {
            packets_sent: fec.wire_datagrams_sent,
            bytes_sent: fec.wire_bytes_sent,
            repair_sent: fec.repair_sent,
            quic_packets_sent: s.udp_tx.datagrams,
            quic_bytes_sent: s.udp_tx.bytes,
            lost: s.path.lost_packets,
            lost_bytes: s.path.lost_bytes,
            congestion_events: s.path.congestion_events,
            cwnd: s.path.cwnd,
            rtt_ms: s.path.rtt.as_secs_f64() * 1e3,
            wire_datagrams_received: fec.wire_datagrams_received,
            recovered: fec.recovered,
            fec_ignored: fec.ignored,
            wire_dropped: fec.wire_dropped,
            datagram_frames_sent: s.frame_tx.datagram,
            send_dropped: fec.send_dropped,
            paths: Vec::new(),
            tail_repairs: fec.tail_repairs,
            tails: fec.tails,
        }
    }

    pub fn of_peer(conn: &quinn::Connection, socket: &FecSocket) -> Self {
        // QUIC's counters first: every datagram it had counted by then has reached the FEC layer
        // (the connection driver hands each over under the lock `stats` takes; only one refused by
        // a full socket waits in quinn), so the layer's wire count, read second, is not behind QUIC's.
        let quic = conn.stats();
        Self::collect(quic, socket.peer_counters(conn.remote_address()))
    }
}

/// The metrics file. Top-level transport keys describe the data-sending side (the server);
/// `recovered` counts the data datagrams the receiving side (the client) rebuilt.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Metrics {
    pub ok: bool,
    pub error: Option<String>,
    /// The run ended at `--timeout` (exit status 124); `bytes_app` is what arrived until then.
    pub timed_out: bool,
    /// Time from the client's start (after its options were checked) to the end of the run.
    pub elapsed_ms: Option<f64>,
    pub workload: String,
    pub fec: String,
    pub signal: String,
    pub cc: String,
    /// `--repair-cc`: whether repairs count against the congestion window.
    pub repair_cc: String,
    /// `--initial-window`, `--max-window` in packets of 1200 bytes (null: the controller's own).
    pub initial_window: Option<u64>,
    pub max_window: Option<u64>,
    /// Loss detection (`--reorder-packets`, `--reorder-time` in RTTs) and the ACK frequency asked
    /// of the peer (`--ack-eliciting-threshold`, `--max-ack-delay`; null: none asked).
    pub reorder_packets: u32,
    pub reorder_time: f32,
    pub ack_eliciting_threshold: Option<u32>,
    pub max_ack_delay_ms: Option<u64>,
    /// `--keepalive` in seconds (0: off; single path).
    pub keepalive_s: f64,
    pub size: Option<u64>,
    pub dct_ms: Option<f64>,
    pub handshake_ms: Option<f64>,
    pub bytes_app: u64,
    pub packets_sent: u64,
    pub bytes_sent: u64,
    pub repair_sent: u64,
    /// Tail FEC: the data sender's repairs sent at its tails (part of `repair_sent`).
    pub tail_repairs: u64,
    pub recovered: u64,
    pub lost: u64,
    pub retransmitted_bytes: u64,
    pub congestion_events: u64,
    pub cwnd_final: u64,
    pub rtt_ms: f64,
    /// Messages workload only: its keys sit at the top level.
    #[serde(flatten)]
    pub messages: Option<crate::messages::MessageReport>,
    /// Request/response workload only (transfer.rs): its keys sit at the top level.
    #[serde(flatten)]
    pub exchanges: Option<crate::transfer::ExchangeReport>,
    pub sender: Option<SideStats>,
    pub client: Option<SideStats>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub loopback: Option<serde_json::Value>,
    /// Multipath runs only (schema in README.md).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub multipath: Option<MultipathInfo>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub paths: Vec<PathReport>,
}

impl Metrics {
    /// Fill the top-level transport keys from the sender's and receiver's views.
    pub fn set_transport(&mut self, sender: SideStats, receiver: SideStats) {
        self.packets_sent = sender.packets_sent;
        self.bytes_sent = sender.bytes_sent;
        self.repair_sent = sender.repair_sent;
        self.tail_repairs = sender.tail_repairs;
        self.recovered = receiver.recovered;
        self.lost = sender.lost;
        self.retransmitted_bytes = sender.lost_bytes;
        self.congestion_events = sender.congestion_events;
        self.cwnd_final = sender.cwnd;
        self.rtt_ms = sender.rtt_ms;
        if let Some(messages) = self.messages.as_mut() {
            messages.add_sender(sender.datagram_frames_sent, sender.send_dropped);
        }
        self.sender = Some(sender);
        self.client = Some(receiver);
    }

    /// The same when the client sends the data (uploads): the top-level keys from the client's
    /// view, `recovered` from the server's; `sender` stays the server's side, `client` the client's.
    pub fn set_transport_client_sends(&mut self, server: SideStats, client: SideStats) {
        self.set_transport(client.clone(), server.clone());
        self.sender = Some(server);
        self.client = Some(client);
    }

    pub fn write(&self, path: &Path) -> Result<(), String> {
        let text = serde_json::to_string_pretty(self).map_err(|e| e.to_string())?;
        // Write then rename, so a reader never sees half a file.
        let tmp = path.with_extension("json.tmp");
        std::fs::write(&tmp, text + "\n")
            .map_err(|e| format!("cannot write {}: {e}", tmp.display()))?;
        std::fs::rename(&tmp, path).map_err(|e| format!("cannot write {}: {e}", path.display()))
    }
}
