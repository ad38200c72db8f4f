/* engine_f32.c: the float32 engine. Matmuls go to OpenBLAS sgemm or to a
 * fixed-order loop (one summation order on every CPU, so its bits are
 * reproducible anywhere); everything else is plain float code compiled with
 * -ffp-contract=off, so its bits depend only on libm's expf/erff/tanhf.
 * Workload: small to mid-size blocks, rows = tokens of the selected samples.
 * Each kernel books the FLOPs it performs (engine.h convention). */
#include "engine.h"

#include "../xform/qmat.h"

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

/* C[M,N] = op(A) op(B): op(A) = A [M,K], or A^T with A [K,M] (ta);
 * op(B) = B^T with B [N,K] (tb), or B [K,N]. Leading dimensions in
 * elements. The fixed-order loop sums p = 0 .. K-1 in order. */
static void mm_f32t(enum cic_matmul mm, float *c, int ldc, const float *a, int lda,
                    const float *b, int ldb, int M, int N, int K, bool ta, bool tb)
{
    int i, j, p;
    if (mm == CIC_MATMUL_OPENBLAS) {
        cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans,
                    tb ? CblasTrans : CblasNoTrans, M, N, K, 1.0f, a, lda, b, ldb,
                    0.0f, c, ldc);
        return;
    }
    for (i = 0; i < M; i++)
        for (j = 0; j < N; j++) {
            float s = 0.0f;
            for (p = 0; p < K; p++)
                s += (ta ? a[(size_t)p * lda + i] : a[(size_t)i * lda + p]) *
                     (tb ? b[(size_t)j * ldb + p] : b[(size_t)p * ldb + j]);
            c[(size_t)i * ldc + j] = s;
        }
}

static void mm_f32(enum cic_matmul mm, float *c, int ldc, const float *a, int lda,
                   const float *b, int ldb, int M, int N, int K, bool trans)
{
    mm_f32t(mm, c, ldc, a, lda, b, ldb, M, N, K, false, trans);
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

/* FLOPs of one activation call (engine.h convention), booked by both
 * engines. */
double cic_engine_act_flops(enum cic_act a)
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
    int rows;        /* token rows this run covers */
    int ns;          /* samples this run covers */
    int s0;          /* first sample */
    float **buf;     /* per tensor: activation storage */
    cic_flop_count fc;
} f32run;

static int rows_of(const f32run *r, int id)
{
    return cic_model_run_rows(r->m, id, r->ns);
}

static const float *src(f32run *r, int id)
{
    const cic_tensor *t = &r->m->t[id];
    if (t->role == CIC_T_INPUT) {
        size_t row0 = t->rows_kind == CIC_ROWS_SAMPLES ? (size_t)r->s0
                                                       : (size_t)r->s0 * r->m->cfg.tokens;
        return t->f32 + row0 * (size_t)t->cols;
    }
    if (t->role == CIC_T_WEIGHT)
        return t->f32;
    return r->buf[id];
}

/* y = x W^T + b. W and b are static, or folded per sample (one [n, k]
 * block and one bias row per sample). */
static void op_linear(f32run *r, const cic_op *o, float *y)
{
    const cic_tensor *wt = &r->m->t[o->w];
    const float *x = src(r, o->in[0]), *w = src(r, o->w);
    const float *b = o->b >= 0 ? src(r, o->b) : NULL;
    bool per = wt->role == CIC_T_ACT;
    int n = per ? wt->block_rows : wt->rows, k = wt->cols, i, j, s;
    int R = rows_of(r, o->in[0]), S = per ? r->ns : 1, Rs = R / S;
    bool bper = o->b >= 0 && r->m->t[o->b].role == CIC_T_ACT;
    for (s = 0; s < S; s++)
        mm_f32(r->mm, y + (size_t)s * Rs * n, n, x + (size_t)s * Rs * k, k,
               w + (size_t)s * n * k, k, Rs, n, k, true);
    r->fc.site[o->site] += 2.0 * R * n * k;
    if (b) {
        for (i = 0; i < R; i++) {
            const float *bi = bper ? b + (size_t)(i / (R / r->ns)) * n : b;
            for (j = 0; j < n; j++)
                y[(size_t)i * n + j] += bi[j];
        }
        r->fc.site[o->site] += (double)R * n;
    }
}

/* Sample of token row i. */
static int sample_of(const f32run *r, int i)
{
    return i / r->m->cfg.tokens;
}

static int op_modulate(f32run *r, const cic_op *o, float *y)
{
    const float *x = src(r, o->in[0]), *mod = src(r, o->in[1]);
    int d = r->m->t[o->in[0]].cols, mc = r->m->t[o->in[1]].cols, R = rows_of(r, o->in[0]);
    int i, j, s;
    float *t = malloc((size_t)r->ns * d * sizeof *t);
    if (!t)
        return -1;
    for (s = 0; s < r->ns; s++) /* 1 + scale, once per sample */
        for (j = 0; j < d; j++)
            t[(size_t)s * d + j] = 1.0f + mod[(size_t)s * mc + o->in_col[1] + j];
    for (i = 0; i < R; i++) {
        const float *ts = t + (size_t)sample_of(r, i) * d;
        const float *sh = mod + (size_t)sample_of(r, i) * mc + o->in_col[0];
        for (j = 0; j < d; j++)
            y[(size_t)i * d + j] = x[(size_t)i * d + j] * ts[j] + sh[j];
    }
    free(t);
    r->fc.site[o->site] += (double)r->ns * d + 2.0 * R * d;
    return 0;
}

static void op_gate(f32run *r, const cic_op *o, float *y)
{
    const float *x = src(r, o->in[0]), *mod = src(r, o->in[1]);
    int d = r->m->t[o->in[0]].cols, mc = r->m->t[o->in[1]].cols, R = rows_of(r, o->in[0]);
    int i, j;
    for (i = 0; i < R; i++) {
        const float *g = mod + (size_t)sample_of(r, i) * mc + o->in_col[0];
        for (j = 0; j < d; j++)
            y[(size_t)i * d + j] = g[j] * x[(size_t)i * d + j];
    }
    r->fc.site[o->site] += (double)R * d;
}

static void op_center(f32run *r, const cic_op *o, float *y)
{
    const float *x = src(r, o->in[0]);
    int d = r->m->t[o->in[0]].cols, R = rows_of(r, o->in[0]), i, j;
    for (i = 0; i < R; i++) {
        float mean = 0.0f;
        for (j = 0; j < d; j++)
            mean += x[(size_t)i * d + j];
        mean = mean / (float)d;
        for (j = 0; j < d; j++)
            y[(size_t)i * d + j] = x[(size_t)i * d + j] - mean;
    }
    r->fc.site[o->site] += (double)R * (2.0 * d + 1);
}

/* Fast randomized Hadamard on each row, w = K * P (xform/qmat.h): forward
 * y = (x H) s / sqrt(w), transpose y = ((x s) H^T) / sqrt(w), with
 * H = H_K (x) Syl(P), Syl(P) the Sylvester matrix in natural order
 * (Syl[i][j] = (-1)^popcount(i & j), symmetric) and H_K the base from
 * cic_hadamard_base (row 0 and column 0 all +1; K = 1 for powers of two).
 * Row x as K blocks of P: butterflies of length P on each block, then the
 * blocks mixed, out block c = sum_a H_K[a][c] (transpose: H_K[c][a]) block a,
 * summed for a = 0 .. K-1 in order starting from block 0 (coefficient +1):
 * K - 1 adds/subs per output. FLOPs per row:
 * K P log2 P + P K (K - 1) + 2w. */
static int op_fwht(f32run *r, const cic_op *o, float *y)
{
    const float *x = src(r, o->in[0]), *sg = r->m->t[o->g].f32;
    int w = r->m->t[o->in[0]].cols, R = rows_of(r, o->in[0]), i, j, len, lg = 0;
    int K, P, a, c, e;
    signed char *hk = NULL;
    float *acc = NULL;
    float scale = 1.0f / sqrtf((float)w);
    if (cic_hadamard_base(&hk, &K, w) < 0)
        return -1;
    P = w / K;
    while ((1 << lg) < P)
        lg++;
    acc = malloc((size_t)K * sizeof *acc);
    if (!acc) {
        free(hk);
        return -1;
    }
    for (i = 0; i < R; i++) {
        float *v = y + (size_t)i * w;
        for (j = 0; j < w; j++)
            v[j] = o->transpose ? x[(size_t)i * w + j] * sg[j] : x[(size_t)i * w + j];
        /* len < P: the pairs (k, k + len) never straddle two blocks */
        for (len = 1; len < P; len <<= 1)
            for (j = 0; j < w; j += 2 * len) {
                int k;
                for (k = j; k < j + len; k++) {
                    float p = v[k], q = v[k + len];
                    v[k] = p + q;
                    v[k + len] = p - q;
                }
            }
        for (e = 0; K > 1 && e < P; e++) {
            for (c = 0; c < K; c++) {
                float s = v[e];
                for (a = 1; a < K; a++) {
                    int h = o->transpose ? hk[(size_t)c * K + a] : hk[(size_t)a * K + c];
                    s = h > 0 ? s + v[(size_t)a * P + e] : s - v[(size_t)a * P + e];
                }
                acc[c] = s;
            }
            for (c = 0; c < K; c++)
                v[(size_t)c * P + e] = acc[c];
        }
        for (j = 0; j < w; j++)
            v[j] = (o->transpose ? v[j] : v[j] * sg[j]) * scale;
    }
    free(acc);
    free(hk);
    r->fc.site[o->site] +=
        (double)R * ((double)K * P * lg + (double)P * K * (K - 1) + 2.0 * w);
    return 0;
}

/* Per-sample folds (model/fold.h gives the formulas and their order). */
static int op_fold(f32run *r, const cic_op *o, float *y)
{
    const cic_model *m = r->m;
    const float *mod = src(r, o->in[0]);
    int mc = m->t[o->in[0]].cols, d = m->cfg.d_model, s, j, k, c;
    const float *w = o->w >= 0 ? m->t[o->w].f32 : NULL;
    const float *b = o->b >= 0 ? m->t[o->b].f32 : NULL;
    const float *q = o->g >= 0 ? m->t[o->g].f32 : NULL;
    int n = o->w >= 0 ? m->t[o->w].rows : d, kk = o->w >= 0 ? m->t[o->w].cols : 1;
    float *tmp = malloc((size_t)n * kk * sizeof *tmp + (size_t)d * sizeof *tmp);
    double fl = 0;
    if (!tmp)
        return -1;
    for (s = 0; s < r->ns; s++) {
        const float *v = mod + (size_t)s * mc + o->in_col[0];
        float *t1 = tmp + (size_t)n * kk;
        switch (o->kind) {
        case CIC_OP_FOLD_IN_W: /* [n, d]: W diag(1 + scale) Q */
            for (k = 0; k < d; k++)
                t1[k] = 1.0f + v[k];
            for (j = 0; j < n; j++)
                for (k = 0; k < d; k++)
                    tmp[(size_t)j * d + k] = w[(size_t)j * d + k] * t1[k];
            mm_f32(r->mm, y + (size_t)s * n * d, d, tmp, d, q, d, n, d, d, false);
            fl += d + (double)n * d + 2.0 * n * d * d;
            break;
        case CIC_OP_FOLD_IN_B: /* [n]: b + W shift */
            for (j = 0; j < n; j++) {
                float acc = 0.0f;
                for (k = 0; k < d; k++)
                    acc += w[(size_t)j * d + k] * v[k];
                y[(size_t)s * n + j] = b ? acc + b[j] : acc;
            }
            fl += (double)n * (2.0 * d + 1);
            break;
        case CIC_OP_FOLD_OUT_W: /* [d, k]: Q^T C diag(gate) W */
        case CIC_OP_FOLD_OUT_B: { /* [d]: Q^T C (gate * b) */
            bool isw = o->kind == CIC_OP_FOLD_OUT_W;
            int cols = isw ? kk : 1;
            for (j = 0; j < d; j++)
                for (c = 0; c < cols; c++)
                    tmp[(size_t)j * cols + c] = v[j] * (isw ? w[(size_t)j * cols + c] : b[j]);
            fl += (double)d * cols;
            if (o->center) {
                for (c = 0; c < cols; c++) {
                    float mean = 0.0f;
                    for (j = 0; j < d; j++)
                        mean += tmp[(size_t)j * cols + c];
                    mean = mean / (float)d;
                    for (j = 0; j < d; j++)
                        tmp[(size_t)j * cols + c] -= mean;
                }
                fl += (2.0 * d + 1) * cols;
            }
            mm_f32t(r->mm, y + (size_t)s * d * cols, cols, q, d, tmp, cols, d, cols, d,
                    true, false);
            fl += 2.0 * d * d * cols;
            break;
        }
        default:
            CIC_ASSERT(0 && "fold kind");
        }
    }
    r->fc.site[o->site] += fl;
    free(tmp);
    return 0;
}

static void op_norm(f32run *r, const cic_op *o, float *y)
{
    const float *x = src(r, o->in[0]);
    const float *g = o->g >= 0 ? r->m->t[o->g].f32 : NULL;
    const float *b = o->b >= 0 ? r->m->t[o->b].f32 : NULL;
    int d = r->m->t[o->in[0]].cols, i, j, R = rows_of(r, o->in[0]);
    float fd = (float)d;
    for (i = 0; i < R; i++) {
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
    r->fc.site[o->site] += (double)R *
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
    r.ns = ns;
    r.s0 = s0;
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
        size_t j, cnt = (size_t)rows_of(&r, op->out) * ot->cols;
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
            r.fc.site[op->site] += cic_engine_act_flops(op->act) * (double)cnt;
            break;
        }
        case CIC_OP_GLU: {
            const float *a = src(&r, op->in[0]), *b = src(&r, op->in[1]);
            for (j = 0; j < cnt; j++)
                y[j] = act1(op->act, a[j]) * b[j];
            r.fc.site[op->site] += (cic_engine_act_flops(op->act) + 1) * (double)cnt;
            break;
        }
        case CIC_OP_MODULATE:
            if (op_modulate(&r, op, y) < 0)
                goto cleanup;
            break;
        case CIC_OP_GATE:
            op_gate(&r, op, y);
            break;
        case CIC_OP_CENTER:
            op_center(&r, op, y);
            break;
        case CIC_OP_FWHT:
            if (op_fwht(&r, op, y) < 0)
                goto cleanup;
            break;
        case CIC_OP_FOLD_IN_W:
        case CIC_OP_FOLD_IN_B:
        case CIC_OP_FOLD_OUT_W:
        case CIC_OP_FOLD_OUT_B:
            if (op_fold(&r, op, y) < 0)
                goto cleanup;
            break;
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
    n = (size_t)rows_of(&r, m->output) * m->t[m->output].cols;
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
