/* SPDX-License-Identifier: MIT */
/* engine_mpfr_lin.c: the MPFR engine's ops with weights: the linear layer
 * (rows through the row kernel or exact dgemm slices, base/mpslice.h, the
 * weights packed once per op) and the adaLN folds that make a sample's
 * weights (xform/fold.h). Kernels of the table in engine_mpfr.c. */
#include "engine_mpfr_int.h"

#include "../model/lazy.h"

#include <stdatomic.h>
#include <string.h>

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
                                         b, n, k, r->nt, r->m->rt, r->slice) == 0;
        if (calls > 1)
            sdone[s] = done;
        for (int t = 0; calls == 1 && t < r->ns; t++)
            sdone[t] = done; /* one call: every sample */
        all = all && done;
    }
    return all;
}

int _cic_mpk_linear(mprun *r, const cic_op *o, mpfr_t *y)
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
        for (i = 0; i < r->nt; i++) /* the products by Q: the run's matmul threads */
            r->fold[i].threads = cic_rt_matmul_threads(r->m->rt);
        r->has_fold = true;
    }
    parallel(r, r->ns, fold_samples, &F);
    return 0;
}

int _cic_mpk_fold_in_w(mprun *r, const cic_op *o, mpfr_t *y)
{
    return mp_fold(r, o, y);
}

int _cic_mpk_fold_in_b(mprun *r, const cic_op *o, mpfr_t *y)
{
    return mp_fold(r, o, y);
}

int _cic_mpk_fold_out_w(mprun *r, const cic_op *o, mpfr_t *y)
{
    return mp_fold(r, o, y);
}

int _cic_mpk_fold_out_b(mprun *r, const cic_op *o, mpfr_t *y)
{
    return mp_fold(r, o, y);
}
