/* SPDX-License-Identifier: MIT */
/* checkpoint_int.h: what checkpoint.c (the files, the values, the input)
 * and checkpoint_family.c (config.json and the names of each family) share.
 * Not part of the library's interface. */
#ifndef CIC_CHECKPOINT_INT_H
#define CIC_CHECKPOINT_INT_H

#include "checkpoint.h"

#include "../base/safetensors_read.h"

#include <jansson.h>

#define CIC_CKPT_MAX_SHARDS 4096
/* The most bytes read of config.json (a real one is a few KiB; a timm
 * config with 21k class labels under 1 MiB) and of the index (its
 * weight_map names each tensor once: a few MiB for the largest models). */
#define CIC_CKPT_MAX_CONFIG ((size_t)16 << 20)
#define CIC_CKPT_MAX_INDEX ((size_t)100 << 20)

struct cic_ckpt {
    char dir[1024];
    char cfg_path[1100];
    json_t *config;
    json_t *weight_map; /* index: name -> shard file; NULL for one file */
    cic_stfile **shard;
    char (*shard_name)[256];
    int n_shard;
    /* from config.json */
    enum { FAM_LLAMA, FAM_OPT, FAM_TIMM, FAM_DIT } fam;
    int hidden, heads, kv_heads, inter, layers, vocab;
    double eps, theta;
    bool tied;
    bool qkv_bias;      /* Qwen2: q, k and v have biases */
    int sliding_window; /* 0: none */
    enum cic_act act;   /* opt: relu or gelu */
    const char *embed;  /* the input embedding's name */
    int cond;           /* dit: the condition's width */
    bool has_config;    /* config.json was read (a DiT may have none) */
    /* cic_ckpt_hash_read: per shard, per tensor (in offset order) 1 when a
     * run reads it (lookup marks it); NULL otherwise */
    unsigned char **used;
};

/* Where a model tensor's values are in the checkpoint: up to 3 tensors
 * whose values, concatenated in order, are the model tensor's (row-major),
 * each shaped [rows, cols]; zero: no tensor, zeros (OPT's head has no
 * bias). */
typedef struct {
    char name[300];
    int rows, cols;
    bool zero;
} ckpt_part;


#define load_json _cic_ckpt_load_json
#define has_tensor _cic_ckpt_has_tensor
#define optional_gain _cic_ckpt_optional_gain
#define lookup _cic_ckpt_lookup
#define read_config _cic_ckpt_read_config
#define family_sizes _cic_ckpt_family_sizes
#define parts_of _cic_ckpt_parts_of

/* The JSON object in file path (what it is, for messages), read as
 * cic_file_read does (no FIFO, no device, at most max bytes), duplicate
 * keys refused; NULL with d set. */
json_t *load_json(const char *path, size_t max, const char *what, cic_diag *d);
/* Whether the checkpoint holds a tensor called hf. */
bool has_tensor(const cic_ckpt *k, const char *hf);
/* A norm tensor a rewritten checkpoint may leave out (fused): its value
 * then (1 for a gain, 0 for a LayerNorm's bias), or -1 when hf is not one. */
int optional_norm(const cic_model_cfg *cfg, const char *hf);
/* The tensor called hf, of a float dtype, shaped [rows, cols] (a [n]
 * vector for rows = 1); NULL with d set. */
const cic_stfile_tensor *lookup(const cic_ckpt *k, const char *hf, int rows, int cols,
                                cic_diag *d);
/* config.json into k (its family and, for llama and opt, the sizes);
 * 0, or -1 with d set. */
int read_config(cic_ckpt *k, cic_diag *d);
/* The sizes of the families that read them from the tensors (timm, DiT),
 * once the shards are open; 0, or -1 with d set. */
int family_sizes(cic_ckpt *k, cic_diag *d);
/* The parts of model tensor name [rows, cols] (up to 3) of a model whose
 * layer 0 is the checkpoint's layer0: how many (0: not in the checkpoint). */
int parts_of(ckpt_part *p, const cic_ckpt *k, const char *name, int layer0, int rows, int cols);

#endif
