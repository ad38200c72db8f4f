/* SPDX-License-Identifier: MIT */
/* merge.c: the merge of a sweep's shards (`cicheck merge` on the folders
 * of `cicheck run --shard K/N` on a case with a [sweep] table): N
 * sweep.json files give the sweep.json of the whole run, every point in
 * index order and the aggregate recomputed from the points (sweep.c).
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
#include "sweep_int.h"

#include "../base/json_type.h"
#include "../case/case.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define SHARD_MAX_BYTES CIC_SWEEP_JSON_MAX

typedef struct {
    const char *path;   /* the shard's sweep.json, for messages */
    const char *dir;
    json_t *root;
    long index;         /* K of K/N */
    const cic_case *kase; /* its embedded case as loaded (while its points are checked) */
    json_t *want;       /* the header that case gives (_cic_sweep_header) */
} shard;



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
    s->want = _cic_sweep_header(c, sha, json_string_value(src), json_string_length(src));
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
    want = _cic_sweep_point_params(&c->sweep, idx);
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
    want = _cic_sweep_case_object(pc);
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

/* The merged sweep.json into job j: every point in index order, the
 * aggregate recomputed, shard null; the worst exit code of a point, as the
 * unsharded sweep gives. */
static int merge_build(merge_ctx *m, cic_sweep_job *j, cic_diag *d)
{
    json_t *points;
    bool pass = true;
    long i;
    for (i = 0; i < m->total; i++)
        if (!m->byidx[i]) {
            cic_diag_set(d, "", 0, 0, "refusing to merge: point %ld of %ld is missing (give "
                         "all %ld shards)", i, m->total, m->count);
            return CIC_EINPUT;
        }
    j->root = json_deep_copy(m->sh[0].root);
    points = json_array();
    if (!j->root || !points) {
        json_decref(points);
        cic_diag_set(d, "", 0, 0, "merge: out of memory");
        return CIC_EINTERNAL;
    }
    for (i = 0; i < m->total; i++) {
        int code = (int)json_integer_value(json_object_get(m->byidx[i], "exit_code"));
        json_array_append(points, m->byidx[i]);
        if (!json_is_true(json_object_get(m->byidx[i], "pass")))
            pass = false;
        else
            j->passed++;
        if (code > j->worst)
            j->worst = code;
    }
    j->total = j->ran = m->total;
    json_object_set_new(j->root, "shard", json_null());
    json_object_del(j->root, "files_read"); /* checked equal; as the unsharded sweep.json */
    json_object_set_new(j->root, "points", points);
    json_object_set_new(j->root, "aggregate", _cic_sweep_aggregate(points));
    json_object_set_new(j->root, "pass", json_boolean(pass));
    return CIC_OK;
}

static void merge_ctx_free(merge_ctx *m)
{
    int k;
    for (k = 0; m->sh && k < m->n; k++) {
        json_decref(m->sh[k].root);
        json_decref(m->sh[k].want);
    }
    free(m->sh);
    free(m->paths);
    free(m->c);
    free(m->ci);
    free(m->byidx);
    free(m->shard_seen);
}

int cic_sweep_merge_load(cic_sweep_job **out, const char *const *dirs, int n,
                         const char *out_dir, cic_diag *d)
{
    merge_ctx m;
    cic_sweep_job *j = NULL;
    int k, rc;

    *out = NULL;
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
    j = _cic_sweep_job_new(out_dir, out_dir);
    if (!m.sh || !m.paths || !m.c || !m.ci || !j) {
        cic_diag_set(d, "", 0, 0, "merge: out of memory");
        rc = CIC_EINTERNAL;
        goto done;
    }
    for (k = 0; k < n; k++)
        if ((rc = merge_header(&m, k, dirs[k], d)) != CIC_OK ||
            (rc = merge_points(&m, k, d)) != CIC_OK)
            goto done;
    rc = merge_build(&m, j, d);
done:
    merge_ctx_free(&m);
    if (rc == CIC_OK)
        *out = j;
    else
        cic_sweep_destroy(j);
    return rc;
}

int cic_sweep_merge(const char *const *dirs, int n, const char *out_dir, bool no_plots,
                    cic_diag *d)
{
    cic_sweep_job *j = NULL;
    char path[1300];
    int rc = cic_sweep_merge_load(&j, dirs, n, out_dir, d), np;
    cic_diag pd;
    if (rc != CIC_OK)
        return rc;
    rc = cic_sweep_write(j, path, sizeof path, d);
    if (rc == CIC_OK && !no_plots && cic_sweep_plot(j, &np, &pd) != CIC_OK)
        *d = pd; /* lost; plots the data cannot give are no error here */
    rc = cic_sweep_worst(j);
    cic_sweep_destroy(j);
    return rc;
}
