/* SPDX-License-Identifier: MIT */
/* run.c: one `cicheck run` of one case file: load it, run the pipeline
 * (src/pipeline: build, truth, engines, verdicts, gates, baseline) with its
 * progress shown on stderr, then print the table and the failures
 * (print.c), write report.json atomically and the dump when asked. A sweep
 * is handed to sweep.c, a case split by samples to case_shard.c; both run
 * through the pipeline library (src/pipeline/sweep.h). Nothing here
 * computes a number: the pipeline does, and the report module formats it. */
#include "run.h"

#include "../case/case.h"
#include "../metric/flops.h"
#include "../pipeline/sweep.h"
#include "../report/report.h"

#include <stdarg.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* ---- progress on stderr: a line per stage, and on a terminal a bar with
 * an ETA for long work (weights drawn, MPFR runs) once it has taken a
 * second ---- */

typedef struct {
    const cic_run_args *a;
    const char *name; /* the case's */
    double t0;
    char label[64];   /* the bar's work, "" when none */
    double bar_t0;
    bool drawn;
} cli_progress;

static void on_stage(void *ctx, const char *text)
{
    cli_progress *p = ctx;
    if (!p->a->quiet)
        fprintf(stderr, "[%s %6.1fs] %s\n", p->name, cic_cli_now() - p->t0, text);
}

static void on_work(void *ctx, const char *label, double done, double total)
{
    cli_progress *p = ctx;
    double el, f = total > 0 ? done / total : 0;
    int i, w = 30, fill;
    if (strcmp(p->label, label) != 0) { /* new work: its clock starts now */
        cic_strlcpy(p->label, label, sizeof p->label);
        p->bar_t0 = cic_cli_now();
        p->drawn = false;
    }
    el = cic_cli_now() - p->bar_t0;
    if (el < 1.0 || f <= 0)
        return;
    if (f > 1)
        f = 1;
    fill = (int)(f * w);
    fprintf(stderr, "\r[%s] %-28.28s [", p->name, label);
    for (i = 0; i < w; i++)
        fputc(i < fill ? '#' : '-', stderr);
    fprintf(stderr, "] %3.0f%% ETA %4.0fs ", 100 * f, el / f - el);
    fflush(stderr);
    p->drawn = true;
}

static void on_work_end(void *ctx)
{
    cli_progress *p = ctx;
    if (p->drawn)
        fputc('\n', stderr);
    p->drawn = false;
    p->label[0] = '\0';
}

static void on_warn(void *ctx, const char *text)
{
    (void)ctx;
    fprintf(stderr, "cicheck: %s\n", text);
}

static cic_pipeline_opts pipeline_opts(const cic_run_args *a, cli_progress *p)
{
    cic_pipeline_opts o;
    memset(&o, 0, sizeof o);
    o.progress.stage = on_stage;
    if (!a->quiet && isatty(fileno(stderr))) {
        o.progress.work = on_work;
        o.progress.work_end = on_work_end;
    }
    o.progress.warn = on_warn;
    o.progress.ctx = p;
    o.max_memory = a->max_memory;
    o.threads = a->threads;
    o.keep_models = a->dump_dir != NULL;
    o.no_baseline = a->no_baseline;
    o.recheck = a->recheck;
    o.baseline_dir = a->baseline_dir;
    o.tol = a->tol;
    return o;
}

/* ---- where a run writes ---- */

/* The folder of a run of case c into buf (a->out_dir, or reports/<case
 * name>); returns the part of it the user named (links followed there),
 * below which every folder is cicheck's own. */
static const char *run_out_dir(char *buf, size_t cap, const cic_run_args *a, const cic_case *c)
{
    if (a->out_dir) {
        cic_strlcpy(buf, a->out_dir, cap);
        return a->out_root ? a->out_root : a->out_dir;
    }
    snprintf(buf, cap, "reports/%s", c->name);
    return "reports";
}

static const char *run_dump_root(const cic_run_args *a)
{
    return a->dump_root ? a->dump_root : a->dump_dir;
}

int cic_run_check_outputs(const cic_case *c, const cic_run_args *a, cic_diag *d)
{
    char dir[1200];
    const char *root = run_out_dir(dir, sizeof dir, a, c);
    /* a case shard's files are case_shard.c's: its folder is checked */
    const char *file = c->sweep.on ? "sweep.json"
                       : a->shard || a->no_report ? NULL : "report.json";
    if (cic_out_check(root, dir, file, d) != 0)
        return CIC_EINPUT;
    if (a->dump_dir && cic_out_check(run_dump_root(a), a->dump_dir, NULL, d) != 0)
        return CIC_EINPUT;
    return c->sweep.on ? cic_run_sweep_check(c, a, root, dir, d) : CIC_OK;
}

/* report.json and the dump of a finished run (cic_pipeline_write, each
 * said as a stage); 0 or -1 with d. */
static int write_outputs(const cic_run_args *a, const cic_pipeline *pl, const cic_case *c,
                         const cic_pipeline_opts *o, cic_diag *d)
{
    char outdir[1200];
    const char *root = run_out_dir(outdir, sizeof outdir, a, c);
    return cic_pipeline_write(pl, root, a->no_report ? NULL : outdir, run_dump_root(a),
                              a->dump_dir, &o->progress, d);
}

/* ---- the run ---- */

void cic_case_run_free(cic_case_run *cr)
{
    if (!cr)
        return;
    cic_results_free(cr->rep.results, cr->rep.n_results);
    free(cr->rep.gates);
    free(cr->rep.regress);
    cic_lowp_report_free(&cr->rep.lowp);
    free(cr);
}

/* The summaries' record of a case that could not run: its error, with how
 * many more the file has. */
static void record_error(cic_case_run *cr, const char *path, const cic_diag *d)
{
    if (d->line > 0)
        snprintf(cr->error, sizeof cr->error, "%.500s:%d:%d: %.600s", d->file, d->line,
                 d->column > 0 ? d->column : 1, d->msg);
    else
        snprintf(cr->error, sizeof cr->error, "%.500s: %.600s", d->file[0] ? d->file : path,
                 d->msg);
    if (cic_diag_count(d) > 1) {
        size_t used = strlen(cr->error);
        snprintf(cr->error + used, sizeof cr->error - used, " (and %d more error%s)",
                 d->n_more, d->n_more == 1 ? "" : "s");
    }
}

/* A sweep: its points are cases of their own (sweep.c, through the
 * pipeline library); for the summaries one check stands for them (their
 * details are in <out>/sweep.json). */
static int run_sweep_case(const cic_run_args *a, cic_case_run *cr, const char *path,
                          cic_diag *d)
{
    char sdir[1200];
    int rc;
    cic_gate_result *g;
    cic_run_args sa = *a; /* the points' folders go below the sweep's roots */
    sa.out_root = run_out_dir(sdir, sizeof sdir, a, &cr->kase);
    sa.dump_root = run_dump_root(a);
    rc = cic_run_sweep(&cr->kase, &sa, sdir);
    if (rc == CIC_EINPUT || rc == CIC_EINTERNAL) {
        cic_diag_set(d, path, 0, 0, "sweep %s failed (exit %d)", cr->kase.name, rc);
        return rc;
    }
    g = cic_calloc(1, sizeof *g);
    if (g) {
        cic_strlcpy(g->transform, "*", sizeof g->transform);
        cic_strlcpy(g->engine, "*", sizeof g->engine);
        cic_strlcpy(g->metric, "sweep points", sizeof g->metric);
        g->value = rc;
        g->limit = 0;
        g->pass = rc == CIC_OK;
        cr->rep.n_gates = 1;
    }
    cr->rep.gates = g;
    cr->rep.kase = &cr->kase;
    cr->rep.has_dit_flops = cic_dit_flops_table_fill(&cr->rep.dit_flops, CIC_CASE_CHAIN(&cr->kase));
    cr->rep.truth_certified = true;
    cr->rep.pass = rc == CIC_OK;
    return rc;
}

/* Load and check what needs no pipeline: the transforms against the
 * block, the dump's file names. */
static int prepare(const cic_run_args *a, cic_case_run *cr, const char *path, cic_diag *d)
{
    if (cic_case_load(&cr->kase, path, d) != CIC_OK)
        return CIC_EINPUT;
    if (cic_pipeline_check(&cr->kase, a->dump_dir != NULL, d) != CIC_OK)
        return CIC_EINPUT;
    return CIC_OK;
}

/* One single case through the pipeline, printed and written. */
static int run_single(const cic_run_args *a, cic_case_run *cr, cic_diag *d)
{
    cli_progress p;
    cic_pipeline_opts o;
    cic_pipeline *pl = NULL;
    int rc;
    memset(&p, 0, sizeof p);
    p.a = a;
    p.name = cr->kase.name;
    p.t0 = cic_cli_now();
    o = pipeline_opts(a, &p);
    rc = cic_pipeline_run(&pl, &cr->kase, &o, d);
    if (rc == CIC_OK || rc == CIC_EGATE) {
        const cic_report *rep = cic_pipeline_report(pl);
        cic_run_print(a, rep, &cr->kase);
        if (write_outputs(a, pl, &cr->kase, &o, d) < 0) {
            rc = CIC_EINTERNAL;
        } else { /* hand the results to the summaries */
            cic_pipeline_take_report(pl, &cr->rep);
            cr->rep.kase = &cr->kase;
        }
    }
    cic_pipeline_destroy(pl);
    return rc;
}

int cic_run_case(const char *path, const cic_run_args *a, cic_case_run **out)
{
    cic_case_run *cr = cic_calloc(1, sizeof *cr);
    cic_diag d;
    int rc;
    memset(&d, 0, sizeof d);
    if (out)
        *out = cr;
    if (!cr) {
        fprintf(stderr, "cicheck: out of memory\n");
        return CIC_EINTERNAL;
    }
    rc = prepare(a, cr, path, &d);
    if (rc == CIC_OK && cr->kase.sweep.on)
        rc = run_sweep_case(a, cr, path, &d);
    else if (rc == CIC_OK && a->shard)
        rc = cic_run_case_shard(&cr->kase, a, &d);
    else if (rc == CIC_OK)
        rc = run_single(a, cr, &d);
    if (rc == CIC_EINPUT || rc == CIC_EINTERNAL) {
        if (d.msg[0] && !cr->kase.sweep.on)
            cic_diag_print(stderr, &d);
        record_error(cr, path, &d);
    }
    cr->exit_code = rc;
    cr->rep.exit_code = rc;
    if (!out)
        cic_case_run_free(cr);
    return rc;
}
