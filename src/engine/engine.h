/* SPDX-License-Identifier: MIT */
/* engine.h: the engines that run a cic_model graph (DESIGN.md section 4).
 *
 * The f32 engine is the fast kernel: OpenBLAS sgemm (or a fixed-order loop
 * that gives the same bits on every CPU) and float elementwise code; the
 * f64 engine the same in double. The MPFR engine is the reference kernel:
 * every op at prec bits, dot products correctly rounded. Each engine is a
 * short walker over the graph with one kernel per op kind (op.h), the same
 * formulas in the same order of operations in every engine; each checks the
 * graph once on entry (cic_model_check) and books, per site, the FLOPs the
 * op table gives for every op it runs (convention: a multiply-add is 2
 * FLOPs; add, sub, mul, div, sqrt, compare and each exp/erf/tanh call 1;
 * RoPE's cos and sin form a precomputed table, not counted: op.h).
 *
 * Every run function returns 0, -1 (CIC_GRAPH_NOMEM) when memory runs out,
 * or -2 (CIC_GRAPH_REFUSED) when cic_model_check refuses the graph (call it
 * for the message). */
#ifndef CIC_ENGINE_H
#define CIC_ENGINE_H

#include "../model/model.h"
#include "../kind/engine_id.h"

#include <mpfr.h>
#include <stdbool.h>

typedef struct {
    double site[CIC_SITE_COUNT];
} cic_flop_count;

double cic_flop_total(const cic_flop_count *fc);

/* ---- the engines ---- */


/* A tap on chosen tensors (the pipeline's per-block errors read each block's
 * output this way): once the op that writes tensor id has run, and want[id]
 * is nonzero, the f32 and low-precision engines call f32 with its values
 * (rounded as the engine stores them), the MPFR engine calls mp with its
 * values and, in a ball run, their radii (NULL otherwise). rows: the run's
 * rows of the tensor. The f64 engine ignores it; a tap changes no bit. */
typedef struct {
    const unsigned char *want; /* the model's n_t flags */
    void (*f32)(void *ctx, int id, const float *y, int rows);
    void (*mp)(void *ctx, int id, const mpfr_t *y, const double *rad, int rows);
    void *ctx;
} cic_tensor_tap;

typedef struct {
    int sample0;    /* run samples sample0 .. sample0+n_samples-1 */
    int n_samples;  /* 0: all samples */
    cic_flop_count *flops; /* added to when not NULL */
    /* MPFR engine: called after every op with the FLOPs done so far in this
     * run (for progress bars); may be NULL */
    void (*progress)(void *ctx, double done);
    void *progress_ctx;
    /* Taps on the linears that read or write the residual stream (role
     * reader or writer), called after each has run with its op index: the
     * f32 and low-precision engines give its input x [rows, k] and output
     * y [rows, n] (rounded as the engine stores it), the MPFR engine its
     * output. May be NULL; a tap changes no bit of the run. */
    void (*lin_tap)(void *ctx, int op, const float *x, const float *y, int rows);
    void (*lin_tap_mp)(void *ctx, int op, const mpfr_t *y, int rows);
    /* MPFR engine: every op's output y [rows, its tensor's cols] after the
     * op has run (cicheck verify reads the residual stream of each layer).
     * May be NULL. */
    void (*op_tap_mp)(void *ctx, int op, const mpfr_t *y, int rows);
    void *tap_ctx;
    /* MPFR engine: a ball run (mp_ball.h) when not NULL: the output's
     * radii, or why there are none. The midpoints are the plain run's. */
    struct cic_ball_out *ball;
    const cic_tensor_tap *tensor_tap; /* may be NULL */
} cic_run_opts;

/* Run the graph in float32. out receives the readout rows (n_samples *
 * tokens) x cic_model_out_cols(m), row-major. Returns 0, -1 or -2 (above). */
int cic_engine_f32_run(float *out, const cic_model *m, enum cic_matmul mm,
                       const cic_run_opts *o);

/* Run the graph in float64: the f32 engine's graph, formulas, order of
 * operations and FLOP bookings in double (dgemm or the fixed-order loop).
 * Weights and inputs are the unrounded hp values rounded to double when
 * present (and not rounded_weights), else their float32 values. out as for
 * the f32 engine. Returns 0, -1 or -2. */
int cic_engine_f64_run(double *out, const cic_model *m, enum cic_matmul mm,
                       bool rounded_weights, const cic_run_opts *o);

/* Run the graph in MPFR at prec bits. Weights are the unrounded transformed
 * values (tensor hp) unless rounded_weights, then their float32 roundings.
 * prec must be >= every hp_prec. out: rows x cols values, initialised by the
 * caller (any precision; each is rounded once from a prec-bit result).
 * Its threads (at most 16; the bits are the same for any count), the
 * linear ops' path and the counters are m's context (m->rt, base/rt.h).
 * Returns 0, -1 or -2. */
int cic_engine_mpfr_run(mpfr_t *out, const cic_model *m, mpfr_prec_t prec,
                        bool rounded_weights, const cic_run_opts *o);

/* Run the graph in the low-precision engine lp (case.h, [[engines.lowp]];
 * DESIGN in engine_lowp.c): the f32 engine's graph and order of operations
 * with lp's weights, activation quantization and element rounding. out as
 * for the f32 engine. Returns 0, -1 or -2. */
int cic_engine_lowp_run(float *out, const cic_model *m, const cic_lowp_spec *lp,
                        enum cic_matmul mm, const cic_run_opts *o);

#endif
