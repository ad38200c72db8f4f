/* SPDX-License-Identifier: MIT */
/* checkpoint_family.c: config.json and the tensor names of each checkpoint
 * family (checkpoint.h): llama, opt, timm ViT and DiT. */
#include "checkpoint_int.h"

#include <math.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* An integer key >= lo; absent: def (def < 0: required). */
static int cfg_int(const cic_ckpt *k, const char *key, int lo, int def, int *out, cic_diag *d)
{
    json_t *v = json_object_get(k->config, key);
    if (!v || json_is_null(v)) {
        if (def < 0) {
            cic_diag_set(d, k->cfg_path, 0, 0, "'%s' missing (an integer >= %d)", key, lo);
            return -1;
        }
        *out = def;
        return 0;
    }
    if (!json_is_integer(v) || json_integer_value(v) < lo ||
        json_integer_value(v) > CIC_CASE_MAX_DIM * 64LL) {
        cic_diag_set(d, k->cfg_path, 0, 0, "'%s' must be an integer in %d .. %lld", key, lo,
                     CIC_CASE_MAX_DIM * 64LL);
        return -1;
    }
    *out = (int)json_integer_value(v);
    return 0;
}
static int cfg_num(const cic_ckpt *k, const char *key, double def, double *out, cic_diag *d)
{
    json_t *v = json_object_get(k->config, key);
    if (!v || json_is_null(v)) {
        if (def < 0) {
            cic_diag_set(d, k->cfg_path, 0, 0, "'%s' missing (a positive number)", key);
            return -1;
        }
        *out = def;
        return 0;
    }
    if (!json_is_number(v) || !(json_number_value(v) > 0) || !isfinite(json_number_value(v))) {
        cic_diag_set(d, k->cfg_path, 0, 0, "'%s' must be a positive number", key);
        return -1;
    }
    *out = json_number_value(v);
    return 0;
}
/* A key that must be absent, null or false (what is not modelled). */
static int cfg_off(const cic_ckpt *k, const char *key, const char *what, cic_diag *d)
{
    json_t *v = json_object_get(k->config, key);
    if (!v || json_is_null(v) || json_is_false(v))
        return 0;
    cic_diag_set(d, k->cfg_path, 0, 0, "'%s' is set: %s is not modelled", key, what);
    return -1;
}
/* OPTForCausalLM: pre-LN (do_layer_norm_before) with biases, ReLU or GELU,
 * the LayerNorm eps 1e-5 of its code, learned positions (offset 2), the
 * head tied to embed_tokens unless lm_head.weight is there. */
static int read_config_opt(cic_ckpt *k, cic_diag *d)
{
    json_t *v;
    int proj = 0;
    k->fam = FAM_OPT;
    k->embed = "model.decoder.embed_tokens.weight";
    if (cfg_int(k, "hidden_size", 1, -1, &k->hidden, d) ||
        cfg_int(k, "num_attention_heads", 1, -1, &k->heads, d) ||
        cfg_int(k, "ffn_dim", 1, -1, &k->inter, d) ||
        cfg_int(k, "num_hidden_layers", 1, -1, &k->layers, d) ||
        cfg_int(k, "vocab_size", 1, -1, &k->vocab, d) ||
        cfg_int(k, "word_embed_proj_dim", 1, 0, &proj, d))
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
    k->eps = 1e-5;
    v = json_object_get(k->config, "tie_word_embeddings");
    k->tied = !v || json_is_true(v);
    return 0;
}
int read_config(cic_ckpt *k, cic_diag *d)
{
    json_error_t e;
    json_t *mt, *act, *tie;
    const char *type;
    int hd = 0;
    snprintf(k->cfg_path, sizeof k->cfg_path, "%s/config.json", k->dir);
    if (access(k->dir, F_OK) != 0) {
        cic_diag_set(d, k->dir, 0, 0, "no such checkpoint folder (config.json and "
                     "model.safetensors expected)");
        return -1;
    }
    if (access(k->cfg_path, F_OK) != 0) { /* a DiT's state dict alone: sizes from tensors */
        k->config = json_object();
        k->fam = FAM_DIT;
        return k->config ? 0 : -1;
    }
    k->config = json_load_file(k->cfg_path, JSON_REJECT_DUPLICATES, &e);
    if (!k->config) {
        cic_diag_set(d, k->cfg_path, e.line > 0 ? e.line : 0, e.column > 0 ? e.column : 0,
                     "%s", e.text);
        return -1;
    }
    if (!json_is_object(k->config)) {
        cic_diag_set(d, k->cfg_path, 0, 0, "not a JSON object");
        return -1;
    }
    mt = json_object_get(k->config, "model_type");
    type = json_is_string(mt) ? json_string_value(mt) : NULL;
    if (type && !strcmp(type, "opt"))
        return read_config_opt(k, d);
    if (!type && json_is_string(json_object_get(k->config, "architecture")) &&
        !strncmp(json_string_value(json_object_get(k->config, "architecture")), "DiT", 3)) {
        k->fam = FAM_DIT; /* the DiT reference code's names; sizes from the tensors */
        return 0;
    }
    if (!type && json_is_string(json_object_get(k->config, "architecture")) &&
        !strncmp(json_string_value(json_object_get(k->config, "architecture")), "vit_", 4)) {
        k->fam = FAM_TIMM; /* sizes from the tensors, once they are open */
        return 0;
    }
    if (!type || (strcmp(type, "llama") && strcmp(type, "mistral") && strcmp(type, "qwen2"))) {
        cic_diag_set(d, k->cfg_path, 0, 0,
                     "model_type %s%s%s is not a family cicheck reads (llama, mistral, qwen2, opt; "
                     "or a timm ViT: \"architecture\": \"vit_...\" and no model_type)",
                     type ? "'" : "", type ? type : "missing", type ? "'" : "");
        return -1;
    }
    k->fam = FAM_LLAMA;
    k->embed = "model.embed_tokens.weight";
    k->act = CIC_ACT_SILU;
    if (cfg_int(k, "hidden_size", 1, -1, &k->hidden, d) ||
        cfg_int(k, "num_attention_heads", 1, -1, &k->heads, d) ||
        cfg_int(k, "num_key_value_heads", 1, 0, &k->kv_heads, d) ||
        cfg_int(k, "intermediate_size", 1, -1, &k->inter, d) ||
        cfg_int(k, "num_hidden_layers", 1, -1, &k->layers, d) ||
        cfg_int(k, "vocab_size", 1, -1, &k->vocab, d) || cfg_int(k, "head_dim", 1, 0, &hd, d) ||
        cfg_int(k, "sliding_window", 1, 0, &k->sliding_window, d) ||
        cfg_num(k, "rms_norm_eps", -1, &k->eps, d) ||
        cfg_num(k, "rope_theta", 10000, &k->theta, d) ||
        cfg_off(k, "rope_scaling", "scaled RoPE", d) ||
        cfg_off(k, "attention_bias", "a bias on q, k, v and o", d) ||
        cfg_off(k, "mlp_bias", "a bias on the MLP", d))
        return -1;
    if (!k->kv_heads)
        k->kv_heads = k->heads;
    /* Qwen2: q, k, v biases always; its sliding_window applies only with
     * use_sliding_window */
    k->qkv_bias = !strcmp(type, "qwen2");
    if (k->qkv_bias && !json_is_true(json_object_get(k->config, "use_sliding_window")))
        k->sliding_window = 0;
    if (k->hidden % k->heads || k->heads % k->kv_heads || (hd && hd * k->heads != k->hidden)) {
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
    tie = json_object_get(k->config, "tie_word_embeddings");
    k->tied = tie && json_is_true(tie);
    return 0;
}
/* A timm ViT (pre-LN, GELU, LayerNorm eps 1e-6, bidirectional): its names
 * are the preln block's. Widths from the tensors (blocks.0.norm1.weight,
 * blocks.0.mlp.fc1.weight, head.weight), the layers counted, the heads from
 * config.json's num_heads (or model_args.num_heads) or the architecture's
 * size (tiny 3, small 6, base 12, large and huge 16). */
static int timm_sizes(cic_ckpt *k, cic_diag *d)
{
    static const struct {
        const char *size;
        int heads;
    } sizes[] = {{"vit_tiny_", 3}, {"vit_small_", 6}, {"vit_base_", 12}, {"vit_large_", 16},
                 {"vit_huge_", 16}};
    const char *arch = json_string_value(json_object_get(k->config, "architecture"));
    json_t *args = json_object_get(k->config, "model_args");
    const cic_stfile_tensor *n1 = NULL, *f1 = NULL, *hd = NULL;
    int i, j, l;
    size_t a;
    k->embed = NULL;
    k->layers = 0;
    for (i = 0; i < k->n_shard; i++)
        for (j = 0; j < cic_stfile_count(k->shard[i]); j++) {
            const cic_stfile_tensor *t = cic_stfile_tensor_at(k->shard[i], j);
            if (sscanf(t->name, "blocks.%d.", &l) == 1 && l >= 0 && l < 100000 &&
                l + 1 > k->layers)
                k->layers = l + 1;
            n1 = !strcmp(t->name, "blocks.0.norm1.weight") ? t : n1;
            f1 = !strcmp(t->name, "blocks.0.mlp.fc1.weight") ? t : f1;
            hd = !strcmp(t->name, "head.weight") ? t : hd;
        }
    if (!n1 || !f1 || !hd || n1->ndim != 1 || f1->ndim != 2 || hd->ndim != 2) {
        cic_diag_set(d, k->dir, 0, 0, "a timm ViT needs blocks.0.norm1.weight [d], "
                     "blocks.0.mlp.fc1.weight [mlp, d] and head.weight [classes, d]");
        return -1;
    }
    k->hidden = (int)n1->shape[0];
    k->inter = (int)f1->shape[0];
    k->vocab = (int)hd->shape[0];
    k->heads = 0;
    if (cfg_int(k, "num_heads", 1, 0, &k->heads, d) < 0)
        return -1;
    if (!k->heads && json_is_integer(json_object_get(args, "num_heads")))
        k->heads = (int)json_integer_value(json_object_get(args, "num_heads"));
    for (a = 0; !k->heads && a < sizeof sizes / sizeof sizes[0]; a++)
        if (!strncmp(arch, sizes[a].size, strlen(sizes[a].size)))
            k->heads = sizes[a].heads;
    if (k->heads < 1 || k->hidden < 1 || k->hidden % k->heads || k->hidden > CIC_CASE_MAX_DIM ||
        k->inter < 1 || k->inter > CIC_CASE_MAX_DIM * 64 || k->vocab < 1) {
        cic_diag_set(d, k->cfg_path, 0, 0, "architecture '%s': no num_heads in config.json and "
                     "no size in the name (vit_tiny_, vit_small_, vit_base_, vit_large_, "
                     "vit_huge_), or %d heads that do not divide the width %d", arch, k->heads,
                     k->hidden);
        return -1;
    }
    k->kv_heads = k->heads;
    k->eps = 1e-6;
    k->act = CIC_ACT_GELU;
    return 0;
}
/* The shape of tensor name in any shard ([rows, cols]; rows 0 when absent
 * or not 2-D). */
static void shape2(const cic_ckpt *k, const char *name, int *rows, int *cols)
{
    int i;
    *rows = *cols = 0;
    for (i = 0; i < k->n_shard; i++) {
        const cic_stfile_tensor *t = cic_stfile_find(k->shard[i], name);
        if (t && t->ndim == 2) {
            *rows = (int)t->shape[0];
            *cols = (int)t->shape[1];
        }
    }
}
/* A DiT (the reference code's names: blocks.{i}.attn.qkv, attn.proj,
 * mlp.fc1, fc2, adaLN_modulation.1, final_layer.*): the dit block, GELU
 * (tanh), LayerNorm without weights eps 1e-6, bidirectional. Widths from the
 * tensors, the layers counted, the heads from config.json's num_heads or
 * the width (DiT-S 384: 6, DiT-B 768: 12, DiT-L 1024 and DiT-XL 1152: 16). */
static int dit_sizes(cic_ckpt *k, cic_diag *d)
{
    static const int widths[][2] = {{384, 6}, {768, 12}, {1024, 16}, {1152, 16}};
    int i, j, l, dr, dc, fr, fc, ar, ac, hr, hc;
    size_t a;
    shape2(k, "blocks.0.attn.proj.weight", &dr, &dc);
    shape2(k, "blocks.0.mlp.fc1.weight", &fr, &fc);
    shape2(k, "blocks.0.adaLN_modulation.1.weight", &ar, &ac);
    shape2(k, "final_layer.linear.weight", &hr, &hc);
    if (!dr || dr != dc || !fr || fc != dr || ar != 6 * dr || !hr || hc != dr) {
        cic_diag_set(d, k->dir, 0, 0, "no config.json, and the tensors are not a DiT's: "
                     "blocks.0.attn.proj.weight [d, d], blocks.0.mlp.fc1.weight [mlp, d], "
                     "blocks.0.adaLN_modulation.1.weight [6 d, d_cond] and "
                     "final_layer.linear.weight [out, d] are needed");
        return -1;
    }
    k->layers = 0;
    for (i = 0; i < k->n_shard; i++)
        for (j = 0; j < cic_stfile_count(k->shard[i]); j++)
            if (sscanf(cic_stfile_tensor_at(k->shard[i], j)->name, "blocks.%d.", &l) == 1 &&
                l >= 0 && l < 100000 && l + 1 > k->layers)
                k->layers = l + 1;
    k->hidden = dr;
    k->inter = fr;
    k->vocab = hr; /* the final layer's width: p * p * out_channels */
    k->cond = ac;
    k->heads = 0;
    if (cfg_int(k, "num_heads", 1, 0, &k->heads, d) < 0)
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
    k->embed = NULL;
    return 0;
}
/* The sizes of the families that read them from the tensors. */
int family_sizes(cic_ckpt *k, cic_diag *d)
{
    if (k->fam == FAM_TIMM)
        return timm_sizes(k, d);
    if (k->fam == FAM_DIT)
        return dit_sizes(k, d);
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
/* The parts of model tensor name [rows, cols] of a model whose layer 0 is
 * the checkpoint's layer0: how many (0: not in the checkpoint, the block
 * input). */
int parts_of(ckpt_part *p, const cic_ckpt *k, const char *name, int layer0, int rows, int cols)
{
    int l, n = 0, np = 1, i;
    const char *head = k->tied && !has_tensor(k, "lm_head.weight") ? k->embed : "lm_head.weight";
    memset(p, 0, 3 * sizeof *p);
    if (k->fam == FAM_LLAMA && sscanf(name, "layers.%d.%n", &l, &n) == 1 && n > 0)
        snprintf(p->name, sizeof p->name, "model.layers.%d.%s", l + layer0, name + n);
    else if (k->fam == FAM_OPT && sscanf(name, "blocks.%d.%n", &l, &n) == 1 && n > 0)
        np = opt_layer_parts(p, name + n, l + layer0, rows, cols);
    else if (k->fam == FAM_DIT && sscanf(name, "blocks.%d.%n", &l, &n) == 1 && n > 0)
        snprintf(p->name, sizeof p->name, "blocks.%d.%s", l + layer0, name + n);
    else if (k->fam == FAM_DIT && !strncmp(name, "final_layer.", 12))
        snprintf(p->name, sizeof p->name, "%s", name);
    else if (k->fam == FAM_TIMM && sscanf(name, "blocks.%d.%n", &l, &n) == 1 && n > 0)
        snprintf(p->name, sizeof p->name, "blocks.%d.%s", l + layer0, name + n);
    else if (k->fam == FAM_TIMM && (!strncmp(name, "norm.", 5) || !strncmp(name, "head.", 5)))
        snprintf(p->name, sizeof p->name, "%s", name);
    else if (!strcmp(name, "norm.weight") || !strcmp(name, "norm.bias"))
        snprintf(p->name, sizeof p->name, "%s%s",
                 k->fam == FAM_OPT ? "model.decoder.final_layer_norm" : "model.norm",
                 name + 4);
    else if (!strcmp(name, "lm_head.weight") || !strcmp(name, "head.weight"))
        snprintf(p->name, sizeof p->name, "%s", head);
    else if (!strcmp(name, "head.bias") && k->fam == FAM_OPT && has_tensor(k, "lm_head.bias"))
        snprintf(p->name, sizeof p->name, "lm_head.bias"); /* a rewrite's fused final LN */
    else if (!strcmp(name, "head.bias") && k->fam == FAM_OPT)
        p->zero = true;
    else
        return 0;
    for (i = 0; i < np; i++)
        if (np == 1) {
            p[i].rows = rows;
            p[i].cols = cols;
        }
    return np;
}
/* Model tensor name [rows, cols] is in the checkpoint, every part with its
 * dtype and shape (a fused norm tensor of a rewrite may be absent). */
static int check_tensor(const cic_ckpt *k, const cic_model_cfg *cfg, const char *name,
                        int rows, int cols, cic_diag *d)
{
    ckpt_part p[3];
    int n = parts_of(p, k, name, cfg->layer0, rows, cols), i;
    for (i = 0; i < n; i++)
        if (!p[i].zero && !(optional_norm(cfg, p[i].name) >= 0 && !has_tensor(k, p[i].name)) &&
            !lookup(k, p[i].name, p[i].rows, p[i].cols, d))
            return -1;
    return 0;
}
/* A layer's tensors, their sizes coded: DIM_D d_model, DIM_KV the key/value
 * width, DIM_MLP the MLP width, DIM_3D 3 d, DIM_6D 6 d, DIM_COND d_cond;
 * 1 itself (a vector). */
enum { DIM_D = 0, DIM_KV = -1, DIM_MLP = -2, DIM_3D = -3, DIM_6D = -6, DIM_COND = -7 };
typedef struct {
    const char *name;
    int rows, cols;
} layer_tensor;

static int dim(const cic_ckpt *k, int code)
{
    switch (code) {
    case DIM_D: return k->hidden;
    case DIM_KV: return k->hidden / k->heads * k->kv_heads;
    case DIM_MLP: return k->inter;
    case DIM_3D: return 3 * k->hidden;
    case DIM_6D: return 6 * k->hidden;
    case DIM_COND: return k->cond;
    default: return code;
    }
}

/* Every tensor of table t (n of them) for layer l: fmt names it in the
 * model's numbering ("layers.%d.%s", "blocks.%d.%s"). */
static int check_layer(const cic_ckpt *k, const cic_model_cfg *cfg, const char *fmt,
                       const layer_tensor *t, size_t n, int l, cic_diag *d)
{
    char name[300];
    size_t i;
    for (i = 0; i < n; i++) {
        snprintf(name, sizeof name, fmt, l, t[i].name);
        if (check_tensor(k, cfg, name, dim(k, t[i].rows), dim(k, t[i].cols), d) < 0)
            return -1;
    }
    return 0;
}

/* The llama family's tensors of layer l (model numbering), Qwen2's q, k
 * and v biases, and the biases it must not have. */
static int check_llama_layer(const cic_ckpt *k, const cic_model_cfg *cfg, int l, cic_diag *d)
{
    static const layer_tensor t[] = {
        {"input_layernorm.weight", 1, DIM_D},       {"self_attn.q_proj.weight", DIM_D, DIM_D},
        {"self_attn.k_proj.weight", DIM_KV, DIM_D}, {"self_attn.v_proj.weight", DIM_KV, DIM_D},
        {"self_attn.o_proj.weight", DIM_D, DIM_D},  {"post_attention_layernorm.weight", 1, DIM_D},
        {"mlp.gate_proj.weight", DIM_MLP, DIM_D},   {"mlp.up_proj.weight", DIM_MLP, DIM_D},
        {"mlp.down_proj.weight", DIM_D, DIM_MLP},
    };
    static const layer_tensor qkv[] = {
        {"self_attn.q_proj.bias", 1, DIM_D},
        {"self_attn.k_proj.bias", 1, DIM_KV},
        {"self_attn.v_proj.bias", 1, DIM_KV},
    };
    char n[300];
    size_t i;
    if (check_layer(k, cfg, "layers.%d.%s", t, sizeof t / sizeof t[0], l, d) < 0 ||
        (k->qkv_bias && check_layer(k, cfg, "layers.%d.%s", qkv, 3, l, d) < 0))
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

/* The preln block's tensors of layer l (OPT and timm name them). */
static int check_opt_layer(const cic_ckpt *k, const cic_model_cfg *cfg, int l, cic_diag *d)
{
    static const layer_tensor t[] = {
        {"norm1.weight", 1, DIM_D},          {"norm1.bias", 1, DIM_D},
        {"attn.qkv.weight", DIM_3D, DIM_D},  {"attn.qkv.bias", 1, DIM_3D},
        {"attn.proj.weight", DIM_D, DIM_D},  {"attn.proj.bias", 1, DIM_D},
        {"norm2.weight", 1, DIM_D},          {"norm2.bias", 1, DIM_D},
        {"mlp.fc1.weight", DIM_MLP, DIM_D},  {"mlp.fc1.bias", 1, DIM_MLP},
        {"mlp.fc2.weight", DIM_D, DIM_MLP},  {"mlp.fc2.bias", 1, DIM_D},
    };
    return check_layer(k, cfg, "blocks.%d.%s", t, sizeof t / sizeof t[0], l, d);
}

/* A DiT's tensors of layer l (model numbering) and, after the last, of its
 * final layer. */
static int check_dit(const cic_ckpt *k, const cic_model_cfg *cfg, int l, cic_diag *d)
{
    static const layer_tensor t[] = {
        {"attn.qkv.weight", DIM_3D, DIM_D},            {"attn.qkv.bias", 1, DIM_3D},
        {"attn.proj.weight", DIM_D, DIM_D},            {"attn.proj.bias", 1, DIM_D},
        {"mlp.fc1.weight", DIM_MLP, DIM_D},            {"mlp.fc1.bias", 1, DIM_MLP},
        {"mlp.fc2.weight", DIM_D, DIM_MLP},            {"mlp.fc2.bias", 1, DIM_D},
        {"adaLN_modulation.1.weight", DIM_6D, DIM_COND}, {"adaLN_modulation.1.bias", 1, DIM_6D},
    };
    int dm = k->hidden;
    if (check_layer(k, cfg, "blocks.%d.%s", t, sizeof t / sizeof t[0], l, d) < 0)
        return -1;
    if (l + 1 < cfg->layers)
        return 0;
    if (check_tensor(k, cfg, "final_layer.adaLN_modulation.1.weight", 2 * dm, k->cond, d) < 0 ||
        check_tensor(k, cfg, "final_layer.adaLN_modulation.1.bias", 1, 2 * dm, d) < 0 ||
        check_tensor(k, cfg, "final_layer.linear.weight", k->vocab, dm, d) < 0 ||
        check_tensor(k, cfg, "final_layer.linear.bias", 1, k->vocab, d) < 0)
        return -1;
    return 0;
}

/* cfg for a DiT: the dit block with its final layer. */
static int config_dit(const cic_ckpt *k, cic_model_cfg *cfg, cic_diag *d)
{
    int l;
    cfg->block = CIC_BLOCK_DIT;
    cfg->d_model = k->hidden;
    cfg->heads = cfg->kv_heads = k->heads;
    cfg->d_mlp = k->inter;
    cfg->mlp_ratio = (double)k->inter / k->hidden;
    cfg->d_cond = k->cond;
    cfg->final_layer = true;
    cfg->eps = k->eps;
    cfg->act = k->act;
    cfg->rope = CIC_ROPE_NONE;
    cfg->rope_theta = 10000;
    cfg->causal = false;
    cfg->d_out = k->vocab;
    cic_strlcpy(cfg->checkpoint, k->dir, sizeof cfg->checkpoint);
    for (l = 0; l < cfg->layers; l++)
        if (check_dit(k, cfg, l, d) < 0)
            return CIC_EINPUT;
    return CIC_OK;
}
int cic_ckpt_config(const cic_ckpt *k, cic_model_cfg *cfg, int layer0, cic_diag *d)
{
    bool opt = k->fam == FAM_OPT || k->fam == FAM_TIMM; /* the preln block */
    int l;
    /* no int sum: layer0 may be anything up to INT_MAX */
    if (layer0 < 0 || cfg->layers < 1 || layer0 >= k->layers || cfg->layers > k->layers - layer0) {
        cic_diag_set(d, k->cfg_path, 0, 0, "layers %d .. %lld asked, the checkpoint has %d "
                     "(num_hidden_layers; 0 .. %d)", layer0,
                     (long long)layer0 + cfg->layers - 1, k->layers, k->layers - 1);
        return CIC_EINPUT;
    }
    if (k->sliding_window && cfg->tokens > k->sliding_window) {
        cic_diag_set(d, k->cfg_path, 0, 0, "sliding_window %d is below tokens = %d: windowed "
                     "attention is not modelled", k->sliding_window, cfg->tokens);
        return CIC_EINPUT;
    }
    cfg->layer0 = layer0;
    if (k->fam == FAM_DIT)
        return config_dit(k, cfg, d);
    cfg->block = opt ? CIC_BLOCK_PRELN : CIC_BLOCK_RMSNORM;
    cfg->d_model = k->hidden;
    cfg->heads = k->heads;
    cfg->kv_heads = k->kv_heads;
    cfg->qkv_bias = k->qkv_bias;
    cfg->d_mlp = k->inter;
    cfg->mlp_ratio = (double)k->inter / k->hidden;
    cfg->eps = k->eps;
    cfg->act = k->act;
    cfg->rope = opt ? CIC_ROPE_NONE : CIC_ROPE_HALF;
    cfg->rope_theta = opt ? 10000 : k->theta;
    cfg->causal = k->fam != FAM_TIMM; /* a ViT attends both ways */
    cfg->d_out = k->vocab;
    cfg->layer0 = layer0;
    cic_strlcpy(cfg->checkpoint, k->dir, sizeof cfg->checkpoint);
    for (l = 0; l < cfg->layers; l++)
        if ((opt ? check_opt_layer(k, cfg, l, d) : check_llama_layer(k, cfg, l, d)) < 0)
            return CIC_EINPUT;
    if (check_tensor(k, cfg, "norm.weight", 1, k->hidden, d) < 0 ||
        (opt && check_tensor(k, cfg, "norm.bias", 1, k->hidden, d) < 0) ||
        check_tensor(k, cfg, opt ? "head.weight" : "lm_head.weight", k->vocab, k->hidden, d) < 0 ||
        (k->fam == FAM_TIMM && check_tensor(k, cfg, "head.bias", 1, k->vocab, d) < 0))
        return CIC_EINPUT;
    return CIC_OK;
}
