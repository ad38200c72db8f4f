#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""verify_dump.py: independent float64 re-run of a `cicheck run --dump DIR`.

Rebuilds each dumped transformer block (preln, rmsnorm, dit, parallel) in NumPy float64
from the math in DESIGN.md sections 1 and 3 (not from the C engines) and
compares it with the MPFR truth that cicheck wrote to DIR/outputs.safetensors.

  verify_dump.py DIR [--rtol 1e-12] [--xf-equiv 1e-12] [--xf-differs 1e-3]
                     [--report PATH] [--stat-rtol 1e-9]

Checks:
  original  DIR/original.safetensors re-run in float64 must reproduce
            outputs["truth"] within rtol (2-norm relative).
  truth     every outputs["truth"] value must round to binary32 (nearest,
            ties to even) as outputs["truth.f32"], the proven float32, bit
            for bit (a dump without truth.f32 is not checked, said so).
  transform every DIR/<name>.f64.safetensors (the transformed weights as
            cicheck computed them, unrounded, stored as float64) is re-run in
            float64 and compared with truth: a transform whose metadata says
            expect = equivalent must reproduce truth within rtol; one that
            expects broken must differ by more than --xf-differs. A residual
            readout is mapped back with the dumped "readout.q" (y Q^T) and
            centered when metadata readout.center is true.
  dit       the adaLN strategies (metadata kind: static-fold, online-unrotate,
            per-sample-fold, branch-rotate; stream; fast; calibration) are
            re-run from their math. A static-fold model is also compared per
            sample: its calibration sample (metadata calibration, else 0, said
            so) must match truth, every other sample must differ.
            The final layer's output is compared as is (DESIGN.md 1, 4).
  lowp      (cases with [[engines.lowp]]) every DIR/<transform>.<engine>.safetensors
            is recomputed from the model's dumped weights (<transform>.safetensors,
            original.safetensors for none; with weights_from = unrounded the
            <transform>.f64.safetensors copy for the plain formats) by the
            rules of src/base/quant.h in NumPy float32 arithmetic: int4/int8
            symmetric or asymmetric with clipping per tensor, row or group,
            fp8-e4m3/fp8-e5m2, mxfp4, nvfp4, and bf16/fp16 rounding (ties to
            even); dequantized values, codes, scales, zero points and tensor
            scales must agree bit for bit (a float64 copy exactly at a
            midpoint of the format may round either way: counted, shown).
  outliers  with report.json of the same run (--report, or DIR/report.json):
            every row of lowp.outliers (kurtosis, max_over_rms, top_share
            within --stat-rtol, top_channels and chan_max exactly) is
            recomputed from DIR/activations.safetensors (inputs) and the
            model's float32 weights, and every low-precision result row has
            its engine file.

Exit status: 0 every check passes, 1 one fails, 2 unreadable input (missing
file, malformed safetensors, missing tensor or metadata).

Needs only NumPy (Debian python3-numpy); safetensors are parsed by hand.

The re-implementation is the package scripts/npref/ beside this file, each
module importing only those before it in this list: tensorfile
(safetensors, InputError), acts, hadamard, config, graph, blocks, adaln,
model, checks; formats, quant, lowp, outliers. This file is its command
line.
"""

import argparse
import glob
import os
import sys

import numpy as np

# the package beside this file, from any working directory; no __pycache__
# written into the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.dont_write_bytecode = True

from npref.checks import (check_original, check_transform,  # noqa: E402
                          check_truth_f32, errors)
from npref.model import Model  # noqa: E402
from npref.outliers import check_lowp  # noqa: E402
from npref.tensorfile import InputError, read_safetensors  # noqa: E402

PROG = "verify_dump"


def parse_args(argv):
    ap = argparse.ArgumentParser(
        prog="verify_dump.py",
        description="Independent float64 NumPy re-run of a cicheck --dump "
                    "directory, compared with the MPFR truth.")
    ap.add_argument("dir", help="the directory given to cicheck run --dump")
    ap.add_argument("--rtol", type=float, default=1e-12,
                    help="pass when ||y - truth||_2 / ||truth||_2 <= RTOL for "
                         "the original model (default 1e-12)")
    ap.add_argument("--xf-equiv", type=float, default=1e-12,
                    help="a transformed model whose re-run is within this "
                         "relative error of truth is 'equivalent' (default 1e-12)")
    ap.add_argument("--xf-differs", type=float, default=1e-3,
                    help="above this relative error it 'differs'; in between "
                         "'inconclusive' (default 1e-3)")
    ap.add_argument("--report", metavar="PATH",
                    help="report.json of the same run (or the --out folder holding "
                         "it), whose lowp.outliers are recomputed; default "
                         "DIR/report.json when there is one")
    ap.add_argument("--stat-rtol", type=float, default=1e-9,
                    help="relative tolerance of the recomputed outlier statistics "
                         "(the C sums in index order; default 1e-9)")
    return ap.parse_args(argv)


def load_original(a):
    """Read the truth, print the banner, re-run the original model: (truth,
    the outputs, the re-run, its Cfg). Raises InputError."""
    if not os.path.isdir(a.dir):
        raise InputError(f"{a.dir}: not a directory")
    outs, _ = read_safetensors(os.path.join(a.dir, "outputs.safetensors"))
    if "truth" not in outs:
        raise InputError(f"{a.dir}/outputs.safetensors: tensor 'truth' missing")
    truth = outs["truth"]
    orig = Model(os.path.join(a.dir, "original.safetensors"))
    c = orig.cfg
    print(f"{PROG}: {a.dir}: block {c.block}, d_model {c.d}, heads {c.heads}, "
          f"tokens {c.tokens} x samples {c.samples}, layers {c.layers}, "
          f"d_mlp {c.d_mlp}, act {c.act}, eps {c.eps!r}, "
          f"causal {str(c.causal).lower()}, readout {c.readout}")
    y = orig.forward()
    if y.shape != truth.shape:
        raise InputError(f"{a.dir}: re-run output shape {list(y.shape)} != "
                         f"truth shape {list(truth.shape)}")
    return truth, outs, y, c


def main(argv=None):
    a = parse_args(argv)
    if not (a.rtol > 0 and a.xf_equiv > 0 and a.xf_differs >= a.xf_equiv):
        print(f"{PROG}: need rtol > 0 and 0 < xf-equiv <= xf-differs",
              file=sys.stderr)
        return 2
    np.seterr(all="ignore")  # non-finite results are reported, not raised

    passed = failed = 0
    unreadable = False
    try:
        truth, outs, y, c = load_original(a)
    except InputError as e:
        print(f"{PROG}: error: {e}", file=sys.stderr)
        print(f"{PROG}: 0 passed, 0 failed")
        return 2

    ok = check_original(y, truth, c, a.rtol)
    passed += ok
    failed += not ok

    tp, tf = check_truth_f32(os.path.join(a.dir, "outputs.safetensors"), truth)
    passed += tp
    failed += tf

    # informational: what the dumped engine outputs score against truth
    for name in sorted(outs):
        if name not in ("truth", "truth.f32") and outs[name].shape == truth.shape:
            r, m = errors(outs[name], truth)
            print(f"  dumped {name:32s} vs truth: rel_norm2 {r:.3e}  max_abs {m:.3e}")

    xf_paths = sorted(glob.glob(os.path.join(a.dir, "*.f64.safetensors")))
    for p in xf_paths:
        try:
            ok = check_transform(p, truth, a.xf_equiv, a.xf_differs)
        except InputError as e:
            print(f"{PROG}: error: {e}", file=sys.stderr)
            unreadable = True
            continue
        passed += ok
        failed += not ok

    report = a.report
    if report and os.path.isdir(report):
        report = os.path.join(report, "report.json")
    if report is None and os.path.exists(os.path.join(a.dir, "report.json")):
        report = os.path.join(a.dir, "report.json")
    try:
        lp, lf = check_lowp(a.dir, report, a.stat_rtol)
        passed += lp
        failed += lf
    except InputError as e:
        print(f"{PROG}: error: {e}", file=sys.stderr)
        unreadable = True

    print(f"{PROG}: {passed} passed, {failed} failed")
    if unreadable:
        return 2
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
