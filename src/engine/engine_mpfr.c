/* SPDX-License-Identifier: MIT */
/* engine_mpfr.c: the reference engine. Every op of the graph at prec bits
 * with MPFR, each elementary operation correctly rounded and every dot
 * product (matmuls, attention scores, P V, the variance) correctly rounded as
 * a whole through cic_mp_dot. Formulas and their order mirror the real
 * engines' kernels (engine_real.h) op for op, so the f32 engine differs from
 * this one by rounding alone. One kernel per op kind (op.h), with one
 * prototype,
 *     int _cic_mpk_<op>(mprun *r, const cic_op *o, mpfr_t *y)
 * (0, or -1 when memory runs out; engine_mpfr_int.h), in the table
 * MP_KERNEL indexed by op kind; the kernels live in engine_mpfr_lin.c,
 * engine_mpfr_attn.c and engine_mpfr_elem.c. This file holds the run's
 * state and the walker: cic_engine_mpfr_run checks the graph once
 * (cic_model_check), walks it and books each op's FLOPs from the op table,
 * as the real engines do.
 * Workload: the truth of blocks up to a LLaMA-2-7B layer; linear ops go
 * through exact dgemm slices (base/mpslice.h) where those are cheaper than
 * the row kernel, a fraction of a nanosecond per multiply-add on such
 * shapes (bench/run.sh part (1) measures both). */
#include "engine_mpfr_int.h"

#include <assert.h>
#include <string.h>

static_assert(CIC_MAX_THREADS == CIC_RT_MPFR_MAX_THREADS,
              "the per-thread scratch holds the context's most threads");

static int mpws_init(mpws *w, size_t cap, size_t tokens, mpfr_prec_t prec)
{
    memset(w, 0, sizeof *w);
    if (cic_dot_scratch_init(&w->dot, cap, prec) < 0)
        return -1;
    w->ptr = cic_calloc(cap + 1, sizeof *w->ptr);
    w->p = cic_mpvec_create(tokens, prec);
    mpfr_inits2(prec, w->t0, w->t1, w->t2, (mpfr_ptr)0);
    cic_mp_fn_ws_init(&w->fn);
    w->ok = true;
    return w->ptr && w->p ? 0 : -1;
}

static void mpws_clear(mpws *w, size_t tokens)
{
    if (!w->ok)
        return;
    cic_dot_scratch_clear(&w->dot);
    free(w->ptr);
    free(w->bscr);
    cic_mpvec_destroy(w->p, tokens);
    mpfr_clears(w->t0, w->t1, w->t2, (mpfr_ptr)0);
    cic_mp_fn_ws_clear(&w->fn);
    w->ok = false;
}

/* ---- the kernel table and the walker ---- */

typedef int (*mp_kernel)(mprun *r, const cic_op *o, mpfr_t *y);

static const mp_kernel MP_KERNEL[] = {
#define MP_KERNEL_(E, fn, name, alias) [CIC_OP_##E] = _cic_mpk_##fn,
    CIC_OPS(MP_KERNEL_)
#undef MP_KERNEL_
};
static_assert(sizeof MP_KERNEL / sizeof MP_KERNEL[0] == CIC_OP_COUNT, "mpfr kernel table");

static size_t max_inner(const cic_model *m)
{
    size_t k = (size_t)m->cfg.tokens;
    int i;
    for (i = 0; i < m->n_t; i++)
        if ((size_t)m->t[i].cols > k)
            k = (size_t)m->t[i].cols;
    return k;
}

/* The run's state and scratch (r zeroed by the caller); r->inited when
 * the scalars are set. 0, or -1 when memory runs out (mprun_clear frees
 * what was made either way). */
static int mprun_init(mprun *r, const cic_model *m, mpfr_prec_t prec, bool rounded, int s0,
                      int ns, bool ball)
{
    size_t cap = max_inner(m);
    int i;
    r->m = m;
    r->prec = prec;
    r->rounded = rounded;
    r->rows = ns * m->cfg.tokens;
    r->ns = ns;
    r->s0 = s0;
    r->buf = cic_calloc((size_t)m->n_t, sizeof *r->buf);
    r->wt = cic_calloc((size_t)m->n_t, sizeof *r->wt);
    r->ptr = cic_calloc(cap + 1, sizeof *r->ptr);
    if (!r->buf || !r->wt || !r->ptr)
        return -1;
    for (i = 0; i < m->n_t; i++)
        CIC_ASSERT(cic_tensor_hp_prec(&m->t[i]) <= prec);
    if (cic_dot_scratch_init(&r->dot, cap, prec) < 0)
        return -1;
    r->nt = cic_rt_mpfr_threads(m->rt); /* the run's context (base/rt.h) */
    for (i = 0; i < r->nt; i++)
        if (mpws_init(&r->ws[i], cap, (size_t)m->cfg.tokens, prec) < 0 ||
            (ball && !(r->ws[i].bscr = malloc(cic_ball_attn_scratch(m) * sizeof(double)))))
            return -1;
    if (ball && !(r->ball = cic_ball_create(m, prec, ns, r->nt)))
        return -1;
    if (!(r->slice = cic_mp_slice_ws_create()))
        return -1;
    mpfr_inits2(prec, r->t0, r->t1, r->t2, r->c_scale, (mpfr_ptr)0);
    r->inited = true;
    return 0;
}

static void mprun_clear(mprun *r)
{
    const cic_model *m = r->m;
    int i;
    if (r->inited)
        mpfr_clears(r->t0, r->t1, r->t2, r->c_scale, (mpfr_ptr)0);
    cic_dot_scratch_clear(&r->dot);
    for (i = 0; i < CIC_MAX_THREADS; i++)
        mpws_clear(&r->ws[i], (size_t)m->cfg.tokens);
    if (r->has_fold)
        for (i = 0; i < r->nt; i++)
            cic_fold_ws_clear(&r->fold[i]);
    if (r->buf)
        for (i = 0; i < m->n_t; i++)
            cic_mpvec_destroy(r->buf[i], (size_t)rows_of(r, i) * m->t[i].cols);
    if (r->wt)
        for (i = 0; i < m->n_t; i++)
            cic_mpvec_destroy(r->wt[i], (size_t)m->t[i].rows * m->t[i].cols);
    free(r->buf);
    free(r->wt);
    free(r->ptr);
    cic_ball_destroy(r->ball);
    cic_mp_slice_ws_destroy(r->slice);
}

static const mpfr_t *ball_mid(void *r, int id)
{
    return wsrc(r, id);
}

/* Op i of the walk: its output's storage, the kernel, the FLOPs, then the
 * activations that die here are freed (last[t]: the last op reading t). */
static int mprun_op(mprun *r, int i, const int *last)
{
    const cic_model *m = r->m;
    const cic_op *op = &m->ops[i];
    int k;
    if (!r->buf[op->out]) {
        r->buf[op->out] =
            cic_mpvec_create((size_t)rows_of(r, op->out) * m->t[op->out].cols, r->prec);
        if (!r->buf[op->out])
            return -1;
    }
    if (r->ball && cic_ball_pre(r->ball, op, ball_mid, r) < 0)
        return -1;
    if (MP_KERNEL[op->kind](r, op, r->buf[op->out]) < 0)
        return -1;
    if (r->ball && cic_ball_post(r->ball, op, (const mpfr_t *)r->buf[op->out]) < 0)
        return -1;
    r->fc.site[op->site] += cic_op_cost(m, op, r->ns);
    for (k = 0; k < 3; k++) {
        int t = op->in[k];
        if (t >= 0 && last[t] == i && t != m->output && m->t[t].role == CIC_T_ACT) {
            cic_mpvec_destroy(r->buf[t], (size_t)rows_of(r, t) * m->t[t].cols);
            r->buf[t] = NULL;
            if (r->ball)
                cic_ball_drop(r->ball, t);
        }
    }
    return 0;
}

/* The tensor tap after op i: its output's values, and its radii in a ball
 * run (copied out of the ball). 0, or -1 when memory runs out. */
static int tensor_tap(mprun *r, const cic_op *op, const cic_tensor_tap *t)
{
    size_t n = (size_t)rows_of(r, op->out) * r->m->t[op->out].cols;
    cic_ball_out bo;
    if (!t || !t->want[op->out] || !t->mp)
        return 0;
    memset(&bo, 0, sizeof bo);
    if (r->ball && !(bo.rad = malloc((n ? n : 1) * sizeof *bo.rad)))
        return -1;
    if (r->ball)
        cic_ball_result(r->ball, op->out, n, &bo);
    t->mp(t->ctx, op->out, (const mpfr_t *)r->buf[op->out], bo.rad, rows_of(r, op->out));
    free(bo.rad);
    return 0;
}

int cic_engine_mpfr_run(mpfr_t *out, const cic_model *m, mpfr_prec_t prec,
                        bool rounded_weights, const cic_run_opts *o)
{
    mprun r;
    int *last = NULL, i, k, rc = cic_model_check(m, NULL, 0), s0 = o ? o->sample0 : 0;
    int ns = (o && o->n_samples > 0) ? o->n_samples : m->cfg.samples;
    size_t n, j;
    const mpfr_t *res;
    if (rc != CIC_GRAPH_OK)
        return rc;
    rc = -1;
    memset(&r, 0, sizeof r);
    CIC_ASSERT(s0 >= 0 && s0 + ns <= m->cfg.samples);
    last = cic_calloc((size_t)m->n_t, sizeof *last);
    if (mprun_init(&r, m, prec, rounded_weights, s0, ns, o && o->ball) < 0 || !last ||
        (r.ball && cic_ball_config(r.ball, o->ball) < 0))
        goto cleanup;
    for (i = 0; i < m->n_ops; i++)
        for (k = 0; k < 3; k++)
            if (m->ops[i].in[k] >= 0)
                last[m->ops[i].in[k]] = i;
    for (i = 0; i < m->n_ops; i++) {
        const cic_op *op = &m->ops[i];
        if (mprun_op(&r, i, last) < 0)
            goto cleanup;
        if (o && o->lin_tap_mp && op->kind == CIC_OP_LINEAR &&
            (op->role == CIC_ROLE_READER || op->role == CIC_ROLE_WRITER))
            o->lin_tap_mp(o->tap_ctx, i, (const mpfr_t *)r.buf[op->out], rows_of(&r, op->out));
        if (o && o->op_tap_mp)
            o->op_tap_mp(o->tap_ctx, i, (const mpfr_t *)r.buf[op->out], rows_of(&r, op->out));
        if (o && tensor_tap(&r, op, o->tensor_tap) < 0)
            goto cleanup;
        if (o && o->progress)
            o->progress(o->progress_ctx, cic_flop_total(&r.fc));
    }
    res = wsrc(&r, m->output);
    if (!res)
        goto cleanup;
    n = (size_t)rows_of(&r, m->output) * m->t[m->output].cols;
    for (j = 0; j < n; j++)
        mpfr_set(out[j], res[j], MPFR_RNDN);
    if (r.ball)
        cic_ball_result(r.ball, m->output, n, o->ball);
    if (o && o->flops)
        for (i = 0; i < CIC_SITE_COUNT; i++)
            o->flops->site[i] += r.fc.site[i];
    rc = 0;
cleanup:
    mprun_clear(&r);
    free(last);
    return rc;
}
