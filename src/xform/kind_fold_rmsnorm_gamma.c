/* SPDX-License-Identifier: MIT */
/* kind_fold_rmsnorm_gamma.c: RMSNorm gain folding (kind
 * "fold-rmsnorm-gamma", rmsnorm blocks; DESIGN.md section 5): every
 * RMSNorm's gain folded into its readers, kept as float32 recipes where
 * the weights are float32 (model/lazy.h). Known mistake
 * "center-embeddings": the block input mean-centered as for LayerNorm,
 * wrong on an RMSNorm model (broken). */
#include "xform.h"
#include "xform_util.h"

/* Its known mistake, by number (cic_xform_spec.mistake; .mistakes below). */
enum { CENTER_EMBEDDINGS = 1 };

static int apply(cic_xf_ctx *c, const cic_xform_spec *x)
{
    return _cic_xf_fuse_norms(c, false, false, x->mistake == CENTER_EMBEDDINGS);
}

static void norms_after(cic_norm_state *s, const cic_xform_spec *x)
{
    (void)x;
    s->gain = false;
}

/* Folded into the original, its weights are recipes over the float32
 * values (a chain of folds is not). */
static void memory(cic_xform_mem *mm, const cic_xform_spec *x)
{
    (void)x;
    mm->lazy = CIC_XLAZY_VALUES;
    mm->doubles = false;
}

const cic_xform_desc cic_xform_fold_rmsnorm_gamma = {
    .name = "fold-rmsnorm-gamma",
    .family = CIC_XFAM_FOLD,
    .norms = 1u << CIC_NORM_RMSNORM,
    .keys = CIC_XKEY_AFTER | CIC_XKEY_MISTAKE,
    .mistakes = {[CENTER_EMBEDDINGS - 1] = "center-embeddings"}, /* the input centered */
    .refused_hint = "; LayerNorm models use fuse-layernorm",
    .apply = apply,
    .norms_after = norms_after,
    .memory = memory,
};
