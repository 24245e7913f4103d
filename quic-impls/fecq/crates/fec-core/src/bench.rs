//! Throughput of each code through fec-core's [`Encoder`]/[`Decoder`] and of the same work done
//! directly (same wire datagrams, same delivered payloads, checked; the `reed-solomon-erasure`
//! codec for RS, bare GF(2^8) kernels for XOR and RLC), on 1200-byte datagrams with a
//! deterministic loss pattern. Figures, not a test: nothing asserts on time. Each figure is the
//! best of a few repetitions (the machine is shared).

use std::time::{Duration, Instant};

use reed_solomon_erasure::ReedSolomon;

use crate::{frame, gf256, rlc, rs, Decoder, Delivered, Encoder, Scheme};

/// Datagram size used by [`run`].
pub const SYMBOL_BYTES: usize = 1200;

/// Figures for one scheme.
#[derive(Debug, Clone)]
pub struct CodeBench {
    pub scheme: String,
    /// Source megabytes per second through [`Encoder::protect`] (repairs included).
    pub encode_mb_s: f64,
    /// Source megabytes per second through [`Decoder::receive`], with losses to recover.
    pub decode_mb_s: f64,
    /// Encoder + decoder time per source datagram, nanoseconds.
    pub layer_ns_per_datagram: f64,
    /// The same work done directly, without fec-core's `Encoder`/`Decoder` (None for `none`):
    /// see `direct_encode` and `direct_decode` for exactly what that side does.
    pub direct_encode_mb_s: Option<f64>,
    pub direct_decode_mb_s: Option<f64>,
    /// Whether the direct side produced exactly fec-core's output (wire datagrams when encoding,
    /// delivered payloads in order when decoding): the comparison is only fair if it did.
    pub direct_same_output: Option<bool>,
    /// Datagrams the decoder recovered (sanity: the losses were repaired).
    pub recovered: u64,
    pub lost: u64,
}

impl CodeBench {
    /// direct / fec-core throughput: how much the layer costs over the bare code (goal ≤ 1.3).
    pub fn encode_ratio(&self) -> Option<f64> {
        self.direct_encode_mb_s.map(|d| d / self.encode_mb_s)
    }
    pub fn decode_ratio(&self) -> Option<f64> {
        self.direct_decode_mb_s.map(|d| d / self.decode_mb_s)
    }
}

fn payloads(count: usize) -> Vec<Vec<u8>> {
    let mut state = 0x5EED_u64;
    (0..count)
        .map(|_| {
            (0..SYMBOL_BYTES)
                .map(|_| {
                    state = state
                        .wrapping_mul(6364136223846793005)
                        .wrapping_add(1442695040888963407);
                    (state >> 56) as u8
                })
                .collect()
        })
        .collect()
}

fn best_of(reps: usize, mut f: impl FnMut() -> Duration) -> Duration {
    (0..reps).map(|_| f()).min().unwrap_or_default()
}

fn mb_s(bytes: usize, t: Duration) -> f64 {
    bytes as f64 / 1e6 / t.as_secs_f64().max(1e-9)
}

/// Whether source `i` is lost in the benchmark: one in `loss_every`, at a position that every
/// code recovers (the 5th of each group of `loss_every`).
fn lost(i: usize, loss_every: usize) -> bool {
    loss_every > 0 && i % loss_every == loss_every / 2
}

/// Measure every scheme on `count` datagrams, losing one source datagram in `loss_every`
/// (0: no loss).
pub fn run(schemes: &[Scheme], count: usize, loss_every: usize, reps: usize) -> Vec<CodeBench> {
    let input = payloads(count);
    let bytes = count * SYMBOL_BYTES;
    schemes
        .iter()
        .map(|&scheme| {
            // The wire, once in full and once with the lost sources removed.
            let mut core_wire = Vec::new();
            let mut wire = Vec::new();
            let mut enc = Encoder::new(scheme, SYMBOL_BYTES);
            let mut out = Vec::new();
            for (i, p) in input.iter().enumerate() {
                enc.protect(p, 0, &mut out);
                let skip = lost(i, loss_every) && scheme != Scheme::None;
                wire.extend(
                    out.iter()
                        .enumerate()
                        .filter(|(j, _)| !(skip && *j == 0))
                        .map(|(_, d)| d.clone()),
                );
                core_wire.append(&mut out);
            }
            enc.flush(&mut out);
            wire.extend(out.iter().cloned());
            core_wire.append(&mut out);
            let mut core_delivered = Vec::new();
            let mut dec = Decoder::new(scheme);
            let mut out = Vec::new();
            for d in &wire {
                dec.receive(d, &mut out);
                core_delivered.extend(out.drain(..).map(|d| d.payload));
            }

            let t_enc = best_of(reps, || {
                let mut enc = Encoder::new(scheme, SYMBOL_BYTES);
                let mut out = Vec::with_capacity(4);
                let t = Instant::now();
                for p in &input {
                    enc.protect(p, 0, &mut out);
                    out.clear();
                }
                enc.flush(&mut out);
                t.elapsed()
            });
            let mut recovered = 0;
            let t_dec = best_of(reps, || {
                let mut dec = Decoder::new(scheme);
                let mut out: Vec<Delivered> = Vec::with_capacity(4);
                let t = Instant::now();
                for d in &wire {
                    dec.receive(d, &mut out);
                    out.clear();
                }
                let t = t.elapsed();
                recovered = dec.stats().recovered;
                t
            });
            let direct = direct(scheme, &input, &wire, &core_wire, &core_delivered, reps);
            CodeBench {
                scheme: scheme.to_string(),
                encode_mb_s: mb_s(bytes, t_enc),
                decode_mb_s: mb_s(bytes, t_dec),
                layer_ns_per_datagram: (t_enc + t_dec).as_secs_f64() * 1e9 / count as f64,
                direct_encode_mb_s: direct.map(|(e, _, _)| mb_s(bytes, e)),
                direct_decode_mb_s: direct.map(|(_, d, _)| mb_s(bytes, d)),
                direct_same_output: direct.map(|(_, _, same)| same),
                recovered,
                lost: if scheme == Scheme::None {
                    0
                } else {
                    (0..count).filter(|&i| lost(i, loss_every)).count() as u64
                },
            }
        })
        .collect()
}

/// A symbol store indexed by id modulo its size, reusing its buffers: what a plain user of a
/// code would keep (no duplicate, reordering or adversarial-input handling).
struct Ring {
    slots: Vec<(Option<u32>, Vec<u8>)>,
}

impl Ring {
    fn new(size: usize) -> Self {
        Ring {
            slots: (0..size).map(|_| (None, Vec::new())).collect(),
        }
    }
    fn put(&mut self, id: u32, ecn: u8, payload: &[u8]) {
        let n = self.slots.len();
        let slot = &mut self.slots[id as usize % n];
        slot.0 = Some(id);
        frame::write_symbol(&mut slot.1, ecn, payload);
    }
    fn put_symbol(&mut self, id: u32, symbol: &[u8]) {
        let n = self.slots.len();
        let slot = &mut self.slots[id as usize % n];
        slot.0 = Some(id);
        slot.1.clear();
        slot.1.extend_from_slice(symbol);
    }
    fn get(&self, id: u32) -> Option<&[u8]> {
        let slot = &self.slots[id as usize % self.slots.len()];
        (slot.0 == Some(id)).then_some(slot.1.as_slice())
    }
}

/// Encode `input` without fec-core's `Encoder`: frame each source (header + payload), keep its
/// symbol, and build the repairs with the code (bare GF(2^8) kernels for XOR and RLC, the
/// `reed-solomon-erasure` codec for RS). Produces the same wire datagrams as `Encoder`. With
/// `keep`, returns them all; otherwise each datagram's output is dropped like the fec-core side's.
fn direct_encode(scheme: Scheme, input: &[Vec<u8>], keep: bool) -> Vec<Vec<u8>> {
    let mut wire = Vec::new();
    let mut out: Vec<Vec<u8>> = Vec::with_capacity(16);
    let mut emit = |out: &mut Vec<Vec<u8>>| {
        if keep {
            wire.append(out);
        } else {
            out.clear();
        }
    };
    match scheme {
        Scheme::None => {}
        Scheme::Xor { k, interleave } => {
            let (k, i) = (usize::from(k), usize::from(interleave));
            let mut acc = vec![Vec::<u8>::new(); i];
            for (id, p) in input.iter().enumerate() {
                let id = id as u32;
                out.push(frame::source(id, 0, p));
                let pos = id as usize % (k * i);
                let a = &mut acc[pos % i];
                let len = frame::SYMBOL_PREFIX + p.len();
                if a.len() < len {
                    a.resize(len, 0);
                }
                let prefix = [0, (p.len() >> 8) as u8, p.len() as u8];
                gf256::xor_into(a, &prefix);
                gf256::xor_into(&mut a[frame::SYMBOL_PREFIX..], p);
                if pos / i == k - 1 {
                    let first = id - (pos - pos % i) as u32;
                    out.push(frame::xor_repair(first, k as u8, i as u8, a));
                    a.clear();
                }
                emit(&mut out);
            }
        }
        Scheme::Rlc { n, k, window } => {
            let (k, w, per) = (usize::from(k), usize::from(window), n - k);
            let mut ring = Ring::new(w);
            let mut acc = Vec::new();
            let mut repair_id = 0u32;
            for (id, p) in input.iter().enumerate() {
                out.push(frame::source(id as u32, 0, p));
                ring.put(id as u32, 0, p);
                if (id + 1) % k == 0 {
                    let first = (id + 1).saturating_sub(w);
                    let count = id + 1 - first;
                    let width = (first..=id)
                        .filter_map(|j| ring.get(j as u32).map(<[u8]>::len))
                        .max()
                        .unwrap_or(0);
                    for _ in 0..per {
                        let coefs = rlc::coefficients(repair_id, count);
                        acc.clear();
                        acc.resize(width, 0);
                        for (j, &c) in (first..=id).zip(&coefs) {
                            gf256::mul_add(&mut acc, ring.get(j as u32).unwrap_or_default(), c);
                        }
                        out.push(frame::rlc_repair(
                            repair_id,
                            first as u32,
                            count as u8,
                            &acc,
                        ));
                        repair_id += 1;
                    }
                }
                emit(&mut out);
            }
        }
        Scheme::ReedSolomon { n, k } => {
            let (k, r) = (usize::from(k), usize::from(n - k));
            let codec = ReedSolomon::<rs::Gf>::new(k, r).expect("rs params");
            let mut block: Vec<Vec<u8>> = vec![Vec::new(); k];
            let mut parity: Vec<Vec<u8>> = vec![Vec::new(); r];
            for (id, p) in input.iter().enumerate() {
                out.push(frame::source(id as u32, 0, p));
                frame::write_symbol(&mut block[id % k], 0, p);
                if id % k == k - 1 {
                    let shard = (block.iter().map(Vec::len).max().unwrap_or(0).max(2) + 1) & !1;
                    for s in block.iter_mut().chain(parity.iter_mut()) {
                        s.resize(shard, 0);
                    }
                    codec.encode_sep(&block, &mut parity).expect("encode");
                    let first = (id + 1 - k) as u32;
                    for (index, data) in parity.iter().enumerate() {
                        out.push(frame::rs_repair(first, k as u8, r as u8, index as u8, data));
                    }
                }
                emit(&mut out);
            }
        }
    }
    wire
}

/// Decode `wire` without fec-core's `Decoder`: read each header, hand every received payload to
/// the application (a copy, as `Delivered` does), keep its symbol, and rebuild lost symbols with
/// the code when a repair allows it, handing those over too. No duplicate, stale, reordering or
/// malformed-input handling. With `keep`, returns the delivered payloads in delivery order.
fn direct_decode(scheme: Scheme, wire: &[Vec<u8>], keep: bool) -> (Vec<Vec<u8>>, u64) {
    let mut delivered = Vec::new();
    let mut out: Vec<Vec<u8>> = Vec::with_capacity(4);
    let mut recovered = 0u64;
    let span = match scheme {
        Scheme::None => 1,
        Scheme::Xor { k, interleave } => usize::from(k) * usize::from(interleave),
        Scheme::ReedSolomon { k, .. } => usize::from(k),
        Scheme::Rlc { k, window, .. } => usize::from(window) + usize::from(k),
    };
    let mut ring = Ring::new(2 * span);
    let mut acc = Vec::new();
    let (rs_k, rs_r) = match scheme {
        Scheme::ReedSolomon { n, k } => (usize::from(k), usize::from(n - k)),
        _ => (1, 1),
    };
    let codec = ReedSolomon::<rs::Gf>::new(rs_k, rs_r).expect("rs params");
    // Reed-Solomon: the current block's shards (present or not), first id, and progress.
    let mut shards: Vec<(Vec<u8>, bool)> = vec![(Vec::new(), false); rs_k + rs_r];
    let mut block_first: Option<u32> = None;
    let mut block_done = false;
    for d in wire {
        match frame::parse(d) {
            Some(frame::Frame::Source { id, ecn, payload }) => {
                out.push(payload.to_vec());
                ring.put(id, ecn, payload);
            }
            // The bench protects every datagram: none is sent plain.
            Some(frame::Frame::Plain { payload, .. }) => out.push(payload.to_vec()),
            Some(frame::Frame::XorRepair {
                first,
                count,
                stride,
                data,
            }) => {
                let ids = (0..u32::from(count)).map(|i| first + i * u32::from(stride));
                let mut missing = ids.clone().filter(|&id| ring.get(id).is_none());
                if let (Some(lost), None) = (missing.next(), missing.next()) {
                    acc.clear();
                    acc.extend_from_slice(data);
                    for id in ids.filter(|&id| id != lost) {
                        gf256::xor_into(&mut acc, ring.get(id).unwrap_or_default());
                    }
                    recover(&mut ring, lost, &acc, &mut out, &mut recovered);
                }
            }
            Some(frame::Frame::RlcRepair {
                repair_id,
                first,
                count,
                data,
            }) => {
                let ids = first..first + u32::from(count);
                let mut missing = ids.clone().filter(|&id| ring.get(id).is_none());
                if let (Some(lost), None) = (missing.next(), missing.next()) {
                    let coefs = rlc::coefficients(repair_id, usize::from(count));
                    acc.clear();
                    acc.extend_from_slice(data);
                    for (id, &c) in ids.zip(&coefs).filter(|&(id, _)| id != lost) {
                        gf256::mul_add(&mut acc, ring.get(id).unwrap_or_default(), c);
                    }
                    gf256::scale(&mut acc, gf256::inv(coefs[(lost - first) as usize]));
                    recover(&mut ring, lost, &acc, &mut out, &mut recovered);
                }
            }
            Some(frame::Frame::RsRepair {
                first, index, data, ..
            }) => {
                if block_first != Some(first) {
                    block_first = Some(first);
                    block_done = false;
                    shards.iter_mut().for_each(|s| s.1 = false);
                }
                let ids = first..first + rs_k as u32;
                if block_done || ids.clone().all(|id| ring.get(id).is_some()) {
                    block_done = true;
                } else {
                    let slot = &mut shards[rs_k + usize::from(index)];
                    slot.0.clear();
                    slot.0.extend_from_slice(data);
                    slot.1 = true;
                    let present = ids.clone().filter(|&id| ring.get(id).is_some()).count();
                    if present + shards[rs_k..].iter().filter(|s| s.1).count() >= rs_k {
                        for (buf, here) in &mut shards[rs_k..] {
                            if !*here {
                                buf.resize(data.len(), 0);
                            }
                        }
                        for (i, id) in ids.clone().enumerate() {
                            let (buf, here) = &mut shards[i];
                            buf.clear();
                            buf.resize(data.len(), 0);
                            *here = match ring.get(id) {
                                Some(s) => {
                                    buf[..s.len()].copy_from_slice(s);
                                    true
                                }
                                None => false,
                            };
                        }
                        codec.reconstruct_data(&mut shards).expect("rs decode");
                        for (i, id) in ids.enumerate() {
                            if ring.get(id).is_none() {
                                let symbol = std::mem::take(&mut shards[i].0);
                                recover(&mut ring, id, &symbol, &mut out, &mut recovered);
                                shards[i].0 = symbol;
                            }
                        }
                        block_done = true;
                    }
                }
            }
            None => {}
        }
        if keep {
            delivered.append(&mut out);
        } else {
            out.clear();
        }
    }
    (delivered, recovered)
}

/// Hand a rebuilt (padded) symbol's payload to the application and keep the symbol.
fn recover(ring: &mut Ring, id: u32, padded: &[u8], out: &mut Vec<Vec<u8>>, n: &mut u64) {
    if let Some((_, payload)) = frame::unpack_symbol(padded) {
        out.push(payload.to_vec());
        ring.put_symbol(id, &padded[..frame::SYMBOL_PREFIX + payload.len()]);
        *n += 1;
    }
}

/// Time the direct encoder and decoder, after checking that they produce exactly what fec-core
/// does (same wire datagrams; same payloads delivered, recovered ones included).
fn direct(
    scheme: Scheme,
    input: &[Vec<u8>],
    wire: &[Vec<u8>],
    core_wire: &[Vec<u8>],
    core_delivered: &[Vec<u8>],
    reps: usize,
) -> Option<(Duration, Duration, bool)> {
    if scheme == Scheme::None {
        return None;
    }
    let same_wire = direct_encode(scheme, input, true) == core_wire;
    let same_out = direct_decode(scheme, wire, true).0 == core_delivered;
    let enc = best_of(reps, || {
        let t = Instant::now();
        std::hint::black_box(direct_encode(scheme, input, false));
        t.elapsed()
    });
    let dec = best_of(reps, || {
        let t = Instant::now();
        std::hint::black_box(direct_decode(scheme, wire, false));
        t.elapsed()
    });
    Some((enc, dec, same_wire && same_out))
}
