/* SPDX-License-Identifier: MIT */
/* ckpt_gptj.c: GPT-J checkpoints (checkpoint.h): model_type "gptj",
 * GPTJForCausalLM. One LayerNorm (eps layer_norm_epsilon) feeds attention
 * and the MLP side by side; q, k, v and out_proj without biases, fc_in and
 * fc_out with; GELU in its tanh form (gelu_new); rotary embeddings in the
 * interleaved layout (rotate_every_two, base 10000) on q and k; a causal
 * mask; the final LayerNorm ln_f and lm_head with its bias; the token
 * embedding wte, no learned positions. The parallel block, whose names are
 * GPT-J's (transformer.h.{i}.*, numbered from layer0 here).
 *
 * Rotary on the first rotary_dim dims of each head (GPT-J-6B: 64 of 256),
 * the table built for rotary_dim as GPT-J's create_sinusoidal_positions
 * builds it, the other dims passing as they are; absent or null: every dim.
 * An odd rotary_dim or one above the head dim is refused by name. A rewrite with fused
 * LayerNorms adds biases to q, k and v: they are read when there and zero
 * otherwise (the original has none). */
#include "ckpt_family.h"

#include <float.h>
#include <stdio.h>
#include <string.h>

static int gptj_config(cic_ckpt *k, cic_diag *d)
{
    json_t *v;
    int rot = 0, hd;
    k->inter = 0;
    if (cfg_int(k, "n_embd", 1, CIC_CASE_MAX_DIM, -1, &k->hidden, d) ||
        cfg_int(k, "n_head", 1, CIC_CASE_MAX_DIM, -1, &k->heads, d) ||
        cfg_int(k, "n_layer", 1, CKPT_MAX_SIZE, -1, &k->layers, d) ||
        cfg_int(k, "vocab_size", 1, CKPT_MAX_SIZE, -1, &k->vocab, d) ||
        cfg_int(k, "n_inner", 1, CKPT_MAX_SIZE, 0, &k->inter, d) ||
        cfg_int(k, "rotary_dim", 1, CIC_CASE_MAX_DIM, 0, &rot, d) ||
        cfg_f32(k, "layer_norm_epsilon", (double)FLT_TRUE_MIN, 1e-5,
                "every engine uses eps as a binary32 value", &k->eps, d) ||
        cfg_bool(k, "tie_word_embeddings", false, &k->tied, d))
        return -1;
    if (k->hidden % k->heads) {
        cic_diag_set(d, k->cfg_path, 0, 0, "n_embd %d is not a multiple of n_head %d",
                     k->hidden, k->heads);
        return -1;
    }
    hd = k->hidden / k->heads;
    if (rot % 2 || rot > hd) { /* GPT-J-6B: 64 of 256, fine */
        cic_diag_set(d, k->cfg_path, 0, 0, "'rotary_dim' = %d: rotary on the first rotary_dim "
                     "dims of each head needs an even number up to the head dim %d (n_embd %d "
                     "/ n_head %d)", rot, hd, k->hidden, k->heads);
        return -1;
    }
    k->rotary_dim = rot == hd ? 0 : rot; /* 0: every dim, the op as a whole-head rope */
    if (!rot && hd % 2) {
        cic_diag_set(d, k->cfg_path, 0, 0, "n_embd %d / n_head %d = %d: rotary embeddings "
                     "(rotate_every_two) need an even head size", k->hidden, k->heads, hd);
        return -1;
    }
    if (!k->inter) /* GPT-J's code: n_inner null means 4 n_embd */
        k->inter = 4 * k->hidden;
    v = json_object_get(k->config, "activation_function");
    if (v && !(json_is_string(v) && !strcmp(json_string_value(v), "gelu_new"))) {
        cic_diag_set(d, k->cfg_path, 0, 0, "activation_function must be \"gelu_new\" (GELU, "
                     "tanh form): others are not modelled for GPT-J");
        return -1;
    }
    k->act = CIC_ACT_GELU_TANH;
    k->kv_heads = k->heads;
    k->theta = 10000; /* create_sinusoidal_positions: base 10000, no key */
    return 0;
}

/* The block's names are GPT-J's: transformer.h.{l}.* from layer0, the
 * readout's as they are; q, k and v's biases zero when absent. */
static int gptj_parts(ckpt_part *p, const cic_ckpt *k, const char *name, int layer0, int rows,
                      int cols)
{
    int l, n = 0;
    (void)rows;
    (void)cols;
    if (sscanf(name, "transformer.h.%d.%n", &l, &n) == 1 && n > 0) {
        snprintf(p->name, sizeof p->name, "transformer.h.%d.%s", l + layer0, name + n);
        if (strstr(name + n, "_proj.bias") && !has_tensor(k, p->name))
            p->zero = true; /* the original's q, k, v (a rewrite's fused LN bias) */
        return 1;
    }
    if (!strncmp(name, "transformer.ln_f.", 17) || !strcmp(name, "lm_head.bias")) {
        snprintf(p->name, sizeof p->name, "%s", name);
        return 1;
    }
    if (!strcmp(name, "lm_head.weight")) {
        snprintf(p->name, sizeof p->name, "%s",
                 k->tied && !has_tensor(k, "lm_head.weight") ? k->fam->embed : name);
        return 1;
    }
    return 0;
}

static void gptj_model_cfg(const cic_ckpt *k, cic_model_cfg *cfg)
{
    cfg->block = CIC_BLOCK_PARALLEL;
    cfg->qkv_bias = true; /* zeros in the original; a fused rewrite's LN bias */
    cfg->rope = CIC_ROPE_INTERLEAVED;
    cfg->rope_theta = k->theta;
    cfg->rotary_dim = k->rotary_dim;
    cfg->causal = true;
}

static int gptj_check_layer(const cic_ckpt *k, const cic_model_cfg *cfg, int l, cic_diag *d)
{
    enum { D = CKPT_DIM_D, MLP = CKPT_DIM_MLP };
    static const ckpt_layer_tensor t[] = {
        {"ln_1.weight", 1, D},           {"ln_1.bias", 1, D},
        {"attn.q_proj.weight", D, D},    {"attn.k_proj.weight", D, D},
        {"attn.v_proj.weight", D, D},    {"attn.out_proj.weight", D, D},
        {"attn.q_proj.bias", 1, D},      {"attn.k_proj.bias", 1, D},
        {"attn.v_proj.bias", 1, D},      {"mlp.fc_in.weight", MLP, D},
        {"mlp.fc_in.bias", 1, MLP},      {"mlp.fc_out.weight", D, MLP},
        {"mlp.fc_out.bias", 1, D},
    };
    char n[300];
    if (_cic_ckpt_check_layer(k, cfg, "transformer.h.%d.%s", t, sizeof t / sizeof t[0], l, d) < 0)
        return -1;
    snprintf(n, sizeof n, "transformer.h.%d.attn.out_proj.bias", l + cfg->layer0);
    if (has_tensor(k, n)) { /* the block has none: a value here would be dropped */
        cic_diag_set(d, k->dir, 0, 0, "tensor '%s': GPT-J's out_proj has no bias (a rewrite "
                     "that centres the stream keeps it without one)", n);
        return -1;
    }
    return 0;
}

/* The final LayerNorm and the head with its bias. */
static int gptj_check_head(const cic_ckpt *k, const cic_model_cfg *cfg, cic_diag *d)
{
    if (_cic_ckpt_check_tensor(k, cfg, "transformer.ln_f.weight", 1, k->hidden, d) < 0 ||
        _cic_ckpt_check_tensor(k, cfg, "transformer.ln_f.bias", 1, k->hidden, d) < 0 ||
        _cic_ckpt_check_tensor(k, cfg, "lm_head.weight", k->vocab, k->hidden, d) < 0 ||
        _cic_ckpt_check_tensor(k, cfg, "lm_head.bias", 1, k->vocab, d) < 0)
        return -1;
    return 0;
}

static const char *const gptj_types[] = {"gptj", NULL};

const cic_ckpt_family _cic_ckpt_gptj = {
    .name = "gptj",
    .model_types = gptj_types,
    .embed = "transformer.wte.weight",
    .verify = true,
    .config = gptj_config,
    .sizes = _cic_ckpt_nothing,
    .parts = gptj_parts,
    .model_cfg = gptj_model_cfg,
    .check_layer = gptj_check_layer,
    .check_head = gptj_check_head,
};
