# SPDX-License-Identifier: MIT
"""npref.adaln: the DiT adaLN-Zero stack under each adaLN strategy (static-fold,
online-unrotate, per-sample-fold, branch-rotate), re-run from its math on an
npref.graph.Graph."""

import numpy as np

from .acts import ACTS
from .hadamard import fast_q
from .tensorfile import InputError


def forward_dit(m):
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
    return DitRun(m).run()


class DitRun:
    """One float64 run of the dit model m (an npref.graph.Graph): the
    strategy's rotations set up once, then its norm sites (read) and gate
    sites (write) layer by layer."""

    def __init__(self, m):
        self.m = m
        c = self.c = m.cfg
        d = self.d = c.d
        self.f, self.act = c.d_mlp, ACTS[c.act]
        kind = self.kind = c.kind
        self.x = m.get("input")
        eye = np.eye(d)
        self.cmat = eye - np.full((d, d), 1.0 / d)
        # norms on the stream: LN0 unless the stream is centered (then RMS0);
        # metadata norm.center says which the graph runs
        self.center = c.center

        # rotation of the stream (online-unrotate, per-sample-fold)
        unrot = rerot = q = None
        self.regular = regular = m.meta.get("q") == "regular-hadamard"
        if kind == "online-unrotate":
            if c.fast:
                qf = fast_q(m.get("rot.signs", (d,)), int(m.meta.get("hadamard_base", "0")),
                            regular=regular)
                unrot = lambda h: h @ qf.T      # transpose FWHT: x diag(s) H / sqrt(d)
                rerot = lambda g: g @ qf        # forward FWHT:  (x H) s / sqrt(d)
            else:
                wq = m.get("rot.q", (d, d))
                wqt = m.get("rot.qT", (d, d))
                unrot = lambda h: h @ wq.T      # graph LINEAR with weight rot.q
                rerot = lambda g: g @ wqt.T     # graph LINEAR with weight rot.qT
        elif kind == "per-sample-fold":
            q = m.get("rot.q", (d, d))
        self.unrot, self.rerot, self.q = unrot, rerot, q
        self.centered_stream = kind in ("online-unrotate", "per-sample-fold",
                                        "static-fold") and c.stream == "centered"
        self.bd, self.bm = self.branch(d), self.branch(self.f)

    def branch(self, width):
        """branch-rotate: the online rotation before each linear's input."""
        m, c, d, kind, regular = self.m, self.c, self.d, self.kind, self.regular
        if kind != "branch-rotate":
            return lambda h: h
        tag = "d" if width == d else "m"
        if c.fast:
            # group-wise (group = G): signs of one block, the same Q on
            # every block of G channels
            s = m.get(f"branch.signs.{tag}").reshape(-1)
            if width % s.shape[0]:
                raise InputError(f"{m.path}: branch.signs.{tag} has {s.shape[0]} "
                                 f"values, which do not divide the width {width}")
            blk = fast_q(s, int(m.meta.get("hadamard_base", "0")),
                         m.opt(f"hadamard.base.{s.shape[0]}"), regular=regular)
            a = np.kron(np.eye(width // s.shape[0]), blk)
            return lambda h: h @ a
        # group-wise (group = G): the linear's weight is the [G, G] block
        w = m.get(f"branch.qT.{tag}")
        g = w.shape[0]
        if w.shape != (g, g) or width % g:
            raise InputError(f"{m.path}: branch.qT.{tag} has shape {list(w.shape)}, "
                             f"not a square block dividing the width {width}")
        a = np.kron(np.eye(width // g), w.T)
        return lambda h: h @ a

    def read(self, h, prefix, n, mods):
        """A norm site feeding reader `prefix` ([n, d]): modulate and apply."""
        m, c, d, kind, q = self.m, self.c, self.d, self.kind, self.q
        if kind == "static-fold":
            return m.linear(h, prefix, n, d)
        shift, scale = mods
        if kind == "per-sample-fold":
            w = m.get(prefix + ".weight", (n, d))
            b = m.opt(prefix + ".bias", (n,))
            b = np.zeros(n) if b is None else b
            out = np.empty((h.shape[0], n))
            for s in range(c.samples):
                r = slice(s * c.tokens, (s + 1) * c.tokens)
                ws = (w * (1.0 + scale[s])[None, :]) @ q
                bs = b + w @ shift[s]
                out[r] = h[r] @ ws.T + bs
            return out
        if kind == "online-unrotate":
            h = self.unrot(h)
        hm = h * (1.0 + m.rows(scale)) + m.rows(shift)
        return m.linear(self.bd(hm), prefix, n, d)

    def write(self, x, u, prefix, k, gate, rot_in):
        """A gate site: X += gate * (u W^T + b), in the stream's basis."""
        m, c, d, kind, q = self.m, self.c, self.d, self.kind, self.q
        if kind == "static-fold":
            return x + m.linear(rot_in(u), prefix, d, k)
        if kind == "per-sample-fold":
            w = m.get(prefix + ".weight", (d, k))
            b = m.opt(prefix + ".bias", (d,))
            b = np.zeros(d) if b is None else b
            pre = (q.T @ self.cmat) if self.centered_stream else q.T
            out = np.empty_like(x)
            for s in range(c.samples):
                r = slice(s * c.tokens, (s + 1) * c.tokens)
                ws = pre @ (gate[s][:, None] * w)
                bs = pre @ (gate[s] * b)
                out[r] = u[r] @ ws.T + bs
            return x + out
        g = m.rows(gate) * m.linear(rot_in(u), prefix, d, k)
        if kind == "online-unrotate":
            if self.centered_stream:
                g = g - g.mean(axis=1, keepdims=True)
            g = self.rerot(g)
        return x + g

    def run(self):
        """The layers, then the final layer's output or the residual readout."""
        m, c, d, f, act, kind = self.m, self.c, self.d, self.f, self.act, self.kind
        center, bd, bm = self.center, self.bd, self.bm
        read, write = self.read, self.write
        x = self.x
        for i in range(c.layers):
            p = f"blocks.{i}."
            mods = (m.modulation(p, 6) if kind != "static-fold"
                    else [None] * 6)
            shift1, scale1, gate1, shift2, scale2, gate2 = mods
            h = m.norm0(x, center)
            qkv = read(h, p + "attn.qkv", 3 * d, (shift1, scale1))
            a = m.attention(qkv[:, :d], qkv[:, d:2 * d], qkv[:, 2 * d:])
            x = write(x, a, p + "attn.proj", d, gate1, bd)
            h = m.norm0(x, center)
            u = act(read(h, p + "mlp.fc1", f, (shift2, scale2)))
            x = write(x, u, p + "mlp.fc2", f, gate2, bm)

        if "final_layer.linear.weight" in m.t:
            w = m.get("final_layer.linear.weight")
            fm = (m.modulation("final_layer.", 2) if kind != "static-fold"
                  else (None, None))
            h = m.norm0(x, center)
            y = read(h, "final_layer.linear", w.shape[0], fm)
            # DESIGN.md 1/4: the final layer's output is what a user sees and
            # is compared as is
            return y
        # no final layer: the residual stream, mapped back to the original
        # basis (X' Q^T) and centered per row
        if kind in ("online-unrotate", "per-sample-fold", "static-fold"):
            rq = m.opt("readout.q", (d, d))
            if rq is None:
                rq = m.opt("rot.q", (d, d))
            if rq is not None:
                x = x @ rq.T
            elif kind == "online-unrotate" and c.fast:
                x = self.unrot(x)
            else:
                raise InputError(f"{m.path}: residual readout of a rotated "
                                 "stream needs 'readout.q' (or 'rot.q')")
        if c.readout_center:
            x = x - x.mean(axis=1, keepdims=True)
        return x
