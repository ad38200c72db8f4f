/* SPDX-License-Identifier: MIT */
/* load_xform.c: the [[transforms]] entries: a unique name, a kind the block
 * allows, the precision it is computed in, the rotation Q for rotate and the
 * adaLN strategies, the keys only the adaLN strategies take (stream, fast,
 * calibration), a known mistake and the expected verdict, and 'after', the
 * earlier transform it is applied on top of. An entry stops at its first
 * error (after every unknown key is reported); the next entry goes on. */
#include "case_int.h"

#include <stdio.h>
#include <string.h>

/* Allowed keys, in the order they are documented; then every kind's own
 * keys (its descriptor's params). */
static const char *const _cic_xform_keys[] = {
    "name",    "kind",   "after",  "precision", "q",          "seed", "hadamard_base", "q_tensor",
    "mistake", "expect", "stream", "fast",      "calibration", "group"};

/* The allowed keys with the kinds' own: into keys, their number. */
static size_t xform_keys(const char **keys, size_t cap)
{
    size_t n = 0, i;
    int k, j;
    for (i = 0; i < CIC_CASE_LEN(_cic_xform_keys) && n < cap; i++)
        keys[n++] = _cic_xform_keys[i];
    for (k = 0; k < CIC_XFORM_COUNT; k++)
        for (j = 0; j < CIC_XFORM_MAX_PARAMS && cic_xform_desc_of((enum cic_xform_kind)k)->params[j].key; j++) {
            const char *key = cic_xform_desc_of((enum cic_xform_kind)k)->params[j].key;
            bool dup = false;
            for (i = 0; i < n && !dup; i++)
                dup = strcmp(keys[i], key) == 0;
            if (!dup && n < cap)
                keys[n++] = key;
        }
    return n;
}

/* Ways to pick kinds for a message (_cic_xform_kinds). */
static bool has_key(const cic_xform_desc *k, unsigned key)
{
    return (k->keys & key) == key;
}

static bool has_key_plain(const cic_xform_desc *k, unsigned key)
{
    return k->family != CIC_XFAM_ADALN && has_key(k, key);
}

static bool takes_q(const cic_xform_desc *k, unsigned q)
{
    return has_key(k, CIC_XKEY_Q) && (k->q_kinds >> q & 1u);
}

static bool takes_q_plain(const cic_xform_desc *k, unsigned q)
{
    return k->family != CIC_XFAM_ADALN && takes_q(k, q);
}

static bool any_adaln(bool (*want)(const cic_xform_desc *, unsigned), unsigned arg)
{
    int k;
    for (k = 0; k < CIC_XFORM_COUNT; k++)
        if (cic_xform_desc_of((enum cic_xform_kind)k)->family == CIC_XFAM_ADALN &&
            want(cic_xform_desc_of((enum cic_xform_kind)k), arg))
            return true;
    return false;
}

/* fast: a fast Walsh-Hadamard transform instead of a dense d x d product
 * (online-unrotate, branch-rotate; q = "hadamard"). xf->q and stream are
 * loaded. */
static int _cic_adaln_fast(cic_case_ctx *x, const cic_case_tab *t,
                           cic_xform_spec *xf)
{
    const char *kn = CIC_XFORM_NAME[xf->kind];
    const cic_toml_node *node;
    int rc, l, col;
    char kinds[160];

    node = _cic_find(t, "fast", &l, &col);
    if (node && !cic_xform_has_keys(xf->kind, CIC_XKEY_FAST))
        return _cic_fail(x, l, col,
                         "'fast' is only allowed for kind = %s "
                         "(this transform is \"%s\"; "
                         "it does no online rotation)",
                         _cic_xform_kinds(kinds, sizeof kinds, has_key, CIC_XKEY_FAST,
                                          CIC_KINDS_QUOTED, " or "),
                         kn);
    if ((rc = _cic_get_bool(x, t, "fast", &xf->fast)))
        return rc;
    if (xf->fast) {
        _cic_pos(node, &l, &col);
        if (xf->q != CIC_Q_HADAMARD && xf->q != CIC_Q_REGULAR)
            return _cic_fail(x, l, col,
                             "fast = true needs q = \"hadamard\" or \"regular-hadamard\" "
                             "(a fast Walsh-Hadamard transform); this transform has "
                             "q = \"%s\": set q = \"hadamard\" or fast = "
                             "false",
                             CIC_Q_NAME[xf->q]);
    }
    return CIC_OK;
}

/* A rule between the kind's keys (its descriptor's keys_check), at the key
 * it names. */
static int _cic_xform_keys_rule(cic_case_ctx *x, const cic_case_tab *t, const cic_xform_spec *xf)
{
    const cic_xform_desc *k = cic_xform_desc_of(xf->kind);
    char msg[512];
    const char *key;
    int l = 0, col = 0;
    if (!k->keys_check || !(key = k->keys_check(msg, sizeof msg, xf)))
        return CIC_OK;
    _cic_pos(_cic_find(t, key, NULL, NULL), &l, &col);
    return _cic_fail(x, l, col, "%s", msg);
}

/* calibration: the sample whose conditioning static-fold bakes in. */
static int _cic_adaln_calibration(cic_case_ctx *x, const cic_case *c,
                                  const cic_case_tab *t, cic_xform_spec *xf)
{
    const char *kn = CIC_XFORM_NAME[xf->kind];
    const cic_toml_node *node;
    bool have;
    int rc, l, col;
    int64_t cal = 0;
    char kinds[160];

    node = _cic_find(t, "calibration", &l, &col);
    if (node && !cic_xform_has_keys(xf->kind, CIC_XKEY_CALIBRATION))
        return _cic_fail(x, l, col,
                         "'calibration' is only allowed for kind = "
                         "%s (this transform is \"%s\")",
                         _cic_xform_kinds(kinds, sizeof kinds, has_key, CIC_XKEY_CALIBRATION,
                                          CIC_KINDS_QUOTED, " or "),
                         kn);
    if ((rc = _cic_get_int(x, t, "calibration", INT64_MIN, INT64_MAX, &cal, &have,
                           &node)))
        return rc;
    if (have && x->samples_ok && (cal < 0 || cal >= c->model.samples)) {
        _cic_pos(node, &l, &col);
        return _cic_fail(x, l, col,
                         "'calibration' in %s is %lld, out of range: "
                         "must be a sample index 0 .. %d (samples = %d)",
                         t->where, (long long)cal, c->model.samples - 1,
                         c->model.samples);
    }
    xf->calibration = (int)cal;
    return CIC_OK;
}

/* group: group-wise rotation (branch-rotate): the same orthogonal block of
 * this width (q: random, hadamard, regular-hadamard; a fast transform with
 * fast = true) on every block of every linear's input. Whether it fits
 * d_model and d_mlp is cic_xform_check's. */
static int _cic_adaln_group(cic_case_ctx *x, const cic_case_tab *t, cic_xform_spec *xf)
{
    const cic_toml_node *node;
    bool have;
    int rc, l, col;
    char kinds[160];
    xf->group = 0;
    if ((rc = _cic_get_intf(x, t, "group", 1, CIC_CASE_MAX_DIM, &xf->group, &have, &node)))
        return rc;
    if (have && !cic_xform_has_keys(xf->kind, CIC_XKEY_GROUP)) {
        _cic_pos(node, &l, &col);
        xf->group = 0;
        return _cic_fail(x, l, col, "'group' needs kind = %s (a rotation of "
                         "blocks of each linear's input; this transform is \"%s\")",
                         _cic_xform_kinds(kinds, sizeof kinds, has_key, CIC_XKEY_GROUP,
                                          CIC_KINDS_QUOTED, " or "),
                         CIC_XFORM_NAME[xf->kind]);
    }
    return CIC_OK;
}

/* The keys a kind refuses: 'after' and 'mistake' (the adaLN strategies;
 * the kinds that start from the original model). */
static int _cic_xform_refused(cic_case_ctx *x, const cic_case_tab *t, const cic_xform_spec *xf)
{
    const char *kn = CIC_XFORM_NAME[xf->kind];
    bool adaln = cic_xform_is_adaln(xf->kind);
    char kinds[256];
    int l, col;
    if (!cic_xform_has_keys(xf->kind, CIC_XKEY_AFTER) && _cic_find(t, "after", &l, &col))
        return _cic_fail(x, l, col,
                         "'after' is not allowed for kind = \"%s\": %s; remove 'after'", kn,
                         adaln ? "the adaLN strategies always start from the original dit "
                                 "model"
                               : "it always starts from the original model");
    if (!cic_xform_has_keys(xf->kind, CIC_XKEY_MISTAKE) && _cic_find(t, "mistake", &l, &col))
        return _cic_fail(x, l, col,
                         "'mistake' is not allowed for kind = \"%s\" (known "
                         "mistakes apply to %s%s)",
                         kn,
                         _cic_xform_kinds(kinds, sizeof kinds, has_key, CIC_XKEY_MISTAKE, 0,
                                          " and "),
                         adaln ? "; a static fold used for another sample is static-fold "
                                 "itself, expect broken"
                               : "");
    return CIC_OK;
}

/* The adaLN-only keys (stream, fast, calibration, group): refused on the
 * other kinds, read and checked for the adaLN strategies. xf->kind, q and
 * the block are already checked; xf->stream, fast and calibration hold
 * their defaults. */
static int _cic_load_adaln(cic_case_ctx *x, const cic_case *c, const cic_case_tab *t,
                           cic_xform_spec *xf)
{
    static const char *const ada_only[] = {"stream", "fast", "calibration", "group"};
    static const unsigned ada_key[] = {CIC_XKEY_STREAM, CIC_XKEY_FAST, CIC_XKEY_CALIBRATION,
                                       CIC_XKEY_GROUP};
    const char *kn = CIC_XFORM_NAME[xf->kind];
    const cic_toml_node *snode = NULL;
    bool have;
    int rc, l, col, v;
    char kinds[160];
    size_t k;

    if (!cic_xform_is_adaln(xf->kind)) {
        for (k = 0; k < CIC_CASE_LEN(ada_only); k++)
            if (_cic_find(t, ada_only[k], &l, &col))
                return _cic_fail(x, l, col,
                                 "'%s' is only allowed for the adaLN "
                                 "strategies of a dit block (%s); this "
                                 "transform is \"%s\"",
                                 ada_only[k],
                                 _cic_xform_kinds(kinds, sizeof kinds, has_key, ada_key[k], 0,
                                                  ", "),
                                 kn);
        return CIC_OK;
    }

    /* stream: how the rotated stream keeps LayerNorm exact. */
    v = CIC_STREAM_CENTERED;
    if ((rc = _cic_get_enum(x, t, "stream", CIC_STREAM_NAME, CIC_STREAM_COUNT,
                            &v, &have, &snode)))
        return rc;
    if (have && !cic_xform_has_keys(xf->kind, CIC_XKEY_STREAM)) {
        _cic_find(t, "stream", &l, &col);
        return _cic_fail(x, l, col,
                         "'stream' is not allowed for kind = \"%s\" "
                         "(its residual stream is not rotated); 'stream' "
                         "applies to %s",
                         kn,
                         _cic_xform_kinds(kinds, sizeof kinds, has_key, CIC_XKEY_STREAM, 0,
                                          ", "));
    }
    xf->stream = (enum cic_stream)v;

    if ((rc = _cic_adaln_fast(x, t, xf)) || (rc = _cic_xform_keys_rule(x, t, xf)))
        return rc;
    if ((rc = _cic_adaln_group(x, t, xf)))
        return rc;
    return _cic_adaln_calibration(x, c, t, xf);
}

/* The kind's own numeric keys (its descriptor's params) into xf->param,
 * their defaults when absent; refused on the other kinds. */
static int _cic_xform_params(cic_case_ctx *x, const cic_case_tab *t, cic_xform_spec *xf)
{
    const cic_xform_desc *d = cic_xform_desc_of(xf->kind);
    const cic_toml_node *node;
    int k, j, l, col, rc;
    for (k = 0; k < CIC_XFORM_COUNT; k++) {
        const cic_xform_desc *o = cic_xform_desc_of((enum cic_xform_kind)k);
        for (j = 0; o != d && j < CIC_XFORM_MAX_PARAMS && o->params[j].key; j++) {
            int i;
            bool mine = false;
            for (i = 0; i < CIC_XFORM_MAX_PARAMS && d->params[i].key && !mine; i++)
                mine = strcmp(d->params[i].key, o->params[j].key) == 0;
            if (!mine && _cic_find(t, o->params[j].key, &l, &col))
                return _cic_fail(x, l, col,
                                 "'%s' is only allowed for kind = \"%s\" (this transform is "
                                 "\"%s\")",
                                 o->params[j].key, o->name, d->name);
        }
    }
    for (j = 0; j < CIC_XFORM_MAX_PARAMS && d->params[j].key; j++) {
        const cic_xform_param *p = &d->params[j];
        bool have;
        xf->param[j] = p->def;
        if ((rc = _cic_get_num(x, t, p->key, false, p->hi, &xf->param[j], &have, &node)))
            return rc;
        if (have && xf->param[j] < p->lo) {
            _cic_pos(node, &l, &col);
            return _cic_fail(x, l, col, "'%s' = %g is out of range: %g .. %g", p->key,
                             xf->param[j], p->lo, p->hi);
        }
    }
    return CIC_OK;
}

/* Names of transforms, which also name dump files (original.safetensors,
 * outputs.safetensors, activations.safetensors) and rows in gates. */
static const char *const _cic_reserved_names[] = {"none", "*", "original", "outputs",
                                                  "activations"};

/* name: given, not reserved, a valid name, not that of an earlier entry. */
static int _cic_xform_name(cic_case_ctx *x, const cic_case *c, const cic_case_tab *t,
                           cic_xform_spec *xf, size_t i)
{
    const cic_toml_node *node;
    bool have;
    size_t j;
    int rc, l, col;
    char qb[96];

    if ((rc = _cic_get_str(x, t, "name", xf->name, sizeof xf->name, &have,
                           &node)))
        return rc;
    if (!have)
        return _cic_missing(x, t, "name", NULL);
    _cic_pos(node, &l, &col);
    for (j = 0; j < CIC_CASE_LEN(_cic_reserved_names); j++)
        if (strcmp(xf->name, _cic_reserved_names[j]) == 0) {
            xf->name[0] = '\0';
            return _cic_fail(x, l, col,
                             "transform name '%s' is reserved (in gates "
                             "\"none\" is the untransformed block and \"*\" "
                             "every row; 'original', 'outputs' and "
                             "'activations' name files of a dump); pick "
                             "another name",
                             _cic_reserved_names[j]);
        }
    if (!_cic_name_ok(xf->name)) {
        _cic_quote(qb, sizeof qb, xf->name, strlen(xf->name));
        xf->name[0] = '\0';
        return _cic_fail(x, l, col,
                         "transform name '%s' may only use letters, digits, "
                         "'_', '.' and '-', and may not start with '.'",
                         qb);
    }
    for (j = 0; j < i; j++)
        if (c->xf[j].name[0] && strcmp(c->xf[j].name, xf->name) == 0)
            return _cic_fail(x, l, col,
                             "duplicate transform name '%s' (first defined "
                             "by the [[transforms]] at line %d)",
                             xf->name, c->xf[j].line);
    return CIC_OK;
}

/* kind: required, and one the block allows. */
static int _cic_xform_kind(cic_case_ctx *x, const cic_case *c, const cic_case_tab *t,
                           cic_xform_spec *xf)
{
    const cic_toml_node *node;
    bool have;
    int rc, l, col, v = 0;

    if ((rc = _cic_get_enum(x, t, "kind", CIC_XFORM_NAME, CIC_XFORM_COUNT, &v,
                            &have, &node)))
        return rc;
    if (!have)
        return _cic_missing(x, t, "kind", _cic_block_kind_hint(c->model.block));
    xf->kind = (enum cic_xform_kind)v;
    _cic_pos(node, &l, &col);
    /* (an unknown block was reported: nothing to check against) */
    if (x->block_ok && (rc = _cic_check_kind_block(x, c, xf, l, col)))
        return rc;
    return CIC_OK;
}

/* hadamard_base: the base order K of a Hadamard Q (xf->q is loaded), only
 * with q = "hadamard". Whether K fits d_model (and d_mlp) is checked by
 * cic_xform_check, which knows the sizes of every sweep point. */
static int _cic_xform_hadamard_base(cic_case_ctx *x, const cic_case_tab *t,
                                    cic_xform_spec *xf)
{
    const cic_toml_node *node;
    bool have;
    int rc, l, col;

    if ((rc = _cic_get_intf(x, t, "hadamard_base", 0, CIC_CASE_MAX_DIM,
                            &xf->hadamard_base, &have, &node)))
        return rc;
    if (have && xf->q != CIC_Q_HADAMARD) {
        xf->hadamard_base = 0;
        _cic_pos(node, &l, &col);
        return _cic_fail(x, l, col,
                         "'hadamard_base' needs q = \"hadamard\" (it picks the "
                         "base order of the Hadamard matrix); this transform "
                         "has q = \"%s\": set q = \"hadamard\" or remove "
                         "'hadamard_base'",
                         CIC_Q_NAME[xf->q]);
    }
    return CIC_OK;
}

/* q, seed and hadamard_base: rotate and the adaLN strategies; q required
 * there. */
static int _cic_xform_q(cic_case_ctx *x, const cic_case *c, const cic_case_tab *t,
                        cic_xform_spec *xf)
{
    bool have;
    int rc, l, col, v = 0;
    int64_t s = 0;

    xf->q = CIC_Q_IDENTITY;
    xf->q_seed = 0;
    xf->hadamard_base = 0;
    if (!cic_xform_has_keys(xf->kind, CIC_XKEY_Q)) {
        static const char *const rot_only[] = {"q", "seed", "hadamard_base"};
        size_t k;
        char kinds[256];
        for (k = 0; k < CIC_CASE_LEN(rot_only); k++)
            if (_cic_find(t, rot_only[k], &l, &col))
                return _cic_fail(x, l, col,
                                 "'%s' is only allowed for kind = "
                                 "%s%s (this transform is "
                                 "\"%s\")",
                                 rot_only[k],
                                 _cic_xform_kinds(kinds, sizeof kinds, has_key_plain, CIC_XKEY_Q,
                                                  CIC_KINDS_QUOTED, ", "),
                                 any_adaln(has_key, CIC_XKEY_Q)
                                     ? " and the adaLN strategies of a dit block"
                                     : "",
                                 CIC_XFORM_NAME[xf->kind]);
        return CIC_OK;
    }
    {
        const cic_toml_node *qn = _cic_find(t, "q", &l, &col);
        const char *qs;
        size_t qlen;
        if (qn && cic_toml_get_string(qn, &qs, &qlen) == CIC_TOML_OK && _cic_q_is_file(qs, qlen)) {
            _cic_pos(qn, &l, &col);
            if ((rc = _cic_xform_q_file(x, c, t, xf, qs, qlen, l, col)))
                return rc;
            return CIC_OK; /* seed and hadamard_base mean nothing here */
        }
        if (_cic_find(t, "q_tensor", &l, &col))
            return _cic_fail(x, l, col, "'q_tensor' needs q = \"file:PATH\"");
    }
    if ((rc = _cic_get_enum(x, t, "q", CIC_Q_NAME, CIC_Q_FILE, &v, &have,
                            NULL)))
        return rc;
    if (!have) {
        char extra[128];
        snprintf(extra, sizeof extra,
                 " for kind = \"%s\" (identity, random, hadamard, regular-hadamard or "
                 "file:PATH)",
                 CIC_XFORM_NAME[xf->kind]);
        return _cic_missing(x, t, "q", extra);
    }
    xf->q = (enum cic_qkind)v;
    if (!takes_q(cic_xform_desc_of(xf->kind), (unsigned)xf->q)) {
        char kinds[256];
        _cic_find(t, "q", &l, &col);
        return _cic_fail(x, l, col,
                         "q = \"%s\" is for kind = %s%s (this transform is \"%s\": use q = "
                         "\"hadamard\")",
                         CIC_Q_NAME[xf->q],
                         _cic_xform_kinds(kinds, sizeof kinds, takes_q_plain, (unsigned)xf->q,
                                          CIC_KINDS_QUOTED, ", "),
                         any_adaln(takes_q, (unsigned)xf->q) ? " and the adaLN strategies" : "",
                         CIC_XFORM_NAME[xf->kind]);
    }
    if ((rc = _cic_get_int(x, t, "seed", 0, INT64_MAX, &s, NULL, NULL)))
        return rc;
    xf->q_seed = (uint64_t)s;
    return _cic_xform_hadamard_base(x, t, xf);
}

/* Every known mistake's name, each once: "none", then the kinds' in the
 * order of the list (the values the loader allows). Into names (room for
 * CIC_MAX_MISTAKE_NAMES), their number; ref[i] says whose names[i] is
 * (kind * CIC_XFORM_MAX_MISTAKES + its index), for has_mistake. */
#define CIC_MAX_MISTAKE_NAMES (1 + CIC_XFORM_COUNT * CIC_XFORM_MAX_MISTAKES)
static size_t mistake_names(const char **names, unsigned *ref)
{
    size_t n = 0, i;
    int k, m;
    names[n] = "none";
    ref[n++] = 0;
    for (k = 0; k < CIC_XFORM_COUNT; k++) {
        const cic_xform_desc *d = cic_xform_desc_of((enum cic_xform_kind)k);
        for (m = 0; m < CIC_XFORM_MAX_MISTAKES && d->mistakes[m]; m++) {
            bool dup = false;
            for (i = 0; i < n && !dup; i++)
                dup = strcmp(names[i], d->mistakes[m]) == 0;
            if (!dup) {
                names[n] = d->mistakes[m];
                ref[n++] = (unsigned)(k * CIC_XFORM_MAX_MISTAKES + m);
            }
        }
    }
    return n;
}

/* Whether kind k has the mistake ref (mistake_names) under its name. */
static bool has_mistake(const cic_xform_desc *k, unsigned ref)
{
    const char *name = cic_xform_desc_of((enum cic_xform_kind)(ref / CIC_XFORM_MAX_MISTAKES))
                           ->mistakes[ref % CIC_XFORM_MAX_MISTAKES];
    int m;
    for (m = 0; m < CIC_XFORM_MAX_MISTAKES && k->mistakes[m]; m++)
        if (strcmp(k->mistakes[m], name) == 0)
            return true;
    return false;
}

/* mistake: a known mistake, only with a kind it belongs to. */
static int _cic_xform_mistake(cic_case_ctx *x, const cic_case_tab *t,
                              cic_xform_spec *xf)
{
    const cic_toml_node *node;
    const char *names[CIC_MAX_MISTAKE_NAMES];
    unsigned ref[CIC_MAX_MISTAKE_NAMES];
    size_t n = mistake_names(names, ref);
    int rc, l, col, v = 0;
    char kinds[256];

    xf->mistake = CIC_MISTAKE_NONE;
    if ((rc = _cic_get_enum(x, t, "mistake", names, n, &v, NULL, &node)))
        return rc;
    if ((xf->mistake = cic_xform_mistake_find(xf->kind, names[v])) >= 0)
        return CIC_OK;
    xf->mistake = CIC_MISTAKE_NONE;
    _cic_pos(node, &l, &col);
    return _cic_fail(x, l, col,
                     "mistake \"%s\" only applies to kind = %s "
                     "(this transform is \"%s\")",
                     names[v],
                     _cic_xform_kinds(kinds, sizeof kinds, has_mistake, ref[v],
                                      CIC_KINDS_QUOTED, " or "),
                     CIC_XFORM_NAME[xf->kind]);
}

/* The message for an 'after' (quoted in qb) that names no earlier transform
 * of entry i: itself, a later entry, or nothing defined. */
static int _cic_after_fail(cic_case_ctx *x, const cic_case *c,
                           const cic_toml_node *arr, size_t i, const char *after,
                           const char *qb, int l, int col)
{
    size_t j, n = cic_toml_array_size(arr);
    int k;
    char hint[96], names[CIC_MAX_XFORMS][CIC_NAME_MAX];
    const char *earlier[CIC_MAX_XFORMS];
    char all[CIC_MAX_XFORMS * (CIC_NAME_MAX + 2) + 16];

    if (strcmp(after, c->xf[i].name) == 0)
        return _cic_fail(x, l, col, "transform '%s' cannot be applied after itself",
                         qb);
    for (j = i + 1; j < n; j++) {
        cic_case_tab lt = {cic_toml_array_at(arr, j), ""};
        const cic_toml_node *ln = _cic_find(&lt, "name", NULL, NULL);
        const char *s;
        size_t len;
        if (cic_toml_get_string(ln, &s, &len) == CIC_TOML_OK &&
            len == strlen(after) && memcmp(s, after, len) == 0) {
            int ll;
            _cic_pos(lt.tbl, &ll, NULL);
            return _cic_fail(x, l, col,
                             "'after' names '%s', which is defined later "
                             "(line %d); a transform can only be applied "
                             "after an earlier one: move it up",
                             qb, ll);
        }
    }
    for (k = 0; k < (int)i; k++) {
        cic_strlcpy(names[k], c->xf[k].name, CIC_NAME_MAX);
        earlier[k] = names[k];
    }
    if (i == 0)
        return _cic_fail(x, l, col,
                         "'after' names '%s', but no transform is defined "
                         "before this one",
                         qb);
    return _cic_fail(x, l, col,
                     "'after' names '%s', which is not an earlier "
                     "transform; defined so far: %s%s",
                     qb, _cic_join(all, sizeof all, earlier, i),
                     _cic_hint(hint, sizeof hint, after, strlen(after), earlier,
                               i));
}

/* after: an earlier transform (entry i of arr is c->xf[i]). */
static int _cic_xform_after(cic_case_ctx *x, cic_case *c, const cic_case_tab *t,
                            const cic_toml_node *arr, size_t i)
{
    cic_xform_spec *xf = &c->xf[i];
    const cic_toml_node *node;
    bool have;
    int rc, k, l, col;
    char after[CIC_NAME_MAX], qb[96];

    if ((rc = _cic_get_str(x, t, "after", after, sizeof after, &have, &node)))
        return rc;
    if (!have)
        return CIC_OK;
    _cic_pos(node, &l, &col);
    for (k = 0; k < (int)i; k++)
        if (strcmp(c->xf[k].name, after) == 0)
            xf->after = k;
    if (xf->after >= 0)
        return CIC_OK;
    _cic_quote(qb, sizeof qb, after, strlen(after));
    return _cic_after_fail(x, c, arr, i, after, qb, l, col);
}

/* [[transforms]] entry i (0-based); stops at its first error, after
 * reporting every unknown key. */
static int _cic_load_xform(cic_case_ctx *x, cic_case *c, const cic_toml_node *arr,
                           size_t i)
{
    cic_xform_spec *xf = &c->xf[i];
    cic_case_tab t;
    int rc, col, v, err0 = x->n_err;
    char where[64];

    t.tbl = cic_toml_array_at(arr, i);
    snprintf(where, sizeof where, "[[transforms]] entry %zu", i + 1);
    t.where = where;
    _cic_pos(t.tbl, &xf->line, &col);
    xf->stream = CIC_STREAM_CENTERED;
    xf->fast = false;
    xf->calibration = 0;
    xf->hadamard_base = 0;
    xf->after = -1;
    {
        const char *keys[CIC_CASE_LEN(_cic_xform_keys) + CIC_XFORM_COUNT * CIC_XFORM_MAX_PARAMS];
        _cic_check_keys(x, &t, keys, xform_keys(keys, CIC_CASE_LEN(keys)));
    }

    if ((rc = _cic_xform_name(x, c, &t, xf, i)) ||
        (rc = _cic_xform_kind(x, c, &t, xf)))
        return rc;
    v = CIC_TPREC_MPFR;
    if ((rc = _cic_get_enum(x, &t, "precision", CIC_TPREC_NAME, CIC_TPREC_COUNT,
                            &v, NULL, NULL)))
        return rc;
    xf->prec = (enum cic_tprec)v;
    if ((rc = _cic_xform_q(x, c, &t, xf)) || (rc = _cic_xform_refused(x, &t, xf)) ||
        (rc = _cic_load_adaln(x, c, &t, xf)) || (rc = _cic_xform_params(x, &t, xf)) ||
        (rc = _cic_xform_mistake(x, &t, xf)))
        return rc;

    /* expect: equivalent | broken (inconclusive is a verdict, never an
     * expectation). */
    /* a kind exact only on its calibration sample (static-fold) is
     * expected broken: the verdict is about the other samples. */
    v = cic_xform_desc_of(xf->kind)->expect_broken ? CIC_VERDICT_BROKEN
                                                   : CIC_VERDICT_EQUIVALENT;
    if ((rc = _cic_get_enum(x, &t, "expect", CIC_VERDICT_NAME, 2, &v, NULL,
                            NULL)))
        return rc;
    xf->expect = (enum cic_verdict)v;

    if ((rc = _cic_xform_after(x, c, &t, arr, i)))
        return rc;
    return _cic_status(x, err0);
}

int _cic_load_xforms(cic_case_ctx *x, cic_case *c, const cic_toml_node *arr)
{
    size_t i, n = cic_toml_array_size(arr);
    int err0 = x->n_err;
    c->n_xf = 0;
    for (i = 0; i < n; i++) {
        /* an entry with an error keeps its slot (and its name, when that
         * loaded) so later entries and gates can still refer to it */
        _cic_load_xform(x, c, arr, i);
        c->n_xf = (int)i + 1;
    }
    return _cic_status(x, err0);
}
