//! GF(2^8) arithmetic (polynomial x^8 + x^4 + x^3 + x^2 + 1 = 0x11D, generator 2), table-driven.

const POLY: u16 = 0x11D;

const fn exp_log() -> ([u8; 512], [u8; 256]) {
    let mut exp = [0u8; 512];
    let mut log = [0u8; 256];
    let mut x: u16 = 1;
    let mut i = 0;
    while i < 255 {
        exp[i] = x as u8;
        exp[i + 255] = x as u8;
        log[x as usize] = i as u8;
        x <<= 1;
        if x & 0x100 != 0 {
            x ^= POLY;
        }
        i += 1;
    }
    (exp, log)
}

const EXP_LOG: ([u8; 512], [u8; 256]) = exp_log();
const EXP: [u8; 512] = EXP_LOG.0;
const LOG: [u8; 256] = EXP_LOG.1;

const fn mul_slow(a: u8, b: u8) -> u8 {
    if a == 0 || b == 0 {
        0
    } else {
        EXP[LOG[a as usize] as usize + LOG[b as usize] as usize]
    }
}

const fn mul_table() -> [[u8; 256]; 256] {
    let mut t = [[0u8; 256]; 256];
    let mut a = 0;
    while a < 256 {
        let mut b = 0;
        while b < 256 {
            t[a][b] = mul_slow(a as u8, b as u8);
            b += 1;
        }
        a += 1;
    }
    t
}

/// `MUL[a][b] = a * b`; one 256-byte row per coefficient keeps the inner loop a plain lookup.
static MUL: [[u8; 256]; 256] = mul_table();

pub fn mul(a: u8, b: u8) -> u8 {
    MUL[usize::from(a)][usize::from(b)]
}

/// Multiplicative inverse; `inv(0)` is 0 (callers never divide by zero).
pub fn inv(a: u8) -> u8 {
    if a == 0 {
        0
    } else {
        EXP[255 - usize::from(LOG[usize::from(a)])]
    }
}

/// `dst[i] ^= c * src[i]` over the common length (dst must be at least as long as src).
#[inline]
pub fn mul_add(dst: &mut [u8], src: &[u8], c: u8) {
    let dst = &mut dst[..src.len()];
    match c {
        0 => {}
        1 => xor_into(dst, src),
        _ => {
            let done = simd::mul_add(dst, src, c);
            let row = &MUL[usize::from(c)];
            for (d, &s) in dst[done..].iter_mut().zip(&src[done..]) {
                *d ^= row[usize::from(s)];
            }
        }
    }
}

/// Nibble tables of `c`: `c * x` and `c * (x << 4)` for x < 16 (a product is the XOR of both).
#[inline]
fn nibble_tables(c: u8) -> ([u8; 16], [u8; 16]) {
    let row = &MUL[usize::from(c)];
    let mut lo = [0u8; 16];
    let mut hi = [0u8; 16];
    for x in 0..16 {
        lo[x] = row[x];
        hi[x] = row[x << 4];
    }
    (lo, hi)
}

#[cfg(target_arch = "x86_64")]
mod simd {
    use std::arch::x86_64::*;
    use std::sync::OnceLock;

    #[inline]
    fn has_avx2() -> bool {
        static AVX2: OnceLock<bool> = OnceLock::new();
        *AVX2.get_or_init(|| is_x86_feature_detected!("avx2"))
    }

    /// `dst ^= c * src` on the longest prefix that is a multiple of 32 bytes, with AVX2 byte
    /// shuffles as 16-entry table lookups; returns how many bytes it did (0 without AVX2).
    #[inline]
    pub fn mul_add(dst: &mut [u8], src: &[u8], c: u8) -> usize {
        if src.len() < 32 || !has_avx2() {
            return 0;
        }
        let (lo, hi) = super::nibble_tables(c);
        // SAFETY: AVX2 is present (checked above); dst is at least as long as src.
        unsafe { mul_add_avx2(&mut dst[..src.len()], src, &lo, &hi) }
    }

    #[target_feature(enable = "avx2")]
    unsafe fn mul_add_avx2(dst: &mut [u8], src: &[u8], lo: &[u8; 16], hi: &[u8; 16]) -> usize {
        let n = src.len() / 32 * 32;
        let lo = _mm256_broadcastsi128_si256(_mm_loadu_si128(lo.as_ptr().cast()));
        let hi = _mm256_broadcastsi128_si256(_mm_loadu_si128(hi.as_ptr().cast()));
        let mask = _mm256_set1_epi8(0x0f);
        let mut i = 0;
        while i < n {
            // SAFETY: i + 32 <= n <= src.len() == dst.len(); unaligned loads and stores.
            unsafe {
                let s = _mm256_loadu_si256(src.as_ptr().add(i).cast());
                let l = _mm256_and_si256(s, mask);
                let h = _mm256_and_si256(_mm256_srli_epi64(s, 4), mask);
                let p = _mm256_xor_si256(_mm256_shuffle_epi8(lo, l), _mm256_shuffle_epi8(hi, h));
                let d = _mm256_loadu_si256(dst.as_ptr().add(i).cast());
                _mm256_storeu_si256(dst.as_mut_ptr().add(i).cast(), _mm256_xor_si256(d, p));
            }
            i += 32;
        }
        n
    }
}

#[cfg(not(target_arch = "x86_64"))]
mod simd {
    pub fn mul_add(_dst: &mut [u8], _src: &[u8], _c: u8) -> usize {
        0
    }
}

/// `data[i] = c * data[i]`.
pub fn scale(data: &mut [u8], c: u8) {
    if c != 1 {
        let row = &MUL[usize::from(c)];
        for d in data {
            *d = row[usize::from(*d)];
        }
    }
}

/// `dst[i] ^= src[i]`, eight bytes at a time.
pub fn xor_into(dst: &mut [u8], src: &[u8]) {
    let n = dst.len().min(src.len());
    let (dst, src) = (&mut dst[..n], &src[..n]);
    let mut d_chunks = dst.chunks_exact_mut(8);
    let mut s_chunks = src.chunks_exact(8);
    for (d, s) in (&mut d_chunks).zip(&mut s_chunks) {
        let x = u64::from_ne_bytes(d[..8].try_into().unwrap())
            ^ u64::from_ne_bytes(s[..8].try_into().unwrap());
        d.copy_from_slice(&x.to_ne_bytes());
    }
    for (d, s) in d_chunks
        .into_remainder()
        .iter_mut()
        .zip(s_chunks.remainder())
    {
        *d ^= s;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn field_axioms() {
        for a in 0..=255u8 {
            assert_eq!(mul(a, 1), a);
            assert_eq!(mul(a, 0), 0);
            if a != 0 {
                assert_eq!(mul(a, inv(a)), 1, "a = {a}");
            }
            for b in [1u8, 2, 3, 29, 142, 255] {
                assert_eq!(mul(a, b), mul(b, a));
                // distributive over xor
                assert_eq!(mul(a, b ^ 7), mul(a, b) ^ mul(a, 7));
            }
        }
        // 2^8 = x^4 + x^3 + x^2 + 1
        assert_eq!(mul(0x80, 2), 0x1D);
    }

    #[test]
    fn vector_and_scalar_paths_agree() {
        for len in [0usize, 1, 31, 32, 33, 100, 1203] {
            let src: Vec<u8> = (0..len).map(|i| (i * 131 + 7) as u8).collect();
            for c in [2u8, 3, 29, 200, 255] {
                let mut fast = vec![0x5Au8; len];
                mul_add(&mut fast, &src, c);
                let slow: Vec<u8> = src.iter().map(|&s| 0x5A ^ mul(c, s)).collect();
                assert_eq!(fast, slow, "len {len} c {c}");
            }
        }
    }

    #[test]
    fn slices() {
        let src: Vec<u8> = (0..37).map(|i| (i * 7 + 3) as u8).collect();
        let mut dst = vec![0u8; 40];
        mul_add(&mut dst, &src, 5);
        mul_add(&mut dst, &src, 5);
        assert!(dst.iter().all(|&b| b == 0));
        mul_add(&mut dst, &src, 1);
        assert_eq!(&dst[..37], &src[..]);
        scale(&mut dst, 9);
        scale(&mut dst, inv(9));
        assert_eq!(&dst[..37], &src[..]);
    }
}
