#!/bin/sh
# SPDX-License-Identifier: MIT
# test_verify_ln.sh: cicheck verify --layernorm fused on timm ViT and GPT-J
# checkpoints, the rewrites written by tests/make_ln_rewrite.py (NumPy, never
# cicheck): the correct rewrite is equivalent at every block (exit 0); a
# planted mistake at block 2 (mean kept in a writer, a writer unrotated, a
# LayerNorm bias not fused) is exit 1 with block 2 named first; bad configs
# are exit 2 naming config.json and the key. First, the conventions: the
# logits cicheck's truth gives for each original equal a NumPy forward of
# the family as its own code computes it (GPT-J: rotate_every_two on the
# first rotary_dim dims of each head, the whole head or half of it as
# GPT-J-6B, gelu_new, causal, lm_head's bias; timm: q, k, v stacked in
# attn.qkv, exact GELU, eps 1e-6, both ways).
set -u
bin=$1
root=${CIC_SOURCE_ROOT:-$(cd "$(dirname "$0")/.." && pwd)}
. "$(dirname "$0")/lib.sh"
cic_need_numpy "Debian's python3 writes the checkpoints with NumPy"
cic_test_init verify_ln
mk="$root/tests/make_ln_rewrite.py"
v="--tokens 8 --samples 2"

# ---- the conventions: cicheck's truth against a NumPy forward ----
for fam in vit gptj gptj-part; do
    set -- --rotate 5
    [ "$fam" = gptj-part ] && set -- --rotate 5 --set rotary_dim=4
    expect_rc 0 "$fam: the original and its rewrite written" "$py" "$mk" "${fam%-part}" \
        "$tmp/$fam" "$tmp/$fam-ok" "$@"
    kind=random
    [ "$fam" != vit ] && kind=tokens
    cat >"$tmp/$fam.toml" <<EOF
name = "$fam-tiny"
[model]
checkpoint = "$fam"
tokens = 8
samples = 2
seed = 21
[input]
kind = "$kind"
[engines]
f32 = ["openblas"]
mpfr_prec = 64
[[transforms]]
name = "fuse"
kind = "fuse-layernorm"
EOF
    expect_rc 0 "$fam: cicheck run on the original dumps its truth" "$bin" run --quiet \
        --no-baseline --out "$tmp/r-$fam" --dump "$tmp/d-$fam" "$tmp/$fam.toml"
    expect_rc 0 "$fam: the truth is the family's forward in NumPy (rel < 1e-12)" "$py" - \
        "$fam" "$tmp" "$root/tests" <<'PY'
import json
import sys
import numpy as np
fam, tmp = sys.argv[1], sys.argv[2]
cfg = json.load(open(f"{tmp}/{fam}/config.json"))
fam = fam.replace("-part", "")
sys.path.insert(0, sys.argv[3])
from make_checkpoint import read_st
dirs = sys.argv[1]
w = {k: v.astype(np.float64) for k, v in read_st(f"{tmp}/{dirs}/model.safetensors")[0].items()}
x = read_st(f"{tmp}/d-{dirs}/original.safetensors")[0]["input"].astype(np.float64)
truth = read_st(f"{tmp}/d-{dirs}/outputs.safetensors")[0]["truth"]
d, h, N, B = x.shape[1], 2, 8, 2
hd = d // h
eps = float(np.float32(1e-5 if fam == "gptj" else 1e-6))
def ln(z, g, b):
    c = z - z.mean(-1, keepdims=True)
    return c / np.sqrt((c * c).mean(-1, keepdims=True) + eps) * g + b
rd = cfg.get("rotary_dim") or hd
def rope(t):  # GPT-J: pairs (2i, 2i+1) of each head's first rd dims, base 10000
    inv = 1.0 / 10000 ** (np.arange(0, rd, 2) / rd)
    ang = np.arange(N)[:, None] * inv[None, :]
    c, s = np.repeat(np.cos(ang), 2, 1), np.repeat(np.sin(ang), 2, 1)
    a, rest = t[..., :rd], t[..., rd:]
    r = np.empty_like(a)
    r[..., 0::2], r[..., 1::2] = -a[..., 1::2], a[..., 0::2]
    return np.concatenate([a * c + r * s, rest], axis=-1)
def attn(q, k, v, causal):  # [B, N, d] each
    q, k, v = (t.reshape(B, N, h, hd).transpose(0, 2, 1, 3) for t in (q, k, v))
    if fam == "gptj":
        q, k = rope(q), rope(k)
    s = q @ k.transpose(0, 1, 3, 2) / np.sqrt(hd)
    if causal:
        s = np.where(np.tril(np.ones((N, N))) > 0, s, -np.inf)
    p = np.exp(s - s.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    return (p @ v).transpose(0, 2, 1, 3).reshape(B * N, d)
def gelu_new(z):
    return 0.5 * z * (1 + np.tanh(np.sqrt(2 / np.pi) * (z + 0.044715 * z ** 3)))
def gelu(z):
    from math import erf
    return 0.5 * z * (1 + np.vectorize(erf)(z / np.sqrt(2)))
L = 4
for i in range(L):
    if fam == "gptj":
        p = f"transformer.h.{i}."
        a = ln(x, w[p + "ln_1.weight"], w[p + "ln_1.bias"])
        q, k, vv = (a @ w[p + f"attn.{n}_proj.weight"].T for n in "qkv")
        o = attn(*(t.reshape(B, N, d) for t in (q, k, vv)), True) @ w[p + "attn.out_proj.weight"].T
        m = gelu_new(a @ w[p + "mlp.fc_in.weight"].T + w[p + "mlp.fc_in.bias"])
        x = x + o + m @ w[p + "mlp.fc_out.weight"].T + w[p + "mlp.fc_out.bias"]
    else:
        p = f"blocks.{i}."
        a = ln(x, w[p + "norm1.weight"], w[p + "norm1.bias"])
        qkv = a @ w[p + "attn.qkv.weight"].T + w[p + "attn.qkv.bias"]
        q, k, vv = (qkv[:, j * d:(j + 1) * d].reshape(B, N, d) for j in range(3))
        x = x + attn(q, k, vv, False) @ w[p + "attn.proj.weight"].T + w[p + "attn.proj.bias"]
        a = ln(x, w[p + "norm2.weight"], w[p + "norm2.bias"])
        m = gelu(a @ w[p + "mlp.fc1.weight"].T + w[p + "mlp.fc1.bias"])
        x = x + m @ w[p + "mlp.fc2.weight"].T + w[p + "mlp.fc2.bias"]
f, hn = ("transformer.ln_f", "lm_head") if fam == "gptj" else ("norm", "head")
y = ln(x, w[f + ".weight"], w[f + ".bias"]) @ w[hn + ".weight"].T + w[hn + ".bias"]
rel = np.linalg.norm(y - truth) / np.linalg.norm(truth)
print(f"{dirs}: rel {rel:.3g}")
sys.exit(0 if rel < 1e-12 else 1)
PY
done

# ---- the correct rewrites ----
expect_rc 0 "vit: the rotated rewrite with --q is equivalent" "$bin" verify "$tmp/vit" \
    "$tmp/vit-ok" --layernorm fused --q "$tmp/vit-ok/R1.safetensors" $v
has "$tmp/out" "every layer and the head equivalent" "vit: every block and the head"
expect_rc 0 "vit: fused, unrotated" "$py" "$mk" vit "$tmp/vit" "$tmp/vit-fused"
expect_rc 0 "vit: the unrotated rewrite without --q is equivalent (Q = I)" "$bin" verify \
    "$tmp/vit" "$tmp/vit-fused" --layernorm fused $v
has "$tmp/out" "Q is the identity" "vit: without --q the output says Q = I"
expect_rc 1 "vit: the rotated rewrite without --q is broken (Q = I is wrong)" "$bin" verify \
    "$tmp/vit" "$tmp/vit-ok" --layernorm fused $v
has "$tmp/out" "first layer not equivalent: 0" "vit: broken from block 0"
expect_rc 0 "gptj: the rotated rewrite with --q is equivalent" "$bin" verify "$tmp/gptj" \
    "$tmp/gptj-ok" --layernorm fused --q "$tmp/gptj-ok/R1.safetensors" $v
has "$tmp/out" "every layer and the head equivalent" "gptj: every block and the head"
expect_rc 0 "gptj: on token ids through each model's wte" "$bin" verify "$tmp/gptj" \
    "$tmp/gptj-ok" --layernorm fused --q "$tmp/gptj-ok/R1.safetensors" --input-kind tokens $v
expect_rc 1 "gptj: the rewrite without --layernorm fused is not equivalent" "$bin" verify \
    "$tmp/gptj" "$tmp/gptj-ok" --q "$tmp/gptj-ok/R1.safetensors" $v
expect_rc 0 "gptj, rotary on half of each head: the rewrite is equivalent" "$bin" verify \
    "$tmp/gptj-part" "$tmp/gptj-part-ok" --layernorm fused \
    --q "$tmp/gptj-part-ok/R1.safetensors" $v
expect_rc 2 "gptj: rotary on half the head against the whole head is refused" "$bin" \
    verify "$tmp/gptj" "$tmp/gptj-part-ok" --layernorm fused $v
expect_err "rotary_dim 4 here, 0 in the original" "the message names both"

# ---- planted mistakes at block 2: exit 1, block 2 named first ----
for fam in vit gptj; do
    for m in mean-kept writer-unrotated bias-unfused; do
        "$py" "$mk" "$fam" "$tmp/$fam-o2" "$tmp/$fam-$m" --rotate 5 --mistake "$m:2"
        expect_rc 1 "$fam $m at block 2: not equivalent" "$bin" verify "$tmp/$fam" \
            "$tmp/$fam-$m" --layernorm fused --q "$tmp/$fam-$m/R1.safetensors" $v
        has "$tmp/out" "first layer not equivalent: 2" "$fam $m: block 2 named first"
        has "$tmp/out" "    1  " "$fam $m: block 1 listed"
        if grep -q "^    1 .*equivalent$" "$tmp/out"; then ok "$fam $m: block 1 equivalent"
        else bad "$fam $m: block 1 not equivalent"; fi
        # the diagnosis names the tensor and the catalogue's mistake
        case $fam/$m in
        vit/mean-kept) t="(blocks.2.mlp.fc2.weight)" w="[skip-mean-bake]" ;;
        vit/writer-unrotated) t="(blocks.2.attn.proj.weight)" w="[attn-out-not-rotated]" ;;
        vit/bias-unfused) t="(blocks.2.attn.qkv.bias)" w="bias not fused into it" ;;
        gptj/mean-kept) t="(transformer.h.2.mlp.fc_out.weight)" w="[skip-mean-bake]" ;;
        gptj/writer-unrotated) t="(transformer.h.2.attn.out_proj.weight)"
            w="[attn-out-not-rotated]" ;;
        gptj/bias-unfused) t="(transformer.h.2.attn.q_proj.bias)" w="bias not fused into it" ;;
        esac
        if grep -F -- "$t" "$tmp/out" | grep -qF -- "$w"; then
            ok "$fam $m: the diagnosis names $t: $w"
        else
            bad "$fam $m: the diagnosis does not name $t with $w"
        fi
        if grep -q "^    [a-z_0-9]*\( bias\)\?: .*(" "$tmp/out" &&
            ! grep "^    [a-z_0-9 ]*: .*(" "$tmp/out" | grep -vqF -- "${t%.*}"; then
            ok "$fam $m: no finding on another tensor"
        else
            bad "$fam $m: a finding on another tensor"
        fi
    done
done
cmp -s "$tmp/vit/model.safetensors" "$tmp/vit-o2/model.safetensors" &&
    ok "the writer's originals are the same with and without a mistake" ||
    bad "the originals differ between runs of the writer"

# ---- refusals ----
"$py" "$mk" gptj "$tmp/gj-rot" "$tmp/gj-rot-r" --set rotary_dim=3
expect_rc 2 "gptj: an odd rotary_dim is refused" "$bin" verify "$tmp/gj-rot" "$tmp/gj-rot-r" $v
expect_err "gj-rot/config.json: 'rotary_dim' = 3: rotary on the first rotary_dim dims" \
    "the message names config.json, the key and the value"
"$py" "$mk" gptj "$tmp/gj-act" "$tmp/gj-act-r" --set 'activation_function="gelu"'
expect_rc 2 "gptj: another activation is refused" "$bin" verify "$tmp/gj-act" "$tmp/gj-act-r" $v
expect_err "gj-act/config.json: activation_function must be \"gelu_new\"" \
    "the message names config.json and the key"
"$py" "$mk" gptj "$tmp/gj-odd" "$tmp/gj-odd-r" --set n_head=3
expect_rc 2 "gptj: heads that do not divide n_embd are refused" "$bin" verify \
    "$tmp/gj-odd" "$tmp/gj-odd-r" $v
expect_err "n_embd 16 is not a multiple of n_head 3" "the message names both keys"
expect_rc 2 "vit: token ids are refused (no token embedding)" "$bin" verify "$tmp/vit" \
    "$tmp/vit-ok" --layernorm fused --q "$tmp/vit-ok/R1.safetensors" --input-kind tokens $v
expect_err "no token embedding" "the message says why"
mkdir -p "$tmp/vit-ls" && cp "$tmp/vit/config.json" "$tmp/vit-ls/"
"$py" - "$tmp" "$root/tests" <<'PY'
import sys
import numpy as np
sys.path.insert(0, sys.argv[2])
from make_checkpoint import read_st, write_st
t = dict(read_st(sys.argv[1] + "/vit/model.safetensors")[0])
t["blocks.0.ls1.gamma"] = np.ones(t["norm.weight"].shape, "<f4")
write_st(sys.argv[1] + "/vit-ls/model.safetensors",
         [(k, "F32", v.shape, np.ascontiguousarray(v, "<f4").tobytes()) for k, v in t.items()])
PY
expect_rc 2 "vit: LayerScale (DeiT-III's ls1) is refused, not dropped" "$bin" verify \
    "$tmp/vit-ls" "$tmp/vit-ls" $v
expect_err "tensor 'blocks.0.ls1.gamma': LayerScale and q/k norms are not modelled" \
    "the message names the tensor"
cic_test_done
