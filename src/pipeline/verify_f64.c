/* SPDX-License-Identifier: MIT */
/* verify_f64.c: one layer of a checkpoint in double with a proven error
 * bound, for cicheck verify's cheapest deciding engine (verify_int.h).
 *
 * Every value is a ball (mid, rad): the exact real result of the op's
 * formula on exact inputs inside the input balls lies within rad of mid.
 * mid is what a plain f64 run computes (round to nearest); rad adds the
 * input radii carried through the op and the op's own rounding error from
 * standard forward error analysis (u = 2^-53, gamma_n = n u / (1 - n u)):
 *   - a product or sum of two: |fl(a op b) - a op b| <= u |fl(a op b)|;
 *   - a dot product or a dgemm of inner size k in any order, FMA or not:
 *     |fl(x . w) - x . w| <= gamma_k |x| . |w|;
 *   - exp (softmax, SiLU), sqrt and the RoPE table through MPFR with
 *     directed rounding (an exact enclosure, no error model needed).
 * A radius is a sum of nonnegative terms computed in round to nearest;
 * up() inflates it by 2^-49 relative (it covers eight roundings of
 * nonnegative terms) plus 2^-1000 absolute (underflow of the products),
 * so it never falls below the exact sum. For the workload: d up to 8192
 * and 32 to 512 rows, the linears are two dgemm calls each (mid and the
 * radius through |W|), the rest is O(rows d) and attention O(N^2 d). */
#include "verify_int.h"

#include "../base/mpvec.h"
#include "../engine/mp_act.h"

#include <cblas.h>
#include <math.h>
#include <mpfr.h>
#include <stdio.h>
#include <string.h>

#define U 0x1p-53

static double gam(double n)
{
    return n * U / (1 - n * U);
}

/* An upper bound of the exact value of x >= 0, x computed in round to
 * nearest from nonnegative terms by at most eight operations. */
static double up(double x)
{
    return x * (1 + 0x1p-49) + 0x1p-1000;
}

/* The ball (m, r) of the interval [lo, hi]. */
static void from_interval(double *m, double *r, double lo, double hi)
{
    *m = 0.5 * lo + 0.5 * hi;
    *r = up(fmax(hi - *m, *m - lo));
}

static void ball_add(double *m, double *r, double am, double ar, double bm, double br)
{
    *m = am + bm;
    *r = up(ar + br + U * fabs(*m));
}

static void ball_mul(double *m, double *r, double am, double ar, double bm, double br)
{
    *m = am * bm;
    *r = up(fabs(am) * br + ar * fabs(bm) + ar * br + U * fabs(*m));
}

/* The ball of the dot product of n terms of x (stride sx) and y (stride sy). */
static void ball_dot(double *m, double *r, const double *xm, const double *xr, size_t sx,
                     const double *ym, const double *yr, size_t sy, int n)
{
    double s = 0, a = 0, e = 0, g = gam(n + 4);
    int j;
    for (j = 0; j < n; j++) {
        double p = xm[j * sx], q = ym[j * sy];
        s += p * q;
        a += fabs(p) * fabs(q);
        e += fabs(p) * yr[j * sy] + xr[j * sx] * fabs(q) + xr[j * sx] * yr[j * sy];
    }
    *m = s;
    /* the computed sums of nonnegative terms are within gamma_n of theirs */
    *r = up((e + gam(n) * a) * (1 + 2 * g));
}

/* ---- ops ---- */

typedef struct {
    cic_vf64 *v;
    const cic_op *o;
    int R;
} opctx;

static double *tdup(const cic_tensor *t)
{
    return cic_tensor_f64_create(t, false); /* the unrounded values, as the MPFR engine's */
}

/* Y = X W^T (+ b): mid through dgemm, radius (gamma_k |Xm| + Xr) |W|^T
 * through a second dgemm with W made absolute in place. W is n x k. */
static int linear_balls(double *ym, double *yr, const double *xm, const double *xr,
                        double *w, const double *wabs, int R, int n, int k)
{
    double *a = cic_calloc((size_t)R * k, sizeof *a), g = gam(k);
    size_t i;
    if (!a)
        return -1;
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, R, n, k, 1.0, xm, k, w, k, 0.0, ym, n);
    if (!wabs) {
        for (i = 0; i < (size_t)n * k; i++)
            w[i] = fabs(w[i]);
        wabs = w;
    }
    for (i = 0; i < (size_t)R * k; i++)
        a[i] = up(g * fabs(xm[i]) + xr[i]);
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, R, n, k, 1.0, a, k, wabs, k, 0.0, yr,
                n);
    for (i = 0; i < (size_t)R * n; i++) /* the computed A |W|^T within gamma_k of its */
        yr[i] = up(yr[i] * (1 + 2 * g) + U * fabs(ym[i]));
    free(a);
    return 0;
}

static int k_linear(opctx *c)
{
    const cic_model *m = c->v->m;
    const cic_op *o = c->o;
    int k = m->t[o->in[0]].cols, n = m->t[o->out].cols, i, j;
    double *w, *b = NULL, *ym = c->v->mid[o->out], *yr = c->v->rad[o->out];
    if (o->group) {
        snprintf(c->v->why, sizeof c->v->why, "a block-diagonal linear (group %d)", o->group);
        return 1;
    }
    if (!(w = tdup(&m->t[o->w])) || (o->b >= 0 && !(b = tdup(&m->t[o->b])))) {
        free(w);
        return -1;
    }
    if (linear_balls(ym, yr, c->v->mid[o->in[0]], c->v->rad[o->in[0]], w, NULL, c->R, n, k) <
        0) {
        free(w);
        free(b);
        return -1;
    }
    for (i = 0; b && i < c->R; i++)
        for (j = 0; j < n; j++) {
            size_t p = (size_t)i * n + j;
            ball_add(&ym[p], &yr[p], ym[p], yr[p], b[j], 0);
        }
    free(w);
    free(b);
    return 0;
}

/* Row means' balls of x (R x d) into (mm, mr). */
static void row_mean(double *mm, double *mr, const double *xm, const double *xr, int d)
{
    double s = 0, a = 0, e = 0;
    int j;
    for (j = 0; j < d; j++) {
        s += xm[j];
        a += fabs(xm[j]);
        e += xr[j];
    }
    *mm = s / d;
    *mr = up((e + gam(d) * a) * (1 + 2 * gam(d + 4)) / d + U * fabs(*mm));
}

/* LayerNorm / RMSNorm: y = (x - mean) / sqrt(mean((x - mean)^2) + eps) g + b,
 * the mean only when centring. The sum of squares is bounded below by the
 * squares of each ball's smallest magnitude, above by its largest. */
static int k_norm(opctx *c)
{
    const cic_model *m = c->v->m;
    const cic_op *o = c->o;
    int d = m->t[o->in[0]].cols, i, j;
    double *g = o->g >= 0 ? tdup(&m->t[o->g]) : NULL, *b = o->b >= 0 ? tdup(&m->t[o->b]) : NULL;
    double gd = gam(d + 4);
    if ((o->g >= 0 && !g) || (o->b >= 0 && !b)) {
        free(g);
        free(b);
        return -1;
    }
    for (i = 0; i < c->R; i++) {
        const double *xm = c->v->mid[o->in[0]] + (size_t)i * d, *xr = c->v->rad[o->in[0]] + (size_t)i * d;
        double *ym = c->v->mid[o->out] + (size_t)i * d, *yr = c->v->rad[o->out] + (size_t)i * d;
        double mm = 0, mr = 0, lo = 0, hi = 0, s_lo, s_hi, rm, rr;
        if (o->center)
            row_mean(&mm, &mr, xm, xr, d);
        for (j = 0; j < d; j++) {
            ball_add(&ym[j], &yr[j], xm[j], xr[j], -mm, mr);
            lo += fmax(0, fabs(ym[j]) - yr[j]) * fmax(0, fabs(ym[j]) - yr[j]);
            hi += (fabs(ym[j]) + yr[j]) * (fabs(ym[j]) + yr[j]);
        }
        /* every step of lo rounds to nearest: (1 - 2 gamma) is below its
         * accumulated error; then / d, + eps, sqrt and the division */
        lo = (lo * (1 - 2 * gd) / d + (double)o->eps) * (1 - 8 * U);
        hi = up(hi * (1 + 2 * gd) / d + (double)o->eps);
        s_lo = 1 / sqrt(hi) * (1 - 8 * U);
        s_hi = lo > 0 ? 1 / sqrt(lo) * (1 + 8 * U) : INFINITY;
        from_interval(&rm, &rr, s_lo, s_hi);
        for (j = 0; j < d; j++) {
            ball_mul(&ym[j], &yr[j], ym[j], yr[j], rm, rr);
            if (g)
                ball_mul(&ym[j], &yr[j], ym[j], yr[j], g[j], 0);
            if (b)
                ball_add(&ym[j], &yr[j], ym[j], yr[j], b[j], 0);
        }
    }
    free(g);
    free(b);
    return 0;
}

/* silu(x) = x / (1 + exp(-x)) rounded down (dir MPFR_RNDD) or up. */
static double silu_dir(double x, mpfr_rnd_t dir, mpfr_t t, mpfr_t e)
{
    bool neg = x < 0;
    /* x >= 0: the quotient grows as the denominator falls; x < 0 the reverse */
    mpfr_rnd_t den = (dir == MPFR_RNDD) != neg ? MPFR_RNDU : MPFR_RNDD;
    mpfr_set_d(e, -x, MPFR_RNDN); /* exact */
    mpfr_exp(e, e, den);
    mpfr_add_ui(e, e, 1, den);
    mpfr_set_d(t, x, MPFR_RNDN);
    mpfr_div(t, t, e, dir);
    return mpfr_get_d(t, dir);
}

/* The enclosure of silu over [lo, hi]: increasing above its minimum at
 * x0 = -1.2784645427610738..., decreasing below; the minimum is x0 + 1 =
 * -0.2784645427610738... (silu'(x0) = 0 gives silu(x0) = x0 + 1), so
 * -0.278464542762 is below it. */
static void silu_ball(double *m, double *r, double xm, double xr, mpfr_t t, mpfr_t e)
{
    double lo = xm - xr * (1 + 4 * U), hi = xm + xr * (1 + 4 * U), a, b;
    if (!isfinite(lo) || !isfinite(hi)) {
        *m = NAN;
        *r = INFINITY;
        return;
    }
    lo = nextafter(lo, -INFINITY); /* xm - xr rounded: one ulp outward covers it */
    hi = nextafter(hi, INFINITY);
    if (lo >= -1.27846454276) {
        a = silu_dir(lo, MPFR_RNDD, t, e);
        b = silu_dir(hi, MPFR_RNDU, t, e);
    } else if (hi <= -1.278464542762) {
        a = silu_dir(hi, MPFR_RNDD, t, e);
        b = silu_dir(lo, MPFR_RNDU, t, e);
    } else {
        a = -0.278464542762;
        b = fmax(silu_dir(lo, MPFR_RNDU, t, e), silu_dir(hi, MPFR_RNDU, t, e));
    }
    from_interval(m, r, a, b);
}

/* ACT and GLU for SiLU and ReLU (1-Lipschitz, exact in double). */
static int k_act(opctx *c, bool glu)
{
    const cic_model *m = c->v->m;
    const cic_op *o = c->o;
    size_t n = (size_t)c->R * m->t[o->out].cols, j;
    const double *xm = c->v->mid[o->in[0]], *xr = c->v->rad[o->in[0]];
    double *ym = c->v->mid[o->out], *yr = c->v->rad[o->out];
    mpfr_t t, e;
    if (o->act != CIC_ACT_SILU && o->act != CIC_ACT_RELU) {
        snprintf(c->v->why, sizeof c->v->why, "activation %s", CIC_ACT_NAME[o->act]);
        return 1;
    }
    mpfr_inits2(53, t, e, (mpfr_ptr)0);
    for (j = 0; j < n; j++) {
        if (o->act == CIC_ACT_SILU) {
            silu_ball(&ym[j], &yr[j], xm[j], xr[j], t, e);
        } else {
            ym[j] = xm[j] > 0 ? xm[j] : 0;
            yr[j] = xr[j];
        }
        if (glu)
            ball_mul(&ym[j], &yr[j], ym[j], yr[j], c->v->mid[o->in[1]][j],
                     c->v->rad[o->in[1]][j]);
    }
    mpfr_clears(t, e, (mpfr_ptr)0);
    return 0;
}

static int k_add(opctx *c)
{
    const cic_op *o = c->o;
    size_t n = (size_t)c->R * c->v->m->t[o->out].cols, j;
    for (j = 0; j < n; j++)
        ball_add(&c->v->mid[o->out][j], &c->v->rad[o->out][j], c->v->mid[o->in[0]][j],
                 c->v->rad[o->in[0]][j], c->v->mid[o->in[1]][j], c->v->rad[o->in[1]][j]);
    return 0;
}

/* RoPE: (a, b) -> (a c - b s, b c + a s), the cos and sin table at 128
 * bits (each within (N + 4) 2^-120 of the exact value: a few correctly
 * rounded steps, the angle at most N), as balls of radius u |v| + 2^-90.
 * Partial rope (o->rot): the first rd dims of each head, the rest copied. */
static int k_rope(opctx *c)
{
    const cic_model *m = c->v->m;
    const cic_op *o = c->o;
    int N = m->cfg.tokens, w = m->t[o->out].cols, hd = w / o->heads;
    int rd = o->rot ? o->rot : hd, half = rd / 2;
    int i, h, j, step = o->rope == CIC_ROPE_INTERLEAVED ? 2 : 1;
    int off = o->rope == CIC_ROPE_INTERLEAVED ? 1 : half;
    size_t n = (size_t)N * rd, q;
    mpfr_t *cs = cic_mpvec_create(n, 128);
    double *tm = cic_calloc(n, sizeof *tm), *tr = cic_calloc(n, sizeof *tr);
    const double *xm = c->v->mid[o->in[0]], *xr = c->v->rad[o->in[0]];
    double *ym = c->v->mid[o->out], *yr = c->v->rad[o->out];
    int rc = -1;
    if (!cs || !tm || !tr)
        goto done;
    cic_mp_rope_table(cs, N, rd, o->theta, 128);
    for (q = 0; q < n; q++) {
        tm[q] = mpfr_get_d(cs[q], MPFR_RNDN);
        tr[q] = up(U * fabs(tm[q]) + 0x1p-90);
    }
    for (i = 0; i < c->R; i++) {
        const double *t = tm + (size_t)(i % N) * rd, *e = tr + (size_t)(i % N) * rd;
        for (h = 0; h < o->heads; h++) {
            for (j = rd; j < hd; j++) {
                size_t ia = (size_t)i * w + h * hd + j;
                ym[ia] = xm[ia];
                yr[ia] = xr[ia];
            }
            for (j = 0; j < half; j++) {
                size_t ia = (size_t)i * w + h * hd + step * j, ib = ia + off;
                double p1, r1, p2, r2;
                ball_mul(&p1, &r1, xm[ia], xr[ia], t[2 * j], e[2 * j]);
                ball_mul(&p2, &r2, xm[ib], xr[ib], t[2 * j + 1], e[2 * j + 1]);
                ball_add(&ym[ia], &yr[ia], p1, r1, -p2, r2);
                ball_mul(&p1, &r1, xm[ib], xr[ib], t[2 * j], e[2 * j]);
                ball_mul(&p2, &r2, xm[ia], xr[ia], t[2 * j + 1], e[2 * j + 1]);
                ball_add(&ym[ib], &yr[ib], p1, r1, p2, r2);
            }
        }
    }
    rc = 0;
done:
    cic_mpvec_destroy(cs, n);
    free(tm);
    free(tr);
    return rc;
}

/* Softmax of the score balls (sm, sr)[0 .. cnt) into probability balls:
 * p_j = exp(s_j) / sum_k exp(s_k) is increasing in s_j and decreasing in
 * the others, so with e_lo, e_hi the exps of the balls' ends (shifted by
 * one constant, rounded outward in MPFR), p_j lies in [e_lo_j / (e_lo_j +
 * sum_{k != j} e_hi_k), e_hi_j / (e_hi_j + sum_{k != j} e_lo_k)]. */
static void softmax_balls(double *pm, double *pr, const double *sm, const double *sr, int cnt,
                          mpfr_t *el, mpfr_t *eh, mpfr_t t, mpfr_t sl, mpfr_t sh)
{
    double mx = sm[0];
    int j;
    for (j = 1; j < cnt; j++)
        mx = fmax(mx, sm[j]);
    mpfr_set_zero(sl, 1);
    mpfr_set_zero(sh, 1);
    for (j = 0; j < cnt; j++) {
        mpfr_set_d(t, sm[j], MPFR_RNDN);
        mpfr_sub_d(el[j], t, sr[j], MPFR_RNDD);
        mpfr_sub_d(el[j], el[j], mx, MPFR_RNDD);
        mpfr_exp(el[j], el[j], MPFR_RNDD);
        mpfr_add_d(eh[j], t, sr[j], MPFR_RNDU);
        mpfr_sub_d(eh[j], eh[j], mx, MPFR_RNDU);
        mpfr_exp(eh[j], eh[j], MPFR_RNDU);
        mpfr_add(sl, sl, el[j], MPFR_RNDD);
        mpfr_add(sh, sh, eh[j], MPFR_RNDU);
    }
    for (j = 0; j < cnt; j++) {
        double lo, hi;
        mpfr_sub(t, sh, eh[j], MPFR_RNDU); /* >= the others' e_hi */
        mpfr_add(t, t, el[j], MPFR_RNDU);
        mpfr_div(t, el[j], t, MPFR_RNDD);
        lo = mpfr_get_d(t, MPFR_RNDD);
        mpfr_sub(t, sl, el[j], MPFR_RNDD); /* <= the others' e_lo */
        if (mpfr_sgn(t) < 0)
            mpfr_set_zero(t, 1);
        mpfr_add(t, t, eh[j], MPFR_RNDD);
        mpfr_div(t, eh[j], t, MPFR_RNDU);
        hi = fmin(1.0, mpfr_get_d(t, MPFR_RNDU));
        from_interval(&pm[j], &pr[j], fmax(0.0, lo), hi);
    }
}

/* Attention per (sample, head, query): the scores' balls (dot products
 * times the ball of 1 / sqrt(dh)), the softmax's, then P V. */
static int k_attn(opctx *c)
{
    const cic_model *m = c->v->m;
    const cic_op *o = c->o;
    int N = m->cfg.tokens, S = c->R / N, d = m->t[o->out].cols, H = o->heads, dh = d / H;
    int grp = H / o->kv_heads, lq = m->t[o->in[0]].cols, lk = m->t[o->in[1]].cols;
    int lv = m->t[o->in[2]].cols, s, h, i, j, cc;
    double sc = 1 / sqrt((double)dh), scr = up(4 * U * sc);
    double *sm = cic_calloc(4 * (size_t)N, sizeof *sm), *sr = sm + N, *pm = sr + N, *pr = pm + N;
    mpfr_t *el = cic_mpvec_create((size_t)N, 53), *eh = cic_mpvec_create((size_t)N, 53);
    mpfr_t t, sl, sh;
    int rc = -1;
    if (!sm || !el || !eh)
        goto done;
    mpfr_inits2(53, t, sl, sh, (mpfr_ptr)0);
    for (s = 0; s < S; s++)
        for (h = 0; h < H; h++)
            for (i = 0; i < N; i++) {
                size_t qo = ((size_t)s * N + i) * lq + o->in_col[0] + (size_t)h * dh;
                size_t ko = (size_t)s * N * lk + o->in_col[1] + (size_t)(h / grp) * dh;
                size_t vo = (size_t)s * N * lv + o->in_col[2] + (size_t)(h / grp) * dh;
                size_t yo = ((size_t)s * N + i) * d + (size_t)h * dh;
                int cnt = o->causal ? i + 1 : N;
                for (j = 0; j < cnt; j++) {
                    double a, ar;
                    ball_dot(&a, &ar, c->v->mid[o->in[0]] + qo, c->v->rad[o->in[0]] + qo, 1,
                             c->v->mid[o->in[1]] + ko + (size_t)j * lk,
                             c->v->rad[o->in[1]] + ko + (size_t)j * lk, 1, dh);
                    ball_mul(&sm[j], &sr[j], a, ar, sc, scr);
                }
                softmax_balls(pm, pr, sm, sr, cnt, el, eh, t, sl, sh);
                for (cc = 0; cc < dh; cc++)
                    ball_dot(&c->v->mid[o->out][yo + cc], &c->v->rad[o->out][yo + cc], pm, pr, 1,
                             c->v->mid[o->in[2]] + vo + cc, c->v->rad[o->in[2]] + vo + cc,
                             (size_t)lv, cnt);
            }
    mpfr_clears(t, sl, sh, (mpfr_ptr)0);
    rc = 0;
done:
    free(sm);
    cic_mpvec_destroy(el, (size_t)N);
    cic_mpvec_destroy(eh, (size_t)N);
    return rc;
}

static int run_op(opctx *c)
{
    switch (c->o->kind) {
    case CIC_OP_LINEAR:
        return k_linear(c);
    case CIC_OP_NORM:
        return k_norm(c);
    case CIC_OP_ATTN:
        return k_attn(c);
    case CIC_OP_ACT:
        return k_act(c, false);
    case CIC_OP_GLU:
        return k_act(c, true);
    case CIC_OP_ADD:
        return k_add(c);
    case CIC_OP_ROPE:
        return k_rope(c);
    default:
        snprintf(c->v->why, sizeof c->v->why, "op %s", CIC_OP_NAME[c->o->kind]);
        return 1;
    }
}

int cic_vf64_run(cic_vf64 *v, const cic_model *m, const double *x)
{
    size_t n;
    int i, rc;
    memset(v, 0, sizeof *v);
    v->m = m;
    v->mid = cic_calloc((size_t)m->n_t, sizeof *v->mid);
    v->rad = cic_calloc((size_t)m->n_t, sizeof *v->rad);
    if (!v->mid || !v->rad)
        return -1;
    for (i = 0; i < m->n_t; i++) {
        if (m->t[i].role == CIC_T_WEIGHT)
            continue;
        if (m->t[i].rows_kind != CIC_ROWS_TOKENS) {
            snprintf(v->why, sizeof v->why, "tensor '%s' has a row per sample", m->t[i].name);
            return 1;
        }
        n = (size_t)m->rows * m->t[i].cols;
        v->mid[i] = cic_calloc(n, sizeof **v->mid);
        v->rad[i] = cic_calloc(n, sizeof **v->rad);
        if (!v->mid[i] || !v->rad[i])
            return -1;
    }
    memcpy(v->mid[m->input], x, (size_t)m->rows * m->t[m->input].cols * sizeof *x);
    for (i = 0; i < m->n_ops; i++) {
        opctx c = {v, &m->ops[i], m->rows};
        if ((rc = run_op(&c)) != 0)
            return rc;
    }
    return 0;
}

void cic_vf64_free(cic_vf64 *v)
{
    int i;
    for (i = 0; v->m && i < v->m->n_t; i++) {
        if (v->mid)
            free(v->mid[i]);
        if (v->rad)
            free(v->rad[i]);
    }
    free(v->mid);
    free(v->rad);
    v->mid = v->rad = NULL;
}

/* ---- the residual measure's enclosure ---- */

/* Into lo, hi (64-bit MPFR values): sum of the squares of the balls' least
 * and largest magnitudes, rounded down and up. */
static void sq_sums(mpfr_t lo, mpfr_t hi, const double *m, const double *r, size_t n, mpfr_t t)
{
    size_t j;
    mpfr_set_zero(lo, 1);
    mpfr_set_zero(hi, 1);
    for (j = 0; j < n; j++) {
        double a = fabs(m[j]);
        mpfr_set_d(t, a, MPFR_RNDN);
        mpfr_sub_d(t, t, r[j], MPFR_RNDD);
        if (mpfr_sgn(t) > 0) {
            mpfr_sqr(t, t, MPFR_RNDD);
            mpfr_add(lo, lo, t, MPFR_RNDD);
        }
        mpfr_set_d(t, a, MPFR_RNDN);
        mpfr_add_d(t, t, r[j], MPFR_RNDU);
        mpfr_sqr(t, t, MPFR_RNDU);
        mpfr_add(hi, hi, t, MPFR_RNDU);
    }
}

/* ya's rows without their mean (balls) into (cm, cr). */
static void center_balls(double *cm, double *cr, const double *am, const double *ar, int rows,
                         int d)
{
    int i, j;
    for (i = 0; i < rows; i++) {
        size_t o = (size_t)i * d;
        double mm, mr;
        row_mean(&mm, &mr, am + o, ar + o, d);
        for (j = 0; j < d; j++)
            ball_add(&cm[o + j], &cr[o + j], am[o + j], ar[o + j], -mm, mr);
    }
}

int cic_vf64_ce(double *mid, double *lo, double *hi, const double *am, const double *ar,
                const double *bm, const double *br, const double *q, const double *qabs,
                int rows, int d, bool center)
{
    size_t n = (size_t)rows * d, j;
    double *um = cic_calloc(n, sizeof *um), *ur = cic_calloc(n, sizeof *ur);
    double *cm = center ? cic_calloc(n, sizeof *cm) : NULL, *cr = center ? cic_calloc(n, sizeof *cr) : NULL;
    double *qc = q && !qabs ? cic_calloc((size_t)d * d, sizeof *qc) : NULL, num = 0, den = 0;
    mpfr_t nl, nh, dl, dh, t;
    int rc = -1;
    if (!um || !ur || (center && (!cm || !cr)) || (q && !qabs && !qc))
        goto done;
    if (center) {
        center_balls(cm, cr, am, ar, rows, d);
        am = cm;
        ar = cr;
    }
    if (q) { /* (yb Q^T): a linear with W = Q */
        if (qc)
            memcpy(qc, q, (size_t)d * d * sizeof *qc);
        if (linear_balls(um, ur, bm, br, qc ? qc : (double *)q, qabs, rows, d, d) < 0)
            goto done;
    } else {
        memcpy(um, bm, n * sizeof *um);
        memcpy(ur, br, n * sizeof *ur);
    }
    for (j = 0; j < n; j++) {
        ball_add(&um[j], &ur[j], um[j], ur[j], -am[j], ar[j]);
        num += um[j] * um[j];
        den += am[j] * am[j];
        if (!isfinite(um[j]) || !isfinite(ur[j]) || !isfinite(ar[j]) || !isfinite(am[j])) {
            rc = 1;
            goto done;
        }
    }
    *mid = den > 0 ? sqrt(num / den) : INFINITY;
    mpfr_inits2(64, nl, nh, dl, dh, t, (mpfr_ptr)0);
    sq_sums(nl, nh, um, ur, n, t);
    sq_sums(dl, dh, am, ar, n, t);
    rc = mpfr_zero_p(dl) ? 1 : 0;
    if (rc == 0) {
        mpfr_div(t, nl, dh, MPFR_RNDD);
        mpfr_sqrt(t, t, MPFR_RNDD);
        *lo = mpfr_get_d(t, MPFR_RNDD);
        mpfr_div(t, nh, dl, MPFR_RNDU);
        mpfr_sqrt(t, t, MPFR_RNDU);
        *hi = mpfr_get_d(t, MPFR_RNDU);
    }
    mpfr_clears(nl, nh, dl, dh, t, (mpfr_ptr)0);
done:
    free(um);
    free(ur);
    free(cm);
    free(cr);
    free(qc);
    return rc;
}
