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
pub fn mul_add(dst: &mut [u8], src: &[u8], c: u8) {
    let dst = &mut dst[..src.len()];
    match c {
        0 => {}
        1 => xor_into(dst, src),
        _ => {
            let row = &MUL[usize::from(c)];
            for (d, &s) in dst.iter_mut().zip(src) {
                *d ^= row[usize::from(s)];
            }
        }
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
