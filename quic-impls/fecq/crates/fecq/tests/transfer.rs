//! Client-sent data over real QUIC connections on loopback: uploads (the server checks every
//! byte and confirms) and request/response exchanges (both directions checked), single path
//! (quinn) and multipath (noq), with seeded loss on both directions; and a server that refuses
//! a corrupt, short or long upload.

use std::net::SocketAddr;
use std::sync::Arc;

use fecq::app::pattern::pattern_byte;
use fecq::app::transfer::ReqResp;
use fecq::app::Workload;
use fecq::link::loss::LossModel;
use fecq::loopback::{self, LossSpec};
use fecq::options::metrics::Metrics;
use fecq::quinn_stack::Quinn;
use fecq::run::{self, ClientSetup};

use crate::support;
use support::{opts, rt};

fn uniform(p: f64, seed: u64) -> LossSpec {
    LossSpec {
        p,
        model: LossModel::Uniform,
        burst_len: 3.0,
        seed,
        rate_mbit: None,
    }
}

fn run(args: &[&str], workload: Workload, loss: LossSpec) -> Metrics {
    let (c, mp) = opts(args);
    let (m, res) = if mp.multipath {
        rt().block_on(loopback::run_multipath(&c, &mp, workload.clone(), loss))
    } else {
        rt().block_on(loopback::run(&c, workload.clone(), loss))
    };
    res.unwrap_or_else(|e| panic!("{args:?} {workload:?}: {e}"));
    m
}

#[test]
fn upload_is_confirmed_with_loss_on_both_directions() {
    let size = 300_000;
    for (args, seed) in [
        (vec!["--fec", "none"], 3),
        (vec!["--fec", "rs:30,20"], 4),
        (vec!["--fec", "xor:5"], 5),
    ] {
        let m = run(&args, Workload::Upload { size }, uniform(0.05, seed));
        assert!(m.ok || m.error.is_none());
        assert_eq!(m.workload, "upload");
        assert_eq!(m.size, Some(size));
        assert_eq!(m.bytes_app, size, "{args:?}");
        assert!(m.dct_ms.unwrap() > 0.0);
        let (server, client) = (m.sender.as_ref().unwrap(), m.client.as_ref().unwrap());
        // Both directions lost datagrams; the client sent the data, so the top-level transport
        // keys are the client's and `recovered` is what the server rebuilt.
        assert!(
            server.wire_dropped > 0 && client.wire_dropped > 0,
            "{args:?}"
        );
        assert!(client.quic_bytes_sent > size && server.quic_bytes_sent < size / 4);
        assert_eq!(m.packets_sent, client.packets_sent);
        assert_eq!(m.repair_sent, client.repair_sent);
        assert_eq!(m.recovered, server.recovered);
        assert_eq!(m.lost, client.lost);
        if args[1] == "none" {
            assert_eq!((m.repair_sent, m.recovered), (0, 0));
            assert!(m.retransmitted_bytes > 0);
        } else {
            assert!(m.repair_sent > 0 && m.recovered > 0, "{args:?}");
        }
    }
}

#[test]
fn upload_over_two_paths() {
    let size = 400_000;
    let m = run(
        &[
            "--multipath",
            "--local-addresses",
            "127.0.0.1,127.0.0.2",
            "--fec",
            "rs:30,20",
        ],
        Workload::Upload { size },
        uniform(0.03, 7),
    );
    assert_eq!(m.bytes_app, size);
    assert_eq!(m.paths.len(), 2);
    for p in &m.paths {
        let client = p.client.as_ref().expect("client view of the path");
        assert!(
            client.packets_sent > 20,
            "path {} carried no upload",
            p.path
        );
    }
}

#[test]
fn exchanges_are_timed_one_by_one_with_loss_on_both_directions() {
    let p = ReqResp {
        exchanges: 20,
        request: 2_000,
        response: 5_000,
    };
    for args in [vec!["--fec", "none"], vec!["--fec", "rs:30,20"]] {
        let m = run(&args, Workload::ReqResp(p), uniform(0.08, 11));
        let r = m.exchanges.as_ref().expect("exchange report");
        assert_eq!((r.exchanges, r.request, r.response), (20, 2_000, 5_000));
        assert_eq!(r.exchanges_done, 20);
        assert_eq!(r.exchange_ms.len(), 20);
        assert!(r.exchange_ms.iter().all(|&t| t > 0.0));
        let (median, p95) = (r.exchange_median_ms.unwrap(), r.exchange_p95_ms.unwrap());
        let max = r.exchange_ms.iter().cloned().fold(0.0, f64::max);
        assert!(median <= p95 && p95 <= max);
        assert_eq!(m.bytes_app, 20 * 7_000);
        // The exchanges are sequential: together they take no longer than the whole run.
        assert!(r.exchange_ms.iter().sum::<f64>() <= m.dct_ms.unwrap());
        let (server, client) = (m.sender.as_ref().unwrap(), m.client.as_ref().unwrap());
        assert!(
            server.wire_dropped > 0 && client.wire_dropped > 0,
            "{args:?}"
        );
        // Responses are larger: the server is the data sender of the top-level keys.
        assert_eq!(m.packets_sent, server.packets_sent);
    }
    let json = serde_json::to_value(run(
        &["--fec", "none"],
        Workload::ReqResp(p),
        uniform(0.0, 1),
    ))
    .unwrap();
    assert_eq!(json["workload"], "reqresp");
    assert_eq!(json["exchange_ms"].as_array().unwrap().len(), 20);
    assert!(json["exchange_p95_ms"].as_f64().is_some());
}

#[test]
fn multipath_exchanges() {
    let p = ReqResp {
        exchanges: 5,
        request: 30_000,
        response: 100,
    };
    let m = run(
        &["--multipath", "--local-addresses", "127.0.0.1,127.0.0.2"],
        Workload::ReqResp(p),
        uniform(0.03, 2),
    );
    assert_eq!(m.exchanges.as_ref().unwrap().exchange_ms.len(), 5);
    assert_eq!(m.bytes_app, 5 * 30_100);
}

/// What the real server answers to an upload stream carrying `body` after `line`.
fn upload_reply(line: &str, body: Vec<u8>) -> Result<String, String> {
    let (c, _) = opts(&["--fec", "none"]);
    rt().block_on(async {
        let any: SocketAddr = "127.0.0.1:0".parse().unwrap();
        let (endpoint, socket) = run::server_endpoint(&Quinn, &c, any, None).unwrap();
        let server = socket.local_addr().unwrap();
        let serving = tokio::spawn(run::serve(Arc::new(Quinn), endpoint.clone(), socket));
        let setup = ClientSetup::single(server, Some(any));
        let (client, _sock) = run::client_endpoint(&Quinn, &c, &setup, None).unwrap();
        let conn = client.connect(server, "localhost").unwrap().await.unwrap();
        let (mut send, mut recv) = conn.open_bi().await.unwrap();
        send.write_all(line.as_bytes()).await.unwrap();
        send.write_all(&body).await.unwrap();
        send.finish().unwrap();
        let reply = recv.read_to_end(1024).await.map_err(|e| e.to_string());
        conn.close(0u32.into(), b"");
        endpoint.close(0u32.into(), b"");
        serving.abort();
        reply.map(|r| String::from_utf8_lossy(&r).into_owned())
    })
}

fn pattern(n: u64) -> Vec<u8> {
    (0..n).map(pattern_byte).collect()
}

#[test]
fn server_confirms_a_good_upload_and_refuses_a_corrupt_short_or_long_one() {
    assert_eq!(
        upload_reply("upload 70000\n", pattern(70_000)),
        Ok("ok 70000\n".into())
    );
    for at in [0usize, 500, 69_999] {
        let mut body = pattern(70_000);
        body[at] ^= 0x40;
        assert_eq!(
            upload_reply("upload 70000\n", body),
            Ok(format!("error corrupt byte at offset {at}\n"))
        );
    }
    assert_eq!(
        upload_reply("upload 1000\n", pattern(999)),
        Ok("error stream ended after 999 of 1000 bytes\n".into())
    );
    assert_eq!(
        upload_reply("upload 1000\n", pattern(1001)),
        Ok("error more than the announced 1000 bytes\n".into())
    );
    // A corrupt request of an exchange: no response, the stream is reset.
    let mut body = pattern(3000);
    body[2999] ^= 1;
    let reply = upload_reply("exchange 3000 10\n", body);
    assert!(matches!(&reply, Err(e) if e.contains("reset")), "{reply:?}");
    assert_eq!(
        upload_reply("exchange 3000 10\n", pattern(3000))
            .unwrap()
            .len(),
        10
    );
}

/// A page of five activities over a real connection with loss on both directions, single path
/// (quinn) and multipath (noq): every download checked and ended, each activity's times in the
/// graph's order and as its dependencies allow, the load time the last end.
#[test]
fn a_page_loads_over_concurrent_streams() {
    use fecq::app::page::Page;

    let page = Page::parse(
        &serde_json::json!({
            "format": "fecbench-page-1", "name": "five",
            "activities": [
                {"id": "html", "kind": "download", "request": 400, "response": 30000},
                {"id": "parse", "kind": "compute", "ms": 20.0},
                {"id": "css", "kind": "download", "request": 300, "response": 8000},
                {"id": "js", "kind": "download", "request": 300, "response": 60000},
                {"id": "img", "kind": "download", "request": 300, "response": 90000}],
            "deps": [
                {"after": "html", "then": "parse", "on": "first_byte"},
                {"after": "parse", "then": "css", "on": "start", "ms": 5.0},
                {"after": "parse", "then": "js", "on": "start", "ms": 5.0},
                {"after": "parse", "then": "img"}]
        })
        .to_string(),
    )
    .unwrap();
    let runs: [&[&str]; 3] = [
        &["--fec", "none"],
        &["--fec", "rs:30,20"],
        &["--multipath", "--local-addresses", "127.0.0.1,127.0.0.2"],
    ];
    for args in runs {
        let m = run(
            args,
            Workload::Page(Arc::new(page.clone())),
            uniform(0.05, 21),
        );
        let report = m.page.as_ref().expect("page report");
        assert_eq!((m.workload.as_str(), m.size), ("page", None));
        assert_eq!(m.bytes_app, page.app_bytes(), "{args:?}");
        let ids: Vec<&str> = report.activities.iter().map(|a| a.id.as_str()).collect();
        assert_eq!(ids, ["html", "parse", "css", "js", "img"]);
        let start: Vec<f64> = report
            .activities
            .iter()
            .map(|a| a.start_ms.unwrap())
            .collect();
        let end: Vec<f64> = report
            .activities
            .iter()
            .map(|a| a.end_ms.unwrap())
            .collect();
        let first: Vec<Option<f64>> = report.activities.iter().map(|a| a.first_byte_ms).collect();
        // The rules as the client kept them (1 µs of slack for float sums): the parse from the
        // HTML's first byte for 20 ms, css and js 5 ms into it, the image after it.
        assert_eq!(start[0], 0.0);
        assert!(start[1] >= first[0].unwrap() && end[1] >= start[1] + 20.0 - 1e-3);
        assert!(start[2] >= start[1] + 5.0 - 1e-3 && start[3] >= start[1] + 5.0 - 1e-3);
        assert!(start[4] >= end[1]);
        assert_eq!(first[1], None);
        for i in [0, 2, 3, 4] {
            assert!(start[i] <= first[i].unwrap() && first[i].unwrap() <= end[i]);
        }
        let last = end.iter().cloned().fold(0.0, f64::max);
        assert_eq!((report.load_ms, m.dct_ms), (Some(last), Some(last)));
        let json = serde_json::to_value(&m).unwrap();
        assert_eq!(json["page"]["activities"][1]["kind"], "compute");
        assert!(json["page"]["activities"][1]["first_byte_ms"].is_null());
    }
}
