/* SPDX-License-Identifier: MIT */
/* op_rules.h: per op kind of CIC_OPS (op.h), the shape check
 * cic_op_check_<op> and the cost cic_op_cost_<op> on the op's tensors:
 * what the op table (op.c) is built from. Inline: they read the graph
 * (model.h), which op.h itself does not need. */
#ifndef CIC_OP_RULES_H
#define CIC_OP_RULES_H

#include "model.h"

#include <math.h>

/* ---- per op: shape check and cost on the graph ----
 * cost_<op>(m, o, ns): the FLOPs of o in a run over ns samples. */

static inline int _cic_op_rows(const cic_model *m, int id, int ns)
{
    return cic_model_run_rows(m, id, ns);
}

/* LINEAR: in[0] [R, k] -> out [R, n]. W is a weight [n, k], or folded per
 * sample (an activation of n rows per sample); the bias, optional, [1, n]
 * or one row per sample. */
/* LINEAR with group G: a weight [G, G] on every block of G of the input's
 * rows (a block-diagonal matrix), no bias, the output like the input. */
static inline int _cic_op_check_linear_group(const cic_op_check *c, const cic_tensor *w)
{
    const cic_op *o = c->o;
    int cols = c->m->t[o->in[0]].cols, G = o->group;
    if (G < 0 || cols % G != 0 || o->b >= 0 || w->role == CIC_T_ACT)
        return cic_op_refuse(c, "blocks of %d values do not divide the width %d, or the "
                                "block-diagonal weight '%s' has a bias or is per sample",
                             G, cols, w->name);
    if (cic_op_need_weight(c, o->w, "weight", G, G))
        return -1;
    return cic_op_need_like(c, o->out, "output", o->in[0]);
}

static inline int cic_op_check_linear(const cic_op_check *c)
{
    const cic_model *m = c->m;
    const cic_op *o = c->o;
    const cic_tensor *w;
    int n;
    if (cic_op_slots(c, CIC_SLOT_IN0 | CIC_SLOT_W | CIC_SLOT_B) ||
        cic_op_need_act(c, o->in[0], "input", -1, -1) ||
        cic_op_need_rows(c, o->out, "output", o->in[0]))
        return -1;
    if (o->w < 0)
        return cic_op_refuse(c, "weight missing");
    w = &m->t[o->w];
    if (w->role == CIC_T_ACT && w->rows_kind != CIC_ROWS_SAMPLE_MATRIX)
        return cic_op_refuse(c, "weight '%s' is an activation but not one matrix per sample",
                             w->name);
    if (w->role != CIC_T_ACT && cic_op_need_weight(c, o->w, "weight", -1, -1))
        return -1;
    n = w->role == CIC_T_ACT ? w->block_rows : w->rows;
    if (o->group != 0)
        return _cic_op_check_linear_group(c, w);
    if (w->cols != m->t[o->in[0]].cols)
        return cic_op_refuse(c, "weight '%s' has %d columns, the input '%s' %d", w->name,
                             w->cols, m->t[o->in[0]].name, m->t[o->in[0]].cols);
    if (m->t[o->out].cols != n)
        return cic_op_refuse(c, "the output has %d columns, the weight '%s' %d rows",
                             m->t[o->out].cols, w->name, n);
    if (o->b < 0)
        return 0;
    if (m->t[o->b].role == CIC_T_ACT)
        return cic_op_need_act(c, o->b, "bias", CIC_ROWS_SAMPLES, n);
    return cic_op_need_weight(c, o->b, "bias", 1, n);
}

static inline double cic_op_cost_linear(const cic_model *m, const cic_op *o, int ns)
{
    const cic_tensor *w = &m->t[o->w];
    int n = w->role == CIC_T_ACT ? w->block_rows : w->rows;
    double R = _cic_op_rows(m, o->in[0], ns);
    if (o->group > 0) /* the [G, G] block on each block of a row */
        R *= m->t[o->in[0]].cols / o->group;
    return cic_op_flops_linear(R, w->cols, n, o->b >= 0);
}

/* NORM: in[0] [R, d] -> out like it; gain and bias optional weights [1, d]. */
static inline int cic_op_check_norm(const cic_op_check *c)
{
    const cic_op *o = c->o;
    int d;
    if (cic_op_slots(c, CIC_SLOT_IN0 | CIC_SLOT_G | CIC_SLOT_B) ||
        cic_op_need_act(c, o->in[0], "input", -1, -1) ||
        cic_op_need_like(c, o->out, "output", o->in[0]))
        return -1;
    d = c->m->t[o->in[0]].cols;
    return (o->g >= 0 && cic_op_need_weight(c, o->g, "gain", 1, d)) ||
           (o->b >= 0 && cic_op_need_weight(c, o->b, "bias", 1, d)) ? -1 : 0;
}

static inline double cic_op_cost_norm(const cic_model *m, const cic_op *o, int ns)
{
    return cic_op_flops_norm(_cic_op_rows(m, o->in[0], ns), m->t[o->in[0]].cols, o->center,
                             o->g >= 0, o->b >= 0);
}

/* ATTN: q a column view of width d (from in_col[0]), k and v of width
 * kv_heads d / heads (grouped-query attention; d when kv_heads = heads), of
 * token-row tensors; out [R, d], heads dividing d, kv_heads dividing
 * heads. */
static inline int cic_op_check_attn(const cic_op_check *c)
{
    const cic_op *o = c->o;
    static const char *const qkv[3] = {"q input", "k input", "v input"};
    int k, d, w;
    if (cic_op_slots(c, CIC_SLOT_IN0 | CIC_SLOT_IN1 | CIC_SLOT_IN2) ||
        cic_op_need_act(c, o->out, "output", CIC_ROWS_TOKENS, -1))
        return -1;
    d = c->m->t[o->out].cols;
    if (o->heads < 1 || d % o->heads != 0)
        return cic_op_refuse(c, "%d heads do not divide the width %d", o->heads, d);
    if (o->kv_heads < 1 || o->heads % o->kv_heads != 0)
        return cic_op_refuse(c, "%d key/value heads do not divide the %d heads", o->kv_heads,
                             o->heads);
    for (k = 0; k < 3; k++) {
        w = k == 0 ? d : d / o->heads * o->kv_heads;
        if (cic_op_need_act(c, o->in[k], qkv[k], CIC_ROWS_TOKENS, -1) ||
            cic_op_need_view(c, o->in[k], qkv[k], o->in_col[k], w))
            return -1;
    }
    return 0;
}

static inline double cic_op_cost_attn(const cic_model *m, const cic_op *o, int ns)
{
    int d = m->t[o->out].cols;
    return cic_op_flops_attn(ns, o->heads, m->cfg.tokens, d / o->heads, o->causal);
}

/* ACT, GLU, ADD: elementwise over inputs shaped like the output. */
static inline int _cic_op_check_act_kind(const cic_op_check *c)
{
    if ((unsigned)c->o->act >= CIC_ACT_COUNT)
        return cic_op_refuse(c, "activation kind %d unknown", (int)c->o->act);
    return 0;
}

static inline int cic_op_check_act(const cic_op_check *c)
{
    const cic_op *o = c->o;
    return cic_op_slots(c, CIC_SLOT_IN0) || cic_op_need_act(c, o->in[0], "input", -1, -1) ||
           cic_op_need_like(c, o->out, "output", o->in[0]) || _cic_op_check_act_kind(c) ? -1 : 0;
}

static inline double _cic_op_count_out(const cic_model *m, const cic_op *o, int ns)
{
    return (double)_cic_op_rows(m, o->out, ns) * m->t[o->out].cols;
}

static inline double cic_op_cost_act(const cic_model *m, const cic_op *o, int ns)
{
    return cic_op_flops_elementwise_act(o->act, _cic_op_count_out(m, o, ns));
}

static inline int _cic_op_check_binary(const cic_op_check *c)
{
    const cic_op *o = c->o;
    return cic_op_slots(c, CIC_SLOT_IN0 | CIC_SLOT_IN1) ||
           cic_op_need_act(c, o->in[0], "first input", -1, -1) ||
           cic_op_need_act(c, o->in[1], "second input", -1, -1) ||
           cic_op_need_like(c, o->out, "output", o->in[0]) ||
           cic_op_need_like(c, o->in[1], "second input", o->in[0]) ? -1 : 0;
}

static inline int cic_op_check_glu(const cic_op_check *c)
{
    return _cic_op_check_binary(c) || _cic_op_check_act_kind(c) ? -1 : 0;
}

static inline double cic_op_cost_glu(const cic_model *m, const cic_op *o, int ns)
{
    return cic_op_flops_glu(o->act, _cic_op_count_out(m, o, ns));
}

static inline int cic_op_check_add(const cic_op_check *c)
{
    return _cic_op_check_binary(c);
}

static inline double cic_op_cost_add(const cic_model *m, const cic_op *o, int ns)
{
    return cic_op_flops_add(_cic_op_count_out(m, o, ns));
}

/* MODULATE, GATE: x [R, d] with token rows, in[1] the per-sample mod
 * tensor; out like x. */
static inline int _cic_op_check_mod(const cic_op_check *c, int n_chunks)
{
    const cic_op *o = c->o;
    static const char *const chunk[2] = {"mod input (in_col[0])", "mod input (in_col[1])"};
    int k, d;
    if (cic_op_slots(c, CIC_SLOT_IN0 | CIC_SLOT_IN1) ||
        cic_op_need_act(c, o->in[0], "input", CIC_ROWS_TOKENS, -1) ||
        cic_op_need_like(c, o->out, "output", o->in[0]) ||
        cic_op_need_act(c, o->in[1], "mod input", CIC_ROWS_SAMPLES, -1))
        return -1;
    d = c->m->t[o->in[0]].cols;
    for (k = 0; k < n_chunks; k++)
        if (cic_op_need_view(c, o->in[1], chunk[k], o->in_col[k], d))
            return -1;
    return 0;
}

static inline int cic_op_check_modulate(const cic_op_check *c)
{
    return _cic_op_check_mod(c, 2);
}

static inline double cic_op_cost_modulate(const cic_model *m, const cic_op *o, int ns)
{
    return cic_op_flops_modulate(ns, _cic_op_rows(m, o->in[0], ns), m->t[o->in[0]].cols);
}

static inline int cic_op_check_gate(const cic_op_check *c)
{
    return _cic_op_check_mod(c, 1);
}

static inline double cic_op_cost_gate(const cic_model *m, const cic_op *o, int ns)
{
    return cic_op_flops_gate(_cic_op_rows(m, o->in[0], ns), m->t[o->in[0]].cols);
}

static inline int cic_op_check_center(const cic_op_check *c)
{
    const cic_op *o = c->o;
    return cic_op_slots(c, CIC_SLOT_IN0) || cic_op_need_act(c, o->in[0], "input", -1, -1) ||
           cic_op_need_like(c, o->out, "output", o->in[0]) ? -1 : 0;
}

static inline double cic_op_cost_center(const cic_model *m, const cic_op *o, int ns)
{
    return cic_op_flops_center(_cic_op_rows(m, o->in[0], ns), m->t[o->in[0]].cols);
}

/* FWHT: in[0] [R, w] with a Hadamard construction for w, signs g [1, w]. */
static inline int cic_op_check_fwht(const cic_op_check *c)
{
    const cic_op *o = c->o;
    int w;
    if (cic_op_slots(c, CIC_SLOT_IN0 | CIC_SLOT_G) ||
        cic_op_need_act(c, o->in[0], "input", -1, -1) ||
        cic_op_need_like(c, o->out, "output", o->in[0]))
        return -1;
    w = c->m->t[o->in[0]].cols;
    if (o->group < 0 || (o->group > 0 && w % o->group != 0))
        return cic_op_refuse(c, "blocks of %d values do not divide the width %d", o->group, w);
    if (o->group > 0)
        w = o->group;
    if (o->regular) {
        if (!cic_op_pow4(w))
            return cic_op_refuse(c, "no regular Hadamard matrix of order %d here (4^k only)", w);
        return cic_op_need_weight(c, o->g, "signs", 1, w);
    }
    if (o->hbase <= 0)
        return cic_op_refuse(c, "no Hadamard matrix of order %d (no base order)", w);
    if (w % o->hbase != 0 || ((w / o->hbase) & (w / o->hbase - 1)) != 0)
        return cic_op_refuse(c, "width %d is not K 2^k for the Hadamard base order K = %d", w,
                             o->hbase);
    return cic_op_need_weight(c, o->g, "signs", 1, w);
}

static inline double cic_op_cost_fwht(const cic_model *m, const cic_op *o, int ns)
{
    int w = m->t[o->in[0]].cols, g = o->group > 0 ? o->group : w;
    if (o->regular)
        return cic_op_flops_fwht_regular(_cic_op_rows(m, o->in[0], ns) * (double)(w / g), g);
    return cic_op_flops_fwht(_cic_op_rows(m, o->in[0], ns) * (double)(w / g), g, o->hbase);
}

/* FOLD_*: in[0] the per-sample mod tensor, its chunk in_col[0] of d =
 * d_model columns; Q = g [d, d]. */
static inline int _cic_op_check_fold(const cic_op_check *c, unsigned slots)
{
    const cic_op *o = c->o;
    int d = c->m->cfg.d_model;
    if (cic_op_slots(c, slots) ||
        cic_op_need_act(c, o->in[0], "mod input", CIC_ROWS_SAMPLES, -1) ||
        cic_op_need_view(c, o->in[0], "mod input", o->in_col[0], d))
        return -1;
    return (slots & CIC_SLOT_G) && cic_op_need_weight(c, o->g, "rotation", d, d) ? -1 : 0;
}

/* The output: one matrix of rows x cols per sample, or one row per sample
 * (rows 0). */
static inline int _cic_op_check_fold_out(const cic_op_check *c, int rows, int cols)
{
    const cic_tensor *t;
    if (cic_op_need_act(c, c->o->out, "output",
                        rows ? CIC_ROWS_SAMPLE_MATRIX : CIC_ROWS_SAMPLES, cols))
        return -1;
    t = &c->m->t[c->o->out];
    if (rows && t->block_rows != rows)
        return cic_op_refuse(c, "the output has %d rows per sample, expected %d",
                             t->block_rows, rows);
    return 0;
}

/* FOLD_IN_W: W [n, d] -> [n, d] per sample. */
static inline int cic_op_check_fold_in_w(const cic_op_check *c)
{
    int d = c->m->cfg.d_model;
    if (_cic_op_check_fold(c, CIC_SLOT_IN0 | CIC_SLOT_W | CIC_SLOT_G) ||
        cic_op_need_weight(c, c->o->w, "weight", -1, d))
        return -1;
    return _cic_op_check_fold_out(c, c->m->t[c->o->w].rows, d);
}

static inline double cic_op_cost_fold_in_w(const cic_model *m, const cic_op *o, int ns)
{
    return cic_op_flops_fold_in_w(ns, m->t[o->w].rows, m->cfg.d_model);
}

/* FOLD_IN_B: W [n, d], bias optional [1, n] -> [n] per sample. */
static inline int cic_op_check_fold_in_b(const cic_op_check *c)
{
    int d = c->m->cfg.d_model, n;
    if (_cic_op_check_fold(c, CIC_SLOT_IN0 | CIC_SLOT_W | CIC_SLOT_B) ||
        cic_op_need_weight(c, c->o->w, "weight", -1, d))
        return -1;
    n = c->m->t[c->o->w].rows;
    if (c->o->b >= 0 && cic_op_need_weight(c, c->o->b, "bias", 1, n))
        return -1;
    return _cic_op_check_fold_out(c, 0, n);
}

static inline double cic_op_cost_fold_in_b(const cic_model *m, const cic_op *o, int ns)
{
    return cic_op_flops_fold_in_b(ns, m->t[o->w].rows, m->cfg.d_model);
}

/* FOLD_OUT_W: W [d, k] -> [d, k] per sample. */
static inline int cic_op_check_fold_out_w(const cic_op_check *c)
{
    int d = c->m->cfg.d_model;
    if (_cic_op_check_fold(c, CIC_SLOT_IN0 | CIC_SLOT_W | CIC_SLOT_G) ||
        cic_op_need_weight(c, c->o->w, "weight", d, -1))
        return -1;
    return _cic_op_check_fold_out(c, d, c->m->t[c->o->w].cols);
}

static inline double cic_op_cost_fold_out_w(const cic_model *m, const cic_op *o, int ns)
{
    return cic_op_flops_fold_out_w(ns, m->cfg.d_model, m->t[o->w].cols, o->center);
}

/* FOLD_OUT_B: bias [1, d] -> [d] per sample. */
static inline int cic_op_check_fold_out_b(const cic_op_check *c)
{
    int d = c->m->cfg.d_model;
    if (_cic_op_check_fold(c, CIC_SLOT_IN0 | CIC_SLOT_B | CIC_SLOT_G) ||
        cic_op_need_weight(c, c->o->b, "bias", 1, d))
        return -1;
    return _cic_op_check_fold_out(c, 0, d);
}

static inline double cic_op_cost_fold_out_b(const cic_model *m, const cic_op *o, int ns)
{
    return cic_op_flops_fold_out_b(ns, m->cfg.d_model, o->center);
}

/* ROPE: in[0] [R, w] with token rows, heads dividing w into heads of an
 * even head_dim; out like in[0]. */
static inline int cic_op_check_rope(const cic_op_check *c)
{
    const cic_op *o = c->o;
    int w;
    if (cic_op_slots(c, CIC_SLOT_IN0) ||
        cic_op_need_act(c, o->in[0], "input", CIC_ROWS_TOKENS, -1) ||
        cic_op_need_like(c, o->out, "output", o->in[0]))
        return -1;
    w = c->m->t[o->in[0]].cols;
    if (o->heads < 1 || w % o->heads != 0 || (w / o->heads) % 2 != 0)
        return cic_op_refuse(c, "%d heads do not split the width %d into heads of an even size",
                             o->heads, w);
    if (o->rope != CIC_ROPE_HALF && o->rope != CIC_ROPE_INTERLEAVED)
        return cic_op_refuse(c, "rope layout %d is neither half nor interleaved", (int)o->rope);
    if (!(o->theta > 0) || !isfinite(o->theta) || !((float)o->theta > 0))
        return cic_op_refuse(c, "rope base %g is not a positive binary32 value", o->theta);
    if (o->rot < 0 || o->rot % 2 != 0 || o->rot > w / o->heads)
        return cic_op_refuse(c, "rope on %d dims of each head of %d: an even number up to it "
                             "(0: all)", o->rot, w / o->heads);
    return 0;
}

/* Partial rope (rot) costs the rotated dims only: heads rot of the width. */
static inline double cic_op_cost_rope(const cic_model *m, const cic_op *o, int ns)
{
    int w = m->t[o->in[0]].cols;
    return cic_op_flops_rope(_cic_op_rows(m, o->in[0], ns), o->rot ? o->heads * o->rot : w);
}


#endif
