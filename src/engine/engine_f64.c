/* SPDX-License-Identifier: MIT */
/* engine_f64.c: the float64 engine, the template engine_real.h instantiated
 * with double: the f32 engine's graph, formulas, order of operations and
 * FLOP bookings, in double precision (OpenBLAS dgemm or the fixed-order
 * loop; exp/erf/tanh/sqrt from libm). It sits between the f32 engine and
 * the MPFR reference: what the f32 errors become when only the arithmetic
 * changes. Weights and inputs are the tensors' unrounded hp values rounded
 * to double (round to nearest) when present and !rounded_weights, else
 * their float32 values (exact in double); each tensor is converted once per
 * run and freed at its end. */
#define REAL double
#define RC(x) x
#define R_GEMM cblas_dgemm
#define R_EXP exp
#define R_ERF erf
#define R_TANH tanh
#define R_SQRT sqrt
#define R_POW pow
#define R_COS cos
#define R_SIN sin
#define R_VALS_OWNED 1
#define R_VALS_CREATE(r, id, rounded) cic_tensor_f64_create(&(r)->m->t[id], rounded)

#include "../base/mpvec.h"
#include "../model/model.h"

#include <stdbool.h>
#include <stdlib.h>

#include "engine_real.h"

int cic_engine_f64_run(double *out, const cic_model *m, enum cic_matmul mm,
                       bool rounded_weights, const cic_run_opts *o)
{
    return real_run(out, m, mm, rounded_weights, o, NULL);
}
