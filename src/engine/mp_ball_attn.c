/* SPDX-License-Identifier: MIT */
/* mp_ball_attn.c: the ball run's attention: the scores' radii,
 * the softmax of balls and P V, per query row inside the engine's head
 * loop (engine_mpfr_attn.c). */
#include "mp_ball_int.h"

#include <stdlib.h>

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
    }
    return 0;
}

/* The output row's candidate: the 2-norm over its heads of their e. */
static int attn_post(cic_ball *b, const cic_op *o, const mpfr_t *y)
{
    size_t rows = (size_t)cic_model_run_rows(b->m, o->out, b->ns), i;
    (void)y;
    for (i = 0; b->at.eo && i < rows; i++)
        b->next_nrm[i] = norm2_up(b->at.eo + i * (size_t)b->at.H, (size_t)b->at.H, 1);
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
static double score_radii(const ball_attn *A, double *rs, size_t qo, size_t kbase, size_t qrow,
                          size_t krow0, int cnt, double u)
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
        rs[j] = up(A->c * acc + 4.0 * u * A->c * bound_sum(g, (size_t)A->dh + 1));
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
    int j, c;
    for (j = 0; j < cnt; j++) {
        size_t vo = (first + j) * A->lv + A->vc + (size_t)kvh * A->dh;
        double nv = 0;
        for (c = 0; c < A->dh; c++)
            nv += A->av[vo + c] * A->av[vo + c];
        nv = up(sqrt(bound_sum(nv, (size_t)A->dh)));
        s += up(rp[j] * nv + (pu[j] + rp[j]) * rad_at(A->ev, first + (size_t)j));
    }
    return up(bound_sum(s, (size_t)cnt) + own);
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
    double mx = -INFINITY, M = 0, E = 0, R, u = b->u, G = 0;
    bool fine;
    size_t row = (size_t)s * N + i, first = (size_t)s * N;
    for (j = 0; j < cnt; j++)
        mx = sc[j] > mx ? sc[j] : mx;
    for (j = 0; j < cnt; j++)
        M = fabs(sc[j] - mx) > M ? fabs(sc[j] - mx) : M;
    fine = isfinite(score_radii(A, rs, row * A->lq + A->qc + (size_t)h * dh,
                                first * A->lk + A->kc + (size_t)kvh * dh, row, first, cnt, u)) &&
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
        g = bound_sum(g, (size_t)cnt + 1);
        A->ry[row * A->d + (size_t)h * dh + cc] =
            up(bound_sum(acc, 3 * (size_t)cnt + 3) + u * g);
        if (A->eo)
            G += g * g;
    }
    if (A->eo)
        A->eo[row * (size_t)A->H + (size_t)h] =
            head_nrm(A, rp, pu, first, kvh, cnt, up(u * up(sqrt(bound_sum(G, (size_t)dh)))));
}

/* The scores' and rows' bounds run inside the kernel's head loop, row by
 * row (cic_ball_attn_scores, cic_ball_attn_row into b->next). */
const cic_ball_rule _cic_ball_rule_attn = {.pre = attn_pre, .post = attn_post};
