#!/bin/sh
# SPDX-License-Identifier: MIT
# verify_big.sh DIR [BIN]: cicheck verify on whole LLaMA-shaped checkpoints
# (issue 28, whole-checkpoint verify). Writes into DIR (never the
# repository; about 6.4 GB for the first pair, deleted after each):
#   1. d 2048, 32 layers, MLP 5504, 16 heads, 4 kv heads (GQA), bf16, the
#      rewrite (gains folded, R1) with o_proj unrotated at layer 20;
#   2. d 4096, 4 layers, MLP 11008, 32 heads, 8 kv heads: a 7B's layers.
# Prints the wall time and peak RSS of each verify (GNU time), and its
# output (per layer: ce, verdict, the engine that decided it, the f64
# bound, seconds). Needs /usr/bin/python3 with numpy.
set -eu
dir=${1:?usage: verify_big.sh DIR [BIN]}
bin=${2:-build/cicheck}
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
    rc=0
    /usr/bin/time -f "$name: wall %e s, peak RSS %M KiB" "$bin" verify "$dir/$name/orig" \
        "$dir/$name/rw" --q "$dir/$name/R1.safetensors" --out "$dir/$name/r" || rc=$?
    echo "$name: exit $rc (1: a layer not equivalent, as planted)"
    rm -rf "${dir:?}/$name"
}
pair d2048x32 --d 2048 --layers 32 --heads 16 --kv-heads 4 --mlp 5504 --plant 20
pair d4096x4 --d 4096 --layers 4 --heads 32 --kv-heads 8 --mlp 11008
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
