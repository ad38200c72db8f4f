/* baseline.c: compare a run with its accepted baseline (baseline.h). */
#include "baseline.h"

#include <jansson.h>
#include <math.h>
#include <string.h>

/* Measured with bench/blas_spread.sh (README, "Use as a CI gate") over the
 * shipped cases, OpenBLAS kernels Haswell, SkylakeX, Sandybridge, Nehalem
 * and 1 or 2 threads, against Haswell with 2: stable figures grew by at
 * most x1.21, spread figures by x2.26, tail figures by x9.1 (ULP figures by
 * at most +4 ULP where they are small). The defaults allow x2, x3 and x20,
 * plus 4 ULP. */
const cic_tolerance CIC_TOLERANCE_DEFAULT = {1.0, 2.0, 19.0, 4.0};

static double allowance(const cic_tolerance *t, const char *metric)
{
    if (!strcmp(metric, "rel_norm2") || !strcmp(metric, "ulp_row.mean") ||
        !strcmp(metric, "ulp_elem.mean"))
        return t->stable;
    if (!strcmp(metric, "ulp_elem.max") || !strcmp(metric, "drift.max"))
        return t->tail;
    return t->spread;
}

typedef struct {
    cic_regress_result *v;
    int n, cap;
} rlist;

static cic_regress_result *add(rlist *l, enum cic_regress_rule rule, const char *xf,
                               const char *eng, const char *metric)
{
    cic_regress_result *g;
    if (l->n == l->cap) {
        int cap = l->cap ? 2 * l->cap : 64;
        cic_regress_result *nv = realloc(l->v, (size_t)cap * sizeof *nv);
        if (!nv)
            return NULL;
        l->v = nv;
        l->cap = cap;
    }
    g = &l->v[l->n++];
    memset(g, 0, sizeof *g);
    g->rule = rule;
    cic_strlcpy(g->transform, xf ? xf : "", sizeof g->transform);
    cic_strlcpy(g->engine, eng ? eng : "", sizeof g->engine);
    cic_strlcpy(g->metric, metric ? metric : "", sizeof g->metric);
    g->pass = true;
    return g;
}

bool cic_result_metric(const cic_result *x, const char *metric, double *v)
{
    const cic_metrics *m = &x->metrics;
    if (strcmp(metric, "ce_residual") == 0) {
        *v = x->ce_residual;
        return x->has_verdict;
    }
    if (!x->has_metrics)
        return false;
    if (!strcmp(metric, "max_abs")) *v = m->max_abs;
    else if (!strcmp(metric, "rel_norm2")) *v = m->rel_norm2;
    else if (!strcmp(metric, "ulp_row.max")) *v = m->ulp_row.max;
    else if (!strcmp(metric, "ulp_row.p99")) *v = m->ulp_row.p99;
    else if (!strcmp(metric, "ulp_row.mean")) *v = m->ulp_row.mean;
    else if (!strcmp(metric, "ulp_elem.max")) *v = m->ulp_elem.max;
    else if (!strcmp(metric, "ulp_elem.p99")) *v = m->ulp_elem.p99;
    else if (!strcmp(metric, "ulp_elem.mean")) *v = m->ulp_elem.mean;
    else if (!strcmp(metric, "nonfinite")) *v = (double)m->nonfinite;
    else if (!strncmp(metric, "drift.", 6)) {
        if (!m->has_drift)
            return false;
        *v = !strcmp(metric, "drift.max") ? m->drift.max
           : !strcmp(metric, "drift.p99") ? m->drift.p99 : m->drift.mean;
    } else
        return false;
    return true;
}

static const char *jstr(json_t *o, const char *k)
{
    const char *s = json_string_value(json_object_get(o, k));
    return s ? s : "";
}

/* A number of a JSON value: true when it is a number (null: no value). */
static bool jnum(json_t *v, double *out)
{
    if (json_is_number(v)) {
        *out = json_number_value(v);
        return true;
    }
    return false;
}

static void equal_text(rlist *l, enum cic_regress_rule rule, const char *xf, const char *eng,
                       const char *metric, const char *old, const char *now)
{
    cic_regress_result *g = add(l, rule, xf, eng, metric);
    if (!g)
        return;
    cic_strlcpy(g->old_value, old, sizeof g->old_value);
    cic_strlcpy(g->new_value, now, sizeof g->new_value);
    g->pass = strcmp(old, now) == 0;
}


static json_t *json_metric(json_t *metrics, const char *name)
{
    char buf[32];
    const char *dot = strchr(name, '.');
    if (!dot)
        return json_object_get(metrics, name);
    snprintf(buf, sizeof buf, "%.*s", (int)(dot - name), name);
    return json_object_get(json_object_get(metrics, buf), dot + 1);
}

static void compare_row(rlist *l, const cic_result *x, json_t *b, const cic_tolerance *tol)
{
    static const char *const metrics[] = {
        "max_abs", "rel_norm2", "ulp_row.max", "ulp_row.p99", "ulp_row.mean",
        "ulp_elem.max", "ulp_elem.p99", "ulp_elem.mean", "drift.max", "drift.p99",
        "drift.mean", "nonfinite"};
    double old, now;
    size_t k;
    char a[64], c[64];
    if (x->has_verdict)
        equal_text(l, CIC_RULE_VERDICT, x->transform, x->engine, "verdict", jstr(b, "verdict"),
                   CIC_VERDICT_NAME[x->verdict]);
    if (x->mpfr_sha256[0])
        equal_text(l, CIC_RULE_MPFR, x->transform, x->engine, "mpfr_sha256",
                   jstr(b, "mpfr_sha256"), x->mpfr_sha256);
    if (jnum(json_object_get(json_object_get(b, "flops"), "transformed"), &old)) {
        snprintf(a, sizeof a, "%.17g", old);
        snprintf(c, sizeof c, "%.17g", x->flops.transformed);
        equal_text(l, CIC_RULE_FLOPS, x->transform, x->engine, "flops", a, c);
    }
    if (!x->has_metrics)
        return;
    for (k = 0; k < sizeof metrics / sizeof metrics[0]; k++) {
        json_t *bm = json_metric(json_object_get(b, "metrics"), metrics[k]);
        cic_regress_result *g;
        double limit;
        bool ulp = strncmp(metrics[k], "ulp", 3) == 0 || strncmp(metrics[k], "drift", 5) == 0;
        if (!cic_result_metric(x, metrics[k], &now))
            continue;
        g = add(l, CIC_RULE_METRIC, x->transform, x->engine, metrics[k]);
        if (!g)
            return;
        snprintf(g->new_value, sizeof g->new_value, "%.6g", now);
        if (!jnum(bm, &old)) {
            /* the baseline has no value (null, e.g. non-finite): only a
             * finite value now is news worth a look, not a failure */
            snprintf(g->old_value, sizeof g->old_value, "null");
            continue;
        }
        snprintf(g->old_value, sizeof g->old_value, "%.6g", old);
        if (!strcmp(metrics[k], "nonfinite"))
            limit = old;
        else
            limit = old * (1.0 + allowance(tol, metrics[k])) + (ulp ? tol->abs_ulp : 0.0);
        snprintf(g->limit, sizeof g->limit, "%.6g", limit);
        g->pass = now <= limit; /* NaN fails */
    }
}

int cic_baseline_compare(cic_report *r, const char *path, const cic_tolerance *tol,
                         cic_diag *d)
{
    json_error_t je;
    json_t *root = json_load_file(path, 0, &je), *rows;
    rlist l;
    size_t i;
    int k;
    bool *seen = NULL;
    memset(&l, 0, sizeof l);
    if (!root) {
        cic_diag_set(d, path, je.line > 0 ? je.line : 0, je.column, "cannot read baseline: %s",
                     je.text);
        return -1;
    }
    rows = json_object_get(root, "results");
    if (!json_is_object(root) || !json_is_array(rows) ||
        !json_is_string(json_object_get(root, "weights_sha256"))) {
        cic_diag_set(d, path, 0, 0, "not a cicheck report: no results or weights_sha256");
        json_decref(root);
        return -1;
    }
    r->has_baseline = true;
    cic_strlcpy(r->baseline_path, path, sizeof r->baseline_path);
    equal_text(&l, CIC_RULE_WEIGHTS, NULL, NULL, "weights_sha256",
               jstr(root, "weights_sha256"), r->weights_sha256);
    equal_text(&l, CIC_RULE_TRUTH, NULL, NULL, "truth_sha256", jstr(root, "truth_sha256"),
               r->truth_sha256);
    seen = cic_calloc((size_t)r->n_results + 1, sizeof *seen);
    if (!seen) {
        json_decref(root);
        cic_diag_set(d, path, 0, 0, "out of memory");
        return -1;
    }
    for (i = 0; i < json_array_size(rows); i++) {
        json_t *b = json_array_get(rows, i);
        const char *xf = jstr(b, "transform"), *eng = jstr(b, "engine");
        int found = -1;
        for (k = 0; k < r->n_results; k++)
            if (!strcmp(r->results[k].transform, xf) && !strcmp(r->results[k].engine, eng))
                found = k;
        if (found < 0) {
            cic_regress_result *g = add(&l, CIC_RULE_MISSING, xf, eng, "row");
            if (g) {
                cic_strlcpy(g->old_value, "present", sizeof g->old_value);
                cic_strlcpy(g->new_value, "missing", sizeof g->new_value);
                g->pass = false;
            }
            continue;
        }
        seen[found] = true;
        compare_row(&l, &r->results[found], b, tol);
    }
    for (k = 0; k < r->n_results; k++)
        if (!seen[k]) {
            cic_regress_result *g = add(&l, CIC_RULE_MISSING, r->results[k].transform,
                                        r->results[k].engine, "row");
            if (g) {
                cic_strlcpy(g->old_value, "missing", sizeof g->old_value);
                cic_strlcpy(g->new_value, "present (bless to accept)", sizeof g->new_value);
                g->pass = false;
            }
        }
    free(seen);
    json_decref(root);
    r->regress = l.v;
    r->n_regress = l.n;
    for (k = 0; k < l.n; k++)
        if (!l.v[k].pass)
            r->pass = false;
    return 0;
}
