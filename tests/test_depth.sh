#!/bin/sh
# SPDX-License-Identifier: MIT
# test_depth.sh: error against depth. A three-block pre-LN case (residual
# readout, f32 and bf16 engines) and a three-block DiT with its final layer
# (head readout, rotated adaLN strategies): every row with metrics has one
# per_block entry per block (and one for the head), the last is the row's
# own figures bit for bit, the mapped-back rotated models score like the
# original (f32 error, no map error), the broken fusion scores as broken at
# every block; the terminal prints the depth lines; `cicheck plot` draws
# error_vs_block (skipped without gnuplot). A planted break in one middle
# block: a 4-layer LLaMA checkpoint (tests/make_checkpoint.py) whose norm
# gains are all 1 but one layer's input gain, under a rotation without a
# fold (exact only where the gains are uniform): the rotated row's error
# stays at float32's before that layer and jumps at it, for the break at
# layer 2 and at layer 1 (skipped without NumPy).
# Usage: test_depth.sh PATH/TO/cicheck
set -u
bin=$1
. "$(dirname "$0")/lib.sh"
cic_test_init depth
fix="$(dirname "$0")/fixtures"
py=/usr/bin/python3

"$bin" run --no-color --no-baseline --out "$tmp/p" "$fix/depth-preln.toml" >"$tmp/p.txt" 2>&1
rc=$?
[ $rc -eq 0 ] && ok "depth-preln runs" || bad "depth-preln runs (rc $rc)"
sed 's/layers = 2/layers = 3/; s/name = "valid-dit"/name = "depth-dit"/' \
    "$fix/valid-dit.toml" >"$tmp/dit.toml"
"$bin" run --no-color --no-baseline --out "$tmp/d" "$tmp/dit.toml" >"$tmp/d.txt" 2>&1
rc=$?
[ $rc -eq 0 ] && ok "depth-dit runs" || bad "depth-dit runs (rc $rc)"

# check REPORT BLOCKS HEAD: the per_block layout of every row
check() {
    "$py" - "$1" "$2" "$3" <<'PY'
import json, sys
r = json.load(open(sys.argv[1])); L = int(sys.argv[2]); head = sys.argv[3] == "1"
bad = []
for x in r["results"]:
    pb, who = x["per_block"], "%s/%s" % (x["transform"], x["engine"])
    if x["metrics"] is None:
        if pb is not None: bad.append(who + ": per_block without metrics")
        continue
    if pb is None or len(pb) != L + head:
        bad.append(who + ": %s entries" % (None if pb is None else len(pb))); continue
    if [e["block"] for e in pb] != list(range(L + head)): bad.append(who + ": block numbers")
    if [e["readout"] for e in pb] != [False] * (L + head - 1) + [True]: bad.append(who + ": readout flags")
    if pb[-1]["head"] != head: bad.append(who + ": head flag")
    m, e = x["metrics"], pb[-1]
    if (e["max_abs"], e["rel_norm2"], e["ulp_row_p99"]) != (m["max_abs"], m["rel_norm2"], m["ulp_row"]["p99"]):
        bad.append(who + ": the readout's entry is not the row's figures")
    for e in pb[:-1]:
        if e["rel_norm2"] is None: bad.append(who + ": block %d not scored: %s" % (e["block"], e["reason"]))
        elif x["transform"] in ("no-mean-bake", "static-fold", "static-fold-mp"):
            if not e["rel_norm2"] > 1e-3: bad.append(who + ": broken block %d scores %g" % (e["block"], e["rel_norm2"]))
        elif not e["rel_norm2"] < (1e-2 if x["engine"] == "bf16" else 1e-6):
            bad.append(who + ": block %d scores %g" % (e["block"], e["rel_norm2"]))
        elif not e["truth_radius"]["rel_norm2"] < e["rel_norm2"] / 16:
            bad.append(who + ": block %d's truth radius" % e["block"])
print("\n".join(bad)); sys.exit(1 if bad else 0)
PY
}
check "$tmp/p/report.json" 3 0 && ok "preln: 3 entries per row, the last the row's figures" ||
    bad "preln per_block"
check "$tmp/d/report.json" 3 1 && ok "dit: 3 blocks and the final layer per row" ||
    bad "dit per_block"
"$py" - "$tmp/p/report.json" <<'PY' && ok "bf16 rows have per_block" || bad "bf16 rows have per_block"
import json, sys
r = json.load(open(sys.argv[1]))
sys.exit(0 if any(x["engine"] == "bf16" and x["per_block"] for x in r["results"]) else 1)
PY

has "$tmp/p.txt" "error against depth" "the depth lines"
grep -q '^  rotate  *bf16  ' "$tmp/p.txt" && ok "a depth line per engine row" ||
    bad "a depth line per engine row"
grep -q '| head ' "$tmp/d.txt" && ok "the dit depth lines end with the head" ||
    bad "the dit depth lines end with the head"

# planted LAYER: the per_block rel_norm2 of the rotated f32 row, one line,
# for the checkpoint whose only non-unit gain is LAYER's input gain
planted() {
    rm -rf "$tmp/hf"
    "$py" "$root/tests/make_checkpoint.py" "$tmp/pd/original.safetensors" "$tmp/hf" >/dev/null &&
        "$py" - "$tmp/hf/model.safetensors" "$1" "$root/tests" <<'PY' || return 1
import sys
sys.path.insert(0, sys.argv[3])
import numpy as np
from make_checkpoint import read_st, write_st
path, keep = sys.argv[1], "model.layers.%s.input_layernorm.weight" % sys.argv[2]
t, _ = read_st(path)
write_st(path, [(k, "F32", v.shape, np.ascontiguousarray(
    v if k == keep or not k.endswith("norm.weight") else np.ones_like(v), dtype="<f4").tobytes())
    for k, v in t.items()])
PY
    "$bin" run --quiet --no-color --no-baseline --out "$tmp/pr" "$tmp/planted.toml" >/dev/null || return 1
    "$py" -c 'import json, sys
r = [x for x in json.load(open(sys.argv[1]))["results"] if x["transform"] == "rot" and x["per_block"]]
print(" ".join("%.3g" % e["rel_norm2"] for e in r[0]["per_block"]))' "$tmp/pr/report.json"
}
root="$(cd "$(dirname "$0")/.." && pwd)"
if "$py" -c 'import numpy' 2>/dev/null; then
    cat >"$tmp/pd.toml" <<'TOML'
name = "planted-seed"
[model]
block = "rmsnorm"
d_model = 64
heads = 4
kv_heads = 2
rope = "half"
mlp_ratio = 2
tokens = 8
samples = 2
layers = 4
causal = true
seed = 21
[model.weights]
std = 0.1
[engines]
f32 = ["openblas"]
mpfr_prec = 64
TOML
    cat >"$tmp/planted.toml" <<'TOML'
name = "planted"
[model]
checkpoint = "hf"
tokens = 8
samples = 2
seed = 21
[readout]
kind = "residual"
[engines]
f32 = ["openblas"]
mpfr_prec = 64
[[transforms]]
name = "rot"
kind = "rotate"
q = "random"
seed = 5
expect = "broken"
TOML
    expect_rc 0 "the seed of the planted checkpoints dumps" "$bin" run --quiet --no-baseline \
        --out "$tmp/pds" --dump "$tmp/pd" "$tmp/pd.toml"
    for at in 2 1; do
        if e=$(planted "$at"); then
            # float32's error before the plant, the break's from it on
            echo "$e" | awk -v at="$at" '{ for (b = 1; b <= NF; b++)
                if ((b - 1 < at) != ($b < 1e-6) || (b - 1 >= at) != ($b > 1e-3)) exit 1
                exit NF != 4 }' && ok "a break planted at layer $at: per_block jumps there ($e)" ||
                bad "a break planted at layer $at: per_block $e"
        else
            bad "the checkpoint planted at layer $at runs"
        fi
    done
else
    skip "a planted break in one middle block" "no NumPy for $py"
fi

if cic_have gnuplot; then
    expect_rc 0 "plot of the dit run" "$bin" plot "$tmp/d"
    for e in dat gp png svg pdf; do
        [ -s "$tmp/d/plots/error_vs_block.$e" ] && ok "error_vs_block.$e" ||
            bad "error_vs_block.$e missing"
    done
    grep -q "'head'" "$tmp/d/plots/error_vs_block.gp" && ok "the head has its tic" ||
        bad "the head has its tic"
else
    skip "cicheck plot of the depth figure" "no gnuplot"
fi
cic_test_done
