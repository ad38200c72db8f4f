/* SPDX-License-Identifier: MIT */
/* test_mpvec.c: the fixed-point fast path of the dot product against exact
 * MPFR products plus mpfr_sum, bit for bit, over precisions, mixed
 * precisions, strides, cancellation, zeros, biases and exponent spans; and
 * the cases where it must decline. */
#include "testutil.h"

#include "base/mpgemm.h"
#include "base/mpvec.h"
#include "base/rng.h"

#include <math.h>
#include <stdbool.h>
#include <string.h>

/* A random value at v's precision: a random significand of every bit, an
 * exponent in [-span, span], a random sign; zero with probability pz/16. */
static void rand_value(mpfr_ptr v, uint64_t key, uint64_t *ctr, int span, int pz)
{
    mpfr_prec_t p = mpfr_get_prec(v), done = 0;
    uint64_t u = cic_rng_u64(key, (*ctr)++);
    mpfr_t t;
    if ((int)(u & 15) < pz) {
        mpfr_set_zero(v, (u >> 4) & 1 ? -1 : 1);
        return;
    }
    mpfr_init2(t, p);
    mpfr_set_ui(v, 0, MPFR_RNDN);
    while (done < p) {
        /* 32 fresh bits at a time, exact at p bits after the final scaling */
        mpfr_mul_2ui(v, v, 32, MPFR_RNDN);
        mpfr_add_ui(v, v, (unsigned long)(cic_rng_u64(key, (*ctr)++) >> 32), MPFR_RNDN);
        done += 32;
    }
    mpfr_set(t, v, MPFR_RNDZ); /* keep p leading bits */
    mpfr_set(v, t, MPFR_RNDN);
    if (mpfr_zero_p(v))
        mpfr_set_ui(v, 1, MPFR_RNDN);
    mpfr_set_exp(v, span ? (mpfr_exp_t)(cic_rng_u64(key, (*ctr)++) % (uint64_t)(2 * span + 1)) - span
                         : 1);
    if ((u >> 5) & 1)
        mpfr_neg(v, v, MPFR_RNDN);
    mpfr_clear(t);
}

static bool same_bits(mpfr_srcptr got, mpfr_srcptr want)
{
    return (mpfr_equal_p(got, want) && mpfr_signbit(got) == mpfr_signbit(want)) ||
           (mpfr_nan_p(got) && mpfr_nan_p(want));
}

static void check_equal(mpfr_srcptr got, mpfr_srcptr want, const char *what, int trial)
{
    if (mpfr_equal_p(got, want) && mpfr_signbit(got) == mpfr_signbit(want))
        return;
    if (mpfr_nan_p(got) && mpfr_nan_p(want))
        return;
    mpfr_fprintf(stderr, "%s, trial %d: got %Ra, want %Ra\n", what, trial, got, want);
    fail_msg("fast dot product differs from the MPFR reference (%s)", what);
}

typedef struct {
    mpfr_prec_t px, py, pr;
    int span, pz, n;
    bool bias, cancel;
    size_t incx, incy;
} shape;

/* Runs trials of one shape; returns how many the fast path took. */
static int run_shape(const shape *sh, int trials, uint64_t key)
{
    size_t nx = (size_t)sh->n * sh->incx + 1, ny = (size_t)sh->n * sh->incy + 1;
    mpfr_t *x = cic_mpvec_create(nx, sh->px), *y = cic_mpvec_create(ny, sh->py);
    mpfr_t got, want, b, any;
    mpfr_prec_t pmax = sh->px > sh->py ? sh->px : sh->py;
    cic_dot_scratch sc;
    uint64_t ctr = 0;
    int t, fast = 0;
    size_t i;
    assert_non_null(x);
    assert_non_null(y);
    assert_int_equal(cic_dot_scratch_init(&sc, (size_t)sh->n, pmax), 0);
    mpfr_inits2(sh->pr, got, want, any, (mpfr_ptr)0);
    mpfr_init2(b, 2 * pmax);
    for (t = 0; t < trials; t++) {
        for (i = 0; i < nx; i++)
            rand_value(x[i], key, &ctr, sh->span, sh->pz);
        for (i = 0; i < ny; i++)
            rand_value(y[i], key, &ctr, sh->span, sh->pz);
        if (sh->cancel && sh->n >= 2) {
            /* the second half cancels the first exactly, but one term */
            int h = sh->n / 2, k;
            for (k = 0; k < h; k++) {
                mpfr_neg(x[(size_t)(h + k) * sh->incx], x[(size_t)k * sh->incx], MPFR_RNDN);
                mpfr_set(y[(size_t)(h + k) * sh->incy], y[(size_t)k * sh->incy], MPFR_RNDN);
            }
            if (t % 3 == 0 && (sh->n & 1)) /* and sometimes exactly zero */
                mpfr_set_zero(x[(size_t)(sh->n - 1) * sh->incx], 1);
        }
        rand_value(b, key, &ctr, sh->span, sh->pz);
        cic_mp_dot_mpfr(want, (const mpfr_t *)x, sh->incx, (const mpfr_t *)y, sh->incy,
                        (size_t)sh->n, sh->bias ? b : NULL, &sc);
        mpfr_set_nan(got);
        if (cic_mp_dot_fixed(got, (const mpfr_t *)x, sh->incx, (const mpfr_t *)y, sh->incy,
                             (size_t)sh->n, sh->bias ? b : NULL) == 0) {
            fast++;
            check_equal(got, want, "fast path", t);
        } else {
            assert_true(mpfr_nan_p(got)); /* declined: r untouched */
        }
        cic_mp_dot(got, (const mpfr_t *)x, sh->incx, (const mpfr_t *)y, sh->incy,
                   (size_t)sh->n, sh->bias ? b : NULL, &sc);
        check_equal(got, want, "cic_mp_dot", t);
        if (sh->bias && sh->pr == 2 * pmax) {
            /* r may alias the bias */
            mpfr_set(any, b, MPFR_RNDN);
            cic_mp_dot(any, (const mpfr_t *)x, sh->incx, (const mpfr_t *)y, sh->incy,
                       (size_t)sh->n, any, &sc);
            check_equal(any, want, "aliased bias", t);
        }
    }
    mpfr_clears(got, want, b, any, (mpfr_ptr)0);
    cic_dot_scratch_clear(&sc);
    cic_mpvec_destroy(x, nx);
    cic_mpvec_destroy(y, ny);
    return fast;
}

static void test_fast_equals_mpfr(void **state)
{
    static const shape shapes[] = {
        /* px, py, pr, span, pz, n, bias, cancel, incx, incy */
        { 128, 24, 128, 8, 0, 64, false, false, 1, 1 },   /* activations x f32 weights */
        { 128, 24, 128, 8, 2, 1152, true, false, 1, 1 },
        { 128, 128, 128, 20, 1, 72, false, false, 1, 7 }, /* attention, strided */
        { 128, 128, 256, 6, 0, 33, true, true, 3, 1 },    /* cancellation, bias 2p */
        { 24, 24, 24, 4, 0, 17, false, true, 1, 1 },
        { 53, 53, 53, 30, 3, 100, true, false, 2, 2 },
        { 64, 53, 64, 100, 0, 50, false, false, 1, 1 },
        { 200, 24, 200, 3, 0, 40, true, true, 1, 1 },
        { 256, 256, 512, 10, 1, 31, true, true, 1, 1 },   /* largest fast factors */
        { 65, 129, 100, 60, 4, 9, true, false, 1, 1 },    /* limbs not full */
        { 128, 24, 128, 1900, 0, 20, false, false, 1, 1 },/* spans near the limit */
        { 128, 128, 128, 8, 15, 5, true, false, 1, 1 },   /* mostly zeros */
        { 128, 128, 128, 8, 0, 1, false, false, 1, 1 },
    };
    size_t k;
    int trials = 40 * cic_test_multiplier();
    (void)state;
    for (k = 0; k < sizeof shapes / sizeof shapes[0]; k++) {
        int fast = run_shape(&shapes[k], trials, cic_rng_key(k, "test_mpvec"));
        /* ordinary shapes must really exercise the fast path */
        if (shapes[k].span <= 100 && shapes[k].pz < 15)
            assert_true(fast >= trials * 3 / 4);
    }
}

static void test_declines(void **state)
{
    mpfr_t *x = cic_mpvec_create(4, 128), *y = cic_mpvec_create(4, 128);
    mpfr_t r, big;
    int i;
    (void)state;
    mpfr_init2(r, 128);
    for (i = 0; i < 4; i++) {
        mpfr_set_si(x[i], i + 1, MPFR_RNDN);
        mpfr_set_si(y[i], 2 * i - 3, MPFR_RNDN);
    }
    assert_int_equal(cic_mp_dot_fixed(r, (const mpfr_t *)x, 1, (const mpfr_t *)y, 1, 4, NULL), 0);
    assert_int_equal(mpfr_cmp_si(r, 1 * -3 + 2 * -1 + 3 * 1 + 4 * 3), 0);
    /* exact cancellation gives +0 */
    mpfr_set_si(y[0], 9, MPFR_RNDN);
    mpfr_set_si(y[1], -1, MPFR_RNDN);
    mpfr_set_si(y[2], -1, MPFR_RNDN);
    mpfr_set_si(y[3], -1, MPFR_RNDN);
    assert_int_equal(cic_mp_dot_fixed(r, (const mpfr_t *)x, 1, (const mpfr_t *)y, 1, 4, NULL), 0);
    assert_true(mpfr_zero_p(r) && !mpfr_signbit(r));
    /* Inf, NaN, all zero: declined */
    mpfr_set_inf(x[2], 1);
    assert_int_equal(cic_mp_dot_fixed(r, (const mpfr_t *)x, 1, (const mpfr_t *)y, 1, 4, NULL), -1);
    mpfr_set_nan(x[2]);
    assert_int_equal(cic_mp_dot_fixed(r, (const mpfr_t *)x, 1, (const mpfr_t *)y, 1, 4, NULL), -1);
    for (i = 0; i < 4; i++)
        mpfr_set_zero(x[i], -1);
    assert_int_equal(cic_mp_dot_fixed(r, (const mpfr_t *)x, 1, (const mpfr_t *)y, 1, 4, NULL), -1);
    /* a span beyond the accumulator */
    mpfr_set_ui_2exp(x[0], 1, 3000, MPFR_RNDN);
    mpfr_set_ui_2exp(x[1], 1, -3000, MPFR_RNDN);
    assert_int_equal(cic_mp_dot_fixed(r, (const mpfr_t *)x, 1, (const mpfr_t *)y, 1, 2, NULL), -1);
    /* factors of over 2048 bits together */
    mpfr_init2(big, 1100);
    mpfr_set_ui(big, 3, MPFR_RNDN);
    assert_int_equal(cic_mp_dot_fixed(r, (const mpfr_t *)&big, 1, (const mpfr_t *)&big, 1, 1,
                                      NULL), -1);
    mpfr_clears(r, big, (mpfr_ptr)0);
    cic_mpvec_destroy(x, 4);
    cic_mpvec_destroy(y, 4);
}

/* Several rows against one y: each row as the reference; a row with a NaN,
 * one of another precision and an all-zero row are declined alone. */
static void test_rows(void **state)
{
    enum { NR = CIC_DOT_ROWS, N = 40 };
    mpfr_t *x[NR], *y = cic_mpvec_create(N, 24), want, b;
    mpfr_ptr r[NR];
    cic_mp_span sx[NR], sy;
    cic_dot_scratch sc;
    uint64_t ctr = 0;
    int t, i, trial;
    (void)state;
    assert_int_equal(cic_dot_scratch_init(&sc, N, 128), 0);
    mpfr_inits2(128, want, b, (mpfr_ptr)0);
    for (t = 0; t < NR; t++) {
        x[t] = cic_mpvec_create(N, t == 2 ? 64 : 128);
        r[t] = malloc(sizeof(mpfr_t));
        mpfr_init2(r[t], 128);
    }
    for (trial = 0; trial < 4 * cic_test_multiplier(); trial++) {
        unsigned done, expect = 0;
        for (i = 0; i < N; i++)
            rand_value(y[i], 7, &ctr, 10, 2);
        rand_value(b, 7, &ctr, 10, 0);
        for (t = 0; t < NR; t++)
            for (i = 0; i < N; i++)
                rand_value(x[t][i], 7, &ctr, 10, 1);
        if (trial == 1)
            mpfr_set_nan(x[1][5]);
        if (trial == 2)
            for (i = 0; i < N; i++)
                mpfr_set_zero(x[3][i], 1);
        for (t = 0; t < NR; t++) {
            mpfr_set_nan(r[t]);
            cic_mp_span_init(&sx[t], (const mpfr_t *)x[t], 1, N);
        }
        cic_mp_span_init(&sy, (const mpfr_t *)y, 1, N);
        done = cic_mp_dot_rows(r, (const mpfr_t *const *)x, sx, 1, NR, (const mpfr_t *)y, 1, &sy,
                               N, trial == 3 ? NULL : b);
        {
            /* the packed form, through views into one pack of all rows,
             * must set the same rows to the same bits */
            cic_mp_pack yp, xp[NR], xv[NR];
            const cic_mp_pack *xpp[NR];
            mpfr_ptr r2[NR];
            unsigned done2;
            assert_int_equal(cic_mp_pack_init(&yp, (const mpfr_t *)y, N), 0);
            for (t = 0; t < NR; t++) {
                assert_int_equal(cic_mp_pack_init(&xp[t], (const mpfr_t *)x[t], N), 0);
                cic_mp_pack_view(&xv[t], &xp[t], 0, N);
                xpp[t] = t % 2 ? &xv[t] : &xp[t];
                r2[t] = malloc(sizeof(mpfr_t));
                mpfr_init2(r2[t], 128);
                mpfr_set_nan(r2[t]);
            }
            done2 = cic_mp_dot_rows_packed(r2, xpp, NR, &yp, trial == 3 ? NULL : b);
            assert_int_equal(done2, done);
            for (t = 0; t < NR; t++) {
                if (done2 >> t & 1)
                    check_equal(r2[t], r[t], "packed rows", trial);
                mpfr_clear(r2[t]);
                free(r2[t]);
                cic_mp_pack_clear(&xp[t]);
            }
            cic_mp_pack_clear(&yp);
        }
        for (t = 0; t < NR; t++) {
            bool declines = (trial == 1 && t == 1) || (trial == 2 && t == 3) || t == 2;
            /* row 2 (64 bits) is declined when row 0 sets the limb count */
            if (!declines)
                expect |= 1u << t;
            if (!(done >> t & 1)) {
                assert_true(mpfr_nan_p(r[t]));
                continue;
            }
            cic_mp_dot_mpfr(want, (const mpfr_t *)x[t], 1, (const mpfr_t *)y, 1, N,
                            trial == 3 ? NULL : b, &sc);
            check_equal(r[t], want, "rows", trial);
        }
        assert_int_equal(done, expect);
    }
    for (t = 0; t < NR; t++) {
        cic_mpvec_destroy(x[t], N);
        mpfr_clear(r[t]);
        free(r[t]);
    }
    cic_mpvec_destroy(y, N);
    mpfr_clears(want, b, (mpfr_ptr)0);
    cic_dot_scratch_clear(&sc);
}

/* dgemm products of MPFR matrices, all four transposition layouts, against
 * correctly rounded dots: double accuracy, and transposes not mixed up
 * (a wrong layout gives errors of the data's size). */
static void test_gemm_f64(void **state)
{
    enum { M = 7, N = 5, K = 9 };
    mpfr_t *a = cic_mpvec_create(M * K, 53), *b = cic_mpvec_create(K * N, 53);
    mpfr_t *c = cic_mpvec_create(M * N, 53), *want = cic_mpvec_create(M * N, 53);
    cic_dot_scratch sc;
    int ta, tb, i, j;
    (void)state;
    assert_int_equal(cic_dot_scratch_init(&sc, K, 53), 0);
    for (i = 0; i < M * K; i++)
        mpfr_set_d(a[i], cic_rng_uniform(1, (uint64_t)i) - 0.5, MPFR_RNDN);
    for (i = 0; i < K * N; i++)
        mpfr_set_d(b[i], cic_rng_uniform(2, (uint64_t)i) - 0.5, MPFR_RNDN);
    for (ta = 0; ta < 2; ta++)
        for (tb = 0; tb < 2; tb++) {
            /* op(A)[i,p] = ta ? A[p*M + i] : A[i*K + p]; likewise for B */
            assert_int_equal(cic_mp_gemm_f64(c, (const mpfr_t *)a, ta, (const mpfr_t *)b, tb, M,
                                             N, K),
                             0);
            for (i = 0; i < M; i++)
                for (j = 0; j < N; j++) {
                    cic_mp_dot(want[i * N + j], (const mpfr_t *)a + (ta ? i : i * K),
                               ta ? M : 1, (const mpfr_t *)b + (tb ? j * K : j), tb ? 1 : N, K,
                               NULL, &sc);
                    cic_assert_close(mpfr_get_d(c[i * N + j], MPFR_RNDN),
                                     mpfr_get_d(want[i * N + j], MPFR_RNDN), 0, 1e-14);
                }
        }
    cic_dot_scratch_clear(&sc);
    cic_mpvec_destroy(a, M * K);
    cic_mpvec_destroy(b, K * N);
    cic_mpvec_destroy(c, M * N);
    cic_mpvec_destroy(want, M * N);
}

/* cic_mp_matmul (the packed linear kernel, rows split over 1, 2 and 3
 * threads) equals cic_mp_dot entry by entry, bit for bit, in all four
 * transposition layouts, with A at 24 bits and B at 128 (a weight times a
 * rotation), zeros, wide exponents and an odd number of rows; a planted
 * change of one B entry changes the product. */
static void test_matmul_packed(void **state)
{
    enum { M = 11, N = 6, K = 13 };
    mpfr_t *a = cic_mpvec_create(M * K, 24), *b = cic_mpvec_create(K * N, 128);
    mpfr_t *c = cic_mpvec_create(M * N, 128), *want = cic_mpvec_create(M * N, 128);
    cic_dot_scratch sc;
    uint64_t ctr = 0;
    int ta, tb, i, j, nt;
    (void)state;
    assert_true(a && b && c && want);
    assert_int_equal(cic_dot_scratch_init(&sc, K, 128), 0);
    for (i = 0; i < M * K; i++)
        rand_value(a[i], 31, &ctr, 40, 2);
    for (i = 0; i < K * N; i++)
        rand_value(b[i], 32, &ctr, 40, 2);
    for (nt = 1; nt <= 3; nt++) {
        for (ta = 0; ta < 2; ta++)
            for (tb = 0; tb < 2; tb++) {
                cic_mp_matmul(c, (const mpfr_t *)a, ta, (const mpfr_t *)b, tb, M, N, K, false, nt,
                              &sc);
                for (i = 0; i < M; i++)
                    for (j = 0; j < N; j++) {
                        cic_mp_dot(want[i * N + j], (const mpfr_t *)a + (ta ? i : i * K),
                                   ta ? M : 1, (const mpfr_t *)b + (tb ? j * K : j),
                                   tb ? 1 : N, K, NULL, &sc);
                        check_equal(c[i * N + j], want[i * N + j], "matmul", i * N + j);
                    }
            }
    }
    cic_mp_matmul(want, (const mpfr_t *)a, false, (const mpfr_t *)b, false, M, N, K, false, 0,
                  &sc);
    if (mpfr_zero_p(b[0]))
        mpfr_set_ui(b[0], 1, MPFR_RNDN);
    else
        mpfr_mul_2ui(b[0], b[0], 10, MPFR_RNDN);
    cic_mp_matmul(c, (const mpfr_t *)a, false, (const mpfr_t *)b, false, M, N, K, false, 0, &sc);
    for (i = 0, j = 0; i < M; i++)
        j += !mpfr_equal_p(c[i * N], want[i * N]);
    assert_true(j > 0); /* column 0 of op(B) changed: some entry of column 0 of C moves */
    cic_dot_scratch_clear(&sc);
    cic_mpvec_destroy(a, M * K);
    cic_mpvec_destroy(b, K * N);
    cic_mpvec_destroy(c, M * N);
    cic_mpvec_destroy(want, M * N);
}

/* ---- the linear op (mplinear.c) against correctly rounded references ---- */

typedef struct {
    mpfr_prec_t px, pw; /* activations (and outputs); weights (24: float32) */
    int M, N, K;
    int kind; /* 0 ordinary, 1 cancellation, 2 signed zeros, 3 wide spans,
               * 4 the largest terms, many to a bin */
    bool bias;
} lin_shape;

/* A float32 weight: mostly N(0, 0.02); in kind 3 also huge, tiny and
 * subnormal ones; in kind 2 a quarter +-0. */
static float lin_weight(const lin_shape *sh, uint64_t key, uint64_t i)
{
    uint64_t u = cic_rng_u64(key, 2 * i);
    float v = 0.02f * (float)cic_rng_normal_f32(key, 2 * i + 1);
    if (sh->kind == 4)
        return 0x1.fffffep-1f; /* every significand bit set */
    if (sh->kind == 2 && i % (uint64_t)sh->K % 2 == 1 && i / (uint64_t)sh->K == 2)
        return -1.5f; /* row 2 against x's row 8: every product -0 */
    if (sh->kind == 2 && i / (uint64_t)sh->K == 2)
        return -0.0f;
    if (sh->kind == 2 && (u & 3) == 0)
        return (u >> 2) & 1 ? -0.0f : 0.0f;
    if (sh->kind == 3 && (u & 15) == 0)
        return (u >> 4) % 3 == 0 ? 0x1.2345p100f : (u >> 4) % 3 == 1 ? 0x1.5p-140f : -0x1p-126f;
    return v;
}

/* The activations of kind: row i of x (K values at px bits). */
static void lin_row(mpfr_t *xr, const lin_shape *sh, int i, uint64_t key, uint64_t *ctr)
{
    int p, h = sh->K / 2;
    for (p = 0; p < sh->K; p++)
        rand_value(xr[p], key, ctr, sh->kind == 3 ? 1800 : 8, sh->kind == 2 ? 4 : 0);
    if (sh->kind == 1 && i % 2 == 0)
        /* weights repeat by halves: exact cancellation (a term left when
         * K is odd) */
        for (p = 0; p < h; p++)
            mpfr_neg(xr[h + p], xr[p], MPFR_RNDN);
    if (sh->kind == 2 && i == 1)
        for (p = 0; p < sh->K; p++)
            mpfr_set_zero(xr[p], -1); /* an all-zero row: signed-zero rules */
    if (sh->kind == 2 && i == 8) { /* nonzero where weight row 2 is -0 */
        for (p = 0; p < sh->K; p++) {
            if (p % 2)
                mpfr_set_zero(xr[p], 1);
            else
                mpfr_abs(xr[p], xr[p], MPFR_RNDN);
        }
    }
    if (sh->kind == 4) /* 2^64 - 1 at 32 exponents, 600 terms each */
        for (p = 0; p < sh->K; p++) {
            mpfr_set_ui_2exp(xr[p], 1, 0, MPFR_RNDN);
            mpfr_nextbelow(xr[p]);
            mpfr_set_exp(xr[p], (mpfr_exp_t)(p / 600 % 32));
        }
    if (sh->kind == 3 && i == 0) {
        mpfr_set_ui_2exp(xr[0], 1, 3000, MPFR_RNDN); /* over 3968 bits: declined */
        mpfr_set_ui_2exp(xr[1], 3, -1000, MPFR_RNDN);
    }
    if (sh->kind == 3 && (i == 1 || i == 2)) /* rows of one block 2^4000 apart */
        for (p = 0; p < sh->K; p++) {
            mpfr_set_exp(xr[p], (i == 1 ? 2000 : -2000) + (p % 5));
        }
}

/* Kind 1, odd rows: the last activation cancels the dot with weight row 0
 * to within a few bits of the working precision. */
static void lin_cancel(mpfr_t *xr, const lin_shape *sh, const mpfr_t *w0, cic_dot_scratch *sc)
{
    mpfr_t d;
    if (mpfr_zero_p(w0[sh->K - 1]))
        return;
    mpfr_init2(d, sh->px);
    mpfr_set_zero(xr[sh->K - 1], 1);
    cic_mp_dot_mpfr(d, (const mpfr_t *)xr, 1, w0, 1, (size_t)sh->K, NULL, sc);
    mpfr_div(d, d, w0[sh->K - 1], MPFR_RNDN);
    mpfr_neg(xr[sh->K - 1], d, MPFR_RNDN);
    mpfr_clear(d);
}

static void run_linear(const lin_shape *sh, uint64_t key)
{
    size_t M = (size_t)sh->M, N = (size_t)sh->N, K = (size_t)sh->K, q, i, j, p;
    mpfr_t *x = cic_mpvec_create(M * K, sh->px), *wm = cic_mpvec_create(N * K, sh->pw);
    mpfr_t *b = cic_mpvec_create(N, sh->pw), *wrow = cic_mpvec_create(K, sh->pw);
    mpfr_t *y1 = cic_mpvec_create(M * N, sh->px), *y2 = cic_mpvec_create(M * N, sh->px), want;
    const mpfr_t *bias = sh->bias ? (const mpfr_t *)b : NULL;
    float *w = malloc(N * K * sizeof *w);
    cic_mp_pack all, *views, all2, *views2 = NULL;
    cic_dot_scratch sc;
    uint64_t ctr = 0;
    assert_true(x && wm && b && wrow && y1 && y2 && w);
    assert_int_equal(cic_dot_scratch_init(&sc, K, sh->px > sh->pw ? sh->px : sh->pw), 0);
    mpfr_init2(want, sh->px);
    for (q = 0; q < N * K; q++) {
        w[q] = lin_weight(sh, key, q);
        if (sh->pw == 24)
            mpfr_set_flt(wm[q], w[q], MPFR_RNDN);
        else
            rand_value(wm[q], key, &ctr, 8, 0);
    }
    if (sh->kind == 1) /* weights repeat by halves */
        for (j = 0; j < N; j++)
            for (p = 0; p < K / 2; p++) {
                w[j * K + K / 2 + p] = w[j * K + p];
                mpfr_set(wm[j * K + K / 2 + p], wm[j * K + p], MPFR_RNDN);
            }
    for (j = 0; j < N; j++)
        if (sh->kind == 2 && j < 2)
            mpfr_set_zero(b[j], j ? -1 : 1);
        else
            mpfr_set_flt(b[j], lin_weight(sh, key ^ 1, (uint64_t)j), MPFR_RNDN);
    for (i = 0; i < M; i++) {
        lin_row(x + i * K, sh, (int)i, key, &ctr);
        if (sh->kind == 1 && i % 2 == 1)
            lin_cancel(x + i * K, sh, (const mpfr_t *)wm, &sc);
    }
    assert_int_equal(cic_mp_pack_rows(&all, &views, (const mpfr_t *)wm, N, K), 0);
    cic_mp_linear_rows(y1, (const mpfr_t *)x, M, (const mpfr_t *)wm, views, bias, N, K, NULL, &sc);
    if (sh->pw == 24) {
        /* the engine's form: float32 rows packed directly, read back when declined */
        assert_int_equal(cic_mp_pack_rows_f32(&all2, &views2, w, N, K), 0);
        cic_mp_linear_rows(y2, (const mpfr_t *)x, M, NULL, views2, bias, N, K, wrow, &sc);
    }
    for (i = 0; i < M; i++)
        for (j = 0; j < N; j++) {
            mpfr_ptr g1 = y1[i * N + j], g2 = y2[i * N + j];
            cic_mp_dot_mpfr(want, (const mpfr_t *)x + i * K, 1, (const mpfr_t *)wm + j * K, 1, K,
                            bias ? bias[j] : NULL, &sc);
            if (!same_bits(g1, want) || (views2 && !same_bits(g2, want)))
                mpfr_fprintf(stderr,
                             "linear px %ld pw %ld kind %d M %zu K %zu bias %d, row %zu col %zu:"
                             " got %Ra and %Ra\n",
                             (long)sh->px, (long)sh->pw, sh->kind, M, K, (int)sh->bias, i, j, g1,
                             g2);
            check_equal(g1, want, "linear rows", (int)(i * N + j));
            if (views2)
                check_equal(g2, want, "linear rows from float32", (int)(i * N + j));
        }
    /* the comparison sees one ulp */
    mpfr_nextabove(y1[0]);
    cic_mp_dot_mpfr(want, (const mpfr_t *)x, 1, (const mpfr_t *)wm, 1, K, bias ? bias[0] : NULL,
                    &sc);
    assert_false(same_bits(y1[0], want));
    free(views);
    cic_mp_pack_clear(&all);
    if (views2) {
        free(views2);
        cic_mp_pack_clear(&all2);
    }
    free(w);
    mpfr_clear(want);
    cic_dot_scratch_clear(&sc);
    cic_mpvec_destroy(x, M * K);
    cic_mpvec_destroy(wm, N * K);
    cic_mpvec_destroy(b, N);
    cic_mpvec_destroy(wrow, K);
    cic_mpvec_destroy(y1, M * N);
    cic_mpvec_destroy(y2, M * N);
}

/* Activations at 53 to 256 bits (1 to 4 limbs) against float32 weights
 * (the carry-free kernel, blocks of 8 rows) and full-precision ones (the
 * general kernel): 1 to 13 rows (full and partial blocks), lengths past a
 * normalisation run (256 terms), cancellation, signed zeros, spans near
 * the accumulator's limit, beyond it, and rows of one block without a
 * common unit. */
static void test_linear_rows(void **state)
{
    static const mpfr_prec_t px[] = {64, 128, 192, 256, 53};
    static const int rows[] = {1, 2, 3, 4, 6, 9, 13};
    size_t a, m;
    int kind, rep, reps = cic_test_multiplier();
    (void)state;
    for (rep = 0; rep < reps; rep++)
        for (a = 0; a < sizeof px / sizeof px[0]; a++)
            for (kind = 0; kind < 5; kind++)
                for (m = 0; m < sizeof rows / sizeof rows[0]; m++) {
                    int M = kind == 4 ? 8 : rows[m];
                    lin_shape sh = {px[a], 24, M, 3, kind == 0 ? 700 : kind == 4 ? 19200 : 301,
                                    kind, (M + kind) % 2 == 0};
                    uint64_t key = cic_rng_key((uint64_t)(rep * 1000 + kind * 100 + M),
                                               "test_linear_rows") ^ (uint64_t)px[a];
                    run_linear(&sh, key);
                    if (kind == 0 && M == 6) {
                        sh.pw = px[a]; /* full-precision weights */
                        sh.K = 40;
                        run_linear(&sh, key);
                    }
                    if (kind == 4)
                        break;
                }
}

/* ---- doubles that keep a value's binary32 ----
 *
 * Planted ties: x = m (1 +- 2^-60) at 128 bits, m the midpoint between a
 * float and the next one (normal, subnormal, at the overflow threshold
 * 2^128 - 2^103, negative): x rounds to m as a double, and m itself rounds
 * to the even neighbour, which is x's binary32 for only one of the two
 * signs. cic_mp_get_d_f32 must give a double whose (float) is x's binary32
 * every time; the plain mpfr_get_d must miss about half (the check would
 * see a conversion that lost the side). */
static void tie_check(mpfr_t x, double m, int side, long *plain_wrong)
{
    double v;
    float f;
    mpfr_set_d(x, m, MPFR_RNDN);
    {
        mpfr_t e;
        mpfr_init2(e, 128);
        mpfr_set_d(e, fabs(m), MPFR_RNDN);
        mpfr_mul_2si(e, e, -60, MPFR_RNDN);
        if (side > 0)
            mpfr_add(x, x, e, MPFR_RNDN);
        else
            mpfr_sub(x, x, e, MPFR_RNDN);
        mpfr_clear(e);
    }
    f = cic_mp_get_f32(x);
    v = cic_mp_get_d_f32(x);
    if ((float)v != f)
        fail_msg("midpoint %.17g, side %+d: the double %.17g rounds to %.9g, x to %.9g", m,
                 side, v, (double)(float)v, (double)f);
    if (fabs(v - m) > fabs(m) * 0x1p-52 && m != 0)
        fail_msg("midpoint %.17g: the double %.17g moved more than an ulp", m, v);
    if ((float)mpfr_get_d(x, MPFR_RNDN) != f)
        (*plain_wrong)++;
}

static void test_get_d_keeps_f32(void **state)
{
    uint64_t s = 4242;
    long plain_wrong = 0, n = 0;
    mpfr_t x;
    int k, side;
    (void)state;
    mpfr_init2(x, 128);
    for (k = 0; k < 4000; k++) {
        float a;
        uint32_t bits = (uint32_t)(cic_rng_u64(cic_rng_key(s, "tie"), (uint64_t)k) >> 32);
        double m;
        bits &= 0x7f7fffffu; /* finite, below FLT_MAX */
        if (k % 4 == 1)
            bits &= 0x007fffffu; /* subnormal */
        memcpy(&a, &bits, sizeof a);
        m = ((double)a + (double)nextafterf(a, INFINITY)) / 2; /* exact */
        if (k % 2)
            m = -m;
        for (side = -1; side <= 1; side += 2, n++)
            tie_check(x, m, side, &plain_wrong);
    }
    /* the overflow threshold: below it FLT_MAX, above it Inf */
    for (side = -1; side <= 1; side += 2, n++)
        tie_check(x, 0x1p128 - 0x1p103, side, &plain_wrong);
    mpfr_clear(x);
    print_message("%ld planted ties: mpfr_get_d lost the side of %ld\n", n, plain_wrong);
    if (plain_wrong < n / 4)
        fail_msg("the planted ties are not ties: mpfr_get_d lost only %ld of %ld", plain_wrong,
                 n);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fast_equals_mpfr),
        cmocka_unit_test(test_declines),
        cmocka_unit_test(test_rows),
        cmocka_unit_test(test_gemm_f64),
        cmocka_unit_test(test_matmul_packed),
        cmocka_unit_test(test_linear_rows),
        cmocka_unit_test(test_get_d_keeps_f32),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    mpfr_free_cache();
    return rc;
}
