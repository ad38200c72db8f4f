/* SPDX-License-Identifier: MIT */
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
 * (cic_flop_total, cic_engine_act_flops) lives in engine_f32.c.
 *
 * Speed without changing a bit: the activations live in one arena per run,
 * planned from the ops' lifetimes (an elementwise op writes over an input
 * that dies there); the work outside the gemm calls (the elementwise ops,
 * norms, bias adds, softmax rows, the fixed-order matmul) is split by rows
 * over as many threads as OpenBLAS uses (openblas_get_num_threads, so the
 * thread budget is the environment's, as for the gemms). Every output value
 * is computed whole by one thread with the same operations in the same
 * order as on one thread, and the gemm calls keep their arguments, so the
 * results are the same bits for any thread count and any plan. */
#if !defined(REAL) || !defined(RC) || !defined(R_GEMM) || !defined(R_EXP) || \
    !defined(R_ERF) || !defined(R_TANH) || !defined(R_SQRT) || !defined(R_VALS_OWNED)
#error "engine_real.h: define REAL, RC, R_GEMM, R_EXP, R_ERF, R_TANH, R_SQRT, R_VALS_OWNED"
#endif

#include "engine.h"

#include "../xform/qmat.h"

#include <cblas.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#define R_MAX_THREADS 16
/* Below this much work (about ns on one core) an op stays on one thread:
 * starting and joining a thread costs tens of microseconds. */
#define R_PAR_MIN_WORK 65536.0
/* Work per chunk of rows handed to a thread (about ns): small enough that
 * the last chunks even out the threads, large enough to be cheap to hand
 * out. */
#define R_CHUNK_WORK 200000.0
/* Attention scores of several heads are computed before their softmax rows
 * are split over the threads: at most this many scores at once (1 MiB of
 * floats, so they stay in cache from the q k^T gemms to the p v gemms),
 * and always at least one head. */
#define R_ATTN_SCORES_MAX ((size_t)1 << 18)
/* Rows whose reductions (sums, maxima) run side by side: each row still
 * sums in its own order, but R_IL independent chains keep the FP adder
 * busy where one chain waits on each add's latency. */
#define R_IL 8
/* Arenas this large are aligned for transparent huge pages: fewer page
 * faults (and fewer serialised faults from the gemm threads). */
#define R_HUGE ((size_t)2 << 20)

typedef struct {
    const cic_model *m;
    enum cic_matmul mm;
    int rows;        /* token rows this run covers */
    int ns;          /* samples this run covers */
    int s0;          /* first sample */
    int nt;          /* threads for the work outside the gemm calls */
    REAL **buf;      /* per tensor: activation storage (in the run's arena) */
    const REAL **val; /* per tensor: weight and input values (whole tensor) */
    REAL *scores;    /* attention scores of a group of heads (in the arena) */
    cic_flop_count fc;
} realrun;

/* ---- threads: row ranges ---- */

/* fn(ctx, lo, hi, t) over rows [lo, hi); t is the thread's index (0 is the
 * caller), for per-thread scratch. */
typedef void (*range_fn)(void *ctx, int lo, int hi, int t);

/* Rows are handed out in chunks from a shared counter: a thread that
 * starts late (the machine is busy) takes fewer chunks instead of holding
 * up the others. Which thread computes a row changes nothing in it. */
typedef struct {
    range_fn fn;
    void *ctx;
    int n, chunk;
    atomic_int next;
} range_job;

typedef struct {
    range_job *job;
    int t;
} range_arg;

static void *range_thread(void *a)
{
    range_arg *ra = a;
    range_job *j = ra->job;
    for (;;) {
        int lo = atomic_fetch_add(&j->next, j->chunk);
        if (lo >= j->n)
            break;
        j->fn(j->ctx, lo, j->n - lo > j->chunk ? lo + j->chunk : j->n, ra->t);
    }
    return NULL;
}

/* Threads of the run: OpenBLAS's count, the budget the environment gives
 * the gemms (1 when OpenBLAS runs single-threaded). */
static int real_threads(void)
{
    int n = openblas_get_num_threads();
    return n < 1 ? 1 : n > R_MAX_THREADS ? R_MAX_THREADS : n;
}

/* Run fn over rows [0, n); about work ns of work in all. */
static void par_range(const realrun *r, int n, double work, range_fn fn, void *ctx)
{
    range_job job;
    range_arg arg[R_MAX_THREADS];
    pthread_t th[R_MAX_THREADS];
    bool started[R_MAX_THREADS] = {false};
    int t, most, nt = work < R_PAR_MIN_WORK ? 1 : r->nt;
    double chunk;
    if (n <= 0)
        return;
    nt = nt < n ? nt : n;
    if (nt <= 1) {
        fn(ctx, 0, n, 0);
        return;
    }
    job.fn = fn;
    job.ctx = ctx;
    job.n = n;
    /* about R_CHUNK_WORK each, in whole blocks of R_IL rows (for the
     * interleaved kernels), but at least one chunk per thread */
    chunk = ceil(n * R_CHUNK_WORK / work / R_IL) * R_IL;
    most = (n + nt - 1) / nt;
    job.chunk = chunk < 1 ? 1 : chunk > most ? most : (int)chunk;
    atomic_init(&job.next, 0);
    for (t = 0; t < nt; t++) {
        arg[t].job = &job;
        arg[t].t = t;
    }
    for (t = 1; t < nt; t++)
        started[t] = pthread_create(&th[t], NULL, range_thread, &arg[t]) == 0;
    range_thread(&arg[0]); /* takes every chunk left when a thread did not start */
    for (t = 1; t < nt; t++)
        if (started[t])
            pthread_join(th[t], NULL);
}

/* ---- matmul ---- */

typedef struct {
    REAL *c;
    const REAL *a, *b;
    int ldc, lda, ldb, N, K;
    bool ta, tb;
} mm_job;

/* Rows [lo, hi) of the fixed-order product: each c[i, j] sums p = 0 .. K-1
 * in order. */
static void mm_rows(void *ctx, int lo, int hi, int t)
{
    const mm_job *jb = ctx;
    REAL *c = jb->c;
    const REAL *a = jb->a, *b = jb->b;
    int ldc = jb->ldc, lda = jb->lda, ldb = jb->ldb, N = jb->N, K = jb->K, i, j, p;
    bool ta = jb->ta, tb = jb->tb;
    (void)t;
    for (i = lo; i < hi; i++)
        for (j = 0; j < N; j++) {
            REAL s = RC(0.0);
            for (p = 0; p < K; p++)
                s += (ta ? a[(size_t)p * lda + i] : a[(size_t)i * lda + p]) *
                     (tb ? b[(size_t)j * ldb + p] : b[(size_t)p * ldb + j]);
            c[(size_t)i * ldc + j] = s;
        }
}

/* C[M,N] = op(A) op(B): op(A) = A [M,K], or A^T with A [K,M] (ta);
 * op(B) = B^T with B [N,K] (tb), or B [K,N]. Leading dimensions in
 * elements. The fixed-order loop sums p = 0 .. K-1 in order (rows of C
 * split over the threads). */
static void mm_realt(const realrun *r, REAL *c, int ldc, const REAL *a, int lda,
                     const REAL *b, int ldb, int M, int N, int K, bool ta, bool tb)
{
    mm_job jb;
    if (r->mm == CIC_MATMUL_OPENBLAS) {
        R_GEMM(CblasRowMajor, ta ? CblasTrans : CblasNoTrans,
                    tb ? CblasTrans : CblasNoTrans, M, N, K, RC(1.0), a, lda, b, ldb,
                    RC(0.0), c, ldc);
        return;
    }
    jb.c = c;
    jb.a = a;
    jb.b = b;
    jb.ldc = ldc;
    jb.lda = lda;
    jb.ldb = ldb;
    jb.N = N;
    jb.K = K;
    jb.ta = ta;
    jb.tb = tb;
    par_range(r, M, (double)M * N * K, mm_rows, &jb);
}

static void mm_real(const realrun *r, REAL *c, int ldc, const REAL *a, int lda,
                    const REAL *b, int ldb, int M, int N, int K, bool trans)
{
    mm_realt(r, c, ldc, a, lda, b, ldb, M, N, K, false, trans);
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
        default: /* CIC_ACT_SILU */
            for (k = 0; k < m; k++)
                t[k] = R_EXP(-x[k]);
            for (k = 0; k < m; k++)
                z[k] = x[k] / (RC(1.0) + t[k]);
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
 * block and one bias row per sample). */
static void op_linear(realrun *r, const cic_op *o, REAL *y)
{
    const cic_tensor *wt = &r->m->t[o->w];
    const REAL *x = src(r, o->in[0]), *w = src(r, o->w);
    const REAL *b = o->b >= 0 ? src(r, o->b) : NULL;
    bool per = wt->role == CIC_T_ACT;
    int n = per ? wt->block_rows : wt->rows, k = wt->cols, s;
    int R = rows_of(r, o->in[0]), S = per ? r->ns : 1, Rs = R / S;
    bool bper = o->b >= 0 && r->m->t[o->b].role == CIC_T_ACT;
    for (s = 0; s < S; s++)
        mm_real(r, y + (size_t)s * Rs * n, n, x + (size_t)s * Rs * k, k,
               w + (size_t)s * n * k, k, Rs, n, k, true);
    r->fc.site[o->site] += 2.0 * R * n * k;
    if (b) {
        bias_job jb;
        jb.y = y;
        jb.b = b;
        jb.n = n;
        jb.rs = R / r->ns;
        jb.bper = bper;
        par_range(r, R, (double)R * n, bias_rows, &jb);
        r->fc.site[o->site] += (double)R * n;
    }
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

static int op_modulate(realrun *r, const cic_op *o, REAL *y)
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
    r->fc.site[o->site] += (double)r->ns * d + 2.0 * R * d;
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

static void op_gate(realrun *r, const cic_op *o, REAL *y)
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
    r->fc.site[o->site] += (double)R * d;
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

static void op_center(realrun *r, const cic_op *o, REAL *y)
{
    int d = r->m->t[o->in[0]].cols, R = rows_of(r, o->in[0]);
    norm_job jb;
    memset(&jb, 0, sizeof jb);
    jb.y = y;
    jb.x = src(r, o->in[0]);
    jb.d = d;
    par_range(r, R, 2.0 * R * d, center_rows, &jb);
    r->fc.site[o->site] += (double)R * (2.0 * d + 1);
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

static void op_norm(realrun *r, const cic_op *o, REAL *y)
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
    /* per row: [center: d adds, div, d subs] d muls + d adds (squares),
     * div, add eps, sqrt, div, d muls, [d muls g], [d adds b] */
    r->fc.site[o->site] += (double)R *
        ((o->center ? 2.0 * d + 1 : 0) + 3.0 * d + 4 + (g ? d : 0) + (b ? d : 0));
}

/* ---- fast Hadamard ---- */

typedef struct {
    REAL *y;
    const REAL *x, *sg;
    const signed char *hk;
    REAL *acc;   /* K values per thread */
    REAL scale;
    int w, K, P;
    bool transpose;
} fwht_job;

/* Rows [lo, hi); y may be x (row i of x is copied to row i of y first). */
static void fwht_rows(void *ctx, int lo, int hi, int t)
{
    const fwht_job *jb = ctx;
    const REAL *x = jb->x, *sg = jb->sg;
    const signed char *hk = jb->hk;
    REAL *acc = jb->acc + (size_t)t * jb->K, scale = jb->scale;
    int w = jb->w, K = jb->K, P = jb->P, i, j, len, a, c, e;
    bool tr = jb->transpose;
    for (i = lo; i < hi; i++) {
        REAL *v = jb->y + (size_t)i * w;
        for (j = 0; j < w; j++)
            v[j] = tr ? x[(size_t)i * w + j] * sg[j] : x[(size_t)i * w + j];
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
 * (Syl[i][j] = (-1)^popcount(i & j), symmetric) and H_K the base from
 * cic_hadamard_base (row 0 and column 0 all +1; K = 1 for powers of two).
 * Row x as K blocks of P: butterflies of length P on each block, then the
 * blocks mixed, out block c = sum_a H_K[a][c] (transpose: H_K[c][a]) block a,
 * summed for a = 0 .. K-1 in order starting from block 0 (coefficient +1):
 * K - 1 adds/subs per output. FLOPs per row:
 * K P log2 P + P K (K - 1) + 2w. */
static int op_fwht(realrun *r, const cic_op *o, REAL *y)
{
    int w = r->m->t[o->in[0]].cols, R = rows_of(r, o->in[0]), lg = 0;
    int K, P;
    signed char *hk = NULL;
    fwht_job jb;
    if (cic_hadamard_base(&hk, &K, w) < 0)
        return -1;
    P = w / K;
    while ((1 << lg) < P)
        lg++;
    jb.acc = cic_calloc((size_t)r->nt * K, sizeof *jb.acc);
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
            mm_real(r, y + (size_t)s * n * d, d, tmp, d, q, d, n, d, d, false);
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
            mm_realt(r, y + (size_t)s * d * cols, cols, q, d, tmp, cols, d, cols, d,
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

/* ---- attention ---- */

/* Heads whose scores are held at once (see R_ATTN_SCORES_MAX), of n. */
static int attn_group(int n, int N)
{
    size_t g = R_ATTN_SCORES_MAX / ((size_t)N * N);
    return g < 1 ? 1 : g > (size_t)n ? n : (int)g;
}

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
 * makes, with its scores in their own N x N block. */
static void op_attn(realrun *r, const cic_op *o, REAL *y)
{
    const cic_model *m = r->m;
    int N = m->cfg.tokens, d = m->t[o->out].cols, H = o->heads, dh = d / H;
    int S = r->rows / N, nh = S * H, G = attn_group(nh, N), g0, idx, i;
    const REAL *q = src(r, o->in[0]), *k = src(r, o->in[1]), *v = src(r, o->in[2]);
    int lq = m->t[o->in[0]].cols, lk = m->t[o->in[1]].cols, lv = m->t[o->in[2]].cols;
    softmax_job jb;
    double fl = 0;
    jb.sc = r->scores;
    jb.N = N;
    jb.causal = o->causal;
    jb.scale = RC(1.0) / R_SQRT((REAL)dh);
    for (g0 = 0; g0 < nh; g0 += G) {
        int g1 = g0 + G < nh ? g0 + G : nh;
        for (idx = g0; idx < g1; idx++) {
            int s = idx / H, h = idx % H;
            const REAL *qs = q + (size_t)s * N * lq + o->in_col[0] + h * dh;
            const REAL *ks = k + (size_t)s * N * lk + o->in_col[1] + h * dh;
            mm_real(r, r->scores + (size_t)(idx - g0) * N * N, N, qs, lq, ks, lk, N, N, dh,
                    true);
        }
        par_range(r, (g1 - g0) * N, 15.0 * (g1 - g0) * N * N, softmax_rows, &jb);
        for (idx = g0; idx < g1; idx++) {
            int s = idx / H, h = idx % H;
            const REAL *vs = v + (size_t)s * N * lv + o->in_col[2] + h * dh;
            mm_real(r, y + (size_t)s * N * d + h * dh, d, r->scores + (size_t)(idx - g0) * N * N,
                    N, vs, lv, N, dh, N, false);
            /* booked as the head-by-head loop books them */
            fl += 2.0 * N * N * dh + (double)N * N;
            for (i = 0; i < N; i++)
                fl += 5.0 * (o->causal ? i + 1 : N); /* compare, sub, exp, add, div */
            fl += 2.0 * N * N * dh;
        }
    }
    r->fc.site[o->site] += fl;
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

/* ---- the activation arena ---- */

/* May op o write its output over input in[k] (same shape, dying there)?
 * Only the elementwise ops, whose kernels read each input value before
 * writing the output value at the same place, and only when the tensor is
 * read there through such inputs alone. */
static bool inplace_ok(const realrun *r, const cic_op *o, int k, const int *last, int i)
{
    const cic_model *m = r->m;
    int t = o->in[k], k2, n = 0;
    switch (o->kind) {
    case CIC_OP_ACT:
    case CIC_OP_NORM:
    case CIC_OP_CENTER:
    case CIC_OP_FWHT:
    case CIC_OP_MODULATE:
    case CIC_OP_GATE:
        n = 1;
        break;
    case CIC_OP_ADD:
    case CIC_OP_GLU:
        n = 2;
        break;
    default:
        return false;
    }
    if (t < 0 || k >= n || m->t[t].role != CIC_T_ACT || last[t] != i || t == m->output ||
        t == o->w || t == o->b || t == o->g || m->t[t].cols != m->t[o->out].cols ||
        rows_of(r, t) != rows_of(r, o->out))
        return false;
    for (k2 = n; k2 < 3; k2++)
        if (o->in[k2] == t)
            return false;
    return true;
}

/* Byte offsets of the activations in one arena (SIZE_MAX: not an
 * activation) and its size. A tensor takes a free slot when it is written
 * (or its dying input's slot, inplace_ok) and frees it after its last reader
 * (no reader: at once; the readout: never). Slots grow to the largest
 * tensor they hold. The attention scores get their own region at the end.
 * -1 when memory runs out. */
static int plan_arena(const realrun *r, size_t *off, size_t *total, size_t *scores_off)
{
    const cic_model *m = r->m;
    int nt = m->n_t, i, k, ns = 0, rc = -1;
    int *last = cic_calloc((size_t)nt, sizeof *last);
    int *slot = cic_calloc((size_t)nt, sizeof *slot);
    int *owner = cic_calloc((size_t)nt + 1, sizeof *owner);
    size_t *ssz = cic_calloc((size_t)nt + 1, sizeof *ssz), sum = 0, asc = 0;
    if (!last || !slot || !owner || !ssz)
        goto cleanup;
    for (i = 0; i < nt; i++) {
        last[i] = -1;
        slot[i] = -1;
    }
    for (i = 0; i < m->n_ops; i++) {
        const cic_op *op = &m->ops[i];
        int ids[6] = {op->in[0], op->in[1], op->in[2], op->w, op->b, op->g};
        for (k = 0; k < 6; k++)
            if (ids[k] >= 0 && m->t[ids[k]].role == CIC_T_ACT)
                last[ids[k]] = i;
    }
    for (i = 0; i < m->n_ops; i++) {
        const cic_op *op = &m->ops[i];
        int ids[6] = {op->in[0], op->in[1], op->in[2], op->w, op->b, op->g};
        int o = op->out, s = -1, fit = -1, big = -1;
        if (op->kind == CIC_OP_ATTN) {
            int N = m->cfg.tokens, nh = r->rows / N * op->heads;
            size_t a = (size_t)attn_group(nh, N) * N * N;
            asc = a > asc ? a : asc;
        }
        if (slot[o] < 0) {
            size_t need = cic_mul_size(cic_mul_size((size_t)rows_of(r, o), (size_t)m->t[o].cols),
                                       sizeof(REAL));
            if (need > SIZE_MAX / 2)
                goto cleanup;
            need = (need + 63) / 64 * 64; /* cache-line aligned */
            for (k = 0; k < 3 && s < 0; k++)
                if (inplace_ok(r, op, k, last, i) && slot[op->in[k]] >= 0 &&
                    owner[slot[op->in[k]]] == op->in[k])
                    s = slot[op->in[k]];
            if (s < 0) {
                /* the smallest free slot that fits, else the largest free
                 * slot grown, else a new slot */
                for (k = 0; k < ns; k++) {
                    if (owner[k] >= 0)
                        continue;
                    if (ssz[k] >= need && (fit < 0 || ssz[k] < ssz[fit]))
                        fit = k;
                    if (big < 0 || ssz[k] > ssz[big])
                        big = k;
                }
                s = fit >= 0 ? fit : big >= 0 ? big : ns++;
            }
            if (ssz[s] < need)
                ssz[s] = need;
            owner[s] = o;
            slot[o] = s;
        }
        for (k = 0; k < 6; k++) {
            int t = ids[k];
            if (t >= 0 && m->t[t].role == CIC_T_ACT && last[t] == i && t != m->output &&
                slot[t] >= 0 && owner[slot[t]] == t)
                owner[slot[t]] = -1;
        }
        if (last[o] < i && o != m->output && owner[slot[o]] == o)
            owner[slot[o]] = -1;
    }
    for (k = 0; k < ns; k++) {
        size_t a = ssz[k];
        ssz[k] = sum; /* now the slot's offset */
        if (sum > SIZE_MAX / 2 - a)
            goto cleanup;
        sum += a;
    }
    for (i = 0; i < nt; i++)
        off[i] = slot[i] >= 0 ? ssz[slot[i]] : SIZE_MAX;
    *scores_off = sum;
    asc = cic_mul_size(asc, sizeof(REAL));
    if (asc > SIZE_MAX / 2 - sum)
        goto cleanup;
    *total = sum + asc;
    rc = 0;
cleanup:
    free(last);
    free(slot);
    free(owner);
    free(ssz);
    return rc;
}

/* n bytes for the arena; large ones aligned for transparent huge pages
 * (a hint: without them the arena works the same). Free with free(). */
static void *arena_alloc(size_t n)
{
    void *p = NULL;
    if (n >= R_HUGE) {
        size_t a = n / R_HUGE * R_HUGE + (n % R_HUGE ? R_HUGE : 0);
        if (posix_memalign(&p, R_HUGE, a) != 0)
            return NULL;
#ifdef MADV_HUGEPAGE
        (void)madvise(p, a, MADV_HUGEPAGE);
#endif
        return p;
    }
    return malloc(n ? n : 1);
}

static int real_run(REAL *out, const cic_model *m, enum cic_matmul mm, bool rounded,
                    const cic_run_opts *o)
{
    realrun r;
    int i, rc = -1, s0 = o ? o->sample0 : 0;
    int ns = (o && o->n_samples > 0) ? o->n_samples : m->cfg.samples;
    size_t n, total = 0, scores_off = 0, *off = NULL;
    char *arena = NULL;
    memset(&r, 0, sizeof r);
    CIC_ASSERT(s0 >= 0 && s0 + ns <= m->cfg.samples);
    r.m = m;
    r.mm = mm;
    r.rows = ns * m->cfg.tokens;
    r.ns = ns;
    r.s0 = s0;
    r.nt = real_threads();
    r.buf = cic_calloc((size_t)m->n_t, sizeof *r.buf);
    r.val = cic_calloc((size_t)m->n_t, sizeof *r.val);
    off = cic_calloc((size_t)m->n_t, sizeof *off);
    if (!r.buf || !r.val || !off || load_vals(&r, rounded) < 0 ||
        plan_arena(&r, off, &total, &scores_off) < 0)
        goto cleanup;
    arena = arena_alloc(total);
    if (!arena)
        goto cleanup;
    for (i = 0; i < m->n_t; i++)
        if (off[i] != SIZE_MAX)
            r.buf[i] = (REAL *)(arena + off[i]);
    r.scores = (REAL *)(arena + scores_off);
    for (i = 0; i < m->n_ops; i++) {
        const cic_op *op = &m->ops[i];
        const cic_tensor *ot = &m->t[op->out];
        REAL *y = r.buf[op->out];
        int rows = rows_of(&r, op->out);
        size_t cnt = (size_t)rows * ot->cols;
        switch (op->kind) {
        case CIC_OP_LINEAR:
            op_linear(&r, op, y);
            break;
        case CIC_OP_NORM:
            op_norm(&r, op, y);
            break;
        case CIC_OP_ATTN:
            op_attn(&r, op, y);
            break;
        case CIC_OP_ACT:
        case CIC_OP_GLU:
        case CIC_OP_ADD: {
            ew_job jb;
            jb.kind = op->kind;
            jb.act = op->act;
            jb.y = y;
            jb.a = src(&r, op->in[0]);
            jb.b = op->kind == CIC_OP_ACT ? NULL : src(&r, op->in[1]);
            jb.cols = ot->cols;
            par_range(&r, rows, ew_cost(op->kind, op->act) * (double)cnt, ew_rows, &jb);
            if (op->kind == CIC_OP_ACT)
                r.fc.site[op->site] += cic_engine_act_flops(op->act) * (double)cnt;
            else if (op->kind == CIC_OP_GLU)
                r.fc.site[op->site] += (cic_engine_act_flops(op->act) + 1) * (double)cnt;
            else
                r.fc.site[op->site] += (double)cnt;
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
        default:
            CIC_ASSERT(0 && "op kind");
        }
    }
    n = (size_t)rows_of(&r, m->output) * m->t[m->output].cols;
    memcpy(out, src(&r, m->output), n * sizeof *out);
    if (o && o->flops)
        for (i = 0; i < CIC_SITE_COUNT; i++)
            o->flops->site[i] += r.fc.site[i];
    rc = 0;
cleanup:
    free(arena);
    free(r.buf);
#if R_VALS_OWNED
    if (r.val)
        for (i = 0; i < m->n_t; i++)
            free((void *)r.val[i]);
#endif
    free(r.val);
    free(off);
    return rc;
}
