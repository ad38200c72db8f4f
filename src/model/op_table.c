/* SPDX-License-Identifier: MIT */
/* op_table.c: the op table CIC_OP_DESC, built from CIC_OPS (op.h) and the
 * shape checks and costs of op_rules.h, and the check of a graph at the
 * model boundary: cic_model_check runs once before an engine walks a graph
 * (the engines call it on entry), so that a kernel never meets a tensor of
 * the wrong shape, a missing tensor or an activation read before it is
 * written. A refused graph is a bug in a builder or a transform; the
 * message names the op and the tensor. The names and the checks' helpers
 * are op.c's. */
#include "op_rules.h"

#include <assert.h>
#include <stdarg.h>
#include <string.h>

const cic_op_desc CIC_OP_DESC[] = {
#define CIC_OP_DESC_(E, fn, name, alias) \
    [CIC_OP_##E] = {name, alias, cic_op_check_##fn, cic_op_cost_##fn},
    CIC_OPS(CIC_OP_DESC_)
#undef CIC_OP_DESC_
};
static_assert(sizeof CIC_OP_DESC / sizeof CIC_OP_DESC[0] == CIC_OP_COUNT, "op table");

/* ---- the graph ---- */

static int graph_refuse(char *msg, size_t cap, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int graph_refuse(char *msg, size_t cap, const char *fmt, ...)
{
    va_list ap;
    if (msg && cap) {
        va_start(ap, fmt);
        vsnprintf(msg, cap, fmt, ap);
        va_end(ap);
    }
    return CIC_GRAPH_REFUSED;
}

/* Tensors: positive shapes, values for weights and inputs, block inputs
 * with the rows of every sample. */
static int check_tensors(const cic_model *m, char *msg, size_t cap)
{
    int i;
    if (m->cfg.tokens < 1 || m->cfg.samples < 1)
        return graph_refuse(msg, cap, "model of %d tokens x %d samples", m->cfg.tokens,
                            m->cfg.samples);
    for (i = 0; i < m->n_t; i++) {
        const cic_tensor *t = &m->t[i];
        if (t->rows < 1 || t->cols < 1)
            return graph_refuse(msg, cap, "tensor %d '%s' is %d x %d", i, t->name, t->rows,
                                t->cols);
        if ((unsigned)t->role > CIC_T_ACT || (unsigned)t->rows_kind > CIC_ROWS_SAMPLE_MATRIX)
            return graph_refuse(msg, cap, "tensor %d '%s': unknown role or rows", i, t->name);
        if (t->role != CIC_T_ACT && !t->f32)
            return graph_refuse(msg, cap, "tensor %d '%s' has no values", i, t->name);
        if (t->rows_kind == CIC_ROWS_SAMPLE_MATRIX && (t->role != CIC_T_ACT || t->block_rows < 1))
            return graph_refuse(msg, cap, "tensor %d '%s': a matrix per sample of %d rows", i,
                                t->name, t->block_rows);
        if (t->role == CIC_T_INPUT && t->rows != cic_model_run_rows(m, i, m->cfg.samples))
            return graph_refuse(msg, cap, "block input %d '%s' has %d rows, expected %d", i,
                                t->name, t->rows, cic_model_run_rows(m, i, m->cfg.samples));
    }
    return 0;
}

/* The ids of op i: in range; the output a fresh activation; every
 * activation read written by an earlier op (written[] so far). */
static int check_ids(const cic_op_check *c, const unsigned char *written)
{
    static const char *const name[7] = {"in[0]", "in[1]", "in[2]", "w", "b", "g", "out"};
    const cic_model *m = c->m;
    const cic_op *o = c->o;
    int ids[7] = {o->in[0], o->in[1], o->in[2], o->w, o->b, o->g, o->out}, k;
    for (k = 0; k < 7; k++)
        if (ids[k] < -1 || ids[k] >= m->n_t)
            return cic_op_refuse(c, "%s = %d: no such tensor (the model has %d)", name[k],
                                 ids[k], m->n_t);
    if (o->out < 0)
        return cic_op_refuse(c, "output missing");
    if (m->t[o->out].role != CIC_T_ACT)
        return cic_op_refuse(c, "writes '%s', which is not an activation",
                             m->t[o->out].name);
    if (written[o->out])
        return cic_op_refuse(c, "'%s' was written by an earlier op (a graph writes each "
                             "activation once)", m->t[o->out].name);
    for (k = 0; k < 6; k++)
        if (ids[k] >= 0 && m->t[ids[k]].role == CIC_T_ACT && !written[ids[k]])
            return cic_op_refuse(c, "reads '%s' (%s) before any op writes it",
                                 m->t[ids[k]].name, name[k]);
    return 0;
}

int cic_model_check(const cic_model *m, char *msg, size_t cap)
{
    unsigned char *written;
    int i, rc;
    if (msg && cap)
        msg[0] = '\0';
    rc = check_tensors(m, msg, cap);
    if (rc)
        return rc;
    written = cic_calloc((size_t)m->n_t + 1, 1);
    if (!written) {
        graph_refuse(msg, cap, "out of memory checking the graph");
        return CIC_GRAPH_NOMEM;
    }
    for (i = 0; i < m->n_ops && rc == 0; i++) {
        cic_op_check c;
        const cic_op *o = &m->ops[i];
        c.m = m;
        c.o = o;
        c.index = i;
        c.msg = msg;
        c.cap = cap;
        if ((unsigned)o->kind >= CIC_OP_COUNT)
            rc = graph_refuse(msg, cap, "op %d: unknown op kind %d", i, (int)o->kind);
        else if ((unsigned)o->site >= CIC_SITE_COUNT)
            rc = graph_refuse(msg, cap, "op %d (%s): unknown site %d", i, CIC_OP_NAME[o->kind],
                              (int)o->site);
        else if (check_ids(&c, written) || CIC_OP_DESC[o->kind].check(&c))
            rc = CIC_GRAPH_REFUSED;
        else
            written[o->out] = 1;
    }
    if (rc == 0 && (m->output < 0 || m->output >= m->n_t))
        rc = graph_refuse(msg, cap, "no readout tensor (output = %d)", m->output);
    else if (rc == 0 && m->t[m->output].role == CIC_T_ACT && !written[m->output])
        rc = graph_refuse(msg, cap, "the readout '%s' is never written",
                          m->t[m->output].name);
    free(written);
    return rc;
}
