/* SPDX-License-Identifier: MIT */
/* mp_act.c: the activations in MPFR (mp_act.h). */
#include "mp_act.h"

#include "../base/base.h"

void cic_mp_act_consts_init(cic_mp_act_consts *k, enum cic_act a, mpfr_prec_t prec)
{
    mpfr_inits2(prec, k->c[0], k->c[1], (mpfr_ptr)0);
    switch (a) {
    case CIC_ACT_GELU: /* 1 / sqrt 2 */
        mpfr_set_ui(k->c[0], 2, MPFR_RNDN);
        mpfr_rec_sqrt(k->c[0], k->c[0], MPFR_RNDN);
        break;
    case CIC_ACT_GELU_TANH: /* 0.044715 and sqrt(2 / pi), pi rounded first */
        mpfr_set_str(k->c[0], "0.044715", 10, MPFR_RNDN);
        mpfr_const_pi(k->c[1], MPFR_RNDN);
        mpfr_ui_div(k->c[1], 2, k->c[1], MPFR_RNDN);
        mpfr_sqrt(k->c[1], k->c[1], MPFR_RNDN);
        break;
    case CIC_ACT_QUICK_GELU:
        mpfr_set_str(k->c[0], "-1.702", 10, MPFR_RNDN);
        break;
    default:
        break;
    }
}

void cic_mp_act_consts_clear(cic_mp_act_consts *k)
{
    mpfr_clears(k->c[0], k->c[1], (mpfr_ptr)0);
}

void cic_mp_act(enum cic_act a, mpfr_ptr y, mpfr_srcptr x, mpfr_ptr t,
                const cic_mp_act_consts *k, cic_mp_fn_ws *fw)
{
    switch (a) {
    case CIC_ACT_GELU: /* 0.5 x (1 + erf(x / sqrt 2)) */
        mpfr_mul(t, x, k->c[0], MPFR_RNDN);
        cic_mp_erf(t, t, fw);
        mpfr_add_ui(t, t, 1, MPFR_RNDN);
        mpfr_mul(t, t, x, MPFR_RNDN);
        mpfr_div_2ui(y, t, 1, MPFR_RNDN);
        break;
    case CIC_ACT_GELU_TANH: /* 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) */
        mpfr_mul(t, x, x, MPFR_RNDN);
        mpfr_mul(t, t, x, MPFR_RNDN);
        mpfr_mul(t, t, k->c[0], MPFR_RNDN);
        mpfr_add(t, t, x, MPFR_RNDN);
        mpfr_mul(t, t, k->c[1], MPFR_RNDN);
        cic_mp_tanh(t, t, fw);
        mpfr_add_ui(t, t, 1, MPFR_RNDN);
        mpfr_mul(t, t, x, MPFR_RNDN);
        mpfr_div_2ui(y, t, 1, MPFR_RNDN);
        break;
    case CIC_ACT_RELU:
        if (mpfr_sgn(x) > 0)
            mpfr_set(y, x, MPFR_RNDN);
        else
            mpfr_set_zero(y, 1);
        break;
    case CIC_ACT_SILU: /* x / (1 + exp(-x)) */
        mpfr_neg(t, x, MPFR_RNDN);
        cic_mp_exp(t, t, fw);
        mpfr_add_ui(t, t, 1, MPFR_RNDN);
        mpfr_div(y, x, t, MPFR_RNDN);
        break;
    case CIC_ACT_QUICK_GELU: /* x / (1 + exp(-1.702 x)), 1.702 at prec */
        mpfr_mul(t, k->c[0], x, MPFR_RNDN);
        cic_mp_exp(t, t, fw);
        mpfr_add_ui(t, t, 1, MPFR_RNDN);
        mpfr_div(y, x, t, MPFR_RNDN);
        break;
    default:
        CIC_ASSERT(0 && "activation without a formula in mp_act.c");
    }
}

void cic_mp_rope_table(mpfr_t *cs, int N, int hd, double theta, mpfr_prec_t prec)
{
    mpfr_t e, inv, ang;
    int i, p, half = hd / 2;
    mpfr_inits2(prec, e, inv, ang, (mpfr_ptr)0);
    for (i = 0; i < half; i++) {
        mpfr_set_si(e, -2 * i, MPFR_RNDN);
        mpfr_div_ui(e, e, (unsigned long)hd, MPFR_RNDN);
        mpfr_set_d(inv, theta, MPFR_RNDN);
        mpfr_pow(inv, inv, e, MPFR_RNDN);
        for (p = 0; p < N; p++) {
            mpfr_t *c = cs + 2 * ((size_t)p * half + i);
            mpfr_mul_ui(ang, inv, (unsigned long)p, MPFR_RNDN);
            mpfr_sin_cos(c[1], c[0], ang, MPFR_RNDN);
        }
    }
    mpfr_clears(e, inv, ang, (mpfr_ptr)0);
}
