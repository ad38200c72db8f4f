# SPDX-License-Identifier: MIT
"""npref.graph: a dumped model (tensors, configuration) and the float64
pieces its blocks are made of."""

import math

import numpy as np

from .acts import silu
from .config import Cfg
from .hadamard import fast_q
from .tensorfile import InputError, read_safetensors


class Graph:
    """One dumped model: tensors + config, and the pieces of its graph in
    float64 (linears, norms, RoPE, attention, online Hadamards, adaLN
    modulation); npref.model.Model adds forward()."""

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
