//! `fecq loopback`: server and client in one process over 127.0.0.1, with seeded loss applied
//! by each FEC socket to the datagrams it sends (server and client draw from different seeds),
//! and optionally a send-rate limit per direction (a simulated bottleneck, crate::link), under
//! either stack.

use std::net::SocketAddr;
use std::sync::Arc;

use serde_json::json;

use crate::app::{self, Workload};
use crate::link::loss::{LossModel, LossProcess};
use crate::link::Link;
use crate::noq_stack::Noq;
use crate::options::config::Common;
use crate::options::metrics::Metrics;
use crate::options::multipath::MpArgs;
use crate::quic::QuicEndpoint;
use crate::quinn_stack::Quinn;
use crate::run::{self, ClientSetup};
use crate::stack::Stack;
use crate::stop::Stop;

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
    let (mut m, res) =
        run_multipath_links(common, mp_args, workload, (loss.link(1), loss.link(2))).await;
    m.loopback = Some(loss.describe());
    (m, res)
}

/// The same with the server's and the client's links given (e.g. a known loss pattern per path).
pub async fn run_multipath_links(
    common: &Common,
    mp_args: &MpArgs,
    workload: Workload,
    links: (Option<Link>, Option<Link>),
) -> (Metrics, Result<(), String>) {
    let stack = Noq {
        args: mp_args.clone(),
    };
    run_links(stack, common, workload, links, |server| {
        ClientSetup::multipath(mp_args, server)
    })
    .await
}

/// Single path (quinn), each direction with its own seeded loss stream.
pub async fn run(
    common: &Common,
    workload: Workload,
    loss: LossSpec,
) -> (Metrics, Result<(), String>) {
    let (mut m, res) = run_links(
        Quinn,
        common,
        workload,
        (loss.link(1), loss.link(2)),
        |server| ClientSetup::single(server, Some(SocketAddr::new(server.ip(), 0))),
    )
    .await;
    m.loopback = Some(loss.describe());
    (m, res)
}

/// A server on 127.0.0.1 (any port) and a client against it, in this process.
pub async fn run_links<S: Stack>(
    stack: S,
    common: &Common,
    workload: Workload,
    (server_link, client_link): (Option<Link>, Option<Link>),
    setup: impl FnOnce(SocketAddr) -> ClientSetup,
) -> (Metrics, Result<(), String>) {
    let listen: SocketAddr = "127.0.0.1:0".parse().unwrap();
    let (endpoint, socket) = match run::server_endpoint(&stack, common, listen, server_link) {
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
    let stack = Arc::new(stack);
    let serving = tokio::spawn(run::serve(stack.clone(), endpoint.clone(), socket));
    let setup = setup(SocketAddr::new(listen.ip(), port));
    let res = run::client_main(
        stack.as_ref(),
        common,
        &setup,
        workload,
        client_link,
        &Stop::never(),
    )
    .await;
    endpoint.close(0, b"bye");
    serving.abort();
    res
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
