//! Decoder framing fuzzed as a property test: random and mutated datagrams never panic, are
//! counted, and never grow the decoder's state beyond its bound.
mod common;

use common::*;
use fec_core::{Decoder, Scheme};

const SCHEMES: [&str; 6] = [
    "xor:5",
    "xor:4:3",
    "rs:30,20",
    "rs:5,3",
    "rlc:3,2,20",
    "rlc:4,2,40",
];

fn mutate(rng: &mut Rng, d: &[u8]) -> Vec<u8> {
    let mut m = d.to_vec();
    match rng.below(6) {
        0 => m.truncate(rng.below(d.len() + 1)),
        1 => {
            for _ in 0..1 + rng.below(4) {
                if !m.is_empty() {
                    let i = rng.below(m.len());
                    m[i] ^= 1 << rng.below(8);
                }
            }
        }
        2 => {
            // rewrite a header byte (ids, counts, indexes)
            let i = rng.below(m.len().clamp(1, 10));
            if i < m.len() {
                m[i] = rng.next() as u8;
            }
        }
        3 => m.extend(rng.bytes_below(64)),
        4 => {
            // a far-away symbol id
            if m.len() >= 5 {
                m[1..5].copy_from_slice(&(rng.next() as u32).to_be_bytes());
            }
        }
        _ => m = rng.bytes_below(1500),
    }
    m
}

#[test]
fn fuzzed_datagrams_never_panic_and_state_stays_bounded() {
    let mut rng = Rng(20);
    for text in SCHEMES {
        let scheme: Scheme = text.parse().unwrap();
        let payloads = make_payloads(&mut rng, 1500, 1400);
        let sent = encode(scheme, &payloads, 11);
        let mut dec = Decoder::new(scheme);
        let limit = dec.state_limit(1500);
        let mut out = Vec::new();
        let mut peak = 0;
        for s in &sent {
            let d = if rng.chance(0.3) {
                mutate(&mut rng, &s.bytes)
            } else {
                s.bytes.clone()
            };
            dec.receive(&d, &mut out);
            if rng.chance(0.05) {
                dec.receive(&s.bytes, &mut out); // duplicate
            }
            peak = peak.max(dec.state_bytes());
            assert!(peak <= limit, "{text}: state {peak} > limit {limit}");
            out.clear();
        }
        let stats = dec.stats();
        assert!(stats.malformed > 0, "{text}: {stats:?}");
        assert!(stats.duplicates > 0, "{text}: {stats:?}");
        eprintln!("{text}: peak state {peak} B (limit {limit} B), {stats:?}");
    }
}

#[test]
fn random_bytes_are_counted_malformed() {
    let mut rng = Rng(21);
    for text in SCHEMES {
        let mut dec = Decoder::new(text.parse().unwrap());
        let mut out = Vec::new();
        for _ in 0..3000 {
            let len = rng.below(40);
            dec.receive(&rng.bytes(len), &mut out);
        }
        let s = dec.stats();
        assert_eq!(
            s.malformed + s.received_source + s.received_plain + s.received_repair + s.duplicates,
            3000,
            "{text}: every datagram is accounted: {s:?}"
        );
        assert!(s.malformed > 2000, "{text}: {s:?}");
    }
}

/// Well-formed repairs chosen by an adversary (random ids, counts and data) keep the state bounded.
#[test]
fn adversarial_repairs_keep_state_bounded() {
    let mut rng = Rng(22);
    for text in SCHEMES {
        let scheme: Scheme = text.parse().unwrap();
        let mut dec = Decoder::new(scheme);
        let limit = dec.state_limit(1500);
        let mut out = Vec::new();
        let mut base: u32 = 0;
        for _ in 0..4000 {
            base = base.wrapping_add(rng.below(8) as u32);
            let first = base.wrapping_add(rng.below(300) as u32);
            let len = 4 + 2 * rng.below(700);
            let data = rng.bytes(len);
            let d = match scheme {
                Scheme::Xor { k, interleave } => fec_core::frame::xor_repair(
                    first,
                    1 + rng.below(usize::from(k)) as u8,
                    interleave as u8,
                    &data,
                ),
                Scheme::ReedSolomon { n, k } => {
                    let r = (n - k) as u8;
                    fec_core::frame::rs_repair(
                        first,
                        k as u8,
                        r,
                        rng.below(usize::from(r)) as u8,
                        &data,
                    )
                }
                Scheme::Rlc { window, .. } => fec_core::frame::rlc_repair(
                    rng.next() as u32,
                    first,
                    1 + rng.below(usize::from(window)) as u8,
                    &data,
                ),
                Scheme::None => unreachable!(),
            };
            dec.receive(&d, &mut out);
            if rng.chance(0.3) {
                let id = base.wrapping_add(rng.below(300) as u32);
                dec.receive(
                    &fec_core::frame::source(id, 0, &rng.bytes_below(1400)),
                    &mut out,
                );
            }
            assert!(dec.state_bytes() <= limit, "{text}");
            out.clear();
        }
    }
}

/// Every datagram duplicated and locally reordered: each source is delivered exactly once.
#[test]
fn duplicates_and_reordering_deliver_once() {
    let mut rng = Rng(23);
    for text in SCHEMES {
        let scheme: Scheme = text.parse().unwrap();
        let payloads = make_payloads(&mut rng, 200, 1200);
        let sent = encode(scheme, &payloads, 0);
        let mut received: Vec<&[u8]> = sent
            .iter()
            .flat_map(|s| [s.bytes.as_slice(), s.bytes.as_slice()])
            .collect();
        rng.reorder(&mut received, 20);
        let (dec, got) = decode(scheme, &payloads, &received);
        assert!(got.iter().all(|&g| g), "{text}");
        let s = dec.stats();
        assert_eq!(s.received_source + s.recovered, 200);
        assert_eq!(s.received_source + s.duplicates, 400, "{text}: {s:?}");
    }
}

/// A gap longer than the decoder's window (everything lost for a while) is followed: after a few
/// sources the decoder recovers losses again; one stray far-ahead id does not move it.
#[test]
fn long_gaps_are_followed_and_stray_ids_ignored() {
    let mut rng = Rng(24);
    let scheme = Scheme::Xor {
        k: 4,
        interleave: 1,
    };
    let payloads = make_payloads(&mut rng, 2000, 600);
    let sent = encode(scheme, &payloads, 0);
    let mut dec = Decoder::new(scheme);
    let mut out = Vec::new();
    // A stray source far ahead, then normal traffic with one loss: still recovered.
    dec.receive(&fec_core::frame::source(1_000_000, 0, b"stray"), &mut out);
    let is_lost = |s: &Sent| matches!(s.source, Some(9) | Some(1801));
    let positions = index_of_sources(&sent);
    let gap = positions[&100]..positions[&1700];
    for (pos, s) in sent.iter().enumerate() {
        if !gap.contains(&pos) && !is_lost(s) {
            dec.receive(&s.bytes, &mut out);
        }
    }
    let delivered: Vec<u32> = out
        .iter()
        .filter(|d| d.recovered)
        .map(|d| u32::from_be_bytes(d.payload[..4].try_into().unwrap()))
        .collect();
    assert_eq!(delivered, vec![9, 1801], "{:?}", dec.stats());
}
