/* SPDX-License-Identifier: MIT */
/* block.c: what the case loader takes from the block descriptors
 * (block.h): the keys only blocks with a conditioning input have, the
 * per-block defaults, the transform kinds that apply to a block's norms,
 * and the weight counts of the memory estimate. Nothing here names a block
 * kind: the messages are made from the descriptors. */
#include "case_int.h"

#include <float.h>

bool _cic_block_has_cond(enum cic_block_kind b)
{
    return cic_block(b)->cond;
}

void _cic_block_defaults(cic_model_cfg *m)
{
    m->eps = cic_block(m->block)->eps;
    m->act = (enum cic_act)cic_block(m->block)->act;
}

/* "\"dit\"", or "\"a\" or \"b\"": the blocks of which want() holds. */
static const char *block_names(char *buf, size_t cap, bool (*want)(const cic_block_desc *, int),
                               int arg)
{
    int k, n = 0, o = 0;
    buf[0] = '\0';
    for (k = 0; k < CIC_BLOCK_COUNT; k++)
        if (want(cic_block((enum cic_block_kind)k), arg)) {
            o += snprintf(buf + o, o < (int)cap ? cap - (size_t)o : 0, "%s\"%s\"",
                          n++ ? " or " : "", cic_block((enum cic_block_kind)k)->name);
            if (o >= (int)cap)
                break;
        }
    return buf;
}

static bool has_cond(const cic_block_desc *b, int unused)
{
    (void)unused;
    return b->cond;
}

/* The [model] keys only blocks with a conditioning input have (t is
 * [model]): d_cond and final_layer, refused on another block (when the
 * block loaded) and read with their defaults either way (d_cond = d_model,
 * which must be loaded; final_layer true). */
void _cic_block_keys(cic_case_ctx *x, cic_case *c, const cic_case_tab *t)
{
    cic_model_cfg *m = &c->model;
    bool have;
    int l, col;
    char names[128];

    if (x->block_ok && !_cic_block_has_cond(m->block)) {
        static const char *const cond_only[] = {"d_cond", "final_layer"};
        size_t i;
        for (i = 0; i < CIC_CASE_LEN(cond_only); i++)
            if (_cic_find(t, cond_only[i], &l, &col))
                _cic_fail(x, l, col, "'%s' is only allowed for block = %s (this model is \"%s\")",
                          cond_only[i], block_names(names, sizeof names, has_cond, 0),
                          CIC_BLOCK_NAME[m->block]);
    }
    m->d_cond = m->d_model;
    _cic_get_intf(x, t, "d_cond", 1, CIC_CASE_MAX_DIM, &m->d_cond, &have, NULL);
    c->sweep.d_cond_default = !have;
    m->final_layer = true;
    _cic_get_bool(x, t, "final_layer", &m->final_layer);
}

/* Does the kind of descriptor k apply to a block whose norms are norm (its
 * descriptor's norms)? */
static bool applies(const cic_xform_desc *k, unsigned norm)
{
    return (k->norms >> norm & 1u) != 0;
}

/* "a, b" or "a, b or c" (last): the transform kinds that apply to norm. */
static const char *kinds_for(char *buf, size_t cap, enum cic_norm_kind norm, const char *last)
{
    return _cic_xform_kinds(buf, cap, applies, (unsigned)norm, 0, last);
}

static bool not_adaln_only(const cic_xform_desc *k, unsigned unused)
{
    (void)unused;
    return k->norms != 1u << CIC_NORM_ADALN;
}

/* The transform kinds the block allows, for the message on a
 * [[transforms]] entry without 'kind'. */
const char *_cic_block_kind_hint(enum cic_block_kind b)
{
    static char buf[320];
    char kinds[256];
    if (cic_block(b)->norm == CIC_NORM_ADALN)
        snprintf(buf, sizeof buf, " (on a %s block an adaLN strategy: %s)", cic_block(b)->name,
                 kinds_for(kinds, sizeof kinds, CIC_NORM_ADALN, " or "));
    else
        snprintf(buf, sizeof buf, " (%s)",
                 _cic_xform_kinds(kinds, sizeof kinds, not_adaln_only, 0, 0, " or "));
    return buf;
}

static bool has_norm_in(const cic_block_desc *b, int norms)
{
    return ((unsigned)norms >> b->norm & 1u) != 0;
}

/* A transform kind against the block it is applied to (the block loaded);
 * the position is that of 'kind'. */
int _cic_check_kind_block(cic_case_ctx *x, const cic_case *c, const cic_xform_spec *xf, int l,
                          int col)
{
    const cic_block_desc *b = cic_block(c->model.block);
    const cic_xform_desc *k = cic_xform_desc_of(xf->kind);
    const char *kn = CIC_XFORM_NAME[xf->kind];
    char names[128], kinds[256];
    if (applies(k, b->norm))
        return CIC_OK;
    block_names(names, sizeof names, has_norm_in, (int)k->norms);
    if (k->family == CIC_XFAM_ADALN)
        return _cic_fail(x, l, col,
                         "kind = \"%s\" is an adaLN strategy and needs block = %s (this "
                         "model is \"%s\"); allowed here: %s",
                         kn, names, b->name, kinds_for(kinds, sizeof kinds, b->norm, ", "));
    if (b->norm == CIC_NORM_ADALN)
        return _cic_fail(x, l, col,
                         "kind = \"%s\" does not apply to block = \"%s\" (adaLN modulation "
                         "does not commute with a static rotation or fold); on a %s block use "
                         "an adaLN strategy: %s (kind = \"%s\" needs block = %s)",
                         kn, b->name, b->name, kinds_for(kinds, sizeof kinds, b->norm, ", "), kn,
                         names);
    return _cic_fail(x, l, col, "kind = \"%s\" needs block = %s (this model is \"%s\")%s", kn,
                     names, b->name, k->refused_hint ? k->refused_hint : "");
}

void _cic_block_weights(const cic_model_cfg *m, uint64_t *layer, uint64_t *readout)
{
    cic_block(m->block)->weights(m, layer, readout);
}

static bool has_llama(const cic_block_desc *b, int unused)
{
    (void)unused;
    return b->llama;
}

/* kv_heads against heads, and an even head_dim under RoPE, when neither
 * d_model nor heads is swept (then per point, sweep.c). */
static void attn_key_rules(cic_case_ctx *x, const cic_case *c, const cic_toml_node *nkv,
                           const cic_toml_node *nr)
{
    const cic_model_cfg *m = &c->model;
    int l, col;
    if (m->heads < 1 || m->d_model < 1 || m->d_model % m->heads != 0 ||
        (c->sweep.on && (c->sweep.n[CIC_AXIS_HEADS] > 0 || c->sweep.n[CIC_AXIS_D_MODEL] > 0)))
        return;
    if (nkv && m->heads % m->kv_heads != 0) {
        _cic_pos(nkv, &l, &col);
        _cic_fail(x, l, col,
                  "kv_heads = %d does not divide heads = %d (each key/value head serves "
                  "heads / kv_heads query heads)",
                  m->kv_heads, m->heads);
    }
    if (nr && m->rope != CIC_ROPE_NONE && (m->d_model / m->heads) % 2 != 0) {
        _cic_pos(nr, &l, &col);
        _cic_fail(x, l, col,
                  "rope = \"%s\" needs an even head size, and d_model / heads = %d / %d = %d "
                  "is odd (RoPE rotates pairs of a head's values)",
                  CIC_ROPE_NAME[m->rope], m->d_model, m->heads, m->d_model / m->heads);
    }
}

void _cic_block_attn_keys(cic_case_ctx *x, cic_case *c, const cic_case_tab *t)
{
    static const char *const llama_only[] = {"rope", "rope_theta", "kv_heads", "qkv_bias"};
    cic_model_cfg *m = &c->model;
    const cic_toml_node *nkv = NULL, *nr = NULL, *n = NULL;
    bool have = false;
    int l, col, v = CIC_ROPE_NONE;
    size_t i;
    char names[128];

    if (x->block_ok && !cic_block(m->block)->llama)
        for (i = 0; i < CIC_CASE_LEN(llama_only); i++)
            if (_cic_find(t, llama_only[i], &l, &col))
                _cic_fail(x, l, col, "'%s' is only allowed for block = %s (this model is \"%s\")",
                          llama_only[i], block_names(names, sizeof names, has_llama, 0),
                          CIC_BLOCK_NAME[m->block]);
    _cic_get_enum(x, t, "rope", CIC_ROPE_NAME, CIC_ROPE_COUNT, &v, NULL, &nr);
    m->rope = (enum cic_rope)v;
    m->rope_theta = 10000.0;
    /* every engine takes theta at least as a binary32 value */
    if (_cic_get_num(x, t, "rope_theta", true, FLT_MAX, &m->rope_theta, NULL, &n) == CIC_OK &&
        n && (float)m->rope_theta < FLT_MIN) {
        _cic_pos(n, &l, &col);
        _cic_fail(x, l, col, "'rope_theta' = %g is below %g (FLT_MIN): the float32 engine "
                  "takes it as a binary32 value", m->rope_theta, (double)FLT_MIN);
    }
    m->qkv_bias = false;
    _cic_get_bool(x, t, "qkv_bias", &m->qkv_bias);
    m->kv_heads = m->heads;
    if (_cic_get_intf(x, t, "kv_heads", 1, CIC_CASE_MAX_DIM, &m->kv_heads, &have, &nkv) !=
            CIC_OK ||
        !have)
        nkv = NULL;
    c->sweep.kv_heads_default = !have;
    attn_key_rules(x, c, nkv, nr);
}
