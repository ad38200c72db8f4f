#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""make_seeds.py: seeds of the fuzz targets that read several files or
safetensors files NumPy writes (scripts/fuzz.sh; NumPy alone).

    make_seeds.py pack OUT [--pre TEXT] [--blank-hashes] SPEC...
        one input of the folder layout of tests/fuzz/fuzz_files.h: the
        preamble TEXT ("\\n" for a newline), then each SPEC: NAME=FILE (the
        file as NAME), or PREFIX=DIR/ (every regular file of DIR as
        PREFIX/file, or as file when PREFIX is empty; files named
        R1.safetensors are left out). --blank-hashes leaves a case shard's
        case_sha256 and data_sha256 "" and its data_bytes -1, which the
        harness fills in (tests/fuzz/case_shard_run.h).
    make_seeds.py input OUTDIR    [input] files: hidden states [4, 8] in
        every float dtype, token ids [2, 2] (I32, I64), both, and wrong
        shapes; verify-in.safetensors [2, 8] for verify's --input
    make_seeds.py qfile OUTDIR    rotation files: Haar and Hadamard
        matrices of orders 8 and 4 in every float dtype, one of two tensors
"""
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from make_checkpoint import encode, write_st  # noqa: E402 (the same writer)


def blank_hashes(data):
    try:
        h = json.loads(data)
    except ValueError:
        return data
    if not isinstance(h, dict):
        return data
    h["case_sha256"] = ""
    h["data_sha256"] = ""
    h["data_bytes"] = -1
    return json.dumps(h, indent=1).encode()


def pack(a):
    out = sys.argv[2]
    pre, blank, specs = b"", False, []
    i = 3
    while i < len(a):
        if a[i] == "--pre":
            pre = a[i + 1].replace("\\n", "\n").encode()
            i += 2
        elif a[i] == "--blank-hashes":
            blank = True
            i += 1
        else:
            specs.append(a[i])
            i += 1
    files = []
    for s in specs:
        name, path = s.split("=", 1)
        if path.endswith("/"):
            for f in sorted(os.listdir(path)):
                if os.path.isfile(os.path.join(path, f)) and f != "R1.safetensors":
                    files.append((name + "/" + f if name else f, os.path.join(path, f)))
        else:
            files.append((name, path))
    body = pre
    for k, (name, path) in enumerate(files):
        data = open(path, "rb").read()
        if blank and name.endswith("case-shard.json"):
            data = blank_hashes(data)
        body += (b"\n" if body else b"") + b"==> " + name.encode() + b" <==\n" + data
    open(out, "wb").write(body)


def st(path, tensors, meta=None):
    """tensors: (name, array, dtype of make_checkpoint.encode or i32/i64)."""
    enc = []
    for name, v, dt in tensors:
        if dt in ("i32", "i64"):
            enc.append((name, dt.upper(), v.shape,
                        v.astype({"i32": "<i4", "i64": "<i8"}[dt]).tobytes()))
        else:
            d, data, _ = encode(v, dt)
            enc.append((name, d, v.shape, data))
    write_st(path, enc)
    if meta:  # the same file with a __metadata__ object
        b = open(path, "rb").read()
        n = int.from_bytes(b[:8], "little")
        h = json.loads(b[8:8 + n])
        h["__metadata__"] = meta
        hb = json.dumps(h).encode()
        hb += b" " * (-len(hb) % 8)
        open(path, "wb").write(len(hb).to_bytes(8, "little") + hb + b[8 + n:])


def inputs(out):
    g = np.random.default_rng(5)
    x = (g.standard_normal((4, 8)) * 0.5).astype(np.float32)
    ids = np.array([[3, 0], [15, 7]])
    for dt in ("f32", "f16", "bf16", "f64"):
        st(os.path.join(out, "input-%s.safetensors" % dt), [("input", x, dt)])
    st(os.path.join(out, "ids-i64.safetensors"), [("input_ids", ids, "i64")])
    st(os.path.join(out, "ids-i32.safetensors"), [("input_ids", ids, "i32")],
       {"format": "pt"})
    st(os.path.join(out, "both.safetensors"), [("input", x, "f32"), ("input_ids", ids, "i64")])
    st(os.path.join(out, "ids-out-of-vocab.safetensors"),
       [("input_ids", np.array([[1, 16], [2, 3]]), "i64")])
    st(os.path.join(out, "input-2x8.safetensors"), [("input", x[:2], "f32")])
    st(os.path.join(out, "verify-in.safetensors"), [("input", x[:2], "f32")])


def haar(n, seed):
    q, r = np.linalg.qr(np.random.default_rng(seed).standard_normal((n, n)))
    return q * np.sign(np.diag(r))[None, :]


def hadamard(n):
    h = np.ones((1, 1))
    while h.shape[0] < n:
        h = np.block([[h, h], [h, -h]])
    return h / np.sqrt(n)


def qfiles(out):
    for n in (8, 4):
        for dt in ("f64", "f32", "f16", "bf16"):
            st(os.path.join(out, "haar%d-%s.safetensors" % (n, dt)), [("q", haar(n, n), dt)])
        st(os.path.join(out, "hadamard%d.safetensors" % n), [("q", hadamard(n), "f32")])
    st(os.path.join(out, "two.safetensors"),
       [("R1", haar(8, 1), "f64"), ("q", hadamard(4), "bf16")])


def main():
    if len(sys.argv) < 3 or sys.argv[1] not in ("pack", "input", "qfile"):
        sys.exit(__doc__)
    if sys.argv[1] == "pack":
        pack(sys.argv)
        return
    os.makedirs(sys.argv[2], exist_ok=True)
    (inputs if sys.argv[1] == "input" else qfiles)(sys.argv[2])


if __name__ == "__main__":
    main()
