//! The engine's behaviour on the wire: framing, per-path and connection-wide blocks, repair
//! routing, garbage, tail mode.

use std::net::{IpAddr, SocketAddr};
use std::time::{Duration, Instant};

use fec_core::Encoder;

use super::*;

fn addr(s: &str) -> SocketAddr {
    s.parse().unwrap()
}

fn cfg(scheme: &str, multipath: Option<Multipath>) -> LayerConfig {
    LayerConfig {
        scheme: scheme.parse().unwrap(),
        signal: Signal::Ce,
        flush_after: Duration::from_millis(10),
        max_payload: 1200,
        multipath,
        tail: None,
        protect: Protect::Stream,
    }
}

fn payload(i: usize) -> Vec<u8> {
    (0..300).map(|j| (i * 7 + j) as u8).collect()
}

/// Send `n` datagrams alternating over `send_paths`, drop those whose index is in `lost`,
/// deliver the rest to the receiver on the mirrored path; returns what the receiver got.
fn exchange(
    scheme: &str,
    mp: Option<Multipath>,
    send_paths: &[PathKey],
    n: usize,
    lost: &[usize],
) -> (FecLayer, FecLayer, Vec<Incoming>, Vec<Outgoing>) {
    let mut tx = FecLayer::new(cfg(scheme, mp));
    let mut rx = FecLayer::new(cfg(scheme, mp));
    let now = Instant::now();
    let mut wire = Vec::new();
    for i in 0..n {
        tx.send(
            now,
            send_paths[i % send_paths.len()],
            &payload(i),
            ECN_ECT0,
            Content::Data,
            &mut wire,
        );
    }
    tx.poll_flush(now + Duration::from_secs(1), &mut wire);
    let mut got = Vec::new();
    let mut source_index = 0;
    for o in &wire {
        let drop = !o.repair && lost.contains(&source_index);
        if !o.repair {
            source_index += 1;
        }
        if drop {
            continue;
        }
        // The receiver sees the mirrored path: its local IP is the sender's remote IP.
        let seen = PathKey::new(
            Some(o.path.remote.ip()),
            SocketAddr::new(o.path.local.unwrap(), 4000),
        );
        rx.receive(now, seen, &o.data, o.ecn, &mut got);
    }
    (tx, rx, got, wire)
}

fn two_paths() -> [PathKey; 2] {
    [
        PathKey::new(Some("10.0.1.1".parse().unwrap()), addr("10.0.9.1:443")),
        PathKey::new(Some("10.0.2.1".parse().unwrap()), addr("10.0.9.1:443")),
    ]
}

#[test]
fn single_path_framing_is_fec_core_framing() {
    let mut layer = FecLayer::new(cfg("rs:3,2", None));
    let mut enc = Encoder::new("rs:3,2".parse().unwrap(), 1201);
    let path = PathKey::new(None, addr("127.0.0.1:9"));
    let (mut a, mut b) = (Vec::new(), Vec::new());
    for i in 0..4 {
        layer.send(
            Instant::now(),
            path,
            &payload(i),
            ECN_ECT0,
            Content::Data,
            &mut a,
        );
        enc.protect(&payload(i), ECN_ECT0, &mut b);
    }
    let a: Vec<Vec<u8>> = a.into_iter().map(|o| o.data).collect();
    assert_eq!(a, b);
}

#[test]
fn per_path_blocks_recover_on_the_path_that_lost() {
    let mp = Multipath {
        blocks: Blocks::PerPath,
        repair: RepairPath::Same,
    };
    let paths = two_paths();
    // rs:3,2 per path: datagrams 0,2 are path 0's first block, 1,3 path 1's.
    let (_, rx, got, wire) = exchange("rs:3,2", Some(mp), &paths, 8, &[3]);
    assert_eq!(got.len(), 8);
    let rec: Vec<&Incoming> = got.iter().filter(|d| d.recovered).collect();
    assert_eq!(rec.len(), 1);
    assert_eq!(rec[0].payload, payload(3));
    assert_eq!(rec[0].ecn, ECN_CE);
    // Delivered as if received on path 1 (mirrored): local 10.0.9.1, remote 10.0.2.1.
    assert_eq!(
        rec[0].path.remote.ip(),
        "10.0.2.1".parse::<IpAddr>().unwrap()
    );
    let counters = rx.paths(addr("10.0.2.1:4000"));
    assert_eq!(counters.len(), 2);
    assert_eq!(counters[1].1.recovered, 1);
    assert_eq!(counters[0].1.recovered, 0);
    // Repairs stayed on their own path.
    for o in wire.iter().filter(|o| o.repair) {
        assert_eq!(
            o.data[0] as usize,
            paths.iter().position(|p| *p == o.path).unwrap()
        );
    }
}

#[test]
fn repairs_on_the_other_path_still_reach_their_decoder() {
    let mp = Multipath {
        blocks: Blocks::PerPath,
        repair: RepairPath::Other,
    };
    let paths = two_paths();
    let (tx, _, got, wire) = exchange("rs:3,2", Some(mp), &paths, 8, &[0, 5]);
    assert_eq!(got.len(), 8);
    assert_eq!(got.iter().filter(|d| d.recovered).count(), 2);
    for o in wire.iter().filter(|o| o.repair) {
        // Flow f's repairs leave by the other path.
        assert_ne!(
            o.data[0] as usize,
            paths.iter().position(|p| *p == o.path).unwrap()
        );
    }
    let c = tx.paths(paths[0].remote);
    assert_eq!(c[0].1.repair_sent + c[1].1.repair_sent, 4);
}

#[test]
fn connection_blocks_span_paths_and_recovered_datagrams_keep_their_path() {
    let mp = Multipath {
        blocks: Blocks::Connection,
        repair: RepairPath::All,
    };
    let paths = two_paths();
    // rs:4,2: blocks of 2 datagrams across both paths, 2 repairs each: lose a whole block.
    let (_, rx, got, wire) = exchange("rs:4,2", Some(mp), &paths, 6, &[2, 3]);
    assert_eq!(got.len(), 6);
    let rec: Vec<&Incoming> = got.iter().filter(|d| d.recovered).collect();
    assert_eq!(rec.len(), 2);
    let mut by_payload: Vec<(Vec<u8>, IpAddr)> = rec
        .iter()
        .map(|d| (d.payload.clone(), d.path.remote.ip()))
        .collect();
    by_payload.sort();
    let mut want = vec![
        (payload(2), "10.0.1.1".parse().unwrap()),
        (payload(3), "10.0.2.1".parse().unwrap()),
    ];
    want.sort();
    assert_eq!(by_payload, want);
    assert!(wire.iter().all(|o| o.data[0] == 0));
    let c = rx.paths(addr("10.0.1.1:4000"));
    assert_eq!(c[0].1.recovered + c[1].1.recovered, 2);
    assert_eq!(c[0].1.recovered, 1);
}

#[test]
fn none_is_plain_quic_also_multipath() {
    let mp = Multipath {
        blocks: Blocks::PerPath,
        repair: RepairPath::All,
    };
    let (_, _, got, wire) = exchange("none", Some(mp), &two_paths(), 4, &[]);
    assert_eq!(wire.len(), 4);
    assert_eq!(wire[1].data, payload(1));
    assert_eq!(got.len(), 4);
}

#[test]
fn garbage_is_counted_not_delivered() {
    let mp = Multipath {
        blocks: Blocks::PerPath,
        repair: RepairPath::Same,
    };
    let mut rx = FecLayer::new(cfg("rs:3,2", Some(mp)));
    let path = two_paths()[0];
    let mut got = Vec::new();
    for d in [
        &[][..],
        &[200u8, 1, 2][..],
        &[0u8][..],
        &[0u8, 0x10, 0, 0, 0, 0][..],
    ] {
        rx.receive(Instant::now(), path, d, 0, &mut got);
    }
    assert!(got.is_empty());
    assert_eq!(rx.counters(path.remote).ignored, 4);
    assert_eq!(rx.counters(path.remote).wire_datagrams_received, 4);
}

fn tail_cfg(cap: usize) -> LayerConfig {
    LayerConfig {
        tail: Some(cap),
        ..cfg("rlc:6,4,20", None)
    }
}

/// One repair datagram's size as the layer budgets it.
const REPAIR: u64 = 1200 + 13; // RLC repair header (10) + symbol prefix (3)

/// Tail mode, single path: send `n` datagrams, then let the sender go quiet with `budget`.
fn tail_send(cap: usize, n: usize, budget: Option<TailBudget>) -> (FecLayer, Vec<Outgoing>) {
    let mut tx = FecLayer::new(tail_cfg(cap));
    let path = PathKey::new(None, addr("10.0.0.2:443"));
    let t0 = Instant::now();
    let mut wire = Vec::new();
    for i in 0..n {
        tx.send(t0, path, &payload(i), ECN_ECT0, Content::Data, &mut wire);
        // Not quiet yet: the flush check between sends emits nothing.
        tx.poll_flush(t0, &mut wire);
    }
    assert!(wire.iter().all(|o| !o.repair), "a repair while sending");
    tx.set_tail_budget(path, budget);
    tx.poll_flush(t0 + Duration::from_secs(1), &mut wire);
    (tx, wire)
}

fn budget(room_repairs: u64, data_frames: u64) -> Option<TailBudget> {
    Some(TailBudget {
        room_bytes: room_repairs * REPAIR,
        in_flight_bytes: 30 * 1200,
        app_limited: true,
        data_frames,
    })
}

#[test]
fn tail_mode_sends_repairs_only_when_quiet_up_to_the_cap() {
    let (tx, wire) = tail_send(3, 30, budget(100, 30));
    let repairs: Vec<&Outgoing> = wire.iter().filter(|o| o.repair).collect();
    assert_eq!(repairs.len(), 3);
    assert!(
        wire[..30].iter().all(|o| !o.repair),
        "repairs come after the data"
    );
    let c = tx.total();
    assert_eq!((c.tail_repairs, c.tails, c.repair_sent), (3, 1, 3));
}

#[test]
fn tail_mode_stays_within_the_window_room() {
    for room in [0, 1, 2] {
        let (_, wire) = tail_send(3, 30, budget(room, 30));
        assert_eq!(wire.iter().filter(|o| o.repair).count() as u64, room);
    }
    // Room for less than one repair datagram: none.
    let (_, wire) = tail_send(
        3,
        30,
        Some(TailBudget {
            room_bytes: REPAIR - 1,
            ..budget(0, 30).unwrap()
        }),
    );
    assert_eq!(wire.iter().filter(|o| o.repair).count(), 0);
}

#[test]
fn tail_mode_sends_no_more_repairs_than_new_datagrams_nor_after_acks_only() {
    let (mut tx, wire) = tail_send(3, 2, budget(100, 2));
    assert_eq!(wire.iter().filter(|o| o.repair).count(), 2);
    // More datagrams but no new data frame (ACK-only packets): no tail.
    let path = PathKey::new(None, addr("10.0.0.2:443"));
    let t1 = Instant::now() + Duration::from_secs(2);
    let mut more = Vec::new();
    for i in 0..4 {
        tx.send(t1, path, &payload(i), ECN_ECT0, Content::Data, &mut more);
    }
    tx.set_tail_budget(path, budget(100, 2));
    tx.poll_flush(t1 + Duration::from_secs(1), &mut more);
    assert_eq!(more.iter().filter(|o| o.repair).count(), 0);
    // The `stats` request's flush sends nothing in tail mode.
    tx.send(t1, path, &payload(9), ECN_ECT0, Content::Data, &mut more);
    tx.flush_now(path.remote, &mut more);
    assert_eq!(more.iter().filter(|o| o.repair).count(), 0);
}

#[test]
fn tail_mode_waits_while_the_stack_may_still_send_and_skips_what_is_acknowledged() {
    let path = PathKey::new(None, addr("10.0.0.2:443"));
    let busy = TailBudget {
        app_limited: false,
        ..budget(100, 30).unwrap()
    };
    let (mut tx, wire) = tail_send(3, 30, Some(busy));
    assert_eq!(wire.iter().filter(|o| o.repair).count(), 0);
    // The stack then tells it had nothing more to send: the pending tail goes out.
    let later = Instant::now() + Duration::from_secs(2);
    let mut more = Vec::new();
    tx.set_tail_budget(path, budget(100, 30));
    tx.poll_flush(later, &mut more);
    assert_eq!(more.iter().filter(|o| o.repair).count(), 3);
    // One datagram's bytes in flight: one repair is enough.
    let (_, wire) = tail_send(
        3,
        30,
        Some(TailBudget {
            in_flight_bytes: 900,
            ..budget(100, 30).unwrap()
        }),
    );
    assert_eq!(wire.iter().filter(|o| o.repair).count(), 1);
    // Everything acknowledged: no tail.
    let (_, wire) = tail_send(
        3,
        30,
        Some(TailBudget {
            in_flight_bytes: 0,
            ..budget(100, 30).unwrap()
        }),
    );
    assert_eq!(wire.iter().filter(|o| o.repair).count(), 0);
}

#[test]
fn tail_repairs_rebuild_the_lost_last_datagrams() {
    for lost in [vec![29], vec![27, 29], vec![10, 28, 29]] {
        let (_, wire) = tail_send(3, 30, budget(100, 30));
        let mut rx = FecLayer::new(tail_cfg(3));
        let from = PathKey::new(None, addr("10.0.0.1:5000"));
        let mut got = Vec::new();
        let mut source = 0;
        for o in &wire {
            if !o.repair {
                source += 1;
                if lost.contains(&(source - 1)) {
                    continue;
                }
            }
            rx.receive(Instant::now(), from, &o.data, o.ecn, &mut got);
        }
        assert_eq!(got.len(), 30, "lost {lost:?}");
        let mut rec: Vec<Vec<u8>> = got
            .iter()
            .filter(|d| d.recovered)
            .map(|d| d.payload.clone())
            .collect();
        rec.sort();
        let mut want: Vec<Vec<u8>> = lost.iter().map(|&i| payload(i)).collect();
        want.sort();
        assert_eq!(rec, want);
    }
}

#[test]
fn block_mode_is_unchanged_by_the_tail_code() {
    // rlc:6,4,20 in block mode: 2 repairs after every 4 datagrams, as before.
    let (_, _, got, wire) = exchange("rlc:6,4,20", None, &two_paths()[..1], 8, &[]);
    assert_eq!(wire.iter().filter(|o| o.repair).count(), 4);
    assert_eq!(got.len(), 8);
}

#[test]
fn names_parse_and_print() {
    for s in ["path", "connection"] {
        assert_eq!(s.parse::<Blocks>().unwrap().to_string(), s);
    }
    for s in ["same", "other", "all"] {
        assert_eq!(s.parse::<RepairPath>().unwrap().to_string(), s);
    }
    assert!("x"
        .parse::<RepairPath>()
        .unwrap_err()
        .contains("same, other, all"));
}

/// The events a trace gets (crate::options::qlog): none unless asked for; repairs with their block and
/// symbol; a loss rebuilt (by the repair's arrival) and signalled once; symbols given up.
#[test]
fn events_are_recorded_only_when_asked_and_name_blocks_and_symbols() {
    let path = PathKey::new(None, addr("127.0.0.1:9"));
    let now = Instant::now();
    let mut quiet = FecLayer::new(cfg("rs:30,20", None));
    let mut out = Vec::new();
    for i in 0..40 {
        quiet.send(now, path, &payload(i), ECN_ECT0, Content::Data, &mut out);
    }
    let mut events = Vec::new();
    quiet.take_events(&mut events);
    assert!(events.is_empty() && quiet.events.is_none());

    // rs:4,2 (2 repairs per block of 2), source 1 lost: rebuilt when block 0's repair arrives.
    let (mut tx, mut rx) = (
        FecLayer::new(cfg("rs:4,2", None)),
        FecLayer::new(cfg("rs:4,2", None)),
    );
    tx.record_events();
    rx.record_events();
    let mut wire = Vec::new();
    for i in 0..4 {
        tx.send(now, path, &payload(i), ECN_ECT0, Content::Data, &mut wire);
    }
    tx.take_events(&mut events);
    let repairs: Vec<(u32, u32)> = events
        .iter()
        .filter_map(|e| match e.kind {
            FecEventKind::RepairSent { block, symbol, .. } => Some((block, symbol)),
            FecEventKind::DatagramSent { .. } => None,
            ref other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(repairs, [(0, 0), (0, 1), (2, 0), (2, 1)]);
    assert!(events.iter().all(|e| e.group == path.remote && e.path == 0));
    let mut got = Vec::new();
    let mut sources = 0;
    for o in &wire {
        if !o.repair {
            sources += 1;
            if sources == 2 {
                continue; // source symbol 1
            }
        }
        rx.receive(now, path, &o.data, o.ecn, &mut got);
    }
    events.clear();
    rx.take_events(&mut events);
    let kinds: Vec<&FecEventKind> = events.iter().map(|e| &e.kind).collect();
    assert_eq!(
        kinds,
        [
            &FecEventKind::SourceRecovered {
                block: Some(0),
                symbol: 1
            },
            &FecEventKind::RecoverySignalled {
                symbol: 1,
                trigger: Signal::Ce
            },
        ]
    );

    // Both sources of an XOR block with one repair lost: each given up as the window moves past it.
    let (mut tx, mut rx) = (
        FecLayer::new(cfg("xor:2", None)),
        FecLayer::new(cfg("xor:2", None)),
    );
    rx.record_events();
    let mut wire = Vec::new();
    for i in 0..200 {
        tx.send(now, path, &payload(i), ECN_ECT0, Content::Data, &mut wire);
    }
    let mut sources = 0;
    for o in &wire {
        if !o.repair {
            sources += 1;
            if sources <= 2 {
                continue; // symbols 0 and 1: the repair of block 0 cannot rebuild both
            }
        }
        rx.receive(now, path, &o.data, o.ecn, &mut got);
    }
    events.clear();
    rx.take_events(&mut events);
    let abandoned: Vec<&FecEventKind> = events
        .iter()
        .map(|e| &e.kind)
        .filter(|k| matches!(k, FecEventKind::BlockAbandoned { .. }))
        .collect();
    assert_eq!(
        abandoned,
        [
            &FecEventKind::BlockAbandoned {
                block: 0,
                symbols: 1
            },
            &FecEventKind::BlockAbandoned {
                block: 1,
                symbols: 1
            }
        ]
    );
}

/// What `tx` puts on the wire for datagrams of these contents (payload i for the i-th), sent
/// 1 ms apart, then a flush once it has been quiet for a second.
fn send_contents(tx: &mut FecLayer, path: PathKey, contents: &[Content]) -> Vec<Outgoing> {
    let t0 = Instant::now();
    let mut wire = Vec::new();
    for (i, &c) in contents.iter().enumerate() {
        let now = t0 + Duration::from_millis(i as u64);
        tx.send(now, path, &payload(i), ECN_ECT0, c, &mut wire);
        tx.poll_flush(now, &mut wire);
    }
    tx.poll_flush(t0 + Duration::from_secs(1), &mut wire);
    wire
}

/// `fecq:datagram_sent` (crate::options::qlog): none unless asked for; then one event per wire
/// datagram, in the order sent (a repair's own event among them), with its length on the wire and
/// whether the stack's datagram carried application data: a control datagram false, a stream one
/// true, whatever the layer protects (`stream`, `all`, `none`), which the events change nothing of.
#[test]
fn datagram_events_say_which_datagrams_carried_application_data() {
    use Content::{Control, Data};
    let path = PathKey::new(None, addr("10.0.0.2:443"));
    // Handshake, an ACK, three datagrams of the response, an ACK.
    let contents = [Control, Control, Data, Data, Data, Control];
    let mut quiet = FecLayer::new(cfg("rlc:3,2,20", None));
    send_contents(&mut quiet, path, &contents);
    let mut events = Vec::new();
    quiet.take_events(&mut events);
    assert!(events.is_empty() && quiet.events.is_none());
    for (scheme, protect, plain, repairs) in [
        ("rlc:3,2,20", Protect::Stream, 3, 2),
        ("rlc:3,2,20", Protect::All, 0, 3),
        ("none", Protect::Stream, 0, 0),
        ("none", Protect::All, 0, 0),
    ] {
        let config = LayerConfig {
            protect,
            ..cfg(scheme, None)
        };
        let mut tx = FecLayer::new(config.clone());
        tx.record_events();
        let wire = send_contents(&mut tx, path, &contents);
        // What goes on the wire is what a layer that records nothing sends.
        let mut silent = FecLayer::new(config);
        assert_eq!(send_contents(&mut silent, path, &contents), wire);
        let c = tx.total();
        assert_eq!((c.plain_sent, c.repair_sent), (plain, repairs), "{scheme}");
        events.clear();
        tx.take_events(&mut events);
        assert_eq!(events.len(), wire.len(), "{scheme} {protect:?}: {events:?}");
        let mut app_data = Vec::new();
        for (e, o) in events.iter().zip(&wire) {
            assert_eq!((e.group, e.path), (path.remote, 0));
            match e.kind {
                FecEventKind::DatagramSent { bytes, app_data: a } if !o.repair => {
                    assert_eq!(bytes, o.data.len());
                    app_data.push(a);
                }
                FecEventKind::RepairSent { bytes, .. } if o.repair => {
                    assert_eq!(bytes, o.data.len())
                }
                ref other => panic!("{other:?} for {o:?}"),
            }
        }
        assert_eq!(
            app_data,
            [false, false, true, true, true, false],
            "{scheme}"
        );
    }
}

/// fec-core's kind of each wire datagram (1 source, 4 RLC repair, 5 plain), after the multipath
/// envelope byte if `enveloped`.
fn kinds(wire: &[Outgoing], enveloped: bool) -> Vec<u8> {
    wire.iter()
        .map(|o| o.data[usize::from(enveloped)] >> 4)
        .collect()
}

#[test]
fn handshake_and_ack_only_datagrams_are_not_protected_under_stream_but_are_under_all() {
    use Content::Control;
    let path = PathKey::new(None, addr("10.0.0.2:443"));
    // A server's first flight (Initial + Handshake datagrams) then ACK-only datagrams: no data.
    let contents = [Control; 5];
    let mut stream = FecLayer::new(cfg("rlc:3,2,20", None));
    let wire = send_contents(&mut stream, path, &contents);
    assert_eq!(kinds(&wire, false), [5; 5], "plain datagrams, no repair");
    let c = stream.total();
    assert_eq!(
        (c.plain_sent, c.repair_sent, c.wire_datagrams_sent),
        (5, 0, 5)
    );
    // The same under `all`: 5 sources, a repair after every 2, one more for the partial block.
    let mut all = FecLayer::new(LayerConfig {
        protect: Protect::All,
        ..cfg("rlc:3,2,20", None)
    });
    let wire_all = send_contents(&mut all, path, &contents);
    assert_eq!(kinds(&wire_all, false), [1, 1, 4, 1, 1, 4, 1, 4]);
    assert_eq!((all.total().plain_sent, all.total().repair_sent), (0, 3));
    // Both deliver every datagram as sent.
    for wire in [wire, wire_all] {
        let mut rx = FecLayer::new(cfg("rlc:3,2,20", None));
        let mut got = Vec::new();
        let from = PathKey::new(None, addr("10.0.0.1:4000"));
        for o in &wire {
            rx.receive(Instant::now(), from, &o.data, o.ecn, &mut got);
        }
        let payloads: Vec<Vec<u8>> = got.into_iter().map(|d| d.payload).collect();
        assert_eq!(payloads, (0..5).map(payload).collect::<Vec<_>>());
    }
}

#[test]
fn repairs_cover_only_the_datagrams_that_carry_stream_data() {
    use Content::{Control, Data};
    let path = PathKey::new(None, addr("10.0.0.2:443"));
    // Handshake, ACK, data, ACK, data, ACK, ACK: one block of two data datagrams.
    let contents = [Control, Control, Data, Control, Data, Control, Control];
    for scheme in ["rlc:3,2,20", "rs:3,2", "xor:2"] {
        let mut tx = FecLayer::new(cfg(scheme, None));
        let wire = send_contents(&mut tx, path, &contents);
        let k = kinds(&wire, false);
        assert_eq!(&k[..5], [5, 5, 1, 5, 1], "{scheme}");
        assert!(
            (2..=4).contains(&k[5]),
            "{scheme}: a repair right after the block's second source"
        );
        assert_eq!(
            &k[6..],
            [5, 5],
            "{scheme}: the ACKs after it bring no repair, nor a flush"
        );
        assert_eq!(tx.total().repair_sent, 1, "{scheme}");
        // The first data datagram is lost: the repair, which covers the data only, rebuilds it.
        let mut rx = FecLayer::new(cfg(scheme, None));
        let mut got = Vec::new();
        let from = PathKey::new(None, addr("10.0.0.1:4000"));
        for o in wire.iter().filter(|o| o.data != wire[2].data) {
            rx.receive(Instant::now(), from, &o.data, o.ecn, &mut got);
        }
        let rebuilt: Vec<&Incoming> = got.iter().filter(|d| d.recovered).collect();
        assert_eq!(rebuilt.len(), 1, "{scheme}");
        assert_eq!(rebuilt[0].payload, payload(2));
        assert_eq!(got.len(), 7, "{scheme}");
    }
    // Under `all` the same sequence is 7 sources: repairs after every 2, and a flush.
    let mut all = FecLayer::new(LayerConfig {
        protect: Protect::All,
        ..cfg("rlc:3,2,20", None)
    });
    send_contents(&mut all, path, &contents);
    assert_eq!(all.total().repair_sent, 4);
}

#[test]
fn a_lone_ack_after_the_data_does_not_delay_nor_trigger_its_flush() {
    let path = PathKey::new(None, addr("10.0.0.2:443"));
    let mut tx = FecLayer::new(cfg("rlc:3,2,20", None));
    let t0 = Instant::now();
    let mut wire = Vec::new();
    // One data datagram (a 1 kB response), then ACK-only datagrams every 2 ms.
    tx.send(t0, path, &payload(0), ECN_ECT0, Content::Data, &mut wire);
    for i in 1..=4u64 {
        let now = t0 + Duration::from_millis(2 * i);
        tx.send(
            now,
            path,
            &payload(1),
            ECN_ECT0,
            Content::Control,
            &mut wire,
        );
        tx.poll_flush(now, &mut wire);
    }
    assert_eq!(
        tx.total().repair_sent,
        0,
        "the flush floor (10 ms) has not passed since the data"
    );
    // Past the floor after the data, 3 ms after the last ACK: the partial block's repair.
    tx.poll_flush(t0 + Duration::from_millis(11), &mut wire);
    assert_eq!(tx.total().repair_sent, 1);
    assert_eq!(kinds(&wire, false), [1, 5, 5, 5, 5, 4]);
}

#[test]
fn plain_datagrams_keep_the_multipath_envelope_and_their_path() {
    let mp = Multipath {
        blocks: Blocks::PerPath,
        repair: RepairPath::Other,
    };
    let paths = two_paths();
    let mut tx = FecLayer::new(cfg("rs:3,2", Some(mp)));
    let mut rx = FecLayer::new(cfg("rs:3,2", Some(mp)));
    let now = Instant::now();
    let mut wire = Vec::new();
    // Path 0: data, data (a block: its repair goes on path 1); path 1: an ACK-only datagram.
    tx.send(
        now,
        paths[0],
        &payload(0),
        ECN_ECT0,
        Content::Data,
        &mut wire,
    );
    tx.send(
        now,
        paths[1],
        &payload(1),
        ECN_ECT0,
        Content::Control,
        &mut wire,
    );
    tx.send(
        now,
        paths[0],
        &payload(2),
        ECN_ECT0,
        Content::Data,
        &mut wire,
    );
    assert_eq!(kinds(&wire, true), [1, 5, 1, 3]);
    assert_eq!(wire[1].path, paths[1]);
    assert_eq!(wire[1].data[0], 1, "path 1's flow id");
    assert_eq!(wire[3].path, paths[1], "the repair on the other path");
    // Lose path 0's first datagram: rebuilt, and delivered as path 0's; the plain one as path 1's.
    let mut got = Vec::new();
    for o in &wire[1..] {
        let seen = PathKey::new(
            Some(o.path.remote.ip()),
            SocketAddr::new(o.path.local.unwrap(), 4000),
        );
        rx.receive(now, seen, &o.data, o.ecn, &mut got);
    }
    let plain = got.iter().find(|d| d.payload == payload(1)).unwrap();
    assert_eq!(
        plain.path.remote.ip(),
        "10.0.2.1".parse::<IpAddr>().unwrap()
    );
    let rebuilt = got.iter().find(|d| d.recovered).unwrap();
    assert_eq!(rebuilt.payload, payload(0));
    assert_eq!(
        rebuilt.path.remote.ip(),
        "10.0.1.1".parse::<IpAddr>().unwrap()
    );
    let c = tx.paths(addr("10.0.9.1:443"));
    assert_eq!((c[0].1.plain_sent, c[1].1.plain_sent), (0, 1));
}
