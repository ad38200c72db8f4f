/* SPDX-License-Identifier: MIT */
/* load_engines.c: the [engines] table (which f32 engines run, the MPFR
 * precision, the engine that decides the verdict) and the [readout] table
 * (what the model's output is). */
#include "case_int.h"

#include "../kind/engine_id.h"

#include <string.h>

/* Allowed keys, in the order they are documented. */
static const char *const _cic_engines_keys[] = {"f32", "mpfr_prec", "verdict", "lowp"};
static const char *const _cic_readout_keys[] = {"kind"};

/* 'f32' in [engines]: a non-empty list of distinct engine names. */
static int _cic_load_f32(cic_case_ctx *x, cic_case *c, const cic_case_tab *t,
                         const cic_toml_node *f32)
{
    size_t i, n;
    int l, col;
    char qb[96], all[128], hint[96];

    if (cic_toml_node_type(f32) != CIC_TOML_ARRAY)
        return _cic_wrong_type(x, t, "f32", f32,
                               "an array of strings (\"" CIC_MATMUL_OPENBLAS_NAME
                               "\", \"" CIC_MATMUL_FIXED_NAME "\")");
    n = cic_toml_array_size(f32);
    if (n == 0) {
        _cic_pos(f32, &l, &col);
        return _cic_fail(x, l, col,
                         "'f32' in [engines] is empty; list at least one "
                         "of: " CIC_MATMUL_OPENBLAS_NAME ", " CIC_MATMUL_FIXED_NAME);
    }
    c->f32_openblas = false;
    c->f32_fixed = false;
    for (i = 0; i < n; i++) {
        const cic_toml_node *e = cic_toml_array_at(f32, i);
        const char *s;
        size_t len;
        int mm;
        bool *slot;
        _cic_pos(e, &l, &col);
        if (cic_toml_get_string(e, &s, &len) != CIC_TOML_OK)
            return _cic_fail(x, l, col,
                             "wrong type in 'f32' in [engines]: expected "
                             "a string, got %s",
                             cic_toml_type_name(cic_toml_node_type(e)));
        for (mm = 0; mm < CIC_MATMUL_COUNT; mm++)
            if (strlen(CIC_MATMUL_NAME[mm]) == len && memcmp(s, CIC_MATMUL_NAME[mm], len) == 0)
                break;
        slot = mm == CIC_MATMUL_OPENBLAS ? &c->f32_openblas : &c->f32_fixed;
        if (mm == CIC_MATMUL_COUNT)
            return _cic_fail(
                x, l, col, "bad value '%s' in 'f32' in [engines]; allowed: %s%s",
                _cic_quote(qb, sizeof qb, s, len),
                _cic_join(all, sizeof all, CIC_MATMUL_NAME, CIC_MATMUL_COUNT),
                _cic_hint(hint, sizeof hint, s, len, CIC_MATMUL_NAME, CIC_MATMUL_COUNT));
        if (*slot)
            return _cic_fail(x, l, col, "'%s' is listed twice in 'f32' in [engines]",
                             _cic_quote(qb, sizeof qb, s, len));
        *slot = true;
    }
    return CIC_OK;
}

int _cic_load_engines(cic_case_ctx *x, cic_case *c, const cic_toml_node *et)
{
    cic_case_tab t = {et, "[engines]"};
    const cic_toml_node *f32;
    int err0 = x->n_err, v = CIC_VERDICT_ENGINE_MPFR;

    c->f32_openblas = true;
    c->f32_fixed = true;
    c->mpfr_prec = 64;
    c->verdict_engine = CIC_VERDICT_ENGINE_MPFR;
    c->n_lowp = 0;
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
    if (_cic_load_lowp(x, c, &t) != CIC_OK)
        x->engines_ok = false;
    return _cic_status(x, err0);
}

int _cic_load_readout(cic_case_ctx *x, cic_case *c, const cic_toml_node *rt)
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
