#!/bin/sh
# SPDX-License-Identifier: MIT
# test_checkpoint.sh: [model] checkpoint = "DIR", a Hugging Face LLaMA
# folder, against the seeded model it was written from. A tiny rmsnorm case
# (d 64, 4 heads, 2 key/value heads, RoPE, 3 layers) is dumped; NumPy
# (tests/make_checkpoint.py) writes its weights as a checkpoint, F32 in one
# file, sharded with an index, with tied embeddings, as BF16 and F16, and
# layers 1-2 alone. Loaded, the F32 checkpoint has the seeded model's
# weight hash and truth hash; the BF16 and F16 ones have the hashes of an
# F32 checkpoint holding the same rounded values; "1-2" equals a checkpoint
# of those two layers. Broken checkpoints exit 2 naming the file, tensor
# and what is wrong; a FIFO or a link to /dev/zero as config.json, the
# index or a shard is refused at once. Needs Debian's /usr/bin/python3 with
# numpy (exit 77 without it).
# Usage: test_checkpoint.sh PATH/TO/cicheck   (CIC_SOURCE_ROOT: the source tree)
set -u
bin=$1
root=${CIC_SOURCE_ROOT:-$(cd "$(dirname "$0")/.." && pwd)}
. "$(dirname "$0")/lib.sh"
cic_need_numpy "Debian's python3 writes the checkpoints with NumPy"
cic_test_init checkpoint
mk="$root/tests/make_checkpoint.py"

cat >"$tmp/engines.toml" <<'TOML'
[engines]
f32 = ["openblas"]
mpfr_prec = 64
[[transforms]]
name = "fold"
kind = "fold-rmsnorm-gamma"
TOML
{
    cat <<'TOML'
name = "llama-tiny"
[model]
block = "rmsnorm"
d_model = 64
heads = 4
kv_heads = 2
rope = "half"
rope_theta = 10000.0
mlp_ratio = 2
tokens = 8
samples = 2
layers = 3
causal = true
seed = 21
[model.weights]
std = 0.1
TOML
    cat "$tmp/engines.toml"
} >"$tmp/seed.toml"
# ckcase NAME DIR [MODEL-LINES]: a case reading checkpoint DIR
ckcase() {
    {
        printf 'name = "llama-tiny"\n[model]\ncheckpoint = "%s"\ntokens = 8\nsamples = 2\nseed = 21\n' "$2"
        [ $# -gt 2 ] && printf '%s\n' "$3"
        cat "$tmp/engines.toml"
    } >"$tmp/$1.toml"
}
# hashes REPORT: its weight and truth hashes on one line
hashes() {
    "$py" -c 'import json,sys; r=json.load(open(sys.argv[1])); print(r["weights_sha256"], r["truth_sha256"])' "$1"
}
# same_hashes DESC A B: two reports with the same weights and truth
same_hashes() {
    if [ "$(hashes "$2")" = "$(hashes "$3")" ]; then ok "$1"; else bad "$1: $(hashes "$2") vs $(hashes "$3")"; fi
}

expect_rc 0 "the seeded case runs and dumps" "$bin" run --quiet --no-baseline \
    --out "$tmp/r-seed" --dump "$tmp/d-seed" "$tmp/seed.toml"
orig="$tmp/d-seed/original.safetensors"
for v in f32:"" shard:"--shards 3" tied:"--tied"; do
    n=${v%%:*}
    # shellcheck disable=SC2086 # the options are words
    expect_rc 0 "make_checkpoint $n" "$py" "$mk" "$orig" "$tmp/hf-$n" ${v#*:}
    ckcase "ck-$n" "hf-$n"
    expect_rc 0 "run on the $n checkpoint" "$bin" run --quiet --no-baseline \
        --out "$tmp/r-$n" "$tmp/ck-$n.toml"
    same_hashes "the $n checkpoint has the seeded weights and truth" "$tmp/r-seed/report.json" \
        "$tmp/r-$n/report.json"
done
has "$tmp/hf-shard/model.safetensors.index.json" "model-00003-of-00003.safetensors" \
    "the sharded checkpoint has three shards"
has "$tmp/r-f32/report.json" '"verdict": "equivalent"' "fold on the checkpoint is judged"

# Qwen2: biases on q, k and v (qkv_bias = true from a seed, model_type
# qwen2 from a checkpoint, its sliding_window off without use_sliding_window)
sed 's/^kv_heads = 2$/kv_heads = 2\nqkv_bias = true/' "$tmp/seed.toml" >"$tmp/seed-qwen.toml"
expect_rc 0 "the seeded qkv_bias case runs and dumps" "$bin" run --quiet --no-baseline \
    --out "$tmp/r-qwen-seed" --dump "$tmp/d-qwen" "$tmp/seed-qwen.toml"
expect_rc 0 "make_checkpoint qwen2" "$py" "$mk" "$tmp/d-qwen/original.safetensors" "$tmp/hf-qwen"
has "$tmp/hf-qwen/config.json" '"model_type": "qwen2"' "the biased dump is written as Qwen2"
ckcase ck-qwen hf-qwen
expect_rc 0 "run on the qwen2 checkpoint" "$bin" run --quiet --no-baseline \
    --out "$tmp/r-qwen" "$tmp/ck-qwen.toml"
same_hashes "the qwen2 checkpoint has the seeded weights and truth" \
    "$tmp/r-qwen-seed/report.json" "$tmp/r-qwen/report.json"
if [ "$(hashes "$tmp/r-qwen/report.json")" != "$(hashes "$tmp/r-seed/report.json")" ]; then
    ok "the q, k, v biases change the weights and the truth"
else
    bad "qkv_bias changed nothing"
fi
has "$tmp/r-qwen/report.json" '"verdict": "equivalent"' "fold with biases on q, k, v is judged"
expect_rc 0 "make a qwen2 checkpoint without a k bias" "$py" "$mk" \
    "$tmp/d-qwen/original.safetensors" "$tmp/hf-qwen-nob" --drop model.layers.0.self_attn.k_proj.bias
ckcase ck-qwen-nob hf-qwen-nob
expect_rc 2 "a missing Qwen2 bias: exit 2" "$bin" run --quiet --no-baseline \
    --out "$tmp/r-qwen-nob" "$tmp/ck-qwen-nob.toml"
expect_err "tensor 'model.layers.0.self_attn.k_proj.bias' missing (expected [32])" \
    "a missing Qwen2 bias: the message names it and its shape"
expect_rc 0 "make a llama checkpoint with q, k, v biases" "$py" "$mk" \
    "$tmp/d-qwen/original.safetensors" "$tmp/hf-qwen-llama" --set 'model_type="llama"' \
    --set sliding_window=4096
ckcase ck-qwen-llama hf-qwen-llama
expect_rc 2 "biases in a llama checkpoint: exit 2" "$bin" run --quiet --no-baseline \
    --out "$tmp/r-qwen-llama" "$tmp/ck-qwen-llama.toml"
expect_err "tensor 'model.layers.0.self_attn.q_proj.bias': biases are not modelled here (llama and mistral have none on q, k and v; Qwen2 does" \
    "biases in a llama checkpoint: the message says so"

# storage dtypes: BF16 and F16 as stored equal F32 holding the same values
for dt in bf16 f16; do
    expect_rc 0 "make_checkpoint $dt" "$py" "$mk" "$orig" "$tmp/hf-$dt" --dtype "$dt"
    expect_rc 0 "make_checkpoint $dt values in F32" "$py" "$mk" "$orig" "$tmp/hf-$dt-32" \
        --dtype "$dt" --round-only
    ckcase "ck-$dt" "hf-$dt"
    ckcase "ck-$dt-32" "hf-$dt-32"
    expect_rc 0 "run on the $dt checkpoint" "$bin" run --quiet --no-baseline \
        --out "$tmp/r-$dt" "$tmp/ck-$dt.toml"
    expect_rc 0 "run on its F32 twin" "$bin" run --quiet --no-baseline \
        --out "$tmp/r-$dt-32" "$tmp/ck-$dt-32.toml"
    same_hashes "$dt storage = F32 storage of the same values" "$tmp/r-$dt/report.json" \
        "$tmp/r-$dt-32/report.json"
done
if [ "$(hashes "$tmp/r-bf16/report.json")" != "$(hashes "$tmp/r-seed/report.json")" ]; then
    ok "bf16 rounding changed the weights (the comparison above can fail)"
else
    bad "bf16 rounding left every weight as it was"
fi

# layers = "1-2" of three against a checkpoint of those two layers
expect_rc 0 "make_checkpoint of layers 1-2" "$py" "$mk" "$orig" "$tmp/hf-12" --layers 1-2
ckcase ck-sel hf-f32 'layers = "1-2"'
ckcase ck-12 hf-12
expect_rc 0 "run layers 1-2 of the checkpoint" "$bin" run --quiet --no-baseline \
    --out "$tmp/r-sel" "$tmp/ck-sel.toml"
expect_rc 0 "run the two-layer checkpoint" "$bin" run --quiet --no-baseline \
    --out "$tmp/r-12" "$tmp/ck-12.toml"
same_hashes "layers = \"1-2\" reads layers 1 and 2" "$tmp/r-sel/report.json" \
    "$tmp/r-12/report.json"

# broken checkpoints and cases: exit 2, the file, the tensor, what is wrong
# broken NAME WHAT EXPECTED-TEXT MAKE-OPTIONS...
broken() {
    bk_n=$1 bk_what=$2 bk_want=$3
    shift 3
    expect_rc 0 "make_checkpoint ($bk_what)" "$py" "$mk" "$orig" "$tmp/hf-$bk_n" "$@"
    ckcase "ck-$bk_n" "hf-$bk_n"
    expect_rc 2 "$bk_what: exit 2" "$bin" run --quiet --no-baseline --out "$tmp/r-$bk_n" \
        "$tmp/ck-$bk_n.toml"
    expect_err "$bk_want" "$bk_what: the message says so"
}
broken nan "a NaN weight" "tensor 'model.layers.1.mlp.up_proj.weight': value nan at index 7 (flat)" \
    --edit model.layers.1.mlp.up_proj.weight:7:nan
broken inf "an Inf weight" "tensor 'model.norm.weight': value inf at index 3 (flat)" \
    --edit model.norm.weight:3:inf
broken miss "a missing tensor" "tensor 'model.layers.2.self_attn.k_proj.weight' missing (expected [32, 64])" \
    --drop model.layers.2.self_attn.k_proj.weight
broken size "config and tensors disagree" "tensor 'model.layers.0.mlp.gate_proj.weight' has shape [128, 64], expected [96, 64]" \
    --set intermediate_size=96
broken gpt2 "another family" "model_type 'gpt2' is not a family cicheck reads (llama, mistral, qwen2, opt; or a timm ViT" \
    --set 'model_type="gpt2"'
broken scale "scaled RoPE" "'rope_scaling' is set: scaled RoPE is not modelled" \
    --set 'rope_scaling={"type": "linear", "factor": 2.0}'
# config.json's numbers as the engines use them (each named with its file)
broken eps-inf "rms_norm_eps 1e39 (Inf in binary32; every error was 0, a PASS)" \
    "hf-eps-inf/config.json: 'rms_norm_eps' = 1e+39 is Inf in binary32 (every engine uses eps as a binary32 value); it must be 1.4013e-45 .. 3.40282e+38" \
    --set rms_norm_eps=1e39
broken eps-zero "rms_norm_eps 1e-50 (0 in binary32)" \
    "hf-eps-zero/config.json: 'rms_norm_eps' = 1e-50 is 0 in binary32" --set rms_norm_eps=1e-50
broken theta-tiny "rope_theta 1e-300 (ran out of memory)" \
    "hf-theta-tiny/config.json: 'rope_theta' = 1e-300 is 0 in binary32 (the float32 engine takes it as a binary32 value); it must be 1.17549e-38 .. 3.40282e+38" \
    --set rope_theta=1e-300
broken theta-inf "rope_theta 1e39" "'rope_theta' = 1e+39 is Inf in binary32" --set rope_theta=1e39
broken eps-str "rms_norm_eps as a string" "'rms_norm_eps' is a string; a number" \
    --set 'rms_norm_eps="1e-5"'
broken partial "partial_rotary_factor 0.5" \
    "'partial_rotary_factor' = 0.5: RoPE on part of each head is not modelled" \
    --set partial_rotary_factor=0.5
broken tie-str "tie_word_embeddings as a string (read as false)" \
    "'tie_word_embeddings' is a string; true or false expected" --set 'tie_word_embeddings="true"'
broken wide "hidden_size past int" "'hidden_size' = 4294967360 is outside 1 .. 65536" \
    --set hidden_size=4294967360
# an odd head size (12 / 4 heads) with RoPE: the seeded model has no RoPE,
# its dump is relabelled rope = half for make_checkpoint (same length)
sed -e 's/^d_model = 64$/d_model = 12/' -e 's/^kv_heads = 2$/kv_heads = 4/' \
    -e 's/^rope = "half"$/rope = "none"/' "$tmp/seed.toml" >"$tmp/odd.toml"
expect_rc 0 "a seeded model of head size 3 dumps" "$bin" run --quiet --no-baseline \
    --out "$tmp/r-odd" --dump "$tmp/d-odd" "$tmp/odd.toml"
"$py" -c 'import sys; b = open(sys.argv[1], "rb").read()
open(sys.argv[2], "wb").write(b.replace(b"\"rope\":\"none\"", b"\"rope\":\"half\"", 1))' \
    "$tmp/d-odd/original.safetensors" "$tmp/odd-half.safetensors"
orig_even=$orig orig=$tmp/odd-half.safetensors
broken odd-head "RoPE on heads of 3 (out of memory)" \
    "hf-odd-head/config.json: hidden_size 12 / num_attention_heads 4 = 3: RoPE (rotate_half) needs an even head size"
orig=$orig_even
expect_rc 2 "verify on a config.json with rms_norm_eps 1e39: exit 2" "$bin" verify \
    "$tmp/hf-f32" "$tmp/hf-eps-inf" --tokens 8
expect_err "hf-eps-inf/config.json: 'rms_norm_eps' = 1e+39 is Inf in binary32" \
    "verify names the file and the key"
ckcase ck-layers hf-f32 'layers = 4'
expect_rc 2 "four layers of three: exit 2" "$bin" run --quiet --no-baseline \
    --out "$tmp/r-layers" "$tmp/ck-layers.toml"
expect_err "layers 0 .. 3 asked, the checkpoint has 3 (num_hidden_layers; 0 .. 2)" \
    "four layers of three: the message says so"
# layer ranges past the checkpoint or past int: refused naming the range
# and the checkpoint's layers (4294967297 ran layer 1; 2147483647 overflowed)
for v in "4294967297-4294967297:layers = \"4294967297-4294967297\": expected N (the first N" \
    "2147483647-2147483647:layers 2147483647 .. 2147483647 asked, the checkpoint has 3" \
    "2-3:layers 2 .. 3 asked, the checkpoint has 3 (num_hidden_layers; 0 .. 2)" \
    "+1-2:layers = \"+1-2\": expected N (the first N layers) or"; do
    ckcase ck-range hf-f32 "layers = \"${v%%:*}\""
    expect_rc 2 "layers = \"${v%%:*}\": exit 2" "$bin" run --quiet --no-baseline \
        --out "$tmp/r-range" "$tmp/ck-range.toml"
    expect_err "ck-range.toml:7:10: ${v#*:}" "layers = \"${v%%:*}\": the message says so"
done
expect_rc 2 "verify --layers 2147483647-2147483647: exit 2" "$bin" verify "$tmp/hf-f32" \
    "$tmp/hf-f32" --layers 2147483647-2147483647 --tokens 8
expect_err "--layers '2147483647-2147483647': N (1 .. 1024) or a-b" \
    "verify --layers near INT_MAX: refused as it is parsed, the option named"
ckcase ck-key hf-f32 'd_model = 64'
expect_rc 2 "a size key beside checkpoint: exit 2" "$bin" run --quiet --no-baseline \
    --out "$tmp/r-key" "$tmp/ck-key.toml"
expect_err "'d_model' comes from the checkpoint's config.json; remove it" \
    "a size key beside checkpoint: the message says so"
ckcase ck-none no-such-folder
expect_rc 2 "a missing folder: exit 2" "$bin" run --quiet --no-baseline \
    --out "$tmp/r-none" "$tmp/ck-none.toml"
expect_err "no-such-folder: no such checkpoint folder" "a missing folder: it is named"
# readers: a FIFO or a link to /dev/zero as config.json, the index or a
# shard is refused at once, naming it (20 s would be a hang)
CIC_TEST_TIMEOUT=20
for v in cfg-fifo:hf-f32:config.json cfg-zero:hf-f32:config.json \
    idx-fifo:hf-shard:model.safetensors.index.json \
    idx-zero:hf-shard:model.safetensors.index.json \
    st-fifo:hf-shard:model-00002-of-00003.safetensors; do
    n=${v%%:*} rest=${v#*:}; src=${rest%%:*} f=${rest#*:}
    cp -r "$tmp/$src" "$tmp/hf-$n" && rm "$tmp/hf-$n/$f"
    case $n in
    *fifo) mkfifo "$tmp/hf-$n/$f"; kind="a FIFO" ;;
    *) ln -s /dev/zero "$tmp/hf-$n/$f"; kind="a character device" ;;
    esac
    ckcase "ck-$n" "hf-$n"
    expect_rc 2 "$kind as $f: exit 2 at once" "$bin" run --quiet --no-baseline \
        --out "$tmp/r-$n" "$tmp/ck-$n.toml"
    expect_err "hf-$n/$f: is $kind, not a regular file" "$kind as $f: the message names it"
done
expect_rc 2 "verify with a FIFO as config.json: exit 2 at once" "$bin" verify "$tmp/hf-f32" \
    "$tmp/hf-cfg-fifo" --tokens 8
expect_err "hf-cfg-fifo/config.json: is a FIFO" "verify names the FIFO"
CIC_TEST_TIMEOUT=600
# [input]: seeded token ids through embed_tokens; a file of the same ids
# (input_ids) and one of the same hidden states (input) give the same
# weights-and-input hash and truth; a file of the seeded case's own input
# gives the seeded truth
ckcase ck-tok hf-f32 '[input]
kind = "tokens"'
expect_rc 0 "run with kind = tokens" "$bin" run --quiet --no-baseline --out "$tmp/r-tok" \
    --dump "$tmp/d-tok" "$tmp/ck-tok.toml"
expect_rc 0 "write the token ids and hidden states as files" "$py" - "$tmp" "$root/tests" <<'PY'
import sys
import numpy as np
tmp = sys.argv[1]
sys.path.insert(0, sys.argv[2])
from make_checkpoint import read_st, write_st
def write(path, name, dt, a):
    write_st(path, [(name, dt, a.shape, a.tobytes())])
x = read_st(tmp + "/d-tok/original.safetensors")[0]["input"]
emb = read_st(tmp + "/hf-f32/model.safetensors")[0]["model.embed_tokens.weight"]
ids = np.array([int(np.where((emb == r).all(1))[0][0]) for r in x], dtype="<i8")
write(tmp + "/ids.safetensors", "input_ids", "I64", ids.reshape(2, 8))
write(tmp + "/hidden.safetensors", "input", "F32", np.ascontiguousarray(x, dtype="<f4"))
bad = ids.copy(); bad[3] = 64
write(tmp + "/ids-bad.safetensors", "input_ids", "I64", bad.reshape(2, 8))
seed_x = read_st(tmp + "/d-seed/original.safetensors")[0]["input"]
write(tmp + "/seed-input.safetensors", "input", "F32", np.ascontiguousarray(seed_x, dtype="<f4"))
PY
for f in ids hidden; do
    ckcase "ck-$f" hf-f32 "[input]
file = \"$f.safetensors\""
    expect_rc 0 "run with [input] file = $f.safetensors" "$bin" run --quiet --no-baseline \
        --out "$tmp/r-$f" "$tmp/ck-$f.toml"
    same_hashes "[input] file $f = kind tokens" "$tmp/r-tok/report.json" "$tmp/r-$f/report.json"
done
sed 's/^seed = 21$/seed = 21\n[input]\nfile = "seed-input.safetensors"/' "$tmp/seed.toml" \
    >"$tmp/seed-file.toml"
sed -i '/^\[model.weights\]/,/^std/{/^\[model.weights\]/d;/^std/d}' "$tmp/seed-file.toml"
printf '[model.weights]\nstd = 0.1\n' >>"$tmp/seed-file.toml"
expect_rc 0 "a seeded case with its own input as a file" "$bin" run --quiet --no-baseline \
    --out "$tmp/r-seed-file" "$tmp/seed-file.toml"
same_hashes "[input] file of the seeded input = the seeded run" "$tmp/r-seed/report.json" \
    "$tmp/r-seed-file/report.json"
ckcase ck-ids-bad hf-f32 '[input]
file = "ids-bad.safetensors"'
expect_rc 2 "a token id outside the vocabulary: exit 2" "$bin" run --quiet --no-baseline \
    --out "$tmp/r-ids-bad" "$tmp/ck-ids-bad.toml"
expect_err "token id 64 at index 3 is outside the vocabulary 0 .. 63" \
    "the id and its index are named"
sed 's/^seed = 21$/seed = 21\n[input]\nkind = "tokens"/' "$tmp/seed.toml" >"$tmp/seed-tok.toml"
expect_rc 2 "kind = tokens without a checkpoint: exit 2" "$bin" run --quiet --no-baseline \
    --out "$tmp/r-seed-tok" "$tmp/seed-tok.toml"
expect_err "kind = \"tokens\" needs [model] checkpoint" "without a checkpoint: the message says so"

# OPT (OPTForCausalLM names) from a pre-LN dump with the residual readout:
# q, k, v split out of the fused qkv; the same weights and truth. Then
# seeded tokens through OPT's embeddings plus its learned positions (offset
# 2), with the head (tied, no bias); post-LN OPT is refused
cat >"$tmp/opt-seed.toml" <<'TOML'
name = "opt-tiny"
[model]
block = "preln"
d_model = 32
heads = 4
mlp_ratio = 4
tokens = 8
samples = 2
layers = 2
causal = true
activation = "relu"
eps = 1e-5
seed = 3
[model.weights]
std = 0.1
[readout]
kind = "residual"
TOML
sed -n '/^\[engines\]/,$p' "$tmp/engines.toml" | sed 's/fold-rmsnorm-gamma/fuse-layernorm/' \
    >>"$tmp/opt-seed.toml"
expect_rc 0 "the seeded pre-LN case runs and dumps" "$bin" run --quiet --no-baseline \
    --out "$tmp/r-opt-seed" --dump "$tmp/d-opt" "$tmp/opt-seed.toml"
expect_rc 0 "make an OPT checkpoint" "$py" "$mk" "$tmp/d-opt/original.safetensors" "$tmp/hf-opt"
has "$tmp/hf-opt/config.json" '"model_type": "opt"' "the OPT config"
{
    printf 'name = "opt-tiny"\n[model]\ncheckpoint = "hf-opt"\ntokens = 8\nsamples = 2\nseed = 3\n'
    printf '[readout]\nkind = "residual"\n'
    sed -n '/^\[engines\]/,$p' "$tmp/opt-seed.toml"
} >"$tmp/ck-opt.toml"
expect_rc 0 "run on the OPT checkpoint" "$bin" run --quiet --no-baseline --out "$tmp/r-opt" \
    "$tmp/ck-opt.toml"
same_hashes "the OPT checkpoint has the seeded pre-LN weights and truth" \
    "$tmp/r-opt-seed/report.json" "$tmp/r-opt/report.json"
{
    printf 'name = "opt-tiny"\n[model]\ncheckpoint = "hf-opt"\ntokens = 8\nsamples = 2\nseed = 3\n'
    printf '[input]\nkind = "tokens"\n'
    sed -n '/^\[engines\]/,$p' "$tmp/opt-seed.toml"
} >"$tmp/ck-opt-tok.toml"
expect_rc 0 "OPT with token ids and the head" "$bin" run --quiet --no-baseline \
    --out "$tmp/r-opt-tok" --dump "$tmp/d-opt-tok" "$tmp/ck-opt-tok.toml"
has "$tmp/r-opt-tok/report.json" '"verdict": "equivalent"' "fuse on OPT is judged"
expect_rc 0 "OPT's input rows are embed_tokens[id] + embed_positions[t + 2]" "$py" - "$tmp" \
    "$root/tests" <<'PY'
import sys
import numpy as np
tmp = sys.argv[1]
sys.path.insert(0, sys.argv[2])
from make_checkpoint import read_st
x = read_st(tmp + "/d-opt-tok/original.safetensors")[0]["input"]
ck = read_st(tmp + "/hf-opt/model.safetensors")[0]
emb, pos = ck["model.decoder.embed_tokens.weight"], ck["model.decoder.embed_positions.weight"]
for r, row in enumerate(x):
    t = r % 8
    hits = [i for i in range(emb.shape[0]) if np.array_equal(emb[i] + pos[t + 2], row)]
    assert hits, f"row {r} is no embedding plus position {t + 2}"
PY
# verify on OPT: a QuaRot-style rewrite (each LayerNorm fused into its
# readers and run as RMSNorm on a centred stream, an untied head with the
# final LayerNorm's bias, R1), then two mistakes planted at layer 1 of 2
vo="--tokens 8 --mpfr-prec 64"
expect_rc 0 "make a fused and rotated OPT" "$py" "$mk" "$tmp/d-opt/original.safetensors" \
    "$tmp/rw-opt" --fold --rotate 3
# shellcheck disable=SC2086
expect_rc 0 "verify the OPT rewrite (--layernorm fused): exit 0" "$bin" verify "$tmp/hf-opt" \
    "$tmp/rw-opt" --q "$tmp/rw-opt/R1.safetensors" --layernorm fused $vo --out "$tmp/v-opt"
has "$tmp/out" "every layer and the head equivalent" "the OPT rewrite is equivalent"
has "$tmp/out" "compared without its row mean" "the OPT check says the mean is removed"
has "$tmp/v-opt/report.json" '"layernorm": "fused"' "report.json: layernorm fused"
# shellcheck disable=SC2086
expect_rc 0 "verify the OPT rewrite on token ids: exit 0" "$bin" verify "$tmp/hf-opt" \
    "$tmp/rw-opt" --q "$tmp/rw-opt/R1.safetensors" --layernorm fused $vo --input-kind tokens
# shellcheck disable=SC2086
expect_rc 1 "verify the OPT rewrite as LayerNorm: exit 1" "$bin" verify "$tmp/hf-opt" \
    "$tmp/rw-opt" --q "$tmp/rw-opt/R1.safetensors" $vo
has "$tmp/out" "first layer not equivalent: 0 (broken)" "LayerNorm on the rewrite breaks layer 0"
for mistake in mean-kept writer-unrotated; do
    expect_rc 0 "make an OPT rewrite with $mistake at layer 1" "$py" "$mk" \
        "$tmp/d-opt/original.safetensors" "$tmp/rw-opt-$mistake" --fold --rotate 3 \
        --mistake "$mistake:1"
    # shellcheck disable=SC2086
    expect_rc 1 "verify OPT $mistake: exit 1" "$bin" verify "$tmp/hf-opt" "$tmp/rw-opt-$mistake" \
        --q "$tmp/rw-opt-$mistake/R1.safetensors" --layernorm fused $vo
    has "$tmp/out" "first layer not equivalent: 1 (broken)" "OPT $mistake: layer 1 named broken"
    if grep -qE "^ +0 +[0-9.e+-]+ +equivalent$" "$tmp/out"; then ok "OPT $mistake: layer 0 equivalent"
    else bad "OPT $mistake: layer 0 is not equivalent"; fi
done
expect_rc 2 "--layernorm fused on a llama checkpoint: exit 2" "$bin" verify "$tmp/hf-f32" \
    "$tmp/hf-f32" --layernorm fused --tokens 8
expect_err "--layernorm fused is for OPT's LayerNorm" "--layernorm fused on llama: the message says so"
expect_rc 2 "--layernorm with another value: exit 2" "$bin" verify "$tmp/hf-opt" "$tmp/rw-opt" \
    --layernorm rms
expect_err "--layernorm 'rms': allowed fused, kept" "--layernorm rms: the message says so"
expect_rc 0 "make a post-LN OPT" "$py" "$mk" "$tmp/d-opt/original.safetensors" "$tmp/hf-opt-post" \
    --set do_layer_norm_before=false
sed 's/hf-opt/hf-opt-post/' "$tmp/ck-opt.toml" >"$tmp/ck-opt-post.toml"
expect_rc 2 "post-LN OPT: exit 2" "$bin" run --quiet --no-baseline --out "$tmp/r-opt-post" \
    "$tmp/ck-opt-post.toml"
expect_err "do_layer_norm_before is false (post-LN, as OPT-350m): not modelled" \
    "post-LN OPT: the message says so"

# a timm ViT (the preln block's own names, bidirectional, GELU, eps 1e-6;
# heads from config.json), against the seeded pre-LN model it came from
sed -e 's/^name = "opt-tiny"/name = "vit-tiny"/' -e 's/^causal = true/causal = false/' \
    -e 's/^activation = "relu"/activation = "gelu"/' -e 's/^eps = 1e-5/eps = 1e-6/' \
    -e '/^\[readout\]/d' -e '/^kind = "residual"/d' "$tmp/opt-seed.toml" >"$tmp/vit-seed.toml"
expect_rc 0 "the seeded ViT-like case runs and dumps" "$bin" run --quiet --no-baseline \
    --out "$tmp/r-vit-seed" --dump "$tmp/d-vit" "$tmp/vit-seed.toml"
expect_rc 0 "make a timm checkpoint" "$py" "$mk" "$tmp/d-vit/original.safetensors" \
    "$tmp/hf-vit" --timm
{
    printf 'name = "vit-tiny"\n[model]\ncheckpoint = "hf-vit"\ntokens = 8\nsamples = 2\nseed = 3\n'
    sed -n '/^\[engines\]/,$p' "$tmp/vit-seed.toml"
} >"$tmp/ck-vit.toml"
expect_rc 0 "run on the timm checkpoint" "$bin" run --quiet --no-baseline --out "$tmp/r-vit" \
    "$tmp/ck-vit.toml"
same_hashes "the timm checkpoint has the seeded weights and truth" \
    "$tmp/r-vit-seed/report.json" "$tmp/r-vit/report.json"
has "$tmp/r-vit/report.json" '"causal": false' "a ViT attends both ways"
sed 's/^seed = 3$/seed = 3\n[input]\nkind = "tokens"/' "$tmp/ck-vit.toml" >"$tmp/ck-vit-tok.toml"
expect_rc 2 "token ids on a ViT: exit 2" "$bin" run --quiet --no-baseline --out "$tmp/r-vit-tok" \
    "$tmp/ck-vit-tok.toml"
expect_err "a timm ViT has no token embedding" "token ids on a ViT: the message says so"

# DiT (the reference code's names, the condition seeded): with a config.json
# giving num_heads, and without one at DiT-S's width (6 heads known)
for v in 64:4:cfg 384:6:none; do
    w=${v%%:*} h=${v#*:}; h=${h%%:*}; c=${v##*:}
    cat >"$tmp/dit-$w.toml" <<TOML
name = "dit-$w"
[model]
block = "dit"
d_model = $w
heads = $h
mlp_ratio = 4
tokens = 2
samples = 1
layers = 1
d_cond = $w
d_out = 16
seed = 5
[engines]
f32 = ["openblas"]
mpfr_prec = 64
[[transforms]]
name = "online"
kind = "online-unrotate"
q = "hadamard"
fast = true
TOML
    expect_rc 0 "the seeded DiT case (d $w) runs and dumps" "$bin" run --quiet --no-baseline \
        --out "$tmp/r-dit-$w-seed" --dump "$tmp/d-dit-$w" "$tmp/dit-$w.toml"
    if [ "$c" = none ]; then nc=--no-config; else nc=; fi
    # shellcheck disable=SC2086
    expect_rc 0 "make a DiT checkpoint (d $w, config: $c)" "$py" "$mk" \
        "$tmp/d-dit-$w/original.safetensors" "$tmp/hf-dit-$w" $nc
    {
        printf 'name = "dit-%s"\n[model]\ncheckpoint = "hf-dit-%s"\ntokens = 2\nsamples = 1\nseed = 5\n' "$w" "$w"
        sed -n '/^\[engines\]/,$p' "$tmp/dit-$w.toml"
    } >"$tmp/ck-dit-$w.toml"
    expect_rc 0 "run on the DiT checkpoint (d $w)" "$bin" run --quiet --no-baseline \
        --out "$tmp/r-dit-$w" "$tmp/ck-dit-$w.toml"
    same_hashes "the DiT checkpoint (d $w) has the seeded weights and truth" \
        "$tmp/r-dit-$w-seed/report.json" "$tmp/r-dit-$w/report.json"
done
[ ! -e "$tmp/hf-dit-384/config.json" ] && ok "the DiT-S checkpoint has no config.json" ||
    bad "the DiT-S checkpoint has a config.json"
expect_rc 0 "make a DiT checkpoint of d 64 without config.json" "$py" "$mk" \
    "$tmp/d-dit-64/original.safetensors" "$tmp/hf-dit-64n" --no-config
sed 's/hf-dit-64/hf-dit-64n/' "$tmp/ck-dit-64.toml" >"$tmp/ck-dit-64n.toml"
expect_rc 2 "a DiT of unknown width without num_heads: exit 2" "$bin" run --quiet --no-baseline \
    --out "$tmp/r-dit-64n" "$tmp/ck-dit-64n.toml"
expect_err "DiT width 64: give num_heads in config.json" "unknown width: the message says so"

# cicheck verify: a rewrite made in NumPy (gains folded, R1 random, R4
# fused into down_proj with the online Hadamard at run time) against the
# original, then three mistakes planted at layer 2 of 3
vopts="--online down_proj:hadamard --tokens 8 --mpfr-prec 64"
expect_rc 0 "make the rewritten checkpoint" "$py" "$mk" "$orig" "$tmp/rw" --fold --rotate 5 --r4
# shellcheck disable=SC2086 # the options are words
expect_rc 0 "verify a correct rewrite: exit 0" "$bin" verify "$tmp/hf-f32" "$tmp/rw" \
    --q "$tmp/rw/R1.safetensors" $vopts --out "$tmp/v-ok"
has "$tmp/out" "every layer and the head equivalent" "the correct rewrite is equivalent"
for l in 0 1 2; do
    if grep -qE "^ +$l +[0-9.e+-]+ +equivalent$" "$tmp/out"; then ok "layer $l equivalent"
    else bad "layer $l not equivalent in the correct rewrite"; fi
done
has "$tmp/v-ok/report.json" '"first_layer_not_equivalent": null' "report.json: no broken layer"
for mistake in writer-unrotated gain-kept r4-missing; do
    expect_rc 0 "make a rewrite with $mistake at layer 2" "$py" "$mk" "$orig" "$tmp/rw-$mistake" --fold \
        --rotate 5 --r4 --mistake "$mistake:2"
    # shellcheck disable=SC2086
    expect_rc 1 "verify $mistake: exit 1" "$bin" verify "$tmp/hf-f32" "$tmp/rw-$mistake" \
        --q "$tmp/rw-$mistake/R1.safetensors" $vopts --out "$tmp/v-$mistake"
    has "$tmp/out" "first layer not equivalent: 2 (broken)" "$mistake: layer 2 named broken"
    if grep -qE "^ +1 +[0-9.e+-]+ +equivalent$" "$tmp/out" &&
        grep -qE "^ +0 +[0-9.e+-]+ +equivalent$" "$tmp/out"; then ok "$mistake: layers 0 and 1 equivalent"
    else bad "$mistake: a layer before 2 is not equivalent"; fi
    has "$tmp/v-$mistake/report.json" '"first_layer_not_equivalent": 2' "$mistake: report.json names layer 2"
done
# --case: both models in the engines a case names (quarot-llama's f32, bf16
# and W4A4); bf16 and W4A4 must cost more than f32 on both, or they did not run
# shellcheck disable=SC2086
expect_rc 0 "verify with --case engines: exit 0" "$bin" verify "$tmp/hf-f32" "$tmp/rw" \
    --q "$tmp/rw/R1.safetensors" $vopts --case "$root/cases/quarot-llama.toml" --out "$tmp/v-case"
for e in f32-openblas bf16 w4a4; do
    has "$tmp/out" "$e vs the original's truth (rel_norm2): original" "--case: the $e line"
done
if "$py" - "$tmp/v-case/report.json" <<'PYEOF'
import json, math, sys
v = json.load(open(sys.argv[1]))["verify"]
e = {x["engine"]: x for x in v["engines"]}
assert list(e) == ["f32-openblas", "bf16", "w4a4"], list(e)
for side in ("original", "transformed"):
    f, b, w = (e[k][side] for k in ("f32-openblas", "bf16", "w4a4"))
    assert 0 < f < 1e-5 < b < w, (side, f, b, w)
PYEOF
then ok "--case: report.json has each engine, f32 < bf16 < W4A4 on both models"
else bad "--case: report.json's engines are wrong"; fi
sed 's/^f32 = \["openblas"\]/f32 = ["openblass"]/' "$root/cases/quarot-llama.toml" >"$tmp/bad-engines.toml"
# shellcheck disable=SC2086
expect_rc 2 "verify with a bad --case: exit 2" "$bin" verify "$tmp/hf-f32" "$tmp/rw" $vopts \
    --case "$tmp/bad-engines.toml"
expect_err "bad-engines.toml:" "a bad --case: the message names the file"
expect_err "openblass" "a bad --case: the message names the value"
# a Qwen2 rewrite (gains folded, R1): the q, k, v biases stay as they are
expect_rc 0 "make a rewritten qwen2 checkpoint" "$py" "$mk" "$tmp/d-qwen/original.safetensors" \
    "$tmp/rw-qwen" --fold --rotate 5
expect_rc 0 "verify the qwen2 rewrite: exit 0" "$bin" verify "$tmp/hf-qwen" "$tmp/rw-qwen" \
    --q "$tmp/rw-qwen/R1.safetensors" --tokens 8 --mpfr-prec 64
has "$tmp/out" "every layer and the head equivalent" "the qwen2 rewrite is equivalent"
# token ids through each model's own embed_tokens: the rewrite's E Q too
# shellcheck disable=SC2086
expect_rc 0 "verify on seeded token ids: exit 0" "$bin" verify "$tmp/hf-f32" "$tmp/rw" \
    --q "$tmp/rw/R1.safetensors" $vopts --input-kind tokens
expect_rc 0 "make a rewrite with unrotated embeddings" "$py" "$mk" "$orig" "$tmp/rw-emb" \
    --fold --rotate 5 --r4 --mistake embed-unrotated:0
# shellcheck disable=SC2086
expect_rc 1 "verify unrotated embeddings on token ids: exit 1" "$bin" verify "$tmp/hf-f32" \
    "$tmp/rw-emb" --q "$tmp/rw-emb/R1.safetensors" $vopts --input-kind tokens
has "$tmp/out" "first layer not equivalent: 0 (broken)" "unrotated embeddings break layer 0"
# shellcheck disable=SC2086
expect_rc 0 "verify on a file of hidden states: exit 0" "$bin" verify "$tmp/hf-f32" "$tmp/rw" \
    --q "$tmp/rw/R1.safetensors" $vopts --input "$tmp/hidden.safetensors"
expect_rc 1 "verify without the online Hadamard it needs: exit 1" "$bin" verify "$tmp/hf-f32" \
    "$tmp/rw" --q "$tmp/rw/R1.safetensors" --tokens 8
has "$tmp/out" "first layer not equivalent: 0 (broken)" "without --online, layer 0 breaks"
# without --q: Q recovered from the embeddings (E_B = E_A Q, 64 rows of
# d 64), proven orthogonal, and the per-layer view runs; a rewrite broken
# at layer 2 stays broken there
# shellcheck disable=SC2086
expect_rc 0 "verify a correct rotation without --q: exit 0" "$bin" verify "$tmp/hf-f32" \
    "$tmp/rw" $vopts --out "$tmp/v-noq"
has "$tmp/out" "no --q: Q recovered from the embeddings (least squares on 64 rows" \
    "without --q, Q is recovered from the embeddings"
has "$tmp/out" "every layer and the head equivalent" "the recovered Q gives every layer"
has "$tmp/v-noq/report.json" '"q_source": "recovered"' "report.json: Q recovered"
# shellcheck disable=SC2086
expect_rc 1 "verify a broken rewrite without --q: exit 1" "$bin" verify "$tmp/hf-f32" \
    "$tmp/rw-writer-unrotated" $vopts
has "$tmp/out" "first layer not equivalent: 2 (broken)" "without --q, layer 2 is still named broken"
# OPT's centred embeddings (rank d - 1) do not determine Q: the head alone
# is judged, on seeded token ids (the rewrite's hidden states X Q need Q)
# shellcheck disable=SC2086
expect_rc 0 "verify the OPT rewrite without --q: exit 0 (head only)" "$bin" verify \
    "$tmp/hf-opt" "$tmp/rw-opt" --layernorm fused $vo
has "$tmp/out" "rank deficient" "OPT's centred embeddings do not determine Q"
has "$tmp/out" "every layer (head readout) equivalent" "the OPT rewrite's head is equivalent"
# shellcheck disable=SC2086
expect_rc 1 "verify a broken OPT rewrite without --q: exit 1" "$bin" verify "$tmp/hf-opt" \
    "$tmp/rw-opt-writer-unrotated" --layernorm fused $vo
has "$tmp/out" "the head readout is broken" "without Q the broken OPT rewrite's head is broken"
expect_rc 2 "--q '': exit 2" "$bin" verify "$tmp/hf-f32" "$tmp/rw" --q '' --tokens 8
expect_err "--q needs a value (got '')" "--q '': the message says so"

# the thresholds follow the tensors that are read: a rewrite whose head is
# scaled by 1.03 is broken at F32's thresholds whatever unused tensor the
# folder holds, and an integer Q is exact; a BF16 weight that is read sets
# bf16's thresholds (and is named)
expect_rc 0 "make a rewrite scaled by 1.03 with an unused F16 tensor" "$py" "$mk" "$orig" \
    "$tmp/rw-f16x" --fold --rotate 5 --r4 --scale lm_head.weight:1.03 --extra unused.weight:f16
# shellcheck disable=SC2086
expect_rc 1 "an unused F16 tensor: the scaled rewrite stays broken (exit 1)" "$bin" verify \
    "$tmp/hf-f32" "$tmp/rw-f16x" --q "$tmp/rw-f16x/R1.safetensors" $vopts --out "$tmp/v-f16x"
has "$tmp/out" "stored at 24 bits" "an unused F16 tensor: F32's thresholds"
has "$tmp/v-f16x/report.json" '"dtype": "F32"' "report.json: an F32 tensor set them"
expect_rc 0 "make a rewrite scaled by 1.03, not rotated" "$py" "$mk" "$orig" "$tmp/rw-x103" \
    --scale lm_head.weight:1.03
expect_rc 0 "write an identity Q as I8" "$py" - "$tmp/q-i8.safetensors" "$root/tests" <<'PY'
import sys
import numpy as np
sys.path.insert(0, sys.argv[2])
from make_checkpoint import write_st
q = np.eye(64, dtype=np.int8)
write_st(sys.argv[1], [("Q", "I8", q.shape, q.tobytes())])
PY
expect_rc 1 "an identity Q stored as I8: the scaled rewrite stays broken (exit 1)" "$bin" \
    verify "$tmp/hf-f32" "$tmp/rw-x103" --q "$tmp/q-i8.safetensors" --tokens 8 --mpfr-prec 64
has "$tmp/out" "the head readout is broken" "an I8 Q: the head scaled by 1.03 is broken"
has "$tmp/out" "stored at 24 bits" "an I8 Q: F32's thresholds"
expect_rc 0 "make a rewrite scaled by 1.03 with one BF16 down_proj" "$py" "$mk" "$orig" \
    "$tmp/rw-bf16w" --fold --rotate 5 --r4 --scale lm_head.weight:1.03 \
    --dtype-of model.layers.1.mlp.down_proj.weight:bf16
# shellcheck disable=SC2086
expect_rc 0 "a BF16 weight that is read: bf16's thresholds (exit 0)" "$bin" verify \
    "$tmp/hf-f32" "$tmp/rw-bf16w" --q "$tmp/rw-bf16w/R1.safetensors" $vopts --out "$tmp/v-bf16w"
has "$tmp/out" "set by BF16 tensor 'model.layers.1.mlp.down_proj.weight'" \
    "the BF16 weight that set the thresholds is named"
if "$py" - "$tmp/v-bf16w/report.json" <<'PY'
import json, sys
v = json.load(open(sys.argv[1]))["verify"]
s = v["thresholds"]["set_by"]
assert v["storage_bits"] == 8 and s["bits"] == 8, v
assert s["dtype"] == "BF16" and s["tensor"] == "model.layers.1.mlp.down_proj.weight", s
assert s["tensors_with_these_bits"] == 1 and s["file"].endswith("rw-bf16w"), s
PY
then ok "report.json: bf16 thresholds set by the BF16 down_proj of layer 1"
else bad "report.json does not say what set the thresholds"; fi
# a folder name that is not UTF-8: report.json keeps the key (as '?'), and
# what set the thresholds
bad_name="$tmp/rw-$(printf '\377')"
cp -r "$tmp/rw" "$bad_name"
# shellcheck disable=SC2086
expect_rc 0 "verify a rewrite in a folder whose name is not UTF-8" "$bin" verify "$tmp/hf-f32" \
    "$bad_name" --q "$tmp/rw/R1.safetensors" $vopts --out "$tmp/v-name"
has "$tmp/v-name/report.json" '/rw-?",' "report.json: the name with '?' for the byte"
has "$tmp/v-name/report.json" '"set_by": {' "report.json: what set the thresholds, whatever the name"

# --layers: a range near INT_MAX or past the checkpoint's layers
expect_rc 2 "--layers near INT_MAX: exit 2" "$bin" verify "$tmp/hf-f32" "$tmp/rw" \
    --layers 2147483000-2147483647 --tokens 8
expect_err "--layers '2147483000-2147483647': N (1 .. 1024) or a-b" "--layers near INT_MAX: the option is named"
expect_rc 2 "--layers with a huge value: exit 2" "$bin" verify "$tmp/hf-f32" "$tmp/rw" \
    --layers 99999999999999999999-2 --tokens 8
expect_err "--layers '99999999999999999999-2'" "--layers huge: the option is named"
expect_rc 2 "--layers past the checkpoint's layers: exit 2" "$bin" verify "$tmp/hf-f32" \
    "$tmp/rw" --layers 2-5 --tokens 8
expect_err "--layers asks for layers 2 .. 5; the checkpoint has 3" \
    "--layers past the layers: the option and the checkpoint's count are named"
expect_rc 2 "--layers at the largest first layer: exit 2" "$bin" verify "$tmp/hf-f32" \
    "$tmp/rw" --layers 2147482623-2147482623 --tokens 8
expect_err "--layers asks for layers 2147482623 .. 2147482623; the checkpoint has 3" \
    "--layers at the largest first layer: no overflow, both named"

# --out checked before any work: an empty name, a path under a file
expect_rc 2 "--out '': exit 2" "$bin" verify "$tmp/hf-f32" "$tmp/rw" --out '' --tokens 8
expect_err "--out: empty output folder name" "--out '': the message says so"
if [ -s "$tmp/out" ]; then bad "--out '': something ran"; else ok "--out '': refused before any work"; fi
: >"$tmp/a-file"
expect_rc 2 "--out under a file: exit 2" "$bin" verify "$tmp/hf-f32" "$tmp/rw" \
    --out "$tmp/a-file/v" --tokens 8
expect_err "a-file: exists and is not a folder" "--out under a file: the file is named"
mkdir -p "$tmp/v-dir/report.json"
expect_rc 2 "--out whose report.json is a folder: exit 2" "$bin" verify "$tmp/hf-f32" "$tmp/rw" \
    --out "$tmp/v-dir" --tokens 8
expect_err "report.json: is a folder where cicheck writes a file" \
    "--out whose report.json is a folder: it is named"
expect_rc 2 "--case '': exit 2" "$bin" verify "$tmp/hf-f32" "$tmp/rw" --case '' --tokens 8
expect_err "--case needs a value (got '')" "--case '': the message says so"

expect_rc 0 "make the rewrite stored as BF16" "$py" "$mk" "$orig" "$tmp/rw-bf16" --fold \
    --rotate 5 --r4 --dtype bf16
# shellcheck disable=SC2086
expect_rc 0 "verify the BF16 rewrite: exit 0 at bf16's thresholds" "$bin" verify "$tmp/hf-f32" \
    "$tmp/rw-bf16" --q "$tmp/rw-bf16/R1.safetensors" $vopts
has "$tmp/out" "stored at 8 bits" "the BF16 storage sets the thresholds"
# BF16 embeddings determine Q only to about 2^-9: the Q fitting them is not
# orthogonal to within an eighth of the equivalence threshold, so the head
# alone is judged, on seeded token ids
# shellcheck disable=SC2086
expect_rc 0 "verify the BF16 rewrite without --q: exit 0 (head only)" "$bin" verify \
    "$tmp/hf-f32" "$tmp/rw-bf16" $vopts --out "$tmp/v-noq-bf16"
has "$tmp/out" "no --q, and Q not recovered from the embeddings: the Q that fits the embeddings is not orthogonal" \
    "BF16 embeddings: why Q was not recovered"
has "$tmp/out" "no --q: the per-layer view needs the residual rotation Q" "without Q it says so"
has "$tmp/out" "the block input is seeded token ids" "without Q the input is token ids"
has "$tmp/v-noq-bf16/report.json" '"token_ids_for_want_of_q": true' "report.json: token ids for want of Q"
# shellcheck disable=SC2086
expect_rc 2 "hidden states from a file without Q: exit 2" "$bin" verify "$tmp/hf-f32" \
    "$tmp/rw-bf16" $vopts --input "$tmp/hidden.safetensors"
expect_err "hidden states ('input') need the residual rotation Q" \
    "a file of hidden states without Q: the message says so"
expect_rc 0 "make a checkpoint with another rope_theta" "$py" "$mk" "$orig" "$tmp/hf-theta" \
    --set rope_theta=500000.0
expect_rc 2 "verify against another config: exit 2" "$bin" verify "$tmp/hf-f32" \
    "$tmp/hf-theta" --tokens 8
expect_err "config.json differs from the original's" "another config: the message says so"
expect_rc 2 "verify against a checkpoint with fewer layers: exit 2" "$bin" verify \
    "$tmp/hf-f32" "$tmp/hf-12" --tokens 8
expect_err "2 layers from layer 0 here, 3 in the original" "fewer layers: the message says so"
expect_rc 2 "verify with too many rows: exit 2" "$bin" verify "$tmp/hf-f32" "$tmp/rw" \
    --tokens 65536 --samples 64
expect_err "--tokens 65536 x --samples 64: at most" "too many rows: the message says so"
expect_rc 2 "verify with an unknown online op: exit 2" "$bin" verify "$tmp/hf-f32" "$tmp/rw" \
    --online up_proj:hadamard
expect_err "--online 'up_proj:hadamard': allowed down_proj:hadamard, qk:hadamard" \
    "an unknown online op: the message says so"
# ---- non-finite intermediates: a finite weight of 3.4e38 whose fold
# overflows float32 (gain 2 at its input channel) makes v rows Inf in the
# rounded-weights MPFR run and in every float engine. The run ends, exit 1
# (the float rows fail), with the non-finite outputs counted; no crash
# (6718a0a: SIGSEGV in the MPFR attention), and no low-precision row is
# called exact.
expect_rc 0 "make a checkpoint with a weight of 3.4e38" "$py" "$mk" "$orig" "$tmp/hf-huge" \
    --edit model.layers.0.self_attn.v_proj.weight:5:3.4e38 \
    --edit model.layers.0.input_layernorm.weight:5:2.0
{
    printf 'name = "llama-huge"\n[model]\ncheckpoint = "hf-huge"\ntokens = 8\nsamples = 2\nseed = 21\n'
    printf '[engines]\nf32 = ["openblas"]\nmpfr_prec = 64\n'
    printf '[[engines.lowp]]\nname = "bf16"\nweights = "bf16"\nactivations = "bf16"\n'
    printf '[[transforms]]\nname = "fold"\nkind = "fold-rmsnorm-gamma"\n'
    printf '[[transforms]]\nname = "rot"\nkind = "rotate"\nq = "random"\nafter = "fold"\n'
} >"$tmp/huge.toml"
expect_rc 1 "fold + rotate on a weight that overflows float32: exit 1, no crash" "$bin" run \
    --no-color --no-baseline --out "$tmp/r-huge" "$tmp/huge.toml"
has "$tmp/out" "every output is NaN or Inf" "the float rows say their outputs are NaN or Inf"
has "$tmp/out" "nonfinite" "the SQNR table says nonfinite, not exact"
if [ -f "$tmp/r-huge/report.json" ] && "$py" - "$tmp/r-huge/report.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
lp = [x for x in r["results"] if x["engine"] == "bf16"]
assert len(lp) == 3, lp
for x in lp:
    assert x["metrics"]["nonfinite"] > 0, x
    assert x["sqnr_db"] is None, x
bad = [e for e in r["lowp"]["linear_errors"] if e["nonfinite"] > 0]
assert bad and all(e["sqnr_db"] is None for e in bad), bad
PY
then ok "report.json counts the non-finite outputs of every bf16 row and linear"
else bad "report.json: non-finite bf16 rows or linears not counted"; fi

# sweep shards record what they read of the checkpoint (its header and the
# tensors the run reads): a layer the run reads edited between the shards
# is refused at merge, naming the file and both shards; one it does not
# read (layer 2 of a run of layer 0) changes nothing
ckcase ck-sw hf-sw "layers = 1
[sweep]
seed = [1, 2]"
for v in 0:"refused" 2:"merged"; do
    l=${v%%:*}
    expect_rc 0 "make the sweep's checkpoint" "$py" "$mk" "$orig" "$tmp/hf-sw"
    expect_rc 0 "sweep shard 1/2 on the checkpoint" "$bin" run --quiet --no-baseline --no-plots \
        --shard 1/2 --out "$tmp/sw-$l-1" "$tmp/ck-sw.toml"
    expect_rc 0 "the checkpoint with a value of layer $l changed" "$py" "$mk" "$orig" \
        "$tmp/hf-sw" --edit "model.layers.$l.mlp.up_proj.weight:7:0.5"
    expect_rc 0 "sweep shard 2/2 on it" "$bin" run --quiet --no-baseline --no-plots \
        --shard 2/2 --out "$tmp/sw-$l-2" "$tmp/ck-sw.toml"
    if [ "$l" = 0 ]; then
        expect_rc 2 "shards that read another layer 0 are refused" "$bin" merge --no-plots \
            --out "$tmp/sw-m$l" "$tmp/sw-$l-1" "$tmp/sw-$l-2"
        expect_err "sw-0-2/sweep.json: refusing to merge: the checkpoint model.safetensors differs between the shards: sha256_header_and_tensors_read" \
            "the checkpoint file and the shard are named"
        expect_err "in $tmp/sw-0-1/sweep.json" "the other shard is named"
    else
        expect_rc 0 "shards that differ in a layer they do not read merge" "$bin" merge \
            --no-plots --out "$tmp/sw-m$l" "$tmp/sw-$l-1" "$tmp/sw-$l-2"
    fi
done
has "$tmp/sw-0-1/sweep.json" '"file": "checkpoint config.json"' "the shard records config.json"

# a checkpoint changed while it is mapped: cut short (a SIGBUS in the
# mapping, or the size at the end) or rewritten in place with the same
# size (its mtime) must exit 3 naming the file, with no report.json. A
# model of d 128 at 512 bits and 32 tokens (verify: 2048 bits) runs long
# enough (2 s) to be changed mid-run, and it is stopped while the file
# changes, so a loaded machine's slow polling or Python start cannot let
# it finish first.
sed -e 's/^d_model = 64$/d_model = 128/' -e 's/^tokens = 8$/tokens = 16/' \
    -e 's/^layers = 3$/layers = 2/' "$tmp/seed.toml" >"$tmp/mid.toml"
expect_rc 0 "a seeded model of d 128 dumps" "$bin" run --quiet --no-baseline \
    --out "$tmp/r-mid" --dump "$tmp/d-mid" "$tmp/mid.toml"
expect_rc 0 "make its checkpoint" "$py" "$mk" "$tmp/d-mid/original.safetensors" "$tmp/hf-mid"
# changed MODE WHAT CMD...: CMD (reading $tmp/hf-chg, a fresh copy of hf-mid)
# in the background; once the model holds $tmp/hf-chg/model.safetensors
# mapped for good, it is cut to its first 4 KiB (MODE cut) or its last
# 4 KiB are rewritten in place (MODE rewrite). For good: a run's stderr
# shows the truth begun (the model is built); verify prints nothing while
# it works, so there the mapping must be in /proc/PID/maps for 10 looks
# 50 ms apart (loading the config maps it briefly first; a change between
# that and the model's mapping would be read whole, as a file of its own).
# The looks stop after 3000 (at least 150 s): on a loaded machine a run can
# take more than 30 s to build its model, and a change that lands before
# the model maps the file is read whole and is no change at all.
changed() {
    ch_mode=$1 ch_what=$2
    shift 2
    rm -rf "$tmp/hf-chg" "$tmp/r-chg" && cp -r "$tmp/hf-mid" "$tmp/hf-chg"
    "$bin" "$@" >"$tmp/out" 2>"$tmp/err" &
    ch_pid=$!
    ch_i=0 ch_seen=0
    while [ "$ch_i" -lt 3000 ] && [ "$ch_seen" -lt 10 ] && kill -0 "$ch_pid" 2>/dev/null; do
        if grep -q "truth: original" "$tmp/err"; then ch_seen=10
        elif [ "$1" = verify ] &&
            grep -q "hf-chg/model.safetensors" "/proc/$ch_pid/maps" 2>/dev/null; then
            ch_seen=$((ch_seen + 1))
        else ch_seen=0; fi
        [ "$ch_seen" -lt 10 ] && sleep 0.05
        ch_i=$((ch_i + 1))
    done
    # stopped while the file changes, so a loaded machine cannot let the
    # run finish before the change lands (it resumes after, and must see it)
    kill -STOP "$ch_pid" 2>/dev/null
    "$py" - "$tmp/hf-chg/model.safetensors" "$ch_mode" <<'PY'
import os, sys
path, mode = sys.argv[1], sys.argv[2]
if mode == "cut":
    os.truncate(path, 4096)
else:
    n = os.path.getsize(path)
    with open(path, "r+b") as f:
        f.seek(n - 4096)
        b = f.read(4096)
        f.seek(n - 4096)
        f.write(bytes(x ^ 0x01 for x in b))  # other values, of the same magnitude
PY
    kill -CONT "$ch_pid" 2>/dev/null
    wait "$ch_pid"
    ch_rc=$?
    if [ "$ch_rc" -eq 3 ]; then ok "$ch_what: exit 3"; else
        bad "$ch_what: exit $ch_rc, expected 3"; sed 's/^/    /' "$tmp/err" | tail -3; fi
    expect_err "hf-chg/model.safetensors: changed while cicheck was reading it" \
        "$ch_what: the message names the file"
    [ ! -e "$tmp/r-chg/report.json" ] && ok "$ch_what: no report.json" ||
        bad "$ch_what: a report.json was written"
}
ckcase ck-chg hf-chg
sed -i 's/^mpfr_prec = 64$/mpfr_prec = 512/; s/^tokens = 8$/tokens = 32/' "$tmp/ck-chg.toml"
changed cut "a checkpoint cut short during a run" run --no-baseline --out "$tmp/r-chg" \
    "$tmp/ck-chg.toml"
has "$tmp/err" "changed while cicheck was reading it (truncated" \
    "the cut is caught by the SIGBUS handler, mid-run"
changed rewrite "a checkpoint rewritten in place during a run" run --no-baseline \
    --out "$tmp/r-chg" "$tmp/ck-chg.toml"
has "$tmp/err" "(rewritten in place: modified after it was opened)" \
    "the rewrite is caught by its modification time"
changed cut "a checkpoint cut short during verify" verify "$tmp/hf-mid" "$tmp/hf-chg" \
    --tokens 16 --mpfr-prec 2048 --engine mpfr --out "$tmp/r-chg"
changed rewrite "a checkpoint rewritten in place during verify" verify "$tmp/hf-mid" \
    "$tmp/hf-chg" --tokens 16 --mpfr-prec 2048 --engine mpfr --out "$tmp/r-chg"
cic_test_done
