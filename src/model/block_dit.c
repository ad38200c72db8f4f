/* SPDX-License-Identifier: MIT */
/* block_dit.c: the DiT block (adaLN-Zero as in the DiT reference code, DESIGN.md
 * section 1): per layer the modulation (SiLU(c) and the adaLN linear, six
 * chunks of d per sample), then the attention branch (LayerNorm without
 * affine, modulate with shift1 and scale1, qkv, attention, proj, gate1, the
 * residual add) and the MLP branch (the same with shift2, scale2, gate2),
 * and the final layer (its own modulation: shift, scale; modulate; a
 * linear head). Its norms are affine-free and modulated per sample (adaLN):
 * the adaLN strategies apply, as rewrites of this graph (src/xform). */
#include "build.h"

#include <string.h>


/* An activation whose rows are samples (block_rows 0) or a matrix of
 * block_rows rows per sample. */
static int A_samples(cic_bld *b, const char *name, int block_rows, int cols)
{
    int id;
    cic_model *m = b->m;
    if (!b->ok)
        return -1;
    id = cic_model_tensor_add(m, name, CIC_T_ACT,
                              m->cfg.samples * (block_rows ? block_rows : 1), cols);
    if (id < 0) {
        b->ok = 0;
        return -1;
    }
    m->t[id].rows_kind = block_rows ? CIC_ROWS_SAMPLE_MATRIX : CIC_ROWS_SAMPLES;
    m->t[id].block_rows = block_rows;
    return id;
}

static int modulate(cic_bld *b, enum cic_site site, int layer, int x, int mod,
                    int shift_col, int scale_col, const char *out_name)
{
    cic_op o = cic_op_blank(CIC_OP_MODULATE, site, layer);
    if (!b->ok)
        return -1;
    o.in[0] = x;
    o.in[1] = mod;
    o.in_col[0] = shift_col;
    o.in_col[1] = scale_col;
    o.out = _cic_bld_act(b, out_name, b->m->cfg.d_model);
    _cic_bld_op(b, &o);
    return o.out;
}

static int gate(cic_bld *b, enum cic_site site, int layer, int x, int mod, int col,
                const char *out_name)
{
    cic_op o = cic_op_blank(CIC_OP_GATE, site, layer);
    if (!b->ok)
        return -1;
    o.in[0] = x;
    o.in[1] = mod;
    o.in_col[0] = col;
    o.out = _cic_bld_act(b, out_name, b->m->t[x].cols);
    _cic_bld_op(b, &o);
    return o.out;
}

/* The norm site: h = LN0(x), then h (1 + scale) + shift from the chunks of
 * mod. Returns the reader's input. */
static int norm_site(cic_bld *b, enum cic_site site, int layer, int x, int mod,
                     int shift_col, int scale_col, const char *tag)
{
    char n[112];
    int h;
    snprintf(n, sizeof n, "act.%d.%s", layer, tag);
    h = _cic_bld_norm(b, site, layer, x, -1, -1, true, n);
    snprintf(n, sizeof n, "act.%d.%s.mod", layer, tag);
    return modulate(b, site, layer, h, mod, shift_col, scale_col, n);
}

/* The gate site: x + gate * o. */
static int gate_site(cic_bld *b, enum cic_site site, int layer, int x, int o, int mod,
                     int gate_col, const char *tag)
{
    char n[112];
    int g;
    snprintf(n, sizeof n, "act.%d.%s", layer, tag);
    g = gate(b, site, layer, o, mod, gate_col, n);
    snprintf(n, sizeof n, "act.%d.%s.resid", layer, tag);
    return _cic_bld_add(b, site, layer, x, g, n);
}

/* The adaLN linear of a modulation: [B, k] = SiLU(c) W^T + b. */
static int modulation(cic_bld *b, int layer, int silu_c, int w, int bias, const char *name)
{
    cic_op lo = cic_op_blank(CIC_OP_LINEAR, CIC_SITE_MOD, layer);
    if (!b->ok)
        return -1;
    lo.in[0] = silu_c;
    lo.w = w;
    lo.b = bias;
    lo.out = A_samples(b, name, 0, b->m->t[w].rows);
    _cic_bld_op(b, &lo);
    return lo.out;
}

static int act_op(cic_bld *b, enum cic_site site, int layer, enum cic_act act, int in,
                  int out)
{
    cic_op ac = cic_op_blank(CIC_OP_ACT, site, layer);
    if (!b->ok)
        return -1;
    ac.in[0] = in;
    ac.act = act;
    ac.out = out;
    _cic_bld_op(b, &ac);
    return out;
}

/* One block l on stream x; returns the new stream. */
static int dit_layer(cic_bld *b, int l, int x, int sc)
{
    const cic_model_cfg *cfg = &b->m->cfg;
    int d = cfg->d_model, f = cfg->d_mlp, dc = cfg->d_cond;
    double sd = cfg->std;
    int wada, bada, wqkv, bqkv, wo, bo, w1, b1, w2, b2, mod, hm, qkv, a, oo, u, v, w;
    char n[112], o[112];
#define NM(s) (snprintf(n, sizeof n, "blocks.%d.%s", l, s), n)
#define AN(s) (snprintf(o, sizeof o, "act.%d.%s", l, s), o)
    wqkv = _cic_bld_weight(b, NM("attn.qkv.weight"), 3 * d, d, sd);
    bqkv = _cic_bld_weight(b, NM("attn.qkv.bias"), 1, 3 * d, sd);
    wo = _cic_bld_weight(b, NM("attn.proj.weight"), d, d, sd);
    bo = _cic_bld_weight(b, NM("attn.proj.bias"), 1, d, sd);
    w1 = _cic_bld_weight(b, NM("mlp.fc1.weight"), f, d, sd);
    b1 = _cic_bld_weight(b, NM("mlp.fc1.bias"), 1, f, sd);
    w2 = _cic_bld_weight(b, NM("mlp.fc2.weight"), d, f, sd);
    b2 = _cic_bld_weight(b, NM("mlp.fc2.bias"), 1, d, sd);
    wada = _cic_bld_weight(b, NM("adaLN_modulation.1.weight"), 6 * d, dc, sd);
    bada = _cic_bld_weight(b, NM("adaLN_modulation.1.bias"), 1, 6 * d, sd);
    mod = modulation(b, l, sc, wada, bada, AN("mod"));
    /* attention branch: shift1 0, scale1 d, gate1 2d */
    hm = norm_site(b, CIC_SITE_NORM1, l, x, mod, 0, d, "norm1");
    qkv = _cic_bld_linear(b, CIC_SITE_ATTN, l, CIC_ROLE_READER, hm, wqkv, bqkv, AN("qkv"));
    a = _cic_bld_attn(b, l, qkv, 0, qkv, d, qkv, 2 * d, AN("attn"));
    oo = _cic_bld_linear(b, CIC_SITE_ATTN, l, CIC_ROLE_WRITER, a, wo, bo, AN("proj"));
    x = gate_site(b, CIC_SITE_GATE1, l, x, oo, mod, 2 * d, "gate1");
    /* MLP branch: shift2 3d, scale2 4d, gate2 5d */
    hm = norm_site(b, CIC_SITE_NORM2, l, x, mod, 3 * d, 4 * d, "norm2");
    u = _cic_bld_linear(b, CIC_SITE_MLP, l, CIC_ROLE_READER, hm, w1, b1, AN("fc1"));
    v = act_op(b, CIC_SITE_MLP, l, cfg->act, u, _cic_bld_act(b, AN("act"), f));
    w = _cic_bld_linear(b, CIC_SITE_MLP, l, CIC_ROLE_WRITER, v, w2, b2, AN("fc2"));
    return gate_site(b, CIC_SITE_GATE2, l, x, w, mod, 5 * d, "gate2");
#undef NM
#undef AN
}

/* The final layer: its modulation (shift 0, scale d), modulate, the head. */
static int dit_final(cic_bld *b, int x, int sc)
{
    const cic_model_cfg *cfg = &b->m->cfg;
    int d = cfg->d_model, dc = cfg->d_cond;
    double sd = cfg->std;
    int wfa = _cic_bld_weight(b, "final_layer.adaLN_modulation.1.weight", 2 * d, dc, sd);
    int bfa = _cic_bld_weight(b, "final_layer.adaLN_modulation.1.bias", 1, 2 * d, sd);
    int wl = _cic_bld_weight(b, "final_layer.linear.weight", cfg->d_out, d, sd);
    int bl = _cic_bld_weight(b, "final_layer.linear.bias", 1, cfg->d_out, sd);
    int fmod = modulation(b, -1, sc, wfa, bfa, "act.final.mod");
    int hm = norm_site(b, CIC_SITE_FINAL, -1, x, fmod, 0, d, "final");
    return _cic_bld_linear(b, CIC_SITE_FINAL, -1, CIC_ROLE_READER, hm, wl, bl, "act.final.linear");
}

/* as preln without LN parameters (qkv, proj, fc1, fc2 and their biases 4d^2
 * + 2dm + 11d + m), plus adaLN 6 d d_c + 6d, per layer; the final layer's
 * adaLN 2 d d_c + 2d and its linear (d + 1) d_out. */
static void weights(const cic_model_cfg *m, uint64_t *layer, uint64_t *readout)
{
    uint64_t d = cic_count(m->d_model), f = cic_count(m->d_mlp);
    uint64_t dout = cic_count(m->d_out), dc = cic_count(m->d_cond);
    *layer = cic_sat_add(cic_sat_add(cic_sat_mul(4, cic_sat_mul(d, d)),
                                     cic_sat_mul(2, cic_sat_mul(d, f))),
                         cic_sat_add(cic_sat_mul(11, d), f));
    *layer = cic_sat_add(*layer, cic_sat_mul(6, cic_sat_mul(d, dc)));
    *readout = cic_sat_add(cic_sat_mul(2, cic_sat_mul(d, dc)),
                           cic_sat_add(cic_sat_mul(2, d), cic_sat_mul(d + 1, dout)));
}

/* a dit case reads out through its final layer, or the stream (no readout
 * choice) */
static void build(cic_bld *b, int readout)
{
    cic_model *m = b->m;
    const cic_model_cfg *cfg = &m->cfg;
    int dc = cfg->d_cond, l, x, sc;
    (void)readout;
    m->cond = cic_model_tensor_add(m, "cond", CIC_T_INPUT, cfg->samples, dc);
    if (m->cond < 0) {
        b->ok = 0;
        return;
    }
    m->t[m->cond].rows_kind = CIC_ROWS_SAMPLES;
    _cic_fill(m, m->cond, 1.0);
    sc = act_op(b, CIC_SITE_MOD, -1, CIC_ACT_SILU, m->cond, A_samples(b, "act.silu_c", 0, dc));
    x = m->input;
    for (l = 0; l < cfg->layers; l++)
        x = dit_layer(b, l, x, sc);
    m->residual = x;
    m->output = cfg->final_layer ? dit_final(b, x, sc) : x;
    /* residual readout of a LayerNorm model: compared without the row mean;
     * the final layer's head output is compared as it is */
    m->center_out = !cfg->final_layer;
}

const cic_block_desc cic_block_dit = {"dit", CIC_NORM_ADALN, 1e-6, CIC_ACT_GELU_TANH, true,
                                      false, weights, build, NULL};
