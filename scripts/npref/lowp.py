# SPDX-License-Identifier: MIT
"""npref.lowp: LowpCheck, one <transform>.<engine>.safetensors at a time
recomputed from its model's weights and compared bit for bit."""

import os

import numpy as np

from .formats import FORMATS, PLAIN, round_to, round_to_neighbours
from .quant import Rule, as_int8, bits_equal, quantize
from .tensorfile import InputError, read_safetensors


class LowpCheck:
    """The engine files of a dump, one at a time (file), with counts of what
    was recomputed; the models' files they derive from are read once."""

    def __init__(self, d):
        self.dir = d
        self.files = self.failed = self.tensors = self.rules = 0
        self.values = self.codes = self.groups = self.ties = 0
        self.cache = {}

    def load(self, name):
        if name not in self.cache:
            self.cache[name] = read_safetensors(os.path.join(self.dir, name), raw=True)
        return self.cache[name]

    def fail(self, label, msg):
        print(f"  FAIL {label}: {msg}")
        self.failed += 1

    def diff(self, label, name, got, want, what):
        """Report the first differing entry of got vs want (same shape)."""
        bad = ~(bits_equal(got, want) if got.dtype == np.float32 else got == want)
        if not bad.any():
            return True
        at = tuple(int(i) for i in np.argwhere(bad)[0])
        self.fail(label, f"{name}: {int(bad.sum())} of {bad.size} {what} differ, first at "
                  f"{list(at)}: dumped {got[at]!r}, recomputed {want[at]!r}")
        return False

    def file(self, path):
        """Check one <transform>.<engine>.safetensors: (ok, transform, engine,
        the quantized linears' weights, case)."""
        base = os.path.basename(path)
        t, meta = read_safetensors(path, raw=True)
        for k in ("engine", "transform", "weights", "compute", "weights_from",
                  "linear_weights"):
            if k not in meta:
                raise InputError(f"{path}: metadata '{k}' missing")
        xf, eng = meta["transform"], meta["engine"]
        label = f"{xf}.{eng}"
        if base != f"{label}.safetensors":
            raise InputError(f"{path}: metadata says transform '{xf}', engine '{eng}'")
        src_name = "original.safetensors" if xf == "none" else f"{xf}.safetensors"
        src, _ = self.load(src_name)
        hp = None
        f64_name = f"{xf}.f64.safetensors"
        if meta["weights_from"] == "unrounded" and os.path.exists(
                os.path.join(self.dir, f64_name)):
            hp, _ = self.load(f64_name)
        if meta["compute"] not in PLAIN:
            raise InputError(f"{path}: compute '{meta['compute']}' not supported")
        elem = FORMATS[meta["compute"]]
        wplain = FORMATS.get(meta["weights"]) if meta["weights"] in PLAIN else None
        rule = None if wplain else Rule(meta["weights"])
        lin = set(filter(None, meta["linear_weights"].split(",")))
        want = set()
        ok = True
        for name, w in src.items():
            if name == "readout.q" or name.startswith("hadamard.base."):
                continue   # the readout map, a fast Hadamard's base: not weights
            want.add(name)
            if name not in t:
                self.fail(label, f"tensor '{name}' missing")
                ok = False
                continue
            got = t[name]
            if got.dtype != np.float32 or got.shape != w.shape:
                self.fail(label, f"{name}: {got.dtype} {list(got.shape)}, expected float32 "
                          f"{list(w.shape)}")
                ok = False
                continue
            self.tensors += 1
            self.values += w.size
            if name in lin and rule:
                self.rules += 1
                ok &= self.check_rule(label, name, t, w, rule, want)
                continue
            fmt = wplain if name in lin else elem
            ok &= self.check_round(label, name, got, w, hp.get(name) if hp else None, fmt)
        for name in lin - want:
            self.fail(label, f"metadata linear_weights names '{name}', which "
                      f"{src_name} does not hold")
            ok = False
        extra = sorted(set(t) - want)
        if extra:
            self.fail(label, f"tensors not expected: {', '.join(extra[:5])}")
            ok = False
        self.files += 1
        return ok, xf, eng, lin, meta.get("case", "?")

    def check_round(self, label, name, got, w32, w64, fmt):
        """A tensor stored in a plain format: the float32 value as it is
        (float32), else the unrounded value (the float64 copy) or the float32
        one rounded once to fmt.

        The float64 copy is the unrounded value rounded to double, which
        decides its rounding to fmt except at an exact midpoint of fmt, where
        the unrounded value may have been on either side: there either
        neighbour is taken (and counted). A tensor whose float64 copy is its
        float32 copy everywhere has no unrounded values of its own (the
        transform left it alone; one computed in MPFR would land within
        2^-53 of a float32 at every value with odds of 2^-29 each): its
        midpoints are ties, rounded to even."""
        if fmt.p >= 24:
            return self.diff(label, name, got, w32, "values")
        if w64 is None or np.array_equal(w64, w32.astype(np.float64)):
            return self.diff(label, name, got, round_to(fmt, w32).astype(np.float32), "values")
        lo, hi, tie = round_to_neighbours(fmt, w64)
        want = round_to(fmt, w64).astype(np.float32)
        alt = np.where(bits_equal(got, lo.astype(np.float32)), lo, hi).astype(np.float32)
        want = np.where(tie, alt, want).astype(np.float32)
        self.ties += int(tie.sum())
        return self.diff(label, name, got, want, "values")

    def check_rule(self, label, name, t, w, rule, want):
        if w.ndim != 2:
            self.fail(label, f"{name}: a quantized linear's weight of shape {list(w.shape)}")
            return False
        deq, codes, scale, zero, tscale = quantize(rule, w)
        parts = [(".qcodes", np.int8, w.shape), (".qscale", np.float32, scale.shape)]
        if zero is not None:
            parts.append((".qzero", np.int32, zero.shape))
        if tscale is not None:
            parts.append((".qtensor_scale", np.float32, (1,)))
        got = {}
        for suffix, dt, shape in parts:
            want.add(name + suffix)
            a = t.get(name + suffix)
            if a is None or a.dtype != dt or a.shape != tuple(shape):
                self.fail(label, f"{name}{suffix}: " + ("missing" if a is None else
                          f"{a.dtype} {list(a.shape)}, expected {np.dtype(dt)} {list(shape)}"))
                return False
            got[suffix] = a
        ok = self.diff(label, name, t[name], deq.reshape(w.shape), "dequantized values")
        ok &= self.diff(label, name + ".qcodes", got[".qcodes"].astype(np.int64),
                        as_int8(codes).reshape(w.shape), "codes")
        ok &= self.diff(label, name + ".qscale", got[".qscale"], scale, "scales")
        if zero is not None:
            ok &= self.diff(label, name + ".qzero", got[".qzero"].astype(np.int64), zero,
                            "zero points")
        if tscale is not None:
            ok &= self.diff(label, name + ".qtensor_scale", got[".qtensor_scale"],
                            np.array([tscale], np.float32), "tensor scales")
        self.codes += codes.size
        self.groups += scale.size
        return ok
