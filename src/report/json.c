/* SPDX-License-Identifier: MIT */
/* json.c: report.json (DESIGN.md section 7), written through outfile.c.
 *
 * The key names are an interface other tools parse: add keys freely, rename
 * none. The whole document is built as a jansson tree, dumped to memory and
 * then written atomically (temporary file beside it, fsync, rename)
 * so a CI job reading report.json never sees half a report, and a failed
 * write leaves the previous report untouched.
 *
 * Non-finite doubles (a NaN rel_norm2 from a broken block, an Inf
 * ce_residual when the truth is all zero) are written as JSON null: JSON has
 * no NaN/Inf literal, and null is what every parser accepts. A reader that
 * needs to tell NaN from Inf looks at metrics.nonfinite and the table.
 * Other null conventions: rows without a verdict (transform "none") have
 * null expect, verdict, ce_residual and ce_thresholds; rows without metrics
 * (the "mpfr" exactness row) have "metrics": null; drift and ulp_row_delta
 * are null when the row has no before run, decomposition when it was not
 * computed; first_nonfinite is null when there is none. Seeds above
 * INT64_MAX (jansson integers are signed) are written as decimal strings. */
#include "report.h"

#include "../xform/kinds.h"

#include <inttypes.h>
#include <jansson.h>
#include <math.h>
#include <string.h>

/* ---- building the tree ---- */

/* Every setter records a failure (out of memory, invalid UTF-8) in *err
 * instead of returning early, so building reads as a flat list of keys and
 * one check at the end decides. json_object_set_new steals v, NULL too. */
static void jset(json_t *o, const char *k, json_t *v, int *err)
{
    if (!o || !v || json_object_set_new(o, k, v) != 0)
        *err = 1;
}

static void jpush(json_t *a, json_t *v, int *err)
{
    if (!a || !v || json_array_append_new(a, v) != 0)
        *err = 1;
}

/* JSON has no NaN/Inf: null (see the file comment). */
static json_t *jreal(double v)
{
    return isfinite(v) ? json_real(v) : json_null();
}

/* A string from a fixed-size field that may lack its NUL, or hold bytes that
 * are not UTF-8 (a case path): bytes that break UTF-8 become '?', so the
 * report is still written. */
static json_t *jstrn(const char *s, size_t cap)
{
    char buf[4096];
    size_t n;
    json_t *j;

    if (!s)
        return json_null();
    n = strnlen(s, cap);
    j = json_stringn(s, n);
    if (j)
        return j;
    if (n >= sizeof buf)
        n = sizeof buf - 1;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        buf[i] = (c >= 0x20 && c < 0x7f) ? (char)c : '?';
    }
    buf[n] = '\0';
    return json_stringn(buf, n);
}

#define JSTR(field) jstrn((field), sizeof(field))

/* Name from a CIC_*_NAME table, guarded against out-of-range values and
 * unfilled table entries. */
static json_t *jname(const char *const *tab, int count, int v)
{
    if (v < 0 || v >= count || !tab || !tab[v])
        return json_string("unknown");
    return json_string(tab[v]);
}

static json_t *jseed(uint64_t s)
{
    char buf[32];
    if (s <= (uint64_t)INT64_MAX)
        return json_integer((json_int_t)s);
    snprintf(buf, sizeof buf, "%" PRIu64, s);
    return json_string(buf);
}

static json_t *jcount(uint64_t v)
{
    return json_integer(v > (uint64_t)INT64_MAX ? (json_int_t)INT64_MAX : (json_int_t)v);
}

static json_t *jstat3(const cic_stat3 *s, int *err)
{
    json_t *o = json_object();
    jset(o, "max", jreal(s->max), err);
    jset(o, "p99", jreal(s->p99), err);
    jset(o, "mean", jreal(s->mean), err);
    return o;
}

/* Transform x's own fields (its descriptor's report, then its params). */
static void xform_fields(json_t *t, const cic_xform_spec *x, int *err)
{
    const cic_xform_desc *k = cic_xform_desc_of(x->kind);
    cic_xform_field f[CIC_XFORM_MAX_FIELDS];
    int n = k->report ? k->report(f, CIC_XFORM_MAX_FIELDS, x) : 0;
    for (int j = 0; j < n; j++) {
        json_t *v = f[j].type == CIC_XFIELD_STR    ? (f[j].s ? json_string(f[j].s) : json_null())
                    : f[j].type == CIC_XFIELD_INT  ? json_integer(f[j].i)
                    : f[j].type == CIC_XFIELD_BOOL ? json_boolean(f[j].i)
                                                   : jreal(f[j].r);
        jset(t, f[j].key, v, err);
    }
    for (int j = 0; j < CIC_XFORM_MAX_PARAMS && k->params[j].key; j++)
        jset(t, k->params[j].key, jreal(x->param[j]), err);
}

static json_t *case_json(const cic_case *c, int *err)
{
    json_t *o = json_object(), *m = json_object(), *w = json_object();
    json_t *eng = json_object(), *f32 = json_array(), *ro = json_object();
    json_t *xfs = json_array(), *gates = json_array();
    const cic_model_cfg *mc = &c->model;
    int nx = c->n_xf < 0 ? 0 : (c->n_xf > CIC_MAX_XFORMS ? CIC_MAX_XFORMS : c->n_xf);
    int ng = c->n_gates < 0 ? 0 : (c->n_gates > CIC_MAX_GATES ? CIC_MAX_GATES : c->n_gates);

    jset(o, "name", JSTR(c->name), err);
    jset(o, "file", JSTR(c->path), err);

    jset(m, "block", jname(CIC_BLOCK_NAME, CIC_BLOCK_COUNT, (int)mc->block), err);
    jset(m, "d_model", json_integer(mc->d_model), err);
    jset(m, "heads", json_integer(mc->heads), err);
    jset(m, "mlp_ratio", jreal(mc->mlp_ratio), err);
    jset(m, "d_mlp", json_integer(mc->d_mlp), err);
    jset(m, "tokens", json_integer(mc->tokens), err);
    jset(m, "samples", json_integer(mc->samples), err);
    jset(m, "layers", json_integer(mc->layers), err);
    jset(m, "eps", jreal(mc->eps), err);
    jset(m, "causal", json_boolean(mc->causal), err);
    jset(m, "activation", jname(CIC_ACT_NAME, CIC_ACT_COUNT, (int)mc->act), err);
    jset(m, "d_out", json_integer(mc->d_out), err);
    jset(m, "d_cond", json_integer(mc->d_cond), err);
    jset(m, "final_layer", json_boolean(mc->final_layer), err);
    if (cic_block(mc->block)->llama) { /* LLaMA attention: RoPE and GQA */
        jset(m, "rope", jname(CIC_ROPE_NAME, CIC_ROPE_COUNT, (int)mc->rope), err);
        jset(m, "rope_theta", jreal(mc->rope_theta), err);
        jset(m, "kv_heads", json_integer(cic_cfg_kv_heads(mc)), err);
    }
    jset(m, "seed", jseed(mc->seed), err);
    if (mc->checkpoint[0]) { /* the weights' folder and its first layer read */
        jset(m, "checkpoint", json_string(mc->checkpoint), err);
        jset(m, "first_layer", json_integer(mc->layer0), err);
    }
    jset(w, "dist", jname(CIC_DIST_NAME, CIC_DIST_COUNT, (int)mc->dist), err);
    jset(w, "std", jreal(mc->std), err);
    jset(w, "outlier_channels", json_integer(mc->outlier_channels), err);
    jset(w, "outlier_scale", jreal(mc->outlier_scale), err);
    jset(m, "weights", w, err);
    jset(o, "model", m, err);

    if (c->f32_openblas)
        jpush(f32, json_string(CIC_MATMUL_NAME[CIC_MATMUL_OPENBLAS]), err);
    if (c->f32_fixed)
        jpush(f32, json_string(CIC_MATMUL_NAME[CIC_MATMUL_FIXED]), err);
    jset(eng, "f32", f32, err);
    jset(eng, "mpfr_prec", json_integer(c->mpfr_prec), err);
    jset(o, "engines", eng, err);

    jset(ro, "kind", jname(CIC_READOUT_NAME, CIC_READOUT_COUNT, (int)c->readout), err);
    jset(o, "readout", ro, err);

    for (int i = 0; i < nx; i++) {
        const cic_xform_spec *x = &c->xf[i];
        json_t *t = json_object();
        jset(t, "name", JSTR(x->name), err);
        jset(t, "kind", jname(CIC_XFORM_NAME, CIC_XFORM_COUNT, (int)x->kind), err);
        /* after: the earlier transform's name, null for the original model. */
        if (x->after >= 0 && x->after < i)
            jset(t, "after", JSTR(c->xf[x->after].name), err);
        else
            jset(t, "after", json_null(), err);
        jset(t, "precision", jname(CIC_TPREC_NAME, CIC_TPREC_COUNT, (int)x->prec), err);
        jset(t, "q", jname(CIC_Q_NAME, CIC_Q_COUNT, (int)x->q), err);
        jset(t, "seed", jseed(x->q_seed), err);
        if (x->q == CIC_Q_HADAMARD)
            jset(t, "hadamard_base", json_integer(x->hadamard_base), err);
        jset(t, "mistake", json_string(cic_xform_mistake_name(x)), err);
        xform_fields(t, x, err);
        jset(t, "expect", jname(CIC_VERDICT_NAME, CIC_VERDICT_COUNT, (int)x->expect), err);
        jset(t, "line", json_integer(x->line), err);
        jpush(xfs, t, err);
    }
    jset(o, "transforms", xfs, err);

    for (int i = 0; i < ng; i++) {
        const cic_gate_spec *g = &c->gates[i];
        json_t *t = json_object();
        jset(t, "transform", JSTR(g->transform), err);
        jset(t, "engine", JSTR(g->engine), err);
        jset(t, "metric", JSTR(g->metric), err);
        jset(t, "max", jreal(g->max), err);
        jset(t, "line", json_integer(g->line), err);
        jpush(gates, t, err);
    }
    jset(o, "gates", gates, err);
    return o;
}

static json_t *env_json(const cic_env *e, int *err)
{
    json_t *o = json_object();
    jset(o, "mpfr", JSTR(e->mpfr), err);
    jset(o, "gmp", JSTR(e->gmp), err);
    jset(o, "openblas", JSTR(e->openblas), err);
    jset(o, "openblas_core", JSTR(e->openblas_core), err);
    jset(o, "openblas_threads", json_integer(e->openblas_threads), err);
    jset(o, "openblas_thread_timeout", JSTR(e->openblas_timeout), err);
    jset(o, "compiler", JSTR(e->compiler), err);
    jset(o, "hostname", JSTR(e->hostname), err);
    return o;
}

struct json_t *cic_report_env_json(const cic_env *e)
{
    int err = 0;
    json_t *o = env_json(e, &err);
    if (err) {
        json_decref(o);
        return NULL;
    }
    return o;
}

/* One string member of an environment object into a fixed buffer. */
static bool env_str(const json_t *o, const char *key, char *dst, size_t cap)
{
    const json_t *v = json_object_get(o, key);
    if (!json_is_string(v) || json_string_length(v) >= cap)
        return false;
    cic_strlcpy(dst, json_string_value(v), cap);
    return true;
}

bool cic_report_env_parse(const struct json_t *o, cic_env *e)
{
    const json_t *t = json_object_get(o, "openblas_threads");
    memset(e, 0, sizeof *e);
    return json_is_object(o) && json_is_integer(t) && json_integer_value(t) >= 0 &&
           json_integer_value(t) <= INT32_MAX &&
           (e->openblas_threads = (int)json_integer_value(t), true) &&
           env_str(o, "mpfr", e->mpfr, sizeof e->mpfr) &&
           env_str(o, "gmp", e->gmp, sizeof e->gmp) &&
           env_str(o, "openblas", e->openblas, sizeof e->openblas) &&
           env_str(o, "openblas_core", e->openblas_core, sizeof e->openblas_core) &&
           env_str(o, "openblas_thread_timeout", e->openblas_timeout, sizeof e->openblas_timeout) &&
           env_str(o, "compiler", e->compiler, sizeof e->compiler) &&
           env_str(o, "hostname", e->hostname, sizeof e->hostname);
}

static json_t *metrics_json(const cic_metrics *m, int *err)
{
    json_t *o = json_object(), *ue = jstat3(&m->ulp_elem, err);

    jset(o, "max_abs", jreal(m->max_abs), err);
    jset(o, "rel_norm2", jreal(m->rel_norm2), err);
    jset(o, "ulp_row", jstat3(&m->ulp_row, err), err);
    jset(ue, "excluded", jcount(m->ulp_elem_excluded), err);
    jset(o, "ulp_elem", ue, err);
    if (m->has_drift) {
        json_t *dl = json_object();
        jset(o, "drift", jstat3(&m->drift, err), err);
        jset(dl, "max", jreal(m->ulp_row_delta_max), err);
        jset(dl, "p99", jreal(m->ulp_row_delta_p99), err);
        jset(o, "ulp_row_delta", dl, err);
    } else {
        jset(o, "drift", json_null(), err);
        jset(o, "ulp_row_delta", json_null(), err);
    }
    if (m->has_decomp) {
        json_t *dc = json_object();
        jset(dc, "weights", jreal(m->decomp_weights), err);
        jset(dc, "arithmetic", jreal(m->decomp_arith), err);
        jset(o, "decomposition", dc, err);
    } else {
        jset(o, "decomposition", json_null(), err);
    }
    {
        json_t *q = json_array();
        for (int i = 0; i < CIC_NQ; i++)
            jpush(q, jreal(m->ulp_row_q[i]), err);
        jset(o, "ulp_row_quantiles", q, err);
    }
    if (m->has_drift) {
        json_t *h = json_array();
        for (int i = 0; i < CIC_DRIFT_BINS; i++)
            jpush(h, jcount(m->drift_hist[i]), err);
        jset(o, "drift_hist", h, err);
    }
    jset(o, "nonfinite", jcount(m->nonfinite), err);
    jset(o, "first_nonfinite",
         m->nonfinite > 0 && m->first_nonfinite >= 0 ? json_integer(m->first_nonfinite)
                                                     : json_null(),
         err);
    return o;
}

static json_t *flops_json(const cic_flops *f, int *err)
{
    json_t *o = json_object(), *sites = json_object();
    int ns = f->n_sites < 0 ? 0 : (f->n_sites > CIC_MAX_SITES ? CIC_MAX_SITES : f->n_sites);

    jset(o, "baseline", jreal(f->baseline), err);
    jset(o, "transformed", jreal(f->transformed), err);
    jset(o, "extra_total", jreal(f->extra_total), err);
    jset(o, "extra_per_token", jreal(f->extra_per_token), err);
    jset(o, "extra_per_sample", jreal(f->extra_per_sample), err);
    jset(o, "extra_pct", jreal(f->extra_pct), err);
    jset(o, "analytical_baseline", jreal(f->analytical_baseline), err);
    jset(o, "analytical_transformed", jreal(f->analytical_transformed), err);
    jset(o, "counted_matches_analytical", json_boolean(f->counted_matches_analytical), err);
    for (int i = 0; i < ns; i++) {
        json_t *s = json_object();
        json_t *key = JSTR(f->sites[i].name);
        const char *k = key ? json_string_value(key) : NULL;
        if (!key)
            *err = 1;
        jset(s, "analytical", jreal(f->sites[i].analytical), err);
        jset(s, "counted", jreal(f->sites[i].counted), err);
        jset(sites, k && k[0] ? k : "unnamed", s, err);
        json_decref(key);
    }
    jset(o, "sites", sites, err);
    return o;
}

/* "per_block": block b's output against its truth (null figures and a
 * reason when they cannot be given); the readout's entry is the row's own
 * figures, so it has no truth_radius of its own. */
static json_t *block_json(const cic_block_entry *e, int *err)
{
    json_t *o = json_object(), *rad = json_object();
    if (!o || !rad) {
        json_decref(o);
        json_decref(rad);
        *err = 1;
        return NULL;
    }
    jset(o, "block", json_integer(e->block), err);
    jset(o, "tensor", JSTR(e->tensor), err);
    jset(o, "readout", json_boolean(e->readout), err);
    jset(o, "head", json_boolean(e->head), err);
    jset(o, "max_abs", e->has ? jreal(e->m.max_abs) : json_null(), err);
    jset(o, "rel_norm2", e->has ? jreal(e->m.rel_norm2) : json_null(), err);
    jset(o, "ulp_row_p99", e->has ? jreal(e->m.ulp_p99) : json_null(), err);
    jset(o, "nonfinite", jcount(e->m.nonfinite), err);
    jset(rad, "max_abs", jreal(e->m.rad_abs), err);
    jset(rad, "rel_norm2", jreal(e->m.rad_rel), err);
    jset(rad, "ulp_row", jreal(e->m.rad_ulp), err);
    if (e->readout)
        json_decref(rad);
    jset(o, "truth_radius", e->readout ? json_null() : rad, err);
    jset(o, "reason", e->has ? json_null() : JSTR(e->why), err);
    return o;
}

static json_t *per_block_json(const cic_result *r, int *err)
{
    json_t *a;
    if (!r->per_block)
        return json_null();
    a = json_array();
    if (!a)
        *err = 1;
    for (int i = 0; a && i < r->n_per_block; i++)
        jpush(a, block_json(&r->per_block[i], err), err);
    return a;
}

static json_t *result_json(const cic_result *r, int *err)
{
    json_t *o = json_object(), *ps = json_array();
    int n = r->n_samples < 0 ? 0 : (r->n_samples > CIC_MAX_SAMPLES ? CIC_MAX_SAMPLES : r->n_samples);

    jset(o, "transform", JSTR(r->transform), err);
    jset(o, "engine", JSTR(r->engine), err);
    if (r->mpfr_sha256[0])
        jset(o, "mpfr_sha256", JSTR(r->mpfr_sha256), err);
    if (r->has_verdict) {
        json_t *th = json_object();
        jset(o, "expect", jname(CIC_VERDICT_NAME, CIC_VERDICT_COUNT, (int)r->expect), err);
        jset(o, "verdict", jname(CIC_VERDICT_NAME, CIC_VERDICT_COUNT, (int)r->verdict), err);
        jset(o, "ce_residual", jreal(r->ce_residual), err);
        jset(th, "equivalent", jreal(r->ce_threshold_equivalent), err);
        jset(th, "broken", jreal(r->ce_threshold_broken), err);
        jset(o, "ce_thresholds", th, err);
    } else {
        jset(o, "expect", json_null(), err);
        jset(o, "verdict", json_null(), err);
        jset(o, "ce_residual", json_null(), err);
        jset(o, "ce_thresholds", json_null(), err);
    }
    jset(o, "metrics", r->has_metrics ? metrics_json(&r->metrics, err) : json_null(), err);
    jset(o, "flops", flops_json(&r->flops, err), err);
    for (int i = 0; i < n; i++) {
        const cic_sample_ce *s = &r->per_sample[i];
        json_t *t = json_object();
        jset(t, "sample", json_integer(s->sample), err);
        jset(t, "ce_residual", jreal(s->ce_residual), err);
        jset(t, "verdict", jname(CIC_VERDICT_NAME, CIC_VERDICT_COUNT, (int)s->verdict), err);
        jpush(ps, t, err);
    }
    jset(o, "per_sample", ps, err);
    jset(o, "per_block", per_block_json(r, err), err);
    if (r->lowp)
        jset(o, "sqnr_db", jreal(r->sqnr_db), err);
    if (r->has_q_orth)
        jset(o, "q_orth_error", jreal(r->q_orth_error), err);
    jset(o, "pass", json_boolean(r->pass), err);
    return o;
}

/* "lowp": the engines of [[engines.lowp]], the outlier statistics and the
 * per-linear errors. */
static json_t *lowp_engines_json(const cic_case *c, int *err)
{
    json_t *a = json_array();
    int i;
    for (i = 0; i < c->n_lowp; i++) {
        const cic_lowp_spec *e = &c->lowp[i];
        json_t *o = json_object();
        jset(o, "name", JSTR(e->name), err);
        jset(o, "weights", JSTR(e->weights), err);
        jset(o, "activations", JSTR(e->activations), err);
        jset(o, "compute", json_string(e->elem->name), err);
        jset(o, "weights_from", jname(CIC_LOWP_FROM_NAME, CIC_LOWP_FROM_COUNT, (int)e->from), err);
        jset(o, "line", json_integer(e->line), err);
        jpush(a, o, err);
    }
    return a;
}

static json_t *outlier_json(const cic_outlier_row *r, int *err)
{
    json_t *o = json_object(), *cm = json_array();
    int j;
    jset(o, "transform", JSTR(r->transform), err);
    jset(o, "tensor", JSTR(r->tensor), err);
    jset(o, "of", json_string(r->weight ? "weight" : "input"), err);
    jset(o, "kurtosis", jreal(r->o.kurtosis), err);
    jset(o, "max_over_rms", jreal(r->o.max_over_rms), err);
    jset(o, "top_share", jreal(r->o.top_share), err);
    jset(o, "top_channels", json_integer(r->o.top_channels), err);
    for (j = 0; j < r->n_chan; j++)
        jpush(cm, jreal(r->chan_max[j]), err);
    jset(o, "chan_max", cm, err);
    return o;
}

static json_t *lowp_json(const cic_report *r, int *err)
{
    const cic_lowp_report *l = &r->lowp;
    json_t *o = json_object(), *out = json_array(), *lin = json_array();
    int i;
    jset(o, "engines", lowp_engines_json(r->kase, err), err);
    for (i = 0; i < l->n_outliers; i++)
        jpush(out, outlier_json(&l->outliers[i], err), err);
    jset(o, "outliers", out, err);
    for (i = 0; i < l->n_lin; i++) {
        const cic_linear_err *e = &l->lin[i];
        json_t *t = json_object();
        jset(t, "transform", JSTR(e->transform), err);
        jset(t, "engine", JSTR(e->engine), err);
        jset(t, "tensor", JSTR(e->tensor), err);
        jset(t, "rel_norm2", jreal(e->rel_norm2), err);
        jset(t, "sqnr_db", jreal(e->sqnr_db), err);
        jset(t, "nonfinite", json_integer(e->nonfinite), err);
        jpush(lin, t, err);
    }
    jset(o, "linear_errors", lin, err);
    return o;
}

static json_t *gate_json(const cic_gate_result *g, int *err)
{
    json_t *o = json_object();
    jset(o, "transform", JSTR(g->transform), err);
    jset(o, "engine", JSTR(g->engine), err);
    jset(o, "metric", JSTR(g->metric), err);
    jset(o, "limit", jreal(g->limit), err);
    jset(o, "value", jreal(g->value), err);
    jset(o, "pass", json_boolean(g->pass), err);
    jset(o, "line", json_integer(g->line), err);
    return o;
}

/* dit cases: the closed-form extra-FLOP table of the adaLN strategies
 * against tokens per sample (B = 1, the case's other sizes) and the
 * crossovers, as printed after the results. */
static json_t *dit_flops_json(const cic_dit_flops_table *t, int *err)
{
    json_t *o = json_object(), *tk = json_array(), *st = json_object(), *cr = json_object();
    for (int k = 0; k < CIC_DIT_TABLE_N; k++)
        jpush(tk, json_integer(t->tokens[k]), err);
    for (int j = 0; j < CIC_DIT_STRATEGY_COUNT; j++) {
        json_t *a = json_array();
        for (int k = 0; k < CIC_DIT_TABLE_N; k++)
            jpush(a, jreal(t->pct[j][k]), err);
        jset(st, t->label[j] ? t->label[j] : "?", a, err);
    }
    jset(cr, "per_sample_fold_vs_online_dense", jreal(t->nstar_dense), err);
    jset(cr, "per_sample_fold_vs_online_fast", jreal(t->nstar_fast), err);
    jset(o, "tokens", tk, err);
    jset(o, "extra_pct", st, err);
    jset(o, "crossover_tokens", cr, err);
    return o;
}

/* The whole document; NULL when memory ran out. */
/* "truth": the proof (counts, the largest relative radius, the
 * precisions), and --recheck's difference (null without it). */
static json_t *truth_json(const cic_report *r, json_t *t, int *err)
{
    const cic_truth_proof *pf = &r->proof;
    json_t *precs = json_array();
    jset(t, "certified", json_boolean(r->truth_certified), err);
    jset(t, "proven", json_boolean(pf->proven), err);
    jset(t, "values", json_integer((json_int_t)pf->values), err);
    jset(t, "proven_first", json_integer((json_int_t)pf->first), err);
    jset(t, "escalated", json_integer((json_int_t)pf->escalated), err);
    jset(t, "max_rel_radius", jreal(pf->max_rel_radius), err);
    for (int i = 0; i < pf->n_precs; i++)
        jpush(precs, json_integer(pf->precs[i]), err);
    jset(t, "precisions", precs, err);
    jset(t, "unproven_reason", pf->why[0] ? JSTR(pf->why) : json_null(), err);
    jset(t, "max_rel_diff", pf->rechecked ? jreal(r->truth_cert_diff) : json_null(), err);
    return t;
}

static json_t *report_json(const cic_report *r)
{
    int err = 0;
    json_t *root = json_object(), *res = json_array(), *gates = json_array();
    json_t *truth = json_object();

    jset(root, "cicheck_version", json_string(CIC_VERSION), &err);
    jset(root, "case", r->kase ? case_json(r->kase, &err) : json_null(), &err);
    jset(root, "environment", env_json(&r->env, &err), &err);
    for (int i = 0; r->results && i < r->n_results; i++)
        jpush(res, result_json(&r->results[i], &err), &err);
    jset(root, "results", res, &err);
    for (int i = 0; r->gates && i < r->n_gates; i++)
        jpush(gates, gate_json(&r->gates[i], &err), &err);
    jset(root, "gates", gates, &err);
    jset(root, "truth", truth_json(r, truth, &err), &err);
    jset(root, "weights_sha256", JSTR(r->weights_sha256), &err);
    jset(root, "truth_sha256", JSTR(r->truth_sha256), &err);
    if (r->has_baseline) {
        json_t *b = json_object(), *checks = json_array();
        for (int i = 0; r->regress && i < r->n_regress; i++) {
            const cic_regress_result *g = &r->regress[i];
            json_t *c = json_object();
            jset(c, "rule", json_string(CIC_RULE_NAME[g->rule]), &err);
            jset(c, "transform", JSTR(g->transform), &err);
            jset(c, "engine", JSTR(g->engine), &err);
            jset(c, "metric", JSTR(g->metric), &err);
            jset(c, "old", JSTR(g->old_value), &err);
            jset(c, "new", JSTR(g->new_value), &err);
            jset(c, "limit", JSTR(g->limit), &err);
            jset(c, "pass", json_boolean(g->pass), &err);
            jpush(checks, c, &err);
        }
        jset(b, "path", JSTR(r->baseline_path), &err);
        jset(b, "checks", checks, &err);
        jset(root, "baseline", b, &err);
    }
    if (r->has_dit_flops)
        jset(root, "flops_analytical", dit_flops_json(&r->dit_flops, &err), &err);
    if (r->kase && r->kase->n_lowp > 0)
        jset(root, "lowp", lowp_json(r, &err), &err);
    jset(root, "wall_seconds", jreal(r->wall_seconds), &err);
    jset(root, "pass", json_boolean(r->pass), &err);
    if (err) {
        json_decref(root);
        return NULL;
    }
    return root;
}

json_t *cic_report_to_json(const cic_report *r)
{
    return report_json(r);
}

int cic_report_json_write(const cic_report *r, const char *dir, cic_diag *d)
{
    char *path = NULL;
    size_t plen;
    int rc = -1;

    CIC_ASSERT(r != NULL);
    if (!dir || !dir[0]) {
        cic_diag_set(d, "", 0, 0, "empty report directory name");
        return -1;
    }
    if (cic_mkdir_p(dir, d) != 0)
        return -1;
    plen = strlen(dir) + sizeof "/report.json";
    path = malloc(plen);
    if (!path) {
        cic_diag_set(d, dir, 0, 0, "out of memory");
        return -1;
    }
    snprintf(path, plen, "%s/report.json", dir);
    rc = cic_report_json_write_file(r, path, d);
    free(path);
    return rc;
}

int cic_report_json_write_file(const cic_report *r, const char *path, cic_diag *d)
{
    json_t *root;
    int rc;

    CIC_ASSERT(r != NULL);
    root = report_json(r);
    if (!root) {
        cic_diag_set(d, path, 0, 0, "cannot build report.json: out of memory");
        return -1;
    }
    rc = cic_json_write_atomic(root, path, d);
    json_decref(root);
    return rc;
}

json_t *cic_json_num(double v)
{
    return jreal(v);
}

json_t *cic_json_str(const char *s)
{
    json_t *j = json_string(s);
    char *t;
    size_t i;
    if (j || !(t = strdup(s)))
        return j;
    for (i = 0; t[i]; i++)
        if ((unsigned char)t[i] >= 0x80)
            t[i] = '?';
    j = json_string(t);
    free(t);
    return j;
}

int cic_json_write_atomic(json_t *root, const char *path, cic_diag *d)
{
    char *text, *t2;
    size_t len;
    int rc;

    /* Insertion order is kept (jansson >= 2.8), so the file reads in the
     * order of section 7. 17 significant digits: doubles round-trip. */
    text = json_dumps(root, JSON_INDENT(2) | JSON_REAL_PRECISION(17));
    if (!text) {
        cic_diag_set(d, path, 0, 0, "cannot serialise %s: out of memory", path);
        return -1;
    }
    len = strlen(text);
    /* json_dumps gives no final newline; add it for tools that expect one. */
    if (!(t2 = realloc(text, len + 2))) {
        free(text);
        cic_diag_set(d, path, 0, 0, "out of memory");
        return -1;
    }
    text = t2;
    text[len++] = '\n';
    text[len] = '\0';
    rc = cic_write_atomic(path, text, len, d);
    free(text);
    return rc;
}
