# SPDX-License-Identifier: MIT
"""npref: the independent NumPy float64 re-run of a `cicheck run --dump DIR`;
scripts/verify_dump.py is its command line.

Modules, each importing only modules listed before it (no circle):
  tensorfile  safetensors read by hand; InputError (an unreadable dump)
  formats     the binary formats of src/base/format.c, rounding to them
  quant       the scale rules of src/base/quant.h in float32 arithmetic
  lowp        LowpCheck: one engine file recomputed bit for bit
  outliers    the low-precision check of a dump and report.json's
              lowp.outliers recomputed
Standard library and NumPy only; the math is not the C engines'.
"""
