/* SPDX-License-Identifier: MIT */
/* kind_online_unrotate.c: the adaLN strategy "online-unrotate" (dit
 * blocks; DESIGN.md section 7; the rewrite is adaln.c): a rotated stream,
 * unrotated online before each modulation and rotated back after each
 * gate, dense or with the fast Hadamard (fast = true, centered stream). */
#include "xform.h"
#include "xform_util.h"

#include <stdio.h>

/* fast = true is one fast Hadamard: not a mean-preserving Q. */
static const char *keys_check(char *msg, size_t cap, const cic_xform_spec *x)
{
    if (!x->fast || x->stream == CIC_STREAM_CENTERED)
        return NULL;
    snprintf(msg, cap,
             "fast = true on kind = \"online-unrotate\" needs stream = \"centered\" (a "
             "mean-preserving Q is not a single fast Hadamard); this transform has stream = "
             "\"%s\"",
             CIC_STREAM_NAME[x->stream]);
    return "fast";
}

/* Q^T before each modulation, Q after each gate (and centering on a
 * centered stream). */
static void flops_dit(cic_dit_flops *f, const cic_model_cfg *m, const cic_xform_spec *x)
{
    double R = f->R, d = m->d_model;
    f->n1 = f->n2 = f->nrm + _cic_xf_dit_rot(R, m->d_model, 0, x) + f->mdl;
    f->final = f->nrm + _cic_xf_dit_rot(R, m->d_model, 0, x) + f->mdl + f->head;
    f->g1 = f->g2 = cic_op_flops_gate(R, d) + (f->centered ? cic_op_flops_center(R, d) : 0) +
                    _cic_xf_dit_rot(R, m->d_model, 0, x) + f->add;
}

extern const cic_xform_desc cic_xform_online_unrotate;

/* The shared adaLN rewrite (adaln.c) with this strategy's parts. */
static cic_model *build(const cic_model *orig, cic_model *own, const cic_xform_spec *x,
                        mpfr_prec_t engine_prec, cic_diag *d)
{
    return cic_adaln_apply(orig, own, x, &cic_xform_online_unrotate.adaln, engine_prec, d);
}

const cic_xform_desc cic_xform_online_unrotate = {
    .name = "online-unrotate",
    .family = CIC_XFAM_ADALN,
    .norms = 1u << CIC_NORM_ADALN,
    .keys = CIC_XKEY_Q | CIC_XKEY_STREAM | CIC_XKEY_FAST,
    .q_kinds = CIC_XQ_PLAIN | CIC_XQ(CIC_Q_REGULAR),
    .q_widths = CIC_XW_MODEL,
    .adaln = {.unrotate = true},
    .keys_check = keys_check,
    .build = build,
    .flops_dit = flops_dit,
    .memory = _cic_xf_adaln_memory,
    .report = _cic_xf_adaln_report_plain,
};
