/* SPDX-License-Identifier: MIT */
/* rotate_heads.c: the per-head rotation of the values (QuaRot / SpinQuant
 * R2, kind "rotate-heads"). Attention mixes each head's values by its
 * probabilities, a_h = P_h v_h, so an orthogonal Q_h on a head's value
 * columns passes through: v_h Q_h gives a_h Q_h, and the output projection
 * undoes it with its columns of head h times Q_h, since
 * (a_h Q_h)(W_o,h Q_h)^T = a_h W_o,h^T. In weights (row-vector algebra,
 * PyTorch layout, dh = head_dim):
 *   the value rows of head h:     W_v[h] <- Q_h^T W_v[h]   ([dh, d] block)
 *   their bias:                    b_v[h] <- b_v[h] Q_h
 *   the output columns of head h: W_o[:, h] <- W_o[:, h] Q_h ([d, dh] block)
 * With grouped-query attention a value head serves heads / kv_heads query
 * heads, which must then share its Q. Q_g for value head g of layer l:
 * identity, Haar-random or a randomized Hadamard of order dh, seeded by
 * cic_rng_u64(cic_rng_key(seed, "rotate-heads"), l * kv_heads + g).
 * Only weights change: no op and no FLOP is added. Known mistakes
 * "skip-out-proj": the values rotated, the output projection left as it was
 * (broken); "per-query-head": one Q per query head (seeded by l heads + h),
 * the value head taking its first query head's, so with grouped-query
 * attention the other heads of its group undo a Q that was not applied
 * (broken; exact when kv_heads = heads). */
#include "xform.h"

#include "../base/mpvec.h"
#include "../base/rng.h"
#include "qmat.h"
#include "xform_util.h"

#include <string.h>

typedef cic_xf_ctx ctx;

/* The linear that reads tensor t, or -1. */
static int linear_reader(const cic_model *m, int t)
{
    int i;
    for (i = 0; i < m->n_ops; i++)
        if (m->ops[i].kind == CIC_OP_LINEAR && m->ops[i].in[0] == t)
            return i;
    return -1;
}

/* Q_g (dh x dh at c->p) of value head g of layer l. */
static int head_q(ctx *c, mpfr_t *q, const cic_xform_spec *x, int dh, int l, int kv, int g)
{
    uint64_t seed = cic_rng_u64(cic_rng_key(x->q_seed, "rotate-heads"), (uint64_t)l * kv + g);
    switch (x->q) {
    case CIC_Q_RANDOM:
        return cic_q_random(q, dh, seed, c->p);
    case CIC_Q_HADAMARD:
        return cic_q_hadamard_k(q, dh, x->hadamard_base, seed, c->p);
    case CIC_Q_FILE: { /* one matrix for every head and layer */
        cic_diag d;
        return cic_q_file(q, dh, x, c->p, &d);
    }
    default:
        cic_q_identity(q, dh);
        return 0;
    }
}

/* The current values of tensor id as a fresh vector at c->p (to change
 * blocks of, then install). */
mpfr_t *_cic_xf_values_copy(ctx *c, int id)
{
    const cic_tensor *t = &c->m->t[id];
    size_t n = (size_t)t->rows * t->cols, k;
    mpfr_t *tv = NULL, *nv = cic_mpvec_create(n, c->p);
    const mpfr_t *v = _cic_xf_vals(c->m, id, &tv);
    if (!nv || !v) {
        cic_mpvec_destroy(nv, n);
        cic_mpvec_destroy(tv, n);
        return NULL;
    }
    for (k = 0; k < n; k++)
        mpfr_set(nv[k], v[k], MPFR_RNDN);
    cic_mpvec_destroy(tv, n);
    return nv;
}

/* Rows r0 .. r0+dh-1 of w [rows, cols] (values src, written into dst):
 * dst[r0 + i][k] = sum_j Q[j][i] src[r0 + j][k]. */
void _cic_xf_rows_block(ctx *c, mpfr_t *dst, const mpfr_t *src, int cols, int r0,
                        const mpfr_t *q, int dh)
{
    int i, k;
    for (i = 0; i < dh; i++)
        for (k = 0; k < cols; k++)
            cic_mp_dot(dst[(size_t)(r0 + i) * cols + k], src + (size_t)r0 * cols + k,
                       (size_t)cols, q + i, (size_t)dh, (size_t)dh, NULL, &c->dot);
}

/* Columns c0 .. c0+dh-1 of w [rows, cols]: dst[r][c0 + i] = sum_j
 * src[r][c0 + j] Q[j][i]. */
static void cols_block(ctx *c, mpfr_t *dst, const mpfr_t *src, int rows, int cols, int c0,
                       const mpfr_t *q, int dh)
{
    int r, i;
    for (r = 0; r < rows; r++)
        for (i = 0; i < dh; i++)
            cic_mp_dot(dst[(size_t)r * cols + c0 + i], src + (size_t)r * cols + c0, 1,
                       q + i, (size_t)dh, (size_t)dh, NULL, &c->dot);
}

/* One attention op: its value linear's rows (and bias), its output
 * projection's columns, head by head. */
static int rotate_attn(ctx *c, const cic_xform_spec *x, const cic_op *a, mpfr_t *q)
{
    cic_model *m = c->m;
    int H = a->heads, kv = a->kv_heads > 0 ? a->kv_heads : a->heads, d = m->t[a->out].cols;
    int dh = d / H, pv = _cic_xf_producer(m, a->in[2]), po = linear_reader(m, a->out), g, h, rc = -1;
    const cic_op *lv, *lo;
    mpfr_t *wv = NULL, *bv = NULL, *wo = NULL, *sv = NULL, *sb = NULL, *so = NULL;
    CIC_ASSERT(pv >= 0 && po >= 0 && m->ops[pv].kind == CIC_OP_LINEAR);
    lv = &m->ops[pv];
    lo = &m->ops[po];
    wv = _cic_xf_values_copy(c, lv->w);
    sv = _cic_xf_values_copy(c, lv->w);
    wo = _cic_xf_values_copy(c, lo->w);
    so = _cic_xf_values_copy(c, lo->w);
    if (lv->b >= 0) {
        bv = _cic_xf_values_copy(c, lv->b);
        sb = _cic_xf_values_copy(c, lv->b);
    }
    if (!wv || !sv || !wo || !so || (lv->b >= 0 && (!bv || !sb)))
        goto cleanup;
    for (g = 0; g < kv; g++) {
        int r0 = a->in_col[2] + g * dh;
        if ((x->mistake == CIC_MISTAKE_PER_QUERY_HEAD
                 ? head_q(c, q, x, dh, a->layer, H, g * (H / kv))
                 : head_q(c, q, x, dh, a->layer, kv, g)) < 0)
            goto cleanup;
        _cic_xf_rows_block(c, wv, sv, m->t[lv->w].cols, r0, q, dh);
        if (bv)
            cols_block(c, bv, sb, 1, m->t[lv->b].cols, r0, q, dh);
        for (h = g * (H / kv); h < (g + 1) * (H / kv); h++) {
            if (x->mistake == CIC_MISTAKE_SKIP_OUT_PROJ)
                continue;
            /* the mistake per-query-head: each query head's own Q on its
             * o_proj columns (the value head took its first head's) */
            if (x->mistake == CIC_MISTAKE_PER_QUERY_HEAD &&
                head_q(c, q, x, dh, a->layer, H, h) < 0)
                goto cleanup;
            cols_block(c, wo, so, m->t[lo->w].rows, m->t[lo->w].cols, h * dh, q, dh);
        }
    }
    _cic_xf_install(m, lv->w, wv, c->p);
    _cic_xf_install(m, lo->w, wo, c->p);
    wv = wo = NULL;
    if (bv) {
        _cic_xf_install(m, lv->b, bv, c->p);
        bv = NULL;
    }
    rc = 0;
cleanup:
#define FREE_T(p, id) cic_mpvec_destroy(p, (size_t)m->t[id].rows * m->t[id].cols)
    FREE_T(wv, lv->w);
    FREE_T(sv, lv->w);
    FREE_T(wo, lo->w);
    FREE_T(so, lo->w);
    if (lv->b >= 0) {
        FREE_T(bv, lv->b);
        FREE_T(sb, lv->b);
    }
#undef FREE_T
    return rc;
}

int _cic_xf_rotate_heads(ctx *c, const cic_xform_spec *x)
{
    cic_model *m = c->m;
    int i, dh = _cic_xf_head_dim(m), rc = 0;
    mpfr_t *q;
    if (dh == 0)
        return 0;
    q = cic_mpvec_create((size_t)dh * dh, c->p);
    if (!q)
        return -1;
    for (i = 0; i < m->n_ops && rc == 0; i++)
        if (m->ops[i].kind == CIC_OP_ATTN)
            rc = rotate_attn(c, x, &m->ops[i], q);
    cic_mpvec_destroy(q, (size_t)dh * dh);
    return rc;
}
