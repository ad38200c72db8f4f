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
model; formats, quant, lowp, outliers. This file is its command
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

from npref.model import Model  # noqa: E402
from npref.outliers import check_lowp  # noqa: E402
from npref.tensorfile import InputError, read_safetensors  # noqa: E402

PROG = "verify_dump"


def errors(y, truth):
    diff = y - truth
    tn = float(np.linalg.norm(truth))
    rel = float(np.linalg.norm(diff)) / tn if tn > 0 else float(np.linalg.norm(diff))
    return rel, float(np.max(np.abs(diff)))


def check_truth_f32(path, truth):
    """(passed, failed): every float64 truth value must round to binary32
    (nearest, ties to even: NumPy's astype) as "truth.f32", the truth's
    proven float32, says, bit for bit. cicheck keeps the float64 on the
    proven side of a binary32 midpoint, where rounding to nearest double
    would land on the tie. A dump without truth.f32 (before cicheck wrote
    it) is not checked, and says so."""
    outs, _ = read_safetensors(path, raw=True)
    if "truth.f32" not in outs:
        print("  note: no truth.f32 in outputs.safetensors (an older dump): the "
              "truth's binary32 is not checked")
        return 0, 0
    t32 = outs["truth.f32"]
    if t32.dtype != np.float32 or t32.shape != truth.shape:
        print(f"  truth.f32: {t32.dtype} {list(t32.shape)}, want float32 "
              f"{list(truth.shape)}  FAIL")
        return 0, 1
    got = truth.astype(np.float32)
    diff = np.flatnonzero(got.view(np.uint32) != t32.view(np.uint32))
    ok = diff.size == 0
    print(f"  truth vs truth.f32: {truth.size - diff.size} of {truth.size} round to it "
          f"(binary32, nearest even)  {'PASS' if ok else 'FAIL'}")
    for i in diff[:5]:
        print(f"    truth[{i}] = {float(truth.flat[i]).hex()} rounds to "
              f"{float(got.flat[i]).hex()}, truth.f32 {float(t32.flat[i]).hex()}")
    return int(ok), int(not ok)


def main(argv=None):
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
    a = ap.parse_args(argv)
    if not (a.rtol > 0 and a.xf_equiv > 0 and a.xf_differs >= a.xf_equiv):
        print(f"{PROG}: need rtol > 0 and 0 < xf-equiv <= xf-differs",
              file=sys.stderr)
        return 2
    np.seterr(all="ignore")  # non-finite results are reported, not raised

    passed = failed = 0
    unreadable = False
    try:
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
    except InputError as e:
        print(f"{PROG}: error: {e}", file=sys.stderr)
        print(f"{PROG}: 0 passed, 0 failed")
        return 2

    rel, mab = errors(y, truth)
    ok = bool(np.all(np.isfinite(y))) and rel <= a.rtol
    print(f"  original vs truth: rel_norm2 {rel:.3e}  max_abs {mab:.3e}  "
          f"(rtol {a.rtol:g})  {'PASS' if ok else 'FAIL'}")
    passed += ok
    failed += not ok
    if not ok and np.all(np.isfinite(y)):
        # a common cause: truth had each output row's mean removed
        rc, _ = errors(y - y.mean(axis=1, keepdims=True), truth)
        if rc <= a.rtol:
            print(f"  note: truth equals the re-run with each output row's mean "
                  f"removed (rel_norm2 {rc:.3e}): cicheck centered this "
                  f"{c.readout} output (metadata readout.center = "
                  f"{str(c.readout_center).lower()})"
)

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
        label = os.path.basename(p)[:-len(".f64.safetensors")]
        try:
            xm = Model(p)
            label = xm.meta.get("transform", label)
            kind = xm.meta.get("kind", "?")
            expect = xm.meta.get("expect", "equivalent")
            yx = xm.forward()
            if yx.shape != truth.shape:
                raise InputError(f"{p}: output shape {list(yx.shape)} != truth "
                                 f"shape {list(truth.shape)}")
        except InputError as e:
            print(f"{PROG}: error: {e}", file=sys.stderr)
            unreadable = True
            continue
        r, m = errors(yx, truth)
        # a transform computed at bf16's 8 bits: the thresholds of
        # cic_xform_thresholds (equivalent up to 2^-4, broken from 2^-2)
        eq, br = ((2.0 ** -4, 2.0 ** -2) if xm.meta.get("precision") == "bf16"
                  else (a.xf_equiv, a.xf_differs))
        # a rotation from a file is exact only to its dtype's precision
        # (cic_xform_thresholds): float32 2^(12-24), float64 2^(20-53)
        qbits = int(xm.meta.get("q_file_bits", "0"))
        if xm.meta.get("q") == "file" and 0 < qbits < 53:
            eq = 2.0 ** (12 - 24) if qbits >= 24 else 2.0 ** -4
            br = a.xf_differs if qbits >= 24 else 2.0 ** -2
        if not np.all(np.isfinite(yx)) or r > br:
            verdict = "broken"
        elif r <= eq:
            verdict = "equivalent"
        else:
            verdict = "inconclusive"
        ok = verdict == expect
        per_sample = []
        if xm.cfg.block == "dit" and xm.cfg.kind == "static-fold":
            # folded for one conditioning vector: that sample must match the
            # truth, every other sample must differ
            cal = xm.cfg.calibration
            n = xm.cfg.tokens
            for s in range(xm.cfg.samples):
                rows = slice(s * n, (s + 1) * n)
                rs, ms = errors(yx[rows], truth[rows])
                fin = bool(np.all(np.isfinite(yx[rows])))
                if s == cal:
                    sok = fin and rs <= a.xf_equiv
                    want = "equivalent"
                else:
                    sok = not fin or rs > a.xf_differs
                    want = "broken"
                per_sample.append((s, rs, ms, want, sok))
            ok = ok and all(t[4] for t in per_sample)
        print(f"  transform {label} ({kind}) vs truth: rel_norm2 {r:.3e}  "
              f"max_abs {m:.3e}  {verdict} (expected {expect})  "
              f"{'PASS' if ok else 'FAIL'}")
        for s, rs, ms, want, sok in per_sample:
            tag = " (calibration" + (", metadata absent: sample 0 assumed)"
                                     if xm.cfg.calibration_defaulted else ")")
            print(f"    sample {s}{tag if s == xm.cfg.calibration else ''}: "
                  f"rel_norm2 {rs:.3e}  max_abs {ms:.3e}  expected {want}  "
                  f"{'PASS' if sok else 'FAIL'}")
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
