#!/bin/sh
# SPDX-License-Identifier: MIT
# tests/guide/llama.sh: the checkpoints docs/guide/verify-llama-opt.md
# reads, written into the current folder (tests/test_guide.sh runs it in the
# page's temporary folder; env SRC, BUILD, PY):
#   llama/          a tiny LLaMA (d 64, 4 heads, 2 kv heads, 3 layers, F32),
#                   the original, from a seeded model's --dump
#   llama-rotated/  its rewrite as a QuaRot-style tool saves it: gains
#                   folded, the stream rotated by a random Q (R1), down_proj
#                   fused with a Hadamard that runs online (R4)
#   R1.safetensors  that Q, [64, 64] F64
#   llama-broken/   the same rewrite with o_proj left unrotated at layer 2
#   opt/, opt-rotated/, opt-R1.safetensors: a tiny OPT (d 32, 2 layers) and
#                   its rewrite with each LayerNorm fused (QuaRot / SliceGPT)
# Written by tests/make_checkpoint.py (NumPy), never by cicheck.
set -eu
mk="$SRC/tests/make_checkpoint.py"
cat >seed-llama.toml <<'TOML'
name = "llama-tiny"
[model]
block = "rmsnorm"
d_model = 64
heads = 4
kv_heads = 2
rope = "half"
mlp_ratio = 2
tokens = 8
samples = 1
layers = 3
seed = 21
[model.weights]
std = 0.1
[engines]
f32 = ["fixed-order"]
mpfr_prec = 64
TOML
cat >seed-opt.toml <<'TOML'
name = "opt-tiny"
[model]
block = "preln"
d_model = 32
heads = 4
mlp_ratio = 4
tokens = 8
samples = 1
layers = 2
activation = "relu"
seed = 3
[model.weights]
std = 0.1
[readout]
kind = "residual"
[engines]
f32 = ["fixed-order"]
mpfr_prec = 64
TOML
for m in llama opt; do
    "$BUILD/cicheck" run --quiet --no-color --no-baseline --out ".seed/r-$m" \
        --dump ".seed/d-$m" "seed-$m.toml" >/dev/null
    rm "seed-$m.toml"
done
"$PY" "$mk" .seed/d-llama/original.safetensors llama
"$PY" "$mk" .seed/d-llama/original.safetensors llama-rotated --fold --rotate 5 --r4
"$PY" "$mk" .seed/d-llama/original.safetensors llama-broken --fold --rotate 5 --r4 \
    --mistake writer-unrotated:2
mv llama-rotated/R1.safetensors R1.safetensors
rm llama-broken/R1.safetensors
"$PY" "$mk" .seed/d-opt/original.safetensors opt
"$PY" "$mk" .seed/d-opt/original.safetensors opt-rotated --fold --rotate 3
mv opt-rotated/R1.safetensors opt-R1.safetensors
rm -rf .seed
# the repository's case files, as a reader in the repository has them
ln -s "$SRC/cases" cases
