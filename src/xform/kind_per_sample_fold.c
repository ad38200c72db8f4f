/* SPDX-License-Identifier: MIT */
/* kind_per_sample_fold.c: the adaLN strategy "per-sample-fold" (dit
 * blocks; DESIGN.md section 7; the rewrite is adaln.c): each sample's
 * modulation and Q folded into its own copy of the readers and writers at
 * run time (FOLD ops), the stream rotated. */
#include "xform.h"
#include "xform_util.h"

/* Per-sample folds of a reader W [n out, d in] (FOLD_IN_W + FOLD_IN_B) and
 * of a writer W [d out, k in] (FOLD_OUT_W + FOLD_OUT_B), over B samples. */
static double fold_in(double B, double d, double n)
{
    return cic_op_flops_fold_in_w(B, n, d) + cic_op_flops_fold_in_b(B, n, d);
}

static double fold_out(double B, double d, double k, bool centered)
{
    return cic_op_flops_fold_out_w(B, d, k, centered) + cic_op_flops_fold_out_b(B, d, centered);
}

static void flops_dit(cic_dit_flops *f, const cic_model_cfg *m, const cic_xform_spec *x)
{
    double B = f->B, d = m->d_model, mw = m->d_mlp, dout = m->d_out;
    (void)x;
    f->n1 = f->nrm + fold_in(B, d, 3 * d);
    f->n2 = f->nrm + fold_in(B, d, mw);
    f->final = f->nrm + fold_in(B, d, dout) + f->head;
    f->g1 = fold_out(B, d, d, f->centered) + f->add;
    f->g2 = fold_out(B, d, mw, f->centered) + f->add;
}

extern const cic_xform_desc cic_xform_per_sample_fold;

/* The shared adaLN rewrite (adaln.c) with this strategy's parts. */
static cic_model *build(const cic_model *orig, cic_model *own, const cic_xform_spec *x,
                        mpfr_prec_t engine_prec, cic_diag *d)
{
    return cic_adaln_apply(orig, own, x, &cic_xform_per_sample_fold.adaln, engine_prec, d);
}

const cic_xform_desc cic_xform_per_sample_fold = {
    .name = "per-sample-fold",
    .family = CIC_XFAM_ADALN,
    .norms = 1u << CIC_NORM_ADALN,
    .keys = CIC_XKEY_Q | CIC_XKEY_STREAM,
    .q_kinds = CIC_XQ_PLAIN | CIC_XQ(CIC_Q_REGULAR),
    .q_widths = CIC_XW_MODEL,
    .adaln = {.fold = CIC_ADALN_FOLD_PER_SAMPLE},
    .build = build,
    .flops_dit = flops_dit,
    .memory = _cic_xf_adaln_memory,
    .report = _cic_xf_adaln_report_plain,
};
