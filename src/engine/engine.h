/* SPDX-License-Identifier: MIT */
/* engine.h: the engines that run a cic_model graph (DESIGN.md section 4).
 *
 * The f32 engine is the fast kernel: OpenBLAS sgemm (or a fixed-order loop
 * that gives the same bits on every CPU) and float elementwise code. The MPFR
 * engine is the reference kernel: every op at prec bits, dot products
 * correctly rounded. Both implement the same ops with the same formulas in
 * the same order of operations, and both count the FLOPs they perform, per
 * site, as they run (convention: a multiply-add is 2 FLOPs; add, sub, mul,
 * div, sqrt, compare and each exp/erf/tanh call 1). */
#ifndef CIC_ENGINE_H
#define CIC_ENGINE_H

#include "../model/model.h"

#include <mpfr.h>
#include <stdbool.h>

typedef struct {
    double site[CIC_SITE_COUNT];
} cic_flop_count;

double cic_flop_total(const cic_flop_count *fc);

/* FLOPs the engines book for one activation call. */
double cic_engine_act_flops(enum cic_act a);

enum cic_matmul { CIC_MATMUL_OPENBLAS, CIC_MATMUL_FIXED, CIC_MATMUL_COUNT };
extern const char *const CIC_ENGINE_F32_NAME[CIC_MATMUL_COUNT]; /* "f32-openblas", ... */

typedef struct {
    int sample0;    /* run samples sample0 .. sample0+n_samples-1 */
    int n_samples;  /* 0: all samples */
    cic_flop_count *flops; /* added to when not NULL */
    /* MPFR engine: called after every op with the FLOPs done so far in this
     * run (for progress bars); may be NULL */
    void (*progress)(void *ctx, double done);
    void *progress_ctx;
} cic_run_opts;

/* Run the graph in float32. out receives the readout rows (n_samples *
 * tokens) x cic_model_out_cols(m), row-major. Returns 0, or -1 when memory
 * runs out. */
int cic_engine_f32_run(float *out, const cic_model *m, enum cic_matmul mm,
                       const cic_run_opts *o);

/* Run the graph in float64: the f32 engine's graph, formulas, order of
 * operations and FLOP bookings in double (dgemm or the fixed-order loop).
 * Weights and inputs are the unrounded hp values rounded to double when
 * present (and not rounded_weights), else their float32 values. out as for
 * the f32 engine. Returns 0, or -1 when memory runs out. */
extern const char *const CIC_ENGINE_F64_NAME[CIC_MATMUL_COUNT]; /* "f64-openblas", ... */
int cic_engine_f64_run(double *out, const cic_model *m, enum cic_matmul mm,
                       bool rounded_weights, const cic_run_opts *o);

/* Run the graph in MPFR at prec bits. Weights are the unrounded transformed
 * values (tensor hp) unless rounded_weights, then their float32 roundings.
 * prec must be >= every hp_prec. out: rows x cols values, initialised by the
 * caller (any precision; each is rounded once from a prec-bit result).
 * Returns 0, or -1 when memory runs out. */
int cic_engine_mpfr_run(mpfr_t *out, const cic_model *m, mpfr_prec_t prec,
                        bool rounded_weights, const cic_run_opts *o);

/* Threads of the MPFR engine (n <= 0: one per online core, at most 16).
 * Results are bit-identical for every thread count. */
void cic_engine_mpfr_set_threads(int n);
int cic_engine_mpfr_threads(void);

#endif
