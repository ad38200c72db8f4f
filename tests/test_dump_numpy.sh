#!/bin/sh
# SPDX-License-Identifier: MIT
# test_dump_numpy.sh: scripts/verify_dump.py re-implements the blocks in
# NumPy (float64) from a --dump folder alone and must reproduce the truth:
# a pre-LN case with a known mistake, and a dit case with its adaLN
# strategies. Needs Debian's /usr/bin/python3 with numpy (skipped, exit
# 77, without it).
# Usage: test_dump_numpy.sh PATH/TO/cicheck   (CIC_SOURCE_ROOT: the source tree)
set -u
bin=$1
root=${CIC_SOURCE_ROOT:-$(cd "$(dirname "$0")/.." && pwd)}
. "$(dirname "$0")/lib.sh"
cic_need "$py" "Debian's python3 runs the NumPy re-implementation"
if ! "$py" -c 'import numpy' 2>/dev/null; then
    echo "SKIP: $py has no numpy (Debian's python3-numpy)"
    exit 77
fi
cic_test_init dump_numpy
cd "$root" || exit 1

expect_rc 0 "run --dump (pre-LN)" "$bin" run --quiet --out "$tmp/rep" --dump "$tmp/dump" \
    cases/known-breaks/attn-out-not-rotated.toml
expect_rc 0 "NumPy re-run reproduces the truth" "$py" scripts/verify_dump.py "$tmp/dump"
expect_rc 0 "run --dump (dit)" "$bin" run --quiet --out "$tmp/rep-dit" --dump "$tmp/dump-dit" \
    cases/known-breaks/adaln-static-fold.toml
expect_rc 0 "NumPy re-run of a dit dump reproduces the truth" "$py" scripts/verify_dump.py \
    "$tmp/dump-dit"
# the parallel block (GPT-J: one LayerNorm feeding attention and MLP) with
# the quick-gelu activation (x sigmoid(1.702 x)), on the layernorm case at
# a quarter of its rows (tokens 8, samples 2)
sed -e 's/^tokens = .*/tokens = 8/; s/^samples = .*/samples = 2/' \
    -e 's/^block = "preln"/block = "parallel"/' \
    -e 's/^activation = .*/activation = "quick-gelu"/' cases/layernorm.toml >"$tmp/parallel.toml"
expect_rc 0 "the case sets the parallel block and quick-gelu" grep -qzE \
    'block = "parallel".*activation = "quick-gelu"' "$tmp/parallel.toml"
expect_rc 0 "run --dump (parallel, quick-gelu)" "$bin" run --quiet --no-baseline \
    --out "$tmp/rep-par" --dump "$tmp/dump-par" "$tmp/parallel.toml"
expect_rc 0 "NumPy re-run of a parallel quick-gelu dump reproduces the truth" "$py" \
    scripts/verify_dump.py "$tmp/dump-par"
# the re-check can fail: a truth edited by one part in 10^6 is caught
"$py" - "$tmp/dump/outputs.safetensors" <<'PY'
import json, struct, sys
p = sys.argv[1]
b = bytearray(open(p, "rb").read())
n = struct.unpack("<Q", b[:8])[0]
h = json.loads(b[8:8 + n])
s, e = h["truth"]["data_offsets"]
o = 8 + n + s
v = struct.unpack("<d", b[o:o + 8])[0]
b[o:o + 8] = struct.pack("<d", v * (1 + 1e-6) if v != 0 else 1e-6)
open(p, "wb").write(b)
PY
expect_rc 1 "an edited truth is caught" "$py" scripts/verify_dump.py "$tmp/dump"

cic_test_done
