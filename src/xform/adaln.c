/* SPDX-License-Identifier: MIT */
/* adaln.c: the adaLN (dit) rotation strategies of DESIGN.md section 3.
 *
 * Each strategy's graph is the original dit graph rewritten
 * (adaln_graph.c); this file fills what the graph leaves to the transform,
 * at the transform precision, finding every weight through the graph (op
 * kinds, sites and linear roles), never by tensor name:
 *   - the rotation Q of the stream (random, Hadamard, identity; or a
 *     mean-preserving Q with Q 1 = 1 for stream = "mean-preserving"), as
 *     dense tensors (rot.q = Q for x Q^T, rot.qT = Q^T for x Q) or, for the
 *     fast variants, the +-1 signs of the randomized Hadamard (rot.signs);
 *   - the rotated block input: X C Q (centered stream) or X Q;
 *   - static-fold: every reader and writer folded for the calibration
 *     sample's modulation (fold.h), computed here in MPFR;
 *   - branch-rotate: every linear's weight rotated to read a rotated input
 *     (W Q_in), with Q_in of order d or d_mlp. */
#include "xform.h"

#include "../base/mpvec.h"
#include "adaln_graph.h"
#include "fold.h"
#include "qmat.h"
#include "xform_util.h"

#include <string.h>

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

/* Tensor id := Q (transpose false) or Q^T, unrounded at p. */
static int set_q(cic_model *m, int id, const mpfr_t *q, int d, bool transpose, mpfr_prec_t p)
{
    mpfr_t *v = cic_mpvec_create((size_t)d * d, p);
    int i, j;
    if (!v)
        return -1;
    for (i = 0; i < d; i++)
        for (j = 0; j < d; j++)
            mpfr_set(v[(size_t)i * d + j], transpose ? q[(size_t)j * d + i] : q[(size_t)i * d + j],
                     MPFR_RNDN);
    _cic_xf_install(m, id, v, p);
    return 0;
}

/* The +-1 signs of a randomized Hadamard Q = H diag(s) / sqrt(d): row 0 of
 * H is all ones, so s_j is the sign of Q[0][j]. */
/* The signs s of a fast Q = H diag(s) / sqrt(d) from its row 0: H's row 0
 * is all +1 (normalized bases), the regular Hadamard's is D_c. */
static void set_signs(cic_model *m, int id, const mpfr_t *q, int d, bool regular)
{
    int j, k = regular ? cic_regular_order_k(d) : 0;
    for (j = 0; j < d; j++) {
        int s = mpfr_signbit(q[j]) ? -1 : 1;
        if (regular)
            s *= cic_regular_dc(j, k);
        m->t[id].f32[j] = (float)s;
    }
}

/* Tensor id := the transpose of Q's first [G, G] diagonal block (Q [w, w]
 * block-diagonal), unrounded at p. */
static int set_q_block(cic_model *m, int id, const mpfr_t *q, int w, int G, mpfr_prec_t p)
{
    mpfr_t *v = cic_mpvec_create((size_t)G * G, p);
    int i, j;
    if (!v)
        return -1;
    for (i = 0; i < G; i++)
        for (j = 0; j < G; j++)
            mpfr_set(v[(size_t)i * G + j], q[(size_t)j * w + i], MPFR_RNDN);
    _cic_xf_install(m, id, v, p);
    return 0;
}

/* The calibration sample's modulation: SiLU(c0) W^T + b, [rows of W]. */
static int modulation(mpfr_t *out, const cic_model *m, int w, int b, int sample,
                      cic_fold_ws *ws)
{
    int dc = m->cfg.d_cond, j, n = m->t[w].rows;
    mpfr_t *tw = NULL, *tb = NULL, *sc = cic_mpvec_create((size_t)dc, ws->prec), t;
    const mpfr_t *wv = _cic_xf_vals(m, w, &tw), *bv = _cic_xf_vals(m, b, &tb);
    const float *c = m->t[m->cond].f32 + (size_t)sample * dc;
    int rc = -1;
    if (!sc || !wv || !bv)
        goto done;
    mpfr_init2(t, ws->prec);
    for (j = 0; j < dc; j++) { /* silu(x) = x / (1 + exp(-x)), as the engines */
        mpfr_set_flt(t, -c[j], MPFR_RNDN);
        mpfr_exp(t, t, MPFR_RNDN);
        mpfr_add_ui(t, t, 1, MPFR_RNDN);
        mpfr_set_flt(sc[j], c[j], MPFR_RNDN);
        mpfr_div(sc[j], sc[j], t, MPFR_RNDN);
    }
    mpfr_clear(t);
    for (j = 0; j < n; j++)
        cic_mp_dot(out[j], wv + (size_t)j * dc, 1, (const mpfr_t *)sc, 1, (size_t)dc, bv[j],
                   &ws->dot);
    rc = 0;
done:
    cic_mpvec_destroy(sc, (size_t)dc);
    cic_mpvec_destroy(tw, (size_t)n * dc);
    cic_mpvec_destroy(tb, (size_t)n);
    return rc;
}

/* Fold one reader (in) or writer (out) of a static-fold model in place:
 * weight w and bias b (tensor ids). */
static int fold_static(cic_model *m, int w, int b, bool reader, const mpfr_t *shift_or_gate,
                       const mpfr_t *scale, const mpfr_t *q, bool center, cic_fold_ws *ws)
{
    int rows, cols, rc = -1;
    mpfr_t *tw = NULL, *tb = NULL, *nw = NULL, *nb = NULL;
    const mpfr_t *wv, *bv;
    CIC_ASSERT(w >= 0 && b >= 0);
    rows = m->t[w].rows;
    cols = m->t[w].cols;
    wv = _cic_xf_vals(m, w, &tw);
    bv = _cic_xf_vals(m, b, &tb);
    nw = cic_mpvec_create((size_t)rows * cols, ws->prec);
    nb = cic_mpvec_create((size_t)rows, ws->prec);
    if (!wv || !bv || !nw || !nb)
        goto done;
    if (reader) {
        cic_fold_in_w(nw, wv, rows, cols, scale, q, ws);
        cic_fold_in_b(nb, wv, bv, rows, cols, shift_or_gate, ws);
    } else {
        cic_fold_out_w(nw, wv, rows, cols, shift_or_gate, q, center, ws);
        cic_fold_out_b(nb, bv, rows, shift_or_gate, q, center, ws);
    }
    _cic_xf_install(m, w, nw, ws->prec);
    _cic_xf_install(m, b, nb, ws->prec);
    nw = nb = NULL;
    rc = 0;
done:
    cic_mpvec_destroy(tw, (size_t)rows * cols);
    cic_mpvec_destroy(tb, (size_t)rows);
    cic_mpvec_destroy(nw, (size_t)rows * cols);
    cic_mpvec_destroy(nb, (size_t)rows);
    return rc;
}

/* The op of the original graph that reads tensor t, or -1. */
static int reader_of(const cic_model *g, int t)
{
    int i, k;
    for (i = 0; i < g->n_ops; i++)
        for (k = 0; k < 3; k++)
            if (g->ops[i].in[k] == t)
                return i;
    return -1;
}

/* The calibration modulation of the adaLN linear writing tensor mod (its
 * weight and bias), into *cur, computed once per such tensor. */
static int calibration_mod(mpfr_t *cur, int *cur_id, const cic_model *orig, const cic_model *m,
                           int mod, int sample, cic_fold_ws *ws)
{
    int pi = _cic_xf_producer(orig, mod);
    if (mod == *cur_id)
        return 0;
    CIC_ASSERT(pi >= 0 && orig->ops[pi].kind == CIC_OP_LINEAR && orig->ops[pi].site == CIC_SITE_MOD);
    *cur_id = mod;
    return modulation(cur, m, orig->ops[pi].w, orig->ops[pi].b, sample, ws);
}

/* static-fold: every reader fed by a MODULATE and every writer gated by a
 * GATE of the original graph gets the calibration sample's modulation
 * folded in (with Q), found through the graph: the MODULATE's chunks
 * (shift, scale) and the GATE's (gate) are columns of the adaLN linear's
 * output that feeds them. */
static int static_fold(cic_model *m, const cic_model *orig, const cic_xform_spec *x,
                       const mpfr_t *q, bool center, mpfr_prec_t p)
{
    const cic_model_cfg *c = &m->cfg;
    int d = c->d_model, i, cur_id = -1, rc = -1;
    size_t big = (size_t)d * (c->d_mlp > 3 * d ? c->d_mlp : 3 * d);
    mpfr_t *mod = cic_mpvec_create((size_t)6 * d, p);
    cic_fold_ws ws;
    if (!mod || cic_fold_ws_init(&ws, big > (size_t)d * c->d_out ? big : (size_t)d * c->d_out,
                                 (size_t)(c->d_mlp > c->d_cond ? (c->d_mlp > d ? c->d_mlp : d)
                                                               : (c->d_cond > d ? c->d_cond : d)),
                                 p) < 0) {
        cic_mpvec_destroy(mod, (size_t)6 * d);
        return -1;
    }
    ws.blas = x->prec == CIC_TPREC_F64_BLAS;
    for (i = 0; i < orig->n_ops; i++) {
        const cic_op *o = &orig->ops[i];
        int li;
        if (o->kind != CIC_OP_MODULATE && o->kind != CIC_OP_GATE)
            continue;
        if (calibration_mod(mod, &cur_id, orig, m, o->in[1], x->calibration, &ws) < 0)
            goto done;
        if (o->kind == CIC_OP_MODULATE) { /* the reader it feeds: shift, scale */
            li = reader_of(orig, o->out);
            CIC_ASSERT(li >= 0 && orig->ops[li].role == CIC_ROLE_READER);
            if (fold_static(m, orig->ops[li].w, orig->ops[li].b, true, mod + o->in_col[0],
                            mod + o->in_col[1], q, center, &ws) < 0)
                goto done;
        } else { /* the writer it gates: gate */
            li = _cic_xf_producer(orig, o->in[0]);
            CIC_ASSERT(li >= 0 && orig->ops[li].role == CIC_ROLE_WRITER);
            if (fold_static(m, orig->ops[li].w, orig->ops[li].b, false, mod + o->in_col[0],
                            NULL, q, center, &ws) < 0)
                goto done;
        }
    }
    rc = 0;
done:
    cic_fold_ws_clear(&ws);
    cic_mpvec_destroy(mod, (size_t)6 * d);
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

/* branch-rotate: each reader and writer reads x Q_in, so its weight becomes
 * W Q_in (Q of d_mlp for the MLP's writer, which reads the hidden layer). */
static int branch(cic_model *m, const cic_model *orig, const cic_adaln_graph *g,
                  const cic_xform_spec *x, cic_xf_ctx *cx, mpfr_prec_t p)
{
    const cic_model_cfg *c = &m->cfg;
    int d = c->d_model, f = c->d_mlp, i, rc = -1, G = x->group;
    mpfr_t *qd = cic_mpvec_create((size_t)d * d, p), *qm = cic_mpvec_create((size_t)f * f, p);
    if (!qd || !qm || (G > 0 && (block_diag_q(qd, d, G, x, x->q_seed, p) < 0 ||
                                 block_diag_q(qm, f, G, x, x->q_seed + 1, p) < 0)) ||
        (G == 0 && (make_q(qd, d, x, x->q_seed, false, p) < 0 ||
                    make_q(qm, f, x, x->q_seed + 1, false, p) < 0)))
        goto done;
    if (x->fast) { /* group-wise: the first block's signs serve every block */
        set_signs(m, g->bs_d, (const mpfr_t *)qd, G ? G : d, x->q == CIC_Q_REGULAR);
        set_signs(m, g->bs_m, (const mpfr_t *)qm, G ? G : f, x->q == CIC_Q_REGULAR);
    } else if (G > 0) { /* the online linears hold the block: rows 0 .. G-1 */
        if (set_q_block(m, g->bq_d, (const mpfr_t *)qd, d, G, p) < 0 ||
            set_q_block(m, g->bq_m, (const mpfr_t *)qm, f, G, p) < 0)
            goto done;
    } else if (set_q(m, g->bq_d, (const mpfr_t *)qd, d, true, p) < 0 ||
               set_q(m, g->bq_m, (const mpfr_t *)qm, f, true, p) < 0) {
        goto done;
    }
    for (i = 0; i < orig->n_ops; i++) {
        const cic_op *o = &orig->ops[i];
        bool wide = o->site == CIC_SITE_MLP && o->role == CIC_ROLE_WRITER;
        if (o->kind != CIC_OP_LINEAR ||
            (o->role != CIC_ROLE_READER && o->role != CIC_ROLE_WRITER))
            continue;
        if (_cic_xf_rotate_right(cx, o->w, (const mpfr_t *)(wide ? qm : qd), wide ? f : d) < 0)
            goto done;
    }
    rc = 0;
done:
    cic_mpvec_destroy(qd, (size_t)d * d);
    cic_mpvec_destroy(qm, (size_t)f * f);
    return rc;
}

cic_model *cic_adaln_apply(const cic_model *orig, const cic_xform_spec *x,
                           mpfr_prec_t engine_prec, cic_diag *d)
{
    cic_adaln_graph g;
    cic_model *m;
    cic_xf_ctx cx;
    mpfr_prec_t p = cic_xform_prec(x, engine_prec);
    int dm = orig->cfg.d_model, rc = -1;
    size_t dd = (size_t)dm * dm;
    bool mp = x->stream == CIC_STREAM_MEAN_PRESERVING;
    bool centered = !mp;
    mpfr_t *q = NULL;
    memset(&cx, 0, sizeof cx);
    m = cic_adaln_graph_create(orig, x, &g);
    if (!m || _cic_xf_ctx_init(&cx, m, p) < 0)
        goto done;
    cx.blas = x->prec == CIC_TPREC_F64_BLAS;
    if (x->kind == CIC_XFORM_BRANCH_ROTATE) {
        rc = branch(m, orig, &g, x, &cx, p);
        goto done;
    }
    q = cic_mpvec_create(dd, p);
    if (!q || make_q(q, dm, x, x->q_seed, mp, p) < 0)
        goto done;
    switch (x->kind) {
    case CIC_XFORM_ONLINE_UNROTATE:
        if (x->fast)
            set_signs(m, g.signs, (const mpfr_t *)q, dm, x->q == CIC_Q_REGULAR);
        else if (set_q(m, g.q, (const mpfr_t *)q, dm, false, p) < 0 ||
                 set_q(m, g.qt, (const mpfr_t *)q, dm, true, p) < 0)
            goto done;
        break;
    case CIC_XFORM_PER_SAMPLE_FOLD:
        if (set_q(m, g.q, (const mpfr_t *)q, dm, false, p) < 0)
            goto done;
        break;
    case CIC_XFORM_STATIC_FOLD:
        if (static_fold(m, orig, x, (const mpfr_t *)q, centered, p) < 0)
            goto done;
        break;
    default:
        CIC_ASSERT(0 && "adaLN kind");
    }
    /* the stream: X C Q (centered) or X Q (mean-preserving Q) */
    if ((centered && _cic_xf_center(&cx, m->input, 1) < 0) ||
        _cic_xf_rotate_right(&cx, m->input, (const mpfr_t *)q, dm) < 0)
        goto done;
    if (!m->cfg.final_layer) { /* residual readout: map back with Q */
        m->out_q = q;
        m->out_q_prec = p;
        q = NULL;
    }
    rc = 0;
done:
    cic_dot_scratch_clear(&cx.dot);
    cic_mpvec_destroy(q, dd);
    if (rc < 0) {
        cic_diag_set(d, NULL, 0, 0, "transform '%s': out of memory or unsupported size",
                     x->name);
        cic_model_destroy(m);
        return NULL;
    }
    return m;
}
