//! noq's congestion controller glue: its controllers (one per path) wrapped so that the window
//! they report is fecq's (crate::options::cc::Scaled: scaled for repair traffic exactly as under quinn,
//! bounded, unlimited and unpaced with `--cc none`). Only the trait differs between the stacks.

use std::any::Any;
use std::sync::Arc;
use std::time::{Duration, Instant};

use noq::congestion::{
    Bbr3Config, Controller, ControllerFactory, ControllerMetrics, CubicConfig, NewRenoConfig,
};
use noq_proto::RttEstimator;

use crate::options::cc::{config_with_initial, CcAlgo, CeEpisodes, Scaled, ScaledFactory};

impl ControllerFactory for ScaledFactory {
    fn build(self: Arc<Self>, now: Instant, current_mtu: u16) -> Box<dyn Controller> {
        let initial = self.limits.initial_bytes();
        let inner = match self.algo {
            CcAlgo::Cubic => config_with_initial!(CubicConfig, initial).build(now, current_mtu),
            // `none` keeps a controller for noq's bookkeeping (one without a pacing rate); its
            // window is not used.
            CcAlgo::NewReno | CcAlgo::None => {
                config_with_initial!(NewRenoConfig, initial).build(now, current_mtu)
            }
            CcAlgo::Bbr => config_with_initial!(Bbr3Config, initial).build(now, current_mtu),
        };
        Box::new(ScaledWindow {
            inner,
            scaled: Scaled::new(&self),
            episodes: CeEpisodes::new(self.ce_episodes),
        })
    }
}

#[derive(Debug)]
pub struct ScaledWindow {
    inner: Box<dyn Controller>,
    scaled: Scaled,
    episodes: CeEpisodes,
}

impl Controller for ScaledWindow {
    fn on_sent(&mut self, now: Instant, bytes: u64, largest_pn: u64) {
        self.inner.on_sent(now, bytes, largest_pn)
    }
    fn on_packet_sent(&mut self, now: Instant, bytes: u16, pn: u64) {
        self.inner.on_packet_sent(now, bytes, pn)
    }
    fn on_cwnd_limited(&mut self) {
        self.inner.on_cwnd_limited()
    }
    fn on_ack(
        &mut self,
        now: Instant,
        sent: Instant,
        bytes: u64,
        pn: u64,
        app_limited: bool,
        rtt: &RttEstimator,
    ) {
        self.episodes.on_rtt(rtt.get());
        self.inner.on_ack(now, sent, bytes, pn, app_limited, rtt)
    }
    fn on_end_acks(
        &mut self,
        now: Instant,
        in_flight: u64,
        app_limited: bool,
        largest_packet_num_acked: Option<u64>,
    ) {
        self.inner
            .on_end_acks(now, in_flight, app_limited, largest_packet_num_acked)
    }
    fn on_congestion_event(
        &mut self,
        now: Instant,
        sent: Instant,
        is_persistent_congestion: bool,
        is_ecn: bool,
        lost_bytes: u64,
        largest_lost_pn: u64,
    ) {
        if !self.episodes.admit(now, is_ecn) {
            return;
        }
        self.inner.on_congestion_event(
            now,
            sent,
            is_persistent_congestion,
            is_ecn,
            lost_bytes,
            largest_lost_pn,
        )
    }
    fn on_packet_lost(&mut self, lost_bytes: u16, pn: u64, now: Instant) {
        self.inner.on_packet_lost(lost_bytes, pn, now)
    }
    fn on_spurious_congestion_event(&mut self) {
        self.inner.on_spurious_congestion_event()
    }
    fn on_mtu_update(&mut self, new_mtu: u16) {
        self.inner.on_mtu_update(new_mtu)
    }
    fn on_ack_frequency_update(&mut self, threshold: u64, max_ack_delay: Duration) {
        self.inner.on_ack_frequency_update(threshold, max_ack_delay)
    }
    fn window(&self) -> u64 {
        self.scaled.window(self.inner.window())
    }
    fn metrics(&self) -> ControllerMetrics {
        let mut m = self.inner.metrics();
        m.congestion_window = self.window();
        if self.scaled.unlimited() {
            // noq paces at a controller's explicit rate before looking at the window.
            m.pacing_rate = None;
        }
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
