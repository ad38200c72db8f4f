/* SPDX-License-Identifier: MIT */
/* engine_mpfr_elem.c: the MPFR engine's row and elementwise ops:
 * modulation, gate, centring, the fast Hadamard, the norms, activations,
 * GLU, add and RoPE, each operation correctly rounded and in the real
 * engines' order (engine_real.h). Kernels of the table in engine_mpfr.c. */
#include "engine_mpfr_int.h"

#include "../xform/qmat.h"
#include "mp_act.h"
#include "mp_fwht.h"

int _cic_mpk_modulate(mprun *r, const cic_op *o, mpfr_t *y)
{
    const mpfr_t *x = wsrc(r, o->in[0]), *mod = wsrc(r, o->in[1]);
    int d = r->m->t[o->in[0]].cols, mc = r->m->t[o->in[1]].cols, R = rows_of(r, o->in[0]);
    int N = r->m->cfg.tokens, i, j, s;
    mpfr_t *t = cic_mpvec_create((size_t)r->ns * d, r->prec);
    if (!x || !mod || !t) {
        cic_mpvec_destroy(t, (size_t)r->ns * d);
        return -1;
    }
    for (s = 0; s < r->ns; s++)
        for (j = 0; j < d; j++)
            mpfr_add_ui(t[(size_t)s * d + j], mod[(size_t)s * mc + o->in_col[1] + j], 1,
                        MPFR_RNDN);
    for (i = 0; i < R; i++) {
        const mpfr_t *ts = t + (size_t)(i / N) * d;
        const mpfr_t *sh = mod + (size_t)(i / N) * mc + o->in_col[0];
        for (j = 0; j < d; j++) {
            mpfr_mul(y[(size_t)i * d + j], x[(size_t)i * d + j], ts[j], MPFR_RNDN);
            mpfr_add(y[(size_t)i * d + j], y[(size_t)i * d + j], sh[j], MPFR_RNDN);
        }
    }
    cic_mpvec_destroy(t, (size_t)r->ns * d);
    return 0;
}

int _cic_mpk_gate(mprun *r, const cic_op *o, mpfr_t *y)
{
    const mpfr_t *x = wsrc(r, o->in[0]), *mod = wsrc(r, o->in[1]);
    int d = r->m->t[o->in[0]].cols, mc = r->m->t[o->in[1]].cols, R = rows_of(r, o->in[0]);
    int N = r->m->cfg.tokens, i, j;
    if (!x || !mod)
        return -1;
    for (i = 0; i < R; i++) {
        const mpfr_t *g = mod + (size_t)(i / N) * mc + o->in_col[0];
        for (j = 0; j < d; j++)
            mpfr_mul(y[(size_t)i * d + j], g[j], x[(size_t)i * d + j], MPFR_RNDN);
    }
    return 0;
}

int _cic_mpk_center(mprun *r, const cic_op *o, mpfr_t *y)
{
    const mpfr_t *x = wsrc(r, o->in[0]);
    int d = r->m->t[o->in[0]].cols, R = rows_of(r, o->in[0]), i, j;
    if (!x)
        return -1;
    for (i = 0; i < R; i++) {
        for (j = 0; j < d; j++)
            r->ptr[j] = (mpfr_ptr)x[(size_t)i * d + j];
        mpfr_sum(r->t0, r->ptr, (unsigned long)d, MPFR_RNDN);
        mpfr_div_ui(r->t0, r->t0, (unsigned long)d, MPFR_RNDN);
        for (j = 0; j < d; j++)
            mpfr_sub(y[(size_t)i * d + j], x[(size_t)i * d + j], r->t0, MPFR_RNDN);
    }
    return 0;
}

/* Fast randomized Hadamard, w = K * P with K = o->hbase (or the regular
 * Hadamard of order 4^k): the same base, butterflies, block mixing and
 * order of operations as the real engines (engine_real.h, mp_fwht.c), each
 * operation correctly rounded. */
int _cic_mpk_fwht(mprun *r, const cic_op *o, mpfr_t *y)
{
    const mpfr_t *x = wsrc(r, o->in[0]), *sg = wsrc(r, o->g);
    /* a row of blocks (group) is that many rows of one block: rows are
     * contiguous */
    int w = o->group > 0 ? o->group : r->m->t[o->in[0]].cols, i, j;
    int R = rows_of(r, o->in[0]) * (r->m->t[o->in[0]].cols / w);
    int K = o->regular ? 1 : o->hbase, na = o->regular ? w : K;
    signed char *hk = NULL;
    mpfr_t *acc = NULL;
    if (!x || !sg || (!o->regular && cic_hadamard_base_k(&hk, K, w) < 0))
        return -1;
    acc = cic_mpvec_create((size_t)na, r->prec);
    if (!acc) {
        free(hk);
        return -1;
    }
    mpfr_set_ui(r->c_scale, (unsigned long)w, MPFR_RNDN);
    mpfr_rec_sqrt(r->c_scale, r->c_scale, MPFR_RNDN);
    for (i = 0; i < R; i++) {
        mpfr_t *v = y + (size_t)i * w;
        for (j = 0; j < w; j++) {
            if (o->transpose)
                mpfr_mul(v[j], x[(size_t)i * w + j], sg[j], MPFR_RNDN);
            else
                mpfr_set(v[j], x[(size_t)i * w + j], MPFR_RNDN);
        }
        if (o->regular)
            cic_mp_fwht_regular_row(v, w, cic_regular_order_k(w), o->transpose, acc, r->t0);
        else
            cic_mp_fwht_row(v, w, K, hk, o->transpose, acc, r->t0);
        for (j = 0; j < w; j++) {
            if (!o->transpose)
                mpfr_mul(v[j], v[j], sg[j], MPFR_RNDN);
            mpfr_mul(v[j], v[j], r->c_scale, MPFR_RNDN);
        }
    }
    cic_mpvec_destroy(acc, (size_t)na);
    free(hk);
    return 0;
}

int _cic_mpk_norm(mprun *r, const cic_op *o, mpfr_t *y)
{
    const mpfr_t *x = wsrc(r, o->in[0]);
    const mpfr_t *g = o->g >= 0 ? wsrc(r, o->g) : NULL;
    const mpfr_t *b = o->b >= 0 ? wsrc(r, o->b) : NULL;
    int d = r->m->t[o->in[0]].cols, i, j, R = rows_of(r, o->in[0]);
    mpfr_ptr mean = r->t0, var = r->t1;
    if (!x || (o->g >= 0 && !g) || (o->b >= 0 && !b))
        return -1;
    for (i = 0; i < R; i++) {
        const mpfr_t *xr = x + (size_t)i * d;
        mpfr_t *yr = y + (size_t)i * d;
        if (o->center) {
            for (j = 0; j < d; j++)
                r->ptr[j] = (mpfr_ptr)xr[j];
            mpfr_sum(mean, r->ptr, (unsigned long)d, MPFR_RNDN);
            mpfr_div_ui(mean, mean, (unsigned long)d, MPFR_RNDN);
            for (j = 0; j < d; j++)
                mpfr_sub(yr[j], xr[j], mean, MPFR_RNDN);
        } else {
            for (j = 0; j < d; j++)
                mpfr_set(yr[j], xr[j], MPFR_RNDN);
        }
        cic_mp_dot(var, (const mpfr_t *)yr, 1, (const mpfr_t *)yr, 1, (size_t)d,
                   NULL, &r->dot);
        mpfr_div_ui(var, var, (unsigned long)d, MPFR_RNDN);
        mpfr_add_d(var, var, (double)o->eps, MPFR_RNDN);
        mpfr_rec_sqrt(var, var, MPFR_RNDN); /* rstd */
        for (j = 0; j < d; j++) {
            mpfr_mul(yr[j], yr[j], var, MPFR_RNDN);
            if (g)
                mpfr_mul(yr[j], yr[j], g[j], MPFR_RNDN);
            if (b)
                mpfr_add(yr[j], yr[j], b[j], MPFR_RNDN);
        }
    }
    return 0;
}

/* y = act(x) at prec, the same formula as the real engines. */
typedef struct {
    const mpfr_t *a, *b; /* b: the GLU's second factor, or NULL */
    mpfr_t *y;
    enum cic_act act;
    const cic_mp_act_consts *k;
} act_job;

static void act_elems(void *c, int lo, int hi, mpws *w)
{
    const act_job *J = c;
    int j;
    for (j = lo; j < hi; j++) {
        cic_mp_act(J->act, J->y[j], J->a[j], w->t2, J->k, &w->fn);
        if (J->b)
            mpfr_mul(J->y[j], J->y[j], J->b[j], MPFR_RNDN);
    }
}

/* ACT and GLU: y = act(a) (* b), elementwise, split over the threads. */
static int act_run(mprun *r, const cic_op *o, mpfr_t *y, bool glu)
{
    act_job J;
    cic_mp_act_consts k;
    size_t cnt = (size_t)rows_of(r, o->out) * r->m->t[o->out].cols;
    J.a = wsrc(r, o->in[0]);
    J.b = glu ? wsrc(r, o->in[1]) : NULL;
    if (!J.a || (glu && !J.b))
        return -1;
    J.y = y;
    J.act = o->act;
    cic_mp_act_consts_init(&k, o->act, r->prec);
    J.k = &k;
    parallel(r, (int)cnt, act_elems, &J);
    cic_mp_act_consts_clear(&k);
    return 0;
}

int _cic_mpk_act(mprun *r, const cic_op *o, mpfr_t *y)
{
    return act_run(r, o, y, false);
}

int _cic_mpk_glu(mprun *r, const cic_op *o, mpfr_t *y)
{
    return act_run(r, o, y, true);
}

int _cic_mpk_add(mprun *r, const cic_op *o, mpfr_t *y)
{
    const mpfr_t *a = wsrc(r, o->in[0]), *b = wsrc(r, o->in[1]);
    size_t j, cnt = (size_t)rows_of(r, o->out) * r->m->t[o->out].cols;
    if (!a || !b)
        return -1;
    for (j = 0; j < cnt; j++)
        mpfr_add(y[j], a[j], b[j], MPFR_RNDN);
    return 0;
}

/* ---- rotary position embedding ---- */

typedef struct {
    const mpfr_t *x, *cs; /* cs: cos, sin of (position, frequency), as real_rope_table */
    mpfr_t *y;
    int N, w, hd, rd, heads; /* rd: the dims of each head rotated (o->rot or hd) */
    bool interleaved;
} rope_job;

/* Rows lo .. hi-1: each pair (a, b) -> (a c - b s, b c + a s), each
 * correctly rounded as a whole (mpfr_fmms, mpfr_fmma); a, b copied first
 * (y may be x). */
static void rope_rows(void *c, int lo, int hi, mpws *w)
{
    const rope_job *J = c;
    int i, h, j, half = J->rd / 2, step = J->interleaved ? 2 : 1;
    int off = J->interleaved ? 1 : half;
    for (i = lo; i < hi; i++) {
        const mpfr_t *t = J->cs + (size_t)(i % J->N) * J->rd;
        for (h = 0; h < J->heads; h++) {
            for (j = 0; j < half; j++) {
                size_t ia = (size_t)i * J->w + h * J->hd + step * j, ib = ia + off;
                mpfr_set(w->t0, J->x[ia], MPFR_RNDN);
                mpfr_set(w->t1, J->x[ib], MPFR_RNDN);
                mpfr_fmms(J->y[ia], w->t0, t[2 * j], w->t1, t[2 * j + 1], MPFR_RNDN);
                mpfr_fmma(J->y[ib], w->t1, t[2 * j], w->t0, t[2 * j + 1], MPFR_RNDN);
            }
            for (j = J->rd; j < J->hd; j++) { /* partial rope: the rest as it is */
                size_t ia = (size_t)i * J->w + h * J->hd + j;
                mpfr_set(J->y[ia], J->x[ia], MPFR_RNDN);
            }
        }
    }
}

/* RoPE at prec: the cos and sin table (cic_mp_rope_table), then the pairs
 * as the real engines rotate them. */
int _cic_mpk_rope(mprun *r, const cic_op *o, mpfr_t *y)
{
    const cic_model *m = r->m;
    rope_job J;
    size_t n;
    J.x = wsrc(r, o->in[0]);
    if (!J.x)
        return -1;
    J.y = y;
    J.N = m->cfg.tokens;
    J.w = m->t[o->out].cols;
    J.heads = o->heads;
    J.hd = J.w / o->heads;
    J.rd = o->rot ? o->rot : J.hd;
    J.interleaved = o->rope == CIC_ROPE_INTERLEAVED;
    n = (size_t)J.N * J.rd;
    J.cs = cic_mpvec_create(n, r->prec);
    if (!J.cs)
        return -1;
    cic_mp_rope_table((mpfr_t *)J.cs, J.N, J.rd, o->theta, r->prec);
    if (r->ball && cic_ball_rope(r->ball, o, J.cs, J.x) < 0) {
        cic_mpvec_destroy((mpfr_t *)J.cs, n);
        return -1;
    }
    parallel(r, r->rows, rope_rows, &J);
    cic_mpvec_destroy((mpfr_t *)J.cs, n);
    return 0;
}
