#!/bin/sh
# SPDX-License-Identifier: MIT
# test_dump_numpy.sh: scripts/verify_dump.py re-implements the blocks in
# NumPy (float64) from a --dump folder alone and must reproduce the truth:
# a pre-LN case with a known mistake, a dit case with its adaLN
# strategies, rmsnorm cases with RoPE (both layouts) and grouped-query
# attention, a dit case with group-wise and regular Hadamard rotations; and for a tiny case with low-precision engines of every kind
# (bf16, int8 per channel, int4 per group asymmetric with clipping, mxfp4,
# nvfp4) it recomputes every engine's stored weights bit for bit and the
# outlier statistics of report.json. Planted faults (an edited truth, one
# flipped code, an edited kurtosis) must be caught. Needs Debian's
# /usr/bin/python3 with numpy (skipped, exit 77, without it).
# Usage: test_dump_numpy.sh PATH/TO/cicheck   (CIC_SOURCE_ROOT: the source tree)
set -u
bin=$1
root=${CIC_SOURCE_ROOT:-$(cd "$(dirname "$0")/.." && pwd)}
. "$(dirname "$0")/lib.sh"
cic_need_numpy "Debian's python3 runs the NumPy re-implementation"
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

# LLaMA attention: a tiny rmsnorm case (d 32, 4 heads of 8, 2 key/value
# heads) with RoPE in each layout, fold and rotations, then R2 (per kv
# head), R3 (online per-head Hadamards of q and k) and R4 (the online
# Hadamard of the MLP width 48 = 12 x 4, a Paley base the dump carries as
# hadamard.base.48); the dump says rope, rope_theta and kv_heads, and NumPy
# re-runs RoPE, GQA and the online Hadamards from it
for lay in half interleaved; do
    cat >"$tmp/rope-$lay.toml" <<TOML
name = "rope-$lay"
[model]
block = "rmsnorm"
d_model = 32
heads = 4
kv_heads = 2
rope = "$lay"
rope_theta = 500000.0
mlp_ratio = 1.5
tokens = 6
samples = 2
layers = 2
causal = true
d_out = 8
seed = 3
[engines]
f32 = ["fixed-order"]
[[transforms]]
name = "fold"
kind = "fold-rmsnorm-gamma"
[[transforms]]
name = "rot"
kind = "rotate"
after = "fold"
q = "random"
seed = 4
[[transforms]]
name = "had"
kind = "rotate"
after = "fold"
q = "hadamard"
[[transforms]]
name = "r2"
kind = "rotate-heads"
after = "had"
q = "random"
[[transforms]]
name = "r3"
kind = "online-qk"
after = "r2"
q = "hadamard"
[[transforms]]
name = "r4"
kind = "online-down"
after = "r3"
q = "hadamard"
TOML
    expect_rc 0 "run --dump (rmsnorm, rope = $lay, kv_heads 2)" "$bin" run --quiet \
        --no-baseline --out "$tmp/rep-rope-$lay" --dump "$tmp/dump-rope-$lay" \
        "$tmp/rope-$lay.toml"
    expect_rc 0 "NumPy re-run of RoPE ($lay) and GQA reproduces the truth" "$py" \
        scripts/verify_dump.py "$tmp/dump-rope-$lay"
    has "$tmp/out" "verify_dump: 7 passed, 0 failed" "every model of the rope-$lay dump passes"
done
# the re-check can fail: the half dump relabelled interleaved is caught
# relabel FILE KEY FROM TO: a dump's metadata KEY set from FROM (asserted)
# to TO, the tensors untouched
relabel() {
    "$py" - "$@" <<'PY'
import json, struct, sys
p, key, old, new = sys.argv[1:5]
b = open(p, "rb").read()
n = struct.unpack("<Q", b[:8])[0]
h = json.loads(b[8:8 + n])
assert h["__metadata__"][key] == old, (key, h["__metadata__"][key])
h["__metadata__"][key] = new
t = json.dumps(h).encode()
t += b" " * (-len(t) % 8)
open(p, "wb").write(struct.pack("<Q", len(t)) + t + b[8 + n:])
PY
}
relabel "$tmp/dump-rope-half/original.safetensors" rope half interleaved
expect_rc 1 "a RoPE layout swapped in the metadata is caught" "$py" scripts/verify_dump.py \
    "$tmp/dump-rope-half"

# group-wise and regular rotations of a dit block (d 64 = 4^3, MLP 256 =
# 4^4): regular Hadamard blocks of 16 (fast), random blocks of 16 (a dense
# [16, 16] linear per block), the whole-row regular Hadamard (dense) and
# online-unrotate with the fast regular transform; NumPy builds the regular
# matrix as Kronecker powers of J - 2I
cat >"$tmp/group.toml" <<'TOML'
name = "group"
[model]
block = "dit"
d_model = 64
heads = 4
mlp_ratio = 4
tokens = 6
samples = 2
layers = 1
d_cond = 16
seed = 5
[engines]
f32 = ["fixed-order"]
[[transforms]]
name = "reg-g16"
kind = "branch-rotate"
q = "regular-hadamard"
seed = 2
fast = true
group = 16
[[transforms]]
name = "rand-g16"
kind = "branch-rotate"
q = "random"
seed = 2
group = 16
[[transforms]]
name = "reg-dense"
kind = "branch-rotate"
q = "regular-hadamard"
seed = 3
[[transforms]]
name = "online-reg"
kind = "online-unrotate"
q = "regular-hadamard"
seed = 4
fast = true
TOML
expect_rc 0 "run --dump (dit, group-wise and regular rotations)" "$bin" run --quiet \
    --no-baseline --out "$tmp/rep-group" --dump "$tmp/dump-group" "$tmp/group.toml"
expect_rc 0 "NumPy re-run of group-wise and regular rotations reproduces the truth" "$py" \
    scripts/verify_dump.py "$tmp/dump-group"
has "$tmp/out" "verify_dump: 5 passed, 0 failed" "every model of the group dump passes"
# the re-check can fail: the fast regular transform relabelled Sylvester
# (in the unrounded-weights model, the one NumPy re-runs)
relabel "$tmp/dump-group/reg-g16.f64.safetensors" q regular-hadamard hadamard
expect_rc 1 "a regular Hadamard relabelled Sylvester is caught" "$py" scripts/verify_dump.py \
    "$tmp/dump-group"

# low-precision engines: a tiny rmsnorm case (widths 32 and 128, which
# mxfp4's blocks of 32 divide) with fold and a Hadamard rotation
cat >"$tmp/lowp.toml" <<'TOML'
name = "lowp-tiny"
[model]
block = "rmsnorm"
d_model = 32
heads = 2
mlp_ratio = 4
tokens = 8
samples = 1
layers = 1
seed = 7
[model.weights]
outlier_channels = 2
outlier_scale = 8.0
[engines]
f32 = ["fixed-order"]
[[engines.lowp]]
name = "bf16"
weights = "bf16"
activations = "bf16"
[[engines.lowp]]
name = "w8"
weights = "int8:channel"
activations = "int8:token"
[[engines.lowp]]
name = "w4g"
weights = "int4:group16:asym:clip0.9"
activations = "int8:token"
compute = "fp16"
weights_from = "float32"
[[engines.lowp]]
name = "mx"
weights = "mxfp4"
activations = "mxfp4"
[[engines.lowp]]
name = "nv"
weights = "nvfp4"
activations = "nvfp4"
[[transforms]]
name = "fold"
kind = "fold-rmsnorm-gamma"
[[transforms]]
name = "rot"
kind = "rotate"
after = "fold"
q = "hadamard"
TOML
lp="$tmp/dump-lowp"
expect_rc 0 "run --dump (low-precision engines)" "$bin" run --quiet --no-baseline \
    --out "$tmp/rep-lowp" --dump "$lp" "$tmp/lowp.toml"
for f in none.bf16 none.w4g fold.w8 rot.mx rot.nv activations; do
    if [ -s "$lp/$f.safetensors" ]; then ok "the dump has $f.safetensors"; else
        bad "no $f.safetensors in the dump"; fi
done
expect_rc 0 "NumPy recomputes every engine's weights and the outlier statistics" "$py" \
    scripts/verify_dump.py "$lp" --report "$tmp/rep-lowp"
cp "$tmp/out" "$tmp/out-lowp"
# 3 models x 5 engines; 8 quantized linears x 3 models x 4 scale rules
has "$tmp/out-lowp" "low precision: 15 engine files" "every engine file of every model is checked"
has "$tmp/out-lowp" "96 by a scale rule" "every quantized linear under a rule is checked"
# an input and a weight row per quantized linear and model
has "$tmp/out-lowp" "outlier statistics: 48 rows" "every outlier row is recomputed"
has "$tmp/out-lowp" "verify_dump: 19 passed, 0 failed" "the checks pass"
# the re-check can fail: one code flipped in a copy of the dump, one
# kurtosis edited by one part in 10^6 in a copy of the report
cp -r "$lp" "$tmp/dump-lowp-bad"
"$py" - "$tmp/dump-lowp-bad/none.w4g.safetensors" <<'PY'
import json, struct, sys
p = sys.argv[1]
b = bytearray(open(p, "rb").read())
n = struct.unpack("<Q", b[:8])[0]
h = json.loads(b[8:8 + n])
s, e = h["layers.0.mlp.down_proj.weight.qcodes"]["data_offsets"]
b[8 + n + s + 5] ^= 1  # int4 asymmetric codes are 0..15: still a code
open(p, "wb").write(b)
PY
expect_rc 1 "a flipped code is caught" "$py" scripts/verify_dump.py "$tmp/dump-lowp-bad" \
    --report "$tmp/rep-lowp"
has "$tmp/out" "none.w4g: layers.0.mlp.down_proj.weight.qcodes: 1 of 4096 codes differ" \
    "the flipped code is named"
mkdir "$tmp/rep-lowp-bad"
"$py" - "$tmp/rep-lowp/report.json" "$tmp/rep-lowp-bad/report.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
row = r["lowp"]["outliers"][-1]
row["kurtosis"] *= 1 + 1e-6
json.dump(r, open(sys.argv[2], "w"))
PY
expect_rc 1 "an edited kurtosis is caught" "$py" scripts/verify_dump.py "$lp" \
    --report "$tmp/rep-lowp-bad"
has "$tmp/out" "kurtosis" "the edited statistic is named"

cic_test_done
