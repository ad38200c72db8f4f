/* SPDX-License-Identifier: MIT */
/* flops.c: closed-form FLOP formulas of the preln and rmsnorm blocks
 * (flops.h). Written from the block equations, not from the graph: each
 * block is the list of ops it takes, each op costed by the op table's
 * formula (model/op.h), so that agreement with the engines' counters (which
 * cost the ops of the graph with the same formulas) checks which ops the
 * graph has and how many. Convention (engine.h): multiply-add 2, any other
 * arithmetic op, compare or transcendental call 1. R = tokens * samples. */
#include "flops.h"

#include <string.h>

cic_norm_state cic_flops_norm_original(const cic_model_cfg *cfg)
{
    cic_norm_state s = {false, false, false};
    switch (cfg->block) {
    case CIC_BLOCK_PRELN: /* LayerNorm with gain and bias */
        s.center = s.gain = s.bias = true;
        break;
    case CIC_BLOCK_RMSNORM: /* RMSNorm with gain */
        s.gain = true;
        break;
    case CIC_BLOCK_DIT: /* LayerNorm without affine: adaLN modulates */
        s.center = true;
        break;
    default:
        CIC_ASSERT(0 && "block kind without norms in flops.c");
    }
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

/* Per-layer work of a block and its readout, per site. */
typedef struct {
    double norm1, attn, norm2, mlp, final;
} block_flops;

/* Pre-LN (GPT-2 / ViT): x += proj(attn(qkv(LN1(x)))); x += fc2(act(fc1(LN2(x))));
 * the head readout LN(x) W^T + b. Every linear has a bias. */
static block_flops preln(const cic_model_cfg *cfg, enum cic_readout readout,
                         cic_norm_state ns)
{
    double R = (double)cfg->tokens * cfg->samples, d = cfg->d_model, m = cfg->d_mlp;
    double N = cfg->tokens, B = cfg->samples, H = cfg->heads;
    block_flops f;
    f.norm1 = f.norm2 = cic_op_flops_norm(R, d, ns.center, ns.gain, ns.bias);
    f.attn = cic_op_flops_linear(R, d, 3 * d, true) +           /* qkv */
             cic_op_flops_attn(B, H, N, d / H, cfg->causal) +
             cic_op_flops_linear(R, d, d, true) +               /* proj */
             cic_op_flops_add(R * d);                           /* residual */
    f.mlp = cic_op_flops_linear(R, d, m, true) +                /* fc1 */
            cic_op_flops_elementwise_act(cfg->act, R * m) +
            cic_op_flops_linear(R, m, d, true) +                /* fc2 */
            cic_op_flops_add(R * d);
    f.final = readout == CIC_READOUT_HEAD
                  ? f.norm1 + cic_op_flops_linear(R, d, cfg->d_out, true)
                  : 0;
    return f;
}

/* RMSNorm (Llama): x += o(attn(q, k, v of RMS1(x))); x += down(act(gate(h)) *
 * up(h)), h = RMS2(x); the head readout lm_head(RMS(x)). No bias anywhere. */
static block_flops rmsnorm(const cic_model_cfg *cfg, enum cic_readout readout,
                           cic_norm_state ns)
{
    double R = (double)cfg->tokens * cfg->samples, d = cfg->d_model, m = cfg->d_mlp;
    double N = cfg->tokens, B = cfg->samples, H = cfg->heads;
    block_flops f;
    f.norm1 = f.norm2 = cic_op_flops_norm(R, d, ns.center, ns.gain, ns.bias);
    f.attn = 3 * cic_op_flops_linear(R, d, d, false) +          /* q, k, v */
             cic_op_flops_attn(B, H, N, d / H, cfg->causal) +
             cic_op_flops_linear(R, d, d, false) +              /* o */
             cic_op_flops_add(R * d);
    f.mlp = 2 * cic_op_flops_linear(R, d, m, false) +           /* gate, up */
            cic_op_flops_glu(cfg->act, R * m) +
            cic_op_flops_linear(R, m, d, false) +               /* down */
            cic_op_flops_add(R * d);
    f.final = readout == CIC_READOUT_HEAD
                  ? f.norm1 + cic_op_flops_linear(R, d, cfg->d_out, false)
                  : 0;
    return f;
}

void cic_flops_analytical(cic_flop_count *fc, const cic_model_cfg *cfg,
                          enum cic_readout readout, cic_norm_state ns)
{
    double L = cfg->layers;
    block_flops f;
    switch (cfg->block) {
    case CIC_BLOCK_PRELN:
        f = preln(cfg, readout, ns);
        break;
    case CIC_BLOCK_RMSNORM:
        f = rmsnorm(cfg, readout, ns);
        break;
    default: /* dit: cic_flops_dit; a new block kind needs its own closed form */
        CIC_ASSERT(0 && "block kind without a closed form in cic_flops_analytical");
        return;
    }
    memset(fc, 0, sizeof *fc);
    fc->site[CIC_SITE_NORM1] = L * f.norm1;
    fc->site[CIC_SITE_ATTN] = L * f.attn;
    fc->site[CIC_SITE_NORM2] = L * f.norm2;
    fc->site[CIC_SITE_MLP] = L * f.mlp;
    fc->site[CIC_SITE_FINAL] = f.final;
}

void cic_flops_case(cic_flop_count *fc, const cic_case *c, int i)
{
    switch (c->model.block) {
    case CIC_BLOCK_PRELN:
    case CIC_BLOCK_RMSNORM:
        cic_flops_analytical(fc, &c->model, c->readout,
                             i >= 0 ? cic_flops_norm_after(c, i)
                                    : cic_flops_norm_original(&c->model));
        break;
    case CIC_BLOCK_DIT:
        cic_flops_dit(fc, &c->model, i >= 0 ? &c->xf[i] : NULL);
        break;
    default:
        CIC_ASSERT(0 && "block kind without a closed form in cic_flops_case");
    }
}
