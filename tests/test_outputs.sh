#!/bin/sh
# SPDX-License-Identifier: MIT
# test_outputs.sh: output folders that cannot be turned against the user,
# end to end through the cicheck binary (issue 26). Each check names the
# defect it guards:
#   - a link planted at a file cicheck makes in its folders (report.json,
#     the dump's files, sweep.json, points/N/report.json, case-shard.json
#     and .bin, merge's and verify's report.json, bless's baseline, a plot's
#     file) is replaced by a real file, and its target outside the folder
#     is unchanged; a FIFO planted there is replaced, never written through.
# The verify checks need Debian's python3 with numpy (to write a checkpoint)
# and are reported as SKIP without it.
# Usage: test_outputs.sh PATH/TO/cicheck   (CIC_SOURCE_ROOT: the source tree)
set -u
bin=$1
root=${CIC_SOURCE_ROOT:-$(cd "$(dirname "$0")/.." && pwd)}
. "$(dirname "$0")/lib.sh"
cic_test_init outputs
# a run that writes through a FIFO waits for a reader: bounded
CIC_TEST_TIMEOUT=60

cd "$tmp" || exit 1
cat >tiny.toml <<'TOML'
name = "tiny"
[model]
block = "rmsnorm"
d_model = 8
heads = 2
tokens = 4
samples = 2
layers = 1
seed = 5
[engines]
f32 = ["fixed-order"]
[[transforms]]
name = "fold"
kind = "fold-rmsnorm-gamma"
TOML
cic_tiny_case sweep "1, 2" >sweep.toml
run="$bin run --quiet --no-color --no-baseline"
vrun="$bin verify hf hf --tokens 4 --samples 1"
mkdir elsewhere

# plant LINK NAME: LINK (its folder made) points to elsewhere/NAME, a file
# outside the output folder holding "victim"
plant() {
    mkdir -p "$(dirname "$1")"
    echo victim >"elsewhere/$2"
    ln -s "$tmp/elsewhere/$2" "$1"
}
# unharmed WHAT LINK NAME: elsewhere/NAME still holds "victim", and LINK is
# a regular file now
unharmed() {
    if [ "$(cat "elsewhere/$3")" != victim ]; then
        bad "$1: the link's target elsewhere/$3 was overwritten"
    elif [ -L "$2" ] || [ ! -f "$2" ]; then
        bad "$1: $2 is not a regular file"
    else
        ok "$1: the link was replaced, its target is unchanged"
    fi
}
# empty_dir WHAT DIR: nothing was written into DIR
empty_dir() {
    if [ -z "$(ls -A "$2")" ]; then ok "$1"; else bad "$1: $(ls -A "$2" | head -3)"; fi
}

# ---- links planted at the files cicheck makes ----
plant o1/report.json r1
expect_rc 0 "run --out with report.json a planted link" $run --out o1 tiny.toml
unharmed "report.json" o1/report.json r1

plant d1/original.safetensors d-orig
plant d1/outputs.safetensors d-out
plant d1/fold.safetensors d-fold
expect_rc 0 "run --dump with the dump's files planted links" $run --out o2 --dump d1 tiny.toml
unharmed "dump original.safetensors" d1/original.safetensors d-orig
unharmed "dump outputs.safetensors" d1/outputs.safetensors d-out
unharmed "dump fold.safetensors" d1/fold.safetensors d-fold

plant s1/sweep.json s-sweep
plant s1/points/0/report.json s-p0
expect_rc 0 "a sweep with sweep.json and points/0/report.json planted links" \
    $run --no-plots --out s1 sweep.toml
unharmed "sweep.json" s1/sweep.json s-sweep
unharmed "points/0/report.json" s1/points/0/report.json s-p0

plant c1/case-shard.json c-json
plant c1/case-shard.bin c-bin
expect_rc 0 "run --shard 1/2 of a case with its files planted links" $run --shard 1/2 \
    --out c1 tiny.toml
unharmed "case-shard.json" c1/case-shard.json c-json
unharmed "case-shard.bin" c1/case-shard.bin c-bin
expect_rc 0 "run --shard 2/2 of the case" $run --shard 2/2 --out c2 tiny.toml
plant m1/report.json m-case
expect_rc 0 "merge --out of the case with report.json a planted link" "$bin" merge \
    --no-color --no-baseline --out m1 c1 c2
unharmed "merge --out report.json (a case)" m1/report.json m-case
has m1/report.json '"cicheck_version"' "the merged report is in place"

for k in 1 2; do
    expect_rc 0 "sweep shard $k/2" $run --no-plots --shard $k/2 --out "sh$k" sweep.toml
done
plant m2/sweep.json m-sweep
expect_rc 0 "merge --out of the sweep with sweep.json a planted link" "$bin" merge \
    --no-plots --out m2 sh1 sh2
unharmed "merge --out sweep.json (a sweep)" m2/sweep.json m-sweep

plant bl/tiny.json b-tiny
expect_rc 0 "bless with the baseline file a planted link" "$bin" bless --force --quiet \
    --no-color --baseline bl --out o3 tiny.toml
unharmed "bless's <case name>.json" bl/tiny.json b-tiny

cp -r o1 p1
plant p1/plots/ulp_cdf.dat p-dat
if cic_have gnuplot; then want=0; else want=2; fi # without gnuplot: .dat and .gp only
expect_rc $want "plot with plots/ulp_cdf.dat a planted link" "$bin" plot p1
unharmed "plots/ulp_cdf.dat" p1/plots/ulp_cdf.dat p-dat

mkdir o4
mkfifo o4/report.json
expect_rc 0 "run --out with report.json a planted FIFO (no reader: no hang)" $run --out o4 \
    tiny.toml
[ -f o4/report.json ] && [ ! -p o4/report.json ] && ok "the FIFO was replaced by the report" ||
    bad "the FIFO is still there"

if cic_have "$py" && "$py" -c 'import numpy' 2>/dev/null; then
    cat >ck.toml <<'TOML'
name = "llama-mini"
[model]
block = "rmsnorm"
d_model = 16
heads = 2
rope = "half"
rope_theta = 10000.0
mlp_ratio = 2
tokens = 4
samples = 1
layers = 1
causal = true
seed = 21
[engines]
f32 = ["openblas"]
mpfr_prec = 64
TOML
    expect_rc 0 "a dump to write a checkpoint from" $run --out ck-r --dump ck-d ck.toml
    expect_rc 0 "make_checkpoint" "$py" "$root/tests/make_checkpoint.py" \
        ck-d/original.safetensors hf
    plant v1/report.json v-rep
    expect_rc 0 "verify --out with report.json a planted link" $vrun --out v1
    unharmed "verify --out report.json" v1/report.json v-rep
else
    skip "verify --out with report.json a planted link" "no $py with numpy"
fi

cic_test_done
