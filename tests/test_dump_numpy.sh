#!/bin/sh
# SPDX-License-Identifier: MIT
# test_dump_numpy.sh: scripts/verify_dump.py re-implements the blocks in
# NumPy (float64) from a --dump folder alone and must reproduce the truth:
# a pre-LN case with a known mistake, a dit case with its adaLN
# strategies, rmsnorm cases with RoPE (both layouts) and grouped-query
# attention, a dit case with group-wise and regular Hadamard rotations; and for a tiny case with low-precision engines of every kind
# (bf16, int8 per channel, int4 per group asymmetric with clipping, mxfp4,
# nvfp4) it recomputes every engine's stored weights bit for bit and the
# outlier statistics of report.json; a checkpoint whose truths lie beside
# binary32 midpoints, whose dumped truth must round to the proven float32.
# Planted faults (an edited truth, one flipped code, an edited kurtosis, a
# truth.f32 one ulp off) must be caught. Needs Debian's
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
    has "$tmp/out" "verify_dump: 8 passed, 0 failed" "every model of the rope-$lay dump passes"
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
has "$tmp/out" "verify_dump: 6 passed, 0 failed" "every model of the group dump passes"
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
has "$tmp/out-lowp" "verify_dump: 20 passed, 0 failed" "the checks pass"
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

# binary32 midpoints: the dumped truth must round (nearest, ties to even)
# to the float32 the proof proved. A timm ViT checkpoint whose linears are
# all zero computes x + b_proj + b_fc2 exactly, with x and the biases
# planted so that each truth lies 2^-58 relatively beside a binary32
# midpoint (proven at 64 bits), on the side of the odd neighbour, in two
# binades; each row sums to 0, so the residual readout's centring keeps the
# values. The double nearest to it is the midpoint itself, which rounds to
# the even neighbour: wrong until the dump kept the side (6718a0a).
# truth.f32 is the proven float32.
mkdir "$tmp/hf-ties"
"$py" - "$root/tests" "$tmp" <<'PY'
import json, sys
import numpy as np
sys.path.insert(0, sys.argv[1])
from make_checkpoint import write_st
tmp = sys.argv[2]
d, f, o = 8, 16, 4
shapes = {"norm1.weight": [d], "norm1.bias": [d], "attn.qkv.weight": [3 * d, d],
          "attn.qkv.bias": [3 * d], "attn.proj.weight": [d, d], "attn.proj.bias": [d],
          "norm2.weight": [d], "norm2.bias": [d], "mlp.fc1.weight": [f, d],
          "mlp.fc1.bias": [f], "mlp.fc2.weight": [d, f], "mlp.fc2.bias": [d]}
v = {"blocks.0." + k: np.zeros(s, np.float32) for k, s in shapes.items()}
v.update({k: np.zeros(s, np.float32) for k, s in
          (("norm.weight", [d]), ("norm.bias", [d]), ("head.weight", [o, d]), ("head.bias", [o]))})
for k in ("blocks.0.norm1.weight", "blocks.0.norm2.weight", "norm.weight"):
    v[k][:] = 1
scale = np.repeat([1.0, 2.0], 4)       # binades [1, 2) and [2, 4)
odd = 1.0 + 2.0 ** -23                 # even (1) and odd significands
x = np.array([1, -1, odd, -odd] * 2) * scale
v["blocks.0.attn.proj.bias"][:] = np.array([1, -1] * 4) * scale * 2.0 ** -24
v["blocks.0.mlp.fc2.bias"][:] = np.array([1, -1, -1, 1] * 2) * scale * 2.0 ** -58
# (1 + 2^-24 + 2^-58) s: above the midpoint of s and odd s; (1 + 3 2^-24 -
# 2^-58) s: below the midpoint of odd s and (1 + 2^-22) s; all round to odd s
json.dump({"architecture": "vit_custom_patch16", "num_heads": 2, "num_classes": o},
          open(tmp + "/hf-ties/config.json", "w"))
write_st(tmp + "/hf-ties/model.safetensors",
         [(k, "F32", a.shape, a.astype("<f4").tobytes()) for k, a in sorted(v.items())])
xs = np.tile(x, (2, 1))
write_st(tmp + "/ties-input.safetensors",
         [("input", "F32", xs.shape, xs.astype("<f4").tobytes())])
PY
cat >"$tmp/ties.toml" <<'TOML'
name = "ties"
[model]
checkpoint = "hf-ties"
tokens = 2
samples = 1
[input]
file = "ties-input.safetensors"
[readout]
kind = "residual"
[engines]
f32 = ["fixed-order"]
[[transforms]]
name = "fuse"
kind = "fuse-layernorm"
TOML
expect_rc 0 "run --dump (truths beside binary32 midpoints)" "$bin" run --quiet --no-baseline \
    --out "$tmp/rep-ties" --dump "$tmp/dump-ties" "$tmp/ties.toml"
if "$py" - "$tmp/dump-ties/outputs.safetensors" "$tmp/rep-ties/report.json" <<'PY'
import json, struct, sys
import numpy as np
b = open(sys.argv[1], "rb").read()
n = struct.unpack("<Q", b[:8])[0]
h = json.loads(b[8:8 + n])
def get(name, dt):
    s, e = h[name]["data_offsets"]
    return np.frombuffer(b[8 + n + s:8 + n + e], dt)
pf = json.load(open(sys.argv[2]))["truth"]
assert pf["proven"], pf
odd = np.array([1, -1] * 4) * np.repeat([1.0, 2.0], 4) * (1 + 2.0 ** -23)
want = np.tile(odd, 2).astype(np.float32)
got = get("truth", "<f8").astype(np.float32)
for i in np.flatnonzero(got != want):
    print(f"truth[{i}] = {float(get('truth', '<f8')[i]).hex()} rounds to {float(got[i]).hex()}, "
          f"proven {float(want[i]).hex()}")
assert np.array_equal(got, want)
assert "truth.f32" in h, "no truth.f32 in the dump"
assert np.array_equal(get("truth.f32", "<f4"), want), get("truth.f32", "<f4")
PY
then ok "the dumped truth (float64 and truth.f32) rounds to the proven float32 at midpoints"
else bad "a dumped truth beside a binary32 midpoint rounds to the other neighbour"; fi
expect_rc 0 "NumPy re-run of the midpoint case; truth rounds to truth.f32" "$py" \
    scripts/verify_dump.py "$tmp/dump-ties"
has "$tmp/out" "truth vs truth.f32: 16 of 16 round to it" "verify_dump checks every truth value"
# the check can fail: truth.f32[5] moved one ulp
"$py" - "$tmp/dump-ties/outputs.safetensors" <<'PY'
import json, struct, sys
p = sys.argv[1]
b = bytearray(open(p, "rb").read())
n = struct.unpack("<Q", b[:8])[0]
s, e = json.loads(b[8:8 + n])["truth.f32"]["data_offsets"]
b[8 + n + s + 20] ^= 1  # the low byte of value 5
open(p, "wb").write(b)
PY
expect_rc 1 "a truth.f32 one ulp off is caught" "$py" scripts/verify_dump.py "$tmp/dump-ties"
named="truth[5] = -0x1.0000010000001p+1 rounds to -0x1.0000020000000p+1,"
has "$tmp/out" "$named truth.f32 -0x1.0000000000000p+1" "the value is named"

cic_test_done
