#!/bin/sh
# SPDX-License-Identifier: MIT
# tests/guide/dit.sh: the checkpoints docs/guide/verify-dit.md reads,
# written into the current folder (tests/test_guide.sh runs it in the
# page's temporary folder; env SRC, BUILD, PY):
#   dit/               a tiny DiT (d 32, 4 heads, MLP 128, d_cond 16, 5
#                      blocks, F32) in the reference code's names
#   conds.safetensors  "input" [3, 8, 32] hidden states and "c" [3, 16]
#                      conditions, sample 0's the static fold's c0
#   dit-online/        its online-unrotate rewrite (weights kept) and
#                      dit-online/Q.safetensors, the stream's rotation
#   dit-static/        its static fold for conds' sample 0 (adaln.c0 stored)
#                      with dit-static/Q.safetensors
#   dit-branch/        its branch-rotate rewrite (each linear W H)
#   dit-broken/        the static fold with attn.proj of block 2 left without
#                      Q^T
# Written by tests/make_dit_rewrite.py (NumPy), never by cicheck.
set -eu
mk="$SRC/tests/make_dit_rewrite.py"
"$PY" "$mk" original dit
"$PY" "$mk" input c0.safetensors --samples 1 --tokens 8 --d 32 --dc 16 --seed 40 --no-input
"$PY" "$mk" input conds.safetensors --samples 3 --tokens 8 --d 32 --dc 16 \
    --c0 c0.safetensors:0
"$PY" "$mk" rewrite dit dit-online --adaln online-unrotate
"$PY" "$mk" rewrite dit dit-static --adaln static-fold --c0 c0.safetensors:0
"$PY" "$mk" rewrite dit dit-branch --adaln branch-rotate
"$PY" "$mk" rewrite dit dit-broken --adaln static-fold --c0 c0.safetensors:0 \
    --mistake qt-missing:2
rm c0.safetensors
