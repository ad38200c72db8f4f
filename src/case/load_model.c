/* SPDX-License-Identifier: MIT */
/* load_model.c: the [model] table and its [model.weights]: the block kind,
 * the sizes (d_model divisible by heads, a whole MLP width, rows within the
 * limit), the per-block defaults, and the weight distribution within the
 * limits binary32 sets. A key with a list in [sweep] takes its first value
 * here; the checks that combine it with other keys run per point
 * (sweep.c). */
#include "case_int.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

/* Allowed keys, in the order they are documented. */
static const char *const _cic_model_keys[] = {
    "block",  "d_model",    "heads", "mlp_ratio", "tokens", "samples",
    "layers", "eps",        "causal", "activation", "d_out", "d_cond",
    "final_layer", "rope",  "rope_theta", "kv_heads", "qkv_bias", "seed", "weights",
    "checkpoint"};
static const char *const _cic_weights_keys[] = {"dist", "std",
                                                "outlier_channels",
                                                "outlier_scale",
                                                "massive_channels",
                                                "massive_tokens",
                                                "massive_scale"};

/* The numeric limits that binary32 sets. Every engine uses eps as its
 * binary32 value, so that value must be > 0 and finite. Weights are binary32
 * draws std * z: |z| < CIC_CASE_ZMAX for a normal (Box-Muller from a uniform
 * of 53 bits, never below 2^-54: sqrt(-2 ln 2^-54) = 8.65) and |z| <= sqrt(3)
 * for a uniform. Outlier channels multiply the block input (std 1) and the
 * writers' rows by the binary32 value of outlier_scale. So std must be at
 * least FLT_MIN (below, the weights are subnormal or zero: a run of such a
 * model passes and means nothing), and max(std, 1) * outlier_scale *
 * CIC_CASE_ZMAX at most FLT_MAX (above, weights overflow to Inf and the truth
 * itself is not a number). */
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
int _cic_check_scale(cic_case_ctx *x, const cic_model_cfg *m, int l, int col,
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
    int l, col, v = 0, k;
    char hint[160], kinds[160] = " (";

    x->block_ok = false;
    if (_cic_get_enum(x, t, "block", CIC_BLOCK_NAME, CIC_BLOCK_COUNT, &v, &have,
                      NULL) == CIC_OK) {
        if (have)
            x->block_ok = true;
        else {
            for (k = 0; k < CIC_BLOCK_COUNT; k++)
                snprintf(kinds + strlen(kinds), sizeof kinds - strlen(kinds), "%s%s%s",
                         k == 0 ? "" : k + 1 < CIC_BLOCK_COUNT ? ", " : " or ",
                         CIC_BLOCK_NAME[k], k + 1 < CIC_BLOCK_COUNT ? "" : ")");
            _cic_missing(x, t, "block", kinds);
        }
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

/* eps, causal, activation, d_out, d_cond, final_layer, rope, rope_theta,
 * kv_heads, seed. */
static void _cic_load_misc(cic_case_ctx *x, cic_case *c, const cic_case_tab *t)
{
    cic_model_cfg *m = &c->model;
    const cic_toml_node *n;
    bool have;
    int l, col, v;
    int64_t seed = 0;

    _cic_block_defaults(m); /* eps, activation */
    if (_cic_get_num(x, t, "eps", true, INFINITY, &m->eps, &have, &n) == CIC_OK &&
        have) {
        _cic_pos(n, &l, &col);
        _cic_check_eps(x, l, col, "", m->eps);
    }
    m->causal = false;
    _cic_get_bool(x, t, "causal", &m->causal);
    v = (int)m->act;
    _cic_get_enum(x, t, "activation", CIC_ACT_NAME, CIC_ACT_COUNT, &v, NULL, NULL);
    m->act = (enum cic_act)v;
    m->d_out = m->d_model;
    _cic_get_intf(x, t, "d_out", 1, CIC_CASE_MAX_DIM, &m->d_out, &have, NULL);
    c->sweep.d_out_default = !have;

    _cic_block_keys(x, c, t); /* d_cond, final_layer */
    _cic_block_attn_keys(x, c, t); /* rope, rope_theta, kv_heads */
    if (_cic_block_has_cond(m->block))
        _cic_sweep_first_int(c, CIC_AXIS_D_COND, &m->d_cond, NULL);

    _cic_get_int(x, t, "seed", 0, INT64_MAX, &seed, NULL, NULL);
    m->seed = (uint64_t)seed;
    if (_cic_swept(c, CIC_AXIS_SEED))
        m->seed = (uint64_t)c->sweep.v[CIC_AXIS_SEED][0];
}

/* [model.weights] massive_channels (0 .. d_model), massive_tokens
 * (1 .. tokens, default 1), massive_scale (> 0, at most 1e6, default 100):
 * massive activations in the block input. */
static void _cic_load_massive(cic_case_ctx *x, cic_case *c, const cic_case_tab *wt, bool ok_d)
{
    cic_model_cfg *m = &c->model;
    int dmax = _cic_swept(c, CIC_AXIS_D_MODEL) || !ok_d ? CIC_CASE_MAX_DIM : m->d_model;
    int tmax = _cic_swept(c, CIC_AXIS_TOKENS) || m->tokens <= 0 ? CIC_CASE_MAX_TOKENS
                                                                : m->tokens;
    _cic_get_intf(x, wt, "massive_channels", 0, dmax, &m->massive_channels, NULL, NULL);
    _cic_get_intf(x, wt, "massive_tokens", 1, tmax, &m->massive_tokens, NULL, NULL);
    _cic_get_num(x, wt, "massive_scale", true, 1e6, &m->massive_scale, NULL, NULL);
}

/* [model.weights]: dist, std, outlier_channels, outlier_scale, massive_*;
 * with a checkpoint (its weights) massive_* alone, on the block input. */
static void _cic_load_weights(cic_case_ctx *x, cic_case *c, const cic_case_tab *t, bool ok_d,
                              bool ckpt)
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
    m->massive_channels = 0;
    m->massive_tokens = 1;
    m->massive_scale = 100;
    if (_cic_get_table(x, t, "weights", "[model.weights]", &wtab) != CIC_OK || !wtab)
        return;
    wt.tbl = wtab;
    if (ckpt) {
        static const char *const massive[] = {"massive_channels", "massive_tokens",
                                              "massive_scale"};
        _cic_check_keys(x, &wt, massive, CIC_CASE_LEN(massive));
        _cic_load_massive(x, c, &wt, ok_d);
        return;
    }
    _cic_check_keys(x, &wt, _cic_weights_keys, CIC_CASE_LEN(_cic_weights_keys));
    _cic_load_massive(x, c, &wt, ok_d);
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

int _cic_load_model(cic_case_ctx *x, cic_case *c, const cic_toml_node *mt)
{
    cic_case_tab t = {mt, "[model]"};
    cic_model_cfg *m = &c->model;
    int err0 = x->n_err;

    if (_cic_find(&t, "checkpoint", NULL, NULL)) { /* a user's model (load_ckpt.c) */
        _cic_load_checkpoint(x, c, &t);
        _cic_load_weights(x, c, &t, true, true);
        return _cic_status(x, err0);
    }
    _cic_check_keys(x, &t, _cic_model_keys, CIC_CASE_LEN(_cic_model_keys));
    _cic_load_sizes(x, c, &t, mt);
    _cic_load_misc(x, c, &t);
    /* outlier_channels <= d_model needs a loaded d_model (> 0 once loaded) */
    _cic_load_weights(x, c, &t, m->d_model > 0, false);
    if (_cic_swept(c, CIC_AXIS_STD))
        m->std = c->sweep.v[CIC_AXIS_STD][0];
    if (_cic_swept(c, CIC_AXIS_OUTLIER_SCALE))
        m->outlier_scale = c->sweep.v[CIC_AXIS_OUTLIER_SCALE][0];
    return _cic_status(x, err0);
}
