/* SPDX-License-Identifier: MIT */
/* test_qorth.c: cic_q_orth_check (src/xform/qfile.c), the cheap max
 * |Q^T Q - I| of a rotation file, against cic_q_orth_error (every entry of
 * Q^T Q in MPFR, the trivially correct reference):
 * - a Q orthogonal to double rounding: the double enclosure decides alone
 *   (no MPFR entry) with the budget at 0, its bound is above the reference
 *   and below the limit; with the budget, the figure is the reference's;
 * - a Q clearly not orthogonal: decided alone, the lower bound above the
 *   limit; with the budget, the reference's figure from a few entries;
 * - a Q at the limit to a few ulps: MPFR decides even with no budget,
 *   on both sides of the limit;
 * - Hadamard and permutation matrices (exact products): 0 with no MPFR;
 * - random Q of every kind (double, float32 and bf16 roundings, planted
 *   faults) at random sizes, budgets and limits around the reference: the
 *   same decision as the reference's figure, and lo <= it <= hi;
 * - NaN and Inf take the reference path.
 * CIC_TEST_MULTIPLIER adds random cases. */
#include "testutil.h"

#include "base/mpvec.h"
#include "xform/qmat.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* The reference figure: cic_q_orth_error at 64 bits on q's values. */
static double reference(const double *q, int d)
{
    size_t dd = (size_t)d * d, i;
    mpfr_t *m = cic_mpvec_create(dd, 64);
    double v;
    assert_non_null(m);
    for (i = 0; i < dd; i++)
        mpfr_set_d(m[i], q[i], MPFR_RNDN);
    v = cic_q_orth_error((const mpfr_t *)m, d, 64);
    cic_mpvec_destroy(m, dd);
    return v;
}

/* A random orthogonal Q in double (cic_q_random at 53 bits), each value
 * then kept to bits significant bits (53, 24 for float32, 8 for bf16). */
static double *random_q(int d, uint64_t seed, int bits)
{
    size_t dd = (size_t)d * d, i;
    mpfr_t *m = cic_mpvec_create(dd, 53);
    double *q = malloc(dd * sizeof *q);
    mpfr_t t;
    assert_non_null(m);
    assert_non_null(q);
    assert_int_equal(cic_q_random(m, d, seed, 53), 0);
    mpfr_init2(t, bits);
    for (i = 0; i < dd; i++) {
        mpfr_set(t, m[i], MPFR_RNDN);
        q[i] = mpfr_get_d(t, MPFR_RNDN);
    }
    mpfr_clear(t);
    cic_mpvec_destroy(m, dd);
    return q;
}

static void check(const cic_q_orth *r, double ref, double limit, const char *what, int d)
{
    if ((r->value <= limit) != (ref <= limit) || !(r->lo <= ref) || !(ref <= r->hi) ||
        (r->exact && r->value != ref))
        fail_msg("%s, d %d, limit %.17g: value %.17g (exact %d, %zu MPFR entries), enclosure "
                 "[%.17g, %.17g], reference %.17g", what, d, limit, r->value, (int)r->exact,
                 r->mpfr_entries, r->lo, r->hi, ref);
}

static void test_orthogonal_to_rounding(void **state)
{
    int d = 96;
    double *q = random_q(d, 7, 53), ref = reference(q, d);
    cic_q_orth r;
    (void)state;
    assert_int_equal(cic_q_orth_check(&r, q, d, CIC_Q_FILE_ORTH_MAX, 0), 0);
    check(&r, ref, CIC_Q_FILE_ORTH_MAX, "orthogonal, no budget", d);
    assert_int_equal(r.mpfr_entries, 0);
    assert_false(r.exact);
    assert_true(r.value == r.hi && r.hi < 1e-12 && ref < 1e-14);
    assert_int_equal(cic_q_orth_check(&r, q, d, CIC_Q_FILE_ORTH_MAX, CIC_Q_ORTH_BUDGET), 0);
    check(&r, ref, CIC_Q_FILE_ORTH_MAX, "orthogonal, the budget", d);
    assert_true(r.exact && r.value == ref && r.mpfr_entries > 0);
    free(q);
}

static void test_clearly_not(void **state)
{
    int d = 96;
    double *q = random_q(d, 8, 24), ref;
    cic_q_orth r;
    (void)state;
    q[5 * d + 17] += 1; /* one entry off: (Q^T Q)_17,17 off by about 1 */
    ref = reference(q, d);
    assert_true(ref > 0.5);
    assert_int_equal(cic_q_orth_check(&r, q, d, CIC_Q_FILE_ORTH_MAX, 0), 0);
    check(&r, ref, CIC_Q_FILE_ORTH_MAX, "not orthogonal, no budget", d);
    assert_true(r.mpfr_entries == 0 && !r.exact && r.value == r.lo && r.lo > 0.5);
    assert_int_equal(cic_q_orth_check(&r, q, d, CIC_Q_FILE_ORTH_MAX, CIC_Q_ORTH_BUDGET), 0);
    check(&r, ref, CIC_Q_FILE_ORTH_MAX, "not orthogonal, the budget", d);
    /* the largest is the diagonal entry of column 17: only it is a candidate */
    assert_true(r.exact && r.mpfr_entries >= 1 && r.mpfr_entries <= 4);
    free(q);
}

/* Q = I but Q_00 = sqrt(1 + limit): its figure is limit to an ulp or two,
 * inside the double enclosure, so MPFR decides whatever the budget. */
static void test_near_the_limit(void **state)
{
    int d = 40, k;
    double *q = calloc((size_t)d * d, sizeof *q), ref;
    cic_q_orth r;
    (void)state;
    assert_non_null(q);
    for (k = 0; k < d; k++)
        q[k * d + k] = 1;
    q[0] = sqrt(1 + CIC_Q_FILE_ORTH_MAX);
    ref = reference(q, d);
    assert_true(fabs(ref - CIC_Q_FILE_ORTH_MAX) < 1e-15);
    for (k = 0; k < 3; k++) {
        /* limits just below, at and just above the figure */
        double lim = k == 0 ? nextafter(ref, 0) : k == 1 ? ref : nextafter(ref, 1);
        assert_int_equal(cic_q_orth_check(&r, q, d, lim, 0), 0);
        check(&r, ref, lim, "at the limit", d);
        assert_true(r.exact && r.mpfr_entries >= 1 && r.lo <= lim && lim < r.hi);
    }
    free(q);
}

/* Entries that are multiples of a power of two with short sums: dsyrk is
 * exact and the identity is proven with no MPFR. */
static void test_exact_products(void **state)
{
    int d = 64, i;
    size_t dd = (size_t)d * d, k;
    mpfr_t *m = cic_mpvec_create(dd, 53);
    double *q = malloc(dd * sizeof *q);
    cic_q_orth r;
    (void)state;
    assert_non_null(m);
    assert_non_null(q);
    assert_int_equal(cic_q_hadamard(m, d, 3, 53), 0); /* +-1/8 */
    for (k = 0; k < dd; k++)
        q[k] = mpfr_get_d(m[k], MPFR_RNDN);
    cic_mpvec_destroy(m, dd);
    assert_int_equal(cic_q_orth_check(&r, q, d, CIC_Q_FILE_ORTH_MAX, 0), 0);
    assert_true(r.exact && r.value == 0 && r.mpfr_entries == 0 && reference(q, d) == 0);
    memset(q, 0, dd * sizeof *q); /* a permutation with signs */
    for (i = 0; i < d; i++)
        q[(size_t)i * d + (size_t)(i * 5 + 3) % (size_t)d] = i & 1 ? -1 : 1;
    assert_int_equal(cic_q_orth_check(&r, q, d, CIC_Q_FILE_ORTH_MAX, 0), 0);
    assert_true(r.exact && r.value == 0 && r.mpfr_entries == 0);
    q[0] = 0.5; /* not exact now (a zero column entry moved) but products still are */
    assert_int_equal(cic_q_orth_check(&r, q, d, CIC_Q_FILE_ORTH_MAX, 0), 0);
    check(&r, reference(q, d), CIC_Q_FILE_ORTH_MAX, "permutation with 0.5", d);
    free(q);
}

static void test_random(void **state)
{
    int n = 40 * cic_test_multiplier(), t;
    uint64_t s = 0x51ed;
    (void)state;
    for (t = 0; t < n; t++) {
        static const int bits[] = {53, 24, 11, 8};
        int d = 1 + cic_test_pick(&s, 70), b = bits[cic_test_pick(&s, 4)], k;
        uint64_t seed = cic_test_rand(&s);
        double *q = random_q(d, seed, b), ref, lims[5];
        size_t budget = cic_test_pick(&s, 2) ? CIC_Q_ORTH_BUDGET : 0;
        cic_q_orth r;
        char what[96];
        if (cic_test_pick(&s, 3) == 0) /* a planted fault of random size */
            q[cic_test_pick(&s, d * d)] += ldexp(1.0, -cic_test_pick(&s, 40));
        ref = reference(q, d);
        lims[0] = CIC_Q_FILE_ORTH_MAX;
        lims[1] = ref;
        lims[2] = nextafter(ref, 0);
        lims[3] = ref * 1.001;
        lims[4] = ref * 0.999;
        for (k = 0; k < 5; k++) {
            snprintf(what, sizeof what, "random %d (seed %llu, %d bits, budget %zu)", t,
                     (unsigned long long)seed, b, budget);
            assert_int_equal(cic_q_orth_check(&r, q, d, lims[k], budget), 0);
            check(&r, ref, lims[k], what, d);
        }
        free(q);
    }
}

static void test_nonfinite(void **state)
{
    double q[4] = {1, 0, 0, 1};
    cic_q_orth r;
    (void)state;
    q[1] = NAN;
    assert_int_equal(cic_q_orth_check(&r, q, 2, CIC_Q_FILE_ORTH_MAX, 0), 0);
    assert_true(isnan(r.value) && isnan(reference(q, 2)));
    q[1] = INFINITY;
    assert_int_equal(cic_q_orth_check(&r, q, 2, CIC_Q_FILE_ORTH_MAX, 0), 0);
    assert_false(r.value <= CIC_Q_FILE_ORTH_MAX);
    q[1] = 1e300; /* finite, but Q^T Q overflows */
    assert_int_equal(cic_q_orth_check(&r, q, 2, CIC_Q_FILE_ORTH_MAX, 0), 0);
    assert_true(r.exact && r.value == reference(q, 2));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_orthogonal_to_rounding),
        cmocka_unit_test(test_clearly_not),
        cmocka_unit_test(test_near_the_limit),
        cmocka_unit_test(test_exact_products),
        cmocka_unit_test(test_random),
        cmocka_unit_test(test_nonfinite),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
