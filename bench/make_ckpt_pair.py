#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""make_ckpt_pair.py OUT --d D --layers L --heads H --kv-heads K --mlp M
[--vocab V] [--seed S] [--plant LAYER] [--scale LAYER:S] [--dtype bf16|f32]

A LLaMA-shaped checkpoint pair for `cicheck verify`, written tensor by
tensor (memory: a few tensors, not the model): OUT/orig (the original,
bf16 shards, model.safetensors.index.json, config.json), OUT/rw (its
rewrite: RMSNorm gains folded into their readers, the residual stream
rotated by a random orthogonal R1 = Q, bf16; norm weights left out) and
OUT/R1.safetensors (Q, float32). --plant LAYER leaves that layer's
o_proj unrotated (W instead of Q^T W: a broken layer); --scale LAYER:S
multiplies that layer's rotated o_proj by S (in double, then stored: a
residual of about |S - 1| times o's share of the stream; the tests plant
one at a threshold); --dtype f32 stores both in float32 instead of bf16.
Row-vector algebra: readers W diag(g) Q, writers Q^T W, embedding E Q,
lm_head W diag(g) Q. Needs numpy only."""
import argparse
import hashlib
import json
import os
import struct

import numpy as np


def bf16(a):
    """float32 -> bf16 bits, round to nearest even."""
    u = np.ascontiguousarray(a, dtype=np.float32).view(np.uint32)
    r = ((u >> 16) & 1) + 0x7FFF
    return ((u + r) >> 16).astype(np.uint16)


def bf16_value(a):
    return (bf16(a).astype(np.uint32) << 16).view(np.float32)


def rng_of(seed, name):
    h = hashlib.sha256(f"{seed}:{name}".encode()).digest()
    return np.random.default_rng(int.from_bytes(h[:8], "little"))


class Shard:
    """A safetensors file whose header is written first, tensors after."""

    def __init__(self, path, specs):
        self.f = open(path, "wb")
        hdr, off = {}, 0
        for name, shape, dt in specs:
            n = int(np.prod(shape)) * (2 if dt == "BF16" else 4)
            hdr[name] = {"dtype": dt, "shape": list(shape), "data_offsets": [off, off + n]}
            off += n
        h = json.dumps(hdr).encode()
        h += b" " * (-len(h) % 8)
        self.f.write(struct.pack("<Q", len(h)) + h)

    def put(self, arr):
        self.f.write(np.ascontiguousarray(arr).tobytes())

    def close(self):
        self.f.close()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--d", type=int, required=True)
    ap.add_argument("--layers", type=int, required=True)
    ap.add_argument("--heads", type=int, required=True)
    ap.add_argument("--kv-heads", type=int, required=True)
    ap.add_argument("--mlp", type=int, required=True)
    ap.add_argument("--vocab", type=int, default=512)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--plant", type=int, default=-1)
    ap.add_argument("--scale", default="-1:1")
    ap.add_argument("--dtype", choices=("bf16", "f32"), default="bf16")
    a = ap.parse_args()
    d, L, m, V = a.d, a.layers, a.mlp, a.vocab
    s_layer, s_by = int(a.scale.split(":")[0]), float(a.scale.split(":")[1])
    dt = "BF16" if a.dtype == "bf16" else "F32"
    store = bf16 if a.dtype == "bf16" else (lambda x: np.asarray(x, dtype=np.float32))
    value = bf16_value if a.dtype == "bf16" else (lambda x: np.asarray(x, dtype=np.float32))
    dkv = d // a.heads * a.kv_heads
    q, _ = np.linalg.qr(rng_of(a.seed, "R1").standard_normal((d, d)))
    q = q.astype(np.float32)
    for side in ("orig", "rw"):
        os.makedirs(os.path.join(a.out, side), exist_ok=True)
    with open(os.path.join(a.out, "R1.safetensors"), "wb") as f:
        h = json.dumps({"R1": {"dtype": "F32", "shape": [d, d],
                               "data_offsets": [0, d * d * 4]}}).encode()
        h += b" " * (-len(h) % 8)
        f.write(struct.pack("<Q", len(h)) + h + q.tobytes())
    shapes = {"input_layernorm.weight": (d,), "self_attn.q_proj.weight": (d, d),
              "self_attn.k_proj.weight": (dkv, d), "self_attn.v_proj.weight": (dkv, d),
              "self_attn.o_proj.weight": (d, d), "post_attention_layernorm.weight": (d,),
              "mlp.gate_proj.weight": (m, d), "mlp.up_proj.weight": (m, d),
              "mlp.down_proj.weight": (d, m)}
    readers = {"self_attn.q_proj.weight": "input_layernorm.weight",
               "self_attn.k_proj.weight": "input_layernorm.weight",
               "self_attn.v_proj.weight": "input_layernorm.weight",
               "mlp.gate_proj.weight": "post_attention_layernorm.weight",
               "mlp.up_proj.weight": "post_attention_layernorm.weight"}
    files = []  # per shard: [(hf name, shape)]
    files.append([("model.embed_tokens.weight", (V, d))])
    for l in range(L):
        files.append([(f"model.layers.{l}.{k}", s) for k, s in shapes.items()])
    files.append([("model.norm.weight", (d,)), ("lm_head.weight", (V, d))])
    n_sh = len(files)
    wmap = {"orig": {}, "rw": {}}

    def orig_value(name, shape):
        g = rng_of(a.seed, name)
        if len(shape) == 1:
            return value(1 + 0.1 * g.standard_normal(shape, dtype=np.float32))
        std = 1.0 if "embed" in name else 0.02
        return value(std * g.standard_normal(shape, dtype=np.float32))

    for i, names in enumerate(files):
        fname = f"model-{i + 1:05d}-of-{n_sh:05d}.safetensors"
        so = Shard(os.path.join(a.out, "orig", fname), [(n, s, dt) for n, s in names])
        rw_names = [(n, s) for n, s in names if len(s) == 2]
        sr = Shard(os.path.join(a.out, "rw", fname), [(n, s, dt) for n, s in rw_names])
        for n, s in names:
            w = orig_value(n, s)
            so.put(store(w))
            wmap["orig"][n] = fname
            if len(s) == 1:
                continue
            wmap["rw"][n] = fname
            key = n.split(".", 3)[-1] if n.startswith("model.layers.") else n
            if key in readers:
                gname = n.replace(key, readers[key])
                g = orig_value(gname, (d,))
                w = (w * g[None, :]) @ q
            elif key in ("self_attn.o_proj.weight", "mlp.down_proj.weight"):
                if not (key == "self_attn.o_proj.weight" and int(n.split(".")[2]) == a.plant):
                    w = q.T @ w  # else the planted mistake: the writer unrotated
            elif n == "model.embed_tokens.weight":
                w = w @ q
            elif n == "lm_head.weight":
                w = (w * orig_value("model.norm.weight", (d,))[None, :]) @ q
            if key == "self_attn.o_proj.weight" and int(n.split(".")[2]) == s_layer:
                w = w.astype(np.float64) * s_by  # S unrounded, the product rounded once
            sr.put(store(w))
        so.close()
        sr.close()
    cfg = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": d,
           "intermediate_size": m, "num_attention_heads": a.heads,
           "num_key_value_heads": a.kv_heads, "num_hidden_layers": L, "rms_norm_eps": 1e-5,
           "rope_theta": 10000.0, "vocab_size": V, "tie_word_embeddings": False,
           "hidden_act": "silu", "torch_dtype": "bfloat16"}
    for side in ("orig", "rw"):
        with open(os.path.join(a.out, side, "config.json"), "w") as f:
            json.dump(cfg, f, indent=1)
        with open(os.path.join(a.out, side, "model.safetensors.index.json"), "w") as f:
            json.dump({"metadata": {}, "weight_map": wmap[side]}, f, indent=1)


if __name__ == "__main__":
    main()
