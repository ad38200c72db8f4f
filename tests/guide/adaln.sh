#!/bin/sh
# SPDX-License-Identifier: MIT
# tests/guide/adaln.sh: what docs/guide/adaln.md reads, in the current
# folder: the repository's cases/ and reference/ (tests/guide/repo.sh), and
# dit-tiny/, a DiT checkpoint in the DiT reference code's names (d 64,
# 4 heads, 2 blocks with the final layer; config.json gives num_heads),
# written by tests/make_checkpoint.py from a
# seeded dit model's --dump. Env: SRC, BUILD, PY.
set -eu
bash "$SRC/tests/guide/repo.sh"
cat >seed-dit.toml <<'TOML'
name = "dit-tiny"
[model]
block = "dit"
d_model = 64
heads = 4
tokens = 8
samples = 2
layers = 2
d_cond = 32
d_out = 16
final_layer = true
seed = 9
[model.weights]
std = 0.08
[engines]
f32 = ["fixed-order"]
mpfr_prec = 64
TOML
"$BUILD/cicheck" run --quiet --no-color --no-baseline --out .seed/r --dump .seed/d seed-dit.toml >/dev/null
"$PY" "$SRC/tests/make_checkpoint.py" .seed/d/original.safetensors dit-tiny
rm -rf .seed seed-dit.toml
