/* SPDX-License-Identifier: MIT */
/* test_engine_threads.c: the float engines give the same bits for any
 * thread count. The f32 and f64 engines split the work outside the gemm
 * calls by rows over OpenBLAS's thread count (engine_real_core.h); here
 * each runs at openblas_set_num_threads(1), (2) and (3) and every output
 * is compared bit for bit with the one-thread run, for both matmuls
 * (the fixed-order loop always, OpenBLAS where its own gemm keeps its
 * bits across thread counts: top_threads), on graphs that reach every kernel the threads split:
 * a DiT block with its final layer (adaLN modulate and gate, LayerNorm,
 * GELU-tanh, attention), causal and not, the same block rewritten by the
 * per-sample fold, the online unrotation and the branch rotation with the
 * fast Hadamard (folds, centring, FWHT), and a LLaMA-shaped block (RMSNorm,
 * RoPE, grouped-query causal attention, SiLU GLU). The shapes are large
 * enough that each op kind passes the engine's threshold for threads. A
 * planted fault (one input value changed in its last bit) is found by the
 * same comparison, so the comparison sees the outputs. */
#include "testutil.h"

#include "base/base.h"
#include "engine/engine.h"
#include "model/model.h"
#include "xform/xform.h"

#include <cblas.h>
#include <string.h>

#define PREC 128

static cic_model_cfg dit_cfg(bool causal)
{
    cic_model_cfg c;
    memset(&c, 0, sizeof c);
    c.block = CIC_BLOCK_DIT;
    c.d_model = 128;
    c.heads = 4;
    c.mlp_ratio = 4;
    c.d_mlp = 512;
    c.tokens = 72;
    c.samples = 2;
    c.layers = 1;
    c.eps = 1e-6;
    c.causal = causal;
    c.act = CIC_ACT_GELU_TANH;
    c.d_out = 16;
    c.d_cond = 64;
    c.final_layer = true;
    c.seed = 5;
    c.dist = CIC_DIST_NORMAL;
    c.std = 0.05;
    return c;
}

static cic_model_cfg llama_cfg(void)
{
    cic_model_cfg c;
    memset(&c, 0, sizeof c);
    c.block = CIC_BLOCK_RMSNORM;
    c.d_model = 128;
    c.heads = 8;
    c.kv_heads = 2;
    c.mlp_ratio = 2;
    c.d_mlp = 256;
    c.tokens = 72;
    c.samples = 2;
    c.layers = 2;
    c.eps = 1e-5;
    c.causal = true;
    c.act = CIC_ACT_SILU;
    c.d_out = 16;
    c.seed = 7;
    c.dist = CIC_DIST_NORMAL;
    c.std = 0.05;
    c.rope = CIC_ROPE_HALF;
    c.rope_theta = 10000.0;
    return c;
}

static cic_model *rewrite(const cic_model *orig, const char *label, enum cic_xform_kind kind)
{
    cic_xform_spec x = cic_test_xform_spec(label, kind, CIC_Q_HADAMARD, true);
    cic_diag d;
    cic_model *m;
    memset(&d, 0, sizeof d);
    m = cic_xform_apply(orig, &x, PREC, &d);
    if (!m)
        fail_msg("cic_xform_apply '%s' failed", label);
    return m;
}

static size_t n_out(const cic_model *m)
{
    return (size_t)m->cfg.samples * m->cfg.tokens * (size_t)cic_model_out_cols(m);
}

/* The first index where a and b differ in their bits, or -1. */
static long first_diff(const void *a, const void *b, size_t n, size_t size)
{
    size_t i;
    for (i = 0; i < n; i++)
        if (memcmp((const char *)a + i * size, (const char *)b + i * size, size) != 0)
            return (long)i;
    return -1;
}

/* The model's output from engine e (0: f32, 1: f64) at nt OpenBLAS
 * threads, in y (n values of the engine's type). */
static void run_at(void *y, const cic_model *m, int e, enum cic_matmul mm, int nt)
{
    openblas_set_num_threads(nt);
    assert_int_equal(openblas_get_num_threads(), nt);
    if (e == 0)
        assert_int_equal(cic_engine_f32_run(y, m, mm, NULL), 0);
    else
        assert_int_equal(cic_engine_f64_run(y, m, mm, false, NULL), 0);
}

/* Threads to compare engine e with matmul mm at (2 .. top, 0: none). The
 * fixed-order matmul: 3, the engine's row split alone. OpenBLAS: its gemm
 * calls keep their arguments, but OpenBLAS's own split of a product may
 * round differently at another thread count, and where it does the engine
 * follows. Measured on OpenBLAS 0.3.21 (sgemm with C = A B^T, random
 * operands): the SkylakeX kernels give the same bits at 1, 2 and 3 threads
 * on the shapes here and on the DiT-XL/2 block's; the Haswell kernels
 * (OPENBLAS_CORETYPE=Haswell) differ at 2 threads on most of them; SkylakeX
 * dgemm differs at 3 threads on these shapes. So the OpenBLAS matmul is
 * compared on SkylakeX only, f32 up to 3 threads and f64 up to 2. */
static int top_threads(int e, int mm)
{
    if (mm == CIC_MATMUL_FIXED)
        return 3;
    if (strcmp(openblas_get_corename(), "SkylakeX") != 0) {
        printf("# OpenBLAS core %s: the OpenBLAS matmul is not compared across threads\n",
               openblas_get_corename());
        return 0;
    }
    return e == 0 ? 3 : 2;
}

/* Every engine and matmul of m at 2 threads and more (top_threads) against
 * 1 thread. */
static void check_threads(const cic_model *m, const char *label)
{
    size_t n = n_out(m);
    int e, mm, nt;
    for (e = 0; e < 2; e++)
        for (mm = 0; mm < CIC_MATMUL_COUNT; mm++) {
            size_t size = e == 0 ? sizeof(float) : sizeof(double);
            void *y1 = cic_calloc(n, size), *y = cic_calloc(n, size);
            int top = top_threads(e, mm);
            assert_non_null(y1);
            assert_non_null(y);
            run_at(y1, m, e, (enum cic_matmul)mm, 1);
            for (nt = 2; nt <= top; nt++) {
                long at;
                memset(y, 0xa5, n * size);
                run_at(y, m, e, (enum cic_matmul)mm, nt);
                at = first_diff(y1, y, n, size);
                if (at >= 0)
                    fail_msg("%s, %s engine, matmul %d: %d threads differ from 1 thread at "
                             "output %ld of %zu", label, e == 0 ? "f32" : "f64", mm, nt, at, n);
            }
            free(y1);
            free(y);
        }
    openblas_set_num_threads(1);
}

static void test_dit_threads(void **state)
{
    static const struct {
        const char *label;
        enum cic_xform_kind kind;
    } rw[] = {
        {"per-sample fold", CIC_XFORM_PER_SAMPLE_FOLD},
        {"online unrotate", CIC_XFORM_ONLINE_UNROTATE},
        {"branch rotate", CIC_XFORM_BRANCH_ROTATE},
    };
    int causal, k;
    (void)state;
    for (causal = 0; causal < 2; causal++) {
        cic_model_cfg c = dit_cfg(causal);
        cic_model *orig = cic_model_create(&c, CIC_READOUT_HEAD);
        assert_non_null(orig);
        check_threads(orig, causal ? "dit causal" : "dit");
        for (k = 0; k < 3 && !causal; k++) {
            cic_model *m = rewrite(orig, rw[k].label, rw[k].kind);
            check_threads(m, rw[k].label);
            cic_model_destroy(m);
        }
        cic_model_destroy(orig);
    }
}

static void test_llama_threads(void **state)
{
    cic_model_cfg c = llama_cfg();
    cic_model *m = cic_model_create(&c, CIC_READOUT_HEAD);
    (void)state;
    assert_non_null(m);
    check_threads(m, "llama");
    cic_model_destroy(m);
}

/* One input value one ulp up: the comparison used above finds the change. */
static void test_fault_found(void **state)
{
    cic_model_cfg c = dit_cfg(false);
    cic_model *m = cic_model_create(&c, CIC_READOUT_HEAD);
    size_t n;
    float *y1, *y2, *w;
    (void)state;
    assert_non_null(m);
    n = n_out(m);
    assert_non_null(m->t[m->input].f32);
    y1 = cic_calloc(n, sizeof *y1);
    y2 = cic_calloc(n, sizeof *y2);
    assert_non_null(y1);
    assert_non_null(y2);
    run_at(y1, m, 0, CIC_MATMUL_FIXED, 1);
    w = m->t[m->input].f32;
    w[3] = nextafterf(w[3], INFINITY);
    run_at(y2, m, 0, CIC_MATMUL_FIXED, 2);
    assert_true(first_diff(y1, y2, n, sizeof *y1) >= 0);
    openblas_set_num_threads(1);
    free(y1);
    free(y2);
    cic_model_destroy(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_dit_threads),
        cmocka_unit_test(test_llama_threads),
        cmocka_unit_test(test_fault_found),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
