#!/bin/sh
# SPDX-License-Identifier: MIT
# tests/guide/gptj.sh: the GPT-J checkpoints docs/guide/verify-vit-gptj.md
# reads, written into the current folder (env SRC, PY; tests/guide/vit.sh
# runs it):
#   gptj/            a tiny GPT-J (d 16, 2 heads, 4 layers, 64 tokens, F32,
#                    rotary on the whole head)
#   gptj-rotated/    its rewrite: LayerNorms fused, writers and wte centred,
#                    the stream rotated by Q (gptj-rotated/R1.safetensors)
#   gptj-broken/     the same with ln_1's bias not fused into q_proj at
#                    block 2 (transformer.h.2.attn.q_proj.bias)
#   gptj-6b-like/    a GPT-J whose rotary_dim (4) is half its head dim, as
#                    GPT-J-6B's 64 of 256, and gptj-6b-like-rotated/ its
#                    rewrite (Q in gptj-6b-like-rotated/R1.safetensors)
#   gptj-odd/        a config.json with rotary_dim 3 (refused)
# Written by tests/make_ln_rewrite.py (NumPy), never by cicheck.
set -eu
mk="$SRC/tests/make_ln_rewrite.py"
"$PY" "$mk" gptj gptj gptj-rotated --rotate 5
"$PY" "$mk" gptj .orig gptj-broken --rotate 5 --mistake bias-unfused:2
"$PY" "$mk" gptj gptj-6b-like gptj-6b-like-rotated --rotate 5 --set rotary_dim=4
"$PY" "$mk" gptj gptj-odd .odd-rewrite --set rotary_dim=3
rm -rf .orig .odd-rewrite
