/* SPDX-License-Identifier: MIT */
/* checkpoint.c: a Hugging Face checkpoint folder as a weight source
 * (checkpoint.h). */
#include "checkpoint.h"

#include "../base/rng.h"
#include "../base/safetensors_read.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define CIC_CKPT_MAX_SHARDS 4096

struct cic_ckpt {
    char dir[1024];
    char cfg_path[1100];
    json_t *config;
    json_t *weight_map; /* index: name -> shard file; NULL for one file */
    cic_stfile **shard;
    char (*shard_name)[256];
    int n_shard;
    /* from config.json */
    enum { FAM_LLAMA, FAM_OPT, FAM_TIMM } fam;
    int hidden, heads, kv_heads, inter, layers, vocab;
    double eps, theta;
    bool tied;
    int sliding_window; /* 0: none */
    enum cic_act act;   /* opt: relu or gelu */
    const char *embed;  /* the input embedding's name */
};

/* ---- config.json ---- */

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

static int read_config(cic_ckpt *k, cic_diag *d)
{
    json_error_t e;
    json_t *mt, *act, *tie;
    const char *type;
    int hd = 0;
    snprintf(k->cfg_path, sizeof k->cfg_path, "%s/config.json", k->dir);
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
        !strncmp(json_string_value(json_object_get(k->config, "architecture")), "vit_", 4)) {
        k->fam = FAM_TIMM; /* sizes from the tensors, once they are open */
        return 0;
    }
    if (!type || (strcmp(type, "llama") && strcmp(type, "mistral"))) {
        cic_diag_set(d, k->cfg_path, 0, 0,
                     "model_type %s%s%s is not a family cicheck reads (llama, mistral, opt; "
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

/* ---- the weights ---- */

static int open_shard(cic_ckpt *k, const char *file, cic_diag *d)
{
    char path[1400];
    int i;
    for (i = 0; i < k->n_shard; i++)
        if (!strcmp(k->shard_name[i], file))
            return i;
    if (k->n_shard == CIC_CKPT_MAX_SHARDS || strlen(file) >= sizeof k->shard_name[0] ||
        strchr(file, '/')) {
        cic_diag_set(d, k->dir, 0, 0, "shard '%.200s': more than %d shards, a name of over "
                     "255 bytes, or a path outside the folder", file, CIC_CKPT_MAX_SHARDS);
        return -1;
    }
    snprintf(path, sizeof path, "%s/%s", k->dir, file);
    k->shard[k->n_shard] = cic_stfile_create(path, d);
    if (!k->shard[k->n_shard])
        return -1;
    cic_strlcpy(k->shard_name[k->n_shard], file, sizeof k->shard_name[0]);
    return k->n_shard++;
}

static int open_weights(cic_ckpt *k, cic_diag *d)
{
    char path[1200];
    json_error_t e;
    json_t *idx;
    const char *name;
    json_t *v;
    k->shard = cic_calloc(CIC_CKPT_MAX_SHARDS, sizeof *k->shard);
    k->shard_name = cic_calloc(CIC_CKPT_MAX_SHARDS, sizeof *k->shard_name);
    if (!k->shard || !k->shard_name) {
        cic_diag_set(d, k->dir, 0, 0, "out of memory");
        return -1;
    }
    snprintf(path, sizeof path, "%s/model.safetensors.index.json", k->dir);
    if (access(path, F_OK) != 0) {
        snprintf(path, sizeof path, "%s/model.safetensors", k->dir);
        if (access(path, F_OK) != 0) {
            cic_diag_set(d, k->dir, 0, 0, "neither model.safetensors nor "
                         "model.safetensors.index.json is there");
            return -1;
        }
        return open_shard(k, "model.safetensors", d) < 0 ? -1 : 0;
    }
    idx = json_load_file(path, JSON_REJECT_DUPLICATES, &e);
    if (!idx) {
        cic_diag_set(d, path, e.line > 0 ? e.line : 0, e.column > 0 ? e.column : 0, "%s",
                     e.text);
        return -1;
    }
    k->weight_map = json_incref(json_object_get(idx, "weight_map"));
    json_decref(idx);
    if (!json_is_object(k->weight_map)) {
        cic_diag_set(d, path, 0, 0, "no \"weight_map\" object (tensor name -> shard file)");
        return -1;
    }
    json_object_foreach(k->weight_map, name, v) {
        if (!json_is_string(v)) {
            cic_diag_set(d, path, 0, 0, "weight_map['%.200s'] is not a file name", name);
            return -1;
        }
        if (open_shard(k, json_string_value(v), d) < 0)
            return -1;
    }
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

cic_ckpt *cic_ckpt_open(const char *dir, cic_diag *d)
{
    cic_ckpt *k = cic_calloc(1, sizeof *k);
    if (!k) {
        cic_diag_set(d, dir, 0, 0, "out of memory");
        return NULL;
    }
    if (strlen(dir) >= sizeof k->dir) {
        cic_diag_set(d, "", 0, 0, "checkpoint path too long");
        free(k);
        return NULL;
    }
    cic_strlcpy(k->dir, dir, sizeof k->dir);
    if (read_config(k, d) < 0 || open_weights(k, d) < 0 ||
        (k->fam == FAM_TIMM && timm_sizes(k, d) < 0)) {
        cic_ckpt_close(k);
        return NULL;
    }
    return k;
}

void cic_ckpt_close(cic_ckpt *k)
{
    int i;
    if (!k)
        return;
    for (i = 0; i < k->n_shard; i++)
        cic_stfile_destroy(k->shard[i]);
    free(k->shard);
    free(k->shard_name);
    json_decref(k->config);
    json_decref(k->weight_map);
    free(k);
}

int cic_ckpt_layers(const cic_ckpt *k)
{
    return k->layers;
}

int cic_ckpt_min_bits(const cic_ckpt *k)
{
    int i, j, bits = 53;
    for (i = 0; i < k->n_shard; i++)
        for (j = 0; j < cic_stfile_count(k->shard[i]); j++) {
            enum cic_stfile_dtype t = cic_stfile_tensor_at(k->shard[i], j)->dtype;
            int b = t == CIC_STFILE_F32 ? 24 : t == CIC_STFILE_BF16 ? 8 : t == CIC_STFILE_F16 ? 11
                                                                                            : 53;
            bits = b < bits ? b : bits;
        }
    return bits;
}

/* Where a model tensor's values are in the checkpoint: up to 3 tensors
 * whose values, concatenated in order, are the model tensor's (row-major),
 * each shaped [rows, cols]; zero: no tensor, zeros (OPT's head has no
 * bias). */
typedef struct {
    char name[300];
    int rows, cols;
    bool zero;
} ckpt_part;

static bool has_tensor(const cic_ckpt *k, const char *hf);

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
static int parts_of(ckpt_part *p, const cic_ckpt *k, const char *name, int layer0, int rows,
                    int cols)
{
    int l, n = 0, np = 1, i;
    const char *head = k->tied && !has_tensor(k, "lm_head.weight") ? k->embed : "lm_head.weight";
    memset(p, 0, 3 * sizeof *p);
    if (k->fam == FAM_LLAMA && sscanf(name, "layers.%d.%n", &l, &n) == 1 && n > 0)
        snprintf(p->name, sizeof p->name, "model.layers.%d.%s", l + layer0, name + n);
    else if (k->fam == FAM_OPT && sscanf(name, "blocks.%d.%n", &l, &n) == 1 && n > 0)
        np = opt_layer_parts(p, name + n, l + layer0, rows, cols);
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

/* Whether the checkpoint holds a tensor called hf. */
static bool has_tensor(const cic_ckpt *k, const char *hf)
{
    return k->weight_map ? json_object_get(k->weight_map, hf) != NULL
                         : cic_stfile_find(k->shard[0], hf) != NULL;
}

/* A norm gain a rewritten checkpoint may leave out (fused). */
static bool optional_gain(const cic_model_cfg *cfg, const char *hf)
{
    size_t n = strlen(hf);
    return cfg->ckpt_fused && n > 7 && !strcmp(hf + n - 7, ".weight") &&
           (strstr(hf, "layernorm.weight") || !strcmp(hf, "model.norm.weight"));
}

/* The tensor called hf, of a float dtype, shaped [rows, cols] (a [n]
 * vector for rows = 1); NULL with d set. */
static const cic_stfile_tensor *lookup(const cic_ckpt *k, const char *hf, int rows, int cols,
                                       cic_diag *d)
{
    const cic_stfile_tensor *t = NULL;
    int i;
    if (k->weight_map) {
        json_t *f = json_object_get(k->weight_map, hf);
        for (i = 0; f && i < k->n_shard; i++)
            if (!strcmp(k->shard_name[i], json_string_value(f)))
                t = cic_stfile_find(k->shard[i], hf);
    } else {
        t = cic_stfile_find(k->shard[0], hf);
    }
    if (!t) {
        cic_diag_set(d, k->dir, 0, 0, "tensor '%s' missing (expected [%d, %d])", hf, rows, cols);
        return NULL;
    }
    if (t->dtype != CIC_STFILE_F32 && t->dtype != CIC_STFILE_BF16 &&
        t->dtype != CIC_STFILE_F16 && t->dtype != CIC_STFILE_F64) {
        cic_diag_set(d, t->file, 0, 0, "tensor '%s' is %s; F32, BF16, F16 or F64 is needed", hf,
                     CIC_STFILE_DTYPE_NAME[t->dtype]);
        return NULL;
    }
    if (!((t->ndim == 2 && t->shape[0] == rows && t->shape[1] == cols) ||
          (rows == 1 && t->ndim == 1 && t->shape[0] == cols))) {
        char sh[128] = "";
        for (i = 0; i < t->ndim; i++)
            snprintf(sh + strlen(sh), sizeof sh - strlen(sh), "%s%lld", i ? ", " : "",
                     (long long)t->shape[i]);
        if (rows == 1)
            cic_diag_set(d, t->file, 0, 0, "tensor '%s' has shape [%s], expected [%d]", hf, sh,
                         cols);
        else
            cic_diag_set(d, t->file, 0, 0, "tensor '%s' has shape [%s], expected [%d, %d]", hf,
                         sh, rows, cols);
        return NULL;
    }
    return t;
}

/* Model tensor name [rows, cols] is in the checkpoint, every part with its
 * dtype and shape (a fused norm gain of a rewrite may be absent). */
static int check_tensor(const cic_ckpt *k, const cic_model_cfg *cfg, const char *name,
                        int rows, int cols, cic_diag *d)
{
    ckpt_part p[3];
    int n = parts_of(p, k, name, cfg->layer0, rows, cols), i;
    for (i = 0; i < n; i++)
        if (!p[i].zero && !(optional_gain(cfg, p[i].name) && !has_tensor(k, p[i].name)) &&
            !lookup(k, p[i].name, p[i].rows, p[i].cols, d))
            return -1;
    return 0;
}

/* The llama family's tensors of layer l (model numbering) and the biases
 * it must not have. */
static int check_llama_layer(const cic_ckpt *k, const cic_model_cfg *cfg, int l, cic_diag *d)
{
    static const struct {
        const char *name;
        int rows, cols; /* 0: d_model, -1: kv width, -2: d_mlp */
    } per_layer[] = {
        {"input_layernorm.weight", 1, 0},   {"self_attn.q_proj.weight", 0, 0},
        {"self_attn.k_proj.weight", -1, 0}, {"self_attn.v_proj.weight", -1, 0},
        {"self_attn.o_proj.weight", 0, 0},  {"post_attention_layernorm.weight", 1, 0},
        {"mlp.gate_proj.weight", -2, 0},    {"mlp.up_proj.weight", -2, 0},
        {"mlp.down_proj.weight", 0, -2},
    };
    char n[300];
    int i, kvw = k->hidden / k->heads * k->kv_heads;
    for (i = 0; i < (int)(sizeof per_layer / sizeof per_layer[0]); i++) {
        int r = per_layer[i].rows, c = per_layer[i].cols;
        r = r == 0 ? k->hidden : r == -1 ? kvw : r == -2 ? k->inter : r;
        c = c == 0 ? k->hidden : k->inter;
        snprintf(n, sizeof n, "layers.%d.%s", l, per_layer[i].name);
        if (check_tensor(k, cfg, n, r, c, d) < 0)
            return -1;
        snprintf(n, sizeof n, "model.layers.%d.%s", l + cfg->layer0, per_layer[i].name);
        memcpy(strrchr(n, '.'), ".bias", 6);
        if (strstr(n, "_proj") && has_tensor(k, n)) {
            cic_diag_set(d, k->dir, 0, 0, "tensor '%s': biases are not modelled (the llama "
                         "family has none; Qwen2's q, k, v biases are not read)", n);
            return -1;
        }
    }
    return 0;
}

/* OPT's tensors of layer l (model numbering), as the preln block names them. */
static int check_opt_layer(const cic_ckpt *k, const cic_model_cfg *cfg, int l, cic_diag *d)
{
    static const struct {
        const char *name;
        int rows, cols; /* 0: d_model, -2: d_mlp, -3: 3 d_model */
    } per_layer[] = {
        {"norm1.weight", 1, 0},     {"norm1.bias", 1, 0},      {"attn.qkv.weight", -3, 0},
        {"attn.qkv.bias", 1, -3},   {"attn.proj.weight", 0, 0}, {"attn.proj.bias", 1, 0},
        {"norm2.weight", 1, 0},     {"norm2.bias", 1, 0},      {"mlp.fc1.weight", -2, 0},
        {"mlp.fc1.bias", 1, -2},    {"mlp.fc2.weight", 0, -2}, {"mlp.fc2.bias", 1, 0},
    };
    char n[300];
    int i;
    for (i = 0; i < (int)(sizeof per_layer / sizeof per_layer[0]); i++) {
        int r = per_layer[i].rows, c = per_layer[i].cols;
        r = r == 0 ? k->hidden : r == -2 ? k->inter : r == -3 ? 3 * k->hidden : r;
        c = c == 0 ? k->hidden : c == -2 ? k->inter : 3 * k->hidden;
        snprintf(n, sizeof n, "blocks.%d.%s", l, per_layer[i].name);
        if (check_tensor(k, cfg, n, r, c, d) < 0)
            return -1;
    }
    return 0;
}

int cic_ckpt_config(const cic_ckpt *k, cic_model_cfg *cfg, int layer0, cic_diag *d)
{
    bool opt = k->fam != FAM_LLAMA; /* opt and timm: the preln block */
    int l;
    if (layer0 < 0 || cfg->layers < 1 || layer0 + cfg->layers > k->layers) {
        cic_diag_set(d, k->cfg_path, 0, 0, "layers %d .. %d asked, the checkpoint has %d "
                     "(num_hidden_layers; 0 .. %d)", layer0, layer0 + cfg->layers - 1,
                     k->layers, k->layers - 1);
        return CIC_EINPUT;
    }
    if (k->sliding_window && cfg->tokens > k->sliding_window) {
        cic_diag_set(d, k->cfg_path, 0, 0, "sliding_window %d is below tokens = %d: windowed "
                     "attention is not modelled", k->sliding_window, cfg->tokens);
        return CIC_EINPUT;
    }
    cfg->block = opt ? CIC_BLOCK_PRELN : CIC_BLOCK_RMSNORM;
    cfg->d_model = k->hidden;
    cfg->heads = k->heads;
    cfg->kv_heads = k->kv_heads;
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

/* ---- the weight source ---- */

/* t's values into f (n of them), each exactly a float32 and finite. */
static int read_values(float *f, const cic_stfile_tensor *t, uint64_t n, cic_diag *d)
{
    enum { CHUNK = 4096 };
    double buf[CHUNK];
    uint64_t i0, i;
    for (i0 = 0; i0 < n; i0 += CHUNK) {
        uint64_t m = n - i0 < CHUNK ? n - i0 : CHUNK;
        if (cic_stfile_tensor_read_f64(buf, t, i0, m, d) < 0)
            return -1;
        for (i = 0; i < m; i++) {
            float v = (float)buf[i];
            if (!isfinite(buf[i])) {
                cic_diag_set(d, t->file, 0, 0, "tensor '%s': value %g at index %llu (flat); "
                             "a checkpoint with NaN or Inf weights is not run", t->name, buf[i],
                             (unsigned long long)(i0 + i));
                return -1;
            }
            if ((double)v != buf[i]) {
                cic_diag_set(d, t->file, 0, 0, "tensor '%s' (F64): value %.17g at index %llu "
                             "(flat) is not a float32; F64 weights are read only when every "
                             "value is one", t->name, buf[i], (unsigned long long)(i0 + i));
                return -1;
            }
            f[i0 + i] = v;
        }
    }
    return 0;
}

/* ---- the block input ([input]) ---- */

/* OPT's learned positions: row i (token i % tokens of its sample) += row
 * (i % tokens) + 2 of embed_positions (the offset of OPT's code), one
 * float32 addition as PyTorch does it. */
static int add_positions(float *out, const cic_ckpt *k, size_t n, int tokens, int dm,
                         cic_diag *d)
{
    const cic_stfile_tensor *pe = NULL;
    float *row = cic_calloc((size_t)dm, sizeof *row);
    size_t i;
    int j, rows = 0, rc = -1;
    if (has_tensor(k, "model.decoder.embed_positions.weight")) {
        for (j = 0; j < k->n_shard && !pe; j++)
            pe = cic_stfile_find(k->shard[j], "model.decoder.embed_positions.weight");
        rows = pe && pe->ndim == 2 ? (int)pe->shape[0] : 0;
    }
    if (!pe || rows < tokens + 2 || pe->ndim != 2 || pe->shape[1] != dm) {
        cic_diag_set(d, k->dir, 0, 0, "tensor 'model.decoder.embed_positions.weight' missing "
                     "or not [at least %d, %d] (the positions of %d tokens, offset 2)",
                     tokens + 2, dm, tokens);
        goto done;
    }
    for (i = 0; i < n; i++) {
        cic_stfile_tensor pt = *pe;
        pt.data = pe->data + ((i % (size_t)tokens) + 2) * dm * CIC_STFILE_DTYPE_SIZE[pe->dtype];
        pt.count = (uint64_t)dm;
        pt.nbytes = (size_t)dm * CIC_STFILE_DTYPE_SIZE[pe->dtype];
        if (read_values(row, &pt, (uint64_t)dm, d) < 0)
            goto done;
        for (j = 0; j < dm; j++)
            out[i * dm + j] = out[i * dm + j] + row[j];
    }
    rc = 0;
done:
    free(row);
    return rc;
}

/* Row ids[i] of embed_tokens for each i < n into out (n rows of dm; OPT
 * adds its positions, tokens per sample). */
static int embed_rows(float *out, const cic_ckpt *k, const int64_t *ids, size_t n, int dm,
                      int tokens, cic_diag *d)
{
    const cic_stfile_tensor *e;
    size_t i;
    if (!k->embed) {
        cic_diag_set(d, k->dir, 0, 0, "a timm ViT has no token embedding: its input is "
                     "hidden states ([input] kind = \"random\" or a file's \"input\")");
        return -1;
    }
    if (!(e = lookup(k, k->embed, k->vocab, dm, d)))
        return -1;
    for (i = 0; i < n; i++) {
        cic_stfile_tensor et = *e;
        if (ids[i] < 0 || ids[i] >= k->vocab) {
            cic_diag_set(d, k->dir, 0, 0, "token id %lld at index %zu is outside the "
                         "vocabulary 0 .. %d", (long long)ids[i], i, k->vocab - 1);
            return -1;
        }
        et.data = e->data + (size_t)ids[i] * dm * CIC_STFILE_DTYPE_SIZE[e->dtype];
        et.count = (uint64_t)dm;
        et.nbytes = (size_t)dm * CIC_STFILE_DTYPE_SIZE[e->dtype];
        if (read_values(out + i * dm, &et, (uint64_t)dm, d) < 0)
            return -1;
    }
    return k->fam == FAM_OPT ? add_positions(out, k, n, tokens, dm, d) : 0;
}

/* The input file's hidden states ("input") or token ids ("input_ids",
 * through embed_tokens: k needed). */
static int input_from_file(cic_model *m, const cic_ckpt *k, cic_diag *d)
{
    cic_tensor *x = &m->t[m->input];
    cic_stfile *f = cic_stfile_create(m->cfg.input_file, d);
    const cic_stfile_tensor *t;
    size_t n = (size_t)x->rows;
    int rc = -1;
    if (!f)
        return -1;
    if ((t = cic_stfile_find(f, "input")) != NULL) {
        if (!(t->ndim == 2 && t->shape[0] == x->rows && t->shape[1] == x->cols))
            cic_diag_set(d, t->file, 0, 0, "tensor 'input' must be [%d, %d] (samples * "
                         "tokens, d_model)", x->rows, x->cols);
        else
            rc = read_values(x->f32, t, (uint64_t)x->rows * x->cols, d);
    } else if ((t = cic_stfile_find(f, "input_ids")) != NULL) {
        int64_t *ids = cic_calloc(n, sizeof *ids);
        if (!k)
            cic_diag_set(d, t->file, 0, 0, "'input_ids' need a checkpoint's embed_tokens");
        else if (t->count != n || (t->dtype != CIC_STFILE_I32 && t->dtype != CIC_STFILE_I64))
            cic_diag_set(d, t->file, 0, 0, "tensor 'input_ids' must be I32 or I64 [%d, %d] "
                         "(samples, tokens)", m->cfg.samples, m->cfg.tokens);
        else if (ids && cic_stfile_tensor_read_i64(ids, t, 0, n, d) == 0)
            rc = embed_rows(x->f32, k, ids, n, x->cols, m->cfg.tokens, d);
        free(ids);
    } else {
        cic_diag_set(d, m->cfg.input_file, 0, 0, "no tensor 'input' (hidden states) or "
                     "'input_ids' (token ids)");
    }
    cic_stfile_destroy(f);
    return rc;
}

int cic_input_fill(cic_model *m, const cic_ckpt *k, cic_diag *d)
{
    cic_tensor *x = &m->t[m->input];
    int rc = 0;
    if (m->cfg.input_kind == CIC_INPUT_RANDOM)
        return 0; /* the seeded generator's */
    if (m->cfg.input_kind == CIC_INPUT_TOKENS) {
        size_t i, n = (size_t)x->rows;
        uint64_t key = cic_rng_key(m->cfg.seed, "input.tokens");
        int64_t *ids = cic_calloc(n, sizeof *ids);
        if (!k || !ids) {
            free(ids);
            cic_diag_set(d, "", 0, 0, "kind = \"tokens\" needs a checkpoint's embed_tokens");
            return -1;
        }
        for (i = 0; i < n; i++)
            ids[i] = (int64_t)(cic_rng_u64(key, i) % (uint64_t)k->vocab);
        rc = embed_rows(x->f32, k, ids, n, x->cols, m->cfg.tokens, d);
        free(ids);
    } else {
        rc = input_from_file(m, k, d);
    }
    if (rc == 0)
        x->fill = CIC_FILL_NONE; /* not the seeded draw */
    return rc;
}

/* Model tensor t from its parts (a fused gain absent: 1; a zero part: 0). */
static int fill_tensor(cic_tensor *t, const cic_ckpt *k, const cic_model_cfg *cfg,
                       const ckpt_part *p, int np, cic_diag *d)
{
    size_t off = 0, i;
    int j;
    for (j = 0; j < np; j++) {
        size_t n = (size_t)p[j].rows * p[j].cols;
        const cic_stfile_tensor *st;
        if (p[j].zero || (optional_gain(cfg, p[j].name) && !has_tensor(k, p[j].name))) {
            for (i = 0; i < n; i++)
                t->f32[off + i] = p[j].zero ? 0.0f : 1.0f;
        } else if (!(st = lookup(k, p[j].name, p[j].rows, p[j].cols, d)) ||
                   read_values(t->f32 + off, st, (uint64_t)n, d) < 0) {
            return -1;
        }
        off += n;
    }
    CIC_ASSERT(off == (size_t)t->rows * t->cols);
    return 0;
}

int cic_ckpt_fill(cic_model *m, const cic_model_progress *p, cic_diag *d)
{
    cic_ckpt *k = cic_ckpt_open(m->cfg.checkpoint, d);
    double total = 0, done = 0;
    ckpt_part parts[3];
    int id, np, rc = -1;
    if (!k)
        return -1;
    for (id = 0; id < m->n_t; id++)
        if (m->t[id].fill != CIC_FILL_NONE && id != m->input)
            total += (double)m->t[id].rows * m->t[id].cols;
    for (id = 0; id < m->n_t; id++) {
        cic_tensor *t = &m->t[id];
        if (t->fill == CIC_FILL_NONE ||
            (np = parts_of(parts, k, t->name, m->cfg.layer0, t->rows, t->cols)) == 0)
            continue; /* the input: [input]'s */
        if (fill_tensor(t, k, &m->cfg, parts, np, d) < 0)
            goto done;
        t->fill = CIC_FILL_NONE;
        done += (double)t->rows * t->cols;
        if (p && p->fn)
            p->fn(p->ctx, done, total);
    }
    rc = cic_input_fill(m, k, d);
done:
    cic_ckpt_close(k);
    return rc;
}
