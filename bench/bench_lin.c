/* SPDX-License-Identifier: MIT */
/* bench_lin.c: part (1) of cicheck-bench (bench.c): the MPFR dot kernel
 * against an mpfr_fma loop, and the linear op as the truth runs it (row
 * kernel and exact dgemm slices). */
#include "bench_int.h"

#include "base/mpslice.h"
#include "base/mpvec.h"
#include "engine/engine.h"
#include "model/model.h"

#include <cblas.h>
#include <math.h>
#include <mpfr.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define PREC 128

/* A value in [-1, 1) with all prec bits of its mantissa random. */
static void mp_random_full(mpfr_ptr r)
{
    mpfr_prec_t p = mpfr_get_prec(r), have = 0;
    mpfr_set_zero(r, 1);
    while (have < p) {
        mpfr_t t;
        mpfr_init2(t, 64);
        mpfr_set_ui_2exp(t, (unsigned long)(cic_bench_rng_u64() >> 11), -53 - have, MPFR_RNDN);
        mpfr_add(r, r, t, MPFR_RNDZ);
        mpfr_clear(t);
        have += 53;
    }
    mpfr_mul_2ui(r, r, 1, MPFR_RNDN);
    mpfr_sub_ui(r, r, 1, MPFR_RNDN);
}

/* ---- (1) the MPFR dot kernel against an mpfr_fma loop ---- */

typedef struct {
    int M, N, K;
    mpfr_prec_t prec; /* of x, the outputs and the fma accumulator */
    mpfr_t *x, *w, *b, *y_dot, *y_fma;
} lin_data;

static void lin_init(lin_data *L, int M, int N, int K, mpfr_prec_t prec, mpfr_prec_t wprec)
{
    size_t i;
    L->M = M;
    L->N = N;
    L->K = K;
    L->prec = prec;
    L->x = cic_mpvec_create((size_t)M * K, prec);
    L->w = cic_mpvec_create((size_t)N * K, wprec);
    L->b = cic_mpvec_create((size_t)N, wprec);
    L->y_dot = cic_mpvec_create((size_t)M * N, prec);
    L->y_fma = cic_mpvec_create((size_t)M * N, prec);
    if (!L->x || !L->w || !L->b || !L->y_dot || !L->y_fma) {
        fprintf(stderr, "cicheck-bench: out of memory\n");
        exit(2);
    }
    /* activations: prec-bit values as the engine carries them; weights and
     * bias: f32 values (24 bits, what the engine converts an untransformed
     * weight to) or full-mantissa values at wprec (transformed hp weights) */
    for (i = 0; i < (size_t)M * K; i++)
        mp_random_full(L->x[i]);
    for (i = 0; i < (size_t)N * K; i++) {
        if (wprec <= 24)
            mpfr_set_flt(L->w[i], cic_bench_normal_f(0.02), MPFR_RNDN);
        else {
            mp_random_full(L->w[i]);
            mpfr_div_ui(L->w[i], L->w[i], 32, MPFR_RNDN);
        }
    }
    for (i = 0; i < (size_t)N; i++) {
        if (wprec <= 24)
            mpfr_set_flt(L->b[i], cic_bench_normal_f(0.02), MPFR_RNDN);
        else
            mp_random_full(L->b[i]);
    }
}

static void lin_clear(lin_data *L)
{
    cic_mpvec_destroy(L->x, (size_t)L->M * L->K);
    cic_mpvec_destroy(L->w, (size_t)L->N * L->K);
    cic_mpvec_destroy(L->b, (size_t)L->N);
    cic_mpvec_destroy(L->y_dot, (size_t)L->M * L->N);
    cic_mpvec_destroy(L->y_fma, (size_t)L->M * L->N);
}

/* The engine's linear op (engine_mpfr.c op_linear), single thread: the
 * weights packed once, then cic_mp_linear_rows; the packing is timed too. */
static double time_dot(lin_data *L, cic_dot_scratch *s)
{
    cic_mp_pack all, *views;
    double t0 = cic_bench_now();
    if (cic_mp_pack_rows(&all, &views, (const mpfr_t *)L->w, (size_t)L->N, (size_t)L->K) < 0) {
        fprintf(stderr, "cicheck-bench: out of memory\n");
        exit(2);
    }
    cic_mp_linear_rows(L->y_dot, (const mpfr_t *)L->x, (size_t)L->M, (const mpfr_t *)L->w, views,
                       (const mpfr_t *)L->b, (size_t)L->N, (size_t)L->K, NULL, s);
    free(views);
    cic_mp_pack_clear(&all);
    return cic_bench_now() - t0;
}

/* The same sums as a plain mpfr_fma accumulation at L->prec bits. */
static double time_fma(lin_data *L, mpfr_ptr acc)
{
    int i, j, p;
    double t0 = cic_bench_now();
    for (i = 0; i < L->M; i++) {
        const mpfr_t *x = L->x + (size_t)i * L->K;
        for (j = 0; j < L->N; j++) {
            const mpfr_t *w = L->w + (size_t)j * L->K;
            mpfr_set(acc, L->b[j], MPFR_RNDN);
            for (p = 0; p < L->K; p++)
                mpfr_fma(acc, x[p], w[p], acc, MPFR_RNDN);
            mpfr_set(L->y_fma[(size_t)i * L->N + j], acc, MPFR_RNDN);
        }
    }
    return cic_bench_now() - t0;
}

/* Largest |dot - fma| / |dot| over the outputs (a check that both loops
 * computed the same sums; the fma loop rounds K times, the kernel once). */
static double lin_maxrel(const lin_data *L)
{
    size_t i, n = (size_t)L->M * L->N;
    double mx = 0;
    mpfr_t d;
    mpfr_init2(d, L->prec);
    for (i = 0; i < n; i++) {
        double r;
        mpfr_sub(d, L->y_dot[i], L->y_fma[i], MPFR_RNDN);
        if (mpfr_zero_p(L->y_dot[i]))
            continue;
        mpfr_div(d, d, L->y_dot[i], MPFR_RNDN);
        r = fabs(mpfr_get_d(d, MPFR_RNDN));
        if (r > mx)
            mx = r;
    }
    mpfr_clear(d);
    return mx;
}

/* Part (1) at prec bits: ns per multiply-add of the kernel, returned in
 * *ns, and the ratio to the fma loop. */
static double bench_kernel(int M, int N, int K, mpfr_prec_t prec, mpfr_prec_t wprec,
                           const char *label, double *ns)
{
    lin_data L;
    cic_dot_scratch s;
    mpfr_t acc;
    double best_dot = 1e300, best_fma = 1e300, mac = (double)M * N * K, ratio;
    int r;
    lin_init(&L, M, N, K, prec, wprec);
    if (cic_dot_scratch_init(&s, (size_t)K, prec) < 0) {
        fprintf(stderr, "cicheck-bench: out of memory\n");
        exit(2);
    }
    mpfr_init2(acc, prec);
    /* warm-up: one output row each */
    {
        lin_data W = L;
        W.M = 1;
        time_dot(&W, &s);
        time_fma(&W, acc);
    }
    for (r = 0; r < cic_bench_reps; r++) {
        double a = time_dot(&L, &s), b = time_fma(&L, acc);
        if (a < best_dot)
            best_dot = a;
        if (b < best_fma)
            best_fma = b;
    }
    ratio = best_dot / best_fma;
    *ns = 1e9 * best_dot / mac;
    printf("  %s, x at %ld bits\n", label, (long)prec);
    printf("    shape M x N x K = %d x %d x %d (%.3g multiply-adds), w and b %ld bits\n",
           M, N, K, mac, (long)wprec);
    printf("    engine kernel (exact fixed-point sums):      %8.2f ns/multiply-add  (best %.3f s)\n",
           *ns, best_dot);
    printf("    mpfr_fma loop (acc %3ld bits):                 %8.2f ns/multiply-add  (best %.3f s)\n",
           (long)prec, 1e9 * best_fma / mac, best_fma);
    printf("    max |dot - fma| / |dot| = %.2g\n", lin_maxrel(&L));
    printf("    ratio kernel / fma = %.3f   (target <= 0.75: %s)\n", ratio,
           ratio <= 0.75 ? "met" : "NOT met");
    mpfr_clear(acc);
    cic_dot_scratch_clear(&s);
    lin_clear(&L);
    return ratio;
}

/* Part (1): the kernel at 64 and 128 bits, f32 and full-mantissa weights. */
void cic_bench_part1(int quick)
{
    static const mpfr_prec_t precs[2] = {64, 128};
    int M = quick ? 4 : 32, K = 1152, N = 1152, q;
    double ns_real[2], ns_full[2];
    printf("\n(1) MPFR dot kernel vs plain mpfr_fma loop (1 thread, LINEAR-shaped loop)\n");
    for (q = 0; q < 2; q++) {
        bench_kernel(M, N, K, precs[q], 24,
                     "real use: untransformed weights (f32 values at 24 bits)", &ns_real[q]);
        bench_kernel(quick ? 2 : 24, N, K, precs[q], precs[q],
                     "transformed weights (full mantissas at x's precision, as hp tensors)",
                     &ns_full[q]);
    }
    printf("  summary, ns per multiply-add: f32 weights %.2f at 64 bits (target < 3: %s),"
           " %.2f at 128;\n    full-mantissa weights %.2f at 64 bits, %.2f at 128\n",
           ns_real[0], ns_real[0] < 3 ? "met" : "NOT met", ns_real[1], ns_full[0], ns_full[1]);
}

/* ---- (1) the engine's linear op as the truth runs it ---- */

/* The slices' scratch, kept across ops as an engine run keeps it. */
static cic_slice_ws *g_slice_ws;

typedef struct {
    lin_data *L;
    const cic_mp_pack *views;
    int lo, hi;
} op_job;

/* Rows [lo, hi) through the row kernel, as one engine thread runs them
 * (engine_mpfr.c linear_rows): its own scratch, a declined dot's weight
 * row read back out of the pack. */
static void *op_rows(void *a)
{
    op_job *j = a;
    lin_data *L = j->L;
    cic_dot_scratch s;
    mpfr_t *wrow = cic_mpvec_create((size_t)L->K, 24);
    if (!wrow || cic_dot_scratch_init(&s, (size_t)L->K, L->prec) < 0) {
        fprintf(stderr, "cicheck-bench: out of memory\n");
        exit(2);
    }
    cic_mp_linear_rows(L->y_dot + (size_t)j->lo * L->N,
                       (const mpfr_t *)L->x + (size_t)j->lo * L->K, (size_t)(j->hi - j->lo), NULL,
                       j->views, (const mpfr_t *)L->b, (size_t)L->N, (size_t)L->K, wrow, &s);
    cic_dot_scratch_clear(&s);
    cic_mpvec_destroy(wrow, (size_t)L->K);
    mpfr_free_cache2(MPFR_FREE_LOCAL_CACHE);
    return NULL;
}

/* One linear op as the engine's mp_linear runs it, into y (y_dot or
 * y_fma): the float32 weights packed, then the dgemm slices
 * (cic_mp_linear_sliced, its own choice) or the row kernel with the rows
 * split over nt threads. *took: the slices took the op. */
static double time_op(lin_data *L, const float *wf, int nt, bool sliced, mpfr_t *y, bool *took)
{
    op_job job[16];
    pthread_t th[16];
    cic_mp_pack all, *views;
    double t0 = cic_bench_now();
    int t;
    if (cic_mp_pack_rows_f32(&all, &views, wf, (size_t)L->N, (size_t)L->K) != 0) {
        fprintf(stderr, "cicheck-bench: out of memory\n");
        exit(2);
    }
    *took = sliced && cic_mp_linear_sliced(y, (const mpfr_t *)L->x, (size_t)L->M, NULL, views,
                                           (const mpfr_t *)L->b, (size_t)L->N, (size_t)L->K,
                                           nt, NULL, g_slice_ws) == 0;
    if (!*took) {
        mpfr_t *keep = L->y_dot;
        L->y_dot = y;
        for (t = 0; t < nt; t++) {
            job[t] = (op_job){L, views, (int)((long)L->M * t / nt),
                              (int)((long)L->M * (t + 1) / nt)};
            if (t > 0 && pthread_create(&th[t], NULL, op_rows, &job[t]) != 0)
                exit(2);
        }
        op_rows(&job[0]);
        for (t = 1; t < nt; t++)
            pthread_join(th[t], NULL);
        L->y_dot = keep;
    }
    free(views);
    cic_mp_pack_clear(&all);
    return cic_bench_now() - t0;
}

/* The op on M x N x K at prec, float32 weights, on the MPFR engine's
 * default threads: the row kernel and the dgemm slices interleaved, ns
 * per multiply-add (wall) of each; the outputs compared bit for bit. */
static void bench_op(int M, int N, int K, mpfr_prec_t prec)
{
    lin_data L;
    int nt = cic_rt_mpfr_threads(NULL), r;
    double best_old = 1e300, best_new = 1e300, mac = (double)M * N * K;
    float *wf = cic_bench_xmalloc((size_t)N * K * sizeof *wf);
    bool took = false, t2;
    size_t i, nout = (size_t)M * N, same = 0;
    lin_init(&L, M, N, K, prec, 24);
    for (i = 0; i < (size_t)N * K; i++)
        wf[i] = mpfr_get_flt(L.w[i], MPFR_RNDN);
    time_op(&L, wf, nt, true, L.y_fma, &t2); /* warm-up */
    for (r = 0; r < cic_bench_reps; r++) {
        double a = time_op(&L, wf, nt, false, L.y_dot, &t2);
        double b = time_op(&L, wf, nt, true, L.y_fma, &took);
        best_old = a < best_old ? a : best_old;
        best_new = b < best_new ? b : best_new;
    }
    for (i = 0; i < nout; i++)
        same += mpfr_equal_p(L.y_dot[i], L.y_fma[i]) &&
                mpfr_signbit(L.y_dot[i]) == mpfr_signbit(L.y_fma[i]);
    printf("  %d x %d x %d, %3ld bits, %d threads: row kernel %6.3f, dgemm slices %6.3f "
           "ns/multiply-add%s (x %.2f); same bits: %s\n",
           M, N, K, (long)prec, nt, 1e9 * best_old / mac, 1e9 * best_new / mac,
           took ? "" : " (declined: the row kernel)", best_old / best_new,
           same == nout ? "yes" : "NO");
    free(wf);
    lin_clear(&L);
}

/* Part (1), the engine's op: the truth's shapes of a DiT-XL/2 block
 * (512 rows; the attention's and MLP's 1152 x 1152 and 1152 x 4608) at
 * the working precisions, and the 1152 x 1152 one at the precisions a
 * proof escalates to (256 to 2048 bits). */
void cic_bench_part1_op(int quick)
{
    static const mpfr_prec_t precs[2] = {64, 128}, high[5] = {256, 384, 512, 1024, 2048};
    int M = quick ? 64 : 512, q;
    g_slice_ws = cic_mp_slice_ws_create();
    printf("\n(1) the MPFR engine's linear op as the truth runs it (float32 weights packed,\n"
           "    x full-mantissa at its precision; wall time on the engine's threads, best of\n"
           "    %d; OpenBLAS %d threads for the dgemm slices)\n",
           cic_bench_reps, openblas_get_num_threads());
    for (q = 0; q < 2; q++) {
        bench_op(M, 1152, 1152, precs[q]);
        bench_op(M, 1152, 4608, precs[q]);
    }
    for (q = 0; q < 5; q++)
        bench_op(M, 1152, 1152, high[q]);
    cic_mp_slice_ws_destroy(g_slice_ws);
}
