/* SPDX-License-Identifier: MIT */
/* test_specnorm.c: the proven bounds of ||W||_2 (src/base/specnorm.c).
 * Every bound is checked against a lower estimate of the true norm that
 * cannot exceed it: the Rayleigh quotient ||W v|| / ||v|| after power
 * iteration, in long double for double weights and at 300 bits for MPFR
 * weights, and numpy's SVD on the same values when /usr/bin/python3 has
 * numpy. Gaussian matrices of several shapes (every depth 0 .. 4, the
 * default within 15 % of the norm), planted cases (a float32 entry of
 * 3e38, exact rank one where the bound must be within 1e-9 of the norm,
 * 200-bit values no double holds, zeros, NaN and Inf, subnormals, entries
 * spanning 2^-2000 .. 2^2000), the cache (hits, a changed bit misses, four
 * threads), and a brute-force count over 2,000 random small MPFR matrices
 * whose tight rank-one quarter shows a bound 2^-40 too small would be
 * caught. */
#include "testutil.h"

#include "base/specnorm.h"
#include "base/specnorm_int.h"

#include <float.h>
#include <math.h>
#include <pthread.h>
#include <string.h>
#include <sys/wait.h>

static double gauss(uint64_t *s)
{
    double u1 = ((double)(cic_test_rand(s) >> 11) + 1) * 0x1p-53;
    double u2 = (double)(cic_test_rand(s) >> 11) * 0x1p-53;
    return sqrt(-2 * log(u1)) * cos(2 * M_PI * u2);
}

static double *gauss_matrix(size_t rows, size_t cols, uint64_t seed)
{
    double *w = malloc(rows * cols * sizeof *w);
    size_t i;
    assert_non_null(w);
    for (i = 0; i < rows * cols; i++)
        w[i] = gauss(&seed);
    return w;
}

/* ||W v|| / ||v|| after iters steps of power iteration on W^T W, in long
 * double: at most ||W||_2 (up to long double's rounding, far below the
 * bound's own slack). */
static double power_lower(const double *w, size_t rows, size_t cols, int iters)
{
    long double *v = calloc(cols, sizeof *v), *y = calloc(rows, sizeof *y), nv, ny = 0;
    uint64_t s = 7;
    size_t i, j;
    int it;
    assert_true(v && y);
    for (j = 0; j < cols; j++)
        v[j] = gauss(&s);
    for (it = 0; it <= iters; it++) {
        nv = 0;
        for (j = 0; j < cols; j++)
            nv += v[j] * v[j];
        nv = sqrtl(nv);
        for (j = 0; j < cols; j++)
            v[j] /= nv;
        ny = 0;
        for (i = 0; i < rows; i++) {
            y[i] = 0;
            for (j = 0; j < cols; j++)
                y[i] += (long double)w[i * cols + j] * v[j];
            ny += y[i] * y[i];
        }
        if (it == iters)
            break;
        for (j = 0; j < cols; j++) {
            v[j] = 0;
            for (i = 0; i < rows; i++)
                v[j] += (long double)w[i * cols + j] * y[i];
        }
    }
    free(v);
    free(y);
    return (double)sqrtl(ny);
}

/* numpy.linalg.norm(W, 2) of exactly these doubles (hex through a file),
 * or -1 without numpy. */
static double numpy_norm(const double *w, size_t rows, size_t cols)
{
    char path[600], cmd[1400];
    FILE *f;
    double r = -1;
    size_t i;
    cic_test_tmp_path(path, sizeof path, "w.txt");
    f = fopen(path, "w");
    assert_non_null(f);
    for (i = 0; i < rows * cols; i++)
        fprintf(f, "%a\n", w[i]);
    fclose(f);
    snprintf(cmd, sizeof cmd,
             "/usr/bin/python3 -c 'import numpy as n; a=[float.fromhex(l) for l in "
             "open(\"%s\")]; print(float(n.linalg.norm(n.array(a).reshape(%zu,%zu),2)).hex())' "
             "2>/dev/null",
             path, rows, cols);
    f = popen(cmd, "r");
    if (f) {
        char line[128];
        if (fgets(line, sizeof line, f))
            r = strtod(line, NULL);
        if (pclose(f) != 0)
            r = -1;
    }
    return r;
}

static const size_t shapes[][2] = {{1, 300}, {300, 1}, {3, 700}, {64, 64}, {200, 50},
                                   {50, 200}, {1, 1},  {17, 5},   {260, 140}};

/* (a) Gaussian shapes: every depth is above the lower estimate, the
 * default within 15 % of it (64^(1/32) < 1.14 bounds the squarings'
 * overestimate; the certificate's is about 2^-8), and within 2 % where the
 * side exceeds SQUARE_TOO (the certificate alone). */
static void test_gaussian_shapes(void **state)
{
    size_t s;
    (void)state;
    for (s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        size_t r = shapes[s][0], c = shapes[s][1];
        double *w = gauss_matrix(r, c, 100 + s), lo = power_lower(w, r, c, 3000), b, g, rc;
        int m;
        assert_int_equal(cic_specnorm_d(&b, w, r, c, NULL), 0);
        print_message("%zu x %zu: sigma >= %.12g, bound %.12g (ratio %.4f)\n", r, c, lo, b,
                      b / lo);
        if (!(b >= lo && b <= (r > 128 && c > 128 ? 1.02 : 1.15) * lo))
            fail_msg("%zu x %zu seed %zu: bound %.17g, lower estimate %.17g", r, c, 100 + s, b,
                     lo);
        for (m = 0; m <= 4; m++) {
            assert_int_equal(cic_specnorm_d_detail(&g, &rc, w, r, c, m), 0);
            if (!(g >= lo && rc >= lo))
                fail_msg("%zu x %zu depth %d: gram %.17g rowcol %.17g below %.17g", r, c, m, g,
                         rc, lo);
        }
        /* the default: the certificate (and, at most SQUARE_TOO on a side,
         * the squarings too) */
        assert_int_equal(cic_specnorm_d_detail(&g, &rc, w, r, c, CIC_SPECNORM_CERT), 0);
        assert_true(fmin(g, rc) == b);
        free(w);
    }
}

/* (a) numpy's SVD on the same values: the bound is above it (a float
 * reference: 1e-13 relative slack) and it agrees with the power estimate. */
static void test_numpy_reference(void **state)
{
    size_t s;
    (void)state;
    if (access("/usr/bin/python3", X_OK) != 0 || numpy_norm((double[]){1}, 1, 1) != 1) {
        print_message("/usr/bin/python3 with numpy not found: the numpy reference skipped\n");
        skip();
    }
    for (s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        size_t r = shapes[s][0], c = shapes[s][1];
        double *w = gauss_matrix(r, c, 100 + s), lo = power_lower(w, r, c, 3000), b;
        double np = numpy_norm(w, r, c);
        assert_int_equal(cic_specnorm_d(&b, w, r, c, NULL), 0);
        if (!(b >= np * (1 - 1e-13)))
            fail_msg("%zu x %zu: bound %.17g below numpy's %.17g", r, c, b, np);
        cic_assert_close(lo, np, 1e-9, 0);
        free(w);
    }
}

/* ||W||_2 >= x (an MPFR value) and the bound within rtol above it. */
static void check_above_mp(double b, mpfr_t x, double rtol, const char *what)
{
    char xs[128];
    mpfr_snprintf(xs, sizeof xs, "%.25Rg", x);
    if (!(mpfr_cmp_d(x, b) <= 0 && (rtol <= 0 || b <= mpfr_get_d(x, MPFR_RNDU) * (1 + rtol))))
        fail_msg("%s: bound %.17g, norm %s", what, b, xs);
}

/* sqrt(sum of squares of v[0..n)) at 300 bits, rounded down: exact for
 * integers until the square root. */
static void norm_down(mpfr_t r, const double *v, size_t n)
{
    mpfr_t t;
    size_t i;
    mpfr_init2(t, 300);
    mpfr_set_zero(r, 1);
    for (i = 0; i < n; i++) {
        mpfr_set_d(t, v[i], MPFR_RNDN);
        mpfr_fma(r, t, t, r, MPFR_RNDD);
    }
    mpfr_sqrt(r, r, MPFR_RNDD);
    mpfr_clear(t);
}

/* Entries (i, j) = u_i v_j with small integers (exact): the norm |u||v|
 * at 300 bits; every depth within 1e-9 above it. */
static void test_rank_one(void **state)
{
    enum { R = 30, C = 41 };
    double *w = malloc(R * C * sizeof *w), u[R], v[C], g, rc, b;
    uint64_t s = 5;
    mpfr_t nu, nv;
    size_t i, j;
    int m;
    (void)state;
    assert_non_null(w);
    for (i = 0; i < R; i++)
        u[i] = cic_test_pick(&s, 2001) - 1000;
    for (j = 0; j < C; j++)
        v[j] = (cic_test_pick(&s, 2001) - 1000) * 0x1p-20;
    for (i = 0; i < R; i++)
        for (j = 0; j < C; j++)
            w[i * C + j] = u[i] * v[j];
    mpfr_inits2(300, nu, nv, (mpfr_ptr)0);
    norm_down(nu, u, R);
    norm_down(nv, v, C);
    mpfr_mul(nu, nu, nv, MPFR_RNDD);
    assert_int_equal(cic_specnorm_d(&b, w, R, C, NULL), 0);
    check_above_mp(b, nu, 1e-9, "rank one");
    /* the transpose has the same norm */
    for (i = 0; i < R; i++)
        for (j = 0; j < C; j++)
            w[j * R + i] = u[i] * v[j];
    for (m = 0; m <= 4; m++) {
        assert_int_equal(cic_specnorm_d_detail(&g, &rc, w, C, R, m), 0);
        check_above_mp(g, nu, 1e-9, "rank one, transposed, gram");
        check_above_mp(rc, nu, 0, "rank one, transposed, rowcol");
    }
    mpfr_clears(nu, nv, (mpfr_ptr)0);
    free(w);
}

/* A row of 1024 ones among 2^20 entries 2^-27: every square 2^-54 is
 * lost when added to a partial sum of ones in round-to-nearest, so dsyrk's
 * Gram entry is 1024 where the exact one is 1024 + 2^-34. The bound must
 * cover what the rounding lost (a bound from the computed Gram entry
 * alone, 32, is below the norm 32 (1 + 2^-45)); the rowcol bound is
 * sqrt(1032), so the Gram one decides. Also its transpose (one column). */
static void test_lost_rounding(void **state)
{
    size_t n = ((size_t)1 << 20) + 1024, i, t;
    double *w = malloc(n * sizeof *w), b;
    mpfr_t x, y;
    (void)state;
    assert_non_null(w);
    for (i = 0; i < n; i++)
        w[i] = i % 1025 == 0 ? 1 : 0x1p-27;
    mpfr_inits2(200, x, y, (mpfr_ptr)0);
    mpfr_set_ui_2exp(x, 1, -34, MPFR_RNDN);
    mpfr_add_ui(x, x, 1024, MPFR_RNDN);
    mpfr_sqrt(x, x, MPFR_RNDD);
    for (t = 0; t < 2; t++) {
        assert_int_equal(cic_specnorm_d(&b, w, t ? n : 1, t ? 1 : n, NULL), 0);
        check_above_mp(b, x, 1e-6, "ones among 2^-27");
    }
    mpfr_clears(x, y, (mpfr_ptr)0);
    free(w);
}

/* ---- MPFR weights ---- */

static mpfr_t *mp_alloc(size_t n, mpfr_prec_t p)
{
    mpfr_t *w = malloc(n * sizeof *w);
    size_t i;
    assert_non_null(w);
    for (i = 0; i < n; i++) {
        mpfr_init2(w[i], p);
        mpfr_set_zero(w[i], 1);
    }
    return w;
}

static void mp_free(mpfr_t *w, size_t n)
{
    size_t i;
    for (i = 0; i < n; i++)
        mpfr_clear(w[i]);
    free(w);
}

/* A random value of about 192 bits in (-1, 1) rounded to w's precision,
 * times 2^e. */
static void mp_random(mpfr_t w, uint64_t *s, long e)
{
    mpfr_t t;
    int i;
    mpfr_init2(t, 256);
    mpfr_set_zero(t, 1);
    for (i = 0; i < 3; i++) {
        mpfr_mul_2si(t, t, -64, MPFR_RNDN);
        mpfr_add_ui(t, t, (unsigned long)(cic_test_rand(s) >> (i ? 0 : 1)), MPFR_RNDN);
    }
    mpfr_mul_2si(t, t, -63 + e, MPFR_RNDN);
    if (cic_test_rand(s) & 1)
        mpfr_neg(t, t, MPFR_RNDN);
    mpfr_set(w, t, MPFR_RNDN);
    mpfr_clear(t);
}

/* ||W v|| / ||v|| at 300 bits after iters steps of power iteration on
 * W^T W: at most ||W||_2 but for its 300-bit roundings. */
static void mp_lower(mpfr_t est, const mpfr_t *w, size_t rows, size_t cols, int iters)
{
    mpfr_t *v = mp_alloc(cols, 300), *y = mp_alloc(rows, 300), nv, ny;
    uint64_t s = 11;
    size_t i, j;
    int it;
    mpfr_inits2(300, nv, ny, (mpfr_ptr)0);
    for (j = 0; j < cols; j++)
        mpfr_set_d(v[j], gauss(&s), MPFR_RNDN);
    for (it = 0;; it++) {
        mpfr_set_zero(ny, 1);
        for (i = 0; i < rows; i++) {
            mpfr_set_zero(y[i], 1);
            for (j = 0; j < cols; j++)
                mpfr_fma(y[i], w[i * cols + j], v[j], y[i], MPFR_RNDN);
            mpfr_fma(ny, y[i], y[i], ny, MPFR_RNDN);
        }
        if (it == iters)
            break;
        for (j = 0; j < cols; j++) {
            mpfr_set_zero(v[j], 1);
            for (i = 0; i < rows; i++)
                mpfr_fma(v[j], w[i * cols + j], y[i], v[j], MPFR_RNDN);
        }
        /* keep v near 1 so no exponent runs away */
        mpfr_set_zero(nv, 1);
        for (j = 0; j < cols; j++)
            mpfr_fma(nv, v[j], v[j], nv, MPFR_RNDN);
        if (mpfr_zero_p(nv))
            break;
        mpfr_rec_sqrt(nv, nv, MPFR_RNDN);
        for (j = 0; j < cols; j++)
            mpfr_mul(v[j], v[j], nv, MPFR_RNDN);
    }
    mpfr_set_zero(nv, 1);
    for (j = 0; j < cols; j++)
        mpfr_fma(nv, v[j], v[j], nv, MPFR_RNDN);
    if (mpfr_zero_p(nv))
        mpfr_set_zero(est, 1);
    else {
        mpfr_div(est, ny, nv, MPFR_RNDN);
        mpfr_sqrt(est, est, MPFR_RNDN);
    }
    mpfr_clears(nv, ny, (mpfr_ptr)0);
    mp_free(v, cols);
    mp_free(y, rows);
}

/* Diagonal entries 1 + 2^-60 at 200 bits (the norm, exactly) and
 * 1 + 2^-54 + 2^-100 (rounds to 1 in double): the bound covers the exact
 * values, not their images. */
static void test_mp_beyond_double(void **state)
{
    static const long tails[][2] = {{60, 0}, {54, 100}};
    enum { N = 5 };
    mpfr_t *w = mp_alloc(N * N, 200), x;
    double b;
    size_t t, i;
    (void)state;
    mpfr_init2(x, 200);
    for (t = 0; t < 2; t++) {
        mpfr_set_ui(x, 1, MPFR_RNDN);
        mpfr_add_d(x, x, ldexp(1, -(int)tails[t][0]), MPFR_RNDN);
        if (tails[t][1])
            mpfr_add_d(x, x, ldexp(1, -(int)tails[t][1]), MPFR_RNDN);
        for (i = 0; i < N; i++)
            mpfr_set(w[i * N + i], x, MPFR_RNDN);
        assert_int_equal(cic_specnorm_mp(&b, (const mpfr_t *)w, N, N, 2, NULL), 0);
        check_above_mp(b, x, 1e-12, "diagonal beyond double");
        /* one entry negated: the same norm */
        mpfr_neg(w[N + 1], w[N + 1], MPFR_RNDN);
        assert_int_equal(cic_specnorm_mp(&b, (const mpfr_t *)w, N, N, 1, NULL), 0);
        check_above_mp(b, x, 1e-12, "diagonal beyond double, a sign");
    }
    mpfr_clear(x);
    mp_free(w, N * N);
}

/* Random 200-bit matrices at scales 2^-2000 .. 2^2000 (through double's
 * subnormals and beyond its range): the bound is above the 300-bit
 * estimate, finite and within 15 % of it while the norm is a double well
 * inside the range, +Inf beyond it, and the smallest double below it. */
static void test_mp_scales(void **state)
{
    static const long scales[] = {0, -1040, -1070, -1080, -2000, 500, 1000, 1030, 2000};
    enum { R = 9, C = 6 };
    mpfr_t *w = mp_alloc(R * C, 200), est;
    uint64_t s = 3;
    size_t k, i;
    double b;
    (void)state;
    mpfr_init2(est, 300);
    for (k = 0; k < sizeof scales / sizeof scales[0]; k++) {
        for (i = 0; i < R * C; i++)
            mp_random(w[i], &s, scales[k]);
        mp_lower(est, (const mpfr_t *)w, R, C, 400);
        assert_int_equal(cic_specnorm_mp(&b, (const mpfr_t *)w, R, C, 3, NULL), 0);
        if (mpfr_cmp_d(est, b) > 0)
            check_above_mp(b, est, 0, scales[k] < 0 ? "tiny scale" : "huge scale");
        if (scales[k] > 1024)
            assert_true(isinf(b));
        else if (scales[k] < -1074 - 10)
            assert_true(b == 0x1p-1074);
        else if (scales[k] > -1000)
            assert_true(b <= 1.15 * mpfr_get_d(est, MPFR_RNDU));
    }
    mpfr_clear(est);
    mp_free(w, R * C);
}

/* A float32 entry of 3e38 among ordinary ones: finite, above it; NaN and
 * Inf: +Inf; zeros and empty shapes: 0; subnormals only, and doubles
 * spanning 1e-300 .. 1e300: above the estimate and within 15 % of it. */
static void test_special_values(void **state)
{
    enum { N = 8 };
    float f[N * N];
    double d[N * N], b;
    mpfr_t *w = mp_alloc(4, 64);
    uint64_t s = 9;
    size_t i;
    (void)state;
    for (i = 0; i < N * N; i++)
        d[i] = f[i] = (float)gauss(&s);
    f[19] = 3e38f;
    d[19] = 3e38f;
    assert_int_equal(cic_specnorm_f(&b, f, N, N, NULL), 0);
    assert_true(isfinite(b) && b >= 3e38f && b >= power_lower(d, N, N, 200) && b <= 3.0001e38);
    f[19] = FLT_MAX;
    f[20] = -FLT_MAX;
    assert_int_equal(cic_specnorm_f(&b, f, N, N, NULL), 0);
    assert_true(isfinite(b) && b >= sqrt(2) * (double)FLT_MAX);
    f[3] = NAN;
    assert_int_equal(cic_specnorm_f(&b, f, N, N, NULL), 0);
    assert_true(isinf(b) && b > 0);
    d[5] = -INFINITY;
    assert_int_equal(cic_specnorm_d(&b, d, N, N, NULL), 0);
    assert_true(isinf(b) && b > 0);
    mpfr_set_nan(w[2]);
    assert_int_equal(cic_specnorm_mp(&b, (const mpfr_t *)w, 2, 2, 1, NULL), 0);
    assert_true(isinf(b) && b > 0);
    mpfr_set_zero(w[2], -1);
    assert_int_equal(cic_specnorm_mp(&b, (const mpfr_t *)w, 2, 2, 1, NULL), 0);
    assert_true(b == 0);
    memset(d, 0, sizeof d);
    assert_int_equal(cic_specnorm_d(&b, d, N, N, NULL), 0);
    assert_true(b == 0);
    assert_int_equal(cic_specnorm_d(&b, d, 0, 7, NULL), 0);
    assert_true(b == 0);
    assert_int_equal(cic_specnorm_d(&b, d, 7, 0, NULL), 0);
    assert_true(b == 0);
    for (i = 0; i < N * N; i++)
        d[i] = ldexp((double)cic_test_pick(&s, 2001) - 1000, -1074);
    assert_int_equal(cic_specnorm_d(&b, d, N, N, NULL), 0);
    if (!(b >= power_lower(d, N, N, 400) && b <= 1.15 * power_lower(d, N, N, 400)))
        fail_msg("subnormals: bound %a, estimate %a", b, power_lower(d, N, N, 400));
    for (i = 0; i < N * N; i++)
        d[i] = gauss(&s) * pow(10, cic_test_pick(&s, 601) - 300);
    d[0] = 1e300;
    assert_int_equal(cic_specnorm_d(&b, d, N, N, NULL), 0);
    assert_true(b >= power_lower(d, N, N, 400) && b <= 1.15 * power_lower(d, N, N, 400));
    mp_free(w, 4);
}

/* ---- the cache ---- */

static void stats(cic_specnorm_cache *c, uint64_t h, uint64_t m, size_t n)
{
    uint64_t hits, misses;
    size_t entries;
    cic_specnorm_cache_stats(c, &hits, &misses, &entries);
    if (hits != h || misses != m || entries != n)
        fail_msg("cache: %llu hits %llu misses %zu entries, expected %llu %llu %zu",
                 (unsigned long long)hits, (unsigned long long)misses, entries,
                 (unsigned long long)h, (unsigned long long)m, n);
}

/* The same content hits (as doubles, floats or MPFR values of the same
 * images), a bit changed in a double misses, an MPFR change below double's
 * resolution that leaves the image and its exactness hits (the bound holds
 * for both: it is a function of the key), one that makes an entry inexact
 * misses. */
static void test_cache_keys(void **state)
{
    enum { R = 20, C = 30 };
    cic_specnorm_cache *c = cic_specnorm_cache_create();
    double *d = gauss_matrix(R, C, 21), b0, b;
    float f[R * C];
    mpfr_t *w = mp_alloc(R * C, 200);
    size_t i;
    (void)state;
    assert_non_null(c);
    for (i = 0; i < R * C; i++) {
        f[i] = (float)d[i];
        d[i] = f[i];
        mpfr_set_d(w[i], d[i], MPFR_RNDN);
    }
    assert_int_equal(cic_specnorm_d(&b0, d, R, C, c), 0);
    stats(c, 0, 1, 1);
    assert_int_equal(cic_specnorm_d(&b, d, R, C, c), 0);
    assert_true(b == b0);
    stats(c, 1, 1, 1);
    assert_int_equal(cic_specnorm_f(&b, f, R, C, c), 0);
    assert_true(b == b0);
    assert_int_equal(cic_specnorm_mp(&b, (const mpfr_t *)w, R, C, 2, c), 0);
    assert_true(b == b0);
    stats(c, 3, 1, 1);
    /* the transpose shape is another key */
    assert_int_equal(cic_specnorm_d(&b, d, C, R, c), 0);
    stats(c, 3, 2, 2);
    d[37] = nextafter(d[37], INFINITY);
    assert_int_equal(cic_specnorm_d(&b, d, R, C, c), 0);
    stats(c, 3, 3, 3);
    /* 2^-150 relative: the image stays, the entry becomes inexact */
    mpfr_mul_d(w[37], w[37], 1 + 0x1p-50, MPFR_RNDN);
    mpfr_nextabove(w[40]);
    assert_int_equal(cic_specnorm_mp(&b, (const mpfr_t *)w, R, C, 1, c), 0);
    stats(c, 3, 4, 4);
    mpfr_nextabove(w[41]);
    mpfr_nextbelow(w[40]);
    assert_int_equal(cic_specnorm_mp(&b, (const mpfr_t *)w, R, C, 1, c), 0);
    stats(c, 4, 4, 4);
    cic_specnorm_cache_destroy(c);
    cic_specnorm_cache_destroy(NULL);
    mp_free(w, R * C);
    free(d);
}

typedef struct {
    cic_specnorm_cache *c;
    double *m[3];
    double want[3];
    int bad;
} cache_run;

static void *cache_thread(void *arg)
{
    cache_run *r = arg;
    int i;
    for (i = 0; i < 12; i++) {
        double b;
        if (cic_specnorm_d(&b, r->m[i % 3], 40, 60, r->c) != 0 || b != r->want[i % 3])
            r->bad++;
    }
    return NULL;
}

/* Four threads, three matrices, twelve calls each through one cache: every
 * bound is the one computed alone, three entries, 48 lookups. */
static void test_cache_threads(void **state)
{
    cache_run r = {.c = cic_specnorm_cache_create()};
    pthread_t th[4];
    int i;
    (void)state;
    assert_non_null(r.c);
    for (i = 0; i < 3; i++) {
        r.m[i] = gauss_matrix(40, 60, 30 + (uint64_t)i);
        assert_int_equal(cic_specnorm_d(&r.want[i], r.m[i], 40, 60, NULL), 0);
    }
    for (i = 0; i < 4; i++)
        assert_int_equal(pthread_create(&th[i], NULL, cache_thread, &r), 0);
    for (i = 0; i < 4; i++)
        pthread_join(th[i], NULL);
    assert_int_equal(r.bad, 0);
    {
        uint64_t h, m;
        size_t n;
        cic_specnorm_cache_stats(r.c, &h, &m, &n);
        assert_true(h + m == 48 && n == 3 && m >= 3);
    }
    for (i = 0; i < 3; i++)
        free(r.m[i]);
    cic_specnorm_cache_destroy(r.c);
}

/* ---- brute force ---- */

/* One random small matrix of kind k: 0 random 200-bit values, 1 exact
 * rank one of 60-bit factors (tight: the bound's only slack is its
 * roundings), 2 float32 values, 3 entries of scales 2^-60 .. 2^60; all
 * times 2^g. */
static void brute_matrix(mpfr_t *w, size_t r, size_t c, int k, long g, uint64_t *s)
{
    size_t i, j;
    for (i = 0; i < r * c; i++) {
        mp_random(w[i], s, g + (k == 3 ? cic_test_pick(s, 121) - 60 : 0));
        if (k == 2)
            mpfr_set_d(w[i], (float)mpfr_get_d(w[i], MPFR_RNDN), MPFR_RNDN);
    }
    if (k == 1) {
        mpfr_t u, v[12];
        mpfr_init2(u, 60);
        for (j = 0; j < c; j++) {
            mpfr_init2(v[j], 60);
            mp_random(v[j], s, 0);
        }
        for (i = 0; i < r; i++) {
            mp_random(u, s, g);
            for (j = 0; j < c; j++)
                mpfr_mul(w[i * c + j], u, v[j], MPFR_RNDN); /* 120 bits: exact at 200 */
        }
        mpfr_clear(u);
        for (j = 0; j < c; j++)
            mpfr_clear(v[j]);
    }
}

static void test_brute_force(void **state)
{
    int trials = 2000 * cic_test_multiplier(), t, tight = 0, infinite = 0;
    uint64_t s = 2024;
    mpfr_t *w = mp_alloc(144, 200), est, ratio;
    double worst = 1;
    (void)state;
    mpfr_inits2(300, est, ratio, (mpfr_ptr)0);
    for (t = 0; t < trials; t++) {
        size_t r = 2 + (size_t)cic_test_pick(&s, 11), c = 2 + (size_t)cic_test_pick(&s, 11);
        int k = t % 4;
        long g = t % 50 == 0 ? cic_test_pick(&s, 2201) - 1100 : cic_test_pick(&s, 41) - 20;
        double b;
        brute_matrix(w, r, c, k, g, &s);
        mp_lower(est, (const mpfr_t *)w, r, c, 60);
        assert_int_equal(cic_specnorm_mp(&b, (const mpfr_t *)w, r, c, 1 + t % 3, NULL), 0);
        if (mpfr_cmp_d(est, b) > 0) {
            print_message("trial %d (%zu x %zu, kind %d, scale 2^%ld, seed 2024)\n", t, r, c, k,
                          g);
            check_above_mp(b, est, 0, "brute force");
        }
        if (isinf(b) || mpfr_zero_p(est)) {
            infinite++;
            continue;
        }
        mpfr_d_div(ratio, b, est, MPFR_RNDN);
        /* below 2^-1000 the bound is a multiple of the smallest double */
        if (b > 0x1p-1000)
            worst = fmax(worst, mpfr_get_d(ratio, MPFR_RNDN));
        if (k == 1 && mpfr_cmp_d(ratio, 1 + 0x1p-40) < 0)
            tight++;
    }
    print_message("brute force: %d matrices, bound >= the 300-bit estimate in all; %d bounds "
                  "+Inf (norm beyond double), worst ratio %.4f (norms above 2^-1000), %d rank-one bounds within "
                  "2^-40 of the norm\n",
                  trials, infinite, worst, tight);
    /* a bound 2^-40 too small would have failed on these */
    assert_true(tight > trials / 8);
    mpfr_clears(est, ratio, (mpfr_ptr)0);
    mp_free(w, 144);
}

/* T = H diag(d) H^T / n with H Sylvester's Hadamard matrix of order n
 * (entries +-1, H H^T = n I) and integers d: every entry is exact, and the
 * eigenvalues are the d exactly. Scaled by 2^-s (exact) so that the
 * largest |entry| is in [1, 2); returns lambda_max = max d 2^-s. */
static double known_spectrum(double *T, size_t n, uint64_t *seed)
{
    double *d = malloc(n * sizeof *d), mx = 0, dmax = 0;
    size_t i, j, k;
    int s;
    assert_non_null(d);
    for (k = 0; k < n; k++) {
        /* a spread spectrum, sometimes with a near-tie at the top */
        d[k] = (double)cic_test_pick(seed, 1 << 20);
        dmax = fmax(dmax, d[k]);
    }
    if (cic_test_pick(seed, 2))
        d[cic_test_pick(seed, (int)n)] = dmax - 1;
    for (i = 0; i < n; i++)
        for (j = 0; j < n; j++) {
            double t = 0;
            for (k = 0; k < n; k++) /* H_ik = (-1)^popcount(i & k) */
                t += (__builtin_popcountl(i & k) + __builtin_popcountl(j & k)) % 2 ? -d[k] : d[k];
            T[i * n + j] = t / (double)n;
            mx = fmax(mx, fabs(T[i * n + j]));
        }
    s = ilogb(mx);
    for (i = 0; i < n * n; i++)
        T[i] = ldexp(T[i], -s);
    free(d);
    return ldexp(dmax, -s);
}

/* The certificate at shifts around a known lambda_max (brute force): the
 * bound is never below it; a shift 2^-20 below it is refused (a
 * certificate that ignored a failed factorisation, or factored T without
 * the shift, fails here), shifts 2^-40 and more above it are certified,
 * and the whole bound (the estimate, then shifts) is within 2^-6 of
 * lambda_max. A factorisation that completes for a shift below lambda_max
 * would be kept above it by the rounding term alone; the count of those
 * is printed (none so far on these matrices: their factorisations are
 * accurate to the last unit, so the term is derived, not observed). */
static void test_cert_known(void **state)
{
    /* relative shifts; and the doubles 1 to 64 units below lambda_max */
    static const double eps[] = {-0x1p-20, -0x1p-40, -0x1p-44, -0x1p-46, -0x1p-48,
                                 0,        0x1p-50,  0x1p-40,  0x1p-20,  0x1p-7,
                                 -1,       -2,       -4,       -8,       -16, -64};
    static const size_t sizes[] = {64, 128, 256};
    uint64_t seed = 77;
    int trials = 0, saved = 0, refused = 0, certified = 0, t, q;
    (void)state;
    for (t = 0; t < 12 * cic_test_multiplier(); t++) {
        size_t n = sizes[t % 3];
        double *T = malloc(n * n * sizeof *T), *B = malloc(n * n * sizeof *B), lm, lam;
        assert_true(T && B);
        lm = known_spectrum(T, n, &seed);
        for (q = 0; q < (int)(sizeof eps / sizeof eps[0]); q++) {
            double alpha = eps[q] > -1 ? lm * (1 + eps[q]) : lm + eps[q] * (lm - nextafter(lm, 0));
            _cic_sn_cert_at(&lam, T, n, alpha, B);
            trials++;
            if (lam < lm)
                fail_msg("n %zu, alpha %.17g: bound %.17g below lambda_max %.17g", n, alpha, lam,
                         lm);
            if (lam == INFINITY) {
                refused++;
                if (eps[q] >= 0x1p-40)
                    fail_msg("n %zu: alpha = lambda_max (1 + %a) not certified", n, eps[q]);
                continue;
            }
            certified++;
            if (eps[q] == -0x1p-20)
                fail_msg("n %zu: alpha = lambda_max (1 - 2^-20) certified", n);
            if (alpha < lm)
                saved++;
        }
        assert_int_equal(_cic_sn_lmax_cert(&lam, T, n), 0);
        if (!(lam >= lm && lam <= lm * (1 + 0x1p-6)))
            fail_msg("n %zu: certified %.17g for lambda_max %.17g", n, lam, lm);
        free(T);
        free(B);
    }
    print_message("certificate: %d shifts, %d certified (%d of them below lambda_max, kept above "
                  "it by the rounding term), %d refused; none below lambda_max\n",
                  trials, certified, saved, refused);
    assert_true(certified >= trials / 4 && refused >= trials / 4);
}

/* One weight, many scalings (cic_specnorm_gram): float32 weights of
 * several shapes, both sides, scalings d of every kind (uniform, a spread
 * over 2^-30 .. 2^30, zeros among them, one large entry, scaled by 2^-600
 * and 2^600 as a whole); each bound against the power estimate of ||W
 * diag(d)||_2 (or ||diag(d) W||_2) in long double, which it must not be
 * below, and within 2 % of it on the shapes whose side exceeds 128 (the
 * certificate alone). Planted: NaN, infinite or negative d, all-zero d,
 * the longer side, a weight with a NaN or only zeros. */
static void test_gram_scaled(void **state)
{
    static const size_t gshapes[][2] = {{40, 12}, {12, 40}, {7, 7}, {300, 140}, {140, 300}};
    uint64_t s = 31;
    double bz;
    int checked = 0, t, kind;
    size_t q;
    (void)state;
    for (q = 0; q < sizeof gshapes / sizeof gshapes[0]; q++) {
        size_t r = gshapes[q][0], c = gshapes[q][1], i, j;
        for (t = 0; t < 2; t++) {
            bool cols = t == 0;
            size_t n = cols ? c : r;
            float *wf = malloc(r * c * sizeof *wf);
            double *wd = malloc(r * c * sizeof *wd), *d = malloc(n * sizeof *d);
            cic_specnorm_gram *g;
            assert_true(wf && wd && d);
            for (i = 0; i < r * c; i++)
                wf[i] = (float)(0.02 * gauss(&s));
            g = cic_specnorm_gram_f(wf, r, c, cols);
            if (n > (cols ? r : c)) { /* the longer side: the caller's other path */
                assert_null(g);
                free(wf), free(wd), free(d);
                continue;
            }
            assert_non_null(g);
            for (kind = 0; kind < 5; kind++) {
                double b, lo, sc = kind == 3 ? 0x1p-600 : kind == 4 ? 0x1p600 : 1;
                for (j = 0; j < n; j++)
                    d[j] = kind == 0   ? 1.5
                           : kind == 1 ? ldexp(1 + (double)cic_test_pick(&s, 1000) / 1000,
                                               cic_test_pick(&s, 61) - 30)
                           : cic_test_pick(&s, 4) == 0 ? 0
                                                       : sc * (1 + gauss(&s) * gauss(&s));
                if (kind == 2)
                    d[cic_test_pick(&s, (int)n)] = 40;
                for (j = 0; j < n; j++)
                    d[j] = fabs(d[j]);
                for (i = 0; i < r; i++)
                    for (j = 0; j < c; j++)
                        wd[i * c + j] = (double)wf[i * c + j] * d[cols ? j : i];
                assert_int_equal(cic_specnorm_gram_scaled(&b, g, d), 0);
                lo = power_lower(wd, r, c, 400);
                if (!(b >= lo) || (r > 128 && c > 128 && !(b <= 1.02 * lo)))
                    fail_msg("%zu x %zu %s, scaling %d: bound %.17g, lower estimate %.17g", r,
                             c, cols ? "columns" : "rows", kind, b, lo);
                checked++;
            }
            /* planted */
            d[0] = NAN;
            assert_int_equal(cic_specnorm_gram_scaled(&bz, g, d), 0);
            assert_true(isinf(bz));
            d[0] = -1;
            assert_int_equal(cic_specnorm_gram_scaled(&bz, g, d), 0);
            assert_true(isinf(bz));
            d[0] = INFINITY;
            assert_int_equal(cic_specnorm_gram_scaled(&bz, g, d), 0);
            assert_true(isinf(bz));
            memset(d, 0, n * sizeof *d);
            assert_int_equal(cic_specnorm_gram_scaled(&bz, g, d), 0);
            assert_true(bz == 0);
            cic_specnorm_gram_destroy(g);
            wf[3] = NAN;
            assert_null(cic_specnorm_gram_f(wf, r, c, cols));
            memset(wf, 0, r * c * sizeof *wf);
            assert_null(cic_specnorm_gram_f(wf, r, c, cols));
            free(wf), free(wd), free(d);
        }
    }
    print_message("scaled weights: %d bounds from one Gram matrix each, none below the power "
                  "estimate\n", checked);
    assert_int_equal(checked, 30); /* 6 shape-sides, 5 scalings each */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gaussian_shapes),
        cmocka_unit_test_setup_teardown(test_numpy_reference, cic_test_tmp_setup,
                                        cic_test_tmp_teardown),
        cmocka_unit_test(test_rank_one),
        cmocka_unit_test(test_lost_rounding),
        cmocka_unit_test(test_mp_beyond_double),
        cmocka_unit_test(test_mp_scales),
        cmocka_unit_test(test_special_values),
        cmocka_unit_test(test_cache_keys),
        cmocka_unit_test(test_cache_threads),
        cmocka_unit_test(test_brute_force),
        cmocka_unit_test(test_cert_known),
        cmocka_unit_test(test_gram_scaled),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
