/* SPDX-License-Identifier: MIT */
/* test_api.c: sweeps, case shards and merges through the public API
 * (include/cicheck/cicheck.h, src/api/session.c), against the cicheck
 * binary on the same case files:
 *   - a tiny sweep (d_model 8 and 16, seeds 1 and 2: 4 points) run with
 *     cic_session_run_sweep gives the points, verdicts and exit codes that
 *     `cicheck run` writes to sweep.json, the same result rows and the same
 *     aggregate; its two shards merged with cic_session_merge give it
 *     again; one shard alone is refused (a point is missing), naming it;
 *   - a case of 3 samples split in 2 (cic_session_run_shard) and merged
 *     gives the rows `cicheck run` gives unsharded (verdicts, every figure,
 *     the output hashes), and report.json the same results; `cicheck merge`
 *     of the API's shards writes the same results as the API's merge;
 *   - misuse: no output folder, a sweep case given to run_shard, a shard
 *     out of range, no shard folders: CIC_EXIT_INPUT with a message. */
#include "cicheck/cicheck.h"

#include "testutil.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

static const char SWEEP_TOML[] =
    "name = \"api-sweep\"\n[model]\nblock = \"preln\"\nheads = 2\ntokens = 4\nsamples = 1\n"
    "layers = 1\nd_out = 4\n[engines]\nf32 = [\"openblas\"]\n"
    "[sweep]\nd_model = [8, 16]\nseed = [1, 2]\n"
    "[[transforms]]\nname = \"fuse\"\nkind = \"fuse-layernorm\"\n"
    "[[transforms]]\nname = \"rotate\"\nkind = \"rotate\"\nafter = \"fuse\"\nq = \"random\"\n"
    "seed = 3\n";

static const char CASE_TOML[] =
    "name = \"api-case\"\n[model]\nblock = \"rmsnorm\"\nd_model = 8\nheads = 2\ntokens = 4\n"
    "samples = 3\nlayers = 1\nseed = 5\n[engines]\nf32 = [\"fixed-order\", \"openblas\"]\n"
    "[[transforms]]\nname = \"fold\"\nkind = \"fold-rmsnorm-gamma\"\n"
    "[[transforms]]\nname = \"gamma-kept\"\nkind = \"rotate\"\nq = \"random\"\n"
    "seed = 2\nexpect = \"broken\"\n";

/* Run the cicheck binary of this build with args (a shell word list);
 * its exit code. */
static int cli(const char *args)
{
    const char *build = getenv("CIC_BUILD_ROOT");
    char cmd[4096];
    int st;
    if (!build)
        fail_msg("CIC_BUILD_ROOT is not set (run through meson test)");
    snprintf(cmd, sizeof cmd, "'%s/cicheck' %s >/dev/null 2>&1", build, args);
    st = system(cmd);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static json_t *load_json(const char *dir, const char *file)
{
    char path[1400];
    json_error_t e;
    json_t *j;
    snprintf(path, sizeof path, "%s/%s", dir, file);
    j = json_load_file(path, 0, &e);
    if (!j)
        fail_msg("%s: %s", path, e.text);
    return j;
}

/* results without their per_block entries (a merge of case shards has
 * none: per_block null), a new reference */
static json_t *no_per_block(const json_t *results)
{
    json_t *c = json_deep_copy(results), *r;
    size_t i;
    json_array_foreach(c, i, r)
        json_object_del(r, "per_block");
    return c;
}

static void expect_json_equal(const json_t *a, const json_t *b, const char *what)
{
    if (!json_equal((json_t *)a, (json_t *)b)) {
        char *x = json_dumps(a, JSON_COMPACT), *y = json_dumps(b, JSON_COMPACT);
        fail_msg("%s differs:\n  api %.600s\n  cli %.600s", what, x ? x : "?", y ? y : "?");
    }
}

/* The session's points against the CLI's sweep.json (cli): index, params,
 * exit code, each transform's verdict, the result rows, the aggregate. */
static void check_points(const cic_session *s, const json_t *cli_sweep)
{
    json_t *pts = json_object_get(cli_sweep, "points");
    char api_dir[1100];
    json_t *api;
    int i;
    assert_int_equal(cic_session_point_count(s), (int)json_array_size(pts));
    for (i = 0; i < cic_session_point_count(s); i++) {
        json_t *p = json_array_get(pts, (size_t)i), *params;
        char *ptext;
        assert_int_equal(cic_session_point_index(s, i),
                         json_integer_value(json_object_get(p, "index")));
        assert_int_equal(cic_session_point_exit_code(s, i),
                         json_integer_value(json_object_get(p, "exit_code")));
        params = json_object_get(p, "params");
        ptext = json_dumps(params, JSON_COMPACT);
        assert_string_equal(cic_session_point_params(s, i), ptext);
        free(ptext);
        assert_string_equal(cic_session_point_verdict(s, i, "fuse"), "equivalent");
        assert_string_equal(cic_session_point_verdict(s, i, "rotate"), "equivalent");
        assert_null(cic_session_point_verdict(s, i, "no-such-transform"));
    }
    assert_int_equal(cic_session_point_exit_code(s, i), CIC_EXIT_INPUT);
    assert_null(cic_session_point_params(s, i));
    /* the written sweep.json: the same rows and aggregate as the CLI's */
    snprintf(api_dir, sizeof api_dir, "%s", cic_session_output(s));
    *strrchr(api_dir, '/') = '\0';
    api = load_json(api_dir, "sweep.json");
    for (i = 0; i < (int)json_array_size(pts); i++) {
        json_t *a = json_object_get(json_array_get(json_object_get(api, "points"), (size_t)i),
                                    "report");
        json_t *b = json_object_get(json_array_get(pts, (size_t)i), "report");
        expect_json_equal(json_object_get(a, "results"), json_object_get(b, "results"),
                          "a point's results");
        expect_json_equal(json_object_get(a, "truth_sha256"),
                          json_object_get(b, "truth_sha256"), "a point's truth_sha256");
    }
    expect_json_equal(json_object_get(api, "aggregate"),
                      json_object_get(cli_sweep, "aggregate"), "the aggregate");
    expect_json_equal(json_object_get(api, "pass"), json_object_get(cli_sweep, "pass"), "pass");
    json_decref(api);
}

static void test_sweep_and_merge(void **state)
{
    char toml[1024], cli_dir[1024], a1[1024], s1[1024], s2[1024], m[1024];
    char args[4200];
    const char *dirs[2] = {s1, s2};
    cic_session *s = cic_session_create();
    json_t *cli_sweep;
    (void)state;
    assert_non_null(s);
    cic_test_tmp_path(toml, sizeof toml, "api-sweep.toml");
    cic_test_write_text(toml, SWEEP_TOML);
    cic_test_tmp_path(cli_dir, sizeof cli_dir, "cli-sweep");
    snprintf(args, sizeof args, "run --quiet --no-color --no-plots --out '%s' '%s'", cli_dir,
             toml);
    assert_int_equal(cli(args), 0);
    cli_sweep = load_json(cli_dir, "sweep.json");

    assert_int_equal(cic_session_load(s, toml), CIC_EXIT_PASS);
    /* no output folder: refused, with a message */
    assert_int_equal(cic_session_run_sweep(s, 0, 0), CIC_EXIT_INPUT);
    assert_non_null(strstr(cic_session_error(s), "output folder"));
    cic_test_tmp_path(a1, sizeof a1, "api-sweep");
    assert_int_equal(cic_session_set_out_dir(s, a1), CIC_EXIT_PASS);
    assert_int_equal(cic_session_run_sweep(s, 3, 2), CIC_EXIT_INPUT);
    assert_int_equal(cic_session_run_sweep(s, 0, 0), CIC_EXIT_PASS);
    assert_true(cic_session_pass(s));
    assert_non_null(strstr(cic_session_output(s), "api-sweep/sweep.json"));
    assert_int_equal(cic_session_result_count(s), 0);
    check_points(s, cli_sweep);

    /* two shards, merged */
    cic_test_tmp_path(s1, sizeof s1, "api-s1");
    cic_test_tmp_path(s2, sizeof s2, "api-s2");
    assert_int_equal(cic_session_set_out_dir(s, s1), CIC_EXIT_PASS);
    assert_int_equal(cic_session_run_sweep(s, 1, 2), CIC_EXIT_PASS);
    assert_int_equal(cic_session_point_count(s), 2);
    assert_int_equal(cic_session_point_index(s, 1), 2);
    assert_int_equal(cic_session_set_out_dir(s, s2), CIC_EXIT_PASS);
    assert_int_equal(cic_session_run_sweep(s, 2, 2), CIC_EXIT_PASS);
    cic_test_tmp_path(m, sizeof m, "api-merged");
    assert_int_equal(cic_session_set_out_dir(s, m), CIC_EXIT_PASS);
    /* one shard alone: points 1 and 3 are missing */
    assert_int_equal(cic_session_merge(s, dirs, 1), CIC_EXIT_INPUT);
    assert_non_null(strstr(cic_session_error(s), "missing"));
    assert_int_equal(cic_session_point_count(s), 0);
    assert_null(cic_session_output(s));
    assert_int_equal(cic_session_merge(s, dirs, 2), CIC_EXIT_PASS);
    assert_true(cic_session_pass(s));
    check_points(s, cli_sweep);
    assert_int_equal(cic_session_merge(s, NULL, 2), CIC_EXIT_INPUT);
    assert_true(cic_session_error(s)[0] != '\0');
    json_decref(cli_sweep);
    cic_session_destroy(s);
}

/* The session's rows against the result rows of a report.json. */
static void check_rows(const cic_session *s, const json_t *rep)
{
    static const char *const figs[] = {"max_abs", "rel_norm2", "ulp_row.max", "ulp_row.p99",
                                       "drift.max"};
    json_t *rows = json_object_get(rep, "results");
    int i;
    size_t f;
    assert_int_equal(cic_session_result_count(s), (int)json_array_size(rows));
    for (i = 0; i < cic_session_result_count(s); i++) {
        const cic_row *r = cic_session_result(s, i);
        json_t *row = json_array_get(rows, (size_t)i), *m = json_object_get(row, "metrics");
        const char *v = json_string_value(json_object_get(row, "verdict"));
        assert_string_equal(cic_row_transform(r),
                            json_string_value(json_object_get(row, "transform")));
        assert_string_equal(cic_row_engine(r), json_string_value(json_object_get(row, "engine")));
        if (v)
            assert_string_equal(cic_row_verdict(r), v);
        else
            assert_null(cic_row_verdict(r));
        for (f = 0; f < sizeof figs / sizeof figs[0]; f++) {
            const char *dot = strchr(figs[f], '.');
            char head[32];
            json_t *x;
            double got;
            snprintf(head, sizeof head, "%.*s", dot ? (int)(dot - figs[f]) : 31, figs[f]);
            x = dot ? json_object_get(json_object_get(m, head), dot + 1)
                    : json_object_get(m, figs[f]);
            if (!json_is_number(x))
                continue;
            assert_int_equal(cic_row_metric(r, figs[f], &got), CIC_EXIT_PASS);
            if (got != json_number_value(x))
                fail_msg("row %d %s: api %.17g, cli %.17g", i, figs[f], got,
                         json_number_value(x));
        }
    }
}

static void test_case_shards(void **state)
{
    char toml[1024], sw[1024], cli_dir[1024], s1[1024], s2[1024], m[1024], cm[1024];
    char args[4400];
    const char *dirs[2] = {s1, s2};
    cic_session *s = cic_session_create();
    json_t *cli_rep, *api_rep, *cli_merged;
    (void)state;
    assert_non_null(s);
    cic_test_tmp_path(toml, sizeof toml, "api-case.toml");
    cic_test_write_text(toml, CASE_TOML);
    cic_test_tmp_path(cli_dir, sizeof cli_dir, "cli-case");
    snprintf(args, sizeof args, "run --quiet --no-color --no-baseline --out '%s' '%s'", cli_dir,
             toml);
    assert_int_equal(cli(args), 0);
    cli_rep = load_json(cli_dir, "report.json");

    assert_int_equal(cic_session_load(s, toml), CIC_EXIT_PASS);
    cic_test_tmp_path(s1, sizeof s1, "api-c1");
    cic_test_tmp_path(s2, sizeof s2, "api-c2");
    assert_int_equal(cic_session_set_out_dir(s, s1), CIC_EXIT_PASS);
    assert_int_equal(cic_session_run_shard(s, 4, 4), CIC_EXIT_INPUT); /* 3 samples */
    assert_non_null(strstr(cic_session_error(s), "at most 3 shards"));
    assert_int_equal(cic_session_run_shard(s, 3, 2), CIC_EXIT_INPUT);
    assert_int_equal(cic_session_run_shard(s, 1, 2), CIC_EXIT_PASS);
    assert_non_null(strstr(cic_session_output(s), "api-c1/case-shard.json"));
    assert_int_equal(cic_session_set_out_dir(s, s2), CIC_EXIT_PASS);
    assert_int_equal(cic_session_run_shard(s, 2, 2), CIC_EXIT_PASS);
    cic_test_tmp_path(m, sizeof m, "api-cmerged");
    assert_int_equal(cic_session_set_out_dir(s, m), CIC_EXIT_PASS);
    assert_int_equal(cic_session_merge(s, dirs, 2), CIC_EXIT_PASS);
    assert_true(cic_session_pass(s));
    assert_string_equal(cic_session_case_name(s), "api-case");
    assert_non_null(strstr(cic_session_output(s), "api-cmerged/report.json"));
    check_rows(s, cli_rep);
    api_rep = load_json(m, "report.json");
    {
        json_t *a = no_per_block(json_object_get(api_rep, "results"));
        json_t *b = no_per_block(json_object_get(cli_rep, "results"));
        expect_json_equal(a, b, "the merged results (but per_block, null when merged)");
        json_decref(a);
        json_decref(b);
    }
    expect_json_equal(json_object_get(api_rep, "truth_sha256"),
                      json_object_get(cli_rep, "truth_sha256"), "truth_sha256");
    /* the CLI merges the API's shards to the same report */
    cic_test_tmp_path(cm, sizeof cm, "cli-cmerged");
    snprintf(args, sizeof args, "merge --no-color --no-baseline --out '%s' '%s' '%s'", cm, s1,
             s2);
    assert_int_equal(cli(args), 0);
    cli_merged = load_json(cm, "report.json");
    expect_json_equal(json_object_get(api_rep, "results"),
                      json_object_get(cli_merged, "results"), "the CLI's merge of the shards");

    /* a sweep case is not split by samples */
    cic_test_tmp_path(sw, sizeof sw, "api-sweep2.toml");
    cic_test_write_text(sw, SWEEP_TOML);
    assert_int_equal(cic_session_load(s, sw), CIC_EXIT_PASS);
    assert_int_equal(cic_session_run_shard(s, 1, 2), CIC_EXIT_INPUT);
    assert_non_null(strstr(cic_session_error(s), "[sweep]"));
    json_decref(cli_rep);
    json_decref(api_rep);
    json_decref(cli_merged);
    cic_session_destroy(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sweep_and_merge),
        cmocka_unit_test(test_case_shards),
    };
    return cmocka_run_group_tests(tests, cic_test_tmp_setup, cic_test_tmp_teardown);
}
