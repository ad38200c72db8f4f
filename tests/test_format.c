/* SPDX-License-Identifier: MIT */
/* test_format.c: the number formats (src/base/format.c). For float32 every
 * function is checked against an independent reference: the rounding
 * against mpfr_get_flt (MPFR's own correctly rounded conversion, subnormals
 * included) on random values over the whole exponent range and on hand
 * cases (ties to even, the largest finite, overflow, below the smallest
 * subnormal, signed zero, NaN); the ordered integer against the float's
 * bits; the ULP against the spacing of neighbouring floats. A planted fault
 * (the wrong precision) shows the rounding check can fail. */
#include "testutil.h"

#include "base/format.h"
#include "base/rng.h"

#include <float.h>
#include <string.h>

#define F32 cic_format_get(CIC_FORMAT_FLOAT32)

static float round_f32(const cic_format *f, double x)
{
    mpfr_t a, y;
    float r;
    mpfr_init2(a, 64);
    mpfr_init2(y, 64);
    mpfr_set_d(a, x, MPFR_RNDN);
    cic_format_round(y, a, f);
    r = mpfr_get_flt(y, MPFR_RNDN); /* exact: y is a float32 value */
    mpfr_clear(a);
    mpfr_clear(y);
    return r;
}

static void test_table(void **state)
{
    (void)state;
    assert_ptr_equal(cic_format_find("float32"), F32);
    assert_null(cic_format_find("float31"));
    assert_null(cic_format_find(NULL));
    assert_int_equal(F32->precision, 24);
    assert_int_equal(F32->emin, -126);
    assert_int_equal(F32->emax, 127);
    assert_int_equal(F32->bits, 32);
}

static void test_round_hand(void **state)
{
    const float tiny = 0x1p-149f;
    (void)state;
    /* ties to even: 1 + 2^-24 is halfway between 1 and 1 + 2^-23 */
    assert_true(round_f32(F32, 1.0 + 0x1p-24) == 1.0f);
    assert_true(round_f32(F32, 1.0 + 3 * 0x1p-24) == 1.0f + 0x1p-22f);
    assert_true(round_f32(F32, 1.0 + 0x1p-24 + 0x1p-40) == 1.0f + 0x1p-23f);
    /* the largest finite and overflow (Inf, as binary32 says) */
    assert_true(round_f32(F32, (double)FLT_MAX) == FLT_MAX);
    assert_true(isinf(round_f32(F32, (double)FLT_MAX * (1 + 0x1p-24))));
    assert_true(round_f32(F32, (double)FLT_MAX * (1 + 0x1p-25)) == FLT_MAX);
    assert_true(round_f32(F32, -1e300) == -INFINITY);
    /* subnormals: the smallest, half of it (ties to even: 0), just above */
    assert_true(round_f32(F32, 0x1p-149) == tiny);
    assert_true(cic_test_f32_bits(round_f32(F32, 0x1p-150)) == 0);
    assert_true(round_f32(F32, 0x1p-150 * (1 + 0x1p-30)) == tiny);
    assert_true(cic_test_f32_bits(round_f32(F32, -0x1p-151)) == 0x80000000u); /* -0 */
    assert_true(round_f32(F32, 3 * 0x1p-150) == 2 * tiny);        /* tie: even */
    assert_true(round_f32(F32, 0x1p-126 - 0x1p-160) == 0x1p-126f);
    /* signed zero and NaN */
    assert_true(cic_test_f32_bits(round_f32(F32, -0.0)) == 0x80000000u);
    assert_true(isnan(round_f32(F32, NAN)));
}

/* Random doubles whose exponent covers float32's range and beyond. */
static double draw(uint64_t key, uint64_t i)
{
    double u = cic_rng_uniform(key, 2 * i), v = cic_rng_uniform(key, 2 * i + 1);
    int e = (int)(v * 330.0) - 165; /* 2^-165 .. 2^165 */
    double x = ldexp(1.0 + u, e);
    return (cic_rng_u64(key, 3 * i) & 1) ? -x : x;
}

static void test_round_vs_mpfr(void **state)
{
    uint64_t key = cic_rng_key(20261201, "format.round"), i, n = 200000;
    mpfr_t a, y;
    long bad = 0;
    (void)state;
    mpfr_init2(a, 64);
    mpfr_init2(y, 24);
    for (i = 0; i < n * (uint64_t)cic_test_multiplier(); i++) {
        double x = draw(key, i);
        float want, got;
        mpfr_set_d(a, x, MPFR_RNDN);
        want = mpfr_get_flt(a, MPFR_RNDN);
        cic_format_round(y, a, F32);
        got = mpfr_get_flt(y, MPFR_RNDN);
        if (cic_test_f32_bits(want) != cic_test_f32_bits(got) && bad++ < 3)
            print_message("x = %a: format %a, mpfr_get_flt %a\n", x, (double)got, (double)want);
    }
    mpfr_clear(a);
    mpfr_clear(y);
    if (bad)
        fail_msg("%ld of %llu roundings differ from mpfr_get_flt", bad, (unsigned long long)n);

    /* planted fault: a format one bit short rounds differently somewhere */
    {
        cic_format f = *F32;
        mpfr_t z;
        long diff = 0;
        f.precision = 23;
        mpfr_init2(a, 64);
        mpfr_init2(z, 24);
        for (i = 0; i < 1000; i++) {
            mpfr_set_d(a, draw(key, i), MPFR_RNDN);
            cic_format_round(z, a, &f);
            diff += mpfr_get_flt(z, MPFR_RNDN) != mpfr_get_flt(a, MPFR_RNDN);
        }
        mpfr_clear(a);
        mpfr_clear(z);
        assert_true(diff > 100);
    }
}

static void test_ordered_and_ulp(void **state)
{
    uint64_t key = cic_rng_key(7, "format.ordered"), i;
    (void)state;
    assert_int_equal(cic_format_ordered(F32, 0.0), 0);
    assert_int_equal(cic_format_ordered(F32, -0.0), 0);
    assert_int_equal(cic_format_ordered(F32, INFINITY), INT64_C(0x7f800000));
    assert_int_equal(cic_format_ordered(F32, -INFINITY), -INT64_C(0x7f800000));
    assert_true(cic_format_distance(F32, NAN, 1.0) == UINT64_MAX);
    assert_true(cic_format_distance(F32, FLT_MAX, INFINITY) == 1);
    for (i = 0; i < 100000; i++) {
        uint32_t u = (uint32_t)cic_rng_u64(key, i) & 0x7fffffffu;
        float f;
        double ulp, next;
        memcpy(&f, &u, sizeof f);
        if (!isfinite(f))
            continue;
        /* the ordered integer is the float's magnitude bits, negated below 0 */
        if (cic_format_ordered(F32, f) != (int64_t)u || cic_format_ordered(F32, -f) != -(int64_t)u)
            fail_msg("ordered(%a) = %lld, bits 0x%08x", (double)f,
                     (long long)cic_format_ordered(F32, f), u);
        /* the ULP is the gap to the next float up, except at a power of two
         * (the gap below), and 2^-149 at 0 */
        if (f == 0)
            continue;
        next = (double)nextafterf(f, INFINITY) - (double)f;
        ulp = cic_format_ulp(F32, f);
        if (frexpf(f, &(int){0}) == 0.5f && f > FLT_MIN)
            next = (double)f - (double)nextafterf(f, 0.0f);
        if (isfinite(next) && ulp != next)
            fail_msg("ulp(%a) = %a, spacing %a", (double)f, ulp, next);
    }
    assert_true(cic_format_ulp(F32, 0.0) == 0x1p-149);
}

/* float64, from its descriptor alone: the rounding against mpfr_get_d, the
 * ordered integer against the double's bits, the ULP against the spacing. */
static void test_float64(void **state)
{
    const cic_format *f = cic_format_find("float64");
    uint64_t key = cic_rng_key(11, "format.f64"), i;
    mpfr_t a, y;
    (void)state;
    assert_non_null(f);
    assert_ptr_equal(f, cic_format_get(CIC_FORMAT_FLOAT64));
    mpfr_init2(a, 128);
    mpfr_init2(y, 53);
    for (i = 0; i < 20000; i++) {
        /* 2^-1100 .. 2^1100 with 70-bit significands: subnormals, overflow */
        double u = cic_rng_uniform(key, 3 * i), v = cic_rng_uniform(key, 3 * i + 1);
        double want, got;
        uint64_t bu;
        mpfr_set_d(a, 1.0 + u, MPFR_RNDN);
        mpfr_add_d(a, a, ldexp(cic_rng_uniform(key, 3 * i + 2), -60), MPFR_RNDN);
        mpfr_mul_2si(a, a, (long)(v * 2200.0) - 1100, MPFR_RNDN);
        want = mpfr_get_d(a, MPFR_RNDN);
        cic_format_round(y, a, f);
        got = mpfr_get_d(y, MPFR_RNDN);
        if (memcmp(&want, &got, sizeof want) != 0)
            fail_msg("float64 rounding: %a vs mpfr_get_d %a", got, want);
        if (!isfinite(got) || got == 0)
            continue;
        memcpy(&bu, &got, sizeof bu);
        assert_true(cic_format_ordered(f, got) == (int64_t)bu);
        if (frexp(got, &(int){0}) != 0.5 && isfinite(nextafter(got, INFINITY)))
            assert_true(cic_format_ulp(f, got) == nextafter(got, INFINITY) - got);
    }
    mpfr_clear(a);
    mpfr_clear(y);
    assert_true(cic_format_ulp(f, 1.0) == 0x1p-53); /* the gap below 1 */
    assert_true(cic_format_ulp(f, 0.0) == 0x1p-1074);
    assert_true(cic_format_ordered(f, INFINITY) == INT64_C(0x7ff0000000000000));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_table),
        cmocka_unit_test(test_round_hand),
        cmocka_unit_test(test_round_vs_mpfr),
        cmocka_unit_test(test_ordered_and_ulp),
        cmocka_unit_test(test_float64),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
