//! Tail FEC (`--fec-mode tail`) end to end over loopback: repairs only when the sender goes quiet,
//! for the messages workload (one tail per burst). A lost last datagram of a download: the layer's
//! unit tests (layer.rs) and tests/test_fecq_tail.py (real topology, scripted loss).

use fecq::app::messages::{Mode, Params};
use fecq::app::Workload;
use fecq::link::loss::LossModel;
use fecq::loopback::{self, LossSpec};

use crate::support;
use support::{common, rt};

#[test]
fn messages_get_one_tail_per_burst_and_no_repair_in_between() {
    let c = common(&[
        "--fec",
        "rlc:6,4,20",
        "--fec-mode",
        "tail",
        "--tail-max",
        "2",
    ]);
    let p = Params {
        mode: Mode::Datagram,
        rate: 20,
        packets: 4,
        duration: 1.0,
        buffer: 4,
    };
    let loss = LossSpec {
        p: 0.0,
        model: LossModel::Uniform,
        burst_len: 1.0,
        seed: 1,
        // 2 Mbit/s: a burst takes ~20 ms to leave, so its datagrams are still unacknowledged
        // when the sender goes quiet (10 ms after it handed the last one over).
        rate_mbit: Some(2.0),
    };
    let (m, res) = rt().block_on(loopback::run(&c, Workload::Messages(p), loss));
    res.unwrap();
    let r = m.messages.as_ref().unwrap();
    assert_eq!(r.messages_ok, 20, "{r:?}");
    let s = m.sender.as_ref().unwrap();
    // Each message is a burst of 4 datagrams, 50 ms apart: the sender goes quiet after each one
    // (and after the stream frames that end the workload). On an idle machine that is 20-24 tails
    // of 2 repairs each; a loaded one may merge two bursts (a late message timer) or find a burst
    // already acknowledged when its late flush timer fires (no repair then), so the bounds leave
    // room for that while still failing if tails stopped following the bursts or sent nothing.
    // Exact in any case: every repair is a tail repair, at most two per tail.
    let what = format!("tails {} tail repairs {}", s.tails, s.tail_repairs);
    eprintln!("{what}");
    assert!(s.tails >= 10 && s.tails <= 30, "{what}");
    assert_eq!(s.repair_sent, s.tail_repairs);
    assert!(
        s.tail_repairs <= 2 * s.tails && s.tail_repairs >= s.tails,
        "{what}"
    );
    assert_eq!(m.tail_repairs, s.tail_repairs);
}

fn check_args(args: &[&str]) -> (Option<i32>, String) {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_fecq"))
        .arg("check-args")
        .args(args)
        .output()
        .unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn tail_options_are_checked_with_a_clear_usage_error() {
    let ok = [
        "--fec",
        "rlc:6,4,20",
        "--fec-mode",
        "tail",
        "--tail-max",
        "5",
    ];
    assert_eq!(check_args(&[&["server"][..], &ok].concat()).0, Some(0));
    let client = ["client", "--workload", "messages"];
    assert_eq!(check_args(&[&client[..], &ok].concat()).0, Some(0));
    for (args, said) in [
        (vec!["server", "--fec-mode", "tail"], "--fec rlc:N,K,W"),
        (
            vec!["server", "--fec", "rs:6,4", "--fec-mode", "tail"],
            "not --fec rs:6,4",
        ),
        (vec!["server", "--fec-mode", "end"], "end"),
        (
            vec![
                "server",
                "--fec",
                "rlc:6,4,20",
                "--fec-mode",
                "tail",
                "--tail-max",
                "0",
            ],
            "1..=255",
        ),
        (
            vec![
                "server",
                "--fec",
                "rlc:6,4,20",
                "--fec-mode",
                "tail",
                "--multipath",
            ],
            "single-path",
        ),
    ] {
        let (code, stderr) = check_args(&args);
        assert_eq!(code, Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(said), "{args:?}: {stderr}");
    }
}
