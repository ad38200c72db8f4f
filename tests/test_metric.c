/* SPDX-License-Identifier: MIT */
/* test_metric.c: the metrics module (src/metric/ulp.c, metric.c).
 *
 * Special values are checked against hand-derived powers of two (+-0,
 * subnormals, FLT_MIN, powers of two where the gap below applies, FLT_MAX,
 * Inf, NaN). The error metric is checked on a 2x3 case worked by hand, on
 * NaN/Inf exclusion, on the ulp_elem threshold, and on a double-rounding trap
 * for max_abs. A randomized property test (seeded; seed printed on failure;
 * CIC_TEST_MULTIPLIER for longer runs; CIC_TEST_SEED to replay) checks that a
 * correctly rounded y scores <= 0.5 ulp exactly, that a k-ulp fault in one
 * entry is reported as k (+-0.5), and compares max_abs and rel_norm2 with a
 * trivially correct reference computed exactly at high precision. */
#include "testutil.h"

#include "base/mpvec.h"
#include "metric/metric.h"

/* every figure here is scored in float32 */
#define F32 cic_format_get(CIC_FORMAT_FLOAT32)

#include <float.h>
#include <gmp.h>
#include <mpfr.h>
#include <string.h>
#include <time.h>

#define P2(e) ldexp(1.0, (e))

/* Compare bit patterns: "exact" means exact (0.0 vs -0.0 would pass ==). */
#define assert_bits_eq(got, want)                                            \
    do {                                                                      \
        double g_ = (got), w_ = (want);                                       \
        if (memcmp(&g_, &w_, sizeof g_) != 0)                                 \
            fail_msg("%s = %a (%.17g), expected %s = %a (%.17g)", #got, g_,   \
                     g_, #want, w_, w_);                                      \
    } while (0)

/* ---- ULP helpers ---- */

static double ulp_of_str(const char *s)
{
    mpfr_t x;
    double u;
    mpfr_init2(x, 256);
    mpfr_set_str(x, s, 10, MPFR_RNDN);
    u = cic_format_ulp_mp(F32, x);
    mpfr_clear(x);
    return u;
}

static double ulp_of_2exp(long m, long e) /* ulp of m * 2^e, exact */
{
    mpfr_t x;
    double u;
    mpfr_init2(x, 256);
    mpfr_set_si_2exp(x, m, e, MPFR_RNDN);
    u = cic_format_ulp_mp(F32, x);
    mpfr_clear(x);
    return u;
}

/* Both entry points agree, and are even in x. */
static void check_ulp(double x, double want)
{
    mpfr_t m;
    mpfr_init2(m, 64);
    mpfr_set_d(m, x, MPFR_RNDN);
    if (cic_format_ulp(F32, x) != want || cic_format_ulp(F32, -x) != want ||
        cic_format_ulp_mp(F32, m) != want)
        fail_msg("ulp(%a): f32 %a, f32(-x) %a, mp %a, expected %a", x,
                 cic_format_ulp(F32, x), cic_format_ulp(F32, -x), cic_format_ulp_mp(F32, m), want);
    mpfr_neg(m, m, MPFR_RNDN);
    if (cic_format_ulp_mp(F32, m) != want)
        fail_msg("ulp_mp(-%a) = %a, expected %a", x, cic_format_ulp_mp(F32, m), want);
    mpfr_clear(m);
}

static void test_ulp_special(void **state)
{
    (void)state;
    check_ulp(0.0, P2(-149));
    check_ulp(-0.0, P2(-149));
    check_ulp(P2(-149), P2(-149));            /* smallest subnormal */
    check_ulp(3 * P2(-149), P2(-149));
    check_ulp(P2(-126) - P2(-149), P2(-149)); /* largest subnormal */
    check_ulp(P2(-126), P2(-149));            /* FLT_MIN: gap below */
    check_ulp(P2(-125), P2(-149));            /* gap below 2^-125 */
    check_ulp(P2(-124), P2(-148));
    check_ulp(1.5 * P2(-126), P2(-149));
    check_ulp(1.0, P2(-24));                  /* gap below 1 */
    check_ulp(1.0 + P2(-23), P2(-23));
    check_ulp(1.5, P2(-23));
    check_ulp(2.0 - P2(-23), P2(-23));
    check_ulp(2.0, P2(-23));                  /* gap below 2 */
    check_ulp(3.0, P2(-22));
    check_ulp(0.75, P2(-24));
    check_ulp(0.1, P2(-27));                  /* 0.1 in [2^-4, 2^-3) */
    check_ulp(1000.0, P2(9 - 23));
    check_ulp((double)FLT_MAX, P2(104));
    check_ulp(P2(127), P2(103));              /* gap below 2^127 */
    check_ulp(P2(-200), P2(-149));            /* below the subnormals */
    check_ulp(P2(300), P2(299 - 23));         /* beyond binary32 */

    /* Values that are not floats (exact in MPFR, not in double). */
    cic_assert_close(ulp_of_str("1.0000000000000000000000001"), P2(-23), 0, 0);
    cic_assert_close(ulp_of_str("0.99999999999999999999999999"), P2(-24), 0, 0);
    cic_assert_close(ulp_of_2exp(1, -150), P2(-149), 0, 0);
    cic_assert_close(ulp_of_2exp(-1, -127), P2(-149), 0, 0);
    cic_assert_close(ulp_of_2exp(3, 1000), P2(1001 - 23), 0, 0);
    {
        /* 2^-126 - 2^-300: just below FLT_MIN, subnormal binade */
        mpfr_t x;
        mpfr_init2(x, 256);
        mpfr_set_si_2exp(x, 1, -126, MPFR_RNDN);
        mpfr_sub_d(x, x, P2(-300), MPFR_RNDN);
        cic_assert_close(cic_format_ulp_mp(F32, x), P2(-149), 0, 0);
        /* 1 + 2^-200: not a power of two although it rounds to one */
        mpfr_set_ui(x, 1, MPFR_RNDN);
        mpfr_add_d(x, x, P2(-200), MPFR_RNDN);
        cic_assert_close(cic_format_ulp_mp(F32, x), P2(-23), 0, 0);
        mpfr_clear(x);
    }
}

static void check_dist(float a, float b, uint64_t want)
{
    uint64_t g1 = cic_format_distance(F32, a, b), g2 = cic_format_distance(F32, b, a);
    if (g1 != want || g2 != want)
        fail_msg("distance(%a, %a) = %llu, reversed %llu, expected %llu",
                 (double)a, (double)b, (unsigned long long)g1,
                 (unsigned long long)g2, (unsigned long long)want);
}

static void test_ordered(void **state)
{
    const float tiny = 0x1p-149f;
    (void)state;
    /* +0 and -0 have different bits but the same code */
    assert_int_equal(cic_format_ordered(F32, 0.0f), 0);
    assert_int_equal(cic_format_ordered(F32, -0.0f), 0);
    assert_int_equal(cic_format_ordered(F32, tiny), 1);
    assert_int_equal(cic_format_ordered(F32, -tiny), -1);
    assert_int_equal(cic_format_ordered(F32, FLT_MIN), INT64_C(0x00800000));
    assert_int_equal(cic_format_ordered(F32, 1.0f), INT64_C(0x3f800000));
    assert_int_equal(cic_format_ordered(F32, -1.0f), -INT64_C(0x3f800000));
    assert_int_equal(cic_format_ordered(F32, INFINITY), INT64_C(0x7f800000));
    assert_int_equal(cic_format_ordered(F32, -INFINITY), -INT64_C(0x7f800000));
    assert_true(cic_format_ordered(F32, FLT_MAX) + 1 == cic_format_ordered(F32, INFINITY));
    assert_true(cic_format_ordered(F32, nextafterf(1.0f, 0.0f)) + 1 ==
                cic_format_ordered(F32, 1.0f));

    check_dist(-0.0f, 0.0f, 0);
    check_dist(-tiny, tiny, 2);
    check_dist(-tiny, 0.0f, 1);
    check_dist(-tiny, -0.0f, 1);
    check_dist(1.0f, nextafterf(1.0f, 2.0f), 1);
    check_dist(1.0f, nextafterf(1.0f, 0.0f), 1);
    check_dist(1.0f, 1.0f, 0);
    check_dist(-1.0f, 1.0f, UINT64_C(2) * 0x3f800000);
    check_dist(1.0f, 2.0f, UINT64_C(1) << 23); /* one binade */
    check_dist(FLT_MIN - tiny, FLT_MIN, 1);      /* subnormal/normal seam */
    check_dist(FLT_MAX, INFINITY, 1);
    check_dist(-FLT_MAX, -INFINITY, 1);
    check_dist(-INFINITY, INFINITY, UINT64_C(2) * 0x7f800000);
    check_dist(INFINITY, INFINITY, 0);
    check_dist(NAN, 1.0f, UINT64_MAX);
    check_dist(NAN, NAN, UINT64_MAX);
    check_dist(-NAN, INFINITY, UINT64_MAX);
}

/* ---- the error metric ---- */

/* A truth vector from doubles (exact), at prec bits. */
static mpfr_t *mk_x(const double *xd, size_t n, mpfr_prec_t prec)
{
    size_t i;
    mpfr_t *x = cic_mpvec_create(n, prec);
    assert_non_null(x);
    for (i = 0; i < n; i++)
        mpfr_set_d(x[i], xd[i], MPFR_RNDN);
    return x;
}

static void test_error_hand(void **state)
{
    /* Row 0: max |x| = 3, ulp 2^-22; threshold 3 * 2^-10.
     * Row 1: max |x| = 2 (power of two: ulp is the gap below, 2^-23);
     *        threshold 2^-9.
     *   entry      x            y             |y-x|  row ratio   elem ratio
     *   (0,0)      3            3 + 2^-22     2^-22  1           1 (ulp 2^-22)
     *   (0,1)      1 + 2^-30    1             2^-30  2^-8        2^-7 (2^-23)
     *   (0,2)      2^-12        2^-12         0      0           excluded
     *   (1,0)     -2           -2 - 2^-22     2^-22  2           2 (gap 2^-23)
     *   (1,1)      0.25         0.25 - 2^-26  2^-26  2^-3        1 (gap 2^-26)
     *   (1,2)      0            2^-20         2^-20  8           excluded */
    const double xd[6] = {3.0, 1.0 + P2(-30), P2(-12), -2.0, 0.25, 0.0};
    const float y[6] = {(float)(3.0 + P2(-22)), 1.0f, (float)P2(-12),
                        (float)(-2.0 - P2(-22)), (float)(0.25 - P2(-26)),
                        (float)P2(-20)};
    const double dsq = 2 * P2(-44) + P2(-60) + P2(-52) + P2(-40);
    const double xsq = 9.0 + (1.0 + P2(-30)) * (1.0 + P2(-30)) + P2(-24) +
                       4.0 + 0.0625;
    mpfr_t *x;
    cic_metrics m;
    size_t i;
    (void)state;
    for (i = 0; i < 6; i++) /* the y above are floats, no rounding hidden */
        assert_true((double)y[i] != xd[i] || i == 2);
    x = mk_x(xd, 6, 128);
    memset(&m, 0x5a, sizeof m); /* untouched fields must stay untouched */
    cic_metric_error(&m, F32, (const mpfr_t *)x, y, 2, 3, 128);

    assert_bits_eq(m.max_abs, P2(-20));
    cic_assert_close(m.rel_norm2, sqrt(dsq / xsq), 1e-15, 0);
    assert_bits_eq(m.ulp_row.max, 8.0);
    assert_bits_eq(m.ulp_row.p99, 8.0); /* rank ceil(0.99 * 6) = 6 */
    cic_assert_close(m.ulp_row.mean, (1 + P2(-8) + 0 + 2 + 0.125 + 8) / 6,
                     1e-15, 0);
    assert_bits_eq(m.ulp_elem.max, 2.0);
    assert_bits_eq(m.ulp_elem.p99, 2.0);
    cic_assert_close(m.ulp_elem.mean, (1 + P2(-7) + 2 + 1) / 4.0, 1e-15, 0);
    assert_int_equal(m.ulp_elem_excluded, 2);
    assert_int_equal(m.nonfinite, 0);
    assert_int_equal(m.first_nonfinite, -1);
    {
        cic_metrics u;
        memset(&u, 0x5a, sizeof u);
        assert_memory_equal(&m.drift, &u.drift, sizeof u.drift);
        assert_memory_equal(&m.decomp_weights, &u.decomp_weights,
                            sizeof u.decomp_weights);
        assert_memory_equal(&m.has_drift, &u.has_drift, sizeof u.has_drift);
    }

    /* Transpose-free check that rows really are rows: as one 1x6 row the
     * scale is 3 everywhere, so (1,2) scores 2^-20 / 2^-22 = 4 and the
     * entries -2 and 0.25 are scored against ulp(3) = 2^-22. */
    cic_metric_error(&m, F32, (const mpfr_t *)x, y, 1, 6, 128);
    assert_bits_eq(m.ulp_row.max, 4.0);
    cic_assert_close(m.ulp_row.mean,
                     (1 + P2(-8) + 0 + 1 + P2(-4) + 4) / 6, 1e-15, 0);
    assert_bits_eq(m.max_abs, P2(-20));
    assert_int_equal(m.ulp_elem_excluded, 2);

    /* y == x as floats: everything 0. */
    {
        const float yx[6] = {3.0f, 1.0f, (float)P2(-12), -2.0f, 0.25f, 0.0f};
        mpfr_set_d(x[1], 1.0, MPFR_RNDN);
        cic_metric_error(&m, F32, (const mpfr_t *)x, yx, 2, 3, 128);
        assert_bits_eq(m.max_abs, 0.0);
        assert_bits_eq(m.rel_norm2, 0.0);
        assert_bits_eq(m.ulp_row.max, 0.0);
        assert_bits_eq(m.ulp_elem.mean, 0.0);
    }
    cic_mpvec_destroy(x, 6);
}

static void test_error_nonfinite(void **state)
{
    /* A non-finite output has no finite error: every figure that covers it
     * is NaN or +Inf (a gate on it fails), never the figure of the finite
     * entries alone. The hand case with (0,1) = NaN and (1,1) = +Inf. */
    const double xd[6] = {3.0, 1.0 + P2(-30), P2(-12), -2.0, 0.25, 0.0};
    const float y[6] = {(float)(3.0 + P2(-22)), NAN, (float)P2(-12),
                        (float)(-2.0 - P2(-22)), INFINITY, (float)P2(-20)};
    mpfr_t *x = mk_x(xd, 6, 128);
    cic_metrics m;
    (void)state;
    cic_metric_error(&m, F32, (const mpfr_t *)x, y, 2, 3, 128);
    assert_int_equal(m.nonfinite, 2);
    assert_int_equal(m.first_nonfinite, 1);
    assert_true(isnan(m.max_abs));
    assert_true(isnan(m.rel_norm2));
    assert_true(isinf(m.ulp_row.max) && m.ulp_row.max > 0);
    assert_true(isinf(m.ulp_row.p99));
    assert_true(isinf(m.ulp_row.mean));
    assert_true(isinf(m.ulp_elem.max) && isinf(m.ulp_elem.mean));
    /* the non-finite entries are scored, not excluded: (0,2), (1,2) are */
    assert_int_equal(m.ulp_elem_excluded, 2);
    /* the finite entries keep their scores; sorted: 0 (0,2), 1 (0,0),
     * 2 (1,0), 8 (1,2), then Inf for (0,1) and (1,1) */
    assert_bits_eq(m.ulp_row_q[0], 0.0);
    assert_bits_eq(m.ulp_row_q[50], 2.0); /* rank ceil(50 * 6 / 100) = 3 */
    assert_true(isinf(m.ulp_row_q[100]));

    /* Inf only (no NaN): +Inf, not NaN */
    {
        const float y2[6] = {-INFINITY, 1.0f, (float)P2(-12), -2.0f, 0.25f, 0.0f};
        cic_metric_error(&m, F32, (const mpfr_t *)x, y2, 2, 3, 128);
        assert_int_equal(m.nonfinite, 1);
        assert_int_equal(m.first_nonfinite, 0);
        assert_true(isinf(m.max_abs) && m.max_abs > 0);
        assert_true(isinf(m.rel_norm2) && m.rel_norm2 > 0);
        assert_true(isinf(m.ulp_row.max) && isinf(m.ulp_row.p99));
    }
    /* Inf at a row's largest entry (not its first): the row keeps the
     * scale of the truth, ulp(3) = 2^-22, not ulp of the finite entries:
     * 1 against 1 + 2^-30 scores 2^-30 / 2^-22 = 2^-8. */
    {
        const double xd3[3] = {1.0 + P2(-30), -3.0, P2(-12)};
        const float y3[3] = {1.0f, -INFINITY, (float)P2(-12)};
        mpfr_t *x3 = mk_x(xd3, 3, 128);
        cic_metric_error(&m, F32, (const mpfr_t *)x3, y3, 1, 3, 128);
        assert_int_equal(m.nonfinite, 1);
        assert_int_equal(m.first_nonfinite, 1);
        assert_bits_eq(m.ulp_row_q[0], 0.0);
        assert_bits_eq(m.ulp_row_q[50], P2(-8)); /* rank 2 of 0, 2^-8, Inf */
        assert_true(isinf(m.ulp_row.max));
        cic_mpvec_destroy(x3, 3);
    }
    /* everything non-finite: no figure reads 0 (it read 0 before, and a
     * gate on it passed) */
    {
        const float y3[6] = {NAN, NAN, INFINITY, -INFINITY, NAN, NAN};
        cic_metric_error(&m, F32, (const mpfr_t *)x, y3, 2, 3, 128);
        assert_int_equal(m.nonfinite, 6);
        assert_int_equal(m.first_nonfinite, 0);
        assert_true(isnan(m.max_abs));
        assert_true(isnan(m.rel_norm2));
        assert_true(isinf(m.ulp_row.p99) && isinf(m.ulp_row.max) &&
                    isinf(m.ulp_row.mean));
        assert_true(isinf(m.ulp_elem.p99) && isinf(m.ulp_elem.max));
        assert_int_equal(m.ulp_elem_excluded, 0);
    }
    cic_mpvec_destroy(x, 6);

    /* fewer than 1 % non-finite: max is +Inf, p99 still finite */
    {
        enum { N = 200 };
        double xs[N];
        float ys[N];
        mpfr_t *xv;
        int i;
        for (i = 0; i < N; i++) {
            xs[i] = 1.0 + i;
            ys[i] = (float)xs[i];
        }
        ys[17] = INFINITY;
        xv = mk_x(xs, N, 128);
        cic_metric_error(&m, F32, (const mpfr_t *)xv, ys, 1, N, 128);
        assert_true(isinf(m.ulp_row.max));
        assert_bits_eq(m.ulp_row.p99, 0.0); /* rank 198 of 199 zeros, one Inf */
        assert_true(isinf(m.max_abs));
        cic_mpvec_destroy(xv, N);
    }
}

static void test_drift_nan(void **state)
{
    /* NaN on either side has no distance: +Inf in the figures (a drift
     * gate over all-NaN outputs read 0 and passed before) */
    const float b[4] = {1.0f, NAN, 2.0f, NAN};
    const float a[4] = {1.0f, 1.0f, NAN, NAN};
    cic_stat3 d;
    (void)state;
    cic_metric_drift(&d, F32, b, a, 4);
    assert_true(isinf(d.max) && isinf(d.mean));
    cic_metric_drift(&d, F32, b, b, 1);
    assert_bits_eq(d.max, 0.0);
}

static void test_error_exclusion(void **state)
{
    /* One row, max 1: threshold 2^-10, which is itself included (>=). */
    const double xd[7] = {1.0, P2(-10), -P2(-10), P2(-10) - P2(-40),
                          -P2(-11), 0.0, 0.5};
    const float y[7] = {1.0f, (float)P2(-10), (float)-P2(-10),
                        (float)P2(-10), (float)-P2(-11), 0.0f, 0.5f};
    mpfr_t *x = mk_x(xd, 7, 128);
    cic_metrics m;
    (void)state;
    cic_metric_error(&m, F32, (const mpfr_t *)x, y, 1, 7, 128);
    assert_int_equal(m.ulp_elem_excluded, 3);
    assert_bits_eq(m.ulp_elem.max, 0.0);
    /* the excluded (0,3) still counts for ulp_row and max_abs */
    assert_bits_eq(m.max_abs, P2(-40));
    assert_bits_eq(m.ulp_row.max, P2(-40) / P2(-24));

    /* A second row with a tiny scale has its own threshold. */
    {
        const double xd2[4] = {1.0, P2(-20), P2(-30), P2(-31)};
        const float y2[4] = {1.0f, (float)P2(-20), (float)P2(-30), 0.0f};
        mpfr_t *x2 = mk_x(xd2, 4, 64);
        cic_metric_error(&m, F32, (const mpfr_t *)x2, y2, 2, 2, 64);
        /* row 0: 2^-20 < 2^-10 excluded; row 1: max 2^-30, 2^-31 kept
         * and scored against the gap below 2^-31: 2^-31 / 2^-55 */
        assert_int_equal(m.ulp_elem_excluded, 1);
        assert_bits_eq(m.ulp_elem.max, P2(24));
        /* ulp_row of that entry: ulp(2^-30) = 2^-54 */
        assert_bits_eq(m.ulp_row.max, P2(23));
        cic_mpvec_destroy(x2, 4);
    }
    cic_mpvec_destroy(x, 7);
}

static void test_error_max_abs_rounding(void **state)
{
    /* |y - x| = 1 + 2^-53 + 2^-100: correctly rounded to double that is
     * 1 + 2^-52. Rounding it to nearest at fewer than 100 bits first would
     * land on the midpoint 1 + 2^-53 and then tie to even, 1.0. With prec
     * 24 the metric works at 88 bits, so only round-to-odd gets it right. */
    mpfr_t *x = cic_mpvec_create(2, 128);
    const float y[2] = {0.0f, 0.0f};
    cic_metrics m;
    (void)state;
    assert_non_null(x);
    mpfr_set_si_2exp(x[0], -1, -100, MPFR_RNDN);
    mpfr_add_d(x[0], x[0], -P2(-53), MPFR_RNDN);
    mpfr_sub_ui(x[0], x[0], 1, MPFR_RNDN); /* -(1 + 2^-53 + 2^-100) */
    mpfr_set_d(x[1], 0.5, MPFR_RNDN);
    assert_int_equal(mpfr_min_prec(x[0]), 101);
    cic_metric_error(&m, F32, (const mpfr_t *)x, y, 1, 2, 24);
    assert_bits_eq(m.max_abs, 1.0 + P2(-52));
    /* and the ratio gets the same correct rounding: ulp(x0) = 2^-23 */
    assert_bits_eq(m.ulp_row.max, (1.0 + P2(-52)) * P2(23));
    cic_mpvec_destroy(x, 2);
}

static void test_error_empty(void **state)
{
    cic_metrics m;
    (void)state;
    memset(&m, 0x5a, sizeof m);
    cic_metric_error(&m, F32, NULL, NULL, 0, 5, 128);
    assert_bits_eq(m.max_abs, 0.0);
    assert_bits_eq(m.rel_norm2, 0.0);
    assert_bits_eq(m.ulp_row.max, 0.0);
    assert_bits_eq(m.ulp_elem.p99, 0.0);
    assert_int_equal(m.nonfinite, 0);
    assert_int_equal(m.first_nonfinite, -1);
    assert_int_equal(m.ulp_elem_excluded, 0);
}

/* ---- rel_diff, drift, percentile ---- */

static void test_rel_diff(void **state)
{
    const double bd[3] = {1.0, -2.0, 2.0};
    const double ad[3] = {1.0, -2.0, 3.0};
    mpfr_t *a = mk_x(ad, 3, 200), *b = mk_x(bd, 3, 200), *z;
    const float af[3] = {1.0f, -2.0f, 2.0f};
    (void)state;
    assert_bits_eq(cic_metric_rel_diff((const mpfr_t *)b, (const mpfr_t *)b,
                                       3, 200), 0.0);
    assert_bits_eq(cic_metric_rel_diff_f32(af, (const mpfr_t *)b, 3, 200),
                   0.0);
    /* ||(0,0,1)|| / ||(1,-2,2)|| = 1/3 */
    cic_assert_close(cic_metric_rel_diff((const mpfr_t *)a,
                                         (const mpfr_t *)b, 3, 200),
                     1.0 / 3.0, 1e-16, 0);
    cic_assert_close(cic_metric_rel_diff((const mpfr_t *)b,
                                         (const mpfr_t *)a, 3, 200),
                     1.0 / sqrt(14.0), 1e-16, 0);
    /* a difference far below double resolution is still seen */
    mpfr_add_d(a[2], b[2], P2(-150), MPFR_RNDN);
    cic_assert_close(cic_metric_rel_diff((const mpfr_t *)a,
                                         (const mpfr_t *)b, 3, 200),
                     P2(-150) / 3.0, 1e-15, 0);
    {
        const float an[3] = {1.0f, NAN, INFINITY};
        const float ai[3] = {1.0f, -INFINITY, 0.0f};
        assert_true(isnan(cic_metric_rel_diff_f32(an, (const mpfr_t *)b, 3,
                                                  64)));
        assert_true(isinf(cic_metric_rel_diff_f32(ai, (const mpfr_t *)b, 3,
                                                  64)));
    }
    z = cic_mpvec_create(3, 64); /* all +0 */
    assert_bits_eq(cic_metric_rel_diff((const mpfr_t *)z, (const mpfr_t *)z,
                                       3, 64), 0.0);
    assert_bits_eq(cic_metric_rel_diff((const mpfr_t *)b, (const mpfr_t *)z,
                                       3, 64), INFINITY);
    assert_bits_eq(cic_metric_rel_diff(NULL, NULL, 0, 64), 0.0);
    /* a non-finite reference (an overflowed run) gives NaN, not an abort */
    mpfr_set_inf(z[1], 1);
    assert_true(isnan(cic_metric_rel_diff((const mpfr_t *)b, (const mpfr_t *)z,
                                          3, 64)));
    mpfr_set_nan(z[1]);
    assert_true(isnan(cic_metric_rel_diff_f32(af, (const mpfr_t *)z, 3, 64)));
    cic_mpvec_destroy(a, 3);
    cic_mpvec_destroy(b, 3);
    cic_mpvec_destroy(z, 3);
}

static void test_drift(void **state)
{
    const float tiny = 0x1p-149f;
    const float before[8] = {1.0f, -0.0f, 1.0f, FLT_MAX, NAN, -tiny, 1.0f,
                             2.0f};
    const float after[8] = {nextafterf(1.0f, 2.0f), 0.0f, 1.0f, INFINITY,
                            1.0f, tiny, 1.0f + 4 * 0x1p-23f, NAN};
    cic_stat3 d;
    (void)state;
    /* distances 1, 0, 0, 1, 2, 4 on the first 7 but index 4 (NaN before) */
    {
        const int keep[6] = {0, 1, 2, 3, 5, 6};
        float b6[6], a6[6];
        int k;
        for (k = 0; k < 6; k++) {
            b6[k] = before[keep[k]];
            a6[k] = after[keep[k]];
        }
        cic_metric_drift(&d, F32, b6, a6, 6);
        assert_bits_eq(d.max, 4.0);
        assert_bits_eq(d.p99, 4.0);
        cic_assert_close(d.mean, 8.0 / 6.0, 1e-15, 0);
    }
    /* with the two NaN pairs: +Inf, not skipped (test_drift_nan) */
    cic_metric_drift(&d, F32, before, after, 8);
    assert_true(isinf(d.max) && isinf(d.p99) && isinf(d.mean));
    cic_metric_drift(&d, F32, before, before + 0, 4); /* identical: all 0 */
    assert_bits_eq(d.max, 0.0);
    assert_bits_eq(d.mean, 0.0);
    cic_metric_drift(&d, F32, NULL, NULL, 0);
    assert_bits_eq(d.max, 0.0);
    assert_bits_eq(d.p99, 0.0);
    {
        /* p99 is not the max: 100 pairs, distances 1..100 */
        float b[100], a[100];
        int i;
        for (i = 0; i < 100; i++) {
            b[i] = 1.0f;
            a[i] = 1.0f + (float)((99 - i) * 3 % 100 + 1) * 0x1p-23f;
        }
        cic_metric_drift(&d, F32, b, a, 100);
        assert_bits_eq(d.max, 100.0);
        assert_bits_eq(d.p99, 99.0);
        assert_bits_eq(d.mean, 50.5);
    }
}

static void test_percentile(void **state)
{
    double v[100], copy[100];
    const double one = -7.25;
    int i;
    (void)state;
    assert_bits_eq(cic_percentile(NULL, 0, 99), 0.0);
    assert_bits_eq(cic_percentile(&one, 1, 0), -7.25);
    assert_bits_eq(cic_percentile(&one, 1, 50), -7.25);
    assert_bits_eq(cic_percentile(&one, 1, 100), -7.25);
    for (i = 0; i < 100; i++) /* 1..100 scrambled (37 is prime to 100) */
        v[i] = (double)((i * 37) % 100 + 1);
    memcpy(copy, v, sizeof v);
    assert_bits_eq(cic_percentile(v, 100, 99), 99.0);
    assert_bits_eq(cic_percentile(v, 100, 100), 100.0);
    assert_bits_eq(cic_percentile(v, 100, 50), 50.0);
    assert_bits_eq(cic_percentile(v, 100, 0), 1.0);
    /* integer ranks must be exact: 7 / 100.0 * 100 is 7.000000000000001 */
    assert_bits_eq(cic_percentile(v, 100, 7), 7.0);
    assert_bits_eq(cic_percentile(v, 100, 55), 55.0);
    assert_bits_eq(cic_percentile(v, 100, 0.5), 1.0);
    assert_bits_eq(cic_percentile(v, 100, 1.5), 2.0);
    assert_bits_eq(cic_percentile(v, 10, 99), 97.0); /* 1,38,75,...,34 */
    assert_memory_equal(v, copy, sizeof v); /* not modified */
    {
        const double w[3] = {3.0, 1.0, 2.0};
        assert_bits_eq(cic_percentile(w, 3, 99), 3.0);
        assert_bits_eq(cic_percentile(w, 3, 66), 2.0);
        assert_bits_eq(cic_percentile(w, 3, 34), 2.0);
        assert_bits_eq(cic_percentile(w, 3, 33), 1.0);
    }
}

/* ---- randomized property tests ---- */

static int cmp_double_ref(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static uint64_t rnd_state;
static uint64_t rnd_u64(void);
static long rnd_range(long lo, long hi);

/* cic_percentile against the definition: sort a copy, take rank
 * ceil(p * n / 100) clamped to [1, n]. Many duplicates, sorted and reversed
 * inputs, to exercise the selection. */
static void test_percentile_random(void **state)
{
    const char *env = getenv("CIC_TEST_SEED");
    uint64_t seed = env ? strtoull(env, NULL, 0)
                        : (uint64_t)time(NULL) ^ (uint64_t)clock();
    int iters = 300 * cic_test_multiplier(), it;
    (void)state;
    rnd_state = seed;
    for (it = 0; it < iters; it++) {
        size_t n = (size_t)rnd_range(1, it % 10 == 0 ? 5000 : 60), i, k;
        long distinct = rnd_range(1, 1000), order = rnd_range(0, 3);
        double *v = malloc(n * sizeof *v), *s = malloc(n * sizeof *s);
        double p = rnd_range(0, 1) ? (double)rnd_range(0, 100)
                                   : (double)rnd_range(0, 100000) / 1000.0;
        double got, want, r;
        assert_true(v && s);
        for (i = 0; i < n; i++)
            v[i] = (double)rnd_range(0, distinct) / 8.0 - 3.0;
        if (order >= 1) /* sorted, or (2) sorted then reversed */
            qsort(v, n, sizeof *v, cmp_double_ref);
        for (i = 0; order == 2 && i < n / 2; i++) {
            double t = v[i];
            v[i] = v[n - 1 - i];
            v[n - 1 - i] = t;
        }
        memcpy(s, v, n * sizeof *s);
        qsort(s, n, sizeof *s, cmp_double_ref);
        r = ceil(p * (double)n / 100.0);
        k = r < 1 ? 1 : r > (double)n ? n : (size_t)r;
        want = s[k - 1];
        got = cic_percentile(v, n, p);
        if (got != want)
            fail_msg("seed %llu iter %d: percentile(n %zu, p %.17g) = %.17g, "
                     "expected %.17g (rank %zu)",
                     (unsigned long long)seed, it, n, p, got, want, k);
        free(v);
        free(s);
    }
}

/* ---- randomized error metric ---- */

static uint64_t rnd_u64(void)
{
    return cic_test_rand(&rnd_state);
}
static long rnd_range(long lo, long hi) /* [lo, hi] */
{
    return lo + (long)(rnd_u64() % (uint64_t)(hi - lo + 1));
}

/* A truth value of a random kind: 128 random bits, a float, a power of two,
 * zero, subnormal range, near a binade edge; exponents mostly near a row
 * scale so the ulp_elem threshold is exercised on both sides. */
static void rnd_truth(mpfr_ptr x, gmp_randstate_t gs, long escale)
{
    long kind = rnd_range(0, 9), e = escale + rnd_range(-14, 2);
    if (rnd_range(0, 7) == 0)
        e = rnd_range(-160, 120);
    mpfr_urandomb(x, gs); /* [0, 1) with prec(x) random bits */
    if (mpfr_zero_p(x))
        mpfr_set_ui(x, 1, MPFR_RNDN);
    switch (kind) {
    case 0:
        mpfr_set_zero(x, 1);
        break;
    case 1:
        mpfr_set_ui_2exp(x, 1, e, MPFR_RNDN);
        break;
    case 2: /* a float (x may live in an mpvec block: no mpfr_prec_round) */
        mpfr_set_flt(x, mpfr_get_flt(x, MPFR_RNDN), MPFR_RNDN);
        mpfr_mul_2si(x, x, e, MPFR_RNDN);
        break;
    case 3: /* just below / above a power of two */
        mpfr_set_ui_2exp(x, 1, e, MPFR_RNDN);
        if (rnd_range(0, 1))
            mpfr_nextbelow(x);
        else
            mpfr_nextabove(x);
        break;
    case 4: /* subnormal range */
        mpfr_mul_2si(x, x, rnd_range(-152, -126), MPFR_RNDN);
        break;
    case 5: /* a float midpoint: ties */
        {
            /* 25 bits: a binary32 value or a midpoint between two */
            mpfr_t t25;
            mpfr_init2(t25, 25);
            mpfr_set(t25, x, MPFR_RNDN);
            mpfr_set(x, t25, MPFR_RNDN);
            mpfr_clear(t25);
        }
        mpfr_mul_2si(x, x, e, MPFR_RNDN);
        break;
    default:
        mpfr_mul_2si(x, x, e, MPFR_RNDN);
        break;
    }
    if (rnd_range(0, 1))
        mpfr_neg(x, x, MPFR_RNDN);
}

/* Reference, trivially correct: exact |y - x| at 1200 bits (enough for any
 * float against a 128-bit x with exponent >= -300), max and squares summed
 * exactly with mpfr_sum. */
static void reference(double *max_abs, double *rel, const mpfr_t *x,
                      const float *y, size_t n)
{
    mpfr_t *d = cic_mpvec_create(n, 1200), *xs = cic_mpvec_create(n, 256);
    mpfr_t yv, mx, sd, sx;
    mpfr_ptr *pd = calloc(n + 1, sizeof *pd), *px = calloc(n + 1, sizeof *px);
    size_t i;
    assert_true(d && xs && pd && px);
    mpfr_inits2(1200, yv, mx, sd, sx, (mpfr_ptr)0);
    mpfr_set_zero(mx, 1);
    for (i = 0; i < n; i++) {
        mpfr_set_flt(yv, y[i], MPFR_RNDN);
        assert_int_equal(mpfr_sub(d[i], yv, x[i], MPFR_RNDN), 0);
        mpfr_abs(d[i], d[i], MPFR_RNDN);
        if (mpfr_cmp(d[i], mx) > 0)
            mpfr_set(mx, d[i], MPFR_RNDN);
        mpfr_sqr(d[i], d[i], MPFR_RNDN); /* 2 * ~300 bits span: exact */
        mpfr_sqr(xs[i], x[i], MPFR_RNDN);
        pd[i] = d[i];
        px[i] = xs[i];
    }
    mpfr_sum(sd, pd, n, MPFR_RNDN);
    mpfr_sum(sx, px, n, MPFR_RNDN);
    *max_abs = mpfr_get_d(mx, MPFR_RNDN);
    if (mpfr_zero_p(sd))
        *rel = 0.0;
    else {
        mpfr_div(sd, sd, sx, MPFR_RNDN);
        mpfr_sqrt(sd, sd, MPFR_RNDN);
        *rel = mpfr_get_d(sd, MPFR_RNDN);
    }
    mpfr_clears(yv, mx, sd, sx, (mpfr_ptr)0);
    free(pd);
    free(px);
    cic_mpvec_destroy(d, n);
    cic_mpvec_destroy(xs, n);
}

static void test_error_random(void **state)
{
    const char *env = getenv("CIC_TEST_SEED");
    uint64_t seed = env ? strtoull(env, NULL, 0)
                        : (uint64_t)time(NULL) ^ (uint64_t)clock();
    int iters = 200 * cic_test_multiplier(), it;
    gmp_randstate_t gs;
    (void)state;
    rnd_state = seed;
    gmp_randinit_default(gs);
    gmp_randseed_ui(gs, (unsigned long)rnd_u64());
    for (it = 0; it < iters; it++) {
        size_t rows = (size_t)rnd_range(1, 6), cols = (size_t)rnd_range(1, 40);
        size_t n = rows * cols, i, r, j, jmax;
        mpfr_t *x = cic_mpvec_create(n, 128);
        float *y = calloc(n, sizeof *y);
        cic_metrics m;
        double ref_max, ref_rel, u, yd = 0.0, want;
        long k = rnd_range(2, 1000), s;
        assert_true(x && y);
        for (r = 0; r < rows; r++) {
            long escale = rnd_range(-140, 100);
            for (j = 0; j < cols; j++)
                rnd_truth(x[r * cols + j], gs, escale);
        }
        for (i = 0; i < n; i++)
            y[i] = cic_mp_get_f32(x[i]);

        cic_metric_error(&m, F32, (const mpfr_t *)x, y, rows, cols, 128);
        reference(&ref_max, &ref_rel, (const mpfr_t *)x, y, n);
        if (!(m.ulp_row.max <= 0.5 && m.ulp_elem.max <= 0.5 &&
              m.ulp_row.p99 <= m.ulp_row.max && m.nonfinite == 0 &&
              m.max_abs == ref_max &&
              fabs(m.rel_norm2 - ref_rel) <= 1e-15 * ref_rel))
            fail_msg("seed %llu iter %d (%zux%zu, prec 128): correctly "
                     "rounded y: ulp_row max %.17g p99 %.17g, ulp_elem max "
                     "%.17g, nonfinite %llu, max_abs %a (ref %a), rel_norm2 "
                     "%.17g (ref %.17g)",
                     (unsigned long long)seed, it, rows, cols,
                     m.ulp_row.max, m.ulp_row.p99, m.ulp_elem.max,
                     (unsigned long long)m.nonfinite, m.max_abs, ref_max,
                     m.rel_norm2, ref_rel);

        /* Plant a k-ulp fault at the largest entry of a random row: both
         * ulp figures must report k (+-0.5 from the rounding already in y). */
        r = (size_t)rnd_range(0, (long)rows - 1);
        jmax = r * cols;
        for (j = r * cols; j < (r + 1) * cols; j++)
            if (mpfr_cmpabs(x[j], x[jmax]) > 0)
                jmax = j;
        u = cic_format_ulp_mp(F32, x[jmax]);
        for (s = 1; s >= -1; s -= 2) {
            yd = (double)y[jmax] + (double)(s * k) * u; /* exact in double */
            if ((double)(float)yd == yd && isfinite((float)yd))
                break;
        }
        if (s < -1) /* neither direction is a float: cannot happen */
            fail_msg("seed %llu iter %d: no float %ld ulps from %a",
                     (unsigned long long)seed, it, k, (double)y[jmax]);
        y[jmax] = (float)yd;
        cic_metric_error(&m, F32, (const mpfr_t *)x, y, rows, cols, 128);
        want = (double)k;
        if (!(fabs(m.ulp_row.max - want) <= 0.5 &&
              fabs(m.ulp_elem.max - want) <= 0.5))
            fail_msg("seed %llu iter %d (%zux%zu): %ld-ulp fault at %zu "
                     "(x %a, y %a, ulp %a): ulp_row max %.17g, ulp_elem max "
                     "%.17g",
                     (unsigned long long)seed, it, rows, cols, k, jmax,
                     mpfr_get_d(x[jmax], MPFR_RNDN), yd, u, m.ulp_row.max,
                     m.ulp_elem.max);
        reference(&ref_max, &ref_rel, (const mpfr_t *)x, y, n);
        if (m.max_abs != ref_max)
            fail_msg("seed %llu iter %d: max_abs %a, reference %a",
                     (unsigned long long)seed, it, m.max_abs, ref_max);
        cic_mpvec_destroy(x, n);
        free(y);
    }
    gmp_randclear(gs);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ulp_special),
        cmocka_unit_test(test_ordered),
        cmocka_unit_test(test_error_hand),
        cmocka_unit_test(test_error_nonfinite),
        cmocka_unit_test(test_drift_nan),
        cmocka_unit_test(test_error_exclusion),
        cmocka_unit_test(test_error_max_abs_rounding),
        cmocka_unit_test(test_error_empty),
        cmocka_unit_test(test_rel_diff),
        cmocka_unit_test(test_drift),
        cmocka_unit_test(test_percentile),
        cmocka_unit_test(test_percentile_random),
        cmocka_unit_test(test_error_random),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
