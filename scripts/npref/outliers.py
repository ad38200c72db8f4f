# SPDX-License-Identifier: MIT
"""npref.outliers: the low-precision check of a dump (every engine file,
then report.json's lowp.outliers recomputed from the dump)."""

import glob
import json
import math
import os

import numpy as np

from .lowp import LowpCheck
from .quant import bits_equal
from .tensorfile import InputError, read_header, read_safetensors


def outlier_stats(x):
    """metric/outlier.h from float32 x [rows, cols], sums in float64:
    (kurtosis, max_over_rms, top_share, top_channels, chan_max)."""
    rows, cols = x.shape
    k = (cols + 99) // 100 if cols > 0 else 0
    chan = np.max(np.abs(x), axis=0) if rows > 0 else np.zeros(cols, np.float32)
    nan = float("nan")
    if rows <= 0 or cols <= 0:
        return nan, nan, nan, k, chan
    v = x.astype(np.float64)
    n = v.size
    mean = v.sum() / n
    d = v - mean
    m2 = (d * d).sum() / n
    m4 = (d * d * d * d).sum() / n
    ms = (v * v).sum() / n
    col = (v * v).sum(axis=0)
    total = col.sum()
    kurt = mor = share = nan
    if math.isfinite(total) and math.isfinite(m4):
        top = np.sort(col)[::-1][:k].sum()
        if m2 > 0:
            kurt = m4 / (m2 * m2)
        if ms > 0:
            mor = float(np.max(np.abs(v))) / math.sqrt(ms)
        if total > 0:
            share = top / total
    return kurt, mor, share, k, chan


def check_report(d, report_path, rtol, lin_by_xf, labels, case):
    """The report of the same run: every low-precision result row has its
    engine file, and every row of lowp.outliers is recomputed from the dump
    (inputs from activations.safetensors, weights from the model's float32
    file). Returns (rows checked, input rows, failures, activations'
    metadata)."""
    try:
        with open(report_path, encoding="utf-8") as f:
            rep = json.load(f)
        rows = rep["lowp"]["outliers"]
        engines = {e["name"] for e in rep["lowp"]["engines"]}
        results = [(x["transform"], x["engine"]) for x in rep["results"]]
        rcase = rep["case"]["name"]
    except (OSError, ValueError) as e:
        raise InputError(f"{report_path}: cannot read report.json: {e}")
    except (KeyError, TypeError) as e:
        raise InputError(f"{report_path}: no lowp section with outliers, engines and "
                         f"results ({e!r} missing): not the report of a case with "
                         "[[engines.lowp]]")
    failed = 0
    if rcase != case:
        print(f"  FAIL {report_path} is the report of case '{rcase}', the dump of '{case}'")
        return 0, 0, 1, {}
    for xf, eng in results:
        if eng in engines and f"{xf}.{eng}" not in labels:
            print(f"  FAIL {xf}.{eng}.safetensors missing (the report has its row)")
            failed += 1
    acts, ameta = read_safetensors(os.path.join(d, "activations.safetensors"), raw=True)
    files = {}
    checked = n_in = 0
    seen_in, seen_w = set(), {}
    for r in rows:
        xf, name, of = r["transform"], r["tensor"], r["of"]
        label = f"outlier {of} {xf}:{name}"
        if of == "input":
            x = acts.get(f"{xf}:{name}")
            seen_in.add(f"{xf}:{name}")
            n_in += 1
            where = "activations.safetensors"
        else:
            fn = "original.safetensors" if xf == "none" else f"{xf}.safetensors"
            if fn not in files:
                files[fn] = read_safetensors(os.path.join(d, fn), raw=True)[0]
            x = files[fn].get(name)
            seen_w.setdefault(xf, set()).add(name)
            where = fn
        if x is None or x.dtype != np.float32 or x.ndim != 2:
            print(f"  FAIL {label}: no float32 matrix '{name}' in {where}")
            failed += 1
            continue
        kurt, mor, share, k, chan = outlier_stats(x)
        bad = []
        for key, v in (("kurtosis", kurt), ("max_over_rms", mor), ("top_share", share)):
            rv = r.get(key)
            rv = float("nan") if rv is None else float(rv)
            if math.isnan(v) or math.isnan(rv):
                if math.isnan(v) != math.isnan(rv):
                    bad.append(f"{key} {rv!r} in the report, recomputed {v!r}")
            elif abs(rv - v) > rtol * abs(v):
                bad.append(f"{key} {rv!r} in the report, recomputed {v!r} "
                           f"(rel {abs(rv - v) / abs(v) if v else float('inf'):.2e})")
        if r.get("top_channels") != k:
            bad.append(f"top_channels {r.get('top_channels')} in the report, recomputed {k}")
        cm = np.array([np.nan if v is None else v for v in r.get("chan_max", [])],
                      dtype=np.float64).astype(np.float32)
        if cm.shape != chan.shape or not bits_equal(cm, chan).all():
            j = (int(np.argmax(~bits_equal(cm, chan))) if cm.shape == chan.shape else None)
            bad.append("chan_max differs" + (f" at channel {j}: {cm[j]!r} in the report, "
                                              f"recomputed {chan[j]!r}" if j is not None else
                                              f" in length ({cm.size} vs {chan.size})"))
        if bad:
            print(f"  FAIL {label}: " + "; ".join(bad))
            failed += 1
        checked += 1
    # every quantized linear's weight has its row, every kept input its row
    # (no rows at all when no f32 engine ran: no tap)
    for xf, lin in lin_by_xf.items():
        if rows and seen_w.get(xf, set()) != lin:
            print(f"  FAIL outliers of {xf}: weight rows {sorted(seen_w.get(xf, set()))} "
                  f"!= the engines' linear_weights {sorted(lin)}")
            failed += 1
    extra = sorted(set(acts) - seen_in)
    if extra:
        print(f"  FAIL activations.safetensors: inputs without an outlier row: "
              f"{', '.join(extra[:5])}")
        failed += 1
    return checked, n_in, failed, ameta


def check_lowp(d, report, rtol):
    """The low-precision files of dump d. Returns (passed, failed)."""
    paths = []
    for p in sorted(glob.glob(os.path.join(d, "*.safetensors"))):
        b = os.path.basename(p)
        if b in ("original.safetensors", "outputs.safetensors", "activations.safetensors") \
                or b.endswith(".f64.safetensors"):
            continue
        if "engine" in read_header(p):
            paths.append(p)
    if not paths:
        return 0, 0
    c = LowpCheck(d)
    passed = failed = 0
    lin_by_xf, labels, cases = {}, set(), set()
    for p in paths:
        ok, xf, eng, lin, case = c.file(p)
        labels.add(f"{xf}.{eng}")
        cases.add(case)
        if lin_by_xf.setdefault(xf, lin) != lin:
            print(f"  FAIL {xf}.{eng}: linear_weights differ from another engine's")
            ok = False
        passed += ok
        failed += not ok
    print(f"  low precision: {c.files} engine files, {c.tensors} tensors ({c.values} values; "
          f"{c.rules} by a scale rule: {c.codes} codes, {c.groups} scale groups) "
          f"recomputed{'' if not c.ties else f'; {c.ties} values at a float64 tie (either neighbour taken)'}: "
          f"{'PASS' if not failed else f'FAIL ({c.failed} mismatches)'}")
    if report is None:
        print("  outlier statistics: not checked (no report.json in the dump; give --report)")
        return passed, failed
    checked, n_in, bad, ameta = check_report(d, report, rtol, lin_by_xf, labels,
                                             cases.pop() if len(cases) == 1 else "?")
    print(f"  outlier statistics: {checked} rows of {report} ({n_in} inputs from "
          f"activations.safetensors, {ameta.get('engine', '?')}; {checked - n_in} weights) "
          f"recomputed (rtol {rtol:g}): {'PASS' if not bad else f'FAIL ({bad})'}")
    return passed + (bad == 0), failed + (bad > 0)
