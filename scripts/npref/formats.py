# SPDX-License-Identifier: MIT
"""npref.formats: the binary formats of src/base/format.c and rounding to
them (ties to even), their neighbours and bit patterns."""

import math

import numpy as np

# Every <transform>.<engine>.safetensors (metadata "engine") is recomputed
# from the dumped float32 weights of its model (<transform>.safetensors,
# original.safetensors for "none") by src/base/quant.h's rules, in NumPy
# float32 arithmetic (every operation on float32 arrays and float32
# scalars, rounded to nearest even as C's float operations are), and the
# dequantized values, codes, scales, zero points and tensor scales must
# agree bit for bit. Roundings to a format are done on float64 values,
# which hold every float32 and every value of the small formats exactly.


class Fmt:
    """A binary format as src/base/format.c describes it."""

    def __init__(self, name, bits, p, emin, emax, infinities, top_reserved):
        self.name, self.bits, self.p = name, bits, p
        self.emin, self.emax = emin, emax
        self.infinities, self.top_reserved = infinities, top_reserved
        # (2^p - 1 - r) 2^(emax - p + 1): 448 for E4M3, 57344 for E5M2, 6 for E2M1
        self.max = math.ldexp(2 ** p - 1 - top_reserved, emax - p + 1)


FORMATS = {f.name: f for f in (
    Fmt("float32", 32, 24, -126, 127, True, 0),
    Fmt("bf16", 16, 8, -126, 127, True, 0),
    Fmt("fp16", 16, 11, -14, 15, True, 0),
    Fmt("fp8-e4m3", 8, 4, -6, 8, False, 1),
    Fmt("fp8-e5m2", 8, 3, -14, 15, True, 0),
    Fmt("fp4-e2m1", 4, 2, 0, 2, False, 0))}
PLAIN = ("float32", "bf16", "fp16")


def _grid(f, a):
    """For |x| = a > 0 (float64): log2 of f's spacing at a (the binade's, or
    the subnormals' below 2^emin)."""
    _, k = np.frexp(a)           # a = m 2^k, m in [1/2, 1): floor(log2 a) = k - 1
    return np.maximum(k - 1, f.emin) - (f.p - 1)


def _settle(f, r):
    """Magnitudes r on f's grid, past the largest finite value: Inf, or the
    largest finite value where f has no infinities (format.c)."""
    over = r > f.max
    r[over] = np.inf if f.infinities else f.max
    return r


def round_to(f, x):
    """x (float64) rounded once to f, ties to even, subnormals, overflow to
    Inf or saturation; signed zeros, NaN and Inf kept (cic_format_round)."""
    x = np.asarray(x, dtype=np.float64)
    out = x.copy()
    m = np.isfinite(x) & (x != 0)
    a = np.abs(x[m])
    e = _grid(f, a)
    r = _settle(f, np.ldexp(np.rint(np.ldexp(a, -e)), e))   # exact scalings
    out[m] = np.copysign(r, x[m])
    return out


def round_to_neighbours(f, x):
    """(lo, hi, tie): x's two neighbours in f (as round_to gives them) and
    whether x is exactly halfway between them. A float64 copy d of an
    unrounded value u decides u's rounding except when d is such a midpoint:
    then u may have been on either side of it."""
    x = np.asarray(x, dtype=np.float64)
    lo, hi = x.copy(), x.copy()
    tie = np.zeros(x.shape, dtype=bool)
    m = np.isfinite(x) & (x != 0)
    a = np.abs(x[m])
    e = _grid(f, a)
    q = np.ldexp(a, -e)
    fl = np.floor(q)
    tie[m] = q - fl == 0.5
    lo[m] = np.copysign(_settle(f, np.ldexp(fl, e)), x[m])
    hi[m] = np.copysign(_settle(f, np.ldexp(fl + 1, e)), x[m])
    return lo, hi, tie


def pattern(f, v):
    """The bit pattern of values v of f (float64): the ordered integer of
    |v| (format.c: subnormals k 2^(emin-p+1) are k, binade E holds
    (E - emin + 1) 2^(p-1) + j), sign in the top bit, Inf the code after the
    largest finite value, NaN the all-ones S.1111111 (fp8)."""
    v = np.asarray(v, dtype=np.float64)
    a = np.abs(v)
    code = np.zeros(v.shape, dtype=np.int64)
    fin = np.isfinite(a) & (a > 0)
    af = a[fin]
    _, k = np.frexp(af)
    E = k - 1
    sub = E < f.emin
    half = 2 ** (f.p - 1)
    j = np.where(sub, np.ldexp(af, -(f.emin - f.p + 1)),
                 (E - f.emin + 1) * half + (np.ldexp(af, -(E - f.p + 1)) - half))
    code[fin] = j.astype(np.int64)
    if np.isinf(a).any():
        code[np.isinf(a)] = int(pattern(f, np.array([f.max]))[0]) + 1
    code[np.isnan(a)] = 2 ** (f.bits - 1) - 1
    return code | np.where(np.signbit(v), 2 ** (f.bits - 1), 0)
