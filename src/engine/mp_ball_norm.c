/* SPDX-License-Identifier: MIT */
/* mp_ball_norm.c: the norm-wise bound of a ball run (docs/design.md,
 * "The norm-wise bound"). Beside each value's radius, every row of every
 * tensor the run computes carries e, an upper bound of the 2-norm of
 * (exact row - midpoint row). An op's rule offers a candidate for each
 * output row from its inputs' e and its own roundings (next_nrm, INFINITY
 * when it has none); here the op's result is settled: e is the smaller of
 * the candidate and the 2-norm of the row's radii (both bound the same
 * error), and each radius is cut to e (|x_i| <= ||x||_2). Both bounds
 * hold, so the smaller holds: the elementwise radii lose nothing, and
 * the 2-norm, which grows through a linear layer by its spectral norm
 * instead of by sum |W|, keeps a deep model's radii from growing with the
 * infinity norm. */
#include "mp_ball_int.h"

#include <stdlib.h>

typedef struct {
    cic_ball *b;
    double *e;
    size_t cols;
} finish_job;

static void finish_rows(void *c, size_t lo, size_t hi)
{
    const finish_job *J = c;
    size_t i, j;
    for (i = lo; i < hi; i++) {
        double *r = J->b->next + i * J->cols;
        double e = norm2_up(r, J->cols, 1), cand = J->b->next_nrm[i];
        if (cand < e) /* false for NaN: then the radii's norm stands */
            e = cand;
        if (!(e >= 0))
            e = INFINITY;
        for (j = 0; j < J->cols; j++)
            if (e < r[j])
                r[j] = e;
        J->e[i] = e;
    }
}

int _cic_nb_finish(cic_ball *b, const cic_op *o)
{
    size_t rows = (size_t)cic_model_run_rows(b->m, o->out, b->ns);
    finish_job J = {b, malloc((rows ? rows : 1) * sizeof(double)), (size_t)b->m->t[o->out].cols};
    if (!J.e)
        return -1;
    ball_parallel(b, rows, finish_rows, &J);
    free(b->nrm[o->out]);
    b->nrm[o->out] = J.e;
    return 0;
}

/* ---- the roundings of the enclosed ops ---- */

typedef struct {
    const cic_ball *b;
    const mpfr_t *y;
    double *rho;
    size_t cols;
} rho_job;

static void rho_rows(void *c, size_t lo, size_t hi)
{
    const rho_job *J = c;
    size_t i, j;
    for (i = lo; i < hi; i++) {
        double s = 0;
        for (j = 0; j < J->cols; j++) {
            size_t k = i * J->cols + j;
            double d = dist_up(J->b->enc0 + k, J->y[k], (slong)J->b->prec);
            s += d * d;
        }
        J->rho[i] = up(sqrt(bound_sum(s, J->cols)));
    }
}

int _cic_nb_rho(const cic_ball *b, const mpfr_t *y, size_t rows, size_t cols, double *rho)
{
    rho_job J = {b, y, rho, cols};
    ball_parallel(b, rows, rho_rows, &J);
    return 0;
}
