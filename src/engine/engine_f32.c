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
 * Each kernel books the FLOPs it performs (engine.h convention). This file
 * also holds the code both real engines share outside the template. */
#define REAL float
#define RC(x) x##f
#define R_GEMM cblas_sgemm
#define R_EXP expf
#define R_ERF erff
#define R_TANH tanhf
#define R_SQRT sqrtf
#define R_VALS_OWNED 0
#include "engine_real.h"

const char *const CIC_ENGINE_F32_NAME[CIC_MATMUL_COUNT] = {"f32-openblas",
                                                           "f32-fixed-order"};

double cic_flop_total(const cic_flop_count *fc)
{
    double s = 0;
    int i;
    for (i = 0; i < CIC_SITE_COUNT; i++)
        s += fc->site[i];
    return s;
}

/* FLOPs of one activation call (engine.h convention), booked by every
 * engine. */
double cic_engine_act_flops(enum cic_act a)
{
    switch (a) {
    case CIC_ACT_GELU:
        return 5;      /* mul, erf, add, mul, mul */
    case CIC_ACT_GELU_TANH:
        return 9;      /* x*x*x (2), mul, add, mul, tanh, add, mul, mul */
    case CIC_ACT_RELU:
        return 1;      /* compare */
    default:
        return 3;      /* exp, add, div */
    }
}

int cic_engine_f32_run(float *out, const cic_model *m, enum cic_matmul mm,
                       const cic_run_opts *o)
{
    return real_run(out, m, mm, false, o);
}
