/* SPDX-License-Identifier: MIT */
/* mp_act.h: the activations of the MPFR engine, one value at a time, and
 * RoPE's cos/sin table: each MPFR operation correctly rounded at the
 * precision of its output, in the formula's order (GELU by erf, GELU's tanh
 * form, ReLU, SiLU, QuickGELU). */
#ifndef CIC_MP_ACT_H
#define CIC_MP_ACT_H

#include "../kind/kind.h"
#include "mp_fn.h"

#include <mpfr.h>

/* The constants of activation a's formula at prec (y's precision): 1/sqrt 2
 * for GELU, 0.044715 and sqrt(2/pi) for its tanh form, -1.702 for
 * QuickGELU, each rounded as the formula rounds it. Made once per op and
 * read by every element (and thread): the same values, so the same bits,
 * as making them per element. */
typedef struct {
    mpfr_t c[2];
} cic_mp_act_consts;
void cic_mp_act_consts_init(cic_mp_act_consts *k, enum cic_act a, mpfr_prec_t prec);
void cic_mp_act_consts_clear(cic_mp_act_consts *k);

/* y = a(x); t is scratch at y's precision, k a's constants at y's
 * precision, fw the thread's scratch for exp, tanh and erf (mp_fn.h: the
 * same correctly rounded values as MPFR's). y may alias x. */
void cic_mp_act(enum cic_act a, mpfr_ptr y, mpfr_srcptr x, mpfr_ptr t,
                const cic_mp_act_consts *k, cic_mp_fn_ws *fw);

/* RoPE's table at prec, as real_rope_table lays it out: cs[2 (p hd/2 +
 * i)] = cos and + 1 = sin of p inv_i for positions p < N, inv_i =
 * theta^(-2i / hd) (the exponent rounded once, then mpfr_pow of theta as
 * the case gives it), each step correctly rounded. */
void cic_mp_rope_table(mpfr_t *cs, int N, int hd, double theta, mpfr_prec_t prec);

#endif
