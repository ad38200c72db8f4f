#!/bin/sh
# SPDX-License-Identifier: MIT
# test_convert.sh: scripts/to_safetensors.py, from what PyTorch code saves
# to what cicheck verify reads. A tiny LLaMA (d 16, 2 layers) and a rewrite
# of it (gains folded, R1; and one with o_proj left unrotated at layer 1)
# are written by tests/make_checkpoint.py, then saved with torch.save as a
# training checkpoint ({"model": state dict, "epoch": ...}), the rewrite as
# a plain state dict, and R1 as SpinQuant saves it (R.bin: "R1" and
# "model.layers.{i}.self_attn.R2"). Converted back:
#   - the tensors are the checkpoint's, bit for bit, dtypes kept (a BF16
#     tensor stays BF16); "epoch" is named and skipped;
#   - verify on the converted folders and R.safetensors (--q-tensor R1):
#     the rewrite equivalent, the planted mistake broken at layer 1;
#   - bad input exits 2 naming the file: missing, not a torch file, not a
#     state dict, R1 not square.
# Needs Debian's /usr/bin/python3 with numpy and torch (exit 77 without).
# Usage: test_convert.sh PATH/TO/cicheck   (CIC_SOURCE_ROOT: the source tree)
set -u
bin=$1
root=${CIC_SOURCE_ROOT:-$(cd "$(dirname "$0")/.." && pwd)}
. "$(dirname "$0")/lib.sh"
cic_need_numpy "Debian's python3 writes the checkpoints with NumPy"
if ! "$py" -c 'import torch' 2>/dev/null; then
    echo "SKIP: $py has no torch (Debian's python3-torch): the converter reads torch.save files"
    exit 77
fi
cic_test_init convert
mk="$root/tests/make_checkpoint.py"
conv="$root/scripts/to_safetensors.py"

cat >"$tmp/seed.toml" <<'TOML'
name = "llama-convert"
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
seed = 6
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
    --out "$tmp/r" --dump "$tmp/d" "$tmp/seed.toml"
orig="$tmp/d/original.safetensors"
expect_rc 0 "make the original checkpoint" "$py" "$mk" "$orig" "$tmp/hf"
expect_rc 0 "make the rewrite" "$py" "$mk" "$orig" "$tmp/rw" --fold --rotate 5
expect_rc 0 "make a rewrite with o_proj unrotated at layer 1" "$py" "$mk" "$orig" "$tmp/rw-bad" \
    --fold --rotate 5 --mistake writer-unrotated:1
# the checkpoints as PyTorch code saves them
expect_rc 0 "torch.save the state dicts and R.bin" "$py" - "$tmp" "$root/tests" <<'PY'
import sys
import numpy as np
import torch
tmp = sys.argv[1]
sys.path.insert(0, sys.argv[2])
from make_checkpoint import read_st
def sd(folder):
    return {k: torch.from_numpy(np.array(v)) for k, v in read_st(tmp + "/" + folder + "/model.safetensors")[0].items()}
torch.save({"model": sd("hf"), "epoch": 3}, tmp + "/orig.pt")
torch.save(sd("rw"), tmp + "/rw.pth")
bad = sd("rw-bad")   # and a BF16 tensor no model reads: its dtype kept
bad["extra.bf16"] = bad["model.layers.0.mlp.up_proj.weight"].to(torch.bfloat16)
torch.save(bad, tmp + "/rw-bad.bin")
q = torch.from_numpy(np.array(read_st(tmp + "/rw/R1.safetensors")[0]["R1"]))
r2 = {"model.layers.%d.self_attn.R2" % i: torch.linalg.qr(torch.randn(8, 8))[0] for i in range(2)}
torch.save(dict(R1=q, **r2), tmp + "/R.bin")
torch.save({"R1": q[:, :8].contiguous()}, tmp + "/R-wide.bin")
torch.save([q, q], tmp + "/list.pt")
open(tmp + "/text.pt", "w").write("not a checkpoint\n")
PY

# job NAME CMD...: run CMD in the background (importing torch takes a
# second each: they all run at once); done WANT NAME DESC: wait,
# then check its exit status as expect_rc does ($tmp/out and $tmp/err
# become its output for has and expect_err)
job() {
    j=$1
    shift
    ( "$@" >"$tmp/job-$j.out" 2>"$tmp/job-$j.err"; echo $? >"$tmp/job-$j.rc" ) &
}
done_() {
    wait
    cp "$tmp/job-$2.out" "$tmp/out"
    cp "$tmp/job-$2.err" "$tmp/err"
    rc=$(cat "$tmp/job-$2.rc")
    if [ "$rc" -eq "$1" ]; then ok "$3 (exit $rc)"; else
        bad "$3: exit $rc, expected $1"; sed 's/^/    /' "$tmp/err" | head -5; fi
}
job orig "$py" "$conv" model "$tmp/orig.pt" "$tmp/c-orig" --config "$tmp/hf/config.json"
job rw "$py" "$conv" model "$tmp/rw.pth" "$tmp/c-rw" --config "$tmp/rw/config.json"
job rw-bad "$py" "$conv" model "$tmp/rw-bad.bin" "$tmp/c-rw-bad" --config "$tmp/rw-bad/config.json"
job R "$py" "$conv" rotation "$tmp/R.bin" "$tmp/R.safetensors"
job list "$py" "$conv" model "$tmp/list.pt" "$tmp/x"
job wide "$py" "$conv" rotation "$tmp/R-wide.bin" "$tmp/x.safetensors"
done_ 0 orig "convert the training checkpoint"
expect_err "skipped 'epoch'" "the epoch is named as skipped"
has "$tmp/out" "c-orig/model.safetensors" "the output names the file written"
done_ 0 rw "convert the rewrite"
done_ 0 rw-bad "convert the broken rewrite"
done_ 0 R "convert SpinQuant's R.bin"
has "$tmp/out" "--q $tmp/R.safetensors --q-tensor R1" "R.bin: the output says how verify reads it"
expect_rc 0 "the tensors are the originals, bit for bit, dtypes kept" "$py" - "$tmp" <<'PY'
import json, struct, sys
import numpy as np
tmp = sys.argv[1]
def raw(path):
    b = open(path, "rb").read()
    n = struct.unpack("<Q", b[:8])[0]
    assert n % 8 == 0, n
    h = json.loads(b[8:8 + n])
    meta = h.pop("__metadata__", None)
    assert meta in (None, {"format": "pt"}), meta
    assert meta or "/c-" not in path and "/R." not in path, path + ": no metadata"
    ends = sorted(v["data_offsets"] for v in h.values())
    assert ends[0][0] == 0 and ends[-1][1] == len(b) - 8 - n, "data not covered"
    return {k: (v["dtype"], v["shape"], b[8 + n + v["data_offsets"][0]:8 + n + v["data_offsets"][1]]) for k, v in h.items()}
for a, b in (("hf", "c-orig"), ("rw", "c-rw"), ("rw-bad", "c-rw-bad")):
    x, y = raw(tmp + "/" + a + "/model.safetensors"), raw(tmp + "/" + b + "/model.safetensors")
    extra = y.pop("extra.bf16", None)
    assert (extra is not None) == (a == "rw-bad"), a
    assert x == y, (a, sorted(set(x) ^ set(y)))
    assert json.load(open(tmp + "/" + b + "/config.json")) == json.load(open(tmp + "/" + a + "/config.json"))
dt, sh, data = raw(tmp + "/c-rw-bad/model.safetensors")["extra.bf16"]
f32 = raw(tmp + "/rw-bad/model.safetensors")["model.layers.0.mlp.up_proj.weight"]
assert dt == "BF16" and sh == f32[1], (dt, sh)
x = np.frombuffer(f32[2], "<f4").view("<u4")
want = ((x + 0x7FFF + ((x >> 16) & 1)) >> 16).astype("<u2")   # round to nearest even
assert np.frombuffer(data, "<u2").tolist() == want.tolist(), "BF16 bits"
r = raw(tmp + "/R.safetensors")
assert sorted(r) == ["R1", "model.layers.0.self_attn.R2", "model.layers.1.self_attn.R2"], sorted(r)
assert r["R1"] == raw(tmp + "/rw/R1.safetensors")["R1"], "R1 changed"
assert r["model.layers.1.self_attn.R2"][:2] == ("F32", [8, 8])
PY
# verify on what the converter wrote
expect_rc 0 "verify the converted rewrite: exit 0" "$bin" verify "$tmp/c-orig" "$tmp/c-rw" \
    --q "$tmp/R.safetensors" --q-tensor R1 --tokens 8 --mpfr-prec 64
has "$tmp/out" "every layer and the head equivalent" "the converted rewrite is equivalent"
expect_rc 1 "verify the converted broken rewrite: exit 1" "$bin" verify "$tmp/c-orig" \
    "$tmp/c-rw-bad" --q "$tmp/R.safetensors" --q-tensor R1 --tokens 8 --mpfr-prec 64
has "$tmp/out" "first layer not equivalent: 1 (broken)" "the planted mistake: layer 1 broken"

# bad input: exit 2, the file named
expect_rc 2 "a missing file: exit 2" "$py" "$conv" model "$tmp/missing.pt" "$tmp/x"
expect_err "missing.pt: no such file" "missing: the message names the file"
expect_rc 2 "a text file: exit 2" "$py" "$conv" model "$tmp/text.pt" "$tmp/x"
expect_err "text.pt: not a file torch.save wrote" "text: the message names the file"
done_ 2 list "a saved list: exit 2"
expect_err "list.pt: not a state dict (a list" "a list: not a state dict"
done_ 2 wide "R1 not square: exit 2"
expect_err "R-wide.bin: 'R1' is [16, 8]: a rotation is a square float matrix" \
    "R1 [16, 8]: the message names the shape"
[ ! -e "$tmp/x" ] && [ ! -e "$tmp/x.safetensors" ] && ok "bad input writes nothing" ||
    bad "bad input left an output behind"
cic_test_done
