/* SPDX-License-Identifier: MIT */
/* ulp.c: the binary32 unit in the last place of an exact value, and the
 * ordered-integer distance between two floats (DESIGN.md section 5).
 *
 * The ULP here is the spacing of binary32 numbers around an exact truth value
 * x, so that |RN32(x) - x| <= ulp(x) / 2 always holds: that inequality is what
 * lets a "<= 0.5 ulp" claim mean "correctly rounded". Three details make it
 * hold at the edges:
 *   - at an exact power of two the gap BELOW is used (the float just under
 *     2^E is 2^(E-24) away), because a value rounding to 2^E from beneath is
 *     in the finer binade;
 *   - below 2^-126 the spacing stops shrinking (subnormals are evenly spaced
 *     at 2^-149), hence the max(E, -126);
 *   - ulp is non-decreasing in |x|, so the ulp of a row's largest entry bounds
 *     the ulp of every entry in the row (ulp_row relies on this).
 * Every ulp is a power of two between 2^-149 and 2^(emax-23), returned as an
 * exact double (it overflows to +Inf only for |x| >= 2^1047, far outside any
 * binary32 workload). */
#include "metric.h"

#include "../base/base.h"

#include <math.h>
#include <string.h>

/* log2 of the binary32 ulp for a value whose floor(log2|x|) is e and which is
 * (pow2 != 0) or is not an exact power of two. */
static long _cic_ulp_f32_log2(long e, int pow2)
{
    if (pow2)
        e -= 1; /* gap below 2^E is the spacing of binade E-1 */
    if (e < -126)
        e = -126; /* subnormals: fixed spacing 2^-149 */
    return e - 23;
}

double cic_ulp_f32_mp(mpfr_srcptr x)
{
    long e;
    CIC_ASSERT(mpfr_number_p(x));
    if (mpfr_zero_p(x))
        return ldexp(1.0, -149);
    /* MPFR's exponent puts the significand in [1/2, 1): floor(log2|x|) is
     * one less. A power of two has exactly one significant bit. */
    e = (long)mpfr_get_exp(x) - 1;
    return ldexp(1.0, (int)_cic_ulp_f32_log2(e, mpfr_min_prec(x) == 1));
}

double cic_ulp_f32(double x)
{
    int e;
    double m;
    CIC_ASSERT(isfinite(x));
    if (x == 0.0)
        return ldexp(1.0, -149);
    /* frexp gives |m| in [1/2, 1), exact for subnormal doubles too. */
    m = frexp(x, &e);
    return ldexp(1.0, (int)_cic_ulp_f32_log2((long)e - 1, fabs(m) == 0.5));
}

int64_t cic_f32_ordered(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    /* Sign-magnitude to two's complement: the magnitude bits of a binary32
     * already count floats upward from +0 (Inf is the code after FLT_MAX), so
     * negatives just get negated. -0 has magnitude 0 and lands on 0 like +0:
     * +0 and -0 compare equal here, by design. int64 so that the difference
     * of any two codes (|code| < 2^31) cannot overflow. */
    if (u & UINT32_C(0x80000000))
        return -(int64_t)(u & UINT32_C(0x7fffffff));
    return (int64_t)u;
}

uint64_t cic_f32_ulp_distance(float a, float b)
{
    int64_t d;
    if (isnan(a) || isnan(b))
        return UINT64_MAX;
    d = cic_f32_ordered(a) - cic_f32_ordered(b);
    return d < 0 ? (uint64_t)(-d) : (uint64_t)d;
}
