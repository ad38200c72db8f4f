/* SPDX-License-Identifier: MIT */
/* test_fuzz_replay.c: the fuzz targets of the checkpoint folder, the
 * [input] file, rotation files, case shards and verify, run here on their
 * saved inputs without the fuzz build: every file in
 * tests/fuzz-regressions/<target>/ goes through the target's run
 * (tests/fuzz/<target>_run.h: the real readers and the contract the fuzzer
 * asserts), so a fixed crash cannot come back. Before the saved inputs,
 * each target is shown to tell a good input from a planted fault (a test
 * that cannot fail is a defect):
 *   - checkpoint: the tiny checkpoint (tiny_ckpt.h) as an input builds its
 *     model; with hidden_size 9 in its config.json it is refused;
 *   - input: hidden states [4, 8] build both models (the values checked);
 *     one NaN is refused by both; token ids build the checkpoint's alone;
 *   - qfile: the identity of order 8 is applied as R1, of order 4 as R2;
 *     twice the identity (not orthogonal) is refused;
 *   - case_shard: the two shards of a real run merge, also with their
 *     hashes left "" for the harness to fill; one shard alone is refused;
 *   - verify: the fused fixture against the original with the identity Q
 *     runs; a --q file that does not exist is refused. */
#include "fuzz/case_shard_run.h"
#include "fuzz/checkpoint_run.h"
#include "fuzz/input_run.h"
#include "fuzz/qfile_run.h"
#include "fuzz/verify_run.h"

#include "testutil.h"

#include <math.h>
#include <string.h>

/* A growing input. */
typedef struct {
    char *p;
    size_t n;
} buf;

static void put(buf *b, const void *p, size_t n)
{
    b->p = realloc(b->p, b->n + n + 1);
    assert_non_null(b->p);
    memcpy(b->p + b->n, p, n);
    b->n += n;
    b->p[b->n] = '\0';
}

/* File name with content p (n bytes) appended to the input b. */
static void put_file(buf *b, const char *name, const void *p, size_t n)
{
    char h[200];
    int hl = snprintf(h, sizeof h, "%s==> %s <==\n", b->n ? "\n" : "", name);
    put(b, h, (size_t)hl);
    put(b, p, n);
}

/* The file at path appended to b as name. */
static void put_path(buf *b, const char *name, const char *path)
{
    size_t n;
    char *t = cic_test_slurp(path, &n);
    put_file(b, name, t, n);
    free(t);
}

typedef const char *(*run_fn)(const uint8_t *data, size_t size, const char *dir);

/* Run one input: the contract must hold, and expect runs accepted. */
static void expect_run(run_fn run, const buf *b, const char *dir, int expect, const char *what)
{
    const char *why = run((const uint8_t *)b->p, b->n, dir);
    if (why)
        fail_msg("%s: contract broken: %s", what, why);
    if (ff_accepted != expect)
        fail_msg("%s: %d run(s) accepted, expected %d", what, ff_accepted, expect);
}

typedef struct {
    run_fn run;
    const char *dir;
} replay_ctx;

/* An input that hangs ends the program (SIGALRM) after REPLAY_SECONDS,
 * the file named first, instead of at meson's timeout. */
#define REPLAY_SECONDS 60

static void replay_one(const char *path, const char *name, void *ctx)
{
    const replay_ctx *r = ctx;
    size_t n;
    char *t = cic_test_slurp(path, &n);
    const char *why;
    printf("# replay %s\n", path);
    fflush(stdout);
    alarm(REPLAY_SECONDS);
    why = r->run((const uint8_t *)t, n, r->dir);
    alarm(0);
    free(t);
    if (why)
        fail_msg("%s: contract broken: %s", name, why);
}

/* Every saved input of target through run in dir. */
static void replay(const char *target, run_fn run, const char *dir)
{
    char rel[200];
    replay_ctx r = {run, dir};
    snprintf(rel, sizeof rel, "tests/fuzz-regressions/%s", target);
    cic_test_each_file(rel, replay_one, &r);
}

static void test_checkpoint(void **state)
{
    char dir[1100], src[1200], path[1300];
    buf b = {NULL, 0};
    cic_diag d;
    char *cfg, *at;
    size_t n;
    (void)state;
    cic_test_tmp_subdir(dir, sizeof dir);
    snprintf(src, sizeof src, "%s/src", dir);
    assert_int_equal(cic_fuzz_tiny_ckpt(src, false, &d), 0);
    snprintf(path, sizeof path, "%s/config.json", src);
    cfg = cic_test_slurp(path, &n);
    put_file(&b, "config.json", cfg, n);
    snprintf(path, sizeof path, "%s/model.safetensors", src);
    put_path(&b, "model.safetensors", path);
    expect_run(cic_fuzz_checkpoint, &b, dir, 1, "the tiny checkpoint");
    at = strstr(b.p, "\"hidden_size\": 8");
    assert_non_null(at);
    at[15] = '9';
    expect_run(cic_fuzz_checkpoint, &b, dir, 0, "hidden_size 9");
    free(b.p);
    free(cfg);
    replay("checkpoint", cic_fuzz_checkpoint, dir);
}

/* A safetensors file of one tensor as the input b. */
static void one_tensor(buf *b, const char *dir, const char *name, cic_dtype dt, int rows,
                       int cols, const void *data)
{
    char path[1300];
    cic_st_tensor t;
    cic_diag d;
    memset(&t, 0, sizeof t);
    t.name = name;
    t.dtype = dt;
    t.ndim = 2;
    t.shape[0] = rows;
    t.shape[1] = cols;
    t.data = data;
    snprintf(path, sizeof path, "%s/one.safetensors", dir);
    assert_int_equal(cic_safetensors_write(path, &t, 1, NULL, &d), 0);
    free(b->p);
    b->p = cic_test_slurp(path, &b->n);
    unlink(path);
}

static void test_input(void **state)
{
    char dir[1100];
    buf b = {NULL, 0};
    float x[32];
    int32_t ids[4] = {3, 0, 15, 7};
    int i;
    (void)state;
    cic_test_tmp_subdir(dir, sizeof dir);
    assert_int_equal(cic_fuzz_input_setup(dir), 0);
    for (i = 0; i < 32; i++)
        x[i] = (float)(i - 16) / 16.0f;
    one_tensor(&b, dir, "input", CIC_DT_F32, 4, 8, x);
    expect_run(cic_fuzz_input, &b, dir, 2, "hidden states [4, 8]");
    x[5] = NAN;
    one_tensor(&b, dir, "input", CIC_DT_F32, 4, 8, x);
    expect_run(cic_fuzz_input, &b, dir, 0, "a NaN hidden state");
    one_tensor(&b, dir, "input_ids", CIC_DT_I32, 2, 2, ids);
    expect_run(cic_fuzz_input, &b, dir, 1, "token ids [2, 2]");
    free(b.p);
    replay("input", cic_fuzz_input, dir);
}

static void test_qfile(void **state)
{
    char dir[1100];
    buf b = {NULL, 0};
    double q[64];
    int i;
    (void)state;
    cic_test_tmp_subdir(dir, sizeof dir);
    assert_int_equal(cic_fuzz_qfile_setup(dir), 0);
    for (i = 0; i < 64; i++)
        q[i] = i % 9 == 0 ? 1.0 : 0.0;
    one_tensor(&b, dir, "q", CIC_DT_F64, 8, 8, q);
    expect_run(cic_fuzz_qfile, &b, dir, 1, "the identity of order 8 (R1)");
    for (i = 0; i < 16; i++)
        q[i] = i % 5 == 0 ? 1.0 : 0.0;
    one_tensor(&b, dir, "q", CIC_DT_F64, 4, 4, q);
    expect_run(cic_fuzz_qfile, &b, dir, 1, "the identity of order 4 (R2)");
    for (i = 0; i < 64; i++)
        q[i] = i % 9 == 0 ? 2.0 : 0.0;
    one_tensor(&b, dir, "q", CIC_DT_F64, 8, 8, q);
    expect_run(cic_fuzz_qfile, &b, dir, 0, "twice the identity");
    free(b.p);
    replay("qfile", cic_fuzz_qfile, dir);
}

/* Shard k of 2 of case c into dir/real/sK, appended to b (its hashes
 * left "" when blank). */
static void real_shard(buf *b, const cic_case *c, const char *dir, int k, bool blank)
{
    char out[1300], path[1400], kn[8], name[64];
    cic_run_args a;
    cic_diag d;
    size_t n;
    char *text, *h;
    snprintf(out, sizeof out, "%s/real/s%d", dir, k);
    snprintf(kn, sizeof kn, "%d/2", k);
    memset(&a, 0, sizeof a);
    a.out_dir = out;
    a.quiet = true;
    a.shard = kn;
    a.no_baseline = true;
    if (!cic_is_case_shard(out))
        assert_int_equal(cic_run_case_shard(c, &a, &d), CIC_OK);
    snprintf(path, sizeof path, "%s/case-shard.json", out);
    text = cic_test_slurp(path, &n);
    h = blank ? strstr(text, "\"data_sha256\": \"") : NULL;
    if (h) { /* "data_sha256": "<64 hex digits>" -> "" */
        memmove(h + 16, h + 16 + 64, strlen(h + 16 + 64) + 1);
        n -= 64;
    }
    snprintf(name, sizeof name, "s%d/case-shard.json", k);
    put_file(b, name, text, n);
    free(text);
    snprintf(path, sizeof path, "%s/case-shard.bin", out);
    snprintf(name, sizeof name, "s%d/case-shard.bin", k);
    put_path(b, name, path);
}

static void test_case_shard(void **state)
{
    char dir[1100], cpath[1300];
    cic_case *c = malloc(sizeof *c);
    buf b = {NULL, 0};
    cic_diag d;
    (void)state;
    assert_non_null(c);
    cic_test_tmp_subdir(dir, sizeof dir);
    snprintf(cpath, sizeof cpath, "%s/sh.toml", dir);
    cic_test_write_text(cpath, "name = \"fuzz-replay-shard\"\n[model]\nblock = \"rmsnorm\"\n"
                               "d_model = 4\nheads = 1\ntokens = 2\nsamples = 2\nlayers = 1\n"
                               "d_out = 2\n[engines]\nf32 = [\"openblas\"]\nmpfr_prec = 64\n"
                               "[[transforms]]\nname = \"fold\"\nkind = \"fold-rmsnorm-gamma\"\n");
    assert_int_equal(cic_case_load(c, cpath, &d), CIC_OK);
    real_shard(&b, c, dir, 1, false);
    expect_run(cic_fuzz_case_shard, &b, dir, 0, "shard 1/2 alone");
    real_shard(&b, c, dir, 2, false);
    expect_run(cic_fuzz_case_shard, &b, dir, 1, "shards 1/2 and 2/2");
    free(b.p);
    b.p = NULL;
    b.n = 0;
    real_shard(&b, c, dir, 1, true);
    real_shard(&b, c, dir, 2, true);
    assert_non_null(strstr(b.p, "\"data_sha256\": \"\""));
    expect_run(cic_fuzz_case_shard, &b, dir, 1, "shards with data_sha256 \"\"");
    free(b.p);
    free(c);
    replay("case_shard", cic_fuzz_case_shard, dir);
}

static void test_verify(void **state)
{
    static const char good[] = "orig\ntrans\n--q\nq.safetensors\n";
    static const char bad[] = "orig\ntrans\n--q\nnone.safetensors\n";
    char dir[1100];
    buf b = {NULL, 0};
    (void)state;
    cic_test_tmp_subdir(dir, sizeof dir);
    assert_int_equal(cic_fuzz_verify_setup(dir), 0);
    put(&b, good, strlen(good));
    expect_run(cic_fuzz_verify, &b, dir, 1, "the fused fixture with the identity Q");
    b.n = 0;
    put(&b, bad, strlen(bad));
    expect_run(cic_fuzz_verify, &b, dir, 0, "a --q file that does not exist");
    free(b.p);
    replay("verify", cic_fuzz_verify, dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_checkpoint), cmocka_unit_test(test_input),
        cmocka_unit_test(test_qfile),      cmocka_unit_test(test_case_shard),
        cmocka_unit_test(test_verify),
    };
    return cmocka_run_group_tests(tests, cic_test_tmp_setup, cic_test_tmp_teardown);
}
