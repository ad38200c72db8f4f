/* SPDX-License-Identifier: MIT */
/* fold.h: folding adaLN modulation and a rotation into linear weights, in
 * MPFR (DESIGN.md section 3, per-sample-fold and static-fold). The MPFR
 * engine runs these per sample; the static-fold transform runs them once for
 * its calibration sample. Layouts are PyTorch's ([out, in]); Q is d x d
 * row-major; every dot product is correctly rounded (cic_mp_dot). The order
 * of operations matches the f32 engine's FOLD ops (with ws->blas the
 * products by Q of in_w and out_w go through dgemm instead, for transforms
 * computed in f64 at large d):
 *   in_w:  t_k = 1 + scale_k;  T[j,k] = W[j,k] t_k;  out = T Q
 *   in_b:  out_j = b_j + sum_k W[j,k] shift_k
 *   out_w: T[j,c] = gate_j W[j,c];  (center each column);  out = Q^T T
 *   out_b: t_j = gate_j b_j;  (center);  out = Q^T t */
#ifndef CIC_FOLD_H
#define CIC_FOLD_H

#include "../base/mpvec.h"

#include <stdbool.h>

typedef struct {
    cic_dot_scratch dot;
    mpfr_t *tmp;   /* max_elems */
    size_t tmp_n;
    mpfr_t *vec;   /* max_d */
    size_t vec_n;
    mpfr_ptr *ptr; /* max_d */
    mpfr_prec_t prec;
    bool blas;     /* the products by Q in double through dgemm (prec 53) */
    int threads;   /* the products' threads (base/mpgemm.h; 0: one per core) */
} cic_fold_ws;

/* Workspace for matrices of up to max_elems values and vectors of up to
 * max_d; every value read must carry at most prec bits. 0 or -1. */
int cic_fold_ws_init(cic_fold_ws *ws, size_t max_elems, size_t max_d, mpfr_prec_t prec);
void cic_fold_ws_clear(cic_fold_ws *ws);

/* Outputs are rounded to their own precision; they may not alias inputs.
 * scale, shift and gate are read with stride 1. */
void cic_fold_in_w(mpfr_t *out, const mpfr_t *w, int n, int d, const mpfr_t *scale,
                   const mpfr_t *q, cic_fold_ws *ws);
void cic_fold_in_b(mpfr_t *out, const mpfr_t *w, const mpfr_t *b, int n, int d,
                   const mpfr_t *shift, cic_fold_ws *ws);
void cic_fold_out_w(mpfr_t *out, const mpfr_t *w, int d, int k, const mpfr_t *gate,
                    const mpfr_t *q, bool center, cic_fold_ws *ws);
void cic_fold_out_b(mpfr_t *out, const mpfr_t *b, int d, const mpfr_t *gate,
                    const mpfr_t *q, bool center, cic_fold_ws *ws);

/* in_w and out_w of the static fold through dgemm (transform precision
 * f64-openblas), in doubles: every step is the double operation, which
 * rounds as MPFR at 53 bits while a product lies in double's normal range
 * and a column mean is a double; the products by Q are the dgemm call
 * cic_mp_matmul makes. w, scale, gate and q are the values of cic_fold_in_w
 * and cic_fold_out_w at 53 bits, as doubles (exact). 0; 1 when a step
 * would round otherwise (out unspecified: take the MPFR folds); -1 when
 * memory runs out. threads: the column means' (0: one per online core). */
int cic_fold_in_w_f64(double *out, const double *w, int n, int d, const double *scale,
                      const double *q);
int cic_fold_out_w_f64(double *out, const double *w, int d, int k, const double *gate,
                       const double *q, bool center, int threads);

#endif
