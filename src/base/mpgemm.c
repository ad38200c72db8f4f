/* SPDX-License-Identifier: MIT */
/* mpgemm.c: MPFR matrix products through dgemm (mpgemm.h). */
#include "mpgemm.h"

#include "base.h"
#include "par.h"

#include <cblas.h>
#include <stdlib.h>

static double *to_double(const mpfr_t *v, size_t n)
{
    double *d = cic_calloc(n ? n : 1, sizeof *d);
    size_t i;
    if (!d)
        return NULL;
    for (i = 0; i < n; i++)
        d[i] = mpfr_get_d(v[i], MPFR_RNDN);
    return d;
}

void cic_gemm_f64(double *c, const double *a, bool ta, const double *b, bool tb, int m, int n,
                  int k)
{
    if (m > 0 && n > 0 && k > 0)
        cblas_dgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans,
                    m, n, k, 1.0, a, ta ? m : k, b, tb ? k : n, 0.0, c, n);
}

int cic_mp_gemm_f64(mpfr_t *c, const mpfr_t *a, bool ta, const mpfr_t *b, bool tb, int m, int n,
                    int k)
{
    size_t na = (size_t)m * k, nb = (size_t)k * n, nc = (size_t)m * n, i;
    double *da = to_double(a, na), *db = to_double(b, nb), *dc = cic_calloc(nc ? nc : 1, sizeof *dc);
    int rc = -1;
    if (!da || !db || !dc)
        goto cleanup;
    cic_gemm_f64(dc, da, ta, db, tb, m, n, k);
    for (i = 0; i < nc; i++)
        mpfr_set_d(c[i], dc[i], MPFR_RNDN);
    rc = 0;
cleanup:
    free(da);
    free(db);
    free(dc);
    return rc;
}

/* dst [r, k] := src (row-major [r, k], or [k, r] transposed when t), exact:
 * dst carries src's largest precision. */
static mpfr_t *contiguous(const mpfr_t *src, bool t, int r, int k)
{
    mpfr_prec_t pr = MPFR_PREC_MIN;
    size_t e, ne = (size_t)r * k;
    mpfr_t *d;
    int i, p;
    for (e = 0; e < ne; e++)
        if (mpfr_get_prec(src[e]) > pr)
            pr = mpfr_get_prec(src[e]);
    d = cic_mpvec_create(ne, pr);
    if (!d)
        return NULL;
    for (i = 0; i < r; i++)
        for (p = 0; p < k; p++)
            mpfr_set(d[(size_t)i * k + p], t ? src[(size_t)p * r + i] : src[(size_t)i * k + p],
                     MPFR_RNDN);
    return d;
}

typedef struct {
    mpfr_t *c;
    const mpfr_t *a, *w;
    const cic_mp_pack *wp;
    int n, k;
    mpfr_prec_t prec;
    int rc[CIC_PAR_MAX];
} mm_job;

/* Rows [lo, hi) of C (share t). */
static void mm_rows(void *p, size_t lo, size_t hi, int t)
{
    mm_job *j = p;
    cic_dot_scratch s;
    if (cic_dot_scratch_init(&s, (size_t)j->k, j->prec) < 0) {
        j->rc[t] = -1;
        return;
    }
    cic_mp_linear_rows(j->c + lo * (size_t)j->n, j->a + lo * (size_t)j->k, hi - lo, j->w, j->wp,
                       NULL, (size_t)j->n, (size_t)j->k, NULL, &s);
    cic_dot_scratch_clear(&s);
}

/* C = A' W'^T with A' = op(A) [m, k] and W' = op(B)^T [n, k] made contiguous,
 * W' packed once, the rows of C split over the threads: the linear layer's
 * kernel, so each entry is the same correctly rounded dot product as
 * cic_mp_dot gives. 0, or -1 when memory runs out (C untouched). */
static int matmul_packed(mpfr_t *c, const mpfr_t *a, bool ta, const mpfr_t *b, bool tb, int m,
                         int n, int k, int threads, const cic_dot_scratch *s)
{
    mpfr_t *ac = contiguous(a, ta, m, k), *wc = contiguous(b, !tb, n, k);
    cic_mp_pack all, *views = NULL;
    mm_job J;
    int t, rc = -1;
    if (!ac || !wc || cic_mp_pack_rows(&all, &views, (const mpfr_t *)wc, (size_t)n, (size_t)k) < 0)
        goto done;
    J = (mm_job){c, (const mpfr_t *)ac, (const mpfr_t *)wc, views, n, k, s->prec, {0}};
    cic_par_ranges((size_t)m, threads > 0 ? threads : cic_rt_matmul_threads(NULL), mm_rows, &J);
    for (t = 0, rc = 0; t < CIC_PAR_MAX; t++)
        rc = J.rc[t] < 0 ? -1 : rc;
    free(views);
    cic_mp_pack_clear(&all);
done:
    cic_mpvec_destroy(ac, (size_t)m * k);
    cic_mpvec_destroy(wc, (size_t)n * k);
    return rc;
}

void cic_mp_matmul(mpfr_t *c, const mpfr_t *a, bool ta, const mpfr_t *b, bool tb, int m, int n,
                   int k, bool blas, int threads, cic_dot_scratch *s)
{
    int i, j;
    if (blas && cic_mp_gemm_f64(c, a, ta, b, tb, m, n, k) == 0)
        return;
    if (m > 0 && n > 0 && k > 0 && matmul_packed(c, a, ta, b, tb, m, n, k, threads, s) == 0)
        return;
    /* op(A)[i, p] = ta ? A[p, i] : A[i, p]; op(B)[p, j] = tb ? B[j, p] : B[p, j] */
    for (i = 0; i < m; i++)
        for (j = 0; j < n; j++)
            cic_mp_dot(c[(size_t)i * n + j], a + (ta ? (size_t)i : (size_t)i * k),
                       ta ? (size_t)m : 1, b + (tb ? (size_t)j * k : (size_t)j),
                       tb ? 1 : (size_t)n, (size_t)k, NULL, s);
}
