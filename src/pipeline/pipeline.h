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

#include "../case/case.h"
#include "../report/baseline.h"
#include "../engine/engine.h"
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
                               * it); 0: one per online core */
    cic_rt *rt;               /* the runtime context the run uses and counts
                               * into (base/rt.h; the API session's), or NULL:
                               * the run's own, from threads */
    bool keep_models;         /* keep every model and output for cic_pipeline_dump */
    bool no_baseline;         /* do not compare with a baseline */
    const char *baseline_dir; /* NULL: reference/ (compared when the file exists) */
    cic_tolerance tol;        /* for the f32 figures against the baseline */
    bool recheck;             /* also recompute the truth of sample 0 at
                               * prec + 64 and compare (the proof's check) */
    bool keep_partials;       /* keep what cic_pipeline_partials gives */
    const cic_env *env;       /* the environment the report records; NULL:
                               * this process's (a merge gives the shards') */
} cic_pipeline_opts;

/* The numbers a run's report is scored from, before any scoring: the
 * truth, the verdict reference, every engine output (after the readout
 * map), each MPFR run with float32 weights, and the FLOPs each engine run
 * counted. A case split by samples (--shard K/N) is run shard by shard;
 * each keeps these for its samples (rows are samples times tokens, so the
 * shards' arrays laid end to end in sample order are the whole run's), and
 * cic_pipeline_replay scores the whole case from them. Only the f32
 * engines the case enables and its transforms have entries. */
typedef struct {
    size_t n;                              /* values in each array: rows x cols */
    mpfr_t *truth;                         /* at mpfr_prec */
    mpfr_t *ref;                           /* the f64 verdict reference; NULL: the truth */
    float *before[CIC_MATMUL_COUNT];       /* each f32 engine on the original */
    mpfr_t *yhp[CIC_MAX_XFORMS];           /* verdict run, unrounded weights */
    mpfr_t *yrw[CIC_MAX_XFORMS];           /* verdict run, float32 weights */
    float *y[CIC_MAX_XFORMS][CIC_MATMUL_COUNT];
    cic_flop_count base_counted;           /* the truth's run */
    cic_flop_count before_fc[CIC_MATMUL_COUNT];
    cic_flop_count xf_counted[CIC_MAX_XFORMS]; /* the verdict run's */
    cic_flop_count xf_fc[CIC_MAX_XFORMS][CIC_MATMUL_COUNT];
    bool truth_certified;                  /* the truth holds (report.h) */
    double truth_cert_diff;                /* --recheck, of sample 0 */
    cic_truth_proof proof;                 /* of these samples */
} cic_pipeline_partials;

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

/* The partials of a finished run made with keep_partials (owned by p). */
const cic_pipeline_partials *cic_pipeline_partials_of(const cic_pipeline *p);

/* Score case c (the whole case) from partials instead of running engines:
 * the original model is built for its weights hash, then every row, gate,
 * hash and the baseline comparison as cic_pipeline_run gives them from the
 * same numbers. Cases with low-precision engines are not replayed (their
 * per-linear figures need the runs). The arrays of *parts pass to the
 * pipeline (freed by cic_pipeline_destroy, also on failure). Returns as
 * cic_pipeline_run. */
int cic_pipeline_replay(cic_pipeline **out, const cic_case *c, const cic_pipeline_opts *o,
                        cic_pipeline_partials *parts, cic_diag *d);

/* Free the arrays of partials that did not pass to a pipeline (a merge
 * that was refused); *pp is zeroed. */
void cic_pipeline_partials_free(cic_pipeline_partials *pp);

void cic_pipeline_destroy(cic_pipeline *p);

#endif
