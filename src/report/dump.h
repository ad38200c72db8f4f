/* SPDX-License-Identifier: MIT */
/* dump.h: the --dump folder (DESIGN.md section 6): every model's weights and
 * inputs as float32 safetensors under the names of DESIGN.md section 1, and
 * the outputs with the truth as float64, so the same block can be re-run in
 * PyTorch or NumPy. Layout documented in docs/reference/dump.md. */
#ifndef CIC_DUMP_H
#define CIC_DUMP_H

#include "../model/model.h"
#include "report.h"

/* Weights and inputs of m as safetensors at path: 2-D tensors [rows, cols],
 * 1 x n tensors (biases, gains) as 1-D [n], the block input as "input"
 * [samples * tokens, d_model]. meta: NULL-terminated key, value list that is
 * merged with the model's own metadata (block, d_model, heads, tokens,
 * samples, layers, eps, causal, activation, readout, and per norm whether it
 * still centers: "norm.center"). Only tensors the graph reads are written
 * (a fused model has no norm gains). unrounded: float64 copies of the
 * unrounded transformed values instead of the float32 weights. A residual
 * readout's rotation is written as "readout.q" (float64 [d, d]). 0 or -1
 * with d set. */
int cic_dump_model(const char *path, const cic_model *m, const char *const *meta,
                   bool unrounded, cic_diag *d);

/* A low-precision engine lp's storage of m (a case with [[engines.lowp]]),
 * as safetensors at path: the tensors cic_dump_model writes (not
 * readout.q), each as float32 under its name with the values the engine
 * stores (lowp.h, cic_lowp_tensor: a quantized linear's weight by the
 * weights rule or format, everything else, the block input included,
 * rounded to the compute format). A quantized linear's weight under a
 * scale rule adds "<name>.qcodes" (I8, the weight's shape: one code per
 * value as its 8-bit pattern, so codes 128..255 of fp8 patterns and
 * asymmetric int8 read as code - 256), "<name>.qscale" (F32 [n_groups],
 * the groups in row-major order), "<name>.qzero" (I32 [n_groups]:
 * asymmetric int rules) and "<name>.qtensor_scale" (F32 [1]: nvfp4). meta
 * (NULL-terminated key, value list) is followed by engine, weights,
 * activations, compute, weights_from and linear_weights (the quantized
 * linears' weights, comma-separated). 0 or -1 with d set. */
int cic_dump_lowp_model(const char *path, const cic_model *m, const cic_lowp_spec *lp,
                        const char *const *meta, cic_diag *d);

/* The file (without folder) that transform i of c (-1: the original model,
 * -2: the outputs, -3: the activations of a case with [[engines.lowp]])
 * writes into a dump, with the unrounded float64 copy when f64 is set. */
void cic_dump_file_name(char *buf, size_t cap, const cic_case *c, int i, bool f64);

/* The file of low-precision engine e on transform i (-1: the original
 * model, "none"): "<transform>.<engine>.safetensors". */
void cic_dump_lowp_file_name(char *buf, size_t cap, const cic_case *c, int i, int e);

/* CIC_OK when no two files of c's dump have the same name (transforms "a"
 * and "a.f64" would both write a.f64.safetensors, so would transform "a"
 * with an engine "f64"), else CIC_EINPUT with d naming both writers.
 * Checked before a run that dumps. */
int cic_dump_names_check(const cic_case *c, cic_diag *d);

#endif
