#!/bin/sh
# SPDX-License-Identifier: MIT
# test_merge_many.sh: `cicheck merge` of 1,000 shards stays fast. A small
# real sweep (seed x samples, 6 points) is run in 3 shards to serve as the
# template; Debian's python3 checks that the template has the shape the
# merge requires (the header case takes the first value of each axis, a
# point's case is the header case with the point's values, params follow
# the mixed-radix index, seed the fastest axis), then writes 1,000 shard
# folders of a 1,000-point sweep of the same case with longer lists
# (50 seeds x 20 sample counts, max_points = 1000): the embedded case
# source and its case_sha256, axis_values, total_points, shard K/1000 with
# its one point K - 1, that point's params and report.case, and a
# rel_norm2 of (index + 1) / 2^20 in every result row, so the merged
# aggregate can be checked exactly.
# The shards are merged in a scrambled order; the merge must exit 0, give
# all 1,000 points in index order with their params, and aggregate each
# sample count over its 50 seeds. Its wall time is printed (the figure for
# the notes); only a generous bound (60 s) is asserted, so load cannot
# make the test flake. Without one shard, the merge names the missing point.
# Usage: test_merge_many.sh PATH/TO/cicheck
set -u
bin=$1
. "$(dirname "$0")/lib.sh"
cic_need "$py" "Debian's python3 writes the synthetic shards"
cic_need date "it times the merge"
cic_test_init merge_many
CIC_TEST_TIMEOUT=240

cic_tiny_case merge-many >"$tmp/t.toml"
printf '[sweep]\nmax_points = 1000\nseed = [11, 12, 13]\nsamples = [1, 2]\n' >>"$tmp/t.toml"
for k in 1 2 3; do
    expect_rc 0 "template shard $k/3" "$bin" run --quiet --no-color --no-plots --shard $k/3 \
        --out "$tmp/t$k" "$tmp/t.toml"
done

# The synthetic shards $tmp/s/1 .. $tmp/s/1000 from the template's.
if "$py" - "$tmp" >"$tmp/gen.out" 2>&1 <<'PY'
import copy, hashlib, json, os, sys
tmp = sys.argv[1]
shards = [json.load(open("%s/t%d/sweep.json" % (tmp, k))) for k in (1, 2, 3)]
head = shards[0]

def fail(msg):
    sys.exit("the template is not what this test assumes: " + msg)

def params(i, seeds, samples):
    return {"seed": seeds[i % len(seeds)], "samples": samples[i // len(seeds)]}

def point_case(case, par):
    c = copy.deepcopy(case)
    c["model"]["seed"] = par["seed"]
    c["model"]["samples"] = par["samples"]
    return c

# the template's shape, as the merge checks it
old_seeds, old_samples = [11, 12, 13], [1, 2]
if sorted(head["axes"]) != ["samples", "seed"] or head["total_points"] != 6:
    fail("axes %r, total_points %r" % (head["axes"], head["total_points"]))
if head["axis_values"] != {"seed": old_seeds, "samples": old_samples}:
    fail("axis_values %r" % head["axis_values"])
if point_case(head["case"], params(0, old_seeds, old_samples)) != head["case"]:
    fail("the header case is not that of the first values")
for s in shards:
    for p in s["points"]:
        par = params(p["index"], old_seeds, old_samples)
        if p["params"] != par or p["exit_code"] != 0 or p["pass"] is not True:
            fail("point %d: params %r, exit_code %r" % (p["index"], p["params"], p["exit_code"]))
        if p["report"]["case"] != point_case(head["case"], par):
            fail("point %d: report.case is not the header case with its values" % p["index"])

# the 1,000-point case: the same file with longer lists, line for line
seeds = [1000 + 7 * j for j in range(50)]
samples = list(range(1, 21))
lines = head["case_source"].split("\n")
for n, line in enumerate(lines):
    if line == "seed = [11, 12, 13]":
        lines[n] = "seed = [%s]" % ", ".join(map(str, seeds))
    elif line == "samples = [1, 2]":
        lines[n] = "samples = [%s]" % ", ".join(map(str, samples))
source = "\n".join(lines)
if source == head["case_source"]:
    fail("the case source has no seed or samples list to replace")
base = copy.deepcopy(head)
base["case_source"] = source
base["case_sha256"] = hashlib.sha256(source.encode()).hexdigest()
base["case"] = point_case(head["case"], params(0, seeds, samples))
base["axis_values"] = {"seed": seeds, "samples": samples}
base["total_points"] = len(seeds) * len(samples)
template_point = head["points"][0]
for i in range(base["total_points"]):
    par = params(i, seeds, samples)
    p = copy.deepcopy(template_point)
    p["index"] = i
    p["params"] = par
    p["report"]["case"] = point_case(head["case"], par)
    for row in p["report"]["results"]:
        if isinstance(row.get("metrics"), dict):
            row["metrics"]["rel_norm2"] = (i + 1) / 2.0**20
    s = dict(base)
    s["shard"] = {"index": i + 1, "count": base["total_points"]}
    s["points"] = [p]
    s["pass"] = True  # the aggregate is the template's: merge recomputes it
    d = "%s/s/%d" % (tmp, i + 1)
    os.makedirs(d)
    with open(d + "/sweep.json", "w") as f:
        json.dump(s, f)
print("wrote", base["total_points"], "shards")
PY
then ok "1,000 synthetic shards written"; else bad "1,000 synthetic shards written"; sed 's/^/    /' "$tmp/gen.out"; fi

# the shard folders in a scrambled order (389 is prime to 1,000): the
# merge must put the points in index order itself
set --
j=0
while [ $j -lt 1000 ]; do
    set -- "$@" "$tmp/s/$(( j * 389 % 1000 + 1 ))"
    j=$((j + 1))
done
len=$(printf '%s\n' "$@" | wc -c)
max=$(getconf ARG_MAX 2>/dev/null || echo 131072)
[ "$len" -lt $((max / 4)) ] && ok "the argument list ($len bytes) is far below ARG_MAX ($max)" ||
    bad "the argument list ($len bytes) nears ARG_MAX ($max)"

t0=$(date +%s.%N)
expect_rc 0 "merge of 1,000 shards" "$bin" merge --no-plots --out "$tmp/m" "$@"
t1=$(date +%s.%N)
wall=$(echo "$t0 $t1" | awk '{ printf "%.2f", $2 - $1 }')
echo "# merge of 1,000 shards (1,000 points): $wall s wall"
echo "$wall" | awk '{ exit !($1 < 60) }' && ok "the merge took under 60 s ($wall s)" ||
    bad "the merge took $wall s (bound 60 s)"
has "$tmp/out" "merged 1000 shards: 1000 points" "the merge reports 1,000 shards"

if "$py" - "$tmp/m/sweep.json" >"$tmp/chk.out" 2>&1 <<'PY'
import json, sys
m = json.load(open(sys.argv[1]))
seeds = [1000 + 7 * j for j in range(50)]
pts = m["points"]
assert m["shard"] is None and m["pass"] is True and m["total_points"] == 1000, "header"
assert [p["index"] for p in pts] == list(range(1000)), "points not in index order"
for i, p in enumerate(pts):
    want = {"seed": seeds[i % 50], "samples": i // 50 + 1}
    assert p["params"] == want, "point %d: params %r, want %r" % (i, p["params"], want)
    assert p["report"]["case"]["model"]["seed"] == want["seed"], "point %d: case" % i
groups = [g for g in m["aggregate"] if "rel_norm2" in g["values"]]
assert len(groups) >= 20, "%d aggregate groups with rel_norm2" % len(groups)
for g in groups:
    q = g["params"]["samples"] - 1
    v = g["values"]["rel_norm2"]
    assert g["n"] == 50, "samples %d: n = %d" % (q + 1, g["n"])
    assert v["median"] == (50 * q + 25.5) / 2.0**20, "samples %d: median %r" % (q + 1, v)
    assert v["min"] == (50 * q + 1) / 2.0**20 and v["max"] == (50 * q + 50) / 2.0**20, \
        "samples %d: min/max %r" % (q + 1, v)
PY
then ok "merged: 1,000 points in index order, their params, the aggregate over seeds"
else bad "merged sweep.json"; sed 's/^/    /' "$tmp/chk.out"; fi

# without shard 500 (point 499): refused, the missing point named
set --
j=0
while [ $j -lt 1000 ]; do
    k=$(( j * 389 % 1000 + 1 ))
    [ $k -eq 500 ] || set -- "$@" "$tmp/s/$k"
    j=$((j + 1))
done
expect_rc 2 "merge of 999 of the 1,000 shards" "$bin" merge --no-plots --out "$tmp/m2" "$@"
expect_err "point 499 of 1000 is missing" "the missing point is named"
cic_test_done
