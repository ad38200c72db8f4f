/* SPDX-License-Identifier: MIT */
/* pipeline.h: the numerics of one case as a library (DESIGN.md sections 2
 * to 5): build the original model, compute its MPFR truth and certify it,
 * run every engine on the original and on each transform, judge the
 * verdicts and the expectations, evaluate the gates, hash the outputs that
 * must not move, and compare with a baseline. It returns what it found as a
 * cic_report and prints nothing: progress goes to callbacks. The command
 * line (src/cli) and the public API (include/cicheck/cicheck.h) sit on top
 * of it and format the report.
 *
 * Work order: the memory guard; the original model (weights from the seed);
 * the truth at mpfr_prec, certified on sample 0 at mpfr_prec + 64; each f32
 * engine on the original (the "before" figures); per transform the model,
 * its run in the verdict engine with unrounded weights (the verdict) and
 * with float32-rounded weights (the decomposition), and in every f32 engine
 * (the errors and the drift); the gates; the output hashes; the baseline. */
#ifndef CIC_PIPELINE_H
#define CIC_PIPELINE_H

#include "../report/baseline.h"
#include "../report/report.h"

#include <stdbool.h>

/* Where progress goes (any member may be NULL). */
typedef struct {
    /* A stage begins: "truth: original model in MPFR at 128 bits". */
    void (*stage)(void *ctx, const char *text);
    /* Inside a long stage: done of total units of work (weight values
     * drawn, FLOPs done), under a short label; then work_end. */
    void (*work)(void *ctx, const char *label, double done, double total);
    void (*work_end)(void *ctx);
    /* Something the user should know that is not an error ("no baseline for
     * case ..." under an explicit baseline folder). */
    void (*warn)(void *ctx, const char *text);
    void *ctx;
} cic_progress;

typedef struct {
    cic_progress progress;
    double max_memory;        /* bytes; 0: half the machine's RAM */
    int threads;              /* MPFR engine threads (the bits do not depend on
                               * it); 0: as set before (one per core) */
    bool keep_models;         /* keep every model and output for cic_pipeline_dump */
    bool no_baseline;         /* do not compare with a baseline */
    const char *baseline_dir; /* NULL: reference/ (compared when the file exists) */
    cic_tolerance tol;        /* for the f32 figures against the baseline */
    bool recheck;             /* also recompute the truth of sample 0 at
                               * prec + 64 and compare (the proof's check) */
} cic_pipeline_opts;

typedef struct cic_pipeline cic_pipeline;

/* Run case c, which is a single case (a sweep's points are cases of their
 * own) and must outlive the pipeline. On return *out holds the pipeline
 * (NULL only when memory ran out), whose report says what was found.
 * Returns CIC_OK (every expectation, gate and baseline check holds),
 * CIC_EGATE (one failed), CIC_EINPUT (the case cannot be run: a transform
 * that does not apply, too much memory, a truth that is not a number, a
 * malformed baseline; d says why) or CIC_EINTERNAL (memory, with d). */
int cic_pipeline_run(cic_pipeline **out, const cic_case *c, const cic_pipeline_opts *o,
                     cic_diag *d);

/* What can be refused before a run: a transform that does not apply to
 * the block, and (dump) the file names of a --dump folder. CIC_OK, or
 * CIC_EINPUT with d set. cic_pipeline_run checks the transforms again. */
int cic_pipeline_check(const cic_case *c, bool dump, cic_diag *d);

/* The report of a finished run (owned by p; its kase is the c given). */
const cic_report *cic_pipeline_report(const cic_pipeline *p);

/* Move the report's arrays (results, gates, regressions) to *out, so the
 * report outlives p (free them with free). */
void cic_pipeline_take_report(cic_pipeline *p, cic_report *out);

/* The --dump folder (report/dump.h: weights of every model, inputs, the
 * outputs and the truth). Needs keep_models. 0, or -1 with d set. */
int cic_pipeline_dump(const cic_pipeline *p, const char *dir, cic_diag *d);

void cic_pipeline_destroy(cic_pipeline *p);

#endif
