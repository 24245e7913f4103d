//! The ACK frequency asked of the peer (`--ack-eliciting-threshold`, `--max-ack-delay`): the
//! receiver of a download acknowledges fewer packets when asked to, the transfer stays whole, and
//! the metrics say what was asked.

use fecq::app::Workload;
use fecq::link::loss::LossModel;
use fecq::loopback::{self, LossSpec};
use fecq::options::config::Common;
use fecq::options::metrics::Metrics;

use crate::support;
use support::{common, rt};

fn download(c: &Common) -> Metrics {
    let lossless = LossSpec {
        p: 0.0,
        model: LossModel::Uniform,
        burst_len: 1.0,
        seed: 1,
        // Paced by a 40 Mbit/s shaper: datagrams arrive one by one, as on a real link (unpaced
        // loopback delivers them in batches, and quinn acknowledges a batch at once).
        rate_mbit: Some(40.0),
    };
    let (m, res) = rt().block_on(loopback::run(
        c,
        Workload::Download { size: 1_000_000 },
        lossless,
    ));
    res.unwrap();
    m
}

/// QUIC packets the client (the download's receiver: mostly ACKs) sent.
fn client_packets(m: &Metrics) -> u64 {
    m.client
        .as_ref()
        .expect("client counters")
        .quic_packets_sent
}

#[test]
fn a_higher_ack_eliciting_threshold_means_fewer_acks() {
    let default = download(&common(&[]));
    let sparse = download(&common(&[
        "--ack-eliciting-threshold",
        "29",
        "--max-ack-delay",
        "50",
    ]));
    assert_eq!(
        (default.bytes_app, sparse.bytes_app),
        (1_000_000, 1_000_000)
    );
    assert_eq!(default.ack_eliciting_threshold, None);
    assert_eq!(
        (sparse.ack_eliciting_threshold, sparse.max_ack_delay_ms),
        (Some(29), Some(50))
    );
    // Measured for ~850 data packets: 173–276 packets from the receiver by default (quinn
    // acknowledges every other packet, or what arrived together), 35–37 when asked for one ACK
    // per 30.
    let (many, few) = (client_packets(&default), client_packets(&sparse));
    println!("client packets: default {many}, threshold 29: {few}");
    assert!(few * 3 < many, "default {many}, threshold 29: {few}");
}
