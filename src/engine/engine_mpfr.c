/* engine_mpfr.c: the reference engine. Every op of the graph at prec bits
 * with MPFR, each elementary operation correctly rounded and every dot
 * product (matmuls, attention scores, P V, the variance) correctly rounded as
 * a whole through cic_mp_dot. Formulas and their order mirror engine_f32.c
 * op for op, so the f32 engine differs from this one by rounding alone.
 * Workload: the truth of small to mid-size blocks (about 28 ns per
 * multiply-add at 128 bits); FLOPs are booked as in the f32 engine. */
#include "engine.h"

#include "../base/mpvec.h"

#include <string.h>

typedef struct {
    const cic_model *m;
    mpfr_prec_t prec;
    bool rounded;
    int rows;
    size_t row0;
    mpfr_t **buf;     /* activations, per tensor id */
    mpfr_t **wt;      /* weights converted from f32 (24 bits), per tensor id */
    cic_dot_scratch dot;
    mpfr_ptr *ptr;    /* for plain sums */
    mpfr_t t0, t1, t2, c_scale;
    cic_flop_count fc;
} mprun;

/* Values of a weight or input tensor as MPFR: hp when present (and not asked
 * for the rounded weights), else the exact f32 values at 24 bits. */
static const mpfr_t *wsrc(mprun *r, int id)
{
    const cic_tensor *t = &r->m->t[id];
    size_t off = t->role == CIC_T_INPUT ? r->row0 * (size_t)t->cols : 0;
    if (t->role == CIC_T_ACT)
        return (const mpfr_t *)r->buf[id];
    if (t->hp && !r->rounded)
        return (const mpfr_t *)t->hp + off;
    if (!r->wt[id]) {
        size_t n = (size_t)t->rows * t->cols;
        r->wt[id] = cic_mpvec_create(n, 24);
        if (!r->wt[id])
            return NULL;
        cic_mpvec_set_f32(r->wt[id], t->f32, n);
    }
    return (const mpfr_t *)r->wt[id] + off;
}

static int op_linear(mprun *r, const cic_op *o, mpfr_t *y)
{
    const cic_tensor *wt = &r->m->t[o->w];
    const mpfr_t *x = wsrc(r, o->in[0]), *w = wsrc(r, o->w);
    const mpfr_t *b = o->b >= 0 ? wsrc(r, o->b) : NULL;
    int n = wt->rows, k = wt->cols, i, j;
    if (!x || !w || (o->b >= 0 && !b))
        return -1;
    for (i = 0; i < r->rows; i++)
        for (j = 0; j < n; j++)
            cic_mp_dot(y[(size_t)i * n + j], x + (size_t)i * k, 1,
                       w + (size_t)j * k, 1, (size_t)k, b ? b[j] : NULL, &r->dot);
    r->fc.site[o->site] += 2.0 * r->rows * n * k + (b ? (double)r->rows * n : 0);
    return 0;
}

static int op_norm(mprun *r, const cic_op *o, mpfr_t *y)
{
    const mpfr_t *x = wsrc(r, o->in[0]);
    const mpfr_t *g = o->g >= 0 ? wsrc(r, o->g) : NULL;
    const mpfr_t *b = o->b >= 0 ? wsrc(r, o->b) : NULL;
    int d = r->m->t[o->in[0]].cols, i, j;
    mpfr_ptr mean = r->t0, var = r->t1;
    if (!x || (o->g >= 0 && !g) || (o->b >= 0 && !b))
        return -1;
    for (i = 0; i < r->rows; i++) {
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
    r->fc.site[o->site] += (double)r->rows *
        ((o->center ? 2.0 * d + 1 : 0) + 3.0 * d + 4 + (g ? d : 0) + (b ? d : 0));
    return 0;
}

static int op_attn(mprun *r, const cic_op *o, mpfr_t *y)
{
    const cic_model *m = r->m;
    int N = m->cfg.tokens, d = m->t[o->out].cols, H = o->heads, dh = d / H;
    int S = r->rows / N, s, h, i, j, c;
    const mpfr_t *q = wsrc(r, o->in[0]), *k = wsrc(r, o->in[1]), *v = wsrc(r, o->in[2]);
    int lq = m->t[o->in[0]].cols, lk = m->t[o->in[1]].cols, lv = m->t[o->in[2]].cols;
    mpfr_t *p = cic_mpvec_create((size_t)N, r->prec);
    double fl = 0;
    if (!p || !q || !k || !v) {
        cic_mpvec_destroy(p, (size_t)N);
        return -1;
    }
    mpfr_set_ui(r->c_scale, (unsigned long)dh, MPFR_RNDN);
    mpfr_rec_sqrt(r->c_scale, r->c_scale, MPFR_RNDN);
    for (s = 0; s < S; s++)
        for (h = 0; h < H; h++) {
            const mpfr_t *qs = q + (size_t)s * N * lq + o->in_col[0] + h * dh;
            const mpfr_t *ks = k + (size_t)s * N * lk + o->in_col[1] + h * dh;
            const mpfr_t *vs = v + (size_t)s * N * lv + o->in_col[2] + h * dh;
            for (i = 0; i < N; i++) {
                int cnt = o->causal ? i + 1 : N;
                mpfr_ptr mx = r->t0;
                for (j = 0; j < cnt; j++) {
                    cic_mp_dot(p[j], qs + (size_t)i * lq, 1, ks + (size_t)j * lk, 1,
                               (size_t)dh, NULL, &r->dot);
                    mpfr_mul(p[j], p[j], r->c_scale, MPFR_RNDN);
                }
                mpfr_set(mx, p[0], MPFR_RNDN);
                for (j = 1; j < cnt; j++)
                    if (mpfr_greater_p(p[j], mx))
                        mpfr_set(mx, p[j], MPFR_RNDN);
                for (j = 0; j < cnt; j++) {
                    mpfr_sub(p[j], p[j], mx, MPFR_RNDN);
                    mpfr_exp(p[j], p[j], MPFR_RNDN);
                    r->ptr[j] = p[j];
                }
                mpfr_sum(r->t1, r->ptr, (unsigned long)cnt, MPFR_RNDN);
                for (j = 0; j < cnt; j++)
                    mpfr_div(p[j], p[j], r->t1, MPFR_RNDN);
                for (c = 0; c < dh; c++)
                    cic_mp_dot(y[((size_t)s * N + i) * d + h * dh + c], (const mpfr_t *)p, 1,
                               vs + c, (size_t)lv, (size_t)cnt, NULL, &r->dot);
                fl += 5.0 * cnt;
            }
            /* as the f32 engine books it: full N x N score and P V products
             * (masked entries are zeros there) and the scaling of all scores */
            fl += 4.0 * N * N * dh + (double)N * N;
        }
    r->fc.site[o->site] += fl;
    cic_mpvec_destroy(p, (size_t)N);
    return 0;
}

/* y = act(x) at prec, the same formula as the f32 engine. */
static void act1(mprun *r, enum cic_act a, mpfr_ptr y, mpfr_srcptr x)
{
    mpfr_ptr t = r->t2;
    switch (a) {
    case CIC_ACT_GELU: /* 0.5 x (1 + erf(x / sqrt 2)) */
        mpfr_set_ui(t, 2, MPFR_RNDN);
        mpfr_rec_sqrt(t, t, MPFR_RNDN);
        mpfr_mul(t, x, t, MPFR_RNDN);
        mpfr_erf(t, t, MPFR_RNDN);
        mpfr_add_ui(t, t, 1, MPFR_RNDN);
        mpfr_mul(t, t, x, MPFR_RNDN);
        mpfr_div_2ui(y, t, 1, MPFR_RNDN);
        break;
    case CIC_ACT_GELU_TANH: { /* 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) */
        mpfr_t c;
        mpfr_init2(c, r->prec);
        mpfr_mul(t, x, x, MPFR_RNDN);
        mpfr_mul(t, t, x, MPFR_RNDN);
        mpfr_set_str(c, "0.044715", 10, MPFR_RNDN);
        mpfr_mul(t, t, c, MPFR_RNDN);
        mpfr_add(t, t, x, MPFR_RNDN);
        mpfr_const_pi(c, MPFR_RNDN);
        mpfr_ui_div(c, 2, c, MPFR_RNDN);
        mpfr_sqrt(c, c, MPFR_RNDN);
        mpfr_mul(t, t, c, MPFR_RNDN);
        mpfr_tanh(t, t, MPFR_RNDN);
        mpfr_add_ui(t, t, 1, MPFR_RNDN);
        mpfr_mul(t, t, x, MPFR_RNDN);
        mpfr_div_2ui(y, t, 1, MPFR_RNDN);
        mpfr_clear(c);
        break;
    }
    case CIC_ACT_RELU:
        if (mpfr_sgn(x) > 0)
            mpfr_set(y, x, MPFR_RNDN);
        else
            mpfr_set_zero(y, 1);
        break;
    case CIC_ACT_SILU:
    default: /* x / (1 + exp(-x)) */
        mpfr_neg(t, x, MPFR_RNDN);
        mpfr_exp(t, t, MPFR_RNDN);
        mpfr_add_ui(t, t, 1, MPFR_RNDN);
        mpfr_div(y, x, t, MPFR_RNDN);
        break;
    }
}

static double act_flops(enum cic_act a)
{
    switch (a) {
    case CIC_ACT_GELU:
        return 5;
    case CIC_ACT_GELU_TANH:
        return 9;
    case CIC_ACT_RELU:
        return 1;
    default:
        return 3;
    }
}

static size_t max_inner(const cic_model *m)
{
    size_t k = (size_t)m->cfg.tokens;
    int i;
    for (i = 0; i < m->n_t; i++)
        if ((size_t)m->t[i].cols > k)
            k = (size_t)m->t[i].cols;
    return k;
}

int cic_engine_mpfr_run(mpfr_t *out, const cic_model *m, mpfr_prec_t prec,
                        bool rounded_weights, const cic_run_opts *o)
{
    mprun r;
    int *last = NULL, i, rc = -1, s0 = o ? o->sample0 : 0;
    int ns = (o && o->n_samples > 0) ? o->n_samples : m->cfg.samples;
    size_t n, cap = max_inner(m), j;
    bool inited = false;
    memset(&r, 0, sizeof r);
    CIC_ASSERT(s0 >= 0 && s0 + ns <= m->cfg.samples);
    r.m = m;
    r.prec = prec;
    r.rounded = rounded_weights;
    r.rows = ns * m->cfg.tokens;
    r.row0 = (size_t)s0 * m->cfg.tokens;
    r.buf = cic_calloc((size_t)m->n_t, sizeof *r.buf);
    r.wt = cic_calloc((size_t)m->n_t, sizeof *r.wt);
    r.ptr = cic_calloc(cap + 1, sizeof *r.ptr);
    last = cic_calloc((size_t)m->n_t, sizeof *last);
    if (!r.buf || !r.wt || !r.ptr || !last)
        goto cleanup;
    for (i = 0; i < m->n_t; i++)
        CIC_ASSERT(!m->t[i].hp || m->t[i].hp_prec <= prec);
    if (cic_dot_scratch_init(&r.dot, cap, prec) < 0)
        goto cleanup;
    mpfr_inits2(prec, r.t0, r.t1, r.t2, r.c_scale, (mpfr_ptr)0);
    inited = true;
    for (i = 0; i < m->n_ops; i++) {
        const cic_op *op = &m->ops[i];
        int k;
        for (k = 0; k < 3; k++)
            if (op->in[k] >= 0)
                last[op->in[k]] = i;
    }
    for (i = 0; i < m->n_ops; i++) {
        const cic_op *op = &m->ops[i];
        size_t cnt = (size_t)r.rows * m->t[op->out].cols;
        mpfr_t *y;
        int k;
        if (!r.buf[op->out]) {
            r.buf[op->out] = cic_mpvec_create(cnt, prec);
            if (!r.buf[op->out])
                goto cleanup;
        }
        y = r.buf[op->out];
        switch (op->kind) {
        case CIC_OP_LINEAR:
            if (op_linear(&r, op, y) < 0)
                goto cleanup;
            break;
        case CIC_OP_NORM:
            if (op_norm(&r, op, y) < 0)
                goto cleanup;
            break;
        case CIC_OP_ATTN:
            if (op_attn(&r, op, y) < 0)
                goto cleanup;
            break;
        case CIC_OP_ACT: {
            const mpfr_t *x = wsrc(&r, op->in[0]);
            if (!x)
                goto cleanup;
            for (j = 0; j < cnt; j++)
                act1(&r, op->act, y[j], x[j]);
            r.fc.site[op->site] += act_flops(op->act) * (double)cnt;
            break;
        }
        case CIC_OP_GLU: {
            const mpfr_t *a = wsrc(&r, op->in[0]), *b = wsrc(&r, op->in[1]);
            if (!a || !b)
                goto cleanup;
            for (j = 0; j < cnt; j++) {
                act1(&r, op->act, y[j], a[j]);
                mpfr_mul(y[j], y[j], b[j], MPFR_RNDN);
            }
            r.fc.site[op->site] += (act_flops(op->act) + 1) * (double)cnt;
            break;
        }
        case CIC_OP_ADD: {
            const mpfr_t *a = wsrc(&r, op->in[0]), *b = wsrc(&r, op->in[1]);
            if (!a || !b)
                goto cleanup;
            for (j = 0; j < cnt; j++)
                mpfr_add(y[j], a[j], b[j], MPFR_RNDN);
            r.fc.site[op->site] += (double)cnt;
            break;
        }
        default:
            CIC_ASSERT(0 && "op kind");
        }
        for (k = 0; k < 3; k++) {
            int t = op->in[k];
            if (t >= 0 && last[t] == i && t != m->output && m->t[t].role == CIC_T_ACT) {
                cic_mpvec_destroy(r.buf[t], (size_t)r.rows * m->t[t].cols);
                r.buf[t] = NULL;
            }
        }
    }
    {
        const mpfr_t *res = wsrc(&r, m->output);
        if (!res)
            goto cleanup;
        n = (size_t)r.rows * m->t[m->output].cols;
        for (j = 0; j < n; j++)
            mpfr_set(out[j], res[j], MPFR_RNDN);
    }
    if (o && o->flops)
        for (i = 0; i < CIC_SITE_COUNT; i++)
            o->flops->site[i] += r.fc.site[i];
    rc = 0;
cleanup:
    if (inited)
        mpfr_clears(r.t0, r.t1, r.t2, r.c_scale, (mpfr_ptr)0);
    cic_dot_scratch_clear(&r.dot);
    if (r.buf)
        for (i = 0; i < m->n_t; i++)
            cic_mpvec_destroy(r.buf[i], (size_t)r.rows * m->t[i].cols);
    if (r.wt)
        for (i = 0; i < m->n_t; i++)
            cic_mpvec_destroy(r.wt[i], (size_t)m->t[i].rows * m->t[i].cols);
    free(r.buf);
    free(r.wt);
    free(r.ptr);
    free(last);
    return rc;
}
