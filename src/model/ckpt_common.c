/* SPDX-License-Identifier: MIT */
/* ckpt_common.c: the low-level helpers every checkpoint family and
 * checkpoint.c share (ckpt_family.h): config.json's keys, finding and
 * checking tensors, a model tensor's checkpoint parts through the family's
 * map, and the table-driven layer checks. It reaches a family only through
 * k->fam, so it sits below the family files and the dispatcher. */
#include "ckpt_family.h"

#include "../base/json_type.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

json_t *load_json(const char *path, size_t max, const char *what, cic_diag *d)
{
    json_error_t e;
    json_t *j;
    char *text;
    size_t len;
    if (cic_file_read(&text, &len, path, max, what, d) != CIC_OK)
        return NULL;
    j = json_loadb(text, len, JSON_REJECT_DUPLICATES, &e);
    free(text);
    if (!j)
        cic_diag_set(d, path, e.line > 0 ? e.line : 0, e.column > 0 ? e.column : 0,
                     "not valid JSON: %s", e.text[0] ? e.text : "empty");
    else if (!json_is_object(j)) {
        cic_diag_set(d, path, 0, 0, "holds %s; a JSON object expected", cic_json_type_name(j));
        json_decref(j);
        j = NULL;
    }
    return j;
}

/* ---- config.json's keys ---- */

int cfg_int(const cic_ckpt *k, const char *key, int lo, int hi, int def, int *out,
            cic_diag *d)
{
    json_t *v = json_object_get(k->config, key);
    if (!v || json_is_null(v)) {
        if (def < 0) {
            cic_diag_set(d, k->cfg_path, 0, 0, "'%s' missing (an integer in %d .. %d)", key, lo,
                         hi);
            return -1;
        }
        *out = def;
        return 0;
    }
    if (!json_is_integer(v)) {
        cic_diag_set(d, k->cfg_path, 0, 0, "'%s' is %s; an integer in %d .. %d expected", key,
                     cic_json_type_name(v), lo, hi);
        return -1;
    }
    if (json_integer_value(v) < lo || json_integer_value(v) > hi) {
        cic_diag_set(d, k->cfg_path, 0, 0, "'%s' = %lld is outside %d .. %d", key,
                     (long long)json_integer_value(v), lo, hi);
        return -1;
    }
    *out = (int)json_integer_value(v);
    return 0;
}
/* Checked as the case file checks its eps and rope_theta: a JSON number
 * whose binary32 value is finite and at least lo (eps: FLT_TRUE_MIN, > 0;
 * theta: FLT_MIN). 1e39 as eps would be Inf in binary32 (every error then
 * 0: a PASS that means nothing), 1e-50 would be 0, a theta of 1e-300 ran
 * out of memory. */
int cfg_f32(const cic_ckpt *k, const char *key, double lo, double def, const char *why,
            double *out, cic_diag *d)
{
    json_t *v = json_object_get(k->config, key);
    double x;
    float f;
    if (!v || json_is_null(v)) {
        if (def < 0) {
            cic_diag_set(d, k->cfg_path, 0, 0, "'%s' missing (a number %g .. %g)", key, lo,
                         (double)FLT_MAX);
            return -1;
        }
        *out = def;
        return 0;
    }
    if (!json_is_number(v)) {
        cic_diag_set(d, k->cfg_path, 0, 0, "'%s' is %s; a number %g .. %g expected", key,
                     cic_json_type_name(v), lo, (double)FLT_MAX);
        return -1;
    }
    x = json_number_value(v);
    f = (float)x;
    if (!(isfinite(f) && (double)f >= lo)) {
        cic_diag_set(d, k->cfg_path, 0, 0, "'%s' = %g is %s in binary32 (%s); it must be %g "
                     ".. %g", key, x, isinf(f) ? "Inf" : f == 0 ? "0" : "too small", why, lo,
                     (double)FLT_MAX);
        return -1;
    }
    *out = x;
    return 0;
}
int cfg_bool(const cic_ckpt *k, const char *key, bool def, bool *out, cic_diag *d)
{
    json_t *v = json_object_get(k->config, key);
    if (!v || json_is_null(v)) {
        *out = def;
        return 0;
    }
    if (!json_is_boolean(v)) {
        cic_diag_set(d, k->cfg_path, 0, 0, "'%s' is %s; true or false expected", key,
                     cic_json_type_name(v));
        return -1;
    }
    *out = json_is_true(v);
    return 0;
}
/* (partial_rotary_factor 1: all of each head rotated.) */
int cfg_only(const cic_ckpt *k, const char *key, double only, const char *what, cic_diag *d)
{
    json_t *v = json_object_get(k->config, key);
    if (!v || json_is_null(v) || (json_is_number(v) && json_number_value(v) == only))
        return 0;
    if (json_is_number(v))
        cic_diag_set(d, k->cfg_path, 0, 0, "'%s' = %g: %s is not modelled (%g or absent)", key,
                     json_number_value(v), what, only);
    else
        cic_diag_set(d, k->cfg_path, 0, 0, "'%s' is %s; the number %g (or nothing) expected",
                     key, cic_json_type_name(v), only);
    return -1;
}
int cfg_off(const cic_ckpt *k, const char *key, const char *what, cic_diag *d)
{
    json_t *v = json_object_get(k->config, key);
    if (!v || json_is_null(v) || json_is_false(v))
        return 0;
    cic_diag_set(d, k->cfg_path, 0, 0, "'%s' is set: %s is not modelled", key, what);
    return -1;
}

int _cic_ckpt_nothing(cic_ckpt *k, cic_diag *d)
{
    (void)k;
    (void)d;
    return 0;
}

/* ---- the tensors ---- */

bool has_tensor(const cic_ckpt *k, const char *hf)
{
    return k->weight_map ? json_object_get(k->weight_map, hf) != NULL
                         : cic_stfile_find(k->shard[0], hf) != NULL;
}

const cic_stfile_tensor *_cic_ckpt_find_any(const cic_ckpt *k, const char *name)
{
    const cic_stfile_tensor *t = NULL, *s;
    int i;
    for (i = 0; i < k->n_shard; i++)
        if ((s = cic_stfile_find(k->shard[i], name)) != NULL)
            t = s;
    return t;
}

int _cic_ckpt_count_blocks(const cic_ckpt *k)
{
    int i, j, l, n = 0;
    for (i = 0; i < k->n_shard; i++)
        for (j = 0; j < cic_stfile_count(k->shard[i]); j++)
            if (sscanf(cic_stfile_tensor_at(k->shard[i], j)->name, "blocks.%d.", &l) == 1 &&
                l >= 0 && l < 100000 && l + 1 > n)
                n = l + 1;
    return n;
}

static bool ends_with(const char *s, const char *tail)
{
    size_t n = strlen(s), m = strlen(tail);
    return n >= m && !strcmp(s + n - m, tail);
}

/* The llama family's gains (input_layernorm, post_attention_layernorm,
 * model.norm), OPT's LayerNorm gains and biases (self_attn_layer_norm,
 * final_layer_norm), timm's (blocks.{i}.norm1, norm2, norm) and GPT-J's
 * (ln_1, ln_f). */
int optional_norm(const cic_model_cfg *cfg, const char *hf)
{
    if (!cfg->ckpt_fused)
        return -1;
    if (ends_with(hf, "layernorm.weight") || ends_with(hf, "layer_norm.weight") ||
        !strcmp(hf, "model.norm.weight") || !strcmp(hf, "norm.weight") ||
        ends_with(hf, ".norm1.weight") || ends_with(hf, ".norm2.weight") ||
        ends_with(hf, ".ln_1.weight") || ends_with(hf, ".ln_f.weight"))
        return 1;
    return ends_with(hf, "layer_norm.bias") || !strcmp(hf, "norm.bias") ||
                   ends_with(hf, ".norm1.bias") || ends_with(hf, ".norm2.bias") ||
                   ends_with(hf, ".ln_1.bias") || ends_with(hf, ".ln_f.bias")
               ? 0
               : -1;
}

void mark_used(const cic_ckpt *k, int i, const cic_stfile_tensor *t)
{
    if (k->used)
        k->used[i][t - cic_stfile_tensor_at(k->shard[i], 0)] = 1;
}

const cic_stfile_tensor *lookup(const cic_ckpt *k, const char *hf, int rows, int cols,
                                cic_diag *d)
{
    const cic_stfile_tensor *t = NULL;
    int i, at = 0;
    if (k->weight_map) {
        json_t *f = json_object_get(k->weight_map, hf);
        for (i = 0; f && i < k->n_shard; i++)
            if (!strcmp(k->shard_name[i], json_string_value(f))) {
                t = cic_stfile_find(k->shard[i], hf);
                at = i;
            }
    } else {
        t = cic_stfile_find(k->shard[0], hf);
    }
    if (t)
        mark_used(k, at, t);
    if (!t) {
        if (rows == 1) /* a vector: [n] as Hugging Face stores it */
            cic_diag_set(d, k->dir, 0, 0, "tensor '%s' missing (expected [%d])", hf, cols);
        else
            cic_diag_set(d, k->dir, 0, 0, "tensor '%s' missing (expected [%d, %d])", hf, rows,
                         cols);
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

/* ---- the names: model tensor -> checkpoint parts ---- */

int parts_of(ckpt_part *p, const cic_ckpt *k, const char *name, int layer0, int rows, int cols)
{
    int np;
    memset(p, 0, 3 * sizeof *p);
    np = k->fam->parts(p, k, name, layer0, rows, cols);
    if (np == 1) { /* one part: the model tensor's shape (several: the family's) */
        p->rows = rows;
        p->cols = cols;
    }
    return np;
}

int _cic_ckpt_readout_parts(ckpt_part *p, const cic_ckpt *k, const char *name,
                            const char *norm_prefix)
{
    if (!strcmp(name, "norm.weight") || !strcmp(name, "norm.bias"))
        snprintf(p->name, sizeof p->name, "%s%s", norm_prefix, name + 4);
    else if (!strcmp(name, "lm_head.weight") || !strcmp(name, "head.weight"))
        snprintf(p->name, sizeof p->name, "%s",
                 k->tied && !has_tensor(k, "lm_head.weight") ? k->fam->embed
                                                             : "lm_head.weight");
    else
        return 0;
    return 1;
}

int _cic_ckpt_own_parts(ckpt_part *p, const cic_ckpt *k, const char *name, int layer0,
                        const char *const *keep, const char *norm_prefix)
{
    int l, n = 0;
    if (sscanf(name, "blocks.%d.%n", &l, &n) == 1 && n > 0) {
        snprintf(p->name, sizeof p->name, "blocks.%d.%s", l + layer0, name + n);
        return 1;
    }
    for (; *keep; keep++)
        if (!strncmp(name, *keep, strlen(*keep))) {
            snprintf(p->name, sizeof p->name, "%s", name);
            return 1;
        }
    return _cic_ckpt_readout_parts(p, k, name, norm_prefix);
}

/* ---- the checks of a layer's tensors ---- */

int _cic_ckpt_check_tensor(const cic_ckpt *k, const cic_model_cfg *cfg, const char *name,
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

static int dim(const cic_ckpt *k, int code)
{
    switch (code) {
    case CKPT_DIM_D: return k->hidden;
    case CKPT_DIM_KV: return k->hidden / k->heads * k->kv_heads;
    case CKPT_DIM_MLP: return k->inter;
    case CKPT_DIM_3D: return 3 * k->hidden;
    case CKPT_DIM_6D: return 6 * k->hidden;
    case CKPT_DIM_COND: return k->cond;
    default: return code;
    }
}

int _cic_ckpt_check_layer(const cic_ckpt *k, const cic_model_cfg *cfg, const char *fmt,
                          const ckpt_layer_tensor *t, size_t n, int l, cic_diag *d)
{
    char name[300];
    size_t i;
    for (i = 0; i < n; i++) {
        snprintf(name, sizeof name, fmt, l, t[i].name);
        if (_cic_ckpt_check_tensor(k, cfg, name, dim(k, t[i].rows), dim(k, t[i].cols), d) < 0)
            return -1;
    }
    return 0;
}

int _cic_ckpt_check_preln_layer(const cic_ckpt *k, const cic_model_cfg *cfg, int l,
                                cic_diag *d)
{
    static const ckpt_layer_tensor t[] = {
        {"norm1.weight", 1, CKPT_DIM_D},             {"norm1.bias", 1, CKPT_DIM_D},
        {"attn.qkv.weight", CKPT_DIM_3D, CKPT_DIM_D}, {"attn.qkv.bias", 1, CKPT_DIM_3D},
        {"attn.proj.weight", CKPT_DIM_D, CKPT_DIM_D}, {"attn.proj.bias", 1, CKPT_DIM_D},
        {"norm2.weight", 1, CKPT_DIM_D},             {"norm2.bias", 1, CKPT_DIM_D},
        {"mlp.fc1.weight", CKPT_DIM_MLP, CKPT_DIM_D}, {"mlp.fc1.bias", 1, CKPT_DIM_MLP},
        {"mlp.fc2.weight", CKPT_DIM_D, CKPT_DIM_MLP}, {"mlp.fc2.bias", 1, CKPT_DIM_D},
    };
    return _cic_ckpt_check_layer(k, cfg, "blocks.%d.%s", t, sizeof t / sizeof t[0], l, d);
}
