/* SPDX-License-Identifier: MIT */
/* test_baseline.c: the regression gate's reader (src/report/baseline.c).
 *   - every shipped reference compares clean against the run it records
 *     (rebuilt by tests/fuzz/report_from_json.h), and a planted regression
 *     in that run fails exactly its check;
 *   - a baseline whose compared fields have the wrong type (strings, true,
 *     objects, negative figures, null counts), or lack a key, is refused
 *     with the file, the row and the field; one whose figures are null, or
 *     whose rows or groups are missing, fails checks instead of passing;
 *   - FIFOs, folders and devices are refused without being opened for a
 *     blocking read; duplicate keys and deep nesting are reported;
 *   - cic_baseline_probe and cic_baseline_dir_check;
 *   - every input in tests/fuzz-regressions/baseline compares or fails with
 *     a message. */
#include "report/baseline.h"

#include "fuzz/report_from_json.h"
#include "testutil.h"

#include <dirent.h>
#include <jansson.h>
#include <signal.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static json_t *g_ref;      /* reference/layernorm.json */
static cic_report g_run;   /* the run it records */

static int setup(void **state)
{
    char p[1024];
    json_error_t je;
    if (cic_test_tmp_setup(state) != 0)
        return -1;
    g_ref = json_load_file(cic_test_path(p, sizeof p, "reference/layernorm.json"), 0, &je);
    if (!g_ref || cic_test_report_from_json(&g_run, g_ref) != 0) {
        fprintf(stderr, "%s: %s\n", p, je.text);
        return -1;
    }
    return 0;
}

static int teardown(void **state)
{
    json_decref(g_ref);
    free(g_run.results);
    return cic_test_tmp_teardown(state);
}

/* Compare a fresh copy of the run with the baseline at path. */
static int compare(const char *path, cic_report *r, cic_diag *d)
{
    cic_report tmp = g_run;
    int rc;
    tmp.regress = NULL;
    tmp.n_regress = 0;
    tmp.has_baseline = false;
    tmp.pass = true;
    memset(d, 0, sizeof *d);
    rc = cic_baseline_compare(&tmp, path, &CIC_TOLERANCE_DEFAULT, d);
    *r = tmp;
    return rc;
}

static int n_failed(const cic_report *r)
{
    int k, n = 0;
    for (k = 0; k < r->n_regress; k++)
        n += !r->regress[k].pass;
    return n;
}

/* ---- the shipped references ---- */

static void test_references_compare_clean(void **state)
{
    char dir[1024], p[2048];
    DIR *dp;
    struct dirent *de;
    int n = 0;
    (void)state;
    dp = opendir(cic_test_path(dir, sizeof dir, "reference"));
    assert_non_null(dp);
    while ((de = readdir(dp))) {
        json_error_t je;
        json_t *root;
        cic_report run, r;
        cic_diag d;
        size_t len = strlen(de->d_name);
        if (len < 5 || strcmp(de->d_name + len - 5, ".json"))
            continue;
        snprintf(p, sizeof p, "%s/%s", dir, de->d_name);
        root = json_load_file(p, 0, &je);
        assert_non_null(root);
        assert_int_equal(cic_test_report_from_json(&run, root), 0);
        memset(&d, 0, sizeof d);
        r = run;
        if (cic_baseline_compare(&r, p, &CIC_TOLERANCE_DEFAULT, &d) != 0)
            fail_msg("%s refused: %s", p, d.msg);
        if (!r.pass || n_failed(&r) || r.n_regress < 2 + r.n_results)
            fail_msg("%s against its own run: pass %d, %d of %d checks failed", p, r.pass,
                     n_failed(&r), r.n_regress);
        free(r.regress);
        free(run.results);
        json_decref(root);
        n++;
    }
    closedir(dp);
    assert_true(n >= 10);
}

/* The planted fault: a regression in the run fails exactly its check. */
static void test_planted_regression_fails(void **state)
{
    char p[1024];
    cic_report r;
    cic_diag d;
    cic_result save = g_run.results[6];
    int k, failed = 0;
    (void)state;
    cic_test_path(p, sizeof p, "reference/layernorm.json");
    g_run.results[6].metrics.rel_norm2 *= 100;
    assert_int_equal(compare(p, &r, &d), 0);
    g_run.results[6] = save;
    assert_false(r.pass);
    for (k = 0; k < r.n_regress; k++)
        if (!r.regress[k].pass) {
            failed++;
            assert_string_equal(r.regress[k].metric, "rel_norm2");
            assert_string_equal(r.regress[k].transform, g_run.results[6].transform);
        }
    assert_int_equal(failed, 1);
    free(r.regress);
}

/* ---- defect: a baseline of the wrong types passed vacuously ---- */

/* json at results[row] / key path ("metrics", "ulp_row", "p99" ...) */
static json_t *at(json_t *root, int row, const char *k1, const char *k2)
{
    json_t *o = json_array_get(json_object_get(root, "results"), (size_t)row);
    if (k1)
        o = json_object_get(o, k1);
    if (k2)
        o = json_object_get(o, k2);
    return o;
}

/* A copy of the reference with results[row].k1[.k2][.k3] set to v (NULL:
 * deleted), written to a temporary file; returns the compare rc. */
static int compare_with(int row, const char *k1, const char *k2, const char *k3, json_t *v,
                        cic_report *r, cic_diag *d, char *path, size_t cap)
{
    json_t *root = json_deep_copy(g_ref), *o;
    const char *last = k3 ? k3 : k2 ? k2 : k1;
    int rc;
    o = json_array_get(json_object_get(root, "results"), (size_t)row);
    if (k2)
        o = json_object_get(o, k1);
    if (k3)
        o = json_object_get(o, k2);
    if (!json_is_object(o))
        fail_msg("test bug: no object above %s at row %d", last, row);
    if (v)
        json_object_set_new(o, last, v);
    else
        json_object_del(o, last);
    cic_test_tmp_path(path, cap, "mutated.json");
    cic_test_write_json(path, root);
    json_decref(root);
    rc = compare(path, r, d);
    return rc;
}

static void expect_refused(int row, const char *k1, const char *k2, const char *k3, json_t *v,
                           const char *want)
{
    char path[1024];
    cic_report r;
    cic_diag d;
    const char *vs = v ? (json_is_string(v) ? "a string" : json_is_null(v) ? "null" : "value")
                       : "deleted";
    int rc = compare_with(row, k1, k2, k3, v, &r, &d, path, sizeof path);
    if (rc == 0) {
        int nf = n_failed(&r);
        free(r.regress);
        fail_msg("results[%d].%s%s%s%s%s = %s: compared (%d checks, %d failed), expected a "
                 "refusal naming '%s'", row, k1, k2 ? "." : "", k2 ? k2 : "", k3 ? "." : "",
                 k3 ? k3 : "", vs, r.n_regress, nf, want);
    }
    if (strcmp(d.file, path) != 0 || !strstr(d.msg, want))
        fail_msg("got \"%s: %s\", expected %s and '%s'", d.file, d.msg, path, want);
    if (row >= 0 && !strstr(d.msg, "results["))
        fail_msg("the message does not name the row: %s", d.msg);
}

/* Each compared metric as a string, a boolean, an object, an array. */
static void test_wrong_types_refused(void **state)
{
    static const char *const figures[][2] = {
        {"max_abs", NULL}, {"rel_norm2", NULL}, {"nonfinite", NULL},
        {"ulp_row", "max"}, {"ulp_row", "p99"}, {"ulp_row", "mean"},
        {"ulp_elem", "max"}, {"ulp_elem", "p99"}, {"ulp_elem", "mean"},
        {"drift", "max"}, {"drift", "p99"}, {"drift", "mean"}};
    size_t i;
    char want[64];
    (void)state;
    for (i = 0; i < sizeof figures / sizeof figures[0]; i++) {
        snprintf(want, sizeof want, "metrics.%s%s%s is a string", figures[i][0],
                 figures[i][1] ? "." : "", figures[i][1] ? figures[i][1] : "");
        expect_refused(6, "metrics", figures[i][0], figures[i][1], json_string("0.1"), want);
        expect_refused(6, "metrics", figures[i][0], figures[i][1], json_true(), "boolean");
        expect_refused(6, "metrics", figures[i][0], figures[i][1], json_object(), "object");
        expect_refused(6, "metrics", figures[i][0], figures[i][1], json_pack("[f]", 1.0),
                       "array");
        expect_refused(6, "metrics", figures[i][0], figures[i][1], json_integer(-1),
                       "never negative");
        expect_refused(6, "metrics", figures[i][0], figures[i][1], NULL, "no metrics.");
    }
    expect_refused(6, "metrics", "nonfinite", NULL, json_null(), "integer count");
    expect_refused(6, "metrics", "nonfinite", NULL, json_real(0.5), "integer count");
    expect_refused(6, "metrics", "ulp_row", NULL, json_null(), "metrics.ulp_row is null");
    expect_refused(6, "metrics", "drift", NULL, json_string("x"), "metrics.drift is a string");
    expect_refused(6, "metrics", NULL, NULL, json_string("x"), "metrics is a string");
    expect_refused(6, "metrics", NULL, NULL, NULL, "no metrics");
    expect_refused(6, "verdict", NULL, NULL, json_integer(0), "verdict is an integer");
    expect_refused(6, "verdict", NULL, NULL, json_string("fine"), "verdict is a string fine");
    expect_refused(6, "verdict", NULL, NULL, NULL, "verdict is missing");
    expect_refused(5, "mpfr_sha256", NULL, NULL, json_integer(1), "mpfr_sha256 is an integer");
    expect_refused(6, "flops", "transformed", NULL, json_string("8448"),
                   "flops.transformed is a string");
    expect_refused(6, "flops", "transformed", NULL, json_null(), "flops.transformed is null");
    expect_refused(6, "flops", NULL, NULL, NULL, "no flops");
    expect_refused(6, "transform", NULL, NULL, json_integer(3), "transform is an integer");
    expect_refused(6, "engine", NULL, NULL, json_string(""), "engine is empty");
    expect_refused(6, "transform", NULL, NULL, json_string("rotate-hadamard"),
                   "results[9] (rotate-hadamard, f32-openblas): the same row as results[6]");
}

static void test_wrong_structure_refused(void **state)
{
    char path[1024];
    cic_report r;
    cic_diag d;
    json_t *root;
    (void)state;
    cic_test_tmp_path(path, sizeof path, "structure.json");
#define REFUSED(want)                                                                     \
    do {                                                                                  \
        cic_test_write_json(path, root);                                                  \
        json_decref(root);                                                                \
        if (compare(path, &r, &d) == 0)                                                   \
            fail_msg("accepted, expected '%s'", want);                                    \
        if (!strstr(d.msg, want) || strcmp(d.file, path))                                 \
            fail_msg("got \"%s: %s\", expected '%s'", d.file, d.msg, want);               \
    } while (0)
    root = json_deep_copy(g_ref);
    json_object_set_new(root, "results", json_string("[]"));
    REFUSED("results is a string");
    root = json_deep_copy(g_ref);
    json_object_set_new(root, "results", json_object());
    REFUSED("results is an object");
    root = json_deep_copy(g_ref);
    json_array_set_new(json_object_get(root, "results"), 3, json_integer(7));
    REFUSED("results[3] is an integer");
    root = json_deep_copy(g_ref);
    json_object_set_new(root, "weights_sha256", json_integer(7));
    REFUSED("weights_sha256 is an integer");
    root = json_deep_copy(g_ref);
    json_object_del(root, "truth_sha256");
    REFUSED("truth_sha256 is missing");
    root = json_pack("[{}]");
    REFUSED("the document is an array");

    /* duplicate keys: jansson would keep one silently */
    cic_test_write_text(path, "{\"weights_sha256\":\"a\",\"weights_sha256\":\"b\","
                              "\"truth_sha256\":\"\",\"results\":[]}");
    assert_int_not_equal(compare(path, &r, &d), 0);
    assert_non_null(strstr(d.msg, "duplicate"));
    /* truncated: the position is given */
    cic_test_write_text(path, "{\"weights_sha256\": \"a\",\n \"results\": [");
    assert_int_not_equal(compare(path, &r, &d), 0);
    assert_non_null(strstr(d.msg, "cannot read baseline"));
    assert_true(d.line == 2);
    /* nested beyond any report: jansson's cap, reported */
    {
        size_t i, n = 200000;
        char *deep = malloc(n + 1);
        for (i = 0; i < n; i++)
            deep[i] = '[';
        deep[n] = '\0';
        cic_test_write_text(path, deep);
        free(deep);
    }
    assert_int_not_equal(compare(path, &r, &d), 0);
    assert_non_null(strstr(d.msg, "depth"));
#undef REFUSED
}

/* Nulls and missing rows or groups: compared, and failing. */
static void test_nulls_and_gaps_fail(void **state)
{
    char path[1024];
    cic_report r;
    cic_diag d;
    json_t *root, *m;
    size_t i;
    (void)state;
    /* every float figure of every row null: the metric checks all fail */
    root = json_deep_copy(g_ref);
    for (i = 0; i < json_array_size(json_object_get(root, "results")); i++) {
        static const char *const groups[] = {"ulp_row", "ulp_elem", "drift"};
        size_t g;
        m = at(root, (int)i, "metrics", NULL);
        if (!json_is_object(m))
            continue;
        json_object_set_new(m, "max_abs", json_null());
        json_object_set_new(m, "rel_norm2", json_null());
        for (g = 0; g < 3; g++) {
            json_t *o = json_object_get(m, groups[g]);
            if (json_is_object(o)) {
                json_object_set_new(o, "max", json_null());
                json_object_set_new(o, "p99", json_null());
                json_object_set_new(o, "mean", json_null());
            }
        }
    }
    cic_test_tmp_path(path, sizeof path, "nulls.json");
    cic_test_write_json(path, root);
    json_decref(root);
    assert_int_equal(compare(path, &r, &d), 0);
    assert_false(r.pass);
    /* 10 rows with metrics: 2 + 6 figures each, + 3 drift figures on the 8
     * transformed ones */
    assert_int_equal(n_failed(&r), 10 * 8 + 8 * 3);
    free(r.regress);

    /* a null figure where the run's is non-finite too: unchanged */
    {
        cic_result save = g_run.results[6];
        assert_int_equal(compare_with(6, "metrics", "rel_norm2", NULL, json_null(), &r, &d,
                                      path, sizeof path), 0);
        assert_false(r.pass);
        free(r.regress);
        g_run.results[6].metrics.rel_norm2 = NAN;
        assert_int_equal(compare_with(6, "metrics", "rel_norm2", NULL, json_null(), &r, &d,
                                      path, sizeof path), 0);
        g_run.results[6] = save;
        assert_true(r.pass);
        free(r.regress);
    }

    /* metrics null on a float32 row, drift null on a transformed row, the
     * verdict null where the run has one, the MPFR hash missing: each a
     * failed check */
    assert_int_equal(compare_with(6, "metrics", NULL, NULL, json_null(), &r, &d, path,
                                  sizeof path), 0);
    assert_false(r.pass);
    assert_int_equal(n_failed(&r), 1);
    free(r.regress);
    assert_int_equal(compare_with(6, "metrics", "drift", NULL, json_null(), &r, &d, path,
                                  sizeof path), 0);
    assert_false(r.pass);
    assert_int_equal(n_failed(&r), 3);
    free(r.regress);
    assert_int_equal(compare_with(6, "verdict", NULL, NULL, json_null(), &r, &d, path,
                                  sizeof path), 0);
    assert_int_equal(n_failed(&r), 1);
    free(r.regress);
    assert_int_equal(compare_with(0, "verdict", NULL, NULL, json_string("equivalent"), &r, &d,
                                  path, sizeof path), 0);
    assert_int_equal(n_failed(&r), 1);
    free(r.regress);
    assert_int_equal(compare_with(5, "mpfr_sha256", NULL, NULL, NULL, &r, &d, path,
                                  sizeof path), 0);
    assert_int_equal(n_failed(&r), 1);
    free(r.regress);
    assert_int_equal(compare_with(6, "mpfr_sha256", NULL, NULL, json_string("00"), &r, &d, path,
                                  sizeof path), 0);
    assert_int_equal(n_failed(&r), 1);
    free(r.regress);
    /* metrics on the mpfr row, which has none */
    assert_int_equal(compare_with(5, "metrics", NULL, NULL,
                                  json_deep_copy(at(g_ref, 6, "metrics", NULL)), &r, &d, path,
                                  sizeof path), 0);
    assert_int_equal(n_failed(&r), 1);
    free(r.regress);

    /* a row less, and no rows at all */
    root = json_deep_copy(g_ref);
    json_array_remove(json_object_get(root, "results"), 6);
    cic_test_write_json(path, root);
    json_decref(root);
    assert_int_equal(compare(path, &r, &d), 0);
    assert_int_equal(n_failed(&r), 1);
    free(r.regress);
    root = json_deep_copy(g_ref);
    json_object_set_new(root, "results", json_array());
    cic_test_write_json(path, root);
    json_decref(root);
    assert_int_equal(compare(path, &r, &d), 0);
    assert_int_equal(n_failed(&r), g_run.n_results);
    free(r.regress);
}

/* ---- files that are not regular files ---- */

static void on_alarm(int sig)
{
    (void)sig;
    fprintf(stderr, "blocked on a FIFO baseline\n");
    _exit(1);
}

static void test_not_regular_files(void **state)
{
    char fifo[1024], dir[1024], link[1024], file[1024];
    cic_report r;
    cic_diag d;
    json_t *j;
    (void)state;
    cic_test_tmp_path(fifo, sizeof fifo, "fifo.json");
    cic_test_tmp_path(dir, sizeof dir, "dir.json");
    cic_test_tmp_path(link, sizeof link, "dangling.json");
    cic_test_tmp_path(file, sizeof file, "plain.json");
    assert_int_equal(mkfifo(fifo, 0600), 0);
    assert_int_equal(mkdir(dir, 0700), 0);
    assert_int_equal(symlink("nowhere.json", link), 0);
    cic_test_write_json(file, g_ref);

    /* opening a FIFO for reading waits for a writer: it must not be opened
     * that way (the alarm turns a hang into a failure) */
    signal(SIGALRM, on_alarm);
    alarm(20);
    assert_int_not_equal(compare(fifo, &r, &d), 0);
    alarm(0);
    assert_string_equal(d.file, fifo);
    assert_non_null(strstr(d.msg, "FIFO"));
    assert_int_not_equal(compare(dir, &r, &d), 0);
    assert_non_null(strstr(d.msg, "folder"));
    assert_int_not_equal(compare("/dev/null", &r, &d), 0);
    assert_non_null(strstr(d.msg, "device"));

    assert_int_equal(cic_baseline_probe(file, &d), 1);
    assert_int_equal(cic_baseline_probe(dir, &d), -1);
    assert_non_null(strstr(d.msg, "folder"));
    assert_int_equal(cic_baseline_probe(fifo, &d), -1);
    assert_non_null(strstr(d.msg, "FIFO"));
    assert_string_equal(d.file, fifo);
    assert_int_equal(cic_baseline_probe(link, &d), -1);
    assert_non_null(strstr(d.msg, "dangling"));
    cic_test_tmp_path(link, sizeof link, "absent.json");
    assert_int_equal(cic_baseline_probe(link, &d), 0);

    assert_int_equal(cic_baseline_dir_check(cic_test_tmp, &d), 0);
    assert_int_equal(cic_baseline_dir_check(link, &d), -1);
    assert_string_equal(d.file, link);
    assert_int_equal(cic_baseline_dir_check(file, &d), -1);
    assert_non_null(strstr(d.msg, "regular file"));
    assert_int_equal(cic_baseline_dir_check("", &d), -1);

    /* the loader's size cap */
    assert_null(cic_report_json_load(file, 10, &d));
    assert_non_null(strstr(d.msg, "over the 10"));
    j = cic_report_json_load(file, (size_t)1 << 30, &d);
    assert_non_null(j);
    assert_true(json_equal(j, g_ref));
    json_decref(j);
}

/* Inputs the fuzzer (scripts/fuzz.sh baseline) once broke on, compared as
 * tests/fuzz/fuzz_baseline.c does: against the layernorm run. */
static void check_fuzz_input(const char *path, const char *name, void *ctx)
{
    cic_report r;
    cic_diag d;
    (void)name;
    (void)ctx;
    if (compare(path, &r, &d) != 0 && (!d.msg[0] || strcmp(d.file, path) != 0))
        fail_msg("%s: refused without a message naming it (%s: %s)", path, d.file, d.msg);
    free(r.regress);
}

static void test_fuzz_regressions(void **state)
{
    (void)state;
    cic_test_each_file("tests/fuzz-regressions/baseline", check_fuzz_input, NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_references_compare_clean),
        cmocka_unit_test(test_planted_regression_fails),
        cmocka_unit_test(test_wrong_types_refused),
        cmocka_unit_test(test_wrong_structure_refused),
        cmocka_unit_test(test_nulls_and_gaps_fail),
        cmocka_unit_test(test_not_regular_files),
        cmocka_unit_test(test_fuzz_regressions),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
