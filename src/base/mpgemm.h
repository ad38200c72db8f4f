/* mpgemm.h: dense products of MPFR matrices in double through OpenBLAS
 * dgemm, for transforms computed in f64 at sizes where correctly rounded
 * MPFR products (d^3 of them for a rotation) take too long. */
#ifndef CIC_MPGEMM_H
#define CIC_MPGEMM_H

#include <mpfr.h>
#include <stdbool.h>

/* C = op(A) op(B), all row-major: op(A) is m x k (A stored m x k, or k x m
 * when ta), op(B) is k x n (B stored k x n, or n x k when tb), C is m x n.
 * A and B are read rounded to double (exact when they carry <= 53 bits); C
 * is set from dgemm's doubles, exactly when its precision is >= 53. C may
 * not alias A or B. 0, or -1 when memory runs out (C untouched). */
int cic_mp_gemm_f64(mpfr_t *c, const mpfr_t *a, bool ta, const mpfr_t *b, bool tb, int m, int n,
                    int k);

#endif
