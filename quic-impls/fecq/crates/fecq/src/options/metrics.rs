//! The metrics JSON the client writes, every key of it (README.md, "Metrics JSON"): what one
//! endpoint knows about a connection (`SideStats`, per path `PathSide`), the multipath settings
//! and per-path report, the workloads' own reports (messages, request/response, page load), and
//! the file. Filled by the stacks' glue (`side_stats`), the workloads and the roles (crate::run).

use std::net::{IpAddr, SocketAddr};
use std::path::Path;
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// One endpoint's view of a connection: the QUIC stack's counters plus its FEC layer's.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct SideStats {
    /// Datagrams put on the wire by the FEC layer (QUIC source datagrams + repair datagrams).
    pub packets_sent: u64,
    /// Bytes of those datagrams (UDP payload: QUIC packets, FEC headers, repair symbols).
    pub bytes_sent: u64,
    pub repair_sent: u64,
    /// QUIC datagrams sent unprotected (`--fec-protect stream`: no STREAM or DATAGRAM frame in
    /// them; counted in `packets_sent`, not source symbols).
    #[serde(default)]
    pub plain_sent: u64,
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
    /// Datagrams the client had received on this path when it asked for the server's counters:
    /// reading the two sides is not one instant, the server's `server` view was taken between
    /// this count and `client.packets_received` (which includes the reply and what came with it).
    pub client_received_before_stats: Option<u64>,
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
    /// `--fec-protect`: which QUIC packets were source symbols (`stream` or `all`).
    pub fec_protect: String,
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
    /// Client start → the workload's first request: the endpoint set up, the handshake, and with
    /// multipath every path opened (what `dct_ms` leaves out).
    pub setup_ms: Option<f64>,
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
    pub messages: Option<MessageReport>,
    /// Request/response workload only (transfer.rs): its keys sit at the top level.
    #[serde(flatten)]
    pub exchanges: Option<ExchangeReport>,
    /// Page-load workload only (app/page.rs): each activity's times and the load time.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub page: Option<PageReport>,
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

/// A duration in the metrics' unit, milliseconds.
pub fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// The client's per-path report: its view of path i and the server's view of the same path
/// (the server's path whose local address is path i's server address and whose remote IP is
/// path i's client address).
pub fn path_reports(
    paths: &[(Option<IpAddr>, SocketAddr)],
    client_before: &SideStats,
    client: &SideStats,
    server: Option<&SideStats>,
) -> Vec<PathReport> {
    paths
        .iter()
        .enumerate()
        .map(|(i, (local, remote))| {
            let local_s = local.map_or_else(|| "*".to_string(), |ip| ip.to_string());
            let mine_in = |side: &SideStats| {
                side.paths
                    .iter()
                    .find(|p| p.local == local_s && p.remote == remote.to_string())
                    .cloned()
            };
            let mine = mine_in(client);
            let before = mine_in(client_before).map(|p| p.packets_received);
            let theirs = server.and_then(|s| {
                s.paths
                    .iter()
                    .find(|p| {
                        p.local == remote.ip().to_string()
                            && p.remote
                                .parse::<SocketAddr>()
                                .is_ok_and(|a| local.is_none_or(|ip| a.ip() == ip))
                    })
                    .cloned()
            });
            PathReport {
                path: i + 1,
                client_address: local_s,
                server_address: remote.to_string(),
                client: mine,
                server: theirs,
                client_received_before_stats: before,
            }
        })
        .collect()
}

/// Message keys of the metrics file (top level).
#[derive(Clone, Debug, Default, Serialize)]
pub struct MessageReport {
    pub mode: String,
    pub rate: u32,
    pub packets: u32,
    pub duration: f64,
    pub buffer: u32,
    /// Messages the sender sent (= rate × duration); the sum of the four that follow.
    pub messages_sent: u64,
    pub messages_on_time: u64,
    pub messages_late: u64,
    /// Some but not all of the message's packets arrived.
    pub messages_corrupted: u64,
    /// None of the message's packets arrived.
    pub messages_lost: u64,
    /// Older names: `messages_expected` = sent, `messages_ok` = on time, `messages_corrupt` =
    /// corrupted + lost (incomplete).
    pub messages_expected: u64,
    pub messages_ok: u64,
    pub messages_corrupt: u64,
    /// The thesis's measure (§5.1.6): one message interval for every message not complete at its
    /// deadline (late, corrupted or lost); deadlines never move (a real-time reader keeps its
    /// de-synchronisation), so in stream mode the messages held behind a retransmission are late too.
    pub rebuffering_ms: f64,
    /// A player that waits instead (stream mode): the time it stood still for late messages, its
    /// later deadlines moved by as much, so the added latency absorbs later retransmissions.
    /// Datagram mode never waits: equal to `rebuffering_ms` there.
    pub stall_ms: f64,
    /// Runs of successive messages not played on time.
    pub rebuffering_events: u64,
    pub bad_packets: u64,
    /// Message packets: sent, arrived by their message's deadline, arrived after it, missing.
    pub msg_packets_sent: u64,
    pub msg_packets_on_time: u64,
    pub msg_packets_late: u64,
    pub msg_packets_missing: u64,
    /// The packets of late, corrupted and lost messages: those that arrived after the deadline,
    /// and those missing, split by where they went (`add_sender`): never put in a QUIC packet by
    /// the sender (dropped from QUIC's datagram queue, or still queued when the receiver
    /// stopped), dropped by the sender's FEC adapter before the wire (at most), and the rest,
    /// lost on the way (the link: the dropper's verdicts say how many) and not recovered.
    pub bad_msg_packets_late: u64,
    pub bad_msg_packets_missing: u64,
    pub missing_not_sent: Option<u64>,
    pub missing_sender_dropped: Option<u64>,
    pub missing_in_network: Option<u64>,
    /// The sender's `done` line: datagrams it sent, and DATAGRAM frames QUIC had sent by then.
    pub sender_datagrams: Option<u64>,
    pub sender_frames_at_done: Option<u64>,
}

impl MessageReport {
    /// Split the missing packets by where they went, from the sender's counters at the end of the
    /// run: DATAGRAM frames QUIC sent, and datagrams its FEC adapter dropped before the wire.
    /// Datagram mode only (a reliable stream loses nothing it does not retransmit).
    pub fn add_sender(&mut self, frames_sent: u64, send_dropped: u64) {
        let Some(app) = self.sender_datagrams else {
            return;
        };
        let missing = self.msg_packets_missing;
        let not_sent = app.saturating_sub(frames_sent).min(missing);
        let dropped = send_dropped.min(missing - not_sent);
        self.missing_not_sent = Some(not_sent);
        self.missing_sender_dropped = Some(dropped);
        self.missing_in_network = Some(missing - not_sent - dropped);
    }
}

/// What a request/response run reports (flattened into the metrics JSON).
#[derive(Clone, Debug, Default, Serialize, PartialEq)]
pub struct ExchangeReport {
    /// Exchanges asked for, request and response sizes in bytes.
    pub exchanges: u32,
    pub request: u64,
    pub response: u64,
    /// Exchanges completed (request verified by the server, response verified by the client).
    pub exchanges_done: u32,
    /// Each completed exchange's time, in order: stream opened -> response's FIN read.
    pub exchange_ms: Vec<f64>,
    /// Median (mean of the middle two for an even count) and 95th percentile (nearest rank:
    /// the ceil(0.95 n)-th smallest) of `exchange_ms`; null before the first exchange completes.
    pub exchange_median_ms: Option<f64>,
    pub exchange_p95_ms: Option<f64>,
}

impl ExchangeReport {
    /// Before the first exchange: what was asked.
    pub fn new(exchanges: u32, request: u64, response: u64) -> Self {
        ExchangeReport {
            exchanges,
            request,
            response,
            ..Default::default()
        }
    }

    /// One more exchange completed, in `t_ms`.
    pub fn record(&mut self, t_ms: f64) {
        self.exchange_ms.push(t_ms);
        self.exchanges_done = self.exchange_ms.len() as u32;
        self.exchange_median_ms = median(&self.exchange_ms);
        self.exchange_p95_ms = nearest_rank(&self.exchange_ms, 0.95);
    }
}

/// What a page load reports (the metrics JSON's `page`; app/page.rs).
#[derive(Clone, Debug, Default, Serialize, PartialEq)]
pub struct PageReport {
    pub name: String,
    /// The page load time (= `dct_ms`): the load activity's end, else the last activity's end;
    /// null unless every activity ended.
    pub load_ms: Option<f64>,
    /// Every activity of the graph, in the file's order.
    pub activities: Vec<ActivityTimes>,
}

/// When an activity started, had its first response byte (downloads) and ended, in ms from the
/// workload's start (after the handshake); null for what did not happen.
#[derive(Clone, Debug, Default, Serialize, PartialEq)]
pub struct ActivityTimes {
    pub id: String,
    /// download | compute
    pub kind: String,
    pub start_ms: Option<f64>,
    pub first_byte_ms: Option<f64>,
    pub end_ms: Option<f64>,
}

pub fn median(values: &[f64]) -> Option<f64> {
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    let n = v.len();
    match n {
        0 => None,
        _ if n % 2 == 1 => Some(v[n / 2]),
        _ => Some((v[n / 2 - 1] + v[n / 2]) / 2.0),
    }
}

/// The ceil(q n)-th smallest value (q in (0, 1]).
pub fn nearest_rank(values: &[f64], q: f64) -> Option<f64> {
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    if v.is_empty() {
        return None;
    }
    let rank = ((q * v.len() as f64).ceil() as usize).clamp(1, v.len());
    Some(v[rank - 1])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_and_nearest_rank_p95() {
        assert_eq!(median(&[]), None);
        assert_eq!(median(&[3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), Some(2.5));
        let v: Vec<f64> = (1..=20).map(f64::from).collect();
        assert_eq!(nearest_rank(&v, 0.95), Some(19.0));
        assert_eq!(nearest_rank(&v[..10], 0.95), Some(10.0));
        assert_eq!(nearest_rank(&[7.0], 0.95), Some(7.0));
    }
}
