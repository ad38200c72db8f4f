/* SPDX-License-Identifier: MIT */
/* flops.h: closed-form FLOP counts of a block, per site, derived from the
 * case alone (DESIGN.md section 3): the block equations written as the ops
 * they take (which ops, how many, of which sizes), each op costed by the op
 * table's formula (model/op.h: cic_op_flops_*). The engines book the same
 * formulas for the ops of the graph they run, so the report's agreement of
 * the two checks the graph's structure against the block equations. Every
 * block kind has its own closed form, in its descriptor (kind/block.h) or,
 * for the adaLN blocks, here (a kind without one asserts). */
#ifndef CIC_FLOPS_H
#define CIC_FLOPS_H

#include "../engine/engine.h"

/* The norms of the original block of cfg. */
cic_norm_state cic_flops_norm_original(const cic_model_cfg *cfg);

/* The norms after transform i of the chain and the transforms it builds on
 * (i = -1: the original), as their descriptors leave them. */
cic_norm_state cic_flops_norm_after(const cic_xform_chain *ch, int i);

/* Analytical FLOPs of the whole case (all samples), per site, of a preln
 * or rmsnorm block whose norms do ns (a dit block: cic_flops_dit). */
void cic_flops_analytical(cic_flop_count *fc, const cic_model_cfg *cfg,
                          enum cic_readout readout, cic_norm_state ns);

/* The closed form of the chain's original model (i = -1) or of its
 * transform i, for every block kind: cic_flops_analytical with the norms
 * after the transform chain and the online ops of its kinds (their
 * descriptors' flops), or cic_flops_dit. */
void cic_flops_case(cic_flop_count *fc, const cic_xform_chain *ch, int i);

/* ---- dit (adaLN) block and its rotation strategies (DESIGN.md section 3,
 * op costs and sites as in the adaLN implementer spec). Written from the
 * block equations alone, independently of the graph, with the op table's
 * per-op formulas. */

/* Per-site FLOPs of the whole case (all B samples) for the original dit
 * graph (x == NULL) or the strategy x (x->kind one of the adaLN kinds, whose
 * descriptor's flops_dit rewrites the graph's costs; uses x->stream, x->fast,
 * x->group and, for q = hadamard, x->hadamard_base; the
 * choice of Q does not change the work otherwise). Final site: the final
 * layer when cfg->final_layer, else 0. A fast transform of width w = K 2^k
 * costs K 2^k k + 2^k K (K - 1) + 2w per row (K the base order: the
 * automatic one, 1 for powers of two, or hadamard_base); for a width with
 * no Hadamard construction the figure is meaningless (see
 * cic_dit_strategy_applies). */
void cic_flops_dit(cic_flop_count *fc, const cic_model_cfg *cfg,
                   const cic_xform_spec *x);

typedef struct {
    const char *label;
    enum cic_xform_kind kind;
    enum cic_stream stream;
    bool fast;
} cic_dit_strategy;

/* The strategies compared in the analytical table: online-unrotate dense and
 * fast (centered), per-sample-fold (centered), branch-rotate dense and fast,
 * static-fold (centered). */
#define CIC_DIT_STRATEGY_COUNT 6
extern const cic_dit_strategy CIC_DIT_STRATEGIES[CIC_DIT_STRATEGY_COUNT];

/* False when s is fast and a rotated width has no Hadamard construction (d; and m
 * for branch-rotate). */
bool cic_dit_strategy_applies(const cic_model_cfg *cfg, const cic_dit_strategy *s);

/* 100 * (strategy - original) / original, total FLOPs, with B = 1, N =
 * tokens and cfg's other sizes. NAN when the strategy does not apply. */
double cic_flops_dit_extra_pct(const cic_model_cfg *cfg, const cic_dit_strategy *s,
                               int tokens);

/* Crossover N* (B = 1) above which per-sample-fold (centered) costs fewer
 * FLOPs than online-unrotate dense (centered), resp. fast: N* = F / (e_o -
 * e_f), F the per-sample fold work, e the per-token extras. The first integer
 * N where folding is no more expensive is max(1, ceil(N*)). INFINITY when
 * folding never wins, NAN for fast when d has no Hadamard construction.
 * Returns 0. */
int cic_flops_dit_crossover(double *nstar_dense, double *nstar_fast,
                            const cic_model_cfg *cfg);

/* The tokens per sample N of the rows of the analytical table, ascending
 * (16, 64, ..., 65536). */
#define CIC_DIT_TABLE_N 7
extern const int CIC_DIT_TABLE_TOKENS[CIC_DIT_TABLE_N];

/* The analytical table of a dit case, computed once from the formulas above
 * and formatted by every writer (the terminal table, report.json, the
 * conclusion): the extra FLOPs of each strategy of CIC_DIT_STRATEGIES and of
 * each transform of the case at N = tokens[k] (cic_flops_dit_extra_pct: B =
 * 1, the other sizes of cfg; NAN where a strategy does not apply), and the
 * crossovers (cic_flops_dit_crossover). A value type with no pointer into
 * the case (the labels are CIC_DIT_STRATEGIES'), so a copy outlives it. */
typedef struct {
    cic_model_cfg cfg;                         /* the sizes the table is for */
    int tokens[CIC_DIT_TABLE_N];               /* N of each column: CIC_DIT_TABLE_TOKENS */
    const char *label[CIC_DIT_STRATEGY_COUNT]; /* CIC_DIT_STRATEGIES[j].label */
    double pct[CIC_DIT_STRATEGY_COUNT][CIC_DIT_TABLE_N]; /* strategy j at tokens[k], % */
    /* transform i of the case at tokens[k], % (its kind, stream, fast and
     * hadamard_base; every transform of a dit case is an adaLN strategy) */
    int n_xf;
    double xf_pct[CIC_MAX_XFORMS][CIC_DIT_TABLE_N];
    double nstar_dense, nstar_fast; /* N* of per-sample-fold vs online-unrotate dense, fast */
} cic_dit_flops_table;

/* Fill t for the chain ch (its model's sizes and its transforms). Returns
 * true; false (t zeroed) when ch's model is not a dit block. */
bool cic_dit_flops_table_fill(cic_dit_flops_table *t, const cic_xform_chain *ch);

#endif
