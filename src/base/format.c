/* SPDX-License-Identifier: MIT */
/* format.c: the number formats (format.h) and their rounding, ULP and
 * ordering, written once from the descriptor's fields. For float32 these
 * are bit for bit what the project always computed: the rounding is the
 * one MPFR gives with binary32's exponent range and subnormalize (CORE-MATH's
 * recipe), the ULP the one DESIGN.md defines, the ordered integer the float's
 * sign-magnitude bits. */
#include "format.h"

#include "base.h"

#include <math.h>
#include <string.h>

const cic_format CIC_FORMATS[] = {
    [CIC_FORMAT_FLOAT32] = {"float32", 32, 24, -126, 127, true, true, CIC_ROUND_NEAREST_EVEN, 0},
    [CIC_FORMAT_FLOAT64] = {"float64", 64, 53, -1022, 1023, true, true, CIC_ROUND_NEAREST_EVEN, 0},
    /* bfloat16: float32's exponent range, 8 significand bits */
    [CIC_FORMAT_BF16] = {"bf16", 16, 8, -126, 127, true, true, CIC_ROUND_NEAREST_EVEN, 0},
    /* IEEE 754 binary16 */
    [CIC_FORMAT_FP16] = {"fp16", 16, 11, -14, 15, true, true, CIC_ROUND_NEAREST_EVEN, 0},
    /* OCP 8-bit floating point (OFP8): E4M3 has no infinities and one NaN
     * pattern at the top (largest finite 448; overflow saturates to it),
     * E5M2 follows IEEE (infinities, largest finite 57344) */
    [CIC_FORMAT_FP8_E4M3] = {"fp8-e4m3", 8, 4, -6, 8, true, false, CIC_ROUND_NEAREST_EVEN, 1},
    [CIC_FORMAT_FP8_E5M2] = {"fp8-e5m2", 8, 3, -14, 15, true, true, CIC_ROUND_NEAREST_EVEN, 0},
    /* OCP MX FP4 E2M1, the element of mxfp4 and nvfp4: 0, 0.5, 1, 1.5, 2,
     * 3, 4, 6; no infinities or NaN, overflow saturates to 6 */
    [CIC_FORMAT_FP4_E2M1] = {"fp4-e2m1", 4, 2, 0, 2, true, false, CIC_ROUND_NEAREST_EVEN, 0},
};

#define CIC_FORMATS_LEN (sizeof CIC_FORMATS / sizeof CIC_FORMATS[0])
_Static_assert(CIC_FORMATS_LEN == CIC_FORMAT_COUNT, "one descriptor per format");

const cic_format *cic_format_get(enum cic_format_id id)
{
    CIC_ASSERT((unsigned)id < CIC_FORMAT_COUNT);
    return &CIC_FORMATS[id];
}

const cic_format *cic_format_find(const char *name)
{
    size_t i;
    for (i = 0; name && i < CIC_FORMATS_LEN; i++)
        if (!strcmp(CIC_FORMATS[i].name, name))
            return &CIC_FORMATS[i];
    return NULL;
}

/* The largest finite value of f, into y (precision >= f->precision). */
static void _cic_format_max(mpfr_ptr y, const cic_format *f, int neg)
{
    /* (2 - (1 + r) 2^(1-p)) 2^emax = (2^p - 1 - r) 2^(emax - p + 1), r the
     * reserved top codes */
    mpfr_set_ui_2exp(y, 1, (mpfr_exp_t)f->precision, MPFR_RNDN);
    mpfr_sub_ui(y, y, 1 + (unsigned long)f->top_reserved, MPFR_RNDN);
    mpfr_mul_2si(y, y, (long)f->emax - f->precision + 1, MPFR_RNDN);
    if (neg)
        mpfr_neg(y, y, MPFR_RNDN);
}

double cic_format_max(const cic_format *f)
{
    return ldexp((double)(((int64_t)1 << f->precision) - 1 - f->top_reserved),
                 f->emax - f->precision + 1);
}

/* |t| is above f's largest finite value (t a finite p-bit number). */
static int above_max(mpfr_srcptr t, const cic_format *f)
{
    mpfr_t m;
    int r;
    mpfr_init2(m, f->precision);
    _cic_format_max(m, f, 0);
    r = mpfr_cmpabs(t, m) > 0;
    mpfr_clear(m);
    return r;
}

int cic_format_round(mpfr_ptr y, mpfr_srcptr x, const cic_format *f)
{
    /* MPFR's exponent e puts the significand in [1/2, 1): |x| in
     * [2^(e-1), 2^e). The format's smallest subnormal 2^(emin - p + 1) has
     * MPFR exponent emin - p + 2, its largest finite values exponent
     * emax + 1. Rounding to p bits inside that range and subnormalizing
     * gives subnormals their reduced precision in one rounding, as IEEE
     * does. MPFR wants inputs inside the current range, so values outside
     * it are settled first: an overflow, or |x| below the smallest
     * subnormal, which rounds to it above half of it and to zero (the even
     * neighbour) at or below. */
    mpfr_exp_t e, lo = (mpfr_exp_t)f->emin - f->precision + 2, hi = (mpfr_exp_t)f->emax + 1;
    mpfr_exp_t emin = mpfr_get_emin(), emax = mpfr_get_emax();
    mpfr_flags_t flags;
    int inex;
    CIC_ASSERT(mpfr_get_prec(y) >= f->precision && f->subnormals &&
               (f->top_reserved == 0 || !f->infinities));
    if (!mpfr_number_p(x) || mpfr_zero_p(x))
        return mpfr_set(y, x, MPFR_RNDN);
    e = mpfr_get_exp(x);
    if (e > hi) {
        if (f->infinities)
            mpfr_set_inf(y, mpfr_signbit(x) ? -1 : 1);
        else
            _cic_format_max(y, f, mpfr_signbit(x));
        return mpfr_signbit(x) ? 1 : -1;
    }
    if (e < lo) {
        int up = e == lo - 1 && mpfr_cmp_si_2exp(x, mpfr_signbit(x) ? -1 : 1, lo - 2) != 0;
        if (up)
            mpfr_set_si_2exp(y, mpfr_signbit(x) ? -1 : 1, lo - 1, MPFR_RNDN);
        else
            mpfr_set_zero(y, mpfr_signbit(x) ? -1 : 1);
        return mpfr_signbit(x) ? (up ? -1 : 1) : (up ? 1 : -1);
    }
    flags = mpfr_flags_save();
    {
        mpfr_t t;
        mpfr_init2(t, f->precision);
        mpfr_set_emin(lo);
        mpfr_set_emax(hi);
        inex = mpfr_set(t, x, MPFR_RNDN);
        inex = mpfr_check_range(t, inex, MPFR_RNDN);
        inex = mpfr_subnormalize(t, inex, MPFR_RNDN);
        mpfr_set_emin(emin);
        mpfr_set_emax(emax);
        if (!f->infinities && (mpfr_inf_p(t) || (f->top_reserved > 0 && above_max(t, f)))) {
            _cic_format_max(y, f, mpfr_signbit(t)); /* saturate */
            inex = mpfr_signbit(t) ? 1 : -1;
        } else {
            mpfr_set(y, t, MPFR_RNDN); /* exact: y is at least as precise */
        }
        mpfr_clear(t);
    }
    mpfr_flags_restore(flags, MPFR_FLAGS_ALL);
    return inex;
}

double cic_format_round_d(const cic_format *f, double x)
{
    mpfr_t a;
    double r;
    mpfr_init2(a, 53);
    mpfr_set_d(a, x, MPFR_RNDN);
    cic_format_round(a, a, f);
    r = mpfr_get_d(a, MPFR_RNDN); /* exact: a is a value of f */
    mpfr_clear(a);
    return r;
}

float cic_format_round_f(const cic_format *f, float x)
{
    /* Two cases, by where |x| lies in f (emin >= -126: float32's
     * subnormals are all below 2^emin):
     * - |x| >= 2^emin: f keeps the top p of float32's 24 significand bits,
     *   so the rounding drops d = 24 - p bits of the encoding, as an
     *   integer: adding half a quantum less one, plus the last kept bit
     *   (ties to even; d <= 22 keeps that bit in the significand field
     *   for p >= 2), carries into the exponent field when the significand
     *   rounds up to the next binade, and into 0x7f800000 (Inf) past
     *   FLT_MAX. Overflow is then a magnitude above f's largest finite
     *   value (2^p - 1 - r) 2^(emax - p + 1), compared as encodings
     *   (ordered like the values, Inf above every finite).
     * - |x| < 2^emin: f's spacing there is the fixed 2^(emin - p + 1), and
     *   with C = 2^(emin - p + 24), |x| + C lies in [C, 2C) where float32's
     *   spacing is exactly that: the addition rounds |x| once, ties to
     *   even (C / spacing = 2^23 is even), and subtracting C is exact.
     *   (Needs the sum to be rounded to float32, no reassociation: C11,
     *   SSE arithmetic, no -ffast-math.) */
    const int p = f->precision, d = 24 - p;
    uint32_t u, sign, c, top;
    float a, cf;
    /* float64 and other wide formats are refused; the rest is what every
     * descriptor holds (the largest finite value in binade emax) */
    CIC_ASSERT(p >= 2 && p <= 24 && f->emin >= -126 && f->emax <= 127 && f->subnormals &&
               (f->top_reserved == 0 || !f->infinities) && f->top_reserved < 1 << (p - 1));
    memcpy(&u, &x, sizeof u);
    sign = u & 0x80000000u;
    u ^= sign;
    if (u >= 0x7f800000u)
        return x; /* Inf stays Inf (in every format), NaN stays NaN */
    if ((int)(u >> 23) - 127 >= f->emin) {
        if (d > 0) {
            u += ((uint32_t)1 << (d - 1)) - 1 + ((u >> d) & 1);
            u &= ~(((uint32_t)1 << d) - 1);
        }
        top = (uint32_t)(f->emax + 127) << 23 |
              (((((uint32_t)1 << p) - 1 - (uint32_t)f->top_reserved) << d) & 0x7fffffu);
        if (u > top)
            u = f->infinities ? 0x7f800000u : top;
    } else {
        c = (uint32_t)(f->emin - p + 24 + 127) << 23; /* a normal float */
        memcpy(&a, &u, sizeof a);
        memcpy(&cf, &c, sizeof cf);
        a = (a + cf) - cf;
        memcpy(&u, &a, sizeof u);
    }
    u |= sign; /* the sign of x, zeros included */
    memcpy(&x, &u, sizeof x);
    return x;
}

bool cic_format_round_df_ok(const cic_format *f)
{
    return f->precision >= 2 && f->precision <= 22 && f->emin >= -126 && f->emax <= 127 &&
           f->subnormals && (f->top_reserved == 0 || !f->infinities) &&
           f->top_reserved < 1 << (f->precision - 1);
}

float cic_format_round_df(const cic_format *f, double x)
{
    float t = (float)x;
    uint32_t u;
    CIC_ASSERT(cic_format_round_df_ok(f));
    if (isnan(x))
        return t;
    if (fabs((double)t) > fabs(x))
        t = nextafterf(t, 0.0f); /* toward zero (past FLT_MAX: FLT_MAX) */
    if ((double)t != x) { /* inexact: the last bit set (an odd float) */
        memcpy(&u, &t, sizeof u);
        u |= 1;
        memcpy(&t, &u, sizeof t);
    }
    return cic_format_round_f(f, t);
}

/* log2 of f's ULP for a value with floor(log2 |x|) = e that is (pow2) or is
 * not an exact power of two. */
static long _cic_format_ulp_log2(const cic_format *f, long e, int pow2)
{
    if (pow2)
        e -= 1; /* the gap below 2^E is the spacing of binade E - 1 */
    if (e < f->emin)
        e = f->emin; /* subnormals: fixed spacing */
    return e - (f->precision - 1);
}

double cic_format_ulp_mp(const cic_format *f, mpfr_srcptr x)
{
    long e;
    CIC_ASSERT(mpfr_number_p(x));
    if (mpfr_zero_p(x))
        return ldexp(1.0, f->emin - f->precision + 1);
    /* floor(log2 |x|) is MPFR's exponent minus one; a power of two has one
     * significant bit */
    e = (long)mpfr_get_exp(x) - 1;
    return ldexp(1.0, (int)_cic_format_ulp_log2(f, e, mpfr_min_prec(x) == 1));
}

double cic_format_ulp(const cic_format *f, double x)
{
    int e;
    double m;
    CIC_ASSERT(isfinite(x));
    if (x == 0.0)
        return ldexp(1.0, f->emin - f->precision + 1);
    m = frexp(x, &e); /* |m| in [1/2, 1), exact for subnormal doubles too */
    return ldexp(1.0, (int)_cic_format_ulp_log2(f, (long)e - 1, fabs(m) == 0.5));
}

int64_t cic_format_ordered(const cic_format *f, double v)
{
    /* Count the values of f from +0: the subnormals k 2^(emin - p + 1),
     * k < 2^(p-1), then each binade E >= emin holds 2^(p-1) values
     * (1 + j 2^(1-p)) 2^E. So |v| in binade E has the code
     * (E - emin + 1) 2^(p-1) + j, and Inf the code after the largest
     * finite value (a format with reserved top codes has no infinities).
     * Exact in int64 for p <= 53 and |E| < 2^10. */
    double a = fabs(v);
    int64_t half = (int64_t)1 << (f->precision - 1), code;
    int e;
    CIC_ASSERT(!isnan(v));
    if (isinf(a)) {
        code = (int64_t)(f->emax - f->emin + 2) * half - f->top_reserved;
    } else if (a < ldexp(1.0, f->emin)) {
        code = (int64_t)ldexp(a, f->precision - 1 - f->emin);
    } else {
        double m = frexp(a, &e); /* a = m 2^e, m in [1/2, 1): E = e - 1 */
        code = (int64_t)(e - 1 - f->emin + 1) * half + ((int64_t)ldexp(m, f->precision) - half);
    }
    return signbit(v) ? -code : code;
}

uint64_t cic_format_distance(const cic_format *f, double a, double b)
{
    int64_t d;
    if (isnan(a) || isnan(b))
        return UINT64_MAX;
    d = cic_format_ordered(f, a) - cic_format_ordered(f, b);
    return d < 0 ? (uint64_t)(-d) : (uint64_t)d;
}
