# SPDX-License-Identifier: MIT
"""npref: the independent NumPy float64 re-run of a `cicheck run --dump DIR`;
scripts/verify_dump.py is its command line.

Modules, each importing only modules listed before it (no circle):
  tensorfile  safetensors read by hand; InputError (an unreadable dump)
  acts        the activations
  hadamard    Sylvester, Paley and regular Hadamard matrices, fast_q
  config      Cfg: a model's configuration from the dump's metadata
  graph       Graph: a dumped model and the float64 pieces of its blocks
  blocks      forward of the preln, rmsnorm and parallel blocks
  adaln       forward of the dit block under each adaLN strategy
  model       Model: Graph + forward() by block
  checks      the re-runs compared with the truth (original, truth.f32,
              each transformed model)
  formats     the binary formats of src/base/format.c, rounding to them
  quant       the scale rules of src/base/quant.h in float32 arithmetic
  lowp        LowpCheck: one engine file recomputed bit for bit
  outliers    the low-precision check of a dump and report.json's
              lowp.outliers recomputed
Standard library and NumPy only; the math is not the C engines'.
"""
