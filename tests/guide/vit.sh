#!/bin/sh
# SPDX-License-Identifier: MIT
# tests/guide/vit.sh: the checkpoints docs/guide/verify-vit-gptj.md reads,
# written into the current folder (tests/test_guide.sh runs it in the
# page's temporary folder; env SRC, BUILD, PY):
#   vit/             a tiny timm ViT (timm's names, d 16, 2 heads, 4 blocks,
#                    10 classes, F32)
#   vit-fused/       its rewrite with the LayerNorms fused, not rotated
#   vit-rotated/     fused and rotated by Q (vit-rotated/R1.safetensors)
#   vit-broken/      the same with the MLP writer left uncentred at block 2
#                    (blocks.2.mlp.fc2)
#   calib.safetensors  hidden states "input" [16, 16] (2 samples, 8 tokens)
# and the GPT-J ones of tests/guide/gptj.sh. Written by
# tests/make_ln_rewrite.py (NumPy), never by cicheck.
set -eu
mk="$SRC/tests/make_ln_rewrite.py"
"$PY" "$mk" vit vit vit-fused --input calib.safetensors
"$PY" "$mk" vit .orig vit-rotated --rotate 5
"$PY" "$mk" vit .orig vit-broken --rotate 5 --mistake mean-kept:2
rm -rf .orig
bash "$SRC/tests/guide/gptj.sh"
