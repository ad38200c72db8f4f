# SPDX-License-Identifier: MIT
"""npref.config: a dumped model's configuration, read from its metadata."""

import math

from .acts import ACTS
from .tensorfile import InputError

DIT_KINDS = ("none", "static-fold", "online-unrotate", "per-sample-fold",
             "branch-rotate")


class Cfg:
    def __init__(self, meta, path):
        def need(key):
            if key not in meta:
                raise InputError(f"{path}: metadata '{key}' missing")
            return meta[key]

        def integer(key):
            try:
                v = int(need(key))
            except ValueError:
                raise InputError(f"{path}: metadata '{key}' = '{meta[key]}' "
                                 "is not an integer")
            if v <= 0:
                raise InputError(f"{path}: metadata '{key}' = {v} must be positive")
            return v

        def boolean(key):
            v = need(key)
            if v not in ("true", "false"):
                raise InputError(f"{path}: metadata '{key}' = '{v}' "
                                 "is not true/false")
            return v == "true"

        self.block = need("block")
        if self.block not in ("preln", "rmsnorm", "dit", "parallel"):
            raise InputError(f"{path}: block '{self.block}' not supported "
                             "(preln, rmsnorm, dit or parallel)")
        self.d = integer("d_model")
        self.heads = integer("heads")
        self.tokens = integer("tokens")
        self.samples = integer("samples")
        self.layers = integer("layers")
        self.d_mlp = integer("d_mlp")
        if self.d % self.heads:
            raise InputError(f"{path}: d_model {self.d} not divisible by "
                             f"heads {self.heads}")
        try:
            # eps is the binary32 value the norms use, written as a C hex
            # float ("0x1.4f8b58p-17"): exact.
            v = need("eps")
            self.eps = float.fromhex(v) if "0x" in v.lower() else float(v)
        except ValueError:
            raise InputError(f"{path}: metadata 'eps' = '{meta['eps']}' "
                             "is not a number")
        # rmsnorm (LLaMA attention): RoPE layout and base, key/value heads;
        # absent (older dumps, other blocks): no RoPE, kv_heads = heads
        self.rope = meta.get("rope", "none")
        if self.rope not in ("none", "half", "interleaved"):
            raise InputError(f"{path}: rope '{self.rope}' not supported "
                             "(none, half or interleaved)")
        try:
            self.rope_theta = float(meta.get("rope_theta", "10000"))
        except ValueError:
            raise InputError(f"{path}: metadata 'rope_theta' = "
                             f"'{meta['rope_theta']}' is not a number")
        if not self.rope_theta > 0 or not math.isfinite(self.rope_theta):
            raise InputError(f"{path}: rope_theta {self.rope_theta} must be > 0")
        self.kv_heads = integer("kv_heads") if "kv_heads" in meta else self.heads
        if self.heads % self.kv_heads:
            raise InputError(f"{path}: kv_heads {self.kv_heads} does not divide "
                             f"heads {self.heads}")
        if self.rope != "none" and (self.d // self.heads) % 2:
            raise InputError(f"{path}: rope needs an even head size, d_model / heads "
                             f"= {self.d // self.heads}")
        self.causal = boolean("causal")
        self.act = need("activation")
        if self.act not in ACTS:
            raise InputError(f"{path}: activation '{self.act}' not supported "
                             f"({', '.join(sorted(ACTS))})")
        self.readout = need("readout")
        if self.readout not in ("head", "residual"):
            raise InputError(f"{path}: readout '{self.readout}' not supported")
        self.center = boolean("norm.center")
        self.readout_center = (meta.get("readout.center", "true" if self.block in
                                        ("preln", "dit", "parallel") else "false")
                               == "true")
        # dit: the transform kind and how its stream is kept (DESIGN.md 3).
        # The original model has no kind; transformed dumps must say which.
        self.kind = meta.get("kind", "none")
        if self.block == "dit":
            if self.kind not in DIT_KINDS:
                raise InputError(f"{path}: kind '{self.kind}' not supported for "
                                 f"block dit ({', '.join(DIT_KINDS)})")
            if self.kind in ("static-fold", "online-unrotate", "per-sample-fold"):
                self.stream = need("stream")
                if self.stream not in ("centered", "mean-preserving"):
                    raise InputError(f"{path}: stream '{self.stream}' not supported "
                                     "(centered or mean-preserving)")
            else:
                self.stream = meta.get("stream", "none")
            self.fast = (boolean("fast") if self.kind in ("online-unrotate",
                                                          "branch-rotate")
                         else False)
            self.calibration = None
            self.calibration_defaulted = False
            if self.kind == "static-fold":
                if "calibration" in meta:
                    try:
                        self.calibration = int(meta["calibration"])
                    except ValueError:
                        raise InputError(f"{path}: metadata 'calibration' = "
                                         f"'{meta['calibration']}' is not an integer")
                    if not 0 <= self.calibration < self.samples:
                        raise InputError(f"{path}: calibration {self.calibration} "
                                         f"outside 0..{self.samples - 1}")
                else:
                    self.calibration = 0
                    self.calibration_defaulted = True
