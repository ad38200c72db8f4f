/* SPDX-License-Identifier: MIT */
/* sweep.c: the [sweep] table and its points. The lists are checked value
 * by value (type, range, duplicates) and the point count against
 * max_points; each point (a mixed-radix index over the lists) is then
 * checked as the loader checks the scalar keys, with messages that name the
 * point and point at the list to blame. */
#include "case_int.h"

#include <assert.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Digits of a point index, least significant first (case.h). */
static const enum cic_sweep_axis _cic_sweep_digits[] = {
    CIC_AXIS_SEED,          CIC_AXIS_STD,       CIC_AXIS_D_COND,
    CIC_AXIS_SAMPLES,       CIC_AXIS_HEADS,     CIC_AXIS_OUTLIER_SCALE,
    CIC_AXIS_MPFR_PREC,     CIC_AXIS_LAYERS,    CIC_AXIS_TOKENS,
    CIC_AXIS_D_MODEL};
static_assert(CIC_CASE_LEN(_cic_sweep_digits) == CIC_AXIS_COUNT,
              "one digit per sweep axis");

/* Sweep values are doubles: seeds beyond 2^53 would not be exact. */
#define CIC_CASE_SWEEP_SEED_MAX ((int64_t)1 << 53)

/* Range of an integer axis (true), or false for the number axes
 * (outlier_scale, std: finite and > 0). Same ranges as the scalar keys. */
static bool _cic_axis_range(int a, int64_t *lo, int64_t *hi)
{
    switch (a) {
    case CIC_AXIS_D_MODEL:
    case CIC_AXIS_HEADS:
    case CIC_AXIS_D_COND:
        *lo = 1;
        *hi = CIC_CASE_MAX_DIM;
        return true;
    case CIC_AXIS_TOKENS:
        *lo = 1;
        *hi = CIC_CASE_MAX_TOKENS;
        return true;
    case CIC_AXIS_LAYERS:
        *lo = 1;
        *hi = CIC_CASE_MAX_LAYERS;
        return true;
    case CIC_AXIS_SEED:
        *lo = 0;
        *hi = CIC_CASE_SWEEP_SEED_MAX;
        return true;
    case CIC_AXIS_MPFR_PREC:
        *lo = 64;
        *hi = 1024;
        return true;
    case CIC_AXIS_SAMPLES:
        *lo = 1;
        *hi = CIC_MAX_SAMPLES;
        return true;
    default:
        *lo = 0;
        *hi = 0;
        return false;
    }
}

/* A value of axis a as the case file would spell it. */
static const char *_cic_axis_fmt(char *buf, size_t cap, int a, double v)
{
    int64_t lo, hi;
    if (_cic_axis_range(a, &lo, &hi) && v == floor(v) && fabs(v) < 1e18)
        snprintf(buf, cap, "%.0f", v);
    else {
        snprintf(buf, cap, "%.15g", v);
        if (strtod(buf, NULL) != v)
            snprintf(buf, cap, "%.17g", v);
    }
    return buf;
}

/* Value i (0-based) of the list of axis a, the node e at el:ec, into *out:
 * an integer in the axis' range, or a finite number > 0. */
static int _cic_sweep_value(cic_case_ctx *x, int a, const cic_toml_node *e,
                            size_t i, int el, int ec, double *out)
{
    const char *key = CIC_AXIS_NAME[a];
    int64_t lo, hi, iv;
    double v = 0;

    if (!_cic_axis_range(a, &lo, &hi)) {
        if (cic_toml_get_number(e, &v) != CIC_TOML_OK)
            return _cic_fail(x, el, ec,
                             "wrong type for value %zu of '%s' in "
                             "[sweep]: expected a number, got %s",
                             i + 1, key, cic_toml_type_name(cic_toml_node_type(e)));
        if (isnan(v))
            return _cic_fail(x, el, ec,
                             "value %zu of '%s' in [sweep] is nan; it "
                             "must be a number",
                             i + 1, key);
        if (!(v > 0))
            return _cic_fail(x, el, ec,
                             "value %zu of '%s' in [sweep] is %g; it "
                             "must be > 0",
                             i + 1, key, v);
        if (!isfinite(v))
            return _cic_fail(x, el, ec,
                             "value %zu of '%s' in [sweep] is %g; it "
                             "must be finite",
                             i + 1, key, v);
        *out = v;
        return CIC_OK;
    }
    if (cic_toml_get_int(e, &iv) != CIC_TOML_OK) {
        char extra[96] = "";
        double f = 0;
        if (cic_toml_get_float(e, &f) == CIC_TOML_OK && isfinite(f) &&
            f == floor(f) && fabs(f) < 1e15)
            snprintf(extra, sizeof extra, " (write %.0f, without a decimal point)",
                     f);
        return _cic_fail(x, el, ec,
                         "wrong type for value %zu of '%s' in "
                         "[sweep]: expected an integer, got %s%s",
                         i + 1, key, cic_toml_type_name(cic_toml_node_type(e)),
                         extra);
    }
    if (iv < lo || iv > hi) {
        if (a == CIC_AXIS_SEED && iv > hi)
            return _cic_fail(x, el, ec,
                             "value %zu of 'seed' in [sweep] is "
                             "%lld, out of range: a swept seed "
                             "must be 0 .. %lld (2^53, so it is "
                             "stored exactly)",
                             i + 1, (long long)iv, (long long)hi);
        return _cic_fail(x, el, ec,
                         "value %zu of '%s' in [sweep] is %lld, "
                         "out of range: must be %lld .. %lld",
                         i + 1, key, (long long)iv, (long long)lo, (long long)hi);
    }
    *out = (double)iv;
    return CIC_OK;
}

/* The list of axis a (the node list of [sweep], table t) into s: its
 * position, 1 .. CIC_SWEEP_MAX_VALUES values, each valid and distinct. */
static int _cic_sweep_list(cic_case_ctx *x, cic_sweep *s, const cic_case_tab *t,
                           int a, const cic_toml_node *list)
{
    const char *key = CIC_AXIS_NAME[a];
    int64_t lo, hi;
    size_t i, j, cnt;
    int rc, l, col;
    char vb[48];

    if (cic_toml_node_type(list) != CIC_TOML_ARRAY)
        return _cic_wrong_type(x, t, key, list,
                               _cic_axis_range(a, &lo, &hi) ? "a list of integers"
                                                            : "a list of numbers");
    _cic_pos(list, &l, &col);
    s->line[a] = l;
    s->col[a] = col;
    cnt = cic_toml_array_size(list);
    if (cnt == 0)
        return _cic_fail(x, l, col,
                         "'%s' in [sweep] is an empty list; give at "
                         "least one value (or remove the key)",
                         key);
    if (cnt > CIC_SWEEP_MAX_VALUES) {
        _cic_pos(cic_toml_array_at(list, CIC_SWEEP_MAX_VALUES), &l, &col);
        return _cic_fail(x, l, col,
                         "'%s' in [sweep] has %zu values; a sweep list "
                         "holds at most %d",
                         key, cnt, CIC_SWEEP_MAX_VALUES);
    }
    for (i = 0; i < cnt; i++) {
        const cic_toml_node *e = cic_toml_array_at(list, i);
        double v = 0;
        int el, ec;
        _cic_pos(e, &el, &ec);
        if (el <= 0) {
            el = l;
            ec = col;
        }
        if ((rc = _cic_sweep_value(x, a, e, i, el, ec, &v)))
            return rc;
        for (j = 0; j < i; j++)
            if (s->v[a][j] == v)
                return _cic_fail(x, el, ec,
                                 "'%s' in [sweep] lists %s twice (values "
                                 "%zu and %zu); the values of a sweep list "
                                 "must be distinct",
                                 key, _cic_axis_fmt(vb, sizeof vb, a, v), j + 1,
                                 i + 1);
        s->v[a][i] = v;
    }
    s->n[a] = (int)cnt;
    return CIC_OK;
}

/* [sweep]: lists checked value by value (type, range, duplicates), the
 * point count against max_points. Runs before [model], whose required keys
 * a list may stand in for. */
int _cic_load_sweep(cic_case_ctx *x, cic_case *c, const cic_toml_node *st)
{
    cic_sweep *s = &c->sweep;
    cic_case_tab t = {st, "[sweep]"};
    const char *allowed[CIC_AXIS_COUNT + 1];
    int64_t maxp = CIC_SWEEP_DEFAULT_MAX_POINTS, points = 1;
    int rc, a;

    memset(s, 0, sizeof *s);
    s->points = 1;
    s->max_points = CIC_SWEEP_DEFAULT_MAX_POINTS;
    if (!st)
        return CIC_OK;
    s->on = true;
    _cic_pos(st, &s->table_line, &s->table_col);
    for (a = 0; a < CIC_AXIS_COUNT; a++)
        allowed[a] = CIC_AXIS_NAME[a];
    allowed[CIC_AXIS_COUNT] = "max_points";
    if ((rc = _cic_check_keys(x, &t, allowed, CIC_CASE_LEN(allowed))))
        return rc;
    if ((rc = _cic_get_int(x, &t, "max_points", 1, CIC_SWEEP_MAX_POINTS_LIMIT,
                           &maxp, NULL, NULL)))
        return rc;
    s->max_points = (long)maxp;

    for (a = 0; a < CIC_AXIS_COUNT; a++) {
        const cic_toml_node *list = _cic_find(&t, CIC_AXIS_NAME[a], NULL, NULL);
        if (!list)
            continue;
        if ((rc = _cic_sweep_list(x, s, &t, a, list)))
            return rc;
        points *= (int64_t)s->n[a]; /* <= 64^10 = 2^60 */
    }
    s->points = (long)points;
    if (points > maxp)
        return _cic_fail(x, s->table_line, s->table_col,
                         "sweep has %lld points, more than max_points = %lld; "
                         "raise max_points to allow it",
                         (long long)points, (long long)maxp);
    return CIC_OK;
}

/* Where to point for a point's mistake: the list of the first swept axis of
 * axes[], else the [sweep] table. */
static void _cic_sweep_pos(const cic_case *c, const enum cic_sweep_axis *axes,
                           size_t n, int *l, int *col)
{
    size_t k;
    for (k = 0; k < n; k++)
        if (c->sweep.n[axes[k]] > 0) {
            *l = c->sweep.line[axes[k]];
            *col = c->sweep.col[axes[k]];
            return;
        }
    *l = c->sweep.table_line;
    *col = c->sweep.table_col;
}

#define CIC_CASE_SWEEP_POS(c, l, col, ...)                                     \
    do {                                                                       \
        static const enum cic_sweep_axis ax_[] = {__VA_ARGS__};                \
        _cic_sweep_pos((c), ax_, CIC_CASE_LEN(ax_), (l), (col));               \
    } while (0)

/* The digits of point i over the lists of s (mixed radix, least significant
 * first in the order of _cic_sweep_digits); 0 for an axis not swept. */
static void _cic_point_digits(const cic_sweep *s, long i, int *digit)
{
    long r = i;
    int k, a;
    for (k = 0; k < CIC_AXIS_COUNT; k++) {
        a = _cic_sweep_digits[k];
        digit[a] = 0;
        if (s->n[a] > 0) {
            digit[a] = (int)(r % s->n[a]);
            r /= s->n[a];
        }
    }
}

/* "sweep point 3 of 6 (d_model = 32, seed = 2): " into pd, the prefix of
 * every message about point i. */
static void _cic_point_label(char *pd, size_t cap, const cic_sweep *s, long i,
                             const int *digit)
{
    char vb[48];
    size_t o;
    int a, k;
    o = (size_t)snprintf(pd, cap, "sweep point %ld of %ld (", i, s->points);
    for (a = 0, k = 0; a < CIC_AXIS_COUNT && o < cap; a++) {
        if (s->n[a] <= 0)
            continue;
        o += (size_t)snprintf(pd + o, cap - o, "%s%s = %s", k++ ? ", " : "",
                              CIC_AXIS_NAME[a],
                              _cic_axis_fmt(vb, sizeof vb, a, s->v[a][digit[a]]));
    }
    if (o < cap)
        snprintf(pd + o, cap - o, "): ");
}

/* The values of the point (digit[] over c's lists) into *m and *prec, each
 * range-checked again, and the defaults that follow d_model. */
static int _cic_point_set(cic_case_ctx *x, const cic_case *c, const int *digit,
                          const char *pd, cic_model_cfg *m, int *prec)
{
    const cic_sweep *s = &c->sweep;
    int a, l, col;

    for (a = 0; a < CIC_AXIS_COUNT; a++) {
        int64_t lo, hi;
        double v;
        if (s->n[a] <= 0)
            continue;
        v = s->v[a][digit[a]];
        l = s->line[a];
        col = s->col[a];
        if (_cic_axis_range(a, &lo, &hi)) {
            if (!(v == floor(v) && v >= (double)lo && v <= (double)hi))
                return _cic_fail(x, l, col,
                                 "%s'%s' = %g is out of range: must be an "
                                 "integer %lld .. %lld",
                                 pd, CIC_AXIS_NAME[a], v, (long long)lo,
                                 (long long)hi);
        } else if (!(v > 0 && isfinite(v))) {
            return _cic_fail(x, l, col,
                             "%s'%s' = %g is out of range: must be a finite "
                             "number > 0",
                             pd, CIC_AXIS_NAME[a], v);
        }
        switch ((enum cic_sweep_axis)a) {
        case CIC_AXIS_D_MODEL:
            m->d_model = (int)v;
            break;
        case CIC_AXIS_TOKENS:
            m->tokens = (int)v;
            break;
        case CIC_AXIS_LAYERS:
            m->layers = (int)v;
            break;
        case CIC_AXIS_SEED:
            m->seed = (uint64_t)v;
            break;
        case CIC_AXIS_MPFR_PREC:
            *prec = (int)v;
            break;
        case CIC_AXIS_OUTLIER_SCALE:
            m->outlier_scale = v;
            break;
        case CIC_AXIS_HEADS:
            m->heads = (int)v;
            break;
        case CIC_AXIS_SAMPLES:
            m->samples = (int)v;
            break;
        case CIC_AXIS_D_COND:
            if (!_cic_block_has_cond(m->block))
                return _cic_fail(x, l, col,
                                 "'d_cond' in [sweep] is only allowed for "
                                 "block = \"dit\" (this model is \"%s\")",
                                 CIC_BLOCK_NAME[m->block]);
            m->d_cond = (int)v;
            break;
        case CIC_AXIS_STD:
            m->std = v;
            break;
        default:
            break;
        }
    }
    /* Defaults that follow d_model. */
    if (s->d_out_default)
        m->d_out = m->d_model;
    if (s->kv_heads_default)
        m->kv_heads = m->heads;
    if (_cic_block_has_cond(m->block) && s->d_cond_default &&
        s->n[CIC_AXIS_D_COND] == 0)
        m->d_cond = m->d_model;
    return CIC_OK;
}

/* The rules that combine keys, for the point's model m at prec (pd its
 * label): as the loader checks a case without a sweep. */
static int _cic_point_rules(cic_case_ctx *x, const cic_case *c, const char *pd,
                            cic_model_cfg *m, int prec)
{
    const cic_sweep *s = &c->sweep;
    int k, l, col;

    (void)prec; /* its memory is the run's guard's */
    if (m->heads < 1 || m->d_model % m->heads != 0) {
        CIC_CASE_SWEEP_POS(c, &l, &col, CIC_AXIS_HEADS, CIC_AXIS_D_MODEL);
        return _cic_fail(x, l, col,
                         "%sd_model = %d is not divisible by heads = %d (the "
                         "head size d_model / heads must be an integer)",
                         pd, m->d_model, m->heads);
    }
    if (m->kv_heads < 1 || m->heads % m->kv_heads != 0) {
        CIC_CASE_SWEEP_POS(c, &l, &col, CIC_AXIS_HEADS);
        return _cic_fail(x, l, col, "%skv_heads = %d does not divide heads = %d", pd,
                         m->kv_heads, m->heads);
    }
    if (m->rope != CIC_ROPE_NONE && (m->d_model / m->heads) % 2 != 0) {
        CIC_CASE_SWEEP_POS(c, &l, &col, CIC_AXIS_HEADS, CIC_AXIS_D_MODEL);
        return _cic_fail(x, l, col,
                         "%srope = \"%s\" needs an even head size, and d_model / heads = "
                         "%d / %d is odd",
                         pd, CIC_ROPE_NAME[m->rope], m->d_model, m->heads);
    }
    if (!m->checkpoint[0]) { /* a checkpoint's MLP width is its intermediate_size */
        double wd = m->mlp_ratio * (double)m->d_model;
        if (wd != floor(wd) || wd < 1 || wd > (double)INT_MAX) {
            CIC_CASE_SWEEP_POS(c, &l, &col, CIC_AXIS_D_MODEL);
            return _cic_fail(x, l, col,
                             "%smlp_ratio * d_model = %g * %d = %.17g is not a "
                             "positive integer (the MLP width must be whole)",
                             pd, m->mlp_ratio, m->d_model, wd);
        }
        m->d_mlp = (int)wd;
    }
    if ((int64_t)m->tokens * m->samples > CIC_CASE_MAX_ROWS) {
        CIC_CASE_SWEEP_POS(c, &l, &col, CIC_AXIS_SAMPLES, CIC_AXIS_TOKENS);
        return _cic_fail(x, l, col,
                         "%stokens * samples = %d * %d = %lld rows exceeds the "
                         "limit of %d; reduce tokens or samples",
                         pd, m->tokens, m->samples,
                         (long long)m->tokens * m->samples, CIC_CASE_MAX_ROWS);
    }
    if (m->outlier_channels > m->d_model) {
        CIC_CASE_SWEEP_POS(c, &l, &col, CIC_AXIS_D_MODEL);
        return _cic_fail(x, l, col,
                         "%soutlier_channels = %d in [model.weights] exceeds "
                         "d_model = %d",
                         pd, m->outlier_channels, m->d_model);
    }
    if (s->n[CIC_AXIS_STD] > 0 || s->n[CIC_AXIS_OUTLIER_SCALE] > 0) {
        int rc;
        CIC_CASE_SWEEP_POS(c, &l, &col, CIC_AXIS_STD, CIC_AXIS_OUTLIER_SCALE);
        if ((rc = _cic_check_scale(x, m, l, col, pd)))
            return rc;
    }
    for (k = 0; k < c->n_xf && k < CIC_MAX_XFORMS; k++) {
        const cic_xform_spec *xf = &c->xf[k];
        if (cic_xform_has_keys(xf->kind, CIC_XKEY_CALIBRATION) &&
            xf->calibration >= m->samples) {
            CIC_CASE_SWEEP_POS(c, &l, &col, CIC_AXIS_SAMPLES);
            return _cic_fail(x, l, col,
                             "%stransform '%s' has calibration = %d, but the "
                             "sample index must be 0 .. %d (samples = %d)",
                             pd, xf->name, xf->calibration, m->samples - 1,
                             m->samples);
        }
    }
    /* the memory a point needs is the run's --max-memory guard's
     * (src/pipeline/pipeline.c), not a fixed limit here */
    return CIC_OK;
}

/* Point i of c's sweep (0 <= i < the product of the list lengths) into *m
 * and *prec, checked as the loader checks the scalar keys: ranges,
 * d_model % heads, an integer MLP width, rows, outlier_channels <= d_model,
 * static-fold calibration < samples, d_cond only for dit, the memory
 * estimate. Errors point at the relevant list. */
int _cic_sweep_check(cic_case_ctx *x, const cic_case *c, long i,
                     cic_model_cfg *m, int *prec)
{
    int digit[CIC_AXIS_COUNT], rc;
    char pd[400];

    *m = c->model;
    *prec = c->mpfr_prec;
    _cic_point_digits(&c->sweep, i, digit);
    _cic_point_label(pd, sizeof pd, &c->sweep, i, digit);
    if ((rc = _cic_point_set(x, c, digit, pd, m, prec)))
        return rc;
    return _cic_point_rules(x, c, pd, m, *prec);
}

/* Every point of a sweep must be a valid case (points <= max_points,
 * at most CIC_SWEEP_MAX_POINTS_LIMIT); the case itself is point 0. */
int _cic_sweep_check_all(cic_case_ctx *x, cic_case *c, const cic_toml_node *st)
{
    cic_case_tab stab = {st, "[sweep]"};
    cic_model_cfg pm;
    int rc, pprec, l, col;
    long i;
    if (c->sweep.n[CIC_AXIS_D_COND] > 0 && !_cic_block_has_cond(c->model.block) &&
        _cic_find(&stab, "d_cond", &l, &col))
        return _cic_fail(x, l, col,
                         "'d_cond' is only allowed for block = \"dit\" "
                         "(this model is \"%s\"); remove it from [sweep]",
                         CIC_BLOCK_NAME[c->model.block]);
    for (i = 0; i < c->sweep.points; i++)
        if ((rc = _cic_sweep_check(x, c, i, &pm, &pprec)))
            return rc;
    rc = _cic_sweep_check(x, c, 0, &pm, &pprec);
    CIC_ASSERT(rc == CIC_OK);
    c->model = pm;
    c->mpfr_prec = pprec;
    return CIC_OK;
}

/* cic_case_sweep_point with the errors reported to x. */
static int _cic_sweep_point(cic_case_ctx *x, cic_case *out, const cic_case *c, long i)
{
    cic_model_cfg m;
    int prec, rc, a;
    long points = 1;
    if (!c->sweep.on) {
        if (i != 0)
            return _cic_fail(x, 0, 0,
                             "the case has no sweep: point %ld does not exist "
                             "(there is only point 0)",
                             i);
        if (out != c)
            *out = *c;
        return CIC_OK;
    }
    for (a = 0; a < CIC_AXIS_COUNT; a++) {
        int n = c->sweep.n[a];
        if (n < 0 || n > CIC_SWEEP_MAX_VALUES)
            return _cic_fail(x, c->sweep.line[a], c->sweep.col[a],
                             "'%s' in [sweep] has %d values; a sweep list "
                             "holds 1 .. %d",
                             CIC_AXIS_NAME[a], n, CIC_SWEEP_MAX_VALUES);
        if (n > 0)
            points *= n;
    }
    if (i < 0 || i >= points)
        return _cic_fail(x, c->sweep.table_line, c->sweep.table_col,
                         "sweep point %ld does not exist (the sweep has %ld "
                         "points: 0 .. %ld)",
                         i, points, points - 1);
    if ((rc = _cic_sweep_check(x, c, i, &m, &prec)))
        return rc;
    if (out != c)
        *out = *c;
    out->model = m;
    out->mpfr_prec = prec;
    /* A point is a plain case. */
    memset(&out->sweep, 0, sizeof out->sweep);
    out->sweep.points = 1;
    out->sweep.max_points = CIC_SWEEP_DEFAULT_MAX_POINTS;
    return CIC_OK;
}

int cic_case_sweep_point(cic_case *out, const cic_case *c, long i, cic_diag *d)
{
    cic_case_ctx x;
    int rc;
    CIC_ASSERT(out && c);
    memset(&x, 0, sizeof x);
    x.d = d;
    x.file = c->path[0] ? c->path : "<case>";
    rc = _cic_sweep_point(&x, out, c, i);
    _cic_flush(&x);
    return rc;
}
