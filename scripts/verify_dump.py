#!/usr/bin/python3
"""verify_dump.py: independent float64 re-run of a `cicheck run --dump DIR`.

Rebuilds each dumped transformer block in NumPy float64 from the math in
DESIGN.md section 1 (not from the C engines) and compares it with the MPFR
truth that cicheck wrote to DIR/outputs.safetensors.

  verify_dump.py DIR [--rtol 1e-12] [--xf-equiv 1e-5] [--xf-differs 1e-3]

Checks:
  original  DIR/original.safetensors re-run in float64 must reproduce
            outputs["truth"] within rtol (2-norm relative).
  transform every DIR/<name>.f64.safetensors (the transformed weights as
            cicheck computed them, unrounded, stored as float64) is re-run in
            float64 and compared with truth: a transform whose metadata says
            expect = equivalent must reproduce truth within rtol; one that
            expects broken must differ by more than --xf-differs. A residual
            readout is mapped back with the dumped "readout.q" (y Q^T) and
            centered when metadata readout.center is true.

Exit status: 0 the original reproduces truth, 1 it does not, 2 unreadable
input (missing file, malformed safetensors, missing tensor or metadata).

Needs only NumPy (Debian python3-numpy); safetensors are parsed by hand.
"""

import argparse
import glob
import json
import math
import os
import struct
import sys

import numpy as np

PROG = "verify_dump"


class InputError(Exception):
    """The dump cannot be read or is not what a cicheck dump should be."""


# ---------------------------------------------------------------- safetensors

_DTYPES = {"F32": np.dtype("<f4"), "F64": np.dtype("<f8")}


def read_safetensors(path):
    """Return ({name: float64 ndarray}, {metadata key: str})."""
    try:
        with open(path, "rb") as f:
            blob = f.read()
    except OSError as e:
        raise InputError(f"{path}: cannot read: {e.strerror}")
    if len(blob) < 8:
        raise InputError(f"{path}: too short for a safetensors file")
    (hlen,) = struct.unpack("<Q", blob[:8])
    if hlen > len(blob) - 8:
        raise InputError(f"{path}: header length {hlen} exceeds the file size")
    try:
        header = json.loads(blob[8:8 + hlen].decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise InputError(f"{path}: malformed JSON header: {e}")
    if not isinstance(header, dict):
        raise InputError(f"{path}: header is not a JSON object")
    data = memoryview(blob)[8 + hlen:]
    meta = header.pop("__metadata__", {}) or {}
    if not isinstance(meta, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in meta.items()):
        raise InputError(f"{path}: __metadata__ is not a string map")
    tensors = {}
    for name, info in header.items():
        try:
            dtype = info["dtype"]
            shape = [int(s) for s in info["shape"]]
            begin, end = (int(o) for o in info["data_offsets"])
        except (KeyError, TypeError, ValueError):
            raise InputError(f"{path}: tensor '{name}': malformed header entry")
        if dtype not in _DTYPES:
            raise InputError(f"{path}: tensor '{name}': dtype {dtype} "
                             "not supported (F32 or F64 expected)")
        dt = _DTYPES[dtype]
        count = int(np.prod(shape)) if shape else 1
        if not (0 <= begin <= end <= len(data)) or end - begin != count * dt.itemsize:
            raise InputError(f"{path}: tensor '{name}': data_offsets [{begin}, {end}] "
                             f"do not fit shape {shape} {dtype} "
                             f"(data section is {len(data)} bytes)")
        arr = np.frombuffer(data[begin:end], dtype=dt).astype(np.float64)
        tensors[name] = arr.reshape(shape)
    return tensors, meta


# ---------------------------------------------------------------- config

class Cfg:
    def __init__(self, meta, path):
        def need(key):
            if key not in meta:
                raise InputError(f"{path}: metadata '{key}' missing")
            return meta[key]

        def integer(key):
            try:
                v = int(need(key))
            except ValueError:
                raise InputError(f"{path}: metadata '{key}' = '{meta[key]}' "
                                 "is not an integer")
            if v <= 0:
                raise InputError(f"{path}: metadata '{key}' = {v} must be positive")
            return v

        def boolean(key):
            v = need(key)
            if v not in ("true", "false"):
                raise InputError(f"{path}: metadata '{key}' = '{v}' "
                                 "is not true/false")
            return v == "true"

        self.block = need("block")
        if self.block not in ("preln", "rmsnorm"):
            raise InputError(f"{path}: block '{self.block}' not supported "
                             "(preln or rmsnorm)")
        self.d = integer("d_model")
        self.heads = integer("heads")
        self.tokens = integer("tokens")
        self.samples = integer("samples")
        self.layers = integer("layers")
        self.d_mlp = integer("d_mlp")
        if self.d % self.heads:
            raise InputError(f"{path}: d_model {self.d} not divisible by "
                             f"heads {self.heads}")
        try:
            # eps is the binary32 value the norms use, written as a C hex
            # float ("0x1.4f8b58p-17"): exact.
            v = need("eps")
            self.eps = float.fromhex(v) if "0x" in v.lower() else float(v)
        except ValueError:
            raise InputError(f"{path}: metadata 'eps' = '{meta['eps']}' "
                             "is not a number")
        self.causal = boolean("causal")
        self.act = need("activation")
        if self.act not in ACTS:
            raise InputError(f"{path}: activation '{self.act}' not supported "
                             f"({', '.join(sorted(ACTS))})")
        self.readout = need("readout")
        if self.readout not in ("head", "residual"):
            raise InputError(f"{path}: readout '{self.readout}' not supported")
        self.center = boolean("norm.center")
        self.readout_center = (meta.get("readout.center", "true" if self.block == "preln"
                                        else "false") == "true")


# ---------------------------------------------------------------- the math

_erf = np.vectorize(math.erf, otypes=[np.float64])


def gelu(x):        # 0.5 x (1 + erf(x / sqrt 2))
    return 0.5 * x * (1.0 + _erf(x / math.sqrt(2.0)))


def gelu_tanh(x):   # 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
    return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))


def relu(x):
    return np.maximum(x, 0.0)


def silu(x):        # x sigmoid(x), written to avoid overflow of exp(-x)
    return x * np.where(x >= 0, 1.0 / (1.0 + np.exp(-np.abs(x))),
                        np.exp(-np.abs(x)) / (1.0 + np.exp(-np.abs(x))))


ACTS = {"gelu": gelu, "gelu-tanh": gelu_tanh, "relu": relu, "silu": silu}


class Model:
    """One dumped model: tensors + config; forward() is the float64 re-run."""

    def __init__(self, path):
        self.path = path
        self.t, self.meta = read_safetensors(path)
        self.cfg = Cfg(self.meta, path)
        x = self.get("input")
        c = self.cfg
        if x.shape != (c.samples * c.tokens, c.d):
            raise InputError(f"{path}: 'input' has shape {list(x.shape)}, expected "
                             f"[{c.samples * c.tokens}, {c.d}] "
                             "(samples*tokens, d_model)")

    def get(self, name, shape=None):
        if name not in self.t:
            raise InputError(f"{self.path}: tensor '{name}' missing")
        return self.opt(name, shape)

    def opt(self, name, shape=None):
        a = self.t.get(name)
        if a is not None and shape is not None and a.shape != tuple(shape):
            raise InputError(f"{self.path}: tensor '{name}' has shape "
                             f"{list(a.shape)}, expected {list(shape)}")
        return a

    def linear(self, x, prefix, n_out, n_in):
        """y = x W^T + b, PyTorch layout W [out, in]; bias optional."""
        w = self.get(prefix + ".weight", (n_out, n_in))
        y = x @ w.T
        b = self.opt(prefix + ".bias", (n_out,))
        return y if b is None else y + b

    def norm(self, x, prefix, bias_allowed):
        """LayerNorm (center) or RMSNorm: g * x' / sqrt(mean(x'^2) + eps) + b,
        x' = x - mean(x) when the model centers. Gain/bias optional."""
        d = self.cfg.d
        if self.cfg.center:
            x = x - x.mean(axis=1, keepdims=True)
        y = x / np.sqrt((x * x).mean(axis=1, keepdims=True) + self.cfg.eps)
        # a fused model has no gain/bias tensors: the dump holds only what
        # the graph reads
        g = self.opt(prefix + ".weight", (d,))
        b = self.opt(prefix + ".bias", (d,)) if bias_allowed else None
        if g is not None:
            y = y * g
        if b is not None:
            y = y + b
        return y

    def attention(self, q, k, v):
        """Per sample, per head softmax(q k^T / sqrt(d/h)) v; causal mask."""
        c = self.cfg
        S, N, H, dh = c.samples, c.tokens, c.heads, c.d // c.heads

        def split(a):  # [S*N, d] -> [S, H, N, dh]
            return a.reshape(S, N, H, dh).transpose(0, 2, 1, 3)

        s = split(q) @ split(k).transpose(0, 1, 3, 2) / math.sqrt(dh)
        if c.causal:
            s = np.where(np.tril(np.ones((N, N), dtype=bool)), s, -np.inf)
        s = np.exp(s - s.max(axis=-1, keepdims=True))
        p = s / s.sum(axis=-1, keepdims=True)
        return (p @ split(v)).transpose(0, 2, 1, 3).reshape(S * N, c.d)

    def forward(self):
        c = self.cfg
        d, f, act = c.d, c.d_mlp, ACTS[c.act]
        x = self.get("input")
        if c.block == "preln":
            for i in range(c.layers):
                p = f"blocks.{i}."
                h = self.norm(x, p + "norm1", True)
                qkv = self.linear(h, p + "attn.qkv", 3 * d, d)
                a = self.attention(qkv[:, :d], qkv[:, d:2 * d], qkv[:, 2 * d:])
                x = x + self.linear(a, p + "attn.proj", d, d)
                h = self.norm(x, p + "norm2", True)
                u = act(self.linear(h, p + "mlp.fc1", f, d))
                x = x + self.linear(u, p + "mlp.fc2", d, f)
            if c.readout == "head":
                h = self.norm(x, "norm", True)
                w = self.get("head.weight")
                return self.linear(h, "head", w.shape[0], d)
        else:
            for i in range(c.layers):
                p = f"layers.{i}."
                h = self.norm(x, p + "input_layernorm", False)
                q = self.linear(h, p + "self_attn.q_proj", d, d)
                k = self.linear(h, p + "self_attn.k_proj", d, d)
                v = self.linear(h, p + "self_attn.v_proj", d, d)
                x = x + self.linear(self.attention(q, k, v), p + "self_attn.o_proj", d, d)
                h = self.norm(x, p + "post_attention_layernorm", False)
                g = act(self.linear(h, p + "mlp.gate_proj", f, d))
                u = self.linear(h, p + "mlp.up_proj", f, d)
                x = x + self.linear(g * u, p + "mlp.down_proj", d, f)
            if c.readout == "head":
                h = self.norm(x, "norm", False)
                w = self.get("lm_head.weight")
                return self.linear(h, "lm_head", w.shape[0], d)
        # residual readout: the last residual stream, mapped back to the
        # original basis (x Q^T) and, for LayerNorm models, compared after
        # removing each row's mean (the component fusion drops)
        q = self.opt("readout.q", (d, d))
        if q is not None:
            x = x @ q.T
        if c.readout_center:
            x = x - x.mean(axis=1, keepdims=True)
        return x


# ---------------------------------------------------------------- compare

def errors(y, truth):
    diff = y - truth
    tn = float(np.linalg.norm(truth))
    rel = float(np.linalg.norm(diff)) / tn if tn > 0 else float(np.linalg.norm(diff))
    return rel, float(np.max(np.abs(diff)))


def main(argv=None):
    ap = argparse.ArgumentParser(
        prog="verify_dump.py",
        description="Independent float64 NumPy re-run of a cicheck --dump "
                    "directory, compared with the MPFR truth.")
    ap.add_argument("dir", help="the directory given to cicheck run --dump")
    ap.add_argument("--rtol", type=float, default=1e-12,
                    help="pass when ||y - truth||_2 / ||truth||_2 <= RTOL for "
                         "the original model (default 1e-12)")
    ap.add_argument("--xf-equiv", type=float, default=1e-12,
                    help="a transformed model whose re-run is within this "
                         "relative error of truth is 'equivalent' (default 1e-12)")
    ap.add_argument("--xf-differs", type=float, default=1e-3,
                    help="above this relative error it 'differs'; in between "
                         "'inconclusive' (default 1e-3)")
    a = ap.parse_args(argv)
    if not (a.rtol > 0 and a.xf_equiv > 0 and a.xf_differs >= a.xf_equiv):
        print(f"{PROG}: need rtol > 0 and 0 < xf-equiv <= xf-differs",
              file=sys.stderr)
        return 2
    np.seterr(all="ignore")  # non-finite results are reported, not raised

    passed = failed = 0
    unreadable = False
    try:
        if not os.path.isdir(a.dir):
            raise InputError(f"{a.dir}: not a directory")
        outs, _ = read_safetensors(os.path.join(a.dir, "outputs.safetensors"))
        if "truth" not in outs:
            raise InputError(f"{a.dir}/outputs.safetensors: tensor 'truth' missing")
        truth = outs["truth"]
        orig = Model(os.path.join(a.dir, "original.safetensors"))
        c = orig.cfg
        print(f"{PROG}: {a.dir}: block {c.block}, d_model {c.d}, heads {c.heads}, "
              f"tokens {c.tokens} x samples {c.samples}, layers {c.layers}, "
              f"d_mlp {c.d_mlp}, act {c.act}, eps {c.eps!r}, "
              f"causal {str(c.causal).lower()}, readout {c.readout}")
        y = orig.forward()
        if y.shape != truth.shape:
            raise InputError(f"{a.dir}: re-run output shape {list(y.shape)} != "
                             f"truth shape {list(truth.shape)}")
    except InputError as e:
        print(f"{PROG}: error: {e}", file=sys.stderr)
        print(f"{PROG}: 0 passed, 0 failed")
        return 2

    rel, mab = errors(y, truth)
    ok = bool(np.all(np.isfinite(y))) and rel <= a.rtol
    print(f"  original vs truth: rel_norm2 {rel:.3e}  max_abs {mab:.3e}  "
          f"(rtol {a.rtol:g})  {'PASS' if ok else 'FAIL'}")
    passed += ok
    failed += not ok

    # informational: what the dumped engine outputs score against truth
    for name in sorted(outs):
        if name != "truth" and outs[name].shape == truth.shape:
            r, m = errors(outs[name], truth)
            print(f"  dumped {name:32s} vs truth: rel_norm2 {r:.3e}  max_abs {m:.3e}")

    xf_paths = sorted(glob.glob(os.path.join(a.dir, "*.f64.safetensors")))
    for p in xf_paths:
        label = os.path.basename(p)[:-len(".f64.safetensors")]
        try:
            xm = Model(p)
            label = xm.meta.get("transform", label)
            kind = xm.meta.get("kind", "?")
            expect = xm.meta.get("expect", "equivalent")
            yx = xm.forward()
            if yx.shape != truth.shape:
                raise InputError(f"{p}: output shape {list(yx.shape)} != truth "
                                 f"shape {list(truth.shape)}")
        except InputError as e:
            print(f"{PROG}: error: {e}", file=sys.stderr)
            unreadable = True
            continue
        r, m = errors(yx, truth)
        if not np.all(np.isfinite(yx)) or r > a.xf_differs:
            verdict = "broken"
        elif r <= a.xf_equiv:
            verdict = "equivalent"
        else:
            verdict = "inconclusive"
        ok = verdict == expect
        print(f"  transform {label} ({kind}) vs truth: rel_norm2 {r:.3e}  "
              f"max_abs {m:.3e}  {verdict} (expected {expect})  "
              f"{'PASS' if ok else 'FAIL'}")
        passed += ok
        failed += not ok

    print(f"{PROG}: {passed} passed, {failed} failed")
    if unreadable:
        return 2
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
