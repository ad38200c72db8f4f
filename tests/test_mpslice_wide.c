/* SPDX-License-Identifier: MIT */
/* test_mpslice_wide.c: the linear op through exact dgemm slices
 * (mpslice.c) at the precisions a proof escalates to, 256 to 8192 bits,
 * bit for bit against today's row kernel (cic_mp_linear_rows) and the
 * trivially correct reference (cic_mp_dot_mpfr: exact MPFR products added
 * by mpfr_sum, rounded once): random shapes at 64, 256, 320, 512, 1024
 * and 2048 bits with float32, double and full-precision weights; rows
 * spread over thousands of binades (taken) and over SPAN_MAX (declined);
 * signed zeros without a bias, NaN and Inf; biases of up to 8192 bits far
 * above, far below and exactly cancelling the products, and one over
 * BIAS_LIMBS (declined). Also that the cost test takes these ops (above
 * 256 bits the row kernel is ten times dearer), and that the scratch an op
 * holds stays within the memory estimate's cic_mp_slice_scratch at every
 * precision. test_mpslice.c has the working precisions. */
#include "lin_op.h"

#include "base/base.h"
#include "base/mpslice.h"
#include "base/mpvec.h"

#include <cblas.h>

/* One linear op's operands (lin_op.h); pw 0: float32 weights. */
typedef lin_op wop;

static void wop_init(wop *o, size_t m, size_t n, size_t k, mpfr_prec_t px, mpfr_prec_t pw,
                     mpfr_prec_t pb, bool bias)
{
    lin_op_init(o, m, n, k, px, pw, pw == 0, bias, pb);
}

/* A nonzero float32 weight about N(0, 0.02): exponents -5 to -18. */
static float rand_w(uint64_t *s)
{
    uint64_t u = cic_test_rand(s);
    float v = ldexpf((float)((u >> 8) & 0xffffff) / 0x1p24f + 0.5f, -(int)(u >> 40) % 14 - 5);
    return u & 1 ? -v : v;
}

/* x rows spread over up to 60 binades (row i over 4 + 7 i % 57), no
 * zeros; the weights (float32, or MPFR values over 10 binades); biases
 * near the outputs. */
static void fill(wop *o, uint64_t *s)
{
    size_t i, p;
    for (i = 0; i < o->m; i++)
        for (p = 0; p < o->k; p++)
            cic_test_mp_rand_full(o->x[i * o->k + p], s, 0, 4 + (int)(7 * i % 57));
    for (p = 0; p < o->n * o->k; p++)
        if (o->f32)
            o->wf[p] = rand_w(s);
        else
            cic_test_mp_rand_full(o->w[p], s, -6, 5);
    for (i = 0; i < o->n; i++)
        cic_test_mp_rand_full(o->b[i], s, 2, 4);
}

static bool same_bits(mpfr_srcptr a, mpfr_srcptr b)
{
    return (mpfr_nan_p(a) && mpfr_nan_p(b)) ||
           (mpfr_equal_p(a, b) && mpfr_signbit(a) == mpfr_signbit(b));
}

/* The op through the slices (mode, budget 0: the default) on nt threads
 * into y; *st its counts. Returns cic_mp_linear_sliced's code. */
static int run_sliced(mpfr_t *y, const wop *o, enum cic_slice_mode mode, int nt, size_t budget,
                      cic_slice_ws *ws, cic_slice_stats *st)
{
    cic_rt rt;
    int rc;
    cic_rt_init(&rt, 0);
    rt.slice_mode = mode;
    rt.slice_budget = budget;
    rc = cic_mp_linear_sliced(y, (const mpfr_t *)o->x, o->m, o->f32 ? NULL : (const mpfr_t *)o->w,
                              o->views, o->bias ? (const mpfr_t *)o->b : NULL, o->n, o->k, nt,
                              &rt, ws);
    cic_mp_slice_stats(st, &rt);
    return rc;
}

/* Every output of the op through the slices (mode ALWAYS) against the row
 * kernel and cic_mp_dot_mpfr; at least min_sliced of them rounded from
 * slices. Fails with the first output that differs and every setting.
 * Returns the dgemm calls (blocks) made. */
static uint64_t check(const wop *o, int nt, size_t budget, uint64_t min_sliced, const char *label,
                  uint64_t seed)
{
    size_t i, j, mn = o->m * o->n;
    mpfr_prec_t pp = o->px > o->pw ? o->px : o->pw;
    mpfr_t *y = cic_mpvec_create(mn, o->px), *yr = cic_mpvec_create(mn, o->px), want;
    mpfr_t *wrow = cic_mpvec_create(o->k, o->pw);
    cic_dot_scratch sc;
    cic_slice_stats st;
    int rc;
    assert_true(y && yr && wrow);
    assert_int_equal(cic_dot_scratch_init(&sc, o->k, pp > o->pb ? pp : o->pb), 0);
    mpfr_init2(want, o->px);
    for (i = 0; i < mn; i++)
        mpfr_set_nan(y[i]);
    rc = run_sliced(y, o, CIC_SLICE_ALWAYS, nt, budget, NULL, &st);
    cic_mp_linear_rows(yr, (const mpfr_t *)o->x, o->m, o->f32 ? NULL : (const mpfr_t *)o->w,
                       o->views, o->bias ? (const mpfr_t *)o->b : NULL, o->n, o->k, wrow, &sc);
    if (rc != 0 || st.sliced < min_sliced)
        fail_msg("%s (seed %llu) at %ld bits: rc %d, %llu outputs from slices, %llu from the "
                 "kernel, want %llu", label, (unsigned long long)seed, (long)o->px, rc,
                 (unsigned long long)st.sliced, (unsigned long long)st.kernel,
                 (unsigned long long)min_sliced);
    for (i = 0; i < o->m; i++)
        for (j = 0; j < o->n; j++) {
            mpfr_ptr got = y[i * o->n + j];
            cic_mp_dot_mpfr(want, (const mpfr_t *)o->x + i * o->k, 1,
                            (const mpfr_t *)o->w + j * o->k, 1, o->k, o->bias ? o->b[j] : NULL,
                            &sc);
            if (same_bits(got, yr[i * o->n + j]) && same_bits(got, want))
                continue;
            mpfr_fprintf(stderr,
                         "%s (seed %llu): m %zu n %zu k %zu px %ld pw %ld pb %ld f32 %d bias %d "
                         "threads %d budget %zu: output (%zu, %zu): sliced %Ra, row kernel %Ra, "
                         "reference %Ra\n",
                         label, (unsigned long long)seed, o->m, o->n, o->k, (long)o->px,
                         (long)o->pw, (long)o->pb, (int)o->f32, (int)o->bias, nt, budget, i, j,
                         got, yr[i * o->n + j], want);
            fail_msg("%s: output (%zu, %zu) differs", label, i, j);
        }
    mpfr_clear(want);
    cic_dot_scratch_clear(&sc);
    cic_mpvec_destroy(y, mn);
    cic_mpvec_destroy(yr, mn);
    cic_mpvec_destroy(wrow, o->k);
    return st.gemms;
}

/* Random shapes at 64 to 2048 bits: float32 weights, doubles, and weights
 * at x's precision (transformed hp weights), bias or none, the default
 * budget and one of a few rows a block, 1 to 3 threads. No zeros: every
 * output is rounded from slices. */
static void test_precisions(void **state)
{
    static const mpfr_prec_t precs[] = {64, 256, 320, 512, 1024, 2048};
    int rep, reps = 18 * cic_test_multiplier();
    (void)state;
    for (rep = 0; rep < reps; rep++) {
        uint64_t seed = 21000 + (uint64_t)rep, s = seed;
        mpfr_prec_t px = precs[rep % 6];
        int kind = rep / 6 % 3; /* float32, double, px bits */
        size_t m = 1 + (size_t)cic_test_pick(&s, 9), n = 1 + (size_t)cic_test_pick(&s, 9);
        size_t k = 1 + (size_t)cic_test_pick(&s, 300);
        size_t budget = rep % 4 == 3 ? 8 * k * (size_t)(px / 8 + 40) : 0;
        wop o;
        wop_init(&o, m, n, k, px, kind == 0 ? 0 : kind == 1 ? 53 : px, px, rep % 2 == 0);
        fill(&o, &s);
        lin_op_pack(&o);
        check(&o, 1 + rep % 3, budget, m * n, "precisions", seed);
        lin_op_clear(&o);
    }
}

/* Rows spread over 2000 and 8000 binades (taken: hundreds of slices),
 * one over SPAN_MAX (declined: the row kernel's), a weight row over 3000
 * binades, at 512 and 1024 bits. */
static void test_wide_spans(void **state)
{
    int a;
    (void)state;
    for (a = 0; a < 4; a++) {
        uint64_t seed = 22000 + (uint64_t)a, s = seed, g;
        wop o;
        wop_init(&o, 5, 4, 30, a % 2 ? 1024 : 512, a < 2 ? 0 : 64, 64, a % 3 == 0);
        fill(&o, &s);
        mpfr_set_exp(o.x[0 * 30 + 3], -2000);
        mpfr_set_exp(o.x[1 * 30 + 4], 4000);
        mpfr_set_exp(o.x[1 * 30 + 9], -4000);
        mpfr_set_exp(o.x[2 * 30 + 7], 9000);
        mpfr_set_exp(o.x[2 * 30 + 8], -9000); /* row 2: over SPAN_MAX */
        if (a >= 2)
            mpfr_set_exp(o.w[1 * 30 + 2], -3000);
        lin_op_pack(&o);
        assert_int_equal(check(&o, 2, 0, 4 * 4, "wide spans", seed), 1);
        g = check(&o, 1, 8 * (a < 2 ? 14000 : 80000), 4 * 4, "wide spans, blocks", seed);
        if (g < 2)
            fail_msg("wide spans, blocks (seed %llu): %llu dgemm calls", (unsigned long long)seed,
                     (unsigned long long)g);
        lin_op_clear(&o);
    }
}

/* Signed zeros without a bias (all-zero x rows of either sign; x and
 * weights zero in turn so that every product is a zero; -0 biases), and
 * NaN and Inf in x rows and weight rows: the row kernel decides those
 * outputs; the others are rounded from slices. At 512 and 2048 bits. */
static void test_zeros_nonfinite(void **state)
{
    int a, bias;
    size_t i, p;
    (void)state;
    for (a = 0; a < 2; a++)
        for (bias = 0; bias < 2; bias++) {
            uint64_t seed = 23000 + (uint64_t)(2 * a + bias), s = seed;
            size_t k = 12;
            wop o;
            wop_init(&o, 7, 6, k, a ? 2048 : 512, a ? 2048 : 64, 64, bias);
            fill(&o, &s);
            for (p = 0; p < k; p++) {
                mpfr_set_zero(o.x[0 * k + p], p % 3 ? -1 : 1); /* row 0: zeros */
                mpfr_set_zero(o.x[1 * k + p], -1);             /* row 1: -0 */
                if (p % 2)
                    mpfr_set_zero(o.x[2 * k + p], 1); /* row 2 against w row 2: zeros */
                else
                    mpfr_set_zero(o.w[2 * k + p], p % 4 ? 1 : -1);
                mpfr_set_zero(o.w[0 * k + p], -1); /* w row 0: -0 */
            }
            mpfr_set_nan(o.x[3 * k + 5]);
            mpfr_set_inf(o.x[4 * k + 1], -1);
            mpfr_set_inf(o.w[5 * k + 7], 1);
            mpfr_set_zero(o.b[0], -1);
            mpfr_set_zero(o.b[2], 1);
            lin_op_pack(&o);
            /* x rows 2, 5, 6 against weight rows 1, 3, 4 at least */
            check(&o, 1 + a, 0, 9, "zeros and non-finite", seed);
            for (i = 0; i < o.n; i++) /* and with every other output's bias -0 */
                mpfr_set_zero(o.b[i], -1);
            check(&o, 2, 0, 9, "zeros and non-finite, biases -0", seed);
            lin_op_clear(&o);
        }
}

/* Biases at 512 to 8192 bits: near the outputs, 3000 binades above and
 * 8000 below the products, exactly cancelling them (the outputs +0), and
 * over BIAS_LIMBS limbs (that column declined: the row kernel's). */
static void test_biases(void **state)
{
    static const mpfr_prec_t precs[] = {512, 1024, 2048, 8192};
    int a;
    size_t p;
    (void)state;
    for (a = 0; a < 4; a++) {
        uint64_t seed = 24000 + (uint64_t)a, s = seed;
        size_t k = 16;
        mpfr_t sum, prod;
        wop o;
        wop_init(&o, 4, 5, k, precs[a], 0, precs[a], true);
        fill(&o, &s);
        lin_op_pack(&o);
        mpfr_set_exp(o.b[1], 3000);
        mpfr_set_exp(o.b[2], -8000);
        /* b[3] = -(x row 0 . w row 3), exactly: the sum's bits, at most
         * px + 24 + 160 of them over the row's binades */
        mpfr_inits2(precs[a] + 100, sum, prod, (mpfr_ptr)0);
        mpfr_set_zero(sum, 1);
        for (p = 0; p < k; p++) {
            mpfr_mul(prod, o.x[p], o.w[3 * k + p], MPFR_RNDN);
            assert_int_equal(mpfr_add(sum, sum, prod, MPFR_RNDN), 0);
        }
        mpfr_set_prec(o.b[3], mpfr_get_prec(sum));
        mpfr_neg(o.b[3], sum, MPFR_RNDN);
        mpfr_set_prec(o.b[4], (mpfr_prec_t)(64 * 300)); /* over BIAS_LIMBS */
        cic_test_mp_rand_full(o.b[4], &s, 1, 0);
        mpfr_clears(sum, prod, (mpfr_ptr)0);
        check(&o, 1 + a % 2, 0, 4 * 4, "biases", seed);
        lin_op_clear(&o);
    }
}

/* The cost test (mode AUTO) takes the op above 256 bits, where the row
 * kernel is some ten times dearer, and the outputs are the kernel's. */
static void test_auto_takes(void **state)
{
    static const mpfr_prec_t precs[] = {320, 512, 1024, 2048};
    int a;
    (void)state;
    for (a = 0; a < 4; a++) {
        uint64_t seed = 25000 + (uint64_t)a, s = seed;
        size_t mn = 48 * 48;
        cic_slice_stats st;
        mpfr_t *y, *yr;
        wop o;
        wop_init(&o, 48, 48, 256, precs[a], 0, 24, true);
        fill(&o, &s);
        for (size_t j = 0; j < o.n; j++)
            mpfr_set_flt(o.b[j], rand_w(&s), MPFR_RNDN);
        lin_op_pack(&o);
        y = cic_mpvec_create(mn, o.px);
        yr = cic_mpvec_create(mn, o.px);
        assert_true(y && yr);
        assert_int_equal(run_sliced(y, &o, CIC_SLICE_AUTO, 2, 0, NULL, &st), 0);
        assert_int_equal(st.ops, 1);
        assert_int_equal(st.sliced, mn);
        assert_int_equal(run_sliced(yr, &o, CIC_SLICE_NEVER, 2, 0, NULL, &st), 1);
        assert_int_equal(st.ops, 0);
        {
            mpfr_t *wrow = cic_mpvec_create(o.k, 24);
            cic_dot_scratch sc;
            assert_true(wrow && cic_dot_scratch_init(&sc, o.k, o.px) == 0);
            cic_mp_linear_rows(yr, (const mpfr_t *)o.x, o.m, NULL, o.views, (const mpfr_t *)o.b,
                               o.n, o.k, wrow, &sc);
            cic_dot_scratch_clear(&sc);
            cic_mpvec_destroy(wrow, o.k);
        }
        assert_int_equal(cic_test_first_diff_mp((const mpfr_t *)y, (const mpfr_t *)yr, mn), -1);
        cic_mpvec_destroy(y, mn);
        cic_mpvec_destroy(yr, mn);
        lin_op_clear(&o);
    }
}

/* The slices' storage an op leaves in its scratch is within the memory
 * estimate (cic_mp_slice_scratch) at 64 to 8192 bits, on the truth's rows
 * (x spread over up to 60 binades, float32 weights): small ops, and at
 * 2048 bits one whose slices pass the budget (blocks). */
static void test_scratch_bound(void **state)
{
    static const struct {
        size_t m, n, k;
        mpfr_prec_t prec;
    } cs[] = {{24, 40, 200, 64},  {24, 40, 200, 256},  {24, 40, 200, 512},
              {24, 40, 200, 1024}, {16, 24, 300, 2048}, {8, 16, 100, 4096},
              {4, 8, 64, 8192},    {200, 32, 1024, 2048}};
    size_t c;
    (void)state;
    for (c = 0; c < sizeof cs / sizeof cs[0]; c++) {
        uint64_t seed = 26000 + c, s = seed;
        size_t mn = cs[c].m * cs[c].n, est = cic_mp_slice_scratch(cs[c].m, cs[c].n, cs[c].k,
                                                                   (long)cs[c].prec);
        cic_slice_ws *ws = cic_mp_slice_ws_create();
        cic_slice_stats st;
        mpfr_t *y = cic_mpvec_create(mn, cs[c].prec);
        wop o;
        assert_true(ws && y);
        wop_init(&o, cs[c].m, cs[c].n, cs[c].k, cs[c].prec, 0, 24, false);
        fill(&o, &s);
        lin_op_pack(&o);
        assert_int_equal(run_sliced(y, &o, CIC_SLICE_ALWAYS, 2, 0, ws, &st), 0);
        if (cic_mp_slice_ws_bytes(ws) == 0 || cic_mp_slice_ws_bytes(ws) > est ||
            st.sliced != mn || (c == 7 && st.gemms < 2))
            fail_msg("%zu x %zu x %zu at %ld bits: the slices hold %zu bytes, the estimate %zu;"
                     " %llu outputs from slices, %llu dgemm calls", cs[c].m, cs[c].n, cs[c].k,
                     (long)cs[c].prec, cic_mp_slice_ws_bytes(ws), est,
                     (unsigned long long)st.sliced, (unsigned long long)st.gemms);
        cic_mpvec_destroy(y, mn);
        cic_mp_slice_ws_destroy(ws);
        lin_op_clear(&o);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_precisions),
        cmocka_unit_test(test_wide_spans),
        cmocka_unit_test(test_zeros_nonfinite),
        cmocka_unit_test(test_biases),
        cmocka_unit_test(test_auto_takes),
        cmocka_unit_test(test_scratch_bound),
    };
    int rc;
    openblas_set_num_threads(2);
    rc = cmocka_run_group_tests(tests, NULL, NULL);
    mpfr_free_cache();
    return rc;
}
