//! Property tests of the Reed-Solomon and sliding-window RLC codes (seeded loops).
mod common;

use std::collections::BTreeMap;

use common::*;
use fec_core::frame::{self, Frame};
use fec_core::Scheme;

/// Datagram positions of each RS block (its sources and repairs), keyed by the block's first id.
fn rs_blocks(sent: &[Sent]) -> BTreeMap<u32, Vec<usize>> {
    let mut blocks: BTreeMap<u32, Vec<usize>> = BTreeMap::new();
    let mut spans: Vec<(u32, u32)> = Vec::new();
    for (pos, s) in sent.iter().enumerate() {
        if let Some(Frame::RsRepair { first, k, .. }) = frame::parse(&s.bytes) {
            blocks.entry(first).or_default().push(pos);
            spans.push((first, first + u32::from(k)));
        }
    }
    for (pos, s) in sent.iter().enumerate() {
        if let Some(index) = s.source {
            let id = index as u32;
            if let Some(&(first, _)) = spans.iter().find(|&&(a, b)| a <= id && id < b) {
                blocks.get_mut(&first).unwrap().push(pos);
            }
        }
    }
    blocks
}

/// Any erasure pattern losing at most r of a block's k + r datagrams is recovered byte-exact;
/// losing more sources than that is reported unrecoverable.
#[test]
fn reed_solomon_recovers_up_to_r_losses_per_block() {
    let mut rng = Rng(10);
    for case in 0..40 {
        let k = 1 + rng.below(25) as u16;
        let n = k + 1 + rng.below(12) as u16;
        let scheme = if case == 0 {
            Scheme::RS_DEFAULT
        } else {
            Scheme::ReedSolomon { n, k }
        };
        let count = 10 + rng.below(150);
        let payloads = make_payloads(&mut rng, count, 1300);
        let flush_every = if case % 3 == 0 { 1 + rng.below(40) } else { 0 };
        let sent = encode(scheme, &payloads, flush_every);
        let mut lost = vec![false; sent.len()];
        for members in rs_blocks(&sent).values() {
            let repairs = members
                .iter()
                .filter(|&&p| sent[p].source.is_none())
                .count();
            let mut members = members.clone();
            rng.shuffle(&mut members);
            for &p in members.iter().take(rng.below(repairs + 1)) {
                lost[p] = true;
            }
        }
        let mut received = survivors(&sent, &lost);
        if case % 2 == 1 {
            rng.reorder(&mut received, 24);
        }
        let (mut dec, got) = decode(scheme, &payloads, &received);
        assert!(
            got.iter().all(|&g| g),
            "case {case} {scheme}: {:?}",
            dec.stats()
        );
        check_accounting(scheme, &received, &mut dec, &got);
        assert_eq!(dec.stats().unrecoverable, 0);
    }
}

#[test]
fn reed_solomon_beyond_capability_is_reported() {
    let mut rng = Rng(11);
    for case in 0..20 {
        let scheme = Scheme::ReedSolomon { n: 30, k: 20 };
        let payloads = make_payloads(&mut rng, 100, 1200);
        let sent = encode(scheme, &payloads, 0);
        // Lose r + 1 + extra sources of one block: that block cannot be decoded.
        let block = rng.below(5);
        let mut ids: Vec<usize> = (block * 20..block * 20 + 20).collect();
        rng.shuffle(&mut ids);
        let lost: Vec<usize> = ids[..11 + rng.below(9)].to_vec();
        let received: Vec<&[u8]> = sent
            .iter()
            .filter(|s| !s.source.is_some_and(|i| lost.contains(&i)))
            .map(|s| s.bytes.as_slice())
            .collect();
        let (mut dec, got) = decode(scheme, &payloads, &received);
        assert_eq!(
            got.iter().filter(|&&g| !g).count(),
            lost.len(),
            "case {case}"
        );
        check_accounting(scheme, &received, &mut dec, &got);
        assert_eq!(dec.stats().unrecoverable as usize, lost.len());
    }
}

/// RLC: isolated bursts of up to 6 sources (and any lone repair losses around them) are
/// recovered by the (3, 2, 20) code; the paper's configuration.
#[test]
fn rlc_recovers_isolated_bursts() {
    let mut rng = Rng(12);
    for case in 0..40 {
        let scheme = Scheme::RLC_DEFAULT;
        let payloads = make_payloads(&mut rng, 240, 1300);
        let sent = encode(scheme, &payloads, if case % 4 == 0 { 7 } else { 0 });
        // One burst in each stretch of 60 sources, followed by clean sources.
        let mut lost_sources = Vec::new();
        for stretch in 0..4 {
            let len = 1 + rng.below(6);
            let start = stretch * 60 + rng.below(10);
            lost_sources.extend(start..start + len);
        }
        let mut received: Vec<&[u8]> = sent
            .iter()
            .filter(|s| !s.source.is_some_and(|i| lost_sources.contains(&i)))
            .map(|s| s.bytes.as_slice())
            .collect();
        if case % 2 == 1 {
            rng.reorder(&mut received, 16);
        }
        let (mut dec, got) = decode(scheme, &payloads, &received);
        assert!(
            got.iter().all(|&g| g),
            "case {case} {scheme}: lost {lost_sources:?}: {:?}",
            dec.stats()
        );
        if case % 2 == 0 {
            // (with reordering, a source can be rebuilt before its late copy arrives)
            assert_eq!(dec.stats().recovered as usize, lost_sources.len());
        }
        check_accounting(scheme, &received, &mut dec, &got);
    }
}

/// RLC with other parameters: any loss pattern in which every group of K sources and its N − K
/// repairs loses at most N − K datagrams is recovered (the windows overlap, so this is within
/// the code's capability).
#[test]
fn rlc_recovers_within_rate() {
    let mut rng = Rng(13);
    for case in 0..40 {
        let k = 1 + rng.below(6) as u16;
        let n = k + 1 + rng.below(3) as u16;
        let window = k + rng.below(30) as u16;
        let scheme = Scheme::Rlc { n, k, window };
        let payloads = make_payloads(&mut rng, 150, 1300);
        let sent = encode(scheme, &payloads, 0);
        // Groups: K sources then N - K repairs, in sending order.
        let group = usize::from(n);
        let mut lost = vec![false; sent.len()];
        for start in (0..sent.len()).step_by(group) {
            let end = (start + group).min(sent.len());
            let mut members: Vec<usize> = (start..end).collect();
            rng.shuffle(&mut members);
            for &p in members.iter().take(rng.below(usize::from(n - k) + 1)) {
                lost[p] = true;
            }
        }
        // The last group's repairs are the final ones: keep them so the tail is decodable.
        for l in lost.iter_mut().rev().take(usize::from(n)) {
            *l = false;
        }
        let received: Vec<&[u8]> = sent
            .iter()
            .zip(&lost)
            .filter(|(_, &l)| !l)
            .map(|(s, _)| s.bytes.as_slice())
            .collect();
        let (mut dec, got) = decode(scheme, &payloads, &received);
        assert!(
            got.iter().all(|&g| g),
            "case {case} {scheme}: {:?}",
            dec.stats()
        );
        check_accounting(scheme, &received, &mut dec, &got);
    }
}

/// Heavy random loss for every code: deliveries byte-exact, every loss accounted.
#[test]
fn heavy_loss_is_accounted_for_every_code() {
    let mut rng = Rng(14);
    for text in ["rs:30,20", "rs:6,4", "rlc:3,2,20", "rlc:5,3,10", "xor:4:3"] {
        let scheme: Scheme = text.parse().unwrap();
        for _ in 0..6 {
            let payloads = make_payloads(&mut rng, 300, 1200);
            let sent = encode(scheme, &payloads, 0);
            let p = 0.1 + 0.4 * (rng.below(100) as f64 / 100.0);
            let received: Vec<&[u8]> = sent
                .iter()
                .filter(|_| !rng.chance(p))
                .map(|s| s.bytes.as_slice())
                .collect();
            let (mut dec, got) = decode(scheme, &payloads, &received);
            check_accounting(scheme, &received, &mut dec, &got);
        }
    }
}

/// `blocks_with_losses` counts the RS blocks a loss pattern touched: a burst of consecutive
/// source datagrams spans ceil-ish (burst / k) blocks, whether the blocks decode or not.
#[test]
fn reed_solomon_counts_the_blocks_a_burst_touched() {
    let mut rng = Rng(11);
    let scheme = Scheme::ReedSolomon { n: 15, k: 10 };
    let payloads = make_payloads(&mut rng, 60, 1000);
    let sent = encode(scheme, &payloads, 0);
    // Sources 8..12 (2 blocks, recoverable), 35..42 (2 blocks: 5 + 2 lost, recoverable), 41..48
    // (1 block, 7 lost > 5 repairs: not).
    for (burst, blocks, unrecoverable) in [(8..12, 2, 0), (35..42, 2, 0), (41..48, 1, 7)] {
        let lost: Vec<bool> = sent
            .iter()
            .map(|s| s.source.is_some_and(|i| burst.contains(&i)))
            .collect();
        let (mut dec, _) = decode(scheme, &payloads, &survivors(&sent, &lost));
        dec.expire_all();
        let stats = dec.stats();
        assert_eq!(stats.blocks_with_losses, blocks, "{burst:?}: {stats:?}");
        assert_eq!(stats.unrecoverable, unrecoverable, "{burst:?}: {stats:?}");
    }
    let (dec, _) = decode(
        scheme,
        &payloads,
        &survivors(&sent, &vec![false; sent.len()]),
    );
    assert_eq!(dec.stats().blocks_with_losses, 0);

    // A burst that also takes every repair of a block: the decoder never hears of that block, yet
    // counts it from the gap it leaves between the blocks it saw. Block 20..30 whole (1); block
    // 30..40's last 3 sources and all its repairs, block 40..50's first 2 sources (2: the gap and
    // the shown block).
    let blocks = rs_blocks(&sent);
    let whole = |first: u32| blocks[&first].clone();
    let block_40: Vec<usize> = blocks[&40]
        .iter()
        .copied()
        .filter(|&p| sent[p].source.is_some_and(|i| i < 42))
        .collect();
    let block_30: Vec<usize> = blocks[&30]
        .iter()
        .copied()
        .filter(|&p| sent[p].source.is_none_or(|i| i >= 37))
        .collect();
    for (positions, expected) in [(whole(20), 1), ([block_30, block_40].concat(), 2)] {
        let mut lost = vec![false; sent.len()];
        for p in &positions {
            lost[*p] = true;
        }
        let (mut dec, _) = decode(scheme, &payloads, &survivors(&sent, &lost));
        dec.expire_all();
        assert_eq!(dec.stats().blocks_with_losses, expected, "{positions:?}");
    }
}
