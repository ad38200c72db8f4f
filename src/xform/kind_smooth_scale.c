/* SPDX-License-Identifier: MIT */
/* kind_smooth_scale.c: SmoothQuant's per-channel scale migration (kind
 * "smooth-scale"; Xiao et al. 2023), on blocks whose norms have a gain
 * (LayerNorm and RMSNorm: preln, rmsnorm, parallel). A norm's output
 * y = n g + b (n the normalized row, g its gain, b its bias, LayerNorm
 * only) is read by linears y W^T + c. For any positive scales s (one per
 * input channel j), with S = diag(s),
 *   y W^T = (y S^-1)(W S)^T,   y S^-1 = n (g / s) + b / s,
 * so dividing the norm's gain and bias by s and multiplying every reader's
 * column j by s_j leaves every output unchanged: exact, whatever s is. The
 * point is which s: SmoothQuant moves the activations' outlier channels
 * into the weights, s_j = max|X_j|^alpha / max|W_j|^(1 - alpha), the max
 * over the calibration tokens and over the readers' rows. cicheck's
 * transforms see no activations, so the norm's gain stands in for the
 * activation scale (the normalized n has unit scale per row; the channels
 * whose outputs are large are those with a large |g_j|):
 *   s_j = |g_j|^alpha / (max_r,i |W_r[i, j]|)^(1 - alpha),
 * alpha = the key alpha (0 .. 1, default 0.5), s_j = 1 where g_j or the
 * column is 0. Each power, the quotient, g / s, b / s and W s are
 * correctly rounded MPFR operations at the transform's precision; the
 * maxima are exact. Only weights change: no op, no FLOP. Known mistake
 * "skip-bias": the LayerNorm bias left undivided (broken; on an RMSNorm
 * block, which has no bias, it changes nothing). */
#include "xform.h"

#include "../base/mpvec.h"
#include "xform_util.h"

#include <stdlib.h>

/* Its known mistake, by number (cic_xform_spec.mistake; .mistakes below). */
enum { SKIP_BIAS = 1 };

typedef cic_xf_ctx ctx;

/* The scales of norm op n (gain g, width d) into s, from the gain and the
 * columns of its nr readers' weights. */
static int scales(ctx *c, mpfr_t *s, const mpfr_t *g, int d, const int *rd, int nr, double alpha)
{
    cic_model *m = c->m;
    mpfr_t amax, a, e;
    int r, i, j, rc = 0;
    mpfr_inits2(c->p, amax, a, (mpfr_ptr)0);
    mpfr_init2(e, 64); /* alpha and 1 - alpha: exact for alpha a double in [2^-11, 1] */
    for (j = 0; j < d; j++)
        mpfr_set_zero(s[j], 1);
    for (r = 0; r < nr && rc == 0; r++) { /* s[j] = max |W[i, j]|, exact (a max) */
        const cic_tensor *t = &m->t[m->ops[rd[r]].w];
        mpfr_t *tmp = NULL;
        const mpfr_t *w = _cic_xf_vals(m, m->ops[rd[r]].w, &tmp);
        if (!w) {
            rc = -1;
            break;
        }
        for (i = 0; i < t->rows; i++)
            for (j = 0; j < d; j++)
                if (mpfr_cmpabs(w[(size_t)i * d + j], s[j]) > 0)
                    mpfr_abs(s[j], w[(size_t)i * d + j], MPFR_RNDN); /* s[j] has c->p bits */
        cic_mpvec_destroy(tmp, (size_t)t->rows * t->cols);
    }
    for (j = 0; j < d && rc == 0; j++) {
        if (mpfr_zero_p(g[j]) || mpfr_zero_p(s[j])) {
            mpfr_set_ui(s[j], 1, MPFR_RNDN);
            continue;
        }
        mpfr_set(amax, s[j], MPFR_RNDN);
        mpfr_abs(a, g[j], MPFR_RNDN);
        mpfr_set_d(e, alpha, MPFR_RNDN);
        mpfr_pow(a, a, e, MPFR_RNDN);
        mpfr_ui_sub(e, 1, e, MPFR_RNDN);
        mpfr_pow(amax, amax, e, MPFR_RNDN);
        mpfr_div(s[j], a, amax, MPFR_RNDN);
    }
    mpfr_clears(amax, a, e, (mpfr_ptr)0);
    return rc;
}

/* v (n values of tensor id) divided by s elementwise (columns of a row). */
static int divide(ctx *c, int id, const mpfr_t *s)
{
    mpfr_t *tmp = NULL, *nv;
    int n = c->m->t[id].cols, j;
    const mpfr_t *v = _cic_xf_vals(c->m, id, &tmp);
    nv = v ? cic_mpvec_create((size_t)n, c->p) : NULL;
    if (nv)
        for (j = 0; j < n; j++)
            mpfr_div(nv[j], v[j], s[j], MPFR_RNDN);
    cic_mpvec_destroy(tmp, (size_t)n);
    if (!nv)
        return -1;
    _cic_xf_install(c->m, id, nv, c->p);
    return 0;
}

/* Reader weight id [rows, d]: column j times s_j. */
static int multiply(ctx *c, int id, const mpfr_t *s)
{
    const cic_tensor *t = &c->m->t[id];
    size_t n = (size_t)t->rows * t->cols, k;
    mpfr_t *tmp = NULL, *nv;
    const mpfr_t *v = _cic_xf_vals(c->m, id, &tmp);
    nv = v ? cic_mpvec_create(n, c->p) : NULL;
    if (nv)
        for (k = 0; k < n; k++)
            mpfr_mul(nv[k], v[k], s[k % (size_t)t->cols], MPFR_RNDN);
    cic_mpvec_destroy(tmp, n);
    if (!nv)
        return -1;
    _cic_xf_install(c->m, id, nv, c->p);
    return 0;
}

/* Norm op n with a gain and its linear readers. */
static int smooth_norm(ctx *c, const cic_op *n, const cic_xform_spec *x)
{
    cic_model *m = c->m;
    int d = m->t[n->g].cols, nr = 0, i, rc = -1;
    int *rd = cic_calloc((size_t)m->n_ops, sizeof *rd);
    mpfr_t *s = cic_mpvec_create((size_t)d, c->p), *tg = NULL;
    const mpfr_t *g = _cic_xf_vals(m, n->g, &tg);
    if (!rd || !s || !g)
        goto cleanup;
    for (i = 0; i < m->n_ops; i++)
        if (m->ops[i].kind == CIC_OP_LINEAR && m->ops[i].in[0] == n->out)
            rd[nr++] = i;
    if (scales(c, s, g, d, rd, nr, x->param[0]) < 0)
        goto cleanup;
    for (i = 0; i < nr; i++)
        if (multiply(c, m->ops[rd[i]].w, (const mpfr_t *)s) < 0)
            goto cleanup;
    cic_mpvec_destroy(tg, (size_t)d);
    tg = NULL;
    if (divide(c, n->g, (const mpfr_t *)s) < 0 ||
        (n->b >= 0 && x->mistake != SKIP_BIAS && divide(c, n->b, (const mpfr_t *)s) < 0))
        goto cleanup;
    rc = 0;
cleanup:
    free(rd);
    cic_mpvec_destroy(s, (size_t)d);
    cic_mpvec_destroy(tg, (size_t)d);
    return rc;
}

static int apply(ctx *c, const cic_xform_spec *x)
{
    int i;
    for (i = 0; i < c->m->n_ops; i++) {
        const cic_op *n = &c->m->ops[i];
        if (n->kind == CIC_OP_NORM && n->g >= 0 && smooth_norm(c, n, x) < 0)
            return -1;
    }
    return 0;
}

const cic_xform_desc cic_xform_smooth_scale = {
    .name = "smooth-scale",
    .family = CIC_XFAM_FOLD,
    .norms = 1u << CIC_NORM_LAYERNORM | 1u << CIC_NORM_RMSNORM,
    .keys = CIC_XKEY_MISTAKE,
    .mistakes = {[SKIP_BIAS - 1] = "skip-bias"}, /* the bias left undivided */
    .params = {{"alpha", 0.0, 1.0, 0.5}},
    .apply = apply,
};
