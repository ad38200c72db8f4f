/* SPDX-License-Identifier: MIT */
/* sweep.c: what `cicheck run` on a case with a [sweep] table (and
 * `--shard K/N`) and `cicheck merge` of sweep shards say while the
 * pipeline library (src/pipeline/sweep.h) runs and merges them: a line
 * per point as it ends, the count of points run and passed, the files
 * written and the plots drawn. Running the points, sweep.json, its
 * aggregate and every check of a merge are the library's. */
#include "run.h"

#include "../pipeline/sweep.h"

#include <string.h>

static void on_warn(void *ctx, const char *text)
{
    (void)ctx;
    fprintf(stderr, "cicheck: %s\n", text);
}

/* The library's options for the sweep of c with a (out_dir: its folder,
 * root: the part of it the user named). False when a->shard is not K/N. */
static bool sweep_opts(cic_sweep_opts *o, const cic_run_args *a, const char *root,
                       const char *out_dir)
{
    long k, n;
    bool ok = cic_shard_parse(a->shard, &k, &n);
    memset(o, 0, sizeof *o);
    o->out_dir = out_dir;
    o->out_root = root;
    o->dump_dir = a->dump_dir;
    o->dump_root = a->dump_root ? a->dump_root : a->dump_dir;
    if (a->shard) {
        o->shard_k = k;
        o->shard_n = n;
    }
    o->no_plots = a->no_plots;
    o->recheck = a->recheck;
    o->max_memory = a->max_memory;
    o->threads = a->threads;
    o->progress.warn = on_warn;
    return ok;
}

int cic_run_sweep_check(const cic_case *c, const cic_run_args *a, const char *root,
                        const char *dir, cic_diag *d)
{
    cic_sweep_opts o;
    if (!sweep_opts(&o, a, root, dir))
        return CIC_OK; /* the run refuses it */
    return cic_sweep_check_outputs(c, &o, d);
}

/* sweep.json and the plots of a finished sweep or merge into dir: each
 * said as it is written; a plot the data cannot give is a warning. The
 * worst exit code so far. */
static int write_and_plot(cic_sweep_job *j, const char *dir, bool no_plots)
{
    char path[1300];
    cic_diag d;
    int n;
    memset(&d, 0, sizeof d);
    if (cic_sweep_write(j, path, sizeof path, &d) != CIC_OK) {
        cic_diag_print(stderr, &d);
        return cic_sweep_worst(j);
    }
    printf("wrote %s\n", path);
    if (no_plots)
        return cic_sweep_worst(j);
    if (cic_sweep_plot(j, &n, &d) != CIC_OK)
        cic_diag_print(stderr, &d);
    else if (n < 0)
        fprintf(stderr, "cicheck: warning: plots not drawn: %s\n", d.msg);
    else
        printf("drew %d plot%s in %s/plots (PNG, SVG, PDF, with .dat and .gp)\n", n,
               n == 1 ? "" : "s", dir);
    return cic_sweep_worst(j);
}

int cic_run_sweep(const cic_case *c, const cic_run_args *a, const char *out_dir)
{
    cic_sweep_opts o;
    cic_sweep_job *j = NULL;
    cic_sweep_point_result r;
    cic_diag d;
    long i, total = c->sweep.points, ran;
    int rc;
    memset(&d, 0, sizeof d);
    if (!sweep_opts(&o, a, a->out_root ? a->out_root : out_dir, out_dir)) {
        fprintf(stderr, "cicheck: --shard takes K/N with 1 <= K <= N (got '%s')\n", a->shard);
        return CIC_EINPUT;
    }
    if ((rc = cic_sweep_begin(&j, c, &o, &d)) != CIC_OK) {
        cic_diag_print(stderr, &d);
        return rc;
    }
    printf("sweep %s: %ld point%s%s\n", c->name, total, total == 1 ? "" : "s",
           a->shard ? " (this shard runs every N-th)" : "");
    for (i = 0; i < total; i++) {
        if (!cic_sweep_owns(j, i))
            continue;
        rc = cic_sweep_point_run(j, i, &r, &d);
        if (rc >= CIC_EINPUT && d.msg[0])
            cic_diag_print(stderr, &d);
        if (!r.made)
            continue;
        printf("  point %ld/%ld %s: %s (%.1f s)\n", i + 1, total, r.params,
               rc == CIC_OK ? "PASS" : "FAIL", r.wall_seconds);
        fflush(stdout);
    }
    if (cic_sweep_finish(j, &d) != CIC_OK) {
        cic_diag_print(stderr, &d);
        cic_sweep_destroy(j);
        return CIC_EINTERNAL; /* no sweep.json of points that read another file */
    }
    ran = cic_sweep_ran(j);
    printf("sweep %s: %ld point%s run, %ld passed, %ld failed\n", c->name, ran,
           ran == 1 ? "" : "s", cic_sweep_passed(j), ran - cic_sweep_passed(j));
    rc = write_and_plot(j, out_dir, a->no_plots);
    cic_sweep_destroy(j);
    return rc;
}

int cic_merge_sweeps(const char *const *dirs, int n, const char *out_dir, bool no_plots)
{
    cic_sweep_job *j = NULL;
    cic_diag d;
    long i, total;
    int rc = cic_sweep_merge_load(&j, dirs, n, out_dir, &d);
    if (rc != CIC_OK) {
        cic_diag_print(stderr, &d);
        return rc;
    }
    total = cic_sweep_total(j);
    for (i = 0; i < total; i++) {
        int code = cic_sweep_point_exit(j, i);
        if (code >= CIC_EINPUT)
            fprintf(stderr, "cicheck: merge: point %ld exited %d in its shard (%s)\n", i, code,
                    code == CIC_EINPUT ? "bad input" : "its result was lost");
    }
    printf("merged %d shard%s: %ld points\n", n, n == 1 ? "" : "s", total);
    rc = write_and_plot(j, out_dir, no_plots);
    cic_sweep_destroy(j);
    return rc;
}
