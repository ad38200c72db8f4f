/* SPDX-License-Identifier: MIT */
/* model.c: building the original models of a case (graph + weights), and the
 * model container itself (model.h).
 *
 * Every weight is a pure function of (seed, tensor name): drawn from the
 * counter RNG with correctly rounded arithmetic and rounded once to binary32,
 * so the SHA-256 of the weights in reference/ holds on every machine. */
#include "model.h"

#include "build.h"
#include "source.h"

#include "../base/mpvec.h"
#include "../base/rng.h"

#include "lazy.h"

#include <string.h>
#include <sys/mman.h>

/* The op and site names are in op.c, with the op table. */

/* ---- container ---- */

/* t's unrounded values (MPFR, a recipe or doubles) dropped. */
static void drop_unrounded(cic_tensor *t)
{
    cic_mpvec_destroy(t->hp, (size_t)t->rows * (size_t)t->cols);
    cic_lazy_unref(t->lazy);
    free(t->f64);
    t->hp = NULL;
    t->lazy = NULL;
    t->f64 = NULL;
}

static void tensor_free(cic_tensor *t)
{
    if (!t->f32_mapped)
        free(t->f32);
    t->f32_mapped = false;
    t->f32 = NULL;
    drop_unrounded(t);
}

void cic_model_destroy(cic_model *m)
{
    int i;
    if (!m)
        return;
    for (i = 0; i < m->n_t; i++)
        tensor_free(&m->t[i]);
    free(m->t);
    free(m->ops);
    if (m->out_q)
        cic_mpvec_destroy(m->out_q, (size_t)m->cfg.d_model * m->cfg.d_model);
    if (m->keep_free)
        m->keep_free(m->keep); /* after the tensors that point into it */
    free(m);
}

#define HUGE_PAGE ((size_t)2 << 20)

void *cic_model_array_alloc(size_t n, size_t size, bool zero)
{
    size_t bytes = cic_mul_size(n ? n : 1, size), a;
    void *p = NULL;
    if (bytes == SIZE_MAX)
        return NULL;
    if (bytes < HUGE_PAGE)
        return zero ? calloc(1, bytes) : malloc(bytes);
    a = bytes / HUGE_PAGE * HUGE_PAGE + (bytes % HUGE_PAGE ? HUGE_PAGE : 0);
    if (posix_memalign(&p, HUGE_PAGE, a) != 0)
        return NULL;
#ifdef MADV_HUGEPAGE
    (void)madvise(p, a, MADV_HUGEPAGE);
#endif
    if (zero) /* a block of glibc's heap may be reused, not fresh */
        memset(p, 0, bytes);
    return p;
}

int cic_model_tensor_add(cic_model *m, const char *name,
                         enum cic_tensor_role role, int rows, int cols)
{
    cic_tensor *t;
    CIC_ASSERT(rows > 0 && cols > 0);
    if (m->n_t == m->cap_t) {
        int cap = m->cap_t ? 2 * m->cap_t : 64;
        cic_tensor *nt = realloc(m->t, (size_t)cap * sizeof *nt);
        if (!nt)
            return -1;
        m->t = nt;
        m->cap_t = cap;
    }
    t = &m->t[m->n_t];
    memset(t, 0, sizeof *t);
    cic_strlcpy(t->name, name, sizeof t->name);
    t->role = role;
    t->rows = rows;
    t->cols = cols;
    if (role != CIC_T_ACT) {
        t->f32 = cic_model_array_alloc((size_t)rows * (size_t)cols, sizeof *t->f32, true);
        if (!t->f32)
            return -1;
    }
    return m->n_t++;
}

int cic_model_op_add(cic_model *m, const cic_op *op)
{
    if (m->n_ops == m->cap_ops) {
        int cap = m->cap_ops ? 2 * m->cap_ops : 64;
        cic_op *no = realloc(m->ops, (size_t)cap * sizeof *no);
        if (!no)
            return -1;
        m->ops = no;
        m->cap_ops = cap;
    }
    m->ops[m->n_ops] = *op;
    return m->n_ops++;
}

int cic_model_tensor_find(const cic_model *m, const char *name)
{
    int i;
    for (i = 0; i < m->n_t; i++)
        if (strcmp(m->t[i].name, name) == 0)
            return i;
    return -1;
}

bool cic_tensor_has_hp(const cic_tensor *t)
{
    return t->hp || t->lazy || t->f64;
}

mpfr_prec_t cic_tensor_hp_prec(const cic_tensor *t)
{
    return t->lazy ? t->lazy->prec : t->hp || t->f64 ? t->hp_prec : 0;
}

const mpfr_t *cic_tensor_hp_make(const cic_tensor *t, mpfr_t **tmp)
{
    size_t n = (size_t)t->rows * (size_t)t->cols, i;
    *tmp = NULL;
    if (t->hp)
        return (const mpfr_t *)t->hp;
    if (!t->lazy && !t->f64)
        return NULL;
    *tmp = cic_mpvec_create(n, cic_tensor_hp_prec(t));
    if (*tmp && t->f64) {
        for (i = 0; i < n; i++) /* exact: each double carries <= hp_prec bits */
            mpfr_set_d((*tmp)[i], t->f64[i], MPFR_RNDN);
    } else if (*tmp && cic_lazy_make(t->lazy, *tmp) < 0) {
        cic_mpvec_destroy(*tmp, n);
        *tmp = NULL;
    }
    return (const mpfr_t *)*tmp;
}

void cic_tensor_f64_range(double *v, const cic_tensor *t, bool rounded, size_t lo, size_t hi)
{
    size_t i;
    CIC_ASSERT(rounded || !t->lazy);
    if (!rounded && t->f64) {
        memcpy(v, t->f64 + lo, (hi - lo) * sizeof *v);
    } else if (!rounded && t->hp) {
        for (i = lo; i < hi; i++)
            v[i - lo] = mpfr_get_d(t->hp[i], MPFR_RNDN);
    } else {
        for (i = lo; i < hi; i++)
            v[i - lo] = (double)t->f32[i];
    }
}

int cic_tensor_f64_get(double *v, const cic_tensor *t, bool rounded)
{
    if (!rounded && t->lazy)
        return cic_lazy_make_f64(t->lazy, v);
    cic_tensor_f64_range(v, t, rounded, 0, (size_t)t->rows * (size_t)t->cols);
    return 0;
}

double *cic_tensor_f64_create(const cic_tensor *t, bool rounded)
{
    double *v = cic_model_array_alloc((size_t)t->rows * (size_t)t->cols, sizeof *v, false);
    if (v && cic_tensor_f64_get(v, t, rounded) < 0) {
        free(v);
        return NULL;
    }
    return v;
}

void cic_tensor_set_f64(cic_tensor *t, double *v, mpfr_prec_t prec)
{
    size_t n = (size_t)t->rows * (size_t)t->cols, i;
    CIC_ASSERT(prec <= 53);
    drop_unrounded(t);
    t->f64 = v;
    t->hp_prec = prec;
    for (i = 0; i < n; i++) /* RN, as mpfr_get_flt: one rounding of an exact value */
        t->f32[i] = (float)v[i];
}

void cic_tensor_set_hp(cic_tensor *t, mpfr_t *v, mpfr_prec_t prec)
{
    drop_unrounded(t);
    t->hp = v;
    t->hp_prec = prec;
    cic_mpvec_get_f32(t->f32, (const mpfr_t *)v, (size_t)t->rows * (size_t)t->cols);
}

int cic_model_tensor_hp(cic_model *m, int id, mpfr_prec_t prec)
{
    cic_tensor *t = &m->t[id];
    size_t n = (size_t)t->rows * (size_t)t->cols;
    drop_unrounded(t);
    t->hp = cic_mpvec_create(n, prec);
    t->hp_prec = prec;
    return t->hp ? 0 : -1;
}

int cic_model_run_rows(const cic_model *m, int id, int n_samples)
{
    const cic_tensor *t = &m->t[id];
    if (t->role == CIC_T_WEIGHT)
        return t->rows;
    switch (t->rows_kind) {
    case CIC_ROWS_SAMPLES:
        return n_samples;
    case CIC_ROWS_SAMPLE_MATRIX:
        return n_samples * t->block_rows;
    default:
        return n_samples * m->cfg.tokens;
    }
}

int cic_model_out_cols(const cic_model *m)
{
    return m->t[m->output].cols;
}

cic_model *cic_model_clone(const cic_model *m)
{
    cic_model *c = cic_calloc(1, sizeof *c);
    int i;
    size_t dd = (size_t)m->cfg.d_model * m->cfg.d_model;
    if (!c)
        return NULL;
    *c = *m;
    c->t = cic_calloc((size_t)m->cap_t, sizeof *c->t);
    c->ops = cic_calloc((size_t)m->cap_ops, sizeof *c->ops);
    c->out_q = NULL;
    c->keep = NULL; /* every tensor of the clone is its own copy */
    c->keep_free = NULL;
    if (!c->t || !c->ops) {
        free(c->t);
        free(c->ops);
        free(c);
        return NULL;
    }
    c->n_t = 0;
    memcpy(c->ops, m->ops, (size_t)m->n_ops * sizeof *c->ops);
    for (i = 0; i < m->n_t; i++) {
        const cic_tensor *s = &m->t[i];
        cic_tensor *d = &c->t[i];
        size_t n = (size_t)s->rows * (size_t)s->cols, k;
        *d = *s;
        d->f32 = NULL;
        d->hp = NULL;
        d->f64 = NULL;
        d->lazy = cic_lazy_ref(s->lazy); /* shared: a recipe is never changed */
        d->f32_mapped = false;           /* the copy is the clone's own */
        c->n_t = i + 1;
        if (s->f32) {
            d->f32 = cic_model_array_alloc(n, sizeof *d->f32, false);
            if (!d->f32)
                goto fail;
            memcpy(d->f32, s->f32, n * sizeof *d->f32);
        }
        if (s->hp) {
            d->hp = cic_mpvec_create(n, s->hp_prec);
            if (!d->hp)
                goto fail;
            for (k = 0; k < n; k++)
                mpfr_set(d->hp[k], s->hp[k], MPFR_RNDN);
        }
        if (s->f64) {
            d->f64 = cic_model_array_alloc(n, sizeof *d->f64, false);
            if (!d->f64)
                goto fail;
            memcpy(d->f64, s->f64, n * sizeof *d->f64);
        }
    }
    if (m->out_q) {
        size_t k;
        c->out_q = cic_mpvec_create(dd, m->out_q_prec);
        if (!c->out_q)
            goto fail;
        for (k = 0; k < dd; k++)
            mpfr_set(c->out_q[k], m->out_q[k], MPFR_RNDN);
    }
    return c;
fail:
    cic_model_destroy(c);
    return NULL;
}

/* ---- weights ---- */

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
    o.kv_heads = cic_block(b->m->cfg.block)->llama ? cic_cfg_kv_heads(&b->m->cfg) : o.heads;
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
static int _cic_apply_massive(cic_model *m)
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

cic_model *cic_model_create(const cic_model_cfg *cfg, enum cic_readout readout)
{
    return cic_model_create_progress(cfg, readout, NULL, NULL);
}

cic_model *cic_model_create_progress(const cic_model_cfg *cfg, enum cic_readout readout,
                                     const cic_model_progress *p, cic_diag *d)
{
    return cic_model_create_from(
        cfg, readout, cic_source_get(cfg->checkpoint[0] ? CIC_SOURCE_CHECKPOINT : CIC_SOURCE_SEED),
        p, d);
}

cic_model *cic_model_create_from(const cic_model_cfg *cfg, enum cic_readout readout,
                                 const struct cic_weight_source_s *src,
                                 const cic_model_progress *p, cic_diag *d)
{
    cic_model *m;
    cic_bld b;
    m = cic_calloc(1, sizeof *m);
    if (!m)
        return NULL;
    m->cfg = *cfg;
    m->rt = p ? p->rt : NULL; /* before the weights: the draw's threads */
    m->rows = cfg->tokens * cfg->samples;
    m->output = m->residual = -1;
    m->cond = -1;
    b.m = m;
    b.ok = 1;
    /* every block reads its input X0 [R, d], drawn with std 1 */
    m->input = cic_model_tensor_add(m, "input", CIC_T_INPUT, m->rows, cfg->d_model);
    if (m->input < 0)
        goto fail;
    _cic_fill(m, m->input, 1.0);
    cic_block(cfg->block)->build(&b, (int)readout);
    if (!b.ok || src->fill(m, p, d) < 0)
        goto fail;
    _cic_apply_outliers(m);
    if (_cic_apply_massive(m) < 0)
        goto fail;
    return m;
fail:
    cic_model_destroy(m);
    return NULL;
}

/* n float32 values into s as little-endian bytes, a chunk at a time (one
 * call per value made hashing a 7B layer's 219 M weights take seconds). */
static void sha_f32_le(cic_sha256 *s, const float *v, size_t n)
{
    unsigned char le[4096 * 4];
    size_t k, i;
    for (k = 0; k < n; k += i) {
        for (i = 0; i < 4096 && k + i < n; i++) {
            uint32_t u;
            int j;
            memcpy(&u, &v[k + i], 4);
            for (j = 0; j < 4; j++)
                le[4 * i + j] = (unsigned char)(u >> (8 * j));
        }
        cic_sha256_update(s, le, 4 * i);
    }
}

void cic_model_weights_sha256(char hex[65], const cic_model *m)
{
    cic_sha256 s;
    unsigned char dig[32];
    int i;
    size_t k;
    cic_sha256_init(&s);
    for (i = 0; i < m->n_t; i++) {
        const cic_tensor *t = &m->t[i];
        uint32_t shape[2] = {(uint32_t)t->rows, (uint32_t)t->cols};
        if (t->role == CIC_T_ACT)
            continue;
        cic_sha256_update(&s, t->name, strlen(t->name) + 1);
        for (k = 0; k < 2; k++) {
            unsigned char le[4];
            int j;
            for (j = 0; j < 4; j++)
                le[j] = (unsigned char)(shape[k] >> (8 * j));
            cic_sha256_update(&s, le, 4);
        }
        sha_f32_le(&s, t->f32, (size_t)t->rows * (size_t)t->cols);
    }
    cic_sha256_final(&s, dig);
    for (i = 0; i < 32; i++)
        snprintf(hex + 2 * i, 3, "%02x", dig[i]);
}
