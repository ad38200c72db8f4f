/* SPDX-License-Identifier: MIT */
/* test_flops.c: the op table's FLOP formulas (src/model/op.h) against hand
 * counts for small sizes; the per-block dispatch of the closed forms
 * (src/metric/flops.c: an unknown block kind stops, it never gets another
 * block's formula); and the closed-form FLOP formulas of the dit (adaLN)
 * block and its strategies (src/metric/flops_dit.c).
 *
 * Per-site counts of a tiny configuration are written out by hand from the
 * adaLN spec's op list (arithmetic in the comments) and compared exactly
 * with cic_flops_dit for the original graph and every strategy (and a fast
 * one with a forced Hadamard base, in the analytical table too). Properties:
 * static-fold's modulation site is 0, online dense minus original at norm1
 * is L (2 R d^2 - (2d+1) R) for a centered stream, percentages do not depend
 * on B, and the crossover agrees with a brute-force search over integer N. */
#include "testutil.h"

#include "metric/flops.h"
#include "report/report.h"
#include "xform/qmat.h"
#include "xform/xform.h"

#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* d = 4, heads = 2 (dh = 2), N = 2, B = 1 (R = 2), L = 1, m = 16,
 * d_cond = 4, d_out = 3, non-causal (V = N^2 = 4), gelu-tanh, final layer. */
static cic_model_cfg tiny(void)
{
    cic_model_cfg c;
    memset(&c, 0, sizeof c);
    c.block = CIC_BLOCK_DIT;
    c.d_model = 4;
    c.heads = 2;
    c.mlp_ratio = 4;
    c.d_mlp = 16;
    c.tokens = 2;
    c.samples = 1;
    c.layers = 1;
    c.eps = 1e-6;
    c.causal = false;
    c.act = CIC_ACT_GELU_TANH;
    c.d_out = 3;
    c.d_cond = 4;
    c.final_layer = true;
    return c;
}

/* DiT-XL/2: d 1152, 16 heads, m 4608, d_cond 1152, d_out 32 (learned sigma). */
static cic_model_cfg dit_xl(int layers)
{
    cic_model_cfg c = tiny();
    c.d_model = 1152;
    c.heads = 16;
    c.d_mlp = 4608;
    c.d_cond = 1152;
    c.d_out = 32;
    c.tokens = 256;
    c.layers = layers;
    return c;
}

static cic_xform_spec spec(enum cic_xform_kind k, enum cic_stream s, bool fast)
{
    cic_xform_spec x;
    memset(&x, 0, sizeof x);
    x.kind = k;
    x.stream = s;
    x.fast = fast;
    x.q = CIC_Q_IDENTITY; /* the work does not depend on Q */
    x.after = -1;
    return x;
}

/* Sites in enum order: input, modulation, norm1, attn, gate1, norm2, mlp,
 * gate2, final. */
static void check_sites(const cic_model_cfg *c, const cic_xform_spec *x,
                        const double want[CIC_SITE_COUNT])
{
    cic_flop_count fc;
    int s;
    cic_flops_dit(&fc, c, x);
    for (s = 0; s < CIC_SITE_COUNT; s++) {
        if (fc.site[s] != want[s])
            fail_msg("%s: site %s = %.17g, expected %.17g",
                     x ? "strategy" : "original", CIC_SITE_NAME[s], fc.site[s], want[s]);
    }
}

/* Original:
 * modulation: SiLU 3 B dc = 12; ada 2*1*24*4 + 24 = 216;
 *             final ada 2*1*8*4 + 8 = 72;                  total 300
 * norm1: LN0 R(5d+5) = 2*25 = 50; MODULATE B d + 2 R d = 4 + 16 = 20;  70
 * attn: qkv 2*2*12*4 + 2*12 = 216; ATTN B H (4 N^2 dh + N^2 + 5 V)
 *       = 2 (32 + 4 + 20) = 112; proj 2*2*4*4 + 2*4 = 72;              400
 * gate1: GATE R d = 8 + ADD 8;                                          16
 * norm2: 70
 * mlp: fc1 2*2*16*4 + 2*16 = 288; gelu-tanh 9*2*16 = 288;
 *      fc2 2*2*4*16 + 2*4 = 264;                                       840
 * gate2: 16
 * final: LN0 50 + MODULATE 20 + linear 2*2*3*4 + 2*3 = 54;             124 */
static void test_tiny_original(void **state)
{
    cic_model_cfg c = tiny();
    const double want[CIC_SITE_COUNT] = {0, 300, 70, 400, 16, 70, 840, 16, 124};
    (void)state;
    check_sites(&c, NULL, want);
}

/* final_layer false: no final ada linear (300 - 72 = 228), no final work. */
static void test_tiny_no_final(void **state)
{
    cic_model_cfg c = tiny();
    const double want[CIC_SITE_COUNT] = {0, 228, 70, 400, 16, 70, 840, 16, 0};
    (void)state;
    c.final_layer = false;
    check_sites(&c, NULL, want);
}

/* Causal, B = 2 (R = 4), L = 2: V = N(N+1)/2 = 3.
 * modulation: SiLU 3*2*4 = 24; ada per layer 2*2*24*4 + 2*24 = 432, x2 = 864;
 *             final ada 2*2*8*4 + 16 = 144;                total 1032
 * norm1: L (LN0 4*25 = 100 + MODULATE 2*4 + 2*4*4 = 40) = 2*140 = 280
 * attn: qkv 2*4*12*4 + 4*12 = 432; ATTN 2*2*(32 + 4 + 15) = 204;
 *       proj 2*4*16 + 16 = 144; per layer 780, x2 = 1560
 * gate1: 2 (16 + 16) = 64
 * mlp: fc1 2*4*64 + 64 = 576; act 9*64 = 576; fc2 2*4*64 + 16 = 528;
 *      per layer 1680, x2 = 3360
 * final: LN0 100 + MODULATE 40 + linear 2*4*12 + 12 = 108;       248 */
static void test_tiny_causal_b2(void **state)
{
    cic_model_cfg c = tiny();
    const double want[CIC_SITE_COUNT] = {0, 1032, 280, 1560, 64, 280, 3360, 64, 248};
    (void)state;
    c.causal = true;
    c.samples = 2;
    c.layers = 2;
    check_sites(&c, NULL, want);
}

/* online-unrotate dense, centered:
 * norm1: RMS0 R(3d+4) = 2*16 = 32; unrotate 2 R d^2 = 64; MODULATE 20;  116
 * gate1: GATE 8 + CENTER R(2d+1) = 18 + rotate 64 + ADD 8;               98
 * final: 32 + 64 + 20 + linear 54;                                      170 */
static void test_tiny_online_dense(void **state)
{
    cic_model_cfg c = tiny();
    cic_xform_spec x = spec(CIC_XFORM_ONLINE_UNROTATE, CIC_STREAM_CENTERED, false);
    const double want[CIC_SITE_COUNT] = {0, 300, 116, 400, 98, 116, 840, 98, 170};
    (void)state;
    check_sites(&c, &x, want);
}

/* online-unrotate fast, centered: FWHT R (d log2 d + 2d) = 2 (8 + 8) = 32.
 * norm1: 32 + 32 + 20 = 84; gate1: 8 + 18 + 32 + 8 = 66;
 * final: 32 + 32 + 20 + 54 = 138 */
static void test_tiny_online_fast(void **state)
{
    cic_model_cfg c = tiny();
    cic_xform_spec x = spec(CIC_XFORM_ONLINE_UNROTATE, CIC_STREAM_CENTERED, true);
    const double want[CIC_SITE_COUNT] = {0, 300, 84, 400, 66, 84, 840, 66, 138};
    (void)state;
    check_sites(&c, &x, want);
}

/* online-unrotate dense, mean-preserving: norms stay LN0, no CENTER.
 * norm1: 50 + 64 + 20 = 134; gate1: 8 + 64 + 8 = 80;
 * final: 50 + 64 + 20 + 54 = 188 */
static void test_tiny_online_meanpres(void **state)
{
    cic_model_cfg c = tiny();
    cic_xform_spec x = spec(CIC_XFORM_ONLINE_UNROTATE, CIC_STREAM_MEAN_PRESERVING, false);
    const double want[CIC_SITE_COUNT] = {0, 300, 134, 400, 80, 134, 840, 80, 188};
    (void)state;
    check_sites(&c, &x, want);
}

/* per-sample-fold, centered (B = 1):
 * norm1: RMS0 32; FOLD_IN_W qkv n = 12: d + n d + 2 n d^2 = 4 + 48 + 384
 *        = 436; FOLD_IN_B n(2d+1) = 12*9 = 108;                        576
 * gate1: FOLD_OUT_W proj k = 4: d k + (2d+1) k + 2 d^2 k = 16 + 36 + 128
 *        = 180; FOLD_OUT_B d + (2d+1) + 2 d^2 = 4 + 9 + 32 = 45; ADD 8; 233
 * norm2: 32; FOLD_IN_W fc1 n = 16: 4 + 64 + 512 = 580; FOLD_IN_B 16*9
 *        = 144;                                                        756
 * gate2: FOLD_OUT_W fc2 k = 16: 64 + 144 + 512 = 720; FOLD_OUT_B 45;
 *        ADD 8;                                                        773
 * final: 32; FOLD_IN_W n = 3: 4 + 12 + 96 = 112; FOLD_IN_B 27;
 *        linear 54;                                                    225 */
static void test_tiny_per_sample_fold(void **state)
{
    cic_model_cfg c = tiny();
    cic_xform_spec x = spec(CIC_XFORM_PER_SAMPLE_FOLD, CIC_STREAM_CENTERED, false);
    const double want[CIC_SITE_COUNT] = {0, 300, 576, 400, 233, 756, 840, 773, 225};
    (void)state;
    check_sites(&c, &x, want);
}

/* per-sample-fold, mean-preserving (LN0, no centering terms in the folds):
 * norm1: 50 + 436 + 108 = 594; norm2: 50 + 580 + 144 = 774;
 * gate1: FOLD_OUT_W 16 + 128 = 144; FOLD_OUT_B 4 + 32 = 36; ADD 8;     188
 * gate2: FOLD_OUT_W 64 + 512 = 576; FOLD_OUT_B 36; ADD 8;              620
 * final: 50 + 112 + 27 + 54 = 243.
 * B = 2 doubles every count here (fold work per sample, the rest per row),
 * modulation 2*300 = 600, ATTN 2*112 so attn 800, mlp 1680. */
static void test_tiny_per_sample_fold_meanpres(void **state)
{
    cic_model_cfg c = tiny();
    cic_xform_spec x = spec(CIC_XFORM_PER_SAMPLE_FOLD, CIC_STREAM_MEAN_PRESERVING, false);
    const double want[CIC_SITE_COUNT] = {0, 300, 594, 400, 188, 774, 840, 620, 243};
    const double want2[CIC_SITE_COUNT] = {0, 600, 1188, 800, 376, 1548, 1680, 1240, 486};
    (void)state;
    check_sites(&c, &x, want);
    c.samples = 2;
    check_sites(&c, &x, want2);
}

/* static-fold, centered: modulation 0; norms RMS0 32; gates ADD 8;
 * final RMS0 32 + linear 54 = 86. */
static void test_tiny_static_fold(void **state)
{
    cic_model_cfg c = tiny();
    cic_xform_spec x = spec(CIC_XFORM_STATIC_FOLD, CIC_STREAM_CENTERED, false);
    const double want[CIC_SITE_COUNT] = {0, 0, 32, 400, 8, 32, 840, 8, 86};
    (void)state;
    check_sites(&c, &x, want);
}

/* branch-rotate dense: 2 R w^2: w = 4: 64, w = 16: 1024.
 * attn 400 + 64 (qkv) + 64 (proj) = 528; mlp 840 + 64 (fc1) + 1024 (fc2)
 * = 1928; final 124 + 64 = 188; everything else original. */
static void test_tiny_branch_dense(void **state)
{
    cic_model_cfg c = tiny();
    cic_xform_spec x = spec(CIC_XFORM_BRANCH_ROTATE, CIC_STREAM_CENTERED, false);
    const double want[CIC_SITE_COUNT] = {0, 300, 70, 528, 16, 70, 1928, 16, 188};
    (void)state;
    check_sites(&c, &x, want);
}

/* branch-rotate fast: FWHT R (w log2 w + 2w): w = 4: 2 (8 + 8) = 32;
 * w = 16: 2 (64 + 32) = 192. attn 400 + 32 + 32 = 464; mlp 840 + 32 + 192
 * = 1064; final 124 + 32 = 156. */
static void test_tiny_branch_fast(void **state)
{
    cic_model_cfg c = tiny();
    cic_xform_spec x = spec(CIC_XFORM_BRANCH_ROTATE, CIC_STREAM_CENTERED, true);
    const double want[CIC_SITE_COUNT] = {0, 300, 70, 464, 16, 70, 1064, 16, 156};
    (void)state;
    check_sites(&c, &x, want);
}

/* branch-rotate fast with hadamard_base = 4 (q = hadamard): FWHT R (K P
 * log2 P + P K (K - 1) + 2w): w = 4 = 4 x 1: 2 (0 + 12 + 8) = 40; w = 16 =
 * 4 x 4: 2 (32 + 48 + 32) = 224. attn 400 + 40 + 40 = 480; mlp 840 + 40 +
 * 224 = 1104; final 124 + 40 = 164. The base only counts for q = hadamard
 * (the loader refuses it otherwise): with q = identity the automatic
 * counts of test_tiny_branch_fast. */
static void test_tiny_branch_fast_forced_base(void **state)
{
    cic_model_cfg c = tiny();
    cic_xform_spec x = spec(CIC_XFORM_BRANCH_ROTATE, CIC_STREAM_CENTERED, true);
    const double want[CIC_SITE_COUNT] = {0, 300, 70, 480, 16, 70, 1104, 16, 164};
    const double automatic[CIC_SITE_COUNT] = {0, 300, 70, 464, 16, 70, 1064, 16, 156};
    (void)state;
    x.hadamard_base = 4;
    check_sites(&c, &x, automatic);
    x.q = CIC_Q_HADAMARD;
    check_sites(&c, &x, want);
}

/* The analytical table's rows for the case's transforms use their own
 * hadamard_base: a forced base costs more than the strategy row's
 * automatic one (which stays as it was), a transform without one has the
 * strategy's figures exactly, and a base that does not fit the MLP width
 * (d 4 = 4 x 1 fits, m 24 = 4 x 6 does not) is n/a for branch-rotate
 * fast. */
static void test_table_forced_base(void **state)
{
    static cic_case kc;
    cic_dit_flops_table t;
    int k;
    (void)state;
    memset(&kc, 0, sizeof kc);
    kc.model = tiny();
    kc.n_xf = 2;
    kc.xf[0] = spec(CIC_XFORM_BRANCH_ROTATE, CIC_STREAM_CENTERED, true);
    kc.xf[0].q = CIC_Q_HADAMARD;
    kc.xf[1] = kc.xf[0];
    kc.xf[0].hadamard_base = 4;
    assert_true(cic_dit_flops_table_fill(&t, CIC_CASE_CHAIN(&kc)));
    assert_string_equal(CIC_DIT_STRATEGIES[4].label, "branch-fast");
    for (k = 0; k < CIC_DIT_TABLE_N; k++) {
        if (!(t.xf_pct[0][k] > t.pct[4][k]))
            fail_msg("N %d: forced base %.17g%% not above the automatic %.17g%%", t.tokens[k],
                     t.xf_pct[0][k], t.pct[4][k]);
        cic_assert_close(t.xf_pct[1][k], t.pct[4][k], 0, 0);
    }
    kc.model.d_mlp = 24;
    assert_true(cic_dit_flops_table_fill(&t, CIC_CASE_CHAIN(&kc)));
    assert_true(isnan(t.xf_pct[0][0]));
    assert_false(isnan(t.xf_pct[1][0]));
}

static const cic_model_cfg *prop_cfgs(int *n)
{
    static cic_model_cfg cs[4];
    cs[0] = tiny();
    cs[1] = tiny();
    cs[1].causal = true;
    cs[1].samples = 3;
    cs[1].layers = 3;
    cs[1].tokens = 7;
    cs[2] = dit_xl(1);
    cs[3] = dit_xl(28);
    cs[3].d_model = 1024; /* a power of two, so the fast variants apply */
    cs[3].d_mlp = 4096;
    cs[3].final_layer = false;
    *n = 4;
    return cs;
}

static void test_static_fold_modulation_zero(void **state)
{
    int n, i, s;
    const cic_model_cfg *cs = prop_cfgs(&n);
    (void)state;
    for (i = 0; i < n; i++) {
        for (s = 0; s < CIC_STREAM_COUNT; s++) {
            cic_flop_count fc;
            cic_xform_spec x = spec(CIC_XFORM_STATIC_FOLD, (enum cic_stream)s, false);
            cic_flops_dit(&fc, &cs[i], &x);
            cic_assert_close(fc.site[CIC_SITE_MOD], 0.0, 0, 0);
        }
    }
}

static void test_online_norm1_delta(void **state)
{
    int n, i;
    const cic_model_cfg *cs = prop_cfgs(&n);
    (void)state;
    for (i = 0; i < n; i++) {
        const cic_model_cfg *c = &cs[i];
        double R = (double)c->tokens * c->samples, d = c->d_model, L = c->layers;
        cic_flop_count o, t;
        cic_xform_spec x = spec(CIC_XFORM_ONLINE_UNROTATE, CIC_STREAM_CENTERED, false);
        cic_flops_dit(&o, c, NULL);
        cic_flops_dit(&t, c, &x);
        cic_assert_close(t.site[CIC_SITE_NORM1] - o.site[CIC_SITE_NORM1],
                         L * (2 * R * d * d - (2 * d + 1) * R), 0, 0);
        cic_assert_close(t.site[CIC_SITE_NORM2] - o.site[CIC_SITE_NORM2],
                         L * (2 * R * d * d - (2 * d + 1) * R), 0, 0);
        /* attention, mlp and modulation are untouched */
        cic_assert_close(t.site[CIC_SITE_ATTN], o.site[CIC_SITE_ATTN], 0, 0);
        cic_assert_close(t.site[CIC_SITE_MLP], o.site[CIC_SITE_MLP], 0, 0);
        cic_assert_close(t.site[CIC_SITE_MOD], o.site[CIC_SITE_MOD], 0, 0);
    }
}

/* Percentages with B samples equal those with B = 1. */
static void test_pct_scale_invariant(void **state)
{
    int n, i, j, b;
    const cic_model_cfg *cs = prop_cfgs(&n);
    (void)state;
    for (i = 0; i < n; i++) {
        for (j = 0; j < CIC_DIT_STRATEGY_COUNT; j++) {
            const cic_dit_strategy *s = &CIC_DIT_STRATEGIES[j];
            cic_xform_spec x = spec(s->kind, s->stream, s->fast);
            double p1 = 0;
            if (!cic_dit_strategy_applies(&cs[i], s))
                continue; /* log2 of a non-power of two: not an integer count */
            for (b = 1; b <= 5; b++) {
                cic_model_cfg c = cs[i];
                cic_flop_count o, t;
                double p;
                c.samples = b;
                cic_flops_dit(&o, &c, NULL);
                cic_flops_dit(&t, &c, &x);
                p = 100 * (cic_flop_total(&t) - cic_flop_total(&o)) / cic_flop_total(&o);
                if (b == 1) {
                    p1 = p;
                    cic_assert_close(cic_flops_dit_extra_pct(&c, s, c.tokens), p, 0, 0);
                }
                /* every count is an integer below 2^53 and exact, and B
                 * scales extra and base alike: the same double */
                cic_assert_close(p, p1, 0, 0);
            }
        }
    }
}

/* The first integer N where per-sample-fold's extra <= online's extra, by
 * brute force, against max(1, ceil(N*)). */
static void check_crossover(const cic_model_cfg *cfg, const cic_dit_strategy *on,
                            double nstar)
{
    const cic_dit_strategy *fold = &CIC_DIT_STRATEGIES[2];
    cic_xform_spec xf = spec(fold->kind, fold->stream, fold->fast);
    cic_xform_spec xo = spec(on->kind, on->stream, on->fast);
    cic_model_cfg c = *cfg;
    int N, first = -1;
    c.samples = 1;
    for (N = 1; N <= 1 << 20; N++) {
        cic_flop_count o, f, t;
        double ef, eo;
        c.tokens = N;
        cic_flops_dit(&o, &c, NULL);
        cic_flops_dit(&f, &c, &xf);
        cic_flops_dit(&t, &c, &xo);
        ef = cic_flop_total(&f) - cic_flop_total(&o);
        eo = cic_flop_total(&t) - cic_flop_total(&o);
        if (ef <= eo) {
            first = N;
            break;
        }
    }
    if (first < 0)
        fail_msg("%s: no crossover up to 2^20 (N* = %g)", on->label, nstar);
    cic_assert_close(fmax(1, ceil(nstar)), (double)first, 0, 0);
}

static void test_crossover(void **state)
{
    int n, i;
    const cic_model_cfg *cs = prop_cfgs(&n);
    (void)state;
    for (i = 0; i < n; i++) {
        double nd, nf;
        assert_int_equal(cic_flops_dit_crossover(&nd, &nf, &cs[i]), 0);
        check_crossover(&cs[i], &CIC_DIT_STRATEGIES[0], nd);
        if (cic_dit_strategy_applies(&cs[i], &CIC_DIT_STRATEGIES[1]))
            check_crossover(&cs[i], &CIC_DIT_STRATEGIES[1], nf);
        else
            assert_true(isnan(nf));
    }
}

/* F / (e_o - e_f) from the spec directly for the tiny config (B = 1, L = 1,
 * d = 4, m = 16, d_out = 3, centered):
 * per-sample work F: FOLD_IN qkv 436 + 108, fc1 580 + 144, final 112 + 27;
 *   FOLD_OUT proj 180 + 45, fc2 720 + 45; minus the B d of the three
 *   MODULATEs (3*4 = 12): F = 2397 - 12 = 2385.
 * per token (R = N): fold: RMS0 - LN0 - 2d (modulate) = 16 - 25 - 8 = -17
 *   at three norm sites, -d = -4 (no GATE) at two gate sites: e_f = -59.
 * online dense: 16 - 25 + 2*16 = 23 at three norm sites; CENTER 9 + 32 at
 *   two gate sites: e_o = 69 + 82 = 151. N* = 2385 / 210 = 11.357...;
 * online fast: 16 - 25 + 16 = 7 (x3), 9 + 16 = 25 (x2): e_o = 71;
 *   N* = 2385 / 130 = 18.346... */
static void test_crossover_tiny(void **state)
{
    cic_model_cfg c = tiny();
    double nd, nf;
    (void)state;
    cic_flops_dit_crossover(&nd, &nf, &c);
    cic_assert_close(nd, 2385.0 / 210.0, 0, 0);
    cic_assert_close(nf, 2385.0 / 130.0, 0, 0);
}

static void test_na_and_table(void **state)
{
    static cic_case kc;
    cic_dit_flops_table t;
    cic_model_cfg c = dit_xl(28);
    char buf[8192];
    size_t len;
    FILE *f = tmpfile();
    (void)state;
    assert_non_null(f);
    /* DiT-XL: d 1152 = 36 * 32, m 4608 = 36 * 128 (Paley II base of order
     * 36): both fast variants apply */
    assert_true(cic_dit_strategy_applies(&c, &CIC_DIT_STRATEGIES[1]));
    assert_true(cic_dit_strategy_applies(&c, &CIC_DIT_STRATEGIES[4]));
    /* d 1168 = 73 * 16: no Hadamard construction here */
    c.d_model = 1168;
    c.d_mlp = 4672;
    assert_false(cic_dit_strategy_applies(&c, &CIC_DIT_STRATEGIES[1]));
    assert_true(isnan(cic_flops_dit_extra_pct(&c, &CIC_DIT_STRATEGIES[1], 256)));
    assert_true(isnan(cic_flops_dit_extra_pct(&c, &CIC_DIT_STRATEGIES[4], 256)));
    assert_false(isnan(cic_flops_dit_extra_pct(&c, &CIC_DIT_STRATEGIES[0], 256)));
    /* d supported but m not: online fast applies, branch fast does not */
    c.d_model = 1024;
    c.d_mlp = 4672;
    assert_true(cic_dit_strategy_applies(&c, &CIC_DIT_STRATEGIES[1]));
    assert_false(cic_dit_strategy_applies(&c, &CIC_DIT_STRATEGIES[4]));
    c = dit_xl(28);
    c.d_model = 1168;
    c.d_mlp = 4672;
    kc.model = c;
    assert_true(cic_dit_flops_table_fill(&t, CIC_CASE_CHAIN(&kc)));
    assert_int_equal(cic_report_dit_flops_table(f, &t), 0);
    rewind(f);
    len = fread(buf, 1, sizeof buf - 1, f);
    buf[len] = 0;
    fclose(f);
    assert_non_null(strstr(buf, "n/a"));
    assert_non_null(strstr(buf, "65536"));
    assert_non_null(strstr(buf, "online-dense"));
}

/* ---- the op table's formulas ---- */

/* Each formula on small sizes, the arithmetic in the comments (engine.h
 * convention: multiply-add 2, anything else 1). */
/* R4 (online-down) after R1 on an rmsnorm block: the engine's counted
 * FLOPs equal cic_flops_case site by site, and the extra over R1 is the
 * fast Hadamard of the MLP width per layer (cic_op_flops_fwht), by hand:
 * m = 48 = 12 x 4, R = 6 rows, L = 2: 6 (48 log2 4 + 4 * 12 * 11 + 96) per
 * layer = 6 * 720 = 4320, 8640 in all. The skip-online mistake adds none. */
static void test_online_down_counted(void **state)
{
    static const char text[] =
        "[model]\nblock = \"rmsnorm\"\nd_model = 24\nheads = 2\nmlp_ratio = 2\n"
        "tokens = 3\nsamples = 2\nlayers = 2\nseed = 4\n"
        "[[transforms]]\nname = \"r1\"\nkind = \"rotate\"\nq = \"hadamard\"\n"
        "[[transforms]]\nname = \"r4\"\nkind = \"online-down\"\nafter = \"r1\"\n"
        "q = \"hadamard\"\n"
        "[[transforms]]\nname = \"bad\"\nkind = \"online-down\"\nafter = \"r1\"\n"
        "q = \"hadamard\"\nmistake = \"skip-online\"\nexpect = \"broken\"\n";
    cic_case c;
    cic_diag d;
    cic_model *orig, *r1, *m;
    cic_flop_count want, got, base;
    int i, s;
    (void)state;
    memset(&d, 0, sizeof d);
    assert_int_equal(cic_case_load_string(&c, text, "r4.toml", &d), CIC_OK);
    assert_int_equal(cic_hadamard_base_order(48), 12);
    orig = cic_model_create(&c.model, c.readout);
    r1 = cic_xform_apply(orig, &c.xf[0], 128, &d);
    assert_non_null(r1);
    cic_flops_case(&base, CIC_CASE_CHAIN(&c), 0);
    for (i = 1; i < 3; i++) {
        float *y = cic_calloc((size_t)orig->rows * cic_model_out_cols(orig), sizeof *y);
        cic_run_opts o;
        m = cic_xform_apply(r1, &c.xf[i], 128, &d);
        assert_non_null(m);
        memset(&o, 0, sizeof o);
        memset(&got, 0, sizeof got);
        o.flops = &got;
        assert_int_equal(cic_engine_f32_run(y, m, CIC_MATMUL_FIXED, &o), 0);
        cic_flops_case(&want, CIC_CASE_CHAIN(&c), i);
        for (s = 0; s < CIC_SITE_COUNT; s++)
            if (got.site[s] != want.site[s])
                fail_msg("%s: site %s counted %.17g, formulas %.17g", c.xf[i].name,
                         CIC_SITE_NAME[s], got.site[s], want.site[s]);
        assert_true(want.site[CIC_SITE_MLP] - base.site[CIC_SITE_MLP] == (i == 1 ? 8640 : 0));
        free(y);
        cic_model_destroy(m);
    }
    cic_model_destroy(r1);
    cic_model_destroy(orig);
}

static void test_op_formulas(void **state)
{
    (void)state;
    /* linear R 3, k 4, n 5: 2*3*5*4 = 120, bias 3*5 = 15 */
    cic_assert_close(cic_op_flops_linear(3, 4, 5, false), 120, 0, 0);
    cic_assert_close(cic_op_flops_linear(3, 4, 5, true), 135, 0, 0);
    /* norm R 3, d 4: center 2*4+1 = 9, squares + rstd 3*4+4 = 16, gain 4,
     * bias 4: LayerNorm 3*33 = 99, RMSNorm with gain 3*20 = 60, RMS0 48 */
    cic_assert_close(cic_op_flops_norm(3, 4, true, true, true), 99, 0, 0);
    cic_assert_close(cic_op_flops_norm(3, 4, false, true, false), 60, 0, 0);
    cic_assert_close(cic_op_flops_norm(3, 4, false, false, false), 48, 0, 0);
    cic_assert_close(cic_op_flops_norm(3, 4, true, false, false), 75, 0, 0);
    /* attention B 2, H 2, N 3, dh 2: per head 4*9*2 = 72 (q k^T, P V),
     * 9 scalings, 5 per visible key: 9 keys 45, causal 6 keys 30 */
    cic_assert_close(cic_op_flops_attn(2, 2, 3, 2, false), 4 * (72 + 9 + 45), 0, 0);
    cic_assert_close(cic_op_flops_attn(2, 2, 3, 2, true), 4 * (72 + 9 + 30), 0, 0);
    /* activations, per call and over 10 values; GLU adds the mul */
    cic_assert_close(cic_op_flops_act(CIC_ACT_GELU), 5, 0, 0);
    cic_assert_close(cic_op_flops_act(CIC_ACT_GELU_TANH), 9, 0, 0);
    cic_assert_close(cic_op_flops_act(CIC_ACT_RELU), 1, 0, 0);
    cic_assert_close(cic_op_flops_act(CIC_ACT_SILU), 3, 0, 0);
    cic_assert_close(cic_op_flops_act(CIC_ACT_QUICK_GELU), 4, 0, 0);
    cic_assert_close(cic_op_flops_elementwise_act(CIC_ACT_GELU, 10), 50, 0, 0);
    cic_assert_close(cic_op_flops_glu(CIC_ACT_SILU, 10), 40, 0, 0);
    cic_assert_close(cic_op_flops_add(10), 10, 0, 0);
    /* RoPE R 3, w 8: 4 pairs per row, 4 muls + 2 adds/subs each: 3*24 */
    cic_assert_close(cic_op_flops_rope(3, 8), 72, 0, 0);
    /* modulate B 2, R 6, d 4: 1 + scale 2*4 = 8, mul and add 2*6*4 = 48;
     * gate 6*4; center 6*(2*4+1) */
    cic_assert_close(cic_op_flops_modulate(2, 6, 4), 56, 0, 0);
    cic_assert_close(cic_op_flops_gate(6, 4), 24, 0, 0);
    cic_assert_close(cic_op_flops_center(6, 4), 54, 0, 0);
    /* FWHT per row: K P log2 P + P K (K - 1) + 2w.
     * w 8 (K 1, P 8): 24 + 0 + 16 = 40, R 2: 80;
     * w 12 (K 12, P 1): 0 + 132 + 24 = 156;
     * w 24 (K 12, P 2): 24 + 264 + 48 = 336;
     * w 6, no construction (K 0 counts as 1): 6 log2 6 + 12 */
    cic_assert_close(cic_op_flops_fwht(2, 8, 1), 80, 0, 0);
    cic_assert_close(cic_op_flops_fwht(1, 12, 12), 156, 0, 0);
    cic_assert_close(cic_op_flops_fwht(1, 24, 12), 336, 0, 0);
    cic_assert_close(cic_op_flops_fwht(1, 6, 0), 6 * log2(6.0) + 12, 0, 0);
    /* folds, B 2, d 4:
     * in_w n 3: 1 + scale 4, W diag 12, times Q 2*3*16 = 96: 2*112;
     * in_b n 3: 3 dots of 4 + bias, 3*9: 2*27;
     * out_w k 3: diag(gate) W 12, center 3*9 = 27, Q^T 2*16*3 = 96:
     *   2*135, without center 2*108;
     * out_b: gate * b 4, center 9, Q^T 32: 2*45, without center 2*36 */
    cic_assert_close(cic_op_flops_fold_in_w(2, 3, 4), 224, 0, 0);
    cic_assert_close(cic_op_flops_fold_in_b(2, 3, 4), 54, 0, 0);
    cic_assert_close(cic_op_flops_fold_out_w(2, 4, 3, true), 270, 0, 0);
    cic_assert_close(cic_op_flops_fold_out_w(2, 4, 3, false), 216, 0, 0);
    cic_assert_close(cic_op_flops_fold_out_b(2, 4, true), 90, 0, 0);
    cic_assert_close(cic_op_flops_fold_out_b(2, 4, false), 72, 0, 0);
}

/* ---- per-block dispatch ---- */

/* A case of the tiny sizes and the given block kind, head readout, one
 * transform (fuse-layernorm; dit: online-unrotate). */
static void tiny_case(cic_case *c, enum cic_block_kind block)
{
    memset(c, 0, sizeof *c);
    c->model = tiny();
    c->model.block = block;
    c->readout = CIC_READOUT_HEAD;
    c->n_xf = 1;
    c->xf[0] = spec(block == CIC_BLOCK_DIT ? CIC_XFORM_ONLINE_UNROTATE
                                           : CIC_XFORM_FUSE_LAYERNORM,
                    CIC_STREAM_CENTERED, false);
}

/* Does fn(arg) stop on an assertion (SIGABRT) in a child process? */
static bool aborts(void (*fn)(int), int arg)
{
    int st = 0;
    pid_t p;
    fflush(NULL);
    p = fork();
    assert_true(p >= 0);
    if (p == 0) {
        /* the assertion's message is expected: keep the log clean */
        if (!freopen("/dev/null", "w", stderr))
            _exit(3);
        fn(arg);
        _exit(0);
    }
    assert_true(waitpid(p, &st, 0) == p);
    return WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT;
}

static void call_analytical(int block)
{
    cic_model_cfg c = tiny();
    cic_flop_count fc;
    cic_norm_state ns = {true, true, true};
    c.block = (enum cic_block_kind)block;
    cic_flops_analytical(&fc, &c, CIC_READOUT_HEAD, ns);
}

static void call_case(int block)
{
    cic_case c;
    cic_flop_count fc;
    tiny_case(&c, CIC_BLOCK_PRELN);
    c.model.block = (enum cic_block_kind)block;
    cic_flops_case(&fc, CIC_CASE_CHAIN(&c), -1);
}

/* cic_flops_case gives each block kind its own closed form (its
 * descriptor's, or flops_dit.c's for the adaLN blocks); a block kind
 * without one (dit in cic_flops_analytical, an unknown kind anywhere)
 * stops instead of getting another block's formula. Every descriptor has
 * a closed form or is an adaLN block. */
static void test_block_dispatch(void **state)
{
    cic_case c;
    cic_flop_count a, b;
    int s;
    (void)state;
    tiny_case(&c, CIC_BLOCK_DIT);
    cic_flops_case(&a, CIC_CASE_CHAIN(&c), -1);
    cic_flops_dit(&b, &c.model, NULL);
    for (s = 0; s < CIC_SITE_COUNT; s++)
        cic_assert_close(a.site[s], b.site[s], 0, 0);
    cic_flops_case(&a, CIC_CASE_CHAIN(&c), 0);
    cic_flops_dit(&b, &c.model, &c.xf[0]);
    for (s = 0; s < CIC_SITE_COUNT; s++)
        cic_assert_close(a.site[s], b.site[s], 0, 0);
    /* preln: LayerNorm with gain and bias (7d + 5 per row, R = 2), RMS0
     * after fuse-layernorm (3d + 4); rmsnorm's linears have no bias, so
     * its attention site differs from preln's */
    tiny_case(&c, CIC_BLOCK_PRELN);
    cic_flops_case(&a, CIC_CASE_CHAIN(&c), 0);
    cic_assert_close(a.site[CIC_SITE_NORM1], 2.0 * (3 * 4 + 4), 0, 0);
    cic_flops_case(&b, CIC_CASE_CHAIN(&c), -1);
    cic_assert_close(b.site[CIC_SITE_NORM1], 2.0 * (7 * 4 + 5), 0, 0);
    tiny_case(&c, CIC_BLOCK_RMSNORM);
    cic_flops_case(&b, CIC_CASE_CHAIN(&c), -1);
    assert_true(a.site[CIC_SITE_ATTN] != b.site[CIC_SITE_ATTN]);
    assert_false(aborts(call_analytical, CIC_BLOCK_PRELN));
    assert_false(aborts(call_analytical, CIC_BLOCK_RMSNORM));
    assert_true(aborts(call_analytical, CIC_BLOCK_DIT));
    assert_true(aborts(call_analytical, CIC_BLOCK_COUNT));
    assert_false(aborts(call_case, CIC_BLOCK_DIT));
    assert_true(aborts(call_case, CIC_BLOCK_COUNT));
    for (s = 0; s < CIC_BLOCK_COUNT; s++) {
        const cic_block_desc *d = cic_block((enum cic_block_kind)s);
        if (!d->flops && d->norm != CIC_NORM_ADALN)
            fail_msg("block kind %s has no closed-form FLOPs", d->name);
        assert_false(aborts(call_case, s));
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tiny_original),
        cmocka_unit_test(test_tiny_no_final),
        cmocka_unit_test(test_tiny_causal_b2),
        cmocka_unit_test(test_tiny_online_dense),
        cmocka_unit_test(test_tiny_online_fast),
        cmocka_unit_test(test_tiny_online_meanpres),
        cmocka_unit_test(test_tiny_per_sample_fold),
        cmocka_unit_test(test_tiny_per_sample_fold_meanpres),
        cmocka_unit_test(test_tiny_static_fold),
        cmocka_unit_test(test_tiny_branch_dense),
        cmocka_unit_test(test_tiny_branch_fast),
        cmocka_unit_test(test_tiny_branch_fast_forced_base),
        cmocka_unit_test(test_table_forced_base),
        cmocka_unit_test(test_static_fold_modulation_zero),
        cmocka_unit_test(test_online_norm1_delta),
        cmocka_unit_test(test_pct_scale_invariant),
        cmocka_unit_test(test_crossover),
        cmocka_unit_test(test_crossover_tiny),
        cmocka_unit_test(test_na_and_table),
        cmocka_unit_test(test_op_formulas),
        cmocka_unit_test(test_online_down_counted),
        cmocka_unit_test(test_block_dispatch),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
