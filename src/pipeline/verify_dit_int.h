/* SPDX-License-Identifier: MIT */
/* verify_dit_int.h: what verify_dit.c, verify_dit_fwd.c and
 * verify_dit_diag.c share (not part of the pipeline's interface): one DiT
 * block's tensors as doubles and the forward passes of the original and of
 * a rewrite, in row-vector algebra (y = x W^T + b with W stored [out, in],
 * as PyTorch stores it; the stream's rotation is x Q). */
#ifndef CIC_VERIFY_DIT_INT_H
#define CIC_VERIFY_DIT_INT_H

#include "verify_dit.h"

#include "../model/checkpoint.h"

/* A block's tensors (reference names under blocks.{i}.), and the final
 * layer's (final_layer.linear, final_layer.adaLN_modulation.1). */
enum vd_tensor {
    VD_QKV_W, VD_QKV_B, VD_PROJ_W, VD_PROJ_B, VD_FC1_W, VD_FC1_B, VD_FC2_W, VD_FC2_B,
    VD_ADA_W, VD_ADA_B, VD_NT
};
enum vd_final { VD_LIN_W, VD_LIN_B, VD_FADA_W, VD_FADA_B, VD_NF };
extern const char *const VD_NAME[VD_NT];  /* "attn.qkv.weight", ... */
extern const char *const VD_FNAME[VD_NF]; /* "final_layer.linear.weight", ... */

/* Values of one block (or of the final layer: the first VD_NF); NULL when
 * the checkpoint has no such tensor (a static fold's modulation). */
typedef struct {
    double *t[VD_NT];
} vd_block;

/* Sizes, the strategy's parts and the rotations. */
typedef struct {
    int d, h, m, dc, dout, N, B;
    double eps;             /* the norms' eps as its binary32 value */
    cic_adaln_strategy st;  /* the rewrite's parts (its kind's descriptor) */
    bool centered;          /* the rotated stream is x C Q (norm RMS0); else x Q (LN0) */
    const double *q;        /* d x d, the stream's rotation; NULL when not rotated */
    const double *hd, *hm;  /* branch: H / sqrt(w) of widths d and m; else NULL */
} vd_ctx;

/* Everything one run holds. */
typedef struct {
    const cic_verify_opts *o;
    cic_verify_dit_result *r;
    cic_ckpt *ka, *kb;
    vd_ctx c;
    double *q, *hd, *hm;    /* owned rotations */
    double *x, *cond, *c0;  /* the block input (R x d), the conditions (B x dc), adaln.c0 */
    cic_ckpt_storage sb;    /* the rewrite's storage so far */
    cic_ckpt_storage qs;    /* Q's (--q), bits 0 when none */
} vdit;

/* verify_dit_in.c: block l's tensors (blocks.{l}.*) of the original (rw
 * false) or of the rewrite, whose storage is noted into v->sb (a static
 * fold's has no modulation); the final layer's (the first VD_NF of b).
 * 0, or -1 with d set. */
int vd_load_block(vd_block *b, vdit *v, bool rw, int l, cic_diag *d);
int vd_load_final(vd_block *b, vdit *v, bool rw, cic_diag *d);
void vd_block_free(vd_block *b);
/* The rewrite's storage (verify.h) over the tensors the run reads (the
 * blocks of r's range, the final layer when r->have_head) into v->sb. */
void vd_storage(vdit *v);
/* The rotations the strategy needs: Q from --q (a rotated stream), or H_d
 * and H_m (branch-rotate); into v->c. 0, or -1 with d set. */
int vd_load_rotations(vdit *v, cic_diag *d);
/* The block input v->x and the conditions v->cond (seeded, or from the
 * input file: tokens and samples from it), a static fold's adaln.c0 and
 * the sample that has it (r->calib). 0, or -1 with d set. */
int vd_load_inputs(vdit *v, cic_diag *d);

/* y (B N x d) = the original block on x with the conditions cond (B x
 * dc); the rewrite's block on its stream s. 0, or -1 (memory). y may not
 * alias the input. */
int vd_block_orig(double *y, const double *x, const double *cond, const vd_block *b,
                  const vd_ctx *c);
int vd_block_rw(double *y, const double *s, const double *cond, const vd_block *b,
                const vd_ctx *c);
/* The final layer's output (B N x dout), of the original on x and of the
 * rewrite on its stream s. 0, or -1 (memory). */
int vd_final_orig(double *y, const double *x, const double *cond, const vd_block *f,
                  const vd_ctx *c);
int vd_final_rw(double *y, const double *s, const double *cond, const vd_block *f,
                const vd_ctx *c);
/* The rewrite's stream of the original's x (B N x d): x C Q, x Q, or x
 * itself (no rotation), 0 or -1 (memory); and back: s Q^T (centering is
 * not undone). */
int vd_rotate(double *s, const double *x, const vd_ctx *c);
void vd_unrotate(double *x, const double *s, const vd_ctx *c);

/* The modulation silu(cond) W^T + b of one condition (dc values) into mod
 * (rows values, W rows x dc). */
void vd_modulation(double *mod, const double *cond, const double *w, const double *b,
                   int rows, int dc);

/* Diagnose block layer (1-based counts into r->find): each tensor of the
 * rewrite rb against what the strategy's rule makes of the original ob,
 * Q and the conditions; and, for a static fold, which samples it is exact
 * on. ok_sample[s]: the block is equivalent on sample s. */
void vd_diagnose(cic_verify_dit_result *r, int layer, const vd_block *ob, const vd_block *rb,
                 const vd_ctx *c, const double *cond, const double *c0,
                 const bool *ok_sample);

/* The same for the final layer (findings under layer -1): its linear
 * (and, but for a static fold, its modulation) against the rule; nothing
 * when every tensor keeps it. */
void vd_diagnose_final(cic_verify_dit_result *r, const vd_block *of, const vd_block *rf,
                       const vd_ctx *c, const double *c0);

#endif
