/* SPDX-License-Identifier: MIT */
/* plot_point.c: the figures of one report (a single run, or the first point
 * of a sweep that has one): ulp_cdf (the distribution of the row-scaled
 * error, as a CDF and as its tail 1 - F on a log axis, where p90, p99 and
 * the maximum are a decade apart instead of squeezed under the top of a
 * linear axis), drift_hist (how far each transform moves the float32
 * outputs, in ULP), and flops_vs_tokens (extra FLOPs of the adaLN
 * strategies: closed-form curves against tokens per sample, the engine's
 * counts as points, the crossover N*).
 *
 * The f32 engine plotted is f32-openblas when the run has it, else
 * f32-fixed-order (chosen in plot.c). */
#include "plot_int.h"
#include "text.h"

#include <math.h>
#include <string.h>

/* Output elements of a report's float32 run (rows x columns, less the
 * non-finite ones), or NaN when the case does not say: the maximum of
 * ulp_row sits at 1 - F = 1/n. Head readouts (and the DiT final layer) end
 * in d_out columns, the others in d_model. */
static double out_elements(const cic_plot_ctx *c, const json_t *metrics)
{
    json_t *kase = json_object_get(c->first, "case");
    json_t *m = json_object_get(kase, "model");
    const char *block = cic_plot_jstr(m, "block");
    const char *readout = cic_plot_jstr(json_object_get(kase, "readout"), "kind");
    double rows = cic_plot_jnum(json_object_get(m, "tokens")) *
                  cic_plot_jnum(json_object_get(m, "samples"));
    bool head = cic_plot_streq(block, "dit") ? json_is_true(json_object_get(m, "final_layer"))
                                             : cic_plot_streq(readout, "head");
    double cols = cic_plot_jnum(json_object_get(m, head ? "d_out" : "d_model"));
    double bad = cic_plot_jnum(json_object_get(metrics, "nonfinite"));
    double n = rows * cols - (isfinite(bad) ? bad : 0);
    if (!block || (!readout && !cic_plot_streq(block, "dit")) || !(n >= 1))
        return NAN;
    return n;
}

/* ---- CDF of ulp_row and its tail ---- */

int cic_plot_ulp_cdf(const cic_plot_ctx *c, cic_diag *d)
{
    cic_plot_figure fg;
    int nblocks = 0, maxlen = 4;
    int order[CIC_PLOT_MAXTR + 1];
    double xlo = INFINITY, xhi = 0, tail_lo = 0.01;

    if (!c->first)
        return 0;
    if (cic_plot_figure_open(&fg, "ulp_cdf", c, d) != 0)
        return -1;
    FILE *f = fg.dat.f;
    fprintf(f,
            "# ulp_cdf: distribution of the row-scaled error ulp_row over the elements of the "
            "output, engine %s, %s\n"
            "# from ulp_row_quantiles (nearest rank): the q-th percentile is at fraction q/100;\n"
            "# exceed = 1 - fraction, the share of elements at or above that error; at the "
            "maximum it is 1/n (n output elements; NaN when the case does not give n)\n"
            "# columns: fraction[0..1]  ulp_row[ULP of the row's largest |x|]  exceed[0..1]\n",
            c->engine, c->sweep ? "first point of the sweep" : "single run");
    for (int k = 0; k <= c->ntr; k++) {
        const char *tr = cic_plot_order_name(c, k);
        json_t *r = cic_plot_first_row(c, tr, c->engine);
        json_t *m = json_object_get(r, "metrics");
        json_t *q = json_object_get(m, "ulp_row_quantiles");
        if (!json_is_array(q) || json_array_size(q) < 2)
            continue;
        size_t nq = json_array_size(q);
        double nel = out_elements(c, m);
        if (nblocks)
            fputs("\n\n", f);
        fputs("# transform: ", f);
        cic_plot_dat_name(f, tr);
        fputc('\n', f);
        for (size_t i = 0; i < nq; i++) {
            double frac = (double)i / (double)(nq - 1);
            double v = cic_plot_jnum(json_array_get(q, i));
            double ex = i + 1 < nq ? 1 - frac : 1 / nel;
            /* with fewer elements than percentiles the top ones coincide
             * with the maximum and 1/n is not below them */
            if (i + 1 == nq && !(nel * (1 - (double)(nq - 2) / (double)(nq - 1)) > 1))
                ex = NAN;
            fprintf(f, "%.17g", frac);
            cic_plot_dat_num(f, v);
            cic_plot_dat_num(f, ex);
            fputc('\n', f);
            if (v > 0 && isfinite(v)) {
                xlo = fmin(xlo, v);
                xhi = fmax(xhi, v);
            }
            if (isfinite(ex) && ex > 0)
                tail_lo = fmin(tail_lo, ex);
        }
        order[nblocks++] = k;
        if ((int)strlen(tr) > maxlen)
            maxlen = (int)strlen(tr);
    }
    if (nblocks == 0) {
        cic_plot_figure_free(&fg);
        return 0;
    }
    int kt = (int)floor(log10(tail_lo) - 0.15);
    for (int s = 0; s < CIC_PLOT_NSIZE; s++) {
        const cic_plot_size *sz = &cic_plot_sizes[s];
        FILE *g = fg.body[s].f;
        int krows = cic_plot_key_rows(sz, nblocks, maxlen, false);
        cic_plot_gp_begin(g, c);
        int tl = cic_plot_gp_title(g, c, sz, c->engine, true);
        fputs("set key off\n", g);
        for (int p = 0; p < 2; p++) {
            fg.height_in[s] = cic_plot_gp_panel(g, sz, p, 2, tl, krows);
            bool xlab = p == 1 || sz->wide;
            int e = cic_plot_gp_log(g, 'x', xlo, xhi, xlab);
            if (!xlab)
                fputs("unset xlabel\n", g);
            else if (e)
                fprintf(g, "set xlabel 'error in ULP of max_{row} |x|, \xc3\x97" "10^{%d}'\n", e);
            else
                fputs("set xlabel 'error in ULP of max_{row} |x|'\n", g);
            if (p == 0) {
                fputs("unset logscale y\nset yrange [0:1]\nset ytics 0.25, 0.25, 1\nset mytics 1\n"
                      "set format y '%g'\n",
                      g);
                cic_plot_gp_ylabel(g, "fraction \xe2\x89\xa4 x (CDF)");
            } else {
                /* the tail: p90 and p99 marked, the maximum at 1/n */
                fprintf(g,
                        "set logscale y\nset yrange [1e%d:1]\nset ytics 10\nset mytics 10\n"
                        "set format y '10^{%%L}'\n"
                        "set label 1 'p90' at graph 0.02, first 0.1 offset 0,0.45 front "
                        "tc rgb '#666666'\n"
                        "set label 2 'p99' at graph 0.02, first 0.01 offset 0,0.45 front "
                        "tc rgb '#666666'\n"
                        "set arrow 1 from graph 0, first 0.1 to graph 1, first 0.1 nohead "
                        "dt 3 lw 0.6 lc rgb '#888888' back\n"
                        "set arrow 2 from graph 0, first 0.01 to graph 1, first 0.01 nohead "
                        "dt 3 lw 0.6 lc rgb '#888888' back\n",
                        kt < -2 ? kt : -3);
                cic_plot_gp_ylabel(g, "fraction \xe2\x89\xa5 x (1 - CDF)");
                cic_plot_gp_key(g, sz, nblocks, maxlen, NULL);
            }
            fputs("plot ", g);
            for (int b = 0; b < nblocks; b++) {
                fprintf(g, "%s'ulp_cdf.dat' index %d using 2:%s with lines ls %d title ",
                        b ? ", \\\n     " : "", b, p ? "3" : "1", cic_plot_style(order[b]));
                cic_plot_gp_quote(g, cic_plot_order_name(c, order[b]));
                fputs(" noenhanced", g);
            }
            fputc('\n', g);
        }
        fputs("unset multiplot\n", g);
    }
    int rc = cic_plot_figure_finish(c, &fg, d) == 0 ? 1 : -1;
    cic_plot_figure_free(&fg);
    return rc;
}

/* ---- histogram of the ULP drift ---- */

int cic_plot_drift_hist(const cic_plot_ctx *c, cic_diag *d)
{
    cic_plot_figure fg;
    json_t *h[CIC_PLOT_MAXTR];
    int idx[CIC_PLOT_MAXTR];
    int n = 0, nbins = 0, maxlen = 4;
    double ymax = 1;

    if (!c->first)
        return 0;
    for (int i = 0; i < c->ntr && n < CIC_PLOT_MAXTR; i++) {
        json_t *r = cic_plot_first_row(c, c->tr[i], c->engine);
        json_t *a = json_object_get(json_object_get(r, "metrics"), "drift_hist");
        if (!json_is_array(a) || json_array_size(a) == 0)
            continue;
        h[n] = a;
        idx[n++] = i;
        for (size_t b = 0; b < json_array_size(a); b++) {
            double v = cic_plot_jnum(json_array_get(a, b));
            if (v > 0 && (int)b + 1 > nbins)
                nbins = (int)b + 1;
            if (v > ymax)
                ymax = v;
        }
        if ((int)strlen(c->tr[i]) > maxlen)
            maxlen = (int)strlen(c->tr[i]);
    }
    if (n == 0)
        return 0;
    if (nbins < 2)
        nbins = 2;
    if (cic_plot_figure_open(&fg, "drift_hist", c, d) != 0)
        return -1;
    FILE *f = fg.dat.f;
    fprintf(f,
            "# drift_hist: integer ULP distance between the f32 outputs before (transform "
            "none) and after each transform, engine %s, %s\n"
            "# bin 0 = distance 0; bin b >= 1 = distances in [2^(b-1), 2^b)\n"
            "# columns: bin  lo[ULP]  hi[ULP, exclusive]",
            c->engine, c->sweep ? "first point of the sweep" : "single run");
    for (int k = 0; k < n; k++) {
        fputs("  ", f);
        cic_plot_dat_name(f, c->tr[idx[k]]);
        fputs("[count]", f);
    }
    fputs("\n# transform: all (one count column per transform, in the order above)\n", f);
    for (int b = 0; b < nbins; b++) {
        double lo = b == 0 ? 0 : ldexp(1, b - 1), hi = b == 0 ? 1 : ldexp(1, b);
        fprintf(f, "%d %.17g %.17g", b, lo, hi);
        for (int k = 0; k < n; k++)
            cic_plot_dat_num(f, cic_plot_jnum(json_array_get(h[k], (size_t)b)));
        fputc('\n', f);
    }
    int khi = (int)ceil(log10(ymax * 1.3));
    for (int s = 0; s < CIC_PLOT_NSIZE; s++) {
        const cic_plot_size *sz = &cic_plot_sizes[s];
        FILE *g = fg.body[s].f;
        int krows = cic_plot_key_rows(sz, n, maxlen, false);
        cic_plot_gp_begin(g, c);
        int tl = cic_plot_gp_title(g, c, sz, c->engine, true);
        fg.height_in[s] = cic_plot_gp_panel(g, sz, 0, 1, tl, krows);
        fprintf(g,
                "set logscale y\nset format y '10^{%%L}'\nset yrange [0.5:1e%d]\n"
                "set xrange [-0.6:%g]\nset grid noxtics\n"
                "set xlabel 'ULP drift, before vs after (bin lower edge)'\n",
                khi < 1 ? 1 : khi, nbins - 0.4);
        cic_plot_gp_ylabel(g, "count (output elements)");
        /* "0", then 2^k at every step-th bin while the labels (about 4
         * characters, "2^{12}", with room) fit */
        double pw = cic_plot_panel_width(sz, 1);
        int fit = (int)(pw / (cic_plot_char_in(sz) * 4.5));
        int step = fit >= nbins || fit < 2 ? 1 : (nbins + fit - 2) / (fit - 1);
        fputs("set xtics (", g);
        for (int b = 0; b < nbins; b++) {
            fputs(b ? ", " : "", g);
            if (b == 0)
                fputs("'0' 0", g);
            else if (b == 1 && step == 1)
                fputs("'1' 1", g);
            else if (b > 1 && (b - 1) % step == 0)
                fprintf(g, "'2^{%d}' %d", b - 1, b);
            else
                fprintf(g, "'' %d", b);
        }
        fputs(")\n", g);
        cic_plot_gp_key(g, sz, n, maxlen, NULL);
        /* one frequency polygon per transform: bars of several transforms
         * side by side get too thin to read at one column. A count of 0
         * has no place on a log axis: it is drawn below the range, so the
         * line drops to the floor and runs of empty bins draw nothing */
        fputs("set clip one\nunset clip two\nplot ", g);
        for (int k = 0; k < n; k++) {
            fprintf(g, "%s'drift_hist.dat' using 1:($%d > 0 ? $%d : 0.1) with linespoints ls %d "
                       "title ",
                    k ? ", \\\n     " : "", 4 + k, 4 + k, cic_plot_style(1 + idx[k]));
            cic_plot_gp_quote(g, c->tr[idx[k]]);
            fputs(" noenhanced", g);
        }
        fputs("\nunset multiplot\n", g);
    }
    int rc = cic_plot_figure_finish(c, &fg, d) == 0 ? 1 : -1;
    cic_plot_figure_free(&fg);
    return rc;
}

/* ---- extra FLOPs against tokens per sample ---- */

/* The analytical adaLN strategies: CIC_DIT_STRATEGIES (flops.h), whose
 * labels are the keys of flops_analytical.extra_pct. */
#define NSTRAT CIC_DIT_STRATEGY_COUNT
#define STRAT(s) (CIC_DIT_STRATEGIES[(s)].label)
/* dash types of the strategies that no transform of the run measures */
static const int STRAT_DT[NSTRAT] = {2, 4, 5, 2, 4, 5};

/* The strategy a transform measures (its kind and, for a kind with a fast
 * variant, whether it is fast), or -1. */
static int strategy_of(const cic_plot_ctx *c, int i)
{
    int any = -1;
    for (int s = 0; s < NSTRAT; s++) {
        const cic_dit_strategy *t = &CIC_DIT_STRATEGIES[s];
        if (!cic_plot_streq(c->kind[i], CIC_NAME_OF(CIC_XFORM_NAME, CIC_XFORM_COUNT, t->kind)))
            continue;
        if (t->fast == c->fast[i])
            return s;
        if (any < 0)
            any = s;
    }
    return any;
}

/* Symmetric log axis for percentages: linear within +-SYMLOG_C, log
 * beyond, so a saving (negative) keeps its sign and 600 % and 0.5 % are
 * both readable. */
#define SYMLOG_C 0.1

static double symlog(double y)
{
    return (y < 0 ? -1 : 1) * log10(1 + fabs(y) / SYMLOG_C);
}

static double symlog_inv(double u)
{
    return (u < 0 ? -1 : 1) * SYMLOG_C * (pow(10, fabs(u)) - 1);
}

/* What flops_vs_tokens draws, gathered from the report before the script
 * is written: the analytical columns, the measured blocks, the extents on
 * the symlog axis, the crossovers, the legend and the y tics. */
typedef struct {
    json_t *fa, *tok, *pct, *kase;
    int nstrat, nmeas;
    int scol[NSTRAT];          /* data column of each strategy's curve, 0: none */
    int line_tr[NSTRAT];       /* transform whose colour a strategy takes, -1: none */
    int mtr[CIC_PLOT_MAXTR];   /* transform of each measured block */
    double umin, umax, xmin, xmax;
    double nstar, nstar_fast;
    bool bars;                 /* some seed spread to show */
    /* the legend */
    char labels[NSTRAT + CIC_PLOT_MAXTR][160];
    const char *brief[NSTRAT + CIC_PLOT_MAXTR]; /* when the label does not fit */
    int lstyle[NSTRAT + CIC_PLOT_MAXTR];
    bool lpoints[NSTRAT + CIC_PLOT_MAXTR];
    int nkey;
    /* the y axis */
    double ulo, uhi;
    char tics[512];
    char ktitle[160];
} flops_fig;

static void extend_u(flops_fig *ff, double v)
{
    if (isfinite(v)) {
        ff->umin = fmin(ff->umin, symlog(v));
        ff->umax = fmax(ff->umax, symlog(v));
    }
}

static void extend_x(flops_fig *ff, double x)
{
    if (x > 0) {
        ff->xmin = fmin(ff->xmin, x);
        ff->xmax = fmax(ff->xmax, x);
    }
}

/* The header of flops_vs_tokens.dat and index 0: the closed-form curves of
 * flops_analytical, one column per strategy present. */
static void flops_analytical_dat(FILE *f, flops_fig *ff)
{
    fprintf(f,
            "# flops_vs_tokens: extra FLOPs of each adaLN strategy as %% of the untransformed "
            "block, against tokens per sample N\n"
            "# plotted on a symmetric log axis: linear within +-%g %%, logarithmic beyond\n"
            "# crossover N* per_sample_fold_vs_online_dense =",
            SYMLOG_C);
    cic_plot_dat_num(f, ff->nstar);
    fputs("\n# crossover N* per_sample_fold_vs_online_fast =", f);
    cic_plot_dat_num(f, ff->nstar_fast);
    fputs("\n# index 0: analytical (closed-form, from the first point's flops_analytical)\n"
          "# columns: tokens[per sample]",
          f);
    for (int s = 0; s < NSTRAT; s++) {
        json_t *a = json_object_get(ff->pct, STRAT(s));
        ff->scol[s] = json_is_array(a) ? 2 + ff->nstrat++ : 0;
        ff->line_tr[s] = -1;
        if (ff->scol[s])
            fprintf(f, "  %s[%%]", STRAT(s));
    }
    fputs("\n# transform: analytical\n", f);
    for (size_t i = 0; i < json_array_size(ff->tok); i++) {
        double x = cic_plot_jnum(json_array_get(ff->tok, i));
        fprintf(f, "%.17g", x);
        extend_x(ff, x);
        for (int s = 0; s < NSTRAT; s++) {
            if (!ff->scol[s])
                continue;
            double v = cic_plot_jnum(json_array_get(json_object_get(ff->pct, STRAT(s)), i));
            cic_plot_dat_num(f, v);
            extend_u(ff, v);
        }
        fputc('\n', f);
    }
}

/* The measured extra FLOPs of transform i: aggregate mpfr rows over the
 * tokens axis when it is swept, else the first report's own row at its N.
 * Returns the row count. */
static int measured_rows(const cic_plot_ctx *c, const flops_fig *ff, int i, bool swept,
                         cic_plot_row *rows)
{
    double n_first = cic_plot_jnum(json_object_get(json_object_get(ff->kase, "model"), "tokens"));
    json_t *r;
    double v;
    if (swept)
        return cic_plot_agg_rows(c, c->tr[i], CIC_PLOT_MPFR, "tokens", "extra_pct", NULL, rows);
    r = cic_plot_first_row(c, c->tr[i], CIC_PLOT_MPFR);
    v = cic_plot_jget(r, "flops", "extra_pct", NULL);
    if (!isfinite(v) || !(n_first > 0))
        return 0;
    rows[0].x = n_first;
    rows[0].v[0] = rows[0].v[1] = rows[0].v[2] = v;
    rows[0].n = 1;
    return 1;
}

/* Index 1..: one block per dit transform with measured rows. */
static void flops_measured_dat(FILE *f, const cic_plot_ctx *c, flops_fig *ff,
                               cic_plot_row *rows)
{
    bool swept = cic_plot_axis_count(c, "tokens") >= 2 && c->aggregate;
    for (int i = 0; i < c->ntr && ff->nmeas < CIC_PLOT_MAXTR; i++) {
        int s = strategy_of(c, i), n;
        if (s < 0 || (n = measured_rows(c, ff, i, swept, rows)) == 0)
            continue;
        if (ff->nmeas == 0) {
            fprintf(f, "\n\n# index 1..: measured (counted in the engine), %s; median, min, max "
                       "over seeds\n",
                    swept ? "aggregate mpfr rows" : "mpfr rows of the first report");
            cic_plot_dat_fixed(f, c, "tokens");
            fputs("# columns: tokens[per sample]  extra_pct_median[%]  extra_pct_min[%]  "
                  "extra_pct_max[%]\n",
                  f);
        } else {
            fputs("\n\n", f);
        }
        fputs("# transform: ", f);
        cic_plot_dat_name(f, c->tr[i]);
        fprintf(f, " (%s)\n", STRAT(s));
        for (int r = 0; r < n; r++) {
            fprintf(f, "%.17g", rows[r].x);
            for (int j = 0; j < 3; j++) {
                cic_plot_dat_num(f, rows[r].v[j]);
                extend_u(ff, rows[r].v[j]);
            }
            fputc('\n', f);
            if (rows[r].v[1] != rows[r].v[2])
                ff->bars = true;
            extend_x(ff, rows[r].x);
        }
        if (ff->line_tr[s] < 0)
            ff->line_tr[s] = i;
        ff->mtr[ff->nmeas++] = i;
    }
}

/* The legend: one entry per strategy (its curve and, when a transform
 * measures it, that transform's points in the same colour), then any
 * further transform measuring a strategy already listed. */
static void flops_legend(const cic_plot_ctx *c, flops_fig *ff)
{
    for (int s = 0; s < NSTRAT; s++) {
        int i = ff->line_tr[s], k = ff->nkey;
        if (!ff->scol[s] && i < 0)
            continue;
        if (i < 0 || cic_plot_streq(c->tr[i], STRAT(s)))
            snprintf(ff->labels[k], sizeof ff->labels[k], "%s", STRAT(s));
        else
            snprintf(ff->labels[k], sizeof ff->labels[k], "%s (%s)", STRAT(s), c->tr[i]);
        ff->brief[k] = i < 0 ? STRAT(s) : c->tr[i];
        ff->lstyle[k] = i < 0 ? 80 + s : cic_plot_style(1 + i);
        ff->lpoints[k] = i >= 0;
        ff->nkey++;
    }
    for (int m = 0; m < ff->nmeas; m++) {
        int i = ff->mtr[m], s = strategy_of(c, i), k = ff->nkey;
        if (ff->line_tr[s] == i)
            continue;
        snprintf(ff->labels[k], sizeof ff->labels[k], "%s (%s)", STRAT(s), c->tr[i]);
        ff->brief[k] = c->tr[i];
        ff->lstyle[k] = cic_plot_style(1 + i);
        ff->lpoints[k] = true;
        ff->nkey++;
    }
}

/* y: symmetric log over the data with 6 % of room; tics at 0 and the
 * powers of ten that fall inside (0.1 only when nothing is bigger). */
static void flops_yaxis(flops_fig *ff)
{
    double span = ff->umax - ff->umin > 0.5 ? ff->umax - ff->umin : 0.5;
    size_t tl;
    ff->ulo = ff->umin - 0.06 * span;
    ff->uhi = ff->umax + 0.06 * span;
    tl = (size_t)snprintf(ff->tics, sizeof ff->tics, "'0' 0");
    for (int k = -1; k <= 6; k++) {
        if (k < 0 && fmax(fabs(ff->ulo), fabs(ff->uhi)) > symlog(3))
            continue;
        for (int sg = -1; sg <= 1; sg += 2) {
            double t = sg * pow(10, k);
            double u = symlog(t);
            if (u < ff->ulo || u > ff->uhi || tl + 40 > sizeof ff->tics)
                continue;
            tl += (size_t)snprintf(ff->tics + tl, sizeof ff->tics - tl, ", '%g' %g", t, t);
        }
    }
    snprintf(ff->ktitle, sizeof ff->ktitle, "lines: closed form; points: counted in the engine%s",
             ff->bars ? "; bars: min \xe2\x80\x93 max over seeds" : "");
}

/* The axes of one paper size: the symlog y, log2 x, the zero line and the
 * crossovers that fall inside the x range. */
static void flops_axes(FILE *g, const flops_fig *ff)
{
    const double ns[2] = {ff->nstar, ff->nstar_fast};
    static const char *const nl[2] = {"N* = %.0f", "N*_{fast} = %.0f"};
    fprintf(g,
            "C = %g\nsymlog(y) = sgn(y) * log10(1 + abs(y) / C)\n"
            "symlog_inv(u) = sgn(u) * C * (10**abs(u) - 1)\n"
            "set nonlinear y via symlog(y) inverse symlog_inv(y)\n"
            "set yrange [%.6g:%.6g]\nset ytics (%s)\nset mytics 1\n"
            "set logscale x 2\nset format x '2^{%%L}'\nset xrange [%g:%g]\n"
            "set xlabel 'tokens per sample N'\n"
            "set arrow 5 from graph 0, first 0 to graph 1, first 0 nohead lw 0.6 "
            "lc rgb '#888888' back\n",
            SYMLOG_C, symlog_inv(ff->ulo), symlog_inv(ff->uhi), ff->tics, ff->xmin / 1.4,
            ff->xmax * 1.4);
    cic_plot_gp_ylabel(g, "extra FLOPs, % of block (symlog)");
    for (int k = 0; k < 2; k++) {
        if (!(isfinite(ns[k]) && ns[k] >= ff->xmin && ns[k] <= ff->xmax))
            continue;
        fprintf(g,
                "set arrow %d from %.17g, graph 0 to %.17g, graph 1 nohead dt 3 lw 0.8 "
                "lc rgb '%s' back\n"
                "set label %d sprintf('%s', %.17g) at %.17g, graph %.2f left "
                "offset 0.4,0 front\n",
                1 + k, ns[k], ns[k], k ? "#8c8c8c" : "#000000", 1 + k, nl[k], ns[k], ns[k],
                k ? 0.84 : 0.93);
    }
}

/* The script body at one paper size: the curves, the measured points and
 * the legend (an entry whose "strategy (transform)" does not fit on a line
 * keeps the transform's name alone). Returns the canvas height. */
static double flops_body(FILE *g, const cic_plot_ctx *c, const cic_plot_size *sz,
                         const flops_fig *ff)
{
    const char *lab[NSTRAT + CIC_PLOT_MAXTR];
    int fit = (int)((sz->width_in - 0.6) / cic_plot_char_in(sz)), maxlen = 12, b = 0;
    char title[64];
    double height;

    for (int k = 0; k < ff->nkey; k++) {
        lab[k] = (int)strlen(ff->labels[k]) <= fit ? ff->labels[k] : ff->brief[k];
        if ((int)strlen(lab[k]) > maxlen)
            maxlen = (int)strlen(lab[k]);
    }
    int krows = cic_plot_key_rows(sz, ff->nkey, maxlen, true);
    cic_plot_gp_begin(g, c);
    for (int s = 0; s < NSTRAT; s++)
        fprintf(g, "set style line %d lc rgb '#8c8c8c' lw LW dt %d\n", 80 + s, STRAT_DT[s]);
    snprintf(title, sizeof title, "%s (FLOP counts)", CIC_PLOT_MPFR);
    int tlines = cic_plot_gp_title(g, c, sz, title, false);
    height = cic_plot_gp_panel(g, sz, 0, 1, tlines, krows);
    flops_axes(g, ff);
    cic_plot_gp_key(g, sz, ff->nkey, maxlen, ff->ktitle);
    fputs("plot ", g);
    for (int s = 0; s < NSTRAT; s++) {
        if (!ff->scol[s])
            continue;
        fprintf(g, "%s'flops_vs_tokens.dat' index 0 using 1:%d with lines ls %d notitle",
                b++ ? ", \\\n     " : "", ff->scol[s],
                ff->line_tr[s] < 0 ? 80 + s : cic_plot_style(1 + ff->line_tr[s]));
    }
    for (int m = 0; m < ff->nmeas; m++)
        fprintf(g, "%s'flops_vs_tokens.dat' index %d using 1:2:3:4 with yerrorbars ls %d "
                   "notitle",
                b++ ? ", \\\n     " : "", 1 + m, cic_plot_style(1 + ff->mtr[m]));
    for (int k = 0; k < ff->nkey; k++) {
        fprintf(g, "%sNaN with %s ls %d title ", b++ ? ", \\\n     " : "",
                ff->lpoints[k] ? "linespoints" : "lines", ff->lstyle[k]);
        cic_plot_gp_quote(g, lab[k]);
        fputs(" noenhanced", g);
    }
    fputs("\nunset multiplot\n", g);
    return height;
}

int cic_plot_flops(const cic_plot_ctx *c, cic_diag *d)
{
    json_t *fa = json_object_get(c->first, "flops_analytical");
    json_t *kase = json_object_get(c->root, "case");
    cic_plot_figure fg;
    cic_plot_row *rows = NULL;
    flops_fig *ff = NULL;
    int rc;

    if (!json_is_object(kase))
        kase = json_object_get(c->first, "case");
    if (!cic_plot_streq(cic_plot_jstr(json_object_get(kase, "model"), "block"), "dit") ||
        !json_is_array(json_object_get(fa, "tokens")) ||
        json_array_size(json_object_get(fa, "tokens")) == 0 ||
        !json_is_object(json_object_get(fa, "extra_pct")))
        return 0;
    rows = cic_calloc(CIC_PLOT_MAXROWS, sizeof *rows);
    ff = cic_calloc(1, sizeof *ff);
    if (!rows || !ff) {
        cic_diag_set(d, c->plots, 0, 0, "out of memory");
        free(rows);
        free(ff);
        return -1;
    }
    if (cic_plot_figure_open(&fg, "flops_vs_tokens", c, d) != 0) {
        free(rows);
        free(ff);
        return -1;
    }
    ff->fa = fa;
    ff->tok = json_object_get(fa, "tokens");
    ff->pct = json_object_get(fa, "extra_pct");
    ff->kase = kase;
    ff->xmin = INFINITY;
    ff->xmax = -INFINITY;
    ff->nstar = cic_plot_jget(fa, "crossover_tokens", "per_sample_fold_vs_online_dense", NULL);
    ff->nstar_fast = cic_plot_jget(fa, "crossover_tokens", "per_sample_fold_vs_online_fast", NULL);
    flops_analytical_dat(fg.dat.f, ff);
    flops_measured_dat(fg.dat.f, c, ff, rows);
    free(rows);
    flops_legend(c, ff);
    flops_yaxis(ff);
    for (int s = 0; s < CIC_PLOT_NSIZE; s++)
        fg.height_in[s] = flops_body(fg.body[s].f, c, &cic_plot_sizes[s], ff);
    rc = cic_plot_figure_finish(c, &fg, d) == 0 ? 1 : -1;
    cic_plot_figure_free(&fg);
    free(ff);
    return rc;
}
