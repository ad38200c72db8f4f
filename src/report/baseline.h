/* SPDX-License-Identifier: MIT */
/* baseline.h: the regression gate. A baseline is the report.json of an
 * accepted run, kept as reference/<case>.json (`cicheck bless`); a later run
 * is compared with it rule by rule:
 *   - weights_sha256 and truth_sha256 equal (both are deterministic: the
 *     weights are a pure function of the seed, the truth is MPFR, correctly
 *     rounded and independent of threads);
 *   - for every (transform, engine) row: the row exists in both; the verdict
 *     is unchanged; the counted FLOPs are equal; an mpfr row's output hash
 *     is equal (the transform's math did not change);
 *   - float32 error metrics may not exceed old * (1 + r) (+ abs_ulp for the
 *     ULP figures), with r by how much the figure legitimately moves with
 *     the BLAS kernel and thread count (measured by bench/blas_spread.sh):
 *     stable figures (rel_norm2, ulp_row.mean, ulp_elem.mean), spread
 *     figures (max_abs, ulp_row.max, ulp_row.p99, ulp_elem.p99, drift.p99,
 *     drift.mean) and tail figures (ulp_elem.max, drift.max: one element
 *     near zero decides them); nonfinite may not grow at all.
 * The tolerance absorbs the legitimate variation of OpenBLAS results with
 * the CPU kernel and the thread count (docs/guide/ci-gate.md, "What is compared", gives the
 * measured spread). */
#ifndef CIC_BASELINE_H
#define CIC_BASELINE_H

#include "report.h"

typedef struct {
    double stable;  /* relative growth allowed: stable figures */
    double spread;  /* ... spread figures */
    double tail;    /* ... tail figures */
    double abs_ulp; /* plus this many ULPs for ulp_row, ulp_elem and drift */
} cic_tolerance;

/* The default, chosen from the measured spread (docs/guide/ci-gate.md). */
extern const cic_tolerance CIC_TOLERANCE_DEFAULT;

/* Compare r with the baseline at path. Sets r->has_baseline, baseline_path,
 * regress and n_regress (allocated; the caller frees r->regress), and clears
 * r->pass when a rule fails. Returns 0, or -1 with d set when the baseline
 * cannot be read or is not a cicheck report (bad input: exit 2).
 *
 * The baseline's schema is checked before anything is compared, so a
 * hand-edited or truncated file cannot pass vacuously: weights_sha256 and
 * truth_sha256 are strings; results is an array of objects, each with a
 * transform and an engine (non-empty strings, no pair twice), a verdict (a
 * verdict name or null), an optional mpfr_sha256 string, flops.transformed
 * (a number), and metrics (null, or an object whose compared figures are
 * numbers >= 0 or null for a non-finite value, with drift null or an
 * object, and nonfinite an integer >= 0). A wrong type or a missing key is
 * an error naming the file, the row and the field. A field the run has and
 * the baseline lacks (or the reverse) is a failed check, as is a finite
 * figure where the baseline recorded a non-finite one (null): bless to
 * accept it. */
int cic_baseline_compare(cic_report *r, const char *path, const cic_tolerance *tol,
                         cic_diag *d);

/* Whether a baseline exists at path, without opening it (opening a FIFO
 * would wait for a writer): 1 a regular file (or a link to one), 0 nothing
 * there, -1 with d set when something else is there (a FIFO, a folder, a
 * device, a dangling link) or it cannot be examined. */
int cic_baseline_probe(const char *path, cic_diag *d);

/* An explicit --baseline DIR must be an existing folder: 0, or -1 with d
 * set (it does not exist, or is not a folder). */
int cic_baseline_dir_check(const char *dir, cic_diag *d);

/* A JSON document (a report, a baseline, a sweep.json) from path: refuses
 * anything but a regular file before reading (so a FIFO or a device cannot
 * block or feed it endless input), and files over max_bytes; rejects
 * duplicate keys; jansson caps the nesting depth. NULL with d set (file,
 * line and column of a syntax error). Free with json_decref. */
struct json_t *cic_report_json_load(const char *path, size_t max_bytes, cic_diag *d);
/* The most bytes read of a sweep.json (a sweep's or a shard's): its
 * 100,000 points at most (CIC_SWEEP_MAX_POINTS_LIMIT), each report under
 * 160 KiB, with room to spare. */
#define CIC_SWEEP_JSON_MAX ((size_t)16 << 30)

#endif
