//! Throughput of each code through fec-core's [`Encoder`]/[`Decoder`] and of the same coding
//! work done directly (the `reed-solomon-simd` crate for RS; bare GF(2^8) arithmetic for XOR and
//! RLC), on 1200-byte datagrams with a deterministic loss pattern. Figures, not a test: nothing
//! asserts on time. Each figure is the best of a few repetitions (the machine is shared).

use std::time::{Duration, Instant};

use reed_solomon_simd::{ReedSolomonDecoder, ReedSolomonEncoder};

use crate::{gf256, rlc, Decoder, Delivered, Encoder, Scheme};

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
    /// The same coding work done directly (None for `none`, and for decoding without losses).
    pub direct_encode_mb_s: Option<f64>,
    pub direct_decode_mb_s: Option<f64>,
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
            // The wire, once, with the lost sources removed.
            let mut wire = Vec::new();
            let mut enc = Encoder::new(scheme, SYMBOL_BYTES);
            let mut out = Vec::new();
            for (i, p) in input.iter().enumerate() {
                enc.protect(p, 0, &mut out);
                let skip = lost(i, loss_every) && scheme != Scheme::None;
                wire.extend(
                    out.drain(..)
                        .enumerate()
                        .filter(|(j, _)| !(skip && *j == 0))
                        .map(|(_, d)| d),
                );
            }
            enc.flush(&mut wire);

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
            let direct = direct(scheme, &input, loss_every, reps);
            CodeBench {
                scheme: scheme.to_string(),
                encode_mb_s: mb_s(bytes, t_enc),
                decode_mb_s: mb_s(bytes, t_dec),
                layer_ns_per_datagram: (t_enc + t_dec).as_secs_f64() * 1e9 / count as f64,
                direct_encode_mb_s: direct.map(|(e, _)| mb_s(bytes, e)),
                // Without losses there is no decoding work to do directly.
                direct_decode_mb_s: direct
                    .filter(|_| loss_every > 0)
                    .map(|(_, d)| mb_s(bytes, d)),
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

/// The bare coding work of `scheme` over `input`: (encode time, decode time).
fn direct(
    scheme: Scheme,
    input: &[Vec<u8>],
    loss_every: usize,
    reps: usize,
) -> Option<(Duration, Duration)> {
    match scheme {
        Scheme::None => None,
        Scheme::Xor { k, interleave } => {
            let (k, i) = (usize::from(k), usize::from(interleave));
            let span = k * i;
            let enc = best_of(reps, || {
                let t = Instant::now();
                for group in input.chunks(span) {
                    let mut acc = vec![vec![0u8; SYMBOL_BYTES]; i];
                    for (pos, s) in group.iter().enumerate() {
                        gf256::xor_into(&mut acc[pos % i], s);
                    }
                    std::hint::black_box(&acc);
                }
                t.elapsed()
            });
            // Decode: every block with a loss is rebuilt from its other members and the repair.
            let repairs: Vec<Vec<Vec<u8>>> = input
                .chunks(span)
                .map(|group| {
                    let mut acc = vec![vec![0u8; SYMBOL_BYTES]; i];
                    for (pos, s) in group.iter().enumerate() {
                        gf256::xor_into(&mut acc[pos % i], s);
                    }
                    acc
                })
                .collect();
            let dec = best_of(reps, || {
                let t = Instant::now();
                for (g, group) in input.chunks(span).enumerate() {
                    for pos in 0..group.len() {
                        if !lost(g * span + pos, loss_every) {
                            continue;
                        }
                        let mut r = repairs[g][pos % i].clone();
                        for (p, s) in group.iter().enumerate() {
                            if p != pos && p % i == pos % i {
                                gf256::xor_into(&mut r, s);
                            }
                        }
                        std::hint::black_box(&r);
                    }
                }
                t.elapsed()
            });
            Some((enc, dec))
        }
        Scheme::Rlc { n, k, window } => {
            let (k, w, per) = (usize::from(k), usize::from(window), usize::from(n - k));
            let enc = best_of(reps, || {
                let t = Instant::now();
                let mut repair_id = 0u32;
                for end in (k..=input.len()).step_by(k) {
                    let win = &input[end.saturating_sub(w)..end];
                    for _ in 0..per {
                        let coefs = rlc::coefficients(repair_id, win.len());
                        repair_id += 1;
                        let mut acc = vec![0u8; SYMBOL_BYTES];
                        for (s, &c) in win.iter().zip(&coefs) {
                            gf256::mul_add(&mut acc, s, c);
                        }
                        std::hint::black_box(&acc);
                    }
                }
                t.elapsed()
            });
            // Decode a lone loss: subtract the window's other symbols from the repair, divide.
            let dec = best_of(reps, || {
                let t = Instant::now();
                for lost_at in (0..input.len()).filter(|&i| lost(i, loss_every)) {
                    let end = ((lost_at / k) + 1) * k;
                    let win = &input[end.saturating_sub(w)..end.min(input.len())];
                    let coefs = rlc::coefficients(lost_at as u32, win.len());
                    let mut acc = vec![0u8; SYMBOL_BYTES];
                    for (s, &c) in win.iter().zip(&coefs) {
                        gf256::mul_add(&mut acc, s, c);
                    }
                    gf256::scale(&mut acc, gf256::inv(coefs[0]));
                    std::hint::black_box(&acc);
                }
                t.elapsed()
            });
            Some((enc, dec))
        }
        Scheme::ReedSolomon { n, k } => {
            let (k, r) = (usize::from(k), usize::from(n - k));
            let blocks: Vec<&[Vec<u8>]> = input.chunks_exact(k).collect();
            let mut repairs: Vec<Vec<Vec<u8>>> = Vec::new();
            let enc = best_of(reps, || {
                let mut coder = ReedSolomonEncoder::new(k, r, SYMBOL_BYTES).expect("rs params");
                repairs.clear();
                let t = Instant::now();
                for block in &blocks {
                    coder.reset(k, r, SYMBOL_BYTES).expect("rs params");
                    for s in block.iter() {
                        coder.add_original_shard(s).expect("shard");
                    }
                    let result = coder.encode().expect("encode");
                    repairs.push(result.recovery_iter().map(<[u8]>::to_vec).collect());
                }
                t.elapsed()
            });
            let dec = best_of(reps, || {
                let mut coder = ReedSolomonDecoder::new(k, r, SYMBOL_BYTES).expect("rs params");
                let t = Instant::now();
                for (b, (block, reps)) in blocks.iter().zip(&repairs).enumerate() {
                    let missing = (0..k).filter(|&i| lost(b * k + i, loss_every)).count();
                    if missing == 0 {
                        continue;
                    }
                    coder.reset(k, r, SYMBOL_BYTES).expect("rs params");
                    for (i, s) in block.iter().enumerate() {
                        if !lost(b * k + i, loss_every) {
                            coder.add_original_shard(i, s).expect("shard");
                        }
                    }
                    for (i, s) in reps.iter().enumerate().take(missing) {
                        coder.add_recovery_shard(i, s).expect("shard");
                    }
                    std::hint::black_box(
                        coder
                            .decode()
                            .expect("decode")
                            .restored_original_iter()
                            .count(),
                    );
                }
                t.elapsed()
            });
            Some((enc, dec))
        }
    }
}
