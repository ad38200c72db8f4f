/* SPDX-License-Identifier: MIT */
/* case.h: the case loader. It turns a TOML file (the layout is in
 * src/kind/kind.h) into a validated cic_case, or a cic_diag naming
 * file:line:column. It sits just under the pipeline: it reads the block,
 * transform and engine descriptors to know what is allowed, and checks a
 * case against the model, transform and engine modules. */
#ifndef CIC_CASE_H
#define CIC_CASE_H

#include "../kind/kind.h"

/* Load and validate. Returns CIC_OK, or CIC_EINPUT with d set (a missing or
 * unreadable file is CIC_EINPUT too, with line 0). Never aborts on input. */
int cic_case_load(cic_case *c, const char *path, cic_diag *d);
/* Same, from a string; path is used only in messages and for the default
 * name. */
int cic_case_load_string(cic_case *c, const char *text, const char *path,
                         cic_diag *d);

/* Rough peak bytes a run of this case needs (weights at mpfr_prec for every
 * transform, activations of both engines). */
uint64_t cic_case_memory_estimate(const cic_case *c);
/* What the estimate is made of, a clause for messages: "weights 46.1 GiB
 * (218103808 weights in 4 copies: ...), activations 0.1 GiB (...)". The
 * limit is the run's (--max-memory, default half the machine's memory;
 * src/pipeline/pipeline.c); the loader sets none. */
void cic_case_memory_explain(char *buf, size_t cap, const cic_case *c);

/* Weight values of the case's original model (the estimate's count). */
uint64_t cic_case_weight_count(const cic_case *c);

/* Index of the low-precision engine named name, or -1. */
int cic_case_lowp_find(const cic_case *c, const char *name);

/* Index of the transform named name, or -1. */
int cic_case_xform_find(const cic_case *c, const char *name);

/* Point i (0 <= i < sweep.points) of a sweep: c with the axes' values set.
 * i is a mixed-radix number whose least significant digit is the seed
 * index (seeds of one setting are neighbours), then std, d_cond, samples,
 * heads, outlier_scale, mpfr_prec, layers, tokens, and d_model the most
 * significant (axes that are not swept have one value). d_mlp is recomputed
 * from mlp_ratio. CIC_OK, or CIC_EINPUT with d (file:line:col of the
 * offending list) when the point is not a valid case (d_model not divisible
 * by heads, too much memory, ...). */
int cic_case_sweep_point(cic_case *out, const cic_case *c, long i, cic_diag *d);

#endif
