#!/bin/bash
# SPDX-License-Identifier: MIT
# truth_torch.sh: the truth / torch float64 ratio of issue 28 in one
# command. Times the proven truth of cases/dit-xl2.toml's block (no
# transforms, 256 tokens, 2 samples; the span of its stage lines, as
# bench/run.sh part 8 reads it) at each precision given (default 128), and
# a float64 PyTorch forward of the same block from the same weights
# (bench/torch_dit.py on the 128-bit run's --dump; without torch, NumPy's,
# the dgemm floor), and prints each truth's time over torch's, and the
# time of the truth's exact dgemm products alone over torch's.
# Usage: bench/truth_torch.sh [PREC ...]    e.g. bench/truth_torch.sh 128 448
# Env: CIC=the cicheck binary (default build/cicheck), PY=the python with
# numpy and torch (default /usr/bin/python3).
set -eu
cd "$(dirname "$0")/.."
cic=${CIC:-build/cicheck}
py=${PY:-/usr/bin/python3}
[ -x "$cic" ] || { echo "truth_torch.sh: no $cic (build first)" >&2; exit 2; }
[ $# -gt 0 ] || set -- 128
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# the block of cases/dit-xl2.toml at precision $1, without its transforms
block_at() {
    awk -v p="$1" '
    /^\[\[transforms\]\]/ { exit }
    /^name = / { print "name = \"block\""; next }
    /^mpfr_prec = / { print "mpfr_prec = " p; next }
    { print }' cases/dit-xl2.toml
}

# seconds from the truth's stage line to the next stage line not its own
truth_secs() {
    awk '/^\[[^]]*s\] / {
        t = $0; sub(/^\[[^ ]+ +/, "", t); sub(/s\].*/, "", t)
        w = $0; sub(/^[^]]*\] /, "", w)
        if (w ~ /^truth:/ && t0 == "") t0 = t
        else if (t0 != "" && t1 == "" && w !~ /^(truth|certify|recheck):/) t1 = t
    }
    END { if (t0 == "" || t1 == "") print "-"; else printf "%.1f\n", t1 - t0 }' "$1"
}

echo "load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
dumped=""
for p in "$@"; do
    block_at "$p" >"$tmp/b$p.toml"
    dump=()
    [ -n "$dumped" ] || dump=(--dump "$tmp/dump")
    "$cic" run --no-color --no-baseline --out "$tmp/o$p" "${dump[@]}" "$tmp/b$p.toml" \
        >"$tmp/b$p.log" 2>&1 || true
    [ -n "$dumped" ] || dumped=$p
    echo "truth at $p bits: $(truth_secs "$tmp/b$p.log") s ($(grep -m1 '^truth ' "$tmp/b$p.log" || echo 'no summary line'))"
done
ft=""
if [ -x "$py" ] && [ -f "$tmp/dump/original.safetensors" ]; then
    "$py" bench/torch_dit.py "$tmp/dump" | tee "$tmp/torch.log"
    ft=$(sed -n 's/^torch: .*forward \([0-9.]*\) s.*/\1/p' "$tmp/torch.log")
    [ -n "$ft" ] || ft=$(sed -n 's/^numpy float64.*forward \([0-9.]*\) s.*/\1/p' "$tmp/torch.log")
else
    echo "no $py or no dump: no float64 forward"
fi
for p in "$@"; do
    t=$(truth_secs "$tmp/b$p.log")
    if [ -n "$ft" ] && [ "$t" != "-" ]; then
        echo "truth / float64 forward at $p bits: $t s / $ft s = $(awk -v a="$t" -v b="$ft" 'BEGIN { printf "%.1f", a / b }')"
    else
        echo "truth / float64 forward at $p bits: no figure"
    fi
    # the truth's exact dgemm products alone (its closing stage line): the
    # part no faster rounding or tighter bound can take away
    g=$(sed -n 's/.*truth: .* of which its exact dgemm products \([0-9.]*\) s (\([0-9.]*\) GFLOP.*/\1 \2/p' \
        "$tmp/b$p.log")
    if [ -n "$g" ] && [ -n "$ft" ]; then
        echo "  of which its exact dgemm products: ${g%% *} s (${g#* } GFLOP) / $ft s =" \
            "$(awk -v a="${g%% *}" -v b="$ft" 'BEGIN { printf "%.1f", a / b }')"
    fi
done
echo "load average at end: $(cut -d' ' -f1-3 /proc/loadavg)"
