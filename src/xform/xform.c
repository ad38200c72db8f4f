/* SPDX-License-Identifier: MIT */
/* xform.c: LayerNorm fusion, RMSNorm gamma folding and rotation (xform.h).
 *
 * Row-vector algebra of DESIGN.md section 2 in PyTorch layout (W [out, in],
 * y = x W^T + b):
 *   fold g, b into a reader:   W'[j,i] = W[j,i] g_i,  b'_j = b_j + sum_i W[j,i] b_i
 *   bake C into a writer:      W'[j,c] = W[j,c] - mean_j W[.,c],  b' = b - mean(b)
 *   rotate a reader:           W' = W Q        (W'[j,i] = sum_k W[j,k] Q[k,i])
 *   rotate a writer:           W' = Q^T W,     b' = Q^T b
 *   the block input:           X' = X C, X' = X Q
 * Every value is computed from the current (possibly already unrounded)
 * values with correctly rounded MPFR operations at the transform precision;
 * with precision "f64-openblas" the products by Q go through dgemm instead
 * (cic_mp_matmul). */
#include "xform.h"

#include "../base/mpvec.h"
#include "../base/par.h"
#include "qmat.h"
#include "xform_util.h"
#include "../model/lazy.h"

#define vals _cic_xf_vals
#define install _cic_xf_install
#define ctx_init _cic_xf_ctx_init
#define rotate_right _cic_xf_rotate_right

#include <math.h>
#include <string.h>

mpfr_prec_t cic_xform_prec(const cic_xform_spec *x, mpfr_prec_t engine_prec)
{
    switch (x->prec) {
    case CIC_TPREC_BF16:
        return 8;
    case CIC_TPREC_F32:
        return 24;
    case CIC_TPREC_F64:
    case CIC_TPREC_F64_BLAS:
        return 53;
    default:
        return engine_prec;
    }
}

double cic_xform_unit_roundoff(const cic_xform_spec *x, mpfr_prec_t engine_prec)
{
    return ldexp(1.0, -(int)cic_xform_prec(x, engine_prec));
}

/* Thresholds. An exact transform computed at p bits leaves a relative
 * output difference of a modest multiple of 2^-p (rounding of the weights,
 * amplified by the block's conditioning); a wrong transform leaves a
 * difference of the size of the data. We call it equivalent up to 2^32
 * unit roundoffs at the MPFR precisions (so at 128 bits ce <= 2^-96), up to
 * 2^20 roundoffs for f64 (about 1.2e-10) and 2^12 for f32 (about 2.4e-4, a
 * generous float error for these depths), and broken from 2^-7 (0.8 %) of
 * the output's norm; the known mistakes land near 1e-1 to 1. A transform
 * computed at bf16's 8 bits ("rotate in bf16": Q and every value rounded to
 * 8 bits, dot products rounded once) is equivalent up to 2^-4 and broken
 * from 2^-2. */
void cic_xform_thresholds(double *eq, double *br, const cic_xform_spec *x,
                          mpfr_prec_t engine_prec)
{
    int p = (int)cic_xform_prec(x, engine_prec);
    enum cic_tprec tp = x->prec;
    /* a rotation from a file is exact only to its dtype's precision */
    if (x->q == CIC_Q_FILE && x->q_file_bits > 0 && x->q_file_bits < p) {
        p = x->q_file_bits;
        tp = p >= 53 ? CIC_TPREC_F64 : p >= 24 ? CIC_TPREC_F32 : CIC_TPREC_BF16;
    }
    switch (tp) {
    case CIC_TPREC_F32:
        *eq = ldexp(1.0, 12 - p);
        break;
    case CIC_TPREC_F64:
    case CIC_TPREC_F64_BLAS:
        *eq = ldexp(1.0, 20 - p);
        break;
    case CIC_TPREC_BF16:
        /* 8 bits: the weights' own rounding is already near 2^-9 of each
         * value; the verdict can separate gross mistakes only */
        *eq = ldexp(1.0, -4);
        *br = ldexp(1.0, -2);
        return;
    default:
        *eq = ldexp(1.0, 32 - p);
        break;
    }
    *br = ldexp(1.0, -7);
}

enum cic_verdict cic_xform_verdict(double ce, double eq, double br)
{
    if (ce <= eq)
        return CIC_VERDICT_EQUIVALENT;
    if (ce >= br || isnan(ce))
        return CIC_VERDICT_BROKEN;
    return CIC_VERDICT_INCONCLUSIVE;
}

/* A forced Hadamard base K = x->hadamard_base must fit width w (named what
 * in the message). With it every Hadamard Q the transform builds of that
 * width exists, mean-preserving ones included (cic_q_mean_preserving_k). */
static int _cic_xform_check_base(const cic_case *c, const cic_xform_spec *x, const char *what,
                                 int w, cic_diag *d)
{
    char why[256];
    if (cic_q_hadamard_k_supported(w, x->hadamard_base))
        return CIC_OK;
    cic_q_hadamard_k_explain(why, sizeof why, w, x->hadamard_base);
    cic_diag_set(d, c->path, x->line, 1,
                 "transform '%s': hadamard_base = %d does not fit %s = %d: %s", x->name,
                 x->hadamard_base, what, w, why);
    return CIC_EINPUT;
}

/* group = G (branch-rotate): G divides d_model and the MLP width and has a
 * matrix of the block's kind (a Hadamard, or 4^k for a regular one). */
static int _cic_xform_check_group(const cic_case *c, const cic_xform_spec *x, cic_diag *d)
{
    int G = x->group;
    if (c->model.d_model % G || c->model.d_mlp % G ||
        (x->q == CIC_Q_HADAMARD && !cic_q_hadamard_k_supported(G, x->hadamard_base)) ||
        (x->q == CIC_Q_REGULAR && !cic_regular_order_k(G))) {
        cic_diag_set(d, c->path, x->line, 1,
                     "transform '%s': group = %d must divide d_model = %d and the MLP "
                     "width %d%s", x->name, G, c->model.d_model, c->model.d_mlp,
                     x->q == CIC_Q_REGULAR    ? " and be 4^k (the orders of regular "
                                                "Hadamard matrices)"
                     : x->q == CIC_Q_HADAMARD ? " and have a Hadamard matrix of its order"
                                              : "");
        return CIC_EINPUT;
    }
    return CIC_OK;
}

/* q = "regular-hadamard" without groups: of order d_model (and the MLP
 * width for branch-rotate), 4^k; not a mean-preserving stream. */
static int _cic_xform_check_regular(const cic_case *c, const cic_xform_spec *x, bool mp,
                                    cic_diag *d)
{
    int w = c->model.d_model, f = c->model.d_mlp;
    bool br = x->kind == CIC_XFORM_BRANCH_ROTATE;
    if (mp) {
        cic_diag_set(d, c->path, x->line, 1,
                     "transform '%s': a mean-preserving Q is not a regular Hadamard; use "
                     "stream = \"centered\" or q = \"hadamard\"", x->name);
        return CIC_EINPUT;
    }
    if (!cic_regular_order_k(w) || (br && !cic_regular_order_k(f))) {
        char mlp[48] = "";
        if (br)
            snprintf(mlp, sizeof mlp, ", the MLP width %d", f);
        cic_diag_set(d, c->path, x->line, 1,
                     "transform '%s': q = \"regular-hadamard\" needs orders 4^k (4, 16, 64, "
                     "256, 1024, 4096, ...): d_model = %d%s; %s", x->name, w, mlp,
                     br ? "set group = G (a 4^k dividing them) or use q = \"hadamard\""
                        : "use q = \"hadamard\"");
        return CIC_EINPUT;
    }
    return CIC_OK;
}

int cic_xform_check(const cic_case *c, cic_diag *d)
{
    int i;
    for (i = 0; i < c->n_xf; i++) {
        const cic_xform_spec *x = &c->xf[i];
        bool adaln = x->kind >= CIC_XFORM_STATIC_FOLD;
        bool mp = adaln && x->stream == CIC_STREAM_MEAN_PRESERVING;
        if ((x->kind == CIC_XFORM_ROTATE || adaln) && x->q == CIC_Q_HADAMARD &&
            x->hadamard_base != 0) {
            /* branch-rotate builds its Q of the MLP width with the same K */
            if (_cic_xform_check_base(c, x, "d_model", c->model.d_model, d) != CIC_OK ||
                (x->kind == CIC_XFORM_BRANCH_ROTATE &&
                 _cic_xform_check_base(c, x, "the MLP width d_mlp", c->model.d_mlp, d) !=
                     CIC_OK))
                return CIC_EINPUT;
            continue;
        }
        if (x->kind == CIC_XFORM_BRANCH_ROTATE && x->q == CIC_Q_HADAMARD &&
            !cic_q_hadamard_supported(c->model.d_mlp)) {
            char hint[256];
            cic_q_hadamard_suggest(hint, sizeof hint, c->model.d_mlp);
            cic_diag_set(d, c->path, x->line, 1,
                         "transform '%s': branch-rotate needs a Hadamard matrix of the MLP "
                         "width %d too; %s", x->name, c->model.d_mlp, hint);
            return CIC_EINPUT;
        }
        if (mp && x->q == CIC_Q_HADAMARD && (c->model.d_model & (c->model.d_model - 1))) {
            cic_diag_set(d, c->path, x->line, 1,
                         "transform '%s': a mean-preserving Hadamard Q needs d_model a power "
                         "of two (d_model = %d); use q = \"random\"", x->name, c->model.d_model);
            return CIC_EINPUT;
        }
        if (x->group > 0) {
            if (_cic_xform_check_group(c, x, d) != CIC_OK)
                return CIC_EINPUT;
            continue;
        }
        if (x->q == CIC_Q_REGULAR && _cic_xform_check_regular(c, x, mp, d) != CIC_OK)
            return CIC_EINPUT;
        if (x->q == CIC_Q_FILE) {
            int n = x->kind == CIC_XFORM_ROTATE ? c->model.d_model
                                                : c->model.d_model / c->model.heads;
            double orth = 0;
            if (cic_q_file_check(&orth, x, n, d) < 0) {
                char why[sizeof d->msg];
                cic_strlcpy(why, d->msg, sizeof why);
                cic_diag_set(d, c->path, x->line, 1, "transform '%s': %s: %s", x->name,
                             x->q_file, why);
                return CIC_EINPUT;
            }
            if (!(orth <= CIC_Q_FILE_ORTH_MAX)) {
                cic_diag_set(d, c->path, x->line, 1,
                             "transform '%s': the matrix '%s' of '%s' is not orthogonal: max "
                             "|Q^T Q - I| = %.3g, above %g", x->name, x->q_tensor, x->q_file,
                             orth, CIC_Q_FILE_ORTH_MAX);
                return CIC_EINPUT;
            }
            continue;
        }
        if (x->kind == CIC_XFORM_ONLINE_QK && (x->q != CIC_Q_HADAMARD ||
                                               c->model.block == CIC_BLOCK_PRELN ||
                                               !cic_q_hadamard_k_supported(
                                                   c->model.d_model / c->model.heads,
                                                   x->hadamard_base))) {
            cic_diag_set(d, c->path, x->line, 1,
                         "transform '%s': online-qk needs q = \"hadamard\", a Hadamard "
                         "matrix of the head width %d (hadamard_base %d) and separate q and k "
                         "projections (rmsnorm or parallel blocks; this one is %s)", x->name,
                         c->model.d_model / c->model.heads, x->hadamard_base,
                         CIC_BLOCK_NAME[c->model.block]);
            return CIC_EINPUT;
        }
        if (x->kind == CIC_XFORM_ONLINE_DOWN && x->q != CIC_Q_HADAMARD) {
            cic_diag_set(d, c->path, x->line, 1,
                         "transform '%s': online-down needs q = \"hadamard\" (the online "
                         "transform is a fast Hadamard; q = \"%s\")", x->name, CIC_Q_NAME[x->q]);
            return CIC_EINPUT;
        }
        if (x->kind == CIC_XFORM_ONLINE_DOWN &&
            !cic_q_hadamard_k_supported(c->model.d_mlp, x->hadamard_base)) {
            char hint[256];
            cic_q_hadamard_k_explain(hint, sizeof hint, c->model.d_mlp, x->hadamard_base);
            cic_diag_set(d, c->path, x->line, 1,
                         "transform '%s': no Hadamard matrix of the MLP width %d; %s",
                         x->name, c->model.d_mlp, hint);
            return CIC_EINPUT;
        }
        if (x->kind == CIC_XFORM_ROTATE_HEADS && x->q == CIC_Q_HADAMARD &&
            !cic_q_hadamard_k_supported(c->model.d_model / c->model.heads, x->hadamard_base)) {
            char hint[256];
            cic_q_hadamard_k_explain(hint, sizeof hint, c->model.d_model / c->model.heads,
                                     x->hadamard_base);
            cic_diag_set(d, c->path, x->line, 1,
                         "transform '%s': no Hadamard matrix of the head width %d; %s",
                         x->name, c->model.d_model / c->model.heads, hint);
            return CIC_EINPUT;
        }
        if ((x->kind == CIC_XFORM_ROTATE || adaln) && x->q == CIC_Q_HADAMARD &&
            !cic_q_hadamard_supported(c->model.d_model)) {
            char hint[256];
            cic_q_hadamard_suggest(hint, sizeof hint, c->model.d_model);
            cic_diag_set(d, c->path, x->line, 1,
                         "transform '%s': no Hadamard matrix of order d_model = %d; %s",
                         x->name, c->model.d_model, hint);
            return CIC_EINPUT;
        }
    }
    return CIC_OK;
}

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

/* Multiply by Q over the residual dimension: right (W Q, for readers and
 * the input: rows stay, the d columns mix) or left-transposed (Q^T W for
 * writer weights [d, k] and biases [1, d], which mix the d rows / cols). */
int _cic_xf_rotate_right(ctx *c, int id, const mpfr_t *q, int d)
{
    cic_model *m = c->m;
    int rows = m->t[id].rows, cols = m->t[id].cols;
    mpfr_t *tv = NULL, *nv = NULL;
    const mpfr_t *v;
    int lz;
    CIC_ASSERT(cols == d);
    if (c->hq && c->hq->d == d && (lz = rotate_lazy(c, id, CIC_LAZY_RIGHT)) != 0)
        return lz < 0 ? -1 : 0;
    if (c->blas && c->qd && c->qd_n == d)
        return _cic_xf_rotate_f64(c, id, false, c->qd, d);
    v = vals(m, id, &tv);
    nv = cic_mpvec_create((size_t)rows * cols, c->p);
    if (!v || !nv) {
        cic_mpvec_destroy(tv, (size_t)rows * cols);
        cic_mpvec_destroy(nv, (size_t)rows * cols);
        return -1;
    }
    cic_mp_matmul(nv, v, false, q, false, rows, d, d, c->blas, cic_rt_matmul_threads(m->rt),
                  &c->dot);
    install(m, id, nv, c->p);
    cic_mpvec_destroy(tv, (size_t)rows * cols);
    return 0;
}

/* A writer's weight [d, k] (Q^T W) or its bias [1, d] (b Q). Which one is
 * said, not guessed from the shape: at d = 1 a weight has one row too. */
static int rotate_writer(ctx *c, int id, bool bias, const mpfr_t *q, int d)
{
    cic_model *m = c->m;
    int rows = m->t[id].rows, cols = m->t[id].cols;
    mpfr_t *tv = NULL, *nv = NULL;
    const mpfr_t *v;
    int lz;
    if (bias) /* b' = b Q */
        return rotate_right(c, id, q, d);
    CIC_ASSERT(rows == d);
    if (c->hq && c->hq->d == d && (lz = rotate_lazy(c, id, CIC_LAZY_LEFT)) != 0)
        return lz < 0 ? -1 : 0;
    if (c->blas && c->qd && c->qd_n == d)
        return _cic_xf_rotate_f64(c, id, true, c->qd, d);
    v = vals(m, id, &tv);
    nv = cic_mpvec_create((size_t)rows * cols, c->p);
    if (!v || !nv) {
        cic_mpvec_destroy(tv, (size_t)rows * cols);
        cic_mpvec_destroy(nv, (size_t)rows * cols);
        return -1;
    }
    /* W'[i, k] = sum_j Q[j, i] W[j, k] */
    cic_mp_matmul(nv, q, true, v, false, d, cols, d, c->blas, cic_rt_matmul_threads(m->rt),
                  &c->dot);
    install(m, id, nv, c->p);
    cic_mpvec_destroy(tv, (size_t)rows * cols);
    return 0;
}

static int do_fuse(ctx *c, const cic_xform_spec *x, bool layernorm)
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
    if (layernorm && x->mistake != CIC_MISTAKE_SKIP_MEAN_BAKE) {
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
    if (!layernorm && x->mistake == CIC_MISTAKE_CENTER_EMBEDDINGS &&
        _cic_xf_center(c, m->input, 1) < 0)
        return -1;
    return 0;
}

/* Rotation x's Q of the stream (order d) into q: MPFR at c->p, with
 * c->blas doubles too (c->qd: the products through dgemm), a Hadamard Q
 * through dgemm as doubles alone (16 M MPFR numbers at d 4096, never read;
 * _cic_xf_aq_mp makes them if the readout needs them). A Hadamard Q not
 * through dgemm also gets *hq: the weights become recipes (lazy.h). */
static int rotation_q(ctx *c, const cic_xform_spec *x, cic_xf_aq *q, cic_xf_hq *hq)
{
    int d = c->m->cfg.d_model;
    size_t dd = (size_t)d * d, k;
    cic_diag dg;
    q->d = d;
    q->p = c->p;
    if (c->blas && x->q == CIC_Q_HADAMARD) {
        q->f64 = cic_model_array_alloc(dd, sizeof *q->f64, false);
        c->qd = q->f64;
        c->qd_n = d;
        return q->f64 ? cic_q_hadamard_k_f64(q->f64, d, x->hadamard_base, x->q_seed) : -1;
    }
    if (!(q->mp = cic_mpvec_create(dd, c->p)))
        return -1;
    switch (x->q) {
    case CIC_Q_RANDOM:
        if (cic_q_random(q->mp, d, x->q_seed, c->p) < 0)
            return -1;
        break;
    case CIC_Q_HADAMARD:
        if (cic_q_hadamard_k(q->mp, d, x->hadamard_base, x->q_seed, c->p) < 0)
            return -1;
        hq->d = d;
        hq->K = cic_hadamard_base_order_k(d, x->hadamard_base);
        hq->sign = cic_calloc((size_t)d, 1);
        if (!hq->sign || cic_hadamard_base_k(&hq->hk, x->hadamard_base, d) < 0)
            return -1;
        cic_q_hadamard_signs(hq->sign, d, x->q_seed);
        c->hq = hq;
        break;
    case CIC_Q_REGULAR:
        if (cic_q_regular_hadamard(q->mp, d, x->q_seed, c->p) < 0)
            return -1;
        break;
    case CIC_Q_FILE:
        if (cic_q_file(q->mp, d, x, c->p, &dg) < 0) /* checked by cic_xform_check */
            return -1;
        break;
    default:
        cic_q_identity(q->mp, d);
        break;
    }
    if (c->blas) { /* the products by Q in double, kept as doubles */
        if (!(q->f64 = cic_model_array_alloc(dd, sizeof *q->f64, false)))
            return -1;
        for (k = 0; k < dd; k++)
            q->f64[k] = mpfr_get_d(q->mp[k], MPFR_RNDN);
        c->qd = q->f64;
        c->qd_n = d;
    }
    return 0;
}

/* Every reader's weight W Q, every writer's Q^T W and b Q (but the
 * attention writers with the mistake skip-attn-out), the input X Q. q->mp
 * may be NULL when the products go through dgemm (c->qd). */
static int rotate_weights(ctx *c, const cic_xform_spec *x, const cic_xf_aq *q)
{
    cic_model *m = c->m;
    const mpfr_t *qm = (const mpfr_t *)q->mp;
    int d = q->d, i;
    for (i = 0; i < m->n_ops; i++) {
        cic_op *o = &m->ops[i];
        if (o->kind != CIC_OP_LINEAR)
            continue;
        if (o->role == CIC_ROLE_READER && rotate_right(c, o->w, qm, d) < 0)
            return -1;
        if (o->role == CIC_ROLE_WRITER) {
            if (x->mistake == CIC_MISTAKE_SKIP_ATTN_OUT && o->site == CIC_SITE_ATTN)
                continue;
            if (rotate_writer(c, o->w, false, qm, d) < 0 ||
                (o->b >= 0 && rotate_writer(c, o->b, true, qm, d) < 0))
                return -1;
        }
    }
    return rotate_right(c, m->input, qm, d);
}

/* The readout map accumulates, X' = X Q_old Q: kept only for the residual
 * readout (a head readout is in the original basis already); q's MPFR
 * values may pass to the model. */
static int readout_q(ctx *c, cic_xf_aq *q)
{
    cic_model *m = c->m;
    int d = q->d, i, k;
    size_t dd = (size_t)d * d;
    mpfr_prec_t op = m->out_q_prec > c->p ? m->out_q_prec : c->p;
    const mpfr_t *qm;
    mpfr_t *nq;
    if (m->output != m->residual)
        return 0;
    if (!(qm = _cic_xf_aq_mp(q)))
        return -1;
    if (!m->out_q) {
        m->out_q = q->mp;
        m->out_q_prec = c->p;
        q->mp = NULL;
        return 0;
    }
    if (!(nq = cic_mpvec_create(dd, op)))
        return -1;
    for (i = 0; i < d; i++)
        for (k = 0; k < d; k++)
            cic_mp_dot(nq[(size_t)i * d + k], (const mpfr_t *)m->out_q + (size_t)i * d, 1,
                       qm + k, (size_t)d, (size_t)d, NULL, &c->dot);
    cic_mpvec_destroy(m->out_q, dd);
    m->out_q = nq;
    m->out_q_prec = op;
    return 0;
}

static int do_rotate(ctx *c, const cic_xform_spec *x)
{
    cic_xf_aq q;
    cic_xf_hq hq = { 0, 0, NULL, NULL };
    int rc = -1;
    memset(&q, 0, sizeof q);
    if (rotation_q(c, x, &q, &hq) == 0 && rotate_weights(c, x, &q) == 0 && readout_q(c, &q) == 0)
        rc = 0;
    c->hq = NULL;
    c->qd = NULL;
    free(hq.hk);
    free(hq.sign);
    _cic_xf_aq_clear(&q);
    return rc;
}

static bool adaln_kind(enum cic_xform_kind k)
{
    return k == CIC_XFORM_STATIC_FOLD || k == CIC_XFORM_ONLINE_UNROTATE ||
           k == CIC_XFORM_PER_SAMPLE_FOLD || k == CIC_XFORM_BRANCH_ROTATE;
}

/* x applied to m itself (not an adaLN strategy): m, or NULL with m
 * destroyed and d set. */
static cic_model *apply_in_place(cic_model *m, const cic_xform_spec *x, mpfr_prec_t engine_prec,
                                 cic_diag *d)
{
    ctx c;
    int rc = -1;
    memset(&c, 0, sizeof c);
    if (ctx_init(&c, m, cic_xform_prec(x, engine_prec)) < 0)
        goto done;
    c.blas = x->prec == CIC_TPREC_F64_BLAS;
    switch (x->kind) {
    case CIC_XFORM_FUSE_LAYERNORM:
        rc = do_fuse(&c, x, true);
        break;
    case CIC_XFORM_FOLD_RMSNORM_GAMMA:
        rc = do_fuse(&c, x, false);
        break;
    case CIC_XFORM_ROTATE:
        rc = do_rotate(&c, x);
        break;
    case CIC_XFORM_ROTATE_HEADS:
        rc = _cic_xf_rotate_heads(&c, x);
        break;
    case CIC_XFORM_ONLINE_DOWN:
        rc = _cic_xf_online_down(&c, x);
        break;
    case CIC_XFORM_ONLINE_QK:
        rc = _cic_xf_online_qk(&c, x);
        break;
    default:
        CIC_ASSERT(0 && "transform kind");
    }
done:
    _cic_xf_ctx_clear(&c);
    if (rc < 0) {
        cic_diag_set(d, NULL, 0, 0, "transform '%s': out of memory", x->name);
        cic_model_destroy(m);
        return NULL;
    }
    return m;
}

cic_model *cic_xform_apply(const cic_model *src, const cic_xform_spec *x,
                           mpfr_prec_t engine_prec, cic_diag *d)
{
    cic_model *m;
    if (adaln_kind(x->kind))
        return cic_adaln_apply(src, x, engine_prec, d);
    if (!(m = cic_model_clone(src))) {
        cic_diag_set(d, NULL, 0, 0, "transform '%s': out of memory", x->name);
        return NULL;
    }
    return apply_in_place(m, x, engine_prec, d);
}

cic_model *cic_xform_apply_take(cic_model *src, const cic_xform_spec *x,
                                mpfr_prec_t engine_prec, cic_diag *d)
{
    cic_model *m;
    if (!adaln_kind(x->kind))
        return apply_in_place(src, x, engine_prec, d);
    m = cic_adaln_apply(src, x, engine_prec, d);
    cic_model_destroy(src);
    return m;
}
