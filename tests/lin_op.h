/* SPDX-License-Identifier: MIT */
/* lin_op.h: one linear op's operands for the slice tests (test_mpslice.c,
 * test_mpslice_wide.c): x (m x k at px bits), the weights (n x k) as MPFR
 * values at pw bits and, when f32, as floats packed straight from wf (as
 * the engine packs float32 weights), and the bias, each value its own
 * mpfr_t at pb bits (a test may change one's precision). */
#ifndef CIC_TEST_LIN_OP_H
#define CIC_TEST_LIN_OP_H

#include "testutil.h"

#include "base/base.h"
#include "base/mpslice.h"
#include "base/mpvec.h"

#include <string.h>

typedef struct {
    size_t m, n, k;
    mpfr_prec_t px, pw, pb;
    bool f32, bias;
    mpfr_t *x, *w, *b;
    float *wf;
    cic_mp_pack all;
    cic_mp_pack *views;
} lin_op;

/* pw is ignored (24) when f32. */
static inline void lin_op_init(lin_op *o, size_t m, size_t n, size_t k, mpfr_prec_t px,
                               mpfr_prec_t pw, bool f32, bool bias, mpfr_prec_t pb)
{
    size_t j;
    memset(o, 0, sizeof *o);
    o->m = m;
    o->n = n;
    o->k = k;
    o->px = px;
    o->f32 = f32;
    o->pw = f32 ? 24 : pw;
    o->pb = pb;
    o->bias = bias;
    o->x = cic_mpvec_create(m * k, px);
    o->w = cic_mpvec_create(n * k, o->pw);
    o->b = cic_calloc(n, sizeof *o->b);
    o->wf = cic_calloc(n * k, sizeof *o->wf);
    assert_true(o->x && o->w && o->b && o->wf);
    for (j = 0; j < n; j++)
        mpfr_init2(o->b[j], pb);
}

/* The weights packed as the engine packs them (after they are set). */
static inline void lin_op_pack(lin_op *o)
{
    size_t q;
    if (o->f32) {
        for (q = 0; q < o->n * o->k; q++)
            mpfr_set_flt(o->w[q], o->wf[q], MPFR_RNDN);
        assert_int_equal(cic_mp_pack_rows_f32(&o->all, &o->views, o->wf, o->n, o->k), 0);
    } else {
        assert_int_equal(cic_mp_pack_rows(&o->all, &o->views, (const mpfr_t *)o->w, o->n, o->k),
                         0);
    }
}

static inline void lin_op_clear(lin_op *o)
{
    size_t j;
    free(o->views);
    cic_mp_pack_clear(&o->all);
    cic_mpvec_destroy(o->x, o->m * o->k);
    cic_mpvec_destroy(o->w, o->n * o->k);
    for (j = 0; j < o->n; j++)
        mpfr_clear(o->b[j]);
    free(o->b);
    free(o->wf);
}

#endif
