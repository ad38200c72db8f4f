/* SPDX-License-Identifier: MIT */
/* test_verify.c: the recovery of a rewrite's Q from its embeddings
 * (src/pipeline/verify_q.c; the command itself is tested end to end in
 * test_checkpoint.sh).
 *
 * The orthogonality bound: never below the exact ||Q^T Q - I||_F (computed
 * here in plain MPFR loops at 320 bits, a reference that rounds far below
 * what is measured) and within 2^-40 of it above, for matrices whose answer
 * is known exactly ((1 + 2^-30) I, signed permutations) and for Haar
 * matrices with a planted perturbation of random size and sign, over random
 * sizes and seeds (CIC_TEST_MULTIPLIER adds seeds); NaN and Inf give +Inf.
 * The least squares: Q found from E and E Q (rows >= d) to 1e-10, the fit
 * residual near zero, and a planted non-rotation (E_B = 1.03 E_A Q) found
 * with a fit and a bound that refuse it; fewer rows than d and rank
 * deficient embeddings (a repeated column, rows without their mean) are
 * refused with the reason. */
#include "testutil.h"

#include "base/mpvec.h"
#include "pipeline/verify.h"
#include "xform/qmat.h"

/* ||Q^T Q - I||_F of the d x d doubles q in MPFR at 320 bits: products of
 * doubles are exact, each sum of d of them rounds once per term at 320
 * bits. The trivially correct reference. */
static double frob_ref(const double *q, int d)
{
    mpfr_t s, t, f;
    int i, j, k;
    double r;
    mpfr_inits2(320, s, t, f, (mpfr_ptr)0);
    mpfr_set_zero(f, 1);
    for (i = 0; i < d; i++)
        for (j = 0; j < d; j++) {
            mpfr_set_si(s, i == j ? -1 : 0, MPFR_RNDN);
            for (k = 0; k < d; k++) {
                mpfr_set_d(t, q[(size_t)k * d + i], MPFR_RNDN);
                mpfr_mul_d(t, t, q[(size_t)k * d + j], MPFR_RNDN);
                mpfr_add(s, s, t, MPFR_RNDN);
            }
            mpfr_sqr(s, s, MPFR_RNDN);
            mpfr_add(f, f, s, MPFR_RNDN);
        }
    mpfr_sqrt(f, f, MPFR_RNDN);
    r = mpfr_get_d(f, MPFR_RNDN);
    mpfr_clears(s, t, f, (mpfr_ptr)0);
    return r;
}

/* A Haar-random orthogonal d x d matrix as doubles. */
static double *haar(int d, uint64_t seed)
{
    size_t n = (size_t)d * d, i;
    mpfr_t *m = cic_mpvec_create(n, 53);
    double *q = malloc(n * sizeof *q);
    assert_non_null(m);
    assert_non_null(q);
    assert_int_equal(cic_q_random(m, d, seed, 53), 0);
    for (i = 0; i < n; i++)
        q[i] = mpfr_get_d(m[i], MPFR_RNDN);
    cic_mpvec_destroy(m, n);
    return q;
}

/* Uniform in [-1, 1). */
static double sym(uint64_t *s)
{
    return ldexp((double)(cic_test_rand(s) >> 11), -52) - 1.0;
}

/* bound >= ref and bound <= ref (1 + 2^-40) + tiny, with every input
 * printed otherwise. */
static void check_bound(const double *q, int d, const char *what, uint64_t seed)
{
    double b = cic_verify_q_orth_bound(q, d, 0), r = frob_ref(q, d);
    if (!(b >= r) || !(b <= r * (1 + ldexp(1.0, -40)) + ldexp(1.0, -100)))
        fail_msg("%s, d = %d, seed %llu: bound %.17g, exact ||Q^T Q - I||_F %.17g", what, d,
                 (unsigned long long)seed, b, r);
}

static void test_orth_bound_known(void **state)
{
    int sizes[] = { 1, 2, 7, 16 }, t, i, d;
    (void)state;
    for (t = 0; t < 4; t++) {
        double *q, h = ldexp(1.0, -30);
        d = sizes[t];
        q = calloc((size_t)d * d, sizeof *q);
        assert_non_null(q);
        for (i = 0; i < d; i++) /* (1 + h) I: ||.||_F = sqrt(d) (2h + h^2) exactly */
            q[(size_t)i * d + i] = 1 + h;
        check_bound(q, d, "(1 + 2^-30) I", 0);
        cic_assert_close(cic_verify_q_orth_bound(q, d, 0), sqrt((double)d) * (2 * h + h * h), 1e-12,
                         0);
        for (i = 0; i < d; i++) { /* a signed permutation: orthogonal exactly */
            q[(size_t)i * d + i] = 0;
            q[(size_t)i * d + (i + 1) % d] = i % 2 ? -1.0 : 1.0;
        }
        assert_true(cic_verify_q_orth_bound(q, d, 0) <= ldexp(1.0, -120));
        free(q);
    }
}

static void test_orth_bound_random(void **state)
{
    int it, n = 12 * cic_test_multiplier();
    uint64_t s = 0x5eed;
    (void)state;
    for (it = 0; it < n; it++) {
        int d = 1 + cic_test_pick(&s, 40);
        uint64_t seed = cic_test_rand(&s);
        double *q = haar(d, seed), eps = ldexp(1.0, -10 - cic_test_pick(&s, 40));
        size_t i;
        check_bound(q, d, "Haar", seed);
        for (i = 0; i < (size_t)d * d; i++) /* a planted perturbation */
            q[i] += eps * sym(&s);
        check_bound(q, d, "Haar + perturbation", seed);
        assert_true(cic_verify_q_orth_bound(q, d, 0) > eps / 64 / d); /* it is seen */
        free(q);
    }
}

static void test_orth_bound_nonfinite(void **state)
{
    double q[4] = { 1, 0, 0, 1 };
    (void)state;
    q[2] = NAN;
    assert_true(isinf(cic_verify_q_orth_bound(q, 2, 0)));
    q[2] = INFINITY;
    assert_true(isinf(cic_verify_q_orth_bound(q, 2, 0)));
}

/* E (rows x d, uniform) and E Q rounded to double. */
static void embeddings(double *ea, double *eb, const double *q, int rows, int d, uint64_t *s,
                       double scale)
{
    int r, j, k;
    for (r = 0; r < rows * d; r++)
        ea[r] = sym(s);
    for (r = 0; r < rows; r++)
        for (j = 0; j < d; j++) {
            double v = 0;
            for (k = 0; k < d; k++)
                v += ea[(size_t)r * d + k] * q[(size_t)k * d + j];
            eb[(size_t)r * d + j] = scale * v;
        }
}

static void test_lsq_recovers(void **state)
{
    int it, n = 6 * cic_test_multiplier();
    uint64_t s = 0x1eaf;
    char why[300];
    (void)state;
    for (it = 0; it < n; it++) {
        int d = 2 + cic_test_pick(&s, 30), rows = d + cic_test_pick(&s, 3 * d);
        uint64_t seed = cic_test_rand(&s);
        double *q = haar(d, seed), *qh = calloc((size_t)d * d, sizeof *qh), fit = -1;
        double *ea = malloc((size_t)rows * d * sizeof *ea), *eb = malloc((size_t)rows * d * sizeof *eb);
        size_t i;
        assert_non_null(qh);
        assert_non_null(ea);
        assert_non_null(eb);
        embeddings(ea, eb, q, rows, d, &s, 1.0);
        why[0] = '\0';
        if (cic_verify_q_lsq(qh, &fit, ea, eb, rows, d, why, sizeof why) != 0)
            fail_msg("d = %d, rows %d, seed %llu: not recovered: %s", d, rows,
                     (unsigned long long)seed, why);
        for (i = 0; i < (size_t)d * d; i++)
            if (!(fabs(qh[i] - q[i]) <= 1e-10))
                fail_msg("d = %d, rows %d, seed %llu: Q[%zu] = %.17g, recovered %.17g", d, rows,
                         (unsigned long long)seed, i, q[i], qh[i]);
        assert_true(fit <= 1e-13);
        assert_true(cic_verify_q_orth_bound(qh, d, 0) <= 1e-9);
        /* planted: E_B = 1.03 E_A Q fits exactly, and 1.03 Q is no rotation */
        embeddings(ea, eb, q, rows, d, &s, 1.03);
        assert_int_equal(cic_verify_q_lsq(qh, &fit, ea, eb, rows, d, why, sizeof why), 0);
        assert_true(cic_verify_q_orth_bound(qh, d, 0) >= 0.06);
        free(q);
        free(qh);
        free(ea);
        free(eb);
    }
}

static void test_lsq_refuses(void **state)
{
    enum { D = 6, ROWS = 20 };
    double q[D * D], ea[ROWS * D], eb[ROWS * D], fit;
    char why[300];
    uint64_t s = 7;
    int r, j;
    double *h = haar(D, 3);
    (void)state;
    memcpy(q, h, sizeof q);
    free(h);
    embeddings(ea, eb, q, ROWS, D, &s, 1.0);
    assert_int_equal(cic_verify_q_lsq(q, &fit, ea, eb, D - 1, D, why, sizeof why), 1);
    assert_non_null(strstr(why, "5 embedding rows, fewer than d = 6"));
    for (r = 0; r < ROWS; r++) /* column 3 repeats column 1 */
        ea[r * D + 3] = ea[r * D + 1];
    assert_int_equal(cic_verify_q_lsq(q, &fit, ea, eb, ROWS, D, why, sizeof why), 1);
    assert_non_null(strstr(why, "rank deficient"));
    embeddings(ea, eb, q, ROWS, D, &s, 1.0);
    for (r = 0; r < ROWS; r++) { /* rows without their mean: rank d - 1 */
        double m = 0;
        for (j = 0; j < D; j++)
            m += ea[r * D + j];
        for (j = 0; j < D; j++)
            ea[r * D + j] -= m / D;
    }
    assert_int_equal(cic_verify_q_lsq(q, &fit, ea, eb, ROWS, D, why, sizeof why), 1);
    assert_non_null(strstr(why, "rank deficient"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_orth_bound_known),
        cmocka_unit_test(test_orth_bound_random),
        cmocka_unit_test(test_orth_bound_nonfinite),
        cmocka_unit_test(test_lsq_recovers),
        cmocka_unit_test(test_lsq_refuses),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
