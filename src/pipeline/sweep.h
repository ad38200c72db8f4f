/* SPDX-License-Identifier: MIT */
/* sweep.h: many runs of one case file as a library (docs/design.md
 * section 18): a sweep over the points of its [sweep] table (sweep.c,
 * sweep_run.c), all of them or shard K of N; a single case split by
 * samples (shard.c); the merge of either kind of shard folder (merge.c,
 * shard_merge.c); the SHA-256 record of the files a shard read
 * (files_read.c), on which the merge refuses shards that read different
 * bytes.
 *
 * Nothing here prints: the command line (src/cli) and the public API
 * (src/api) call these in steps and say what each step did. Every step
 * returns a status (CIC_OK, CIC_EGATE, CIC_EINPUT, CIC_EINTERNAL) and
 * leaves the reason in a cic_diag. */
#ifndef CIC_PIPELINE_SWEEP_H
#define CIC_PIPELINE_SWEEP_H

#include "pipeline.h"

#include "../model/checkpoint.h"

#include <stdbool.h>

struct json_t;

/* "K/N" (1 <= K <= N <= 10^6) into *k, *n; NULL is 1/1. False otherwise. */
bool cic_shard_parse(const char *s, long *k, long *n);

/* report.json of a finished run into out_dir (out_root: the part of it the
 * user named, links followed there; the folders below it are made as
 * cicheck's own) and, when dump_dir is not NULL, the dump (below
 * dump_root likewise; the run needs keep_models). out_dir NULL: no
 * report.json. Each file written is said through pr->stage ("wrote
 * PATH"). 0, or -1 with d set. */
int cic_pipeline_write(const cic_pipeline *pl, const char *out_root, const char *out_dir,
                       const char *dump_root, const char *dump_dir, const cic_progress *pr,
                       cic_diag *d);

/* ---- the files a shard reads (files_read.c) ---- */

/* The files a run of a case reads, each with the SHA-256 of what it reads
 * of it and its identity then: the q files, the [input] file, a
 * checkpoint's files (cic_ckpt_hash_read). */
typedef struct {
    cic_file_hash *h;
    int n;
} cic_files_read;

/* Hash what a run of c reads (before the run); CIC_OK, or CIC_EINPUT /
 * CIC_EINTERNAL with d set. Free with cic_files_read_free. */
int cic_files_read_hash(cic_files_read *fr, const cic_case *c, cic_diag *d);
void cic_files_read_free(cic_files_read *fr);
/* After the run: every file still the one hashed; CIC_OK, or CIC_EINTERNAL
 * with d naming the file that changed. */
int cic_files_read_unchanged(const cic_files_read *fr, cic_diag *d);
/* As JSON (the "files_read" of case-shard.json and a sweep shard's
 * sweep.json): [{file, path, sha256_whole_file or
 * sha256_header_and_tensors_read}, ...]. */
struct json_t *cic_files_read_json(const cic_files_read *fr);
/* The files_read of a shard (path pb) against the first shard's (pfirst):
 * the same files, each with the same hash (NULL: none read). CIC_OK, or
 * CIC_EINPUT with d naming the file and both shards. */
int cic_files_read_compare(const struct json_t *first, const char *pfirst,
                           const struct json_t *b, const char *pb, cic_diag *d);

/* ---- sweeps (sweep.c: sweep.json; sweep_run.c: the points) ---- */

typedef struct {
    const char *out_dir;   /* the sweep's folder: sweep.json, points/<i>/, plots/ */
    const char *out_root;  /* the part of out_dir the user named; NULL: out_dir */
    const char *dump_dir;  /* each point's dump into dump_dir/points/<i>; NULL: none */
    const char *dump_root; /* the part of dump_dir the user named; NULL: dump_dir */
    long shard_k, shard_n; /* run the points i with i mod N = K - 1; 0, 0: all */
    bool no_plots;         /* cic_sweep_check_outputs: plots/ is not written */
    bool recheck;          /* each point: recheck the truth of sample 0 */
    double max_memory;     /* bytes per point; 0: half of the machine's RAM */
    int threads;           /* MPFR engine threads; 0: as set before */
    cic_progress progress; /* warn: a point's warnings; nothing else is said */
} cic_sweep_opts;

/* A sweep being run or merged: its sweep.json as it grows, and the worst
 * exit code so far. */
typedef struct cic_sweep_job cic_sweep_job;

/* What one point of a sweep gave. */
typedef struct {
    long index;          /* its index among all the sweep's points */
    bool made;           /* false: the point is not a valid case (d says why;
                          * it counts as exit 2 and is not in sweep.json) */
    int exit_code;       /* 0 .. 3, as a run of the point's case gives */
    double wall_seconds; /* of its run (0 when it did not finish) */
    char params[1024];   /* {"axis": value, ...} as compact JSON */
} cic_sweep_point_result;

/* Before any point of sweep c runs: can it write all it writes (the
 * points' folders of its shard, their dumps, plots/ unless no_plots)?
 * CIC_OK, or CIC_EINPUT with d naming the path. */
int cic_sweep_check_outputs(const cic_case *c, const cic_sweep_opts *o, cic_diag *d);

/* Start sweep c (which must outlive the job), the shard o->shard_k of
 * o->shard_n or all points: its header from the case file's bytes, and for
 * a shard the SHA-256 of every file its points read. CIC_OK with *out set;
 * else the error in d and *out NULL. */
int cic_sweep_begin(cic_sweep_job **out, const cic_case *c, const cic_sweep_opts *o,
                    cic_diag *d);
/* The sweep's points (all, not only this shard's). */
long cic_sweep_total(const cic_sweep_job *j);
/* Does point i belong to the job's shard (always, unsharded)? */
bool cic_sweep_owns(const cic_sweep_job *j, long i);
/* Run point i (one the job owns) as a case of its own, without a baseline,
 * writing points/<i>/report.json (and its dump); the point and its report
 * join sweep.json. Returns its exit code; a point that could not run
 * (2 or 3) leaves the reason in d (d->msg "" when there is none to say). */
int cic_sweep_point_run(cic_sweep_job *j, long i, cic_sweep_point_result *r, cic_diag *d);
/* After the points: for a shard, every file hashed is still the one the
 * points read (else CIC_EINTERNAL with d: no sweep.json is written); the
 * aggregate over seeds and the overall pass. */
int cic_sweep_finish(cic_sweep_job *j, cic_diag *d);
/* Write sweep.json (atomically) into the job's folder; its path into path
 * (cap bytes). CIC_OK, or CIC_EINTERNAL with d set. */
int cic_sweep_write(cic_sweep_job *j, char *path, size_t cap, cic_diag *d);
/* The plots of a written sweep.json into the job's folder/plots.
 * CIC_OK with *n_plots drawn, or *n_plots -1 and d saying why none could be
 * drawn from the data (or gnuplot is missing: a warning); CIC_EINTERNAL
 * with d when they were lost (a write or gnuplot failed). */
int cic_sweep_plot(cic_sweep_job *j, int *n_plots, cic_diag *d);
/* The worst exit code so far: of the points, and 3 after a failed write. */
int cic_sweep_worst(const cic_sweep_job *j);
/* Points run (or merged), and how many passed. */
long cic_sweep_ran(const cic_sweep_job *j);
long cic_sweep_passed(const cic_sweep_job *j);
/* sweep.json as it stands (owned by the job): after cic_sweep_finish (or a
 * merge) it holds points [{index, params, exit_code, pass, report}],
 * aggregate and pass. */
const struct json_t *cic_sweep_json(const cic_sweep_job *j);
void cic_sweep_destroy(cic_sweep_job *j);

/* The whole sweep of a case in one call, silent: begin, every point of
 * the shard, finish, sweep.json and (unless no_plots) the plots; a plot
 * that cannot be drawn is not an error. Returns the worst exit code; for
 * 2 and 3 that are not a point's, d says why. */
int cic_sweep_run_all(const cic_case *c, const cic_sweep_opts *o, bool no_plots,
                      cic_diag *d);

/* ---- the merge of sweep shards (merge.c) ---- */

/* Refuse an out_dir that is one of the shard folders (told apart by what
 * they are: s1, ./s1 and a link to s1 are one). CIC_OK or CIC_EINPUT. */
int cic_merge_check_out(const char *const *dirs, int n, const char *out_dir, cic_diag *d);

/* Load and check the sweep.json of n shard folders, for writing into
 * out_dir: refuses (CIC_EINPUT, d naming the shard's sweep.json) shards of
 * different case files, cicheck versions or shard counts, duplicates and
 * gaps, shards that read different bytes, and any shard whose content is
 * not what its embedded case gives; an out_dir that is a shard.
 * CIC_EINTERNAL: memory. On CIC_OK *out holds the merged sweep.json (every
 * point in index order, the aggregate recomputed, shard null), ready for
 * cic_sweep_write and cic_sweep_plot; cic_sweep_worst is the worst exit
 * code of its points. */
int cic_sweep_merge_load(cic_sweep_job **out, const char *const *dirs, int n,
                         const char *out_dir, cic_diag *d);
/* The exit code of point index i of a merged sweep (0 <= i < total). */
int cic_sweep_point_exit(const cic_sweep_job *j, long i);
/* The merge in one call, silent: load, write sweep.json and (unless
 * no_plots) the plots. Returns the worst exit code of the points, or 2 / 3
 * with d set when refused or a write failed. */
int cic_sweep_merge(const char *const *dirs, int n, const char *out_dir, bool no_plots,
                    cic_diag *d);

/* ---- a case split by samples (shard.c, shard_merge.c) ---- */

/* Shard k of n of case c, run (cic_case_shard_run) into out_dir. */
typedef struct {
    const cic_case *c;   /* the whole case */
    cic_case *sc;        /* the shard's: its samples and sample0 (owned) */
    long k, n;
    cic_files_read fr;   /* what its run reads, hashed before it */
    double t0;           /* when it began (seconds, monotonic) */
} cic_case_shard;

/* Plan shard k of n of c (c must outlive it): its samples, and the hash
 * of every file it reads. CIC_OK; CIC_EINPUT with d when the case cannot
 * be split so (more shards than samples, low-precision engines, a
 * checkpoint, an [input] file, a static-fold whose calibration sample is
 * in another shard); CIC_EINTERNAL. Clear with cic_case_shard_clear, also
 * on failure. */
int cic_case_shard_plan(cic_case_shard *s, const cic_case *c, long k, long n, cic_diag *d);
/* Run the planned shard (no baseline: the merge compares the whole case)
 * and write out_dir/case-shard.bin and case-shard.json. CIC_OK once they
 * are written (verdicts and gates are the merge's), else the error in d
 * (CIC_EINPUT: the case cannot run; CIC_EINTERNAL: memory, I/O, a file read
 * that changed during the run). */
int cic_case_shard_run(cic_case_shard *s, const char *out_dir, double max_memory, int threads,
                       cic_diag *d);
void cic_case_shard_clear(cic_case_shard *s);

/* Does dir hold a case shard (case-shard.json)? */
bool cic_is_case_shard(const char *dir);

/* The case merged from its shards, scored by the pipeline. */
typedef struct {
    cic_case *kase;      /* the whole case, from the first shard's file (owned) */
    cic_pipeline *pl;    /* its report (owned); kase outlives it */
    long count;          /* shards merged */
    double wall_seconds; /* their wall times added */
} cic_case_merged;

/* Merge the case shards in dirs for writing into out_dir: refuses
 * (CIC_EINPUT, naming the file) shards of another case file or cicheck
 * version, a shard given twice or missing, any whose numbers are not what
 * its header says, shards that read different bytes, an out_dir that is a
 * shard; else scores the whole case from their numbers
 * (cic_pipeline_replay: o's baseline, tolerance and no_baseline; the
 * environment recorded is that of the shard holding sample 0). Returns as
 * cic_pipeline_run; on CIC_OK and CIC_EGATE m->pl holds the report, which
 * nothing has written yet. Clear m with cic_case_merged_clear, also on
 * failure. */
int cic_case_merge_load(cic_case_merged *m, const char *const *dirs, int n,
                        const char *out_dir, const cic_pipeline_opts *o, cic_diag *d);
void cic_case_merged_clear(cic_case_merged *m);

#endif
