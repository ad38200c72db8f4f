/* SPDX-License-Identifier: MIT */
/* flops.c: the closed-form FLOPs of a case (flops.h): the norms left by a
 * chain of transforms, and the block descriptor's closed form
 * (src/model/block_<name>.c) with them; the adaLN blocks in flops_dit.c.
 * Convention (engine.h): multiply-add 2, any other arithmetic op, compare
 * or transcendental call 1. */
#include "flops.h"

#include "../xform/qmat.h"

#include <string.h>

cic_norm_state cic_flops_norm_original(const cic_model_cfg *cfg)
{
    return cic_norm_of(cic_block(cfg->block)->norm);
}

cic_norm_state cic_flops_norm_after(const cic_case *c, int i)
{
    cic_norm_state s = cic_flops_norm_original(&c->model);
    int chain[CIC_MAX_XFORMS], n = 0, k;
    for (; i >= 0 && n < CIC_MAX_XFORMS; i = c->xf[i].after)
        chain[n++] = i;
    for (k = n - 1; k >= 0; k--) {
        const cic_xform_spec *x = &c->xf[chain[k]];
        if (x->kind == CIC_XFORM_FUSE_LAYERNORM) {
            s.center = false;
            s.gain = false;
            s.bias = false;
        } else if (x->kind == CIC_XFORM_FOLD_RMSNORM_GAMMA) {
            s.gain = false;
        }
    }
    return s;
}

void cic_flops_analytical(cic_flop_count *fc, const cic_model_cfg *cfg,
                          enum cic_readout readout, cic_norm_state ns)
{
    double L = cfg->layers;
    const cic_block_desc *desc = cic_block(cfg->block);
    cic_block_flops f;
    /* the adaLN blocks: cic_flops_dit */
    CIC_ASSERT(desc->flops && "block kind without a closed form in cic_flops_analytical");
    desc->flops(&f, cfg, (int)readout, ns);
    memset(fc, 0, sizeof *fc);
    fc->site[CIC_SITE_NORM1] = L * f.norm1;
    fc->site[CIC_SITE_ATTN] = L * f.attn;
    fc->site[CIC_SITE_NORM2] = L * f.norm2;
    fc->site[CIC_SITE_MLP] = L * f.mlp;
    fc->site[CIC_SITE_FINAL] = f.final;
}

/* The online transforms of a chain ending at transform i: R4's fast
 * Hadamard before every MLP writer (online-down, unless skip-online). */
static void online_ops(cic_flop_count *fc, const cic_case *c, int i)
{
    const cic_model_cfg *m = &c->model;
    double R = (double)m->tokens * m->samples;
    int n = 0;
    for (; i >= 0 && n < CIC_MAX_XFORMS; i = c->xf[i].after, n++) {
        const cic_xform_spec *x = &c->xf[i];
        int K = cic_hadamard_base_order_k(m->d_mlp, x->hadamard_base);
        if (x->kind == CIC_XFORM_ONLINE_DOWN && x->mistake != CIC_MISTAKE_SKIP_ONLINE)
            fc->site[CIC_SITE_MLP] += m->layers * cic_op_flops_fwht(R, m->d_mlp, K);
        if (x->kind == CIC_XFORM_ONLINE_QK && x->mistake != CIC_MISTAKE_BEFORE_ROPE) {
            int dh = m->d_model / m->heads;
            int Kh = cic_hadamard_base_order_k(dh, x->hadamard_base);
            /* q: heads blocks per row, k: one per key/value head */
            int kv = m->kv_heads > 0 ? m->kv_heads : m->heads;
            fc->site[CIC_SITE_ATTN] += m->layers * (cic_op_flops_fwht(R * m->heads, dh, Kh) +
                                                    cic_op_flops_fwht(R * kv, dh, Kh));
        }
    }
}

void cic_flops_case(cic_flop_count *fc, const cic_case *c, int i)
{
    if (cic_block(c->model.block)->norm == CIC_NORM_ADALN) {
        cic_flops_dit(fc, &c->model, i >= 0 ? &c->xf[i] : NULL);
        return;
    }
    cic_flops_analytical(fc, &c->model, c->readout,
                         i >= 0 ? cic_flops_norm_after(c, i)
                                : cic_flops_norm_original(&c->model));
    online_ops(fc, c, i);
}
