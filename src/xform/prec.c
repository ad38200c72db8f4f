/* SPDX-License-Identifier: MIT */
/* prec.c: the precision a transform computes at, its unit roundoff, and
 * the verdict thresholds of its exactness residual (xform.h). Every kind
 * and the dispatcher ask these; they ask nothing of the transform module. */
#include "xform.h"

#include <math.h>

mpfr_prec_t cic_xform_prec(const cic_xform_spec *x, mpfr_prec_t engine_prec)
{
    switch (x->prec) {
    case CIC_TPREC_BF16:
        return 8;
    case CIC_TPREC_F32:
        return 24;
    case CIC_TPREC_F64:
    case CIC_TPREC_F64_BLAS:
        return 53;
    default:
        return engine_prec;
    }
}

double cic_xform_unit_roundoff(const cic_xform_spec *x, mpfr_prec_t engine_prec)
{
    return ldexp(1.0, -(int)cic_xform_prec(x, engine_prec));
}

/* Thresholds. An exact transform computed at p bits leaves a relative
 * output difference of a modest multiple of 2^-p (rounding of the weights,
 * amplified by the block's conditioning); a wrong transform leaves a
 * difference of the size of the data. We call it equivalent up to 2^32
 * unit roundoffs at the MPFR precisions (so at 128 bits ce <= 2^-96), up to
 * 2^20 roundoffs for f64 (about 1.2e-10) and 2^12 for f32 (about 2.4e-4, a
 * generous float error for these depths), and broken from 2^-7 (0.8 %) of
 * the output's norm; the known mistakes land near 1e-1 to 1. A transform
 * computed at bf16's 8 bits ("rotate in bf16": Q and every value rounded to
 * 8 bits, dot products rounded once) is equivalent up to 2^-4 and broken
 * from 2^-2. */
void cic_xform_thresholds(double *eq, double *br, const cic_xform_spec *x,
                          mpfr_prec_t engine_prec)
{
    int p = (int)cic_xform_prec(x, engine_prec);
    enum cic_tprec tp = x->prec;
    /* a rotation from a file is exact only to its dtype's precision */
    if (x->q == CIC_Q_FILE && x->q_file_bits > 0 && x->q_file_bits < p) {
        p = x->q_file_bits;
        tp = p >= 53 ? CIC_TPREC_F64 : p >= 24 ? CIC_TPREC_F32 : CIC_TPREC_BF16;
    }
    switch (tp) {
    case CIC_TPREC_F32:
        *eq = ldexp(1.0, 12 - p);
        break;
    case CIC_TPREC_F64:
    case CIC_TPREC_F64_BLAS:
        *eq = ldexp(1.0, 20 - p);
        break;
    case CIC_TPREC_BF16:
        /* 8 bits: the weights' own rounding is already near 2^-9 of each
         * value; the verdict can separate gross mistakes only */
        *eq = ldexp(1.0, -4);
        *br = ldexp(1.0, -2);
        return;
    default:
        *eq = ldexp(1.0, 32 - p);
        break;
    }
    *br = ldexp(1.0, -7);
}

enum cic_verdict cic_xform_verdict(double ce, double eq, double br)
{
    if (ce <= eq)
        return CIC_VERDICT_EQUIVALENT;
    if (ce >= br || isnan(ce))
        return CIC_VERDICT_BROKEN;
    return CIC_VERDICT_INCONCLUSIVE;
}
