/* SPDX-License-Identifier: MIT */
/* kind_rotate.c: rotation of the residual stream (kind "rotate", R1;
 * DESIGN.md section 5), on folded or unfolded LayerNorm and RMSNorm
 * blocks: every reader's weight W Q, every writer's Q^T W and b Q, the
 * block input X Q, and for the residual readout the map back. Q: identity,
 * Haar random, a (randomized) Hadamard, a regular Hadamard or a matrix from
 * a file. Known mistake "skip-attn-out": the attention writers left
 * unrotated (broken). */
#include "xform.h"

#include "../base/mpgemm.h"
#include "../base/mpvec.h"
#include "qmat.h"
#include "xform_util.h"

#include <stdlib.h>
#include <string.h>

/* Its known mistake, by number (cic_xform_spec.mistake; .mistakes below). */
enum { SKIP_ATTN_OUT = 1 };

#define rotate_right _cic_xf_rotate_right

typedef cic_xf_ctx ctx;

/* Rotation x's Q of the stream (order d) into q: MPFR at c->p, with
 * c->blas doubles too (c->qd: the products through dgemm), a Hadamard Q
 * through dgemm as doubles alone (16 M MPFR numbers at d 4096, never read;
 * _cic_xf_aq_mp makes them if the readout needs them). A Hadamard Q not
 * through dgemm is *hq alone: the weights become recipes (lazy.h) or take
 * the exact fast transform (fwht_w.h); readout_q makes the MPFR Q if the
 * readout needs it. */
static int rotation_q(ctx *c, const cic_xform_spec *x, cic_xf_aq *q, cic_xf_hq *hq)
{
    int d = c->m->cfg.d_model;
    size_t dd = (size_t)d * d, k;
    cic_diag dg;
    q->d = d;
    q->p = c->p;
    if (c->blas && x->q == CIC_Q_HADAMARD) {
        q->f64 = cic_model_array_alloc(dd, sizeof *q->f64, false);
        c->qd = q->f64;
        c->qd_n = d;
        return q->f64 ? cic_q_hadamard_k_f64(q->f64, d, x->hadamard_base, x->q_seed) : -1;
    }
    if (x->q == CIC_Q_HADAMARD) {
        if (!cic_q_hadamard_k_supported(d, x->hadamard_base))
            return -1;
        hq->d = d;
        hq->K = cic_hadamard_base_order_k(d, x->hadamard_base);
        hq->sign = cic_calloc((size_t)d, 1);
        if (!hq->sign || cic_hadamard_base_k(&hq->hk, x->hadamard_base, d) < 0)
            return -1;
        cic_q_hadamard_signs(hq->sign, d, x->q_seed);
        c->hq = hq;
        return 0;
    }
    if (!(q->mp = cic_mpvec_create(dd, c->p)))
        return -1;
    switch (x->q) {
    case CIC_Q_RANDOM:
        if (cic_q_random(q->mp, d, x->q_seed, c->p) < 0)
            return -1;
        break;
    case CIC_Q_REGULAR:
        if (cic_q_regular_hadamard(q->mp, d, x->q_seed, c->p) < 0)
            return -1;
        break;
    case CIC_Q_FILE:
        if (cic_q_file(q->mp, d, "d_model", x, c->p, &dg) < 0) /* checked by cic_xform_check */
            return -1;
        break;
    default:
        cic_q_identity(q->mp, d);
        break;
    }
    if (c->blas) { /* the products by Q in double, kept as doubles */
        if (!(q->f64 = cic_model_array_alloc(dd, sizeof *q->f64, false)))
            return -1;
        for (k = 0; k < dd; k++)
            q->f64[k] = mpfr_get_d(q->mp[k], MPFR_RNDN);
        c->qd = q->f64;
        c->qd_n = d;
    }
    return 0;
}

/* Every reader's weight W Q, every writer's Q^T W and b Q (but the
 * attention writers with the mistake skip-attn-out), the input X Q. q->mp
 * may be NULL when the products go through dgemm (c->qd). */
static int rotate_weights(ctx *c, const cic_xform_spec *x, const cic_xf_aq *q)
{
    cic_model *m = c->m;
    const mpfr_t *qm = (const mpfr_t *)q->mp;
    int d = q->d, i;
    for (i = 0; i < m->n_ops; i++) {
        cic_op *o = &m->ops[i];
        if (o->kind != CIC_OP_LINEAR)
            continue;
        if (o->role == CIC_ROLE_READER && rotate_right(c, o->w, qm, d) < 0)
            return -1;
        if (o->role == CIC_ROLE_WRITER) {
            if (x->mistake == SKIP_ATTN_OUT && o->site == CIC_SITE_ATTN)
                continue;
            if (_cic_xf_rotate_writer(c, o->w, false, qm, d) < 0 ||
                (o->b >= 0 && _cic_xf_rotate_writer(c, o->b, true, qm, d) < 0))
                return -1;
        }
    }
    return rotate_right(c, m->input, qm, d);
}

/* The readout map accumulates, X' = X Q_old Q: kept only for the residual
 * readout (a head readout is in the original basis already); q's MPFR
 * values (made here for a Hadamard held as c->hq) may pass to the
 * model. */
static int readout_q(ctx *c, const cic_xform_spec *x, cic_xf_aq *q)
{
    cic_model *m = c->m;
    int d = q->d, i, k;
    size_t dd = (size_t)d * d;
    mpfr_prec_t op = m->out_q_prec > c->p ? m->out_q_prec : c->p;
    const mpfr_t *qm;
    mpfr_t *nq;
    if (m->output != m->residual)
        return 0;
    if (!q->mp && !q->f64 &&
        (!(q->mp = cic_mpvec_create(dd, c->p)) ||
         cic_q_hadamard_k(q->mp, d, x->hadamard_base, x->q_seed, c->p) < 0))
        return -1;
    if (!(qm = _cic_xf_aq_mp(q)))
        return -1;
    if (!m->out_q) {
        m->out_q = q->mp;
        m->out_q_prec = c->p;
        q->mp = NULL;
        return 0;
    }
    if (!(nq = cic_mpvec_create(dd, op)))
        return -1;
    for (i = 0; i < d; i++)
        for (k = 0; k < d; k++)
            cic_mp_dot(nq[(size_t)i * d + k], (const mpfr_t *)m->out_q + (size_t)i * d, 1,
                       qm + k, (size_t)d, (size_t)d, NULL, &c->dot);
    cic_mpvec_destroy(m->out_q, dd);
    m->out_q = nq;
    m->out_q_prec = op;
    return 0;
}

/* The stream's rotation as doubles for any readout, X' = X Q_old Q
 * (cic_model.stream_q: the per-block errors map back with it); before
 * readout_q, which may take q's MPFR values. */
static int stream_q(ctx *c, const cic_xform_spec *x, const cic_xf_aq *q)
{
    cic_model *m = c->m;
    size_t dd = (size_t)q->d * q->d, k;
    double *qd = malloc(dd * sizeof *qd), *nq;
    if (!qd)
        return -1;
    if (!q->f64 && !q->mp) { /* a Hadamard Q held as its base and signs */
        if (cic_q_hadamard_k_f64(qd, q->d, x->hadamard_base, x->q_seed) < 0) {
            free(qd);
            return -1;
        }
    }
    for (k = 0; (q->f64 || q->mp) && k < dd; k++)
        qd[k] = q->f64 ? q->f64[k] : mpfr_get_d(q->mp[k], MPFR_RNDN);
    if (m->stream_q) {
        if (!(nq = malloc(dd * sizeof *nq))) {
            free(qd);
            return -1;
        }
        cic_gemm_f64(nq, m->stream_q, false, qd, false, q->d, q->d, q->d);
        free(qd);
        free(m->stream_q);
        qd = nq;
    }
    m->stream_q = qd;
    return 0;
}

static int do_rotate(ctx *c, const cic_xform_spec *x)
{
    cic_xf_aq q;
    cic_xf_hq hq = { 0, 0, NULL, NULL };
    int rc = -1;
    memset(&q, 0, sizeof q);
    if (rotation_q(c, x, &q, &hq) == 0 && rotate_weights(c, x, &q) == 0 &&
        stream_q(c, x, &q) == 0 && readout_q(c, x, &q) == 0)
        rc = 0;
    c->hq = NULL;
    c->qd = NULL;
    free(hq.hk);
    free(hq.sign);
    _cic_xf_aq_clear(&q);
    return rc;
}

static int apply(ctx *c, const cic_xform_spec *x)
{
    return do_rotate(c, x);
}

/* A Hadamard Q not through dgemm keeps the weights as recipes; through
 * dgemm the products are doubles. */
static void memory(cic_xform_mem *mm, const cic_xform_spec *x)
{
    mm->lazy = x->q == CIC_Q_HADAMARD && x->prec != CIC_TPREC_F64_BLAS ? CIC_XLAZY_ROTATED
                                                                        : CIC_XLAZY_NONE;
    mm->doubles = true;
}

const cic_xform_desc cic_xform_rotate = {
    .name = "rotate",
    .alias = "R1",
    .family = CIC_XFAM_ROTATION,
    .norms = 1u << CIC_NORM_LAYERNORM | 1u << CIC_NORM_RMSNORM,
    .keys = CIC_XKEY_Q | CIC_XKEY_AFTER | CIC_XKEY_MISTAKE,
    .q_kinds = CIC_XQ_PLAIN | CIC_XQ(CIC_Q_REGULAR) | CIC_XQ(CIC_Q_FILE),
    .q_widths = CIC_XW_MODEL,
    .mistakes = {[SKIP_ATTN_OUT - 1] = "skip-attn-out"}, /* attention writers unrotated */
    .apply = apply,
    .memory = memory,
};
