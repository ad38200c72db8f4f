/* SPDX-License-Identifier: MIT */
/* ckpt_opt.c: OPT checkpoints (checkpoint.h): model_type "opt",
 * OPTForCausalLM. Pre-LN with biases, ReLU or GELU, the LayerNorm eps 1e-5
 * of its code, learned positions (offset 2) added to the token embedding,
 * the head tied to embed_tokens unless lm_head.weight is there. The preln
 * block, its timm names mapped to model.decoder.layers.{i}.* (q, k and v
 * stacked into attn.qkv). */
#include "ckpt_family.h"

#include <stdio.h>
#include <string.h>

/* Post-LN OPT (do_layer_norm_before false), projected embeddings and OPT
 * without biases or norm weights are refused. */
static int opt_config(cic_ckpt *k, cic_diag *d)
{
    json_t *v;
    int proj = 0;
    if (cfg_int(k, "hidden_size", 1, CIC_CASE_MAX_DIM, -1, &k->hidden, d) ||
        cfg_int(k, "num_attention_heads", 1, CIC_CASE_MAX_DIM, -1, &k->heads, d) ||
        cfg_int(k, "ffn_dim", 1, CKPT_MAX_SIZE, -1, &k->inter, d) ||
        cfg_int(k, "num_hidden_layers", 1, CKPT_MAX_SIZE, -1, &k->layers, d) ||
        cfg_int(k, "vocab_size", 1, CKPT_MAX_SIZE, -1, &k->vocab, d) ||
        cfg_int(k, "word_embed_proj_dim", 1, CKPT_MAX_SIZE, 0, &proj, d) ||
        cfg_bool(k, "tie_word_embeddings", true, &k->tied, d))
        return -1;
    v = json_object_get(k->config, "do_layer_norm_before");
    if (v && !json_is_true(v)) {
        cic_diag_set(d, k->cfg_path, 0, 0, "do_layer_norm_before is false (post-LN, as OPT-350m): "
                     "not modelled (the preln block)");
        return -1;
    }
    if ((proj && proj != k->hidden) || k->hidden % k->heads) {
        cic_diag_set(d, k->cfg_path, 0, 0, "word_embed_proj_dim %d differs from hidden_size %d "
                     "(projected embeddings are not modelled), or the %d heads do not divide "
                     "it", proj, k->hidden, k->heads);
        return -1;
    }
    v = json_object_get(k->config, "activation_function");
    if (!v || (json_is_string(v) && !strcmp(json_string_value(v), "relu")))
        k->act = CIC_ACT_RELU;
    else if (json_is_string(v) && !strcmp(json_string_value(v), "gelu"))
        k->act = CIC_ACT_GELU;
    else {
        cic_diag_set(d, k->cfg_path, 0, 0, "activation_function must be \"relu\" or \"gelu\"");
        return -1;
    }
    v = json_object_get(k->config, "enable_bias");
    if ((v && !json_is_true(v)) ||
        ((v = json_object_get(k->config, "layer_norm_elementwise_affine")) && !json_is_true(v))) {
        cic_diag_set(d, k->cfg_path, 0, 0, "enable_bias or layer_norm_elementwise_affine is "
                     "false: OPT without biases or norm weights is not modelled");
        return -1;
    }
    k->kv_heads = k->heads;
    k->eps = 1e-5; /* OPT's code: nn.LayerNorm's default, no key */
    return 0;
}

/* OPT's names for blocks.{l}.X (the preln block's timm names). */
static int opt_layer_parts(ckpt_part *p, const char *x, int l, int rows, int cols)
{
    static const char *const same[][2] = {
        {"norm1.", "self_attn_layer_norm."}, {"attn.proj.", "self_attn.out_proj."},
        {"norm2.", "final_layer_norm."},      {"mlp.fc1.", "fc1."},
        {"mlp.fc2.", "fc2."}};
    size_t i;
    if (!strncmp(x, "attn.qkv.", 9)) { /* q, k, v stacked */
        static const char *const qkv[] = {"q_proj", "k_proj", "v_proj"};
        for (i = 0; i < 3; i++) {
            snprintf(p[i].name, sizeof p[i].name, "model.decoder.layers.%d.self_attn.%s.%s", l,
                     qkv[i], x + 9);
            p[i].rows = rows == 1 ? 1 : rows / 3;
            p[i].cols = rows == 1 ? cols / 3 : cols;
        }
        return 3;
    }
    for (i = 0; i < sizeof same / sizeof same[0]; i++)
        if (!strncmp(x, same[i][0], strlen(same[i][0]))) {
            snprintf(p->name, sizeof p->name, "model.decoder.layers.%d.%s%s", l, same[i][1],
                     x + strlen(same[i][0]));
            return 1;
        }
    return 0;
}

static int opt_parts(ckpt_part *p, const cic_ckpt *k, const char *name, int layer0, int rows,
                     int cols)
{
    int l, n = 0;
    if (sscanf(name, "blocks.%d.%n", &l, &n) == 1 && n > 0)
        return opt_layer_parts(p, name + n, l + layer0, rows, cols);
    if (_cic_ckpt_readout_parts(p, k, name, "model.decoder.final_layer_norm"))
        return 1;
    if (strcmp(name, "head.bias"))
        return 0;
    if (has_tensor(k, "lm_head.bias"))
        snprintf(p->name, sizeof p->name, "lm_head.bias"); /* a rewrite's fused final LN */
    else
        p->zero = true; /* OPT's head has no bias */
    return 1;
}

static void opt_model_cfg(const cic_ckpt *k, cic_model_cfg *cfg)
{
    cfg->block = CIC_BLOCK_PRELN;
    cfg->qkv_bias = k->qkv_bias;
    cfg->rope = CIC_ROPE_NONE;
    cfg->rope_theta = 10000;
    cfg->causal = true;
}

/* The final LayerNorm and the head (its bias zero when absent). */
static int opt_check_head(const cic_ckpt *k, const cic_model_cfg *cfg, cic_diag *d)
{
    if (_cic_ckpt_check_tensor(k, cfg, "norm.weight", 1, k->hidden, d) < 0 ||
        _cic_ckpt_check_tensor(k, cfg, "norm.bias", 1, k->hidden, d) < 0 ||
        _cic_ckpt_check_tensor(k, cfg, "head.weight", k->vocab, k->hidden, d) < 0)
        return -1;
    return 0;
}

static const char *const opt_types[] = {"opt", NULL};

const cic_ckpt_family _cic_ckpt_opt = {
    .name = "opt",
    .model_types = opt_types,
    .embed = "model.decoder.embed_tokens.weight",
    .positions = "model.decoder.embed_positions.weight",
    .positions_offset = 2,
    .verify = true,
    .config = opt_config,
    .sizes = _cic_ckpt_nothing,
    .parts = opt_parts,
    .model_cfg = opt_model_cfg,
    .check_layer = _cic_ckpt_check_preln_layer,
    .check_head = opt_check_head,
};
