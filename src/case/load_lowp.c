/* SPDX-License-Identifier: MIT */
/* load_lowp.c: the [[engines.lowp]] entries, the low-precision engines of a
 * case. Each is a name and three choices:
 *   weights      a plain format every linear weight is rounded to (float32,
 *                bf16, fp16) or a scale rule (base/quant.h: int4, int8 with
 *                options, fp8-e4m3, fp8-e5m2, mxfp4, nvfp4);
 *   activations  what every linear's input becomes: a scale rule (dynamic
 *                quantization, per token or group), or a plain format,
 *                which is then the element format (every op's output is
 *                rounded to it), or float32 (nothing);
 *   compute      the element format when activations is a scale rule
 *                (float32, bf16 or fp16; default float32);
 *   weights_from unrounded (default: the transform's unrounded weights,
 *                rounded once) or float32 (its float32 weights).
 * Everything else of the model (norm gains, biases, the adaLN modulation,
 * online rotations) is stored in the element format. */
#include "case_int.h"

#include "../kind/engine_id.h"

#include <string.h>

static const char *const _cic_lowp_keys[] = {"name", "weights", "activations", "compute",
                                             "weights_from"};
/* The plain formats an engine's weights, activations or elements may be. */
static const char *const _cic_lowp_plain[] = {"float32", "bf16", "fp16"};
#define CIC_LOWP_PLAIN_ALLOWED "float32, bf16, fp16"

static const cic_format *_cic_lowp_plain_find(const char *s)
{
    size_t i;
    for (i = 0; i < CIC_CASE_LEN(_cic_lowp_plain); i++)
        if (!strcmp(s, _cic_lowp_plain[i]))
            return cic_format_find(s);
    return NULL;
}

/* A value of weights or activations: a plain format (*plain) or a scale
 * rule (*q, *is_rule). */
static int _cic_lowp_value(cic_case_ctx *x, const cic_case_tab *t, const char *key,
                           char *text, size_t cap, const cic_format **plain, bool *is_rule,
                           cic_quant *q, bool required)
{
    const cic_toml_node *node;
    bool have;
    char msg[256];
    int l, col;
    if (_cic_get_str(x, t, key, text, cap, &have, &node) != CIC_OK)
        return CIC_EINPUT;
    if (!have)
        return required ? _cic_missing(x, t, key, NULL) : CIC_OK;
    *is_rule = false;
    *plain = _cic_lowp_plain_find(text);
    if (*plain)
        return CIC_OK;
    _cic_pos(node, &l, &col);
    if (cic_quant_parse(q, text, msg, sizeof msg) < 0)
        return _cic_fail(x, l, col,
                         "bad '%s' in %s: %s; or a format: " CIC_LOWP_PLAIN_ALLOWED,
                         key, t->where, msg);
    *is_rule = true;
    return CIC_OK;
}

/* name: unique among the case's engines, not an engine of CIC_ENGINES. */
static int _cic_lowp_name(cic_case_ctx *x, const cic_case *c, const cic_case_tab *t,
                          cic_lowp_spec *e, int i)
{
    const cic_toml_node *node;
    bool have;
    int l, col, k;
    if (_cic_get_str(x, t, "name", e->name, sizeof e->name, &have, &node) != CIC_OK)
        return CIC_EINPUT;
    if (!have)
        return _cic_missing(x, t, "name", NULL);
    _cic_pos(node, &l, &col);
    if (!_cic_name_ok(e->name))
        return _cic_fail(x, l, col,
                         "bad 'name' '%s' in %s: use letters, digits, '_', '.' and '-' "
                         "(not starting with '.')", e->name, t->where);
    if (cic_engine_find(e->name) >= 0 || !strcmp(e->name, "*"))
        return _cic_fail(x, l, col, "'name' '%s' in %s is a built-in engine's name; pick "
                         "another", e->name, t->where);
    for (k = 0; k < i; k++)
        if (!strcmp(c->lowp[k].name, e->name))
            return _cic_fail(x, l, col, "'name' '%s' in %s is used by [[engines.lowp]] "
                             "entry %d already", e->name, t->where, k + 1);
    return CIC_OK;
}

/* compute and the element format. */
static int _cic_lowp_elem(cic_case_ctx *x, const cic_case_tab *t, cic_lowp_spec *e,
                          const cic_format *aplain)
{
    const cic_toml_node *node;
    char text[32];
    bool have;
    int l, col;
    e->elem = aplain ? aplain : cic_format_get(CIC_FORMAT_FLOAT32);
    if (_cic_get_str(x, t, "compute", text, sizeof text, &have, &node) != CIC_OK)
        return CIC_EINPUT;
    if (!have)
        return CIC_OK;
    _cic_pos(node, &l, &col);
    if (!_cic_lowp_plain_find(text))
        return _cic_fail(x, l, col, "bad 'compute' '%s' in %s; allowed: "
                         CIC_LOWP_PLAIN_ALLOWED, text, t->where);
    if (aplain && _cic_lowp_plain_find(text) != aplain)
        return _cic_fail(x, l, col, "'compute' = \"%s\" in %s contradicts activations = "
                         "\"%s\" (a plain format is the element format itself); drop "
                         "'compute'", text, t->where, aplain->name);
    e->elem = _cic_lowp_plain_find(text);
    return CIC_OK;
}

static int _cic_lowp_entry(cic_case_ctx *x, cic_case *c, const cic_toml_node *arr, size_t i)
{
    cic_lowp_spec *e = &c->lowp[i];
    cic_case_tab t;
    const cic_format *aplain = NULL;
    char where[64];
    int col, v, err0 = x->n_err;
    bool arule = false;
    memset(e, 0, sizeof *e);
    t.tbl = cic_toml_array_at(arr, i);
    snprintf(where, sizeof where, "[[engines.lowp]] entry %zu", i + 1);
    t.where = where;
    _cic_pos(t.tbl, &e->line, &col);
    _cic_check_keys(x, &t, _cic_lowp_keys, CIC_CASE_LEN(_cic_lowp_keys));
    if (_cic_lowp_name(x, c, &t, e, (int)i) != CIC_OK ||
        _cic_lowp_value(x, &t, "weights", e->weights, sizeof e->weights, &e->wfmt, &e->wq_on,
                        &e->wq, true) != CIC_OK)
        return CIC_EINPUT;
    strcpy(e->activations, "float32");
    if (_cic_lowp_value(x, &t, "activations", e->activations, sizeof e->activations, &aplain,
                        &arule, &e->aq, false) != CIC_OK)
        return CIC_EINPUT;
    if (!arule && !aplain)
        aplain = cic_format_get(CIC_FORMAT_FLOAT32);
    e->aq_on = arule;
    if (_cic_lowp_elem(x, &t, e, arule ? NULL : aplain) != CIC_OK)
        return CIC_EINPUT;
    v = CIC_LOWP_FROM_UNROUNDED;
    if (_cic_get_enum(x, &t, "weights_from", CIC_LOWP_FROM_NAME, CIC_LOWP_FROM_COUNT, &v,
                      NULL, NULL) != CIC_OK)
        return CIC_EINPUT;
    e->from = (enum cic_lowp_from)v;
    return _cic_status(x, err0);
}

int _cic_load_lowp(cic_case_ctx *x, cic_case *c, const cic_case_tab *et)
{
    const cic_toml_node *arr = NULL;
    size_t i, n;
    int err0 = x->n_err;
    c->n_lowp = 0;
    if (_cic_get_aot(x, et, "lowp", CIC_MAX_LOWP, &arr) != CIC_OK || !arr)
        return _cic_status(x, err0);
    n = cic_toml_array_size(arr);
    for (i = 0; i < n; i++) {
        _cic_lowp_entry(x, c, arr, i);
        c->n_lowp = (int)i + 1;
    }
    return _cic_status(x, err0);
}

int cic_case_lowp_find(const cic_case *c, const char *name)
{
    int i;
    for (i = 0; i < c->n_lowp; i++)
        if (!strcmp(c->lowp[i].name, name))
            return i;
    return -1;
}
