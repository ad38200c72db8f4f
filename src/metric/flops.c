/* SPDX-License-Identifier: MIT */
/* flops.c: closed-form FLOP formulas (flops.h). Written from the block
 * equations, not from the graph, so that agreement with the engines'
 * counters checks both. Convention (engine.h): multiply-add 2, any other
 * arithmetic op, compare or transcendental call 1. R = tokens * samples. */
#include "flops.h"

#include <string.h>

cic_norm_state cic_flops_norm_original(const cic_model_cfg *cfg)
{
    cic_norm_state s;
    s.center = cfg->block == CIC_BLOCK_PRELN;
    s.gain = cfg->block != CIC_BLOCK_DIT;
    s.bias = cfg->block == CIC_BLOCK_PRELN;
    return s;
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

double cic_flops_act_cost(enum cic_act a)
{
    switch (a) {
    case CIC_ACT_GELU:
        return 5;
    case CIC_ACT_GELU_TANH:
        return 9;
    case CIC_ACT_RELU:
        return 1;
    default:
        return 3;
    }
}

void cic_flops_analytical(cic_flop_count *fc, const cic_model_cfg *cfg,
                          enum cic_readout readout, cic_norm_state ns)
{
    double R = (double)cfg->tokens * cfg->samples, d = cfg->d_model;
    double m = cfg->d_mlp, N = cfg->tokens, B = cfg->samples, H = cfg->heads;
    double dh = d / H, L = cfg->layers;
    /* one norm over R rows: mean (d adds + div + d subs) when centering,
     * squares (d mul + d add), /d, +eps, sqrt, 1/x, scaling (d), g, b */
    double norm = R * ((ns.center ? 2 * d + 1 : 0) + 3 * d + 4 + (ns.gain ? d : 0) +
                       (ns.bias ? d : 0));
    /* softmax: per row compare, sub, exp, add, div over the visible keys */
    double visible = cfg->causal ? N * (N + 1) / 2 : N * N;
    double attn_core = B * H * (4 * N * N * dh + N * N + 5 * visible);
    double attn, mlp, final = 0;
    memset(fc, 0, sizeof *fc);
    if (cfg->block == CIC_BLOCK_PRELN) {
        attn = (2 * R * d * 3 * d + R * 3 * d) + attn_core + (2 * R * d * d + R * d) + R * d;
        mlp = (2 * R * d * m + R * m) + cic_flops_act_cost(cfg->act) * R * m + (2 * R * m * d + R * d) +
              R * d;
        if (readout == CIC_READOUT_HEAD)
            final = norm + 2 * R * d * cfg->d_out + R * cfg->d_out;
    } else {
        /* rmsnorm: q, k, v, o without bias; SwiGLU gate/up/down */
        attn = 4 * (2 * R * d * d) + attn_core + R * d;
        mlp = 2 * (2 * R * d * m) + (cic_flops_act_cost(cfg->act) + 1) * R * m + 2 * R * m * d + R * d;
        if (readout == CIC_READOUT_HEAD)
            final = norm + 2 * R * d * cfg->d_out;
    }
    fc->site[CIC_SITE_NORM1] = L * norm;
    fc->site[CIC_SITE_ATTN] = L * attn;
    fc->site[CIC_SITE_NORM2] = L * norm;
    fc->site[CIC_SITE_MLP] = L * mlp;
    fc->site[CIC_SITE_FINAL] = final;
}
