/* SPDX-License-Identifier: MIT */
/* block_preln.c: the pre-LN block (GPT-2 / OPT / ViT; timm names
 * blocks.{i}.norm1, attn.qkv, attn.proj, norm2, mlp.fc1, mlp.fc2):
 * h1 = LN(X; g1, b1); X += Attn(h1); h2 = LN(X; g2, b2);
 * X += act(h2 W1 + c1) W2 + c2; then the readout, final LayerNorm and a
 * linear head (norm, head), or the residual stream compared without its
 * row mean. Norm kind LayerNorm with gain and bias (the transforms that
 * apply follow from it). */
#include "build.h"

#include <stdio.h>

/* qkv + proj 4d^2, fc1 + fc2 2dm, the biases and two LN (g, b) 9d + m per
 * layer; the final LN and the head 2d + (d + 1) d_out. */
static void weights(const cic_model_cfg *m, uint64_t *layer, uint64_t *readout)
{
    uint64_t d = cic_count(m->d_model), f = cic_count(m->d_mlp), dout = cic_count(m->d_out);
    *layer = cic_sat_add(cic_sat_add(cic_sat_mul(4, cic_sat_mul(d, d)),
                                     cic_sat_mul(2, cic_sat_mul(d, f))),
                         cic_sat_add(cic_sat_mul(9, d), f));
    *readout = cic_sat_add(cic_sat_mul(2, d), cic_sat_mul(d + 1, dout));
}

static void build(cic_bld *b, int readout)
{
    cic_model *m = b->m;
    int d = m->cfg.d_model, f = m->cfg.d_mlp, l, x = m->input;
    double sd = m->cfg.std;
    char n[96], o[96];
    for (l = 0; l < m->cfg.layers; l++) {
        int g1, b1, wqkv, bqkv, wo, bo, g2, b2, w1, c1, w2, c2;
        int h1, qkv, a, ao, h2, u, v, mo;
        cic_op act;
#define NM(s) (snprintf(n, sizeof n, "blocks.%d.%s", l, s), n)
#define AN(s) (snprintf(o, sizeof o, "act.%d.%s", l, s), o)
        g1 = _cic_bld_gain(b, NM("norm1.weight"), d);
        b1 = _cic_bld_weight(b, NM("norm1.bias"), 1, d, 0.1);
        wqkv = _cic_bld_weight(b, NM("attn.qkv.weight"), 3 * d, d, sd);
        bqkv = _cic_bld_weight(b, NM("attn.qkv.bias"), 1, 3 * d, sd);
        wo = _cic_bld_weight(b, NM("attn.proj.weight"), d, d, sd);
        bo = _cic_bld_weight(b, NM("attn.proj.bias"), 1, d, sd);
        g2 = _cic_bld_gain(b, NM("norm2.weight"), d);
        b2 = _cic_bld_weight(b, NM("norm2.bias"), 1, d, 0.1);
        w1 = _cic_bld_weight(b, NM("mlp.fc1.weight"), f, d, sd);
        c1 = _cic_bld_weight(b, NM("mlp.fc1.bias"), 1, f, sd);
        w2 = _cic_bld_weight(b, NM("mlp.fc2.weight"), d, f, sd);
        c2 = _cic_bld_weight(b, NM("mlp.fc2.bias"), 1, d, sd);
        h1 = _cic_bld_norm(b, CIC_SITE_NORM1, l, x, g1, b1, true, AN("norm1"));
        qkv = _cic_bld_linear(b, CIC_SITE_ATTN, l, CIC_ROLE_READER, h1, wqkv, bqkv, AN("qkv"));
        a = _cic_bld_attn(b, l, qkv, 0, qkv, d, qkv, 2 * d, AN("attn"));
        ao = _cic_bld_linear(b, CIC_SITE_ATTN, l, CIC_ROLE_WRITER, a, wo, bo, AN("proj"));
        x = _cic_bld_add(b, CIC_SITE_ATTN, l, x, ao, AN("resid1"));
        h2 = _cic_bld_norm(b, CIC_SITE_NORM2, l, x, g2, b2, true, AN("norm2"));
        u = _cic_bld_linear(b, CIC_SITE_MLP, l, CIC_ROLE_READER, h2, w1, c1, AN("fc1"));
        act = cic_op_blank(CIC_OP_ACT, CIC_SITE_MLP, l);
        act.in[0] = u;
        act.act = m->cfg.act;
        v = act.out = _cic_bld_act(b, AN("act"), f);
        _cic_bld_op(b, &act);
        mo = _cic_bld_linear(b, CIC_SITE_MLP, l, CIC_ROLE_WRITER, v, w2, c2, AN("fc2"));
        x = _cic_bld_add(b, CIC_SITE_MLP, l, x, mo, AN("resid2"));
#undef NM
#undef AN
    }
    _cic_bld_readout(b, readout, x, "norm", "head", true);
}

/* Pre-LN (GPT-2 / ViT): x += proj(attn(qkv(LN1(x)))); x += fc2(act(fc1(LN2(x))));
 * the head readout LN(x) W^T + b. Every linear has a bias. */
static void flops(cic_block_flops *f, const cic_model_cfg *cfg, int readout, cic_norm_state ns)
{
    double R = (double)cfg->tokens * cfg->samples, d = cfg->d_model, m = cfg->d_mlp;
    double N = cfg->tokens, B = cfg->samples, H = cfg->heads;
    f->norm1 = f->norm2 = cic_op_flops_norm(R, d, ns.center, ns.gain, ns.bias);
    f->attn = cic_op_flops_linear(R, d, 3 * d, true) +           /* qkv */
              cic_op_flops_attn(B, H, N, d / H, cfg->causal) +
              cic_op_flops_linear(R, d, d, true) +               /* proj */
              cic_op_flops_add(R * d);                           /* residual */
    f->mlp = cic_op_flops_linear(R, d, m, true) +                /* fc1 */
             cic_op_flops_elementwise_act(cfg->act, R * m) +
             cic_op_flops_linear(R, m, d, true) +                /* fc2 */
             cic_op_flops_add(R * d);
    f->final = readout == CIC_READOUT_HEAD
                   ? f->norm1 + cic_op_flops_linear(R, d, cfg->d_out, true)
                   : 0;
}

const cic_block_desc cic_block_preln = {"preln", CIC_NORM_LAYERNORM, 1e-5, CIC_ACT_GELU, false,
                                        false, weights, build, flops};
