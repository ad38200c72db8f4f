/* SPDX-License-Identifier: MIT */
/* checkpoint.h: a user's checkpoint as a model's weight source.
 *
 * A checkpoint is a folder in the Hugging Face layout: config.json beside
 * model.safetensors, or beside shards listed in model.safetensors.index.json
 * ("weight_map": tensor name -> shard file). The family comes from
 * config.json's model_type:
 * - llama ("llama", "mistral": RMSNorm, RoPE in the rotate_half layout
 *   with rope_theta, grouped-query attention, SwiGLU, no biases), the
 *   rmsnorm block with rope = "half": model.layers.{i}.* (the block's
 *   layers.{i}.* names), model.norm.weight, lm_head.weight (or
 *   model.embed_tokens.weight with tie_word_embeddings);
 * - opt ("opt": pre-LN with biases, ReLU or GELU, LayerNorm eps 1e-5,
 *   learned positions with OPT's offset of 2), the preln block:
 *   model.decoder.layers.{i}.{self_attn_layer_norm, self_attn.{q,k,v,out}_proj,
 *   final_layer_norm, fc1, fc2}.{weight,bias} (q, k, v stacked into the
 *   block's attn.qkv), model.decoder.final_layer_norm, the head tied to
 *   model.decoder.embed_tokens.weight (lm_head.weight when present) with a
 *   zero bias. Post-LN OPT (do_layer_norm_before false) and projected
 *   embeddings are refused;
 * - gptj ("gptj": one LayerNorm feeding attention and the MLP side by side,
 *   eps layer_norm_epsilon, gelu_new, RoPE in the interleaved layout
 *   (rotate_every_two) on q and k, on the first rotary_dim dims of each
 *   head (GPT-J-6B: 64 of 256), causal), the parallel block under GPT-J's
 *   names: transformer.h.{i}.{ln_1, attn.{q,k,v,out}_proj, mlp.fc_in,
 *   mlp.fc_out}, transformer.wte, transformer.ln_f, lm_head with its bias;
 *   q, k and v biases read when there (a fused rewrite's), zero otherwise;
 * - timm ViT (config.json "architecture": "vit_...", no model_type), the
 *   preln block whose names are timm's, bidirectional, GELU, eps 1e-6, the
 *   widths from the tensors and the heads from num_heads or the size in the
 *   name; no token embedding (hidden-state inputs only);
 * - DiT (no config.json, or one with "architecture": "DiT..."), the dit
 *   block with its final layer under the reference code's names, the widths
 *   from the tensors and the heads from num_heads or the DiT-S/B/L/XL
 *   width; the condition and the input stay seeded.
 *
 * Sizes come from config.json and are checked against every tensor's shape
 * (a mismatch names the tensor, its shape and the expected one). Storage
 * dtypes F32, BF16 and F16 are used as stored (their values are exact in
 * float32); F64 only where every value is a float32 (else an error naming
 * the tensor and the first index that is not). NaN or Inf values are an
 * error with the tensor and the index. Files are memory-mapped; values are
 * read into the model's float32 weights when it is built.
 *
 * Each family is a descriptor (cic_ckpt_family, ckpt_family.h) in a file of
 * its own, ckpt_<name>.c; checkpoint_family.c holds their table and asks
 * them, checkpoint.c (files, values, input) and checkpoint_storage.c reach
 * a family only through it, and all use the helpers of ckpt_common.c. To
 * add a family: write ckpt_<name>.c with the helpers of ckpt_common.c only
 * (its claims, embedding, config and sizes readers, names, model cfg,
 * layer and readout checks), add its constant to the enum in
 * checkpoint_int.h and its line to _cic_ckpt_families, the file to
 * meson.build, and its config.json to test_ckpt_family_find
 * (tests/test_model.c); claims that overlap another family's fail
 * test_ckpt_families. */
#ifndef CIC_CHECKPOINT_H
#define CIC_CHECKPOINT_H

#include "model.h"

#include "../base/safetensors_read.h"

typedef struct cic_ckpt cic_ckpt;

/* Open folder dir: config.json and every shard (each checked completely as
 * a safetensors file). NULL with d set (d->file the file at fault). */
cic_ckpt *cic_ckpt_open(const char *dir, cic_diag *d);
void cic_ckpt_close(cic_ckpt *k);

/* The number of decoder layers of the checkpoint (num_hidden_layers). */
int cic_ckpt_layers(const cic_ckpt *k);

/* Whether cicheck verify reads the checkpoint's family (the llama family,
 * OPT, GPT-J and timm's ViT). */
bool cic_ckpt_verifiable(const cic_ckpt *k);
/* Whether the family has a token embedding (timm and DiT have none: their
 * input is hidden states). */
bool cic_ckpt_has_embedding(const cic_ckpt *k);

/* The family's name ("llama", "opt", "timm", "dit"). */
const char *cic_ckpt_family_name(const cic_ckpt *k);

/* The tensor called name in any shard of k (as stored, unchecked), or
 * NULL: for readers of tensors outside a family's model (a DiT rewrite's
 * folded weights and calibration condition, src/pipeline/verify_dit.c). */
const cic_stfile_tensor *cic_ckpt_tensor(const cic_ckpt *k, const char *name);

/* Set cfg from config.json for layers [layer0, layer0 + cfg->layers) (the
 * caller has set cfg->layers and cfg->tokens): block, d_model, heads,
 * kv_heads, d_mlp and mlp_ratio, eps, activation, rope and rope_theta,
 * causal, d_out (the vocabulary). Then every tensor those layers and the
 * head need is looked up and its dtype and shape checked (with
 * cfg->ckpt_fused set on entry, norm gains may be absent: fused, read as
 * 1). CIC_OK, or CIC_EINPUT with d set. */
int cic_ckpt_config(const cic_ckpt *k, cic_model_cfg *cfg, int layer0, cic_diag *d);

/* The weight source (source.h): every marked weight of m from the
 * checkpoint m->cfg.checkpoint (layers from m->cfg.layer0); the block input
 * and anything the checkpoint does not hold stay with the seeded generator.
 * 0, or -1 with d set (a value that is NaN, Inf, or an F64 that is not a
 * float32; a file changed since the case was loaded; no memory). */
int cic_ckpt_fill(cic_model *m, const cic_model_progress *p, cic_diag *d);

/* The block input of [input] (cfg.input_kind): nothing for random (the
 * seeded generator draws it), seeded token ids (key (seed,
 * "input.tokens"), uniform over the vocabulary) through k's embed_tokens,
 * or the file cfg.input_file: "input" hidden states [samples, tokens,
 * d_model] or [samples * tokens, d_model] (float, as stored, finite), or
 * "input_ids" [samples, tokens] or [tokens] (one sample) I32 or I64 through
 * k's embed_tokens (input_shape.h; its sizes must agree with cfg's). k may
 * be NULL (a seeded model: "input" only). The input's seeded draw is then
 * unmarked. 0, or -1 with d set. */
int cic_input_fill(cic_model *m, const cic_ckpt *k, cic_diag *d);

/* The storage of the tensors a model reads from a checkpoint
 * (checkpoint_storage.c): the fewest significand bits among them (F64 53,
 * F32 24, F16 11, BF16 8; integer tensors hold exact values and do not
 * count), the first tensor with that many in the model's order, its dtype,
 * and how many tensors have that many bits. */
typedef struct {
    int bits;
    int count;
    char tensor[300]; /* "" when no float tensor is read */
    char dtype[8];
} cic_ckpt_storage;

/* The storage of the weights model m reads from k (m->cfg.layer0 its first
 * layer; a fused norm tensor that is absent holds exact 1s or 0s and does
 * not count), and of the token embedding (OPT: and its positions) when
 * embeds (the block input is token ids). Tensors in the folder that m does
 * not read do not count. */
void cic_ckpt_storage_used(cic_ckpt_storage *s, const cic_ckpt *k, const cic_model *m,
                           bool embeds);

/* The token embedding of k ([vocab, d_model], row-major) as doubles in a
 * fresh array (the caller frees it), its size in *rows and *cols and its
 * storage in *s. NULL with d set: no token embedding (timm, DiT), a NaN or
 * Inf value, no memory. */
double *cic_ckpt_embedding(const cic_ckpt *k, int *rows, int *cols, cic_ckpt_storage *s,
                           cic_diag *d);

/* A file a run reads, and the SHA-256 of what it reads of it. */
typedef struct {
    char label[320];  /* what it is to the case: "checkpoint config.json",
                         "checkpoint model-00001-of-00002.safetensors", ... */
    char path[1400];  /* as opened */
    char sha256[65];
    bool whole;       /* the whole file; else (a checkpoint's .safetensors)
                         its header and the data of the tensors the run reads */
    cic_file_id id;   /* the file when it was hashed */
} cic_file_hash;

/* What a run of cfg reads from its checkpoint (cfg->checkpoint, layers
 * from cfg->layer0), hashed: config.json and the index whole, and of each
 * .safetensors shard its header (the 8-byte length and the JSON) and then
 * the data of every tensor the run reads, whole, in the order of the file
 * (the layers' and the head's tensors, and the embedding and OPT's
 * positions when the input is token ids). Hashing whole shards would read
 * every layer of a model whose run reads one (SHA-256 here: about 4 s a
 * GiB); this reads what the run reads. *out (free()) holds *n entries.
 * 0, or -1 with d set. */
int cic_ckpt_hash_read(cic_file_hash **out, int *n, const cic_model_cfg *cfg, cic_diag *d);

#endif
