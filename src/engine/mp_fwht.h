/* SPDX-License-Identifier: MIT */
/* mp_fwht.h: the fast Hadamard of one row in MPFR, each operation correctly
 * rounded, in the order the real engines use (engine_real.h: fwht_rows,
 * fwht_regular_row), so that at 24 or 53 bits it is their float32 or
 * float64 result bit for bit. */
#ifndef CIC_MP_FWHT_H
#define CIC_MP_FWHT_H

#include "../base/mpvec.h" /* cic_mp_fwht_row */

#include <mpfr.h>
#include <stdbool.h>

/* The regular Hadamard of order w = 4^k (xform/qmat.h), in place: forward
 * v R = ((v P) D_r) Syl D_c, transpose v R^T = ((v D_c) Syl) D_r P. t: w
 * values of scratch, t0 one. */
void cic_mp_fwht_regular_row(mpfr_t *v, int w, int k, bool transpose, mpfr_t *t, mpfr_t t0);

#endif
