/* SPDX-License-Identifier: MIT */
/* print.c: what a finished run says on stdout after its pipeline: the
 * table, the failed baseline checks and expectations, the low-precision
 * and analytical FLOP tables and the conclusion of an adaLN block. A run
 * (run.c) and the merge of a case's shards (case_shard.c) print the same;
 * the report module formats every figure. */
#include "run.h"

#include "../case/case.h"
#include "../report/conclusion.h"
#include "../report/report.h"

#include <string.h>
#include <time.h>
#include <unistd.h>

double cic_cli_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
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
