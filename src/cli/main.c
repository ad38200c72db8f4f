/* SPDX-License-Identifier: MIT */
/* main.c: the cicheck command line: run, bless, merge, plot, flops, hash.
 * Exit codes: 0 all gates pass, 1 a gate or expectation failed, 2 bad input
 * or usage, 3 resource failure or a lost result (DESIGN.md section 6). */
#include "base/base.h"
#include "base/blasenv.h"
#include "case/case.h"
#include "cli/run.h"
#include "cli/usage.h"
#include "report/plot.h"
#include "report/report.h"
#include "metric/flops.h"
#include "model/model.h"
#include "pipeline/sweep.h"

#include <errno.h>

#include <math.h>
#include <stdbool.h>
#include <string.h>
#include <sys/stat.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif

static int pos_int(const char *s);

static int usage_error(const char *fmt, const char *arg)
{
    fprintf(stderr, "cicheck: ");
    fprintf(stderr, fmt, arg);
    fprintf(stderr, "\nTry 'cicheck --help'.\n");
    return CIC_EINPUT;
}

/* ---- strict option values: decimal only ("0x10", "inf", "1e3" for an
 * integer, " 5" and "" are refused) ---- */

/* A decimal number: digits with an optional point and exponent. *end is the
 * first byte after it. -1 when s does not start with one. */
static int dec_num(const char *s, double *v, const char **end)
{
    const char *p = s;
    bool digits = false;
    while (*p >= '0' && *p <= '9')
        p++, digits = true;
    if (*p == '.') {
        p++;
        while (*p >= '0' && *p <= '9')
            p++, digits = true;
    }
    if (!digits)
        return -1;
    if (*p == 'e' || *p == 'E') {
        const char *q = p + 1;
        if (*q == '+' || *q == '-')
            q++;
        if (*q >= '0' && *q <= '9') {
            while (*q >= '0' && *q <= '9')
                q++;
            p = q;
        }
    }
    *v = strtod(s, NULL); /* the text is plain decimal now */
    *end = p;
    return isfinite(*v) ? 0 : -1;
}

/* --tolerance S[,U]: scale the default relative allowances by S (0: the
 * figures must not grow at all) and allow U ULPs on top. */
static int parse_tolerance(cic_tolerance *t, const char *s)
{
    const char *end;
    double scale, ulp = t->abs_ulp;
    if (dec_num(s, &scale, &end) < 0 || scale > 1e6)
        return -1;
    if (*end == ',') {
        if (dec_num(end + 1, &ulp, &end) < 0 || ulp > 1e12)
            return -1;
    }
    if (*end != '\0')
        return -1;
    t->stable = CIC_TOLERANCE_DEFAULT.stable * scale;
    t->spread = CIC_TOLERANCE_DEFAULT.spread * scale;
    t->tail = CIC_TOLERANCE_DEFAULT.tail * scale;
    t->abs_ulp = ulp;
    return 0;
}

/* --max-memory B: bytes, decimal, with an optional K, M or G. */
static int parse_bytes(double *out, const char *s)
{
    const char *end;
    double v, mul = 1.0;
    if (dec_num(s, &v, &end) < 0)
        return -1;
    if (*end == 'K' || *end == 'M' || *end == 'G') {
        mul = *end == 'K' ? 1024.0 : *end == 'M' ? 1048576.0 : 1073741824.0;
        end++;
    }
    if (*end != '\0' || !(v > 0))
        return -1;
    *out = v * mul;
    return 0;
}

/* Write the baseline of one finished run. */
static int bless_one(const cic_case_run *cr, const char *dir, const char *src)
{
    char path[1200];
    cic_diag d;
    /* the outlier statistics and channel profiles stay in report.json: no
     * baseline rule reads them, and they are most of a quantization case's
     * report */
    cic_report b = cr->rep;
    b.lowp.n_outliers = 0;
    snprintf(path, sizeof path, "%s/%s.json", dir, cr->kase.name);
    if (cic_mkdir_p(dir, &d) < 0 || cic_report_json_write_file(&b, path, &d) < 0) {
        cic_diag_print(stderr, &d);
        return CIC_EINTERNAL;
    }
    printf("blessed %s -> %s\n", src, path);
    return CIC_OK;
}

/* JUnit, Markdown and the CI page for all runs. Any of them that cannot be
 * written is a lost result: exit 3. */
static int summaries(cic_case_run **runs, int n, const char *junit, const char *markdown)
{
    const cic_report **reps = cic_calloc((size_t)n, sizeof *reps);
    const char **errs = cic_calloc((size_t)n, sizeof *errs);
    const char *gh = getenv("GITHUB_STEP_SUMMARY");
    cic_diag d;
    int i, rc = CIC_OK;
    if (!reps || !errs) {
        free(reps);
        free(errs);
        return CIC_EINTERNAL;
    }
    for (i = 0; i < n; i++) {
        reps[i] = runs[i] && runs[i]->rep.kase ? &runs[i]->rep : NULL;
        errs[i] = runs[i] ? runs[i]->error : "out of memory";
    }
    if (junit && cic_junit_write(junit, reps, errs, n, &d) < 0) {
        cic_diag_print(stderr, &d);
        rc = CIC_EINTERNAL;
    }
    if (markdown && cic_markdown_write(markdown, reps, errs, n, false, &d) < 0) {
        cic_diag_print(stderr, &d);
        rc = CIC_EINTERNAL;
    }
    if (gh && gh[0] && cic_markdown_write(gh, reps, errs, n, true, &d) < 0) {
        fprintf(stderr, "cicheck: $GITHUB_STEP_SUMMARY: ");
        cic_diag_print(stderr, &d);
        rc = CIC_EINTERNAL;
    }
    free(reps);
    free(errs);
    return rc;
}

/* ---- `cicheck run` and `cicheck bless`: options ---- */

/* What the command line asked. Every option may be given once. */
typedef struct {
    bool bless, force;
    cic_run_args a;
    const char *junit, *markdown;
    cic_strlist cases;
    unsigned seen; /* bit k: RUN_OPTS[k] given */
} run_cmd;

/* Options in one table: name, takes a value, bless-only. */
static const struct {
    const char *name;
    bool value;
    bool bless_only;
} RUN_OPTS[] = {
    {"--out", true, false},        {"--dump", true, false},
    {"--baseline", true, false},   {"--junit", true, false},
    {"--markdown", true, false},   {"--tolerance", true, false},
    {"--shard", true, false},      {"--threads", true, false},
    {"--max-memory", true, false}, {"--no-baseline", false, false},
    {"--no-plots", false, false},  {"--force", false, true},
    {"--quiet", false, false},     {"-q", false, false},
    {"--color", false, false},     {"--no-color", false, false},
    {"--recheck", false, false},
};
#define RUN_N_OPTS (sizeof RUN_OPTS / sizeof RUN_OPTS[0])

static int run_opt_index(const char *s)
{
    size_t k;
    for (k = 0; k < RUN_N_OPTS; k++)
        if (!strcmp(s, RUN_OPTS[k].name))
            return (int)k;
    return -1;
}

static bool run_seen(const run_cmd *c, const char *name)
{
    int k = run_opt_index(name);
    return k >= 0 && (c->seen >> k & 1u);
}

/* --shard K/N: decimal, 1 <= K <= N. */
static bool shard_ok(const char *s)
{
    const char *slash = strchr(s, '/');
    char k[16];
    int kv, nv;
    if (!slash || (size_t)(slash - s) >= sizeof k)
        return false;
    memcpy(k, s, (size_t)(slash - s));
    k[slash - s] = '\0';
    kv = pos_int(k);
    nv = pos_int(slash + 1);
    return kv > 0 && nv > 0 && kv <= nv;
}

/* Store one option's value; 0, or the exit code of a usage error. */
static int run_opt_value(run_cmd *c, const char *opt, const char *v)
{
    if (!v[0])
        return usage_error("%s needs a non-empty value", opt);
    if (!strcmp(opt, "--out"))
        c->a.out_dir = v;
    else if (!strcmp(opt, "--dump"))
        c->a.dump_dir = v;
    else if (!strcmp(opt, "--baseline"))
        c->a.baseline_dir = v;
    else if (!strcmp(opt, "--junit"))
        c->junit = v;
    else if (!strcmp(opt, "--markdown"))
        c->markdown = v;
    else if (!strcmp(opt, "--shard")) {
        if (!shard_ok(v))
            return usage_error("--shard takes K/N with 1 <= K <= N (got '%s')", v);
        c->a.shard = v;
    } else if (!strcmp(opt, "--threads")) {
        int t = pos_int(v);
        if (t < 1 || t > 256)
            return usage_error("--threads takes 1 .. 256 (got '%s')", v);
        c->a.threads = t;
    } else if (!strcmp(opt, "--max-memory")) {
        if (parse_bytes(&c->a.max_memory, v) < 0)
            return usage_error("--max-memory takes a decimal number of bytes, optionally "
                               "with K, M or G (got '%s')", v);
    } else if (parse_tolerance(&c->a.tol, v) < 0) {
        return usage_error("--tolerance takes S or S,U, decimal numbers >= 0 (got '%s')", v);
    }
    return 0;
}

static int run_opt_flag(run_cmd *c, const char *opt)
{
    if (!strcmp(opt, "--no-baseline"))
        c->a.no_baseline = true;
    else if (!strcmp(opt, "--recheck"))
        c->a.recheck = true;
    else if (!strcmp(opt, "--no-plots"))
        c->a.no_plots = true;
    else if (!strcmp(opt, "--force"))
        c->force = true;
    else if (!strcmp(opt, "--quiet") || !strcmp(opt, "-q"))
        c->a.quiet = true;
    else if (!strcmp(opt, "--color"))
        c->a.color = 1;
    else
        c->a.color = 0;
    return 0;
}

/* A folder that must exist (merge's shards). */
static int check_dir_opt(const char *opt, const char *dir)
{
    struct stat st;
    if (stat(dir, &st) != 0) {
        fprintf(stderr, "cicheck: %s %s: no such folder (%s)\n", opt, dir, strerror(errno));
        return CIC_EINPUT;
    }
    if (!S_ISDIR(st.st_mode)) {
        fprintf(stderr, "cicheck: %s %s: exists and is not a folder\n", opt, dir);
        return CIC_EINPUT;
    }
    return 0;
}

/* An output folder option (the user's: it may be new or a link): anything
 * in the way, an empty or too long name or a folder that cannot be written
 * is refused before a run that may take minutes; file (NULL: none) is
 * what goes in it. 0, or exit 2 with the option named. */
static int check_out_opt(const char *opt, const char *dir, const char *file)
{
    cic_diag d;
    if (strlen(dir) > CIC_RUN_PATH_MAX) {
        fprintf(stderr, "cicheck: %s: the folder name is longer than %d bytes\n", opt,
                CIC_RUN_PATH_MAX);
        return CIC_EINPUT;
    }
    if (cic_out_check(dir, NULL, file, &d) != 0) {
        fprintf(stderr, "cicheck: %s: ", opt);
        cic_diag_print(stderr, &d);
        return CIC_EINPUT;
    }
    return 0;
}

/* A file the user names (--junit, --markdown): a link is followed, a FIFO
 * or device written in place; a missing folder is made when it is written
 * (`--out reports/ci --junit reports/ci/junit.xml`), so only a folder that
 * cannot be made is refused here. 0, or exit 2. */
static int check_file_opt(const char *opt, const char *path)
{
    cic_diag d;
    if (cic_atomic_check_user(path, &d) != 0) {
        fprintf(stderr, "cicheck: %s: ", opt);
        cic_diag_print(stderr, &d);
        return CIC_EINPUT;
    }
    return 0;
}

/* Refuse what cannot go together, and output paths that cannot be
 * written, before anything runs. */
static int run_check(run_cmd *c)
{
    cic_diag d;
    const char *verb = c->bless ? "bless" : "run";
    if (run_seen(c, "--baseline") && run_seen(c, "--no-baseline"))
        return usage_error("--baseline and --no-baseline contradict each other%s", "");
    if (run_seen(c, "--color") && run_seen(c, "--no-color"))
        return usage_error("--color and --no-color contradict each other%s", "");
    if (run_seen(c, "--quiet") && run_seen(c, "-q"))
        return usage_error("--quiet is given twice (as -q too)%s", "");
    if (c->cases.n == 0)
        return usage_error(c->bless ? "bless needs a case file%s"
                                    : "run needs a case file, e.g. 'cicheck run "
                                      "cases/adaln.toml'%s",
                           "");
    (void)verb;
    /* run compares with an existing folder; bless may create its own */
    if (c->a.baseline_dir && !c->bless && cic_baseline_dir_check(c->a.baseline_dir, &d) != 0) {
        fprintf(stderr, "cicheck: --baseline: ");
        cic_diag_print(stderr, &d);
        return CIC_EINPUT;
    }
    if (c->a.baseline_dir && c->bless && check_out_opt("--baseline", c->a.baseline_dir, NULL))
        return CIC_EINPUT;
    if (c->a.out_dir && check_out_opt("--out", c->a.out_dir, NULL) != 0)
        return CIC_EINPUT;
    if (c->a.dump_dir && check_out_opt("--dump", c->a.dump_dir, NULL) != 0)
        return CIC_EINPUT;
    if (c->junit && check_file_opt("--junit", c->junit) != 0)
        return CIC_EINPUT;
    if (c->markdown && check_file_opt("--markdown", c->markdown) != 0)
        return CIC_EINPUT;
    if (c->bless && !c->force) {
        const char *ci = getenv("CI");
        if (ci && !strcmp(ci, "true")) {
            fprintf(stderr, "cicheck: bless refused: CI=true (a CI job must not accept its own "
                            "numbers); run it on a workstation, or pass --force\n");
            return CIC_EINPUT;
        }
    }
    return 0;
}

/* Parse argv into c: 0, 1 when --help was printed, or an exit code (2). */
static int run_parse(run_cmd *c, int argc, char **argv)
{
    int i;
    const char *verb = c->bless ? "bless" : "run";
    for (i = 0; i < argc; i++) {
        const char *s = argv[i];
        int k;
        if (!strcmp(s, "-h") || !strcmp(s, "--help")) {
            fputs(c->bless ? CIC_BLESS_USAGE : CIC_RUN_USAGE, stdout);
            return 1;
        }
        k = run_opt_index(s);
        if (k >= 0 && !(RUN_OPTS[k].bless_only && !c->bless)) {
            int rc;
            if (c->seen >> k & 1u)
                return usage_error("%s is given twice", s);
            c->seen |= 1u << k;
            if (!RUN_OPTS[k].value)
                rc = run_opt_flag(c, s);
            else if (i + 1 >= argc)
                rc = usage_error("%s needs a value", s);
            else
                rc = run_opt_value(c, s, argv[++i]);
            if (rc)
                return rc;
        } else if (s[0] == '-' && s[1] != '\0') {
            fprintf(stderr, "cicheck: unknown option '%s' for %s\nTry 'cicheck %s --help'.\n", s,
                    verb, verb);
            return CIC_EINPUT;
        } else if (cic_case_list_add(&c->cases, s) < 0) {
            return usage_error("out of memory listing '%s'", s);
        }
    }
    return run_check(c);
}

/* Run (and bless) every case; the worst exit code wins. */
static int run_all(run_cmd *c, cic_case_run **runs)
{
    int i, worst = CIC_OK, passed = 0, rc;
    for (i = 0; i < c->cases.n; i++) {
        cic_run_args one;
        char out[1200], dump[1200];
        const char *path = c->cases.v[i];
        cic_case_args(&one, &c->a, &c->cases, i, out, dump);
        rc = cic_run_case(path, &one, &runs[i]);
        if (c->bless && runs[i] && rc == CIC_EGATE && !c->force)
            fprintf(stderr, "cicheck: %s: not blessed: the run fails its gates (--force to "
                            "bless anyway)\n", path);
        else if (c->bless && runs[i] && (rc == CIC_OK || rc == CIC_EGATE))
            rc = bless_one(runs[i], c->a.baseline_dir ? c->a.baseline_dir : "reference", path);
        if (rc == CIC_OK)
            passed++;
        /* the worst outcome wins: 2 (input) and 3 over 1 over 0 */
        if (rc > worst)
            worst = rc;
    }
    if (c->cases.n > 1)
        printf("\ncicheck: %d cases, %d passed, %d failed\n", c->cases.n, passed,
               c->cases.n - passed);
    return worst;
}

static int cmd_run_or_bless(int argc, char **argv, bool bless)
{
    run_cmd c;
    cic_case_run **runs = NULL;
    int i, worst, rc;
    memset(&c, 0, sizeof c);
    c.bless = bless;
    c.a.color = -1;
    c.a.tol = CIC_TOLERANCE_DEFAULT;
    rc = run_parse(&c, argc, argv);
    if (rc != 0) {
        cic_strlist_free(&c.cases);
        return rc == 1 ? CIC_OK : rc;
    }
    if (bless)
        c.a.no_baseline = true;
    rc = cic_case_list_check(&c.cases, &c.a, c.bless);
    if (rc != CIC_OK) {
        cic_strlist_free(&c.cases);
        return rc;
    }
    runs = cic_calloc((size_t)c.cases.n, sizeof *runs);
    if (!runs) {
        cic_strlist_free(&c.cases);
        return CIC_EINTERNAL;
    }
    worst = run_all(&c, runs);
    rc = summaries(runs, c.cases.n, c.junit, c.markdown);
    if (rc > worst)
        worst = rc;
    for (i = 0; i < c.cases.n; i++)
        cic_case_run_free(runs[i]);
    free(runs);
    cic_strlist_free(&c.cases);
    return worst;
}

/* A positive decimal integer option value (at most 2^20), or -1. */
static int pos_int(const char *s)
{
    long v = 0;
    const char *p = s;
    if (*p < '0' || *p > '9')
        return -1; /* no sign, no space, no empty value */
    for (; *p >= '0' && *p <= '9'; p++) {
        v = v * 10 + (*p - '0');
        if (v > 1 << 20)
            return -1;
    }
    return *p == '\0' && v > 0 ? (int)v : -1;
}

/* The closed-form FLOPs of every transform of a preln, rmsnorm or parallel
 * case at the sizes given (val: cmd_flops' keys), against the untransformed
 * block and against the transform each is applied after. */
static int flops_transforms(cic_case *c, const int *val, const char *path)
{
    cic_model_cfg *m = &c->model;
    cic_flop_count fc;
    double base, tot[CIC_MAX_XFORMS], R, L;
    int i;
    if (val[3]) {
        fprintf(stderr, "cicheck: --d-cond is for dit cases\n");
        return CIC_EINPUT;
    }
    if (val[0]) m->d_model = val[0];
    if (val[1]) m->heads = val[1];
    if (val[4]) m->layers = val[4];
    if (val[5]) m->d_out = val[5];
    if (val[7]) m->kv_heads = val[7];
    if (val[8]) m->tokens = val[8];
    if (val[2]) m->mlp_ratio = val[2];
    m->d_mlp = val[6] ? val[6] : (int)(m->mlp_ratio * m->d_model + 0.5);
    if (!val[5] && val[0])
        m->d_out = m->d_model;
    if (m->d_model % m->heads || m->heads % cic_cfg_kv_heads(m)) {
        fprintf(stderr, "cicheck: d_model = %d, heads = %d, kv_heads = %d: the heads must "
                "divide d_model and the kv heads the heads\n", m->d_model, m->heads,
                cic_cfg_kv_heads(m));
        return CIC_EINPUT;
    }
    R = (double)m->tokens * m->samples;
    L = m->layers;
    cic_flops_case(&fc, CIC_CASE_CHAIN(c), -1);
    base = cic_flop_total(&fc);
    printf("%s: %s block, d_model %d, heads %d (kv %d), MLP %d, %d layers, %d tokens x %d "
           "samples: %.0f FLOPs untransformed\n", path, CIC_BLOCK_NAME[m->block], m->d_model,
           m->heads, cic_cfg_kv_heads(m), m->d_mlp, m->layers, m->tokens, m->samples, base);
    printf("%-20s %16s %16s %18s %22s\n", "transform", "FLOPs", "extra", "extra/token/layer",
           "vs 'after'/token/layer");
    for (i = 0; i < c->n_xf; i++) {
        const cic_xform_spec *x = &c->xf[i];
        cic_flops_case(&fc, CIC_CASE_CHAIN(c), i);
        tot[i] = cic_flop_total(&fc);
        printf("%-20s %16.0f %+16.0f %+18.1f", x->name, tot[i], tot[i] - base,
               (tot[i] - base) / (R * L));
        if (x->after >= 0)
            printf(" %+22.1f (after %s)\n", (tot[i] - tot[x->after]) / (R * L),
                   c->xf[x->after].name);
        else
            printf(" %22s\n", "-");
    }
    return CIC_OK;
}

static int cmd_flops(int argc, char **argv)
{
    static const char *const keys[] = {"--d-model", "--heads", "--mlp-ratio", "--d-cond",
                                       "--layers", "--d-out", "--d-mlp", "--kv-heads",
                                       "--tokens"};
    int val[9] = {0, 0, 0, 0, 0, 0, 0, 0, 0}, i, k;
    const char *path = NULL;
    cic_case c;
    cic_dit_flops_table table;
    cic_diag d;
    for (i = 0; i < argc; i++) {
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            fputs(CIC_FLOPS_USAGE, stdout);
            return CIC_OK;
        }
        for (k = 0; k < 9; k++)
            if (!strcmp(argv[i], keys[k]))
                break;
        if (k < 9) {
            if (i + 1 >= argc || (val[k] = pos_int(argv[i + 1])) < 0)
                return usage_error("%s needs a positive integer", keys[k]);
            i++;
        } else if (argv[i][0] == '-') {
            return usage_error("unknown option '%s' for flops", argv[i]);
        } else if (path) {
            return usage_error("flops takes one case file (got '%s' too)", argv[i]);
        } else {
            path = argv[i];
        }
    }
    if (!path)
        return usage_error("flops needs a dit case file, e.g. 'cicheck flops cases/adaln.toml'%s", "");
    if (cic_case_load(&c, path, &d) != CIC_OK) {
        cic_diag_print(stderr, &d);
        return CIC_EINPUT;
    }
    if (cic_block(c.model.block)->norm != CIC_NORM_ADALN)
        return flops_transforms(&c, val, path);
    if (val[0]) c.model.d_model = val[0];
    if (val[1]) c.model.heads = val[1];
    if (val[3]) c.model.d_cond = val[3];
    if (val[4]) c.model.layers = val[4];
    if (val[5]) c.model.d_out = val[5];
    if (val[2]) c.model.mlp_ratio = val[2];
    c.model.d_mlp = (int)(c.model.mlp_ratio * c.model.d_model + 0.5);
    if (!val[3] && val[0])
        c.model.d_cond = c.model.d_model; /* DiT: c has the model's width */
    if (c.model.d_model % c.model.heads != 0) {
        fprintf(stderr, "cicheck: d_model = %d is not divisible by heads = %d\n",
                c.model.d_model, c.model.heads);
        return CIC_EINPUT;
    }
    cic_dit_flops_table_fill(&table, CIC_CASE_CHAIN(&c));
    return cic_report_dit_flops_table(stdout, &table) == 0 ? CIC_OK : CIC_EINTERNAL;
}

/* One merge option; 0, or the usage error's exit code. */
static int merge_opt(cic_merge_args *m, const char **junit, const char **markdown, int argc,
                     char **argv, int *i)
{
    const char *s = argv[*i], *v = *i + 1 < argc ? argv[*i + 1] : NULL;
    const char **dst = !strcmp(s, "--out") ? &m->out_dir
                       : !strcmp(s, "--baseline") ? &m->baseline_dir
                       : !strcmp(s, "--junit") ? junit
                       : !strcmp(s, "--markdown") ? markdown : NULL;
    if (dst || !strcmp(s, "--tolerance")) {
        if (!v || !v[0])
            return usage_error("%s needs a non-empty value", s);
        ++*i;
        if (!dst)
            return parse_tolerance(&m->tol, v) < 0
                       ? usage_error("--tolerance takes S or S,U, decimal numbers >= 0 (got "
                                     "'%s')", v) : 0;
        if (*dst)
            return usage_error("%s is given twice", s);
        *dst = v;
    } else if (!strcmp(s, "--no-plots")) {
        m->no_plots = true;
    } else if (!strcmp(s, "--no-baseline")) {
        m->no_baseline = true;
    } else if (!strcmp(s, "--no-color") || !strcmp(s, "--color")) {
        m->color = !strcmp(s, "--color");
    } else {
        return usage_error("unknown option '%s' for merge", s);
    }
    return 0;
}

/* A folder cicheck merge can take: one that 'cicheck run --shard K/N'
 * wrote (case-shard.json or sweep.json); 0, else the message and exit 2. */
static int check_shard_dir(const char *dir)
{
    char path[1300];
    struct stat st;
    if (check_dir_opt("merge:", dir) != 0)
        return CIC_EINPUT;
    snprintf(path, sizeof path, "%s/sweep.json", dir);
    if (cic_is_case_shard(dir) || stat(path, &st) == 0)
        return 0;
    fprintf(stderr, "cicheck: merge: %s holds neither case-shard.json nor sweep.json (give the "
                    "--out folders of 'cicheck run --shard K/N')\n", dir);
    return CIC_EINPUT;
}

/* merge's outputs, before anything is merged: --out (a case's report.json,
 * or a sweep's sweep.json and plots/), --junit, --markdown. 0 or exit 2. */
static int merge_check_outputs(const cic_merge_args *m, const char *first, const char *junit,
                               const char *markdown)
{
    bool kase = cic_is_case_shard(first);
    char plots[CIC_RUN_PATH_MAX + 8];
    cic_diag d;
    if (check_out_opt("--out", m->out_dir, kase ? "report.json" : "sweep.json") != 0)
        return CIC_EINPUT;
    snprintf(plots, sizeof plots, "%s/plots", m->out_dir);
    if (!kase && !m->no_plots && cic_out_check(m->out_dir, plots, NULL, &d) != 0) {
        fprintf(stderr, "cicheck: --out: ");
        cic_diag_print(stderr, &d);
        return CIC_EINPUT;
    }
    if (junit && check_file_opt("--junit", junit) != 0)
        return CIC_EINPUT;
    if (markdown && check_file_opt("--markdown", markdown) != 0)
        return CIC_EINPUT;
    return 0;
}

static int cmd_merge(int argc, char **argv)
{
    const char **dirs = cic_calloc((size_t)argc + 1, sizeof *dirs);
    const char *junit = NULL, *markdown = NULL;
    cic_merge_args m;
    int i, n = 0, rc = CIC_OK;
    if (!dirs)
        return CIC_EINTERNAL;
    memset(&m, 0, sizeof m);
    m.color = -1;
    m.tol = CIC_TOLERANCE_DEFAULT;
    for (i = 0; i < argc && rc == CIC_OK; i++) {
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            fputs(CIC_MERGE_USAGE, stdout);
            free(dirs);
            return CIC_OK;
        }
        if (argv[i][0] == '-')
            rc = merge_opt(&m, &junit, &markdown, argc, argv, &i);
        else
            dirs[n++] = argv[i];
    }
    if (rc == CIC_OK && (!m.out_dir || n == 0))
        rc = usage_error("merge needs --out DIR and the shard folders%s", "");
    for (i = 0; i < n && rc == CIC_OK; i++)
        rc = check_shard_dir(dirs[i]);
    if (rc == CIC_OK)
        rc = merge_check_outputs(&m, dirs[0], junit, markdown);
    if (rc == CIC_OK && cic_is_case_shard(dirs[0])) {
        cic_case_run *cr = NULL;
        int src;
        rc = cic_case_merge(dirs, n, &m, &cr);
        src = summaries(&cr, 1, junit, markdown);
        if (src > rc)
            rc = src;
        cic_case_run_free(cr);
    } else if (rc == CIC_OK) {
        rc = cic_merge_sweeps(dirs, n, m.out_dir, m.no_plots);
    }
    free(dirs);
    return rc;
}

static int cmd_plot(int argc, char **argv)
{
    int i, worst = CIC_OK;
    if (argc == 0)
        return usage_error("plot needs a report folder%s", "");
    /* every folder's plots/ before any is drawn */
    for (i = 0; i < argc; i++) {
        char plots[4200];
        cic_diag d;
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            fputs(CIC_PLOT_USAGE, stdout);
            return CIC_OK;
        }
        snprintf(plots, sizeof plots, "%s/plots", argv[i]);
        if (argv[i][0] && strlen(argv[i]) < 4000 && cic_out_check(argv[i], plots, NULL, &d)) {
            cic_diag_print(stderr, &d);
            return CIC_EINPUT;
        }
    }
    for (i = 0; i < argc; i++) {
        cic_diag d;
        int n = 0, rc = cic_plot_dir(argv[i], &n, &d);
        if (rc < 0) {
            cic_diag_print(stderr, &d);
            /* -2: drawing failed once the input was read (a lost result) */
            rc = rc == -2 ? CIC_EINTERNAL : CIC_EINPUT;
            if (rc > worst)
                worst = rc;
        } else {
            printf("drew %d plot%s in %s/plots\n", n, n == 1 ? "" : "s", argv[i]);
        }
    }
    return worst;
}

static int cmd_hash(int argc, char **argv)
{
    int i, worst = CIC_OK;
    if (argc == 0)
        return usage_error("hash needs a case file%s", "");
    for (i = 0; i < argc; i++) {
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            fputs(CIC_HASH_USAGE, stdout);
            return CIC_OK;
        }
        if (argv[i][0] == '-' && argv[i][1] != '\0')
            return usage_error("unknown option '%s' for hash", argv[i]);
    }
    for (i = 0; i < argc; i++) {
        cic_case c;
        cic_diag d;
        cic_model *m;
        char hex[65];
        if (cic_case_load(&c, argv[i], &d) != CIC_OK) {
            cic_diag_print(stderr, &d);
            worst = CIC_EINPUT;
            continue;
        }
        m = cic_model_create(&c.model, c.readout);
        if (!m) {
            fprintf(stderr, "%s: out of memory building the model\n", argv[i]);
            worst = CIC_EINTERNAL;
            continue;
        }
        cic_model_weights_sha256(hex, m);
        printf("%s  %s\n", hex, argv[i]);
        cic_model_destroy(m);
    }
    return worst;
}

/* Everything a command printed must have reached stdout: a result lost to
 * a full disk or a closed pipe is exit 3, not success. */
static int finish(int rc)
{
    if (fflush(stdout) != 0 || ferror(stdout)) {
        fprintf(stderr, "cicheck: cannot write to standard output: %s\n",
                strerror(errno ? errno : EIO));
        return rc > CIC_EINTERNAL ? rc : CIC_EINTERNAL;
    }
    return rc;
}

static int dispatch(int argc, char **argv)
{
    if (argc < 2) {
        fputs(CIC_MAIN_USAGE, stderr);
        return CIC_EINPUT;
    }
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
        fputs(CIC_MAIN_USAGE, stdout);
        return CIC_OK;
    }
    if (!strcmp(argv[1], "--version")) {
        cic_env env;
        cic_report_env_fill(&env);
        printf("cicheck %s (MPFR %s)\n", CIC_VERSION, env.mpfr);
        return CIC_OK;
    }
    if (!strcmp(argv[1], "run"))
        return cmd_run_or_bless(argc - 2, argv + 2, false);
    if (!strcmp(argv[1], "bless"))
        return cmd_run_or_bless(argc - 2, argv + 2, true);
    if (!strcmp(argv[1], "merge"))
        return cmd_merge(argc - 2, argv + 2);
    if (!strcmp(argv[1], "plot"))
        return cmd_plot(argc - 2, argv + 2);
    if (!strcmp(argv[1], "flops"))
        return cmd_flops(argc - 2, argv + 2);
    if (!strcmp(argv[1], "hash"))
        return cmd_hash(argc - 2, argv + 2);
    if (!strcmp(argv[1], "verify"))
        return cic_cmd_verify(argc - 2, argv + 2);
    return usage_error("unknown command '%s'", argv[1]);
}

int main(int argc, char **argv)
{
#ifdef __GLIBC__
    /* Blocks of 4 MiB and more (weights, activations) straight from mmap
     * and back to the system when freed: glibc's default raises this
     * threshold to the largest block freed (up to 32 MiB), after which a
     * model's per-tensor arrays come from the heap, and what its holes keep
     * stays in the resident set (hundreds of MB at a DiT-XL/2's size). */
    mallopt(M_MMAP_THRESHOLD, 4 << 20);
#endif
    /* the commands that run engines (the others need no OpenBLAS threads
     * and do not pay for a second start) */
    if (argc >= 2 && (!strcmp(argv[1], "run") || !strcmp(argv[1], "bless") ||
                      !strcmp(argv[1], "verify")))
        cic_blas_env_reexec(argv);
    return finish(dispatch(argc, argv));
}
