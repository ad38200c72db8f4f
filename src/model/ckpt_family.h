/* SPDX-License-Identifier: MIT */
/* ckpt_family.h: what a checkpoint family file (ckpt_llama.c, ckpt_opt.c,
 * ckpt_timm.c, ckpt_dit.c) sees: the open checkpoint, the descriptor it
 * fills in, and the low-level helpers of ckpt_common.c (config.json keys,
 * tensor lookups, the layer checks). A family file calls only these; the
 * dispatcher (checkpoint_family.c, checkpoint_int.h) and checkpoint.c reach
 * a family only through its descriptor. Not part of the library's
 * interface. */
#ifndef CIC_CKPT_FAMILY_H
#define CIC_CKPT_FAMILY_H

#include "checkpoint.h"

#include "../base/safetensors_read.h"

#include <jansson.h>

#define CIC_CKPT_MAX_SHARDS 4096
/* The most bytes read of config.json (a real one is a few KiB; a timm
 * config with 21k class labels under 1 MiB) and of the index (its
 * weight_map names each tensor once: a few MiB for the largest models). */
#define CIC_CKPT_MAX_CONFIG ((size_t)16 << 20)
#define CIC_CKPT_MAX_INDEX ((size_t)100 << 20)
/* The widest size config.json may give (intermediate_size, vocab_size,
 * num_hidden_layers, ...): the case file's widest MLP, 64 d_model of
 * CIC_CASE_MAX_DIM (2^22). hidden_size itself is at most CIC_CASE_MAX_DIM,
 * as d_model in a case file. Products of two sizes stay in int64. */
#define CKPT_MAX_SIZE (CIC_CASE_MAX_DIM * CIC_CASE_MAX_MLP_RATIO)

typedef struct cic_ckpt_family cic_ckpt_family;

struct cic_ckpt {
    char dir[1024];
    char cfg_path[1100];
    json_t *config;     /* config.json; an empty object when there is none */
    json_t *weight_map; /* index: name -> shard file; NULL for one file */
    cic_stfile **shard;
    char (*shard_name)[256];
    int n_shard;
    const cic_ckpt_family *fam; /* set once config.json is read */
    /* set by the family from config.json or the tensors */
    int hidden, heads, kv_heads, inter, layers, vocab;
    double eps, theta;
    bool tied;
    bool qkv_bias;      /* Qwen2: q, k and v have biases */
    int sliding_window; /* 0: none */
    int rotary_dim;     /* gptj: RoPE on the first rotary_dim dims of a head; 0: all */
    enum cic_act act;   /* opt: relu or gelu */
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

/* One checkpoint family: which folders it reads, how it gets its sizes,
 * its names for the model's tensors and the model it builds. Every field
 * but the optional strings is set (tests/test_model.c checks); the claims
 * of two families never overlap, so the table's order does not matter. */
struct cic_ckpt_family {
    const char *name; /* "llama", "opt", "timm", "dit" */
    /* Claims: config.json's model_type is one of model_types (NULL
     * ends the list); or, with no model_type, its "architecture" string
     * starts with architecture; or (bare) the folder has no config.json. */
    const char *const *model_types;
    const char *architecture;
    bool bare;
    /* The token embedding [vocab, d_model] (NULL: none; the input is then
     * hidden states), and the learned positions added to it (NULL: none),
     * position 0 at row positions_offset (OPT's code: 2). */
    const char *embed;
    const char *positions;
    int positions_offset;
    /* cicheck verify reads it (a causal language model, or timm's ViT). */
    bool verify;
    /* Sizes, eps, activation, ... from config.json (k->config, empty when
     * bare), before the shards open; 0, or -1 with d set. */
    int (*config)(cic_ckpt *k, cic_diag *d);
    /* Sizes from the tensors once the shards are open (timm, DiT);
     * 0, or -1 with d set. */
    int (*sizes)(cic_ckpt *k, cic_diag *d);
    /* The parts of model tensor name (the block's numbering, layer 0 the
     * checkpoint's layer0): how many, 0 when the checkpoint does not hold
     * it (the block input). Only the names and, for more than one part,
     * their shapes: _cic_ckpt_parts_of clears p before and sets one
     * part's shape after. */
    int (*parts)(ckpt_part *p, const cic_ckpt *k, const char *name, int layer0, int rows,
                 int cols);
    /* The model's block, rope, causal mask and what else is the family's
     * (the sizes, eps and activation are set from k by the dispatcher). */
    void (*model_cfg)(const cic_ckpt *k, cic_model_cfg *cfg);
    /* Every tensor of model layer l (and what must not be there); then,
     * after the last layer, the readout's. 0, or -1 with d set. */
    int (*check_layer)(const cic_ckpt *k, const cic_model_cfg *cfg, int l, cic_diag *d);
    int (*check_head)(const cic_ckpt *k, const cic_model_cfg *cfg, cic_diag *d);
};

extern const cic_ckpt_family _cic_ckpt_llama, _cic_ckpt_opt, _cic_ckpt_timm, _cic_ckpt_dit;

/* ---- ckpt_common.c ---- */

#define load_json _cic_ckpt_load_json
#define has_tensor _cic_ckpt_has_tensor
#define optional_norm _cic_ckpt_optional_norm
#define lookup _cic_ckpt_lookup
#define mark_used _cic_ckpt_mark_used
#define parts_of _cic_ckpt_parts_of
#define cfg_int _cic_ckpt_cfg_int
#define cfg_f32 _cic_ckpt_cfg_f32
#define cfg_bool _cic_ckpt_cfg_bool
#define cfg_only _cic_ckpt_cfg_only
#define cfg_off _cic_ckpt_cfg_off

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
/* Tensor t of shard i is read by the run (cic_ckpt_hash_read). */
void mark_used(const cic_ckpt *k, int i, const cic_stfile_tensor *t);
/* The parts of model tensor name [rows, cols] (up to 3) of a model whose
 * layer 0 is the checkpoint's layer0, by k's family: how many (0: not in
 * the checkpoint). */
int parts_of(ckpt_part *p, const cic_ckpt *k, const char *name, int layer0, int rows, int cols);

/* config.json's keys (messages name k->cfg_path). An integer in [lo, hi];
 * absent or null: def (def < 0: required). */
int cfg_int(const cic_ckpt *k, const char *key, int lo, int hi, int def, int *out,
            cic_diag *d);
/* A real the engines use as a binary32 value (why says so): finite and at
 * least lo in binary32, kept as given; absent or null: def (def < 0:
 * required). */
int cfg_f32(const cic_ckpt *k, const char *key, double lo, double def, const char *why,
            double *out, cic_diag *d);
/* A boolean; absent or null: def. */
int cfg_bool(const cic_ckpt *k, const char *key, bool def, bool *out, cic_diag *d);
/* A number that, when given, must be only (what is modelled). */
int cfg_only(const cic_ckpt *k, const char *key, double only, const char *what, cic_diag *d);
/* A key that must be absent, null or false (what is not modelled). */
int cfg_off(const cic_ckpt *k, const char *key, const char *what, cic_diag *d);

/* The last shard's tensor called name in any shard, NULL when none. */
const cic_stfile_tensor *_cic_ckpt_find_any(const cic_ckpt *k, const char *name);
/* The layers of a checkpoint whose layer tensors are called
 * "blocks.{i}.*": 1 + the largest i (below 100000), 0 when none. */
int _cic_ckpt_count_blocks(const cic_ckpt *k);

/* The readout's names shared by the families (model -> checkpoint):
 * norm.weight and norm.bias -> norm_prefix.weight and .bias, lm_head.weight
 * and head.weight -> lm_head.weight (or, tied and without it, the
 * family's embedding). 1 when name is one of them, else 0. */
int _cic_ckpt_readout_parts(ckpt_part *p, const cic_ckpt *k, const char *name,
                            const char *norm_prefix);
/* The parts of a family whose tensors carry the model's own names (timm,
 * DiT): blocks.{i}.* with i counted from layer0, a name that starts with
 * one of keep (NULL-terminated) as it is, else the shared readout names
 * (norm_prefix as for _cic_ckpt_readout_parts). 1, or 0 for no such tensor. */
int _cic_ckpt_own_parts(ckpt_part *p, const cic_ckpt *k, const char *name, int layer0,
                        const char *const *keep, const char *norm_prefix);

/* A layer's tensors, their sizes coded: CKPT_DIM_D d_model, CKPT_DIM_KV
 * the key/value width, CKPT_DIM_MLP the MLP width, CKPT_DIM_3D 3 d,
 * CKPT_DIM_6D 6 d, CKPT_DIM_COND d_cond; 1 itself (a vector). */
enum {
    CKPT_DIM_D = 0,
    CKPT_DIM_KV = -1,
    CKPT_DIM_MLP = -2,
    CKPT_DIM_3D = -3,
    CKPT_DIM_6D = -6,
    CKPT_DIM_COND = -7
};
typedef struct {
    const char *name;
    int rows, cols;
} ckpt_layer_tensor;

/* Model tensor name [rows, cols] is in the checkpoint, every part with its
 * dtype and shape (a fused norm tensor of a rewrite may be absent); 0, or
 * -1 with d set. */
int _cic_ckpt_check_tensor(const cic_ckpt *k, const cic_model_cfg *cfg, const char *name,
                           int rows, int cols, cic_diag *d);
/* Every tensor of table t (n of them) for layer l: fmt names it in the
 * model's numbering ("layers.%d.%s", "blocks.%d.%s"). 0, or -1 with d set. */
int _cic_ckpt_check_layer(const cic_ckpt *k, const cic_model_cfg *cfg, const char *fmt,
                          const ckpt_layer_tensor *t, size_t n, int l, cic_diag *d);
/* The preln block's tensors of layer l (OPT and timm both build it). */
int _cic_ckpt_check_preln_layer(const cic_ckpt *k, const cic_model_cfg *cfg, int l,
                                cic_diag *d);
/* Nothing to read (a family whose sizes all come from config.json, or all
 * from the tensors): 0. */
int _cic_ckpt_nothing(cic_ckpt *k, cic_diag *d);

#endif
