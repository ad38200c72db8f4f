#!/bin/sh
# SPDX-License-Identifier: MIT
# verify_big.sh DIR [BIN [PAIR...]]: cicheck verify on whole LLaMA-shaped
# checkpoints (issue 28, whole-checkpoint verify). Writes into DIR (never
# the repository; each pair is deleted after its verify) the pairs named
# (default: both):
#   d2048x32: d 2048, 32 layers, MLP 5504, 16 heads, 4 kv heads (GQA),
#      bf16, the rewrite (gains folded, R1) with o_proj unrotated at layer
#      20 (about 2.7 GB a side);
#   d4096x4: a LLaMA-2-7B's layers: d 4096, 4 layers, MLP 11008, 32 heads
#      (no GQA), bf16, o_proj unrotated at layer 2 (about 1.7 GB a side).
# Prints the load average, the wall time and peak RSS of each verify (GNU
# time), and its output (per layer: ce, verdict, the engine that decided
# it, the f64 bound, seconds). Needs /usr/bin/python3 with numpy.
set -eu
dir=${1:?usage: verify_big.sh DIR [BIN [PAIR...]]}
bin=${2:-build/cicheck}
if [ $# -ge 2 ]; then shift 2; else shift $#; fi
pairs=${*:-d2048x32 d4096x4}
py=/usr/bin/python3
here=$(dirname "$0")
mkdir -p "$dir"
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
df -h "$dir" | tail -1
pair() { # NAME then make_ckpt_pair options
    name=$1
    shift
    rm -rf "${dir:?}/$name"
    "$py" "$here/make_ckpt_pair.py" "$dir/$name" "$@"
    du -sh "$dir/$name/orig" "$dir/$name/rw"
    echo "$name: load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
    rc=0
    /usr/bin/time -f "$name: wall %e s, peak RSS %M KiB" "$bin" verify "$dir/$name/orig" \
        "$dir/$name/rw" --q "$dir/$name/R1.safetensors" --out "$dir/$name/r" || rc=$?
    echo "$name: exit $rc (1: a layer not equivalent, as planted)"
    echo "$name: load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
    rm -rf "${dir:?}/$name"
}
for p in $pairs; do
    case $p in
    d2048x32) pair d2048x32 --d 2048 --layers 32 --heads 16 --kv-heads 4 --mlp 5504 --plant 20 ;;
    d4096x4) pair d4096x4 --d 4096 --layers 4 --heads 32 --kv-heads 32 --mlp 11008 --plant 2 ;;
    *)
        echo "verify_big.sh: no pair '$p' (d2048x32, d4096x4)" >&2
        exit 2
        ;;
    esac
done
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
