/* SPDX-License-Identifier: MIT */
/* test_mpattn.c: the dot products of attention's scores (q . k, both at
 * the run's precision) and P V at the precisions a proof escalates to,
 * through the fixed-point kernel (cic_mp_dot, cic_mp_dot_rows_packed on
 * packs filled entry by entry as engine_mpfr_attn.c fills them), bit for
 * bit against the MPFR path the engine took above 256 bits before
 * (cic_mp_dot_mpfr: exact mpfr_mul products added by mpfr_sum, rounded
 * once). Random vectors at 128, 256, 448 and 1024 bits, with awkward entries: zeros of either sign, huge
 * and tiny exponents, all negative, exact cancellation, a bias. */
#include "testutil.h"

#include "base/mpvec.h"

#include <string.h>

#define NMAX 300

/* The kinds of vector the test draws: scores-like (one binade range),
 * probabilities (a row of exp over tens of binades, all positive), wide
 * spreads, huge and tiny exponents, zeros sprinkled in, all negative. */
enum { K_PLAIN, K_PROB, K_WIDE, K_HUGE, K_TINY, K_ZEROS, K_NEG, K_COUNT };

static void fill(mpfr_t *v, size_t n, int kind, uint64_t *s)
{
    size_t i;
    for (i = 0; i < n; i++) {
        switch (kind) {
        case K_PLAIN: cic_test_mp_rand_full(v[i], s, 0, 4); break;
        case K_PROB: cic_test_mp_rand_full(v[i], s, -20, 19); mpfr_abs(v[i], v[i], MPFR_RNDN); break;
        case K_WIDE: cic_test_mp_rand_full(v[i], s, 0, 600); break;
        case K_HUGE: cic_test_mp_rand_full(v[i], s, 1000000, 3); break;
        case K_TINY: cic_test_mp_rand_full(v[i], s, -1000000, 3); break;
        case K_ZEROS:
            cic_test_mp_rand_full(v[i], s, 0, 2);
            if (cic_test_pick(s, 3) == 0)
                mpfr_set_zero(v[i], cic_test_pick(s, 2) ? 1 : -1);
            break;
        default:
            cic_test_mp_rand_full(v[i], s, 0, 8);
            if (!mpfr_signbit(v[i]))
                mpfr_neg(v[i], v[i], MPFR_RNDN);
            break;
        }
    }
}

static void expect_same(mpfr_srcptr got, mpfr_srcptr want)
{
    if (!(mpfr_equal_p(got, want) && mpfr_signbit(got) == mpfr_signbit(want)) &&
        !(mpfr_nan_p(got) && mpfr_nan_p(want))) {
        mpfr_fprintf(stderr, "got %.40Re want %.40Re\n", got, want);
        fail();
    }
}

/* One dot product x . y (+ bias) at precision p, every way the engine
 * forms it, against cic_mp_dot_mpfr. */
static void check_one(const mpfr_t *x, const mpfr_t *y, size_t n, mpfr_srcptr bias, mpfr_prec_t p,
                      cic_dot_scratch *S, bool *fixed)
{
    mpfr_t want, got, g4[CIC_DOT_ROWS];
    cic_mp_pack px, py;
    const cic_mp_pack *xr[CIC_DOT_ROWS];
    mpfr_ptr r[CIC_DOT_ROWS];
    unsigned done;
    size_t i;
    int t;
    mpfr_inits2(p, want, got, (mpfr_ptr)0);
    cic_mp_dot_mpfr(want, x, 1, y, 1, n, bias, S);
    cic_mp_dot(got, x, 1, y, 1, n, bias, S);
    expect_same(got, want);
    *fixed = cic_mp_dot_fixed(got, x, 1, y, 1, n, bias) == 0;
    if (*fixed)
        expect_same(got, want);
    /* the attention's packs: q (or p) packed, keys (or values) as rows */
    assert_int_equal(cic_mp_pack_alloc(&px, n, p), 0);
    assert_int_equal(cic_mp_pack_alloc(&py, n, p), 0);
    for (i = 0; i < n; i++) {
        cic_mp_pack_set(&px, i, x[i]);
        cic_mp_pack_set(&py, i, y[i]);
    }
    cic_mp_pack_finish(&px);
    cic_mp_pack_finish(&py);
    for (t = 0; t < CIC_DOT_ROWS; t++) {
        mpfr_init2(g4[t], p);
        r[t] = g4[t];
        xr[t] = &px;
    }
    done = cic_mp_dot_rows_packed(r, xr, CIC_DOT_ROWS, &py, bias);
    for (t = 0; t < CIC_DOT_ROWS; t++) {
        if (done >> t & 1u)
            expect_same(g4[t], want);
        mpfr_clear(g4[t]);
    }
    if (*fixed)
        assert_int_equal(done, (1u << CIC_DOT_ROWS) - 1);
    cic_mp_pack_clear(&px);
    cic_mp_pack_clear(&py);
    mpfr_clears(want, got, (mpfr_ptr)0);
}

/* Random dot products of every kind at precision p; returns how many the
 * fixed-point kernel took. */
static int run_prec(mpfr_prec_t p, int trials, uint64_t *s)
{
    mpfr_t *x = cic_mpvec_create(NMAX, p), *y = cic_mpvec_create(NMAX, p), bias;
    cic_dot_scratch S;
    int tr, taken = 0;
    assert_non_null(x);
    assert_non_null(y);
    assert_int_equal(cic_dot_scratch_init(&S, NMAX, p), 0);
    mpfr_init2(bias, 2 * p);
    for (tr = 0; tr < trials; tr++) {
        size_t n = 1 + (size_t)cic_test_pick(s, NMAX);
        int kx = tr % K_COUNT, ky = cic_test_pick(s, K_COUNT), b = cic_test_pick(s, 4);
        bool fixed;
        if ((kx == K_HUGE && ky == K_TINY) || (kx == K_TINY && ky == K_HUGE))
            ky = K_PLAIN; /* 2^+-10^6 apart: beyond the accumulator, covered below */
        fill(x, n, kx, s);
        fill(y, n, ky, s);
        if (b == 1)
            cic_test_mp_rand_full(bias, s, 2, 3);
        else if (b == 2)
            mpfr_set_zero(bias, -1);
        check_one((const mpfr_t *)x, (const mpfr_t *)y, n, b ? bias : NULL, p, &S, &fixed);
        taken += fixed;
    }
    mpfr_clear(bias);
    cic_dot_scratch_clear(&S);
    cic_mpvec_destroy(x, NMAX);
    cic_mpvec_destroy(y, NMAX);
    return taken;
}

/* Exact cancellation (x . y = 0 exactly, and = -bias exactly), all-zero
 * vectors of either sign, and terms 2 million binades apart (the MPFR
 * path), at precision p. */
static void edge_cases(mpfr_prec_t p, uint64_t *s)
{
    mpfr_t *x = cic_mpvec_create(8, p), *y = cic_mpvec_create(8, p), bias;
    cic_dot_scratch S;
    bool fixed;
    int i;
    assert_int_equal(cic_dot_scratch_init(&S, 8, p), 0);
    mpfr_init2(bias, 2 * p);
    fill(x, 4, K_PLAIN, s);
    fill(y, 4, K_PLAIN, s);
    for (i = 0; i < 4; i++) { /* x4.. = -x, y4.. = y: the sum is exactly 0 */
        mpfr_neg(x[i + 4], x[i], MPFR_RNDN);
        mpfr_set(y[i + 4], y[i], MPFR_RNDN);
    }
    check_one((const mpfr_t *)x, (const mpfr_t *)y, 8, NULL, p, &S, &fixed);
    assert_true(fixed); /* a nonzero product: +0 from the integers */
    mpfr_mul(bias, x[0], y[0], MPFR_RNDN); /* exact at 2p */
    check_one((const mpfr_t *)x, (const mpfr_t *)y, 4, bias, p, &S, &fixed);
    mpfr_neg(bias, bias, MPFR_RNDN);
    check_one((const mpfr_t *)x, (const mpfr_t *)y, 1, bias, p, &S, &fixed);
    for (i = 0; i < 8; i++)
        mpfr_set_zero(x[i], i % 2 ? 1 : -1);
    check_one((const mpfr_t *)x, (const mpfr_t *)y, 8, NULL, p, &S, &fixed);
    assert_false(fixed); /* every term zero: MPFR's signed-zero rules */
    fill(x, 8, K_PLAIN, s);
    fill(y, 4, K_HUGE, s);
    fill(y + 4, 4, K_TINY, s);
    check_one((const mpfr_t *)x, (const mpfr_t *)y, 8, NULL, p, &S, &fixed);
    assert_false(fixed); /* beyond the accumulator: the MPFR path */
    mpfr_clear(bias);
    cic_dot_scratch_clear(&S);
    cic_mpvec_destroy(x, 8);
    cic_mpvec_destroy(y, 8);
}

static void test_precisions(void **state)
{
    static const mpfr_prec_t precs[] = {128, 256, 448, 1024};
    uint64_t s = 0x5eed0a77e1ULL;
    size_t i;
    (void)state;
    for (i = 0; i < sizeof precs / sizeof precs[0]; i++) {
        int trials = precs[i] >= 1024 ? 210 : 350;
        int taken = run_prec(precs[i], trials, &s);
        /* the kernel takes most (not the all-zero and exponent-extreme
         * mixes): the comparisons above exercised it at this width */
        assert_true(taken > trials / 2);
        edge_cases(precs[i], &s);
    }
}

/* Just past the kernel's width (2048-bit by 64-bit factors: 33 limbs
 * together) the MPFR path is taken, with the same bits. */
static void test_past_the_kernel(void **state)
{
    uint64_t s = 77;
    mpfr_t *x = cic_mpvec_create(16, 2048), *y = cic_mpvec_create(16, 64), r, want;
    cic_dot_scratch S;
    (void)state;
    assert_int_equal(cic_dot_scratch_init(&S, 16, 2048), 0);
    mpfr_inits2(2048, r, want, (mpfr_ptr)0);
    fill(x, 16, K_PLAIN, &s);
    fill(y, 16, K_PLAIN, &s);
    assert_int_equal(cic_mp_dot_fixed(r, (const mpfr_t *)x, 1, (const mpfr_t *)y, 1, 16, NULL), -1);
    cic_mp_dot(r, (const mpfr_t *)x, 1, (const mpfr_t *)y, 1, 16, NULL, &S);
    cic_mp_dot_mpfr(want, (const mpfr_t *)x, 1, (const mpfr_t *)y, 1, 16, NULL, &S);
    expect_same(r, want);
    mpfr_clears(r, want, (mpfr_ptr)0);
    cic_dot_scratch_clear(&S);
    cic_mpvec_destroy(x, 16);
    cic_mpvec_destroy(y, 16);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_precisions),
        cmocka_unit_test(test_past_the_kernel),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
