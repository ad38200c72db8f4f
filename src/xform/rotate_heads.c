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
#include "fwht_w.h"
#include "qmat.h"
#include "xform_util.h"

#include <cblas.h>
#include <stdlib.h>
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

/* Q_g (dh x dh at c->p) of value head g of layer l; a Hadamard with h
 * (its base set) just as h's signs, Q not formed. */
static int head_q(ctx *c, mpfr_t *q, cic_xf_hq *h, const cic_xform_spec *x, int dh, int l, int kv,
                  int g)
{
    uint64_t seed = cic_rng_u64(cic_rng_key(x->q_seed, "rotate-heads"), (uint64_t)l * kv + g);
    if (h)
        return cic_q_hadamard_signs(h->sign, dh, seed);
    switch (x->q) {
    case CIC_Q_RANDOM:
        return cic_q_random(q, dh, seed, c->p);
    case CIC_Q_HADAMARD:
        return cic_q_hadamard_k(q, dh, x->hadamard_base, seed, c->p);
    case CIC_Q_FILE: { /* one matrix for every head and layer */
        cic_diag d;
        return cic_q_file(q, dh, "head_dim", x, c->p, &d);
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

/* A tensor's values while head blocks of it change: MPFR at c->p, or with
 * c->blas doubles, the products by Q through dgemm (transform precision
 * f64-openblas), installed as doubles (model.h). */
typedef struct {
    mpfr_t *m;
    double *d;
    size_t n;
} head_vals;

static int hv_copy(ctx *c, head_vals *v, int id)
{
    const cic_tensor *t = &c->m->t[id];
    v->n = (size_t)t->rows * t->cols;
    v->m = NULL;
    v->d = NULL;
    if (c->blas)
        return (v->d = cic_tensor_f64_create(t, false)) ? 0 : -1;
    return (v->m = _cic_xf_values_copy(c, id)) ? 0 : -1;
}

static void hv_free(head_vals *v)
{
    cic_mpvec_destroy(v->m, v->n);
    free(v->d);
    v->m = NULL;
    v->d = NULL;
}

static void hv_install(ctx *c, int id, head_vals *v)
{
    if (v->d)
        cic_tensor_set_f64(&c->m->t[id], v->d, c->p);
    else
        _cic_xf_install(c->m, id, v->m, c->p);
    v->m = NULL;
    v->d = NULL;
}

/* Q_g as head_q makes it, and with c->blas also as doubles in qd. */
static int head_q_both(ctx *c, mpfr_t *q, double *qd, cic_xf_hq *h, const cic_xform_spec *x,
                       int dh, int l, int kv, int g)
{
    size_t k;
    if (head_q(c, q, h, x, dh, l, kv, g) < 0)
        return -1;
    for (k = 0; c->blas && k < (size_t)dh * dh; k++)
        qd[k] = mpfr_get_d(q[k], MPFR_RNDN);
    return 0;
}

/* dst rows r0 .. r0+dh-1 := Q^T (those rows of src), [rows, cols]; with h
 * (a Hadamard in MPFR) the fast transform, lines the columns of the block.
 * 0, or -1 when memory runs out. */
static int hv_rows(ctx *c, head_vals *dst, const head_vals *src, int cols, int r0,
                   const mpfr_t *q, const double *qd, const cic_xf_hq *h, int dh)
{
    size_t off = (size_t)r0 * cols;
    if (h)
        return _cic_xf_fwht_lines(dst->m + off, (const mpfr_t *)src->m + off, (size_t)cols, 1,
                                  (size_t)cols, h, c->p, cic_rt_matmul_threads(c->m->rt));
    if (dst->d)
        cblas_dgemm(CblasRowMajor, CblasTrans, CblasNoTrans, dh, cols, dh, 1.0, qd, dh,
                    src->d + off, cols, 0.0, dst->d + off, cols);
    else
        _cic_xf_rows_block(c, dst->m, src->m, cols, r0, q, dh);
    return 0;
}

/* dst columns c0 .. c0+dh-1 := (those columns of src) Q, [rows, cols]
 * (with h: the fast transform, lines the rows). 0, or -1. */
static int hv_cols(ctx *c, head_vals *dst, const head_vals *src, int rows, int cols, int c0,
                   const mpfr_t *q, const double *qd, const cic_xf_hq *h, int dh)
{
    if (h)
        return _cic_xf_fwht_lines(dst->m + c0, (const mpfr_t *)src->m + c0, (size_t)rows,
                                  (size_t)cols, 1, h, c->p, cic_rt_matmul_threads(c->m->rt));
    if (dst->d)
        cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, rows, dh, dh, 1.0, src->d + c0,
                    cols, qd, dh, 0.0, dst->d + c0, cols);
    else
        cols_block(c, dst->m, src->m, rows, cols, c0, q, dh);
    return 0;
}

/* One attention op: its value linear's rows (and bias), its output
 * projection's columns, head by head. */
static int rotate_attn(ctx *c, const cic_xform_spec *x, const cic_op *a, mpfr_t *q, double *qd,
                       cic_xf_hq *hq)
{
    cic_model *m = c->m;
    int H = a->heads, kv = a->kv_heads > 0 ? a->kv_heads : a->heads, d = m->t[a->out].cols;
    int dh = d / H, pv = _cic_xf_producer(m, a->in[2]), po = linear_reader(m, a->out), g, h, rc = -1;
    const cic_op *lv, *lo;
    head_vals wv = {0}, bv = {0}, wo = {0}, sv = {0}, sb = {0}, so = {0};
    CIC_ASSERT(pv >= 0 && po >= 0 && m->ops[pv].kind == CIC_OP_LINEAR);
    lv = &m->ops[pv];
    lo = &m->ops[po];
    if (hv_copy(c, &wv, lv->w) < 0 || hv_copy(c, &sv, lv->w) < 0 || hv_copy(c, &wo, lo->w) < 0 ||
        hv_copy(c, &so, lo->w) < 0 ||
        (lv->b >= 0 && (hv_copy(c, &bv, lv->b) < 0 || hv_copy(c, &sb, lv->b) < 0)))
        goto cleanup;
    for (g = 0; g < kv; g++) {
        int r0 = a->in_col[2] + g * dh;
        if ((x->mistake == CIC_ROTATE_HEADS_PER_QUERY_HEAD
                 ? head_q_both(c, q, qd, hq, x, dh, a->layer, H, g * (H / kv))
                 : head_q_both(c, q, qd, hq, x, dh, a->layer, kv, g)) < 0 ||
            hv_rows(c, &wv, &sv, m->t[lv->w].cols, r0, q, qd, hq, dh) < 0 ||
            (lv->b >= 0 && hv_cols(c, &bv, &sb, 1, m->t[lv->b].cols, r0, q, qd, hq, dh) < 0))
            goto cleanup;
        for (h = g * (H / kv); h < (g + 1) * (H / kv); h++) {
            if (x->mistake == CIC_ROTATE_HEADS_SKIP_OUT_PROJ)
                continue;
            /* the mistake per-query-head: each query head's own Q on its
             * o_proj columns (the value head took its first head's) */
            if ((x->mistake == CIC_ROTATE_HEADS_PER_QUERY_HEAD &&
                 head_q_both(c, q, qd, hq, x, dh, a->layer, H, h) < 0) ||
                hv_cols(c, &wo, &so, m->t[lo->w].rows, m->t[lo->w].cols, h * dh, q, qd, hq,
                        dh) < 0)
                goto cleanup;
        }
    }
    hv_install(c, lv->w, &wv);
    hv_install(c, lo->w, &wo);
    if (lv->b >= 0)
        hv_install(c, lv->b, &bv);
    rc = 0;
cleanup:
    hv_free(&wv);
    hv_free(&sv);
    hv_free(&wo);
    hv_free(&so);
    hv_free(&bv);
    hv_free(&sb);
    return rc;
}

int _cic_xf_rotate_heads(ctx *c, const cic_xform_spec *x)
{
    cic_model *m = c->m;
    int i, dh = _cic_xf_head_dim(m), rc = 0;
    mpfr_t *q;
    double *qd;
    /* a Hadamard in MPFR: the fast transform with the dense product's
     * bits (fwht_w.h), Q never formed */
    bool fast = x->q == CIC_Q_HADAMARD && !c->blas;
    cic_xf_hq h = {dh, 0, NULL, NULL};
    if (dh == 0)
        return 0;
    q = cic_mpvec_create((size_t)dh * dh, c->p);
    qd = cic_calloc((size_t)dh * dh, sizeof *qd);
    rc = q && qd ? 0 : -1;
    if (rc == 0 && fast) {
        h.K = cic_hadamard_base_order_k(dh, x->hadamard_base);
        if (!(h.sign = cic_calloc((size_t)dh, 1)) ||
            cic_hadamard_base_k(&h.hk, x->hadamard_base, dh) < 0)
            rc = -1;
    }
    for (i = 0; i < m->n_ops && rc == 0; i++)
        if (m->ops[i].kind == CIC_OP_ATTN)
            rc = rotate_attn(c, x, &m->ops[i], q, qd, fast ? &h : NULL);
    cic_mpvec_destroy(q, (size_t)dh * dh);
    free(qd);
    free(h.hk);
    free(h.sign);
    return rc;
}
