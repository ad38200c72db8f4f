/* SPDX-License-Identifier: MIT */
/* verify_diag.h: what is wrong with the first broken layer of a rewrite
 * (cicheck verify). Each tensor of that layer in the rewritten checkpoint
 * is compared with what the rewrite rule makes of the original's tensors,
 * Q and the options (docs/design.md, "cicheck verify", the diagnosis):
 * readers W diag(g) Q (g the original norm's gain, over the rewrite's own
 * gain when it kept one), writers Q^T W (OPT fused: Q^T C W, C the
 * centring), R4's Hadamard fused into down_proj with --online
 * down_proj:hadamard, and v_proj / o_proj per key/value head through the
 * product o_h v_j that any R2 leaves as it is. A tensor that differs by
 * more than its storage's rounding is named with the nearest known
 * mistake of cases/known-breaks/ (the alternatives a block kind's rule
 * table lists), or as no known mistake; when no single tensor explains
 * the break, a finding without a tensor says so. */
#ifndef CIC_VERIFY_DIAG_H
#define CIC_VERIFY_DIAG_H

#include <jansson.h>
#include <stdbool.h>

#define CIC_VDIAG_MAX 32

/* One finding: a tensor of the rewrite ("" for a finding about the layer as
 * a whole), what is wrong with it, the catalogue entry of the mistake
 * (cases/known-breaks/NAME.toml; NULL: none fits), its relative distance
 * ||W - rule||_F / ||rule||_F from the rule, and from the mistake's form
 * (NaN when none is named or it does not apply). */
typedef struct {
    char tensor[200];
    char finding[480];
    const char *mistake;
    double distance, mistake_distance;
} cic_vdiag_item;

typedef struct {
    int layer;    /* the layer diagnosed (checkpoint numbering); -1: none */
    int n;        /* findings */
    bool with_q;  /* against the rule with Q; else the checks Q leaves
                   * invariant (Gram matrices) */
    int bits;     /* the storage's significand bits the tolerance follows */
    double tol;   /* "equals the rule": relative distance at most tol */
    char note[400]; /* what was checked, or why nothing was */
    cic_vdiag_item it[CIC_VDIAG_MAX];
} cic_vdiag;

/* A finding appended to g (dropped past CIC_VDIAG_MAX: the layer's tensors
 * are fewer). For the families' diagnoses (the plug point, verify_diag.c). */
void cic_vdiag_add(cic_vdiag *g, const char *tensor, const char *mistake, double dist,
                   double mdist, const char *fmt, ...) __attribute__((format(printf, 6, 7)));

/* The findings as report.json's "diagnosis": [{tensor (null: the layer),
 * finding, mistake (null: none), distance, mistake_distance}]
 * (verify_diag_md.c). NULL when memory runs out. */
json_t *cic_vdiag_json(const cic_vdiag *g);
/* The diagnosis into verify's report.json object v: with the per-layer
 * view (have_q), "diagnosis", "diagnosis_note" and "diagnosis_tolerance" in
 * the entry of layers (from layer0) for layer g->layer; without it, v's
 * "diagnosis_without_q": {layer, note, tolerance, diagnosis}. */
void cic_vdiag_json_set(json_t *v, json_t *layers, bool have_q, int layer0, const cic_vdiag *g);

#endif
