#!/bin/sh
# SPDX-License-Identifier: MIT
# test_cli.sh: end to end through the cicheck binary.
#   - --help / --version / usage errors and their exit codes
#   - every shipped case exits 0; known-break cases report "broken"
#   - every malformed case exits 2 with "file:line:column: message" as its
#     first line says ("# expect: LINE:COL substring")
#   - an impossible gate exits 1 and names the transform and the metric
#   - report.json is written and names the keys other tools rely on
#   - every shipped case is fingerprinted in reference/weights.sha256
#   - --dump writes the safetensors files (test_dump_numpy.sh re-runs them
#     in NumPy; test_sweep_plots.sh checks the plots of a sweep; test_ciout
#     validates JUnit with xmllint)
# The checks that edit or read JSON need Debian's python3 (lib.sh's $py):
# reported as SKIP without it.
# Usage: test_cli.sh PATH/TO/cicheck   (CIC_SOURCE_ROOT: the source tree)
set -u
bin=$1
root=${CIC_SOURCE_ROOT:-$(cd "$(dirname "$0")/.." && pwd)}
. "$(dirname "$0")/lib.sh"
cic_test_init cli

cd "$root" || exit 1

expect_rc 0 "--version" "$bin" --version
grep -q '^cicheck ' "$tmp/out" && ok "version text" || bad "version text"
expect_rc 0 "--help" "$bin" --help
expect_rc 0 "run --help" "$bin" run --help
grep -q -- '--dump' "$tmp/out" && ok "run --help lists --dump" || bad "run --help lists --dump"
expect_rc 2 "no command" "$bin"
expect_rc 2 "unknown command" "$bin" frobnicate
expect_rc 2 "run without a case" "$bin" run
expect_rc 2 "unknown option" "$bin" run --bogus cases/layernorm.toml
expect_rc 2 "missing case file" "$bin" run --quiet "$tmp/nope.toml"
grep -q "nope.toml" "$tmp/err" && ok "missing file is named" || bad "missing file is named"

# shipped cases. Five run only in the regression gate of .ci/run (against
# their baselines): cases/dit-xl2.toml is benchmark-sized (minutes),
# cases/adaln.toml, the main job, takes a third of this suite's time on 2
# cores (its block and strategies are covered by test_adaln and
# test_conclusion.sh on smaller shapes), and the two quantization cases
# (half a minute each) are checked by test_quant_cases.sh on the gate's
# reports (the low-precision engines by test_lowp, test_dump_numpy and
# test_sweep_plots on small shapes), and cases/quarot-llama.toml (20 s;
# its rotations are covered by test_xform, test_flops and the
# known breaks on small shapes)
for c in cases/*.toml cases/known-breaks/*.toml; do
    # the large cases (*-full.toml) run only when named: no gate, no baseline
    case "$c" in *-full.toml) continue ;; esac
    grep -q "  $c\$" reference/weights.sha256 && ok "$c fingerprinted" ||
        bad "$c has no line in reference/weights.sha256 (cicheck hash $c)"
    case "$c" in
    cases/dit-xl2.toml | cases/adaln.toml | cases/quant-*.toml | cases/quarot-llama.toml) continue ;;
    esac
    expect_rc 0 "run $c" "$bin" run --quiet --no-color --out "$tmp/rep" "$c"
    case "$c" in
    cases/known-breaks/*)
        grep -q ' broken ' "$tmp/out" && ok "$c reports broken" || bad "$c reports broken" ;;
    esac
done

# OpenBLAS's idle-thread timeout (base/blasenv.h): cicheck sets 2^20
# cycles and runs itself again, unless the user chose a value
cic_tiny_case blas >"$tmp/blas.toml"
expect_rc 0 "tiny case, OpenBLAS timeout left to cicheck" env -u OPENBLAS_THREAD_TIMEOUT \
    -u GOTO_THREAD_TIMEOUT "$bin" run --quiet --no-baseline --out "$tmp/blas0" "$tmp/blas.toml"
has "$tmp/blas0/report.json" '"openblas_thread_timeout": "20"' "cicheck sets OPENBLAS_THREAD_TIMEOUT=20"
expect_rc 0 "tiny case, OPENBLAS_THREAD_TIMEOUT=7" env -u GOTO_THREAD_TIMEOUT \
    OPENBLAS_THREAD_TIMEOUT=7 "$bin" run --quiet --no-baseline --out "$tmp/blas7" "$tmp/blas.toml"
has "$tmp/blas7/report.json" '"openblas_thread_timeout": "7"' "a user's OPENBLAS_THREAD_TIMEOUT is kept"

# report.json of the last run
if [ -f "$tmp/rep/report.json" ]; then
    for k in cicheck_version environment results gates ce_residual ulp_row drift decomposition flops pass; do
        grep -q "\"$k\"" "$tmp/rep/report.json" && ok "report.json has $k" || bad "report.json has $k"
    done
    ls -A "$tmp/rep" | grep -q '^\.' && bad "temporary file left next to report.json" ||
        ok "no temporary file left"
else
    bad "report.json written"
fi

# malformed cases: exit 2 with the location of the mistake
for f in tests/malformed/*.toml; do
    exp=$(head -n 1 "$f" | sed -n 's/^# expect: \([0-9]*:[0-9]*\) \(.*\)$/\1|\2/p')
    loc=${exp%%|*}
    msg=${exp#*|}
    "$bin" run --quiet "$f" >"$tmp/out" 2>"$tmp/err"
    rc=$?
    first=$(head -n 1 "$tmp/err")
    if [ "$rc" -eq 2 ] && case "$first" in "$f:$loc: "*"$msg"*) true ;; *) false ;; esac; then
        ok "malformed $f"
    else
        bad "malformed $f: exit $rc, stderr '$first', expected '$f:$loc: ...$msg...'"
    fi
done

# an impossible gate exits 1 and names the transform and the metric
cp cases/known-breaks/attn-out-not-rotated.toml "$tmp/impossible.toml"
cat >>"$tmp/impossible.toml" <<'TOML'

[[gates]]
transform = "fuse"
engine = "f32-openblas"
metric = "ulp_row.p99"
max = 0.001
TOML
expect_rc 1 "impossible gate" "$bin" run --quiet --no-color --out "$tmp/rep2" "$tmp/impossible.toml"
grep "FAIL" "$tmp/out" | grep "fuse" | grep -q "ulp_row.p99" &&
    ok "failed gate names transform and metric" || bad "failed gate names transform and metric"

# an expectation that does not hold exits 1
sed 's/^q = "random"$/q = "random"\nexpect = "broken"/' cases/known-breaks/rmsnorm-gamma-after-rotation.toml |
    sed 's/^expect = "broken"$//' >"$tmp/wrong-expect.toml"
sed -i 's/^seed = 9$/seed = 9\nexpect = "equivalent"/' "$tmp/wrong-expect.toml"
expect_rc 1 "broken transform expected equivalent" "$bin" run --quiet --no-color --out "$tmp/rep3" "$tmp/wrong-expect.toml"
grep -q "FAIL expectation rotate-gamma-kept" "$tmp/out" && ok "expectation failure named" ||
    bad "expectation failure named"

# the adaLN FLOP table at DiT-XL/2 size (closed form, nothing is run)
expect_rc 0 "flops at d = 1152" "$bin" flops cases/adaln.toml --d-model 1152 --heads 16 --layers 28 --d-out 32
grep -q "N\* per-sample-fold < online-dense" "$tmp/out" && ok "flops prints the crossover" ||
    bad "flops prints the crossover"
# the online ops at LLaMA-2-7B sizes, per token and layer, by hand: R3 is
# two FWHTs (q and k) of 32 heads of 128: 2 * 32 * (128 log2 128 + 2 * 128)
# = 73728; R4 one FWHT of 11008 = 172 * 64 (Williamson base 172):
# 172 * 64 * 6 + 64 * 172 * 171 + 2 * 11008 = 1970432
expect_rc 0 "flops on an rmsnorm case at LLaMA-2-7B sizes" "$bin" flops cases/quarot-llama.toml \
    --d-model 4096 --heads 32 --kv-heads 32 --d-mlp 11008
has "$tmp/out" "+73728.0 (after r1-r2)" "R3 costs 73728 FLOPs per token and layer"
has "$tmp/out" "+1970432.0 (after r1-r2-r3)" "R4 costs 1970432 FLOPs per token and layer"
expect_rc 2 "flops --d-cond on a preln case" "$bin" flops cases/layernorm.toml --d-cond 8
expect_rc 2 "flops with heads not dividing d" "$bin" flops cases/adaln.toml --d-model 100 --heads 16

# static-fold: exact on its calibration sample only
"$bin" run --quiet --no-color --out "$tmp/rep5" cases/known-breaks/adaln-static-fold.toml >"$tmp/out" 2>&1
grep -q "per sample: 0 broken .*, 1 equivalent .*, 2 broken" "$tmp/out" &&
    ok "static-fold equivalent on its calibration sample only" ||
    bad "static-fold equivalent on its calibration sample only"

# smooth-scale (SmoothQuant's scale migration), a kind added through its
# descriptor alone: exact, and its mistake skip-bias broken
expect_rc 0 "smooth-scale fixture" "$bin" run --quiet --no-color --no-baseline --out "$tmp/repsm" \
    tests/fixtures/smooth-scale.toml
grep -q "^smooth  *mpfr  *equivalent  *equivalent" "$tmp/out" &&
    ok "smooth-scale equivalent" || bad "smooth-scale equivalent"
grep -q "^smooth-skip-bias  *mpfr  *broken  *broken" "$tmp/out" &&
    ok "smooth-scale skip-bias broken" || bad "smooth-scale skip-bias broken"

# verdicts from the f64 engine agree with MPFR's: exact transforms near 1e-15,
# known mistakes broken
for c in cases/layernorm.toml cases/known-breaks/skip-mean-bake.toml; do
    sed 's/^mpfr_prec = 128$/mpfr_prec = 128\nverdict = "f64"/' "$c" >"$tmp/v64.toml"
    expect_rc 0 "f64 verdicts: $c" "$bin" run --quiet --no-color --no-baseline --out "$tmp/rep64" "$tmp/v64.toml"
    grep -q "^[a-z-]* *f64 " "$tmp/out" && ok "f64 exactness rows: $c" || bad "f64 exactness rows: $c"
done

# the same through OpenBLAS (verdict engine and transform): verdicts as
# above, and no output hash pinned for what dgemm computed
sed -e 's/^mpfr_prec = 128$/mpfr_prec = 128\nverdict = "f64-openblas"/' \
    -e 's/^precision = "f64"$/precision = "f64-openblas"/' cases/layernorm.toml >"$tmp/vblas.toml"
grep -q '^precision = "f64-openblas"$' "$tmp/vblas.toml" || bad "layernorm.toml has a precision = \"f64\" transform"
expect_rc 0 "f64-openblas verdicts" "$bin" run --quiet --no-color --no-baseline --out "$tmp/repblas" "$tmp/vblas.toml"
grep -q "^rotate-random-f64 *f64-openblas *equivalent *equivalent" "$tmp/out" &&
    ok "f64-openblas transform equivalent" || bad "f64-openblas transform equivalent"
grep -q '"mpfr_sha256"' "$tmp/repblas/report.json" && bad "dgemm outputs are not hashed" ||
    ok "dgemm outputs are not hashed"

# the regression gate: bless, then an unchanged run, a planted regression
# (a baseline edited to a better value) and a planted truth change
kb=cases/known-breaks/skip-mean-bake.toml
CI=true "$bin" bless --baseline "$tmp/base" "$kb" >"$tmp/out" 2>"$tmp/err"
[ $? -eq 2 ] && grep -q "CI=true" "$tmp/err" && ok "bless refused under CI=true" ||
    bad "bless refused under CI=true"
expect_rc 0 "bless --force" "$bin" bless --force --quiet --baseline "$tmp/base" "$kb"
[ -s "$tmp/base/skip-mean-bake.json" ] && ok "baseline written" || bad "baseline written"
expect_rc 0 "unchanged run against its baseline" "$bin" run --quiet --no-color \
    --baseline "$tmp/base" --out "$tmp/rep7" --junit "$tmp/junit.xml" "$kb"
cp "$tmp/base/skip-mean-bake.json" "$tmp/base/orig.json"
if cic_have "$py"; then
    "$py" - "$tmp/base/skip-mean-bake.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
for x in r["results"]:
    if x["transform"] == "fuse-no-mean-bake" and x["engine"] == "f32-openblas":
        x["metrics"]["rel_norm2"] = x["metrics"]["rel_norm2"] / 4
json.dump(r, open(sys.argv[1], "w"), indent=1)
PY
    expect_rc 1 "planted regression" "$bin" run --quiet --no-color --baseline "$tmp/base" \
        --out "$tmp/rep8" --junit "$tmp/junit2.xml" "$kb"
    grep "FAIL regression" "$tmp/out" | grep "skip-mean-bake / fuse-no-mean-bake / f32-openblas / rel_norm2: old .*, new " >/dev/null &&
        ok "regression names case, transform, engine, metric, old and new" ||
        bad "regression names case, transform, engine, metric, old and new"
    grep -q "<failure" "$tmp/junit2.xml" && ok "junit records the regression" || bad "junit records the regression"
else
    skip "planted regression, named and in the JUnit file" "no $py to edit the baseline"
fi
sed 's/"truth_sha256": "\(.\)/"truth_sha256": "0\1/' "$tmp/base/orig.json" >"$tmp/base/skip-mean-bake.json"
expect_rc 1 "planted truth change" "$bin" run --quiet --no-color --baseline "$tmp/base" --out "$tmp/rep9" "$kb"
grep -q "FAIL regression skip-mean-bake / - / - / truth_sha256" "$tmp/out" && ok "truth change named" ||
    bad "truth change named"
echo '{"results": 3}' >"$tmp/base/skip-mean-bake.json"
expect_rc 2 "malformed baseline" "$bin" run --quiet --baseline "$tmp/base" --out "$tmp/rep10" "$kb"

# a folder runs every case in it with one summary
expect_rc 0 "a folder of cases" "$bin" run --quiet --no-color --no-baseline --out "$tmp/rep11" \
    --markdown "$tmp/summary.md" cases/known-breaks
grep -q "^cicheck: [0-9]* cases, [0-9]* passed, 0 failed" "$tmp/out" && ok "one summary" || bad "one summary"
[ -s "$tmp/summary.md" ] && ok "markdown summary written" || bad "markdown summary written"

# sweeps: shards are disjoint, cover the sweep, and merge to the same report
cic_tiny_case tiny-sweep "1, 2, 3" >"$tmp/sweep.toml"
expect_rc 0 "sweep" "$bin" run --quiet --no-color --out "$tmp/sw-all" "$tmp/sweep.toml"
for k in 1 2 3; do
    expect_rc 0 "sweep shard $k/3" "$bin" run --quiet --no-color --no-plots --shard $k/3 \
        --out "$tmp/sw-$k" "$tmp/sweep.toml"
done
expect_rc 0 "merge 3 shards" "$bin" merge --out "$tmp/sw-merged" "$tmp/sw-1" "$tmp/sw-2" "$tmp/sw-3"
expect_rc 2 "merge of a folder that does not exist" "$bin" merge --out "$tmp/mx" "$tmp/sw-1" "$tmp/nope"
expect_err "merge: $tmp/nope: no such folder" "the missing folder is named"
mkdir -p "$tmp/not-a-shard"
expect_rc 2 "merge of a folder no shard run wrote" "$bin" merge --out "$tmp/mx" "$tmp/not-a-shard"
expect_err "not-a-shard holds neither case-shard.json nor sweep.json" "the folder and what it lacks are named"
if cic_have "$py"; then
    "$py" - "$tmp" <<'PY' && ok "shards disjoint, covering, merged = unsharded" || bad "shards disjoint, covering, merged = unsharded"
import json, sys
t = sys.argv[1]
def load(d): return json.load(open(f"{t}/{d}/sweep.json"))
idx = [sorted(p["index"] for p in load(f"sw-{k}")["points"]) for k in (1, 2, 3)]
flat = sorted(i for l in idx for i in l)
assert flat == list(range(6)), flat                      # cover, no duplicates
assert all(set(a).isdisjoint(b) for a in idx for b in idx if a is not b)
def strip(o):
    if isinstance(o, dict):
        return {k: strip(v) for k, v in o.items() if k not in ("wall_seconds",)}
    if isinstance(o, list):
        return [strip(v) for v in o]
    return o
a, b = strip(load("sw-all")), strip(load("sw-merged"))
assert a == b, "merged sweep.json differs from the unsharded one"
agg = [e for e in a["aggregate"] if e["transform"] == "fuse" and e["engine"] == "f32-openblas"]
assert len(agg) == 2 and all(e["n"] == 3 for e in agg), agg   # over 3 seeds
PY
else
    skip "shards disjoint, covering, merged = unsharded" "no $py to read the sweep.json files"
fi
expect_rc 2 "merge refuses a missing shard" "$bin" merge --out "$tmp/sw-bad" "$tmp/sw-1" "$tmp/sw-2"
grep -q "missing" "$tmp/err" && ok "missing shard named" || bad "missing shard named"
expect_rc 2 "merge refuses a duplicate shard" "$bin" merge --out "$tmp/sw-bad" "$tmp/sw-1" "$tmp/sw-1" "$tmp/sw-3"
expect_rc 2 "bad --shard" "$bin" run --quiet --shard 4/3 --out "$tmp/sw-x" "$tmp/sweep.toml"
# --dump
expect_rc 0 "run --dump" "$bin" run --quiet --out "$tmp/rep4" --dump "$tmp/dump" cases/known-breaks/attn-out-not-rotated.toml
for f in original fuse fuse.f64 rotate-skip-attn-out rotate-skip-attn-out.f64 outputs; do
    [ -s "$tmp/dump/$f.safetensors" ] && ok "dump $f.safetensors" || bad "dump $f.safetensors"
done
# a folder's run leaves out the large cases (*-full.toml); named, they run
mkdir -p "$tmp/withfull/sub"
cic_tiny_case a >"$tmp/withfull/a.toml"
cic_tiny_case whole-full >"$tmp/withfull/whole-full.toml"
cic_tiny_case b >"$tmp/withfull/sub/b.toml"
cic_tiny_case sub-full >"$tmp/withfull/sub/sub-full.toml"
expect_rc 0 "run of a folder with large cases" "$bin" run --quiet --no-color --no-baseline \
    --out "$tmp/wf" "$tmp/withfull"
[ -s "$tmp/wf/a/report.json" ] && [ -s "$tmp/wf/b/report.json" ] &&
    ok "the folder's other cases ran" || bad "the folder's other cases ran"
[ ! -e "$tmp/wf/whole-full" ] && [ ! -e "$tmp/wf/sub-full" ] &&
    ok "the folder's *-full.toml cases did not run" || bad "the folder's *-full.toml cases did not run"
expect_rc 0 "a large case named runs" "$bin" run --quiet --no-color --no-baseline \
    --out "$tmp/wf2" "$tmp/withfull/whole-full.toml" "$tmp/withfull"
[ -s "$tmp/wf2/whole-full/report.json" ] && [ -s "$tmp/wf2/a/report.json" ] &&
    [ ! -e "$tmp/wf2/sub-full" ] && ok "named, it runs beside the folder's" ||
    bad "named, it runs beside the folder's"
cic_test_done
