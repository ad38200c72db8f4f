/* SPDX-License-Identifier: MIT */
/* verify_diag_int.h: what the files of verify's diagnosis share (not part of
 * the pipeline's interface): dense double matrices and the products the
 * rewrite rules are made of (verify_diag_mat.c). */
#ifndef CIC_VERIFY_DIAG_INT_H
#define CIC_VERIFY_DIAG_INT_H

#include "verify_int.h"

/* A dense row-major matrix of doubles (v NULL: none). Rows of a linear's
 * weight are its outputs, as the checkpoint stores it (HF: y = x W^T). */
typedef struct {
    int r, c;
    double *v;
} cic_vmat;

void cic_vmat_free(cic_vmat *m);
/* A zeroed r x c matrix; -1 when memory runs out. */
int cic_vmat_init(cic_vmat *m, int r, int c);
int cic_vmat_copy(cic_vmat *m, const cic_vmat *a);
/* rows [r0, r0 + n) of model tensor id (its float32 values, exact) */
int cic_vmat_tensor(cic_vmat *m, const cic_model *mod, int id, int r0, int n);
/* y := a b (at: a^T; bt: b^T). -1 when memory runs out. */
int cic_vmat_mul(cic_vmat *y, const cic_vmat *a, bool at, const cic_vmat *b, bool bt);
/* a's columns times g (inv: divided by g) in place. */
void cic_vmat_scale_cols(cic_vmat *a, const double *g, bool inv);
/* a := C a, C = I - 1 1^T / r: every column without its mean. */
void cic_vmat_center_cols(cic_vmat *a);
/* a := a C: every row without its mean. */
void cic_vmat_center_rows(cic_vmat *a);
/* a := a H (rows, per block of w columns; cols false) or H^T a (per block
 * of w rows; cols true), H = H_w / sqrt(w) the plain Hadamard matrix of
 * cicheck's online ops (qmat.h: the automatic base, signs +1). -1 when w
 * has no Hadamard matrix here or memory runs out. */
int cic_vmat_hadamard(cic_vmat *a, int w, bool cols);
/* ||a - b||_F / ||b||_F (+Inf when b is 0 and a is not; shapes must agree) */
double cic_vmat_dist(const cic_vmat *a, const cic_vmat *b);
double cic_vmat_norm(const cic_vmat *a);
/* Seeded probe values in [-1, 1) into z (the same every run). */
void cic_vmat_probes(cic_vmat *z);
/* What a rotation leaves alone, compared: the Gram matrices of a and b on
 * 16 seeded probes, ||G(a) - G(b)||_F / ||G(b)||_F, with G(m) = (m Z)^T m Z
 * when left (m rotated on the left, R m: a writer) or (m^T Z)^T m^T Z (m R:
 * a reader). NaN when memory runs out. */
double cic_vmat_gram_dist(const cic_vmat *a, const cic_vmat *b, bool left);

/* What a family's diagnosis reads: layer `layer` of both checkpoints as
 * one-layer models with their weights (a the original, b the rewrite, its
 * absent norm tensors read as 1 and 0), Q as doubles (NULL: none), and the
 * tolerance g->tol. */
typedef struct {
    const cic_vrun *w;
    const cic_model *a, *b;
    const cic_ckpt *ka, *kb;
    const double *q;  /* NULL: no Q, only what Q leaves alone is compared */
    int layer;
} cic_vdiag_in;

/* A family's diagnosis of one layer into g (the plug point, verify_diag.c's
 * table): 1 when a tensor differs, 0 when none does, -1 when memory runs
 * out. */
typedef int (*cic_vdiag_fn)(cic_vdiag *g, const cic_vdiag_in *in);

/* The llama family and OPT with fused LayerNorm (verify_diag_rules.c). */
int cic_vdiag_rmsnorm(cic_vdiag *g, const cic_vdiag_in *in);
int cic_vdiag_opt(cic_vdiag *g, const cic_vdiag_in *in);
int cic_vdiag_vit(cic_vdiag *g, const cic_vdiag_in *in);
int cic_vdiag_gptj(cic_vdiag *g, const cic_vdiag_in *in);

#endif
