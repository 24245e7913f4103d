//! When to flush a partial FEC block: when the sender went quiet *relative to its own pace*.
//!
//! A fixed idle time (the old rule: 10 ms) flushes nearly every packet alone once quinn's sends are
//! spaced wider than that — any bottleneck below ~1 Mbit/s, where ACK-clocked sending emits a pair
//! of packets every ~20 ms — so the real repair overhead ends far above the configured code rate.
//!
//! Rule: flush when idle for longer than `max(floor, min(K × gap, RTT / 2))`, where `gap` is a smoothed
//! inter-send gap (EWMA, weight 1/8 like TCP's SRTT, started from the first gap: it follows a
//! change of pace within a few dozen packets but is not swayed by one odd gap), and K = 4:
//! - a stream of sends never pauses K times its mean gap unless it stopped: ACK-clocked pairs
//!   (gaps 0, G, 0, G: mean G/2) give a threshold of 2G, twice the longest normal gap;
//! - a burst of more than K back-to-back packets followed by a pause (a message of a real-time
//!   flow, a flight in slow start) has a mean gap below pause / K, so the pause flushes it once;
//! - the tail of a transfer is flushed K mean gaps after its last packet (at 1 Mbit/s: ~40 ms,
//!   below one RTT on any real path as long as the window holds more than K packets).
//!
//! A gap that is itself an idle period (longer than the current threshold) says nothing about the
//! pace; it enters the average clipped to the threshold. Clipping rather than ignoring it lets the
//! threshold grow from the floor when the pace is slower than the floor (ignoring every gap above
//! the floor would pin the threshold there: exactly the old behaviour), while a long pause only
//! moves the average by threshold / 8.
//!
//! The pace alone cannot tell ACK-clocked pairs on a slow link (a stream) from the ping-pong of a
//! handshake or a small request on a short path (the sender waits one RTT each time): on a 10 ms
//! RTT the handshake's gaps would raise the threshold to ~40 ms, and the tail repair of a small
//! transfer would come after quinn's probe timeout (≥ RTT + 25 ms of ACK delay). So when the
//! connection's RTT is known (quinn's estimate, given by the socket) the threshold is capped at
//! RTT / 2: a tail repair then reaches the receiver about one RTT after the last packet was sent,
//! before a probe could (quinn's PTO ≥ RTT + 25 ms, plus the one-way delay), so the lost tail is
//! recovered there and acknowledged as received; and a sender idle for half an RTT is waiting for
//! ACKs, i.e. quiet.
//! `floor` (`--flush-ms`) is the least idle time that counts as quiet, before any pace is known.

use std::time::{Duration, Instant};

/// Threshold = K × smoothed inter-send gap (see the module doc for the choice of 4).
const K: u32 = 4;
/// EWMA weight of a new gap: 1/8.
const WEIGHT_SHIFT: u32 = 3;

/// Per-peer send pace and the partial-block flush decision, on whatever clock the caller uses.
#[derive(Clone, Debug)]
pub struct FlushPolicy {
    floor: Duration,
    last_send: Option<Instant>,
    /// Smoothed inter-send gap (zero until two sends were seen).
    gap: Duration,
    samples: u64,
    /// The connection's RTT, when known: caps the threshold at RTT / 2.
    rtt: Option<Duration>,
    /// Source datagrams sent since the last flush: nothing to flush when 0.
    unflushed: u64,
}

impl FlushPolicy {
    pub fn new(floor: Duration) -> Self {
        FlushPolicy {
            floor,
            last_send: None,
            gap: Duration::ZERO,
            samples: 0,
            rtt: None,
            unflushed: 0,
        }
    }

    /// Idle time after which a partial block is flushed: max(floor, min(K × gap, RTT / 2)).
    pub fn threshold(&self) -> Duration {
        let pace = self.gap * K;
        let pace = self.rtt.map_or(pace, |rtt| pace.min(rtt / 2));
        self.floor.max(pace)
    }

    /// The connection's current RTT estimate (None: unknown, no cap).
    pub fn set_rtt(&mut self, rtt: Option<Duration>) {
        self.rtt = rtt;
    }

    /// Smoothed inter-send gap measured so far.
    pub fn smoothed_gap(&self) -> Duration {
        self.gap
    }

    /// A source datagram was sent at `now`.
    pub fn on_send(&mut self, now: Instant) {
        if let Some(last) = self.last_send {
            let sample = now.saturating_duration_since(last).min(self.threshold());
            self.gap = if self.samples == 0 {
                sample // the first gap stands for the pace, as the first RTT sample does in TCP
            } else {
                // gap += (sample − gap) / 8, without going through signed durations.
                (self.gap * ((1 << WEIGHT_SHIFT) - 1) + sample) / (1 << WEIGHT_SHIFT)
            };
            self.samples += 1;
        }
        self.last_send = Some(now);
        self.unflushed += 1;
    }

    /// True if a partial block is pending and the sender has been quiet long enough at `now`.
    pub fn should_flush(&self, now: Instant) -> bool {
        match self.last_send {
            Some(last) if self.unflushed > 0 => {
                now.saturating_duration_since(last) >= self.threshold()
            }
            _ => false,
        }
    }

    /// Flush now, whatever the idle time, if anything is pending (returns whether it was).
    pub fn take_pending(&mut self) -> bool {
        let pending = self.unflushed > 0;
        self.unflushed = 0;
        pending
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    /// Drive the policy on a simulated clock: `sends` are send times in ms; the flush check runs
    /// every `tick` ms (as the flush task does) until `end`. Returns the times of the flushes.
    fn simulate(sends: &[f64], tick: f64, end: f64) -> Vec<f64> {
        simulate_with_rtt(sends, tick, end, None)
    }

    fn simulate_with_rtt(sends: &[f64], tick: f64, end: f64, rtt: Option<f64>) -> Vec<f64> {
        let t0 = Instant::now();
        let at = |ms: f64| t0 + Duration::from_secs_f64(ms / 1e3);
        let mut p = FlushPolicy::new(10 * MS);
        p.set_rtt(rtt.map(|ms| Duration::from_secs_f64(ms / 1e3)));
        let mut flushes = Vec::new();
        let mut next = sends.iter().peekable();
        let mut now = 0.0;
        while now <= end {
            while let Some(&&s) = next.peek() {
                if s > now {
                    break;
                }
                p.on_send(at(s));
                next.next();
            }
            if p.should_flush(at(now)) && p.take_pending() {
                flushes.push(now);
            }
            now += tick;
        }
        flushes
    }

    #[test]
    fn paced_sending_at_30ms_flushes_only_after_the_last_packet() {
        let sends: Vec<f64> = (0..100).map(|i| 30.0 * i as f64).collect();
        let last = *sends.last().unwrap();
        let flushes = simulate(&sends, 1.0, last + 1000.0);
        // The first gaps exceed the 10 ms floor before the pace is learnt: a few early flushes,
        // then none for the rest of the stream.
        let mid: Vec<f64> = flushes.iter().copied().filter(|&t| t < last).collect();
        assert!(mid.iter().all(|&t| t < 300.0), "mid-stream flushes {mid:?}");
        assert!(mid.len() <= 2, "too many warm-up flushes {mid:?}");
        let tail: Vec<f64> = flushes.iter().copied().filter(|&t| t > last).collect();
        assert_eq!(tail.len(), 1, "{flushes:?}");
        // Soon after the last packet: K × 30 ms, plus one tick.
        assert!(
            tail[0] - last <= 4.0 * 30.0 + 1.0,
            "tail flush at +{}",
            tail[0] - last
        );
    }

    #[test]
    fn ack_clocked_pairs_do_not_flush_mid_stream() {
        // Pairs every 20 ms (ACK clocking at ~1 Mbit/s): normal gaps of 20 ms, above the floor.
        let sends: Vec<f64> = (0..200)
            .map(|i| 20.0 * (i / 2) as f64 + 0.1 * (i % 2) as f64)
            .collect();
        let last = *sends.last().unwrap();
        let flushes = simulate(&sends, 1.0, last + 1000.0);
        let late_mid = flushes.iter().filter(|&&t| t > 300.0 && t < last).count();
        assert_eq!(late_mid, 0, "{flushes:?}");
        assert_eq!(flushes.iter().filter(|&&t| t > last).count(), 1);
    }

    #[test]
    fn a_long_rtt_does_not_change_paced_sending() {
        // 1 Mbit/s over 200 ms RTT: pairs every 20 ms, RTT / 2 = 100 ms is above K × gap.
        let sends: Vec<f64> = (0..200)
            .map(|i| 20.0 * (i / 2) as f64 + 0.1 * (i % 2) as f64)
            .collect();
        let last = *sends.last().unwrap();
        let flushes = simulate_with_rtt(&sends, 1.0, last + 1000.0, Some(200.0));
        assert_eq!(
            flushes.iter().filter(|&&t| t > 300.0 && t < last).count(),
            0
        );
        let tail: Vec<f64> = flushes.into_iter().filter(|&t| t > last).collect();
        assert_eq!(tail.len(), 1);
        assert!(tail[0] - last <= 4.0 * 10.0 + 2.0, "{tail:?}");
    }

    #[test]
    fn a_short_rtt_keeps_the_tail_of_a_small_transfer_protected_early() {
        // Handshake-like ping-pong on a 12 ms RTT (one packet per RTT) then a 3-packet reply:
        // the pace alone takes the 12 ms gaps for a stream and waits ~4 × 12 ms; the RTT cap
        // flushes after max(floor, 6 ms).
        let mut sends: Vec<f64> = (0..4).map(|i| 12.0 * i as f64).collect();
        sends.extend([48.0, 48.05, 48.1]);
        let uncapped = simulate(&sends, 1.0, 500.0);
        let capped = simulate_with_rtt(&sends, 1.0, 500.0, Some(12.0));
        let tail = |f: &[f64]| f.iter().copied().find(|&t| t > 48.1).unwrap() - 48.1;
        assert!(tail(&uncapped) > 12.0, "{uncapped:?}");
        assert!(tail(&capped) <= 10.0 + 1.0, "{capped:?}");
    }

    #[test]
    fn back_to_back_then_a_pause_flushes_once() {
        let sends: Vec<f64> = (0..20).map(|i| 0.05 * i as f64).collect();
        let flushes = simulate(&sends, 1.0, 500.0);
        assert_eq!(flushes.len(), 1, "{flushes:?}");
        // The floor applies: the mean gap is tiny.
        assert!(flushes[0] >= 10.0 && flushes[0] <= 12.0, "{flushes:?}");
    }

    #[test]
    fn bursts_separated_by_pauses_flush_once_per_burst() {
        // A real-time flow: 8 packets back to back every 33 ms (30 messages per second).
        let sends: Vec<f64> = (0..30)
            .flat_map(|m| (0..8).map(move |i| 33.0 * m as f64 + 0.05 * i as f64))
            .collect();
        let flushes = simulate(&sends, 1.0, 33.0 * 30.0 + 500.0);
        assert_eq!(flushes.len(), 30, "{flushes:?}");
    }

    #[test]
    fn nothing_pending_nothing_flushed() {
        let t0 = Instant::now();
        let mut p = FlushPolicy::new(10 * MS);
        assert!(!p.should_flush(t0 + Duration::from_secs(1)));
        p.on_send(t0);
        assert!(!p.should_flush(t0 + 5 * MS));
        assert!(p.should_flush(t0 + 10 * MS));
        assert!(p.take_pending());
        assert!(!p.should_flush(t0 + Duration::from_secs(1)));
        assert!(!p.take_pending());
    }

    #[test]
    fn a_long_pause_moves_the_average_only_by_threshold_over_8() {
        let t0 = Instant::now();
        let mut p = FlushPolicy::new(10 * MS);
        for i in 0..200 {
            p.on_send(t0 + 5 * MS * i);
        }
        let before = p.smoothed_gap();
        let thr = p.threshold();
        p.on_send(t0 + 5 * MS * 199 + Duration::from_secs(10));
        assert!(p.smoothed_gap() <= before + thr / 8 + MS / 1000);
    }
}
