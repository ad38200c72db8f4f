/* main.c: the cicheck command line. Subcommands: run. Exit codes: 0 all gates
 * pass, 1 a gate or expectation failed, 2 bad input or usage, 3 resource
 * failure (DESIGN.md section 6). */
#include "base/base.h"
#include "case/case.h"
#include "cli/run.h"
#include "metric/flops.h"
#include "model/model.h"

#include <mpfr.h>
#include <string.h>

static const char USAGE[] =
    "usage: cicheck [--help] [--version] <command> [<args>]\n"
    "\n"
    "Verifies computational-invariance rewrites (LayerNorm fusion, residual\n"
    "rotation) of transformer blocks in float32 against an MPFR truth.\n"
    "\n"
    "commands:\n"
    "  run CASE.toml...   run case files; see 'cicheck run --help'\n"
    "  flops CASE.toml    analytical extra-FLOP table of the adaLN strategies for a\n"
    "                     dit case, optionally at other sizes (see 'cicheck flops\n"
    "                     --help'), e.g. DiT-XL/2: --d-model 1152 --heads 16\n"
    "  hash CASE.toml...  print the SHA-256 of each case's original weights and\n"
    "                     inputs (the fingerprints kept in reference/)\n"
    "\n"
    "exit codes: 0 all gates pass, 1 a gate or expectation failed,\n"
    "            2 bad input or usage, 3 out of memory or I/O failure\n";

static const char RUN_USAGE[] =
    "usage: cicheck run [options] CASE.toml...\n"
    "\n"
    "Builds the case's model from its seed, computes the MPFR truth, runs every\n"
    "transform in MPFR (verdict) and in each float32 engine (errors), checks\n"
    "the expectations and gates, prints a table and writes report.json.\n"
    "\n"
    "options:\n"
    "  --out DIR     where report.json goes (default reports/<case name>);\n"
    "                with several cases, DIR/<case name>\n"
    "  --dump DIR    also write weights, inputs and outputs as safetensors\n"
    "                (with several cases, DIR/<case name>)\n"
    "  --quiet       no progress lines on stderr\n"
    "  --color       force colours;  --no-color  never colour\n"
    "  -h, --help    this text\n";

static int usage_error(const char *fmt, const char *arg)
{
    fprintf(stderr, "cicheck: ");
    fprintf(stderr, fmt, arg);
    fprintf(stderr, "\nTry 'cicheck --help'.\n");
    return CIC_EINPUT;
}

/* The stem of a case path: "cases/adaln.toml" -> "adaln". */
static void stem(char *buf, size_t cap, const char *path)
{
    const char *b = strrchr(path, '/'), *dot;
    b = b ? b + 1 : path;
    dot = strrchr(b, '.');
    snprintf(buf, cap, "%.*s", dot ? (int)(dot - b) : (int)strlen(b), b);
}

static int cmd_run(int argc, char **argv)
{
    cic_run_args a;
    const char *cases[256];
    int n = 0, i, worst = CIC_OK;
    memset(&a, 0, sizeof a);
    a.color = -1;
    for (i = 0; i < argc; i++) {
        const char *s = argv[i];
        if (!strcmp(s, "-h") || !strcmp(s, "--help")) {
            fputs(RUN_USAGE, stdout);
            return CIC_OK;
        } else if (!strcmp(s, "--out") || !strcmp(s, "--dump")) {
            if (i + 1 >= argc)
                return usage_error("%s needs a folder", s);
            if (!strcmp(s, "--out"))
                a.out_dir = argv[++i];
            else
                a.dump_dir = argv[++i];
        } else if (!strncmp(s, "--out=", 6)) {
            a.out_dir = s + 6;
        } else if (!strncmp(s, "--dump=", 7)) {
            a.dump_dir = s + 7;
        } else if (!strcmp(s, "--quiet") || !strcmp(s, "-q")) {
            a.quiet = true;
        } else if (!strcmp(s, "--color")) {
            a.color = 1;
        } else if (!strcmp(s, "--no-color")) {
            a.color = 0;
        } else if (s[0] == '-' && s[1] != '\0') {
            return usage_error("unknown option '%s' for run", s);
        } else {
            if (n == (int)(sizeof cases / sizeof cases[0]))
                return usage_error("too many case files (limit 256)%s", "");
            cases[n++] = s;
        }
    }
    if (n == 0)
        return usage_error("run needs a case file, e.g. 'cicheck run cases/adaln.toml'%s", "");
    for (i = 0; i < n; i++) {
        cic_run_args one = a;
        char out[1024], dump[1024], st[256];
        int rc;
        if (n > 1) {
            stem(st, sizeof st, cases[i]);
            if (a.out_dir) {
                snprintf(out, sizeof out, "%s/%s", a.out_dir, st);
                one.out_dir = out;
            }
            if (a.dump_dir) {
                snprintf(dump, sizeof dump, "%s/%s", a.dump_dir, st);
                one.dump_dir = dump;
            }
        }
        rc = cic_run_case(cases[i], &one);
        /* the worst outcome wins: 2 (input) and 3 over 1 over 0 */
        if (rc > worst)
            worst = rc;
    }
    return worst;
}

static const char FLOPS_USAGE[] =
    "usage: cicheck flops [options] CASE.toml\n"
    "\n"
    "Prints the closed-form extra FLOPs (in % of the dit block) of every adaLN\n"
    "strategy against tokens per sample (16 .. 65536) and the crossover N* where\n"
    "folding per sample beats online unrotation. Nothing is run, so any size works.\n"
    "\n"
    "options (override the case's [model] sizes):\n"
    "  --d-model N  --heads N  --mlp-ratio N  --d-cond N  --layers N  --d-out N\n";

/* A positive integer option value, or -1. */
static int pos_int(const char *s)
{
    char *end;
    long v = strtol(s, &end, 10);
    if (*s == '\0' || *end != '\0' || v <= 0 || v > 1 << 20)
        return -1;
    return (int)v;
}

static int cmd_flops(int argc, char **argv)
{
    static const char *const keys[] = {"--d-model", "--heads", "--mlp-ratio", "--d-cond",
                                       "--layers", "--d-out"};
    int val[6] = {0, 0, 0, 0, 0, 0}, i, k;
    const char *path = NULL;
    cic_case c;
    cic_diag d;
    for (i = 0; i < argc; i++) {
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            fputs(FLOPS_USAGE, stdout);
            return CIC_OK;
        }
        for (k = 0; k < 6; k++)
            if (!strcmp(argv[i], keys[k]))
                break;
        if (k < 6) {
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
    if (c.model.block != CIC_BLOCK_DIT) {
        fprintf(stderr, "%s: flops needs a dit case (block = \"%s\")\n", path,
                CIC_BLOCK_NAME[c.model.block]);
        return CIC_EINPUT;
    }
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
    return cic_flops_dit_table(stdout, &c.model) == 0 ? CIC_OK : CIC_EINTERNAL;
}

static int cmd_hash(int argc, char **argv)
{
    int i, worst = CIC_OK;
    if (argc == 0)
        return usage_error("hash needs a case file%s", "");
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

int main(int argc, char **argv)
{
    if (argc < 2) {
        fputs(USAGE, stderr);
        return CIC_EINPUT;
    }
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
        fputs(USAGE, stdout);
        return CIC_OK;
    }
    if (!strcmp(argv[1], "--version")) {
        printf("cicheck %s (MPFR %s)\n", CIC_VERSION, mpfr_get_version());
        return CIC_OK;
    }
    if (!strcmp(argv[1], "run"))
        return cmd_run(argc - 2, argv + 2);
    if (!strcmp(argv[1], "flops"))
        return cmd_flops(argc - 2, argv + 2);
    if (!strcmp(argv[1], "hash"))
        return cmd_hash(argc - 2, argv + 2);
    return usage_error("unknown command '%s'", argv[1]);
}
