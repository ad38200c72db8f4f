/* SPDX-License-Identifier: MIT */
/* online_down.c: the online Hadamards of QuaRot / SpinQuant, ops in the
 * graph (counted in FLOPs) with what they need fused into the weights.
 *
 * R3 (kind "online-qk"): per head, q and k (after RoPE, right before
 * attention) through the same randomized Hadamard Q of the head width, an
 * FWHT op on blocks of head_dim: (q_h Q)(k_h Q)^T = q_h k_h^T, so nothing is
 * fused; it is there to make the KV cache quantizable. With grouped-query
 * attention every head uses the same Q. Per layer l, Q from
 * cic_rng_u64(cic_rng_key(seed, "online-qk"), l). Known mistake
 * "before-rope": Q fused into the rows of the q and k projections, so it
 * acts before RoPE, which does not commute with it (exact only without
 * RoPE).
 *
 * R4: the online Hadamard before the MLP's down projection
 * (QuaRot / SpinQuant R4, kind "online-down"). The MLP's hidden activations
 * (the SwiGLU product, the GELU output) cannot be rotated offline: nothing
 * before them is linear in the stream. So the block computes y = x Q online,
 * a fast randomized Hadamard (Q = H diag(s) / sqrt(m) of the MLP width m,
 * an FWHT op in the graph, counted in FLOPs), and the down projection takes
 * the transpose: W' = W Q, since (x Q)(W Q)^T = x W^T. Per layer l, Q from
 * the seed cic_rng_u64(cic_rng_key(seed, "online-down"), l) and the base
 * order (hadamard_base, or the cheapest). Known mistake "skip-online": Q
 * fused into the down projection without the online transform (QuaRot #4:
 * the model collapses), broken. */
#include "xform.h"

#include "../base/mpvec.h"
#include "../base/rng.h"
#include "fwht_w.h"
#include "qmat.h"
#include "xform_util.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef cic_xf_ctx ctx;

/* Insert op o before op i (SSA order kept: o writes a new tensor that only
 * op i, after it, reads). 0, or -1 when memory runs out. */
static int insert_op(cic_model *m, int i, const cic_op *o)
{
    if (cic_model_op_add(m, o) < 0)
        return -1;
    memmove(&m->ops[i + 1], &m->ops[i], (size_t)(m->n_ops - 1 - i) * sizeof *m->ops);
    m->ops[i] = *o;
    return 0;
}

/* The name of the MLP writer's weight without ".weight", plus suffix. */
static void derived_name(char *buf, size_t cap, const char *w, const char *suffix)
{
    size_t n = strlen(w);
    if (n > 7 && !strcmp(w + n - 7, ".weight"))
        n -= 7;
    snprintf(buf, cap, "%.*s%s", (int)(n < 80 ? n : 80), w, suffix);
}

/* The FWHT op and its signs before MLP writer op i (index in m->ops), the
 * writer then reading its output. neg[j]: whether Q[0][j] < 0 (row 0 of H
 * is +1, so Q[0][j] = s_j / sqrt(f)); neg NULL: H itself. */
static int add_online(cic_model *m, int i, const bool *neg, int f, int K)
{
    cic_op o = cic_op_blank(CIC_OP_FWHT, CIC_SITE_MLP, m->ops[i].layer);
    int x = m->ops[i].in[0], s, y, j;
    char n[128];
    derived_name(n, sizeof n, m->t[m->ops[i].w].name, ".online_hadamard.signs");
    s = cic_model_tensor_add(m, n, CIC_T_WEIGHT, 1, f);
    derived_name(n, sizeof n, m->t[m->ops[i].w].name, ".online_hadamard");
    y = s < 0 ? -1 : cic_model_tensor_add(m, n, CIC_T_ACT, m->t[x].rows, f);
    if (y < 0)
        return -1;
    m->t[y].rows_kind = m->t[x].rows_kind;
    for (j = 0; j < f; j++)
        m->t[s].f32[j] = neg && neg[j] ? -1.0f : 1.0f;
    o.in[0] = x;
    o.g = s;
    o.hbase = K;
    o.out = y;
    if (insert_op(m, i, &o) < 0)
        return -1;
    m->ops[i + 1].in[0] = y;
    return 0;
}

/* Q of layer l's down projection (f x f): with c->blas as doubles into qd,
 * else as the Hadamard h (its signs for the layer; hk and K set by the
 * caller), never formed: the product by it is the fast transform with the
 * dense product's bits (fwht_w.h). neg[j] gets the sign of Q[0][j] =
 * hk[0][j / P] s_j r (row 0 of Sylvester is +1). */
static int down_q(ctx *c, const cic_xform_spec *x, int l, int f, cic_xf_hq *h, double *qd,
                  bool *neg)
{
    uint64_t seed = cic_rng_u64(cic_rng_key(x->q_seed, "online-down"), (uint64_t)l);
    int j;
    if (c->blas ? cic_q_hadamard_k_f64(qd, f, x->hadamard_base, seed) < 0
                : cic_q_hadamard_signs(h->sign, f, seed) < 0)
        return -1;
    for (j = 0; j < f; j++)
        neg[j] = c->blas ? qd[j] < 0
                         : cic_hadamard_kron_entry(h->hk, (size_t)h->K, (size_t)(f / h->K), 0,
                                                   (size_t)j) * h->sign[j] < 0;
    return 0;
}

int _cic_xf_online_down(ctx *c, const cic_xform_spec *x)
{
    cic_model *m = c->m;
    int f = m->cfg.d_mlp, i, rc = -1;
    int K = cic_hadamard_base_order_k(f, x->hadamard_base);
    size_t ff = (size_t)f * f;
    cic_xf_hq h = {f, K, NULL, NULL};
    double *qd = c->blas ? cic_model_array_alloc(ff, sizeof *qd, false) : NULL;
    bool *neg = cic_calloc((size_t)f, sizeof *neg);
    if ((c->blas ? !qd
                 : !(h.sign = cic_calloc((size_t)f, 1)) ||
                       cic_hadamard_base_k(&h.hk, x->hadamard_base, f) < 0) ||
        !neg)
        goto cleanup;
    for (i = 0; i < m->n_ops; i++) {
        cic_op *o = &m->ops[i];
        if (o->kind != CIC_OP_LINEAR || o->role != CIC_ROLE_WRITER || o->site != CIC_SITE_MLP)
            continue;
        if (down_q(c, x, o->layer, f, &h, qd, neg) < 0 ||
            (qd ? _cic_xf_rotate_f64(c, o->w, false, qd, f)
                : _cic_xf_rotate_hadamard(c, o->w, &h, false)) < 0)
            goto cleanup;
        if (x->mistake != CIC_ONLINE_DOWN_SKIP_ONLINE) {
            if (add_online(m, i, neg, f, K) < 0)
                goto cleanup;
            i++; /* the writer moved one place on */
        }
    }
    rc = 0;
cleanup:
    free(h.hk);
    free(h.sign);
    free(qd);
    free(neg);
    return rc;
}

/* ---- R3: online Hadamards of q and k (kind online-qk) ---- */

/* The linear whose output reaches tensor t through single-input ops (RoPE),
 * or -1. */
static int origin_linear(const cic_model *m, int t)
{
    int i, hops;
    for (hops = 0; hops < 8 && t >= 0; hops++) {
        if ((i = _cic_xf_producer(m, t)) < 0)
            return -1;
        if (m->ops[i].kind == CIC_OP_LINEAR)
            return i;
        t = m->ops[i].in[0];
    }
    return -1;
}

/* An FWHT op of blocks of dh on tensor t before op i; returns its output
 * tensor (-1: out of memory). */
static int add_block_fwht(cic_model *m, int i, int t, int signs, int dh, int K)
{
    cic_op o = cic_op_blank(CIC_OP_FWHT, CIC_SITE_ATTN, m->ops[i].layer);
    char n[128];
    int y;
    snprintf(n, sizeof n, "%.100s.online_hadamard", m->t[t].name);
    y = cic_model_tensor_add(m, n, CIC_T_ACT, m->t[t].rows, m->t[t].cols);
    if (y < 0)
        return -1;
    m->t[y].rows_kind = m->t[t].rows_kind;
    o.in[0] = t;
    o.g = signs;
    o.group = dh;
    o.hbase = K;
    o.out = y;
    return insert_op(m, i, &o) < 0 ? -1 : y;
}

/* The mistake before-rope: Q per head fused into the rows of the q and k
 * projections, so it acts before RoPE (which does not commute with it). */
static int fuse_before_rope(ctx *c, int lin, const mpfr_t *q, int dh)
{
    cic_model *m = c->m;
    int w = m->ops[lin].w, rows = m->t[w].rows, h;
    size_t n = (size_t)rows * m->t[w].cols;
    mpfr_t *dst = _cic_xf_values_copy(c, w), *src = _cic_xf_values_copy(c, w);
    if (!dst || !src) {
        cic_mpvec_destroy(dst, n);
        cic_mpvec_destroy(src, n);
        return -1;
    }
    for (h = 0; h < rows / dh; h++)
        _cic_xf_rows_block(c, dst, src, m->t[w].cols, h * dh, q, dh);
    _cic_xf_install(m, w, dst, c->p);
    cic_mpvec_destroy(src, n);
    return 0;
}

/* Before attention op i: the signs tensor of layer l (row 0 of q, the Q of
 * the head width dh; q NULL: +1, the plain Hadamard) and an FWHT of blocks
 * of dh on each of its q and k inputs, which it then reads. The op has
 * moved to i + 2. 0, or -1 when memory runs out. */
static int insert_qk(cic_model *m, int i, const mpfr_t *q, int dh, int K)
{
    int tq = m->ops[i].in[0], tk = m->ops[i].in[1], s, yq, yk, j;
    char n[128];
    snprintf(n, sizeof n, "layers.%d.online_qk.signs", m->ops[i].layer);
    s = cic_model_tensor_add(m, n, CIC_T_WEIGHT, 1, dh);
    if (s < 0)
        return -1;
    for (j = 0; j < dh; j++)
        m->t[s].f32[j] = q && mpfr_signbit(q[j]) ? -1.0f : 1.0f;
    yq = add_block_fwht(m, i, tq, s, dh, K);
    yk = yq < 0 ? -1 : add_block_fwht(m, i + 1, tk, s, dh, K);
    if (yk < 0)
        return -1;
    m->ops[i + 2].in[0] = yq;
    m->ops[i + 2].in[1] = yk;
    return 0;
}

/* Attention op i: q and k (whole tensors, one per projection) through the
 * same per-head Q, online after their last op (RoPE) or fused (mistake). */
static int qk_one(ctx *c, const cic_xform_spec *x, int i, mpfr_t *q, int *next)
{
    cic_model *m = c->m;
    const cic_op *a = &m->ops[i];
    int dh = m->t[a->out].cols / a->heads, l = a->layer, tq = a->in[0], tk = a->in[1];
    int K = cic_hadamard_base_order_k(dh, x->hadamard_base);
    uint64_t seed = cic_rng_u64(cic_rng_key(x->q_seed, "online-qk"), (uint64_t)l);
    *next = i + 1;
    if (cic_q_hadamard_k(q, dh, x->hadamard_base, seed, c->p) < 0)
        return -1;
    if (x->mistake == CIC_ONLINE_QK_BEFORE_ROPE) {
        int pq = origin_linear(m, tq), pk = origin_linear(m, tk);
        CIC_ASSERT(pq >= 0 && pk >= 0);
        return fuse_before_rope(c, pq, q, dh) < 0 || fuse_before_rope(c, pk, q, dh) < 0 ? -1 : 0;
    }
    if (insert_qk(m, i, (const mpfr_t *)q, dh, K) < 0)
        return -1;
    *next = i + 3;
    return 0;
}

int _cic_xf_online_qk(ctx *c, const cic_xform_spec *x)
{
    cic_model *m = c->m;
    int i = 0, dh = _cic_xf_head_dim(m), rc = 0;
    mpfr_t *q;
    if (dh == 0)
        return 0;
    q = cic_mpvec_create((size_t)dh * dh, c->p);
    if (!q)
        return -1;
    while (rc == 0 && i < m->n_ops) {
        if (m->ops[i].kind == CIC_OP_ATTN)
            rc = qk_one(c, x, i, q, &i);
        else
            i++;
    }
    cic_mpvec_destroy(q, (size_t)dh * dh);
    return rc;
}

/* ---- the online ops of a rewritten checkpoint (cicheck verify) ---- */

int cic_xform_add_online(cic_model *m, bool down, bool qk)
{
    int i, f = m->cfg.d_mlp, K = cic_hadamard_base_order_k(f, 0);
    for (i = 0; down && i < m->n_ops; i++) {
        const cic_op *o = &m->ops[i];
        if (o->kind != CIC_OP_LINEAR || o->role != CIC_ROLE_WRITER || o->site != CIC_SITE_MLP)
            continue;
        if (K <= 0 || add_online(m, i, NULL, f, K) < 0)
            return -1;
        i++; /* the writer moved one place on */
    }
    for (i = 0; qk && i < m->n_ops; i++) {
        const cic_op *a = &m->ops[i];
        int dh = a->kind == CIC_OP_ATTN ? m->t[a->out].cols / a->heads : 0;
        int Kh = dh ? cic_hadamard_base_order_k(dh, 0) : 0;
        if (a->kind != CIC_OP_ATTN)
            continue;
        if (Kh <= 0 || insert_qk(m, i, NULL, dh, Kh) < 0)
            return -1;
        i += 2; /* attention moved two places on */
    }
    return 0;
}
