/* SPDX-License-Identifier: MIT */
/* plot_int.h: what the plot files share (plot.c: entry and input checks;
 * plot_gp.c: gnuplot scripts, sizes, styles, rendering; plot_sweep.c: the
 * figures over a swept axis; plot_point.c: the figures of one report;
 * plot_lowp.c: the figures of the low-precision engines). Not a public
 * header: only src/report/plot*.c include it.
 *
 * A figure is built as text: its data (NAME.dat) once, and its gnuplot body
 * once per paper size, because the layout differs (one column stacks two
 * panels, two columns put them side by side). cic_plot_figure_finish writes
 * NAME.dat and NAME.gp into the private work folder, renders there and
 * renames each finished file into plots/. */
#ifndef CIC_PLOT_INT_H
#define CIC_PLOT_INT_H

#include "plot.h"
#include "report.h"

#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>

/* The engines the figures read by name (report.json's "engine"), spelled
 * by the modules that name them: the f32 engines (engine.h) and the MPFR
 * verdict engine (case.h). */
#define CIC_PLOT_F32_BLAS (CIC_ENGINE_F32_NAME[CIC_MATMUL_OPENBLAS])
#define CIC_PLOT_F32_FIXED (CIC_ENGINE_F32_NAME[CIC_MATMUL_FIXED])
#define CIC_PLOT_MPFR (CIC_VERDICT_ENGINE_NAME[CIC_VERDICT_ENGINE_MPFR])

#define CIC_PLOT_MAXTR 64     /* transforms given their own style; more share */
#define CIC_PLOT_MAXROWS 1024 /* points per data set */
#define CIC_PLOT_NSIZE 2      /* paper sizes: one column, two columns */
#define CIC_PLOT_NFMT 3       /* png, svg, pdf */

/* A paper size. Fonts are in points at the printed size; every format is
 * drawn at the same physical scale (PNG at 300 dpi). */
typedef struct {
    const char *suffix; /* file name suffix: "" or "-wide" */
    const char *what;   /* for the script's comment */
    double width_in;    /* 3.5 (single column) or 7 (double column) */
    double font_pt;
    bool wide;          /* panels side by side (else stacked) */
} cic_plot_size;

extern const cic_plot_size cic_plot_sizes[CIC_PLOT_NSIZE];
extern const char *const cic_plot_ext[CIC_PLOT_NFMT];

/* Average character width and line height of a size's font, in inches
 * (DejaVu Sans, what "Sans" resolves to on Debian). */
double cic_plot_char_in(const cic_plot_size *sz);
double cic_plot_line_in(const cic_plot_size *sz);

typedef struct {
    const char *plots;   /* DIR/plots */
    const char *work;    /* private folder under plots/ where files are made */
    const char *gnuplot; /* full path, or NULL: write .dat and .gp only */
    const char *src;     /* the JSON file read, for messages */
    json_t *root;        /* owned by the caller */
    bool sweep;
    json_t *first;       /* report of the first point with one (borrowed) */
    json_t *first_params;/* its params (sweep), or NULL */
    json_t *aggregate;   /* NULL for a single report */
    json_t *axes, *axis_values;
    const char *case_name;
    const char *engine;  /* f32 engine plotted */
    int ntr;
    const char *tr[CIC_PLOT_MAXTR];
    const char *kind[CIC_PLOT_MAXTR];
    bool fast[CIC_PLOT_MAXTR];
} cic_plot_ctx;

/* A growing text buffer (open_memstream). */
typedef struct {
    char *buf;
    size_t len;
    FILE *f;
} cic_plot_buf;

typedef struct {
    const char *name;
    cic_plot_buf dat;
    cic_plot_buf body[CIC_PLOT_NSIZE]; /* terminal-independent script part */
    double height_in[CIC_PLOT_NSIZE];  /* canvas height; width is the size's */
} cic_plot_figure;

/* ---- selecting data (plot_sweep.c) ---- */
typedef struct {
    double x;
    double v[6]; /* median, min, max of up to two metrics */
    double n;    /* seeds aggregated */
} cic_plot_row;

/* The number of values of a swept axis (0 when not swept). */
size_t cic_plot_axis_count(const cic_plot_ctx *c, const char *axis);
/* "# other axes fixed at their first value: a = v, ..." (nothing when none). */
void cic_plot_dat_fixed(FILE *f, const cic_plot_ctx *c, const char *xaxis);
/* Aggregate rows of one transform and engine against xaxis (sorted by x),
 * with median, min and max of m1 and m2 (m2 may be NULL); entries whose
 * other swept axes are not at their first value are left out. Returns the
 * row count (at most CIC_PLOT_MAXROWS). */
int cic_plot_agg_rows(const cic_plot_ctx *c, const char *tr, const char *engine,
                      const char *xaxis, const char *m1, const char *m2, cic_plot_row *out);
/* The row of the first report for (transform, engine), or NULL. */
json_t *cic_plot_first_row(const cic_plot_ctx *c, const char *tr, const char *engine);
/* Transform names in plotting order: 0 is "none", k is case.transforms[k-1]. */
const char *cic_plot_order_name(const cic_plot_ctx *c, int k);

/* ---- figures: 1 when drawn, 0 when the data does not call for it, -1 with
 * d set ---- */
int cic_plot_error_vs(const cic_plot_ctx *c, const char *name, const char *axis,
                      const char *xlabel, cic_diag *d);
int cic_plot_ce_prec(const cic_plot_ctx *c, cic_diag *d);
int cic_plot_ulp_cdf(const cic_plot_ctx *c, cic_diag *d);
int cic_plot_drift_hist(const cic_plot_ctx *c, cic_diag *d);
int cic_plot_flops(const cic_plot_ctx *c, cic_diag *d);
/* plot_depth.c: error against block in one model (report.json's per_block) */
int cic_plot_error_vs_block(const cic_plot_ctx *c, cic_diag *d);
/* plot_lowp.c: cases with [[engines.lowp]] (report.json's "lowp") */
int cic_plot_lowp_sqnr(const cic_plot_ctx *c, cic_diag *d);
int cic_plot_lowp_kurtosis(const cic_plot_ctx *c, cic_diag *d);
int cic_plot_lowp_chanmax(const cic_plot_ctx *c, cic_diag *d);

/* ---- input checks ---- */
/* a (key: its path in the file) an array of numbers or nulls; 0, or -1
 * with d set (plot_gp.c, with the helpers every figure shares). */
int cic_plot_check_nums(const char *file, const char *key, const json_t *a, cic_diag *d);
/* The "lowp" section of a report and the "sqnr_db" of its rows, when
 * there (pre: the report's key path in the file, as in plot.c); 0, or -1
 * with d set naming the key (plot_lowp.c). */
int cic_plot_lowp_check(const char *file, const char *pre, const json_t *rep, cic_diag *d);

/* ---- figure life cycle (plot_gp.c) ---- */
int cic_plot_figure_open(cic_plot_figure *fg, const char *name, const cic_plot_ctx *c,
                         cic_diag *d);
/* Write NAME.dat and NAME.gp, render when c->gnuplot is set, check every
 * rendering, and rename the files into plots/. 0 or -1 with d set; on error
 * nothing of this figure is left in the work folder. */
int cic_plot_figure_finish(const cic_plot_ctx *c, cic_plot_figure *fg, cic_diag *d);
void cic_plot_figure_free(cic_plot_figure *fg);

/* ---- script helpers (plot_gp.c) ---- */
/* reset, missing data, line styles, border, tics and grid. */
void cic_plot_gp_begin(FILE *g, const cic_plot_ctx *c);
/* The title line: case and engine, and when the figure shows one point of
 * a sweep, which one. Split in two lines when it
 * is longer than the size's width; returns the line count. It opens a
 * multiplot: the figure ends with "unset multiplot". */
int cic_plot_gp_title(FILE *g, const cic_plot_ctx *c, const cic_plot_size *sz,
                      const char *engine, bool one_point);
/* The same with a subject after case and engine (what the figure shows,
 * NULL for none), broken at its spaces where the line would be too long
 * (at most 4 lines). */
int cic_plot_gp_title_what(FILE *g, const cic_plot_ctx *c, const cic_plot_size *sz,
                           const char *engine, const char *what, bool one_point);
/* Legend below the plot area: rows for n entries of at most maxlen
 * characters at this size; returns the row count (title line included).
 * cic_plot_gp_key goes after cic_plot_gp_panel (it uses the canvas height
 * that one sets). */
int cic_plot_key_rows(const cic_plot_size *sz, int n, int maxlen, bool has_title);
void cic_plot_gp_key(FILE *g, const cic_plot_size *sz, int n, int maxlen, const char *title);
/* Log axis over the decades 10^kmin..10^kmax, at most about nlabels of
 * them labelled. */
void cic_plot_gp_decades(FILE *g, char ax, int kmin, int kmax, int nlabels);
/* Log axis ('x' or 'y') over [lo, hi] with labels even on a narrow range;
 * returns e when the labels are mantissas of 10^e (the axis label says so),
 * else 0. */
int cic_plot_gp_log(FILE *g, char ax, double lo, double hi, bool labels);
/* Tics at the given x values (sorted); every k-th labelled so they fit
 * (none when labels is false: the upper of two stacked panels). */
void cic_plot_gp_xtics(FILE *g, const cic_plot_size *sz, double panel_in, const double *x,
                       int n, bool labels);
/* Margins of panel p of npanel (1 or 2): two panels are stacked at one
 * column (sharing x) and side by side at two; the title above, the legend
 * below (key_rows from cic_plot_key_rows). Returns the canvas height in
 * inches. */
double cic_plot_gp_panel(FILE *g, const cic_plot_size *sz, int p, int npanel, int title_lines,
                         int key_rows);
/* The same with xtic_in inches more below the plot area, for x tic labels
 * taller than one line (names written upwards, several lines). */
double cic_plot_gp_panel_ext(FILE *g, const cic_plot_size *sz, int p, int npanel,
                             int title_lines, int key_rows, double xtic_in);
/* The y label of the current panel, text a gnuplot single-quoted string's
 * contents (enhanced). */
void cic_plot_gp_ylabel(FILE *g, const char *text);
/* Width of one panel's plot area in inches. */
double cic_plot_panel_width(const cic_plot_size *sz, int npanel);
/* Style number of plotting order k (0 = "none", k = transform k-1). */
int cic_plot_style(int k);
void cic_plot_gp_quote(FILE *f, const char *s);
void cic_plot_dat_name(FILE *f, const char *s);
void cic_plot_dat_num(FILE *f, double v);

/* ---- data helpers (plot_gp.c) ---- */
double cic_plot_jnum(const json_t *v);
double cic_plot_jget(const json_t *o, const char *k1, const char *k2, const char *k3);
const char *cic_plot_jstr(const json_t *o, const char *k);
bool cic_plot_streq(const char *a, const char *b);
/* "d_model = 16, seed = 1" for a params object (empty when NULL). */
void cic_plot_params_text(char *out, size_t cap, const json_t *params);

#endif
