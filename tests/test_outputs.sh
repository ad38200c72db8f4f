#!/bin/sh
# SPDX-License-Identifier: MIT
# test_outputs.sh: output folders that cannot be turned against the user,
# end to end through the cicheck binary (issue 26). Each check names the
# defect it guards:
#   - a link planted at a file cicheck makes in its folders (report.json,
#     the dump's files, sweep.json, points/N/report.json, case-shard.json
#     and .bin, merge's and verify's report.json, bless's baseline, a plot's
#     file) is replaced by a real file, and its target outside the folder
#     is unchanged; a FIFO planted there is replaced, never written through;
#   - a link planted where cicheck makes a folder (a sweep's points and
#     plots, a case's folder in a run of several, the dump's) is refused
#     with its path before anything runs (exit 2); the folder the user
#     names may itself be a link;
#   - case files that would write the same files (one file stem under --out
#     or --dump, one case name without --out or when blessed, one file given
#     twice) are refused before anything runs, naming both (exit 2);
#   - output paths are checked before any work in run, bless, merge, plot
#     and verify (exit 2, the option named);
#   - a write that fails (past a file size limit: EFBIG; a folder where a
#     plot's file goes) is exit 3 naming the path, in plot, run --out,
#     --dump, merge --out and a sweep's plots.
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
cic_tiny_rmsnorm tiny >tiny.toml
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

# ---- links planted where cicheck makes a folder ----
mkdir target
ln -s "$tmp/target" s2-points
mkdir s2 && mv s2-points s2/points
expect_rc 2 "a sweep with points/ a planted link" $run --no-plots --out s2 sweep.toml
expect_err "s2/points: is a symbolic link" "the link is named"
empty_dir "nothing written through points/" target
[ -e s2/sweep.json ] && bad "the sweep ran" || ok "refused before running"
mkdir s3 && ln -s "$tmp/target" s3/plots
expect_rc 2 "a sweep with plots/ a planted link" $run --out s3 sweep.toml
expect_err "s3/plots: is a symbolic link" "the link is named"
cp o1/report.json p2.json && mkdir p2 && mv p2.json p2/report.json && ln -s "$tmp/target" p2/plots
expect_rc 2 "plot with plots/ a planted link" "$bin" plot p2
expect_err "p2/plots: is a symbolic link" "the link is named"
empty_dir "nothing drawn through plots/" target
sed 's/^name = "tiny"$/name = "other"/' tiny.toml >other.toml
mkdir mc && ln -s "$tmp/target" mc/tiny
expect_rc 2 "two cases, --out DIR with DIR/tiny a planted link" $run --out mc tiny.toml other.toml
expect_err "mc/tiny: is a symbolic link" "the link is named"
[ -e mc/other ] && bad "a case ran" || ok "refused before running"
mkdir md && ln -s "$tmp/target" md/tiny
expect_rc 2 "two cases, --dump DIR with DIR/tiny a planted link" $run --out md-o --dump md \
    tiny.toml other.toml
expect_err "md/tiny: is a symbolic link" "the link is named"
empty_dir "nothing written through the case folders" target
mkdir real-out && ln -s real-out user-link
expect_rc 0 "--out may itself be a link (the user named it)" $run --out user-link tiny.toml
[ -f real-out/report.json ] && ok "the report went through the user's link" ||
    bad "no report in the link's target"

# ---- case files that would write the same files ----
mkdir x y
cp tiny.toml x/tiny.toml
cp other.toml y/tiny.toml
expect_rc 2 "two files with one stem under --out" $run --out dup1 x/tiny.toml y/tiny.toml
expect_err "x/tiny.toml and y/tiny.toml would both write dup1/tiny" "both files are named"
[ -e dup1 ] && bad "a case ran" || ok "refused before running"
expect_rc 2 "two files with one stem under --dump" $run --out dup2 --dump dup2d \
    x/tiny.toml y/tiny.toml
mkdir cwd && cd cwd || exit 1
cp ../tiny.toml a.toml && cp ../tiny.toml b.toml
expect_rc 2 "two files of one case name without --out" $run a.toml b.toml
expect_err "a.toml and b.toml are both case 'tiny': both would write reports/tiny" \
    "both files and the folder are named"
[ -e reports ] && bad "a case ran" || ok "refused before running"
cd "$tmp" || exit 1
expect_rc 2 "one file given twice" $run --out dup3 tiny.toml tiny.toml
expect_err "tiny.toml is given twice" "the file is named"
expect_rc 2 "one file given twice, spelled two ways" $run --out dup4 tiny.toml ./tiny.toml
cp tiny.toml a2.toml
expect_rc 2 "two files of one case name blessed (with --out)" "$bin" bless --force \
    --quiet --baseline dup6 --out dup6o tiny.toml a2.toml
expect_err "both would be blessed as dup6/tiny.json" "the baseline file is named"
[ -e dup6 ] && bad "a case was blessed" || ok "refused before running"
expect_rc 0 "two files, two stems, two names" $run --out two tiny.toml other.toml
has out "2 cases, 2 passed" "both ran"

# ---- output paths checked before any work ----
echo x >plainfile
expect_rc 2 "run --out under a regular file" $run --out plainfile/sub tiny.toml
expect_err "--out: plainfile: exists and is not a folder" "the option and the file are named"
expect_rc 2 "run --dump under a regular file" $run --out o5 --dump plainfile/sub tiny.toml
[ -e o5 ] && bad "the run went ahead" || ok "refused before running"
expect_rc 2 "run --junit under a regular file" $run --out o6 --junit plainfile/j.xml tiny.toml
expect_err "--junit: plainfile/j.xml" "the option and the path are named"
expect_rc 0 "run --junit in the --out folder the run makes" $run --out o9 --junit o9/ci/j.xml \
    tiny.toml
[ -s o9/ci/j.xml ] && ok "the --junit folder was made and the file written" ||
    bad "no o9/ci/j.xml"
expect_rc 2 "run --markdown under a regular file" $run --out o6 --markdown plainfile/m.md \
    tiny.toml
[ -e o6 ] && bad "the run went ahead" || ok "refused before running"
long=$(printf '%0950d' 0)
expect_rc 2 "run --out of 950 bytes" $run --out "$long" tiny.toml
expect_err "--out: the folder name is longer than 900 bytes" "the limit is named"
mkdir -p o7/report.json
expect_rc 2 "run --out with a folder where report.json goes" $run --out o7 tiny.toml
expect_err "o7/report.json: is a folder" "the folder is named"
expect_rc 2 "bless --baseline under a regular file" "$bin" bless --force --quiet \
    --baseline plainfile/b --out o8 tiny.toml
[ -e o8 ] && bad "the run went ahead" || ok "refused before running"
expect_rc 2 "merge --out under a regular file" "$bin" merge --out plainfile/m c1 c2
expect_err "--out: plainfile: exists and is not a folder" "the option is named"
expect_rc 2 "merge --junit under a regular file" "$bin" merge --out m3 --junit plainfile/j.xml c1 c2
[ -e m3 ] && bad "the merge went ahead" || ok "refused before merging"
if [ -d hf ]; then
    expect_rc 2 "verify --out '' is refused before the run" $vrun --out ''
    expect_err "cicheck verify: --out: empty output folder name" "the option is named"
    [ -s "$tmp/out" ] && bad "verify ran before refusing --out ''" || ok "nothing was run"
    expect_rc 2 "verify --out under a regular file" $vrun --out plainfile/v
    expect_err "--out: plainfile: exists and is not a folder" "the file in the way is named"
else
    skip "verify --out '' and a file in the way" "no checkpoint (no $py with numpy)"
fi

# ---- a failed write is exit 3, naming the path ----
# with writes past 512 bytes (lim1) or 50 KiB (lim100) failing (EFBIG, not
# a signal: SIGXFSZ ignored), stdout to /dev/null (a device: no limit)
lim1='trap "" XFSZ; ulimit -f 1; exec "$@" >/dev/null'
lim100='trap "" XFSZ; ulimit -f 100; exec "$@" >/dev/null'
expect_rc 3 "plot past a file size limit" sh -c "$lim1" sh "$bin" plot o1
expect_err "File too large" "the failed write is named"
sed 's/^d_model = 8$/d_model = 64/; s/^heads = 2$/heads = 4/' tiny.toml >big.toml
expect_rc 3 "run --dump past a file size limit" sh -c "$lim100" sh $run --out f1 --dump f1d \
    big.toml
expect_err "original.safetensors" "the dump file is named"
[ -s f1/report.json ] && ok "the report before it was written" || bad "no report.json"
expect_rc 3 "run --out past a file size limit" sh -c "$lim1" sh $run --out f2 tiny.toml
expect_err "f2/report.json" "report.json is named"
expect_rc 3 "merge --out past a file size limit" sh -c "$lim1" sh "$bin" merge --no-baseline \
    --out f3 c1 c2
expect_err "f3/report.json" "report.json is named"
cp -r o1 f4 && mkdir -p f4/plots/ulp_cdf.dat/keep
expect_rc 3 "plot with a folder where a plot's file goes" "$bin" plot f4
expect_err "f4/plots/ulp_cdf.dat" "the folder is named"
mkdir -p f5/plots/error_vs_d.dat/keep
expect_rc 3 "a sweep whose plots cannot be written" $run --out f5 sweep.toml
expect_err "f5/plots/error_vs_d.dat" "the plot's path is named"

cic_test_done
