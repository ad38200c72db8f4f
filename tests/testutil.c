/* SPDX-License-Identifier: MIT */
/* testutil.c: the helpers of testutil.h that are more than a few lines or
 * keep state (the temporary folder). */
#include "testutil.h"

#include "base/base.h"
#include "model/model.h"
#include "model/op.h"
#include "xform/kinds.h"

#include <dirent.h>
#include <errno.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- the temporary folder ---- */

char cic_test_tmp[512];

int cic_test_tmp_setup(void **state)
{
    const char *t = getenv("TMPDIR");
    (void)state;
    snprintf(cic_test_tmp, sizeof cic_test_tmp, "%s/cic-%s.XXXXXX", t && t[0] ? t : "/tmp",
             program_invocation_short_name);
    if (!mkdtemp(cic_test_tmp)) {
        fprintf(stderr, "mkdtemp %s: %s\n", cic_test_tmp, strerror(errno));
        cic_test_tmp[0] = '\0';
        return -1;
    }
    return 0;
}

void cic_test_rm_rf(const char *path)
{
    struct stat st;
    if (lstat(path, &st) != 0)
        return;
    if (S_ISDIR(st.st_mode)) {
        DIR *dir;
        struct dirent *e;
        chmod(path, 0755); /* a test may have made it read-only */
        dir = opendir(path);
        while (dir && (e = readdir(dir)) != NULL) {
            char sub[2048];
            if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
                continue;
            snprintf(sub, sizeof sub, "%s/%s", path, e->d_name);
            cic_test_rm_rf(sub);
        }
        if (dir)
            closedir(dir);
        if (rmdir(path) != 0)
            fprintf(stderr, "cannot remove %s: %s\n", path, strerror(errno));
    } else {
        unlink(path);
    }
}

int cic_test_tmp_teardown(void **state)
{
    (void)state;
    /* only the folder cic_test_tmp_setup made */
    if (cic_test_tmp[0])
        cic_test_rm_rf(cic_test_tmp);
    cic_test_tmp[0] = '\0';
    return 0;
}

const char *cic_test_tmp_path(char *buf, size_t cap, const char *name)
{
    snprintf(buf, cap, "%s/%s", cic_test_tmp, name);
    return buf;
}

const char *cic_test_tmp_subdir(char *buf, size_t cap)
{
    if (!cic_test_tmp[0])
        fail_msg("no temporary folder (cic_test_tmp_setup did not run)");
    cic_test_tmp_path(buf, cap, "XXXXXX");
    if (!mkdtemp(buf))
        fail_msg("mkdtemp %s: %s", buf, strerror(errno));
    return buf;
}

/* ---- files ---- */

char *cic_test_slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    char *buf;
    long n = -1;
    if (!f || fseek(f, 0, SEEK_END) != 0 || (n = ftell(f)) < 0 || fseek(f, 0, SEEK_SET) != 0)
        fail_msg("cannot read %s: %s", path, strerror(errno));
    buf = malloc((size_t)n + 1);
    assert_non_null(buf);
    assert_int_equal(fread(buf, 1, (size_t)n, f), (size_t)n);
    buf[n] = '\0';
    fclose(f);
    if (len)
        *len = (size_t)n;
    return buf;
}

void cic_test_write_text(const char *path, const char *text)
{
    FILE *f = fopen(path, "wb");
    if (!f)
        fail_msg("cannot write %s: %s", path, strerror(errno));
    fputs(text, f);
    assert_int_equal(fclose(f), 0);
}

void cic_test_write_json(const char *path, json_t *j)
{
    assert_int_equal(json_dump_file(j, path, JSON_INDENT(1) | JSON_REAL_PRECISION(17)), 0);
}

/* ---- the files of a folder of test inputs ---- */

static int cmp_name(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

int cic_test_each_file(const char *rel, void (*check)(const char *path, const char *name, void *ctx),
                       void *ctx)
{
    char dir[1024], path[2048];
    char **names = NULL;
    size_t n = 0, cap = 0, i;
    DIR *dp;
    struct dirent *de;
    cic_test_path(dir, sizeof dir, rel);
    dp = opendir(dir);
    if (!dp)
        fail_msg("cannot open %s", dir);
    while ((de = readdir(dp))) {
        struct stat st;
        if (de->d_name[0] == '.' || strncmp(de->d_name, "README", 6) == 0)
            continue;
        /* (tests/fuzz-regressions: subfolders hold the other targets' inputs) */
        snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
        if (stat(path, &st) == 0 && S_ISDIR(st.st_mode))
            continue;
        if (n == cap) {
            cap = cap ? 2 * cap : 64;
            names = realloc(names, cap * sizeof *names);
            assert_non_null(names);
        }
        names[n] = strdup(de->d_name);
        assert_non_null(names[n]);
        n++;
    }
    closedir(dp);
    if (n)
        qsort(names, n, sizeof *names, cmp_name);
    for (i = 0; i < n; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        check(path, names[i], ctx);
        free(names[i]);
    }
    free(names);
    printf("# %zu file(s) in %s\n", n, rel);
    return (int)n;
}

/* ---- external tools ---- */

bool cic_test_have(const char *tool)
{
    char cmd[512];
    snprintf(cmd, sizeof cmd, "command -v '%s' >/dev/null 2>&1", tool);
    return system(cmd) == 0;
}

void cic_test_need(const char *tool, const char *why)
{
    if (cic_test_have(tool))
        return;
    print_message("%s not found on PATH (%s): skipped\n", tool, why);
    skip();
}

cic_xform_spec cic_test_xform_spec(const char *name, enum cic_xform_kind kind, enum cic_qkind q,
                                   bool fast)
{
    cic_xform_spec x;
    memset(&x, 0, sizeof x);
    cic_strlcpy(x.name, name, sizeof x.name);
    x.kind = kind;
    x.after = -1;
    x.prec = CIC_TPREC_MPFR;
    x.q = q;
    x.q_seed = 3;
    x.mistake = CIC_MISTAKE_NONE;
    x.expect = CIC_VERDICT_EQUIVALENT;
    x.stream = CIC_STREAM_CENTERED;
    x.fast = fast;
    return x;
}

int cic_test_mistake(enum cic_xform_kind kind, const char *name)
{
    int m = cic_xform_mistake_find(kind, name);
    if (m < 0)
        fail_msg("kind %s has no mistake '%s'", CIC_XFORM_NAME[kind], name);
    return m;
}

cic_model *cic_test_attn_model(cic_model_cfg cfg, int S, int T, int d, int H, int kv, bool causal)
{
    cic_model *m = cic_calloc(1, sizeof *m);
    cic_op o = cic_op_blank(CIC_OP_ATTN, CIC_SITE_ATTN, 0);
    int y;
    assert_non_null(m);
    m->cfg = cfg;
    m->cfg.tokens = T;
    m->cfg.samples = S;
    m->cfg.heads = H;
    m->cfg.causal = causal;
    m->rows = S * T;
    m->cond = -1;
    m->input = cic_model_tensor_add(m, "qkv", CIC_T_INPUT, S * T, 3 * d);
    y = cic_model_tensor_add(m, "y", CIC_T_ACT, S * T, d);
    assert_true(m->input >= 0 && y >= 0);
    o.in[0] = o.in[1] = o.in[2] = m->input;
    o.in_col[1] = d;
    o.in_col[2] = 2 * d;
    o.heads = H;
    o.kv_heads = kv;
    o.causal = causal;
    o.out = y;
    assert_true(cic_model_op_add(m, &o) >= 0);
    m->output = m->residual = y;
    return m;
}
