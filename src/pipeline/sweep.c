/* SPDX-License-Identifier: MIT */
/* sweep.c: the sweep.json document (docs/design.md section 18): the
 * parameters of a point, the header that follows from the case file
 * alone, the aggregate over seeds, and its writing and plots. A sweep
 * (sweep_run.c) and a merge of shards (merge.c) build the same document,
 * so the merged sweep.json of N shards is the unsharded one: the
 * aggregate is computed from the points alone. */
#include "sweep_int.h"

#include "../report/plot.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

/* Least significant first: the order of cic_case_sweep_point. */
static const enum cic_sweep_axis RADIX[CIC_AXIS_COUNT] = {
    CIC_AXIS_SEED, CIC_AXIS_STD, CIC_AXIS_D_COND, CIC_AXIS_SAMPLES, CIC_AXIS_HEADS,
    CIC_AXIS_OUTLIER_SCALE, CIC_AXIS_MPFR_PREC, CIC_AXIS_LAYERS, CIC_AXIS_TOKENS,
    CIC_AXIS_D_MODEL};

static bool axis_is_real(enum cic_sweep_axis a)
{
    return a == CIC_AXIS_OUTLIER_SCALE || a == CIC_AXIS_STD;
}

static json_t *axis_value(enum cic_sweep_axis a, double v)
{
    return axis_is_real(a) ? json_real(v) : json_integer((json_int_t)v);
}

/* {"d_model": 32, "seed": 2, ...} for point i, axes in case order. */
json_t *_cic_sweep_point_params(const cic_sweep *s, long i)
{
    long rem = i;
    int idx[CIC_AXIS_COUNT] = {0}, k;
    json_t *o = json_object();
    for (k = 0; k < CIC_AXIS_COUNT; k++) {
        enum cic_sweep_axis ax = RADIX[k];
        if (s->n[ax] > 0) {
            idx[ax] = (int)(rem % s->n[ax]);
            rem /= s->n[ax];
        }
    }
    for (k = 0; k < CIC_AXIS_COUNT; k++)
        if (s->n[k] > 0)
            json_object_set_new(o, CIC_AXIS_NAME[k],
                                axis_value((enum cic_sweep_axis)k, s->v[k][idx[k]]));
    return o;
}

/* ---- aggregate over seeds ---- */

static const char *const AGG_METRICS[] = {
    "rel_norm2", "max_abs", "ulp_row.max", "ulp_row.p99", "ulp_row.mean",
    "drift.p99", "drift.max", "ce_residual", "extra_pct", "extra_per_token"};
#define N_AGG (sizeof AGG_METRICS / sizeof AGG_METRICS[0])

/* The value of an aggregated metric on a result row (JSON), if it has one. */
static bool row_value(json_t *row, const char *name, double *v)
{
    json_t *m = json_object_get(row, "metrics"), *x = NULL;
    const char *dot = strchr(name, '.');
    if (!strcmp(name, "ce_residual"))
        x = json_object_get(row, "ce_residual");
    else if (!strcmp(name, "extra_pct") || !strcmp(name, "extra_per_token"))
        x = json_object_get(json_object_get(row, "flops"), name);
    else if (!json_is_object(m))
        return false;
    else if (dot) {
        char head[32];
        snprintf(head, sizeof head, "%.*s", (int)(dot - name), name);
        x = json_object_get(json_object_get(m, head), dot + 1);
    } else
        x = json_object_get(m, name);
    if (!json_is_number(x))
        return false;
    *v = json_number_value(x);
    return true;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* median (mean of the middle two for even n), min, max */
static json_t *stat_of(json_t *arr)
{
    size_t n = json_array_size(arr), i;
    double *v = malloc((n ? n : 1) * sizeof *v), med;
    json_t *o = json_object();
    for (i = 0; i < n; i++)
        v[i] = json_number_value(json_array_get(arr, i));
    qsort(v, n, sizeof *v, cmp_double);
    med = n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
    json_object_set_new(o, "median", json_real(med));
    json_object_set_new(o, "min", json_real(v[0]));
    json_object_set_new(o, "max", json_real(v[n - 1]));
    free(v);
    return o;
}

json_t *_cic_sweep_aggregate(json_t *points)
{
    json_t *groups = json_object(), *out = json_array(), *p, *g;
    size_t i, j, k;
    const char *key;
    json_array_foreach(points, i, p) {
        json_t *params = json_deep_copy(json_object_get(p, "params"));
        json_t *rows = json_object_get(json_object_get(p, "report"), "results"), *row;
        char *pk;
        json_object_del(params, "seed");
        pk = json_dumps(params, JSON_SORT_KEYS | JSON_COMPACT);
        json_array_foreach(rows, j, row) {
            char gk[2048];
            json_t *vals;
            snprintf(gk, sizeof gk, "%s\x1f%s\x1f%s", pk ? pk : "",
                     json_string_value(json_object_get(row, "transform")),
                     json_string_value(json_object_get(row, "engine")));
            g = json_object_get(groups, gk);
            if (!g) {
                g = json_object();
                json_object_set(g, "params", params);
                json_object_set(g, "transform", json_object_get(row, "transform"));
                json_object_set(g, "engine", json_object_get(row, "engine"));
                json_object_set_new(g, "vals", json_object());
                json_object_set_new(groups, gk, g);
            }
            vals = json_object_get(g, "vals");
            for (k = 0; k < N_AGG; k++) {
                double v;
                json_t *a;
                if (!row_value(row, AGG_METRICS[k], &v))
                    continue;
                a = json_object_get(vals, AGG_METRICS[k]);
                if (!a) {
                    a = json_array();
                    json_object_set_new(vals, AGG_METRICS[k], a);
                }
                json_array_append_new(a, json_real(v));
            }
        }
        free(pk);
        json_decref(params);
    }
    json_object_foreach(groups, key, g) {
        json_t *e = json_object(), *vals = json_object_get(g, "vals"), *st = json_object(), *a;
        const char *mk;
        size_t n = 0;
        json_object_set(e, "params", json_object_get(g, "params"));
        json_object_set(e, "transform", json_object_get(g, "transform"));
        json_object_set(e, "engine", json_object_get(g, "engine"));
        json_object_foreach(vals, mk, a) {
            json_object_set_new(st, mk, stat_of(a));
            if (json_array_size(a) > n)
                n = json_array_size(a);
        }
        json_object_set_new(e, "n", json_integer((json_int_t)n));
        json_object_set_new(e, "values", st);
        json_array_append_new(out, e);
    }
    json_decref(groups);
    return out;
}

/* The "case" object report.json gives c. */
json_t *_cic_sweep_case_object(const cic_case *c)
{
    cic_report tmp;
    json_t *rj, *o;
    memset(&tmp, 0, sizeof tmp);
    tmp.kase = c;
    rj = cic_report_to_json(&tmp);
    o = rj ? json_incref(json_object_get(rj, "case")) : NULL;
    json_decref(rj);
    return o;
}

json_t *_cic_sweep_header(const cic_case *c, const char *sha, const char *src, size_t len)
{
    json_t *root = json_object(), *axes = json_array(), *vals = json_object();
    cic_report tmp;
    json_t *rj;
    int k, j;
    memset(&tmp, 0, sizeof tmp);
    tmp.kase = c;
    rj = cic_report_to_json(&tmp); /* the case as parsed, the way report.json has it */
    json_object_set_new(root, "cicheck_version", json_string(CIC_VERSION));
    json_object_set_new(root, "kind", json_string("sweep"));
    json_object_set(root, "case", rj ? json_object_get(rj, "case") : json_null());
    json_decref(rj);
    json_object_set_new(root, "case_sha256", json_string(sha));
    {
        json_t *t = json_stringn(src, len);
        json_object_set_new(root, "case_source", t ? t : json_null());
    }
    for (k = 0; k < CIC_AXIS_COUNT; k++) {
        json_t *a;
        if (c->sweep.n[k] == 0)
            continue;
        json_array_append_new(axes, json_string(CIC_AXIS_NAME[k]));
        a = json_array();
        for (j = 0; j < c->sweep.n[k]; j++)
            json_array_append_new(a, axis_value((enum cic_sweep_axis)k, c->sweep.v[k][j]));
        json_object_set_new(vals, CIC_AXIS_NAME[k], a);
    }
    json_object_set_new(root, "axes", axes);
    json_object_set_new(root, "axis_values", vals);
    json_object_set_new(root, "total_points", json_integer(c->sweep.points));
    return root;
}

/* ---- the job ---- */

cic_sweep_job *_cic_sweep_job_new(const char *out_dir, const char *out_root)
{
    cic_sweep_job *j = cic_calloc(1, sizeof *j);
    if (!j)
        return NULL;
    j->o.out_dir = out_dir;
    j->o.out_root = out_root;
    j->k = j->n = 1;
    return j;
}

long cic_sweep_total(const cic_sweep_job *j)
{
    return j->total;
}

bool cic_sweep_owns(const cic_sweep_job *j, long i)
{
    return !j->sharded || i % j->n == j->k - 1;
}

int cic_sweep_worst(const cic_sweep_job *j)
{
    return j->worst;
}

long cic_sweep_ran(const cic_sweep_job *j)
{
    return j->ran;
}

long cic_sweep_passed(const cic_sweep_job *j)
{
    return j->passed;
}

const json_t *cic_sweep_json(const cic_sweep_job *j)
{
    return j->root;
}

int cic_sweep_point_exit(const cic_sweep_job *j, long i)
{
    json_t *p = json_array_get(json_object_get(j->root, "points"), (size_t)i);
    return (int)json_integer_value(json_object_get(p, "exit_code"));
}

void cic_sweep_destroy(cic_sweep_job *j)
{
    if (!j)
        return;
    cic_files_read_free(&j->fr);
    json_decref(j->points);
    json_decref(j->root);
    free(j);
}

/* ---- writing ---- */

static int write_failed(cic_sweep_job *j)
{
    j->worst = CIC_EINTERNAL;
    return CIC_EINTERNAL;
}

/* sweep.json is replaced atomically, in a folder below out_root made as
 * cicheck's own. */
int cic_sweep_write(cic_sweep_job *j, char *path, size_t cap, cic_diag *d)
{
    const char *dir = j->o.out_dir, *root = j->o.out_root ? j->o.out_root : dir;
    char *text;
    int rc;
    snprintf(path, cap, "%s/sweep.json", dir);
    text = json_dumps(j->root, JSON_INDENT(1) | JSON_REAL_PRECISION(17));
    if (!text) {
        cic_diag_set(d, path, 0, 0, "cannot write: out of memory");
        return write_failed(j);
    }
    if (cic_mkdir_under(root, dir, d) < 0) {
        free(text);
        return write_failed(j);
    }
    rc = cic_write_atomic(path, text, strlen(text), d);
    free(text);
    return rc < 0 ? write_failed(j) : CIC_OK;
}

/* plots/ is cicheck's own folder below the sweep's. A plot that cannot be
 * drawn from the data, or a missing gnuplot, is only a warning; a lost
 * result (-2: a write or gnuplot failed) is exit 3. */
int cic_sweep_plot(cic_sweep_job *j, int *n_plots, cic_diag *d)
{
    char path[1300];
    cic_diag pd;
    int prc, n = 0;
    *n_plots = -1;
    snprintf(path, sizeof path, "%s/plots", j->o.out_dir);
    if (cic_mkdir_under(j->o.out_dir, path, d) < 0)
        return write_failed(j);
    prc = cic_plot_dir(j->o.out_dir, &n, &pd);
    if (prc < 0)
        *d = pd;
    if (prc == -2)
        return write_failed(j);
    if (prc >= 0)
        *n_plots = n;
    return CIC_OK;
}
