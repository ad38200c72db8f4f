/* SPDX-License-Identifier: MIT */
/* flops.c: the closed-form FLOPs of a case (flops.h): the norms left by a
 * chain of transforms, and the block descriptor's closed form
 * (src/model/block_<name>.c) with them; the adaLN blocks in flops_dit.c.
 * Convention (engine.h): multiply-add 2, any other arithmetic op, compare
 * or transcendental call 1. */
#include "flops.h"

#include "../xform/kinds.h"


#include <string.h>

cic_norm_state cic_flops_norm_original(const cic_model_cfg *cfg)
{
    return cic_norm_of(cic_block(cfg->block)->norm);
}

cic_norm_state cic_flops_norm_after(const cic_xform_chain *ch, int i)
{
    cic_norm_state s = cic_flops_norm_original(ch->model);
    int chain[CIC_MAX_XFORMS], n = 0, k;
    for (; i >= 0 && n < CIC_MAX_XFORMS; i = ch->xf[i].after)
        chain[n++] = i;
    for (k = n - 1; k >= 0; k--) {
        const cic_xform_spec *x = &ch->xf[chain[k]];
        const cic_xform_desc *desc = cic_xform_desc_of(x->kind);
        if (desc->norms_after)
            desc->norms_after(&s, x);
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

/* The online ops of a chain ending at transform i, each kind's (its
 * descriptor's flops: R4's fast Hadamard before every MLP writer, R3's on
 * q and k). */
static void online_ops(cic_flop_count *fc, const cic_xform_chain *ch, int i)
{
    int n = 0;
    for (; i >= 0 && n < CIC_MAX_XFORMS; i = ch->xf[i].after, n++) {
        const cic_xform_spec *x = &ch->xf[i];
        const cic_xform_desc *desc = cic_xform_desc_of(x->kind);
        if (desc->flops)
            desc->flops(fc->site, ch->model, x);
    }
}

void cic_flops_case(cic_flop_count *fc, const cic_xform_chain *ch, int i)
{
    if (cic_block(ch->model->block)->norm == CIC_NORM_ADALN) {
        cic_flops_dit(fc, ch->model, i >= 0 ? &ch->xf[i] : NULL);
        return;
    }
    cic_flops_analytical(fc, ch->model, (enum cic_readout)ch->readout,
                         i >= 0 ? cic_flops_norm_after(ch, i)
                                : cic_flops_norm_original(ch->model));
    online_ops(fc, ch, i);
}
