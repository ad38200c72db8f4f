/* engine_f32.c: the float32 engine. Matmuls go to OpenBLAS sgemm or to a
 * fixed-order loop (one summation order on every CPU, so its bits are
 * reproducible anywhere); everything else is plain float code compiled with
 * -ffp-contract=off, so its bits depend only on libm's expf/erff/tanhf.
 * Workload: small to mid-size blocks, rows = tokens of the selected samples.
 * Each kernel books the FLOPs it performs (engine.h convention). */
#include "engine.h"

#include <cblas.h>
#include <math.h>
#include <string.h>

const char *const CIC_ENGINE_F32_NAME[CIC_MATMUL_COUNT] = {"f32-openblas",
                                                           "f32-fixed-order"};

double cic_flop_total(const cic_flop_count *fc)
{
    double s = 0;
    int i;
    for (i = 0; i < CIC_SITE_COUNT; i++)
        s += fc->site[i];
    return s;
}

/* C[M,N] = A[M,K] * op(B), op(B) = B^T with B [N,K] (trans) or B [K,N].
 * Leading dimensions in elements. */
static void mm_f32(enum cic_matmul mm, float *c, int ldc, const float *a,
                   int lda, const float *b, int ldb, int M, int N, int K,
                   bool trans)
{
    int i, j, p;
    if (mm == CIC_MATMUL_OPENBLAS) {
        cblas_sgemm(CblasRowMajor, CblasNoTrans, trans ? CblasTrans : CblasNoTrans,
                    M, N, K, 1.0f, a, lda, b, ldb, 0.0f, c, ldc);
        return;
    }
    for (i = 0; i < M; i++)
        for (j = 0; j < N; j++) {
            float s = 0.0f;
            for (p = 0; p < K; p++)
                s += a[(size_t)i * lda + p] *
                     (trans ? b[(size_t)j * ldb + p] : b[(size_t)p * ldb + j]);
            c[(size_t)i * ldc + j] = s;
        }
}

static float act1(enum cic_act a, float x)
{
    switch (a) {
    case CIC_ACT_GELU:
        return 0.5f * x * (1.0f + erff(x * 0.70710678118654752f));
    case CIC_ACT_GELU_TANH: {
        float inner = 0.79788456080286536f * (x + 0.044715f * (x * x * x));
        return 0.5f * x * (1.0f + tanhf(inner));
    }
    case CIC_ACT_RELU:
        return x > 0.0f ? x : 0.0f;
    case CIC_ACT_SILU:
    default:
        return x / (1.0f + expf(-x));
    }
}

/* FLOPs of one activation call (engine.h convention). */
static double act_flops(enum cic_act a)
{
    switch (a) {
    case CIC_ACT_GELU:
        return 5;      /* mul, erf, add, mul, mul */
    case CIC_ACT_GELU_TANH:
        return 9;      /* x*x*x (2), mul, add, mul, tanh, add, mul, mul */
    case CIC_ACT_RELU:
        return 1;      /* compare */
    default:
        return 3;      /* exp, add, div */
    }
}

typedef struct {
    const cic_model *m;
    enum cic_matmul mm;
    int rows;        /* rows this run covers */
    size_t row0;     /* first row of the model's tensors */
    float **buf;     /* per tensor: activation storage */
    cic_flop_count fc;
} f32run;

static const float *src(f32run *r, int id)
{
    const cic_tensor *t = &r->m->t[id];
    if (t->role == CIC_T_INPUT)
        return t->f32 + r->row0 * (size_t)t->cols;
    if (t->role == CIC_T_WEIGHT)
        return t->f32;
    return r->buf[id];
}

static void op_linear(f32run *r, const cic_op *o, float *y)
{
    const cic_tensor *w = &r->m->t[o->w];
    const float *x = src(r, o->in[0]);
    int n = w->rows, k = w->cols, i, j;
    mm_f32(r->mm, y, n, x, k, w->f32, k, r->rows, n, k, true);
    r->fc.site[o->site] += 2.0 * r->rows * n * k;
    if (o->b >= 0) {
        const float *b = r->m->t[o->b].f32;
        for (i = 0; i < r->rows; i++)
            for (j = 0; j < n; j++)
                y[(size_t)i * n + j] += b[j];
        r->fc.site[o->site] += (double)r->rows * n;
    }
}

static void op_norm(f32run *r, const cic_op *o, float *y)
{
    const float *x = src(r, o->in[0]);
    const float *g = o->g >= 0 ? r->m->t[o->g].f32 : NULL;
    const float *b = o->b >= 0 ? r->m->t[o->b].f32 : NULL;
    int d = r->m->t[o->in[0]].cols, i, j;
    float fd = (float)d;
    for (i = 0; i < r->rows; i++) {
        const float *xr = x + (size_t)i * d;
        float *yr = y + (size_t)i * d;
        float mean = 0.0f, var = 0.0f, rstd;
        if (o->center) {
            for (j = 0; j < d; j++)
                mean += xr[j];
            mean = mean / fd;
        }
        for (j = 0; j < d; j++) {
            float c = o->center ? xr[j] - mean : xr[j];
            yr[j] = c;
            var += c * c;
        }
        var = var / fd;
        rstd = 1.0f / sqrtf(var + o->eps);
        for (j = 0; j < d; j++) {
            float v = yr[j] * rstd;
            if (g)
                v = v * g[j];
            if (b)
                v = v + b[j];
            yr[j] = v;
        }
    }
    /* per row: [center: d adds, div, d subs] d muls + d adds (squares),
     * div, add eps, sqrt, div, d muls, [d muls g], [d adds b] */
    r->fc.site[o->site] += (double)r->rows *
        ((o->center ? 2.0 * d + 1 : 0) + 3.0 * d + 4 + (g ? d : 0) + (b ? d : 0));
}

static int op_attn(f32run *r, const cic_op *o, float *y)
{
    const cic_model *m = r->m;
    int N = m->cfg.tokens, d = m->t[o->out].cols, H = o->heads, dh = d / H;
    int S = r->rows / N, s, h, i, j;
    const float *q = src(r, o->in[0]), *k = src(r, o->in[1]), *v = src(r, o->in[2]);
    int lq = m->t[o->in[0]].cols, lk = m->t[o->in[1]].cols, lv = m->t[o->in[2]].cols;
    float scale = 1.0f / sqrtf((float)dh);
    float *sc = malloc((size_t)N * N * sizeof *sc);
    double fl = 0;
    if (!sc)
        return -1;
    for (s = 0; s < S; s++)
        for (h = 0; h < H; h++) {
            const float *qs = q + (size_t)s * N * lq + o->in_col[0] + h * dh;
            const float *ks = k + (size_t)s * N * lk + o->in_col[1] + h * dh;
            const float *vs = v + (size_t)s * N * lv + o->in_col[2] + h * dh;
            mm_f32(r->mm, sc, N, qs, lq, ks, lk, N, N, dh, true);
            fl += 2.0 * N * N * dh + (double)N * N;
            for (i = 0; i < N; i++) {
                float *row = sc + (size_t)i * N, mx, sum = 0.0f;
                int cnt = o->causal ? i + 1 : N;
                for (j = 0; j < N; j++)
                    row[j] = row[j] * scale;
                mx = row[0];
                for (j = 1; j < cnt; j++)
                    mx = row[j] > mx ? row[j] : mx;
                for (j = 0; j < cnt; j++) {
                    row[j] = expf(row[j] - mx);
                    sum += row[j];
                }
                for (j = 0; j < cnt; j++)
                    row[j] = row[j] / sum;
                for (j = cnt; j < N; j++)
                    row[j] = 0.0f;
                fl += 5.0 * cnt; /* compare, sub, exp, add, div */
            }
            mm_f32(r->mm, y + (size_t)s * N * d + h * dh, d, sc, N, vs, lv, N,
                   dh, N, false);
            fl += 2.0 * N * N * dh;
        }
    r->fc.site[o->site] += fl;
    free(sc);
    return 0;
}

int cic_engine_f32_run(float *out, const cic_model *m, enum cic_matmul mm,
                       const cic_run_opts *o)
{
    f32run r;
    int *last = NULL, i, rc = -1, s0 = o ? o->sample0 : 0;
    int ns = (o && o->n_samples > 0) ? o->n_samples : m->cfg.samples;
    size_t n;
    memset(&r, 0, sizeof r);
    CIC_ASSERT(s0 >= 0 && s0 + ns <= m->cfg.samples);
    r.m = m;
    r.mm = mm;
    r.rows = ns * m->cfg.tokens;
    r.row0 = (size_t)s0 * m->cfg.tokens;
    r.buf = cic_calloc((size_t)m->n_t, sizeof *r.buf);
    last = cic_calloc((size_t)m->n_t, sizeof *last);
    if (!r.buf || !last)
        goto cleanup;
    /* free each activation after its last reader */
    for (i = 0; i < m->n_ops; i++) {
        const cic_op *op = &m->ops[i];
        int k;
        for (k = 0; k < 3; k++)
            if (op->in[k] >= 0)
                last[op->in[k]] = i;
    }
    for (i = 0; i < m->n_ops; i++) {
        const cic_op *op = &m->ops[i];
        const cic_tensor *ot = &m->t[op->out];
        float *y;
        size_t j, cnt = (size_t)r.rows * ot->cols;
        if (!r.buf[op->out]) {
            r.buf[op->out] = malloc(cnt * sizeof(float));
            if (!r.buf[op->out])
                goto cleanup;
        }
        y = r.buf[op->out];
        switch (op->kind) {
        case CIC_OP_LINEAR:
            op_linear(&r, op, y);
            break;
        case CIC_OP_NORM:
            op_norm(&r, op, y);
            break;
        case CIC_OP_ATTN:
            if (op_attn(&r, op, y) < 0)
                goto cleanup;
            break;
        case CIC_OP_ACT: {
            const float *x = src(&r, op->in[0]);
            for (j = 0; j < cnt; j++)
                y[j] = act1(op->act, x[j]);
            r.fc.site[op->site] += act_flops(op->act) * (double)cnt;
            break;
        }
        case CIC_OP_GLU: {
            const float *a = src(&r, op->in[0]), *b = src(&r, op->in[1]);
            for (j = 0; j < cnt; j++)
                y[j] = act1(op->act, a[j]) * b[j];
            r.fc.site[op->site] += (act_flops(op->act) + 1) * (double)cnt;
            break;
        }
        case CIC_OP_ADD: {
            const float *a = src(&r, op->in[0]), *b = src(&r, op->in[1]);
            for (j = 0; j < cnt; j++)
                y[j] = a[j] + b[j];
            r.fc.site[op->site] += (double)cnt;
            break;
        }
        default:
            CIC_ASSERT(0 && "op kind");
        }
        {
            int k;
            for (k = 0; k < 3; k++) {
                int t = op->in[k];
                if (t >= 0 && last[t] == i && t != m->output &&
                    m->t[t].role == CIC_T_ACT) {
                    free(r.buf[t]);
                    r.buf[t] = NULL;
                }
            }
        }
    }
    n = (size_t)r.rows * m->t[m->output].cols;
    memcpy(out, src(&r, m->output), n * sizeof *out);
    if (o && o->flops)
        for (i = 0; i < CIC_SITE_COUNT; i++)
            o->flops->site[i] += r.fc.site[i];
    rc = 0;
cleanup:
    if (r.buf)
        for (i = 0; i < m->n_t; i++)
            free(r.buf[i]);
    free(r.buf);
    free(last);
    return rc;
}
