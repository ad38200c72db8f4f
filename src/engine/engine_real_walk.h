/* SPDX-License-Identifier: MIT */
/* engine_real_walk.h: part of the real engines' template (included at the
 * end of engine_real.h, never by anything else): the weights a run reads,
 * the plan of its activation arena, and real_run, the walker: it checks the
 * graph once (cic_model_check), then calls each op's kernel in order and
 * books the op's FLOPs at its site (cic_op_cost, the op table's formula). */

#if R_VALS_OWNED
/* The includer's (R_VALS_OWNED 1): weight or input id's values as REAL for
 * a run with the float32 values (rounded) or the unrounded ones: read in
 * place (vals_borrow; NULL when they must be made), or made into dst
 * (vals_fill, rows * cols values: 0, or -1 when memory runs out). */
static const REAL *vals_borrow(realrun *r, int id, bool rounded);
static int vals_fill(realrun *r, int id, bool rounded, REAL *dst);
#endif

/* Point val[id] at the values of every weight and input tensor an op reads
 * when they can be read in place (the f32 storage, or what vals_borrow
 * gives); the others are marked todo: they get a place in the arena for
 * the ops that read them and are made before the first (make_vals), so a
 * layer's weights made as doubles are never all held at once. */
static void point_vals(realrun *r)
{
    const cic_model *m = r->m;
    int i, k;
    for (i = 0; i < m->n_ops; i++) {
        const cic_op *op = &m->ops[i];
        int ids[6] = {op->in[0], op->in[1], op->in[2], op->w, op->b, op->g};
        for (k = 0; k < 6; k++) {
            int id = ids[k];
            if (id < 0 || m->t[id].role == CIC_T_ACT || r->val[id] || r->todo[id])
                continue;
#if R_VALS_OWNED
            r->val[id] = vals_borrow(r, id, r->rounded);
            r->todo[id] = !r->val[id];
#else
            r->val[id] = m->t[id].f32;
#endif
        }
    }
}

/* The values op reads that are still to be made, into their places. 0, or
 * -1 when memory runs out. */
static int make_vals(realrun *r, const cic_op *op)
{
    int ids[6] = {op->in[0], op->in[1], op->in[2], op->w, op->b, op->g}, k;
    for (k = 0; k < 6; k++) {
        int id = ids[k];
        if (id < 0 || !r->todo[id])
            continue;
#if R_VALS_OWNED
        if (vals_fill(r, id, r->rounded, r->buf[id]) < 0)
            return -1;
#endif
        r->todo[id] = 0;
    }
    return 0;
}

/* ---- the activation arena ---- */

/* May op o write its output over input in[k], dying there? Only an input
 * the op table lets the output overwrite (alias: the same shape, each value
 * read before the output value at its place is written), and only when the
 * tensor is read there through such inputs alone. */
static bool inplace_ok(const realrun *r, const cic_op *o, int k, const int *last, int i)
{
    const cic_model *m = r->m;
    int t = o->in[k], k2, n = CIC_OP_DESC[o->kind].alias;
    if (t < 0 || k >= n || m->t[t].role != CIC_T_ACT || last[t] != i || t == m->output ||
        t == o->w || t == o->b || t == o->g)
        return false;
    for (k2 = n; k2 < 3; k2++)
        if (o->in[k2] == t)
            return false;
    return true;
}

/* Whether tensor id lives in the run's arena: an activation, or values
 * made for the run (todo). */
static bool in_arena(const realrun *r, int id)
{
    return id >= 0 && (r->m->t[id].role == CIC_T_ACT || r->todo[id]);
}

/* Bytes of tensor id in the arena, a multiple of the cache line; 0 when
 * the size overflows. Made values hold every row (src picks an input's
 * samples), activations the run's. */
static size_t arena_need(const realrun *r, int id)
{
    const cic_tensor *t = &r->m->t[id];
    size_t rows = t->role == CIC_T_ACT ? (size_t)rows_of(r, id) : (size_t)t->rows;
    size_t need = cic_mul_size(cic_mul_size(rows, (size_t)t->cols), sizeof(REAL));
    return need > SIZE_MAX / 2 ? 0 : (need + 63) / 64 * 64;
}

/* The arena while it is planned: per tensor its last reader and its slot
 * (-1: none yet), per slot its owner (-1: free) and size in bytes. */
typedef struct {
    int *last, *slot, *owner;
    size_t *ssz;
    int ns;
} arena_plan;

/* Slot s (a dying input's), or with s < 0 the smallest free slot that
 * fits, else the largest free slot grown, else a new slot, for tensor id. */
static void slot_take(arena_plan *p, int id, size_t need, int s)
{
    int k, fit = -1, big = -1;
    for (k = 0; s < 0 && k < p->ns; k++) {
        if (p->owner[k] >= 0)
            continue;
        if (p->ssz[k] >= need && (fit < 0 || p->ssz[k] < p->ssz[fit]))
            fit = k;
        if (big < 0 || p->ssz[k] > p->ssz[big])
            big = k;
    }
    if (s < 0)
        s = fit >= 0 ? fit : big >= 0 ? big : p->ns++;
    if (p->ssz[s] < need)
        p->ssz[s] = need;
    p->owner[s] = id;
    p->slot[id] = s;
}

/* Tensor t's slot freed when op i is its last reader (the readout's
 * never). */
static void slot_free(const realrun *r, arena_plan *p, int t, int i)
{
    if (in_arena(r, t) && p->last[t] == i && t != r->m->output && p->slot[t] >= 0 &&
        p->owner[p->slot[t]] == t)
        p->owner[p->slot[t]] = -1;
}

/* Op i's slots: the values it is the first to read, then its output (over
 * a dying input, inplace_ok, or in a free slot); then the slots of what
 * dies there are freed. -1 when a size overflows. */
static int plan_op(const realrun *r, arena_plan *p, int i)
{
    const cic_model *m = r->m;
    const cic_op *op = &m->ops[i];
    int ids[6] = {op->in[0], op->in[1], op->in[2], op->w, op->b, op->g};
    int o = op->out, s = -1, k;
    size_t need;
    for (k = 0; k < 6; k++)
        if (ids[k] >= 0 && r->todo[ids[k]] && p->slot[ids[k]] < 0) {
            if (!(need = arena_need(r, ids[k])))
                return -1;
            slot_take(p, ids[k], need, -1);
        }
    if (p->slot[o] < 0) {
        if (!(need = arena_need(r, o)))
            return -1;
        for (k = 0; k < 3 && s < 0; k++)
            if (inplace_ok(r, op, k, p->last, i) && p->slot[op->in[k]] >= 0 &&
                p->owner[p->slot[op->in[k]]] == op->in[k])
                s = p->slot[op->in[k]];
        slot_take(p, o, need, s);
    }
    for (k = 0; k < 6; k++)
        slot_free(r, p, ids[k], i);
    if (p->last[o] < i) /* no reader */
        slot_free(r, p, o, p->last[o]);
    return 0;
}

/* Byte offsets in one arena of the activations and the values made for
 * the run (SIZE_MAX: not in the arena) and its size. A tensor takes a slot
 * when it is written or, made values, before their first reader (plan_op)
 * and frees it after its last reader (an activation without a reader: at
 * once; the readout: never). Slots grow to the largest tensor they hold.
 * The attention scores get their own region at the end. -1 when memory
 * runs out. */
static int plan_arena(const realrun *r, size_t *off, size_t *total, size_t *scores_off)
{
    const cic_model *m = r->m;
    int nt = m->n_t, i, k, rc = -1;
    arena_plan p;
    size_t sum = 0, asc = 0;
    p.ns = 0;
    p.last = cic_calloc((size_t)nt, sizeof *p.last);
    p.slot = cic_calloc((size_t)nt, sizeof *p.slot);
    p.owner = cic_calloc((size_t)nt + 1, sizeof *p.owner);
    p.ssz = cic_calloc((size_t)nt + 1, sizeof *p.ssz);
    if (!p.last || !p.slot || !p.owner || !p.ssz)
        goto cleanup;
    for (i = 0; i < nt; i++) {
        p.last[i] = -1;
        p.slot[i] = -1;
    }
    for (i = 0; i < m->n_ops; i++) {
        const cic_op *op = &m->ops[i];
        int ids[6] = {op->in[0], op->in[1], op->in[2], op->w, op->b, op->g};
        for (k = 0; k < 6; k++)
            if (in_arena(r, ids[k]))
                p.last[ids[k]] = i;
        if (op->kind == CIC_OP_ATTN) {
            int N = m->cfg.tokens, nh = r->rows / N * op->heads;
            size_t a = (size_t)attn_group(nh, N) * N * N;
            asc = a > asc ? a : asc;
        }
    }
    for (i = 0; i < m->n_ops; i++)
        if (plan_op(r, &p, i) < 0)
            goto cleanup;
    for (k = 0; k < p.ns; k++) {
        size_t a = p.ssz[k];
        p.ssz[k] = sum; /* now the slot's offset */
        if (sum > SIZE_MAX / 2 - a)
            goto cleanup;
        sum += a;
    }
    for (i = 0; i < nt; i++)
        off[i] = p.slot[i] >= 0 ? p.ssz[p.slot[i]] : SIZE_MAX;
    *scores_off = sum;
    asc = cic_mul_size(asc, sizeof(REAL));
    if (asc > SIZE_MAX / 2 - sum)
        goto cleanup;
    *total = sum + asc;
    rc = 0;
cleanup:
    free(p.last);
    free(p.slot);
    free(p.owner);
    free(p.ssz);
    return rc;
}

/* The run's values and its arena: r->val, r->buf (each activation's place,
 * and that of each value made for the run, val pointing there too) and
 * r->scores; *arena to free. 0, or -1 when memory runs out. */
static int real_setup(realrun *r, char **arena)
{
    const cic_model *m = r->m;
    size_t total = 0, scores_off = 0, *off = cic_calloc((size_t)m->n_t, sizeof *off);
    int i, rc = -1;
    r->buf = cic_calloc((size_t)m->n_t, sizeof *r->buf);
    r->val = cic_calloc((size_t)m->n_t, sizeof *r->val);
    r->todo = cic_calloc((size_t)m->n_t, sizeof *r->todo);
    if (!r->buf || !r->val || !r->todo || !off)
        goto cleanup;
    point_vals(r);
    if (plan_arena(r, off, &total, &scores_off) < 0)
        goto cleanup;
    *arena = cic_model_array_alloc(total, 1, false); /* huge pages when large */
    if (!*arena)
        goto cleanup;
    for (i = 0; i < m->n_t; i++) {
        if (off[i] != SIZE_MAX)
            r->buf[i] = (REAL *)(*arena + off[i]);
        if (r->todo[i])
            r->val[i] = r->buf[i];
    }
    r->scores = (REAL *)(*arena + scores_off);
    rc = 0;
cleanup:
    free(off);
    return rc;
}

/* After op i: the element rounding (R_LOWP) and the linear tap (R_TAP). */
static void real_after_op(realrun *r, int i)
{
    const cic_op *op = &r->m->ops[i];
    (void)op;
#if R_LOWP
    lowp_round(r, r->buf[op->out], (size_t)rows_of(r, op->out) * r->m->t[op->out].cols);
#endif
#if R_TAP
    if (r->o && r->o->lin_tap && op->kind == CIC_OP_LINEAR &&
        (op->role == CIC_ROLE_READER || op->role == CIC_ROLE_WRITER))
        r->o->lin_tap(r->o->tap_ctx, i, src(r, op->in[0]), r->buf[op->out],
                      rows_of(r, op->in[0]));
    if (r->o && r->o->tensor_tap && r->o->tensor_tap->want[op->out] && r->o->tensor_tap->f32)
        r->o->tensor_tap->f32(r->o->tensor_tap->ctx, op->out, r->buf[op->out],
                              rows_of(r, op->out));
#endif
}

static int real_run(REAL *out, const cic_model *m, enum cic_matmul mm, bool rounded,
                    const cic_run_opts *o, void *lx)
{
    realrun r;
    int i, rc = cic_model_check(m, NULL, 0), s0 = o ? o->sample0 : 0;
    int ns = (o && o->n_samples > 0) ? o->n_samples : m->cfg.samples;
    char *arena = NULL;
    if (rc != CIC_GRAPH_OK)
        return rc;
    rc = -1;
    memset(&r, 0, sizeof r);
    CIC_ASSERT(s0 >= 0 && s0 + ns <= m->cfg.samples);
    r.m = m;
    r.mm = mm;
    r.rows = ns * m->cfg.tokens;
    r.ns = ns;
    r.s0 = s0;
    r.nt = real_threads();
    r.o = o;
    r.lx = lx;
    r.rounded = rounded;
    if (real_setup(&r, &arena) < 0)
        goto cleanup;
    for (i = 0; i < m->n_ops; i++) {
        const cic_op *op = &m->ops[i];
        if (make_vals(&r, op) < 0 || REAL_KERNEL[op->kind](&r, op, r.buf[op->out]) < 0)
            goto cleanup;
        real_after_op(&r, i);
        r.fc.site[op->site] += cic_op_cost(m, op, r.ns);
    }
    memcpy(out, src(&r, m->output),
           (size_t)rows_of(&r, m->output) * m->t[m->output].cols * sizeof *out);
    if (o && o->flops)
        for (i = 0; i < CIC_SITE_COUNT; i++)
            o->flops->site[i] += r.fc.site[i];
    rc = 0;
cleanup:
    free(arena);
    free(r.buf);
    free(r.val);
    free(r.todo);
    return rc;
}
