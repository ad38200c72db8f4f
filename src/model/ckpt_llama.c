/* SPDX-License-Identifier: MIT */
/* ckpt_llama.c: the llama family of checkpoints (checkpoint.h): model_type
 * "llama", "mistral" or "qwen2"; RMSNorm, RoPE in the rotate_half layout,
 * grouped-query attention, SwiGLU, no biases but Qwen2's on q, k and v. The
 * rmsnorm block, its layers.{i}.* named model.layers.{i}.* here. */
#include "ckpt_family.h"

#include <float.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>

/* The sizes and the rest from config.json; what is not modelled (scaled or
 * partial RoPE, biases but Qwen2's, another activation) is refused. */
static int llama_config(cic_ckpt *k, cic_diag *d)
{
    const char *type = json_string_value(json_object_get(k->config, "model_type"));
    json_t *act;
    bool sw = false;
    int hd = 0;
    k->act = CIC_ACT_SILU;
    if (cfg_int(k, "hidden_size", 1, CIC_CASE_MAX_DIM, -1, &k->hidden, d) ||
        cfg_int(k, "num_attention_heads", 1, CIC_CASE_MAX_DIM, -1, &k->heads, d) ||
        cfg_int(k, "num_key_value_heads", 1, CIC_CASE_MAX_DIM, 0, &k->kv_heads, d) ||
        cfg_int(k, "intermediate_size", 1, CKPT_MAX_SIZE, -1, &k->inter, d) ||
        cfg_int(k, "num_hidden_layers", 1, CKPT_MAX_SIZE, -1, &k->layers, d) ||
        cfg_int(k, "vocab_size", 1, CKPT_MAX_SIZE, -1, &k->vocab, d) ||
        cfg_int(k, "head_dim", 1, CIC_CASE_MAX_DIM, 0, &hd, d) ||
        cfg_int(k, "sliding_window", 1, INT_MAX, 0, &k->sliding_window, d) ||
        cfg_f32(k, "rms_norm_eps", (double)FLT_TRUE_MIN, -1,
                "every engine uses eps as a binary32 value", &k->eps, d) ||
        cfg_f32(k, "rope_theta", (double)FLT_MIN, 10000,
                "the float32 engine takes it as a binary32 value", &k->theta, d) ||
        cfg_only(k, "partial_rotary_factor", 1, "RoPE on part of each head", d) ||
        cfg_off(k, "rope_scaling", "scaled RoPE", d) ||
        cfg_off(k, "attention_bias", "a bias on q, k, v and o", d) ||
        cfg_off(k, "mlp_bias", "a bias on the MLP", d) ||
        cfg_bool(k, "tie_word_embeddings", false, &k->tied, d) ||
        cfg_bool(k, "use_sliding_window", false, &sw, d))
        return -1;
    if (!k->kv_heads)
        k->kv_heads = k->heads;
    /* Qwen2: q, k, v biases always; its sliding_window applies only with
     * use_sliding_window */
    k->qkv_bias = !strcmp(type, "qwen2");
    if (k->qkv_bias && !sw)
        k->sliding_window = 0;
    if (k->hidden % k->heads || k->heads % k->kv_heads || (hd && hd != k->hidden / k->heads)) {
        cic_diag_set(d, k->cfg_path, 0, 0,
                     "hidden_size %d, num_attention_heads %d, num_key_value_heads %d%s: the "
                     "heads must divide hidden_size and the key/value heads the heads%s",
                     k->hidden, k->heads, k->kv_heads, hd ? ", head_dim set" : "",
                     hd ? " (and head_dim = hidden_size / heads)" : "");
        return -1;
    }
    act = json_object_get(k->config, "hidden_act");
    if (act && !(json_is_string(act) && !strcmp(json_string_value(act), "silu"))) {
        cic_diag_set(d, k->cfg_path, 0, 0, "hidden_act must be \"silu\" (SwiGLU)");
        return -1;
    }
    if ((k->hidden / k->heads) % 2) {
        cic_diag_set(d, k->cfg_path, 0, 0, "hidden_size %d / num_attention_heads %d = %d: RoPE "
                     "(rotate_half) needs an even head size", k->hidden, k->heads,
                     k->hidden / k->heads);
        return -1;
    }
    return 0;
}

static int llama_parts(ckpt_part *p, const cic_ckpt *k, const char *name, int layer0, int rows,
                       int cols)
{
    int l, n = 0;
    (void)rows;
    (void)cols;
    if (sscanf(name, "layers.%d.%n", &l, &n) == 1 && n > 0) {
        snprintf(p->name, sizeof p->name, "model.layers.%d.%s", l + layer0, name + n);
        return 1;
    }
    return _cic_ckpt_readout_parts(p, k, name, "model.norm");
}

static void llama_model_cfg(const cic_ckpt *k, cic_model_cfg *cfg)
{
    cfg->block = CIC_BLOCK_RMSNORM;
    cfg->qkv_bias = k->qkv_bias;
    cfg->rope = CIC_ROPE_HALF;
    cfg->rope_theta = k->theta;
    cfg->causal = true;
}

/* The tensors of layer l (model numbering), Qwen2's q, k and v biases, and
 * the biases it must not have. */
static int llama_check_layer(const cic_ckpt *k, const cic_model_cfg *cfg, int l, cic_diag *d)
{
    enum { D = CKPT_DIM_D, KV = CKPT_DIM_KV, MLP = CKPT_DIM_MLP };
    static const ckpt_layer_tensor t[] = {
        {"input_layernorm.weight", 1, D},       {"self_attn.q_proj.weight", D, D},
        {"self_attn.k_proj.weight", KV, D},     {"self_attn.v_proj.weight", KV, D},
        {"self_attn.o_proj.weight", D, D},      {"post_attention_layernorm.weight", 1, D},
        {"mlp.gate_proj.weight", MLP, D},       {"mlp.up_proj.weight", MLP, D},
        {"mlp.down_proj.weight", D, MLP},
    };
    static const ckpt_layer_tensor qkv[] = {
        {"self_attn.q_proj.bias", 1, D},
        {"self_attn.k_proj.bias", 1, KV},
        {"self_attn.v_proj.bias", 1, KV},
    };
    char n[300];
    size_t i;
    if (_cic_ckpt_check_layer(k, cfg, "layers.%d.%s", t, sizeof t / sizeof t[0], l, d) < 0 ||
        (k->qkv_bias && _cic_ckpt_check_layer(k, cfg, "layers.%d.%s", qkv, 3, l, d) < 0))
        return -1;
    for (i = 0; i < sizeof t / sizeof t[0]; i++) {
        bool q_k_v = i >= 1 && i <= 3;
        snprintf(n, sizeof n, "model.layers.%d.%s", l + cfg->layer0, t[i].name);
        memcpy(strrchr(n, '.'), ".bias", 6);
        if (strstr(n, "_proj") && !(k->qkv_bias && q_k_v) && has_tensor(k, n)) {
            cic_diag_set(d, k->dir, 0, 0, "tensor '%s': biases are not modelled here (%s)", n,
                         q_k_v ? "llama and mistral have none on q, k and v; Qwen2 does "
                                 "(model_type qwen2)"
                               : "only q, k and v have biases, in Qwen2");
            return -1;
        }
    }
    return 0;
}

/* The final RMSNorm's gain and the head (lm_head, or the tied embedding). */
static int llama_check_head(const cic_ckpt *k, const cic_model_cfg *cfg, cic_diag *d)
{
    if (_cic_ckpt_check_tensor(k, cfg, "norm.weight", 1, k->hidden, d) < 0 ||
        _cic_ckpt_check_tensor(k, cfg, "lm_head.weight", k->vocab, k->hidden, d) < 0)
        return -1;
    return 0;
}

static const char *const llama_types[] = {"llama", "mistral", "qwen2", NULL};

const cic_ckpt_family _cic_ckpt_llama = {
    .name = "llama",
    .model_types = llama_types,
    .embed = "model.embed_tokens.weight",
    .verify = true,
    .config = llama_config,
    .sizes = _cic_ckpt_nothing,
    .parts = llama_parts,
    .model_cfg = llama_model_cfg,
    .check_layer = llama_check_layer,
    .check_head = llama_check_head,
};
