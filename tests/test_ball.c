/* SPDX-License-Identifier: MIT */
/* test_ball.c: the MPFR engine's ball runs (engine/mp_ball.h), the bounds
 * the proven truth rests on.
 *   - On small blocks of every kind (LayerNorm with a bias, RMSNorm with
 *     RoPE, grouped-query and causal attention, adaLN's modulation and
 *     gates, the parallel block; every activation; head and residual
 *     readouts; outlier channels), a 300-bit run of the same model lies
 *     inside every ball of a 64-bit run, and the midpoints are the plain
 *     64-bit run's, bit for bit. The radii are not vacuous: at most 2^-30
 *     of the largest output, and most values are proven.
 *   - A planted catastrophic cancellation (y = x W1^T + x W2^T with W2 =
 *     -W1 but for one entry, and x spanning 2^30 .. 2^-20) is caught: the
 *     64-bit midpoint is wrong in its leading bits, its ball holds the
 *     300-bit value and is not proven; at 128 bits it is proven, to the
 *     300-bit value's binary32.
 *   - A linear layer's radius (|W| r by float32 sgemm) is as tight as
 *     Arb's arb_dot of the same balls and holds Arb's midpoint.
 *   - cic_ball_prove: a ball across a binary32 rounding boundary is not
 *     proven, one inside is; NaN and infinite radii prove nothing.
 *   - An op a transform adds (FWHT) fails the ball with why. */
#include "testutil.h"

#include "base/base.h"
#include "base/mpvec.h"
#include "engine/engine.h"
#include "engine/mp_ball.h"
#include "model/model.h"
#include "model/op.h"

#include <arb.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static cic_model_cfg base_cfg(enum cic_block_kind block, uint64_t seed)
{
    cic_model_cfg c;
    memset(&c, 0, sizeof c);
    c.block = block;
    c.d_model = 16;
    c.heads = 2;
    c.mlp_ratio = 4;
    c.d_mlp = 64;
    c.tokens = 5;
    c.samples = 2;
    c.layers = 2;
    c.eps = 1e-5;
    c.act = CIC_ACT_GELU;
    c.d_out = 7;
    c.seed = seed;
    c.dist = CIC_DIST_NORMAL;
    c.std = 0.2;
    if (block == CIC_BLOCK_DIT) {
        c.d_cond = 6;
        c.final_layer = true;
        c.eps = 1e-6;
    }
    return c;
}

/* The ball run at prec: midpoints and radii (n values). */
static void ball_run(const cic_model *m, mpfr_prec_t prec, size_t n, mpfr_t **mid, double **rad,
                     cic_ball_out *bo)
{
    cic_run_opts o;
    memset(&o, 0, sizeof o);
    memset(bo, 0, sizeof *bo);
    *mid = cic_mpvec_create(n, prec);
    *rad = malloc(n * sizeof **rad);
    assert_true(*mid && *rad);
    bo->rad = *rad;
    o.ball = bo;
    assert_int_equal(cic_engine_mpfr_run(*mid, m, prec, false, &o), 0);
}

/* A graph of hand-made ops over one sample of `tokens` rows: the input (d
 * wide) only; the caller adds tensors and ops. */
static cic_model *bare_model(int tokens, int d, uint64_t seed)
{
    cic_model *m = cic_calloc(1, sizeof *m);
    assert_non_null(m);
    m->cfg = base_cfg(CIC_BLOCK_PRELN, seed);
    m->cfg.d_model = d;
    m->cfg.tokens = tokens;
    m->cfg.samples = 1;
    m->rows = tokens;
    m->cond = -1;
    m->input = cic_model_tensor_add(m, "input", CIC_T_INPUT, tokens, d);
    assert_true(m->input >= 0);
    return m;
}

/* out = in W^T, appended to m. */
static void add_linear(cic_model *m, int in, int w, int out)
{
    cic_op o = cic_op_blank(CIC_OP_LINEAR, CIC_SITE_INPUT, -1);
    o.in[0] = in;
    o.w = w;
    o.out = out;
    assert_true(cic_model_op_add(m, &o) >= 0);
}

/* |mid - exact| <= rad for every value (exact: a 300-bit run, its own
 * error far below the 64-bit radii). Returns the largest |exact|. */
static double check_inside(const mpfr_t *mid, const double *rad, const mpfr_t *exact, size_t n,
                           const char *what)
{
    mpfr_t d;
    double big = 0;
    size_t i;
    mpfr_init2(d, 400);
    for (i = 0; i < n; i++) {
        double a = fabs(mpfr_get_d(exact[i], MPFR_RNDN));
        mpfr_sub(d, mid[i], exact[i], MPFR_RNDN);
        mpfr_abs(d, d, MPFR_RNDN);
        if (mpfr_cmp_d(d, rad[i]) > 0)
            fail_msg("%s: value %zu: |mid - exact| = %.3g above its radius %.3g", what, i,
                     mpfr_get_d(d, MPFR_RNDN), rad[i]);
        big = a > big ? a : big;
    }
    mpfr_clear(d);
    return big;
}

static void one_model(const cic_model_cfg *c, enum cic_readout ro, const char *what)
{
    cic_model *m = cic_model_create(c, ro);
    size_t n, i, proven;
    mpfr_t *mid, *plain, *exact;
    double *rad, maxr = 0, big, rel;
    cic_ball_out bo;
    assert_non_null(m);
    n = (size_t)c->tokens * c->samples * cic_model_out_cols(m);
    ball_run(m, 64, n, &mid, &rad, &bo);
    if (bo.failed)
        fail_msg("%s: ball failed: %s", what, bo.why);
    plain = cic_mpvec_create(n, 64);
    exact = cic_mpvec_create(n, 300);
    assert_true(plain && exact);
    assert_int_equal(cic_engine_mpfr_run(plain, m, 64, false, NULL), 0);
    assert_int_equal(cic_engine_mpfr_run(exact, m, 300, false, NULL), 0);
    assert_int_equal(cic_test_first_diff_mp(mid, plain, n), -1);
    big = check_inside(mid, rad, exact, n, what);
    for (i = 0; i < n; i++)
        maxr = rad[i] > maxr ? rad[i] : maxr;
    if (!(maxr > 0 && maxr <= ldexp(big, -30)))
        fail_msg("%s: largest radius %.3g against largest value %.3g", what, maxr, big);
    proven = cic_ball_prove(mid, rad, n, NULL, &rel);
    if (proven < n - n / 50)
        fail_msg("%s: only %zu of %zu proven", what, proven, n);
    cic_mpvec_destroy(mid, n);
    cic_mpvec_destroy(plain, n);
    cic_mpvec_destroy(exact, n);
    free(rad);
    cic_model_destroy(m);
}

static void test_inside(void **state)
{
    static const enum cic_block_kind blocks[] = {CIC_BLOCK_PRELN, CIC_BLOCK_RMSNORM,
                                                 CIC_BLOCK_DIT, CIC_BLOCK_PARALLEL};
    char what[160];
    int b, a, ro;
    (void)state;
    for (b = 0; b < 4; b++)
        for (a = 0; a < CIC_ACT_COUNT; a++)
            for (ro = 0; ro < 2; ro++) {
                cic_model_cfg c = base_cfg(blocks[b], 11 + 7 * (uint64_t)(b * 8 + a * 2 + ro));
                c.act = (enum cic_act)a;
                c.causal = a % 2 == 1;
                if (a % 3 == 2) {
                    c.outlier_channels = 2;
                    c.outlier_scale = 30;
                }
                if (blocks[b] == CIC_BLOCK_RMSNORM) {
                    c.rope = ro ? CIC_ROPE_INTERLEAVED : CIC_ROPE_HALF;
                    c.rope_theta = 10000;
                    c.kv_heads = a % 2 ? 1 : 2;
                }
                if (blocks[b] == CIC_BLOCK_DIT)
                    c.final_layer = ro == 0;
                snprintf(what, sizeof what, "%s %s %s", CIC_BLOCK_NAME[c.block],
                         CIC_ACT_NAME[c.act], ro ? "residual" : "head");
                one_model(&c, blocks[b] == CIC_BLOCK_DIT
                                  ? (ro ? CIC_READOUT_RESIDUAL : CIC_READOUT_HEAD)
                                  : (ro ? CIC_READOUT_RESIDUAL : CIC_READOUT_HEAD),
                          what);
            }
}

/* y = x W1^T + x W2^T, W2 = -W1 except W2[j][3] = -W1[j][3] (1 - 2^-23),
 * x = (2^30, 1, -3, 2^-20): the exact y is about 2^-43, the two products
 * about 2^30 each. */
static cic_model *cancel_model(void)
{
    int w1, w2, y1, y2, y, d = 4, j, p;
    cic_model *m = bare_model(1, d, 1);
    cic_op o;
    w1 = cic_model_tensor_add(m, "w1", CIC_T_WEIGHT, d, d);
    w2 = cic_model_tensor_add(m, "w2", CIC_T_WEIGHT, d, d);
    y1 = cic_model_tensor_add(m, "y1", CIC_T_ACT, 1, d);
    y2 = cic_model_tensor_add(m, "y2", CIC_T_ACT, 1, d);
    y = cic_model_tensor_add(m, "y", CIC_T_ACT, 1, d);
    assert_true(w1 >= 0 && w2 >= 0 && y1 >= 0 && y2 >= 0 && y >= 0);
    m->t[m->input].f32[0] = 0x1p30f;
    m->t[m->input].f32[1] = 1;
    m->t[m->input].f32[2] = -3;
    m->t[m->input].f32[3] = 0x1p-20f;
    for (j = 0; j < d; j++)
        for (p = 0; p < d; p++) {
            float v = 1.0f + 0.125f * (float)(j + 2 * p);
            m->t[w1].f32[j * d + p] = v;
            m->t[w2].f32[j * d + p] = p == 3 ? -v * (1.0f - 0x1p-23f) : -v;
        }
    add_linear(m, m->input, w1, y1);
    add_linear(m, m->input, w2, y2);
    o = cic_op_blank(CIC_OP_ADD, CIC_SITE_INPUT, -1);
    o.in[0] = y1;
    o.in[1] = y2;
    o.out = y;
    assert_true(cic_model_op_add(m, &o) >= 0);
    m->output = m->residual = y;
    return m;
}

static void test_cancellation(void **state)
{
    char msg[256];
    cic_model *m = cancel_model();
    mpfr_t *mid, *mid2, *exact, d;
    double *rad, *rad2, rel;
    cic_ball_out bo;
    unsigned char ok[4];
    size_t n = 4, i;
    bool wrong = false;
    (void)state;
    if (cic_model_check(m, msg, sizeof msg) != 0)
        fail_msg("%s", msg);
    exact = cic_mpvec_create(n, 300);
    assert_non_null(exact);
    assert_int_equal(cic_engine_mpfr_run(exact, m, 300, false, NULL), 0);
    ball_run(m, 64, n, &mid, &rad, &bo);
    assert_false(bo.failed);
    check_inside(mid, rad, exact, n, "cancellation at 64 bits");
    mpfr_init2(d, 400);
    for (i = 0; i < n; i++) {
        mpfr_sub(d, mid[i], exact[i], MPFR_RNDN);
        mpfr_div(d, d, exact[i], MPFR_RNDN);
        wrong |= fabs(mpfr_get_d(d, MPFR_RNDN)) > 1e-3; /* the plain 64-bit value is off */
    }
    assert_true(wrong);
    assert_int_equal(cic_ball_prove(mid, rad, n, ok, &rel), 0);
    ball_run(m, 128, n, &mid2, &rad2, &bo);
    check_inside(mid2, rad2, exact, n, "cancellation at 128 bits");
    assert_int_equal(cic_ball_prove(mid2, rad2, n, ok, &rel), n);
    for (i = 0; i < n; i++)
        assert_true(cic_mp_get_f32(mid2[i]) == cic_mp_get_f32(exact[i]));
    mpfr_clear(d);
    cic_mpvec_destroy(mid, n);
    cic_mpvec_destroy(mid2, n);
    cic_mpvec_destroy(exact, n);
    free(rad);
    free(rad2);
    cic_model_destroy(m);
}

/* The linear layer's radii against Arb's: y = W2 (W1 x) with a ball
 * input to the second linear (the first's output); arb_dot of those balls
 * with the exact W2 gives Arb's enclosure of each y. The engine's radius
 * (|W2| r by float32 sgemm, plus u |y|) must hold the Arb midpoint and be
 * no wider than Arb's radius plus the few ulps the two midpoints differ
 * by: as tight as the reference. */
static void linear_vs_arb(float big)
{
    int d = 24, w1, w2, y1, y2, j, p;
    cic_model *m = bare_model(3, d, 5);
    uint64_t s = 99;
    mpfr_t *mid, *y1m;
    double *rad, *r1, worst = 0, least = INFINITY;
    cic_ball_out bo;
    arb_ptr xb, wb;
    arb_t e;
    w1 = cic_model_tensor_add(m, "w1", CIC_T_WEIGHT, d, d);
    w2 = cic_model_tensor_add(m, "w2", CIC_T_WEIGHT, d, d);
    y1 = cic_model_tensor_add(m, "y1", CIC_T_ACT, 3, d);
    y2 = cic_model_tensor_add(m, "y2", CIC_T_ACT, 3, d);
    for (j = 0; j < 3 * d; j++)
        m->t[m->input].f32[j] = (float)((int)cic_test_pick(&s, 2001) - 1000) / 333.0f;
    for (j = 0; j < d * d; j++) {
        m->t[w1].f32[j] = (float)((int)cic_test_pick(&s, 2001) - 1000) / 777.0f;
        m->t[w2].f32[j] = (float)((int)cic_test_pick(&s, 2001) - 1000) / 555.0f;
    }
    if (big > 0) /* one weight of each output near the float32 limit */
        for (j = 0; j < d; j++)
            m->t[w2].f32[j * d + 3 + j % 5] = j % 2 ? big : -big;
    add_linear(m, m->input, w1, y1);
    add_linear(m, y1, w2, y2);
    /* the first linear alone: its midpoints and radii, the second's input */
    m->output = m->residual = y1;
    ball_run(m, 64, (size_t)3 * d, &y1m, &r1, &bo);
    m->output = m->residual = y2;
    ball_run(m, 64, (size_t)3 * d, &mid, &rad, &bo);
    assert_false(bo.failed);
    xb = _arb_vec_init(d);
    wb = _arb_vec_init(d);
    arb_init(e);
    for (p = 0; p < 3; p++)
        for (j = 0; j < d; j++) {
            int k;
            double dist;
            mpfr_t t;
            for (k = 0; k < d; k++) {
                arf_set_mpfr(arb_midref(xb + k), y1m[p * d + k]);
                mag_set_d(arb_radref(xb + k), r1[p * d + k]);
                arb_set_d(wb + k, (double)m->t[w2].f32[j * d + k]);
            }
            arb_dot(e, NULL, 0, xb, 1, wb, 1, d, 200);
            /* Arb's midpoint inside the engine's ball */
            mpfr_init2(t, 300);
            arf_get_mpfr(t, arb_midref(e), MPFR_RNDN);
            mpfr_sub(t, t, mid[p * d + j], MPFR_RNDN);
            dist = fabs(mpfr_get_d(t, MPFR_RNDU));
            mpfr_clear(t);
            assert_true(dist <= rad[p * d + j]);
            /* and no wider than Arb's radius plus 4 ulps at 64 bits */
            {
                double ar = mag_get_d(arb_radref(e)),
                       slack = 4 * ldexp(fabs(mpfr_get_d(mid[p * d + j], MPFR_RNDN)), -63);
                double ratio = rad[p * d + j] / (ar + slack);
                worst = ratio > worst ? ratio : worst;
                /* and never below the spread Arb's radius holds (its own
                 * roundings at 200 bits are far below 2^-40 of it): a
                 * radius that lost a scale would be caught here */
                least = fmin(least, rad[p * d + j] / ar);
            }
        }
    print_message("weights up to %g: radius / Arb's between %.6f and %.6f\n",
                  big > 0 ? (double)big : 2.0, least, worst);
    if (worst > 1.01)
        fail_msg("a linear layer's radius is %.4f times Arb's", worst);
    if (!(least >= 1 - 0x1p-40))
        fail_msg("a linear layer's radius is %.4g of Arb's (weights up to %g)", least,
                 (double)big);
    arb_clear(e);
    _arb_vec_clear(xb, d);
    _arb_vec_clear(wb, d);
    cic_mpvec_destroy(mid, (size_t)3 * d);
    cic_mpvec_destroy(y1m, (size_t)3 * d);
    free(rad);
    free(r1);
    cic_model_destroy(m);
}

static void test_linear_vs_arb(void **state)
{
    (void)state;
    linear_vs_arb(0);
    linear_vs_arb(3e38f); /* |W| r summed in float32 overflowed before */
    linear_vs_arb(0x1p70f);
}

static void test_prove(void **state)
{
    mpfr_t *v = cic_mpvec_create(5, 64);
    double rad[5], rel;
    unsigned char ok[5];
    float one_up = nextafterf(1.0f, 2.0f);
    (void)state;
    assert_non_null(v);
    /* the tie between 1 and its successor, +- a hair: not proven */
    mpfr_set_flt(v[0], 1.0f, MPFR_RNDN);
    mpfr_add_d(v[0], v[0], ((double)one_up - 1.0) / 2, MPFR_RNDN);
    rad[0] = 0x1p-60;
    /* just above 1, well inside: proven */
    mpfr_set_d(v[1], 1.0 + 0x1p-30, MPFR_RNDN);
    rad[1] = 0x1p-40;
    /* the same with a radius reaching the tie: not proven */
    mpfr_set_d(v[2], 1.0 + 0x1p-30, MPFR_RNDN);
    rad[2] = ((double)one_up - 1.0) / 2;
    /* an infinite radius, a NaN midpoint */
    mpfr_set_d(v[3], 2.0, MPFR_RNDN);
    rad[3] = INFINITY;
    mpfr_set_nan(v[4]);
    rad[4] = 0;
    assert_int_equal(cic_ball_prove(v, rad, 5, ok, &rel), 1);
    assert_true(!ok[0] && ok[1] && !ok[2] && !ok[3] && !ok[4]);
    assert_true(isinf(rel));
    assert_int_equal(cic_ball_prove(v + 1, rad + 1, 1, ok, &rel), 1);
    cic_assert_close(rel, 0x1p-40 / (1.0 + 0x1p-30), 1e-12, 0);
    cic_mpvec_destroy(v, 5);
}

/* A graph with an FWHT op: no rule, the ball says why. */
static void test_no_rule(void **state)
{
    int w = 8, i;
    cic_model *m = bare_model(2, w, 3);
    cic_ball_out bo;
    mpfr_t *mid;
    double *rad;
    cic_op o;
    (void)state;
    o = cic_op_blank(CIC_OP_FWHT, CIC_SITE_INPUT, -1);
    o.in[0] = m->input;
    o.g = cic_model_tensor_add(m, "signs", CIC_T_WEIGHT, 1, w);
    o.hbase = 1;
    o.out = cic_model_tensor_add(m, "out", CIC_T_ACT, m->rows, w);
    for (i = 0; i < w; i++) {
        m->t[o.g].f32[i] = 1;
        m->t[m->input].f32[i] = (float)i;
    }
    assert_true(cic_model_op_add(m, &o) >= 0);
    m->output = m->residual = o.out;
    ball_run(m, 64, (size_t)m->rows * w, &mid, &rad, &bo);
    assert_true(bo.failed);
    assert_non_null(strstr(bo.why, "has no error bound"));
    assert_true(isinf(rad[0]));
    cic_mpvec_destroy(mid, (size_t)m->rows * w);
    free(rad);
    cic_model_destroy(m);
}

/* Weights near the float32 limit: a value's radius grows by sum |W| r,
 * which the float32 products of |W| and the scaled radii once overflowed
 * to Inf at any precision (a checkpoint weight of 3.4e38: every value
 * unproven, the truth escalated to 8192 bits in vain). The balls of such a
 * model must still hold the 300-bit values, and prove them. Two values of
 * one value weight are planted (3e38 and 2^70), in each block kind. */
static void test_huge_weights(void **state)
{
    static const struct {
        enum cic_block_kind block;
        const char *w;
        int v_rows; /* rows before the value part of the weight */
    } plant[] = {
        {CIC_BLOCK_PRELN, "blocks.0.attn.qkv.weight", 2},
        {CIC_BLOCK_RMSNORM, "layers.0.self_attn.v_proj.weight", 0},
        {CIC_BLOCK_DIT, "blocks.0.attn.qkv.weight", 2},
        {CIC_BLOCK_PARALLEL, "transformer.h.0.attn.v_proj.weight", 0},
    };
    size_t k;
    (void)state;
    for (k = 0; k < sizeof plant / sizeof plant[0]; k++) {
        cic_model_cfg c = base_cfg(plant[k].block, 501 + k);
        cic_model *m = cic_model_create(&c, CIC_READOUT_RESIDUAL);
        size_t n, proven, at;
        mpfr_t *mid, *exact;
        double *rad, rel;
        cic_ball_out bo;
        char what[96];
        int id;
        assert_non_null(m);
        id = cic_model_tensor_find(m, plant[k].w);
        if (id < 0)
            fail_msg("%s: no tensor %s", CIC_BLOCK_NAME[c.block], plant[k].w);
        at = (size_t)plant[k].v_rows * c.d_model * c.d_model;
        m->t[id].f32[at + 3] = 3e38f;
        m->t[id].f32[at + c.d_model + 1] = 0x1p70f;
        n = (size_t)c.tokens * c.samples * cic_model_out_cols(m);
        snprintf(what, sizeof what, "%s with weights 3e38 and 2^70", CIC_BLOCK_NAME[c.block]);
        ball_run(m, 64, n, &mid, &rad, &bo);
        if (bo.failed)
            fail_msg("%s: ball failed: %s", what, bo.why);
        exact = cic_mpvec_create(n, 300);
        assert_non_null(exact);
        assert_int_equal(cic_engine_mpfr_run(exact, m, 300, false, NULL), 0);
        check_inside(mid, rad, exact, n, what);
        proven = cic_ball_prove(mid, rad, n, NULL, &rel);
        printf("%s: %zu of %zu proven at 64 bits, largest relative radius %.3g\n", what, proven,
               n, rel);
        if (proven < n - n / 50)
            fail_msg("%s: only %zu of %zu proven", what, proven, n);
        cic_mpvec_destroy(mid, n);
        cic_mpvec_destroy(exact, n);
        free(rad);
        cic_model_destroy(m);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_inside),
        cmocka_unit_test(test_cancellation),
        cmocka_unit_test(test_linear_vs_arb),
        cmocka_unit_test(test_prove),
        cmocka_unit_test(test_no_rule),
        cmocka_unit_test(test_huge_weights),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
