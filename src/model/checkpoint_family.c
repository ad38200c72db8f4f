/* SPDX-License-Identifier: MIT */
/* checkpoint_family.c: the checkpoint families (checkpoint.h) as a table of
 * descriptors (ckpt_family.h, one file each), and what goes through it:
 * which family reads a folder, its sizes, and the model configuration it
 * gives (cic_ckpt_config). Nothing here knows a family's names. */
#include "checkpoint_int.h"

#include <assert.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

const cic_ckpt_family *const _cic_ckpt_families[CIC_CKPT_FAMILY_COUNT] = {
    [CIC_CKPT_LLAMA] = &_cic_ckpt_llama,
    [CIC_CKPT_OPT] = &_cic_ckpt_opt,
    [CIC_CKPT_TIMM] = &_cic_ckpt_timm,
    [CIC_CKPT_DIT] = &_cic_ckpt_dit,
    [CIC_CKPT_GPTJ] = &_cic_ckpt_gptj,
};
static_assert(sizeof _cic_ckpt_families / sizeof _cic_ckpt_families[0] == CIC_CKPT_FAMILY_COUNT,
              "one descriptor per family");

static bool claims(const cic_ckpt_family *f, const char *type, const char *arch, bool bare)
{
    const char *const *t;
    if (type) {
        for (t = f->model_types; t && *t; t++)
            if (!strcmp(type, *t))
                return true;
        return false;
    }
    if (arch)
        return f->architecture && !strncmp(arch, f->architecture, strlen(f->architecture));
    return bare && f->bare;
}

const cic_ckpt_family *_cic_ckpt_family_find(const char *model_type, const char *architecture,
                                             bool bare)
{
    int i;
    for (i = 0; i < CIC_CKPT_FAMILY_COUNT; i++)
        if (claims(_cic_ckpt_families[i], model_type, architecture, bare))
            return _cic_ckpt_families[i];
    return NULL;
}

int read_config(cic_ckpt *k, cic_diag *d)
{
    const char *type, *arch;
    snprintf(k->cfg_path, sizeof k->cfg_path, "%s/config.json", k->dir);
    if (access(k->dir, F_OK) != 0) {
        cic_diag_set(d, k->dir, 0, 0, "no such checkpoint folder (config.json and "
                     "model.safetensors expected)");
        return -1;
    }
    if (access(k->cfg_path, F_OK) != 0) { /* a DiT's state dict alone: sizes from tensors */
        k->config = json_object();
        k->fam = _cic_ckpt_family_find(NULL, NULL, true);
        CIC_ASSERT(k->fam);
        return k->config ? k->fam->config(k, d) : -1;
    }
    k->config = load_json(k->cfg_path, CIC_CKPT_MAX_CONFIG, "config.json (JSON)", d);
    if (!k->config)
        return -1;
    k->has_config = true;
    type = json_string_value(json_object_get(k->config, "model_type"));
    arch = json_string_value(json_object_get(k->config, "architecture"));
    k->fam = _cic_ckpt_family_find(type, arch, false);
    if (!k->fam) {
        cic_diag_set(d, k->cfg_path, 0, 0,
                     "model_type %s%s%s is not a family cicheck reads (llama, mistral, qwen2, opt; "
                     "or a timm ViT: \"architecture\": \"vit_...\" and no model_type; or gptj)",
                     type ? "'" : "", type ? type : "missing", type ? "'" : "");
        return -1;
    }
    return k->fam->config(k, d);
}

bool cic_ckpt_verifiable(const cic_ckpt *k)
{
    return k->fam->verify;
}

const char *cic_ckpt_family_name(const cic_ckpt *k)
{
    return k->fam->name;
}

const cic_stfile_tensor *cic_ckpt_tensor(const cic_ckpt *k, const char *name)
{
    return _cic_ckpt_find_any(k, name);
}

bool cic_ckpt_has_embedding(const cic_ckpt *k)
{
    return k->fam->embed != NULL;
}

int family_sizes(cic_ckpt *k, cic_diag *d)
{
    return k->fam->sizes(k, d);
}

int cic_ckpt_config(const cic_ckpt *k, cic_model_cfg *cfg, int layer0, cic_diag *d)
{
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
    cfg->d_model = k->hidden;
    cfg->heads = k->heads;
    cfg->kv_heads = k->kv_heads;
    cfg->d_mlp = k->inter;
    cfg->mlp_ratio = (double)k->inter / k->hidden;
    cfg->eps = k->eps;
    cfg->act = k->act;
    cfg->d_out = k->vocab;
    cic_strlcpy(cfg->checkpoint, k->dir, sizeof cfg->checkpoint);
    k->fam->model_cfg(k, cfg);
    for (l = 0; l < cfg->layers; l++)
        if (k->fam->check_layer(k, cfg, l, d) < 0)
            return CIC_EINPUT;
    return k->fam->check_head(k, cfg, d) < 0 ? CIC_EINPUT : CIC_OK;
}
