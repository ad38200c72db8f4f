#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""verify_dump.py: independent float64 re-run of a `cicheck run --dump DIR`.

Rebuilds each dumped transformer block (preln, rmsnorm, dit, parallel) in NumPy float64
from the math in DESIGN.md sections 1 and 3 (not from the C engines) and
compares it with the MPFR truth that cicheck wrote to DIR/outputs.safetensors.

  verify_dump.py DIR [--rtol 1e-12] [--xf-equiv 1e-12] [--xf-differs 1e-3]
                     [--report PATH] [--stat-rtol 1e-9]

Checks:
  original  DIR/original.safetensors re-run in float64 must reproduce
            outputs["truth"] within rtol (2-norm relative).
  truth     every outputs["truth"] value must round to binary32 (nearest,
            ties to even) as outputs["truth.f32"], the proven float32, bit
            for bit (a dump without truth.f32 is not checked, said so).
  transform every DIR/<name>.f64.safetensors (the transformed weights as
            cicheck computed them, unrounded, stored as float64) is re-run in
            float64 and compared with truth: a transform whose metadata says
            expect = equivalent must reproduce truth within rtol; one that
            expects broken must differ by more than --xf-differs. A residual
            readout is mapped back with the dumped "readout.q" (y Q^T) and
            centered when metadata readout.center is true.
  dit       the adaLN strategies (metadata kind: static-fold, online-unrotate,
            per-sample-fold, branch-rotate; stream; fast; calibration) are
            re-run from their math. A static-fold model is also compared per
            sample: its calibration sample (metadata calibration, else 0, said
            so) must match truth, every other sample must differ.
            The final layer's output is compared as is (DESIGN.md 1, 4).
  lowp      (cases with [[engines.lowp]]) every DIR/<transform>.<engine>.safetensors
            is recomputed from the model's dumped weights (<transform>.safetensors,
            original.safetensors for none; with weights_from = unrounded the
            <transform>.f64.safetensors copy for the plain formats) by the
            rules of src/base/quant.h in NumPy float32 arithmetic: int4/int8
            symmetric or asymmetric with clipping per tensor, row or group,
            fp8-e4m3/fp8-e5m2, mxfp4, nvfp4, and bf16/fp16 rounding (ties to
            even); dequantized values, codes, scales, zero points and tensor
            scales must agree bit for bit (a float64 copy exactly at a
            midpoint of the format may round either way: counted, shown).
  outliers  with report.json of the same run (--report, or DIR/report.json):
            every row of lowp.outliers (kurtosis, max_over_rms, top_share
            within --stat-rtol, top_channels and chan_max exactly) is
            recomputed from DIR/activations.safetensors (inputs) and the
            model's float32 weights, and every low-precision result row has
            its engine file.

Exit status: 0 every check passes, 1 one fails, 2 unreadable input (missing
file, malformed safetensors, missing tensor or metadata).

Needs only NumPy (Debian python3-numpy); safetensors are parsed by hand.

The low-precision part is the package scripts/npref/ beside this file.
"""

import argparse
import glob
import math
import os
import sys

import numpy as np

# the package beside this file, from any working directory; no __pycache__
# written into the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.dont_write_bytecode = True

from npref.outliers import check_lowp  # noqa: E402
from npref.tensorfile import InputError, read_safetensors  # noqa: E402

PROG = "verify_dump"


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
        if self.block not in ("preln", "rmsnorm", "dit", "parallel"):
            raise InputError(f"{path}: block '{self.block}' not supported "
                             "(preln, rmsnorm, dit or parallel)")
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
        # rmsnorm (LLaMA attention): RoPE layout and base, key/value heads;
        # absent (older dumps, other blocks): no RoPE, kv_heads = heads
        self.rope = meta.get("rope", "none")
        if self.rope not in ("none", "half", "interleaved"):
            raise InputError(f"{path}: rope '{self.rope}' not supported "
                             "(none, half or interleaved)")
        try:
            self.rope_theta = float(meta.get("rope_theta", "10000"))
        except ValueError:
            raise InputError(f"{path}: metadata 'rope_theta' = "
                             f"'{meta['rope_theta']}' is not a number")
        if not self.rope_theta > 0 or not math.isfinite(self.rope_theta):
            raise InputError(f"{path}: rope_theta {self.rope_theta} must be > 0")
        self.kv_heads = integer("kv_heads") if "kv_heads" in meta else self.heads
        if self.heads % self.kv_heads:
            raise InputError(f"{path}: kv_heads {self.kv_heads} does not divide "
                             f"heads {self.heads}")
        if self.rope != "none" and (self.d // self.heads) % 2:
            raise InputError(f"{path}: rope needs an even head size, d_model / heads "
                             f"= {self.d // self.heads}")
        self.causal = boolean("causal")
        self.act = need("activation")
        if self.act not in ACTS:
            raise InputError(f"{path}: activation '{self.act}' not supported "
                             f"({', '.join(sorted(ACTS))})")
        self.readout = need("readout")
        if self.readout not in ("head", "residual"):
            raise InputError(f"{path}: readout '{self.readout}' not supported")
        self.center = boolean("norm.center")
        self.readout_center = (meta.get("readout.center", "true" if self.block in
                                        ("preln", "dit", "parallel") else "false")
                               == "true")
        # dit: the transform kind and how its stream is kept (DESIGN.md 3).
        # The original model has no kind; transformed dumps must say which.
        self.kind = meta.get("kind", "none")
        if self.block == "dit":
            if self.kind not in DIT_KINDS:
                raise InputError(f"{path}: kind '{self.kind}' not supported for "
                                 f"block dit ({', '.join(DIT_KINDS)})")
            if self.kind in ("static-fold", "online-unrotate", "per-sample-fold"):
                self.stream = need("stream")
                if self.stream not in ("centered", "mean-preserving"):
                    raise InputError(f"{path}: stream '{self.stream}' not supported "
                                     "(centered or mean-preserving)")
            else:
                self.stream = meta.get("stream", "none")
            self.fast = (boolean("fast") if self.kind in ("online-unrotate",
                                                          "branch-rotate")
                         else False)
            self.calibration = None
            self.calibration_defaulted = False
            if self.kind == "static-fold":
                if "calibration" in meta:
                    try:
                        self.calibration = int(meta["calibration"])
                    except ValueError:
                        raise InputError(f"{path}: metadata 'calibration' = "
                                         f"'{meta['calibration']}' is not an integer")
                    if not 0 <= self.calibration < self.samples:
                        raise InputError(f"{path}: calibration {self.calibration} "
                                         f"outside 0..{self.samples - 1}")
                else:
                    self.calibration = 0
                    self.calibration_defaulted = True


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


def quick_gelu(x):  # x sigmoid(1.702 x), as silu
    z = 1.702 * x
    return x * np.where(z >= 0, 1.0 / (1.0 + np.exp(-np.abs(z))),
                        np.exp(-np.abs(z)) / (1.0 + np.exp(-np.abs(z))))


ACTS = {"gelu": gelu, "gelu-tanh": gelu_tanh, "relu": relu, "silu": silu,
        "quick-gelu": quick_gelu}

DIT_KINDS = ("none", "static-fold", "online-unrotate", "per-sample-fold",
             "branch-rotate")


def sylvester(w):
    """Sylvester Hadamard matrix in natural order, H[i][j] = (-1)^popcount(i & j)."""
    if w <= 0 or w & (w - 1):
        raise ValueError(f"fast Hadamard width {w} is not a power of two")
    h = np.ones((1, 1))
    while h.shape[0] < w:
        h = np.block([[h, h], [h, -h]])
    return h


def is_prime(n):
    return n >= 2 and all(n % k for k in range(2, int(n ** 0.5) + 1))


def paley_base(K):
    """The base H_K of order K of src/xform/hadamard.c for a prime q: Paley I
    (q = K - 1 = 3 mod 4: H = I + [[0, 1^T], [-1, Q]], Q[a][b] = chi(a - b))
    or Paley II (q = K/2 - 1 = 1 mod 4: the conference matrix C = [[0, 1^T],
    [1, Q]] with each entry c a 2 x 2 block), normalized so that row 0 and
    column 0 are +1. Prime powers that are not primes (GF(p^m)) and the
    Williamson bases are not rebuilt here."""
    def chi(x, q):
        x %= q
        return 0 if x == 0 else (1 if pow(x, (q - 1) // 2, q) == 1 else -1)
    if K % 4 == 0 and is_prime(K - 1):
        q = K - 1
        h = np.empty((K, K))
        for i in range(K):
            for j in range(K):
                h[i, j] = 1 if i == j or i == 0 else (-1 if j == 0 else chi(i - j, q))
    elif K % 8 == 4 and is_prime(K // 2 - 1):
        q, n = K // 2 - 1, K // 2
        h = np.empty((K, K))
        for i in range(n):
            for j in range(n):
                c = 0 if i == j else (1 if i == 0 or j == 0 else chi(i - j, q))
                for a in range(2):
                    for b in range(2):
                        h[2 * i + a, 2 * j + b] = (c * (-1 if a & b else 1) if c
                                                   else (-1 if a | b else 1))
    else:
        raise ValueError(f"Hadamard base of order {K}: only Sylvester and Paley bases "
                         "over a prime field are rebuilt by this script")
    h[h[:, 0] < 0] *= -1
    h[:, h[0, :] < 0] *= -1
    return h


def hadamard(w, K=0):
    """H = H_K (x) Sylvester(w / K), the matrix of cic_hadamard_base_k; K = 0
    is the automatic base, which for a power of two w is K = 1."""
    if K in (0, 1):
        return sylvester(w)
    if w % K or (w // K) & (w // K - 1):
        raise ValueError(f"fast Hadamard width {w} is not {K} times a power of two")
    return np.kron(paley_base(K), sylvester(w // K))


def regular_hadamard(w):
    """The regular Hadamard matrix (J - 2I)^(x)k of order w = 4^k: every row
    and column sums to 2^k (q = "regular-hadamard")."""
    r4 = np.ones((4, 4)) - 2 * np.eye(4)
    h = np.ones((1, 1))
    while h.shape[0] < w:
        h = np.kron(h, r4)
    if h.shape[0] != w:
        raise ValueError(f"no regular Hadamard matrix of order {w} (4^k only)")
    return h


def fast_q(signs, K=0, base=None, regular=False):
    """The orthogonal matrix of the randomized fast Hadamard with these signs,
    as the row-vector map of its forward direction: x -> (x H) * s / sqrt(w)
    is x Q with Q = H diag(s) / sqrt(w); the transpose direction
    x -> ((x * s) H^T) / sqrt(w) is x Q^T. K: the transform's hadamard_base
    (dump metadata; 0 automatic); regular: H the regular Hadamard."""
    w = signs.shape[0]
    if regular:
        return regular_hadamard(w) * signs[None, :] / math.sqrt(w)
    if base is not None:   # the dump's H_K ("hadamard.base.<w>"): any construction
        return np.kron(base, sylvester(w // base.shape[0])) * signs[None, :] / math.sqrt(w)
    return hadamard(w, K) * signs[None, :] / math.sqrt(w)


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

    def online(self, x, signs_name, block):
        """An online fast Hadamard of the graph (R3 online-qk on blocks of
        head_dim, R4 online-down on the whole MLP row) when the dump holds
        its signs, else x: x -> x Q per block, Q = H diag(s) / sqrt(w) with
        H from the dump's "hadamard.base.<w>" or Sylvester's."""
        s = self.opt(signs_name)
        if s is None:
            return x
        s = s.reshape(-1)
        q = fast_q(s, int(self.meta.get("hadamard_base", "0")),
                   self.opt(f"hadamard.base.{block}"))
        r = x.reshape(x.shape[0], -1, block)
        return (r @ q).reshape(x.shape)

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

    def rope(self, x, heads):
        """RoPE of x [S*N, heads*dh] per head, position = token 0..N-1 of its
        sample: inv_i = theta^(-2i/dh), angle p inv_i; each pair (a, b) ->
        (a cos - b sin, b cos + a sin). Pairs: (x_i, x_{i+dh/2}) for "half"
        (Hugging Face rotate_half), (x_2i, x_2i+1) for "interleaved" (Meta)."""
        c = self.cfg
        if c.rope == "none":
            return x
        S, N, dh = c.samples, c.tokens, c.d // c.heads
        inv = c.rope_theta ** (-np.arange(0, dh, 2, dtype=np.float64) / dh)
        ang = np.arange(N, dtype=np.float64)[:, None] * inv[None, :]   # [N, dh/2]
        cos, sin = np.cos(ang)[None, :, None, :], np.sin(ang)[None, :, None, :]
        t = x.reshape(S, N, heads, dh)
        if c.rope == "half":
            a, b = t[..., :dh // 2], t[..., dh // 2:]
            y = np.concatenate((a * cos - b * sin, b * cos + a * sin), axis=-1)
        else:
            a, b = t[..., 0::2], t[..., 1::2]
            y = np.empty_like(t)
            y[..., 0::2] = a * cos - b * sin
            y[..., 1::2] = b * cos + a * sin
        return y.reshape(S * N, heads * dh)

    def attention(self, q, k, v):
        """Per sample, per head softmax(q k^T / sqrt(d/h)) v; causal mask.
        k and v have kv_heads heads; query head h reads kv head
        h // (heads / kv_heads) (Hugging Face repeat_kv)."""
        c = self.cfg
        S, N, H, dh = c.samples, c.tokens, c.heads, c.d // c.heads

        def split(a, heads):  # [S*N, heads*dh] -> [S, H, N, dh]
            a = a.reshape(S, N, heads, dh).transpose(0, 2, 1, 3)
            return np.repeat(a, H // heads, axis=1)

        s = split(q, H) @ split(k, c.kv_heads).transpose(0, 1, 3, 2) / math.sqrt(dh)
        if c.causal:
            s = np.where(np.tril(np.ones((N, N), dtype=bool)), s, -np.inf)
        s = np.exp(s - s.max(axis=-1, keepdims=True))
        p = s / s.sum(axis=-1, keepdims=True)
        return (p @ split(v, c.kv_heads)).transpose(0, 2, 1, 3).reshape(S * N, c.d)

    # ------------------------------------------------------------ dit

    def rows(self, a):
        """[B, k] per-sample values -> [B*N, k], one copy per token row."""
        return np.repeat(a, self.cfg.tokens, axis=0)

    def modulation(self, prefix, chunks):
        """SiLU(c) W_ada^T + b_ada for the B conditioning vectors, split into
        `chunks` [B, d] pieces."""
        c = self.cfg
        cond = self.get("cond")
        if cond.ndim != 2 or cond.shape[0] != c.samples:
            raise InputError(f"{self.path}: 'cond' has shape {list(cond.shape)}, "
                             f"expected [{c.samples}, d_cond]")
        m = self.linear(silu(cond), prefix + "adaLN_modulation.1",
                        chunks * c.d, cond.shape[1])
        return [m[:, k * c.d:(k + 1) * c.d] for k in range(chunks)]

    def norm0(self, x, center):
        """Affine-free LayerNorm (center) or RMSNorm over each row."""
        if center:
            x = x - x.mean(axis=1, keepdims=True)
        return x / np.sqrt((x * x).mean(axis=1, keepdims=True) + self.cfg.eps)

    def forward_dit(self):
        """DiT adaLN-Zero stack (DESIGN.md 1) under each strategy of section 3.

        Row-vector algebra, stream X. The rotated strategies keep
        X' = X C Q (centered stream, norms RMS0) or X' = X Q with Q 1 = 1
        (mean-preserving, norms stay LN0), so norm(X') = LN0(X) Q.
          online-unrotate: z = norm(X') Q^T (the original basis), modulate, the
            original reader; the writer's output o is gated in the original
            basis, centered (centered stream) and rotated: X' += (g o) C Q.
          per-sample-fold: the same function with the modulation folded into
            per-sample weights (PyTorch layout [out, in]):
            reader W_s = W diag(1 + scale_s) Q, b_s = b + W shift_s;
            writer W_s = Q^T C diag(gate_s) W, b_s = Q^T C (gate_s * b).
          static-fold: the folds above done once (calibration c0) and stored
            in place of the weights: only norms, readers, writers, adds.
          branch-rotate: the stream is not rotated; each linear reads x A
            (A = branch.qT^T, or the forward fast Hadamard) and its stored
            weight is W A, so the product is unchanged.
        """
        c = self.cfg
        d, f, act = c.d, c.d_mlp, ACTS[c.act]
        kind = c.kind
        x = self.get("input")
        eye = np.eye(d)
        cmat = eye - np.full((d, d), 1.0 / d)
        # norms on the stream: LN0 unless the stream is centered (then RMS0);
        # metadata norm.center says which the graph runs
        center = c.center

        # rotation of the stream (online-unrotate, per-sample-fold)
        unrot = rerot = q = None
        regular = self.meta.get("q") == "regular-hadamard"
        if kind == "online-unrotate":
            if c.fast:
                qf = fast_q(self.get("rot.signs", (d,)), int(self.meta.get("hadamard_base", "0")),
                            regular=regular)
                unrot = lambda h: h @ qf.T      # transpose FWHT: x diag(s) H / sqrt(d)
                rerot = lambda g: g @ qf        # forward FWHT:  (x H) s / sqrt(d)
            else:
                wq = self.get("rot.q", (d, d))
                wqt = self.get("rot.qT", (d, d))
                unrot = lambda h: h @ wq.T      # graph LINEAR with weight rot.q
                rerot = lambda g: g @ wqt.T     # graph LINEAR with weight rot.qT
        elif kind == "per-sample-fold":
            q = self.get("rot.q", (d, d))
        centered_stream = kind in ("online-unrotate", "per-sample-fold",
                                   "static-fold") and c.stream == "centered"

        # branch-rotate: the online rotation before each linear's input
        def branch(width):
            if kind != "branch-rotate":
                return lambda h: h
            tag = "d" if width == d else "m"
            if c.fast:
                # group-wise (group = G): signs of one block, the same Q on
                # every block of G channels
                s = self.get(f"branch.signs.{tag}").reshape(-1)
                if width % s.shape[0]:
                    raise InputError(f"{self.path}: branch.signs.{tag} has {s.shape[0]} "
                                     f"values, which do not divide the width {width}")
                blk = fast_q(s, int(self.meta.get("hadamard_base", "0")),
                             self.opt(f"hadamard.base.{s.shape[0]}"), regular=regular)
                a = np.kron(np.eye(width // s.shape[0]), blk)
                return lambda h: h @ a
            # group-wise (group = G): the linear's weight is the [G, G] block
            w = self.get(f"branch.qT.{tag}")
            g = w.shape[0]
            if w.shape != (g, g) or width % g:
                raise InputError(f"{self.path}: branch.qT.{tag} has shape {list(w.shape)}, "
                                 f"not a square block dividing the width {width}")
            a = np.kron(np.eye(width // g), w.T)
            return lambda h: h @ a
        bd, bm = branch(d), branch(f)

        def read(h, prefix, n, mods):
            """A norm site feeding reader `prefix` ([n, d]): modulate and apply."""
            if kind == "static-fold":
                return self.linear(h, prefix, n, d)
            shift, scale = mods
            if kind == "per-sample-fold":
                w = self.get(prefix + ".weight", (n, d))
                b = self.opt(prefix + ".bias", (n,))
                b = np.zeros(n) if b is None else b
                out = np.empty((h.shape[0], n))
                for s in range(c.samples):
                    r = slice(s * c.tokens, (s + 1) * c.tokens)
                    ws = (w * (1.0 + scale[s])[None, :]) @ q
                    bs = b + w @ shift[s]
                    out[r] = h[r] @ ws.T + bs
                return out
            if kind == "online-unrotate":
                h = unrot(h)
            hm = h * (1.0 + self.rows(scale)) + self.rows(shift)
            return self.linear(bd(hm), prefix, n, d)

        def write(x, u, prefix, k, gate, rot_in):
            """A gate site: X += gate * (u W^T + b), in the stream's basis."""
            if kind == "static-fold":
                return x + self.linear(rot_in(u), prefix, d, k)
            if kind == "per-sample-fold":
                w = self.get(prefix + ".weight", (d, k))
                b = self.opt(prefix + ".bias", (d,))
                b = np.zeros(d) if b is None else b
                pre = (q.T @ cmat) if centered_stream else q.T
                out = np.empty_like(x)
                for s in range(c.samples):
                    r = slice(s * c.tokens, (s + 1) * c.tokens)
                    ws = pre @ (gate[s][:, None] * w)
                    bs = pre @ (gate[s] * b)
                    out[r] = u[r] @ ws.T + bs
                return x + out
            g = self.rows(gate) * self.linear(rot_in(u), prefix, d, k)
            if kind == "online-unrotate":
                if centered_stream:
                    g = g - g.mean(axis=1, keepdims=True)
                g = rerot(g)
            return x + g

        for i in range(c.layers):
            p = f"blocks.{i}."
            mods = (self.modulation(p, 6) if kind != "static-fold"
                    else [None] * 6)
            shift1, scale1, gate1, shift2, scale2, gate2 = mods
            h = self.norm0(x, center)
            qkv = read(h, p + "attn.qkv", 3 * d, (shift1, scale1))
            a = self.attention(qkv[:, :d], qkv[:, d:2 * d], qkv[:, 2 * d:])
            x = write(x, a, p + "attn.proj", d, gate1, bd)
            h = self.norm0(x, center)
            u = act(read(h, p + "mlp.fc1", f, (shift2, scale2)))
            x = write(x, u, p + "mlp.fc2", f, gate2, bm)

        if "final_layer.linear.weight" in self.t:
            w = self.get("final_layer.linear.weight")
            fm = (self.modulation("final_layer.", 2) if kind != "static-fold"
                  else (None, None))
            h = self.norm0(x, center)
            y = read(h, "final_layer.linear", w.shape[0], fm)
            # DESIGN.md 1/4: the final layer's output is what a user sees and
            # is compared as is
            return y
        # no final layer: the residual stream, mapped back to the original
        # basis (X' Q^T) and centered per row
        if kind in ("online-unrotate", "per-sample-fold", "static-fold"):
            rq = self.opt("readout.q", (d, d))
            if rq is None:
                rq = self.opt("rot.q", (d, d))
            if rq is not None:
                x = x @ rq.T
            elif kind == "online-unrotate" and c.fast:
                x = unrot(x)
            else:
                raise InputError(f"{self.path}: residual readout of a rotated "
                                 "stream needs 'readout.q' (or 'rot.q')")
        if c.readout_center:
            x = x - x.mean(axis=1, keepdims=True)
        return x

    def forward(self):
        c = self.cfg
        d, f, act = c.d, c.d_mlp, ACTS[c.act]
        x = self.get("input")
        if c.block == "dit":
            return self.forward_dit()
        if c.block == "parallel":     # GPT-J: one LN, attention and MLP side by side
            for i in range(c.layers):
                p = f"transformer.h.{i}."
                h = self.norm(x, p + "ln_1", True)
                a = self.attention(self.linear(h, p + "attn.q_proj", d, d),
                                   self.linear(h, p + "attn.k_proj", d, d),
                                   self.linear(h, p + "attn.v_proj", d, d))
                u = act(self.linear(h, p + "mlp.fc_in", f, d))
                u = self.online(u, p + "mlp.fc_out.online_hadamard.signs", f)
                x = (self.linear(a, p + "attn.out_proj", d, d) +
                     self.linear(u, p + "mlp.fc_out", d, f)) + x
            if c.readout == "head":
                h = self.norm(x, "transformer.ln_f", True)
                w = self.get("lm_head.weight")
                return self.linear(h, "lm_head", w.shape[0], d)
        elif c.block == "preln":
            for i in range(c.layers):
                p = f"blocks.{i}."
                h = self.norm(x, p + "norm1", True)
                qkv = self.linear(h, p + "attn.qkv", 3 * d, d)
                a = self.attention(qkv[:, :d], qkv[:, d:2 * d], qkv[:, 2 * d:])
                x = x + self.linear(a, p + "attn.proj", d, d)
                h = self.norm(x, p + "norm2", True)
                u = act(self.linear(h, p + "mlp.fc1", f, d))
                u = self.online(u, p + "mlp.fc2.online_hadamard.signs", f)
                x = x + self.linear(u, p + "mlp.fc2", d, f)
            if c.readout == "head":
                h = self.norm(x, "norm", True)
                w = self.get("head.weight")
                return self.linear(h, "head", w.shape[0], d)
        else:
            for i in range(c.layers):
                p = f"layers.{i}."
                h = self.norm(x, p + "input_layernorm", False)
                dkv = d // c.heads * c.kv_heads
                q = self.rope(self.linear(h, p + "self_attn.q_proj", d, d), c.heads)
                k = self.rope(self.linear(h, p + "self_attn.k_proj", dkv, d), c.kv_heads)
                q = self.online(q, p + "online_qk.signs", d // c.heads)
                k = self.online(k, p + "online_qk.signs", d // c.heads)
                v = self.linear(h, p + "self_attn.v_proj", dkv, d)
                x = x + self.linear(self.attention(q, k, v), p + "self_attn.o_proj", d, d)
                h = self.norm(x, p + "post_attention_layernorm", False)
                g = act(self.linear(h, p + "mlp.gate_proj", f, d))
                u = self.linear(h, p + "mlp.up_proj", f, d)
                gu = self.online(g * u, p + "mlp.down_proj.online_hadamard.signs", f)
                x = x + self.linear(gu, p + "mlp.down_proj", d, f)
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


def check_truth_f32(path, truth):
    """(passed, failed): every float64 truth value must round to binary32
    (nearest, ties to even: NumPy's astype) as "truth.f32", the truth's
    proven float32, says, bit for bit. cicheck keeps the float64 on the
    proven side of a binary32 midpoint, where rounding to nearest double
    would land on the tie. A dump without truth.f32 (before cicheck wrote
    it) is not checked, and says so."""
    outs, _ = read_safetensors(path, raw=True)
    if "truth.f32" not in outs:
        print("  note: no truth.f32 in outputs.safetensors (an older dump): the "
              "truth's binary32 is not checked")
        return 0, 0
    t32 = outs["truth.f32"]
    if t32.dtype != np.float32 or t32.shape != truth.shape:
        print(f"  truth.f32: {t32.dtype} {list(t32.shape)}, want float32 "
              f"{list(truth.shape)}  FAIL")
        return 0, 1
    got = truth.astype(np.float32)
    diff = np.flatnonzero(got.view(np.uint32) != t32.view(np.uint32))
    ok = diff.size == 0
    print(f"  truth vs truth.f32: {truth.size - diff.size} of {truth.size} round to it "
          f"(binary32, nearest even)  {'PASS' if ok else 'FAIL'}")
    for i in diff[:5]:
        print(f"    truth[{i}] = {float(truth.flat[i]).hex()} rounds to "
              f"{float(got.flat[i]).hex()}, truth.f32 {float(t32.flat[i]).hex()}")
    return int(ok), int(not ok)


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
    ap.add_argument("--report", metavar="PATH",
                    help="report.json of the same run (or the --out folder holding "
                         "it), whose lowp.outliers are recomputed; default "
                         "DIR/report.json when there is one")
    ap.add_argument("--stat-rtol", type=float, default=1e-9,
                    help="relative tolerance of the recomputed outlier statistics "
                         "(the C sums in index order; default 1e-9)")
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
    if not ok and np.all(np.isfinite(y)):
        # a common cause: truth had each output row's mean removed
        rc, _ = errors(y - y.mean(axis=1, keepdims=True), truth)
        if rc <= a.rtol:
            print(f"  note: truth equals the re-run with each output row's mean "
                  f"removed (rel_norm2 {rc:.3e}): cicheck centered this "
                  f"{c.readout} output (metadata readout.center = "
                  f"{str(c.readout_center).lower()})"
)

    tp, tf = check_truth_f32(os.path.join(a.dir, "outputs.safetensors"), truth)
    passed += tp
    failed += tf

    # informational: what the dumped engine outputs score against truth
    for name in sorted(outs):
        if name not in ("truth", "truth.f32") and outs[name].shape == truth.shape:
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
        # a transform computed at bf16's 8 bits: the thresholds of
        # cic_xform_thresholds (equivalent up to 2^-4, broken from 2^-2)
        eq, br = ((2.0 ** -4, 2.0 ** -2) if xm.meta.get("precision") == "bf16"
                  else (a.xf_equiv, a.xf_differs))
        # a rotation from a file is exact only to its dtype's precision
        # (cic_xform_thresholds): float32 2^(12-24), float64 2^(20-53)
        qbits = int(xm.meta.get("q_file_bits", "0"))
        if xm.meta.get("q") == "file" and 0 < qbits < 53:
            eq = 2.0 ** (12 - 24) if qbits >= 24 else 2.0 ** -4
            br = a.xf_differs if qbits >= 24 else 2.0 ** -2
        if not np.all(np.isfinite(yx)) or r > br:
            verdict = "broken"
        elif r <= eq:
            verdict = "equivalent"
        else:
            verdict = "inconclusive"
        ok = verdict == expect
        per_sample = []
        if xm.cfg.block == "dit" and xm.cfg.kind == "static-fold":
            # folded for one conditioning vector: that sample must match the
            # truth, every other sample must differ
            cal = xm.cfg.calibration
            n = xm.cfg.tokens
            for s in range(xm.cfg.samples):
                rows = slice(s * n, (s + 1) * n)
                rs, ms = errors(yx[rows], truth[rows])
                fin = bool(np.all(np.isfinite(yx[rows])))
                if s == cal:
                    sok = fin and rs <= a.xf_equiv
                    want = "equivalent"
                else:
                    sok = not fin or rs > a.xf_differs
                    want = "broken"
                per_sample.append((s, rs, ms, want, sok))
            ok = ok and all(t[4] for t in per_sample)
        print(f"  transform {label} ({kind}) vs truth: rel_norm2 {r:.3e}  "
              f"max_abs {m:.3e}  {verdict} (expected {expect})  "
              f"{'PASS' if ok else 'FAIL'}")
        for s, rs, ms, want, sok in per_sample:
            tag = " (calibration" + (", metadata absent: sample 0 assumed)"
                                     if xm.cfg.calibration_defaulted else ")")
            print(f"    sample {s}{tag if s == xm.cfg.calibration else ''}: "
                  f"rel_norm2 {rs:.3e}  max_abs {ms:.3e}  expected {want}  "
                  f"{'PASS' if sok else 'FAIL'}")
        passed += ok
        failed += not ok

    report = a.report
    if report and os.path.isdir(report):
        report = os.path.join(report, "report.json")
    if report is None and os.path.exists(os.path.join(a.dir, "report.json")):
        report = os.path.join(a.dir, "report.json")
    try:
        lp, lf = check_lowp(a.dir, report, a.stat_rtol)
        passed += lp
        failed += lf
    except InputError as e:
        print(f"{PROG}: error: {e}", file=sys.stderr)
        unreadable = True

    print(f"{PROG}: {passed} passed, {failed} failed")
    if unreadable:
        return 2
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
