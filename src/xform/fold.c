/* SPDX-License-Identifier: MIT */
/* fold.c: MPFR folds of modulation and rotation into weights (fold.h). */
#include "fold.h"

#include "../base/base.h"
#include "../base/mpgemm.h"
#include "xform_util.h"

#include <float.h>
#include <math.h>
#include <string.h>

int cic_fold_ws_init(cic_fold_ws *ws, size_t max_elems, size_t max_d, mpfr_prec_t prec)
{
    memset(ws, 0, sizeof *ws);
    ws->prec = prec;
    ws->tmp_n = max_elems;
    ws->vec_n = max_d;
    ws->tmp = cic_mpvec_create(max_elems, prec);
    ws->vec = cic_mpvec_create(max_d, prec);
    ws->ptr = cic_calloc(max_d ? max_d : 1, sizeof *ws->ptr);
    if (!ws->tmp || !ws->vec || !ws->ptr || cic_dot_scratch_init(&ws->dot, max_d, prec) < 0) {
        cic_fold_ws_clear(ws);
        return -1;
    }
    return 0;
}

void cic_fold_ws_clear(cic_fold_ws *ws)
{
    cic_mpvec_destroy(ws->tmp, ws->tmp_n);
    cic_mpvec_destroy(ws->vec, ws->vec_n);
    free(ws->ptr);
    cic_dot_scratch_clear(&ws->dot);
    memset(ws, 0, sizeof *ws);
}

void cic_fold_in_w(mpfr_t *out, const mpfr_t *w, int n, int d, const mpfr_t *scale,
                   const mpfr_t *q, cic_fold_ws *ws)
{
    int j, k;
    CIC_ASSERT((size_t)n * d <= ws->tmp_n && (size_t)d <= ws->vec_n);
    for (k = 0; k < d; k++)
        mpfr_add_ui(ws->vec[k], scale[k], 1, MPFR_RNDN);
    for (j = 0; j < n; j++)
        for (k = 0; k < d; k++)
            mpfr_mul(ws->tmp[(size_t)j * d + k], w[(size_t)j * d + k], ws->vec[k], MPFR_RNDN);
    cic_mp_matmul(out, (const mpfr_t *)ws->tmp, false, q, false, n, d, d, ws->blas, ws->threads,
                  &ws->dot);
}

void cic_fold_in_b(mpfr_t *out, const mpfr_t *w, const mpfr_t *b, int n, int d,
                   const mpfr_t *shift, cic_fold_ws *ws)
{
    int j;
    for (j = 0; j < n; j++)
        cic_mp_dot(out[j], w + (size_t)j * d, 1, shift, 1, (size_t)d, b ? b[j] : NULL,
                   &ws->dot);
}

/* Subtract the mean of each column of T [d, k] (stride k). */
static void center_cols(mpfr_t *t, int d, int k, cic_fold_ws *ws)
{
    int j, c;
    mpfr_ptr mean = ws->vec[0];
    for (c = 0; c < k; c++) {
        for (j = 0; j < d; j++)
            ws->ptr[j] = t[(size_t)j * k + c];
        mpfr_sum(mean, ws->ptr, (unsigned long)d, MPFR_RNDN);
        mpfr_div_ui(mean, mean, (unsigned long)d, MPFR_RNDN);
        for (j = 0; j < d; j++)
            mpfr_sub(t[(size_t)j * k + c], t[(size_t)j * k + c], mean, MPFR_RNDN);
    }
}

void cic_fold_out_w(mpfr_t *out, const mpfr_t *w, int d, int k, const mpfr_t *gate,
                    const mpfr_t *q, bool center, cic_fold_ws *ws)
{
    int j, c;
    CIC_ASSERT((size_t)d * k <= ws->tmp_n && (size_t)d <= ws->vec_n);
    for (j = 0; j < d; j++)
        for (c = 0; c < k; c++)
            mpfr_mul(ws->tmp[(size_t)j * k + c], gate[j], w[(size_t)j * k + c], MPFR_RNDN);
    if (center)
        center_cols(ws->tmp, d, k, ws);
    cic_mp_matmul(out, q, true, (const mpfr_t *)ws->tmp, false, d, k, d, ws->blas, ws->threads,
                  &ws->dot);
}

void cic_fold_out_b(mpfr_t *out, const mpfr_t *b, int d, const mpfr_t *gate,
                    const mpfr_t *q, bool center, cic_fold_ws *ws)
{
    int j, i;
    CIC_ASSERT((size_t)d <= ws->tmp_n);
    for (j = 0; j < d; j++)
        mpfr_mul(ws->tmp[j], gate[j], b[j], MPFR_RNDN);
    if (center)
        center_cols(ws->tmp, d, 1, ws);
    for (i = 0; i < d; i++)
        cic_mp_dot(out[i], q + i, (size_t)d, (const mpfr_t *)ws->tmp, 1, (size_t)d, NULL,
                   &ws->dot);
}

/* ---- through dgemm, in doubles ---- */

/* Whether r = a * b in double is RN(a b) at 53 bits: a zero from a zero
 * factor, or a finite product above DBL_MIN (an underflow, a subnormal or
 * an overflow rounds otherwise; a product that rounded up to DBL_MIN may
 * have come from below it). */
static bool mul_exact53(double r, double a, double b)
{
    if (r == 0)
        return isfinite(a) && isfinite(b) && (a == 0 || b == 0);
    return isfinite(r) && fabs(r) > DBL_MIN;
}

int cic_fold_in_w_f64(double *out, const double *w, int n, int d, const double *scale,
                      const double *q)
{
    size_t j, k, nd = (size_t)n * d;
    double *tmp = cic_model_array_alloc(nd, sizeof *tmp, false), *t = malloc((size_t)d * sizeof *t);
    int rc = -1;
    if (!tmp || !t)
        goto done;
    rc = 1;
    for (k = 0; k < (size_t)d; k++) /* a finite sum of doubles is RN(sum) */
        if (!isfinite(t[k] = 1.0 + scale[k]))
            goto done;
    for (j = 0; j < (size_t)n; j++)
        for (k = 0; k < (size_t)d; k++) {
            double v = w[j * d + k] * t[k];
            if (!mul_exact53(v, w[j * d + k], t[k]))
                goto done;
            tmp[j * d + k] = v;
        }
    cic_gemm_f64(out, tmp, false, q, false, n, d, d);
    rc = 0;
done:
    free(tmp);
    free(t);
    return rc;
}

int cic_fold_out_w_f64(double *out, const double *w, int d, int k, const double *gate,
                       const double *q, bool center, int threads)
{
    size_t j, c, dk = (size_t)d * k;
    double *tmp = cic_model_array_alloc(dk, sizeof *tmp, false);
    int rc = -1;
    if (!tmp)
        return -1;
    for (j = 0; j < (size_t)d; j++)
        for (c = 0; c < (size_t)k; c++) {
            double v = gate[j] * w[j * k + c];
            if (!mul_exact53(v, gate[j], w[j * k + c])) {
                rc = 1;
                goto done;
            }
            tmp[j * k + c] = v;
        }
    /* each column's mean as center_cols makes it, the subtraction in
     * double (exact in the subnormal range, RN above it) */
    if (center && (rc = _cic_xf_center_f64(tmp, k, d, 1, (size_t)k, threads)) != 0)
        goto done;
    cic_gemm_f64(out, q, true, tmp, false, d, k, d);
    rc = 0;
done:
    free(tmp);
    return rc;
}
