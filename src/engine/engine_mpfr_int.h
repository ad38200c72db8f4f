/* SPDX-License-Identifier: MIT */
/* engine_mpfr_int.h: what the MPFR engine's files share (internal to
 * src/engine): the run's state (mprun) and per-thread scratch (mpws), the
 * thread split, the source of an op's operands (wsrc) and one kernel per
 * op kind, _cic_mpk_<op>, the entries of the walker's table
 * (engine_mpfr.c). The kernels live in engine_mpfr_lin.c (linear, fold),
 * engine_mpfr_attn.c (attention) and engine_mpfr_elem.c (the row and
 * elementwise ops); they call only what this header defines, never the
 * walker. */
#ifndef CIC_ENGINE_MPFR_INT_H
#define CIC_ENGINE_MPFR_INT_H

#include "engine.h"

#include "../base/mpslice.h"
#include "../base/mpvec.h"
#include "../base/par.h"
#include "../xform/fold.h"
#include "mp_ball.h"
#include "mp_fn.h"

#include <stdbool.h>

#define CIC_MAX_THREADS 16

/* Per-thread scratch of the threaded ops (linear rows, attention heads,
 * activations). Results do not depend on the split: every output value is
 * computed whole by one thread, with correctly rounded operations. */
typedef struct {
    cic_dot_scratch dot;
    mpfr_t t0, t1, t2;
    mpfr_ptr *ptr;
    mpfr_t *p;     /* attention probabilities, tokens values */
    double *bscr;  /* a ball run's attention scratch */
    cic_mp_fn_ws fn; /* exp, tanh, erf through Arb (mp_fn.h) */
    bool ok;
} mpws;

typedef struct {
    const cic_model *m;
    mpfr_prec_t prec;
    bool rounded;
    int rows;        /* token rows */
    int ns, s0;      /* samples covered, first sample */
    mpfr_t **buf;     /* activations, per tensor id */
    mpfr_t **wt;      /* weights converted from f32 (24 bits) or made from
                       * their recipe, per tensor id (not the linear ops'
                       * weights: those are packed straight from f32 or
                       * the recipe, one op at a time) */
    cic_dot_scratch dot;
    mpfr_ptr *ptr;    /* for plain sums */
    mpfr_t t0, t1, t2, c_scale;
    cic_flop_count fc;
    cic_fold_ws fold[CIC_MAX_THREADS]; /* per thread, made on first use */
    bool has_fold;
    mpws ws[CIC_MAX_THREADS];
    int nt;
    cic_ball *ball;   /* a ball run's radii (mp_ball.h), or NULL */
    cic_slice_ws *slice; /* the linear ops' dgemm slices (mpslice.h), kept across ops */
    bool inited;      /* t0 .. c_scale initialised */
} mprun;

/* Run fn(ctx, lo, hi, ws) over [0, n) split in contiguous ranges, one per
 * thread (thread 0 is the caller; base/par.h), each with its workspace. */
typedef void (*range_fn)(void *ctx, int lo, int hi, mpws *w);
typedef struct {
    range_fn fn;
    void *ctx;
    mprun *r;
} range_job;

static inline void range_run(void *a, size_t lo, size_t hi, int t)
{
    range_job *j = a;
    j->fn(j->ctx, (int)lo, (int)hi, &j->r->ws[t]);
}

static inline void parallel(mprun *r, int n, range_fn fn, void *ctx)
{
    range_job j = {fn, ctx, r};
    cic_par_ranges(n > 0 ? (size_t)n : 0, r->nt, range_run, &j);
}

static inline int rows_of(const mprun *r, int id)
{
    return cic_model_run_rows(r->m, id, r->ns);
}

/* Values of a weight or input tensor as MPFR: hp when present (and not asked
 * for the rounded weights), else the exact f32 values at 24 bits. */
static inline const mpfr_t *wsrc(mprun *r, int id)
{
    const cic_tensor *t = &r->m->t[id];
    size_t row0 = t->rows_kind == CIC_ROWS_SAMPLES ? (size_t)r->s0
                                                   : (size_t)r->s0 * r->m->cfg.tokens;
    size_t off = t->role == CIC_T_INPUT ? row0 * (size_t)t->cols : 0;
    if (t->role == CIC_T_ACT)
        return (const mpfr_t *)r->buf[id];
    if (t->hp && !r->rounded)
        return (const mpfr_t *)t->hp + off;
    if (!r->wt[id] && (t->lazy || t->f64) && !r->rounded) {
        mpfr_t *tmp; /* a recipe's values or the doubles, made (freed with the run) */
        if (!cic_tensor_hp_make(t, &tmp))
            return NULL;
        r->wt[id] = tmp;
    } else if (!r->wt[id]) {
        size_t n = (size_t)t->rows * t->cols;
        r->wt[id] = cic_mpvec_create(n, 24);
        if (!r->wt[id])
            return NULL;
        cic_mpvec_set_f32(r->wt[id], t->f32, n);
    }
    return (const mpfr_t *)r->wt[id] + off;
}

/* The kernels (0, or -1 when memory runs out), one per op kind of
 * CIC_OPS (op.h), the entries of MP_KERNEL (engine_mpfr.c). Listed by
 * hand, not generated from CIC_OPS, so that an op kind added without its
 * kernel is a compile error (an undeclared name in the table). */
int _cic_mpk_linear(mprun *r, const cic_op *o, mpfr_t *y);     /* engine_mpfr_lin.c */
int _cic_mpk_norm(mprun *r, const cic_op *o, mpfr_t *y);       /* engine_mpfr_elem.c */
int _cic_mpk_attn(mprun *r, const cic_op *o, mpfr_t *y);       /* engine_mpfr_attn.c */
int _cic_mpk_act(mprun *r, const cic_op *o, mpfr_t *y);        /* engine_mpfr_elem.c */
int _cic_mpk_glu(mprun *r, const cic_op *o, mpfr_t *y);        /* engine_mpfr_elem.c */
int _cic_mpk_add(mprun *r, const cic_op *o, mpfr_t *y);        /* engine_mpfr_elem.c */
int _cic_mpk_modulate(mprun *r, const cic_op *o, mpfr_t *y);   /* engine_mpfr_elem.c */
int _cic_mpk_gate(mprun *r, const cic_op *o, mpfr_t *y);       /* engine_mpfr_elem.c */
int _cic_mpk_center(mprun *r, const cic_op *o, mpfr_t *y);     /* engine_mpfr_elem.c */
int _cic_mpk_fwht(mprun *r, const cic_op *o, mpfr_t *y);       /* engine_mpfr_elem.c */
int _cic_mpk_fold_in_w(mprun *r, const cic_op *o, mpfr_t *y);  /* engine_mpfr_lin.c */
int _cic_mpk_fold_in_b(mprun *r, const cic_op *o, mpfr_t *y);  /* engine_mpfr_lin.c */
int _cic_mpk_fold_out_w(mprun *r, const cic_op *o, mpfr_t *y); /* engine_mpfr_lin.c */
int _cic_mpk_fold_out_b(mprun *r, const cic_op *o, mpfr_t *y); /* engine_mpfr_lin.c */
int _cic_mpk_rope(mprun *r, const cic_op *o, mpfr_t *y);       /* engine_mpfr_elem.c */

#endif
