//! The real-time workload (thesis §5.1.5): the sender emits `rate` messages per second of
//! `packets` packets each for `duration` seconds; the receiver plays them back at the same rate
//! behind a de-synchronisation buffer of `buffer` messages and reports re-buffering.
//!
//! Playback model: message 0 is due `buffer - 1` message intervals after the first packet arrives
//! (reading message 0 as soon as the first bytes of message `buffer - 1` are there), message i
//! `i` intervals later. A message not complete when due causes a re-buffering:
//! - `datagram` mode (unreliable DATAGRAM frames): it is skipped, costing one interval; it counts
//!   as late if it completes afterwards, corrupt if it never does;
//! - `stream` mode (one reliable stream): playback waits for it; the wait is the re-buffering and
//!   every later deadline moves by as much; it counts as late.
//!
//! Accounting (README.md, "Messages"): every message sent is on time, late, corrupted (some but
//! not all of its packets arrived) or lost (none did), and the four add up to the messages sent
//! (asserted). A re-buffering event is a run of successive messages not played on time (§5.1.6:
//! its duration grows with the number of successive messages that could not be delivered).
//! Packets are accounted for as well: on time, after their message's deadline, or missing; the
//! missing ones of late, corrupted and lost messages are split by where they went with the
//! sender's counters (see `MessageReport::add_sender`, crate::options::metrics).

use std::str::FromStr;
use std::time::{Duration, Instant};

use crate::options::metrics::MessageReport;
use crate::quic::{QuicConn, QuicRecv, QuicSend};

/// Bytes of one message packet (header included), small enough for one DATAGRAM frame at the
/// 1200-byte QUIC MTU.
pub const PACKET_SIZE: usize = 1000;
const HEADER: usize = 8;
/// How long the receiver keeps listening for datagrams after the sender said it is done.
const GRACE: Duration = Duration::from_millis(500);

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    Datagram,
    Stream,
}

impl FromStr for Mode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "datagram" => Ok(Mode::Datagram),
            "stream" => Ok(Mode::Stream),
            _ => Err(format!(
                "unknown message mode {s:?} (allowed: datagram, stream)"
            )),
        }
    }
}

impl std::fmt::Display for Mode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Mode::Datagram => "datagram",
            Mode::Stream => "stream",
        })
    }
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Params {
    pub mode: Mode,
    pub rate: u32,
    pub packets: u32,
    pub duration: f64,
    pub buffer: u32,
}

impl Params {
    pub fn check(&self) -> Result<(), String> {
        if !(1..=1000).contains(&self.rate) {
            return Err(format!("--rate {} must be in 1..=1000", self.rate));
        }
        if !(1..=64).contains(&self.packets) {
            return Err(format!("--packets {} must be in 1..=64", self.packets));
        }
        if !(self.duration > 0.0 && self.duration <= 3600.0) {
            return Err(format!("--duration {} must be in (0, 3600]", self.duration));
        }
        if !(1..=1000).contains(&self.buffer) {
            return Err(format!("--buffer {} must be in 1..=1000", self.buffer));
        }
        Ok(())
    }

    pub fn count(&self) -> u32 {
        ((self.duration * f64::from(self.rate)).round() as u32).max(1)
    }

    fn interval(&self) -> Duration {
        Duration::from_secs_f64(1.0 / f64::from(self.rate))
    }

    /// The request line the client sends (the sender needs everything but the buffer).
    pub fn request(&self) -> String {
        format!(
            "messages {} {} {} {}\n",
            self.mode, self.rate, self.packets, self.duration
        )
    }

    pub fn parse_request(words: &[&str]) -> Result<Self, String> {
        let [mode, rate, packets, duration] = words else {
            return Err("messages request needs: mode rate packets duration".into());
        };
        let p = Params {
            mode: mode.parse()?,
            rate: rate.parse().map_err(|_| "bad rate")?,
            packets: packets.parse().map_err(|_| "bad packets")?,
            duration: duration.parse().map_err(|_| "bad duration")?,
            buffer: 1,
        };
        p.check()?;
        Ok(p)
    }
}

/// Filler byte `i` of packet `part` of message `msg`: lets the receiver check every byte.
fn filler(msg: u32, part: u16, i: usize) -> u8 {
    (msg.wrapping_mul(31) ^ u32::from(part).wrapping_mul(7) ^ i as u32) as u8
}

fn make_packet(msg: u32, part: u16, parts: u16) -> Vec<u8> {
    let mut p = Vec::with_capacity(PACKET_SIZE);
    p.extend_from_slice(&msg.to_be_bytes());
    p.extend_from_slice(&part.to_be_bytes());
    p.extend_from_slice(&parts.to_be_bytes());
    p.extend((HEADER..PACKET_SIZE).map(|i| filler(msg, part, i)));
    p
}

/// Sender side (the server): messages at their due times, then "done" on the control stream.
pub async fn send<C: QuicConn>(conn: &C, ctl: &mut C::Send, p: Params) -> Result<(), String> {
    if p.mode == Mode::Datagram {
        match conn.max_datagram_size() {
            Some(max) if max >= PACKET_SIZE => {}
            other => {
                return Err(format!(
                    "DATAGRAM frames of {PACKET_SIZE} bytes unsupported (max {other:?})"
                ))
            }
        }
    }
    let start = tokio::time::Instant::now();
    for msg in 0..p.count() {
        tokio::time::sleep_until(start + p.interval() * msg).await;
        for part in 0..p.packets as u16 {
            let packet = make_packet(msg, part, p.packets as u16);
            match p.mode {
                Mode::Datagram => conn.send_datagram(packet.into())?,
                Mode::Stream => ctl.write_all(&packet).await?,
            }
        }
    }
    if p.mode == Mode::Datagram {
        // What the application handed to QUIC, and how much of it QUIC had put in packets by now.
        let app = u64::from(p.count()) * u64::from(p.packets);
        let done = format!("done {app} {}\n", conn.datagram_frames_sent());
        ctl.write_all(done.as_bytes()).await?;
    }
    ctl.finish()
}

/// The sender's `done APP_DATAGRAMS FRAMES_SENT` line: (datagrams, DATAGRAM frames sent by then).
fn parse_done(line: &[u8]) -> Option<(u64, u64)> {
    let text = std::str::from_utf8(line).ok()?.strip_suffix('\n')?;
    match text.split(' ').collect::<Vec<_>>().as_slice() {
        ["done", app, sent] => Some((app.parse().ok()?, sent.parse().ok()?)),
        _ => None,
    }
}

/// What the receiver saw.
struct Tracker {
    parts: u32,
    got: Vec<u64>,
    complete: Vec<Option<Instant>>,
    /// Arrival time of every distinct packet, per message.
    arrivals: Vec<Vec<Instant>>,
    /// The sender's `done` line (datagram mode): datagrams sent, DATAGRAM frames sent by then.
    sender_done: Option<(u64, u64)>,
    /// Anchor of the playback clock: when message 0 would have arrived.
    anchor: Option<Instant>,
    bytes_app: u64,
    bad_packets: u64,
}

impl Tracker {
    fn new(p: &Params) -> Self {
        let n = p.count() as usize;
        Tracker {
            parts: p.packets,
            got: vec![0; n],
            complete: vec![None; n],
            arrivals: vec![Vec::new(); n],
            sender_done: None,
            anchor: None,
            bytes_app: 0,
            bad_packets: 0,
        }
    }

    fn packet(&mut self, data: &[u8], now: Instant, interval: Duration) {
        let valid = data.len() == PACKET_SIZE && {
            let msg = u32::from_be_bytes(data[0..4].try_into().unwrap());
            let part = u16::from_be_bytes(data[4..6].try_into().unwrap());
            let parts = u16::from_be_bytes(data[6..8].try_into().unwrap());
            (msg as usize) < self.got.len()
                && u32::from(parts) == self.parts
                && u32::from(part) < self.parts
                && data[HEADER..]
                    .iter()
                    .enumerate()
                    .all(|(i, &b)| b == filler(msg, part, i + HEADER))
        };
        if !valid {
            self.bad_packets += 1;
            return;
        }
        let msg = u32::from_be_bytes(data[0..4].try_into().unwrap()) as usize;
        let bit = 1u64 << u16::from_be_bytes(data[4..6].try_into().unwrap());
        if self.got[msg] & bit != 0 {
            return; // duplicate
        }
        self.got[msg] |= bit;
        self.arrivals[msg].push(now);
        self.bytes_app += data.len() as u64;
        if self.anchor.is_none() {
            self.anchor = Some(now.checked_sub(interval * msg as u32).unwrap_or(now));
        }
        if self.got[msg].count_ones() == self.parts {
            self.complete[msg] = Some(now);
        }
    }
}

/// Play the recorded arrivals back (see the module comment).
fn playback(t: &Tracker, p: &Params) -> MessageReport {
    let interval = p.interval();
    let n = t.complete.len() as u64;
    let mut r = MessageReport {
        mode: p.mode.to_string(),
        rate: p.rate,
        packets: p.packets,
        duration: p.duration,
        buffer: p.buffer,
        messages_sent: n,
        messages_expected: n,
        bad_packets: t.bad_packets,
        msg_packets_sent: n * u64::from(p.packets),
        sender_datagrams: t.sender_done.map(|d| d.0),
        sender_frames_at_done: t.sender_done.map(|d| d.1),
        ..Default::default()
    };
    let mut shift = Duration::ZERO; // the waiting player's (stall_ms)
    let mut in_event = false;
    let slot_ms = interval.as_secs_f64() * 1e3;
    for (i, done) in t.complete.iter().enumerate() {
        let deadline = t
            .anchor
            .map(|anchor| anchor + interval * (p.buffer - 1 + i as u32));
        if let (Some(at), Some(due), Mode::Stream) = (done, deadline, p.mode) {
            shift = shift.max(at.saturating_duration_since(due));
        }
        let due = deadline;
        let arrived = t.arrivals[i].len() as u64;
        let late_packets = match due {
            Some(due) => t.arrivals[i].iter().filter(|at| **at > due).count() as u64,
            None => 0,
        };
        let missing = u64::from(p.packets) - arrived;
        r.msg_packets_on_time += arrived - late_packets;
        r.msg_packets_late += late_packets;
        r.msg_packets_missing += missing;
        let on_time = match (done, due, p.mode) {
            (Some(at), Some(due), _) if *at <= due => {
                r.messages_on_time += 1;
                true
            }
            (Some(_), _, _) => {
                r.messages_late += 1;
                r.rebuffering_ms += slot_ms;
                false
            }
            (None, _, _) => {
                if arrived == 0 {
                    r.messages_lost += 1;
                } else {
                    r.messages_corrupted += 1;
                }
                r.rebuffering_ms += slot_ms;
                false
            }
        };
        if !on_time {
            r.bad_msg_packets_late += late_packets;
            r.bad_msg_packets_missing += missing;
            if !in_event {
                r.rebuffering_events += 1;
            }
        }
        in_event = !on_time;
    }
    r.stall_ms = match p.mode {
        Mode::Stream => shift.as_secs_f64() * 1e3,
        Mode::Datagram => r.rebuffering_ms,
    };
    r.messages_ok = r.messages_on_time;
    r.messages_corrupt = r.messages_corrupted + r.messages_lost;
    // Every message and every packet is accounted for exactly once.
    assert_eq!(
        r.messages_sent,
        r.messages_on_time + r.messages_late + r.messages_corrupted + r.messages_lost
    );
    assert_eq!(
        r.msg_packets_sent,
        r.msg_packets_on_time + r.msg_packets_late + r.msg_packets_missing
    );
    r
}

/// Receiver side (the client): request, receive until the sender is done, play back.
/// Returns the report and the application bytes received, also when reception failed half-way
/// (the report then covers what arrived before the failure), and the failure.
pub async fn receive<C: QuicConn>(conn: &C, p: Params) -> (MessageReport, u64, Result<(), String>) {
    let mut t = Tracker::new(&p);
    let res = receive_into(conn, p, &mut t).await;
    (playback(&t, &p), t.bytes_app, res)
}

async fn receive_into<C: QuicConn>(conn: &C, p: Params, t: &mut Tracker) -> Result<(), String> {
    let (mut ctl_send, mut ctl_recv) = conn.open_bi().await?;
    ctl_send
        .write_all(p.request().as_bytes())
        .await
        .map_err(|e| format!("request: {e}"))?;
    ctl_send.finish().map_err(|e| format!("request: {e}"))?;
    let interval = p.interval();
    match p.mode {
        Mode::Stream => {
            let mut buf = vec![0u8; PACKET_SIZE];
            while ctl_recv.read_exact(&mut buf).await? {
                t.packet(&buf, Instant::now(), interval);
            }
        }
        Mode::Datagram => {
            let mut done_at: Option<tokio::time::Instant> = None;
            let mut ctl = Box::pin(ctl_recv.read_to_end(64));
            loop {
                let grace = async {
                    match done_at {
                        Some(at) => tokio::time::sleep_until(at).await,
                        None => std::future::pending().await,
                    }
                };
                tokio::select! {
                    dg = conn.read_datagram() => {
                        let dg = dg?;
                        t.packet(&dg, Instant::now(), interval);
                    }
                    end = &mut ctl, if done_at.is_none() => {
                        let end = end.map_err(|e| format!("control stream: {e}"))?;
                        let Some(done) = parse_done(&end) else {
                            return Err("sender did not finish".into());
                        };
                        t.sender_done = Some(done);
                        done_at = Some(tokio::time::Instant::now() + GRACE);
                    }
                    _ = grace => break,
                }
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(mode: Mode) -> Params {
        Params {
            mode,
            rate: 10,
            packets: 2,
            duration: 0.5,
            buffer: 2,
        }
    }

    fn feed(t: &mut Tracker, msg: u32, part: u16, at: Instant) {
        t.packet(&make_packet(msg, part, 2), at, Duration::from_millis(100));
    }

    #[test]
    fn playback_counts_late_and_corrupt() {
        let t0 = Instant::now();
        let ms = Duration::from_millis;
        for mode in [Mode::Datagram, Mode::Stream] {
            let p = params(mode);
            let mut t = Tracker::new(&p);
            // 5 messages, 100 ms apart; message 0 due at t0 + 100 ms (buffer 2).
            for m in 0..5u32 {
                if m == 2 {
                    continue;
                }
                feed(&mut t, m, 0, t0 + ms(100) * m);
                feed(&mut t, m, 1, t0 + ms(100) * m + ms(1));
            }
            // Message 2 arrives 250 ms late in full in stream mode, half only in datagram mode.
            feed(&mut t, 2, 0, t0 + ms(450));
            if mode == Mode::Stream {
                feed(&mut t, 2, 1, t0 + ms(550));
            }
            let r = playback(&t, &p);
            assert_eq!(r.messages_expected, 5);
            match mode {
                Mode::Datagram => {
                    assert_eq!(
                        (r.messages_ok, r.messages_late, r.messages_corrupt),
                        (4, 0, 1)
                    );
                    assert!((r.rebuffering_ms - 100.0).abs() < 1e-6);
                    assert_eq!(r.stall_ms, r.rebuffering_ms);
                }
                Mode::Stream => {
                    // Due at 300 ms, complete at 550 ms: late, one interval of re-buffering; 3
                    // and 4 keep their deadlines (on time). A waiting player stood still 250 ms.
                    assert_eq!(
                        (r.messages_ok, r.messages_late, r.messages_corrupt),
                        (4, 1, 0)
                    );
                    assert!((r.rebuffering_ms - 100.0).abs() < 1e-6);
                    assert!((r.stall_ms - 250.0).abs() < 1e-6);
                }
            }
            assert_eq!(
                t.bytes_app,
                (4 * 2 + if mode == Mode::Stream { 2 } else { 1 }) * PACKET_SIZE as u64
            );
        }
    }

    #[test]
    fn every_message_and_packet_is_accounted_for() {
        let t0 = Instant::now();
        let ms = Duration::from_millis;
        let p = Params {
            mode: Mode::Datagram,
            rate: 10,
            packets: 4,
            duration: 1.0,
            buffer: 2,
        };
        let mut t = Tracker::new(&p);
        let feed = |t: &mut Tracker, m: u32, part: u16, at: Instant| {
            t.packet(&make_packet(m, part, 4), at, ms(100));
        };
        // 10 messages; 3 corrupted (one packet missing), 4 and 5 lost (a run: one event), 7
        // complete but its last packet 300 ms late.
        for m in 0..10u32 {
            for part in 0..4u16 {
                let lost = (m == 3 && part == 2) || m == 4 || m == 5;
                if lost {
                    continue;
                }
                let late = if m == 7 && part == 3 { ms(300) } else { ms(0) };
                feed(&mut t, m, part, t0 + ms(100) * m + late);
            }
        }
        t.sender_done = Some((40, 38));
        let mut r = playback(&t, &p);
        assert_eq!(
            (
                r.messages_sent,
                r.messages_on_time,
                r.messages_late,
                r.messages_corrupted,
                r.messages_lost
            ),
            (10, 6, 1, 1, 2)
        );
        assert_eq!(r.messages_corrupt, 3);
        assert_eq!(r.rebuffering_events, 2);
        assert!((r.rebuffering_ms - 400.0).abs() < 1e-6);
        assert_eq!(
            (
                r.msg_packets_on_time,
                r.msg_packets_late,
                r.msg_packets_missing
            ),
            (30, 1, 9)
        );
        assert_eq!((r.bad_msg_packets_late, r.bad_msg_packets_missing), (1, 9));
        // 2 datagrams never went into a QUIC packet, 3 were dropped by the FEC adapter: 4 lost
        // in the network.
        r.add_sender(38, 3);
        assert_eq!(
            (
                r.missing_not_sent,
                r.missing_sender_dropped,
                r.missing_in_network
            ),
            (Some(2), Some(3), Some(4))
        );
        assert_eq!(parse_done(b"done 40 38\n"), Some((40, 38)));
        assert_eq!(parse_done(b"done\n"), None);
    }

    #[test]
    fn bad_packets_are_counted_not_trusted() {
        let p = params(Mode::Datagram);
        let mut t = Tracker::new(&p);
        let mut pkt = make_packet(1, 0, 2);
        pkt[500] ^= 1;
        t.packet(&pkt, Instant::now(), Duration::from_millis(100));
        t.packet(
            &make_packet(99, 0, 2),
            Instant::now(),
            Duration::from_millis(100),
        );
        t.packet(&[1, 2, 3], Instant::now(), Duration::from_millis(100));
        assert_eq!(t.bad_packets, 3);
        assert_eq!(t.bytes_app, 0);
    }
}
