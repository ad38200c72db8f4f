#!/bin/sh
# SPDX-License-Identifier: MIT
# shellcheck disable=SC2154 # part (6) sets today_* and new_* through eval
# run.sh: the benchmark in one command (bench/bench.c says what it measures).
# Configures build-bench (-Dbench=true, --buildtype=release), builds
# cicheck-bench and cicheck there, runs cicheck-bench (parts 1-3 and 5),
# then times 'cicheck run' (wall, peak RSS, the truth's stage and the
# precisions it was proven at) on cases/adaln.toml, cases/dit-xl2.toml and
# bench/cases/dit-d128-16.toml (16 DiT blocks at d 128), and on the large
# bench cases, bench/cases/llama7b-layer.toml (one LLaMA-2-7B-shaped layer
# with R1 to R4) and bench/cases/llama32-d1024.toml (32 LLaMA-shaped layers
# at d 1024), and with CIC_BENCH_FULL=1 on cases/dit-xl2-full.toml (the 28
# DiT-XL/2 blocks) (part 4) with the normal build/cicheck when present, else
# build-bench/cicheck, then runs cases/dit-xl2.toml with today's code
# (bench/today.sh builds it) and with that cicheck, interleaved, for the
# truth's and the whole run's cost against today's (part 6).
# CIC_BENCH_LARGE=0 leaves the large bench cases out; CIC_BENCH_TIMEOUT=D
# (timeout(1)'s duration, e.g. 20m) stops each run of part (4) after D;
# CIC_BENCH_TODAY=0 leaves part (6) out, CIC_BENCH_TODAY_REPS=N sets its
# pairs of runs (default 2).
# Part (7) (cicheck-bench --part 7) gives the growth of the truth's bound
# in bits per block, elementwise and norm-wise, on cases/dit-xl2.toml's
# block at 1 to 3 layers and the spectral norm bounds of its weights by
# both methods, then proves one block at the precision 28 blocks would need
# (minutes); CIC_BENCH_DEPTH=0 leaves it out.
# Part (8) times the truth of cases/dit-xl2.toml's block against a float64
# PyTorch forward of the same block from the same weights
# (bench/torch_dit.py), or, without torch, against the NumPy float64
# forward (the dgemm floor); CIC_BENCH_TORCH=0 leaves it out. The same
# ratio alone, at any precisions: bench/truth_torch.sh 128 448.
# Part (9) runs bench/verify_big.sh (whole-checkpoint verify) on the pair of
# 32-layer d 2048 checkpoints when it is there; CIC_BENCH_VERIFY=0 leaves it
# out. Part (10) runs it on the pair of 4-layer d 4096 checkpoints (a
# LLaMA-2-7B's layers: the per-layer cost of a real 7B);
# CIC_BENCH_VERIFY4096=0 leaves it out. Both write their checkpoints under
# the temporary folder (about 6.4 and 3.3 GB, deleted after each). Then a
# summary of the figures issue 28 asks for, in one place.
# Usage: bench/run.sh [cicheck-bench options, e.g. --reps 5 or --quick]
set -eu
cd "$(dirname "$0")/.."
bdir=build-bench
if [ -f "$bdir/build.ninja" ]; then
    # reconfigured every time: part (7) finds at configure time whether the
    # ball run gives a norm-wise bound (bench/meson.build)
    meson setup --reconfigure "$bdir" -Dbench=true --buildtype=release >/dev/null
else
    meson setup "$bdir" -Dbench=true --buildtype=release >/dev/null
fi
meson compile -C "$bdir" cicheck-bench cicheck:executable >/dev/null
bench="$bdir/bench/cicheck-bench"

# stage_times LOG: "TRUTH WALL FIRST VALUES" from a 'cicheck run' log: the
# truth is the span from its stage line ("truth: ...") to the first stage
# line after it that is not the truth's (truth:, certify:, recheck:); the
# wall time is cicheck-bench --time's; FIRST of VALUES proven at the first
# precision from the summary line ("-" for today's code, which proved none).
stage_times() {
    awk '
    /^\[[^]]*s\] / {
        t = $0; sub(/^\[[^ ]+ +/, "", t); sub(/s\].*/, "", t)
        w = $0; sub(/^[^]]*\] /, "", w)
        if (w ~ /^truth:/ && t0 == "") t0 = t
        else if (t0 != "" && t1 == "" && w !~ /^(truth|certify|recheck):/) t1 = t
    }
    /^truth proven: / { v = $3; f = $3 - $5 }
    /^wall / { wall = $2 }
    END {
        if (t0 == "" || t1 == "" || wall == "") { print "- - - -"; exit }
        printf "%.1f %s %s %s\n", t1 - t0, wall, (f == "" ? "-" : f), (v == "" ? "-" : v)
    }' "$1"
}

quick=
for a in "$@"; do [ "$a" = --quick ] && quick=--quick; done

"$bench" "$@"

echo
echo "(4) wall time and peak memory of 'cicheck run' (one run each, a child process:"
echo "    wall clock and wait4 ru_maxrss)"
if [ -x build/cicheck ]; then cic=build/cicheck; else cic="$bdir/cicheck"; fi
echo "  binary: $cic (built $(date -r "$cic" '+%Y-%m-%d %H:%M'))"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/cicheck-bench.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
py=/usr/bin/python3
large="bench/cases/llama7b-layer.toml bench/cases/llama32-d1024.toml"
[ "${CIC_BENCH_LARGE:-1}" = 0 ] && large=
full=
[ "${CIC_BENCH_FULL:-0}" = 1 ] && full=cases/dit-xl2-full.toml
[ -n "$full" ] || echo "  (cases/dit-xl2-full.toml: CIC_BENCH_FULL=1 times it)"
lim=
[ -n "${CIC_BENCH_TIMEOUT:-}" ] && lim="timeout ${CIC_BENCH_TIMEOUT}"
for c in cases/adaln.toml cases/dit-xl2.toml bench/cases/dit-d128-16.toml $large $full; do
    n=$(basename "$c" .toml)
    if [ -f "$c" ]; then
        nb= # only the shipped cases of cases/ have baselines in reference/
        case $c in cases/*-full.toml | bench/*) nb=--no-baseline ;; esac
        printf '  %s%s run --no-color %s--out <tmp> %s: ' "${lim:+$lim }" "$cic" "${nb:+$nb }" "$c"
        # shellcheck disable=SC2086 # lim: none or two words, nb: one or none
        "$bench" --time "$tmp/$n.log" $lim "$cic" run --no-color $nb --out "$tmp/$n" "$c" |
            tee -a "$tmp/$n.log"
        sed -n 's/^truth //p' "$tmp/$n.log" | sed 's/^/    truth /'
        # shellcheck disable=SC2046 # four words
        set -- $(stage_times "$tmp/$n.log")
        [ "$1" = - ] || echo "    the truth's stage lines: $1 s"
        grep -q '^truth ' "$tmp/$n.log" ||
            echo "    no summary line; the last stage line: $(grep '^\[' "$tmp/$n.log" | tail -1)"
    else
        echo "  $c: not present"
    fi
done
echo "load average at end of (4): $(cut -d' ' -f1-3 /proc/loadavg)"

# (6) cases/dit-xl2.toml with today's code and with this cicheck
if [ "${CIC_BENCH_TODAY:-1}" != 0 ]; then
    echo
    echo "(6) cases/dit-xl2.toml against today's code (bench/today.sh: the main on which the"
    echo "    proven-truth issue was filed; its truth was a plain run at mpfr_prec plus sample 0"
    echo "    at mpfr_prec + 64), the two binaries run interleaved, best of each"
    reps=${CIC_BENCH_TODAY_REPS:-2}
    if today=$(bench/today.sh); then
        echo "  today: $today ($(cut -c1-12 build-today/commit)), new: $cic"
        r=1
        while [ "$r" -le "$reps" ]; do
            for side in today new; do
                if [ "$side" = today ]; then b=$today; else b=$cic; fi
                printf '  %s run %d: ' "$side" "$r"
                "$bench" --time "$tmp/$side$r.log" "$b" run --no-color --no-baseline \
                    --out "$tmp/$side$r" cases/dit-xl2.toml | tee -a "$tmp/$side$r.log"
            done
            r=$((r + 1))
        done
        for side in today new; do
            best_t=; best_w=; first=-; vals=-
            r=1
            while [ "$r" -le "$reps" ]; do
                # shellcheck disable=SC2046 # four words
                set -- $(stage_times "$tmp/$side$r.log")
                if [ "$1" != - ]; then
                    best_t=$(echo "$1 ${best_t:-$1}" | awk '{print ($1 < $2 ? $1 : $2)}')
                    best_w=$(echo "$2 ${best_w:-$2}" | awk '{print ($1 < $2 ? $1 : $2)}')
                    # shellcheck disable=SC2034 # read through the eval below
                    first=$3
                    # shellcheck disable=SC2034 # read through the eval below
                    vals=$4
                fi
                r=$((r + 1))
            done
            eval "${side}_t=\${best_t:--} ${side}_w=\${best_w:--} ${side}_first=\$first ${side}_vals=\$vals"
        done
        echo "  truth (stage lines): today $today_t s, new $new_t s; whole run: today $today_w s, new $new_w s"
        echo "  new truth proven at the first precision: $new_first of $new_vals values"
        if [ "$today_t" != - ] && [ "$new_t" != - ]; then
            awk -v a="$new_t" -v b="$today_t" -v c="$new_w" -v d="$today_w" 'BEGIN {
                printf "  cost of the truth, new / today: %.2f   (target <= 0.33: %s)\n", a / b, a / b <= 1 / 3 ? "met" : "NOT met"
                printf "  whole run of cases/dit-xl2.toml, new / today: %.2f   (target <= 0.33: %s)\n", c / d, c / d <= 1 / 3 ? "met" : "NOT met" }'
        else
            echo "  a run did not print its stage lines (see the logs above): no ratio"
        fi
    else
        echo "  skipped: today's code could not be built (the reason is above)"
    fi
    echo "load average at end: $(cut -d' ' -f1-3 /proc/loadavg)"
fi

# block_case TOKENS SAMPLES LAYERS PREC: cases/dit-xl2.toml's block without
# its transforms, at TOKENS tokens, SAMPLES samples, LAYERS layers and
# mpfr_prec PREC
block_case() {
    awk -v t="$1" -v s="$2" -v l="$3" -v p="$4" '
    /^\[\[transforms\]\]/ { exit }
    /^name = / { print "name = \"block\""; next }
    /^tokens = / { print "tokens = " t; next }
    /^samples = / { print "samples = " s; next }
    /^layers = / { print "layers = " l; next }
    /^mpfr_prec = / { print "mpfr_prec = " p; next }
    { print }' cases/dit-xl2.toml
}

# (7) the truth's bound against depth, and what 28 blocks would cost
if [ "${CIC_BENCH_DEPTH:-1}" != 0 ]; then
    # shellcheck disable=SC2086 # quick: one word or none
    "$bench" --part 7 $quick | sed '/^cicheck-bench\|^machine: \|^OpenBLAS\|^MPFR \|^timing: \|^of each ratio/d' |
        tee "$tmp/depth.log"
    # 28 blocks from r1 (the largest relative bound at 1 layer, 128 bits)
    # growing g bits a block: proven when the bound is 2^-56 (the
    # escalation's aim: 32 bits below a binary32's 2^-24); the smaller of
    # the elementwise and norm-wise needs, rounded up to 64 bits
    p=$(awk '
    /bits per block: / { split($0, a, /elementwise |, norm-wise /); ge = a[2]; gn = a[3] }
    /at 1 layer: / { split($0, a, /elementwise |, norm-wise /); re = a[2]; rn = a[3] }
    function need(g, r) { return 128 + log(r) / log(2) + 27 * g + 56 }
    END {
        p = -1
        if (ge != "n/a" && re > 0) p = need(ge, re)
        if (gn != "n/a" && rn > 0 && (p < 0 || need(gn, rn) < p)) p = need(gn, rn)
        if (p < 0) print "-"; else { p = int((p + 63) / 64) * 64; print (p < 64 ? 64 : p) }
    }' "$tmp/depth.log")
    if [ "$p" != - ]; then
        echo "  28 blocks need about $p bits (the smaller of the two bounds' projections)"
        block_case 256 1 1 "$p" >"$tmp/deep.toml"
        printf '  one block, 256 tokens, 1 sample, proven at %s bits: ' "$p"
        "$bench" --time "$tmp/deep.log" "$cic" run --no-color --no-baseline --out "$tmp/deep" \
            "$tmp/deep.toml" | tee -a "$tmp/deep.log"
        t=$(stage_times "$tmp/deep.log" | cut -d' ' -f1)
        if [ "$t" != - ]; then
            echo "  its truth $t s; 28 blocks of 2 samples: about $(awk -v t="$t" 'BEGIN {
                printf "%.0f", t * 56 / 60 }') minutes for the truth alone (the issue asks 15 for the whole case)"
        else
            echo "  the run printed no truth stage (see above): no projection"
        fi
    else
        echo "  no growth figure (see above): no projection"
    fi
    echo "load average at end: $(cut -d' ' -f1-3 /proc/loadavg)"
fi

# (8) the truth of the dit-xl2 block against a float64 forward of it
if [ "${CIC_BENCH_TORCH:-1}" != 0 ]; then
    echo
    echo "(8) the truth of cases/dit-xl2.toml's block (no transforms, 256 tokens, 2 samples,"
    echo "    its stage lines) against a float64 forward of the same block from the same"
    echo "    weights (bench/torch_dit.py on the run's --dump: PyTorch, else NumPy's, the"
    echo "    dgemm floor), on the same machine"
    block_case 256 2 1 128 >"$tmp/tb.toml"
    printf '  %s run --no-color --no-baseline --dump <tmp> (the block): ' "$cic"
    "$bench" --time "$tmp/tb.log" "$cic" run --no-color --no-baseline --out "$tmp/tb" \
        --dump "$tmp/tbd" "$tmp/tb.toml" | tee -a "$tmp/tb.log"
    t=$(stage_times "$tmp/tb.log" | cut -d' ' -f1)
    echo "  the truth's stage lines: $t s"
    if [ -x "$py" ] && [ -f "$tmp/tbd/original.safetensors" ]; then
        "$py" bench/torch_dit.py "$tmp/tbd" | tee "$tmp/torch.log" | sed 's/^/  /'
    else
        echo "  no $py or no dump: no float64 forward" | tee "$tmp/torch.log"
    fi
    rm -rf "$tmp/tbd"
    echo "load average at end: $(cut -d' ' -f1-3 /proc/loadavg)"
fi

# (9) whole-checkpoint verify (bench/verify_big.sh, when it is there)
if [ "${CIC_BENCH_VERIFY:-1}" != 0 ]; then
    echo
    echo "(9) whole-checkpoint verify (bench/verify_big.sh)"
    if [ -x bench/verify_big.sh ]; then
        bench/verify_big.sh "$tmp/big" "$cic" d2048x32 2>&1 | tee "$tmp/verify.log" |
            sed 's/^/  /' || true
    else
        echo "  not built (no bench/verify_big.sh)"
    fi
fi

# (10) whole-checkpoint verify of a 7B's layers (d 4096, 4 layers)
if [ "${CIC_BENCH_VERIFY4096:-1}" != 0 ]; then
    echo
    echo "(10) whole-checkpoint verify of a LLaMA-2-7B's layers: d 4096, 4 layers, MLP 11008,"
    echo "    32 heads, bf16, o_proj unrotated at layer 2 (bench/verify_big.sh d4096x4)"
    if [ -x bench/verify_big.sh ]; then
        bench/verify_big.sh "$tmp/big" "$cic" d4096x4 2>&1 | tee "$tmp/verify4096.log" |
            sed 's/^/  /' || true
    else
        echo "  not built (no bench/verify_big.sh)"
    fi
fi

# shellcheck source=bench/summary.sh
. bench/summary.sh
