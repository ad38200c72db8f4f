/* SPDX-License-Identifier: MIT */
/* test_format.c: the number formats (src/base/format.c). For float32 every
 * function is checked against an independent reference: the rounding
 * against mpfr_get_flt (MPFR's own correctly rounded conversion, subnormals
 * included) on random values over the whole exponent range and on hand
 * cases (ties to even, the largest finite, overflow, below the smallest
 * subnormal, signed zero, NaN); the ordered integer against the float's
 * bits; the ULP against the spacing of neighbouring floats. A planted fault
 * (the wrong precision) shows the rounding check can fail. The small
 * formats are checked against their bit-level specifications, and the fast
 * float32 rounding cic_format_round_f against cic_format_round_d, bit for
 * bit, on a sweep of every exponent and on random float bit patterns. */
#include "testutil.h"

#include "base/format.h"
#include "base/rng.h"

#include <float.h>
#include <string.h>

#define F32 cic_format_get(CIC_FORMAT_FLOAT32)

static float round_f32(const cic_format *f, double x)
{
    mpfr_t a, y;
    float r;
    mpfr_init2(a, 64);
    mpfr_init2(y, 64);
    mpfr_set_d(a, x, MPFR_RNDN);
    cic_format_round(y, a, f);
    r = mpfr_get_flt(y, MPFR_RNDN); /* exact: y is a float32 value */
    mpfr_clear(a);
    mpfr_clear(y);
    return r;
}

static void test_table(void **state)
{
    (void)state;
    assert_ptr_equal(cic_format_find("float32"), F32);
    assert_null(cic_format_find("float31"));
    assert_null(cic_format_find(NULL));
    assert_int_equal(F32->precision, 24);
    assert_int_equal(F32->emin, -126);
    assert_int_equal(F32->emax, 127);
    assert_int_equal(F32->bits, 32);
    assert_true(cic_format_max(F32) == FLT_MAX);
    assert_true(cic_format_max(cic_format_get(CIC_FORMAT_FLOAT64)) == DBL_MAX);
    /* every id has its descriptor (designated initializers leave no hole),
     * found again by its name */
    for (int i = 0; i < CIC_FORMAT_COUNT; i++) {
        const cic_format *f = cic_format_get((enum cic_format_id)i);
        assert_non_null(f->name);
        assert_true(f->bits > 0 && f->precision > 0);
        assert_ptr_equal(cic_format_find(f->name), f);
    }
    assert_string_equal(cic_format_get(CIC_FORMAT_FP8_E4M3)->name, "fp8-e4m3");
}

static void test_round_hand(void **state)
{
    const float tiny = 0x1p-149f;
    (void)state;
    /* ties to even: 1 + 2^-24 is halfway between 1 and 1 + 2^-23 */
    assert_true(round_f32(F32, 1.0 + 0x1p-24) == 1.0f);
    assert_true(round_f32(F32, 1.0 + 3 * 0x1p-24) == 1.0f + 0x1p-22f);
    assert_true(round_f32(F32, 1.0 + 0x1p-24 + 0x1p-40) == 1.0f + 0x1p-23f);
    /* the largest finite and overflow (Inf, as binary32 says) */
    assert_true(round_f32(F32, (double)FLT_MAX) == FLT_MAX);
    assert_true(isinf(round_f32(F32, (double)FLT_MAX * (1 + 0x1p-24))));
    assert_true(round_f32(F32, (double)FLT_MAX * (1 + 0x1p-25)) == FLT_MAX);
    assert_true(round_f32(F32, -1e300) == -INFINITY);
    /* subnormals: the smallest, half of it (ties to even: 0), just above */
    assert_true(round_f32(F32, 0x1p-149) == tiny);
    assert_true(cic_test_f32_bits(round_f32(F32, 0x1p-150)) == 0);
    assert_true(round_f32(F32, 0x1p-150 * (1 + 0x1p-30)) == tiny);
    assert_true(cic_test_f32_bits(round_f32(F32, -0x1p-151)) == 0x80000000u); /* -0 */
    assert_true(round_f32(F32, 3 * 0x1p-150) == 2 * tiny);        /* tie: even */
    assert_true(round_f32(F32, 0x1p-126 - 0x1p-160) == 0x1p-126f);
    /* signed zero and NaN */
    assert_true(cic_test_f32_bits(round_f32(F32, -0.0)) == 0x80000000u);
    assert_true(isnan(round_f32(F32, NAN)));
}

/* Random doubles whose exponent covers float32's range and beyond. */
static double draw(uint64_t key, uint64_t i)
{
    double u = cic_rng_uniform(key, 2 * i), v = cic_rng_uniform(key, 2 * i + 1);
    int e = (int)(v * 330.0) - 165; /* 2^-165 .. 2^165 */
    double x = ldexp(1.0 + u, e);
    return (cic_rng_u64(key, 3 * i) & 1) ? -x : x;
}

static void test_round_vs_mpfr(void **state)
{
    uint64_t key = cic_rng_key(20261201, "format.round"), i, n = 200000;
    mpfr_t a, y;
    long bad = 0;
    (void)state;
    mpfr_init2(a, 64);
    mpfr_init2(y, 24);
    for (i = 0; i < n * (uint64_t)cic_test_multiplier(); i++) {
        double x = draw(key, i);
        float want, got;
        mpfr_set_d(a, x, MPFR_RNDN);
        want = mpfr_get_flt(a, MPFR_RNDN);
        cic_format_round(y, a, F32);
        got = mpfr_get_flt(y, MPFR_RNDN);
        if (cic_test_f32_bits(want) != cic_test_f32_bits(got) && bad++ < 3)
            print_message("x = %a: format %a, mpfr_get_flt %a\n", x, (double)got, (double)want);
    }
    mpfr_clear(a);
    mpfr_clear(y);
    if (bad)
        fail_msg("%ld of %llu roundings differ from mpfr_get_flt", bad, (unsigned long long)n);

    /* planted fault: a format one bit short rounds differently somewhere */
    {
        cic_format f = *F32;
        mpfr_t z;
        long diff = 0;
        f.precision = 23;
        mpfr_init2(a, 64);
        mpfr_init2(z, 24);
        for (i = 0; i < 1000; i++) {
            mpfr_set_d(a, draw(key, i), MPFR_RNDN);
            cic_format_round(z, a, &f);
            diff += mpfr_get_flt(z, MPFR_RNDN) != mpfr_get_flt(a, MPFR_RNDN);
        }
        mpfr_clear(a);
        mpfr_clear(z);
        assert_true(diff > 100);
    }
}

static void test_ordered_and_ulp(void **state)
{
    uint64_t key = cic_rng_key(7, "format.ordered"), i;
    (void)state;
    assert_int_equal(cic_format_ordered(F32, 0.0), 0);
    assert_int_equal(cic_format_ordered(F32, -0.0), 0);
    assert_int_equal(cic_format_ordered(F32, INFINITY), INT64_C(0x7f800000));
    assert_int_equal(cic_format_ordered(F32, -INFINITY), -INT64_C(0x7f800000));
    assert_true(cic_format_distance(F32, NAN, 1.0) == UINT64_MAX);
    assert_true(cic_format_distance(F32, FLT_MAX, INFINITY) == 1);
    for (i = 0; i < 100000; i++) {
        uint32_t u = (uint32_t)cic_rng_u64(key, i) & 0x7fffffffu;
        float f;
        double ulp, next;
        memcpy(&f, &u, sizeof f);
        if (!isfinite(f))
            continue;
        /* the ordered integer is the float's magnitude bits, negated below 0 */
        if (cic_format_ordered(F32, f) != (int64_t)u || cic_format_ordered(F32, -f) != -(int64_t)u)
            fail_msg("ordered(%a) = %lld, bits 0x%08x", (double)f,
                     (long long)cic_format_ordered(F32, f), u);
        /* the ULP is the gap to the next float up, except at a power of two
         * (the gap below), and 2^-149 at 0 */
        if (f == 0)
            continue;
        next = (double)nextafterf(f, INFINITY) - (double)f;
        ulp = cic_format_ulp(F32, f);
        if (frexpf(f, &(int){0}) == 0.5f && f > FLT_MIN)
            next = (double)f - (double)nextafterf(f, 0.0f);
        if (isfinite(next) && ulp != next)
            fail_msg("ulp(%a) = %a, spacing %a", (double)f, ulp, next);
    }
    assert_true(cic_format_ulp(F32, 0.0) == 0x1p-149);
}

/* float64, from its descriptor alone: the rounding against mpfr_get_d, the
 * ordered integer against the double's bits, the ULP against the spacing. */
static void test_float64(void **state)
{
    const cic_format *f = cic_format_find("float64");
    uint64_t key = cic_rng_key(11, "format.f64"), i;
    mpfr_t a, y;
    (void)state;
    assert_non_null(f);
    assert_ptr_equal(f, cic_format_get(CIC_FORMAT_FLOAT64));
    mpfr_init2(a, 128);
    mpfr_init2(y, 53);
    for (i = 0; i < 20000; i++) {
        /* 2^-1100 .. 2^1100 with 70-bit significands: subnormals, overflow */
        double u = cic_rng_uniform(key, 3 * i), v = cic_rng_uniform(key, 3 * i + 1);
        double want, got;
        uint64_t bu;
        mpfr_set_d(a, 1.0 + u, MPFR_RNDN);
        mpfr_add_d(a, a, ldexp(cic_rng_uniform(key, 3 * i + 2), -60), MPFR_RNDN);
        mpfr_mul_2si(a, a, (long)(v * 2200.0) - 1100, MPFR_RNDN);
        want = mpfr_get_d(a, MPFR_RNDN);
        cic_format_round(y, a, f);
        got = mpfr_get_d(y, MPFR_RNDN);
        if (memcmp(&want, &got, sizeof want) != 0)
            fail_msg("float64 rounding: %a vs mpfr_get_d %a", got, want);
        if (!isfinite(got) || got == 0)
            continue;
        memcpy(&bu, &got, sizeof bu);
        assert_true(cic_format_ordered(f, got) == (int64_t)bu);
        if (frexp(got, &(int){0}) != 0.5 && isfinite(nextafter(got, INFINITY)))
            assert_true(cic_format_ulp(f, got) == nextafter(got, INFINITY) - got);
    }
    mpfr_clear(a);
    mpfr_clear(y);
    assert_true(cic_format_ulp(f, 1.0) == 0x1p-53); /* the gap below 1 */
    assert_true(cic_format_ulp(f, 0.0) == 0x1p-1074);
    assert_true(cic_format_ordered(f, INFINITY) == INT64_C(0x7ff0000000000000));
}

/* ---- the 16- and 8-bit formats against their bit-level specifications ----
 * Each format's positive finite values are decoded from every bit pattern
 * as the specification defines them (sign, exponent field, significand
 * field, bias; IEEE specials for bf16, fp16 and E5M2; for OCP E4M3 only the
 * all-ones pattern is special, NaN, and there is no infinity). The
 * reference rounding picks the nearest decoded value, ties to the even
 * pattern, overflow to Inf for formats with infinities (when x is at or
 * beyond half-way to 2^(emax + 1)), to the largest finite value otherwise
 * (saturation). */
enum special { IEEE, TOP_NAN, NONE };

typedef struct {
    const char *name;
    int ebits, mbits, bias;
    enum special sp; /* IEEE: all-ones exponent = Inf/NaN; TOP_NAN (E4M3):
                      * only S.1111.111 is NaN; NONE (E2M1): every pattern
                      * is a finite value */
} spec;

static const spec SPECS[] = {
    {"bf16", 8, 7, 127, IEEE},
    {"fp16", 5, 10, 15, IEEE},
    {"fp8-e4m3", 4, 3, 7, TOP_NAN},
    {"fp8-e5m2", 5, 2, 15, IEEE},
    {"fp4-e2m1", 2, 1, 1, NONE},
};

/* The positive finite values in pattern order (ascending); returns n. */
static int decode_all(const spec *sp, double *v, int cap)
{
    int e, m, n = 0, emax_field = (1 << sp->ebits) - 1, mmax = (1 << sp->mbits) - 1;
    for (e = 0; e <= emax_field; e++)
        for (m = 0; m <= mmax; m++) {
            if (sp->sp == IEEE && e == emax_field)
                return n;
            if (sp->sp == TOP_NAN && e == emax_field && m == mmax)
                return n;
            assert_true(n < cap);
            v[n++] = e == 0 ? ldexp(m, 1 - sp->bias - sp->mbits)
                            : ldexp(1.0 + ldexp(m, -sp->mbits), e - sp->bias);
        }
    return n;
}

/* The reference rounding of x to the decoded values v[0 .. n-1]. */
static double ref_round(const spec *sp, const double *v, int n, double x)
{
    double a = fabs(x), r;
    int lo = 0, hi = n - 1;
    if (a >= v[n - 1]) {
        double next = 2 * ldexp(1.0, (int)floor(log2(v[n - 1]))); /* 2^(emax + 1) */
        if (sp->sp != IEEE || a - v[n - 1] < next - a)
            r = v[n - 1];
        else
            r = INFINITY; /* at or beyond half-way: ties go to the even 2^(emax+1) */
        return copysign(r, x);
    }
    while (hi - lo > 1) { /* v[lo] <= a < v[hi] */
        int mid = (lo + hi) / 2;
        if (v[mid] <= a)
            lo = mid;
        else
            hi = mid;
    }
    if (a - v[lo] < v[hi] - a)
        r = v[lo];
    else if (a - v[lo] > v[hi] - a)
        r = v[hi];
    else
        r = lo % 2 == 0 ? v[lo] : v[hi];
    return copysign(r, x);
}

static double round_d(const cic_format *f, double x)
{
    mpfr_t a, y;
    double r;
    mpfr_init2(a, 64);
    mpfr_init2(y, 64);
    mpfr_set_d(a, x, MPFR_RNDN);
    cic_format_round(y, a, f);
    r = mpfr_get_d(y, MPFR_RNDN); /* exact */
    mpfr_clear(a);
    mpfr_clear(y);
    return r;
}

static void check_one(const cic_format *f, const spec *sp, const double *v, int n, double x)
{
    double got = round_d(f, x), want = ref_round(sp, v, n, x);
    if (!(got == want && signbit(got) == signbit(want)))
        fail_msg("%s: round(%a) = %a, the specification gives %a", sp->name, x, got, want);
}

static void test_small_formats(void **state)
{
    static double v[1 << 16];
    size_t k;
    (void)state;
    for (k = 0; k < sizeof SPECS / sizeof SPECS[0]; k++) {
        const spec *sp = &SPECS[k];
        const cic_format *f = cic_format_find(sp->name);
        int n, i, j;
        uint64_t s = 0x5eed0000u + k;
        assert_non_null(f);
        n = decode_all(sp, v, (int)(sizeof v / sizeof v[0]));
        /* the descriptor's fields against the decoded values */
        assert_int_equal(f->bits, 1 + sp->ebits + sp->mbits);
        assert_int_equal(f->precision, sp->mbits + 1);
        assert_true(v[1] == ldexp(1.0, f->emin - f->precision + 1));
        assert_true(v[n - 1] < ldexp(1.0, f->emax + 1) && v[n - 1] >= ldexp(1.0, f->emax));
        assert_int_equal(f->infinities, sp->sp == IEEE);
        assert_true(cic_format_max(f) == v[n - 1]);
        for (i = 0; i < n; i++) {
            /* every value is kept, its ordered integer is its pattern, its
             * ULP the gap to the next value */
            check_one(f, sp, v, n, v[i]);
            check_one(f, sp, v, n, -v[i]);
            assert_int_equal(cic_format_ordered(f, v[i]), i);
            assert_int_equal(cic_format_ordered(f, -v[i]), -i);
            if (i + 1 < n) {
                /* at a power of two the gap below, elsewhere the gap above */
                int m;
                bool pow2 = i > 0 && frexp(v[i], &m) == 0.5;
                double gap = pow2 ? v[i] - v[i - 1] : v[i + 1] - v[i];
                if (cic_format_ulp(f, v[i]) != gap)
                    fail_msg("%s: ulp(%a) = %a, the gap is %a", sp->name, v[i],
                             cic_format_ulp(f, v[i]), gap);
            }
            if (i + 1 < n) {
                /* the midpoint (ties to even) and its neighbours */
                double mid = (v[i] + v[i + 1]) / 2;
                check_one(f, sp, v, n, mid);
                check_one(f, sp, v, n, -mid);
                check_one(f, sp, v, n, nextafter(mid, 0));
                check_one(f, sp, v, n, nextafter(mid, INFINITY));
            }
        }
        if (f->infinities)
            assert_int_equal(cic_format_ordered(f, INFINITY), n);
        /* beyond the largest finite: half-way to 2^(emax+1), and far */
        for (j = 0; j < 4; j++) {
            double top = v[n - 1], next = ldexp(1.0, f->emax + 1), x = top + (next - top) * j / 2;
            check_one(f, sp, v, n, x);
            check_one(f, sp, v, n, nextafter(x, 0));
            check_one(f, sp, v, n, -x);
        }
        check_one(f, sp, v, n, 1e300);
        check_one(f, sp, v, n, -1e300);
        check_one(f, sp, v, n, 1e-300);
        check_one(f, sp, v, n, -1e-300);
        /* random values, log-uniform over the whole range and beyond */
        for (i = 0; i < 20000 * cic_test_multiplier(); i++) {
            double u = (double)(cic_test_rand(&s) >> 11) * 0x1p-53;
            double e = f->emin - f->precision - 2 + u * (f->emax - f->emin + f->precision + 5);
            double x = exp2(e) * (1 + (double)(cic_test_rand(&s) >> 11) * 0x1p-53);
            check_one(f, sp, v, n, (cic_test_rand(&s) & 1) ? -x : x);
        }
    }
}

/* A planted fault: E4M3 read as if it had IEEE specials (largest 240, Inf)
 * disagrees with the format, so the comparison above can fail. */
static void test_small_formats_fault(void **state)
{
    static double v[256];
    spec wrong = {"fp8-e4m3", 4, 3, 7, IEEE};
    const cic_format *f = cic_format_find("fp8-e4m3");
    int n = decode_all(&wrong, v, 256);
    (void)state;
    assert_true(v[n - 1] == 240);
    assert_true(round_d(f, 300.0) == 288.0);
    assert_true(isinf(ref_round(&wrong, v, n, 300.0)));
    assert_true(round_d(f, 240.0 + 8.0) == 256.0); /* 248: a tie, to the even 256 */
    assert_true(round_d(f, 1000.0) == 448.0);     /* saturates */
    assert_true(round_d(f, -1e9) == -448.0);
    assert_true(round_d(cic_format_find("fp8-e5m2"), 1e9) == INFINITY);
    assert_true(round_d(cic_format_find("fp4-e2m1"), 5.0) == 4.0); /* tie to even */
    assert_true(round_d(cic_format_find("fp4-e2m1"), 5.5) == 6.0);
    assert_true(round_d(cic_format_find("fp4-e2m1"), 100.0) == 6.0);
    assert_true(round_d(cic_format_find("fp4-e2m1"), 0.25) == 0.0);
    assert_true(round_d(cic_format_find("fp4-e2m1"), 0.26) == 0.5);
}

/* ---- cic_format_round_f: the float32 rounding against cic_format_round_d ----
 * The fast rounding must give the bits of the MPFR one for every float, so
 * it is compared on float bit patterns: a sweep of every exponent field
 * with both signs, whose significands concentrate where f rounds (the
 * bits below f's quantum at 0, 1, half the quantum and its float
 * neighbours, all ones), and random patterns from the project's RNG. */

/* The rounding of x both ways agrees (same bits; any NaN for a NaN). */
static bool same_f(const cic_format *fast, const cic_format *ref, float x, bool report)
{
    float got = cic_format_round_f(fast, x), want = (float)cic_format_round_d(ref, x);
    if (isnan(got) && isnan(want))
        return true;
    if (cic_test_f32_bits(got) == cic_test_f32_bits(want))
        return true;
    if (report)
        print_message("%s: round_f(%a) = %a, round_d gives %a (bits 0x%08x)\n", ref->name,
                      (double)x, (double)got, (double)want, cic_test_f32_bits(x));
    return false;
}

static float f32_of(uint32_t u)
{
    float x;
    memcpy(&x, &u, sizeof x);
    return x;
}

/* Float bits below f's quantum in the binade of exponent field b (b = 0:
 * float32's subnormals, below every emin): f's quantum is 2^(max(b - 127,
 * emin) - p + 1), a float's 2^(max(b, 1) - 150). */
static int dropped_bits(const cic_format *f, int b)
{
    int e = b - 127 > f->emin ? b - 127 : f->emin;
    return e - f->precision + 1 - ((b ? b : 1) - 150);
}

/* The significand fields tried in binade b (returns how many, <= cap).
 * Where the rounding is not constant (binades emin - p - 1, all of whose
 * values round to 0, to emax + 1, all of whose overflow: one each side of
 * the binades that matter), the kept bits (every pattern, or NH of them:
 * the 4 smallest, the 4 largest, random ones) times the dropped bits (every
 * pattern, or NL of them: 0, 1, 2, half - 1, half, half + 1 (the tie and
 * its float neighbours), all ones - 1, all ones, random ones). Elsewhere
 * NFLAT fields: 0 (a power of two; Inf at b = 255), all ones, random. */
enum { NH = 64, NL = 16, NFLAT = 64 };

static int sweep_fields(const cic_format *f, int b, uint64_t key, uint32_t *out, int cap)
{
    int d = dropped_bits(f, b), dd = d < 23 ? d : 23, c = 23 - dd, n = 0, i, j;
    uint32_t lowmask = ((uint32_t)1 << dd) - 1, half = dd ? (uint32_t)1 << (dd - 1) : 0;
    uint32_t hmax = ((uint32_t)1 << c) - 1;
    int nh = c <= 5 ? 1 << c : NH, nl = dd <= 4 ? 1 << dd : NL;
    uint64_t r = (uint64_t)b << 32;
    if (b - 127 < f->emin - f->precision - 1 || b - 127 > f->emax + 1) {
        for (i = 0; i < NFLAT && n < cap; i++)
            out[n++] = i == 0   ? 0
                       : i == 1 ? 0x7fffffu
                                : (uint32_t)cic_rng_u64(key, r + (uint64_t)i) & 0x7fffffu;
        return n;
    }
    for (i = 0; i < nh; i++) {
        /* the kept part: all of them, or the smallest 4, the largest 4
         * and random ones */
        uint32_t h = nh == (1 << c) ? (uint32_t)i
                     : i < 4       ? (uint32_t)i
                     : i < 8       ? hmax - (uint32_t)(i - 4)
                                   : (uint32_t)cic_rng_u64(key, r + 1000 + (uint64_t)i) & hmax;
        /* the dropped part: all of them when there are few, else the
         * boundaries and random ones */
        uint32_t lows[NL] = {0, 1, 2, half - 1, half, half + 1, lowmask - 1, lowmask};
        for (j = 8; j < NL; j++)
            lows[j] = (uint32_t)cic_rng_u64(key, r + 100000 + (uint64_t)(NL * i + j));
        for (j = 0; j < nl && n < cap; j++)
            out[n++] = (h << dd) | (nl == NL ? lows[j] & lowmask : (uint32_t)j);
    }
    return n;
}

/* Mismatches of round_f (fast) against round_d (ref) over the sweep;
 * the first few are printed when report. */
static long sweep_mismatches(const cic_format *fast, const cic_format *ref, bool report)
{
    static uint32_t fields[NH * NL];
    uint64_t key = cic_rng_key(20260407, "format.round_f.sweep");
    long bad = 0;
    int b, i, n, sg;
    for (b = 0; b < 256; b++) {
        n = sweep_fields(ref, b, key, fields, (int)(sizeof fields / sizeof fields[0]));
        for (sg = 0; sg < 2; sg++)
            for (i = 0; i < n; i++) {
                uint32_t u = ((uint32_t)sg << 31) | ((uint32_t)b << 23) | fields[i];
                if (!same_f(fast, ref, f32_of(u), report && bad < 5))
                    bad++;
            }
    }
    return bad;
}

static const enum cic_format_id SMALL[] = {CIC_FORMAT_FLOAT32, CIC_FORMAT_BF16, CIC_FORMAT_FP16,
                                           CIC_FORMAT_FP8_E4M3, CIC_FORMAT_FP8_E5M2,
                                           CIC_FORMAT_FP4_E2M1};

static void test_round_f_sweep(void **state)
{
    size_t k;
    (void)state;
    for (k = 0; k < sizeof SMALL / sizeof SMALL[0]; k++) {
        const cic_format *f = cic_format_get(SMALL[k]);
        long bad = sweep_mismatches(f, f, true);
        if (bad)
            fail_msg("%s: %ld values of the sweep round differently in round_f", f->name, bad);
    }
}

static void test_round_f_random(void **state)
{
    uint64_t key = cic_rng_key(20260407, "format.round_f.random");
    uint64_t i, n = 160000 * (uint64_t)cic_test_multiplier();
    size_t k;
    (void)state;
    for (k = 0; k < sizeof SMALL / sizeof SMALL[0]; k++) {
        const cic_format *f = cic_format_get(SMALL[k]);
        long bad = 0;
        for (i = 0; i < n; i++) {
            /* two float patterns from each 64 random bits */
            uint64_t r = cic_rng_u64(key, k * n + i);
            bad += !same_f(f, f, f32_of((uint32_t)r), bad < 5);
            bad += !same_f(f, f, f32_of((uint32_t)(r >> 32)), bad < 5);
        }
        if (bad)
            fail_msg("%s: %ld of %llu random floats round differently in round_f", f->name, bad,
                     (unsigned long long)(2 * n));
    }
}

/* Planted faults: the sweep finds the values where E4M3 and E5M2 differ,
 * and the one range (464, 480] where E4M3 without its reserved NaN code
 * (480 finite) would not saturate to 448. */
static void test_round_f_fault(void **state)
{
    cic_format no_nan = *cic_format_get(CIC_FORMAT_FP8_E4M3);
    (void)state;
    no_nan.top_reserved = 0;
    assert_true(sweep_mismatches(cic_format_get(CIC_FORMAT_FP8_E5M2),
                                 cic_format_get(CIC_FORMAT_FP8_E4M3), false) > 1000);
    assert_true(sweep_mismatches(&no_nan, cic_format_get(CIC_FORMAT_FP8_E4M3), false) > 0);
    assert_true(cic_format_round_f(&no_nan, 470.0f) == 480.0f);
}

/* ---- cic_format_round_df: doubles, through float32 rounded to odd ----
 * Every binade of double (subnormals to DBL_MAX), both signs: f's ties in
 * it exactly, their neighbours 1 and 2 double ulps away and 2^-30
 * relatively away (which a float cannot hold: a rounding to nearest float
 * first would make them ties), points on f's grid, random doubles; NaN,
 * the infinities, zeros, FLT_MAX's neighbourhood. */
static long df_mismatches(const cic_format *f, bool plain, bool report)
{
    uint64_t key = cic_rng_key(20261204, "format.round_df");
    long bad = 0;
    int E, i, sg, j;
    for (E = -1074; E <= 1023; E++) {
        int Q = (E > f->emin ? E : f->emin) - f->precision + 1, span = E - Q;
        double xs[40];
        int n = 0;
        for (i = 0; i < 4; i++) {
            uint64_t r = cic_rng_u64(key, (uint64_t)(E + 2000) * 64 + (uint64_t)i);
            /* a tie 2^(Q-1) (2m + 1) in binade E (or f's smallest ones below it) */
            double m = span >= 1 ? ldexp(1.0, span) + (double)(r % (uint64_t)ldexp(1.0, span))
                                 : 0.0;
            double tie = ldexp(2 * m + 1, Q - 1), on = ldexp(m, Q);
            xs[n++] = tie;
            xs[n++] = nextafter(tie, INFINITY);
            xs[n++] = nextafter(tie, 0);
            xs[n++] = nextafter(nextafter(tie, INFINITY), INFINITY);
            xs[n++] = nextafter(nextafter(tie, 0), 0);
            xs[n++] = tie * (1 + 0x1p-30);
            xs[n++] = tie * (1 - 0x1p-30);
            xs[n++] = on;
            xs[n++] = ldexp(1.0 + (double)(r >> 11) * 0x1p-53, E); /* random in binade E */
        }
        for (sg = 0; sg < 2; sg++)
            for (j = 0; j < n; j++) {
                double x = sg ? -xs[j] : xs[j];
                float got = plain ? cic_format_round_f(f, (float)x) : cic_format_round_df(f, x);
                float want = (float)cic_format_round_d(f, x);
                if (cic_test_f32_bits(got) == cic_test_f32_bits(want) ||
                    (isnan(got) && isnan(want)))
                    continue;
                if (report && bad < 5)
                    print_message("%s: round_df(%a) = %a, round_d gives %a\n", f->name, x,
                                  (double)got, (double)want);
                bad++;
            }
    }
    return bad;
}

static void test_round_df(void **state)
{
    const double hand[] = {0.0, -0.0, INFINITY, -INFINITY, NAN, DBL_MAX, -DBL_MAX, FLT_MAX,
                           nextafter(FLT_MAX, INFINITY), nextafter(FLT_MAX, 0), 0x1p128,
                           0x1p-149, 0x1p-150, 0x1.8p-150, 0x1p-1074, 1e-300, 3.0, 1 / 3.0};
    size_t k, i;
    (void)state;
    assert_false(cic_format_round_df_ok(cic_format_get(CIC_FORMAT_FLOAT32)));
    assert_false(cic_format_round_df_ok(cic_format_get(CIC_FORMAT_FLOAT64)));
    for (k = 1; k < sizeof SMALL / sizeof SMALL[0]; k++) {
        const cic_format *f = cic_format_get(SMALL[k]);
        long bad;
        assert_true(cic_format_round_df_ok(f));
        bad = df_mismatches(f, false, true);
        if (bad)
            fail_msg("%s: %ld doubles round differently in round_df", f->name, bad);
        for (i = 0; i < sizeof hand / sizeof hand[0]; i++) {
            float got = cic_format_round_df(f, hand[i]);
            float want = (float)cic_format_round_d(f, hand[i]);
            assert_true(cic_test_f32_bits(got) == cic_test_f32_bits(want) ||
                        (isnan(got) && isnan(want)));
        }
        /* the sweep has teeth: rounding to the nearest float first (two
         * roundings to nearest) misses ties and their neighbours */
        assert_true(df_mismatches(f, true, false) > 100);
    }
}

static void test_round_f_hand(void **state)
{
    const cic_format *bf16 = cic_format_get(CIC_FORMAT_BF16);
    const cic_format *e4m3 = cic_format_get(CIC_FORMAT_FP8_E4M3);
    const cic_format *e5m2 = cic_format_get(CIC_FORMAT_FP8_E5M2);
    const cic_format *fp4 = cic_format_get(CIC_FORMAT_FP4_E2M1);
    (void)state;
    /* bf16 ties to even: 1 + 2^-8 is halfway between 1 and 1 + 2^-7 */
    assert_true(cic_format_round_f(bf16, 1.0f + 0x1p-8f) == 1.0f);
    assert_true(cic_format_round_f(bf16, 1.0f + 3 * 0x1p-8f) == 1.0f + 0x1p-6f);
    /* E4M3: 464 is halfway between 448 and 480 (the NaN code): even 448;
     * 470 would round to 480 and saturates to 448, as 1e9 does */
    assert_true(cic_format_round_f(e4m3, 464.0f) == 448.0f);
    assert_true(cic_format_round_f(e4m3, 470.0f) == 448.0f);
    assert_true(cic_format_round_f(e4m3, 1e9f) == 448.0f);
    assert_true(cic_format_round_f(e4m3, -1e9f) == -448.0f);
    /* E4M3 subnormals: 2^-9 the smallest, 2^-10 a tie to 0, 1.5 2^-10 up */
    assert_true(cic_format_round_f(e4m3, 0x1p-9f) == 0x1p-9f);
    assert_true(cic_test_f32_bits(cic_format_round_f(e4m3, -0x1p-10f)) == 0x80000000u);
    assert_true(cic_format_round_f(e4m3, 0x1.8p-10f) == 0x1p-9f);
    assert_true(cic_format_round_f(e4m3, 3 * 0x1p-10f) == 0x1p-8f); /* 1.5 2^-9: even 2 */
    /* E5M2: 61440 is halfway between 57344 and 2^16: overflow, Inf */
    assert_true(cic_format_round_f(e5m2, 61440.0f) == INFINITY);
    assert_true(cic_format_round_f(e5m2, 61439.0f) == 57344.0f);
    /* E2M1: 5 ties to 4 (even), 7 to 6 (saturation beyond), 0.25 to 0 */
    assert_true(cic_format_round_f(fp4, 5.0f) == 4.0f);
    assert_true(cic_format_round_f(fp4, 7.0f) == 6.0f);
    assert_true(cic_format_round_f(fp4, -100.0f) == -6.0f);
    assert_true(cic_format_round_f(fp4, 0.25f) == 0.0f);
    /* specials: signed zero, NaN, and Inf stays Inf even without infinities */
    assert_true(cic_test_f32_bits(cic_format_round_f(e4m3, -0.0f)) == 0x80000000u);
    assert_true(isnan(cic_format_round_f(e4m3, NAN)));
    assert_true(cic_format_round_f(e4m3, -INFINITY) == -INFINITY);
    assert_true(cic_format_round_f(fp4, INFINITY) == INFINITY);
    /* float32 itself: x, the extremes included */
    assert_true(cic_format_round_f(F32, FLT_MAX) == FLT_MAX);
    assert_true(cic_format_round_f(F32, 0x1p-149f) == 0x1p-149f);
    assert_true(cic_format_round_f(bf16, FLT_MAX) == INFINITY); /* rounds up to 2^128 */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_table),
        cmocka_unit_test(test_round_hand),
        cmocka_unit_test(test_round_vs_mpfr),
        cmocka_unit_test(test_ordered_and_ulp),
        cmocka_unit_test(test_float64),
        cmocka_unit_test(test_small_formats),
        cmocka_unit_test(test_small_formats_fault),
        cmocka_unit_test(test_round_f_hand),
        cmocka_unit_test(test_round_df),
        cmocka_unit_test(test_round_f_sweep),
        cmocka_unit_test(test_round_f_random),
        cmocka_unit_test(test_round_f_fault),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
