/* SPDX-License-Identifier: MIT */
/* mp_ball.c: the radii of a ball run of the MPFR engine (mp_ball.h).
 *
 * Arithmetic on radii is double in round-to-nearest, made safe by up():
 * every quantity is nonnegative, and an expression of at most 6 operations
 * on nonnegative values lies below its computed value times (1 + 2^-50)
 * plus 2^-1060 (which covers the absolute error of results that
 * underflow). A long sum of nonnegative terms, in any order (OpenBLAS's
 * included), is bounded by the classic gamma_n bound: bound_sum below.
 * Magnitudes of midpoints are taken rounded away from zero (absup), so
 * they bound the midpoint. u = 2^-prec: a correctly rounded operation at
 * prec bits is within u |result| of its exact result. */
#include "mp_ball.h"

#include "engine.h"

#include "../base/base.h"
#include "../base/mpvec.h"
#include "../base/par.h"

#include <arb.h>
#include <arb_hypgeom.h>
#include <cblas.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    const double *aq, *ak, *av, *rq, *rk, *rv;
    double *ry;
    double c; /* 1 / sqrt(dh), rounded up */
    int N, d, H, dh, lq, lk, lv, qc, kc, vc, grp;
} ball_attn;

struct cic_ball {
    const cic_model *m;
    mpfr_prec_t prec;
    double u;
    int ns;
    double **rad;  /* per tensor id; NULL: exact (weights, inputs) */
    double **absv; /* per tensor id: |midpoints| rounded up (attention) */
    double *next;  /* the radii of the op being run, installed by post */
    arb_ptr enc;   /* enclosures made before the op, compared after */
    size_t n_enc;
    ball_attn at;
    bool failed;
    char why[160];
};

static double up(double x)
{
    return x * (1.0 + 0x1p-50) + 0x1p-1060;
}

/* A computed sum s of n nonnegative terms (each a product of at most three
 * factors and a sum of two, correctly rounded in double), in any order:
 * the exact sum is below s (1 + gamma) with gamma = (n + 2) 2^-51 >= the
 * gamma_n of n u / (1 - n u) for n u <= 1/100, plus what underflow lost. */
static double bound_sum(double s, size_t n)
{
    return up(s * (1.0 + (double)(n + 2) * 0x1p-51) + (double)n * 0x1p-1060);
}

static double absup(mpfr_srcptr x)
{
    return fabs(mpfr_get_d(x, MPFR_RNDA));
}

static double rad_at(const double *r, size_t i)
{
    return r ? r[i] : 0.0;
}

static size_t count(const cic_ball *b, int id)
{
    return (size_t)cic_model_run_rows(b->m, id, b->ns) * (size_t)b->m->t[id].cols;
}

static int fail(cic_ball *b, const char *what)
{
    if (!b->failed)
        snprintf(b->why, sizeof b->why, "%s has no error bound", what);
    b->failed = true;
    return 0;
}

/* ---- threads ---- */

/* fn(ctx, lo, hi) over [0, n) in contiguous ranges, one per thread of the
 * MPFR engine (cic_engine_mpfr_threads, at most 16; the caller is one;
 * base/par.h). Each value's bound is computed whole by one thread from its
 * own inputs, so the radii are the same bits for any thread count. */
typedef void (*ball_range_fn)(void *ctx, size_t lo, size_t hi);
typedef struct {
    ball_range_fn fn;
    void *ctx;
} ball_range;

static void ball_range_run(void *a, size_t lo, size_t hi, int t)
{
    ball_range *j = a;
    (void)t;
    j->fn(j->ctx, lo, hi);
}

static void ball_parallel(size_t n, ball_range_fn fn, void *ctx)
{
    ball_range j = {fn, ctx};
    int nt = cic_engine_mpfr_threads();
    cic_par_ranges(n, nt > 16 ? 16 : nt, ball_range_run, &j);
}

cic_ball *cic_ball_create(const cic_model *m, mpfr_prec_t prec, int ns)
{
    cic_ball *b = cic_calloc(1, sizeof *b);
    if (!b)
        return NULL;
    b->m = m;
    b->prec = prec;
    b->u = ldexp(1.0, -(int)prec);
    b->ns = ns;
    b->rad = cic_calloc((size_t)m->n_t, sizeof *b->rad);
    b->absv = cic_calloc((size_t)m->n_t, sizeof *b->absv);
    if (!b->rad || !b->absv) {
        cic_ball_destroy(b);
        return NULL;
    }
    return b;
}

static void drop_enc(cic_ball *b)
{
    if (b->enc)
        _arb_vec_clear(b->enc, (slong)b->n_enc);
    b->enc = NULL;
    b->n_enc = 0;
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
    free(b->rad);
    free(b->absv);
    free(b->next);
    drop_enc(b);
    free(b);
    flint_cleanup();
}

void cic_ball_drop(cic_ball *b, int id)
{
    free(b->rad[id]);
    b->rad[id] = NULL;
}

void cic_ball_result(const cic_ball *b, int id, size_t n, cic_ball_out *out)
{
    size_t i;
    out->failed = b->failed;
    snprintf(out->why, sizeof out->why, "%s", b->failed ? b->why : "");
    for (i = 0; i < n; i++)
        out->rad[i] = b->failed ? INFINITY : rad_at(b->rad[id], i);
}

/* ---- enclosures in Arb ---- */

/* x = [m +- r] (m exact; the radius rounded up by mag_set_d) */
static void ball_set(arb_t x, mpfr_srcptr m, double r)
{
    arf_set_mpfr(arb_midref(x), m);
    mag_set_d(arb_radref(x), r);
}

/* An upper bound of |y - e| for every point e of the enclosure. */
static double dist_up(const arb_t e, mpfr_srcptr y, slong prec)
{
    arb_t t;
    arf_t yf, ub;
    double d;
    arb_init(t);
    arf_init(yf);
    arf_init(ub);
    arf_set_mpfr(yf, y);
    arb_sub_arf(t, e, yf, prec);
    arb_get_abs_ubound_arf(ub, t, prec);
    d = arf_get_d(ub, ARF_RND_UP);
    arb_clear(t);
    arf_clear(yf);
    arf_clear(ub);
    return isfinite(d) ? d : INFINITY;
}

static arb_ptr enc_make(cic_ball *b, size_t n)
{
    drop_enc(b);
    b->enc = _arb_vec_init((slong)n);
    b->n_enc = n;
    return b->enc;
}

/* y = x (1 + t) / 2, the tail of both GELU forms (t scratch). */
static void gelu_tail(arb_t y, const arb_t x, arb_t t, slong prec)
{
    arb_add_ui(t, t, 1, prec);
    arb_mul(t, t, x, prec);
    arb_mul_2exp_si(y, t, -1);
}

/* The exact constants of an activation's formula (mp_act.c's decimals and
 * irrationals) as balls, made once per op and read by every thread:
 * 1 / sqrt 2 (GELU); 0.044715 and sqrt(2 / pi) (its tanh form); k of
 * x / (1 + exp(k x)): -1 (SiLU), -1.702 (QuickGELU). */
typedef struct {
    arb_t c0, c1;
} act_consts;

static void act_consts_init(act_consts *k, enum cic_act a, slong prec)
{
    arb_init(k->c0);
    arb_init(k->c1);
    switch (a) {
    case CIC_ACT_GELU:
        arb_rsqrt_ui(k->c0, 2, prec);
        break;
    case CIC_ACT_GELU_TANH:
        arb_set_str(k->c0, "0.044715", prec);
        arb_const_pi(k->c1, prec);
        arb_ui_div(k->c1, 2, k->c1, prec);
        arb_sqrt(k->c1, k->c1, prec);
        break;
    case CIC_ACT_SILU:
        arb_set_si(k->c0, -1);
        break;
    case CIC_ACT_QUICK_GELU:
        arb_set_str(k->c0, "-1.702", prec);
        break;
    default:
        break;
    }
}

static void act_consts_clear(act_consts *k)
{
    arb_clear(k->c0);
    arb_clear(k->c1);
}

/* y = [0, max x] where the ball x straddles 0 (ReLU) */
static void relu_ball(arb_t y, const arb_t x, slong prec)
{
    if (arb_is_positive(x)) {
        arb_set(y, x);
    } else if (arb_is_nonpositive(x)) {
        arb_zero(y);
    } else {
        arf_t lo, hi;
        arf_init(lo);
        arf_init(hi);
        arb_get_ubound_arf(hi, x, prec);
        arb_set_interval_arf(y, lo, hi, prec);
        arf_clear(lo);
        arf_clear(hi);
    }
}

/* The exact activation of the ball x, the formulas of mp_act.c with their
 * constants k (t scratch). */
static void act_ball(arb_t y, const arb_t x, enum cic_act a, arb_t t, const act_consts *k,
                     slong prec)
{
    switch (a) {
    case CIC_ACT_GELU: /* 0.5 x (1 + erf(x / sqrt 2)) */
        arb_mul(t, x, k->c0, prec);
        arb_hypgeom_erf(t, t, prec);
        gelu_tail(y, x, t, prec);
        break;
    case CIC_ACT_GELU_TANH: /* 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) */
        arb_mul(t, x, x, prec);
        arb_mul(t, t, x, prec);
        arb_mul(t, t, k->c0, prec);
        arb_add(t, t, x, prec);
        arb_mul(t, t, k->c1, prec);
        arb_tanh(t, t, prec);
        gelu_tail(y, x, t, prec);
        break;
    case CIC_ACT_RELU:
        relu_ball(y, x, prec);
        break;
    case CIC_ACT_SILU:       /* x / (1 + exp(-x)) */
    case CIC_ACT_QUICK_GELU: /* x / (1 + exp(-1.702 x)) */
        arb_mul(t, k->c0, x, prec);
        arb_exp(t, t, prec);
        arb_add_ui(t, t, 1, prec);
        arb_div(y, x, t, prec);
        break;
    default:
        CIC_ASSERT(0 && "activation without a ball formula");
    }
}

typedef struct {
    const mpfr_t *a, *g; /* g: the GLU's second factor, or NULL */
    const double *ra, *rg;
    arb_ptr e;
    enum cic_act act;
    const act_consts *k;
    slong prec;
} act_job;

static void act_range(void *c, size_t lo, size_t hi)
{
    const act_job *J = c;
    arb_t x, t;
    size_t j;
    arb_init(x);
    arb_init(t);
    for (j = lo; j < hi; j++) {
        ball_set(x, J->a[j], rad_at(J->ra, j));
        act_ball(J->e + j, x, J->act, t, J->k, J->prec);
        if (J->g) {
            ball_set(x, J->g[j], rad_at(J->rg, j));
            arb_mul(J->e + j, J->e + j, x, J->prec);
        }
    }
    arb_clear(x);
    arb_clear(t);
}

static int act_pre(cic_ball *b, const cic_op *o, cic_ball_mid_fn mid, void *ctx, bool glu)
{
    act_job J;
    act_consts k;
    size_t n = count(b, o->out);
    J.a = mid(ctx, o->in[0]);
    J.g = glu ? mid(ctx, o->in[1]) : NULL;
    J.ra = b->rad[o->in[0]];
    J.rg = glu ? b->rad[o->in[1]] : NULL;
    if (!J.a || (glu && !J.g) || !(J.e = enc_make(b, n)))
        return -1;
    J.act = o->act;
    J.prec = (slong)b->prec;
    act_consts_init(&k, o->act, J.prec);
    J.k = &k;
    ball_parallel(n, act_range, &J);
    act_consts_clear(&k);
    return 0;
}

/* LayerNorm / RMSNorm of each row's balls, as mp_norm computes it. */
typedef struct {
    const mpfr_t *x, *g, *bb;
    const double *rx, *rg, *rb;
    arb_ptr e;
    double eps;
    int d;
    bool center;
    slong prec;
} norm_job;

static void norm_row(const norm_job *J, arb_ptr row, size_t off, arb_t mean, arb_t var, arb_t t)
{
    int d = J->d, j;
    slong prec = J->prec;
    arb_zero(mean);
    for (j = 0; j < d; j++) {
        ball_set(row + j, J->x[off + j], rad_at(J->rx, off + j));
        if (J->center)
            arb_add(mean, mean, row + j, prec);
    }
    if (J->center) {
        arb_div_ui(mean, mean, (ulong)d, prec);
        for (j = 0; j < d; j++)
            arb_sub(row + j, row + j, mean, prec);
    }
    arb_dot(var, NULL, 0, row, 1, row, 1, d, prec);
    arb_div_ui(var, var, (ulong)d, prec);
    arb_set_d(t, J->eps);
    arb_add(var, var, t, prec);
    arb_rsqrt(var, var, prec);
    for (j = 0; j < d; j++) {
        arb_mul(row + j, row + j, var, prec);
        if (J->g) {
            ball_set(t, J->g[j], rad_at(J->rg, (size_t)j));
            arb_mul(row + j, row + j, t, prec);
        }
        if (J->bb) {
            ball_set(t, J->bb[j], rad_at(J->rb, (size_t)j));
            arb_add(row + j, row + j, t, prec);
        }
    }
}

static void norm_rows(void *c, size_t lo, size_t hi)
{
    const norm_job *J = c;
    arb_t mean, var, t;
    size_t i;
    arb_init(mean);
    arb_init(var);
    arb_init(t);
    for (i = lo; i < hi; i++)
        norm_row(J, J->e + i * J->d, i * J->d, mean, var, t);
    arb_clear(mean);
    arb_clear(var);
    arb_clear(t);
}

static int norm_pre(cic_ball *b, const cic_op *o, cic_ball_mid_fn mid, void *ctx)
{
    norm_job J;
    J.x = mid(ctx, o->in[0]);
    J.g = o->g >= 0 ? mid(ctx, o->g) : NULL;
    J.bb = o->b >= 0 ? mid(ctx, o->b) : NULL;
    J.rx = b->rad[o->in[0]];
    J.rg = o->g >= 0 ? b->rad[o->g] : NULL;
    J.rb = o->b >= 0 ? b->rad[o->b] : NULL;
    if (!J.x || (o->g >= 0 && !J.g) || (o->b >= 0 && !J.bb) ||
        !(J.e = enc_make(b, count(b, o->out))))
        return -1;
    J.d = b->m->t[o->in[0]].cols;
    J.eps = (double)o->eps;
    J.center = o->center;
    J.prec = (slong)b->prec;
    ball_parallel((size_t)cic_model_run_rows(b->m, o->in[0], b->ns), norm_rows, &J);
    return 0;
}

/* After the kernel: each radius is the distance to the enclosure. */
typedef struct {
    cic_ball *b;
    const mpfr_t *y;
} enc_job;

static void enc_range(void *c, size_t lo, size_t hi)
{
    const enc_job *J = c;
    size_t j;
    for (j = lo; j < hi; j++)
        J->b->next[j] = dist_up(J->b->enc + j, J->y[j], (slong)J->b->prec);
}

static void enc_post(cic_ball *b, const mpfr_t *y)
{
    enc_job J = {b, y};
    ball_parallel(b->n_enc, enc_range, &J);
    drop_enc(b);
}

/* ---- first-order bounds ---- */

static void add_pre(cic_ball *b, const cic_op *o, const mpfr_t *x, const mpfr_t *z)
{
    const double *ra = b->rad[o->in[0]], *rb = b->rad[o->in[1]];
    size_t n = count(b, o->out), j;
    for (j = 0; j < n; j++) /* y = RN(a + b) */
        b->next[j] = up(rad_at(ra, j) + rad_at(rb, j) + b->u * (absup(x[j]) + absup(z[j])));
}

/* GATE (y = RN(g x)) and MODULATE (t = RN(1 + scale), y = RN(RN(x t) +
 * shift)), g, scale, shift from the sample's row of in[1]. */
static void mod_pre(cic_ball *b, const cic_op *o, const mpfr_t *x, const mpfr_t *mod)
{
    const double *rx = b->rad[o->in[0]], *rm = b->rad[o->in[1]];
    int d = b->m->t[o->in[0]].cols, mc = b->m->t[o->in[1]].cols;
    int R = cic_model_run_rows(b->m, o->in[0], b->ns), N = b->m->cfg.tokens, i, j;
    double u = b->u;
    for (i = 0; i < R; i++) {
        size_t s0 = (size_t)(i / N) * mc;
        for (j = 0; j < d; j++) {
            size_t k = (size_t)i * d + j, c0 = s0 + o->in_col[0] + j;
            double ax = absup(x[k]), r = rad_at(rx, k), a0 = absup(mod[c0]), r0 = rad_at(rm, c0);
            if (o->kind == CIC_OP_GATE) {
                b->next[k] = up(a0 * r + r0 * (ax + r) + u * a0 * ax);
            } else {
                size_t c1 = s0 + o->in_col[1] + j;
                double a1 = absup(mod[c1]), r1 = rad_at(rm, c1);
                double at = up((1.0 + a1) * (1.0 + u)), et = up(r1 + u * (1.0 + a1));
                b->next[k] = up(up(ax * et + r * (at + et) + r0) +
                                up(2.1 * u * ax * at + 1.01 * u * a0));
            }
        }
    }
}

void cic_ball_center_rows(double *rad, const mpfr_t *x, size_t rows, size_t cols,
                          mpfr_prec_t prec)
{
    double u = ldexp(1.0, -(int)prec);
    size_t i, j;
    for (i = 0; i < rows; i++) {
        double *r = rad + i * cols, A = 0, Rm = 0;
        const mpfr_t *xr = x + i * cols;
        for (j = 0; j < cols; j++) {
            A += absup(xr[j]);
            Rm += r[j];
        }
        A = up(bound_sum(A, cols) / (double)cols);
        Rm = up(bound_sum(Rm, cols) / (double)cols);
        /* |mean^ - mean| <= 2.01 u A; |y^ - (x - mean^)| <= u (|x| + A) */
        for (j = 0; j < cols; j++)
            r[j] = up(r[j] + Rm + 2.01 * u * A + 1.01 * u * (absup(xr[j]) + A));
    }
}

static void center_pre(cic_ball *b, const cic_op *o, const mpfr_t *x)
{
    size_t n = count(b, o->out);
    if (b->rad[o->in[0]])
        memcpy(b->next, b->rad[o->in[0]], n * sizeof *b->next);
    cic_ball_center_rows(b->next, x, (size_t)cic_model_run_rows(b->m, o->in[0], b->ns),
                         (size_t)b->m->t[o->in[0]].cols, b->prec);
}

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

static int lin_post(cic_ball *b, const cic_op *o, const mpfr_t *y)
{
    const cic_model *m = b->m;
    const cic_tensor *wt = &m->t[o->w];
    const double *rx = b->rad[o->in[0]], *rb = o->b >= 0 ? b->rad[o->b] : NULL;
    int R = cic_model_run_rows(m, o->in[0], b->ns) *
            (o->group > 0 ? m->t[o->in[0]].cols / o->group : 1);
    int n = wt->rows, k = wt->cols, i, j, per_s = R / b->ns;
    bool bper = o->b >= 0 && m->t[o->b].role == CIC_T_ACT;
    if (wt->role != CIC_T_WEIGHT || wt->lazy)
        return fail(b, "a linear layer whose weights are made per sample or from a recipe");
    if (k > 100000)
        return fail(b, "a linear layer of over 100000 inputs");
    if (rx && lin_spread(b, wt, rx, R, n, k) < 0)
        return -1;
    for (i = 0; i < R; i++)
        for (j = 0; j < n; j++) {
            size_t q = (size_t)i * n + j;
            double rbj = rad_at(rb, (bper ? (size_t)(i / per_s) * n : 0) + j);
            b->next[q] = up(b->next[q] + b->u * absup(y[q]) + rbj);
        }
    return 0;
}

/* ---- attention ---- */

static const double *abs_of(cic_ball *b, int id, cic_ball_mid_fn mid, void *ctx)
{
    size_t n = count(b, id), i;
    const mpfr_t *x;
    if (b->absv[id])
        return b->absv[id];
    if (!(x = mid(ctx, id)) || !(b->absv[id] = malloc(n * sizeof(double))))
        return NULL;
    for (i = 0; i < n; i++)
        b->absv[id][i] = absup(x[i]);
    return b->absv[id];
}

static int attn_pre(cic_ball *b, const cic_op *o, cic_ball_mid_fn mid, void *ctx)
{
    const cic_model *m = b->m;
    ball_attn *A = &b->at;
    A->aq = abs_of(b, o->in[0], mid, ctx);
    A->ak = abs_of(b, o->in[1], mid, ctx);
    A->av = abs_of(b, o->in[2], mid, ctx);
    if (!A->aq || !A->ak || !A->av)
        return -1;
    A->rq = b->rad[o->in[0]];
    A->rk = b->rad[o->in[1]];
    A->rv = b->rad[o->in[2]];
    A->ry = b->next;
    A->N = m->cfg.tokens;
    A->d = m->t[o->out].cols;
    A->H = o->heads;
    A->dh = A->d / A->H;
    A->grp = A->H / o->kv_heads;
    A->lq = m->t[o->in[0]].cols;
    A->lk = m->t[o->in[1]].cols;
    A->lv = m->t[o->in[2]].cols;
    A->qc = o->in_col[0];
    A->kc = o->in_col[1];
    A->vc = o->in_col[2];
    A->c = up(1.0 / sqrt((double)A->dh));
    return 0;
}

size_t cic_ball_attn_scratch(const cic_model *m)
{
    return 4 * (size_t)m->cfg.tokens;
}

void cic_ball_attn_scores(const cic_ball *b, double *scratch, const mpfr_t *p, int cnt)
{
    int j;
    (void)b;
    for (j = 0; j < cnt; j++)
        scratch[j] = mpfr_get_d(p[j], MPFR_RNDN);
}

/* The radii of the scores of query row i: s = RN(RN(q . k) RN(1/sqrt dh))
 * is within 4 u c sum |q| |k| of c (q . k), and the balls of q and k add
 * c sum |q| r_k + r_q (|k| + r_k). */
static double score_radii(const ball_attn *A, double *rs, size_t qo, size_t kbase, int cnt,
                          double u)
{
    const double *aq = A->aq + qo, *rq = A->rq ? A->rq + qo : NULL;
    double R = 0;
    int j, c;
    for (j = 0; j < cnt; j++) {
        size_t ko = kbase + (size_t)j * A->lk;
        double acc = 0, g = 0;
        for (c = 0; c < A->dh; c++) {
            double ak = A->ak[ko + c], rk = rad_at(A->rk, ko + c);
            acc += aq[c] * rk + rad_at(rq, (size_t)c) * (ak + rk);
            g += aq[c] * ak;
        }
        rs[j] = up(A->c * bound_sum(acc, 3 * (size_t)A->dh + 3) +
                   4.0 * u * A->c * bound_sum(g, (size_t)A->dh + 1));
        R = rs[j] > R ? rs[j] : R;
    }
    return R; /* the largest, to see that all are finite */
}

/* Softmax: the engine's p^ = RN(e_j / RN(sum e)), e_j = RN(exp(RN(s_j -
 * m))), is within eta_j = u ((|s_j - m| + M) 1.001 + 4.01) (relatively) of
 * the exact softmax P of its scores. The exact probabilities of the score
 * balls [s_k +- r_k] are P_j e^(D_j) / sum_k P_k e^(D_k), |D_k| <= r_k,
 * within expm1(r_j + R) of P_j, where R = log1p(sum_k P_k expm1(r_k))
 * bounds both log sum_k P_k e^(r_k) and (by Jensen) sum_k P_k r_k: so
 * |p^ - p*| <= P (eta_j + expm1(r_j + R)), with P <= p^ (1 + 2 eta_j). Then
 * P V as two balls. */
void cic_ball_attn_row(const cic_ball *b, double *scratch, int s, int h, int i,
                       const mpfr_t *p, int cnt)
{
    const ball_attn *A = &b->at;
    int N = A->N, dh = A->dh, j, cc, kvh = h / A->grp;
    double *sc = scratch, *rs = scratch + N, *pu = scratch + 2 * N, *rp = scratch + 3 * N;
    double mx = -INFINITY, M = 0, E = 0, R, u = b->u;
    bool fine;
    size_t row = (size_t)s * N + i, first = (size_t)s * N;
    for (j = 0; j < cnt; j++)
        mx = sc[j] > mx ? sc[j] : mx;
    for (j = 0; j < cnt; j++)
        M = fabs(sc[j] - mx) > M ? fabs(sc[j] - mx) : M;
    fine = isfinite(score_radii(A, rs, row * A->lq + A->qc + (size_t)h * dh,
                                first * A->lk + A->kc + (size_t)kvh * dh, cnt, u)) &&
           u * (M + fabs(mx) + 8) < 0x1p-12;
    for (j = 0; j < cnt; j++) {
        /* eta_j, kept in rp until R is known */
        rp[j] = up(u * ((fabs(sc[j] - mx) + M) * 1.001 + 0x1p-40 * fabs(mx) + 4.01));
        pu[j] = absup(p[j]);
        E += pu[j] * (1.0 + 2.0 * rp[j]) * expm1(rs[j]) * (1.0 + 0x1p-40);
    }
    R = up(log1p(bound_sum(E, (size_t)cnt)) * (1.0 + 0x1p-40));
    for (j = 0; j < cnt; j++)
        rp[j] = fine && isfinite(R)
                    ? up(pu[j] * (1.0 + 2.0 * rp[j]) *
                         (rp[j] + expm1(rs[j] + R) * (1.0 + 0x1p-40)))
                    : INFINITY;
    for (cc = 0; cc < dh; cc++) {
        double acc = 0, g = 0;
        for (j = 0; j < cnt; j++) {
            size_t vo = (first + j) * A->lv + A->vc + (size_t)kvh * dh + cc;
            double av = A->av[vo], rv = rad_at(A->rv, vo);
            acc += rp[j] * av + (pu[j] + rp[j]) * rv;
            g += pu[j] * av;
        }
        A->ry[row * A->d + (size_t)h * dh + cc] =
            up(bound_sum(acc, 3 * (size_t)cnt + 3) + u * bound_sum(g, (size_t)cnt + 1));
    }
}

/* ---- RoPE ---- */

/* cos and sin of p theta^(-2i/hd), exactly, against the engine's table:
 * the table's errors ec, es per (p, i). */
static void rope_table_err(const cic_ball *b, const cic_op *o, const mpfr_t *cs, int N, int half,
                           int hd, double *ec, double *es)
{
    slong prec = (slong)b->prec + 16;
    arb_t e, th, inv, ang, sn, cn;
    int i, p;
    arb_init(e);
    arb_init(th);
    arb_init(inv);
    arb_init(ang);
    arb_init(sn);
    arb_init(cn);
    arb_set_d(th, o->theta);
    for (i = 0; i < half; i++) {
        arb_set_si(e, -2 * i);
        arb_div_ui(e, e, (ulong)hd, prec);
        arb_pow(inv, th, e, prec);
        for (p = 0; p < N; p++) {
            size_t k = (size_t)p * half + i;
            arb_mul_ui(ang, inv, (ulong)p, prec);
            arb_sin_cos(sn, cn, ang, prec);
            ec[k] = dist_up(cn, cs[2 * k], prec);
            es[k] = dist_up(sn, cs[2 * k + 1], prec);
        }
    }
    arb_clear(e);
    arb_clear(th);
    arb_clear(inv);
    arb_clear(ang);
    arb_clear(sn);
    arb_clear(cn);
}

/* y_a = RN(a c - b s), y_b = RN(b c + a s) (fused), c, s within ec, es of
 * the exact cos and sin. */
int cic_ball_rope(cic_ball *b, const cic_op *o, const mpfr_t *cs, const mpfr_t *x)
{
    const cic_model *m = b->m;
    const double *rx = b->rad[o->in[0]];
    int N = m->cfg.tokens, w = m->t[o->out].cols, hd = w / o->heads, half = hd / 2;
    int interleaved = o->rope == CIC_ROPE_INTERLEAVED, step = interleaved ? 2 : 1;
    int off = interleaved ? 1 : half, rows = N * b->ns, i, h, j;
    double *ec = malloc((size_t)N * half * sizeof *ec), *es = malloc((size_t)N * half * sizeof *es);
    double u = b->u;
    if (!ec || !es) {
        free(ec);
        free(es);
        return -1;
    }
    rope_table_err(b, o, cs, N, half, hd, ec, es);
    for (i = 0; i < rows; i++)
        for (h = 0; h < o->heads; h++)
            for (j = 0; j < half; j++) {
                size_t ia = (size_t)i * w + h * hd + step * j, ib = ia + off;
                size_t k = (size_t)(i % N) * half + j;
                double aa = absup(x[ia]), ab = absup(x[ib]), ra = rad_at(rx, ia);
                double rb = rad_at(rx, ib), c = absup(cs[2 * k]), sn = absup(cs[2 * k + 1]);
                b->next[ia] = up(up(u * (aa * c + ab * sn) + aa * ec[k] + ra * (c + ec[k])) +
                                 up(ab * es[k] + rb * (sn + es[k])));
                b->next[ib] = up(up(u * (ab * c + aa * sn) + ab * ec[k] + rb * (c + ec[k])) +
                                 up(aa * es[k] + ra * (sn + es[k])));
            }
    free(ec);
    free(es);
    return 0;
}

/* ---- the walk's hooks ---- */

int cic_ball_pre(cic_ball *b, const cic_op *o, cic_ball_mid_fn mid, void *ctx)
{
    size_t n = count(b, o->out);
    const mpfr_t *x, *z;
    if (b->failed)
        return 0;
    free(b->next);
    if (!(b->next = cic_calloc(n ? n : 1, sizeof *b->next)))
        return -1;
    switch (o->kind) {
    case CIC_OP_LINEAR:
    case CIC_OP_ROPE:
        return 0;
    case CIC_OP_ATTN:
        return attn_pre(b, o, mid, ctx);
    case CIC_OP_NORM:
        return norm_pre(b, o, mid, ctx);
    case CIC_OP_ACT:
    case CIC_OP_GLU:
        return act_pre(b, o, mid, ctx, o->kind == CIC_OP_GLU);
    case CIC_OP_ADD:
    case CIC_OP_GATE:
    case CIC_OP_MODULATE:
        x = mid(ctx, o->in[0]);
        z = mid(ctx, o->in[1]);
        if (!x || !z)
            return -1;
        if (o->kind == CIC_OP_ADD)
            add_pre(b, o, x, z);
        else
            mod_pre(b, o, x, z);
        return 0;
    case CIC_OP_CENTER:
        if (!(x = mid(ctx, o->in[0])))
            return -1;
        center_pre(b, o, x);
        return 0;
    default:
        return fail(b, "an op a transform adds (the fast Hadamard, a fold per sample)");
    }
}

int cic_ball_post(cic_ball *b, const cic_op *o, const mpfr_t *y)
{
    int k;
    if (b->failed)
        return 0;
    if (o->kind == CIC_OP_LINEAR && lin_post(b, o, y) < 0)
        return -1;
    if (b->failed)
        return 0;
    if (b->enc)
        enc_post(b, y);
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
