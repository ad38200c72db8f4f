/* SPDX-License-Identifier: MIT */
/* load.c: the entry points of the case loader (layout in case.h). Reads a
 * TOML case through the toml++ wrapper (toml_capi.h), loads each section
 * (the files named in case_int.h), applies the defaults and checks every
 * rule, and either fills a cic_case that the rest of cicheck trusts or
 * returns CIC_EINPUT with a cic_diag "file:line:column: message".
 *
 * The loader is strict and tries to be helpful: unknown keys and bad enum
 * values list what is allowed and the closest spelling, type errors name
 * both types, range errors give the range. It is written to be fuzzed:
 * every integer is range-checked as int64 before it is narrowed, size
 * products use saturating uint64 arithmetic, and strings from the file are
 * escaped before they reach a message. */
#include "case_int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Allowed keys, in the order they are documented. */
static const char *const _cic_root_keys[] = {"name",    "model",      "engines",
                                             "readout", "transforms", "gates",
                                             "sweep",   "input"};

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

/* The document root: its keys, the case name, every section. CIC_OK when
 * all loaded without an error; *mt and *st are the [model] and [sweep]
 * tables (NULL when absent) for the checks of the whole case. */
static int _cic_load_root(cic_case_ctx *x, cic_case *c, const cic_toml_node *root,
                          bool from_file, const cic_toml_node **mt,
                          const cic_toml_node **st)
{
    const cic_toml_node *et, *rt, *xa, *ga, *it;
    cic_case_tab rtab;

    rtab.tbl = root;
    rtab.where = "the top level";
    if (cic_toml_table_size(root) == 0)
        return _cic_fail(x, 1, 1,
                         "case file is empty; it needs at least a [model] table "
                         "with block, d_model, heads, tokens, samples and layers");
    _cic_check_keys(x, &rtab, _cic_root_keys, CIC_CASE_LEN(_cic_root_keys));
    _cic_load_name(x, c, &rtab, from_file);
    _cic_get_table(x, &rtab, "model", "[model]", mt);
    _cic_get_table(x, &rtab, "engines", "[engines]", &et);
    _cic_get_table(x, &rtab, "readout", "[readout]", &rt);
    _cic_get_aot(x, &rtab, "transforms", CIC_MAX_XFORMS, &xa);
    _cic_get_aot(x, &rtab, "gates", CIC_MAX_GATES, &ga);
    _cic_get_table(x, &rtab, "sweep", "[sweep]", st);
    _cic_get_table(x, &rtab, "input", "[input]", &it);
    if (!*mt) {
        if (!_cic_find(&rtab, "model", NULL, NULL) && !_cic_typo(x, root, "model"))
            _cic_fail(x, 1, 1,
                      "missing the [model] table (block, d_model, heads, "
                      "tokens, samples, layers)");
        return CIC_EINPUT;
    }
    /* sweep lists stand in for model keys: a bad list stops here */
    if (_cic_load_sweep(x, c, *st) != CIC_OK)
        return CIC_EINPUT;
    if (_cic_load_model(x, c, *mt) == CIC_OK)
        _cic_load_input(x, c, it);
    _cic_load_engines(x, c, et);
    _cic_load_readout(x, c, rt);
    _cic_load_xforms(x, c, xa);
    _cic_load_gates(x, c, ga);
    return x->n_err > 0 ? CIC_EINPUT : CIC_OK;
}

static int _cic_load_text(cic_case *c, const char *text, size_t len,
                          const char *path, cic_diag *d)
{
    cic_case_ctx x;
    cic_toml_doc *doc = NULL;
    cic_toml_error te;
    const cic_toml_node *mt = NULL, *st = NULL;
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
    if ((rc = _cic_load_root(&x, c, cic_toml_doc_root(doc), path != NULL, &mt, &st)))
        goto cleanup;
    if (c->sweep.on && (rc = _cic_sweep_check_all(&x, c, st)))
        goto cleanup;
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
    char *buf = NULL;
    size_t len = 0;
    int rc;

    CIC_ASSERT(c);
    memset(c, 0, sizeof *c);
    if (!path || !*path) {
        cic_diag_set(d, "", 0, 0, "no case file given");
        return CIC_EINPUT;
    }
    /* never blocks on a FIFO, never reads past the cap (a link to
     * /dev/zero is a device, refused) */
    rc = cic_file_read(&buf, &len, path, (size_t)CIC_CASE_MAX_FILE_BYTES, "a case file (TOML)", d);
    if (rc != CIC_OK)
        return rc;
    /* Embedded NUL bytes go to the parser with the length, which rejects
     * them with a position. */
    rc = _cic_load_text(c, buf, len, path, d);
    free(buf);
    if (rc != CIC_OK && rc != CIC_EINPUT && rc != CIC_EINTERNAL)
        rc = CIC_EINPUT;
    return rc;
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
