/* SPDX-License-Identifier: MIT */
/* engine_real.h: the body of the float32 and float64 engines, a template
 * included once by engine_f32.c and once by engine_f64.c (never by anything
 * else). Both run the same graph with the same formulas in the same order
 * of operations; only the real type, the gemm, the libm functions and the
 * literals differ. This file holds the kernels, one per op kind (op.h),
 * with one prototype,
 *     static int real_<op>(realrun *r, const cic_op *o, REAL *y)
 * writing o's output y for the rows of the run (0, or -1 when memory runs
 * out), in the table REAL_KERNEL indexed by op kind. The kernels trust the
 * graph (cic_model_check ran on entry) and book no FLOPs: the walker does,
 * from the op table. engine_real_core.h has the run state, the threads and
 * the matmuls (BLAS gemm or a fixed-order loop, one summation order on
 * every CPU); engine_real_walk.h the activation arena and the walker.
 *
 * The includer defines, before including:
 *   REAL           the real type (float, double)
 *   RC(x)          a literal of that type (x##f, x)
 *   R_GEMM         cblas_sgemm, cblas_dgemm
 *   R_EXP, R_ERF, R_TANH, R_SQRT, R_POW, R_COS, R_SIN  the libm functions
 *                  of that type
 *   R_VALS_OWNED   0: weights and inputs are read from the tensors' f32
 *                  storage; 1: the includer defines vals_borrow and
 *                  vals_fill (engine_real_walk.h): a tensor's values read
 *                  in place, or made into the run's arena before the first
 *                  op that reads them, their place free again after the
 *                  last
 * and gets the static real_run(out, m, mm, rounded, o); the exported run
 * function is the includer's, a thin wrapper.
 *
 * Speed without changing a bit: the activations live in one arena per run,
 * planned from the ops' lifetimes (an elementwise op writes over an input
 * that dies there, as the op table allows); the work outside the gemm
 * calls is split by rows over threads, every output value computed whole by
 * one thread in the same order as on one thread, so the results are the
 * same bits for any thread count and any plan. */
#if !defined(REAL) || !defined(RC) || !defined(R_GEMM) || !defined(R_EXP) || \
    !defined(R_ERF) || !defined(R_TANH) || !defined(R_SQRT) || !defined(R_VALS_OWNED) || \
    !defined(R_POW) || !defined(R_COS) || !defined(R_SIN)
#error "engine_real.h: define REAL, RC, R_GEMM, R_EXP, R_ERF, R_TANH, R_SQRT, R_POW, R_COS, R_SIN, R_VALS_OWNED"
#endif
/* R_TAP 1: the run calls the options' lin_tap (float engines only);
 * R_LOWP 1: the low-precision engine's hooks (engine_lowp.c defines them
 * after including this file): lowp_linear replaces the linear kernel,
 * lowp_round rounds an op's output (and the attention scores and
 * probabilities) to the element format. */
#ifndef R_TAP
#define R_TAP 0
#endif
#ifndef R_LOWP
#define R_LOWP 0
#endif

#include "engine_real_core.h"

#if R_LOWP
static int lowp_linear(realrun *r, const cic_op *o, REAL *y);
static void lowp_round(const realrun *r, REAL *y, size_t n);
#endif

#include "../xform/qmat.h"

#include <assert.h>

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
        return x / (RC(1.0) + R_EXP(-x));
    case CIC_ACT_QUICK_GELU: /* x sigmoid(1.702 x), the constant in REAL */
        return x / (RC(1.0) + R_EXP(-(RC(1.702) * x)));
    default:
        CIC_ASSERT(0 && "activation without a formula in engine_real.h");
        return x;
    }
}

/* ---- elementwise ops (ACT, GLU, ADD) ---- */

typedef struct {
    enum cic_op_kind kind;
    enum cic_act act;
    REAL *y;
    const REAL *a, *b;
    int cols;
} ew_job;

/* y = act(a) over n values, y may be a: act1's operations, in blocks of
 * R_ACT_BLOCK values taken in three passes (the argument of the libm call,
 * the calls, the rest), so that the arithmetic around the calls runs in
 * vector registers; every value goes through the same operations. */
#define R_ACT_BLOCK 256
static void act_vec(enum cic_act act, REAL *y, const REAL *a, size_t n)
{
    REAL t[R_ACT_BLOCK];
    size_t i, k, m;
    if (act == CIC_ACT_RELU) {
        for (i = 0; i < n; i++)
            y[i] = act1(CIC_ACT_RELU, a[i]);
        return;
    }
    for (i = 0; i < n; i += m) {
        const REAL *x = a + i;
        REAL *z = y + i;
        m = n - i < R_ACT_BLOCK ? n - i : R_ACT_BLOCK;
        switch (act) {
        case CIC_ACT_GELU:
            for (k = 0; k < m; k++)
                t[k] = x[k] * RC(0.70710678118654752);
            for (k = 0; k < m; k++)
                t[k] = R_ERF(t[k]);
            for (k = 0; k < m; k++)
                z[k] = RC(0.5) * x[k] * (RC(1.0) + t[k]);
            break;
        case CIC_ACT_GELU_TANH:
            for (k = 0; k < m; k++)
                t[k] = RC(0.79788456080286536) * (x[k] + RC(0.044715) * (x[k] * x[k] * x[k]));
            for (k = 0; k < m; k++)
                t[k] = R_TANH(t[k]);
            for (k = 0; k < m; k++)
                z[k] = RC(0.5) * x[k] * (RC(1.0) + t[k]);
            break;
        case CIC_ACT_SILU:
            for (k = 0; k < m; k++)
                t[k] = R_EXP(-x[k]);
            for (k = 0; k < m; k++)
                z[k] = x[k] / (RC(1.0) + t[k]);
            break;
        default: /* an activation without a vector form: act1 per value */
            for (k = 0; k < m; k++)
                z[k] = act1(act, x[k]);
            break;
        }
    }
}

/* Rows [lo, hi); y may be a or b (each value is read before it is written). */
static void ew_rows(void *ctx, int lo, int hi, int t)
{
    const ew_job *jb = ctx;
    size_t j, s = (size_t)lo * jb->cols, n = (size_t)(hi - lo) * jb->cols;
    REAL *y = jb->y + s;
    const REAL *a = jb->a + s, *b = jb->b ? jb->b + s : NULL;
    (void)t;
    switch (jb->kind) {
    case CIC_OP_ACT:
        act_vec(jb->act, y, a, n);
        break;
    case CIC_OP_GLU:
        for (j = 0; j < n; j++)
            y[j] = act1(jb->act, a[j]) * b[j];
        break;
    default: /* CIC_OP_ADD */
        for (j = 0; j < n; j++)
            y[j] = a[j] + b[j];
        break;
    }
}

/* Rough cost in ns of one value of an elementwise op (for par_range). */
static double ew_cost(enum cic_op_kind kind, enum cic_act act)
{
    if (kind == CIC_OP_ADD || act == CIC_ACT_RELU)
        return 1;
    return 20;
}

static int real_ew(realrun *r, const cic_op *o, REAL *y)
{
    int rows = rows_of(r, o->out), cols = r->m->t[o->out].cols;
    ew_job jb;
    jb.kind = o->kind;
    jb.act = o->act;
    jb.y = y;
    jb.a = src(r, o->in[0]);
    jb.b = o->kind == CIC_OP_ACT ? NULL : src(r, o->in[1]);
    jb.cols = cols;
    par_range(r, rows, ew_cost(o->kind, o->act) * ((double)rows * cols), ew_rows, &jb);
    return 0;
}

static int real_act(realrun *r, const cic_op *o, REAL *y)
{
    return real_ew(r, o, y);
}

static int real_glu(realrun *r, const cic_op *o, REAL *y)
{
    return real_ew(r, o, y);
}

static int real_add(realrun *r, const cic_op *o, REAL *y)
{
    return real_ew(r, o, y);
}

/* ---- linear ---- */

typedef struct {
    REAL *y;
    const REAL *b;
    int n, rs;   /* columns; rows per sample */
    bool bper;   /* one bias row per sample */
} bias_job;

static void bias_rows(void *ctx, int lo, int hi, int t)
{
    const bias_job *jb = ctx;
    int i, j, n = jb->n;
    (void)t;
    for (i = lo; i < hi; i++) {
        const REAL *bi = jb->bper ? jb->b + (size_t)(i / jb->rs) * n : jb->b;
        REAL *yi = jb->y + (size_t)i * n;
        for (j = 0; j < n; j++)
            yi[j] += bi[j];
    }
}

/* y = x W^T + b. W and b are static, or folded per sample (one [n, k]
 * block and one bias row per sample); x and w are the values of o's input
 * and weight (the low-precision engine passes its quantized ones). */
static int real_linear_xw(realrun *r, const cic_op *o, REAL *y, const REAL *x, const REAL *w)
{
    const cic_tensor *wt = &r->m->t[o->w];
    const REAL *b = o->b >= 0 ? src(r, o->b) : NULL;
    bool per = wt->role == CIC_T_ACT;
    int n = per ? wt->block_rows : wt->rows, k = wt->cols, s;
    /* group G: the [G, G] weight on rows of G (rows are contiguous) */
    int R = rows_of(r, o->in[0]) * (o->group > 0 ? r->m->t[o->in[0]].cols / o->group : 1);
    int S = per ? r->ns : 1, Rs = R / S;
    bool bper = o->b >= 0 && r->m->t[o->b].role == CIC_T_ACT;
    for (s = 0; s < S; s++)
        mm_real(r, y + (size_t)s * Rs * n, n, x + (size_t)s * Rs * k, k,
               w + (size_t)s * n * k, k, Rs, n, k, true);
    if (b) {
        bias_job jb;
        jb.y = y;
        jb.b = b;
        jb.n = n;
        jb.rs = R / r->ns;
        jb.bper = bper;
        par_range(r, R, (double)R * n, bias_rows, &jb);
    }
    return 0;
}

static int real_linear(realrun *r, const cic_op *o, REAL *y)
{
#if R_LOWP
    return lowp_linear(r, o, y);
#else
    return real_linear_xw(r, o, y, src(r, o->in[0]), src(r, o->w));
#endif
}

/* ---- adaLN: modulate, gate ---- */

typedef struct {
    REAL *y;
    const REAL *x, *t, *mod; /* t: 1 + scale per sample, [ns, d] */
    int d, mc, col, tokens;
} mod_job;

/* Rows [lo, hi) of y = x * (1 + scale) + shift; y may be x. */
static void modulate_rows(void *ctx, int lo, int hi, int t)
{
    const mod_job *jb = ctx;
    int i, j, d = jb->d;
    (void)t;
    for (i = lo; i < hi; i++) {
        int s = i / jb->tokens; /* the row's sample */
        const REAL *ts = jb->t + (size_t)s * d;
        const REAL *sh = jb->mod + (size_t)s * jb->mc + jb->col;
        const REAL *x = jb->x + (size_t)i * d;
        REAL *y = jb->y + (size_t)i * d;
        for (j = 0; j < d; j++)
            y[j] = x[j] * ts[j] + sh[j];
    }
}

static int real_modulate(realrun *r, const cic_op *o, REAL *y)
{
    const REAL *x = src(r, o->in[0]), *mod = src(r, o->in[1]);
    int d = r->m->t[o->in[0]].cols, mc = r->m->t[o->in[1]].cols, R = rows_of(r, o->in[0]);
    int j, s;
    mod_job jb;
    REAL *t = malloc((size_t)r->ns * d * sizeof *t);
    if (!t)
        return -1;
    for (s = 0; s < r->ns; s++) /* 1 + scale, once per sample */
        for (j = 0; j < d; j++)
            t[(size_t)s * d + j] = RC(1.0) + mod[(size_t)s * mc + o->in_col[1] + j];
    jb.y = y;
    jb.x = x;
    jb.t = t;
    jb.mod = mod;
    jb.d = d;
    jb.mc = mc;
    jb.col = o->in_col[0];
    jb.tokens = r->m->cfg.tokens;
    par_range(r, R, 2.0 * R * d, modulate_rows, &jb);
    free(t);
    return 0;
}

/* Rows [lo, hi) of y = gate * x (mod_job without t); y may be x. */
static void gate_rows(void *ctx, int lo, int hi, int t)
{
    const mod_job *jb = ctx;
    int i, j, d = jb->d;
    (void)t;
    for (i = lo; i < hi; i++) {
        const REAL *g = jb->mod + (size_t)(i / jb->tokens) * jb->mc + jb->col;
        const REAL *x = jb->x + (size_t)i * d;
        REAL *y = jb->y + (size_t)i * d;
        for (j = 0; j < d; j++)
            y[j] = g[j] * x[j];
    }
}

static int real_gate(realrun *r, const cic_op *o, REAL *y)
{
    int d = r->m->t[o->in[0]].cols, R = rows_of(r, o->in[0]);
    mod_job jb;
    jb.y = y;
    jb.x = src(r, o->in[0]);
    jb.t = NULL;
    jb.mod = src(r, o->in[1]);
    jb.d = d;
    jb.mc = r->m->t[o->in[1]].cols;
    jb.col = o->in_col[0];
    jb.tokens = r->m->cfg.tokens;
    par_range(r, R, (double)R * d, gate_rows, &jb);
    return 0;
}

/* ---- center, norm ---- */

typedef struct {
    REAL *y;
    const REAL *x, *g, *b;
    int d;
    bool center;
    float eps;
} norm_job;

/* nb rows (nb <= R_IL) of y = x - rowmean(x) from row pointers x, y; y may
 * be x. Each row's mean sums j = 0 .. d-1 in order. */
static inline void center_block(REAL *y, const REAL *x, int d, int nb)
{
    REAL mean[R_IL];
    int j, q;
    for (q = 0; q < nb; q++)
        mean[q] = RC(0.0);
    for (j = 0; j < d; j++)
        for (q = 0; q < nb; q++)
            mean[q] += x[(size_t)q * d + j];
    for (q = 0; q < nb; q++)
        mean[q] = mean[q] / (REAL)d;
    for (q = 0; q < nb; q++)
        for (j = 0; j < d; j++)
            y[(size_t)q * d + j] = x[(size_t)q * d + j] - mean[q];
}

static void center_rows(void *ctx, int lo, int hi, int t)
{
    const norm_job *jb = ctx;
    int i, d = jb->d;
    (void)t;
    for (i = lo; i + R_IL <= hi; i += R_IL)
        center_block(jb->y + (size_t)i * d, jb->x + (size_t)i * d, d, R_IL);
    for (; i < hi; i++)
        center_block(jb->y + (size_t)i * d, jb->x + (size_t)i * d, d, 1);
}

static int real_center(realrun *r, const cic_op *o, REAL *y)
{
    int d = r->m->t[o->in[0]].cols, R = rows_of(r, o->in[0]);
    norm_job jb;
    memset(&jb, 0, sizeof jb);
    jb.y = y;
    jb.x = src(r, o->in[0]);
    jb.d = d;
    par_range(r, R, 2.0 * R * d, center_rows, &jb);
    return 0;
}

/* nb rows (nb <= R_IL) of LayerNorm (center) or RMSNorm from row pointers
 * x, y; y may be x (each x value is read before the y value at its place
 * is written). Per row: mean summed j = 0 .. d-1 in order, then the
 * squares, then scale, gain and bias. */
static inline void norm_block(const norm_job *jb, REAL *y, const REAL *x, int nb)
{
    const REAL *g = jb->g, *b = jb->b;
    int d = jb->d, j, q;
    bool center = jb->center;
    REAL fd = (REAL)d, mean[R_IL], var[R_IL], rstd[R_IL];
    for (q = 0; q < nb; q++) {
        mean[q] = RC(0.0);
        var[q] = RC(0.0);
    }
    if (center) {
        for (j = 0; j < d; j++)
            for (q = 0; q < nb; q++)
                mean[q] += x[(size_t)q * d + j];
        for (q = 0; q < nb; q++)
            mean[q] = mean[q] / fd;
    }
    for (j = 0; j < d; j++)
        for (q = 0; q < nb; q++) {
            REAL c = center ? x[(size_t)q * d + j] - mean[q] : x[(size_t)q * d + j];
            y[(size_t)q * d + j] = c;
            var[q] += c * c;
        }
    for (q = 0; q < nb; q++) {
        var[q] = var[q] / fd;
        rstd[q] = RC(1.0) / R_SQRT(var[q] + jb->eps);
    }
    for (q = 0; q < nb; q++) {
        REAL *yr = y + (size_t)q * d;
        for (j = 0; j < d; j++) {
            REAL v = yr[j] * rstd[q];
            if (g)
                v = v * g[j];
            if (b)
                v = v + b[j];
            yr[j] = v;
        }
    }
}

static void norm_rows(void *ctx, int lo, int hi, int t)
{
    const norm_job *jb = ctx;
    int i, d = jb->d;
    (void)t;
    for (i = lo; i + R_IL <= hi; i += R_IL)
        norm_block(jb, jb->y + (size_t)i * d, jb->x + (size_t)i * d, R_IL);
    for (; i < hi; i++)
        norm_block(jb, jb->y + (size_t)i * d, jb->x + (size_t)i * d, 1);
}

static int real_norm(realrun *r, const cic_op *o, REAL *y)
{
    const REAL *g = o->g >= 0 ? wval(r, o->g) : NULL;
    const REAL *b = o->b >= 0 ? wval(r, o->b) : NULL;
    int d = r->m->t[o->in[0]].cols, R = rows_of(r, o->in[0]);
    norm_job jb;
    jb.y = y;
    jb.x = src(r, o->in[0]);
    jb.g = g;
    jb.b = b;
    jb.d = d;
    jb.center = o->center;
    jb.eps = o->eps;
    par_range(r, R, 4.0 * R * d, norm_rows, &jb);
    return 0;
}

/* ---- fast Hadamard ---- */

typedef struct {
    REAL *y;
    const REAL *x, *sg;
    const signed char *hk;
    REAL *acc;   /* K values per thread (regular: w) */
    REAL scale;
    int w, K, P, k4;  /* k4: regular, w = 4^k4 */
    bool transpose, regular;
} fwht_job;

/* Row v of w values as blocks of P: butterflies (p, q) -> (p + q, p - q)
 * of lengths 1, 2, .., P/2 in each block (len < P: the pairs (k, k + len)
 * never straddle two blocks), x Sylvester(P) per block. */
static void butterflies(REAL *v, int w, int P)
{
    int len, j, k;
    for (len = 1; len < P; len <<= 1)
        for (j = 0; j < w; j += 2 * len)
            for (k = j; k < j + len; k++) {
                REAL p = v[k], q = v[k + len];
                v[k] = p + q;
                v[k + len] = p - q;
            }
}

/* The regular Hadamard R = P D_r Syl D_c (xform/qmat.h) on row v of width
 * w = 4^k, in place: forward x R, transpose x R^T = x D_c Syl D_r P. Sign
 * flips and the permutation are exact; the Sylvester butterflies between
 * them round as fwht_rows' do. t: w values of scratch. */
static void fwht_regular_row(REAL *v, REAL *t, int w, int k, bool tr)
{
    int j;
    if (!tr) { /* (x P)_j = x_sigma(j), then D_r */
        for (j = 0; j < w; j++)
            t[j] = cic_regular_dr(j) < 0 ? -v[cic_regular_sigma(j)] : v[cic_regular_sigma(j)];
        memcpy(v, t, (size_t)w * sizeof *v);
    } else {
        for (j = 0; j < w; j++)
            v[j] = cic_regular_dc(j, k) < 0 ? -v[j] : v[j];
    }
    butterflies(v, w, w);
    if (!tr) {
        for (j = 0; j < w; j++)
            v[j] = cic_regular_dc(j, k) < 0 ? -v[j] : v[j];
    } else { /* D_r, then (v P)_j = v_sigma(j) */
        for (j = 0; j < w; j++)
            t[j] = cic_regular_dr(cic_regular_sigma(j)) < 0 ? -v[cic_regular_sigma(j)]
                                                              : v[cic_regular_sigma(j)];
        memcpy(v, t, (size_t)w * sizeof *v);
    }
}

/* Rows [lo, hi); y may be x (row i of x is copied to row i of y first). */
static void fwht_rows(void *ctx, int lo, int hi, int t)
{
    const fwht_job *jb = ctx;
    const REAL *x = jb->x, *sg = jb->sg;
    const signed char *hk = jb->hk;
    REAL *acc = jb->acc + (size_t)t * (jb->regular ? jb->w : jb->K), scale = jb->scale;
    int w = jb->w, K = jb->K, P = jb->P, i, j, a, c, e;
    bool tr = jb->transpose;
    for (i = lo; i < hi; i++) {
        REAL *v = jb->y + (size_t)i * w;
        for (j = 0; j < w; j++)
            v[j] = tr ? x[(size_t)i * w + j] * sg[j] : x[(size_t)i * w + j];
        if (jb->regular) {
            fwht_regular_row(v, acc, w, jb->k4, tr);
            for (j = 0; j < w; j++)
                v[j] = (tr ? v[j] : v[j] * sg[j]) * scale;
            continue;
        }
        butterflies(v, w, P);
        for (e = 0; K > 1 && e < P; e++) {
            for (c = 0; c < K; c++) {
                REAL s = v[e];
                for (a = 1; a < K; a++) {
                    int h = tr ? hk[(size_t)c * K + a] : hk[(size_t)a * K + c];
                    s = h > 0 ? s + v[(size_t)a * P + e] : s - v[(size_t)a * P + e];
                }
                acc[c] = s;
            }
            for (c = 0; c < K; c++)
                v[(size_t)c * P + e] = acc[c];
        }
        for (j = 0; j < w; j++)
            v[j] = (tr ? v[j] : v[j] * sg[j]) * scale;
    }
}

/* Fast randomized Hadamard on each row, w = K * P (xform/qmat.h): forward
 * y = (x H) s / sqrt(w), transpose y = ((x s) H^T) / sqrt(w), with
 * H = H_K (x) Syl(P), Syl(P) the Sylvester matrix in natural order
 * (Syl[i][j] = (-1)^popcount(i & j), symmetric) and H_K the base of order
 * K = o->hbase from cic_hadamard_base_k (row 0 and column 0 all +1): the
 * order the transform chose (automatic or the case's hadamard_base), never
 * recomputed from w here, so the op applies the dense Q's matrix.
 * Row x as K blocks of P: butterflies of length P on each block, then the
 * blocks mixed, out block c = sum_a H_K[a][c] (transpose: H_K[c][a]) block a,
 * summed for a = 0 .. K-1 in order starting from block 0 (coefficient +1):
 * K - 1 adds/subs per output (FLOPs: cic_op_flops_fwht). */
static int real_fwht(realrun *r, const cic_op *o, REAL *y)
{
    /* blocks of a row (group) are rows of one block: rows are contiguous */
    int w = o->group > 0 ? o->group : r->m->t[o->in[0]].cols, lg = 0;
    int R = rows_of(r, o->in[0]) * (r->m->t[o->in[0]].cols / w);
    int K = o->hbase, P;
    signed char *hk = NULL;
    fwht_job jb;
    jb.regular = o->regular;
    jb.k4 = o->regular ? cic_regular_order_k(w) : 0;
    if (o->regular)
        K = 1; /* Sylvester butterflies of the full width, no base */
    else if (cic_hadamard_base_k(&hk, K, w) < 0)
        return -1;
    P = w / K;
    while ((1 << lg) < P)
        lg++;
    jb.acc = cic_calloc((size_t)r->nt * (o->regular ? w : K), sizeof *jb.acc);
    if (!jb.acc) {
        free(hk);
        return -1;
    }
    jb.y = y;
    jb.x = src(r, o->in[0]);
    jb.sg = wval(r, o->g);
    jb.hk = hk;
    jb.scale = RC(1.0) / R_SQRT((REAL)w);
    jb.w = w;
    jb.K = K;
    jb.P = P;
    jb.transpose = o->transpose;
    par_range(r, R, (double)R * w * (lg + K + 2), fwht_rows, &jb);
    free(jb.acc);
    free(hk);
    return 0;
}

/* ---- per-sample folds (xform/fold.h gives the formulas and their order) ---- */

/* Sample s's chunk of the mod tensor in[0]. */
static const REAL *fold_chunk(realrun *r, const cic_op *o, int s)
{
    return src(r, o->in[0]) + (size_t)s * r->m->t[o->in[0]].cols + o->in_col[0];
}

/* [n, d] per sample: W diag(1 + scale) Q. */
static int real_fold_in_w(realrun *r, const cic_op *o, REAL *y)
{
    int d = r->m->cfg.d_model, n = r->m->t[o->w].rows, s, j, k;
    const REAL *w = wval(r, o->w), *q = wval(r, o->g);
    /* n d values: huge pages (dit-xl2's fc1, 42 MB of doubles a run) */
    REAL *tmp = cic_model_array_alloc((size_t)n * d + (size_t)d, sizeof *tmp, false), *t1;
    if (!tmp)
        return -1;
    t1 = tmp + (size_t)n * d;
    for (s = 0; s < r->ns; s++) {
        const REAL *v = fold_chunk(r, o, s);
        for (k = 0; k < d; k++)
            t1[k] = RC(1.0) + v[k];
        for (j = 0; j < n; j++)
            for (k = 0; k < d; k++)
                tmp[(size_t)j * d + k] = w[(size_t)j * d + k] * t1[k];
        mm_real(r, y + (size_t)s * n * d, d, tmp, d, q, d, n, d, d, false);
    }
    free(tmp);
    return 0;
}

/* [n] per sample: b + W shift. */
static int real_fold_in_b(realrun *r, const cic_op *o, REAL *y)
{
    int d = r->m->cfg.d_model, n = r->m->t[o->w].rows, s, j, k;
    const REAL *w = wval(r, o->w), *b = o->b >= 0 ? wval(r, o->b) : NULL;
    for (s = 0; s < r->ns; s++) {
        const REAL *v = fold_chunk(r, o, s);
        for (j = 0; j < n; j++) {
            REAL acc = RC(0.0);
            for (k = 0; k < d; k++)
                acc += w[(size_t)j * d + k] * v[k];
            y[(size_t)s * n + j] = b ? acc + b[j] : acc;
        }
    }
    return 0;
}

/* Per sample: Q^T C diag(gate) W, [d, k] (isw), or Q^T C (gate * b), [d]. */
static int fold_out(realrun *r, const cic_op *o, REAL *y, bool isw)
{
    int d = r->m->cfg.d_model, cols = isw ? r->m->t[o->w].cols : 1, s, j, c;
    const REAL *w = isw ? wval(r, o->w) : NULL, *b = isw ? NULL : wval(r, o->b);
    const REAL *q = wval(r, o->g);
    REAL *tmp = cic_model_array_alloc((size_t)d * cols + (size_t)cols, sizeof *tmp, false), *mean;
    if (!tmp)
        return -1;
    mean = tmp + (size_t)d * cols;
    for (s = 0; s < r->ns; s++) {
        const REAL *v = fold_chunk(r, o, s);
        for (j = 0; j < d; j++)
            for (c = 0; c < cols; c++)
                tmp[(size_t)j * cols + c] = v[j] * (isw ? w[(size_t)j * cols + c] : b[j]);
        if (o->center) {
            /* each column's mean summed j = 0 .. d-1 in order, the rows
             * taken in memory order (a column at a time strode through
             * the whole matrix) */
            for (c = 0; c < cols; c++)
                mean[c] = RC(0.0);
            for (j = 0; j < d; j++)
                for (c = 0; c < cols; c++)
                    mean[c] += tmp[(size_t)j * cols + c];
            for (c = 0; c < cols; c++)
                mean[c] = mean[c] / (REAL)d;
            for (j = 0; j < d; j++)
                for (c = 0; c < cols; c++)
                    tmp[(size_t)j * cols + c] -= mean[c];
        }
        mm_realt(r, y + (size_t)s * d * cols, cols, q, d, tmp, cols, d, cols, d, true, false);
    }
    free(tmp);
    return 0;
}

static int real_fold_out_w(realrun *r, const cic_op *o, REAL *y)
{
    return fold_out(r, o, y, true);
}

static int real_fold_out_b(realrun *r, const cic_op *o, REAL *y)
{
    return fold_out(r, o, y, false);
}

/* ---- attention ---- */

/* One row of scores to probabilities: scale, max, exp, sum, divide over
 * the first cnt values (the causal mask zeroes the rest). */
static void softmax_row(REAL *row, int N, int cnt, REAL scale)
{
    REAL mx, sum = RC(0.0);
    int j;
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
}

/* softmax_row on R_IL consecutive rows without mask (cnt = N), the max and
 * the sum of each row taken j = 0 .. N-1 in order as there. */
static void softmax_block(REAL *rows, int N, REAL scale)
{
    REAL mx[R_IL], sum[R_IL];
    size_t j, n = (size_t)R_IL * N;
    int q;
    for (j = 0; j < n; j++)
        rows[j] = rows[j] * scale;
    for (q = 0; q < R_IL; q++) {
        mx[q] = rows[(size_t)q * N];
        sum[q] = RC(0.0);
    }
    for (j = 1; j < (size_t)N; j++)
        for (q = 0; q < R_IL; q++) {
            REAL v = rows[(size_t)q * N + j];
            mx[q] = v > mx[q] ? v : mx[q];
        }
    for (q = 0; q < R_IL; q++)
        for (j = 0; j < (size_t)N; j++)
            rows[(size_t)q * N + j] = R_EXP(rows[(size_t)q * N + j] - mx[q]);
    for (j = 0; j < (size_t)N; j++)
        for (q = 0; q < R_IL; q++)
            sum[q] += rows[(size_t)q * N + j];
    for (q = 0; q < R_IL; q++)
        for (j = 0; j < (size_t)N; j++)
            rows[(size_t)q * N + j] = rows[(size_t)q * N + j] / sum[q];
}

typedef struct {
    REAL *sc;    /* rows of N scores, row k is token k % N of a head */
    int N;
    bool causal;
    REAL scale;
} softmax_job;

static void softmax_rows(void *ctx, int lo, int hi, int t)
{
    const softmax_job *jb = ctx;
    int k, N = jb->N;
    (void)t;
    k = lo;
    if (!jb->causal)
        for (; k + R_IL <= hi; k += R_IL)
            softmax_block(jb->sc + (size_t)k * N, N, jb->scale);
    for (; k < hi; k++)
        softmax_row(jb->sc + (size_t)k * N, N, jb->causal ? k % N + 1 : N, jb->scale);
}

/* Heads (sample s, head h) in order idx = s H + h, in groups: the q k^T
 * gemms of a group, the softmax rows of the group over the threads, the
 * p v gemms of the group. Each gemm call is the one the head-by-head loop
 * makes, with its scores in their own N x N block. Query head h reads key
 * and value head h / (H / kv_heads) (Hugging Face's repeat_kv). */
static int real_attn(realrun *r, const cic_op *o, REAL *y)
{
    const cic_model *m = r->m;
    int N = m->cfg.tokens, d = m->t[o->out].cols, H = o->heads, dh = d / H;
    int S = r->rows / N, nh = S * H, G = attn_group(nh, N), g0, idx, grp = H / o->kv_heads;
    const REAL *q = src(r, o->in[0]), *k = src(r, o->in[1]), *v = src(r, o->in[2]);
    int lq = m->t[o->in[0]].cols, lk = m->t[o->in[1]].cols, lv = m->t[o->in[2]].cols;
    softmax_job jb;
    jb.sc = r->scores;
    jb.N = N;
    jb.causal = o->causal;
    jb.scale = RC(1.0) / R_SQRT((REAL)dh);
    for (g0 = 0; g0 < nh; g0 += G) {
        int g1 = g0 + G < nh ? g0 + G : nh;
        for (idx = g0; idx < g1; idx++) {
            int s = idx / H, h = idx % H;
            const REAL *qs = q + (size_t)s * N * lq + o->in_col[0] + h * dh;
            const REAL *ks = k + (size_t)s * N * lk + o->in_col[1] + h / grp * dh;
            mm_real(r, r->scores + (size_t)(idx - g0) * N * N, N, qs, lq, ks, lk, N, N, dh,
                    true);
        }
#if R_LOWP
        lowp_round(r, r->scores, (size_t)(g1 - g0) * N * N); /* q k^T, as a matmul output */
#endif
        par_range(r, (g1 - g0) * N, 15.0 * (g1 - g0) * N * N, softmax_rows, &jb);
#if R_LOWP
        lowp_round(r, r->scores, (size_t)(g1 - g0) * N * N); /* the probabilities */
#endif
        for (idx = g0; idx < g1; idx++) {
            int s = idx / H, h = idx % H;
            const REAL *vs = v + (size_t)s * N * lv + o->in_col[2] + h / grp * dh;
            mm_real(r, y + (size_t)s * N * d + h * dh, d, r->scores + (size_t)(idx - g0) * N * N,
                    N, vs, lv, N, dh, N, false);
        }
    }
    return 0;
}

/* ---- rotary position embedding ---- */

/* The cos and sin of position p and frequency i at cs[2 (p half + i)] and
 * cs[2 (p half + i) + 1], half = hd / 2, as PyTorch computes Hugging Face
 * LLaMA's default RoPE (modeling_rope_utils._compute_default_rope_parameters
 * and LlamaRotaryEmbedding.forward), every step rounded in REAL (float32
 * for the f32 and low-precision engines, the same steps in double for f64):
 *   e_i      = (REAL)(2i) / (REAL)hd      torch.arange(0, dim, 2).float() / dim
 *   inv_i    = 1 / pow((REAL)theta, e_i)  1.0 / (base ** e), base a Python
 *                                         float taken as the tensor's dtype
 *   angle    = (REAL)p * inv_i            inv_freq @ position_ids: a matmul
 *                                         with K = 1, one rounded product
 *   c, s     = cos(angle), sin(angle)     emb.cos(), emb.sin() (times the
 *                                         attention scaling 1.0: exact)
 * with libm's powf/cosf/sinf (pow/cos/sin). PyTorch's CPU kernels may
 * vectorize pow, cos and sin (SLEEF, within 1 ulp): where libm and they
 * round differently a table entry differs in its last bit. Meta's
 * interleaved code (precompute_freqs_cis: the same inv_freq, torch.outer,
 * torch.polar) gives the same table. */
static void real_rope_table(REAL *cs, int N, int hd, double theta)
{
    int half = hd / 2, p, i;
    for (i = 0; i < half; i++) {
        REAL e = (REAL)(2 * i) / (REAL)hd;
        REAL inv = RC(1.0) / R_POW((REAL)theta, e);
        for (p = 0; p < N; p++) {
            REAL ang = (REAL)p * inv;
            cs[2 * ((size_t)p * half + i)] = R_COS(ang);
            cs[2 * ((size_t)p * half + i) + 1] = R_SIN(ang);
        }
    }
}

/* Per row (position p = row % N within its sample) and head, each pair
 * (a, b) = (x[j], x[j + hd/2]) (half: rotate_half) or (x[2j], x[2j+1])
 * (interleaved) becomes (a c - b s, b c + a s), products and sums each
 * rounded: Hugging Face's q * cos + rotate_half(q) * sin term by term
 * (a c + (-b) s is a c - b s bit for bit), and the complex product of
 * Meta's code. y may be x (both values of a pair are read first). o->rot:
 * the first rot dims of a head only, the table built for rot (GPT-J), the rest copied. */
static int real_rope(realrun *r, const cic_op *o, REAL *y)
{
    const cic_model *m = r->m;
    int N = m->cfg.tokens, w = m->t[o->out].cols, hd = w / o->heads;
    int rd = o->rot ? o->rot : hd, half = rd / 2;
    int i, h, j, step = o->rope == CIC_ROPE_INTERLEAVED ? 2 : 1;
    int off = o->rope == CIC_ROPE_INTERLEAVED ? 1 : half;
    const REAL *x = src(r, o->in[0]);
    REAL *cs = malloc((size_t)N * rd * sizeof *cs);
    if (!cs)
        return -1;
    real_rope_table(cs, N, rd, o->theta);
    for (i = 0; i < r->rows; i++) {
        const REAL *t = cs + (size_t)(i % N) * rd;
        const REAL *xr = x + (size_t)i * w;
        REAL *yr = y + (size_t)i * w;
        for (h = 0; h < o->heads; h++) {
            for (j = 0; j < half; j++) {
                int ia = h * hd + step * j, ib = ia + off;
                REAL a = xr[ia], b = xr[ib], c = t[2 * j], s = t[2 * j + 1];
                yr[ia] = a * c - b * s;
                yr[ib] = b * c + a * s;
            }
            for (j = rd; j < hd; j++)
                yr[h * hd + j] = xr[h * hd + j];
        }
    }
    free(cs);
    return 0;
}

/* ---- the kernel table ---- */

typedef int (*real_kernel)(realrun *r, const cic_op *o, REAL *y);

static const real_kernel REAL_KERNEL[] = {
#define REAL_KERNEL_(E, fn, name, alias) [CIC_OP_##E] = real_##fn,
    CIC_OPS(REAL_KERNEL_)
#undef REAL_KERNEL_
};
static_assert(sizeof REAL_KERNEL / sizeof REAL_KERNEL[0] == CIC_OP_COUNT, "real kernel table");

#include "engine_real_walk.h"
