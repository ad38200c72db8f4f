#!/bin/sh
# SPDX-License-Identifier: MIT
# test_verify_dit.sh: cicheck verify on DiT rewrites (--adaln), written by
# tests/make_dit_rewrite.py with NumPy (never by cicheck): a tiny DiT (d 32,
# 4 heads, m 128, d_cond 16, 5 blocks) and its rewrite by each adaLN
# strategy:
#   - each strategy correct: exit 0, every block equivalent on every sample;
#   - a planted mistake at block 2 of each: exit 1, block 2 alone broken,
#     the tensor and the mistake named (text and report.json); one in the
#     final layer alone;
#   - a static fold on 3 conditions from the input file: exact on its own
#     (sample 0, and sample 1 when folded for that one), broken on the
#     others, the block named, exit 1;
#   - the mean-preserving stream (--layernorm kept), BF16 storage;
#   - shape and option errors: exit 2 with both sides named.
# Needs Debian's /usr/bin/python3 with numpy (exit 77 without it).
# Usage: test_verify_dit.sh PATH/TO/cicheck   (CIC_SOURCE_ROOT: the source tree)
set -u
bin=$1
root=${CIC_SOURCE_ROOT:-$(cd "$(dirname "$0")/.." && pwd)}
. "$(dirname "$0")/lib.sh"
cic_need_numpy "Debian's python3 writes the checkpoints with NumPy"
cic_test_init verify_dit
mk="$root/tests/make_dit_rewrite.py"
cd "$tmp" || exit 1

# field FILE EXPR: a value of report.json (EXPR in Python on r = its "verify")
field() {
    "$py" -c 'import json,sys; r=json.load(open(sys.argv[1]))["verify"]; print(eval(sys.argv[2]))' "$1" "$2"
}
# check_field FILE EXPR WANT DESCRIPTION
check_field() {
    got=$(field "$1" "$2" 2>&1)
    if [ "$got" = "$3" ]; then ok "$4"; else bad "$4: $2 = '$got', expected '$3'"; fi
}
# rw NAME STRATEGY [make options]: the rewrite of dit into NAME
rw() {
    rw_name=$1
    rw_s=$2
    shift 2
    "$py" "$mk" rewrite dit "$rw_name" --adaln "$rw_s" "$@" >/dev/null 2>"$tmp/mkerr" ||
        { bad "make $rw_name"; cat "$tmp/mkerr"; }
}
# qopt NAME STRATEGY: the --q a strategy's verify needs
qopt() { [ "$2" = branch-rotate ] || echo "--q $1/Q.safetensors"; }

"$py" "$mk" original dit || bad "make the original"

for s in static-fold online-unrotate per-sample-fold branch-rotate; do
    rw "$s" "$s"
    # shellcheck disable=SC2046 # the option is two words
    expect_rc 0 "$s: the correct rewrite is equivalent" \
        "$bin" verify dit "$s" --adaln "$s" $(qopt "$s" "$s") --samples 1 --tokens 8 --out "r-$s"
    has "$tmp/out" "every block and the final layer equivalent on every sample" \
        "$s: every block and the final layer equivalent"
    has "$tmp/out" "adaLN FLOPs per block" "$s: the per-block adaLN FLOPs are printed"
    check_field "r-$s/report.json" "r['first_layer_not_equivalent']" None \
        "$s: report.json has no broken layer"
done
check_field r-static-fold/report.json "r['adaln_flops_per_block']['modulation']['rewrite']" 0.0 \
    "static-fold: no modulation FLOPs left"
check_field r-per-sample-fold/report.json \
    "r['adaln_flops_per_block']['norm1']['rewrite'] > r['adaln_flops_per_block']['norm1']['original']" \
    True "per-sample-fold: the fold's FLOPs at the norm sites"

# planted mistakes at block 2: STRATEGY:KIND:TENSOR:FINDING
for m in "static-fold:qt-missing:blocks.2.attn.proj.weight:Q^T not applied" \
         "static-fold:gate-missing:blocks.2.mlp.fc2.weight:gate not folded" \
         "static-fold:mean-kept:blocks.2.attn.proj.weight:mean not removed (C missing)" \
         "static-fold:other-cond:blocks.2.* (every linear and bias):static fold used for another condition" \
         "online-unrotate:q-folded:blocks.2.attn.qkv.weight:Q folded into it, but online-unrotate keeps" \
         "per-sample-fold:q-folded:blocks.2.attn.qkv.weight:Q folded into it, but per-sample-fold keeps" \
         "branch-rotate:h-missing:blocks.2.mlp.fc2.weight:equals the original (Hadamard not applied)" \
         "online-unrotate:noise:blocks.2.attn.proj.weight:no known mistake explains it"; do
    s=${m%%:*}
    rest=${m#*:}
    k=${rest%%:*}
    rest=${rest#*:}
    tensor=${rest%%:*}
    finding=${rest#*:}
    rw "m-$k-$s" "$s" --mistake "$k:2"
    # shellcheck disable=SC2046
    expect_rc 1 "$s, $k at block 2: not equivalent" \
        "$bin" verify dit "m-$k-$s" --adaln "$s" $(qopt "m-$k-$s" "$s") --samples 1 --tokens 8 \
        --out "r-$k-$s"
    has "$tmp/out" "first block not equivalent: 2" "$s, $k: block 2 named the first broken"
    has "$tmp/out" "block 2 is broken on sample 0:" "$s, $k: block 2 broken"
    has "$tmp/out" "  $tensor: " "$s, $k: $tensor named"
    has "$tmp/out" "$finding" "$s, $k: the finding says $finding"
    check_field "r-$k-$s/report.json" "[l['verdict'] for l in r['layers']]" \
        "['equivalent', 'equivalent', 'broken', 'equivalent', 'equivalent']" \
        "$s, $k: report.json: only block 2 broken"
    check_field "r-$k-$s/report.json" "r['layers'][2]['diagnosis'][0]['tensor']" "$tensor" \
        "$s, $k: report.json's diagnosis names $tensor"
    if grep -F -- "- block 2, \`$tensor\`: " "r-$k-$s/report.md" | grep -qF -- "$finding"; then
        ok "$s, $k: report.md's diagnosis names $tensor: $finding"
    else
        bad "$s, $k: report.md's diagnosis lacks $tensor: $finding"
    fi
    has "r-$k-$s/report.md" "**Not equivalent**: first block not equivalent: 2." \
        "$s, $k: report.md's verdict"
done

# a mistake in the final layer alone: every block equivalent, the final
# layer's linear named
for m in "static-fold:Q not applied" "branch-rotate:equals the original (Hadamard not applied)"; do
    s=${m%%:*}
    rw "f-$s" "$s" --mistake final-unrotated:0
    # shellcheck disable=SC2046
    expect_rc 1 "$s, final layer unrotated: not equivalent" \
        "$bin" verify dit "f-$s" --adaln "$s" $(qopt "f-$s" "$s") --samples 1 --out "r-f-$s"
    has "$tmp/out" "every block equivalent; the final layer is not" "$s: the blocks are fine"
    has "$tmp/out" "  final_layer.linear.weight: ${m#*:}" "$s: the final linear named"
    check_field "r-f-$s/report.json" "r['final_layer_diagnosis'][0]['tensor']" \
        final_layer.linear.weight "$s: report.json's final_layer_diagnosis"
done

# a static fold on 3 conditions from the input file, folded for sample 0's
"$py" "$mk" input in3.safetensors --samples 3 --tokens 8 --d 32 --dc 16 \
    --c0 static-fold/model.safetensors:0 || bad "make in3"
expect_rc 1 "static fold on 3 conditions: not equivalent on all" \
    "$bin" verify dit static-fold --adaln static-fold --q static-fold/Q.safetensors \
    --input in3.safetensors --out r-3
has "$tmp/out" "sample 0 has the static fold's calibration condition adaln.c0" \
    "3 conditions: sample 0 is the calibration condition"
has "$tmp/out" "blocks 0, 1, 2, 3, 4 are broken on samples 1, 2:" \
    "3 conditions: every block broken on samples 1 and 2"
has "$tmp/out" "adaln.c0: every tensor is folded for adaln.c0 (sample 0's condition) and exact on it" \
    "3 conditions: exact on the calibration condition"
has "$tmp/out" "on the calibration condition (sample 0): every block equivalent" \
    "3 conditions: the calibration summary"
check_field r-3/report.json "r['layers'][2]['verdict_per_sample']" \
    "['equivalent', 'broken', 'broken']" "3 conditions: block 2 per sample in report.json"
check_field r-3/report.json "r['conditions'], r['samples'], r['tokens']" "('file', 3, 8)" \
    "3 conditions: conditions, samples and tokens from the file"
# folded for the condition of sample 1 of another file: exact on sample 1 only
"$py" "$mk" input in3b.safetensors --samples 3 --tokens 8 --d 32 --dc 16 --seed 5 || bad "in3b"
rw sf1 static-fold --c0 in3b.safetensors:1
expect_rc 1 "static fold for sample 1's condition" \
    "$bin" verify dit sf1 --adaln static-fold --q sf1/Q.safetensors --input in3b.safetensors \
    --out r-3b
check_field r-3b/report.json "r['calibration_sample'], r['layers'][3]['verdict_per_sample']" \
    "(1, ['broken', 'equivalent', 'broken'])" "sample 1 folded: exact on sample 1 alone"
# a planted mistake on the calibration sample among others
rw sfm static-fold --c0 in3.safetensors:0 --mistake qt-missing:3
expect_rc 1 "static fold with Q^T missing at block 3, 3 conditions" \
    "$bin" verify dit sfm --adaln static-fold --q sfm/Q.safetensors --input in3.safetensors
has "$tmp/out" "on the calibration condition (sample 0): first block not equivalent: 3" \
    "3 conditions: block 3 named on the calibration condition"
has "$tmp/out" "  blocks.3.attn.proj.weight: Q^T not applied" "3 conditions: proj of block 3 named"

# block 2 folded for sample 2's condition instead of c0's
rw sfo static-fold --c0 in3.safetensors:0 --mistake other-cond:2 --other in3.safetensors:2
expect_rc 1 "block 2 folded for another sample's condition" \
    "$bin" verify dit sfo --adaln static-fold --q sfo/Q.safetensors --input in3.safetensors \
    --out r-sfo
has "$tmp/out" "folded for sample 2's condition, not for adaln.c0 (static fold used for another condition)" \
    "the condition block 2 was folded for named"
check_field r-sfo/report.json "r['layers'][2]['verdict_per_sample']" \
    "['broken', 'broken', 'equivalent']" "block 2 exact on sample 2 alone"

# the mean-preserving stream, BF16 storage
rw mp static-fold --stream mean-preserving
expect_rc 0 "static fold on a mean-preserving stream (--layernorm kept)" \
    "$bin" verify dit mp --adaln static-fold --q mp/Q.safetensors --layernorm kept --samples 1
expect_rc 1 "the same judged on a centred stream (its writers lack C)" \
    "$bin" verify dit mp --adaln static-fold --q mp/Q.safetensors --samples 1
has "$tmp/out" "mean not removed (C missing)" "centred stream: C missing named"
rw bf online-unrotate --dtype bf16
expect_rc 0 "BF16 storage: equivalent at its thresholds" \
    "$bin" verify dit bf --adaln online-unrotate --q bf/Q.safetensors
has "$tmp/out" "stored at 8 bits" "BF16 storage: 8 bits"

# shape and option errors
"$py" -c '
import sys
sys.path.insert(0, sys.argv[1])
import numpy as np
from make_checkpoint import write_st
def w(p, t):
    write_st(p, [(n, "F32", a.shape, a.astype("<f4").tobytes()) for n, a in t])
w("mis.safetensors", [("input", np.zeros((2, 8, 32))), ("c", np.zeros((3, 16)))])
w("width.safetensors", [("c", np.zeros((3, 15)))])
w("rows.safetensors", [("input", np.zeros((20, 32))), ("c", np.zeros((3, 16)))])
w("c3.safetensors", [("c", np.zeros((3, 16)))])
w("x3.safetensors", [("input", np.zeros((2, 8, 32)))])
write_st("cint.safetensors", [("c", "I64", (3, 16), np.zeros((3, 16), "<i8").tobytes())])
write_st("xint.safetensors", [("input", "I32", (2, 8, 32), np.zeros((2, 8, 32), "<i4").tobytes())])
' "$root/tests" || bad "write the bad inputs"
q="--q online-unrotate/Q.safetensors"
# shellcheck disable=SC2086
expect_rc 2 "c's conditions and input's samples disagree" \
    "$bin" verify dit online-unrotate --adaln online-unrotate $q --input mis.safetensors
expect_err '"c" [3, 16] has 3 conditions, "input" [2, 8, 32] 2 samples' "both shapes named"
# shellcheck disable=SC2086
expect_rc 2 "c of the wrong width" \
    "$bin" verify dit online-unrotate --adaln online-unrotate $q --input width.safetensors
expect_err '"c" is [3, 15]; the conditions must be [samples, d_cond] = [samples, 16]' \
    "c's width named"
# shellcheck disable=SC2086
expect_rc 2 "input rows not a multiple of the samples" \
    "$bin" verify dit online-unrotate --adaln online-unrotate $q --input rows.safetensors
expect_err '"input" [20, 32] has 20 rows, not a multiple of the 3 samples' "rows named"
# shellcheck disable=SC2086
expect_rc 2 "integer conditions" \
    "$bin" verify dit online-unrotate --adaln online-unrotate $q --input cint.safetensors
expect_err '"c" is I64 [3, 16]; the conditions are a float tensor' "c's dtype named"
# shellcheck disable=SC2086
expect_rc 2 "integer hidden states" \
    "$bin" verify dit online-unrotate --adaln online-unrotate $q --input xint.safetensors
expect_err '"input" is I32 [2, 8, 32]; hidden states are a float tensor' "input's dtype named"
# shellcheck disable=SC2086
expect_rc 2 "--samples that disagrees with the file's conditions" \
    "$bin" verify dit online-unrotate --adaln online-unrotate $q --input c3.safetensors \
    --samples 5
expect_err "--samples 5, but the file's \"c\" is [3, 16]: 3 samples" "both named"
# shellcheck disable=SC2086
expect_rc 2 "--tokens that disagrees with a 3-D input" \
    "$bin" verify dit online-unrotate --adaln online-unrotate $q --input x3.safetensors \
    --tokens 4
expect_err "--tokens 4, but the file's \"input\" is [2, 8, 32]: 8 tokens" "both named"
expect_rc 2 "--adaln with a bad value" "$bin" verify dit online-unrotate --adaln bogus
expect_err "--adaln 'bogus': allowed static-fold, online-unrotate, per-sample-fold, branch-rotate" \
    "the allowed strategies listed"
expect_rc 2 "a DiT without --adaln" "$bin" verify dit online-unrotate
expect_err "a DiT rewrite needs --adaln STRATEGY" "--adaln asked for"
expect_rc 2 "a rotated stream without --q" "$bin" verify dit online-unrotate --adaln online-unrotate
expect_err "give its rotation with --q FILE" "--q asked for"
expect_rc 2 "a static fold judged as online-unrotate (no modulation stored)" \
    "$bin" verify dit static-fold --adaln online-unrotate --q static-fold/Q.safetensors
expect_err "no tensor 'blocks.0.adaLN_modulation.1.weight' [192, 16]" "the missing tensor named"
expect_rc 2 "online-unrotate judged as a static fold (no adaln.c0)" \
    "$bin" verify dit online-unrotate --adaln static-fold --q online-unrotate/Q.safetensors
expect_err "no tensor 'adaln.c0' [16]" "adaln.c0 asked for"
"$py" "$mk" original small --d 16 --heads 2 --layers 5 || bad "make small"
expect_rc 2 "a rewrite of another width" \
    "$bin" verify small branch-rotate --adaln branch-rotate
expect_err "tensor 'blocks.0.attn.qkv.weight' is F32 [96, 32]; expected a float [48, 16]" \
    "the tensor of the other width named, both shapes"

cic_test_done
