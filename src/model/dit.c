/* SPDX-License-Identifier: MIT */
/* dit.c: the DiT block (adaLN-Zero as in the DiT reference code, DESIGN.md
 * section 1) and the graphs of its adaLN rotation strategies (section 3).
 *
 * One builder serves the original and every strategy, so the strategies
 * differ from the original only where the plan says: the stream's norm
 * (LayerNorm, or RMSNorm on a centered stream), what happens at the norm
 * sites (modulate; unrotate online then modulate; fold the modulation into
 * per-sample weights) and at the gate sites (gate; gate, center and rotate
 * back online; fold the gate into per-sample weights), and for branch-rotate
 * an online rotation before every linear. The rotation tensors are created
 * zeroed here; the adaLN transform (src/xform/adaln.c) fills them and
 * rewrites the input and the folded or rotated weights. */
#include "build.h"

#include <string.h>

#define W _cic_bld_weight
#define A _cic_bld_act
#define OP _cic_bld_op
#define op_base _cic_op_base
#define linear _cic_bld_linear
#define norm _cic_bld_norm
#define add _cic_bld_add

/* An activation whose rows are samples (block_rows 0) or a matrix of
 * block_rows rows per sample. */
static int A_samples(cic_bld *b, const char *name, int block_rows, int cols)
{
    int id;
    cic_model *m = b->m;
    if (!b->ok)
        return -1;
    id = cic_model_tensor_add(m, name, CIC_T_ACT,
                              m->cfg.samples * (block_rows ? block_rows : 1), cols);
    if (id < 0) {
        b->ok = 0;
        return -1;
    }
    m->t[id].rows_kind = block_rows ? CIC_ROWS_SAMPLE_MATRIX : CIC_ROWS_SAMPLES;
    m->t[id].block_rows = block_rows;
    return id;
}

/* A zeroed weight the transform fills (not drawn from the seed). */
static int Z(cic_bld *b, const char *name, int rows, int cols)
{
    int id;
    if (!b->ok)
        return -1;
    id = cic_model_tensor_add(b->m, name, CIC_T_WEIGHT, rows, cols);
    if (id < 0)
        b->ok = 0;
    return id;
}

static int unary(cic_bld *b, enum cic_op_kind kind, enum cic_site site, int layer,
                 int in, int cols, const char *out_name)
{
    cic_op o = op_base(kind, site, layer);
    if (!b->ok)
        return -1;
    o.in[0] = in;
    o.out = A(b, out_name, cols);
    OP(b, &o);
    return o.out;
}

static int modulate(cic_bld *b, enum cic_site site, int layer, int x, int mod,
                    int shift_col, int scale_col, const char *out_name)
{
    cic_op o = op_base(CIC_OP_MODULATE, site, layer);
    if (!b->ok)
        return -1;
    o.in[0] = x;
    o.in[1] = mod;
    o.in_col[0] = shift_col;
    o.in_col[1] = scale_col;
    o.out = A(b, out_name, b->m->cfg.d_model);
    OP(b, &o);
    return o.out;
}

static int gate(cic_bld *b, enum cic_site site, int layer, int x, int mod, int col,
                const char *out_name)
{
    cic_op o = op_base(CIC_OP_GATE, site, layer);
    if (!b->ok)
        return -1;
    o.in[0] = x;
    o.in[1] = mod;
    o.in_col[0] = col;
    o.out = A(b, out_name, b->m->t[x].cols);
    OP(b, &o);
    return o.out;
}

static int fwht(cic_bld *b, enum cic_site site, int layer, int x, int signs,
                bool transpose, const char *out_name)
{
    cic_op o = op_base(CIC_OP_FWHT, site, layer);
    if (!b->ok)
        return -1;
    o.in[0] = x;
    o.g = signs;
    o.transpose = transpose;
    o.out = A(b, out_name, b->m->t[x].cols);
    OP(b, &o);
    return o.out;
}

/* Per-sample folds of a reader (FOLD_IN_*) or a writer (FOLD_OUT_*). */
static void fold_in(cic_bld *b, enum cic_site site, int layer, int mod, int shift_col,
                    int scale_col, int w, int bias, int q, const char *name, int *wf,
                    int *bf)
{
    cic_op o = op_base(CIC_OP_FOLD_IN_W, site, layer);
    char n[128];
    int rows;
    if (!b->ok)
        return;
    rows = b->m->t[w].rows;
    o.in[0] = mod;
    o.in_col[0] = scale_col;
    o.w = w;
    o.g = q;
    snprintf(n, sizeof n, "%.100s.w", name);
    *wf = o.out = A_samples(b, n, rows, b->m->t[w].cols);
    OP(b, &o);
    o = op_base(CIC_OP_FOLD_IN_B, site, layer);
    o.in[0] = mod;
    o.in_col[0] = shift_col;
    o.w = w;
    o.b = bias;
    snprintf(n, sizeof n, "%.100s.b", name);
    *bf = o.out = A_samples(b, n, 0, rows);
    OP(b, &o);
}

static void fold_out(cic_bld *b, enum cic_site site, int layer, int mod, int gate_col,
                     int w, int bias, int q, bool center, const char *name, int *wf,
                     int *bf)
{
    cic_op o = op_base(CIC_OP_FOLD_OUT_W, site, layer);
    char n[128];
    if (!b->ok)
        return;
    o.in[0] = mod;
    o.in_col[0] = gate_col;
    o.w = w;
    o.g = q;
    o.center = center;
    snprintf(n, sizeof n, "%.100s.w", name);
    *wf = o.out = A_samples(b, n, b->m->t[w].rows, b->m->t[w].cols);
    OP(b, &o);
    o = op_base(CIC_OP_FOLD_OUT_B, site, layer);
    o.in[0] = mod;
    o.in_col[0] = gate_col;
    o.b = bias;
    o.g = q;
    o.center = center;
    snprintf(n, sizeof n, "%.100s.b", name);
    *bf = o.out = A_samples(b, n, 0, b->m->t[w].rows);
    OP(b, &o);
}

/* A linear whose weight and bias may be per-sample folded tensors. */
static int linear_any(cic_bld *b, enum cic_site site, int layer, enum cic_lin_role role,
                      int in, int w, int bias, int n_out, const char *out_name)
{
    cic_op o = op_base(CIC_OP_LINEAR, site, layer);
    if (!b->ok)
        return -1;
    o.in[0] = in;
    o.w = w;
    o.b = bias;
    o.role = role;
    o.out = A(b, out_name, n_out);
    OP(b, &o);
    return o.out;
}

typedef struct {
    const cic_dit_plan *p;
    bool rotated;   /* the residual stream is rotated (all but branch-rotate) */
    bool centered;  /* ... and centered (C Q) */
    int q, qt, signs;        /* rot.q [d,d], rot.qT, rot.signs */
    int bq_d, bq_m, bs_d, bs_m; /* branch-rotate: branch.qT.*, branch.signs.* */
} plan_ids;

/* branch-rotate: rotate a linear's input online (x Q_in). */
static int branch_in(cic_bld *b, const plan_ids *pl, enum cic_site site, int layer, int x,
                     bool wide, const char *out_name)
{
    if (pl->p->kind != CIC_XFORM_BRANCH_ROTATE)
        return x;
    if (pl->p->fast)
        return fwht(b, site, layer, x, wide ? pl->bs_m : pl->bs_d, false, out_name);
    return linear(b, site, layer, CIC_ROLE_OTHER, x, wide ? pl->bq_m : pl->bq_d, -1,
                  out_name);
}

/* The norm site: h = norm(x), then what the strategy does before a reader.
 * Returns the reader's input; *wf, *bf get folded weights (per-sample-fold). */
static int norm_site(cic_bld *b, const plan_ids *pl, enum cic_site site, int layer, int x,
                     int mod, int shift_col, int scale_col, int w, int bias, int *wf,
                     int *bf, const char *tag)
{
    char n[112];
    int h, z;
    enum cic_xform_kind k = pl->p->kind;
    snprintf(n, sizeof n, "act.%d.%s", layer, tag);
    h = norm(b, site, layer, x, -1, -1, !(pl->rotated && pl->centered), n);
    *wf = w;
    *bf = bias;
    switch (k) {
    case CIC_XFORM_STATIC_FOLD:
        return h;
    case CIC_XFORM_PER_SAMPLE_FOLD:
        snprintf(n, sizeof n, "act.%d.%s.fold", layer, tag);
        fold_in(b, site, layer, mod, shift_col, scale_col, w, bias, pl->q, n, wf, bf);
        return h;
    case CIC_XFORM_ONLINE_UNROTATE:
        snprintf(n, sizeof n, "act.%d.%s.unrot", layer, tag);
        z = pl->p->fast ? fwht(b, site, layer, h, pl->signs, true, n)
                        : linear(b, site, layer, CIC_ROLE_OTHER, h, pl->q, -1, n);
        snprintf(n, sizeof n, "act.%d.%s.mod", layer, tag);
        return modulate(b, site, layer, z, mod, shift_col, scale_col, n);
    default:
        snprintf(n, sizeof n, "act.%d.%s.mod", layer, tag);
        return modulate(b, site, layer, h, mod, shift_col, scale_col, n);
    }
}

/* The gate site: add the branch output o to the stream x. */
static int gate_site(cic_bld *b, const plan_ids *pl, enum cic_site site, int layer, int x,
                     int o, int mod, int gate_col, const char *tag)
{
    char n[112];
    int g;
    enum cic_xform_kind k = pl->p->kind;
    if (k == CIC_XFORM_STATIC_FOLD || k == CIC_XFORM_PER_SAMPLE_FOLD) {
        snprintf(n, sizeof n, "act.%d.%s.resid", layer, tag);
        return add(b, site, layer, x, o, n);
    }
    snprintf(n, sizeof n, "act.%d.%s", layer, tag);
    g = gate(b, site, layer, o, mod, gate_col, n);
    if (k == CIC_XFORM_ONLINE_UNROTATE) {
        if (pl->centered) {
            snprintf(n, sizeof n, "act.%d.%s.center", layer, tag);
            g = unary(b, CIC_OP_CENTER, site, layer, g, b->m->cfg.d_model, n);
        }
        snprintf(n, sizeof n, "act.%d.%s.rot", layer, tag);
        g = pl->p->fast ? fwht(b, site, layer, g, pl->signs, false, n)
                        : linear(b, site, layer, CIC_ROLE_OTHER, g, pl->qt, -1, n);
    }
    snprintf(n, sizeof n, "act.%d.%s.resid", layer, tag);
    return add(b, site, layer, x, g, n);
}

cic_model *cic_dit_create(const cic_model_cfg *cfg, enum cic_readout readout,
                          const cic_dit_plan *plan, const cic_model *src,
                          const cic_model_progress *p)
{
    cic_model *m = cic_calloc(1, sizeof *m);
    cic_bld bb, *b = &bb;
    plan_ids pl;
    int d, f, dc, l, x, sc = -1;
    enum cic_xform_kind k = plan->kind;
    double sd = cfg->std;
    char n[112], o[112];
    (void)readout;
    if (!m)
        return NULL;
    memset(&pl, 0, sizeof pl);
    m->cfg = *cfg;
    m->rows = cfg->tokens * cfg->samples;
    m->output = m->residual = m->cond = -1;
    d = cfg->d_model;
    f = cfg->d_mlp;
    dc = cfg->d_cond;
    bb.m = m;
    bb.ok = 1;
    bb.src = src;
    pl.p = plan;
    pl.rotated = k == CIC_XFORM_STATIC_FOLD || k == CIC_XFORM_ONLINE_UNROTATE ||
                 k == CIC_XFORM_PER_SAMPLE_FOLD;
    pl.centered = plan->stream == CIC_STREAM_CENTERED;
    pl.q = pl.qt = pl.signs = pl.bq_d = pl.bq_m = pl.bs_d = pl.bs_m = -1;

    m->input = cic_model_tensor_add(m, "input", CIC_T_INPUT, m->rows, d);
    m->cond = cic_model_tensor_add(m, "cond", CIC_T_INPUT, cfg->samples, dc);
    if (m->input < 0 || m->cond < 0)
        goto fail;
    m->t[m->cond].rows_kind = CIC_ROWS_SAMPLES;
    if (src) {
        memcpy(m->t[m->input].f32, src->t[src->input].f32, (size_t)m->rows * d * sizeof(float));
        memcpy(m->t[m->cond].f32, src->t[src->cond].f32, (size_t)cfg->samples * dc * sizeof(float));
    } else {
        _cic_fill(m, m->input, 1.0);
        _cic_fill(m, m->cond, 1.0);
    }
    if (k == CIC_XFORM_ONLINE_UNROTATE && plan->fast) {
        pl.signs = Z(b, "rot.signs", 1, d);
    } else if (k == CIC_XFORM_ONLINE_UNROTATE) {
        pl.q = Z(b, "rot.q", d, d);   /* unrotate: y = x Q^T, weight Q */
        pl.qt = Z(b, "rot.qT", d, d); /* rotate:   y = x Q,   weight Q^T */
    } else if (k == CIC_XFORM_PER_SAMPLE_FOLD) {
        pl.q = Z(b, "rot.q", d, d);
    } else if (k == CIC_XFORM_BRANCH_ROTATE && plan->fast) {
        pl.bs_d = Z(b, "branch.signs.d", 1, d);
        pl.bs_m = Z(b, "branch.signs.m", 1, f);
    } else if (k == CIC_XFORM_BRANCH_ROTATE) {
        pl.bq_d = Z(b, "branch.qT.d", d, d);
        pl.bq_m = Z(b, "branch.qT.m", f, f);
    }
    if (k != CIC_XFORM_STATIC_FOLD) {
        cic_op s = op_base(CIC_OP_ACT, CIC_SITE_MOD, -1);
        s.in[0] = m->cond;
        s.act = CIC_ACT_SILU;
        s.out = sc = A_samples(b, "act.silu_c", 0, dc);
        OP(b, &s);
    }
    x = m->input;
    for (l = 0; l < cfg->layers; l++) {
        int wada, bada, wqkv, bqkv, wo, bo, w1, b1, w2, b2, mod = -1;
        int hm, wf, bf, qkv, a, oo, u, v, w;
#define NM(s) (snprintf(n, sizeof n, "blocks.%d.%s", l, s), n)
#define AN(s) (snprintf(o, sizeof o, "act.%d.%s", l, s), o)
        wqkv = W(b, NM("attn.qkv.weight"), 3 * d, d, sd);
        bqkv = W(b, NM("attn.qkv.bias"), 1, 3 * d, sd);
        wo = W(b, NM("attn.proj.weight"), d, d, sd);
        bo = W(b, NM("attn.proj.bias"), 1, d, sd);
        w1 = W(b, NM("mlp.fc1.weight"), f, d, sd);
        b1 = W(b, NM("mlp.fc1.bias"), 1, f, sd);
        w2 = W(b, NM("mlp.fc2.weight"), d, f, sd);
        b2 = W(b, NM("mlp.fc2.bias"), 1, d, sd);
        wada = W(b, NM("adaLN_modulation.1.weight"), 6 * d, dc, sd);
        bada = W(b, NM("adaLN_modulation.1.bias"), 1, 6 * d, sd);
        if (k != CIC_XFORM_STATIC_FOLD) {
            cic_op lo = op_base(CIC_OP_LINEAR, CIC_SITE_MOD, l);
            lo.in[0] = sc;
            lo.w = wada;
            lo.b = bada;
            lo.out = mod = A_samples(b, AN("mod"), 0, 6 * d);
            OP(b, &lo);
        }
        /* attention branch: shift1 0, scale1 d, gate1 2d */
        hm = norm_site(b, &pl, CIC_SITE_NORM1, l, x, mod, 0, d, wqkv, bqkv, &wf, &bf, "norm1");
        hm = branch_in(b, &pl, CIC_SITE_ATTN, l, hm, false, AN("qkv.in"));
        qkv = linear_any(b, CIC_SITE_ATTN, l, CIC_ROLE_READER, hm, wf, bf, 3 * d, AN("qkv"));
        a = _cic_bld_attn(b, l, qkv, 0, qkv, d, qkv, 2 * d, AN("attn"));
        a = branch_in(b, &pl, CIC_SITE_ATTN, l, a, false, AN("proj.in"));
        wf = wo;
        bf = bo;
        if (k == CIC_XFORM_PER_SAMPLE_FOLD)
            fold_out(b, CIC_SITE_GATE1, l, mod, 2 * d, wo, bo, pl.q, pl.centered,
                     AN("gate1.fold"), &wf, &bf);
        oo = linear_any(b, CIC_SITE_ATTN, l, CIC_ROLE_WRITER, a, wf, bf, d, AN("proj"));
        x = gate_site(b, &pl, CIC_SITE_GATE1, l, x, oo, mod, 2 * d, "gate1");
        /* MLP branch: shift2 3d, scale2 4d, gate2 5d */
        hm = norm_site(b, &pl, CIC_SITE_NORM2, l, x, mod, 3 * d, 4 * d, w1, b1, &wf, &bf, "norm2");
        hm = branch_in(b, &pl, CIC_SITE_MLP, l, hm, false, AN("fc1.in"));
        u = linear_any(b, CIC_SITE_MLP, l, CIC_ROLE_READER, hm, wf, bf, f, AN("fc1"));
        {
            cic_op ac = op_base(CIC_OP_ACT, CIC_SITE_MLP, l);
            ac.in[0] = u;
            ac.act = cfg->act;
            v = ac.out = A(b, AN("act"), f);
            OP(b, &ac);
        }
        v = branch_in(b, &pl, CIC_SITE_MLP, l, v, true, AN("fc2.in"));
        wf = w2;
        bf = b2;
        if (k == CIC_XFORM_PER_SAMPLE_FOLD)
            fold_out(b, CIC_SITE_GATE2, l, mod, 5 * d, w2, b2, pl.q, pl.centered,
                     AN("gate2.fold"), &wf, &bf);
        w = linear_any(b, CIC_SITE_MLP, l, CIC_ROLE_WRITER, v, wf, bf, d, AN("fc2"));
        x = gate_site(b, &pl, CIC_SITE_GATE2, l, x, w, mod, 5 * d, "gate2");
#undef NM
#undef AN
    }
    m->residual = x;
    if (cfg->final_layer) {
        int wfa = W(b, "final_layer.adaLN_modulation.1.weight", 2 * d, dc, sd);
        int bfa = W(b, "final_layer.adaLN_modulation.1.bias", 1, 2 * d, sd);
        int wl = W(b, "final_layer.linear.weight", cfg->d_out, d, sd);
        int bl = W(b, "final_layer.linear.bias", 1, cfg->d_out, sd);
        int fmod = -1, hm, wf, bf;
        if (k != CIC_XFORM_STATIC_FOLD) {
            cic_op lo = op_base(CIC_OP_LINEAR, CIC_SITE_MOD, -1);
            lo.in[0] = sc;
            lo.w = wfa;
            lo.b = bfa;
            lo.out = fmod = A_samples(b, "act.final.mod", 0, 2 * d);
            OP(b, &lo);
        }
        /* final layer chunks: shift 0, scale d */
        hm = norm_site(b, &pl, CIC_SITE_FINAL, -1, x, fmod, 0, d, wl, bl, &wf, &bf, "final");
        hm = branch_in(b, &pl, CIC_SITE_FINAL, -1, hm, false, "act.final.in");
        m->output = linear_any(b, CIC_SITE_FINAL, -1, CIC_ROLE_READER, hm, wf, bf,
                               cfg->d_out, "act.final.linear");
    } else {
        m->output = x;
    }
    /* residual readout of a LayerNorm model: compared without the row mean;
     * the final layer's head output is compared as it is */
    m->center_out = !cfg->final_layer;
    if (!b->ok)
        goto fail;
    _cic_fill_pending(m, p);
    if (!src)
        _cic_apply_outliers(m);
    return m;
fail:
    cic_model_destroy(m);
    return NULL;
}
