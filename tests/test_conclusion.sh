#!/bin/sh
# SPDX-License-Identifier: MIT
# test_conclusion.sh: the conclusion at the end of a dit run, end to end.
# A small dit case (derived from tests/fixtures/valid-dit.toml: d = 16, one
# layer, 3 samples, about a second a run) is run, then changed: another
# calibration sample, the cheapest strategy removed, another d_model,
# another token count, only static-folds, an expectation the verdict contradicts, a
# single sample. Each time the conclusion must say what the same run's
# tables say: its percentages and per-token figures are read from the FLOPs
# table of that run, its N* and B = 1 percentages from the analytical table,
# never written here. The Markdown summary must end with the same words.
# Usage: test_conclusion.sh PATH/TO/cicheck
set -u
bin=$1
. "$(dirname "$0")/lib.sh"
for t in awk grep sed; do
    cic_need "$t"
done
cic_test_init conclusion_cli
check() { # DESCRIPTION CMD...: ok when CMD succeeds
    cw=$1; shift
    if "$@"; then ok "$cw"; else bad "$cw"; fi
}

# case FILE D TOKENS SAMPLES TRANSFORM...: a small dit case with the
# transforms named (each a block below)
case_file() {
    f=$1 d=$2 n=$3 b=$4
    shift 4
    cat >"$f" <<EOF
name = "small-dit"

[model]
block = "dit"
d_model = $d
heads = 2
tokens = $n
samples = $b
layers = 1
d_cond = 8
final_layer = true
seed = 5

[model.weights]
std = 0.08
outlier_channels = 2
outlier_scale = 8.0

[engines]
f32 = ["openblas"]
mpfr_prec = 96
EOF
    for x in "$@"; do
        echo >>"$f"
        echo "[[transforms]]" >>"$f"
        case $x in
        sf) printf 'name = "sf"\nkind = "static-fold"\nq = "random"\nseed = 7\ncalibration = 1\n' ;;
        sf0) printf 'name = "sf0"\nkind = "static-fold"\nq = "random"\nseed = 3\ncalibration = 0\nexpect = "broken"\n' ;;
        sf-single) printf 'name = "sf"\nkind = "static-fold"\nq = "random"\nseed = 7\ncalibration = 0\nexpect = "equivalent"\n' ;;
        on-dense) printf 'name = "on-dense"\nkind = "online-unrotate"\nq = "random"\nseed = 7\n' ;;
        on-dense-broken) printf 'name = "on-dense"\nkind = "online-unrotate"\nq = "random"\nseed = 7\nexpect = "broken"\n' ;;
        on-fast) printf 'name = "on-fast"\nkind = "online-unrotate"\nq = "hadamard"\nseed = 3\nfast = true\n' ;;
        psf) printf 'name = "psf"\nkind = "per-sample-fold"\nq = "random"\nseed = 7\n' ;;
        br-fast) printf 'name = "br-fast"\nkind = "branch-rotate"\nq = "hadamard"\nseed = 3\nfast = true\n' ;;
        esac >>"$f"
    done
}

# run FILE [MORE ARGS]: output in $tmp/out, exit code in $rc
run() {
    f=$1; shift
    "$bin" run --quiet --no-color --no-baseline --out "$tmp/rep" "$@" "$f" >"$tmp/out" 2>"$tmp/err"
    rc=$?
    sed -n '/^Conclusion:/,$p' "$tmp/out" >"$tmp/concl"
}
# the conclusion's line that starts with $1 (after its indent)
line() { awk -v p="$1" '{ s = $0; sub(/^ +/, "", s) } index(s, p) == 1 { print s; exit }' "$tmp/concl"; }
has() { line "$1" | grep -qF -- "$2"; }
# the FLOPs table row of transform $1: column $2 (4 extra/token, 6 extra %)
flops_col() { awk -v t="$1" -v c="$2" '$1 == "FLOPs" { f = 1; next } f && $1 == t { print $c; exit }' "$tmp/out"; }
# the analytical table's column of strategy $1, joined like the conclusion
table_col() {
    awk -v s="$1" '/^ +N +online-dense/ { for (i = 2; i <= NF; i++) if ($i == s) c = i + 0; next }
                   c && $1 ~ /^[0-9]+$/ { o = o (o == "" ? "" : " / ") $c } END { print o }' "$tmp/out"
}
# the analytical table's N* against $1 (online-dense or online-fast)
table_nstar() { awk -v s="$1" '$1 == "N*" && $4 == s":" || ($4 == s && $5 == ":") { for (i = 4; i <= NF; i++) if ($i ~ /^[0-9.]+$/) { print $i; exit } }' "$tmp/out"; }

# checks common to every run: the conclusion is there, last, and its
# cheapest strategy's figures ($1 name, $2 analytical column) and N* agree
# with the tables of the same run
agree() {
    what=$1 name=$2 col=$3
    check "$what: a conclusion" test -s "$tmp/concl"
    check "$what: the conclusion is the end of the output" \
        sh -c 'tail -1 "$1" | grep -q "^  crossover N\*"' sh "$tmp/out"
    check "$what: the conclusion follows the analytical table" \
        sh -c 'awk "/N\\* per-sample-fold < online-fast/ { t = NR } /^Conclusion:/ { c = NR } END { exit !(t && c > t) }" "$1"' sh "$tmp/out"
    nd=$(table_nstar online-dense)
    nf=$(table_nstar online-fast)
    check "$what: N* dense ($nd) as in the table" has "crossover N*" "$nd with a dense Q"
    check "$what: N* fast ($nf) as in the table" has "crossover N*" "$nf with the fast Hadamard"
    [ -n "$name" ] || return 0
    pct=$(flops_col "$name" 6)
    tok=$(flops_col "$name" 4)
    check "$what: cheapest exact is $name" has "cheapest exact:" "'$name' ("
    check "$what: its extra ($pct) as in the FLOPs table" has "cheapest exact:" ": $pct FLOPs, $tok per token"
    check "$what: its B = 1 figures as the $col column" has "its extra FLOPs" ": $(table_col "$col")"
}

# 1. the base case
base="$tmp/base.toml"
case_file "$base" 16 8 3 sf on-dense on-fast psf br-fast
run "$base" --markdown "$tmp/summary.md"
check "base: exit 0" test "$rc" -eq 0
agree base on-fast online-fast
check "base: 4 of 5 exact, cost extra" has "Conclusion:" "Exactly, yes; at no extra cost, no: 4 of 5 strategies are exact on every sample"
check "base: exact list" has "exact on every sample" "online-unrotate 'on-dense', 'on-fast'; per-sample-fold 'psf'; branch-rotate 'br-fast'"
check "base: static-fold exact on its calibration sample only" has "exact on some samples only:" "static-fold 'sf' on sample 1 only, its calibration sample (broken on samples 0, 2;"
check "base: static-fold cheaper but not exact" has "cheaper but not exact:" "static-fold 'sf' ($(flops_col sf 6))"
check "base: N = 8 below both N*" has "crossover N*" "this case's N = 8 is below both"
check "base: nothing unexpected" sh -c '! grep -q "unexpected:" "$1"' sh "$tmp/concl"
check "base: Markdown names the case" grep -qF "**small-dit**: Conclusion: can this adaLN block" "$tmp/summary.md"
check "base: Markdown ends with the crossover" sh -c 'grep -v "^\$" "$1" | tail -1 | grep -q "^- crossover N\\\\\\* "' sh "$tmp/summary.md"
check "base: Markdown cheapest as in the terminal" grep -qF -- "$(sed -n 's/^  \(cheapest exact: .*\)$/- \1/p' "$tmp/concl")" "$tmp/summary.md"
cp "$tmp/concl" "$tmp/concl.base"

# 2. another calibration sample
sed 's/^calibration = 1$/calibration = 2/' "$base" >"$tmp/cal.toml"
run "$tmp/cal.toml"
check "calibration 2: exit 0" test "$rc" -eq 0
check "calibration 2: the words follow" has "exact on some samples only:" "static-fold 'sf' on sample 2 only, its calibration sample (broken on samples 0, 1;"

# 3. the cheapest exact strategy removed: another is cheapest
case_file "$tmp/nofast.toml" 16 8 3 sf on-dense psf br-fast
run "$tmp/nofast.toml"
check "without on-fast: exit 0" test "$rc" -eq 0
agree "without on-fast" br-fast branch-fast
check "without on-fast: 3 of 4" has "Conclusion:" "3 of 4 strategies are exact"
check "without on-fast: not named" sh -c '! grep -q "on-fast" "$1"' sh "$tmp/concl"
check "without on-fast: the figures moved" sh -c '[ "$(grep "cheapest exact:" "$1")" != "$(grep "cheapest exact:" "$2")" ]' sh "$tmp/concl" "$tmp/concl.base"

# 4. another width: d = 32; the N* move with it
case_file "$tmp/size.toml" 32 8 3 sf on-dense on-fast psf br-fast
run "$tmp/size.toml"
check "d 32: exit 0" test "$rc" -eq 0
agree "d 32" on-fast online-fast
check "d 32: N* moved" sh -c '[ "$(grep "crossover N" "$1")" != "$(grep "crossover N" "$2")" ]' sh "$tmp/concl" "$tmp/concl.base"
check "d 32: the figures moved" sh -c '[ "$(grep "cheapest exact:" "$1")" != "$(grep "cheapest exact:" "$2")" ]' sh "$tmp/concl" "$tmp/concl.base"

# 5. more tokens: N = 48 lies between the two N* of d = 16, and per-sample
# folding is then the cheaper of the dense strategies
case_file "$tmp/tokens.toml" 16 48 2 on-dense psf
run "$tmp/tokens.toml"
check "N 48: exit 0" test "$rc" -eq 0
agree "N 48" psf per-sample-fold
rel=$(awk -v n=48 -v d="$nd" -v f="$nf" 'BEGIN { a = n > d ? "above" : n < d ? "below" : "at"; b = n > f ? "above" : n < f ? "below" : "at";
      if (a == b) print "is " a " both"; else print "is " a " the dense N* and " b " the fast one" }')
check "N 48: N = 48 $rel" has "crossover N*" "this case's N = 48 $rel"
check "N 48: every strategy exact" has "every strategy is exact on every sample" "online-unrotate 'on-dense'; per-sample-fold 'psf'"

# 6. only static-folds: nothing exact
case_file "$tmp/broken.toml" 16 8 3 sf sf0
run "$tmp/broken.toml"
check "static-folds only: exit 0" test "$rc" -eq 0
agree "static-folds only" "" ""
check "static-folds only: no" has "Conclusion:" "No: none of the 2 strategies is exact on every sample."
check "static-folds only: none exact" has "exact on every sample" "): none"
check "static-folds only: each on its own sample" has "exact on some samples only:" "static-fold 'sf0' on sample 0 only, its calibration sample"
check "static-folds only: no cheapest" sh -c '! grep -q "cheapest exact" "$1"' sh "$tmp/concl"

# 7. a verdict the case does not expect
case_file "$tmp/unexp.toml" 16 8 3 sf on-dense-broken
run "$tmp/unexp.toml"
check "unexpected: exit 1" test "$rc" -eq 1
agree unexpected on-dense online-dense
check "unexpected: said" has "unexpected:" "online-unrotate 'on-dense' is equivalent (ce_residual"
check "unexpected: with the expectation" has "unexpected:" "where the case expects broken"

# 8. a single sample: static-fold is exact too, and the cheapest
case_file "$tmp/single.toml" 16 8 1 sf-single on-fast psf
run "$tmp/single.toml"
check "one sample: exit 0" test "$rc" -eq 0
agree "one sample" sf static-fold
check "one sample: yes" has "Conclusion:" "Yes on this case's single sample: 3 of 3 strategies are exact on every sample, and the cheapest of them needs"
check "one sample: every strategy exact" has "every strategy is exact on every sample" "static-fold 'sf'; online-unrotate 'on-fast'; per-sample-fold 'psf' (static-fold: the calibration sample is the only sample)"

cic_test_done
