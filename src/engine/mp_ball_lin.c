/* SPDX-License-Identifier: MIT */
/* mp_ball_lin.c: the ball run's linear layers: the correctly
 * rounded dot products and the inputs' radii spread through |W| by a
 * float32 OpenBLAS product, bounded in any summation order. */
#include "mp_ball_int.h"

#include "../base/specnorm.h"

#include <cblas.h>
#include <float.h>
#include <stdlib.h>

/* ---- linear layers ---- */

/* float upper bound of v >= 0, never below FLT_MIN when v > 0 (so that
 * flushing subnormals to zero would not lower a product) */
static float f_up(double v)
{
    float f = (float)v;
    if ((double)f < v)
        f = nextafterf(f, INFINITY);
    return v > 0 && f < FLT_MIN ? FLT_MIN : f;
}

static float w_abs(const cic_tensor *t, size_t i)
{
    float a = t->hp    ? fabsf(mpfr_get_flt(t->hp[i], MPFR_RNDA))
              : t->f64 ? f_up(fabs(t->f64[i]))
                       : fabsf(t->f32[i]);
    return a > 0 && a < FLT_MIN ? FLT_MIN : a;
}

/* next[R, n] = sum_p |W[j, p]| rx[i, p], bounded above, one sample's
 * rows at a time (so a run over some samples bounds them as a run over
 * all does, bit for bit): the radii scaled by 2^S (S exact, the sample's
 * largest scaled radius in [1, 2)), rounded up to float, times |W| through
 * sgemm; its error in any order is within (k + 2) 2^-23 of the sum, and
 * k 2^-125 covers products lost to underflow. */
static void spread_rows(double *next, const double *rx, const float *aw, int T, float *xf,
                        float *c, int R, int n, int k)
{
    size_t nx = (size_t)R * k, i;
    double M = 0;
    int S;
    for (i = 0; i < nx; i++)
        M = rx[i] > M ? rx[i] : M;
    if (M == 0 || !isfinite(M)) {
        for (i = 0; i < (size_t)R * n; i++)
            next[i] = M == 0 ? 0 : INFINITY;
        return;
    }
    S = -ilogb(M);
    for (i = 0; i < nx; i++)
        xf[i] = f_up(ldexp(rx[i], S));
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, R, n, k, 1.0f, xf, k, aw, k, 0.0f, c,
                n);
    for (i = 0; i < (size_t)R * n; i++)
        next[i] = up(ldexp(up((double)c[i] * (1.0 + (double)(k + 2) * 0x1p-23) +
                              (double)k * 0x1p-125),
                           T - S));
}

static int lin_spread(cic_ball *b, const cic_tensor *wt, const double *rx, int R, int n, int k)
{
    int per = R / b->ns, s, T = 0;
    size_t nw = (size_t)n * k, i;
    float mw = 0;
    float *xf = malloc((size_t)per * k * sizeof *xf), *aw = malloc(nw * sizeof *aw);
    float *c = malloc((size_t)per * n * sizeof *c);
    if (!xf || !aw || !c) {
        free(xf);
        free(aw);
        free(c);
        return -1;
    }
    for (i = 0; i < nw; i++) {
        aw[i] = w_abs(wt, i);
        mw = aw[i] > mw ? aw[i] : mw;
    }
    /* |W| near the float32 limit (a weight of 3.4e38) would overflow the
     * float sums of products with radii in [1, 2): such a weight is scaled
     * by 2^-T (exact; a product pushed below FLT_MIN is raised to it, so
     * still an upper bound) and the sums by 2^T back in double. Weights of
     * ordinary size (below 2^64) are left as they are, bit for bit. */
    if (mw > 0x1p64f) {
        T = ilogbf(mw);
        for (i = 0; i < nw; i++) {
            float a = ldexpf(aw[i], -T);
            aw[i] = aw[i] > 0 && a < FLT_MIN ? FLT_MIN : a;
        }
    }
    for (s = 0; s < b->ns; s++)
        spread_rows(b->next + (size_t)s * per * n, rx + (size_t)s * per * k, aw, T, xf, c, per,
                    n, k);
    free(xf);
    free(aw);
    free(c);
    return 0;
}

/* A proven upper bound of the spectral norm of weight id (base/specnorm.h)
 * for the values the engine reads (hp, the doubles or float32), kept in
 * the run context's cache (m->rt; the ball's own cache without one) so
 * that Ziv's reruns do not prove it again; INFINITY when there is none. */
static double lin_sigma(cic_ball *b, int id)
{
    const cic_tensor *wt = &b->m->t[id];
    cic_specnorm_cache *c = b->m->rt ? cic_rt_specnorm(b->m->rt) : b->sn_own;
    size_t n = (size_t)wt->rows, k = (size_t)wt->cols;
    double s = INFINITY;
    int rc = wt->hp    ? cic_specnorm_mp(&s, (const mpfr_t *)wt->hp, n, k, b->nt, c)
             : wt->f64 ? cic_specnorm_d(&s, wt->f64, n, k, c)
                       : cic_specnorm_f(&s, wt->f32, n, k, c);
    return rc == 0 && s >= 0 ? s : INFINITY;
}

/* ---- pairs: a linear layer beside a diagonal map ---- */

int _cic_ball_pair_set(ball_pair *p, int id, size_t rows, size_t nD)
{
    _cic_ball_pair_free(p);
    p->ex = malloc((rows ? rows : 1) * sizeof *p->ex);
    p->rest = malloc((rows ? rows : 1) * sizeof *p->rest);
    p->D = nD ? malloc(nD * sizeof *p->D) : NULL;
    if (!p->ex || !p->rest || (nD && !p->D)) {
        _cic_ball_pair_free(p);
        return -1;
    }
    p->id = id;
    return 0;
}

void _cic_ball_pair_free(ball_pair *p)
{
    free(p->D);
    free(p->ex);
    free(p->rest);
    p->D = p->ex = p->rest = NULL;
    p->id = -1;
}

/* The Gram matrix of W's scaled side, kept for the next call on the same
 * weight and side (the samples of a run, the gate after its linear); NULL
 * when there is none (specnorm.h says when). */
static const struct cic_specnorm_gram *pair_gram(cic_ball *b, int w, bool cols)
{
    const cic_tensor *wt = &b->m->t[w];
    if (b->gram_tried && b->gram_w == w && b->gram_cols == cols)
        return b->gram; /* NULL too: none for this weight and side */
    cic_specnorm_gram_destroy(b->gram);
    b->gram = cic_specnorm_gram_f(wt->f32, (size_t)wt->rows, (size_t)wt->cols, cols);
    b->gram_w = w;
    b->gram_cols = cols;
    b->gram_tried = true;
    return b->gram;
}

/* A bound of ||W diag(D)||_2 per sample (||W diag(t)||_2 <= ||W
 * diag(D)||_2 when |t| <= D: diag(t / D) has norm <= 1), float32 weights
 * only: from the Gram matrix of W's scaled side, scaled by D on both sides
 * (specnorm.h); where there is none, W's columns (or rows) times D rounded
 * up to float (products of two floats, exact in double) as a matrix of
 * its own. */
void _cic_ball_scaled_sigma(cic_ball *b, int w, const double *D, bool cols, double *sg)
{
    const cic_tensor *wt = &b->m->t[w];
    size_t n = (size_t)wt->rows, k = (size_t)wt->cols, len = cols ? k : n, i, j;
    const struct cic_specnorm_gram *g;
    double *ws;
    int q;
    for (q = 0; q < b->ns; q++)
        sg[q] = INFINITY;
    if (!wt->f32 || wt->hp || wt->f64 || wt->lazy)
        return;
    if ((g = pair_gram(b, w, cols))) {
        for (q = 0; q < b->ns; q++) {
            double s = INFINITY;
            if (cic_specnorm_gram_scaled(&s, g, D + (size_t)q * len) == 0 && s >= 0)
                sg[q] = s;
        }
        return;
    }
    if (!(ws = malloc(n * k * sizeof *ws)))
        return;
    for (q = 0; q < b->ns; q++) {
        const double *Dq = D + (size_t)q * len;
        double s = INFINITY;
        for (i = 0; i < n; i++)
            for (j = 0; j < k; j++)
                ws[i * k + j] = (double)wt->f32[i * k + j] * (double)f_up(cols ? Dq[j] : Dq[i]);
        if (cic_specnorm_d(&s, ws, n, k, NULL) == 0 && s >= 0)
            sg[q] = s;
    }
    free(ws);
}

/* The pair's candidate for each row of the linear's output: y = diag(t) x
 * + rest before it (b->dg), so z* - z^ = W diag(t) (x* - x^) + W rest +
 * own: sigma(W diag(D_s)) e_x + sigma_W ||rest|| + own. INFINITY per
 * sample where none. sg: ns values, the caller's. */
static void pair_sigmas(cic_ball *b, const cic_op *o, double sig, double *sg)
{
    const cic_tensor *wt = &b->m->t[o->w];
    int s;
    if (b->nb && o->group == 0 && sig < INFINITY && b->dg.id == o->in[0] &&
        b->dg.n == wt->cols)
        _cic_ball_scaled_sigma(b, o->w, b->dg.D, true, sg); /* INFINITY where none */
    else
        for (s = 0; s < b->ns; s++)
            sg[s] = INFINITY;
}

static int lin_post(cic_ball *b, const cic_op *o, const mpfr_t *y)
{
    const cic_model *m = b->m;
    const cic_tensor *wt = &m->t[o->w];
    const double *rx = b->rad[o->in[0]], *rb = o->b >= 0 ? b->rad[o->b] : NULL;
    int R = cic_model_run_rows(m, o->in[0], b->ns) *
            (o->group > 0 ? m->t[o->in[0]].cols / o->group : 1);
    int n = wt->rows, k = wt->cols, i, j, per_s = R / b->ns;
    double sig, *sg;
    bool bper = o->b >= 0 && m->t[o->b].role == CIC_T_ACT;
    if (wt->role != CIC_T_WEIGHT || wt->lazy)
        return fail(b, "a linear layer whose weights are made per sample or from a recipe");
    if (k > 100000)
        return fail(b, "a linear layer of over 100000 inputs");
    if (rx && lin_spread(b, wt, rx, R, n, k) < 0)
        return -1;
    sig = b->nb && o->group == 0 ? lin_sigma(b, o->w) : INFINITY;
    if (!(sg = malloc((size_t)b->ns * sizeof *sg)))
        return -1;
    pair_sigmas(b, o, sig, sg);
    if (sig < INFINITY) {
        if (_cic_ball_pair_set(&b->ln, o->out, (size_t)R, 0) < 0) {
            free(sg);
            return -1;
        }
        b->ln.w = o->w;
        b->ln.n = n;
    }
    for (i = 0; i < R; i++) {
        double own = 0; /* the squares of this row's own roundings and bias radii */
        for (j = 0; j < n; j++) {
            size_t q = (size_t)i * n + j;
            double rbj = rad_at(rb, (bper ? (size_t)(i / per_s) * n : 0) + j);
            double rj = up(b->u * absup(y[q]) + rbj);
            own += rj * rj;
            b->next[q] = up(b->next[q] + rj);
        }
        /* ||W (x* - x^)|| <= sigma ||x* - x^||, plus the row's own part */
        if (sig < INFINITY) {
            double on = up(sqrt(bound_sum(own, (size_t)n))), pc = sg[i / per_s];
            b->next_nrm[i] = up(up(sig * nrm_at(b, o->in[0], (size_t)i)) + on);
            b->ln.ex[i] = nrm_at(b, o->in[0], (size_t)i);
            b->ln.rest[i] = on;
            if (pc < INFINITY)
                b->next_nrm[i] = _cic_ball_pair_cand(b->next_nrm[i], pc, b->dg.ex[i], sig,
                                                     b->dg.rest[i], on);
        }
    }
    free(sg);
    return 0;
}

/* The bound needs the rounded outputs: all of it after the kernel. */
const cic_ball_rule _cic_ball_rule_linear = {.pre = _cic_ball_pre_none, .post = lin_post};
