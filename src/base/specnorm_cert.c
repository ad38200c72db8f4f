/* SPDX-License-Identifier: MIT */
/* specnorm_cert.c: a proven upper bound of the largest eigenvalue of an
 * exactly symmetric matrix T by a shifted Cholesky factorisation
 * (specnorm_int.h). A Lanczos run estimates lambda_max; alpha a little
 * above it is certified when the floating-point Cholesky factorisation of
 * B = fl(alpha I - T) runs to completion: then lambda_max(T) <= alpha +
 * (2 n + 4) 2^-51 tr(B) + 2^-52 max B_ii + 2 TINY, whatever order
 * OpenBLAS's dpotrf sums in (docs/design.md, "Spectral norm bounds", step
 * 3, derives it). The estimate only chooses the shift: a poor one costs a
 * second try or the squarings, never a wrong bound. One factorisation of
 * n^3 / 3 multiply-adds replaces the squarings' m n^3, and the bound is
 * within about 2^-7 of lambda_max instead of n^(1/16). */
#include "specnorm_int.h"

#include "par.h"

#include <cblas.h>
#include <limits.h>
#include <string.h>

/* LAPACK's Cholesky factorisation, in OpenBLAS (its own C interface: no
 * hidden length argument). */
extern void dpotrf_(const char *uplo, const int *n, double *a, const int *lda, int *info);

#define LZ_STEPS 24          /* Lanczos steps: the estimate within about 1e-3 */
#define CERT_MARGIN 0x1p-7   /* the first shift: the estimate times 1 + 2^-7 */
#define CERT_TRIES 3         /* each further try: the margin times 4 */
#define PIVOT_MIN 0x1p-500   /* a smaller computed pivot: not certified */
#define MV_PAR ((size_t)1 << 18) /* products by T split over threads from n^2 = */

/* ---- the estimate ---- */

typedef struct {
    const double *T, *v;
    double *y;
    size_t n;
} mv_job;

/* y = T v over rows [lo, hi): each y_i whole on one thread in a fixed
 * order, so the estimate has the same bits for any thread count. */
static void mv_range(void *ctx, size_t lo, size_t hi, int t)
{
    const mv_job *J = ctx;
    size_t i, j, n = J->n;
    (void)t;
    for (i = lo; i < hi; i++) {
        const double *r = J->T + i * n;
        double s0 = 0, s1 = 0, s2 = 0, s3 = 0;
        for (j = 0; j + 4 <= n; j += 4) {
            s0 += r[j] * J->v[j];
            s1 += r[j + 1] * J->v[j + 1];
            s2 += r[j + 2] * J->v[j + 2];
            s3 += r[j + 3] * J->v[j + 3];
        }
        for (; j < n; j++)
            s0 += r[j] * J->v[j];
        J->y[i] = (s0 + s1) + (s2 + s3);
    }
}

static double dot(const double *a, const double *b, size_t n)
{
    double s = 0;
    size_t i;
    for (i = 0; i < n; i++)
        s += a[i] * b[i];
    return s;
}

/* The number of eigenvalues of the m x m tridiagonal (al, be) below x
 * (Sturm's count by the LDL^T pivots). */
static int below(const double *al, const double *be, int m, double x)
{
    double q = al[0] - x;
    int c = q < 0, i;
    for (i = 1; i < m; i++) {
        if (q == 0)
            q = 0x1p-1000;
        q = al[i] - x - be[i - 1] * be[i - 1] / q;
        c += q < 0;
    }
    return c;
}

/* Its largest eigenvalue, by bisection inside Gershgorin's interval. */
static double tri_top(const double *al, const double *be, int m)
{
    double lo = al[0], hi = al[0];
    int i, it;
    for (i = 0; i < m; i++) {
        double r = (i ? fabs(be[i - 1]) : 0) + (i + 1 < m ? fabs(be[i]) : 0);
        lo = fmin(lo, al[i] - r);
        hi = fmax(hi, al[i] + r);
    }
    for (it = 0; it < 100 && lo < hi; it++) {
        double mid = lo + (hi - lo) / 2;
        if (mid <= lo || mid >= hi)
            break;
        if (below(al, be, m, mid) == m)
            hi = mid;
        else
            lo = mid;
    }
    return hi;
}

/* An estimate of lambda_max(T) (Lanczos with full reorthogonalisation
 * from a fixed start), or NaN out of memory. */
static double lanczos_top(const double *T, size_t n)
{
    int m = n < LZ_STEPS ? (int)n : LZ_STEPS, j, q, nt = openblas_get_num_threads();
    double al[LZ_STEPS] = {0}, be[LZ_STEPS] = {0}, *V = cic_calloc(cic_mul_size((size_t)m + 1, n), sizeof *V);
    double *w = cic_calloc(n, sizeof *w), nv;
    size_t i;
    mv_job J = {.T = T, .n = n, .y = w};
    if (!V || !w) {
        free(V);
        free(w);
        return NAN;
    }
    for (i = 0; i < n; i++)
        V[i] = 1 + (double)((i * 40503u) % 257) / 257;
    nv = sqrt(dot(V, V, n));
    for (i = 0; i < n; i++)
        V[i] /= nv;
    for (j = 0; j < m; j++) {
        double *v = V + (size_t)j * n;
        J.v = v;
        /* a thread costs tens of microseconds: below MV_PAR, one */
        cic_par_ranges(n, nt < 1 || n * n < MV_PAR ? 1 : nt, mv_range, &J);
        al[j] = dot(v, w, n);
        for (i = 0; i < n; i++)
            w[i] -= al[j] * v[i] + (j ? be[j - 1] * (v - n)[i] : 0);
        for (q = 0; q <= j; q++) { /* full reorthogonalisation */
            const double *u = V + (size_t)q * n;
            double c = dot(u, w, n);
            for (i = 0; i < n; i++)
                w[i] -= c * u[i];
        }
        be[j] = sqrt(dot(w, w, n));
        if (j + 1 == m || !(be[j] > 1e-12 * fabs(al[j]))) {
            m = j + 1;
            break;
        }
        for (i = 0; i < n; i++)
            v[n + i] = w[i] / be[j];
    }
    free(V);
    free(w);
    return tri_top(al, be, m);
}

/* ---- the certificate ---- */

void _cic_sn_cert_at(double *lam, const double *T, size_t n, double alpha, double *B)
{
    double tr = 0, mx = 0, g;
    size_t i, j;
    int N = (int)n, info = 0;
    *lam = INFINITY;
    if (!(alpha > 0) || !isfinite(alpha) || n > DIM_MAX || n > (size_t)INT_MAX)
        return;
    for (i = 0; i < n; i++)
        for (j = 0; j < n; j++)
            B[i * n + j] = i == j ? alpha - T[i * n + j] : -T[i * n + j];
    for (i = 0; i < n; i++) {
        double b = B[i * n + i];
        if (!(b > 0) || !isfinite(b))
            return;
        tr += b;
        mx = fmax(mx, b);
    }
    /* row-major B read as column-major is B^T = B: its upper triangle */
    dpotrf_("U", &N, B, &N, &info);
    if (info != 0)
        return;
    for (j = 0; j < n; j++) {
        if (!(B[j * n + j] >= PIVOT_MIN) || !isfinite(B[j * n + j]))
            return;
        for (i = 0; i < j; i++) /* column j of R above its pivot */
            if (!isfinite(B[j * n + i]))
                return;
    }
    /* gamma_{2n+4} / (1 - gamma_{2n+4}) <= (2 n + 4) 2^-51 (n <= 2^30) */
    g = (double)(2 * n + 4) * 0x1p-51;
    *lam = up(up(up(alpha + up(g * grow(tr, n))) + up(0x1p-52 * mx)) + 2 * TINY);
}

/* x rounded up to 20 significant bits: a shift that is exact in double and
 * rarely moves with the estimate's last bits. */
static double shift_of(double x)
{
    int e;
    double f = frexp(x, &e);
    return ldexp(ceil(ldexp(f, 20)), e - 20);
}

int _cic_sn_lmax_cert(double *lam, const double *T, size_t n)
{
    double est = lanczos_top(T, n), dmax = 0, *B;
    size_t i;
    int k;
    *lam = INFINITY;
    if (isnan(est))
        return -1;
    for (i = 0; i < n; i++) /* lambda_max >= every diagonal entry */
        dmax = fmax(dmax, T[i * n + i]);
    est = fmax(est, dmax);
    if (!(est > 0) || !isfinite(est))
        return 0;
    if (!(B = cic_calloc(cic_mul_size(n, n), sizeof *B)))
        return -1;
    for (k = 0; k < CERT_TRIES && *lam == INFINITY; k++)
        _cic_sn_cert_at(lam, T, n, shift_of(est * (1 + ldexp(CERT_MARGIN, 2 * k))), B);
    free(B);
    return 0;
}
