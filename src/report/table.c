/* SPDX-License-Identifier: MIT */
/* table.c: the terminal summary of a run, read by a person at the end of a
 * `cicheck run`: one fixed-width line per (transform, engine) row, then the
 * failed gates spelled out with their case line, then one summary line with
 * the truth certification and the overall verdict.
 *
 * Columns that do not apply print "-": rows without metrics (the "mpfr"
 * exactness row) and rows without a verdict (transform "none", the before
 * figures). Numbers are %.3g; ULP figures below 1e4 are %.1f so small counts
 * line up. Rows with NaN or Inf outputs get a trailing "! N non-finite" note,
 * since the error columns then cover the finite entries only (metric.h).
 * Colour only when asked (callers pass isatty): green PASS, red FAIL and a
 * verdict that contradicts the expectation, yellow inconclusive.
 *
 * Also the analytical FLOP table of a dit case (cic_report_dit_flops_table),
 * printed after the run's summary and by `cicheck flops`, from the table the
 * pipeline computed (flops.h). */
#include "report.h"
#include "text.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

void cic_results_free(cic_result *res, int n)
{
    int i;
    for (i = 0; res && i < n; i++)
        free(res[i].per_block);
    free(res);
}

#define C_RED "\033[31m"
#define C_GREEN "\033[32m"
#define C_YELLOW "\033[33m"
#define C_BOLD "\033[1m"
#define C_OFF "\033[0m"

static void fmt_g(char *buf, size_t cap, double v)
{
    if (isnan(v))
        snprintf(buf, cap, "nan");
    else if (isinf(v))
        snprintf(buf, cap, v > 0 ? "inf" : "-inf");
    else
        snprintf(buf, cap, "%.3g", v);
}

static void fmt_ulp(char *buf, size_t cap, double v)
{
    if (isfinite(v) && fabs(v) < 1e4)
        snprintf(buf, cap, "%.1f", v);
    else
        fmt_g(buf, cap, v);
}

/* One padded cell, coloured when col is not NULL; the padding is inside the
 * colour so the escape codes do not shift the columns. */
static void cell(FILE *f, int width, const char *text, const char *col)
{
    if (col)
        fprintf(f, " %s%-*s%s", col, width, text, C_OFF);
    else
        fprintf(f, " %-*s", width, text);
}

static void cell_r(FILE *f, int width, const char *text)
{
    fprintf(f, " %*s", width, text);
}

/* A bounded copy of a fixed-size name field that may lack its NUL. */
static void field(char *dst, size_t cap, const char *src, size_t srccap)
{
    size_t n = strnlen(src, srccap);
    if (n >= cap)
        n = cap - 1;
    memcpy(dst, src, n);
    dst[n] = '\0';
}

enum { W_NUM = 9, W_ULP = 8 };

/* The column widths of the transform and engine names. */
typedef struct {
    int wt, we;
} widths;

static widths name_widths(const cic_report *r)
{
    widths w = {9, 6};
    for (int i = 0; r->results && i < r->n_results; i++) {
        int lt = (int)strnlen(r->results[i].transform, sizeof r->results[i].transform);
        int le = (int)strnlen(r->results[i].engine, sizeof r->results[i].engine);
        w.wt = lt > w.wt ? lt : w.wt;
        w.we = le > w.we ? le : w.we;
    }
    return w;
}

static void header(FILE *f, widths w)
{
    fprintf(f, "%-*s %-*s %-12s %-12s", w.wt, "transform", w.we, "engine", "expect",
            "verdict");
    cell_r(f, W_NUM, "ce_resid");
    cell_r(f, W_NUM, "max_abs");
    cell_r(f, W_NUM, "rel_norm2");
    cell_r(f, W_ULP, "ulp.max");
    cell_r(f, W_ULP, "ulp.p99");
    cell_r(f, W_ULP, "drift.max");
    cell_r(f, W_ULP, "drift.p99");
    fprintf(f, " %s\n", "result");
}

/* expect, verdict and ce_residual of a row ("-" without a verdict). */
static void verdict_cells(FILE *f, const cic_result *x, bool color)
{
    const char *vcol = NULL;
    char b[64];
    if (!x->has_verdict) {
        cell(f, 12, "-", NULL);
        cell(f, 12, "-", NULL);
        cell_r(f, W_NUM, "-");
        return;
    }
    if (color) {
        if (x->verdict == CIC_VERDICT_INCONCLUSIVE)
            vcol = C_YELLOW;
        else if (x->verdict != x->expect)
            vcol = C_RED;
    }
    cell(f, 12, CIC_NAME_OF(CIC_VERDICT_NAME, CIC_VERDICT_COUNT, x->expect), NULL);
    cell(f, 12, CIC_NAME_OF(CIC_VERDICT_NAME, CIC_VERDICT_COUNT, x->verdict), vcol);
    fmt_g(b, sizeof b, x->ce_residual);
    cell_r(f, W_NUM, b);
}

/* The error metrics of a row ("-" without metrics, drift "-" without a
 * before run). */
static void metric_cells(FILE *f, const cic_result *x)
{
    const cic_metrics *m = &x->metrics;
    char b[64];
    if (!x->has_metrics) {
        for (int k = 0; k < 2; k++)
            cell_r(f, W_NUM, "-");
        for (int k = 0; k < 4; k++)
            cell_r(f, W_ULP, "-");
        return;
    }
    fmt_g(b, sizeof b, m->max_abs);
    cell_r(f, W_NUM, b);
    fmt_g(b, sizeof b, m->rel_norm2);
    cell_r(f, W_NUM, b);
    fmt_ulp(b, sizeof b, m->ulp_row.max);
    cell_r(f, W_ULP, b);
    fmt_ulp(b, sizeof b, m->ulp_row.p99);
    cell_r(f, W_ULP, b);
    if (m->has_drift) {
        fmt_ulp(b, sizeof b, m->drift.max);
        cell_r(f, W_ULP, b);
        fmt_ulp(b, sizeof b, m->drift.p99);
        cell_r(f, W_ULP, b);
    } else {
        cell_r(f, W_ULP, "-");
        cell_r(f, W_ULP, "-");
    }
}

/* One line of the results: names, verdict, metrics, PASS/FAIL and the
 * non-finite note. */
static void result_line(FILE *f, const cic_result *x, widths w, bool color)
{
    const cic_metrics *m = &x->metrics;
    char name[CIC_NAME_MAX + 1], eng[33];

    field(name, sizeof name, x->transform, sizeof x->transform);
    field(eng, sizeof eng, x->engine, sizeof x->engine);
    fprintf(f, "%-*s %-*s", w.wt, name, w.we, eng);
    verdict_cells(f, x, color);
    metric_cells(f, x);
    if (color)
        fprintf(f, " %s%s%s", x->pass ? C_GREEN : C_RED, x->pass ? "PASS" : "FAIL", C_OFF);
    else
        fprintf(f, " %s", x->pass ? "PASS" : "FAIL");

    if (x->has_metrics && m->nonfinite > 0 && m->nonfinite == m->n_out) {
        fprintf(f, "  %s! every output is NaN or Inf: the row fails%s", color ? C_RED : "",
                color ? C_OFF : "");
    } else if (x->has_metrics && m->nonfinite > 0) {
        fprintf(f, "  %s! %llu non-finite", color ? C_RED : "",
                (unsigned long long)m->nonfinite);
        if (m->first_nonfinite >= 0)
            fprintf(f, " (first at flat index %lld)", (long long)m->first_nonfinite);
        fprintf(f, "%s", color ? C_OFF : "");
    }
    fputc('\n', f);
}

/* The FLOPs line of a transform's verdict row, and its per-sample verdicts
 * where they differ. */
static void flops_line(FILE *f, const cic_result *x, int wt)
{
    const cic_flops *fl = &x->flops;
    char name[CIC_NAME_MAX + 1], b[64], t[32], s1[32], s2[32], s3[32];
    bool mixed = false;

    field(name, sizeof name, x->transform, sizeof x->transform);
    snprintf(b, sizeof b, "%.0f", fl->baseline);
    snprintf(t, sizeof t, "%.0f", fl->transformed);
    snprintf(s1, sizeof s1, "%+.1f", fl->extra_per_token);
    snprintf(s2, sizeof s2, "%+.0f", fl->extra_per_sample);
    snprintf(s3, sizeof s3, "%+.2f%%", fl->extra_pct);
    fprintf(f, "%-*s %14s %14s %12s %14s %9s  %s\n", wt, name, b, t, s1, s2, s3,
            fl->counted_matches_analytical ? "yes" : "NO");
    for (int k = 1; k < x->n_samples; k++)
        if (x->per_sample[k].verdict != x->per_sample[0].verdict)
            mixed = true;
    if (!mixed)
        return;
    fprintf(f, "%-*s   per sample:", wt, "");
    for (int k = 0; k < x->n_samples; k++) {
        fmt_g(b, sizeof b, x->per_sample[k].ce_residual);
        fprintf(f, " %d %s (%s)%s", x->per_sample[k].sample,
                CIC_NAME_OF(CIC_VERDICT_NAME, CIC_VERDICT_COUNT, x->per_sample[k].verdict), b,
                k + 1 < x->n_samples ? "," : "");
    }
    fputc('\n', f);
}

/* FLOPs per transform, from its exactness row (the same graph runs in every
 * engine): a section of its own after the results, when there are any. */
static void flops_section(FILE *f, const cic_report *r, int wt)
{
    bool head = false;
    for (int i = 0; r->results && i < r->n_results; i++) {
        const cic_result *x = &r->results[i];
        if (!x->has_verdict || x->has_metrics)
            continue;
        if (!head) {
            fprintf(f, "\n%-*s %14s %14s %12s %14s %9s  %s\n", wt, "FLOPs", "untransformed",
                    "transformed", "extra/token", "extra/sample", "extra",
                    "counted = formulas");
            head = true;
        }
        flops_line(f, x, wt);
    }
    if (head)
        fputc('\n', f);
}

/* The failed gates spelled out; returns how many. */
static int failed_gates(FILE *f, const cic_report *r, bool color)
{
    int n = 0;
    for (int i = 0; r->gates && i < r->n_gates; i++) {
        const cic_gate_result *g = &r->gates[i];
        char v[32], l[32], met[33], name[CIC_NAME_MAX + 1], eng[33];
        if (g->pass)
            continue;
        n++;
        fmt_g(v, sizeof v, g->value);
        fmt_g(l, sizeof l, g->limit);
        field(name, sizeof name, g->transform, sizeof g->transform);
        field(eng, sizeof eng, g->engine, sizeof g->engine);
        field(met, sizeof met, g->metric, sizeof g->metric);
        /* a NaN value fails a gate but is not "> limit" */
        fprintf(f, "%sFAIL%s gate %s / %s / %s: value %s %s limit %s (case line %d)\n",
                color ? C_RED : "", color ? C_OFF : "", name, eng, met, v,
                isnan(g->value) ? "vs" : ">", l, g->line);
    }
    return n;
}

/* "truth proven: ...; N rows, N gates, N failed; overall PASS" */
static void summary_line(FILE *f, const cic_report *r, int n_failed, bool color)
{
    char b[512];
    cic_truth_words(b, sizeof b, r);
    fprintf(f, "truth %s%s%s; %d row%s, %d gate%s, %d failed; overall ",
            color ? (r->truth_certified ? C_GREEN : C_YELLOW) : "", b, color ? C_OFF : "",
            r->n_results, r->n_results == 1 ? "" : "s", r->n_gates,
            r->n_gates == 1 ? "" : "s", n_failed);
    if (color)
        fprintf(f, "%s%s%s%s\n", C_BOLD, r->pass ? C_GREEN : C_RED, r->pass ? "PASS" : "FAIL",
                C_OFF);
    else
        fprintf(f, "%s\n", r->pass ? "PASS" : "FAIL");
}

/* One row's error against depth: rel_norm2 of its blocks (at most 8 of
 * them, evenly spaced and the last always, "b<i>=" naming them when some
 * are left out), "-" where the truth cannot give a figure, then after "|"
 * the readout when it follows the last block (a head). */
static void depth_line(FILE *f, const cic_result *x, int wt)
{
    const cic_block_entry *e = x->per_block;
    int n = x->n_per_block, nb = e[n - 1].head ? n - 1 : n;
    int step = nb > 0 ? (nb + 7) / 8 : 1, b;
    char t[CIC_NAME_MAX + 1], v[32];
    field(t, sizeof t, x->transform, sizeof x->transform);
    fprintf(f, "  %-*s %-16s", wt, t, x->engine);
    for (b = 0; b < nb; b += step) {
        if (b + step >= nb)
            b = nb - 1; /* the last block always */
        if (e[b].has)
            fmt_g(v, sizeof v, e[b].m.rel_norm2);
        else
            snprintf(v, sizeof v, "-");
        if (step > 1)
            fprintf(f, " b%d=%s", e[b].block, v);
        else
            fprintf(f, " %s", v);
    }
    if (nb < n) {
        fmt_g(v, sizeof v, e[n - 1].m.rel_norm2);
        fprintf(f, " | head %s", v);
    }
    fputc('\n', f);
}

/* The depth lines of a model with more than one block. */
static void depth_section(FILE *f, const cic_report *r, int wt)
{
    bool any = false;
    for (int i = 0; r->results && i < r->n_results; i++) {
        const cic_result *x = &r->results[i];
        if (!x->per_block || x->n_per_block < 2)
            continue;
        if (!any)
            fprintf(f, "error against depth (rel_norm2 of each block's output against its "
                       "truth; -: the truth too wide there):\n");
        any = true;
        depth_line(f, x, wt);
    }
}

void cic_report_table(FILE *f, const cic_report *r, bool color)
{
    char name[CIC_NAME_MAX + 1];
    int n_failed;
    widths w;

    if (!f || !r)
        return;
    w = name_widths(r);
    if (r->kase) {
        field(name, sizeof name, r->kase->name, sizeof r->kase->name);
        fprintf(f, "%scase %s%s (%.*s)\n", color ? C_BOLD : "", name, color ? C_OFF : "",
                (int)strnlen(r->kase->path, sizeof r->kase->path), r->kase->path);
    }
    header(f, w);
    for (int i = 0; r->results && i < r->n_results; i++)
        result_line(f, &r->results[i], w, color);
    depth_section(f, r, w.wt);
    flops_section(f, r, w.wt);
    n_failed = failed_gates(f, r, color);
    summary_line(f, r, n_failed, color);
}

/* ---- the analytical table of a dit case ---- */

static void print_nstar(FILE *f, const char *vs, double n)
{
    if (isnan(n))
        fprintf(f, "  N* per-sample-fold < %-12s: n/a (no Hadamard matrix of order d)\n", vs);
    else if (isinf(n))
        fprintf(f, "  N* per-sample-fold < %-12s: never\n", vs);
    else
        fprintf(f, "  N* per-sample-fold < %-12s: %.1f (first integer N: %.0f)\n", vs, n,
                fmax(1, ceil(n)));
}

int cic_report_dit_flops_table(FILE *f, const cic_dit_flops_table *t)
{
    const cic_model_cfg *m = &t->cfg;
    fprintf(f,
            "dit extra FLOPs vs the original block, %% (B = 1; d = %d, heads = %d, "
            "m = %d, d_cond = %d, L = %d, d_out = %d, %s, %s)\n",
            m->d_model, m->heads, m->d_mlp, m->d_cond, m->layers, m->d_out,
            m->final_layer ? "final layer" : "no final layer",
            m->causal ? "causal" : "non-causal");
    fprintf(f, "%8s", "N");
    for (int j = 0; j < CIC_DIT_STRATEGY_COUNT; j++)
        fprintf(f, " %16s", t->label[j] ? t->label[j] : "?");
    fputc('\n', f);
    for (int k = 0; k < CIC_DIT_TABLE_N; k++) {
        fprintf(f, "%8d", t->tokens[k]);
        for (int j = 0; j < CIC_DIT_STRATEGY_COUNT; j++) {
            if (isnan(t->pct[j][k]))
                fprintf(f, " %16s", "n/a");
            else
                fprintf(f, " %+15.2f%%", t->pct[j][k]);
        }
        fputc('\n', f);
    }
    /* the crossovers are against strategies 0 and 1, online-unrotate dense
     * and fast (flops.h) */
    print_nstar(f, t->label[0] ? t->label[0] : "?", t->nstar_dense);
    print_nstar(f, t->label[1] ? t->label[1] : "?", t->nstar_fast);
    return ferror(f) ? -1 : 0;
}
