/* SPDX-License-Identifier: MIT */
/* case_shard.c: what `cicheck run --shard K/N` on a case without a
 * [sweep] table and `cicheck merge` of its shards say while the pipeline
 * library runs and merges them (src/pipeline/sweep.h; the split, the
 * shard's files and every check of the merge are src/pipeline/shard.c and
 * shard_merge.c): the samples a shard runs and the files it wrote; the
 * merged case's table, printed as a run prints it (print.c), and its
 * report.json. */
#include "run.h"

#include "../pipeline/sweep.h"

#include <string.h>

int cic_run_case_shard(const cic_case *c, const cic_run_args *a, cic_diag *d)
{
    cic_case_shard s;
    char dir[1200];
    long k, n;
    int rc;
    if (!cic_shard_parse(a->shard, &k, &n)) {
        cic_diag_set(d, c->path, 0, 0, "--shard takes K/N with 1 <= K <= N (got '%s')", a->shard);
        return CIC_EINPUT;
    }
    if (a->dump_dir) {
        cic_diag_set(d, c->path, 0, 0, "--shard and --dump: dump the whole case unsharded");
        return CIC_EINPUT;
    }
    rc = cic_case_shard_plan(&s, c, k, n, d);
    if (rc == CIC_OK) {
        if (a->out_dir)
            cic_strlcpy(dir, a->out_dir, sizeof dir);
        else
            snprintf(dir, sizeof dir, "reports/%s", c->name);
        printf("case %s: shard %ld/%ld runs samples %d to %d of %d\n", c->name, k, n,
               s.sc->model.sample0, s.sc->model.sample0 + s.sc->model.samples - 1,
               c->model.samples);
        rc = cic_case_shard_run(&s, dir, a->max_memory, a->threads, d);
        if (rc == CIC_OK)
            printf("wrote %s/case-shard.json and case-shard.bin (merge the %ld shards with "
                   "'cicheck merge')\n", dir, n);
    }
    cic_case_shard_clear(&s);
    return rc;
}

/* The merged case's report: printed like a run's, written to
 * out_dir/report.json, and handed to the summaries in cr. */
static int merged_report(cic_case_merged *m, const cic_merge_args *ma, cic_case_run *cr,
                         cic_diag *d)
{
    const cic_report *rep = cic_pipeline_report(m->pl);
    cic_run_args pa;
    memset(&pa, 0, sizeof pa);
    pa.color = ma->color;
    printf("merged %ld shard%s of case %s: %d samples (%.1f s in the shards)\n", m->count,
           m->count == 1 ? "" : "s", m->kase->name, m->kase->model.samples, m->wall_seconds);
    cic_run_print(&pa, rep, &cr->kase);
    if (cic_report_json_write(rep, ma->out_dir, d) < 0)
        return CIC_EINTERNAL;
    printf("wrote %s/report.json\n", ma->out_dir);
    cic_pipeline_take_report(m->pl, &cr->rep);
    cr->rep.kase = &cr->kase;
    return CIC_OK;
}

int cic_case_merge(const char *const *dirs, int n, const cic_merge_args *ma, cic_case_run **out)
{
    cic_case_run *cr = cic_calloc(1, sizeof *cr);
    cic_case_merged m;
    cic_pipeline_opts o;
    cic_diag d;
    int rc;
    memset(&d, 0, sizeof d);
    memset(&o, 0, sizeof o);
    *out = cr;
    if (!cr) {
        fprintf(stderr, "cicheck: merge: out of memory\n");
        return CIC_EINTERNAL;
    }
    o.no_baseline = ma->no_baseline;
    o.baseline_dir = ma->baseline_dir;
    o.tol = ma->tol;
    rc = cic_case_merge_load(&m, dirs, n, ma->out_dir, &o, &d);
    if (m.kase)
        cr->kase = *m.kase;
    if (rc == CIC_OK || rc == CIC_EGATE) {
        int wrc = merged_report(&m, ma, cr, &d);
        if (wrc != CIC_OK)
            rc = wrc;
    }
    if (rc >= CIC_EINPUT) {
        cic_diag_print(stderr, &d);
        snprintf(cr->error, sizeof cr->error, "%.500s: %.600s", d.file[0] ? d.file : "merge",
                 d.msg);
    }
    cr->exit_code = cr->rep.exit_code = rc;
    cic_case_merged_clear(&m);
    return rc;
}
