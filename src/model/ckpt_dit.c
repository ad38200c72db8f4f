/* SPDX-License-Identifier: MIT */
/* ckpt_dit.c: DiT checkpoints (checkpoint.h): a folder without config.json
 * (a state dict alone), or one whose "architecture" starts with "DiT" and
 * that has no model_type. The reference code's names (blocks.{i}.attn.qkv,
 * attn.proj, mlp.fc1, fc2, adaLN_modulation.1, final_layer.*) are the dit
 * block's: GELU (tanh), LayerNorm without weights eps 1e-6, bidirectional,
 * with its final layer. The condition and the input stay seeded. A
 * rewrite cicheck verify reads (src/pipeline/verify_dit.c) opens here too,
 * a static fold's without its modulation linears. */
#include "ckpt_family.h"

#include <stdio.h>
#include <string.h>

/* The shape of tensor name in any shard ([rows, cols]; rows 0 when absent,
 * not 2-D or wider than CKPT_MAX_SIZE). */
static void shape2(const cic_ckpt *k, const char *name, int *rows, int *cols)
{
    int i;
    *rows = *cols = 0;
    for (i = 0; i < k->n_shard; i++) {
        const cic_stfile_tensor *t = cic_stfile_find(k->shard[i], name);
        /* a size past any model reads as absent (never cast to int) */
        if (t && t->ndim == 2 && t->shape[0] <= CKPT_MAX_SIZE && t->shape[1] <= CKPT_MAX_SIZE) {
            *rows = (int)t->shape[0];
            *cols = (int)t->shape[1];
        }
    }
}

/* A static-fold rewrite (docs/reference/dit-rewrite.md) has no modulation
 * linears: the condition's width is that of its calibration condition
 * "adaln.c0" ([d_cond] or [1, d_cond]), and *rows 6 d as if they were
 * there; nothing set when it has none. */
static void cond_of_static_fold(const cic_ckpt *k, int d, int *rows, int *cols)
{
    const cic_stfile_tensor *t = _cic_ckpt_find_any(k, "adaln.c0");
    int64_t n = 0;
    if (t && t->ndim == 1)
        n = t->shape[0];
    else if (t && t->ndim == 2 && t->shape[0] == 1)
        n = t->shape[1];
    if (n > 0 && n <= CIC_CASE_MAX_DIM) {
        *rows = 6 * d;
        *cols = (int)n;
    }
}

/* Widths from the tensors, the layers counted, the heads from
 * config.json's num_heads or the width (DiT-S 384: 6, DiT-B 768: 12, DiT-L
 * 1024 and DiT-XL 1152: 16). */
static int dit_sizes(cic_ckpt *k, cic_diag *d)
{
    static const int widths[][2] = {{384, 6}, {768, 12}, {1024, 16}, {1152, 16}};
    int dr, dc, fr, fc, ar, ac, hr, hc;
    size_t a;
    shape2(k, "blocks.0.attn.proj.weight", &dr, &dc);
    shape2(k, "blocks.0.mlp.fc1.weight", &fr, &fc);
    shape2(k, "blocks.0.adaLN_modulation.1.weight", &ar, &ac);
    shape2(k, "final_layer.linear.weight", &hr, &hc);
    if (!ar && dr)
        cond_of_static_fold(k, dr, &ar, &ac);
    if (!dr || dr != dc || !fr || fc != dr || ar != 6 * dr || !hr || hc != dr) {
        cic_diag_set(d, k->dir, 0, 0, "no config.json, and the tensors are not a DiT's: "
                     "blocks.0.attn.proj.weight [d, d], blocks.0.mlp.fc1.weight [mlp, d], "
                     "blocks.0.adaLN_modulation.1.weight [6 d, d_cond] and "
                     "final_layer.linear.weight [out, d] are needed");
        return -1;
    }
    k->layers = _cic_ckpt_count_blocks(k);
    k->hidden = dr;
    k->inter = fr;
    k->vocab = hr; /* the final layer's width: p * p * out_channels */
    k->cond = ac;
    k->heads = 0;
    if (cfg_int(k, "num_heads", 1, CIC_CASE_MAX_DIM, 0, &k->heads, d) < 0)
        return -1;
    for (a = 0; !k->heads && a < sizeof widths / sizeof widths[0]; a++)
        if (widths[a][0] == dr)
            k->heads = widths[a][1];
    if (k->heads < 1 || dr % k->heads || dr > CIC_CASE_MAX_DIM || ac > CIC_CASE_MAX_DIM) {
        cic_diag_set(d, k->dir, 0, 0, "DiT width %d: give num_heads in config.json (the "
                     "widths of DiT-S, B, L and XL are known), or %d heads do not divide it",
                     dr, k->heads);
        return -1;
    }
    k->kv_heads = k->heads;
    k->eps = 1e-6;
    k->act = CIC_ACT_GELU_TANH;
    return 0;
}

/* The reference code's names are the model's: blocks.{i}.* (from layer0),
 * final_layer.*. */
static int dit_parts(ckpt_part *p, const cic_ckpt *k, const char *name, int layer0, int rows,
                     int cols)
{
    static const char *const keep[] = {"final_layer.", NULL};
    (void)rows;
    (void)cols;
    return _cic_ckpt_own_parts(p, k, name, layer0, keep, "model.norm");
}

/* The dit block with its final layer (qkv_bias is the block's own). */
static void dit_model_cfg(const cic_ckpt *k, cic_model_cfg *cfg)
{
    cfg->block = CIC_BLOCK_DIT;
    cfg->d_cond = k->cond;
    cfg->final_layer = true;
    cfg->rope = CIC_ROPE_NONE;
    cfg->rope_theta = 10000;
    cfg->causal = false;
}

/* A DiT's tensors of layer l (model numbering). */
static int dit_check_layer(const cic_ckpt *k, const cic_model_cfg *cfg, int l, cic_diag *d)
{
    enum { D = CKPT_DIM_D, D3 = CKPT_DIM_3D, D6 = CKPT_DIM_6D, MLP = CKPT_DIM_MLP };
    static const ckpt_layer_tensor t[] = {
        {"attn.qkv.weight", D3, D},   {"attn.qkv.bias", 1, D3},
        {"attn.proj.weight", D, D},   {"attn.proj.bias", 1, D},
        {"mlp.fc1.weight", MLP, D},   {"mlp.fc1.bias", 1, MLP},
        {"mlp.fc2.weight", D, MLP},   {"mlp.fc2.bias", 1, D},
        {"adaLN_modulation.1.weight", D6, CKPT_DIM_COND}, {"adaLN_modulation.1.bias", 1, D6},
    };
    return _cic_ckpt_check_layer(k, cfg, "blocks.%d.%s", t, sizeof t / sizeof t[0], l, d);
}

/* The final layer: its modulation and its linear. */
static int dit_check_head(const cic_ckpt *k, const cic_model_cfg *cfg, cic_diag *d)
{
    int dm = k->hidden;
    if (_cic_ckpt_check_tensor(k, cfg, "final_layer.adaLN_modulation.1.weight", 2 * dm, k->cond,
                               d) < 0 ||
        _cic_ckpt_check_tensor(k, cfg, "final_layer.adaLN_modulation.1.bias", 1, 2 * dm, d) < 0 ||
        _cic_ckpt_check_tensor(k, cfg, "final_layer.linear.weight", k->vocab, dm, d) < 0 ||
        _cic_ckpt_check_tensor(k, cfg, "final_layer.linear.bias", 1, k->vocab, d) < 0)
        return -1;
    return 0;
}

const cic_ckpt_family _cic_ckpt_dit = {
    .name = "dit",
    .architecture = "DiT",
    .bare = true,
    .config = _cic_ckpt_nothing,
    .sizes = dit_sizes,
    .parts = dit_parts,
    .model_cfg = dit_model_cfg,
    .check_layer = dit_check_layer,
    .check_head = dit_check_head,
};
