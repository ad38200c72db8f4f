/* SPDX-License-Identifier: MIT */
/* build.h: the graph-building helpers (build.c) shared by the block
 * builders (block_*.c) and the model's creation (create.c). Internal to
 * src/model. */
#ifndef CIC_BUILD_H
#define CIC_BUILD_H

#include "model.h"

typedef struct cic_bld {
    cic_model *m;
    int ok;
    /* the key/value heads of attention: the cfg's kv_heads for a block with
     * LLaMA attention (descriptor llama), else heads (set by create.c, so
     * the helpers need not ask the block table that calls them) */
    int kv_heads;
} cic_bld;

/* A weight [rows, cols] drawn with std. */
int _cic_bld_weight(cic_bld *b, const char *name, int rows, int cols, double std);
/* A norm gain [1, cols] around 1. */
int _cic_bld_gain(cic_bld *b, const char *name, int cols);
/* An activation [R, cols] (rows: tokens). */
int _cic_bld_act(cic_bld *b, const char *name, int cols);
void _cic_bld_op(cic_bld *b, const cic_op *op);
int _cic_bld_linear(cic_bld *b, enum cic_site site, int layer, enum cic_lin_role role,
                    int in, int w, int bias, const char *out_name);
int _cic_bld_norm(cic_bld *b, enum cic_site site, int layer, int in, int g, int bias,
                  bool center, const char *out_name);
int _cic_bld_add(cic_bld *b, enum cic_site site, int layer, int x, int y,
                 const char *out_name);
/* The readout after the last layer's stream x (the model's residual): for
 * the head readout, a final norm (tensors NORM.weight, and NORM.bias when
 * layernorm: a LayerNorm with bias, else an RMSNorm) and a reader linear
 * HEAD.weight [d_out, d] (and HEAD.bias when layernorm), activations
 * act.<last part of the name>; else the stream itself, compared without
 * its row mean when layernorm. Returns the output tensor. */
int _cic_bld_readout(cic_bld *b, int readout, int x, const char *norm, const char *head,
                     bool layernorm);
int _cic_bld_attn(cic_bld *b, int layer, int q, int qc, int k, int kc, int v, int vc,
                  const char *out_name);
/* RoPE (the case's layout and base) of activation x, whose columns are
 * heads heads: the output tensor. */
int _cic_bld_rope(cic_bld *b, int layer, int x, int heads, const char *out_name);
/* Mark tensor id to be drawn with std (the weight source gives the values,
 * source.h). */
void _cic_fill(cic_model *m, int id, double std);
/* The outlier channels (after the weight source gave the values). */
void _cic_apply_outliers(cic_model *m);
/* The massive activations of the block input (cfg massive_*): 0, or -1
 * (out of memory). */
int _cic_apply_massive(cic_model *m);


#endif
