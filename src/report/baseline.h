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
 * the CPU kernel and the thread count (README "Use as a CI gate" gives the
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

/* The default, chosen from the measured spread (README). */
extern const cic_tolerance CIC_TOLERANCE_DEFAULT;

/* Compare r with the baseline at path. Sets r->has_baseline, baseline_path,
 * regress and n_regress (allocated; the caller frees r->regress), and clears
 * r->pass when a rule fails. Returns 0, or -1 with d set when the baseline
 * cannot be read or is not a cicheck report (bad input: exit 2). */
int cic_baseline_compare(cic_report *r, const char *path, const cic_tolerance *tol,
                         cic_diag *d);

#endif
