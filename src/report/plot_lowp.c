/* SPDX-License-Identifier: MIT */
/* plot_lowp.c: the figures of a case with low-precision engines
 * ([[engines.lowp]]: report.json's "lowp" section and its result rows with
 * "sqnr_db"), from one report (a single run, or the first point of a sweep
 * that has one):
 *   lowp_sqnr      the block output's SQNR against the MPFR truth, as
 *                  grouped bars: a group per engine, a bar per transform;
 *   lowp_kurtosis  the Pearson kurtosis of every quantized linear's input
 *                  (and weight), one x position per linear in graph order,
 *                  one point set per transform, on a log axis with the
 *                  Gaussian's 3 dashed: what a rotation is meant to bring
 *                  down before the activations are quantized;
 *   lowp_chanmax   the per-channel max |x| of the input of one linear (the
 *                  one whose input has the highest kurtosis in the original
 *                  model), before and after each transform: the outlier
 *                  channels that set the quantization scale, and how a
 *                  rotation spreads them.
 * Also the check of the section's shape (cic_plot_lowp_check), so that a
 * hand-edited or truncated report is refused naming the key.
 *
 * The inputs were tapped from one f32 engine's run (f32-openblas when the
 * case enables it, else f32-fixed-order: the engine plot.c picks). */
#include "plot_int.h"
#include "../base/json_type.h"

#include <math.h>
#include <string.h>

#define LOWP_MAXSITES CIC_PLOT_MAXROWS /* linears on the kurtosis figure */
#define LOWP_MAXENG 64                 /* engines on the SQNR figure */

/* ---- input check ---- */

static int bad_key(cic_diag *d, const char *file, const char *pre, const char *key,
                   const char *want, const json_t *v)
{
    cic_diag_set(d, file, 0, 0, "key '%slowp%s': must be %s, found %s", pre, key, want,
                 cic_json_type_name(v));
    return -1;
}

/* o[k] a string, or (optional) missing. */
static int check_str(const char *file, const char *pre, const char *at, const json_t *o,
                     const char *k, bool optional, cic_diag *d)
{
    char key[160];
    json_t *v = json_object_get(o, k);
    if (json_is_string(v) || (optional && !v))
        return 0;
    snprintf(key, sizeof key, "%s.%s", at, k);
    return bad_key(d, file, pre, key, "a string", v);
}

int cic_plot_lowp_check(const char *file, const char *pre, const json_t *rep, cic_diag *d)
{
    char at[160], key[256];
    size_t i;
    json_t *v, *r;
    json_t *lowp = json_object_get(rep, "lowp");

    json_array_foreach(json_object_get(rep, "results"), i, r) {
        json_t *s = json_object_get(r, "sqnr_db");
        if (s && !json_is_number(s) && !json_is_null(s)) {
            cic_diag_set(d, file, 0, 0, "key '%sresults[%zu].sqnr_db': must be a number or null "
                                        "(infinite), found %s",
                         pre, i, cic_json_type_name(s));
            return -1;
        }
    }
    if (!lowp || json_is_null(lowp))
        return 0;
    if (!json_is_object(lowp))
        return bad_key(d, file, pre, "", "an object (the low-precision engines)", lowp);
    json_t *eng = json_object_get(lowp, "engines");
    if (!json_is_array(eng))
        return bad_key(d, file, pre, ".engines", "an array of engines", eng);
    json_array_foreach(eng, i, v) {
        static const char *const opt[3] = {"weights", "activations", "compute"};
        snprintf(at, sizeof at, ".engines[%zu]", i);
        if (!json_is_object(v))
            return bad_key(d, file, pre, at, "an object", v);
        if (check_str(file, pre, at, v, "name", false, d) != 0)
            return -1;
        for (int k = 0; k < 3; k++)
            if (check_str(file, pre, at, v, opt[k], true, d) != 0)
                return -1;
    }
    json_t *out = json_object_get(lowp, "outliers");
    if (!json_is_array(out))
        return bad_key(d, file, pre, ".outliers", "an array of outlier statistics", out);
    json_array_foreach(out, i, v) {
        static const char *const skeys[3] = {"transform", "tensor", "of"};
        snprintf(at, sizeof at, ".outliers[%zu]", i);
        if (!json_is_object(v))
            return bad_key(d, file, pre, at, "an object", v);
        for (int k = 0; k < 3; k++)
            if (check_str(file, pre, at, v, skeys[k], false, d) != 0)
                return -1;
        const char *of = cic_plot_jstr(v, "of");
        if (strcmp(of, "input") != 0 && strcmp(of, "weight") != 0) {
            cic_diag_set(d, file, 0, 0, "key '%slowp%s.of': must be \"input\" or \"weight\", "
                                        "found \"%s\"",
                         pre, at, of);
            return -1;
        }
        json_t *k = json_object_get(v, "kurtosis");
        if (!json_is_number(k) && !json_is_null(k)) {
            snprintf(key, sizeof key, "%s.kurtosis", at);
            return bad_key(d, file, pre, key, "a number or null", k);
        }
        snprintf(key, sizeof key, "%slowp%s.chan_max", pre, at);
        if (cic_plot_check_nums(file, key, json_object_get(v, "chan_max"), d) != 0)
            return -1;
    }
    return 0;
}

/* ---- shared ---- */

static json_t *lowp_of(const cic_plot_ctx *c)
{
    json_t *l = json_object_get(c->first, "lowp");
    return json_is_object(l) ? l : NULL;
}

/* The outlier row of (transform, tensor, input or weight), or NULL. */
static json_t *outlier_row(json_t *lowp, const char *tr, const char *tensor, bool weight)
{
    size_t i;
    json_t *o;
    json_array_foreach(json_object_get(lowp, "outliers"), i, o) {
        if (cic_plot_streq(cic_plot_jstr(o, "transform"), tr) &&
            cic_plot_streq(cic_plot_jstr(o, "tensor"), tensor) &&
            cic_plot_streq(cic_plot_jstr(o, "of"), weight ? "weight" : "input"))
            return o;
    }
    return NULL;
}

/* Write s as a gnuplot double-quoted string in which "\n" breaks the
 * line (a tic label of several lines); printed noenhanced. */
static void gp_dquote(FILE *g, const char *s)
{
    fputc('"', g);
    for (; s && *s; s++) {
        unsigned char ch = (unsigned char)*s;
        if (ch == '\n')
            fputs("\\n", g);
        else if (ch == '"' || ch == '\\')
            fprintf(g, "\\%c", ch);
        else if (ch >= 0x20 && ch != 0x7f)
            fputc(ch, g);
    }
    fputc('"', g);
}

static const char *what_run(const cic_plot_ctx *c)
{
    return c->sweep ? "first point of the sweep" : "single run";
}

/* Category tics at 0..n-1 with the given labels: level when they fit
 * between neighbours, else written upwards and, when even that is too
 * tight, every step-th labelled (the others minor tics, without grid
 * lines). Returns the height the labels take beyond one line (for
 * cic_plot_gp_panel_ext), in inches; with write, the tics go to g (the
 * same tics without labels when labels is false: the upper of two
 * stacked panels). */
static double gp_name_tics(FILE *g, const cic_plot_size *sz, double panel_in,
                           const char *const *lab, int n, bool labels, bool write)
{
    int maxlen = 1;
    for (int i = 0; i < n; i++)
        if ((int)strlen(lab[i]) > maxlen)
            maxlen = (int)strlen(lab[i]);
    double space = panel_in / (n > 0 ? n : 1);
    bool level = (maxlen + 1.5) * cic_plot_char_in(sz) <= space;
    /* upright labels 1.25 lines apart, centre to centre */
    double need = 1.25 * cic_plot_line_in(sz);
    int step = level || need <= space ? 1 : (int)ceil(need / space);
    if (write) {
        if (!labels || level)
            fputs("set xtics noenhanced (", g);
        else
            fputs("set xtics noenhanced rotate by 90 right offset 0,-0.2 (", g);
        for (int i = 0; i < n; i++) {
            fputs(i ? ", " : "", g);
            if (labels && i % step == 0)
                gp_dquote(g, lab[i]);
            else
                fputs("''", g);
            fprintf(g, " %d%s", i, i % step ? " 1" : "");
        }
        fputs(")\n", g);
    }
    return level ? 0 : maxlen * cic_plot_char_in(sz) + 0.05 - cic_plot_line_in(sz);
}

/* ---- SQNR of the block output ---- */

typedef struct {
    int ne, nb;
    const char *ename[LOWP_MAXENG];
    char elabel[LOWP_MAXENG][200]; /* name, then the formats on lines below */
    int ord[CIC_PLOT_MAXTR + 1];   /* plotting order of each bar set */
    bool exact_any;
    double lo, hi;
    int maxlen;
} sqnr_fig;

/* The tic label of engine e: its name, then its weight and activation
 * formats (one line when they agree, none when they are the name). */
static void sqnr_label(char *out, size_t cap, const json_t *e)
{
    const char *n = cic_plot_jstr(e, "name"), *w = cic_plot_jstr(e, "weights");
    const char *a = cic_plot_jstr(e, "activations");
    if (!w || !a || (cic_plot_streq(w, n) && cic_plot_streq(a, n)))
        snprintf(out, cap, "%s", n);
    else if (cic_plot_streq(w, a))
        snprintf(out, cap, "%s\n%s", n, w);
    else
        snprintf(out, cap, "%s\n%s\n%s", n, w, a);
}

/* Lines and the longest line of a label. */
static int label_lines(const char *s, int *width)
{
    int lines = 1, w = 0;
    *width = 0;
    for (; *s; s++) {
        if (*s == '\n') {
            lines++;
            w = 0;
            continue;
        }
        if (++w > *width)
            *width = w;
    }
    return lines;
}

static void sqnr_body(FILE *g, const cic_plot_ctx *c, const cic_plot_size *sz,
                      const sqnr_fig *sf, cic_plot_figure *fg, int s)
{
    double pw = cic_plot_panel_width(sz, 1), space = pw / sf->ne;
    int lines = 1, width = 0;
    bool formats = true;
    for (int e = 0; e < sf->ne; e++) {
        int w, l = label_lines(sf->elabel[e], &w);
        lines = l > lines ? l : lines;
        width = w > width ? w : width;
    }
    /* the formats under the names only when they fit across a group */
    if ((width + 1) * cic_plot_char_in(sz) > space) {
        formats = false;
        lines = 1;
    }
    int krows = cic_plot_key_rows(sz, sf->nb, sf->maxlen, false);
    cic_plot_gp_begin(g, c);
    int tl = cic_plot_gp_title_what(g, c, sz, "low-precision engines",
                                    "block output SQNR against the MPFR truth", true);
    fg->height_in[s] = cic_plot_gp_panel_ext(g, sz, 0, 1, tl, krows,
                                             (lines - 1) * cic_plot_line_in(sz));
    double span = sf->hi - sf->lo > 1 ? sf->hi - sf->lo : 1;
    double ylo = sf->lo < 0 ? sf->lo - 0.06 * span : 0;
    double yhi = sf->hi + (sf->exact_any ? 0.16 : 0.06) * span;
    double w = 0.8 / sf->nb;
    fprintf(g,
            "set style fill solid 1.0 noborder\nset boxwidth %.6g absolute\n"
            "set xrange [-0.6:%g]\nset yrange [%.6g:%.6g]\nset grid noxtics\n"
            "set xlabel '%s' offset 0,%d\n",
            w * 0.88, sf->ne - 0.4, ylo, yhi,
            formats && lines > 1 ? "low-precision engine (weights, activations)"
                                 : "low-precision engine",
            1 - lines);
    cic_plot_gp_ylabel(g, "SQNR, dB (higher is better)");
    if (ylo < 0)
        fputs("set arrow 5 from graph 0, first 0 to graph 1, first 0 nohead lw 0.6 "
              "lc rgb '#888888' front\n",
              g);
    fputs("set xtics noenhanced scale 0 (", g);
    for (int e = 0; e < sf->ne; e++) {
        char one[200];
        const char *lab = sf->elabel[e];
        if (!formats) {
            snprintf(one, sizeof one, "%.*s", (int)strcspn(lab, "\n"), lab);
            lab = one;
        }
        fputs(e ? ", " : "", g);
        gp_dquote(g, lab);
        fprintf(g, " %d", e);
    }
    fputs(")\n", g);
    cic_plot_gp_key(g, sz, sf->nb, sf->maxlen, NULL);
    fputs("plot ", g);
    for (int b = 0; b < sf->nb; b++) {
        double off = (b - (sf->nb - 1) / 2.0) * w;
        fprintf(g, "%s'lowp_sqnr.dat' index %d using ($1%+.6g):2 with boxes ls %d title ",
                b ? ", \\\n     " : "", b, off, cic_plot_style(sf->ord[b]));
        cic_plot_gp_quote(g, cic_plot_order_name(c, sf->ord[b]));
        fputs(" noenhanced", g);
        /* an exact output (SQNR infinite) has no bar: an infinity sign at
         * the top instead */
        if (sf->exact_any)
            fprintf(g, ", \\\n     'lowp_sqnr.dat' index %d using ($1%+.6g):($3 > 0 ? %.6g : "
                       "1/0):('\xe2\x88\x9e') with labels tc ls %d notitle",
                    b, off, sf->hi + 0.08 * span, cic_plot_style(sf->ord[b]));
    }
    fputs("\nunset multiplot\n", g);
}

int cic_plot_lowp_sqnr(const cic_plot_ctx *c, cic_diag *d)
{
    json_t *lowp = lowp_of(c), *e;
    sqnr_fig sf;
    cic_plot_figure fg;
    size_t i;

    if (!lowp)
        return 0;
    memset(&sf, 0, sizeof sf);
    sf.lo = INFINITY;
    sf.hi = -INFINITY;
    sf.maxlen = 4;
    json_array_foreach(json_object_get(lowp, "engines"), i, e) {
        if (sf.ne == LOWP_MAXENG)
            break;
        sf.ename[sf.ne] = cic_plot_jstr(e, "name");
        sqnr_label(sf.elabel[sf.ne], sizeof sf.elabel[0], e);
        sf.ne++;
    }
    if (sf.ne == 0)
        return 0;
    if (cic_plot_figure_open(&fg, "lowp_sqnr", c, d) != 0)
        return -1;
    FILE *f = fg.dat.f;
    fprintf(f,
            "# lowp_sqnr: SQNR of the block output of each low-precision engine against the "
            "MPFR truth (the original model, engine %s at %g bits), %s\n"
            "# SQNR = 20 log10(||truth|| / ||truth - y||) over the whole output, in dB; higher "
            "is better; NaN: no row for this engine and transform\n",
            CIC_PLOT_MPFR,
            cic_plot_jget(json_object_get(c->first, "case"), "engines", "mpfr_prec", NULL),
            what_run(c));
    json_array_foreach(json_object_get(lowp, "engines"), i, e) {
        if ((int)i == sf.ne)
            break;
        fprintf(f, "# engine %zu: ", i);
        cic_plot_dat_name(f, sf.ename[i]);
        static const char *const keys[4] = {"weights", "activations", "compute", "weights_from"};
        for (int k = 0; k < 4; k++) {
            const char *v = cic_plot_jstr(e, keys[k]);
            if (!v)
                continue;
            fprintf(f, "%s%s ", k ? ", " : " (", keys[k]);
            cic_plot_dat_name(f, v);
        }
        fputs(cic_plot_jstr(e, "weights") ? ")\n" : "\n", f);
    }
    fputs("# columns: engine[index, as listed above]  sqnr[dB]  exact[1: the output equals the "
          "truth, SQNR infinite (sqnr_db null), drawn as an infinity sign; else 0]\n",
          f);
    for (int k = 0; k <= c->ntr; k++) {
        const char *tr = cic_plot_order_name(c, k);
        double v[LOWP_MAXENG];
        int ex[LOWP_MAXENG], any = 0;
        for (int j = 0; j < sf.ne; j++) {
            json_t *r = cic_plot_first_row(c, tr, sf.ename[j]);
            json_t *s = json_object_get(r, "sqnr_db");
            json_t *nf = json_object_get(json_object_get(r, "metrics"), "nonfinite");
            v[j] = cic_plot_jnum(s);
            /* null is an infinite SQNR (exact) only for a row without NaN or
             * Inf outputs; a row with them has no SQNR and no bar */
            ex[j] = s && json_is_null(s) && !(json_is_integer(nf) && json_integer_value(nf) > 0);
            any += s != NULL;
        }
        if (!any)
            continue;
        fputs(sf.nb ? "\n\n# transform: " : "# transform: ", f);
        cic_plot_dat_name(f, tr);
        fputc('\n', f);
        for (int j = 0; j < sf.ne; j++) {
            fprintf(f, "%d", j);
            cic_plot_dat_num(f, v[j]);
            fprintf(f, " %d\n", ex[j]);
            if (isfinite(v[j])) {
                sf.lo = fmin(sf.lo, v[j]);
                sf.hi = fmax(sf.hi, v[j]);
            }
            sf.exact_any = sf.exact_any || ex[j];
        }
        sf.ord[sf.nb++] = k;
        if ((int)strlen(tr) > sf.maxlen)
            sf.maxlen = (int)strlen(tr);
    }
    if (sf.nb == 0) {
        cic_plot_figure_free(&fg);
        return 0;
    }
    if (!isfinite(sf.hi)) {
        /* every output exact: only infinity signs */
        sf.lo = 0;
        sf.hi = 100;
    }
    for (int s = 0; s < CIC_PLOT_NSIZE; s++)
        sqnr_body(fg.body[s].f, c, &cic_plot_sizes[s], &sf, &fg, s);
    int rc = cic_plot_figure_finish(c, &fg, d) == 0 ? 1 : -1;
    cic_plot_figure_free(&fg);
    return rc;
}

/* ---- kurtosis of the linears' inputs and weights ---- */

/* The x label of a linear: its weight's name without ".weight", and in a
 * numbered layer ("layers.3.self_attn.q_proj") only the layer and the last
 * part ("3.q_proj"); full names in the .dat. */
static void site_label(char *out, size_t cap, const char *name, bool brief)
{
    size_t n = strlen(name);
    if (n > 7 && strcmp(name + n - 7, ".weight") == 0)
        n -= 7;
    snprintf(out, cap, "%.*s", (int)n, name);
    if (!brief)
        return;
    /* the first all-digit part after the first, with more after it */
    const char *p = strchr(out, '.'), *last = strrchr(out, '.');
    while (p && p < last) {
        const char *q = p + 1;
        size_t k = strspn(q, "0123456789");
        if (k > 0 && q[k] == '.') {
            /* "3." then the last part, moved down over what was between
             * (overlapping: memmove, terminator included) */
            memmove(out, q, k + 1);
            memmove(out + k + 1, last + 1, strlen(last + 1) + 1);
            return;
        }
        p = strchr(q, '.');
    }
}

typedef struct {
    int ns, nb;
    const char *tensor[LOWP_MAXSITES];
    char label[LOWP_MAXSITES][64];
    const char *lab[LOWP_MAXSITES];
    int ord[CIC_PLOT_MAXTR + 1];
    double lo[2], hi[2]; /* inputs, weights */
    bool panel[2];
    int maxlen;
    bool brief; /* labels are layer.name */
} kurt_fig;

/* The linears in the order the report lists them (the graph's, for the
 * original model first), each once. */
static void kurt_sites(json_t *lowp, kurt_fig *kf)
{
    size_t i;
    json_t *o;
    json_array_foreach(json_object_get(lowp, "outliers"), i, o) {
        const char *t = cic_plot_jstr(o, "tensor");
        int j = 0;
        while (j < kf->ns && strcmp(kf->tensor[j], t) != 0)
            j++;
        if (j == kf->ns && kf->ns < LOWP_MAXSITES)
            kf->tensor[kf->ns++] = t;
    }
    /* short labels when they stay unique */
    bool brief = true;
    for (int pass = 0; pass < 2; pass++) {
        for (int j = 0; j < kf->ns; j++) {
            site_label(kf->label[j], sizeof kf->label[j], kf->tensor[j], brief);
            kf->lab[j] = kf->label[j];
        }
        for (int j = 0; j < kf->ns && brief; j++)
            for (int k = 0; k < j && brief; k++)
                if (strcmp(kf->label[j], kf->label[k]) == 0)
                    brief = false;
        if (brief)
            break;
    }
    kf->brief = brief;
}

static void kurt_body(FILE *g, const cic_plot_ctx *c, const cic_plot_size *sz,
                      const kurt_fig *kf, cic_plot_figure *fg, int s)
{
    static const char *const YL[2] = {"kurtosis of the input", "kurtosis of the weight"};
    int np = kf->panel[0] + kf->panel[1];
    int krows = cic_plot_key_rows(sz, kf->nb + 1, kf->maxlen, false);
    double pw = cic_plot_panel_width(sz, np);
    double xin = gp_name_tics(g, sz, pw, kf->lab, kf->ns, true, false);
    double dodge = fmin(0.12, 0.6 / kf->nb);

    cic_plot_gp_begin(g, c);
    int tl = cic_plot_gp_title_what(
        g, c, sz, c->engine,
        "kurtosis (Pearson) of the quantized linears' inputs and weights", true);
    fputs("set key off\n", g);
    for (int p = 0, q = 0; p < 2; p++) {
        if (!kf->panel[p])
            continue;
        fg->height_in[s] = cic_plot_gp_panel_ext(g, sz, q, np, tl, krows, xin);
        bool xlab = q == np - 1 || sz->wide;
        fprintf(g, "set xrange [-0.6:%g]\n", kf->ns - 0.4);
        gp_name_tics(g, sz, pw, kf->lab, kf->ns, xlab, true);
        if (xlab)
            fprintf(g, "set xlabel '%s'\n",
                    kf->brief ? "linear (layer.name), graph order" : "linear, graph order");
        else
            fputs("unset xlabel\n", g);
        /* the Gaussian's 3 inside the range */
        double lo = fmin(kf->lo[p], 3), hi = fmax(kf->hi[p], 3);
        int e = cic_plot_gp_log(g, 'y', lo, hi, true);
        char yl[128];
        /* 3 labelled: the range holds it and is never so narrow and far
         * from 1 that labels are mantissas (e is then 0) */
        if (!e)
            fputs("set ytics add ('3' 3)\n", g);
        if (e)
            snprintf(yl, sizeof yl, "%s, \xc3\x97" "10^{%d}", YL[p], e);
        else
            snprintf(yl, sizeof yl, "%s", YL[p]);
        cic_plot_gp_ylabel(g, yl);
        if (q == np - 1) {
            fputs("set key on\n", g);
            cic_plot_gp_key(g, sz, kf->nb + 1, kf->maxlen, NULL);
        }
        fputs("plot ", g);
        for (int b = 0; b < kf->nb; b++) {
            double off = (b - (kf->nb - 1) / 2.0) * dodge;
            fprintf(g, "%s'lowp_kurtosis.dat' index %d using ($1%+.6g):%d with points ls %d "
                       "title ",
                    b ? ", \\\n     " : "", b, off, 2 + p, cic_plot_style(kf->ord[b]));
            cic_plot_gp_quote(g, cic_plot_order_name(c, kf->ord[b]));
            fputs(" noenhanced", g);
        }
        /* the Gaussian's 3 dashed, with its own legend entry */
        fputs(", \\\n     3 with lines dt 2 lw 0.8 lc rgb '#666666' title 'Gaussian (3)'\n", g);
        q++;
    }
    fputs("unset multiplot\n", g);
}

int cic_plot_lowp_kurtosis(const cic_plot_ctx *c, cic_diag *d)
{
    json_t *lowp = lowp_of(c);
    cic_plot_figure fg;
    kurt_fig *kf;
    int rc;

    if (!lowp || json_array_size(json_object_get(lowp, "outliers")) == 0)
        return 0;
    kf = cic_calloc(1, sizeof *kf);
    if (!kf) {
        cic_diag_set(d, c->plots, 0, 0, "out of memory");
        return -1;
    }
    kf->lo[0] = kf->lo[1] = INFINITY;
    kf->hi[0] = kf->hi[1] = -INFINITY;
    kf->maxlen = 12; /* "Gaussian (3)" */
    kurt_sites(lowp, kf);
    if (cic_plot_figure_open(&fg, "lowp_kurtosis", c, d) != 0) {
        free(kf);
        return -1;
    }
    FILE *f = fg.dat.f;
    fprintf(f,
            "# lowp_kurtosis: Pearson kurtosis m4 / m2^2 (not excess: 3 for a Gaussian, 1 for "
            "+-1) of each quantized linear's input (engine %s, all tokens and samples) and "
            "weight, before (transform none) and after each transform, %s\n"
            "# NaN: no statistic (undefined, or the linear is not in this model)\n",
            c->engine, what_run(c));
    for (int j = 0; j < kf->ns; j++) {
        fprintf(f, "# site %d: ", j);
        cic_plot_dat_name(f, kf->tensor[j]);
        fputs(" (x label ", f);
        cic_plot_dat_name(f, kf->label[j]);
        fputs(")\n", f);
    }
    fputs("# columns: site[index, as listed above]  input_kurtosis[-]  weight_kurtosis[-]\n", f);
    for (int k = 0; k <= c->ntr; k++) {
        const char *tr = cic_plot_order_name(c, k);
        bool any = false;
        for (int j = 0; j < kf->ns && !any; j++)
            any = outlier_row(lowp, tr, kf->tensor[j], false) ||
                  outlier_row(lowp, tr, kf->tensor[j], true);
        if (!any)
            continue;
        fputs(kf->nb ? "\n\n# transform: " : "# transform: ", f);
        cic_plot_dat_name(f, tr);
        fputc('\n', f);
        for (int j = 0; j < kf->ns; j++) {
            fprintf(f, "%d", j);
            for (int p = 0; p < 2; p++) {
                double v = cic_plot_jnum(
                    json_object_get(outlier_row(lowp, tr, kf->tensor[j], p == 1), "kurtosis"));
                cic_plot_dat_num(f, v);
                if (v > 0 && isfinite(v)) {
                    kf->lo[p] = fmin(kf->lo[p], v);
                    kf->hi[p] = fmax(kf->hi[p], v);
                    kf->panel[p] = true;
                }
            }
            fputc('\n', f);
        }
        kf->ord[kf->nb++] = k;
        if ((int)strlen(tr) > kf->maxlen)
            kf->maxlen = (int)strlen(tr);
    }
    if (kf->nb == 0 || !(kf->panel[0] || kf->panel[1])) {
        cic_plot_figure_free(&fg);
        free(kf);
        return 0;
    }
    for (int s = 0; s < CIC_PLOT_NSIZE; s++)
        kurt_body(fg.body[s].f, c, &cic_plot_sizes[s], kf, &fg, s);
    rc = cic_plot_figure_finish(c, &fg, d) == 0 ? 1 : -1;
    cic_plot_figure_free(&fg);
    free(kf);
    return rc;
}

/* ---- channel max profile of one linear's input ---- */

int cic_plot_lowp_chanmax(const cic_plot_ctx *c, cic_diag *d)
{
    json_t *lowp = lowp_of(c), *o, *pick = NULL;
    cic_plot_figure fg;
    int ord[CIC_PLOT_MAXTR + 1], nb = 0, maxlen = 4, nmax = 0;
    double kmax = -INFINITY, lo = INFINITY, hi = -INFINITY;
    size_t i;

    if (!lowp)
        return 0;
    /* the first of the highest: q, k and v read one input */
    json_array_foreach(json_object_get(lowp, "outliers"), i, o) {
        double k = cic_plot_jnum(json_object_get(o, "kurtosis"));
        if (cic_plot_streq(cic_plot_jstr(o, "transform"), "none") &&
            cic_plot_streq(cic_plot_jstr(o, "of"), "input") && k > kmax &&
            json_array_size(json_object_get(o, "chan_max")) > 0) {
            kmax = k;
            pick = o;
        }
    }
    if (!pick)
        return 0;
    const char *tensor = cic_plot_jstr(pick, "tensor");
    if (cic_plot_figure_open(&fg, "lowp_chanmax", c, d) != 0)
        return -1;
    FILE *f = fg.dat.f;
    fputs("# lowp_chanmax: max |x| over all tokens and samples per input channel of the input "
          "of ",
          f);
    cic_plot_dat_name(f, tensor);
    fprintf(f,
            " (engine %s), before (transform none) and after each transform, %s\n"
            "# the quantized linear whose input has the highest kurtosis in the original "
            "model (transform none): %.17g\n"
            "# columns: channel[index]  chan_max[|x|, units of the activations]\n",
            c->engine, what_run(c), kmax);
    for (int k = 0; k <= c->ntr; k++) {
        const char *tr = cic_plot_order_name(c, k);
        json_t *cm = json_object_get(outlier_row(lowp, tr, tensor, false), "chan_max");
        size_t n = json_array_size(cm);
        if (n == 0)
            continue;
        fputs(nb ? "\n\n# transform: " : "# transform: ", f);
        cic_plot_dat_name(f, tr);
        fputc('\n', f);
        for (size_t j = 0; j < n; j++) {
            double v = cic_plot_jnum(json_array_get(cm, j));
            fprintf(f, "%zu", j);
            cic_plot_dat_num(f, v);
            fputc('\n', f);
            if (v > 0 && isfinite(v)) {
                lo = fmin(lo, v);
                hi = fmax(hi, v);
            }
        }
        if ((int)n > nmax)
            nmax = (int)n;
        ord[nb++] = k;
        if ((int)strlen(tr) > maxlen)
            maxlen = (int)strlen(tr);
    }
    char what[400], kt[32];
    snprintf(kt, sizeof kt, "%.3g", kmax);
    snprintf(what, sizeof what,
             "per-channel max |x| of the input of %s (highest kurtosis under none: %s)",
             tensor, kt);
    for (int s = 0; s < CIC_PLOT_NSIZE; s++) {
        const cic_plot_size *sz = &cic_plot_sizes[s];
        FILE *g = fg.body[s].f;
        int krows = cic_plot_key_rows(sz, nb, maxlen, false);
        cic_plot_gp_begin(g, c);
        int tl = cic_plot_gp_title_what(g, c, sz, c->engine, what, true);
        fg.height_in[s] = cic_plot_gp_panel(g, sz, 0, 1, tl, krows);
        fprintf(g, "set xrange [-0.5:%g]\nset xlabel 'input channel (index)'\n",
                nmax - 0.5);
        int e = cic_plot_gp_log(g, 'y', lo, hi, true);
        char yl[128] = "max |x| over tokens";
        if (e)
            snprintf(yl, sizeof yl, "max |x| over tokens, \xc3\x97" "10^{%d}", e);
        cic_plot_gp_ylabel(g, yl);
        cic_plot_gp_key(g, sz, nb, maxlen, NULL);
        /* a zero (a channel that is never used) has no place on a log axis */
        fputs("plot ", g);
        for (int b = 0; b < nb; b++) {
            fprintf(g, "%s'lowp_chanmax.dat' index %d using 1:($2 > 0 ? $2 : 1/0) with lines "
                       "ls %d title ",
                    b ? ", \\\n     " : "", b, cic_plot_style(ord[b]));
            cic_plot_gp_quote(g, cic_plot_order_name(c, ord[b]));
            fputs(" noenhanced", g);
        }
        fputs("\nunset multiplot\n", g);
    }
    int rc = cic_plot_figure_finish(c, &fg, d) == 0 ? 1 : -1;
    cic_plot_figure_free(&fg);
    return rc;
}
