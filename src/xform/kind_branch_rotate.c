/* SPDX-License-Identifier: MIT */
/* kind_branch_rotate.c: the adaLN strategy "branch-rotate" (dit blocks;
 * DESIGN.md section 5; the rewrite is adaln.c, adaln_graph.c): the stream
 * is not rotated; an online Q before every linear of the branches (of the
 * MLP width before the MLP writer), its transpose fused into the linear,
 * dense or fast, on the whole row or on blocks of group = G. */
#include "xform.h"
#include "xform_util.h"

/* The online rotations before qkv, proj, fc1, fc2 and the final linear. */
static void flops_dit(cic_dit_flops *f, const cic_model_cfg *m, const cic_xform_spec *x)
{
    double R = f->R;
    int G = x->group;
    f->attn += _cic_xf_dit_rot(R, m->d_model, G, x) /* before qkv */ +
               _cic_xf_dit_rot(R, m->d_model, G, x) /* before proj */;
    f->mlp += _cic_xf_dit_rot(R, m->d_model, G, x) /* before fc1 */ +
              _cic_xf_dit_rot(R, m->d_mlp, G, x) /* before fc2 */;
    f->final += _cic_xf_dit_rot(R, m->d_model, G, x); /* before the final linear */
}

extern const cic_xform_desc cic_xform_branch_rotate;

/* The shared adaLN rewrite (adaln.c) with this strategy's parts. */
static cic_model *build(const cic_model *orig, cic_model *own, const cic_xform_spec *x,
                        mpfr_prec_t engine_prec, cic_diag *d)
{
    return cic_adaln_apply(orig, own, x, &cic_xform_branch_rotate.adaln, engine_prec, d);
}

const cic_xform_desc cic_xform_branch_rotate = {
    .name = "branch-rotate",
    .family = CIC_XFAM_ADALN,
    .norms = 1u << CIC_NORM_ADALN,
    .keys = CIC_XKEY_Q | CIC_XKEY_FAST | CIC_XKEY_GROUP,
    .q_kinds = CIC_XQ_PLAIN | CIC_XQ(CIC_Q_REGULAR),
    .q_widths = CIC_XW_MODEL | CIC_XW_MLP,
    .adaln = {.branch = true},
    .build = build,
    .flops_dit = flops_dit,
    .memory = _cic_xf_adaln_memory,
    .report = _cic_xf_adaln_report_plain,
};
