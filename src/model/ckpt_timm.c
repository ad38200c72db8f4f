/* SPDX-License-Identifier: MIT */
/* ckpt_timm.c: timm ViT checkpoints (checkpoint.h): config.json's
 * "architecture": "vit_..." and no model_type. Pre-LN, GELU, LayerNorm eps
 * 1e-6, bidirectional; the preln block, whose names are timm's. No token
 * embedding: the input is hidden states. */
#include "ckpt_family.h"

#include "../base/json_type.h"

#include <stdio.h>
#include <string.h>

/* The heads: config.json's num_heads, else model_args.num_heads, else the
 * architecture's size (tiny 3, small 6, base 12, large and huge 16);
 * 0 when none says. 0, or -1 with d set. */
static int timm_heads(cic_ckpt *k, cic_diag *d)
{
    static const struct {
        const char *size;
        int heads;
    } sizes[] = {{"vit_tiny_", 3}, {"vit_small_", 6}, {"vit_base_", 12}, {"vit_large_", 16},
                 {"vit_huge_", 16}};
    const char *arch = json_string_value(json_object_get(k->config, "architecture"));
    json_t *args = json_object_get(k->config, "model_args");
    size_t a;
    k->heads = 0;
    if (cfg_int(k, "num_heads", 1, CIC_CASE_MAX_DIM, 0, &k->heads, d) < 0)
        return -1;
    if (!k->heads && json_object_get(args, "num_heads")) {
        json_t *h = json_object_get(args, "num_heads");
        if (!json_is_integer(h) || json_integer_value(h) < 1 ||
            json_integer_value(h) > CIC_CASE_MAX_DIM) {
            cic_diag_set(d, k->cfg_path, 0, 0, "'model_args.num_heads' is %s; an integer in 1 "
                         ".. %d expected", json_is_integer(h) ? "out of range"
                         : cic_json_type_name(h), CIC_CASE_MAX_DIM);
            return -1;
        }
        k->heads = (int)json_integer_value(h);
    }
    for (a = 0; !k->heads && a < sizeof sizes / sizeof sizes[0]; a++)
        if (!strncmp(arch, sizes[a].size, strlen(sizes[a].size)))
            k->heads = sizes[a].heads;
    return 0;
}

/* What some timm ViTs add to the block and the preln block does not run
 * (LayerScale's ls1 and ls2 as DeiT-III has, q and k norms): refused by
 * name rather than dropped. 0, or -1 with d set. */
static int timm_unmodelled(const cic_ckpt *k, cic_diag *d)
{
    static const char *const extra[] = {"blocks.0.ls1.gamma", "blocks.0.ls2.gamma",
                                        "blocks.0.attn.q_norm.weight",
                                        "blocks.0.attn.k_norm.weight"};
    size_t i;
    for (i = 0; i < sizeof extra / sizeof extra[0]; i++)
        if (_cic_ckpt_find_any(k, extra[i])) {
            cic_diag_set(d, k->dir, 0, 0, "tensor '%s': LayerScale and q/k norms are not "
                         "modelled (the preln block)", extra[i]);
            return -1;
        }
    return 0;
}

/* Widths from the tensors (blocks.0.mlp.fc1.weight [mlp, d], head.weight;
 * not from norm1, which a rewrite with fused LayerNorms leaves out), the
 * layers counted, the heads as timm_heads finds them. */
static int timm_sizes(cic_ckpt *k, cic_diag *d)
{
    const char *arch = json_string_value(json_object_get(k->config, "architecture"));
    const cic_stfile_tensor *f1 = _cic_ckpt_find_any(k, "blocks.0.mlp.fc1.weight");
    const cic_stfile_tensor *hd = _cic_ckpt_find_any(k, "head.weight");
    k->layers = _cic_ckpt_count_blocks(k);
    if (!f1 || !hd || f1->ndim != 2 || hd->ndim != 2) {
        cic_diag_set(d, k->dir, 0, 0, "a timm ViT needs blocks.0.mlp.fc1.weight [mlp, d] and "
                     "head.weight [classes, d]");
        return -1;
    }
    if (f1->shape[1] > CIC_CASE_MAX_DIM || f1->shape[0] > CKPT_MAX_SIZE ||
        hd->shape[0] > CKPT_MAX_SIZE) {
        cic_diag_set(d, k->dir, 0, 0, "a timm ViT of width %lld, MLP %lld, %lld classes: at "
                     "most %d, %d, %d", (long long)f1->shape[1], (long long)f1->shape[0],
                     (long long)hd->shape[0], CIC_CASE_MAX_DIM, CKPT_MAX_SIZE, CKPT_MAX_SIZE);
        return -1;
    }
    k->hidden = (int)f1->shape[1];
    k->inter = (int)f1->shape[0];
    k->vocab = (int)hd->shape[0];
    if (timm_heads(k, d) < 0)
        return -1;
    if (k->heads < 1 || k->hidden < 1 || k->hidden % k->heads || k->hidden > CIC_CASE_MAX_DIM ||
        k->inter < 1 || k->inter > CIC_CASE_MAX_DIM * 64 || k->vocab < 1) {
        cic_diag_set(d, k->cfg_path, 0, 0, "architecture '%s': no num_heads in config.json and "
                     "no size in the name (vit_tiny_, vit_small_, vit_base_, vit_large_, "
                     "vit_huge_), or %d heads that do not divide the width %d", arch, k->heads,
                     k->hidden);
        return -1;
    }
    if (timm_unmodelled(k, d) < 0)
        return -1;
    k->kv_heads = k->heads;
    k->eps = 1e-6;
    k->act = CIC_ACT_GELU;
    return 0;
}

/* timm's names are the model's: blocks.{i}.* (from layer0), norm.*, head.*. */
static int timm_parts(ckpt_part *p, const cic_ckpt *k, const char *name, int layer0, int rows,
                      int cols)
{
    static const char *const keep[] = {"norm.", "head.", NULL};
    (void)rows;
    (void)cols;
    return _cic_ckpt_own_parts(p, k, name, layer0, keep, "model.norm");
}

static void timm_model_cfg(const cic_ckpt *k, cic_model_cfg *cfg)
{
    cfg->block = CIC_BLOCK_PRELN;
    cfg->qkv_bias = k->qkv_bias;
    cfg->rope = CIC_ROPE_NONE;
    cfg->rope_theta = 10000;
    cfg->causal = false; /* a ViT attends both ways */
}

/* The final LayerNorm and the classifier head with its bias. */
static int timm_check_head(const cic_ckpt *k, const cic_model_cfg *cfg, cic_diag *d)
{
    if (_cic_ckpt_check_tensor(k, cfg, "norm.weight", 1, k->hidden, d) < 0 ||
        _cic_ckpt_check_tensor(k, cfg, "norm.bias", 1, k->hidden, d) < 0 ||
        _cic_ckpt_check_tensor(k, cfg, "head.weight", k->vocab, k->hidden, d) < 0 ||
        _cic_ckpt_check_tensor(k, cfg, "head.bias", 1, k->vocab, d) < 0)
        return -1;
    return 0;
}

const cic_ckpt_family _cic_ckpt_timm = {
    .name = "timm",
    .architecture = "vit_",
    .verify = true, /* hidden-state inputs only */
    .config = _cic_ckpt_nothing,
    .sizes = timm_sizes,
    .parts = timm_parts,
    .model_cfg = timm_model_cfg,
    .check_layer = _cic_ckpt_check_preln_layer,
    .check_head = timm_check_head,
};
