/* SPDX-License-Identifier: MIT */
/* test_report.c: the report module's outputs read back the way their
 * consumers read them: report.json parsed with jansson (keys of DESIGN.md
 * section 7, null for NaN/Inf and for rows without a verdict or metrics),
 * safetensors files parsed by hand (header length, JSON, offsets, bytes),
 * the terminal table searched as text; the analytical FLOP table of a dit
 * case (its figures against the formulas, and every writer printing the
 * table's own values); and the atomic writer's promises:
 * no temporary left behind, an existing file replaced whole, a failed write
 * returning -1 with a diagnostic and leaving the old file intact. */
#include "testutil.h"

#include "base/mpvec.h"
#include "base/rng.h"
#include "base/safetensors_read.h"
#include "case/case.h"
#include "pipeline/pipeline.h"
#include "pipeline/pipeline_int.h"
#include "report/report.h"

#include <dirent.h>
#include <jansson.h>
#include <math.h>
#include <signal.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- helpers ---- */

/* Entries of dir other than . and .., and how many are hidden (temporaries
 * of the atomic writer start with a dot). */
static int count_entries(const char *path, int *hidden)
{
    DIR *dir = opendir(path);
    struct dirent *e;
    int n = 0;
    *hidden = 0;
    assert_non_null(dir);
    while ((e = readdir(dir)) != NULL) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
            continue;
        n++;
        if (e->d_name[0] == '.') {
            (*hidden)++;
            fprintf(stderr, "left behind: %s/%s\n", path, e->d_name);
        }
    }
    closedir(dir);
    return n;
}

/* ---- a small report built by hand ---- */

static cic_case g_case;
static cic_result g_res[3];
static cic_gate_result g_gates[2];

static void make_report(cic_report *r)
{
    cic_case *c = &g_case;
    memset(c, 0, sizeof *c);
    cic_strlcpy(c->name, "layernorm", sizeof c->name);
    cic_strlcpy(c->path, "cases/layernorm.toml", sizeof c->path);
    c->model.block = CIC_BLOCK_PRELN;
    c->model.d_model = 64;
    c->model.heads = 4;
    c->model.mlp_ratio = 4;
    c->model.d_mlp = 256;
    c->model.tokens = 16;
    c->model.samples = 2;
    c->model.layers = 2;
    c->model.eps = 1e-5;
    c->model.causal = true;
    c->model.act = CIC_ACT_GELU;
    c->model.d_out = 32;
    c->model.seed = UINT64_MAX; /* above INT64_MAX: written as a string */
    c->model.dist = CIC_DIST_NORMAL;
    c->model.std = 0.05;
    c->f32_openblas = true;
    c->f32_fixed = true;
    c->mpfr_prec = 128;
    c->readout = CIC_READOUT_HEAD;
    c->n_xf = 2;
    cic_strlcpy(c->xf[0].name, "fuse", sizeof c->xf[0].name);
    c->xf[0].kind = CIC_XFORM_FUSE_LAYERNORM;
    c->xf[0].after = -1;
    c->xf[0].line = 20;
    cic_strlcpy(c->xf[1].name, "rot", sizeof c->xf[1].name);
    c->xf[1].kind = CIC_XFORM_ROTATE;
    c->xf[1].after = 0;
    c->xf[1].q = CIC_Q_HADAMARD;
    c->xf[1].q_seed = 7;
    c->xf[1].mistake = cic_test_mistake(CIC_XFORM_ROTATE, "skip-attn-out");
    c->xf[1].expect = CIC_VERDICT_BROKEN;
    c->xf[1].line = 26;
    c->n_gates = 1;
    cic_strlcpy(c->gates[0].transform, "fuse", sizeof c->gates[0].transform);
    cic_strlcpy(c->gates[0].engine, "f32-openblas", sizeof c->gates[0].engine);
    cic_strlcpy(c->gates[0].metric, "ulp_row.p99", sizeof c->gates[0].metric);
    c->gates[0].max = 64;
    c->gates[0].line = 12;

    memset(g_res, 0, sizeof g_res);
    /* before row: metrics, no verdict, a NaN rel_norm2 */
    cic_strlcpy(g_res[0].transform, "none", sizeof g_res[0].transform);
    cic_strlcpy(g_res[0].engine, "f32-openblas", sizeof g_res[0].engine);
    g_res[0].has_verdict = false;
    g_res[0].has_metrics = true;
    g_res[0].metrics.max_abs = 1.5e-6;
    g_res[0].metrics.rel_norm2 = NAN;
    g_res[0].metrics.ulp_row = (cic_stat3){3, 2, 0.75};
    g_res[0].metrics.first_nonfinite = -1;
    g_res[0].pass = true;
    /* transformed row: every figure, an Inf max_abs, non-finite outputs */
    cic_strlcpy(g_res[1].transform, "fuse", sizeof g_res[1].transform);
    cic_strlcpy(g_res[1].engine, "f32-openblas", sizeof g_res[1].engine);
    g_res[1].has_verdict = true;
    g_res[1].expect = CIC_VERDICT_EQUIVALENT;
    g_res[1].verdict = CIC_VERDICT_BROKEN;
    g_res[1].ce_residual = 0.25;
    g_res[1].ce_threshold_equivalent = 1e-30;
    g_res[1].ce_threshold_broken = 1e-6;
    g_res[1].has_metrics = true;
    g_res[1].metrics.max_abs = INFINITY;
    g_res[1].metrics.rel_norm2 = 3.25e-7;
    g_res[1].metrics.ulp_row = (cic_stat3){123456, 100, 12.5};
    g_res[1].metrics.ulp_elem = (cic_stat3){7, 5, 1};
    g_res[1].metrics.ulp_elem_excluded = 9;
    g_res[1].metrics.drift = (cic_stat3){40, 30, 2.5};
    g_res[1].metrics.ulp_row_delta_max = -1.5;
    g_res[1].metrics.ulp_row_delta_p99 = 98;
    g_res[1].metrics.decomp_weights = 1e-8;
    g_res[1].metrics.decomp_arith = 2e-7;
    g_res[1].metrics.nonfinite = 3;
    g_res[1].metrics.first_nonfinite = 17;
    g_res[1].metrics.has_drift = 1;
    g_res[1].metrics.has_decomp = 1;
    g_res[1].flops.baseline = 1000;
    g_res[1].flops.transformed = 1100;
    g_res[1].flops.extra_total = 100;
    g_res[1].flops.extra_pct = 10;
    g_res[1].flops.counted_matches_analytical = true;
    g_res[1].flops.n_sites = 2;
    cic_strlcpy(g_res[1].flops.sites[0].name, "norm1", sizeof g_res[1].flops.sites[0].name);
    g_res[1].flops.sites[0].analytical = 60;
    g_res[1].flops.sites[0].counted = 60;
    cic_strlcpy(g_res[1].flops.sites[1].name, "gate1", sizeof g_res[1].flops.sites[1].name);
    g_res[1].flops.sites[1].analytical = 40;
    g_res[1].flops.sites[1].counted = 40;
    g_res[1].n_samples = 2;
    g_res[1].per_sample[0] = (cic_sample_ce){0, 0.25, CIC_VERDICT_BROKEN};
    g_res[1].per_sample[1] = (cic_sample_ce){1, NAN, CIC_VERDICT_INCONCLUSIVE};
    g_res[1].pass = false;
    /* mpfr exactness row: verdict, no metrics */
    cic_strlcpy(g_res[2].transform, "fuse", sizeof g_res[2].transform);
    cic_strlcpy(g_res[2].engine, "mpfr", sizeof g_res[2].engine);
    g_res[2].has_verdict = true;
    g_res[2].expect = CIC_VERDICT_EQUIVALENT;
    g_res[2].verdict = CIC_VERDICT_EQUIVALENT;
    g_res[2].ce_residual = 1e-36;
    g_res[2].has_metrics = false;
    g_res[2].pass = true;

    memset(g_gates, 0, sizeof g_gates);
    cic_strlcpy(g_gates[0].transform, "fuse", sizeof g_gates[0].transform);
    cic_strlcpy(g_gates[0].engine, "f32-openblas", sizeof g_gates[0].engine);
    cic_strlcpy(g_gates[0].metric, "ulp_row.p99", sizeof g_gates[0].metric);
    g_gates[0].limit = 64;
    g_gates[0].value = 100;
    g_gates[0].pass = false;
    g_gates[0].line = 12;
    cic_strlcpy(g_gates[1].transform, "none", sizeof g_gates[1].transform);
    cic_strlcpy(g_gates[1].engine, "f32-openblas", sizeof g_gates[1].engine);
    cic_strlcpy(g_gates[1].metric, "max_abs", sizeof g_gates[1].metric);
    g_gates[1].limit = 1e-3;
    g_gates[1].value = 1.5e-6;
    g_gates[1].pass = true;
    g_gates[1].line = 15;

    memset(r, 0, sizeof *r);
    r->kase = c;
    cic_report_env_fill(&r->env);
    r->results = g_res;
    r->n_results = 3;
    r->gates = g_gates;
    r->n_gates = 2;
    r->truth_certified = true;
    r->truth_cert_diff = 2.5e-40;
    r->proof.proven = true;
    r->proof.values = 1000;
    r->proof.first = 998;
    r->proof.escalated = 2;
    r->proof.max_rel_radius = 0.5;
    r->proof.precs[0] = 64;
    r->proof.precs[1] = 128;
    r->proof.n_precs = 2;
    r->proof.rechecked = true;
    memset(r->weights_sha256, 'a', 64);
    r->weights_sha256[64] = '\0';
    r->wall_seconds = 1.25;
    r->pass = false;
}

/* ---- tests ---- */

static json_t *jpath(json_t *o, const char *k1, const char *k2)
{
    json_t *v = json_object_get(o, k1);
    if (!v)
        fail_msg("missing key '%s'", k1);
    if (k2) {
        v = json_object_get(v, k2);
        if (!v)
            fail_msg("missing key '%s.%s'", k1, k2);
    }
    return v;
}

static void check_str(json_t *v, const char *want)
{
    if (!json_is_string(v))
        fail_msg("expected string '%s', got JSON type %d", want, v ? (int)json_typeof(v) : -1);
    assert_string_equal(json_string_value(v), want);
}

static void test_env_fill(void **state)
{
    cic_env e;
    (void)state;
    cic_report_env_fill(&e);
    assert_true(strlen(e.mpfr) > 0);
    assert_true(strlen(e.gmp) > 0);
    assert_true(strlen(e.openblas) > 0);
    assert_true(strlen(e.openblas_core) > 0);
    assert_true(strlen(e.compiler) > 0);
    assert_true(strlen(e.hostname) > 0);
    assert_true(e.openblas_threads >= 1);
}

static void test_json_round_trip(void **state)
{
    cic_report r;
    cic_diag d = {0};
    char dir[1200], path[1300];
    json_error_t je;
    json_t *root, *res, *row, *m, *g;
    int hidden;
    (void)state;

    make_report(&r);
    cic_test_tmp_path(dir, sizeof dir, "nested/out"); /* created with parents */
    if (cic_report_json_write(&r, dir, &d) != 0)
        fail_msg("json write failed: %s", d.msg);
    snprintf(path, sizeof path, "%s/report.json", dir);
    root = json_load_file(path, 0, &je);
    if (!root)
        fail_msg("report.json does not parse: %s line %d", je.text, je.line);
    assert_int_equal(count_entries(dir, &hidden), 1);
    assert_int_equal(hidden, 0);

    check_str(jpath(root, "cicheck_version", NULL), CIC_VERSION);
    check_str(jpath(root, "case", "name"), "layernorm");
    check_str(jpath(root, "case", "file"), "cases/layernorm.toml");
    m = jpath(root, "case", "model");
    assert_int_equal(json_integer_value(json_object_get(m, "d_model")), 64);
    check_str(json_object_get(m, "block"), CIC_BLOCK_NAME[CIC_BLOCK_PRELN]);
    check_str(json_object_get(m, "activation"), CIC_ACT_NAME[CIC_ACT_GELU]);
    check_str(json_object_get(m, "seed"), "18446744073709551615");
    check_str(json_object_get(json_object_get(m, "weights"), "dist"),
              CIC_DIST_NAME[CIC_DIST_NORMAL]);
    g = jpath(root, "case", "engines");
    assert_int_equal(json_array_size(json_object_get(g, "f32")), 2);
    check_str(json_array_get(json_object_get(g, "f32"), 1), "fixed-order");
    assert_int_equal(json_integer_value(json_object_get(g, "mpfr_prec")), 128);
    check_str(json_object_get(jpath(root, "case", "readout"), "kind"),
              CIC_READOUT_NAME[CIC_READOUT_HEAD]);
    g = jpath(root, "case", "transforms");
    assert_int_equal(json_array_size(g), 2);
    assert_true(json_is_null(json_object_get(json_array_get(g, 0), "after")));
    check_str(json_object_get(json_array_get(g, 1), "after"), "fuse");
    check_str(json_object_get(json_array_get(g, 1), "kind"), CIC_XFORM_NAME[CIC_XFORM_ROTATE]);
    check_str(json_object_get(json_array_get(g, 1), "q"), CIC_Q_NAME[CIC_Q_HADAMARD]);
    check_str(json_object_get(json_array_get(g, 1), "mistake"), "skip-attn-out");
    check_str(json_object_get(json_array_get(g, 1), "expect"), CIC_VERDICT_NAME[CIC_VERDICT_BROKEN]);
    check_str(json_object_get(json_array_get(g, 1), "precision"), CIC_TPREC_NAME[CIC_TPREC_MPFR]);
    assert_int_equal(json_integer_value(json_object_get(json_array_get(g, 1), "seed")), 7);
    assert_int_equal(json_integer_value(json_object_get(json_array_get(g, 1), "line")), 26);
    g = jpath(root, "case", "gates");
    assert_int_equal(json_array_size(g), 1);
    cic_assert_close(json_number_value(json_object_get(json_array_get(g, 0), "max")), 64, 0, 0);

    check_str(jpath(root, "environment", "mpfr"), r.env.mpfr);
    check_str(jpath(root, "environment", "openblas_core"), r.env.openblas_core);
    assert_int_equal(json_integer_value(jpath(root, "environment", "openblas_threads")),
                     r.env.openblas_threads);
    check_str(jpath(root, "environment", "compiler"), r.env.compiler);

    res = jpath(root, "results", NULL);
    assert_int_equal(json_array_size(res), 3);

    /* row 0: no verdict -> nulls; NaN rel_norm2 -> null; no drift -> null */
    row = json_array_get(res, 0);
    check_str(json_object_get(row, "transform"), "none");
    assert_true(json_is_null(json_object_get(row, "expect")));
    assert_true(json_is_null(json_object_get(row, "verdict")));
    assert_true(json_is_null(json_object_get(row, "ce_residual")));
    m = json_object_get(row, "metrics");
    assert_true(json_is_object(m));
    assert_true(json_is_null(json_object_get(m, "rel_norm2")));
    cic_assert_close(json_number_value(json_object_get(m, "max_abs")), 1.5e-6, 0, 0);
    assert_true(json_is_null(json_object_get(m, "drift")));
    assert_true(json_is_null(json_object_get(m, "ulp_row_delta")));
    assert_true(json_is_null(json_object_get(m, "decomposition")));
    assert_true(json_is_null(json_object_get(m, "first_nonfinite")));
    assert_int_equal(json_integer_value(json_object_get(m, "nonfinite")), 0);

    /* row 1: everything; Inf max_abs -> null */
    row = json_array_get(res, 1);
    check_str(json_object_get(row, "expect"), CIC_VERDICT_NAME[CIC_VERDICT_EQUIVALENT]);
    check_str(json_object_get(row, "verdict"), CIC_VERDICT_NAME[CIC_VERDICT_BROKEN]);
    cic_assert_close(json_number_value(json_object_get(row, "ce_residual")), 0.25, 0, 0);
    cic_assert_close(json_number_value(json_object_get(json_object_get(row, "ce_thresholds"), "broken")), 1e-6, 0, 0);
    cic_assert_close(json_number_value(json_object_get(json_object_get(row, "ce_thresholds"), "equivalent")), 1e-30, 0, 0);
    m = json_object_get(row, "metrics");
    assert_true(json_is_null(json_object_get(m, "max_abs")));
    cic_assert_close(json_number_value(json_object_get(m, "rel_norm2")), 3.25e-7, 0, 0);
    cic_assert_close(json_number_value(json_object_get(json_object_get(m, "ulp_row"), "max")), 123456, 0, 0);
    cic_assert_close(json_number_value(json_object_get(json_object_get(m, "ulp_row"), "mean")), 12.5, 0, 0);
    assert_int_equal(json_integer_value(json_object_get(json_object_get(m, "ulp_elem"), "excluded")), 9);
    cic_assert_close(json_number_value(json_object_get(json_object_get(m, "drift"), "p99")), 30, 0, 0);
    cic_assert_close(json_number_value(json_object_get(json_object_get(m, "ulp_row_delta"), "max")), -1.5, 0, 0);
    cic_assert_close(json_number_value(json_object_get(json_object_get(m, "decomposition"), "arithmetic")), 2e-7, 0, 0);
    assert_int_equal(json_integer_value(json_object_get(m, "nonfinite")), 3);
    assert_int_equal(json_integer_value(json_object_get(m, "first_nonfinite")), 17);
    g = json_object_get(row, "flops");
    cic_assert_close(json_number_value(json_object_get(g, "extra_pct")), 10, 0, 0);
    assert_true(json_is_true(json_object_get(g, "counted_matches_analytical")));
    cic_assert_close(json_number_value(json_object_get(json_object_get(json_object_get(g, "sites"), "gate1"), "counted")), 40, 0, 0);
    g = json_object_get(row, "per_sample");
    assert_int_equal(json_array_size(g), 2);
    assert_true(json_is_null(json_object_get(json_array_get(g, 1), "ce_residual")));
    check_str(json_object_get(json_array_get(g, 1), "verdict"),
              CIC_VERDICT_NAME[CIC_VERDICT_INCONCLUSIVE]);
    assert_true(json_is_false(json_object_get(row, "pass")));

    /* row 2: no metrics -> null */
    row = json_array_get(res, 2);
    check_str(json_object_get(row, "engine"), "mpfr");
    assert_true(json_is_null(json_object_get(row, "metrics")));
    cic_assert_close(json_number_value(json_object_get(row, "ce_residual")), 1e-36, 0, 0);

    g = jpath(root, "gates", NULL);
    assert_int_equal(json_array_size(g), 2);
    check_str(json_object_get(json_array_get(g, 0), "metric"), "ulp_row.p99");
    cic_assert_close(json_number_value(json_object_get(json_array_get(g, 0), "value")), 100, 0, 0);
    cic_assert_close(json_number_value(json_object_get(json_array_get(g, 0), "limit")), 64, 0, 0);
    assert_true(json_is_false(json_object_get(json_array_get(g, 0), "pass")));
    assert_int_equal(json_integer_value(json_object_get(json_array_get(g, 0), "line")), 12);
    assert_true(json_is_true(jpath(root, "truth", "certified")));
    cic_assert_close(json_number_value(jpath(root, "truth", "max_rel_diff")), 2.5e-40, 0, 0);
    assert_true(json_is_true(jpath(root, "truth", "proven")));
    assert_int_equal(json_integer_value(jpath(root, "truth", "values")), 1000);
    assert_int_equal(json_integer_value(jpath(root, "truth", "proven_first")), 998);
    assert_int_equal(json_integer_value(jpath(root, "truth", "escalated")), 2);
    cic_assert_close(json_number_value(jpath(root, "truth", "max_rel_radius")), 0.5, 0, 0);
    assert_int_equal(json_integer_value(json_array_get(jpath(root, "truth", "precisions"), 1)), 128);
    assert_true(json_is_null(jpath(root, "truth", "unproven_reason")));
    assert_int_equal(strlen(json_string_value(jpath(root, "weights_sha256", NULL))), 64);
    cic_assert_close(json_number_value(jpath(root, "wall_seconds", NULL)), 1.25, 0, 0);
    assert_true(json_is_false(jpath(root, "pass", NULL)));
    json_decref(root);

    /* A NULL case is written as null, not a crash. */
    r.kase = NULL;
    if (cic_report_json_write(&r, dir, &d) != 0)
        fail_msg("json write without case failed: %s", d.msg);
    root = json_load_file(path, 0, &je);
    assert_non_null(root);
    assert_true(json_is_null(json_object_get(root, "case")));
    json_decref(root);
}

static void test_atomic_replace(void **state)
{
    char path[1200], *got;
    cic_diag d = {0};
    int hidden;
    size_t len;
    (void)state;

    cic_test_tmp_path(path, sizeof path, "out.txt");
    cic_test_write_text(path, "old contents, longer than the new ones\n");
    if (cic_write_atomic(path, "new\n", 4, &d) != 0)
        fail_msg("atomic write failed: %s", d.msg);
    got = cic_test_slurp(path, &len);
    assert_non_null(got);
    assert_int_equal(len, 4);
    assert_string_equal(got, "new\n");
    free(got);
    assert_int_equal(count_entries(cic_test_tmp, &hidden), 1);
    assert_int_equal(hidden, 0);

    /* empty content is a valid file */
    assert_int_equal(cic_write_atomic(path, NULL, 0, &d), 0);
    got = cic_test_slurp(path, &len);
    assert_int_equal(len, 0);
    free(got);

    /* a plain file name (no folder) writes in the current directory */
    {
        char cwd[1024];
        assert_non_null(getcwd(cwd, sizeof cwd));
        assert_int_equal(chdir(cic_test_tmp), 0);
        assert_int_equal(cic_write_atomic("plain.txt", "x", 1, &d), 0);
        assert_int_equal(chdir(cwd), 0);
        assert_int_equal(count_entries(cic_test_tmp, &hidden), 2);
        assert_int_equal(hidden, 0);
    }
}

static void test_write_failures(void **state)
{
    char file[1200], dir[1300], path[1400], *got;
    cic_diag d;
    cic_report r;
    int hidden;
    struct rlimit old, lim;
    static char big[1 << 16];
    (void)state;

    make_report(&r);

    /* parent is a regular file */
    cic_test_tmp_path(file, sizeof file, "plainfile");
    cic_test_write_text(file, "x");
    snprintf(path, sizeof path, "%s/report.json", file);
    memset(&d, 0, sizeof d);
    assert_int_equal(cic_write_atomic(path, "abc", 3, &d), -1);
    assert_true(strlen(d.msg) > 0);
    memset(&d, 0, sizeof d);
    snprintf(dir, sizeof dir, "%s/sub", file);
    assert_int_equal(cic_report_json_write(&r, dir, &d), -1);
    assert_true(strlen(d.msg) > 0);
    assert_non_null(strstr(d.msg, "directory"));

    /* The target is a directory: rename fails, the temporary goes. */
    cic_test_tmp_path(dir, sizeof dir, "isdir");
    assert_int_equal(mkdir(dir, 0755), 0);
    memset(&d, 0, sizeof d);
    assert_int_equal(cic_write_atomic(dir, "abc", 3, &d), -1);
    assert_true(strlen(d.msg) > 0);
    assert_int_equal(count_entries(cic_test_tmp, &hidden), 2);
    assert_int_equal(hidden, 0);

    /* An old report, then a write that fails midway (file size limit, which
     * holds for root too): -1, a message, old report intact, no temporary. */
    cic_test_tmp_path(dir, sizeof dir, "rep");
    assert_int_equal(mkdir(dir, 0755), 0);
    snprintf(path, sizeof path, "%s/report.json", dir);
    cic_test_write_text(path, "{\"old\": true}\n");
    assert_int_equal(getrlimit(RLIMIT_FSIZE, &old), 0);
    lim = old;
    lim.rlim_cur = 1024;
    signal(SIGXFSZ, SIG_IGN);
    assert_int_equal(setrlimit(RLIMIT_FSIZE, &lim), 0);
    memset(big, 'z', sizeof big);
    memset(&d, 0, sizeof d);
    {
        int rc1 = cic_write_atomic(path, big, sizeof big, &d);
        cic_diag d2 = {0};
        int rc2 = cic_report_json_write(&r, dir, &d2); /* report.json > 1 KiB */
        setrlimit(RLIMIT_FSIZE, &old);
        signal(SIGXFSZ, SIG_DFL);
        assert_int_equal(rc1, -1);
        assert_true(strlen(d.msg) > 0);
        assert_int_equal(rc2, -1);
        assert_true(strlen(d2.msg) > 0);
    }
    got = cic_test_slurp(path, NULL);
    assert_non_null(got);
    assert_string_equal(got, "{\"old\": true}\n");
    free(got);
    assert_int_equal(count_entries(dir, &hidden), 1);
    assert_int_equal(hidden, 0);

    /* A folder that is not writable (meaningless as root, who writes
     * anywhere: checked only for other users). */
    if (geteuid() != 0) {
        assert_int_equal(chmod(dir, 0555), 0);
        memset(&d, 0, sizeof d);
        assert_int_equal(cic_report_json_write(&r, dir, &d), -1);
        assert_true(strlen(d.msg) > 0);
        chmod(dir, 0755);
        got = cic_test_slurp(path, NULL);
        assert_string_equal(got, "{\"old\": true}\n");
        free(got);
    }
}

/* ---- safetensors ---- */

static uint64_t rd_u64le(const unsigned char *p)
{
    uint64_t v = 0;
    for (int k = 7; k >= 0; k--)
        v = (v << 8) | p[k];
    return v;
}

static void test_safetensors_round_trip(void **state)
{
    float a[6] = {1, -2, 3.5f, 0, -0.0f, 1e-40f};
    double b[4] = {1e300, -1e-300, 0.1, 42};
    float c[4] = {INFINITY, -INFINITY, NAN, 7};
    const cic_st_tensor t[3] = {
        {"blocks.0.attn.qkv.weight", CIC_DT_F32, 2, {2, 3, 0, 0}, a},
        {"truth", CIC_DT_F64, 1, {4, 0, 0, 0}, b},
        {"x.4d", CIC_DT_F32, 4, {1, 2, 2, 1}, c},
    };
    const void *data[3] = {a, b, c};
    const size_t sizes[3] = {sizeof a, sizeof b, sizeof c};
    const char *meta[] = {"format", "pt", "case", "layernorm", NULL};
    char path[1200];
    unsigned char *buf;
    size_t len, off = 0;
    uint64_t n;
    cic_diag d = {0};
    json_error_t je;
    json_t *hdr, *md;
    int hidden;
    (void)state;

    cic_test_tmp_path(path, sizeof path, "w.safetensors");
    cic_test_write_text(path, "old"); /* replaced */
    if (cic_safetensors_write(path, t, 3, meta, &d) != 0)
        fail_msg("safetensors write failed: %s", d.msg);
    assert_int_equal(count_entries(cic_test_tmp, &hidden), 1);
    assert_int_equal(hidden, 0);

    buf = (unsigned char *)cic_test_slurp(path, &len);
    assert_non_null(buf);
    assert_true(len >= 8);
    n = rd_u64le(buf);
    assert_int_equal(n % 8, 0);
    assert_int_equal(len, 8 + n + sizeof a + sizeof b + sizeof c);
    assert_true(buf[8] == '{');
    hdr = json_loadb((const char *)buf + 8, (size_t)n, 0, &je);
    if (!hdr)
        fail_msg("header does not parse: %s", je.text);
    assert_int_equal(json_object_size(hdr), 4);
    md = json_object_get(hdr, "__metadata__");
    check_str(json_object_get(md, "format"), "pt");
    check_str(json_object_get(md, "case"), "layernorm");
    for (int i = 0; i < 3; i++) {
        json_t *e = json_object_get(hdr, t[i].name), *sh, *of;
        if (!e)
            fail_msg("tensor '%s' missing from the header", t[i].name);
        check_str(json_object_get(e, "dtype"), t[i].dtype == CIC_DT_F32 ? "F32" : "F64");
        sh = json_object_get(e, "shape");
        assert_int_equal(json_array_size(sh), t[i].ndim);
        for (int k = 0; k < t[i].ndim; k++)
            assert_int_equal(json_integer_value(json_array_get(sh, k)), t[i].shape[k]);
        of = json_object_get(e, "data_offsets");
        assert_int_equal(json_array_size(of), 2);
        assert_int_equal(json_integer_value(json_array_get(of, 0)), off);
        assert_int_equal(json_integer_value(json_array_get(of, 1)), off + sizes[i]);
        /* bit patterns, so -0, NaN and subnormals count */
        assert_memory_equal(buf + 8 + n + off, data[i], sizes[i]);
        off += sizes[i];
    }
    json_decref(hdr);
    free(buf);

    /* no metadata, one tensor with a zero dimension */
    {
        const cic_st_tensor z = {"empty", CIC_DT_F64, 2, {0, 5, 0, 0}, NULL};
        assert_int_equal(cic_safetensors_write(path, &z, 1, NULL, &d), 0);
        buf = (unsigned char *)cic_test_slurp(path, &len);
        n = rd_u64le(buf);
        assert_int_equal(n % 8, 0);
        assert_int_equal(len, 8 + n);
        hdr = json_loadb((const char *)buf + 8, (size_t)n, 0, &je);
        assert_non_null(hdr);
        assert_int_equal(json_object_size(json_object_get(hdr, "__metadata__")), 0);
        assert_int_equal(json_integer_value(json_array_get(json_object_get(json_object_get(hdr, "empty"), "data_offsets"), 1)), 0);
        json_decref(hdr);
        free(buf);
    }
}

static void test_safetensors_rejects(void **state)
{
    float a[4] = {1, 2, 3, 4};
    char path[1200], *got;
    cic_diag d;
    int hidden;
    cic_st_tensor t[2] = {
        {"w", CIC_DT_F32, 1, {4, 0, 0, 0}, a},
        {"w", CIC_DT_F32, 1, {4, 0, 0, 0}, a},
    };
    (void)state;

    cic_test_tmp_path(path, sizeof path, "bad.safetensors");
    cic_test_write_text(path, "old");

    memset(&d, 0, sizeof d);
    assert_int_equal(cic_safetensors_write(path, t, 2, NULL, &d), -1);
    assert_non_null(strstr(d.msg, "duplicate"));

    t[1].name = "v";
    t[1].ndim = 0;
    memset(&d, 0, sizeof d);
    assert_int_equal(cic_safetensors_write(path, t, 2, NULL, &d), -1);
    assert_non_null(strstr(d.msg, "ndim"));
    t[1].ndim = 5;
    memset(&d, 0, sizeof d);
    assert_int_equal(cic_safetensors_write(path, t, 2, NULL, &d), -1);
    assert_non_null(strstr(d.msg, "ndim"));

    t[1].ndim = 2;
    t[1].shape[0] = 2;
    t[1].shape[1] = -2;
    memset(&d, 0, sizeof d);
    assert_int_equal(cic_safetensors_write(path, t, 2, NULL, &d), -1);
    assert_non_null(strstr(d.msg, "negative"));

    t[1].shape[1] = 2;
    t[1].dtype = (cic_dtype)7;
    memset(&d, 0, sizeof d);
    assert_int_equal(cic_safetensors_write(path, t, 2, NULL, &d), -1);
    assert_true(strlen(d.msg) > 0);

    t[1].dtype = CIC_DT_F32;
    t[1].data = NULL;
    memset(&d, 0, sizeof d);
    assert_int_equal(cic_safetensors_write(path, t, 2, NULL, &d), -1);
    assert_true(strlen(d.msg) > 0);

    t[1].data = a;
    t[1].name = "__metadata__";
    memset(&d, 0, sizeof d);
    assert_int_equal(cic_safetensors_write(path, t, 2, NULL, &d), -1);
    assert_true(strlen(d.msg) > 0);

    memset(&d, 0, sizeof d);
    assert_int_equal(cic_safetensors_write(path, NULL, 2, NULL, &d), -1);
    assert_int_equal(cic_safetensors_write(path, t, -1, NULL, &d), -1);

    /* every rejection left the old file and no temporary */
    got = cic_test_slurp(path, NULL);
    assert_string_equal(got, "old");
    free(got);
    assert_int_equal(count_entries(cic_test_tmp, &hidden), 1);
    assert_int_equal(hidden, 0);

    /* the fixed list is then accepted: the checks are not always-fail */
    t[1].name = "v";
    assert_int_equal(cic_safetensors_write(path, t, 2, NULL, &d), 0);
}

/* ---- table ---- */

static char *table_text(const cic_report *r, bool color)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    assert_non_null(f);
    cic_report_table(f, r, color);
    fclose(f);
    return buf;
}

/* Lines that start with a and contain b (b may be NULL). */
static int count_lines_with(const char *text, const char *a, const char *b)
{
    int n = 0;
    const char *p = text;
    while (*p) {
        const char *e = strchr(p, '\n');
        size_t l = e ? (size_t)(e - p) : strlen(p);
        char line[1024];
        if (l >= sizeof line)
            l = sizeof line - 1;
        memcpy(line, p, l);
        line[l] = '\0';
        if (strncmp(line, a, strlen(a)) == 0 && (!b || strstr(line, b)))
            n++;
        p += l + (e ? 1 : 0);
        if (!e)
            break;
    }
    return n;
}

static void test_table(void **state)
{
    cic_report r;
    char *s;
    (void)state;

    make_report(&r);
    s = table_text(&r, false);
    fputs(s, stderr); /* shown in the test log */
    assert_null(strchr(s, '\033'));
    assert_int_equal(count_lines_with(s, "none ", "f32-openblas"), 1);
    assert_int_equal(count_lines_with(s, "fuse ", "f32-openblas"), 1);
    assert_int_equal(count_lines_with(s, "fuse ", "mpfr"), 1);
    /* before row: no verdict columns, NaN shown as nan */
    assert_int_equal(count_lines_with(s, "none ", " nan "), 1);
    /* transformed row: Inf, large ULP in %.3g, small ULP as %.1f, FAIL, note */
    assert_int_equal(count_lines_with(s, "fuse ", "inf"), 1);
    assert_int_equal(count_lines_with(s, "fuse ", "1.23e+05"), 1);
    assert_int_equal(count_lines_with(s, "fuse ", " 100.0 "), 1);
    assert_int_equal(count_lines_with(s, "fuse ", "3 non-finite"), 1);
    assert_int_equal(count_lines_with(s, "FAIL gate fuse / f32-openblas / ulp_row.p99: value 100 > limit 64 (case line 12)", NULL), 1);
    assert_int_equal(count_lines_with(s, "FAIL gate", NULL), 1); /* passing gates not listed */
    assert_int_equal(count_lines_with(s, "fuse ", " PASS"), 1);
    assert_int_equal(count_lines_with(s, "truth proven: 1000 values, 2 at a higher precision; "
                                         "max relative radius 0.5; 64, 128 bits; recheck at +64 "
                                         "bits: max rel diff 2.5e-40",
                                      "overall FAIL"),
                     1);
    free(s);

    r.pass = true;
    r.truth_certified = false;
    r.proof.proven = false;
    r.proof.first = 990;
    g_gates[0].pass = true;
    s = table_text(&r, true);
    assert_non_null(strstr(s, "\033[32mPASS"));
    assert_non_null(strstr(s, "\033[31mFAIL")); /* row 1 still fails */
    assert_non_null(strstr(s, "\033[31mbroken")); /* unexpected verdict */
    assert_null(strstr(s, "FAIL gate"));
    assert_int_equal(count_lines_with(s, "truth ", "NOT proven: 8 of 1000 values straddle a "
                                                  "binary32 rounding boundary at 64, 128 bits"),
                     1);
    assert_non_null(strstr(s, "overall \033[1m\033[32mPASS"));
    free(s);

    /* an empty report prints the header and summary, no crash */
    memset(&r, 0, sizeof r);
    s = table_text(&r, false);
    assert_non_null(strstr(s, "overall PASS") ? s : strstr(s, "overall FAIL"));
    free(s);
}

/* ---- the analytical table of a dit case (flops.h) ---- */

/* A dit case of the sizes given, with one transform per strategy of
 * CIC_DIT_STRATEGIES and three more (mean-preserving streams, a fast
 * branch-rotate with a dense-Q stream setting). */
static void dit_case(cic_case *c, int d, int m, bool causal, bool final)
{
    static const struct {
        enum cic_xform_kind kind;
        enum cic_stream stream;
        bool fast;
    } extra[] = {{CIC_XFORM_ONLINE_UNROTATE, CIC_STREAM_MEAN_PRESERVING, false},
                 {CIC_XFORM_PER_SAMPLE_FOLD, CIC_STREAM_MEAN_PRESERVING, false},
                 {CIC_XFORM_STATIC_FOLD, CIC_STREAM_MEAN_PRESERVING, false}};
    memset(c, 0, sizeof *c);
    cic_strlcpy(c->name, "dit", sizeof c->name);
    c->model.block = CIC_BLOCK_DIT;
    c->model.d_model = d;
    c->model.heads = 4;
    c->model.d_mlp = m;
    c->model.mlp_ratio = (double)m / d;
    c->model.tokens = 32;
    c->model.samples = 3;
    c->model.layers = 2;
    c->model.d_cond = d / 2;
    c->model.d_out = 8;
    c->model.causal = causal;
    c->model.final_layer = final;
    c->model.act = CIC_ACT_GELU_TANH;
    for (int j = 0; j < CIC_DIT_STRATEGY_COUNT; j++) {
        cic_xform_spec *x = &c->xf[c->n_xf++];
        snprintf(x->name, sizeof x->name, "s%d", j);
        x->kind = CIC_DIT_STRATEGIES[j].kind;
        x->stream = CIC_DIT_STRATEGIES[j].stream;
        x->fast = CIC_DIT_STRATEGIES[j].fast;
        x->q = CIC_Q_HADAMARD;
        x->after = -1;
    }
    for (size_t j = 0; j < sizeof extra / sizeof extra[0]; j++) {
        cic_xform_spec *x = &c->xf[c->n_xf++];
        snprintf(x->name, sizeof x->name, "x%zu", j);
        x->kind = extra[j].kind;
        x->stream = extra[j].stream;
        x->fast = extra[j].fast;
        x->q = CIC_Q_RANDOM;
        x->after = -1;
    }
}

/* 100 (strategy - original) / original from the per-site formulas at B = 1
 * and N tokens; NAN when the strategy does not apply. */
static double formula_pct(const cic_model_cfg *cfg, enum cic_xform_kind kind,
                          enum cic_stream stream, bool fast, int tokens)
{
    cic_model_cfg c = *cfg;
    cic_dit_strategy s = {"", kind, stream, fast};
    cic_xform_spec x;
    cic_flop_count o, t;
    if (!cic_dit_strategy_applies(cfg, &s))
        return NAN;
    memset(&x, 0, sizeof x);
    x.kind = kind;
    x.stream = stream;
    x.fast = fast;
    x.after = -1;
    c.samples = 1;
    c.tokens = tokens;
    cic_flops_dit(&o, &c, NULL);
    cic_flops_dit(&t, &c, &x);
    return 100 * (cic_flop_total(&t) - cic_flop_total(&o)) / cic_flop_total(&o);
}

/* Same double, or both NaN. */
static void assert_same(double got, double want, const char *what, int i, int k)
{
    if (isnan(want) ? !isnan(got) : memcmp(&got, &want, sizeof got) != 0)
        fail_msg("%s [%d][%d] = %.17g, formulas give %.17g", what, i, k, got, want);
}

/* Every figure of the table equals the formula it was computed from, bit
 * for bit, on sizes where every strategy applies, where no fast one does (d
 * = 292 = 4 * 73), and where only online's does (m = 4672 = 64 * 73); a
 * case of another block gets no table. */
static void test_dit_table_values(void **state)
{
    static const struct {
        int d, m;
        bool causal, final;
    } sz[] = {{64, 256, false, true}, {292, 1168, true, false}, {1024, 4672, false, true}};
    static cic_case c;
    static cic_dit_flops_table t, zero;
    (void)state;
    for (size_t n = 0; n < sizeof sz / sizeof sz[0]; n++) {
        double nd, nf;
        dit_case(&c, sz[n].d, sz[n].m, sz[n].causal, sz[n].final);
        assert_true(cic_dit_flops_table_fill(&t, CIC_CASE_CHAIN(&c)));
        assert_memory_equal(&t.cfg, &c.model, sizeof c.model);
        assert_memory_equal(t.tokens, CIC_DIT_TABLE_TOKENS, sizeof t.tokens);
        assert_int_equal(t.n_xf, c.n_xf);
        for (int j = 0; j < CIC_DIT_STRATEGY_COUNT; j++) {
            const cic_dit_strategy *s = &CIC_DIT_STRATEGIES[j];
            assert_string_equal(t.label[j], s->label);
            for (int k = 0; k < CIC_DIT_TABLE_N; k++)
                assert_same(t.pct[j][k],
                            formula_pct(&c.model, s->kind, s->stream, s->fast, t.tokens[k]),
                            "pct", j, k);
        }
        for (int i = 0; i < c.n_xf; i++)
            for (int k = 0; k < CIC_DIT_TABLE_N; k++)
                assert_same(t.xf_pct[i][k],
                            formula_pct(&c.model, c.xf[i].kind, c.xf[i].stream, c.xf[i].fast,
                                        t.tokens[k]),
                            "xf_pct", i, k);
        cic_flops_dit_crossover(&nd, &nf, &c.model);
        assert_same(t.nstar_dense, nd, "nstar_dense", 0, 0);
        assert_same(t.nstar_fast, nf, "nstar_fast", 0, 0);
        /* the fast strategies' rows are n/a exactly where they do not apply */
        assert_int_equal(isnan(t.pct[1][0]), sz[n].d == 292);
        assert_int_equal(isnan(t.pct[4][0]), sz[n].d == 292 || sz[n].m == 4672);
    }
    c.model.block = CIC_BLOCK_PRELN;
    assert_false(cic_dit_flops_table_fill(&t, CIC_CASE_CHAIN(&c)));
    assert_memory_equal(&t, &zero, sizeof t);
}

static char *dit_table_text(const cic_dit_flops_table *t)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    assert_non_null(f);
    assert_int_equal(cic_report_dit_flops_table(f, t), 0);
    fclose(f);
    return buf;
}

/* report.json's flops_analytical as a number: extra_pct.<label>[k],
 * tokens[k] (label NULL) or crossover_tokens.<label>; NAN for null. */
static double fa_num(json_t *root, const char *obj, const char *label, int k)
{
    json_t *fa = json_object_get(root, "flops_analytical"), *v;
    assert_non_null(fa);
    v = json_object_get(fa, obj);
    if (label)
        v = json_object_get(v, label);
    if (k >= 0)
        v = json_array_get(v, (size_t)k);
    if (json_is_null(v))
        return NAN;
    assert_true(json_is_number(v));
    return json_number_value(v);
}

/* The terminal table and report.json print the table's own values: values
 * planted in it (no formula gives them) come out in both; without a table
 * report.json has no flops_analytical. */
static void test_dit_table_writers(void **state)
{
    static cic_case c;
    static cic_report r;
    char *s;
    json_t *j;
    (void)state;
    dit_case(&c, 64, 256, false, true);
    memset(&r, 0, sizeof r);
    r.kase = &c;
    r.has_dit_flops = cic_dit_flops_table_fill(&r.dit_flops, CIC_CASE_CHAIN(&c));
    r.dit_flops.cfg.d_model = 4242;
    r.dit_flops.label[3] = "planted-label";
    r.dit_flops.tokens[2] = 999;
    r.dit_flops.pct[4][2] = 4321.5;
    r.dit_flops.pct[0][0] = NAN;
    r.dit_flops.nstar_dense = 31.3;
    r.dit_flops.nstar_fast = INFINITY;

    s = dit_table_text(&r.dit_flops);
    fputs(s, stderr);
    assert_int_equal(count_lines_with(s, "dit extra FLOPs", "(B = 1; d = 4242, heads = 4,"), 1);
    assert_int_equal(count_lines_with(s, "       N", " planted-label "), 1);
    assert_int_equal(count_lines_with(s, "     999", "+4321.50%"), 1);
    assert_int_equal(count_lines_with(s, "      16              n/a ", NULL), 1);
    assert_int_equal(
        count_lines_with(s, "  N* per-sample-fold < online-dense: 31.3 (first integer N: 32)", NULL),
        1);
    assert_int_equal(count_lines_with(s, "  N* per-sample-fold < online-fast : never", NULL), 1);
    free(s);

    j = cic_report_to_json(&r);
    assert_non_null(j);
    cic_assert_close(fa_num(j, "tokens", NULL, 2), 999, 0, 0);
    cic_assert_close(fa_num(j, "extra_pct", "branch-fast", 2), 4321.5, 0, 0);
    assert_true(isnan(fa_num(j, "extra_pct", "online-dense", 0)));
    cic_assert_close(fa_num(j, "extra_pct", "planted-label", 0), r.dit_flops.pct[3][0], 0, 0);
    cic_assert_close(fa_num(j, "crossover_tokens", "per_sample_fold_vs_online_dense", -1), 31.3,
                     0, 0);
    assert_true(isnan(fa_num(j, "crossover_tokens", "per_sample_fold_vs_online_fast", -1)));
    json_decref(j);

    r.has_dit_flops = false;
    j = cic_report_to_json(&r);
    assert_non_null(j);
    assert_null(json_object_get(j, "flops_analytical"));
    json_decref(j);
}

/* The dump's truth keeps the binary32 the proof gave each value: a tiny
 * case is run and kept, then its truth values are replaced by planted
 * near-ties (each within 2^-60 of a binary32 midpoint, on alternating
 * sides, as a proven truth nudged off a tie is) and the dump written: the
 * float32 rounding of every dumped double must be the planted value's
 * binary32. On 6718a0a about half round to the other neighbour. */
static void test_dump_truth_ties(void **state)
{
    static const char text[] =
        "name = \"ties\"\n[model]\nblock = \"preln\"\nd_model = 8\nheads = 2\ntokens = 4\n"
        "samples = 1\nlayers = 1\nd_out = 4\n[engines]\nf32 = [\"openblas\"]\n"
        "mpfr_prec = 64\n";
    cic_case c;
    cic_pipeline *p = NULL;
    cic_pipeline_opts po;
    cic_diag d;
    char path[1200];
    cic_stfile *f;
    const cic_stfile_tensor *t;
    double *v;
    size_t i, n, wrong = 0;
    uint64_t key = cic_rng_key(17, "ties");
    (void)state;
    memset(&d, 0, sizeof d);
    memset(&po, 0, sizeof po);
    po.no_baseline = true;
    po.keep_models = true;
    if (cic_case_load_string(&c, text, "ties.toml", &d) != CIC_OK)
        fail_msg("case: %s", d.msg);
    assert_int_equal(cic_pipeline_run(&p, &c, &po, &d), CIC_OK);
    n = p->n;
    for (i = 0; i < n; i++) {
        uint32_t bits = (uint32_t)(cic_rng_u64(key, i) >> 40) | 0x3f000000u; /* [0.5, 2) */
        float a;
        double m;
        memcpy(&a, &bits, sizeof a);
        m = ((double)a + (double)nextafterf(a, INFINITY)) / 2;
        mpfr_set_d(p->truth[i], m, MPFR_RNDN);
        if (i % 2)
            mpfr_nextabove(p->truth[i]); /* 64 bits: 2^-63 relative off the tie */
        else
            mpfr_nextbelow(p->truth[i]);
    }
    assert_int_equal(cic_pipeline_dump(p, cic_test_tmp, &d), 0);
    snprintf(path, sizeof path, "%s/outputs.safetensors", cic_test_tmp);
    f = cic_stfile_create(path, &d);
    assert_non_null(f);
    t = cic_stfile_find(f, "truth");
    assert_non_null(t);
    assert_int_equal(t->count, n);
    v = cic_calloc(n, sizeof *v);
    assert_non_null(v);
    assert_int_equal(cic_stfile_tensor_read_f64(v, t, 0, n, &d), 0);
    for (i = 0; i < n; i++)
        if ((float)v[i] != cic_mp_get_f32(p->truth[i]) && wrong++ < 3)
            print_message("truth %zu: dumped %.17g rounds to %.9g, the truth to %.9g\n", i, v[i],
                          (double)(float)v[i], (double)cic_mp_get_f32(p->truth[i]));
    if (wrong)
        fail_msg("%zu of %zu dumped truth values round to the other binary32", wrong, n);
    free(v);
    cic_stfile_destroy(f);
    cic_pipeline_destroy(p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_env_fill),
        cmocka_unit_test_setup_teardown(test_json_round_trip, cic_test_tmp_setup, cic_test_tmp_teardown),
        cmocka_unit_test_setup_teardown(test_atomic_replace, cic_test_tmp_setup, cic_test_tmp_teardown),
        cmocka_unit_test_setup_teardown(test_write_failures, cic_test_tmp_setup, cic_test_tmp_teardown),
        cmocka_unit_test_setup_teardown(test_safetensors_round_trip, cic_test_tmp_setup, cic_test_tmp_teardown),
        cmocka_unit_test_setup_teardown(test_safetensors_rejects, cic_test_tmp_setup, cic_test_tmp_teardown),
        cmocka_unit_test_setup_teardown(test_dump_truth_ties, cic_test_tmp_setup, cic_test_tmp_teardown),
        cmocka_unit_test(test_table),
        cmocka_unit_test(test_dit_table_values),
        cmocka_unit_test(test_dit_table_writers),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
