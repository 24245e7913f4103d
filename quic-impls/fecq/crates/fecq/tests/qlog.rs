//! `--qlog-dir` and `--keylog-file` (crate::options::qlog) on both stacks: every record of every qlog file
//! parses, the header says what the file is and whose view it holds, the stack's own events
//! (packets sent, recovery metrics) and fecq's (datagrams sent, FEC events) are there on one clock,
//! FEC's recoveries under loss match the metrics, and the key log holds the secrets QUIC needs, in
//! NSS format.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;

use serde_json::Value;

use crate::support;
use support::{fecq, server, terminate};

/// A fresh, empty folder for one test.
fn folder(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("fecq-qlog-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// One qlog file, checked record by record: its header and events.
struct Qlog {
    header: Value,
    events: Vec<Value>,
}

impl Qlog {
    fn names(&self) -> BTreeMap<String, usize> {
        let mut out = BTreeMap::new();
        for e in &self.events {
            *out.entry(e["name"].as_str().unwrap().to_string())
                .or_insert(0) += 1;
        }
        out
    }

    fn count(&self, suffix: &str) -> usize {
        self.events
            .iter()
            .filter(|e| e["name"].as_str().unwrap().ends_with(suffix))
            .count()
    }

    fn named<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a Value> + 'a {
        self.events.iter().filter(move |e| e["name"] == name)
    }
}

/// Read and check a JSON-SEQ qlog file: every record is JSON; the first is the header (qlog 0.3's
/// `qlog_version`/`qlog_format` or the later drafts' `file_schema`/`serialization_format`, the
/// vantage point `vantage`, the connection's group id); every other one an event with a numeric
/// `time`, a `name` and a `data` object.
fn read_qlog(path: &Path, vantage: &str) -> Qlog {
    let text = std::fs::read_to_string(path).unwrap();
    assert!(
        text.starts_with('\u{1e}'),
        "{}: not JSON-SEQ",
        path.display()
    );
    let mut records = text
        .split('\u{1e}')
        .filter(|r| !r.trim().is_empty())
        .map(|r| {
            assert!(
                r.ends_with('\n'),
                "{}: record cut short: {r}",
                path.display()
            );
            serde_json::from_str::<Value>(r)
                .unwrap_or_else(|e| panic!("{}: {e}: {r}", path.display()))
        });
    let header = records.next().expect("a header record");
    let old = header["qlog_version"].is_string() && header["qlog_format"] == "JSON-SEQ";
    let new = header["file_schema"].is_string() && header["serialization_format"] == "JSON-SEQ";
    assert!(old || new, "{}: header {header}", path.display());
    assert_eq!(header["trace"]["vantage_point"]["type"], vantage);
    let group = header["trace"]["common_fields"]["group_id"]
        .as_str()
        .unwrap();
    assert!(
        path.file_name().unwrap().to_string_lossy().contains(group),
        "{}: file not named by its group id {group}",
        path.display()
    );
    let events: Vec<Value> = records.collect();
    for e in &events {
        assert!(e["time"].is_number(), "event without a time: {e}");
        assert!(e["name"].is_string(), "event without a name: {e}");
        assert!(e["data"].is_object(), "event without data: {e}");
    }
    Qlog { header, events }
}

/// The one file of `dir` whose name starts with `vantage`.
fn file_of(dir: &Path, vantage: &str) -> PathBuf {
    let found: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            name.starts_with(&format!("{vantage}-")) && name.ends_with(".sqlog")
        })
        .collect();
    assert_eq!(
        found.len(),
        1,
        "{vantage} files in {}: {found:?}",
        dir.display()
    );
    found[0].clone()
}

/// The stack's events and fecq's share one clock: FEC events fall within the span of the
/// stack's own (ms from the same start), and the first repair follows the first packet sent.
fn same_clock(q: &Qlog) {
    let time = |e: &Value| e["time"].as_f64().unwrap();
    let stack: Vec<f64> = q
        .events
        .iter()
        .filter(|e| !e["name"].as_str().unwrap().starts_with("fecq:"))
        .map(time)
        .collect();
    let last = stack.iter().cloned().fold(0.0, f64::max);
    let first_sent = q
        .events
        .iter()
        .find(|e| e["name"].as_str().unwrap().ends_with("packet_sent"))
        .map(time)
        .unwrap();
    for e in q
        .events
        .iter()
        .filter(|e| e["name"].as_str().unwrap().starts_with("fecq:"))
    {
        let t = time(e);
        assert!(
            t >= first_sent - 1.0 && t <= last + 50.0,
            "{e} outside [{first_sent}, {last}] ms"
        );
    }
}

/// Every key log line is `LABEL <32-byte client random> <secret>` in hex, with one of the labels
/// QUIC's packet protection uses; each of the four is there.
fn check_keylog(path: &Path) {
    const LABELS: [&str; 4] = [
        "CLIENT_HANDSHAKE_TRAFFIC_SECRET",
        "SERVER_HANDSHAKE_TRAFFIC_SECRET",
        "CLIENT_TRAFFIC_SECRET_0",
        "SERVER_TRAFFIC_SECRET_0",
    ];
    let text = std::fs::read_to_string(path).unwrap();
    let hex = |s: &str| {
        !s.is_empty()
            && s.bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    };
    let mut seen = BTreeMap::new();
    for line in text.lines() {
        let parts: Vec<&str> = line.split(' ').collect();
        assert_eq!(parts.len(), 3, "key log line {line:?}");
        assert!(LABELS.contains(&parts[0]), "key log label in {line:?}");
        assert!(
            parts[1].len() == 64 && hex(parts[1]),
            "client random in {line:?}"
        );
        assert!(hex(parts[2]), "secret in {line:?}");
        *seen.entry(parts[0]).or_insert(0) += 1;
    }
    for label in LABELS {
        assert!(seen.contains_key(label), "no {label} in {text}");
    }
}

/// `fecq loopback` with FEC, loss, `--qlog-dir` and `--keylog-file`: the metrics.
fn loopback(dir: &Path, extra: &[&str]) -> Value {
    let out = dir.join("m.json");
    let st = fecq()
        .args([
            "loopback", "--size", "400000", "--loss", "0.05", "--seed", "7",
        ])
        .args(extra)
        .arg("--qlog-dir")
        .arg(dir.join("qlog"))
        .arg("--keylog-file")
        .arg(dir.join("tls.keys"))
        .arg("--out")
        .arg(&out)
        .status()
        .unwrap();
    assert_eq!(st.code(), Some(0));
    serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap()
}

/// What both stacks' traces must hold; `sent`/`metrics`: the stack's names for them.
fn check_loopback(dir: &Path, m: &Value, sent: &str, metrics: &str, multipath: bool) {
    let server = read_qlog(&file_of(&dir.join("qlog"), "server"), "server");
    let client = read_qlog(&file_of(&dir.join("qlog"), "client"), "client");
    assert_eq!(
        server.header["trace"]["common_fields"]["group_id"],
        client.header["trace"]["common_fields"]["group_id"],
        "both ends name the connection by its ODCID"
    );
    for q in [&server, &client] {
        assert!(
            q.names().get(sent).is_some_and(|&n| n > 0),
            "{:?}",
            q.names()
        );
        assert!(
            q.names().get(metrics).is_some_and(|&n| n > 0),
            "{:?}",
            q.names()
        );
        same_clock(q);
    }
    // The server sends the download: repairs with their block; each has a path on multipath.
    let repairs: Vec<&Value> = server.named("fecq:repair_sent").collect();
    assert!(!repairs.is_empty(), "{:?}", server.names());
    for r in &repairs {
        assert!(
            r["data"]["block"].is_u64() && r["data"]["symbol"].is_u64(),
            "{r}"
        );
        assert_eq!(r["data"]["path_id"].is_u64(), multipath, "{r}");
    }
    assert!(repairs.len() as u64 >= m["sender"]["repair_sent"].as_u64().unwrap());
    // Every QUIC datagram the server sent, its length and whether it carried application data:
    // the handshake's and the ACKs' not, the download's yes.
    let datagrams: Vec<&Value> = server.named("fecq:datagram_sent").collect();
    for d in &datagrams {
        assert!(d["data"]["length"].as_u64().is_some_and(|n| n > 20), "{d}");
        assert_eq!(d["data"]["path_id"].is_u64(), multipath, "{d}");
    }
    let with_data = |flag: bool| {
        datagrams
            .iter()
            .filter(|d| d["data"]["app_data"] == flag)
            .count()
    };
    assert!(
        with_data(true) > 100 && with_data(false) > 0,
        "{:?}",
        server.names()
    );
    assert_eq!(with_data(true) + with_data(false), datagrams.len());
    // Each end marks once where its transfer ended and its `stats` exchange began: after the
    // server's mark, only the stats reply carries data (a few datagrams of JSON), not the download.
    for q in [&server, &client] {
        assert_eq!(q.count("fecq:transfer_over"), 1, "{:?}", q.names());
    }
    let over = server.named("fecq:transfer_over").next().unwrap()["time"]
        .as_f64()
        .unwrap();
    let after = datagrams
        .iter()
        .filter(|d| d["data"]["app_data"] == true && d["time"].as_f64().unwrap() >= over)
        .count();
    assert!(
        (1..=4).contains(&after),
        "{after} data datagrams after the transfer"
    );
    // Under loss the client rebuilt sources: one event each, and one signal each.
    let recovered = m["client"]["recovered"].as_u64().unwrap();
    assert!(recovered > 0, "no recovery at 5 % loss: {m}");
    assert_eq!(client.count("fecq:source_recovered") as u64, recovered);
    assert_eq!(client.count("fecq:recovery_signalled") as u64, recovered);
    for s in client.named("fecq:recovery_signalled") {
        assert_eq!(s["data"]["trigger"], "ce", "{s}");
        assert!(s["data"]["symbol"].is_u64(), "{s}");
    }
    check_keylog(&dir.join("tls.keys"));
}

#[test]
fn quinn_loopback_writes_qlog_with_fec_events_and_a_key_log() {
    let dir = folder("quinn");
    let m = loopback(&dir, &["--fec", "rs:30,20"]);
    check_loopback(
        &dir,
        &m,
        "transport:packet_sent",
        "recovery:metrics_updated",
        false,
    );
    // quinn-proto writes its RTTs in seconds: the file has them in ms, as qlog says.
    let server = read_qlog(&file_of(&dir.join("qlog"), "server"), "server");
    let first = server
        .named("recovery:metrics_updated")
        .find(|e| e["data"]["smoothed_rtt"].is_number())
        .unwrap();
    assert_eq!(first["data"]["smoothed_rtt"], 333.0, "initial RTT: {first}");
    std::fs::remove_dir_all(dir).ok();
}

#[test]
fn noq_multipath_loopback_writes_qlog_with_fec_events_per_path() {
    let dir = folder("noq");
    let m = loopback(
        &dir,
        &[
            "--fec",
            "xor:5",
            "--multipath",
            "--local-addresses",
            "127.0.0.1,127.0.0.2",
        ],
    );
    check_loopback(
        &dir,
        &m,
        "quic:packet_sent",
        "quic:recovery_metrics_updated",
        true,
    );
    std::fs::remove_dir_all(dir).ok();
}

/// Server and client processes: the server's trace is complete after SIGTERM (flushed on that
/// exit path), and without the options nothing is written.
#[test]
fn server_process_flushes_its_qlog_on_sigterm() {
    let dir = folder("processes");
    let server_qlog = dir.join("server");
    let (mut server, addr) = server(&[
        "--fec",
        "xor:5",
        "--qlog-dir",
        server_qlog.to_str().unwrap(),
    ]);
    for (name, capture) in [("with", true), ("without", false)] {
        let mut client = fecq();
        client
            .current_dir(&dir)
            .args(["client", "--server", &addr, "--workload", "download"])
            .args(["--size", "100000", "--fec", "xor:5", "--timeout", "20"])
            .arg("--out")
            .arg(dir.join(format!("{name}.json")));
        if capture {
            client.arg("--qlog-dir").arg(dir.join("client"));
            client.arg("--keylog-file").arg(dir.join("client.keys"));
        }
        assert_eq!(client.status().unwrap().code(), Some(0));
    }
    let exited = terminate(&mut server);
    assert_eq!(exited.and_then(|s| s.code()), Some(0));
    // Two connections: two server files, complete; one client file (the run with the options).
    let servers: Vec<PathBuf> = std::fs::read_dir(dir.join("server"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(servers.len(), 2, "{servers:?}");
    for path in servers {
        let q = read_qlog(&path, "server");
        assert!(q.count("packet_sent") > 50 && q.count("fecq:repair_sent") > 0);
    }
    let client = read_qlog(&file_of(&dir.join("client"), "client"), "client");
    assert!(client.count("packet_received") > 50);
    check_keylog(&dir.join("client.keys"));
    let written: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(written.len(), 5, "nothing else written: {written:?}");
    std::fs::remove_dir_all(dir).ok();
}

#[test]
fn check_args_accepts_the_capture_options_on_both_roles() {
    for role in ["server", "client"] {
        let st = fecq()
            .args([
                "check-args",
                role,
                "--qlog-dir",
                "/tmp/q",
                "--keylog-file",
                "/tmp/k",
            ])
            .stdout(Stdio::null())
            .status()
            .unwrap();
        assert_eq!(st.code(), Some(0), "{role}");
        let st = fecq()
            .args(["check-args", role, "--qlog-dir", ""])
            .stderr(Stdio::null())
            .status()
            .unwrap();
        assert_eq!(st.code(), Some(2), "{role}: empty --qlog-dir");
    }
}
