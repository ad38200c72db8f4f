/* SPDX-License-Identifier: MIT */
/* block_rmsnorm.c: the RMSNorm block (LLaMA-like; Hugging Face names
 * layers.{i}.input_layernorm, self_attn.{q,k,v,o}_proj,
 * post_attention_layernorm, mlp.{gate,up,down}_proj): RMSNorm(x; g) =
 * g x / sqrt(mean(x^2) + eps), no biases (but q, k and v's with qkv_bias,
 * as Qwen2 has), a SwiGLU MLP, optionally RoPE on
 * q and k (rope, rope_theta) and grouped-query attention (k_proj and v_proj
 * [kv_heads head_dim, d]); then the final
 * RMSNorm and lm_head, or the residual stream. Norm kind RMSNorm with a
 * gain (the transforms that apply follow from it). */
#include "build.h"

#include <stdio.h>

/* kv_heads head_dim: the width of k and v (d without grouped heads). */
static int kv_width(const cic_model_cfg *m)
{
    return m->heads > 0 ? m->d_model / m->heads * cic_cfg_kv_heads(m) : m->d_model;
}

/* q, o 2d^2, k, v 2 d dkv, gate/up/down 3dm, two gammas 2d per layer (and
 * the q, k, v biases d + 2 dkv); the final gamma and lm_head d + d d_out. */
static void weights(const cic_model_cfg *m, uint64_t *layer, uint64_t *readout)
{
    uint64_t d = cic_count(m->d_model), f = cic_count(m->d_mlp), dout = cic_count(m->d_out);
    uint64_t kv = cic_count(kv_width(m));
    *layer = cic_sat_add(cic_sat_add(cic_sat_add(cic_sat_mul(2, cic_sat_mul(d, d)),
                                                 cic_sat_mul(2, cic_sat_mul(d, kv))),
                                     cic_sat_mul(3, cic_sat_mul(d, f))),
                         cic_sat_mul(2, d));
    if (m->qkv_bias)
        *layer = cic_sat_add(*layer, cic_sat_add(d, cic_sat_mul(2, kv)));
    *readout = cic_sat_add(d, cic_sat_mul(d, dout));
}

static void build(cic_bld *b, int readout)
{
    cic_model *m = b->m;
    int d = m->cfg.d_model, f = m->cfg.d_mlp, l, x = m->input, dkv = kv_width(&m->cfg);
    double sd = m->cfg.std;
    char n[96], o[96];
    for (l = 0; l < m->cfg.layers; l++) {
        int g1, wq, wk, wv, wo, g2, wg, wu, wd, bq = -1, bk = -1, bv = -1;
        int h1, q, k, v, a, ao, h2, gt, up, hm, mo;
        cic_op glu;
#define NM(s) (snprintf(n, sizeof n, "layers.%d.%s", l, s), n)
#define AN(s) (snprintf(o, sizeof o, "act.%d.%s", l, s), o)
        g1 = _cic_bld_gain(b, NM("input_layernorm.weight"), d);
        wq = _cic_bld_weight(b, NM("self_attn.q_proj.weight"), d, d, sd);
        wk = _cic_bld_weight(b, NM("self_attn.k_proj.weight"), dkv, d, sd);
        wv = _cic_bld_weight(b, NM("self_attn.v_proj.weight"), dkv, d, sd);
        if (m->cfg.qkv_bias) {
            bq = _cic_bld_weight(b, NM("self_attn.q_proj.bias"), 1, d, sd);
            bk = _cic_bld_weight(b, NM("self_attn.k_proj.bias"), 1, dkv, sd);
            bv = _cic_bld_weight(b, NM("self_attn.v_proj.bias"), 1, dkv, sd);
        }
        wo = _cic_bld_weight(b, NM("self_attn.o_proj.weight"), d, d, sd);
        g2 = _cic_bld_gain(b, NM("post_attention_layernorm.weight"), d);
        wg = _cic_bld_weight(b, NM("mlp.gate_proj.weight"), f, d, sd);
        wu = _cic_bld_weight(b, NM("mlp.up_proj.weight"), f, d, sd);
        wd = _cic_bld_weight(b, NM("mlp.down_proj.weight"), d, f, sd);
        h1 = _cic_bld_norm(b, CIC_SITE_NORM1, l, x, g1, -1, false, AN("input_layernorm"));
        q = _cic_bld_linear(b, CIC_SITE_ATTN, l, CIC_ROLE_READER, h1, wq, bq, AN("q"));
        k = _cic_bld_linear(b, CIC_SITE_ATTN, l, CIC_ROLE_READER, h1, wk, bk, AN("k"));
        v = _cic_bld_linear(b, CIC_SITE_ATTN, l, CIC_ROLE_READER, h1, wv, bv, AN("v"));
        if (m->cfg.rope != CIC_ROPE_NONE) {
            q = _cic_bld_rope(b, l, q, m->cfg.heads, AN("q_rope"));
            k = _cic_bld_rope(b, l, k, cic_cfg_kv_heads(&m->cfg), AN("k_rope"));
        }
        a = _cic_bld_attn(b, l, q, 0, k, 0, v, 0, AN("attn"));
        ao = _cic_bld_linear(b, CIC_SITE_ATTN, l, CIC_ROLE_WRITER, a, wo, -1, AN("o"));
        x = _cic_bld_add(b, CIC_SITE_ATTN, l, x, ao, AN("resid1"));
        h2 = _cic_bld_norm(b, CIC_SITE_NORM2, l, x, g2, -1, false, AN("post_attention_layernorm"));
        gt = _cic_bld_linear(b, CIC_SITE_MLP, l, CIC_ROLE_READER, h2, wg, -1, AN("gate"));
        up = _cic_bld_linear(b, CIC_SITE_MLP, l, CIC_ROLE_READER, h2, wu, -1, AN("up"));
        glu = cic_op_blank(CIC_OP_GLU, CIC_SITE_MLP, l);
        glu.in[0] = gt;
        glu.in[1] = up;
        glu.act = m->cfg.act;
        hm = glu.out = _cic_bld_act(b, AN("glu"), f);
        _cic_bld_op(b, &glu);
        mo = _cic_bld_linear(b, CIC_SITE_MLP, l, CIC_ROLE_WRITER, hm, wd, -1, AN("down"));
        x = _cic_bld_add(b, CIC_SITE_MLP, l, x, mo, AN("resid2"));
#undef NM
#undef AN
    }
    _cic_bld_readout(b, readout, x, "norm", "lm_head", false);
}

/* RMSNorm (Llama): x += o(attn(q, k, v of RMS1(x))), q and k through RoPE
 * when on, k and v of kv_heads heads; x += down(act(gate(h)) *
 * up(h)), h = RMS2(x); the head readout lm_head(RMS(x)). No bias but q, k
 * and v's with qkv_bias. */
static void flops(cic_block_flops *f, const cic_model_cfg *cfg, int readout, cic_norm_state ns)
{
    double R = (double)cfg->tokens * cfg->samples, d = cfg->d_model, m = cfg->d_mlp;
    double N = cfg->tokens, B = cfg->samples, H = cfg->heads, dkv = kv_width(cfg);
    bool rope = cfg->rope != CIC_ROPE_NONE;
    f->norm1 = f->norm2 = cic_op_flops_norm(R, d, ns.center, ns.gain, ns.bias);
    f->attn = cic_op_flops_linear(R, d, d, cfg->qkv_bias) +              /* q */
              2 * cic_op_flops_linear(R, d, dkv, cfg->qkv_bias) +        /* k, v */
              (rope ? cic_op_flops_rope(R, d) + cic_op_flops_rope(R, dkv) : 0) +
              cic_op_flops_attn(B, H, N, d / H, cfg->causal) +
              cic_op_flops_linear(R, d, d, false) +              /* o */
              cic_op_flops_add(R * d);
    f->mlp = 2 * cic_op_flops_linear(R, d, m, false) +           /* gate, up */
             cic_op_flops_glu(cfg->act, R * m) +
             cic_op_flops_linear(R, m, d, false) +               /* down */
             cic_op_flops_add(R * d);
    f->final = readout == CIC_READOUT_HEAD
                   ? f->norm1 + cic_op_flops_linear(R, d, cfg->d_out, false)
                   : 0;
}

const cic_block_desc cic_block_rmsnorm = {"rmsnorm", CIC_NORM_RMSNORM, 1e-5, CIC_ACT_SILU, false,
                                          true, weights, build, flops};
