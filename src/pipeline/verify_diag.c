/* SPDX-License-Identifier: MIT */
/* verify_diag.c: the diagnosis of the first broken layer of cicheck verify
 * (verify_diag.h): both checkpoints' layer read again as one-layer models,
 * Q as doubles, the storage's tolerance, and the family's diagnosis from
 * the table below. Run once per verify, after the stream, on one layer:
 * the cost is one layer's weights of each checkpoint and a few products
 * by Q per tensor.
 *
 * The table is the plug point for the families verify reads: a block kind
 * (and whether the rewrite fused LayerNorm) and the function that
 * diagnoses it. The rule-table families (verify_diag_rules.c) list their
 * tensors and the mistakes each can show; a family with a rule of its own
 * (DiT's adaLN strategies) gives a function that adds its findings with
 * cic_vdiag_add. */
#include "verify_diag_int.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

typedef struct {
    const char *family; /* the checkpoint family's name (cic_ckpt_family_name) */
    enum cic_block_kind block;
    int ln_fused; /* 1: only with --layernorm fused, 0: only without, -1: either */
    const char *what;
    cic_vdiag_fn fn;
} vdiag_family;

/* The families verify's diagnosis knows. To add one: its block kind and a
 * function (a rule table in verify_diag_rules.c, or findings of its own). */
static const vdiag_family FAMILIES[] = {
    {"llama", CIC_BLOCK_RMSNORM, -1, "llama family", cic_vdiag_rmsnorm},
    {"opt", CIC_BLOCK_PRELN, 1, "OPT with fused LayerNorm", cic_vdiag_opt},
    {"timm", CIC_BLOCK_PRELN, 1, "timm ViT with fused LayerNorm", cic_vdiag_vit},
    {"gptj", CIC_BLOCK_PARALLEL, 1, "GPT-J with fused LayerNorm", cic_vdiag_gptj},
};

/* The relative distance up to which a tensor stored with bits significand
 * bits "equals the rule": its rounding to nearest (at most 2^-bits relative
 * per value, so in the Frobenius norm) twice over, for a tool that rounds
 * through float32 first (bf16 from a float32 product), plus 2^-18 for a
 * tool that forms the products in float32 (about sqrt(k) 2^-24 for sums of
 * k terms up to k = 2^12 and more in practice: blocked sums). The mistakes
 * of the catalogue are far beyond it (a missing Q: about sqrt(2)). */
static double tolerance(int bits)
{
    if (bits < 2 || bits > 53)
        bits = 24;
    return ldexp(1.0, 1 - bits) + (bits > 18 ? ldexp(1.0, -18) : 0);
}

/* Layer l (checkpoint numbering) of one checkpoint as a one-layer model
 * with its weights (no input file, no online ops: the weights alone). */
static cic_model *weights_of(const cic_vrun *w, bool trans, int l, cic_diag *d)
{
    cic_model_cfg c = trans ? w->cb : w->ca;
    cic_model_progress mp = {NULL, NULL, w->rt};
    c.layer0 = l;
    c.layers = 1;
    c.input_kind = CIC_INPUT_RANDOM;
    c.input_file[0] = '\0';
    return cic_model_create_progress(&c, CIC_READOUT_RESIDUAL, &mp, d);
}

static const vdiag_family *family_of(const cic_vrun *w, const cic_ckpt *ka)
{
    size_t i;
    for (i = 0; i < sizeof FAMILIES / sizeof FAMILIES[0]; i++)
        if (FAMILIES[i].block == w->ca.block &&
            !strcmp(FAMILIES[i].family, cic_ckpt_family_name(ka)) &&
            (FAMILIES[i].ln_fused < 0 || FAMILIES[i].ln_fused == (int)w->o->ln_fused))
            return &FAMILIES[i];
    return NULL;
}

/* Layer l of both checkpoints through f into g: 1 when a tensor differs,
 * 0 when none does, -1 when memory runs out (d set when the weights cannot
 * be read). */
static int layer_diag(cic_vdiag *g, const vdiag_family *f, const cic_vrun *w,
                      const cic_ckpt *ka, const cic_ckpt *kb, const double *q, int l,
                      cic_diag *d)
{
    cic_model *a = weights_of(w, false, l, d), *b = a ? weights_of(w, true, l, d) : NULL;
    cic_vdiag_in in = {w, a, b, ka, kb, q, l};
    int rc = a && b ? f->fn(g, &in) : -1;
    cic_model_destroy(a);
    cic_model_destroy(b);
    return rc;
}

/* Without Q the layers have no verdicts: the first layer whose tensors
 * fail what a rotation leaves alone (each one's Gram matrix against the
 * rule's without Q) is diagnosed, when the head is not equivalent. */
static int diagnose_without_q(cic_vdiag *g, const vdiag_family *f, const cic_vrun *w,
                              const cic_ckpt *ka, const cic_ckpt *kb,
                              const cic_verify_result *r, cic_diag *d)
{
    int l, rc = 0;
    for (l = r->layer0; rc == 0 && l < r->layer0 + r->n_layers; l++) {
        g->n = 0;
        g->layer = l;
        rc = layer_diag(g, f, w, ka, kb, NULL, l, d);
    }
    if (rc == 0) {
        g->layer = -1;
        g->n = 0;
    }
    snprintf(g->note, sizeof g->note, "no Q: what a rotation leaves alone (each tensor's Gram "
             "matrix on seeded probes, against the rule's without Q; v_proj and o_proj, which "
             "R2 may rotate, and a missing rotation are not seen) %s (%s); equal when within "
             "%.2g relative (%d-bit storage)", rc > 0 ? "first fails at this layer"
             : "holds at every layer", f->what, g->tol, g->bits);
    return rc < 0 ? -1 : 0;
}

int cic_verify_diagnose(const cic_vrun *w, const cic_ckpt *ka, const cic_ckpt *kb,
                        cic_verify_result *r, cic_diag *d)
{
    cic_vdiag *g = &r->diag;
    const vdiag_family *f = family_of(w, ka);
    double *q = NULL;
    size_t i, dd = (size_t)w->ca.d_model * w->ca.d_model;
    int rc = -1;
    memset(g, 0, sizeof *g);
    g->layer = -1;
    g->bits = r->bits;
    g->tol = tolerance(r->bits);
    g->with_q = w->q != NULL;
    if (!w->q && f && r->head_verdict != CIC_VERDICT_EQUIVALENT) {
        rc = diagnose_without_q(g, f, w, ka, kb, r, d);
        goto done;
    }
    if (r->first_bad < 0)
        return 0;
    g->layer = r->first_bad;
    if (!f) {
        snprintf(g->note, sizeof g->note, "no per-tensor rules here for this block kind%s",
                 w->o->ln_fused ? "" : " without --layernorm fused");
        return 0;
    }
    if (!(q = cic_calloc(dd, sizeof *q)))
        goto done;
    for (i = 0; i < dd; i++)
        q[i] = mpfr_get_d(w->q[i], MPFR_RNDN); /* exact: 53 bits */
    snprintf(g->note, sizeof g->note, "each tensor of layer %d against the rewrite rule (%s) "
             "from the original's, Q and the options; equal when within %.2g relative (%d-bit "
             "storage)", g->layer, f->what, g->tol, g->bits);
    rc = layer_diag(g, f, w, ka, kb, q, g->layer, d) < 0 ? -1 : 0;
done:
    if (rc < 0 && !d->msg[0])
        cic_diag_set(d, w->o->trans, 0, 0, "out of memory diagnosing layer %d", g->layer);
    free(q);
    return rc;
}
