/* SPDX-License-Identifier: MIT */
/* session.c: the public API of libcicheck (include/cicheck/cicheck.h) on top
 * of the internals: the case loader (src/case) validates, the pipeline
 * (src/pipeline) computes, the report module writes report.json, and the
 * session keeps the case, the options and the last run's rows behind opaque
 * handles so that no internal layout reaches a library user. The command
 * line runs the same pipeline.
 *
 * Workload: one case at a time, as a CI job or a script around it would run
 * it; the session adds no copies of the numerics, only the row index. */
#include "cicheck/cicheck.h"
#include "session_int.h"

#include "base/base.h"
#include "case/case.h"
#include "pipeline/pipeline.h"
#include "pipeline/sweep.h"
#include "report/report.h"

#include <flint/flint.h>
#include <jansson.h>
#include <mpfr.h>
#include <math.h>
#include <string.h>

/* A row is a borrowed view of one result of the run the session owns. */
struct cic_row {
    const cic_result *x;
};

struct cic_session {
    cic_case *kase;      /* the loaded case; NULL before a successful load */
    bool ran;            /* rep holds the last run */
    cic_report rep;      /* its results (owned: results, gates, regress) */
    cic_row *rows;       /* n_rows views into rep.results */
    int n_rows;
    int exit_code;       /* of the last run; CIC_EXIT_INPUT before one */
    bool quiet;
    cic_rt rt;           /* the runs' context: threads (0: one per online
                          * core), counters; the session's own, so sessions
                          * in one process do not share state */
    bool has_out;
    char out_dir[1024];
    bool has_baseline;
    char baseline[1024];
    json_t *points;      /* the last sweep's (or sweep merge's) points */
    char **params;       /* each point's params as compact JSON */
    int n_points;
    char output[1400];   /* the file the last sweep, shard or merge wrote */
    char error[12288];   /* "" after a successful call; a line per error */
};

_Static_assert((int)CIC_EXIT_PASS == (int)CIC_OK && (int)CIC_EXIT_FAIL == (int)CIC_EGATE &&
                   (int)CIC_EXIT_INPUT == (int)CIC_EINPUT &&
                   (int)CIC_EXIT_RESOURCE == (int)CIC_EINTERNAL,
               "public exit codes are the CLI's status codes");

const char *cic_version(void)
{
    return CIC_VERSION;
}

static void points_clear(cic_session *s);

/* Drop the last run and its rows. */
static void results_clear(cic_session *s)
{
    points_clear(s);
    cic_results_free(s->rep.results, s->rep.n_results);
    free(s->rep.gates);
    free(s->rep.regress);
    cic_lowp_report_free(&s->rep.lowp);
    memset(&s->rep, 0, sizeof s->rep);
    s->ran = false;
    free(s->rows);
    s->rows = NULL;
    s->n_rows = 0;
    s->exit_code = CIC_EXIT_INPUT;
}

/* The errors of d as the CLI prints them (a line each: a case file may have
 * several), without the final newline. */
static void error_from_diag(cic_session *s, const cic_diag *d)
{
    FILE *f = fmemopen(s->error, sizeof s->error, "w");
    size_t n;
    s->error[0] = '\0';
    if (f) {
        cic_diag_print(f, d);
        fclose(f);
    }
    s->error[sizeof s->error - 1] = '\0';
    n = strlen(s->error);
    if (n > 0 && s->error[n - 1] == '\n')
        s->error[n - 1] = '\0';
}

cic_session *cic_session_create(void)
{
    cic_session *s = cic_calloc(1, sizeof *s);
    if (!s)
        return NULL;
    s->quiet = true;
    s->exit_code = CIC_EXIT_INPUT;
    cic_rt_init(&s->rt, 0);
    return s;
}

cic_rt *_cic_session_rt(cic_session *s)
{
    return s ? &s->rt : NULL;
}

void cic_session_destroy(cic_session *s)
{
    if (!s)
        return;
    results_clear(s);
    cic_rt_clear(&s->rt);
    free(s->kase);
    free(s);
}

/* Shared tail of the two loaders: text NULL loads the file at path. The
 * loaded case replaces the old one only when it is valid. */
static int load(cic_session *s, const char *text, const char *path)
{
    cic_case *c;
    cic_diag d;
    int rc = CIC_EXIT_INPUT;
    if (!s)
        return CIC_EXIT_INPUT;
    /* a failed load leaves no case behind, so a run cannot pick up the old one */
    results_clear(s);
    free(s->kase);
    s->kase = NULL;
    s->error[0] = '\0';
    if (!path) {
        snprintf(s->error, sizeof s->error, "cicheck: no case %s given (NULL)",
                 text ? "name" : "file");
        return CIC_EXIT_INPUT;
    }
    c = cic_calloc(1, sizeof *c);
    if (!c) {
        snprintf(s->error, sizeof s->error, "%.500s: out of memory loading the case", path);
        return CIC_EXIT_RESOURCE;
    }
    memset(&d, 0, sizeof d);
    if ((text ? cic_case_load_string(c, text, path, &d) : cic_case_load(c, path, &d)) != CIC_OK ||
        cic_pipeline_check(c, false, &d) != CIC_OK) {
        error_from_diag(s, &d);
        goto cleanup;
    }
    s->kase = c;
    c = NULL;
    rc = CIC_EXIT_PASS;
cleanup:
    free(c);
    return rc;
}

int cic_session_load(cic_session *s, const char *path)
{
    return load(s, NULL, path);
}

int cic_session_load_string(cic_session *s, const char *text, const char *name)
{
    if (s && !text) {
        results_clear(s);
        free(s->kase);
        s->kase = NULL;
        snprintf(s->error, sizeof s->error, "cicheck: no case text given (text is NULL)");
        return CIC_EXIT_INPUT;
    }
    return load(s, text, name);
}

const char *cic_session_error(const cic_session *s)
{
    return s ? s->error : "cicheck: no session (NULL)";
}

const char *cic_session_case_name(const cic_session *s)
{
    return s && s->kase ? s->kase->name : NULL;
}

/* Copy an optional folder option; an empty or oversized path is refused. */
static int set_dir(cic_session *s, bool *has, char *buf, size_t cap, const char *dir,
                   const char *what)
{
    if (!s)
        return CIC_EXIT_INPUT;
    s->error[0] = '\0';
    if (!dir) {
        *has = false;
        buf[0] = '\0';
        return CIC_EXIT_PASS;
    }
    if (!dir[0] || strlen(dir) >= cap) {
        snprintf(s->error, sizeof s->error, "cicheck: %s folder: %s", what,
                 dir[0] ? "path too long" : "empty path");
        return CIC_EXIT_INPUT;
    }
    cic_strlcpy(buf, dir, cap);
    *has = true;
    return CIC_EXIT_PASS;
}

int cic_session_set_out_dir(cic_session *s, const char *dir)
{
    return s ? set_dir(s, &s->has_out, s->out_dir, sizeof s->out_dir, dir, "output")
             : CIC_EXIT_INPUT;
}

int cic_session_set_baseline(cic_session *s, const char *dir)
{
    return s ? set_dir(s, &s->has_baseline, s->baseline, sizeof s->baseline, dir, "baseline")
             : CIC_EXIT_INPUT;
}

int cic_session_set_quiet(cic_session *s, bool quiet)
{
    if (!s)
        return CIC_EXIT_INPUT;
    s->error[0] = '\0';
    s->quiet = quiet;
    return CIC_EXIT_PASS;
}

int cic_session_set_threads(cic_session *s, int n)
{
    if (!s)
        return CIC_EXIT_INPUT;
    s->error[0] = '\0';
    if (n < 0 || n > 256) {
        snprintf(s->error, sizeof s->error, "cicheck: threads takes 0 (one per core) or "
                 "1 .. 256 (got %d)", n);
        return CIC_EXIT_INPUT;
    }
    s->rt.mpfr_threads = s->rt.matmul_threads = n;
    return CIC_EXIT_PASS;
}

/* The options of the pipeline for this session: quiet, no progress. */
static cic_pipeline_opts session_opts(cic_session *s)
{
    cic_pipeline_opts o;
    memset(&o, 0, sizeof o);
    o.rt = &s->rt;
    o.no_baseline = !s->has_baseline;
    o.baseline_dir = s->has_baseline ? s->baseline : NULL;
    o.tol = CIC_TOLERANCE_DEFAULT;
    return o;
}

/* Keep the report and index its rows; CIC_EXIT_RESOURCE when memory runs
 * out. */
static int keep_results(cic_session *s, cic_pipeline *pl)
{
    int i;
    cic_pipeline_take_report(pl, &s->rep);
    s->rep.kase = s->kase;
    s->ran = true;
    if (s->rep.n_results == 0)
        return CIC_EXIT_PASS;
    s->rows = cic_calloc((size_t)s->rep.n_results, sizeof *s->rows);
    if (!s->rows)
        return CIC_EXIT_RESOURCE;
    for (i = 0; i < s->rep.n_results; i++)
        s->rows[i].x = &s->rep.results[i];
    s->n_rows = s->rep.n_results;
    return CIC_EXIT_PASS;
}

/* The caches MPFR and FLINT keep per thread (constants, scratch), freed in
 * the caller's thread when a call returns: a session may run on a thread
 * of the caller's that ends after it (sessions run at once), and the
 * worker threads free theirs already (base/par.c). The bits do not depend
 * on them. */
static int caches_free(int rc)
{
    mpfr_free_cache2(MPFR_FREE_LOCAL_CACHE);
    flint_cleanup();
    return rc;
}

int cic_session_run(cic_session *s)
{
    cic_pipeline_opts o;
    cic_pipeline *pl = NULL;
    cic_diag d;
    int rc;
    if (!s)
        return CIC_EXIT_INPUT;
    results_clear(s);
    s->error[0] = '\0';
    if (!s->kase) {
        snprintf(s->error, sizeof s->error, "cicheck: no case loaded (cic_session_load first)");
        return CIC_EXIT_INPUT;
    }
    if (s->kase->sweep.on) {
        snprintf(s->error, sizeof s->error, "%.500s: case '%s' has a [sweep] table; the "
                 "library runs single cases (run sweeps with 'cicheck run')", s->kase->path,
                 s->kase->name);
        return CIC_EXIT_INPUT;
    }
    memset(&d, 0, sizeof d);
    o = session_opts(s);
    rc = cic_pipeline_run(&pl, s->kase, &o, &d);
    if ((rc == CIC_OK || rc == CIC_EGATE) && s->has_out &&
        cic_report_json_write(cic_pipeline_report(pl), s->out_dir, &d) < 0)
        rc = CIC_EINTERNAL;
    if (rc == CIC_OK || rc == CIC_EGATE) {
        if (keep_results(s, pl) != CIC_EXIT_PASS) {
            results_clear(s);
            snprintf(s->error, sizeof s->error, "%.500s: out of memory", s->kase->path);
            rc = CIC_EXIT_RESOURCE;
        }
    } else {
        error_from_diag(s, &d);
    }
    cic_pipeline_destroy(pl);
    s->exit_code = rc;
    return caches_free(rc);
}

int cic_session_exit_code(const cic_session *s)
{
    return s ? s->exit_code : CIC_EXIT_INPUT;
}

bool cic_session_pass(const cic_session *s)
{
    return s && s->ran && s->exit_code == CIC_EXIT_PASS;
}

int cic_session_result_count(const cic_session *s)
{
    return s ? s->n_rows : 0;
}

const cic_row *cic_session_result(const cic_session *s, int i)
{
    return s && i >= 0 && i < s->n_rows ? &s->rows[i] : NULL;
}

const char *cic_row_transform(const cic_row *r)
{
    return r ? r->x->transform : NULL;
}

const char *cic_row_engine(const cic_row *r)
{
    return r ? r->x->engine : NULL;
}

/* Verdict names as report.json spells them; NULL for a value out of range. */
static const char *verdict_name(enum cic_verdict v)
{
    return (unsigned)v < CIC_VERDICT_COUNT ? CIC_VERDICT_NAME[v] : NULL;
}

const char *cic_row_expect(const cic_row *r)
{
    return r && r->x->has_verdict ? verdict_name(r->x->expect) : NULL;
}

const char *cic_row_verdict(const cic_row *r)
{
    return r && r->x->has_verdict ? verdict_name(r->x->verdict) : NULL;
}

double cic_row_ce_residual(const cic_row *r)
{
    return r && r->x->has_verdict ? r->x->ce_residual : NAN;
}

int cic_row_metric(const cic_row *r, const char *metric, double *value)
{
    double v;
    if (!r || !metric || !value || !cic_result_metric(r->x, metric, &v))
        return CIC_EXIT_INPUT;
    *value = v;
    return CIC_EXIT_PASS;
}

bool cic_row_pass(const cic_row *r)
{
    return r && r->x->pass;
}

/* ---- sweeps, shards and merge (src/pipeline/sweep.h) ---- */

static void points_clear(cic_session *s)
{
    int i;
    for (i = 0; i < s->n_points; i++)
        free(s->params[i]);
    free(s->params);
    s->params = NULL;
    s->n_points = 0;
    json_decref(s->points);
    s->points = NULL;
    s->output[0] = '\0';
}

static void warn_stderr(void *ctx, const char *text)
{
    (void)ctx;
    fprintf(stderr, "cicheck: %s\n", text);
}

/* What every sweep, shard and merge needs: a session with an output
 * folder (and for runs a loaded case), its last results dropped. */
static int many_begin(cic_session *s, bool need_case)
{
    if (!s)
        return CIC_EXIT_INPUT;
    results_clear(s);
    s->error[0] = '\0';
    if (need_case && !s->kase) {
        snprintf(s->error, sizeof s->error, "cicheck: no case loaded (cic_session_load first)");
        return CIC_EXIT_INPUT;
    }
    if (!s->has_out) {
        snprintf(s->error, sizeof s->error, "cicheck: no output folder "
                 "(cic_session_set_out_dir first): shards and sweeps write their results");
        return CIC_EXIT_INPUT;
    }
    return CIC_EXIT_PASS;
}

/* The end of a sweep, shard or merge: its exit code, and the error for 2
 * and 3 (d, unless a point's own message was kept). */
static int many_end(cic_session *s, int rc, const cic_diag *d)
{
    if (rc >= CIC_EXIT_INPUT && !s->error[0] && d->msg[0])
        error_from_diag(s, d);
    s->exit_code = rc;
    s->ran = true;
    return caches_free(rc);
}

/* Keep the points of sweep.json j (their params as text) for the
 * cic_session_point_* readers. CIC_EXIT_PASS or CIC_EXIT_RESOURCE. */
static int keep_points(cic_session *s, const json_t *j)
{
    json_t *pts = json_object_get(j, "points"), *p;
    size_t i;
    s->params = cic_calloc(json_array_size(pts) + 1, sizeof *s->params);
    if (!s->params)
        return CIC_EXIT_RESOURCE;
    s->points = json_incref(pts);
    json_array_foreach(pts, i, p) {
        s->params[i] = json_dumps(json_object_get(p, "params"), JSON_COMPACT);
        s->n_points = (int)i + 1;
        if (!s->params[i])
            return CIC_EXIT_RESOURCE;
    }
    return CIC_EXIT_PASS;
}

/* sweep.json of a finished sweep or merge j, and its points kept. */
static int sweep_done(cic_session *s, cic_sweep_job *j, cic_diag *d)
{
    int rc = cic_sweep_write(j, s->output, sizeof s->output, d);
    if (rc != CIC_OK)
        s->output[0] = '\0';
    else if (keep_points(s, cic_sweep_json(j)) != CIC_EXIT_PASS)
        cic_diag_set(d, s->output, 0, 0, "out of memory keeping the points");
    return cic_sweep_worst(j);
}

int cic_session_run_sweep(cic_session *s, int shard_k, int shard_n)
{
    cic_sweep_opts o;
    cic_sweep_job *j = NULL;
    cic_sweep_point_result r;
    cic_diag d, pd;
    long i;
    int rc = many_begin(s, true);
    if (rc != CIC_EXIT_PASS)
        return rc;
    memset(&d, 0, sizeof d);
    memset(&o, 0, sizeof o);
    o.out_dir = s->out_dir;
    o.shard_k = shard_k;
    o.shard_n = shard_n;
    o.threads = s->rt.mpfr_threads; /* each point makes its own context from it */
    o.progress.warn = s->quiet ? NULL : warn_stderr;
    if (!s->kase->sweep.on)
        cic_diag_set(&d, s->kase->path, 0, 0, "case '%s' has no [sweep] table (run it with "
                     "cic_session_run)", s->kase->name);
    else if (shard_n != 0 && !(shard_n >= 1 && shard_n <= 1000000 && shard_k >= 1 &&
                               shard_k <= shard_n))
        cic_diag_set(&d, s->kase->path, 0, 0, "shard %d/%d: want 1 <= K <= N <= 1000000",
                     shard_k, shard_n);
    else if (cic_out_check(s->out_dir, s->out_dir, "sweep.json", &d) == 0 &&
             cic_sweep_check_outputs(s->kase, &o, &d) == CIC_OK)
        rc = cic_sweep_begin(&j, s->kase, &o, &d);
    if (!j) /* refused before any point ran */
        return many_end(s, rc == CIC_EXIT_PASS ? CIC_EXIT_INPUT : rc, &d);
    for (i = 0; i < cic_sweep_total(j); i++)
        if (cic_sweep_owns(j, i) && cic_sweep_point_run(j, i, &r, &pd) >= CIC_EINPUT &&
            pd.msg[0])
            d = pd; /* the last point that could not run says why */
    if (cic_sweep_finish(j, &d) == CIC_OK)
        rc = sweep_done(s, j, &d);
    else
        rc = CIC_EINTERNAL;
    cic_sweep_destroy(j);
    return many_end(s, rc, &d);
}

int cic_session_run_shard(cic_session *s, int k, int n)
{
    cic_case_shard cs;
    cic_diag d;
    int rc = many_begin(s, true);
    if (rc != CIC_EXIT_PASS)
        return rc;
    memset(&d, 0, sizeof d);
    memset(&cs, 0, sizeof cs);
    if (s->kase->sweep.on) {
        cic_diag_set(&d, s->kase->path, 0, 0, "case '%s' has a [sweep] table (shard it with "
                     "cic_session_run_sweep)", s->kase->name);
        return many_end(s, CIC_EXIT_INPUT, &d);
    }
    if (!(n >= 1 && n <= 1000000 && k >= 1 && k <= n)) {
        cic_diag_set(&d, s->kase->path, 0, 0, "shard %d/%d: want 1 <= K <= N", k, n);
        return many_end(s, CIC_EXIT_INPUT, &d);
    }
    if (cic_out_check(s->out_dir, s->out_dir, NULL, &d) != 0)
        return many_end(s, CIC_EXIT_INPUT, &d);
    rc = cic_case_shard_plan(&cs, s->kase, k, n, &d);
    if (rc == CIC_OK)
        rc = cic_case_shard_run(&cs, s->out_dir, 0, s->rt.mpfr_threads, &d);
    cic_case_shard_clear(&cs);
    if (rc == CIC_OK)
        snprintf(s->output, sizeof s->output, "%s/case-shard.json", s->out_dir);
    return many_end(s, rc, &d);
}

/* The merge of case shards: the merged case replaces the session's, its
 * report.json written and its rows kept. */
static int merge_case(cic_session *s, const char *const *dirs, int n, cic_diag *d)
{
    cic_pipeline_opts o = session_opts(s);
    cic_case_merged m;
    int rc = cic_case_merge_load(&m, dirs, n, s->out_dir, &o, d);
    if ((rc == CIC_OK || rc == CIC_EGATE) &&
        cic_report_json_write(cic_pipeline_report(m.pl), s->out_dir, d) < 0)
        rc = CIC_EINTERNAL;
    if (rc == CIC_OK || rc == CIC_EGATE) {
        snprintf(s->output, sizeof s->output, "%s/report.json", s->out_dir);
        free(s->kase);
        s->kase = m.kase; /* the rows' case; freed after the pipeline below */
        m.kase = NULL;
        if (keep_results(s, m.pl) != CIC_EXIT_PASS) {
            cic_diag_set(d, s->output, 0, 0, "out of memory");
            rc = CIC_EINTERNAL;
        }
    }
    cic_case_merged_clear(&m);
    return rc;
}

int cic_session_merge(cic_session *s, const char *const *dirs, int n)
{
    cic_sweep_job *j = NULL;
    cic_diag d;
    int rc = many_begin(s, false), k;
    if (rc != CIC_EXIT_PASS)
        return rc;
    memset(&d, 0, sizeof d);
    for (k = 0; dirs && k < n; k++)
        if (!dirs[k])
            break;
    if (!dirs || n < 1 || k < n) {
        snprintf(s->error, sizeof s->error, "cicheck: merge: no shard folders (dirs NULL, "
                 "n < 1 or a NULL folder)");
        return many_end(s, CIC_EXIT_INPUT, &d);
    }
    if (cic_is_case_shard(dirs[0])) {
        rc = merge_case(s, dirs, n, &d);
    } else {
        rc = cic_sweep_merge_load(&j, dirs, n, s->out_dir, &d);
        if (rc == CIC_OK)
            rc = sweep_done(s, j, &d);
        cic_sweep_destroy(j);
    }
    return many_end(s, rc, &d);
}

const char *cic_session_output(const cic_session *s)
{
    return s && s->output[0] ? s->output : NULL;
}

int cic_session_point_count(const cic_session *s)
{
    return s ? s->n_points : 0;
}

/* Point i of the last sweep, or NULL. */
static json_t *point(const cic_session *s, int i)
{
    return s && i >= 0 && i < s->n_points ? json_array_get(s->points, (size_t)i) : NULL;
}

long cic_session_point_index(const cic_session *s, int i)
{
    json_t *p = point(s, i);
    return p ? (long)json_integer_value(json_object_get(p, "index")) : -1;
}

int cic_session_point_exit_code(const cic_session *s, int i)
{
    json_t *p = point(s, i);
    return p ? (int)json_integer_value(json_object_get(p, "exit_code")) : CIC_EXIT_INPUT;
}

const char *cic_session_point_params(const cic_session *s, int i)
{
    return point(s, i) ? s->params[i] : NULL;
}

const char *cic_session_point_verdict(const cic_session *s, int i, const char *transform)
{
    json_t *rows = json_object_get(json_object_get(point(s, i), "report"), "results"), *row;
    size_t k;
    if (!transform)
        return NULL;
    json_array_foreach(rows, k, row) {
        const char *v = json_string_value(json_object_get(row, "verdict"));
        const char *t = json_string_value(json_object_get(row, "transform"));
        if (v && t && !strcmp(t, transform))
            return v;
    }
    return NULL;
}
