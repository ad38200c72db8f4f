#!/bin/sh
# SPDX-License-Identifier: MIT
# test_verify_stream.sh: cicheck verify layer by layer, each verdict decided
# by the cheapest engine (f64 with its proven bound, else MPFR). A
# LLaMA-shaped pair written by bench/make_ckpt_pair.py (d 256, 4 layers, GQA,
# float32; the rewrite folds the gains and rotates by R1):
#   - correct: every layer and the head equivalent, every one decided by f64;
#   - o_proj left unrotated at layer 2: layer 2 named the first broken;
#   - o_proj of layer 1 scaled so that ce sits at the equivalence threshold
#     (2^-12 for float32, found by the secant method on S - 1): ce's f64
#     enclosure straddles it, so MPFR decides layer 1 and the output says so;
#   - --engine mpfr: MPFR decides every layer, with the same verdicts.
# Needs Debian's /usr/bin/python3 with numpy (exit 77 without it).
# Usage: test_verify_stream.sh PATH/TO/cicheck   (CIC_SOURCE_ROOT: the source tree)
set -u
bin=$1
root=${CIC_SOURCE_ROOT:-$(cd "$(dirname "$0")/.." && pwd)}
. "$(dirname "$0")/lib.sh"
cic_need_numpy "Debian's python3 writes the checkpoints with NumPy"
cic_test_init verify_stream
mk="$root/bench/make_ckpt_pair.py"
sz="--d 256 --layers 4 --heads 4 --kv-heads 2 --mlp 688 --vocab 96 --dtype f32"

# field FILE EXPR: a value of report.json (EXPR in Python on r = its "verify")
field() {
    "$py" -c 'import json,sys; r=json.load(open(sys.argv[1]))["verify"]; print(eval(sys.argv[2]))' "$1" "$2"
}
# pair NAME [make_ckpt_pair options]: write $tmp/NAME, verify it into $tmp/NAME/r
pair() {
    p_name=$1
    shift
    # shellcheck disable=SC2086 # the options are words
    "$py" "$mk" "$tmp/$p_name" $sz "$@" >/dev/null 2>"$tmp/mkerr" || { bad "make $p_name"; cat "$tmp/mkerr"; }
    "$bin" verify "$tmp/$p_name/orig" "$tmp/$p_name/rw" --q "$tmp/$p_name/R1.safetensors" \
        --tokens 8 --out "$tmp/$p_name/r" >"$tmp/out" 2>"$tmp/err"
}

pair ok
expect_rc_of=$?
[ "$expect_rc_of" -eq 0 ] && ok "correct rewrite: exit 0" || bad "correct rewrite: exit $expect_rc_of"
has "$tmp/out" "every layer and the head equivalent" "correct rewrite: equivalent"
[ "$(field "$tmp/ok/r/report.json" '",".join(l["decided_by"] for l in r["layers"]) + "," + r["head"]["decided_by"]')" = "f64,f64,f64,f64,f64" ] &&
    ok "correct rewrite: every layer and the head decided by f64" ||
    bad "correct rewrite: not every layer decided by f64"
[ "$(field "$tmp/ok/r/report.json" 'all(0 < l["f64_bound"] < 1e-6 for l in r["layers"])')" = True ] &&
    ok "correct rewrite: each f64 bound positive and small" || bad "correct rewrite: f64 bounds"
has "$tmp/out" "0 layers by MPFR" "correct rewrite: the output says no layer needed MPFR"

pair broken --plant 2
rc=$?
[ "$rc" -eq 1 ] && ok "o_proj unrotated at layer 2: exit 1" || bad "unrotated: exit $rc"
has "$tmp/out" "first layer not equivalent: 2 (broken)" "unrotated: layer 2 named broken"
[ "$(field "$tmp/broken/r/report.json" 'r["first_layer_not_equivalent"]')" = 2 ] &&
    ok "unrotated: report.json names layer 2" || bad "unrotated: report.json"
[ "$(field "$tmp/broken/r/report.json" '[l["verdict"] for l in r["layers"]][:2]')" = "['equivalent', 'equivalent']" ] &&
    ok "unrotated: layers 0 and 1 equivalent" || bad "unrotated: a layer before 2 not equivalent"

# ce of layer 1 against S - 1 is nearly linear (|S - 1| times o's share):
# the secant method puts it within the f64 bound of eq = 2^-12
e=1e-3
i=0
while [ $i -lt 6 ]; do
    pair thr --scale "1:$("$py" -c "print(1 + $e)")"
    ce=$(field "$tmp/thr/r/report.json" 'r["layers"][1]["ce_residual"]')
    by=$(field "$tmp/thr/r/report.json" 'r["layers"][1]["decided_by"]')
    [ "$by" = mpfr ] && break
    e=$("$py" -c "print(repr($e * 2.0**-12 / $ce))")
    i=$((i + 1))
done
[ "$by" = mpfr ] && ok "ce at the threshold (S - 1 = $e, ce $ce): MPFR decides layer 1" ||
    bad "ce at the threshold: layer 1 decided by $by (ce $ce after $i steps)"
[ "$(field "$tmp/thr/r/report.json" 'r["layers"][0]["decided_by"]')" = f64 ] &&
    ok "ce at the threshold: layer 0 still decided by f64" || bad "threshold: layer 0 not by f64"
[ "$(field "$tmp/thr/r/report.json" 'abs(r["layers"][1]["ce_residual"] - 2.0**-12) <= 10 * r["layers"][1]["f64_bound"]')" = True ] &&
    ok "ce at the threshold: within the f64 bound's reach of 2^-12" ||
    bad "threshold: ce not near 2^-12"
grep -qE "^ +1  mpfr " "$tmp/out" && ok "ce at the threshold: the output says mpfr decided layer 1" ||
    bad "threshold: the output does not say mpfr for layer 1"

"$bin" verify "$tmp/broken/orig" "$tmp/broken/rw" --q "$tmp/broken/R1.safetensors" --tokens 8 \
    --engine mpfr --out "$tmp/mp" >"$tmp/out" 2>"$tmp/err"
rc=$?
[ "$rc" -eq 1 ] && ok "--engine mpfr: exit 1" || bad "--engine mpfr: exit $rc"
[ "$(field "$tmp/mp/report.json" '",".join(l["decided_by"] for l in r["layers"])')" = "mpfr,mpfr,mpfr,mpfr" ] &&
    ok "--engine mpfr: MPFR decides every layer" || bad "--engine mpfr: not every layer by MPFR"
[ "$(field "$tmp/mp/report.json" '[l["verdict"] for l in r["layers"]]')" = "$(field "$tmp/broken/r/report.json" '[l["verdict"] for l in r["layers"]]')" ] &&
    ok "--engine mpfr: the same verdicts as f64's" || bad "--engine mpfr: other verdicts"
# the f64 enclosure holds the exact ce; MPFR's (at 128 bits) must lie in it
"$py" - "$tmp/mp/report.json" "$tmp/broken/r/report.json" <<'PY' && ok "--engine mpfr: each MPFR ce inside the f64 enclosure" || bad "--engine mpfr: an MPFR ce outside the f64 enclosure"
import json, sys
m = json.load(open(sys.argv[1]))["verify"]["layers"]
f = json.load(open(sys.argv[2]))["verify"]["layers"]
bad = [(a["layer"], a["ce_residual"], b["ce_residual"], b["f64_bound"]) for a, b in zip(m, f)
       if not abs(a["ce_residual"] - b["ce_residual"]) <= b["f64_bound"]]
print(bad) if bad else None
sys.exit(1 if bad else 0)
PY
cic_test_done
