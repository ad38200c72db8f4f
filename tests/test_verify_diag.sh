#!/bin/sh
# SPDX-License-Identifier: MIT
# test_verify_diag.sh: cicheck verify says what is wrong with the first
# broken layer. A tiny llama (d 32, 4 heads, 2 key/value heads, 3 layers)
# and a tiny OPT (2 layers) are dumped; NumPy (tests/make_checkpoint.py)
# writes rewrites of them, correct and with one known mistake planted at a
# middle layer (cases/known-breaks/). For each, report.json's broken layer
# names the tensor and the catalogue entry; a mistake spread over two
# tensors (R2 on v_proj and o_proj with rotations that do not match) is
# "no single tensor"; correct rewrites (with R2 too) have no diagnosis; a
# BF16 rewrite's rounding is not a finding. Needs Debian's /usr/bin/python3
# with numpy (exit 77 without it).
# Usage: test_verify_diag.sh PATH/TO/cicheck   (CIC_SOURCE_ROOT: the source tree)
set -u
bin=$1
root=${CIC_SOURCE_ROOT:-$(cd "$(dirname "$0")/.." && pwd)}
. "$(dirname "$0")/lib.sh"
cic_need_numpy "Debian's python3 writes the checkpoints with NumPy"
cic_test_init verify_diag
mk="$root/tests/make_checkpoint.py"

cat >"$tmp/llama.toml" <<'TOML'
name = "llama-tiny"
[model]
block = "rmsnorm"
d_model = 32
heads = 4
kv_heads = 2
rope = "half"
mlp_ratio = 2
tokens = 4
samples = 1
layers = 3
causal = true
d_out = 16
seed = 21
[model.weights]
std = 0.1
[engines]
f32 = ["openblas"]
mpfr_prec = 64
[[transforms]]
name = "fold"
kind = "fold-rmsnorm-gamma"
TOML
cat >"$tmp/opt.toml" <<'TOML'
name = "opt-tiny"
[model]
block = "preln"
d_model = 32
heads = 4
mlp_ratio = 2
tokens = 4
samples = 1
layers = 3
causal = true
activation = "relu"
eps = 1e-5
seed = 3
[model.weights]
std = 0.1
[readout]
kind = "residual"
[engines]
f32 = ["openblas"]
mpfr_prec = 64
[[transforms]]
name = "fuse"
kind = "fuse-layernorm"
TOML
expect_rc 0 "the tiny llama dumps" "$bin" run --quiet --no-baseline --out "$tmp/r-l" \
    --dump "$tmp/d-l" "$tmp/llama.toml"
expect_rc 0 "the tiny OPT dumps" "$bin" run --quiet --no-baseline --out "$tmp/r-o" \
    --dump "$tmp/d-o" "$tmp/opt.toml"
dl="$tmp/d-l/original.safetensors"
do_="$tmp/d-o/original.safetensors"
expect_rc 0 "the llama checkpoint" "$py" "$mk" "$dl" "$tmp/hf-l"
expect_rc 0 "the OPT checkpoint" "$py" "$mk" "$do_" "$tmp/hf-o"

# diag REPORT: the first broken layer and its findings, one a line:
# "LAYER|TENSOR|MISTAKE|FINDING" (null as -)
diag() {
    "$py" - "$1" <<'PY'
import json, sys
v = json.load(open(sys.argv[1]))["verify"]
print("first", v["first_layer_not_equivalent"])
for e in v["layers"]:
    for f in e.get("diagnosis", []):
        print("%d|%s|%s|%s" % (e["layer"], f["tensor"] or "-", f["mistake"] or "-", f["finding"]))
PY
}

vo="--tokens 4 --samples 1 --mpfr-prec 64"
# check NAME BASE-OPTIONS -- VERIFY-OPTIONS: make rewrite NAME of the
# llama (or OPT when NAME starts with opt-), verify it into $tmp/v-NAME
# and its diagnosis into $tmp/g-NAME
check() {
    name=$1
    shift
    mopts=""
    while [ "$1" != "--" ]; do mopts="$mopts $1"; shift; done
    shift
    case $name in
    opt-*) src=$do_ orig=$tmp/hf-o ;;
    *) src=$dl orig=$tmp/hf-l ;;
    esac
    # shellcheck disable=SC2086 # the options are words
    expect_rc 0 "make rewrite $name" "$py" "$mk" "$src" "$tmp/rw-$name" $mopts
    # shellcheck disable=SC2086
    "$bin" verify "$orig" "$tmp/rw-$name" --q "$tmp/rw-$name/R1.safetensors" $vo "$@" \
        --out "$tmp/v-$name" >"$tmp/o-$name" 2>"$tmp/e-$name"
    echo "$?" >"$tmp/rc-$name"
    diag "$tmp/v-$name/report.json" >"$tmp/g-$name"
}
# planted NAME LAYER TENSOR MISTAKE: exit 1, LAYER first broken, and a
# finding on TENSOR (a suffix of its name) with MISTAKE ("-": none)
planted() {
    if [ "$(cat "$tmp/rc-$1")" = 1 ]; then ok "$1: exit 1"; else bad "$1: exit $(cat "$tmp/rc-$1")"; fi
    has "$tmp/g-$1" "first $2" "$1: layer $2 is the first broken"
    if grep -qE "^$2\|[^|]*$3\|$4\|" "$tmp/g-$1"; then ok "$1: $3 named with $4"
    else bad "$1: no finding on $3 with $4"; cat "$tmp/g-$1"; fi
    if grep -q "^  diagnosis: " "$tmp/o-$1" && grep -q "\[$4\]" "$tmp/o-$1" || [ "$4" = - ]; then
        ok "$1: the diagnosis is printed"
    else bad "$1: the diagnosis is not printed"; fi
}
# clean NAME: exit 0 and no diagnosis
clean() {
    if [ "$(cat "$tmp/rc-$1")" = 0 ]; then ok "$1: exit 0"; else bad "$1: exit $(cat "$tmp/rc-$1")"; fi
    if grep -q "|" "$tmp/g-$1"; then bad "$1: a correct rewrite has a diagnosis"; else ok "$1: no diagnosis"; fi
}

R="--fold --rotate 5 --r4"
D="--online down_proj:hadamard"
check ok $R -- $D
clean ok
has "$tmp/v-ok/report.md" "| 2 |" "report.md has the layer table"
for m in writer-unrotated:self_attn.o_proj.weight:attn-out-not-rotated \
    gain-unfolded:self_attn.q_proj.weight:rmsnorm-gamma-after-rotation \
    gain-kept:input_layernorm.weight:- \
    r4-missing:mlp.down_proj.weight:r4-without-online-hadamard; do
    k=${m%%:*} rest=${m#*:}
    check "$k" $R --mistake "$k:1" -- $D
    planted "$k" 1 "${rest%%:*}" "${rest#*:}"
done
has "$tmp/o-writer-unrotated" "o_proj: equals the original (Q^T not applied)" \
    "writer-unrotated: the finding as printed"
has "$tmp/v-writer-unrotated/report.md" "attn-out-not-rotated" "report.md has the diagnosis"
# without Q (16 embedding rows do not determine it): what a rotation leaves
# alone still names the layer and the mistake
# shellcheck disable=SC2086
expect_rc 1 "r4-missing without --q: exit 1" "$bin" verify "$tmp/hf-l" "$tmp/rw-r4-missing" \
    $vo $D --out "$tmp/v-noq"
has "$tmp/out" "diagnosis of layer 1: no Q" "without --q: the diagnosis is printed"
expect_rc 0 "without --q: layer 1's down_proj named with r4-without-online-hadamard" "$py" - \
    "$tmp/v-noq/report.json" <<'PY'
import json, sys
g = json.load(open(sys.argv[1]))["verify"]["diagnosis_without_q"]
assert g["layer"] == 1, g
assert any(f["tensor"].endswith("layers.1.mlp.down_proj.weight") and
           f["mistake"] == "r4-without-online-hadamard" for f in g["diagnosis"]), g
PY
# shellcheck disable=SC2086
expect_rc 0 "the correct rewrite without --q: exit 0" "$bin" verify "$tmp/hf-l" "$tmp/rw-ok" \
    $vo $D --out "$tmp/v-noq-ok"
if grep -q diagnosis "$tmp/v-noq-ok/report.json"; then bad "without --q: a correct rewrite has a diagnosis"
else ok "without --q: a correct rewrite has no diagnosis"; fi
check r3 $R --mistake r3-before-rope:1 -- $D --online qk:hadamard
planted r3 1 self_attn.q_proj.weight r3-fused-before-rope
check r4-fused --fold --rotate 5 --mistake r4-fused:1 --
planted r4-fused 1 mlp.down_proj.weight r4-without-online-hadamard
check r2 $R --r2 7 -- $D
clean r2
check r2-per-query-head $R --r2 7 --mistake r2-per-query-head:1 -- $D
planted r2-per-query-head 1 self_attn.o_proj.weight r2-per-query-head
check r2-values-only $R --r2 7 --mistake r2-values-only:1 -- $D
planted r2-values-only 1 self_attn.v_proj.weight r2-values-without-o-proj
check r2-mismatch $R --r2 7 --mistake r2-mismatch:1 -- $D
planted r2-mismatch 1 - -
has "$tmp/g-r2-mismatch" "no single tensor explains the break" \
    "r2-mismatch: no single tensor explains it"
check embed $R --mistake embed-centred:0 -- $D --input-kind tokens
planted embed 0 model.embed_tokens.weight rmsnorm-centered-embeddings
# BF16: the rounding of the correct tensors is no finding
check bf16 $R --dtype bf16 --mistake writer-unrotated:1 -- $D
planted bf16 1 self_attn.o_proj.weight attn-out-not-rotated
if [ "$(grep -c '|' "$tmp/g-bf16")" = 1 ]; then ok "bf16: o_proj is the only finding"
else bad "bf16: more findings than o_proj"; cat "$tmp/g-bf16"; fi

# OPT with fused LayerNorm
check opt-ok --fold --rotate 3 -- --layernorm fused
clean opt-ok
for m in mean-kept:fc2.weight:skip-mean-bake \
    writer-unrotated:self_attn.out_proj.weight:attn-out-not-rotated \
    unfused:self_attn.q_proj.weight:rotate-without-fusion; do
    k=${m%%:*} rest=${m#*:}
    check "opt-$k" --fold --rotate 3 --mistake "$k:1" -- --layernorm fused
    planted "opt-$k" 1 "${rest%%:*}" "${rest#*:}"
done
[ -n "${CIC_VDIAG_KEEP:-}" ] && cp -r "$tmp" "$CIC_VDIAG_KEEP"
cic_test_done
