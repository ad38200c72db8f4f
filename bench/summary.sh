# SPDX-License-Identifier: MIT
# shellcheck shell=sh
# shellcheck disable=SC2154 # tmp and cic are run.sh's
# summary.sh: the end of bench/run.sh (sourced by it, not run on its own):
# the figures issue 28 asks for, in one place, read from the logs its parts
# left in $tmp ($cic: the cicheck it timed). A part that did not run says
# so and how to run it.

# run_figs NAME: "WALL PEAK_MIB PREC TRUTH_S" of part (4)'s run of case
# NAME ("-" for what its log lacks; PREC the last precision of the truth's
# proof, "no" when not proven)
run_figs() {
    f="$tmp/$1.log"
    [ -f "$f" ] || { echo "- - - -"; return; }
    t=$(stage_times "$f" | cut -d' ' -f1)
    awk -v t="$t" '
    /^wall / { w = $2; m = $6 }
    /^truth proven: / { n = split($0, a, /; /)
                        for (i = 1; i <= n; i++) if (a[i] ~ / bits$/) p = a[i]
                        sub(/ bits$/, "", p); k = split(p, b, /, /); p = b[k] }
    /^truth NOT proven/ { p = "no" }
    END { print (w == "" ? "-" : w), (m == "" ? "-" : m), (p == "" ? "-" : p), t }' "$f"
}

# goal VALUE LIMIT: "met" / "NOT met" / "" (no value)
goal() {
    awk -v v="$1" -v l="$2" 'BEGIN { if (v == "-" || v == "") print "no figure";
                                     else print (v + 0 <= l + 0 ? "met" : "NOT met") }'
}

# guard CASE: the memory guard's estimate of CASE (src/case/memory.c), in MiB
guard() {
    "$cic" run --no-color --no-baseline --max-memory 1K --out "$tmp/guard" "$1" 2>&1 |
        sed -n 's/.*needs about \([0-9.]*\) MiB.*/\1/p' | head -1
}

echo
echo "== summary (issue 28: whole models), load average $(cut -d' ' -f1-3 /proc/loadavg) =="
if [ -f "$tmp/depth.log" ]; then
    echo "bound growth on the dit-xl2 block, $(sed -n 's/^ *bits per block: //p' "$tmp/depth.log") bits per block"
else
    echo "bound growth on the dit-xl2 block: not run (CIC_BENCH_DEPTH=0)"
fi
# shellcheck disable=SC2046 # four words
set -- $(run_figs dit-d128-16)
if [ "$1" != - ]; then
    echo "16-block DiT at d 128 (bench/cases/dit-d128-16.toml): truth proven at $3 bits" \
        "(goal <= 192: $(goal "$3" 192)), the truth $4 s, the run $1 s"
else
    echo "16-block DiT at d 128: not run"
fi
if [ -f "$tmp/torch.log" ]; then
    t=$(stage_times "$tmp/tb.log" | cut -d' ' -f1)
    ft=$(sed -n 's/^torch: .*forward \([0-9.]*\) s.*/\1/p' "$tmp/torch.log")
    fn=$(sed -n 's/^numpy float64.*forward \([0-9.]*\) s.*/\1/p' "$tmp/torch.log")
    if [ -n "$ft" ] && [ "$t" != - ]; then
        r=$(awk -v a="$t" -v b="$ft" 'BEGIN { printf "%.1f", a / b }')
        echo "truth / torch float64 on the dit-xl2 block: $t s / $ft s = $r (goal <= 8: $(goal "$r" 8))"
        # the truth's exact dgemm products alone (its closing stage line)
        g=$(sed -n 's/.*truth: .* of which its exact dgemm products \([0-9.]*\) s (\([0-9.]*\) GFLOP.*/\1 \2/p' \
            "$tmp/tb.log")
        [ -z "$g" ] || echo "  its exact dgemm products alone: ${g%% *} s (${g#* } GFLOP) / $ft s =" \
            "$(awk -v a="${g%% *}" -v b="$ft" 'BEGIN { printf "%.1f", a / b }')"
    elif [ -n "$fn" ] && [ "$t" != - ]; then
        echo "truth / torch float64 on the dit-xl2 block: no torch ($(head -1 "$tmp/torch.log"));" \
            "against the NumPy float64 forward (dgemm floor): $t s / $fn s =" \
            "$(awk -v a="$t" -v b="$fn" 'BEGIN { printf "%.1f", a / b }')"
    else
        echo "truth / torch float64 on the dit-xl2 block: no figure (see part (8))"
    fi
else
    echo "truth / torch float64 on the dit-xl2 block: not run (CIC_BENCH_TORCH=0)"
fi
# shellcheck disable=SC2046 # four words
set -- $(run_figs dit-xl2-full)
if [ "$1" != - ]; then
    echo "cases/dit-xl2-full.toml: $1 s (goal <= 900: $(goal "$1" 900)), peak RSS $2 MiB" \
        "(goal <= 8192: $(goal "$2" 8192)), truth proven at $3 bits"
else
    echo "cases/dit-xl2-full.toml: not run (CIC_BENCH_FULL=1 runs it)"
fi
echo "  memory guard's estimate: $(guard cases/dit-xl2-full.toml) MiB"
# shellcheck disable=SC2046 # four words
set -- $(run_figs llama32-d1024)
if [ "$1" != - ]; then
    echo "32-layer LLaMA at d 1024 (bench/cases/llama32-d1024.toml): $1 s (goal <= 600:" \
        "$(goal "$1" 600)), peak RSS $2 MiB, truth proven at $3 bits"
else
    echo "32-layer LLaMA at d 1024: not run (CIC_BENCH_LARGE=0)"
fi
echo "  memory guard's estimate: $(guard bench/cases/llama32-d1024.toml) MiB"
if [ -f "$tmp/verify.log" ]; then
    echo "whole-checkpoint verify (bench/verify_big.sh), its last lines:"
    tail -n 4 "$tmp/verify.log" | sed 's/^/  /'
elif [ -x bench/verify_big.sh ]; then
    echo "whole-checkpoint verify: not run (CIC_BENCH_VERIFY=0)"
else
    echo "whole-checkpoint verify: not built (no bench/verify_big.sh)"
fi
if [ -f "$tmp/verify4096.log" ]; then
    echo "whole-checkpoint verify of a 7B's layers (d 4096 x 4): $(sed -n \
        's/^d4096x4: wall \([0-9.]*\) s, peak RSS \([0-9]*\) KiB/\1 s, peak RSS \2 KiB/p' \
        "$tmp/verify4096.log"), first broken layer $(sed -n \
        's/^first layer not equivalent: //p' "$tmp/verify4096.log") (planted: 2)"
fi
