//! `--fec-protect` end to end, in process over loopback, both stacks: with `stream` (the default)
//! only the QUIC packets that carry application data are source symbols, so a 1 kB download's
//! handshake, ACK-only and control packets go out plain and bring no repair; `all` protects every
//! packet, as fecq did before.

use fecq::app::messages::{Mode, Params};
use fecq::app::Workload;
use fecq::link::loss::LossModel;
use fecq::loopback::{self, LossSpec};
use fecq::options::config::Common;
use fecq::options::metrics::{Metrics, SideStats};

use crate::support;
use support::{opts, rt};

fn no_loss() -> LossSpec {
    LossSpec {
        p: 0.0,
        model: LossModel::Uniform,
        burst_len: 1.0,
        seed: 1,
        rate_mbit: None,
    }
}

/// A download of `size` bytes with `args`, single path (quinn) or two paths (noq).
fn download(args: &[&str], multipath: bool, size: u64, loss: LossSpec) -> Metrics {
    let mut argv = vec!["--fec", "rlc:3,2,20"];
    if multipath {
        argv.extend(["--multipath", "--local-addresses", "127.0.0.1,127.0.0.2"]);
    }
    argv.extend_from_slice(args);
    let (c, mp) = opts(&argv);
    let workload = Workload::Download { size };
    let (m, res) = if multipath {
        rt().block_on(loopback::run_multipath(&c, &mp, workload, loss))
    } else {
        rt().block_on(loopback::run(&c, workload, loss))
    };
    res.unwrap_or_else(|e| panic!("{argv:?}: {e}"));
    assert_eq!(m.bytes_app, size, "{argv:?}");
    m
}

/// Source datagrams a side sent: on the wire, minus repairs and plain datagrams.
fn sources(s: &SideStats) -> u64 {
    s.packets_sent - s.repair_sent - s.plain_sent
}

#[test]
fn one_kb_download_protects_only_the_packets_with_stream_data() {
    for multipath in [false, true] {
        let stream = download(&[], multipath, 1000, no_loss());
        let all = download(&["--fec-protect", "all"], multipath, 1000, no_loss());
        for (name, m) in [("stream", &stream), ("all", &all)] {
            for side in [m.sender.as_ref().unwrap(), m.client.as_ref().unwrap()] {
                // Every QUIC datagram went out once, as a source or plain (loopback drops none);
                // both counts are read at one moment (Stack::side_stats).
                assert_eq!(
                    sources(side) + side.plain_sent,
                    side.quic_packets_sent,
                    "{name} multipath {multipath}: {side:?}"
                );
            }
        }
        let (s, a) = (
            stream.sender.as_ref().unwrap(),
            all.sender.as_ref().unwrap(),
        );
        let (sc, ac) = (
            stream.client.as_ref().unwrap(),
            all.client.as_ref().unwrap(),
        );
        // `all`: nothing plain. `stream`: the server's handshake flight at least is plain; the
        // sources on either side are the packets with STREAM frames: the client's two requests and
        // the server's response and stats reply (each with its FIN, in the same packet or the
        // next), however many handshake, ACK-only and (multipath) path packets there are.
        assert_eq!(
            (a.plain_sent, ac.plain_sent),
            (0, 0),
            "multipath {multipath}"
        );
        assert!(s.plain_sent >= 2, "multipath {multipath}: {s:?}");
        for side in [s, sc] {
            assert!(
                (1..=4).contains(&sources(side)),
                "multipath {multipath}: {side:?}"
            );
        }
        assert!(
            sources(ac) >= sources(sc) + 3,
            "multipath {multipath}: the client's ACKs were sources under all: {ac:?}"
        );
        // At most one repair per source (RLC (3, 2, 20): one per 2, or one per partial block).
        assert!(s.repair_sent >= 1 && s.repair_sent <= sources(s), "{s:?}");
        // Under `all` the handshake and ACK-only packets were sources too, with their repairs.
        assert!(
            a.repair_sent > s.repair_sent,
            "multipath {multipath}: all {a:?} vs stream {s:?}"
        );
    }
}

#[test]
fn stream_data_lost_is_still_recovered_under_stream() {
    for multipath in [false, true] {
        let loss = LossSpec {
            p: 0.05,
            model: LossModel::Uniform,
            burst_len: 1.0,
            seed: 7,
            rate_mbit: None,
        };
        let m = download(&[], multipath, 300_000, loss);
        let s = m.sender.as_ref().unwrap();
        assert!(s.plain_sent > 0, "{s:?}");
        assert!(
            m.recovered > 0,
            "multipath {multipath}: nothing recovered: {s:?}"
        );
        // A bulk download's packets carry data: nearly all are sources.
        assert!(sources(s) > 10 * s.plain_sent, "{s:?}");
    }
}

#[test]
fn messages_in_datagram_frames_are_protected() {
    let c: Common = opts(&["--fec", "rs:30,20", "--cc", "none"]).0;
    let params = Params {
        mode: Mode::Datagram,
        rate: 30,
        packets: 8,
        duration: 1.0,
        buffer: 10,
    };
    let loss = LossSpec {
        p: 0.03,
        ..no_loss()
    };
    let (m, res) = rt().block_on(loopback::run(&c, Workload::Messages(params), loss));
    res.unwrap();
    let s = m.sender.as_ref().unwrap();
    // 30 messages of 8 DATAGRAM packets: every one of them a source.
    assert!(sources(s) >= 240, "{s:?}");
    assert!(s.repair_sent >= 100, "{s:?}");
    assert!(m.recovered > 0, "{s:?}");
}
