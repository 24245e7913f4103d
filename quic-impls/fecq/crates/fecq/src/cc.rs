//! Congestion control: quinn's controllers, with the window scaled for FEC repair traffic.
//!
//! Repair datagrams are added below quinn, so its controller and pacer never see them. With a
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

use std::any::Any;
use std::str::FromStr;
use std::sync::Arc;
use std::time::Instant;

use quinn::congestion::{
    BbrConfig, Controller, ControllerFactory, ControllerMetrics, CubicConfig, NewRenoConfig,
};
use quinn_proto::RttEstimator;

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
/// builder method but no trait, hence a macro (used by `mp::cc` too).
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

/// Builds the chosen controller wrapped in [`ScaledWindow`].
pub struct ScaledFactory {
    pub algo: CcAlgo,
    /// Fraction of the window left to QUIC packets: 1 / (1 + repair ratio).
    pub scale: f64,
    pub limits: WindowLimits,
}

impl ControllerFactory for ScaledFactory {
    fn build(self: Arc<Self>, now: Instant, current_mtu: u16) -> Box<dyn Controller> {
        let initial = self.limits.initial_bytes();
        let inner = match self.algo {
            CcAlgo::Cubic => config_with_initial!(CubicConfig, initial).build(now, current_mtu),
            CcAlgo::NewReno => config_with_initial!(NewRenoConfig, initial).build(now, current_mtu),
            // `none` keeps a controller for quinn's bookkeeping; its window is not used.
            CcAlgo::Bbr | CcAlgo::None => {
                config_with_initial!(BbrConfig, initial).build(now, current_mtu)
            }
        };
        Box::new(ScaledWindow {
            inner,
            scale: self.scale,
            limits: self.limits,
            in_flight: 0,
            app_limited: false,
            unlimited: self.algo == CcAlgo::None,
        })
    }
}

pub struct ScaledWindow {
    inner: Box<dyn Controller>,
    scale: f64,
    limits: WindowLimits,
    /// Tail FEC (crate::tail): an upper bound of quinn's bytes in flight, and whether quinn had
    /// nothing more to send at its last transmission (below).
    in_flight: u64,
    app_limited: bool,
    /// `--cc none`: the window is [`UNLIMITED_WINDOW`] whatever the inner controller says.
    unlimited: bool,
}

impl ScaledWindow {
    fn scaled(&self, w: u64) -> u64 {
        if self.unlimited {
            return UNLIMITED_WINDOW;
        }
        // Never below two full-size packets, or the connection could stall.
        ((self.limits.cap(w) as f64 * self.scale) as u64).max(2 * 1200)
    }
}

impl Controller for ScaledWindow {
    fn on_sent(&mut self, now: Instant, bytes: u64, last_packet_number: u64) {
        self.in_flight = self.in_flight.saturating_add(bytes);
        self.app_limited = false;
        self.inner.on_sent(now, bytes, last_packet_number)
    }
    fn on_ack(
        &mut self,
        now: Instant,
        sent: Instant,
        bytes: u64,
        app_limited: bool,
        rtt: &RttEstimator,
    ) {
        self.inner.on_ack(now, sent, bytes, app_limited, rtt)
    }
    fn on_end_acks(
        &mut self,
        now: Instant,
        in_flight: u64,
        app_limited: bool,
        largest: Option<u64>,
    ) {
        self.in_flight = in_flight;
        self.app_limited = app_limited;
        self.inner.on_end_acks(now, in_flight, app_limited, largest)
    }
    fn on_congestion_event(
        &mut self,
        now: Instant,
        sent: Instant,
        persistent: bool,
        lost_bytes: u64,
    ) {
        self.inner
            .on_congestion_event(now, sent, persistent, lost_bytes)
    }
    fn on_mtu_update(&mut self, new_mtu: u16) {
        self.inner.on_mtu_update(new_mtu)
    }
    fn window(&self) -> u64 {
        self.scaled(self.inner.window())
    }
    fn metrics(&self) -> ControllerMetrics {
        let mut m = self.inner.metrics();
        m.congestion_window = self.window();
        m
    }
    fn clone_box(&self) -> Box<dyn Controller> {
        Box::new(ScaledWindow {
            inner: self.inner.clone_box(),
            scale: self.scale,
            limits: self.limits,
            in_flight: self.in_flight,
            app_limited: self.app_limited,
            unlimited: self.unlimited,
        })
    }
    fn initial_window(&self) -> u64 {
        self.scaled(self.inner.initial_window())
    }
    fn into_any(self: Box<Self>) -> Box<dyn Any> {
        self
    }
}

/// Tail FEC: what `conn`'s congestion controller knows now (None: its controller is not a
/// [`ScaledWindow`]): (window room, bytes in flight, app-limited). Quinn tells its controller the
/// exact bytes in flight after each batch of ACKs (`on_end_acks`); the wrapper adds every datagram
/// sent since (ACK-only ones too, which quinn does not count) and sees no loss until the next
/// batch: an upper bound of the bytes in flight, so the room is never over-estimated. Quinn's
/// app-limited flag comes with the same call: true when its last transmission found nothing more
/// to send while neither the window nor the pacer held it back; any send since clears it. (Room
/// left in the window after quinn's last send is no such sign: quinn's pacer also leaves pauses
/// with room, and a tail there would land in the middle of the transfer.)
pub fn window_state(conn: &quinn::Connection) -> Option<(u64, u64, bool)> {
    let c = conn.congestion_state();
    let window = c.window();
    let w = c.into_any().downcast::<ScaledWindow>().ok()?;
    Some((
        window.saturating_sub(w.in_flight),
        w.in_flight,
        w.app_limited,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn none_is_unlimited_and_unpaced_and_repairs_count_only_when_asked() {
        let now = Instant::now();
        for (algo, repair, r, want) in [
            (
                CcAlgo::Cubic,
                RepairCc::Counted,
                0.5,
                (12_000.0 / 1.5f64).floor() as u64,
            ),
            (CcAlgo::Cubic, RepairCc::Free, 0.5, 12_000),
            (CcAlgo::None, RepairCc::Counted, 0.5, UNLIMITED_WINDOW),
        ] {
            let f = Arc::new(ScaledFactory {
                algo,
                scale: window_scale(algo, repair, r),
                limits: WindowLimits::default(),
            });
            let mut c = f.build(now, 1200);
            let w = c.window();
            assert!(w.abs_diff(want) <= 1, "{w} vs {want}: {algo} {repair}");
            c.on_congestion_event(now, now, false, 1200);
            if algo == CcAlgo::None {
                // A loss does not shrink it, and it is past quinn's pacing cut-off.
                assert_eq!(c.window(), UNLIMITED_WINDOW);
                assert!(c.window() > u64::from(u32::MAX));
            } else {
                assert!(c.window() < want);
            }
        }
    }

    #[test]
    fn initial_and_max_window_bound_the_whole_window_then_scale() {
        let now = Instant::now();
        let build = |initial, max, scale| {
            Arc::new(ScaledFactory {
                algo: CcAlgo::Cubic,
                scale,
                limits: WindowLimits { initial, max },
            })
            .build(now, 1200)
        };
        // RFC 9002's default (quinn: 10 packets of its MTU) without limits.
        assert_eq!(build(None, None, 1.0).window(), 12_000);
        // quic-go of 2018: 32 packets to start with, at most 107.
        assert_eq!(build(Some(32), Some(107), 1.0).window(), 32 * 1200);
        assert_eq!(build(Some(32), Some(107), 1.0).initial_window(), 32 * 1200);
        // An inner window above the maximum (here from the start) is capped.
        assert_eq!(build(Some(200), Some(107), 1.0).window(), 107 * 1200);
        // Repairs counted (code rate 2/3): the limited window, scaled.
        let scaled = build(Some(32), Some(107), 2.0 / 3.0).window();
        assert!(scaled.abs_diff(32 * 800) <= 1, "{scaled}");
    }
}
