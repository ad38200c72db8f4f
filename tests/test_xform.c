/* SPDX-License-Identifier: MIT */
/* test_xform.c: the transforms are invariances exactly when they should be.
 * For random shapes and seeds, every exact transform, run in MPFR with its
 * unrounded weights, stays under its verdict threshold against the original
 * model in MPFR; every known mistake lands far above the broken threshold.
 * R2 (rotate-heads) on the preln block's fused qkv with biases and on the
 * rmsnorm block after R1; R4 (online-down) after R1, and its fusion
 * without the online op (QuaRot #4) broken. _cic_xf_par, the transforms'
 * split over threads, covers every index once and returns -1 or the
 * largest code of its ranges.
 * Seeds and shapes are printed on failure; CIC_TEST_MULTIPLIER runs more. */
#include "testutil.h"

#include "base/mpgemm.h"
#include "base/mpvec.h"
#include "base/rng.h"
#include "engine/engine.h"
#include "metric/metric.h"
#include "model/model.h"
#include "xform/qmat.h"
#include "xform/xform.h"
#include "xform/xform_util.h"

#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

#define PREC 128

static cic_model_cfg random_cfg(uint64_t seed, enum cic_block_kind block)
{
    static const int ds[] = {8, 16, 32};
    static const int hs[] = {1, 2, 4};
    cic_model_cfg c;
    uint64_t k = cic_rng_key(seed, "test.shape");
    memset(&c, 0, sizeof c);
    c.block = block;
    c.d_model = ds[cic_rng_u64(k, 0) % 3];
    c.heads = hs[cic_rng_u64(k, 1) % 3];
    c.mlp_ratio = 2;
    c.d_mlp = 2 * c.d_model;
    c.tokens = 1 + (int)(cic_rng_u64(k, 2) % 5);
    c.samples = 1 + (int)(cic_rng_u64(k, 3) % 2);
    c.layers = 1 + (int)(cic_rng_u64(k, 4) % 2);
    c.eps = 1e-5;
    c.causal = cic_rng_u64(k, 5) & 1;
    c.act = block == CIC_BLOCK_RMSNORM ? CIC_ACT_SILU
                                       : (enum cic_act)(cic_rng_u64(k, 6) % 3);
    c.d_out = 1 + (int)(cic_rng_u64(k, 7) % 8);
    c.seed = seed;
    c.dist = CIC_DIST_NORMAL;
    c.std = 0.15;
    c.outlier_channels = (int)(cic_rng_u64(k, 8) % 3);
    c.outlier_scale = 10;
    return c;
}

static cic_xform_spec spec(const char *name, enum cic_xform_kind kind, enum cic_qkind q,
                           const char *mistake, enum cic_tprec prec)
{
    cic_xform_spec x;
    memset(&x, 0, sizeof x);
    cic_strlcpy(x.name, name, sizeof x.name);
    x.kind = kind;
    x.after = -1;
    x.q = q;
    x.q_seed = 99;
    x.mistake = cic_test_mistake(kind, mistake);
    x.prec = prec;
    return x;
}

/* MPFR output of m, mapped back to the original basis for the residual
 * readout (y Q^T, then centered when the model says so). */
static mpfr_t *run_mp(const cic_model *m, size_t *n)
{
    size_t rows = (size_t)m->rows, cols = (size_t)cic_model_out_cols(m), i, j;
    mpfr_t *y = cic_mpvec_create(rows * cols, PREC);
    assert_non_null(y);
    assert_int_equal(cic_engine_mpfr_run(y, m, PREC, false, NULL), 0);
    if (m->output == m->residual) {
        cic_dot_scratch s;
        mpfr_t *row = cic_mpvec_create(cols, PREC);
        assert_int_equal(cic_dot_scratch_init(&s, cols, PREC), 0);
        for (i = 0; i < rows; i++) {
            mpfr_t mean;
            mpfr_init2(mean, PREC + 64);
            mpfr_set_zero(mean, 1);
            for (j = 0; j < cols; j++) {
                if (m->out_q)
                    cic_mp_dot(row[j], (const mpfr_t *)y + i * cols, 1,
                               (const mpfr_t *)m->out_q + j * cols, 1, cols, NULL, &s);
                else
                    mpfr_set(row[j], y[i * cols + j], MPFR_RNDN);
                mpfr_add(mean, mean, row[j], MPFR_RNDN);
            }
            mpfr_div_ui(mean, mean, cols, MPFR_RNDN);
            for (j = 0; j < cols; j++) {
                if (m->center_out)
                    mpfr_sub(y[i * cols + j], row[j], mean, MPFR_RNDN);
                else
                    mpfr_set(y[i * cols + j], row[j], MPFR_RNDN);
            }
            mpfr_clear(mean);
        }
        cic_dot_scratch_clear(&s);
        cic_mpvec_destroy(row, cols);
    }
    *n = rows * cols;
    return y;
}

/* ce of x applied to base (or to the original when base is NULL). */
static double ce_of(const cic_model *orig, const cic_model *base, const cic_xform_spec *x,
                    cic_model **out)
{
    cic_diag d;
    size_t n0, n1;
    cic_model *m = cic_xform_apply(base ? base : orig, x, PREC, &d);
    mpfr_t *y0, *y1;
    double ce;
    assert_non_null(m);
    y0 = run_mp(orig, &n0);
    y1 = run_mp(m, &n1);
    assert_int_equal(n0, n1);
    ce = cic_metric_rel_diff((const mpfr_t *)y1, (const mpfr_t *)y0, n0, PREC);
    cic_mpvec_destroy(y0, n0);
    cic_mpvec_destroy(y1, n1);
    if (out)
        *out = m;
    else
        cic_model_destroy(m);
    return ce;
}

static void check_eq(double ce, const cic_xform_spec *x, const cic_model_cfg *c,
                     const char *what)
{
    double eq, br;
    cic_xform_thresholds(&eq, &br, x, PREC);
    if (!(ce <= eq))
        fail_msg("%s: ce %.3g above the equivalent threshold %.3g (seed %llu, d %d, "
                 "heads %d, N %d, B %d, L %d)", what, ce, eq, (unsigned long long)c->seed,
                 c->d_model, c->heads, c->tokens, c->samples, c->layers);
}

static void check_broken(double ce, const cic_xform_spec *x, const cic_model_cfg *c,
                         const char *what)
{
    double eq, br;
    cic_xform_thresholds(&eq, &br, x, PREC);
    if (!(ce >= br))
        fail_msg("%s: ce %.3g below the broken threshold %.3g (seed %llu, d %d, L %d)",
                 what, ce, br, (unsigned long long)c->seed, c->d_model, c->layers);
}

static void test_preln_exact_and_mistakes(void **state)
{
    int it, n = 4 * cic_test_multiplier();
    (void)state;
    for (it = 0; it < n; it++) {
        uint64_t seed = 1000 + (uint64_t)it;
        cic_model_cfg c = random_cfg(seed, CIC_BLOCK_PRELN);
        enum cic_readout ro = (it & 1) ? CIC_READOUT_RESIDUAL : CIC_READOUT_HEAD;
        cic_model *orig = cic_model_create(&c, ro), *fused = NULL;
        cic_xform_spec fuse = spec("fuse", CIC_XFORM_FUSE_LAYERNORM, CIC_Q_IDENTITY,
                                   "none", CIC_TPREC_MPFR);
        cic_xform_spec rr = spec("rr", CIC_XFORM_ROTATE, CIC_Q_RANDOM, "none",
                                 CIC_TPREC_MPFR);
        cic_xform_spec rh = spec("rh", CIC_XFORM_ROTATE, CIC_Q_HADAMARD, "none",
                                 CIC_TPREC_MPFR);
        cic_xform_spec r64 = spec("r64", CIC_XFORM_ROTATE, CIC_Q_RANDOM, "none",
                                  CIC_TPREC_F64);
        cic_xform_spec bad1 = spec("nobake", CIC_XFORM_FUSE_LAYERNORM, CIC_Q_IDENTITY,
                                   "skip-mean-bake", CIC_TPREC_MPFR);
        cic_xform_spec bad2 = spec("skipo", CIC_XFORM_ROTATE, CIC_Q_RANDOM,
                                   "skip-attn-out", CIC_TPREC_MPFR);
        cic_xform_spec r2r = spec("r2r", CIC_XFORM_ROTATE_HEADS, CIC_Q_RANDOM,
                                  "none", CIC_TPREC_MPFR);
        cic_xform_spec r2h = spec("r2h", CIC_XFORM_ROTATE_HEADS, CIC_Q_HADAMARD,
                                  "none", CIC_TPREC_MPFR);
        cic_xform_spec r2bad = spec("r2bad", CIC_XFORM_ROTATE_HEADS, CIC_Q_RANDOM,
                                    "skip-out-proj", CIC_TPREC_MPFR);
        assert_non_null(orig);
        check_eq(ce_of(orig, NULL, &fuse, &fused), &fuse, &c, "fuse-layernorm");
        check_eq(ce_of(orig, fused, &rr, NULL), &rr, &c, "fuse + rotate random");
        check_eq(ce_of(orig, fused, &rh, NULL), &rh, &c, "fuse + rotate hadamard");
        check_eq(ce_of(orig, fused, &r64, NULL), &r64, &c, "fuse + rotate random (f64)");
        check_broken(ce_of(orig, NULL, &rr, NULL), &rr, &c, "rotate without fusion");
        check_broken(ce_of(orig, NULL, &bad1, NULL), &bad1, &c, "skip mean bake");
        check_broken(ce_of(orig, fused, &bad2, NULL), &bad2, &c, "attn out not rotated");
        /* R2 on the fused qkv (value rows and their bias) and the proj columns */
        check_eq(ce_of(orig, NULL, &r2r, NULL), &r2r, &c, "rotate-heads random");
        check_eq(ce_of(orig, fused, &r2h, NULL), &r2h, &c, "fuse + rotate-heads hadamard");
        check_broken(ce_of(orig, NULL, &r2bad, NULL), &r2bad, &c, "R2 without the out proj");
        cic_model_destroy(fused);
        cic_model_destroy(orig);
    }
}

static void test_rmsnorm_exact_and_mistakes(void **state)
{
    int it, n = 4 * cic_test_multiplier();
    (void)state;
    for (it = 0; it < n; it++) {
        uint64_t seed = 2000 + (uint64_t)it;
        cic_model_cfg c = random_cfg(seed, CIC_BLOCK_RMSNORM);
        enum cic_readout ro = (it & 1) ? CIC_READOUT_RESIDUAL : CIC_READOUT_HEAD;
        cic_model *orig = cic_model_create(&c, ro), *folded = NULL;
        cic_xform_spec fold = spec("fold", CIC_XFORM_FOLD_RMSNORM_GAMMA, CIC_Q_IDENTITY,
                                   "none", CIC_TPREC_MPFR);
        cic_xform_spec rr = spec("rr", CIC_XFORM_ROTATE, CIC_Q_RANDOM, "none",
                                 CIC_TPREC_MPFR);
        cic_xform_spec rh = spec("rh", CIC_XFORM_ROTATE, CIC_Q_HADAMARD, "none",
                                 CIC_TPREC_MPFR);
        cic_xform_spec bad = spec("center", CIC_XFORM_FOLD_RMSNORM_GAMMA, CIC_Q_IDENTITY,
                                  "center-embeddings", CIC_TPREC_MPFR);
        assert_non_null(orig);
        check_eq(ce_of(orig, NULL, &fold, &folded), &fold, &c, "fold-rmsnorm-gamma");
        check_eq(ce_of(orig, folded, &rr, NULL), &rr, &c, "fold + rotate random");
        check_eq(ce_of(orig, folded, &rh, NULL), &rh, &c, "fold + rotate hadamard");
        check_broken(ce_of(orig, NULL, &rr, NULL), &rr, &c, "gamma left in the norm");
        check_broken(ce_of(orig, NULL, &bad, NULL), &bad, &c, "centered embeddings");
        {
            /* R1 then R2 (QuaRot's pair), and R2 with the values alone rotated */
            cic_model *r1 = NULL;
            cic_xform_spec r2 = spec("r2", CIC_XFORM_ROTATE_HEADS, CIC_Q_HADAMARD,
                                     "none", CIC_TPREC_MPFR);
            cic_xform_spec r2bad = spec("r2bad", CIC_XFORM_ROTATE_HEADS, CIC_Q_HADAMARD,
                                        "skip-out-proj", CIC_TPREC_MPFR);
            cic_xform_spec r4 = spec("r4", CIC_XFORM_ONLINE_DOWN, CIC_Q_HADAMARD,
                                     "none", CIC_TPREC_MPFR);
            cic_xform_spec r3 = spec("r3", CIC_XFORM_ONLINE_QK, CIC_Q_HADAMARD,
                                     "none", CIC_TPREC_MPFR);
            cic_xform_spec r4bad = spec("r4bad", CIC_XFORM_ONLINE_DOWN, CIC_Q_HADAMARD,
                                        "skip-online", CIC_TPREC_MPFR);
            r2.q_seed = seed;
            check_eq(ce_of(orig, folded, &rh, &r1), &rh, &c, "fold + R1");
            check_eq(ce_of(orig, r1, &r2, NULL), &r2, &c, "fold + R1 + R2 hadamard");
            check_broken(ce_of(orig, r1, &r2bad, NULL), &r2bad, &c, "R2 without o_proj");
            /* R4: the online Hadamard before down_proj, and its fusion alone */
            r4.q_seed = seed;
            r4bad.q_seed = seed;
            check_eq(ce_of(orig, r1, &r4, NULL), &r4, &c, "fold + R1 + R4");
            check_broken(ce_of(orig, r1, &r4bad, NULL), &r4bad, &c, "R4 without the online op");
            r3.q_seed = seed;
            check_eq(ce_of(orig, r1, &r3, NULL), &r3, &c, "fold + R1 + R3");
            cic_model_destroy(r1);
        }
        cic_model_destroy(folded);
        cic_model_destroy(orig);
    }
}

/* LLaMA attention (RoPE, grouped-query): R1, R2 with one Q per key/value
 * head, R3 after RoPE exact; R3 fused into the projections (before RoPE)
 * broken. */
static void test_llama_rotations(void **state)
{
    int it, n = 3 * cic_test_multiplier();
    (void)state;
    for (it = 0; it < n; it++) {
        uint64_t seed = 3000 + (uint64_t)it;
        cic_model_cfg c = random_cfg(seed, CIC_BLOCK_RMSNORM);
        cic_model *orig, *folded = NULL, *r1 = NULL;
        cic_xform_spec fold = spec("fold", CIC_XFORM_FOLD_RMSNORM_GAMMA, CIC_Q_IDENTITY,
                                   "none", CIC_TPREC_MPFR);
        cic_xform_spec rh = spec("rh", CIC_XFORM_ROTATE, CIC_Q_HADAMARD, "none",
                                 CIC_TPREC_MPFR);
        cic_xform_spec r2 = spec("r2", CIC_XFORM_ROTATE_HEADS, CIC_Q_RANDOM, "none",
                                 CIC_TPREC_MPFR);
        cic_xform_spec r3 = spec("r3", CIC_XFORM_ONLINE_QK, CIC_Q_HADAMARD, "none",
                                 CIC_TPREC_MPFR);
        cic_xform_spec r3bad = spec("r3bad", CIC_XFORM_ONLINE_QK, CIC_Q_HADAMARD,
                                    "before-rope", CIC_TPREC_MPFR);
        cic_xform_spec r2bad = spec("r2bad", CIC_XFORM_ROTATE_HEADS, CIC_Q_RANDOM,
                                    "per-query-head", CIC_TPREC_MPFR);
        c.d_model = 32;
        c.heads = 4;
        c.kv_heads = it % 2 ? 2 : 1;
        c.d_mlp = 64;
        c.tokens = 4 + it;
        c.rope = it % 2 ? CIC_ROPE_INTERLEAVED : CIC_ROPE_HALF;
        c.rope_theta = 10000.0;
        orig = cic_model_create(&c, CIC_READOUT_HEAD);
        assert_non_null(orig);
        r2.q_seed = r3.q_seed = r3bad.q_seed = r2bad.q_seed = seed;
        check_eq(ce_of(orig, NULL, &fold, &folded), &fold, &c, "fold (RoPE, GQA)");
        check_eq(ce_of(orig, folded, &rh, &r1), &rh, &c, "fold + R1 (RoPE, GQA)");
        check_eq(ce_of(orig, r1, &r2, NULL), &r2, &c, "R1 + R2 per kv head");
        check_eq(ce_of(orig, r1, &r3, NULL), &r3, &c, "R1 + R3 after RoPE");
        check_broken(ce_of(orig, r1, &r3bad, NULL), &r3bad, &c, "R3 before RoPE");
        check_broken(ce_of(orig, r1, &r2bad, NULL), &r2bad, &c, "R2 per query head (GQA)");
        cic_model_destroy(r1);
        cic_model_destroy(folded);
        cic_model_destroy(orig);
    }
}

/* Whether every weight tensor of a and b holds the same doubles (or none). */
static bool same_doubles(const cic_model *a, const cic_model *b)
{
    int i;
    if (a->n_t != b->n_t)
        return false;
    for (i = 0; i < a->n_t; i++) {
        size_t n = (size_t)a->t[i].rows * a->t[i].cols;
        if (!a->t[i].f64 != !b->t[i].f64 ||
            (a->t[i].f64 && memcmp(a->t[i].f64, b->t[i].f64, n * sizeof(double)) != 0))
            return false;
    }
    return true;
}

/* The rotations in f64-openblas (products through dgemm, the weights held
 * as doubles): fold, R1, R2, R3 and R4 are each equivalent at the f64
 * thresholds, run in MPFR from the doubles; R2 without o_proj and R4
 * without the online op are broken. R1's doubles are what
 * cic_mp_gemm_f64 gives on the folded values (the path that held them as
 * MPFR numbers), their float32 values their rounding, and no MPFR copy is
 * kept; a model transformed in place (cic_xform_apply_take) holds the same
 * doubles as a copy transformed. */
static void test_llama_rotations_dgemm(void **state)
{
    int it, n = 2 * cic_test_multiplier();
    (void)state;
    for (it = 0; it < n; it++) {
        uint64_t seed = 5000 + (uint64_t)it;
        cic_model_cfg c = random_cfg(seed, CIC_BLOCK_RMSNORM);
        cic_model *orig, *folded = NULL, *r1 = NULL, *r12 = NULL, *taken;
        cic_xform_spec fold = spec("fold", CIC_XFORM_FOLD_RMSNORM_GAMMA, CIC_Q_IDENTITY,
                                   "none", CIC_TPREC_F64_BLAS);
        cic_xform_spec rh = spec("r1", CIC_XFORM_ROTATE, CIC_Q_HADAMARD, "none",
                                 CIC_TPREC_F64_BLAS);
        cic_xform_spec r2 = spec("r2", CIC_XFORM_ROTATE_HEADS, CIC_Q_HADAMARD, "none",
                                 CIC_TPREC_F64_BLAS);
        cic_xform_spec r2bad = spec("r2bad", CIC_XFORM_ROTATE_HEADS, CIC_Q_HADAMARD,
                                    "skip-out-proj", CIC_TPREC_F64_BLAS);
        cic_xform_spec r3 = spec("r3", CIC_XFORM_ONLINE_QK, CIC_Q_HADAMARD, "none",
                                 CIC_TPREC_F64_BLAS);
        cic_xform_spec r4 = spec("r4", CIC_XFORM_ONLINE_DOWN, CIC_Q_HADAMARD, "none",
                                 CIC_TPREC_F64_BLAS);
        cic_xform_spec r4bad = spec("r4bad", CIC_XFORM_ONLINE_DOWN, CIC_Q_HADAMARD,
                                    "skip-online", CIC_TPREC_F64_BLAS);
        cic_diag d;
        int w, i;
        c.d_model = 32;
        c.heads = 4;
        c.kv_heads = it % 2 ? 2 : 1;
        c.d_mlp = 64;
        c.rope = CIC_ROPE_HALF;
        c.rope_theta = 10000.0;
        orig = cic_model_create(&c, CIC_READOUT_HEAD);
        assert_non_null(orig);
        check_eq(ce_of(orig, NULL, &fold, &folded), &fold, &c, "fold (dgemm)");
        check_eq(ce_of(orig, folded, &rh, &r1), &rh, &c, "fold + R1 (dgemm)");
        check_eq(ce_of(orig, r1, &r2, &r12), &r2, &c, "R1 + R2 (dgemm)");
        check_broken(ce_of(orig, r1, &r2bad, NULL), &r2bad, &c, "R2 without o_proj (dgemm)");
        check_eq(ce_of(orig, r12, &r3, NULL), &r3, &c, "R1 + R2 + R3 (dgemm)");
        check_eq(ce_of(orig, r12, &r4, NULL), &r4, &c, "R1 + R2 + R4 (dgemm)");
        check_broken(ce_of(orig, r12, &r4bad, NULL), &r4bad, &c, "R4 without the online op");
        /* the first layer's q projection, a reader: W Q */
        w = cic_model_tensor_find(r1, "layers.0.self_attn.q_proj.weight");
        assert_true(w >= 0);
        {
            const cic_tensor *t = &r1->t[w];
            size_t nw = (size_t)t->rows * t->cols, dd = (size_t)c.d_model * c.d_model, k;
            mpfr_t *tv, *q = cic_mpvec_create(dd, 53), *want = cic_mpvec_create(nw, 53);
            const mpfr_t *v = cic_tensor_hp_make(&folded->t[w], &tv);
            assert_non_null(v);
            assert_null(t->hp);
            assert_null(t->lazy);
            assert_non_null(t->f64);
            assert_int_equal(cic_tensor_hp_prec(t), 53);
            assert_int_equal(cic_q_hadamard_k(q, c.d_model, 0, rh.q_seed, 53), 0);
            assert_int_equal(cic_mp_gemm_f64(want, v, false, (const mpfr_t *)q, false, t->rows,
                                             c.d_model, c.d_model), 0);
            for (k = 0; k < nw; k++) {
                assert_true(mpfr_cmp_d(want[k], t->f64[k]) == 0);
                assert_true(t->f32[k] == (float)t->f64[k]);
            }
            cic_mpvec_destroy(tv, nw);
            cic_mpvec_destroy(q, dd);
            cic_mpvec_destroy(want, nw);
        }
        taken = cic_xform_apply_take(cic_model_clone(r1), &r2, PREC, &d);
        assert_non_null(taken);
        assert_true(same_doubles(taken, r12));
        for (i = 0; i < taken->n_t; i++)
            if (taken->t[i].f32)
                assert_memory_equal(taken->t[i].f32, r12->t[i].f32,
                                    (size_t)taken->t[i].rows * taken->t[i].cols * sizeof(float));
        cic_model_destroy(taken);
        cic_model_destroy(r12);
        cic_model_destroy(r1);
        cic_model_destroy(folded);
        cic_model_destroy(orig);
    }
}

/* R1 from a file (q = "file:..."): a Hadamard matrix of order 32 stored
 * as F64 (tests/fixtures) is exact to its dtype's precision after the
 * gains are folded: the verdict threshold follows the file's 53 bits; the
 * same matrix with one entry changed is refused as not orthogonal by
 * cic_q_file_check's figure. */
static void test_rotation_from_file(void **state)
{
    cic_model_cfg c = random_cfg(4000, CIC_BLOCK_RMSNORM);
    cic_model *orig, *folded = NULL;
    cic_xform_spec fold = spec("fold", CIC_XFORM_FOLD_RMSNORM_GAMMA, CIC_Q_IDENTITY,
                               "none", CIC_TPREC_MPFR);
    cic_xform_spec rf = spec("rf", CIC_XFORM_ROTATE, CIC_Q_FILE, "none",
                             CIC_TPREC_MPFR);
    cic_diag d;
    double orth = -1, eq, br;
    (void)state;
    c.d_model = 32;
    c.heads = 4;
    c.d_mlp = 64;
    cic_test_path(rf.q_file, sizeof rf.q_file, "tests/fixtures/q-hadamard-32.safetensors");
    cic_strlcpy(rf.q_tensor, "R1", sizeof rf.q_tensor);
    rf.q_file_bits = 53;
    orig = cic_model_create(&c, CIC_READOUT_HEAD);
    assert_non_null(orig);
    memset(&d, 0, sizeof d);
    assert_int_equal(cic_q_file_check(&orth, &rf, 32, "d_model", &d), 0);
    assert_true(orth >= 0 && orth < 1e-15);
    assert_int_equal(cic_q_file_check(&orth, &rf, 16, "d_model", &d), -1); /* the wrong order */
    cic_xform_thresholds(&eq, &br, &rf, PREC);
    assert_true(eq == ldexp(1.0, 20 - 53));
    check_eq(ce_of(orig, NULL, &fold, &folded), &fold, &c, "fold");
    check_eq(ce_of(orig, folded, &rf, NULL), &rf, &c, "fold + R1 from a file");
    cic_test_path(rf.q_file, sizeof rf.q_file,
                  "tests/fixtures/q-not-orthogonal-32.safetensors");
    assert_int_equal(cic_q_file_check(&orth, &rf, 32, "d_model", &d), 0);
    assert_true(orth > CIC_Q_FILE_ORTH_MAX);
    {
        /* the check before a run refuses it, and a matrix of the wrong order */
        static cic_case k;
        char text[2048], path[1024];
        const char *files[] = {"q-not-orthogonal-32", "q-hadamard-32"};
        const char *want[] = {"is not orthogonal: max |Q^T Q - I| = 0.44", "is not a 8 x 8"};
        int f;
        for (f = 0; f < 2; f++) {
            char rel[128];
            snprintf(rel, sizeof rel, "tests/fixtures/%s.safetensors", files[f]);
            cic_test_path(path, sizeof path, rel);
            snprintf(text, sizeof text,
                     "[model]\nblock = \"rmsnorm\"\nd_model = 32\nheads = 4\ntokens = 2\n"
                     "samples = 1\nlayers = 1\n[[transforms]]\nname = \"r\"\n"
                     "kind = \"%s\"\nq = \"file:%s\"\n",
                     f ? "rotate-heads" : "rotate", path);
            memset(&d, 0, sizeof d);
            assert_int_equal(cic_case_load_string(&k, text, "q.toml", &d), CIC_OK);
            assert_int_equal(cic_xform_check(CIC_CASE_CHAIN(&k), &d), CIC_EINPUT);
            if (!strstr(d.msg, want[f]) || d.line != 8)
                fail_msg("check message %d:%d: %s", d.line, d.column, d.msg);
        }
    }
    cic_model_destroy(folded);
    cic_model_destroy(orig);
}

/* A transform computed at 24 bits is an invariance only up to float
 * rounding: its ce sits near 2^-24, far above the MPFR threshold and far
 * below the broken one. */
static void test_f32_transform_precision(void **state)
{
    cic_model_cfg c = random_cfg(31, CIC_BLOCK_PRELN);
    cic_model *orig = cic_model_create(&c, CIC_READOUT_HEAD);
    cic_xform_spec f32 = spec("f", CIC_XFORM_FUSE_LAYERNORM, CIC_Q_IDENTITY,
                              "none", CIC_TPREC_F32);
    cic_xform_spec mp = spec("m", CIC_XFORM_FUSE_LAYERNORM, CIC_Q_IDENTITY,
                             "none", CIC_TPREC_MPFR);
    double ce, eq, br, eqm, brm;
    (void)state;
    assert_non_null(orig);
    ce = ce_of(orig, NULL, &f32, NULL);
    cic_xform_thresholds(&eq, &br, &f32, PREC);
    cic_xform_thresholds(&eqm, &brm, &mp, PREC);
    if (!(ce > eqm && ce <= eq && ce > 0x1p-40))
        fail_msg("f32 fuse: ce %.3g, expected in (%.3g, %.3g]", ce, eqm, eq);
    cic_model_destroy(orig);
}

/* The transform really changes the weights (a test of the test: comparing a
 * model with itself would pass every check above). */
static void test_transform_changes_weights(void **state)
{
    cic_model_cfg c = random_cfg(5, CIC_BLOCK_PRELN);
    cic_model *orig = cic_model_create(&c, CIC_READOUT_HEAD), *m;
    cic_xform_spec rr = spec("rr", CIC_XFORM_ROTATE, CIC_Q_RANDOM, "none",
                             CIC_TPREC_MPFR);
    cic_diag d;
    char h0[65], h1[65];
    (void)state;
    m = cic_xform_apply(orig, &rr, PREC, &d);
    assert_non_null(m);
    cic_model_weights_sha256(h0, orig);
    cic_model_weights_sha256(h1, m);
    assert_string_not_equal(h0, h1);
    /* the source model is untouched */
    {
        char h2[65];
        cic_model *again = cic_model_create(&c, CIC_READOUT_HEAD);
        cic_model_weights_sha256(h2, again);
        assert_string_equal(h0, h2);
        cic_model_destroy(again);
    }
    cic_model_destroy(m);
    cic_model_destroy(orig);
}

static void test_thresholds(void **state)
{
    cic_xform_spec x = spec("x", CIC_XFORM_ROTATE, CIC_Q_RANDOM, "none",
                            CIC_TPREC_MPFR);
    double eq, br;
    (void)state;
    cic_xform_thresholds(&eq, &br, &x, 128);
    assert_true(eq == 0x1p-96);
    assert_int_equal(cic_xform_verdict(0, eq, br), CIC_VERDICT_EQUIVALENT);
    assert_int_equal(cic_xform_verdict(eq, eq, br), CIC_VERDICT_EQUIVALENT);
    assert_int_equal(cic_xform_verdict(1e-10, eq, br), CIC_VERDICT_INCONCLUSIVE);
    assert_int_equal(cic_xform_verdict(br, eq, br), CIC_VERDICT_BROKEN);
    assert_int_equal(cic_xform_verdict(NAN, eq, br), CIC_VERDICT_BROKEN);
    x.prec = CIC_TPREC_F64;
    cic_xform_thresholds(&eq, &br, &x, 128);
    assert_true(eq == 0x1p-33);
    x.prec = CIC_TPREC_F32;
    cic_xform_thresholds(&eq, &br, &x, 128);
    assert_true(eq == 0x1p-12 && eq < br);
}

/* ---- _cic_xf_par ---- */

typedef struct {
    atomic_int *hits; /* per index */
    atomic_int calls;
    int code_at;      /* the range holding this index returns code (-1: none) */
    int code;
    pthread_t first;
    atomic_int other; /* a range ran on another thread */
} par_probe;

static int par_fn(void *p, int lo, int hi)
{
    par_probe *P = p;
    int i, rc = 0;
    atomic_fetch_add(&P->calls, 1);
    if (!pthread_equal(pthread_self(), P->first))
        atomic_store(&P->other, 1);
    for (i = lo; i < hi; i++) {
        atomic_fetch_add(&P->hits[i], 1);
        if (i == P->code_at)
            rc = P->code;
    }
    return rc;
}

/* n indices, work w, index code_at returning code: want from _cic_xf_par
 * on 3 threads. */
#define PAR_THREADS 3
static void par_case(int n, double w, int code_at, int code, int want)
{
    par_probe P;
    int i, rc;
    memset(&P, 0, sizeof P);
    P.hits = calloc((size_t)(n > 0 ? n : 1), sizeof *P.hits);
    assert_non_null(P.hits);
    P.code_at = code_at;
    P.code = code;
    P.first = pthread_self();
    rc = _cic_xf_par(n, w, PAR_THREADS, par_fn, &P);
    if (rc != want)
        fail_msg("_cic_xf_par n %d work %g code %d at %d: %d, want %d", n, w, code, code_at,
                 rc, want);
    for (i = 0; i < n; i++)
        if (atomic_load(&P.hits[i]) != 1)
            fail_msg("_cic_xf_par n %d: index %d covered %d times", n, i,
                     atomic_load(&P.hits[i]));
    /* below a million of work one range, on the caller's thread */
    if (w < 1e6 && (atomic_load(&P.calls) != (n > 0) || atomic_load(&P.other)))
        fail_msg("_cic_xf_par n %d work %g: %d ranges, another thread %d", n, w,
                 atomic_load(&P.calls), atomic_load(&P.other));
    if (w >= 1e6 && n > 1 && atomic_load(&P.calls) < 2)
        fail_msg("_cic_xf_par n %d work %g: one range on %d threads", n, w, PAR_THREADS);
    free(P.hits);
}

static void test_par(void **state)
{
    (void)state;
    par_case(0, 1e9, -1, 0, 0);
    par_case(1, 1e9, -1, 0, 0);
    par_case(1000, 1e3, -1, 0, 0);
    par_case(1000, 1e9, -1, 0, 0);
    par_case(7, 1e9, 6, 1, 1);
    par_case(7, 1e9, 0, 2, 2);
    par_case(1000, 1e9, 999, -1, -1);
    par_case(1000, 1e9, 0, -1, -1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_thresholds),
        cmocka_unit_test(test_par),
        cmocka_unit_test(test_transform_changes_weights),
        cmocka_unit_test(test_preln_exact_and_mistakes),
        cmocka_unit_test(test_rmsnorm_exact_and_mistakes),
        cmocka_unit_test(test_llama_rotations),
        cmocka_unit_test(test_llama_rotations_dgemm),
        cmocka_unit_test(test_rotation_from_file),
        cmocka_unit_test(test_f32_transform_precision),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
