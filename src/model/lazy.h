/* SPDX-License-Identifier: MIT */
/* lazy.h: weights whose unrounded values are a recipe over float32 values,
 * made when they are read instead of held.
 *
 * A transform of float32 weights (a checkpoint's, the seeded ones) keeps the
 * float32 values it started from and what it did to them: a fold of
 * RMSNorm gains (v = RN(w g) at the fold's precision), then possibly a
 * Hadamard rotation of the residual stream (W Q for a reader, Q^T W for a
 * writer). The MPFR engine makes one weight at a time, straight into the
 * packed form its dot products read. At d = 4096 the 200 M weights of a
 * layer would take 10 GiB as 128-bit MPFR numbers; held this way they take
 * their float32 bytes.
 *
 * The values made are the bits the transform's eager products give
 * (xform.c): RN(w g), and RN(sum_i v_i Q_ij) correctly rounded. With
 * Q = (Hk (x) Syl_P) diag(s) r, r = RN(1/sqrt(d)), that sum is
 * r s_j (v H)_j: v H by the fast transform at a precision where every
 * addition is exact (checked), then one rounding of the product by r. A
 * line whose additions were not all exact, and an entry whose sum is zero,
 * take the dot product with Q's column instead. */
#ifndef CIC_LAZY_H
#define CIC_LAZY_H

#include "../base/mpvec.h"
#include "../base/rt.h"

#include <mpfr.h>
#include <stdbool.h>

enum cic_lazy_side { CIC_LAZY_VALUES, CIC_LAZY_RIGHT, CIC_LAZY_LEFT };

typedef struct cic_lazy cic_lazy;
struct cic_lazy {
    int refs;
    int rows, cols;
    mpfr_prec_t prec;        /* of the values made */
    enum cic_lazy_side side;
    /* CIC_LAZY_VALUES: entry (i, j) = RN(src[i cols + j] * gain[j]), or
     * src itself when gain is NULL (owned, rows * cols and cols values) */
    float *src, *gain;
    /* a rotation of base's values (a VALUES recipe of the same shape, a
     * reference held): RIGHT W Q (d = cols), LEFT Q^T W (d = rows) */
    cic_lazy *base;
    int d, K;                /* Q's order and its base's (1: Sylvester) */
    signed char *hk, *sign;  /* K x K base, d signs s_j (owned) */
    cic_rt *rt;              /* the run's context: threads, counters (NULL:
                              * the default, uncounted); not owned */
};

/* A VALUES recipe over src (rows * cols values, ownership taken) with
 * gain (cols values, copied; may be NULL) at prec, made under context rt
 * (the model's, which must outlive the recipe; may be NULL). NULL when
 * memory runs out (src is then still the caller's). */
cic_lazy *cic_lazy_values(float *src, int rows, int cols, const float *gain,
                          mpfr_prec_t prec, cic_rt *rt);
/* base (VALUES, a reference taken) rotated on side by
 * Q = (hk (x) Syl_{d/K}) diag(sign) RN(1/sqrt(d)) at prec, under base's
 * context; hk and sign are copied. NULL when memory runs out. */
cic_lazy *cic_lazy_rotate(cic_lazy *base, enum cic_lazy_side side, int d, int K,
                          const signed char *hk, const signed char *sign, mpfr_prec_t prec);
cic_lazy *cic_lazy_ref(cic_lazy *z);
void cic_lazy_unref(cic_lazy *z);

/* The values, made: into out (rows * cols values at z->prec), into a pack
 * (cic_mp_pack_alloc'd at z->prec, finished), or rounded to float32 (each
 * value at z->prec rounded once more, as cic_mpvec_get_f32 does). 0, or -1
 * when memory runs out. Lines are split over the recipe's
 * cic_rt_matmul_threads. */
int cic_lazy_make(const cic_lazy *z, mpfr_t *out);
int cic_lazy_make_pack(const cic_lazy *z, cic_mp_pack *pk);
int cic_lazy_make_f32(const cic_lazy *z, float *out);
/* ... or each rounded to double (no MPFR copy of the whole tensor). */
int cic_lazy_make_f64(const cic_lazy *z, double *out);

/* Lines that took the dot products so far under rt (all threads; for the
 * tests): its lazy_fallback counter, 0 for NULL. */
unsigned long cic_lazy_fallback_lines(const cic_rt *rt);

#endif
