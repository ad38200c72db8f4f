/* SPDX-License-Identifier: MIT */
/* adaln_graph.c: the graph of an adaLN strategy (DESIGN.md section 3), as a
 * rewrite of the original dit graph the block builder made.
 *
 * The rewrite copies the original's tensors (weights and inputs with their
 * values) and walks its ops in order, changing only what the strategy
 * changes, found by op kind, site and linear role, never by tensor name.
 * What changes is the strategy's descriptor's (cic_adaln_strategy), never
 * its kind:
 *   - the norms: RMSNorm (no centering) on a rotated, centered stream;
 *   - a MODULATE (norm site): a static fold (static-fold) drops it (the
 *     modulation is in the weights), a per-sample fold (per-sample-fold)
 *     replaces it by FOLD_IN ops that fold it into per-sample weights of
 *     the reader it feeds, unrotate (online-unrotate) unrotates its input
 *     first (x Q^T: a linear with rot.q, or a fast Hadamard);
 *   - a GATE (gate site): the folds drop it (the per-sample fold puts
 *     FOLD_OUT ops before the writer that feeds it), unrotate centers (a
 *     centered stream) and rotates back (x Q) after it;
 *   - the modulation itself (the SiLU of c and the adaLN linears, site MOD):
 *     the static fold drops it;
 *   - branch (branch-rotate): every reader's and writer's input is rotated
 *     online (x Q_in, of the MLP width for the MLP's writer).
 * Ops keep their sites, so the FLOPs land where the strategy's formulas put
 * them. The rotation tensors (rot.q, rot.qT, rot.signs, branch.*) are made
 * zeroed; adaln.c fills them and rewrites the weights. */
#include "adaln_graph.h"
#include "qmat.h"

#include <string.h>

typedef struct {
    const cic_model *src;
    cic_model *m;
    cic_adaln_graph *g;
    const cic_adaln_strategy *s;
    bool fast, rotated, centered;
    int hbase;   /* the spec's hadamard_base: 0 automatic, else K at every width */
    int group;   /* branch-rotate: the blocks of the rotations, 0 whole rows */
    bool regular; /* q = "regular-hadamard": the fast op's regular transform */
    int *remap;  /* src tensor id -> the tensor holding its value now */
    int *fold_w; /* src op index of a reader or writer -> folded weight, or -1 */
    int *fold_b;
    int ok;
} rw;

static int new_tensor(rw *r, const char *name, enum cic_tensor_role role, int rows, int cols)
{
    int id;
    if (!r->ok)
        return -1;
    id = cic_model_tensor_add(r->m, name, role, rows, cols);
    if (id < 0)
        r->ok = 0;
    return id;
}

/* An activation named base + suffix, shaped like tensor like (rows and the
 * rows' kind), cols wide. */
static int new_act(rw *r, int like, const char *suffix, int cols)
{
    char n[160];
    int id;
    snprintf(n, sizeof n, "%.120s%s", r->m->t[like].name, suffix);
    id = new_tensor(r, n, CIC_T_ACT, r->m->t[like].rows, cols);
    if (id >= 0) {
        r->m->t[id].rows_kind = r->m->t[like].rows_kind;
        r->m->t[id].block_rows = r->m->t[like].block_rows;
    }
    return id;
}

/* A per-sample activation: a vector [B, cols] (block_rows 0) or a matrix of
 * block_rows rows per sample. */
static int new_per_sample(rw *r, const char *name, int block_rows, int cols)
{
    int id = new_tensor(r, name, CIC_T_ACT,
                        r->m->cfg.samples * (block_rows ? block_rows : 1), cols);
    if (id >= 0) {
        r->m->t[id].rows_kind = block_rows ? CIC_ROWS_SAMPLE_MATRIX : CIC_ROWS_SAMPLES;
        r->m->t[id].block_rows = block_rows;
    }
    return id;
}

static void emit(rw *r, const cic_op *o)
{
    if (r->ok && cic_model_op_add(r->m, o) < 0)
        r->ok = 0;
}

/* y = x Q (rotate, q = rot.qT or branch.qT.*) or x Q^T (unrotate, rot.q):
 * a fast Hadamard with the signs tensor, or a dense linear. The fast op's
 * base order is the one adaln.c's dense Q of that width is built with
 * (cic_hadamard_base_order_k: the case's hadamard_base, which
 * cic_xform_check has found to fit d_model and, for branch-rotate, d_mlp;
 * else the automatic order), so both are the same matrix. */
static int rotation(rw *r, enum cic_site site, int layer, int x, int dense, int signs,
                    bool transpose, const char *suffix)
{
    cic_op o;
    if (!r->ok)
        return -1;
    if (r->fast) {
        o = cic_op_blank(CIC_OP_FWHT, site, layer);
        o.g = signs;
        o.transpose = transpose;
        o.group = r->group;
        o.regular = r->regular;
        o.hbase = r->regular ? 1
                             : cic_hadamard_base_order_k(r->group ? r->group : r->m->t[x].cols,
                                                         r->hbase);
    } else { /* group-wise: the [G, G] block on each block of G */
        o = cic_op_blank(CIC_OP_LINEAR, site, layer);
        o.w = dense;
        o.group = r->group;
        o.role = CIC_ROLE_OTHER;
    }
    o.in[0] = x;
    o.out = new_act(r, x, suffix, r->m->t[x].cols);
    emit(r, &o);
    return o.out;
}

/* The op of src that reads tensor t (the first after op i), or -1. */
static int consumer(const cic_model *src, int i, int t)
{
    int j, k;
    for (j = i + 1; j < src->n_ops; j++)
        for (k = 0; k < 3; k++)
            if (src->ops[j].in[k] == t)
                return j;
    return -1;
}

/* per-sample-fold at a norm site: FOLD_IN ops for the reader fed by
 * MODULATE op i (its weight W, bias b, the chunks of mod it used). */
static void fold_reader(rw *r, int i, const cic_op *mo)
{
    int j = consumer(r->src, i, mo->out);
    const cic_op *lin;
    cic_op o;
    char n[160];
    CIC_ASSERT(j >= 0 && r->src->ops[j].kind == CIC_OP_LINEAR &&
               r->src->ops[j].role == CIC_ROLE_READER);
    lin = &r->src->ops[j];
    o = cic_op_blank(CIC_OP_FOLD_IN_W, mo->site, mo->layer);
    o.in[0] = r->remap[mo->in[1]];
    o.in_col[0] = mo->in_col[1]; /* scale */
    o.w = lin->w;
    o.g = r->g->q;
    snprintf(n, sizeof n, "%.120s.fold.w", r->m->t[mo->in[0]].name);
    o.out = new_per_sample(r, n, r->m->t[lin->w].rows, r->m->t[lin->w].cols);
    emit(r, &o);
    r->fold_w[j] = o.out;
    o = cic_op_blank(CIC_OP_FOLD_IN_B, mo->site, mo->layer);
    o.in[0] = r->remap[mo->in[1]];
    o.in_col[0] = mo->in_col[0]; /* shift */
    o.w = lin->w;
    o.b = lin->b;
    snprintf(n, sizeof n, "%.120s.fold.b", r->m->t[mo->in[0]].name);
    o.out = new_per_sample(r, n, 0, r->m->t[lin->w].rows);
    emit(r, &o);
    r->fold_b[j] = o.out;
}

/* per-sample-fold at a gate site: FOLD_OUT ops for writer op i, whose
 * output GATE op gi gates. */
static void fold_writer(rw *r, int i, int gi)
{
    const cic_op *lin = &r->src->ops[i], *go = &r->src->ops[gi];
    cic_op o;
    char n[160];
    o = cic_op_blank(CIC_OP_FOLD_OUT_W, go->site, go->layer);
    o.in[0] = r->remap[go->in[1]];
    o.in_col[0] = go->in_col[0];
    o.w = lin->w;
    o.g = r->g->q;
    o.center = r->centered;
    snprintf(n, sizeof n, "%.120s.fold.w", r->m->t[go->out].name);
    o.out = new_per_sample(r, n, r->m->t[lin->w].rows, r->m->t[lin->w].cols);
    emit(r, &o);
    r->fold_w[i] = o.out;
    o = cic_op_blank(CIC_OP_FOLD_OUT_B, go->site, go->layer);
    o.in[0] = r->remap[go->in[1]];
    o.in_col[0] = go->in_col[0];
    o.b = lin->b;
    o.g = r->g->q;
    o.center = r->centered;
    snprintf(n, sizeof n, "%.120s.fold.b", r->m->t[go->out].name);
    o.out = new_per_sample(r, n, 0, r->m->t[lin->w].rows);
    emit(r, &o);
    r->fold_b[i] = o.out;
}

/* The GATE op that gates linear op i's output, or -1. */
static int gate_of(const cic_model *src, int i)
{
    int j = consumer(src, i, src->ops[i].out);
    return j >= 0 && src->ops[j].kind == CIC_OP_GATE ? j : -1;
}

static void do_linear(rw *r, int i, cic_op o)
{
    const cic_op *so = &r->src->ops[i];
    bool rw_lin = so->role == CIC_ROLE_READER || so->role == CIC_ROLE_WRITER;
    if (so->site == CIC_SITE_MOD && r->s->fold == CIC_ADALN_FOLD_STATIC)
        return; /* the modulation is folded into the weights */
    if (r->s->branch && rw_lin) {
        /* the MLP's writer reads the hidden activation: Q of d_mlp */
        bool wide = so->site == CIC_SITE_MLP && so->role == CIC_ROLE_WRITER;
        o.in[0] = rotation(r, so->site, so->layer, o.in[0], wide ? r->g->bq_m : r->g->bq_d,
                           wide ? r->g->bs_m : r->g->bs_d, false, ".in");
    }
    if (r->s->fold == CIC_ADALN_FOLD_PER_SAMPLE && so->role == CIC_ROLE_WRITER) {
        int gi = gate_of(r->src, i);
        if (gi >= 0)
            fold_writer(r, i, gi);
    }
    if (r->fold_w[i] >= 0) {
        o.w = r->fold_w[i];
        o.b = r->fold_b[i];
    }
    emit(r, &o);
}

static void do_modulate(rw *r, int i, cic_op o)
{
    const cic_op *so = &r->src->ops[i];
    switch (r->s->fold) {
    case CIC_ADALN_FOLD_STATIC:
        r->remap[so->out] = o.in[0];
        return;
    case CIC_ADALN_FOLD_PER_SAMPLE:
        fold_reader(r, i, so);
        r->remap[so->out] = o.in[0];
        return;
    case CIC_ADALN_FOLD_NONE:
        break;
    }
    if (r->s->unrotate)
        o.in[0] = rotation(r, so->site, so->layer, o.in[0], r->g->q, r->g->signs, true,
                           ".unrot");
    emit(r, &o);
}

static void do_gate(rw *r, int i, cic_op o)
{
    const cic_op *so = &r->src->ops[i];
    cic_op c;
    int g;
    if (r->s->fold != CIC_ADALN_FOLD_NONE) {
        r->remap[so->out] = o.in[0]; /* the gate is in the writer's weights */
        return;
    }
    emit(r, &o);
    if (!r->s->unrotate)
        return;
    g = o.out;
    if (r->centered) {
        c = cic_op_blank(CIC_OP_CENTER, so->site, so->layer);
        c.in[0] = g;
        c.out = g = new_act(r, g, ".center", r->m->t[g].cols);
        emit(r, &c);
    }
    r->remap[so->out] = rotation(r, so->site, so->layer, g, r->g->qt, r->g->signs, false,
                                 ".rot");
}

/* The strategy's rotation tensors, zeroed (adaln.c fills them). */
static void make_rotation_tensors(rw *r)
{
    int d = r->m->cfg.d_model, f = r->m->cfg.d_mlp;
    cic_adaln_graph *g = r->g;
    g->q = g->qt = g->signs = g->bq_d = g->bq_m = g->bs_d = g->bs_m = -1;
    if (r->s->unrotate && r->fast) {
        g->signs = new_tensor(r, "rot.signs", CIC_T_WEIGHT, 1, d);
    } else if (r->s->unrotate) {
        g->q = new_tensor(r, "rot.q", CIC_T_WEIGHT, d, d);   /* unrotate: x Q^T */
        g->qt = new_tensor(r, "rot.qT", CIC_T_WEIGHT, d, d); /* rotate:   x Q */
    } else if (r->s->fold == CIC_ADALN_FOLD_PER_SAMPLE) {
        g->q = new_tensor(r, "rot.q", CIC_T_WEIGHT, d, d);
    }
    if (!r->s->branch)
        return;
    if (r->fast) { /* group-wise: one block's signs, the same in every block */
        g->bs_d = new_tensor(r, "branch.signs.d", CIC_T_WEIGHT, 1, r->group ? r->group : d);
        g->bs_m = new_tensor(r, "branch.signs.m", CIC_T_WEIGHT, 1, r->group ? r->group : f);
    } else {
        int gd = r->group ? r->group : d, gf = r->group ? r->group : f;
        g->bq_d = new_tensor(r, "branch.qT.d", CIC_T_WEIGHT, gd, gd);
        g->bq_m = new_tensor(r, "branch.qT.m", CIC_T_WEIGHT, gf, gf);
    }
}

static void rewrite_ops(rw *r)
{
    int i, k;
    for (i = 0; i < r->src->n_ops && r->ok; i++) {
        const cic_op *so = &r->src->ops[i];
        cic_op o = *so;
        for (k = 0; k < 3; k++)
            if (o.in[k] >= 0)
                o.in[k] = r->remap[o.in[k]];
        switch (so->kind) {
        case CIC_OP_LINEAR:
            do_linear(r, i, o);
            break;
        case CIC_OP_MODULATE:
            do_modulate(r, i, o);
            break;
        case CIC_OP_GATE:
            do_gate(r, i, o);
            break;
        case CIC_OP_NORM:
            o.center = !(r->rotated && r->centered);
            emit(r, &o);
            break;
        case CIC_OP_ACT:
            if (!(so->site == CIC_SITE_MOD && r->s->fold == CIC_ADALN_FOLD_STATIC))
                emit(r, &o);
            break;
        default:
            emit(r, &o);
            break;
        }
    }
}

cic_model *cic_adaln_graph_create(const cic_model *orig, cic_model *own,
                                  const cic_xform_spec *x, const cic_adaln_strategy *s,
                                  cic_adaln_graph *g)
{
    rw r;
    int i;
    memset(&r, 0, sizeof r);
    r.src = orig;
    r.g = g;
    r.s = g->s = s;
    r.fast = x->fast;
    r.hbase = x->q == CIC_Q_HADAMARD ? x->hadamard_base : 0;
    r.group = s->branch ? x->group : 0;
    r.regular = x->q == CIC_Q_REGULAR;
    r.rotated = !s->branch;
    r.centered = x->stream == CIC_STREAM_CENTERED;
    r.ok = 1;
    CIC_ASSERT(!own || own == orig);
    r.m = own ? cic_model_clone_take(own) : cic_model_clone(orig);
    r.remap = cic_calloc((size_t)orig->n_t, sizeof *r.remap);
    r.fold_w = cic_calloc((size_t)orig->n_ops + 1, sizeof *r.fold_w);
    r.fold_b = cic_calloc((size_t)orig->n_ops + 1, sizeof *r.fold_b);
    if (!r.m || !r.remap || !r.fold_w || !r.fold_b)
        goto fail;
    r.m->n_ops = 0; /* the tensors stay, the ops are written anew */
    for (i = 0; i < orig->n_t; i++)
        r.remap[i] = i;
    for (i = 0; i < orig->n_ops; i++)
        r.fold_w[i] = r.fold_b[i] = -1;
    make_rotation_tensors(&r);
    rewrite_ops(&r);
    if (!r.ok)
        goto fail;
    r.m->output = r.remap[orig->output];
    r.m->residual = r.remap[orig->residual];
    free(r.remap);
    free(r.fold_w);
    free(r.fold_b);
    return r.m;
fail:
    cic_model_destroy(r.m);
    free(r.remap);
    free(r.fold_w);
    free(r.fold_b);
    return NULL;
}
