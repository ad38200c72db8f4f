/* SPDX-License-Identifier: MIT */
/* mpdot_impl.h: the fixed-point dot kernel's accumulators and the steps
 * around its inner loops, shared by mpvec.c (the general kernel) and
 * mplinear.c (the linear op and its hot case). Internal to src/base: no
 * other module includes it. */
#ifndef CIC_MPDOT_IMPL_H
#define CIC_MPDOT_IMPL_H

#include "mpvec.h"

/* Lx + Ly: up to 1024-bit by 1024-bit factors (the precisions a proof
 * escalates to: attention's scores and P V at 448 bits are 7 + 7 limbs) */
#define DOT_MAX_LIMBS 32
/* cic_mp_pack_init packs values of fewer limbs only: a weight matrix held
 * in MPFR at 512 bits or more stays unpacked (its copy would cost as much
 * memory again; its dot products read the mpfr_t values) */
#define PACK_INIT_MAX_LIMBS 8
#define DOT_ACC_LIMBS 64  /* 4096 bits of exponent span */

typedef unsigned __int128 dot_u128;

#define DOT_INLINE static inline __attribute__((always_inline))

/* es of a zero in a pack: +0 and -0 (below every 2 e + sign of a regular
 * value) */
#define PACK_ZERO INT64_MIN
#define PACK_NZERO (INT64_MIN + 1)
#define PACK_IS_ZERO(es) ((es) <= PACK_NZERO)

/* One row's accumulators: positive and negative terms apart, unit 2^emin;
 * limbs [0, w) are in use and hold every partial sum. */
typedef struct {
    mp_limb_t pos[DOT_ACC_LIMBS], neg[DOT_ACC_LIMBS];
    mpfr_exp_t emin, ebase; /* ebase = emin + 64 (la + lb) */
    size_t nz;              /* nonzero products */
    int w;
    bool on;
} dot_acc;

/* The bias's limb count (0 for none or zero), or -1 when it rules out the
 * fast path. */
int _cic_dot_bias_limbs(mpfr_srcptr bias);
/* Accumulators for nr rows from the spans, zeroed; a row is on when the
 * fast path takes it (its limb count that of the first row on, the span
 * within DOT_ACC_LIMBS). Returns la, the limb count of the rows on (0: no
 * row on). kb = _cic_dot_bias_limbs(bias) >= 0. */
int _cic_dot_rows_setup(dot_acc *acc, int nr, const cic_mp_span *sx, const cic_mp_span *sy,
                        mpfr_srcptr bias, int kb);
/* Add the bias to each row on, round it once into r[t]; returns the mask
 * of rows set (not those off, nor those with no nonzero product and no
 * bias: signed-zero rules). */
unsigned _cic_dot_rows_finish(mpfr_ptr *r, dot_acc *acc, int nr, mpfr_srcptr bias, int kb);

#endif
