/* SPDX-License-Identifier: MIT */
/* engine_f64.c: the float64 engine, the template engine_real.h instantiated
 * with double: the f32 engine's graph, formulas, order of operations and
 * FLOP bookings, in double precision (OpenBLAS dgemm or the fixed-order
 * loop; exp/erf/tanh/sqrt from libm). It sits between the f32 engine and
 * the MPFR reference: what the f32 errors become when only the arithmetic
 * changes. Weights and inputs are the tensors' unrounded values rounded
 * to double (round to nearest) when present and !rounded_weights, else
 * their float32 values (exact in double). Unrounded values held as doubles
 * (model.h) are read in place; the others are made into the run's arena
 * before the first op that reads them (split by rows over the threads),
 * so at a 7B layer's size one weight is made at a time, not the whole
 * layer's 1.6 GB. */
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

#include "../base/mpvec.h"
#include "../model/lazy.h"
#include "../model/model.h"

#include <stdbool.h>
#include <stdlib.h>

#include "engine_real.h"

static const double *vals_borrow(realrun *r, int id, bool rounded)
{
    const cic_tensor *t = &r->m->t[id];
    return !rounded && t->f64 ? t->f64 : NULL;
}

typedef struct {
    double *dst;
    const cic_tensor *t;
    bool rounded;
} f64_job;

static void f64_rows(void *ctx, int lo, int hi, int th)
{
    const f64_job *jb = ctx;
    size_t c = (size_t)jb->t->cols;
    (void)th;
    cic_tensor_f64_range(jb->dst + (size_t)lo * c, jb->t, jb->rounded, (size_t)lo * c,
                         (size_t)hi * c);
}

static int vals_fill(realrun *r, int id, bool rounded, double *dst)
{
    const cic_tensor *t = &r->m->t[id];
    f64_job jb;
    if (!rounded && t->lazy)
        return cic_lazy_make_f64(t->lazy, dst);
    jb.dst = dst;
    jb.t = t;
    jb.rounded = rounded;
    /* about 1 ns a value from float32, 10 from MPFR */
    par_range(r, t->rows, (!rounded && t->hp ? 10.0 : 1.0) * t->rows * (double)t->cols, f64_rows,
              &jb);
    return 0;
}

int cic_engine_f64_run(double *out, const cic_model *m, enum cic_matmul mm,
                       bool rounded_weights, const cic_run_opts *o)
{
    return real_run(out, m, mm, rounded_weights, o, NULL);
}
