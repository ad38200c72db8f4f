/* SPDX-License-Identifier: MIT */
/* case.c: the case-file loader. Reads a TOML case (layout in case.h) through
 * the toml++ wrapper (toml_capi.h), applies the defaults and checks every
 * rule, and either fills a cic_case that the rest of cicheck trusts or
 * returns CIC_EINPUT with a cic_diag "file:line:column: message".
 *
 * The loader is strict and tries to be helpful: unknown keys and bad enum
 * values list what is allowed and the closest spelling (optimal string
 * alignment distance), type errors name both types, range errors give the
 * range. It is written to be fuzzed: every integer is range-checked as int64
 * before it is narrowed, size products use saturating uint64 arithmetic, and
 * strings from the file are escaped before they reach a message. */
#include "case.h"
#include "toml_capi.h"

#include <assert.h>
#include <errno.h>
#include <float.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <string.h>

/* ---- name tables ------------------------------------------------------- */

const char *const CIC_BLOCK_NAME[] = {"preln", "rmsnorm", "dit"};
const char *const CIC_ACT_NAME[] = {"gelu", "gelu-tanh", "relu",
                                    "silu"};
const char *const CIC_DIST_NAME[] = {"normal", "uniform"};
const char *const CIC_XFORM_NAME[] = {
    "fuse-layernorm", "fold-rmsnorm-gamma", "rotate",
    "static-fold", "online-unrotate", "per-sample-fold", "branch-rotate"};
const char *const CIC_Q_NAME[] = {"identity", "random", "hadamard"};
const char *const CIC_TPREC_NAME[] = {"mpfr", "f64", "f32", "f64-openblas"};
const char *const CIC_MISTAKE_NAME[] = {
    "none", "skip-mean-bake", "skip-attn-out", "center-embeddings"};
const char *const CIC_VERDICT_NAME[] = {
    "equivalent", "broken", "inconclusive"};
const char *const CIC_READOUT_NAME[] = {"head", "residual"};
const char *const CIC_STREAM_NAME[] = {"centered", "mean-preserving"};
const char *const CIC_VERDICT_ENGINE_NAME[] = {"mpfr", "f64",
                                               "f64-openblas"};
const char *const CIC_AXIS_NAME[] = {
    "d_model", "tokens",  "layers", "seed",   "mpfr_prec", "outlier_scale",
    "heads",   "samples", "d_cond", "std"};

#define CIC_CASE_LEN(a) (sizeof(a) / sizeof((a)[0]))
static_assert(CIC_CASE_LEN(CIC_BLOCK_NAME) == CIC_BLOCK_COUNT, "block names");
static_assert(CIC_CASE_LEN(CIC_ACT_NAME) == CIC_ACT_COUNT, "activation names");
static_assert(CIC_CASE_LEN(CIC_DIST_NAME) == CIC_DIST_COUNT, "dist names");
static_assert(CIC_CASE_LEN(CIC_XFORM_NAME) == CIC_XFORM_COUNT, "xform names");
static_assert(CIC_CASE_LEN(CIC_Q_NAME) == CIC_Q_COUNT, "q names");
static_assert(CIC_CASE_LEN(CIC_TPREC_NAME) == CIC_TPREC_COUNT, "tprec names");
static_assert(CIC_CASE_LEN(CIC_MISTAKE_NAME) == CIC_MISTAKE_COUNT, "mistakes");
static_assert(CIC_CASE_LEN(CIC_VERDICT_NAME) == CIC_VERDICT_COUNT, "verdicts");
static_assert(CIC_CASE_LEN(CIC_READOUT_NAME) == CIC_READOUT_COUNT, "readouts");
static_assert(CIC_CASE_LEN(CIC_STREAM_NAME) == CIC_STREAM_COUNT, "streams");
static_assert(CIC_CASE_LEN(CIC_VERDICT_ENGINE_NAME) == CIC_VERDICT_ENGINE_COUNT,
              "verdict engine names");
static_assert(CIC_CASE_LEN(CIC_AXIS_NAME) == CIC_AXIS_COUNT, "sweep axis names");

const char *const CIC_GATE_METRICS[] = {
    "max_abs",      "rel_norm2",     "ulp_row.max",  "ulp_row.p99",
    "ulp_row.mean", "ulp_elem.max",  "ulp_elem.p99", "ulp_elem.mean",
    "drift.max",    "drift.p99",     "drift.mean",   "ce_residual",
    "nonfinite",    NULL};
#define CIC_CASE_N_GATE_METRICS (CIC_CASE_LEN(CIC_GATE_METRICS) - 1)

/* Engine spellings: in [engines] f32 and in gates. */
static const char *const _cic_f32_names[] = {"openblas", "fixed-order"};
static const char *const _cic_gate_engines[] = {"f32-openblas",
                                                "f32-fixed-order", "mpfr", "*"};

/* Allowed keys, in the order they are documented. */
static const char *const _cic_root_keys[] = {"name",    "model",      "engines",
                                             "readout", "transforms", "gates",
                                             "sweep"};
static const char *const _cic_model_keys[] = {
    "block",  "d_model",    "heads", "mlp_ratio", "tokens", "samples",
    "layers", "eps",        "causal", "activation", "d_out", "d_cond",
    "final_layer", "seed",  "weights"};
static const char *const _cic_weights_keys[] = {"dist", "std",
                                                "outlier_channels",
                                                "outlier_scale"};
static const char *const _cic_engines_keys[] = {"f32", "mpfr_prec", "verdict"};
static const char *const _cic_readout_keys[] = {"kind"};
static const char *const _cic_xform_keys[] = {
    "name",    "kind",   "after", "precision", "q",          "seed",
    "mistake", "expect", "stream", "fast",     "calibration"};
static const char *const _cic_gate_keys[] = {"transform", "engine", "metric",
                                             "max"};

/* ---- diagnostics ------------------------------------------------------- */

/* The loader reports every error of a file (up to CIC_DIAG_MAX are kept),
 * not only the first: a section goes on with its next key after a bad one,
 * [[transforms]] and [[gates]] with their next entry. Checks that combine
 * keys run only when those keys loaded (the *_ok flags), so one mistake is
 * reported once, not again as the consequences downstream. */
typedef struct {
    int line, col;
    char msg[sizeof(((cic_diag *)0)->msg)];
} cic_case_err;

typedef struct {
    cic_diag *d;
    const char *file; /* for messages */
    int n_err;        /* errors reported so far (the first CIC_DIAG_MAX kept) */
    cic_case_err err[CIC_DIAG_MAX];
    bool block_ok;    /* [model] block loaded: transforms can be checked */
    bool samples_ok;  /* [model] samples loaded: calibration can be checked */
    bool engines_ok;  /* [engines] f32 loaded: gates' engines can be checked */
    /* Unknown keys that look like typos of an allowed key (table, key): that
     * key is then not also reported as missing. */
    int n_typo;
    const cic_toml_node *typo_tbl[16];
    const char *typo_key[16];
} cic_case_ctx;

/* Report an error and return CIC_EINPUT. A position the parser did not
 * know (0) becomes 1:1 so every message keeps the file:line:column form. */
static int __attribute__((format(printf, 4, 5)))
_cic_fail(cic_case_ctx *x, int line, int col, const char *fmt, ...)
{
    char buf[sizeof x->d->msg];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (line <= 0) {
        line = 1;
        col = 1;
    }
    if (x->n_err < CIC_DIAG_MAX) {
        cic_case_err *e = &x->err[x->n_err];
        e->line = line;
        e->col = col > 0 ? col : 1;
        memcpy(e->msg, buf, sizeof e->msg);
    }
    x->n_err++;
    return CIC_EINPUT;
}

/* Hand the errors to the caller's diagnostic in file order (line, then
 * column; a stable sort keeps the order of errors at one position). */
static void _cic_flush(cic_case_ctx *x)
{
    int i, j, kept = x->n_err < CIC_DIAG_MAX ? x->n_err : CIC_DIAG_MAX;
    int order[CIC_DIAG_MAX];
    for (i = 0; i < kept; i++) {
        const cic_case_err *e = &x->err[i];
        for (j = i; j > 0; j--) {
            const cic_case_err *p = &x->err[order[j - 1]];
            if (p->line < e->line || (p->line == e->line && p->col <= e->col))
                break;
            order[j] = order[j - 1];
        }
        order[j] = i;
    }
    for (i = 0; i < kept; i++) {
        const cic_case_err *e = &x->err[order[i]];
        if (i == 0)
            cic_diag_set(x->d, x->file, e->line, e->col, "%s", e->msg);
        else
            cic_diag_add(x->d, x->file, e->line, e->col, "%s", e->msg);
    }
    if (x->d && kept > 0)
        x->d->n_more = x->n_err - 1; /* also those not kept */
}

/* CIC_EINPUT when errors were reported since `since` (x->n_err then). */
static int _cic_status(const cic_case_ctx *x, int since)
{
    return x->n_err > since ? CIC_EINPUT : CIC_OK;
}

/* Escape s[0 .. len) for a message: printable ASCII kept, ' and \ escaped,
 * anything else as \xNN; long strings cut with "...". */
static const char *_cic_quote(char *buf, size_t cap, const char *s, size_t len)
{
    static const char hex[] = "0123456789abcdef";
    size_t o = 0, i;
    CIC_ASSERT(cap >= 8);
    for (i = 0; i < len; i++) {
        unsigned char ch = (unsigned char)s[i];
        if (o + 8 >= cap) {
            memcpy(buf + o, "...", 3);
            o += 3;
            break;
        }
        if (ch == '\'' || ch == '\\') {
            buf[o++] = '\\';
            buf[o++] = (char)ch;
        } else if (ch >= 0x20 && ch < 0x7f) {
            buf[o++] = (char)ch;
        } else {
            buf[o++] = '\\';
            buf[o++] = 'x';
            buf[o++] = hex[ch >> 4];
            buf[o++] = hex[ch & 15];
        }
    }
    buf[o] = '\0';
    return buf;
}

/* Optimal string alignment distance (Levenshtein plus adjacent
 * transpositions), for "did you mean". Strings longer than 64 bytes get a
 * large distance: no suggestion, and no quadratic work on fuzzed input. */
static int _cic_edit_distance(const char *a, size_t la, const char *b)
{
    enum { MAXL = 64 };
    int d[MAXL + 1][MAXL + 1];
    size_t lb = strlen(b), i, j;
    if (la > MAXL || lb > MAXL)
        return INT_MAX;
    for (i = 0; i <= la; i++)
        d[i][0] = (int)i;
    for (j = 0; j <= lb; j++)
        d[0][j] = (int)j;
    for (i = 1; i <= la; i++) {
        for (j = 1; j <= lb; j++) {
            int cost = a[i - 1] == b[j - 1] ? 0 : 1;
            int v = d[i - 1][j] + 1;
            if (d[i][j - 1] + 1 < v)
                v = d[i][j - 1] + 1;
            if (d[i - 1][j - 1] + cost < v)
                v = d[i - 1][j - 1] + cost;
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] &&
                d[i - 2][j - 2] + 1 < v)
                v = d[i - 2][j - 2] + 1;
            d[i][j] = v;
        }
    }
    return d[la][lb];
}

/* The closest name to s[0 .. len), if close enough to be a likely typo
 * (distance <= max(2, len(name) / 3)), else NULL. */
static const char *_cic_closest(const char *s, size_t len,
                                const char *const *names, size_t n)
{
    const char *best = NULL;
    int bestd = INT_MAX;
    size_t i;
    for (i = 0; i < n; i++) {
        int dist;
        if (!names[i])
            continue;
        dist = _cic_edit_distance(s, len, names[i]);
        if (dist < bestd) {
            bestd = dist;
            best = names[i];
        }
    }
    if (best) {
        int lim = (int)(strlen(best) / 3);
        if (lim < 2)
            lim = 2;
        if (bestd > lim)
            best = NULL;
    }
    if (!best) {
        /* No near spelling: fall back to the longest shared prefix of at
         * least 3 bytes ("prenorm" -> "preln", "rotation" -> "rotate"). */
        size_t bestp = 2;
        for (i = 0; i < n; i++) {
            size_t p = 0;
            if (!names[i])
                continue;
            while (p < len && names[i][p] && names[i][p] == s[p])
                p++;
            if (p > bestp) {
                bestp = p;
                best = names[i];
            }
        }
    }
    return best;
}

/* "a, b, c" into buf. */
static const char *_cic_join(char *buf, size_t cap, const char *const *names,
                             size_t n)
{
    size_t o = 0, i;
    buf[0] = '\0';
    for (i = 0; i < n && o < cap; i++) {
        int k = snprintf(buf + o, cap - o, "%s%s", i ? ", " : "", names[i]);
        if (k < 0)
            break;
        o += (size_t)k;
    }
    return buf;
}

/* "; did you mean 'x'?" or "". */
static const char *_cic_hint(char *buf, size_t cap, const char *s, size_t len,
                             const char *const *names, size_t n)
{
    const char *c = _cic_closest(s, len, names, n);
    if (c)
        snprintf(buf, cap, "; did you mean '%s'?", c);
    else
        buf[0] = '\0';
    return buf;
}

/* ---- typed getters ------------------------------------------------------
 * Each returns CIC_OK (value stored, *present set if given) or CIC_EINPUT.
 * An absent key is CIC_OK with *present = false and the output untouched, so
 * callers set defaults first. `where` names the table in messages. */

typedef struct {
    const cic_toml_node *tbl;
    const char *where; /* "[model]", "[[transforms]] entry 2", ... */
} cic_case_tab;

/* Find key; value and the key's position. */
static const cic_toml_node *_cic_find(const cic_case_tab *t, const char *key,
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

static void _cic_pos(const cic_toml_node *n, int *l, int *c)
{
    cic_toml_node_pos(n, l, c);
}

static int _cic_wrong_type(cic_case_ctx *x, const cic_case_tab *t, const char *key,
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
static int _cic_get_int(cic_case_ctx *x, const cic_case_tab *t, const char *key,
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
static int _cic_get_intf(cic_case_ctx *x, const cic_case_tab *t, const char *key,
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
static int _cic_get_num(cic_case_ctx *x, const cic_case_tab *t, const char *key,
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

static int _cic_get_bool(cic_case_ctx *x, const cic_case_tab *t, const char *key,
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
static int _cic_get_str(cic_case_ctx *x, const cic_case_tab *t, const char *key,
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

static int _cic_get_enum(cic_case_ctx *x, const cic_case_tab *t, const char *key,
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
static int _cic_check_keys(cic_case_ctx *x, const cic_case_tab *t,
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
static int _cic_get_table(cic_case_ctx *x, const cic_case_tab *t, const char *key,
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
static bool _cic_typo(const cic_case_ctx *x, const cic_toml_node *tbl, const char *key)
{
    int i;
    for (i = 0; i < x->n_typo; i++)
        if (x->typo_tbl[i] == tbl && strcmp(x->typo_key[i], key) == 0)
            return true;
    return false;
}

static int _cic_missing(cic_case_ctx *x, const cic_case_tab *t, const char *key,
                        const char *extra)
{
    int l, c;
    if (_cic_typo(x, t->tbl, key))
        return CIC_EINPUT; /* reported as the unknown key it was spelt as */
    _cic_pos(t->tbl, &l, &c);
    return _cic_fail(x, l, c, "missing required key '%s' in %s%s", key,
                     t->where, extra ? extra : "");
}

/* ---- memory estimate --------------------------------------------------- */

static uint64_t _cic_sat_mul(uint64_t a, uint64_t b)
{
    if (a != 0 && b > UINT64_MAX / a)
        return UINT64_MAX;
    return a * b;
}

static uint64_t _cic_sat_add(uint64_t a, uint64_t b)
{
    return a > UINT64_MAX - b ? UINT64_MAX : a + b;
}

static uint64_t _cic_u(int v)
{
    return v > 0 ? (uint64_t)v : 0;
}

/* Transformed models a run holds at once (without --dump): the one being
 * run and every earlier one that a later transform is applied after. */
static int _cic_xforms_live(const cic_case *c)
{
    int i, j, n = c->n_xf > 0 ? 1 : 0;
    for (i = 0; i < c->n_xf && i < CIC_MAX_XFORMS; i++)
        for (j = i + 1; j < c->n_xf && j < CIC_MAX_XFORMS; j++)
            if (c->xf[j].after == i) {
                n++;
                break;
            }
    return n;
}

/* Weights (element count) and activation bytes behind the estimate. */
static void _cic_memory_parts_m(const cic_model_cfg *m, int n_xf,
                                int mpfr_prec, uint64_t *weights,
                                uint64_t *wbytes, uint64_t *abytes)
{
    uint64_t d = _cic_u(m->d_model), f = _cic_u(m->d_mlp);
    uint64_t L = _cic_u(m->layers), dout = _cic_u(m->d_out);
    uint64_t dc = _cic_u(m->d_cond), N = _cic_u(m->tokens);
    uint64_t R = _cic_sat_mul(N, _cic_u(m->samples));
    uint64_t dd = _cic_sat_mul(d, d), df = _cic_sat_mul(d, f);
    uint64_t layer, readout, W, prec = _cic_u(mpfr_prec), copies, elem;
    uint64_t width;

    /* Weight elements per layer and for the readout (DESIGN.md section 1):
     * preln: qkv + proj 4d^2, fc1 + fc2 2dm, biases and two LN (g, b) ~9d + m;
     * rmsnorm: q, k, v, o 4d^2, gate/up/down 3dm, two gammas 2d;
     * dit: as preln without LN parameters, plus adaLN 6 d d_c + 6d. */
    switch (m->block) {
    case CIC_BLOCK_RMSNORM:
        layer = _cic_sat_add(_cic_sat_add(_cic_sat_mul(4, dd),
                                          _cic_sat_mul(3, df)),
                             _cic_sat_mul(2, d));
        readout = _cic_sat_add(d, _cic_sat_mul(d, dout));
        break;
    case CIC_BLOCK_DIT:
        layer = _cic_sat_add(_cic_sat_add(_cic_sat_mul(4, dd),
                                          _cic_sat_mul(2, df)),
                             _cic_sat_add(_cic_sat_mul(11, d), f));
        layer = _cic_sat_add(layer, _cic_sat_mul(6, _cic_sat_mul(d, dc)));
        /* final layer: adaLN 2 d d_c + 2d, linear d d_out + d_out */
        readout = _cic_sat_add(_cic_sat_mul(2, _cic_sat_mul(d, dc)),
                               _cic_sat_add(_cic_sat_mul(2, d),
                                            _cic_sat_mul(d + 1, dout)));
        break;
    default:
        layer = _cic_sat_add(_cic_sat_add(_cic_sat_mul(4, dd),
                                          _cic_sat_mul(2, df)),
                             _cic_sat_add(_cic_sat_mul(9, d), f));
        readout = _cic_sat_add(_cic_sat_mul(2, d), _cic_sat_mul(d + 1, dout));
        break;
    }
    W = _cic_sat_add(_cic_sat_mul(L, layer), readout);

    /* Bytes per weight: f32 copy + rounded copy (8), and an MPFR value at
     * mpfr_prec plus its prec + 64 recheck (16 bytes of header + 2 * prec / 8
     * bytes of limbs). One set for the original, one per transformed model
     * held at once (n_xf here), one scratch: n_xf + 2 sets. */
    copies = _cic_u(n_xf) + 2;
    *weights = W;
    *wbytes = _cic_sat_mul(_cic_sat_mul(copies, W),
                           16 + 2 * ((prec > 4096 ? 4096 : prec) / 8) + 8);

    /* Activations: R rows, each as wide as the widest intermediate (qkv 3d,
     * the MLP m, one attention score row N, the head d_out), about 8 live
     * buffers of MPFR elements of ~48 bytes at 128 bits (32-byte struct +
     * limbs). */
    width = 3 * d;
    if (f > width)
        width = f;
    if (N > width)
        width = N;
    if (dout > width)
        width = dout;
    elem = 32 + ((prec > 4096 ? 4096 : prec) + 63) / 64 * 8;
    *abytes = _cic_sat_mul(_cic_sat_mul(R, width), _cic_sat_mul(8, elem));
}

static void _cic_memory_parts(const cic_case *c, uint64_t *weights,
                              uint64_t *wbytes, uint64_t *abytes)
{
    _cic_memory_parts_m(&c->model, _cic_xforms_live(c), c->mpfr_prec, weights, wbytes,
                        abytes);
}

uint64_t cic_case_memory_estimate(const cic_case *c)
{
    uint64_t w, wb, ab;
    if (!c)
        return 0;
    _cic_memory_parts(c, &w, &wb, &ab);
    return _cic_sat_add(wb, ab);
}

uint64_t cic_case_weight_count(const cic_case *c)
{
    uint64_t w, wb, ab;
    if (!c)
        return 0;
    _cic_memory_parts(c, &w, &wb, &ab);
    return w;
}

int cic_case_xform_find(const cic_case *c, const char *name)
{
    int i;
    if (!c || !name)
        return -1;
    for (i = 0; i < c->n_xf && i < CIC_MAX_XFORMS; i++)
        if (strcmp(c->xf[i].name, name) == 0)
            return i;
    return -1;
}

/* ---- sections ---------------------------------------------------------- */

/* A key with a list in [sweep] (parsed before the sections): the list
 * overrides the scalar, whose first value stands in for it; the checks that
 * combine a swept key with others run per point (_cic_sweep_check). */
static bool _cic_swept(const cic_case *c, enum cic_sweep_axis a)
{
    return c->sweep.on && c->sweep.n[a] > 0;
}

static void _cic_sweep_first_int(const cic_case *c, enum cic_sweep_axis a,
                                 int *out, bool *have)
{
    if (!_cic_swept(c, a))
        return;
    *out = (int)c->sweep.v[a][0]; /* range-checked when parsed */
    if (have)
        *have = true;
}

/* ---- [model] ------------------------------------------------------------
 *
 * The numeric limits that binary32 sets. Every engine uses eps as its
 * binary32 value, so that value must be > 0 and finite. Weights are binary32
 * draws std * z: |z| < CIC_CASE_ZMAX for a normal (Box-Muller from a uniform of
 * 53 bits, never below 2^-54: sqrt(-2 ln 2^-54) = 8.65) and |z| <= sqrt(3)
 * for a uniform. Outlier channels multiply the block input (std 1) and the
 * writers' rows by the binary32 value of outlier_scale. So std must be at
 * least FLT_MIN (below, the weights are subnormal or zero: a run of such a
 * model passes and means nothing), and max(std, 1) * outlier_scale * CIC_CASE_ZMAX
 * at most FLT_MAX (above, weights overflow to Inf and the truth itself is not
 * a number). */
#define CIC_CASE_ZMAX 9.0

/* eps as loaded: its binary32 value is > 0 and finite. */
static int _cic_check_eps(cic_case_ctx *x, int l, int col, const char *pd, double eps)
{
    float fe = (float)eps;
    if (fe > 0 && isfinite(fe))
        return CIC_OK;
    return _cic_fail(x, l, col,
                     "%s'eps' = %g is %s in binary32 (every engine uses eps as a "
                     "binary32 value); it must be %g .. %g",
                     pd, eps, fe == 0 ? "0" : "Inf", (double)FLT_TRUE_MIN,
                     (double)FLT_MAX);
}

/* std and outlier_scale of m against the limits above; the position is that
 * of the key (or sweep list) to blame. */
static int _cic_check_scale(cic_case_ctx *x, const cic_model_cfg *m, int l, int col,
                            const char *pd)
{
    const double lim = (double)FLT_MAX / CIC_CASE_ZMAX;
    double big = m->std > 1 ? m->std : 1;
    if (m->std < (double)FLT_MIN)
        return _cic_fail(x, l, col,
                         "%s'std' = %g in [model.weights] is below %g (FLT_MIN): "
                         "the binary32 weights would be subnormal or zero, and "
                         "a run of such a model means nothing",
                         pd, m->std, (double)FLT_MIN);
    if (m->std > lim)
        return _cic_fail(x, l, col,
                         "%s'std' = %g in [model.weights] is above %g: weights "
                         "of up to %g std would overflow binary32 (FLT_MAX = "
                         "%g) and the model would compute Inf and NaN",
                         pd, m->std, lim, CIC_CASE_ZMAX, (double)FLT_MAX);
    if (m->outlier_channels == 0)
        return CIC_OK;
    if ((float)m->outlier_scale < FLT_MIN)
        return _cic_fail(x, l, col,
                         "%s'outlier_scale' = %g in [model.weights] is below %g "
                         "(FLT_MIN): it is applied as a binary32 factor, which "
                         "would be subnormal or zero",
                         pd, m->outlier_scale, (double)FLT_MIN);
    if (big * m->outlier_scale > lim)
        return _cic_fail(x, l, col,
                         "%s'outlier_scale' = %g with std = %g: outlier channels "
                         "of up to %g * max(std, 1) * outlier_scale = %g would "
                         "overflow binary32 (FLT_MAX = %g); max(std, 1) * "
                         "outlier_scale must be at most %g",
                         pd, m->outlier_scale, m->std, CIC_CASE_ZMAX,
                         CIC_CASE_ZMAX * big * m->outlier_scale, (double)FLT_MAX, lim);
    return CIC_OK;
}

/* block, d_model, heads, mlp_ratio, tokens, samples, layers. */
static void _cic_load_sizes(cic_case_ctx *x, cic_case *c, const cic_case_tab *t,
                            const cic_toml_node *mt)
{
    cic_model_cfg *m = &c->model;
    const cic_toml_node *n = NULL, *nh = NULL;
    bool have, ok_d, ok_h, ok_t, ok_s;
    int l, col, v = 0;
    char hint[160];

    x->block_ok = false;
    if (_cic_get_enum(x, t, "block", CIC_BLOCK_NAME, CIC_BLOCK_COUNT, &v, &have,
                      NULL) == CIC_OK) {
        if (have)
            x->block_ok = true;
        else
            _cic_missing(x, t, "block", " (preln, rmsnorm or dit)");
    }
    m->block = (enum cic_block_kind)v;

    ok_d = _cic_get_intf(x, t, "d_model", 1, CIC_CASE_MAX_DIM, &m->d_model, &have,
                         NULL) == CIC_OK;
    _cic_sweep_first_int(c, CIC_AXIS_D_MODEL, &m->d_model, &have);
    if (ok_d && !have)
        ok_d = _cic_missing(x, t, "d_model", NULL) == CIC_OK;
    ok_h = _cic_get_intf(x, t, "heads", 1, CIC_CASE_MAX_DIM, &m->heads, &have,
                         &nh) == CIC_OK;
    _cic_sweep_first_int(c, CIC_AXIS_HEADS, &m->heads, &have);
    if (ok_h && !have)
        ok_h = _cic_missing(x, t, "heads", NULL) == CIC_OK;
    if (ok_d && ok_h && !_cic_swept(c, CIC_AXIS_D_MODEL) &&
        !_cic_swept(c, CIC_AXIS_HEADS) && m->d_model % m->heads != 0) {
        /* Suggest the divisors of d_model nearest to heads. */
        int lo = m->heads, hi = m->heads;
        while (lo > 1 && m->d_model % lo != 0)
            lo--;
        while (hi < m->d_model && m->d_model % hi != 0)
            hi++;
        _cic_pos(nh, &l, &col);
        if (m->heads > m->d_model)
            snprintf(hint, sizeof hint, "heads can be at most d_model");
        else
            snprintf(hint, sizeof hint, "nearest divisors: %d or %d", lo, hi);
        _cic_fail(x, l, col,
                  "d_model = %d is not divisible by heads = %d (the head "
                  "size d_model / heads must be an integer); %s",
                  m->d_model, m->heads, hint);
    }

    m->mlp_ratio = 4;
    if (_cic_get_num(x, t, "mlp_ratio", true, CIC_CASE_MAX_MLP_RATIO, &m->mlp_ratio,
                     NULL, &n) == CIC_OK && ok_d) {
        /* d <= 2^16 and ratio <= 64: the product is < 2^22, and an exact
         * integer if the ratio is a multiple of 2^-k with d divisible by 2^k
         * (the usual 4, 8/3 * 3k, 2.5 * 2k ...). */
        double w = m->mlp_ratio * (double)m->d_model;
        if (_cic_swept(c, CIC_AXIS_D_MODEL))
            w = w == floor(w) && w >= 1 ? w : 0; /* checked per point */
        else if (w != floor(w) || w < 1) {
            _cic_pos(n ? n : mt, &l, &col);
            _cic_fail(x, l, col,
                      "mlp_ratio * d_model = %g * %d = %.17g is not a "
                      "positive integer (the MLP width must be whole)",
                      m->mlp_ratio, m->d_model, w);
            w = 0;
        }
        m->d_mlp = (int)w;
    }

    ok_t = _cic_get_intf(x, t, "tokens", 1, CIC_CASE_MAX_TOKENS, &m->tokens, &have,
                         NULL) == CIC_OK;
    _cic_sweep_first_int(c, CIC_AXIS_TOKENS, &m->tokens, &have);
    if (ok_t && !have)
        ok_t = _cic_missing(x, t, "tokens", NULL) == CIC_OK;
    ok_s = _cic_get_intf(x, t, "samples", 1, CIC_MAX_SAMPLES, &m->samples, &have,
                         &n) == CIC_OK;
    _cic_sweep_first_int(c, CIC_AXIS_SAMPLES, &m->samples, &have);
    if (ok_s && !have)
        ok_s = _cic_missing(x, t, "samples", NULL) == CIC_OK;
    x->samples_ok = ok_s;
    if (ok_t && ok_s && !_cic_swept(c, CIC_AXIS_TOKENS) &&
        !_cic_swept(c, CIC_AXIS_SAMPLES) &&
        (int64_t)m->tokens * m->samples > CIC_CASE_MAX_ROWS) {
        _cic_pos(n, &l, &col);
        _cic_fail(x, l, col,
                  "tokens * samples = %d * %d = %lld rows exceeds the "
                  "limit of %d; reduce tokens or samples",
                  m->tokens, m->samples, (long long)m->tokens * m->samples,
                  CIC_CASE_MAX_ROWS);
    }
    if (_cic_get_intf(x, t, "layers", 1, CIC_CASE_MAX_LAYERS, &m->layers, &have,
                      NULL) == CIC_OK) {
        _cic_sweep_first_int(c, CIC_AXIS_LAYERS, &m->layers, &have);
        if (!have)
            _cic_missing(x, t, "layers", NULL);
    }
}

/* eps, causal, activation, d_out, d_cond, final_layer, seed. */
static void _cic_load_misc(cic_case_ctx *x, cic_case *c, const cic_case_tab *t)
{
    cic_model_cfg *m = &c->model;
    const cic_toml_node *n;
    bool have;
    int l, col, v;
    int64_t seed = 0;

    m->eps = m->block == CIC_BLOCK_DIT ? 1e-6 : 1e-5;
    if (_cic_get_num(x, t, "eps", true, INFINITY, &m->eps, &have, &n) == CIC_OK &&
        have) {
        _cic_pos(n, &l, &col);
        _cic_check_eps(x, l, col, "", m->eps);
    }
    m->causal = false;
    _cic_get_bool(x, t, "causal", &m->causal);
    /* rmsnorm: the SwiGLU gate; dit: the reference code's tanh GELU. */
    v = m->block == CIC_BLOCK_RMSNORM ? CIC_ACT_SILU
        : m->block == CIC_BLOCK_DIT   ? CIC_ACT_GELU_TANH
                                      : CIC_ACT_GELU;
    _cic_get_enum(x, t, "activation", CIC_ACT_NAME, CIC_ACT_COUNT, &v, NULL, NULL);
    m->act = (enum cic_act)v;
    m->d_out = m->d_model;
    _cic_get_intf(x, t, "d_out", 1, CIC_CASE_MAX_DIM, &m->d_out, &have, NULL);
    c->sweep.d_out_default = !have;

    /* dit-only keys. */
    if (x->block_ok && m->block != CIC_BLOCK_DIT) {
        static const char *const dit_only[] = {"d_cond", "final_layer"};
        size_t i;
        for (i = 0; i < CIC_CASE_LEN(dit_only); i++)
            if (_cic_find(t, dit_only[i], &l, &col))
                _cic_fail(x, l, col,
                          "'%s' is only allowed for block = \"dit\" "
                          "(this model is \"%s\")",
                          dit_only[i], CIC_BLOCK_NAME[m->block]);
    }
    m->d_cond = m->d_model;
    _cic_get_intf(x, t, "d_cond", 1, CIC_CASE_MAX_DIM, &m->d_cond, &have, NULL);
    c->sweep.d_cond_default = !have;
    if (m->block == CIC_BLOCK_DIT)
        _cic_sweep_first_int(c, CIC_AXIS_D_COND, &m->d_cond, NULL);
    m->final_layer = true;
    _cic_get_bool(x, t, "final_layer", &m->final_layer);

    _cic_get_int(x, t, "seed", 0, INT64_MAX, &seed, NULL, NULL);
    m->seed = (uint64_t)seed;
    if (_cic_swept(c, CIC_AXIS_SEED))
        m->seed = (uint64_t)c->sweep.v[CIC_AXIS_SEED][0];
}

/* [model.weights]: dist, std, outlier_channels, outlier_scale. */
static void _cic_load_weights(cic_case_ctx *x, cic_case *c, const cic_case_tab *t, bool ok_d)
{
    cic_case_tab wt = {NULL, "[model.weights]"};
    cic_model_cfg *m = &c->model;
    const cic_toml_node *n, *wtab, *blame = NULL;
    bool have, ok = true;
    int l, col, v, err0 = x->n_err;

    m->dist = CIC_DIST_NORMAL;
    m->std = 0.02;
    m->outlier_channels = 0;
    m->outlier_scale = 1;
    if (_cic_get_table(x, t, "weights", "[model.weights]", &wtab) != CIC_OK || !wtab)
        return;
    wt.tbl = wtab;
    _cic_check_keys(x, &wt, _cic_weights_keys, CIC_CASE_LEN(_cic_weights_keys));
    v = CIC_DIST_NORMAL;
    _cic_get_enum(x, &wt, "dist", CIC_DIST_NAME, CIC_DIST_COUNT, &v, NULL, NULL);
    m->dist = (enum cic_dist)v;
    if (_cic_get_num(x, &wt, "std", true, INFINITY, &m->std, NULL, &n) != CIC_OK)
        ok = false;
    else if (n)
        blame = n;
    {
        int64_t oc = 0;
        /* A swept d_model: checked against each point's d_model. */
        int ocmax = _cic_swept(c, CIC_AXIS_D_MODEL) || !ok_d ? CIC_CASE_MAX_DIM
                                                             : m->d_model;
        if (_cic_get_int(x, &wt, "outlier_channels", INT64_MIN, INT64_MAX, &oc,
                         &have, &n) != CIC_OK)
            ok = false;
        else if (have && (oc < 0 || oc > ocmax)) {
            _cic_pos(n, &l, &col);
            _cic_fail(x, l, col,
                      "'outlier_channels' in [model.weights] is %lld, out of "
                      "range: must be 0 .. d_model (%d)",
                      (long long)oc, ocmax);
            ok = false;
        } else {
            m->outlier_channels = (int)oc;
        }
    }
    if (_cic_get_num(x, &wt, "outlier_scale", true, INFINITY, &m->outlier_scale,
                     NULL, &n) != CIC_OK)
        ok = false;
    else if (n && m->outlier_channels > 0)
        blame = n;
    /* the scale limits, unless swept (checked per point) */
    if (ok && x->n_err == err0 && !_cic_swept(c, CIC_AXIS_STD) &&
        !_cic_swept(c, CIC_AXIS_OUTLIER_SCALE)) {
        _cic_pos(blame ? blame : wtab, &l, &col);
        _cic_check_scale(x, m, l, col, "");
    }
}

static int _cic_load_model(cic_case_ctx *x, cic_case *c, const cic_toml_node *mt)
{
    cic_case_tab t = {mt, "[model]"};
    cic_model_cfg *m = &c->model;
    int err0 = x->n_err;

    _cic_check_keys(x, &t, _cic_model_keys, CIC_CASE_LEN(_cic_model_keys));
    _cic_load_sizes(x, c, &t, mt);
    _cic_load_misc(x, c, &t);
    /* outlier_channels <= d_model needs a loaded d_model (> 0 once loaded) */
    _cic_load_weights(x, c, &t, m->d_model > 0);
    if (_cic_swept(c, CIC_AXIS_STD))
        m->std = c->sweep.v[CIC_AXIS_STD][0];
    if (_cic_swept(c, CIC_AXIS_OUTLIER_SCALE))
        m->outlier_scale = c->sweep.v[CIC_AXIS_OUTLIER_SCALE][0];
    return _cic_status(x, err0);
}

/* 'f32' in [engines]: a non-empty list of distinct engine names. */
static int _cic_load_f32(cic_case_ctx *x, cic_case *c, const cic_case_tab *t,
                         const cic_toml_node *f32)
{
    size_t i, n;
    int l, col;
    char qb[96], all[128], hint[96];

    if (cic_toml_node_type(f32) != CIC_TOML_ARRAY)
        return _cic_wrong_type(x, t, "f32", f32,
                               "an array of strings (\"openblas\", "
                               "\"fixed-order\")");
    n = cic_toml_array_size(f32);
    if (n == 0) {
        _cic_pos(f32, &l, &col);
        return _cic_fail(x, l, col,
                         "'f32' in [engines] is empty; list at least one "
                         "of: openblas, fixed-order");
    }
    c->f32_openblas = false;
    c->f32_fixed = false;
    for (i = 0; i < n; i++) {
        const cic_toml_node *e = cic_toml_array_at(f32, i);
        const char *s;
        size_t len;
        bool *slot;
        _cic_pos(e, &l, &col);
        if (cic_toml_get_string(e, &s, &len) != CIC_TOML_OK)
            return _cic_fail(x, l, col,
                             "wrong type in 'f32' in [engines]: expected "
                             "a string, got %s",
                             cic_toml_type_name(cic_toml_node_type(e)));
        if (len == 8 && memcmp(s, "openblas", 8) == 0)
            slot = &c->f32_openblas;
        else if (len == 11 && memcmp(s, "fixed-order", 11) == 0)
            slot = &c->f32_fixed;
        else
            return _cic_fail(
                x, l, col, "bad value '%s' in 'f32' in [engines]; allowed: %s%s",
                _cic_quote(qb, sizeof qb, s, len),
                _cic_join(all, sizeof all, _cic_f32_names, CIC_CASE_LEN(_cic_f32_names)),
                _cic_hint(hint, sizeof hint, s, len, _cic_f32_names,
                          CIC_CASE_LEN(_cic_f32_names)));
        if (*slot)
            return _cic_fail(x, l, col, "'%s' is listed twice in 'f32' in [engines]",
                             _cic_quote(qb, sizeof qb, s, len));
        *slot = true;
    }
    return CIC_OK;
}

static int _cic_load_engines(cic_case_ctx *x, cic_case *c, const cic_toml_node *et)
{
    cic_case_tab t = {et, "[engines]"};
    const cic_toml_node *f32;
    int err0 = x->n_err, v = CIC_VERDICT_ENGINE_MPFR;

    c->f32_openblas = true;
    c->f32_fixed = true;
    c->mpfr_prec = 128;
    c->verdict_engine = CIC_VERDICT_ENGINE_MPFR;
    x->engines_ok = true;
    if (!et)
        return CIC_OK;
    _cic_check_keys(x, &t, _cic_engines_keys, CIC_CASE_LEN(_cic_engines_keys));
    f32 = _cic_find(&t, "f32", NULL, NULL);
    if (f32 && _cic_load_f32(x, c, &t, f32) != CIC_OK)
        x->engines_ok = false;
    _cic_get_intf(x, &t, "mpfr_prec", 64, 1024, &c->mpfr_prec, NULL, NULL);
    _cic_get_enum(x, &t, "verdict", CIC_VERDICT_ENGINE_NAME, CIC_VERDICT_ENGINE_COUNT,
                  &v, NULL, NULL);
    c->verdict_engine = (enum cic_verdict_engine)v;
    return _cic_status(x, err0);
}

static int _cic_load_readout(cic_case_ctx *x, cic_case *c, const cic_toml_node *rt)
{
    cic_case_tab t = {rt, "[readout]"};
    int err0 = x->n_err, v = CIC_READOUT_HEAD;
    c->readout = CIC_READOUT_HEAD;
    if (!rt)
        return CIC_OK;
    _cic_check_keys(x, &t, _cic_readout_keys, CIC_CASE_LEN(_cic_readout_keys));
    _cic_get_enum(x, &t, "kind", CIC_READOUT_NAME, CIC_READOUT_COUNT, &v, NULL, NULL);
    c->readout = (enum cic_readout)v;
    return _cic_status(x, err0);
}

/* An array of [[name]] tables, or NULL; with the count checked. */
static int _cic_get_aot(cic_case_ctx *x, const cic_case_tab *root, const char *key,
                        size_t max, const cic_toml_node **out)
{
    const cic_toml_node *n = _cic_find(root, key, NULL, NULL);
    size_t i, cnt;
    int l, col;
    *out = NULL;
    if (!n)
        return CIC_OK;
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
static bool _cic_name_ok(const char *s)
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

static bool _cic_is_adaln(enum cic_xform_kind k)
{
    return k == CIC_XFORM_STATIC_FOLD || k == CIC_XFORM_ONLINE_UNROTATE ||
           k == CIC_XFORM_PER_SAMPLE_FOLD || k == CIC_XFORM_BRANCH_ROTATE;
}

/* The adaLN-only keys (stream, fast, calibration) and the keys adaLN kinds
 * refuse (after, mistake). xf->kind, q and the block are already checked;
 * xf->stream, fast and calibration hold their defaults. */
static int _cic_load_adaln(cic_case_ctx *x, const cic_case *c, const cic_case_tab *t,
                           cic_xform_spec *xf)
{
    const char *kn = CIC_XFORM_NAME[xf->kind];
    const cic_toml_node *node, *snode = NULL;
    bool have, adaln = _cic_is_adaln(xf->kind);
    int rc, l, col, v;

    if (!adaln) {
        static const char *const ada_only[] = {"stream", "fast", "calibration"};
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

    /* fast: a fast Walsh-Hadamard transform instead of a dense d x d
     * product. */
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
        if (xf->q != CIC_Q_HADAMARD)
            return _cic_fail(x, l, col,
                             "fast = true needs q = \"hadamard\" (a fast "
                             "Walsh-Hadamard transform); this transform has "
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

    /* calibration: the sample whose conditioning static-fold bakes in. */
    node = _cic_find(t, "calibration", &l, &col);
    if (node && xf->kind != CIC_XFORM_STATIC_FOLD)
        return _cic_fail(x, l, col,
                         "'calibration' is only allowed for kind = "
                         "\"static-fold\" (this transform is \"%s\")",
                         kn);
    {
        int64_t cal = 0;
        if ((rc = _cic_get_int(x, t, "calibration", INT64_MIN, INT64_MAX, &cal,
                               &have, &node)))
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
    }
    return CIC_OK;
}

/* Names of transforms, which also name dump files (original.safetensors,
 * outputs.safetensors, activations.safetensors) and rows in gates. */
static const char *const _cic_reserved_names[] = {"none", "*", "original", "outputs",
                                                  "activations"};

/* A transform kind against the block it is applied to. */
static int _cic_check_kind_block(cic_case_ctx *x, const cic_case *c,
                                 const cic_xform_spec *xf, int l, int col)
{
    bool adaln = _cic_is_adaln(xf->kind);
    if (adaln && c->model.block != CIC_BLOCK_DIT)
        return _cic_fail(x, l, col,
                         "kind = \"%s\" is an adaLN strategy and needs "
                         "block = \"dit\" (this model is \"%s\"); "
                         "allowed here: %s",
                         CIC_XFORM_NAME[xf->kind],
                         CIC_BLOCK_NAME[c->model.block],
                         c->model.block == CIC_BLOCK_PRELN
                             ? "fuse-layernorm, rotate"
                             : "fold-rmsnorm-gamma, rotate");
    if (!adaln && c->model.block == CIC_BLOCK_DIT)
        return _cic_fail(x, l, col,
                         "kind = \"%s\" does not apply to block = \"dit\" "
                         "(adaLN modulation does not commute with a "
                         "static rotation or fold); on a dit block use "
                         "an adaLN strategy: static-fold, "
                         "online-unrotate, per-sample-fold, branch-rotate",
                         CIC_XFORM_NAME[xf->kind]);
    if (xf->kind == CIC_XFORM_FUSE_LAYERNORM &&
        c->model.block != CIC_BLOCK_PRELN)
        return _cic_fail(x, l, col,
                         "kind = \"fuse-layernorm\" needs block = \"preln\" "
                         "(this model is \"%s\")%s",
                         CIC_BLOCK_NAME[c->model.block],
                         c->model.block == CIC_BLOCK_RMSNORM
                             ? "; RMSNorm models use fold-rmsnorm-gamma"
                             : "");
    if (xf->kind == CIC_XFORM_FOLD_RMSNORM_GAMMA &&
        c->model.block != CIC_BLOCK_RMSNORM)
        return _cic_fail(x, l, col,
                         "kind = \"fold-rmsnorm-gamma\" needs block = "
                         "\"rmsnorm\" (this model is \"%s\")%s",
                         CIC_BLOCK_NAME[c->model.block],
                         c->model.block == CIC_BLOCK_PRELN
                             ? "; LayerNorm models use fuse-layernorm"
                             : "");
    return CIC_OK;
}

/* [[transforms]] entry i (0-based); stops at its first error, after
 * reporting every unknown key. */
static int _cic_load_xform(cic_case_ctx *x, cic_case *c, const cic_toml_node *arr, size_t i)
{
    size_t j, n = cic_toml_array_size(arr);
    int rc, l, col, v, err0 = x->n_err;
    const cic_toml_node *node;
    bool have;
    char where[64], qb[96], hint[96], names[CIC_MAX_XFORMS][CIC_NAME_MAX];
    const char *earlier[CIC_MAX_XFORMS];
    char all[CIC_MAX_XFORMS * (CIC_NAME_MAX + 2) + 16];
    bool adaln;

    {
        cic_xform_spec *xf = &c->xf[i];
        cic_case_tab t;
        t.tbl = cic_toml_array_at(arr, i);
        snprintf(where, sizeof where, "[[transforms]] entry %zu", i + 1);
        t.where = where;
        _cic_pos(t.tbl, &xf->line, &col);
        xf->stream = CIC_STREAM_CENTERED;
        xf->fast = false;
        xf->calibration = 0;
        xf->after = -1;
        _cic_check_keys(x, &t, _cic_xform_keys, CIC_CASE_LEN(_cic_xform_keys));

        if ((rc = _cic_get_str(x, &t, "name", xf->name, sizeof xf->name, &have,
                               &node)))
            return rc;
        if (!have)
            return _cic_missing(x, &t, "name", NULL);
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

        v = 0;
        if ((rc = _cic_get_enum(x, &t, "kind", CIC_XFORM_NAME, CIC_XFORM_COUNT,
                                &v, &have, &node)))
            return rc;
        if (!have)
            return _cic_missing(x, &t, "kind",
                                c->model.block == CIC_BLOCK_DIT
                                    ? " (on a dit block an adaLN strategy: "
                                      "static-fold, online-unrotate, "
                                      "per-sample-fold or branch-rotate)"
                                    : " (fuse-layernorm, fold-rmsnorm-gamma or "
                                      "rotate)");
        xf->kind = (enum cic_xform_kind)v;
        _cic_pos(node, &l, &col);
        adaln = _cic_is_adaln(xf->kind);
        /* (an unknown block was reported: nothing to check against) */
        if (x->block_ok && (rc = _cic_check_kind_block(x, c, xf, l, col)))
            return rc;

        v = CIC_TPREC_MPFR;
        if ((rc = _cic_get_enum(x, &t, "precision", CIC_TPREC_NAME,
                                CIC_TPREC_COUNT, &v, NULL, NULL)))
            return rc;
        xf->prec = (enum cic_tprec)v;

        /* q and seed: rotate and the adaLN strategies; q required there. */
        xf->q = CIC_Q_IDENTITY;
        xf->q_seed = 0;
        if (xf->kind != CIC_XFORM_ROTATE && !adaln) {
            static const char *const rot_only[] = {"q", "seed"};
            size_t k;
            for (k = 0; k < CIC_CASE_LEN(rot_only); k++)
                if (_cic_find(&t, rot_only[k], &l, &col))
                    return _cic_fail(x, l, col,
                                     "'%s' is only allowed for kind = "
                                     "\"rotate\" and the adaLN strategies "
                                     "of a dit block (this transform is "
                                     "\"%s\")",
                                     rot_only[k], CIC_XFORM_NAME[xf->kind]);
        } else {
            int64_t s = 0;
            v = 0;
            if ((rc = _cic_get_enum(x, &t, "q", CIC_Q_NAME, CIC_Q_COUNT, &v,
                                    &have, NULL)))
                return rc;
            if (!have) {
                char extra[128];
                snprintf(extra, sizeof extra,
                         " for kind = \"%s\" (identity, random or hadamard)",
                         CIC_XFORM_NAME[xf->kind]);
                return _cic_missing(x, &t, "q", extra);
            }
            xf->q = (enum cic_qkind)v;
            if ((rc = _cic_get_int(x, &t, "seed", 0, INT64_MAX, &s, NULL,
                                   NULL)))
                return rc;
            xf->q_seed = (uint64_t)s;
        }

        if ((rc = _cic_load_adaln(x, c, &t, xf)))
            return rc;

        v = CIC_MISTAKE_NONE;
        if ((rc = _cic_get_enum(x, &t, "mistake", CIC_MISTAKE_NAME,
                                CIC_MISTAKE_COUNT, &v, NULL, &node)))
            return rc;
        xf->mistake = (enum cic_mistake)v;
        if (xf->mistake != CIC_MISTAKE_NONE) {
            enum cic_xform_kind need =
                xf->mistake == CIC_MISTAKE_SKIP_MEAN_BAKE ? CIC_XFORM_FUSE_LAYERNORM
                : xf->mistake == CIC_MISTAKE_SKIP_ATTN_OUT
                    ? CIC_XFORM_ROTATE
                    : CIC_XFORM_FOLD_RMSNORM_GAMMA;
            if (xf->kind != need) {
                _cic_pos(node, &l, &col);
                return _cic_fail(x, l, col,
                                 "mistake \"%s\" only applies to kind = \"%s\" "
                                 "(this transform is \"%s\")",
                                 CIC_MISTAKE_NAME[xf->mistake],
                                 CIC_XFORM_NAME[need], CIC_XFORM_NAME[xf->kind]);
            }
        }

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

        /* after: an earlier transform. */
        {
            char after[CIC_NAME_MAX];
            if ((rc = _cic_get_str(x, &t, "after", after, sizeof after, &have,
                                   &node)))
                return rc;
            if (have) {
                int k;
                _cic_pos(node, &l, &col);
                for (k = 0; k < (int)i; k++)
                    if (strcmp(c->xf[k].name, after) == 0)
                        xf->after = k;
                if (xf->after < 0) {
                    _cic_quote(qb, sizeof qb, after, strlen(after));
                    if (strcmp(after, xf->name) == 0)
                        return _cic_fail(x, l, col,
                                         "transform '%s' cannot be applied "
                                         "after itself",
                                         qb);
                    for (j = i + 1; j < n; j++) {
                        cic_case_tab lt = {cic_toml_array_at(arr, j), ""};
                        const cic_toml_node *ln = _cic_find(&lt, "name", NULL,
                                                            NULL);
                        const char *s;
                        size_t len;
                        if (cic_toml_get_string(ln, &s, &len) == CIC_TOML_OK &&
                            len == strlen(after) && memcmp(s, after, len) == 0) {
                            int ll;
                            _cic_pos(lt.tbl, &ll, NULL);
                            return _cic_fail(
                                x, l, col,
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
                                         "'after' names '%s', but no transform "
                                         "is defined before this one",
                                         qb);
                    return _cic_fail(
                        x, l, col,
                        "'after' names '%s', which is not an earlier "
                        "transform; defined so far: %s%s",
                        qb, _cic_join(all, sizeof all, earlier, i),
                        _cic_hint(hint, sizeof hint, after, strlen(after),
                                  earlier, i));
                }
            }
        }
    }
    return _cic_status(x, err0);
}

static int _cic_load_xforms(cic_case_ctx *x, cic_case *c, const cic_toml_node *arr)
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

/* The transform a gate names: "none", "*" or a loaded transform's name. */
static void _cic_gate_transform(cic_case_ctx *x, const cic_case_tab *t, cic_gate_spec *g,
                                const char *const *known, size_t n_known)
{
    const cic_toml_node *node = _cic_find(t, "transform", NULL, NULL);
    const char *s;
    size_t len, k;
    int l, col;
    char qb[96], hint[96], all[CIC_MAX_XFORMS * (CIC_NAME_MAX + 2) + 64];
    cic_strlcpy(g->transform, "*", sizeof g->transform);
    if (!node)
        return;
    if (cic_toml_get_string(node, &s, &len) != CIC_TOML_OK) {
        _cic_wrong_type(x, t, "transform", node, "a string");
        return;
    }
    for (k = 0; k < n_known; k++)
        if (strlen(known[k]) == len && memcmp(known[k], s, len) == 0) {
            cic_strlcpy(g->transform, known[k], sizeof g->transform);
            return;
        }
    _cic_pos(node, &l, &col);
    _cic_fail(x, l, col,
              "gate names transform '%s', which is not defined; allowed: %s%s",
              _cic_quote(qb, sizeof qb, s, len), _cic_join(all, sizeof all, known, n_known),
              _cic_hint(hint, sizeof hint, s, len, known, n_known));
}

/* [[gates]] entry: each key checked on its own. */
static void _cic_load_gate(cic_case_ctx *x, const cic_case *c, const cic_case_tab *t,
                           cic_gate_spec *g, const char *const *known, size_t n_known)
{
    const cic_toml_node *node;
    bool have;
    int l, col, v;

    _cic_check_keys(x, t, _cic_gate_keys, CIC_CASE_LEN(_cic_gate_keys));
    _cic_gate_transform(x, t, g, known, n_known);

    v = 3; /* "*" */
    if (_cic_get_enum(x, t, "engine", _cic_gate_engines, CIC_CASE_LEN(_cic_gate_engines),
                      &v, NULL, &node) == CIC_OK && x->engines_ok &&
        ((v == 0 && !c->f32_openblas) || (v == 1 && !c->f32_fixed))) {
        _cic_pos(node, &l, &col);
        _cic_fail(x, l, col,
                  "gate names engine \"%s\", which is not enabled; "
                  "add \"%s\" to f32 in [engines]",
                  _cic_gate_engines[v], v == 0 ? "openblas" : "fixed-order");
    }
    cic_strlcpy(g->engine, _cic_gate_engines[v], sizeof g->engine);

    v = 0;
    if (_cic_get_enum(x, t, "metric", CIC_GATE_METRICS, CIC_CASE_N_GATE_METRICS, &v,
                      &have, NULL) == CIC_OK && !have)
        _cic_missing(x, t, "metric", NULL);
    cic_strlcpy(g->metric, CIC_GATE_METRICS[v], sizeof g->metric);

    node = _cic_find(t, "max", NULL, NULL);
    if (!node) {
        _cic_missing(x, t, "max", NULL);
        return;
    }
    if (cic_toml_get_number(node, &g->max) != CIC_TOML_OK) {
        _cic_wrong_type(x, t, "max", node, "a number");
        return;
    }
    _cic_pos(node, &l, &col);
    if (isnan(g->max))
        _cic_fail(x, l, col,
                  "'max' in %s is nan; it must be a number (inf for no limit)",
                  t->where);
    else if (g->max < 0)
        _cic_fail(x, l, col,
                  "'max' in %s is %g; every gated metric is >= 0, so a negative "
                  "limit always fails",
                  t->where, g->max);
}

static int _cic_load_gates(cic_case_ctx *x, cic_case *c, const cic_toml_node *arr)
{
    size_t i, n = cic_toml_array_size(arr), n_known = 2;
    int k, err0 = x->n_err;
    char where[64];
    const char *known[CIC_MAX_XFORMS + 2];

    known[0] = "none";
    known[1] = "*";
    for (k = 0; k < c->n_xf; k++)
        if (c->xf[k].name[0]) /* an entry whose name did not load has none */
            known[n_known++] = c->xf[k].name;

    c->n_gates = 0;
    for (i = 0; i < n; i++) {
        cic_gate_spec *g = &c->gates[i];
        cic_case_tab t;
        int col;
        t.tbl = cic_toml_array_at(arr, i);
        snprintf(where, sizeof where, "[[gates]] entry %zu", i + 1);
        t.where = where;
        _cic_pos(t.tbl, &g->line, &col);
        _cic_load_gate(x, c, &t, g, known, n_known);
        c->n_gates = (int)i + 1;
    }
    return _cic_status(x, err0);
}

/* ---- sweeps ------------------------------------------------------------ */

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

/* [sweep]: lists checked value by value (type, range, duplicates), the
 * point count against max_points. Runs before [model], whose required keys
 * a list may stand in for. */
static int _cic_load_sweep(cic_case_ctx *x, cic_case *c, const cic_toml_node *st)
{
    cic_sweep *s = &c->sweep;
    cic_case_tab t = {st, "[sweep]"};
    const char *allowed[CIC_AXIS_COUNT + 1];
    int64_t maxp = CIC_SWEEP_DEFAULT_MAX_POINTS, points = 1;
    int rc, a, l, col;
    char vb[48];

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
        const char *key = CIC_AXIS_NAME[a];
        int64_t lo, hi;
        bool isint = _cic_axis_range(a, &lo, &hi);
        const cic_toml_node *list = _cic_find(&t, key, NULL, NULL);
        size_t i, j, cnt;
        if (!list)
            continue;
        if (cic_toml_node_type(list) != CIC_TOML_ARRAY)
            return _cic_wrong_type(x, &t, key, list,
                                   isint ? "a list of integers"
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
            if (isint) {
                int64_t iv;
                if (cic_toml_get_int(e, &iv) != CIC_TOML_OK) {
                    char extra[96] = "";
                    double f = 0;
                    if (cic_toml_get_float(e, &f) == CIC_TOML_OK &&
                        isfinite(f) && f == floor(f) && fabs(f) < 1e15)
                        snprintf(extra, sizeof extra,
                                 " (write %.0f, without a decimal point)", f);
                    return _cic_fail(x, el, ec,
                                     "wrong type for value %zu of '%s' in "
                                     "[sweep]: expected an integer, got %s%s",
                                     i + 1, key,
                                     cic_toml_type_name(cic_toml_node_type(e)),
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
                                     i + 1, key, (long long)iv, (long long)lo,
                                     (long long)hi);
                }
                v = (double)iv;
            } else {
                if (cic_toml_get_number(e, &v) != CIC_TOML_OK)
                    return _cic_fail(x, el, ec,
                                     "wrong type for value %zu of '%s' in "
                                     "[sweep]: expected a number, got %s",
                                     i + 1, key,
                                     cic_toml_type_name(cic_toml_node_type(e)));
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
            }
            for (j = 0; j < i; j++)
                if (s->v[a][j] == v)
                    return _cic_fail(x, el, ec,
                                     "'%s' in [sweep] lists %s twice (values "
                                     "%zu and %zu); the values of a sweep list "
                                     "must be distinct",
                                     key, _cic_axis_fmt(vb, sizeof vb, a, v),
                                     j + 1, i + 1);
            s->v[a][i] = v;
        }
        s->n[a] = (int)cnt;
        points *= (int64_t)cnt; /* <= 64^10 = 2^60 */
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

#define CIC_CASE_SWEEP_POS(c, l, col, ...)                                         \
    do {                                                                       \
        static const enum cic_sweep_axis ax_[] = {__VA_ARGS__};                \
        _cic_sweep_pos((c), ax_, CIC_CASE_LEN(ax_), (l), (col));                   \
    } while (0)

/* "case too large: ..." for the memory estimate of m. */
static int _cic_memory_fail(cic_case_ctx *x, int l, int col, const char *prefix,
                            const cic_model_cfg *m, int n_xf, int prec)
{
    uint64_t w, wb, ab, total;
    _cic_memory_parts_m(m, n_xf, prec, &w, &wb, &ab);
    total = _cic_sat_add(wb, ab);
    return _cic_fail(
        x, l, col,
        "%scase too large: estimated memory %.1f GiB exceeds the limit "
        "of %.0f GiB (weights %.1f GiB: %llu weights in %d copies, "
        "the original, %d transformed models held at once and a scratch set, at mpfr_prec "
        "%d; activations %.1f GiB for %d tokens x %d samples); shrink "
        "d_model, layers or mlp_ratio (weights) or tokens and samples "
        "(activations), or use fewer transforms or a lower mpfr_prec",
        prefix, (double)total / (1u << 30),
        (double)CIC_CASE_MEMORY_LIMIT / (1u << 30), (double)wb / (1u << 30),
        (unsigned long long)w, n_xf + 2, n_xf, prec, (double)ab / (1u << 30),
        m->tokens, m->samples);
}

/* Point i of c's sweep (0 <= i < the product of the list lengths) into *m
 * and *prec, checked as the loader checks the scalar keys: ranges,
 * d_model % heads, an integer MLP width, rows, outlier_channels <= d_model,
 * static-fold calibration < samples, d_cond only for dit, the memory
 * estimate. Errors point at the relevant list. */
static int _cic_sweep_check(cic_case_ctx *x, const cic_case *c, long i,
                            cic_model_cfg *m, int *prec)
{
    const cic_sweep *s = &c->sweep;
    int digit[CIC_AXIS_COUNT];
    long r = i;
    char pd[400], vb[48];
    size_t o;
    int k, a, l, col;
    uint64_t w, wb, ab;

    *m = c->model;
    *prec = c->mpfr_prec;
    for (k = 0; k < CIC_AXIS_COUNT; k++) {
        a = _cic_sweep_digits[k];
        digit[a] = 0;
        if (s->n[a] > 0) {
            digit[a] = (int)(r % s->n[a]);
            r /= s->n[a];
        }
    }
    /* "sweep point 3 of 6 (d_model = 32, seed = 2): " */
    o = (size_t)snprintf(pd, sizeof pd, "sweep point %ld of %ld (", i,
                         s->points);
    for (a = 0, k = 0; a < CIC_AXIS_COUNT && o < sizeof pd; a++) {
        if (s->n[a] <= 0)
            continue;
        o += (size_t)snprintf(pd + o, sizeof pd - o, "%s%s = %s", k++ ? ", " : "",
                              CIC_AXIS_NAME[a],
                              _cic_axis_fmt(vb, sizeof vb, a,
                                            s->v[a][digit[a]]));
    }
    if (o < sizeof pd)
        snprintf(pd + o, sizeof pd - o, "): ");

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
            if (m->block != CIC_BLOCK_DIT)
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
    if (m->block == CIC_BLOCK_DIT && s->d_cond_default &&
        s->n[CIC_AXIS_D_COND] == 0)
        m->d_cond = m->d_model;

    if (m->heads < 1 || m->d_model % m->heads != 0) {
        CIC_CASE_SWEEP_POS(c, &l, &col, CIC_AXIS_HEADS, CIC_AXIS_D_MODEL);
        return _cic_fail(x, l, col,
                         "%sd_model = %d is not divisible by heads = %d (the "
                         "head size d_model / heads must be an integer)",
                         pd, m->d_model, m->heads);
    }
    {
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
        if (xf->kind == CIC_XFORM_STATIC_FOLD &&
            xf->calibration >= m->samples) {
            CIC_CASE_SWEEP_POS(c, &l, &col, CIC_AXIS_SAMPLES);
            return _cic_fail(x, l, col,
                             "%stransform '%s' has calibration = %d, but the "
                             "sample index must be 0 .. %d (samples = %d)",
                             pd, xf->name, xf->calibration, m->samples - 1,
                             m->samples);
        }
    }
    _cic_memory_parts_m(m, _cic_xforms_live(c), *prec, &w, &wb, &ab);
    if (_cic_sat_add(wb, ab) > CIC_CASE_MEMORY_LIMIT) {
        CIC_CASE_SWEEP_POS(c, &l, &col, CIC_AXIS_D_MODEL, CIC_AXIS_TOKENS,
                       CIC_AXIS_LAYERS, CIC_AXIS_MPFR_PREC, CIC_AXIS_SAMPLES,
                       CIC_AXIS_D_COND);
        return _cic_memory_fail(x, l, col, pd, m, _cic_xforms_live(c), *prec);
    }
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

/* Default case name: the file's stem ("cases/ln.toml" -> "ln"). */
static void _cic_stem(char *out, size_t cap, const char *path)
{
    const char *b = strrchr(path, '/'), *dot;
    size_t len;
    b = b ? b + 1 : path;
    dot = strrchr(b, '.');
    len = dot && dot != b ? (size_t)(dot - b) : strlen(b);
    if (len == 0) {
        cic_strlcpy(out, "case", cap);
        return;
    }
    if (len >= cap)
        len = cap - 1;
    memcpy(out, b, len);
    out[len] = '\0';
}

/* name: given, or the file's stem (only a case loaded from a file has one;
 * "case" otherwise); either way a valid name, since it names report folders
 * and baseline files. */
static void _cic_load_name(cic_case_ctx *x, cic_case *c, const cic_case_tab *root,
                           bool from_file)
{
    char nm[CIC_NAME_MAX], qb[96];
    const cic_toml_node *nn;
    bool have;
    int l, col;
    if (_cic_get_str(x, root, "name", nm, sizeof nm, &have, &nn) != CIC_OK)
        return;
    if (have) {
        _cic_pos(nn, &l, &col);
        if (!_cic_name_ok(nm)) {
            _cic_fail(x, l, col,
                      "case name '%s' may only use letters, digits, '_', '.' "
                      "and '-', and may not start with '.' (it names the "
                      "report folder and the baseline file)",
                      _cic_quote(qb, sizeof qb, nm, strlen(nm)));
            return;
        }
        cic_strlcpy(c->name, nm, sizeof c->name);
        return;
    }
    if (!from_file)
        cic_strlcpy(c->name, "case", sizeof c->name);
    else if (!_cic_name_ok(c->name))
        _cic_fail(x, 1, 1,
                  "the case has no 'name', and the one its file name gives, "
                  "'%s', may only use letters, digits, '_', '.' and '-', and "
                  "may not start with '.' (it names the report folder and the "
                  "baseline file); add name = \"...\" at the top of the file",
                  _cic_quote(qb, sizeof qb, c->name, strlen(c->name)));
}

/* ---- entry points ------------------------------------------------------ */

static int _cic_load_text(cic_case *c, const char *text, size_t len,
                          const char *path, cic_diag *d)
{
    cic_case_ctx x;
    cic_toml_doc *doc = NULL;
    cic_toml_error te;
    const cic_toml_node *root, *mt, *et, *rt, *xa, *ga, *st;
    cic_case_tab rtab;
    int rc;
    const char *file = path ? path : "<string>";

    memset(&x, 0, sizeof x);
    x.d = d;
    x.file = file;
    cic_diag_set(d, file, 0, 0, "%s", ""); /* no errors yet (NULL d: none kept) */
    memset(c, 0, sizeof *c);
    cic_strlcpy(c->path, file, sizeof c->path);
    _cic_stem(c->name, sizeof c->name, file);

    rc = cic_toml_parse_string(&doc, text, len, file, &te);
    if (rc == CIC_TOML_ESYNTAX) {
        rc = _cic_fail(&x, te.line, te.column, "TOML syntax error: %s", te.msg);
        goto cleanup;
    }
    if (rc != CIC_TOML_OK) {
        cic_diag_set(d, file, 0, 0, "cannot parse case file: %s", te.msg);
        rc = CIC_EINTERNAL;
        goto cleanup;
    }
    root = cic_toml_doc_root(doc);
    rtab.tbl = root;
    rtab.where = "the top level";
    if (cic_toml_table_size(root) == 0) {
        rc = _cic_fail(&x, 1, 1,
                       "case file is empty; it needs at least a [model] table "
                       "with block, d_model, heads, tokens, samples and layers");
        goto cleanup;
    }
    _cic_check_keys(&x, &rtab, _cic_root_keys, CIC_CASE_LEN(_cic_root_keys));
    _cic_load_name(&x, c, &rtab, path != NULL);
    _cic_get_table(&x, &rtab, "model", "[model]", &mt);
    _cic_get_table(&x, &rtab, "engines", "[engines]", &et);
    _cic_get_table(&x, &rtab, "readout", "[readout]", &rt);
    _cic_get_aot(&x, &rtab, "transforms", CIC_MAX_XFORMS, &xa);
    _cic_get_aot(&x, &rtab, "gates", CIC_MAX_GATES, &ga);
    _cic_get_table(&x, &rtab, "sweep", "[sweep]", &st);
    if (!mt) {
        if (!_cic_find(&rtab, "model", NULL, NULL) && !_cic_typo(&x, root, "model"))
            _cic_fail(&x, 1, 1,
                      "missing the [model] table (block, d_model, heads, "
                      "tokens, samples, layers)");
        rc = CIC_EINPUT;
        goto cleanup;
    }
    /* sweep lists stand in for model keys: a bad list stops here */
    if (_cic_load_sweep(&x, c, st) != CIC_OK) {
        rc = CIC_EINPUT;
        goto cleanup;
    }
    _cic_load_model(&x, c, mt);
    _cic_load_engines(&x, c, et);
    _cic_load_readout(&x, c, rt);
    _cic_load_xforms(&x, c, xa);
    _cic_load_gates(&x, c, ga);
    if (x.n_err > 0) {
        rc = CIC_EINPUT;
        goto cleanup;
    }

    /* Every point of a sweep must be a valid case (points <= max_points,
     * at most CIC_SWEEP_MAX_POINTS_LIMIT); the case itself is point 0. */
    if (c->sweep.on) {
        cic_case_tab stab = {st, "[sweep]"};
        cic_model_cfg pm;
        int pprec, l, col;
        long i;
        if (c->sweep.n[CIC_AXIS_D_COND] > 0 &&
            c->model.block != CIC_BLOCK_DIT &&
            _cic_find(&stab, "d_cond", &l, &col)) {
            rc = _cic_fail(&x, l, col,
                           "'d_cond' is only allowed for block = \"dit\" "
                           "(this model is \"%s\"); remove it from [sweep]",
                           CIC_BLOCK_NAME[c->model.block]);
            goto cleanup;
        }
        for (i = 0; i < c->sweep.points; i++)
            if ((rc = _cic_sweep_check(&x, c, i, &pm, &pprec)))
                goto cleanup;
        rc = _cic_sweep_check(&x, c, 0, &pm, &pprec);
        CIC_ASSERT(rc == CIC_OK);
        c->model = pm;
        c->mpfr_prec = pprec;
    }

    if (cic_case_memory_estimate(c) > CIC_CASE_MEMORY_LIMIT) {
        int l, col;
        _cic_pos(mt, &l, &col);
        rc = _cic_memory_fail(&x, l, col, "", &c->model, _cic_xforms_live(c),
                              c->mpfr_prec);
        goto cleanup;
    }
    rc = CIC_OK;

cleanup:
    cic_toml_doc_free(doc);
    _cic_flush(&x);
    if (rc != CIC_OK) {
        memset(c, 0, sizeof *c);
    }
    return rc;
}

int cic_case_load_string(cic_case *c, const char *text, const char *path,
                         cic_diag *d)
{
    CIC_ASSERT(c);
    if (!text) {
        memset(c, 0, sizeof *c);
        cic_diag_set(d, path ? path : "<string>", 0, 0, "no case text");
        return CIC_EINPUT;
    }
    return _cic_load_text(c, text, strlen(text), path, d);
}

int cic_case_load(cic_case *c, const char *path, cic_diag *d)
{
    FILE *f = NULL;
    char *buf = NULL;
    size_t len = 0, cap = 0;
    int rc;

    CIC_ASSERT(c);
    memset(c, 0, sizeof *c);
    if (!path || !*path) {
        cic_diag_set(d, "", 0, 0, "no case file given");
        return CIC_EINPUT;
    }
    f = fopen(path, "rb");
    if (!f) {
        cic_diag_set(d, path, 0, 0, "cannot open case file: %s",
                     strerror(errno));
        rc = CIC_EINPUT;
        goto cleanup;
    }
    for (;;) {
        size_t got;
        if (len == cap) {
            char *nb;
            if (cap >= (size_t)CIC_CASE_MAX_FILE_BYTES) {
                if (fgetc(f) == EOF)
                    break;
                cic_diag_set(d, path, 0, 0,
                             "case file too large (more than %d bytes)",
                             CIC_CASE_MAX_FILE_BYTES);
                rc = CIC_EINPUT;
                goto cleanup;
            }
            cap = cap ? cap * 2 : 4096;
            if (cap > (size_t)CIC_CASE_MAX_FILE_BYTES)
                cap = CIC_CASE_MAX_FILE_BYTES;
            nb = realloc(buf, cap + 1);
            if (!nb) {
                cic_diag_set(d, path, 0, 0, "out of memory reading case file");
                rc = CIC_EINTERNAL;
                goto cleanup;
            }
            buf = nb;
        }
        got = fread(buf + len, 1, cap - len, f);
        len += got;
        if (got == 0)
            break;
    }
    if (ferror(f)) {
        cic_diag_set(d, path, 0, 0, "cannot read case file: %s",
                     strerror(errno ? errno : EIO));
        rc = CIC_EINPUT;
        goto cleanup;
    }
    /* Embedded NUL bytes go to the parser with the length, which rejects
     * them with a position. */
    rc = _cic_load_text(c, buf ? buf : "", len, path, d);

cleanup:
    if (f)
        fclose(f);
    free(buf);
    if (rc != CIC_OK && rc != CIC_EINPUT && rc != CIC_EINTERNAL)
        rc = CIC_EINPUT;
    return rc;
}
