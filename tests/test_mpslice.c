/* SPDX-License-Identifier: MIT */
/* test_mpslice.c: the linear op through exact dgemm slices (mpslice.c),
 * bit for bit against the trivially correct reference, cic_mp_dot_mpfr
 * (exact MPFR products added by mpfr_sum, rounded once), and against
 * today's row kernel (cic_mp_linear_rows), which the engine ran before:
 * random shapes and seeds at 64, 128 and 192 bits (53 and 256 too),
 * float32 weights (packed straight from the floats, as the engine does),
 * doubles and MPFR weights, with and without bias, blocks forced by small
 * budgets, 1, 2 and 3 threads with the same bits; special values (signed
 * zeros, all-zero rows, float32 subnormals and FLT_MAX, exponents near
 * MPFR's and double's limits, spans the path must decline or still take
 * exactly, exact cancellation, ties and near-ties of the one rounding, the
 * largest slices at the edge of exactness); and the MPFR engine's outputs
 * on whole blocks with the path forced on and off. Every comparison
 * checks the path took the outputs (cic_mp_slice_stats), and the planted
 * faults of the commit messages (a slice dropped, the exactness bound
 * off by one bit) are caught here. */
#include "lin_op.h"

#include "base/base.h"
#include "base/mpslice.h"
#include "base/mpvec.h"
#include "engine/engine.h"
#include "engine/mp_ball.h"
#include "model/model.h"
#include "xform/xform.h"

#include <cblas.h>
#include <float.h>
#include <string.h>

/* One linear op's operands (lin_op.h), the bias at the weights' precision. */
static void op_init(lin_op *o, size_t m, size_t n, size_t k, mpfr_prec_t px, mpfr_prec_t pw,
                    bool f32, bool bias)
{
    lin_op_init(o, m, n, k, px, pw, f32, bias, f32 ? 24 : pw);
}

static bool same_bits(mpfr_srcptr a, mpfr_srcptr b)
{
    return (mpfr_nan_p(a) && mpfr_nan_p(b)) ||
           (mpfr_equal_p(a, b) && mpfr_signbit(a) == mpfr_signbit(b));
}

/* y through the slices at nt threads, mode ALWAYS, budget (0: default);
 * returns cic_mp_linear_sliced's code, *st the outputs it rounded. */
static int run_sliced(mpfr_t *y, const lin_op *o, int nt, size_t budget, cic_slice_stats *st)
{
    cic_rt rt;
    int rc;
    cic_rt_init(&rt, 0);
    rt.slice_mode = CIC_SLICE_ALWAYS;
    rt.slice_budget = budget;
    rc = cic_mp_linear_sliced(y, (const mpfr_t *)o->x, o->m,
                              o->f32 ? NULL : (const mpfr_t *)o->w, o->views,
                              o->bias ? (const mpfr_t *)o->b : NULL, o->n, o->k, nt, &rt, NULL);
    cic_mp_slice_stats(st, &rt);
    /* the products' count: m n k per call, none without a call, and every
     * output rounded from slices had at least its own row's products */
    assert_true((st->gemms == 0) == (st->gemm_fma == 0));
    assert_true(st->gemms > 0 || st->gemm_ns == 0);
    assert_int_equal(st->gemm_fma % o->k, 0);
    if (st->sliced == (uint64_t)o->m * o->n)
        assert_true(st->gemm_fma >= (uint64_t)o->m * o->n * o->k);
    return rc;
}

/* Today's row kernel on the same op. */
static void run_rows(mpfr_t *y, const lin_op *o, cic_dot_scratch *sc)
{
    mpfr_t *wrow = cic_mpvec_create(o->k, o->pw);
    assert_non_null(wrow);
    cic_mp_linear_rows(y, (const mpfr_t *)o->x, o->m, o->f32 ? NULL : (const mpfr_t *)o->w,
                       o->views, o->bias ? (const mpfr_t *)o->b : NULL, o->n, o->k, wrow, sc);
    cic_mpvec_destroy(wrow, o->k);
}

/* Every output of the sliced op at nt threads against the row kernel and,
 * when ref, against cic_mp_dot_mpfr (whose products overflow where MPFR's
 * exponent range ends: ref false there). The path must have rounded at
 * least min_sliced outputs itself. Fails with every input of the first
 * output that differs. Returns the dgemm calls (blocks) it made. */
static uint64_t check_op(const lin_op *o, int nt, size_t budget, bool ref, uint64_t min_sliced,
                     const char *label, uint64_t seed)
{
    size_t i, j, mn = o->m * o->n;
    mpfr_t *y = cic_mpvec_create(mn, o->px), *yr = cic_mpvec_create(mn, o->px), want;
    cic_dot_scratch sc;
    cic_slice_stats st;
    int rc;
    assert_true(y && yr);
    assert_int_equal(cic_dot_scratch_init(&sc, o->k, o->px > o->pw ? o->px : o->pw), 0);
    mpfr_init2(want, o->px);
    for (i = 0; i < mn; i++)
        mpfr_set_nan(y[i]);
    rc = run_sliced(y, o, nt, budget, &st);
    run_rows(yr, o, &sc);
    if (rc != 0 || st.sliced < min_sliced)
        fail_msg("%s (seed %llu): rc %d, %llu outputs from slices, %llu from the kernel, want %llu",
                 label, (unsigned long long)seed, rc, (unsigned long long)st.sliced,
                 (unsigned long long)st.kernel, (unsigned long long)min_sliced);
    for (i = 0; i < o->m; i++)
        for (j = 0; j < o->n; j++) {
            mpfr_ptr got = y[i * o->n + j];
            bool bad = !same_bits(got, yr[i * o->n + j]);
            if (ref) {
                cic_mp_dot_mpfr(want, (const mpfr_t *)o->x + i * o->k, 1,
                                (const mpfr_t *)o->w + j * o->k, 1, o->k,
                                o->bias ? o->b[j] : NULL, &sc);
                bad = bad || !same_bits(got, want);
            }
            if (!bad)
                continue;
            mpfr_fprintf(stderr,
                         "%s (seed %llu): m %zu n %zu k %zu px %ld pw %ld f32 %d bias %d "
                         "threads %d budget %zu: output (%zu, %zu): sliced %Ra, row kernel %Ra, "
                         "reference %Ra\n",
                         label, (unsigned long long)seed, o->m, o->n, o->k, (long)o->px,
                         (long)o->pw, (int)o->f32, (int)o->bias, nt, budget, i, j, got,
                         yr[i * o->n + j], want);
            fail_msg("%s: output (%zu, %zu) differs", label, i, j);
        }
    mpfr_clear(want);
    cic_dot_scratch_clear(&sc);
    cic_mpvec_destroy(y, mn);
    cic_mpvec_destroy(yr, mn);
    return st.gemms;
}

/* ---- random operands ---- */

/* A value at v's precision, every bit random, exponent in [e0 - span,
 * e0 + span], a random sign. */
static void rand_mp(mpfr_ptr v, uint64_t *s, mpfr_exp_t e0, int span)
{
    mpfr_prec_t p = mpfr_get_prec(v), have;
    mpfr_set_ui(v, 1, MPFR_RNDN);
    for (have = 1; have < p; have += 32) {
        /* 32 fresh bits at a time, exact: p bits at most in all */
        int b = p - have < 32 ? (int)(p - have) : 32;
        mpfr_mul_2ui(v, v, (unsigned long)b, MPFR_RNDN);
        mpfr_add_ui(v, v, (unsigned long)(cic_test_rand(s) >> (64 - b)), MPFR_RNDN);
    }
    if (span)
        e0 += (mpfr_exp_t)(cic_test_rand(s) % (uint64_t)(2 * span + 1)) - span;
    mpfr_set_exp(v, e0);
    if (cic_test_rand(s) & 1)
        mpfr_neg(v, v, MPFR_RNDN);
}

/* A float32 weight: mostly about N(0, 0.02) (its bits random), a few
 * zeros of either sign. */
static float rand_f32(uint64_t *s)
{
    uint64_t u = cic_test_rand(s);
    float v;
    if (u % 64 == 0)
        return (u >> 6) & 1 ? -0.0f : 0.0f;
    v = ldexpf((float)((u >> 8) & 0xffffff) / 0x1p24f + 0.5f, -(int)(u >> 40) % 14 - 5);
    return (u >> 7) & 1 ? -v : v;
}

/* x rows with exponents spread over spans of 2 to 40 binades, some zeros;
 * weights as o's kind; bias values near the outputs'. */
static void fill_random(lin_op *o, uint64_t *s)
{
    size_t i, p;
    for (i = 0; i < o->m; i++) {
        int span = (int)(cic_test_rand(s) % 40) + 2;
        for (p = 0; p < o->k; p++) {
            if (cic_test_rand(s) % 32 == 0)
                mpfr_set_zero(o->x[i * o->k + p], cic_test_rand(s) & 1 ? -1 : 1);
            else
                rand_mp(o->x[i * o->k + p], s, 0, span);
        }
    }
    for (p = 0; p < o->n * o->k; p++) {
        if (o->f32)
            o->wf[p] = rand_f32(s);
        else
            rand_mp(o->w[p], s, -6, 8);
    }
    for (i = 0; i < o->n; i++)
        rand_mp(o->b[i], s, 0, 6);
    lin_op_pack(o);
}

/* Random shapes at 53 to 256 bits, the four weight kinds, bias or none,
 * default and small budgets (several blocks of both operands), 1 to 3
 * threads. */
static void test_random(void **state)
{
    static const mpfr_prec_t precs[] = {64, 128, 192, 53, 256};
    int rep, reps = 40 * cic_test_multiplier();
    (void)state;
    for (rep = 0; rep < reps; rep++) {
        uint64_t seed = 1000 + (uint64_t)rep, s = seed;
        /* weights: float32 packed from floats, 24-bit MPFR, double, MPFR at px */
        int kind = cic_test_pick(&s, 4);
        mpfr_prec_t px = precs[rep % 5];
        size_t m = 1 + (size_t)cic_test_pick(&s, 40), n = 1 + (size_t)cic_test_pick(&s, 40);
        size_t k = 1 + (size_t)cic_test_pick(&s, rep % 7 == 6 ? 5000 : 600);
        size_t budget = rep % 3 ? 0 : 8 * k * (60 + (size_t)cic_test_pick(&s, 200));
        lin_op o;
        if (rep % 7 == 6)
            m = n = 3; /* long rows: small beta + gamma */
        op_init(&o, m, n, k, px, kind == 1 ? 24 : kind == 2 ? 53 : px, kind == 0,
                cic_test_pick(&s, 2) == 0);
        fill_random(&o, &s);
        check_op(&o, 1 + rep % 3, budget, true, 1, "random", seed);
        lin_op_clear(&o);
    }
}

/* ---- fixed cases ---- */

/* An op whose operands the caller sets: x rows at px, MPFR weights at pw
 * (f32: float32 ones, set in wf), every value +0 until set. */
static void op_blank(lin_op *o, size_t m, size_t n, size_t k, mpfr_prec_t px, mpfr_prec_t pw,
                     bool f32, bool bias)
{
    op_init(o, m, n, k, px, pw, f32, bias);
}

/* Row i of x: +-0 and nonzero entries in three patterns (all -0; half
 * zero; positive where weight row 3 is -0 and +0 where it is negative, so
 * that every product is -0), the rest random. */
static void zeros_x(lin_op *o, uint64_t *s)
{
    size_t i, p, k = o->k;
    for (i = 0; i < o->m; i++)
        for (p = 0; p < k; p++) {
            mpfr_ptr v = o->x[i * k + p];
            rand_mp(v, s, 0, 6);
            if (i == 0 || (i == 1 && p % 2) || (i == 2 && p % 2 == 0))
                mpfr_set_zero(v, i == 0 || p % 4 == 1 ? -1 : 1);
            if (i == 2)
                mpfr_abs(v, v, MPFR_RNDN);
        }
}

/* Weight rows: all +0, all -0, mixed signed zeros, -0 where x row 2 is
 * positive and negative where it is +0, random. Biases: -0 for row 3 (its
 * products with x row 2 sum to -0 then), +0, -0 and values. */
static void zeros_w(lin_op *o, uint64_t *s)
{
    size_t j, p, k = o->k;
    for (j = 0; j < o->n; j++)
        for (p = 0; p < k; p++) {
            float v = rand_f32(s);
            if (j == 0 || (j == 2 && p % 3 == 0))
                v = 0.0f;
            if (j == 1 || (j == 2 && p % 3 == 1) || (j == 3 && p % 2))
                v = -0.0f;
            if (j == 3 && p % 2 == 0)
                v = -fabsf(v) - 1.0f;
            o->wf[j * k + p] = v;
        }
    for (j = 0; j < o->n; j++)
        if (j % 3 == 2)
            rand_mp(o->b[j], s, 0, 4);
        else
            mpfr_set_zero(o->b[j], j % 3 || j == 3 ? -1 : 1);
}

/* Signed zeros and all-zero rows of x and of the weights, with and
 * without a bias: products all zero go to the row kernel (signed-zero
 * rules), the others are rounded from slices. */
static void test_zeros(void **state)
{
    static const mpfr_prec_t precs[] = {64, 128, 192};
    int a, bias, nt;
    (void)state;
    for (a = 0; a < 3; a++)
        for (bias = 0; bias < 2; bias++)
            for (nt = 1; nt <= 3; nt++) {
                uint64_t seed = 2000 + (uint64_t)(a * 10 + bias * 4 + nt), s = seed;
                lin_op o;
                op_blank(&o, 6, 7, 9, precs[a], 24, true, bias);
                zeros_x(&o, &s);
                zeros_w(&o, &s);
                lin_op_pack(&o);
                /* rows 3 .. 5 against weight rows 2 .. 6 at least */
                check_op(&o, nt, 0, true, 15, "signed zeros", seed);
                lin_op_clear(&o);
            }
}

/* Float32 weights at the ends of the format: subnormals (2^-149 and the
 * largest), the smallest normal, FLT_MAX-sized, in one row (a span of
 * some 300 bits, taken) and alone; x at 64 and 128 bits. */
static void test_f32_extremes(void **state)
{
    static const float ext[] = {0x1p-149f, -0x1.fffffcp-127f, 0x1p-126f, -0x1.fffffep127f,
                                0x1.8p100f, 1.0f, -0x1.234568p-140f};
    size_t j, p;
    int a;
    (void)state;
    for (a = 0; a < 2; a++) {
        uint64_t seed = 3000 + (uint64_t)a, s = seed;
        lin_op o;
        op_blank(&o, 5, 4, 29, a ? 128 : 64, 24, true, a == 1);
        fill_random(&o, &s);
        free(o.views);
        cic_mp_pack_clear(&o.all);
        for (j = 0; j < 4; j++)
            for (p = 0; p < 29; p++)
                if (j == 0 || (j == 1 && p % 4 == 0))
                    o.wf[j * 29 + p] = ext[(p + j) % 7];
                else if (j == 2)
                    o.wf[j * 29 + p] = p % 2 ? 0x1p-149f : -0x1p-148f; /* subnormals only */
        lin_op_pack(&o);
        check_op(&o, 2, 0, true, 20, "float32 extremes", seed);
        lin_op_clear(&o);
    }
}

/* x exponents far out: 10 to 50 binades inside MPFR's exponent limits,
 * against weights that keep the products inside them (both references),
 * against weights that push them out (those outputs go to cic_mp_dot, as in the row kernel,
 * whose fixed-point path rounds the exact sum at 128 bits and whose MPFR
 * path overflows at 512: only the kernel is compared), and beyond
 * double's range (the slices are integers: nothing to scale). */
static void test_exponents(void **state)
{
    mpfr_exp_t emax = mpfr_get_emax(), emin = mpfr_get_emin();
    static const struct {
        int xe; /* 0: near emax, 1: near emin, 2: 2^1100, 3: 2^-1100 */
        int we;
        bool in_range;
        mpfr_prec_t px;
    } cs[] = {{0, -300, true, 128}, {1, 300, true, 128}, {2, 0, true, 128}, {3, 0, true, 64},
              {0, 40, false, 128}, {1, -40, false, 128}, {0, 40, false, 512},
              {1, -40, false, 512}};
    size_t c, q;
    (void)state;
    for (c = 0; c < sizeof cs / sizeof cs[0]; c++) {
        uint64_t seed = 4000 + c, s = seed;
        mpfr_exp_t x0 = cs[c].xe == 0 ? emax - 30 : cs[c].xe == 1 ? emin + 30
                                                  : cs[c].xe == 2 ? 1100 : -1100;
        lin_op o;
        op_blank(&o, 4, 5, 33, cs[c].px, 53, false, c % 2 == 0);
        for (q = 0; q < o.m * o.k; q++)
            rand_mp(o.x[q], &s, x0, 20);
        for (q = 0; q < o.n * o.k; q++)
            rand_mp(o.w[q], &s, cs[c].we, 5);
        for (q = 0; q < o.n; q++)
            rand_mp(o.b[q], &s, x0 + cs[c].we, 3);
        lin_op_pack(&o);
        check_op(&o, 1 + (int)c % 3, 0, cs[c].in_range, cs[c].in_range ? 20 : 0, "exponents",
                 seed);
        lin_op_clear(&o);
    }
}

/* Spans: a row with an entry 200 binades below the others (taken,
 * exactly: some 17 slices), rows 20000 binades wide (over SPAN_MAX:
 * declined, the row kernel's), a weight row 900 binades wide (MPFR
 * weights; taken). */
static void test_spans(void **state)
{
    size_t q;
    int rep;
    (void)state;
    for (rep = 0; rep < 4; rep++) {
        uint64_t seed = 5000 + (uint64_t)rep, s = seed;
        lin_op o;
        op_blank(&o, 6, 5, 40, rep % 2 ? 128 : 64, rep < 2 ? 24 : 64, false, rep % 2);
        fill_random(&o, &s);
        mpfr_set_exp(o.x[0 * 40 + 3], -200);
        mpfr_set_exp(o.x[1 * 40 + 5], -20000); /* row 1 over SPAN_MAX: declined */
        mpfr_set_exp(o.x[2 * 40 + 7], 10000);
        mpfr_set_exp(o.x[2 * 40 + 9], -10000); /* row 2 too */
        if (rep >= 2)
            mpfr_set_exp(o.w[1 * 40 + 2], -900); /* weight row 1: 900 binades */
        free(o.views);
        cic_mp_pack_clear(&o.all);
        lin_op_pack(&o);
        for (q = 0; q < 2; q++) { /* the default budget; blocks of a few rows */
            size_t budget = !q ? 0 : 8 * 40 * (rep == 0 ? 25 : rep == 1 ? 40 : 250);
            uint64_t g = check_op(&o, 2, budget, true, 3 * 5, "spans", seed);
            assert_true(q == 0 || rep >= 2 ? g >= 1 : g >= 2); /* x in blocks */
        }
        lin_op_clear(&o);
    }
}

/* x[i, 0 .. k) = v[0 .. k), exactly. */
static void set_row(lin_op *o, size_t i, const double *v, const int *e)
{
    size_t p;
    for (p = 0; p < o->k; p++)
        mpfr_set_si_2exp(o->x[i * o->k + p], (long)v[p], e[p], MPFR_RNDN);
}

/* Ties and near-ties of the one rounding at px bits (u = 2^-px, ulp(1) =
 * 2u): 1 + 2u + u is halfway between two px-bit values (to even: up);
 * 1 + u is halfway too (to even: down); a far smaller term tips it
 * either way; the half-ulp term sits in the lowest x slice, in a low
 * weight slice (a weight of 2^-30 in a row whose top is 1), or beside
 * terms of 2^80 that cancel; negated too; and through the bias. */
static void test_ties(void **state)
{
    static const mpfr_prec_t precs[] = {64, 128, 192};
    int a, c;
    (void)state;
    for (a = 0; a < 3; a++)
        for (c = 0; c < 16; c++) {
            int P = (int)precs[a], sg = c % 2 ? -1 : 1, tip = c / 2 % 3; /* 0, up, down */
            double v[6] = {sg, sg, sg, sg * (tip == 1 ? 1 : -1), sg, -sg};
            int e[6] = {0, 1 - P, -P, -P - 150, 80, 80}, j;
            uint64_t seed = 6000 + (uint64_t)(a * 100 + c);
            lin_op o;
            op_blank(&o, 3, 3, 6, precs[a], 24, true, c >= 12);
            if (c / 6 == 1)
                e[1] = -P + 30; /* the tie's bit through a weight of 2^-30 */
            if (tip == 0)
                v[3] = 0;
            set_row(&o, 0, v, e);
            v[4] = v[5] = 0;
            set_row(&o, 1, v, e);
            e[1] = 0;
            v[1] = 0; /* row 2: 1 + u: a tie to even, down */
            set_row(&o, 2, v, e);
            for (j = 0; j < 18; j++) /* weights 1, but 2^-30 where the tie's bit needs it */
                o.wf[j] = j % 6 == 1 && c / 6 == 1 ? 0x1p-30f : 1.0f;
            for (j = 0; j < 3; j++)
                mpfr_set_si_2exp(o.b[j], c >= 12 ? sg : 0, 0, MPFR_RNDN);
            if (c >= 12) /* the bias carries the 1 */
                for (j = 0; j < 3; j++)
                    mpfr_set_zero(o.x[(size_t)j * 6], 1);
            lin_op_pack(&o);
            check_op(&o, 1 + c % 3, 0, true, 9, "ties", seed);
            lin_op_clear(&o);
        }
}

/* Exact cancellation: rows whose products cancel to 0 exactly (+0 from
 * the row kernel without a bias; the bias, rounded, with one), and rows
 * that cancel but for one bit far below. */
static void test_cancel(void **state)
{
    size_t i, p, j, k = 24;
    int bias;
    (void)state;
    for (bias = 0; bias < 2; bias++) {
        uint64_t seed = 7000 + (uint64_t)bias, s = seed;
        lin_op o;
        op_blank(&o, 4, 3, k, 128, 24, true, bias);
        fill_random(&o, &s);
        free(o.views);
        cic_mp_pack_clear(&o.all);
        for (j = 0; j < o.n; j++) /* weights repeat by halves */
            for (p = 0; p < k / 2; p++)
                o.wf[j * k + k / 2 + p] = o.wf[j * k + p];
        for (i = 0; i < o.m; i++)
            for (p = 0; p < k / 2; p++)
                mpfr_neg(o.x[i * k + k / 2 + p], o.x[i * k + p], MPFR_RNDN);
        mpfr_nextabove(o.x[1 * k + k - 1]); /* row 1: a last-bit remainder */
        lin_op_pack(&o);
        check_op(&o, 2, 0, true, bias ? 12 : 3, "cancellation", seed);
        lin_op_clear(&o);
    }
}

/* The largest slices at the edge of exactness: k entries of 2^21 - 1
 * against float32 weights of 2^24 - 1, all positive. Each output is the
 * integer k (2^21 - 1)(2^24 - 1), exact at 64 bits, so any rounding in
 * dgemm shows. At k = 255 one slice a side fits the bound; at 511 the
 * sum passes 2^53 (an odd one) and the split must take more slices. */
static void test_edge_of_exact(void **state)
{
    static const size_t ks[] = {255, 256, 257, 511, 1023, 4095};
    size_t c, q;
    (void)state;
    for (c = 0; c < sizeof ks / sizeof ks[0]; c++) {
        lin_op o;
        op_blank(&o, 3, 4, ks[c], 64, 24, true, c % 2);
        for (q = 0; q < o.m * o.k; q++)
            mpfr_set_ui(o.x[q], (1ul << 21) - 1, MPFR_RNDN);
        for (q = 0; q < o.n * o.k; q++)
            o.wf[q] = 16777215.0f;
        for (q = 0; q < o.n; q++)
            mpfr_set_ui(o.b[q], 1, MPFR_RNDN);
        lin_op_pack(&o);
        check_op(&o, 1, 0, true, 12, "edge of exactness", ks[c]);
        lin_op_clear(&o);
    }
}

/* One op at 1, 2, 3 and 8 threads (more than some blocks have rows), at
 * the default budget and at one of a few rows a block: the same bits
 * (each equal to the references). */
static void test_threads(void **state)
{
    static const size_t budgets[] = {0, 8 * 300 * 40, 8 * 300 * 26};
    size_t b;
    int nt;
    (void)state;
    for (b = 0; b < 3; b++)
        for (nt = 1; nt <= 8; nt += nt < 3 ? 1 : 5) {
            uint64_t seed = 8000 + b, s = seed;
            lin_op o;
            uint64_t g;
            op_init(&o, 37, 29, 300, 128, 24, true, b != 1);
            fill_random(&o, &s);
            g = check_op(&o, nt, budgets[b], true, 37 * 29 * 9 / 10, "threads", seed);
            assert_true(b == 0 ? g == 1 : g >= 4); /* one block, or several of both */
            lin_op_clear(&o);
        }
}

/* ---- the MPFR engine ---- */

static cic_model_cfg engine_cfg(bool llama)
{
    cic_model_cfg c;
    memset(&c, 0, sizeof c);
    c.block = llama ? CIC_BLOCK_RMSNORM : CIC_BLOCK_DIT;
    c.d_model = 64;
    c.heads = 4;
    c.kv_heads = llama ? 2 : 0;
    c.mlp_ratio = llama ? 2 : 4;
    c.d_mlp = llama ? 128 : 256;
    c.tokens = 24;
    c.samples = 2;
    c.layers = 1;
    c.eps = llama ? 1e-5 : 1e-6;
    c.causal = llama;
    c.act = llama ? CIC_ACT_SILU : CIC_ACT_GELU_TANH;
    c.d_out = 16;
    c.d_cond = llama ? 0 : 32;
    c.final_layer = !llama;
    c.seed = llama ? 7 : 5;
    c.dist = CIC_DIST_NORMAL;
    c.std = 0.05;
    c.rope = llama ? CIC_ROPE_HALF : CIC_ROPE_NONE;
    c.rope_theta = 10000.0;
    return c;
}

/* m's output and radii in a ball run at prec, engine threads nt, slices
 * in mode (m's context for the run); *ops: the linear ops the slices
 * took. */
static void engine_run(mpfr_t *y, double *rad, cic_model *m, mpfr_prec_t prec, int nt,
                       enum cic_slice_mode mode, uint64_t *ops)
{
    cic_run_opts o;
    cic_ball_out bo;
    cic_slice_stats st;
    cic_rt rt;
    memset(&o, 0, sizeof o);
    memset(&bo, 0, sizeof bo);
    bo.rad = rad;
    o.ball = &bo;
    cic_rt_init(&rt, 0);
    rt.mpfr_threads = nt;
    rt.slice_mode = mode;
    m->rt = &rt;
    assert_int_equal(cic_engine_mpfr_run(y, m, prec, false, &o), 0);
    assert_false(bo.failed);
    cic_mp_slice_stats(&st, &rt);
    *ops = st.ops;
    m->rt = NULL;
    cic_rt_clear(&rt);
}

/* The engine with the slices forced on, at 1, 2 and 3 threads, against
 * the row kernel alone: the same midpoints and radii, bit for bit. */
static void check_engine(cic_model *m, mpfr_prec_t prec, const char *label)
{
    size_t n = (size_t)m->cfg.samples * m->cfg.tokens * (size_t)cic_model_out_cols(m);
    mpfr_t *y0 = cic_mpvec_create(n, prec), *y = cic_mpvec_create(n, prec);
    double *r0 = cic_calloc(n, sizeof *r0), *r = cic_calloc(n, sizeof *r);
    uint64_t ops;
    long at;
    int nt;
    assert_true(y0 && y && r0 && r);
    engine_run(y0, r0, m, prec, 1, CIC_SLICE_NEVER, &ops);
    assert_int_equal(ops, 0);
    for (nt = 1; nt <= 3; nt++) {
        engine_run(y, r, m, prec, nt, CIC_SLICE_ALWAYS, &ops);
        at = cic_test_first_diff_mp((const mpfr_t *)y0, (const mpfr_t *)y, n);
        if (at >= 0 || memcmp(r0, r, n * sizeof *r) != 0 || ops < 4)
            fail_msg("%s at %ld bits, %d threads: %llu ops sliced; output %ld of %zu differs, "
                     "radii %s", label, (long)prec, nt, (unsigned long long)ops, at, n,
                     memcmp(r0, r, n * sizeof *r) ? "differ" : "equal");
    }
    cic_mpvec_destroy(y0, n);
    cic_mpvec_destroy(y, n);
    free(r0);
    free(r);
}

static void test_engine(void **state)
{
    int llama;
    (void)state;
    for (llama = 0; llama < 2; llama++) {
        cic_model_cfg c = engine_cfg(llama);
        cic_model *m = cic_model_create(&c, CIC_READOUT_HEAD);
        assert_non_null(m);
        check_engine(m, 64, llama ? "llama block" : "dit block");
        check_engine(m, 128, llama ? "llama block" : "dit block");
        cic_model_destroy(m);
    }
}

/* A DiT block rewritten by the per-sample fold: its linear weights are
 * made per sample (the slices go sample by sample). Plain runs (the fold
 * has no ball rule). */
static void test_engine_per_sample(void **state)
{
    cic_model_cfg c = engine_cfg(false);
    cic_model *orig = cic_model_create(&c, CIC_READOUT_HEAD), *m;
    cic_xform_spec x;
    cic_diag d;
    size_t n;
    mpfr_t *y0, *y;
    cic_slice_stats st;
    cic_rt never, always;
    (void)state;
    assert_non_null(orig);
    cic_rt_init(&never, 0);
    cic_rt_init(&always, 0);
    never.slice_mode = CIC_SLICE_NEVER;
    always.slice_mode = CIC_SLICE_ALWAYS;
    x = cic_test_xform_spec("fold", CIC_XFORM_PER_SAMPLE_FOLD, CIC_Q_HADAMARD, false);
    memset(&d, 0, sizeof d);
    m = cic_xform_apply(orig, &x, 128, &d);
    if (!m)
        fail_msg("cic_xform_apply: %s", d.msg);
    n = (size_t)m->cfg.samples * m->cfg.tokens * (size_t)cic_model_out_cols(m);
    y0 = cic_mpvec_create(n, 128);
    y = cic_mpvec_create(n, 128);
    assert_true(y0 && y);
    m->rt = &never;
    assert_int_equal(cic_engine_mpfr_run(y0, m, 128, false, NULL), 0);
    m->rt = &always;
    assert_int_equal(cic_engine_mpfr_run(y, m, 128, false, NULL), 0);
    cic_mp_slice_stats(&st, &never);
    assert_int_equal(st.ops, 0); /* the other context saw none */
    cic_mp_slice_stats(&st, &always);
    assert_true(st.ops >= 8); /* per sample: at least 4 linears x 2 samples */
    assert_int_equal(cic_test_first_diff_mp((const mpfr_t *)y0, (const mpfr_t *)y, n), -1);
    cic_mpvec_destroy(y0, n);
    cic_mpvec_destroy(y, n);
    cic_model_destroy(m);
    cic_model_destroy(orig);
}

/* An attention op alone, its input qkv (S samples of T tokens, 3 d
 * columns) held at prec (hp), every bit random. plant 1: value column 1 of
 * each key/value head is -0 for the first T / 2 tokens and positive after
 * (a causal row before T / 2 sums only -0 products: -0, where the masked
 * later products, +0, would make +0); plant 2: the last token's value
 * column 2 is NaN and a key entry of token T - 2 is +Inf (read only by
 * the rows that reach them). */
static cic_model *attn_only(int S, int T, int d, int H, int kv, bool causal, mpfr_prec_t prec,
                            int plant, uint64_t seed)
{
    cic_model_cfg c = engine_cfg(false);
    cic_model *m;
    int dh = d / H, j, s, g;
    cic_tensor *in;
    size_t i, n = (size_t)S * T * 3 * d;
    c.d_model = d;
    c.kv_heads = kv;
    m = cic_test_attn_model(c, S, T, d, H, kv, causal);
    in = &m->t[m->input];
    in->hp = cic_mpvec_create(n, prec);
    in->hp_prec = prec;
    assert_non_null(in->hp);
    for (i = 0; i < n; i++)
        cic_test_mp_rand_full(in->hp[i], &seed, 0, 3);
    for (s = 0; plant && s < S; s++)
        for (g = 0; g < kv; g++)
            for (j = 0; j < T; j++) {
                mpfr_t *row = in->hp + ((size_t)s * T + j) * 3 * d;
                if (plant == 1 && j < T / 2)
                    mpfr_set_zero(row[2 * d + g * dh + 1], -1);
                else if (plant == 1)
                    mpfr_abs(row[2 * d + g * dh + 1], row[2 * d + g * dh + 1], MPFR_RNDN);
                if (plant == 2 && j == T - 1)
                    mpfr_set_nan(row[2 * d + g * dh + 2]);
                if (plant == 2 && j == T - 2)
                    mpfr_set_inf(row[d + g * dh], 1);
            }
    return m;
}

/* m's output at prec, engine threads nt, slices in mode; the attention's
 * calls the slices took. */
static uint64_t attn_run(mpfr_t *y, cic_model *m, mpfr_prec_t prec, int nt,
                         enum cic_slice_mode mode)
{
    cic_slice_stats st;
    cic_rt rt;
    cic_rt_init(&rt, 0);
    rt.mpfr_threads = nt;
    rt.slice_mode = mode;
    m->rt = &rt;
    assert_int_equal(cic_engine_mpfr_run(y, m, prec, false, NULL), 0);
    cic_mp_slice_stats(&st, &rt);
    m->rt = NULL;
    cic_rt_clear(&rt);
    return st.ops;
}

/* Attention's scores and P V through the slices (engine_mpfr_attn.c),
 * against the packed dot products alone, bit for bit: causal or not,
 * grouped key/value heads, 1 and 3 threads, 128 and 320 bits, the planted
 * signed zeros, NaN and Inf. 24 tokens of d 16 in 2 samples: passes of 16
 * and 8 query rows, one job each (the scratch bound R d), so 2 x 4 jobs x
 * 2 calls, every one taken. */
static void test_engine_attn(void **state)
{
    static const struct {
        int H, kv;
        bool causal;
    } cs[] = {{2, 2, false}, {2, 1, true}, {4, 2, true}, {4, 4, false}};
    const mpfr_prec_t precs[] = {128, 320};
    int t, q, plant, nt;
    (void)state;
    for (t = 0; t < 4; t++)
        for (q = 0; q < 2; q++)
            for (plant = 0; plant < 3; plant++) {
                cic_model *m = attn_only(2, 24, 16, cs[t].H, cs[t].kv, cs[t].causal, precs[q],
                                         plant, 77 + (uint64_t)(10 * t + plant));
                size_t n = (size_t)2 * 24 * 16, i;
                int nans = 0;
                mpfr_t *y0 = cic_mpvec_create(n, precs[q]), *y = cic_mpvec_create(n, precs[q]);
                long at;
                assert_true(y0 && y);
                assert_int_equal(attn_run(y0, m, precs[q], 1, CIC_SLICE_NEVER), 0);
                for (i = 0; i < n; i++)
                    nans += mpfr_nan_p(y0[i]) != 0;
                /* the NaN and Inf reach every output of a row that reads them, no other */
                assert_true(plant == 2 ? nans > 0 && nans < (int)n : nans == 0);
                for (nt = 1; nt <= 3; nt += 2) {
                    uint64_t ops = attn_run(y, m, precs[q], nt, CIC_SLICE_ALWAYS);
                    for (at = 0; at < (long)n && same_bits(y0[at], y[at]); at++)
                        ;
                    if (at < (long)n || ops != (uint64_t)2 * 2 * 2 * cs[t].H)
                        fail_msg("attention, %d heads, %d kv, %s, %ld bits, plant %d, %d "
                                 "threads: %llu calls sliced; output %ld differs", cs[t].H,
                                 cs[t].kv, cs[t].causal ? "causal" : "not causal",
                                 (long)precs[q], plant, nt, (unsigned long long)ops, at);
                }
                cic_mpvec_destroy(y0, n);
                cic_mpvec_destroy(y, n);
                cic_model_destroy(m);
            }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_random),
        cmocka_unit_test(test_zeros),
        cmocka_unit_test(test_f32_extremes),
        cmocka_unit_test(test_exponents),
        cmocka_unit_test(test_spans),
        cmocka_unit_test(test_ties),
        cmocka_unit_test(test_cancel),
        cmocka_unit_test(test_edge_of_exact),
        cmocka_unit_test(test_threads),
        cmocka_unit_test(test_engine),
        cmocka_unit_test(test_engine_per_sample),
        cmocka_unit_test(test_engine_attn),
    };
    int rc;
    openblas_set_num_threads(2);
    rc = cmocka_run_group_tests(tests, NULL, NULL);
    mpfr_free_cache();
    return rc;
}
