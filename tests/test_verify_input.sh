#!/bin/sh
# SPDX-License-Identifier: MIT
# test_verify_input.sh: the block input from a file as PyTorch code saves it
# (src/model/input_shape.h), for cicheck verify and for a case's [input]
# file. A tiny LLaMA (d 16, 2 layers, 8 tokens x 2 samples) is dumped and
# written as a checkpoint by tests/make_checkpoint.py with a rewrite of it
# (gains folded, R1). Its block input is saved as hidden states [2, 8, 16]
# (a forward hook's), [16, 16] (rows) and as token ids [2, 8] and [8]:
#   - verify takes tokens and samples from the file (no --tokens); the 3-D
#     and the 2-D file split as 8 x 2 give the same layer errors;
#   - a --tokens or --samples that disagrees with the file is an error
#     naming the option, the file, the tensor and its shape;
#   - 2-D hidden states: --tokens or --samples splits the rows, neither is
#     one sample; rows that do not split are an error;
#   - token ids [batch, tokens] and [tokens] (one sample);
#   - bad files: a rank, a dtype, a width, no input tensor;
#   - cicheck run with a 3-D [input] file: the hashes of the 2-D file and of
#     the seeded input it came from; the case's tokens checked against it.
# Needs Debian's /usr/bin/python3 with numpy (exit 77 without it).
# Usage: test_verify_input.sh PATH/TO/cicheck   (CIC_SOURCE_ROOT: the source tree)
set -u
bin=$1
root=${CIC_SOURCE_ROOT:-$(cd "$(dirname "$0")/.." && pwd)}
. "$(dirname "$0")/lib.sh"
cic_need_numpy "Debian's python3 writes the checkpoints with NumPy"
cic_test_init verify_input
mk="$root/tests/make_checkpoint.py"

cat >"$tmp/seed.toml" <<'TOML'
name = "llama-input"
[model]
block = "rmsnorm"
d_model = 16
heads = 2
kv_heads = 1
rope = "half"
mlp_ratio = 2
tokens = 8
samples = 2
layers = 2
causal = true
seed = 4
[model.weights]
std = 0.1
[engines]
f32 = ["openblas"]
mpfr_prec = 64
[[transforms]]
name = "fold"
kind = "fold-rmsnorm-gamma"
TOML
expect_rc 0 "the seeded case runs and dumps" "$bin" run --quiet --no-baseline \
    --out "$tmp/r-seed" --dump "$tmp/d" "$tmp/seed.toml"
expect_rc 0 "make the original checkpoint" "$py" "$mk" "$tmp/d/original.safetensors" "$tmp/hf"
expect_rc 0 "make the rewrite (gains folded, R1)" "$py" "$mk" "$tmp/d/original.safetensors" \
    "$tmp/rw" --fold --rotate 5
expect_rc 0 "write the input files" "$py" - "$tmp" "$root/tests" <<'PY'
import sys
import numpy as np
tmp = sys.argv[1]
sys.path.insert(0, sys.argv[2])
from make_checkpoint import read_st, write_st
def write(name, tensors):
    write_st(tmp + "/" + name + ".safetensors",
             [(n, dt, a.shape, np.ascontiguousarray(a).tobytes()) for n, dt, a in tensors])
x = read_st(tmp + "/d/original.safetensors")[0]["input"].astype("<f4")   # [16, 16]
assert x.shape == (16, 16), x.shape
vocab = read_st(tmp + "/hf/model.safetensors")[0]["model.embed_tokens.weight"].shape[0]
ids = (np.arange(16) * 7 % vocab).astype("<i8")
write("h3", [("input", "F32", x.reshape(2, 8, 16))])
write("h2", [("input", "F32", x)])
write("ids2", [("input_ids", "I64", ids.reshape(2, 8))])
write("ids1", [("input_ids", "I32", ids[:8].astype("<i4"))])
write("rank4", [("input", "F32", x.reshape(1, 2, 8, 16))])
write("ids-f32", [("input_ids", "F32", ids.reshape(2, 8).astype("<f4"))])
write("wide", [("input", "F32", np.zeros((2, 8, 17), "<f4"))])
write("none", [("hidden", "F32", x)])
PY
# v OPTIONS: verify the rewrite against the original (a script: expect_rc
# runs it under timeout)
printf '#!/bin/sh\nexec "%s" verify "%s/hf" "%s/rw" --q "%s/rw/R1.safetensors" --mpfr-prec 64 "$@"\n' \
    "$bin" "$tmp" "$tmp" "$tmp" >"$tmp/v"
chmod +x "$tmp/v"
# ce FILE: the layers' ce_residual of a report.json, one line
ce() {
    "$py" -c 'import json,sys; print([l["ce_residual"] for l in json.load(open(sys.argv[1]))["verify"]["layers"]])' "$1"
}

# hidden states [batch, tokens, d]: tokens and samples from the file
expect_rc 0 "verify on [2, 8, 16] hidden states, no --tokens: exit 0" "$tmp/v" \
    --input "$tmp/h3.safetensors" --out "$tmp/v3"
has "$tmp/out" "8 tokens x 2 samples" "3-D: 8 tokens x 2 samples from the file"
has "$tmp/out" "every layer and the head equivalent" "3-D: the rewrite is equivalent"
expect_rc 0 "verify on [2, 8, 16] with --tokens 8 --samples 2 (agreeing): exit 0" "$tmp/v" \
    --input "$tmp/h3.safetensors" --tokens 8 --samples 2
expect_rc 0 "verify on [16, 16] with --tokens 8: exit 0" "$tmp/v" --input "$tmp/h2.safetensors" \
    --tokens 8 --out "$tmp/v2"
has "$tmp/out" "8 tokens x 2 samples" "2-D with --tokens 8: 8 tokens x 2 samples"
c3=$(ce "$tmp/v3/report.json")
c2=$(ce "$tmp/v2/report.json")
[ -n "$c3" ] && [ "$c3" = "$c2" ] && ok "3-D and 2-D split 8 x 2 give the same layer errors" ||
    bad "3-D $c3 vs 2-D $c2"

# a value given that disagrees: an error naming both
expect_rc 2 "--tokens 16 on [2, 8, 16]: exit 2" "$tmp/v" --input "$tmp/h3.safetensors" --tokens 16
expect_err "h3.safetensors: --tokens 16, but the file's \"input\" is [2, 8, 16] (batch, tokens, d_model): 8 tokens" \
    "--tokens 16: the message names the option, the file, the tensor, its shape"
expect_rc 2 "--samples 3 on [2, 8, 16]: exit 2" "$tmp/v" --input "$tmp/h3.safetensors" --samples 3
expect_err "--samples 3, but the file's \"input\" is [2, 8, 16] (batch, tokens, d_model): 2 samples" \
    "--samples 3: the message names both"

# 2-D: --tokens or --samples splits the rows; neither: one sample
expect_rc 0 "verify on [16, 16] with neither: exit 0" "$tmp/v" --input "$tmp/h2.safetensors"
has "$tmp/out" "16 tokens x 1 samples" "2-D with neither: one sample of 16 tokens"
expect_rc 0 "verify on [16, 16] with --samples 4: exit 0" "$tmp/v" --input "$tmp/h2.safetensors" \
    --samples 4
has "$tmp/out" "4 tokens x 4 samples" "2-D with --samples 4: 4 tokens x 4 samples"
expect_rc 2 "--tokens 5 on [16, 16]: exit 2" "$tmp/v" --input "$tmp/h2.safetensors" --tokens 5
expect_err "--tokens 5, but the file's \"input\" is [16, 16] (rows, d_model): 16 rows are not a whole number of samples" \
    "--tokens 5 on 16 rows: the message says why"
expect_rc 2 "--tokens 4 --samples 2 on [16, 16]: exit 2" "$tmp/v" --input "$tmp/h2.safetensors" \
    --tokens 4 --samples 2
expect_err "--tokens 4 and --samples 2 make 8 rows, but the file's \"input\" is [16, 16]" \
    "--tokens 4 --samples 2 on 16 rows: the message names both"

# token ids [batch, tokens] and [tokens]
expect_rc 0 "verify on token ids [2, 8]: exit 0" "$tmp/v" --input "$tmp/ids2.safetensors"
has "$tmp/out" "8 tokens x 2 samples" "ids [2, 8]: 8 tokens x 2 samples"
has "$tmp/out" "every layer and the head equivalent" "ids [2, 8]: equivalent"
expect_rc 0 "verify on token ids [8] (I32): exit 0" "$tmp/v" --input "$tmp/ids1.safetensors"
has "$tmp/out" "8 tokens x 1 samples" "ids [8]: one sample of 8 tokens"
expect_rc 2 "--tokens 4 on ids [2, 8]: exit 2" "$tmp/v" --input "$tmp/ids2.safetensors" --tokens 4
expect_err "--tokens 4, but the file's \"input_ids\" is [2, 8] (batch, tokens): 8 tokens" \
    "ids: the disagreement names the tensor"

# bad files
expect_rc 2 "\"input\" of rank 4: exit 2" "$tmp/v" --input "$tmp/rank4.safetensors"
expect_err "rank4.safetensors: tensor \"input\" is F32 [1, 2, 8, 16]; allowed: a float" \
    "rank 4: the file, tensor, shape and what is allowed"
expect_rc 2 "F32 token ids: exit 2" "$tmp/v" --input "$tmp/ids-f32.safetensors"
expect_err "tensor \"input_ids\" is F32 [2, 8]; allowed: I32 or I64 [batch, tokens] or [tokens]" \
    "F32 ids: the dtype and what is allowed"
expect_rc 2 "hidden states 17 wide on a d 16 model: exit 2" "$tmp/v" --input "$tmp/wide.safetensors"
expect_err "tensor \"input\" is [2, 8, 17] (batch, tokens, d_model): its last dimension must be the model's d_model, 16" \
    "width 17: the message names the shape and d_model"
expect_rc 2 "a file without an input tensor: exit 2" "$tmp/v" --input "$tmp/none.safetensors"
expect_err "none.safetensors: no tensor \"input\"" "no input tensor: the message names the file"
expect_rc 2 "a missing input file: exit 2" "$tmp/v" --input "$tmp/missing.safetensors"
expect_err "missing.safetensors" "a missing file: the message names it"

# cicheck run with a 3-D [input] file
for f in h3 h2; do
    sed "s|^seed = 4\$|seed = 4\ncheckpoint = \"hf\"|; /^block\|^d_model\|^heads\|^kv_heads\|^rope\|^mlp_ratio\|^layers\|^causal/d; /^\[model.weights\]/,/^std/d" \
        "$tmp/seed.toml" >"$tmp/ck-$f.toml"
    printf '[input]\nfile = "%s.safetensors"\n' "$f" >>"$tmp/ck-$f.toml"
    expect_rc 0 "run with [input] file = $f.safetensors" "$bin" run --quiet --no-baseline \
        --out "$tmp/r-$f" "$tmp/ck-$f.toml"
done
hashes() {
    "$py" -c 'import json,sys; r=json.load(open(sys.argv[1])); print(r["weights_sha256"], r["truth_sha256"])' "$1"
}
[ "$(hashes "$tmp/r-h3/report.json")" = "$(hashes "$tmp/r-h2/report.json")" ] &&
    [ "$(hashes "$tmp/r-h3/report.json")" = "$(hashes "$tmp/r-seed/report.json")" ] &&
    ok "run: the 3-D file, the 2-D file and the seeded input give the same hashes" ||
    bad "run: hashes differ: $(hashes "$tmp/r-h3/report.json") / $(hashes "$tmp/r-h2/report.json") / $(hashes "$tmp/r-seed/report.json")"
sed 's/^tokens = 8$/tokens = 4/; s/^samples = 2$/samples = 4/' "$tmp/ck-h3.toml" >"$tmp/ck-h3-t4.toml"
expect_rc 2 "run: tokens = 4 with a [2, 8, 16] file: exit 2" "$bin" run --quiet --no-baseline \
    --out "$tmp/r-t4" "$tmp/ck-h3-t4.toml"
expect_err "h3.safetensors: [model] tokens = 4, but the file's \"input\" is [2, 8, 16] (batch, tokens, d_model): 8 tokens" \
    "run: the case's tokens against the file, both named"
sed 's/h3\.safetensors/h2.safetensors/' "$tmp/ck-h3-t4.toml" >"$tmp/ck-h2-t4.toml"
expect_rc 0 "run: tokens = 4, samples = 4 split the 2-D file's 16 rows" "$bin" run --quiet \
    --no-baseline --out "$tmp/r-h2-4" "$tmp/ck-h2-t4.toml"
# a count that is not one: the option and what is allowed named
expect_rc 2 "--tokens 0: exit 2" "$bin" verify "$tmp/hf" "$tmp/hf" --tokens 0
expect_err "--tokens '0': 1 .. 65536" "--tokens named with its range"
expect_rc 2 "--seed -1: exit 2" "$bin" verify "$tmp/hf" "$tmp/hf" --seed -1
expect_err "--seed '-1': a whole number, 0 or more" "--seed named with what it takes"
cic_test_done
