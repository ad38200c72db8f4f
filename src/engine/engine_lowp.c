/* SPDX-License-Identifier: MIT */
/* engine_lowp.c: the low-precision engines ([[engines.lowp]] of a case).
 * The body is the f32 engine's template (engine_real.h, float, the same
 * graph, kernels and order of operations) with three changes:
 *   - storage: every quantized linear's weight (lowp.h: the linears that
 *     read or write the residual stream) is its engine's weights rule or
 *     format, dequantized to float32 once per run; every other weight and
 *     input is rounded to the element format;
 *   - activations: each quantized linear's input is quantized dynamically
 *     by the activations rule (per token, group or tensor of the run's
 *     rows) before its matmul;
 *   - elements: every op's output is computed in float32 from its inputs
 *     and rounded once to the element format (bf16, fp16; float32: left
 *     alone); inside attention the scores q k^T and the softmax
 *     probabilities are rounded too, the softmax itself (like the norms)
 *     computed in float32, as PyTorch's modules do for bf16 models.
 * Accumulation: a float format's products are summed in float32 (the
 * sgemm or the fixed-order loop on the dequantized values); when both
 * weights and activations are integer rules, the linear is an integer
 * kernel (cic_lowp_int_matmul): exact int32 sums per block, then float32
 * scaling. Workload: the f32 engine's (small to mid-size blocks). */
#define REAL float
#define RC(x) x##f
#define R_GEMM cblas_sgemm
#define R_EXP expf
#define R_ERF erff
#define R_TANH tanhf
#define R_SQRT sqrtf
#define R_POW powf
#define R_COS cosf
#define R_SIN sinf
#define R_VALS_OWNED 1
#define R_TAP 1
#define R_LOWP 1

#include "../base/mpvec.h"
#include "../model/model.h"
#include "lowp.h"

#include <stdbool.h>
#include <stdlib.h>

#include "engine_real.h"

/* Integer codes of the static weights the integer kernel reads. */
typedef struct {
    const cic_lowp_spec *lp;
    bool ints;       /* weights and activations are integer rules */
    int16_t **q;     /* per tensor id: codes of a quantized linear's weight */
    float **s;
    int32_t **z;
    int *last;       /* per tensor id: the last op reading it as a weight, -1 */
} lowp_state;

/* Tensor id's codes freed: its last reader has run (at a DiT-XL/2's size
 * the codes of every weight would be 1.3 GB, held to the end of the run). */
static void codes_drop(lowp_state *st, int id)
{
    free(st->q[id]);
    free(st->s[id]);
    free(st->z[id]);
    st->q[id] = NULL;
    st->s[id] = NULL;
    st->z[id] = NULL;
}

bool cic_lowp_quantized(const cic_op *o)
{
    return o->kind == CIC_OP_LINEAR &&
           (o->role == CIC_ROLE_READER || o->role == CIC_ROLE_WRITER);
}

bool cic_lowp_is_linear_weight(const cic_model *m, int id)
{
    int i;
    if (m->t[id].role != CIC_T_WEIGHT)
        return false;
    for (i = 0; i < m->n_ops; i++)
        if (m->ops[i].w == id && cic_lowp_quantized(&m->ops[i]))
            return true;
    return false;
}

/* n values of t rounded to f: from the unrounded values (hp) or the
 * float32 ones. */
static int round_tensor(float *y, const cic_tensor *t, const cic_format *f, bool from_hp)
{
    size_t i, n = (size_t)t->rows * t->cols;
    if (f->precision >= 24) {
        memcpy(y, t->f32, n * sizeof *y);
        return 0;
    }
    if (from_hp && t->f64 && !t->hp && !t->lazy) {
        /* value by value: a whole tensor of MPFR numbers (cic_tensor_hp_make)
         * would be 40 bytes a weight, and the same values; without MPFR
         * where the format allows (the same bits, some 20 times faster) */
        mpfr_t v, x;
        if (cic_format_round_df_ok(f)) {
            for (i = 0; i < n; i++)
                y[i] = cic_format_round_df(f, t->f64[i]);
            return 0;
        }
        mpfr_init2(v, 24);
        mpfr_init2(x, 53);
        for (i = 0; i < n; i++) {
            mpfr_set_d(x, t->f64[i], MPFR_RNDN); /* exact: a double */
            cic_format_round(v, x, f);
            y[i] = mpfr_get_flt(v, MPFR_RNDN); /* exact: a value of f */
        }
        mpfr_clear(v);
        mpfr_clear(x);
        return 0;
    }
    if (from_hp && cic_tensor_has_hp(t)) {
        mpfr_t v, *tmp;
        const mpfr_t *hp = cic_tensor_hp_make(t, &tmp);
        if (!hp)
            return -1;
        mpfr_init2(v, 24);
        for (i = 0; i < n; i++) {
            cic_format_round(v, hp[i], f);
            y[i] = mpfr_get_flt(v, MPFR_RNDN); /* exact: a value of f */
        }
        mpfr_clear(v);
        cic_mpvec_destroy(tmp, n);
        return 0;
    }
    for (i = 0; i < n; i++)
        y[i] = cic_format_round_f(f, t->f32[i]);
    return 0;
}

int cic_lowp_tensor(float *deq, int16_t *codes, float *scale, int32_t *zero, float *tscale,
                    const cic_model *m, int id, const cic_lowp_spec *lp, char *msg, size_t cap)
{
    const cic_tensor *t = &m->t[id];
    bool lin = cic_lowp_is_linear_weight(m, id);
    if (lin && lp->wq_on)
        return cic_quant_matrix(&lp->wq, t->f32, t->rows, t->cols, codes, scale, zero, tscale,
                                deq, msg, cap);
    if (round_tensor(deq, t, lin ? lp->wfmt : lp->elem, lp->from == CIC_LOWP_FROM_UNROUNDED) < 0) {
        snprintf(msg, cap, "out of memory making the unrounded values of %s", t->name);
        return -1;
    }
    return 0;
}

/* Weight or input id's values for the run, into v (its place in the
 * arena: vals_fill), with the codes of a quantized linear's weight when
 * the integer kernel reads them. 0, or -1 when memory runs out. */
static int lowp_vals(realrun *r, int id, float *v)
{
    lowp_state *st = r->lx;
    const cic_tensor *t = &r->m->t[id];
    size_t n = (size_t)t->rows * t->cols;
    bool ints = st->ints && cic_lowp_is_linear_weight(r->m, id);
    long ng = ints ? cic_quant_groups(&st->lp->wq, t->rows, t->cols, NULL, 0) : 0;
    if (ints) {
        CIC_ASSERT(ng > 0); /* cic_lowp_check refused a group that does not divide */
        st->q[id] = malloc(n * sizeof **st->q);
        st->s[id] = malloc((size_t)ng * sizeof **st->s);
        st->z[id] = malloc((size_t)ng * sizeof **st->z);
        if (!st->q[id] || !st->s[id] || !st->z[id])
            return -1;
    }
    return cic_lowp_tensor(v, ints ? st->q[id] : NULL, ints ? st->s[id] : NULL,
                           ints ? st->z[id] : NULL, NULL, r->m, id, st->lp, NULL, 0);
}

/* Every value is made (quantized or rounded to the element format). */
static const float *vals_borrow(realrun *r, int id, bool rounded)
{
    (void)r;
    (void)id;
    (void)rounded;
    return NULL;
}

static int vals_fill(realrun *r, int id, bool rounded, float *dst)
{
    (void)rounded;
    return lowp_vals(r, id, dst);
}

static void lowp_round(const realrun *r, REAL *y, size_t n)
{
    const lowp_state *st = r->lx;
    const cic_format *f = st->lp->elem;
    size_t i;
    if (f->precision >= 24)
        return;
    for (i = 0; i < n; i++)
        y[i] = cic_format_round_f(f, y[i]);
}

/* Scratch of one quantized linear: its input quantized (and its per-sample
 * weights, folded at run time, quantized per sample block). */
typedef struct {
    float *xq, *wq;
    int16_t *qx, *qw;
    float *sx, *sw;
    int32_t *zx, *zw;
} lin_scratch;

static void scratch_free(lin_scratch *s)
{
    free(s->xq);
    free(s->wq);
    free(s->qx);
    free(s->qw);
    free(s->sx);
    free(s->sw);
    free(s->zx);
    free(s->zw);
}

/* x [rows, cols] by rule q into deq (and codes when q is an int rule). */
static int quant_into(const cic_quant *q, const float *x, int rows, int cols, float **deq,
                      int16_t **codes, float **sc, int32_t **zp, bool want_codes)
{
    size_t n = (size_t)rows * cols;
    long ng = cic_quant_groups(q, rows, cols, NULL, 0);
    CIC_ASSERT(ng >= 0);
    *deq = malloc((n ? n : 1) * sizeof **deq);
    if (want_codes) {
        *codes = malloc((n ? n : 1) * sizeof **codes);
        *sc = malloc((size_t)(ng ? ng : 1) * sizeof **sc);
        *zp = malloc((size_t)(ng ? ng : 1) * sizeof **zp);
    }
    if (!*deq || (want_codes && (!*codes || !*sc || !*zp)))
        return -1;
    return cic_quant_matrix(q, x, rows, cols, want_codes ? *codes : NULL,
                            want_codes ? *sc : NULL, want_codes ? *zp : NULL, NULL, *deq, NULL,
                            0);
}

/* The per-sample weights of o (S blocks of [n, k]) as stored: quantized
 * block by block (a rule: each sample's block is a weight of its own) or
 * rounded (a format). */
static int per_sample_weights(const cic_lowp_spec *lp, const float *w, int S, int n, int k,
                              lin_scratch *sc, bool ints)
{
    size_t blk = (size_t)n * k, i, tot = (size_t)S * blk;
    long ng = cic_quant_groups(&lp->wq, n, k, NULL, 0);
    int s;
    sc->wq = malloc((tot ? tot : 1) * sizeof *sc->wq);
    if (!sc->wq)
        return -1;
    if (!lp->wq_on) {
        for (i = 0; i < tot; i++)
            sc->wq[i] = cic_format_round_f(lp->wfmt, w[i]); /* float32: w itself */
        return 0;
    }
    CIC_ASSERT(ng >= 0);
    if (ints) {
        sc->qw = malloc((tot ? tot : 1) * sizeof *sc->qw);
        size_t ns = (size_t)S * (size_t)ng + 1;
        sc->sw = malloc(ns * sizeof *sc->sw);
        sc->zw = malloc(ns * sizeof *sc->zw);
        if (!sc->qw || !sc->sw || !sc->zw)
            return -1;
    }
    for (s = 0; s < S; s++)
        if (cic_quant_matrix(&lp->wq, w + s * blk, n, k, ints ? sc->qw + s * blk : NULL,
                             ints ? sc->sw + s * ng : NULL, ints ? sc->zw + s * ng : NULL,
                             NULL, sc->wq + s * blk, NULL, 0) < 0)
            return -1;
    return 0;
}

/* Bias of o added to y (static, or one row per sample). */
static void add_bias(realrun *r, const cic_op *o, float *y, int R, int n)
{
    bias_job jb;
    if (o->b < 0)
        return;
    jb.y = y;
    jb.b = src(r, o->b);
    jb.n = n;
    jb.rs = R / r->ns;
    jb.bper = r->m->t[o->b].role == CIC_T_ACT;
    par_range(r, R, (double)R * n, bias_rows, &jb);
}

/* The integer kernel on S sample blocks (S = 1: static weights). */
static int int_linear(realrun *r, const cic_op *o, float *y, const lin_scratch *sc, int S,
                      int R, int n, int k)
{
    const lowp_state *st = r->lx;
    const cic_quant *aq = &st->lp->aq, *wq = &st->lp->wq;
    long gx = cic_quant_group_len(aq, R, k), gw = cic_quant_group_len(wq, n, k);
    long ngw = cic_quant_groups(wq, n, k, NULL, 0);
    int Rs = R / S, s;
    /* per-sample row blocks of x keep their scales: a row's groups are
     * its own (token, group), and a tensor scale is one for all rows */
    for (s = 0; s < S; s++) {
        size_t x0 = (size_t)s * Rs * k;
        cic_lowp_int_operand X, W;
        X.q = sc->qx + x0;
        X.s = sc->sx + (aq->gran == CIC_QG_TENSOR ? 0 : (long)(x0 / (size_t)gx));
        X.z = aq->symmetric ? NULL : sc->zx + (aq->gran == CIC_QG_TENSOR ? 0 : (long)(x0 / (size_t)gx));
        X.g = aq->gran == CIC_QG_TENSOR ? (long)Rs * k : gx;
        W.q = S > 1 ? sc->qw + (size_t)s * n * k : st->q[o->w];
        W.s = S > 1 ? sc->sw + s * ngw : st->s[o->w];
        W.z = wq->symmetric ? NULL : S > 1 ? sc->zw + s * ngw : st->z[o->w];
        W.g = gw;
        if (cic_lowp_int_matmul(y + (size_t)s * Rs * n, &X, &W, Rs, n, k) < 0)
            return -1;
    }
    add_bias(r, o, y, R, n);
    return 0;
}

static int lowp_linear(realrun *r, const cic_op *o, REAL *y)
{
    const lowp_state *st = r->lx;
    const cic_lowp_spec *lp = st->lp;
    const cic_tensor *wt = &r->m->t[o->w];
    const float *x = src(r, o->in[0]), *w = src(r, o->w);
    bool per = wt->role == CIC_T_ACT;
    int R = rows_of(r, o->in[0]), k = wt->cols, n = per ? wt->block_rows : wt->rows;
    int S = per ? r->ns : 1, rc = -1;
    lin_scratch sc;
    if (!cic_lowp_quantized(o))
        return real_linear_xw(r, o, y, x, w);
    memset(&sc, 0, sizeof sc);
    if (lp->aq_on && quant_into(&lp->aq, x, R, k, &sc.xq, &sc.qx, &sc.sx, &sc.zx, st->ints) < 0)
        goto cleanup;
    if (per && per_sample_weights(lp, w, S, n, k, &sc, st->ints) < 0)
        goto cleanup;
    if (st->ints)
        rc = int_linear(r, o, y, &sc, S, R, n, k);
    else
        rc = real_linear_xw(r, o, y, sc.xq ? sc.xq : x, sc.wq ? sc.wq : w);
    if (st->last[o->w] == (int)(o - r->m->ops))
        codes_drop(r->lx, o->w);
cleanup:
    scratch_free(&sc);
    return rc;
}

int cic_engine_lowp_run(float *out, const cic_model *m, const cic_lowp_spec *lp,
                        enum cic_matmul mm, const cic_run_opts *o)
{
    lowp_state st;
    int i, rc = -1;
    memset(&st, 0, sizeof st);
    st.lp = lp;
    st.ints = lp->wq_on && lp->aq_on && cic_quant_is_int(&lp->wq) && cic_quant_is_int(&lp->aq);
    st.q = cic_calloc((size_t)m->n_t, sizeof *st.q);
    st.s = cic_calloc((size_t)m->n_t, sizeof *st.s);
    st.z = cic_calloc((size_t)m->n_t, sizeof *st.z);
    st.last = malloc((size_t)m->n_t * sizeof *st.last);
    if (st.last) {
        for (i = 0; i < m->n_t; i++)
            st.last[i] = -1;
        for (i = 0; i < m->n_ops; i++)
            if (m->ops[i].w >= 0)
                st.last[m->ops[i].w] = i;
    }
    if (st.q && st.s && st.z && st.last)
        rc = real_run(out, m, mm, false, o, &st);
    for (i = 0; st.q && st.s && st.z && i < m->n_t; i++)
        codes_drop(&st, i);
    free(st.q);
    free(st.s);
    free(st.z);
    free(st.last);
    return rc;
}
