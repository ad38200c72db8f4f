#!/bin/sh
# SPDX-License-Identifier: MIT
# test_edges.sh: the smallest and largest value the loader accepts for every
# numeric key, run through the whole pipeline (build, truth, transforms, f32
# engines, metrics, report), for each block kind. A run may pass (0), fail a
# gate or expectation (1: for example every output overflowing binary32) or
# be refused (2: for example the memory estimate), but never abort or be
# killed by a signal; and the loader must accept each edge (it is one).
# Usage: test_edges.sh PATH/TO/cicheck
set -u
bin=$1
. "$(dirname "$0")/lib.sh"
cic_test_init edges
n=0

# base BLOCK: a tiny case of that block with one exact transform
base() {
    case $1 in
    preln | parallel) kind=fuse-layernorm; extra='' ;;
    rmsnorm) kind=fold-rmsnorm-gamma; extra='' ;;
    dit) kind=online-unrotate; extra='q = "hadamard"' ;;
    esac
    cat <<TOML
[model]
block = "$1"
d_model = 8
heads = 2
tokens = 2
samples = 2
layers = 1
[model.weights]
std = 0.1
[engines]
f32 = ["fixed-order"]
mpfr_prec = 64
[[transforms]]
name = "t"
kind = "$kind"
$extra
[[gates]]
metric = "nonfinite"
max = 0
TOML
}

# edge BLOCK WANT DESCRIPTION SED-EXPRESSION...: the base case edited by the
# sed expressions must exit with one of WANT (digits, e.g. "01")
edge() {
    blk=$1; want=$2; what=$3; shift 3
    n=$((n + 1))
    base "$blk" >"$tmp/e.toml"
    for e in "$@"; do
        sed -i "$e" "$tmp/e.toml"
    done
    "$bin" run --quiet --no-color --no-baseline --out "$tmp/r$n" "$tmp/e.toml" >"$tmp/out" 2>"$tmp/err"
    rc=$?
    case "$want" in
    *$rc*) ok "$blk $what (exit $rc)" ;;
    *) bad "$blk $what: exit $rc, expected one of $want"; sed 's/^/    /' "$tmp/err" | head -3 ;;
    esac
    # the loader accepted it: a refusal must come from the run (memory), not
    # from a range the edge is inside of
    if grep -q "out of range\|must be" "$tmp/err"; then
        bad "$blk $what: the loader refused an edge value: $(head -n 1 "$tmp/err")"
    fi
}

for b in preln rmsnorm dit parallel; do
    edge $b 0 "d_model = 1" 's/^d_model = 8$/d_model = 1/' 's/^heads = 2$/heads = 1/'
    edge $b 2 "d_model = 65536 (memory)" 's/^d_model = 8$/d_model = 65536/' 's/^heads = 2$/heads = 1/'
    edge $b 0 "heads = 1" 's/^heads = 2$/heads = 1/'
    edge $b 0 "heads = d_model" 's/^heads = 2$/heads = 8/'
    edge $b 0 "mlp_ratio = 1/8" 's/^layers = 1$/layers = 1\nmlp_ratio = 0.125/'
    edge $b 0 "mlp_ratio = 64" 's/^layers = 1$/layers = 1\nmlp_ratio = 64/'
    edge $b 0 "tokens = 1" 's/^tokens = 2$/tokens = 1/'
    edge $b 2 "tokens = 2^20 (memory)" 's/^tokens = 2$/tokens = 1048576/' 's/^samples = 2$/samples = 1/'
    edge $b 0 "samples = 1" 's/^samples = 2$/samples = 1/'
    edge $b 0 "samples = 64" 's/^samples = 2$/samples = 64/' 's/^tokens = 2$/tokens = 1/'
    edge $b 0 "eps = smallest binary32" 's/^layers = 1$/layers = 1\neps = 1.401298464324817e-45/'
    edge $b 0 "eps = largest binary32" 's/^layers = 1$/layers = 1\neps = 3.4028234663852886e38/'
    edge $b 0 "seed = 0" 's/^layers = 1$/layers = 1\nseed = 0/'
    edge $b 0 "seed = 2^63 - 1" 's/^layers = 1$/layers = 1\nseed = 9223372036854775807/'
    edge $b 0 "std = FLT_MIN" 's/^std = 0.1$/std = 1.1754944e-38/'
    edge $b 01 "std = FLT_MAX / 9" 's/^std = 0.1$/std = 3.78e37/'
    edge $b 0 "outlier_channels = d_model" 's/^std = 0.1$/std = 0.1\noutlier_channels = 8\noutlier_scale = 3/'
    edge $b 0 "outlier_scale = FLT_MIN" 's/^std = 0.1$/std = 0.1\noutlier_channels = 2\noutlier_scale = 1.2e-38/'
    edge $b 01 "outlier_scale = FLT_MAX / 9" 's/^std = 0.1$/std = 0.1\noutlier_channels = 2\noutlier_scale = 3.78e37/'
    edge $b 0 "uniform weights" 's/^std = 0.1$/std = 0.1\ndist = "uniform"/'
    edge $b 0 "mpfr_prec = 1024" 's/^mpfr_prec = 64$/mpfr_prec = 1024/'
    edge $b 0 "gate max = inf" 's/^max = 0$/max = inf/'
    edge $b 0 "verdict f64" 's/^mpfr_prec = 64$/mpfr_prec = 64\nverdict = "f64"/'
    edge $b 0 "verdict f64-openblas, transform in f64-openblas" \
        's/^mpfr_prec = 64$/mpfr_prec = 64\nverdict = "f64-openblas"/' 's/^name = "t"$/name = "t"\nprecision = "f64-openblas"/'
    edge $b 0 "transform in f32" 's/^name = "t"$/name = "t"\nprecision = "f32"/'
    edge $b 0 "causal, residual readout" 's/^layers = 1$/layers = 1\ncausal = true\n[readout]\nkind = "residual"/'
    edge $b 0 "both f32 engines" 's/^f32 = .*$/f32 = ["openblas", "fixed-order"]/'
done
# the head edges (the parallel block's head is preln's: left out, the
# d_out = 65536 runs take seconds)
for b in preln rmsnorm; do
    edge $b 0 "d_out = 1" 's/^layers = 1$/layers = 1\nd_out = 1/'
    # 65536 head outputs at 64 bits: some cancel so deeply that the 128-bit
    # recheck differs by more than 2^(16 - prec) relatively ("not certified",
    # exit 1), although each rounds to the same binary32
    edge $b 01 "d_out = 65536" 's/^layers = 1$/layers = 1\nd_out = 65536/' 's/^samples = 2$/samples = 1/' \
        's/^d_model = 8$/d_model = 2/' 's/^heads = 2$/heads = 1/'
    edge $b 0 "d_model = 1, rotated" 's/^d_model = 8$/d_model = 1/' 's/^heads = 2$/heads = 1/' \
        's/^kind = "\(fuse-layernorm\|fold-rmsnorm-gamma\)"$/kind = "\1"\n[[transforms]]\nname = "r"\nkind = "rotate"\nafter = "t"\nq = "hadamard"/'
    edge $b 0 "rotate, random Q, seed = 2^63 - 1" \
        's/^kind = "\(fuse-layernorm\|fold-rmsnorm-gamma\)"$/kind = "\1"\n[[transforms]]\nname = "r"\nkind = "rotate"\nafter = "t"\nq = "random"\nseed = 9223372036854775807/'
done
for a in gelu gelu-tanh relu silu; do
    edge preln 0 "activation $a" "s/^layers = 1\$/layers = 1\nactivation = \"$a\"/"
done
edge rmsnorm 0 "layers = 1024" 's/^layers = 1$/layers = 1024/' 's/^d_model = 8$/d_model = 2/' \
    's/^heads = 2$/heads = 1/' 's/^tokens = 2$/tokens = 1/' 's/^samples = 2$/samples = 1/'
edge dit 0 "d_cond = 1" 's/^layers = 1$/layers = 1\nd_cond = 1/'
edge dit 0 "d_cond = 65536" 's/^layers = 1$/layers = 1\nd_cond = 65536/' 's/^samples = 2$/samples = 1/' \
    's/^d_model = 8$/d_model = 2/' 's/^heads = 2$/heads = 1/'
edge dit 0 "no final layer" 's/^layers = 1$/layers = 1\nfinal_layer = false/'
edge dit 0 "static-fold, calibration = samples - 1" \
    's/^kind = "online-unrotate"$/kind = "static-fold"\ncalibration = 1/'
edge dit 1 "static-fold expected equivalent (broken on sample 0)" \
    's/^kind = "online-unrotate"$/kind = "static-fold"\ncalibration = 1\nexpect = "equivalent"/'
edge dit 0 "per-sample-fold, mean-preserving" \
    's/^kind = "online-unrotate"$/kind = "per-sample-fold"\nstream = "mean-preserving"/'
edge dit 0 "branch-rotate, fast" 's/^kind = "online-unrotate"$/kind = "branch-rotate"\nfast = true/'
edge dit 0 "online-unrotate, identity Q" 's/^q = "hadamard"$/q = "identity"/'
edge dit 0 "transform seed = 0, 2^63 - 1" 's/^name = "t"$/name = "t"\nseed = 0/' \
    's/^\[\[gates\]\]$/[[transforms]]\nname = "u"\nkind = "online-unrotate"\nq = "random"\nseed = 9223372036854775807\n[[gates]]/'

echo "edges: $n cases"
cic_test_done
