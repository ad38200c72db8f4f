/* SPDX-License-Identifier: MIT */
/* report.h: what a run found, and the three ways it leaves the program: the
 * terminal table, report.json (DESIGN.md section 7; written atomically), and
 * the --dump folder of safetensors files.
 *
 * The pipeline fills a cic_report (its figures, verdicts and the analytical
 * FLOP table of a dit case); this module only formats and writes it. */
#ifndef CIC_REPORT_H
#define CIC_REPORT_H

#include "../kind/kind.h"
#include "../metric/flops.h"
#include "../metric/metric.h"
#include "../metric/outlier.h"

#include <stdbool.h>
#include <stdio.h>

#define CIC_MAX_SITES 12

typedef struct {
    char name[16];       /* "norm1", "gate1", "norm2", "gate2", "final", ... */
    double analytical;   /* extra FLOPs at this site, whole case */
    double counted;
} cic_flop_site;

typedef struct {
    double baseline;      /* FLOPs of the untransformed graph, whole case */
    double transformed;   /* FLOPs of the transformed graph */
    double extra_total;   /* transformed - baseline (may be negative) */
    double extra_per_token;
    double extra_per_sample;
    double extra_pct;     /* 100 * extra_total / baseline */
    double analytical_baseline;    /* closed-form formulas */
    double analytical_transformed;
    bool counted_matches_analytical;
    cic_flop_site sites[CIC_MAX_SITES];
    int n_sites;
} cic_flops;

typedef struct {
    int sample;
    double ce_residual;
    enum cic_verdict verdict;
} cic_sample_ce;

/* One entry of a row's per_block (DESIGN.md section 13, "Per block"):
 * block b's output (the residual stream after it; b = L, the layers, for
 * a head readout's output) against the truth of that tensor. */
typedef struct {
    int block;
    char tensor[96];     /* the original model's name of the tensor */
    bool readout;        /* the tensor the case reads out: the row's figures */
    bool head;           /* the head readout after the last block (block L) */
    bool has;            /* figures given; else why says why not */
    char why[160];
    cic_block_metrics m;
} cic_block_entry;

/* One row of the results: a (transform, engine) pair. transform "none" is the
 * untransformed model (the "before" figures); engine is "f32-openblas",
 * "f32-fixed-order" or "mpfr" (the exactness row). */
typedef struct {
    char transform[CIC_NAME_MAX];
    char engine[32];
    bool has_verdict;          /* false for transform "none" */
    enum cic_verdict expect;
    enum cic_verdict verdict;
    double ce_residual;
    double ce_threshold_equivalent; /* below: equivalent */
    double ce_threshold_broken;     /* above: broken */
    bool has_metrics;          /* false for the mpfr row */
    char mpfr_sha256[65];      /* mpfr rows: hash of the transformed model's MPFR output */
    cic_metrics metrics;
    cic_flops flops;
    cic_sample_ce per_sample[CIC_MAX_SAMPLES]; /* case.h: the loader's limit on B */
    int n_samples;
    bool pass;                 /* expectation and every gate on this row */
    bool has_q_orth;           /* mpfr rows of a q = "file:..." transform: */
    double q_orth_error;       /* max |Q^T Q - I| of the file's matrix */
    bool lowp;                 /* a low-precision engine's row ([[engines.lowp]]) */
    double sqnr_db;            /* lowp: 20 log10(||truth|| / ||truth - y||) */
    cic_block_entry *per_block; /* rows with metrics: one per block (owned,
                                 * cic_results_free); NULL: not computed */
    int n_per_block;
} cic_result;

/* Free n rows of results and what they own (NULL-safe). */
void cic_results_free(cic_result *res, int n);

/* Outlier statistics (metric/outlier.h) of one quantized linear's input
 * (from the f32 engine) or weight, in one model (transform "none": the
 * original). Cases with [[engines.lowp]] only. */
typedef struct {
    char transform[CIC_NAME_MAX];
    char tensor[96];     /* the linear's weight */
    bool weight;         /* of the weight [out, in], else of the input [rows, in] */
    cic_outlier o;
    float *chan_max;     /* n_chan values: max |x| per input channel (owned) */
    int n_chan;
} cic_outlier_row;

/* A low-precision engine's error at one linear's output, against the
 * verdict engine's run of the same model with unrounded weights. */
typedef struct {
    char transform[CIC_NAME_MAX];
    char engine[32];
    char tensor[96];     /* the linear's weight */
    double rel_norm2;    /* ||y - ref|| / ||ref||; +Inf when nonfinite */
    double sqnr_db;      /* -20 log10(rel_norm2): +Inf exact, -Inf when nonfinite */
    long nonfinite;      /* NaN or Inf outputs (of y or of the reference) */
} cic_linear_err;

typedef struct {
    cic_outlier_row *outliers;
    int n_outliers, cap_outliers;
    cic_linear_err *lin;
    int n_lin, cap_lin;
} cic_lowp_report;

/* Free what l owns (NULL-safe) and zero it. */
void cic_lowp_report_free(cic_lowp_report *l);

typedef struct {
    char transform[CIC_NAME_MAX];
    char engine[32];
    char metric[32];
    double limit;
    double value;
    bool pass;
    int line; /* line of the gate in the case file */
} cic_gate_result;

typedef struct {
    char mpfr[32], gmp[32], openblas[128], openblas_core[64], compiler[128];
    int openblas_threads;
    char openblas_timeout[16]; /* OPENBLAS_THREAD_TIMEOUT as run (base/blasenv.h) */
    char hostname[128];
} cic_env;

/* One regression rule checked against a baseline (reference/<case>.json). */
enum cic_regress_rule {
    CIC_RULE_WEIGHTS,    /* weights_sha256 equal */
    CIC_RULE_TRUTH,      /* truth_sha256 equal: every MPFR truth value, bit for bit */
    CIC_RULE_MPFR,       /* a transform's MPFR output hash equal */
    CIC_RULE_VERDICT,    /* verdict unchanged */
    CIC_RULE_FLOPS,      /* counted FLOPs equal */
    CIC_RULE_METRIC,     /* an f32 error metric within tolerance of the baseline */
    CIC_RULE_MISSING,    /* a row of the baseline is missing from the run (or new) */
    CIC_RULE_COUNT
};
extern const char *const CIC_RULE_NAME[];

typedef struct {
    enum cic_regress_rule rule;
    char transform[CIC_NAME_MAX]; /* "" for case-wide rules */
    char engine[32];
    char metric[32];
    char old_value[80];  /* as text: hashes, verdicts and numbers alike */
    char new_value[80];
    char limit[80];      /* what the new value may be at most ("" for equality) */
    bool pass;
} cic_regress_result;

/* The proof of the truth: every value's ball (midpoint, rigorous radius)
 * must round to one binary32; values that straddle a rounding boundary
 * are recomputed, per sample, at twice the precision (Ziv's strategy). */
#define CIC_PROOF_MAX_PRECS 5
typedef struct {
    bool proven;            /* every value proven */
    size_t values;          /* truth values */
    size_t first;           /* proven at the case's precision */
    size_t escalated;       /* proven at a higher precision */
    double max_rel_radius;  /* largest radius / |value| of the values kept */
    long precs[CIC_PROOF_MAX_PRECS]; /* precisions used, the case's first */
    int n_precs;
    char why[160];          /* no bound could be made: why ("" otherwise) */
    bool rechecked;         /* --recheck ran */
} cic_truth_proof;

typedef struct {
    const cic_case *kase;
    cic_env env;
    cic_result *results;
    int n_results;
    cic_gate_result *gates;
    int n_gates;
    bool truth_certified;      /* the truth holds: proven (and, with
                                * --recheck, the prec+64 recomputation agreed) */
    double truth_cert_diff;    /* --recheck: max relative difference seen
                                * there; NaN without --recheck */
    cic_truth_proof proof;     /* the truth's proof (mp_ball.h) */
    char weights_sha256[65];   /* of the original weights, see model.h */
    double wall_seconds;
    bool pass;
    char truth_sha256[65];     /* of every truth value at the case precision */
    /* baseline comparison (has_baseline false: none was found or asked) */
    bool has_baseline;
    char baseline_path[1024];
    cic_regress_result *regress;
    int n_regress;
    int exit_code;             /* 0, 1, 2 or 3 as the CLI returns it */
    /* dit cases: the analytical extra-FLOP table of the adaLN strategies
     * (cic_dit_flops_table_fill, by the pipeline); false: none (no
     * "flops_analytical" in report.json, no formula lines in the conclusion) */
    bool has_dit_flops;
    cic_dit_flops_table dit_flops;
    cic_lowp_report lowp;      /* empty without [[engines.lowp]] */
} cic_report;

/* The value of a metric on a result row by the names gates and report.json
 * use ("rel_norm2", "ulp_row.p99", "drift.max", "ce_residual", ...); false
 * when the row does not have it. */
bool cic_result_metric(const cic_result *x, const char *metric, double *v);

/* Fill env from the libraries linked in (mpfr_get_version, gmp_version,
 * openblas_get_config, openblas_get_corename, openblas_get_num_threads) and
 * the compiler macros. */
void cic_report_env_fill(cic_env *env);

/* env as report.json's "environment" object (NULL: out of memory), and
 * back: false when o is not such an object (a member missing, of another
 * type, or longer than its field). */
struct json_t;
struct json_t *cic_report_env_json(const cic_env *env);
bool cic_report_env_parse(const struct json_t *o, cic_env *env);

/* The terminal table, one line per result: transform, engine, verdict,
 * ce_residual, max_abs, rel_norm2, ulp_row max and p99, drift max and p99,
 * gate PASS/FAIL; then failed gates with transform, engine, metric, value,
 * limit. color: ANSI colours (callers pass isatty(fileno(f))). */
void cic_report_table(FILE *f, const cic_report *r, bool color);

/* The low-precision headline of a case with [[engines.lowp]] (nothing
 * otherwise): per engine the block output's SQNR under "none" and each
 * transform, the worst linear output, the kurtosis of the quantized
 * linears' inputs and weights. */
void cic_report_lowp_table(FILE *f, const cic_report *r);

/* The analytical table of a dit case as text: a title line with its sizes
 * ("dit extra FLOPs vs the original block, % (B = 1; d = 64, ...)"), a
 * line of strategy labels, one line per tokens[k] with each strategy's
 * extra FLOPs ("n/a" where it does not apply), then the two crossovers N*.
 * Returns 0, or -1 when f reports an error. */
int cic_report_dit_flops_table(FILE *f, const cic_dit_flops_table *t);

/* report.json into dir (created if missing, with parents, as a folder the
 * user named): written to a temporary file in dir, fsync'ed, then renamed
 * over report.json (cic_write_atomic), so a reader never sees half a report.
 * Returns 0, or -1 with d set. */
int cic_report_json_write(const cic_report *r, const char *dir, cic_diag *d);
/* The report as a JSON object (the content of report.json; NULL when memory
 * runs out). Free with json_decref. */
struct json_t;
struct json_t *cic_report_to_json(const cic_report *r);

/* The same to a file path (the folder must exist; path is cicheck's own:
 * see cic_write_atomic). */
int cic_report_json_write_file(const cic_report *r, const char *path, cic_diag *d);

/* JSON helpers the other writers of JSON files share (verify's reports):
 * a double as a number, NaN and Inf as null (JSON has neither); a string
 * whose bytes that are not UTF-8 become '?' (paths from the command line,
 * messages cut inside a character), so the value is never lost; and root
 * written to path as report.json is (2-space indent, 17 significant
 * digits, a final newline; atomically, cic_write_atomic). The writer
 * returns 0, or -1 with d set; it does not take root's reference. */
struct json_t *cic_json_num(double v);
struct json_t *cic_json_str(const char *s);
int cic_json_write_atomic(struct json_t *root, const char *path, cic_diag *d);

/* ---- CI outputs (junit.c, markdown.c) ---- */

/* JUnit XML for n case reports: one <testsuite> per case, one <testcase>
 * per gate per (transform, engine), per expectation and per baseline rule;
 * failures carry the old value, the new value and the limit. A case that
 * could not run (exit_code 2 or 3, kase NULL) is one failed testcase with
 * its message in errors[i]. path is the user's (--junit FILE): written by
 * cic_write_atomic_user. 0 or -1 with d set. */
int cic_junit_write(const char *path, const cic_report *const *r, const char *const *errors,
                    int n, cic_diag *d);

/* Markdown summary of n case reports: a line per case (PASS/FAIL, rows,
 * gates, regressions, wall time) and a table of every failure. Appended to
 * path when append, else written by cic_write_atomic_user (path is the
 * user's: --markdown FILE, $GITHUB_STEP_SUMMARY). 0 or -1 with d set. */
int cic_markdown_write(const char *path, const cic_report *const *r,
                       const char *const *errors, int n, bool append, cic_diag *d);

/* ---- safetensors (the --dump format) ---- */

/* F32, F64: the values; I8, I32: a low-precision engine's codes and zero
 * points (dump.h). */
typedef enum { CIC_DT_F32, CIC_DT_F64, CIC_DT_I8, CIC_DT_I32, CIC_DT_COUNT } cic_dtype;

typedef struct {
    const char *name;
    cic_dtype dtype;
    int ndim;
    int64_t shape[4];
    const void *data; /* row-major, little-endian host order */
} cic_st_tensor;

/* Write tensors as one safetensors file (8-byte little-endian header length,
 * JSON header with dtype "F32"/"F64"/"I8"/"I32", shape, data_offsets, plus a
 * "__metadata__" object of string pairs, then the data, tensors in the order
 * given). meta is a NULL-terminated list of key, value strings (may be NULL).
 * Atomic like the report (path is cicheck's own: cic_atomic_open). Returns 0,
 * or -1 with d set. */
int cic_safetensors_write(const char *path, const cic_st_tensor *t, int n,
                          const char *const *meta, cic_diag *d);

/* The truth's proof in words: "proven: N values, E at a higher precision;
 * max relative radius R; 64, 128 bits", or "NOT proven: ..." (and
 * --recheck's difference). */
void cic_truth_words(char *buf, size_t cap, const cic_report *r);

/* ---- output files and folders (outfile.c) ----
 *
 * What the user names (--out DIR, --dump DIR, --baseline DIR; --junit FILE,
 * --markdown FILE) is taken as named, links followed. What cicheck makes
 * inside such a folder is its own: a file is replaced through a temporary
 * made beside its name (never through a link, FIFO or device planted
 * there), a folder must be a real one (a link there is refused with its
 * path). A folder where a file goes is refused. */

/* mkdir -p, links followed (a folder the user named); 0 or -1 with d set. */
int cic_mkdir_p(const char *dir, cic_diag *d);
/* dir, which is root or below it ("root/sub/..."): root as cic_mkdir_p,
 * every component after it made here or found as a real folder, a symbolic
 * link refused with its path. 0 or -1 with d set. */
int cic_mkdir_under(const char *root, const char *dir, cic_diag *d);
/* Before any work: can dir (root or below it, NULL: root) be made and
 * written, and file (NULL: none) inside it? root may be new or an existing
 * folder (links followed); every existing component of dir after root must
 * be a real folder (not a link); the folder the first missing one would be
 * made in, or dir, must be writable; an existing dir/file must not be a
 * folder. An empty root is refused. 0, or -1 with d naming the path. */
int cic_out_check(const char *root, const char *dir, const char *file, cic_diag *d);

/* Write len bytes to path atomically: a temporary made beside path (mkstemp,
 * in path's own folder), fsync, then renamed over path, replacing whatever
 * entry is there (a file, a link, a FIFO, a device: never followed); a
 * directory is refused. For the files cicheck makes in its folders. 0 or -1
 * with d set. */
int cic_write_atomic(const char *path, const void *buf, size_t len, cic_diag *d);
/* The same for a file the user named (--junit FILE, --markdown FILE): a
 * symbolic link is followed and its target replaced (the temporary in the
 * target's folder; the link stays a link); a character device or a FIFO
 * (/dev/null, /dev/stdout, a shell's >(...)) is written in place; a
 * directory, a block device or a socket is refused. */
int cic_write_atomic_user(const char *path, const void *buf, size_t len, cic_diag *d);
/* cic_write_atomic of the text write(f, ctx) prints to f (a memory
 * stream); "cannot write <file name>: out of memory" when it cannot be
 * built. 0 or -1 with d set. */
int cic_write_text_atomic(const char *path, void (*write)(FILE *f, const void *ctx),
                          const void *ctx, cic_diag *d);

/* Streaming form of cic_write_atomic, for files too big to build in memory
 * (the --dump tensors): open creates a temporary file beside path; write to
 * a->f; commit flushes, fsyncs and renames it over path; abort (also called
 * by a failed commit) removes it. Every call leaves no temporary behind on
 * failure. cic_atomic_open treats path as cicheck's own, cic_atomic_open_user
 * as the user's (as the two writes above). */
typedef struct {
    FILE *f;
    char path[4096];
    char tmp[4096];
    int in_place; /* writing straight to path (a user's device or FIFO) */
} cic_atomic;

/* Before any work: 0 when cic_atomic_open may write path (anything but a
 * directory: a link, FIFO or device there is replaced), else -1 with d
 * saying why. */
int cic_atomic_check(const char *path, cic_diag *d);
/* The same for cic_atomic_open_user: a regular file, a link to one or a new
 * file, a character device or a FIFO; a directory, a block device or a
 * socket is refused, and so is a new file whose folder is not a folder, or
 * is missing with no writable folder as its nearest existing ancestor
 * (cic_atomic_open_user makes a missing folder, as --out's is made). */
int cic_atomic_check_user(const char *path, cic_diag *d);

int cic_atomic_open(cic_atomic *a, const char *path, cic_diag *d);
int cic_atomic_open_user(cic_atomic *a, const char *path, cic_diag *d);
int cic_atomic_commit(cic_atomic *a, cic_diag *d);
void cic_atomic_abort(cic_atomic *a);

#endif
