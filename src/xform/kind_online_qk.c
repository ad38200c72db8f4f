/* SPDX-License-Identifier: MIT */
/* kind_online_qk.c: the online Hadamards of q and k (kind "online-qk", R3;
 * the rewrite is online_down.c): per head, after RoPE, an FWHT op of the
 * head width on q and on k. Known mistake "before-rope": fused into the q
 * and k projections instead, before RoPE (broken with RoPE). */
#include "xform.h"

#include "qmat.h"
#include "xform_util.h"

/* A fast Hadamard of the head width and separate q and k projections. */
static int check(const cic_xform_chain *ch, const cic_xform_spec *x, cic_diag *d)
{
    const cic_model_cfg *m = ch->model;
    int dh = m->d_model / m->heads;
    if (x->q == CIC_Q_HADAMARD && m->block != CIC_BLOCK_PRELN &&
        cic_q_hadamard_k_supported(dh, x->hadamard_base))
        return CIC_OK;
    cic_diag_set(d, ch->path, x->line, 1,
                 "transform '%s': online-qk needs q = \"hadamard\", a Hadamard "
                 "matrix of the head width %d (hadamard_base %d) and separate q and k "
                 "projections (rmsnorm or parallel blocks; this one is %s)", x->name, dh,
                 x->hadamard_base, CIC_BLOCK_NAME[m->block]);
    return CIC_EINPUT;
}

/* The FWHTs of q (heads blocks a row) and k (one a key/value head). */
static void flops(double *site, const cic_model_cfg *m, const cic_xform_spec *x)
{
    double R = (double)m->tokens * m->samples;
    int dh = m->d_model / m->heads;
    int Kh = cic_hadamard_base_order_k(dh, x->hadamard_base);
    int kv = m->kv_heads > 0 ? m->kv_heads : m->heads;
    if (x->mistake == CIC_ONLINE_QK_BEFORE_ROPE)
        return;
    site[CIC_SITE_ATTN] += m->layers * (cic_op_flops_fwht(R * m->heads, dh, Kh) +
                                        cic_op_flops_fwht(R * kv, dh, Kh));
}

/* The online op holds no Q of its own; the mistake fuses Q into q and k
 * with MPFR products. */
static void memory(cic_xform_mem *mm, const cic_xform_spec *x)
{
    mm->lazy = CIC_XLAZY_NONE;
    mm->doubles = x->mistake == CIC_MISTAKE_NONE;
}

const cic_xform_desc cic_xform_online_qk = {
    .name = "online-qk",
    .alias = "R3",
    .family = CIC_XFAM_ONLINE,
    .norms = 1u << CIC_NORM_LAYERNORM | 1u << CIC_NORM_RMSNORM,
    .keys = CIC_XKEY_Q | CIC_XKEY_AFTER | CIC_XKEY_MISTAKE,
    .q_kinds = CIC_XQ_PLAIN,
    .q_widths = CIC_XW_HEAD,
    .mistakes = {[CIC_ONLINE_QK_BEFORE_ROPE - 1] = "before-rope"}, /* fused before RoPE */
    .check = check,
    .apply = _cic_xf_online_qk,
    .flops = flops,
    .memory = memory,
};
