#!/bin/sh
# SPDX-License-Identifier: MIT
# test_proof.sh: the proven truth through `cicheck run` (src/pipeline/truth.c).
#   - a small preln case (d 64, 4 layers) at the default 64 bits: every
#     value proven at 64 bits, precisions [64];
#   - the same at 8 layers with weights of std 0.07 (with the norm-wise
#     bound, std 0.02 proves 16 layers at 64 bits): the balls grow past
#     binary32's rounding at 64 bits, so every sample is recomputed at 128
#     bits (Ziv) and every value
#     is proven there; the report counts them, its largest relative radius
#     is that of the values kept, and the summary line says so;
#   - --recheck adds sample 0 at mpfr_prec + 64 (max_rel_diff a number);
#     without it max_rel_diff is null.
# Usage: test_proof.sh PATH/TO/cicheck
set -u
bin=$1
. "$(dirname "$0")/lib.sh"
cic_need "$py" "Debian's python3 reads report.json"
cic_test_init proof

case_of() { # LAYERS
    cic_tiny_case "proof-$1" | sed "s/^layers = 1/layers = $1/; s/^d_model = 8/d_model = 64/; s/^heads = 2/heads = 4/"
}
# field OUT EXPR WANT DESCRIPTION: the Python expression over OUT's report r prints WANT
field() {
    "$py" -c "import json, sys; r = json.load(open(sys.argv[1])); print($2)" "$1/report.json" \
        >"$tmp/field" 2>&1
    has "$tmp/field" "$3" "$4"
}

case_of 4 >"$tmp/p4.toml"
expect_rc 0 "4 layers at 64 bits" "$bin" run --no-baseline --no-color --out "$tmp/p4" "$tmp/p4.toml"
field "$tmp/p4" 'r["truth"]["proven"], r["truth"]["proven_first"], r["truth"]["escalated"], r["truth"]["precisions"]' \
    "True 16 0 [64]" "every value proven at 64 bits"
field "$tmp/p4" 'r["truth"]["max_rel_diff"]' "None" "no recheck: max_rel_diff is null"

case_of 8 | sed 's/^\[engines\]/[model.weights]\nstd = 0.07\n[engines]/' >"$tmp/p8.toml"
expect_rc 0 "8 layers at 64 bits" "$bin" run --no-baseline --no-color --out "$tmp/p8" "$tmp/p8.toml"
has "$tmp/out" "truth proven: 16 values, 16 at a higher precision" "the summary counts the escalated values"
field "$tmp/p8" 'r["truth"]["proven"], r["truth"]["proven_first"], r["truth"]["escalated"], r["truth"]["precisions"]' \
    "True 0 16 [64, 128]" "every value proven at 128 bits"
field "$tmp/p8" 'r["truth"]["max_rel_radius"] < 2.0 ** -60' "True" \
    "the largest relative radius is that of the 128-bit values kept"
has "$tmp/err" "16 values not proven; their samples at 128 bits" "the escalation is a stage line"

expect_rc 0 "--recheck" "$bin" run --recheck --no-baseline --no-color --out "$tmp/p4r" "$tmp/p4.toml"
field "$tmp/p4r" 'r["truth"]["certified"], r["truth"]["max_rel_diff"] < 2.0 ** -40' "True True" \
    "--recheck: the recomputation agrees"
has "$tmp/out" "recheck at +64 bits: max rel diff" "--recheck: the summary says so"
cic_test_done
