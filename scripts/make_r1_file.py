#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""make_r1_file.py: writes cases/data/r1-random-256.safetensors, the rotation
cases/quarot-llama.toml reads as a SpinQuant-style R1 (q = "file:..."): a
Haar-random orthogonal matrix of order 256 (numpy default_rng(20240516), QR
of a Gaussian, columns signed by diag(R)), stored as float32 like a learned
rotation, under the tensor name R1. Deterministic: running it again writes
the same bytes."""
import json
import os
import struct
import sys

import numpy as np


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "..", "cases", "data",
        "r1-random-256.safetensors")
    rng = np.random.default_rng(20240516)
    a = rng.standard_normal((256, 256))
    q, r = np.linalg.qr(a)
    q = q * np.sign(np.diag(r))[None, :]
    q32 = q.astype("<f4")
    hdr = {"R1": {"dtype": "F32", "shape": [256, 256], "data_offsets": [0, q32.nbytes]},
           "__metadata__": {"what": "a Haar-random orthogonal R1 of order 256 (numpy "
                                    "default_rng(20240516), QR of a Gaussian, signs of "
                                    "diag(R)), float32",
                            "made_by": "scripts/make_r1_file.py"}}
    h = json.dumps(hdr, separators=(",", ":")).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(out, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + q32.tobytes())
    err = np.abs(q32.astype(np.float64).T @ q32.astype(np.float64) - np.eye(256)).max()
    print(f"wrote {out}: max |Q^T Q - I| = {err:.3g}")


if __name__ == "__main__":
    main()
