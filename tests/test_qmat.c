/* SPDX-License-Identifier: MIT */
/* test_qmat.c: the orthogonal matrices (src/xform/qmat.h).
 *
 * Random Q: orthogonal to c * d * 2^-prec for several sizes, seeds and
 * precisions, a planted fault caught by the same check, bit-for-bit
 * determinism, Q^T G upper triangular with a positive diagonal (the QR and the
 * Haar sign fix against the Gaussian itself), and the sign fix's distribution
 * (mean of Q_00 near 0). Hadamard: entries +-RN(1/sqrt d), the sign pattern
 * checked in integers (S^T S = d I) and against H_K (x) Sylvester's
 * (-1)^popcount(i & j) and the seed's sign vector, for powers of two,
 * Paley orders up to d = 1152 and the Williamson orders 156 and 172 (with
 * 312 = 156 * 2 and 688 = 172 * 4); every base H_K orthogonal in integers,
 * a planted fault caught; the K chosen for each d pinned, Paley before
 * Williamson; the engines' fast transform (butterflies, then the blocks
 * mixed by H_K) replayed in integers and equal to the dense Q's signs;
 * unsupported sizes refused with a suggestion. Forced base orders (a
 * case's hadamard_base): which (w, K) are built, Q entry by entry for the
 * Paley bases 4, 32, 128 of 256 (orthogonal, and not the Sylvester Q) and
 * the Williamson base of 312, K = 0 and the automatic K giving the same
 * bits, the fast transform equal to the dense Q, the refusal sentence; the
 * mean-preserving Hadamard against the Sylvester formula and, with a
 * forced base, Q 1 = 1 and orthogonal. orth_error itself
 * is checked on matrices whose answer is known exactly.
 * CIC_TEST_MULTIPLIER adds seeds. */
#include "testutil.h"

#include "base/mpvec.h"
#include "base/rng.h"
#include "model/model.h"
#include "xform/qmat.h"

#include <string.h>

/* Constant of the orthogonality bound max|Q^T Q - I| <= C d 2^-prec. The
 * ratio err / (d 2^-prec) is largest at small d, where a few roundings per
 * entry dominate: worst over 3000 seeds was 3.7 at d = 2, 2.6 at d = 3, 1.2
 * at d = 8, and about 0.1 at d = 64, 0.03 at d = 256 (prec 24, 53, 128
 * alike). C = 8 leaves a factor 2 at d = 2 for longer runs
 * (CIC_TEST_MULTIPLIER); test_random_orthogonal prints the ratios. */
#define ORTH_C 8.0

static const int sizes[] = { 1, 2, 3, 5, 16, 33, 64 };
static const mpfr_prec_t precs[] = { 24, 53, 128, 200 };
#define NSIZES (sizeof sizes / sizeof sizes[0])
#define NPRECS (sizeof precs / sizeof precs[0])

static mpfr_t *qnew(int d, mpfr_prec_t prec)
{
    mpfr_t *q = cic_mpvec_create((size_t)d * d, prec);
    assert_non_null(q);
    return q;
}

static void qfree(mpfr_t *q, int d) { cic_mpvec_destroy(q, (size_t)d * d); }

static double orth_bound(int d, mpfr_prec_t prec)
{
    return ORTH_C * d * ldexp(1.0, -(int)prec);
}

/* ---- orth_error on known answers ---------------------------------------- */

static void test_orth_error_known(void **state)
{
    mpfr_prec_t prec = 53;
    mpfr_t *q = qnew(3, prec);
    (void)state;

    cic_q_identity(q, 3);
    assert_true(cic_q_orth_error((const mpfr_t *)q, 3, prec) == 0.0);

    /* (1 + 2^-10)^2 - 1 = 2^-9 + 2^-20, exact in double */
    mpfr_set_d(q[0], 1.0 + 0x1p-10, MPFR_RNDN);
    assert_true(cic_q_orth_error((const mpfr_t *)q, 3, prec)
                == 0x1p-9 + 0x1p-20);

    /* an off-diagonal entry e gives (Q^T Q)_01 = e and (Q^T Q)_11 = 1 + e^2 */
    cic_q_identity(q, 3);
    mpfr_set_d(q[1], 0x1p-30, MPFR_RNDN);
    assert_true(cic_q_orth_error((const mpfr_t *)q, 3, prec) == 0x1p-30);

    /* 2I: every diagonal entry of Q^T Q - I is 3 */
    cic_q_identity(q, 3);
    mpfr_set_ui(q[0], 2, MPFR_RNDN);
    mpfr_set_ui(q[4], 2, MPFR_RNDN);
    mpfr_set_ui(q[8], 2, MPFR_RNDN);
    assert_true(cic_q_orth_error((const mpfr_t *)q, 3, prec) == 3.0);

    /* a product below 2^-prec relative must still show: 2*prec accumulation */
    cic_q_identity(q, 3);
    mpfr_set_d(q[1], 0x1p-40, MPFR_RNDN);
    mpfr_set_d(q[3], -0x1p-40, MPFR_RNDN);
    /* (Q^T Q)_00 = 1 + 2^-80: the error is 2^-80, not rounded away */
    assert_true(cic_q_orth_error((const mpfr_t *)q, 3, prec) == 0x1p-80);

    qfree(q, 3);
}

/* ---- random Q ----------------------------------------------------------- */

static void test_random_orthogonal(void **state)
{
    int nseeds = 2 * cic_test_multiplier();
    size_t a, b;
    (void)state;
    for (b = 0; b < NPRECS; b++) {
        mpfr_prec_t prec = precs[b];
        for (a = 0; a < NSIZES; a++) {
            int d = sizes[a], s;
            double worst = 0.0, worst_err = 0.0;
            mpfr_t *q = qnew(d, prec);
            for (s = 0; s < nseeds; s++) {
                uint64_t seed = 1000u * (uint64_t)s + (uint64_t)d;
                double err, bound = orth_bound(d, prec);
                assert_int_equal(cic_q_random(q, d, seed, prec), 0);
                err = cic_q_orth_error((const mpfr_t *)q, d, prec);
                if (!(err <= bound))
                    fail_msg("cic_q_random d %d seed %llu prec %ld: "
                             "max|Q^T Q - I| = %.3g > %.3g = %g * d * "
                             "2^-prec (ratio err / (d 2^-prec) = %.3g)",
                             d, (unsigned long long)seed, (long)prec, err,
                             bound, ORTH_C,
                             err / (d * ldexp(1.0, -(int)prec)));
                if (err / (d * ldexp(1.0, -(int)prec)) > worst) {
                    worst = err / (d * ldexp(1.0, -(int)prec));
                    worst_err = err;
                }
            }
            print_message("random d %3d prec %3ld: max orth_error %.3g, "
                          "/(d 2^-prec) = %.3f\n",
                          d, (long)prec, worst_err, worst);
            qfree(q, d);
        }
    }
}

/* The check above can fail: move one entry by enough to matter and by no
 * more than a rounding-sized amount would suggest. The largest entry of a
 * column is >= 1/sqrt(d), so adding delta there changes (Q^T Q)_jj by at least
 * 2 delta / sqrt(d) - ... > bound when delta = 2 bound sqrt(d). */
static void test_random_fault_caught(void **state)
{
    size_t a, b;
    (void)state;
    for (b = 0; b < NPRECS; b++) {
        mpfr_prec_t prec = precs[b];
        for (a = 0; a < NSIZES; a++) {
            int d = sizes[a], i, imax = 0, j = d / 2;
            double bound = orth_bound(d, prec), err;
            mpfr_t *q = qnew(d, prec);
            assert_int_equal(cic_q_random(q, d, 7, prec), 0);
            for (i = 1; i < d; i++)
                if (mpfr_cmpabs(q[(size_t)i * d + j], q[(size_t)imax * d + j])
                    > 0)
                    imax = i;
            mpfr_add_d(q[(size_t)imax * d + j], q[(size_t)imax * d + j],
                       (mpfr_sgn(q[(size_t)imax * d + j]) > 0 ? 2 : -2)
                           * bound * sqrt((double)d),
                       MPFR_RNDN);
            err = cic_q_orth_error((const mpfr_t *)q, d, prec);
            if (!(err > bound))
                fail_msg("planted fault at (%d, %d) not caught: d %d prec %ld "
                         "orth_error %.3g <= bound %.3g",
                         imax, j, d, (long)prec, err, bound);
            qfree(q, d);
        }
    }
}

static int same_bits(const mpfr_t *x, const mpfr_t *y, size_t n, size_t *at)
{
    size_t i;
    for (i = 0; i < n; i++)
        /* +0 and -0 compare equal in mpfr_equal_p; compare the sign too */
        if (!mpfr_equal_p(x[i], y[i])
            || mpfr_signbit(x[i]) != mpfr_signbit(y[i])) {
            *at = i;
            return 0;
        }
    return 1;
}

static void test_random_deterministic(void **state)
{
    int d = 33;
    mpfr_prec_t prec = 53;
    size_t n = (size_t)d * d, at = 0;
    mpfr_t *q1 = qnew(d, prec), *q2 = qnew(d, prec);
    (void)state;
    assert_int_equal(cic_q_random(q1, d, 42, prec), 0);
    assert_int_equal(cic_q_random(q2, d, 42, prec), 0);
    if (!same_bits((const mpfr_t *)q1, (const mpfr_t *)q2, n, &at))
        fail_msg("seed 42 d %d prec %ld: entry %zu differs between runs", d,
                 (long)prec, at);
    assert_int_equal(cic_q_random(q2, d, 43, prec), 0);
    assert_false(same_bits((const mpfr_t *)q1, (const mpfr_t *)q2, n, &at));
    /* the seed, not the precision's rounding, decides Q: prec 53 and prec 200
     * agree to far better than the data (forward error ~ cond(G) 2^-53) */
    {
        mpfr_t *hi = qnew(d, 200);
        double worst = 0.0;
        size_t i;
        assert_int_equal(cic_q_random(q2, d, 42, prec), 0);
        assert_int_equal(cic_q_random(hi, d, 42, 200), 0);
        for (i = 0; i < n; i++) {
            double diff = fabs(mpfr_get_d(q2[i], MPFR_RNDN)
                               - mpfr_get_d(hi[i], MPFR_RNDN));
            if (diff > worst)
                worst = diff;
        }
        print_message("random d %d seed 42: max |Q_53 - Q_200| = %.3g\n", d,
                      worst);
        if (!(worst <= 1e-10))
            fail_msg("d %d seed 42: Q at prec 53 and 200 differ by %.3g", d,
                     worst);
        qfree(hi, d);
    }
    qfree(q1, d);
    qfree(q2, d);
}

/* Q^T G = R must be upper triangular with a positive diagonal: that is the QR
 * of the very Gaussian the stream defines, with the Haar sign fix. Computed
 * at 2*prec + 32 bits from the prec-bit Q and G (products exact). */
static void test_random_is_qr_of_gaussian(void **state)
{
    static const int ds[] = { 1, 2, 5, 16, 33 };
    mpfr_prec_t prec = 53;
    size_t a;
    (void)state;
    for (a = 0; a < sizeof ds / sizeof ds[0]; a++) {
        int d = ds[a], seed;
        size_t n = (size_t)d * d;
        for (seed = 1; seed <= 3; seed++) {
            mpfr_t *q = qnew(d, prec), *g = qnew(d, prec), r;
            cic_dot_scratch s;
            uint64_t key = cic_rng_key((uint64_t)seed, "q.random");
            size_t i, j;
            double gmax = 0.0;
            assert_int_equal(cic_q_random(q, d, (uint64_t)seed, prec), 0);
            for (i = 0; i < n; i++) {
                cic_rng_normal_mp(g[i], key, i);
                if (fabs(mpfr_get_d(g[i], MPFR_RNDN)) > gmax)
                    gmax = fabs(mpfr_get_d(g[i], MPFR_RNDN));
            }
            assert_int_equal(cic_dot_scratch_init(&s, (size_t)d, prec), 0);
            mpfr_init2(r, 2 * prec + 32);
            for (i = 0; i < (size_t)d; i++)
                for (j = 0; j <= i; j++) {
                    /* R_ij = column i of Q . column j of G, i >= j */
                    double v;
                    cic_mp_dot(r, (const mpfr_t *)&q[i], (size_t)d,
                               (const mpfr_t *)&g[j], (size_t)d, (size_t)d,
                               NULL, &s);
                    v = mpfr_get_d(r, MPFR_RNDN);
                    if (i == j && !(v > 0))
                        fail_msg("seed %d d %d prec %ld: R_%zu%zu = %.17g, "
                                 "not > 0 (sign fix)",
                                 seed, d, (long)prec, i, i, v);
                    if (i > j && !(fabs(v) <= 8.0 * d * gmax * 0x1p-53))
                        fail_msg("seed %d d %d prec %ld: R_%zu%zu = %.3g below "
                                 "the diagonal (max|G| %.3g)",
                                 seed, d, (long)prec, i, j, v, gmax);
                }
            mpfr_clear(r);
            cic_dot_scratch_clear(&s);
            qfree(q, d);
            qfree(g, d);
        }
    }
}

/* Haar: Q_00 = g_00 / ||g_0|| has mean 0. Without the sign fix it would be
 * -|g_00| / ||g_0||, mean -2/pi at d = 2. Std of Q_00 at d = 2 is 1/sqrt 2,
 * so the mean of N draws has std 0.71 / sqrt N; 0.2 is > 4 sigma at N = 200. */
static void test_random_sign_fix_mean(void **state)
{
    int d = 2, nseeds = 200, s, npos = 0;
    double sum = 0.0, mean;
    mpfr_t *q = qnew(d, 53);
    (void)state;
    for (s = 0; s < nseeds; s++) {
        assert_int_equal(cic_q_random(q, d, (uint64_t)s, 53), 0);
        sum += mpfr_get_d(q[0], MPFR_RNDN);
        npos += mpfr_sgn(q[0]) > 0;
    }
    mean = sum / nseeds;
    if (!(fabs(mean) <= 0.2))
        fail_msg("mean of Q_00 over %d seeds at d 2 = %.3f, expected ~0 "
                 "(%d positive)", nseeds, mean, npos);
    qfree(q, d);
}

/* ---- Hadamard ----------------------------------------------------------- */

static int is_pow4(int d)
{
    return d > 0 && (d & (d - 1)) == 0 && (__builtin_ctz((unsigned)d) % 2) == 0;
}

/* Q of cic_q_hadamard_k(d, Kreq) (Kreq = 0: automatic, as cic_q_hadamard)
 * checked entry by entry against its definition. */
static void check_hadamard_k(int d, int Kreq, uint64_t seed, mpfr_prec_t prec)
{
    size_t n = (size_t)d, i, j, k;
    mpfr_t *q = qnew(d, prec), r, t;
    int *sg = calloc(n * n, sizeof *sg);
    uint64_t key = cic_rng_key(seed, "q.hadamard.signs");
    double err;
    signed char *hk = NULL;
    int K;
    size_t P;
    assert_non_null(sg);
    assert_int_equal(cic_q_hadamard_k(q, d, Kreq, seed, prec), 0);

    /* |entries| all equal, bit for bit, and r^2 d = 1 within 2^-prec */
    mpfr_init2(r, prec);
    mpfr_init2(t, 2 * prec + 64);
    mpfr_abs(r, q[0], MPFR_RNDN);
    mpfr_sqr(t, r, MPFR_RNDN);
    mpfr_mul_ui(t, t, (unsigned long)d, MPFR_RNDN);
    mpfr_sub_ui(t, t, 1, MPFR_RNDN);
    if (!(fabs(mpfr_get_d(t, MPFR_RNDN)) <= ldexp(1.0, -(int)prec + 1)))
        fail_msg("hadamard d %d prec %ld: d r^2 - 1 = %.3g", d, (long)prec,
                 mpfr_get_d(t, MPFR_RNDN));
    if (is_pow4(d)
        && mpfr_cmp_ui_2exp(r, 1, -(mpfr_exp_t)(__builtin_ctz((unsigned)d) / 2))
               != 0)
        fail_msg("hadamard d %d prec %ld: |entry| not exactly 1/sqrt(d)", d,
                 (long)prec);
    for (i = 0; i < n * n; i++) {
        if (mpfr_cmpabs(r, q[i]) != 0)
            fail_msg("hadamard d %d prec %ld: |entry %zu| != |entry 0|", d,
                     (long)prec, i);
        sg[i] = mpfr_signbit(q[i]) ? -1 : 1;
    }
    /* the sign pattern in integers: S^T S = d I exactly, as dot products of
     * S's columns (stored contiguously: d^3 / 2 small integer products, a
     * fraction of a second at d = 1152) */
    {
        signed char *col = calloc(n * n, 1);
        assert_non_null(col);
        for (i = 0; i < n; i++)
            for (k = 0; k < n; k++)
                col[i * n + k] = (signed char)sg[k * n + i];
        for (i = 0; i < n; i++)
            for (j = i; j < n; j++) {
                const signed char *a = col + i * n, *b = col + j * n;
                int dot = 0;
                for (k = 0; k < n; k++)
                    dot += a[k] * b[k];
                if (dot != (i == j ? d : 0))
                    fail_msg("hadamard d %d seed %llu: (S^T S)_%zu%zu = %d", d,
                             (unsigned long long)seed, i, j, dot);
            }
        free(col);
    }
    /* S = (H_K (x) Sylvester(P)) diag(s), s_j = -1 iff bit 0 of the
     * stream's word j; H_K = (1) for powers of two unless K is forced */
    if (Kreq == 0) {
        assert_int_equal(cic_hadamard_base(&hk, &K, d), 0);
        if ((d & (d - 1)) == 0)
            assert_int_equal(K, 1);
    } else {
        assert_int_equal(cic_hadamard_base_k(&hk, Kreq, d), 0);
        K = Kreq;
    }
    P = n / (size_t)K;
    for (j = 0; j < n; j++) {
        int sj = (cic_rng_u64(key, j) & 1) ? -1 : 1;
        for (i = 0; i < n; i++) {
            int h = __builtin_parityll((unsigned long long)((i % P) & (j % P))) ? -1 : 1;
            h *= hk[(i / P) * (size_t)K + j / P];
            if (sg[i * n + j] != h * sj)
                fail_msg("hadamard d %d seed %llu: sign (%zu, %zu) = %d, "
                         "expected %d", d, (unsigned long long)seed, i, j,
                         sg[i * n + j], h * sj);
        }
    }
    /* Orthogonal to the rounding of 1/sqrt(d), exactly for powers of 4.
     * Q = r S with every |entry| = r and S^T S = d I (both checked above),
     * so Q^T Q = d r^2 I and the orthogonality error is |d r^2 - 1|, which
     * is bounded above; the MPFR product cic_q_orth_error (d^3 correctly
     * rounded products, a minute at d = 1152) confirms it where it is cheap. */
    mpfr_abs(t, t, MPFR_RNDN); /* exact */
    err = mpfr_get_d(t, MPFR_RNDN);
    if (d <= 256) {
        err = cic_q_orth_error((const mpfr_t *)q, d, prec);
        if (!(err <= mpfr_get_d(t, MPFR_RNDU)))
            fail_msg("hadamard d %d prec %ld: orth_error %.17g > |d r^2 - 1| = %.17g", d,
                     (long)prec, err, mpfr_get_d(t, MPFR_RNDN));
    }
    if (is_pow4(d) ? err != 0.0 : !(err <= ldexp(1.0, -(int)prec + 1)))
        fail_msg("hadamard d %d prec %ld: orth_error %.3g", d, (long)prec,
                 err);
    print_message("hadamard d %3d K %3d prec %3ld: orth_error %.3g\n", d, K,
                  (long)prec, err);
    mpfr_clear(r);
    mpfr_clear(t);
    free(sg);
    free(hk);
    qfree(q, d);
}

static void check_hadamard(int d, uint64_t seed, mpfr_prec_t prec)
{
    check_hadamard_k(d, 0, seed, prec);
}

static void test_hadamard(void **state)
{
    static const int ds[] = { 1, 2, 4, 8, 64, 128 };
    size_t a;
    (void)state;
    for (a = 0; a < sizeof ds / sizeof ds[0]; a++) {
        assert_true(cic_q_hadamard_supported(ds[a]));
        check_hadamard(ds[a], 5, 128);
        check_hadamard(ds[a], 6, 24);
    }
}

/* Non-powers of two: d = K * 2^k with K a Paley order, incl. DiT's 72 and
 * 1152 = 36 * 32 (prec 53 there, for speed). */
static void test_hadamard_paley(void **state)
{
    static const int ds[] = { 12, 24, 20, 40, 28, 36, 72, 52, 60, 108 };
    size_t a;
    (void)state;
    for (a = 0; a < sizeof ds / sizeof ds[0]; a++) {
        assert_true(cic_q_hadamard_supported(ds[a]));
        check_hadamard(ds[a], 5, 128);
        check_hadamard(ds[a], 6, 24);
    }
    check_hadamard(140, 7, 53);
    check_hadamard(148, 7, 53);
    check_hadamard(1152, 8, 53);
}

/* The number of (i, j) with (H H^T)_ij != K delta_ij for a K x K +-1
 * matrix, in integers; with verbose, prints the first few. */
static long base_defects(const signed char *h, int K, int verbose)
{
    long bad = 0;
    int i, j, k;
    for (i = 0; i < K; i++)
        for (j = 0; j < K; j++) {
            long dot = 0;
            for (k = 0; k < K; k++)
                dot += (long)h[(size_t)i * K + k] * h[(size_t)j * K + k];
            if (dot != (i == j ? K : 0) && bad++ < 3 && verbose)
                print_message("base %d: (H H^T)_%d,%d = %ld\n", K, i, j, dot);
        }
    return bad;
}

/* Every base order K, built by code (Sylvester, Paley I over GF(p^m), Paley
 * II, Williamson): H H^T = K I in integers, row 0 and column 0 all +1, the K
 * chosen, and cic_hadamard_base_order agreeing. The smallest K with a
 * Sylvester or Paley base wins, so 40 = 20 * 2 uses K = 20; a Williamson
 * base only when there is none: 156 and 172 use theirs, but 312, 624, 1248
 * (156 * 2^k) keep the Paley I base 312 (311 prime) and 344, 688 (172 *
 * 2^k) the Paley I base 344 (343 = 7^3), as before the Williamson bases
 * existed. 92 (Williamson n = 23, not in the table) stays unsupported. Also
 * orders over the prime powers 27 (Paley I, 28), 25 (Paley II, 52), 49
 * (Paley II, 100), 81 (Paley II, 164), 243 (Paley I, 244). */
static void test_hadamard_bases(void **state)
{
    static const struct {
        int w, K;
    } cases[] = {
        { 1, 1 },     { 2, 1 },     { 4, 1 },     { 1024, 1 },  { 12, 12 },
        { 20, 20 },   { 28, 28 },   { 36, 36 },   { 40, 20 },   { 52, 52 },
        { 60, 60 },   { 108, 108 }, { 140, 140 }, { 148, 148 }, { 44, 44 },
        { 100, 100 }, { 164, 164 }, { 244, 244 }, { 24, 12 },   { 1152, 36 },
        { 156, 156 }, { 172, 172 }, { 312, 156 }, { 624, 156 }, { 1248, 156 },
        { 344, 172 }, { 688, 172 }, { 92, 0 },    { 6, 0 },     { 3, 0 },
        /* the widths QuaRot rotates (test_hadamard_cheapest) */
        { 4096, 1 },  { 5120, 20 }, { 11008, 172 }, { 13824, 108 }, { 14336, 28 },
        { 2560, 20 },
        { 78, 0 },    { 86, 0 },    { 0, 0 },     { -4, 0 },
    };
    size_t c;
    (void)state;
    for (c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        signed char *h = NULL;
        int K = -1, i, k;
        long bad;
        int rc = cic_hadamard_base(&h, &K, cases[c].w);
        assert_int_equal(cic_hadamard_base_order(cases[c].w), cases[c].K);
        assert_int_equal(cic_q_hadamard_supported(cases[c].w), cases[c].K != 0);
        if (cases[c].K == 0) {
            assert_int_equal(rc, -1);
            assert_null(h);
            continue;
        }
        assert_int_equal(rc, 0);
        assert_int_equal(K, cases[c].K);
        for (i = 0; i < K; i++) {
            if (h[i] != 1 || h[(size_t)i * K] != 1)
                fail_msg("base %d: row 0 / column 0 not all +1 at %d", K, i);
            for (k = 0; k < K; k++)
                assert_true(h[(size_t)i * K + k] == 1 || h[(size_t)i * K + k] == -1);
        }
        bad = base_defects(h, K, 1);
        if (bad != 0)
            fail_msg("base %d (w %d): %ld entries of H H^T != K I", K, cases[c].w, bad);
        print_message("hadamard base K %3d (w %4d): H H^T = K I\n", K, cases[c].w);
        free(h);
    }
}

/* The automatic base of every width is the cheapest fast transform among
 * the bases that build it (cic_op_flops_fwht per row over every K with a
 * construction, K 2^k = w), for the widths QuaRot and the shipped cases
 * rotate and for every multiple of 4 up to 4096; hadamard_base refuses a
 * base that does not divide the width. */
/* The cheapest base of width w among those that build it (0: none). */
static int cheapest_base(int w)
{
    int P, best = 0;
    for (P = 1; P <= w; P *= 2) {
        int k0 = w / P;
        double f;
        if (w % P || !cic_q_hadamard_k_supported(w, k0))
            continue;
        f = cic_op_flops_fwht(1, w, k0);
        if (!best || f < cic_op_flops_fwht(1, w, best) ||
            (f == cic_op_flops_fwht(1, w, best) && k0 < best))
            best = k0;
    }
    return best;
}

static void test_hadamard_cheapest(void **state)
{
    static const int quarot[] = { 4096, 5120, 11008, 13824, 14336, 2560, 1152, 4608, 688 };
    size_t a;
    int w, n = 0;
    (void)state;
    for (w = 4; w <= 4096; w += 4) {
        int best = cheapest_base(w);
        if (cic_hadamard_base_order(w) != best)
            fail_msg("width %d: automatic base %d, the cheapest is %d", w,
                     cic_hadamard_base_order(w), best);
        n += best != 0;
    }
    for (a = 0; a < sizeof quarot / sizeof quarot[0]; a++) {
        int best = cheapest_base(quarot[a]);
        assert_true(best > 0);
        assert_int_equal(cic_hadamard_base_order(quarot[a]), best);
        print_message("width %5d: base %3d, fast transform %.0f FLOPs per row\n", quarot[a],
                      best, cic_op_flops_fwht(1, quarot[a], best));
    }
    print_message("%d widths up to 4096: the automatic base is the cheapest\n", n);
    assert_true(n > 500);
    assert_false(cic_q_hadamard_k_supported(4096, 12));
    assert_false(cic_q_hadamard_k_supported(11008, 20));
}

/* The Williamson orders end to end: Q for d = 156 and 172 (base = the
 * Williamson array, S^T S = d I in integers, signs = H_K (x) Syl diag(s))
 * and their multiples 312 = 156 * 2 and 688 = 172 * 4 (the same Williamson
 * bases, the cheapest: test_hadamard_bases). The base check can fail: one flipped sign of the
 * 156 and 172 bases breaks H H^T = K I in 2 (K - 1) entries (row and column
 * of the flipped row, off the diagonal). */
static void test_hadamard_williamson(void **state)
{
    static const int ws[] = { 156, 172 };
    size_t a;
    (void)state;
    for (a = 0; a < sizeof ws / sizeof ws[0]; a++) {
        signed char *h = NULL;
        int K = 0;
        long bad;
        assert_true(cic_q_hadamard_supported(ws[a]));
        assert_int_equal(cic_hadamard_base_order(ws[a]), ws[a]);
        check_hadamard(ws[a], 5, 128);
        check_hadamard(ws[a], 6, 24);
        assert_int_equal(cic_hadamard_base(&h, &K, ws[a]), 0);
        assert_int_equal(K, ws[a]);
        h[(size_t)7 * K + 11] = (signed char)-h[(size_t)7 * K + 11];
        bad = base_defects(h, K, 0);
        if (bad != 2L * (K - 1))
            fail_msg("base %d with (7, 11) flipped: %ld defects, expected %ld", K, bad,
                     2L * (K - 1));
        free(h);
    }
    check_hadamard(312, 7, 53);
    check_hadamard(688, 8, 53);
}

/* The engines' fast transform (engine_real.h and engine_mpfr.c, op_fwht)
 * replayed in exact integer arithmetic on rows x: butterflies of length
 * P = w / K on each block of P, then out block c = sum_a H_K[a][c] block a
 * (transpose: H_K[c][a]), with the diagonal signs s after (forward) or
 * before (transpose). Compared with x S and x S^T for the sign matrix S of
 * cic_q_hadamard_k's Q = S / sqrt(w) (base order Kreq, 0: automatic),
 * exactly: entries |x| <= 8, so every sum is far below 2^63. hk_flip >= 0
 * flips that entry of H_K (a planted fault); returns the number of rows
 * that differ. */
static int fast_vs_dense_k(int w, int Kreq, uint64_t seed, int rows, long hk_flip)
{
    size_t n = (size_t)w, i, j, k;
    mpfr_t *q = qnew(w, 24);
    int *sg = calloc(n * n, sizeof *sg), *s = calloc(n, sizeof *s);
    long *x = calloc(n, sizeof *x), *v = calloc(n, sizeof *v), *acc = NULL;
    long *dense = calloc(n, sizeof *dense);
    signed char *hk = NULL;
    int K = 0, P, r, t, bad = 0;
    uint64_t key = cic_rng_key(seed, "test.fwht.x");
    uint64_t skey = cic_rng_key(seed, "q.hadamard.signs");
    assert_true(sg && s && x && v && dense);
    assert_int_equal(cic_q_hadamard_k(q, w, Kreq, seed, 24), 0);
    for (i = 0; i < n * n; i++)
        sg[i] = mpfr_signbit(q[i]) ? -1 : 1;
    for (j = 0; j < n; j++)
        s[j] = (cic_rng_u64(skey, j) & 1) ? -1 : 1;
    /* the base the engines build from an op's hbase */
    K = cic_hadamard_base_order_k(w, Kreq);
    assert_int_equal(cic_hadamard_base_k(&hk, K, w), 0);
    if (hk_flip >= 0)
        hk[hk_flip] = (signed char)-hk[hk_flip];
    P = w / K;
    acc = calloc((size_t)K, sizeof *acc);
    assert_non_null(acc);
    for (r = 0; r < rows; r++)
        for (t = 0; t < 2; t++) { /* t = 1: transpose */
            int len, a, c, e, row_bad = 0;
            for (j = 0; j < n; j++)
                x[j] = (long)(cic_rng_u64(key, (uint64_t)r * n + j) % 17) - 8;
            for (j = 0; j < n; j++)
                v[j] = t ? x[j] * s[j] : x[j];
            for (len = 1; len < P; len <<= 1)
                for (j = 0; j < n; j += 2 * (size_t)len)
                    for (k = j; k < j + (size_t)len; k++) {
                        long p0 = v[k], p1 = v[k + len];
                        v[k] = p0 + p1;
                        v[k + len] = p0 - p1;
                    }
            for (e = 0; K > 1 && e < P; e++) {
                for (c = 0; c < K; c++) {
                    long sum = v[e];
                    for (a = 1; a < K; a++) {
                        int h = t ? hk[(size_t)c * K + a] : hk[(size_t)a * K + c];
                        sum += h > 0 ? v[(size_t)a * P + e] : -v[(size_t)a * P + e];
                    }
                    acc[c] = sum;
                }
                for (c = 0; c < K; c++)
                    v[(size_t)c * P + e] = acc[c];
            }
            if (!t)
                for (j = 0; j < n; j++)
                    v[j] *= s[j];
            /* dense: (x S)_j = sum_i x_i S_ij, (x S^T)_j = sum_i x_i S_ji */
            for (j = 0; j < n; j++) {
                long sum = 0;
                for (i = 0; i < n; i++)
                    sum += x[i] * (t ? sg[j * n + i] : sg[i * n + j]);
                dense[j] = sum;
            }
            for (j = 0; j < n; j++)
                if (v[j] != dense[j]) {
                    if (hk_flip < 0)
                        print_message("fwht w %d K %d seed %llu row %d %s: entry %zu "
                                      "fast %ld dense %ld\n", w, K,
                                      (unsigned long long)seed, r,
                                      t ? "transpose" : "forward", j, v[j], dense[j]);
                    row_bad = 1;
                    break;
                }
            bad += row_bad;
        }
    free(acc);
    free(hk);
    free(dense);
    free(v);
    free(x);
    free(s);
    free(sg);
    qfree(q, w);
    return bad;
}

static int fast_vs_dense(int w, uint64_t seed, int rows, long hk_flip)
{
    return fast_vs_dense_k(w, 0, seed, rows, hk_flip);
}

/* Fast transform = dense product for every kind of base: Sylvester (64),
 * Paley I (12, 28 * 2), Paley II (20 * 2, 36 * 4), Williamson (156, 172)
 * and the Paley I bases of 312 and 688; a flipped entry of H_K (row 1,
 * column 2) is caught. */
static void test_hadamard_fast_matches_dense(void **state)
{
    static const int ws[] = { 64, 12, 56, 40, 144, 156, 172, 312, 688 };
    int nseeds = cic_test_multiplier(), sd;
    size_t a;
    (void)state;
    for (a = 0; a < sizeof ws / sizeof ws[0]; a++) {
        int K = cic_hadamard_base_order(ws[a]), bad;
        for (sd = 0; sd < nseeds; sd++) {
            uint64_t seed = 100u + (uint64_t)sd;
            bad = fast_vs_dense(ws[a], seed, 3, -1);
            if (bad != 0)
                fail_msg("fwht w %d (K %d) seed %llu: %d of 6 rows differ from the "
                         "dense product", ws[a], K, (unsigned long long)seed, bad);
        }
        if (K > 1) {
            bad = fast_vs_dense(ws[a], 100, 3, (long)K + 2);
            if (bad == 0)
                fail_msg("fwht w %d (K %d): flipped H_K[1][2] not caught", ws[a], K);
        }
        print_message("fwht w %3d (K %3d): fast = dense\n", ws[a], K);
    }
}

/* A forced base order (a case's hadamard_base): which (w, K) have a matrix
 * and which order is used. K = 0 is the automatic order; a forced K must be
 * a base built here (1, Paley, Williamson: 2, 16, 40 are not) with w / K a
 * power of two. 312 may be forced to the Williamson base 156 although the
 * automatic choice is its Paley I base 312. */
static void test_hadamard_forced_orders(void **state)
{
    static const struct {
        int w, Kreq, K;
    } cases[] = {
        { 256, 0, 1 },     { 256, 1, 1 },   { 256, 4, 4 },     { 256, 8, 8 },
        { 256, 32, 32 },   { 256, 128, 128 }, { 256, 2, 0 },   { 256, 16, 0 },
        { 256, 12, 0 },    { 256, 256, 0 }, { 256, 512, 0 },   { 256, -1, 0 },
        { 40, 0, 20 },     { 40, 20, 20 },  { 40, 40, 0 },     { 40, 1, 0 },
        { 24, 12, 12 },    { 24, 24, 24 },  { 312, 0, 156 },   { 312, 156, 156 },
        { 312, 312, 312 }, { 1, 1, 1 },     { 1, 0, 1 },       { 0, 0, 0 },
        { 0, 1, 0 },       { -4, 4, 0 },    { 92, 0, 0 },      { 92, 92, 0 },
    };
    size_t c;
    (void)state;
    for (c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        int w = cases[c].w, Kreq = cases[c].Kreq;
        signed char *h = (signed char *)&c; /* must be reset to NULL on failure */
        int rc = cic_hadamard_base_k(&h, Kreq, w);
        if (cic_hadamard_base_order_k(w, Kreq) != cases[c].K)
            fail_msg("base order of w %d, hadamard_base %d: %d, expected %d", w, Kreq,
                     cic_hadamard_base_order_k(w, Kreq), cases[c].K);
        assert_int_equal(cic_q_hadamard_k_supported(w, Kreq), cases[c].K != 0);
        if (cases[c].K == 0) {
            assert_int_equal(rc, -1);
            assert_null(h);
            continue;
        }
        assert_int_equal(rc, 0);
        if (base_defects(h, cases[c].K, 1) != 0)
            fail_msg("forced base %d (w %d): H H^T != K I", cases[c].K, w);
        free(h);
    }
}

/* The forced bases end to end: Q of the Paley I bases 32 and 128 and of
 * the Paley I base 4 at d = 256, of the Williamson base at d = 312, of the
 * Paley I base 24 at d = 24, each checked entry by entry (check_hadamard_k:
 * S^T S = d I in integers, signs = H_K (x) Syl diag(s), orthogonal: exactly
 * at d = 256, a power of 4). K = 32 at d = 256 is not the automatic
 * (Sylvester) matrix: with the same signs more than a quarter of the
 * entries differ. K = 0 and K = the automatic order give cic_q_hadamard's
 * bits. */
static void test_hadamard_forced_q(void **state)
{
    static const struct {
        int d, K;
    } cases[] = { { 256, 32 }, { 256, 128 }, { 256, 4 }, { 24, 24 } };
    int d = 256;
    size_t a, at, n = (size_t)d * d, ndiff = 0, i;
    mpfr_t *q0 = qnew(d, 53), *q1 = qnew(d, 53);
    double err;
    (void)state;
    for (a = 0; a < sizeof cases / sizeof cases[0]; a++)
        check_hadamard_k(cases[a].d, cases[a].K, 5, 53);
    check_hadamard_k(312, 156, 7, 53);

    assert_int_equal(cic_q_hadamard(q0, d, 3, 53), 0);
    assert_int_equal(cic_q_hadamard_k(q1, d, 0, 3, 53), 0);
    assert_true(same_bits((const mpfr_t *)q0, (const mpfr_t *)q1, n, &at));
    assert_int_equal(cic_q_hadamard_k(q1, d, 1, 3, 53), 0);
    assert_true(same_bits((const mpfr_t *)q0, (const mpfr_t *)q1, n, &at));
    assert_int_equal(cic_q_hadamard_k(q1, d, 32, 3, 53), 0);
    err = cic_q_orth_error((const mpfr_t *)q1, d, 53);
    if (err != 0.0)
        fail_msg("hadamard d 256 K 32: orth_error %.3g, expected 0 (entries +-1/16)", err);
    for (i = 0; i < n; i++)
        ndiff += !mpfr_equal_p(q0[i], q1[i]);
    print_message("hadamard d 256: K 32 differs from K 1 in %zu of %zu entries\n", ndiff, n);
    if (ndiff < n / 4)
        fail_msg("hadamard d 256: K 32 differs from the Sylvester Q in %zu of %zu entries only",
                 ndiff, n);
    qfree(q0, d);
    qfree(q1, d);
    d = 40;
    n = (size_t)d * d;
    q0 = qnew(d, 24);
    q1 = qnew(d, 24);
    assert_int_equal(cic_q_hadamard(q0, d, 3, 24), 0);
    assert_int_equal(cic_q_hadamard_k(q1, d, 20, 3, 24), 0);
    assert_true(same_bits((const mpfr_t *)q0, (const mpfr_t *)q1, n, &at));
    assert_int_equal(cic_q_hadamard_k(q1, d, 40, 3, 24), -1);
    assert_int_equal(cic_q_hadamard_k(q1, d, 1, 3, 24), -1);
    qfree(q0, d);
    qfree(q1, d);
}

/* The fast transform with a forced base equals the dense product of
 * cic_q_hadamard_k with that base (d = 256 with K = 4, 32, 128; 312 with
 * the Williamson 156; 24 with 24), and the check can fail: the fast
 * transform with the automatic base against the dense K = 32 Q (a fault
 * planted in the base order) differs. */
static void test_hadamard_forced_fast_matches_dense(void **state)
{
    static const struct {
        int w, K;
    } cases[] = { { 256, 4 }, { 256, 32 }, { 256, 128 }, { 312, 156 }, { 24, 24 } };
    size_t a;
    (void)state;
    for (a = 0; a < sizeof cases / sizeof cases[0]; a++) {
        int bad = fast_vs_dense_k(cases[a].w, cases[a].K, 100, 2, -1);
        if (bad != 0)
            fail_msg("fwht w %d forced K %d: %d of 4 rows differ from the dense product",
                     cases[a].w, cases[a].K, bad);
        bad = fast_vs_dense_k(cases[a].w, cases[a].K, 100, 2, (long)cases[a].K + 2);
        if (bad == 0)
            fail_msg("fwht w %d forced K %d: flipped H_K[1][2] not caught", cases[a].w,
                     cases[a].K);
        print_message("fwht w %3d (forced K %3d): fast = dense\n", cases[a].w, cases[a].K);
    }
}

/* cic_q_hadamard_k_explain: why (d, K) is refused and which orders d has. */
static void test_hadamard_forced_explain(void **state)
{
    char buf[256];
    (void)state;
    cic_q_hadamard_k_explain(buf, sizeof buf, 256, 16);
    assert_string_equal(buf, "16 has no Hadamard construction here (1, a Paley order or a "
                             "Williamson order); the base orders of 256 are 1, 4, 8, 32, "
                             "128 (or 0: automatic)");
    cic_q_hadamard_k_explain(buf, sizeof buf, 96, 32);
    assert_string_equal(buf, "96 is not 32 * 2^k; the base orders of 96 are 12, 24, 48 (or "
                             "0: automatic)");
    cic_q_hadamard_k_explain(buf, sizeof buf, 92, 12);
    assert_string_equal(buf, "92 is not 12 * 2^k; 92 has no Hadamard base order here");
    cic_q_hadamard_k_explain(buf, sizeof buf, 0, -3);
    assert_non_null(strstr(buf, "-3 has no Hadamard construction here"));
    cic_q_hadamard_k_explain(buf, 10, 256, 16); /* truncated, never overrun */
    assert_int_equal(strlen(buf), 9);
}

/* Mean-preserving Hadamard Q = H^T D H / d: the automatic one (K = 0)
 * against the trivially correct Sylvester formula sum_k (-1)^{|i & k|} s_k
 * (-1)^{|k & j|} / d, bit for bit, K = 1 the same bits; with a forced base
 * (K = 32 and 4 at d = 64, K = 20 at d = 40 and 12 at d = 24, refused for
 * K = 0 there since they are not powers of two) every row and column sums
 * to 1 (exactly at d = 64, where the entries are integers over 64, exact
 * at 53 bits; within d roundings of 1/d elsewhere; the sums formed at 128
 * bits), the Q is orthogonal to the rounding of the entries, and K = 32
 * differs from the Sylvester one. */
static void test_mean_preserving_forced(void **state)
{
    static const struct {
        int d, K;
    } cases[] = { { 64, 32 }, { 64, 4 }, { 40, 20 }, { 24, 12 } };
    int d = 64;
    size_t n = (size_t)d, i, j, k, at, a, ndiff = 0;
    mpfr_t *q0 = qnew(d, 53), *q1 = qnew(d, 53), ref;
    uint64_t key = cic_rng_key(9, "q.mean_preserving.signs");
    (void)state;
    mpfr_init2(ref, 53);
    assert_int_equal(cic_q_mean_preserving(q0, d, CIC_Q_HADAMARD, 9, 53), 0);
    for (i = 0; i < n; i++)
        for (j = 0; j < n; j++) {
            long acc = 0;
            for (k = 0; k < n; k++) {
                long sk = k == 0 ? 1 : ((cic_rng_u64(key, k) & 1) ? -1 : 1);
                long hik = __builtin_parityll((unsigned long long)(i & k)) ? -1 : 1;
                long hkj = __builtin_parityll((unsigned long long)(k & j)) ? -1 : 1;
                acc += hik * sk * hkj;
            }
            mpfr_set_si(ref, acc, MPFR_RNDN);
            mpfr_div_ui(ref, ref, (unsigned long)d, MPFR_RNDN);
            if (!mpfr_equal_p(ref, q0[i * n + j]))
                fail_msg("mean-preserving d %d: entry (%zu, %zu) = %.17g, expected %.17g", d,
                         i, j, mpfr_get_d(q0[i * n + j], MPFR_RNDN),
                         mpfr_get_d(ref, MPFR_RNDN));
        }
    mpfr_clear(ref);
    assert_int_equal(cic_q_mean_preserving_k(q1, d, CIC_Q_HADAMARD, 1, 9, 53), 0);
    assert_true(same_bits((const mpfr_t *)q0, (const mpfr_t *)q1, n * n, &at));
    assert_int_equal(cic_q_mean_preserving_k(q1, d, CIC_Q_HADAMARD, 32, 9, 53), 0);
    for (i = 0; i < n * n; i++)
        ndiff += !mpfr_equal_p(q0[i], q1[i]);
    if (ndiff < n * n / 4)
        fail_msg("mean-preserving d 64: K 32 differs from K 0 in %zu entries only", ndiff);
    qfree(q0, d);
    qfree(q1, d);

    for (a = 0; a < sizeof cases / sizeof cases[0]; a++) {
        int dd = cases[a].d;
        size_t m = (size_t)dd;
        mpfr_t *q = qnew(dd, 53), sum;
        double err, tol = (dd & (dd - 1)) == 0 ? 0.0 : dd * 0x1p-53;
        mpfr_init2(sum, 128);
        assert_int_equal(cic_q_mean_preserving_k(q, dd, CIC_Q_HADAMARD, cases[a].K, 9, 53), 0);
        for (i = 0; i < m; i++) {
            mpfr_set_zero(sum, 1);
            for (j = 0; j < m; j++)
                mpfr_add(sum, sum, q[i * m + j], MPFR_RNDN); /* exact: 128 bits */
            mpfr_sub_ui(sum, sum, 1, MPFR_RNDN);
            if (!(fabs(mpfr_get_d(sum, MPFR_RNDN)) <= tol))
                fail_msg("mean-preserving d %d K %d: row %zu sums to 1 %+.3g", dd, cases[a].K,
                         i, mpfr_get_d(sum, MPFR_RNDN));
            mpfr_set_zero(sum, 1);
            for (j = 0; j < m; j++)
                mpfr_add(sum, sum, q[j * m + i], MPFR_RNDN);
            mpfr_sub_ui(sum, sum, 1, MPFR_RNDN);
            if (!(fabs(mpfr_get_d(sum, MPFR_RNDN)) <= tol))
                fail_msg("mean-preserving d %d K %d: column %zu sums to 1 %+.3g", dd,
                         cases[a].K, i, mpfr_get_d(sum, MPFR_RNDN));
        }
        err = cic_q_orth_error((const mpfr_t *)q, dd, 53);
        if (!(err <= 4 * dd * 0x1p-53))
            fail_msg("mean-preserving d %d K %d: orth_error %.3g", dd, cases[a].K, err);
        print_message("mean-preserving d %d K %d: Q 1 = 1, orth_error %.3g\n", dd, cases[a].K,
                      err);
        mpfr_clear(sum);
        qfree(q, dd);
    }
    q0 = qnew(40, 53);
    assert_int_equal(cic_q_mean_preserving_k(q0, 40, CIC_Q_HADAMARD, 0, 9, 53), -1);
    assert_int_equal(cic_q_mean_preserving_k(q0, 40, CIC_Q_HADAMARD, 40, 9, 53), -1);
    qfree(q0, 40);
    q0 = qnew(1, 53);
    assert_int_equal(cic_q_mean_preserving_k(q0, 1, CIC_Q_HADAMARD, 12, 9, 53), -1);
    assert_int_equal(cic_q_mean_preserving_k(q0, 1, CIC_Q_HADAMARD, 1, 9, 53), 0);
    qfree(q0, 1);
}

static void test_hadamard_seeds(void **state)
{
    int d = 64;
    size_t at;
    mpfr_t *q1 = qnew(d, 53), *q2 = qnew(d, 53);
    (void)state;
    assert_int_equal(cic_q_hadamard(q1, d, 1, 53), 0);
    assert_int_equal(cic_q_hadamard(q2, d, 1, 53), 0);
    assert_true(same_bits((const mpfr_t *)q1, (const mpfr_t *)q2,
                          (size_t)d * d, &at));
    assert_int_equal(cic_q_hadamard(q2, d, 2, 53), 0);
    assert_false(same_bits((const mpfr_t *)q1, (const mpfr_t *)q2,
                           (size_t)d * d, &at));
    qfree(q1, d);
    qfree(q2, d);
}

static void test_hadamard_unsupported(void **state)
{
    static const struct {
        int d;
        const char *want;
    } cases[] = {
        { 6, "nearest: 4 and 8" },
        { 92, "nearest: 88 and 96" },
        { 155, "nearest: 152 and 156" },
        { 157, "nearest: 156 and 160" },
        { 171, "nearest: 168 and 172" },
        { 173, "nearest: 172 and 176" },
        { 0, "nearest: 1" },
        { -3, "nearest: 1" },
    };
    size_t a;
    char buf[256];
    (void)state;
    for (a = 0; a < sizeof cases / sizeof cases[0]; a++) {
        int d = cases[a].d;
        size_t n = d > 0 ? (size_t)d * d : 1;
        mpfr_t *q = cic_mpvec_create(n, 53);
        assert_non_null(q);
        assert_false(cic_q_hadamard_supported(d));
        assert_int_equal(cic_q_hadamard(q, d, 1, 53), -1);
        cic_q_hadamard_suggest(buf, sizeof buf, d);
        if (!strstr(buf, cases[a].want) || !strstr(buf, "Paley")
            || !strstr(buf, "Williamson order (156, 172)"))
            fail_msg("suggest(%d) = \"%s\", expected it to contain \"%s\"", d,
                     buf, cases[a].want);
        cic_mpvec_destroy(q, n);
    }
    cic_q_hadamard_suggest(buf, sizeof buf, 92);
    assert_string_equal(buf, "supported Hadamard sizes here are K * 2^k with K = 1, a "
                             "Paley order (q + 1 for a prime power q = 3 mod 4, 2(q + 1) "
                             "for q = 1 mod 4: 12, 20, 28, 36, 44, 52, 60, ...) or a "
                             "Williamson order (156, 172); nearest: 88 and 96");
    cic_q_hadamard_suggest(buf, sizeof buf, 12);
    assert_non_null(strstr(buf, "12 is a supported Hadamard size"));
    cic_q_hadamard_suggest(buf, sizeof buf, 156);
    assert_non_null(strstr(buf, "156 is a supported Hadamard size"));
    cic_q_hadamard_suggest(buf, sizeof buf, 172);
    assert_non_null(strstr(buf, "172 is a supported Hadamard size"));
    /* the longest sentence (ten-digit neighbours) fits the 256-byte hint
     * buffers of cic_xform_check */
    cic_q_hadamard_suggest(buf, sizeof buf, 2147483000);
    assert_non_null(strstr(buf, "nearest: 2147482976 and 2147483008"));
    assert_true(strlen(buf) < 256);
    /* a tiny buffer is truncated, never overrun */
    cic_q_hadamard_suggest(buf, 8, 100);
    assert_int_equal(strlen(buf), 7);
}

static void test_identity(void **state)
{
    mpfr_t *q = qnew(4, 24);
    int i, j;
    (void)state;
    cic_q_identity(q, 4);
    for (i = 0; i < 4; i++)
        for (j = 0; j < 4; j++)
            assert_int_equal(mpfr_cmp_si(q[i * 4 + j], i == j), 0);
    assert_true(cic_q_orth_error((const mpfr_t *)q, 4, 24) == 0.0);
    qfree(q, 4);
}

/* The regular Hadamard: R = sqrt(d) Q diag(s) has entries +-1, R R^T = d I
 * (Q orthogonal exactly: every entry is +-2^-k), every row and column of R
 * sums to 2^k = sqrt(d) (so x = 1 maps to +-1 per channel, where the
 * Sylvester Q puts sqrt(d) into channel 0), R[0][0] = (-1)^k; the signs are
 * cic_q_hadamard's for the seed; orders that are not 4^k are refused. */
static void test_regular_hadamard(void **state)
{
    static const int ds[] = {4, 16, 64, 256};
    static const int bad[] = {1, 2, 8, 12, 32, 128, 48};
    size_t a;
    (void)state;
    for (a = 0; a < sizeof ds / sizeof ds[0]; a++) {
        int d = ds[a], k = cic_regular_order_k(d), i, j;
        mpfr_t *q = qnew(d, 53), *h = qnew(d, 53);
        double rt = ldexp(1.0, k);
        assert_true(k >= 1 && (1 << (2 * k)) == d);
        assert_int_equal(cic_q_regular_hadamard(q, d, 9, 53), 0);
        assert_int_equal(cic_q_hadamard(h, d, 9, 53), 0);
        assert_true(cic_q_orth_error((const mpfr_t *)q, d, 53) == 0.0);
        for (i = 0; i < d; i++) {
            double rs = 0, cs = 0;
            for (j = 0; j < d; j++) {
                /* s_j from the Sylvester Q's row 0 (its H's row 0 is all +1) */
                double sj = mpfr_signbit(h[j]) ? -1 : 1;
                double rij = mpfr_get_d(q[(size_t)i * d + j], MPFR_RNDN) * rt * sj;
                double rji = mpfr_get_d(q[(size_t)j * d + i], MPFR_RNDN) * rt *
                             (mpfr_signbit(h[i]) ? -1 : 1);
                assert_true(rij == 1.0 || rij == -1.0);
                rs += rij;
                cs += rji;
            }
            if (rs != rt || cs != rt)
                fail_msg("regular d %d: row %d sums to %g, column %d to %g, want %g", d, i, rs,
                         i, cs, rt);
        }
        assert_true(mpfr_get_d(q[0], MPFR_RNDN) * rt * (mpfr_signbit(h[0]) ? -1 : 1) ==
                    ((k & 1) ? -1.0 : 1.0));
        qfree(q, d);
        qfree(h, d);
    }
    for (a = 0; a < sizeof bad / sizeof bad[0]; a++) {
        mpfr_t *q = qnew(bad[a], 53);
        assert_int_equal(cic_regular_order_k(bad[a]), 0);
        assert_int_equal(cic_q_regular_hadamard(q, bad[a], 9, 53), -1);
        qfree(q, bad[a]);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_orth_error_known),
        cmocka_unit_test(test_identity),
        cmocka_unit_test(test_regular_hadamard),
        cmocka_unit_test(test_random_orthogonal),
        cmocka_unit_test(test_random_fault_caught),
        cmocka_unit_test(test_random_deterministic),
        cmocka_unit_test(test_random_is_qr_of_gaussian),
        cmocka_unit_test(test_random_sign_fix_mean),
        cmocka_unit_test(test_hadamard),
        cmocka_unit_test(test_hadamard_paley),
        cmocka_unit_test(test_hadamard_bases),
        cmocka_unit_test(test_hadamard_williamson),
        cmocka_unit_test(test_hadamard_fast_matches_dense),
        cmocka_unit_test(test_hadamard_forced_orders),
        cmocka_unit_test(test_hadamard_cheapest),
        cmocka_unit_test(test_hadamard_forced_q),
        cmocka_unit_test(test_hadamard_forced_fast_matches_dense),
        cmocka_unit_test(test_hadamard_forced_explain),
        cmocka_unit_test(test_mean_preserving_forced),
        cmocka_unit_test(test_hadamard_seeds),
        cmocka_unit_test(test_hadamard_unsupported),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
