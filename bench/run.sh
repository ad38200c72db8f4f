#!/bin/sh
# SPDX-License-Identifier: MIT
# run.sh: the benchmark in one command (bench/bench.c says what it measures).
# Configures build-bench (-Dbench=true, --buildtype=release), builds
# cicheck-bench and cicheck there, runs cicheck-bench (parts 1-3 and 5),
# then times 'cicheck run' on cases/adaln.toml, cases/dit-xl2.toml and
# bench/cases/llama7b-layer.toml (one LLaMA-2-7B-shaped layer with R1 to R4;
# minutes) (part 4) with the normal build/cicheck when present, else
# build-bench/cicheck. CIC_BENCH_LARGE=0 leaves the 7B layer out.
# Usage: bench/run.sh [cicheck-bench options, e.g. --reps 5 or --quick]
set -eu
cd "$(dirname "$0")/.."
bdir=build-bench
if [ -f "$bdir/build.ninja" ]; then
    meson configure "$bdir" -Dbench=true --buildtype=release >/dev/null
else
    meson setup "$bdir" -Dbench=true --buildtype=release >/dev/null
fi
meson compile -C "$bdir" cicheck-bench cicheck:executable >/dev/null
bench="$bdir/bench/cicheck-bench"

"$bench" "$@"

echo
echo "(4) wall time and peak memory of 'cicheck run' (one run each, a child process:"
echo "    wall clock and wait4 ru_maxrss)"
if [ -x build/cicheck ]; then cic=build/cicheck; else cic="$bdir/cicheck"; fi
echo "  binary: $cic (built $(date -r "$cic" '+%Y-%m-%d %H:%M'))"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/cicheck-bench.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
large=bench/cases/llama7b-layer.toml
[ "${CIC_BENCH_LARGE:-1}" = 0 ] && large=
for c in cases/adaln.toml cases/dit-xl2.toml $large; do
    if [ -f "$c" ]; then
        n=$(basename "$c" .toml)
        nb= # the large case has no baseline in reference/
        [ "$c" = "$large" ] && nb=--no-baseline
        printf '  %s run --quiet --no-color %s--out <tmp> %s: ' "$cic" "${nb:+$nb }" "$c"
        # shellcheck disable=SC2086 # nb: one word or none
        "$bench" --time "$tmp/$n.log" "$cic" run --quiet --no-color $nb --out "$tmp/$n" "$c"
    else
        echo "  $c: not present"
    fi
done
echo "load average at end: $(cut -d' ' -f1-3 /proc/loadavg)"
