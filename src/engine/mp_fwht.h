/* SPDX-License-Identifier: MIT */
/* mp_fwht.h: the fast Hadamard of one row in MPFR, each operation correctly
 * rounded, in the order the real engines use (engine_real.h: fwht_rows,
 * fwht_regular_row), so that at 24 or 53 bits it is their float32 or
 * float64 result bit for bit. */
#ifndef CIC_MP_FWHT_H
#define CIC_MP_FWHT_H

#include <mpfr.h>
#include <stdbool.h>

/* Row v of width w = K P in place, between the signs and the scale: the
 * butterflies of length P on each block, then the blocks mixed by the
 * base hk (K x K, +-1; K = 1 none), out block c = sum_a hk[a][c] block a
 * (transpose: hk[c][a]). acc: K values, t0 one, at the row's precision. */
void cic_mp_fwht_row(mpfr_t *v, int w, int K, const signed char *hk, bool transpose,
                     mpfr_t *acc, mpfr_t t0);

/* The regular Hadamard of order w = 4^k (xform/qmat.h), in place: forward
 * v R = ((v P) D_r) Syl D_c, transpose v R^T = ((v D_c) Syl) D_r P. t: w
 * values of scratch, t0 one. */
void cic_mp_fwht_regular_row(mpfr_t *v, int w, int k, bool transpose, mpfr_t *t, mpfr_t t0);

#endif
