/* SPDX-License-Identifier: MIT */
/* test_lowp.c: the low-precision engines (src/engine/engine_lowp.c,
 * lowp_int.c) and their case syntax (src/case/load_lowp.c).
 *   - The integer linear against a direct int32 computation (plain integer
 *     loops, then the float32 scaling), bit for bit, for symmetric and
 *     asymmetric codes, per token, per group and per tensor; a planted
 *     changed code shows the comparison can fail.
 *   - An engine with float32 weights and activations is the f32 engine,
 *     bit for bit; a bf16 engine's outputs are bf16 values (and not the
 *     f32 engine's); a W8A8 engine's first linear is the integer kernel on
 *     the codes of its input and weight; bf16 weights from unrounded
 *     doubles are those from the same values in MPFR.
 *   - [[engines.lowp]] entries: what loads and what is refused, with the
 *     line, the key and what is allowed. */
#include "testutil.h"

#include "base/mpvec.h"
#include "case/case.h"
#include "engine/engine.h"
#include "engine/lowp.h"
#include "pipeline/pipeline.h"

#include <math.h>
#include <string.h>

/* ---- the integer linear ---- */

/* The direct computation: for each output, blocks of L columns in order,
 * an int32 sum of products of (q - z), then y += ((float)acc * sx) * sw. */
static void direct(float *y, const int16_t *qx, const float *sx, const int32_t *zx, long gx,
                   const int16_t *qw, const float *sw, const int32_t *zw, long gw, int R, int n,
                   int k, long L)
{
    int i, j;
    long b, c;
    for (i = 0; i < R; i++)
        for (j = 0; j < n; j++) {
            float acc_f = 0.0f;
            for (b = 0; b < k / L; b++) {
                int32_t acc = 0;
                long fx = (long)i * k + b * L, fw = (long)j * k + b * L;
                for (c = 0; c < L; c++) {
                    int32_t a = qx[fx + c] - (zx ? zx[(fx + c) / gx] : 0);
                    int32_t w = qw[fw + c] - (zw ? zw[(fw + c) / gw] : 0);
                    acc += a * w;
                }
                acc_f += ((float)acc * sx[fx / gx]) * sw[fw / gw];
            }
            y[(size_t)i * n + j] = acc_f;
        }
}

typedef struct {
    const char *xrule, *wrule;
} rule_pair;

static void fill_codes(int16_t *q, size_t n, int lo, int hi, uint64_t *s)
{
    size_t i;
    for (i = 0; i < n; i++)
        q[i] = (int16_t)(lo + cic_test_pick(s, hi - lo + 1));
}

static void fill_scales(float *v, long n, uint64_t *s)
{
    long i;
    for (i = 0; i < n; i++)
        v[i] = (float)(1 + cic_test_pick(s, 1000)) * 0x1p-12f;
}

static void test_int_matmul_direct(void **state)
{
    static const rule_pair pairs[] = {
        {"int8:token", "int8:channel"},
        {"int4:group16:asym", "int4:group32"},
        {"int8:tensor", "int8:channel:asym"},
        {"int4:group64", "int4:tensor:asym"},
    };
    enum { R = 5, N = 7, K = 64 };
    uint64_t seed = 42;
    size_t p;
    (void)state;
    for (p = 0; p < sizeof pairs / sizeof pairs[0]; p++) {
        cic_quant qa, qw;
        int16_t qx[R * K], qwc[N * K];
        float sx[R * K], sw[N * K], y[R * N], want[R * N];
        int32_t zx[R * K], zw[N * K];
        cic_lowp_int_operand X, W;
        long gx, gw, L, nb_x, nb_w;
        int lo_x, hi_x, lo_w, hi_w;
        assert_int_equal(cic_quant_parse(&qa, pairs[p].xrule, NULL, 0), 0);
        assert_int_equal(cic_quant_parse(&qw, pairs[p].wrule, NULL, 0), 0);
        gx = cic_quant_group_len(&qa, R, K);
        gw = cic_quant_group_len(&qw, N, K);
        nb_x = (long)R * K / gx;
        nb_w = (long)N * K / gw;
        lo_x = qa.symmetric ? -(1 << (qa.bits - 1)) : 0;
        hi_x = qa.symmetric ? (1 << (qa.bits - 1)) - 1 : (1 << qa.bits) - 1;
        lo_w = qw.symmetric ? -(1 << (qw.bits - 1)) : 0;
        hi_w = qw.symmetric ? (1 << (qw.bits - 1)) - 1 : (1 << qw.bits) - 1;
        fill_codes(qx, R * K, lo_x, hi_x, &seed);
        fill_codes(qwc, N * K, lo_w, hi_w, &seed);
        fill_scales(sx, nb_x, &seed);
        fill_scales(sw, nb_w, &seed);
        for (long g = 0; g < nb_x; g++)
            zx[g] = qa.symmetric ? 0 : cic_test_pick(&seed, hi_x + 1);
        for (long g = 0; g < nb_w; g++)
            zw[g] = qw.symmetric ? 0 : cic_test_pick(&seed, hi_w + 1);
        X.q = qx;
        X.s = sx;
        X.z = qa.symmetric ? NULL : zx;
        X.g = gx;
        W.q = qwc;
        W.s = sw;
        W.z = qw.symmetric ? NULL : zw;
        W.g = gw;
        L = gx < K ? gx : K;
        L = (gw < K ? gw : K) < L ? (gw < K ? gw : K) : L; /* the group lengths divide */
        direct(want, qx, sx, X.z, gx, qwc, sw, W.z, gw, R, N, K, L);
        assert_int_equal(cic_lowp_int_matmul(y, &X, &W, R, N, K), 0);
        for (int i = 0; i < R * N; i++)
            if (cic_test_f32_bits(y[i]) != cic_test_f32_bits(want[i]))
                fail_msg("%s x %s: output %d is %a, the direct int32 computation %a",
                         pairs[p].xrule, pairs[p].wrule, i, (double)y[i], (double)want[i]);
        /* a planted change of one code moves the output: the check can fail */
        qwc[3] = (int16_t)(qwc[3] == hi_w ? lo_w : hi_w);
        assert_int_equal(cic_lowp_int_matmul(y, &X, &W, R, N, K), 0);
        {
            int moved = 0;
            for (int i = 0; i < R * N; i++)
                moved += cic_test_f32_bits(y[i]) != cic_test_f32_bits(want[i]);
            assert_true(moved > 0);
        }
    }
}

/* ---- the engines on a small model ---- */

static const char *CASE_HEAD =
    "name = \"lp\"\n"
    "[model]\nblock = \"rmsnorm\"\nd_model = 64\nheads = 4\nmlp_ratio = 2\ntokens = 8\n"
    "samples = 2\nlayers = 1\ncausal = true\nseed = 3\n"
    "[model.weights]\nstd = 0.1\nmassive_channels = 2\nmassive_scale = 50.0\n"
    "[engines]\nf32 = [\"openblas\", \"fixed-order\"]\n";

static void load(cic_case *c, const char *engines)
{
    char text[4096];
    cic_diag d;
    memset(&d, 0, sizeof d);
    snprintf(text, sizeof text, "%s%s", CASE_HEAD, engines);
    if (cic_case_load_string(c, text, "lp.toml", &d) != CIC_OK)
        fail_msg("case did not load: %s", d.msg);
}

static float *run_lowp(const cic_model *m, const cic_lowp_spec *lp, enum cic_matmul mm,
                       const cic_run_opts *o)
{
    size_t n = (size_t)m->rows * cic_model_out_cols(m);
    float *y = cic_calloc(n, sizeof *y);
    assert_non_null(y);
    assert_int_equal(cic_engine_lowp_run(y, m, lp, mm, o), 0);
    return y;
}

static void test_identity_and_bf16(void **state)
{
    cic_case c;
    cic_model *m;
    size_t n, i;
    int mm;
    (void)state;
    load(&c, "[[engines.lowp]]\nname = \"id\"\nweights = \"float32\"\n"
             "[[engines.lowp]]\nname = \"b\"\nweights = \"bf16\"\nactivations = \"bf16\"\n");
    m = cic_model_create(&c.model, c.readout);
    assert_non_null(m);
    n = (size_t)m->rows * cic_model_out_cols(m);
    for (mm = 0; mm < CIC_MATMUL_COUNT; mm++) {
        float *ref = cic_calloc(n, sizeof *ref), *y, *b;
        long diff = 0;
        assert_int_equal(cic_engine_f32_run(ref, m, (enum cic_matmul)mm, NULL), 0);
        y = run_lowp(m, &c.lowp[0], (enum cic_matmul)mm, NULL);
        for (i = 0; i < n; i++)
            assert_int_equal(cic_test_f32_bits(y[i]), cic_test_f32_bits(ref[i]));
        b = run_lowp(m, &c.lowp[1], (enum cic_matmul)mm, NULL);
        for (i = 0; i < n; i++) {
            assert_true((float)cic_format_round_d(cic_format_get(CIC_FORMAT_BF16), b[i]) == b[i]);
            diff += b[i] != ref[i];
        }
        assert_true(diff > (long)n / 2);
        free(ref);
        free(y);
        free(b);
    }
    cic_model_destroy(m);
}

/* The first quantized linear of a W8A8 run, seen by the tap. */
typedef struct {
    const cic_model *m;
    int op;
    float *x, *y;
    int rows;
} first_lin;

static void tap_first(void *ctx, int op, const float *x, const float *y, int rows)
{
    first_lin *f = ctx;
    const cic_op *o = &f->m->ops[op];
    size_t nx = (size_t)rows * f->m->t[o->w].cols, ny = (size_t)rows * f->m->t[o->w].rows;
    if (f->op >= 0)
        return;
    f->op = op;
    f->rows = rows;
    f->x = malloc(nx * sizeof *f->x);
    f->y = malloc(ny * sizeof *f->y);
    memcpy(f->x, x, nx * sizeof *f->x);
    memcpy(f->y, y, ny * sizeof *f->y);
}

static void test_w8a8_linear(void **state)
{
    cic_case c;
    cic_model *m;
    cic_run_opts o;
    first_lin f = {NULL, -1, NULL, NULL, 0};
    const cic_tensor *w;
    int16_t *qx, *qw;
    float *sx, *sw, *deq, *want, *y;
    int32_t zx[1024], zw[1024];
    int n, k;
    (void)state;
    load(&c, "[[engines.lowp]]\nname = \"w8a8\"\nweights = \"int8:channel\"\n"
             "activations = \"int8:token\"\n");
    m = cic_model_create(&c.model, c.readout);
    assert_non_null(m);
    memset(&o, 0, sizeof o);
    f.m = m;
    o.lin_tap = tap_first;
    o.tap_ctx = &f;
    y = run_lowp(m, &c.lowp[0], CIC_MATMUL_OPENBLAS, &o);
    assert_true(f.op >= 0);
    w = &m->t[m->ops[f.op].w];
    assert_int_equal(m->ops[f.op].b, -1); /* rmsnorm: no biases */
    n = w->rows;
    k = w->cols;
    qx = malloc((size_t)f.rows * k * sizeof *qx);
    qw = malloc((size_t)n * k * sizeof *qw);
    sx = malloc((size_t)f.rows * sizeof *sx);
    sw = malloc((size_t)n * sizeof *sw);
    deq = malloc((size_t)n * k * sizeof *deq);
    want = malloc((size_t)f.rows * n * sizeof *want);
    assert_int_equal(cic_quant_matrix(&c.lowp[0].aq, f.x, f.rows, k, qx, sx, zx, NULL, NULL,
                                      NULL, 0), 0);
    assert_int_equal(cic_lowp_tensor(deq, qw, sw, zw, NULL, m, m->ops[f.op].w, &c.lowp[0],
                                     NULL, 0), 0);
    direct(want, qx, sx, NULL, k, qw, sw, NULL, k, f.rows, n, k, k);
    for (int i = 0; i < f.rows * n; i++)
        if (cic_test_f32_bits(f.y[i]) != cic_test_f32_bits(want[i]))
            fail_msg("w8a8 linear output %d is %a, the integer kernel on the codes %a", i,
                     (double)f.y[i], (double)want[i]);
    free(qx);
    free(qw);
    free(sx);
    free(sw);
    free(deq);
    free(want);
    free(f.x);
    free(f.y);
    free(y);
    cic_model_destroy(m);
}

/* bf16 weights rounded from unrounded values held as doubles (value by
 * value) are those rounded from the same values held as MPFR numbers, and
 * not those rounded from their float32 roundings (a double rounding). */
static void test_bf16_from_doubles(void **state)
{
    cic_case c;
    cic_model *m;
    cic_tensor *t;
    float *a, *b;
    double *v;
    size_t n, i;
    long twice = 0;
    uint64_t s = 77;
    int id, k;
    (void)state;
    load(&c, "[[engines.lowp]]\nname = \"b\"\nweights = \"bf16\"\n");
    m = cic_model_create(&c.model, c.readout);
    assert_non_null(m);
    for (k = 0; k < m->n_ops && !cic_lowp_quantized(&m->ops[k]); k++)
        ;
    assert_true(k < m->n_ops);
    id = m->ops[k].w;
    t = &m->t[id];
    n = (size_t)t->rows * t->cols;
    v = malloc(n * sizeof *v);
    a = malloc(n * sizeof *a);
    b = malloc(n * sizeof *b);
    assert_true(v && a && b);
    for (i = 0; i < n; i++) /* bf16 ties and near-ties of float32 values */
        v[i] = ldexp((double)(0x8000 + cic_test_pick(&s, 0x8000)), -15 - cic_test_pick(&s, 4)) *
               (1 + ldexp(1.0, -8) * (cic_test_pick(&s, 3) - 1) / 2 +
                ldexp((double)cic_test_pick(&s, 3) - 1, -30));
    cic_tensor_set_f64(t, v, 53); /* the model owns v now */
    assert_int_equal(cic_lowp_tensor(a, NULL, NULL, NULL, NULL, m, id, &c.lowp[0], NULL, 0), 0);
    t->hp = cic_mpvec_create(n, 53);
    assert_non_null(t->hp);
    for (i = 0; i < n; i++)
        mpfr_set_d(t->hp[i], t->f64[i], MPFR_RNDN);
    free(t->f64);
    t->f64 = NULL;
    assert_int_equal(cic_lowp_tensor(b, NULL, NULL, NULL, NULL, m, id, &c.lowp[0], NULL, 0), 0);
    for (i = 0; i < n; i++) {
        if (cic_test_f32_bits(a[i]) != cic_test_f32_bits(b[i]))
            fail_msg("value %zu (%a): bf16 from the double %a, from MPFR %a", i,
                     mpfr_get_d(t->hp[i], MPFR_RNDN), (double)a[i], (double)b[i]);
        twice += (float)cic_format_round_d(cic_format_get(CIC_FORMAT_BF16), t->f32[i]) != a[i];
    }
    assert_true(twice > 0); /* the test sees a rounding through float32 */
    free(a);
    free(b);
    cic_model_destroy(m);
}

/* ---- the case syntax ---- */

static void refused(const char *engines, const char *needle)
{
    char text[4096];
    cic_case c;
    cic_diag d;
    memset(&d, 0, sizeof d);
    snprintf(text, sizeof text, "%s%s", CASE_HEAD, engines);
    assert_int_equal(cic_case_load_string(&c, text, "lp.toml", &d), CIC_EINPUT);
    if (!strstr(d.msg, needle))
        fail_msg("message '%s' lacks '%s'", d.msg, needle);
    assert_true(d.line > 0);
}

static void test_syntax(void **state)
{
    cic_case c;
    (void)state;
    load(&c, "[[engines.lowp]]\nname = \"w4\"\nweights = \"int4:group32:asym:clip0.9\"\n"
             "activations = \"int4:token\"\ncompute = \"bf16\"\nweights_from = \"float32\"\n"
             "[[engines.lowp]]\nname = \"mx\"\nweights = \"mxfp4\"\nactivations = \"mxfp4\"\n");
    assert_int_equal(c.n_lowp, 2);
    assert_true(c.lowp[0].wq_on && !c.lowp[0].wq.symmetric && c.lowp[0].wq.group == 32);
    assert_true(c.lowp[0].aq_on && c.lowp[0].aq.gran == CIC_QG_ROW);
    assert_ptr_equal(c.lowp[0].elem, cic_format_get(CIC_FORMAT_BF16));
    assert_int_equal(c.lowp[0].from, CIC_LOWP_FROM_FLOAT32);
    assert_ptr_equal(c.lowp[1].elem, cic_format_get(CIC_FORMAT_FLOAT32));
    assert_int_equal(c.lowp[1].from, CIC_LOWP_FROM_UNROUNDED);
    refused("[[engines.lowp]]\nname = \"a\"\n", "missing required key 'weights'");
    refused("[[engines.lowp]]\nname = \"a\"\nweights = \"int3\"\n",
            "bad 'weights' in [[engines.lowp]] entry 1");
    refused("[[engines.lowp]]\nname = \"a\"\nweights = \"int4:grup\"\n", "unknown option");
    refused("[[engines.lowp]]\nname = \"mpfr\"\nweights = \"bf16\"\n", "built-in engine");
    refused("[[engines.lowp]]\nname = \"a\"\nweights = \"bf16\"\n[[engines.lowp]]\n"
            "name = \"a\"\nweights = \"fp16\"\n", "used by [[engines.lowp]] entry 1");
    refused("[[engines.lowp]]\nname = \"a\"\nweights = \"bf16\"\nactivations = \"bf16\"\n"
            "compute = \"fp16\"\n", "contradicts");
    refused("[[engines.lowp]]\nname = \"a\"\nweights = \"bf16\"\nweights_from = \"f64\"\n",
            "unrounded, float32");
    refused("[[engines.lowp]]\nname = \"a\"\nweights = \"bf16\"\nactivation = \"bf16\"\n",
            "activation");
    refused("[engines.lowp]\nname = \"a\"\n", "engines.lowp");
}

/* A rule whose group does not divide a linear is refused before any run. */
static void test_group_refused(void **state)
{
    cic_case c;
    cic_pipeline *p = NULL;
    cic_pipeline_opts po;
    cic_diag d;
    (void)state;
    load(&c, "[[engines.lowp]]\nname = \"g\"\nweights = \"int4:group48\"\n");
    memset(&po, 0, sizeof po);
    po.no_baseline = true;
    memset(&d, 0, sizeof d);
    assert_int_equal(cic_pipeline_run(&p, &c, &po, &d), CIC_EINPUT);
    if (!strstr(d.msg, "engine 'g'") || !strstr(d.msg, "does not divide"))
        fail_msg("message: %s", d.msg);
    cic_pipeline_destroy(p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_int_matmul_direct),
        cmocka_unit_test(test_identity_and_bf16),
        cmocka_unit_test(test_w8a8_linear),
        cmocka_unit_test(test_bf16_from_doubles),
        cmocka_unit_test(test_syntax),
        cmocka_unit_test(test_group_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
