/* SPDX-License-Identifier: MIT */
/* xform.c: the transforms' checks against the model, and the dispatch of a rewrite to its kind's
 * descriptor (src/kind/xform_kind.h, one file per kind here: kind_*.c;
 * what the kinds share is xform_common.c).
 *
 * Row-vector algebra of DESIGN.md section 2 in PyTorch layout (W [out, in],
 * y = x W^T + b):
 *   fold g, b into a reader:   W'[j,i] = W[j,i] g_i,  b'_j = b_j + sum_i W[j,i] b_i
 *   bake C into a writer:      W'[j,c] = W[j,c] - mean_j W[.,c],  b' = b - mean(b)
 *   rotate a reader:           W' = W Q        (W'[j,i] = sum_k W[j,k] Q[k,i])
 *   rotate a writer:           W' = Q^T W,     b' = Q^T b
 *   the block input:           X' = X C, X' = X Q
 * Every value is computed from the current (possibly already unrounded)
 * values with correctly rounded MPFR operations at the transform precision;
 * with precision "f64-openblas" the products by Q go through dgemm instead
 * (cic_mp_matmul). */
#include "xform.h"

#include "qmat.h"
#include "xform_util.h"

#include <math.h>
#include <string.h>

/* A forced Hadamard base K = x->hadamard_base must fit width w (named what
 * in the message). With it every Hadamard Q the transform builds of that
 * width exists, mean-preserving ones included (cic_q_mean_preserving_k). */
static int _cic_xform_check_base(const cic_xform_chain *ch, const cic_xform_spec *x,
                                 const char *what, int w, cic_diag *d)
{
    char why[256];
    if (cic_q_hadamard_k_supported(w, x->hadamard_base))
        return CIC_OK;
    cic_q_hadamard_k_explain(why, sizeof why, w, x->hadamard_base);
    cic_diag_set(d, ch->path, x->line, 1,
                 "transform '%s': hadamard_base = %d does not fit %s = %d: %s", x->name,
                 x->hadamard_base, what, w, why);
    return CIC_EINPUT;
}

/* group = G (branch-rotate): G divides d_model and the MLP width and has a
 * matrix of the block's kind (a Hadamard, or 4^k for a regular one). */
static int _cic_xform_check_group(const cic_xform_chain *ch, const cic_xform_spec *x,
                                  cic_diag *d)
{
    const cic_model_cfg *m = ch->model;
    int G = x->group;
    if (m->d_model % G || m->d_mlp % G ||
        (x->q == CIC_Q_HADAMARD && !cic_q_hadamard_k_supported(G, x->hadamard_base)) ||
        (x->q == CIC_Q_REGULAR && !cic_regular_order_k(G))) {
        cic_diag_set(d, ch->path, x->line, 1,
                     "transform '%s': group = %d must divide d_model = %d and the MLP "
                     "width %d%s", x->name, G, m->d_model, m->d_mlp,
                     x->q == CIC_Q_REGULAR    ? " and be 4^k (the orders of regular "
                                                "Hadamard matrices)"
                     : x->q == CIC_Q_HADAMARD ? " and have a Hadamard matrix of its order"
                                              : "");
        return CIC_EINPUT;
    }
    return CIC_OK;
}

/* q = "regular-hadamard" without groups: of order d_model (and the MLP
 * width when the kind rotates that too: br), 4^k; not a mean-preserving
 * stream. */
static int _cic_xform_check_regular(const cic_xform_chain *ch, const cic_xform_spec *x,
                                    bool mp, bool br, cic_diag *d)
{
    int w = ch->model->d_model, f = ch->model->d_mlp;
    if (mp) {
        cic_diag_set(d, ch->path, x->line, 1,
                     "transform '%s': a mean-preserving Q is not a regular Hadamard; use "
                     "stream = \"centered\" or q = \"hadamard\"", x->name);
        return CIC_EINPUT;
    }
    if (!cic_regular_order_k(w) || (br && !cic_regular_order_k(f))) {
        char mlp[48] = "";
        if (br)
            snprintf(mlp, sizeof mlp, ", the MLP width %d", f);
        cic_diag_set(d, ch->path, x->line, 1,
                     "transform '%s': q = \"regular-hadamard\" needs orders 4^k (4, 16, 64, "
                     "256, 1024, 4096, ...): d_model = %d%s; %s", x->name, w, mlp,
                     br ? "set group = G (a 4^k dividing them) or use q = \"hadamard\""
                        : "use q = \"hadamard\"");
        return CIC_EINPUT;
    }
    return CIC_OK;
}

int cic_xform_file_q_order(const cic_model_cfg *m, const cic_xform_spec *x)
{
    return cic_xform_desc_of(x->kind)->q_widths & CIC_XW_MODEL ? m->d_model
                                                               : m->d_model / m->heads;
}

const char *cic_xform_file_q_order_name(const cic_xform_spec *x)
{
    return cic_xform_desc_of(x->kind)->q_widths & CIC_XW_MODEL ? "d_model" : "head_dim";
}

/* q = "file:PATH": a readable orthogonal matrix of the kind's order. */
static int _cic_xform_check_file(const cic_xform_chain *ch, const cic_xform_spec *x,
                                 cic_diag *d)
{
    double orth = 0;
    if (cic_q_file_check(&orth, x, cic_xform_file_q_order(ch->model, x),
                         cic_xform_file_q_order_name(x), d) < 0) {
        char why[sizeof d->msg];
        cic_strlcpy(why, d->msg, sizeof why);
        cic_diag_set(d, ch->path, x->line, 1, "transform '%s': %s: %s", x->name, x->q_file,
                     why);
        return CIC_EINPUT;
    }
    if (!(orth <= CIC_Q_FILE_ORTH_MAX)) {
        cic_diag_set(d, ch->path, x->line, 1,
                     "transform '%s': the matrix '%s' of '%s' is not orthogonal: max "
                     "|Q^T Q - I| = %.3g, above %g", x->name, x->q_tensor, x->q_file, orth,
                     CIC_Q_FILE_ORTH_MAX);
        return CIC_EINPUT;
    }
    return CIC_OK;
}

/* The checks of the Q every kind with one shares, then the kind's own:
 * the first refusal wins, in this order (a forced base, the MLP width of a
 * kind that rotates it, a mean-preserving Hadamard, groups, regular and
 * file matrices, the kind's check, a Hadamard of order d_model). */
static int _cic_xform_check_one(const cic_xform_chain *ch, const cic_xform_spec *x, cic_diag *d)
{
    const cic_xform_desc *k = cic_xform_desc_of(x->kind);
    const cic_model_cfg *m = ch->model;
    bool mp = k->family == CIC_XFAM_ADALN && x->stream == CIC_STREAM_MEAN_PRESERVING;
    bool stream = (k->q_widths & CIC_XW_MODEL) != 0;   /* a Q of the residual stream */
    bool mlp = stream && (k->q_widths & CIC_XW_MLP);    /* and of the MLP width */
    bool had = x->q == CIC_Q_HADAMARD;
    if (stream && had && x->hadamard_base != 0)
        /* the Q of the MLP width is built with the same K */
        return _cic_xform_check_base(ch, x, "d_model", m->d_model, d) != CIC_OK ||
                       (mlp && _cic_xform_check_base(ch, x, "the MLP width d_mlp", m->d_mlp,
                                                     d) != CIC_OK)
                   ? CIC_EINPUT
                   : CIC_OK;
    if (mlp && had && !cic_q_hadamard_supported(m->d_mlp)) {
        char hint[256];
        cic_q_hadamard_suggest(hint, sizeof hint, m->d_mlp);
        cic_diag_set(d, ch->path, x->line, 1,
                     "transform '%s': %s needs a Hadamard matrix of the MLP width %d too; %s",
                     x->name, k->name, m->d_mlp, hint);
        return CIC_EINPUT;
    }
    if (mp && had && (m->d_model & (m->d_model - 1))) {
        cic_diag_set(d, ch->path, x->line, 1,
                     "transform '%s': a mean-preserving Hadamard Q needs d_model a power "
                     "of two (d_model = %d); use q = \"random\"", x->name, m->d_model);
        return CIC_EINPUT;
    }
    if (x->group > 0)
        return _cic_xform_check_group(ch, x, d);
    if (x->q == CIC_Q_REGULAR && _cic_xform_check_regular(ch, x, mp, mlp, d) != CIC_OK)
        return CIC_EINPUT;
    if (x->q == CIC_Q_FILE)
        return _cic_xform_check_file(ch, x, d);
    if (k->check && k->check(ch, x, d) != CIC_OK)
        return CIC_EINPUT;
    if (stream && had && !cic_q_hadamard_supported(m->d_model)) {
        char hint[256];
        cic_q_hadamard_suggest(hint, sizeof hint, m->d_model);
        cic_diag_set(d, ch->path, x->line, 1,
                     "transform '%s': no Hadamard matrix of order d_model = %d; %s", x->name,
                     m->d_model, hint);
        return CIC_EINPUT;
    }
    return CIC_OK;
}

int cic_xform_check(const cic_xform_chain *ch, cic_diag *d)
{
    int i;
    for (i = 0; i < ch->n; i++)
        if (_cic_xform_check_one(ch, &ch->xf[i], d) != CIC_OK)
            return CIC_EINPUT;
    return CIC_OK;
}

/* x applied to m itself (a kind that rewrites in place): m, or NULL with m
 * destroyed and d set. */
static cic_model *apply_in_place(cic_model *m, const cic_xform_spec *x, mpfr_prec_t engine_prec,
                                 cic_diag *d)
{
    const cic_xform_desc *k = cic_xform_desc_of(x->kind);
    cic_xf_ctx c;
    int rc = -1;
    CIC_ASSERT(k->apply && "transform kind without an in-place rewrite");
    memset(&c, 0, sizeof c);
    if (_cic_xf_ctx_init(&c, m, cic_xform_prec(x, engine_prec)) >= 0) {
        c.blas = x->prec == CIC_TPREC_F64_BLAS;
        rc = k->apply(&c, x);
    }
    _cic_xf_ctx_clear(&c);
    if (rc < 0) {
        cic_diag_set(d, NULL, 0, 0, "transform '%s': out of memory", x->name);
        cic_model_destroy(m);
        return NULL;
    }
    return m;
}

cic_model *cic_xform_apply(const cic_model *src, const cic_xform_spec *x,
                           mpfr_prec_t engine_prec, cic_diag *d)
{
    const cic_xform_desc *k = cic_xform_desc_of(x->kind);
    cic_model *m;
    if (k->build)
        return k->build(src, NULL, x, engine_prec, d);
    if (!(m = cic_model_clone(src))) {
        cic_diag_set(d, NULL, 0, 0, "transform '%s': out of memory", x->name);
        return NULL;
    }
    return apply_in_place(m, x, engine_prec, d);
}

cic_model *cic_xform_apply_take(cic_model *src, const cic_xform_spec *x,
                                mpfr_prec_t engine_prec, cic_diag *d)
{
    const cic_xform_desc *k = cic_xform_desc_of(x->kind);
    cic_model *m;
    if (k->build) {
        m = k->build(src, src, x, engine_prec, d);
        cic_model_destroy(src);
        return m;
    }
    /* rewritten in place once its values are moved out of src (weights
     * mapped from a checkpoint are read-only: those are copied) */
    m = cic_model_clone_take(src);
    cic_model_destroy(src);
    if (!m) {
        cic_diag_set(d, NULL, 0, 0, "transform '%s': out of memory", x->name);
        return NULL;
    }
    return apply_in_place(m, x, engine_prec, d);
}
