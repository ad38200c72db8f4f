/* SPDX-License-Identifier: MIT */
/* fold.c: MPFR folds of modulation and rotation into weights (fold.h). */
#include "fold.h"

#include "../base/base.h"
#include "../base/mpgemm.h"

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
    cic_mp_matmul(out, (const mpfr_t *)ws->tmp, false, q, false, n, d, d, ws->blas, &ws->dot);
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
    cic_mp_matmul(out, q, true, (const mpfr_t *)ws->tmp, false, d, k, d, ws->blas, &ws->dot);
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
