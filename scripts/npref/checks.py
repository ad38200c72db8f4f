# SPDX-License-Identifier: MIT
"""npref.checks: the comparisons of a re-run with the truth (the original
model, the truth's binary32, each transformed model) and what they print."""

import os

import numpy as np

from .model import Model
from .tensorfile import InputError, read_safetensors


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


def check_original(y, truth, c, rtol):
    """The original model's re-run y vs truth (c its Cfg): prints the line,
    and a note when truth is y with each row's mean removed. Returns ok."""
    rel, mab = errors(y, truth)
    ok = bool(np.all(np.isfinite(y))) and rel <= rtol
    print(f"  original vs truth: rel_norm2 {rel:.3e}  max_abs {mab:.3e}  "
          f"(rtol {rtol:g})  {'PASS' if ok else 'FAIL'}")
    if not ok and np.all(np.isfinite(y)):
        # a common cause: truth had each output row's mean removed
        rc, _ = errors(y - y.mean(axis=1, keepdims=True), truth)
        if rc <= rtol:
            print(f"  note: truth equals the re-run with each output row's mean "
                  f"removed (rel_norm2 {rc:.3e}): cicheck centered this "
                  f"{c.readout} output (metadata readout.center = "
                  f"{str(c.readout_center).lower()})")
    return ok


def check_transform(p, truth, xf_equiv, xf_differs):
    """One <name>.f64.safetensors p re-run and judged against truth by its
    metadata's expect; prints its lines, returns ok. Raises InputError
    (having printed nothing) when p cannot be re-run."""
    label = os.path.basename(p)[:-len(".f64.safetensors")]
    xm = Model(p)
    label = xm.meta.get("transform", label)
    kind = xm.meta.get("kind", "?")
    expect = xm.meta.get("expect", "equivalent")
    yx = xm.forward()
    if yx.shape != truth.shape:
        raise InputError(f"{p}: output shape {list(yx.shape)} != truth "
                         f"shape {list(truth.shape)}")
    r, m = errors(yx, truth)
    # a transform computed at bf16's 8 bits: the thresholds of
    # cic_xform_thresholds (equivalent up to 2^-4, broken from 2^-2)
    eq, br = ((2.0 ** -4, 2.0 ** -2) if xm.meta.get("precision") == "bf16"
              else (xf_equiv, xf_differs))
    # a rotation from a file is exact only to its dtype's precision
    # (cic_xform_thresholds): float32 2^(12-24), float64 2^(20-53)
    qbits = int(xm.meta.get("q_file_bits", "0"))
    if xm.meta.get("q") == "file" and 0 < qbits < 53:
        eq = 2.0 ** (12 - 24) if qbits >= 24 else 2.0 ** -4
        br = xf_differs if qbits >= 24 else 2.0 ** -2
    if not np.all(np.isfinite(yx)) or r > br:
        verdict = "broken"
    elif r <= eq:
        verdict = "equivalent"
    else:
        verdict = "inconclusive"
    ok = verdict == expect
    per_sample = []
    if xm.cfg.block == "dit" and xm.cfg.kind == "static-fold":
        per_sample = static_fold_samples(xm.cfg, yx, truth, xf_equiv, xf_differs)
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
    return ok


def static_fold_samples(c, yx, truth, xf_equiv, xf_differs):
    """A static fold (dit, Cfg c) per sample: [(sample, rel_norm2, max_abs,
    expected, ok)]."""
    per_sample = []
    # folded for one conditioning vector: that sample must match the
    # truth, every other sample must differ
    cal = c.calibration
    n = c.tokens
    for s in range(c.samples):
        rows = slice(s * n, (s + 1) * n)
        rs, ms = errors(yx[rows], truth[rows])
        fin = bool(np.all(np.isfinite(yx[rows])))
        if s == cal:
            sok = fin and rs <= xf_equiv
            want = "equivalent"
        else:
            sok = not fin or rs > xf_differs
            want = "broken"
        per_sample.append((s, rs, ms, want, sok))
    return per_sample
