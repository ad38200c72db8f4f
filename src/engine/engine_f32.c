/* SPDX-License-Identifier: MIT */
/* engine_f32.c: the float32 engine. The body is the template engine_real.h
 * instantiated with float: matmuls go to OpenBLAS sgemm or to a fixed-order
 * loop (one summation order on every CPU, so its bits are reproducible
 * anywhere); everything else is plain float code compiled with
 * -ffp-contract=off, so its bits depend only on libm's expf/erff/tanhf
 * (split by rows over OpenBLAS's thread count, the same bits for any
 * count).
 * Weights and inputs are the tensors' float32 values, read in place.
 * Workload: small to mid-size blocks, rows = tokens of the selected samples.
 * The walker books each op's FLOPs from the op table (engine.h convention). */
#define REAL float
#define RC(x) x##f
#define R_GEMM cblas_sgemm
#define R_EXP expf
#define R_ERF erff
#define R_TANH tanhf
#define R_SQRT sqrtf
#define R_POW powf
#define R_COS cosf
#define R_SIN sinf
#define R_VALS_OWNED 0
#define R_TAP 1
#include "engine_real.h"

int cic_engine_f32_run(float *out, const cic_model *m, enum cic_matmul mm,
                       const cic_run_opts *o)
{
    return real_run(out, m, mm, false, o, NULL);
}
