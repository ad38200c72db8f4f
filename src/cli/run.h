/* SPDX-License-Identifier: MIT */
/* run.h: `cicheck run`: load a case, build and transform the models, run the
 * engines, score, judge, and write the table, report.json and dumps. */
#ifndef CIC_RUN_H
#define CIC_RUN_H

#include "../case/case.h"
#include "../report/baseline.h"
#include "../report/report.h"

#include <stdbool.h>

/* --out, --dump, --baseline and merge --out: at most this many bytes, so
 * every folder and file below them fits the fixed path buffers. */
#define CIC_RUN_PATH_MAX 900

typedef struct {
    const char *out_dir;  /* NULL: reports/<case name> */
    const char *dump_dir; /* NULL: no dump */
    /* The part of out_dir (dump_dir) the user named: a link there is
     * followed; the folders below it (a case's in a run of several, a
     * sweep's points/N) are cicheck's own, never written through a link.
     * NULL: out_dir (dump_dir) itself, or reports/ for the default. */
    const char *out_root, *dump_root;
    bool quiet;           /* no progress lines on stderr */
    int color;            /* -1 auto (TTY), 0 off, 1 on */
    bool quiet_tables;    /* no analytical FLOP table after the results */
    const char *baseline_dir; /* NULL: reference/ (compared when the file exists) */
    bool no_baseline;     /* skip the baseline comparison */
    bool recheck;         /* also recompute the truth of sample 0 at prec + 64 */
    cic_tolerance tol;    /* for the f32 metrics against the baseline */
    bool compact;         /* one summary line instead of the tables (sweep points) */
    const char *shard;    /* "K/N": run the K-th of N slices of a sweep */
    bool no_plots;        /* no plots after a sweep */
    double max_memory;    /* bytes; 0: half of the machine's RAM */
    bool no_report;       /* write no report.json (results stay in memory) */
    int threads;          /* MPFR engine threads; 0: one per core */
} cic_run_args;

/* ---- the case files of a run (caselist.c) ---- */

typedef struct {
    char **v;
    int n, cap;
} cic_strlist;

/* Append a copy of s; 0, or -1 out of memory. */
int cic_strlist_push(cic_strlist *l, const char *s);
void cic_strlist_free(cic_strlist *l);
/* Add a case file, or every *.toml below a folder (its files first, then
 * its subfolders', each sorted). 0, or -1 out of memory. */
int cic_case_list_add(cic_strlist *l, const char *path);

/* Bytes of a case's folder in a run of several (CIC_RUN_PATH_MAX, '/', a
 * file stem). */
#define CIC_CASE_DIR_MAX 1200
/* The arguments of case i of the list: a's, and with several cases --out
 * DIR/<file stem> and --dump DIR/<file stem> (in out and dump, of
 * CIC_CASE_DIR_MAX bytes), below the user's DIR. */
void cic_case_args(cic_run_args *one, const cic_run_args *a, const cic_strlist *cases, int i,
                   char *out, char *dump);
/* Before any case runs: every case's outputs (cic_run_check_outputs; for
 * bless its baseline file too), and no two cases writing the same files
 * (one file stem under --out or --dump, one case name without --out or when
 * blessed, a file given twice): the refusal on stderr, naming both files.
 * CIC_OK, CIC_EINPUT, or CIC_EINTERNAL out of memory. A case that does not
 * load is left to its run, which says why. */
int cic_case_list_check(const cic_strlist *cases, const cic_run_args *a, bool bless);

/* What one case run leaves for the summaries (JUnit, Markdown, bless). */
typedef struct {
    cic_case kase;
    cic_report rep;       /* rep.kase points at kase; its arrays are owned */
    char error[1200];     /* the message when the case could not run */
    int exit_code;
} cic_case_run;

void cic_case_run_free(cic_case_run *cr);

/* Before any work: can a run of case c with a write all it writes (its
 * folder, report.json or sweep.json, a sweep's points/N and plots/, the
 * dump's folders; see cic_out_check)? CIC_OK, or CIC_EINPUT with d naming
 * the path. */
int cic_run_check_outputs(const cic_case *c, const cic_run_args *a, cic_diag *d);

/* Run one case file; returns the exit code (0 pass, 1 a gate, expectation
 * or regression failed, 2 bad input, 3 resource failure). When out is not
 * NULL it receives the run (free with cic_case_run_free), also on failure. */
int cic_run_case(const char *path, const cic_run_args *a, cic_case_run **out);

/* ---- sweeps (sweep.c) ---- */

/* Run the points of a sweep case c (all, or the shard a->shard) through
 * the pipeline library (src/pipeline/sweep.h), saying each point as it
 * ends, writing <out>/points/<i>/report.json and <out>/sweep.json, then
 * the plots. out_dir is the sweep's folder (a->out_root: the part of it
 * the user named). Returns the exit code (worst over the points). */
int cic_run_sweep(const cic_case *c, const cic_run_args *a, const char *out_dir);

/* The check of cic_run_check_outputs for a sweep c writing into dir (root:
 * the part of it the user named): its points' folders (of the shard
 * a->shard), plots/ and the dump's points. CIC_OK or CIC_EINPUT. */
int cic_run_sweep_check(const cic_case *c, const cic_run_args *a, const char *root,
                        const char *dir, cic_diag *d);

/* `cicheck merge` of sweep shards: merge their sweep.json into out_dir
 * (cic_sweep_merge_load), say each point that could not run in its shard,
 * write sweep.json and the plots. Returns the exit code: the worst of the
 * points', or 2 when refused (the reason on stderr). */
int cic_merge_sweeps(const char *const *dirs, int n, const char *out_dir, bool no_plots);

/* ---- a case split by samples (case_shard.c) ---- */

/* `cicheck run --shard K/N` on case c without a [sweep] table: run its
 * K-th slice of samples and write case-shard.json and case-shard.bin into
 * a->out_dir (default reports/<case name>). The exit code: 0 when they
 * are written (verdicts, gates and the baseline are the merge's), 2 when
 * the case cannot be split so (d says why), 3 on memory or I/O. */
int cic_run_case_shard(const cic_case *c, const cic_run_args *a, cic_diag *d);

/* ---- merging a case's shards (case_shard.c) ---- */

typedef struct {
    const char *out_dir;
    bool no_plots;
    const char *baseline_dir; /* NULL: reference/ */
    bool no_baseline;
    cic_tolerance tol;
    int color;                /* -1 auto, 0 off, 1 on */
} cic_merge_args;

/* `cicheck merge` of the shards of one case: refuses (exit 2, naming the
 * file) shards of another case file or cicheck version, a shard given twice
 * or missing, and any whose numbers are not what its header says; else
 * scores the whole case from them, prints its table like a run and writes
 * out_dir/report.json. *out receives the run for the summaries (free with
 * cic_case_run_free). Returns the exit code a run of the case gives. */
int cic_case_merge(const char *const *dirs, int n, const cic_merge_args *ma, cic_case_run **out);

/* What a run prints on stdout after its pipeline: the table, failures,
 * the analytical FLOPs and conclusion (print.c). */
void cic_run_print(const cic_run_args *a, const cic_report *rep, const cic_case *c);

/* `cicheck verify ORIGINAL TRANSFORMED [options]` (src/cli/verify.c); the
 * exit code. */
int cic_cmd_verify(int argc, char **argv);
extern const char CIC_VERIFY_USAGE[];

/* Seconds on the monotonic clock (print.c). */
double cic_cli_now(void);

#endif
