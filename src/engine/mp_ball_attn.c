/* SPDX-License-Identifier: MIT */
/* mp_ball_attn.c: the ball run's attention: the scores' radii,
 * the softmax of balls and P V, per query row inside the engine's head
 * loop (engine_mpfr_attn.c). */
#include "mp_ball_int.h"

#include "../base/specnorm.h"

#include <stdlib.h>

/* ---- attention ---- */

/* An order-free maximum of nonnegative doubles kept as their bits (a NaN
 * counts as infinite). */
static void amax(_Atomic uint64_t *p, double v)
{
    uint64_t nv, old = atomic_load(p);
    double cur;
    if (!(v >= 0))
        v = INFINITY;
    memcpy(&nv, &v, sizeof nv);
    do {
        memcpy(&cur, &old, sizeof cur);
        if (cur >= v)
            return;
    } while (!atomic_compare_exchange_weak(p, &old, nv));
}

static double aget(const _Atomic uint64_t *p)
{
    uint64_t bits = atomic_load(p);
    double v;
    memcpy(&v, &bits, sizeof v);
    return v;
}



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

/* The midpoints of tensor id rounded to double (RN), a new array. */
static double *signed_of(cic_ball *b, int id, cic_ball_mid_fn mid, void *ctx)
{
    size_t n = count(b, id), i;
    const mpfr_t *x = mid(ctx, id);
    double *v = x ? malloc((n ? n : 1) * sizeof *v) : NULL;
    for (i = 0; v && i < n; i++)
        v[i] = mpfr_get_d(x[i], MPFR_RNDN);
    return v;
}

static void attn_cross_free(ball_attn *A)
{
    free(A->sm);
    A->sm = NULL;
    free(A->qx);
    free(A->qm);
    free(A->am2);
    free(A->km2);
    free(A->er2);
    free(A->snx);
    free(A->snk);
    free(A->m0);
    free(A->mk0);
    free(A->nmk0);
    A->qx = A->qm = A->am2 = A->km2 = NULL;
    A->er2 = A->snx = A->snk = A->m0 = A->mk0 = A->nmk0 = NULL;
    free(A->qw);
    free(A->pm);
    free(A->am);
    free(A->km);
    free(A->er);
    if (A->sv != A->sk)
        free(A->sv);
    free(A->sk);
    A->qw = A->pm = A->am = A->km = NULL;
    A->er = A->sk = A->sv = NULL;
}

/* The bound across heads' arrays, zeroed (rows of N keys; none past 2^26
 * entries: then the per-head candidate alone). */
static void attn_cross_alloc(cic_ball *b, ball_attn *A, size_t rows)
{
    size_t kn = rows * (size_t)A->N;
    (void)b;
    attn_cross_free(A);
    if (kn == 0 || kn > ((size_t)1 << 26))
        return;
    A->qw = cic_calloc(kn, sizeof *A->qw);
    A->pm = cic_calloc(kn, sizeof *A->pm);
    A->am = cic_calloc(rows, sizeof *A->am);
    A->km = cic_calloc(rows, sizeof *A->km);
    A->er = cic_calloc(rows * (size_t)A->H, sizeof *A->er);
    A->sm = cic_calloc(rows, sizeof *A->sm);
    A->qx = cic_calloc(kn, sizeof *A->qx);
    A->qm = cic_calloc(kn, sizeof *A->qm);
    A->am2 = cic_calloc(rows, sizeof *A->am2);
    A->km2 = cic_calloc(rows, sizeof *A->km2);
    A->er2 = cic_calloc(rows * (size_t)A->H, sizeof *A->er2);
    if (!A->qw || !A->pm || !A->am || !A->km || !A->er || !A->qx || !A->qm || !A->am2 ||
        !A->km2 || !A->er2 || !A->sm)
        attn_cross_free(A);
}

/* The spectral candidate's per (sample, kv head) part: the plain means m0
 * of the values and mk0 of the keys (double), and upper bounds of the
 * spectral norms of X0 = [v^_j - m0] and K0 = [k^_j - mk0] over the
 * sample's N rows j (a causal row's first cnt rows are a submatrix: no
 * larger norm). The doubles D = fl(s_j - m) (s_j = RN(x^_j)) are within
 * 2^-53 |x^_j| + 2^-52 |D| of the exact centred midpoints, so ||exact||_2
 * <= ||D||_2 + 2^-53 ||x^||_F + 2^-52 ||D||_F (Minkowski, the Frobenius
 * norm above the spectral one); ||D||_2 from cic_specnorm_d (base/
 * specnorm.h). Leaves the arrays NULL (no candidate) out of memory. */
static void spec_one(const double *sd, const double *ab, size_t off0, size_t ld, int N, int dh,
                     double *mean, double *sn, double *nm, double *D)
{
    double fd = 0, fa = 0, b = INFINITY;
    int j, c;
    for (c = 0; c < dh; c++)
        mean[c] = 0;
    for (j = 0; j < N; j++)
        for (c = 0; c < dh; c++)
            mean[c] += sd[off0 + (size_t)j * ld + c] / N;
    for (j = 0; j < N; j++)
        for (c = 0; c < dh; c++) {
            size_t k = off0 + (size_t)j * ld + c;
            double t = sd[k] - mean[c];
            D[(size_t)j * dh + c] = t;
            fd += t * t;
            fa += ab[k] * ab[k];
        }
    fd = up(sqrt(bound_sum(fd, (size_t)N * dh)));
    fa = up(sqrt(bound_sum(fa, (size_t)N * dh)));
    if (cic_specnorm_d(&b, D, (size_t)N, (size_t)dh, NULL) != 0 || !(b >= 0))
        b = INFINITY;
    *sn = up(b + up(0x1p-53 * fa + 0x1p-52 * fd));
    if (nm)
        *nm = norm2_up(mean, (size_t)dh, 1);
}

static void spec_prep(cic_ball *b, ball_attn *A)
{
    int kv = A->H / A->grp, s, h, N = A->N, dh = A->dh;
    size_t nsk = (size_t)b->ns * kv;
    double *D = malloc((size_t)N * dh * sizeof *D);
    A->snx = malloc(nsk * sizeof *A->snx);
    A->snk = malloc(nsk * sizeof *A->snk);
    A->nmk0 = malloc(nsk * sizeof *A->nmk0);
    A->m0 = malloc(nsk * dh * sizeof *A->m0);
    A->mk0 = malloc(nsk * dh * sizeof *A->mk0);
    if (!D || !A->snx || !A->snk || !A->nmk0 || !A->m0 || !A->mk0) {
        free(A->snx);
        A->snx = NULL; /* no spectral candidate */
        free(D);
        return;
    }
    for (s = 0; s < b->ns; s++)
        for (h = 0; h < kv; h++) {
            size_t q = (size_t)s * kv + h, first = (size_t)s * N;
            spec_one(A->sv, A->av, first * A->lv + A->vc + (size_t)h * dh, A->lv, N, dh,
                     A->m0 + q * dh, A->snx + q, NULL, D);
            spec_one(A->sk, A->ak, first * A->lk + A->kc + (size_t)h * dh, A->lk, N, dh,
                     A->mk0 + q * dh, A->snk + q, A->nmk0 + q, D);
        }
    free(D);
}

/* The value term of row i over heads: sum_j P*_hj dv_j (the head's slice)
 * in quadrature over heads. Minkowski over keys: sqrt(grp) sum_j max_h
 * (p + rp)_hj e_vj; or Cauchy-Schwarz in each head ((sum_j P_hj y_hj)^2
 * <= S_h sum_j P_hj y_hj^2, S_h = sum_j (p + rp)_hj >= sum_j |P*_hj|):
 * sqrt(grp max_h S_h sum_j max_h (p + rp)_hj e_vj^2). The smaller. */
static double value_term(const ball_attn *A, size_t i)
{
    size_t N = (size_t)A->N, first = i / N * N, j;
    double s1 = 0, s2 = 0, a, b;
    for (j = 0; j < N; j++) {
        double pm = aget(A->pm + i * N + j), ev = rad_at(A->ev, first + j);
        s1 += pm * ev;
        s2 += pm * ev * ev;
    }
    a = up(up(sqrt((double)A->grp)) * bound_sum(s1, N));
    b = up(sqrt(up(up((double)A->grp * aget(A->sm + i)) * bound_sum(s2, N))));
    return b < a ? b : a;
}

/* The row's bound across heads (cross_heads): K c (a e_q + sqrt(grp) sum_j
 * max_h (||q|| w_j) e_kj) + sqrt(grp) sum_j max_h (p_j + rp_j) e_vj + the
 * 2-norm of the heads' own parts; INFINITY without the arrays. */
static double attn_cross_row(const ball_attn *A, size_t i)
{
    size_t N = (size_t)A->N, first = i / N * N, j;
    double sk = 0, sgrp = up(sqrt((double)A->grp)), sc;
    if (!A->qw)
        return INFINITY;
    for (j = 0; j < N; j++) {
        sk += aget(A->qw + i * N + j) * rad_at(A->ek, first + j);
    }
    sc = up(aget(A->km + i) * A->c *
            up(aget(A->am + i) * rad_at(A->eq, i) + sgrp * bound_sum(sk, N)));
    return up(up(sc + value_term(A, i)) + norm2_up(A->er + i * (size_t)A->H, (size_t)A->H, 1));
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
    A->eq = b->nrm[o->in[0]];
    A->ek = b->nrm[o->in[1]];
    A->ev = b->nrm[o->in[2]];
    A->eo = NULL;
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
    if (b->nb) {
        size_t n = (size_t)cic_model_run_rows(m, o->out, b->ns) * (size_t)A->H;
        free(b->aux);
        if (!(b->aux = malloc((n ? n : 1) * sizeof(double))))
            return -1;
        A->eo = b->aux;
        attn_cross_alloc(b, A, n / (size_t)A->H);
        if (A->qw) {
            A->sk = signed_of(b, o->in[1], mid, ctx);
            A->sv = o->in[2] == o->in[1] ? A->sk : signed_of(b, o->in[2], mid, ctx);
            if (!A->sk || !A->sv)
                attn_cross_free(A);
            else
                spec_prep(b, A);
        }
    }
    return 0;
}

/* The row's spectral candidate (spec_heads): K0 c (beta e_q + sqrt(grp)
 * (sqrt(sum_j qx_j^2 e_kj^2) + sum_j qm_j e_kj)) + sqrt(grp) sum_j max_h
 * (p_j + rp_j) e_vj + the 2-norm of the heads' own parts; INFINITY
 * without its arrays. */
static double attn_spec_row(const ball_attn *A, size_t i)
{
    size_t N = (size_t)A->N, first = i / N * N, j;
    double sq = 0, sl = 0, sgrp = up(sqrt((double)A->grp)), sc;
    if (!A->qx || !A->snx)
        return INFINITY;
    for (j = 0; j < N; j++) {
        double ek = rad_at(A->ek, first + j), qx = aget(A->qx + i * N + j) * ek;
        sq += qx * qx;
        sl += aget(A->qm + i * N + j) * ek;
    }
    sc = up(aget(A->km2 + i) * A->c *
            up(aget(A->am2 + i) * rad_at(A->eq, i) +
               sgrp * up(up(sqrt(bound_sum(sq, N))) + bound_sum(sl, N))));
    return up(up(sc + value_term(A, i)) + norm2_up(A->er2 + i * (size_t)A->H, (size_t)A->H, 1));
}

/* The output row's candidate: the 2-norm over its heads of their e. */
static int attn_post(cic_ball *b, const cic_op *o, const mpfr_t *y)
{
    size_t rows = (size_t)cic_model_run_rows(b->m, o->out, b->ns), i;
    (void)y;
    for (i = 0; b->at.eo && i < rows; i++) {
        double heads = norm2_up(b->at.eo + i * (size_t)b->at.H, (size_t)b->at.H, 1);
        double cross = attn_cross_row(&b->at, i), spec = attn_spec_row(&b->at, i);
        cross = spec < cross ? spec : cross;
        b->next_nrm[i] = cross < heads ? cross : heads;
    }
    attn_cross_free(&b->at);
    return 0;
}

size_t cic_ball_attn_scratch(const cic_model *m)
{
    return 8 * (size_t)m->cfg.tokens + 3 * (size_t)m->cfg.d_model + 2 * (size_t)m->cfg.d_mlp;
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
static double score_radii(const ball_attn *A, double *rs, double *sg, size_t qo, size_t kbase,
                          size_t qrow, size_t krow0, int cnt, double u)
{
    const double *aq = A->aq + qo, *rq = A->rq ? A->rq + qo : NULL;
    double R = 0, nq = 0, eq = A->eo ? rad_at(A->eq, qrow) : INFINITY;
    int j, c;
    for (c = 0; A->eo && c < A->dh; c++)
        nq += aq[c] * aq[c];
    nq = up(sqrt(bound_sum(nq, (size_t)A->dh)));
    for (j = 0; j < cnt; j++) {
        size_t ko = kbase + (size_t)j * A->lk;
        double acc = 0, g = 0, nk = 0, ek = A->eo ? rad_at(A->ek, krow0 + (size_t)j) : 0;
        for (c = 0; c < A->dh; c++) {
            double ak = A->ak[ko + c], rk = rad_at(A->rk, ko + c);
            acc += aq[c] * rk + rad_at(rq, (size_t)c) * (ak + rk);
            g += aq[c] * ak;
            nk += ak * ak;
        }
        acc = bound_sum(acc, 3 * (size_t)A->dh + 3);
        /* the norm-wise alternative (Cauchy-Schwarz on the head's slices):
         * |q* . k* - q^ . k^| <= ||q^|| e_k + e_q (||k^|| + e_k) */
        if (A->eo) {
            double alt = up(nq * ek + eq * up(up(sqrt(bound_sum(nk, (size_t)A->dh))) + ek));
            acc = alt < acc ? alt : acc;
        }
        sg[j] = up(4.0 * u * A->c * bound_sum(g, (size_t)A->dh + 1)); /* the roundings */
        rs[j] = up(A->c * acc + sg[j]);
        R = rs[j] > R ? rs[j] : R;
    }
    return R; /* the largest, to see that all are finite */
}

/* The norm-wise bound of one head's output row: o* - o^ = sum_j (P*_j -
 * p^_j) v^_j + sum_j P*_j (v*_j - v^_j) + the dot's rounding, so its 2-norm
 * is at most sum_j rp_j ||v^_j|| + (pu_j + rp_j) e_v(j) + own (own: the
 * 2-norm of u g). */
static double head_nrm(const ball_attn *A, const double *rp, const double *pu, size_t first,
                       int kvh, int cnt, double own)
{
    double s = 0;
    int j;
    for (j = 0; j < cnt; j++) {
        size_t vo = (first + j) * A->lv + A->vc + (size_t)kvh * A->dh;
        double nv = norm2_up(A->av + vo, (size_t)A->dh, 1);
        s += up(rp[j] * nv + (pu[j] + rp[j]) * rad_at(A->ev, first + (size_t)j));
    }
    return up(bound_sum(s, (size_t)cnt) + own);
}

/* ||x - m|| for the head slice at off of the signed doubles sd (each
 * within 2^-53 |x| of the midpoint x), bounded above for the midpoints: the
 * 2-norm of the doubles' differences plus 2^-53 ||x|| (n0, the slice's
 * norm from the magnitudes). */
static double centred_nrm(const double *sd, size_t off, const double *m, int n, double n0)
{
    double s = 0;
    int c;
    for (c = 0; c < n; c++) {
        double t = fabs(sd[off + c] - m[c]);
        s += t * t;
    }
    return up(up(sqrt(bound_sum(s, (size_t)n)) * (1.0 + 0x1p-50)) + 0x1p-52 * n0);
}

/* G >= ||vbar - mv||, vbar = sum_j P^_j v^_j (P^ the exact softmax of the
 * midpoint scores, v^ the midpoints): ||sum_j p^_j (v^_j - mv)|| +
 * sum_j |P^_j - p^_j| ||v^_j - mv||, the second at most S2 = sum_j Pu_j
 * eta_j ||v^_j - mv||. The first is r = sum_j pu_j (sv_j - mv) in double
 * (pu_j within 2^-52 of p^_j, sv_j within 2^-53 |v^_j|; each component's
 * sum within gamma_(cnt+2) of its terms' magnitudes), so within (cnt + 16)
 * 2^-52 S1, S1 = sum_j Pu_j (||v^_j - mv|| + ||v^_j||), of what the double
 * sum gives (Minkowski over components). */
static double vbar_dist(const ball_attn *A, size_t first, int kvh, int cnt, const double *pu,
                        const double *mv, double S1, double S2)
{
    double r2 = 0;
    int j, c, dh = A->dh;
    for (c = 0; c < dh; c++) {
        double r = 0;
        for (j = 0; j < cnt; j++)
            r += pu[j] * (A->sv[(first + j) * A->lv + A->vc + (size_t)kvh * dh + c] - mv[c]);
        r2 += r * r;
    }
    return up(up(up(sqrt(bound_sum(r2, (size_t)dh))) + up(((double)cnt + 16.0) * 0x1p-52 * S1)) +
              S2);
}

/* One head's share of the spectral candidate (docs/design.md, "The
 * norm-wise bound", attention: the spectral candidate). With x_j = v^_j -
 * mv = x0_j - m' (x0_j = v^_j - m0, m' = mv - m0) and the scores' change D
 * less the common c dq . mk0: the head's score term is at most K0 (||sum_j
 * P^_j D_j x_j|| + sum_j P^_j |D_j| (G + h0 (||x_j|| + V))), K0 = e^rho0,
 * h0 = rho0 K0 / 2, rho0 = max_j rs_j + c e_q ||mk0||. Of sum_j P^_j D_j
 * x_j: c X diag(P^) K0^T dq <= c (||X0|| Pmax ||K0|| + ||m'|| sum_j Pu_j
 * ||k_j - mk0||) ||dq||; c X diag(P^) (q . dk_j)_j <= c ||q|| (||X0||
 * ||(Pu_j ||dk_j||)_j||_2 + ||m'|| sum_j Pu_j ||dk_j||); c sum_j P^_j (dq .
 * dk_j) x_j <= c ||dq|| sum_j Pu_j e_kj ||x_j||; the roundings sum_j Pu_j
 * sigma_j ||x_j||. sums: ||q||, V, G, max_j rs_j, the softmax's and the
 * dot's own part. */
static void spec_heads(const ball_attn *A, const double *const *v, size_t row, size_t first,
                       int h, int kvh, int cnt, const double *sums)
{
    const double *eta = v[0], *sg = v[2], *pu = v[3], *nc = v[6], *mv = v[7] + A->dh;
    double *mp = (double *)v[7] + 2 * A->dh, *nk0 = (double *)v[8];
    double nq = sums[0], V = sums[1], G = sums[2], Pmax = 0, s1 = 0, s2 = 0, rsg = 0;
    double nmp, rho, K0, h0, beta;
    int kv = A->H / A->grp, dh = A->dh, j, c;
    size_t N = (size_t)A->N, qi = first / N * (size_t)kv + (size_t)kvh;
    const double *m0 = A->m0 + qi * dh, *mk0 = A->mk0 + qi * dh;
    /* the keys' centre of cross_heads (mean over the row's cnt keys) is
     * mk0 bit for bit when cnt = N: then its norms serve */
    bool same_centre = memcmp(v[7], mk0, (size_t)dh * sizeof *mk0) == 0;
    for (c = 0; c < dh; c++)
        mp[c] = mv[c] - m0[c];
    nmp = up(norm2_up(mp, (size_t)dh, 1) * (1.0 + 0x1p-52)); /* each difference within 2^-53 */
    rho = up(sums[3] + up(A->c * rad_at(A->eq, row) * A->nmk0[qi]));
    if (!(rho < 0x1p-4)) {
        amax(A->km2 + row, INFINITY);
        return;
    }
    K0 = up(exp(rho) * (1.0 + 0x1p-40));
    h0 = up(rho * K0 * 0.5);
    for (j = 0; j < cnt; j++) {
        size_t ko = (first + j) * A->lk + A->kc + (size_t)kvh * dh;
        double Pu = up(pu[j] * (1.0 + 2.0 * eta[j])), ek = rad_at(A->ek, first + (size_t)j);
        double w2 = up(Pu * up(G + h0 * up(nc[j] + V)));
        if (!same_centre) /* else cross_heads left ||k_j - mk0|| there */
            nk0[j] = centred_nrm(A->sk, ko, mk0, dh, norm2_up(A->ak + ko, (size_t)dh, 1));
        Pmax = Pu > Pmax ? Pu : Pmax;
        s1 += Pu * nk0[j];
        s2 += up(Pu * ek * nc[j]) + w2 * up(nk0[j] + ek);
        rsg += up(Pu * sg[j] * nc[j]) + w2 * sg[j];
        amax(A->qx + row * N + (size_t)j, up(nq * up(A->snx[qi] * Pu)));
        amax(A->qm + row * N + (size_t)j, up(nq * up(nmp * Pu + w2)));
    }
    beta = up(up(up(A->snx[qi] * A->snk[qi]) * Pmax) + up(nmp * bound_sum(s1, (size_t)cnt)));
    beta = up(beta + bound_sum(s2, (size_t)cnt));
    amax(A->am2 + row, beta);
    amax(A->km2 + row, K0);
    A->er2[row * (size_t)A->H + (size_t)h] = up(up(K0 * bound_sum(rsg, (size_t)cnt)) + sums[4]);
}

/* One head's share of the bound across heads (docs/design.md, "The
 * norm-wise bound", attention across heads). Both softmaxes (P* of the
 * exact scores, P^ of the midpoint scores) sum to 1, so the head's score
 * term sum_j (P*_j - P^_j) v^_j is sum_j (P*_j - P^_j) (v^_j - mv) for any
 * vector mv, and the scores' change D may lose a common shift c dq . mk
 * (mv here the weighted mean of the values, mk the mean of the keys, in
 * double). With rho >= |D_j| (max_j rs_j + c e_q ||mk||), Z = sum_k P^_k
 * e^D_k >= e^-rho and e^D = 1 + D + t, |t| <= h |D|, h = rho e^rho / 2:
 * P*_j - P^_j = P^_j (D_j - Dbar + t_j - tbar) / Z, and since sum_j P^_j
 * (D_j - Dbar) (v_j - mv) = sum_j P^_j D_j (v_j - mv) - Dbar (vbar - mv),
 * the score term is at most K sum_j P^_j |D_j| ((1 + h) ||v_j - mv|| + G
 * + h V), K = e^rho, V = sum_j Pu_j ||v_j - mv||, G >= ||vbar - mv||
 * (vbar = sum_j P^_j v^_j). With |D_j| <= c (||dq|| (||k_j - mk|| + e_kj)
 * + ||q|| ||dk_j||) + sigma_j and w_j = Pu_j ((1 + h) ||v_j - mv|| + G +
 * h V) (Pu_j >= P^_j) it is K c (||dq|| a + ||q|| sum_j w_j ||dk_j||) + K
 * sum_j w_j sigma_j, a = sum_j w_j (||k_j - mk|| + e_kj); the value term
 * is at most sum_j (p_j + rp_j) ||dv_j||. The maxima over heads go to the
 * row's arrays, the head's own part (sigma's, the softmax's and the dot's
 * roundings) to er. v: eta, rs, sigma, p, rp, then scratch for ||v_j||,
 * ||v_j - mv|| and the means (2 dh). */
static void cross_heads(const ball_attn *A, const double *const *v, size_t row, size_t first,
                        int h, int kvh, int cnt, double own)
{
    const double *eta = v[0], *rs = v[1], *sg = v[2], *pu = v[3], *rp = v[4];
    double *nv = (double *)v[5], *nc = (double *)v[6], *mk = (double *)v[7], *mv = mk + A->dh;
    double *nkc = (double *)v[8];
    double V = 0, a = 0, rmax = 0, K, rsg = 0, rsoft = 0, nq, W = 0, nmk, G, hh, S1 = 0, S2 = 0;
    double rs0, Sh = 0;
    size_t N = (size_t)A->N, qo = row * A->lq + A->qc + (size_t)h * A->dh;
    int j, c, dh = A->dh;
    nq = norm2_up(A->aq + qo, (size_t)dh, 1);
    for (c = 0; c < 2 * dh; c++)
        mk[c] = 0;
    for (j = 0; j < cnt; j++) {
        size_t vo = (first + j) * A->lv + A->vc + (size_t)kvh * dh;
        size_t ko = (first + j) * A->lk + A->kc + (size_t)kvh * dh;
        for (c = 0; c < dh; c++) {
            mk[c] += A->sk[ko + c] / cnt;
            mv[c] += pu[j] * A->sv[vo + c];
        }
        W += pu[j];
        rmax = rs[j] > rmax ? rs[j] : rmax;
    }
    for (c = 0; c < dh && W > 0; c++)
        mv[c] /= W;
    nmk = norm2_up(mk, (size_t)dh, 1);
    for (j = 0; j < cnt; j++) {
        size_t vo = (first + j) * A->lv + A->vc + (size_t)kvh * dh;
        double Pu = up(pu[j] * (1.0 + 2.0 * eta[j]));
        nv[j] = norm2_up(A->av + vo, (size_t)dh, 1);
        nc[j] = centred_nrm(A->sv, vo, mv, dh, nv[j]);
        V += Pu * nc[j];
        S1 += Pu * up(nc[j] + nv[j]);
        S2 += Pu * eta[j] * nc[j];
    }
    V = bound_sum(V, (size_t)cnt);
    G = vbar_dist(A, first, kvh, cnt, pu, mv, bound_sum(S1, (size_t)cnt),
                  bound_sum(S2, (size_t)cnt));
    rs0 = rmax;
    rmax = up(rmax + up(A->c * rad_at(A->eq, row) * nmk));
    K = rmax < 0x1p-4 ? up(exp(rmax) * (1.0 + 0x1p-40)) : INFINITY;
    hh = rmax < 0x1p-4 ? up(rmax * K * 0.5) : INFINITY;
    for (j = 0; j < cnt; j++) {
        size_t ko = (first + j) * A->lk + A->kc + (size_t)kvh * dh;
        double Pu = up(pu[j] * (1.0 + 2.0 * eta[j]));
        double w = up(Pu * up(up((1.0 + hh) * nc[j]) + up(G + hh * V)));
        double nk = centred_nrm(A->sk, ko, mk, dh, norm2_up(A->ak + ko, (size_t)dh, 1));
        nkc[j] = nk; /* spec_heads reads it when its centre is this one */
        a += w * up(nk + rad_at(A->ek, first + (size_t)j));
        amax(A->qw + row * N + (size_t)j, up(nq * w));
        amax(A->pm + row * N + (size_t)j, up(pu[j] + rp[j]));
        Sh += up(pu[j] + rp[j]);
        rsg += w * sg[j];
        rsoft += up(pu[j] * (1.0 + 2.0 * eta[j])) * eta[j] * nv[j];
    }
    amax(A->am + row, bound_sum(a, (size_t)cnt));
    amax(A->km + row, K);
    amax(A->sm + row, bound_sum(Sh, (size_t)cnt));
    rsoft = up(bound_sum(rsoft, (size_t)cnt) + own);
    A->er[row * (size_t)A->H + (size_t)h] = up(up(K * bound_sum(rsg, (size_t)cnt)) + rsoft);
    if (A->snx) {
        const double sums[5] = {nq, V, G, rs0, rsoft};
        spec_heads(A, v, row, first, h, kvh, cnt, sums);
    }
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
    double *sg = scratch + 4 * N, *nv = scratch + 5 * N, *nc = scratch + 6 * N;
    double *nk0 = scratch + 7 * N, *means = scratch + 8 * N;
    double mx = -INFINITY, M = 0, E = 0, R, u = b->u, G = 0;
    bool fine;
    size_t row = (size_t)s * N + i, first = (size_t)s * N;
    for (j = 0; j < cnt; j++)
        mx = sc[j] > mx ? sc[j] : mx;
    for (j = 0; j < cnt; j++)
        M = fabs(sc[j] - mx) > M ? fabs(sc[j] - mx) : M;
    fine = isfinite(score_radii(A, rs, sg, row * A->lq + A->qc + (size_t)h * dh,
                                first * A->lk + A->kc + (size_t)kvh * dh, row, first, cnt, u)) &&
           u * (M + fabs(mx) + 8) < 0x1p-12;
    for (j = 0; j < cnt; j++) {
        /* eta_j, kept in rp until R is known */
        rp[j] = up(u * ((fabs(sc[j] - mx) + M) * 1.001 + 0x1p-40 * fabs(mx) + 4.01));
        pu[j] = absup(p[j]);
        E += pu[j] * (1.0 + 2.0 * rp[j]) * expm1(rs[j]) * (1.0 + 0x1p-40);
        sc[j] = rp[j]; /* the score is spent: eta_j stays for cross_heads */
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
        g = bound_sum(g, (size_t)cnt + 1);
        A->ry[row * A->d + (size_t)h * dh + cc] =
            up(bound_sum(acc, 3 * (size_t)cnt + 3) + u * g);
        if (A->eo)
            G += g * g;
    }
    if (A->eo)
        A->eo[row * (size_t)A->H + (size_t)h] =
            head_nrm(A, rp, pu, first, kvh, cnt, up(u * up(sqrt(bound_sum(G, (size_t)dh)))));
    if (A->qw) {
        const double *v[9] = {sc, rs, sg, pu, rp, nv, nc, means, nk0};
        cross_heads(A, v, row, first, h, kvh, cnt, up(u * up(sqrt(bound_sum(G, (size_t)dh)))));
    }
}

/* The scores' and rows' bounds run inside the kernel's head loop, row by
 * row (cic_ball_attn_scores, cic_ball_attn_row into b->next). */
const cic_ball_rule _cic_ball_rule_attn = {.pre = attn_pre, .post = attn_post};
