#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""to_safetensors.py: a PyTorch checkpoint as the safetensors files
`cicheck verify` reads.

    to_safetensors.py model SRC OUT_DIR [--config CONFIG_JSON] [--allow-pickle]
    to_safetensors.py rotation R.bin OUT.safetensors [--allow-pickle]

model: SRC is a state dict saved with torch.save (.pt, .pth, .bin): a dict
of tensors, or one nested under "model" or "state_dict" (a training
checkpoint such as {"model": ..., "optimizer": ..., "epoch": ...}).
OUT_DIR/model.safetensors gets every tensor under its name, its dtype kept
(bf16 stays BF16, f16 F16, ...); entries that are not tensors (an epoch, a
config) are named on stderr and skipped. --config copies a Hugging Face
config.json beside it, so OUT_DIR is a folder verify reads. One file, not
sharded: verify reads it mapped, whatever its size.

rotation: R.bin is the rotation file SpinQuant's optimize_rotation.py saves
with torch.save: a dict with "R1" (the residual rotation, [d, d]) and
"model.layers.{i}.self_attn.R2" (each layer's [head_dim, head_dim] value
and output rotation). SpinQuant rotates the residual stream as x R1 (its
readers W R1, its writers R1^T W, PyTorch layout), which is verify's Q, so
R1 is written unchanged as the tensor "R1" and the R2s under their own
names: give verify `--q OUT.safetensors --q-tensor R1`. Other entries are
named and skipped. ||R1^T R1 - I|| is printed (verify measures it again).

The file is loaded with torch.load(weights_only=True) where this torch has
it (1.13 and later), which refuses pickled code; --allow-pickle loads a
file that needs more (a whole module saved), for files you trust only.
torch is needed to read the file. Exit status: 0 written, 2 bad input (the
message names the file and what is wrong), 3 no torch or a write failed.

The safetensors layout written here, from the format's description: an
unsigned 64-bit little-endian header length N, N bytes of JSON mapping
each name to {"dtype", "shape", "data_offsets": [begin, end]} (offsets
relative to the first byte after the header) plus "__metadata__" (string
values: {"format": "pt"}), padded with spaces to a multiple of 8, then the
tensors' bytes, row-major and little-endian, back to back. The tensors are
laid out by element size, largest first, so that every tensor starts at a
multiple of its element size (the header is padded for that too); the file
is written beside its final name and renamed, so a reader never sees half
of one."""
import json
import os
import re
import struct
import sys

USAGE = __doc__.split("\n\n")[1]


class BadInput(Exception):
    """Bad input: the message says which file and what is wrong (exit 2)."""


def die(msg, code):
    print("to_safetensors.py: " + msg, file=sys.stderr)
    sys.exit(code)


def import_torch():
    try:
        import torch
    except ImportError as e:
        die("needs PyTorch to read a torch.save file (import torch: %s)" % e, 3)
    return torch


def check_source(path):
    """A readable regular file that starts as torch.save files do (a zip
    archive since torch 1.6, a pickle before): checked before torch loads."""
    if not os.path.exists(path):
        raise BadInput("%s: no such file" % path)
    if not os.path.isfile(path):
        raise BadInput("%s: not a regular file" % path)
    try:
        with open(path, "rb") as f:
            head = f.read(4)
    except OSError as e:
        raise BadInput("%s: %s" % (path, e.strerror))
    if head[:4] != b"PK\x03\x04" and head[:1] != b"\x80":
        raise BadInput("%s: not a file torch.save wrote (neither a zip archive nor a pickle)"
                       % path)


def load(torch, path, allow_pickle):
    check_source(path)
    kw = {"map_location": "cpu"}
    try:
        import inspect
        if not allow_pickle and "weights_only" in inspect.signature(torch.load).parameters:
            kw["weights_only"] = True
    except (TypeError, ValueError):
        pass
    if not allow_pickle and "weights_only" not in kw:
        print("to_safetensors.py: torch %s has no torch.load(weights_only=True): %s is "
              "unpickled as it is (load only files you trust)" % (torch.__version__, path),
              file=sys.stderr)
    try:
        return torch.load(path, **kw)
    except Exception as e:  # torch raises many kinds on a bad file
        hint = ("; if it holds pickled objects and you trust it, --allow-pickle"
                if kw.get("weights_only") else "")
        raise BadInput("%s: torch.load failed: %s%s" % (path, str(e).split("\n")[0][:300], hint))


def dtype_table(torch):
    """torch dtype -> (safetensors name, element bytes); bf16 has no NumPy
    type and travels as its 16-bit patterns."""
    t = {torch.float64: ("F64", 8), torch.float32: ("F32", 4), torch.float16: ("F16", 2),
         torch.bfloat16: ("BF16", 2), torch.int64: ("I64", 8), torch.int32: ("I32", 4),
         torch.int16: ("I16", 2), torch.int8: ("I8", 1), torch.uint8: ("U8", 1),
         torch.bool: ("BOOL", 1)}
    return t


def tensor_bytes(torch, t):
    """The tensor's values, row-major, little-endian."""
    t = t.detach().cpu().contiguous()
    if t.dtype == torch.bfloat16:
        t = t.view(torch.int16)
    a = t.numpy()
    return a.astype(a.dtype.newbyteorder("<"), copy=False).tobytes()


def write_safetensors(torch, path, tensors):
    """tensors: list of (name, tensor). Written to path + ".tmp", renamed."""
    table = dtype_table(torch)
    order = sorted(tensors, key=lambda nt: -table[nt[1].dtype][1])  # stable: largest first
    header, off = {"__metadata__": {"format": "pt"}}, 0
    for name, t in order:
        dt, size = table[t.dtype]
        n = size * t.numel()
        header[name] = {"dtype": dt, "shape": list(t.shape), "data_offsets": [off, off + n]}
        off += n
    h = json.dumps(header, separators=(",", ":")).encode("utf-8")
    h += b" " * (-len(h) % 8)
    tmp = path + ".tmp"
    try:
        with open(tmp, "wb") as f:
            f.write(struct.pack("<Q", len(h)))
            f.write(h)
            for _, t in order:
                f.write(tensor_bytes(torch, t))
        os.replace(tmp, path)
    except OSError as e:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        die("%s: %s" % (path, e.strerror or e), 3)
    return off


def describe(v):
    return type(v).__name__


def state_dict_of(torch, obj, path):
    """The dict of tensors in obj: obj itself, or the one under "model" or
    "state_dict" (nested once more too). Non-tensors are named and skipped."""
    where = ""
    for _ in range(2):
        if not isinstance(obj, dict):
            break
        inner = [k for k in ("state_dict", "model") if isinstance(obj.get(k), dict)]
        if not inner or any(isinstance(v, torch.Tensor) for v in obj.values()):
            break
        for k in obj:
            if k != inner[0]:
                print("to_safetensors.py: %s%s: skipped '%s': beside the state dict \"%s\""
                      % (path, where, k, inner[0]), file=sys.stderr)
        where += '["%s"]' % inner[0]
        obj = obj[inner[0]]
    if not isinstance(obj, dict):
        raise BadInput("%s%s: not a state dict (a %s; expected a dict of tensors, or one under "
                       '"model" or "state_dict")' % (path, where, describe(obj)))
    table = dtype_table(torch)
    out = []
    for k, v in obj.items():
        if not isinstance(k, str):
            print("to_safetensors.py: %s%s: skipped key %r: not a string" % (path, where, k),
                  file=sys.stderr)
        elif not isinstance(v, torch.Tensor):
            print("to_safetensors.py: %s%s: skipped '%s': a %s, not a tensor"
                  % (path, where, k, describe(v)), file=sys.stderr)
        elif v.dtype not in table:
            print("to_safetensors.py: %s%s: skipped '%s': dtype %s has no safetensors name "
                  "here" % (path, where, k, v.dtype), file=sys.stderr)
        else:
            out.append((k, v))
    if not out:
        raise BadInput("%s%s: no tensors in it (a state dict is a dict of tensors)"
                       % (path, where))
    return out, where


def cmd_model(torch, args):
    src, out_dir, config, allow = args
    tensors, where = state_dict_of(torch, load(torch, src, allow), src)
    if config is not None:
        try:
            cfg = json.load(open(config))
        except (OSError, ValueError) as e:
            raise BadInput("%s: not a readable JSON file (%s)" % (config, e))
        if not isinstance(cfg, dict):
            raise BadInput("%s: not a JSON object (a config.json is one)" % config)
    os.makedirs(out_dir, exist_ok=True)
    n = write_safetensors(torch, os.path.join(out_dir, "model.safetensors"), tensors)
    if config is not None:
        tmp = os.path.join(out_dir, "config.json.tmp")
        with open(tmp, "w") as f:
            json.dump(cfg, f, indent=2)
        os.replace(tmp, os.path.join(out_dir, "config.json"))
    dts = sorted({dtype_table(torch)[t.dtype][0] for _, t in tensors})
    print("%s/model.safetensors: %d tensors from %s%s (%s), %d bytes of data%s"
          % (out_dir, len(tensors), src, where, ", ".join(dts), n,
             "; config.json from " + config if config else ""))


R2_RE = re.compile(r"^model\.layers\.(\d+)\.self_attn\.R2$")


def square(torch, name, t, path):
    if not isinstance(t, torch.Tensor) or t.dim() != 2 or t.shape[0] != t.shape[1] or \
            not t.is_floating_point():
        shape = list(t.shape) if isinstance(t, torch.Tensor) else describe(t)
        raise BadInput("%s: '%s' is %s: a rotation is a square float matrix [n, n]"
                       % (path, name, shape))


def cmd_rotation(torch, args):
    src, out, _, allow = args
    obj = load(torch, src, allow)
    if not isinstance(obj, dict):
        raise BadInput('%s: not a rotation file (a %s; SpinQuant saves a dict with "R1" and '
                       '"model.layers.{i}.self_attn.R2")' % (src, describe(obj)))
    if "R1" not in obj:
        raise BadInput('%s: no "R1" (keys: %s)' % (src, ", ".join(map(str, list(obj)[:8]))))
    square(torch, "R1", obj["R1"], src)
    keep = [("R1", obj["R1"])]
    r2 = {}
    for k, v in obj.items():
        m = R2_RE.match(k) if isinstance(k, str) else None
        if m:
            square(torch, k, v, src)
            r2[int(m.group(1))] = (k, v)
        elif k != "R1":
            print("to_safetensors.py: %s: skipped %r: not R1 or a layer's R2" % (src, k),
                  file=sys.stderr)
    sizes = {tuple(v.shape) for _, v in r2.values()}
    if len(sizes) > 1:
        raise BadInput("%s: the R2s differ in size (%s): one head_dim per model"
                       % (src, ", ".join(str(list(s)) for s in sorted(sizes))))
    keep += [r2[i] for i in sorted(r2)]
    write_safetensors(torch, out, keep)
    r1 = obj["R1"].detach().double()
    err = (r1.T @ r1 - torch.eye(r1.shape[0], dtype=torch.float64)).abs().max().item()
    dt = dtype_table(torch)[obj["R1"].dtype][0]
    print("%s: R1 %s [%d, %d] (max |R1^T R1 - I| %.3g in double), %d R2%s; verify reads it as "
          "--q %s --q-tensor R1" % (out, dt, r1.shape[0], r1.shape[1], err, len(r2),
                                    "" if len(r2) == 1 else "s", out, ))


def parse(argv):
    if len(argv) < 1 or argv[0] in ("-h", "--help"):
        print(USAGE)
        sys.exit(0 if argv else 2)
    mode, pos, config, allow = argv[0], [], None, False
    i = 1
    while i < len(argv):
        a = argv[i]
        if a == "--config" and mode == "model" and i + 1 < len(argv):
            config = argv[i + 1]
            i += 1
        elif a == "--allow-pickle":
            allow = True
        elif a.startswith("-"):
            die("unknown option '%s'\n%s" % (a, USAGE), 2)
        else:
            pos.append(a)
        i += 1
    if mode not in ("model", "rotation") or len(pos) != 2:
        die("expected 'model SRC OUT_DIR' or 'rotation R.bin OUT.safetensors'\n" + USAGE, 2)
    return mode, (pos[0], pos[1], config, allow)


def main(argv):
    mode, args = parse(argv)
    try:
        check_source(args[0])  # before torch is imported: a missing file says so at once
        torch = import_torch()
        (cmd_model if mode == "model" else cmd_rotation)(torch, args)
    except BadInput as e:
        die(str(e), 2)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
