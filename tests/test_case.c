/* SPDX-License-Identifier: MIT */
/* test_case.c: the case loader (src/case). Every file in tests/malformed must
 * fail with CIC_EINPUT at the line:column and with the message substring its
 * first line announces ("# expect: LINE:COL substring"); the checker itself is
 * shown to catch a planted fault. Valid cases (strings and the fixtures in
 * tests/fixtures) must parse to the expected values, defaults included, and
 * randomly mutated cases must never crash the loader. */
#include "testutil.h"

#include "case/case.h"
#include "case/toml_capi.h"
#include "kind/engine_id.h"
#include "xform/kinds.h"

#include <limits.h>
#include <string.h>

/* ---- the malformed-file checker ---------------------------------------- */

typedef struct {
    int line, col;
    char sub[512];
} expect_t;

/* Parse "# expect: L:C substring" from the first line of path. */
static bool read_expect(const char *path, expect_t *e, char *why, size_t cap)
{
    char first[700];
    FILE *f = fopen(path, "rb");
    size_t n;
    if (!f) {
        snprintf(why, cap, "cannot open");
        return false;
    }
    if (!fgets(first, sizeof first, f)) {
        fclose(f);
        snprintf(why, cap, "no first line");
        return false;
    }
    fclose(f);
    n = strlen(first);
    while (n && (first[n - 1] == '\n' || first[n - 1] == '\r'))
        first[--n] = '\0';
    if (sscanf(first, "# expect: %d:%d %511[^\n]", &e->line, &e->col, e->sub) !=
        3) {
        snprintf(why, cap, "first line is not '# expect: LINE:COL text': %.300s",
                 first);
        return false;
    }
    return true;
}

/* Load path; true when it fails as e says, else why explains. */
static bool check_fails_as(const char *path, const expect_t *e, char *why,
                           size_t cap)
{
    static cic_case c; /* large: keep it off the stack */
    cic_diag d;
    int rc;
    memset(&d, 0, sizeof d);
    rc = cic_case_load(&c, path, &d);
    if (rc != CIC_EINPUT) {
        snprintf(why, cap, "rc %d, expected CIC_EINPUT (%d); diag %d:%d: %.300s", rc,
                 CIC_EINPUT, d.line, d.column, rc == CIC_OK ? "(none)" : d.msg);
        return false;
    }
    if (d.line != e->line || d.column != e->col || !strstr(d.msg, e->sub)) {
        snprintf(why, cap,
                 "expected %d:%d containing \"%.300s\"\n      got %d:%d: %.700s",
                 e->line, e->col, e->sub, d.line, d.column, d.msg);
        return false;
    }
    if (strcmp(d.file, path) != 0) {
        snprintf(why, cap, "diag file '%.300s', expected '%.300s'", d.file,
                 path);
        return false;
    }
    return true;
}

/* One file of tests/malformed (the *.toml ones): it fails as its first
 * line says. */
typedef struct {
    int n, failures;
} malformed_count;

static void check_malformed(const char *path, const char *name, void *ctx)
{
    malformed_count *mc = ctx;
    char why[1400];
    expect_t e;
    size_t l = strlen(name);
    if (l <= 5 || strcmp(name + l - 5, ".toml") != 0)
        return;
    mc->n++;
    if (!read_expect(path, &e, why, sizeof why) || !check_fails_as(path, &e, why, sizeof why)) {
        print_error("FAIL %s: %s\n", name, why);
        mc->failures++;
    }
}

static void test_malformed_files(void **state)
{
    malformed_count mc = {0, 0};
    (void)state;
    cic_test_each_file("tests/malformed", check_malformed, &mc);
    if (mc.n < 25)
        fail_msg("only %d malformed cases in tests/malformed (want >= 25)", mc.n);
    if (mc.failures)
        fail_msg("%d of %d malformed cases failed", mc.failures, mc.n);
}

/* Planted faults: the checker must reject a valid file, a wrong column, a
 * wrong line and a wrong message, or the malformed test proves nothing. */
static void test_malformed_checker_catches_faults(void **state)
{
    char path[1024], why[1400];
    expect_t e;
    (void)state;

    cic_test_path(path, sizeof path, "tests/fixtures/valid-preln.toml");
    e.line = 1;
    e.col = 1;
    strcpy(e.sub, "");
    assert_false(check_fails_as(path, &e, why, sizeof why));
    assert_non_null(strstr(why, "expected CIC_EINPUT"));

    cic_test_path(path, sizeof path, "tests/malformed/heads-divide.toml");
    assert_true(read_expect(path, &e, why, sizeof why));
    assert_true(check_fails_as(path, &e, why, sizeof why));
    e.col++;
    assert_false(check_fails_as(path, &e, why, sizeof why));
    e.col--;
    e.line++;
    assert_false(check_fails_as(path, &e, why, sizeof why));
    e.line--;
    strcpy(e.sub, "a message the loader never writes");
    assert_false(check_fails_as(path, &e, why, sizeof why));
}

/* ---- valid cases --------------------------------------------------------- */

static const char *full_case =
    "name = \"full\"\n"
    "[model]\n"
    "block = \"preln\"\n"
    "d_model = 64\n"
    "heads = 8\n"
    "mlp_ratio = 2.5\n"
    "tokens = 16\n"
    "samples = 3\n"
    "layers = 2\n"
    "eps = 1e-6\n"
    "causal = true\n"
    "activation = \"relu\"\n"
    "d_out = 10\n"
    "seed = 12345678901\n"
    "[model.weights]\n"
    "dist = \"uniform\"\n"
    "std = 0.1\n"
    "outlier_channels = 3\n"
    "outlier_scale = 20\n" /* an integer for a float key is fine */
    "[engines]\n"
    "f32 = [\"fixed-order\"]\n"
    "mpfr_prec = 256\n"
    "[readout]\n"
    "kind = \"residual\"\n"
    "[[transforms]]\n"
    "name = \"fuse\"\n"
    "kind = \"fuse-layernorm\"\n"
    "precision = \"f64\"\n"
    "[[transforms]]\n"
    "name = \"rot.1\"\n"
    "kind = \"rotate\"\n"
    "after = \"fuse\"\n"
    "q = \"hadamard\"\n"
    "seed = 9\n"
    "mistake = \"skip-attn-out\"\n"
    "expect = \"broken\"\n"
    "[[gates]]\n"
    "transform = \"rot.1\"\n"
    "engine = \"f32-fixed-order\"\n"
    "metric = \"drift.p99\"\n"
    "max = 5\n"
    "[[gates]]\n"
    "metric = \"ce_residual\"\n"
    "max = inf\n";

static void test_full_case(void **state)
{
    static cic_case c;
    cic_diag d;
    int rc;
    (void)state;
    rc = cic_case_load_string(&c, full_case, "dir/full-case.toml", &d);
    if (rc != CIC_OK)
        fail_msg("rc %d: %d:%d: %s", rc, d.line, d.column, d.msg);
    assert_string_equal(c.name, "full");
    assert_string_equal(c.path, "dir/full-case.toml");
    assert_int_equal(c.model.block, CIC_BLOCK_PRELN);
    assert_int_equal(c.model.d_model, 64);
    assert_int_equal(c.model.heads, 8);
    cic_assert_close(c.model.mlp_ratio, 2.5, 0, 0);
    assert_int_equal(c.model.d_mlp, 160);
    assert_int_equal(c.model.tokens, 16);
    assert_int_equal(c.model.samples, 3);
    assert_int_equal(c.model.layers, 2);
    cic_assert_close(c.model.eps, 1e-6, 0, 0);
    assert_true(c.model.causal);
    assert_int_equal(c.model.act, CIC_ACT_RELU);
    assert_int_equal(c.model.d_out, 10);
    assert_true(c.model.seed == 12345678901ull);
    assert_int_equal(c.model.dist, CIC_DIST_UNIFORM);
    cic_assert_close(c.model.std, 0.1, 0, 0);
    assert_int_equal(c.model.outlier_channels, 3);
    cic_assert_close(c.model.outlier_scale, 20, 0, 0);
    assert_false(c.f32_openblas);
    assert_true(c.f32_fixed);
    assert_int_equal(c.mpfr_prec, 256);
    assert_int_equal(c.readout, CIC_READOUT_RESIDUAL);
    assert_int_equal(c.n_xf, 2);
    assert_string_equal(c.xf[0].name, "fuse");
    assert_int_equal(c.xf[0].kind, CIC_XFORM_FUSE_LAYERNORM);
    assert_int_equal(c.xf[0].after, -1);
    assert_int_equal(c.xf[0].prec, CIC_TPREC_F64);
    assert_int_equal(c.xf[0].mistake, CIC_MISTAKE_NONE);
    assert_int_equal(c.xf[0].expect, CIC_VERDICT_EQUIVALENT);
    assert_int_equal(c.xf[0].line, 25);
    assert_string_equal(c.xf[1].name, "rot.1");
    assert_int_equal(c.xf[1].kind, CIC_XFORM_ROTATE);
    assert_int_equal(c.xf[1].after, 0);
    assert_int_equal(c.xf[1].prec, CIC_TPREC_MPFR);
    assert_int_equal(c.xf[1].q, CIC_Q_HADAMARD);
    assert_true(c.xf[1].q_seed == 9);
    assert_string_equal(cic_xform_mistake_name(&c.xf[1]), "skip-attn-out");
    assert_int_equal(c.xf[1].expect, CIC_VERDICT_BROKEN);
    assert_int_equal(c.xf[1].line, 29);
    /* adaLN fields have their defaults on every kind. */
    assert_int_equal(c.xf[0].stream, CIC_STREAM_CENTERED);
    assert_false(c.xf[0].fast);
    assert_int_equal(c.xf[0].calibration, 0);
    assert_int_equal(c.xf[1].stream, CIC_STREAM_CENTERED);
    assert_false(c.xf[1].fast);
    assert_int_equal(c.xf[1].calibration, 0);
    assert_int_equal(c.n_gates, 2);
    assert_string_equal(c.gates[0].transform, "rot.1");
    assert_string_equal(c.gates[0].engine, "f32-fixed-order");
    assert_string_equal(c.gates[0].metric, "drift.p99");
    cic_assert_close(c.gates[0].max, 5, 0, 0);
    assert_int_equal(c.gates[0].line, 37);
    assert_string_equal(c.gates[1].transform, "*");
    assert_string_equal(c.gates[1].engine, "*");
    assert_string_equal(c.gates[1].metric, "ce_residual");
    assert_true(isinf(c.gates[1].max) && c.gates[1].max > 0);
    assert_int_equal(cic_case_xform_find(&c, "rot.1"), 1);
    assert_int_equal(cic_case_xform_find(&c, "fuse"), 0);
    assert_int_equal(cic_case_xform_find(&c, "none"), -1);
    assert_int_equal(cic_case_xform_find(&c, NULL), -1);
    assert_int_equal(cic_case_xform_find(NULL, "fuse"), -1);
}

static const char *minimal_preln =
    "[model]\nblock = \"preln\"\nd_model = 32\nheads = 4\ntokens = 8\n"
    "samples = 2\nlayers = 1\n";

static void test_defaults(void **state)
{
    static cic_case c;
    cic_diag d;
    int rc;
    (void)state;
    rc = cic_case_load_string(&c, minimal_preln, "cases/my.case.toml", &d);
    if (rc != CIC_OK)
        fail_msg("rc %d: %s", rc, d.msg);
    assert_string_equal(c.name, "my.case"); /* file stem */
    cic_assert_close(c.model.mlp_ratio, 4, 0, 0);
    assert_int_equal(c.model.d_mlp, 128);
    cic_assert_close(c.model.eps, 1e-5, 0, 0);
    assert_false(c.model.causal);
    assert_int_equal(c.model.act, CIC_ACT_GELU);
    assert_int_equal(c.model.d_out, 32);
    assert_int_equal(c.model.d_cond, 32);
    assert_true(c.model.final_layer);
    assert_true(c.model.seed == 0);
    assert_int_equal(c.model.dist, CIC_DIST_NORMAL);
    cic_assert_close(c.model.std, 0.02, 0, 0);
    assert_int_equal(c.model.outlier_channels, 0);
    cic_assert_close(c.model.outlier_scale, 1, 0, 0);
    assert_true(c.f32_openblas);
    assert_true(c.f32_fixed);
    assert_int_equal(c.mpfr_prec, 64);
    assert_int_equal(c.readout, CIC_READOUT_HEAD);
    assert_int_equal(c.n_xf, 0);
    assert_int_equal(c.n_gates, 0);

    /* rmsnorm: SwiGLU gate silu. */
    rc = cic_case_load_string(&c,
                              "[model]\nblock = \"rmsnorm\"\nd_model = 8\n"
                              "heads = 2\ntokens = 4\nsamples = 1\nlayers = 1\n"
                              "[[transforms]]\nname = \"x\"\n"
                              "kind = \"rotate\"\nq = \"random\"\n",
                              NULL, &d);
    if (rc != CIC_OK)
        fail_msg("rc %d: %s", rc, d.msg);
    assert_int_equal(c.model.act, CIC_ACT_SILU);
    /* no file, no name: "case" (a name becomes a folder and a file name) */
    assert_string_equal(c.name, "case");
    assert_int_equal(c.xf[0].prec, CIC_TPREC_MPFR);
    assert_int_equal(c.xf[0].expect, CIC_VERDICT_EQUIVALENT);
    assert_true(c.xf[0].q_seed == 0);

    /* dit: eps 1e-6, tanh GELU, d_cond and final_layer allowed. */
    rc = cic_case_load_string(&c,
                              "[model]\nblock = \"dit\"\nd_model = 16\n"
                              "heads = 2\ntokens = 4\nsamples = 2\nlayers = 1\n",
                              "x/dit", &d);
    if (rc != CIC_OK)
        fail_msg("rc %d: %s", rc, d.msg);
    assert_string_equal(c.name, "dit");
    cic_assert_close(c.model.eps, 1e-6, 0, 0);
    assert_int_equal(c.model.act, CIC_ACT_GELU_TANH);
    assert_int_equal(c.model.d_cond, 16);
    assert_true(c.model.final_layer);
    rc = cic_case_load_string(&c,
                              "[model]\nblock = \"dit\"\nd_model = 16\n"
                              "heads = 2\ntokens = 4\nsamples = 2\nlayers = 1\n"
                              "d_cond = 24\nfinal_layer = false\n"
                              "[[transforms]]\nname = \"r\"\n"
                              "kind = \"online-unrotate\"\n"
                              "q = \"identity\"\n",
                              "x/dit.toml", &d);
    if (rc != CIC_OK)
        fail_msg("rc %d: %s", rc, d.msg);
    assert_int_equal(c.model.d_cond, 24);
    assert_false(c.model.final_layer);
    assert_int_equal(c.xf[0].kind, CIC_XFORM_ONLINE_UNROTATE);
    assert_int_equal(c.xf[0].q, CIC_Q_IDENTITY);
    assert_int_equal(c.xf[0].stream, CIC_STREAM_CENTERED);
    assert_false(c.xf[0].fast);
    assert_int_equal(c.xf[0].expect, CIC_VERDICT_EQUIVALENT);
}

/* The four adaLN strategies on a dit block, with their defaults. */
static const char *dit_case =
    "[model]\n"
    "block = \"dit\"\n"
    "d_model = 32\n"
    "heads = 4\n"
    "tokens = 8\n"
    "samples = 4\n"
    "layers = 2\n"
    "d_cond = 16\n"
    "[[transforms]]\n" /* line 9 */
    "name = \"sf\"\n"
    "kind = \"static-fold\"\n"
    "q = \"random\"\n"
    "[[transforms]]\n" /* line 13 */
    "name = \"sf3\"\n"
    "kind = \"static-fold\"\n"
    "q = \"hadamard\"\n"
    "seed = 11\n"
    "calibration = 3\n"
    "stream = \"mean-preserving\"\n"
    "expect = \"equivalent\"\n"
    "precision = \"f32\"\n"
    "[[transforms]]\n"
    "name = \"ou\"\n"
    "kind = \"online-unrotate\"\n"
    "q = \"random\"\n"
    "stream = \"mean-preserving\"\n"
    "[[transforms]]\n"
    "name = \"ou-fast\"\n"
    "kind = \"online-unrotate\"\n"
    "q = \"hadamard\"\n"
    "fast = true\n"
    "stream = \"centered\"\n"
    "[[transforms]]\n"
    "name = \"psf\"\n"
    "kind = \"per-sample-fold\"\n"
    "q = \"identity\"\n"
    "precision = \"f64\"\n"
    "[[transforms]]\n"
    "name = \"br\"\n"
    "kind = \"branch-rotate\"\n"
    "q = \"hadamard\"\n"
    "seed = 5\n"
    "fast = true\n"
    "expect = \"broken\"\n"
    "[[transforms]]\n"
    "name = \"br-dense\"\n"
    "kind = \"branch-rotate\"\n"
    "q = \"random\"\n"
    "fast = false\n"
    "[[gates]]\n"
    "transform = \"sf\"\n"
    "metric = \"ce_residual\"\n"
    "max = inf\n";

static void test_dit_strategies(void **state)
{
    static cic_case c;
    cic_diag d;
    int rc, i;
    (void)state;
    rc = cic_case_load_string(&c, dit_case, "dit-case.toml", &d);
    if (rc != CIC_OK)
        fail_msg("rc %d: %d:%d: %s", rc, d.line, d.column, d.msg);
    assert_int_equal(c.model.block, CIC_BLOCK_DIT);
    cic_assert_close(c.model.eps, 1e-6, 0, 0);
    assert_int_equal(c.model.act, CIC_ACT_GELU_TANH);
    assert_int_equal(c.model.d_cond, 16);
    assert_true(c.model.final_layer);
    assert_int_equal(c.n_xf, 7);
    for (i = 0; i < c.n_xf; i++) {
        assert_int_equal(c.xf[i].after, -1);
        assert_int_equal(c.xf[i].mistake, CIC_MISTAKE_NONE);
    }
    /* static-fold: defaults; expect defaults to broken. */
    assert_string_equal(c.xf[0].name, "sf");
    assert_int_equal(c.xf[0].kind, CIC_XFORM_STATIC_FOLD);
    assert_int_equal(c.xf[0].line, 9);
    assert_int_equal(c.xf[0].q, CIC_Q_RANDOM);
    assert_true(c.xf[0].q_seed == 0);
    assert_int_equal(c.xf[0].prec, CIC_TPREC_MPFR);
    assert_int_equal(c.xf[0].stream, CIC_STREAM_CENTERED);
    assert_false(c.xf[0].fast);
    assert_int_equal(c.xf[0].calibration, 0);
    assert_int_equal(c.xf[0].expect, CIC_VERDICT_BROKEN);
    /* static-fold with everything set. */
    assert_int_equal(c.xf[1].kind, CIC_XFORM_STATIC_FOLD);
    assert_int_equal(c.xf[1].line, 13);
    assert_int_equal(c.xf[1].q, CIC_Q_HADAMARD);
    assert_true(c.xf[1].q_seed == 11);
    assert_int_equal(c.xf[1].calibration, 3); /* samples - 1 */
    assert_int_equal(c.xf[1].stream, CIC_STREAM_MEAN_PRESERVING);
    assert_int_equal(c.xf[1].expect, CIC_VERDICT_EQUIVALENT);
    assert_int_equal(c.xf[1].prec, CIC_TPREC_F32);
    /* online-unrotate */
    assert_int_equal(c.xf[2].kind, CIC_XFORM_ONLINE_UNROTATE);
    assert_int_equal(c.xf[2].q, CIC_Q_RANDOM);
    assert_int_equal(c.xf[2].stream, CIC_STREAM_MEAN_PRESERVING);
    assert_false(c.xf[2].fast);
    assert_int_equal(c.xf[2].calibration, 0);
    assert_int_equal(c.xf[2].expect, CIC_VERDICT_EQUIVALENT);
    assert_int_equal(c.xf[3].kind, CIC_XFORM_ONLINE_UNROTATE);
    assert_int_equal(c.xf[3].q, CIC_Q_HADAMARD);
    assert_true(c.xf[3].fast);
    assert_int_equal(c.xf[3].stream, CIC_STREAM_CENTERED);
    /* per-sample-fold */
    assert_int_equal(c.xf[4].kind, CIC_XFORM_PER_SAMPLE_FOLD);
    assert_int_equal(c.xf[4].q, CIC_Q_IDENTITY);
    assert_int_equal(c.xf[4].prec, CIC_TPREC_F64);
    assert_int_equal(c.xf[4].stream, CIC_STREAM_CENTERED);
    assert_false(c.xf[4].fast);
    assert_int_equal(c.xf[4].expect, CIC_VERDICT_EQUIVALENT);
    /* branch-rotate: its stream is not rotated, stream stays at the
     * default. */
    assert_int_equal(c.xf[5].kind, CIC_XFORM_BRANCH_ROTATE);
    assert_int_equal(c.xf[5].q, CIC_Q_HADAMARD);
    assert_true(c.xf[5].q_seed == 5);
    assert_true(c.xf[5].fast);
    assert_int_equal(c.xf[5].stream, CIC_STREAM_CENTERED);
    assert_int_equal(c.xf[5].expect, CIC_VERDICT_BROKEN);
    assert_int_equal(c.xf[6].kind, CIC_XFORM_BRANCH_ROTATE);
    assert_false(c.xf[6].fast);
    assert_int_equal(c.xf[6].expect, CIC_VERDICT_EQUIVALENT);
    assert_int_equal(c.n_gates, 1);
    assert_string_equal(c.gates[0].transform, "sf");

    /* samples = 1: static-fold is legal (pointless, but no error). */
    rc = cic_case_load_string(&c,
                              "[model]\nblock = \"dit\"\nd_model = 8\n"
                              "heads = 2\ntokens = 4\nsamples = 1\nlayers = 1\n"
                              "[[transforms]]\nname = \"s\"\n"
                              "kind = \"static-fold\"\nq = \"identity\"\n"
                              "calibration = 0\n",
                              "one.toml", &d);
    if (rc != CIC_OK)
        fail_msg("rc %d: %d:%d: %s", rc, d.line, d.column, d.msg);
    assert_int_equal(c.model.samples, 1);
    assert_int_equal(c.xf[0].calibration, 0);
    assert_int_equal(c.xf[0].expect, CIC_VERDICT_BROKEN);

    /* The same calibration with samples = 1 but index 1 is refused at the
     * value. */
    rc = cic_case_load_string(&c,
                              "[model]\nblock = \"dit\"\nd_model = 8\n"
                              "heads = 2\ntokens = 4\nsamples = 1\nlayers = 1\n"
                              "[[transforms]]\nname = \"s\"\n"
                              "kind = \"static-fold\"\nq = \"identity\"\n"
                              "calibration = 1\n",
                              "one.toml", &d);
    assert_int_equal(rc, CIC_EINPUT);
    assert_int_equal(d.line, 12);
    assert_int_equal(d.column, 15);
    assert_non_null(strstr(d.msg, "0 .. 0 (samples = 1)"));

    /* The missing-kind hint on a dit block names the adaLN strategies. */
    rc = cic_case_load_string(&c,
                              "[model]\nblock = \"dit\"\nd_model = 8\n"
                              "heads = 2\ntokens = 4\nsamples = 1\nlayers = 1\n"
                              "[[transforms]]\nname = \"s\"\n",
                              "k.toml", &d);
    assert_int_equal(rc, CIC_EINPUT);
    assert_non_null(strstr(d.msg, "static-fold, online-unrotate, "
                                  "per-sample-fold or branch-rotate"));
}

/* hadamard_base: loaded as given on rotate and the adaLN kinds with q =
 * "hadamard", 0 (automatic) when absent; whether K fits the widths is
 * cic_xform_check's, not the loader's (12 does not fit d_model = 256 but
 * loads, and so does the upper bound 65536); refusals are in
 * tests/malformed (xform-*hadamard-base*). */
static void test_hadamard_base(void **state)
{
    static cic_case c;
    cic_diag d;
    int rc;
    (void)state;
    rc = cic_case_load_string(&c,
                              "[model]\nblock = \"preln\"\nd_model = 256\nheads = 4\n"
                              "tokens = 2\nsamples = 1\nlayers = 1\n"
                              "[[transforms]]\nname = \"a\"\nkind = \"rotate\"\n"
                              "q = \"hadamard\"\n"
                              "[[transforms]]\nname = \"b\"\nkind = \"rotate\"\n"
                              "q = \"hadamard\"\nhadamard_base = 32\n"
                              "[[transforms]]\nname = \"c\"\nkind = \"rotate\"\n"
                              "q = \"hadamard\"\nhadamard_base = 12\n"
                              "[[transforms]]\nname = \"e\"\nkind = \"rotate\"\n"
                              "q = \"hadamard\"\nhadamard_base = 65536\n"
                              "[[transforms]]\nname = \"f\"\nkind = \"rotate\"\n"
                              "q = \"random\"\n",
                              "hb.toml", &d);
    if (rc != CIC_OK)
        fail_msg("rc %d: %d:%d: %s", rc, d.line, d.column, d.msg);
    assert_int_equal(c.n_xf, 5);
    assert_int_equal(c.xf[0].hadamard_base, 0);
    assert_int_equal(c.xf[1].hadamard_base, 32);
    assert_int_equal(c.xf[2].hadamard_base, 12);
    assert_int_equal(c.xf[3].hadamard_base, 65536);
    assert_int_equal(c.xf[4].hadamard_base, 0);
    rc = cic_case_load_string(&c,
                              "[model]\nblock = \"dit\"\nd_model = 64\nheads = 4\n"
                              "tokens = 2\nsamples = 2\nlayers = 1\n"
                              "[[transforms]]\nname = \"br\"\nkind = \"branch-rotate\"\n"
                              "q = \"hadamard\"\nfast = true\nhadamard_base = 32\n"
                              "[[transforms]]\nname = \"mp\"\nkind = \"per-sample-fold\"\n"
                              "q = \"hadamard\"\nstream = \"mean-preserving\"\n"
                              "hadamard_base = 4\n"
                              "[[transforms]]\nname = \"sf\"\nkind = \"static-fold\"\n"
                              "q = \"random\"\n",
                              "hb-dit.toml", &d);
    if (rc != CIC_OK)
        fail_msg("rc %d: %d:%d: %s", rc, d.line, d.column, d.msg);
    assert_int_equal(c.xf[0].hadamard_base, 32);
    assert_true(c.xf[0].fast);
    assert_int_equal(c.xf[1].hadamard_base, 4);
    assert_int_equal(c.xf[1].stream, CIC_STREAM_MEAN_PRESERVING);
    assert_int_equal(c.xf[2].hadamard_base, 0);
    /* 65537 is past the largest d_model */
    rc = cic_case_load_string(&c,
                              "[model]\nblock = \"preln\"\nd_model = 256\nheads = 4\n"
                              "tokens = 2\nsamples = 1\nlayers = 1\n"
                              "[[transforms]]\nname = \"a\"\nkind = \"rotate\"\n"
                              "q = \"hadamard\"\nhadamard_base = 65537\n",
                              "hb.toml", &d);
    assert_int_equal(rc, CIC_EINPUT);
    assert_int_equal(d.line, 12);
    assert_int_equal(d.column, 17);
    assert_non_null(strstr(d.msg, "'hadamard_base' in [[transforms]] entry 1 is 65537, out of "
                                  "range: must be 0 .. 65536"));
}

/* Values exactly at the limits load. */
static void test_boundaries(void **state)
{
    static cic_case c;
    cic_diag d;
    int rc;
    (void)state;
    rc = cic_case_load_string(
        &c,
        "[model]\nblock = \"preln\"\nd_model = 6\nheads = 6\ntokens = 1\n"
        "samples = 64\nlayers = 1\nmlp_ratio = 0.5\nseed = 9223372036854775807\n"
        "[model.weights]\noutlier_channels = 6\n"
        "[engines]\nmpfr_prec = 1024\n",
        "b.toml", &d);
    if (rc != CIC_OK)
        fail_msg("rc %d: %s", rc, d.msg);
    assert_int_equal(c.model.d_mlp, 3);
    assert_int_equal(c.model.samples, CIC_MAX_SAMPLES);
    assert_int_equal(c.model.outlier_channels, 6);
    assert_true(c.model.seed == (uint64_t)INT64_MAX);
    rc = cic_case_load_string(
        &c,
        "[model]\nblock = \"preln\"\nd_model = 6\nheads = 1\ntokens = 2048\n"
        "samples = 1\nlayers = 1\n[engines]\nmpfr_prec = 64\n",
        "b.toml", &d);
    if (rc != CIC_OK)
        fail_msg("rc %d: %s", rc, d.msg);
    assert_int_equal(c.mpfr_prec, 64);
}

static void test_fixtures(void **state)
{
    static cic_case c;
    cic_diag d;
    char path[1024];
    int rc;
    (void)state;
    cic_test_path(path, sizeof path, "tests/fixtures/valid-preln.toml");
    rc = cic_case_load(&c, path, &d);
    if (rc != CIC_OK)
        fail_msg("%s: rc %d: %d:%d: %s", path, rc, d.line, d.column, d.msg);
    assert_string_equal(c.name, "valid-preln");
    assert_int_equal(c.model.block, CIC_BLOCK_PRELN);
    assert_int_equal(c.model.d_model, 32);
    assert_int_equal(c.model.heads, 4);
    assert_int_equal(c.model.tokens, 8);
    assert_int_equal(c.model.samples, 2);
    assert_int_equal(c.model.layers, 2);
    assert_int_equal(c.n_xf, 4);
    assert_int_equal(c.xf[1].after, 0);
    assert_int_equal(c.xf[2].after, 0);
    assert_string_equal(cic_xform_mistake_name(&c.xf[3]), "skip-mean-bake");
    assert_int_equal(c.n_gates, 3);
    assert_true(cic_case_memory_estimate(&c) < ((uint64_t)64 << 20));

    cic_test_path(path, sizeof path, "tests/fixtures/valid-rmsnorm.toml");
    rc = cic_case_load(&c, path, &d);
    if (rc != CIC_OK)
        fail_msg("%s: rc %d: %d:%d: %s", path, rc, d.line, d.column, d.msg);
    assert_string_equal(c.name, "valid-rmsnorm");
    assert_int_equal(c.model.block, CIC_BLOCK_RMSNORM);
    assert_int_equal(c.model.d_model, 32);
    assert_int_equal(c.model.d_mlp, 80);
    assert_int_equal(c.model.act, CIC_ACT_SILU);
    assert_false(c.f32_openblas);
    assert_true(c.f32_fixed);
    assert_int_equal(c.n_xf, 4);
    assert_string_equal(cic_xform_mistake_name(&c.xf[2]), "skip-attn-out");
    assert_string_equal(cic_xform_mistake_name(&c.xf[3]), "center-embeddings");
    for (int i = 0; i < c.n_xf; i++) {
        assert_int_equal(c.xf[i].stream, CIC_STREAM_CENTERED);
        assert_false(c.xf[i].fast);
        assert_int_equal(c.xf[i].calibration, 0);
    }

    cic_test_path(path, sizeof path, "tests/fixtures/valid-dit.toml");
    rc = cic_case_load(&c, path, &d);
    if (rc != CIC_OK)
        fail_msg("%s: rc %d: %d:%d: %s", path, rc, d.line, d.column, d.msg);
    assert_string_equal(c.name, "valid-dit");
    assert_int_equal(c.model.block, CIC_BLOCK_DIT);
    assert_int_equal(c.model.d_model, 32);
    assert_int_equal(c.model.heads, 4);
    assert_int_equal(c.model.tokens, 8);
    assert_int_equal(c.model.samples, 3);
    assert_int_equal(c.model.layers, 2);
    assert_int_equal(c.model.d_cond, 16);
    assert_int_equal(c.model.d_mlp, 128);
    assert_true(c.model.final_layer);
    cic_assert_close(c.model.eps, 1e-6, 0, 0);
    assert_int_equal(c.model.act, CIC_ACT_GELU_TANH);
    assert_int_equal(c.n_xf, 9);
    {
        /* every strategy, both streams, both fast variants */
        int kinds[CIC_XFORM_COUNT] = {0}, streams[CIC_STREAM_COUNT] = {0};
        int fast_online = 0, fast_branch = 0, i;
        for (i = 0; i < c.n_xf; i++) {
            kinds[c.xf[i].kind]++;
            if (c.xf[i].kind != CIC_XFORM_BRANCH_ROTATE)
                streams[c.xf[i].stream]++;
            fast_online += c.xf[i].fast &&
                           c.xf[i].kind == CIC_XFORM_ONLINE_UNROTATE;
            fast_branch += c.xf[i].fast &&
                           c.xf[i].kind == CIC_XFORM_BRANCH_ROTATE;
            assert_int_equal(c.xf[i].after, -1);
        }
        assert_true(kinds[CIC_XFORM_STATIC_FOLD] >= 1);
        assert_true(kinds[CIC_XFORM_ONLINE_UNROTATE] >= 1);
        assert_true(kinds[CIC_XFORM_PER_SAMPLE_FOLD] >= 1);
        assert_true(kinds[CIC_XFORM_BRANCH_ROTATE] >= 1);
        assert_true(streams[CIC_STREAM_CENTERED] >= 1);
        assert_true(streams[CIC_STREAM_MEAN_PRESERVING] >= 1);
        assert_int_equal(fast_online, 1);
        assert_int_equal(fast_branch, 1);
    }
    assert_int_equal(c.xf[0].kind, CIC_XFORM_STATIC_FOLD);
    assert_int_equal(c.xf[0].calibration, 1);
    assert_int_equal(c.xf[0].expect, CIC_VERDICT_BROKEN);
    assert_int_equal(c.xf[1].expect, CIC_VERDICT_BROKEN);
    assert_int_equal(c.xf[1].stream, CIC_STREAM_MEAN_PRESERVING);
    assert_int_equal(c.xf[4].kind, CIC_XFORM_ONLINE_UNROTATE);
    assert_true(c.xf[4].fast);
    assert_int_equal(c.xf[8].kind, CIC_XFORM_BRANCH_ROTATE);
    assert_true(c.xf[8].fast);
    assert_int_equal(c.n_gates, 2);
    assert_true(cic_case_memory_estimate(&c) < ((uint64_t)64 << 20));
}

static void test_missing_file(void **state)
{
    static cic_case c;
    cic_diag d;
    char path[1024];
    int rc;
    (void)state;
    cic_test_path(path, sizeof path, "tests/fixtures/no-such-case.toml");
    rc = cic_case_load(&c, path, &d);
    assert_int_equal(rc, CIC_EINPUT);
    assert_int_equal(d.line, 0);
    assert_string_equal(d.file, path);
    assert_non_null(strstr(d.msg, "cannot open"));
    /* A directory is unreadable as a file. */
    cic_test_path(path, sizeof path, "tests/fixtures");
    rc = cic_case_load(&c, path, &d);
    assert_int_equal(rc, CIC_EINPUT);
    assert_int_equal(d.line, 0);
    /* NULL text and an empty string. */
    assert_int_equal(cic_case_load_string(&c, NULL, "x", &d), CIC_EINPUT);
    assert_int_equal(cic_case_load_string(&c, "", "x", &d), CIC_EINPUT);
    assert_int_equal(d.line, 1);
    assert_non_null(strstr(d.msg, "empty"));
}

static void test_name_tables(void **state)
{
    int n = 0;
    (void)state;
    assert_string_equal(CIC_BLOCK_NAME[CIC_BLOCK_DIT], "dit");
    assert_string_equal(CIC_ACT_NAME[CIC_ACT_GELU_TANH], "gelu-tanh");
    assert_string_equal(CIC_XFORM_NAME[CIC_XFORM_FOLD_RMSNORM_GAMMA],
                        "fold-rmsnorm-gamma");
    assert_string_equal(cic_xform_desc_of(CIC_XFORM_FOLD_RMSNORM_GAMMA)->mistakes[0],
                        "center-embeddings");
    assert_string_equal(CIC_VERDICT_NAME[CIC_VERDICT_INCONCLUSIVE],
                        "inconclusive");
    assert_string_equal(CIC_READOUT_NAME[CIC_READOUT_RESIDUAL], "residual");
    assert_string_equal(CIC_Q_NAME[CIC_Q_HADAMARD], "hadamard");
    assert_string_equal(CIC_TPREC_NAME[CIC_TPREC_F32], "f32");
    assert_string_equal(CIC_DIST_NAME[CIC_DIST_UNIFORM], "uniform");
    assert_string_equal(CIC_XFORM_NAME[CIC_XFORM_STATIC_FOLD], "static-fold");
    assert_string_equal(CIC_XFORM_NAME[CIC_XFORM_ONLINE_UNROTATE],
                        "online-unrotate");
    assert_string_equal(CIC_XFORM_NAME[CIC_XFORM_PER_SAMPLE_FOLD],
                        "per-sample-fold");
    assert_string_equal(CIC_XFORM_NAME[CIC_XFORM_BRANCH_ROTATE],
                        "branch-rotate");
    assert_string_equal(CIC_STREAM_NAME[CIC_STREAM_CENTERED], "centered");
    assert_string_equal(CIC_STREAM_NAME[CIC_STREAM_MEAN_PRESERVING],
                        "mean-preserving");
    while (CIC_GATE_METRICS[n])
        n++;
    assert_int_equal(n, 13);
    assert_string_equal(CIC_GATE_METRICS[3], "ulp_row.p99");
}

/* Every name of a table of n names is a non-empty string, distinct from the
 * others (the length itself is checked by a static_assert where the table
 * is defined). */
static bool names_ok(const char *const *t, int n, const char *what)
{
    int i, j;
    for (i = 0; i < n; i++) {
        if (!t[i] || !t[i][0]) {
            print_message("%s: name %d of %d is %s\n", what, i, n,
                          t[i] ? "empty" : "NULL");
            return false;
        }
        for (j = 0; j < i; j++)
            if (strcmp(t[i], t[j]) == 0) {
                print_message("%s: names %d and %d are both '%s'\n", what, j, i,
                              t[i]);
                return false;
            }
    }
    return true;
}

/* A kind's mistake names: numbered 1.. without a hole (NULL only at the
 * end), each non-empty, distinct within the kind and not "none" (the
 * name of no mistake). */
static bool mistakes_ok(const cic_xform_desc *d)
{
    int n = 0, m;
    while (n < CIC_XFORM_MAX_MISTAKES && d->mistakes[n])
        n++;
    for (m = n; m < CIC_XFORM_MAX_MISTAKES; m++)
        if (d->mistakes[m]) {
            print_message("%s: mistake %d after a hole at %d\n", d->name, m + 1, n + 1);
            return false;
        }
    for (m = 0; m < n; m++)
        if (strcmp(d->mistakes[m], "none") == 0) {
            print_message("%s: mistake %d is called 'none'\n", d->name, m + 1);
            return false;
        }
    return names_ok(d->mistakes, n, d->name);
}

static void test_name_tables_complete(void **state)
{
    static const char *const dup[] = {"preln", "rmsnorm", "preln"};
    static const char *const hole[] = {"preln", NULL, "dit"};
    static const char *const empty[] = {"preln", ""};
    static const cic_xform_desc m_dup = {.name = "dup", .mistakes = {"a", "b", "a"}},
                                m_hole = {.name = "hole", .mistakes = {[1] = "b"}},
                                m_none = {.name = "none", .mistakes = {"a", "none"}},
                                m_empty = {.name = "empty", .mistakes = {"a", ""}};
    int k;
    (void)state;
    assert_true(names_ok(CIC_BLOCK_NAME, CIC_BLOCK_COUNT, "block"));
    assert_true(names_ok(CIC_ACT_NAME, CIC_ACT_COUNT, "activation"));
    assert_true(names_ok(CIC_DIST_NAME, CIC_DIST_COUNT, "dist"));
    assert_true(names_ok(CIC_XFORM_NAME, CIC_XFORM_COUNT, "xform"));
    assert_true(names_ok(CIC_Q_NAME, CIC_Q_COUNT, "q"));
    assert_true(names_ok(CIC_TPREC_NAME, CIC_TPREC_COUNT, "precision"));
    for (k = 0; k < CIC_XFORM_COUNT; k++)
        assert_true(mistakes_ok(cic_xform_desc_of((enum cic_xform_kind)k)));
    assert_true(names_ok(CIC_VERDICT_NAME, CIC_VERDICT_COUNT, "verdict"));
    assert_true(names_ok(CIC_READOUT_NAME, CIC_READOUT_COUNT, "readout"));
    assert_true(names_ok(CIC_STREAM_NAME, CIC_STREAM_COUNT, "stream"));
    assert_true(names_ok(CIC_VERDICT_ENGINE_NAME, CIC_VERDICT_ENGINE_COUNT,
                         "verdict engine"));
    assert_true(names_ok(CIC_AXIS_NAME, CIC_AXIS_COUNT, "sweep axis"));
    assert_true(names_ok(CIC_INPUT_NAME, CIC_INPUT_COUNT, "input"));
    assert_true(names_ok(CIC_ROPE_NAME, CIC_ROPE_COUNT, "rope"));
    assert_true(names_ok(CIC_LOWP_FROM_NAME, CIC_LOWP_FROM_COUNT, "lowp from"));
    assert_true(names_ok(CIC_ENGINE_NAME, CIC_ENGINE_COUNT, "engine"));
    assert_true(names_ok(CIC_MATMUL_NAME, CIC_MATMUL_COUNT, "matmul"));
    /* the check itself catches a planted fault */
    assert_false(names_ok(dup, 3, "planted duplicate"));
    assert_false(names_ok(hole, 3, "planted NULL"));
    assert_false(names_ok(empty, 2, "planted empty name"));
    assert_false(mistakes_ok(&m_dup));
    assert_false(mistakes_ok(&m_hole));
    assert_false(mistakes_ok(&m_none));
    assert_false(mistakes_ok(&m_empty));
}

static void test_memory_estimate(void **state)
{
    static cic_case c, c2;
    cic_diag d;
    uint64_t m0, m;
    (void)state;
    assert_int_equal(cic_case_load_string(&c, minimal_preln, "m", &d), CIC_OK);
    m0 = cic_case_memory_estimate(&c);
    assert_true(m0 > 0 && m0 < ((uint64_t)16 << 20));
    c2 = c;
    c2.model.layers = 2;
    assert_true(cic_case_memory_estimate(&c2) > m0);
    c2 = c;
    c2.n_xf = 3;
    assert_true(cic_case_memory_estimate(&c2) > m0);
    c2 = c;
    c2.mpfr_prec = 1024;
    assert_true(cic_case_memory_estimate(&c2) > m0);
    c2 = c;
    c2.model.tokens = 4096;
    assert_true(cic_case_memory_estimate(&c2) > m0);
    /* Out-of-contract values saturate instead of overflowing. */
    c2 = c;
    c2.model.d_model = INT_MAX;
    c2.model.d_mlp = INT_MAX;
    c2.model.layers = INT_MAX;
    c2.model.tokens = INT_MAX;
    c2.model.samples = INT_MAX;
    c2.mpfr_prec = INT_MAX;
    c2.n_xf = INT_MAX;
    m = cic_case_memory_estimate(&c2);
    assert_true(m == UINT64_MAX);
    c2.model.d_model = -5;
    c2.model.layers = INT_MIN;
    (void)cic_case_memory_estimate(&c2);
    assert_true(cic_case_memory_estimate(NULL) == 0);
    /* every adaLN strategy through dgemm holds its weights as doubles, not
     * as MPFR values (xform/adaln.c) */
    assert_int_equal(cic_case_load_string(&c, dit_case, "dit.toml", &d), CIC_OK);
    for (int k = 0; k < c.n_xf; k++) {
        char why[1024];
        c2 = c;
        c2.n_xf = 1;
        c2.xf[0] = c.xf[k];
        c2.xf[0].after = -1;
        c2.xf[0].prec = CIC_TPREC_F64_BLAS;
        cic_case_memory_explain(why, sizeof why, &c2);
        if (!strstr(why, "0 of them also as MPFR numbers") || !strstr(why, "and 1 as doubles"))
            fail_msg("transform %s at f64-openblas: %s", c.xf[k].name, why);
        m = cic_case_memory_estimate(&c2);
        c2.xf[0].prec = CIC_TPREC_MPFR;
        assert_true(m < cic_case_memory_estimate(&c2));
    }
    /* the last transform of the original takes its float32 weights
     * (pipeline/stages.c): a lone one runs without them beside it, the
     * first of two with them */
    {
        char why[1024];
        uint64_t w1;
        c2 = c;
        c2.n_xf = 1;
        c2.xf[0].after = -1;
        cic_case_memory_explain(why, sizeof why, &c2);
        if (strstr(why, "the original and"))
            fail_msg("one transform: %s", why);
        w1 = cic_case_memory_estimate(&c2);
        c2.n_xf = 2;
        c2.xf[1] = c2.xf[0];
        cic_case_memory_explain(why, sizeof why, &c2);
        if (!strstr(why, "float32 for the original and 1 transformed"))
            fail_msg("two transforms of the original: %s", why);
        assert_true(cic_case_memory_estimate(&c2) > w1);
        c2.n_xf = 0;
        cic_case_memory_explain(why, sizeof why, &c2);
        if (!strstr(why, "float32 for the original and 0 transformed"))
            fail_msg("no transform: %s", why);
    }
}

/* Every error of a file is reported (up to CIC_DIAG_MAX), in file order, each
 * once: independent mistakes in several sections, no consequence of one
 * mistake reported as another. */
static void test_all_errors(void **state)
{
    static cic_case c;
    static cic_diag d;
    char *text, *p;
    int rc, i;
    (void)state;
    rc = cic_case_load_string(&c,
                              "[model]\n"                       /* 1 */
                              "block = \"prln\"\n"              /* 2 */
                              "d_model = 30\n"                  /* 3 */
                              "heads = 4\n"                     /* 4 */
                              "tokens = 0\n"                    /* 5 */
                              "samples = 2\n"                   /* 6 */
                              "layers = 2\n"                    /* 7 */
                              "eps = 1e-46\n"                   /* 8 */
                              "[model.weights]\n"               /* 9 */
                              "std = 1e39\n"                    /* 10 */
                              "[engines]\n"                     /* 11 */
                              "mpfr_prec = 3\n"                 /* 12 */
                              "[[transforms]]\n"                /* 13 */
                              "name = \"a\"\n"                  /* 14 */
                              "kind = \"rotat\"\n"              /* 15 */
                              "[[transforms]]\n"                /* 16 */
                              "name = \"b\"\n"                  /* 17 */
                              "kind = \"rotate\"\n"             /* 18 */
                              "q = \"random\"\n"                /* 19 */
                              "after = \"a\"\n"                 /* 20 */
                              "precision = \"f16\"\n"           /* 21 */
                              "[[gates]]\n"                     /* 22 */
                              "transform = \"a\"\n"             /* 23 */
                              "metric = \"x\"\n"                /* 24 */
                              "max = -1\n",                     /* 25 */
                              "t.toml", &d);
    assert_int_equal(rc, CIC_EINPUT);
    if (cic_diag_count(&d) != 10)
        fail_msg("%d errors, want 10: %s:%d: %s\n%s", cic_diag_count(&d), d.file, d.line,
                 d.msg, d.more);
    assert_int_equal(d.line, 2); /* block first: file order */
    assert_non_null(strstr(d.msg, "bad value 'prln' for 'block'"));
    {
        /* one line each, in this order (the gate's transform 'a' exists: a
         * transform with an error keeps its name) */
        static const char *const want[] = {
            "t.toml:4:9: d_model = 30 is not divisible by heads = 4",
            "t.toml:5:10: 'tokens' in [model] is 0",
            "t.toml:8:7: 'eps' = 1e-46 is 0 in binary32",
            "t.toml:10:7: 'std' = 1e+39 in [model.weights] is above",
            "t.toml:12:13: 'mpfr_prec' in [engines] is 3",
            "t.toml:15:8: bad value 'rotat' for 'kind'",
            "t.toml:21:13: bad value 'f16' for 'precision'",
            "t.toml:24:10: bad value 'x' for 'metric'",
            "t.toml:25:7: 'max' in [[gates]] entry 1 is -1"};
        const char *at = d.more;
        size_t k;
        for (k = 0; k < sizeof want / sizeof want[0]; k++) {
            const char *hit = strstr(at, want[k]);
            if (!hit || (hit != d.more && hit[-1] != '\n'))
                fail_msg("missing or out of order: %s\nin:\n%s", want[k], d.more);
            at = hit + 1;
        }
    }

    /* More than CIC_DIAG_MAX: the first 20 in file order kept, the rest
     * counted. 25 unknown keys in [model] (plus what is missing). */
    text = malloc(4096);
    assert_non_null(text);
    p = text + sprintf(text, "[model]\nblock = \"preln\"\nd_model = 8\nheads = 2\n"
                             "tokens = 2\nsamples = 1\nlayers = 1\n");
    for (i = 0; i < 25; i++)
        p += sprintf(p, "unknown%02d = 1\n", i);
    rc = cic_case_load_string(&c, text, "t.toml", &d);
    free(text);
    assert_int_equal(rc, CIC_EINPUT);
    assert_int_equal(cic_diag_count(&d), 25);
    assert_non_null(strstr(d.msg, "unknown key 'unknown00'"));
    assert_non_null(strstr(d.more, "unknown key 'unknown19'"));
    assert_null(strstr(d.more, "unknown key 'unknown20'"));
    {
        char buf[16384];
        FILE *f = fmemopen(buf, sizeof buf, "w");
        assert_non_null(f);
        cic_diag_print(f, &d);
        fclose(f);
        assert_non_null(strstr(buf, "t.toml: ... and 5 more errors\n"));
    }

    /* a valid file afterwards reports nothing left over */
    rc = cic_case_load_string(&c, "[model]\nblock = \"preln\"\nd_model = 8\nheads = 2\n"
                                  "tokens = 2\nsamples = 1\nlayers = 1\n",
                              "t.toml", &d);
    assert_int_equal(rc, CIC_OK);
}

/* The default name comes from the file name and is validated like a given
 * one (it becomes reports/<name>/ and reference/<name>.json). */
static void test_name_from_file(void **state)
{
    static cic_case c;
    cic_diag d;
    char path[1024];
    static const char body[] = "[model]\nblock = \"preln\"\nd_model = 8\nheads = 2\n"
                               "tokens = 2\nsamples = 1\nlayers = 1\n";
    (void)state;
    cic_test_write_text(cic_test_tmp_path(path, sizeof path, "a\nb.toml"), body);
    assert_int_equal(cic_case_load(&c, path, &d), CIC_EINPUT);
    assert_int_equal(d.line, 1);
    assert_non_null(strstr(d.msg, "'a\\x0ab'"));
    assert_non_null(strstr(d.msg, "add name = "));
    cic_test_write_text(cic_test_tmp_path(path, sizeof path, ".hidden.toml"), body);
    assert_int_equal(cic_case_load(&c, path, &d), CIC_EINPUT);
    assert_non_null(strstr(d.msg, "'.hidden'"));
    cic_test_write_text(cic_test_tmp_path(path, sizeof path, "good-1.2.toml"), body);
    assert_int_equal(cic_case_load(&c, path, &d), CIC_OK);
    assert_string_equal(c.name, "good-1.2");
}

/* Diagnostics are complete sentences with the allowed values. */
static void test_messages(void **state)
{
    static cic_case c;
    cic_diag d;
    int rc;
    (void)state;
    rc = cic_case_load_string(&c,
                              "[model]\nblock = \"preln\"\ndmodel = 32\n",
                              "t.toml", &d);
    assert_int_equal(rc, CIC_EINPUT);
    /* every error, in file order: the keys missing from [model] (at its
     * header, line 1; d_model is not among them, it was misspelt), then the
     * misspelling */
    assert_int_equal(d.line, 1);
    assert_int_equal(d.column, 1);
    assert_string_equal(d.msg, "missing required key 'heads' in [model]");
    assert_int_equal(cic_diag_count(&d), 5);
    assert_non_null(strstr(d.more, "t.toml:1:1: missing required key 'tokens' in [model]\n"
                                   "t.toml:1:1: missing required key 'samples' in [model]\n"
                                   "t.toml:1:1: missing required key 'layers' in [model]\n"
                                   "t.toml:3:1: unknown key 'dmodel' in [model]; allowed: "
                                   "block, d_model, heads, mlp_ratio, tokens, samples, "
                                   "layers, eps, causal, activation, d_out, d_cond, "
                                   "final_layer, rope, rope_theta, kv_heads, qkv_bias, seed, weights, checkpoint; did you mean 'd_model'?\n"));
    assert_null(strstr(d.more, "'d_model'\n"));
    /* Memory: no limit at load; what the estimate is made of, for the
     * run's --max-memory refusal. */
    rc = cic_case_load_string(&c,
                              "[model]\nblock = \"preln\"\nd_model = 4096\n"
                              "heads = 32\ntokens = 8\nsamples = 2\n"
                              "layers = 64\n",
                              "t.toml", &d);
    assert_int_equal(rc, CIC_OK);
    {
        char why[512];
        cic_case_memory_explain(why, sizeof why, &c);
        /* 12,905,099,264 float32 weights (48.1 GiB), the largest, 4096 x
         * 16384, packed at the default 64 bits (16 bytes each, 1 GiB), as
         * |W| in float for the truth's radii (0.25 GiB) and its dgemm
         * slices (the 128 MiB budget, base/mpslice.h) */
        assert_non_null(strstr(why, "weights 49.5 GiB (12905099264 weights: float32 for the "
                                    "original and 0 transformed models held at once, 0 of "
                                    "them also as MPFR numbers at mpfr_prec 64"));
        assert_non_null(strstr(why, "activations 0.1 GiB (8 tokens x 2 samples)"));
    }
    /* A fold and a Hadamard rotation after it keep recipes (8 bytes a
     * weight each); a random rotation holds MPFR values, one through dgemm
     * doubles. The fold is rotated in place unless a later transform is
     * applied after it too; then both are held. */
    {
        static const char *const q[] = { "hadamard\"", "random\"",
                                         "random\"\nprecision = \"f64-openblas\"",
                                         "random\"\n[[transforms]]\nname = \"r1b\"\n"
                                         "kind = \"rotate\"\nafter = \"fold\"\n"
                                         "q = \"hadamard\"" };
        static const char *const want[] = {
            "1 transformed models held at once, 0 of them also as MPFR numbers at mpfr_prec 64 "
            "and 0 as doubles",
            "1 transformed models held at once, 1 of them also as MPFR numbers at mpfr_prec 64 "
            "and 0 as doubles",
            "1 transformed models held at once, 0 of them also as MPFR numbers at mpfr_prec 64 "
            "and 1 as doubles",
            "2 transformed models held at once, 1 of them also as MPFR numbers at mpfr_prec 64 "
            "and 0 as doubles" };
        int k;
        for (k = 0; k < 4; k++) {
            char text[640], why[512];
            snprintf(text, sizeof text,
                     "[model]\nblock = \"rmsnorm\"\nd_model = 64\nheads = 4\ntokens = 8\n"
                     "samples = 2\nlayers = 1\n[[transforms]]\nname = \"fold\"\n"
                     "kind = \"fold-rmsnorm-gamma\"\n[[transforms]]\nname = \"r1\"\n"
                     "kind = \"rotate\"\nafter = \"fold\"\nq = \"%s\n",
                     q[k]);
            rc = cic_case_load_string(&c, text, "t.toml", &d);
            assert_int_equal(rc, CIC_OK);
            cic_case_memory_explain(why, sizeof why, &c);
            if (!strstr(why, want[k]))
                fail_msg("%s: %s", q[k], why);
        }
    }
    /* An escaped key with a NUL and a quote does not break the message. */
    rc = cic_case_load_string(&c,
                              "\"a\\u0000'b\" = 1\n" /* key a<NUL>'b */
                              "[model]\nblock = \"preln\"\n",
                              "t.toml", &d);
    assert_int_equal(rc, CIC_EINPUT);
    assert_non_null(strstr(d.msg, "'a\\x00\\'b'"));
    /* A string with an embedded NUL is refused as a name. */
    rc = cic_case_load_string(&c, "name = \"a\\u0000b\"\n", "t.toml", &d);
    assert_int_equal(rc, CIC_EINPUT);
    /* after "missing the [model] table" at 1:1 */
    assert_non_null(strstr(d.more, "t.toml:1:8: 'name' in the top level ('a\\x00b') "
                                   "contains a control character"));
    /* A 200000-part dotted key would overflow the stack inside toml++: it
     * is refused before parsing. */
    {
        size_t n = 200000, i;
        char *deep = malloc(2 * n + 16), *p = deep;
        assert_non_null(deep);
        *p++ = '[';
        for (i = 0; i < n; i++) {
            *p++ = 'a';
            *p++ = '.';
        }
        strcpy(p - 1, "]\n");
        rc = cic_case_load_string(&c, deep, "t.toml", &d);
        free(deep);
        assert_int_equal(rc, CIC_EINPUT);
        assert_int_equal(d.line, 1);
        assert_non_null(strstr(d.msg, "dotted key"));
    }
    /* On error the output is zeroed. */
    assert_int_equal(c.n_xf, 0);
    assert_int_equal(c.model.d_model, 0);
}

/* The C API around toml++ on its own. */
static void test_toml_capi(void **state)
{
    cic_toml_doc *doc = NULL;
    cic_toml_error err;
    const cic_toml_node *root, *t, *v;
    const char *k, *s;
    size_t kl, sl;
    int64_t i64;
    double f;
    bool b;
    int l, c;
    const char *text = "z = 1\na = 'x'\n[t]\nf = 2.5\nb = true\n"
                       "arr = [1, 2]\n[[aot]]\nq = 1\n[[aot]]\nq = 2\n";
    (void)state;
    assert_int_equal(cic_toml_parse_string(&doc, text, strlen(text), "m.toml",
                                           &err),
                     CIC_TOML_OK);
    root = cic_toml_doc_root(doc);
    assert_int_equal(cic_toml_node_type(root), CIC_TOML_TABLE);
    assert_int_equal(cic_toml_table_size(root), 4);
    /* source order, not toml++'s sorted order */
    assert_int_equal(cic_toml_table_entry(root, 0, &k, &kl, &v, &l, &c),
                     CIC_TOML_OK);
    assert_string_equal(k, "z");
    assert_int_equal(l, 1);
    assert_int_equal(cic_toml_table_entry(root, 1, &k, &kl, &v, &l, &c),
                     CIC_TOML_OK);
    assert_string_equal(k, "a");
    assert_int_equal(cic_toml_get_string(v, &s, &sl), CIC_TOML_OK);
    assert_string_equal(s, "x");
    assert_int_equal(cic_toml_get_int(v, &i64), CIC_TOML_ETYPE);
    assert_int_equal(cic_toml_table_entry(root, 4, &k, &kl, &v, &l, &c),
                     CIC_TOML_ERANGE);
    t = cic_toml_table_get(root, "t");
    cic_toml_node_pos(t, &l, &c);
    assert_int_equal(l, 3);
    assert_int_equal(c, 1);
    assert_int_equal(cic_toml_get_float(cic_toml_table_get(t, "f"), &f),
                     CIC_TOML_OK);
    cic_assert_close(f, 2.5, 0, 0);
    assert_int_equal(cic_toml_get_bool(cic_toml_table_get(t, "b"), &b),
                     CIC_TOML_OK);
    assert_true(b);
    v = cic_toml_table_get(t, "arr");
    assert_int_equal(cic_toml_array_size(v), 2);
    assert_false(cic_toml_is_array_of_tables(v));
    assert_int_equal(cic_toml_get_float(cic_toml_array_at(v, 1), &f),
                     CIC_TOML_ETYPE);
    assert_int_equal(cic_toml_get_number(cic_toml_array_at(v, 1), &f),
                     CIC_TOML_OK);
    cic_assert_close(f, 2, 0, 0);
    assert_null(cic_toml_array_at(v, 2));
    v = cic_toml_table_get(root, "aot");
    assert_true(cic_toml_is_array_of_tables(v));
    cic_toml_node_pos(cic_toml_array_at(v, 1), &l, &c);
    assert_int_equal(l, 9);
    assert_null(cic_toml_table_get(root, "nope"));
    assert_int_equal(cic_toml_node_type(NULL), CIC_TOML_NONE);
    assert_string_equal(cic_toml_type_name(CIC_TOML_NONE), "nothing");
    cic_toml_doc_free(doc);
    cic_toml_doc_free(NULL);

    assert_int_equal(cic_toml_parse_string(&doc, "a = [", 5, NULL, &err),
                     CIC_TOML_ESYNTAX);
    assert_null(doc);
    assert_int_equal(err.line, 1);
    assert_true(err.msg[0] != '\0');
    assert_int_equal(cic_toml_parse_string(&doc, "a = 1\0b", 7, NULL, &err),
                     CIC_TOML_ESYNTAX);
    assert_int_equal(cic_toml_parse_file(&doc, "/nonexistent/x.toml", &err),
                     CIC_TOML_EIO);
    assert_int_equal(err.line, 0);
}

/* Random byte mutations of a valid case: never a crash, always OK or
 * EINPUT with a message. Seed printed on failure; CIC_TEST_MULTIPLIER for
 * longer runs. */
static void test_mutations(void **state)
{
    static cic_case c;
    static const char alphabet[] = "[]=\"'#.,{}\n 0123456789-+e_azAZ\\\t";
    char buf[4096];
    int iters = 3000 * cic_test_multiplier(), it;
    uint64_t seed = 0x9e3779b97f4a7c15ull;
    (void)state;
    CIC_ASSERT(strlen(full_case) < sizeof buf && strlen(dit_case) < sizeof buf);
    for (it = 0; it < iters; it++) {
        cic_diag d;
        int rc, k, nmut;
        /* alternate between the preln and the dit (adaLN) case */
        const char *src = it % 2 ? dit_case : full_case;
        size_t base = strlen(src);
        size_t len = base;
        uint64_t s0 = seed;
        memcpy(buf, src, base + 1);
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        nmut = 1 + (int)((seed >> 33) % 4);
        for (k = 0; k < nmut; k++) {
            size_t pos;
            seed = seed * 6364136223846793005ull + 1442695040888963407ull;
            pos = (size_t)((seed >> 20) % len);
            switch ((seed >> 60) % 4) {
            case 0: /* replace */
                buf[pos] = alphabet[(seed >> 8) % (sizeof alphabet - 1)];
                break;
            case 1: /* delete */
                memmove(buf + pos, buf + pos + 1, len - pos);
                len--;
                break;
            case 2: /* truncate */
                buf[pos] = '\0';
                len = pos;
                break;
            default: /* digits: push numbers out of range */
                if (len + 8 < sizeof buf) {
                    memmove(buf + pos + 8, buf + pos, len - pos + 1);
                    memcpy(buf + pos, "99999999", 8);
                    len += 8;
                }
                break;
            }
            if (len == 0)
                break;
        }
        rc = cic_case_load_string(&c, buf, "mut.toml", &d);
        if (rc != CIC_OK && rc != CIC_EINPUT)
            fail_msg("seed %llu: rc %d", (unsigned long long)s0, rc);
        if (rc == CIC_EINPUT && (d.msg[0] == '\0' || d.line < 1))
            fail_msg("seed %llu: empty diag or no position (%d:%d: %s)",
                     (unsigned long long)s0, d.line, d.column, d.msg);
    }
}

/* Inputs the fuzzer (scripts/fuzz.sh, tests/fuzz/fuzz_case.c) once broke on:
 * every file in tests/fuzz-regressions must load, through the file loader
 * (full length, embedded NULs included) and as a string (up to the first
 * NUL, as the fuzz target sees it), to CIC_OK or CIC_EINPUT with a message;
 * under scripts/sanitize.sh any memory error or UB there stops the test. */
/* One input the fuzzer once broke on, loaded from the file and from its
 * text: either loads or is refused with a message. *ctx counts failures. */
static void check_fuzz_input(const char *path, const char *name, void *ctx)
{
    static cic_case c; /* large: keep it off the stack */
    int *failures = ctx;
    cic_diag d;
    char *buf;
    int rc;
    memset(&d, 0, sizeof d);
    rc = cic_case_load(&c, path, &d);
    if ((rc != CIC_OK && rc != CIC_EINPUT) || (rc == CIC_EINPUT && d.msg[0] == '\0')) {
        print_error("FAIL %s (file): rc %d, diag %d:%d: %s\n", name, rc, d.line, d.column,
                    d.msg);
        (*failures)++;
    }
    buf = cic_test_slurp(path, NULL);
    memset(&d, 0, sizeof d);
    rc = cic_case_load_string(&c, buf, name, &d);
    if ((rc != CIC_OK && rc != CIC_EINPUT) || (rc == CIC_EINPUT && d.msg[0] == '\0')) {
        print_error("FAIL %s (string): rc %d, diag %d:%d: %s\n", name, rc, d.line, d.column,
                    d.msg);
        (*failures)++;
    }
    free(buf);
}

static void test_fuzz_regressions(void **state)
{
    int failures = 0;
    int n = cic_test_each_file("tests/fuzz-regressions", check_fuzz_input, &failures);
    (void)state;
    if (n < 1)
        fail_msg("no input in tests/fuzz-regressions (the fuzzer's first finds live there)");
    if (failures)
        fail_msg("%d of %d fuzz regressions failed", failures, n);
}

/* ---- sweeps ------------------------------------------------------------- */

#define SWEEP_MODEL                                                            \
    "[model]\nblock = \"preln\"\nd_model = 32\nheads = 4\ntokens = 8\n"       \
    "samples = 2\nlayers = 2\n"

static int load_str(cic_case *c, const char *text, cic_diag *d)
{
    memset(d, 0, sizeof *d);
    return cic_case_load_string(c, text, "sweep.toml", d);
}

/* The LLaMA attention keys: defaults (none, 10000, heads), the values as
 * written, kv_heads following heads across a sweep unless given, and the
 * per-point rules (kv_heads | heads, an even head size under RoPE). */
static void test_rope_keys(void **state)
{
    static cic_case c, p;
    cic_diag d;
    int rc;
    (void)state;
#define LLAMA "[model]\nblock = \"rmsnorm\"\nd_model = 32\nheads = 8\ntokens = 4\n" \
              "samples = 1\nlayers = 1\n"
    rc = cic_case_load_string(&c, LLAMA, NULL, &d);
    if (rc != CIC_OK)
        fail_msg("rc %d: %s", rc, d.msg);
    assert_int_equal(c.model.rope, CIC_ROPE_NONE);
    cic_assert_close(c.model.rope_theta, 10000.0, 0, 0);
    assert_int_equal(c.model.kv_heads, 8);
    rc = cic_case_load_string(&c,
                              LLAMA "rope = \"interleaved\"\nrope_theta = 500000.0\n"
                                    "kv_heads = 2\n",
                              NULL, &d);
    if (rc != CIC_OK)
        fail_msg("rc %d: %s", rc, d.msg);
    assert_int_equal(c.model.rope, CIC_ROPE_INTERLEAVED);
    cic_assert_close(c.model.rope_theta, 500000.0, 0, 0);
    assert_int_equal(c.model.kv_heads, 2);
    /* heads swept, kv_heads left out: it follows heads */
    rc = cic_case_load_string(&c, LLAMA "rope = \"half\"\n[sweep]\nheads = [2, 4]\n", NULL,
                              &d);
    if (rc != CIC_OK)
        fail_msg("rc %d: %s", rc, d.msg);
    assert_int_equal(cic_case_sweep_point(&p, &c, 1, &d), CIC_OK);
    assert_int_equal(p.model.heads, 4);
    assert_int_equal(p.model.kv_heads, 4);
    /* kv_heads = 4 with heads 2 .. 8: the point heads = 2 is refused */
    rc = cic_case_load_string(&c, LLAMA "kv_heads = 4\n[sweep]\nheads = [8, 2]\n", NULL, &d);
    assert_int_equal(rc, CIC_EINPUT);
    assert_non_null(strstr(d.msg, "kv_heads = 4 does not divide heads = 2"));
    /* RoPE with a head size of 32 / 16 = 2 is fine, of 24 / 8 = 3 not */
    rc = cic_case_load_string(&c, LLAMA "rope = \"half\"\n[sweep]\nd_model = [32, 24]\n",
                              NULL, &d);
    assert_int_equal(rc, CIC_EINPUT);
    assert_non_null(strstr(d.msg, "needs an even head size"));
#undef LLAMA
}

static void test_sweep(void **state)
{
    static cic_case c, p;
    cic_diag d;
    int rc;
    long i;
    (void)state;

    /* No [sweep]: a plain case, one point (itself). */
    rc = load_str(&c, SWEEP_MODEL, &d);
    if (rc != CIC_OK)
        fail_msg("rc %d: %s", rc, d.msg);
    assert_false(c.sweep.on);
    assert_int_equal(c.sweep.points, 1);
    assert_int_equal(cic_case_sweep_point(&p, &c, 0, &d), CIC_OK);
    assert_int_equal(p.model.d_model, 32);
    assert_int_equal(cic_case_sweep_point(&p, &c, 1, &d), CIC_EINPUT);

    /* 2 x 3: seed fastest, d_model slowest; defaults that follow d_model. */
    rc = load_str(&c,
                  "name = \"two-by-three\"\n" SWEEP_MODEL
                  "[sweep]\nd_model = [16, 32]\nseed = [1, 2, 3]\n",
                  &d);
    if (rc != CIC_OK)
        fail_msg("rc %d: %d:%d: %s", rc, d.line, d.column, d.msg);
    assert_true(c.sweep.on);
    assert_int_equal(c.sweep.points, 6);
    assert_int_equal(c.sweep.max_points, CIC_SWEEP_DEFAULT_MAX_POINTS);
    assert_int_equal(c.sweep.max_points, 64);
    assert_int_equal(c.sweep.n[CIC_AXIS_D_MODEL], 2);
    assert_int_equal(c.sweep.n[CIC_AXIS_SEED], 3);
    assert_int_equal(c.sweep.n[CIC_AXIS_HEADS], 0);
    assert_true(c.sweep.v[CIC_AXIS_SEED][2] == 3.0);
    assert_int_equal(c.sweep.line[CIC_AXIS_D_MODEL], 10);
    assert_int_equal(c.sweep.line[CIC_AXIS_SEED], 11);
    assert_int_equal(c.sweep.table_line, 9);
    /* The case itself is point 0. */
    assert_int_equal(c.model.d_model, 16);
    assert_int_equal(c.model.seed, 1);
    for (i = 0; i < 6; i++) {
        rc = cic_case_sweep_point(&p, &c, i, &d);
        if (rc != CIC_OK)
            fail_msg("point %ld: rc %d: %s", i, rc, d.msg);
        assert_int_equal(p.model.d_model, i < 3 ? 16 : 32);
        assert_int_equal(p.model.seed, (uint64_t)(i % 3 + 1));
        assert_int_equal(p.model.d_mlp, 4 * p.model.d_model);
        assert_int_equal(p.model.d_out, p.model.d_model);
        assert_int_equal(p.model.heads, 4);
        assert_int_equal(p.model.layers, 2);
        assert_false(p.sweep.on);
        assert_int_equal(p.sweep.points, 1);
        assert_string_equal(p.name, "two-by-three");
    }
    assert_int_equal(cic_case_sweep_point(&p, &c, 6, &d), CIC_EINPUT);
    assert_int_equal(cic_case_sweep_point(&p, &c, -1, &d), CIC_EINPUT);
    /* A point of a point is itself. */
    assert_int_equal(cic_case_sweep_point(&p, &c, 4, &d), CIC_OK);
    {
        static cic_case q;
        assert_int_equal(cic_case_sweep_point(&q, &p, 0, &d), CIC_OK);
        assert_int_equal(q.model.d_model, 32);
        assert_int_equal(q.model.seed, 2);
    }
    /* An invalid point (a hand-edited sweep): CIC_EINPUT at its list. */
    c.sweep.v[CIC_AXIS_D_MODEL][1] = 30;
    assert_int_equal(cic_case_sweep_point(&p, &c, 1, &d), CIC_OK);
    assert_int_equal(cic_case_sweep_point(&p, &c, 3, &d), CIC_EINPUT);
    assert_int_equal(d.line, 10);
    assert_non_null(strstr(d.msg, "not divisible by heads = 4"));
    assert_string_equal(d.file, "sweep.toml");

    /* Mixed radix over four axes, explicit d_out kept, number axes. */
    rc = load_str(&c,
                  "[model]\nblock = \"preln\"\nheads = 2\ntokens = 4\n"
                  "samples = 1\nd_out = 8\n"
                  "[sweep]\nseed = [5, 6]\nd_model = [16, 32]\n"
                  "samples = [1, 2]\nlayers = [1, 3]\nstd = [0.5, 0.25]\n"
                  "mpfr_prec = [64, 256]\n",
                  &d);
    if (rc != CIC_OK)
        fail_msg("rc %d: %d:%d: %s", rc, d.line, d.column, d.msg);
    assert_int_equal(c.sweep.points, 64);
    for (i = 0; i < 64; i++) {
        long r = i;
        int seed = (int)(r % 2), std = (int)(r / 2 % 2), smp = (int)(r / 4 % 2);
        int prec = (int)(r / 8 % 2), lay = (int)(r / 16 % 2);
        int dm = (int)(r / 32 % 2);
        assert_int_equal(cic_case_sweep_point(&p, &c, i, &d), CIC_OK);
        assert_int_equal(p.model.seed, (uint64_t)(5 + seed));
        assert_true(p.model.std == (std ? 0.25 : 0.5));
        assert_int_equal(p.model.samples, smp + 1);
        assert_int_equal(p.mpfr_prec, prec ? 256 : 64);
        assert_int_equal(p.model.layers, lay ? 3 : 1);
        assert_int_equal(p.model.d_model, dm ? 32 : 16);
        assert_int_equal(p.model.d_out, 8);
    }

    /* The guard: 9 x 9 = 81 points, more than the default 64. */
    {
        static const char lists[] =
            "seed = [1, 2, 3, 4, 5, 6, 7, 8, 9]\n"
            "tokens = [1, 2, 3, 4, 5, 6, 7, 8, 9]\n";
        char text[1024];
        snprintf(text, sizeof text, "%s[sweep]\n%s", SWEEP_MODEL, lists);
        assert_int_equal(load_str(&c, text, &d), CIC_EINPUT);
        assert_non_null(strstr(d.msg, "81"));
        assert_non_null(strstr(d.msg, "max_points = 64"));
        assert_int_equal(d.line, 8);
        assert_int_equal(d.column, 1);
        snprintf(text, sizeof text, "%s[sweep]\n%smax_points = 100\n",
                 SWEEP_MODEL, lists);
        rc = load_str(&c, text, &d);
        if (rc != CIC_OK)
            fail_msg("rc %d: %d:%d: %s", rc, d.line, d.column, d.msg);
        assert_int_equal(c.sweep.points, 81);
        assert_int_equal(c.sweep.max_points, 100);
        assert_int_equal(cic_case_sweep_point(&p, &c, 80, &d), CIC_OK);
        assert_int_equal(p.model.tokens, 9);
        assert_int_equal(p.model.seed, 9);
    }

    /* A swept key overrides (and need not repeat) the scalar: d_model = 30
     * would not divide by heads = 4, but it is ignored. */
    rc = load_str(&c,
                  "[model]\nblock = \"preln\"\nd_model = 30\nheads = 4\n"
                  "tokens = 8\nsamples = 2\nlayers = 2\n"
                  "[sweep]\nd_model = [16, 32]\n",
                  &d);
    if (rc != CIC_OK)
        fail_msg("rc %d: %d:%d: %s", rc, d.line, d.column, d.msg);
    assert_int_equal(c.model.d_model, 16);

    /* dit: d_cond follows each point's d_model unless given or swept. */
    rc = load_str(&c,
                  "[model]\nblock = \"dit\"\nheads = 2\ntokens = 4\n"
                  "samples = 2\nlayers = 1\n"
                  "[sweep]\nd_model = [8, 16]\n",
                  &d);
    if (rc != CIC_OK)
        fail_msg("rc %d: %d:%d: %s", rc, d.line, d.column, d.msg);
    assert_int_equal(cic_case_sweep_point(&p, &c, 1, &d), CIC_OK);
    assert_int_equal(p.model.d_cond, 16);
    rc = load_str(&c,
                  "[model]\nblock = \"dit\"\nheads = 2\ntokens = 4\n"
                  "samples = 2\nlayers = 1\n"
                  "[sweep]\nd_model = [8, 16]\nd_cond = [4, 12]\n",
                  &d);
    if (rc != CIC_OK)
        fail_msg("rc %d: %d:%d: %s", rc, d.line, d.column, d.msg);
    assert_int_equal(c.sweep.points, 4);
    assert_int_equal(cic_case_sweep_point(&p, &c, 1, &d), CIC_OK);
    assert_int_equal(p.model.d_model, 8);
    assert_int_equal(p.model.d_cond, 12);

    /* Per-point checks at load: static-fold calibration < samples, the
     * memory estimate of the largest point. */
    rc = load_str(&c,
                  "[model]\nblock = \"dit\"\nd_model = 8\nheads = 2\n"
                  "tokens = 4\nsamples = 4\nlayers = 1\n"
                  "[[transforms]]\nname = \"sf\"\nkind = \"static-fold\"\n"
                  "q = \"identity\"\ncalibration = 2\n"
                  "[sweep]\nsamples = [4, 2]\n",
                  &d);
    assert_int_equal(rc, CIC_EINPUT);
    assert_int_equal(d.line, 14);
    assert_non_null(strstr(d.msg, "calibration = 2"));
    /* no memory limit at load (the run's --max-memory guard decides): a
     * point estimated far above 8 GiB loads, and its estimate says so */
    rc = load_str(&c,
                  "[model]\nblock = \"preln\"\nheads = 32\ntokens = 8\n"
                  "samples = 2\nlayers = 64\n"
                  "[sweep]\nd_model = [32, 4096]\n",
                  &d);
    assert_int_equal(rc, CIC_OK);
    c.model.d_model = 4096;
    c.model.d_mlp = 4 * 4096;
    assert_true(cic_case_memory_estimate(&c) > ((uint64_t)8 << 30));
}

static void test_sweep_fixture(void **state)
{
    static cic_case c, p;
    cic_diag d;
    char path[1024];
    int rc;
    long i;
    (void)state;
    cic_test_path(path, sizeof path, "tests/fixtures/valid-sweep.toml");
    rc = cic_case_load(&c, path, &d);
    if (rc != CIC_OK)
        fail_msg("%s: rc %d: %d:%d: %s", path, rc, d.line, d.column, d.msg);
    assert_string_equal(c.name, "valid-sweep");
    assert_true(c.sweep.on);
    assert_int_equal(c.sweep.points, 12);
    assert_int_equal(c.model.block, CIC_BLOCK_PRELN);
    for (i = 0; i < 12; i++) {
        rc = cic_case_sweep_point(&p, &c, i, &d);
        if (rc != CIC_OK)
            fail_msg("point %ld: rc %d: %s", i, rc, d.msg);
        assert_int_equal(p.model.seed, (uint64_t)(i % 3 + 1));
        assert_int_equal(p.model.layers, (int)(i / 3 % 2) + 1);
        assert_int_equal(p.model.d_model, i < 6 ? 16 : 32);
        assert_int_equal(p.model.d_mlp, 4 * p.model.d_model);
        assert_int_equal(p.n_xf, 2);
        assert_string_equal(p.name, "valid-sweep");
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_malformed_files),
        cmocka_unit_test(test_malformed_checker_catches_faults),
        cmocka_unit_test(test_full_case),
        cmocka_unit_test(test_defaults),
        cmocka_unit_test(test_dit_strategies),
        cmocka_unit_test(test_boundaries),
        cmocka_unit_test(test_hadamard_base),
        cmocka_unit_test(test_fixtures),
        cmocka_unit_test(test_missing_file),
        cmocka_unit_test(test_name_tables),
        cmocka_unit_test(test_name_tables_complete),
        cmocka_unit_test(test_memory_estimate),
        cmocka_unit_test(test_messages),
        cmocka_unit_test(test_all_errors),
        cmocka_unit_test_setup_teardown(test_name_from_file, cic_test_tmp_setup,
                                        cic_test_tmp_teardown),
        cmocka_unit_test(test_toml_capi),
        cmocka_unit_test(test_mutations),
        cmocka_unit_test(test_fuzz_regressions),
        cmocka_unit_test(test_rope_keys),
        cmocka_unit_test(test_sweep),
        cmocka_unit_test(test_sweep_fixture),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
