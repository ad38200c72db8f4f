#!/bin/sh
# SPDX-License-Identifier: MIT
# test_hostile.sh: the command line under careless or hostile use, end to
# end through the cicheck binary. Each check names the defect it guards:
#   - a case that overflows binary32 (every output NaN or Inf) fails, and
#     says so, even without a nonfinite gate; weights that would overflow
#     (std 1e39) are refused, never an abort;
#   - d_model = 1 runs (preln, rmsnorm);
#   - case names cannot leave the report or baseline folders;
#   - --junit / --markdown on a FIFO or a character device (a private null
#     device when root) write through it,
#     never replace it with a regular file; a directory is refused;
#   - a result lost to a full device or a failing $GITHUB_STEP_SUMMARY is
#     exit 3;
#   - a missing --baseline folder, empty values, repeated or contradicting
#     options, non-decimal numbers are usage errors (exit 2);
#   - dump file names cannot collide;
#   - a FIFO or a link to /dev/zero in place of a case file (given, in a
#     folder, --case of verify), a q file, an [input] file, the report.json
#     or sweep.json of cicheck plot is refused at once, naming it.
# A check that needs python3, timeout(1) or a writable /dev/full is reported
# as SKIP without it.
# Usage: test_hostile.sh PATH/TO/cicheck   (CIC_SOURCE_ROOT: the source tree)
set -u
bin=$1
root=${CIC_SOURCE_ROOT:-$(cd "$(dirname "$0")/.." && pwd)}
. "$(dirname "$0")/lib.sh"
cic_test_init hostile
CIC_TEST_TIMEOUT=120

cd "$tmp" || exit 1
# a small rmsnorm case (under a second), with one rotation
{
    cic_tiny_rmsnorm tiny
    cat <<'TOML'
[[transforms]]
name = "rot"
kind = "rotate"
after = "fold"
q = "random"
seed = 3
TOML
} >tiny.toml
run="$bin run --quiet --no-color --no-baseline"

# ---- numbers that overflow binary32 ----
sed 's/^seed = 5$/seed = 5\n[model.weights]\nstd = 1e30/' tiny.toml >nan.toml
expect_rc 1 "every f32 output NaN/Inf fails without a nonfinite gate" $run --out rep-nan nan.toml
has out "every output is NaN or Inf: the row fails" "the table says why the row fails"
if cic_have "$py"; then
    "$py" - rep-nan/report.json <<'PY' && ok "report.json: rows fail, figures not 0" || bad "report.json: rows fail, figures not 0"
import json, sys
r = json.load(open(sys.argv[1]))
assert r["pass"] is False
rows = [x for x in r["results"] if x["engine"] == "f32-fixed-order"]
assert rows and all(x["pass"] is False for x in rows), rows
for x in rows:
    m = x["metrics"]
    # NaN / Inf are written as null: never a passing 0
    assert m["max_abs"] is None and m["rel_norm2"] is None, m
    assert m["ulp_row"]["p99"] is None and m["ulp_row"]["max"] is None, m
PY
else
    skip "report.json: rows fail, figures not 0" "no $py to read it"
fi
cat >>nan.toml <<'TOML'
[[gates]]
metric = "rel_norm2"
max = 1e30
TOML
expect_rc 1 "a gate on rel_norm2 over NaN outputs fails" $run --out rep-nan2 nan.toml
has out "FAIL gate none / f32-fixed-order / rel_norm2" "the failed gate is named"
sed 's/^seed = 5$/seed = 5\n[model.weights]\nstd = 1e39/' tiny.toml >big.toml
expect_rc 2 "std = 1e39 is refused at load (no abort)" $run --out rep-big big.toml
has err "big.toml:11:7: 'std' = 1e+39 in [model.weights] is above" "std refused with its position"

# ---- d_model = 1 ----
for b in rmsnorm preln; do
    sed -e 's/^d_model = 8$/d_model = 1/' -e 's/^heads = 2$/heads = 1/' tiny.toml >d1.toml
    if [ "$b" = preln ]; then
        sed -i -e 's/^block = "rmsnorm"$/block = "preln"/' -e 's/fold-rmsnorm-gamma/fuse-layernorm/' d1.toml
    fi
    expect_rc 0 "d_model = 1 runs ($b)" $run --out "rep-d1-$b" d1.toml
done

# ---- names cannot leave their folders ----
mkdir -p nest/a/b && cd nest/a/b || exit 1
for n in ../evil .. ../../x .hidden; do
    sed "s|^name = \"tiny\"$|name = \"$n\"|" "$tmp/tiny.toml" >named.toml
    expect_rc 2 "run refuses name = \"$n\"" $run named.toml
    expect_rc 2 "bless refuses name = \"$n\"" "$bin" bless --force --quiet --baseline ref named.toml
done
[ -e ../evil ] || [ -e ../../x ] || [ -e report.json ] || [ -e ../report.json ] || [ -d ref ] &&
    bad "a refused name wrote something" || ok "nothing written outside the report folders"
cd "$tmp" || exit 1
printf 'x' >"$tmp/a
b.toml" && sed '/^name = /d' tiny.toml >"$tmp/a
b.toml"
expect_rc 2 "a file name with a newline is no case name" $run "$tmp/a
b.toml"
has err "'a\\x0ab'" "the bad name is shown escaped"

# ---- --junit / --markdown on special files ----
if cic_have timeout; then
    mkfifo fifo
    # the reader gives up after 20 s, should cicheck not write through the FIFO
    timeout 20 cat fifo >fifo.out &
    reader=$!
    expect_rc 0 "--junit into a FIFO" $run --out rep-fifo --junit fifo tiny.toml
    wait "$reader"
    [ -p fifo ] && ok "the FIFO is still a FIFO" || bad "the FIFO was replaced"
    has fifo.out '<testsuites' "the JUnit XML went through the FIFO"
else
    skip "--junit into a FIFO" "no timeout(1) to bound the reader"
fi
# a character device: a private null device when root can make one (so a
# regression cannot replace the machine's /dev/null), else /dev/null itself
# as an unprivileged user (who cannot replace it)
if [ "$(id -u)" -eq 0 ] && mknod -m 666 null c 1 3 2>/dev/null && echo x >null 2>/dev/null; then
    dev=$tmp/null
else
    dev=/dev/null
fi
expect_rc 0 "--junit and --markdown on a character device ($dev)" \
    $run --out rep-null --junit "$dev" --markdown "$dev" tiny.toml
[ -c "$dev" ] && ok "$dev is still a character device" || bad "$dev was replaced"
mkdir adir
expect_rc 2 "--junit on a directory" $run --out rep-dir --junit adir tiny.toml
expect_rc 2 "--markdown on a directory" $run --out rep-dir --markdown adir tiny.toml
[ -e rep-dir ] && bad "the run went ahead" || ok "refused before running"
echo old >real.xml
ln -s real.xml link.xml
expect_rc 0 "--junit through a symbolic link" $run --out rep-link --junit link.xml tiny.toml
[ -L link.xml ] && ok "the link stays a link" || bad "the link was replaced"
has real.xml '<testsuites' "its target holds the report"

# ---- readers: FIFOs and devices in place of the files cicheck reads ----
# each must be refused at once (exit 2, the file and what it is named), never
# block on the FIFO or read /dev/zero without end: 20 s would be a hang
CIC_TEST_TIMEOUT=20
mkdir readers && mkfifo readers/case.toml && ln -s /dev/zero readers/zero.toml
expect_rc 2 "a FIFO as the case file" $run --out rep-rd readers/case.toml
expect_err "readers/case.toml: is a FIFO, not a regular file; a case file (TOML) expected" \
    "the FIFO case file is named"
expect_rc 2 "a link to /dev/zero as the case file" $run --out rep-rd readers/zero.toml
expect_err "readers/zero.toml: is a character device, not a regular file" \
    "the /dev/zero case file is named"
cp tiny.toml readers/in-dir.toml && mkfifo readers/fifo.toml
expect_rc 2 "a FIFO among the case files of a folder" $run --out rep-rd2 readers
expect_err "readers/fifo.toml: is a FIFO" "the FIFO in the folder is named"
expect_rc 2 "a FIFO as --case of verify" "$bin" verify readers readers --case readers/case.toml
expect_err "readers/case.toml: is a FIFO" "verify names the FIFO"
mkfifo readers/q.safetensors
sed 's/^q = "random"$/q = "file:readers\/q.safetensors"/' tiny.toml >qfifo.toml
expect_rc 2 "a FIFO as a q file" $run --out rep-rd3 qfifo.toml
expect_err "is a FIFO, not a regular file; a safetensors file expected" "the FIFO q file is refused"
sed 's/^seed = 5$/seed = 5\n[input]\nfile = "readers\/zero.toml"/' tiny.toml >infifo.toml
expect_rc 2 "a link to /dev/zero as the [input] file" $run --out rep-rd4 infifo.toml
expect_err "is a character device" "the /dev/zero input file is refused"
mkdir readers/plot && mkfifo readers/plot/report.json
expect_rc 2 "a FIFO as the report.json of cicheck plot" "$bin" plot readers/plot
expect_err "readers/plot/report.json: is a FIFO" "plot names the FIFO"
rm readers/plot/report.json && ln -s /dev/zero readers/plot/sweep.json
expect_rc 2 "a link to /dev/zero as the sweep.json of cicheck plot" "$bin" plot readers/plot
expect_err "readers/plot/sweep.json: is a character device" "plot names the device"
CIC_TEST_TIMEOUT=120

# ---- lost results are exit 3 ----
if [ -w /dev/full ]; then
    expect_rc 3 "stdout on a full device" sh -c "$run --out rep-full tiny.toml >/dev/full"
    expect_rc 3 "--version on a full device" sh -c "$bin --version >/dev/full"
    GITHUB_STEP_SUMMARY=/dev/full expect_rc 3 "\$GITHUB_STEP_SUMMARY that cannot be appended" \
        $run --out rep-gh tiny.toml
else
    skip "stdout, --version and \$GITHUB_STEP_SUMMARY on a full device" "/dev/full is not writable here"
fi
GITHUB_STEP_SUMMARY="$tmp/adir" expect_rc 3 "\$GITHUB_STEP_SUMMARY that is a directory" \
    $run --out rep-gh2 tiny.toml

# ---- usage errors ----
expect_rc 2 "--baseline of a missing folder" "$bin" run --quiet --baseline nope --out r tiny.toml
has err "nope: baseline folder: No such file or directory" "the missing baseline folder is named"
expect_rc 2 "--baseline and --no-baseline" "$bin" run --quiet --baseline . --no-baseline tiny.toml
expect_rc 2 "--color and --no-color" $run --color tiny.toml
expect_rc 2 "--out twice" $run --out a --out b tiny.toml
for o in --out --junit --markdown --dump --baseline --tolerance --threads --max-memory --shard; do
    expect_rc 2 "$o ''" "$bin" run --quiet "$o" '' tiny.toml
done
expect_rc 2 "merge --out ''" "$bin" merge --out '' a b
for v in 0x10 inf nan 1,0x4 ' 1' '1e'; do
    expect_rc 2 "--tolerance '$v'" $run --tolerance "$v" tiny.toml
done
for v in 0x10 1e9 '+4' ' 4' 4x; do
    expect_rc 2 "--threads '$v'" $run --threads "$v" tiny.toml
done
expect_rc 2 "--max-memory inf" $run --max-memory inf tiny.toml
expect_rc 2 "--max-memory 0x100M" $run --max-memory 0x100M tiny.toml
# the memory limit is --max-memory's, not the loader's: 64 layers of d 4096
# (an estimate of tens of GiB) load, and the run refuses them before
# allocating, saying what the estimate is made of
printf '[model]\nblock = "preln"\nd_model = 4096\nheads = 32\ntokens = 8\nsamples = 2\nlayers = 64\n' >huge.toml
expect_rc 2 "a case above --max-memory" $run --max-memory 1G huge.toml
expect_err "more than the limit of 1024.0 MiB (--max-memory): weights" \
    "the refusal names --max-memory and the weights"
expect_err "raise --max-memory" "it says the limit can be raised"
expect_rc 0 "--tolerance 1.5,4 is taken" $run --out rep-tol --tolerance 1.5,4 tiny.toml
expect_rc 0 "hash --help" "$bin" hash --help
has out "usage: cicheck hash" "hash --help prints its usage"
expect_rc 2 "hash --bogus" "$bin" hash --bogus

# ---- dump file names ----
sed 's/^name = "rot"$/name = "fold.f64"/' tiny.toml >coll.toml
sed -i 's/^after = "fold"$/after = "fold"/' coll.toml
expect_rc 2 "dump names that collide" $run --out rep-coll --dump dump-coll coll.toml
has err "would both write fold.f64.safetensors" "the collision is named"
[ -e dump-coll ] && bad "the dump was written" || ok "nothing dumped"
expect_rc 0 "the same case without --dump" $run --out rep-coll coll.toml
# a low-precision engine's file <transform>.<engine>.safetensors against a
# transform's float64 copy, and against another transform's file
sed 's/^f32 = \["fixed-order"\]$/&\n[[engines.lowp]]\nname = "f64"\nweights = "bf16"/' \
    tiny.toml >coll-lowp.toml
expect_rc 2 "an engine named like the float64 copies" $run --out rep-cl --dump dump-cl \
    coll-lowp.toml
has err "engine 'f64' on transform 'fold' would both write fold.f64.safetensors" \
    "the engine and the transform are named"
sed -e 's/^f32 = \["fixed-order"\]$/&\n[[engines.lowp]]\nname = "b"\nweights = "bf16"/' \
    -e 's/^name = "rot"$/name = "none.b"/' tiny.toml >coll-none.toml
expect_rc 2 "a transform named like an engine's file of the original" $run --out rep-cn \
    --dump dump-cn coll-none.toml
has err "transform 'none.b' and engine 'b' on the original model would both write" \
    "the transform and the engine on the original are named"
[ -e dump-cl ] || [ -e dump-cn ] && bad "a dump was written" || ok "nothing dumped"
expect_rc 0 "the engine named f64 without --dump" $run --out rep-cl coll-lowp.toml

cic_test_done
