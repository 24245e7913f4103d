//! `fecq loopback`: server and client in one process over 127.0.0.1, with seeded loss applied
//! by each FEC socket to the datagrams it sends (server and client draw from different seeds),
//! and optionally a send-rate limit per direction (a simulated bottleneck, see crate::socket).

use std::net::SocketAddr;

use serde_json::json;

use crate::app::{self, Workload};
use crate::config::Common;
use crate::link::Link;
use crate::loss::{LossModel, LossProcess};
use crate::metrics::Metrics;
use crate::mp::{self, MpArgs};

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

    /// The link of a multipath endpoint: path i of `stream` draws from stream `stream + 16 i`
    /// (path 0 is the single-path stream), so every path has its own seeded loss pattern.
    pub fn link(&self, stream: u64) -> Option<Link> {
        let spec = *self;
        self.process(stream).map(|_| -> Link {
            Link::new(Box::new(move |i| {
                spec.process(stream + 16 * i)
                    .expect("a link exists only when a loss process does")
            }))
        })
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

/// Multipath loopback: a noq server on 127.0.0.1 (wildcard-bound) and a client opening one path
/// per `--local-addresses` entry (127.0.0.x addresses all reach the loopback interface).
pub async fn run_multipath(
    common: &Common,
    mp_args: &MpArgs,
    workload: Workload,
    loss: LossSpec,
) -> (Metrics, Result<(), String>) {
    let shaped = loss.rate_mbit.is_some();
    let (mut m, res) = run_multipath_links(
        common,
        mp_args,
        workload,
        (loss.link(1), loss.link(2)),
        shaped,
    )
    .await;
    m.loopback = Some(loss.describe());
    (m, res)
}

/// The same with the server's and the client's links given (e.g. a known loss pattern per path).
pub async fn run_multipath_links(
    common: &Common,
    mp_args: &MpArgs,
    workload: Workload,
    (server_link, client_link): (Option<Link>, Option<Link>),
    shaped: bool,
) -> (Metrics, Result<(), String>) {
    let listen: SocketAddr = "127.0.0.1:0".parse().unwrap();
    let (endpoint, socket) = match mp::server_endpoint(common, mp_args, listen, server_link, shaped)
    {
        Ok(x) => x,
        Err(e) => return (app::metrics_header(common, &workload), Err(e)),
    };
    let port = match socket.local_addr() {
        Ok(a) => a.port(),
        Err(e) => {
            return (
                app::metrics_header(common, &workload),
                Err(format!("local address: {e}")),
            )
        }
    };
    let serving = tokio::spawn(mp::serve(
        endpoint.clone(),
        socket.clone(),
        mp_args.keepalive(),
    ));
    let server = SocketAddr::new(listen.ip(), port);
    let res = mp::client_main(common, mp_args, server, workload, client_link, shaped).await;
    endpoint.close(0u32.into(), b"bye");
    serving.abort();
    res
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
    m.loopback = Some(loss.describe());
    (m, res)
}

impl LossSpec {
    fn describe(&self) -> serde_json::Value {
        json!({
            "loss": self.p,
            "loss_model": match self.model { LossModel::Uniform => "uniform", LossModel::Burst => "burst" },
            "burst_len": self.burst_len,
            "seed": self.seed,
            "rate_mbit": self.rate_mbit,
        })
    }
}
