//! The `fecq` binary: version, exit codes, server lifecycle, metrics file.

use std::process::Stdio;
use std::time::Duration;

use crate::support;
use support::{fecq, server, terminate};

fn tmp(name: &str) -> std::path::PathBuf {
    std::env::temp_dir().join(format!("fecq-test-{}-{name}", std::process::id()))
}

#[test]
fn version_prints_name_and_version() {
    let out = fecq().arg("--version").output().unwrap();
    assert!(out.status.success());
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        format!("fecq {}", env!("CARGO_PKG_VERSION"))
    );
}

#[test]
fn usage_errors_exit_2() {
    let out_path = tmp("usage.json");
    let out = out_path.to_str().unwrap();
    for args in [
        vec![
            "loopback", "--size", "1000", "--fec", "rs:20,30", "--out", out,
        ],
        vec!["loopback", "--size", "1000", "--fec", "lt:3", "--out", out],
        vec!["loopback", "--out", out],
        vec!["loopback", "--size", "1000", "--loss", "1.5", "--out", out],
        vec![
            "loopback",
            "--size",
            "1000",
            "--rate-mbit",
            "0",
            "--out",
            out,
        ],
        vec![
            "loopback", "--size", "1000", "--signal", "loud", "--out", out,
        ],
        vec![
            "loopback",
            "--workload",
            "messages",
            "--packets",
            "0",
            "--out",
            out,
        ],
        vec!["client", "--server", "127.0.0.1:1", "--size", "10"],
        vec!["frobnicate"],
        // Multipath: options without --multipath, an unknown scheduler or repair path, more
        // server addresses than paths, more paths than addresses, mixed families.
        vec![
            "loopback",
            "--size",
            "10",
            "--local-addresses",
            "127.0.0.2",
            "--out",
            out,
        ],
        vec![
            "loopback",
            "--size",
            "10",
            "--multipath",
            "--scheduler",
            "minrtt",
            "--out",
            out,
        ],
        vec![
            "loopback",
            "--size",
            "10",
            "--multipath",
            "--repair-path",
            "x",
            "--out",
            out,
        ],
        vec![
            "loopback",
            "--size",
            "10",
            "--multipath",
            "--local-addresses",
            "10.0.0.1",
            "--out",
            out,
        ],
        vec![
            "client",
            "--server",
            "127.0.0.1:1",
            "--size",
            "10",
            "--multipath",
            "--local-addresses",
            "127.0.0.1",
            "--server-addresses",
            "127.0.0.1:1,127.0.0.1:2",
            "--out",
            out,
        ],
        vec![
            "client",
            "--server",
            "127.0.0.1:1",
            "--size",
            "10",
            "--multipath",
            "--local-addresses",
            "::1",
            "--out",
            out,
        ],
        vec![
            "loopback",
            "--size",
            "10",
            "--multipath",
            "--paths",
            "2",
            "--out",
            out,
        ],
        vec![
            "loopback",
            "--size",
            "10",
            "--multipath",
            "--local-addresses",
            "127.0.0.1,127.0.0.2",
            "--paths",
            "3",
            "--out",
            out,
        ],
        vec![
            "server",
            "--listen",
            "127.0.0.1:0",
            "--repair-path",
            "other",
        ],
    ] {
        let st = fecq().args(&args).stderr(Stdio::null()).status().unwrap();
        assert_eq!(st.code(), Some(2), "{args:?}");
    }
    assert!(!out_path.exists());
}

/// `fecq loopback --multipath` end to end through the binary: both paths in the metrics file.
#[test]
fn multipath_loopback_writes_per_path_metrics() {
    let out = tmp("mp.json");
    let st = fecq()
        .args([
            "loopback",
            "--multipath",
            "--local-addresses",
            "127.0.0.1,127.0.0.2",
        ])
        .args([
            "--size", "200000", "--fec", "xor:4", "--loss", "0.02", "--out",
        ])
        .arg(&out)
        .status()
        .unwrap();
    assert_eq!(st.code(), Some(0));
    let m: serde_json::Value = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
    assert_eq!(m["ok"], true);
    assert_eq!(m["multipath"]["paths_established"], 2);
    let paths = m["paths"].as_array().unwrap();
    assert_eq!(paths.len(), 2);
    for (i, p) in paths.iter().enumerate() {
        assert_eq!(p["path"], i + 1);
        assert_eq!(p["client_address"], format!("127.0.0.{}", i + 1));
        for side in ["client", "server"] {
            for key in [
                "packets_sent",
                "bytes_sent",
                "packets_received",
                "bytes_received",
                "repair_sent",
                "recovered",
                "lost",
                "congestion_events",
                "rtt_ms",
                "cwnd",
            ] {
                assert!(!p[side][key].is_null(), "{side}.{key} of path {}", i + 1);
            }
        }
    }
    std::fs::remove_file(out).ok();
}

#[test]
fn unknown_workload_is_unsupported_127() {
    let out = tmp("unsupported.json");
    let st = fecq()
        .args([
            "loopback",
            "--workload",
            "frobnicate",
            "--size",
            "10",
            "--out",
        ])
        .arg(&out)
        .stderr(Stdio::null())
        .status()
        .unwrap();
    assert_eq!(st.code(), Some(127));
}

#[test]
fn client_without_server_gives_up_at_timeout_with_124_and_says_why() {
    // A port nobody listens on (bound, then released): the handshake lasts until --timeout.
    let port = std::net::UdpSocket::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let out = tmp("noserver.json");
    let st = fecq()
        .args([
            "client",
            "--server",
            &format!("127.0.0.1:{port}"),
            "--size",
            "1000",
        ])
        .args(["--timeout", "1", "--out"])
        .arg(&out)
        .stderr(Stdio::null())
        .status()
        .unwrap();
    assert_eq!(st.code(), Some(124));
    let m: serde_json::Value = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
    assert_eq!(m["ok"], false);
    assert_eq!(m["timed_out"], true);
    assert!(m["error"].as_str().unwrap().contains("timeout"));
    assert_eq!(m["bytes_app"], 0);
    assert!(m["elapsed_ms"].as_f64().unwrap() > 0.0);
    std::fs::remove_file(out).ok();
}

#[test]
fn a_transfer_cut_by_timeout_exits_124_with_the_bytes_so_far() {
    // 20 MB through a 4 Mbit/s loopback bottleneck needs 40 s: --timeout 2 cuts it.
    let out = tmp("cut.json");
    let st = fecq()
        .args([
            "loopback",
            "--size",
            "20000000",
            "--rate-mbit",
            "4",
            "--timeout",
            "2",
            "--out",
        ])
        .arg(&out)
        .stderr(Stdio::null())
        .status()
        .unwrap();
    assert_eq!(st.code(), Some(124));
    let m: serde_json::Value = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
    assert_eq!(m["timed_out"], true);
    assert!(m["dct_ms"].is_null());
    let got = m["bytes_app"].as_u64().unwrap();
    assert!(got > 0 && got < 20_000_000, "{got}");
    std::fs::remove_file(out).ok();
}

#[test]
fn window_limits_are_options_and_checked() {
    let good = fecq()
        .args(["check-args", "server", "--initial-window", "32"])
        .args(["--max-window", "107"])
        .output()
        .unwrap();
    assert_eq!(good.status.code(), Some(0));
    let bad = fecq()
        .args(["check-args", "client", "--initial-window", "50"])
        .args(["--max-window", "10"])
        .output()
        .unwrap();
    assert_eq!(bad.status.code(), Some(2));
    let err = String::from_utf8_lossy(&bad.stderr);
    assert!(
        err.contains("--initial-window 50 is above --max-window 10"),
        "{err}"
    );
    let tiny = fecq()
        .args(["check-args", "client", "--max-window", "1"])
        .output()
        .unwrap();
    assert_eq!(tiny.status.code(), Some(2));
}

#[test]
fn cc_none_and_repair_cc_are_options_and_bad_values_are_named() {
    let good = fecq()
        .args(["check-args", "server", "--fec", "rs:30,20", "--cc", "none"])
        .args(["--repair-cc", "free"])
        .output()
        .unwrap();
    assert_eq!(good.status.code(), Some(0));
    for (flag, value) in [("--cc", "off"), ("--repair-cc", "maybe")] {
        let bad = fecq()
            .args(["check-args", "client", flag, value])
            .output()
            .unwrap();
        assert_eq!(bad.status.code(), Some(2));
        let err = String::from_utf8_lossy(&bad.stderr);
        assert!(err.contains(value) && err.contains("allowed"), "{err}");
    }
}

#[test]
fn check_args_accepts_good_options_and_names_a_bad_value() {
    let good = fecq()
        .args(["check-args", "server", "--fec", "rs:30,20", "--cc", "bbr"])
        .output()
        .unwrap();
    assert_eq!(good.status.code(), Some(0));
    let good = fecq()
        .args(["check-args", "client", "--workload", "download"])
        .args(["--timeout", "150", "--fec", "xor:5", "--mode", "stream"])
        .output()
        .unwrap();
    assert_eq!(good.status.code(), Some(0));
    for workload in ["upload", "reqresp", "page"] {
        let good = fecq()
            .args([
                "check-args",
                "client",
                "--workload",
                workload,
                "--timeout",
                "10",
            ])
            .output()
            .unwrap();
        assert_eq!(good.status.code(), Some(0), "{workload}");
    }
    for (args, value) in [
        (vec!["server", "--fec", "rs:20,30"], "rs:20,30"),
        (vec!["client", "--timeout", "0"], "--timeout 0"),
        (vec!["client", "--reorder-time", "0.5"], "0.5"),
        (vec!["client", "--workload", "frobnicate"], "frobnicate"),
        (
            vec!["client", "--workload", "reqresp", "--exchanges", "0"],
            "--exchanges 0",
        ),
        (vec!["client", "--paths", "2"], "--paths"),
        (
            vec![
                "client",
                "--workload",
                "page",
                "--page",
                "/nonexistent.json",
            ],
            "/nonexistent.json",
        ),
        (vec!["router"], "router"),
    ] {
        let out = fecq().arg("check-args").args(&args).output().unwrap();
        let said = String::from_utf8_lossy(&out.stderr);
        assert_ne!(out.status.code(), Some(0), "{args:?}");
        assert!(said.contains(value), "{args:?}: {said}");
    }
}

#[test]
fn server_and_client_processes_then_sigterm_exits_0() {
    let (mut server, addr) = server(&["--fec", "rs:30,20"]);
    let out = tmp("client.json");
    let st = fecq()
        .args([
            "client",
            "--server",
            &addr,
            "--workload",
            "download",
            "--size",
            "123456",
        ])
        .args(["--fec", "rs:30,20", "--timeout", "20", "--out"])
        .arg(&out)
        .status()
        .unwrap();
    assert_eq!(st.code(), Some(0));
    let m: serde_json::Value = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
    for key in [
        "dct_ms",
        "handshake_ms",
        "bytes_app",
        "packets_sent",
        "bytes_sent",
        "repair_sent",
        "recovered",
        "lost",
        "retransmitted_bytes",
        "congestion_events",
        "cwnd_final",
        "rtt_ms",
        "fec",
        "signal",
        "cc",
        "workload",
        "size",
        "sender",
        "client",
    ] {
        assert!(m.get(key).is_some(), "missing {key}");
    }
    assert_eq!(m["bytes_app"], 123456);
    assert_eq!(m["fec"], "rs:30,20");
    assert!(m["repair_sent"].as_u64().unwrap() > 0);
    std::fs::remove_file(out).ok();
    // SIGTERM: clean exit 0.
    let exit = terminate(&mut server).expect("server did not exit on SIGTERM");
    assert_eq!(exit.code(), Some(0));
}

/// A server process and client processes: an upload and request/response exchanges, metrics
/// written with the workload's keys.
#[test]
fn upload_and_reqresp_between_processes() {
    let (mut server, addr) = server(&["--fec", "xor:5"]);
    let out = tmp("upload.json");
    let runs: [(&[&str], &str); 2] = [
        (&["--workload", "upload", "--size", "200000"], "upload"),
        (
            &[
                "--workload",
                "reqresp",
                "--exchanges",
                "4",
                "--request",
                "1000",
                "--response",
                "20000",
            ],
            "reqresp",
        ),
    ];
    for (args, workload) in runs {
        let st = fecq()
            .args([
                "client",
                "--server",
                &addr,
                "--fec",
                "xor:5",
                "--timeout",
                "20",
            ])
            .args(args)
            .arg("--out")
            .arg(&out)
            .status()
            .unwrap();
        assert_eq!(st.code(), Some(0), "{workload}");
        let m: serde_json::Value = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
        assert_eq!(m["workload"], workload);
        assert_eq!(m["ok"], true);
        assert!(m["dct_ms"].as_f64().unwrap() > 0.0);
        if workload == "upload" {
            assert_eq!(m["bytes_app"], 200000);
            assert_eq!(m["size"], 200000);
        } else {
            assert_eq!(m["bytes_app"], 4 * 21000);
            assert_eq!(m["exchange_ms"].as_array().unwrap().len(), 4);
            assert_eq!(m["exchanges_done"], 4);
        }
    }
    std::fs::remove_file(out).ok();
    server.kill().ok();
    server.wait().ok();
}

/// A page load between processes: the graph read from its file, the metrics' `page` report; a
/// graph that cannot load is refused by check-args and the client alike (exit 2, naming the file
/// and why).
#[test]
fn a_page_loads_between_processes_and_a_bad_graph_is_refused() {
    let (graph, out) = (tmp("page.json"), tmp("page-metrics.json"));
    let mut page = serde_json::json!({
        "format": "fecbench-page-1", "name": "three",
        "activities": [
            {"id": "html", "kind": "download", "request": 300, "response": 20000},
            {"id": "parse", "kind": "compute", "ms": 10.0},
            {"id": "img", "kind": "download", "request": 300, "response": 50000}],
        "deps": [
            {"after": "html", "then": "parse", "on": "first_byte"},
            {"after": "parse", "then": "img"}],
        "load": "parse"
    });
    std::fs::write(&graph, page.to_string()).unwrap();
    let (mut server, addr) = server(&["--fec", "xor:5"]);
    let client = |graph: &std::path::Path| {
        fecq()
            .args([
                "client",
                "--server",
                &addr,
                "--fec",
                "xor:5",
                "--timeout",
                "20",
            ])
            .args(["--workload", "page", "--page"])
            .arg(graph)
            .arg("--out")
            .arg(&out)
            .output()
            .unwrap()
    };
    assert_eq!(client(&graph).status.code(), Some(0));
    let m: serde_json::Value = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
    assert_eq!(m["ok"], true);
    assert_eq!(m["workload"], "page");
    assert!(m["size"].is_null());
    assert_eq!(m["bytes_app"], 20300 + 50300);
    let activities = m["page"]["activities"].as_array().unwrap();
    assert_eq!(activities.len(), 3);
    assert!(activities.iter().all(|a| a["end_ms"].as_f64().is_some()));
    // The load is the parse's end, before the image's.
    assert_eq!(m["dct_ms"], activities[1]["end_ms"]);
    assert_eq!(m["page"]["load_ms"], m["dct_ms"]);
    assert!(m["dct_ms"].as_f64() < activities[2]["end_ms"].as_f64());
    server.kill().ok();
    server.wait().ok();

    page["deps"]
        .as_array_mut()
        .unwrap()
        .push(serde_json::json!({"after": "img", "then": "html"}));
    std::fs::write(&graph, page.to_string()).unwrap();
    let check = fecq()
        .args(["check-args", "client", "--workload", "page", "--page"])
        .arg(&graph)
        .output()
        .unwrap();
    for refused in [check, client(&graph)] {
        let said = String::from_utf8_lossy(&refused.stderr);
        assert_eq!(refused.status.code(), Some(2), "{said}");
        assert!(
            said.contains(graph.to_str().unwrap()) && said.contains("nothing can start"),
            "{said}"
        );
    }
    std::fs::remove_file(graph).ok();
    std::fs::remove_file(out).ok();
}

/// A client stopped by SIGTERM mid-download (the harness stops a competing bulk flow that way):
/// it exits 143 within its grace and still writes its metrics, with the server's counters.
#[test]
fn a_client_stopped_by_sigterm_writes_its_metrics_with_the_servers_counters() {
    let (mut server, addr) = server(&["--fec", "rs:30,20"]);
    let out = tmp("stopped.json");
    // 100 GB: far more than loopback carries in the second before the stop.
    let mut client = fecq()
        .args(["client", "--server", &addr, "--workload", "download"])
        .args([
            "--size",
            "100000000000",
            "--fec",
            "rs:30,20",
            "--timeout",
            "60",
            "--out",
        ])
        .arg(&out)
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_secs(1));
    let code = terminate(&mut client).map(|st| st.code());
    terminate(&mut server);
    assert_eq!(
        code,
        Some(Some(143)),
        "the client did not end within 5 s of SIGTERM"
    );
    let m: serde_json::Value = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
    std::fs::remove_file(out).ok();
    assert_eq!(m["ok"], false);
    let error = m["error"].as_str().unwrap();
    assert!(error.starts_with("stopped by a signal after "), "{error}");
    let got = m["bytes_app"].as_u64().unwrap();
    assert!(got > 0 && got < 100_000_000_000, "{got}");
    // The server's counters arrived: what its stack sent, FEC repairs included.
    assert!(m["sender"]["packets_sent"].as_u64().unwrap() > 0, "{m}");
    assert!(m["repair_sent"].as_u64().unwrap() > 0, "{m}");
    assert!(
        m["client"]["wire_datagrams_received"].as_u64().unwrap() > 0,
        "{m}"
    );
    assert!(m["dct_ms"].is_null());
}

/// `--test-send-delay-us` (TEST ONLY: fecbench's CI recipe test slows a build with it) is off
/// unless asked, and bounded: a value beyond a second is a usage error.
#[test]
fn test_send_delay_is_off_by_default() {
    assert_eq!(support::common(&[]).test_send_delay_us, 0);
    assert_eq!(
        support::common(&["--test-send-delay-us", "2000"]).test_send_delay_us,
        2000
    );
    let out = fecq()
        .args(["check-args", "server", "--test-send-delay-us", "2000000"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
}

/// The other TEST ONLY knobs of fecbench's CI measurements (`--test-ignore-repairs`,
/// `--test-recovery-delay-us`) are off unless asked, and the delay is bounded like the send delay.
#[test]
fn test_recovery_knobs_are_off_by_default() {
    let c = support::common(&[]);
    assert!(!c.test_ignore_repairs);
    assert_eq!(c.test_recovery_delay_us, 0);
    let c = support::common(&["--test-recovery-delay-us", "20000", "--test-ignore-repairs"]);
    assert_eq!(
        (c.test_recovery_delay_us, c.test_ignore_repairs),
        (20000, true)
    );
    let out = fecq()
        .args([
            "check-args",
            "client",
            "--test-recovery-delay-us",
            "2000000",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
}
