#!/bin/sh
# SPDX-License-Identifier: MIT
# test_depth.sh: error against depth. A three-block pre-LN case (residual
# readout, f32 and bf16 engines) and a three-block DiT with its final layer
# (head readout, rotated adaLN strategies): every row with metrics has one
# per_block entry per block (and one for the head), the last is the row's
# own figures bit for bit, the mapped-back rotated models score like the
# original (f32 error, no map error), the broken fusion scores as broken at
# every block; the terminal prints the depth lines; `cicheck plot` draws
# error_vs_block (skipped without gnuplot).
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
