/* SPDX-License-Identifier: MIT */
/* mp_ball_own.c: a priori bounds of the MPFR kernel's own roundings in an
 * activation (mp_ball.h, _cic_ball_act_own): |y - f(m)| for the engine's
 * value y of f at an exact midpoint m, from m and y alone, so the ball
 * rule by the mean value theorem needs no enclosure of f(m) (one Arb
 * evaluation of the function per value less). Each bound follows mp_act.c's
 * formula operation by operation, every one correctly rounded at prec bits
 * (u = 2^-prec: |RN(x) - x| <= u |RN(x)|, also for exp, erf and tanh,
 * which mp_fn.c rounds correctly), and the constants' own roundings;
 * docs/design.md, "Activations: the kernel's own roundings", derives them.
 * All arithmetic on nonnegative doubles, every operation followed by up()
 * (or, for a lower bound, by a factor 1 - 2^-50). */
#include "mp_ball_int.h"

/* a lower bound of x >= 0 computed by one or two operations */
static double dn(double x)
{
    return x > 0 ? x * (1 - 0x1p-50) : 0;
}

/* GELU, 0.5 m (1 + erf(m c0)), c0 = RN(1 / sqrt 2): t1 = RN(m c0) is within
 * d1 = 2.0001 u |m| / sqrt 2 of m / sqrt 2; |erf'| <= (2 / sqrt pi) / (1 +
 * z^2) past |z|; t2 = RN(erf(t1)) within u; t3 = RN(1 + t2) within u |t3|,
 * |t3| <= 2 |y| / (|m| (1 - u)); t4 = RN(t3 m) within u |t4| = 2 u |y|. */
static double own_gelu(double am, double am_lo, double ay, double u)
{
    double d1 = up(up(0.70711 * 2.0001 * u) * am);
    double z = dn(dn(0.70710 * am_lo) - up(d1)), L = up(up(1.12838 / (1 + z * z)));
    double t3 = up(up(2 * ay / am_lo) * (1 + 0x1p-50));
    return up(up(u * ay) + up(0.5 * am * up(up(u * up(t3 + 1)) + up(L * d1))));
}

/* Its tanh form, 0.5 m (1 + tanh(c1 (m + c0 m^3))), c0 = RN(0.044715), c1
 * = RN(sqrt(RN(2 / RN(pi)))) within 2.0001 u of k = sqrt(2 / pi): t3 =
 * RN(RN(RN(m m) m) c0) within d3 = 4.0001 u a |m|^3 of a m^3; t4 = RN(t3 +
 * m) within u |t4| + d3 of m + a m^3; t5 = RN(t4 c1) within dz = u |t5| +
 * 2.0001 u k |t4| + k (u |t4| + d3) of z = k (m + a m^3), |z| >= k |m|;
 * tanh' = sech^2 <= 1 / (1 + zeta^2) past zeta; then as GELU's tail. */
static double own_gelu_tanh(double am, double am_lo, double ay, double u)
{
    double m3 = up(up(am * am) * am);
    double d3 = up(up(4.0001 * u) * up(0.0447151 * m3));
    double t4 = up(up(am + up(0.04472 * m3)) * (1 + 0x1p-50));
    double d4 = up(up(u * t4) + d3);
    double t5 = up(0.79789 * t4);
    double dz = up(up(up(u * t5) + up(up(2.0001 * 0.79789 * u) * t4)) + up(0.79789 * d4));
    double z = dn(dn(0.79788 * am_lo) - up(dz)), L = up(up(1.0 / (1 + z * z)));
    double t7 = up(up(2 * ay / am_lo) * (1 + 0x1p-50));
    return up(up(u * ay) + up(0.5 * am * up(up(up(u * t7) + u) + up(L * dz))));
}

bool _cic_ball_act_own_takes(enum cic_act a, mpfr_srcptr m, mpfr_prec_t prec)
{
    if (prec < 53 || !mpfr_number_p(m) ||
        (a != CIC_ACT_GELU && a != CIC_ACT_GELU_TANH && a != CIC_ACT_SILU) ||
        (a == CIC_ACT_SILU && mpfr_get_prec(m) > prec)) /* SiLU's RN(-m) exact */
        return false;
    return mpfr_zero_p(m) || (mpfr_cmpabs_ui(m, 16) < 0 && mpfr_get_exp(m) > -498);
}

double _cic_ball_act_own(enum cic_act a, mpfr_srcptr m, mpfr_srcptr y, mpfr_prec_t prec)
{
    double am, am_lo, ay, u = ldexp(1.0, -(int)prec);
    if (!_cic_ball_act_own_takes(a, m, prec) || mpfr_get_prec(y) != prec || !mpfr_number_p(y))
        return -1;
    if (mpfr_zero_p(m)) /* every form gives exactly 0 there, as f does */
        return mpfr_zero_p(y) ? 0 : -1;
    /* |m| in [2^-499, 16): the doubles below are normal and ordered */
    am = fabs(mpfr_get_d(m, MPFR_RNDA));
    am_lo = fabs(mpfr_get_d(m, MPFR_RNDZ));
    ay = fabs(mpfr_get_d(y, MPFR_RNDA));
    if (!(ay < INFINITY))
        return -1;
    switch (a) {
    case CIC_ACT_GELU:
        return own_gelu(am, am_lo, ay, u);
    case CIC_ACT_GELU_TANH:
        return own_gelu_tanh(am, am_lo, ay, u);
    case CIC_ACT_SILU:
        /* e = RN(exp(-m)), s = RN(1 + e) within u s + u e <= 2.0001 u s of
         * 1 + exp(-m), y = RN(m / s): |m / s - f| <= 2.0002 u |m / s| */
        return up(4 * u * ay);
    default:
        return -1;
    }
}
