/* SPDX-License-Identifier: MIT */
/* tiny_ckpt.h: a tiny Hugging Face LLaMA checkpoint written in C
 * (config.json and model.safetensors), the good checkpoint the fuzz targets
 * need beside the file they fuzz (an [input] file's token ids through its
 * embed_tokens; verify's two models) and the replay of their saved inputs:
 * hidden 8, 2 heads, 1 key/value head, MLP 16, 2 layers, vocabulary 16,
 * F32. Every value is a fixed function of the tensor's name and the index
 * (multiples of 2^-10 in [-1/4, 1/4): exact in any float format); the norm
 * gains are 1, and a "fused" checkpoint leaves them out (read as 1: the
 * same model). */
#ifndef CIC_FUZZ_TINY_CKPT_H
#define CIC_FUZZ_TINY_CKPT_H

#include "report/report.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TINY_D 8
#define TINY_KV 4 /* 1 key/value head of width 4 */
#define TINY_MLP 16
#define TINY_LAYERS 2
#define TINY_VOCAB 16

/* Value i of tensor name. */
static float tiny_value(const char *name, size_t i)
{
    uint64_t h = 1469598103934665603ull;
    for (; *name; name++)
        h = (h ^ (uint8_t)*name) * 1099511628211ull;
    h = (h ^ (uint64_t)i) * 0x9E3779B97F4A7C15ull;
    return (float)((int)((h >> 40) % 512) - 256) / 1024.0f;
}

static const char tiny_config[] =
    "{\"model_type\": \"llama\", \"architectures\": [\"LlamaForCausalLM\"], "
    "\"hidden_size\": 8, \"num_attention_heads\": 2, \"num_key_value_heads\": 1, "
    "\"intermediate_size\": 16, \"num_hidden_layers\": 2, \"vocab_size\": 16, "
    "\"rms_norm_eps\": 1e-05, \"rope_theta\": 10000.0, \"hidden_act\": \"silu\", "
    "\"tie_word_embeddings\": false}\n";

/* The checkpoint into folder dir (created): its norm gains absent when
 * fused. 0, or -1 with d set. */
static int cic_fuzz_tiny_ckpt(const char *dir, bool fused, cic_diag *d)
{
    static const struct {
        const char *name; /* %d: the layer */
        int rows, cols;   /* rows 0: a gain of cols */
    } spec[] = {
        {"model.layers.%d.input_layernorm.weight", 0, TINY_D},
        {"model.layers.%d.self_attn.q_proj.weight", TINY_D, TINY_D},
        {"model.layers.%d.self_attn.k_proj.weight", TINY_KV, TINY_D},
        {"model.layers.%d.self_attn.v_proj.weight", TINY_KV, TINY_D},
        {"model.layers.%d.self_attn.o_proj.weight", TINY_D, TINY_D},
        {"model.layers.%d.post_attention_layernorm.weight", 0, TINY_D},
        {"model.layers.%d.mlp.gate_proj.weight", TINY_MLP, TINY_D},
        {"model.layers.%d.mlp.up_proj.weight", TINY_MLP, TINY_D},
        {"model.layers.%d.mlp.down_proj.weight", TINY_D, TINY_MLP},
    };
    enum { PER = sizeof spec / sizeof spec[0], MAXT = PER * TINY_LAYERS + 3 };
    static char names[MAXT][80];
    cic_st_tensor t[MAXT];
    float *vals[MAXT];
    char path[1200];
    int n = 0, l, k, rc = -1;
    size_t i;
    memset(t, 0, sizeof t);
    for (l = 0; l < TINY_LAYERS; l++)
        for (k = 0; k < PER; k++) {
            if (fused && spec[k].rows == 0)
                continue;
            snprintf(names[n], sizeof names[n], spec[k].name, l);
            t[n].ndim = spec[k].rows ? 2 : 1;
            t[n].shape[0] = spec[k].rows ? spec[k].rows : spec[k].cols;
            t[n].shape[1] = spec[k].cols;
            n++;
        }
    if (!fused) {
        snprintf(names[n], sizeof names[n], "model.norm.weight");
        t[n].ndim = 1;
        t[n++].shape[0] = TINY_D;
    }
    snprintf(names[n], sizeof names[n], "lm_head.weight");
    t[n].ndim = 2;
    t[n].shape[0] = TINY_VOCAB;
    t[n++].shape[1] = TINY_D;
    snprintf(names[n], sizeof names[n], "model.embed_tokens.weight");
    t[n].ndim = 2;
    t[n].shape[0] = TINY_VOCAB;
    t[n++].shape[1] = TINY_D;
    memset(vals, 0, sizeof vals);
    for (k = 0; k < n; k++) {
        size_t cnt = (size_t)t[k].shape[0] * (size_t)(t[k].ndim == 2 ? t[k].shape[1] : 1);
        vals[k] = malloc(cnt * sizeof *vals[k]);
        if (!vals[k])
            goto done;
        for (i = 0; i < cnt; i++)
            vals[k][i] = t[k].ndim == 1 ? 1.0f : tiny_value(names[k], i);
        t[k].name = names[k];
        t[k].dtype = CIC_DT_F32;
        t[k].data = vals[k];
    }
    if (cic_mkdir_p(dir, d) < 0)
        goto done;
    snprintf(path, sizeof path, "%.1000s/config.json", dir);
    if (cic_write_atomic(path, tiny_config, strlen(tiny_config), d) < 0)
        goto done;
    snprintf(path, sizeof path, "%.1000s/model.safetensors", dir);
    rc = cic_safetensors_write(path, t, n, NULL, d);
done:
    for (k = 0; k < n; k++)
        free(vals[k]);
    return rc;
}

#endif
