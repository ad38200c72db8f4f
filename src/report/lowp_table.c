/* SPDX-License-Identifier: MIT */
/* lowp_table.c: the headline of a case with [[engines.lowp]] on the
 * terminal: per engine, the block output's SQNR against the MPFR truth
 * without a transform and under each transform of the case; the worst
 * linear output; the kurtosis of the quantized linears' inputs and weights
 * in each model. What the rows and the outlier statistics of the report
 * hold, laid out so that "does the rotation help this format" is one line. */
#include "report.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

void cic_lowp_report_free(cic_lowp_report *l)
{
    int i;
    if (!l)
        return;
    for (i = 0; l->outliers && i < l->n_outliers; i++)
        free(l->outliers[i].chan_max);
    free(l->outliers);
    free(l->lin);
    memset(l, 0, sizeof *l);
}

/* The transform of column j: "none", then the case's in order. */
static const char *column(const cic_case *c, int j)
{
    return j == 0 ? "none" : c->xf[j - 1].name;
}

static int col_width(const cic_case *c, int j)
{
    int w = (int)strlen(column(c, j));
    return w < 9 ? 9 : w;
}

static const cic_result *find_row(const cic_report *r, const char *xf, const char *eng)
{
    int i;
    for (i = 0; i < r->n_results; i++)
        if (r->results[i].lowp && !strcmp(r->results[i].transform, xf) &&
            !strcmp(r->results[i].engine, eng))
            return &r->results[i];
    return NULL;
}

/* The lowest per-linear SQNR of engine eng under xf (NULL name: none). */
static double worst_linear(const cic_lowp_report *l, const char *xf, const char *eng,
                           const char **name)
{
    double w = INFINITY;
    int i;
    *name = NULL;
    for (i = 0; i < l->n_lin; i++)
        if (!strcmp(l->lin[i].transform, xf) && !strcmp(l->lin[i].engine, eng) &&
            !(l->lin[i].sqnr_db >= w)) {
            w = l->lin[i].sqnr_db;
            *name = l->lin[i].tensor;
        }
    return *name ? w : NAN; /* no linear measured ("-"), not an exact one */
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Max and median kurtosis of the inputs (weight false) or weights under xf. */
static int kurtosis_of(const cic_lowp_report *l, const char *xf, bool weight, double *mx,
                       double *med)
{
    double *v = malloc((size_t)(l->n_outliers + 1) * sizeof *v);
    int i, n = 0;
    *mx = *med = NAN;
    if (!v)
        return 0;
    for (i = 0; i < l->n_outliers; i++)
        if (l->outliers[i].weight == weight && !strcmp(l->outliers[i].transform, xf) &&
            !isnan(l->outliers[i].o.kurtosis))
            v[n++] = l->outliers[i].o.kurtosis;
    if (n > 0) {
        qsort(v, (size_t)n, sizeof *v, cmp_double);
        *mx = v[n - 1];
        *med = v[n / 2];
    }
    free(v);
    return n;
}

static void cell(FILE *f, int w, double v)
{
    if (isnan(v))
        fprintf(f, " %*s", w, "-");
    else if (isinf(v))
        fprintf(f, " %*s", w, v > 0 ? "exact" : "nonfinite"); /* -Inf: NaN/Inf outputs */
    else
        fprintf(f, " %*.1f", w, v);
}

static void kurtosis_lines(FILE *f, const cic_report *r, int lw)
{
    const cic_case *c = r->kase;
    int j, pass;
    for (pass = 0; pass < 2; pass++) {
        fprintf(f, "%-*s", lw, pass == 0 ? "kurtosis, inputs (max/median)"
                                         : "kurtosis, weights (max/median)");
        for (j = 0; j <= c->n_xf; j++) {
            double mx, med;
            char b[48];
            if (kurtosis_of(&r->lowp, column(c, j), pass == 1, &mx, &med) == 0)
                snprintf(b, sizeof b, "-");
            else
                snprintf(b, sizeof b, "%.3g/%.3g", mx, med);
            fprintf(f, " %*s", col_width(c, j), b);
        }
        fputc('\n', f);
    }
}

void cic_report_lowp_table(FILE *f, const cic_report *r)
{
    const cic_case *c = r ? r->kase : NULL;
    int e, j, lw = 31;
    if (!f || !c || c->n_lowp == 0)
        return;
    for (e = 0; e < c->n_lowp; e++) {
        int w = (int)(strlen(c->lowp[e].name) + strlen(c->lowp[e].weights) +
                      strlen(c->lowp[e].activations)) + 6;
        lw = w > lw ? w : lw;
    }
    fprintf(f, "\nLow-precision engines: SQNR of the block output against the MPFR truth, "
               "dB (higher is better)\n");
    fprintf(f, "%-*s", lw, "engine (weights / activations)");
    for (j = 0; j <= c->n_xf; j++)
        fprintf(f, " %*s", col_width(c, j), column(c, j));
    fputc('\n', f);
    for (e = 0; e < c->n_lowp; e++) {
        const cic_lowp_spec *lp = &c->lowp[e];
        char lab[160];
        snprintf(lab, sizeof lab, "%s (%s / %s)", lp->name, lp->weights, lp->activations);
        fprintf(f, "%-*s", lw, lab);
        for (j = 0; j <= c->n_xf; j++) {
            const cic_result *x = find_row(r, column(c, j), lp->name);
            cell(f, col_width(c, j), x ? x->sqnr_db : NAN);
        }
        fputc('\n', f);
    }
    fprintf(f, "worst linear output SQNR, dB\n");
    for (e = 0; e < c->n_lowp; e++) {
        const char *nm;
        fprintf(f, "%-*s", lw, c->lowp[e].name);
        for (j = 0; j <= c->n_xf; j++)
            cell(f, col_width(c, j), worst_linear(&r->lowp, column(c, j), c->lowp[e].name, &nm));
        worst_linear(&r->lowp, "none", c->lowp[e].name, &nm);
        fprintf(f, "   (none: %s)\n", nm ? nm : "-");
    }
    kurtosis_lines(f, r, lw);
}
