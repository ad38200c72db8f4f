/* SPDX-License-Identifier: MIT */
/* xform_common.c: what the transform kinds share (xform_util.h): the
 * current values of a tensor and their installation, Q held as MPFR or
 * doubles, work split over threads, the context of a rewrite, folds of a
 * norm's gain and bias into its readers (kept as float32 recipes where
 * they can be), centering and the products by Q over the residual
 * dimension (MPFR, dgemm, or recipes of a Hadamard Q). Row-vector algebra
 * in PyTorch layout as in xform.c. */
#include "xform.h"

#include "../base/mpvec.h"
#include "../base/par.h"
#include "fwht_w.h"
#include "qmat.h"
#include "xform_util.h"
#include "../model/lazy.h"

#define vals _cic_xf_vals
#define install _cic_xf_install

#include <math.h>
#include <string.h>

/* ---- value access ---- */

/* The current values of tensor id as MPFR: its hp values, or its f32 values
 * converted exactly into *tmp (24 bits; the caller destroys *tmp). */
int _cic_xf_producer(const cic_model *m, int t)
{
    int i;
    for (i = 0; i < m->n_ops; i++)
        if (m->ops[i].out == t)
            return i;
    return -1;
}

int _cic_xf_head_dim(const cic_model *m)
{
    int i, dh = 0;
    for (i = 0; i < m->n_ops; i++)
        if (m->ops[i].kind == CIC_OP_ATTN)
            dh = m->t[m->ops[i].out].cols / m->ops[i].heads;
    return dh;
}

const mpfr_t *_cic_xf_vals(const cic_model *m, int id, mpfr_t **tmp)
{
    const cic_tensor *t = &m->t[id];
    size_t n = (size_t)t->rows * t->cols;
    *tmp = NULL;
    if (cic_tensor_has_hp(t))
        return cic_tensor_hp_make(t, tmp);
    *tmp = cic_mpvec_create(n, 24);
    if (!*tmp)
        return NULL;
    cic_mpvec_set_f32(*tmp, t->f32, n);
    return (const mpfr_t *)*tmp;
}


/* Install v (n values at p bits, ownership taken) as tensor id's values. */
void _cic_xf_install(cic_model *m, int id, mpfr_t *v, mpfr_prec_t p)
{
    cic_tensor_set_hp(&m->t[id], v, p);
}

const mpfr_t *_cic_xf_aq_mp(cic_xf_aq *q)
{
    size_t n = (size_t)q->d * q->d, k;
    if (q->mp || !q->f64)
        return (const mpfr_t *)q->mp;
    if (!(q->mp = cic_mpvec_create(n, q->p)))
        return NULL;
    for (k = 0; k < n; k++) /* exact: 53 bits */
        mpfr_set_d(q->mp[k], q->f64[k], MPFR_RNDN);
    return (const mpfr_t *)q->mp;
}

void _cic_xf_aq_clear(cic_xf_aq *q)
{
    cic_mpvec_destroy(q->mp, (size_t)q->d * q->d);
    free(q->f64);
    memset(q, 0, sizeof *q);
}

typedef struct {
    int (*fn)(void *ctx, int lo, int hi);
    void *ctx;
    int rc[CIC_PAR_MAX];
} par_job;

static void par_range(void *p, size_t lo, size_t hi, int t)
{
    par_job *j = p;
    j->rc[t] = j->fn(j->ctx, (int)lo, (int)hi);
}

int _cic_xf_par(int n, double work, int threads, int (*fn)(void *ctx, int lo, int hi),
                void *ctx)
{
    par_job j = {fn, ctx, {0}};
    int t, rc = 0;
    cic_par_ranges(n > 0 ? (size_t)n : 0,
                   work < 1e6 ? 1 : threads > 0 ? threads : cic_rt_matmul_threads(NULL),
                   par_range, &j);
    for (t = 0; t < CIC_PAR_MAX; t++)
        if (rc >= 0 && (j.rc[t] < 0 || j.rc[t] > rc))
            rc = j.rc[t];
    return rc;
}

typedef cic_xf_ctx ctx;

/* A dot scratch wide enough for every factor the transform will see. */
int _cic_xf_ctx_init(ctx *c, cic_model *m, mpfr_prec_t p)
{
    mpfr_prec_t mx = p;
    int i, cap = m->cfg.d_model;
    for (i = 0; i < m->n_t; i++) {
        if (cic_tensor_hp_prec(&m->t[i]) > mx)
            mx = cic_tensor_hp_prec(&m->t[i]);
        if (m->t[i].cols > cap)
            cap = m->t[i].cols;
        if (m->t[i].rows > cap)
            cap = m->t[i].rows;
    }
    c->m = m;
    c->p = p;
    c->ok = 1;
    return cic_dot_scratch_init(&c->dot, (size_t)cap, mx);
}

void _cic_xf_ctx_clear(ctx *c)
{
    cic_dot_scratch_clear(&c->dot);
    free(c->in);
    c->in = NULL;
    c->in_n = 0;
}

/* Fold a norm's gain g and bias b into the reader linear op r. */
/* Tensor t's float32 values made a recipe of their own (lazy.h), with
 * gain (cols values; NULL none) at prec under the model's context rt:
 * the recipe takes the values, and
 * f32 holds what it makes, rounded (the values themselves without a gain
 * at 24 bits or more). 0, or -1 when memory runs out (t unchanged). */
static int to_recipe(cic_tensor *t, const float *gain, mpfr_prec_t prec, cic_rt *rt)
{
    size_t n = (size_t)t->rows * t->cols;
    float *rounded = cic_model_array_alloc(n, sizeof *rounded, false);
    cic_lazy *z = rounded ? cic_lazy_values(t->f32, t->rows, t->cols, gain, prec, rt) : NULL;
    if (!z) {
        free(rounded);
        return -1;
    }
    t->f32 = rounded;
    t->lazy = z;
    if (!gain && prec >= 24) {
        memcpy(t->f32, z->src, n * sizeof *t->f32);
        return 0;
    }
    return cic_lazy_make_f32(z, t->f32);
}

/* The fold of a gain into a float32 reader weight, kept as a recipe: the
 * same bits as the MPFR products below, made when read. */
static int fold_lazy(ctx *c, int wid, int g)
{
    return to_recipe(&c->m->t[wid], g >= 0 ? c->m->t[g].f32 : NULL, c->p, c->m->rt);
}

/* Tensor id rotated on side by the Hadamard c->hq, kept as a recipe over
 * its float32 values (or over its fold's recipe): 1 when done, 0 when id
 * does not qualify (its values are held as MPFR, or it is rotated
 * already: the products below then), -1 when memory runs out. */
static int rotate_lazy(ctx *c, int id, enum cic_lazy_side side)
{
    cic_tensor *t = &c->m->t[id];
    const cic_xf_hq *h = c->hq;
    cic_lazy *z;
    if (!h || t->hp || t->f64 || (t->lazy && t->lazy->side != CIC_LAZY_VALUES))
        return 0;
    if (!t->lazy && to_recipe(t, NULL, 24, c->m->rt) < 0) /* the base: its float32 values */
        return -1;
    z = cic_lazy_rotate(t->lazy, side, h->d, h->K, h->hk, h->sign, c->p);
    if (!z)
        return -1;
    cic_lazy_unref(t->lazy); /* z holds it */
    t->lazy = z;
    return cic_lazy_make_f32(z, t->f32) < 0 ? -1 : 1;
}

static int fold_into_reader(ctx *c, cic_op *r, int g, int b)
{
    if (b < 0 && !cic_tensor_has_hp(&c->m->t[r->w]) && (g < 0 || !cic_tensor_has_hp(&c->m->t[g])))
        return fold_lazy(c, r->w, g);
    cic_model *m = c->m;
    int wid = r->w, rows = m->t[wid].rows, cols = m->t[wid].cols, i, j;
    mpfr_t *tw = NULL, *tg = NULL, *tb = NULL, *tc = NULL, *nw = NULL, *nb = NULL;
    const mpfr_t *w = vals(m, wid, &tw), *gv = NULL, *bv = NULL, *cv = NULL;
    int rc = -1;
    if (!w)
        goto cleanup;
    if (b >= 0) {
        /* b' = c + W b, from the unscaled W */
        if (r->b < 0) {
            char name[96];
            const char *dot = strrchr(m->t[wid].name, '.');
            int len = dot ? (int)(dot - m->t[wid].name) : (int)strlen(m->t[wid].name);
            snprintf(name, sizeof name, "%.*s.bias", len, m->t[wid].name);
            r->b = cic_model_tensor_add(m, name, CIC_T_WEIGHT, 1, rows);
            if (r->b < 0)
                goto cleanup;
        }
        bv = vals(m, b, &tb);
        cv = vals(m, r->b, &tc);
        nb = cic_mpvec_create((size_t)rows, c->p);
        if (!bv || !cv || !nb)
            goto cleanup;
        for (j = 0; j < rows; j++)
            cic_mp_dot(nb[j], w + (size_t)j * cols, 1, bv, 1, (size_t)cols, cv[j], &c->dot);
    }
    nw = cic_mpvec_create((size_t)rows * cols, c->p);
    if (!nw)
        goto cleanup;
    if (g >= 0) {
        gv = vals(m, g, &tg);
        if (!gv)
            goto cleanup;
    }
    for (j = 0; j < rows; j++)
        for (i = 0; i < cols; i++) {
            size_t k = (size_t)j * cols + i;
            if (gv)
                mpfr_mul(nw[k], w[k], gv[i], MPFR_RNDN);
            else
                mpfr_set(nw[k], w[k], MPFR_RNDN);
        }
    install(m, wid, nw, c->p);
    nw = NULL;
    if (nb) {
        install(m, r->b, nb, c->p);
        nb = NULL;
    }
    rc = 0;
cleanup:
    cic_mpvec_destroy(tw, (size_t)rows * cols);
    cic_mpvec_destroy(tg, (size_t)cols);
    cic_mpvec_destroy(tb, (size_t)cols);
    cic_mpvec_destroy(tc, (size_t)rows);
    cic_mpvec_destroy(nw, (size_t)rows * cols);
    cic_mpvec_destroy(nb, (size_t)rows);
    return rc;
}

typedef struct {
    double *t;
    int n;
    size_t ls, js;
} center_job;

/* Lines [lo, hi) of _cic_xf_center_f64, with a scratch of their own. */
static int center_lines(void *p, int lo, int hi)
{
    const center_job *J = p;
    int n = J->n, j, l, rc = 0;
    mpfr_t *v = cic_mpvec_create((size_t)n, 53), mean;
    mpfr_ptr *ptr = cic_calloc((size_t)n, sizeof *ptr);
    if (!v || !ptr) {
        cic_mpvec_destroy(v, (size_t)n);
        free(ptr);
        return -1;
    }
    mpfr_init2(mean, 53);
    for (j = 0; j < n; j++)
        ptr[j] = v[j];
    for (l = lo; l < hi && rc == 0; l++) {
        double *t = J->t + (size_t)l * J->ls, md;
        for (j = 0; j < n; j++)
            mpfr_set_d(v[j], t[(size_t)j * J->js], MPFR_RNDN); /* exact */
        mpfr_sum(mean, ptr, (unsigned long)n, MPFR_RNDN);
        mpfr_div_ui(mean, mean, (unsigned long)n, MPFR_RNDN);
        md = mpfr_get_d(mean, MPFR_RNDN);
        if (mpfr_nan_p(mean) || mpfr_cmp_d(mean, md) != 0)
            rc = 1;
        for (j = 0; j < n && rc == 0; j++)
            t[(size_t)j * J->js] -= md;
    }
    mpfr_clear(mean);
    cic_mpvec_destroy(v, (size_t)n);
    free(ptr);
    return rc;
}

int _cic_xf_center_f64(double *t, int lines, int n, size_t ls, size_t js, int threads)
{
    center_job J = { t, n, ls, js };
    return _cic_xf_par(lines, 20.0 * lines * (double)n, threads, center_lines, &J);
}

/* _cic_xf_center of the rows of tensor id at 53 bits in doubles, the
 * result held as doubles: 0; 1 when its values are not all doubles or a
 * mean is not a double (nothing changed); -1 when memory runs out. */
int _cic_xf_center_rows_f64(ctx *c, int id)
{
    cic_tensor *t = &c->m->t[id];
    double *v;
    int rc;
    if (c->p != 53 || cic_tensor_hp_prec(t) > 53)
        return 1;
    if (!(v = cic_tensor_f64_create(t, false)))
        return -1;
    if ((rc = _cic_xf_center_f64(v, t->rows, t->cols, (size_t)t->cols, 1,
                                 cic_rt_matmul_threads(c->m->rt))) != 0) {
        free(v);
        return rc;
    }
    cic_tensor_set_f64(t, v, c->p);
    return 0;
}

/* Subtract the mean over the residual dimension: of each column of a writer
 * weight [d, k] (dim 0) or of each row of the input / a bias (dim 1). */
int _cic_xf_center(ctx *c, int id, int dim)
{
    cic_model *m = c->m;
    int rows = m->t[id].rows, cols = m->t[id].cols, i, j;
    int outer = dim == 0 ? cols : rows, inner = dim == 0 ? rows : cols;
    mpfr_t *tv = NULL, *nv = NULL, mean;
    mpfr_ptr *ptr = NULL;
    const mpfr_t *v = vals(m, id, &tv);
    int rc = -1;
    mpfr_init2(mean, c->p + 64);
    nv = cic_mpvec_create((size_t)rows * cols, c->p);
    ptr = cic_calloc((size_t)inner, sizeof *ptr);
    if (!v || !nv || !ptr)
        goto cleanup;
    for (i = 0; i < outer; i++) {
        for (j = 0; j < inner; j++) {
            size_t k = dim == 0 ? (size_t)j * cols + i : (size_t)i * cols + j;
            ptr[j] = (mpfr_ptr)v[k];
        }
        mpfr_set_prec(mean, c->p);
        mpfr_sum(mean, ptr, (unsigned long)inner, MPFR_RNDN);
        mpfr_div_ui(mean, mean, (unsigned long)inner, MPFR_RNDN);
        for (j = 0; j < inner; j++) {
            size_t k = dim == 0 ? (size_t)j * cols + i : (size_t)i * cols + j;
            mpfr_sub(nv[k], v[k], mean, MPFR_RNDN);
        }
    }
    install(m, id, nv, c->p);
    nv = NULL;
    rc = 0;
cleanup:
    mpfr_clear(mean);
    free(ptr);
    cic_mpvec_destroy(tv, (size_t)rows * cols);
    cic_mpvec_destroy(nv, (size_t)rows * cols);
    return rc;
}

int _cic_xf_rotate_f64(ctx *c, int id, bool left, const double *q, int d)
{
    cic_tensor *t = &c->m->t[id];
    size_t n = (size_t)t->rows * t->cols;
    const double *v = t->f64;
    double *nv;
    /* values held as doubles already are read in place (R4 after R1: 360
     * MB not copied at a 7B layer's MLP width; set_f64 frees them); the
     * others are made into c->in, grown as needed: fresh memory is
     * zeroed by the kernel at about 1 GB/s on the machines we measured,
     * and R1 of a 7B layer reads 1.6 GB of them */
    if (!v) {
        if (c->in_n < n) {
            free(c->in);
            c->in = cic_model_array_alloc(n, sizeof *c->in, false);
            c->in_n = c->in ? n : 0;
        }
        if (!c->in || cic_tensor_f64_get(c->in, t, false) < 0)
            return -1;
        v = c->in;
    }
    if (!(nv = cic_model_array_alloc(n, sizeof *nv, false))) /* dgemm writes every value */
        return -1;
    /* the products cic_mp_matmul would form through dgemm, the same call */
    if (left)
        cic_gemm_f64(nv, q, true, v, false, d, t->cols, d);
    else
        cic_gemm_f64(nv, v, false, q, false, t->rows, d, d);
    cic_tensor_set_f64(t, nv, c->p);
    return 0;
}

/* Tensor id times the Hadamard h by the exact fast transform (fwht_w.h:
 * the dense product's bits). */
int _cic_xf_rotate_hadamard(cic_xf_ctx *c, int id, const cic_xf_hq *h, bool left)
{
    cic_model *m = c->m;
    int rows = m->t[id].rows, cols = m->t[id].cols, rc = -1;
    size_t nn = (size_t)rows * cols;
    mpfr_t *tv = NULL, *nv = NULL;
    const mpfr_t *v;
    CIC_ASSERT((left ? rows : cols) == h->d);
    v = vals(m, id, &tv);
    nv = cic_mpvec_create(nn, c->p);
    if (v && nv &&
        _cic_xf_fwht_lines(nv, v, (size_t)(left ? cols : rows), left ? 1 : (size_t)cols,
                           left ? (size_t)cols : 1, h, c->p, cic_rt_matmul_threads(m->rt)) == 0) {
        install(m, id, nv, c->p);
        nv = NULL;
        rc = 0;
    }
    cic_mpvec_destroy(tv, nn);
    cic_mpvec_destroy(nv, nn);
    return rc;
}

/* Multiply by Q over the residual dimension: right (W Q, for readers and
 * the input: rows stay, the d columns mix) or left-transposed (Q^T W for
 * writer weights [d, k] and biases [1, d], which mix the d rows / cols). */
/* Tensor id times Q over the residual dimension d, in MPFR (or as a lazy
 * Hadamard recipe, or through doubles when the transform keeps Q as
 * doubles): right, W Q (W [rows, d]), or left, Q^T W (W [d, cols]). */
static int rotate_mp(ctx *c, int id, const mpfr_t *q, int d, bool left)
{
    cic_model *m = c->m;
    int rows = m->t[id].rows, cols = m->t[id].cols;
    mpfr_t *tv = NULL, *nv = NULL;
    const mpfr_t *v;
    int lz;
    CIC_ASSERT((left ? rows : cols) == d);
    if (c->hq && c->hq->d == d &&
        (lz = rotate_lazy(c, id, left ? CIC_LAZY_LEFT : CIC_LAZY_RIGHT)) != 0)
        return lz < 0 ? -1 : 0;
    if (c->blas && c->qd && c->qd_n == d)
        return _cic_xf_rotate_f64(c, id, left, c->qd, d);
    if (c->hq && c->hq->d == d) /* the dense product's bits, fast (fwht_w.h) */
        return _cic_xf_rotate_hadamard(c, id, c->hq, left);
    v = vals(m, id, &tv);
    nv = cic_mpvec_create((size_t)rows * cols, c->p);
    if (!v || !nv) {
        cic_mpvec_destroy(tv, (size_t)rows * cols);
        cic_mpvec_destroy(nv, (size_t)rows * cols);
        return -1;
    }
    if (left) /* W'[i, k] = sum_j Q[j, i] W[j, k] */
        cic_mp_matmul(nv, q, true, v, false, d, cols, d, c->blas, cic_rt_matmul_threads(m->rt),
                      &c->dot);
    else
        cic_mp_matmul(nv, v, false, q, false, rows, d, d, c->blas, cic_rt_matmul_threads(m->rt),
                      &c->dot);
    install(m, id, nv, c->p);
    cic_mpvec_destroy(tv, (size_t)rows * cols);
    return 0;
}

int _cic_xf_rotate_right(ctx *c, int id, const mpfr_t *q, int d)
{
    return rotate_mp(c, id, q, d, false);
}

/* A writer's weight [d, k] (Q^T W) or its bias [1, d] (b Q). Which one is
 * said, not guessed from the shape: at d = 1 a weight has one row too. */
int _cic_xf_rotate_writer(ctx *c, int id, bool bias, const mpfr_t *q, int d)
{
    return rotate_mp(c, id, q, d, !bias);
}

int _cic_xf_fuse_norms(ctx *c, bool layernorm, bool bake_mean, bool center_input)
{
    cic_model *m = c->m;
    int i, j;
    for (i = 0; i < m->n_ops; i++) {
        cic_op *n = &m->ops[i];
        if (n->kind != CIC_OP_NORM || (layernorm && !n->center) ||
            (!layernorm && (n->center || n->g < 0)))
            continue;
        for (j = 0; j < m->n_ops; j++) {
            cic_op *r = &m->ops[j];
            if (r->kind == CIC_OP_LINEAR && r->in[0] == n->out &&
                fold_into_reader(c, r, n->g, layernorm ? n->b : -1) < 0)
                return -1;
        }
        n->g = -1;
        n->b = -1;
        if (layernorm)
            n->center = false;
    }
    if (layernorm && bake_mean) {
        for (i = 0; i < m->n_ops; i++) {
            cic_op *w = &m->ops[i];
            if (w->kind != CIC_OP_LINEAR || w->role != CIC_ROLE_WRITER)
                continue;
            if (_cic_xf_center(c, w->w, 0) < 0 || (w->b >= 0 && _cic_xf_center(c, w->b, 1) < 0))
                return -1;
        }
        if (_cic_xf_center(c, m->input, 1) < 0)
            return -1;
    }
    if (center_input && _cic_xf_center(c, m->input, 1) < 0)
        return -1;
    return 0;
}


/* ---- what the adaLN strategies' descriptors share ---- */

int _cic_xf_adaln_report(cic_xform_field *f, int cap, const cic_xform_spec *x, bool calibration)
{
    int n = 0;
    const char *stream = (unsigned)x->stream < CIC_STREAM_COUNT ? CIC_STREAM_NAME[x->stream]
                                                                : "unknown";
    if (n < cap)
        f[n++] = _cic_xf_field("stream", CIC_XFIELD_STR, stream, 0);
    if (n < cap)
        f[n++] = _cic_xf_field("fast", CIC_XFIELD_BOOL, NULL, x->fast);
    if (calibration && n < cap)
        f[n++] = _cic_xf_field("calibration", CIC_XFIELD_INT, NULL, x->calibration);
    return n;
}

double _cic_xf_dit_rot(double R, int w, int G, const cic_xform_spec *x)
{
    int hb = x->q == CIC_Q_HADAMARD ? x->hadamard_base : 0;
    double Rb;
    if (G <= 0)
        G = w;
    Rb = R * (double)(w / G);
    if (x->fast && x->q == CIC_Q_REGULAR)
        return cic_op_flops_fwht_regular(Rb, G);
    if (x->fast)
        return cic_op_flops_fwht(Rb, G, cic_hadamard_base_order_k(G, hb));
    return cic_op_flops_linear(Rb, G, G, false);
}

int _cic_xf_adaln_report_plain(cic_xform_field *f, int cap, const cic_xform_spec *x)
{
    return _cic_xf_adaln_report(f, cap, x, false);
}

void _cic_xf_adaln_memory(cic_xform_mem *mm, const cic_xform_spec *x)
{
    (void)x;
    mm->lazy = CIC_XLAZY_NONE;
    mm->doubles = true;
}
