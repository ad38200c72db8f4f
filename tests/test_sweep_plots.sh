#!/bin/sh
# SPDX-License-Identifier: MIT
# test_sweep_plots.sh: a sweep draws its plots when it ends (gnuplot: each
# plot's .dat, .gp, PNG, SVG and PDF, the PNG a real PNG). Needs gnuplot
# (skipped, exit 77, without it).
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

cic_test_done
