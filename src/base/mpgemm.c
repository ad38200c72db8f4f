/* SPDX-License-Identifier: MIT */
/* mpgemm.c: MPFR matrix products through dgemm (mpgemm.h). */
#include "mpgemm.h"

#include "base.h"

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

int cic_mp_gemm_f64(mpfr_t *c, const mpfr_t *a, bool ta, const mpfr_t *b, bool tb, int m, int n,
                    int k)
{
    size_t na = (size_t)m * k, nb = (size_t)k * n, nc = (size_t)m * n, i;
    double *da = to_double(a, na), *db = to_double(b, nb), *dc = cic_calloc(nc ? nc : 1, sizeof *dc);
    int rc = -1;
    if (!da || !db || !dc)
        goto cleanup;
    if (m > 0 && n > 0 && k > 0)
        cblas_dgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans,
                    m, n, k, 1.0, da, ta ? m : k, db, tb ? k : n, 0.0, dc, n);
    for (i = 0; i < nc; i++)
        mpfr_set_d(c[i], dc[i], MPFR_RNDN);
    rc = 0;
cleanup:
    free(da);
    free(db);
    free(dc);
    return rc;
}

void cic_mp_matmul(mpfr_t *c, const mpfr_t *a, bool ta, const mpfr_t *b, bool tb, int m, int n,
                   int k, bool blas, cic_dot_scratch *s)
{
    int i, j;
    if (blas && cic_mp_gemm_f64(c, a, ta, b, tb, m, n, k) == 0)
        return;
    /* op(A)[i, p] = ta ? A[p, i] : A[i, p]; op(B)[p, j] = tb ? B[j, p] : B[p, j] */
    for (i = 0; i < m; i++)
        for (j = 0; j < n; j++)
            cic_mp_dot(c[(size_t)i * n + j], a + (ta ? (size_t)i : (size_t)i * k),
                       ta ? (size_t)m : 1, b + (tb ? (size_t)j * k : (size_t)j),
                       tb ? 1 : (size_t)n, (size_t)k, NULL, s);
}
