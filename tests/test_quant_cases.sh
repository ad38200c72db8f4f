#!/bin/sh
# SPDX-License-Identifier: MIT
# test_quant_cases.sh CICHECK: what the shipped quantization cases
# (cases/quant-rmsnorm.toml, cases/quant-dit.toml) must show: under every
# Hadamard rotation of the case that rotates the linears' inputs (all but
# online-unrotate, which unrotates before each reader and leaves the
# linears' inputs as they were) the W4A4 engine's block output error is
# below its error without a transform (SQNR higher), and the kurtosis of the
# quantized linears' inputs (median and max over the linears) is closer to
# 3 than without. Reads the cases' report.json from CIC_QUANT_REPORTS (a
# folder holding <case>/report.json, as the regression gate of .ci/run
# writes them; .ci/run runs this test after the gate), or with
# CIC_QUANT_RUN=1 runs both cases itself (about a minute on 2 cores);
# without either it is skipped (exit 77), so the default test run stays
# short. Needs /usr/bin/python3.
. "$(dirname "$0")/lib.sh"
cic_test_init quant_cases
cicheck=${1:?cicheck binary}
root=${CIC_SOURCE_ROOT:-$(dirname "$0")/..}
cic_need "$py"
dir=${CIC_QUANT_REPORTS:-}
if [ -z "$dir" ] && [ "${CIC_QUANT_RUN:-0}" != 1 ]; then
    echo "SKIP - the shipped quantization cases: set CIC_QUANT_REPORTS to the regression" \
        "gate's reports (.ci/run does) or CIC_QUANT_RUN=1 to run them here"
    exit 77
fi
if [ -z "$dir" ]; then
    dir=$tmp/reports
    for c in quant-rmsnorm quant-dit; do
        expect_rc 0 "run cases/$c.toml" "$cicheck" run --quiet --no-color --out "$dir/$c" \
            "$root/cases/$c.toml"
    done
fi
for c in quant-rmsnorm quant-dit; do
    if "$py" - "$dir/$c/report.json" <<'PY'
import json, statistics, sys
r = json.load(open(sys.argv[1]))
rows = {(x["transform"], x["engine"]): x for x in r["results"]}
xfs = [t["name"] for t in r["case"]["transforms"]
       if t.get("q") == "hadamard" and t["kind"] != "online-unrotate"]
assert xfs, "no Hadamard transform in the case"
def kurt(xf):
    k = [o["kurtosis"] for o in r["lowp"]["outliers"]
         if o["transform"] == xf and o["of"] == "input" and o["kurtosis"] is not None]
    return statistics.median(k), max(k)
bad = []
n0 = rows[("none", "w4a4")]["sqnr_db"]
k0 = kurt("none")
for xf in xfs:
    s = rows[(xf, "w4a4")]["sqnr_db"]
    if not s > n0:
        bad.append(f"{xf}: w4a4 SQNR {s:.2f} dB is not above {n0:.2f} dB without a transform")
    k = kurt(xf)
    for what, a, b in (("median", k[0], k0[0]), ("max", k[1], k0[1])):
        if not abs(a - 3) < abs(b - 3):
            bad.append(f"{xf}: {what} input kurtosis {a:.3g} is not closer to 3 than {b:.3g}")
    print(f"{xf}: w4a4 {n0:.2f} -> {s:.2f} dB; kurtosis median {k0[0]:.3g} -> {k[0]:.3g}, "
          f"max {k0[1]:.3g} -> {k[1]:.3g}")
for b in bad:
    print("FAIL", b)
sys.exit(1 if bad else 0)
PY
    then ok "$c: W4A4 error and kurtosis improve under every Hadamard rotation"
    else bad "$c: W4A4 error and kurtosis under the Hadamard rotations"
    fi
done
cic_test_done
