/* SPDX-License-Identifier: MIT */
/* specnorm_int.h: what the spectral norm bounds' files share (internal to
 * src/base): the safe scalar arithmetic on nonnegative doubles (up, grow;
 * docs/design.md, "Spectral norm bounds", "Scalar arithmetic"), and the
 * bound of the largest eigenvalue of a symmetric matrix by a shifted
 * Cholesky certificate (specnorm_cert.c), which specnorm.c tries before its
 * squarings. */
#ifndef CIC_SPECNORM_INT_H
#define CIC_SPECNORM_INT_H

#include "base.h"

#include <math.h>
#include <stddef.h>

/* Covers every underflow term of a bound (also with subnormals flushed to
 * zero in OpenBLAS's kernels): docs/design.md ("the absolute terms"); valid
 * while both sides are at most DIM_MAX. */
#define TINY 0x1p-900
#define DIM_MAX ((size_t)1 << 30)

/* x >= 0 computed by one operation in round-to-nearest (relative error at
 * most 2^-53, or an absolute 2^-1075 below DBL_MIN): up(x) is at least the
 * exact result. */
static inline double up(double x)
{
    return x * (1 + 0x1p-50) + 0x1p-1060;
}

static inline double sqrt_up(double x)
{
    return up(sqrt(x));
}

/* s: a sum of n nonnegative terms (squares or absolute values of
 * doubles), each rounded once, added in any order in round-to-nearest. The
 * exact sum is at most (s + n 2^-1075) / (1 - 2^-53)^n <= (s + TINY)
 * (1 + n 2^-52); the factor is exact in double for n < 2^48. */
static inline double grow(double s, size_t n)
{
    CIC_ASSERT(n < ((size_t)1 << 48));
    return up(up(s + TINY) * (1 + (double)(n + 4) * 0x1p-52));
}

/* An upper bound of the sum of the squares of v[0..n). */
static inline double frob2_up(const double *v, size_t n)
{
    double s = 0;
    size_t i;
    for (i = 0; i < n; i++)
        s += v[i] * v[i];
    return grow(s, n);
}

/* *lam >= lambda_max(T) for the exactly symmetric n x n T (row-major, its
 * largest |entry| in [1, 2), n <= DIM_MAX), proven by a shifted Cholesky
 * factorisation (docs/design.md, "Spectral norm bounds", step 3); +INFINITY
 * when no shift tried was certified (the caller then squares). 0, or -1
 * out of memory (*lam = +INFINITY). */
int _cic_sn_lmax_cert(double *lam, const double *T, size_t n);

/* The certificate at one shift alpha (a double): *lam >= lambda_max(T)
 * when fl(alpha I - T) factors, +INFINITY when it does not. B: n x n
 * scratch (overwritten). The brute-force tests call it at shifts around
 * a known lambda_max. */
void _cic_sn_cert_at(double *lam, const double *T, size_t n, double alpha, double *B);

#endif
