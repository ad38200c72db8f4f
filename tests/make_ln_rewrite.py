#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""make_ln_rewrite.py: a tiny timm ViT or GPT-J checkpoint with seeded
weights, and its rewrite with fused LayerNorms, written with NumPy alone
(never by cicheck), as QuaRot and SliceGPT rewrite a LayerNorm model:

- each LayerNorm's gain g and bias b fused into the linears that read it
  (W diag(g), c + W b; GPT-J's q, k and v gain biases they did not have)
  and its tensors left out (the rewrite runs the norm as RMSNorm);
- the writers' outputs (attention's output projection and the MLP's second
  linear, weights and biases) and GPT-J's token embedding without their
  row mean, so the stream stays centred;
- the final LayerNorm fused into the head (timm's head, GPT-J's lm_head,
  both with a bias);
- with --rotate SEED, the residual stream rotated by a Haar-random Q
  (readers W Q, writers Q^T W and c Q, the embedding E Q; Q written to
  REWRITE/R1.safetensors, F64).

    make_ln_rewrite.py vit|gptj ORIGINAL REWRITE [--rotate SEED]
        [--mistake KIND:LAYER] [--layers N] [--d D] [--heads H]
        [--set KEY=JSON] [--input FILE]

Mistakes (one layer each): mean-kept (the MLP writer left uncentred:
timm blocks.L.mlp.fc2, GPT-J transformer.h.L.mlp.fc_out), writer-unrotated
(the attention writer left unrotated: blocks.L.attn.proj,
transformer.h.L.attn.out_proj; needs --rotate), bias-unfused (the first
LayerNorm's bias not fused into its first reader: blocks.L.attn.qkv.bias,
transformer.h.L.attn.q_proj.bias). --set KEY=JSON changes a key of both
config.json files (a planted config fault). --input FILE writes seeded
hidden states [2, 8, d] as "input" (for verify --input)."""
import argparse
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_checkpoint import encode, write_st  # noqa: E402


def vit(d, h, layers, rng):
    """timm's names: blocks.{i}.*, norm, head (10 classes), MLP 4 d."""
    m, v = 4 * d, {}

    def w(*shape, s=0.3):
        return rng.standard_normal(shape) * s

    for i in range(layers):
        p = f"blocks.{i}."
        for n in ("norm1", "norm2"):
            v[p + n + ".weight"] = 1 + w(d, s=0.2)
            v[p + n + ".bias"] = w(d, s=0.2)
        v[p + "attn.qkv.weight"], v[p + "attn.qkv.bias"] = w(3 * d, d), w(3 * d, s=0.1)
        v[p + "attn.proj.weight"], v[p + "attn.proj.bias"] = w(d, d), w(d, s=0.1)
        v[p + "mlp.fc1.weight"], v[p + "mlp.fc1.bias"] = w(m, d), w(m, s=0.1)
        v[p + "mlp.fc2.weight"], v[p + "mlp.fc2.bias"] = w(d, m, s=0.15), w(d, s=0.1)
    v["norm.weight"], v["norm.bias"] = 1 + w(d, s=0.2), w(d, s=0.2)
    v["head.weight"], v["head.bias"] = w(10, d), w(10, s=0.1)
    cfg = {"architecture": "vit_tiny_patch16_224", "num_heads": h, "num_classes": 10}
    return v, cfg


def gptj(d, h, layers, rng):
    """GPT-J's names: transformer.h.{i}.*, wte (64 tokens), ln_f, lm_head
    with its bias; no biases on q, k, v and out_proj; rotary on the whole
    head."""
    m, vocab, v = 4 * d, 64, {}

    def w(*shape, s=0.3):
        return rng.standard_normal(shape) * s

    v["transformer.wte.weight"] = w(vocab, d, s=1.0)
    for i in range(layers):
        p = f"transformer.h.{i}."
        v[p + "ln_1.weight"], v[p + "ln_1.bias"] = 1 + w(d, s=0.2), w(d, s=0.2)
        for n in ("q_proj", "k_proj", "v_proj", "out_proj"):
            v[p + "attn." + n + ".weight"] = w(d, d)
        v[p + "mlp.fc_in.weight"], v[p + "mlp.fc_in.bias"] = w(m, d), w(m, s=0.1)
        v[p + "mlp.fc_out.weight"], v[p + "mlp.fc_out.bias"] = w(d, m, s=0.15), w(d, s=0.1)
    v["transformer.ln_f.weight"], v["transformer.ln_f.bias"] = 1 + w(d, s=0.2), w(d, s=0.2)
    v["lm_head.weight"], v["lm_head.bias"] = w(vocab, d), w(vocab, s=0.1)
    cfg = {"model_type": "gptj", "architectures": ["GPTJForCausalLM"], "n_embd": d,
           "n_head": h, "n_layer": layers, "n_inner": None, "n_positions": 2048,
           "vocab_size": vocab, "rotary_dim": d // h, "layer_norm_epsilon": 1e-5,
           "activation_function": "gelu_new", "tie_word_embeddings": False}
    return v, cfg


# Per family: the layer prefix, (norm, its readers) per LayerNorm, the
# writers (attention's, the MLP's), the final norm and the head, the
# embedding (None: hidden-state inputs), and the reader of bias-unfused.
FAMILY = {
    "vit": dict(layer="blocks.{}.", norms=[("norm1", ["attn.qkv"]), ("norm2", ["mlp.fc1"])],
                writers=["attn.proj", "mlp.fc2"], final="norm", head="head", embed=None,
                unfused="attn.qkv"),
    "gptj": dict(layer="transformer.h.{}.",
                 norms=[("ln_1", ["attn.q_proj", "attn.k_proj", "attn.v_proj",
                                  "mlp.fc_in"])],
                 writers=["attn.out_proj", "mlp.fc_out"], final="transformer.ln_f",
                 head="lm_head", embed="transformer.wte.weight", unfused="attn.q_proj"),
}


def rotation(seed, d, out):
    g = np.random.default_rng(seed).standard_normal((d, d))
    q, r = np.linalg.qr(g)
    q = q * np.sign(np.diag(r))[None, :]
    os.makedirs(out, exist_ok=True)
    write_st(os.path.join(out, "R1.safetensors"),
             [("R1", "F64", q.shape, q.astype("<f8").tobytes())])
    return q


def rewrite(v, fam, layers, q, bad):
    """The fused (and rotated) copy of v in float64; bad: kind -> layer."""
    f, v = FAMILY[fam], dict(v)

    def fuse(norm, lins, skip_bias=None):
        g, b = v.pop(norm + ".weight"), v.pop(norm + ".bias")
        for lin in lins:
            wt = v[lin + ".weight"]
            if lin != skip_bias:
                v[lin + ".bias"] = v.get(lin + ".bias", np.zeros(wt.shape[0])) + wt @ b
            v[lin + ".weight"] = wt * g[None, :]

    readers, writers = [f["head"]], []
    for i in range(layers):
        p = f["layer"].format(i)
        for norm, lins in f["norms"]:
            skip = p + f["unfused"] if bad.get("bias-unfused") == i else None
            fuse(p + norm, [p + x for x in lins], skip)
            readers += [p + x for x in lins]
        for j, wr in enumerate(f["writers"]):
            w = p + wr
            if not (j == 1 and bad.get("mean-kept") == i):
                v[w + ".weight"] = v[w + ".weight"] - v[w + ".weight"].mean(axis=0)
                if w + ".bias" in v:
                    v[w + ".bias"] = v[w + ".bias"] - v[w + ".bias"].mean()
            if not (j == 0 and bad.get("writer-unrotated") == i):
                writers.append(w)
    fuse(f["final"], [f["head"]])
    if f["embed"]:
        e = v[f["embed"]]
        v[f["embed"]] = e - e.mean(axis=1, keepdims=True)
    if q is not None:
        for r in readers:
            v[r + ".weight"] = v[r + ".weight"] @ q
        for w in writers:
            v[w + ".weight"] = q.T @ v[w + ".weight"]
            if w + ".bias" in v:
                v[w + ".bias"] = v[w + ".bias"] @ q
        if f["embed"]:
            v[f["embed"]] = v[f["embed"]] @ q
    return v


def write(out, cfg, v):
    os.makedirs(out, exist_ok=True)
    json.dump(cfg, open(os.path.join(out, "config.json"), "w"), indent=2)
    enc = []
    for name in sorted(v):
        dt, data, _ = encode(np.asarray(v[name], dtype=np.float32), "f32")
        enc.append((name, dt, v[name].shape, data))
    write_st(os.path.join(out, "model.safetensors"), enc)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("family", choices=sorted(FAMILY))
    ap.add_argument("original")
    ap.add_argument("rewrite")
    ap.add_argument("--rotate", type=int)
    ap.add_argument("--mistake", action="append", default=[])
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--d", type=int, default=16)
    ap.add_argument("--heads", type=int, default=2)
    ap.add_argument("--set", action="append", default=[])
    ap.add_argument("--input")
    a = ap.parse_args()
    bad = {}
    for m in a.mistake:
        kind, layer = m.split(":")
        if kind not in ("mean-kept", "writer-unrotated", "bias-unfused"):
            sys.exit(f"make_ln_rewrite: unknown mistake '{kind}'")
        bad[kind] = int(layer)
    if "writer-unrotated" in bad and a.rotate is None:
        sys.exit("make_ln_rewrite: writer-unrotated needs --rotate")
    rng = np.random.default_rng(7)
    v, cfg = (vit if a.family == "vit" else gptj)(a.d, a.heads, a.layers, rng)
    for s in a.set:
        key, val = s.split("=", 1)
        cfg[key] = json.loads(val)
    q = rotation(a.rotate, a.d, a.rewrite) if a.rotate is not None else None
    # the values as stored (float32) are what both rewrites start from
    v = {k: np.asarray(x, dtype=np.float32).astype(np.float64) for k, x in v.items()}
    write(a.original, cfg, v)
    write(a.rewrite, cfg, rewrite(v, a.family, a.layers, q, bad))
    if a.input:
        x = np.random.default_rng(3).standard_normal((2, 8, a.d)).astype("<f4")
        write_st(a.input, [("input", "F32", [16, a.d], x.tobytes())])


if __name__ == "__main__":
    main()
