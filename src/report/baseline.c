/* SPDX-License-Identifier: MIT */
/* baseline.c: compare a run with its accepted baseline (baseline.h): read
 * the file without trusting what it is (a FIFO, a device, a folder), check
 * the schema of every field that will be compared, then compare rule by
 * rule. The schema check comes first so no rule can pass on a value of the
 * wrong type. */
#include "baseline.h"
#include "../base/json_type.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <math.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Measured with bench/blas_spread.sh (docs/guide/ci-gate.md, "What is compared") over the
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

/* ---- reading a JSON file safely ---- */

json_t *cic_report_json_load(const char *path, size_t max_bytes, cic_diag *d)
{
    json_error_t je;
    json_t *root;
    char *buf;
    size_t n;
    /* never blocks on a FIFO, never reads more than max_bytes */
    if (cic_file_read(&buf, &n, path, max_bytes, "a JSON report", d) != CIC_OK)
        return NULL;
    root = json_loadb(buf, n, JSON_REJECT_DUPLICATES, &je);
    if (!root)
        cic_diag_set(d, path, je.line > 0 ? je.line : 0, je.column > 0 ? je.column : 0,
                     "not valid JSON: %s", je.text[0] ? je.text : "empty");
    free(buf);
    return root;
}

int cic_baseline_probe(const char *path, cic_diag *d)
{
    struct stat st;
    if (stat(path, &st) != 0) {
        if (errno == ENOENT && lstat(path, &st) == 0) {
            cic_diag_set(d, path, 0, 0, "baseline is a dangling symbolic link");
            return -1;
        }
        if (errno == ENOENT)
            return 0;
        cic_diag_set(d, path, 0, 0, "cannot examine the baseline: %s", strerror(errno));
        return -1;
    }
    if (!S_ISREG(st.st_mode)) {
        cic_diag_set(d, path, 0, 0, "baseline is %s, not a regular file (a report.json "
                     "written by cicheck bless expected)", cic_file_kind((unsigned)st.st_mode));
        return -1;
    }
    return 1;
}

int cic_baseline_dir_check(const char *dir, cic_diag *d)
{
    struct stat st;
    if (!dir || !dir[0]) {
        cic_diag_set(d, "", 0, 0, "--baseline: empty folder name");
        return -1;
    }
    if (stat(dir, &st) != 0) {
        cic_diag_set(d, dir, 0, 0, "baseline folder: %s", strerror(errno));
        return -1;
    }
    if (!S_ISDIR(st.st_mode)) {
        cic_diag_set(d, dir, 0, 0, "baseline folder is %s", S_ISREG(st.st_mode)
                     ? "a regular file" : cic_file_kind((unsigned)st.st_mode));
        return -1;
    }
    return 0;
}

/* ---- the baseline's schema ---- */

/* The figures compared per row, by their report.json names. */
static const char *const METRICS[] = {
    "max_abs", "rel_norm2", "ulp_row.max", "ulp_row.p99", "ulp_row.mean",
    "ulp_elem.max", "ulp_elem.p99", "ulp_elem.mean", "drift.max", "drift.p99",
    "drift.mean", "nonfinite"};
#define N_METRICS (sizeof METRICS / sizeof METRICS[0])

static const char *jstr(json_t *o, const char *k)
{
    const char *s = json_string_value(json_object_get(o, k));
    return s ? s : "";
}

/* "results[3] (rotate, f32-openblas)" for messages; the names are cut so the
 * message stays readable */
static void row_label(char *buf, size_t cap, size_t i, json_t *b)
{
    snprintf(buf, cap, "results[%zu] (%.60s, %.40s)", i, jstr(b, "transform"),
             jstr(b, "engine"));
}

/* One compared figure: a number >= 0 or null (an integer count for
 * nonfinite); the key must be there. */
static int check_figure(json_t *v, const char *path, const char *row, const char *name,
                        bool integer, cic_diag *d)
{
    if (!v) {
        cic_diag_set(d, path, 0, 0, "%s: no metrics.%s", row, name);
        return -1;
    }
    if (integer ? !json_is_integer(v) : !(json_is_number(v) || json_is_null(v))) {
        cic_diag_set(d, path, 0, 0, "%s: metrics.%s is %s; %s expected", row, name,
                     cic_json_type_name(v), integer ? "an integer count"
                                           : "a number (or null for a non-finite value)");
        return -1;
    }
    if (json_is_number(v) && json_number_value(v) < 0) {
        cic_diag_set(d, path, 0, 0, "%s: metrics.%s is %g; the figure is never negative", row,
                     name, json_number_value(v));
        return -1;
    }
    return 0;
}

static int check_metrics(json_t *m, const char *path, const char *row, cic_diag *d)
{
    static const char *const groups[] = {"ulp_row", "ulp_elem", "drift"};
    static const char *const stats[] = {"max", "p99", "mean"};
    size_t g, k;
    char name[48];
    if (json_is_null(m))
        return 0;
    if (!json_is_object(m)) {
        cic_diag_set(d, path, 0, 0, "%s: metrics is %s; an object (or null for a row "
                     "without float32 figures) expected", row, cic_json_type_name(m));
        return -1;
    }
    if (check_figure(json_object_get(m, "max_abs"), path, row, "max_abs", false, d) ||
        check_figure(json_object_get(m, "rel_norm2"), path, row, "rel_norm2", false, d) ||
        check_figure(json_object_get(m, "nonfinite"), path, row, "nonfinite", true, d))
        return -1;
    for (g = 0; g < 3; g++) {
        json_t *o = json_object_get(m, groups[g]);
        if (g == 2 && json_is_null(o))
            continue; /* no drift: the untransformed rows */
        if (!json_is_object(o)) {
            cic_diag_set(d, path, 0, 0, "%s: metrics.%s is %s; an object {max, p99, mean}%s "
                         "expected", row, groups[g], cic_json_type_name(o), g == 2 ? " or null" : "");
            return -1;
        }
        for (k = 0; k < 3; k++) {
            snprintf(name, sizeof name, "%s.%s", groups[g], stats[k]);
            if (check_figure(json_object_get(o, stats[k]), path, row, name, false, d))
                return -1;
        }
    }
    return 0;
}

/* Every type the comparison relies on, before any is compared. */
static int check_schema(json_t *root, const char *path, cic_diag *d)
{
    static const char *const hashes[] = {"weights_sha256", "truth_sha256"};
    json_t *rows, *b, *v, *pairs = NULL;
    size_t i, k;
    char row[160];
    int rc = -1;
    if (!json_is_object(root)) {
        cic_diag_set(d, path, 0, 0, "not a cicheck report: the document is %s, an object "
                     "expected", cic_json_type_name(root));
        return -1;
    }
    for (k = 0; k < 2; k++)
        if (!json_is_string(json_object_get(root, hashes[k]))) {
            cic_diag_set(d, path, 0, 0, "not a cicheck report: %s is %s; a string expected",
                         hashes[k], cic_json_type_name(json_object_get(root, hashes[k])));
            return -1;
        }
    rows = json_object_get(root, "results");
    if (!json_is_array(rows)) {
        cic_diag_set(d, path, 0, 0, "not a cicheck report: results is %s; an array of rows "
                     "expected", cic_json_type_name(rows));
        return -1;
    }
    json_array_foreach(rows, i, b) {
        json_t *fl;
        if (!json_is_object(b)) {
            cic_diag_set(d, path, 0, 0, "results[%zu] is %s; an object expected", i,
                         cic_json_type_name(b));
            goto done;
        }
        for (k = 0; k < 2; k++) {
            const char *key = k ? "engine" : "transform";
            v = json_object_get(b, key);
            if (!json_is_string(v) || !json_string_value(v)[0]) {
                cic_diag_set(d, path, 0, 0, "results[%zu]: %s is %s; a non-empty string "
                             "expected", i, key, json_is_string(v) ? "empty" : cic_json_type_name(v));
                goto done;
            }
        }
        row_label(row, sizeof row, i, b);
        {
            /* the pairs seen so far, keyed "transform\x1fengine" */
            size_t n1 = strlen(jstr(b, "transform")), n2 = strlen(jstr(b, "engine"));
            char *key = malloc(n1 + n2 + 2);
            json_t *prev;
            if (!pairs)
                pairs = json_object();
            if (!key || !pairs) {
                free(key);
                cic_diag_set(d, path, 0, 0, "out of memory");
                goto done;
            }
            snprintf(key, n1 + n2 + 2, "%s\x1f%s", jstr(b, "transform"), jstr(b, "engine"));
            prev = json_object_get(pairs, key);
            if (prev) {
                free(key);
                cic_diag_set(d, path, 0, 0, "%s: the same row as results[%lld]", row,
                             (long long)json_integer_value(prev));
                goto done;
            }
            json_object_set_new(pairs, key, json_integer((json_int_t)i));
            free(key);
        }
        v = json_object_get(b, "verdict");
        if (!json_is_null(v)) {
            bool known = false;
            for (k = 0; json_is_string(v) && k < CIC_VERDICT_COUNT; k++)
                known = known || !strcmp(json_string_value(v), CIC_VERDICT_NAME[k]);
            if (!known) {
                cic_diag_set(d, path, 0, 0, "%s: verdict is %s%s%s; equivalent, broken, "
                             "inconclusive or null expected", row, cic_json_type_name(v),
                             json_is_string(v) ? " " : "",
                             json_is_string(v) ? json_string_value(v) : "");
                goto done;
            }
        }
        v = json_object_get(b, "mpfr_sha256");
        if (v && !json_is_string(v)) {
            cic_diag_set(d, path, 0, 0, "%s: mpfr_sha256 is %s; a string expected", row,
                         cic_json_type_name(v));
            goto done;
        }
        fl = json_object_get(b, "flops");
        v = json_object_get(fl, "transformed");
        if (!json_is_object(fl) || !json_is_number(v)) {
            cic_diag_set(d, path, 0, 0, "%s: flops.transformed is %s; a number expected", row,
                         json_is_object(fl) ? cic_json_type_name(v) : "missing (no flops object)");
            goto done;
        }
        v = json_object_get(b, "metrics");
        if (!v) {
            cic_diag_set(d, path, 0, 0, "%s: no metrics (null for a row without them)", row);
            goto done;
        }
        if (check_metrics(v, path, row, d))
            goto done;
    }
    rc = 0;
done:
    json_decref(pairs);
    return rc;
}

/* ---- comparing ---- */

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

/* A field one side has and the other lacks: always a failed check. */
static void one_sided(rlist *l, enum cic_regress_rule rule, const char *xf, const char *eng,
                      const char *metric, bool in_baseline)
{
    cic_regress_result *g = add(l, rule, xf, eng, metric);
    if (!g)
        return;
    cic_strlcpy(g->old_value, in_baseline ? "present" : "missing", sizeof g->old_value);
    cic_strlcpy(g->new_value, in_baseline ? "missing" : "present (bless to accept)",
                sizeof g->new_value);
    g->pass = false;
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
    json_t *bv = json_object_get(b, "verdict"), *bm = json_object_get(b, "metrics");
    double old, now;
    size_t k;
    char a[64], c[64];
    /* verdict: a name on both sides, or on neither */
    if (x->has_verdict && json_is_string(bv))
        equal_text(l, CIC_RULE_VERDICT, x->transform, x->engine, "verdict",
                   json_string_value(bv), CIC_VERDICT_NAME[x->verdict]);
    else if (x->has_verdict || json_is_string(bv))
        one_sided(l, CIC_RULE_VERDICT, x->transform, x->engine, "verdict", !x->has_verdict);
    if (x->mpfr_sha256[0] && json_object_get(b, "mpfr_sha256"))
        equal_text(l, CIC_RULE_MPFR, x->transform, x->engine, "mpfr_sha256",
                   jstr(b, "mpfr_sha256"), x->mpfr_sha256);
    else if (x->mpfr_sha256[0] || json_object_get(b, "mpfr_sha256"))
        one_sided(l, CIC_RULE_MPFR, x->transform, x->engine, "mpfr_sha256",
                  !x->mpfr_sha256[0]);
    old = json_number_value(json_object_get(json_object_get(b, "flops"), "transformed"));
    snprintf(a, sizeof a, "%.17g", old);
    snprintf(c, sizeof c, "%.17g", x->flops.transformed);
    equal_text(l, CIC_RULE_FLOPS, x->transform, x->engine, "flops", a, c);
    if (x->has_metrics != json_is_object(bm)) {
        one_sided(l, CIC_RULE_METRIC, x->transform, x->engine, "metrics", !x->has_metrics);
        return;
    }
    if (!x->has_metrics)
        return;
    for (k = 0; k < N_METRICS; k++) {
        json_t *v = json_metric(bm, METRICS[k]);
        cic_regress_result *g;
        double limit;
        bool ulp = strncmp(METRICS[k], "ulp", 3) == 0 || strncmp(METRICS[k], "drift", 5) == 0;
        bool have_now = cic_result_metric(x, METRICS[k], &now);
        if (!have_now || !v) {
            /* only drift can be absent (a row without a before run), and
             * then on both sides */
            if (have_now || v)
                one_sided(l, CIC_RULE_METRIC, x->transform, x->engine, METRICS[k], !have_now);
            continue;
        }
        g = add(l, CIC_RULE_METRIC, x->transform, x->engine, METRICS[k]);
        if (!g)
            return;
        snprintf(g->new_value, sizeof g->new_value, "%.6g", now);
        if (json_is_null(v)) {
            /* the baseline's figure was non-finite: unchanged only if it
             * still is; a finite figure now is a change to bless, never a
             * silent pass (else a baseline of nulls would pass anything) */
            cic_strlcpy(g->old_value, "null (non-finite)", sizeof g->old_value);
            cic_strlcpy(g->limit, "non-finite", sizeof g->limit);
            g->pass = !isfinite(now);
            continue;
        }
        old = json_number_value(v);
        snprintf(g->old_value, sizeof g->old_value, "%.6g", old);
        if (!strcmp(METRICS[k], "nonfinite"))
            limit = old;
        else
            limit = old * (1.0 + allowance(tol, METRICS[k])) + (ulp ? tol->abs_ulp : 0.0);
        snprintf(g->limit, sizeof g->limit, "%.6g", limit);
        g->pass = now <= limit; /* NaN fails */
    }
}

/* Baselines are report.json files of a few hundred KB at most; the cap only
 * stops a runaway file from being read into memory. */
#define BASELINE_MAX_BYTES ((size_t)256 << 20)

int cic_baseline_compare(cic_report *r, const char *path, const cic_tolerance *tol,
                         cic_diag *d)
{
    json_t *root = cic_report_json_load(path, BASELINE_MAX_BYTES, d), *rows;
    rlist l;
    size_t i;
    int k;
    bool *seen = NULL;
    memset(&l, 0, sizeof l);
    if (!root) {
        char msg[sizeof d->msg];
        cic_strlcpy(msg, d->msg, sizeof msg);
        snprintf(d->msg, sizeof d->msg, "cannot read baseline: %.990s", msg);
        return -1;
    }
    if (check_schema(root, path, d) != 0) {
        json_decref(root);
        return -1;
    }
    rows = json_object_get(root, "results");
    seen = cic_calloc((size_t)r->n_results + 1, sizeof *seen);
    if (!seen) {
        json_decref(root);
        cic_diag_set(d, path, 0, 0, "out of memory");
        return -1;
    }
    r->has_baseline = true;
    cic_strlcpy(r->baseline_path, path, sizeof r->baseline_path);
    equal_text(&l, CIC_RULE_WEIGHTS, NULL, NULL, "weights_sha256",
               jstr(root, "weights_sha256"), r->weights_sha256);
    equal_text(&l, CIC_RULE_TRUTH, NULL, NULL, "truth_sha256", jstr(root, "truth_sha256"),
               r->truth_sha256);
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
