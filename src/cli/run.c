/* SPDX-License-Identifier: MIT */
/* run.c: one `cicheck run` of one case file: load it, run the pipeline
 * (src/pipeline: build, truth, engines, verdicts, gates, baseline) with its
 * progress shown on stderr, then print the table and the failures, write
 * report.json atomically and the dump when asked. A sweep is handed to
 * sweep.c, whose points come back here one by one. Nothing here computes a
 * number: the pipeline does, and the report module formats it. */
#include "run.h"

#include "../case/case.h"
#include "../metric/flops.h"
#include "../pipeline/pipeline.h"
#include "../report/conclusion.h"
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

double cic_cli_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

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

/* ---- what a run prints on stdout ---- */

static void print_regressions(const cic_report *rep, const cic_case *c)
{
    int i, nf = 0;
    for (i = 0; i < rep->n_regress; i++) {
        const cic_regress_result *g = &rep->regress[i];
        if (g->pass)
            continue;
        nf++;
        printf("FAIL regression %s / %s / %s / %s: old %s, new %s%s%s (%s)\n", c->name,
               g->transform[0] ? g->transform : "-", g->engine[0] ? g->engine : "-",
               g->metric, g->old_value, g->new_value, g->limit[0] ? ", limit " : "",
               g->limit, CIC_RULE_NAME[g->rule]);
    }
    printf("baseline %s: %d checks, %d failed\n", rep->baseline_path, rep->n_regress, nf);
}

static void print_expectations(const cic_report *rep, const cic_case *c)
{
    const char *vl = CIC_VERDICT_ENGINE_NAME[c->verdict_engine];
    int i, s;
    for (i = 0; i < rep->n_results; i++) {
        const cic_result *x = &rep->results[i];
        if (!x->has_verdict || strcmp(x->engine, vl) != 0)
            continue;
        if (x->verdict != x->expect)
            printf("FAIL expectation %s: verdict %s, expected %s (ce_residual %.3g)\n",
                   x->transform, CIC_VERDICT_NAME[x->verdict], CIC_VERDICT_NAME[x->expect],
                   x->ce_residual);
        else if (!x->pass)
            for (s = 0; s < x->n_samples; s++)
                printf("  %s sample %d: ce_residual %.3g, %s\n", x->transform, s,
                       x->per_sample[s].ce_residual,
                       CIC_VERDICT_NAME[x->per_sample[s].verdict]);
    }
}

/* The table, the failures, for an adaLN block the analytical table of
 * the strategies and the conclusion (nothing in compact mode but the baseline's failures). */
void cic_run_print(const cic_run_args *a, const cic_report *rep, const cic_case *c)
{
    int color = a->color >= 0 ? a->color : isatty(fileno(stdout));
    bool adaln = cic_block(c->model.block)->norm == CIC_NORM_ADALN;
    if (a->compact)
        return;
    cic_report_table(stdout, rep, color != 0);
    if (rep->has_baseline)
        print_regressions(rep, c);
    print_expectations(rep, c);
    if (!a->quiet_tables)
        cic_report_lowp_table(stdout, rep);
    if (adaln && !a->quiet_tables && rep->has_dit_flops) {
        printf("\nAnalytical ");
        cic_report_dit_flops_table(stdout, &rep->dit_flops);
    }
    if (!rep->truth_certified) {
        char b[512];
        cic_truth_words(b, sizeof b, rep);
        printf("FAIL truth %s\n", b);
    }
    /* the answer in words, last: what the verdicts and FLOPs above say */
    if (adaln) {
        putchar('\n');
        cic_report_conclusion(stdout, rep);
    }
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
    return c->sweep.on ? cic_sweep_check_outputs(c, a, root, dir, d) : CIC_OK;
}

/* report.json and the dump of a finished run; 0 or -1 with d. The folders
 * below the user's are made as cicheck's own (cic_mkdir_under). */
static int write_outputs(const cic_run_args *a, const cic_pipeline *pl, const cic_report *rep,
                         const cic_case *c, cli_progress *p, cic_diag *d)
{
    char outdir[1200], path[1300], line[1320];
    const char *root = run_out_dir(outdir, sizeof outdir, a, c);
    if (!a->no_report) {
        snprintf(path, sizeof path, "%s/report.json", outdir);
        if (cic_mkdir_under(root, outdir, d) < 0 || cic_report_json_write_file(rep, path, d) < 0)
            return -1;
        snprintf(line, sizeof line, "wrote %s", path);
        on_stage(p, line);
    }
    if (a->dump_dir) {
        if (cic_mkdir_under(run_dump_root(a), a->dump_dir, d) < 0 ||
            cic_pipeline_dump(pl, a->dump_dir, d) < 0)
            return -1;
        snprintf(line, sizeof line, "wrote dump to %s", a->dump_dir);
        on_stage(p, line);
    }
    return 0;
}

/* ---- the run ---- */

void cic_case_run_free(cic_case_run *cr)
{
    if (!cr)
        return;
    free(cr->rep.results);
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

/* A sweep: its points are cases of their own (sweep.c); for the summaries
 * one check stands for them (their details are in <out>/sweep.json). */
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

/* Load (or take the preloaded case) and check what needs no pipeline: the
 * transforms against the block, the dump's file names. */
static int prepare(const cic_run_args *a, cic_case_run *cr, const char *path, cic_diag *d)
{
    if (a->preloaded)
        cr->kase = *a->preloaded;
    else if (cic_case_load(&cr->kase, path, d) != CIC_OK)
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
        if (write_outputs(a, pl, rep, &cr->kase, &p, d) < 0) {
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
    if (rc == CIC_OK && cr->kase.sweep.on && !a->preloaded)
        rc = run_sweep_case(a, cr, path, &d);
    else if (rc == CIC_OK && a->shard && !a->preloaded)
        rc = cic_run_case_shard(&cr->kase, a, &d);
    else if (rc == CIC_OK)
        rc = run_single(a, cr, &d);
    if (rc == CIC_EINPUT || rc == CIC_EINTERNAL) {
        if (d.msg[0] && !(cr->kase.sweep.on && !a->preloaded))
            cic_diag_print(stderr, &d);
        record_error(cr, path, &d);
    }
    cr->exit_code = rc;
    cr->rep.exit_code = rc;
    if (!out)
        cic_case_run_free(cr);
    return rc;
}
