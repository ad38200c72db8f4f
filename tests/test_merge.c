/* SPDX-License-Identifier: MIT */
/* test_merge.c: cic_sweep_merge (src/pipeline/merge.c) through the fuzz
 * target's harness (tests/fuzz/merge_input.h):
 *   - the two shards of a real sweep, run here with cic_sweep_run_all, given as
 *     one input (split at a NUL) merge with exit 0 and write sweep.json;
 *     one shard alone is refused (a point is missing) with a message;
 *   - that input with one byte of a point's params changed is refused,
 *     naming the shard's sweep.json (a planted fault the check must see);
 *   - no shards, and an empty --out, are usage errors with a message;
 *   - every input in tests/fuzz-regressions/merge merges to an exit code
 *     0..3, and one that writes nothing says why.
 * The end-to-end forms (every kind of inconsistent shard, --out a shard)
 * are in test_merge.sh. */
#include "fuzz/merge_input.h"

#include "testutil.h"

#include <jansson.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static void test_real_shards(void **state)
{
    char cpath[1024], s1[1100], s2[1100], work[1100];
    cic_case *c = malloc(sizeof *c);
    cic_sweep_opts a;
    cic_diag d;
    char *t1, *t2, *in;
    size_t n1, n2;
    bool wrote;
    (void)state;
    cic_test_tmp_path(cpath, sizeof cpath, "sw.toml");
    cic_test_write_text(cpath, "name = \"merge-unit\"\n[model]\nblock = \"preln\"\nd_model = 8\n"
                               "heads = 2\ntokens = 2\nsamples = 1\nlayers = 1\nd_out = 2\n"
                               "[engines]\nf32 = [\"openblas\"]\n[sweep]\nseed = [1, 2, 3]\n"
                               "[[transforms]]\nname = \"fuse\"\nkind = \"fuse-layernorm\"\n");
    assert_non_null(c);
    assert_int_equal(cic_case_load(c, cpath, &d), CIC_OK);
    memset(&a, 0, sizeof a);
    a.no_plots = true;
    cic_test_tmp_path(s1, sizeof s1, "r1");
    cic_test_tmp_path(s2, sizeof s2, "r2");
    a.shard_n = 2;
    a.shard_k = 1;
    a.out_dir = s1;
    assert_int_equal(cic_sweep_run_all(c, &a, true, &d), CIC_OK);
    a.shard_k = 2;
    a.out_dir = s2;
    assert_int_equal(cic_sweep_run_all(c, &a, true, &d), CIC_OK);
    free(c);
    cic_test_tmp_path(s1, sizeof s1, "r1/sweep.json");
    cic_test_tmp_path(s2, sizeof s2, "r2/sweep.json");
    t1 = cic_test_slurp(s1, &n1);
    t2 = cic_test_slurp(s2, &n2);
    in = malloc(n1 + n2 + 1);
    memcpy(in, t1, n1);
    in[n1] = '\0';
    memcpy(in + n1 + 1, t2, n2);
    cic_test_tmp_path(work, sizeof work, "work");
    assert_int_equal(mkdir(work, 0700), 0);

    assert_int_equal(cic_fuzz_merge((const uint8_t *)in, n1 + n2 + 1, work, &wrote, &d), 0);
    assert_true(wrote);
    /* one shard: point 1 is missing */
    assert_int_equal(cic_fuzz_merge((const uint8_t *)t1, n1, work, &wrote, &d), CIC_EINPUT);
    assert_false(wrote);
    assert_non_null(strstr(d.msg, "missing"));
    /* the planted fault: point 0's seed 1 -> 3 in shard 1, the rest kept */
    {
        json_t *r = json_loadb(t1, n1, 0, NULL), *pt;
        char *e;
        size_t ne;
        assert_non_null(r);
        pt = json_array_get(json_object_get(r, "points"), 0);
        assert_int_equal(json_integer_value(json_object_get(pt, "index")), 0);
        json_object_set_new(json_object_get(pt, "params"), "seed", json_integer(3));
        e = json_dumps(r, JSON_COMPACT | JSON_REAL_PRECISION(17));
        json_decref(r);
        ne = strlen(e);
        free(in);
        in = malloc(ne + n2 + 1);
        memcpy(in, e, ne);
        in[ne] = '\0';
        memcpy(in + ne + 1, t2, n2);
        free(e);
        n1 = ne;
    }
    assert_int_equal(cic_fuzz_merge((const uint8_t *)in, n1 + n2 + 1, work, &wrote, &d),
                     CIC_EINPUT);
    assert_false(wrote);
    assert_non_null(strstr(d.file, "/s1/sweep.json"));
    assert_non_null(strstr(d.msg, "params are not those of index 0"));
    free(in);
    free(t1);
    free(t2);
    rmdir(work);
}

static void test_usage_errors(void **state)
{
    const char *dirs[1] = {cic_test_tmp};
    cic_diag d;
    (void)state;
    assert_int_equal(cic_sweep_merge(dirs, 0, "x", true, &d), CIC_EINPUT);
    assert_true(d.msg[0] != '\0');
    assert_int_equal(cic_sweep_merge(dirs, 1, "", true, &d), CIC_EINPUT);
    assert_non_null(strstr(d.msg, "empty"));
    /* the folder holds no sweep.json */
    assert_int_equal(cic_sweep_merge(dirs, 1, "never-written", true, &d), CIC_EINPUT);
    assert_non_null(strstr(d.file, "sweep.json"));
}

/* Inputs the fuzzer (scripts/fuzz.sh merge) once broke on, merged in the
 * folder *ctx. */
static void check_fuzz_input(const char *path, const char *name, void *ctx)
{
    cic_diag d;
    bool wrote = false;
    size_t len;
    char *buf = cic_test_slurp(path, &len);
    int rc;
    (void)name;
    memset(&d, 0, sizeof d);
    rc = cic_fuzz_merge((const uint8_t *)buf, len, ctx, &wrote, &d);
    free(buf);
    if (rc < 0 || rc > CIC_EINTERNAL || (!wrote && !d.msg[0]))
        fail_msg("%s: exit %d, wrote %d, message '%s'", path, rc, wrote, d.msg);
}

static void test_fuzz_regressions(void **state)
{
    char work[1100];
    (void)state;
    cic_test_tmp_path(work, sizeof work, "replay");
    assert_int_equal(mkdir(work, 0700), 0);
    cic_test_each_file("tests/fuzz-regressions/merge", check_fuzz_input, work);
    rmdir(work);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_real_shards),
        cmocka_unit_test(test_usage_errors),
        cmocka_unit_test(test_fuzz_regressions),
    };
    return cmocka_run_group_tests(tests, cic_test_tmp_setup, cic_test_tmp_teardown);
}
