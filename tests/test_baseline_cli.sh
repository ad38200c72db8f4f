#!/bin/sh
# SPDX-License-Identifier: MIT
# test_baseline_cli.sh: `cicheck run --baseline DIR` on hostile baselines,
# end to end through the binary, on a case that runs in a fraction of a
# second:
#   - compared figures that are strings, booleans or negative, a null count,
#     a flops figure that is a string, results that is not an array: exit 2,
#     and the message names the baseline file, the row and the field;
#   - every compared figure null, a row missing: compared, exit 1;
#   - a FIFO, a folder or a dangling link in place of the baseline: exit 2
#     at once (a FIFO must not block the run), naming the file;
#   - the untouched baseline: exit 0 (so the failures above are the edits).
# Usage: test_baseline_cli.sh PATH/TO/cicheck
set -u
bin=$1
. "$(dirname "$0")/lib.sh"
cic_need "$py" "Debian's python3 edits the JSON"
cic_need timeout "it turns a blocked read into a failure"
cic_test_init baseline_cli
CIC_TEST_TIMEOUT=20

cic_tiny_case bl >"$tmp/bl.toml"
# run DIR: the case against DIR/bl.json (a script, so timeout(1) can run it)
cat >"$tmp/run" <<EOF
#!/bin/sh
exec "$bin" run --quiet --no-color --out "$tmp/rep" --baseline "\$1" "$tmp/bl.toml"
EOF
chmod +x "$tmp/run"
run=$tmp/run

expect_rc 0 "bless the tiny case" "$bin" bless --force --baseline "$tmp/good" "$tmp/bl.toml"
[ -f "$tmp/good/bl.json" ] || { echo "FAIL - no baseline written"; exit 1; }
expect_rc 0 "the blessed baseline compares clean" "$run" "$tmp/good"

# mutate NAME PYTHON: a copy of the baseline under $tmp/NAME/bl.json, edited
# by PYTHON (b is the document; rows the float32 rows with drift)
mutate() {
    mkdir -p "$tmp/$1"
    "$py" - "$tmp/good/bl.json" "$tmp/$1/bl.json" "$2" <<'PY'
import json, sys
b = json.load(open(sys.argv[1]))
rows = [r for r in b["results"] if isinstance(r.get("metrics"), dict)
        and isinstance(r["metrics"].get("drift"), dict)]
def figures(r):
    m = r["metrics"]
    yield m, "max_abs"
    yield m, "rel_norm2"
    for g in ("ulp_row", "ulp_elem", "drift"):
        if isinstance(m.get(g), dict):
            for k in ("max", "p99", "mean"):
                yield m[g], k
exec(sys.argv[3])
json.dump(b, open(sys.argv[2], "w"))
PY
}

mutate strings '
for r in b["results"]:
    if isinstance(r.get("metrics"), dict):
        for o, k in figures(r): o[k] = "0"'
expect_rc 2 "compared figures as strings are refused" "$run" "$tmp/strings"
expect_err "$tmp/strings/bl.json: results[0] (none, f32-openblas): metrics.max_abs is a string" \
    "the message names the file, the row and the field"
mutate bools 'rows[0]["metrics"]["ulp_row"]["p99"] = True'
expect_rc 2 "a figure that is a boolean is refused" "$run" "$tmp/bools"
expect_err "metrics.ulp_row.p99 is a boolean" "the boolean figure is named"
mutate negative 'rows[0]["metrics"]["rel_norm2"] = -1'
expect_rc 2 "a negative figure is refused" "$run" "$tmp/negative"
mutate nullcount 'rows[0]["metrics"]["nonfinite"] = None'
expect_rc 2 "a null nonfinite count is refused" "$run" "$tmp/nullcount"
expect_err "metrics.nonfinite is null" "the count is named"
mutate flops 'rows[0]["flops"]["transformed"] = "8448"'
expect_rc 2 "flops.transformed as a string is refused" "$run" "$tmp/flops"
expect_err "flops.transformed is a string" "the flops field is named"
mutate results 'b["results"] = {"rows": b["results"]}'
expect_rc 2 "results that is not an array is refused" "$run" "$tmp/results"
expect_err "results is an object" "results is named"
mutate verdict 'rows[0]["verdict"] = 1'
expect_rc 2 "a verdict that is a number is refused" "$run" "$tmp/verdict"

mutate nulls '
for r in b["results"]:
    if isinstance(r.get("metrics"), dict):
        for o, k in figures(r): o[k] = None'
expect_rc 1 "null figures are compared and fail" "$run" "$tmp/nulls"
grep -q "old null (non-finite), new " "$tmp/out" && ok "null figures are reported" ||
    bad "null figures are reported"
grep -q "baseline $tmp/nulls/bl.json: .* checks, 0 failed" "$tmp/out" &&
    bad "null figures passed" || ok "null figures do not pass"
mutate norow 'del b["results"][2]'
expect_rc 1 "a missing row fails" "$run" "$tmp/norow"
mutate nodrift 'rows[0]["metrics"]["drift"] = None'
expect_rc 1 "a missing drift group fails" "$run" "$tmp/nodrift"

mkdir -p "$tmp/fifo" "$tmp/dir/bl.json" "$tmp/dangling"
mkfifo "$tmp/fifo/bl.json"
ln -s nowhere.json "$tmp/dangling/bl.json"
expect_rc 2 "a FIFO baseline is refused without blocking" "$run" "$tmp/fifo"
expect_err "$tmp/fifo/bl.json: baseline is a FIFO" "the FIFO is named"
expect_rc 2 "a folder baseline is refused" "$run" "$tmp/dir"
expect_err "$tmp/dir/bl.json: baseline is a folder" "the folder is named"
expect_rc 2 "a dangling link baseline is refused" "$run" "$tmp/dangling"
expect_err "dangling" "the dangling link is named"

cic_test_done
