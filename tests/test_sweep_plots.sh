#!/bin/sh
# SPDX-License-Identifier: MIT
# test_sweep_plots.sh: a sweep draws its plots when it ends (gnuplot: each
# plot's .dat, .gp, PNG, SVG and PDF, the PNG a real PNG), and `cicheck
# plot` of a single run with low-precision engines draws their three
# figures from the report.json cicheck wrote. Needs gnuplot (skipped, exit
# 77, without it).
# Usage: test_sweep_plots.sh PATH/TO/cicheck
set -u
bin=$1
. "$(dirname "$0")/lib.sh"
cic_need gnuplot "Debian's gnuplot-nox draws the plots"
cic_test_init sweep_plots

cic_tiny_case tiny-sweep "1, 2" >"$tmp/sweep.toml"
expect_rc 0 "sweep" "$bin" run --quiet --no-color --out "$tmp/sw" "$tmp/sweep.toml"
for f in ulp_cdf error_vs_d drift_hist; do
    for e in dat gp png svg pdf; do
        [ -s "$tmp/sw/plots/$f.$e" ] && ok "plot $f.$e" || bad "plot $f.$e missing"
    done
done
head -c 8 "$tmp/sw/plots/error_vs_d.png" | od -An -tx1 | grep -q "89 50 4e 47 0d 0a 1a 0a" &&
    ok "error_vs_d.png is a PNG" || bad "error_vs_d.png is a PNG"
expect_rc 2 "plot on a folder without a report" "$bin" plot "$tmp/nothing-here"

# a single run with [[engines.lowp]] (widths nvfp4's blocks of 16 divide)
cat >"$tmp/lowp.toml" <<'EOF'
name = "tiny-lowp"
[model]
block = "rmsnorm"
d_model = 32
heads = 2
mlp_ratio = 2
tokens = 8
samples = 1
layers = 1
[engines]
f32 = ["openblas"]
[[engines.lowp]]
name = "w8a8"
weights = "int8:channel"
activations = "int8:token"
[[engines.lowp]]
name = "nvfp4"
weights = "nvfp4"
activations = "nvfp4"
[[transforms]]
name = "fold"
kind = "fold-rmsnorm-gamma"
[[transforms]]
name = "rotate"
kind = "rotate"
after = "fold"
q = "hadamard"
EOF
expect_rc 0 "run with low-precision engines" "$bin" run --quiet --no-color --no-baseline \
    --out "$tmp/lp" "$tmp/lowp.toml"
expect_rc 0 "plot of that run" "$bin" plot "$tmp/lp"
for f in lowp_sqnr lowp_kurtosis lowp_chanmax; do
    for e in dat gp png svg pdf; do
        [ -s "$tmp/lp/plots/$f.$e" ] && ok "plot $f.$e" || bad "plot $f.$e missing"
    done
done
grep -q '^# engine 1: nvfp4 (weights nvfp4' "$tmp/lp/plots/lowp_sqnr.dat" &&
    ok "lowp_sqnr.dat lists the engines" || bad "lowp_sqnr.dat lists the engines"
grep -q '^# transform: rotate$' "$tmp/lp/plots/lowp_chanmax.dat" &&
    ok "lowp_chanmax.dat has the rotated model" || bad "lowp_chanmax.dat has the rotated model"

cic_test_done
