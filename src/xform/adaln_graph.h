/* SPDX-License-Identifier: MIT */
/* adaln_graph.h: the graph of an adaLN strategy, rewritten from the
 * original dit graph (adaln_graph.c). Internal to src/xform. */
#ifndef CIC_ADALN_GRAPH_H
#define CIC_ADALN_GRAPH_H

#include "../model/model.h"

/* The tensors the strategy's graph adds, -1 where it has none: the stream's
 * rotation (rot.q: Q, read as x Q^T; rot.qT: Q^T; rot.signs: the +-1 signs
 * of a fast Hadamard Q) and branch-rotate's input rotations of width d and
 * d_mlp (branch.qT.*, branch.signs.*). All made zeroed. */
typedef struct {
    int q, qt, signs;
    int bq_d, bq_m, bs_d, bs_m;
    const cic_adaln_strategy *s; /* the strategy it is the graph of */
} cic_adaln_graph;

/* A copy of orig (a dit model built by its block builder: weights, inputs,
 * graph) with the graph of strategy s (its descriptor's) for transform x
 * (its stream, fast, q and group), and the ids of the added tensors and s
 * in *g; own: orig itself when its values are moved into the copy
 * (cic_model_clone_take; only orig's graph is read after), else NULL.
 * NULL when memory runs out. */
cic_model *cic_adaln_graph_create(const cic_model *orig, cic_model *own,
                                  const cic_xform_spec *x, const cic_adaln_strategy *s,
                                  cic_adaln_graph *g);

#endif
