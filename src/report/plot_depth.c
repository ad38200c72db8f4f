/* SPDX-License-Identifier: MIT */
/* plot_depth.c: error against depth in one model (report.json's per_block,
 * DESIGN.md section 13): rel_norm2 of each block's output against its
 * truth, block by block (and the head readout last), one line per engine
 * (the f32 engines and every low-precision one) of one transform's model:
 * the last transform of the case whose rows have more than one entry, or
 * the original ("none") when no transform has. Entries the truth cannot
 * score (null) leave a gap. */
#include "plot_int.h"

#include <math.h>
#include <string.h>

#define MAXENG 16

/* The rows (one per engine) of transform tr with per_block of 2 or more
 * entries, into rows[]; their count. */
static int depth_rows(const cic_plot_ctx *c, const char *tr, json_t **rows)
{
    size_t i;
    json_t *r;
    int n = 0;
    json_array_foreach(json_object_get(c->first, "results"), i, r) {
        json_t *pb = json_object_get(r, "per_block");
        if (n < MAXENG && cic_plot_streq(cic_plot_jstr(r, "transform"), tr) &&
            json_is_array(pb) && json_array_size(pb) >= 2)
            rows[n++] = r;
    }
    return n;
}

static double entry_rel(const json_t *row, size_t b)
{
    json_t *e = json_array_get(json_object_get(row, "per_block"), b);
    double v = cic_plot_jnum(json_object_get(e, "rel_norm2"));
    return v > 0 ? v : NAN; /* a log axis: no place for 0 or null */
}

static void depth_dat(FILE *f, const cic_plot_ctx *c, const char *tr, json_t **rows, int n,
                      size_t nb)
{
    fprintf(f, "# error_vs_block: rel_norm2 of each block's output against its truth, "
               "transform %s, %s\n# columns: block (the last: the head readout when "
               "'head')",
            tr, c->sweep ? "first point of the sweep" : "single run");
    for (int k = 0; k < n; k++) {
        fputs("  ", f);
        cic_plot_dat_name(f, cic_plot_jstr(rows[k], "engine"));
        fputs("[rel_norm2]", f);
    }
    fputc('\n', f);
    for (size_t b = 0; b < nb; b++) {
        fprintf(f, "%zu", b);
        for (int k = 0; k < n; k++)
            cic_plot_dat_num(f, entry_rel(rows[k], b));
        fputc('\n', f);
    }
}

/* The x tics: every block (every k-th labelled so they fit), "head" for
 * the head readout. */
static void depth_xtics(FILE *g, const cic_plot_size *sz, size_t nb, bool head)
{
    double pw = cic_plot_panel_width(sz, 1);
    size_t fit = (size_t)(pw / (cic_plot_char_in(sz) * 4.0)), step;
    step = fit >= nb || fit < 2 ? 1 : (nb + fit - 2) / (fit - 1);
    fputs("set xtics (", g);
    for (size_t b = 0; b < nb; b++) {
        fputs(b ? ", " : "", g);
        if (head && b + 1 == nb)
            fprintf(g, "'head' %zu", b);
        else if (b % step == 0)
            fprintf(g, "'%zu' %zu", b, b);
        else
            fprintf(g, "'' %zu", b);
    }
    fputs(")\n", g);
}

int cic_plot_error_vs_block(const cic_plot_ctx *c, cic_diag *d)
{
    json_t *rows[MAXENG];
    const char *tr = NULL;
    int n = 0, maxlen = 4;
    double lo = INFINITY, hi = 0;
    if (!c->first)
        return 0;
    for (int i = c->ntr - 1; i >= 0 && n == 0; i--) {
        tr = c->tr[i];
        n = depth_rows(c, tr, rows);
    }
    if (n == 0)
        return 0;
    size_t nb = json_array_size(json_object_get(rows[0], "per_block"));
    json_t *last = json_array_get(json_object_get(rows[0], "per_block"), nb - 1);
    bool head = json_is_true(json_object_get(last, "head"));
    for (int k = 0; k < n; k++) {
        if ((int)strlen(cic_plot_jstr(rows[k], "engine")) > maxlen)
            maxlen = (int)strlen(cic_plot_jstr(rows[k], "engine"));
        for (size_t b = 0; b < nb; b++) {
            double v = entry_rel(rows[k], b);
            lo = v < lo ? v : lo;
            hi = v > hi ? v : hi;
        }
    }
    if (!(hi > 0))
        return 0; /* nothing the truth could score */
    cic_plot_figure fg;
    if (cic_plot_figure_open(&fg, "error_vs_block", c, d) != 0)
        return -1;
    depth_dat(fg.dat.f, c, tr, rows, n, nb);
    for (int s = 0; s < CIC_PLOT_NSIZE; s++) {
        const cic_plot_size *sz = &cic_plot_sizes[s];
        FILE *g = fg.body[s].f;
        char what[CIC_NAME_MAX + 40];
        snprintf(what, sizeof what, "transform %s, every engine", tr);
        cic_plot_gp_begin(g, c);
        int tl = cic_plot_gp_title_what(g, c, sz, "all engines", what, true);
        fg.height_in[s] = cic_plot_gp_panel(g, sz, 0, 1, tl, cic_plot_key_rows(sz, n, maxlen,
                                                                               false));
        fprintf(g, "set xrange [-0.5:%g]\nset xlabel 'block (output of the residual stream)'\n",
                (double)nb - 0.5);
        int ex = cic_plot_gp_log(g, 'y', lo, hi, true);
        char yl[96];
        if (ex)
            snprintf(yl, sizeof yl, "rel. 2-norm error vs truth, \xc3\x97" "10^{%d}", ex);
        else
            snprintf(yl, sizeof yl, "rel. 2-norm error vs truth");
        cic_plot_gp_ylabel(g, yl);
        depth_xtics(g, sz, nb, head);
        cic_plot_gp_key(g, sz, n, maxlen, NULL);
        fputs("plot ", g);
        for (int k = 0; k < n; k++) {
            fprintf(g, "%s'error_vs_block.dat' using 1:%d with linespoints ls %d title ",
                    k ? ", \\\n     " : "", 2 + k, cic_plot_style(1 + k));
            cic_plot_gp_quote(g, cic_plot_jstr(rows[k], "engine"));
            fputs(" noenhanced", g);
        }
        fputs("\nunset multiplot\n", g);
    }
    int rc = cic_plot_figure_finish(c, &fg, d) == 0 ? 1 : -1;
    cic_plot_figure_free(&fg);
    return rc;
}
