/* SPDX-License-Identifier: MIT */
/* op.c: the op table built from CIC_OPS (op.h), the site names, and the
 * check of a graph at the model boundary: cic_model_check runs once before
 * an engine walks a graph (the engines call it on entry), so that a kernel
 * never meets a tensor of the wrong shape, a missing tensor or an
 * activation read before it is written. A refused graph is a bug in a
 * builder or a transform; the message names the op and the tensor. */
#include "op_rules.h"

#include <assert.h>
#include <stdarg.h>
#include <string.h>

const char *const CIC_OP_NAME[] = {
#define CIC_OP_NAME_(E, fn, name, alias) [CIC_OP_##E] = name,
    CIC_OPS(CIC_OP_NAME_)
#undef CIC_OP_NAME_
};
static_assert(sizeof CIC_OP_NAME / sizeof CIC_OP_NAME[0] == CIC_OP_COUNT, "op name table");

const cic_op_desc CIC_OP_DESC[] = {
#define CIC_OP_DESC_(E, fn, name, alias) \
    [CIC_OP_##E] = {name, alias, cic_op_check_##fn, cic_op_cost_##fn},
    CIC_OPS(CIC_OP_DESC_)
#undef CIC_OP_DESC_
};
static_assert(sizeof CIC_OP_DESC / sizeof CIC_OP_DESC[0] == CIC_OP_COUNT, "op table");

const char *const CIC_SITE_NAME[] = {
    [CIC_SITE_INPUT] = "input", [CIC_SITE_MOD] = "modulation", [CIC_SITE_NORM1] = "norm1",
    [CIC_SITE_ATTN] = "attn",   [CIC_SITE_GATE1] = "gate1",    [CIC_SITE_NORM2] = "norm2",
    [CIC_SITE_MLP] = "mlp",     [CIC_SITE_GATE2] = "gate2",    [CIC_SITE_FINAL] = "final"};
static_assert(sizeof CIC_SITE_NAME / sizeof CIC_SITE_NAME[0] == CIC_SITE_COUNT,
              "site name table");

/* ---- helpers of the shape checks ---- */

/* "op 7 (linear, layer 0, site attn, output 'act.0.qkv'): " then fmt. */
static void vrefuse(const cic_op_check *c, const char *fmt, va_list ap)
{
    const cic_model *m = c->m;
    const cic_op *o = c->o;
    bool named = o->out >= 0 && o->out < m->n_t;
    size_t n;
    if (!c->msg || c->cap == 0)
        return;
    snprintf(c->msg, c->cap, "op %d (%s, layer %d, site %s%s%s%s): ", c->index,
             CIC_OP_NAME[o->kind], o->layer, CIC_SITE_NAME[o->site],
             named ? ", output '" : "", named ? m->t[o->out].name : "", named ? "'" : "");
    n = strlen(c->msg);
    if (n + 1 < c->cap)
        vsnprintf(c->msg + n, c->cap - n, fmt, ap);
}

int cic_op_refuse(const cic_op_check *c, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vrefuse(c, fmt, ap);
    va_end(ap);
    return -1;
}

int cic_op_slots(const cic_op_check *c, unsigned used)
{
    static const char *const name[6] = {"in[0]", "in[1]", "in[2]", "w", "b", "g"};
    const cic_op *o = c->o;
    int ids[6] = {o->in[0], o->in[1], o->in[2], o->w, o->b, o->g}, k;
    for (k = 0; k < 6; k++)
        if (!(used & (1u << k)) && ids[k] != -1)
            return cic_op_refuse(c, "%s is set (tensor %d) but a %s op has no such input",
                                 name[k], ids[k], CIC_OP_NAME[o->kind]);
    return 0;
}

static const char *const ROWS_NAME[] = {[CIC_ROWS_TOKENS] = "token rows",
                                        [CIC_ROWS_SAMPLES] = "one row per sample",
                                        [CIC_ROWS_SAMPLE_MATRIX] = "a matrix per sample"};

int cic_op_need_act(const cic_op_check *c, int id, const char *what, int rows, int cols)
{
    const cic_tensor *t;
    if (id < 0)
        return cic_op_refuse(c, "%s missing", what);
    t = &c->m->t[id];
    if (t->role == CIC_T_WEIGHT)
        return cic_op_refuse(c, "%s '%s' is a weight, expected an activation", what, t->name);
    if (rows >= 0 && t->rows_kind != (enum cic_rows)rows)
        return cic_op_refuse(c, "%s '%s' has %s, expected %s", what, t->name,
                             ROWS_NAME[t->rows_kind], ROWS_NAME[rows]);
    if (cols >= 0 && t->cols != cols)
        return cic_op_refuse(c, "%s '%s' has %d columns, expected %d", what, t->name, t->cols,
                             cols);
    return 0;
}

int cic_op_need_weight(const cic_op_check *c, int id, const char *what, int rows, int cols)
{
    const cic_tensor *t;
    if (id < 0)
        return cic_op_refuse(c, "%s missing", what);
    t = &c->m->t[id];
    if (t->role != CIC_T_WEIGHT)
        return cic_op_refuse(c, "%s '%s' is not a weight", what, t->name);
    if ((rows >= 0 && t->rows != rows) || (cols >= 0 && t->cols != cols)) {
        char r[16] = "n", k[16] = "k";
        if (rows >= 0)
            snprintf(r, sizeof r, "%d", rows);
        if (cols >= 0)
            snprintf(k, sizeof k, "%d", cols);
        return cic_op_refuse(c, "%s '%s' is %d x %d, expected %s x %s", what, t->name, t->rows,
                             t->cols, r, k);
    }
    return 0;
}

int cic_op_need_rows(const cic_op_check *c, int id, const char *what, int like)
{
    const cic_tensor *t = &c->m->t[id], *l = &c->m->t[like];
    if (t->rows_kind != l->rows_kind ||
        (t->rows_kind == CIC_ROWS_SAMPLE_MATRIX && t->block_rows != l->block_rows))
        return cic_op_refuse(c, "%s '%s' has %s, '%s' %s", what, t->name,
                             ROWS_NAME[t->rows_kind], l->name, ROWS_NAME[l->rows_kind]);
    return 0;
}

int cic_op_need_like(const cic_op_check *c, int id, const char *what, int like)
{
    const cic_tensor *t = &c->m->t[id], *l = &c->m->t[like];
    if (cic_op_need_rows(c, id, what, like))
        return -1;
    if (t->cols != l->cols)
        return cic_op_refuse(c, "%s '%s' has %d columns, '%s' %d", what, t->name, t->cols,
                             l->name, l->cols);
    return 0;
}

int cic_op_need_view(const cic_op_check *c, int id, const char *what, int col, int width)
{
    const cic_tensor *t = &c->m->t[id];
    if (col < 0 || col > t->cols - width)
        return cic_op_refuse(c, "%s '%s': columns %d .. %d of %d", what, t->name, col,
                             col + width - 1, t->cols);
    return 0;
}

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
