//! Congestion control: quinn's controllers, with the window scaled for FEC repair traffic.
//!
//! Repair datagrams are added below quinn, so its controller and pacer never see them. With a
//! repair ratio r (repairs per source datagram), the wire carries (1 + r) times what quinn
//! accounts for; scaling the window (which also drives quinn's pacer) by 1 / (1 + r) keeps the
//! total bytes in flight, repairs included, within what the controller allows.

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
}

impl FromStr for CcAlgo {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "cubic" => Ok(CcAlgo::Cubic),
            "newreno" => Ok(CcAlgo::NewReno),
            "bbr" => Ok(CcAlgo::Bbr),
            _ => Err(format!(
                "unknown congestion control {s:?} (allowed: cubic, newreno, bbr)"
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
        })
    }
}

/// Builds the chosen controller wrapped in [`ScaledWindow`].
pub struct ScaledFactory {
    pub algo: CcAlgo,
    /// Fraction of the window left to QUIC packets: 1 / (1 + repair ratio).
    pub scale: f64,
}

impl ControllerFactory for ScaledFactory {
    fn build(self: Arc<Self>, now: Instant, current_mtu: u16) -> Box<dyn Controller> {
        let inner = match self.algo {
            CcAlgo::Cubic => Arc::new(CubicConfig::default()).build(now, current_mtu),
            CcAlgo::NewReno => Arc::new(NewRenoConfig::default()).build(now, current_mtu),
            CcAlgo::Bbr => Arc::new(BbrConfig::default()).build(now, current_mtu),
        };
        Box::new(ScaledWindow {
            inner,
            scale: self.scale,
        })
    }
}

pub struct ScaledWindow {
    inner: Box<dyn Controller>,
    scale: f64,
}

impl ScaledWindow {
    fn scaled(&self, w: u64) -> u64 {
        // Never below two full-size packets, or the connection could stall.
        ((w as f64 * self.scale) as u64).max(2 * 1200)
    }
}

impl Controller for ScaledWindow {
    fn on_sent(&mut self, now: Instant, bytes: u64, last_packet_number: u64) {
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
        })
    }
    fn initial_window(&self) -> u64 {
        self.scaled(self.inner.initial_window())
    }
    fn into_any(self: Box<Self>) -> Box<dyn Any> {
        self
    }
}
