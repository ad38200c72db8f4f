/* SPDX-License-Identifier: MIT */
/* engine_real_core.h: part of the real engines' template (engine_real.h,
 * which includes it first; never included by anything else): the state of a
 * run, the row ranges over threads and the matmuls the kernels share.
 *
 * Threads: the work outside the gemm calls (the elementwise ops, norms,
 * bias adds, softmax rows, the fixed-order matmul) is split by rows over as
 * many threads as OpenBLAS uses (openblas_get_num_threads, so the thread
 * budget is the environment's, as for the gemms). Every output value is
 * computed whole by one thread with the same operations in the same order
 * as on one thread, and the gemm calls keep their arguments, so the results
 * are the same bits for any thread count. */
#include "engine.h"

#include <cblas.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

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

typedef struct {
    const cic_model *m;
    enum cic_matmul mm;
    int rows;        /* token rows this run covers */
    int ns;          /* samples this run covers */
    int s0;          /* first sample */
    int nt;          /* threads for the work outside the gemm calls */
    REAL **buf;      /* per tensor: storage in the run's arena (activations,
                      * and weight and input values made for the run) */
    const REAL **val; /* per tensor: weight and input values (whole tensor) */
    unsigned char *todo; /* per tensor: values to make before its first reader */
    bool rounded;    /* the float32 values, not the unrounded ones */
    REAL *scores;    /* attention scores of a group of heads (in the arena) */
    cic_flop_count fc;
    const cic_run_opts *o; /* the caller's options (taps), or NULL */
    void *lx;        /* the low-precision engine's state (R_LOWP), else NULL */
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

/* Heads whose scores are held at once (see R_ATTN_SCORES_MAX), of n. */
static int attn_group(int n, int N)
{
    size_t g = R_ATTN_SCORES_MAX / ((size_t)N * N);
    return g < 1 ? 1 : g > (size_t)n ? n : (int)g;
}
