/* SPDX-License-Identifier: MIT */
/* adaln.c: the adaLN (dit) rotation strategies of DESIGN.md section 3.
 *
 * Each strategy's graph is the original dit graph rewritten
 * (adaln_graph.c); which parts a strategy has is its descriptor's
 * (cic_adaln_strategy: a static fold, branch rotations, or the rotation
 * tensors of its graph), never its kind. This file fills what the graph
 * leaves to the transform, at the transform precision, finding every
 * weight through the graph (op kinds, sites and linear roles), never by
 * tensor name:
 *   - the rotation Q of the stream (random, Hadamard, identity; or a
 *     mean-preserving Q with Q 1 = 1 for stream = "mean-preserving"), as
 *     dense tensors (rot.q = Q for x Q^T, rot.qT = Q^T for x Q) or, for the
 *     fast variants, the +-1 signs of the randomized Hadamard (rot.signs);
 *   - the rotated block input: X C Q (centered stream) or X Q;
 *   - static-fold: every reader and writer folded for the calibration
 *     sample's modulation (adaln_fold.c);
 *   - branch-rotate: every linear's weight rotated to read a rotated input
 *     (W Q_in), with Q_in of order d or d_mlp.
 * With transform precision f64-openblas Q is made as doubles (the values
 * of Q at 53 bits) and every product by it is a dgemm whose doubles are
 * kept (model.h): at d 1152 and an MLP of 4608 the MPFR form of the MLP's
 * Q alone would be 21 M numbers. */
#include "xform.h"

#include "../base/mpvec.h"
#include "adaln_graph.h"
#include "qmat.h"
#include "xform_util.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Whether a strategy computed through dgemm holds Q as doubles (the
 * default); with the run's adaln_q_mpfr (base/rt.h), Q is MPFR at 53 bits
 * and the products cic_mp_matmul's through dgemm, kept as MPFR numbers:
 * the same bits, slower. For the tests, which compare the two. */
static bool q_doubles(const cic_xf_ctx *cx)
{
    return cx->blas && !(cx->m->rt && cx->m->rt->adaln_q_mpfr);
}

/* Q (d x d at p bits) for a strategy: mean-preserving or plain; a Hadamard
 * Q with the spec's base order (0: automatic) at every width d it builds. */
static int make_q(mpfr_t *q, int d, const cic_xform_spec *x, uint64_t seed, bool mp,
                  mpfr_prec_t p)
{
    if (mp)
        return cic_q_mean_preserving_k(q, d, x->q, x->hadamard_base, seed, p);
    switch (x->q) {
    case CIC_Q_RANDOM:
        return cic_q_random(q, d, seed, p);
    case CIC_Q_HADAMARD:
        return cic_q_hadamard_k(q, d, x->hadamard_base, seed, p);
    case CIC_Q_REGULAR:
        return cic_q_regular_hadamard(q, d, seed, p);
    default:
        cic_q_identity(q, d);
        return 0;
    }
}

/* Q of order d as doubles, its values at 53 bits: a Hadamard Q made so
 * directly (its entries are +-RN(1/sqrt(d)) either way), another kind in
 * MPFR at 53 bits and converted, exactly. */
static int make_q_f64(double *qd, int d, const cic_xform_spec *x, uint64_t seed, bool mp)
{
    size_t n = (size_t)d * d, k;
    mpfr_t *q;
    int rc;
    if (!mp && x->q == CIC_Q_HADAMARD)
        return cic_q_hadamard_k_f64(qd, d, x->hadamard_base, seed);
    if (!(q = cic_mpvec_create(n, 53)))
        return -1;
    rc = make_q(q, d, x, seed, mp, 53);
    for (k = 0; rc == 0 && k < n; k++)
        qd[k] = mpfr_get_d(q[k], MPFR_RNDN);
    cic_mpvec_destroy(q, n);
    return rc;
}

/* Q [w, w] block-diagonal: w / G copies of the Q of order G that make_q
 * builds (group-wise rotation, as ConvRot rotates a DiT's linear inputs;
 * the fast transform applies the same block to each group). */
static int block_diag_q(mpfr_t *q, int w, int G, const cic_xform_spec *x, uint64_t seed,
                        mpfr_prec_t p)
{
    mpfr_t *b = cic_mpvec_create((size_t)G * G, p);
    int i, j;
    if (!b || make_q(b, G, x, seed, false, p) < 0) {
        cic_mpvec_destroy(b, (size_t)G * G);
        return -1;
    }
    for (i = 0; i < w; i++)
        for (j = 0; j < w; j++) {
            mpfr_ptr e = q[(size_t)i * w + j];
            if (i / G != j / G)
                mpfr_set_zero(e, 1);
            else
                mpfr_set(e, b[(size_t)(i % G) * G + j % G], MPFR_RNDN);
        }
    cic_mpvec_destroy(b, (size_t)G * G);
    return 0;
}

/* The same as doubles (q zeroed: the blocks off the diagonal stay +0). */
static int block_diag_f64(double *q, int w, int G, const cic_xform_spec *x, uint64_t seed)
{
    double *b = cic_calloc((size_t)G * G, sizeof *b);
    int i, j;
    if (!b || make_q_f64(b, G, x, seed, false) < 0) {
        free(b);
        return -1;
    }
    for (i = 0; i < w; i++)
        for (j = i / G * G; j < i / G * G + G; j++)
            q[(size_t)i * w + j] = b[(size_t)(i % G) * G + j % G];
    free(b);
    return 0;
}

/* A strategy's Q of order d into q: G > 0 block-diagonal (block_diag_q),
 * else whole; MPFR at p, or with blas doubles (p = 53). 0, or -1. */
static int aq_make(cic_xf_aq *q, int d, int G, const cic_xform_spec *x, uint64_t seed, bool mp,
                   bool blas, mpfr_prec_t p)
{
    size_t n = (size_t)d * d;
    memset(q, 0, sizeof *q);
    q->d = d;
    q->p = p;
    if (!blas) {
        if (!(q->mp = cic_mpvec_create(n, p)))
            return -1;
        return G > 0 ? block_diag_q(q->mp, d, G, x, seed, p) : make_q(q->mp, d, x, seed, mp, p);
    }
    CIC_ASSERT(p == 53);
    if (!(q->f64 = cic_model_array_alloc(n, sizeof *q->f64, true)))
        return -1;
    return G > 0 ? block_diag_f64(q->f64, d, G, x, seed) : make_q_f64(q->f64, d, x, seed, mp);
}

/* Tensor id [rows, d] := its values times Q: through dgemm on doubles,
 * kept as doubles, when Q is held so; else cic_mp_matmul's products. */
static int aq_rotate(cic_xf_ctx *cx, int id, const cic_xf_aq *q)
{
    return q->f64 ? _cic_xf_rotate_f64(cx, id, false, q->f64, q->d)
                  : _cic_xf_rotate_right(cx, id, (const mpfr_t *)q->mp, q->d);
}

/* Tensor id := Q's [n, n] block at the top left (n = d: Q itself), or its
 * transpose, unrounded, held as Q is (MPFR at p, or doubles). */
static int set_block(cic_model *m, int id, const cic_xf_aq *q, int n, bool transpose)
{
    size_t d = (size_t)q->d, nn = (size_t)n * n, i, j;
    double *v = q->f64 ? cic_model_array_alloc(nn, sizeof *v, false) : NULL;
    mpfr_t *w = q->f64 ? NULL : cic_mpvec_create(nn, q->p);
    if (!v && !w)
        return -1;
    for (i = 0; i < (size_t)n; i++)
        for (j = 0; j < (size_t)n; j++) {
            size_t k = transpose ? j * d + i : i * d + j;
            if (v)
                v[i * n + j] = q->f64[k];
            else
                mpfr_set(w[i * n + j], q->mp[k], MPFR_RNDN);
        }
    if (v)
        cic_tensor_set_f64(&m->t[id], v, q->p);
    else
        _cic_xf_install(m, id, w, q->p);
    return 0;
}

/* The signs s of a fast Q = H diag(s) / sqrt(n) from its row 0 (n values:
 * the first block's when Q is block-diagonal): H's row 0 is all +1
 * (normalized bases), the regular Hadamard's is D_c. */
static void set_signs(cic_model *m, int id, const cic_xf_aq *q, int n, bool regular)
{
    int j, k = regular ? cic_regular_order_k(n) : 0;
    for (j = 0; j < n; j++) {
        int s = (q->f64 ? signbit(q->f64[j]) : mpfr_signbit(q->mp[j])) ? -1 : 1;
        if (regular)
            s *= cic_regular_dc(j, k);
        m->t[id].f32[j] = (float)s;
    }
}

/* branch-rotate: each reader and writer reads x Q_in, so its weight becomes
 * W Q_in (Q of d_mlp for the MLP's writer, which reads the hidden layer). */
static int branch(cic_model *m, const cic_model *orig, const cic_adaln_graph *g,
                  const cic_xform_spec *x, cic_xf_ctx *cx, mpfr_prec_t p)
{
    const cic_model_cfg *c = &m->cfg;
    int d = c->d_model, f = c->d_mlp, i, rc = -1, G = x->group;
    bool reg = x->q == CIC_Q_REGULAR;
    cic_xf_aq qd, qm;
    memset(&qm, 0, sizeof qm);
    if (aq_make(&qd, d, G, x, x->q_seed, false, q_doubles(cx), p) < 0 ||
        aq_make(&qm, f, G, x, x->q_seed + 1, false, q_doubles(cx), p) < 0)
        goto done;
    if (x->fast) { /* group-wise: the first block's signs serve every block */
        set_signs(m, g->bs_d, &qd, G ? G : d, reg);
        set_signs(m, g->bs_m, &qm, G ? G : f, reg);
    } else if (set_block(m, g->bq_d, &qd, G ? G : d, true) < 0 ||
               set_block(m, g->bq_m, &qm, G ? G : f, true) < 0) {
        goto done; /* the online linears hold Q^T, or its block (rows 0 .. G-1) */
    }
    for (i = 0; i < orig->n_ops; i++) {
        const cic_op *o = &orig->ops[i];
        bool wide = o->site == CIC_SITE_MLP && o->role == CIC_ROLE_WRITER;
        if (o->kind != CIC_OP_LINEAR ||
            (o->role != CIC_ROLE_READER && o->role != CIC_ROLE_WRITER))
            continue;
        if (aq_rotate(cx, o->w, wide ? &qm : &qd) < 0)
            goto done;
    }
    rc = 0;
done:
    _cic_xf_aq_clear(&qd);
    _cic_xf_aq_clear(&qm);
    return rc;
}

/* The strategy's weights for a Q of the stream: a static fold folds them;
 * else the rotation tensors its graph made (rot.signs; rot.q, then rot.qT)
 * take Q. */
static int stream_q(cic_model *m, const cic_model *orig, const cic_adaln_graph *g,
                    const cic_xform_spec *x, cic_xf_aq *q, bool centered)
{
    CIC_ASSERT(!g->s->branch);
    if (g->s->fold == CIC_ADALN_FOLD_STATIC)
        return _cic_xf_static_fold(m, orig, x, q, centered, q->p);
    if (g->signs >= 0)
        set_signs(m, g->signs, q, q->d, x->q == CIC_Q_REGULAR);
    if (g->q >= 0 && set_block(m, g->q, q, q->d, false) < 0)
        return -1;
    return g->qt >= 0 && set_block(m, g->qt, q, q->d, true) < 0 ? -1 : 0;
}

/* The stream's rotation as doubles (cic_model.stream_q, for the per-block
 * errors), whatever the readout. */
static int stream_q_f64(cic_model *m, const cic_xf_aq *q)
{
    size_t dd = (size_t)q->d * q->d, k;
    if (!(m->stream_q = malloc(dd * sizeof *m->stream_q)))
        return -1;
    for (k = 0; k < dd; k++)
        m->stream_q[k] = q->f64 ? q->f64[k] : mpfr_get_d(q->mp[k], MPFR_RNDN);
    return 0;
}

cic_model *cic_adaln_apply(const cic_model *orig, cic_model *own, const cic_xform_spec *x,
                           const cic_adaln_strategy *s, mpfr_prec_t engine_prec, cic_diag *d)
{
    cic_adaln_graph g;
    cic_model *m;
    cic_xf_ctx cx;
    cic_xf_aq q;
    mpfr_prec_t p = cic_xform_prec(x, engine_prec);
    int rc = -1;
    bool mp = x->stream == CIC_STREAM_MEAN_PRESERVING;
    bool centered = !mp;
    memset(&cx, 0, sizeof cx);
    memset(&q, 0, sizeof q);
    m = cic_adaln_graph_create(orig, own, x, s, &g);
    if (!m || _cic_xf_ctx_init(&cx, m, p) < 0)
        goto done;
    cx.blas = x->prec == CIC_TPREC_F64_BLAS;
    if (s->branch) {
        rc = branch(m, orig, &g, x, &cx, p);
        goto done;
    }
    if (aq_make(&q, orig->cfg.d_model, 0, x, x->q_seed, mp, q_doubles(&cx), p) < 0 ||
        stream_q(m, orig, &g, x, &q, centered) < 0)
        goto done;
    /* the stream: X C Q (centered) or X Q (mean-preserving Q); through
     * dgemm X C in doubles when it rounds as MPFR's */
    if (centered) {
        int cr = q.f64 ? _cic_xf_center_rows_f64(&cx, m->input) : 1;
        if (cr < 0 || (cr > 0 && _cic_xf_center(&cx, m->input, 1) < 0))
            goto done;
    }
    if (aq_rotate(&cx, m->input, &q) < 0 || stream_q_f64(m, &q) < 0)
        goto done;
    if (!m->cfg.final_layer) { /* residual readout: map back with Q */
        if (!_cic_xf_aq_mp(&q))
            goto done;
        m->out_q = q.mp;
        m->out_q_prec = p;
        q.mp = NULL;
    }
    rc = 0;
done:
    _cic_xf_ctx_clear(&cx);
    _cic_xf_aq_clear(&q);
    if (rc < 0) {
        cic_diag_set(d, NULL, 0, 0, "transform '%s': out of memory or unsupported size",
                     x->name);
        cic_model_destroy(m);
        return NULL;
    }
    return m;
}
