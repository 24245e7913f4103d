//! Property tests of `none` and the XOR code (seeded loops).
mod common;

use common::*;
use fec_core::Scheme;

#[test]
fn none_is_plain_pass_through() {
    let mut rng = Rng(1);
    let payloads = make_payloads(&mut rng, 50, 1200);
    let sent = encode(Scheme::None, &payloads, 7);
    assert_eq!(sent.len(), payloads.len());
    for (s, p) in sent.iter().zip(&payloads) {
        assert_eq!(&s.bytes, p, "none adds no header");
    }
    let received: Vec<&[u8]> = sent.iter().map(|s| s.bytes.as_slice()).collect();
    let (_, got) = decode(Scheme::None, &payloads, &received);
    assert!(got.iter().all(|&g| g));
}

/// Any single loss per XOR block (of sources or the repair), in any arrival order, is recovered.
#[test]
fn xor_recovers_one_loss_per_block() {
    let mut rng = Rng(2);
    for case in 0..60 {
        let k = 1 + rng.below(12) as u16;
        let interleave = 1 + rng.below(5) as u16;
        let scheme = Scheme::Xor { k, interleave };
        let count = 20 + rng.below(120);
        let payloads = make_payloads(&mut rng, count, 1300);
        let flush_every = if case % 3 == 0 { 1 + rng.below(30) } else { 0 };
        let sent = encode(scheme, &payloads, flush_every);
        // Group every datagram by its block: sources via their repair's coverage.
        let mut lost = vec![false; sent.len()];
        let mut used_blocks = std::collections::HashSet::new();
        let positions = index_of_sources(&sent);
        for (pos, s) in sent.iter().enumerate() {
            if s.source.is_some() {
                continue;
            }
            let Some(fec_core::frame::Frame::XorRepair {
                first,
                count,
                stride,
                ..
            }) = fec_core::frame::parse(&s.bytes)
            else {
                panic!("not a repair")
            };
            if !rng.chance(0.7) || !used_blocks.insert(first) {
                continue;
            }
            // lose one member of this block: the repair itself or one source
            let which = rng.below(usize::from(count) + 1);
            if which == usize::from(count) {
                lost[pos] = true;
            } else {
                let id = first + which as u32 * u32::from(stride);
                lost[positions[&(id as usize)]] = true;
            }
        }
        let mut received = survivors(&sent, &lost);
        if case % 2 == 1 {
            rng.reorder(&mut received, 32);
        }
        let (mut dec, got) = decode(scheme, &payloads, &received);
        assert!(
            got.iter().all(|&g| g),
            "case {case} {scheme}: not all recovered: {:?}",
            dec.stats()
        );
        check_accounting(scheme, &received, &mut dec, &got);
        assert_eq!(dec.stats().malformed, 0);
    }
}

/// A burst of up to I consecutive lost datagrams is recovered by xor:K:I; with I = 1 a burst of
/// two sources in one block is reported unrecoverable.
#[test]
fn interleaving_spreads_bursts() {
    let mut rng = Rng(3);
    for case in 0..60 {
        let k = 2 + rng.below(8) as u16;
        let interleave = 1 + rng.below(6) as u16;
        let scheme = Scheme::Xor { k, interleave };
        let span = usize::from(k * interleave);
        let payloads = make_payloads(&mut rng, span * 4, 1200);
        let sent = encode(scheme, &payloads, 0);
        // A burst of `interleave` consecutive sources, inside one span.
        let span_start = span * rng.below(4);
        let start = span_start + rng.below(span - usize::from(interleave) + 1);
        let lost: Vec<usize> = (start..start + usize::from(interleave)).collect();
        let received: Vec<&[u8]> = sent
            .iter()
            .filter(|s| !s.source.is_some_and(|i| lost.contains(&i)))
            .map(|s| s.bytes.as_slice())
            .collect();
        let (mut dec, got) = decode(scheme, &payloads, &received);
        assert!(
            got.iter().all(|&g| g),
            "case {case} {scheme}: burst at {start}"
        );
        assert_eq!(dec.stats().recovered as usize, lost.len());
        check_accounting(scheme, &received, &mut dec, &got);

        // One more loss than the depth in the same span: one block loses two, unrecoverable.
        let start = span_start + rng.below(span - usize::from(interleave));
        let lost: Vec<usize> = (start..=start + usize::from(interleave)).collect();
        let received: Vec<&[u8]> = sent
            .iter()
            .filter(|s| !s.source.is_some_and(|i| lost.contains(&i)))
            .map(|s| s.bytes.as_slice())
            .collect();
        let (mut dec, got) = decode(scheme, &payloads, &received);
        let missing = got.iter().filter(|&&g| !g).count();
        assert_eq!(
            missing, 2,
            "case {case} {scheme}: exactly one block lost two"
        );
        check_accounting(scheme, &received, &mut dec, &got);
        assert_eq!(dec.stats().unrecoverable, 2);
    }
}

/// Random loss beyond the code's capability: what is delivered is exact, the rest accounted.
#[test]
fn xor_heavy_loss_is_accounted() {
    let mut rng = Rng(4);
    for _ in 0..20 {
        let scheme = Scheme::Xor {
            k: 1 + rng.below(10) as u16,
            interleave: 1 + rng.below(4) as u16,
        };
        let payloads = make_payloads(&mut rng, 200, 1200);
        let sent = encode(scheme, &payloads, 0);
        let p = 0.05 + 0.4 * (rng.below(100) as f64 / 100.0);
        let received: Vec<&[u8]> = sent
            .iter()
            .filter(|_| !rng.chance(p))
            .map(|s| s.bytes.as_slice())
            .collect();
        let (mut dec, got) = decode(scheme, &payloads, &received);
        check_accounting(scheme, &received, &mut dec, &got);
    }
}
