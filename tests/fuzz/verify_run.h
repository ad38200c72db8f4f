/* SPDX-License-Identifier: MIT */
/* verify_run.h: one fuzz input as `cicheck verify`'s command line and files
 * (the parsing of src/cli/verify.c; the checks of src/pipeline/verify.c on
 * the two checkpoints, the --q file, the --input file and the --case file;
 * then the MPFR runs of two tiny models). The input's preamble is the
 * arguments, one a line ('' an empty argument; empty lines skipped; at
 * most VF_MAX_ARGS); its files (tests/fuzz/fuzz_files.h) are written into
 * a fresh folder dir/w, the working folder of the run, beside the
 * fixtures: orig/ and trans/, the tiny checkpoint of tiny_ckpt.h (trans
 * with its norm gains left out, fused: the same model), and q.safetensors,
 * the identity of order 8 (F64). A file of the input replaces the fixture
 * of its name.
 *
 * The arguments follow "--tokens 2 --samples 1 --mpfr-prec 64 --threads 1"
 * (a later option wins), so a run stays small. An input is not used when
 * an argument is an absolute path or has "..", or when a value of --tokens,
 * --samples, --mpfr-prec or --threads is a number above VF_MAX_TOKENS,
 * VF_MAX_SAMPLES, VF_MAX_PREC or VF_MAX_THREADS (the parsing of a value
 * that is not a number is still fuzzed).
 *
 * The contract: the exit code is 0 to 3; 2 and 3 print a message on
 * stderr; 0 and 1 print on stdout, and with --out DIR write DIR/report.json,
 * a JSON object.
 *
 * Shared by tests/fuzz/fuzz_verify.c and the replay of its saved inputs
 * (tests/test_fuzz_replay.c). */
#ifndef CIC_FUZZ_VERIFY_RUN_H
#define CIC_FUZZ_VERIFY_RUN_H

#include "fuzz_files.h"
#include "tiny_ckpt.h"

#include "base/mpgemm.h"
#include "cli/run.h"
#include "engine/engine.h"

#include <fcntl.h>
#include <jansson.h>
#include <stdlib.h>

#define VF_MAX_ARGS 48
#define VF_MAX_TOKENS 4
#define VF_MAX_SAMPLES 2
#define VF_MAX_PREC 256
#define VF_MAX_THREADS 2

/* The fixtures' bytes, made once (cic_fuzz_verify_setup). */
static struct {
    const char *name;
    char *data;
    size_t len;
} vf_fix[] = {
    {"orig/config.json", NULL, 0},       {"orig/model.safetensors", NULL, 0},
    {"trans/config.json", NULL, 0},      {"trans/model.safetensors", NULL, 0},
    {"q.safetensors", NULL, 0},
};
#define VF_N_FIX (sizeof vf_fix / sizeof vf_fix[0])

/* The sanitizers' reports go to the real stderr even while a run's is
 * captured (a weak reference: absent without a sanitizer). */
extern void __sanitizer_set_report_fd(void *fd) __attribute__((weak));

static char *vf_slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    char *buf = NULL;
    long n;
    if (f && fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) >= 0 && fseek(f, 0, SEEK_SET) == 0 &&
        (buf = malloc((size_t)n + 1)) && fread(buf, 1, (size_t)n, f) == (size_t)n) {
        buf[n] = '\0';
        *len = (size_t)n;
    } else {
        free(buf);
        buf = NULL;
    }
    if (f)
        fclose(f);
    return buf;
}

/* Make the fixtures (in dir/fix, then kept in memory); 0 or -1. */
static int cic_fuzz_verify_setup(const char *dir)
{
    char fix[1100], path[1300];
    double eye[64];
    cic_st_tensor q;
    cic_diag d;
    size_t i;
    memset(&d, 0, sizeof d);
    if (__sanitizer_set_report_fd) {
        int fd = dup(2);
        if (fd >= 0)
            __sanitizer_set_report_fd((void *)(intptr_t)fd);
    }
    for (i = 0; i < 64; i++)
        eye[i] = i % 9 == 0 ? 1.0 : 0.0;
    memset(&q, 0, sizeof q);
    q.name = "q";
    q.dtype = CIC_DT_F64;
    q.ndim = 2;
    q.shape[0] = q.shape[1] = 8;
    q.data = eye;
    snprintf(fix, sizeof fix, "%.1000s/fix", dir);
    snprintf(path, sizeof path, "%s/orig", fix);
    if (cic_fuzz_tiny_ckpt(path, false, &d) != 0)
        return -1;
    snprintf(path, sizeof path, "%s/trans", fix);
    if (cic_fuzz_tiny_ckpt(path, true, &d) != 0)
        return -1;
    snprintf(path, sizeof path, "%s/q.safetensors", fix);
    if (cic_safetensors_write(path, &q, 1, NULL, &d) != 0)
        return -1;
    for (i = 0; i < VF_N_FIX; i++) {
        snprintf(path, sizeof path, "%s/%s", fix, vf_fix[i].name);
        if (!(vf_fix[i].data = vf_slurp(path, &vf_fix[i].len)))
            return -1;
    }
    ff_rm_rf(fix);
    return 0;
}

/* Whether the arguments keep the run small and inside the folder. */
static bool vf_args_ok(char **argv, int argc)
{
    static const struct {
        const char *opt;
        long max;
    } cap[] = {{"--tokens", VF_MAX_TOKENS},
               {"--samples", VF_MAX_SAMPLES},
               {"--mpfr-prec", VF_MAX_PREC},
               {"--threads", VF_MAX_THREADS}};
    int i;
    size_t k;
    for (i = 0; i < argc; i++) {
        if (argv[i][0] == '/' || strstr(argv[i], ".."))
            return false;
        for (k = 0; i + 1 < argc && k < sizeof cap / sizeof cap[0]; k++) {
            char *end;
            long v;
            if (strcmp(argv[i], cap[k].opt))
                continue;
            v = strtol(argv[i + 1], &end, 10);
            if (end != argv[i + 1] && v > cap[k].max)
                return false;
        }
    }
    return true;
}

/* fd into path until vf_uncapture; the saved fd, or -1. */
static int vf_capture(int fd, const char *path)
{
    int saved, f;
    fflush(fd == 1 ? stdout : stderr);
    saved = dup(fd);
    f = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (saved < 0 || f < 0 || dup2(f, fd) < 0)
        abort();
    close(f);
    return saved;
}

static void vf_uncapture(int fd, int saved)
{
    fflush(fd == 1 ? stdout : stderr);
    if (dup2(saved, fd) < 0)
        abort();
    close(saved);
}

static const char *vf_broken(const char *what, int rc, const char *err)
{
    static char why[1500];
    snprintf(why, sizeof why, "%s (exit %d, stderr '%.1200s')", what, rc, err ? err : "");
    return why;
}

/* The run's outcome against the contract. */
static const char *vf_judge(int rc, const char *w, const char *out_arg)
{
    char path[1300];
    size_t n_out = 0, n_err = 0;
    char *out, *err;
    const char *broke = NULL;
    snprintf(path, sizeof path, "%s/../stdout", w);
    out = vf_slurp(path, &n_out);
    snprintf(path, sizeof path, "%s/../stderr", w);
    err = vf_slurp(path, &n_err);
    if (rc < CIC_OK || rc > CIC_EINTERNAL)
        broke = vf_broken("an exit code outside 0 .. 3", rc, err);
    else if (rc >= CIC_EINPUT && !n_err)
        broke = vf_broken("refused without a message on stderr", rc, err);
    else if (rc <= CIC_EGATE && !n_out)
        broke = vf_broken("exit 0 or 1 with nothing on stdout", rc, err);
    else if (rc <= CIC_EGATE && out_arg && out_arg[0] && !strstr(out ? out : "", "usage:")) {
        json_t *r;
        snprintf(path, sizeof path, "%s/%s/report.json", w, out_arg);
        r = json_load_file(path, 0, NULL);
        if (!json_is_object(r))
            broke = vf_broken("--out given, yet no report.json (a JSON object) written", rc,
                              err);
        json_decref(r);
    }
    free(out);
    free(err);
    return broke;
}

/* Run one input in folder dir (set up by cic_fuzz_verify_setup); NULL when
 * the contract held or the input is not used, else what broke. */
static const char *cic_fuzz_verify(const uint8_t *data, size_t size, const char *dir)
{
    static const char *const pre[] = {"--tokens", "2", "--samples", "1",
                                      "--mpfr-prec", "64", "--threads", "1"};
    enum { NPRE = sizeof pre / sizeof pre[0] };
    char w[1100] = "", path[1300], *args = NULL, *argv[NPRE + VF_MAX_ARGS + 1];
    const char *broke = NULL, *out_arg = NULL;
    ff_input in;
    size_t i;
    int argc = 0, cwd = -1, so, se, rc, k;
    ff_accepted = 0;
    if (ff_parse(&in, data, size) < 0 || memchr(in.pre, '\0', in.pre_len))
        return NULL;
    /* the arguments: the preamble's lines */
    args = malloc(in.pre_len + 1);
    if (!args)
        abort();
    memcpy(args, in.pre, in.pre_len);
    args[in.pre_len] = '\0';
    for (i = 0; i < NPRE; i++)
        argv[argc++] = (char *)pre[i];
    for (char *s = args, *nl; s && *s; s = nl) {
        nl = strchr(s, '\n');
        if (nl)
            *nl++ = '\0';
        if (!*s)
            continue;
        if (argc == NPRE + VF_MAX_ARGS)
            goto done;
        argv[argc++] = strcmp(s, "''") ? s : s + 2;
    }
    argv[argc] = NULL;
    if (!vf_args_ok(argv + NPRE, argc - NPRE))
        goto done;
    for (k = NPRE; k + 1 < argc; k++)
        if (!strcmp(argv[k], "--out"))
            out_arg = argv[k + 1];
    /* the folder: the fixtures, then the input's files */
    snprintf(w, sizeof w, "%.1000s/w", dir);
    if (ff_fresh_dir(w) != 0)
        abort();
    snprintf(path, sizeof path, "%s/orig", w);
    mkdir(path, 0700);
    snprintf(path, sizeof path, "%s/trans", w);
    mkdir(path, 0700);
    for (i = 0; i < VF_N_FIX; i++) {
        snprintf(path, sizeof path, "%s/%s", w, vf_fix[i].name);
        if (ff_write_file(path, vf_fix[i].data, vf_fix[i].len) != 0)
            abort();
    }
    if (ff_write(&in, w) != 0)
        goto done; /* a file and a folder of one name, say: not an input */
    cwd = open(".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (cwd < 0 || chdir(w) != 0)
        abort();
    snprintf(path, sizeof path, "%.1000s/stdout", dir);
    so = vf_capture(1, path);
    snprintf(path, sizeof path, "%.1000s/stderr", dir);
    se = vf_capture(2, path);
    rc = cic_cmd_verify(argc, argv); /* one thread: the preamble's --threads 1 */
    vf_uncapture(2, se);
    vf_uncapture(1, so);
    if (fchdir(cwd) != 0)
        abort();
    close(cwd);
    broke = vf_judge(rc, w, out_arg);
    ff_accepted = rc <= CIC_EGATE;
done:
    free(args);
    if (w[0])
        ff_rm_rf(w);
    snprintf(path, sizeof path, "%.1000s/stdout", dir);
    unlink(path);
    snprintf(path, sizeof path, "%.1000s/stderr", dir);
    unlink(path);
    return broke;
}

#endif
