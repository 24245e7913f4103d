//! Multipath fecq (noq) in process over loopback: two paths (127.0.0.1 and 127.0.0.2, both on
//! the loopback interface) with a seeded loss process per path and direction. Every downloaded
//! byte is verified by the client (a position-dependent pattern).

use fecq::app::messages::{Mode, Params};
use fecq::app::Workload;
use fecq::link::loss::LossModel;
use fecq::loopback::{self, LossSpec};
use fecq::options::config::Common;
use fecq::options::metrics::Metrics;
use fecq::options::multipath::MpArgs;

use crate::support;
use support::rt;

/// Options for two loopback paths, plus `args`.
fn opts(args: &[&str]) -> (Common, MpArgs) {
    let mut argv = vec!["--multipath", "--local-addresses", "127.0.0.1,127.0.0.2"];
    argv.extend_from_slice(args);
    support::opts(&argv)
}

fn loss(p: f64, seed: u64) -> LossSpec {
    LossSpec {
        p,
        model: LossModel::Burst,
        burst_len: 3.0,
        seed,
        rate_mbit: None,
    }
}

fn uniform(p: f64, seed: u64) -> LossSpec {
    LossSpec {
        model: LossModel::Uniform,
        ..loss(p, seed)
    }
}

fn run(args: &[&str], workload: Workload, loss: LossSpec) -> Metrics {
    let (c, mp) = opts(args);
    let (m, res) = rt().block_on(loopback::run_multipath(&c, &mp, workload, loss));
    res.unwrap_or_else(|e| panic!("{args:?}: {e}"));
    m
}

/// Per-path counters add up to the totals, both views of a path agree on what crossed it.
fn check_paths(m: &Metrics) {
    assert_eq!(m.paths.len(), 2);
    let client = m.client.as_ref().unwrap();
    let sender = m.sender.as_ref().unwrap();
    let mut recovered = 0;
    for p in &m.paths {
        let c = p.client.as_ref().expect("client view of the path");
        let s = p.server.as_ref().expect("server view of the path");
        assert_eq!(c.local, p.client_address);
        assert_eq!(s.local, "127.0.0.1");
        assert!(c.quic_path_id.is_some() && s.quic_path_id.is_some());
        // What the server put on the path, minus what its loss model dropped, arrived (loopback
        // loses nothing else). The server read its counters after the client's first count (it
        // answered the client's request) and before its reply, the retransmissions and repairs
        // of that reply, and its ACKs, all of which the client's final count may hold: so the
        // first count cannot exceed what had arrived, and the final one misses at most the few
        // datagrams still in flight when the client read it.
        let arrived = s.packets_sent - s.wire_dropped;
        let before = p
            .client_received_before_stats
            .expect("the client's first count");
        assert!(before <= arrived, "{p:?}");
        assert!(c.packets_received + 8 >= arrived, "{p:?}");
        recovered += c.recovered;
    }
    assert_eq!(recovered, client.recovered);
    assert_eq!(
        m.paths
            .iter()
            .map(|p| p.server.as_ref().unwrap().repair_sent)
            .sum::<u64>(),
        sender.repair_sent
    );
}

#[test]
fn two_path_download_uses_both_paths_and_recovers_on_each() {
    // Seed 11: the server's datagrams on path 1 are lost at indices 30, 65-67, 158, ... and on path 2
    // at 14, 49-51, 142, ..., so every path that carries over 100 datagrams loses a burst FEC can
    // rebuild. (With seed 5 a path's first loss came after 276 datagrams: when a loaded machine
    // made the scheduler put 164 datagrams on path 2, it lost nothing and rebuilt nothing.)
    let m = run(
        &["--fec", "rs:30,20"],
        Workload::Download { size: 2_000_000 },
        loss(0.03, 11),
    );
    assert!(m.ok || m.error.is_none());
    assert_eq!(m.bytes_app, 2_000_000);
    check_paths(&m);
    let info = m.multipath.as_ref().unwrap();
    assert_eq!((info.paths_requested, info.paths_established), (2, 2));
    for p in &m.paths {
        let s = p.server.as_ref().unwrap();
        assert!(s.packets_sent > 100, "path {} carried {p:?}", p.path);
        assert!(p.client.as_ref().unwrap().recovered > 0, "{p:?}");
    }
}

#[test]
fn repairs_on_the_other_path_and_connection_wide_blocks_deliver() {
    for args in [
        [
            "--fec",
            "rs:30,20",
            "--repair-path",
            "other",
            "--fec-blocks",
            "path",
        ],
        [
            "--fec",
            "xor:4",
            "--repair-path",
            "all",
            "--fec-blocks",
            "connection",
        ],
        [
            "--fec",
            "rlc:3,2,20",
            "--repair-path",
            "same",
            "--fec-blocks",
            "connection",
        ],
    ] {
        // Independent losses: with bursts (mean length 3) an XOR(4) block spanning consecutive
        // datagrams can lose every burst whole, and a run then recovered nothing about 1 time in 6.
        let m = run(
            &args,
            Workload::Download { size: 500_000 },
            uniform(0.03, 9),
        );
        assert_eq!(m.bytes_app, 500_000, "{args:?}");
        check_paths(&m);
        assert!(m.recovered > 0, "{args:?}");
    }
}

#[test]
fn messages_in_both_modes_over_two_paths() {
    for mode in [Mode::Datagram, Mode::Stream] {
        let p = Params {
            mode,
            rate: 50,
            packets: 4,
            duration: 1.0,
            buffer: 4,
        };
        let m = run(&["--fec", "rs:30,20"], Workload::Messages(p), loss(0.02, 3));
        let r = m.messages.as_ref().unwrap();
        assert_eq!(r.messages_expected, 50);
        assert!(r.messages_ok + r.messages_late >= 45, "{mode}: {r:?}");
        assert_eq!(r.bad_packets, 0);
        check_paths(&m);
    }
}

#[test]
fn no_fec_is_plain_multipath_quic() {
    let m = run(
        &["--fec", "none"],
        Workload::Download { size: 300_000 },
        loss(0.0, 1),
    );
    assert_eq!(m.bytes_app, 300_000);
    assert_eq!((m.repair_sent, m.recovered), (0, 0));
    check_paths(&m);
}

/// Every scheduler delivers a download over two lossy paths.
#[test]
fn every_scheduler_delivers() {
    for scheduler in ["lowest-id", "min-rtt", "round-robin", "highrb"] {
        let m = run(
            &["--fec", "rs:30,20", "--scheduler", scheduler],
            Workload::Download { size: 1_000_000 },
            loss(0.01, 21),
        );
        assert_eq!(m.bytes_app, 1_000_000, "{scheduler}");
        assert_eq!(m.multipath.as_ref().unwrap().scheduler, scheduler);
        check_paths(&m);
    }
}

/// Round-robin alternates between paths whenever both windows have room, where noq's own
/// lowest-id order fills path 1 first. Checked on app-limited traffic (50 messages/s), where the
/// windows always have room, so the split is the scheduler's alone: a download's split follows
/// the paths' congestion windows under every scheduler (seen here: round-robin 962/353 and
/// lowest-id 888/413 datagrams on the same seed), so it cannot tell the two apart.
/// Measured on this test: path 2 carried 125-143 of ~395 server datagrams under round-robin,
/// 16-35 of ~360 under lowest-id, the same with three CPU hogs running.
#[test]
fn round_robin_alternates_where_lowest_id_fills_path_1() {
    let path_2_share = |scheduler: &str| {
        let p = Params {
            mode: Mode::Datagram,
            rate: 50,
            packets: 4,
            duration: 1.0,
            buffer: 4,
        };
        let m = run(
            &["--fec", "rs:30,20", "--scheduler", scheduler],
            Workload::Messages(p),
            loss(0.0, 1),
        );
        check_paths(&m);
        let sent: Vec<u64> = m
            .paths
            .iter()
            .map(|p| p.server.as_ref().unwrap().packets_sent)
            .collect();
        (sent[1] as f64 / sent.iter().sum::<u64>() as f64, sent)
    };
    let (round_robin, rr_sent) = path_2_share("round-robin");
    let (lowest_id, li_sent) = path_2_share("lowest-id");
    assert!(round_robin >= 0.25, "round-robin {rr_sent:?}");
    assert!(
        round_robin >= 2.0 * lowest_id,
        "round-robin {rr_sent:?}, lowest-id {li_sent:?}"
    );
}

/// An outage of path 1 in the data direction (the server's datagrams 150..270 on that path all
/// lost, repairs included) during a download with RS(40,20) per-path blocks (as many repairs as
/// sources): with the repairs on the same path they are lost with their blocks; sent on the other
/// path they arrive and rebuild what path 1 lost.
#[test]
fn repairs_on_the_other_path_recover_an_outage_of_a_path() {
    use fecq::link::loss::LossProcess;
    use fecq::link::Link;

    let recovered_on_path_1 = |repair: &str| {
        let (c, mp) = opts(&[
            "--fec",
            "rs:40,20",
            "--repair-path",
            repair,
            "--path-idle-timeout",
            "0",
        ]);
        let outage: Vec<u64> = (150..270).collect();
        let server_link = Link::new(Box::new(move |i| {
            LossProcess::at_indices(if i == 0 { outage.clone() } else { Vec::new() })
        }));
        let (m, res) = rt().block_on(loopback::run_multipath_links(
            &c,
            &mp,
            Workload::Download { size: 2_000_000 },
            (Some(server_link), None),
        ));
        res.unwrap_or_else(|e| panic!("{repair}: {e}"));
        assert_eq!(m.bytes_app, 2_000_000);
        check_paths(&m);
        let p1 = &m.paths[0];
        assert_eq!(p1.server.as_ref().unwrap().wire_dropped, 120, "{p1:?}");
        let recovered = p1.client.as_ref().unwrap().recovered;
        eprintln!("--repair-path {repair}: {recovered} of path 1's datagrams recovered");
        recovered
    };
    let same = recovered_on_path_1("same");
    let other = recovered_on_path_1("other");
    // How many of the outage's 6 blocks are rebuilt depends on when their repairs arrive relative
    // to the decoder's window and QUIC's retransmissions (33-101 of 120 measured here, beside two
    // busy loops): the property is that repairs on the other path rebuild at least one whole block
    // (20 sources), which repairs lost with their block cannot.
    assert!(
        other >= 20 && other > 2 * same,
        "same {same}, other {other}"
    );
}

/// The recovered-loss signal reaches the congestion controller of the path that lost the
/// datagram: losses only on path 2 (server to client), RS(30,20), `--signal ce`: the datagrams
/// rebuilt are path 2's, and the congestion events (losses and CE marks) are path 2's; path 1,
/// which lost nothing, has none. Round-robin puts half the datagrams on path 2 however the
/// machine's load moves the paths' RTTs (with lowest-id, a loaded run put 72 there and lost none).
#[test]
fn recovered_losses_signal_the_path_that_lost_them() {
    use fecq::link::loss::{LossModel, LossProcess};
    use fecq::link::Link;

    let (c, mp) = opts(&[
        "--fec",
        "rs:30,20",
        "--signal",
        "ce",
        "--scheduler",
        "round-robin",
    ]);
    let server_link = Link::new(Box::new(|i| {
        if i == 1 {
            LossProcess::new(LossModel::Uniform, 0.03, 1.0, 7)
        } else {
            LossProcess::at_indices(Vec::new())
        }
    }));
    let (m, res) = rt().block_on(loopback::run_multipath_links(
        &c,
        &mp,
        Workload::Download { size: 2_000_000 },
        (Some(server_link), None),
    ));
    res.unwrap();
    check_paths(&m);
    let (p1, p2) = (&m.paths[0], &m.paths[1]);
    let (s1, s2) = (p1.server.as_ref().unwrap(), p2.server.as_ref().unwrap());
    let (c1, c2) = (p1.client.as_ref().unwrap(), p2.client.as_ref().unwrap());
    assert!(s2.wire_dropped > 0 && s1.wire_dropped == 0, "{s1:?} {s2:?}");
    assert!(c2.recovered > 0 && c1.recovered == 0, "{c1:?} {c2:?}");
    assert!(s2.congestion_events > 0, "{s2:?}");
    assert_eq!(s1.congestion_events, 0, "{s1:?}");
}

/// `--scheduler backup`: path 2 carries the data only once path 1 is gone. With both paths up the
/// server sends its data on path 1 (path 2: keep-alives and the like); when path 1 goes dark in
/// both directions from its 300th datagram on, path 1 is abandoned after the path idle timeout
/// (1 s) and the download completes on path 2.
#[test]
fn backup_scheduler_uses_path_2_only_once_path_1_is_gone() {
    use fecq::link::loss::LossProcess;
    use fecq::link::Link;

    let sent = |m: &Metrics| -> Vec<u64> {
        m.paths
            .iter()
            .map(|p| p.server.as_ref().unwrap().packets_sent)
            .collect()
    };
    let args = ["--fec", "rs:30,20", "--scheduler", "backup"];
    let m = run(&args, Workload::Download { size: 1_000_000 }, loss(0.0, 1));
    assert_eq!(m.bytes_app, 1_000_000);
    assert_eq!(m.multipath.as_ref().unwrap().scheduler, "backup");
    let both_up = sent(&m);
    assert!(both_up[1] * 20 < both_up[0], "{both_up:?}");

    let (c, mp) = opts(&args);
    let dark = || {
        Link::new(Box::new(|i| {
            LossProcess::at_indices(if i == 0 {
                (300..1_000_000).collect()
            } else {
                Vec::new()
            })
        }))
    };
    let (m, res) = rt().block_on(loopback::run_multipath_links(
        &c,
        &mp,
        Workload::Download { size: 1_000_000 },
        (Some(dark()), Some(dark())),
    ));
    res.unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(m.bytes_app, 1_000_000);
    let path_1_dark = sent(&m);
    // Most of the transfer (~1100 datagrams with repairs) went on path 2, after path 1 was dropped.
    assert!(path_1_dark[1] > 500, "{path_1_dark:?}");
    eprintln!("server datagrams per path: both up {both_up:?}, path 1 dark {path_1_dark:?}");
}
