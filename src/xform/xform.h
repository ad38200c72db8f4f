/* SPDX-License-Identifier: MIT */
/* xform.h: the computational-invariance transforms (DESIGN.md section 5),
 * one descriptor per kind (src/kind/xform_kind.h; src/xform/kind_*.c), with
 * the known mistakes as switches. A transform maps a model to a new model;
 * the new weights are computed in MPFR at the transform's precision (the
 * engine precision for "mpfr", 53 bits for "f64", 24 for "f32": MPFR at 53
 * and 24 bits reproduces double and float arithmetic operation by
 * operation), kept unrounded in the tensors' hp values for the verdict, and
 * rounded to float32 for the f32 engines. */
#ifndef CIC_XFORM_H
#define CIC_XFORM_H

#include "../model/model.h"
#include "kinds.h"

/* Bits a transform computes with. */
mpfr_prec_t cic_xform_prec(const cic_xform_spec *x, mpfr_prec_t engine_prec);

/* Unit roundoff of that precision (2^-prec). */
double cic_xform_unit_roundoff(const cic_xform_spec *x, mpfr_prec_t engine_prec);

/* The ce_residual thresholds of the verdict for this transform precision:
 * at or below *eq the transform is an invariance, at or above *br it is
 * broken, in between inconclusive (see xform.c for why these values). */
void cic_xform_thresholds(double *eq, double *br, const cic_xform_spec *x,
                          mpfr_prec_t engine_prec);
enum cic_verdict cic_xform_verdict(double ce, double eq, double br);

/* Checks that need the transform module (Hadamard orders, transform kinds
 * against the block) of every transform of ch. CIC_OK or CIC_EINPUT with d
 * at the transform's line. */
int cic_xform_check(const cic_xform_chain *ch, cic_diag *d);

/* The order of x's Q from a file (q = "file:PATH"): d_model for a kind
 * that rotates the residual stream, else the head width. */
int cic_xform_file_q_order(const cic_model_cfg *m, const cic_xform_spec *x);
/* That order's name for messages: "d_model" or "head_dim". */
const char *cic_xform_file_q_order_name(const cic_xform_spec *x);

/* Apply x to src; a new model, or NULL with d set (allocation failure). */
cic_model *cic_xform_apply(const cic_model *src, const cic_xform_spec *x,
                           mpfr_prec_t engine_prec, cic_diag *d);
/* The same, src taken: its weights become the new model's (src transformed
 * in place and returned, or its values moved into the new graph of a kind
 * that builds one and src destroyed), with no copy. For a model nothing
 * needs after. */
cic_model *cic_xform_apply_take(cic_model *src, const cic_xform_spec *x,
                                mpfr_prec_t engine_prec, cic_diag *d);

/* The online ops a rewritten checkpoint needs at run time (cicheck
 * verify: --online down_proj:hadamard, --online qk:hadamard), inserted into
 * m without fusing anything: the plain Hadamard H / sqrt(w) (signs +1, the
 * automatic base) on the input of every MLP writer (R4) and on q and k per
 * head after RoPE, right before attention (R3). 0, or -1 (no Hadamard of
 * that width, out of memory). */
int cic_xform_add_online(cic_model *m, bool down, bool qk);

#endif
