/* SPDX-License-Identifier: MIT */
/* kind_fuse_layernorm.c: LayerNorm fusion (kind "fuse-layernorm", preln
 * blocks; DESIGN.md section 5): every LayerNorm's gain and bias folded
 * into its readers, its mean baked into every writer and the block input
 * (C), the norm left an affine-free RMSNorm. Known mistake
 * "skip-mean-bake": the mean not baked in (broken). */
#include "xform.h"
#include "xform_util.h"

/* Its known mistake, by number (cic_xform_spec.mistake; .mistakes below). */
enum { SKIP_MEAN_BAKE = 1 };

static int apply(cic_xf_ctx *c, const cic_xform_spec *x)
{
    return _cic_xf_fuse_norms(c, true, x->mistake != SKIP_MEAN_BAKE, false);
}

static void norms_after(cic_norm_state *s, const cic_xform_spec *x)
{
    (void)x;
    s->center = false;
    s->gain = false;
    s->bias = false;
}

const cic_xform_desc cic_xform_fuse_layernorm = {
    .name = "fuse-layernorm",
    .family = CIC_XFAM_FOLD,
    .norms = 1u << CIC_NORM_LAYERNORM,
    .keys = CIC_XKEY_AFTER | CIC_XKEY_MISTAKE,
    .mistakes = {[SKIP_MEAN_BAKE - 1] = "skip-mean-bake"}, /* the mean not baked in */
    .refused_hint = "; RMSNorm models use fold-rmsnorm-gamma",
    .apply = apply,
    .norms_after = norms_after,
};
