/* SPDX-License-Identifier: MIT */
/* test_smooth.c: the transform kind smooth-scale (SmoothQuant's per-channel
 * scale migration, src/xform/kind_smooth_scale.c) and the descriptor table
 * it was added through (src/kind/xform_kind.h).
 *   - exact (MPFR ce far under the equivalent threshold) on preln, rmsnorm
 *     and parallel blocks for random shapes, seeds and alphas, and it does
 *     change the gains and the readers (s is not 1);
 *   - its mistake skip-bias broken on a LayerNorm block;
 *   - the loader: alpha read with its default and range, refused on a dit
 *     block naming the blocks it needs, alpha refused on another kind, the
 *     mistake refused on another kind;
 *   - no FLOPs added;
 *   - every kind's descriptor has the list's name, and every mistake but
 *     none belongs to a kind.
 * Seeds and shapes are printed on failure; CIC_TEST_MULTIPLIER runs more. */
#include "testutil.h"

#include "base/mpvec.h"
#include "base/rng.h"
#include "engine/engine.h"
#include "metric/flops.h"
#include "metric/metric.h"
#include "model/model.h"
#include "xform/xform.h"
#include "xform/xform_util.h"

#include <math.h>
#include <string.h>

#define PREC 128

static cic_model_cfg random_cfg(uint64_t seed, enum cic_block_kind block)
{
    static const int ds[] = {8, 16, 32};
    uint64_t k = cic_rng_key(seed, "test.smooth");
    cic_model_cfg c;
    memset(&c, 0, sizeof c);
    c.block = block;
    c.d_model = ds[cic_rng_u64(k, 0) % 3];
    c.heads = 2;
    c.mlp_ratio = 2;
    c.d_mlp = 2 * c.d_model;
    c.tokens = 1 + (int)(cic_rng_u64(k, 1) % 5);
    c.samples = 1 + (int)(cic_rng_u64(k, 2) % 2);
    c.layers = 1 + (int)(cic_rng_u64(k, 3) % 2);
    c.eps = 1e-5;
    c.causal = true;
    c.act = block == CIC_BLOCK_RMSNORM ? CIC_ACT_SILU : CIC_ACT_GELU;
    c.d_out = 4;
    c.seed = seed;
    c.dist = CIC_DIST_NORMAL;
    c.std = 0.15;
    c.outlier_channels = 2;
    c.outlier_scale = 10;
    return c;
}

static cic_xform_spec smooth(double alpha, const char *mistake)
{
    cic_xform_spec x;
    memset(&x, 0, sizeof x);
    cic_strlcpy(x.name, "smooth", sizeof x.name);
    x.kind = CIC_XFORM_SMOOTH_SCALE;
    x.after = -1;
    x.prec = CIC_TPREC_MPFR;
    x.mistake = cic_test_mistake(CIC_XFORM_SMOOTH_SCALE, mistake);
    x.param[0] = alpha;
    return x;
}

static mpfr_t *run_mp(const cic_model *m, size_t *n)
{
    size_t rows = (size_t)m->rows, cols = (size_t)cic_model_out_cols(m);
    mpfr_t *y = cic_mpvec_create(rows * cols, PREC);
    assert_non_null(y);
    assert_int_equal(cic_engine_mpfr_run(y, m, PREC, false, NULL), 0);
    *n = rows * cols;
    return y;
}

/* ce of x on orig; *changed: some norm gain of the result differs. */
static double ce_of(const cic_model *orig, const cic_xform_spec *x, bool *changed)
{
    cic_diag d;
    size_t n0, n1;
    int i;
    cic_model *m = cic_xform_apply(orig, x, PREC, &d);
    mpfr_t *y0, *y1;
    double ce;
    assert_non_null(m);
    y0 = run_mp(orig, &n0);
    y1 = run_mp(m, &n1);
    assert_int_equal(n0, n1);
    ce = cic_metric_rel_diff((const mpfr_t *)y1, (const mpfr_t *)y0, n0, PREC);
    *changed = false;
    for (i = 0; i < m->n_ops && !*changed; i++) {
        const cic_op *o = &m->ops[i];
        mpfr_t *ta = NULL, *tb = NULL;
        const mpfr_t *a, *b;
        int j, w;
        if (o->kind != CIC_OP_NORM || o->g < 0)
            continue;
        w = m->t[o->g].cols;
        a = _cic_xf_vals(orig, o->g, &ta);
        b = _cic_xf_vals(m, o->g, &tb);
        assert_true(a && b);
        for (j = 0; j < w && !*changed; j++)
            *changed = mpfr_cmp(a[j], b[j]) != 0;
        cic_mpvec_destroy(ta, (size_t)w);
        cic_mpvec_destroy(tb, (size_t)w);
    }
    cic_mpvec_destroy(y0, n0);
    cic_mpvec_destroy(y1, n1);
    cic_model_destroy(m);
    return ce;
}

static void test_exact_on_norm_blocks(void **state)
{
    static const enum cic_block_kind blocks[] = {CIC_BLOCK_PRELN, CIC_BLOCK_RMSNORM,
                                                 CIC_BLOCK_PARALLEL};
    int it, b, n = 3 * cic_test_multiplier();
    (void)state;
    for (b = 0; b < 3; b++)
        for (it = 0; it < n; it++) {
            uint64_t seed = 7000 + (uint64_t)(b * 100 + it);
            cic_model_cfg c = random_cfg(seed, blocks[b]);
            double alpha = it == 0 ? 0.5 : (double)(cic_rng_u64(seed, 9) % 9) / 8;
            cic_model *orig = cic_model_create(&c, (it & 1) ? CIC_READOUT_RESIDUAL
                                                            : CIC_READOUT_HEAD);
            cic_xform_spec x = smooth(alpha, "none");
            double eq, br, ce;
            bool changed;
            assert_non_null(orig);
            cic_xform_thresholds(&eq, &br, &x, PREC);
            ce = ce_of(orig, &x, &changed);
            if (!(ce <= eq) || !changed)
                fail_msg("smooth-scale on %s: ce %.3g (equivalent up to %.3g), gains %s "
                         "(seed %llu, d %d, N %d, B %d, L %d, alpha %g)",
                         CIC_BLOCK_NAME[c.block], ce, eq, changed ? "changed" : "unchanged",
                         (unsigned long long)seed, c.d_model, c.tokens, c.samples, c.layers,
                         alpha);
            cic_model_destroy(orig);
        }
}

static void test_skip_bias_broken(void **state)
{
    int it, n = 3 * cic_test_multiplier();
    (void)state;
    for (it = 0; it < n; it++) {
        uint64_t seed = 7500 + (uint64_t)it;
        cic_model_cfg c = random_cfg(seed, CIC_BLOCK_PRELN);
        cic_model *orig = cic_model_create(&c, CIC_READOUT_HEAD);
        cic_xform_spec x = smooth(0.8, "skip-bias");
        double eq, br, ce;
        bool changed;
        assert_non_null(orig);
        cic_xform_thresholds(&eq, &br, &x, PREC);
        ce = ce_of(orig, &x, &changed);
        if (!(ce >= br))
            fail_msg("smooth-scale skip-bias: ce %.3g below the broken threshold %.3g (seed "
                     "%llu, d %d, L %d)", ce, br, (unsigned long long)seed, c.d_model, c.layers);
        cic_model_destroy(orig);
    }
}

static const char *const BASE =
    "[model]\nblock = \"%s\"\nd_model = 16\nheads = 2\ntokens = 4\nsamples = 1\n"
    "layers = 1\n[[transforms]]\nname = \"s\"\nkind = \"%s\"\n%s\n";

static int load(cic_case *c, cic_diag *d, const char *block, const char *kind,
                const char *extra)
{
    char text[1024];
    snprintf(text, sizeof text, BASE, block, kind, extra);
    memset(d, 0, sizeof *d);
    return cic_case_load_string(c, text, "smooth.toml", d);
}

static void expect_refused(const char *block, const char *kind, const char *extra,
                           const char *want)
{
    cic_case *c = cic_calloc(1, sizeof *c);
    cic_diag d;
    assert_non_null(c);
    if (load(c, &d, block, kind, extra) != CIC_EINPUT || !strstr(d.msg, want))
        fail_msg("%s %s '%s': want a refusal containing \"%s\", got \"%s\"", block, kind,
                 extra, want, d.msg);
    free(c);
}

static void test_loader(void **state)
{
    cic_case *c = cic_calloc(1, sizeof *c);
    cic_diag d;
    (void)state;
    assert_non_null(c);
    assert_int_equal(load(c, &d, "rmsnorm", "smooth-scale", ""), CIC_OK);
    assert_int_equal(c->xf[0].kind, CIC_XFORM_SMOOTH_SCALE);
    cic_assert_close(c->xf[0].param[0], 0.5, 0, 0); /* the default alpha */
    assert_int_equal(c->xf[0].expect, CIC_VERDICT_EQUIVALENT);
    assert_int_equal(load(c, &d, "preln", "smooth-scale", "alpha = 0.25\nmistake = \"skip-bias\""),
                     CIC_OK);
    cic_assert_close(c->xf[0].param[0], 0.25, 0, 0);
    assert_string_equal(cic_xform_mistake_name(&c->xf[0]), "skip-bias");
    free(c);
    expect_refused("dit", "smooth-scale", "",
                   "kind = \"smooth-scale\" needs block = \"preln\" or \"rmsnorm\" or "
                   "\"parallel\"");
    expect_refused("preln", "smooth-scale", "alpha = 1.5", "alpha");
    expect_refused("preln", "rotate", "q = \"random\"\nalpha = 0.5",
                   "'alpha' is only allowed for kind = \"smooth-scale\"");
    expect_refused("preln", "fuse-layernorm", "mistake = \"skip-bias\"",
                   "mistake \"skip-bias\" only applies to kind = \"smooth-scale\"");
    expect_refused("preln", "smooth-scale", "q = \"random\"", "'q' is only allowed");
}

/* No op is added: the closed form equals the original's. */
static void test_no_flops(void **state)
{
    cic_model_cfg c = random_cfg(11, CIC_BLOCK_PRELN);
    cic_xform_spec x = smooth(0.5, "none");
    cic_xform_chain ch = {&c, &x, 1, CIC_READOUT_HEAD, "t"};
    cic_flop_count a, b;
    (void)state;
    cic_flops_case(&a, &ch, -1);
    cic_flops_case(&b, &ch, 0);
    assert_true(cic_flop_total(&a) > 0);
    assert_memory_equal(&a, &b, sizeof a);
}

/* The table follows the list; a kind takes the key mistake exactly when it
 * has mistakes, and each is found by its name as its number. */
static void test_descriptors(void **state)
{
    int k, m;
    (void)state;
    for (k = 0; k < CIC_XFORM_COUNT; k++) {
        const cic_xform_desc *d = cic_xform_desc_of((enum cic_xform_kind)k);
        cic_xform_spec x = cic_test_xform_spec("x", (enum cic_xform_kind)k, CIC_Q_RANDOM, false);
        assert_non_null(d);
        assert_string_equal(d->name, CIC_XFORM_NAME[k]);
        assert_true((d->apply != NULL) != (d->build != NULL)); /* one way to rewrite */
        assert_true(d->norms != 0);
        assert_int_equal(d->mistakes[0] != NULL, (d->keys & CIC_XKEY_MISTAKE) != 0);
        assert_string_equal(cic_xform_mistake_name(&x), "none");
        assert_int_equal(cic_xform_mistake_find((enum cic_xform_kind)k, "none"), CIC_MISTAKE_NONE);
        for (m = 0; m < CIC_XFORM_MAX_MISTAKES && d->mistakes[m]; m++) {
            x.mistake = m + 1;
            assert_string_equal(cic_xform_mistake_name(&x), d->mistakes[m]);
            assert_int_equal(cic_xform_mistake_find((enum cic_xform_kind)k, d->mistakes[m]), m + 1);
        }
        x.mistake = m + 1; /* past its last */
        assert_string_equal(cic_xform_mistake_name(&x), "unknown");
        assert_int_equal(cic_xform_mistake_find((enum cic_xform_kind)k, "no-such-mistake"), -1);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_descriptors),
        cmocka_unit_test(test_loader),
        cmocka_unit_test(test_no_flops),
        cmocka_unit_test(test_exact_on_norm_blocks),
        cmocka_unit_test(test_skip_bias_broken),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
