/* SPDX-License-Identifier: MIT */
/* metric.c: the error of a float32 output y against its MPFR truth x, the
 * relative difference of two vectors, and the drift between two float runs
 * (DESIGN.md section 5). Workload: one call per block output, up to ~10^6
 * entries at 128-bit truth, so the loop keeps a fixed set of MPFR temporaries
 * (no mpfr_init per element) and costs a handful of MPFR operations per entry.
 *
 * How the metric avoids adding error of its own:
 *   - |y - x| is rounded ONCE, to odd, at p = max(prec, 24) + 64 bits.
 *     Round-to-odd at p bits followed by round-to-nearest at q <= p - 2 bits
 *     equals a direct round-to-nearest at q bits, so mpfr_get_d of it is the
 *     correctly rounded double of the exact |y - x| (subnormal doubles
 *     included: they just have a smaller q). Round-to-odd is monotone, so the
 *     largest rounded difference is the rounding of the largest exact one, and
 *     max_abs is the correctly rounded double of the true max |y - x|. (A
 *     plain RNDN at p bits would double-round when it lands on a 53-bit
 *     midpoint.)
 *   - ULP ratios divide that correctly rounded double by an exact power of
 *     two, which is exact in double, so d <= ulp/2 exactly gives ratio <= 0.5
 *     exactly: a correctly rounded y scores <= 0.5 with no fuzz.
 *   - Sums of squares add exact squares (2p-bit temporaries) into a p-bit
 *     accumulator: relative error <= n * 2^-p, far below the double result.
 *
 * NaN/Inf in y are counted first (before any norm). A non-finite y has no
 * finite error, so it never leaves a figure looking better than it is:
 * max_abs and rel_norm2 become +Inf (NaN when a y is NaN), and in the ulp_row
 * and ulp_elem distributions each such entry counts as an error of +Inf (so
 * their max and mean are +Inf, and p99 is +Inf once more than 1 % of the
 * entries are non-finite). A gate on any of them then fails. The row scale
 * (max |x| of the row) is a property of the truth alone and uses all entries
 * of the row, so a NaN in y does not change how the other entries of its row
 * are scored. */
#include "metric.h"

#include "../base/base.h"

#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <string.h>

/* ---- small helpers ---- */

/* d = |a - b| rounded to odd at d's precision. */
static void _cic_absdiff_odd(mpfr_ptr d, mpfr_srcptr a, mpfr_srcptr b)
{
    int inex = mpfr_sub(d, a, b, MPFR_RNDZ);
    mpfr_abs(d, d, MPFR_RNDN); /* exact; RNDZ is symmetric in sign */
    /* Inexact and last significand bit 0 (fewer than prec significant bits):
     * step away from zero to the odd neighbour. No carry can occur, and the
     * exact value lies strictly between the two neighbours. */
    if (inex != 0 && mpfr_min_prec(d) < mpfr_get_prec(d))
        mpfr_nextabove(d);
}

/* Running max, Neumaier-compensated sum and (optionally) the values, for a
 * cic_stat3. The values are non-negative. */
typedef struct {
    double max, sum, comp;
    size_t n;
    double *v; /* NULL: p99 unavailable (out of memory) */
} _cic_acc;

static void _cic_acc_add(_cic_acc *a, double r)
{
    double t = a->sum + r;
    if (r > a->max)
        a->max = r;
    if (isinf(t)) {
        a->sum = t; /* compensation would turn Inf - Inf into NaN */
    } else {
        if (fabs(a->sum) >= fabs(r))
            a->comp += (a->sum - t) + r;
        else
            a->comp += (r - t) + a->sum;
        a->sum = t;
    }
    if (a->v)
        a->v[a->n] = r;
    a->n++;
}

/* Total order with NaN last, so selection is well defined on any input. */
static int _cic_lt(double a, double b)
{
    if (isnan(b))
        return !isnan(a);
    return a < b; /* false when a is NaN */
}

static int _cic_cmp_double(const void *pa, const void *pb)
{
    double a = *(const double *)pa, b = *(const double *)pb;
    return _cic_lt(b, a) - _cic_lt(a, b);
}

static void _cic_swap(double *v, ptrdiff_t a, ptrdiff_t b)
{
    double t = v[a];
    v[a] = v[b];
    v[b] = t;
}

/* The k-th smallest (0-based) of v[0..n), permuting v: Hoare quickselect,
 * O(n) on average, which matters at 10^6 entries (a full sort was a third
 * of cic_metric_error). Duplicates (many exact zeros) split evenly under
 * Hoare's scheme; an iteration budget falls back to qsort on the remaining
 * range, so adversarial orders cost at most O(n log n). */
static double _cic_select(double *v, size_t n, size_t k)
{
    ptrdiff_t lo = 0, hi = (ptrdiff_t)n - 1, kk = (ptrdiff_t)k;
    int budget = 16;
    size_t m;
    for (m = n; m > 1; m >>= 1)
        budget += 2;
    while (hi > lo) {
        ptrdiff_t i = lo - 1, j = hi + 1, mid = lo + (hi - lo) / 2;
        double piv;
        if (budget-- == 0) {
            qsort(v + lo, (size_t)(hi - lo + 1), sizeof *v, _cic_cmp_double);
            break;
        }
        /* median of three, left in v[mid] */
        if (_cic_lt(v[mid], v[lo]))
            _cic_swap(v, mid, lo);
        if (_cic_lt(v[hi], v[lo]))
            _cic_swap(v, hi, lo);
        if (_cic_lt(v[hi], v[mid]))
            _cic_swap(v, hi, mid);
        piv = v[mid];
        for (;;) {
            do
                i++;
            while (_cic_lt(v[i], piv));
            do
                j--;
            while (_cic_lt(piv, v[j]));
            if (i >= j)
                break;
            _cic_swap(v, i, j);
        }
        /* now v[lo..j] <= piv <= v[j+1..hi], lo <= j < hi */
        if (kk <= j)
            hi = j;
        else
            lo = j + 1;
    }
    return v[k];
}

/* Nearest rank on v (permuted in place): the ceil(p/100 * n)-th smallest,
 * rank clamped to [1, n]. p * n is formed before dividing by 100 so that
 * integer ranks are exact (7 * 100 / 100 = 7, whereas 7 / 100.0 * 100 is
 * 7.000000000000001 and would take rank 8). */
static double _cic_percentile_inplace(double *v, size_t n, double p)
{
    double r;
    size_t k;
    if (n == 0)
        return 0.0;
    r = ceil(p * (double)n / 100.0);
    if (!(r >= 1.0))
        k = 1; /* also catches a NaN p */
    else if (r >= (double)n)
        k = n;
    else
        k = (size_t)r;
    return _cic_select(v, n, k - 1);
}

static void _cic_acc_stat(cic_stat3 *s, _cic_acc *a)
{
    s->max = a->max;
    if (a->n == 0) {
        s->p99 = s->mean = 0.0;
        return;
    }
    s->mean = isinf(a->sum) ? a->sum : (a->sum + a->comp) / (double)a->n;
    s->p99 = a->v ? _cic_percentile_inplace(a->v, a->n, 99.0) : NAN;
}

static mpfr_prec_t _cic_work_prec(mpfr_prec_t prec)
{
    CIC_ASSERT(prec >= MPFR_PREC_MIN && prec <= MPFR_PREC_MAX / 4 - 64);
    return (prec > 24 ? prec : 24) + 64;
}

/* sqrt(sd / sx) as a double with the conventions of the header:
 * 0 when sd is 0 (including 0/0), +Inf when only sx is 0. */
static double _cic_norm_ratio(mpfr_ptr sd, mpfr_ptr sx)
{
    double r;
    if (mpfr_zero_p(sd))
        return 0.0;
    if (mpfr_zero_p(sx))
        return INFINITY;
    mpfr_div(sd, sd, sx, MPFR_RNDN);
    mpfr_sqrt(sd, sd, MPFR_RNDN);
    r = mpfr_get_d(sd, MPFR_RNDN);
    return r;
}

/* ---- error against the truth ---- */

void cic_metric_error(cic_metrics *m, const cic_format *fmt, const mpfr_t *x,
                      const float *y, size_t rows, size_t cols, mpfr_prec_t prec)
{
    size_t n, i, r, c;
    bool has_nan = false;
    mpfr_prec_t p = _cic_work_prec(prec), px = 24;
    mpfr_t yv, d, sq, sd, sx, thr, mx;
    _cic_acc arow, aelem;
    uint64_t excluded = 0;

    CIC_ASSERT(m != NULL);
    n = cic_mul_size(rows, cols);
    CIC_ASSERT(n != SIZE_MAX);
    CIC_ASSERT(n == 0 || (x != NULL && y != NULL));

    /* NaN/Inf agreement first, before any norm; the truth must be finite. */
    m->n_out = n;
    m->nonfinite = 0;
    m->first_nonfinite = -1;
    for (i = 0; i < n; i++) {
        CIC_ASSERT(mpfr_number_p(x[i]));
        if (mpfr_get_prec(x[i]) > px)
            px = mpfr_get_prec(x[i]);
        if (!isfinite(y[i])) {
            if (m->nonfinite == 0)
                m->first_nonfinite = (int64_t)i;
            m->nonfinite++;
            has_nan = has_nan || isnan(y[i]);
        }
    }

    memset(&arow, 0, sizeof arow);
    memset(&aelem, 0, sizeof aelem);
    /* Without memory only the p99 figures are lost (reported as NaN). */
    arow.v = cic_calloc(n ? n : 1, sizeof(double));
    aelem.v = cic_calloc(n ? n : 1, sizeof(double));

    mpfr_init2(yv, 24); /* any float, subnormals included, is exact here */
    mpfr_init2(d, p);
    mpfr_init2(mx, p);
    mpfr_init2(sq, 2 * (p > px ? p : px)); /* squares of d and of x exact */
    mpfr_init2(sd, p);
    mpfr_init2(sx, p);
    mpfr_init2(thr, px);
    mpfr_set_zero(mx, 1);
    mpfr_set_zero(sd, 1);
    mpfr_set_zero(sx, 1);

    for (r = 0; r < rows; r++) {
        const mpfr_t *xr = x + r * cols;
        const float *yr = y + r * cols;
        size_t jmax = 0;
        double urow;
        if (cols == 0)
            break;
        for (c = 1; c < cols; c++)
            if (mpfr_cmpabs(xr[c], xr[jmax]) > 0)
                jmax = c;
        /* Rows are tokens: one ulp for the whole row, that of its largest
         * entry, so cancellation inside the row cannot inflate the ratio. */
        urow = cic_format_ulp_mp(fmt, xr[jmax]);
        mpfr_abs(thr, xr[jmax], MPFR_RNDN);
        mpfr_div_2ui(thr, thr, 10, MPFR_RNDN); /* exact: 2^-10 * row max */

        for (c = 0; c < cols; c++) {
            double dd;
            if (!isfinite(yr[c])) {
                /* no finite error: +Inf in both distributions (never
                 * excluded, however small x is) */
                _cic_acc_add(&arow, INFINITY);
                _cic_acc_add(&aelem, INFINITY);
                continue;
            }
            mpfr_sqr(sq, xr[c], MPFR_RNDN);
            mpfr_add(sx, sx, sq, MPFR_RNDN);

            mpfr_set_flt(yv, yr[c], MPFR_RNDN);
            _cic_absdiff_odd(d, yv, xr[c]);
            if (mpfr_cmp(d, mx) > 0)
                mpfr_set(mx, d, MPFR_RNDN); /* same precision: exact */
            mpfr_sqr(sq, d, MPFR_RNDN);
            mpfr_add(sd, sd, sq, MPFR_RNDN);

            /* Correctly rounded |y - x| (see the top of the file); dividing
             * by a power of two is then exact. */
            dd = mpfr_get_d(d, MPFR_RNDN);
            _cic_acc_add(&arow, dd / urow);
            if (mpfr_cmpabs(xr[c], thr) >= 0)
                _cic_acc_add(&aelem, dd / cic_format_ulp_mp(fmt, xr[c]));
            else
                excluded++;
        }
    }

    m->max_abs = mpfr_get_d(mx, MPFR_RNDN);
    m->rel_norm2 = _cic_norm_ratio(sd, sx);
    if (m->nonfinite > 0) {
        m->max_abs = has_nan ? NAN : INFINITY;
        m->rel_norm2 = m->max_abs;
    }
    m->ulp_elem_excluded = excluded;
    _cic_acc_stat(&m->ulp_row, &arow);
    _cic_acc_stat(&m->ulp_elem, &aelem);
    /* the whole distribution of ulp_row, for CDF plots */
    if (arow.v && arow.n > 0) {
        int q;
        qsort(arow.v, arow.n, sizeof *arow.v, _cic_cmp_double);
        for (q = 0; q < CIC_NQ; q++) {
            double r = ceil((double)q * (double)arow.n / 100.0);
            size_t k = r < 1.0 ? 1 : (r >= (double)arow.n ? arow.n : (size_t)r);
            m->ulp_row_q[q] = arow.v[k - 1];
        }
    }

    mpfr_clear(yv);
    mpfr_clear(d);
    mpfr_clear(mx);
    mpfr_clear(sq);
    mpfr_clear(sd);
    mpfr_clear(sx);
    mpfr_clear(thr);
    free(arow.v);
    free(aelem.v);
}

/* ---- relative difference ---- */

/* ||a - b||_2 / ||b||_2 with a given either as floats (af) or as MPFR (am).
 * A NaN in a gives NaN, an Inf (and no NaN) +Inf: checked before any norm. */
static double _cic_rel_diff(const float *af, const mpfr_t *am,
                            const mpfr_t *b, size_t n, mpfr_prec_t prec)
{
    size_t i;
    mpfr_prec_t p = _cic_work_prec(prec), pb = 24;
    mpfr_t av, d, sq, sd, sx;
    int has_inf = 0;
    double r;

    CIC_ASSERT(n == 0 || ((af != NULL || am != NULL) && b != NULL));
    for (i = 0; i < n; i++) {
        if (!mpfr_number_p(b[i]))
            return NAN; /* no reference to be relative to (an overflowed run) */
        if (mpfr_get_prec(b[i]) > pb)
            pb = mpfr_get_prec(b[i]);
        if (af ? isnan(af[i]) : mpfr_nan_p(am[i]))
            return NAN;
        if (af ? isinf(af[i]) : mpfr_inf_p(am[i]))
            has_inf = 1;
    }
    if (has_inf)
        return INFINITY;

    mpfr_init2(av, 24);
    mpfr_init2(d, p);
    mpfr_init2(sq, 2 * (p > pb ? p : pb));
    mpfr_init2(sd, p);
    mpfr_init2(sx, p);
    mpfr_set_zero(sd, 1);
    mpfr_set_zero(sx, 1);
    for (i = 0; i < n; i++) {
        if (af) {
            mpfr_set_flt(av, af[i], MPFR_RNDN); /* exact */
            mpfr_sub(d, av, b[i], MPFR_RNDN);
        } else {
            mpfr_sub(d, am[i], b[i], MPFR_RNDN);
        }
        mpfr_sqr(sq, d, MPFR_RNDN);
        mpfr_add(sd, sd, sq, MPFR_RNDN);
        mpfr_sqr(sq, b[i], MPFR_RNDN);
        mpfr_add(sx, sx, sq, MPFR_RNDN);
    }
    r = _cic_norm_ratio(sd, sx);
    mpfr_clear(av);
    mpfr_clear(d);
    mpfr_clear(sq);
    mpfr_clear(sd);
    mpfr_clear(sx);
    return r;
}

double cic_metric_rel_diff(const mpfr_t *a, const mpfr_t *b, size_t n,
                           mpfr_prec_t prec)
{
    CIC_ASSERT(n == 0 || a != NULL);
    return _cic_rel_diff(NULL, a, b, n, prec);
}

double cic_metric_rel_diff_f32(const float *a, const mpfr_t *b, size_t n,
                               mpfr_prec_t prec)
{
    CIC_ASSERT(n == 0 || a != NULL);
    return _cic_rel_diff(a, NULL, b, n, prec);
}

/* ---- drift between two float runs ---- */

void cic_metric_drift(cic_stat3 *d, const cic_format *fmt, const float *before,
                      const float *after, size_t n)
{
    size_t i;
    _cic_acc a;
    CIC_ASSERT(d != NULL);
    CIC_ASSERT(n == 0 || (before != NULL && after != NULL));
    memset(&a, 0, sizeof a);
    a.v = cic_calloc(n ? n : 1, sizeof(double));
    for (i = 0; i < n; i++) {
        uint64_t u = cic_format_distance(fmt, before[i], after[i]);
        /* NaN on either side has no distance: +Inf, so a drift gate fails */
        _cic_acc_add(&a, u == UINT64_MAX ? INFINITY : (double)u); /* exact: u < 2^33 */
    }
    _cic_acc_stat(d, &a);
    free(a.v);
}

void cic_metric_drift_hist(uint64_t hist[CIC_DRIFT_BINS], const cic_format *fmt,
                           const float *before, const float *after, size_t n)
{
    size_t i;
    memset(hist, 0, CIC_DRIFT_BINS * sizeof *hist);
    for (i = 0; i < n; i++) {
        uint64_t u = cic_format_distance(fmt, before[i], after[i]);
        int b = 0;
        if (u == UINT64_MAX)
            continue;
        while (u) {
            b++;
            u >>= 1;
        }
        hist[b < CIC_DRIFT_BINS ? b : CIC_DRIFT_BINS - 1]++;
    }
}

/* ---- percentile ---- */

double cic_percentile(const double *v, size_t n, double p)
{
    double *s, r;
    if (n == 0)
        return 0.0;
    CIC_ASSERT(v != NULL);
    s = cic_calloc(n, sizeof *s);
    if (!s)
        return NAN;
    memcpy(s, v, n * sizeof *s); /* n * sizeof checked by cic_calloc */
    r = _cic_percentile_inplace(s, n, p);
    free(s);
    return r;
}
