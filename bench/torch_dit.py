#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""torch_dit.py: the float64 forward of a dumped DiT model in PyTorch, timed,
for the benchmark's truth / torch ratio (bench/run.sh).

  torch_dit.py DUMP_DIR [--reps N] [--threads T]

DUMP_DIR is a `cicheck run --dump` folder of a dit case; its
original.safetensors (weights, input, conditioning) is the model. The forward
is scripts/npref's float64 transcription of the original dit block
(npref.adaln, strategy "none": adaLN-Zero modulation, affine-free LayerNorm,
attention, GELU, gated residual adds, the final layer), written with torch
tensors. It is checked against the dump's proven truth (outputs.safetensors,
"truth": 2-norm relative difference) and timed, best of --reps after one
warm-up, on T threads (default: the online cores, as cicheck's MPFR engine).
The same forward in NumPy float64 (its products through the machine's dgemm)
is timed too: the dgemm floor, the comparison when torch is not installed.

Prints one line per figure, in words bench/run.sh reads:
  torch: <version>, <T> threads: float64 forward <s> s (best of N); rel diff to truth <r>
  numpy float64 (dgemm floor): forward <s> s (best of N); rel diff to truth <r>
or "torch not installed: skipped" in place of the first. Exit 0, or 2 when
the dump cannot be read or is not a dit model.
"""

import argparse
import math
import os
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "scripts"))
sys.dont_write_bytecode = True

from npref.model import Model  # noqa: E402
from npref.tensorfile import InputError, read_safetensors  # noqa: E402


def torch_forward(torch, t, c):
    """npref.adaln's DitRun.run for the original model (kind none), in torch
    float64: t maps tensor names to float64 tensors, c is the npref Cfg."""
    d, f, S, N, H = c.d, c.d_mlp, c.samples, c.tokens, c.heads
    dh = d // H
    F = torch.nn.functional

    def linear(x, p):
        b = t.get(p + ".bias")
        y = x @ t[p + ".weight"].T
        return y if b is None else y + b

    def modulation(p, k):
        m = linear(F.silu(t["cond"]), p + "adaLN_modulation.1")
        return [m[:, i * d:(i + 1) * d].repeat_interleave(N, dim=0) for i in range(k)]

    def norm0(x):
        if c.center:
            x = x - x.mean(dim=1, keepdim=True)
        return x / torch.sqrt((x * x).mean(dim=1, keepdim=True) + c.eps)

    def attention(q, k, v):
        def split(a):  # [S*N, d] -> [S, H, N, dh]
            return a.reshape(S, N, H, dh).transpose(1, 2)
        s = split(q) @ split(k).transpose(2, 3) / math.sqrt(dh)
        if c.causal:
            s = s.masked_fill(~torch.ones(N, N, dtype=torch.bool).tril(), float("-inf"))
        p = torch.softmax(s, dim=-1)
        return (p @ split(v)).transpose(1, 2).reshape(S * N, d)

    def act(x):
        if c.act == "gelu-tanh":
            return F.gelu(x, approximate="tanh")
        if c.act == "gelu":
            return F.gelu(x)
        if c.act == "silu":
            return F.silu(x)
        if c.act == "relu":
            return F.relu(x)
        return x * torch.sigmoid(1.702 * x)  # quick-gelu

    x = t["input"]
    for i in range(c.layers):
        p = f"blocks.{i}."
        sh1, sc1, g1, sh2, sc2, g2 = modulation(p, 6)
        qkv = linear(norm0(x) * (1.0 + sc1) + sh1, p + "attn.qkv")
        a = attention(qkv[:, :d], qkv[:, d:2 * d], qkv[:, 2 * d:])
        x = x + g1 * linear(a, p + "attn.proj")
        u = act(linear(norm0(x) * (1.0 + sc2) + sh2, p + "mlp.fc1"))
        x = x + g2 * linear(u, p + "mlp.fc2")
    sh, sc = modulation("final_layer.", 2)
    return linear(norm0(x) * (1.0 + sc) + sh, "final_layer.linear")


def best_of(fn, reps):
    """(best wall seconds of reps runs after one warm-up, the last result)"""
    y = fn()
    best = math.inf
    for _ in range(reps):
        t0 = time.perf_counter()
        y = fn()
        best = min(best, time.perf_counter() - t0)
    return best, y


def rel_diff(y, truth):
    y = np.asarray(y, dtype=np.float64).reshape(-1)
    return float(np.linalg.norm(y - truth) / np.linalg.norm(truth))


def main(argv):
    ap = argparse.ArgumentParser(prog="torch_dit.py", description=__doc__.split("\n")[0])
    ap.add_argument("dir", help="a cicheck run --dump folder of a dit case")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    a = ap.parse_args(argv)
    try:
        m = Model(os.path.join(a.dir, "original.safetensors"))
        outs, _ = read_safetensors(os.path.join(a.dir, "outputs.safetensors"))
    except InputError as e:
        print(f"torch_dit.py: {e}", file=sys.stderr)
        return 2
    c = m.cfg
    if c.block != "dit" or c.kind != "none" or "final_layer.linear.weight" not in m.t:
        print(f"torch_dit.py: {a.dir}: not the original dit model with a final layer",
              file=sys.stderr)
        return 2
    if "truth" not in outs:
        print(f"torch_dit.py: {a.dir}/outputs.safetensors has no 'truth'", file=sys.stderr)
        return 2
    truth = outs["truth"].reshape(-1)
    reps = max(a.reps, 1)
    try:
        import torch
    except ImportError:
        torch = None
    if torch is None:
        print("torch not installed: skipped")
    else:
        torch.set_num_threads(a.threads)
        t = {k: torch.from_numpy(np.ascontiguousarray(v)) for k, v in m.t.items()}
        with torch.no_grad():
            secs, y = best_of(lambda: torch_forward(torch, t, c), reps)
        print(f"torch: {torch.__version__}, {torch.get_num_threads()} threads: float64 "
              f"forward {secs:.4f} s (best of {reps}); rel diff to truth "
              f"{rel_diff(y.numpy(), truth):.3g}")
    secs, y = best_of(m.forward, reps)
    print(f"numpy float64 (dgemm floor): forward {secs:.4f} s (best of {reps}); "
          f"rel diff to truth {rel_diff(y, truth):.3g}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
