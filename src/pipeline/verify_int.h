/* SPDX-License-Identifier: MIT */
/* verify_int.h: what verify.c, verify_f64.c and verify_stream.c share
 * (not part of the pipeline's interface).
 *
 * verify_f64.c runs a graph of one layer (and the head) in double with a
 * proven radius beside every value: each activation is a ball (mid, rad),
 * the exact result of the graph's formulas on the given input lies within
 * rad of mid, elementwise (docs/design.md, "cicheck verify", the f64
 * bound). The balls are per value, so the work is the f64 run's plus one
 * dgemm of |W| per linear. */
#ifndef CIC_VERIFY_INT_H
#define CIC_VERIFY_INT_H

#include "verify.h"

/* The balls of every activation of one run (tensor id -> rows x cols
 * doubles; NULL for weights). */
typedef struct {
    const cic_model *m;
    double **mid, **rad;
    char why[200]; /* when an op is not bounded here: which and why */
} cic_vf64;

/* Run m on the block input x (m->rows x d_model doubles, exact: radius 0).
 * 0; 1 with v->why set when an op of m has no f64 bound here (then the
 * MPFR engine decides); -1 when memory runs out. Free with cic_vf64_free
 * (also after a failure). */
int cic_vf64_run(cic_vf64 *v, const cic_model *m, const double *x);
void cic_vf64_free(cic_vf64 *v);

/* The proven enclosure [*lo, *hi] of ce = ||yb Q^T - ya||_2 / ||ya||_2
 * (ya's rows without their mean when center; q NULL: Q = I) for the
 * balls (am, ar) and (bm, br) of rows x d values, and *mid the ce of the
 * midpoints. qabs: |Q| (d x d), or NULL. 0; 1 when the balls do not
 * bound it (a value not finite, ||ya|| not bounded away from 0); -1 when
 * memory runs out. */
int cic_vf64_ce(double *mid, double *lo, double *hi, const double *am, const double *ar,
                const double *bm, const double *br, const double *q, const double *qabs,
                int rows, int d, bool center);

/* What the stream needs from the setup (verify.c). */
typedef struct {
    const cic_verify_opts *o;
    cic_model_cfg ca, cb; /* the original's and the rewrite's, every layer */
    const cic_case *ec;   /* --case's engines, or NULL */
    const mpfr_t *q;      /* Q (d x d at 53 bits), NULL: none */
    bool hidden;          /* the block input is hidden states (B's is X Q) */
    cic_rt *rt;
} cic_vrun;

/* Both checkpoints layer by layer (verify_stream.c): per layer, that
 * layer's weights of each are read, the layer runs on both streams in f64
 * with its proven bound, the residual measure is judged from the f64
 * enclosure when it decides the verdict, else from MPFR at o->prec on the
 * same streams; the streams go on as the f64 midpoints. r's thresholds
 * are set. 0, or -1 (out of memory; d set when bad input). */
int cic_verify_stream(const cic_vrun *w, cic_verify_result *r, cic_diag *d);

/* The diagnosis of layer r->first_bad into r->diag (verify_diag.c): each
 * tensor of the rewrite against the rule, from ka's and kb's weights of
 * that layer and w->q. 0, or -1 (out of memory, d set). */
int cic_verify_diagnose(const cic_vrun *w, const cic_ckpt *ka, const cic_ckpt *kb,
                        cic_verify_result *r, cic_diag *d);

#endif
