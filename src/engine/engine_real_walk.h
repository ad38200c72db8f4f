/* SPDX-License-Identifier: MIT */
/* engine_real_walk.h: part of the real engines' template (included at the
 * end of engine_real.h, never by anything else): the weights a run reads,
 * the plan of its activation arena, and real_run, the walker: it checks the
 * graph once (cic_model_check), then calls each op's kernel in order and
 * books the op's FLOPs at its site (cic_op_cost, the op table's formula). */

/* Point val[id] at the values of every weight and input tensor an op reads:
 * the includer's R_VALS_CREATE converts a tensor once per run (and the run
 * frees it, R_VALS_OWNED), or the f32 storage is used as is. */
static int load_vals(realrun *r, bool rounded)
{
    const cic_model *m = r->m;
    int i, k;
    for (i = 0; i < m->n_ops; i++) {
        const cic_op *op = &m->ops[i];
        int ids[6] = {op->in[0], op->in[1], op->in[2], op->w, op->b, op->g};
        for (k = 0; k < 6; k++) {
            int id = ids[k];
            if (id < 0 || m->t[id].role == CIC_T_ACT || r->val[id])
                continue;
#if R_VALS_OWNED
            r->val[id] = R_VALS_CREATE(r, id, rounded);
            if (!r->val[id])
                return -1;
#else
            (void)rounded;
            r->val[id] = m->t[id].f32;
#endif
        }
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

/* Byte offsets of the activations in one arena (SIZE_MAX: not an
 * activation) and its size. A tensor takes a free slot when it is written
 * (or its dying input's slot, inplace_ok) and frees it after its last reader
 * (no reader: at once; the readout: never). Slots grow to the largest
 * tensor they hold. The attention scores get their own region at the end.
 * -1 when memory runs out. */
static int plan_arena(const realrun *r, size_t *off, size_t *total, size_t *scores_off)
{
    const cic_model *m = r->m;
    int nt = m->n_t, i, k, ns = 0, rc = -1;
    int *last = cic_calloc((size_t)nt, sizeof *last);
    int *slot = cic_calloc((size_t)nt, sizeof *slot);
    int *owner = cic_calloc((size_t)nt + 1, sizeof *owner);
    size_t *ssz = cic_calloc((size_t)nt + 1, sizeof *ssz), sum = 0, asc = 0;
    if (!last || !slot || !owner || !ssz)
        goto cleanup;
    for (i = 0; i < nt; i++) {
        last[i] = -1;
        slot[i] = -1;
    }
    for (i = 0; i < m->n_ops; i++) {
        const cic_op *op = &m->ops[i];
        int ids[6] = {op->in[0], op->in[1], op->in[2], op->w, op->b, op->g};
        for (k = 0; k < 6; k++)
            if (ids[k] >= 0 && m->t[ids[k]].role == CIC_T_ACT)
                last[ids[k]] = i;
    }
    for (i = 0; i < m->n_ops; i++) {
        const cic_op *op = &m->ops[i];
        int ids[6] = {op->in[0], op->in[1], op->in[2], op->w, op->b, op->g};
        int o = op->out, s = -1, fit = -1, big = -1;
        if (op->kind == CIC_OP_ATTN) {
            int N = m->cfg.tokens, nh = r->rows / N * op->heads;
            size_t a = (size_t)attn_group(nh, N) * N * N;
            asc = a > asc ? a : asc;
        }
        if (slot[o] < 0) {
            size_t need = cic_mul_size(cic_mul_size((size_t)rows_of(r, o), (size_t)m->t[o].cols),
                                       sizeof(REAL));
            if (need > SIZE_MAX / 2)
                goto cleanup;
            need = (need + 63) / 64 * 64; /* cache-line aligned */
            for (k = 0; k < 3 && s < 0; k++)
                if (inplace_ok(r, op, k, last, i) && slot[op->in[k]] >= 0 &&
                    owner[slot[op->in[k]]] == op->in[k])
                    s = slot[op->in[k]];
            if (s < 0) {
                /* the smallest free slot that fits, else the largest free
                 * slot grown, else a new slot */
                for (k = 0; k < ns; k++) {
                    if (owner[k] >= 0)
                        continue;
                    if (ssz[k] >= need && (fit < 0 || ssz[k] < ssz[fit]))
                        fit = k;
                    if (big < 0 || ssz[k] > ssz[big])
                        big = k;
                }
                s = fit >= 0 ? fit : big >= 0 ? big : ns++;
            }
            if (ssz[s] < need)
                ssz[s] = need;
            owner[s] = o;
            slot[o] = s;
        }
        for (k = 0; k < 6; k++) {
            int t = ids[k];
            if (t >= 0 && m->t[t].role == CIC_T_ACT && last[t] == i && t != m->output &&
                slot[t] >= 0 && owner[slot[t]] == t)
                owner[slot[t]] = -1;
        }
        if (last[o] < i && o != m->output && owner[slot[o]] == o)
            owner[slot[o]] = -1;
    }
    for (k = 0; k < ns; k++) {
        size_t a = ssz[k];
        ssz[k] = sum; /* now the slot's offset */
        if (sum > SIZE_MAX / 2 - a)
            goto cleanup;
        sum += a;
    }
    for (i = 0; i < nt; i++)
        off[i] = slot[i] >= 0 ? ssz[slot[i]] : SIZE_MAX;
    *scores_off = sum;
    asc = cic_mul_size(asc, sizeof(REAL));
    if (asc > SIZE_MAX / 2 - sum)
        goto cleanup;
    *total = sum + asc;
    rc = 0;
cleanup:
    free(last);
    free(slot);
    free(owner);
    free(ssz);
    return rc;
}

/* n bytes for the arena; large ones aligned for transparent huge pages
 * (a hint: without them the arena works the same). Free with free(). */
static void *arena_alloc(size_t n)
{
    void *p = NULL;
    if (n >= R_HUGE) {
        size_t a = n / R_HUGE * R_HUGE + (n % R_HUGE ? R_HUGE : 0);
        if (posix_memalign(&p, R_HUGE, a) != 0)
            return NULL;
#ifdef MADV_HUGEPAGE
        (void)madvise(p, a, MADV_HUGEPAGE);
#endif
        return p;
    }
    return malloc(n ? n : 1);
}

/* The run's values and its arena: r->val, r->buf (each activation's place)
 * and r->scores; *arena to free. 0, or -1 when memory runs out. */
static int real_setup(realrun *r, bool rounded, char **arena)
{
    const cic_model *m = r->m;
    size_t total = 0, scores_off = 0, *off = cic_calloc((size_t)m->n_t, sizeof *off);
    int i, rc = -1;
    r->buf = cic_calloc((size_t)m->n_t, sizeof *r->buf);
    r->val = cic_calloc((size_t)m->n_t, sizeof *r->val);
    if (!r->buf || !r->val || !off || load_vals(r, rounded) < 0 ||
        plan_arena(r, off, &total, &scores_off) < 0)
        goto cleanup;
    *arena = arena_alloc(total);
    if (!*arena)
        goto cleanup;
    for (i = 0; i < m->n_t; i++)
        if (off[i] != SIZE_MAX)
            r->buf[i] = (REAL *)(*arena + off[i]);
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
    if (real_setup(&r, rounded, &arena) < 0)
        goto cleanup;
    for (i = 0; i < m->n_ops; i++) {
        const cic_op *op = &m->ops[i];
        if (REAL_KERNEL[op->kind](&r, op, r.buf[op->out]) < 0)
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
#if R_VALS_OWNED
    if (r.val)
        for (i = 0; i < m->n_t; i++)
            free((void *)r.val[i]);
#endif
    free(r.val);
    return rc;
}
