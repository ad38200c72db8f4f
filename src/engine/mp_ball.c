/* SPDX-License-Identifier: MIT */
/* mp_ball.c: the radii of a ball run of the MPFR engine (mp_ball.h).
 *
 * Arithmetic on radii is double in round-to-nearest, made safe by up():
 * every quantity is nonnegative, and an expression of at most 6 operations
 * on nonnegative values lies below its computed value times (1 + 2^-50)
 * plus 2^-1060 (which covers the absolute error of results that
 * underflow). A long sum of nonnegative terms, in any order (OpenBLAS's
 * included), is bounded by the classic gamma_n bound: bound_sum
 * (mp_ball_int.h). Magnitudes of midpoints are taken rounded away from
 * zero (absup), so they bound the midpoint. u = 2^-prec: a correctly
 * rounded operation at prec bits is within u |result| of its exact result.
 *
 * This file: the ball's life, the walk's hooks over the table of ball
 * rules (one per op kind, mp_ball_int.h) and the proof of a value. */
#include "mp_ball_int.h"

#include "../base/mpvec.h"
#include "../base/specnorm.h"

#include <assert.h>
#include <stdlib.h>

cic_ball *cic_ball_create(const cic_model *m, mpfr_prec_t prec, int ns, int threads)
{
    cic_ball *b = cic_calloc(1, sizeof *b);
    if (!b)
        return NULL;
    b->m = m;
    b->prec = prec;
    b->u = ldexp(1.0, -(int)prec);
    b->ns = ns;
    b->nt = threads;
    b->nb = true;
    b->dg.id = b->ln.id = -1;
    b->rad = cic_calloc((size_t)m->n_t, sizeof *b->rad);
    b->absv = cic_calloc((size_t)m->n_t, sizeof *b->absv);
    b->nrm = cic_calloc((size_t)m->n_t, sizeof *b->nrm);
    if (!m->rt)
        b->sn_own = cic_specnorm_cache_create();
    if (!b->rad || !b->absv || !b->nrm || (!m->rt && !b->sn_own)) {
        cic_ball_destroy(b);
        return NULL;
    }
    return b;
}

void cic_ball_destroy(cic_ball *b)
{
    int i;
    if (!b)
        return;
    for (i = 0; b->rad && i < b->m->n_t; i++)
        free(b->rad[i]);
    for (i = 0; b->absv && i < b->m->n_t; i++)
        free(b->absv[i]);
    for (i = 0; b->nrm && i < b->m->n_t; i++)
        free(b->nrm[i]);
    free(b->rad);
    free(b->absv);
    free(b->nrm);
    free(b->next);
    free(b->next_nrm);
    free(b->aux);
    free(b->act_lr);
    cic_specnorm_cache_destroy(b->sn_own);
    free(b->layer_last);
    _cic_ball_pair_free(&b->dg);
    _cic_ball_pair_free(&b->ln);
    cic_specnorm_gram_destroy(b->gram);
    drop_enc(b);
    free(b);
    flint_cleanup();
}

int cic_ball_config(cic_ball *b, const cic_ball_out *o)
{
    int id = b->m->input;
    size_t rows = (size_t)cic_model_run_rows(b->m, id, b->ns), n = count(b, id), i;
    b->nb = !o->elementwise;
    if (o->layer_rel && o->n_layers > 0) {
        int k;
        b->layer_rel = o->layer_rel;
        b->n_layers = o->n_layers;
        if (!(b->layer_last = malloc((size_t)o->n_layers * sizeof *b->layer_last)))
            return -1;
        for (k = 0; k < o->n_layers; k++) {
            b->layer_last[k] = -1;
            b->layer_rel[k] = 0;
        }
        for (k = 0; k < b->m->n_ops; k++)
            if (b->m->ops[k].layer >= 0 && b->m->ops[k].layer < o->n_layers)
                b->layer_last[b->m->ops[k].layer] = k;
    }
    if (o->in_rad <= 0 && o->in_nrm <= 0)
        return 0;
    b->rad[id] = malloc(n * sizeof(double));
    b->nrm[id] = malloc(rows * sizeof(double));
    if (!b->rad[id] || !b->nrm[id])
        return -1;
    for (i = 0; i < n; i++)
        b->rad[id][i] = o->in_rad;
    for (i = 0; i < rows; i++)
        b->nrm[id][i] = b->nb ? o->in_nrm : INFINITY;
    return 0;
}

void cic_ball_drop(cic_ball *b, int id)
{
    free(b->rad[id]);
    free(b->nrm[id]);
    b->rad[id] = NULL;
    b->nrm[id] = NULL;
}

void cic_ball_result(const cic_ball *b, int id, size_t n, cic_ball_out *out)
{
    size_t i;
    out->failed = b->failed;
    snprintf(out->why, sizeof out->why, "%s", b->failed ? b->why : "");
    for (i = 0; i < n; i++)
        out->rad[i] = b->failed ? INFINITY : rad_at(b->rad[id], i);
    if (out->nrm)
        for (i = 0; i < n / (size_t)b->m->t[id].cols; i++)
            out->nrm[i] = b->failed ? INFINITY : b->nb ? nrm_at(b, id, i) : NAN;
}

/* ---- the walk's hooks ---- */

/* The rule of every op kind, by kind (mp_ball_int.h): a kind of CIC_OPS
 * without its _cic_ball_rule_<op> does not compile. */
static const cic_ball_rule *const BALL_RULE[] = {
#define BALL_RULE_(E, fn, name, alias) [CIC_OP_##E] = &_cic_ball_rule_##fn,
    CIC_OPS(BALL_RULE_)
#undef BALL_RULE_
};
static_assert(sizeof BALL_RULE / sizeof BALL_RULE[0] == CIC_OP_COUNT, "ball rule table");

/* The largest radius / |midpoint| over the nonzero midpoints. */
static double layer_rel(const double *r, const mpfr_t *y, size_t n)
{
    double w = 0;
    size_t i;
    for (i = 0; i < n; i++) {
        double a = fabs(mpfr_get_d(y[i], MPFR_RNDZ));
        if (!isfinite(r[i]))
            return INFINITY;
        if (a > 0 && r[i] / a > w)
            w = r[i] / a;
    }
    return w;
}

int cic_ball_pre(cic_ball *b, const cic_op *o, cic_ball_mid_fn mid, void *ctx)
{
    size_t n = count(b, o->out), rows = (size_t)cic_model_run_rows(b->m, o->out, b->ns), i;
    if (b->failed)
        return 0;
    free(b->next);
    free(b->next_nrm);
    b->next_nrm = NULL;
    if (!(b->next = cic_calloc(n ? n : 1, sizeof *b->next)) ||
        !(b->next_nrm = malloc((rows ? rows : 1) * sizeof *b->next_nrm)))
        return -1;
    for (i = 0; i < rows; i++)
        b->next_nrm[i] = INFINITY;
    return BALL_RULE[o->kind]->pre(b, o, mid, ctx);
}

int cic_ball_post(cic_ball *b, const cic_op *o, const mpfr_t *y)
{
    int k;
    if (b->failed)
        return 0;
    if (BALL_RULE[o->kind]->post(b, o, y) < 0)
        return -1;
    if (b->failed)
        return 0;
    if (b->nb && _cic_nb_finish(b, o) < 0)
        return -1;
    if (b->layer_rel && o->layer >= 0 && o->layer < b->n_layers &&
        b->layer_last[o->layer] == (int)(o - b->m->ops))
        b->layer_rel[o->layer] = layer_rel(b->next, y, count(b, o->out));
    for (k = 0; k < 3; k++)
        if (o->in[k] >= 0) {
            free(b->absv[o->in[k]]);
            b->absv[o->in[k]] = NULL;
        }
    free(b->rad[o->out]);
    b->rad[o->out] = b->next;
    b->next = NULL;
    return 0;
}

size_t cic_ball_prove(const mpfr_t *mid, const double *rad, size_t n, unsigned char *ok,
                      double *maxrel)
{
    size_t i, proven = 0;
    mpfr_t lo, hi;
    mpfr_prec_t p = n ? mpfr_get_prec(mid[0]) : 64;
    mpfr_inits2(p, lo, hi, (mpfr_ptr)0);
    *maxrel = 0;
    for (i = 0; i < n; i++) {
        bool yes = false;
        if (isfinite(rad[i]) && mpfr_number_p(mid[i])) {
            mpfr_sub_d(lo, mid[i], rad[i], MPFR_RNDD);
            mpfr_add_d(hi, mid[i], rad[i], MPFR_RNDU);
            yes = cic_mp_get_f32(lo) == cic_mp_get_f32(hi);
            if (!mpfr_zero_p(mid[i])) {
                double rel = rad[i] / fabs(mpfr_get_d(mid[i], MPFR_RNDZ));
                *maxrel = rel > *maxrel ? rel : *maxrel;
            }
        } else {
            *maxrel = INFINITY;
        }
        proven += yes;
        if (ok)
            ok[i] = yes;
    }
    mpfr_clears(lo, hi, (mpfr_ptr)0);
    return proven;
}
