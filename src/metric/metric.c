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
#include <stdlib.h>
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

/* The running sums of one error measurement: the largest |y - x|, the
 * sums of squares of the differences and of the truth, the two ULP
 * distributions, and the temporaries (a fixed set: no mpfr_init per
 * element). */
typedef struct {
    const cic_format *fmt;
    mpfr_t yv, d, sq, sd, sx, thr, mx;
    _cic_acc arow, aelem;
    uint64_t excluded;
} _cic_err;

static void _cic_err_init(_cic_err *e, const cic_format *fmt, size_t n, mpfr_prec_t p,
                          mpfr_prec_t px)
{
    memset(e, 0, sizeof *e);
    e->fmt = fmt;
    /* Without memory only the p99 figures are lost (reported as NaN). */
    e->arow.v = cic_calloc(n ? n : 1, sizeof(double));
    e->aelem.v = cic_calloc(n ? n : 1, sizeof(double));
    mpfr_init2(e->yv, 24); /* any float, subnormals included, is exact here */
    mpfr_init2(e->d, p);
    mpfr_init2(e->mx, p);
    mpfr_init2(e->sq, 2 * (p > px ? p : px)); /* squares of d and of x exact */
    mpfr_init2(e->sd, p);
    mpfr_init2(e->sx, p);
    mpfr_init2(e->thr, px);
    mpfr_set_zero(e->mx, 1);
    mpfr_set_zero(e->sd, 1);
    mpfr_set_zero(e->sx, 1);
}

static void _cic_err_clear(_cic_err *e)
{
    mpfr_clear(e->yv);
    mpfr_clear(e->d);
    mpfr_clear(e->mx);
    mpfr_clear(e->sq);
    mpfr_clear(e->sd);
    mpfr_clear(e->sx);
    mpfr_clear(e->thr);
    free(e->arow.v);
    free(e->aelem.v);
}

/* One row (a token) of cols entries. */
static void _cic_err_row(_cic_err *e, const mpfr_t *xr, const float *yr, size_t cols)
{
    size_t jmax = 0, c;
    double urow;
    for (c = 1; c < cols; c++)
        if (mpfr_cmpabs(xr[c], xr[jmax]) > 0)
            jmax = c;
    /* Rows are tokens: one ulp for the whole row, that of its largest
     * entry, so cancellation inside the row cannot inflate the ratio. */
    urow = cic_format_ulp_mp(e->fmt, xr[jmax]);
    mpfr_abs(e->thr, xr[jmax], MPFR_RNDN);
    mpfr_div_2ui(e->thr, e->thr, 10, MPFR_RNDN); /* exact: 2^-10 * row max */
    for (c = 0; c < cols; c++) {
        double dd;
        if (!isfinite(yr[c])) {
            /* no finite error: +Inf in both distributions (never
             * excluded, however small x is) */
            _cic_acc_add(&e->arow, INFINITY);
            _cic_acc_add(&e->aelem, INFINITY);
            continue;
        }
        mpfr_sqr(e->sq, xr[c], MPFR_RNDN);
        mpfr_add(e->sx, e->sx, e->sq, MPFR_RNDN);
        mpfr_set_flt(e->yv, yr[c], MPFR_RNDN);
        _cic_absdiff_odd(e->d, e->yv, xr[c]);
        if (mpfr_cmp(e->d, e->mx) > 0)
            mpfr_set(e->mx, e->d, MPFR_RNDN); /* same precision: exact */
        mpfr_sqr(e->sq, e->d, MPFR_RNDN);
        mpfr_add(e->sd, e->sd, e->sq, MPFR_RNDN);
        /* Correctly rounded |y - x| (see the top of the file); dividing
         * by a power of two is then exact. */
        dd = mpfr_get_d(e->d, MPFR_RNDN);
        _cic_acc_add(&e->arow, dd / urow);
        if (mpfr_cmpabs(xr[c], e->thr) >= 0)
            _cic_acc_add(&e->aelem, dd / cic_format_ulp_mp(e->fmt, xr[c]));
        else
            e->excluded++;
    }
}

/* NaN/Inf in y counted first, before any norm; the truth must be finite.
 * Returns whether a y is NaN; *px the truth's largest precision. */
static bool _cic_err_nonfinite(cic_metrics *m, const mpfr_t *x, const float *y, size_t n,
                               mpfr_prec_t *px)
{
    size_t i;
    bool has_nan = false;
    m->n_out = n;
    m->nonfinite = 0;
    m->first_nonfinite = -1;
    for (i = 0; i < n; i++) {
        CIC_ASSERT(mpfr_number_p(x[i]));
        if (mpfr_get_prec(x[i]) > *px)
            *px = mpfr_get_prec(x[i]);
        if (!isfinite(y[i])) {
            if (m->nonfinite == 0)
                m->first_nonfinite = (int64_t)i;
            m->nonfinite++;
            has_nan = has_nan || isnan(y[i]);
        }
    }
    return has_nan;
}

void cic_metric_error(cic_metrics *m, const cic_format *fmt, const mpfr_t *x,
                      const float *y, size_t rows, size_t cols, mpfr_prec_t prec)
{
    size_t n, r;
    bool has_nan;
    mpfr_prec_t px = 24;
    _cic_err e;

    CIC_ASSERT(m != NULL);
    n = cic_mul_size(rows, cols);
    CIC_ASSERT(n != SIZE_MAX);
    CIC_ASSERT(n == 0 || (x != NULL && y != NULL));
    has_nan = _cic_err_nonfinite(m, x, y, n, &px);
    _cic_err_init(&e, fmt, n, _cic_work_prec(prec), px);
    for (r = 0; r < rows && cols > 0; r++)
        _cic_err_row(&e, x + r * cols, y + r * cols, cols);

    m->max_abs = mpfr_get_d(e.mx, MPFR_RNDN);
    m->rel_norm2 = _cic_norm_ratio(e.sd, e.sx);
    if (m->nonfinite > 0) {
        m->max_abs = has_nan ? NAN : INFINITY;
        m->rel_norm2 = m->max_abs;
    }
    m->ulp_elem_excluded = e.excluded;
    _cic_acc_stat(&m->ulp_row, &e.arow);
    _cic_acc_stat(&m->ulp_elem, &e.aelem);
    /* the whole distribution of ulp_row, for CDF plots */
    if (e.arow.v && e.arow.n > 0) {
        int q;
        qsort(e.arow.v, e.arow.n, sizeof *e.arow.v, _cic_cmp_double);
        for (q = 0; q < CIC_NQ; q++) {
            double rk = ceil((double)q * (double)e.arow.n / 100.0);
            size_t k = rk < 1.0 ? 1 : (rk >= (double)e.arow.n ? e.arow.n : (size_t)rk);
            m->ulp_row_q[q] = e.arow.v[k - 1];
        }
    }
    _cic_err_clear(&e);
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

/* ---- one block's output (the per-block errors) ---- */

/* Row r of the block: its errors in the row's ULPs into a, the sums of
 * squares and the largest error into b; *sd, *sx the sums of squares. */
static void block_row(cic_block_metrics *b, _cic_acc *a, const cic_format *fmt, const double *x,
                      const double *y, double rad, size_t cols, double *sd, double *sx,
                      bool *nan)
{
    double xm = 0, u;
    size_t c;
    for (c = 0; c < cols; c++)
        xm = fabs(x[c]) > xm ? fabs(x[c]) : xm;
    u = cic_format_ulp(fmt, xm);
    if (rad / u > b->rad_ulp)
        b->rad_ulp = rad / u;
    for (c = 0; c < cols; c++) {
        double d;
        if (!isfinite(y[c])) {
            b->nonfinite++;
            *nan = *nan || isnan(y[c]);
            _cic_acc_add(a, INFINITY);
            continue;
        }
        d = fabs(y[c] - x[c]);
        *sd += d * d;
        *sx += x[c] * x[c];
        b->max_abs = d > b->max_abs ? d : b->max_abs;
        _cic_acc_add(a, d / u);
    }
}

int cic_metric_block(cic_block_metrics *b, const cic_format *fmt, const double *x,
                     const double *rad_row, const double *y, size_t rows, size_t cols)
{
    size_t n = cic_mul_size(rows, cols), r;
    double sd = 0, sx = 0, srad = 0;
    bool nan = false;
    _cic_acc a;
    CIC_ASSERT(n != SIZE_MAX);
    memset(b, 0, sizeof *b);
    memset(&a, 0, sizeof a);
    if (!(a.v = malloc((n ? n : 1) * sizeof *a.v)))
        return -1;
    for (r = 0; r < rows; r++) {
        double rad = rad_row ? rad_row[r] : 0;
        b->rad_abs = rad > b->rad_abs ? rad : b->rad_abs;
        srad += (double)cols * rad * rad;
        block_row(b, &a, fmt, x + r * cols, y + r * cols, rad, cols, &sd, &sx, &nan);
    }
    b->ulp_p99 = _cic_percentile_inplace(a.v, a.n, 99.0);
    free(a.v);
    b->rel_norm2 = sd == 0 ? 0 : sx == 0 ? INFINITY : sqrt(sd / sx);
    b->rad_rel = srad == 0 ? 0 : sx == 0 ? INFINITY : sqrt(srad / sx);
    if (b->nonfinite > 0)
        b->max_abs = b->rel_norm2 = nan ? NAN : INFINITY;
    return 0;
}
