/* SPDX-License-Identifier: MIT */
/* fwhtw.c: cicheck-fwhtw, the cost of a weight rotation by a randomized
 * Hadamard Q at the LLaMA-2-7B layer's shapes (d 4096 for R1, the MLP's
 * 11008 = 172 x 64 for R4), per line of d weights and extrapolated to the
 * layer's lines (R1: 34304 reader rows and 15104 writer columns of 4096,
 * plus the input's 128 rows; R4: 4096 rows of 11008):
 *   fast    the exact fast transform (src/xform/fwht_w.h) at 53 and 128
 *           bits, whose bits are the correctly rounded dense product's;
 *   dense   the product it replaces, bit for bit: cic_mp_matmul by the MPFR
 *           Q (correctly rounded dot products), at d 1024 (a dense MPFR Q
 *           of order 4096 takes over 1 GB);
 *   dgemm   transform precision f64-openblas as it runs today: Q made as
 *           doubles (its time given apart), then one dgemm (not correctly
 *           rounded: its bits are OpenBLAS's).
 * The weights are folded ones (a float32 times a float32 gain: 48-bit
 * doubles). Prints the load average; a benchmark, it checks nothing.
 * Usage: cicheck-fwhtw [--lines N (fast, default 64)] [--gemm-lines N
 * (default 512)] [--threads T (default 2)] */
#include "bench_int.h"

#include "base/mpgemm.h"
#include "base/mpvec.h"
#include "xform/fwht_w.h"
#include "xform/qmat.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* n x d folded weights: float32 w times float32 g, exact in doubles. */
static double *weights(size_t n, int d)
{
    double *w = malloc(n * (size_t)d * sizeof *w);
    size_t i;
    for (i = 0; w && i < n * (size_t)d; i++)
        w[i] = (double)cic_bench_normal_f(0.02) * (double)(float)(0.5 + cic_bench_rng_unit());
    return w;
}

/* Seconds per line of the fast transform of n lines at prec p. */
static double fast_line(const double *w, size_t n, int d, mpfr_prec_t p, int threads)
{
    mpfr_t *in = cic_mpvec_create(n * (size_t)d, 53), *out = cic_mpvec_create(n * (size_t)d, p);
    cic_xf_hq h = {d, cic_hadamard_base_order_k(d, 0), NULL, calloc((size_t)d, 1)};
    double t = -1;
    size_t i;
    if (in && out && h.sign && cic_hadamard_base_k(&h.hk, 0, d) == 0) {
        cic_q_hadamard_signs(h.sign, d, 1);
        for (i = 0; i < n * (size_t)d; i++)
            mpfr_set_d(in[i], w[i], MPFR_RNDN);
        t = cic_bench_now();
        if (_cic_xf_fwht_lines(out, (const mpfr_t *)in, n, (size_t)d, 1, &h, p, threads) < 0)
            t = -1;
        else
            t = (cic_bench_now() - t) / (double)n;
    }
    cic_mpvec_destroy(in, n * (size_t)d);
    cic_mpvec_destroy(out, n * (size_t)d);
    free(h.hk);
    free(h.sign);
    return t;
}

/* Seconds per line of the fast transform and of cic_mp_matmul (the dense
 * MPFR product, same bits) on n lines of order d at prec p. */
static void vs_dense(const double *w, size_t n, int d, mpfr_prec_t p, int threads)
{
    mpfr_t *in = cic_mpvec_create(n * (size_t)d, 53), *out = cic_mpvec_create(n * (size_t)d, p);
    mpfr_t *q = cic_mpvec_create((size_t)d * d, p);
    cic_dot_scratch s;
    double t, tf;
    size_t i;
    if (!in || !out || !q || cic_dot_scratch_init(&s, (size_t)d, p) < 0)
        return;
    for (i = 0; i < n * (size_t)d; i++)
        mpfr_set_d(in[i], w[i], MPFR_RNDN);
    cic_q_hadamard_k(q, d, 0, 1, p);
    tf = fast_line(w, n, d, p, threads);
    t = cic_bench_now();
    cic_mp_matmul(out, (const mpfr_t *)in, false, (const mpfr_t *)q, false, (int)n, d, d, false,
                  threads, &s);
    t = (cic_bench_now() - t) / (double)n;
    printf("MPFR d %d at %ld bits: fast exact %.3f ms/line, dense cic_mp_matmul %.3f ms/line "
           "(x%.0f)\n", d, (long)p, 1e3 * tf, 1e3 * t, t / tf);
    cic_dot_scratch_clear(&s);
    cic_mpvec_destroy(in, n * (size_t)d);
    cic_mpvec_destroy(out, n * (size_t)d);
    cic_mpvec_destroy(q, (size_t)d * d);
}

/* Seconds to make Q as doubles (*tq) and per line of one dgemm of n lines. */
static double gemm_line(const double *w, size_t n, int d, double *tq)
{
    double *q = malloc((size_t)d * d * sizeof *q), *c = malloc(n * (size_t)d * sizeof *c), t = -1;
    if (q && c) {
        t = cic_bench_now();
        cic_q_hadamard_k_f64(q, d, 0, 1);
        *tq = cic_bench_now() - t;
        t = cic_bench_now();
        cic_gemm_f64(c, w, false, q, false, (int)n, d, d);
        t = (cic_bench_now() - t) / (double)n;
    }
    free(q);
    free(c);
    return t;
}

int main(int argc, char **argv)
{
    static const int ds[] = {4096, 11008};
    static const double lines7b[] = {34304 + 15104 + 128, 4096};
    size_t nf = 64, ng = 512;
    int threads = 2, a, k;
    for (a = 1; a + 1 < argc; a += 2) {
        if (!strcmp(argv[a], "--lines"))
            nf = (size_t)atol(argv[a + 1]);
        else if (!strcmp(argv[a], "--gemm-lines"))
            ng = (size_t)atol(argv[a + 1]);
        else if (!strcmp(argv[a], "--threads"))
            threads = atoi(argv[a + 1]);
    }
    printf("load average %.2f, %d threads (OPENBLAS_NUM_THREADS for dgemm)\n",
           cic_bench_loadavg(), threads);
    {
        double *w = weights(64, 1024);
        if (!w)
            return 1;
        vs_dense(w, 64, 1024, 128, threads);
        free(w);
    }
    for (k = 0; k < 2; k++) {
        int d = ds[k];
        size_t n = nf > ng ? nf : ng;
        double *w = weights(n, d), f53, f128, g, tq = 0;
        if (!w)
            return 1;
        f53 = fast_line(w, nf, d, 53, threads);
        f128 = fast_line(w, nf, d, 128, threads);
        g = gemm_line(w, ng, d, &tq);
        printf("%s d %5d (K %3d): fast exact %.3f ms/line at 53 bits, %.3f at 128; "
               "dgemm %.3f ms/line + Q %.2f s\n",
               k ? "R4" : "R1", d, cic_hadamard_base_order_k(d, 0), 1e3 * f53, 1e3 * f128,
               1e3 * g, tq);
        printf("   the layer's %.0f lines: fast %.1f s (53 bits), %.1f s (128); dgemm %.1f s\n",
               lines7b[k], f53 * lines7b[k], f128 * lines7b[k], g * lines7b[k] + tq);
        free(w);
    }
    return 0;
}
