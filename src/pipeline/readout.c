/* SPDX-License-Identifier: MIT */
/* readout.c: the readout map (DESIGN.md section 4). Outputs are compared
 * after a map that makes them comparable: the head readout as it is, the
 * residual stream mapped back to the original basis exactly (y Q^T, then
 * centered when the model says so), computed in MPFR so the map adds no
 * error of its own. */
#include "pipeline_int.h"

#include "../base/mpvec.h"

#include <string.h>

/* dst = map(src) for model m: the residual readout in the original basis,
 * y Q^T then centered (when the model says so); a plain copy for the head
 * readout. All at prec bits; src values may have any precision <= prec. */
int _cic_pl_map_out(cic_pipeline *r, mpfr_t *dst, const mpfr_t *src, const cic_model *m)
{
    size_t i, j, rows = r->rows, cols = r->cols;
    mpfr_prec_t sp = r->prec;
    const mpfr_t *q = (const mpfr_t *)m->out_q;
    if (q && m->out_q_prec > sp)
        sp = m->out_q_prec;
    if (q) {
        cic_dot_scratch s;
        mpfr_t *row = cic_mpvec_create(cols, r->prec);
        if (!row || cic_dot_scratch_init(&s, cols, sp) < 0) {
            cic_mpvec_destroy(row, cols);
            return -1;
        }
        for (i = 0; i < rows; i++) {
            for (j = 0; j < cols; j++) /* (y Q^T)_j = sum_k y_k Q[j,k] */
                cic_mp_dot(row[j], src + i * cols, 1, q + j * cols, 1,
                           cols, NULL, &s);
            for (j = 0; j < cols; j++)
                mpfr_set(dst[i * cols + j], row[j], MPFR_RNDN);
        }
        cic_dot_scratch_clear(&s);
        cic_mpvec_destroy(row, cols);
    } else if (dst != src) {
        for (i = 0; i < rows * cols; i++)
            mpfr_set(dst[i], src[i], MPFR_RNDN);
    }
    if (m->center_out && cic_mpvec_center_rows(dst, rows, cols, r->prec) < 0)
        return -1;
    return 0;
}

bool _cic_pl_needs_map(const cic_model *m)
{
    return m->out_q != NULL || m->center_out;
}

/* Map a float output in place (mapped in MPFR, rounded once back to
 * binary32: the scored value carries at most half an ULP of that rounding). */
int _cic_pl_map_out_f32(cic_pipeline *r, float *y, const cic_model *m)
{
    mpfr_t *v;
    int rc;
    if (!_cic_pl_needs_map(m))
        return 0;
    v = cic_mpvec_create(r->n, r->prec);
    if (!v)
        return -1;
    cic_mpvec_set_f32(v, y, r->n);
    rc = _cic_pl_map_out(r, v, (const mpfr_t *)v, m);
    if (rc == 0)
        cic_mpvec_get_f32(y, (const mpfr_t *)v, r->n);
    cic_mpvec_destroy(v, r->n);
    return rc;
}
