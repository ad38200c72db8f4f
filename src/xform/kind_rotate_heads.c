/* SPDX-License-Identifier: MIT */
/* kind_rotate_heads.c: the per-head rotation of the values (kind
 * "rotate-heads", R2; the rewrite is rotate_heads.c). Only weights change:
 * no op and no FLOP is added. Known mistakes "skip-out-proj" and
 * "per-query-head" (broken). */
#include "xform.h"

#include "qmat.h"
#include "xform_util.h"

/* A Hadamard Q of the head width. */
static int check(const cic_xform_chain *ch, const cic_xform_spec *x, cic_diag *d)
{
    int dh = ch->model->d_model / ch->model->heads;
    char hint[256];
    if (x->q != CIC_Q_HADAMARD || cic_q_hadamard_k_supported(dh, x->hadamard_base))
        return CIC_OK;
    cic_q_hadamard_k_explain(hint, sizeof hint, dh, x->hadamard_base);
    cic_diag_set(d, ch->path, x->line, 1,
                 "transform '%s': no Hadamard matrix of the head width %d; %s", x->name, dh,
                 hint);
    return CIC_EINPUT;
}

static void memory(cic_xform_mem *mm, const cic_xform_spec *x)
{
    (void)x;
    mm->lazy = CIC_XLAZY_NONE;
    mm->doubles = true;
}

const cic_xform_desc cic_xform_rotate_heads = {
    .name = "rotate-heads",
    .alias = "R2",
    .family = CIC_XFAM_ROTATION,
    .norms = 1u << CIC_NORM_LAYERNORM | 1u << CIC_NORM_RMSNORM,
    .keys = CIC_XKEY_Q | CIC_XKEY_AFTER | CIC_XKEY_MISTAKE,
    .q_kinds = CIC_XQ_PLAIN | CIC_XQ(CIC_Q_FILE),
    .q_widths = CIC_XW_HEAD,
    .mistakes = {[CIC_ROTATE_HEADS_SKIP_OUT_PROJ - 1] = "skip-out-proj",   /* W_o left alone */
                 [CIC_ROTATE_HEADS_PER_QUERY_HEAD - 1] = "per-query-head"}, /* a Q per query head */
    .check = check,
    .apply = _cic_xf_rotate_heads,
    .memory = memory,
};
