#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""make_dit_rewrite.py: tiny DiT checkpoints and their adaLN rewrites, as a
user's NumPy or PyTorch code would store them (docs/reference/dit-rewrite.md),
for cicheck verify's tests and the guide. Never uses cicheck.

    make_dit_rewrite.py original OUT [--d 32] [--heads 4] [--mlp 4] [--dc 16]
        [--dout 8] [--layers 5] [--seed 1]
    make_dit_rewrite.py rewrite ORIG OUT --adaln STRATEGY [--q FILE]
        [--q-seed 7] [--c0-seed 11 | --c0 FILE:ROW] [--mistake KIND:BLOCK]
        [--other FILE:ROW] [--dtype f32|bf16] [--stream centered|mean-preserving]
    make_dit_rewrite.py input OUT.safetensors --samples B --tokens N --d D
        --dc DC [--c0 FILE:ROW] [--no-input] [--no-c] [--seed 3]

original: a DiT state dict in the reference names (blocks.{i}.attn.qkv,
attn.proj, mlp.fc1, mlp.fc2, adaLN_modulation.1, final_layer.*) and a
config.json with "architecture" and "num_heads"; seeded normal weights.

rewrite: the rewrite of ORIG by STRATEGY, computed in float64 from the
stored float32 weights and Q, then stored (F32, or BF16 with --dtype):
- static-fold: the modulation of one condition c0 (seeded, or row ROW of
  tensor "c" of FILE) folded into every linear, the modulation tensors
  left out, c0 stored as adaln.c0; the stream x C Q;
- online-unrotate, per-sample-fold: every weight kept (the online ops and
  the per-sample folds run at run time);
- branch-rotate: each linear's weight times the Hadamard matrix of its
  input's width (Sylvester / sqrt(w)), W H; the stream not rotated.
Q (a Haar-random orthogonal d x d from --q-seed, stored F32) is written to
OUT/Q.safetensors for the strategies that rotate the stream (--q FILE
reads it instead, e.g. to share one Q between rewrites); --stream
mean-preserving makes Q 1 = 1 and leaves C out of the static fold's
writers (verify's --layernorm kept).
--mistake KIND:BLOCK plants one error at block BLOCK: qt-missing (static:
attn.proj without Q^T), gate-missing (static: mlp.fc2 without the gate),
mean-kept (static: attn.proj without C), other-cond (static: the block
folded for another condition: seeded, or row ROW of "c" of FILE with
--other FILE:ROW), q-folded (online-unrotate, per-sample-fold:
attn.qkv stored as W Q), h-missing (branch: mlp.fc2 without H), noise (any:
attn.proj plus a small dense perturbation no rule explains), final-unrotated
(BLOCK unused: final_layer.linear without Q (static), without H (branch),
or with Q folded in (the others)).

input: "input" [B, N, D] hidden states and "c" [B, DC] conditions (seeded;
--c0 puts row ROW of that file's "c" (or its adaln.c0) at sample 0)."""
import argparse
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_checkpoint import encode, read_st, sylvester, write_st  # noqa: E402


def save(path, tensors, dtype="f32"):
    out = []
    for name, a in tensors:
        dt, data, _ = encode(a, dtype)
        out.append((name, dt, np.shape(a), data))
    write_st(path, out)


def stored(a, dtype):
    """The values as stored (float32 or bf16 rounded), as float64."""
    return encode(a, dtype)[2].astype(np.float64)


def original(a):
    rng = np.random.default_rng(a.seed)
    d, m, dc, o = a.d, a.d * a.mlp, a.dc, a.dout
    t = []

    def lin(name, n, k, std=None):
        t.append((name + ".weight", rng.normal(0, std or 1 / np.sqrt(k), (n, k))))
        t.append((name + ".bias", rng.normal(0, 0.1, n)))

    for i in range(a.layers):
        p = f"blocks.{i}."
        lin(p + "attn.qkv", 3 * d, d)
        lin(p + "attn.proj", d, d)
        lin(p + "mlp.fc1", m, d)
        lin(p + "mlp.fc2", d, m)
        lin(p + "adaLN_modulation.1", 6 * d, dc, 0.1)
    lin("final_layer.linear", o, d)
    lin("final_layer.adaLN_modulation.1", 2 * d, dc, 0.1)
    os.makedirs(a.out, exist_ok=True)
    save(os.path.join(a.out, "model.safetensors"), [(n, v.astype(np.float32)) for n, v in t])
    with open(os.path.join(a.out, "config.json"), "w") as f:
        json.dump({"architecture": "DiT-tiny", "num_heads": a.heads}, f)


def silu(x):
    return x / (1 + np.exp(-x))


def haar(d, seed):
    g = np.random.default_rng(seed).normal(size=(d, d))
    q, r = np.linalg.qr(g)
    return q * np.sign(np.diag(r))


def mean_preserving(d, seed):
    """An orthogonal Q with Q 1 = 1: B diag(1, R) B^T, B's first column
    1 / sqrt(d), R Haar of order d - 1."""
    g = np.random.default_rng(seed + 1000).normal(size=(d, d))
    g[:, 0] = 1
    b, r = np.linalg.qr(g)
    b = b * np.sign(np.diag(r))
    inner = np.eye(d)
    inner[1:, 1:] = haar(d - 1, seed)
    return b @ inner @ b.T


def fold_reader(w, b, shift, scale, q):
    """W diag(1 + scale) Q and b + W shift (PyTorch layout [out, in])."""
    return (w * (1 + scale)) @ q, b + w @ shift


def fold_writer(w, b, gate, q, center=True, qt=True):
    """Q^T C diag(gate) W and Q^T C (gate * b)."""
    tw, tb = gate[:, None] * w, gate * b
    if center:
        tw, tb = tw - tw.mean(axis=0), tb - tb.mean()
    return (q.T @ tw, q.T @ tb) if qt else (tw, tb)


def cond_row(spec, dc):
    path, row = spec.rsplit(":", 1)
    v, _ = read_st(path)
    c = v["adaln.c0"] if "adaln.c0" in v else v["c"]
    return np.asarray(c, dtype=np.float64).reshape(-1, dc)[int(row)]


def static_block(v, p, c0, q, kind, other, centered):
    """The static fold of block p (names under p) for condition c0."""
    cnd = other if kind == "other-cond" else c0
    mod = v[p + "adaLN_modulation.1.weight"] @ silu(cnd) + v[p + "adaLN_modulation.1.bias"]
    d = q.shape[0]
    sh1, sc1, g1, sh2, sc2, g2 = (mod[i * d:(i + 1) * d] for i in range(6))
    out = {}
    out["attn.qkv.weight"], out["attn.qkv.bias"] = fold_reader(
        v[p + "attn.qkv.weight"], v[p + "attn.qkv.bias"], sh1, sc1, q)
    out["attn.proj.weight"], out["attn.proj.bias"] = fold_writer(
        v[p + "attn.proj.weight"], v[p + "attn.proj.bias"], g1, q,
        center=centered and kind != "mean-kept", qt=kind != "qt-missing")
    out["mlp.fc1.weight"], out["mlp.fc1.bias"] = fold_reader(
        v[p + "mlp.fc1.weight"], v[p + "mlp.fc1.bias"], sh2, sc2, q)
    out["mlp.fc2.weight"], out["mlp.fc2.bias"] = fold_writer(
        v[p + "mlp.fc2.weight"], v[p + "mlp.fc2.bias"],
        np.ones(d) if kind == "gate-missing" else g2, q, center=centered)
    return out


def rewrite(a):
    v, _ = read_st(os.path.join(a.orig, "model.safetensors"))
    v = {k: np.asarray(x, dtype=np.float64) for k, x in v.items()}
    d = v["blocks.0.attn.proj.weight"].shape[0]
    m = v["blocks.0.mlp.fc1.weight"].shape[0]
    dc = v["blocks.0.adaLN_modulation.1.weight"].shape[1]
    layers = 1 + max(int(k.split(".")[1]) for k in v if k.startswith("blocks."))
    kind, at = (a.mistake.split(":") + ["-1"])[:2] if a.mistake else ("", "-1")
    at = int(at)
    os.makedirs(a.out, exist_ok=True)
    q = None
    if a.adaln != "branch-rotate":
        if a.q:
            q = np.asarray(list(read_st(a.q)[0].values())[0], dtype=np.float64)
        else:
            mp = a.stream == "mean-preserving"
            q = stored((mean_preserving if mp else haar)(d, a.q_seed), "f32")
            save(os.path.join(a.out, "Q.safetensors"), [("Q", q)])
    out = {}
    if a.adaln == "static-fold":
        c0 = cond_row(a.c0, dc) if a.c0 else np.random.default_rng(a.c0_seed).normal(size=dc)
        c0 = stored(c0, "f32")
        other = stored(cond_row(a.other, dc) if a.other else
                       np.random.default_rng(a.c0_seed + 1).normal(size=dc), "f32")
        for i in range(layers):
            p = f"blocks.{i}."
            for k, x in static_block(v, p, c0, q, kind if i == at else "", other,
                                     a.stream == "centered").items():
                out[p + k] = x
        mod = v["final_layer.adaLN_modulation.1.weight"] @ silu(c0) + \
            v["final_layer.adaLN_modulation.1.bias"]
        out["final_layer.linear.weight"], out["final_layer.linear.bias"] = fold_reader(
            v["final_layer.linear.weight"], v["final_layer.linear.bias"], mod[:d], mod[d:],
            np.eye(d) if kind == "final-unrotated" else q)
        out["adaln.c0"] = c0
    else:
        out = dict(v)
        if a.adaln == "branch-rotate":
            hd, hm = sylvester(d) / np.sqrt(d), sylvester(m) / np.sqrt(m)
            for k in list(out):
                if k == "final_layer.linear.weight" and kind == "final-unrotated":
                    continue
                if k.endswith(("qkv.weight", "proj.weight", "fc1.weight", "linear.weight")):
                    out[k] = out[k] @ hd
                elif k.endswith("fc2.weight") and not (kind == "h-missing" and
                                                       k.startswith(f"blocks.{at}.")):
                    out[k] = out[k] @ hm
        elif kind == "q-folded":
            k = f"blocks.{at}.attn.qkv.weight"
            out[k] = out[k] @ q
        elif kind == "final-unrotated":
            out["final_layer.linear.weight"] = out["final_layer.linear.weight"] @ q
    if kind == "noise":
        k = f"blocks.{at}.attn.proj.weight"
        out[k] = out[k] + np.random.default_rng(99).normal(0, 0.05, out[k].shape)
    save(os.path.join(a.out, "model.safetensors"), sorted(out.items()), a.dtype)
    with open(os.path.join(a.out, "config.json"), "w") as f:
        json.dump({"architecture": "DiT-tiny-" + a.adaln,
                   "num_heads": json.load(open(os.path.join(a.orig, "config.json")))["num_heads"]},
                  f)


def inputs(a):
    rng = np.random.default_rng(a.seed)
    x = rng.normal(size=(a.samples, a.tokens, a.d))
    c = rng.normal(size=(a.samples, a.dc))
    if a.c0:
        c[0] = cond_row(a.c0, a.dc)
    t = []
    if not a.no_input:
        t.append(("input", x.astype(np.float32)))
    if not a.no_c:
        t.append(("c", c.astype(np.float32)))
    save(a.out, t)


def main():
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    o = sub.add_parser("original")
    o.add_argument("out")
    for k, dv in (("d", 32), ("heads", 4), ("mlp", 4), ("dc", 16), ("dout", 8),
                  ("layers", 5), ("seed", 1)):
        o.add_argument("--" + k, type=int, default=dv)
    r = sub.add_parser("rewrite")
    r.add_argument("orig")
    r.add_argument("out")
    r.add_argument("--adaln", required=True,
                   choices=["static-fold", "online-unrotate", "per-sample-fold", "branch-rotate"])
    r.add_argument("--q")
    r.add_argument("--q-seed", type=int, default=7)
    r.add_argument("--c0-seed", type=int, default=11)
    r.add_argument("--c0")
    r.add_argument("--mistake")
    r.add_argument("--other")
    r.add_argument("--dtype", default="f32", choices=["f32", "bf16"])
    r.add_argument("--stream", default="centered", choices=["centered", "mean-preserving"])
    i = sub.add_parser("input")
    i.add_argument("out")
    for k in ("samples", "tokens", "d", "dc"):
        i.add_argument("--" + k, type=int, required=True)
    i.add_argument("--seed", type=int, default=3)
    i.add_argument("--c0")
    i.add_argument("--no-input", action="store_true")
    i.add_argument("--no-c", action="store_true")
    a = ap.parse_args()
    {"original": original, "rewrite": rewrite, "input": inputs}[a.cmd](a)


if __name__ == "__main__":
    main()
