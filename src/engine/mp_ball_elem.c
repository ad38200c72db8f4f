/* SPDX-License-Identifier: MIT */
/* mp_ball_elem.c: the ball run's first-order bounds: add, gate,
 * modulation, centring and RoPE (its cos and sin enclosed by Arb), every
 * second-order term kept. */
#include "mp_ball_int.h"

#include <stdlib.h>
#include <string.h>

/* ---- first-order bounds ---- */

static void add_pre(cic_ball *b, const cic_op *o, const mpfr_t *x, const mpfr_t *z)
{
    const double *ra = b->rad[o->in[0]], *rb = b->rad[o->in[1]];
    size_t n = count(b, o->out), cols = (size_t)b->m->t[o->out].cols, j;
    double own = 0;
    for (j = 0; j < n; j++) { /* y = RN(a + b) */
        double rj = up(b->u * (absup(x[j]) + absup(z[j])));
        b->next[j] = up(rad_at(ra, j) + rad_at(rb, j) + rj);
        /* the row's candidate: e_a + e_b + the 2-norm of the roundings */
        own += rj * rj;
        if ((j + 1) % cols == 0) {
            size_t i = j / cols;
            b->next_nrm[i] = up(up(nrm_at(b, o->in[0], i) + nrm_at(b, o->in[1], i)) +
                                up(sqrt(bound_sum(own, cols))));
            own = 0;
        }
    }
}

/* GATE (y = RN(g x)) and MODULATE (t = RN(1 + scale), y = RN(RN(x t) +
 * shift)), g, scale, shift from the sample's row of in[1]. */

/* An upper bound of |t| = |RN(1 + s)| (not 1 + |s|: a negative scale
 * shrinks its channel): with sd = RN(s) in double (within 2^-53 |s|) and
 * its sum with 1 in double (within 2^-53 of the result), |1 + s| <= |1 +
 * sd| (1 + 2^-51) + 2^-52 |s|, and |t| <= |1 + s| (1 + u). a1 >= |s|. */
static double one_plus_up(mpfr_srcptr s, double a1, double u)
{
    double sd = mpfr_get_d(s, MPFR_RNDN);
    return up(up(fabs(1.0 + sd) * (1.0 + 0x1p-51) + 0x1p-52 * a1) * (1.0 + u));
}
/* The scale bounds of each sample's diagonal map, D[s, j]: |g*_j| <= a0 +
 * r0 for a gate, |1 + s*_j| <= |t| + et for a modulation (|1 + s*| <= |t|
 * + |1 + s* - t|). mod_pre's cx, and the pairs' D. */
static void mod_scales(const cic_ball *b, const cic_op *o, const mpfr_t *mod, double *D)
{
    const double *rm = b->rad[o->in[1]];
    int d = b->m->t[o->in[0]].cols, mc = b->m->t[o->in[1]].cols, s, j;
    double u = b->u;
    for (s = 0; s < b->ns; s++)
        for (j = 0; j < d; j++) {
            size_t c0 = (size_t)s * mc + o->in_col[0] + j, c1 = (size_t)s * mc + o->in_col[1] + j;
            double a0 = absup(mod[c0]), r0 = rad_at(rm, c0);
            if (o->kind == CIC_OP_GATE) {
                D[(size_t)s * d + j] = up(a0 + r0);
            } else {
                double a1 = absup(mod[c1]), r1 = rad_at(rm, c1);
                D[(size_t)s * d + j] = up(one_plus_up(mod[c1], a1, u) + up(r1 + u * (1.0 + a1)));
            }
        }
}

/* A gate after a linear layer (b->ln): y* - y^ = diag(g*) W (x* - x^) +
 * diag(g*) own + rest, so its candidate is sigma(diag(D_s) W) e_x + max D
 * ||own|| + ||rest||; sg[s] the sigma of sample s (INFINITY: none). */
static void gate_sigmas(cic_ball *b, const cic_op *o, const double *D, double *sg)
{
    int d = b->m->t[o->in[0]].cols, s;
    if (o->kind == CIC_OP_GATE && b->ln.id == o->in[0] && b->ln.n == d)
        _cic_ball_scaled_sigma(b, b->ln.w, D, false, sg); /* INFINITY where none */
    else
        for (s = 0; s < b->ns; s++)
            sg[s] = INFINITY;
}

static int mod_pre(cic_ball *b, const cic_op *o, const mpfr_t *x, const mpfr_t *mod)
{
    const double *rx = b->rad[o->in[0]], *rm = b->rad[o->in[1]];
    int d = b->m->t[o->in[0]].cols, mc = b->m->t[o->in[1]].cols;
    int R = cic_model_run_rows(b->m, o->in[0], b->ns), N = b->m->cfg.tokens, i, j;
    double u = b->u, *sg = NULL, *D, *own_D = NULL;
    size_t nD = (size_t)b->ns * d;
    if (b->nb) {
        if (!(sg = malloc((size_t)b->ns * sizeof *sg)) ||
            _cic_ball_pair_set(&b->dg, o->out, (size_t)R, nD) < 0) {
            free(sg);
            return -1;
        }
        b->dg.n = d;
        D = b->dg.D;
    } else if (!(D = own_D = malloc((nD ? nD : 1) * sizeof *D))) {
        return -1;
    }
    mod_scales(b, o, mod, D); /* each value's cx: D of its sample and column */
    if (sg)
        gate_sigmas(b, o, D, sg);
    for (i = 0; i < R; i++) {
        size_t s0 = (size_t)(i / N) * mc;
        const double *Di = D + (size_t)(i / N) * d;
        double lip = 0, own = 0; /* the row's candidate: lip e_x + ||own|| */
        for (j = 0; j < d; j++) {
            size_t k = (size_t)i * d + j, c0 = s0 + o->in_col[0] + j;
            double ax = absup(x[k]), r = rad_at(rx, k), a0 = absup(mod[c0]), r0 = rad_at(rm, c0);
            double cx = Di[j], rest; /* the radius is rest + cx r: cx bounds |d y / d x| */
            if (o->kind == CIC_OP_GATE) {
                rest = up(r0 * ax + u * a0 * ax);
                b->next[k] = up(a0 * r + r0 * (ax + r) + u * a0 * ax);
            } else {
                size_t c1 = s0 + o->in_col[1] + j;
                double a1 = absup(mod[c1]), r1 = rad_at(rm, c1);
                double at = up((1.0 + a1) * (1.0 + u)), et = up(r1 + u * (1.0 + a1));
                rest = up(up(ax * et + r0) + up(2.1 * u * ax * at + 1.01 * u * a0));
                b->next[k] = up(up(ax * et + r * cx + r0) + up(2.1 * u * ax * at + 1.01 * u * a0));
            }
            lip = cx > lip ? cx : lip;
            own += rest * rest;
        }
        own = up(sqrt(bound_sum(own, (size_t)d)));
        b->next_nrm[i] = up(up(lip * nrm_at(b, o->in[0], (size_t)i)) + own);
        if (sg) {
            b->dg.ex[i] = nrm_at(b, o->in[0], (size_t)i);
            b->dg.rest[i] = own;
            if (sg[i / N] < INFINITY) /* then b->ln describes this gate's input */
                b->next_nrm[i] = _cic_ball_pair_cand(b->next_nrm[i], sg[i / N], b->ln.ex[i],
                                                     lip, b->ln.rest[i], own);
        }
    }
    free(sg);
    free(own_D);
    return 0;
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

/* The centring's candidate: x - mean(x) is the projection P (norm 1) of
 * x, so e_x plus the 2-norm of the roundings, the radii of exact inputs. */
static void center_nrm(cic_ball *b, const cic_op *o, const mpfr_t *x, size_t rows, size_t cols)
{
    double *own = malloc(rows * cols * sizeof *own);
    size_t i;
    if (!own)
        return; /* no candidate: the radii's norm stands */
    memset(own, 0, rows * cols * sizeof *own);
    cic_ball_center_rows(own, x, rows, cols, b->prec);
    for (i = 0; i < rows; i++)
        b->next_nrm[i] = up(nrm_at(b, o->in[0], i) + norm2_up(own + i * cols, cols, 1));
    free(own);
}

static void center_pre(cic_ball *b, const cic_op *o, const mpfr_t *x)
{
    size_t n = count(b, o->out), rows = (size_t)cic_model_run_rows(b->m, o->in[0], b->ns);
    size_t cols = (size_t)b->m->t[o->in[0]].cols;
    if (b->rad[o->in[0]])
        memcpy(b->next, b->rad[o->in[0]], n * sizeof *b->next);
    cic_ball_center_rows(b->next, x, rows, cols, b->prec);
    if (b->nb)
        center_nrm(b, o, x, rows, cols);
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
 * the exact cos and sin; partial rope (o->rot): the table is for the first
 * rd dims of each head, the rest are copied exactly (their radius kept). */
int cic_ball_rope(cic_ball *b, const cic_op *o, const mpfr_t *cs, const mpfr_t *x)
{
    const cic_model *m = b->m;
    const double *rx = b->rad[o->in[0]];
    int N = m->cfg.tokens, w = m->t[o->out].cols, hd = w / o->heads;
    int rd = o->rot ? o->rot : hd, half = rd / 2;
    int interleaved = o->rope == CIC_ROPE_INTERLEAVED, step = interleaved ? 2 : 1;
    int off = interleaved ? 1 : half, rows = N * b->ns, i, h, j;
    double *ec = malloc((size_t)N * half * sizeof *ec), *es = malloc((size_t)N * half * sizeof *es);
    double *own = cic_calloc((size_t)rows, sizeof *own), u = b->u;
    if (!ec || !es || !own) {
        free(ec);
        free(es);
        free(own);
        return -1;
    }
    rope_table_err(b, o, cs, N, half, rd, ec, es);
    for (i = 0; i < rows; i++)
        for (h = 0; h < o->heads; h++) {
            for (j = rd; j < hd; j++) /* not rotated: y = x exactly */
                b->next[(size_t)i * w + h * hd + j] = rad_at(rx, (size_t)i * w + h * hd + j);
            for (j = 0; j < half; j++) {
                size_t ia = (size_t)i * w + h * hd + step * j, ib = ia + off;
                size_t k = (size_t)(i % N) * half + j;
                double aa = absup(x[ia]), ab = absup(x[ib]), ra = rad_at(rx, ia);
                double rb = rad_at(rx, ib), c = absup(cs[2 * k]), sn = absup(cs[2 * k + 1]);
                /* the exact rotation keeps the 2-norm: the candidate is e_x
                 * plus the roundings' and the table's part, own */
                double oa = up(up(u * (aa * c + ab * sn) + aa * ec[k]) + ab * es[k]);
                double ob = up(up(u * (ab * c + aa * sn) + ab * ec[k]) + aa * es[k]);
                b->next[ia] = up(up(u * (aa * c + ab * sn) + aa * ec[k] + ra * (c + ec[k])) +
                                 up(ab * es[k] + rb * (sn + es[k])));
                b->next[ib] = up(up(u * (ab * c + aa * sn) + ab * ec[k] + rb * (c + ec[k])) +
                                 up(aa * es[k] + ra * (sn + es[k])));
                own[i] += oa * oa + ob * ob;
            }
        }
    for (i = 0; b->nb && i < rows; i++)
        b->next_nrm[i] = up(nrm_at(b, o->in[0], (size_t)i) +
                            up(sqrt(bound_sum(own[i], (size_t)w))));
    free(own);
    free(ec);
    free(es);
    return 0;
}

/* ---- the rules ---- */

/* ADD reads in[0] and in[1]; GATE and MODULATE in[0] and the sample's
 * modulation row in in[1]. */
static int two_in_pre(cic_ball *b, const cic_op *o, cic_ball_mid_fn mid, void *ctx,
                      void (*bound)(cic_ball *, const cic_op *, const mpfr_t *, const mpfr_t *))
{
    const mpfr_t *x = mid(ctx, o->in[0]), *z = mid(ctx, o->in[1]);
    if (!x || !z)
        return -1;
    bound(b, o, x, z);
    return 0;
}

static int add_rule_pre(cic_ball *b, const cic_op *o, cic_ball_mid_fn mid, void *ctx)
{
    return two_in_pre(b, o, mid, ctx, add_pre);
}

static int mod_rule_pre(cic_ball *b, const cic_op *o, cic_ball_mid_fn mid, void *ctx)
{
    const mpfr_t *x = mid(ctx, o->in[0]), *z = mid(ctx, o->in[1]);
    if (!x || !z)
        return -1;
    return mod_pre(b, o, x, z);
}

static int center_rule_pre(cic_ball *b, const cic_op *o, cic_ball_mid_fn mid, void *ctx)
{
    const mpfr_t *x = mid(ctx, o->in[0]);
    if (!x)
        return -1;
    center_pre(b, o, x);
    return 0;
}

const cic_ball_rule _cic_ball_rule_add = {.pre = add_rule_pre, .post = _cic_ball_post_none};
const cic_ball_rule _cic_ball_rule_gate = {.pre = mod_rule_pre, .post = _cic_ball_post_none};
const cic_ball_rule _cic_ball_rule_modulate = {.pre = mod_rule_pre, .post = _cic_ball_post_none};
const cic_ball_rule _cic_ball_rule_center = {.pre = center_rule_pre, .post = _cic_ball_post_none};
/* RoPE's bound needs the kernel's cos and sin table: the kernel calls
 * cic_ball_rope before it rotates (mp_ball.h). */
const cic_ball_rule _cic_ball_rule_rope = {.pre = _cic_ball_pre_none, .post = _cic_ball_post_none};
