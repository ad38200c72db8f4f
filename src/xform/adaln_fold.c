/* SPDX-License-Identifier: MIT */
/* adaln_fold.c: static-fold (DESIGN.md section 7): every reader fed by a
 * MODULATE and every writer gated by a GATE of the original dit graph
 * folded once with the calibration sample's modulation and the stream's
 * rotation Q (fold.h), found through the graph, never by tensor name.
 *
 * Workload: a DiT-XL/2 block (d 1152, MLP 4608) with transform precision
 * f64-openblas. There a weight is folded in doubles (cic_fold_in_w_f64,
 * cic_fold_out_w_f64: the same roundings as MPFR's at 53 bits, dgemm's
 * call for the products by Q) and kept as doubles; MPFR values are made
 * for the correctly rounded dot products alone (the modulation, the
 * biases), a row at a time. The MPFR folds serve the other precisions and
 * any weight whose double steps would round otherwise (a product outside
 * double's normal range). */
#include "xform.h"

#include "../base/mpvec.h"
#include "fold.h"
#include "xform_util.h"

#include <stdlib.h>

/* The precision that holds t's current values exactly (float32: 24). */
static mpfr_prec_t vals_prec(const cic_tensor *t)
{
    mpfr_prec_t p = cic_tensor_hp_prec(t);
    return p > 24 ? p : 24;
}

/* Row j of t's current values (_cic_xf_vals's), exact, into dst (t->cols
 * values at vals_prec(t) or more). A dit model's weights are never
 * recipes (adaLN strategies are not applied after other transforms). */
static void row_mp(mpfr_t *dst, const cic_tensor *t, int j)
{
    size_t k, c = (size_t)t->cols, o = (size_t)j * c;
    CIC_ASSERT(!t->lazy);
    for (k = 0; k < c; k++) {
        if (t->hp)
            mpfr_set(dst[k], t->hp[o + k], MPFR_RNDN);
        else if (t->f64)
            mpfr_set_d(dst[k], t->f64[o + k], MPFR_RNDN);
        else
            mpfr_set_flt(dst[k], t->f32[o + k], MPFR_RNDN);
    }
}

typedef struct {
    mpfr_t *out;
    const cic_tensor *w;
    const mpfr_t *v, *b;
    mpfr_prec_t prec;
} dots_job;

/* Rows [lo, hi) of dots_by_row, with a scratch of their own. */
static int dot_rows(void *p, int lo, int hi)
{
    const dots_job *J = p;
    size_t c = (size_t)J->w->cols;
    mpfr_t *row = cic_mpvec_create(c, vals_prec(J->w));
    cic_dot_scratch s;
    int j;
    if (!row || cic_dot_scratch_init(&s, c, J->prec) < 0) {
        cic_mpvec_destroy(row, c);
        return -1;
    }
    for (j = lo; j < hi; j++) {
        row_mp(row, J->w, j);
        cic_mp_dot(J->out[j], (const mpfr_t *)row, 1, J->v, 1, c, J->b ? J->b[j] : NULL, &s);
    }
    cic_dot_scratch_clear(&s);
    cic_mpvec_destroy(row, c);
    return 0;
}

/* out_j = b_j + sum_k W[j, k] v_k for the rows of tensor w (cols = n v
 * values, v and b at most prec bits), each a correctly rounded dot
 * product (cic_fold_in_b's, the modulation's), W's rows made one at a
 * time (the adaLN linear's 8 M weights as MPFR numbers would take 300
 * MB), the rows split over threads threads. 0, or -1. */
static int dots_by_row(mpfr_t *out, const cic_tensor *w, const mpfr_t *v, const mpfr_t *b,
                       mpfr_prec_t prec, int threads)
{
    dots_job J = { out, w, v, b, prec > vals_prec(w) ? prec : vals_prec(w) };
    return _cic_xf_par(w->rows, 4.0 * w->rows * (double)w->cols, threads, dot_rows, &J);
}

/* The calibration sample's modulation: SiLU(c0) W^T + b, [rows of W]. */
static int modulation(mpfr_t *out, const cic_model *m, int w, int b, int sample,
                      cic_fold_ws *ws)
{
    int dc = m->cfg.d_cond, j, n = m->t[w].rows;
    mpfr_t *tb = NULL, *sc = cic_mpvec_create((size_t)dc, ws->prec), t;
    const mpfr_t *bv = _cic_xf_vals(m, b, &tb);
    const float *c = m->t[m->cond].f32 + (size_t)sample * dc;
    int rc = -1;
    if (!sc || !bv)
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
    rc = dots_by_row(out, &m->t[w], (const mpfr_t *)sc, bv, ws->prec, ws->threads);
done:
    cic_mpvec_destroy(sc, (size_t)dc);
    cic_mpvec_destroy(tb, (size_t)n);
    return rc;
}

/* Fold one reader (in) or writer (out) of a static-fold model in place in
 * MPFR: weight w and bias b (tensor ids); ws's matrix scratch holds the
 * weight. */
static int fold_mp_ws(cic_model *m, int w, int b, bool reader, const mpfr_t *shift_or_gate,
                      const mpfr_t *scale, const mpfr_t *q, bool center, cic_fold_ws *ws)
{
    int rows = m->t[w].rows, cols = m->t[w].cols, rc = -1;
    mpfr_t *tw = NULL, *tb = NULL, *nw = NULL, *nb = NULL;
    const mpfr_t *wv = _cic_xf_vals(m, w, &tw), *bv = _cic_xf_vals(m, b, &tb);
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

/* fold_mp_ws, with a workspace of the weight's size when ws's holds
 * vectors only (the doubles' workspace, for a weight that falls back). */
static int fold_mp(cic_model *m, int w, int b, bool reader, const mpfr_t *shift_or_gate,
                   const mpfr_t *scale, const mpfr_t *q, bool center, cic_fold_ws *ws)
{
    size_t n = (size_t)m->t[w].rows * m->t[w].cols;
    cic_fold_ws own;
    int rc;
    if (n <= ws->tmp_n)
        return fold_mp_ws(m, w, b, reader, shift_or_gate, scale, q, center, ws);
    if (cic_fold_ws_init(&own, n, ws->vec_n, ws->prec) < 0)
        return -1;
    own.blas = ws->blas;
    own.threads = ws->threads;
    rc = fold_mp_ws(m, w, b, reader, shift_or_gate, scale, q, center, &own);
    cic_fold_ws_clear(&own);
    return rc;
}

/* v's n values as doubles into dst: 1 when one is not a double (NaN, or
 * beyond double's range at 53 bits), else 0. */
static int exact_f64(double *dst, const mpfr_t *v, int n)
{
    int i;
    for (i = 0; i < n; i++) {
        dst[i] = mpfr_get_d(v[i], MPFR_RNDN);
        if (mpfr_nan_p(v[i]) || mpfr_cmp_d(v[i], dst[i]) != 0)
            return 1;
    }
    return 0;
}

/* The bias of a folded weight, from the weight's values before the fold:
 * a reader's b + W shift, a writer's Q^T (gate * b), centered or not. */
static int fold_bias(mpfr_t *nb, const cic_model *m, int w, int b, bool reader,
                     const mpfr_t *shift_or_gate, cic_xf_aq *q, bool center, cic_fold_ws *ws)
{
    mpfr_t *tb = NULL;
    const mpfr_t *bv = _cic_xf_vals(m, b, &tb), *qm = reader ? NULL : _cic_xf_aq_mp(q);
    int rows = m->t[w].rows, rc = -1;
    if (!bv || (!reader && !qm))
        goto done;
    if (reader)
        rc = dots_by_row(nb, &m->t[w], shift_or_gate, bv, ws->prec, ws->threads);
    else {
        cic_fold_out_b(nb, bv, rows, shift_or_gate, qm, center, ws);
        rc = 0;
    }
done:
    cic_mpvec_destroy(tb, (size_t)rows);
    return rc;
}

/* fold_mp's fold in doubles (fold.h), the weight kept as doubles: 0, 1
 * when a step would not round as MPFR's at 53 bits (nothing changed),
 * -1 when memory runs out. */
static int fold_f64(cic_model *m, int w, int b, bool reader, const mpfr_t *shift_or_gate,
                    const mpfr_t *scale, cic_xf_aq *q, bool center, cic_fold_ws *ws)
{
    cic_tensor *t = &m->t[w];
    int rows = t->rows, cols = t->cols, d = reader ? cols : rows, rc = -1;
    size_t n = (size_t)rows * cols;
    double *v = malloc((size_t)d * sizeof *v), *wv = NULL, *nw = NULL;
    mpfr_t *nb = cic_mpvec_create((size_t)rows, ws->prec);
    if (!v || !nb)
        goto done;
    rc = 1;
    if (cic_tensor_hp_prec(t) > 53 || exact_f64(v, reader ? scale : shift_or_gate, d))
        goto done;
    rc = -1;
    if (!(wv = cic_tensor_f64_create(t, false)) || !(nw = cic_model_array_alloc(n, sizeof *nw, false)))
        goto done;
    rc = reader ? cic_fold_in_w_f64(nw, wv, rows, cols, v, q->f64)
                : cic_fold_out_w_f64(nw, wv, rows, cols, v, q->f64, center, ws->threads);
    if (rc != 0 || (rc = fold_bias(nb, m, w, b, reader, shift_or_gate, q, center, ws)) < 0)
        goto done;
    cic_tensor_set_f64(t, nw, ws->prec);
    _cic_xf_install(m, b, nb, ws->prec);
    nw = NULL;
    nb = NULL;
done:
    free(v);
    free(wv);
    free(nw);
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

/* The original's reader or writer lin folded: in doubles when Q is
 * (f64-openblas), else (or when the doubles would round otherwise) in
 * MPFR. */
static int fold_one(cic_model *m, const cic_op *lin, bool reader, const mpfr_t *shift_or_gate,
                    const mpfr_t *scale, cic_xf_aq *q, bool center, cic_fold_ws *ws)
{
    const mpfr_t *qm;
    int rc = 1;
    CIC_ASSERT(lin->w >= 0 && lin->b >= 0);
    if (q->f64)
        rc = fold_f64(m, lin->w, lin->b, reader, shift_or_gate, scale, q, center, ws);
    if (rc <= 0)
        return rc;
    qm = _cic_xf_aq_mp(q);
    return qm ? fold_mp(m, lin->w, lin->b, reader, shift_or_gate, scale, qm, center, ws) : -1;
}

/* The largest of a, b and c. */
static size_t max3(size_t a, size_t b, size_t c)
{
    size_t m = a > b ? a : b;
    return m > c ? m : c;
}

int _cic_xf_static_fold(cic_model *m, const cic_model *orig, const cic_xform_spec *x,
                        cic_xf_aq *q, bool center, mpfr_prec_t p)
{
    const cic_model_cfg *c = &m->cfg;
    size_t d = (size_t)c->d_model, i;
    /* the MPFR folds' matrices; the doubles' workspace holds a vector */
    size_t big = q->f64 ? d : max3(d * c->d_mlp, 3 * d * d, d * c->d_out);
    mpfr_t *mod = cic_mpvec_create(6 * d, p);
    cic_fold_ws ws;
    int cur_id = -1, rc = -1;
    if (!mod || cic_fold_ws_init(&ws, big, max3(c->d_mlp, c->d_cond, d), p) < 0) {
        cic_mpvec_destroy(mod, 6 * d);
        return -1;
    }
    ws.blas = x->prec == CIC_TPREC_F64_BLAS;
    ws.threads = cic_rt_matmul_threads(m->rt);
    for (i = 0; i < (size_t)orig->n_ops; i++) {
        const cic_op *o = &orig->ops[i];
        int li;
        if (o->kind != CIC_OP_MODULATE && o->kind != CIC_OP_GATE)
            continue;
        if (calibration_mod(mod, &cur_id, orig, m, o->in[1], x->calibration, &ws) < 0)
            goto done;
        if (o->kind == CIC_OP_MODULATE) { /* the reader it feeds: shift, scale */
            li = reader_of(orig, o->out);
            CIC_ASSERT(li >= 0 && orig->ops[li].role == CIC_ROLE_READER);
            if (fold_one(m, &orig->ops[li], true, mod + o->in_col[0], mod + o->in_col[1], q,
                         center, &ws) < 0)
                goto done;
        } else { /* the writer it gates: gate */
            li = _cic_xf_producer(orig, o->in[0]);
            CIC_ASSERT(li >= 0 && orig->ops[li].role == CIC_ROLE_WRITER);
            if (fold_one(m, &orig->ops[li], false, mod + o->in_col[0], NULL, q, center, &ws) < 0)
                goto done;
        }
    }
    rc = 0;
done:
    cic_fold_ws_clear(&ws);
    cic_mpvec_destroy(mod, 6 * d);
    return rc;
}
