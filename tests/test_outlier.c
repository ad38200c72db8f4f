/* SPDX-License-Identifier: MIT */
/* test_outlier.c: the outlier statistics (src/metric/outlier.c) on
 * matrices worked out by hand in the comments, a Gaussian sample (Pearson
 * kurtosis near 3), a rotation-like spreading of one outlier channel, and
 * the undefined cases (NaN). */
#include "testutil.h"

#include "base/rng.h"
#include "metric/outlier.h"

#include <math.h>

static cic_outlier stats(const float *x, int rows, int cols, float *cm)
{
    cic_outlier o;
    assert_int_equal(cic_outlier_stats(&o, x, rows, cols, cm), 0);
    return o;
}

static void test_hand(void **state)
{
    /* +-1: mean 0, m2 = m4 = 1, kurtosis 1; RMS 1, max 1; 4 channels, the
     * top ceil(4/100) = 1 holds 1/4 of the squares */
    const float a[] = {1, -1, 1, -1};
    /* 0 0 0 4: mean 1, deviations -1 -1 -1 3, m2 = 12/4 = 3, m4 = 84/4 = 21,
     * kurtosis 21/9 = 7/3; RMS sqrt(16/4) = 2, max/RMS 2; top share 1 */
    const float b[] = {0, 0, 0, 4};
    /* [[1, 2], [3, -4]]: channel max 3, 4; column squares 10, 20: top 20/30;
     * mean 1/2, deviations .5 1.5 2.5 -4.5: m2 = (0.25 + 2.25 + 6.25 + 20.25)
     * / 4 = 7.25, m4 = (0.0625 + 5.0625 + 39.0625 + 410.0625) / 4 = 113.5625 */
    const float c[] = {1, 2, 3, -4};
    float cm[2];
    cic_outlier o;
    (void)state;
    o = stats(a, 1, 4, NULL);
    cic_assert_close(o.kurtosis, 1, 0, 0);
    cic_assert_close(o.max_over_rms, 1, 0, 0);
    cic_assert_close(o.top_share, 0.25, 0, 0);
    assert_int_equal(o.top_channels, 1);
    o = stats(b, 1, 4, NULL);
    cic_assert_close(o.kurtosis, 7.0 / 3.0, 1e-15, 0);
    cic_assert_close(o.max_over_rms, 2, 0, 0);
    cic_assert_close(o.top_share, 1, 0, 0);
    o = stats(c, 2, 2, cm);
    assert_true(cm[0] == 3.0f && cm[1] == 4.0f);
    cic_assert_close(o.top_share, 20.0 / 30.0, 1e-15, 0);
    cic_assert_close(o.kurtosis, 113.5625 / (7.25 * 7.25), 1e-15, 0);
    cic_assert_close(o.max_over_rms, 4 / sqrt(30.0 / 4), 1e-15, 0);
}

/* 250 channels: ceil(2.5) = 3 top channels */
static void test_top_channels(void **state)
{
    static float x[2 * 250];
    int j;
    cic_outlier o;
    (void)state;
    for (j = 0; j < 250; j++)
        x[j] = x[250 + j] = j < 3 ? 10.0f : 1.0f;
    o = stats(x, 2, 250, NULL);
    assert_int_equal(o.top_channels, 3);
    cic_assert_close(o.top_share, 3 * 200.0 / (3 * 200.0 + 247 * 2.0), 1e-15, 0);
}

/* A Gaussian sample: kurtosis 3 within its sampling error (about
 * sqrt(24 / n) = 0.011 at n = 2e5); one channel at 100x raises it, and
 * spreading that channel's energy over all channels (what a rotation does)
 * brings it back. */
static void test_gaussian_and_spreading(void **state)
{
    enum { R = 1000, C = 200 };
    static float x[R * C], y[R * C];
    uint64_t key = cic_rng_key(7, "outlier");
    cic_outlier g, o, s;
    int i, j;
    (void)state;
    for (i = 0; i < R * C; i++)
        x[i] = cic_rng_normal_f32(key, (uint64_t)i);
    g = stats(x, R, C, NULL);
    cic_assert_close(g.kurtosis, 3, 0, 0.06);
    for (i = 0; i < R; i++)
        x[i * C] *= 100.0f;
    o = stats(x, R, C, NULL);
    assert_true(o.kurtosis > 30);
    assert_true(o.top_share > 0.9);
    /* y = x H with the Householder reflection H = I - 2 v v^T / (v^T v),
     * v = e_0 - u, u = (1, ..., 1) / sqrt(C): orthogonal, it maps channel 0
     * onto all channels evenly */
    for (i = 0; i < R; i++) {
        double u = 1 / sqrt((double)C), vv = 2 - 2 * u, vx = 0;
        for (j = 0; j < C; j++)
            vx += ((j == 0 ? 1 : 0) - u) * x[i * C + j];
        for (j = 0; j < C; j++)
            y[i * C + j] = (float)(x[i * C + j] - 2 * ((j == 0 ? 1 : 0) - u) * vx / vv);
    }
    s = stats(y, R, C, NULL);
    print_message("kurtosis %.3f (Gaussian), %.2f (channel 0 at 100x), %.3f (reflected); "
                  "top share %.3f -> %.3f\n", g.kurtosis, o.kurtosis, s.kurtosis, o.top_share,
                  s.top_share);
    assert_true(s.top_share < 0.1 && s.top_share < o.top_share);
    assert_true(s.max_over_rms < o.max_over_rms);
    assert_true(fabs(s.kurtosis - 3) < fabs(o.kurtosis - 3));
}

static void test_undefined(void **state)
{
    const float z[] = {0, 0, 0, 0}, k[] = {2, 2, 2, 2};
    float n[] = {1, 2, 3, 4};
    cic_outlier o;
    (void)state;
    o = stats(z, 2, 2, NULL);
    assert_true(isnan(o.kurtosis) && isnan(o.max_over_rms) && isnan(o.top_share));
    o = stats(k, 2, 2, NULL); /* no spread: kurtosis undefined, the rest defined */
    assert_true(isnan(o.kurtosis));
    cic_assert_close(o.max_over_rms, 1, 0, 0);
    cic_assert_close(o.top_share, 0.5, 0, 0);
    n[2] = NAN;
    o = stats(n, 2, 2, NULL);
    assert_true(isnan(o.kurtosis) && isnan(o.max_over_rms) && isnan(o.top_share));
    n[2] = INFINITY;
    o = stats(n, 2, 2, NULL);
    assert_true(isnan(o.kurtosis) && isnan(o.top_share));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hand),
        cmocka_unit_test(test_top_channels),
        cmocka_unit_test(test_gaussian_and_spreading),
        cmocka_unit_test(test_undefined),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
