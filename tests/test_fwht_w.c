/* SPDX-License-Identifier: MIT */
/* test_fwht_w.c: weights times a randomized Hadamard Q through the fast
 * transform (src/xform/fwht_w.h) against the dense product of the same Q
 * (qmat.c's entries, cic_mp_matmul's correctly rounded dot products), bit
 * for bit: W Q, Q^T W and strided per-head blocks; orders 2^k, 12 2^k,
 * 20 2^k, 28, 36 2^k, the Williamson 156 and 172 and forced bases;
 * output precisions 24, 53, 64, 128, 200 over inputs of other
 * precisions; signed and exact zeros, all-zero lines, sums that cancel,
 * exponents spread over hundreds of bits (wide integers) and over more
 * than the integers take (the dense fallback, counted), NaN and Inf; one
 * and two threads; a planted wrong sign caught. CIC_TEST_MULTIPLIER adds
 * seeds. */
#include "testutil.h"

#include "base/mpgemm.h"
#include "base/mpvec.h"
#include "xform/fwht_w.h"
#include "xform/qmat.h"

#include <stdlib.h>
#include <string.h>

/* Equal bits: the same value and sign, or both NaN. */
static bool same(mpfr_srcptr a, mpfr_srcptr b)
{
    if (mpfr_nan_p(a) || mpfr_nan_p(b))
        return mpfr_nan_p(a) && mpfr_nan_p(b);
    return mpfr_equal_p(a, b) && mpfr_signbit(a) == mpfr_signbit(b);
}

/* How an input entry is drawn. */
enum { PLAIN, ZEROS, SPREAD, WIDE, SPECIAL, CANCEL, KINDS };

/* Entry of kind k at precision wp: a random significand, then the
 * kind's zeros, exponent spreads, NaN / Inf or repeats. */
static void draw(mpfr_ptr x, int kind, uint64_t *rs, mpfr_srcptr prev)
{
    mpfr_prec_t wp = mpfr_get_prec(x);
    int pick = cic_test_pick(rs, 16);
    mpz_t z;
    mpz_init(z);
    mpz_set_ui(z, (unsigned long)(cic_test_rand(rs) | 1));
    while ((mpfr_prec_t)mpz_sizeinbase(z, 2) < wp) {
        mpz_mul_2exp(z, z, 64);
        mpz_add_ui(z, z, (unsigned long)cic_test_rand(rs));
    }
    mpfr_set_z(x, z, MPFR_RNDN);
    mpz_clear(z);
    /* a value near 1 with its precision's bits, or fewer (trailing zeros) */
    mpfr_set_exp(x, cic_test_pick(rs, 4) - 1);
    if (cic_test_pick(rs, 3) == 0) { /* (x's storage is fixed: round through t) */
        mpfr_t t;
        mpfr_init2(t, 1 + cic_test_pick(rs, 12));
        mpfr_set(t, x, MPFR_RNDN);
        mpfr_set(x, t, MPFR_RNDN);
        mpfr_clear(t);
    }
    if (cic_test_pick(rs, 2))
        mpfr_neg(x, x, MPFR_RNDN);
    if (kind == ZEROS && pick < 6)
        mpfr_set_zero(x, pick & 1 ? -1 : 1);
    if (kind == SPREAD)
        mpfr_mul_2si(x, x, cic_test_pick(rs, 600) - 300, MPFR_RNDN);
    if (kind == WIDE && pick == 0)
        mpfr_mul_2si(x, x, 5000 + cic_test_pick(rs, 100), MPFR_RNDN);
    if (kind == SPECIAL && pick == 0)
        mpfr_set_nan(x);
    if (kind == SPECIAL && pick == 1)
        mpfr_set_inf(x, cic_test_pick(rs, 2) ? 1 : -1);
    if (kind == CANCEL && prev && pick < 12) /* repeats: many sums cancel to 0 */
        mpfr_set(x, prev, MPFR_RNDN);
    if (kind == CANCEL && prev && pick == 12)
        mpfr_neg(x, prev, MPFR_RNDN);
}

/* A Hadamard of order d with base Kreq (0: automatic) and seed. */
static void hq_make(cic_xf_hq *h, int d, int Kreq, uint64_t seed)
{
    h->d = d;
    h->K = cic_hadamard_base_order_k(d, Kreq);
    assert_true(h->K > 0);
    assert_int_equal(cic_hadamard_base_k(&h->hk, Kreq, d), 0);
    h->sign = calloc((size_t)d, 1);
    assert_non_null(h->sign);
    cic_q_hadamard_signs(h->sign, d, seed);
}

static void hq_free(cic_xf_hq *h)
{
    free(h->hk);
    free(h->sign);
}

/* W [rows, cols] (lines of one kind each, at input precision wp) times Q
 * of order d, right (W Q, cols = d) or left (Q^T W, rows = d): the fast
 * transform against cic_mp_matmul, bit for bit. bad >= 0 flips sign bad
 * of the fast path's Q (a planted fault): returns how many entries differ
 * then. */
static long check(int d, int Kreq, int other, bool left, mpfr_prec_t p, mpfr_prec_t wp,
                  uint64_t seed, int threads, int bad)
{
    int rows = left ? d : other, cols = left ? other : d, lines = other, l, i;
    size_t n = (size_t)rows * cols, dd = (size_t)d * d, k;
    mpfr_t *w = cic_mpvec_create(n, wp), *q = cic_mpvec_create(dd, p);
    mpfr_t *want = cic_mpvec_create(n, p), *got = cic_mpvec_create(n, p);
    cic_dot_scratch s;
    cic_xf_hq h;
    uint64_t rs = seed * 0x9e3779b97f4a7c15ULL + (uint64_t)d;
    long diff = 0;
    assert_true(w && q && want && got);
    assert_int_equal(cic_dot_scratch_init(&s, (size_t)d, wp > p ? wp : p), 0);
    hq_make(&h, d, Kreq, seed);
    assert_int_equal(cic_q_hadamard_k(q, d, Kreq, seed, p), 0);
    for (l = 0; l < lines; l++) {
        int kind = l % KINDS;
        for (i = 0; i < d; i++) {
            size_t at = left ? (size_t)i * cols + l : (size_t)l * cols + i;
            size_t pv = left ? at - (size_t)cols : at - 1;
            draw(w[at], kind, &rs, i > 0 ? w[pv] : NULL);
            if (l % (2 * KINDS) == KINDS + ZEROS) /* every other zeros line: all zero */
                mpfr_set_zero(w[at], cic_test_pick(&rs, 2) ? -1 : 1);
        }
    }
    if (left)
        cic_mp_matmul(want, (const mpfr_t *)q, true, (const mpfr_t *)w, false, d, cols, d, false,
                      1, &s);
    else
        cic_mp_matmul(want, (const mpfr_t *)w, false, (const mpfr_t *)q, false, rows, d, d, false,
                      1, &s);
    if (bad >= 0)
        h.sign[bad] = (signed char)-h.sign[bad];
    assert_int_equal(_cic_xf_fwht_lines(got, (const mpfr_t *)w, (size_t)lines,
                                        left ? 1 : (size_t)cols, left ? (size_t)cols : 1, &h, p,
                                        threads),
                     0);
    for (k = 0; k < n; k++)
        if (!same(got[k], want[k])) {
            if (bad < 0)
                mpfr_fprintf(stderr, "d %d K %d %s p %ld wp %ld seed %llu threads %d entry %zu: "
                             "got %Ra expected %Ra\n", d, h.K, left ? "Q^T W" : "W Q", (long)p,
                             (long)wp, (unsigned long long)seed, threads, k, got[k], want[k]);
            diff++;
        }
    hq_free(&h);
    cic_dot_scratch_clear(&s);
    cic_mpvec_destroy(w, n);
    cic_mpvec_destroy(q, dd);
    cic_mpvec_destroy(want, n);
    cic_mpvec_destroy(got, n);
    return diff;
}

static const mpfr_prec_t precs[] = {24, 53, 64, 128, 200};

/* Every order and precision, both sides, with every kind of line. */
static void test_shapes(void **state)
{
    static const int orders[][2] = {{1, 0},  {2, 0},   {8, 0},   {64, 0},  {12, 0},  {24, 0},
                                    {20, 0}, {80, 0},  {28, 0},  {72, 0},  {156, 0}, {172, 0},
                                    {256, 4}, {256, 32}, {128, 0}, {96, 12}};
    int mult = cic_test_multiplier(), o, pi, side, t;
    (void)state;
    for (t = 0; t < mult; t++)
        for (o = 0; o < (int)(sizeof orders / sizeof *orders); o++)
            for (pi = 0; pi < 5; pi++)
                for (side = 0; side < 2; side++) {
                    mpfr_prec_t p = precs[pi], wp = precs[(pi + o + side) % 5];
                    int other = 2 * KINDS + 1 + (o % 3);
                    assert_int_equal(check(orders[o][0], orders[o][1], other, side, p, wp,
                                           (uint64_t)(t * 100 + o + 1), 1, -1),
                                     0);
                }
}

/* Lines spanning more exponent than the integers take go dense, with the
 * same bits; the others do not. */
static void test_fallback_counted(void **state)
{
    unsigned long before = _cic_xf_fwht_dense_lines();
    (void)state;
    /* lines 0 .. KINDS - 1 once: SPECIAL and WIDE lines, 2 of the 6 */
    assert_int_equal(check(64, 0, KINDS, false, 53, 53, 7, 1, -1), 0);
    assert_int_equal(_cic_xf_fwht_dense_lines() - before, 2);
    before = _cic_xf_fwht_dense_lines();
    assert_int_equal(check(64, 0, 1, false, 53, 53, 7, 1, -1), 0); /* PLAIN only */
    assert_int_equal(_cic_xf_fwht_dense_lines() - before, 0);
}

/* Lines split over two threads give the bits of one. */
static void test_threads(void **state)
{
    (void)state;
    assert_int_equal(check(1024, 0, 64, false, 64, 53, 3, 2, -1), 0);
    assert_int_equal(check(768, 0, 48, true, 128, 24, 4, 2, -1), 0);
}

/* Per-head blocks: the lines of a dh-row block (columns, stride cols)
 * and of a dh-column block (rows, stride 1) inside a wider matrix, as
 * rotate-heads reads them, against cic_mp_dot with Q's columns. */
static void test_heads_strided(void **state)
{
    int dh = 24, heads = 3, cols = 40, rows = dh * heads, g, i, k;
    size_t n = (size_t)rows * cols, e;
    mpfr_t *w = cic_mpvec_create(n, 53), *q = cic_mpvec_create((size_t)dh * dh, 64);
    mpfr_t *want = cic_mpvec_create(n, 64), *got = cic_mpvec_create(n, 64);
    cic_dot_scratch s;
    uint64_t rs = 11;
    (void)state;
    assert_true(w && q && want && got);
    assert_int_equal(cic_dot_scratch_init(&s, (size_t)dh, 64), 0);
    for (e = 0; e < n; e++)
        draw(w[e], (int)(e % 4), &rs, e ? w[e - 1] : NULL);
    for (g = 0; g < heads; g++) {
        cic_xf_hq h;
        hq_make(&h, dh, 0, 100 + (uint64_t)g);
        assert_int_equal(cic_q_hadamard_k(q, dh, 0, 100 + (uint64_t)g, 64), 0);
        /* rows g dh .. : dst[r0 + i][k] = sum_j Q[j][i] src[r0 + j][k] */
        for (i = 0; i < dh; i++)
            for (k = 0; k < cols; k++)
                cic_mp_dot(want[(size_t)(g * dh + i) * cols + k], (const mpfr_t *)w +
                           (size_t)g * dh * cols + k, (size_t)cols, (const mpfr_t *)q + i,
                           (size_t)dh, (size_t)dh, NULL, &s);
        assert_int_equal(_cic_xf_fwht_lines(got + (size_t)g * dh * cols,
                                            (const mpfr_t *)w + (size_t)g * dh * cols,
                                            (size_t)cols, 1, (size_t)cols, &h, 64, 1),
                         0);
        hq_free(&h);
    }
    for (e = 0; e < n; e++)
        assert_true(same(got[e], want[e]));
    /* columns: the first dh columns of the first 24 rows, stride 1 */
    {
        cic_xf_hq h;
        hq_make(&h, dh, 0, 9);
        assert_int_equal(cic_q_hadamard_k(q, dh, 0, 9, 64), 0);
        for (k = 0; k < 24; k++)
            for (i = 0; i < dh; i++)
                cic_mp_dot(want[(size_t)k * cols + i], (const mpfr_t *)w + (size_t)k * cols, 1,
                           (const mpfr_t *)q + i, (size_t)dh, (size_t)dh, NULL, &s);
        assert_int_equal(_cic_xf_fwht_lines(got, (const mpfr_t *)w, 24, (size_t)cols, 1, &h, 64,
                                            1),
                         0);
        for (k = 0; k < 24; k++)
            for (i = 0; i < dh; i++)
                assert_true(same(got[(size_t)k * cols + i], want[(size_t)k * cols + i]));
        hq_free(&h);
    }
    cic_dot_scratch_clear(&s);
    cic_mpvec_destroy(w, n);
    cic_mpvec_destroy(q, (size_t)dh * dh);
    cic_mpvec_destroy(want, n);
    cic_mpvec_destroy(got, n);
}

/* One wrong sign in the fast path's Q is seen, on both sides. */
static void test_planted_sign(void **state)
{
    (void)state;
    assert_true(check(64, 0, 2 * KINDS, false, 53, 53, 5, 1, 17) > 0);
    assert_true(check(12, 0, 2 * KINDS, true, 128, 64, 6, 1, 0) > 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_shapes),
        cmocka_unit_test(test_fallback_counted),
        cmocka_unit_test(test_threads),
        cmocka_unit_test(test_heads_strided),
        cmocka_unit_test(test_planted_sign),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
