# SPDX-License-Identifier: MIT
"""npref.tensorfile: safetensors files read by hand (header, tensors,
metadata) and InputError, the one error of an unreadable dump. The bottom
of the package: imports nothing of it."""

import json
import struct

import numpy as np


class InputError(Exception):
    """The dump cannot be read or is not what a cicheck dump should be."""



_DTYPES = {"F32": np.dtype("<f4"), "F64": np.dtype("<f8"), "I8": np.dtype("i1"),
           "I32": np.dtype("<i4")}


def read_header(path):
    """The __metadata__ of a safetensors file, reading only its header."""
    try:
        with open(path, "rb") as f:
            head = f.read(8)
            if len(head) < 8:
                raise InputError(f"{path}: too short for a safetensors file")
            (hlen,) = struct.unpack("<Q", head)
            text = f.read(min(hlen, 1 << 30))
    except OSError as e:
        raise InputError(f"{path}: cannot read: {e.strerror}")
    try:
        meta = json.loads(text.decode("utf-8")).get("__metadata__", {}) or {}
    except (UnicodeDecodeError, json.JSONDecodeError, AttributeError) as e:
        raise InputError(f"{path}: malformed JSON header: {e}")
    return meta if isinstance(meta, dict) else {}


def read_safetensors(path, raw=False):
    """Return ({name: ndarray}, {metadata key: str}): every tensor as float64,
    or with raw as stored (float32, float64, int8, int32)."""
    try:
        with open(path, "rb") as f:
            blob = f.read()
    except OSError as e:
        raise InputError(f"{path}: cannot read: {e.strerror}")
    if len(blob) < 8:
        raise InputError(f"{path}: too short for a safetensors file")
    (hlen,) = struct.unpack("<Q", blob[:8])
    if hlen > len(blob) - 8:
        raise InputError(f"{path}: header length {hlen} exceeds the file size")
    try:
        header = json.loads(blob[8:8 + hlen].decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise InputError(f"{path}: malformed JSON header: {e}")
    if not isinstance(header, dict):
        raise InputError(f"{path}: header is not a JSON object")
    data = memoryview(blob)[8 + hlen:]
    meta = header.pop("__metadata__", {}) or {}
    if not isinstance(meta, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in meta.items()):
        raise InputError(f"{path}: __metadata__ is not a string map")
    tensors = {}
    for name, info in header.items():
        try:
            dtype = info["dtype"]
            shape = [int(s) for s in info["shape"]]
            begin, end = (int(o) for o in info["data_offsets"])
        except (KeyError, TypeError, ValueError):
            raise InputError(f"{path}: tensor '{name}': malformed header entry")
        if dtype not in _DTYPES:
            raise InputError(f"{path}: tensor '{name}': dtype {dtype} "
                             "not supported (F32, F64, I8 or I32 expected)")
        dt = _DTYPES[dtype]
        count = int(np.prod(shape)) if shape else 1
        if not (0 <= begin <= end <= len(data)) or end - begin != count * dt.itemsize:
            raise InputError(f"{path}: tensor '{name}': data_offsets [{begin}, {end}] "
                             f"do not fit shape {shape} {dtype} "
                             f"(data section is {len(data)} bytes)")
        arr = np.frombuffer(data[begin:end], dtype=dt)
        arr = arr.astype(dt.newbyteorder("=")) if raw else arr.astype(np.float64)
        tensors[name] = arr.reshape(shape)
    return tensors, meta
