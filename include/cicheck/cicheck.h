/* SPDX-License-Identifier: MIT */
/* cicheck.h: the public C API of libcicheck, the library behind the cicheck
 * tool. It loads a case file, runs it (MPFR truth and verdicts, float32
 * engines, gates, optionally a baseline) and hands back the result rows
 * that `cicheck run` prints and writes to report.json.
 *
 * Everything is reached through two opaque handles: a cic_session (one case
 * and its last run; create, load, set options, run, read, destroy) and the
 * result rows it owns (cic_row, valid until the session is destroyed,
 * reloaded or run again). No internal layout is exposed, so new fields and
 * options do not change the ABI.
 *
 * Library defaults differ from the command line on purpose: a session writes
 * nothing (no report.json unless cic_session_set_out_dir), prints nothing
 * (no progress unless cic_session_set_quiet(s, false); the tables of
 * `cicheck run` are never printed) and reads no baseline unless
 * cic_session_set_baseline names a folder.
 *
 * Errors never abort: bad input returns CIC_EXIT_INPUT and
 * cic_session_error gives "file:line:column: message" (a line per error: the
 * loader reports every error of a case file, up to 20). Functions taking a
 * NULL session return an error code, NULL, false or NaN.
 *
 * Threads: each session keeps its own settings (thread counts) and state,
 * so several sessions may run at once in one process, each on its own
 * thread; a session is used from one thread at a time. OpenBLAS's thread
 * pool is shared by the process (its products give the same bits under
 * any load).
 *
 * Link with `pkg-config --cflags --libs cicheck` (add `--static` for
 * libcicheck.a). */
#ifndef CICHECK_CICHECK_H
#define CICHECK_CICHECK_H

#include <stdbool.h>

#if defined(__GNUC__)
#define CIC_API __attribute__((visibility("default")))
#else
#define CIC_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* The version of this header; cic_version() is the library's. */
#define CIC_VERSION_MAJOR 0
#define CIC_VERSION_MINOR 1
#define CIC_VERSION_PATCH 0
#define CIC_VERSION_STRING "0.1.0"

/* The exit codes of `cicheck run`, also the status codes of this API. */
enum cic_exit {
    CIC_EXIT_PASS = 0,    /* every expectation, gate and baseline check holds */
    CIC_EXIT_FAIL = 1,    /* a gate, an expectation or a baseline check failed */
    CIC_EXIT_INPUT = 2,   /* bad input or usage */
    CIC_EXIT_RESOURCE = 3 /* out of memory or an I/O failure */
};

typedef struct cic_session cic_session; /* a case and its last run */
typedef struct cic_row cic_row;         /* one (transform, engine) result */

/* "0.1.0": the version of the library linked in. */
CIC_API const char *cic_version(void);

/* ---- lifecycle ---- */

/* A new session with no case loaded; NULL when memory runs out. */
CIC_API cic_session *cic_session_create(void);
/* Frees the session, its case and its results (NULL: no-op). */
CIC_API void cic_session_destroy(cic_session *s);

/* Load and validate a case file (every key, sizes, transforms against the
 * block, Hadamard orders). Drops the loaded case and earlier results
 * first, so after a failure no case is loaded. CIC_EXIT_PASS, CIC_EXIT_INPUT (message in cic_session_error,
 * "file:line:column: message"; also for a missing or unreadable file), or
 * CIC_EXIT_RESOURCE. */
CIC_API int cic_session_load(cic_session *s, const char *path);
/* The same from TOML text; name stands for the file name in messages and
 * gives the case's default name (its stem, as for a file). */
CIC_API int cic_session_load_string(cic_session *s, const char *text, const char *name);

/* The message of the last failure ("" when the last call succeeded). Valid
 * until the next call on s. */
CIC_API const char *cic_session_error(const cic_session *s);
/* The loaded case's name, or NULL when none is loaded. */
CIC_API const char *cic_session_case_name(const cic_session *s);

/* ---- options (kept across loads; take effect at the next run) ---- */

/* Write report.json into dir (created with its parents); NULL (the
 * default): write nothing. The string is copied. CIC_EXIT_PASS, or
 * CIC_EXIT_INPUT for an empty or too long path. */
CIC_API int cic_session_set_out_dir(cic_session *s, const char *dir);
/* true (the default): no progress on stderr; false: one line per stage, as
 * `cicheck run` prints. */
CIC_API int cic_session_set_quiet(cic_session *s, bool quiet);
/* Threads of the MPFR engine, 1 .. 256, or 0 (the default) for one per
 * online core. The results are the same bits for any count. */
CIC_API int cic_session_set_threads(cic_session *s, int n);
/* Compare the run with the baseline dir/<case name>.json (as `cicheck run
 * --baseline dir`); NULL (the default): no baseline comparison. */
CIC_API int cic_session_set_baseline(cic_session *s, const char *dir);

/* ---- running and reading ---- */

/* Run the loaded case: build the model from its seed, compute the MPFR
 * truth, run every transform (verdict) and float32 engine (errors), judge
 * expectations and gates, compare with the baseline if one is set. Returns
 * the exit code `cicheck run` would return. Replaces earlier results. A
 * case with a [sweep] table is refused (CIC_EXIT_INPUT): run it with
 * cic_session_run_sweep. */
CIC_API int cic_session_run(cic_session *s);
/* The exit code of the last run (CIC_EXIT_INPUT when nothing ran). */
CIC_API int cic_session_exit_code(const cic_session *s);
/* Whether the last run passed (exit code CIC_EXIT_PASS). */
CIC_API bool cic_session_pass(const cic_session *s);
/* Rows of the last run (0 when nothing ran or the run failed to finish). */
CIC_API int cic_session_result_count(const cic_session *s);
/* Row i, 0 <= i < cic_session_result_count(s), in the order of the table of
 * `cicheck run`; NULL out of range. Owned by s. */
CIC_API const cic_row *cic_session_result(const cic_session *s, int i);

/* The transform's name ("none": the untransformed model). */
CIC_API const char *cic_row_transform(const cic_row *r);
/* "f32-openblas", "f32-fixed-order", or the verdict engine ("mpfr", "f64",
 * "f64-openblas"), whose rows carry the verdict alone. */
CIC_API const char *cic_row_engine(const cic_row *r);
/* "equivalent" or "broken"; NULL when the row has no verdict (transform
 * "none"). */
CIC_API const char *cic_row_expect(const cic_row *r);
/* "equivalent", "broken" or "inconclusive"; NULL as for cic_row_expect. */
CIC_API const char *cic_row_verdict(const cic_row *r);
/* ||y_T - y_0||_2 / ||y_0||_2 of the verdict; NaN when the row has none. */
CIC_API double cic_row_ce_residual(const cic_row *r);
/* A figure by the name gates use: "max_abs", "rel_norm2",
 * "ulp_row.{max,p99,mean}", "ulp_elem.{max,p99,mean}",
 * "drift.{max,p99,mean}", "nonfinite", "ce_residual". CIC_EXIT_PASS with
 * *value set, or CIC_EXIT_INPUT when the row does not have it (float32
 * figures are on f32 rows, drift on transformed rows) or the name is
 * unknown. */
CIC_API int cic_row_metric(const cic_row *r, const char *metric, double *value);
/* The row's expectation and every gate on it hold. */
CIC_API bool cic_row_pass(const cic_row *r);

/* ---- sweeps, shards and merge ----
 *
 * What `cicheck run` does with a [sweep] table or --shard K/N, and what
 * `cicheck merge` does, with the same files written (sweep.json,
 * points/<i>/report.json, case-shard.json and case-shard.bin,
 * report.json), the same checks and the same exit codes; no plots are
 * drawn (`cicheck plot DIR` draws them from sweep.json). Each needs an
 * output folder (cic_session_set_out_dir). Each replaces earlier results;
 * cic_session_exit_code and cic_session_pass tell how it went, and
 * cic_session_output names the file it wrote. */

/* Run the sweep of the loaded case (it must have a [sweep] table): every
 * point, or with shard_n > 0 the points i with i mod shard_n = shard_k - 1
 * (1 <= shard_k <= shard_n <= 1000000), as `cicheck run --shard K/N`
 * would. Each point runs without a baseline and writes
 * points/<i>/report.json; then sweep.json. Returns the worst exit code of
 * the points (CIC_EXIT_INPUT also for bad arguments or no output folder;
 * CIC_EXIT_RESOURCE for a lost result). The points are read with
 * cic_session_point_*. */
CIC_API int cic_session_run_sweep(cic_session *s, int shard_k, int shard_n);
/* Run shard k of n (1 <= k <= n <= the case's samples) of the loaded case,
 * which has no [sweep] table, split by samples as `cicheck run --shard
 * K/N` does: writes case-shard.json and case-shard.bin into the output
 * folder. CIC_EXIT_PASS once they are written (verdicts and gates are the
 * merge's), CIC_EXIT_INPUT when the case cannot be split so (the message
 * says why), CIC_EXIT_RESOURCE. */
CIC_API int cic_session_run_shard(cic_session *s, int k, int n);
/* Merge the n shard folders in dirs into the output folder, as `cicheck
 * merge` does; the kind of shard is told by the first folder
 * (case-shard.json: a case split by samples; else sweep.json: a sweep).
 * Case shards: the whole case is scored from their numbers (compared with
 * the baseline when one is set) and report.json written; the merged case
 * becomes the session's case and its rows are read as a run's. Sweep
 * shards: sweep.json is written and its points are read with
 * cic_session_point_*. A refused merge (shards of other cases or versions,
 * missing, duplicated or edited shards) is CIC_EXIT_INPUT with the file
 * named. Returns the exit code `cicheck merge` gives. */
CIC_API int cic_session_merge(cic_session *s, const char *const *dirs, int n);
/* The file the last sweep, shard or merge wrote (sweep.json,
 * case-shard.json or report.json, below the output folder); NULL when it
 * wrote none. Owned by s. */
CIC_API const char *cic_session_output(const cic_session *s);

/* Points of the last sweep or sweep merge, in index order (0 otherwise). */
CIC_API int cic_session_point_count(const cic_session *s);
/* Point i's index among all the sweep's points (-1 out of range). */
CIC_API long cic_session_point_index(const cic_session *s, int i);
/* Point i's exit code (CIC_EXIT_INPUT out of range). */
CIC_API int cic_session_point_exit_code(const cic_session *s, int i);
/* Point i's swept values as compact JSON ({"d_model":8,"seed":1}); NULL
 * out of range. Owned by s. */
CIC_API const char *cic_session_point_params(const cic_session *s, int i);
/* The verdict of transform in point i ("equivalent", "broken",
 * "inconclusive"); NULL when the point did not run, has no such transform
 * or i is out of range. Owned by s. */
CIC_API const char *cic_session_point_verdict(const cic_session *s, int i,
                                              const char *transform);

#ifdef __cplusplus
}
#endif

#endif
