/* SPDX-License-Identifier: MIT */
/* block_parallel.c: the parallel block (GPT-J; Hugging Face names
 * transformer.h.{i}.ln_1, attn.q_proj, k_proj, v_proj, out_proj, mlp.fc_in,
 * mlp.fc_out, transformer.ln_f, lm_head): one LayerNorm feeds attention and
 * the MLP side by side,
 *   h = LN(X; g, b); X = (Attn(h) W_o + (act(h W_1 + c_1) W_2 + c_2)) + X,
 * the attention projections without bias, the MLP with; then the readout,
 * final LayerNorm and a linear head with bias, or the residual stream
 * compared without its row mean. Norm kind LayerNorm with gain and bias
 * (the transforms that apply follow from it; once the norm is fused, its
 * bias is a bias of q, k and v).
 *
 * A GPT-J checkpoint (ckpt_gptj.c) sets two things a case file cannot (the
 * case loader keeps rope and qkv_bias to the rmsnorm block), so a case's
 * parallel block is built as before, op for op: rope interleaved (GPT-J's
 * rotate_every_two) on q and k, on the first rotary_dim dims of each head
 * (0: every dim), and qkv_bias, the
 * biases of q, k and v a rewrite with fused LayerNorms stores (zeros when a
 * checkpoint has none). */
#include "build.h"

#include <stdio.h>

/* q, k, v, out 4d^2, fc_in + fc_out 2dm, their biases m + d and one LN
 * (g, b) 2d per layer (qkv_bias: 3d more); the final LN and the head
 * 2d + (d + 1) d_out. */
static void weights(const cic_model_cfg *m, uint64_t *layer, uint64_t *readout)
{
    uint64_t d = cic_count(m->d_model), f = cic_count(m->d_mlp), dout = cic_count(m->d_out);
    *layer = cic_sat_add(cic_sat_add(cic_sat_mul(4, cic_sat_mul(d, d)),
                                     cic_sat_mul(2, cic_sat_mul(d, f))),
                         cic_sat_add(cic_sat_mul(m->qkv_bias ? 6 : 3, d), f));
    *readout = cic_sat_add(cic_sat_mul(2, d), cic_sat_mul(d + 1, dout));
}

/* One layer on the stream x; returns the new stream. */
static int layer(cic_bld *b, int l, int x)
{
    cic_model *m = b->m;
    int d = m->cfg.d_model, f = m->cfg.d_mlp;
    double sd = m->cfg.std;
    int g, bn, wq, wk, wv, wo, w1, c1, w2, c2, h, q, k, v, a, ao, u, y, mo, s;
    int bq = -1, bk = -1, bv = -1;
    cic_op act;
    char n[96], o[96];
#define NM(s) (snprintf(n, sizeof n, "transformer.h.%d.%s", l, s), n)
#define AN(s) (snprintf(o, sizeof o, "act.%d.%s", l, s), o)
    g = _cic_bld_gain(b, NM("ln_1.weight"), d);
    bn = _cic_bld_weight(b, NM("ln_1.bias"), 1, d, 0.1);
    wq = _cic_bld_weight(b, NM("attn.q_proj.weight"), d, d, sd);
    wk = _cic_bld_weight(b, NM("attn.k_proj.weight"), d, d, sd);
    wv = _cic_bld_weight(b, NM("attn.v_proj.weight"), d, d, sd);
    if (m->cfg.qkv_bias) { /* a checkpoint's: a fused LayerNorm's bias (or zeros) */
        bq = _cic_bld_weight(b, NM("attn.q_proj.bias"), 1, d, sd);
        bk = _cic_bld_weight(b, NM("attn.k_proj.bias"), 1, d, sd);
        bv = _cic_bld_weight(b, NM("attn.v_proj.bias"), 1, d, sd);
    }
    wo = _cic_bld_weight(b, NM("attn.out_proj.weight"), d, d, sd);
    w1 = _cic_bld_weight(b, NM("mlp.fc_in.weight"), f, d, sd);
    c1 = _cic_bld_weight(b, NM("mlp.fc_in.bias"), 1, f, sd);
    w2 = _cic_bld_weight(b, NM("mlp.fc_out.weight"), d, f, sd);
    c2 = _cic_bld_weight(b, NM("mlp.fc_out.bias"), 1, d, sd);
    h = _cic_bld_norm(b, CIC_SITE_NORM1, l, x, g, bn, true, AN("ln_1"));
    q = _cic_bld_linear(b, CIC_SITE_ATTN, l, CIC_ROLE_READER, h, wq, bq, AN("q"));
    k = _cic_bld_linear(b, CIC_SITE_ATTN, l, CIC_ROLE_READER, h, wk, bk, AN("k"));
    v = _cic_bld_linear(b, CIC_SITE_ATTN, l, CIC_ROLE_READER, h, wv, bv, AN("v"));
    if (m->cfg.rope != CIC_ROPE_NONE) { /* GPT-J: rotary on q and k, as the rmsnorm block */
        q = _cic_bld_rope(b, l, q, m->cfg.heads, AN("q_rope"));
        k = _cic_bld_rope(b, l, k, m->cfg.heads, AN("k_rope"));
    }
    a = _cic_bld_attn(b, l, q, 0, k, 0, v, 0, AN("attn"));
    ao = _cic_bld_linear(b, CIC_SITE_ATTN, l, CIC_ROLE_WRITER, a, wo, -1, AN("out_proj"));
    u = _cic_bld_linear(b, CIC_SITE_MLP, l, CIC_ROLE_READER, h, w1, c1, AN("fc_in"));
    act = cic_op_blank(CIC_OP_ACT, CIC_SITE_MLP, l);
    act.in[0] = u;
    act.act = m->cfg.act;
    y = act.out = _cic_bld_act(b, AN("act"), f);
    _cic_bld_op(b, &act);
    mo = _cic_bld_linear(b, CIC_SITE_MLP, l, CIC_ROLE_WRITER, y, w2, c2, AN("fc_out"));
    s = _cic_bld_add(b, CIC_SITE_MLP, l, ao, mo, AN("branches"));
    return _cic_bld_add(b, CIC_SITE_MLP, l, s, x, AN("resid"));
#undef NM
#undef AN
}

static void build(cic_bld *b, int readout)
{
    cic_model *m = b->m;
    int l, x = m->input;
    for (l = 0; l < m->cfg.layers; l++)
        x = layer(b, l, x);
    _cic_bld_readout(b, readout, x, "transformer.ln_f", "lm_head", true);
}

/* Per layer: LN; q, k, v (RoPE on q and k when on), attention, out_proj;
 * fc_in, act, fc_out and the two adds; the head readout ln_f(x) W^T + b.
 * The norm's bias, once fused, is a bias of q, k and v (ns.bias false), as
 * is a checkpoint's qkv_bias. */
static void flops(cic_block_flops *f, const cic_model_cfg *cfg, int readout, cic_norm_state ns)
{
    double R = (double)cfg->tokens * cfg->samples, d = cfg->d_model, m = cfg->d_mlp;
    double N = cfg->tokens, B = cfg->samples, H = cfg->heads;
    f->norm1 = cic_op_flops_norm(R, d, ns.center, ns.gain, ns.bias);
    f->norm2 = 0;
    f->attn = 3 * cic_op_flops_linear(R, d, d, !ns.bias || cfg->qkv_bias) + /* q, k, v */
              (cfg->rope != CIC_ROPE_NONE
                   ? 2 * cic_op_flops_rope(R, cfg->rotary_dim ? H * cfg->rotary_dim : d)
                   : 0) +
              cic_op_flops_attn(B, H, N, d / H, cfg->causal) +
              cic_op_flops_linear(R, d, d, false);               /* out_proj */
    f->mlp = cic_op_flops_linear(R, d, m, true) +                /* fc_in */
             cic_op_flops_elementwise_act(cfg->act, R * m) +
             cic_op_flops_linear(R, m, d, true) +                /* fc_out */
             2 * cic_op_flops_add(R * d);                        /* branches, residual */
    f->final = readout == CIC_READOUT_HEAD
                   ? f->norm1 + cic_op_flops_linear(R, d, cfg->d_out, true)
                   : 0;
}

const cic_block_desc cic_block_parallel = {"parallel", CIC_NORM_LAYERNORM, 1e-5, CIC_ACT_GELU_TANH,
                                           false, false, weights, build, flops};
