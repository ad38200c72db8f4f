/* SPDX-License-Identifier: MIT */
/* test_safetensors.c: the safetensors reader (src/base/safetensors_read.c).
 *   - files written by cic_safetensors_write (random shapes, dtypes F32,
 *     F64, I8 and I32, and bytes; seed printed) read back bit for bit,
 *     metadata included;
 *   - a --dump of a small case, written by `cicheck run`, opens and holds
 *     the documented tensors;
 *   - every dtype is decoded exactly from hand-made bytes (F16 and BF16
 *     special values, signed integers), also with an unaligned data start;
 *   - hostile files: each defect is planted into an otherwise valid file
 *     (which is checked to load first), and must be refused with a message
 *     naming the file and the tensor;
 *   - a FIFO, a folder and a device are refused without blocking;
 *   - a file changed while mapped (mtime, size, closed after a change) is
 *     named by cic_stfile_check_unchanged; a SIGBUS in a mapping (the file
 *     cut short) exits 3 naming it, one elsewhere reaches the handler set
 *     before, or the default action (in child processes);
 *   - every input in tests/fuzz-regressions/safetensors loads or fails
 *     with a message. */
#include "base/safetensors_read.h"
#include "cli/run.h"
#include "report/report.h"

#include "testutil.h"

#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* header text (not padded) + data into a file: the raw format by hand */
static void write_raw(const char *path, const char *hdr, const void *data, size_t n)
{
    FILE *f = fopen(path, "wb");
    size_t h = strlen(hdr);
    unsigned char len[8];
    int k;
    assert_non_null(f);
    for (k = 0; k < 8; k++)
        len[k] = (unsigned char)((uint64_t)h >> (8 * k));
    assert_int_equal(fwrite(len, 1, 8, f), 8);
    assert_int_equal(fwrite(hdr, 1, h, f), h);
    if (n)
        assert_int_equal(fwrite(data, 1, n, f), n);
    assert_int_equal(fclose(f), 0);
}

/* ---- files of the project's writer ---- */

/* Each dtype of the writer as the reader names it, and its element size. */
static const struct {
    enum cic_stfile_dtype read;
    size_t size;
} WRITER_DTYPE[CIC_DT_COUNT] = {
    [CIC_DT_F32] = {CIC_STFILE_F32, 4},
    [CIC_DT_F64] = {CIC_STFILE_F64, 8},
    [CIC_DT_I8] = {CIC_STFILE_I8, 1},
    [CIC_DT_I32] = {CIC_STFILE_I32, 4},
};

static void test_writer_roundtrip(void **state)
{
    uint64_t seed = 0x5afe7e45u + (uint64_t)time(NULL), s;
    int iter, iters = 20 * cic_test_multiplier();
    char path[1024];
    (void)state;
    cic_test_tmp_path(path, sizeof path, "rt.safetensors");
    for (iter = 0; iter < iters; iter++) {
        cic_st_tensor t[5];
        void *buf[5] = {0};
        char names[5][32];
        const char *meta[] = {"block", "preln", "d_model", "17", "empty", "", NULL};
        int n, i, k;
        cic_diag d;
        cic_stfile *f;
        s = seed + (uint64_t)iter;
        n = (int)(cic_test_rand(&s) % 6);
        for (i = 0; i < n; i++) {
            size_t count = 1, esz;
            snprintf(names[i], sizeof names[i], "blocks.%d.w%d", i, (int)(cic_test_rand(&s) % 100));
            t[i].name = names[i];
            t[i].dtype = (cic_dtype)(cic_test_rand(&s) % CIC_DT_COUNT);
            t[i].ndim = 1 + (int)(cic_test_rand(&s) % 4);
            for (k = 0; k < t[i].ndim; k++) {
                t[i].shape[k] = (int64_t)(cic_test_rand(&s) % 5); /* zero sizes too */
                count *= (size_t)t[i].shape[k];
            }
            esz = WRITER_DTYPE[t[i].dtype].size;
            buf[i] = malloc(count * esz + 1);
            for (k = 0; k < (int)(count * esz); k++)
                ((unsigned char *)buf[i])[k] = (unsigned char)cic_test_rand(&s);
            t[i].data = buf[i];
        }
        if (cic_safetensors_write(path, t, n, meta, &d) != 0)
            fail_msg("seed %llu: write: %s", (unsigned long long)s, d.msg);
        f = cic_stfile_create(path, &d);
        if (!f)
            fail_msg("seed %llu: n %d: %s: %s", (unsigned long long)(seed + (uint64_t)iter), n,
                     d.file, d.msg);
        assert_int_equal(cic_stfile_count(f), n);
        for (i = 0; i < n; i++) {
            const cic_stfile_tensor *x = cic_stfile_find(f, names[i]);
            size_t count = 1;
            if (!x)
                fail_msg("seed %llu: tensor %s not found", (unsigned long long)seed, names[i]);
            /* the writer puts them in the order given */
            assert_ptr_equal(x, cic_stfile_tensor_at(f, i));
            assert_int_equal(x->dtype, WRITER_DTYPE[t[i].dtype].read);
            assert_int_equal(x->ndim, t[i].ndim);
            for (k = 0; k < x->ndim; k++) {
                assert_int_equal(x->shape[k], t[i].shape[k]);
                count *= (size_t)t[i].shape[k];
            }
            assert_int_equal(x->count, count);
            assert_int_equal(x->nbytes, count * WRITER_DTYPE[t[i].dtype].size);
            if (x->nbytes && memcmp(x->data, buf[i], x->nbytes) != 0)
                fail_msg("seed %llu: tensor %s bytes differ", (unsigned long long)seed,
                         names[i]);
        }
        /* the writer pads the header so the data starts 8-byte aligned */
        if (n > 0)
            assert_int_equal(cic_stfile_tensor_at(f, 0)->offset % 8, 0);
        assert_null(cic_stfile_find(f, "missing"));
        assert_int_equal(cic_stfile_meta_count(f), 3);
        assert_string_equal(cic_stfile_meta_get(f, "d_model"), "17");
        assert_string_equal(cic_stfile_meta_get(f, "empty"), "");
        assert_null(cic_stfile_meta_get(f, "nope"));
        {
            const char *key, *val;
            cic_stfile_meta_at(&key, &val, f, 0);
            assert_string_equal(key, "block");
            assert_string_equal(val, "preln");
        }
        cic_stfile_destroy(f);
        for (i = 0; i < n; i++)
            free(buf[i]);
    }
    cic_stfile_destroy(NULL);
}

/* A dump of a small case as `cicheck run --dump` writes it. */
static void test_dump_of_a_run(void **state)
{
    static const char toml[] =
        "name = \"st-dump\"\n[model]\nblock = \"preln\"\nd_model = 8\nheads = 2\n"
        "tokens = 4\nsamples = 2\nlayers = 1\nd_out = 4\n[engines]\nf32 = [\"openblas\"]\n"
        "[[transforms]]\nname = \"fuse\"\nkind = \"fuse-layernorm\"\n";
    char cpath[1024], dump[1024], out[1024], p[1200];
    cic_run_args a;
    cic_diag d;
    cic_stfile *f;
    const cic_stfile_tensor *x;
    double v[32];
    (void)state;
    cic_test_tmp_path(cpath, sizeof cpath, "st-dump.toml");
    cic_test_tmp_path(dump, sizeof dump, "dump");
    cic_test_tmp_path(out, sizeof out, "out");
    cic_test_write_text(cpath, toml);
    memset(&a, 0, sizeof a);
    a.out_dir = out;
    a.dump_dir = dump;
    a.quiet = true;
    a.color = 0;
    a.no_baseline = true;
    a.compact = true;
    a.tol = CIC_TOLERANCE_DEFAULT;
    assert_int_equal(cic_run_case(cpath, &a, NULL), CIC_OK);

    snprintf(p, sizeof p, "%s/original.safetensors", dump);
    f = cic_stfile_create(p, &d);
    if (!f)
        fail_msg("%s: %s", d.file, d.msg);
    x = cic_stfile_find(f, "input");
    assert_non_null(x);
    assert_int_equal(x->dtype, CIC_STFILE_F32);
    assert_int_equal(x->ndim, 2);
    assert_int_equal(x->shape[0], 8); /* samples * tokens */
    assert_int_equal(x->shape[1], 8);
    assert_int_equal(cic_stfile_tensor_read_f64(v, x, 0, 32, &d), 0);
    assert_true(isfinite(v[0]) && isfinite(v[31]));
    x = cic_stfile_find(f, "blocks.0.attn.qkv.weight");
    assert_non_null(x);
    assert_int_equal(x->shape[0], 24);
    assert_int_equal(x->shape[1], 8);
    assert_string_equal(cic_stfile_meta_get(f, "block"), "preln");
    assert_string_equal(cic_stfile_meta_get(f, "d_model"), "8");
    cic_stfile_destroy(f);

    snprintf(p, sizeof p, "%s/outputs.safetensors", dump);
    f = cic_stfile_create(p, &d);
    if (!f)
        fail_msg("%s: %s", d.file, d.msg);
    x = cic_stfile_find(f, "truth");
    assert_non_null(x);
    assert_int_equal(x->dtype, CIC_STFILE_F64);
    assert_int_equal(x->shape[0], 8);
    assert_int_equal(x->shape[1], 4);
    cic_stfile_destroy(f);

    snprintf(p, sizeof p, "%s/fuse.f64.safetensors", dump);
    f = cic_stfile_create(p, &d);
    if (!f)
        fail_msg("%s: %s", d.file, d.msg);
    assert_true(cic_stfile_count(f) > 0);
    assert_int_equal(cic_stfile_tensor_at(f, 0)->dtype, CIC_STFILE_F64);
    cic_stfile_destroy(f);
}

/* ---- decoding every dtype ---- */

/* The dtype tables (designated initializers): every dtype named and sized,
 * the names distinct, the sizes those of safetensors. */
static void test_dtype_tables(void **state)
{
    static const unsigned char bytes[] = {1, 1, 1, 2, 2, 2, 2, 4, 4, 4, 8, 8, 8};
    int i, j;
    (void)state;
    for (i = 0; i < CIC_STFILE_DTYPE_COUNT; i++) {
        assert_non_null(CIC_STFILE_DTYPE_NAME[i]);
        assert_int_equal(CIC_STFILE_DTYPE_SIZE[i], bytes[i]);
        for (j = 0; j < i; j++)
            assert_string_not_equal(CIC_STFILE_DTYPE_NAME[i], CIC_STFILE_DTYPE_NAME[j]);
    }
    assert_string_equal(CIC_STFILE_DTYPE_NAME[CIC_STFILE_BF16], "BF16");
    assert_int_equal(CIC_STFILE_DTYPE_SIZE[CIC_STFILE_BF16], 2);
}

static void test_dtypes(void **state)
{
    /* one tensor per dtype, the data starting at an odd file offset */
    static const unsigned char data[] = {
        /* F16: 1, -2, +inf, 2^-24, -0, 65504 */
        0x00, 0x3c, 0x00, 0xc0, 0x00, 0x7c, 0x01, 0x00, 0x00, 0x80, 0xff, 0x7b,
        /* BF16: 1, -3, 2^-133 (subnormal) */
        0x80, 0x3f, 0x40, 0xc0, 0x01, 0x00,
        /* I8: -128, 127 */
        0x80, 0x7f,
        /* I32: -2, 1 << 30 */
        0xfe, 0xff, 0xff, 0xff, 0x00, 0x00, 0x00, 0x40,
        /* I64: -1, 2^62 + 1 */
        0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
        0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x40,
        /* F32: 0.1f */
        0xcd, 0xcc, 0xcc, 0x3d,
        /* F64: -0.1 */
        0x9a, 0x99, 0x99, 0x99, 0x99, 0x99, 0xb9, 0xbf,
        /* U64: 2^63 */
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x80,
        /* BOOL, U8 */
        0x01, 0xff};
    static const char hdr[] =
        "{\"h\":{\"dtype\":\"F16\",\"shape\":[2,3],\"data_offsets\":[0,12]},"
        "\"b\":{\"dtype\":\"BF16\",\"shape\":[3],\"data_offsets\":[12,18]},"
        "\"i8\":{\"dtype\":\"I8\",\"shape\":[2],\"data_offsets\":[18,20]},"
        "\"i32\":{\"dtype\":\"I32\",\"shape\":[2],\"data_offsets\":[20,28]},"
        "\"i64\":{\"dtype\":\"I64\",\"shape\":[1,2],\"data_offsets\":[28,44]},"
        "\"f\":{\"dtype\":\"F32\",\"shape\":[],\"data_offsets\":[44,48]},"
        "\"d\":{\"dtype\":\"F64\",\"shape\":[1],\"data_offsets\":[48,56]},"
        "\"u64\":{\"dtype\":\"U64\",\"shape\":[1],\"data_offsets\":[56,64]},"
        "\"bool\":{\"dtype\":\"BOOL\",\"shape\":[1],\"data_offsets\":[64,65]},"
        "\"u8\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[65,66]},"
        "\"__metadata__\":{\"format\":\"pt\"}}";
    char path[1024];
    cic_diag d;
    cic_stfile *f;
    const cic_stfile_tensor *x;
    double v[6];
    int64_t iv[2];
    (void)state;
    assert_int_equal(sizeof data, 66);
    assert_true(strlen(hdr) % 2 == 1); /* data not aligned */
    cic_test_tmp_path(path, sizeof path, "dtypes.safetensors");
    write_raw(path, hdr, data, sizeof data);
    f = cic_stfile_create(path, &d);
    if (!f)
        fail_msg("%s: %s", d.file, d.msg);
    assert_int_equal(cic_stfile_count(f), 10);
    assert_string_equal(cic_stfile_tensor_at(f, 0)->name, "h"); /* file order */
    assert_string_equal(cic_stfile_tensor_at(f, 9)->name, "u8");

    x = cic_stfile_find(f, "h");
    assert_int_equal(x->count, 6);
    assert_int_equal(cic_stfile_tensor_read_f64(v, x, 0, 6, &d), 0);
    assert_true(v[0] == 1.0 && v[1] == -2.0 && isinf(v[2]) && v[2] > 0);
    assert_true(v[3] == ldexp(1.0, -24) && v[4] == 0.0 && signbit(v[4]) && v[5] == 65504.0);
    assert_int_equal(cic_stfile_tensor_read_f64(v, x, 5, 1, &d), 0);
    assert_true(v[0] == 65504.0);
    assert_int_equal(cic_stfile_tensor_read_f64(v, x, 5, 2, &d), -1); /* past the end */
    assert_non_null(strstr(d.msg, "'h'"));
    assert_int_equal(cic_stfile_tensor_read_i64(iv, x, 0, 1, &d), -1); /* float */

    x = cic_stfile_find(f, "b");
    assert_int_equal(cic_stfile_tensor_read_f64(v, x, 0, 3, &d), 0);
    assert_true(v[0] == 1.0 && v[1] == -3.0 && v[2] == ldexp(1.0, -133));

    x = cic_stfile_find(f, "i8");
    assert_int_equal(cic_stfile_tensor_read_i64(iv, x, 0, 2, &d), 0);
    assert_true(iv[0] == -128 && iv[1] == 127);
    x = cic_stfile_find(f, "i32");
    assert_int_equal(cic_stfile_tensor_read_i64(iv, x, 0, 2, &d), 0);
    assert_true(iv[0] == -2 && iv[1] == (1 << 30));
    assert_int_equal(cic_stfile_tensor_read_f64(v, x, 0, 2, &d), 0);
    assert_true(v[0] == -2.0);
    x = cic_stfile_find(f, "i64");
    assert_int_equal(x->ndim, 2);
    assert_int_equal(cic_stfile_tensor_read_i64(iv, x, 0, 2, &d), 0);
    assert_true(iv[0] == -1 && iv[1] == ((int64_t)1 << 62) + 1);

    x = cic_stfile_find(f, "f");
    assert_int_equal(x->ndim, 0);
    assert_int_equal(x->count, 1);
    assert_int_equal(cic_stfile_tensor_read_f64(v, x, 0, 1, &d), 0);
    assert_true(v[0] == (double)0.1f);
    x = cic_stfile_find(f, "d");
    assert_int_equal(cic_stfile_tensor_read_f64(v, x, 0, 1, &d), 0);
    assert_true(v[0] == -0.1);
    x = cic_stfile_find(f, "u64");
    assert_int_equal(cic_stfile_tensor_read_i64(iv, x, 0, 1, &d), -1); /* > INT64_MAX */
    assert_non_null(strstr(d.msg, "INT64_MAX"));
    assert_int_equal(cic_stfile_tensor_read_f64(v, x, 0, 1, &d), 0);
    assert_true(v[0] == ldexp(1.0, 63));
    x = cic_stfile_find(f, "bool");
    assert_int_equal(cic_stfile_tensor_read_i64(iv, x, 0, 1, &d), 0);
    assert_true(iv[0] == 1);
    x = cic_stfile_find(f, "u8");
    assert_int_equal(cic_stfile_tensor_read_i64(iv, x, 0, 1, &d), 0);
    assert_true(iv[0] == 255);
    assert_string_equal(cic_stfile_meta_get(f, "format"), "pt");
    cic_stfile_destroy(f);
}

/* ---- hostile files ---- */

/* A valid two-tensor file, with one defect planted by replacing the text
 * `from` of the header with `to` (NULL: the valid file); data_len bytes of
 * data. Returns the reader's result for the test to inspect. */
static const char VALID_HDR[] =
    "{\"__metadata__\":{\"k\":\"v\"},"
    "\"a.weight\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[0,24]},"
    "\"b.bias\":{\"dtype\":\"F64\",\"shape\":[2],\"data_offsets\":[24,40]}}";

static cic_stfile *load_planted(const char *from, const char *to, size_t data_len,
                                cic_diag *d, char *path, size_t cap)
{
    char hdr[4096];
    unsigned char data[256] = {0};
    const char *at = from ? strstr(VALID_HDR, from) : NULL;
    if (from && !at)
        fail_msg("test bug: '%s' not in the valid header", from);
    if (at)
        snprintf(hdr, sizeof hdr, "%.*s%s%s", (int)(at - VALID_HDR), VALID_HDR, to,
                 at + strlen(from));
    else
        snprintf(hdr, sizeof hdr, "%s", VALID_HDR);
    cic_test_tmp_path(path, cap, "hostile.safetensors");
    write_raw(path, hdr, data, data_len);
    memset(d, 0, sizeof *d);
    return cic_stfile_create(path, d);
}

static void expect_refused(const char *from, const char *to, size_t data_len, const char *want,
                           const char *want2)
{
    char path[1024];
    cic_diag d;
    cic_stfile *f = load_planted(from, to, data_len, &d, path, sizeof path);
    if (f) {
        cic_stfile_destroy(f);
        fail_msg("accepted: '%s' -> '%s' (data %zu bytes)", from ? from : "", to ? to : "",
                 data_len);
    }
    if (strcmp(d.file, path) != 0 || !strstr(d.msg, want) || (want2 && !strstr(d.msg, want2)))
        fail_msg("'%s' -> '%s': got \"%s: %s\", expected the file and '%s'%s%s", from ? from : "",
                 to ? to : "", d.file, d.msg, want, want2 ? " and " : "", want2 ? want2 : "");
}

static void test_hostile_header(void **state)
{
    char path[1024];
    cic_diag d;
    cic_stfile *f;
    (void)state;
    /* the unplanted file loads: every refusal below is the planted defect */
    f = load_planted(NULL, NULL, 40, &d, path, sizeof path);
    if (!f)
        fail_msg("valid file refused: %s", d.msg);
    assert_int_equal(cic_stfile_count(f), 2);
    cic_stfile_destroy(f);

    /* dtype or shape that does not match the byte count */
    expect_refused("[2,3]", "[2,2]", 40, "'a.weight'", "24");
    expect_refused("\"F64\"", "\"F32\"", 40, "'b.bias'", "F32 shape [2] is 8 bytes");
    expect_refused("\"F64\"", "\"BF16\"", 40, "'b.bias'", "bytes");
    expect_refused("\"F64\"", "\"Q4\"", 40, "'b.bias'", "unsupported dtype 'Q4'");
    expect_refused("\"F64\"", "64", 40, "'b.bias'", "dtype is an integer");
    expect_refused("[2,3]", "[2,-3]", 40, "'a.weight'", "shape[1] is negative");
    expect_refused("[2,3]", "[2,3.0]", 40, "'a.weight'", "shape[1] is a real");
    expect_refused("[2,3]", "{}", 40, "'a.weight'", "shape is an object");
    expect_refused("[2,3]", "[1,1,1,1,1,1,1,1,2,3]", 40, "'a.weight'", "10 dimensions");
    expect_refused("[2,3]", "[4294967296,4294967296,4294967296]", 40, "'a.weight'",
                   "2^64");
    expect_refused("[2,3]", "[2305843009213693952,2]", 40, "'a.weight'", "overflows");
    /* offsets out of range, overlapping, not contiguous */
    expect_refused("[24,40]", "[24,48]", 40, "'b.bias'", "outside the data");
    expect_refused("[24,40]", "[24,18446744073709551615]", 40, "too big", NULL);
    expect_refused("[24,40]", "[40,24]", 40, "'b.bias'", "end before they begin");
    expect_refused("[24,40]", "[16,32]", 40, "'b.bias'", "overlaps tensor 'a.weight'");
    expect_refused("[24,40]", "[32,48]", 48, "bytes [24, 32)", "'b.bias'");
    expect_refused(NULL, NULL, 41, "cover 40 bytes", "41");
    expect_refused("[24,40]", "[24]", 40, "'b.bias'", "data_offsets must be");
    expect_refused("[24,40]", "[24,\"40\"]", 40, "'b.bias'", "data_offsets must be");
    /* names, keys, structure */
    expect_refused("\"b.bias\"", "\"a.weight\"", 40, "duplicate", "a.weight");
    expect_refused("\"b.bias\"", "\"\"", 40, "empty name", NULL);
    expect_refused(",\"data_offsets\":[24,40]", ",\"data_offsets\":[24,40],\"extra\":1", 40,
                   "'b.bias'", "unknown key 'extra'");
    expect_refused(",\"data_offsets\":[24,40]", "", 40, "'b.bias'", "no 'data_offsets'");
    expect_refused("{\"dtype\":\"F64\",\"shape\":[2],\"data_offsets\":[24,40]}", "[]", 40,
                   "'b.bias'", "an array");
    /* metadata: strings only */
    expect_refused("\"v\"", "7", 40, "__metadata__ 'k'", "strings");
    expect_refused("\"v\"", "null", 40, "__metadata__ 'k'", "null");
    expect_refused("{\"k\":\"v\"}", "[\"k\"]", 40, "__metadata__ is an array", NULL);
    /* JSON errors with a position */
    expect_refused("\"v\"}", "\"v\"", 40, "header", NULL);
    f = load_planted("\"v\"}", "\"v\"", 40, &d, path, sizeof path);
    assert_null(f);
    assert_true(d.line >= 1 && d.column >= 1);
}

static void write_len_and(const char *path, uint64_t hlen, const void *rest, size_t n)
{
    FILE *f = fopen(path, "wb");
    unsigned char len[8];
    int k;
    assert_non_null(f);
    for (k = 0; k < 8; k++)
        len[k] = (unsigned char)(hlen >> (8 * k));
    assert_int_equal(fwrite(len, 1, 8, f), 8);
    if (n)
        assert_int_equal(fwrite(rest, 1, n, f), n);
    assert_int_equal(fclose(f), 0);
}

static void expect_file_refused(const char *path, const char *want)
{
    cic_diag d;
    cic_stfile *f;
    memset(&d, 0, sizeof d);
    f = cic_stfile_create(path, &d);
    if (f) {
        cic_stfile_destroy(f);
        fail_msg("%s accepted (expected '%s')", path, want);
    }
    if (strcmp(d.file, path) != 0 || !strstr(d.msg, want))
        fail_msg("got \"%s: %s\", expected %s and '%s'", d.file, d.msg, path, want);
}

static void test_hostile_length_and_nesting(void **state)
{
    char path[1024];
    static const char hdr[] = "{}";
    char *deep;
    size_t i, n = 100000;
    (void)state;
    cic_test_tmp_path(path, sizeof path, "len.safetensors");

    /* the valid minimum: an empty header object, no data */
    write_len_and(path, 2, hdr, 2);
    {
        cic_diag d;
        cic_stfile *f = cic_stfile_create(path, &d);
        if (!f)
            fail_msg("%s", d.msg);
        assert_int_equal(cic_stfile_count(f), 0);
        cic_stfile_destroy(f);
    }
    write_len_and(path, 3, hdr, 2);
    expect_file_refused(path, "beyond the end of the file");
    write_len_and(path, UINT64_MAX, hdr, 2);
    expect_file_refused(path, "beyond the end of the file");
    write_len_and(path, 0, hdr, 2);
    expect_file_refused(path, "empty");
    write_len_and(path, 0, NULL, 0);
    cic_test_write_text(path, "\x02\0\0");
    expect_file_refused(path, "too short");
    /* over the 100 MiB cap: a sparse file of 101 MiB */
    write_len_and(path, CIC_STFILE_MAX_HEADER + 1, hdr, 2);
    assert_int_equal(truncate(path, (off_t)(CIC_STFILE_MAX_HEADER + 64)), 0);
    expect_file_refused(path, "100 MiB");
    /* NUL padding is not JSON whitespace */
    write_len_and(path, 4, "{}\0\0", 4);
    expect_file_refused(path, "header");
    /* the root must be an object */
    write_len_and(path, 2, "[]", 2);
    expect_file_refused(path, "header is an array");

    /* nested far deeper than any header: jansson's depth cap stops the
     * parser (no stack overflow) and the error says so */
    deep = malloc(n + 16);
    assert_non_null(deep);
    memcpy(deep, "{\"x\":", 5);
    for (i = 5; i < n; i++)
        deep[i] = '[';
    write_len_and(path, n, deep, n);
    expect_file_refused(path, "depth");
    /* 4 levels is already too deep for the schema: a clean type error */
    {
        static const char t4[] =
            "{\"t\":{\"dtype\":\"F32\",\"shape\":[[1]],\"data_offsets\":[0,4]}}";
        write_len_and(path, strlen(t4), t4, strlen(t4));
    }
    expect_file_refused(path, "shape[0] is an array");
    free(deep);
}

static void test_not_regular_files(void **state)
{
    char path[1024];
    (void)state;
    cic_test_tmp_path(path, sizeof path, "fifo.safetensors");
    assert_int_equal(mkfifo(path, 0600), 0);
    /* must return at once, not wait for a writer */
    expect_file_refused(path, "FIFO");
    expect_file_refused(cic_test_tmp, "folder");
    expect_file_refused("/dev/null", "device");
    cic_test_tmp_path(path, sizeof path, "does-not-exist.safetensors");
    expect_file_refused(path, "cannot open");
    {
        cic_diag d;
        assert_null(cic_stfile_create("", &d));
        assert_non_null(strstr(d.msg, "empty file name"));
    }
}

/* Inputs the fuzzer (scripts/fuzz.sh safetensors) once broke on. */
static void check_fuzz_input(const char *path, const char *name, void *ctx)
{
    cic_diag d;
    cic_stfile *f;
    (void)name;
    (void)ctx;
    memset(&d, 0, sizeof d);
    f = cic_stfile_create(path, &d);
    if (!f && (!d.msg[0] || strcmp(d.file, path) != 0))
        fail_msg("%s: refused without a message naming it (%s: %s)", path, d.file, d.msg);
    if (f) {
        int i;
        for (i = 0; i < cic_stfile_count(f); i++) {
            const cic_stfile_tensor *x = cic_stfile_tensor_at(f, i);
            double v;
            if (x->count && x->dtype != CIC_STFILE_BOOL)
                assert_int_equal(cic_stfile_tensor_read_f64(&v, x, x->count - 1, 1, &d), 0);
        }
    }
    cic_stfile_destroy(f);
}

static void test_fuzz_regressions(void **state)
{
    (void)state;
    cic_test_each_file("tests/fuzz-regressions/safetensors", check_fuzz_input, NULL);
}

/* ---- a file changed while it is mapped ---- */

/* One F32 tensor "t" of n values (n * 4 bytes of data) into path. */
static void write_f32_file(const char *path, size_t n)
{
    char hdr[128];
    unsigned char *data = calloc(n, 4);
    assert_non_null(data);
    snprintf(hdr, sizeof hdr, "{\"t\":{\"dtype\":\"F32\",\"shape\":[%zu],\"data_offsets\":[0,%zu]}}",
             n, 4 * n);
    write_raw(path, hdr, data, 4 * n);
    free(data);
}

static void on_bus_42(int sig)
{
    (void)sig;
    _exit(42);
}

/* The child of test_sigbus, in a process of its own (so the SIGBUS
 * handlers are the ones it sets up): map path, then fault inside the
 * mapping (mode "ours": the file cut short), or outside any of cicheck's
 * mappings after installing a handler of its own first ("chain") or not
 * ("default"). Returns only when no fault came. */
static int sigbus_child(const char *mode, const char *path)
{
    cic_diag d;
    cic_stfile *f;
    char other[1100];
    volatile unsigned char c;
    unsigned char *p;
    int fd;
    if (!strcmp(mode, "chain")) {
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = on_bus_42;
        sigaction(SIGBUS, &sa, NULL);
    }
    if (!(f = cic_stfile_create(path, &d)))
        return 10;
    if (!strcmp(mode, "ours")) {
        const cic_stfile_tensor *t = cic_stfile_tensor_at(f, 0);
        if (truncate(path, 4096) != 0)
            return 11;
        c = t->data[t->nbytes - 1];
        return 12;
    }
    /* a file mapped by hand (not cicheck's), cut short under its mapping */
    snprintf(other, sizeof other, "%s.other", path);
    write_f32_file(other, 16384);
    fd = open(other, O_RDWR);
    p = fd < 0 ? MAP_FAILED : mmap(NULL, 65536, PROT_READ, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED || ftruncate(fd, 0) != 0)
        return 13;
    c = p[32768];
    (void)c;
    cic_stfile_destroy(f);
    return 14;
}

/* Run this program as sigbus_child(mode, path), its stderr into err; the
 * wait status. */
static int run_child(const char *mode, const char *path, const char *err)
{
    int st = -1;
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        int fd = open(err, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        if (fd < 0 || dup2(fd, 2) < 0)
            _exit(99);
        execl("/proc/self/exe", "test_safetensors", "--sigbus-child", mode, path, (char *)NULL);
        _exit(98);
    }
    assert_int_equal(waitpid(pid, &st, 0), pid);
    return st;
}

/* A fault inside a mapping (the file cut short under it) is an error
 * naming the file, exit 3; one elsewhere goes to the handler installed
 * before cicheck's, or to the default action. */
static void test_sigbus(void **state)
{
    char path[1024], err[1024], *text;
    int st;
    (void)state;
    cic_test_tmp_path(path, sizeof path, "bus.safetensors");
    cic_test_tmp_path(err, sizeof err, "bus.err");
    write_f32_file(path, 16384);
    st = run_child("ours", path, err);
    text = cic_test_slurp(err, NULL);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 3 || !strstr(text, path) ||
        !strstr(text, ": changed while cicheck was reading it (truncated"))
        fail_msg("a fault in the mapping: status %#x, stderr '%s'", st, text);
    free(text);
    write_f32_file(path, 16384);
    st = run_child("chain", path, err);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 42)
        fail_msg("a fault elsewhere did not reach the handler before cicheck's: status %#x", st);
    st = run_child("default", path, err);
#if defined(__SANITIZE_ADDRESS__)
    /* the sanitizer's handler was there first: it reports and stops */
    if (WIFEXITED(st) && (WEXITSTATUS(st) == 0 || WEXITSTATUS(st) == 3 || WEXITSTATUS(st) >= 10))
#else
    if (!WIFSIGNALED(st) || WTERMSIG(st) != SIGBUS)
#endif
        fail_msg("a fault elsewhere did not take the default action: status %#x", st);
}

/* cic_stfile_check_unchanged: a mapped file whose mtime or size moved, or
 * one closed after it changed, is named once; unchanged files pass. */
static void test_changed_files(void **state)
{
    char path[1024];
    cic_diag d;
    cic_stfile *f;
    struct timespec ts[2] = {{0, UTIME_OMIT}, {1500000000, 7}};
    (void)state;
    cic_test_tmp_path(path, sizeof path, "chg.safetensors");
    write_f32_file(path, 1024);
    assert_non_null(f = cic_stfile_create(path, &d));
    assert_int_equal(cic_stfile_check_unchanged(&d), 0);
    assert_int_equal(utimensat(AT_FDCWD, path, ts, 0), 0); /* rewritten, same size */
    assert_int_equal(cic_stfile_check_unchanged(&d), -1);
    assert_string_equal(d.file, path);
    assert_non_null(strstr(d.msg, "rewritten in place"));
    cic_stfile_destroy(f); /* checked at close, reported once */
    assert_int_equal(cic_stfile_check_unchanged(&d), -1);
    assert_non_null(strstr(d.msg, "changed while cicheck was reading it"));
    assert_int_equal(cic_stfile_check_unchanged(&d), 0);
    assert_non_null(f = cic_stfile_create(path, &d));
    assert_int_equal(truncate(path, 4096), 0);
    assert_int_equal(cic_stfile_check_unchanged(&d), -1);
    assert_non_null(strstr(d.msg, "(4096 bytes, 41")); /* 8 + the header + 4096 at open */
    cic_stfile_destroy(f);
    assert_int_equal(cic_stfile_check_unchanged(&d), -1);
    assert_int_equal(cic_stfile_check_unchanged(&d), 0);
    /* closed before the change: nothing to report */
    write_f32_file(path, 1024);
    assert_non_null(f = cic_stfile_create(path, &d));
    cic_stfile_destroy(f);
    assert_int_equal(unlink(path), 0);
    assert_int_equal(cic_stfile_check_unchanged(&d), 0);
}

/* cic_stfile_watch_begin: within a run's watch a path mapped again must
 * be the file first mapped from it (a file cut or rewritten between two
 * openings is refused as changed, and check_unchanged names it and ends
 * the watch); outside a watch a path may hold a new file each time. */
static void test_watched_reopen(void **state)
{
    char path[1024];
    cic_diag d;
    cic_stfile *f;
    struct timespec ts[2] = {{0, UTIME_OMIT}, {1500000000, 7}};
    (void)state;
    cic_test_tmp_path(path, sizeof path, "watch.safetensors");
    write_f32_file(path, 1024);
    assert_int_equal(cic_stfile_check_unchanged(&d), 0);
    cic_stfile_watch_begin();
    assert_non_null(f = cic_stfile_create(path, &d));
    cic_stfile_destroy(f);
    assert_non_null(f = cic_stfile_create(path, &d)); /* the same file again */
    cic_stfile_destroy(f);
    write_f32_file(path, 512); /* between two openings: another, shorter, valid file */
    memset(&d, 0, sizeof d);
    assert_null(cic_stfile_create(path, &d));
    assert_string_equal(d.file, path);
    assert_non_null(strstr(d.msg, "changed while cicheck was reading it ("));
    assert_non_null(strstr(d.msg, "when it was opened"));
    assert_int_equal(cic_stfile_check_unchanged(&d), -1); /* the run's end: exit 3 */
    assert_string_equal(d.file, path);
    assert_int_equal(cic_stfile_check_unchanged(&d), 0);
    /* the watch ended: the new file opens */
    assert_non_null(f = cic_stfile_create(path, &d));
    cic_stfile_destroy(f);
    /* rewritten in place between two openings, the same size */
    cic_stfile_watch_begin();
    assert_non_null(f = cic_stfile_create(path, &d));
    cic_stfile_destroy(f);
    assert_int_equal(utimensat(AT_FDCWD, path, ts, 0), 0);
    assert_null(cic_stfile_create(path, &d));
    assert_non_null(strstr(d.msg, "rewritten in place"));
    assert_int_equal(cic_stfile_check_unchanged(&d), -1);
    /* a new watch forgets the last run's files */
    cic_stfile_watch_begin();
    write_f32_file(path, 1024);
    assert_non_null(f = cic_stfile_create(path, &d));
    cic_stfile_destroy(f);
    assert_int_equal(cic_stfile_check_unchanged(&d), 0);
    assert_int_equal(unlink(path), 0);
}

int main(int argc, char **argv)
{
    if (argc == 4 && !strcmp(argv[1], "--sigbus-child"))
        return sigbus_child(argv[2], argv[3]);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_writer_roundtrip),
        cmocka_unit_test(test_dump_of_a_run),
        cmocka_unit_test(test_dtype_tables),
        cmocka_unit_test(test_dtypes),
        cmocka_unit_test(test_hostile_header),
        cmocka_unit_test(test_hostile_length_and_nesting),
        cmocka_unit_test(test_not_regular_files),
        cmocka_unit_test(test_fuzz_regressions),
        cmocka_unit_test(test_changed_files),
        cmocka_unit_test(test_watched_reopen),
        cmocka_unit_test(test_sigbus),
    };
    return cmocka_run_group_tests(tests, cic_test_tmp_setup, cic_test_tmp_teardown);
}
