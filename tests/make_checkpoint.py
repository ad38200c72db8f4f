#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""make_checkpoint.py: a Hugging Face LLaMA checkpoint folder from the
original model of a cicheck --dump (DUMP/original.safetensors of an rmsnorm
case with rope = "half"), written with NumPy alone: config.json with the
keys LlamaForCausalLM reads, and model.safetensors or shards with
model.safetensors.index.json, tensor names model.layers.{i}.*,
model.norm.weight, lm_head.weight and model.embed_tokens.weight (seeded
normal values; the head itself when tied).

    make_checkpoint.py DUMP_ORIGINAL OUT_DIR [--dtype f32|bf16|f16|f64]
        [--shards N] [--layers a-b] [--tied] [--edit NAME:INDEX:VALUE]
        [--set KEY=JSON] [--drop NAME] [--timm] [--scale NAME:FACTOR]
        [--dtype-of NAME:DTYPE] [--extra NAME:DTYPE]
        [--fold] [--rotate SEED] [--r4] [--r2 SEED] [--mistake KIND:LAYER]

--dtype bf16 and f16 round every value to nearest even (the checkpoint a
user would have); --round-only keeps float32 storage of the rounded
values, so the same weights can be compared across storage dtypes.
A pre-LN dump becomes an OPT checkpoint, or with --timm a timm ViT one
(the dump's own names, config.json with architecture and num_heads); a dit
dump a DiT state dict (its own names; config.json with num_heads, or none
with --no-config).
--layers a-b keeps layers a .. b renumbered from 0. --edit, --set and
--drop plant faults (a value, a config key, a missing tensor); --scale
NAME:FACTOR multiplies a tensor (after any rewrite), --dtype-of NAME:DTYPE
stores one tensor in another dtype, and --extra NAME:DTYPE adds a tensor
no model reads (a [4, 4] of ones), for the storage verify's thresholds
follow.

A rewritten checkpoint, as a user's tool would make it (float64 NumPy, then
stored): --fold folds the RMSNorm gains into the linears that read them and
leaves the norm weights out; --rotate SEED rotates the residual stream by a
Haar-random Q (readers W Q, writers Q^T W, the head W Q) and writes Q to
OUT_DIR/R1.safetensors (F64); --r4 fuses the Hadamard H / sqrt(f) of the
MLP width (Sylvester, a power of two) into down_proj, for an online
Hadamard at run time. --mistake KIND:LAYER plants one error at one layer:
writer-unrotated (o_proj left unrotated), gain-kept (input_layernorm's gain
kept although folded), r4-missing (down_proj without H), embed-unrotated
(embed_tokens left unrotated; LAYER unused), and for the diagnosis of
cicheck verify one of each known break (cases/known-breaks/): gain-unfolded
(input_layernorm's gain kept in the norm and not folded into its readers:
rmsnorm-gamma-after-rotation), r4-fused (the Hadamard fused into down_proj
of that layer alone, without --r4: r4-without-online-hadamard),
r3-before-rope (the per-head Hadamard fused into q_proj and k_proj, before
RoPE), embed-centred (the embeddings' rows centred; LAYER unused), and
with --r2 SEED (one random orthogonal R2 per key/value head on v_proj's
rows and on the o_proj columns of every query head reading it):
r2-per-query-head (o_proj's columns of each query head rotated by a matrix
of its own, v_proj by the first head's of its group), r2-values-only (v_proj
rotated, o_proj not) and r2-mismatch (v_proj and o_proj each rotated per
head, by different matrices: no single tensor is wrong). On OPT (a preln
dump) --fold fuses the LayerNorms (rewrite_opt) and the mistakes are
mean-kept, writer-unrotated and unfused (that layer's LayerNorms kept, its
readers rotated: rotate-without-fusion)."""
import argparse
import json
import math
import os
import struct
import sys

import numpy as np


def read_st(path):
    b = open(path, "rb").read()
    n = struct.unpack("<Q", b[:8])[0]
    h = json.loads(b[8:8 + n])
    meta = h.pop("__metadata__", {})
    out = {}
    for k, v in h.items():
        s, e = v["data_offsets"]
        dt = {"F32": "<f4", "F64": "<f8"}[v["dtype"]]
        out[k] = np.frombuffer(b[8 + n + s:8 + n + e], dtype=dt).reshape(v["shape"])
    return out, meta


def to_bf16_bits(a):
    """float32 -> bf16 bit patterns, round to nearest even."""
    u = np.ascontiguousarray(a, dtype="<f4").view("<u4").astype(np.uint64)
    u = (u + 0x7FFF + ((u >> 16) & 1)) >> 16
    return u.astype("<u2")


def from_bf16_bits(u):
    return (u.astype("<u4") << 16).view("<f4")


def encode(a, dtype):
    """(dtype name, bytes, the values as float32 after the storage rounding)."""
    a = np.asarray(a, dtype=np.float32)
    if dtype == "bf16":
        bits = to_bf16_bits(a)
        return "BF16", bits.tobytes(), from_bf16_bits(bits).reshape(a.shape)
    if dtype == "f16":
        h = a.astype("<f2")
        return "F16", h.tobytes(), h.astype(np.float32)
    if dtype == "f64":
        return "F64", a.astype("<f8").tobytes(), a
    return "F32", a.astype("<f4").tobytes(), a


def write_st(path, tensors):
    """tensors: list of (name, dtype name, shape, bytes)."""
    header, off = {}, 0
    for name, dt, shape, data in tensors:
        header[name] = {"dtype": dt, "shape": list(shape), "data_offsets": [off, off + len(data)]}
        off += len(data)
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h)
        for _, _, _, data in tensors:
            f.write(data)


def sylvester(n):
    h = np.ones((1, 1))
    while h.shape[0] < n:
        h = np.block([[h, h], [h, -h]])
    if h.shape[0] != n:
        sys.exit(f"make_checkpoint: --r4 needs a power-of-two MLP width, not {n}")
    return h


def haar(rng, n):
    """A Haar-random n x n orthogonal matrix (float64)."""
    q, r = np.linalg.qr(rng.standard_normal((n, n)))
    return q * np.sign(np.diag(r))[None, :]


def rewrite_r2(v, p, a, heads, kv, mistake):
    """--r2 on layer prefix p: per key/value head j an orthogonal R_j, v_proj's
    rows of head j := R_j^T V_j and o_proj's columns of each query head h
    reading j := O_h R_j; mistake (one of r2-per-query-head, r2-values-only,
    r2-mismatch) plants that break instead."""
    wv, wo = v[p + "self_attn.v_proj.weight"], v[p + "self_attn.o_proj.weight"]
    hd = wo.shape[0] // heads
    rng = np.random.default_rng(a.r2 * 1000 + int(p.split(".")[2]))
    r = [haar(rng, hd) for _ in range(kv)]
    per_head = [haar(rng, hd) for _ in range(heads)]
    other = [haar(rng, hd) for _ in range(kv)]
    g = heads // kv
    wv, wo = wv.copy(), wo.copy()
    for j in range(kv):
        rj = per_head[j * g] if mistake == "r2-per-query-head" else r[j]
        wv[j * hd:(j + 1) * hd] = rj.T @ wv[j * hd:(j + 1) * hd]
    for h in range(heads):
        rh = {"r2-per-query-head": per_head[h], "r2-mismatch": other[h // g]}.get(mistake,
                                                                              r[h // g])
        if mistake != "r2-values-only":
            wo[:, h * hd:(h + 1) * hd] = wo[:, h * hd:(h + 1) * hd] @ rh
    v[p + "self_attn.v_proj.weight"], v[p + "self_attn.o_proj.weight"] = wv, wo


def rewrite(values, a, d, heads=1, kv=1):
    """--fold, --rotate, --r4, --r2 and --mistake on the float32 values (name
    -> array), in float64; returns the new name -> float32 arrays."""
    if not (a.fold or a.rotate is not None or a.r4 or a.r2 is not None or a.mistake):
        return values
    v = {k: np.asarray(x, dtype=np.float64) for k, x in values.items()}
    bad = {}
    for m in a.mistake:
        kind, layer = m.split(":")
        bad[kind] = int(layer)
    layers = sorted({int(k.split(".")[2]) for k in v if k.startswith("model.layers.")})
    readers = {"input_layernorm": ["self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj"],
               "post_attention_layernorm": ["mlp.gate_proj", "mlp.up_proj"]}
    q = rotation(a, d)
    head = "model.embed_tokens.weight" if a.tied else "lm_head.weight"
    for l in layers:
        p = f"model.layers.{l}."
        for norm, lins in readers.items():
            gname = p + norm + ".weight"
            unfolded = norm == "input_layernorm" and bad.get("gain-unfolded") == l
            if a.fold and not unfolded:
                for lin in lins:
                    v[p + lin + ".weight"] = v[p + lin + ".weight"] * v[gname][None, :]
                if not (norm == "input_layernorm" and bad.get("gain-kept") == l):
                    del v[gname]
            if q is not None:
                for lin in lins:
                    v[p + lin + ".weight"] = v[p + lin + ".weight"] @ q
        if q is not None:
            if bad.get("writer-unrotated") != l:
                v[p + "self_attn.o_proj.weight"] = q.T @ v[p + "self_attn.o_proj.weight"]
            v[p + "mlp.down_proj.weight"] = q.T @ v[p + "mlp.down_proj.weight"]
        if (a.r4 and bad.get("r4-missing") != l) or bad.get("r4-fused") == l:
            f = v[p + "mlp.down_proj.weight"].shape[1]
            v[p + "mlp.down_proj.weight"] = v[p + "mlp.down_proj.weight"] @ (sylvester(f) /
                                                                             math.sqrt(f))
        if bad.get("r3-before-rope") == l:  # q, k of every head := H (q, k) before RoPE
            for w in ("self_attn.q_proj.weight", "self_attn.k_proj.weight"):
                hd = d // heads
                h = sylvester(hd) / math.sqrt(hd)
                x = v[p + w]
                v[p + w] = np.vstack([h @ x[i:i + hd] for i in range(0, x.shape[0], hd)])
        r2bad = [k for k in ("r2-per-query-head", "r2-values-only", "r2-mismatch")
                 if bad.get(k) == l]
        if a.r2 is not None:
            rewrite_r2(v, p, a, heads, kv, r2bad[0] if r2bad else None)
    if a.fold:
        v[head] = v[head] * v["model.norm.weight"][None, :]
        del v["model.norm.weight"]
    if q is not None:
        v[head] = v[head] @ q
        e = "model.embed_tokens.weight"
        if not a.tied and "embed-centred" in bad:  # as a LayerNorm fusion would
            v[e] = v[e] - v[e].mean(axis=1, keepdims=True)
        if not a.tied and "embed-unrotated" not in bad:  # the stream starts rotated: E Q
            v[e] = v[e] @ q
    return {k: x.astype(np.float32) for k, x in v.items()}


def rotation(a, d):
    """--rotate SEED: a random orthogonal Q (float64), also written to
    OUT/R1.safetensors; None without --rotate."""
    if a.rotate is None:
        return None
    g = np.random.default_rng(a.rotate).standard_normal((d, d))
    q, r = np.linalg.qr(g)
    q = q * np.sign(np.diag(r))[None, :]
    os.makedirs(a.out, exist_ok=True)
    write_st(os.path.join(a.out, "R1.safetensors"), [("R1", "F64", q.shape,
                                                       q.astype("<f8").tobytes())])
    return q


def rewrite_opt(values, a, d):
    """--fold and --rotate on OPT's float32 values, as QuaRot and SliceGPT
    rewrite OPT: each LayerNorm's gain and bias fused into its readers (W
    diag(g), c + W b) and the norm tensors dropped (run as RMSNorm), the
    writers' outputs and the embeddings centred (rows without their mean),
    the final LayerNorm fused into an untied lm_head (with a bias); then
    everything rotated by Q. --mistake mean-kept:L leaves fc2 of layer L
    uncentred, writer-unrotated:L its out_proj unrotated."""
    if not (a.fold or a.rotate is not None):
        return values
    v = {k: np.asarray(x, dtype=np.float64) for k, x in values.items()}
    bad = {m.split(":")[0]: int(m.split(":")[1]) for m in a.mistake}
    pre = "model.decoder."
    layers = sorted({int(k.split(".")[3]) for k in v if k.startswith(pre + "layers.")})

    def fuse(norm, lins):
        if bad.get("unfused") is not None and f"layers.{bad['unfused']}." in norm:
            return  # the LayerNorm kept as it is: its readers only rotated
        g, b = v.pop(norm + ".weight"), v.pop(norm + ".bias")
        for lin in lins:
            v[lin + ".bias"] = v[lin + ".bias"] + v[lin + ".weight"] @ b
            v[lin + ".weight"] = v[lin + ".weight"] * g[None, :]

    q = rotation(a, d)
    v["lm_head.weight"] = v.get("lm_head.weight", v[pre + "embed_tokens.weight"]).copy()
    v["lm_head.bias"] = np.zeros(v["lm_head.weight"].shape[0])
    readers, writers = [], []
    for l in layers:
        p = f"{pre}layers.{l}."
        attn = [p + "self_attn." + x for x in ("q_proj", "k_proj", "v_proj")]
        fuse(p + "self_attn_layer_norm", attn)
        fuse(p + "final_layer_norm", [p + "fc1"])
        readers += attn + [p + "fc1"]
        for w in (p + "self_attn.out_proj", p + "fc2"):
            if not (w.endswith("fc2") and bad.get("mean-kept") == l):
                v[w + ".weight"] = v[w + ".weight"] - v[w + ".weight"].mean(axis=0)
                v[w + ".bias"] = v[w + ".bias"] - v[w + ".bias"].mean()
            if not (w.endswith("out_proj") and bad.get("writer-unrotated") == l):
                writers.append(w)
    fuse(pre + "final_layer_norm", ["lm_head"])
    for e in (pre + "embed_tokens.weight", pre + "embed_positions.weight"):
        v[e] = v[e] - v[e].mean(axis=1, keepdims=True)
    if q is not None:
        for r in readers + ["lm_head"]:
            v[r + ".weight"] = v[r + ".weight"] @ q
        for w in writers:
            v[w + ".weight"] = q.T @ v[w + ".weight"]
            v[w + ".bias"] = v[w + ".bias"] @ q
        for e in (pre + "embed_tokens.weight", pre + "embed_positions.weight"):
            v[e] = v[e] @ q
    return {k: x.astype(np.float32) for k, x in v.items()}


def opt_names(t, meta, lo, hi):
    """(OPT name, values) of a preln dump (timm names blocks.{i}.*): q, k, v
    split out of attn.qkv, norm1 / norm2 as self_attn_layer_norm /
    final_layer_norm; the decoder's final_layer_norm, the input embeddings
    (tied to the head) and the positions seeded when the dump has none (a
    residual readout)."""
    d = int(meta["d_model"])
    rng = np.random.default_rng(11)
    out = {}
    ren = {"norm1.": "self_attn_layer_norm.", "attn.proj.": "self_attn.out_proj.",
           "norm2.": "final_layer_norm.", "mlp.fc1.": "fc1.", "mlp.fc2.": "fc2."}
    for k, v in t.items():
        if not k.startswith("blocks."):
            continue
        i, rest = k[len("blocks."):].split(".", 1)
        if not lo <= int(i) <= hi:
            continue
        p = f"model.decoder.layers.{int(i) - lo}."
        v = np.array(v, dtype=np.float32)
        if rest.startswith("attn.qkv."):
            kind = rest.split(".")[-1]
            parts = np.split(v.reshape(-1) if kind == "bias" else v, 3)
            for name, part in zip(("q_proj", "k_proj", "v_proj"), parts):
                out[p + f"self_attn.{name}.{kind}"] = part
            continue
        for a_, b_ in ren.items():
            if rest.startswith(a_):
                out[p + b_ + rest[len(a_):]] = v.reshape(-1) if v.ndim == 2 and v.shape[0] == 1 else v
    vocab = int(meta["d_out"])
    out["model.decoder.final_layer_norm.weight"] = np.asarray(
        t["norm.weight"], np.float32).reshape(-1) if "norm.weight" in t else \
        (1 + 0.1 * rng.standard_normal(d)).astype(np.float32)
    out["model.decoder.final_layer_norm.bias"] = np.asarray(
        t["norm.bias"], np.float32).reshape(-1) if "norm.bias" in t else \
        (0.1 * rng.standard_normal(d)).astype(np.float32)
    out["model.decoder.embed_tokens.weight"] = np.asarray(t["head.weight"], np.float32) \
        if "head.weight" in t else rng.standard_normal((vocab, d)).astype(np.float32)
    out["model.decoder.embed_positions.weight"] = rng.standard_normal(
        (int(meta["tokens"]) + 2, d)).astype(np.float32)
    cfg = {"architectures": ["OPTForCausalLM"], "model_type": "opt", "hidden_size": d,
           "num_attention_heads": int(meta["heads"]), "ffn_dim": int(meta["d_mlp"]),
           "num_hidden_layers": hi - lo + 1, "vocab_size": vocab,
           "word_embed_proj_dim": d, "do_layer_norm_before": True,
           "activation_function": meta["activation"],
           "max_position_embeddings": int(meta["tokens"]), "enable_bias": True,
           "layer_norm_elementwise_affine": True, "tie_word_embeddings": True}
    return out, cfg


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dump")
    ap.add_argument("out")
    ap.add_argument("--dtype", default="f32", choices=["f32", "bf16", "f16", "f64"])
    ap.add_argument("--round-only", action="store_true")
    ap.add_argument("--shards", type=int, default=1)
    ap.add_argument("--layers")
    ap.add_argument("--tied", action="store_true")
    ap.add_argument("--edit", action="append", default=[])
    ap.add_argument("--set", action="append", default=[])
    ap.add_argument("--drop", action="append", default=[])
    ap.add_argument("--fold", action="store_true")
    ap.add_argument("--timm", action="store_true")
    ap.add_argument("--no-config", action="store_true")
    ap.add_argument("--rotate", type=int)
    ap.add_argument("--r4", action="store_true")
    ap.add_argument("--r2", type=int)
    ap.add_argument("--mistake", action="append", default=[])
    ap.add_argument("--scale", action="append", default=[])
    ap.add_argument("--dtype-of", action="append", default=[])
    ap.add_argument("--extra", action="append", default=[])
    a = ap.parse_args()

    t, meta = read_st(a.dump)
    L = int(meta["layers"])
    lo, hi = 0, L - 1
    if a.layers:
        lo, hi = (int(x) for x in a.layers.split("-"))
    if meta.get("block") == "dit":  # the DiT reference code's names: the dump's own
        values = {k: np.asarray(v, np.float32).reshape(-1) if v.ndim == 2 and v.shape[0] == 1
                  else np.asarray(v, np.float32) for k, v in t.items()
                  if k not in ("input", "cond")}
        cfg = None if a.no_config else {"architecture": "DiT-custom",
                                        "num_heads": int(meta["heads"])}
        write_folder(a, cfg, values)
        return
    if meta.get("block") == "preln" and a.timm:  # a timm ViT: the dump's names
        values = {k: np.asarray(v, np.float32).reshape(-1) if v.ndim == 2 and v.shape[0] == 1
                  else np.asarray(v, np.float32) for k, v in t.items() if k != "input"}
        cfg = {"architecture": "vit_custom_patch16", "num_heads": int(meta["heads"]),
               "num_classes": int(meta["d_out"])}
        write_folder(a, cfg, values)
        return
    if meta.get("block") == "preln":  # OPT
        values, cfg = opt_names(t, meta, lo, hi)
        values = rewrite_opt(values, a, int(meta["d_model"]))
        for kv in a.set:
            key, val = kv.split("=", 1)
            cfg[key] = json.loads(val)
        for e in a.edit:
            name, idx, val = e.rsplit(":", 2)
            values[name].reshape(-1)[int(idx)] = float(val)
        write_folder(a, cfg, values)
        return
    if meta.get("block") != "rmsnorm" or meta.get("rope") != "half":
        sys.exit("make_checkpoint: the dump must be an rmsnorm model with rope = half, "
                 "or preln (OPT)")
    names = []
    for k in t:
        if k == "input":
            continue
        if k.startswith("layers."):
            i, rest = k[len("layers."):].split(".", 1)
            if not lo <= int(i) <= hi:
                continue
            names.append((f"model.layers.{int(i) - lo}.{rest}", k))
        elif k == "norm.weight":
            names.append(("model.norm.weight", k))
        elif k == "lm_head.weight":
            names.append(("model.embed_tokens.weight" if a.tied else "lm_head.weight", k))
    d = int(meta["d_model"])
    qwen2 = any(k.endswith("self_attn.q_proj.bias") for k in t)  # qkv_bias = true
    cfg = {
        "architectures": ["Qwen2ForCausalLM" if qwen2 else "LlamaForCausalLM"],
        "model_type": "qwen2" if qwen2 else "llama",
        "hidden_size": d,
        "num_attention_heads": int(meta["heads"]),
        "num_key_value_heads": int(meta["kv_heads"]),
        "intermediate_size": int(meta["d_mlp"]),
        "num_hidden_layers": hi - lo + 1,
        "vocab_size": int(meta["d_out"]),
        "rms_norm_eps": float.fromhex(meta["eps"]),
        "rope_theta": float(meta["rope_theta"]),
        "hidden_act": "silu",
        "max_position_embeddings": 4096,
        "tie_word_embeddings": bool(a.tied),
        "torch_dtype": {"f32": "float32", "bf16": "bfloat16", "f16": "float16",
                        "f64": "float64"}[a.dtype],
    }
    if qwen2:  # as Qwen2's configs have them: a window that is off
        cfg.update({"use_sliding_window": False, "sliding_window": 4, "max_window_layers": 28})
    if not a.tied:  # the input embedding a real checkpoint has: seeded here
        names.append(("model.embed_tokens.weight", None))
    for kv in a.set:
        key, val = kv.split("=", 1)
        cfg[key] = json.loads(val)
    values = {}
    for hf, k in names:
        if k is None:
            values[hf] = np.random.default_rng(7).standard_normal(
                (int(meta["d_out"]), int(meta["d_model"]))).astype(np.float32)
            continue
        v = np.array(t[k], dtype=np.float32)
        if v.ndim == 2 and v.shape[0] == 1 and ("layernorm" in k or k == "norm.weight" or
                                                k.endswith(".bias")):
            v = v.reshape(-1)
        values[hf] = v
    os.makedirs(a.out, exist_ok=True)
    values = rewrite(values, a, int(meta["d_model"]), int(meta["heads"]), int(meta["kv_heads"]))
    for e in a.edit:
        name, idx, val = e.rsplit(":", 2)
        flat = values[name].reshape(-1)
        flat[int(idx)] = float(val)
    for name in a.drop:
        del values[name]
    write_folder(a, cfg, values)


def write_folder(a, cfg, values):
    os.makedirs(a.out, exist_ok=True)
    if cfg is not None:
        json.dump(cfg, open(os.path.join(a.out, "config.json"), "w"), indent=2)
    values = dict(values)
    for sc in a.scale:
        name, f = sc.rsplit(":", 1)
        values[name] = (values[name].astype(np.float64) * float(f)).astype(np.float32)
    dtype_of = dict(x.rsplit(":", 1) for x in a.dtype_of)
    for x in a.extra:
        name, dt = x.rsplit(":", 1)
        values[name] = np.ones((4, 4), np.float32)
        dtype_of[name] = dt
    enc = []
    for hf in sorted(values):
        dt, data, rounded = encode(values[hf], dtype_of.get(hf, a.dtype))
        if a.round_only:
            dt, data, rounded = encode(rounded, "f32")
        enc.append((hf, dt, values[hf].shape, data))
    if a.shards <= 1:
        write_st(os.path.join(a.out, "model.safetensors"), enc)
        return
    per = (len(enc) + a.shards - 1) // a.shards
    wmap = {}
    for s in range(a.shards):
        part = enc[s * per:(s + 1) * per]
        fn = f"model-{s + 1:05d}-of-{a.shards:05d}.safetensors"
        write_st(os.path.join(a.out, fn), part)
        for name, _, _, _ in part:
            wmap[name] = fn
    json.dump({"metadata": {"total_size": sum(len(x[3]) for x in enc)}, "weight_map": wmap},
              open(os.path.join(a.out, "model.safetensors.index.json"), "w"), indent=2)


if __name__ == "__main__":
    main()
