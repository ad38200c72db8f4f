#!/bin/sh
# SPDX-License-Identifier: MIT
# test_case_shard.sh: a case without a [sweep] table split by samples
# (`cicheck run --shard K/N`) and merged (`cicheck merge`) gives the
# unsharded run's report.json in every field but wall_seconds, and its exit
# code: an rmsnorm case with RoPE and an adaLN (dit) case (two of its
# transforms, 16 tokens), 4 samples each, in 2 and 3 shards. The f32 engine is the fixed-order one: OpenBLAS sums a
# row in an order that depends on how many rows the call has (its small-
# matrix kernels), so its bits move with the shard's size. Refused: more
# shards than samples, a static-fold whose calibration sample is in another
# shard, a missing or repeated shard, a shard of another case, another
# cicheck version, a proof of the truth that does not add up, an edited or
# truncated .bin, a .bin longer than the case's numbers, a FIFO or a link
# to /dev/zero as case-shard.bin or .json (at once, never blocking or
# reading without end), sample 0's shard without its environment (the
# merged report records the shards', not the merge's), --out naming a shard,
# case and sweep shards made with different q files (the same case file).
# Usage: test_case_shard.sh PATH/TO/cicheck
set -u
bin=$1
here=$(dirname "$0")
. "$here/lib.sh"
cic_need "$py" "Debian's python3 compares the reports"
cic_test_init case_shard
export OPENBLAS_NUM_THREADS=1

# same A B: every field of two report.json files but wall_seconds
same() {
    "$py" - "$1" "$2" <<'PY'
import json, sys
def walk(a, b, p):
    if isinstance(a, dict) and isinstance(b, dict):
        for k in sorted(set(a) | set(b)):
            if k == "wall_seconds":
                continue
            # a merge of case shards has no per-block figures (per_block
            # null: design.md section 18); the unsharded run has them
            if k == "per_block" and b.get(k, 0) is None:
                continue
            if k not in a or k not in b:
                yield p + "/" + k + " in one only"
            else:
                yield from walk(a[k], b[k], p + "/" + k)
    elif isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        for i, (x, y) in enumerate(zip(a, b)):
            yield from walk(x, y, "%s[%d]" % (p, i))
    elif type(a) != type(b) or a != b:
        yield "%s: %r != %r" % (p, a, b)
d = list(walk(json.load(open(sys.argv[1])), json.load(open(sys.argv[2])), ""))
print("\n".join(d[:10]))
sys.exit(1 if d else 0)
PY
}

# split NAME CASE N...: run CASE unsharded and in each N shards, merge, compare
split() {
    name=$1; case=$2; shift 2
    "$bin" run --quiet --no-color --no-baseline --out "$tmp/$name-full" "$case" >"$tmp/full.txt"
    full_rc=$?
    for n in "$@"; do
        k=1; dirs=""
        while [ "$k" -le "$n" ]; do
            "$bin" run --quiet --shard "$k/$n" --out "$tmp/$name-$n-$k" "$case" >/dev/null ||
                bad "$name shard $k/$n did not run"
            dirs="$dirs $tmp/$name-$n-$k"; k=$((k + 1))
        done
        # shellcheck disable=SC2086 # the folder list
        expect_rc "$full_rc" "$name: the merge of $n shards exits as the unsharded run" \
            "$bin" merge --no-baseline --no-color --out "$tmp/$name-m$n" $dirs
        if same "$tmp/$name-full/report.json" "$tmp/$name-m$n/report.json" >"$tmp/diff"; then
            ok "$name: $n shards merge to the unsharded report.json"
        else bad "$name: $n shards differ from the unsharded run"; sed 's/^/    /' "$tmp/diff"; fi
    done
}

sed 's/^f32 = .*/f32 = ["fixed-order"]/; s/^name = "rmsnorm"/name = "rms-shard"/' \
    "$here/../cases/rmsnorm.toml" | awk '{print} /^block = "rmsnorm"/ {print "rope = \"half\""}' \
    >"$tmp/rms.toml"
"$py" - "$here/../cases/adaln.toml" >"$tmp/dit.toml" <<'PY'
import sys
text = open(sys.argv[1]).read().replace('name = "adaln"', 'name = "dit-shard"')
text = text.replace('f32 = ["openblas", "fixed-order"]', 'f32 = ["fixed-order"]')
parts = text.split("[[transforms]]")
# two of its transforms keep the test short (each merge scores them all)
keep = [p for p in parts[1:] if 'kind = "static-fold"' not in p][:2]
print("[[transforms]]".join([parts[0].replace("tokens = 32", "tokens = 16")] + keep))
PY
split rms "$tmp/rms.toml" 2 3
split dit "$tmp/dit.toml" 3

# ---- refusals ----
expect_rc 2 "5 shards of 4 samples are refused" \
    "$bin" run --quiet --shard 5/5 --out "$tmp/x" "$tmp/rms.toml"
expect_err "at most 4 shards" "the refusal says how many shards the case allows"
expect_rc 2 "a static-fold calibrated on another shard's sample is refused" \
    "$bin" run --quiet --shard 2/2 --out "$tmp/x" "$here/../cases/adaln.toml"
expect_err "bakes in sample 0" "the refusal names the calibration sample"
expect_rc 2 "a missing shard is refused" \
    "$bin" merge --no-baseline --out "$tmp/r" "$tmp/rms-3-1" "$tmp/rms-3-3"
expect_err "shard 2/3 of case 'rms-shard' is missing" "the missing shard is named"
expect_rc 2 "a shard given twice is refused" \
    "$bin" merge --no-baseline --out "$tmp/r" "$tmp/rms-3-1" "$tmp/rms-3-2" "$tmp/rms-3-2"
expect_err "rms-3-2/case-shard.json: refusing to merge: shard 2/3 given twice" \
    "the repeated shard's file is named"
expect_rc 2 "a shard of another case is refused" \
    "$bin" merge --no-baseline --out "$tmp/r" "$tmp/rms-3-1" "$tmp/dit-3-2"
expect_err "dit-3-2/case-shard.json: refusing to merge: a shard of another case file" \
    "the other case's shard is named"
expect_rc 2 "shards of 2 and of 3 are refused together" \
    "$bin" merge --no-baseline --out "$tmp/r" "$tmp/rms-2-1" "$tmp/rms-3-2" "$tmp/rms-3-3"
expect_err "shard count 3, the first shard's 2" "the shard counts are named"
cp -r "$tmp/rms-3-2" "$tmp/ver"
sed 's/"cicheck_version": "[^"]*"/"cicheck_version": "0.0.1"/' "$tmp/rms-3-2/case-shard.json" \
    >"$tmp/ver/case-shard.json"
expect_rc 2 "a shard of another cicheck version is refused" \
    "$bin" merge --no-baseline --out "$tmp/r" "$tmp/rms-3-1" "$tmp/ver" "$tmp/rms-3-3"
expect_err "ver/case-shard.json: refusing to merge: written by cicheck 0.0.1" \
    "the version is named"
cp -r "$tmp/rms-3-2" "$tmp/proof"
"$py" - "$tmp/rms-3-2/case-shard.json" "$tmp/proof/case-shard.json" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
s["truth_proof"]["escalated"] = s["truth_proof"]["values"]  # more proven than there are
json.dump(s, open(sys.argv[2], "w"))
PY
expect_rc 2 "a shard whose proof does not add up is refused" \
    "$bin" merge --no-baseline --out "$tmp/r" "$tmp/rms-3-1" "$tmp/proof" "$tmp/rms-3-3"
expect_err "proof/case-shard.json: truth_proof is not a proof of the shard's" "the proof's file is named"
cp -r "$tmp/rms-3-2" "$tmp/cut"
head -c 1000 "$tmp/rms-3-2/case-shard.bin" >"$tmp/cut/case-shard.bin"
expect_rc 2 "a truncated .bin is refused" \
    "$bin" merge --no-baseline --out "$tmp/r" "$tmp/rms-3-1" "$tmp/cut" "$tmp/rms-3-3"
expect_err "cut/case-shard.bin: 1000 bytes that do not hash" "the truncated file is named"
# readers: a FIFO or a link to /dev/zero as case-shard.bin or .json is
# refused at once (20 s would be a hang, or /dev/zero read without end);
# a .bin (and data_bytes) longer than the case's numbers is never read
for f in fifo zero jfifo long; do cp -r "$tmp/rms-3-2" "$tmp/$f"; done
rm "$tmp/fifo/case-shard.bin" "$tmp/zero/case-shard.bin" "$tmp/jfifo/case-shard.json"
mkfifo "$tmp/fifo/case-shard.bin" "$tmp/jfifo/case-shard.json"
ln -s /dev/zero "$tmp/zero/case-shard.bin"
CIC_TEST_TIMEOUT=20
expect_rc 2 "a FIFO as case-shard.bin is refused at once" \
    "$bin" merge --no-baseline --out "$tmp/r" "$tmp/rms-3-1" "$tmp/fifo" "$tmp/rms-3-3"
expect_err "fifo/case-shard.bin: is a FIFO, not a regular file" "the FIFO .bin is named"
expect_rc 2 "a link to /dev/zero as case-shard.bin is refused at once" \
    "$bin" merge --no-baseline --out "$tmp/r" "$tmp/rms-3-1" "$tmp/zero" "$tmp/rms-3-3"
expect_err "zero/case-shard.bin: is a character device, not a regular file" \
    "the /dev/zero .bin is named"
expect_rc 2 "a FIFO as case-shard.json is refused at once" \
    "$bin" merge --no-baseline --out "$tmp/r" "$tmp/rms-3-1" "$tmp/jfifo" "$tmp/rms-3-3"
expect_err "jfifo/case-shard.json: is a FIFO, not a regular file" "the FIFO .json is named"
CIC_TEST_TIMEOUT=600
head -c 4096 /dev/zero >>"$tmp/long/case-shard.bin"
"$py" - "$tmp/long" <<'PY'
import hashlib, json, os, sys
d = sys.argv[1]
s = json.load(open(d + "/case-shard.json"))
b = open(d + "/case-shard.bin", "rb").read()
s["data_bytes"], s["data_sha256"] = len(b), hashlib.sha256(b).hexdigest()
json.dump(s, open(d + "/case-shard.json", "w"))
PY
expect_rc 2 "a .bin longer than the case's numbers is refused unread" \
    "$bin" merge --no-baseline --out "$tmp/r" "$tmp/rms-3-1" "$tmp/long" "$tmp/rms-3-3"
expect_err "long/case-shard.json: data_bytes is not the" "the .bin's size is checked against the case"
cp -r "$tmp/rms-3-1" "$tmp/noenv"
"$py" - "$tmp/rms-3-1/case-shard.json" "$tmp/noenv/case-shard.json" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
del s["environment"]["openblas_core"]
json.dump(s, open(sys.argv[2], "w"))
PY
expect_rc 2 "sample 0's shard without its environment is refused" \
    "$bin" merge --no-baseline --out "$tmp/r" "$tmp/noenv" "$tmp/rms-3-2" "$tmp/rms-3-3"
expect_err "noenv/case-shard.json: environment is not the object" "the shard's file is named"
# the merged report records the environment the shards ran in, not the merge's
for k in 1 2; do
    OPENBLAS_THREAD_TIMEOUT=7 "$bin" run --quiet --shard "$k/2" --out "$tmp/t7-$k" \
        "$tmp/rms.toml" >/dev/null || bad "rms shard $k/2 at timeout 7 did not run"
done
"$bin" merge --no-baseline --no-color --out "$tmp/t7" "$tmp/t7-1" "$tmp/t7-2" >/dev/null
got=$("$py" -c 'import json,sys; print(json.load(open(sys.argv[1]))["environment"]["openblas_thread_timeout"])' \
    "$tmp/t7/report.json" 2>&1)
if [ "$got" = 7 ]; then ok "the merged report records the shards' environment"
else bad "the merged report's openblas_thread_timeout is '$got', the shards ran at 7"; fi
# shards made with different rotation files (the same case file) are
# refused, naming the file and both shards: a case shard and a sweep shard
if "$py" -c 'import numpy' 2>/dev/null; then
    {
        cic_tiny_rmsnorm qfile-shard
        cat <<'TOML'
[[transforms]]
name = "rot"
kind = "rotate"
after = "fold"
q = "file:q.safetensors"
TOML
    } >"$tmp/qf.toml"
    sed 's/^name = "qfile-shard"$/name = "qfile-sweep"/; s/^seed = 5$/seed = 5\n[sweep]\nseed = [1, 2]/' \
        "$tmp/qf.toml" >"$tmp/qs.toml"
    "$py" - "$tmp" "$here" <<'PY'
import sys
import numpy as np
sys.path.insert(0, sys.argv[2])
from make_checkpoint import write_st
for k in (1, 2):
    q, _ = np.linalg.qr(np.random.default_rng(k).standard_normal((8, 8)))
    write_st("%s/q%d.safetensors" % (sys.argv[1], k), [("q", "F64", (8, 8), q.astype("<f8").tobytes())])
PY
    for v in qf:"" qs:"--no-plots"; do
        n=${v%%:*}
        for k in 1 2; do
            cp "$tmp/q$k.safetensors" "$tmp/q.safetensors"
            # shellcheck disable=SC2086 # the option is a word or nothing
            "$bin" run --quiet --no-baseline ${v#*:} --shard "$k/2" --out "$tmp/$n-$k" \
                "$tmp/$n.toml" >/dev/null || bad "$n shard $k/2 did not run"
        done
    done
    has "$tmp/qf-1/case-shard.json" '"sha256_whole_file"' "a case shard records the q file's hash"
    expect_rc 2 "case shards made with different q files are refused" \
        "$bin" merge --no-baseline --out "$tmp/r" "$tmp/qf-1" "$tmp/qf-2"
    expect_err "qf-2/case-shard.json: refusing to merge: the q file of transform 'rot' differs between the shards" \
        "the q file and the shard are named"
    expect_err "in $tmp/qf-1/case-shard.json" "the other shard is named"
    expect_rc 2 "sweep shards made with different q files are refused" \
        "$bin" merge --no-plots --out "$tmp/r2" "$tmp/qs-1" "$tmp/qs-2"
    expect_err "qs-2/sweep.json: refusing to merge: the q file of transform 'rot' differs" \
        "the sweep shard is named"
    cp "$tmp/q1.safetensors" "$tmp/q.safetensors"
    "$bin" run --quiet --no-baseline --shard 2/2 --out "$tmp/qf-2" "$tmp/qf.toml" >/dev/null
    expect_rc 0 "the same q file in both shards merges" \
        "$bin" merge --no-baseline --out "$tmp/r3" "$tmp/qf-1" "$tmp/qf-2"
    cp -r "$tmp/qf-2" "$tmp/qf-edit"
    "$py" - "$tmp/qf-edit/case-shard.json" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
del s["files_read"][0]["sha256_whole_file"]
json.dump(s, open(sys.argv[1], "w"))
PY
    expect_rc 2 "an edited files_read is refused" \
        "$bin" merge --no-baseline --out "$tmp/r4" "$tmp/qf-1" "$tmp/qf-edit"
    expect_err "qf-edit/case-shard.json: files_read[0] is not" "the edited shard is named"
else
    skip "shards with different q files" "no numpy in $py"
fi
expect_rc 2 "--out naming a shard is refused" \
    "$bin" merge --no-baseline --out "$tmp/rms-3-1" "$tmp/rms-3-1" "$tmp/rms-3-2" "$tmp/rms-3-3"
expect_err "--out is the same folder as the shard" "the shard folder is named"

cic_test_done
