/* SPDX-License-Identifier: MIT */
/* format.h: number formats, one descriptor each in one table (format.c):
 * what a value is rounded to when it is stored, and the unit its errors are
 * measured in. Weights are rounded to their storage format, metrics count
 * ULPs and ordered-integer distances in the format the engine computed in;
 * nothing else assumes float32.
 *
 * A binary floating-point format is its significand precision p (bits,
 * with the hidden one), the exponent range [emin, emax] of its normal
 * numbers (2^emin is the smallest normal, every finite value is below
 * 2^(emax + 1)), whether it has subnormals (gradual underflow below 2^emin,
 * evenly spaced at 2^(emin - p + 1)) and infinities (else overflow
 * saturates to the largest finite value), how many of the top binade's last
 * significands are not finite values (OCP FP8 E4M3: the all-ones pattern is
 * NaN, so its largest finite value is 448, not 480), and its rounding (to
 * nearest, ties to even). Adding a format is a line in the enum below and an entry in
 * format.c. */
#ifndef CIC_FORMAT_H
#define CIC_FORMAT_H

#include <mpfr.h>
#include <stdbool.h>
#include <stdint.h>

enum cic_format_id {
    CIC_FORMAT_FLOAT32,
    CIC_FORMAT_FLOAT64,
    CIC_FORMAT_BF16,
    CIC_FORMAT_FP16,
    CIC_FORMAT_FP8_E4M3,
    CIC_FORMAT_FP8_E5M2,
    CIC_FORMAT_FP4_E2M1,
    CIC_FORMAT_COUNT
};

enum cic_rounding { CIC_ROUND_NEAREST_EVEN };

typedef struct {
    const char *name;      /* as in case files and reports: "float32" */
    int bits;              /* storage width */
    int precision;         /* p: significand bits, the hidden one included */
    int emin, emax;        /* normal numbers: 2^emin <= |x| < 2^(emax + 1) */
    bool subnormals;       /* gradual underflow below 2^emin */
    bool infinities;       /* overflow to Inf (else to the largest finite) */
    enum cic_rounding rnd;
    int top_reserved;      /* codes missing at the top of binade emax (a
                            * format without infinities only) */
} cic_format;

extern const cic_format CIC_FORMATS[];

/* The descriptor of id, or of a name (NULL when there is none). */
const cic_format *cic_format_get(enum cic_format_id id);
const cic_format *cic_format_find(const char *name);

/* f's largest finite value, (2^p - 1 - top_reserved) 2^(emax - p + 1):
 * 448 for fp8-e4m3, 57344 for fp8-e5m2, 6 for fp4-e2m1 (an exact double). */
double cic_format_max(const cic_format *f);

/* y = x rounded once to f (its precision, exponent range and subnormals;
 * y's precision must be at least f->precision). NaN stays NaN, a signed
 * zero keeps its sign; overflow gives Inf or the largest finite value, as
 * f says. Returns the ternary value of the rounding. MPFR's exponent range
 * is restored on return. */
int cic_format_round(mpfr_ptr y, mpfr_srcptr x, const cic_format *f);

/* x rounded once to f, as cic_format_round does, for a double x (every
 * value of a format up to float64 is a double). */
double cic_format_round_d(const cic_format *f, double x);

/* x rounded once to f, as cic_format_round_d(f, x) gives it for every
 * float x (bit for bit, NaN aside: x itself is returned), in integer and
 * float32 arithmetic without MPFR, for the inner loops of the low-precision
 * engines (a few ns a value). Requires f->precision <= 24 and f's exponent
 * range inside float32's (every format but float64; float32 gives x).
 * Ties to even, f's subnormals, overflow to Inf or saturation to the
 * largest finite value as f says; a signed zero keeps its sign, an
 * infinite x stays infinite (in every format). */
float cic_format_round_f(const cic_format *f, float x);

/* x rounded once to f, as cic_format_round_d(f, x) gives it for every
 * double x (NaN aside: a NaN is returned), without MPFR, for formats of at
 * most 22 bits that cic_format_round_f takes (cic_format_round_df_ok): x
 * is rounded to float32 to odd (toward zero, the last bit set when
 * inexact), which cic_format_round_f then rounds to nearest; with float32's
 * grid at least 2 bits finer than f's at every magnitude, the two
 * roundings are one (docs/design.md, "Number formats"). */
bool cic_format_round_df_ok(const cic_format *f);
float cic_format_round_df(const cic_format *f, double x);

/* The unit in the last place of f at an exact finite value x:
 * 2^(max(E, emin) - p + 1) with E = floor(log2 |x|); at an exact power of
 * two the gap below (the finer binade), so |round(x) - x| <= ulp(x) / 2
 * always holds; at 0 the smallest spacing 2^(emin - p + 1). An exact
 * double (f's ULPs are powers of two inside double's range). */
double cic_format_ulp_mp(const cic_format *f, mpfr_srcptr x);
double cic_format_ulp(const cic_format *f, double x);

/* The ordered integer of a value v of f (exactly representable in it):
 * consecutive values of f differ by 1, +0 and -0 are both 0, an infinity is
 * the code after the largest finite value; NaN has none (callers check). */
int64_t cic_format_ordered(const cic_format *f, double v);

/* |ordered(a) - ordered(b)|, UINT64_MAX when either is NaN. */
uint64_t cic_format_distance(const cic_format *f, double a, double b);

#endif
