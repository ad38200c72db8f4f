#!/bin/sh
# SPDX-License-Identifier: MIT
# slurm-local.sh: a real one-node Slurm cluster on localhost runs a sharded
# sweep and a case split by samples, and each merged report is checked
# against its unsharded run.
#
# Installs Debian's slurm-wlm and munge when missing (apt-get update first),
# makes a munge key when /etc/munge has none, starts munged (as user munge),
# slurmctld and slurmd (as root; ProctrackType proctrack/linuxproc and
# TaskPlugin task/none: no cgroups) with a slurm.conf of its own in a
# temporary folder, submits one job array over the N shards of a sweep and
# one over 2 sample shards of an adaLN case with `sbatch --wait
# --array=1-N`, merges each with `cicheck merge`, and compares the merged
# sweep.json and report.json with unsharded runs' (every field but the
# timing ones). Every daemon it started is stopped by the PID it wrote,
# whatever happens. Needs root (the daemons and apt). When the cluster
# cannot be had (no root, no packages, a daemon that does not come up) it
# says why and exits 77, the skip code; 0 when the comparison holds, 1
# when it does not.
# Usage: scripts/slurm-local.sh [SWEEP_CASE [N]]   (default
# cases/sweeps/adaln-tokens.toml, 3 shards; build/cicheck must exist)
set -u
cd "$(dirname "$0")/.." || exit 1
case_file=${1:-cases/sweeps/adaln-tokens.toml}
n=${2:-3}
bin=$PWD/build/cicheck
py=/usr/bin/python3

skip() {
    echo "slurm-local: SKIP: $*" >&2
    exit 77
}
[ -x "$bin" ] || { echo "slurm-local: $bin missing: run scripts/bootstrap.sh" >&2; exit 1; }
[ -f "$case_file" ] || { echo "slurm-local: no case file $case_file" >&2; exit 1; }
[ "$(id -u)" -eq 0 ] || skip "the daemons and apt need root"

missing=""
for p in slurm-wlm munge; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" ||
        missing="$missing $p"
done
if [ -n "$missing" ]; then
    echo "slurm-local: installing$missing" >&2
    # shellcheck disable=SC2086 # the package names are words
    { apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q $missing; } \
        >&2 || skip "apt-get could not install$missing"
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/cicheck-slurm.XXXXXX")
chmod 755 "$tmp"
started=""
# shellcheck disable=SC2317 # called by the EXIT trap
stop_all() {
    # a pid file read once (a daemon that exits removes its own)
    for f in $started; do
        pid=$(cat "$f" 2>/dev/null) && [ -n "$pid" ] && kill "$pid" 2>/dev/null
    done
    # wait for them to go, a few seconds at most
    for _ in 1 2 3 4 5 6 7 8 9 10; do
        alive=""
        for f in $started; do
            pid=$(cat "$f" 2>/dev/null) && [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null && alive=1
        done
        [ -z "$alive" ] && break
        sleep 0.5
    done
    rm -rf "$tmp"
}
trap stop_all EXIT
trap 'exit 1' INT TERM

# munge: the key and the daemon (reused when one is running already)
if [ ! -s /etc/munge/munge.key ]; then
    mkdir -p /etc/munge
    if command -v mungekey >/dev/null 2>&1; then
        mungekey --create --keyfile=/etc/munge/munge.key >&2 || skip "mungekey failed"
    else
        dd if=/dev/urandom of=/etc/munge/munge.key bs=1024 count=1 2>/dev/null
    fi
    chown munge:munge /etc/munge/munge.key
    chmod 400 /etc/munge/munge.key
fi
mkdir -p /run/munge /var/lib/munge /var/log/munge
chown munge:munge /run/munge /var/lib/munge /var/log/munge
if ! munge -n 2>/dev/null | unmunge >/dev/null 2>&1; then
    mkdir -p "$tmp/munge" # the pid file, where user munge may write
    chown munge:munge "$tmp/munge"
    runuser -u munge -- /usr/sbin/munged --pid-file="$tmp/munge/munged.pid" \
        --socket=/run/munge/munge.socket.2 >&2 2>&1 || skip "munged did not start"
    started="$tmp/munge/munged.pid"
    sleep 1
    munge -n 2>/dev/null | unmunge >/dev/null 2>&1 || skip "munge does not authenticate"
fi

# slurm.conf of our own (SLURM_CONF tells the clients)
host=$(hostname -s)
cpus=$(nproc)
mem=$(awk '/MemTotal/ { printf "%d", $2 / 1024 * 0.9 }' /proc/meminfo)
mkdir -p "$tmp/state" "$tmp/spool"
cat >"$tmp/slurm.conf" <<EOF
ClusterName=cicheck
SlurmctldHost=$host
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
MpiDefault=none
ReturnToService=2
StateSaveLocation=$tmp/state
SlurmdSpoolDir=$tmp/spool
SlurmctldPidFile=$tmp/slurmctld.pid
SlurmdPidFile=$tmp/slurmd.pid
SlurmctldLogFile=$tmp/slurmctld.log
SlurmdLogFile=$tmp/slurmd.log
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
NodeName=$host CPUs=$cpus RealMemory=$mem State=UNKNOWN
PartitionName=local Nodes=$host Default=YES MaxTime=INFINITE State=UP
EOF
SLURM_CONF=$tmp/slurm.conf
export SLURM_CONF
if ! /usr/sbin/slurmctld -f "$SLURM_CONF" >&2 2>&1; then
    skip "slurmctld did not start: $(tail -3 "$tmp/slurmctld.log" 2>/dev/null)"
fi
started="$started $tmp/slurmctld.pid"
if ! /usr/sbin/slurmd -f "$SLURM_CONF" >&2 2>&1; then
    skip "slurmd did not start: $(tail -3 "$tmp/slurmd.log" 2>/dev/null)"
fi
started="$started $tmp/slurmd.pid"
up=""
for _ in $(seq 1 60); do
    state=$(sinfo -h -N -o %t 2>/dev/null | head -1)
    case "$state" in idle*|mix*|alloc*) up=1; break ;; esac
    sleep 0.5
done
[ -n "$up" ] || skip "node $host not idle after 30 s (state '${state:-none}'): $(tail -3 "$tmp/slurmd.log" 2>/dev/null)"
echo "slurm-local: cluster up: node $host, $cpus CPUs; $n shards of $case_file" >&2

# array NAME CASE N FILE: shard K/N of CASE as task K of one job array into
# $tmp/NAME-K, merged into $tmp/NAME-merged, compared in FILE (sweep.json or
# report.json) with an unsharded run in $tmp/NAME-whole. 0 when they agree.
array() {
    name=$1; cf=$2; nn=$3; file=$4
    if ! sbatch --wait --array=1-"$nn" --cpus-per-task=1 --job-name="cicheck-$name" \
        --output="$tmp/$name-%a.log" --chdir="$PWD" \
        --wrap="OPENBLAS_NUM_THREADS=1 '$bin' run --quiet --no-color --no-plots --threads 1 --shard \$SLURM_ARRAY_TASK_ID/$nn --out '$tmp'/$name-\$SLURM_ARRAY_TASK_ID '$cf'" >&2; then
        echo "slurm-local: FAIL: the job array of $name failed" >&2
        for k in $(seq 1 "$nn"); do tail -5 "$tmp/$name-$k.log" >&2 2>/dev/null; done
        return 1
    fi
    shards=""
    for k in $(seq 1 "$nn"); do shards="$shards $tmp/$name-$k"; done
    # shellcheck disable=SC2086 # the shard folders are words
    OPENBLAS_NUM_THREADS=1 "$bin" merge --no-plots --no-baseline --out "$tmp/$name-merged" $shards >"$tmp/$name-merge.log" 2>&1 ||
        [ -f "$tmp/$name-merged/$file" ] ||
        { cat "$tmp/$name-merge.log" >&2; echo "slurm-local: FAIL: cicheck merge of $name failed" >&2; return 1; }
    OPENBLAS_NUM_THREADS=1 "$bin" run --quiet --no-color --no-plots --no-baseline --threads 1 \
        --out "$tmp/$name-whole" "$cf" >/dev/null 2>&1 || [ -f "$tmp/$name-whole/$file" ] ||
        { echo "slurm-local: FAIL: the unsharded run of $name failed" >&2; return 1; }
    "$py" - "$tmp/$name-merged/$file" "$tmp/$name-whole/$file" "$name" "$nn" <<'PY'
import json, sys
def strip(v):  # everything but the timing fields and the per-block figures
    # (a merge of case shards has per_block null: design.md section 18)
    if isinstance(v, dict):
        return {k: strip(x) for k, x in v.items() if k not in ("wall_seconds", "per_block")}
    if isinstance(v, list):
        return [strip(x) for x in v]
    return v
a, b = (strip(json.load(open(p))) for p in sys.argv[1:3])
if a != b:
    for k in sorted(set(a) | set(b)):
        if a.get(k) != b.get(k):
            print("slurm-local: %s: %s differs at" % (sys.argv[3], sys.argv[1]), k, file=sys.stderr)
    sys.exit(1)
print("slurm-local: %s: %s shards merged = the unsharded run" % (sys.argv[3], sys.argv[4]),
      file=sys.stderr)
PY
}

# a sample-sharded case: cases/adaln.toml without its static-fold (its
# calibration sample lives in one shard) and with the fixed-order f32
# engine (OpenBLAS sums a row in an order that depends on the rows a call
# has), 4 samples in 2 shards
"$py" - cases/adaln.toml >"$tmp/adaln-shard.toml" <<'PY'
import sys
text = open(sys.argv[1]).read().replace('name = "adaln"', 'name = "adaln-shard"')
text = text.replace('f32 = ["openblas", "fixed-order"]', 'f32 = ["fixed-order"]')
parts = text.split("[[transforms]]")
print("[[transforms]]".join([parts[0]] + [p for p in parts[1:] if 'kind = "static-fold"' not in p]))
PY
if array sweep "$case_file" "$n" sweep.json && array case "$tmp/adaln-shard.toml" 2 report.json; then
    echo "slurm-local: ok: a sweep in $n shards and a case in 2 sample shards ran as Slurm job arrays, merged = unsharded"
    exit 0
fi
echo "slurm-local: FAIL: a merged report differs from the unsharded run" >&2
exit 1
