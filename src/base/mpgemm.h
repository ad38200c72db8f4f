/* SPDX-License-Identifier: MIT */
/* mpgemm.h: dense products of MPFR matrices, the one place a transform's
 * products by Q are formed: correctly rounded dot products, or in double
 * through OpenBLAS dgemm for transforms computed in f64 at sizes where
 * correctly rounded products (d^3 of them for a rotation) take too long. */
#ifndef CIC_MPGEMM_H
#define CIC_MPGEMM_H

#include "mpvec.h"
#include "rt.h"

#include <mpfr.h>
#include <stdbool.h>

/* C = op(A) op(B) as below: every entry a correctly rounded dot product,
 * or with blas through cic_mp_gemm_f64 (and the dot products after all if
 * its buffers cannot be had). The dot products are the linear layer's
 * kernel (cic_mp_linear_rows on op(B)^T packed once, the rows of C split
 * over threads threads (a run's cic_rt_matmul_threads, rt.h; <= 0: one
 * per online core), each with
 * its own scratch at s->prec), and cic_mp_dot with s (cap >= k) when
 * memory for the copies runs out; both round the exact sum once, so the
 * bits are the same for any thread count. */
void cic_mp_matmul(mpfr_t *c, const mpfr_t *a, bool ta, const mpfr_t *b, bool tb, int m, int n,
                   int k, bool blas, int threads, cic_dot_scratch *s);

/* C = op(A) op(B), all row-major: op(A) is m x k (A stored m x k, or k x m
 * when ta), op(B) is k x n (B stored k x n, or n x k when tb), C is m x n.
 * A and B are read rounded to double (exact when they carry <= 53 bits); C
 * is set from dgemm's doubles, exactly when its precision is >= 53. C may
 * not alias A or B. 0, or -1 when memory runs out (C untouched). */
int cic_mp_gemm_f64(mpfr_t *c, const mpfr_t *a, bool ta, const mpfr_t *b, bool tb, int m, int n,
                    int k);

/* The same product of doubles (the dgemm call cic_mp_gemm_f64 makes): C
 * (m x n) := op(A) op(B), row-major, C not aliasing A or B. */
void cic_gemm_f64(double *c, const double *a, bool ta, const double *b, bool tb, int m, int n,
                  int k);

#endif
