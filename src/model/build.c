/* SPDX-License-Identifier: MIT */
/* build.c: the graph-building helpers of build.h, shared by the block
 * builders (block_*.c) and create.c: tensors marked for the weight source,
 * the ops of a block, the outlier channels and the massive activations.
 * They call only the container (model.c), so the block files that call
 * them are called back by nothing they call. */
#include "build.h"

#include "../base/mpvec.h"
#include "../base/rng.h"

#include <string.h>

void _cic_fill(cic_model *m, int id, double std)
{
    m->t[id].fill = CIC_FILL_DRAW;
    m->t[id].fill_std = std;
}

/* Norm gains scatter around 1 (std 0.1) so folding them changes weights. */
static void fill_gain(cic_model *m, int id)
{
    m->t[id].fill = CIC_FILL_GAIN;
    m->t[id].fill_std = 0.1;
}

/* Tensor and op builders (build.h); on allocation failure they set ok = 0
 * and later calls do nothing, so the graph builders read straight through. */


int _cic_bld_weight(cic_bld *b, const char *name, int rows, int cols, double std)
{
    int id;
    if (!b->ok)
        return -1;
    id = cic_model_tensor_add(b->m, name, CIC_T_WEIGHT, rows, cols);
    if (id < 0) {
        b->ok = 0;
        return -1;
    }
    _cic_fill(b->m, id, std);
    return id;
}

int _cic_bld_gain(cic_bld *b, const char *name, int cols)
{
    int id;
    if (!b->ok)
        return -1;
    id = cic_model_tensor_add(b->m, name, CIC_T_WEIGHT, 1, cols);
    if (id < 0) {
        b->ok = 0;
        return -1;
    }
    fill_gain(b->m, id);
    return id;
}

int _cic_bld_act(cic_bld *b, const char *name, int cols)
{
    int id;
    if (!b->ok)
        return -1;
    id = cic_model_tensor_add(b->m, name, CIC_T_ACT, b->m->rows, cols);
    if (id < 0)
        b->ok = 0;
    return id;
}

void _cic_bld_op(cic_bld *b, const cic_op *op)
{
    if (b->ok && cic_model_op_add(b->m, op) < 0)
        b->ok = 0;
}

cic_op cic_op_blank(enum cic_op_kind kind, enum cic_site site, int layer)
{
    cic_op o;
    memset(&o, 0, sizeof o);
    o.kind = kind;
    o.site = site;
    o.layer = layer;
    o.out = o.w = o.b = o.g = -1;
    o.in[0] = o.in[1] = o.in[2] = -1;
    return o;
}

int _cic_bld_readout(cic_bld *b, int readout, int x, const char *norm, const char *head,
                     bool layernorm)
{
    cic_model *m = b->m;
    int d = m->cfg.d_model, dout = m->cfg.d_out, gf, bf = -1, wh, bh = -1, hf;
    char n[96], o[96];
    const char *nb = strrchr(norm, '.'), *hb = strrchr(head, '.');
    m->residual = x;
    if (readout != CIC_READOUT_HEAD) {
        m->output = x;
        m->center_out = layernorm;
        return x;
    }
    snprintf(n, sizeof n, "%s.weight", norm);
    gf = _cic_bld_gain(b, n, d);
    if (layernorm) {
        snprintf(n, sizeof n, "%s.bias", norm);
        bf = _cic_bld_weight(b, n, 1, d, 0.1);
    }
    snprintf(n, sizeof n, "%s.weight", head);
    wh = _cic_bld_weight(b, n, dout, d, m->cfg.std);
    if (layernorm) {
        snprintf(n, sizeof n, "%s.bias", head);
        bh = _cic_bld_weight(b, n, 1, dout, m->cfg.std);
    }
    snprintf(o, sizeof o, "act.%s", nb ? nb + 1 : norm);
    hf = _cic_bld_norm(b, CIC_SITE_FINAL, -1, x, gf, bf, layernorm, o);
    snprintf(o, sizeof o, "act.%s", hb ? hb + 1 : head);
    m->output = _cic_bld_linear(b, CIC_SITE_FINAL, -1, CIC_ROLE_READER, hf, wh, bh, o);
    return m->output;
}

int _cic_bld_linear(cic_bld *b, enum cic_site site, int layer, enum cic_lin_role role,
                  int in, int w, int bias, const char *out_name)
{
    cic_op o = cic_op_blank(CIC_OP_LINEAR, site, layer);
    if (!b->ok)
        return -1;
    o.in[0] = in;
    o.w = w;
    o.b = bias;
    o.role = role;
    o.out = _cic_bld_act(b, out_name, b->m->t[w].rows);
    _cic_bld_op(b, &o);
    return o.out;
}

int _cic_bld_norm(cic_bld *b, enum cic_site site, int layer, int in, int g, int bias,
                bool center, const char *out_name)
{
    cic_op o = cic_op_blank(CIC_OP_NORM, site, layer);
    if (!b->ok)
        return -1;
    o.in[0] = in;
    o.g = g;
    o.b = bias;
    o.center = center;
    o.eps = (float)b->m->cfg.eps;
    o.out = _cic_bld_act(b, out_name, b->m->cfg.d_model);
    _cic_bld_op(b, &o);
    return o.out;
}

int _cic_bld_add(cic_bld *b, enum cic_site site, int layer, int x, int y,
               const char *out_name)
{
    cic_op o = cic_op_blank(CIC_OP_ADD, site, layer);
    if (!b->ok)
        return -1;
    o.in[0] = x;
    o.in[1] = y;
    o.out = _cic_bld_act(b, out_name, b->m->cfg.d_model);
    _cic_bld_op(b, &o);
    return o.out;
}

int _cic_bld_attn(cic_bld *b, int layer, int q, int qc, int k, int kc, int v, int vc,
                const char *out_name)
{
    cic_op o = cic_op_blank(CIC_OP_ATTN, CIC_SITE_ATTN, layer);
    if (!b->ok)
        return -1;
    o.in[0] = q;
    o.in[1] = k;
    o.in[2] = v;
    o.in_col[0] = qc;
    o.in_col[1] = kc;
    o.in_col[2] = vc;
    o.heads = b->m->cfg.heads;
    /* only a LLaMA block groups its key/value heads */
    o.kv_heads = b->kv_heads;
    o.causal = b->m->cfg.causal;
    o.out = _cic_bld_act(b, out_name, b->m->cfg.d_model);
    _cic_bld_op(b, &o);
    return o.out;
}

int _cic_bld_rope(cic_bld *b, int layer, int x, int heads, const char *out_name)
{
    cic_op o = cic_op_blank(CIC_OP_ROPE, CIC_SITE_ATTN, layer);
    if (!b->ok)
        return -1;
    o.in[0] = x;
    o.heads = heads;
    o.rope = b->m->cfg.rope;
    o.theta = b->m->cfg.rope_theta;
    o.rot = b->m->cfg.rotary_dim;
    o.out = _cic_bld_act(b, out_name, b->m->t[x].cols);
    _cic_bld_op(b, &o);
    return o.out;
}

/* 0..d-1 with its first k places a seeded Fisher-Yates draw (malloc'd; NULL
 * when memory runs out). */
static int *_cic_seeded_channels(int d, int k, uint64_t key)
{
    int i, *perm = cic_calloc((size_t)d, sizeof *perm);
    if (!perm)
        return NULL;
    for (i = 0; i < d; i++)
        perm[i] = i;
    for (i = 0; i < k; i++) {
        int t, p = i + (int)(cic_rng_u64(key, (uint64_t)i) % (uint64_t)(d - i));
        t = perm[i];
        perm[i] = perm[p];
        perm[p] = t;
    }
    return perm;
}

/* Outlier channels: the first k of a seeded Fisher-Yates shuffle of 0..d-1.
 * The block input and every writer's rows for those channels are scaled. */
void _cic_apply_outliers(cic_model *m)
{
    int d = m->cfg.d_model, k = m->cfg.outlier_channels, i, j, r;
    int *perm;
    uint64_t key = cic_rng_key(m->cfg.seed, "outliers");
    float s = (float)m->cfg.outlier_scale;
    if (k <= 0)
        return;
    perm = _cic_seeded_channels(d, k, key);
    if (!perm)
        return;
    for (i = 0; i < k; i++) {
        int c = perm[i];
        cic_tensor *x = &m->t[m->input];
        for (r = 0; r < x->rows; r++)
            x->f32[(size_t)r * x->cols + c] *= s;
        for (j = 0; j < m->n_ops; j++) {
            const cic_op *o = &m->ops[j];
            if (o->kind == CIC_OP_LINEAR && o->role == CIC_ROLE_WRITER) {
                cic_tensor *w = &m->t[o->w];
                for (r = 0; r < w->cols; r++)
                    w->f32[(size_t)c * w->cols + r] *= s;
                if (o->b >= 0)
                    m->t[o->b].f32[c] *= s;
            }
        }
    }
    free(perm);
}


/* Massive activations: the first massive_tokens tokens of every sample
 * hold massive_scale in massive_channels channels, the first of a seeded
 * Fisher-Yates shuffle of 0..d-1 (its own key: the outlier channels do not
 * move). A fixed large value, as trained LLMs and DiTs show in a few
 * channels of their first tokens. Returns 0, or -1 when memory runs out. */
int _cic_apply_massive(cic_model *m)
{
    const cic_model_cfg *cfg = &m->cfg;
    int d = cfg->d_model, k = cfg->massive_channels < d ? cfg->massive_channels : d;
    int T = cfg->massive_tokens < cfg->tokens ? cfg->massive_tokens : cfg->tokens;
    int i, s, t, *perm;
    uint64_t key = cic_rng_key(cfg->seed, "massive");
    cic_tensor *x = &m->t[m->input];
    if (k <= 0)
        return 0;
    perm = _cic_seeded_channels(d, k, key);
    if (!perm)
        return -1;
    for (s = 0; s < cfg->samples; s++)
        for (t = 0; t < T; t++)
            for (i = 0; i < k; i++)
                x->f32[((size_t)s * cfg->tokens + t) * d + perm[i]] = (float)cfg->massive_scale;
    free(perm);
    return 0;
}

