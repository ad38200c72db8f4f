/* SPDX-License-Identifier: MIT */
/* get.c: typed getters over a TOML table. Each key is looked up by name,
 * its type checked (a type error names both types), its value range-checked
 * as int64 or double before it is narrowed, and strings refused when empty,
 * too long or holding control characters. Unknown keys are listed with the
 * allowed ones and the closest spelling; a key reported as a misspelling is
 * not reported missing as well. */
#include "case_int.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* Find key; value and the key's position. */
const cic_toml_node *_cic_find(const cic_case_tab *t, const char *key,
                               int *kl, int *kc)
{
    size_t i, n = cic_toml_table_size(t->tbl);
    for (i = 0; i < n; i++) {
        const char *k;
        size_t klen;
        const cic_toml_node *v;
        int l, c;
        cic_toml_table_entry(t->tbl, i, &k, &klen, &v, &l, &c);
        if (klen == strlen(key) && memcmp(k, key, klen) == 0) {
            if (kl)
                *kl = l;
            if (kc)
                *kc = c;
            return v;
        }
    }
    return NULL;
}

void _cic_pos(const cic_toml_node *n, int *l, int *c)
{
    cic_toml_node_pos(n, l, c);
}

int _cic_wrong_type(cic_case_ctx *x, const cic_case_tab *t, const char *key,
                    const cic_toml_node *v, const char *want)
{
    int l, c;
    char extra[96] = "";
    _cic_pos(v, &l, &c);
    if (strcmp(want, "an integer") == 0 &&
        cic_toml_node_type(v) == CIC_TOML_FLOAT) {
        double f = 0;
        cic_toml_get_float(v, &f);
        if (isfinite(f) && f == floor(f) && fabs(f) < 1e15)
            snprintf(extra, sizeof extra, " (write %.0f, without a decimal point)",
                     f);
    }
    return _cic_fail(x, l, c, "wrong type for '%s' in %s: expected %s, got %s%s",
                     key, t->where, want,
                     cic_toml_type_name(cic_toml_node_type(v)), extra);
}

/* Integer in [lo, hi] (checked as int64 before narrowing). */
int _cic_get_int(cic_case_ctx *x, const cic_case_tab *t, const char *key,
                 int64_t lo, int64_t hi, int64_t *out, bool *present,
                 const cic_toml_node **node)
{
    int64_t v;
    const cic_toml_node *n = _cic_find(t, key, NULL, NULL);
    if (present)
        *present = n != NULL;
    if (node)
        *node = n;
    if (!n)
        return CIC_OK;
    if (cic_toml_get_int(n, &v) != CIC_TOML_OK)
        return _cic_wrong_type(x, t, key, n, "an integer");
    if (v < lo || v > hi) {
        int l, c;
        _cic_pos(n, &l, &c);
        return _cic_fail(x, l, c,
                         "'%s' in %s is %lld, out of range: must be %lld .. %lld",
                         key, t->where, (long long)v, (long long)lo,
                         (long long)hi);
    }
    *out = v;
    return CIC_OK;
}

/* Narrowing wrapper for int fields (hi must fit in int). */
int _cic_get_intf(cic_case_ctx *x, const cic_case_tab *t, const char *key,
                  int lo, int hi, int *out, bool *present,
                  const cic_toml_node **node)
{
    int64_t v = *out;
    int rc = _cic_get_int(x, t, key, lo, hi, &v, present, node);
    if (rc == CIC_OK)
        *out = (int)v; /* in [lo, hi], so in int range */
    return rc;
}

/* Number (float, or integer accepted) that is finite and > 0 (positive) or
 * >= 0; NaN is always refused. hi is an inclusive upper bound (INFINITY for
 * none). */
int _cic_get_num(cic_case_ctx *x, const cic_case_tab *t, const char *key,
                 bool positive, double hi, double *out, bool *present,
                 const cic_toml_node **node)
{
    double v;
    int l, c;
    const cic_toml_node *n = _cic_find(t, key, NULL, NULL);
    if (present)
        *present = n != NULL;
    if (node)
        *node = n;
    if (!n)
        return CIC_OK;
    if (cic_toml_get_number(n, &v) != CIC_TOML_OK)
        return _cic_wrong_type(x, t, key, n, "a number");
    _cic_pos(n, &l, &c);
    if (isnan(v))
        return _cic_fail(x, l, c, "'%s' in %s is nan; it must be a number", key,
                         t->where);
    if (positive ? !(v > 0) : !(v >= 0))
        return _cic_fail(x, l, c, "'%s' in %s is %g; it must be %s", key,
                         t->where, v, positive ? "> 0" : ">= 0");
    if (!isfinite(v) || v > hi) {
        if (isfinite(hi))
            return _cic_fail(x, l, c, "'%s' in %s is %g; it must be at most %g",
                             key, t->where, v, hi);
        return _cic_fail(x, l, c, "'%s' in %s is %g; it must be finite", key,
                         t->where, v);
    }
    *out = v;
    return CIC_OK;
}

int _cic_get_bool(cic_case_ctx *x, const cic_case_tab *t, const char *key,
                  bool *out)
{
    const cic_toml_node *n = _cic_find(t, key, NULL, NULL);
    if (!n)
        return CIC_OK;
    if (cic_toml_get_bool(n, out) != CIC_TOML_OK)
        return _cic_wrong_type(x, t, key, n, "a boolean (true or false)");
    return CIC_OK;
}

/* String of 1 .. cap-1 bytes without NUL or control characters. */
int _cic_get_str(cic_case_ctx *x, const cic_case_tab *t, const char *key,
                 char *out, size_t cap, bool *present,
                 const cic_toml_node **node)
{
    const char *s;
    size_t len, i;
    int l, c;
    char qb[96];
    const cic_toml_node *n = _cic_find(t, key, NULL, NULL);
    if (present)
        *present = n != NULL;
    if (node)
        *node = n;
    if (!n)
        return CIC_OK;
    if (cic_toml_get_string(n, &s, &len) != CIC_TOML_OK)
        return _cic_wrong_type(x, t, key, n, "a string");
    _cic_pos(n, &l, &c);
    if (len == 0)
        return _cic_fail(x, l, c, "'%s' in %s is empty", key, t->where);
    if (len >= cap)
        return _cic_fail(x, l, c,
                         "'%s' in %s is too long (%zu bytes; at most %zu)", key,
                         t->where, len, cap - 1);
    for (i = 0; i < len; i++)
        if ((unsigned char)s[i] < 0x20 || s[i] == 0x7f)
            return _cic_fail(x, l, c,
                             "'%s' in %s ('%s') contains a control character",
                             key, t->where, _cic_quote(qb, sizeof qb, s, len));
    memcpy(out, s, len);
    out[len] = '\0';
    return CIC_OK;
}

/* Look a string up in names[0 .. n); a bad value lists the allowed ones. */
static int _cic_match(cic_case_ctx *x, const cic_case_tab *t, const char *key,
                      const cic_toml_node *n, const char *const *names,
                      size_t count, int *out)
{
    const char *s;
    size_t len, i;
    int l, c;
    char qb[96], all[512], hint[96];
    if (cic_toml_get_string(n, &s, &len) != CIC_TOML_OK)
        return _cic_wrong_type(x, t, key, n, "a string");
    for (i = 0; i < count; i++) {
        if (strlen(names[i]) == len && memcmp(names[i], s, len) == 0) {
            *out = (int)i;
            return CIC_OK;
        }
    }
    _cic_pos(n, &l, &c);
    return _cic_fail(x, l, c, "bad value '%s' for '%s' in %s; allowed: %s%s",
                     _cic_quote(qb, sizeof qb, s, len), key, t->where,
                     _cic_join(all, sizeof all, names, count),
                     _cic_hint(hint, sizeof hint, s, len, names, count));
}

int _cic_get_enum(cic_case_ctx *x, const cic_case_tab *t, const char *key,
                  const char *const *names, size_t count, int *out,
                  bool *present, const cic_toml_node **node)
{
    const cic_toml_node *n = _cic_find(t, key, NULL, NULL);
    if (present)
        *present = n != NULL;
    if (node)
        *node = n;
    if (!n)
        return CIC_OK;
    return _cic_match(x, t, key, n, names, count, out);
}

/* Every key of t must be in allowed[]. */
int _cic_check_keys(cic_case_ctx *x, const cic_case_tab *t,
                    const char *const *allowed, size_t n_allowed)
{
    size_t i, j, n = cic_toml_table_size(t->tbl);
    int err0 = x->n_err;
    for (i = 0; i < n; i++) {
        const char *k;
        size_t klen;
        const cic_toml_node *v;
        int l, c;
        bool ok = false;
        char qb[96], all[512], hint[96];
        cic_toml_table_entry(t->tbl, i, &k, &klen, &v, &l, &c);
        for (j = 0; j < n_allowed && !ok; j++)
            ok = strlen(allowed[j]) == klen && memcmp(allowed[j], k, klen) == 0;
        if (ok)
            continue;
        {
            const char *typo = _cic_closest(k, klen, allowed, n_allowed);
            if (typo && x->n_typo < (int)CIC_CASE_LEN(x->typo_key)) {
                x->typo_tbl[x->n_typo] = t->tbl;
                x->typo_key[x->n_typo++] = typo;
            }
        }
        _cic_fail(x, l, c, "unknown %s '%s' in %s; allowed: %s%s",
                         cic_toml_node_type(v) == CIC_TOML_TABLE ? "table"
                                                                  : "key",
                         _cic_quote(qb, sizeof qb, k, klen), t->where,
                         _cic_join(all, sizeof all, allowed, n_allowed),
                         _cic_hint(hint, sizeof hint, k, klen, allowed,
                                   n_allowed));
    }
    return _cic_status(x, err0);
}

/* A sub-table under key (NULL when absent); anything but a table is an
 * error. */
int _cic_get_table(cic_case_ctx *x, const cic_case_tab *t, const char *key,
                   const char *label, const cic_toml_node **out)
{
    const cic_toml_node *n = _cic_find(t, key, NULL, NULL);
    *out = NULL;
    if (!n)
        return CIC_OK;
    if (cic_toml_node_type(n) != CIC_TOML_TABLE) {
        int l, c;
        _cic_pos(n, &l, &c);
        return _cic_fail(x, l, c,
                         "'%s' in %s must be a table (write %s), got %s", key,
                         t->where, label,
                         cic_toml_type_name(cic_toml_node_type(n)));
    }
    *out = n;
    return CIC_OK;
}

/* Was key of table tbl reported as a misspelled unknown key? */
bool _cic_typo(const cic_case_ctx *x, const cic_toml_node *tbl, const char *key)
{
    int i;
    for (i = 0; i < x->n_typo; i++)
        if (x->typo_tbl[i] == tbl && strcmp(x->typo_key[i], key) == 0)
            return true;
    return false;
}

int _cic_missing(cic_case_ctx *x, const cic_case_tab *t, const char *key,
                 const char *extra)
{
    int l, c;
    if (_cic_typo(x, t->tbl, key))
        return CIC_EINPUT; /* reported as the unknown key it was spelt as */
    _cic_pos(t->tbl, &l, &c);
    return _cic_fail(x, l, c, "missing required key '%s' in %s%s", key,
                     t->where, extra ? extra : "");
}


/* An array of [[name]] tables, or NULL; with the count checked. */
int _cic_get_aot(cic_case_ctx *x, const cic_case_tab *root, const char *key,
                 size_t max, const cic_toml_node **out)
{
    const cic_toml_node *n = _cic_find(root, key, NULL, NULL);
    size_t i, cnt, w = strlen(root->where);
    int l, col;
    char full[96];
    *out = NULL;
    if (!n)
        return CIC_OK;
    /* under a table: its dotted name ([engines] -> engines.lowp) */
    if (w > 2 && root->where[0] == '[' && root->where[w - 1] == ']')
        snprintf(full, sizeof full, "%.*s.%s", (int)(w - 2), root->where + 1, key);
    else
        snprintf(full, sizeof full, "%s", key);
    key = full;
    _cic_pos(n, &l, &col);
    if (cic_toml_node_type(n) != CIC_TOML_ARRAY)
        return _cic_fail(x, l, col,
                         "'%s' must be an array of tables (write [[%s]] before "
                         "each entry), got %s",
                         key, key, cic_toml_type_name(cic_toml_node_type(n)));
    cnt = cic_toml_array_size(n);
    for (i = 0; i < cnt; i++) {
        const cic_toml_node *e = cic_toml_array_at(n, i);
        if (cic_toml_node_type(e) != CIC_TOML_TABLE) {
            _cic_pos(e, &l, &col);
            return _cic_fail(x, l, col,
                             "'%s' entry %zu must be a table (write [[%s]]), "
                             "got %s",
                             key, i + 1, key,
                             cic_toml_type_name(cic_toml_node_type(e)));
        }
    }
    if (cnt > max) {
        _cic_pos(cic_toml_array_at(n, max), &l, &col);
        return _cic_fail(x, l, col, "too many [[%s]] entries (%zu; at most %zu)",
                         key, cnt, max);
    }
    *out = n;
    return CIC_OK;
}


/* Transform and case names: [A-Za-z0-9_.-]+, not starting with '.' (they
 * become file names: reports/<case>/, reference/<case>.json, dumps). */
bool _cic_name_ok(const char *s)
{
    if (!*s || *s == '.')
        return false; /* "", ".", ".." and hidden files are not names */
    for (; *s; s++) {
        unsigned char ch = (unsigned char)*s;
        if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
              (ch >= '0' && ch <= '9') || ch == '_' || ch == '.' || ch == '-'))
            return false;
    }
    return true;
}

/* A key with a list in [sweep] (parsed before the sections): the list
 * overrides the scalar, whose first value stands in for it; the checks that
 * combine a swept key with others run per point (_cic_sweep_check). */
bool _cic_swept(const cic_case *c, enum cic_sweep_axis a)
{
    return c->sweep.on && c->sweep.n[a] > 0;
}

void _cic_sweep_first_int(const cic_case *c, enum cic_sweep_axis a, int *out, bool *have)
{
    if (!_cic_swept(c, a))
        return;
    *out = (int)c->sweep.v[a][0]; /* range-checked when parsed */
    if (have)
        *have = true;
}

/* The kinds whose descriptor want() accepts, for messages (case_int.h). */
const char *_cic_xform_kinds(char *buf, size_t cap, bool (*want)(const cic_xform_desc *, unsigned),
                             unsigned arg, unsigned style, const char *last)
{
    int k, n = 0, total = 0, o = 0;
    for (k = 0; k < CIC_XFORM_COUNT; k++)
        total += want(cic_xform_desc_of((enum cic_xform_kind)k), arg);
    buf[0] = '\0';
    for (k = 0; k < CIC_XFORM_COUNT && o < (int)cap; k++) {
        const cic_xform_desc *d = cic_xform_desc_of((enum cic_xform_kind)k);
        const char *q = style & CIC_KINDS_QUOTED ? "\"" : "";
        char alias[16] = "";
        if (!want(d, arg))
            continue;
        if (style & CIC_KINDS_ALIAS && d->alias)
            snprintf(alias, sizeof alias, " (%s)", d->alias);
        o += snprintf(buf + o, cap - (size_t)o, "%s%s%s%s%s",
                      n++ == 0 ? "" : n == total ? last : ", ", q, CIC_XFORM_NAME[k], q, alias);
    }
    return buf;
}
