/* SPDX-License-Identifier: MIT */
/* load_gates.c: the [[gates]] entries, each a limit on one metric of a
 * transform (or "none", "*") under an engine: the transform must be defined,
 * the engine enabled in [engines], the metric one of CIC_GATE_METRICS and
 * the limit a number >= 0. Every key of every entry is checked. */
#include "case_int.h"

#include "../kind/engine_id.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* Allowed keys, in the order they are documented. */
static const char *const _cic_gate_keys[] = {"transform", "engine", "metric",
                                             "max"};

const char *const CIC_GATE_METRICS[] = {
    "max_abs",      "rel_norm2",     "ulp_row.max",  "ulp_row.p99",
    "ulp_row.mean", "ulp_elem.max",  "ulp_elem.p99", "ulp_elem.mean",
    "drift.max",    "drift.p99",     "drift.mean",   "ce_residual",
    "nonfinite",    NULL};
#define CIC_CASE_N_GATE_METRICS (CIC_CASE_LEN(CIC_GATE_METRICS) - 1)

/* The engines a gate can name (those with result rows: the f32 engines and
 * mpfr, in the engine table's order, then the case's low-precision
 * engines), then "*"; returns how many. eng[k] is engine id[k] (id -1 for a
 * low-precision engine and for "*"). */
static size_t _cic_gate_engines(const cic_case *c, const char **eng, int *id)
{
    size_t n = 0;
    int e;
    for (e = 0; e < CIC_ENGINE_COUNT; e++)
        if (CIC_ENGINE_DESC[e].arith != CIC_ARITH_F64) {
            id[n] = e;
            eng[n++] = CIC_ENGINE_NAME[e];
        }
    for (e = 0; e < c->n_lowp; e++) {
        id[n] = -1;
        eng[n++] = c->lowp[e].name;
    }
    id[n] = -1;
    eng[n++] = "*";
    return n;
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
    int l, col, v, id[CIC_ENGINE_COUNT + CIC_MAX_LOWP + 1];
    const char *eng[CIC_ENGINE_COUNT + CIC_MAX_LOWP + 1];
    size_t n_eng = _cic_gate_engines(c, eng, id);

    _cic_check_keys(x, t, _cic_gate_keys, CIC_CASE_LEN(_cic_gate_keys));
    _cic_gate_transform(x, t, g, known, n_known);

    v = (int)n_eng - 1; /* "*" */
    if (_cic_get_enum(x, t, "engine", eng, n_eng, &v, NULL, &node) == CIC_OK &&
        x->engines_ok && id[v] >= 0 && CIC_ENGINE_DESC[id[v]].arith == CIC_ARITH_F32 &&
        !(CIC_ENGINE_DESC[id[v]].mm == CIC_MATMUL_OPENBLAS ? c->f32_openblas
                                                           : c->f32_fixed)) {
        _cic_pos(node, &l, &col);
        _cic_fail(x, l, col,
                  "gate names engine \"%s\", which is not enabled; "
                  "add \"%s\" to f32 in [engines]",
                  eng[v], CIC_MATMUL_NAME[CIC_ENGINE_DESC[id[v]].mm]);
    }
    cic_strlcpy(g->engine, eng[v], sizeof g->engine);

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

int _cic_load_gates(cic_case_ctx *x, cic_case *c, const cic_toml_node *arr)
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
