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
#include "testutil.h"

#include "base/base.h"
#include "base/mpslice.h"
#include "base/mpvec.h"
#include "engine/engine.h"
#include "model/model.h"

#include <cblas.h>
#include <float.h>
#include <string.h>

/* One linear op's operands: x (m x k at px bits), the weights (n x k) as
 * MPFR values at pw bits and, when f32, as floats packed straight from
 * them (w NULL for the op, as the engine's float32 weights), the bias. */
typedef struct {
    size_t m, n, k;
    mpfr_prec_t px, pw;
    bool f32, bias;
    mpfr_t *x, *w, *b;
    float *wf;
    cic_mp_pack all;
    cic_mp_pack *views;
} lin_op;

static void op_init(lin_op *o, size_t m, size_t n, size_t k, mpfr_prec_t px, mpfr_prec_t pw,
                    bool f32, bool bias)
{
    memset(o, 0, sizeof *o);
    o->m = m;
    o->n = n;
    o->k = k;
    o->px = px;
    o->pw = f32 ? 24 : pw;
    o->f32 = f32;
    o->bias = bias;
    o->x = cic_mpvec_create(m * k, px);
    o->w = cic_mpvec_create(n * k, o->pw);
    o->b = cic_mpvec_create(n, o->pw);
    o->wf = cic_calloc(n * k, sizeof *o->wf);
    assert_true(o->x && o->w && o->b && o->wf);
}

/* The weights packed as the engine packs them (after they are set). */
static void op_pack(lin_op *o)
{
    size_t q;
    if (o->f32) {
        for (q = 0; q < o->n * o->k; q++)
            mpfr_set_flt(o->w[q], o->wf[q], MPFR_RNDN);
        assert_int_equal(cic_mp_pack_rows_f32(&o->all, &o->views, o->wf, o->n, o->k), 0);
    } else {
        assert_int_equal(cic_mp_pack_rows(&o->all, &o->views, (const mpfr_t *)o->w, o->n, o->k),
                         0);
    }
}

static void op_clear(lin_op *o)
{
    free(o->views);
    cic_mp_pack_clear(&o->all);
    cic_mpvec_destroy(o->x, o->m * o->k);
    cic_mpvec_destroy(o->w, o->n * o->k);
    cic_mpvec_destroy(o->b, o->n);
    free(o->wf);
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
    int rc;
    cic_mp_slice_set(CIC_SLICE_ALWAYS, budget);
    cic_mp_slice_stats_reset();
    rc = cic_mp_linear_sliced(y, (const mpfr_t *)o->x, o->m, o->f32 ? NULL : (const mpfr_t *)o->w,
                              o->views, o->bias ? (const mpfr_t *)o->b : NULL, o->n, o->k, nt, NULL);
    cic_mp_slice_stats(st);
    cic_mp_slice_set(CIC_SLICE_AUTO, 0);
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
 * output that differs. */
static void check_op(const lin_op *o, int nt, size_t budget, bool ref, uint64_t min_sliced,
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
                         "%s (seed %llu): m %zu n %zu k %zu px %ld pw %ld f32 %d bias %d threads %d "
                         "budget %zu: output (%zu, %zu): sliced %Ra, row kernel %Ra, reference %Ra\n",
                         label, (unsigned long long)seed, o->m, o->n, o->k, (long)o->px,
                         (long)o->pw, (int)o->f32, (int)o->bias, nt, budget, i, j, got,
                         yr[i * o->n + j], want);
            fail_msg("%s: output (%zu, %zu) differs", label, i, j);
        }
    mpfr_clear(want);
    cic_dot_scratch_clear(&sc);
    cic_mpvec_destroy(y, mn);
    cic_mpvec_destroy(yr, mn);
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
    mpfr_set_exp(v, e0 + (span ? (mpfr_exp_t)(cic_test_rand(s) % (uint64_t)(2 * span + 1)) - span : 0));
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
    op_pack(o);
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
        op_clear(&o);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_random),
    };
    int rc;
    openblas_set_num_threads(2);
    rc = cmocka_run_group_tests(tests, NULL, NULL);
    mpfr_free_cache();
    return rc;
}
