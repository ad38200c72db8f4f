/* SPDX-License-Identifier: MIT */
/* fwht_w.h: products of MPFR weights by a randomized Hadamard Q through the
 * fast Walsh-Hadamard transform, with the bits of the dense product.
 *
 * Q = (hk (x) Syl_{d/K}) diag(sign) r, r = RN_p(1/sqrt(d)) (cic_xf_hq,
 * qmat.c's entries +-r). The dense product (cic_mp_matmul, or cic_mp_dot
 * per entry) gives each entry of v Q as RN_p(sum_i v_i Q[i][j]), the exact
 * sum rounded once. That sum is s_j r (v H)_j, so the transform computes
 * v H exactly in integers (the line scaled to its lowest set bit,
 * butterflies and the K x K mixing as adds of two's complement limb
 * arrays) and rounds r (v H)_j once (docs/design.md section 6, "Fast
 * transform of weights"). Lines with NaN or Inf, or whose exponents span
 * too many bits for the integers, take the dense dot product. */
#ifndef CIC_FWHT_W_H
#define CIC_FWHT_W_H

#include "xform_util.h"

#include <mpfr.h>
#include <stdbool.h>
#include <stddef.h>

/* n lines of width h->d: entry i of line l is src[l ls + i is], and dst
 * (the same strides, values at p bits) gets line l times Q, each entry as
 * the dense product rounds it. Lines are split over threads (<= 0: one
 * per online core); the bits do not depend on it. dst may not alias src.
 * 0, or -1 when memory runs out (dst partly set). */
int _cic_xf_fwht_lines(mpfr_t *dst, const mpfr_t *src, size_t n, size_t ls, size_t is,
                       const cic_xf_hq *h, mpfr_prec_t p, int threads);

/* Tensor id times the Hadamard h over its residual dimension, installed at
 * c->p: right, W Q (W [rows, h->d]), or left, Q^T W (W [h->d, cols]); the
 * run's threads. 0, or -1 when memory runs out (id unchanged). Defined in
 * xform_common.c beside the other products by Q, which read and install a
 * tensor's values; this file's transform itself uses only src/base. */
int _cic_xf_rotate_hadamard(cic_xf_ctx *c, int id, const cic_xf_hq *h, bool left);

/* Lines that took the dense dot products (NaN, Inf, too wide) since the
 * process started, for the tests. */
unsigned long _cic_xf_fwht_dense_lines(void);

#endif
