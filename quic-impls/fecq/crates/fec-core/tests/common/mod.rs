//! Helpers shared by the property tests: a seeded generator and an encode/erase/decode harness.
#![allow(dead_code)]

use std::collections::HashMap;

use fec_core::frame::{self, Frame};
use fec_core::{Decoder, Delivered, Encoder, Scheme};

/// splitmix64: small, seeded, good enough to draw test cases.
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    pub fn chance(&mut self, p: f64) -> bool {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64 > 1.0 - p
    }
    pub fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.next() as u8).collect()
    }
    /// Reorder `v` locally: shuffle each run of `reach` items (a bounded reordering, as a
    /// network does; the decoder's window is larger than any reach used in the tests).
    pub fn reorder<T>(&mut self, v: &mut [T], reach: usize) {
        for chunk in v.chunks_mut(reach) {
            self.shuffle(chunk);
        }
    }

    /// Random bytes, fewer than `max` of them.
    pub fn bytes_below(&mut self, max: usize) -> Vec<u8> {
        let n = self.below(max);
        self.bytes(n)
    }

    pub fn shuffle<T>(&mut self, v: &mut [T]) {
        for i in (1..v.len()).rev() {
            let j = self.below(i + 1);
            v.swap(i, j);
        }
    }
}

/// A source payload: its index (so deliveries can be matched) then random bytes; variable length.
pub fn payload(rng: &mut Rng, index: usize, max_len: usize) -> Vec<u8> {
    let len = 4 + rng.below(max_len - 3);
    let mut p = (index as u32).to_be_bytes().to_vec();
    p.extend(rng.bytes(len - 4));
    p
}

/// One sent datagram, with what it is.
pub struct Sent {
    pub bytes: Vec<u8>,
    /// Index of the source payload, or None for a repair.
    pub source: Option<usize>,
}

/// Encode `payloads` (ECN = index % 4), flushing after every `flush_every` (0 = only at the end).
pub fn encode(scheme: Scheme, payloads: &[Vec<u8>], flush_every: usize) -> Vec<Sent> {
    let mut enc = Encoder::new(scheme, 1500);
    let mut sent = Vec::new();
    let mut out = Vec::new();
    for (i, p) in payloads.iter().enumerate() {
        enc.protect(p, (i % 4) as u8, &mut out);
        for (j, bytes) in out.drain(..).enumerate() {
            sent.push(Sent {
                bytes,
                source: (j == 0).then_some(i),
            });
        }
        if flush_every > 0 && (i + 1) % flush_every == 0 {
            enc.flush(&mut out);
            sent.extend(out.drain(..).map(|bytes| Sent {
                bytes,
                source: None,
            }));
        }
    }
    enc.flush(&mut out);
    sent.extend(out.drain(..).map(|bytes| Sent {
        bytes,
        source: None,
    }));
    let stats = enc.stats();
    assert_eq!(stats.source_sent as usize, payloads.len());
    assert_eq!(
        stats.repair_sent as usize,
        sent.iter().filter(|s| s.source.is_none()).count()
    );
    sent
}

/// Feed `received` to a decoder, then check every delivery byte-exact against `payloads` and
/// delivered once. Returns (decoder, set of delivered indexes).
/// The datagrams of `sent` whose `lost` flag is false, in sending order.
pub fn survivors<'a>(sent: &'a [Sent], lost: &[bool]) -> Vec<&'a [u8]> {
    sent.iter()
        .zip(lost)
        .filter(|(_, &l)| !l)
        .map(|(s, _)| s.bytes.as_slice())
        .collect()
}

pub fn decode(scheme: Scheme, payloads: &[Vec<u8>], received: &[&[u8]]) -> (Decoder, Vec<bool>) {
    let mut dec = Decoder::new(scheme);
    let mut out: Vec<Delivered> = Vec::new();
    let mut got = vec![false; payloads.len()];
    for d in received {
        dec.receive(d, &mut out);
        for del in out.drain(..) {
            let index = u32::from_be_bytes(del.payload[..4].try_into().unwrap()) as usize;
            assert!(index < payloads.len(), "delivered garbage");
            assert_eq!(
                del.payload, payloads[index],
                "payload {index} not byte-exact"
            );
            if scheme != Scheme::None {
                assert_eq!(usize::from(del.ecn), index % 4, "ecn of {index}");
            }
            assert!(!got[index], "payload {index} delivered twice");
            got[index] = true;
        }
    }
    (dec, got)
}

/// Source ids covered by the repairs among `received`.
pub fn covered(scheme: Scheme, received: &[&[u8]]) -> Vec<u32> {
    let mut ids = Vec::new();
    for d in received {
        match frame::parse(d) {
            Some(Frame::XorRepair {
                first,
                count,
                stride,
                ..
            }) => ids.extend((0..u32::from(count)).map(|i| first + i * u32::from(stride))),
            Some(Frame::RsRepair { first, k, .. }) => ids.extend(first..first + u32::from(k)),
            Some(Frame::RlcRepair { first, count, .. }) => {
                ids.extend(first..first + u32::from(count))
            }
            _ => {}
        }
    }
    let _ = scheme;
    ids.sort_unstable();
    ids.dedup();
    ids
}

/// Every source is either delivered, or reported unrecoverable if some received repair covered it.
pub fn check_accounting(scheme: Scheme, received: &[&[u8]], dec: &mut Decoder, got: &[bool]) {
    dec.expire_all();
    let covered = covered(scheme, received);
    let lost_covered = covered
        .iter()
        .filter(|&&id| (id as usize) < got.len() && !got[id as usize])
        .count();
    assert_eq!(
        dec.stats().unrecoverable as usize,
        lost_covered,
        "unrecoverable count for {scheme}"
    );
    let delivered = got.iter().filter(|&&g| g).count() as u64;
    let s = dec.stats();
    assert_eq!(s.received_source + s.recovered, delivered);
}

pub fn make_payloads(rng: &mut Rng, count: usize, max_len: usize) -> Vec<Vec<u8>> {
    (0..count).map(|i| payload(rng, i, max_len)).collect()
}

pub fn index_of_sources(sent: &[Sent]) -> HashMap<usize, usize> {
    sent.iter()
        .enumerate()
        .filter_map(|(pos, s)| Some((s.source?, pos)))
        .collect()
}
