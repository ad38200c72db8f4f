# SPDX-License-Identifier: MIT
"""npref.quant: the scale rules of src/base/quant.h re-implemented in NumPy
float32 arithmetic (int4/int8, fp8, mxfp4, nvfp4)."""

import numpy as np

from .formats import FORMATS, pattern, round_to
from .tensorfile import InputError


class Rule:
    """A scale rule (quant.h) parsed like cic_quant_parse."""

    def __init__(self, text):
        self.text = text
        self.gran, self.group, self.sym = "row", 128, True
        self.clip = np.float32(1.0)
        self.fmt = None
        if text in ("mxfp4", "nvfp4"):
            self.scheme, self.bits = text, 4
            self.gran, self.group = "group", 32 if text == "mxfp4" else 16
            return
        parts = text.split(":")
        if parts[0] in ("int4", "int8"):
            self.scheme, self.bits = "int", int(parts[0][3])
        elif parts[0] in ("fp8-e4m3", "fp8-e5m2"):
            self.scheme, self.bits, self.fmt = "fp8", 8, FORMATS[parts[0]]
        else:
            raise InputError(f"scale rule '{text}' not understood")
        for o in parts[1:]:
            if o == "tensor":
                self.gran = "tensor"
            elif o in ("channel", "token"):
                self.gran = "row"
            elif o in ("sym", "asym"):
                self.sym = o == "sym"
            elif o.startswith("group"):
                self.gran, self.group = "group", int(o[5:]) if o[5:] else 128
            elif o.startswith("clip"):
                # strtod, then the cast to float: both round to nearest
                self.clip = np.float32(float(o[4:]))
            else:
                raise InputError(f"scale rule '{text}': option '{o}' not understood")

    def group_len(self, rows, cols):
        return {"tensor": rows * cols, "row": cols}.get(self.gran, self.group)


F32 = np.float32


def c_fmax(a, b):
    """C's fmaxf as glibc computes it: NaN ignored, a when a >= b (so
    fmaxf(+0, -0) is +0 and fmaxf(-0, +0) is -0; NumPy's fmax returns b)."""
    return np.where(np.isnan(b) | (a >= b), a, b).astype(np.float32)


def group_lo(g):
    """Per row of g, lo = fminf(lo, x) over the row from lo = +0: the least
    value when it is negative, else +0 (never -0: an equal x leaves lo)."""
    r = np.fmin.reduce(g, axis=1) if g.shape[1] else np.zeros(g.shape[0], np.float32)
    return np.where(r < 0, r, F32(0)).astype(np.float32)


def group_hi(g):
    """The same with fmaxf: the largest value when positive, else +0."""
    r = np.fmax.reduce(g, axis=1) if g.shape[1] else np.zeros(g.shape[0], np.float32)
    return np.where(r > 0, r, F32(0)).astype(np.float32)


def quantize(rule, x):
    """cic_quant_matrix on x (float32 [rows, cols]): (deq float32 [rows, cols],
    codes int64 [rows, cols], scale float32 [groups], zero int64 [groups] or
    None, tensor scale float32 or None), groups in row-major order."""
    rows, cols = x.shape
    n = rule.group_len(rows, cols)
    if cols % n and rule.gran == "group":
        raise InputError(f"rule '{rule.text}': a group of {n} does not divide {cols}")
    g = x.reshape(-1, n) if x.size else x.reshape(0, n)
    zero = tscale = None
    if rule.scheme == "int":
        lo, hi = group_lo(g), group_hi(g)
        if rule.sym:
            qmax = 2 ** (rule.bits - 1) - 1
            qmin = -qmax - 1
            # an all-zero group: fmaxf(+0, -0) = +0, a scale of +0
            s = rule.clip * c_fmax(hi, -lo) / F32(qmax)
            z = np.zeros(s.shape, dtype=np.float32)
        else:
            qmin, qmax = 0, 2 ** rule.bits - 1
            lo, hi = lo * rule.clip, hi * rule.clip
            s = (hi - lo) / F32(qmax)
            z = np.where(s > 0, np.fmin(np.fmax(np.rint(-lo / s), F32(0)), F32(qmax)),
                         F32(0)).astype(np.float32)
            zero = z.astype(np.int64)
        c = np.fmin(np.fmax(np.rint(g / s[:, None]) + z[:, None], F32(qmin)), F32(qmax))
        c = np.where(s[:, None] > 0, c, z[:, None]).astype(np.int64)
        deq = np.where(s[:, None] > 0, (c - z[:, None].astype(np.int64)).astype(np.float32)
                       * s[:, None], F32(0))
    elif rule.scheme == "fp8":
        f = rule.fmt
        fmax = F32(f.max)
        amax = group_hi(np.abs(g))
        s = rule.clip * amax / fmax
        v = round_to(f, (g / s[:, None]).astype(np.float64))
        v = np.where(v > fmax, f.max, np.where(v < -fmax, -f.max, v))  # NaN stays NaN
        v = np.where(s[:, None] > 0, v, 0.0)
        c = pattern(f, v)
        deq = v.astype(np.float32) * s[:, None]
    elif rule.scheme == "mxfp4":
        fp4 = FORMATS["fp4-e2m1"]
        amax = group_hi(np.abs(g))
        _, k = np.frexp(amax)
        e = np.where(amax > 0, np.clip(k - 1 - 2, -127, 127), -127).astype(np.int32)
        s = np.ldexp(F32(1), e)
        v = round_to(fp4, np.ldexp(g, -e[:, None]).astype(np.float64))
        c = pattern(fp4, v)
        deq = np.ldexp(v.astype(np.float32), e[:, None])
    else:  # nvfp4
        fp4, e4m3 = FORMATS["fp4-e2m1"], FORMATS["fp8-e4m3"]
        ta = group_hi(np.abs(x).reshape(1, -1))[0]
        t = ta / (F32(448) * F32(6)) if ta > 0 else F32(1)
        tscale = F32(t)
        amax = group_hi(np.abs(g))
        s = round_to(e4m3, (amax / F32(6) / t).astype(np.float64)).astype(np.float32)
        d = s * t
        v = np.where(s[:, None] > 0, round_to(fp4, (g / d[:, None]).astype(np.float64)), 0.0)
        c = pattern(fp4, v)
        deq = v.astype(np.float32) * s[:, None] * t
    for a in (deq, s):
        assert a.dtype == np.float32, a.dtype
    return (deq.reshape(rows, cols), c.reshape(rows, cols), s.astype(np.float32), zero,
            tscale)


def bits_equal(a, b):
    """Bit-pattern equality of two float32 arrays (+0 and -0 differ, NaN
    equals itself)."""
    return np.asarray(a, np.float32).view(np.uint32) == np.asarray(b, np.float32).view(np.uint32)


def as_int8(codes):
    """Codes as the dump stores them: their 8-bit pattern as int8."""
    return ((codes & 0xFF) ^ 0x80).astype(np.int64) - 0x80
