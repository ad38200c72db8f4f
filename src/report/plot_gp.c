/* SPDX-License-Identifier: MIT */
/* plot_gp.c: the gnuplot side of the plots (plot_int.h): paper sizes, the
 * palette, titles, legends and panel layout, the scripts, and rendering.
 *
 * Sizes: every figure is drawn for one column (3.5 in wide, 7 pt text) and
 * for two (7 in, 8 pt), in PNG (300 dpi), SVG and PDF, all at the same
 * physical scale: fonts in points at the printed size, line widths in
 * points (pdfcairo draws lw 1 as 0.5 pt unless told otherwise, and its
 * default fontscale halves the font, so both are set explicitly). A NAME.gp
 * script holds one terminal block per file, so it stands alone without
 * gnuplot macros or loops and can be edited to restyle.
 *
 * Palette: Okabe-Ito (safe for the common colour-vision deficiencies),
 * black for "none" and one colour and point type per transform, by its
 * index in case.transforms, the same in every figure of a run.
 *
 * Rendering happens in a private work folder inside plots/ (see plot.c):
 * gnuplot writes there, every rendering is checked, and only then is each
 * file renamed into plots/, so a concurrent run drawing into the same
 * folder can neither remove a file before it is checked nor see one half
 * written. */
#include "plot_int.h"

#include "../base/json_type.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

const cic_plot_size cic_plot_sizes[CIC_PLOT_NSIZE] = {
    {"", "single column, 3.5 in wide", 3.5, 7.0, false},
    {"-wide", "double column, 7 in wide", 7.0, 8.0, true},
};

const char *const cic_plot_ext[CIC_PLOT_NFMT] = {"png", "svg", "pdf"};

#define DPI 300

/* Okabe-Ito without black (kept for "none"); yellow last, it is the
 * faintest on white. Point types: filled square, triangle, diamond,
 * inverted triangle, pentagon, then open ones. Past 7 transforms the
 * colours repeat with another dash type. */
#define NPAL 7
static const char *const PALETTE[NPAL] = {
    "#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#F0E442",
};
#define NPT 8
static const int POINTS[NPT] = {5, 9, 13, 11, 15, 4, 8, 12};

double cic_plot_char_in(const cic_plot_size *sz)
{
    return sz->font_pt * 0.66 / 72.0;
}

double cic_plot_line_in(const cic_plot_size *sz)
{
    return sz->font_pt * 1.25 / 72.0;
}

/* ---- small helpers ---- */

double cic_plot_jnum(const json_t *v)
{
    return json_is_number(v) ? json_number_value(v) : NAN;
}

/* obj[k1][k2]... as a number (NaN when any step is missing or null). */
double cic_plot_jget(const json_t *o, const char *k1, const char *k2, const char *k3)
{
    const json_t *v = json_is_object(o) ? json_object_get(o, k1) : NULL;
    if (k2)
        v = json_is_object(v) ? json_object_get(v, k2) : NULL;
    if (k3)
        v = json_is_object(v) ? json_object_get(v, k3) : NULL;
    return cic_plot_jnum(v);
}

const char *cic_plot_jstr(const json_t *o, const char *k)
{
    const json_t *v = json_is_object(o) ? json_object_get(o, k) : NULL;
    return json_is_string(v) ? json_string_value(v) : NULL;
}

bool cic_plot_streq(const char *a, const char *b)
{
    return a && b && strcmp(a, b) == 0;
}

/* An array whose entries are numbers or null (non-finite values are
 * written as null). */
int cic_plot_check_nums(const char *file, const char *key, const json_t *a, cic_diag *d)
{
    size_t i;
    json_t *v;
    if (!json_is_array(a)) {
        cic_diag_set(d, file, 0, 0, "key '%s': must be an array of numbers, found %s", key,
                     cic_json_type_name(a));
        return -1;
    }
    json_array_foreach(a, i, v) {
        if (!json_is_number(v) && !json_is_null(v)) {
            cic_diag_set(d, file, 0, 0, "key '%s[%zu]': must be a number or null, found %s",
                         key, i, cic_json_type_name(v));
            return -1;
        }
    }
    return 0;
}

/* Write s as a gnuplot single-quoted string (' doubled, control bytes
 * dropped); printed noenhanced by the callers, so "_" stays an underscore. */
void cic_plot_gp_quote(FILE *f, const char *s)
{
    fputc('\'', f);
    for (; s && *s; s++) {
        unsigned char ch = (unsigned char)*s;
        if (ch < 0x20 || ch == 0x7f)
            continue;
        if (ch == '\'')
            fputc('\'', f);
        fputc(ch, f);
    }
    fputc('\'', f);
}

/* A name safe inside a .dat comment (one line, no control bytes). */
void cic_plot_dat_name(FILE *f, const char *s)
{
    for (; s && *s; s++) {
        unsigned char ch = (unsigned char)*s;
        fputc(ch < 0x20 || ch == 0x7f ? '?' : ch, f);
    }
}

/* %.17g reads back equal to the JSON number; non-finite is NaN, which the
 * scripts treat as missing. */
void cic_plot_dat_num(FILE *f, double v)
{
    if (isfinite(v))
        fprintf(f, " %.17g", v);
    else
        fputs(" NaN", f);
}

void cic_plot_params_text(char *out, size_t cap, const json_t *params)
{
    const char *k;
    json_t *v;
    size_t len = 0;

    out[0] = '\0';
    if (!json_is_object(params))
        return;
    json_object_foreach((json_t *)params, k, v) {
        char *t = json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT);
        int w = snprintf(out + len, cap - len, "%s%s = %s", len ? ", " : "", k, t ? t : "?");
        free(t);
        if (w < 0 || (size_t)w >= cap - len) {
            out[len] = '\0';
            return;
        }
        len += (size_t)w;
    }
}

int cic_plot_style(int k)
{
    return k == 0 ? 1 : 1 + k;
}

/* ---- the script's parts ---- */

void cic_plot_gp_begin(FILE *g, const cic_plot_ctx *c)
{
    /* LW in points; PS relative to the font (about 5 pt across at 0.5) */
    fputs("reset\nset datafile missing 'NaN'\nLW = 1.1; PS = 0.5\n"
          "set style line 1 lc rgb '#000000' lw LW pt 7 ps PS\n",
          g);
    for (int i = 0; i < c->ntr; i++)
        fprintf(g, "set style line %d lc rgb '%s' lw LW pt %d ps PS dt %d\n", 2 + i,
                PALETTE[i % NPAL], POINTS[i % NPT], 1 + (i / NPAL) % 4);
    fputs("set border lw 0.6\nset tics scale 0.6 front\nset bars small\n"
          "set grid xtics ytics lw 0.4 lc rgb '#d9d9d9'\n",
          g);
}

/* The title's pieces, in order: the head (case and engine) and the point
 * of a sweep, each kept whole, and between them the subject, which may
 * break at its spaces. Pieces are joined by " · " while the line stays
 * within `across` characters (bytes, as the width estimate counts them). */
typedef struct {
    const char *s;
    size_t n;
    bool piece; /* opens a piece: " · " before it, else " " */
} title_tok;

#define TITLE_MAXTOK 64
#define TITLE_MAXLINES 4

int cic_plot_gp_title_what(FILE *g, const cic_plot_ctx *c, const cic_plot_size *sz,
                           const char *engine, const char *what, bool one_point)
{
    char head[512], pt[512], line[TITLE_MAXLINES][1100];
    title_tok tok[TITLE_MAXTOK];
    int ntok = 0, lines = 0;

    snprintf(head, sizeof head, "%s \xc2\xb7 %s", c->case_name ? c->case_name : "?",
             engine ? engine : "?");
    pt[0] = '\0';
    if (one_point && c->sweep) {
        char p[400];
        cic_plot_params_text(p, sizeof p, c->first_params);
        snprintf(pt, sizeof pt, "first point: %s", p[0] ? p : "?");
    }
    tok[ntok++] = (title_tok){head, strlen(head), true};
    bool first = true;
    for (const char *w = what; w && *w && ntok < TITLE_MAXTOK - 1;) {
        size_t n = strcspn(w, " ");
        if (n) {
            tok[ntok++] = (title_tok){w, n, first};
            first = false;
        }
        w += n;
        w += strspn(w, " ");
    }
    if (pt[0])
        tok[ntok++] = (title_tok){pt, strlen(pt), true};

    int across = (int)(sz->width_in / cic_plot_char_in(sz) * 0.9);
    size_t len = 0;
    for (int i = 0; i < ntok; i++) {
        size_t sep = tok[i].piece ? 3 : 1;
        bool fits = (int)(len + sep + tok[i].n) <= across;
        if (lines == 0 || (!fits && lines < TITLE_MAXLINES)) {
            line[lines][0] = '\0';
            len = 0;
            lines++;
        }
        char *l = line[lines - 1];
        size_t bl = strlen(l);
        if (bl)
            bl += (size_t)snprintf(l + bl, sizeof line[0] - bl, "%s",
                                   tok[i].piece ? " \xc2\xb7 " : " ");
        if (bl < sizeof line[0])
            snprintf(l + bl, sizeof line[0] - bl, "%.*s", (int)tok[i].n, tok[i].s);
        len += (len ? sep : 0) + tok[i].n;
    }
    /* a multiplot title for every figure, one panel or two: placed the same
     * way in both (a plain title sits higher and leaves the canvas) */
    fputs("set multiplot title ", g);
    /* a newline cannot go through gp_quote: put the lines together with
     * gnuplot's string concatenation */
    for (int i = 0; i < lines; i++) {
        if (i)
            fputs(".\"\\n\".", g);
        cic_plot_gp_quote(g, line[i]);
    }
    fputs(" noenhanced\n", g);
    return lines;
}

int cic_plot_gp_title(FILE *g, const cic_plot_ctx *c, const cic_plot_size *sz,
                      const char *engine, bool one_point)
{
    return cic_plot_gp_title_what(g, c, sz, engine, NULL, one_point);
}

/* Legend geometry. gnuplot sizes a key column from its own estimate of the
 * text width, which for the cairo terminals is wider than DejaVu Sans
 * really is; `width` takes that back (in character widths). */
static int key_cols(const cic_plot_size *sz, int n, int maxlen)
{
    int across = (int)(sz->width_in / cic_plot_char_in(sz) * 0.92);
    int cols = across / (maxlen + 7);
    if (cols > 4)
        cols = 4;
    if (cols > n)
        cols = n;
    return cols < 1 ? 1 : cols;
}

int cic_plot_key_rows(const cic_plot_size *sz, int n, int maxlen, bool has_title)
{
    int cols = key_cols(sz, n, maxlen);
    return (n + cols - 1) / cols + (has_title ? 1 : 0);
}

void cic_plot_gp_key(FILE *g, const cic_plot_size *sz, int n, int maxlen, const char *title)
{
    int cols = key_cols(sz, n, maxlen);
    int rows = (n + cols - 1) / cols;
    if (cols == 1) {
        /* one column of long entries: from the left edge, where gnuplot's
         * estimate of their width cannot push them off the canvas */
        fprintf(g,
                "set key at screen %.4f, screen 0.012 left bottom vertical maxrows %d "
                "Left reverse samplen 2 spacing 1.0 width 0\n",
                0.08 / sz->width_in, rows < 1 ? 1 : rows);
    } else {
        fprintf(g,
                "set key at screen 0.5, screen 0.012 center bottom vertical maxrows %d "
                "Left reverse samplen 2 spacing 1.0 width %d\n",
                rows, -(int)lround(0.2 * maxlen));
    }
    /* the key's own title would widen the key to gnuplot's (generous)
     * estimate of the title's width and push the columns off the canvas:
     * a label just above the entries instead (rows about 1.2 lines) */
    if (title) {
        fprintf(g, "set label 91 ");
        cic_plot_gp_quote(g, title);
        fprintf(g, " at screen 0.5, screen 0.012 + %.4f / H_IN center front\n",
                (rows * 1.24 + 0.7) * cic_plot_line_in(sz));
    }
}

double cic_plot_panel_width(const cic_plot_size *sz, int npanel)
{
    double left = 0.72, right = 0.14;
    if (npanel == 2 && sz->wide)
        return (sz->width_in - 2 * (left + right)) / 2;
    return sz->width_in - left - right;
}

double cic_plot_gp_panel(FILE *g, const cic_plot_size *sz, int p, int npanel, int title_lines,
                         int key_rows)
{
    return cic_plot_gp_panel_ext(g, sz, p, npanel, title_lines, key_rows, 0);
}

double cic_plot_gp_panel_ext(FILE *g, const cic_plot_size *sz, int p, int npanel,
                             int title_lines, int key_rows, double xtic_in)
{
    double lh = cic_plot_line_in(sz);
    double left = 0.72, right = 0.14;
    double top = lh * (1.3 * title_lines + 1.2);
    /* x tic labels and the x label (about 4 lines in gnuplot's layout),
     * the legend rows (about 1.25 lines each), the bottom edge */
    double bottom = lh * (4.0 + 1.28 * key_rows) + 0.05 + (xtic_in > 0 ? xtic_in : 0);
    double ph = sz->wide ? 2.1 : (npanel == 2 ? 1.6 : 2.0);
    bool stacked = npanel == 2 && !sz->wide;
    double gap = 0.12;
    double h = top + ph + bottom + (stacked ? ph + gap : 0);
    double l, r, t, b, box;

    if (stacked) {
        box = 0;
        l = left / sz->width_in;
        r = 1 - right / sz->width_in;
        t = 1 - (top + (p == 1 ? ph + gap : 0)) / h;
        b = t - ph / h;
    } else {
        double w = npanel == 2 ? sz->width_in / 2 : sz->width_in;
        box = p * w;
        l = (p * w + left) / sz->width_in;
        r = ((p + 1) * w - right) / sz->width_in;
        t = 1 - top / h;
        b = bottom / h;
    }
    /* YL: where the y label goes (cic_plot_gp_ylabel); gnuplot would place
     * it by its estimate of the tic label width, which for labels such as
     * 5x10^-7 is so wide that the label leaves the canvas */
    fprintf(g,
            "set lmargin at screen %.4f\nset rmargin at screen %.4f\n"
            "set tmargin at screen %.4f\nset bmargin at screen %.4f\nYL = %.4f; H_IN = %.4f\n",
            l, r, t, b, (box + 0.1) / sz->width_in, h);
    return h;
}

void cic_plot_gp_ylabel(FILE *g, const char *text)
{
    fprintf(g, "unset ylabel\nset label 90 '%s' at screen YL, graph 0.5 center rotate by 90\n",
            text);
}

/* Tics at the axis values, labelled every k-th so that labels of about
 * maxlen characters do not touch across panel_in inches. */
void cic_plot_gp_xtics(FILE *g, const cic_plot_size *sz, double panel_in, const double *x,
                       int n, bool labels)
{
    int maxlen = 1;
    for (int i = 0; i < n; i++) {
        char t[64];
        int k = snprintf(t, sizeof t, "%g", x[i]);
        if (k > maxlen)
            maxlen = k;
    }
    int fit = (int)(panel_in / (cic_plot_char_in(sz) * (maxlen + 2.5)));
    int step = fit >= n || fit < 1 ? 1 : (n + fit - 1) / fit;
    fputs("set xtics (", g);
    for (int i = 0, m = 0; i < n; i++)
        if (i % step == 0) {
            if (labels)
                fprintf(g, "%s'%g' %.17g", m++ ? ", " : "", x[i], x[i]);
            else
                fprintf(g, "%s'' %.17g", m++ ? ", " : "", x[i]);
        }
    fputs(")\n", g);
    if (step > 1) {
        /* unlabelled tics in between */
        fputs("set xtics add (", g);
        for (int i = 0, m = 0; i < n; i++)
            if (i % step)
                fprintf(g, "%s'' %.17g", m++ ? ", " : "", x[i]);
        fputs(")\n", g);
    }
}

void cic_plot_gp_decades(FILE *g, char ax, int kmin, int kmax, int nlabels)
{
    static const int NICE[6] = {1, 2, 5, 10, 20, 50};
    int step = 100;
    for (int i = 0; i < 6; i++)
        if ((kmax - kmin) / NICE[i] + 1 <= nlabels) {
            step = NICE[i];
            break;
        }
    fprintf(g, "set %crange [1e%d:1e%d]\nset format %c '10^{%%L}'\n", ax, kmin, kmax, ax);
    if (step == 1) {
        fprintf(g, "set %ctics 10\nset m%ctics 10\n", ax, ax);
        return;
    }
    /* an explicit list, labelled at multiples of step: gnuplot 5.4 does
     * not return from a log axis whose tic step is 1e10 or more; decades
     * in between get unlabelled tics */
    fprintf(g, "set %ctics (", ax);
    for (int k = kmin, m = 0; k <= kmax; k++)
        if (k % step == 0)
            fprintf(g, "%s1e%d", m++ ? ", " : "", k);
    fprintf(g, ")\nset %ctics add (", ax);
    for (int k = kmin, m = 0; k <= kmax; k++)
        if (k % step)
            fprintf(g, "%s'' 1e%d 1", m++ ? ", " : "", k);
    fprintf(g, ")\nunset m%ctics\n", ax);
}

/* A log axis ('x' or 'y') over [lo, hi] (the positive data, error bars
 * included): whole decades when the data spans many, else the range itself
 * with tics at 1, 2, 5 x 10^k (gnuplot labels only decades on a log axis,
 * so a narrow range would have no labels at all). Labels of a narrow range
 * far from 1 are mantissas of a common power of ten, returned for the axis
 * label (0 when there is none), since 5x10^-7 beside every tic is wide
 * enough to crowd the label out at one column. Without labels (the upper
 * of two stacked panels) the tics stay and the labels go. */
int cic_plot_gp_log(FILE *g, char ax, double lo, double hi, bool labels)
{
    static const double M125[3] = {1, 2, 5};
    double tv[64];
    int n = 0;

    fprintf(g, "set logscale %c\n", ax);
    if (!(hi > 0) || !isfinite(lo)) {
        fprintf(g, "set %crange [1e-12:1]\nset format %c '%s'\nset %ctics autofreq\n", ax, ax,
                labels ? "10^{%L}" : "", ax);
        return 0;
    }
    if (hi / lo >= 30) {
        /* whole decades around the data, a label every decade or two */
        int kmin = (int)floor(log10(lo)), kmax = (int)ceil(log10(hi));
        /* keep points and bars off the frame */
        if (lo < 1.2 * pow(10, kmin))
            kmin--;
        if (hi > pow(10, kmax) / 1.2)
            kmax++;
        cic_plot_gp_decades(g, ax, kmin, kmax, 6);
        if (!labels)
            fprintf(g, "set format %c ''\n", ax);
        return 0;
    }
    double a = lo / 1.15, b = hi * 1.15;
    int kmin = (int)floor(log10(a)), kmax = (int)ceil(log10(b));
    /* 1-2-5 unless that gives fewer than 3 tics, then 1..9 */
    for (int pass = 0; pass < 2; pass++) {
        n = 0;
        for (int k = kmin; k <= kmax; k++)
            for (int m = 0; m < (pass == 0 ? 3 : 9); m++) {
                double t = (pass == 0 ? M125[m] : m + 1) * pow(10, k);
                if (t >= a && t <= b && n < 64)
                    tv[n++] = t;
            }
        if (n >= 3)
            break;
    }
    if (n < 3) {
        /* less than a factor 10 with few 1..9 multiples inside: evenly
         * spaced tics at a nice step (1, 2, 5 x 10^k), 3 to 6 of them */
        static const double NICE[3] = {1, 2, 5};
        double step = pow(10, floor(log10(b - a)) - 1);
        for (int i = 0; i < 9; i++) {
            double st = NICE[i % 3] * step * pow(10, i / 3);
            if (floor(b / st) - ceil(a / st) + 1 <= 6) {
                n = 0;
                for (double t = ceil(a / st) * st; t <= b && n < 64; t += st)
                    tv[n++] = t;
                break;
            }
        }
    }
    /* of two tics closer than a twelfth of the range (0.9 next to 1) keep
     * one, the power of ten when there is one */
    int kept = 0;
    for (int i = 0; i < n; i++) {
        if (kept == 0 || log10(tv[i] / tv[kept - 1]) >= log10(b / a) / 12)
            tv[kept++] = tv[i];
        else if (fabs(log10(tv[i]) - round(log10(tv[i]))) < 1e-9)
            tv[kept - 1] = tv[i];
    }
    n = kept;
    int e = (int)floor(log10(b));
    if (e > -3 && e < 4)
        e = 0;
    fprintf(g, "set %crange [%.6g:%.6g]\nset %ctics (", ax, a, b, ax);
    for (int i = 0; i < n; i++)
        if (labels)
            fprintf(g, "%s'%.4g' %.6g", i ? ", " : "", tv[i] / pow(10, e), tv[i]);
        else
            fprintf(g, "%s'' %.6g", i ? ", " : "", tv[i]);
    fputs(")\n", g);
    return e;
}

/* ---- buffers and figures ---- */

static int buf_open(cic_plot_buf *m)
{
    m->buf = NULL;
    m->len = 0;
    m->f = open_memstream(&m->buf, &m->len);
    return m->f ? 0 : -1;
}

static int buf_close(cic_plot_buf *m)
{
    int rc = 0;
    if (m->f && fclose(m->f) != 0)
        rc = -1;
    m->f = NULL;
    return rc;
}

static void buf_free(cic_plot_buf *m)
{
    if (m->f)
        fclose(m->f);
    free(m->buf);
    m->buf = NULL;
    m->f = NULL;
}

int cic_plot_figure_open(cic_plot_figure *fg, const char *name, const cic_plot_ctx *c,
                         cic_diag *d)
{
    memset(fg, 0, sizeof *fg);
    fg->name = name;
    bool ok = buf_open(&fg->dat) == 0;
    for (int s = 0; s < CIC_PLOT_NSIZE; s++)
        ok = ok && buf_open(&fg->body[s]) == 0;
    if (!ok) {
        cic_plot_figure_free(fg);
        cic_diag_set(d, c->plots, 0, 0, "out of memory");
        return -1;
    }
    return 0;
}

void cic_plot_figure_free(cic_plot_figure *fg)
{
    buf_free(&fg->dat);
    for (int s = 0; s < CIC_PLOT_NSIZE; s++)
        buf_free(&fg->body[s]);
}

/* ---- rendering ---- */

/* Run `gnuplot gp` inside dir; 0, or -1 with d set (exit status and the
 * last part of stderr). stdin and stdout are /dev/null, DISPLAY and GNUTERM
 * are removed so no window can open. */
static int run_gnuplot(const char *gnuplot, const char *dir, const char *gp, cic_diag *d)
{
    int fds[2];
    char tail[1024];
    size_t tlen = 0;
    int status = 0;
    size_t nenv = 0;
    char **envp;

    while (environ && environ[nenv])
        nenv++;
    envp = cic_calloc(nenv + 1, sizeof *envp);
    if (!envp) {
        cic_diag_set(d, dir, 0, 0, "out of memory");
        return -1;
    }
    for (size_t i = 0, j = 0; i < nenv; i++)
        if (strncmp(environ[i], "DISPLAY=", 8) != 0 && strncmp(environ[i], "GNUTERM=", 8) != 0)
            envp[j++] = environ[i];

    if (pipe(fds) != 0) {
        cic_diag_set(d, dir, 0, 0, "pipe: %s", strerror(errno));
        free(envp);
        return -1;
    }
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        cic_diag_set(d, dir, 0, 0, "fork: %s", strerror(errno));
        close(fds[0]);
        close(fds[1]);
        free(envp);
        return -1;
    }
    if (pid == 0) {
        int nul = open("/dev/null", O_RDWR);
        if (nul < 0 || chdir(dir) != 0)
            _exit(126);
        dup2(nul, 0);
        dup2(nul, 1);
        dup2(fds[1], 2);
        close(fds[0]);
        close(fds[1]);
        close(nul);
        char *argv[] = {(char *)"gnuplot", (char *)gp, NULL};
        execve(gnuplot, argv, envp);
        _exit(127);
    }
    close(fds[1]);
    for (;;) {
        char buf[512];
        ssize_t k = read(fds[0], buf, sizeof buf);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            break;
        /* keep the last sizeof tail - 1 bytes */
        for (ssize_t i = 0; i < k; i++) {
            if (tlen == sizeof tail - 1) {
                memmove(tail, tail + 1, tlen - 1);
                tlen--;
            }
            tail[tlen++] = buf[i];
        }
    }
    tail[tlen] = '\0';
    close(fds[0]);
    free(envp);
    while (waitpid(pid, &status, 0) < 0) {
        if (errno != EINTR) {
            cic_diag_set(d, dir, 0, 0, "waitpid: %s", strerror(errno));
            return -1;
        }
    }
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
        return 0;
    while (tlen > 0 && (tail[tlen - 1] == '\n' || tail[tlen - 1] == ' '))
        tail[--tlen] = '\0';
    if (WIFEXITED(status))
        cic_diag_set(d, dir, 0, 0, "gnuplot %s failed (exit status %d): %s", gp,
                     WEXITSTATUS(status), tlen ? tail : "(no stderr)");
    else
        cic_diag_set(d, dir, 0, 0, "gnuplot %s killed by signal %d: %s", gp,
                     WIFSIGNALED(status) ? WTERMSIG(status) : 0, tlen ? tail : "(no stderr)");
    return -1;
}

/* The terminal line of format f at size sz, canvas height h inches. */
static void gp_terminal(FILE *g, int f, const cic_plot_size *sz, double h)
{
    double w = sz->width_in;
    if (f == 0) {
        double k = DPI / 72.0; /* png: pixels per point */
        fprintf(g,
                "set terminal pngcairo enhanced color rounded background rgb 'white' "
                "size %d,%d font 'Sans,%g' fontscale %.6g linewidth %.6g pointscale %.6g\n",
                (int)lround(w * DPI), (int)lround(h * DPI), sz->font_pt, k, k, k);
    } else if (f == 1) {
        /* svg user units are points here: the same proportions as the pdf */
        fprintf(g,
                "set terminal svg enhanced rounded background rgb 'white' size %d,%d "
                "font 'Sans,%g' linewidth 1\n",
                (int)lround(w * 72), (int)lround(h * 72), sz->font_pt);
    } else {
        fprintf(g,
                "set terminal pdfcairo enhanced color rounded background rgb 'white' "
                "size %.3fin,%.3fin font 'Sans,%g' fontscale 1 linewidth 2\n",
                w, h, sz->font_pt);
    }
}

/* The file names of a figure: .dat, .gp, then each size's renderings. */
#define NFILES (2 + CIC_PLOT_NSIZE * CIC_PLOT_NFMT)

static void file_name(char *out, size_t cap, const char *name, int k)
{
    if (k == 0)
        snprintf(out, cap, "%s.dat", name);
    else if (k == 1)
        snprintf(out, cap, "%s.gp", name);
    else
        snprintf(out, cap, "%s%s.%s", name, cic_plot_sizes[(k - 2) / CIC_PLOT_NFMT].suffix,
                 cic_plot_ext[(k - 2) % CIC_PLOT_NFMT]);
}

static int write_file(const char *path, const char *buf, size_t len, cic_diag *d)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    size_t done = 0;
    if (fd < 0) {
        cic_diag_set(d, path, 0, 0, "cannot create: %s", strerror(errno));
        return -1;
    }
    while (done < len) {
        ssize_t k = write(fd, buf + done, len - done);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0) {
            cic_diag_set(d, path, 0, 0, "write failed: %s", k < 0 ? strerror(errno) : "no space");
            close(fd);
            return -1;
        }
        done += (size_t)k;
    }
    if (fsync(fd) != 0 || close(fd) != 0) {
        cic_diag_set(d, path, 0, 0, "write failed: %s", strerror(errno));
        return -1;
    }
    return 0;
}

/* A rendering exists, is not empty, and reaches the disk before it is
 * renamed into place. */
static int check_rendered(const char *path, const char *name, const char *file, cic_diag *d)
{
    struct stat st;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0 || fstat(fd, &st) != 0 || st.st_size == 0) {
        if (fd >= 0)
            close(fd);
        cic_diag_set(d, path, 0, 0, "gnuplot %s.gp exited 0 but wrote no %s", name, file);
        return -1;
    }
    int rc = fsync(fd);
    close(fd);
    if (rc != 0) {
        cic_diag_set(d, path, 0, 0, "fsync: %s", strerror(errno));
        return -1;
    }
    return 0;
}

int cic_plot_figure_finish(const cic_plot_ctx *c, cic_plot_figure *fg, cic_diag *d)
{
    char path[4400], dst[4400], fname[300];
    cic_plot_buf gp = {0};
    int rc = -1;
    int nfiles = c->gnuplot ? NFILES : 2;

    bool ok = buf_close(&fg->dat) == 0;
    for (int s = 0; s < CIC_PLOT_NSIZE; s++)
        ok = buf_close(&fg->body[s]) == 0 && ok;
    if (!ok || buf_open(&gp) != 0) {
        cic_diag_set(d, c->plots, 0, 0, "out of memory building plot %s", fg->name);
        return -1;
    }
    fprintf(gp.f, "# %s.gp: written by cicheck %s; run from this folder: gnuplot %s.gp\n",
            fg->name, CIC_VERSION, fg->name);
    fprintf(gp.f, "# Reads %s.dat and writes, for a paper:\n", fg->name);
    for (int s = 0; s < CIC_PLOT_NSIZE; s++)
        fprintf(gp.f, "#   %s%s.png, .svg, .pdf: %s, text %g pt (PNG at %d dpi)\n", fg->name,
                cic_plot_sizes[s].suffix, cic_plot_sizes[s].what, cic_plot_sizes[s].font_pt, DPI);
    fputs("# Colours: Okabe-Ito (colour-blind safe); each transform keeps its colour and\n"
          "# point type in every figure of the run, \"none\" is black.\nset encoding utf8\n",
          gp.f);
    for (int s = 0; s < CIC_PLOT_NSIZE; s++) {
        const cic_plot_size *sz = &cic_plot_sizes[s];
        double h = fg->height_in[s] > 0 ? fg->height_in[s] : 2.6;
        fprintf(gp.f, "\n# ---- %s: %.2f x %.2f in\n", sz->what, sz->width_in, h);
        for (int f = 0; f < CIC_PLOT_NFMT; f++) {
            gp_terminal(gp.f, f, sz, h);
            fprintf(gp.f, "set output '%s%s.%s'\n", fg->name, sz->suffix, cic_plot_ext[f]);
            fwrite(fg->body[s].buf, 1, fg->body[s].len, gp.f);
            fputs("unset output\n", gp.f);
        }
    }
    if (buf_close(&gp) != 0) {
        cic_diag_set(d, c->plots, 0, 0, "out of memory building plot %s", fg->name);
        goto cleanup;
    }
    file_name(fname, sizeof fname, fg->name, 0);
    snprintf(path, sizeof path, "%s/%s", c->work, fname);
    if (write_file(path, fg->dat.buf, fg->dat.len, d) != 0)
        goto cleanup;
    file_name(fname, sizeof fname, fg->name, 1);
    snprintf(path, sizeof path, "%s/%s", c->work, fname);
    if (write_file(path, gp.buf, gp.len, d) != 0)
        goto cleanup;
    if (c->gnuplot) {
        if (run_gnuplot(c->gnuplot, c->work, fname, d) != 0)
            goto cleanup;
        for (int k = 2; k < nfiles; k++) {
            file_name(fname, sizeof fname, fg->name, k);
            snprintf(path, sizeof path, "%s/%s", c->work, fname);
            if (check_rendered(path, fg->name, fname, d) != 0)
                goto cleanup;
        }
    }
    /* every file is complete: each rename replaces one file atomically */
    for (int k = 0; k < nfiles; k++) {
        file_name(fname, sizeof fname, fg->name, k);
        snprintf(path, sizeof path, "%s/%s", c->work, fname);
        snprintf(dst, sizeof dst, "%s/%s", c->plots, fname);
        if (rename(path, dst) != 0) {
            cic_diag_set(d, dst, 0, 0, "cannot move the finished plot into place: %s",
                         strerror(errno));
            goto cleanup;
        }
    }
    rc = 0;
cleanup:
    if (rc != 0)
        for (int k = 0; k < NFILES; k++) {
            file_name(fname, sizeof fname, fg->name, k);
            snprintf(path, sizeof path, "%s/%s", c->work, fname);
            unlink(path);
        }
    buf_free(&gp);
    return rc;
}
