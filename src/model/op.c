/* SPDX-License-Identifier: MIT */
/* op.c: the op and site names built from CIC_OPS (op.h), and the helpers
 * of the shape checks (op_rules.h): what a refusal says, which slots an op
 * uses, what its tensors must be. The table and the check of a graph that
 * run the checks are op_table.c. */
#include "model.h"

#include <assert.h>
#include <stdarg.h>
#include <string.h>

const char *const CIC_OP_NAME[] = {
#define CIC_OP_NAME_(E, fn, name, alias) [CIC_OP_##E] = name,
    CIC_OPS(CIC_OP_NAME_)
#undef CIC_OP_NAME_
};
static_assert(sizeof CIC_OP_NAME / sizeof CIC_OP_NAME[0] == CIC_OP_COUNT, "op name table");

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
