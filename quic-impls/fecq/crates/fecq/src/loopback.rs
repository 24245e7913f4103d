//! `fecq loopback`: server and client in one process over 127.0.0.1, with seeded loss applied
//! by each FEC socket to the datagrams it sends (server and client draw from different seeds),
//! and optionally a send-rate limit per direction (a simulated bottleneck, see crate::socket).

use std::net::SocketAddr;

use serde_json::json;

use crate::app::{self, Workload};
use crate::config::Common;
use crate::loss::{LossModel, LossProcess};
use crate::metrics::Metrics;

#[derive(Clone, Copy, Debug)]
pub struct LossSpec {
    pub p: f64,
    pub model: LossModel,
    pub burst_len: f64,
    pub seed: u64,
    /// Send-rate limit of each direction in Mbit/s (None: as fast as loopback goes).
    pub rate_mbit: Option<f64>,
}

impl LossSpec {
    pub fn check(&self) -> Result<(), String> {
        if !(0.0..1.0).contains(&self.p) {
            return Err(format!("--loss {} must be in [0, 1)", self.p));
        }
        if !(self.burst_len >= 1.0 && self.burst_len.is_finite()) {
            return Err(format!("--burst-len {} must be >= 1", self.burst_len));
        }
        if let Some(r) = self.rate_mbit {
            if !(r >= 0.01 && r.is_finite()) {
                return Err(format!("--rate-mbit {r} must be >= 0.01"));
            }
        }
        Ok(())
    }

    fn process(&self, stream: u64) -> Option<LossProcess> {
        (self.p > 0.0 || self.rate_mbit.is_some()).then(|| {
            LossProcess::new(
                self.model,
                self.p,
                self.burst_len,
                self.seed ^ stream.wrapping_mul(0x9E37_79B9_7F4A_7C15),
            )
            .with_rate(self.rate_mbit.map(|r| r * 1e6))
        })
    }
}

pub async fn run(
    common: &Common,
    workload: Workload,
    loss: LossSpec,
) -> (Metrics, Result<(), String>) {
    let localhost: SocketAddr = "127.0.0.1:0".parse().unwrap();
    let (endpoint, socket) = match common.server_endpoint(localhost, loss.process(1)) {
        Ok(x) => x,
        Err(e) => return (app::metrics_header(common, &workload), Err(e)),
    };
    let server = match socket.local_addr_checked() {
        Ok(a) => a,
        Err(e) => return (app::metrics_header(common, &workload), Err(e)),
    };
    let serving = tokio::spawn(app::serve(endpoint.clone(), socket.clone()));
    let (mut m, res) = app::client_main(common, server, localhost, workload, loss.process(2)).await;
    endpoint.close(0u32.into(), b"bye");
    serving.abort();
    m.loopback = Some(json!({
        "loss": loss.p,
        "loss_model": match loss.model { LossModel::Uniform => "uniform", LossModel::Burst => "burst" },
        "burst_len": loss.burst_len,
        "seed": loss.seed,
        "rate_mbit": loss.rate_mbit,
    }));
    (m, res)
}
