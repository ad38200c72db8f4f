/* SPDX-License-Identifier: MIT */
/* test_adaln.c: the dit (adaLN-Zero) block and its rotation strategies
 * (DESIGN.md sections 1, 3, 5; the adaLN implementer spec).
 *
 *  1. f32 engines (OpenBLAS and fixed-order) against the MPFR engine on the
 *     original dit graph, within a derived probabilistic bound, and not
 *     identical to the rounded truth (the f32 engine really ran in float).
 *  2. Every exact strategy (online-unrotate, per-sample-fold, branch-rotate;
 *     dense and fast, centered and mean-preserving), computed at MPFR
 *     precision, stays under the equivalent ce threshold against the
 *     original in MPFR; also d not a power of two where allowed.
 *  3. static-fold: exact on its calibration sample only, broken elsewhere;
 *     exact everywhere when every sample shares the calibration c.
 *  4. FLOPs counted by both engines equal cic_flops_dit exactly, per site.
 *  5. MPFR bit-identical with 1 and 2 threads on a strategy graph.
 *  6. A forced Hadamard base order (hadamard_base): refused by
 *     cic_xform_check where it does not fit d_model or (branch-rotate)
 *     d_mlp; every Hadamard strategy with a forced base equivalent, its
 *     fast ops of that base, fast = dense, FLOPs = cic_flops_dit.
 *  7. Through dgemm (f64-openblas), every strategy with Q as doubles gives
 *     the bits of Q as MPFR numbers (the MPFR folds, cic_mp_matmul): every
 *     weight's float32 and unrounded values, the readout map; the folds in
 *     doubles decline where a double step would round otherwise.
 *  A planted fault (one entry of rot.q perturbed) is caught by the ce check.
 *
 * Models are built by hand from a cic_model_cfg drawn from a test seed (the
 * seed and shape are printed on failure). Distances are computed here in
 * MPFR at 512 bits, independently of src/metric, except the ce itself which
 * uses cic_metric_rel_diff as the report does (and is cross-checked here). */
#include "testutil.h"

#include "base/base.h"
#include "base/mpvec.h"
#include "engine/engine.h"
#include "metric/flops.h"
#include "metric/metric.h"
#include "model/model.h"
#include "xform/fold.h"
#include "xform/qmat.h"
#include "xform/xform.h"
#include "xform/xform_util.h"

#include <float.h>

#include <mpfr.h>
#include <string.h>

#define PREC 128
#define WP 512      /* working precision of the test's own arithmetic */
#define U32 0x1p-24 /* unit roundoff of binary32 */

/* ---- shapes ---- */

typedef struct {
    uint64_t seed;
    cic_model_cfg cfg;
} shape;

/* d in {8, 16} (or the given list), heads dividing d, tokens 1..5, samples
 * 1..3, layers 1..2, d_cond 4..16, final_layer on/off, d_out 1..6, causal
 * on/off, mlp_ratio 4 (DiT), gelu-tanh, eps 1e-6. */
static shape shape_draw_d(uint64_t seed, const int *ds, int nd, const int *hs, int nh)
{
    uint64_t s = seed * 0x2545f4914f6cdd1dULL + 7;
    shape sh;
    cic_model_cfg *c = &sh.cfg;
    memset(&sh, 0, sizeof sh);
    sh.seed = seed;
    c->block = CIC_BLOCK_DIT;
    c->d_model = ds[cic_test_pick(&s, nd)];
    do
        c->heads = hs[cic_test_pick(&s, nh)];
    while (c->d_model % c->heads);
    c->mlp_ratio = 4;
    c->d_mlp = 4 * c->d_model;
    c->tokens = 1 + cic_test_pick(&s, 5);
    c->samples = 1 + cic_test_pick(&s, 3);
    c->layers = 1 + cic_test_pick(&s, 2);
    c->eps = 1e-6;
    c->causal = cic_test_pick(&s, 2);
    c->act = CIC_ACT_GELU_TANH;
    c->d_out = 1 + cic_test_pick(&s, 6);
    c->d_cond = 4 + cic_test_pick(&s, 13);
    c->final_layer = cic_test_pick(&s, 2);
    c->seed = seed;
    c->dist = CIC_DIST_NORMAL;
    c->std = 0.1;
    if (cic_test_pick(&s, 3) == 0) {
        c->outlier_channels = 2;
        c->outlier_scale = 4.0;
    }
    return sh;
}

static shape shape_draw(uint64_t seed)
{
    static const int ds[] = {8, 16}, hs[] = {1, 2, 4};
    return shape_draw_d(seed, ds, 2, hs, 3);
}

static const char *shape_str(char *buf, size_t cap, const shape *sh)
{
    const cic_model_cfg *c = &sh->cfg;
    snprintf(buf, cap,
             "seed %llu: dit d %d heads %d m %d tokens %d samples %d layers %d "
             "d_cond %d final_layer %d d_out %d causal %d outliers %d",
             (unsigned long long)sh->seed, c->d_model, c->heads, c->d_mlp, c->tokens,
             c->samples, c->layers, c->d_cond, (int)c->final_layer, c->d_out,
             (int)c->causal, c->outlier_channels);
    return buf;
}

static cic_model *make_orig(const shape *sh)
{
    char buf[512];
    cic_model *m = cic_model_create(&sh->cfg, sh->cfg.final_layer ? CIC_READOUT_HEAD
                                                                   : CIC_READOUT_RESIDUAL);
    if (!m)
        fail_msg("cic_model_create failed (%s)", shape_str(buf, sizeof buf, sh));
    return m;
}

/* ---- strategies ---- */

typedef struct {
    const char *label;
    enum cic_xform_kind kind;
    enum cic_qkind q;
    enum cic_stream stream;
    bool fast;
    bool any_d; /* allowed when d is not a power of two */
} strat;

static const strat STRATS[] = {
    {"online random", CIC_XFORM_ONLINE_UNROTATE, CIC_Q_RANDOM, CIC_STREAM_CENTERED, false, true},
    {"online hadamard", CIC_XFORM_ONLINE_UNROTATE, CIC_Q_HADAMARD, CIC_STREAM_CENTERED, false, false},
    {"online hadamard fast", CIC_XFORM_ONLINE_UNROTATE, CIC_Q_HADAMARD, CIC_STREAM_CENTERED, true, false},
    {"online mean-preserving random", CIC_XFORM_ONLINE_UNROTATE, CIC_Q_RANDOM,
     CIC_STREAM_MEAN_PRESERVING, false, true},
    {"online mean-preserving hadamard", CIC_XFORM_ONLINE_UNROTATE, CIC_Q_HADAMARD,
     CIC_STREAM_MEAN_PRESERVING, false, false},
    {"per-sample random", CIC_XFORM_PER_SAMPLE_FOLD, CIC_Q_RANDOM, CIC_STREAM_CENTERED, false, true},
    {"per-sample hadamard", CIC_XFORM_PER_SAMPLE_FOLD, CIC_Q_HADAMARD, CIC_STREAM_CENTERED, false, false},
    {"per-sample mean-preserving random", CIC_XFORM_PER_SAMPLE_FOLD, CIC_Q_RANDOM,
     CIC_STREAM_MEAN_PRESERVING, false, true},
    {"per-sample mean-preserving hadamard", CIC_XFORM_PER_SAMPLE_FOLD, CIC_Q_HADAMARD,
     CIC_STREAM_MEAN_PRESERVING, false, false},
    {"branch random", CIC_XFORM_BRANCH_ROTATE, CIC_Q_RANDOM, CIC_STREAM_CENTERED, false, true},
    {"branch hadamard", CIC_XFORM_BRANCH_ROTATE, CIC_Q_HADAMARD, CIC_STREAM_CENTERED, false, false},
    {"branch hadamard fast", CIC_XFORM_BRANCH_ROTATE, CIC_Q_HADAMARD, CIC_STREAM_CENTERED, true, false},
};
#define N_STRATS ((int)(sizeof STRATS / sizeof STRATS[0]))

/* Whether strategy s runs at this shape: Hadamard needs a supported d
 * (and m for branch-rotate), d = K * 2^k with K a Paley order or 1; the
 * mean-preserving Hadamard needs d a power of two. pow2 = false also runs
 * the Hadamard strategies when the widths allow them. */
static bool strat_ok(const strat *st, const cic_model_cfg *c, bool pow2)
{
    if (pow2 || st->any_d)
        return true;
    if (st->q != CIC_Q_HADAMARD)
        return false;
    if (st->stream == CIC_STREAM_MEAN_PRESERVING)
        return c->d_model > 0 && (c->d_model & (c->d_model - 1)) == 0;
    return cic_q_hadamard_supported(c->d_model) &&
           (st->kind != CIC_XFORM_BRANCH_ROTATE || cic_q_hadamard_supported(c->d_mlp));
}

static cic_xform_spec spec_of(const char *label, enum cic_xform_kind kind, enum cic_qkind q,
                              enum cic_stream stream, bool fast, uint64_t q_seed)
{
    cic_xform_spec x = cic_test_xform_spec(label, kind, q, fast);
    x.q_seed = q_seed;
    x.stream = stream;
    return x;
}

static cic_xform_spec spec_strat(const strat *s, uint64_t q_seed)
{
    return spec_of(s->label, s->kind, s->q, s->stream, s->fast, q_seed);
}

static cic_model *apply(const cic_model *orig, const cic_xform_spec *x, const shape *sh)
{
    cic_diag d;
    char buf[512];
    cic_model *m;
    memset(&d, 0, sizeof d);
    m = cic_xform_apply(orig, x, PREC, &d);
    if (!m)
        fail_msg("cic_xform_apply '%s' failed (%s)", x->name, shape_str(buf, sizeof buf, sh));
    return m;
}

/* ---- MPFR helpers ---- */

static size_t n_out(const cic_model *m)
{
    return (size_t)m->rows * (size_t)cic_model_out_cols(m);
}

/* Subtract each row's mean (at WP bits: exact enough to add no error at
 * the 2^-96 scale). v holds rows x cols values at any precision <= WP; the
 * result is rounded once to v's precision. */
static void center_rows(mpfr_t *v, size_t rows, size_t cols)
{
    mpfr_t mean, t;
    size_t i, j;
    mpfr_inits2(WP, mean, t, (mpfr_ptr)0);
    for (i = 0; i < rows; i++) {
        mpfr_set_zero(mean, 1);
        for (j = 0; j < cols; j++)
            mpfr_add(mean, mean, v[i * cols + j], MPFR_RNDN);
        mpfr_div_ui(mean, mean, (unsigned long)cols, MPFR_RNDN);
        for (j = 0; j < cols; j++) {
            mpfr_sub(t, v[i * cols + j], mean, MPFR_RNDN);
            mpfr_set(v[i * cols + j], t, MPFR_RNDN);
        }
    }
    mpfr_clears(mean, t, (mpfr_ptr)0);
}

/* MPFR run of m at PREC (unrounded or rounded weights), mapped to the
 * original basis: the head readout as is (raw, not centered: stricter); the
 * residual readout as y Q^T (m->out_q) then centered per row. Vector at WP
 * bits. */
static mpfr_t *run_mp_mapped(const cic_model *m, bool rounded, const cic_run_opts *o)
{
    size_t rows = (size_t)m->rows, cols = (size_t)cic_model_out_cols(m), n = rows * cols;
    size_t i, j, k;
    mpfr_t *y = cic_mpvec_create(n, PREC), *z = cic_mpvec_create(n, WP);
    assert_non_null(y);
    assert_non_null(z);
    if (o && o->n_samples > 0) {
        rows = (size_t)o->n_samples * (size_t)m->cfg.tokens;
        n = rows * cols;
    }
    assert_int_equal(cic_engine_mpfr_run(y, m, PREC, rounded, o), 0);
    if (m->output == m->residual && m->out_q) {
        mpfr_t acc, p;
        mpfr_inits2(WP, acc, p, (mpfr_ptr)0);
        for (i = 0; i < rows; i++)
            for (j = 0; j < cols; j++) {
                mpfr_set_zero(acc, 1);
                for (k = 0; k < cols; k++) {
                    mpfr_mul(p, y[i * cols + k], m->out_q[j * cols + k], MPFR_RNDN);
                    mpfr_add(acc, acc, p, MPFR_RNDN);
                }
                mpfr_set(z[i * cols + j], acc, MPFR_RNDN);
            }
        mpfr_clears(acc, p, (mpfr_ptr)0);
    } else {
        for (i = 0; i < n; i++)
            mpfr_set(z[i], y[i], MPFR_RNDN);
    }
    if (m->output == m->residual)
        center_rows(z, rows, cols);
    cic_mpvec_destroy(y, (size_t)m->rows * cols);
    return z;
}

/* ||y - x||_2 / ||x||_2 at WP bits, rounded once to double. */
static double rel_mpmp(const mpfr_t *y, const mpfr_t *x, size_t n)
{
    mpfr_t d, num, den;
    size_t i;
    double r;
    mpfr_inits2(WP, d, num, den, (mpfr_ptr)0);
    mpfr_set_zero(num, 1);
    mpfr_set_zero(den, 1);
    for (i = 0; i < n; i++) {
        mpfr_sub(d, y[i], x[i], MPFR_RNDN);
        mpfr_fma(num, d, d, num, MPFR_RNDN);
        mpfr_fma(den, x[i], x[i], den, MPFR_RNDN);
    }
    if (mpfr_zero_p(den)) {
        r = mpfr_zero_p(num) ? 0 : INFINITY;
    } else {
        mpfr_div(num, num, den, MPFR_RNDN);
        mpfr_sqrt(num, num, MPFR_RNDN);
        r = mpfr_get_d(num, MPFR_RNDN);
    }
    mpfr_clears(d, num, den, (mpfr_ptr)0);
    return r;
}

/* ce of a transformed model against the original's mapped truth y0:
 * cic_metric_rel_diff (what the report uses), cross-checked against the
 * test's own rel_mpmp. */
static double ce_vs(const cic_model *m, const mpfr_t *y0, size_t n)
{
    mpfr_t *y1 = run_mp_mapped(m, false, NULL);
    double ce = cic_metric_rel_diff((const mpfr_t *)y1, y0, n, PREC);
    double own = rel_mpmp((const mpfr_t *)y1, y0, n);
    /* both are ~2^-100 .. 2^-128 here; they must agree to a few percent
     * (metric at PREC bits vs WP bits) or both be tiny */
    if (!(fabs(ce - own) <= 0.05 * own + 0x1p-120))
        fail_msg("cic_metric_rel_diff %.6g vs the test's own %.6g", ce, own);
    cic_mpvec_destroy(y1, n);
    return ce;
}

/* ---- 1. f32 engines vs MPFR on the original dit graph ----
 *
 * Bound, as derived in tests/test_engine.c (before f32_bound) and extended
 * to the dit block. u = 2^-24; L' = L, plus 1 for the final layer. Per
 * block the f32 path has dot products of length: d (LN0 mean) + d (LN0
 * variance) + d (qkv) + d/h (scores) + N (softmax sum) + N (P V) + d
 * (proj) + 2d (LN0 of norm2) + d (fc1) + m (fc2), i.e. <= 8d + m + 2N, and
 * the modulation adds one of length d_c (SiLU(c) W_ada^T) feeding shift,
 * scale and gate; the ~35 elementwise roundings (modulate 2, gate 1, add 1,
 * gelu-tanh ~9 incl. tanhf's ~2 ulp, softmax exp, LN's div/sqrt) are
 * covered by the slack 5m + 4N - 2d >= 64 since m = 4d. So a block path is
 * <= 6 (d + m + N + d_c) roundings of relative size <= u. Modelling them as
 * independent, zero mean, variance <= u^2 / 3 (Higham & Mary 2019), a block
 * contributes variance <= 2 (d + m + N + d_c) u^2, blocks add in variance
 * (amplification ~1: LN0 is scale invariant; |1 + scale|, |gate| and the
 * weights' norms 0.1 (sqrt(k) + sqrt(n)) are O(1) for these shapes), and a
 * lambda-sigma bound with lambda = 3 is
 *     BOUND = 3 sqrt(2 L' (d + m + N + d_c)) u.
 * The residual readout is compared after centering each row (both sides, in
 * MPFR): centering is a projection, so it does not grow the absolute error,
 * and the row means are small against the rows here (X0 ~ N(0, 1)). */
#define LAMBDA 3.0

static double f32_bound(const shape *sh)
{
    const cic_model_cfg *c = &sh->cfg;
    int lp = c->layers + (c->final_layer ? 1 : 0);
    return LAMBDA * sqrt(2.0 * lp * (c->d_model + c->d_mlp + c->tokens + c->d_cond)) * U32;
}

static void test_f32_vs_mpfr(void **state)
{
    int k, mm, n_shapes = 24 * cic_test_multiplier(), n_bitdiff = 0;
    double worst[CIC_MATMUL_COUNT] = {0, 0}, worst_u = 0, worst_gain = 0;
    char buf[512];
    (void)state;
    for (k = 0; k < n_shapes; k++) {
        shape sh = shape_draw(100 + (uint64_t)k);
        cic_model *m = make_orig(&sh);
        size_t n = n_out(m), rows = (size_t)m->rows, cols = (size_t)cic_model_out_cols(m), i;
        mpfr_t *x = run_mp_mapped(m, false, NULL), *yv = cic_mpvec_create(n, WP);
        float *yr = cic_calloc(n, sizeof *yr);
        double bound = f32_bound(&sh), rounded_err;
        bool bitdiff = false;
        assert_non_null(yv);
        assert_non_null(yr);
        /* rounding the truth alone: the f32 engines must do worse */
        cic_mpvec_get_f32(yr, (const mpfr_t *)x, n);
        cic_mpvec_set_f32(yv, yr, n);
        rounded_err = rel_mpmp((const mpfr_t *)yv, (const mpfr_t *)x, n);
        for (mm = 0; mm < CIC_MATMUL_COUNT; mm++) {
            float *y = cic_calloc(n, sizeof *y);
            double e;
            assert_non_null(y);
            assert_int_equal(cic_engine_f32_run(y, m, (enum cic_matmul)mm, NULL), 0);
            for (i = 0; i < n; i++) {
                if (!isfinite(y[i]))
                    fail_msg("%s: nonfinite output %g at %zu (%s)", CIC_ENGINE_F32_NAME[mm],
                             (double)y[i], i, shape_str(buf, sizeof buf, &sh));
                if (memcmp(&y[i], &yr[i], sizeof(float)) != 0)
                    bitdiff = true;
            }
            cic_mpvec_set_f32(yv, y, n);
            if (!sh.cfg.final_layer)
                center_rows(yv, rows, cols);
            e = rel_mpmp((const mpfr_t *)yv, (const mpfr_t *)x, n);
            if (!(e <= bound))
                fail_msg("%s vs mpfr-128: rel_norm2 %.3g > bound %.3g (%s)",
                         CIC_ENGINE_F32_NAME[mm], e, bound, shape_str(buf, sizeof buf, &sh));
            if (!(e > 0))
                fail_msg("%s vs mpfr-128: zero error, f32 not run in float? (%s)",
                         CIC_ENGINE_F32_NAME[mm], shape_str(buf, sizeof buf, &sh));
            if (e / bound > worst[mm])
                worst[mm] = e / bound;
            if (e / U32 > worst_u)
                worst_u = e / U32;
            if (rounded_err > 0 && e / rounded_err > worst_gain)
                worst_gain = e / rounded_err;
            free(y);
        }
        if (bitdiff)
            n_bitdiff++;
        free(yr);
        cic_mpvec_destroy(yv, n);
        cic_mpvec_destroy(x, n);
        cic_model_destroy(m);
    }
    printf("dit f32 vs mpfr-128 over %d shapes: worst rel_norm2 %.3g u; worst / BOUND: "
           "openblas %.3g, fixed-order %.3g; worst / rounding-only %.3g; shapes with "
           "outputs != round(truth): %d\n",
           n_shapes, worst_u, worst[0], worst[1], worst_gain, n_bitdiff);
    /* the f32 engines ran in float: more error than one final rounding,
     * and outputs that differ bitwise from the rounded truth */
    assert_true(worst_gain > 2);
    assert_true(n_bitdiff * 2 >= n_shapes);
}

/* ---- 2. exact strategies under the equivalent threshold ---- */

static double g_worst_ce = 0;

static void check_strats(const shape *sh, bool pow2, uint64_t q_seed)
{
    char buf[512];
    cic_model *orig = make_orig(sh);
    size_t n = n_out(orig);
    mpfr_t *y0 = run_mp_mapped(orig, false, NULL);
    int i;
    for (i = 0; i < N_STRATS; i++) {
        cic_xform_spec x = spec_strat(&STRATS[i], q_seed);
        cic_model *m;
        double ce, eq, br;
        if (!strat_ok(&STRATS[i], &sh->cfg, pow2))
            continue;
        m = apply(orig, &x, sh);
        { /* not vacuous: the transform rewrote weights or inputs */
            char h0[65], h1[65];
            cic_model_weights_sha256(h0, orig);
            cic_model_weights_sha256(h1, m);
            if (!strcmp(h0, h1))
                fail_msg("%s: transformed weights identical to the original (%s)",
                         STRATS[i].label, shape_str(buf, sizeof buf, sh));
        }
        ce = ce_vs(m, (const mpfr_t *)y0, n);
        cic_xform_thresholds(&eq, &br, &x, PREC);
        if (!(ce <= eq))
            fail_msg("%s: ce %.3g above the equivalent threshold %.3g (q_seed %llu, %s)",
                     STRATS[i].label, ce, eq, (unsigned long long)q_seed,
                     shape_str(buf, sizeof buf, sh));
        assert_int_equal(cic_xform_verdict(ce, eq, br), CIC_VERDICT_EQUIVALENT);
        if (ce > g_worst_ce)
            g_worst_ce = ce;
        cic_model_destroy(m);
    }
    cic_mpvec_destroy(y0, n);
    cic_model_destroy(orig);
}

static void test_strategies_exact(void **state)
{
    int k, n = 6 * cic_test_multiplier();
    (void)state;
    g_worst_ce = 0;
    for (k = 0; k < n; k++) {
        shape sh = shape_draw(300 + (uint64_t)k);
        check_strats(&sh, true, 11 + (uint64_t)k);
    }
    printf("exact strategies, d in {8, 16}: worst ce %.3g = 2^%.1f (threshold 2^-96)\n",
           g_worst_ce, log2(g_worst_ce));
}

static void test_strategies_exact_non_pow2(void **state)
{
    static const int ds[] = {12, 24}, hs[] = {2, 3};
    int k, n = 3 * cic_test_multiplier();
    (void)state;
    g_worst_ce = 0;
    for (k = 0; k < n; k++) {
        shape sh = shape_draw_d(400 + (uint64_t)k, ds, 2, hs, 2);
        check_strats(&sh, false, 21 + (uint64_t)k);
    }
    printf("exact strategies, d in {12, 24}: worst ce %.3g = 2^%.1f\n", g_worst_ce,
           log2(g_worst_ce));
}

static void check_flops(const cic_model *m, const cic_xform_spec *x, const shape *sh,
                        const char *label);

/* cic_xform_check on case c accepts it (want NULL) or refuses it with a
 * message containing want. */
static void xform_check_says(const cic_case *c, const char *want, const char *label)
{
    cic_diag dg;
    int rc;
    memset(&dg, 0, sizeof dg);
    rc = cic_xform_check(CIC_CASE_CHAIN(c), &dg);
    if (!want) {
        if (rc != CIC_OK)
            fail_msg("%s refused: %s", label, dg.msg);
        return;
    }
    assert_int_equal(rc, CIC_EINPUT);
    if (!strstr(dg.msg, want))
        fail_msg("%s: \"%s\" lacks \"%s\"", label, dg.msg, want);
    print_message("%s\n", dg.msg);
}

/* cic_xform_check: Paley widths accepted for the fast online-unrotate and
 * branch-rotate; unsupported widths refused with the nearest sizes. */
static void test_check_paley_widths(void **state)
{
    static const struct {
        int d, m;
        enum cic_xform_kind kind;
        const char *want; /* NULL: accepted */
    } cases[] = {
        {40, 160, CIC_XFORM_ONLINE_UNROTATE, NULL},
        {40, 160, CIC_XFORM_BRANCH_ROTATE, NULL},
        {72, 288, CIC_XFORM_BRANCH_ROTATE, NULL},
        {1152, 4608, CIC_XFORM_ONLINE_UNROTATE, NULL},
        {92, 368, CIC_XFORM_ONLINE_UNROTATE, "d_model = 92; supported Hadamard sizes"},
        {156, 624, CIC_XFORM_ONLINE_UNROTATE, NULL},
        {188, 752, CIC_XFORM_ONLINE_UNROTATE, "nearest: 180 and 192"},
        {24, 92, CIC_XFORM_BRANCH_ROTATE, "MLP width 92 too; supported Hadamard sizes"},
    };
    cic_case *c = calloc(1, sizeof *c);
    size_t a;
    (void)state;
    assert_non_null(c);
    for (a = 0; a < sizeof cases / sizeof cases[0]; a++) {
        char label[160];
        c->model.d_model = cases[a].d;
        c->model.d_mlp = cases[a].m;
        c->n_xf = 1;
        c->xf[0] = spec_of("h", cases[a].kind, CIC_Q_HADAMARD, CIC_STREAM_CENTERED, true, 1);
        snprintf(label, sizeof label, "d %d m %d", cases[a].d, cases[a].m);
        xform_check_says(c, cases[a].want, label);
    }
    free(c);
}

/* Non-power-of-two Hadamard rotations (d = 20 * 2, 12 * 2, 36 * 2; m = 4d):
 * every strategy the widths allow, the fast online-unrotate and fast
 * branch-rotate among them, is equivalent. */
static void test_strategies_exact_paley(void **state)
{
    static const int ds[] = {40, 24}, hs[] = {2, 4, 5, 3};
    static const int d72[] = {72}, h72[] = {3, 4};
    int k, n = 2 * cic_test_multiplier();
    (void)state;
    g_worst_ce = 0;
    for (k = 0; k < n; k++) {
        shape sh = shape_draw_d(450 + (uint64_t)k, ds, 2, hs, 4);
        check_strats(&sh, false, 31 + (uint64_t)k);
    }
    {
        shape sh = shape_draw_d(460, d72, 1, h72, 2);
        sh.cfg.layers = 1;
        sh.cfg.tokens = 2;
        sh.cfg.samples = 1;
        check_strats(&sh, false, 41);
    }
    printf("exact strategies, d in {24, 40, 72} (Paley bases): worst ce %.3g = 2^%.1f\n",
           g_worst_ce, log2(g_worst_ce));
}

/* The fast transform equals the dense product: online-unrotate fast and
 * dense with the same Q (same q_seed) at d = 24, 40, 72 agree to the
 * precision (far below the equivalent threshold), and so do the fast and
 * dense branch-rotate; the f32 engines agree with each other's FLOPs. */
static void test_fast_vs_dense_paley(void **state)
{
    static const int ds[][1] = {{24}, {40}, {72}}, hs[] = {4};
    static const enum cic_xform_kind kinds[] = {CIC_XFORM_ONLINE_UNROTATE,
                                                CIC_XFORM_BRANCH_ROTATE};
    int a, k;
    char buf[512];
    (void)state;
    for (a = 0; a < 3; a++)
        for (k = 0; k < 2; k++) {
            shape sh = shape_draw_d(470 + (uint64_t)a, ds[a], 1, hs, 1);
            cic_model *orig, *mf, *md;
            cic_xform_spec xf, xd;
            mpfr_t *yf, *yd;
            size_t n;
            double diff;
            sh.cfg.layers = 1;
            sh.cfg.final_layer = true;
            orig = make_orig(&sh);
            xf = spec_of("fast", kinds[k], CIC_Q_HADAMARD, CIC_STREAM_CENTERED, true, 9);
            xd = spec_of("dense", kinds[k], CIC_Q_HADAMARD, CIC_STREAM_CENTERED, false, 9);
            mf = apply(orig, &xf, &sh);
            md = apply(orig, &xd, &sh);
            n = n_out(mf);
            yf = run_mp_mapped(mf, false, NULL);
            yd = run_mp_mapped(md, false, NULL);
            diff = rel_mpmp((const mpfr_t *)yf, (const mpfr_t *)yd, n);
            if (!(diff <= 0x1p-110))
                fail_msg("fast vs dense %s: rel diff %.3g (%s)",
                         k ? "branch-rotate" : "online-unrotate", diff,
                         shape_str(buf, sizeof buf, &sh));
            print_message("fast vs dense %s d %d: rel diff %.3g\n",
                          k ? "branch" : "online", sh.cfg.d_model, diff);
            check_flops(mf, &xf, &sh, "fast (Paley)");
            cic_mpvec_destroy(yf, n);
            cic_mpvec_destroy(yd, n);
            cic_model_destroy(mf);
            cic_model_destroy(md);
            cic_model_destroy(orig);
        }
}

/* cic_xform_check with a forced base order (hadamard_base): it must fit
 * d_model (and, for branch-rotate, d_mlp, which it rotates with the same
 * base); a mean-preserving Hadamard with a fitting base is accepted at a d
 * that is not a power of two; the message names the transform, the width,
 * K and the orders allowed. */
static void test_check_hadamard_base(void **state)
{
    static const struct {
        enum cic_xform_kind kind;
        enum cic_stream stream;
        bool fast;
        int d, m, K;
        const char *want; /* NULL: accepted */
    } cases[] = {
        {CIC_XFORM_ROTATE, CIC_STREAM_CENTERED, false, 256, 1024, 32, NULL},
        {CIC_XFORM_ROTATE, CIC_STREAM_CENTERED, false, 256, 1024, 128, NULL},
        {CIC_XFORM_ROTATE, CIC_STREAM_CENTERED, false, 256, 1024, 1, NULL},
        {CIC_XFORM_ROTATE, CIC_STREAM_CENTERED, false, 256, 1024, 16,
         "transform 'h': hadamard_base = 16 does not fit d_model = 256: 16 has no Hadamard "
         "construction here (1, a Paley order or a Williamson order); the base orders of 256 "
         "are 1, 4, 8, 32, 128 (or 0: automatic)"},
        {CIC_XFORM_ROTATE, CIC_STREAM_CENTERED, false, 256, 1024, 12,
         "hadamard_base = 12 does not fit d_model = 256: 256 is not 12 * 2^k"},
        {CIC_XFORM_ROTATE, CIC_STREAM_CENTERED, false, 40, 160, 1,
         "hadamard_base = 1 does not fit d_model = 40: 40 is not 1 * 2^k; the base orders of "
         "40 are 20 (or 0: automatic)"},
        {CIC_XFORM_ONLINE_UNROTATE, CIC_STREAM_CENTERED, true, 64, 256, 32, NULL},
        {CIC_XFORM_BRANCH_ROTATE, CIC_STREAM_CENTERED, true, 64, 256, 32, NULL},
        {CIC_XFORM_BRANCH_ROTATE, CIC_STREAM_CENTERED, false, 64, 192, 32,
         "hadamard_base = 32 does not fit the MLP width d_mlp = 192: 192 is not 32 * 2^k; the "
         "base orders of 192 are 12, 24, 48, 192 (or 0: automatic)"},
        /* online-unrotate has no Q of the MLP width: 192 is not checked */
        {CIC_XFORM_ONLINE_UNROTATE, CIC_STREAM_CENTERED, true, 64, 192, 32, NULL},
        {CIC_XFORM_PER_SAMPLE_FOLD, CIC_STREAM_MEAN_PRESERVING, false, 40, 160, 20, NULL},
        {CIC_XFORM_ONLINE_UNROTATE, CIC_STREAM_MEAN_PRESERVING, false, 40, 160, 0,
         "a mean-preserving Hadamard Q needs d_model a power of two"},
        {CIC_XFORM_STATIC_FOLD, CIC_STREAM_MEAN_PRESERVING, false, 64, 256, 8, NULL},
        {CIC_XFORM_STATIC_FOLD, CIC_STREAM_CENTERED, false, 64, 256, 64,
         "hadamard_base = 64 does not fit d_model = 64: 64 has no Hadamard construction"},
    };
    cic_case *c = calloc(1, sizeof *c);
    size_t a;
    (void)state;
    assert_non_null(c);
    for (a = 0; a < sizeof cases / sizeof cases[0]; a++) {
        char label[160];
        c->model.d_model = cases[a].d;
        c->model.d_mlp = cases[a].m;
        c->n_xf = 1;
        c->xf[0] = spec_of("h", cases[a].kind, CIC_Q_HADAMARD, cases[a].stream, cases[a].fast, 1);
        c->xf[0].hadamard_base = cases[a].K;
        snprintf(label, sizeof label, "%s d %d m %d K %d", CIC_XFORM_NAME[cases[a].kind],
                 cases[a].d, cases[a].m, cases[a].K);
        xform_check_says(c, cases[a].want, label);
    }
    free(c);
}

/* cic_xform_check for regular Hadamards and groups: orders 4^k (d_model,
 * and the MLP width for branch-rotate; only the blocks with a group), no
 * mean-preserving stream; a group must divide both widths. */
static void test_check_regular_and_group(void **state)
{
    static const struct {
        enum cic_xform_kind kind;
        enum cic_qkind q;
        enum cic_stream stream;
        int d, m, group;
        const char *want; /* NULL: accepted */
    } cases[] = {
        {CIC_XFORM_ROTATE, CIC_Q_REGULAR, CIC_STREAM_CENTERED, 256, 1024, 0, NULL},
        {CIC_XFORM_ROTATE, CIC_Q_REGULAR, CIC_STREAM_CENTERED, 128, 512, 0,
         "transform 'h': q = \"regular-hadamard\" needs orders 4^k (4, 16, 64, 256, 1024, "
         "4096, ...): d_model = 128; use q = \"hadamard\""},
        {CIC_XFORM_BRANCH_ROTATE, CIC_Q_REGULAR, CIC_STREAM_CENTERED, 64, 128, 0,
         "d_model = 64, the MLP width 128; set group = G (a 4^k dividing them)"},
        {CIC_XFORM_BRANCH_ROTATE, CIC_Q_REGULAR, CIC_STREAM_CENTERED, 128, 512, 64, NULL},
        {CIC_XFORM_BRANCH_ROTATE, CIC_Q_REGULAR, CIC_STREAM_CENTERED, 128, 512, 32,
         "group = 32 must divide d_model = 128 and the MLP width 512 and be 4^k"},
        {CIC_XFORM_BRANCH_ROTATE, CIC_Q_RANDOM, CIC_STREAM_CENTERED, 96, 384, 48, NULL},
        {CIC_XFORM_BRANCH_ROTATE, CIC_Q_RANDOM, CIC_STREAM_CENTERED, 96, 384, 64,
         "group = 64 must divide d_model = 96 and the MLP width 384"},
        {CIC_XFORM_BRANCH_ROTATE, CIC_Q_HADAMARD, CIC_STREAM_CENTERED, 96, 384, 48, NULL},
        {CIC_XFORM_BRANCH_ROTATE, CIC_Q_HADAMARD, CIC_STREAM_CENTERED, 96, 384, 6,
         "group = 6 must divide d_model = 96 and the MLP width 384 and have a Hadamard matrix"},
        {CIC_XFORM_BRANCH_ROTATE, CIC_Q_RANDOM, CIC_STREAM_CENTERED, 96, 384, 6, NULL},
        {CIC_XFORM_PER_SAMPLE_FOLD, CIC_Q_REGULAR, CIC_STREAM_MEAN_PRESERVING, 64, 256, 0,
         "a mean-preserving Q is not a regular Hadamard"},
        {CIC_XFORM_ONLINE_UNROTATE, CIC_Q_REGULAR, CIC_STREAM_CENTERED, 64, 96, 0, NULL},
    };
    cic_case *c = calloc(1, sizeof *c);
    size_t a;
    (void)state;
    assert_non_null(c);
    for (a = 0; a < sizeof cases / sizeof cases[0]; a++) {
        char label[160];
        c->model.d_model = cases[a].d;
        c->model.d_mlp = cases[a].m;
        c->n_xf = 1;
        c->xf[0] = spec_of("h", cases[a].kind, cases[a].q, cases[a].stream, false, 1);
        c->xf[0].group = cases[a].group;
        snprintf(label, sizeof label, "%s q %s d %d m %d group %d",
                 CIC_XFORM_NAME[cases[a].kind], CIC_Q_NAME[cases[a].q], cases[a].d, cases[a].m,
                 cases[a].group);
        xform_check_says(c, cases[a].want, label);
    }
    free(c);
}

/* The Hadamard strategies with a forced base order (16 = 4 x 4 and 8 x 2,
 * m = 64; 24 = 24 x 1 where the automatic base is 12, m = 96): every one
 * is equivalent, the fast graph's FWHT ops carry hbase = K at both widths,
 * the fast and the dense variants agree to the precision (the same
 * matrix), the engines' FLOPs equal cic_flops_dit's (which cost the fast
 * ops with K), and a dense Q with the forced base is not the automatic one
 * (other weights). The mean-preserving Hadamard runs at d = 24, which has
 * none without a forced base. */
static void test_strategies_forced_base(void **state)
{
    static const struct {
        int d, K;
    } cases[] = {{16, 4}, {16, 8}, {24, 24}};
    static const int hs[] = {4};
    size_t a;
    int i;
    char buf[512];
    (void)state;
    for (a = 0; a < sizeof cases / sizeof cases[0]; a++) {
        int ds[1] = {cases[a].d};
        shape sh = shape_draw_d(480 + (uint64_t)a, ds, 1, hs, 1);
        cic_model *orig;
        size_t n;
        mpfr_t *y0;
        sh.cfg.layers = 1;
        orig = make_orig(&sh);
        n = n_out(orig);
        y0 = run_mp_mapped(orig, false, NULL);
        for (i = 0; i < N_STRATS; i++) {
            const strat *st = &STRATS[i];
            cic_xform_spec x = spec_strat(st, 13), xa = x, xd = x;
            cic_model *m, *ma, *md;
            double ce, eq, br;
            int j, nfast = 0;
            char h0[65], h1[65];
            if (st->q != CIC_Q_HADAMARD)
                continue;
            x.hadamard_base = cases[a].K;
            m = apply(orig, &x, &sh);
            ce = ce_vs(m, (const mpfr_t *)y0, n);
            cic_xform_thresholds(&eq, &br, &x, PREC);
            if (!(ce <= eq))
                fail_msg("%s K %d: ce %.3g above %.3g (%s)", st->label, cases[a].K, ce, eq,
                         shape_str(buf, sizeof buf, &sh));
            check_flops(m, &x, &sh, st->label);
            for (j = 0; j < m->n_ops; j++)
                if (m->ops[j].kind == CIC_OP_FWHT) {
                    assert_int_equal(m->ops[j].hbase, cases[a].K);
                    nfast++;
                }
            assert_true(st->fast ? nfast > 0 : nfast == 0);
            if (st->fast) { /* the dense variant with the same Q */
                mpfr_t *yf = run_mp_mapped(m, false, NULL), *yd;
                double diff;
                xd.fast = false;
                xd.hadamard_base = cases[a].K;
                md = apply(orig, &xd, &sh);
                yd = run_mp_mapped(md, false, NULL);
                diff = rel_mpmp((const mpfr_t *)yf, (const mpfr_t *)yd, n);
                if (!(diff <= 0x1p-110))
                    fail_msg("%s K %d: fast vs dense rel diff %.3g (%s)", st->label,
                             cases[a].K, diff, shape_str(buf, sizeof buf, &sh));
                cic_mpvec_destroy(yf, n);
                cic_mpvec_destroy(yd, n);
                cic_model_destroy(md);
            } else if (st->stream != CIC_STREAM_MEAN_PRESERVING ||
                       (cases[a].d & (cases[a].d - 1)) == 0) {
                /* another Q than the automatic base's (which a mean-preserving
                 * Q has only for powers of two) */
                ma = apply(orig, &xa, &sh);
                cic_model_weights_sha256(h0, ma);
                cic_model_weights_sha256(h1, m);
                if (!strcmp(h0, h1))
                    fail_msg("%s K %d: the same weights as the automatic base", st->label,
                             cases[a].K);
                cic_model_destroy(ma);
            }
            print_message("%s d %d K %d: ce %.3g\n", st->label, cases[a].d, cases[a].K, ce);
            cic_model_destroy(m);
        }
        cic_mpvec_destroy(y0, n);
        cic_model_destroy(orig);
    }
}

/* Group-wise and regular rotations (ConvRot): on d 16 (4^2), MLP 64 (4^3),
 * a few seeds, each of these is equivalent in MPFR with FLOPs counted = the
 * closed form: branch-rotate with blocks of 4 and 16 (random, Sylvester
 * and regular Hadamard blocks, dense and fast), the whole-row regular
 * Hadamard (dense and fast), online-unrotate with the fast regular op,
 * per-sample-fold with a regular Q. A dense group op holds one [G, G]
 * block; fast and dense regular agree to 2^-110; clearing the op's regular
 * flag (the Sylvester transform with the regular Q fused into the weights)
 * is broken. */
static void test_group_and_regular(void **state)
{
    static const struct {
        enum cic_xform_kind kind;
        enum cic_qkind q;
        bool fast;
        int group;
    } cases[] = {
        {CIC_XFORM_BRANCH_ROTATE, CIC_Q_RANDOM, false, 4},
        {CIC_XFORM_BRANCH_ROTATE, CIC_Q_RANDOM, false, 16},
        {CIC_XFORM_BRANCH_ROTATE, CIC_Q_HADAMARD, false, 16},
        {CIC_XFORM_BRANCH_ROTATE, CIC_Q_REGULAR, false, 16},
        {CIC_XFORM_BRANCH_ROTATE, CIC_Q_REGULAR, true, 4},
        {CIC_XFORM_BRANCH_ROTATE, CIC_Q_REGULAR, true, 16},
        {CIC_XFORM_BRANCH_ROTATE, CIC_Q_REGULAR, true, 0},
        {CIC_XFORM_BRANCH_ROTATE, CIC_Q_REGULAR, false, 0},
        {CIC_XFORM_ONLINE_UNROTATE, CIC_Q_REGULAR, true, 0},
        {CIC_XFORM_PER_SAMPLE_FOLD, CIC_Q_REGULAR, false, 0},
    };
    static const int ds[] = {16}, hs[] = {2, 4};
    int k, n = 2 * cic_test_multiplier();
    char buf[512];
    (void)state;
    for (k = 0; k < n; k++) {
        shape sh = shape_draw_d(700 + (uint64_t)k, ds, 1, hs, 2);
        cic_model *orig = make_orig(&sh);
        size_t no = n_out(orig), a;
        mpfr_t *y0 = run_mp_mapped(orig, false, NULL);
        for (a = 0; a < sizeof cases / sizeof cases[0]; a++) {
            cic_xform_spec x = spec_of("grp", cases[a].kind, cases[a].q, CIC_STREAM_CENTERED,
                                       cases[a].fast, 40 + (uint64_t)k);
            cic_model *m;
            double ce, eq, br;
            int j, nblk = 0;
            x.group = cases[a].group;
            m = apply(orig, &x, &sh);
            ce = ce_vs(m, (const mpfr_t *)y0, no);
            cic_xform_thresholds(&eq, &br, &x, PREC);
            if (!(ce <= eq))
                fail_msg("%s q %s fast %d group %d: ce %.3g above %.3g (%s)",
                         CIC_XFORM_NAME[x.kind], CIC_Q_NAME[x.q], (int)x.fast, x.group, ce, eq,
                         shape_str(buf, sizeof buf, &sh));
            check_flops(m, &x, &sh, CIC_XFORM_NAME[x.kind]);
            for (j = 0; j < m->n_ops; j++) {
                const cic_op *o = &m->ops[j];
                if (o->kind == CIC_OP_LINEAR && o->group > 0) {
                    assert_int_equal(m->t[o->w].rows, x.group);
                    assert_int_equal(m->t[o->w].cols, x.group);
                    nblk++;
                }
                if (o->kind == CIC_OP_FWHT)
                    assert_int_equal(o->regular, x.q == CIC_Q_REGULAR);
            }
            assert_true((x.group > 0 && !x.fast) == (nblk > 0));
            if (x.q == CIC_Q_REGULAR && x.fast) {
                cic_xform_spec xd = x;
                cic_model *md;
                mpfr_t *yf = run_mp_mapped(m, false, NULL), *yd;
                double diff;
                xd.fast = false;
                md = apply(orig, &xd, &sh);
                yd = run_mp_mapped(md, false, NULL);
                diff = rel_mpmp((const mpfr_t *)yf, (const mpfr_t *)yd, no);
                if (!(diff <= 0x1p-110))
                    fail_msg("regular fast vs dense, group %d: rel diff %.3g", x.group, diff);
                cic_mpvec_destroy(yf, no);
                cic_mpvec_destroy(yd, no);
                cic_model_destroy(md);
                for (j = 0; j < m->n_ops; j++)
                    m->ops[j].regular = false; /* Sylvester where the weights hold R */
                ce = ce_vs(m, (const mpfr_t *)y0, no);
                if (cic_xform_verdict(ce, eq, br) != CIC_VERDICT_BROKEN)
                    fail_msg("%s group %d: the Sylvester op in place of the regular one is not "
                             "broken (ce %.3g)", CIC_XFORM_NAME[x.kind], x.group, ce);
            }
            cic_model_destroy(m);
        }
        cic_mpvec_destroy(y0, no);
        cic_model_destroy(orig);
    }
    print_message("group-wise and regular rotations: %zu kinds x %d shapes equivalent\n",
                  sizeof cases / sizeof cases[0], n);
}

/* Planted fault: one entry of rot.q changed by a relative 2^-30 after the
 * transform; the ce check must flag it (it stays far below "broken", so
 * the verdict is inconclusive rather than equivalent). */
static void test_fault_caught(void **state)
{
    static const int ds[] = {16}, hs[] = {2};
    shape sh = shape_draw_d(77, ds, 1, hs, 1);
    cic_model *orig, *m;
    size_t n;
    mpfr_t *y0;
    int kinds, id;
    char buf[512];
    (void)state;
    sh.cfg.samples = 2;
    sh.cfg.tokens = 3;
    orig = make_orig(&sh);
    n = n_out(orig);
    y0 = run_mp_mapped(orig, false, NULL);
    for (kinds = 0; kinds < 2; kinds++) {
        cic_xform_spec x = kinds == 0
            ? spec_of("online", CIC_XFORM_ONLINE_UNROTATE, CIC_Q_RANDOM, CIC_STREAM_CENTERED, false, 5)
            : spec_of("per-sample", CIC_XFORM_PER_SAMPLE_FOLD, CIC_Q_RANDOM, CIC_STREAM_CENTERED, false, 5);
        double ce0, ce1, eq, br;
        cic_tensor *t;
        size_t e;
        m = apply(orig, &x, &sh);
        cic_xform_thresholds(&eq, &br, &x, PREC);
        ce0 = ce_vs(m, (const mpfr_t *)y0, n);
        id = cic_model_tensor_find(m, "rot.q");
        assert_true(id >= 0);
        t = &m->t[id];
        e = (size_t)t->cols + 1; /* Q[1][1] */
        if (t->hp)
            mpfr_mul_d(t->hp[e], t->hp[e], 1.0 + 0x1p-30, MPFR_RNDN);
        t->f32[e] *= 1.0f + 0x1p-20f;
        ce1 = ce_vs(m, (const mpfr_t *)y0, n);
        printf("planted fault in rot.q (%s): ce %.3g -> %.3g (equivalent threshold %.3g)\n",
               x.name, ce0, ce1, eq);
        if (!(ce0 <= eq && ce1 > eq))
            fail_msg("%s: fault not caught: ce before %.3g, after %.3g, threshold %.3g (%s)",
                     x.name, ce0, ce1, eq, shape_str(buf, sizeof buf, &sh));
        assert_int_not_equal(cic_xform_verdict(ce1, eq, br), CIC_VERDICT_EQUIVALENT);
        cic_model_destroy(m);
    }
    cic_mpvec_destroy(y0, n);
    cic_model_destroy(orig);
}

/* ---- 3. static-fold ---- */

static void test_static_fold(void **state)
{
    int k, n = 6 * cic_test_multiplier();
    double worst_cal = 0, min_other = INFINITY, worst_same = 0;
    char buf[512];
    (void)state;
    for (k = 0; k < n; k++) {
        shape sh = shape_draw(500 + (uint64_t)k);
        cic_model *orig, *m, *same_orig;
        cic_xform_spec x = spec_of("static", CIC_XFORM_STATIC_FOLD,
                                   (k & 1) ? CIC_Q_HADAMARD : CIC_Q_RANDOM,
                                   (k % 3 == 2) ? CIC_STREAM_MEAN_PRESERVING : CIC_STREAM_CENTERED,
                                   false, 31 + (uint64_t)k);
        size_t nn, per;
        mpfr_t *y0, *y1;
        double eq, br, ce;
        int s, dc, c0;
        if (sh.cfg.samples < 2)
            sh.cfg.samples = 2 + (k & 1);
        x.calibration = c0 = k % sh.cfg.samples;
        cic_xform_thresholds(&eq, &br, &x, PREC);
        orig = make_orig(&sh);
        nn = n_out(orig);
        per = nn / (size_t)sh.cfg.samples;
        y0 = run_mp_mapped(orig, false, NULL);
        m = apply(orig, &x, &sh);
        y1 = run_mp_mapped(m, false, NULL);
        for (s = 0; s < sh.cfg.samples; s++) {
            ce = cic_metric_rel_diff((const mpfr_t *)y1 + per * s,
                                     (const mpfr_t *)y0 + per * s, per, PREC);
            if (s == c0) {
                if (!(ce <= eq))
                    fail_msg("static-fold calibration sample %d: ce %.3g > %.3g (%s)", s,
                             ce, eq, shape_str(buf, sizeof buf, &sh));
                if (ce > worst_cal)
                    worst_cal = ce;
            } else {
                if (!(ce >= br))
                    fail_msg("static-fold sample %d (calibration %d): ce %.3g below the "
                             "broken threshold %.3g (%s)", s, c0, ce, br,
                             shape_str(buf, sizeof buf, &sh));
                if (ce < min_other)
                    min_other = ce;
            }
        }
        cic_mpvec_destroy(y1, nn);
        cic_model_destroy(m);
        /* every sample conditioned on c0: exact everywhere */
        same_orig = make_orig(&sh);
        dc = sh.cfg.d_cond;
        {
            cic_tensor *t = &same_orig->t[same_orig->cond];
            assert_int_equal(t->rows, sh.cfg.samples);
            assert_int_equal(t->cols, dc);
            assert_null(t->hp);
            for (s = 0; s < sh.cfg.samples; s++)
                memcpy(t->f32 + (size_t)s * dc, t->f32 + (size_t)c0 * dc, (size_t)dc * sizeof(float));
        }
        cic_mpvec_destroy(y0, nn);
        y0 = run_mp_mapped(same_orig, false, NULL);
        m = apply(same_orig, &x, &sh);
        y1 = run_mp_mapped(m, false, NULL);
        for (s = 0; s < sh.cfg.samples; s++) {
            ce = cic_metric_rel_diff((const mpfr_t *)y1 + per * s,
                                     (const mpfr_t *)y0 + per * s, per, PREC);
            if (!(ce <= eq))
                fail_msg("static-fold, shared c: sample %d ce %.3g > %.3g (%s)", s, ce, eq,
                         shape_str(buf, sizeof buf, &sh));
            if (ce > worst_same)
                worst_same = ce;
        }
        cic_mpvec_destroy(y0, nn);
        cic_mpvec_destroy(y1, nn);
        cic_model_destroy(m);
        cic_model_destroy(same_orig);
        cic_model_destroy(orig);
    }
    printf("static-fold: worst calibration-sample ce %.3g, smallest other-sample ce %.3g "
           "(broken from 2^-7 = %.3g), worst shared-c ce %.3g\n",
           worst_cal, min_other, 0x1p-7, worst_same);
}

/* ---- 4. FLOPs: counted = closed form, per site, exactly ---- */

static void count(cic_flop_count *fc, const cic_model *m, int engine)
{
    cic_run_opts o;
    size_t n = n_out(m);
    memset(&o, 0, sizeof o);
    memset(fc, 0, sizeof *fc);
    o.flops = fc;
    if (engine < CIC_MATMUL_COUNT) {
        float *y = cic_calloc(n, sizeof *y);
        assert_non_null(y);
        assert_int_equal(cic_engine_f32_run(y, m, (enum cic_matmul)engine, &o), 0);
        free(y);
    } else {
        mpfr_t *y = cic_mpvec_create(n, PREC);
        assert_non_null(y);
        assert_int_equal(cic_engine_mpfr_run(y, m, PREC, false, &o), 0);
        cic_mpvec_destroy(y, n);
    }
}

static void check_flops(const cic_model *m, const cic_xform_spec *x, const shape *sh,
                        const char *label)
{
    cic_flop_count want, got[CIC_MATMUL_COUNT + 1];
    int e, i;
    char buf[512];
    cic_flops_dit(&want, &sh->cfg, x);
    for (e = 0; e <= CIC_MATMUL_COUNT; e++)
        count(&got[e], m, e);
    for (i = 0; i < CIC_SITE_COUNT; i++) {
        if (got[CIC_MATMUL_COUNT].site[i] != want.site[i])
            fail_msg("%s, site %s: mpfr counted %.17g, closed form %.17g (%s)", label,
                     CIC_SITE_NAME[i], got[CIC_MATMUL_COUNT].site[i], want.site[i],
                     shape_str(buf, sizeof buf, sh));
        for (e = 0; e < CIC_MATMUL_COUNT; e++)
            if (got[e].site[i] != got[CIC_MATMUL_COUNT].site[i])
                fail_msg("%s, site %s: %s counted %.17g, mpfr %.17g (%s)", label,
                         CIC_SITE_NAME[i], CIC_ENGINE_F32_NAME[e], got[e].site[i],
                         got[CIC_MATMUL_COUNT].site[i], shape_str(buf, sizeof buf, sh));
    }
    cic_assert_close(cic_flop_total(&got[CIC_MATMUL_COUNT]), cic_flop_total(&want), 0, 0);
}

static void flops_for(const shape *sh, bool pow2)
{
    cic_model *orig = make_orig(sh);
    int i;
    check_flops(orig, NULL, sh, "original");
    for (i = 0; i < N_STRATS; i++) {
        cic_xform_spec x = spec_strat(&STRATS[i], 3);
        cic_model *m;
        if (!strat_ok(&STRATS[i], &sh->cfg, pow2))
            continue;
        m = apply(orig, &x, sh);
        check_flops(m, &x, sh, STRATS[i].label);
        cic_model_destroy(m);
    }
    {
        cic_xform_spec x = spec_of("static", CIC_XFORM_STATIC_FOLD, CIC_Q_RANDOM,
                                   CIC_STREAM_CENTERED, false, 3);
        cic_model *m = apply(orig, &x, sh);
        check_flops(m, &x, sh, "static-fold centered");
        cic_model_destroy(m);
        x.stream = CIC_STREAM_MEAN_PRESERVING;
        m = apply(orig, &x, sh);
        check_flops(m, &x, sh, "static-fold mean-preserving");
        cic_model_destroy(m);
    }
    cic_model_destroy(orig);
}

static void test_flops(void **state)
{
    static const int d2[] = {8, 16}, h2[] = {1, 2, 4}, dn[] = {12, 24}, hn[] = {2, 3};
    int k, n = 4 * cic_test_multiplier();
    (void)state;
    for (k = 0; k < n; k++) {
        int causal;
        shape a = shape_draw_d(600 + (uint64_t)k, d2, 2, h2, 3);
        shape b = shape_draw_d(700 + (uint64_t)k, dn, 2, hn, 2);
        for (causal = 0; causal < 2; causal++) {
            a.cfg.causal = causal;
            b.cfg.causal = causal;
            flops_for(&a, true);
            flops_for(&b, false);
        }
    }
}

/* ---- 5. MPFR threads ---- */

static void test_mpfr_threads(void **state)
{
    static const int ds[] = {16}, hs[] = {4};
    shape sh = shape_draw_d(88, ds, 1, hs, 1);
    cic_model *orig, *ms[3];
    cic_rt rt; /* the engine's threads, 1 then 2 */
    int j;
    char buf[512];
    (void)state;
    sh.cfg.samples = 3;
    sh.cfg.tokens = 5;
    sh.cfg.layers = 2;
    orig = make_orig(&sh);
    {
        cic_xform_spec a = spec_of("ps", CIC_XFORM_PER_SAMPLE_FOLD, CIC_Q_RANDOM,
                                   CIC_STREAM_CENTERED, false, 9);
        cic_xform_spec b = spec_of("on", CIC_XFORM_ONLINE_UNROTATE, CIC_Q_HADAMARD,
                                   CIC_STREAM_CENTERED, true, 9);
        cic_xform_spec c = spec_of("br", CIC_XFORM_BRANCH_ROTATE, CIC_Q_RANDOM,
                                   CIC_STREAM_CENTERED, false, 9);
        ms[0] = apply(orig, &a, &sh);
        ms[1] = apply(orig, &b, &sh);
        ms[2] = apply(orig, &c, &sh);
    }
    for (j = 0; j < 3; j++) {
        size_t n = n_out(ms[j]);
        mpfr_t *y1 = cic_mpvec_create(n, PREC), *y2 = cic_mpvec_create(n, PREC);
        long diff;
        assert_non_null(y1);
        assert_non_null(y2);
        cic_rt_init(&rt, 1);
        ms[j]->rt = &rt;
        assert_int_equal(cic_rt_mpfr_threads(ms[j]->rt), 1);
        assert_int_equal(cic_engine_mpfr_run(y1, ms[j], PREC, false, NULL), 0);
        rt.mpfr_threads = 2;
        assert_int_equal(cic_rt_mpfr_threads(ms[j]->rt), 2);
        assert_int_equal(cic_engine_mpfr_run(y2, ms[j], PREC, false, NULL), 0);
        ms[j]->rt = NULL;
        diff = cic_test_first_diff_mp((const mpfr_t *)y1, (const mpfr_t *)y2, n);
        if (diff >= 0)
            fail_msg("mpfr 1 vs 2 threads differ at %ld on model %d (%s)", diff, j,
                     shape_str(buf, sizeof buf, &sh));
        cic_mpvec_destroy(y1, n);
        cic_mpvec_destroy(y2, n);
        cic_model_destroy(ms[j]);
    }
    cic_model_destroy(orig);
}

/* ---- 7. through dgemm: Q as doubles = Q as MPFR numbers, bit for bit ---- */

/* The first tensor of a and b (same graph) whose float32 or unrounded
 * values (as doubles: both at most 53 bits) differ, or whose readout maps
 * differ: its index (n_t for the map), or -1. Bits are compared, not
 * values (+0 and -0 compare equal as values). */
static int first_tensor_diff(const cic_model *a, const cic_model *b)
{
    int i;
    size_t dd = (size_t)a->cfg.d_model * a->cfg.d_model;
    assert_int_equal(a->n_t, b->n_t);
    for (i = 0; i < a->n_t; i++) {
        const cic_tensor *s = &a->t[i], *t = &b->t[i];
        size_t n = (size_t)s->rows * s->cols;
        double *u, *v;
        bool same;
        if (s->role == CIC_T_ACT)
            continue;
        if (memcmp(s->f32, t->f32, n * sizeof *s->f32) != 0 ||
            cic_tensor_has_hp(s) != cic_tensor_has_hp(t) ||
            cic_tensor_hp_prec(s) != cic_tensor_hp_prec(t))
            return i;
        if (!cic_tensor_has_hp(s))
            continue;
        u = cic_tensor_f64_create(s, false);
        v = cic_tensor_f64_create(t, false);
        assert_non_null(u);
        assert_non_null(v);
        same = memcmp(u, v, n * sizeof *u) == 0;
        free(u);
        free(v);
        if (!same)
            return i;
    }
    if ((a->out_q == NULL) != (b->out_q == NULL) || a->out_q_prec != b->out_q_prec ||
        (a->out_q && cic_test_first_diff_mp((const mpfr_t *)a->out_q, (const mpfr_t *)b->out_q,
                                            dd) >= 0))
        return a->n_t;
    return -1;
}

/* How many of m's weights hold their unrounded values as doubles. */
static int n_doubles(const cic_model *m)
{
    int i, n = 0;
    for (i = 0; i < m->n_t; i++)
        n += m->t[i].f64 != NULL;
    return n;
}

/* x through dgemm on orig, Q as doubles and as MPFR numbers: the same
 * bits, the doubles really used (the rotated or folded weights are held
 * as doubles). A planted change of one bit in the doubles is caught. */
static void check_doubles_same(const cic_model *orig, cic_xform_spec x, const shape *sh,
                               bool plant)
{
    cic_model *a, *b, *mq = cic_model_clone(orig);
    cic_rt rt; /* Q as MPFR numbers: the context of mq and what is made of it */
    int diff;
    char buf[512];
    assert_non_null(mq);
    cic_rt_init(&rt, 0);
    rt.adaln_q_mpfr = true;
    mq->rt = &rt;
    x.prec = CIC_TPREC_F64_BLAS;
    b = apply(mq, &x, sh);
    cic_model_destroy(mq);
    a = apply(orig, &x, sh);
    if (n_doubles(a) == 0)
        fail_msg("%s q %s: no weight held as doubles (%s)", CIC_XFORM_NAME[x.kind],
                 CIC_Q_NAME[x.q], shape_str(buf, sizeof buf, sh));
    diff = first_tensor_diff(a, b);
    if (diff >= 0)
        fail_msg("%s q %s stream %d fast %d group %d: tensor %d (%s) differs between Q as "
                 "doubles and as MPFR (%s)", CIC_XFORM_NAME[x.kind], CIC_Q_NAME[x.q],
                 (int)x.stream, (int)x.fast, x.group, diff,
                 diff < a->n_t ? a->t[diff].name : "the readout map",
                 shape_str(buf, sizeof buf, sh));
    if (plant) {
        int i;
        for (i = 0; i < a->n_t && !a->t[i].f64; i++)
            ;
        assert_true(i < a->n_t);
        a->t[i].f64[0] = nextafter(a->t[i].f64[0], INFINITY);
        assert_int_equal(first_tensor_diff(a, b), i);
    }
    cic_model_destroy(a);
    cic_model_destroy(b);
}

/* x applied to a model it takes (cic_xform_apply_take, as the pipeline
 * does for the last transform of the original): the same bits as applied
 * to a copy, the weights moved into the new model rather than copied
 * (each weight's float32 array is the one the taken model held, or a new
 * one where the transform replaced it), and a weight marked as mapped
 * from a checkpoint (read-only) copied and left as it was. */
static void check_take(const cic_model *orig, const cic_xform_spec *x, const shape *sh)
{
    cic_model *a = apply(orig, x, sh), *src = cic_model_clone(orig), *t;
    float **was = cic_calloc((size_t)orig->n_t, sizeof *was), *mapped = NULL, *owned;
    int i, moved = 0, wm = -1, diff;
    size_t n = 0;
    cic_diag d;
    char buf[512];
    assert_non_null(src);
    assert_non_null(was);
    for (i = 0; i < src->n_t; i++) {
        was[i] = src->t[i].f32;
        if (wm < 0 && src->t[i].role == CIC_T_WEIGHT && src->t[i].f32)
            wm = i;
    }
    assert_true(wm >= 0);
    /* weight wm as a checkpoint's mapping: a buffer the model must not
     * write or free */
    n = (size_t)src->t[wm].rows * src->t[wm].cols;
    owned = src->t[wm].f32;
    mapped = malloc(n * sizeof *mapped);
    assert_non_null(mapped);
    memcpy(mapped, owned, n * sizeof *mapped);
    src->t[wm].f32 = mapped;
    src->t[wm].f32_mapped = true;
    was[wm] = mapped;
    memset(&d, 0, sizeof d);
    t = cic_xform_apply_take(src, x, PREC, &d);
    if (!t)
        fail_msg("cic_xform_apply_take '%s' failed (%s)", x->name, shape_str(buf, sizeof buf, sh));
    diff = first_tensor_diff(a, t);
    if (diff >= 0)
        fail_msg("%s: tensor %d differs between the model taken and the copy (%s)", x->name,
                 diff, shape_str(buf, sizeof buf, sh));
    for (i = 0; i < orig->n_t; i++)
        moved += i != wm && was[i] && t->t[i].f32 == was[i];
    if (moved == 0)
        fail_msg("%s: no weight of the taken model was moved (%s)", x->name,
                 shape_str(buf, sizeof buf, sh));
    assert_true(t->t[wm].f32 != mapped && !t->t[wm].f32_mapped);
    assert_memory_equal(mapped, owned, n * sizeof *mapped); /* not written */
    free(owned); /* the model never owned it after the swap */
    free(mapped);
    free(was);
    cic_model_destroy(t);
    cic_model_destroy(a);
}

static void test_doubles_same_bits(void **state)
{
    static const int ds[] = {16, 12}, hs[] = {2, 4};
    static const struct {
        enum cic_xform_kind kind;
        enum cic_qkind q;
        enum cic_stream stream;
        bool fast;
        int group;
    } cases[] = {
        {CIC_XFORM_STATIC_FOLD, CIC_Q_HADAMARD, CIC_STREAM_CENTERED, false, 0},
        {CIC_XFORM_STATIC_FOLD, CIC_Q_RANDOM, CIC_STREAM_CENTERED, false, 0},
        {CIC_XFORM_STATIC_FOLD, CIC_Q_RANDOM, CIC_STREAM_MEAN_PRESERVING, false, 0},
        {CIC_XFORM_ONLINE_UNROTATE, CIC_Q_HADAMARD, CIC_STREAM_CENTERED, true, 0},
        {CIC_XFORM_ONLINE_UNROTATE, CIC_Q_RANDOM, CIC_STREAM_MEAN_PRESERVING, false, 0},
        {CIC_XFORM_PER_SAMPLE_FOLD, CIC_Q_HADAMARD, CIC_STREAM_CENTERED, false, 0},
        {CIC_XFORM_PER_SAMPLE_FOLD, CIC_Q_RANDOM, CIC_STREAM_CENTERED, false, 0},
        {CIC_XFORM_BRANCH_ROTATE, CIC_Q_HADAMARD, CIC_STREAM_CENTERED, true, 0},
        {CIC_XFORM_BRANCH_ROTATE, CIC_Q_HADAMARD, CIC_STREAM_CENTERED, false, 0},
        {CIC_XFORM_BRANCH_ROTATE, CIC_Q_RANDOM, CIC_STREAM_CENTERED, false, 4},
        {CIC_XFORM_BRANCH_ROTATE, CIC_Q_HADAMARD, CIC_STREAM_CENTERED, true, 4},
    };
    int k, n = 2 * cic_test_multiplier();
    size_t a;
    (void)state;
    for (k = 0; k < n; k++) {
        shape sh = shape_draw_d(900 + (uint64_t)k, ds, 2, hs, 2);
        cic_model *orig;
        if (sh.cfg.samples < 2)
            sh.cfg.samples = 2;
        orig = make_orig(&sh);
        for (a = 0; a < sizeof cases / sizeof cases[0]; a++) {
            cic_xform_spec x = spec_of("f64-openblas", cases[a].kind, cases[a].q,
                                       cases[a].stream, cases[a].fast, 60 + (uint64_t)k);
            bool mp = cases[a].stream == CIC_STREAM_MEAN_PRESERVING;
            x.group = cases[a].group;
            x.calibration = k % sh.cfg.samples;
            if (x.q == CIC_Q_HADAMARD && !x.group && sh.cfg.d_model != 16 && mp)
                continue; /* a mean-preserving Hadamard needs d a power of two */
            check_doubles_same(orig, x, &sh, k == 0 && a == 0);
            check_take(orig, &x, &sh);
        }
        cic_model_destroy(orig);
    }
    print_message("through dgemm: %zu strategies x %d shapes, Q as doubles = Q as MPFR\n",
                  sizeof cases / sizeof cases[0], n);
}

/* One fold in doubles against the MPFR folds through dgemm: n x d (in) or
 * d x k (out) weights w, the vector v (scale or gate); rc expected. */
static void fold_pair(bool in, const double *w, const double *v, const double *q, int r, int c,
                      bool center, int want)
{
    int d = in ? c : r, i, rc;
    size_t n = (size_t)r * c;
    double *out = malloc(n * sizeof *out);
    mpfr_t *wm = cic_mpvec_create(n, 53), *vm = cic_mpvec_create((size_t)d, 53);
    mpfr_t *qm = cic_mpvec_create((size_t)d * d, 53), *om = cic_mpvec_create(n, 53);
    cic_fold_ws ws;
    assert_true(out && wm && vm && qm && om);
    assert_int_equal(cic_fold_ws_init(&ws, n, (size_t)(r > c ? r : c), 53), 0);
    ws.blas = true;
    for (i = 0; i < (int)n; i++)
        mpfr_set_d(wm[i], w[i], MPFR_RNDN);
    for (i = 0; i < d; i++)
        mpfr_set_d(vm[i], v[i], MPFR_RNDN);
    for (i = 0; i < d * d; i++)
        mpfr_set_d(qm[i], q[i], MPFR_RNDN);
    rc = in ? cic_fold_in_w_f64(out, w, r, c, v, q) : cic_fold_out_w_f64(out, w, r, c, v, q, center, 0);
    if (rc != want)
        fail_msg("fold %s %dx%d center %d: rc %d, want %d", in ? "in" : "out", r, c,
                 (int)center, rc, want);
    if (rc == 0) {
        if (in)
            cic_fold_in_w(om, (const mpfr_t *)wm, r, c, (const mpfr_t *)vm, (const mpfr_t *)qm, &ws);
        else
            cic_fold_out_w(om, (const mpfr_t *)wm, r, c, (const mpfr_t *)vm, (const mpfr_t *)qm,
                           center, &ws);
        for (i = 0; i < (int)n; i++) {
            double e = mpfr_get_d(om[i], MPFR_RNDN);
            if (memcmp(&e, &out[i], sizeof e) != 0)
                fail_msg("fold %s %dx%d center %d: value %d is %a, MPFR's %a", in ? "in" : "out",
                         r, c, (int)center, i, out[i], e);
        }
    }
    cic_fold_ws_clear(&ws);
    free(out);
    cic_mpvec_destroy(wm, n);
    cic_mpvec_destroy(vm, (size_t)d);
    cic_mpvec_destroy(qm, (size_t)d * d);
    cic_mpvec_destroy(om, n);
}

/* The folds in doubles: the MPFR folds' bits on random values (and on
 * 400 x 400, whose column means go over threads), and
 * declined (1) where a double step rounds otherwise: a product in the
 * subnormal range, one that overflows, a column mean that is not a double. */
static void test_fold_doubles(void **state)
{
    uint64_t s = 4242;
    int k, it, n = 20 * cic_test_multiplier();
    (void)state;
    for (it = 0; it < n; it++) {
        int r = 1 + cic_test_pick(&s, 9), c = 1 + cic_test_pick(&s, 9), dm = r > c ? r : c;
        double *w = malloc((size_t)r * c * sizeof *w), *v = malloc((size_t)dm * sizeof *v);
        double *q = malloc((size_t)dm * dm * sizeof *q);
        assert_true(w && v && q);
        for (k = 0; k < r * c; k++) /* float32 weights, as the model's */
            w[k] = (float)((double)cic_test_rand(&s) / 0x1p64 - 0.5);
        for (k = 0; k < dm; k++)
            v[k] = (double)cic_test_rand(&s) / 0x1p64 - 0.5;
        for (k = 0; k < dm * dm; k++)
            q[k] = (double)cic_test_rand(&s) / 0x1p64 - 0.5;
        if (it == 1)
            v[0] = -1.0; /* 1 + scale = +0 */
        fold_pair(true, w, v, q, r, c, false, 0);
        fold_pair(false, w, v, q, r, c, it & 1, 0);
        w[0] = 0x1p-1000;
        v[0] = 0x1p-30; /* a product below DBL_MIN */
        fold_pair(false, w, v, q, r, c, false, 1);
        v[0] = 0x1p1000;
        w[0] = 0x1p100; /* an overflow */
        fold_pair(false, w, v, q, r, c, false, 1);
        free(w);
        free(v);
        free(q);
    }
    {
        /* 400 columns of 400: the means split over threads */
        int r = 400, c = 400;
        double *w = malloc((size_t)r * c * sizeof *w), *v = malloc((size_t)r * sizeof *v);
        double *q = malloc((size_t)r * r * sizeof *q);
        assert_true(w && v && q);
        for (k = 0; k < r * c; k++)
            w[k] = (float)((double)cic_test_rand(&s) / 0x1p64 - 0.5);
        for (k = 0; k < r; k++)
            v[k] = (double)cic_test_rand(&s) / 0x1p64 - 0.5;
        for (k = 0; k < r * r; k++)
            q[k] = (double)cic_test_rand(&s) / 0x1p64 - 0.5;
        fold_pair(false, w, v, q, r, c, true, 0);
        free(w);
        free(v);
        free(q);
    }
    {
        /* column 0: 2^-1021 (1 + 2^-52) - 2^-1021 + 0 = 2^-1073, a third
         * of which is no double */
        double w[3] = {0x1p-1021 + 0x1p-1073, -0x1p-1021, 0}, g[3] = {1, 1, 1}, q[9] = {0};
        fold_pair(false, w, g, q, 3, 1, true, 1);
        fold_pair(false, w, g, q, 3, 1, false, 0);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_f32_vs_mpfr),
        cmocka_unit_test(test_strategies_exact),
        cmocka_unit_test(test_strategies_exact_non_pow2),
        cmocka_unit_test(test_strategies_exact_paley),
        cmocka_unit_test(test_fast_vs_dense_paley),
        cmocka_unit_test(test_check_paley_widths),
        cmocka_unit_test(test_check_hadamard_base),
        cmocka_unit_test(test_strategies_forced_base),
        cmocka_unit_test(test_group_and_regular),
        cmocka_unit_test(test_check_regular_and_group),
        cmocka_unit_test(test_fault_caught),
        cmocka_unit_test(test_static_fold),
        cmocka_unit_test(test_flops),
        cmocka_unit_test(test_mpfr_threads),
        cmocka_unit_test(test_doubles_same_bits),
        cmocka_unit_test(test_fold_doubles),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
