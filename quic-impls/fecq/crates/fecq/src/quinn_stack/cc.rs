//! quinn's congestion controller glue: its controllers wrapped so that the window they report is
//! fecq's (crate::options::cc::Scaled: scaled for repair traffic, bounded, unlimited with `--cc none`), and
//! what tail mode reads of a connection's controller.

use std::any::Any;
use std::sync::Arc;
use std::time::Instant;

use quinn::congestion::{
    BbrConfig, Controller, ControllerFactory, ControllerMetrics, CubicConfig, NewRenoConfig,
};
use quinn_proto::RttEstimator;

use crate::layer::TailBudget;
use crate::options::cc::{config_with_initial, CcAlgo, CeEpisodes, Scaled, ScaledFactory};

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
            scaled: Scaled::new(&self),
            episodes: CeEpisodes::new(self.ce_episodes),
        })
    }
}

pub struct ScaledWindow {
    inner: Box<dyn Controller>,
    scaled: Scaled,
    episodes: CeEpisodes,
}

impl Controller for ScaledWindow {
    fn on_sent(&mut self, now: Instant, bytes: u64, last_packet_number: u64) {
        self.scaled.on_sent(bytes);
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
        self.episodes.on_rtt(rtt.get());
        self.inner.on_ack(now, sent, bytes, app_limited, rtt)
    }
    fn on_end_acks(
        &mut self,
        now: Instant,
        in_flight: u64,
        app_limited: bool,
        largest: Option<u64>,
    ) {
        self.scaled.on_end_acks(in_flight, app_limited);
        self.inner.on_end_acks(now, in_flight, app_limited, largest)
    }
    fn on_congestion_event(
        &mut self,
        now: Instant,
        sent: Instant,
        persistent: bool,
        lost_bytes: u64,
    ) {
        // quinn-proto reports ECN-CE as a congestion event without lost bytes (process_ecn).
        if self.episodes.admit(now, lost_bytes == 0 && !persistent) {
            self.inner
                .on_congestion_event(now, sent, persistent, lost_bytes)
        }
    }
    fn on_mtu_update(&mut self, new_mtu: u16) {
        self.inner.on_mtu_update(new_mtu)
    }
    fn window(&self) -> u64 {
        self.scaled.window(self.inner.window())
    }
    fn metrics(&self) -> ControllerMetrics {
        let mut m = self.inner.metrics();
        m.congestion_window = self.window();
        m
    }
    fn clone_box(&self) -> Box<dyn Controller> {
        Box::new(ScaledWindow {
            inner: self.inner.clone_box(),
            scaled: self.scaled,
            episodes: self.episodes,
        })
    }
    fn initial_window(&self) -> u64 {
        self.scaled.window(self.inner.initial_window())
    }
    fn into_any(self: Box<Self>) -> Box<dyn Any> {
        self
    }
}

/// What a quinn connection tells tail mode now (crate::options::cc::Scaled::window_state): its window
/// room, bytes in flight, app-limited flag and the data frames it has sent. None if its
/// controller is not fecq's wrapper: the tail is then bounded by its cap only.
pub fn tail_budget(conn: &quinn::Connection) -> Option<TailBudget> {
    let frames = conn.stats().frame_tx;
    let c = conn.congestion_state();
    let window = c.window();
    let w = c.into_any().downcast::<ScaledWindow>().ok()?;
    let (room_bytes, in_flight_bytes, app_limited) = w.scaled.window_state(window);
    Some(TailBudget {
        room_bytes,
        in_flight_bytes,
        app_limited,
        data_frames: frames.stream + frames.datagram + frames.crypto,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::options::cc::{window_scale, RepairCc, WindowLimits, UNLIMITED_WINDOW};

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
                ce_episodes: false,
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
                ce_episodes: false,
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
