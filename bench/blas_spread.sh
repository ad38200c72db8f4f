#!/bin/sh
# SPDX-License-Identifier: MIT
# blas_spread.sh: how much the float32 figures of the shipped cases move with
# the OpenBLAS kernel (OPENBLAS_CORETYPE) and thread count
# (OPENBLAS_NUM_THREADS). The reference run uses the machine's default
# settings; every other setting is compared with it through the baseline
# machinery with zero tolerance, and the worst growth of each f32 metric
# (new / old, and new - old for ULP figures) is printed. This is the
# evidence behind the default --tolerance (docs/guide/ci-gate.md, "What is compared").
# Usage: bench/blas_spread.sh [BUILD_DIR] [CORETYPES...]
set -eu
cd "$(dirname "$0")/.."
build=${1:-build}
shift $(( $# > 0 ? 1 : 0 ))
cores=${*:-"Haswell SkylakeX Sandybridge Nehalem Prescott"}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/cicheck-spread.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
cases="cases/*.toml cases/known-breaks/*.toml"

echo "reference: OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-default} OPENBLAS_NUM_THREADS=${OPENBLAS_NUM_THREADS:-default}"
# shellcheck disable=SC2086
"$build/cicheck" bless --force --quiet --baseline "$tmp/base" $cases >/dev/null
for core in $cores; do
    for th in 1 2; do
        out="$tmp/run-$core-$th"
        # shellcheck disable=SC2086
        OPENBLAS_CORETYPE=$core OPENBLAS_NUM_THREADS=$th "$build/cicheck" run --quiet \
            --no-color --baseline "$tmp/base" --tolerance 0,0 --out "$out" $cases \
            >/dev/null 2>&1 || true
        actual=$(OPENBLAS_CORETYPE=$core OPENBLAS_NUM_THREADS=$th python3 -c \
            'import json,sys; e=json.load(open(sys.argv[1]))["environment"]; print(e["openblas_core"], e["openblas_threads"])' \
            "$out/adaln/report.json" 2>/dev/null || echo "? ?")
        python3 - "$out" "$core" "$th" "$actual" <<'PY'
import glob, json, sys
out, core, th, actual = sys.argv[1:5]
worst = {}
for f in glob.glob(out + "/*/report.json"):
    r = json.load(open(f))
    for c in r.get("baseline", {}).get("checks", []):
        if c["rule"] != "metric" or c["old"] in ("null", "") or c["engine"] != "f32-openblas":
            continue
        old, new = float(c["old"]), float(c["new"])
        m = c["metric"]
        ratio = new / old if old > 0 else (1.0 if new == 0 else float("inf"))
        w = worst.setdefault(m, [0.0, 0.0, 0.0])
        w[0] = max(w[0], ratio)
        w[1] = max(w[1], new - old)
        w[2] += 1
    for c in r.get("baseline", {}).get("checks", []):
        if c["rule"] in ("truth", "weights", "mpfr", "verdict", "flops") and not c["pass"]:
            print("  DETERMINISTIC RULE FAILED:", f, c)
print(f"{core:12s} threads {th} (ran as {actual}):", ", ".join(
    f"{m} x{w[0]:.3f} (+{w[1]:.3g})" for m, w in sorted(worst.items())))
PY
    done
done
