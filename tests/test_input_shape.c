/* SPDX-License-Identifier: MIT */
/* test_input_shape.c: the block input of a file as saved and the tokens
 * and samples it implies (src/model/input_shape.c).
 *   - every form (3-D and 2-D hidden states, 2-D and 1-D ids) at random
 *     sizes (seed printed): with nothing given the file's sizes; with the
 *     right values given the same; a wrong tokens or samples an error
 *     naming the label, the value, the shape and the file's count;
 *   - 2-D hidden states: the rows split by tokens or samples, one sample
 *     with neither, rows that do not split and a product that disagrees
 *     named;
 *   - refused: no input tensor, ranks and dtypes not allowed, a zero
 *     dimension; "input" is read before "input_ids"; a width against
 *     d_model. */
#include "model/input_shape.h"

#include "testutil.h"

#include <stdio.h>
#include <string.h>

/* A file holding one tensor `name` of dtype dt and shape dims (zeros), by
 * hand in the format's layout; a second one when name2 is given. */
static void write_input(const char *path, const char *name, const char *dt, int esize,
                        const int64_t *dims, int nd, const char *name2)
{
    char hdr[512], shape[128] = "";
    size_t k = 0, count = 1, n, h, off;
    unsigned char len[8];
    FILE *f = fopen(path, "wb");
    int i;
    assert_non_null(f);
    for (i = 0; i < nd; i++) {
        k += (size_t)snprintf(shape + k, sizeof shape - k, "%s%lld", i ? "," : "",
                              (long long)dims[i]);
        count *= (size_t)dims[i];
    }
    n = count * (size_t)esize;
    off = snprintf(hdr, sizeof hdr, "{\"%s\":{\"dtype\":\"%s\",\"shape\":[%s],"
                   "\"data_offsets\":[0,%zu]}", name, dt, shape, n);
    if (name2)
        off += snprintf(hdr + off, sizeof hdr - off, ",\"%s\":{\"dtype\":\"I64\",\"shape\":"
                        "[1],\"data_offsets\":[%zu,%zu]}", name2, n, n + 8);
    snprintf(hdr + off, sizeof hdr - off, "}");
    h = strlen(hdr);
    for (i = 0; i < 8; i++)
        len[i] = (unsigned char)((uint64_t)h >> (8 * i));
    assert_int_equal(fwrite(len, 1, 8, f), 8);
    assert_int_equal(fwrite(hdr, 1, h, f), h);
    for (k = 0; k < n + (name2 ? 8 : 0); k++)
        assert_int_equal(fputc(0, f), 0);
    assert_int_equal(fclose(f), 0);
}

/* fit with (t, s) given into (*t, *s): 0 or -1, d's message in msg */
static int fit(const char *path, int *t, int *s, char *msg, size_t cap)
{
    cic_input_shape sh;
    cic_diag d;
    int rc;
    memset(&d, 0, sizeof d);
    rc = cic_input_shape_read(&sh, path, &d);
    if (rc == 0)
        rc = cic_input_shape_fit(t, s, &sh, path, "--tokens", "--samples", &d);
    snprintf(msg, cap, "%s", d.msg);
    if (rc < 0)
        assert_string_equal(d.file, path);
    return rc;
}

static void has(const char *msg, const char *want)
{
    if (!strstr(msg, want))
        fail_msg("message '%s' lacks '%s'", msg, want);
}

/* the batched forms at random sizes: the file's sizes, agreeing and
 * disagreeing values */
static void test_batched_random(void **state)
{
    uint64_t seed = 0x1f2e3d4c5b6a7988ull, s0 = seed;
    char path[1024], msg[1024], want[256];
    int it, n = 40 * cic_test_multiplier();
    (void)state;
    cic_test_tmp_path(path, sizeof path, "b.safetensors");
    for (it = 0; it < n; it++) {
        int form = cic_test_pick(&seed, 3); /* 0: [B, N, d]; 1: ids [B, N]; 2: ids [N] */
        int64_t b = form == 2 ? 1 : 1 + cic_test_pick(&seed, 5);
        int64_t nt = 1 + cic_test_pick(&seed, 9), d = 1 + cic_test_pick(&seed, 6);
        int64_t dims[3] = {b, nt, d};
        int t = 0, s = 0, wrong;
        if (form == 0)
            write_input(path, "input", "F32", 4, dims, 3, NULL);
        else if (form == 1)
            write_input(path, "input_ids", "I64", 8, dims, 2, NULL);
        else
            write_input(path, "input_ids", "I32", 4, dims + 1, 1, NULL);
        if (fit(path, &t, &s, msg, sizeof msg) != 0 || t != nt || s != b)
            fail_msg("seed %llx it %d form %d [%lld, %lld, %lld]: got %d x %d (%s)",
                     (unsigned long long)s0, it, form, (long long)b, (long long)nt,
                     (long long)d, t, s, msg);
        t = (int)nt, s = (int)b;
        assert_int_equal(fit(path, &t, &s, msg, sizeof msg), 0);
        wrong = (int)nt + 1 + cic_test_pick(&seed, 3);
        t = wrong, s = 0;
        assert_int_equal(fit(path, &t, &s, msg, sizeof msg), -1);
        snprintf(want, sizeof want, "--tokens %d, but the file's \"%s\" is [", wrong,
                 form ? "input_ids" : "input");
        has(msg, want);
        snprintf(want, sizeof want, "): %lld tokens", (long long)nt);
        if (strlen(msg) < strlen(want) || strcmp(msg + strlen(msg) - strlen(want), want))
            fail_msg("message '%s' does not end in '%s'", msg, want);
        t = 0, s = (int)b + 1;
        assert_int_equal(fit(path, &t, &s, msg, sizeof msg), -1);
        snprintf(want, sizeof want, "--samples %d, but the file's", (int)b + 1);
        has(msg, want);
    }
}

/* [rows, d]: split by tokens or samples; one sample with neither */
static void test_rows(void **state)
{
    char path[1024], msg[1024];
    int64_t dims[2] = {12, 4};
    int t, s;
    (void)state;
    cic_test_tmp_path(path, sizeof path, "r.safetensors");
    write_input(path, "input", "BF16", 2, dims, 2, NULL);
    t = 0, s = 0;
    assert_int_equal(fit(path, &t, &s, msg, sizeof msg), 0);
    assert_int_equal(t, 12);
    assert_int_equal(s, 1);
    t = 3, s = 0;
    assert_int_equal(fit(path, &t, &s, msg, sizeof msg), 0);
    assert_int_equal(s, 4);
    t = 0, s = 6;
    assert_int_equal(fit(path, &t, &s, msg, sizeof msg), 0);
    assert_int_equal(t, 2);
    t = 4, s = 3;
    assert_int_equal(fit(path, &t, &s, msg, sizeof msg), 0);
    t = 5, s = 0;
    assert_int_equal(fit(path, &t, &s, msg, sizeof msg), -1);
    has(msg, "--tokens 5, but the file's \"input\" is [12, 4] (rows, d_model): 12 rows are not");
    t = 0, s = 5;
    assert_int_equal(fit(path, &t, &s, msg, sizeof msg), -1);
    has(msg, "--samples 5, but");
    t = 4, s = 4;
    assert_int_equal(fit(path, &t, &s, msg, sizeof msg), -1);
    has(msg, "--tokens 4 and --samples 4 make 16 rows, but the file's \"input\" is [12, 4]");
}

/* refused files; "input" before "input_ids"; the width */
static void test_refused(void **state)
{
    char path[1024], msg[1024];
    int64_t d4[4] = {1, 2, 3, 4}, d3[3] = {2, 3, 5}, d0[2] = {0, 4};
    cic_input_shape sh;
    cic_diag d;
    int t = 0, s = 0;
    (void)state;
    cic_test_tmp_path(path, sizeof path, "x.safetensors");
    write_input(path, "hidden", "F32", 4, d3, 3, NULL);
    assert_int_equal(fit(path, &t, &s, msg, sizeof msg), -1);
    has(msg, "no tensor \"input\"");
    write_input(path, "input", "F32", 4, d4, 4, NULL);
    assert_int_equal(fit(path, &t, &s, msg, sizeof msg), -1);
    has(msg, "tensor \"input\" is F32 [1, 2, 3, 4]; allowed: a float");
    write_input(path, "input", "I32", 4, d3, 3, NULL);
    assert_int_equal(fit(path, &t, &s, msg, sizeof msg), -1);
    has(msg, "tensor \"input\" is I32 [2, 3, 5]");
    write_input(path, "input", "F32", 4, d3, 1, NULL);
    assert_int_equal(fit(path, &t, &s, msg, sizeof msg), -1);
    has(msg, "tensor \"input\" is F32 [2]; allowed");
    write_input(path, "input_ids", "F16", 2, d3, 2, NULL);
    assert_int_equal(fit(path, &t, &s, msg, sizeof msg), -1);
    has(msg, "tensor \"input_ids\" is F16 [2, 3]; allowed: I32 or I64");
    write_input(path, "input_ids", "I64", 8, d3, 3, NULL);
    assert_int_equal(fit(path, &t, &s, msg, sizeof msg), -1);
    has(msg, "tensor \"input_ids\" is I64 [2, 3, 5]; allowed");
    write_input(path, "input", "F32", 4, d0, 2, NULL);
    assert_int_equal(fit(path, &t, &s, msg, sizeof msg), -1);
    has(msg, "tensor \"input\" is [0, 4] (rows, d_model): every dimension must be 1");
    /* both: "input" is read */
    write_input(path, "input", "F64", 8, d3, 3, "input_ids");
    memset(&d, 0, sizeof d);
    assert_int_equal(cic_input_shape_read(&sh, path, &d), 0);
    assert_string_equal(sh.name, "input");
    assert_false(sh.ids);
    assert_int_equal(sh.rows, 6);
    assert_int_equal(sh.width, 5);
    assert_string_equal(sh.dtype, "F64");
    assert_int_equal(cic_input_shape_check_width(&sh, path, 5, &d), 0);
    assert_int_equal(cic_input_shape_check_width(&sh, path, 8, &d), -1);
    has(d.msg, "tensor \"input\" is [2, 3, 5] (batch, tokens, d_model): its last dimension "
               "must be the model's d_model, 8");
    /* the one-call form verify and a condition reader use */
    t = 0, s = 0;
    assert_int_equal(cic_input_file_dims(&t, &s, path, &d), 0);
    assert_int_equal(t, 3);
    assert_int_equal(s, 2);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_batched_random),
        cmocka_unit_test(test_rows),
        cmocka_unit_test(test_refused),
    };
    return cmocka_run_group_tests(tests, cic_test_tmp_setup, cic_test_tmp_teardown);
}
