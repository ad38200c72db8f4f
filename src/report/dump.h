/* SPDX-License-Identifier: MIT */
/* dump.h: the --dump folder (DESIGN.md section 6): every model's weights and
 * inputs as float32 safetensors under the names of DESIGN.md section 1, and
 * the outputs with the truth as float64, so the same block can be re-run in
 * PyTorch or NumPy. Layout documented in README.md ("Dump layout"). */
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

/* The file (without folder) that transform i of c (-1: the original model,
 * -2: the outputs) writes into a dump, with the unrounded float64 copy when
 * f64 is set. */
void cic_dump_file_name(char *buf, size_t cap, const cic_case *c, int i, bool f64);

/* CIC_OK when no two files of c's dump have the same name (transforms "a"
 * and "a.f64" would both write a.f64.safetensors), else CIC_EINPUT with d
 * naming both transforms. Checked before a run that dumps. */
int cic_dump_names_check(const cic_case *c, cic_diag *d);

#endif
