/* SPDX-License-Identifier: MIT */
/* test_rope.c: the LLaMA attention of the rmsnorm block in every engine:
 * the RoPE op (both layouts) against values worked out by hand, the
 * float32 recipe against an independent float32 loop bit for bit, the
 * MPFR kernel against an MPFR computation at twice its precision, the
 * op's shape check; and
 * grouped-query attention: f32 against MPFR for kv_heads = 1, 2, heads,
 * kv_heads = heads the same bits as a graph built without the key, and a
 * GQA model the same bits as the full-head model whose k and v heads are
 * the GQA heads repeated (Hugging Face's repeat_kv), which fails for any
 * other head-to-group map; the FLOPs every engine books equal the closed
 * form. Kept small: the whole file runs in well under a
 * second. */
#include "testutil.h"

#include "base/base.h"
#include "base/mpvec.h"
#include "engine/engine.h"
#include "metric/flops.h"
#include "model/model.h"

#include <math.h>
#include <mpfr.h>
#include <string.h>

/* A graph of one ROPE op over an input [samples tokens, heads hd], the
 * input filled with values of both signs and several binades. */
static cic_model *rope_model(int tokens, int samples, int heads, int hd, enum cic_rope lay,
                             double theta)
{
    cic_model *m = cic_calloc(1, sizeof *m);
    cic_op o;
    int w = heads * hd, i;
    assert_non_null(m);
    m->cfg.block = CIC_BLOCK_RMSNORM;
    m->cfg.d_model = w;
    m->cfg.heads = heads;
    m->cfg.tokens = tokens;
    m->cfg.samples = samples;
    m->cfg.layers = 1;
    m->rows = tokens * samples;
    m->cond = -1;
    m->input = cic_model_tensor_add(m, "input", CIC_T_INPUT, m->rows, w);
    assert_true(m->input >= 0);
    for (i = 0; i < m->rows * w; i++)
        m->t[m->input].f32[i] = (float)((i % 7 - 3) * ldexp(1.0 + i % 5 / 8.0, i % 9 - 4));
    o = cic_op_blank(CIC_OP_ROPE, CIC_SITE_ATTN, 0);
    o.in[0] = m->input;
    o.heads = heads;
    o.rope = lay;
    o.theta = theta;
    o.out = cic_model_tensor_add(m, "out", CIC_T_ACT, m->rows, w);
    assert_true(o.out >= 0 && cic_model_op_add(m, &o) >= 0);
    m->output = m->residual = o.out;
    return m;
}

static size_t n_out(const cic_model *m)
{
    return (size_t)m->rows * (size_t)cic_model_out_cols(m);
}

/* The ROPE op's shape check: a well-formed op passes; heads not splitting
 * the width into even heads, an unknown layout, a base that is not a
 * positive binary32 value, and a missing input are refused with the op
 * named, before any engine runs. */
static void test_rope_check(void **state)
{
    static const struct {
        int heads, lay;
        double theta;
        const char *want;
    } bad[] = {
        {5, CIC_ROPE_HALF, 1e4, "5 heads do not split the width 12 into heads of an even size"},
        {4, CIC_ROPE_HALF, 1e4, "4 heads do not split the width 12 into heads of an even size"},
        {2, CIC_ROPE_NONE, 1e4, "rope layout 0 is neither half nor interleaved"},
        {2, CIC_ROPE_HALF, 0.0, "rope base 0 is not a positive binary32 value"},
        {2, CIC_ROPE_HALF, 1e-60, "rope base 1e-60 is not a positive binary32 value"},
    };
    char msg[512];
    size_t i;
    float y[36];
    (void)state;
    for (i = 0; i < sizeof bad / sizeof bad[0] + 1; i++) {
        cic_model *m = rope_model(3, 1, 2, 6, CIC_ROPE_HALF, 1e4);
        cic_op *o = &m->ops[0];
        if (i == sizeof bad / sizeof bad[0]) { /* the well-formed op */
            assert_int_equal(cic_model_check(m, msg, sizeof msg), 0);
            o->in[0] = -1;
            assert_int_equal(cic_model_check(m, msg, sizeof msg), CIC_GRAPH_REFUSED);
            assert_non_null(strstr(msg, "op 0 (rope"));
            cic_model_destroy(m);
            continue;
        }
        o->heads = bad[i].heads;
        o->rope = (enum cic_rope)bad[i].lay;
        o->theta = bad[i].theta;
        assert_int_equal(cic_model_check(m, msg, sizeof msg), CIC_GRAPH_REFUSED);
        if (!strstr(msg, bad[i].want) || !strstr(msg, "op 0 (rope"))
            fail_msg("fault %zu: message '%s', expected '%s'", i, msg, bad[i].want);
        assert_int_equal(cic_engine_f32_run(y, m, CIC_MATMUL_FIXED, NULL), CIC_GRAPH_REFUSED);
        cic_model_destroy(m);
    }
}

/* head_dim 4, positions 0 .. 2, theta 10000: inv_freq = (1, 1/100), angles
 * p and p / 100; the input rows all (1, 2, 3, 4). half pairs (x0, x2) at
 * frequency 1 and (x1, x3) at 1/100; interleaved (x0, x1) and (x2, x3). */
static void test_rope_by_hand(void **state)
{
    static const double c1[3] = {1, 0.54030230586813972, -0.41614683654714239};
    static const double s1[3] = {0, 0.84147098480789651, 0.90929742682568170};
    static const double c2[3] = {1, 0.99995000041666528, 0.99980000666657778};
    static const double s2[3] = {0, 0.0099998333341666665, 0.019998666693333080};
    int lay, p, j;
    (void)state;
    for (lay = CIC_ROPE_HALF; lay <= CIC_ROPE_INTERLEAVED; lay++) {
        cic_model *m = rope_model(3, 1, 1, 4, (enum cic_rope)lay, 10000.0);
        float y[12];
        double y64[12];
        mpfr_t *ym = cic_mpvec_create(12, 128);
        for (j = 0; j < 12; j++)
            m->t[m->input].f32[j] = (float)(j % 4 + 1);
        assert_int_equal(cic_engine_f32_run(y, m, CIC_MATMUL_FIXED, NULL), 0);
        assert_int_equal(cic_engine_f64_run(y64, m, CIC_MATMUL_FIXED, false, NULL), 0);
        assert_int_equal(cic_engine_mpfr_run(ym, m, 128, false, NULL), 0);
        for (p = 0; p < 3; p++) {
            double e[4];
            if (lay == CIC_ROPE_HALF) {
                e[0] = 1 * c1[p] - 3 * s1[p];
                e[2] = 3 * c1[p] + 1 * s1[p];
                e[1] = 2 * c2[p] - 4 * s2[p];
                e[3] = 4 * c2[p] + 2 * s2[p];
            } else {
                e[0] = 1 * c1[p] - 2 * s1[p];
                e[1] = 2 * c1[p] + 1 * s1[p];
                e[2] = 3 * c2[p] - 4 * s2[p];
                e[3] = 4 * c2[p] + 3 * s2[p];
            }
            for (j = 0; j < 4; j++) {
                cic_assert_close(y[4 * p + j], e[j], 1e-6, 1e-6);
                cic_assert_close(y64[4 * p + j], e[j], 1e-15, 1e-15);
                cic_assert_close(mpfr_get_d(ym[4 * p + j], MPFR_RNDN), e[j], 1e-15, 1e-15);
            }
        }
        cic_mpvec_destroy(ym, 12);
        cic_model_destroy(m);
    }
}

/* The float32 recipe (docs/reference/case-file.md: RoPE) written out again: plain loops, the
 * pair of (row, head, j) found from the layout directly. */
static void rope_f32_ref(float *y, const float *x, int rows, int N, int heads, int hd,
                         enum cic_rope lay, double theta)
{
    int r, h, j, half = hd / 2;
    for (r = 0; r < rows; r++)
        for (h = 0; h < heads; h++)
            for (j = 0; j < half; j++) {
                float inv = 1.0f / powf((float)theta, (float)(2 * j) / (float)hd);
                float ang = (float)(r % N) * inv, c = cosf(ang), s = sinf(ang);
                int a = r * heads * hd + h * hd + (lay == CIC_ROPE_HALF ? j : 2 * j);
                int b = lay == CIC_ROPE_HALF ? a + half : a + 1;
                float pa = x[a] * c, pb = x[b] * s, qa = x[b] * c, qb = x[a] * s;
                y[a] = pa - pb;
                y[b] = qa + qb;
            }
}

/* f32 engine = the loop above, bit for bit; MPFR at 128 bits = an MPFR
 * computation at 256 bits within 4 (1 + p) 2^-128 (|a| + |b|). */
static void test_rope_recipes(void **state)
{
    static const double thetas[2] = {10000.0, 500000.0};
    int lay, t, i, N = 37, S = 2, H = 3, hd = 64, fails;
    (void)state;
    for (lay = CIC_ROPE_HALF; lay <= CIC_ROPE_INTERLEAVED; lay++)
        for (t = 0; t < 2; t++) {
            cic_model *m = rope_model(N, S, H, hd, (enum cic_rope)lay, thetas[t]);
            size_t n = n_out(m);
            float *y = cic_calloc(n, sizeof *y), *e = cic_calloc(n, sizeof *e);
            mpfr_t *ym = cic_mpvec_create(n, 128), a, b, c, s, ang, ex, v;
            assert_true(y && e && ym);
            assert_int_equal(cic_engine_f32_run(y, m, CIC_MATMUL_FIXED, NULL), 0);
            rope_f32_ref(e, m->t[m->input].f32, m->rows, N, H, hd, (enum cic_rope)lay,
                         thetas[t]);
            for (i = 0, fails = 0; i < (int)n; i++)
                if (memcmp(&y[i], &e[i], sizeof y[i]) != 0 && fails++ < 3)
                    print_message("layout %d theta %g value %d: engine %a, recipe %a\n", lay,
                                  thetas[t], i, (double)y[i], (double)e[i]);
            assert_int_equal(fails, 0);
            assert_int_equal(cic_engine_mpfr_run(ym, m, 128, false, NULL), 0);
            mpfr_inits2(256, a, b, c, s, ang, ex, v, (mpfr_ptr)0);
            for (i = 0; i < m->rows * H * hd / 2; i++) {
                int r = i / (H * hd / 2), h = i / (hd / 2) % H, j = i % (hd / 2);
                int ia = r * H * hd + h * hd + (lay == CIC_ROPE_HALF ? j : 2 * j);
                int ib = lay == CIC_ROPE_HALF ? ia + hd / 2 : ia + 1;
                double tol;
                mpfr_set_si(ex, -2 * j, MPFR_RNDN);
                mpfr_div_ui(ex, ex, (unsigned long)hd, MPFR_RNDN);
                mpfr_set_d(ang, thetas[t], MPFR_RNDN);
                mpfr_pow(ang, ang, ex, MPFR_RNDN);
                mpfr_mul_ui(ang, ang, (unsigned long)(r % N), MPFR_RNDN);
                mpfr_cos(c, ang, MPFR_RNDN);
                mpfr_sin(s, ang, MPFR_RNDN);
                mpfr_set_flt(a, m->t[m->input].f32[ia], MPFR_RNDN);
                mpfr_set_flt(b, m->t[m->input].f32[ib], MPFR_RNDN);
                /* the angle p inv carries a relative 2^-128 or so: an
                 * absolute (1 + p) 2^-128 on cos and sin */
                tol = 4 * (1 + r % N) *
                      ldexp(fabs(mpfr_get_d(a, MPFR_RNDN)) + fabs(mpfr_get_d(b, MPFR_RNDN)), -128);
                mpfr_fmms(v, a, c, b, s, MPFR_RNDN);
                mpfr_sub(v, v, ym[ia], MPFR_RNDN);
                assert_true(fabs(mpfr_get_d(v, MPFR_RNDN)) <= tol);
                mpfr_fmma(v, b, c, a, s, MPFR_RNDN);
                mpfr_sub(v, v, ym[ib], MPFR_RNDN);
                assert_true(fabs(mpfr_get_d(v, MPFR_RNDN)) <= tol);
            }
            mpfr_clears(a, b, c, s, ang, ex, v, (mpfr_ptr)0);
            cic_mpvec_destroy(ym, n);
            free(y);
            free(e);
            cic_model_destroy(m);
        }
}

/* A small rmsnorm model: d 32, 4 heads (head_dim 8), 5 tokens, 2 samples,
 * 2 layers, causal, the head readout. */
static cic_model_cfg llama_cfg(int kv, enum cic_rope rope)
{
    cic_model_cfg c;
    memset(&c, 0, sizeof c);
    c.block = CIC_BLOCK_RMSNORM;
    c.d_model = 32;
    c.heads = 4;
    c.kv_heads = kv;
    c.mlp_ratio = 2;
    c.d_mlp = 64;
    c.tokens = 5;
    c.samples = 2;
    c.layers = 2;
    c.eps = 1e-5;
    c.causal = true;
    c.act = CIC_ACT_SILU;
    c.d_out = 8;
    c.seed = 11;
    c.std = 0.15;
    c.rope = rope;
    c.rope_theta = 10000.0;
    return c;
}

static long first_diff(const float *a, const float *b, size_t n)
{
    size_t i;
    for (i = 0; i < n; i++)
        if (memcmp(&a[i], &b[i], sizeof a[i]) != 0)
            return (long)i;
    return -1;
}

/* kv_heads 1, 2, 4 with each RoPE layout: f32 within float tolerance of
 * MPFR at 128 bits; kv_heads = heads (4) the same bits as kv_heads unset. */
static void test_gqa_engines(void **state)
{
    static const int kvs[3] = {1, 2, 4};
    int k, lay;
    (void)state;
    for (lay = CIC_ROPE_NONE; lay < CIC_ROPE_COUNT; lay++)
        for (k = 0; k < 3; k++) {
            cic_model_cfg cfg = llama_cfg(kvs[k], (enum cic_rope)lay);
            cic_model *m = cic_model_create(&cfg, CIC_READOUT_HEAD);
            size_t n, i;
            float *y;
            mpfr_t *ym;
            double num = 0, den = 0;
            assert_non_null(m);
            n = n_out(m);
            y = cic_calloc(n, sizeof *y);
            ym = cic_mpvec_create(n, 128);
            assert_int_equal(cic_engine_f32_run(y, m, CIC_MATMUL_OPENBLAS, NULL), 0);
            assert_int_equal(cic_engine_mpfr_run(ym, m, 128, false, NULL), 0);
            for (i = 0; i < n; i++) {
                double t = mpfr_get_d(ym[i], MPFR_RNDN);
                num += (y[i] - t) * (y[i] - t);
                den += t * t;
            }
            if (!(sqrt(num / den) < 1e-5))
                fail_msg("rope %d kv_heads %d: f32 vs mpfr rel_norm2 %g", lay, kvs[k],
                         sqrt(num / den));
            if (kvs[k] == cfg.heads) {
                cic_model_cfg c0 = llama_cfg(0, (enum cic_rope)lay);
                cic_model *m0 = cic_model_create(&c0, CIC_READOUT_HEAD);
                float *y0 = cic_calloc(n, sizeof *y0), *y1 = cic_calloc(n, sizeof *y1);
                char h0[65], h1[65];
                assert_true(m0 && y0 && y1);
                cic_model_weights_sha256(h0, m0);
                cic_model_weights_sha256(h1, m);
                assert_string_equal(h0, h1);
                assert_int_equal(cic_engine_f32_run(y0, m0, CIC_MATMUL_FIXED, NULL), 0);
                assert_int_equal(cic_engine_f32_run(y1, m, CIC_MATMUL_FIXED, NULL), 0);
                assert_int_equal(first_diff(y0, y1, n), -1);
                free(y0);
                free(y1);
                cic_model_destroy(m0);
            }
            cic_mpvec_destroy(ym, n);
            free(y);
            cic_model_destroy(m);
        }
}

/* Copy the GQA model's k_proj/v_proj into the full-head model, head g of
 * kv heads repeated for query heads g grp .. g grp + grp - 1 (repeat_kv),
 * and every other weight as it is: both models compute the same. */
static void repeat_kv(cic_model *full, const cic_model *gqa, int grp, int hd)
{
    int i;
    for (i = 0; i < full->n_t; i++) {
        cic_tensor *t = &full->t[i];
        int j = cic_model_tensor_find(gqa, t->name), r;
        const cic_tensor *g;
        if (t->role == CIC_T_ACT)
            continue;
        assert_true(j >= 0);
        g = &gqa->t[j];
        for (r = 0; r < t->rows; r++) {
            int rg = g->rows == t->rows ? r : r / hd / grp * hd + r % hd;
            memcpy(t->f32 + (size_t)r * t->cols, g->f32 + (size_t)rg * g->cols,
                   (size_t)t->cols * sizeof *t->f32);
        }
    }
}

static void test_gqa_is_repeat_kv(void **state)
{
    static const int kvs[2] = {1, 2};
    int k, lay;
    (void)state;
    for (lay = CIC_ROPE_NONE; lay < CIC_ROPE_COUNT; lay++)
        for (k = 0; k < 2; k++) {
            cic_model_cfg cg = llama_cfg(kvs[k], (enum cic_rope)lay), cf = cg;
            cic_model *g, *f;
            float *yg, *yf;
            size_t n;
            long at;
            cf.kv_heads = cf.heads;
            g = cic_model_create(&cg, CIC_READOUT_HEAD);
            f = cic_model_create(&cf, CIC_READOUT_HEAD);
            assert_true(g && f);
            repeat_kv(f, g, cg.heads / kvs[k], cg.d_model / cg.heads);
            n = n_out(g);
            yg = cic_calloc(n, sizeof *yg);
            yf = cic_calloc(n, sizeof *yf);
            assert_int_equal(cic_engine_f32_run(yg, g, CIC_MATMUL_FIXED, NULL), 0);
            assert_int_equal(cic_engine_f32_run(yf, f, CIC_MATMUL_FIXED, NULL), 0);
            at = first_diff(yg, yf, n);
            if (at >= 0)
                fail_msg("rope %d kv_heads %d: value %ld: gqa %a, repeated %a", lay, kvs[k], at,
                         (double)yg[at], (double)yf[at]);
            free(yg);
            free(yf);
            cic_model_destroy(g);
            cic_model_destroy(f);
        }
}

/* The engines book the closed form (block_rmsnorm.c flops()) at every
 * site, with RoPE and the smaller k and v projections: f32 and MPFR,
 * kv_heads 1, 2, 4, each layout; and the attention site by hand. */
static void test_gqa_flops(void **state)
{
    static const int kvs[3] = {1, 2, 4};
    int k, lay, i;
    (void)state;
    for (lay = CIC_ROPE_NONE; lay < CIC_ROPE_COUNT; lay++)
        for (k = 0; k < 3; k++) {
            cic_model_cfg cfg = llama_cfg(kvs[k], (enum cic_rope)lay);
            cic_model *m = cic_model_create(&cfg, CIC_READOUT_HEAD);
            cic_norm_state ns = {false, true, false};
            cic_flop_count fc[3];
            cic_run_opts o;
            size_t n = n_out(m);
            float *y = cic_calloc(n, sizeof *y);
            mpfr_t *ym = cic_mpvec_create(n, 64);
            double R = 10, d = 32, dkv = 8.0 * kvs[k], want;
            memset(fc, 0, sizeof fc);
            memset(&o, 0, sizeof o);
            o.flops = &fc[0];
            assert_int_equal(cic_engine_f32_run(y, m, CIC_MATMUL_FIXED, &o), 0);
            o.flops = &fc[1];
            assert_int_equal(cic_engine_mpfr_run(ym, m, 64, false, &o), 0);
            cic_flops_analytical(&fc[2], &cfg, CIC_READOUT_HEAD, ns);
            for (i = 0; i < CIC_SITE_COUNT; i++)
                if (fc[0].site[i] != fc[2].site[i] || fc[1].site[i] != fc[2].site[i])
                    fail_msg("rope %d kv %d site %s: f32 %.17g mpfr %.17g closed form %.17g",
                             lay, kvs[k], CIC_SITE_NAME[i], fc[0].site[i], fc[1].site[i],
                             fc[2].site[i]);
            /* per layer: q, o 2 R d d each, k, v 2 R d dkv each, RoPE 3 R
             * (d + dkv), attention (B 2, H 4, N 5, dh 8, causal: 15 keys),
             * the residual add R d */
            want = 2 * (2 * 2 * R * d * d + 2 * 2 * R * d * dkv +
                        (lay ? 3 * R * (d + dkv) : 0) + 2 * 4 * (4 * 25 * 8 + 25 + 5 * 15) +
                        R * d);
            cic_assert_close(fc[0].site[CIC_SITE_ATTN], want, 0, 0);
            cic_mpvec_destroy(ym, n);
            free(y);
            cic_model_destroy(m);
        }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rope_check),
        cmocka_unit_test(test_rope_by_hand),
        cmocka_unit_test(test_rope_recipes),
        cmocka_unit_test(test_gqa_engines),
        cmocka_unit_test(test_gqa_is_repeat_kv),
        cmocka_unit_test(test_gqa_flops),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
