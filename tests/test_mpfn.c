/* SPDX-License-Identifier: MIT */
/* test_mpfn.c: exp, tanh and erf of mp_fn.h against MPFR's own functions,
 * bit for bit (a correctly rounded result is unique): random arguments of
 * both signs over many binades at 24 to 256 bits, the output aliasing the
 * input, the special values (signed zeros, NaN, infinities, the 2^20
 * limit, results that round to +-1 or underflow far), and the rounding
 * test on enclosures built by hand: ends that round apart, to a tie, to
 * zero or to an infinity are refused; ends inside one rounding interval
 * give its value. Seeds are printed on failure; CIC_TEST_MULTIPLIER
 * scales the random counts. */
#include "testutil.h"

#include "engine/mp_fn.h"

#include <math.h>
#include <mpfr.h>
#include <stdint.h>
#include <stdio.h>

typedef void (*fast_fn)(mpfr_ptr, mpfr_srcptr, cic_mp_fn_ws *);
typedef int (*ref_fn)(mpfr_ptr, mpfr_srcptr, mpfr_rnd_t);

static const struct {
    const char *name;
    fast_fn fast;
    ref_fn ref;
} FNS[] = {
    {"exp", cic_mp_exp, mpfr_exp},
    {"tanh", cic_mp_tanh, mpfr_tanh},
    {"erf", cic_mp_erf, mpfr_erf},
};

/* Same value, sign of zero included, or both NaN. */
static int same(mpfr_srcptr a, mpfr_srcptr b)
{
    if (mpfr_nan_p(a) || mpfr_nan_p(b))
        return mpfr_nan_p(a) && mpfr_nan_p(b);
    return mpfr_equal_p(a, b) && mpfr_signbit(a) == mpfr_signbit(b);
}

/* f(x) at prec both ways, once into a fresh y and once in place. */
static void check_one(int f, mpfr_srcptr x, mpfr_prec_t prec, cic_mp_fn_ws *w, unsigned seed)
{
    mpfr_t y, r, z;
    mpfr_inits2(prec, y, r, (mpfr_ptr)0);
    mpfr_init2(z, mpfr_get_prec(x));
    FNS[f].fast(y, x, w);
    FNS[f].ref(r, x, MPFR_RNDN);
    if (!same(y, r)) {
        mpfr_printf("%s(%.40Rg) at %ld bits (seed %u): got %.45Rg, MPFR %.45Rg\n", FNS[f].name, x,
                    (long)prec, seed, y, r);
        fail();
    }
    if (mpfr_get_prec(x) == prec) { /* y aliasing x */
        mpfr_set(z, x, MPFR_RNDN);
        FNS[f].fast(z, z, w);
        if (!same(z, r)) {
            mpfr_printf("%s in place at %ld bits (seed %u) differs\n", FNS[f].name, (long)prec,
                        seed);
            fail();
        }
    }
    mpfr_clears(y, r, z, (mpfr_ptr)0);
}

static uint64_t splitmix(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* x with every one of its prec bits random, sign random, exponent in
 * [emin, emax]. */
static void random_x(mpfr_ptr x, uint64_t *s, int emin, int emax)
{
    mpfr_prec_t p = mpfr_get_prec(x), have;
    mpfr_t t;
    mpfr_init2(t, 64);
    mpfr_set_ui(x, 0, MPFR_RNDN);
    for (have = 0; have < p; have += 64) {
        mpfr_set_ui_2exp(t, (unsigned long)(splitmix(s) | 1), -64 - (long)have, MPFR_RNDN);
        mpfr_add(x, x, t, MPFR_RNDN);
    }
    mpfr_mul_2si(x, x, emin + (long)(splitmix(s) % (uint64_t)(emax - emin + 1)), MPFR_RNDN);
    if (splitmix(s) & 1)
        mpfr_neg(x, x, MPFR_RNDN);
    mpfr_clear(t);
}

static void test_random(void **state)
{
    static const mpfr_prec_t precs[] = {24, 53, 64, 113, 128, 192, 256};
    int n = 400 * cic_test_multiplier(), f, q, i;
    cic_mp_fn_ws w;
    (void)state;
    cic_mp_fn_ws_init(&w);
    for (q = 0; q < (int)(sizeof precs / sizeof precs[0]); q++)
        for (f = 0; f < 3; f++) {
            unsigned seed = (unsigned)(1000 * q + f);
            uint64_t s = seed;
            mpfr_t x;
            mpfr_init2(x, precs[q]);
            for (i = 0; i < n; i++) {
                /* mostly the softmax and activation ranges, some far out */
                if (i % 8 == 7)
                    random_x(x, &s, -200, 20);
                else
                    random_x(x, &s, -12, 6);
                check_one(f, x, precs[q], &w, seed);
            }
            mpfr_clear(x);
        }
    cic_mp_fn_ws_clear(&w);
}

/* A 24-bit argument into a wider result and the other way round: the
 * precisions of x and y need not match. */
static void test_mixed_precisions(void **state)
{
    mpfr_t x;
    cic_mp_fn_ws w;
    int f;
    (void)state;
    cic_mp_fn_ws_init(&w);
    mpfr_init2(x, 24);
    mpfr_set_d(x, -0.7109375, MPFR_RNDN);
    for (f = 0; f < 3; f++) {
        check_one(f, x, 128, &w, 1);
        check_one(f, x, 64, &w, 1);
    }
    mpfr_set_prec(x, 200);
    mpfr_const_pi(x, MPFR_RNDN);
    for (f = 0; f < 3; f++)
        check_one(f, x, 53, &w, 2);
    mpfr_clear(x);
    cic_mp_fn_ws_clear(&w);
}

static void test_special(void **state)
{
    static const double vals[] = {0.0, -0.0, 1.0, -1.0, 0x1p-1000, -0x1p-1000, 50.0, -50.0,
                                  1e-30, 0x1p19, -0x1p19, 0x1p20, -0x1p20, 1e6, -1e6, 0.5};
    cic_mp_fn_ws w;
    mpfr_t x;
    size_t i;
    int f;
    (void)state;
    cic_mp_fn_ws_init(&w);
    mpfr_init2(x, 128);
    for (i = 0; i < sizeof vals / sizeof vals[0]; i++)
        for (f = 0; f < 3; f++) {
            mpfr_set_d(x, vals[i], MPFR_RNDN);
            check_one(f, x, 128, &w, (unsigned)i);
            check_one(f, x, 64, &w, (unsigned)i);
        }
    mpfr_set_nan(x);
    for (f = 0; f < 3; f++)
        check_one(f, x, 128, &w, 100);
    mpfr_set_inf(x, 1);
    for (f = 0; f < 3; f++)
        check_one(f, x, 128, &w, 101);
    mpfr_set_inf(x, -1);
    for (f = 0; f < 3; f++)
        check_one(f, x, 128, &w, 102);
    /* exp(-2^19 + 0.5): a result far below 2^-700000, still regular */
    mpfr_set_d(x, -524287.5, MPFR_RNDN);
    check_one(0, x, 128, &w, 103);
    mpfr_clear(x);
    cic_mp_fn_ws_clear(&w);
}

/* [lo, hi] around v + d1 ulp/2 .. v + d2 ulp/2 of a 24-bit v (halves of
 * an ulp, so d = 1 is the rounding boundary above v). */
static int round_interval(mpfr_ptr y, double v, double d1, double d2, cic_mp_fn_ws *w)
{
    arf_t lo, hi;
    int rc;
    double h = ldexp(1.0, ilogb(v) - 24); /* half an ulp at 24 bits */
    arf_init(lo);
    arf_init(hi);
    arf_set_d(lo, v + d1 * h);
    arf_set_d(hi, v + d2 * h);
    rc = _cic_mp_fn_round(y, lo, hi, w);
    arf_clear(lo);
    arf_clear(hi);
    return rc;
}

static void test_round_decision(void **state)
{
    cic_mp_fn_ws w;
    mpfr_t y;
    arf_t lo, hi;
    (void)state;
    cic_mp_fn_ws_init(&w);
    mpfr_init2(y, 24);
    /* inside one rounding interval: its value */
    mpfr_set_ui(y, 7, MPFR_RNDN);
    assert_int_equal(round_interval(y, 1.5, -0.5, 0.5, &w), 1);
    assert_true(mpfr_cmp_d(y, 1.5) == 0);
    assert_int_equal(round_interval(y, 1.5, 0.25, 0.999, &w), 1);
    assert_true(mpfr_cmp_d(y, 1.5) == 0);
    /* straddling a boundary: refused, y untouched */
    mpfr_set_ui(y, 7, MPFR_RNDN);
    assert_int_equal(round_interval(y, 1.5, 0.5, 1.5, &w), 0);
    assert_true(mpfr_cmp_ui(y, 7) == 0);
    assert_int_equal(round_interval(y, 1.5, -3.0, -0.5, &w), 0);
    /* an end on the tie: it rounds to the even neighbour, so [below 1.5,
     * the tie above 1.5] is one value (1.5 is even), but [below an odd v,
     * the tie above v] is not */
    assert_int_equal(round_interval(y, 1.5, -0.25, 1.0, &w), 1);
    assert_true(mpfr_cmp_d(y, 1.5) == 0);
    assert_int_equal(round_interval(y, 1.5 + 0x1p-23, -0.25, 1.0, &w), 0);
    assert_int_equal(round_interval(y, 1.5 + 0x1p-23, -1.0, 0.5, &w), 0); /* the tie below rounds down */
    assert_int_equal(round_interval(y, 1.5 + 0x1p-23, -0.5, 0.5, &w), 1);
    assert_true(mpfr_cmp_d(y, 1.5 + 0x1p-23) == 0);
    /* both ends the same tie: the even neighbour, as RN takes it */
    assert_int_equal(round_interval(y, 1.5, 1.0, 1.0, &w), 1);
    assert_true(mpfr_cmp_d(y, 1.5) == 0);
    /* zero and infinite ends are refused */
    arf_init(lo);
    arf_init(hi);
    arf_zero(lo);
    arf_set_d(hi, 1e-300);
    assert_int_equal(_cic_mp_fn_round(y, lo, hi, &w), 0);
    arf_zero(hi);
    assert_int_equal(_cic_mp_fn_round(y, lo, hi, &w), 0);
    arf_pos_inf(hi);
    arf_set_d(lo, 1.0);
    assert_int_equal(_cic_mp_fn_round(y, lo, hi, &w), 0);
    arf_clear(lo);
    arf_clear(hi);
    mpfr_clear(y);
    cic_mp_fn_ws_clear(&w);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_random),
        cmocka_unit_test(test_mixed_precisions),
        cmocka_unit_test(test_special),
        cmocka_unit_test(test_round_decision),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    flint_cleanup();
    mpfr_free_cache();
    return rc;
}
