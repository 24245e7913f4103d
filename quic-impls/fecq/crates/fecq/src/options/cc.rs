//! Congestion control, the part written once for both stacks: the options, and the window fecq's
//! controller wrapper reports around the stack's own controller (the stack's glue,
//! quinn_stack::cc and noq_stack::cc, forwards the stack's `Controller` trait to the inner
//! controller and asks [`Scaled`] for the window).
//!
//! Repair datagrams are added below QUIC, so the stack's controller and pacer never see them. With a
//! repair ratio r (repairs per source datagram), the wire carries (1 + r) times what quinn
//! accounts for; scaling the window (which also drives quinn's pacer) by 1 / (1 + r) keeps the
//! total bytes in flight, repairs included, within what the controller allows: that is
//! `--repair-cc counted`, the default. `--repair-cc free` leaves the window unscaled (repairs ride
//! on top of what the controller allows, as when FEC sits below an unaware transport).
//!
//! `--cc none` (thesis §5.1.5: real-time runs disabled congestion control, because pacing delays
//! packets that have a deadline) reports a window of [`UNLIMITED_WINDOW`]: quinn then never waits
//! for the window, and its pacer (which derives its rate from the window) is off, since quinn
//! disables pacing for windows above `u32::MAX` bytes. The sender sends at the application's rate.

use std::str::FromStr;
use std::time::{Duration, Instant};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CcAlgo {
    Cubic,
    NewReno,
    Bbr,
    /// No congestion control: an unlimited window and no pacing.
    None,
}

/// The window `--cc none` reports: above `u32::MAX`, where quinn's (and noq's) pacer is off.
pub const UNLIMITED_WINDOW: u64 = 1 << 40;

/// Whether FEC repair datagrams count against the congestion window (`--repair-cc`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RepairCc {
    /// The window is scaled by 1 / (1 + repair ratio): repairs included, the bytes in flight stay
    /// within what the controller allows (the default).
    Counted,
    /// The window is the controller's: repairs come on top.
    Free,
}

impl FromStr for RepairCc {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "counted" => Ok(RepairCc::Counted),
            "free" => Ok(RepairCc::Free),
            _ => Err(format!(
                "unknown --repair-cc {s:?} (allowed: counted, free)"
            )),
        }
    }
}

impl std::fmt::Display for RepairCc {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            RepairCc::Counted => "counted",
            RepairCc::Free => "free",
        })
    }
}

/// Fraction of the window left to QUIC packets for a repair ratio r: 1 / (1 + r) when repairs
/// are counted, 1 when they are free or there is no congestion control.
pub fn window_scale(algo: CcAlgo, repair: RepairCc, repair_ratio: f64) -> f64 {
    match (algo, repair) {
        (CcAlgo::None, _) | (_, RepairCc::Free) => 1.0,
        (_, RepairCc::Counted) => 1.0 / (1.0 + repair_ratio),
    }
}

impl FromStr for CcAlgo {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "cubic" => Ok(CcAlgo::Cubic),
            "newreno" => Ok(CcAlgo::NewReno),
            "bbr" => Ok(CcAlgo::Bbr),
            "none" => Ok(CcAlgo::None),
            _ => Err(format!(
                "unknown congestion control {s:?} (allowed: cubic, newreno, bbr, none)"
            )),
        }
    }
}

impl std::fmt::Display for CcAlgo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            CcAlgo::Cubic => "cubic",
            CcAlgo::NewReno => "newreno",
            CcAlgo::Bbr => "bbr",
            CcAlgo::None => "none",
        })
    }
}

/// Stack defaults a replicated paper's stack differed on (`--initial-window`, `--max-window`, in
/// packets of [`WINDOW_PACKET`] bytes): None keeps the controller's own (RFC 9002: an initial window
/// of 10 packets, no maximum). Both bound the whole window, repairs included when they count
/// against it (the window is limited first, then scaled).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct WindowLimits {
    pub initial: Option<u64>,
    pub max: Option<u64>,
}

/// The packet size the window options count in: fecq's largest QUIC datagram.
pub const WINDOW_PACKET: u64 = 1200;

impl WindowLimits {
    pub fn initial_bytes(&self) -> Option<u64> {
        self.initial.map(|p| p * WINDOW_PACKET)
    }
    /// `w` capped at the maximum window, if any.
    pub fn cap(&self, w: u64) -> u64 {
        self.max.map_or(w, |p| w.min(p * WINDOW_PACKET))
    }
}

/// An `Arc` of the controller config `$ty` (default settings) with `$initial` bytes (an
/// `Option<u64>`) as its initial window when given. quinn's and noq's config types share the
/// builder method but no trait, hence a macro (used by both stacks' glue).
macro_rules! config_with_initial {
    ($ty:ty, $initial:expr) => {{
        let mut config = <$ty>::default();
        if let Some(bytes) = $initial {
            config.initial_window(bytes);
        }
        std::sync::Arc::new(config)
    }};
}
pub(crate) use config_with_initial;

/// Which controller, and how its window is scaled and bounded: what each stack's
/// `ControllerFactory` (implemented for this type by the stack's glue) builds from.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ScaledFactory {
    pub algo: CcAlgo,
    /// Fraction of the window left to QUIC packets: 1 / (1 + repair ratio).
    pub scale: f64,
    pub limits: WindowLimits,
    /// FEC with `--signal ce`: one response per congestion episode ([`CeEpisodes`]).
    pub ce_episodes: bool,
}

/// One congestion response per drop burst under `--signal ce`. The receiver's FEC layer hands a
/// rebuilt packet to QUIC CE-marked; the mark reaches the sender in an ACK's ECN counts about one
/// RTT (plus the repair's delay) after the drop burst it belongs to, and the stack attributes a CE
/// count increase to the newest packet that ACK acknowledges: its recovery period for the burst
/// (started by a loss the burst also caused) has ended, so the same burst cut the window again, one
/// and two RTTs later (explain-fairness.toml's traces: 9 of the background's 17 cuts). An ECN-CE event
/// within two smoothed RTTs of the controller's last response is that burst's, and is not passed
/// on; a loss event always is (the stack's own recovery period still applies to it).
#[derive(Clone, Copy, Debug, Default)]
pub struct CeEpisodes {
    enabled: bool,
    last_response: Option<Instant>,
    srtt: Option<Duration>,
    /// ECN-CE events not passed on.
    pub suppressed: u64,
}

impl CeEpisodes {
    pub fn new(enabled: bool) -> Self {
        CeEpisodes {
            enabled,
            ..Default::default()
        }
    }

    pub fn on_rtt(&mut self, srtt: Duration) {
        self.srtt = Some(srtt);
    }

    /// Whether a congestion event reaches the controller.
    pub fn admit(&mut self, now: Instant, is_ecn: bool) -> bool {
        if self.enabled && is_ecn {
            if let (Some(last), Some(srtt)) = (self.last_response, self.srtt) {
                if now.saturating_duration_since(last) < 2 * srtt {
                    self.suppressed += 1;
                    return false;
                }
            }
        }
        self.last_response = Some(now);
        true
    }
}

/// The window arithmetic of fecq's controller wrapper, and what tail mode reads of it.
#[derive(Clone, Copy, Debug)]
pub struct Scaled {
    scale: f64,
    limits: WindowLimits,
    /// `--cc none`: the window is [`UNLIMITED_WINDOW`] whatever the inner controller says.
    unlimited: bool,
    /// Tail FEC (crate::options::tail): an upper bound of the stack's bytes in flight, and whether it had
    /// nothing more to send at its last transmission (see `window_state`).
    in_flight: u64,
    app_limited: bool,
}

impl Scaled {
    pub fn new(f: &ScaledFactory) -> Self {
        Scaled {
            scale: f.scale,
            limits: f.limits,
            unlimited: f.algo == CcAlgo::None,
            in_flight: 0,
            app_limited: false,
        }
    }

    /// The window reported for the inner controller's window `w`: bounded, then scaled; never
    /// below two full-size packets, or the connection could stall.
    pub fn window(&self, w: u64) -> u64 {
        if self.unlimited {
            return UNLIMITED_WINDOW;
        }
        ((self.limits.cap(w) as f64 * self.scale) as u64).max(2 * WINDOW_PACKET)
    }

    pub fn unlimited(&self) -> bool {
        self.unlimited
    }

    /// A packet of `bytes` was sent: in flight until the next batch of ACKs says otherwise.
    pub fn on_sent(&mut self, bytes: u64) {
        self.in_flight = self.in_flight.saturating_add(bytes);
        self.app_limited = false;
    }

    /// The stack's exact bytes in flight and app-limited flag, after a batch of ACKs.
    pub fn on_end_acks(&mut self, in_flight: u64, app_limited: bool) {
        self.in_flight = in_flight;
        self.app_limited = app_limited;
    }

    /// Tail FEC: (window room, bytes in flight, app-limited) for the reported window `window`.
    /// The stack tells its controller the exact bytes in flight after each batch of ACKs
    /// (`on_end_acks`); the wrapper adds every datagram sent since (ACK-only ones too, which the
    /// stack does not count) and sees no loss until the next batch: an upper bound of the bytes
    /// in flight, so the room is never over-estimated. The app-limited flag comes with the same
    /// call: true when the stack's last transmission found nothing more to send while neither the
    /// window nor the pacer held it back; any send since clears it. (Room left in the window
    /// after the last send is no such sign: the pacer also leaves pauses with room, and a tail
    /// there would land in the middle of the transfer.)
    pub fn window_state(&self, window: u64) -> (u64, u64, bool) {
        (
            window.saturating_sub(self.in_flight),
            self.in_flight,
            self.app_limited,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scaled(algo: CcAlgo, repair: RepairCc, ratio: f64, limits: WindowLimits) -> Scaled {
        Scaled::new(&ScaledFactory {
            algo,
            scale: window_scale(algo, repair, ratio),
            limits,
            ce_episodes: false,
        })
    }

    #[test]
    fn the_window_is_bounded_then_scaled_and_none_is_unlimited() {
        let none = WindowLimits::default();
        let s = scaled(CcAlgo::Cubic, RepairCc::Counted, 0.5, none);
        assert!(s.window(12_000).abs_diff(8_000) <= 1); // float scaling truncates
        assert_eq!(s.window(100), 2 * WINDOW_PACKET);
        let free = scaled(CcAlgo::Cubic, RepairCc::Free, 0.5, none);
        assert_eq!(free.window(12_000), 12_000);
        let limited = WindowLimits {
            initial: Some(32),
            max: Some(107),
        };
        let s = scaled(CcAlgo::NewReno, RepairCc::Counted, 0.5, limited);
        assert!(s.window(1_000_000).abs_diff(107 * WINDOW_PACKET * 2 / 3) <= 1);
        let s = scaled(CcAlgo::None, RepairCc::Counted, 0.5, limited);
        assert_eq!(s.window(1), UNLIMITED_WINDOW);
        assert!(UNLIMITED_WINDOW > u64::from(u32::MAX));
    }

    #[test]
    fn tail_state_is_an_upper_bound_of_the_bytes_in_flight() {
        let mut s = scaled(CcAlgo::Cubic, RepairCc::Free, 0.0, WindowLimits::default());
        s.on_end_acks(5_000, true);
        assert_eq!(s.window_state(12_000), (7_000, 5_000, true));
        s.on_sent(1_200);
        assert_eq!(s.window_state(12_000), (5_800, 6_200, false));
        s.on_sent(20_000);
        assert_eq!(s.window_state(12_000).0, 0);
    }

    #[test]
    fn ce_marks_of_one_drop_burst_get_one_response() {
        let t0 = Instant::now();
        let ms = Duration::from_millis;
        let mut e = CeEpisodes::new(true);
        e.on_rtt(ms(100));
        assert!(e.admit(t0, false)); // the burst's loss: a response
        assert!(!e.admit(t0 + ms(150), true)); // its rebuilt packets' CE, one RTT later: the same burst
        assert!(e.admit(t0 + ms(180), false)); // a loss always reaches the controller
        assert!(e.admit(t0 + ms(400), true)); // CE two RTTs after the last response: a new episode
        assert_eq!(e.suppressed, 1);
        // off (no FEC, or --signal hide): every event passes
        let mut off = CeEpisodes::new(false);
        off.on_rtt(ms(100));
        assert!(off.admit(t0, false) && off.admit(t0 + ms(1), true));
        // no RTT sample yet: nothing to judge an episode by
        let mut fresh = CeEpisodes::new(true);
        assert!(fresh.admit(t0, false) && fresh.admit(t0 + ms(1), true));
    }
}
