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

/* Allowed keys, in the order they are documented. */
static const char *const _cic_xform_keys[] = {
    "name",    "kind",   "after",  "precision", "q",          "seed", "hadamard_base", "q_tensor",
    "mistake", "expect", "stream", "fast",      "calibration", "group"};

bool _cic_is_adaln(enum cic_xform_kind k)
{
    return k == CIC_XFORM_STATIC_FOLD || k == CIC_XFORM_ONLINE_UNROTATE ||
           k == CIC_XFORM_PER_SAMPLE_FOLD || k == CIC_XFORM_BRANCH_ROTATE;
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

    node = _cic_find(t, "fast", &l, &col);
    if (node && xf->kind != CIC_XFORM_ONLINE_UNROTATE &&
        xf->kind != CIC_XFORM_BRANCH_ROTATE)
        return _cic_fail(x, l, col,
                         "'fast' is only allowed for kind = \"online-unrotate\" "
                         "or \"branch-rotate\" (this transform is \"%s\"; "
                         "it does no online rotation)",
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
        if (xf->kind == CIC_XFORM_ONLINE_UNROTATE &&
            xf->stream != CIC_STREAM_CENTERED)
            return _cic_fail(x, l, col,
                             "fast = true on kind = \"online-unrotate\" needs "
                             "stream = \"centered\" (a mean-preserving Q is "
                             "not a single fast Hadamard); this transform has "
                             "stream = \"%s\"",
                             CIC_STREAM_NAME[xf->stream]);
    }
    return CIC_OK;
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

    node = _cic_find(t, "calibration", &l, &col);
    if (node && xf->kind != CIC_XFORM_STATIC_FOLD)
        return _cic_fail(x, l, col,
                         "'calibration' is only allowed for kind = "
                         "\"static-fold\" (this transform is \"%s\")",
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

/* The adaLN-only keys (stream, fast, calibration) and the keys adaLN kinds
 * refuse (after, mistake). xf->kind, q and the block are already checked;
 * xf->stream, fast and calibration hold their defaults. */
/* group: group-wise rotation (branch-rotate): the same orthogonal block of
 * this width (q: random, hadamard, regular-hadamard; a fast transform with
 * fast = true) on every block of every linear's input. Whether it fits
 * d_model and d_mlp is cic_xform_check's. */
static int _cic_adaln_group(cic_case_ctx *x, const cic_case_tab *t, cic_xform_spec *xf)
{
    const cic_toml_node *node;
    bool have;
    int rc, l, col;
    xf->group = 0;
    if ((rc = _cic_get_intf(x, t, "group", 1, CIC_CASE_MAX_DIM, &xf->group, &have, &node)))
        return rc;
    if (have && xf->kind != CIC_XFORM_BRANCH_ROTATE) {
        _cic_pos(node, &l, &col);
        xf->group = 0;
        return _cic_fail(x, l, col, "'group' needs kind = \"branch-rotate\" (a rotation of "
                         "blocks of each linear's input; this transform is \"%s\")",
                         CIC_XFORM_NAME[xf->kind]);
    }
    return CIC_OK;
}

static int _cic_load_adaln(cic_case_ctx *x, const cic_case *c, const cic_case_tab *t,
                           cic_xform_spec *xf)
{
    const char *kn = CIC_XFORM_NAME[xf->kind];
    const cic_toml_node *snode = NULL;
    bool have, adaln = _cic_is_adaln(xf->kind);
    int rc, l, col, v;

    if (!adaln) {
        static const char *const ada_only[] = {"stream", "fast", "calibration", "group"};
        size_t k;
        for (k = 0; k < CIC_CASE_LEN(ada_only); k++)
            if (_cic_find(t, ada_only[k], &l, &col))
                return _cic_fail(x, l, col,
                                 "'%s' is only allowed for the adaLN "
                                 "strategies of a dit block (%s); this "
                                 "transform is \"%s\"",
                                 ada_only[k],
                                 k == 0 ? "static-fold, online-unrotate, "
                                          "per-sample-fold"
                                 : k == 1 ? "online-unrotate, branch-rotate"
                                 : k == 3 ? "branch-rotate"
                                          : "static-fold",
                                 kn);
        return CIC_OK;
    }

    /* Keys an adaLN strategy refuses. */
    if (_cic_find(t, "after", &l, &col))
        return _cic_fail(x, l, col,
                         "'after' is not allowed for kind = \"%s\": the adaLN "
                         "strategies always start from the original dit "
                         "model; remove 'after'",
                         kn);
    if (_cic_find(t, "mistake", &l, &col))
        return _cic_fail(x, l, col,
                         "'mistake' is not allowed for kind = \"%s\" (known "
                         "mistakes apply to fuse-layernorm, rotate and "
                         "fold-rmsnorm-gamma; a static fold used for another "
                         "sample is static-fold itself, expect broken)",
                         kn);

    /* stream: how the rotated stream keeps LayerNorm exact. */
    v = CIC_STREAM_CENTERED;
    if ((rc = _cic_get_enum(x, t, "stream", CIC_STREAM_NAME, CIC_STREAM_COUNT,
                            &v, &have, &snode)))
        return rc;
    if (have && xf->kind == CIC_XFORM_BRANCH_ROTATE) {
        _cic_find(t, "stream", &l, &col);
        return _cic_fail(x, l, col,
                         "'stream' is not allowed for kind = \"branch-rotate\" "
                         "(its residual stream is not rotated); 'stream' "
                         "applies to static-fold, online-unrotate, "
                         "per-sample-fold");
    }
    xf->stream = (enum cic_stream)v;

    if ((rc = _cic_adaln_fast(x, t, xf)))
        return rc;
    if ((rc = _cic_adaln_group(x, t, xf)))
        return rc;
    return _cic_adaln_calibration(x, c, t, xf);
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
    if (xf->kind != CIC_XFORM_ROTATE && xf->kind != CIC_XFORM_ROTATE_HEADS &&
        xf->kind != CIC_XFORM_ONLINE_DOWN && xf->kind != CIC_XFORM_ONLINE_QK &&
        !_cic_is_adaln(xf->kind)) {
        static const char *const rot_only[] = {"q", "seed", "hadamard_base"};
        size_t k;
        for (k = 0; k < CIC_CASE_LEN(rot_only); k++)
            if (_cic_find(t, rot_only[k], &l, &col))
                return _cic_fail(x, l, col,
                                 "'%s' is only allowed for kind = "
                                 "\"rotate\", \"rotate-heads\", \"online-down\", \"online-qk\" and the "
                                 "adaLN strategies "
                                 "of a dit block (this transform is "
                                 "\"%s\")",
                                 rot_only[k], CIC_XFORM_NAME[xf->kind]);
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
    if (xf->q == CIC_Q_REGULAR && xf->kind != CIC_XFORM_ROTATE && !_cic_is_adaln(xf->kind)) {
        _cic_find(t, "q", &l, &col);
        return _cic_fail(x, l, col,
                         "q = \"regular-hadamard\" is for kind = \"rotate\" and the adaLN "
                         "strategies (this transform is \"%s\": use q = \"hadamard\")",
                         CIC_XFORM_NAME[xf->kind]);
    }
    if ((rc = _cic_get_int(x, t, "seed", 0, INT64_MAX, &s, NULL, NULL)))
        return rc;
    xf->q_seed = (uint64_t)s;
    return _cic_xform_hadamard_base(x, t, xf);
}

/* mistake: a known mistake, only with the kind it belongs to. */
static int _cic_xform_mistake(cic_case_ctx *x, const cic_case_tab *t,
                              cic_xform_spec *xf)
{
    const cic_toml_node *node;
    enum cic_xform_kind need;
    int rc, l, col, v = CIC_MISTAKE_NONE;

    if ((rc = _cic_get_enum(x, t, "mistake", CIC_MISTAKE_NAME, CIC_MISTAKE_COUNT,
                            &v, NULL, &node)))
        return rc;
    xf->mistake = (enum cic_mistake)v;
    if (xf->mistake == CIC_MISTAKE_NONE)
        return CIC_OK;
    need = xf->mistake == CIC_MISTAKE_SKIP_MEAN_BAKE ? CIC_XFORM_FUSE_LAYERNORM
           : xf->mistake == CIC_MISTAKE_SKIP_ATTN_OUT ? CIC_XFORM_ROTATE
           : xf->mistake == CIC_MISTAKE_SKIP_OUT_PROJ ? CIC_XFORM_ROTATE_HEADS
           : xf->mistake == CIC_MISTAKE_PER_QUERY_HEAD ? CIC_XFORM_ROTATE_HEADS
           : xf->mistake == CIC_MISTAKE_SKIP_ONLINE   ? CIC_XFORM_ONLINE_DOWN
           : xf->mistake == CIC_MISTAKE_BEFORE_ROPE   ? CIC_XFORM_ONLINE_QK
                                                      : CIC_XFORM_FOLD_RMSNORM_GAMMA;
    if (xf->kind != need) {
        _cic_pos(node, &l, &col);
        return _cic_fail(x, l, col,
                         "mistake \"%s\" only applies to kind = \"%s\" "
                         "(this transform is \"%s\")",
                         CIC_MISTAKE_NAME[xf->mistake], CIC_XFORM_NAME[need],
                         CIC_XFORM_NAME[xf->kind]);
    }
    return CIC_OK;
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
    _cic_check_keys(x, &t, _cic_xform_keys, CIC_CASE_LEN(_cic_xform_keys));

    if ((rc = _cic_xform_name(x, c, &t, xf, i)) ||
        (rc = _cic_xform_kind(x, c, &t, xf)))
        return rc;
    v = CIC_TPREC_MPFR;
    if ((rc = _cic_get_enum(x, &t, "precision", CIC_TPREC_NAME, CIC_TPREC_COUNT,
                            &v, NULL, NULL)))
        return rc;
    xf->prec = (enum cic_tprec)v;
    if ((rc = _cic_xform_q(x, c, &t, xf)) || (rc = _cic_load_adaln(x, c, &t, xf)) ||
        (rc = _cic_xform_mistake(x, &t, xf)))
        return rc;

    /* expect: equivalent | broken (inconclusive is a verdict, never an
     * expectation). */
    /* static-fold is exact only on its calibration sample; the verdict
     * is about the other samples. */
    v = xf->kind == CIC_XFORM_STATIC_FOLD ? CIC_VERDICT_BROKEN
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
