#!/bin/sh
# SPDX-License-Identifier: MIT
# test_merge.sh: `cicheck merge` does not trust shard content. A small
# sweep (6 points) is run in 3 shards; then one edit at a time is made to a
# copy of the shards, and the merge must refuse it with exit 2, naming the
# shard's sweep.json and what is inconsistent:
#   - axes or axis_values that differ from the case's; the case body edited
#     (in one shard, and in all of them) with case_sha256 kept; the case
#     source edited with case_sha256 kept;
#   - a point whose params are not those of its index, that belongs to
#     another shard, with exit_code 1 but pass true, with a null report,
#     with report.pass contradicting its exit code, with results (or the
#     shard's points) of the wrong type, with another point's case;
#   - a shard whose pass contradicts its points; a FIFO as sweep.json;
#   - --out naming one of the shard folders (also spelled differently or
#     through a link): refused, and the shard's sweep.json is untouched.
# Consistent edits are accepted: a failed point (exit_code 1, pass false)
# makes the merge exit 1, a lost one (exit 3, no report) exit 3; the
# untouched shards merge with exit 0.
# Usage: test_merge.sh PATH/TO/cicheck
set -u
bin=$1
. "$(dirname "$0")/lib.sh"
cic_need "$py" "Debian's python3 edits the JSON"
cic_need timeout "it turns a blocked read into a failure"
cic_test_init merge_cli
CIC_TEST_TIMEOUT=60

cic_tiny_case merge-sweep "1, 2, 3" >"$tmp/sw.toml"
for k in 1 2 3; do
    expect_rc 0 "shard $k/3" "$bin" run --quiet --no-color --no-plots --shard $k/3 \
        --out "$tmp/s$k" "$tmp/sw.toml"
done
expect_rc 0 "the untouched shards merge" "$bin" merge --no-plots --out "$tmp/m" \
    "$tmp/s1" "$tmp/s2" "$tmp/s3"

# edit NAME WHICH PYTHON: copies of the shards under $tmp/NAME/s{1,2,3},
# with shard WHICH's sweep.json (or every shard's: WHICH = all) edited by
# PYTHON (s is the document; p(i) the point with index i, if in it)
edit() {
    name=$1; which=$2; code=$3
    rm -rf "$tmp/$name"
    mkdir -p "$tmp/$name"
    for k in 1 2 3; do
        mkdir -p "$tmp/$name/s$k"
        cp "$tmp/s$k/sweep.json" "$tmp/$name/s$k/sweep.json"
        [ "$which" = all ] || [ "$which" = "$k" ] || continue
        "$py" - "$tmp/$name/s$k/sweep.json" "$code" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
def p(i):
    return next(q for q in s["points"] if q["index"] == i)
exec(sys.argv[2])
json.dump(s, open(sys.argv[1], "w"), indent=1)
PY
    done
}
# refused NAME DESCRIPTION TEXT: merging the edited copies exits 2 and says
# TEXT about the edited shard
refused() {
    expect_rc 2 "$2" "$bin" merge --no-plots --out "$tmp/$1/out" \
        "$tmp/$1/s1" "$tmp/$1/s2" "$tmp/$1/s3"
    expect_err "$3" "$2: named"
    [ -e "$tmp/$1/out/sweep.json" ] && bad "$2: a merged sweep.json was written" || true
}

edit axes 2 's["axes"] = list(reversed(s["axes"]))'
refused axes "differing axes" "$tmp/axes/s2/sweep.json: axes is not what the embedded case gives"
edit axvals 3 's["axis_values"]["d_model"] = [8, 32]'
refused axvals "differing axis_values" "s3/sweep.json: axis_values is not what"
edit body 2 's["case"]["model"]["heads"] = 4'
refused body "case body edited, case_sha256 kept" "s2/sweep.json: case is not what the embedded case gives"
edit bodyall all 's["case"]["transforms"][1]["expect"] = "broken"'
refused bodyall "case body edited in every shard" "s1/sweep.json: case is not what"
edit source 1 's["case_source"] = s.get("case_source", "").replace("seed = 3", "seed = 4")'
refused source "case source edited, case_sha256 kept" "s1/sweep.json: case_source does not hash to case_sha256"
edit total 1 's["total_points"] = 4'
refused total "total_points edited" "total_points is not what"
edit params 1 'p(0)["params"]["seed"] = 2'
refused params "point params that do not match the index" "s1/sweep.json: point 0: params are not those of index 0"
edit swap 2 'p(1)["params"], p(4)["params"] = p(4)["params"], p(1)["params"]'
refused swap "two points' params swapped" "point 1: params are not those of index 1"
edit moved 1 's["points"].append(dict(p(0), index=1))'
refused moved "a point in the wrong shard" "point 1 belongs to shard 2/3, not to this shard 1/3"
edit passlie 1 'p(0)["exit_code"] = 1'
refused passlie "exit_code 1 with pass true" "s1/sweep.json: point 0: pass is true with exit_code 1"
edit nullrep 2 'p(1)["report"] = None'
refused nullrep "a null embedded report" "s2/sweep.json: point 1: report is null"
edit reppass 2 'p(1)["report"]["pass"] = False'
refused reppass "report.pass contradicting exit_code 0" "point 1: report.pass is false with exit_code 0"
edit results 3 'p(2)["report"]["results"] = "none"'
refused results "results of the wrong type" "s3/sweep.json: point 2: report.results is a string"
edit resrow 3 'p(2)["report"]["results"][0]["transform"] = 7'
refused resrow "a result row of the wrong type" "point 2: report.results[0] is not a result row"
edit points 3 's["points"] = {"0": s["points"]}'
refused points "points of the wrong type" "s3/sweep.json: points is an object"
edit repcase 1 'p(0)["report"]["case"] = p(3)["report"]["case"]'
refused repcase "a report of another point's case" "point 0: report.case is not the case of point 0"
edit shardpass 2 's["pass"] = False'
refused shardpass "a shard pass contradicting its points" "s2/sweep.json: pass is"
edit code 2 'p(1)["exit_code"] = 7; p(1)["pass"] = False'
refused code "an exit code out of range" "exit_code is out of range"

# a consistent edit: point 4 failed
edit failed 2 '
p(4)["exit_code"] = 1; p(4)["pass"] = False; p(4)["report"]["pass"] = False
s["pass"] = False'
expect_rc 1 "a consistently failed point merges, exit 1" "$bin" merge --no-plots \
    --out "$tmp/failed/out" "$tmp/failed/s1" "$tmp/failed/s2" "$tmp/failed/s3"
"$py" -c "import json,sys; s=json.load(open(sys.argv[1])); sys.exit(0 if s['pass'] is False else 1)" \
    "$tmp/failed/out/sweep.json" && ok "the merged sweep fails" || bad "the merged sweep fails"

# a point whose result was lost (exit 3, no report): merged, and the merge
# exits 3 as the unsharded sweep would
edit lost 3 '
p(5)["exit_code"] = 3; p(5)["pass"] = False; p(5)["report"] = None
s["pass"] = False'
expect_rc 3 "a lost point merges, exit 3" "$bin" merge --no-plots \
    --out "$tmp/lost/out" "$tmp/lost/s1" "$tmp/lost/s2" "$tmp/lost/s3"
expect_err "point 5 exited 3" "the lost point is named"

# a FIFO in place of a shard's sweep.json
edit fifo none ''
rm "$tmp/fifo/s2/sweep.json"
mkfifo "$tmp/fifo/s2/sweep.json"
refused fifo "a FIFO as sweep.json, without blocking" "s2/sweep.json: is a FIFO"

# --out one of the shards: refused however it is spelled; nothing changes
cp "$tmp/s1/sweep.json" "$tmp/s1.before"
expect_rc 2 "merge --out s1 s1 s2 s3" "$bin" merge --no-plots --out "$tmp/s1" \
    "$tmp/s1" "$tmp/s2" "$tmp/s3"
expect_err "--out is the same folder as the shard" "the output folder is named"
expect_rc 2 "merge --out s1/. s1 s2 s3" "$bin" merge --no-plots --out "$tmp/s1/." \
    "$tmp/s1" "$tmp/s2" "$tmp/s3"
ln -s "$tmp/s3" "$tmp/link3"
expect_rc 2 "merge --out LINK-TO-s3 s1 s2 s3" "$bin" merge --no-plots --out "$tmp/link3" \
    "$tmp/s1" "$tmp/s2" "$tmp/s3"
cmp -s "$tmp/s1/sweep.json" "$tmp/s1.before" && ok "shard s1 untouched" ||
    bad "shard s1 was overwritten"

cic_test_done
