"""Arithmetic whose results are the same on every CPU: the planner's only source of numbers.

IEEE 754 defines +, −, ×, ÷ and √ exactly (the correctly rounded result), so a numpy ufunc doing one
of them gives the same bits on every x86-64 and arm64 machine, whatever vector unit runs it; each
call is one operation per element, so no compiler can fuse a multiply and an add. Logarithms, powers
and exponentials are not defined that way: numpy picks a loop by CPU (on AVX-512 machines `power`
is Intel's SVML, whose last bit differs from the C library's; `exp` and `log` have AVX2 and AVX-512
loops of their own), and the C library picks FMA variants by CPU too. The design pinned on an AVX-512
machine was exactly this machine's (AVX2) design but for one log-scaled value, `low * (high / low) ** u`
= 6.177158672440226 there, 6.1771586724402265 here (the exact power lies 0.448 ulp below the
correctly rounded one, which glibc returns and SVML does not): a different hash, other run keys.

So the planner uses only the exact operations above and:
- `exp`, `log`, `log10`, `power`: fecbench's own, built from exact operations in a fixed order
  (a few units in the last place from the true value, and the same bits everywhere);
- `round_significant`: every computed design value is rounded to SIGNIFICANT_DIGITS significant
  digits before it is written, keyed or hashed;
- `lattice`: unit coordinates are multiples of 2^-LATTICE_BITS, so that every squared distance
  between points (sums of squares of integers times 2^-2·LATTICE_BITS, below 2^53 units) is exact
  in float64, in whatever order or with whatever fused operations compiled code (scipy's KD-tree)
  sums it.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

SIGNIFICANT_DIGITS = 9
LATTICE_BITS = 20
LATTICE_STEP = 2.0 ** -LATTICE_BITS

# ln 2 split so that k * LN2_HI is exact for |k| < 2^20 (fdlibm's constants), and its rest.
LN2_HI = 6.93147180369123816490e-01
LN2_LO = 1.90821492927058770002e-10
INV_LN2 = 1.44269504088896338700e+00
LN10 = 2.302585092994045684      # the double nearest ln 10
SQRT_HALF = 0.7071067811865476
EXP_TERMS = [1.0 / math.factorial(i) for i in range(15)]   # Taylor series of exp on |r| <= ln(2)/2
ATANH_TERMS = [1.0 / (2 * i + 1) for i in range(13)]       # 2 atanh(s) = 2 (s + s^3/3 + ...), |s| <= 0.172
# Powers of ten parsed from text (correctly rounded) to find a value's decimal exponent without a logarithm.
_POW10_MIN = -330
_POW10 = np.array([float(f"1e{k}") for k in range(_POW10_MIN, 310)])


def _out(result: np.ndarray, like: Any) -> Any:
    return result if np.ndim(like) else float(result)


def exp(x: Any) -> Any:
    """e^x, from exact operations only: x = k ln 2 + r, e^r by its Taylor series, times 2^k."""
    x = np.asarray(x, dtype=float)
    with np.errstate(invalid="ignore", over="ignore"):
        clipped = np.clip(np.nan_to_num(x, nan=0.0), -800.0, 800.0)   # beyond: 0 or inf anyway
        k = np.rint(clipped * INV_LN2)
        r = (clipped - k * LN2_HI) - k * LN2_LO
        p = np.full_like(r, EXP_TERMS[-1])
        for c in reversed(EXP_TERMS[:-1]):
            p = p * r + c
        result = np.ldexp(p, k.astype(np.int64))
    result = np.where(np.isnan(x), np.nan, result)
    return _out(result, x)


def log(x: Any) -> Any:
    """Natural logarithm from exact operations only: x = m 2^e (m in [√½, √2)), ln m = 2 atanh((m-1)/(m+1))."""
    x = np.asarray(x, dtype=float)
    with np.errstate(invalid="ignore", divide="ignore"):
        safe = np.where(np.isfinite(x) & (x > 0), x, 1.0)
        m, e = np.frexp(safe)
        small = m < SQRT_HALF
        m = np.where(small, m * 2.0, m)
        e = (e - small).astype(float)
        f = m - 1.0
        s = f / (m + 1.0)
        s2 = s * s
        q = np.full_like(s, ATANH_TERMS[-1])
        for c in reversed(ATANH_TERMS[:-1]):
            q = q * s2 + c
        result = e * LN2_HI + ((s + s) * q + e * LN2_LO)
        result = np.where(x == 0, -np.inf, result)
        result = np.where((x < 0) | np.isnan(x), np.nan, result)
        result = np.where(x == np.inf, np.inf, result)
    return _out(result, x)


def log10(x: Any) -> Any:
    """log(x) / ln 10, exact at the powers of ten from 1e-22 to 1e22 (a constraint like log10(x) >= 3
    must hold at x = 1000)."""
    x = np.asarray(x, dtype=float)
    result = np.asarray(log(x)) / LN10
    exact = _POW10[-22 - _POW10_MIN:23 - _POW10_MIN]
    k = np.clip(np.searchsorted(exact, x), 0, len(exact) - 1)
    result = np.where(exact[k] == x, (k - 22).astype(float), result)
    return _out(result, x)


def power(x: Any, y: Any) -> Any:
    """x ** y: by repeated multiplication for a whole exponent up to 64, √ for 0.5 (so that
    4 ** 0.5 == 2 exactly), else e^(y ln x)."""
    if isinstance(x, int) and isinstance(y, int) and not isinstance(x, bool) and y >= 0:
        return x ** y  # exact integer arithmetic
    if np.ndim(y) == 0 and float(y) == 0.5:
        with np.errstate(invalid="ignore"):
            return _out(np.sqrt(np.asarray(x, dtype=float)), x)
    if np.ndim(y) == 0 and float(y).is_integer() and abs(float(y)) <= 64:
        n = int(abs(float(y)))
        base = np.asarray(x, dtype=float)
        result = np.ones_like(base)
        while n:
            if n & 1:
                result = result * base
            base = base * base
            n >>= 1
        with np.errstate(divide="ignore"):
            result = 1.0 / result if float(y) < 0 else result
        return _out(result, x)
    xa, ya = np.broadcast_arrays(np.asarray(x, dtype=float), np.asarray(y, dtype=float))
    whole = np.floor(ya) == ya
    magnitude = np.asarray(exp(ya * np.asarray(log(np.abs(xa)))))
    odd = whole & (np.remainder(ya, 2.0) == 1.0)
    result = np.where(xa < 0, np.where(whole, np.where(odd, -magnitude, magnitude), np.nan), magnitude)
    return _out(result, xa if np.ndim(x) or np.ndim(y) else 0.0)


def round_significant(x: Any, digits: int = SIGNIFICANT_DIGITS) -> np.ndarray:
    """Each value rounded to `digits` significant decimal digits (the double nearest that decimal
    where its exponent is within ±22 of the digits, so it prints as that decimal). Exact operations
    only: the decimal exponent comes from comparisons with powers of ten, not from a logarithm."""
    x = np.asarray(x, dtype=float)
    out = x.copy()
    todo = np.isfinite(x) & (x != 0)
    a = np.abs(x[todo])
    exponent = np.searchsorted(_POW10, a, side="right") - 1 + _POW10_MIN   # 10^e <= a < 10^(e+1)
    shift = digits - 1 - exponent                                          # a * 10^shift has `digits` digits
    rounded = np.empty_like(a)
    up = (shift >= 0) & (shift <= 22)       # 10^shift exact: one rounding in, one exact rint, one out
    down = (shift < 0) & (shift >= -22)
    scale_up = _POW10[np.clip(shift, 0, 22) - _POW10_MIN]
    scale_down = _POW10[np.clip(-shift, 0, 22) - _POW10_MIN]
    rounded[up] = np.rint(a[up] * scale_up[up]) / scale_up[up]
    rounded[down] = np.rint(a[down] / scale_down[down]) * scale_down[down]
    rest = ~(up | down)                     # below 1e-14 or above 1e30: Python's exact formatting
    rounded[rest] = [float(f"{v:.{digits - 1}e}") for v in a[rest].tolist()]
    out[todo] = np.copysign(rounded, x[todo])
    return out


def lattice(u: Any) -> np.ndarray:
    """Unit coordinates rounded to multiples of 2^-LATTICE_BITS (exact operations)."""
    return np.rint(np.asarray(u, dtype=float) * 2.0 ** LATTICE_BITS) * LATTICE_STEP


def lattice_half_sqrt2() -> float:
    """The lattice coordinate nearest 1/√2: a choice level's one-hot coordinate, so that two levels
    are at distance (nearly) 1 and every distance stays exact."""
    target = 2 ** (2 * LATTICE_BITS - 1)            # (2^LATTICE_BITS / √2)^2
    c = math.isqrt(target)
    if (c + 1) ** 2 - target < target - c * c:
        c += 1
    return c * LATTICE_STEP
