/* sweep.c: sweeps, shards and merging (`cicheck run` on a case with a
 * [sweep] table, `--shard K/N`, `cicheck merge`).
 *
 * A sweep runs its case once per point of the cartesian product of the
 * swept axes (cic_case_sweep_point), each point a full run with its own
 * report.json under <out>/points/<index>/. sweep.json gathers every
 * point's report with its parameters and an aggregate over seeds (median,
 * min, max per setting of the other axes, per transform and engine), then
 * the plots are drawn from it. A shard runs the points whose index is
 * K - 1 modulo N; merging the N shards' sweep.json gives the sweep.json of
 * the whole run, since the aggregate is computed from the points alone. */
#include "run.h"

#include "../model/model.h"
#include "../report/plot.h"

#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

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
static json_t *point_params(const cic_sweep *s, long i)
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

static int file_sha256(char hex[65], const char *path)
{
    FILE *f = fopen(path, "rb");
    cic_sha256 s;
    unsigned char buf[65536], dig[32];
    size_t n;
    int i;
    if (!f)
        return -1;
    cic_sha256_init(&s);
    while ((n = fread(buf, 1, sizeof buf, f)) > 0)
        cic_sha256_update(&s, buf, n);
    fclose(f);
    cic_sha256_final(&s, dig);
    for (i = 0; i < 32; i++)
        snprintf(hex + 2 * i, 3, "%02x", dig[i]);
    return 0;
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

static json_t *aggregate(json_t *points)
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

/* ---- writing ---- */

static int write_sweep(json_t *root, const char *dir, bool no_plots)
{
    char path[1200], *text;
    cic_diag d;
    int rc, nplots = 0;
    snprintf(path, sizeof path, "%s/sweep.json", dir);
    text = json_dumps(root, JSON_INDENT(1) | JSON_REAL_PRECISION(17));
    if (!text || cic_mkdir_p(dir, &d) < 0) {
        free(text);
        fprintf(stderr, "cicheck: cannot write %s\n", path);
        return CIC_EINTERNAL;
    }
    rc = cic_write_atomic(path, text, strlen(text), &d);
    free(text);
    if (rc < 0) {
        cic_diag_print(stderr, &d);
        return CIC_EINTERNAL;
    }
    printf("wrote %s\n", path);
    if (!no_plots) {
        if (cic_plot_dir(dir, &nplots, &d) < 0)
            fprintf(stderr, "cicheck: warning: plots not drawn: %s\n", d.msg);
        else
            printf("drew %d plot%s in %s/plots (PNG, SVG, PDF, with .dat and .gp)\n", nplots,
                   nplots == 1 ? "" : "s", dir);
    }
    return CIC_OK;
}

static json_t *sweep_header(const cic_case *c, const char *sha)
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

int cic_run_sweep(const cic_case *c, const cic_run_args *a, const char *out_dir)
{
    long total = c->sweep.points, i, k = 1, n = 1, ran = 0, passed = 0;
    int worst = CIC_OK;
    char sha[65] = "";
    json_t *root, *points;
    if (a->shard) {
        char *end;
        k = strtol(a->shard, &end, 10);
        if (*end == '/')
            n = strtol(end + 1, &end, 10);
        if (*end != '\0' || n < 1 || k < 1 || k > n || n > 1000000) {
            fprintf(stderr, "cicheck: --shard takes K/N with 1 <= K <= N (got '%s')\n", a->shard);
            return CIC_EINPUT;
        }
    }
    if (file_sha256(sha, c->path) < 0) {
        fprintf(stderr, "cicheck: %s: cannot read the case file to fingerprint it\n", c->path);
        return CIC_EINPUT;
    }
    root = sweep_header(c, sha);
    if (a->shard) {
        json_t *sh = json_object();
        json_object_set_new(sh, "index", json_integer(k));
        json_object_set_new(sh, "count", json_integer(n));
        json_object_set_new(root, "shard", sh);
    } else {
        json_object_set_new(root, "shard", json_null());
    }
    points = json_array();
    printf("sweep %s: %ld point%s%s\n", c->name, total, total == 1 ? "" : "s",
           a->shard ? " (this shard runs every N-th)" : "");
    for (i = 0; i < total; i++) {
        cic_case pc;
        cic_diag d;
        cic_run_args one = *a;
        cic_case_run *cr = NULL;
        char out[1400], dump[1400], *ptext;
        json_t *p, *params;
        int rc;
        if (a->shard && i % n != k - 1)
            continue;
        if (cic_case_sweep_point(&pc, c, i, &d) != CIC_OK) {
            cic_diag_print(stderr, &d);
            worst = CIC_EINPUT;
            continue;
        }
        snprintf(out, sizeof out, "%s/points/%ld", out_dir, i);
        one.preloaded = &pc;
        one.compact = true;
        one.no_baseline = true;
        one.out_dir = out;
        one.quiet = true;
        if (a->dump_dir) {
            snprintf(dump, sizeof dump, "%s/points/%ld", a->dump_dir, i);
            one.dump_dir = dump;
        }
        params = point_params(&c->sweep, i);
        ptext = json_dumps(params, JSON_COMPACT);
        rc = cic_run_case(c->path, &one, &cr);
        ran++;
        if (rc == CIC_OK)
            passed++;
        if (rc > worst)
            worst = rc;
        printf("  point %ld/%ld %s: %s (%.1f s)\n", i + 1, total, ptext ? ptext : "",
               rc == CIC_OK ? "PASS" : "FAIL", cr && cr->rep.kase ? cr->rep.wall_seconds : 0.0);
        fflush(stdout);
        free(ptext);
        p = json_object();
        json_object_set_new(p, "index", json_integer(i));
        json_object_set_new(p, "params", params);
        json_object_set_new(p, "exit_code", json_integer(rc));
        json_object_set_new(p, "pass", json_boolean(rc == CIC_OK));
        json_object_set_new(p, "report", cr && cr->rep.kase ? cic_report_to_json(&cr->rep)
                                                            : json_null());
        json_array_append_new(points, p);
        cic_case_run_free(cr);
    }
    json_object_set_new(root, "points", points);
    json_object_set_new(root, "aggregate", aggregate(points));
    json_object_set_new(root, "pass", json_boolean(worst == CIC_OK));
    printf("sweep %s: %ld point%s run, %ld passed, %ld failed\n", c->name, ran,
           ran == 1 ? "" : "s", passed, ran - passed);
    {
        int rc = write_sweep(root, out_dir, a->no_plots);
        if (rc > worst)
            worst = rc;
    }
    json_decref(root);
    return worst;
}

/* ---- merge ---- */

int cic_merge_sweeps(const char *const *dirs, int n, const char *out_dir, bool no_plots)
{
    json_t **sw = cic_calloc((size_t)n, sizeof *sw), *root = NULL, *points = NULL;
    json_t **byidx = NULL;
    long total = 0, count = 0, i;
    bool *shard_seen = NULL, pass = true;
    int d, rc = CIC_EINPUT;
    if (!sw)
        return CIC_EINTERNAL;
    for (d = 0; d < n; d++) {
        char path[1200];
        json_error_t je;
        json_t *sh;
        snprintf(path, sizeof path, "%s/sweep.json", dirs[d]);
        sw[d] = json_load_file(path, 0, &je);
        if (!sw[d] || strcmp(json_string_value(json_object_get(sw[d], "kind")) ?
                             json_string_value(json_object_get(sw[d], "kind")) : "", "sweep")) {
            fprintf(stderr, "cicheck: %s: not a sweep report%s%s\n", path, sw[d] ? "" : ": ",
                    sw[d] ? "" : je.text);
            goto done;
        }
        sh = json_object_get(sw[d], "shard");
        if (!json_is_object(sh)) {
            fprintf(stderr, "cicheck: %s: not a shard (run with --shard K/N)\n", path);
            goto done;
        }
        if (d == 0) {
            total = (long)json_integer_value(json_object_get(sw[0], "total_points"));
            count = (long)json_integer_value(json_object_get(sh, "count"));
            if (total < 1 || count < 1 || count > 1000000) {
                fprintf(stderr, "cicheck: %s: bad total_points or shard count\n", path);
                goto done;
            }
            shard_seen = cic_calloc((size_t)count + 1, sizeof *shard_seen);
            byidx = cic_calloc((size_t)total, sizeof *byidx);
            if (!shard_seen || !byidx) {
                rc = CIC_EINTERNAL;
                goto done;
            }
        } else {
            static const char *const same[] = {"case_sha256", "cicheck_version"};
            size_t q;
            for (q = 0; q < 2; q++) {
                const char *x = json_string_value(json_object_get(sw[0], same[q]));
                const char *y = json_string_value(json_object_get(sw[d], same[q]));
                if (!x || !y || strcmp(x, y)) {
                    fprintf(stderr, "cicheck: refusing to merge: %s and %s differ in %s "
                                    "(%s vs %s)\n", dirs[0], dirs[d], same[q], x ? x : "?",
                            y ? y : "?");
                    goto done;
                }
            }
            if ((long)json_integer_value(json_object_get(sw[d], "total_points")) != total ||
                (long)json_integer_value(json_object_get(sh, "count")) != count) {
                fprintf(stderr, "cicheck: refusing to merge: %s and %s have different "
                                "point or shard counts\n", dirs[0], dirs[d]);
                goto done;
            }
        }
        {
            long k = (long)json_integer_value(json_object_get(sh, "index"));
            json_t *p;
            size_t j;
            if (k < 1 || k > count || shard_seen[k]) {
                fprintf(stderr, "cicheck: refusing to merge: shard %ld/%ld given twice or "
                                "out of range (%s)\n", k, count, dirs[d]);
                goto done;
            }
            shard_seen[k] = true;
            json_array_foreach(json_object_get(sw[d], "points"), j, p) {
                long idx = (long)json_integer_value(json_object_get(p, "index"));
                if (idx < 0 || idx >= total || byidx[idx]) {
                    fprintf(stderr, "cicheck: refusing to merge: point %ld appears twice or "
                                    "is out of range (%s)\n", idx, dirs[d]);
                    goto done;
                }
                byidx[idx] = p;
            }
        }
    }
    for (i = 0; i < total; i++)
        if (!byidx[i]) {
            fprintf(stderr, "cicheck: refusing to merge: point %ld of %ld is missing (give all "
                            "%ld shards)\n", i, total, count);
            goto done;
        }
    root = json_deep_copy(sw[0]);
    points = json_array();
    for (i = 0; i < total; i++) {
        json_array_append(points, byidx[i]);
        if (!json_is_true(json_object_get(byidx[i], "pass")))
            pass = false;
    }
    json_object_set_new(root, "shard", json_null());
    json_object_set_new(root, "points", points);
    json_object_set_new(root, "aggregate", aggregate(points));
    json_object_set_new(root, "pass", json_boolean(pass));
    printf("merged %d shard%s: %ld points\n", n, n == 1 ? "" : "s", total);
    rc = write_sweep(root, out_dir, no_plots);
    if (rc == CIC_OK && !pass)
        rc = CIC_EGATE;
done:
    for (d = 0; d < n; d++)
        json_decref(sw[d]);
    json_decref(root);
    free(sw);
    free(byidx);
    free(shard_seen);
    return rc;
}
