/* SPDX-License-Identifier: MIT */
/* qfile.c: a rotation read from a file (q = "file:PATH", the loader's
 * src/case/load_qfile.c): the tensor as exact doubles rounded once to the
 * transform's precision, its size against the model and its orthogonality
 * against CIC_Q_FILE_ORTH_MAX.
 *
 * The orthogonality figure max |Q^T Q - I| is exact (cic_q_orth_error's
 * correctly rounded dot products) but those cost d^3 / 2 MPFR products:
 * minutes at d = 2048, most of an hour at 4096. So Q^T Q is first formed
 * in double (dsyrk, a second at 4096) with a proven bound on every entry's
 * error; that encloses the figure, and MPFR computes only the entries that
 * can still be the largest (a handful for a float32 or bf16 rotation,
 * whose errors stand far above the double's). */
#include "qmat.h"

#include "../base/base.h"
#include "../base/mpvec.h"
#include "../base/safetensors_read.h"

#include <cblas.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

/* The n x n tensor of the file as doubles into *v (malloc'd), or -1 with d
 * set (the file, a tensor of another size, memory). */
static int read_q(double **v, int n, const char *order, const cic_xform_spec *x, cic_diag *d)
{
    cic_stfile *f = cic_stfile_create(x->q_file, d);
    const cic_stfile_tensor *t = f ? cic_stfile_find(f, x->q_tensor) : NULL;
    size_t nn = (size_t)n * n;
    int rc = -1;
    *v = NULL;
    if (!f)
        return -1;
    if (!t || t->ndim != 2 || t->shape[0] != n || t->shape[1] != n) {
        cic_diag_set(d, x->q_file, 0, 0, "tensor '%s' is not a %d x %d matrix (transform '%s' "
                     "needs the order %s)", x->q_tensor, n, n, x->name, order);
        goto done;
    }
    if (!(*v = malloc(nn * sizeof **v))) {
        cic_diag_set(d, NULL, 0, 0, "out of memory");
        goto done;
    }
    if (cic_stfile_tensor_read_f64(*v, t, 0, nn, d) < 0)
        goto done;
    rc = 0;
done:
    if (rc < 0) {
        free(*v);
        *v = NULL;
    }
    cic_stfile_destroy(f);
    return rc;
}

int cic_q_file(mpfr_t *q, int n, const char *order, const cic_xform_spec *x, mpfr_prec_t prec,
               cic_diag *d)
{
    double *v;
    size_t k;
    (void)prec;
    if (read_q(&v, n, order, x, d) < 0)
        return -1;
    for (k = 0; k < (size_t)n * n; k++)
        mpfr_set_d(q[k], v[k], MPFR_RNDN); /* exact at 53 bits and more */
    free(v);
    return 0;
}

/* ---- max |Q^T Q - I| from doubles ------------------------------------- */

/* The old way, every entry in MPFR: for Q with a NaN or an Inf, whose
 * double products prove nothing. */
static int orth_all_mpfr(cic_q_orth *r, const double *q, int d)
{
    size_t dd = (size_t)d * d, i;
    mpfr_t *m = cic_mpvec_create(dd, 64);
    if (!m)
        return -1;
    for (i = 0; i < dd; i++)
        mpfr_set_d(m[i], q[i], MPFR_RNDN); /* exact */
    r->value = cic_q_orth_error((const mpfr_t *)m, d, 64);
    r->exact = true;
    r->mpfr_entries = (size_t)d * ((size_t)d + 1) / 2;
    cic_mpvec_destroy(m, dd);
    return 0;
}

/* Whether every partial sum of every column product of q is exact in
 * double, whatever the order: the entries are multiples of 2^L (L the
 * lowest set bit over them) and d max|q|^2 < 2^(53 + 2L), so each partial
 * sum is an integer times 2^(2L) below 2^53 of those units (a Hadamard
 * matrix over a power of two, a permutation: dsyrk is then exact). */
static bool products_exact(const double *q, int d)
{
    size_t dd = (size_t)d * d, i;
    int lmin = INT32_MAX;
    double amax = 0;
    for (i = 0; i < dd; i++) {
        int e;
        double f = frexp(fabs(q[i]), &e);
        uint64_t m = (uint64_t)ldexp(f, 53); /* exact: f has 53 bits */
        if (m == 0)
            continue;
        amax = fmax(amax, fabs(q[i]));
        e -= 53;
        while (!(m & 1)) {
            m >>= 1;
            e++;
        }
        lmin = e < lmin ? e : lmin;
    }
    if (amax == 0)
        return true;
    if (2 * lmin < -1074) /* a product would fall below the subnormals */
        return false;
    return (double)d * amax * amax < ldexp(1.0, 53 + 2 * lmin) * (1 - 0x1p-50);
}

/* Entry (i, j) of Q^T Q in MPFR, as cic_q_orth_error forms it (exact
 * products, one rounding to 128 bits, minus delta_ij), |.| rounded up to a
 * double. ci holds column i at 64 bits; cj gets column j. */
static double entry_mpfr(const mpfr_t *ci, mpfr_t *cj, const double *q, int d, int i, int j,
                         mpfr_srcptr minus_one, cic_dot_scratch *s, mpfr_ptr e)
{
    int k;
    for (k = 0; k < d; k++)
        mpfr_set_d(cj[k], q[(size_t)k * d + j], MPFR_RNDN); /* exact */
    cic_mp_dot(e, ci, 1, (const mpfr_t *)cj, 1, (size_t)d, i == j ? minus_one : NULL, s);
    mpfr_abs(e, e, MPFR_RNDN);
    return mpfr_get_d(e, MPFR_RNDU);
}

/* The largest MPFR entry over those whose upper bound hi reaches lo_max
 * (the true largest is among them: every other one is below it). */
static int orth_candidates(cic_q_orth *r, const double *q, const double *hi, double lo_max,
                           int d)
{
    mpfr_t *ci = cic_mpvec_create((size_t)d, 64), *cj = cic_mpvec_create((size_t)d, 64);
    mpfr_t e, minus_one;
    cic_dot_scratch s;
    int i, j, k, rc = -1;
    double worst = 0;
    if (!ci || !cj || cic_dot_scratch_init(&s, (size_t)d, 64) < 0)
        goto done;
    mpfr_init2(e, 128);
    mpfr_init2(minus_one, 2);
    mpfr_set_si(minus_one, -1, MPFR_RNDN);
    for (i = 0; i < d; i++) {
        bool loaded = false;
        for (j = i; j < d; j++) {
            if (!(hi[(size_t)i * d + j] >= lo_max))
                continue;
            if (!loaded)
                for (k = 0; k < d; k++)
                    mpfr_set_d(ci[k], q[(size_t)k * d + i], MPFR_RNDN);
            loaded = true;
            worst = fmax(worst, entry_mpfr((const mpfr_t *)ci, cj, q, d, i, j, minus_one, &s,
                                           e));
            r->mpfr_entries++;
        }
    }
    r->value = worst;
    r->exact = true;
    mpfr_clear(e);
    mpfr_clear(minus_one);
    cic_dot_scratch_clear(&s);
    rc = 0;
done:
    cic_mpvec_destroy(ci, (size_t)d);
    cic_mpvec_destroy(cj, (size_t)d);
    return rc;
}

/* Inflate / deflate a double computed with a few roundings (each <= 2^-53
 * relative) so that it bounds the exact quantity from above / below. */
#define UP(x) ((x) * (1 + 0x1p-48) + 0x1p-1070)
#define DOWN(x) ((x) * (1 - 0x1p-48) - 0x1p-1070)

int cic_q_orth_check(cic_q_orth *r, const double *q, int d, double limit, size_t budget)
{
    /* C = fl(Q^T Q) in any order of summation, with or without FMA, has
     * |C_ij - S_ij| <= g (|Q|^T |Q|)_ij + d 2^-1074 (the products' underflow)
     * with g = d u / (1 - d u), u = 2^-53, and (|Q|^T |Q|)_ij <=
     * sqrt(S_ii S_jj) (Cauchy-Schwarz), S_ii <= C_ii / (1 - g). */
    size_t dd = (size_t)d * d, i, j, cand = 0;
    double *c = NULL, g, *nrm = NULL, lo_max = 0, hi_max = 0, nmax = 0, under = d * 0x1p-1074;
    bool exact, identity = true;
    int rc = -1;
    CIC_ASSERT(d >= 1 && cic_mul_size((size_t)d, (size_t)d) != SIZE_MAX);
    r->value = NAN;
    r->exact = false;
    r->lo = 0;
    r->hi = INFINITY;
    r->mpfr_entries = 0;
    for (i = 0; i < dd; i++)
        if (!isfinite(q[i]))
            return orth_all_mpfr(r, q, d);
    if (!(c = malloc(dd * sizeof *c)) || !(nrm = malloc((size_t)d * sizeof *nrm)))
        goto done;
    cblas_dsyrk(CblasRowMajor, CblasUpper, CblasTrans, d, d, 1.0, q, d, 0.0, c, d);
    exact = products_exact(q, d);
    g = exact ? 0 : UP(d * 0x1p-53 / (1 - d * 0x1p-53));
    for (i = 0; i < (size_t)d; i++) {
        nrm[i] = UP(sqrt(UP(c[i * d + i] / (1 - g))));
        nmax = fmax(nmax, nrm[i]);
    }
    if (!isfinite(UP(nmax * nmax))) /* overflow: prove it the old way */
        goto all;
    for (i = 0; i < (size_t)d; i++)
        for (j = i; j < (size_t)d; j++) {
            double a = fabs(c[i * d + j] - (i == j)), e = exact ? 0 : g * nrm[i] * nrm[j] + under;
            double lo = DOWN(DOWN(a) - UP(e));
            identity = identity && a == 0;
            c[i * d + j] = UP(a + UP(e)); /* the entry's upper bound, in place */
            lo_max = fmax(lo_max, lo);
            hi_max = fmax(hi_max, c[i * d + j]);
            if (!isfinite(c[i * d + j]))
                goto all;
        }
    r->lo = lo_max;
    r->hi = hi_max;
    if (exact && identity) { /* Q^T Q = I exactly: C = S, and C - I is exactly 0 */
        r->value = 0;
        r->exact = true;
        rc = 0;
        goto done;
    }
    for (i = 0; i < (size_t)d; i++)
        for (j = i; j < (size_t)d; j++)
            cand += c[i * d + j] >= lo_max;
    /* the exact figure is rounded to 128 bits, then up to a double, and
     * compared with limit: the enclosure decides that comparison only with
     * a margin above those roundings */
    if (cand <= budget / (size_t)d || !(UP(hi_max) <= limit || DOWN(lo_max) > limit)) {
        rc = orth_candidates(r, q, c, lo_max, d);
        goto done;
    }
    /* decided by the enclosure, and the exact figure would cost more than
     * the budget: the bound on the side of the decision */
    r->value = UP(hi_max) <= limit ? hi_max : lo_max;
    rc = 0;
    goto done;
all:
    rc = orth_all_mpfr(r, q, d);
done:
    free(c);
    free(nrm);
    return rc;
}

int cic_q_file_check(double *orth, const cic_xform_spec *x, int n, const char *order,
                     cic_diag *d)
{
    cic_q_orth r;
    double *v;
    if (read_q(&v, n, order, x, d) < 0)
        return -1;
    if (cic_q_orth_check(&r, v, n, CIC_Q_FILE_ORTH_MAX, CIC_Q_ORTH_BUDGET) < 0) {
        free(v);
        cic_diag_set(d, NULL, 0, 0, "out of memory");
        return -1;
    }
    free(v);
    *orth = r.value;
    return 0;
}
