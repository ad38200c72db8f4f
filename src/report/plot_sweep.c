/* SPDX-License-Identifier: MIT */
/* plot_sweep.c: the figures over a swept axis, from sweep.json's aggregate
 * (median, min and max over seeds): error_vs_d and error_vs_depth (float32
 * error against the width or the depth, two panels: relative 2-norm error
 * and p99 of ulp_row), and ce_vs_prec (the exactness residual against the
 * MPFR precision). Also the data selection the other figures share.
 *
 * When axes other than the plotted one and seed vary, only entries whose
 * other parameters equal the first value of each such axis are used (the
 * .dat header says which). Error bars are the min-max spread over seeds,
 * and the legend says so. */
#include "plot_int.h"

#include <math.h>
#include <string.h>

/* ---- selecting data ---- */

size_t cic_plot_axis_count(const cic_plot_ctx *c, const char *axis)
{
    if (!c->sweep || !json_is_array(c->axes))
        return 0;
    size_t i;
    json_t *a;
    json_array_foreach(c->axes, i, a) {
        if (cic_plot_streq(json_string_value(a), axis)) {
            json_t *v = json_object_get(c->axis_values, axis);
            return json_is_array(v) ? json_array_size(v) : 0;
        }
    }
    return 0;
}

static bool num_eq(const json_t *a, const json_t *b)
{
    if (json_is_number(a) && json_is_number(b))
        return json_number_value(a) == json_number_value(b);
    return a && b && json_equal((json_t *)a, (json_t *)b);
}

/* Whether params fix every swept axis other than xaxis and "seed" at its
 * first value. */
static bool params_match(const cic_plot_ctx *c, const json_t *params, const char *xaxis)
{
    size_t i;
    json_t *a;
    json_array_foreach(c->axes, i, a) {
        const char *name = json_string_value(a);
        if (!name || cic_plot_streq(name, xaxis) || cic_plot_streq(name, "seed"))
            continue;
        json_t *vals = json_object_get(c->axis_values, name);
        json_t *first = json_is_array(vals) ? json_array_get(vals, 0) : NULL;
        if (!first)
            continue;
        if (!num_eq(json_object_get(params, name), first))
            return false;
    }
    return true;
}

void cic_plot_dat_fixed(FILE *f, const cic_plot_ctx *c, const char *xaxis)
{
    size_t i;
    json_t *a;
    bool any = false;
    json_array_foreach(c->axes, i, a) {
        const char *name = json_string_value(a);
        if (!name || cic_plot_streq(name, xaxis) || cic_plot_streq(name, "seed"))
            continue;
        json_t *vals = json_object_get(c->axis_values, name);
        json_t *first = json_is_array(vals) ? json_array_get(vals, 0) : NULL;
        char *t = first ? json_dumps(first, JSON_ENCODE_ANY) : NULL;
        fprintf(f, "%s", any ? ", " : "# other axes fixed at their first value: ");
        cic_plot_dat_name(f, name);
        fprintf(f, " = %s", t ? t : "?");
        free(t);
        any = true;
    }
    if (any)
        fputc('\n', f);
}

static int row_cmp(const void *a, const void *b)
{
    double x = ((const cic_plot_row *)a)->x, y = ((const cic_plot_row *)b)->x;
    return (x > y) - (x < y);
}

int cic_plot_agg_rows(const cic_plot_ctx *c, const char *tr, const char *engine,
                      const char *xaxis, const char *m1, const char *m2, cic_plot_row *out)
{
    size_t i;
    json_t *e;
    int n = 0;
    json_array_foreach(c->aggregate, i, e) {
        if (!cic_plot_streq(cic_plot_jstr(e, "transform"), tr) ||
            !cic_plot_streq(cic_plot_jstr(e, "engine"), engine))
            continue;
        json_t *p = json_object_get(e, "params");
        double x = cic_plot_jnum(json_object_get(p, xaxis));
        if (!isfinite(x) || !params_match(c, p, xaxis))
            continue;
        json_t *vals = json_object_get(e, "values");
        cic_plot_row r;
        r.x = x;
        r.n = cic_plot_jnum(json_object_get(e, "n"));
        const char *ms[2] = {m1, m2};
        bool have = false;
        for (int k = 0; k < 2; k++) {
            for (int j = 0; j < 3; j++)
                r.v[3 * k + j] = NAN;
            if (!ms[k])
                continue;
            json_t *mv = json_object_get(vals, ms[k]);
            r.v[3 * k + 0] = cic_plot_jget(mv, "median", NULL, NULL);
            r.v[3 * k + 1] = cic_plot_jget(mv, "min", NULL, NULL);
            r.v[3 * k + 2] = cic_plot_jget(mv, "max", NULL, NULL);
            if (json_is_object(mv))
                have = true;
        }
        if (!have || n >= CIC_PLOT_MAXROWS)
            continue;
        out[n++] = r;
    }
    qsort(out, (size_t)n, sizeof *out, row_cmp);
    return n;
}

json_t *cic_plot_first_row(const cic_plot_ctx *c, const char *tr, const char *engine)
{
    size_t i;
    json_t *r;
    json_array_foreach(json_object_get(c->first, "results"), i, r) {
        if (cic_plot_streq(cic_plot_jstr(r, "transform"), tr) &&
            cic_plot_streq(cic_plot_jstr(r, "engine"), engine))
            return r;
    }
    return NULL;
}

const char *cic_plot_order_name(const cic_plot_ctx *c, int k)
{
    return k == 0 ? "none" : c->tr[k - 1];
}

/* "median of N seeds; bars: min-max", or NULL for one seed. */
static const char *seed_key(char *buf, size_t cap, int nseed)
{
    if (nseed < 2)
        return NULL;
    snprintf(buf, cap, "median of %d seeds; bars: min \xe2\x80\x93 max", nseed);
    return buf;
}

static void sort_doubles(double *x, int n)
{
    for (int i = 1; i < n; i++)
        for (int j = i; j > 0 && x[j - 1] > x[j]; j--) {
            double t = x[j];
            x[j] = x[j - 1];
            x[j - 1] = t;
        }
}

/* ---- error against d_model or layers ---- */

/* What the data of error_vs_* found: the blocks written (plotting order of
 * their transforms), the longest name, the most seeds of a point, each
 * panel's positive range and the x values. */
typedef struct {
    int order[CIC_PLOT_MAXTR + 1];
    int nblocks, maxlen, nseed, nx;
    double lo[2], hi[2]; /* rel_norm2, ulp_row.p99 */
    double xs[CIC_PLOT_MAXROWS];
} evs_data;

/* One data row: x, median/min/max of both metrics, seeds; and what it adds
 * to the extents. */
static void evs_row(FILE *f, const cic_plot_row *r, evs_data *e)
{
    bool seen = false;
    fprintf(f, "%.17g", r->x);
    for (int j = 0; j < 6; j++)
        cic_plot_dat_num(f, r->v[j]);
    cic_plot_dat_num(f, r->n);
    fputc('\n', f);
    for (int j = 0; j < 6; j++) {
        double v = r->v[j];
        if (v > 0 && isfinite(v)) {
            e->lo[j / 3] = fmin(e->lo[j / 3], v);
            e->hi[j / 3] = fmax(e->hi[j / 3], v);
        }
    }
    if (isfinite(r->n) && r->n > e->nseed)
        e->nseed = (int)r->n;
    for (int j = 0; j < e->nx; j++)
        seen |= e->xs[j] == r->x;
    if (!seen && e->nx < CIC_PLOT_MAXROWS)
        e->xs[e->nx++] = r->x;
}

/* NAME.dat: a header, then one block per transform with aggregate rows of
 * the plotted engine against xaxis. */
static void evs_dat(FILE *f, const cic_plot_ctx *c, const char *name, const char *xaxis,
                    cic_plot_row *rows, evs_data *e)
{
    fprintf(f, "# %s: f32 error against %s, engine %s, against the MPFR truth; median, min and "
               "max over seeds\n",
            name, xaxis, c->engine);
    cic_plot_dat_fixed(f, c, xaxis);
    fprintf(f,
            "# units: rel_norm2 = ||y - x||_2 / ||x||_2 (dimensionless); ulp_row_p99 in ULP of "
            "the row's largest |x| (row-scaled)\n"
            "# columns: %s  rel_norm2_median  rel_norm2_min  rel_norm2_max  ulp_row_p99_median[ULP]"
            "  ulp_row_p99_min[ULP]  ulp_row_p99_max[ULP]  n_seeds\n",
            xaxis);
    for (int k = 0; k <= c->ntr; k++) {
        const char *tr = cic_plot_order_name(c, k);
        int n = cic_plot_agg_rows(c, tr, c->engine, xaxis, "rel_norm2", "ulp_row.p99", rows);
        if (n == 0)
            continue;
        if (e->nblocks)
            fputs("\n\n", f);
        fputs("# transform: ", f);
        cic_plot_dat_name(f, tr);
        fputc('\n', f);
        for (int i = 0; i < n; i++)
            evs_row(f, &rows[i], e);
        e->order[e->nblocks++] = k;
        if ((int)strlen(tr) > e->maxlen)
            e->maxlen = (int)strlen(tr);
    }
}

/* The script body at one paper size: two panels (relative error, p99 ULP)
 * sharing the x axis, the key under the second. */
static double evs_body(FILE *g, const cic_plot_ctx *c, const cic_plot_size *sz,
                       const char *name, const char *xlabel, const evs_data *e,
                       const char *ktitle)
{
    static const char *const ylab[2] = {"relative error (2-norm)", "p99 error (ULP, row-scaled)"};
    /* with a power of ten appended (fits a 1.6 in panel at 7 pt) */
    static const char *const ylab_short[2] = {"rel. error (2-norm)", "p99 error (ULP)"};
    bool logx = e->nx > 0 && e->xs[0] > 0 && e->xs[e->nx - 1] / e->xs[0] >= 4;
    int krows = cic_plot_key_rows(sz, e->nblocks, e->maxlen, ktitle != NULL);
    double height = 0;

    cic_plot_gp_begin(g, c);
    int tl = cic_plot_gp_title(g, c, sz, c->engine, false);
    if (logx)
        fputs("set logscale x 2\n", g);
    fputs("set offsets graph 0.05, graph 0.05, 0, 0\nset key off\n", g);
    for (int p = 0; p < 2; p++) {
        height = cic_plot_gp_panel(g, sz, p, 2, tl, krows);
        int ex = cic_plot_gp_log(g, 'y', e->lo[p], e->hi[p], true);
        char yl[128];
        if (ex)
            snprintf(yl, sizeof yl, "%s, \xc3\x97" "10^{%d}", ylab_short[p], ex);
        else
            snprintf(yl, sizeof yl, "%s", ylab[p]);
        cic_plot_gp_ylabel(g, yl);
        bool xlab = p == 1 || sz->wide;
        cic_plot_gp_xtics(g, sz, cic_plot_panel_width(sz, 2), e->xs, e->nx, xlab);
        if (xlab)
            fprintf(g, "set xlabel '%s' noenhanced\n", xlabel);
        else
            fputs("unset xlabel\n", g);
        if (p == 1)
            cic_plot_gp_key(g, sz, e->nblocks, e->maxlen, ktitle);
        fputs("plot ", g);
        for (int b = 0; b < e->nblocks; b++) {
            fprintf(g, "%s'%s.dat' index %d using 1:%d:%d:%d with yerrorlines ls %d title ",
                    b ? ", \\\n     " : "", name, b, p ? 5 : 2, p ? 6 : 3, p ? 7 : 4,
                    cic_plot_style(e->order[b]));
            cic_plot_gp_quote(g, cic_plot_order_name(c, e->order[b]));
            fputs(" noenhanced", g);
        }
        fputc('\n', g);
    }
    fputs("unset multiplot\n", g);
    return height;
}

int cic_plot_error_vs(const cic_plot_ctx *c, const char *name, const char *xaxis,
                      const char *xlabel, cic_diag *d)
{
    cic_plot_figure fg;
    cic_plot_row *rows = NULL;
    evs_data *e = NULL;
    char kt[96];
    const char *ktitle;

    if (cic_plot_axis_count(c, xaxis) < 2 || !c->aggregate)
        return 0;
    rows = cic_calloc(CIC_PLOT_MAXROWS, sizeof *rows);
    e = cic_calloc(1, sizeof *e);
    if (!rows || !e) {
        free(rows);
        free(e);
        cic_diag_set(d, c->plots, 0, 0, "out of memory");
        return -1;
    }
    if (cic_plot_figure_open(&fg, name, c, d) != 0) {
        free(rows);
        free(e);
        return -1;
    }
    e->maxlen = 4;
    e->lo[0] = e->lo[1] = INFINITY;
    evs_dat(fg.dat.f, c, name, xaxis, rows, e);
    free(rows);
    if (e->nblocks == 0) {
        cic_plot_figure_free(&fg);
        free(e);
        return 0;
    }
    sort_doubles(e->xs, e->nx);
    ktitle = seed_key(kt, sizeof kt, e->nseed);
    for (int s = 0; s < CIC_PLOT_NSIZE; s++)
        fg.height_in[s] = evs_body(fg.body[s].f, c, &cic_plot_sizes[s], name, xlabel, e, ktitle);
    free(e);
    int rc = cic_plot_figure_finish(c, &fg, d) == 0 ? 1 : -1;
    cic_plot_figure_free(&fg);
    return rc;
}

/* ---- exactness residual against MPFR precision ---- */

int cic_plot_ce_prec(const cic_plot_ctx *c, cic_diag *d)
{
    cic_plot_figure fg;
    cic_plot_row *rows = NULL;
    int nblocks = 0, maxlen = 22, nseed = 0;
    int styles[CIC_PLOT_MAXTR];
    double xmin = INFINITY, xmax = -INFINITY, ylo = INFINITY, yhi = 0;
    double xs[CIC_PLOT_MAXROWS];
    int nx = 0;

    if (cic_plot_axis_count(c, "mpfr_prec") < 2 || !c->aggregate)
        return 0;
    rows = cic_calloc(CIC_PLOT_MAXROWS, sizeof *rows);
    if (!rows) {
        cic_diag_set(d, c->plots, 0, 0, "out of memory");
        return -1;
    }
    if (cic_plot_figure_open(&fg, "ce_vs_prec", c, d) != 0) {
        free(rows);
        return -1;
    }
    FILE *f = fg.dat.f;
    fputs("# ce_vs_prec: computational-equivalence residual (relative MPFR-transformed vs "
          "MPFR-original difference) against the MPFR precision; aggregate mpfr rows, median, "
          "min and max over seeds\n",
          f);
    cic_plot_dat_fixed(f, c, "mpfr_prec");
    fputs("# columns: mpfr_prec[bits]  ce_residual_median[-]  ce_residual_min[-]  "
          "ce_residual_max[-]\n",
          f);
    for (int i = 0; i < c->ntr; i++) {
        int n = cic_plot_agg_rows(c, c->tr[i], CIC_PLOT_MPFR, "mpfr_prec", "ce_residual", NULL, rows);
        if (n == 0)
            continue;
        if (nblocks)
            fputs("\n\n", f);
        fputs("# transform: ", f);
        cic_plot_dat_name(f, c->tr[i]);
        fputc('\n', f);
        for (int r = 0; r < n; r++) {
            fprintf(f, "%.17g", rows[r].x);
            cic_plot_dat_num(f, rows[r].v[0]);
            cic_plot_dat_num(f, rows[r].v[1]);
            cic_plot_dat_num(f, rows[r].v[2]);
            fputc('\n', f);
            xmin = fmin(xmin, rows[r].x);
            xmax = fmax(xmax, rows[r].x);
            for (int j = 0; j < 3; j++)
                if (rows[r].v[j] > 0 && isfinite(rows[r].v[j])) {
                    ylo = fmin(ylo, rows[r].v[j]);
                    yhi = fmax(yhi, rows[r].v[j]);
                }
            if (isfinite(rows[r].n) && rows[r].n > nseed)
                nseed = (int)rows[r].n;
            bool seen = false;
            for (int j = 0; j < nx; j++)
                seen |= xs[j] == rows[r].x;
            if (!seen && nx < CIC_PLOT_MAXROWS)
                xs[nx++] = rows[r].x;
        }
        styles[nblocks++] = cic_plot_style(1 + i);
        if ((int)strlen(c->tr[i]) > maxlen)
            maxlen = (int)strlen(c->tr[i]);
    }
    free(rows);
    if (nblocks == 0) {
        cic_plot_figure_free(&fg);
        return 0;
    }
    sort_doubles(xs, nx);
    double pad = (xmax - xmin) * 0.05 + 1;
    /* the y range holds the data and the reference line over the x range,
     * whole decades, with room so that the flat lines of broken transforms
     * do not sit on the frame */
    ylo = fmin(ylo, ldexp(1, -(int)fmin(xmax + pad, 1000)));
    yhi = fmax(yhi, ldexp(1, -(int)fmax(xmin - pad, -1000)));
    int klo = (int)floor(log10(ylo)) - 1, khi = (int)ceil(log10(yhi)) + 1;
    char kt[96];
    const char *ktitle = seed_key(kt, sizeof kt, nseed);
    for (int s = 0; s < CIC_PLOT_NSIZE; s++) {
        const cic_plot_size *sz = &cic_plot_sizes[s];
        FILE *g = fg.body[s].f;
        int krows = cic_plot_key_rows(sz, nblocks + 1, maxlen, ktitle != NULL);
        cic_plot_gp_begin(g, c);
        int tl = cic_plot_gp_title(g, c, sz, CIC_PLOT_MPFR, false);
        fg.height_in[s] = cic_plot_gp_panel(g, sz, 0, 1, tl, krows);
        fputs("set logscale y\n", g);
        cic_plot_gp_decades(g, 'y', klo, khi, 8);
        fprintf(g, "set xrange [%g:%g]\nset samples 200\n", xmin - pad, xmax + pad);
        cic_plot_gp_xtics(g, sz, cic_plot_panel_width(sz, 1), xs, nx, true);
        fputs("set xlabel 'MPFR precision (bits)'\nset style line 99 lc rgb '#000000' lw LW dt 2\n",
              g);
        cic_plot_gp_ylabel(g, "exactness residual (relative 2-norm)");
        cic_plot_gp_key(g, sz, nblocks + 1, maxlen, ktitle);
        fputs("plot 2**(-x) with lines ls 99 title '2^{-prec} (equivalent)'", g);
        for (int b = 0; b < nblocks; b++) {
            fprintf(g, ", \\\n     'ce_vs_prec.dat' index %d using 1:2:3:4 with yerrorlines ls %d "
                       "title ",
                    b, styles[b]);
            /* the b-th block's transform: find the transform of that style */
            cic_plot_gp_quote(g, c->tr[styles[b] - 2]);
            fputs(" noenhanced", g);
        }
        fputs("\nunset multiplot\n", g);
    }
    int rc = cic_plot_figure_finish(c, &fg, d) == 0 ? 1 : -1;
    cic_plot_figure_free(&fg);
    return rc;
}
