/* engine_real.h: the body of the float32 and float64 engines, a template
 * included once by engine_f32.c and once by engine_f64.c (never by anything
 * else). Both run the same graph with the same formulas in the same order
 * of operations, and book the same FLOPs per site; only the real type, the
 * gemm, the libm functions and the literals differ. Matmuls go to BLAS
 * gemm or to a fixed-order loop (one summation order on every CPU).
 *
 * The includer defines, before including:
 *   REAL           the real type (float, double)
 *   RC(x)          a literal of that type (x##f, x)
 *   R_GEMM         cblas_sgemm, cblas_dgemm
 *   R_EXP, R_ERF, R_TANH, R_SQRT  the libm functions of that type
 *   R_VALS_OWNED   0: weights and inputs are read from the tensors' f32
 *                  storage; 1: R_VALS_CREATE(const cic_tensor *t, bool
 *                  rounded) returns a malloc'd copy of all rows*cols
 *                  values as REAL (NULL when memory runs out), made once
 *                  per tensor per run and freed at its end
 * and gets the static real_run(out, m, mm, rounded, o); the exported run
 * function is the includer's, a thin wrapper. Shared non-template code
 * (cic_flop_total, cic_engine_act_flops) lives in engine_f32.c. */
#if !defined(REAL) || !defined(RC) || !defined(R_GEMM) || !defined(R_EXP) || \
    !defined(R_ERF) || !defined(R_TANH) || !defined(R_SQRT) || !defined(R_VALS_OWNED)
#error "engine_real.h: define REAL, RC, R_GEMM, R_EXP, R_ERF, R_TANH, R_SQRT, R_VALS_OWNED"
#endif

#include "engine.h"

#include "../xform/qmat.h"

#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* C[M,N] = op(A) op(B): op(A) = A [M,K], or A^T with A [K,M] (ta);
 * op(B) = B^T with B [N,K] (tb), or B [K,N]. Leading dimensions in
 * elements. The fixed-order loop sums p = 0 .. K-1 in order. */
static void mm_realt(enum cic_matmul mm, REAL *c, int ldc, const REAL *a, int lda,
                    const REAL *b, int ldb, int M, int N, int K, bool ta, bool tb)
{
    int i, j, p;
    if (mm == CIC_MATMUL_OPENBLAS) {
        R_GEMM(CblasRowMajor, ta ? CblasTrans : CblasNoTrans,
                    tb ? CblasTrans : CblasNoTrans, M, N, K, RC(1.0), a, lda, b, ldb,
                    RC(0.0), c, ldc);
        return;
    }
    for (i = 0; i < M; i++)
        for (j = 0; j < N; j++) {
            REAL s = RC(0.0);
            for (p = 0; p < K; p++)
                s += (ta ? a[(size_t)p * lda + i] : a[(size_t)i * lda + p]) *
                     (tb ? b[(size_t)j * ldb + p] : b[(size_t)p * ldb + j]);
            c[(size_t)i * ldc + j] = s;
        }
}

static void mm_real(enum cic_matmul mm, REAL *c, int ldc, const REAL *a, int lda,
                   const REAL *b, int ldb, int M, int N, int K, bool trans)
{
    mm_realt(mm, c, ldc, a, lda, b, ldb, M, N, K, false, trans);
}

static REAL act1(enum cic_act a, REAL x)
{
    switch (a) {
    case CIC_ACT_GELU:
        return RC(0.5) * x * (RC(1.0) + R_ERF(x * RC(0.70710678118654752)));
    case CIC_ACT_GELU_TANH: {
        REAL inner = RC(0.79788456080286536) * (x + RC(0.044715) * (x * x * x));
        return RC(0.5) * x * (RC(1.0) + R_TANH(inner));
    }
    case CIC_ACT_RELU:
        return x > RC(0.0) ? x : RC(0.0);
    case CIC_ACT_SILU:
    default:
        return x / (RC(1.0) + R_EXP(-x));
    }
}

typedef struct {
    const cic_model *m;
    enum cic_matmul mm;
    int rows;        /* token rows this run covers */
    int ns;          /* samples this run covers */
    int s0;          /* first sample */
    REAL **buf;     /* per tensor: activation storage */
    const REAL **val; /* per tensor: weight and input values (whole tensor) */
    cic_flop_count fc;
} realrun;

static int rows_of(const realrun *r, int id)
{
    return cic_model_run_rows(r->m, id, r->ns);
}

static const REAL *src(realrun *r, int id)
{
    const cic_tensor *t = &r->m->t[id];
    if (t->role == CIC_T_INPUT) {
        size_t row0 = t->rows_kind == CIC_ROWS_SAMPLES ? (size_t)r->s0
                                                       : (size_t)r->s0 * r->m->cfg.tokens;
        return r->val[id] + row0 * (size_t)t->cols;
    }
    if (t->role == CIC_T_WEIGHT)
        return r->val[id];
    return r->buf[id];
}

/* Values of weight or input tensor id, all rows (loaded by load_vals). */
static const REAL *wval(const realrun *r, int id)
{
    return r->val[id];
}

/* y = x W^T + b. W and b are static, or folded per sample (one [n, k]
 * block and one bias row per sample). */
static void op_linear(realrun *r, const cic_op *o, REAL *y)
{
    const cic_tensor *wt = &r->m->t[o->w];
    const REAL *x = src(r, o->in[0]), *w = src(r, o->w);
    const REAL *b = o->b >= 0 ? src(r, o->b) : NULL;
    bool per = wt->role == CIC_T_ACT;
    int n = per ? wt->block_rows : wt->rows, k = wt->cols, i, j, s;
    int R = rows_of(r, o->in[0]), S = per ? r->ns : 1, Rs = R / S;
    bool bper = o->b >= 0 && r->m->t[o->b].role == CIC_T_ACT;
    for (s = 0; s < S; s++)
        mm_real(r->mm, y + (size_t)s * Rs * n, n, x + (size_t)s * Rs * k, k,
               w + (size_t)s * n * k, k, Rs, n, k, true);
    r->fc.site[o->site] += 2.0 * R * n * k;
    if (b) {
        for (i = 0; i < R; i++) {
            const REAL *bi = bper ? b + (size_t)(i / (R / r->ns)) * n : b;
            for (j = 0; j < n; j++)
                y[(size_t)i * n + j] += bi[j];
        }
        r->fc.site[o->site] += (double)R * n;
    }
}

/* Sample of token row i. */
static int sample_of(const realrun *r, int i)
{
    return i / r->m->cfg.tokens;
}

static int op_modulate(realrun *r, const cic_op *o, REAL *y)
{
    const REAL *x = src(r, o->in[0]), *mod = src(r, o->in[1]);
    int d = r->m->t[o->in[0]].cols, mc = r->m->t[o->in[1]].cols, R = rows_of(r, o->in[0]);
    int i, j, s;
    REAL *t = malloc((size_t)r->ns * d * sizeof *t);
    if (!t)
        return -1;
    for (s = 0; s < r->ns; s++) /* 1 + scale, once per sample */
        for (j = 0; j < d; j++)
            t[(size_t)s * d + j] = RC(1.0) + mod[(size_t)s * mc + o->in_col[1] + j];
    for (i = 0; i < R; i++) {
        const REAL *ts = t + (size_t)sample_of(r, i) * d;
        const REAL *sh = mod + (size_t)sample_of(r, i) * mc + o->in_col[0];
        for (j = 0; j < d; j++)
            y[(size_t)i * d + j] = x[(size_t)i * d + j] * ts[j] + sh[j];
    }
    free(t);
    r->fc.site[o->site] += (double)r->ns * d + 2.0 * R * d;
    return 0;
}

static void op_gate(realrun *r, const cic_op *o, REAL *y)
{
    const REAL *x = src(r, o->in[0]), *mod = src(r, o->in[1]);
    int d = r->m->t[o->in[0]].cols, mc = r->m->t[o->in[1]].cols, R = rows_of(r, o->in[0]);
    int i, j;
    for (i = 0; i < R; i++) {
        const REAL *g = mod + (size_t)sample_of(r, i) * mc + o->in_col[0];
        for (j = 0; j < d; j++)
            y[(size_t)i * d + j] = g[j] * x[(size_t)i * d + j];
    }
    r->fc.site[o->site] += (double)R * d;
}

static void op_center(realrun *r, const cic_op *o, REAL *y)
{
    const REAL *x = src(r, o->in[0]);
    int d = r->m->t[o->in[0]].cols, R = rows_of(r, o->in[0]), i, j;
    for (i = 0; i < R; i++) {
        REAL mean = RC(0.0);
        for (j = 0; j < d; j++)
            mean += x[(size_t)i * d + j];
        mean = mean / (REAL)d;
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
static int op_fwht(realrun *r, const cic_op *o, REAL *y)
{
    const REAL *x = src(r, o->in[0]), *sg = wval(r, o->g);
    int w = r->m->t[o->in[0]].cols, R = rows_of(r, o->in[0]), i, j, len, lg = 0;
    int K, P, a, c, e;
    signed char *hk = NULL;
    REAL *acc = NULL;
    REAL scale = RC(1.0) / R_SQRT((REAL)w);
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
        REAL *v = y + (size_t)i * w;
        for (j = 0; j < w; j++)
            v[j] = o->transpose ? x[(size_t)i * w + j] * sg[j] : x[(size_t)i * w + j];
        /* len < P: the pairs (k, k + len) never straddle two blocks */
        for (len = 1; len < P; len <<= 1)
            for (j = 0; j < w; j += 2 * len) {
                int k;
                for (k = j; k < j + len; k++) {
                    REAL p = v[k], q = v[k + len];
                    v[k] = p + q;
                    v[k + len] = p - q;
                }
            }
        for (e = 0; K > 1 && e < P; e++) {
            for (c = 0; c < K; c++) {
                REAL s = v[e];
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
static int op_fold(realrun *r, const cic_op *o, REAL *y)
{
    const cic_model *m = r->m;
    const REAL *mod = src(r, o->in[0]);
    int mc = m->t[o->in[0]].cols, d = m->cfg.d_model, s, j, k, c;
    const REAL *w = o->w >= 0 ? wval(r, o->w) : NULL;
    const REAL *b = o->b >= 0 ? wval(r, o->b) : NULL;
    const REAL *q = o->g >= 0 ? wval(r, o->g) : NULL;
    int n = o->w >= 0 ? m->t[o->w].rows : d, kk = o->w >= 0 ? m->t[o->w].cols : 1;
    REAL *tmp = malloc((size_t)n * kk * sizeof *tmp + (size_t)d * sizeof *tmp);
    double fl = 0;
    if (!tmp)
        return -1;
    for (s = 0; s < r->ns; s++) {
        const REAL *v = mod + (size_t)s * mc + o->in_col[0];
        REAL *t1 = tmp + (size_t)n * kk;
        switch (o->kind) {
        case CIC_OP_FOLD_IN_W: /* [n, d]: W diag(1 + scale) Q */
            for (k = 0; k < d; k++)
                t1[k] = RC(1.0) + v[k];
            for (j = 0; j < n; j++)
                for (k = 0; k < d; k++)
                    tmp[(size_t)j * d + k] = w[(size_t)j * d + k] * t1[k];
            mm_real(r->mm, y + (size_t)s * n * d, d, tmp, d, q, d, n, d, d, false);
            fl += d + (double)n * d + 2.0 * n * d * d;
            break;
        case CIC_OP_FOLD_IN_B: /* [n]: b + W shift */
            for (j = 0; j < n; j++) {
                REAL acc = RC(0.0);
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
                    REAL mean = RC(0.0);
                    for (j = 0; j < d; j++)
                        mean += tmp[(size_t)j * cols + c];
                    mean = mean / (REAL)d;
                    for (j = 0; j < d; j++)
                        tmp[(size_t)j * cols + c] -= mean;
                }
                fl += (2.0 * d + 1) * cols;
            }
            mm_realt(r->mm, y + (size_t)s * d * cols, cols, q, d, tmp, cols, d, cols, d,
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

static void op_norm(realrun *r, const cic_op *o, REAL *y)
{
    const REAL *x = src(r, o->in[0]);
    const REAL *g = o->g >= 0 ? wval(r, o->g) : NULL;
    const REAL *b = o->b >= 0 ? wval(r, o->b) : NULL;
    int d = r->m->t[o->in[0]].cols, i, j, R = rows_of(r, o->in[0]);
    REAL fd = (REAL)d;
    for (i = 0; i < R; i++) {
        const REAL *xr = x + (size_t)i * d;
        REAL *yr = y + (size_t)i * d;
        REAL mean = RC(0.0), var = RC(0.0), rstd;
        if (o->center) {
            for (j = 0; j < d; j++)
                mean += xr[j];
            mean = mean / fd;
        }
        for (j = 0; j < d; j++) {
            REAL c = o->center ? xr[j] - mean : xr[j];
            yr[j] = c;
            var += c * c;
        }
        var = var / fd;
        rstd = RC(1.0) / R_SQRT(var + o->eps);
        for (j = 0; j < d; j++) {
            REAL v = yr[j] * rstd;
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

static int op_attn(realrun *r, const cic_op *o, REAL *y)
{
    const cic_model *m = r->m;
    int N = m->cfg.tokens, d = m->t[o->out].cols, H = o->heads, dh = d / H;
    int S = r->rows / N, s, h, i, j;
    const REAL *q = src(r, o->in[0]), *k = src(r, o->in[1]), *v = src(r, o->in[2]);
    int lq = m->t[o->in[0]].cols, lk = m->t[o->in[1]].cols, lv = m->t[o->in[2]].cols;
    REAL scale = RC(1.0) / R_SQRT((REAL)dh);
    REAL *sc = malloc((size_t)N * N * sizeof *sc);
    double fl = 0;
    if (!sc)
        return -1;
    for (s = 0; s < S; s++)
        for (h = 0; h < H; h++) {
            const REAL *qs = q + (size_t)s * N * lq + o->in_col[0] + h * dh;
            const REAL *ks = k + (size_t)s * N * lk + o->in_col[1] + h * dh;
            const REAL *vs = v + (size_t)s * N * lv + o->in_col[2] + h * dh;
            mm_real(r->mm, sc, N, qs, lq, ks, lk, N, N, dh, true);
            fl += 2.0 * N * N * dh + (double)N * N;
            for (i = 0; i < N; i++) {
                REAL *row = sc + (size_t)i * N, mx, sum = RC(0.0);
                int cnt = o->causal ? i + 1 : N;
                for (j = 0; j < N; j++)
                    row[j] = row[j] * scale;
                mx = row[0];
                for (j = 1; j < cnt; j++)
                    mx = row[j] > mx ? row[j] : mx;
                for (j = 0; j < cnt; j++) {
                    row[j] = R_EXP(row[j] - mx);
                    sum += row[j];
                }
                for (j = 0; j < cnt; j++)
                    row[j] = row[j] / sum;
                for (j = cnt; j < N; j++)
                    row[j] = RC(0.0);
                fl += 5.0 * cnt; /* compare, sub, exp, add, div */
            }
            mm_real(r->mm, y + (size_t)s * N * d + h * dh, d, sc, N, vs, lv, N,
                   dh, N, false);
            fl += 2.0 * N * N * dh;
        }
    r->fc.site[o->site] += fl;
    free(sc);
    return 0;
}

/* Point val[id] at the values of every weight and input tensor an op reads:
 * the includer's R_VALS_CREATE converts a tensor once per run (and the run
 * frees it, R_VALS_OWNED), or the f32 storage is used as is. */
static int load_vals(realrun *r, bool rounded)
{
    const cic_model *m = r->m;
    int i, k;
    for (i = 0; i < m->n_ops; i++) {
        const cic_op *op = &m->ops[i];
        int ids[6] = {op->in[0], op->in[1], op->in[2], op->w, op->b, op->g};
        for (k = 0; k < 6; k++) {
            int id = ids[k];
            if (id < 0 || m->t[id].role == CIC_T_ACT || r->val[id])
                continue;
#if R_VALS_OWNED
            r->val[id] = R_VALS_CREATE(&m->t[id], rounded);
            if (!r->val[id])
                return -1;
#else
            (void)rounded;
            r->val[id] = m->t[id].f32;
#endif
        }
    }
    return 0;
}

static int real_run(REAL *out, const cic_model *m, enum cic_matmul mm, bool rounded,
                    const cic_run_opts *o)
{
    realrun r;
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
    r.val = cic_calloc((size_t)m->n_t, sizeof *r.val);
    last = cic_calloc((size_t)m->n_t, sizeof *last);
    if (!r.buf || !r.val || !last || load_vals(&r, rounded) < 0)
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
        REAL *y;
        size_t j, cnt = (size_t)rows_of(&r, op->out) * ot->cols;
        if (!r.buf[op->out]) {
            r.buf[op->out] = malloc(cnt * sizeof(REAL));
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
            const REAL *x = src(&r, op->in[0]);
            for (j = 0; j < cnt; j++)
                y[j] = act1(op->act, x[j]);
            r.fc.site[op->site] += cic_engine_act_flops(op->act) * (double)cnt;
            break;
        }
        case CIC_OP_GLU: {
            const REAL *a = src(&r, op->in[0]), *b = src(&r, op->in[1]);
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
            const REAL *a = src(&r, op->in[0]), *b = src(&r, op->in[1]);
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
#if R_VALS_OWNED
    if (r.val)
        for (i = 0; i < m->n_t; i++)
            free((void *)r.val[i]);
#endif
    free(r.val);
    free(last);
    return rc;
}
