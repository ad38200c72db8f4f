/* SPDX-License-Identifier: MIT */
/* metric.h: how far a low-precision output is from the MPFR truth, and how far
 * two float32 outputs are from each other (DESIGN.md section 5).
 *
 * All error arithmetic is done in MPFR so the metric adds no error of its own:
 * |y - x| is formed exactly (y is a float, x the truth at prec bits) and the
 * ratios are rounded once to double for reporting. Outputs are row-major
 * rows x cols with rows = tokens. NaN and Inf in y are counted before any
 * norm and make every figure that covers them non-finite (an output with no
 * finite error never passes a gate); see metric.c. */
#ifndef CIC_METRIC_H
#define CIC_METRIC_H

#include "../base/format.h"

#include <mpfr.h>
#include <stddef.h>
#include <stdint.h>

typedef struct {
    double max, p99, mean;
} cic_stat3;

#define CIC_NQ 101        /* ulp_row quantiles at 0, 1, ..., 100 % */
#define CIC_DRIFT_BINS 34 /* drift histogram: bin b holds distances of b bits */

typedef struct {
    double max_abs;
    double rel_norm2;
    cic_stat3 ulp_row;
    cic_stat3 ulp_elem;
    uint64_t ulp_elem_excluded; /* entries with |x| < 2^-10 * row max */
    cic_stat3 drift;            /* ordered-integer ULP distance to the before run */
    double ulp_row_delta_p99;   /* ulp_row.p99 after - before */
    double ulp_row_delta_max;
    double decomp_weights;      /* rel_norm2: MPFR run with rounded weights vs truth */
    double decomp_arith;        /* rel_norm2: f32 run vs that MPFR run */
    uint64_t n_out;             /* entries of y scored (rows * cols) */
    uint64_t nonfinite;         /* NaN or Inf entries of y */
    int64_t first_nonfinite;    /* flat index of the first one, -1 if none */
    double ulp_row_q[CIC_NQ];   /* the distribution of ulp_row (nearest rank) */
    uint64_t drift_hist[CIC_DRIFT_BINS]; /* counts of drift distances by bit length:
                                          * bin 0: 0, bin b: [2^(b-1), 2^b) */
    int has_drift;              /* drift and ulp_row_delta are meaningful */
    int has_decomp;
} cic_metrics;

/* ULPs and ordered integers are those of the format the outputs were
 * computed in (src/base/format.h): cic_format_ulp_mp, cic_format_distance. */

/* ---- error of y against the truth x ---- */

/* Fill max_abs, rel_norm2, ulp_row, ulp_elem, ulp_elem_excluded, n_out,
 * nonfinite, first_nonfinite (leaves drift and decomposition untouched). x holds
 * rows*cols finite values (any precision >= 24), y the outputs (values of
 * fmt, held as floats), ULPs those of fmt. prec is the working precision for
 * |y - x| (use the truth's precision). */
void cic_metric_error(cic_metrics *m, const cic_format *fmt, const mpfr_t *x,
                      const float *y, size_t rows, size_t cols, mpfr_prec_t prec);

/* ---- one block's output against its truth (the per-block errors) ---- */

/* The figures of one block's output (DESIGN.md section 13, "Per block"),
 * with the truth's own uncertainty in the same units: a figure moves by at
 * most about its rad_* when the truth moves within its radii. */
typedef struct {
    double max_abs, rel_norm2;
    double ulp_p99;    /* ulp_row p99: |y - x| / ulp(row's max |x|) */
    double rad_abs;    /* the truth's largest radius */
    double rad_rel;    /* ||rad||_2 / ||x||_2 */
    double rad_ulp;    /* the largest radius over the ulp of its row */
    uint64_t nonfinite;
} cic_block_metrics;

/* y against x, rows x cols doubles each, in double: the truth x is a
 * rounding of a value within rad_row[r] of the exact one on row r (NULL:
 * exact), far sharper than the errors scored, so double arithmetic (2^-53
 * relative) adds nothing visible. ULPs are fmt's. NaN and Inf in y as in
 * cic_metric_error (max_abs and rel_norm2 +Inf, NaN when a y is NaN; +Inf
 * entries in the ULP distribution). 0, or -1 when memory runs out. */
int cic_metric_block(cic_block_metrics *b, const cic_format *fmt, const double *x,
                     const double *rad_row, const double *y, size_t rows, size_t cols);

/* ||a - b||_2 / ||b||_2 computed in MPFR at prec, rounded to double
 * (0 when both are 0; +Inf when b is 0 and a is not; NaN when a has a NaN or
 * b is not finite, +Inf when a has an Inf). Used for ce_residual and the
 * decomposition. */
double cic_metric_rel_diff(const mpfr_t *a, const mpfr_t *b, size_t n,
                           mpfr_prec_t prec);
/* The same with a float a. */
double cic_metric_rel_diff_f32(const float *a, const mpfr_t *b, size_t n,
                               mpfr_prec_t prec);

/* Drift between the float outputs of the untransformed run (before) and a
 * transformed run (after): max, p99, mean of the ordered ULP distance in fmt.
 * Entries where either is NaN have no distance and count as +Inf (Inf itself
 * is the float after FLT_MAX). */
void cic_metric_drift(cic_stat3 *d, const cic_format *fmt, const float *before,
                      const float *after, size_t n);

/* Histogram of the drift distances (see cic_metrics.drift_hist). */
void cic_metric_drift_hist(uint64_t hist[CIC_DRIFT_BINS], const cic_format *fmt,
                           const float *before, const float *after, size_t n);

/* p-th percentile (0..100) of v by nearest rank on a sorted copy; v is not
 * modified. 0 for n == 0. */
double cic_percentile(const double *v, size_t n, double p);

#endif
