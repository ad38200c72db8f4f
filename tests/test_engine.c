/* SPDX-License-Identifier: MIT */
/* test_engine.c: src/engine: the float32 engine (OpenBLAS and fixed-order
 * matmuls) against the MPFR reference engine on small random blocks, the
 * reproducibility and sample independence both engines promise, the
 * per-site FLOP counts they book, the check of a graph every engine runs on
 * entry (cic_model_check refuses a malformed graph with a message naming
 * the op and the tensor, and no engine walks it), every engine's fast
 * Hadamard op equal to the dense Q of its base order (automatic or forced),
 * and the engine table.
 *
 * Models are built by hand from a cic_model_cfg drawn from a test seed (the
 * seed and the whole shape are printed on failure). Relative norms are
 * computed here in MPFR, independently of src/metric. The f32 bound is
 * derived below (before f32_bound); a planted fault shows it has teeth, and
 * a nonzero-error check shows the f32 engines really ran in f32. */
#include "testutil.h"

#include "base/base.h"
#include "base/mpvec.h"
#include "base/rng.h"
#include "engine/engine.h"
#include "engine/mp_ball.h"
#include "model/model.h"
#include "xform/qmat.h"

#include <math.h>
#include <mpfr.h>
#include <string.h>

/* ---- helpers ---- */

#define U32 0x1p-24 /* unit roundoff of binary32 */

typedef struct {
    uint64_t seed;
    cic_model_cfg cfg;
    enum cic_readout readout;
} shape;

/* A random small shape: d in {8, 16, 24}, heads in {1, 2, 4}, tokens in
 * {1, 3, 5}, samples {1, 2}, layers {1, 2}, both blocks, causal on/off, all
 * activations, head and residual readouts; a quarter with outlier channels. */
static shape shape_draw(uint64_t seed)
{
    static const int ds[] = {8, 16, 24}, hs[] = {1, 2, 4}, ns[] = {1, 3, 5};
    static const double ratios[] = {2, 4};
    uint64_t s = seed * 0x2545f4914f6cdd1dULL + 1;
    shape sh;
    cic_model_cfg *c = &sh.cfg;
    memset(&sh, 0, sizeof sh);
    sh.seed = seed;
    c->block = cic_test_pick(&s, 2) ? CIC_BLOCK_RMSNORM : CIC_BLOCK_PRELN;
    c->d_model = ds[cic_test_pick(&s, 3)];
    c->heads = hs[cic_test_pick(&s, 3)];
    c->mlp_ratio = ratios[cic_test_pick(&s, 2)];
    c->d_mlp = (int)(c->mlp_ratio * c->d_model);
    c->tokens = ns[cic_test_pick(&s, 3)];
    c->samples = 1 + cic_test_pick(&s, 2);
    c->layers = 1 + cic_test_pick(&s, 2);
    c->eps = 1e-5;
    c->causal = cic_test_pick(&s, 2);
    c->act = (enum cic_act)cic_test_pick(&s, CIC_ACT_COUNT);
    c->d_out = cic_test_pick(&s, 2) ? c->d_model : 5;
    c->seed = seed;
    c->dist = cic_test_pick(&s, 4) ? CIC_DIST_NORMAL : CIC_DIST_UNIFORM;
    c->std = 0.1;
    if (cic_test_pick(&s, 4) == 0) {
        c->outlier_channels = 2;
        c->outlier_scale = 4.0;
    }
    sh.readout = cic_test_pick(&s, 2) ? CIC_READOUT_HEAD : CIC_READOUT_RESIDUAL;
    return sh;
}

static const char *shape_str(char *buf, size_t cap, const shape *sh)
{
    const cic_model_cfg *c = &sh->cfg;
    snprintf(buf, cap,
             "seed %llu: %s d %d heads %d m %d tokens %d samples %d layers %d "
             "causal %d act %s d_out %d dist %s outliers %d x %g readout %s",
             (unsigned long long)sh->seed, CIC_BLOCK_NAME[c->block], c->d_model,
             c->heads, c->d_mlp, c->tokens, c->samples, c->layers, (int)c->causal,
             CIC_ACT_NAME[c->act], c->d_out, CIC_DIST_NAME[c->dist],
             c->outlier_channels, c->outlier_scale, CIC_READOUT_NAME[sh->readout]);
    return buf;
}

/* ||y - x||_2 / ||x||_2 in MPFR: y - x exact at prec(x) + 160 bits (y is
 * a float, x at most 192 bits and within a few binades of y), the sums of
 * squares at that precision, one rounding to double at the end. */
static double rel_norm2_mp(const float *y, const mpfr_t *x, size_t n)
{
    mpfr_t d, num, den, t;
    size_t i;
    double r;
    mpfr_inits2(512, d, num, den, t, (mpfr_ptr)0);
    mpfr_set_zero(num, 1);
    mpfr_set_zero(den, 1);
    for (i = 0; i < n; i++) {
        mpfr_set_flt(t, y[i], MPFR_RNDN);
        mpfr_sub(d, t, x[i], MPFR_RNDN);
        mpfr_fma(num, d, d, num, MPFR_RNDN);
        mpfr_fma(den, x[i], x[i], den, MPFR_RNDN);
    }
    mpfr_div(num, num, den, MPFR_RNDN);
    mpfr_sqrt(num, num, MPFR_RNDN);
    r = mpfr_get_d(num, MPFR_RNDN);
    mpfr_clears(d, num, den, t, (mpfr_ptr)0);
    return r;
}

/* The same between two MPFR vectors. */
static double rel_norm2_mpmp(const mpfr_t *y, const mpfr_t *x, size_t n)
{
    mpfr_t d, num, den;
    size_t i;
    double r;
    mpfr_inits2(512, d, num, den, (mpfr_ptr)0);
    mpfr_set_zero(num, 1);
    mpfr_set_zero(den, 1);
    for (i = 0; i < n; i++) {
        mpfr_sub(d, y[i], x[i], MPFR_RNDN);
        mpfr_fma(num, d, d, num, MPFR_RNDN);
        mpfr_fma(den, x[i], x[i], den, MPFR_RNDN);
    }
    mpfr_div(num, num, den, MPFR_RNDN);
    mpfr_sqrt(num, num, MPFR_RNDN);
    r = mpfr_get_d(num, MPFR_RNDN);
    mpfr_clears(d, num, den, (mpfr_ptr)0);
    return r;
}

/* ||a - b|| / ||b|| for two float vectors, in double (exact differences,
 * the norms to double accuracy: plenty for a comparison at 1e-6). */
static double rel_norm2_ff(const float *a, const float *b, size_t n)
{
    double num = 0, den = 0;
    size_t i;
    for (i = 0; i < n; i++) {
        double d = (double)a[i] - (double)b[i];
        num += d * d;
        den += (double)b[i] * b[i];
    }
    return sqrt(num / den);
}

/* Index of the first differing float bit pattern, or -1. */
static long first_diff_f32(const float *a, const float *b, size_t n)
{
    size_t i;
    for (i = 0; i < n; i++)
        if (cic_test_f32_bits(a[i]) != cic_test_f32_bits(b[i]))
            return (long)i;
    return -1;
}

typedef struct {
    cic_model *m;
    size_t rows, cols, n; /* output rows (all samples) x cols */
} built;

static built build(const shape *sh)
{
    built b;
    char buf[512];
    b.m = cic_model_create(&sh->cfg, sh->readout);
    if (!b.m)
        fail_msg("cic_model_create failed: %s", shape_str(buf, sizeof buf, sh));
    b.rows = (size_t)sh->cfg.tokens * sh->cfg.samples;
    b.cols = (size_t)cic_model_out_cols(b.m);
    b.n = b.rows * b.cols;
    return b;
}

static float *run_f32(const built *b, enum cic_matmul mm, const cic_run_opts *o)
{
    float *y = cic_calloc(b->n, sizeof *y);
    assert_non_null(y);
    assert_int_equal(cic_engine_f32_run(y, b->m, mm, o), 0);
    return y;
}

static mpfr_t *run_mp(const built *b, mpfr_prec_t prec, const cic_run_opts *o)
{
    mpfr_t *x = cic_mpvec_create(b->n, prec);
    assert_non_null(x);
    assert_int_equal(cic_engine_mpfr_run(x, b->m, prec, false, o), 0);
    return x;
}

/* ---- the forward error bounds ----
 *
 * u = 2^-24; L' = L blocks, plus 1 for a head readout (final norm + head is
 * about a block's worth of the same kinds of op); d, m, N as in DESIGN.md.
 *
 * Every f32 op is a dot product of length k (linear: k = d or m; scores:
 * d/h; P V: N; the norm's mean and variance: d; the softmax denominator:
 * N) or an elementwise op with an error of a few u (sub, div, sqrt;
 * expf/erff/tanhf are within ~2 ulp in glibc). Along one block the dot
 * lengths are d + d (norm1 mean, variance) + d (qkv) + d/h (scores) + N
 * (softmax sum) + N (P V) + d (proj) + 2d (norm2) + d (fc1; gate and up
 * run side by side) + m (fc2) <= 8d + m + 2N; with m >= 2d (mlp_ratio >= 2
 * here) this is <= 6 (d + m + N) with at least 5m + 4N - 2d >= 64 to
 * spare for the ~30 elementwise roundings of a block.
 *
 * 1. Deterministic, first order (the classic form). A recursive dot product
 *    has |fl(s) - s| <= gamma_k sum |x_i w_i|, gamma_k = k u / (1 - k u);
 *    summed along the path a block adds at most 6 (d + m + N) u of
 *    relative error, carried to the output with amplification ~1: the norms
 *    are scale invariant, the branches have ||W|| ~ 0.1 (sqrt(k) +
 *    sqrt(n)) <= 2 for these shapes and are added to a residual stream of
 *    comparable size. So
 *        BOUND_DET = C_DET * L' * (d + m + N) * u,  C_DET = 6.
 *    It ignores the cancellation factor sum |x_i w_i| / |sum x_i w_i|
 *    (~ (2/pi) sqrt(k) for zero-mean weights), which a strictly worst-case
 *    bound would need on top; it is still pessimistic by orders of magnitude
 *    in practice (ratio printed), because it adds errors that cancel.
 *
 * 2. Probabilistic (Higham & Mary, SISC 2019): rounding errors modelled as
 *    independent, zero-mean, |delta| <= u (variance <= u^2 / 3). A dot of
 *    length k then contributes relative error variance about k u^2 / 3
 *    (partial sums of zero-mean data do not exceed the result's scale on
 *    average), so the path of a block contributes <= 6 (d + m + N) u^2 / 3
 *    = 2 (d + m + N) u^2, the blocks add in variance, and a lambda-sigma
 *    bound is
 *        BOUND_PROB = LAMBDA * sqrt(2 * L' * (d + m + N)) * u,  LAMBDA = 3.
 *    This is the check with teeth: it is the tight one, and is what the
 *    test asserts first; BOUND_PROB <= BOUND_DET for every shape. */
#define C_DET 6.0
#define LAMBDA 3.0

static int lprime(const shape *sh)
{
    return sh->cfg.layers + (sh->readout == CIC_READOUT_HEAD ? 1 : 0);
}

static double f32_bound_det(const shape *sh)
{
    const cic_model_cfg *c = &sh->cfg;
    return C_DET * lprime(sh) * (c->d_model + c->d_mlp + c->tokens) * U32;
}

static double f32_bound(const shape *sh)
{
    const cic_model_cfg *c = &sh->cfg;
    return LAMBDA * sqrt(2.0 * lprime(sh) * (c->d_model + c->d_mlp + c->tokens)) * U32;
}

static int n_shapes(void) { return 40 * cic_test_multiplier(); }

/* ---- tests ---- */

/* Both f32 engines against MPFR at 128 bits, within the derived bound and
 * strictly above zero error; the OpenBLAS and fixed-order engines within
 * twice the bound of each other (triangle inequality); the fixed-order
 * engine bit-reproducible across runs. */
static void test_f32_vs_mpfr(void **state)
{
    int k, mm;
    double worst[CIC_MATMUL_COUNT] = {0, 0}, worst_gain = 0, worst_det = 0;
    double worst_u = 0;
    char buf[512];
    (void)state;
    for (k = 0; k < n_shapes(); k++) {
        shape sh = shape_draw(1000 + (uint64_t)k);
        built b = build(&sh);
        double bound = f32_bound(&sh), rounded_err;
        mpfr_t *x = run_mp(&b, 128, NULL);
        float *y[CIC_MATMUL_COUNT], *yr = cic_calloc(b.n, sizeof *yr), *y2;
        long diff;
        assert_non_null(yr);
        /* the error of rounding the truth alone: the f32 engines must do
         * worse than that somewhere, else they did not run in f32 */
        cic_mpvec_get_f32(yr, (const mpfr_t *)x, b.n);
        rounded_err = rel_norm2_mp(yr, (const mpfr_t *)x, b.n);
        for (mm = 0; mm < CIC_MATMUL_COUNT; mm++) {
            double e;
            y[mm] = run_f32(&b, (enum cic_matmul)mm, NULL);
            e = rel_norm2_mp(y[mm], (const mpfr_t *)x, b.n);
            if (!(e <= bound))
                fail_msg("%s vs mpfr-128: rel_norm2 %.3g > bound %.3g (%s); "
                         "y[0] = %.9g, x[0] = %.9g",
                         CIC_ENGINE_F32_NAME[mm], e, bound,
                         shape_str(buf, sizeof buf, &sh), (double)y[mm][0],
                         mpfr_get_d(x[0], MPFR_RNDN));
            if (!(e > 0))
                fail_msg("%s vs mpfr-128: zero error: the f32 engine did not "
                         "run in f32? (%s)",
                         CIC_ENGINE_F32_NAME[mm], shape_str(buf, sizeof buf, &sh));
            if (!(e <= f32_bound_det(&sh)))
                fail_msg("%s vs mpfr-128: rel_norm2 %.3g > deterministic bound "
                         "%.3g (%s)", CIC_ENGINE_F32_NAME[mm], e,
                         f32_bound_det(&sh), shape_str(buf, sizeof buf, &sh));
            if (e / bound > worst[mm])
                worst[mm] = e / bound;
            if (e / f32_bound_det(&sh) > worst_det)
                worst_det = e / f32_bound_det(&sh);
            if (e / U32 > worst_u)
                worst_u = e / U32;
            if (rounded_err > 0 && e / rounded_err > worst_gain)
                worst_gain = e / rounded_err;
        }
        {
            double e = rel_norm2_ff(y[CIC_MATMUL_OPENBLAS], y[CIC_MATMUL_FIXED], b.n);
            if (!(e <= 2 * bound))
                fail_msg("openblas vs fixed-order: %.3g > 2 * bound %.3g (%s)",
                         e, 2 * bound, shape_str(buf, sizeof buf, &sh));
        }
        y2 = run_f32(&b, CIC_MATMUL_FIXED, NULL);
        diff = first_diff_f32(y2, y[CIC_MATMUL_FIXED], b.n);
        if (diff >= 0)
            fail_msg("fixed-order not reproducible at %ld: %a vs %a (%s)", diff,
                     (double)y2[diff], (double)y[CIC_MATMUL_FIXED][diff],
                     shape_str(buf, sizeof buf, &sh));
        free(y2);
        free(y[0]);
        free(y[1]);
        free(yr);
        cic_mpvec_destroy(x, b.n);
        cic_model_destroy(b.m);
    }
    printf("f32 vs mpfr-128 over %d shapes: worst rel_norm2 %.3g u; "
           "worst / BOUND_PROB: openblas %.3g, fixed-order %.3g; worst / "
           "BOUND_DET %.3g; worst / rounding-only error %.3g\n",
           n_shapes(), worst_u, worst[0], worst[1], worst_det, worst_gain);
    /* the f32 engines must accumulate more than one final rounding */
    assert_true(worst_gain > 2);
}

/* Plant a fault: scaling the head weights by 1 + 2^-16 (a change of ~250
 * u, far below anything visible by eye) after the truth was computed must
 * push both f32 engines past BOUND_PROB; unperturbed they are within it. */
static void test_bound_catches_fault(void **state)
{
    shape sh;
    built b;
    mpfr_t *x;
    cic_model_cfg *c = &sh.cfg;
    int id, mm;
    size_t i, n;
    char buf[512];
    (void)state;
    memset(&sh, 0, sizeof sh);
    sh.seed = 77;
    sh.readout = CIC_READOUT_HEAD;
    c->block = CIC_BLOCK_RMSNORM;
    c->d_model = 16;
    c->heads = 2;
    c->mlp_ratio = 4;
    c->d_mlp = 64;
    c->tokens = 3;
    c->samples = 1;
    c->layers = 1;
    c->eps = 1e-5;
    c->causal = true;
    c->act = CIC_ACT_SILU;
    c->d_out = 16;
    c->seed = 77;
    c->dist = CIC_DIST_NORMAL;
    c->std = 0.1;
    b = build(&sh);
    x = run_mp(&b, 128, NULL);
    id = cic_model_tensor_find(b.m, "lm_head.weight");
    assert_true(id >= 0);
    for (mm = 0; mm < CIC_MATMUL_COUNT; mm++) {
        float *y = run_f32(&b, (enum cic_matmul)mm, NULL);
        double e = rel_norm2_mp(y, (const mpfr_t *)x, b.n);
        if (!(e > 0 && e <= f32_bound(&sh)))
            fail_msg("%s unperturbed: %.3g, bound %.3g (%s)",
                     CIC_ENGINE_F32_NAME[mm], e, f32_bound(&sh),
                     shape_str(buf, sizeof buf, &sh));
        free(y);
    }
    n = (size_t)b.m->t[id].rows * b.m->t[id].cols;
    for (i = 0; i < n; i++)
        b.m->t[id].f32[i] *= 1.0f + 0x1p-16f;
    for (mm = 0; mm < CIC_MATMUL_COUNT; mm++) {
        float *y = run_f32(&b, (enum cic_matmul)mm, NULL);
        double e = rel_norm2_mp(y, (const mpfr_t *)x, b.n);
        if (!(e > f32_bound(&sh)))
            fail_msg("%s with the planted fault: %.3g not above bound %.3g (%s)",
                     CIC_ENGINE_F32_NAME[mm], e, f32_bound(&sh),
                     shape_str(buf, sizeof buf, &sh));
        printf("planted fault, %s: rel_norm2 %.3g = %.3g x BOUND_PROB\n",
               CIC_ENGINE_F32_NAME[mm], e, e / f32_bound(&sh));
        free(y);
    }
    cic_mpvec_destroy(x, b.n);
    cic_model_destroy(b.m);
}

/* MPFR: bit-identical reruns, samples independent, 128 vs 192 bits. */
static void test_mpfr_engine(void **state)
{
    int k;
    double worst = 0;
    char buf[512];
    (void)state;
    for (k = 0; k < n_shapes() / 2; k++) {
        shape sh = shape_draw(5000 + (uint64_t)k);
        built b;
        mpfr_t *x, *x2, *x3;
        long diff;
        int s;
        double e, lim;
        if (sh.cfg.samples < 2) /* force two samples for the split check */
            sh.cfg.samples = 2;
        b = build(&sh);
        x = run_mp(&b, 128, NULL);
        x2 = run_mp(&b, 128, NULL);
        diff = cic_test_first_diff_mp((const mpfr_t *)x, (const mpfr_t *)x2, b.n);
        if (diff >= 0)
            fail_msg("mpfr rerun differs at %ld (%s)", diff,
                     shape_str(buf, sizeof buf, &sh));
        cic_mpvec_destroy(x2, b.n);
        /* one sample at a time gives the same bits as the whole run */
        for (s = 0; s < sh.cfg.samples; s++) {
            cic_run_opts o;
            size_t per = b.n / (size_t)sh.cfg.samples;
            mpfr_t *xs = cic_mpvec_create(per, 128);
            float *ys, *yall;
            memset(&o, 0, sizeof o);
            o.sample0 = s;
            o.n_samples = 1;
            assert_non_null(xs);
            assert_int_equal(cic_engine_mpfr_run(xs, b.m, 128, false, &o), 0);
            diff = cic_test_first_diff_mp((const mpfr_t *)xs, (const mpfr_t *)x + per * s, per);
            if (diff >= 0)
                fail_msg("mpfr sample %d alone differs at %ld (%s)", s, diff,
                         shape_str(buf, sizeof buf, &sh));
            /* the fixed-order f32 engine too (row by row, fixed order) */
            ys = cic_calloc(per, sizeof *ys);
            assert_non_null(ys);
            assert_int_equal(cic_engine_f32_run(ys, b.m, CIC_MATMUL_FIXED, &o), 0);
            yall = run_f32(&b, CIC_MATMUL_FIXED, NULL);
            diff = first_diff_f32(ys, yall + per * s, per);
            if (diff >= 0)
                fail_msg("fixed-order sample %d alone differs at %ld (%s)", s,
                         diff, shape_str(buf, sizeof buf, &sh));
            free(ys);
            free(yall);
            cic_mpvec_destroy(xs, per);
        }
        /* 128 vs 192 bits: the MPFR engine rounds once per op, dot
         * products included, so a block path has about 40 roundings of
         * relative size <= 2^-128 (norm: 10, attention: 7, act: <= 8, the
         * linears and adds: 1 each); as in f32_bound, lambda = 3 and the
         * roundings add in variance, over L + 1 (readout) stages:
         * 3 sqrt(40 (L + 1)) 2^-128, i.e. about 2^-123 (the 2^-192 run's
         * own error is negligible). */
        x3 = run_mp(&b, 192, NULL);
        e = rel_norm2_mpmp((const mpfr_t *)x, (const mpfr_t *)x3, b.n);
        lim = LAMBDA * sqrt(40.0 * (sh.cfg.layers + 1)) * 0x1p-128;
        if (!(e <= lim))
            fail_msg("mpfr 128 vs 192: rel_norm2 %.3g > %.3g (%s)", e, lim,
                     shape_str(buf, sizeof buf, &sh));
        if (!(e > 0))
            fail_msg("mpfr 128 vs 192 identical: precision not used? (%s)",
                     shape_str(buf, sizeof buf, &sh));
        if (e / lim > worst)
            worst = e / lim;
        cic_mpvec_destroy(x3, b.n);
        cic_mpvec_destroy(x, b.n);
        cic_model_destroy(b.m);
    }
    printf("mpfr 128 vs 192: worst rel_norm2 / (3 sqrt(40 (L+1)) 2^-128) = %.3g\n", worst);
}

/* FLOP counts: identical per site in all three engines, positive where the
 * block has work, zero elsewhere, additive over runs and over samples, and
 * equal to a hand count for the norm and MLP sites. */
static void test_flops(void **state)
{
    int k, i;
    char buf[512];
    (void)state;
    for (k = 0; k < n_shapes() / 2; k++) {
        shape sh = shape_draw(9000 + (uint64_t)k);
        const cic_model_cfg *c = &sh.cfg;
        built b = build(&sh);
        cic_flop_count fc[3], half;
        cic_run_opts o;
        mpfr_t *x;
        double R = (double)b.rows, d = c->d_model, m = c->d_mlp, L = c->layers;
        double want_norm, want_mlp, af, mlp;
        memset(fc, 0, sizeof fc);
        memset(&o, 0, sizeof o);
        o.flops = &fc[0];
        free(run_f32(&b, CIC_MATMUL_OPENBLAS, &o));
        o.flops = &fc[1];
        free(run_f32(&b, CIC_MATMUL_FIXED, &o));
        o.flops = &fc[2];
        x = run_mp(&b, 128, &o);
        cic_mpvec_destroy(x, b.n);
        for (i = 0; i < CIC_SITE_COUNT; i++) {
            if (fc[0].site[i] != fc[2].site[i] || fc[1].site[i] != fc[2].site[i])
                fail_msg("site %s: openblas %.17g fixed %.17g mpfr %.17g (%s)",
                         CIC_SITE_NAME[i], fc[0].site[i], fc[1].site[i],
                         fc[2].site[i], shape_str(buf, sizeof buf, &sh));
        }
        assert_true(fc[2].site[CIC_SITE_NORM1] > 0);
        assert_true(fc[2].site[CIC_SITE_ATTN] > 0);
        assert_true(fc[2].site[CIC_SITE_NORM2] > 0);
        assert_true(fc[2].site[CIC_SITE_MLP] > 0);
        /* no online transform, no adaLN modulation in these blocks */
        assert_true(fc[2].site[CIC_SITE_INPUT] == 0);
        assert_true(fc[2].site[CIC_SITE_MOD] == 0);
        if (sh.readout == CIC_READOUT_HEAD)
            assert_true(fc[2].site[CIC_SITE_FINAL] > 0);
        else
            assert_true(fc[2].site[CIC_SITE_FINAL] == 0);
        {
            double tot = 0;
            for (i = 0; i < CIC_SITE_COUNT; i++)
                tot += fc[2].site[i];
            cic_assert_close(cic_flop_total(&fc[2]), tot, 0, 0);
        }
        /* hand counts (engine.h convention) */
        af = c->act == CIC_ACT_GELU ? 5 : c->act == CIC_ACT_GELU_TANH ? 9
           : c->act == CIC_ACT_RELU ? 1 : c->act == CIC_ACT_QUICK_GELU ? 4 : 3;
        if (c->block == CIC_BLOCK_PRELN) {
            /* LayerNorm with g and b: 2d+1 (mean, center) + 3d + 4 + d + d */
            want_norm = L * R * (7 * d + 5);
            /* fc1 + bias, act, fc2 + bias, residual add */
            want_mlp = L * R * (2 * m * d + m + af * m + 2 * d * m + d + d);
        } else {
            /* RMSNorm with g: 3d + 4 + d */
            want_norm = L * R * (4 * d + 4);
            /* gate, up, glu (act + mul), down, residual add */
            want_mlp = L * R * (2 * 2 * m * d + (af + 1) * m + 2 * d * m + d);
        }
        /* the residual add may be booked at mlp or at gate2 */
        mlp = fc[2].site[CIC_SITE_MLP] + fc[2].site[CIC_SITE_GATE2];
        if (fc[2].site[CIC_SITE_NORM1] != want_norm ||
            fc[2].site[CIC_SITE_NORM2] != want_norm || mlp != want_mlp)
            fail_msg("hand count: norm1 %.17g norm2 %.17g (want %.17g), mlp "
                     "+ gate2 %.17g (want %.17g) (%s)",
                     fc[2].site[CIC_SITE_NORM1], fc[2].site[CIC_SITE_NORM2],
                     want_norm, mlp, want_mlp, shape_str(buf, sizeof buf, &sh));
        /* counts add up: the samples run one by one sum to the whole run */
        if (c->samples == 2) {
            memset(&half, 0, sizeof half);
            o.flops = &half;
            o.n_samples = 1;
            for (o.sample0 = 0; o.sample0 < 2; o.sample0++)
                free(run_f32(&b, CIC_MATMUL_FIXED, &o));
            for (i = 0; i < CIC_SITE_COUNT; i++)
                if (half.site[i] != fc[2].site[i])
                    fail_msg("site %s: per-sample sum %.17g, whole %.17g (%s)",
                             CIC_SITE_NAME[i], half.site[i], fc[2].site[i],
                             shape_str(buf, sizeof buf, &sh));
        }
        cic_model_destroy(b.m);
    }
}

/* ---- the float64 engine ----
 *
 * The f64 engine runs the f32 engine's graph and formulas in double, so the
 * derivation of f32_bound carries over with u = 2^-53 (glibc's exp, erf and
 * tanh in double are within ~1-2 ulp too, and the literals 0.5, 0.044715,
 * sqrt(2/pi), 1/sqrt(2) are each within u of the values MPFR uses):
 *     BOUND64 = LAMBDA * sqrt(2 * L' * (d + m + N [+ d_cond])) * 2^-53,
 * with d_cond added for dit blocks (the adaLN modulation linears are dots
 * of length d_cond on the path, as in test_adaln.c) and L' = L + 1 for a
 * head readout (dit: final_layer). The MPFR reference at 128 bits is off by
 * ~2^-123, negligible here. Weights of an untransformed model are float32
 * values, exact in double and at 128 bits, so both engines read the same
 * weights. */
#include "xform/xform.h" /* cic_xform_apply: the rounded_weights test */

#define U64 0x1p-53 /* unit roundoff of binary64 */

static double f64_bound(const shape *sh)
{
    const cic_model_cfg *c = &sh->cfg;
    int lp = c->block == CIC_BLOCK_DIT ? c->layers + (c->final_layer ? 1 : 0)
                                       : lprime(sh);
    int dc = c->block == CIC_BLOCK_DIT ? c->d_cond : 0;
    return LAMBDA * sqrt(2.0 * lp * (c->d_model + c->d_mlp + c->tokens + dc)) * U64;
}

/* A tiny dit shape (adaLN-zero block): d in {8, 16}, heads dividing d,
 * tokens 1..4, samples 1..2, layers 1..2, d_cond 4..12, final layer on/off
 * (head readout when on, as cicheck runs dit cases). */
static shape shape_draw_dit(uint64_t seed)
{
    static const int ds[] = {8, 16}, hs[] = {1, 2, 4};
    uint64_t s = seed * 0x2545f4914f6cdd1dULL + 7;
    shape sh;
    cic_model_cfg *c = &sh.cfg;
    memset(&sh, 0, sizeof sh);
    sh.seed = seed;
    c->block = CIC_BLOCK_DIT;
    c->d_model = ds[cic_test_pick(&s, 2)];
    c->heads = hs[cic_test_pick(&s, 3)];
    c->mlp_ratio = 4;
    c->d_mlp = 4 * c->d_model;
    c->tokens = 1 + cic_test_pick(&s, 4);
    c->samples = 1 + cic_test_pick(&s, 2);
    c->layers = 1 + cic_test_pick(&s, 2);
    c->eps = 1e-6;
    c->causal = cic_test_pick(&s, 2);
    c->act = CIC_ACT_GELU_TANH;
    c->d_out = 1 + cic_test_pick(&s, 6);
    c->d_cond = 4 + cic_test_pick(&s, 9);
    c->final_layer = cic_test_pick(&s, 2);
    c->seed = seed;
    c->dist = CIC_DIST_NORMAL;
    c->std = 0.1;
    sh.readout = c->final_layer ? CIC_READOUT_HEAD : CIC_READOUT_RESIDUAL;
    return sh;
}

/* shape_str plus the dit fields. */
static const char *shape_str64(char *buf, size_t cap, const shape *sh)
{
    char tmp[512];
    snprintf(buf, cap, "%s d_cond %d final_layer %d", shape_str(tmp, sizeof tmp, sh),
             sh->cfg.d_cond, (int)sh->cfg.final_layer);
    return buf;
}

/* The k-th test shape of the f64 tests: preln, rmsnorm and dit in turn. */
static shape shape_draw64(uint64_t seed, int k)
{
    shape sh;
    if (k % 3 == 2)
        return shape_draw_dit(seed);
    sh = shape_draw(seed);
    sh.cfg.block = k % 3 == 0 ? CIC_BLOCK_PRELN : CIC_BLOCK_RMSNORM;
    return sh;
}

static double *run_f64m(const cic_model *m, size_t n, enum cic_matmul mm, bool rounded,
                        const cic_run_opts *o)
{
    double *y = cic_calloc(n, sizeof *y);
    assert_non_null(y);
    assert_int_equal(cic_engine_f64_run(y, m, mm, rounded, o), 0);
    return y;
}

/* ||y - x||_2 / ||x||_2 for a double y, in MPFR at 512 bits (y - x exact:
 * x has at most 128 bits within a few binades of y). */
static double rel_norm2_mpd(const double *y, const mpfr_t *x, size_t n)
{
    mpfr_t d, num, den, t;
    size_t i;
    double r;
    mpfr_inits2(512, d, num, den, t, (mpfr_ptr)0);
    mpfr_set_zero(num, 1);
    mpfr_set_zero(den, 1);
    for (i = 0; i < n; i++) {
        mpfr_set_d(t, y[i], MPFR_RNDN);
        mpfr_sub(d, t, x[i], MPFR_RNDN);
        mpfr_fma(num, d, d, num, MPFR_RNDN);
        mpfr_fma(den, x[i], x[i], den, MPFR_RNDN);
    }
    mpfr_div(num, num, den, MPFR_RNDN);
    mpfr_sqrt(num, num, MPFR_RNDN);
    r = mpfr_get_d(num, MPFR_RNDN);
    mpfr_clears(d, num, den, t, (mpfr_ptr)0);
    return r;
}

/* ||a - b|| / ||b|| for two double vectors, in MPFR (exact differences). */
static double rel_norm2_dd(const double *a, const double *b, size_t n)
{
    mpfr_t d, num, den, ta, tb;
    size_t i;
    double r;
    mpfr_inits2(512, d, num, den, ta, tb, (mpfr_ptr)0);
    mpfr_set_zero(num, 1);
    mpfr_set_zero(den, 1);
    for (i = 0; i < n; i++) {
        mpfr_set_d(ta, a[i], MPFR_RNDN);
        mpfr_set_d(tb, b[i], MPFR_RNDN);
        mpfr_sub(d, ta, tb, MPFR_RNDN);
        mpfr_fma(num, d, d, num, MPFR_RNDN);
        mpfr_fma(den, tb, tb, den, MPFR_RNDN);
    }
    mpfr_div(num, num, den, MPFR_RNDN);
    mpfr_sqrt(num, num, MPFR_RNDN);
    r = mpfr_get_d(num, MPFR_RNDN);
    mpfr_clears(d, num, den, ta, tb, (mpfr_ptr)0);
    return r;
}

static uint64_t f64_bits(double f)
{
    uint64_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

/* Index of the first double differing in bits, or -1. */
static long first_diff_f64(const double *a, const double *b, size_t n)
{
    size_t i;
    for (i = 0; i < n; i++)
        if (f64_bits(a[i]) != f64_bits(b[i]))
            return (long)i;
    return -1;
}

/* Both f64 engines (dgemm, fixed order) against MPFR at 128 bits on tiny
 * preln, rmsnorm and dit blocks: within BOUND64; not equal to the truth
 * rounded to double everywhere (they really ran in double, not in MPFR:
 * checked per engine and block kind over all shapes, since a shape with a
 * handful of outputs can round correctly everywhere by luck); far more
 * accurate than the f32 engine (so they did not run in float); and the
 * fixed-order engine bit-reproducible. */
static void test_f64_vs_mpfr(void **state)
{
    int k, mm, kind, n_dit = 0;
    int differs[CIC_MATMUL_COUNT][3] = {{0}};
    double worst[CIC_MATMUL_COUNT] = {0, 0};
    char buf[768];
    (void)state;
    for (k = 0; k < n_shapes(); k++) {
        shape sh = shape_draw64(20000 + (uint64_t)k, k);
        built b = build(&sh);
        double bound = f64_bound(&sh);
        mpfr_t *x = run_mp(&b, 128, NULL);
        double *xr = cic_calloc(b.n, sizeof *xr), *y[CIC_MATMUL_COUNT], *y2;
        float *yf = run_f32(&b, CIC_MATMUL_FIXED, NULL);
        double ef = rel_norm2_mp(yf, (const mpfr_t *)x, b.n);
        size_t i;
        long diff;
        assert_non_null(xr);
        n_dit += sh.cfg.block == CIC_BLOCK_DIT;
        for (i = 0; i < b.n; i++)
            xr[i] = mpfr_get_d(x[i], MPFR_RNDN);
        for (mm = 0; mm < CIC_MATMUL_COUNT; mm++) {
            double e;
            y[mm] = run_f64m(b.m, b.n, (enum cic_matmul)mm, false, NULL);
            e = rel_norm2_mpd(y[mm], (const mpfr_t *)x, b.n);
            if (!(e <= bound))
                fail_msg("%s vs mpfr-128: rel_norm2 %.3g > BOUND64 %.3g (%s); "
                         "y[0] = %.17g, x[0] = %.17g",
                         CIC_ENGINE_F64_NAME[mm], e, bound,
                         shape_str64(buf, sizeof buf, &sh), y[mm][0],
                         mpfr_get_d(x[0], MPFR_RNDN));
            if (first_diff_f64(y[mm], xr, b.n) >= 0)
                differs[mm][k % 3]++;
            /* f32 errors are ~2^29 times larger; 2^16 leaves room for luck */
            if (!(e * 0x1p16 <= ef))
                fail_msg("%s rel_norm2 %.3g not far below f32's %.3g: run in "
                         "float? (%s)", CIC_ENGINE_F64_NAME[mm], e, ef,
                         shape_str64(buf, sizeof buf, &sh));
            if (e / bound > worst[mm])
                worst[mm] = e / bound;
        }
        y2 = run_f64m(b.m, b.n, CIC_MATMUL_FIXED, false, NULL);
        diff = first_diff_f64(y2, y[CIC_MATMUL_FIXED], b.n);
        if (diff >= 0)
            fail_msg("f64 fixed-order not reproducible at %ld: %a vs %a (%s)", diff,
                     y2[diff], y[CIC_MATMUL_FIXED][diff],
                     shape_str64(buf, sizeof buf, &sh));
        free(y2);
        free(y[0]);
        free(y[1]);
        free(yf);
        free(xr);
        cic_mpvec_destroy(x, b.n);
        cic_model_destroy(b.m);
    }
    printf("f64 vs mpfr-128 over %d shapes (%d dit): worst rel_norm2 / BOUND64: "
           "openblas %.3g, fixed-order %.3g\n", n_shapes(), n_dit, worst[0], worst[1]);
    assert_true(n_dit > 0);
    for (mm = 0; mm < CIC_MATMUL_COUNT; mm++)
        for (kind = 0; kind < 3; kind++) {
            printf("%s, %s: %d shapes differ from mpfr-128 rounded to double\n",
                   CIC_ENGINE_F64_NAME[mm], kind == 0 ? "preln" : kind == 1 ? "rmsnorm" : "dit",
                   differs[mm][kind]);
            if (differs[mm][kind] == 0)
                fail_msg("%s equals mpfr-128 rounded to double on every %s "
                         "shape: not run in double?", CIC_ENGINE_F64_NAME[mm],
                         kind == 0 ? "preln" : kind == 1 ? "rmsnorm" : "dit");
        }
}

/* Give every weight and input of m its float32 values as unrounded
 * doubles (exact: prec 24), which the f64 engine reads in place. */
static void hold_as_doubles(cic_model *m)
{
    int i;
    for (i = 0; i < m->n_t; i++) {
        cic_tensor *t = &m->t[i];
        size_t n = (size_t)t->rows * t->cols, k;
        double *v;
        if (t->role == CIC_T_ACT)
            continue;
        v = cic_calloc(n, sizeof *v);
        assert_non_null(v);
        for (k = 0; k < n; k++)
            v[k] = (double)t->f32[k];
        cic_tensor_set_f64(t, v, 24);
    }
}

/* The f64 engine reads values held as doubles in place and makes the
 * others (float32, MPFR) in its arena before their first reader, freeing
 * the place after the last: the same bits either way, with a weight read
 * by two ops (layer 1's first linear tied to layer 0's, so its place must
 * outlive its first reader) and with a slice of the samples (an input's
 * rows picked from the whole tensor). A changed double is caught. */
static void test_f64_values_in_place(void **state)
{
    int k, mm;
    char buf[768];
    (void)state;
    for (k = 0; k < n_shapes(); k++) {
        shape sh = shape_draw64(23000 + (uint64_t)k, k);
        built a, b;
        int i, first = -1, s0;
        cic_run_opts o;
        sh.cfg.layers = 2;
        sh.cfg.samples = 2;
        a = build(&sh);
        b = build(&sh);
        for (i = 0; i < a.m->n_ops; i++) { /* tie layer 1's first linear to layer 0's */
            const cic_op *op = &a.m->ops[i];
            if (op->kind != CIC_OP_LINEAR || op->layer < 0)
                continue;
            if (op->layer == 0 && first < 0)
                first = i;
            else if (op->layer == 1 && first >= 0) {
                a.m->ops[i].w = b.m->ops[i].w = a.m->ops[first].w;
                break;
            }
        }
        hold_as_doubles(b.m);
        for (mm = 0; mm < CIC_MATMUL_COUNT; mm++)
            for (s0 = -1; s0 < 2; s0++) {
                size_t n = s0 < 0 ? a.n : a.n / 2;
                double *ya, *yb, *yr;
                long diff;
                memset(&o, 0, sizeof o);
                o.sample0 = s0 < 0 ? 0 : s0;
                o.n_samples = s0 < 0 ? 0 : 1;
                ya = run_f64m(a.m, a.n, (enum cic_matmul)mm, false, &o);
                yb = run_f64m(b.m, b.n, (enum cic_matmul)mm, false, &o);
                yr = run_f64m(b.m, b.n, (enum cic_matmul)mm, true, &o);
                if ((diff = first_diff_f64(ya, yb, n)) >= 0 || (diff = first_diff_f64(ya, yr, n)) >= 0)
                    fail_msg("%s, samples from %d: values made and read in place differ at %ld "
                             "(%s)", CIC_ENGINE_F64_NAME[mm], s0, diff,
                             shape_str64(buf, sizeof buf, &sh));
                free(ya);
                free(yb);
                free(yr);
            }
        if (k == 0) { /* planted: one weight's double off by 2^-20 */
            double *ya, *yb;
            i = b.m->ops[first].w;
            b.m->t[i].f64[0] *= 1 + 0x1p-20;
            ya = run_f64m(a.m, a.n, CIC_MATMUL_FIXED, false, NULL);
            yb = run_f64m(b.m, b.n, CIC_MATMUL_FIXED, false, NULL);
            assert_true(first_diff_f64(ya, yb, a.n) >= 0);
            free(ya);
            free(yb);
        }
        cic_model_destroy(a.m);
        cic_model_destroy(b.m);
    }
}

/* Plant a fault: lm_head scaled by 1 + 2^-40 (~8000 u of binary64, and
 * invisible in float32) must push the f64 engines past BOUND64. */
static void test_f64_bound_catches_fault(void **state)
{
    shape sh = shape_draw64(31, 1);
    built b;
    mpfr_t *x;
    int id, mm;
    size_t i, n;
    char buf[768];
    (void)state;
    sh.readout = CIC_READOUT_HEAD;
    b = build(&sh);
    x = run_mp(&b, 128, NULL);
    id = cic_model_tensor_find(b.m, "lm_head.weight");
    assert_true(id >= 0);
    n = (size_t)b.m->t[id].rows * b.m->t[id].cols;
    /* give the head exact hp values (the f32 ones), then perturb those */
    assert_int_equal(cic_model_tensor_hp(b.m, id, 128), 0);
    for (i = 0; i < n; i++) {
        mpfr_set_flt(b.m->t[id].hp[i], b.m->t[id].f32[i], MPFR_RNDN);
        mpfr_mul_d(b.m->t[id].hp[i], b.m->t[id].hp[i], 1.0 + 0x1p-40, MPFR_RNDN);
    }
    for (mm = 0; mm < CIC_MATMUL_COUNT; mm++) {
        double *y = run_f64m(b.m, b.n, (enum cic_matmul)mm, false, NULL);
        double *yr = run_f64m(b.m, b.n, (enum cic_matmul)mm, true, NULL);
        double e = rel_norm2_mpd(y, (const mpfr_t *)x, b.n);
        double er = rel_norm2_mpd(yr, (const mpfr_t *)x, b.n);
        if (!(e > f64_bound(&sh)))
            fail_msg("%s with the planted fault: %.3g not above BOUND64 %.3g (%s)",
                     CIC_ENGINE_F64_NAME[mm], e, f64_bound(&sh),
                     shape_str64(buf, sizeof buf, &sh));
        /* the rounded weights are the unperturbed f32 ones */
        if (!(er > 0 && er <= f64_bound(&sh)))
            fail_msg("%s, rounded weights: %.3g, BOUND64 %.3g (%s)",
                     CIC_ENGINE_F64_NAME[mm], er, f64_bound(&sh),
                     shape_str64(buf, sizeof buf, &sh));
        printf("planted fault, %s: rel_norm2 %.3g = %.3g x BOUND64 (unperturbed "
               "%.3g x)\n", CIC_ENGINE_F64_NAME[mm], e, e / f64_bound(&sh),
               er / f64_bound(&sh));
        free(y);
        free(yr);
    }
    cic_mpvec_destroy(x, b.n);
    cic_model_destroy(b.m);
}

/* The FLOPs the f64 engines book equal the f32 engine's, per site, on
 * preln, rmsnorm and dit blocks, with either weight choice, one sample at
 * a time too; also on transformed models whose graphs have the FWHT and
 * per-sample fold ops (adaLN strategies). */
static void check_flops64(const cic_model *m, size_t n, int ns, const char *what)
{
    cic_flop_count f32c, f64c[4];
    cic_run_opts o;
    int mm, rw, i, s;
    memset(&f32c, 0, sizeof f32c);
    memset(f64c, 0, sizeof f64c);
    memset(&o, 0, sizeof o);
    o.flops = &f32c;
    {
        float *y = cic_calloc(n, sizeof *y);
        assert_non_null(y);
        assert_int_equal(cic_engine_f32_run(y, m, CIC_MATMUL_FIXED, &o), 0);
        free(y);
    }
    for (mm = 0; mm < CIC_MATMUL_COUNT; mm++)
        for (rw = 0; rw < 2; rw++) {
            o.flops = &f64c[mm * 2 + rw];
            free(run_f64m(m, n, (enum cic_matmul)mm, rw, &o));
            for (i = 0; i < CIC_SITE_COUNT; i++)
                if (f64c[mm * 2 + rw].site[i] != f32c.site[i])
                    fail_msg("%s: site %s: %s%s %.17g, f32 %.17g", what,
                             CIC_SITE_NAME[i], CIC_ENGINE_F64_NAME[mm],
                             rw ? " (rounded weights)" : "",
                             f64c[mm * 2 + rw].site[i], f32c.site[i]);
        }
    assert_true(cic_flop_total(&f32c) > 0);
    /* one sample at a time adds up to the whole run */
    memset(&f64c[0], 0, sizeof f64c[0]);
    o.flops = &f64c[0];
    o.n_samples = 1;
    for (s = 0; s < ns; s++) {
        o.sample0 = s;
        free(run_f64m(m, n / (size_t)ns, CIC_MATMUL_FIXED, false, &o));
    }
    for (i = 0; i < CIC_SITE_COUNT; i++)
        if (f64c[0].site[i] != f32c.site[i])
            fail_msg("%s: site %s: f64 per-sample sum %.17g, f32 whole %.17g", what,
                     CIC_SITE_NAME[i], f64c[0].site[i], f32c.site[i]);
}

static cic_xform_spec spec64(enum cic_xform_kind kind, enum cic_qkind q, bool fast)
{
    return cic_test_xform_spec("x64", kind, q, fast);
}

static void test_f64_flops(void **state)
{
    int k, j;
    char buf[768];
    (void)state;
    for (k = 0; k < n_shapes() / 2; k++) {
        shape sh = shape_draw64(40000 + (uint64_t)k, k);
        built b = build(&sh);
        check_flops64(b.m, b.n, sh.cfg.samples, shape_str64(buf, sizeof buf, &sh));
        cic_model_destroy(b.m);
    }
    /* dit strategies: FWHT (online-unrotate with the fast Hadamard) and
     * the per-sample folds, d = 16 a power of two */
    for (j = 0; j < 2; j++) {
        shape sh = shape_draw_dit(50 + (uint64_t)j);
        built b;
        cic_xform_spec x = j == 0 ? spec64(CIC_XFORM_ONLINE_UNROTATE, CIC_Q_HADAMARD, true)
                                  : spec64(CIC_XFORM_PER_SAMPLE_FOLD, CIC_Q_RANDOM, false);
        cic_diag d;
        cic_model *t;
        int i, has = 0;
        sh.cfg.d_model = 16;
        sh.cfg.d_mlp = 64;
        sh.cfg.samples = 2;
        b = build(&sh);
        memset(&d, 0, sizeof d);
        t = cic_xform_apply(b.m, &x, 128, &d);
        if (!t)
            fail_msg("cic_xform_apply %s failed (%s)", CIC_XFORM_NAME[x.kind],
                     shape_str64(buf, sizeof buf, &sh));
        for (i = 0; i < t->n_ops; i++)
            has |= j == 0 ? t->ops[i].kind == CIC_OP_FWHT
                          : t->ops[i].kind == CIC_OP_FOLD_IN_W;
        if (!has)
            fail_msg("%s: no %s op in the graph (%s)", CIC_XFORM_NAME[x.kind],
                     j == 0 ? "fwht" : "fold", shape_str64(buf, sizeof buf, &sh));
        check_flops64(t, b.n, sh.cfg.samples, CIC_XFORM_NAME[x.kind]);
        cic_model_destroy(t);
        cic_model_destroy(b.m);
    }
}

/* rounded_weights is wired: on a randomly rotated preln model (transform
 * at precision mpfr, so the weights carry unrounded hp values) the f64
 * output with the float32 weights differs from the one with the hp weights
 * rounded to double, by far more than BOUND64 (the weights moved by ~2^-24
 * relative); each is within BOUND64 of the MPFR engine given the same
 * weights. */
static void test_f64_rounded_weights(void **state)
{
    int k, mm;
    char buf[768];
    (void)state;
    for (k = 0; k < 4; k++) {
        shape sh = shape_draw64(60000 + (uint64_t)k, k % 2);
        built b = build(&sh);
        cic_xform_spec x = spec64(CIC_XFORM_ROTATE, CIC_Q_RANDOM, false);
        cic_diag d;
        cic_model *t;
        mpfr_t *xs[2];
        int rw, has_hp = 0, i;
        double bound = f64_bound(&sh);
        if (sh.cfg.block == CIC_BLOCK_PRELN) {
            /* rotation needs the LayerNorm fused first */
            cic_xform_spec f = spec64(CIC_XFORM_FUSE_LAYERNORM, CIC_Q_IDENTITY, false);
            cic_model *fused;
            memset(&d, 0, sizeof d);
            fused = cic_xform_apply(b.m, &f, 128, &d);
            assert_non_null(fused);
            cic_model_destroy(b.m);
            b.m = fused;
        } else {
            cic_xform_spec f = spec64(CIC_XFORM_FOLD_RMSNORM_GAMMA, CIC_Q_IDENTITY, false);
            cic_model *folded;
            memset(&d, 0, sizeof d);
            folded = cic_xform_apply(b.m, &f, 128, &d);
            assert_non_null(folded);
            cic_model_destroy(b.m);
            b.m = folded;
        }
        memset(&d, 0, sizeof d);
        t = cic_xform_apply(b.m, &x, 128, &d);
        if (!t)
            fail_msg("rotate failed (%s)", shape_str64(buf, sizeof buf, &sh));
        for (i = 0; i < t->n_t; i++)
            has_hp |= t->t[i].hp != NULL;
        assert_true(has_hp);
        for (rw = 0; rw < 2; rw++) {
            xs[rw] = cic_mpvec_create(b.n, 128);
            assert_non_null(xs[rw]);
            assert_int_equal(cic_engine_mpfr_run(xs[rw], t, 128, rw, NULL), 0);
        }
        for (mm = 0; mm < CIC_MATMUL_COUNT; mm++) {
            double *y = run_f64m(t, b.n, (enum cic_matmul)mm, false, NULL);
            double *yr = run_f64m(t, b.n, (enum cic_matmul)mm, true, NULL);
            double e = rel_norm2_mpd(y, (const mpfr_t *)xs[0], b.n);
            double er = rel_norm2_mpd(yr, (const mpfr_t *)xs[1], b.n);
            double dd = rel_norm2_dd(yr, y, b.n);
            if (first_diff_f64(y, yr, b.n) < 0 || !(dd > bound))
                fail_msg("%s: rounded_weights changes nothing (rel diff %.3g, "
                         "BOUND64 %.3g) (%s)", CIC_ENGINE_F64_NAME[mm], dd, bound,
                         shape_str64(buf, sizeof buf, &sh));
            if (!(e <= bound) || !(er <= bound))
                fail_msg("%s on the rotated model vs mpfr-128: hp weights %.3g, "
                         "rounded weights %.3g, BOUND64 %.3g (%s)",
                         CIC_ENGINE_F64_NAME[mm], e, er, bound,
                         shape_str64(buf, sizeof buf, &sh));
            free(y);
            free(yr);
        }
        cic_mpvec_destroy(xs[0], b.n);
        cic_mpvec_destroy(xs[1], b.n);
        cic_model_destroy(t);
        cic_model_destroy(b.m);
    }
}

/* ---- the graph check and the engine table ---- */

/* The index of the op writing the tensor named out. */
static int op_writing(const cic_model *m, const char *out)
{
    int i, id = cic_model_tensor_find(m, out);
    assert_true(id >= 0);
    for (i = 0; i < m->n_ops; i++)
        if (m->ops[i].out == id)
            return i;
    fail_msg("no op writes '%s'", out);
    return -1;
}

/* Every engine refuses m (-2, CIC_GRAPH_REFUSED) without walking it, and
 * cic_model_check's message holds each of want[] (NULL-ended); n: the
 * output size of the well-formed graph. */
static void expect_refused(const cic_model *m, size_t n, const char *what,
                           const char *const *want)
{
    char msg[512];
    size_t k;
    float *y = cic_calloc(n, sizeof *y);
    double *yd = cic_calloc(n, sizeof *yd);
    mpfr_t *x = cic_mpvec_create(n, 64);
    int rc = cic_model_check(m, msg, sizeof msg);
    assert_non_null(y);
    assert_non_null(yd);
    assert_non_null(x);
    printf("%s: %s\n", what, msg);
    if (rc != CIC_GRAPH_REFUSED)
        fail_msg("%s: cic_model_check returned %d, not refused (%s)", what, rc, msg);
    for (k = 0; want[k]; k++)
        if (!strstr(msg, want[k]))
            fail_msg("%s: message '%s' does not say '%s'", what, msg, want[k]);
    assert_int_equal(cic_engine_f32_run(y, m, CIC_MATMUL_FIXED, NULL), CIC_GRAPH_REFUSED);
    assert_int_equal(cic_engine_f32_run(y, m, CIC_MATMUL_OPENBLAS, NULL), CIC_GRAPH_REFUSED);
    assert_int_equal(cic_engine_f64_run(yd, m, CIC_MATMUL_FIXED, false, NULL),
                     CIC_GRAPH_REFUSED);
    assert_int_equal(cic_engine_mpfr_run(x, m, 64, false, NULL), CIC_GRAPH_REFUSED);
    free(y);
    free(yd);
    cic_mpvec_destroy(x, n);
}

static shape check_shape(enum cic_block_kind block)
{
    shape sh = shape_draw(4242);
    sh.cfg.block = block;
    sh.cfg.d_model = 16;
    sh.cfg.heads = 2;
    sh.cfg.d_mlp = 64;
    sh.cfg.tokens = 3;
    sh.cfg.samples = 2;
    sh.cfg.layers = 1;
    sh.readout = CIC_READOUT_HEAD;
    return sh;
}

/* Malformed graphs, one fault each planted in a well-formed preln graph
 * (which the check passes, as every graph the other tests run): a weight
 * of the wrong width, missing tensors, an id out of range, an activation
 * read before it is written or written twice, a slot the op has no use
 * for, an attention view past its tensor, a gain of the wrong shape, an
 * unknown op kind, a readout nobody writes. */
static void test_graph_check(void **state)
{
    shape sh = check_shape(CIC_BLOCK_PRELN);
    built b = build(&sh);
    cic_model *m;
    int qkv = op_writing(b.m, "act.0.qkv"), nrm = op_writing(b.m, "act.0.norm2");
    int att = op_writing(b.m, "act.0.attn"), fc2 = op_writing(b.m, "act.0.fc2");
    char msg[512];
    (void)state;
    assert_int_equal(cic_model_check(b.m, msg, sizeof msg), 0);
    assert_string_equal(msg, "");
    assert_int_equal(cic_model_check(b.m, NULL, 0), 0);
#define FAULT(what, change, ...)                                              \
    do {                                                                      \
        static const char *const want_[] = {__VA_ARGS__, NULL};               \
        m = cic_model_clone(b.m);                                             \
        assert_non_null(m);                                                   \
        change;                                                               \
        expect_refused(m, b.n, what, want_);                                  \
        cic_model_destroy(m);                                                 \
    } while (0)
    FAULT("qkv weight d x d", m->ops[qkv].w = cic_model_tensor_find(m, "blocks.0.attn.proj.weight"),
          "op 1 (linear, layer 0, site attn, output 'act.0.qkv'): ", "48 columns",
          "'blocks.0.attn.proj.weight' 16 rows");
    FAULT("fc2 weight reads the wrong width",
          m->ops[fc2].w = cic_model_tensor_find(m, "blocks.0.mlp.fc1.weight"),
          "(linear, layer 0, site mlp, output 'act.0.fc2')", "has 16 columns",
          "the input 'act.0.act' 64");
    FAULT("norm input missing", m->ops[nrm].in[0] = -1, "(norm,", "input missing");
    FAULT("linear weight missing", m->ops[qkv].w = -1, "weight missing");
    FAULT("id out of range", m->ops[att].in[1] = m->n_t + 5, "in[1] = ", "no such tensor");
    FAULT("read before written", m->ops[qkv].in[0] = m->ops[fc2].out,
          "reads 'act.0.fc2' (in[0]) before any op writes it");
    FAULT("written twice", m->ops[nrm].out = m->ops[qkv].out,
          "'act.0.qkv' was written by an earlier op");
    FAULT("stray slot", m->ops[nrm].w = m->ops[qkv].w, "w is set", "a norm op has no such input");
    FAULT("attention view past the tensor", m->ops[att].in_col[2] = 3 * 16 - 8,
          "(attn,", "v input 'act.0.qkv': columns 40 .. 55 of 48");
    FAULT("gain of the wrong shape",
          m->ops[nrm].g = cic_model_tensor_find(m, "blocks.0.attn.proj.weight"),
          "gain 'blocks.0.attn.proj.weight' is 16 x 16, expected 1 x 16");
    FAULT("heads", m->ops[att].heads = 3, "3 heads do not divide the width 16");
    FAULT("kv heads", m->ops[att].kv_heads = 0, "0 key/value heads do not divide the 2 heads");
    FAULT("kv heads not dividing", m->ops[att].kv_heads = 3,
          "3 key/value heads do not divide the 2 heads");
    FAULT("unknown op kind", m->ops[att].kind = CIC_OP_COUNT, "op 2: unknown op kind ");
    FAULT("unknown site", m->ops[att].site = CIC_SITE_COUNT, "op 2 (attn): unknown site 9");
    FAULT("no readout", m->output = -1, "no readout tensor");
    FAULT("readout never written", m->output = m->n_t - 1; m->n_ops--, "is never written");
#undef FAULT
    cic_model_destroy(b.m);
}

/* A graph of one FWHT op over an input of width w (2 samples of 3 tokens). */
static cic_model *fwht_model(int w)
{
    cic_model *m = cic_calloc(1, sizeof *m);
    cic_op o;
    assert_non_null(m);
    m->cfg = check_shape(CIC_BLOCK_PRELN).cfg;
    m->rows = m->cfg.tokens * m->cfg.samples;
    m->cond = -1;
    m->input = cic_model_tensor_add(m, "input", CIC_T_INPUT, m->rows, w);
    memset(&o, 0, sizeof o);
    o.kind = CIC_OP_FWHT;
    o.site = CIC_SITE_INPUT;
    o.layer = -1;
    o.in[0] = m->input;
    o.in[1] = o.in[2] = o.w = o.b = -1;
    o.g = cic_model_tensor_add(m, "signs", CIC_T_WEIGHT, 1, w);
    o.hbase = cic_hadamard_base_order(w); /* as the transform sets it */
    o.out = cic_model_tensor_add(m, "out", CIC_T_ACT, m->rows, w);
    assert_true(m->input >= 0 && o.g >= 0 && o.out >= 0);
    assert_true(cic_model_op_add(m, &o) >= 0);
    m->output = m->residual = o.out;
    return m;
}

/* The shipped block kinds and the adaLN strategy graphs pass the check:
 * rmsnorm and dit graphs (preln: test_graph_check), and a dit graph with
 * FWHT and fold ops; an FWHT of a width with no Hadamard construction is
 * refused. */
static void test_graph_check_kinds(void **state)
{
    shape sh = check_shape(CIC_BLOCK_RMSNORM);
    built b = build(&sh);
    cic_model *t;
    cic_xform_spec x = spec64(CIC_XFORM_ONLINE_UNROTATE, CIC_Q_HADAMARD, true);
    cic_diag d;
    int i, fw = -1;
    char msg[512];
    (void)state;
    assert_int_equal(cic_model_check(b.m, msg, sizeof msg), 0);
    cic_model_destroy(b.m);
    sh = shape_draw_dit(77);
    sh.cfg.d_model = 16;
    sh.cfg.d_mlp = 64;
    b = build(&sh);
    assert_int_equal(cic_model_check(b.m, msg, sizeof msg), 0);
    memset(&d, 0, sizeof d);
    t = cic_xform_apply(b.m, &x, 128, &d);
    assert_non_null(t);
    assert_int_equal(cic_model_check(t, msg, sizeof msg), 0);
    for (i = 0; i < t->n_ops && fw < 0; i++)
        if (t->ops[i].kind == CIC_OP_FWHT)
            fw = i;
    assert_true(fw >= 0);
    cic_model_destroy(t);
    /* widths 12 (a Paley base) and 16 run; 14 has no Hadamard matrix */
    for (i = 12; i <= 16; i += 2) {
        cic_model *f = fwht_model(i);
        float *y = cic_calloc((size_t)f->rows * i, sizeof *y);
        assert_non_null(y);
        if (i != 14) {
            assert_int_equal(cic_model_check(f, msg, sizeof msg), 0);
            assert_int_equal(cic_engine_f32_run(y, f, CIC_MATMUL_FIXED, NULL), 0);
            /* a base order that does not divide the width into 2^k */
            f->ops[0].hbase = 5;
            assert_int_equal(cic_model_check(f, msg, sizeof msg), CIC_GRAPH_REFUSED);
            assert_non_null(strstr(msg, "is not K 2^k for the Hadamard base order K = 5"));
        } else {
            assert_int_equal(cic_model_check(f, msg, sizeof msg), CIC_GRAPH_REFUSED);
            printf("fwht of width 14: %s\n", msg);
            assert_non_null(strstr(msg, "(fwht, layer -1, site input, output 'out'): "
                                        "no Hadamard matrix of order 14"));
            assert_int_equal(cic_engine_f32_run(y, f, CIC_MATMUL_FIXED, NULL),
                             CIC_GRAPH_REFUSED);
        }
        free(y);
        cic_model_destroy(f);
    }
    x = spec64(CIC_XFORM_PER_SAMPLE_FOLD, CIC_Q_RANDOM, false);
    t = cic_xform_apply(b.m, &x, 128, &d);
    assert_non_null(t);
    assert_int_equal(cic_model_check(t, msg, sizeof msg), 0);
    for (i = 0; i < t->n_ops; i++)
        if (t->ops[i].kind == CIC_OP_FOLD_OUT_B)
            t->ops[i].b = -1; /* the bias the fold needs */
    assert_int_equal(cic_model_check(t, msg, sizeof msg), CIC_GRAPH_REFUSED);
    assert_non_null(strstr(msg, "(fold-out-b,"));
    assert_non_null(strstr(msg, "bias missing"));
    cic_model_destroy(t);
    cic_model_destroy(b.m);
}

/* Mismatches between one engine's FWHT op (base order Kop as the op's
 * hbase, 0: automatic; -1 the regular Hadamard, op.regular) and the dense
 * product by cic_q_hadamard_k's Q of base order Kq (-1:
 * cic_q_regular_hadamard's Q) (x Q, or x Q^T for transpose) on
 * fwht_model(w), signs taken from row 0 of that Q as the transform takes
 * them (times D_c for the regular op). Inputs are integers in
 * [-8, 8] and w a power of 4, so 1/sqrt(w), every partial sum and the
 * expected values (formed in double) are exact: equality is bit for bit.
 * eng: 0 f32 fixed-order, 1 f32 OpenBLAS, 2 f64 fixed-order, 3 MPFR. */
static int fwht_vs_dense(int w, int Kop, int Kq, bool transpose, int eng, uint64_t seed)
{
    cic_model *m = fwht_model(w);
    size_t R = (size_t)m->rows, n = (size_t)w, i, j, r;
    mpfr_t *q = cic_mpvec_create(n * n, 24), *ym = NULL;
    float *x = m->t[m->input].f32, *yf = NULL;
    double *yd = NULL, *want = calloc(R * n, sizeof *want);
    uint64_t key = cic_rng_key(seed, "test.fwht.forced");
    int bad = 0;
    assert_true(q && want);
    if (Kq < 0)
        assert_int_equal(cic_q_regular_hadamard(q, w, seed, 24), 0);
    else
        assert_int_equal(cic_q_hadamard_k(q, w, Kq, seed, 24), 0);
    m->ops[0].regular = Kop < 0;
    m->ops[0].hbase = Kop < 0 ? 1 : cic_hadamard_base_order_k(w, Kop);
    m->ops[0].transpose = transpose;
    for (j = 0; j < n; j++)
        m->t[m->ops[0].g].f32[j] =
            (mpfr_signbit(q[j]) ? -1.0f : 1.0f) *
            (Kop < 0 ? (float)cic_regular_dc((int)j, cic_regular_order_k(w)) : 1.0f);
    for (i = 0; i < R * n; i++)
        x[i] = (float)((int)(cic_rng_u64(key, i) % 17) - 8);
    for (r = 0; r < R; r++)
        for (j = 0; j < n; j++)
            for (i = 0; i < n; i++)
                want[r * n + j] += x[r * n + i] *
                                   mpfr_get_d(transpose ? q[j * n + i] : q[i * n + j], MPFR_RNDN);
    if (eng <= 1) {
        yf = calloc(R * n, sizeof *yf);
        assert_non_null(yf);
        assert_int_equal(cic_engine_f32_run(yf, m, eng ? CIC_MATMUL_OPENBLAS : CIC_MATMUL_FIXED,
                                            NULL), 0);
    } else if (eng == 2) {
        yd = calloc(R * n, sizeof *yd);
        assert_non_null(yd);
        assert_int_equal(cic_engine_f64_run(yd, m, CIC_MATMUL_FIXED, false, NULL), 0);
    } else {
        ym = cic_mpvec_create(R * n, 64);
        assert_non_null(ym);
        assert_int_equal(cic_engine_mpfr_run(ym, m, 64, false, NULL), 0);
    }
    for (i = 0; i < R * n; i++) {
        double got = yf ? yf[i] : yd ? yd[i] : mpfr_get_d(ym[i], MPFR_RNDN);
        if (got != want[i] && bad++ == 0 && Kop == Kq)
            print_message("fwht w %d K %d engine %d %s: entry %zu fast %.17g dense %.17g\n", w,
                          Kq, eng, transpose ? "transpose" : "forward", i, got, want[i]);
    }
    free(yf);
    free(yd);
    cic_mpvec_destroy(ym, R * n);
    cic_mpvec_destroy(q, n * n);
    free(want);
    cic_model_destroy(m);
    return bad;
}

/* The fast transform of every engine is the dense Q's matrix, for the
 * automatic base (K = 0) and for forced bases, as a transform with
 * hadamard_base builds them: 256 = 4 x 64, 32 x 8, 128 x 2 (Paley I), 64 =
 * 32 x 2, 16 = 4 x 4. The check can fail: the op with the automatic
 * (Sylvester) base against the dense K = 32 Q differs. */
static void test_fwht_forced_base_matches_dense(void **state)
{
    static const struct {
        int w, K;
    } cases[] = {{256, 0}, {256, 4}, {256, 32}, {256, 128}, {64, 32}, {16, 4}};
    size_t a;
    int eng, t;
    (void)state;
    for (a = 0; a < sizeof cases / sizeof cases[0]; a++)
        for (eng = 0; eng < 4; eng++)
            for (t = 0; t < 2; t++) {
                int bad = fwht_vs_dense(cases[a].w, cases[a].K, cases[a].K, t, eng,
                                        7 + (uint64_t)a);
                if (bad)
                    fail_msg("fwht w %d K %d engine %d %s: %d entries differ from x Q",
                             cases[a].w, cases[a].K, eng, t ? "transpose" : "forward", bad);
            }
    for (eng = 0; eng < 4; eng++)
        if (fwht_vs_dense(256, 0, 32, false, eng, 7) == 0)
            fail_msg("engine %d: the Sylvester fast op matches the dense K = 32 Q", eng);
    print_message("fwht: every engine's fast op = dense Q for K = 0, 4, 32, 128\n");
}

/* The regular fast op (digit permutation, signs, Sylvester butterflies) is
 * cic_q_regular_hadamard's Q in every engine, forward and transposed, at
 * orders 4, 16, 64, 256; it is not the Sylvester Q, and a Sylvester op is
 * not it. */
static void test_fwht_regular_matches_dense(void **state)
{
    static const int ws[] = {4, 16, 64, 256};
    size_t a;
    int eng, t;
    (void)state;
    for (a = 0; a < sizeof ws / sizeof ws[0]; a++)
        for (eng = 0; eng < 4; eng++)
            for (t = 0; t < 2; t++) {
                int bad = fwht_vs_dense(ws[a], -1, -1, t, eng, 11 + (uint64_t)a);
                if (bad)
                    fail_msg("regular fwht w %d engine %d %s: %d entries differ from x Q",
                             ws[a], eng, t ? "transpose" : "forward", bad);
            }
    for (eng = 0; eng < 4; eng++)
        if (fwht_vs_dense(64, -1, 0, false, eng, 7) == 0 ||
            fwht_vs_dense(64, 0, -1, true, eng, 7) == 0)
            fail_msg("engine %d: the regular and the Sylvester transforms agree", eng);
    print_message("fwht: every engine's regular op = dense regular Q for 4, 16, 64, 256\n");
}

/* The FLOPs booked per op are the op table's cost of each op, summed by
 * site, on a dit strategy graph with every dit op kind but FWHT (and on
 * preln and rmsnorm graphs). */
static void test_engine_books_op_costs(void **state)
{
    int j;
    (void)state;
    for (j = 0; j < 3; j++) {
        shape sh = j == 2 ? shape_draw_dit(91) : check_shape(j ? CIC_BLOCK_RMSNORM
                                                              : CIC_BLOCK_PRELN);
        built b = build(&sh);
        cic_model *t = b.m;
        cic_flop_count fc, want;
        cic_run_opts o;
        float *y;
        int i;
        if (j == 2) {
            cic_xform_spec x = spec64(CIC_XFORM_PER_SAMPLE_FOLD, CIC_Q_RANDOM, false);
            cic_diag d;
            memset(&d, 0, sizeof d);
            t = cic_xform_apply(b.m, &x, 128, &d);
            assert_non_null(t);
        }
        memset(&fc, 0, sizeof fc);
        memset(&want, 0, sizeof want);
        memset(&o, 0, sizeof o);
        o.flops = &fc;
        for (i = 0; i < t->n_ops; i++)
            want.site[t->ops[i].site] += cic_op_cost(t, &t->ops[i], t->cfg.samples);
        y = cic_calloc(b.n, sizeof *y);
        assert_non_null(y);
        assert_int_equal(cic_engine_f32_run(y, t, CIC_MATMUL_FIXED, &o), 0);
        free(y);
        for (i = 0; i < CIC_SITE_COUNT; i++)
            if (fc.site[i] != want.site[i])
                fail_msg("site %s: booked %.17g, op table %.17g", CIC_SITE_NAME[i], fc.site[i],
                         want.site[i]);
        assert_true(cic_flop_total(&fc) > 0);
        if (t != b.m)
            cic_model_destroy(t);
        cic_model_destroy(b.m);
    }
}

/* One engine table: names as in reports, found back by name, real engines
 * indexed by arithmetic and matmul, the matmul views of the names. */
static void test_engine_table(void **state)
{
    int e;
    (void)state;
    assert_string_equal(CIC_ENGINE_DESC[CIC_ENGINE_F32_OPENBLAS].name, "f32-openblas");
    assert_string_equal(CIC_ENGINE_DESC[CIC_ENGINE_F32_FIXED].name, "f32-fixed-order");
    assert_string_equal(CIC_ENGINE_DESC[CIC_ENGINE_F64_OPENBLAS].name, "f64-openblas");
    assert_string_equal(CIC_ENGINE_DESC[CIC_ENGINE_F64_FIXED].name, "f64-fixed-order");
    assert_string_equal(CIC_ENGINE_DESC[CIC_ENGINE_MPFR].name, "mpfr");
    assert_int_equal(CIC_ENGINE_DESC[CIC_ENGINE_MPFR].arith, CIC_ARITH_MPFR);
    for (e = 0; e < CIC_ENGINE_COUNT; e++) {
        const cic_engine_desc *x = &CIC_ENGINE_DESC[e];
        assert_non_null(x->name);
        assert_ptr_equal(CIC_ENGINE_NAME[e], x->name);
        assert_int_equal(cic_engine_find(x->name), e);
        if (x->arith != CIC_ARITH_MPFR)
            assert_int_equal(cic_engine_real(x->arith, x->mm), e);
    }
    for (e = 0; e < CIC_MATMUL_COUNT; e++) {
        assert_int_equal(CIC_ENGINE_DESC[cic_engine_real(CIC_ARITH_F32, e)].mm, e);
        assert_string_equal(CIC_ENGINE_F32_NAME[e],
                            CIC_ENGINE_DESC[cic_engine_real(CIC_ARITH_F32, e)].name);
        assert_string_equal(CIC_ENGINE_F64_NAME[e],
                            CIC_ENGINE_DESC[cic_engine_real(CIC_ARITH_F64, e)].name);
    }
    assert_int_equal(cic_engine_find("f32"), -1);
    assert_int_equal(cic_engine_find(""), -1);
    /* the op table: a name and a check for every kind */
    for (e = 0; e < CIC_OP_COUNT; e++) {
        assert_non_null(CIC_OP_NAME[e]);
        assert_string_equal(CIC_OP_DESC[e].name, CIC_OP_NAME[e]);
        assert_non_null(CIC_OP_DESC[e].check);
        assert_non_null(CIC_OP_DESC[e].cost);
    }
    for (e = 0; e < CIC_SITE_COUNT; e++)
        assert_non_null(CIC_SITE_NAME[e]);
}


/* ---- non-finite intermediates ----
 *
 * A weight that makes a key or value row NaN or Inf (a finite checkpoint
 * weight of 3.4e38 whose fold rounds to Inf in float32 does it) once sent
 * the MPFR attention through packed rows that were never made (a null
 * pointer: SIGSEGV). Every engine must run such a model to its end and
 * hand back non-finite outputs for the pipeline to count. */

static size_t count_nonfinite_mp(const mpfr_t *x, size_t n)
{
    size_t i, k = 0;
    for (i = 0; i < n; i++)
        k += !mpfr_number_p(x[i]);
    return k;
}

static void nonfinite_one(const char *tensor, bool causal, int kv_heads, float bad)
{
    shape sh;
    cic_model_cfg *c = &sh.cfg;
    built b;
    mpfr_t *x;
    cic_run_opts o;
    cic_ball_out bo;
    double *rad, *y64;
    float *y;
    size_t k;
    cic_rt rt; /* the MPFR engine's threads, 1 then 2 */
    int id, mm, th;
    memset(&sh, 0, sizeof sh);
    sh.seed = 91;
    sh.readout = CIC_READOUT_RESIDUAL;
    c->block = CIC_BLOCK_RMSNORM;
    c->d_model = 16;
    c->heads = 4;
    c->kv_heads = kv_heads;
    c->mlp_ratio = 2;
    c->d_mlp = 32;
    c->tokens = 5;
    c->samples = 2;
    c->layers = 1;
    c->eps = 1e-5;
    c->causal = causal;
    c->act = CIC_ACT_SILU;
    c->d_out = 16;
    c->seed = 91;
    c->dist = CIC_DIST_NORMAL;
    c->std = 0.1;
    b = build(&sh);
    id = cic_model_tensor_find(b.m, tensor);
    assert_true(id >= 0);
    b.m->t[id].f32[3] = bad;
    cic_rt_init(&rt, 0);
    b.m->rt = &rt;
    for (th = 1; th <= 2; th++) {
        rt.mpfr_threads = th;
        x = run_mp(&b, 64, NULL);
        k = count_nonfinite_mp((const mpfr_t *)x, b.n);
        if (k == 0)
            fail_msg("mpfr, %s[3] = %g, causal %d, kv_heads %d, %d threads: every output "
                     "finite", tensor, (double)bad, causal, kv_heads, th);
        cic_mpvec_destroy(x, b.n);
    }
    b.m->rt = NULL;
    /* the ball run: it finishes, and proves none of the non-finite values */
    memset(&o, 0, sizeof o);
    memset(&bo, 0, sizeof bo);
    x = cic_mpvec_create(b.n, 64);
    rad = malloc(b.n * sizeof *rad);
    assert_true(x && rad);
    bo.rad = rad;
    o.ball = &bo;
    assert_int_equal(cic_engine_mpfr_run(x, b.m, 64, false, &o), 0);
    if (!bo.failed) {
        unsigned char *ok = calloc(b.n, 1);
        double mr;
        assert_non_null(ok);
        cic_ball_prove((const mpfr_t *)x, rad, b.n, ok, &mr);
        for (k = 0; k < b.n; k++)
            if (ok[k] && !mpfr_number_p(x[k]))
                fail_msg("ball run: non-finite output %zu proven (%s)", k, tensor);
        free(ok);
    }
    free(rad);
    cic_mpvec_destroy(x, b.n);
    for (mm = 0; mm < CIC_MATMUL_COUNT; mm++) {
        y = run_f32(&b, (enum cic_matmul)mm, NULL);
        for (k = 0; k < b.n && isfinite(y[k]); k++)
            ;
        if (k == b.n)
            fail_msg("%s: every output finite (%s)", CIC_ENGINE_F32_NAME[mm], tensor);
        free(y);
        y64 = cic_calloc(b.n, sizeof *y64);
        assert_non_null(y64);
        assert_int_equal(cic_engine_f64_run(y64, b.m, (enum cic_matmul)mm, false, NULL), 0);
        for (k = 0; k < b.n && isfinite(y64[k]); k++)
            ;
        if (k == b.n)
            fail_msg("f64 %s: every output finite (%s)", CIC_ENGINE_F32_NAME[mm], tensor);
        free(y64);
    }
    cic_model_destroy(b.m);
}

static void test_nonfinite_attention(void **state)
{
    static const char *const tensors[] = {"layers.0.self_attn.v_proj.weight",
                                          "layers.0.self_attn.k_proj.weight",
                                          "layers.0.self_attn.q_proj.weight"};
    size_t t;
    (void)state;
    for (t = 0; t < sizeof tensors / sizeof tensors[0]; t++) {
        nonfinite_one(tensors[t], false, 4, INFINITY);
        nonfinite_one(tensors[t], true, 4, INFINITY);
        nonfinite_one(tensors[t], false, 2, NAN);
        nonfinite_one(tensors[t], true, 2, -INFINITY);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_f32_vs_mpfr),
        cmocka_unit_test(test_bound_catches_fault),
        cmocka_unit_test(test_mpfr_engine),
        cmocka_unit_test(test_flops),
        cmocka_unit_test(test_f64_vs_mpfr),
        cmocka_unit_test(test_f64_bound_catches_fault),
        cmocka_unit_test(test_f64_values_in_place),
        cmocka_unit_test(test_f64_flops),
        cmocka_unit_test(test_f64_rounded_weights),
        cmocka_unit_test(test_graph_check),
        cmocka_unit_test(test_graph_check_kinds),
        cmocka_unit_test(test_fwht_forced_base_matches_dense),
        cmocka_unit_test(test_fwht_regular_matches_dense),
        cmocka_unit_test(test_engine_books_op_costs),
        cmocka_unit_test(test_nonfinite_attention),
        cmocka_unit_test(test_engine_table),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
