/* SPDX-License-Identifier: MIT */
/* pipeline_int.h: the state of one pipeline run and the stages that share
 * it (pipeline.c, readout.c, truth.c, stages.c, judge.c, dump_run.c).
 * Internal to src/pipeline. */
#ifndef CIC_PIPELINE_INT_H
#define CIC_PIPELINE_INT_H

#include "pipeline.h"

#include "../engine/engine.h"
#include "../model/model.h"

#include <mpfr.h>

/* An output kept for the dump: float32 (engines) or MPFR (verdict runs). */
typedef struct {
    char name[128]; /* "<engine>:<transform>" as in outputs.safetensors */
    float *f32;     /* rows x cols, or NULL */
    mpfr_t *mp;     /* rows x cols at prec, or NULL */
    int result;     /* mp: the index of its row in res[] (-1: none) */
} cic_pl_saved;

/* A quantized linear's input in the f32 engine's run of one model, kept
 * for the dump's activations.safetensors (keep_models only). */
typedef struct {
    char name[CIC_NAME_MAX + 100]; /* "<transform>:<weight name>" */
    int rows, cols;
    float *x;                      /* rows x cols, owned */
} cic_pl_act;

struct cic_pipeline {
    cic_pipeline_opts o;
    cic_rt *rt;      /* o.rt, or rt_own made from o.threads; every model has it */
    cic_rt rt_own;
    const cic_case *c;
    mpfr_prec_t prec;
    /* the truth's last ball runs: log2 of the relative radius the output
     * would have, extrapolated from its blocks' (-INFINITY: none) */
    double rel_guess;
    cic_model *orig;
    cic_model *xm[CIC_MAX_XFORMS];
    size_t rows, cols, n;
    mpfr_t *truth;
    mpfr_t *ref;     /* what ce compares with: truth, or the original in f64 */
    mpfr_t *ref_own; /* ref when it is not the truth */
    float *before[CIC_MATMUL_COUNT];
    cic_flop_count base_counted, base_analytical;
    cic_result *res;
    int n_res;
    cic_gate_result *gates;
    int n_gates;
    cic_pl_saved saved[2 + CIC_MAX_XFORMS * (CIC_MATMUL_COUNT + 1) +
                       (CIC_MAX_XFORMS + 1) * CIC_MAX_LOWP];
    /* low-precision engines: the verdict engine's output of every
     * quantized linear of the model being scored (by op index, rows * n
     * doubles, or NULL), for the per-linear errors */
    double **lin_ref;
    int n_lin_ref;
    const cic_model *lin_ref_model;
    int lin_ref_nomem;
    struct cic_pl_depth *depth; /* depth.c: the truth per block, the run tapped */
    cic_pl_act *acts;
    int n_acts, cap_acts;
    int n_saved;
    cic_report rep;
    double t0;
    /* keep_partials (or a replay): the numbers behind the report; the
     * arrays are those of truth, ref_own and saved[], but yrw, which only
     * these keep */
    cic_pipeline_partials parts;
};

/* A long stage's progress: the engine's per-op callback and the model
 * builder's, passed on to cic_progress.work under label. */
typedef struct {
    cic_pipeline *p;
    const char *label;
    double total;
} cic_pl_work;

double _cic_pl_now(void);
void _cic_pl_stage(cic_pipeline *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Hook w into o (when progress.work is set). */
void _cic_pl_work_begin(cic_pl_work *w, cic_pipeline *p, const char *label, double total,
                        cic_run_opts *o);
void _cic_pl_work_end(cic_pl_work *w);

/* readout.c: the readout map (the residual stream in the original basis). */
int _cic_pl_map_out(cic_pipeline *p, mpfr_t *dst, const mpfr_t *src, const cic_model *m);
bool _cic_pl_needs_map(const cic_model *m);
int _cic_pl_map_out_f32(cic_pipeline *p, float *y, const cic_model *m);

/* truth.c */
/* The original model (its weights from the seed or the checkpoint); NULL
 * with d->msg set when the checkpoint's values are refused. */
cic_model *_cic_pl_build_original(cic_pipeline *p, cic_diag *d);
void _cic_pl_flops_formula(const cic_pipeline *p, cic_flop_count *fc, int i);
int _cic_pl_truth(cic_pipeline *p);
bool _cic_pl_truth_nonfinite(const cic_pipeline *p, cic_diag *d);

/* stages.c */
cic_result *_cic_pl_new_result(cic_pipeline *p, const char *xf, const char *engine);
void _cic_pl_save_out(cic_pipeline *p, const char *name, float *f, mpfr_t *mp, int result);
bool _cic_pl_sites_equal(const cic_flop_count *a, const cic_flop_count *b);
void _cic_pl_fill_flops(cic_pipeline *p, cic_flops *f, const cic_flop_count *counted,
                        const cic_flop_count *analytical, bool engines_agree);
void _cic_pl_score_f32(cic_pipeline *p, cic_result *x, const float *y);
bool _cic_pl_engine_on(const cic_case *c, int e);
/* An engine's row takes the verdict of its transform's exactness row mx. */
void _cic_pl_copy_verdict(cic_result *x, const cic_result *mx);
int _cic_pl_before(cic_pipeline *p);
int _cic_pl_verdict_ref(cic_pipeline *p);
int _cic_pl_xform(cic_pipeline *p, int i, cic_diag *d);
/* The rows of every f32 engine and transform from p->parts (a replay). */
int _cic_pl_replay_rows(cic_pipeline *p, cic_diag *d);

/* lowp_run.c: the low-precision engines' rows, the outlier statistics */
bool _cic_pl_lowp_on(const cic_pipeline *p);
int _cic_pl_lowp_check(cic_pipeline *p, cic_diag *d);
/* Hook the reference tap into o (the verdict run of model m); then
 * _cic_pl_lowp_rows scores every engine on m under transform xf, and
 * _cic_pl_lin_ref_free drops the reference. */
int _cic_pl_lin_ref_begin(cic_pipeline *p, const cic_model *m, cic_run_opts *o);
void _cic_pl_lin_ref_free(cic_pipeline *p);
int _cic_pl_lowp_rows(cic_pipeline *p, const char *xf, const cic_model *m,
                      const cic_result *mx, const cic_flop_count *analytical);
/* Hook the outlier tap into o (an f32 run of model m under transform xf)
 * and add the weights' statistics; _cic_pl_outlier_end after the run.
 * With keep_models the tap also keeps each input in acts (freed by
 * _cic_pl_acts_free). */
typedef struct {
    cic_pipeline *p;
    const cic_model *m;
    const char *xf;
    const char *engine;
    int failed;
} cic_pl_tap;
int _cic_pl_outlier_begin(cic_pl_tap *t, cic_pipeline *p, const cic_model *m, const char *xf,
                          cic_run_opts *o);
int _cic_pl_outlier_end(cic_pl_tap *t);
void _cic_pl_acts_free(cic_pipeline *p);

/* depth.c: the per-block errors. _cic_pl_depth_truth hooks the truth's
 * run (keeps every block output's truth; _cic_pl_depth_truth_end after
 * it); _cic_pl_depth_begin hooks an engine's run of m, whose outputs are
 * values of fmt, and _cic_pl_depth_end gives row x its entries. Each 0, or
 * -1 when memory runs out; without a truth kept begin and end do nothing. */
typedef struct cic_pl_depth cic_pl_depth;
int _cic_pl_depth_truth(cic_pipeline *p, cic_run_opts *o);
int _cic_pl_depth_truth_end(cic_pipeline *p);
/* Ziv's rerun of sample s (its rows sharpen the kept truth where their
 * radius is smaller), then _cic_pl_depth_truth_end. */
int _cic_pl_depth_truth_sample(cic_pipeline *p, cic_run_opts *o, int s);
int _cic_pl_depth_begin(cic_pipeline *p, const cic_model *m, const cic_format *fmt,
                        cic_run_opts *o);
int _cic_pl_depth_end(cic_pipeline *p, cic_result *x);
void _cic_pl_depth_free(cic_pipeline *p);

/* judge.c */
const char *_cic_pl_verdict_label(const cic_pipeline *p);
bool _cic_pl_verdict_f64(const cic_pipeline *p);
void _cic_pl_gates(cic_pipeline *p);
void _cic_pl_hashes(cic_pipeline *p);
int _cic_pl_compare(cic_pipeline *p, cic_diag *d);

#endif
