/* SPDX-License-Identifier: MIT */
/* engine_mpfr.c: the reference engine. Every op of the graph at prec bits
 * with MPFR, each elementary operation correctly rounded and every dot
 * product (matmuls, attention scores, P V, the variance) correctly rounded as
 * a whole through cic_mp_dot. Formulas and their order mirror the real
 * engines' kernels (engine_real.h) op for op, so the f32 engine differs from
 * this one by rounding alone. One kernel per op kind (op.h), with one
 * prototype,
 *     static int mp_<op>(mprun *r, const cic_op *o, mpfr_t *y)
 * (0, or -1 when memory runs out), in the table MP_KERNEL indexed by op
 * kind; cic_engine_mpfr_run checks the graph once (cic_model_check), walks
 * it and books each op's FLOPs from the op table, as the real engines do.
 * Workload: the truth of blocks up to a LLaMA-2-7B layer; linear ops go
 * through exact dgemm slices (base/mpslice.h) where those are cheaper than
 * the row kernel, a fraction of a nanosecond per multiply-add on such
 * shapes (bench/run.sh part (1) measures both). */
#include "engine.h"

#include "../base/mpslice.h"
#include "../base/mpvec.h"
#include "../base/par.h"
#include "../xform/fold.h"
#include "../xform/qmat.h"
#include "../model/lazy.h"
#include "mp_act.h"
#include "mp_ball.h"
#include "mp_fn.h"
#include "mp_fwht.h"

#include <assert.h>
#include <stdatomic.h>
#include <string.h>
#include <unistd.h>

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

static int g_threads = 0; /* 0: one per online core */

void cic_engine_mpfr_set_threads(int n)
{
    g_threads = n;
}

int cic_engine_mpfr_threads(void)
{
    long n = g_threads > 0 ? g_threads : sysconf(_SC_NPROCESSORS_ONLN);
    if (n < 1)
        n = 1;
    return n > CIC_MAX_THREADS ? CIC_MAX_THREADS : (int)n;
}

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

/* Run fn(ctx, lo, hi, ws) over [0, n) split in contiguous ranges, one per
 * thread (thread 0 is the caller; base/par.h), each with its workspace. */
typedef void (*range_fn)(void *ctx, int lo, int hi, mpws *w);
typedef struct {
    range_fn fn;
    void *ctx;
    mprun *r;
} range_job;

static void range_run(void *a, size_t lo, size_t hi, int t)
{
    range_job *j = a;
    j->fn(j->ctx, (int)lo, (int)hi, &j->r->ws[t]);
}

static void parallel(mprun *r, int n, range_fn fn, void *ctx)
{
    range_job j = {fn, ctx, r};
    cic_par_ranges(n > 0 ? (size_t)n : 0, r->nt, range_run, &j);
}

static int rows_of(const mprun *r, int id)
{
    return cic_model_run_rows(r->m, id, r->ns);
}

/* Values of a weight or input tensor as MPFR: hp when present (and not asked
 * for the rounded weights), else the exact f32 values at 24 bits. */
static const mpfr_t *wsrc(mprun *r, int id)
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

typedef struct {
    const mpfr_t *x, *w, *b;
    const cic_mp_pack *wpack; /* every weight row, per sample when per */
    mpfr_t *y;
    bool per, bper;
    int n, k, per_s;
    const bool *sdone; /* samples the dgemm path finished */
    atomic_int failed; /* a range could not have its row scratch */
} lin_job;

/* Rows of one sample share weights: each range is cut at sample ends. */
static void linear_rows(void *c, int lo, int hi, mpws *ws)
{
    lin_job *L = c;
    int i, end;
    mpfr_t *wrow = NULL; /* w NULL: a declined dot's row, out of the pack */
    if (!L->w && !(wrow = cic_mpvec_create((size_t)L->k, L->wpack[0].prec ? L->wpack[0].prec : 24))) {
        atomic_store(&L->failed, 1);
        return;
    }
    for (i = lo; i < hi; i = end) {
        int s = i / L->per_s;
        const mpfr_t *w = !L->w ? NULL : L->per ? L->w + (size_t)s * L->n * L->k : L->w;
        const mpfr_t *b = L->b ? (L->bper ? L->b + (size_t)s * L->n : L->b) : NULL;
        end = (s + 1) * L->per_s < hi ? (s + 1) * L->per_s : hi;
        if (L->sdone[s])
            continue;
        cic_mp_linear_rows(L->y + (size_t)i * L->n, L->x + (size_t)i * L->k, (size_t)(end - i),
                           w, L->wpack + (L->per ? (size_t)s * L->n : 0), b, (size_t)L->n,
                           (size_t)L->k, wrow, &ws->dot);
    }
    cic_mpvec_destroy(wrow, (size_t)L->k);
}

/* The weights of a linear op packed once, a view per output row: straight
 * from the float32 values or the recipe of a weight that has no MPFR
 * values (*w = NULL then: declined dots read their row back from the
 * pack), else from the MPFR values wsrc gives (*w). 0, or -1. */
static int linear_pack(mprun *r, const cic_op *o, const mpfr_t **w, cic_mp_pack *all,
                       cic_mp_pack **views, size_t nw, size_t k)
{
    const cic_tensor *t = &r->m->t[o->w];
    *w = NULL;
    if (t->role == CIC_T_WEIGHT && !((t->hp || t->f64) && !r->rounded)) {
        int rc;
        if (t->lazy && !r->rounded) {
            if (cic_lazy_make_pack(t->lazy, all) < 0)
                return -1;
            if (!(*views = cic_mp_pack_row_views(all, nw, k))) {
                cic_mp_pack_clear(all);
                return -1;
            }
            return 0;
        }
        rc = cic_mp_pack_rows_f32(all, views, t->f32, nw, k);
        if (rc <= 0)
            return rc;
        /* NaN or Inf: MPFR's rules, through the mpfr_t values */
    }
    *w = wsrc(r, o->w);
    if (!*w)
        return -1;
    return cic_mp_pack_rows(all, views, *w, nw, k);
}

/* The op through exact dgemm slices (mpslice.h), the whole op at once, or
 * sample by sample when the weights or the bias are per sample; sdone[s]
 * for the samples it finished (the others go to the row kernel). Called
 * from the run's thread, so OpenBLAS's own threads run the dgemm. True
 * when every sample is done. */
static bool linear_sliced(mprun *r, const lin_job *L, int R, bool *sdone)
{
    int s, calls = L->per || L->bper ? r->ns : 1, rows = R / calls;
    size_t n = (size_t)L->n, k = (size_t)L->k;
    bool all = true;
    for (s = 0; s < calls; s++) {
        const mpfr_t *w = !L->w ? NULL : L->per ? L->w + (size_t)s * n * k : L->w;
        const mpfr_t *b = !L->b ? NULL : L->bper ? L->b + (size_t)s * n : L->b;
        bool done = cic_mp_linear_sliced(L->y + (size_t)s * rows * n, L->x + (size_t)s * rows * k,
                                         (size_t)rows, w, L->wpack + (L->per ? (size_t)s * n : 0),
                                         b, n, k, r->nt, r->slice) == 0;
        if (calls > 1)
            sdone[s] = done;
        for (int t = 0; calls == 1 && t < r->ns; t++)
            sdone[t] = done; /* one call: every sample */
        all = all && done;
    }
    return all;
}

static int mp_linear(mprun *r, const cic_op *o, mpfr_t *y)
{
    const cic_tensor *wt = &r->m->t[o->w];
    lin_job L;
    /* group G: the [G, G] weight on rows of G (rows are contiguous) */
    int R = rows_of(r, o->in[0]) * (o->group > 0 ? r->m->t[o->in[0]].cols / o->group : 1);
    L.x = wsrc(r, o->in[0]);
    L.b = o->b >= 0 ? wsrc(r, o->b) : NULL;
    L.y = y;
    L.per = wt->role == CIC_T_ACT; /* folded per sample */
    L.bper = o->b >= 0 && r->m->t[o->b].role == CIC_T_ACT;
    L.n = L.per ? wt->block_rows : wt->rows;
    L.k = wt->cols;
    L.per_s = R / r->ns;
    L.failed = 0;
    if (!L.x || (o->b >= 0 && !L.b))
        return -1;
    {
        /* the weights packed once per op, a view per output row */
        size_t nw = (size_t)L.n * (L.per ? (size_t)r->ns : 1);
        cic_mp_pack all, *views;
        bool *sdone = cic_calloc((size_t)r->ns, sizeof *sdone);
        if (!sdone || linear_pack(r, o, &L.w, &all, &views, nw, (size_t)L.k) < 0) {
            free(sdone);
            return -1;
        }
        L.wpack = views;
        L.sdone = sdone;
        if (!linear_sliced(r, &L, R, sdone))
            parallel(r, R, linear_rows, &L);
        free(views);
        free(sdone);
        cic_mp_pack_clear(&all);
    }
    return atomic_load(&L.failed) ? -1 : 0;
}

static int mp_modulate(mprun *r, const cic_op *o, mpfr_t *y)
{
    const mpfr_t *x = wsrc(r, o->in[0]), *mod = wsrc(r, o->in[1]);
    int d = r->m->t[o->in[0]].cols, mc = r->m->t[o->in[1]].cols, R = rows_of(r, o->in[0]);
    int N = r->m->cfg.tokens, i, j, s;
    mpfr_t *t = cic_mpvec_create((size_t)r->ns * d, r->prec);
    if (!x || !mod || !t) {
        cic_mpvec_destroy(t, (size_t)r->ns * d);
        return -1;
    }
    for (s = 0; s < r->ns; s++)
        for (j = 0; j < d; j++)
            mpfr_add_ui(t[(size_t)s * d + j], mod[(size_t)s * mc + o->in_col[1] + j], 1,
                        MPFR_RNDN);
    for (i = 0; i < R; i++) {
        const mpfr_t *ts = t + (size_t)(i / N) * d;
        const mpfr_t *sh = mod + (size_t)(i / N) * mc + o->in_col[0];
        for (j = 0; j < d; j++) {
            mpfr_mul(y[(size_t)i * d + j], x[(size_t)i * d + j], ts[j], MPFR_RNDN);
            mpfr_add(y[(size_t)i * d + j], y[(size_t)i * d + j], sh[j], MPFR_RNDN);
        }
    }
    cic_mpvec_destroy(t, (size_t)r->ns * d);
    return 0;
}

static int mp_gate(mprun *r, const cic_op *o, mpfr_t *y)
{
    const mpfr_t *x = wsrc(r, o->in[0]), *mod = wsrc(r, o->in[1]);
    int d = r->m->t[o->in[0]].cols, mc = r->m->t[o->in[1]].cols, R = rows_of(r, o->in[0]);
    int N = r->m->cfg.tokens, i, j;
    if (!x || !mod)
        return -1;
    for (i = 0; i < R; i++) {
        const mpfr_t *g = mod + (size_t)(i / N) * mc + o->in_col[0];
        for (j = 0; j < d; j++)
            mpfr_mul(y[(size_t)i * d + j], g[j], x[(size_t)i * d + j], MPFR_RNDN);
    }
    return 0;
}

static int mp_center(mprun *r, const cic_op *o, mpfr_t *y)
{
    const mpfr_t *x = wsrc(r, o->in[0]);
    int d = r->m->t[o->in[0]].cols, R = rows_of(r, o->in[0]), i, j;
    if (!x)
        return -1;
    for (i = 0; i < R; i++) {
        for (j = 0; j < d; j++)
            r->ptr[j] = (mpfr_ptr)x[(size_t)i * d + j];
        mpfr_sum(r->t0, r->ptr, (unsigned long)d, MPFR_RNDN);
        mpfr_div_ui(r->t0, r->t0, (unsigned long)d, MPFR_RNDN);
        for (j = 0; j < d; j++)
            mpfr_sub(y[(size_t)i * d + j], x[(size_t)i * d + j], r->t0, MPFR_RNDN);
    }
    return 0;
}

/* Fast randomized Hadamard, w = K * P with K = o->hbase (or the regular
 * Hadamard of order 4^k): the same base, butterflies, block mixing and
 * order of operations as the real engines (engine_real.h, mp_fwht.c), each
 * operation correctly rounded. */
static int mp_fwht(mprun *r, const cic_op *o, mpfr_t *y)
{
    const mpfr_t *x = wsrc(r, o->in[0]), *sg = wsrc(r, o->g);
    /* a row of blocks (group) is that many rows of one block: rows are
     * contiguous */
    int w = o->group > 0 ? o->group : r->m->t[o->in[0]].cols, i, j;
    int R = rows_of(r, o->in[0]) * (r->m->t[o->in[0]].cols / w);
    int K = o->regular ? 1 : o->hbase, na = o->regular ? w : K;
    signed char *hk = NULL;
    mpfr_t *acc = NULL;
    if (!x || !sg || (!o->regular && cic_hadamard_base_k(&hk, K, w) < 0))
        return -1;
    acc = cic_mpvec_create((size_t)na, r->prec);
    if (!acc) {
        free(hk);
        return -1;
    }
    mpfr_set_ui(r->c_scale, (unsigned long)w, MPFR_RNDN);
    mpfr_rec_sqrt(r->c_scale, r->c_scale, MPFR_RNDN);
    for (i = 0; i < R; i++) {
        mpfr_t *v = y + (size_t)i * w;
        for (j = 0; j < w; j++) {
            if (o->transpose)
                mpfr_mul(v[j], x[(size_t)i * w + j], sg[j], MPFR_RNDN);
            else
                mpfr_set(v[j], x[(size_t)i * w + j], MPFR_RNDN);
        }
        if (o->regular)
            cic_mp_fwht_regular_row(v, w, cic_regular_order_k(w), o->transpose, acc, r->t0);
        else
            cic_mp_fwht_row(v, w, K, hk, o->transpose, acc, r->t0);
        for (j = 0; j < w; j++) {
            if (!o->transpose)
                mpfr_mul(v[j], v[j], sg[j], MPFR_RNDN);
            mpfr_mul(v[j], v[j], r->c_scale, MPFR_RNDN);
        }
    }
    cic_mpvec_destroy(acc, (size_t)na);
    free(hk);
    return 0;
}

typedef struct {
    mprun *r;
    const cic_op *o;
    const mpfr_t *mod, *w, *b, *q;
    mpfr_t *y;
    int mc, d, n, kk;
} fold_job;

/* Jobs are samples; thread t uses fold workspace t (found by its mpws). */
static void fold_samples(void *c, int lo, int hi, mpws *w)
{
    const fold_job *F = c;
    const cic_op *o = F->o;
    cic_fold_ws *ws = &F->r->fold[w - F->r->ws];
    int s, d = F->d, n = F->n, kk = F->kk;
    for (s = lo; s < hi; s++) {
        const mpfr_t *v = F->mod + (size_t)s * F->mc + o->in_col[0];
        switch (o->kind) {
        case CIC_OP_FOLD_IN_W:
            cic_fold_in_w(F->y + (size_t)s * n * d, F->w, n, d, v, F->q, ws);
            break;
        case CIC_OP_FOLD_IN_B:
            cic_fold_in_b(F->y + (size_t)s * n, F->w, F->b, n, d, v, ws);
            break;
        case CIC_OP_FOLD_OUT_W:
            cic_fold_out_w(F->y + (size_t)s * d * kk, F->w, d, kk, v, F->q, o->center, ws);
            break;
        case CIC_OP_FOLD_OUT_B:
            cic_fold_out_b(F->y + (size_t)s * d, F->b, d, v, F->q, o->center, ws);
            break;
        default:
            CIC_ASSERT(0 && "fold kind");
        }
    }
}

static int mp_fold(mprun *r, const cic_op *o, mpfr_t *y)
{
    const cic_model *m = r->m;
    fold_job F;
    int d = m->cfg.d_model;
    F.r = r;
    F.o = o;
    F.y = y;
    F.mod = wsrc(r, o->in[0]);
    F.w = o->w >= 0 ? wsrc(r, o->w) : NULL;
    F.b = o->b >= 0 ? wsrc(r, o->b) : NULL;
    F.q = o->g >= 0 ? wsrc(r, o->g) : NULL;
    F.mc = m->t[o->in[0]].cols;
    F.d = d;
    F.n = o->w >= 0 ? m->t[o->w].rows : d;
    F.kk = o->w >= 0 ? m->t[o->w].cols : 1;
    if (!F.mod || (o->w >= 0 && !F.w) || (o->b >= 0 && !F.b) || (o->g >= 0 && !F.q))
        return -1;
    if (!r->has_fold) {
        size_t mx = 0, md = (size_t)d;
        int i;
        for (i = 0; i < m->n_t; i++)
            if (m->t[i].role == CIC_T_WEIGHT) {
                if ((size_t)m->t[i].rows * m->t[i].cols > mx)
                    mx = (size_t)m->t[i].rows * m->t[i].cols;
                if ((size_t)m->t[i].cols > md)
                    md = (size_t)m->t[i].cols;
            }
        for (i = 0; i < r->nt; i++)
            if (cic_fold_ws_init(&r->fold[i], mx, md, r->prec) < 0) {
                while (--i >= 0)
                    cic_fold_ws_clear(&r->fold[i]);
                return -1;
            }
        r->has_fold = true;
    }
    parallel(r, r->ns, fold_samples, &F);
    return 0;
}

static int mp_fold_in_w(mprun *r, const cic_op *o, mpfr_t *y)
{
    return mp_fold(r, o, y);
}

static int mp_fold_in_b(mprun *r, const cic_op *o, mpfr_t *y)
{
    return mp_fold(r, o, y);
}

static int mp_fold_out_w(mprun *r, const cic_op *o, mpfr_t *y)
{
    return mp_fold(r, o, y);
}

static int mp_fold_out_b(mprun *r, const cic_op *o, mpfr_t *y)
{
    return mp_fold(r, o, y);
}

static int mp_norm(mprun *r, const cic_op *o, mpfr_t *y)
{
    const mpfr_t *x = wsrc(r, o->in[0]);
    const mpfr_t *g = o->g >= 0 ? wsrc(r, o->g) : NULL;
    const mpfr_t *b = o->b >= 0 ? wsrc(r, o->b) : NULL;
    int d = r->m->t[o->in[0]].cols, i, j, R = rows_of(r, o->in[0]);
    mpfr_ptr mean = r->t0, var = r->t1;
    if (!x || (o->g >= 0 && !g) || (o->b >= 0 && !b))
        return -1;
    for (i = 0; i < R; i++) {
        const mpfr_t *xr = x + (size_t)i * d;
        mpfr_t *yr = y + (size_t)i * d;
        if (o->center) {
            for (j = 0; j < d; j++)
                r->ptr[j] = (mpfr_ptr)xr[j];
            mpfr_sum(mean, r->ptr, (unsigned long)d, MPFR_RNDN);
            mpfr_div_ui(mean, mean, (unsigned long)d, MPFR_RNDN);
            for (j = 0; j < d; j++)
                mpfr_sub(yr[j], xr[j], mean, MPFR_RNDN);
        } else {
            for (j = 0; j < d; j++)
                mpfr_set(yr[j], xr[j], MPFR_RNDN);
        }
        cic_mp_dot(var, (const mpfr_t *)yr, 1, (const mpfr_t *)yr, 1, (size_t)d,
                   NULL, &r->dot);
        mpfr_div_ui(var, var, (unsigned long)d, MPFR_RNDN);
        mpfr_add_d(var, var, (double)o->eps, MPFR_RNDN);
        mpfr_rec_sqrt(var, var, MPFR_RNDN); /* rstd */
        for (j = 0; j < d; j++) {
            mpfr_mul(yr[j], yr[j], var, MPFR_RNDN);
            if (g)
                mpfr_mul(yr[j], yr[j], g[j], MPFR_RNDN);
            if (b)
                mpfr_add(yr[j], yr[j], b[j], MPFR_RNDN);
        }
    }
    return 0;
}

typedef struct {
    const mpfr_t *q, *k, *v;
    mpfr_t *y;
    int N, d, H, dh, lq, lk, lv, qc, kc, vc;
    int grp;  /* query heads per key/value head */
    bool causal;
    mpfr_srcptr scale;
    const cic_ball *ball;
} attn_job;

/* A head's keys (N rows of dh) and values transposed (dh rows of N),
 * packed once per job, and the packed query row and probabilities: the
 * dot products go through cic_mp_dot_rows_packed, four at a time, each
 * key, value and query limb read from contiguous memory. A dot product the
 * packed path declines takes cic_mp_dot on the mpfr_t values, as the head
 * did before; both are correctly rounded, so the bits are the same. */
typedef struct {
    cic_mp_pack k, vt, q, p; /* k: N dh entries, vt: dh N, q: dh, p: N */
    cic_mp_pack *krow, *vrow;
    bool ok;
} attn_packs;

static void attn_packs_clear(attn_packs *P)
{
    cic_mp_pack_clear(&P->k);
    cic_mp_pack_clear(&P->vt);
    cic_mp_pack_clear(&P->q);
    cic_mp_pack_clear(&P->p);
    free(P->krow);
    free(P->vrow);
    memset(P, 0, sizeof *P);
}

static bool attn_packs_init(attn_packs *P, int N, int dh, mpfr_prec_t prec)
{
    memset(P, 0, sizeof *P);
    P->ok = cic_mp_pack_alloc(&P->k, (size_t)N * dh, prec) == 0 &&
            cic_mp_pack_alloc(&P->vt, (size_t)dh * N, prec) == 0 &&
            cic_mp_pack_alloc(&P->q, (size_t)dh, prec) == 0 &&
            cic_mp_pack_alloc(&P->p, (size_t)N, prec) == 0 &&
            (P->krow = cic_mp_pack_row_views(&P->k, (size_t)N, (size_t)dh)) != NULL;
    if (!P->ok)
        attn_packs_clear(P);
    return P->ok;
}

/* Entries of a pack from strided mpfr_t values; false (the packed path is
 * not for them) when one is NaN or Inf or not at the pack's precision. */
static bool pack_strided(cic_mp_pack *pk, size_t off, const mpfr_t *x, size_t inc, size_t n)
{
    size_t i;
    for (i = 0; i < n; i++) {
        if (!mpfr_number_p(x[i * inc]) || mpfr_get_prec(x[i * inc]) != pk->prec)
            return false;
        cic_mp_pack_set(pk, off + i, x[i * inc]);
    }
    return true;
}

/* The head's keys and values into P (row views and spans made); false when
 * a value is not finite: the head then takes cic_mp_dot throughout. */
static bool attn_pack_head(attn_packs *P, const attn_job *A, const mpfr_t *ks, const mpfr_t *vs)
{
    int N = A->N, dh = A->dh, j, c;
    cic_mp_pack view;
    free(P->vrow);
    P->vrow = NULL;
    for (j = 0; j < N; j++)
        if (!pack_strided(&P->k, (size_t)j * dh, ks + (size_t)j * A->lk, 1, (size_t)dh))
            return false;
    for (c = 0; c < dh; c++)
        if (!pack_strided(&P->vt, (size_t)c * N, vs + c, (size_t)A->lv, (size_t)N))
            return false;
    cic_mp_pack_finish(&P->k);
    cic_mp_pack_finish(&P->vt);
    for (j = 0; j < N; j++) { /* the row views' spans, the keys now set */
        cic_mp_pack_view(&view, &P->k, (size_t)j * dh, (size_t)dh);
        P->krow[j] = view;
    }
    P->vrow = cic_mp_pack_row_views(&P->vt, (size_t)dh, (size_t)N);
    return P->vrow != NULL;
}

/* r[t] = x[t] . y for t < nr (<= CIC_DOT_ROWS): the rows the packed path
 * declines are left for the caller (the returned mask lacks them). */
static unsigned packed_dots(mpfr_ptr *r, const cic_mp_pack *const *x, int nr,
                            const cic_mp_pack *y, bool usable)
{
    return usable ? cic_mp_dot_rows_packed(r, x, nr, y, NULL) : 0;
}

/* Scores of query row qi against keys 0 .. cnt-1, scaled: p[j] =
 * RN(RN(q . k_j) scale). */
static void attn_scores(const attn_job *A, attn_packs *P, bool packed, const mpfr_t *qi,
                        const mpfr_t *ks, int cnt, mpws *w)
{
    mpfr_t *p = w->p;
    bool qok = packed && pack_strided(&P->q, 0, qi, 1, (size_t)A->dh);
    int j, t, nr;
    if (qok)
        cic_mp_pack_finish(&P->q);
    for (j = 0; j < cnt; j += nr) {
        mpfr_ptr r[CIC_DOT_ROWS];
        const cic_mp_pack *x[CIC_DOT_ROWS];
        unsigned done;
        nr = cnt - j < CIC_DOT_ROWS ? cnt - j : CIC_DOT_ROWS;
        for (t = 0; t < nr; t++) {
            r[t] = p[j + t];
            x[t] = &P->krow[j + t];
        }
        done = packed_dots(r, x, nr, &P->q, qok);
        for (t = 0; t < nr; t++) {
            if (!(done >> t & 1u))
                cic_mp_dot(p[j + t], qi, 1, ks + (size_t)(j + t) * A->lk, 1, (size_t)A->dh,
                           NULL, &w->dot);
            mpfr_mul(p[j + t], p[j + t], A->scale, MPFR_RNDN);
        }
    }
}

/* y_i = P_i V over the first cnt values (row views cut to cnt for causal
 * rows). */
static void attn_pv(const attn_job *A, attn_packs *P, bool packed, mpfr_t *yi,
                    const mpfr_t *vs, int cnt, mpws *w)
{
    const mpfr_t *p = (const mpfr_t *)w->p;
    bool pok = packed && pack_strided(&P->p, 0, p, 1, (size_t)cnt);
    cic_mp_pack prow;
    int cc, t, nr;
    if (pok) {
        cic_mp_pack_view(&prow, &P->p, 0, (size_t)cnt);
        pok = prow.span.usable;
    }
    for (cc = 0; cc < A->dh; cc += nr) {
        mpfr_ptr r[CIC_DOT_ROWS];
        cic_mp_pack vv[CIC_DOT_ROWS];
        const cic_mp_pack *x[CIC_DOT_ROWS];
        unsigned done;
        nr = A->dh - cc < CIC_DOT_ROWS ? A->dh - cc : CIC_DOT_ROWS;
        for (t = 0; t < nr; t++) {
            r[t] = yi[cc + t];
            x[t] = NULL;
            if (!pok)
                continue; /* a head whose keys or values are not all finite has no
                           * packed rows (P->vrow is NULL): cic_mp_dot below */
            if (cnt == A->N)
                vv[t] = P->vrow[cc + t];
            else
                cic_mp_pack_view(&vv[t], &P->vt, (size_t)(cc + t) * A->N, (size_t)cnt);
            x[t] = &vv[t];
        }
        done = packed_dots(r, x, nr, &prow, pok);
        for (t = 0; t < nr; t++)
            if (!(done >> t & 1u))
                cic_mp_dot(yi[cc + t], p, 1, vs + cc + t, (size_t)A->lv, (size_t)cnt, NULL,
                           &w->dot);
    }
}

/* Softmax of p[0 .. cnt) in place: exp(p_j - max), each divided by their
 * correctly rounded sum. */
static void attn_softmax(int cnt, mpws *w)
{
    mpfr_t *p = w->p;
    mpfr_ptr mx = w->t0;
    int j;
    mpfr_set(mx, p[0], MPFR_RNDN);
    for (j = 1; j < cnt; j++)
        if (mpfr_greater_p(p[j], mx))
            mpfr_set(mx, p[j], MPFR_RNDN);
    for (j = 0; j < cnt; j++) {
        mpfr_sub(p[j], p[j], mx, MPFR_RNDN);
        cic_mp_exp(p[j], p[j], &w->fn);
        w->ptr[j] = p[j];
    }
    mpfr_sum(w->t1, w->ptr, (unsigned long)cnt, MPFR_RNDN);
    for (j = 0; j < cnt; j++)
        mpfr_div(p[j], p[j], w->t1, MPFR_RNDN);
}

/* Jobs are (sample, head) pairs; head h reads key/value head h / grp. */
static void attn_heads(void *c, int lo, int hi, mpws *w)
{
    const attn_job *A = c;
    int job, i, N = A->N, dh = A->dh, d = A->d;
    attn_packs P;
    bool have = attn_packs_init(&P, N, dh, mpfr_get_prec(w->t0));
    for (job = lo; job < hi; job++) {
        int s = job / A->H, h = job % A->H;
        const mpfr_t *qs = A->q + (size_t)s * N * A->lq + A->qc + h * dh;
        const mpfr_t *ks = A->k + (size_t)s * N * A->lk + A->kc + h / A->grp * dh;
        const mpfr_t *vs = A->v + (size_t)s * N * A->lv + A->vc + h / A->grp * dh;
        bool packed = have && attn_pack_head(&P, A, ks, vs);
        for (i = 0; i < N; i++) {
            int cnt = A->causal ? i + 1 : N;
            attn_scores(A, &P, packed, qs + (size_t)i * A->lq, ks, cnt, w);
            if (A->ball)
                cic_ball_attn_scores(A->ball, w->bscr, (const mpfr_t *)w->p, cnt);
            attn_softmax(cnt, w);
            attn_pv(A, &P, packed, A->y + ((size_t)s * N + i) * d + h * dh, vs, cnt, w);
            if (A->ball)
                cic_ball_attn_row(A->ball, w->bscr, s, h, i, (const mpfr_t *)w->p, cnt);
        }
    }
    if (have)
        attn_packs_clear(&P);
}

static int mp_attn(mprun *r, const cic_op *o, mpfr_t *y)
{
    const cic_model *m = r->m;
    attn_job A;
    int N = m->cfg.tokens, S = r->rows / N;
    A.q = wsrc(r, o->in[0]);
    A.k = wsrc(r, o->in[1]);
    A.v = wsrc(r, o->in[2]);
    if (!A.q || !A.k || !A.v)
        return -1;
    A.y = y;
    A.N = N;
    A.d = m->t[o->out].cols;
    A.H = o->heads;
    A.dh = A.d / A.H;
    A.grp = A.H / o->kv_heads;
    A.lq = m->t[o->in[0]].cols;
    A.lk = m->t[o->in[1]].cols;
    A.lv = m->t[o->in[2]].cols;
    A.qc = o->in_col[0];
    A.kc = o->in_col[1];
    A.vc = o->in_col[2];
    A.causal = o->causal;
    mpfr_set_ui(r->c_scale, (unsigned long)A.dh, MPFR_RNDN);
    mpfr_rec_sqrt(r->c_scale, r->c_scale, MPFR_RNDN);
    A.scale = r->c_scale;
    A.ball = r->ball;
    parallel(r, S * A.H, attn_heads, &A);
    return 0;
}

/* y = act(x) at prec, the same formula as the real engines. */
typedef struct {
    const mpfr_t *a, *b; /* b: the GLU's second factor, or NULL */
    mpfr_t *y;
    enum cic_act act;
    const cic_mp_act_consts *k;
} act_job;

static void act_elems(void *c, int lo, int hi, mpws *w)
{
    const act_job *J = c;
    int j;
    for (j = lo; j < hi; j++) {
        cic_mp_act(J->act, J->y[j], J->a[j], w->t2, J->k, &w->fn);
        if (J->b)
            mpfr_mul(J->y[j], J->y[j], J->b[j], MPFR_RNDN);
    }
}

/* ACT and GLU: y = act(a) (* b), elementwise, split over the threads. */
static int act_run(mprun *r, const cic_op *o, mpfr_t *y, bool glu)
{
    act_job J;
    cic_mp_act_consts k;
    size_t cnt = (size_t)rows_of(r, o->out) * r->m->t[o->out].cols;
    J.a = wsrc(r, o->in[0]);
    J.b = glu ? wsrc(r, o->in[1]) : NULL;
    if (!J.a || (glu && !J.b))
        return -1;
    J.y = y;
    J.act = o->act;
    cic_mp_act_consts_init(&k, o->act, r->prec);
    J.k = &k;
    parallel(r, (int)cnt, act_elems, &J);
    cic_mp_act_consts_clear(&k);
    return 0;
}

static int mp_act(mprun *r, const cic_op *o, mpfr_t *y)
{
    return act_run(r, o, y, false);
}

static int mp_glu(mprun *r, const cic_op *o, mpfr_t *y)
{
    return act_run(r, o, y, true);
}

static int mp_add(mprun *r, const cic_op *o, mpfr_t *y)
{
    const mpfr_t *a = wsrc(r, o->in[0]), *b = wsrc(r, o->in[1]);
    size_t j, cnt = (size_t)rows_of(r, o->out) * r->m->t[o->out].cols;
    if (!a || !b)
        return -1;
    for (j = 0; j < cnt; j++)
        mpfr_add(y[j], a[j], b[j], MPFR_RNDN);
    return 0;
}

/* ---- rotary position embedding ---- */

typedef struct {
    const mpfr_t *x, *cs; /* cs: cos, sin of (position, frequency), as real_rope_table */
    mpfr_t *y;
    int N, w, hd, heads;
    bool interleaved;
} rope_job;

/* Rows lo .. hi-1: each pair (a, b) -> (a c - b s, b c + a s), each
 * correctly rounded as a whole (mpfr_fmms, mpfr_fmma); a, b copied first
 * (y may be x). */
static void rope_rows(void *c, int lo, int hi, mpws *w)
{
    const rope_job *J = c;
    int i, h, j, half = J->hd / 2, step = J->interleaved ? 2 : 1;
    int off = J->interleaved ? 1 : half;
    for (i = lo; i < hi; i++) {
        const mpfr_t *t = J->cs + (size_t)(i % J->N) * J->hd;
        for (h = 0; h < J->heads; h++)
            for (j = 0; j < half; j++) {
                size_t ia = (size_t)i * J->w + h * J->hd + step * j, ib = ia + off;
                mpfr_set(w->t0, J->x[ia], MPFR_RNDN);
                mpfr_set(w->t1, J->x[ib], MPFR_RNDN);
                mpfr_fmms(J->y[ia], w->t0, t[2 * j], w->t1, t[2 * j + 1], MPFR_RNDN);
                mpfr_fmma(J->y[ib], w->t1, t[2 * j], w->t0, t[2 * j + 1], MPFR_RNDN);
            }
    }
}

/* RoPE at prec: the cos and sin table (cic_mp_rope_table), then the pairs
 * as the real engines rotate them. */
static int mp_rope(mprun *r, const cic_op *o, mpfr_t *y)
{
    const cic_model *m = r->m;
    rope_job J;
    size_t n;
    J.x = wsrc(r, o->in[0]);
    if (!J.x)
        return -1;
    J.y = y;
    J.N = m->cfg.tokens;
    J.w = m->t[o->out].cols;
    J.heads = o->heads;
    J.hd = J.w / o->heads;
    J.interleaved = o->rope == CIC_ROPE_INTERLEAVED;
    n = (size_t)J.N * J.hd;
    J.cs = cic_mpvec_create(n, r->prec);
    if (!J.cs)
        return -1;
    cic_mp_rope_table((mpfr_t *)J.cs, J.N, J.hd, o->theta, r->prec);
    if (r->ball && cic_ball_rope(r->ball, o, J.cs, J.x) < 0) {
        cic_mpvec_destroy((mpfr_t *)J.cs, n);
        return -1;
    }
    parallel(r, r->rows, rope_rows, &J);
    cic_mpvec_destroy((mpfr_t *)J.cs, n);
    return 0;
}

/* ---- the kernel table and the walker ---- */

typedef int (*mp_kernel)(mprun *r, const cic_op *o, mpfr_t *y);

static const mp_kernel MP_KERNEL[] = {
#define MP_KERNEL_(E, fn, name, alias) mp_##fn,
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
    r->nt = cic_engine_mpfr_threads();
    for (i = 0; i < r->nt; i++)
        if (mpws_init(&r->ws[i], cap, (size_t)m->cfg.tokens, prec) < 0 ||
            (ball && !(r->ws[i].bscr = malloc(cic_ball_attn_scratch(m) * sizeof(double)))))
            return -1;
    if (ball && !(r->ball = cic_ball_create(m, prec, ns)))
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
    if (mprun_init(&r, m, prec, rounded_weights, s0, ns, o && o->ball) < 0 || !last)
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
