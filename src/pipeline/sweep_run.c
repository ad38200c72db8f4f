/* SPDX-License-Identifier: MIT */
/* sweep_run.c: running a sweep (`cicheck run` on a case with a [sweep]
 * table, `--shard K/N`; cic_sweep_run_all in the library).
 *
 * A sweep runs its case once per point of the cartesian product of the
 * swept axes (cic_case_sweep_point), each point a full run of the pipeline
 * without a baseline, with its own report.json under <out>/points/<index>/.
 * sweep.json gathers every point's report with its parameters and the
 * aggregate over seeds (sweep.c). A shard runs the points whose index is
 * K - 1 modulo N and records the SHA-256 of what its points read of each
 * file (files_read.c), hashed before they run and checked unchanged after:
 * shards that read different bytes are not merged (merge.c). The steps are
 * separate calls so that the caller can say what each did. */
#include "sweep_int.h"

#include "../case/case.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

bool cic_shard_parse(const char *s, long *k, long *n)
{
    char *end;
    *k = *n = 1;
    if (!s)
        return true;
    *k = strtol(s, &end, 10);
    if (*end != '/')
        return false;
    *n = strtol(end + 1, &end, 10);
    return *end == '\0' && *n >= 1 && *n <= 1000000 && *k >= 1 && *k <= *n;
}

/* The shard of o: false when o names none (0, 0). */
static bool opts_shard(const cic_sweep_opts *o, long *k, long *n)
{
    *k = o->shard_n > 0 ? o->shard_k : 1;
    *n = o->shard_n > 0 ? o->shard_n : 1;
    return o->shard_n > 0;
}

int cic_sweep_check_outputs(const cic_case *c, const cic_sweep_opts *o, cic_diag *d)
{
    const char *root = o->out_root ? o->out_root : o->out_dir;
    char p[1400];
    long i, k, n;
    opts_shard(o, &k, &n);
    if (k < 1 || k > n)
        return CIC_OK; /* the run refuses it */
    if (!o->no_plots) {
        snprintf(p, sizeof p, "%s/plots", o->out_dir);
        if (cic_out_check(root, p, NULL, d) != 0)
            return CIC_EINPUT;
    }
    for (i = k - 1; i < c->sweep.points; i += n) {
        snprintf(p, sizeof p, "%s/points/%ld", o->out_dir, i);
        if (cic_out_check(root, p, "report.json", d) != 0)
            return CIC_EINPUT;
        snprintf(p, sizeof p, "%s/points/%ld", o->dump_dir ? o->dump_dir : "", i);
        if (o->dump_dir && cic_out_check(o->dump_root ? o->dump_root : o->dump_dir, p, NULL,
                                         d) != 0)
            return CIC_EINPUT;
    }
    return CIC_OK;
}

/* A shard's part of sweep.json: shard {index, count}, and files_read, what
 * the merge checks the shards agree on: the bytes of every file the points
 * read (no axis a checkpoint allows changes which), hashed before they run. */
static int shard_fields(cic_sweep_job *j, cic_diag *d)
{
    json_t *sh = json_object();
    int rc;
    json_object_set_new(sh, "index", json_integer(j->k));
    json_object_set_new(sh, "count", json_integer(j->n));
    json_object_set_new(j->root, "shard", sh);
    if ((rc = cic_files_read_hash(&j->fr, j->c, d)) != CIC_OK)
        return rc;
    json_object_set_new(j->root, "files_read", cic_files_read_json(&j->fr));
    return CIC_OK;
}

int cic_sweep_begin(cic_sweep_job **out, const cic_case *c, const cic_sweep_opts *o,
                    cic_diag *d)
{
    cic_sweep_job *j = _cic_sweep_job_new(o->out_dir, o->out_root);
    char sha[65] = "", *src;
    size_t src_len = 0;
    int rc;
    *out = NULL;
    if (!j) {
        cic_diag_set(d, c->path, 0, 0, "out of memory");
        return CIC_EINTERNAL;
    }
    j->o = *o;
    j->c = c;
    j->total = c->sweep.points;
    j->sharded = opts_shard(o, &j->k, &j->n);
    if (j->sharded && !(j->k >= 1 && j->k <= j->n && j->n <= 1000000)) {
        cic_diag_set(d, c->path, 0, 0, "shard %ld/%ld: want 1 <= K <= N <= 1000000", j->k,
                     j->n);
        cic_sweep_destroy(j);
        return CIC_EINPUT;
    }
    rc = cic_file_read(&src, &src_len, c->path, (size_t)CIC_CASE_MAX_FILE_BYTES,
                       "a case file (TOML)", d);
    if (rc != CIC_OK) {
        cic_sweep_destroy(j);
        return rc;
    }
    cic_sha256_hex(sha, src, src_len);
    j->root = _cic_sweep_header(c, sha, src, src_len);
    free(src);
    if (j->sharded)
        rc = shard_fields(j, d);
    else
        json_object_set_new(j->root, "shard", json_null());
    j->points = json_array();
    if (rc != CIC_OK) {
        cic_sweep_destroy(j);
        return rc;
    }
    *out = j;
    return CIC_OK;
}

/* The pipeline's options for a point: no baseline (a point has none), its
 * models kept for a dump, the sweep's warnings. */
static cic_pipeline_opts point_opts(const cic_sweep_opts *o)
{
    cic_pipeline_opts po;
    memset(&po, 0, sizeof po);
    po.progress.warn = o->progress.warn;
    po.progress.ctx = o->progress.ctx;
    po.max_memory = o->max_memory;
    po.threads = o->threads;
    po.keep_models = o->dump_dir != NULL;
    po.no_baseline = true;
    po.recheck = o->recheck;
    po.tol = CIC_TOLERANCE_DEFAULT;
    return po;
}

/* Point i's case pc through the pipeline, its report.json and dump
 * written; the report's arrays pass to *rep when it finished (rep->kase
 * set), else rep is left zero. The exit code. */
static int point_pipeline(const cic_sweep_job *j, const cic_case *pc, long i, cic_report *rep,
                          cic_diag *d)
{
    const cic_sweep_opts *o = &j->o;
    cic_pipeline_opts po = point_opts(o);
    cic_pipeline *pl = NULL;
    char out[1400], dump[1400];
    int rc;
    if (cic_pipeline_check(pc, o->dump_dir != NULL, d) != CIC_OK)
        return CIC_EINPUT;
    snprintf(out, sizeof out, "%s/points/%ld", o->out_dir, i);
    if (o->dump_dir)
        snprintf(dump, sizeof dump, "%s/points/%ld", o->dump_dir, i);
    rc = cic_pipeline_run(&pl, pc, &po, d);
    if (rc == CIC_OK || rc == CIC_EGATE) {
        if (cic_pipeline_write(pl, o->out_root ? o->out_root : o->out_dir, out,
                               o->dump_root ? o->dump_root : o->dump_dir,
                               o->dump_dir ? dump : NULL, NULL, d) < 0) {
            rc = CIC_EINTERNAL;
        } else {
            cic_pipeline_take_report(pl, rep);
            rep->kase = pc;
        }
    }
    cic_pipeline_destroy(pl);
    return rc;
}

/* Point i's entry in sweep.json: its report when it finished. */
static void point_add(cic_sweep_job *j, long i, json_t *params, int rc, cic_report *rep)
{
    json_t *p = json_object();
    json_object_set_new(p, "index", json_integer(i));
    json_object_set_new(p, "params", params);
    json_object_set_new(p, "exit_code", json_integer(rc));
    json_object_set_new(p, "pass", json_boolean(rc == CIC_OK));
    json_object_set_new(p, "report", rep->kase ? cic_report_to_json(rep) : json_null());
    json_array_append_new(j->points, p);
}

int cic_sweep_point_run(cic_sweep_job *j, long i, cic_sweep_point_result *r, cic_diag *d)
{
    cic_case *pc = malloc(sizeof *pc);
    cic_report rep;
    json_t *params;
    char *ptext;
    int rc;
    memset(r, 0, sizeof *r);
    memset(d, 0, sizeof *d);
    memset(&rep, 0, sizeof rep);
    r->index = i;
    if (!pc) {
        cic_diag_set(d, j->c->path, 0, 0, "point %ld: out of memory", i);
        j->worst = CIC_EINTERNAL;
        return CIC_EINTERNAL;
    }
    if (cic_case_sweep_point(pc, j->c, i, d) != CIC_OK) {
        free(pc);
        if (j->worst < CIC_EINPUT)
            j->worst = CIC_EINPUT;
        return CIC_EINPUT;
    }
    r->made = true;
    params = _cic_sweep_point_params(&j->c->sweep, i);
    ptext = json_dumps(params, JSON_COMPACT);
    cic_strlcpy(r->params, ptext ? ptext : "", sizeof r->params);
    free(ptext);
    rc = point_pipeline(j, pc, i, &rep, d);
    rep.exit_code = rc;
    r->exit_code = rc;
    r->wall_seconds = rep.kase ? rep.wall_seconds : 0.0;
    j->ran++;
    if (rc == CIC_OK)
        j->passed++;
    if (rc > j->worst)
        j->worst = rc;
    point_add(j, i, params, rc, &rep);
    cic_results_free(rep.results, rep.n_results);
    free(rep.gates);
    free(rep.regress);
    cic_lowp_report_free(&rep.lowp);
    free(pc);
    return rc;
}

int cic_sweep_finish(cic_sweep_job *j, cic_diag *d)
{
    if (j->sharded) {
        int rc = cic_files_read_unchanged(&j->fr, d);
        cic_files_read_free(&j->fr);
        if (rc != CIC_OK) {
            j->worst = CIC_EINTERNAL;
            return CIC_EINTERNAL; /* no sweep.json of points that read another file */
        }
    }
    json_object_set_new(j->root, "points", j->points);
    json_object_set_new(j->root, "aggregate", _cic_sweep_aggregate(j->points));
    json_object_set_new(j->root, "pass", json_boolean(j->worst == CIC_OK));
    j->points = NULL;
    return CIC_OK;
}

int cic_sweep_run_all(const cic_case *c, const cic_sweep_opts *o, bool no_plots,
                      cic_diag *d)
{
    cic_sweep_job *j = NULL;
    cic_sweep_point_result r;
    cic_diag pd;
    char path[1300];
    int rc, worst, n;
    long i;
    memset(d, 0, sizeof *d);
    if ((rc = cic_sweep_begin(&j, c, o, d)) != CIC_OK)
        return rc;
    for (i = 0; i < j->total; i++)
        if (cic_sweep_owns(j, i) && cic_sweep_point_run(j, i, &r, &pd) >= CIC_EINPUT &&
            pd.msg[0])
            *d = pd; /* the last point that could not run says why */
    rc = cic_sweep_finish(j, d);
    if (rc == CIC_OK)
        rc = cic_sweep_write(j, path, sizeof path, d);
    if (rc == CIC_OK && !no_plots && cic_sweep_plot(j, &n, &pd) != CIC_OK)
        *d = pd; /* lost; plots the data cannot give are no error here */
    worst = cic_sweep_worst(j);
    cic_sweep_destroy(j);
    return worst;
}
