/* SPDX-License-Identifier: MIT */
/* kind_static_fold.c: the adaLN strategy "static-fold" (dit blocks;
 * DESIGN.md section 7; the rewrite is adaln.c, adaln_fold.c): one
 * calibration sample's modulation and Q folded into every weight, the
 * modulation gone. Exact on that sample only: expected broken on the
 * others, judged per sample. */
#include "xform.h"
#include "xform_util.h"

/* No modulation, no online op: the norms and the adds. */
static void flops_dit(cic_dit_flops *f, const cic_model_cfg *m, const cic_xform_spec *x)
{
    (void)m;
    (void)x;
    f->mod = 0;
    f->n1 = f->n2 = f->nrm;
    f->final = f->nrm + f->head;
    f->g1 = f->g2 = f->add;
}

static int report(cic_xform_field *f, int cap, const cic_xform_spec *x)
{
    return _cic_xf_adaln_report(f, cap, x, true);
}

extern const cic_xform_desc cic_xform_static_fold;

/* The shared adaLN rewrite (adaln.c) with this strategy's parts. */
static cic_model *build(const cic_model *orig, cic_model *own, const cic_xform_spec *x,
                        mpfr_prec_t engine_prec, cic_diag *d)
{
    return cic_adaln_apply(orig, own, x, &cic_xform_static_fold.adaln, engine_prec, d);
}

const cic_xform_desc cic_xform_static_fold = {
    .name = "static-fold",
    .family = CIC_XFAM_ADALN,
    .norms = 1u << CIC_NORM_ADALN,
    .keys = CIC_XKEY_Q | CIC_XKEY_STREAM | CIC_XKEY_CALIBRATION,
    .q_kinds = CIC_XQ_PLAIN | CIC_XQ(CIC_Q_REGULAR),
    .q_widths = CIC_XW_MODEL,
    .expect_broken = true,
    .adaln = {.fold = CIC_ADALN_FOLD_STATIC},
    .build = build,
    .flops_dit = flops_dit,
    .memory = _cic_xf_adaln_memory,
    .report = report,
};
