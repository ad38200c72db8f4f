/* SPDX-License-Identifier: MIT */
/* mp_fn.c: exp, tanh and erf correctly rounded through an Arb enclosure and
 * a rounding test, MPFR's own function where the test fails (mp_fn.h). */
#include "mp_fn.h"

#include <arb_hypgeom.h>

/* Extra bits of the enclosure over y's precision: Arb's radius is then
 * about 2^-(prec + 30) of the value, and an enclosure straddles a rounding
 * boundary about once in 2^30. */
#define FN_GUARD 32
/* Arguments at or beyond 2^20 in magnitude go to MPFR: their results are
 * at the ends of the exponent range or exactly +-1 (tanh, erf) rounded,
 * and Arb's argument reduction would need more bits there. */
#define FN_EXP_MAX 20

enum fn_kind { FN_EXP, FN_TANH, FN_ERF };

void cic_mp_fn_ws_init(cic_mp_fn_ws *w)
{
    arb_init(w->a);
    arb_init(w->b);
    arf_init(w->lo);
    arf_init(w->hi);
    mpfr_init2(w->rlo, MPFR_PREC_MIN);
    mpfr_init2(w->rhi, MPFR_PREC_MIN);
}

void cic_mp_fn_ws_clear(cic_mp_fn_ws *w)
{
    arb_clear(w->a);
    arb_clear(w->b);
    arf_clear(w->lo);
    arf_clear(w->hi);
    mpfr_clear(w->rlo);
    mpfr_clear(w->rhi);
}

static void fn_mpfr(mpfr_ptr y, mpfr_srcptr x, enum fn_kind f)
{
    switch (f) {
    case FN_EXP:
        mpfr_exp(y, x, MPFR_RNDN);
        break;
    case FN_TANH:
        mpfr_tanh(y, x, MPFR_RNDN);
        break;
    default:
        mpfr_erf(y, x, MPFR_RNDN);
        break;
    }
}

int _cic_mp_fn_round(mpfr_ptr y, const arf_t lo, const arf_t hi, cic_mp_fn_ws *w)
{
    mpfr_prec_t p = mpfr_get_prec(y);
    if (mpfr_get_prec(w->rlo) != p) {
        mpfr_set_prec(w->rlo, p);
        mpfr_set_prec(w->rhi, p);
    }
    arf_get_mpfr(w->rlo, lo, MPFR_RNDN);
    arf_get_mpfr(w->rhi, hi, MPFR_RNDN);
    /* both ends regular (no overflow, underflow or zero in MPFR's range)
     * and rounded to the same value: so is every point between them */
    if (!mpfr_regular_p(w->rlo) || !mpfr_regular_p(w->rhi) || !mpfr_equal_p(w->rlo, w->rhi))
        return 0;
    mpfr_set(y, w->rlo, MPFR_RNDN);
    return 1;
}

/* 1 with y set when the enclosure of f(x) decides the rounding, else 0. */
static int fn_arb(mpfr_ptr y, mpfr_srcptr x, enum fn_kind f, cic_mp_fn_ws *w)
{
    slong wp = (slong)mpfr_get_prec(y) + FN_GUARD;
    arf_set_mpfr(w->lo, x); /* exact: the arf takes every bit */
    arb_set_arf(w->a, w->lo);
    if (f == FN_EXP)
        arb_exp(w->b, w->a, wp);
    else if (f == FN_TANH)
        arb_tanh(w->b, w->a, wp);
    else
        arb_hypgeom_erf(w->b, w->a, wp);
    if (!arb_is_finite(w->b))
        return 0;
    arb_get_lbound_arf(w->lo, w->b, wp);
    arb_get_ubound_arf(w->hi, w->b, wp);
    return _cic_mp_fn_round(y, w->lo, w->hi, w);
}

static void fn_eval(mpfr_ptr y, mpfr_srcptr x, enum fn_kind f, cic_mp_fn_ws *w)
{
    /* zeros keep MPFR's signs (tanh(-0) = -0); large arguments, NaN, Inf */
    if (!mpfr_regular_p(x) || mpfr_get_exp(x) > FN_EXP_MAX || !fn_arb(y, x, f, w))
        fn_mpfr(y, x, f);
}

void cic_mp_exp(mpfr_ptr y, mpfr_srcptr x, cic_mp_fn_ws *w)
{
    fn_eval(y, x, FN_EXP, w);
}

void cic_mp_tanh(mpfr_ptr y, mpfr_srcptr x, cic_mp_fn_ws *w)
{
    fn_eval(y, x, FN_TANH, w);
}

void cic_mp_erf(mpfr_ptr y, mpfr_srcptr x, cic_mp_fn_ws *w)
{
    fn_eval(y, x, FN_ERF, w);
}
