/* SPDX-License-Identifier: MIT */
/* load_ckpt.c: [model] checkpoint = "DIR", a user's Hugging Face checkpoint
 * (src/model/checkpoint.h). DIR is relative to the case file's folder
 * (absolute as it is). The sizes, norm, activation, RoPE and head come from
 * its config.json, so the keys that set them are refused; what the case
 * says is how to run it: tokens, samples, which layers (`layers = N`: the
 * first N, or "a-b": a to b, 0-based and inclusive; default every layer),
 * the seed of the block input and its massive activations. */
#include "case_int.h"

#include "../model/checkpoint.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const _cic_ckpt_keys[] = {"checkpoint", "tokens", "samples",
                                             "layers",     "seed",   "weights"};
/* the keys config.json decides */
static const char *const _cic_ckpt_from_config[] = {
    "block", "d_model",  "heads", "mlp_ratio",  "eps",      "causal",     "activation",
    "d_out", "d_cond", "final_layer", "rope", "rope_theta", "kv_heads", "qkv_bias"};

/* A layer index: decimal digits only (no sign, no space), at most
 * INT_MAX; -1 otherwise. *end after the digits. */
static long layer_index(const char *s, const char **end)
{
    long v = 0;
    const char *p = s;
    for (; *p >= '0' && *p <= '9'; p++) {
        if (v > (INT_MAX - (*p - '0')) / 10)
            return -1; /* overflow: past any checkpoint (and int) */
        v = 10 * v + (*p - '0');
    }
    *end = p;
    return p == s ? -1 : v;
}

/* layers = N or "a-b" into *layer0, *n (n = 0: every layer, set once the
 * checkpoint is open), its position into *l, *col (0 when absent). */
static int ckpt_layers(cic_case_ctx *x, const cic_case_tab *t, int *layer0, int *n, int *l,
                       int *col)
{
    const cic_toml_node *node = NULL;
    const char *str, *end;
    char s[64];
    size_t len;
    bool have;
    long a, b;
    *layer0 = 0;
    *n = 0;
    *l = *col = 0;
    node = _cic_find(t, "layers", l, col);
    if (!node)
        return CIC_OK;
    _cic_pos(node, l, col);
    if (cic_toml_get_string(node, &str, &len) != CIC_TOML_OK)
        return _cic_get_intf(x, t, "layers", 1, CIC_CASE_MAX_LAYERS, n, &have, NULL);
    snprintf(s, sizeof s, "%.*s", (int)(len < 63 ? len : 63), str);
    a = len < 63 ? layer_index(s, &end) : -1;
    if (a < 0 || *end != '-')
        return _cic_fail(x, *l, *col, "layers = \"%s\": expected N (the first N layers) or "
                         "\"a-b\" (layers a to b, 0-based, inclusive; decimal digits, at most "
                         "%d)", s, INT_MAX);
    b = layer_index(end + 1, &end);
    if (b < 0 || *end || b < a || b - a + 1 > CIC_CASE_MAX_LAYERS)
        return _cic_fail(x, *l, *col, "layers = \"%s\": expected \"a-b\" with 0 <= a <= b <= "
                         "%d and at most %d layers", s, INT_MAX, CIC_CASE_MAX_LAYERS);
    *layer0 = (int)a;
    *n = (int)(b - a + 1);
    return CIC_OK;
}

int _cic_load_checkpoint(cic_case_ctx *x, cic_case *c, const cic_case_tab *t)
{
    cic_model_cfg *m = &c->model;
    char dir[1024], path[1024];
    const cic_toml_node *node;
    cic_ckpt *k;
    cic_diag d;
    size_t i;
    int l, col, ll, lcol, layer0, n, err0 = x->n_err, rc;
    int64_t seed = 0;
    bool have;

    _cic_check_keys(x, t, _cic_ckpt_keys, CIC_CASE_LEN(_cic_ckpt_keys));
    for (i = 0; i < CIC_CASE_LEN(_cic_ckpt_from_config); i++)
        if (_cic_find(t, _cic_ckpt_from_config[i], &l, &col))
            _cic_fail(x, l, col, "'%s' comes from the checkpoint's config.json; remove it",
                      _cic_ckpt_from_config[i]);
    for (i = 0; i < CIC_AXIS_COUNT; i++)
        if (c->sweep.n[i] && i != CIC_AXIS_TOKENS && i != CIC_AXIS_SAMPLES &&
            i != CIC_AXIS_SEED && i != CIC_AXIS_MPFR_PREC)
            _cic_fail(x, c->sweep.line[i], c->sweep.col[i], "[sweep] %s: the checkpoint fixes "
                      "it (tokens, samples, seed and mpfr_prec can be swept)", CIC_AXIS_NAME[i]);
    if (_cic_get_str(x, t, "checkpoint", dir, sizeof dir, NULL, &node) != CIC_OK)
        return CIC_EINPUT;
    _cic_pos(node, &l, &col);
    if (!dir[0] || _cic_case_relpath(path, sizeof path, c->path, dir) < 0)
        return _cic_fail(x, l, col, "checkpoint = \"%s\": a folder (relative to the case "
                         "file's folder) is needed, of a shorter path", dir);
    if (_cic_get_intf(x, t, "tokens", 1, CIC_CASE_MAX_TOKENS, &m->tokens, &have, NULL) ==
            CIC_OK) {
        _cic_sweep_first_int(c, CIC_AXIS_TOKENS, &m->tokens, &have);
        if (!have)
            _cic_missing(x, t, "tokens", NULL);
    }
    if (_cic_get_intf(x, t, "samples", 1, CIC_MAX_SAMPLES, &m->samples, &have, NULL) ==
            CIC_OK) {
        _cic_sweep_first_int(c, CIC_AXIS_SAMPLES, &m->samples, &have);
        x->samples_ok = have;
        if (!have)
            _cic_missing(x, t, "samples", NULL);
    }
    _cic_get_int(x, t, "seed", 0, INT64_MAX, &seed, NULL, NULL);
    m->seed = (uint64_t)seed;
    if (_cic_swept(c, CIC_AXIS_SEED))
        m->seed = (uint64_t)c->sweep.v[CIC_AXIS_SEED][0];
    if (ckpt_layers(x, t, &layer0, &n, &ll, &lcol) != CIC_OK || _cic_status(x, err0) != CIC_OK)
        return CIC_EINPUT;
    memset(&d, 0, sizeof d);
    k = cic_ckpt_open(path, &d);
    if (!k)
        return _cic_fail(x, l, col, "checkpoint '%s': %s%s%s", path, d.file[0] ? d.file : "",
                         d.file[0] ? ": " : "", d.msg);
    if (n && (layer0 >= cic_ckpt_layers(k) || n > cic_ckpt_layers(k) - layer0)) {
        _cic_fail(x, ll, lcol, "layers %d .. %lld asked, the checkpoint has %d "
                  "(num_hidden_layers; 0 .. %d): %s", layer0, (long long)layer0 + n - 1,
                  cic_ckpt_layers(k), cic_ckpt_layers(k) - 1, path);
        cic_ckpt_close(k);
        return CIC_EINPUT;
    }
    m->layers = n ? n : cic_ckpt_layers(k) - layer0;
    rc = cic_ckpt_config(k, m, layer0, &d);
    cic_ckpt_close(k);
    if (rc != CIC_OK)
        return _cic_fail(x, l, col, "checkpoint '%s': %s: %s", path, d.file, d.msg);
    x->block_ok = true;
    return _cic_status(x, err0);
}
