/* SPDX-License-Identifier: MIT */
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
 * the whole run, since the aggregate is computed from the points alone. A
 * shard's sweep.json records the SHA-256 of what it read of each file
 * (files_read.c): shards that read different bytes are not merged. */
#include "run.h"
#include "../base/json_type.h"

#include "../model/model.h"
#include "../report/plot.h"

#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
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

/* sweep.json (atomically) and the plots into dir (root: the part of it the
 * user named; below it the folders are cicheck's own). CIC_OK, or
 * CIC_EINTERNAL with d set: a write that failed, plots/ a link, or plots
 * that could not be written or rendered. A plot that cannot be drawn from
 * the data, or a missing gnuplot, is only a warning. */
static int write_sweep(json_t *root, const char *out_root, const char *dir, bool no_plots,
                       cic_diag *d)
{
    char path[1300], *text;
    int rc, nplots = 0;
    snprintf(path, sizeof path, "%s/sweep.json", dir);
    text = json_dumps(root, JSON_INDENT(1) | JSON_REAL_PRECISION(17));
    if (!text) {
        cic_diag_set(d, path, 0, 0, "cannot write: out of memory");
        return CIC_EINTERNAL;
    }
    if (cic_mkdir_under(out_root, dir, d) < 0) {
        free(text);
        return CIC_EINTERNAL;
    }
    rc = cic_write_atomic(path, text, strlen(text), d);
    free(text);
    if (rc < 0)
        return CIC_EINTERNAL;
    printf("wrote %s\n", path);
    if (no_plots)
        return CIC_OK;
    snprintf(path, sizeof path, "%s/plots", dir);
    if (cic_mkdir_under(dir, path, d) < 0)
        return CIC_EINTERNAL;
    {
        cic_diag pd;
        int prc = cic_plot_dir(dir, &nplots, &pd);
        if (prc == -2) { /* a lost result, not a figure the data lacks */
            *d = pd;
            return CIC_EINTERNAL;
        }
        if (prc < 0)
            fprintf(stderr, "cicheck: warning: plots not drawn: %s\n", pd.msg);
        else
            printf("drew %d plot%s in %s/plots (PNG, SVG, PDF, with .dat and .gp)\n", nplots,
                   nplots == 1 ? "" : "s", dir);
    }
    return CIC_OK;
}

/* Everything of sweep.json that follows from the case alone: the case as
 * parsed, its file's hash and bytes (case_source, so a merge can recompute
 * all of this), the axes and their values, the number of points. */
static json_t *sweep_header(const cic_case *c, const char *sha, const char *src, size_t len)
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

/* --shard K/N (NULL: 1/1) into *k, *n; false when it is not 1 <= K <= N <=
 * 10^6. */
static bool shard_kn(const char *shard, long *k, long *n)
{
    char *end;
    *k = *n = 1;
    if (!shard)
        return true;
    *k = strtol(shard, &end, 10);
    if (*end == '/')
        *n = strtol(end + 1, &end, 10);
    return *end == '\0' && *n >= 1 && *k >= 1 && *k <= *n && *n <= 1000000;
}

int cic_sweep_check_outputs(const cic_case *c, const cic_run_args *a, const char *root,
                            const char *dir, cic_diag *d)
{
    char p[1400];
    long i, k, n;
    if (!shard_kn(a->shard, &k, &n))
        return CIC_OK; /* the run refuses it */
    if (!a->no_plots) {
        snprintf(p, sizeof p, "%s/plots", dir);
        if (cic_out_check(root, p, NULL, d) != 0)
            return CIC_EINPUT;
    }
    for (i = k - 1; i < c->sweep.points; i += n) {
        snprintf(p, sizeof p, "%s/points/%ld", dir, i);
        if (cic_out_check(root, p, "report.json", d) != 0)
            return CIC_EINPUT;
        snprintf(p, sizeof p, "%s/points/%ld", a->dump_dir ? a->dump_dir : "", i);
        if (a->dump_dir && cic_out_check(a->dump_root ? a->dump_root : a->dump_dir, p, NULL,
                                         d) != 0)
            return CIC_EINPUT;
    }
    return CIC_OK;
}

/* A shard's part of sweep.json: shard {index, count}, and files_read, what
 * the merge checks the shards agree on: the bytes of every file the points
 * read (no axis a checkpoint allows changes which), hashed before they run.
 * CIC_OK, or the error (printed). */
static int shard_fields(json_t *root, const cic_case *c, long k, long n, cic_files_read *fr)
{
    json_t *sh = json_object();
    cic_diag d;
    int rc;
    json_object_set_new(sh, "index", json_integer(k));
    json_object_set_new(sh, "count", json_integer(n));
    json_object_set_new(root, "shard", sh);
    if ((rc = cic_files_read_hash(fr, c, &d)) != CIC_OK) {
        cic_diag_print(stderr, &d);
        return rc;
    }
    json_object_set_new(root, "files_read", cic_files_read_json(fr));
    return CIC_OK;
}

/* After the points: every file hashed still the one they read (CIC_OK), or
 * CIC_EINTERNAL, printed. Frees fr. */
static int shard_files_unchanged(cic_files_read *fr)
{
    cic_diag d;
    int rc = cic_files_read_unchanged(fr, &d);
    if (rc != CIC_OK)
        cic_diag_print(stderr, &d);
    cic_files_read_free(fr);
    return rc;
}

int cic_run_sweep(const cic_case *c, const cic_run_args *a, const char *out_dir)
{
    long total = c->sweep.points, i, k = 1, n = 1, ran = 0, passed = 0;
    int worst = CIC_OK;
    char sha[65] = "", *src;
    size_t src_len = 0;
    json_t *root, *points;
    cic_files_read fr = {NULL, 0};
    if (!shard_kn(a->shard, &k, &n)) {
        fprintf(stderr, "cicheck: --shard takes K/N with 1 <= K <= N (got '%s')\n", a->shard);
        return CIC_EINPUT;
    }
    {
        cic_diag d;
        int rc = cic_file_read(&src, &src_len, c->path, (size_t)CIC_CASE_MAX_FILE_BYTES,
                               "a case file (TOML)", &d);
        if (rc != CIC_OK) {
            cic_diag_print(stderr, &d);
            return rc;
        }
    }
    cic_sha256_hex(sha, src, src_len);
    root = sweep_header(c, sha, src, src_len);
    free(src);
    if (a->shard) {
        int rc = shard_fields(root, c, k, n, &fr);
        if (rc != CIC_OK) {
            json_decref(root);
            return rc;
        }
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
    if (a->shard && shard_files_unchanged(&fr) != CIC_OK) {
        json_decref(points);
        json_decref(root);
        return CIC_EINTERNAL; /* no sweep.json of points that read another file */
    }
    json_object_set_new(root, "points", points);
    json_object_set_new(root, "aggregate", aggregate(points));
    json_object_set_new(root, "pass", json_boolean(worst == CIC_OK));
    printf("sweep %s: %ld point%s run, %ld passed, %ld failed\n", c->name, ran,
           ran == 1 ? "" : "s", passed, ran - passed);
    {
        cic_diag d;
        int rc = write_sweep(root, a->out_root ? a->out_root : out_dir, out_dir, a->no_plots,
                             &d);
        if (rc != CIC_OK)
            cic_diag_print(stderr, &d);
        if (rc > worst)
            worst = rc;
    }
    json_decref(root);
    return worst;
}

/* ---- merge ----
 *
 * A shard is input like any other: its sweep.json may have been edited,
 * truncated or written by another case. Nothing in it is taken on trust
 * that can be recomputed: the embedded case source must hash to
 * case_sha256 and load; the case as parsed, the axes, their values and the
 * point count must be what that case gives; every point must belong to the
 * shard, carry the params of its index, an exit code with the matching
 * pass, and (when it ran) a report of the right shape whose case is the
 * point's case and whose pass agrees. Any mismatch refuses the merge with
 * exit 2, naming the shard's sweep.json and what is inconsistent. */

#define SHARD_MAX_BYTES CIC_SWEEP_JSON_MAX

typedef struct {
    const char *path;   /* the shard's sweep.json, for messages */
    const char *dir;
    json_t *root;
    long index;         /* K of K/N */
    const cic_case *kase; /* its embedded case as loaded (while its points are checked) */
    json_t *want;       /* the header that case gives (sweep_header) */
} shard;

/* The "case" object report.json gives c. */
static json_t *case_object(const cic_case *c)
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

/* The header a shard must have: its case_source must hash to its
 * case_sha256 and load into *c, as a sweep; s->kase and s->want are then
 * that case and the header it gives. A shard after the first whose case
 * source and file name are the first's (first->root) gives what the first
 * gave, so its case is not loaded again: loading checks every point of the
 * sweep, and doing it per shard made a merge of N shards of an N-point
 * sweep quadratic. */
static int header_want(shard *s, cic_case *c, const shard *first, cic_diag *d)
{
    json_t *r = s->root, *src, *file;
    const char *sha = json_string_value(json_object_get(r, "case_sha256"));
    char hex[65];
    cic_diag cd;
    src = json_object_get(r, "case_source");
    file = json_object_get(json_object_get(r, "case"), "file");
    if (!sha || !json_is_string(src) || !json_is_string(file)) {
        cic_diag_set(d, s->path, 0, 0, "no case_sha256, case_source or case.file (shards "
                     "must be written by this version of cicheck)");
        return CIC_EINPUT;
    }
    cic_sha256_hex(hex, json_string_value(src), json_string_length(src));
    if (strcmp(hex, sha) != 0) {
        cic_diag_set(d, s->path, 0, 0, "case_source does not hash to case_sha256 (%.16s... vs "
                     "%.16s...): the shard was edited", hex, sha);
        return CIC_EINPUT;
    }
    if (first && json_equal(src, json_object_get(first->root, "case_source")) &&
        json_equal(file, json_object_get(json_object_get(first->root, "case"), "file"))) {
        s->kase = first->kase; /* the same bytes load the same case */
        s->want = json_incref(first->want);
        return CIC_OK;
    }
    if (strlen(json_string_value(src)) != json_string_length(src) ||
        cic_case_load_string(c, json_string_value(src), json_string_value(file), &cd) !=
            CIC_OK) {
        cic_diag_set(d, s->path, 0, 0, "the embedded case does not load: %s",
                     strlen(json_string_value(src)) != json_string_length(src)
                         ? "it holds a NUL byte" : cd.msg);
        return CIC_EINPUT;
    }
    if (!c->sweep.on) {
        cic_diag_set(d, s->path, 0, 0, "the embedded case has no [sweep] table");
        return CIC_EINPUT;
    }
    s->kase = c;
    s->want = sweep_header(c, sha, json_string_value(src), json_string_length(src));
    if (!s->want) {
        cic_diag_set(d, s->path, 0, 0, "out of memory");
        return CIC_EINTERNAL;
    }
    return CIC_OK;
}

/* The header of a shard against what its embedded case gives (s->kase and
 * s->want on success, see header_want; first is the first shard, or NULL
 * for the first itself). */
static int check_header(shard *s, cic_case *c, const shard *first, long *total, long *count,
                        cic_diag *d)
{
    static const char *const same[] = {"case", "axes", "axis_values", "total_points"};
    json_t *r = s->root, *sh, *want;
    size_t q;
    int rc;
    if (!json_is_object(r) || !json_is_string(json_object_get(r, "kind")) ||
        strcmp(json_string_value(json_object_get(r, "kind")), "sweep") != 0) {
        cic_diag_set(d, s->path, 0, 0, "not a sweep report (no \"kind\": \"sweep\")");
        return CIC_EINPUT;
    }
    sh = json_object_get(r, "shard");
    if (!json_is_object(sh)) {
        cic_diag_set(d, s->path, 0, 0, "not a shard (run with --shard K/N)");
        return CIC_EINPUT;
    }
    if (!json_is_integer(json_object_get(sh, "index")) ||
        !json_is_integer(json_object_get(sh, "count"))) {
        cic_diag_set(d, s->path, 0, 0, "shard.index and shard.count must be integers");
        return CIC_EINPUT;
    }
    *count = (long)json_integer_value(json_object_get(sh, "count"));
    if (*count < 1 || *count > 1000000 ||
        json_integer_value(json_object_get(sh, "index")) < 1 ||
        json_integer_value(json_object_get(sh, "index")) > *count) {
        cic_diag_set(d, s->path, 0, 0, "shard %lld/%lld: want 1 <= K <= N <= 1000000",
                     (long long)json_integer_value(json_object_get(sh, "index")),
                     (long long)json_integer_value(json_object_get(sh, "count")));
        return CIC_EINPUT;
    }
    if ((rc = header_want(s, c, first, d)) != CIC_OK)
        return rc;
    want = s->want;
    for (q = 0; q < sizeof same / sizeof same[0]; q++)
        if (!json_equal(json_object_get(r, same[q]), json_object_get(want, same[q]))) {
            cic_diag_set(d, s->path, 0, 0, "%s is not what the embedded case gives (the shard "
                         "was edited, or written from another case)", same[q]);
            return CIC_EINPUT;
        }
    *total = s->kase->sweep.points;
    if (!json_is_array(json_object_get(r, "points"))) {
        cic_diag_set(d, s->path, 0, 0, "points is %s; an array expected",
                     cic_json_type_name(json_object_get(r, "points")));
        return CIC_EINPUT;
    }
    return CIC_OK;
}

/* One point of shard s (the j-th of its points array). */
static int check_point(const shard *s, size_t j, json_t *p, const cic_case *c, long total,
                       long count, cic_diag *d)
{
    json_t *rep, *rows, *row, *want, *v;
    long idx;
    int code;
    size_t k;
    cic_case *pc;
    cic_diag pd;
    bool ok;
    if (!json_is_object(p) || !json_is_integer(json_object_get(p, "index"))) {
        cic_diag_set(d, s->path, 0, 0, "points[%zu] is %s without an integer index", j,
                     cic_json_type_name(p));
        return CIC_EINPUT;
    }
    idx = (long)json_integer_value(json_object_get(p, "index"));
    if (json_integer_value(json_object_get(p, "index")) < 0 ||
        json_integer_value(json_object_get(p, "index")) >= total) {
        cic_diag_set(d, s->path, 0, 0, "points[%zu]: index %lld outside 0..%ld", j,
                     (long long)json_integer_value(json_object_get(p, "index")), total - 1);
        return CIC_EINPUT;
    }
    if (idx % count != s->index - 1) {
        cic_diag_set(d, s->path, 0, 0, "point %ld belongs to shard %ld/%ld, not to this "
                     "shard %ld/%ld", idx, idx % count + 1, count, s->index, count);
        return CIC_EINPUT;
    }
    want = point_params(&c->sweep, idx);
    ok = json_equal(json_object_get(p, "params"), want);
    json_decref(want);
    if (!ok) {
        cic_diag_set(d, s->path, 0, 0, "point %ld: params are not those of index %ld", idx,
                     idx);
        return CIC_EINPUT;
    }
    v = json_object_get(p, "exit_code");
    if (!json_is_integer(v) || json_integer_value(v) < CIC_OK ||
        json_integer_value(v) > CIC_EINTERNAL) {
        cic_diag_set(d, s->path, 0, 0, "point %ld: exit_code is %s; 0, 1, 2 or 3 expected",
                     idx, json_is_integer(v) ? "out of range" : cic_json_type_name(v));
        return CIC_EINPUT;
    }
    code = (int)json_integer_value(v);
    v = json_object_get(p, "pass");
    if (!json_is_boolean(v) || json_is_true(v) != (code == CIC_OK)) {
        cic_diag_set(d, s->path, 0, 0, "point %ld: pass is %s with exit_code %d", idx,
                     json_is_boolean(v) ? (json_is_true(v) ? "true" : "false") : cic_json_type_name(v),
                     code);
        return CIC_EINPUT;
    }
    rep = json_object_get(p, "report");
    if (json_is_null(rep) && code >= CIC_EINPUT)
        return CIC_OK; /* the point could not run: no report, exit 2 or 3 kept */
    if (!json_is_object(rep)) {
        cic_diag_set(d, s->path, 0, 0, "point %ld: report is %s; the report of a point that "
                     "ran (exit_code %d) expected", idx, cic_json_type_name(rep), code);
        return CIC_EINPUT;
    }
    v = json_object_get(rep, "pass");
    if (!json_is_boolean(v) || (code <= CIC_EGATE && json_is_true(v) != (code == CIC_OK))) {
        cic_diag_set(d, s->path, 0, 0, "point %ld: report.pass is %s with exit_code %d", idx,
                     json_is_boolean(v) ? (json_is_true(v) ? "true" : "false") : cic_json_type_name(v),
                     code);
        return CIC_EINPUT;
    }
    rows = json_object_get(rep, "results");
    if (!json_is_array(rows)) {
        cic_diag_set(d, s->path, 0, 0, "point %ld: report.results is %s; an array expected",
                     idx, cic_json_type_name(rows));
        return CIC_EINPUT;
    }
    json_array_foreach(rows, k, row) {
        json_t *m = json_object_get(row, "metrics"), *fl = json_object_get(row, "flops");
        if (!json_is_object(row) || !json_is_string(json_object_get(row, "transform")) ||
            !json_is_string(json_object_get(row, "engine")) ||
            !(json_is_object(m) || json_is_null(m)) || !(json_is_object(fl) || !fl)) {
            cic_diag_set(d, s->path, 0, 0, "point %ld: report.results[%zu] is not a result "
                         "row (an object with transform and engine strings, metrics an "
                         "object or null)", idx, k);
            return CIC_EINPUT;
        }
    }
    /* the report's case is the point's case */
    pc = malloc(sizeof *pc);
    if (!pc) {
        cic_diag_set(d, s->path, 0, 0, "out of memory");
        return CIC_EINTERNAL;
    }
    if (cic_case_sweep_point(pc, c, idx, &pd) != CIC_OK) {
        cic_diag_set(d, s->path, 0, 0, "point %ld: not a valid point of the case: %s", idx,
                     pd.msg);
        free(pc);
        return CIC_EINPUT;
    }
    want = case_object(pc);
    free(pc);
    ok = want && json_equal(json_object_get(rep, "case"), want);
    json_decref(want);
    if (!ok) {
        cic_diag_set(d, s->path, 0, 0, "point %ld: report.case is not the case of point %ld",
                     idx, idx);
        return CIC_EINPUT;
    }
    return CIC_OK;
}

/* The folders are told apart by what they are, not how they are spelled
 * (s1, ./s1, a link to s1). */
int cic_merge_check_out(const char *const *dirs, int n, const char *out_dir, cic_diag *d)
{
    struct stat so, si;
    int k;
    if (!out_dir || !out_dir[0]) {
        cic_diag_set(d, "", 0, 0, "merge: empty --out folder name");
        return CIC_EINPUT;
    }
    if (stat(out_dir, &so) != 0)
        return CIC_OK; /* a new folder */
    for (k = 0; k < n; k++)
        if (stat(dirs[k], &si) == 0 && si.st_dev == so.st_dev && si.st_ino == so.st_ino) {
            cic_diag_set(d, out_dir, 0, 0, "refusing to merge into a shard: --out is the same "
                         "folder as the shard %s (its files would be replaced)", dirs[k]);
            return CIC_EINPUT;
        }
    return CIC_OK;
}

/* What a merge gathers from its shards. */
typedef struct {
    shard *sh;
    int n;
    char (*paths)[1200];
    cic_case *c, *ci;  /* the first shard's case; another's, when its source or file differ */
    long total, count; /* points, shards */
    bool *shard_seen;
    json_t **byidx;    /* point index -> the point (borrowed from its shard) */
} merge_ctx;

/* Shard k's header: its case and counts, and for shards after the first
 * the same case hash, cicheck version and shard count as the first. */
static int merge_header(merge_ctx *m, int k, const char *dir, cic_diag *d)
{
    static const char *const same[] = {"case_sha256", "cicheck_version"};
    long tk = 0, ck = 0;
    size_t q;
    int r;
    snprintf(m->paths[k], sizeof m->paths[k], "%s/sweep.json", dir);
    m->sh[k].path = m->paths[k];
    m->sh[k].dir = dir;
    m->sh[k].root = cic_report_json_load(m->paths[k], SHARD_MAX_BYTES, d);
    if (!m->sh[k].root)
        return CIC_EINPUT;
    if ((r = check_header(&m->sh[k], k == 0 ? m->c : m->ci, k == 0 ? NULL : &m->sh[0], &tk,
                          &ck, d)) != CIC_OK)
        return r;
    m->sh[k].index = (long)json_integer_value(
        json_object_get(json_object_get(m->sh[k].root, "shard"), "index"));
    if (k == 0) {
        m->total = tk;
        m->count = ck;
        m->shard_seen = cic_calloc((size_t)m->count + 1, sizeof *m->shard_seen);
        m->byidx = cic_calloc((size_t)m->total, sizeof *m->byidx);
        if (!m->shard_seen || !m->byidx) {
            cic_diag_set(d, "", 0, 0, "merge: out of memory");
            return CIC_EINTERNAL;
        }
        return CIC_OK;
    }
    for (q = 0; q < 2; q++) {
        const char *x = json_string_value(json_object_get(m->sh[0].root, same[q]));
        const char *y = json_string_value(json_object_get(m->sh[k].root, same[q]));
        if (!x || !y || strcmp(x, y)) {
            cic_diag_set(d, m->sh[k].path, 0, 0, "refusing to merge: %s differs from "
                         "that of %s (%.64s vs %.64s)", same[q], m->sh[0].path,
                         y ? y : "?", x ? x : "?");
            return CIC_EINPUT;
        }
    }
    if (ck != m->count) {
        cic_diag_set(d, m->sh[k].path, 0, 0, "refusing to merge: shard count %ld, %s "
                     "has %ld", ck, m->sh[0].path, m->count);
        return CIC_EINPUT;
    }
    /* the same bytes of every file the points read (q, input, checkpoint) */
    return cic_files_read_compare(json_object_get(m->sh[0].root, "files_read"), m->sh[0].path,
                                  json_object_get(m->sh[k].root, "files_read"), m->sh[k].path,
                                  d);
}

/* Shard k's points, each checked and placed at its index; the shard's own
 * pass must agree with its points'. */
static int merge_points(merge_ctx *m, int k, cic_diag *d)
{
    shard *s = &m->sh[k];
    json_t *p, *sp;
    size_t j;
    bool all = true;
    int r;
    if (m->shard_seen[s->index]) {
        cic_diag_set(d, s->path, 0, 0, "refusing to merge: shard %ld/%ld given twice",
                     s->index, m->count);
        return CIC_EINPUT;
    }
    m->shard_seen[s->index] = true;
    json_array_foreach(json_object_get(s->root, "points"), j, p) {
        long idx;
        r = check_point(s, j, p, s->kase, m->total, m->count, d);
        if (r != CIC_OK)
            return r;
        idx = (long)json_integer_value(json_object_get(p, "index"));
        if (m->byidx[idx]) {
            cic_diag_set(d, s->path, 0, 0, "refusing to merge: point %ld appears twice", idx);
            return CIC_EINPUT;
        }
        m->byidx[idx] = p;
        all = all && json_is_true(json_object_get(p, "pass"));
    }
    sp = json_object_get(s->root, "pass");
    if (!json_is_boolean(sp) || json_is_true(sp) != all) {
        cic_diag_set(d, s->path, 0, 0, "pass is %s, but %s of its points passed",
                     json_is_boolean(sp) ? (json_is_true(sp) ? "true" : "false")
                                         : cic_json_type_name(sp), all ? "all" : "not all");
        return CIC_EINPUT;
    }
    return CIC_OK;
}

/* The merged sweep.json (every point in index order, the aggregate
 * recomputed), written with its plots; the worst exit code of a point, as
 * the unsharded sweep gives. */
static int merge_write(merge_ctx *m, const char *out_dir, bool no_plots, cic_diag *d)
{
    json_t *root, *points;
    bool pass = true;
    int worst = CIC_OK, rc;
    long i;
    for (i = 0; i < m->total; i++)
        if (!m->byidx[i]) {
            cic_diag_set(d, "", 0, 0, "refusing to merge: point %ld of %ld is missing (give "
                         "all %ld shards)", i, m->total, m->count);
            return CIC_EINPUT;
        }
    root = json_deep_copy(m->sh[0].root);
    points = json_array();
    if (!root || !points) {
        json_decref(root);
        json_decref(points);
        cic_diag_set(d, "", 0, 0, "merge: out of memory");
        return CIC_EINTERNAL;
    }
    for (i = 0; i < m->total; i++) {
        int code = (int)json_integer_value(json_object_get(m->byidx[i], "exit_code"));
        json_array_append(points, m->byidx[i]);
        if (!json_is_true(json_object_get(m->byidx[i], "pass")))
            pass = false;
        if (code > worst)
            worst = code;
        if (code >= CIC_EINPUT)
            fprintf(stderr, "cicheck: merge: point %ld exited %d in its shard (%s)\n", i, code,
                    code == CIC_EINPUT ? "bad input" : "its result was lost");
    }
    json_object_set_new(root, "shard", json_null());
    json_object_del(root, "files_read"); /* checked equal; as the unsharded sweep.json */
    json_object_set_new(root, "points", points);
    json_object_set_new(root, "aggregate", aggregate(json_object_get(root, "points")));
    json_object_set_new(root, "pass", json_boolean(pass));
    printf("merged %d shard%s: %ld points\n", m->n, m->n == 1 ? "" : "s", m->total);
    rc = write_sweep(root, out_dir, out_dir, no_plots, d);
    json_decref(root);
    return rc == CIC_OK ? worst : rc;
}

int cic_sweep_merge(const char *const *dirs, int n, const char *out_dir, bool no_plots,
                    cic_diag *d)
{
    merge_ctx m;
    int k, rc;

    memset(d, 0, sizeof *d);
    memset(&m, 0, sizeof m);
    if (n < 1) {
        cic_diag_set(d, "", 0, 0, "merge: no shard folders");
        return CIC_EINPUT;
    }
    rc = cic_merge_check_out(dirs, n, out_dir, d);
    if (rc != CIC_OK)
        return rc;
    m.n = n;
    m.sh = cic_calloc((size_t)n, sizeof *m.sh);
    m.paths = cic_calloc((size_t)n, sizeof *m.paths);
    m.c = malloc(sizeof *m.c);
    m.ci = malloc(sizeof *m.ci);
    if (!m.sh || !m.paths || !m.c || !m.ci) {
        cic_diag_set(d, "", 0, 0, "merge: out of memory");
        rc = CIC_EINTERNAL;
        goto done;
    }
    for (k = 0; k < n; k++)
        if ((rc = merge_header(&m, k, dirs[k], d)) != CIC_OK ||
            (rc = merge_points(&m, k, d)) != CIC_OK)
            goto done;
    rc = merge_write(&m, out_dir, no_plots, d);
done:
    for (k = 0; m.sh && k < n; k++) {
        json_decref(m.sh[k].root);
        json_decref(m.sh[k].want);
    }
    free(m.sh);
    free(m.paths);
    free(m.c);
    free(m.ci);
    free(m.byidx);
    free(m.shard_seen);
    return rc;
}

int cic_merge_sweeps(const char *const *dirs, int n, const char *out_dir, bool no_plots)
{
    cic_diag d;
    int rc = cic_sweep_merge(dirs, n, out_dir, no_plots, &d);
    if (rc >= CIC_EINPUT)
        cic_diag_print(stderr, &d);
    return rc;
}
