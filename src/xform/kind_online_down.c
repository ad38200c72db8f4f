/* SPDX-License-Identifier: MIT */
/* kind_online_down.c: the online Hadamard before the MLP writer (kind
 * "online-down", R4; the rewrite is online_down.c): an FWHT op of the MLP
 * width before every MLP writer at run time, its transpose fused into the
 * writer. Known mistake "skip-online": fused without the online op
 * (broken). */
#include "xform.h"

#include "qmat.h"
#include "xform_util.h"

/* A fast Hadamard of the MLP width. */
static int check(const cic_xform_chain *ch, const cic_xform_spec *x, cic_diag *d)
{
    int f = ch->model->d_mlp;
    char hint[256];
    if (x->q != CIC_Q_HADAMARD) {
        cic_diag_set(d, ch->path, x->line, 1,
                     "transform '%s': online-down needs q = \"hadamard\" (the online "
                     "transform is a fast Hadamard; q = \"%s\")", x->name, CIC_Q_NAME[x->q]);
        return CIC_EINPUT;
    }
    if (cic_q_hadamard_k_supported(f, x->hadamard_base))
        return CIC_OK;
    cic_q_hadamard_k_explain(hint, sizeof hint, f, x->hadamard_base);
    cic_diag_set(d, ch->path, x->line, 1,
                 "transform '%s': no Hadamard matrix of the MLP width %d; %s", x->name, f, hint);
    return CIC_EINPUT;
}

/* The FWHT before each layer's MLP writer, on every row. */
static void flops(double *site, const cic_model_cfg *m, const cic_xform_spec *x)
{
    double R = (double)m->tokens * m->samples;
    int K = cic_hadamard_base_order_k(m->d_mlp, x->hadamard_base);
    if (x->mistake != CIC_ONLINE_DOWN_SKIP_ONLINE)
        site[CIC_SITE_MLP] += m->layers * cic_op_flops_fwht(R, m->d_mlp, K);
}

static void memory(cic_xform_mem *mm, const cic_xform_spec *x)
{
    (void)x;
    mm->lazy = CIC_XLAZY_NONE;
    mm->doubles = true;
}

const cic_xform_desc cic_xform_online_down = {
    .name = "online-down",
    .alias = "R4",
    .family = CIC_XFAM_ONLINE,
    .norms = 1u << CIC_NORM_LAYERNORM | 1u << CIC_NORM_RMSNORM,
    .keys = CIC_XKEY_Q | CIC_XKEY_AFTER | CIC_XKEY_MISTAKE,
    .q_kinds = CIC_XQ_PLAIN,
    .q_widths = CIC_XW_MLP,
    .mistakes = {[CIC_ONLINE_DOWN_SKIP_ONLINE - 1] = "skip-online"}, /* no online op */
    .check = check,
    .apply = _cic_xf_online_down,
    .flops = flops,
    .memory = memory,
};
