/* SPDX-License-Identifier: MIT */
/* test_plot.c: cic_plot_dir on synthetic sweep.json and report.json files.
 *
 * Each test writes a synthetic input into a mkdtemp folder, plots it, and
 * checks: the files of every plot that applies exist (and none of the plots
 * that do not), PNG/SVG/PDF at both paper sizes start as those formats do,
 * numbers read back from the .dat equal the JSON they came from, and every
 * script gives each figure a title, axis labels, a legend outside the data,
 * the paper sizes and the palette. Malformed reports are refused with the
 * key at fault. A report with low-precision engines (a "lowp" section)
 * adds its three figures. Rendering checks are skipped (cmocka skip, with a message)
 * when gnuplot is not installed. */
#include "testutil.h"

#include "report/plot.h"

#include <dirent.h>
#include <jansson.h>
#include <stdbool.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define NPLOTS 9
static const char *const PLOTS[NPLOTS] = {"error_vs_d",      "ulp_cdf",    "error_vs_depth",
                                          "flops_vs_tokens", "ce_vs_prec", "drift_hist",
                                          "lowp_sqnr",       "lowp_kurtosis", "lowp_chanmax"};
/* the bits of the low-precision figures */
#define LOWP_PLOTS (1u << 6 | 1u << 7 | 1u << 8)

/* ---- synthetic values: a closed form, so expectations are computed ---- */

static double v_rel(int t, double d, int seed) { return 1e-7 * (1 + t) * sqrt(d / 16) * (1 + 0.1 * seed); }
static double v_p99(int t, double d, int seed) { return 2 + t + d / 16 + 0.5 * seed; }
static double v_ce(int t, double prec) { return t == 1 ? 1e-3 : ldexp(1, -(int)prec); }
static double v_pct(int t, double tokens) { return 10.0 * (t + 1) + 1600.0 / tokens; }

static json_t *stat3(double a, double b, double c)
{
    return json_pack("{s:f,s:f,s:f}", "median", a, "min", b, "max", c);
}

typedef struct {
    const char *name, *kind;
    bool fast;
} trdef;

static json_t *make_case(const char *block, const trdef *tr, int ntr)
{
    json_t *ts = json_array();
    for (int i = 0; i < ntr; i++)
        json_array_append_new(ts, json_pack("{s:s,s:s,s:s,s:b,s:s}", "name", tr[i].name, "kind",
                                            tr[i].kind, "q", "random", "fast", tr[i].fast,
                                            "expect", "equivalent"));
    return json_pack("{s:s,s:{s:s,s:i,s:i,s:i,s:i,s:b},s:{s:[s,s],s:i},s:{s:s},s:o}", "name",
                     "synthetic", "model", "block", block, "d_model", 16, "tokens", 4, "samples",
                     2, "d_out", 16, "final_layer", 1, "engines", "f32", "openblas",
                     "fixed-order", "mpfr_prec", 128, "readout", "kind", "head", "transforms", ts);
}

/* One report with f32-openblas and mpfr rows for none + each transform. */
static json_t *make_report(json_t *kase, const trdef *tr, int ntr, double dm, int seed,
                           double tokens, bool dit)
{
    json_t *res = json_array();
    for (int t = -1; t < ntr; t++) {
        const char *name = t < 0 ? "none" : tr[t].name;
        json_t *q = json_array();
        for (int i = 0; i <= 100; i++)
            json_array_append_new(q, json_real(i == 0 ? 0 : 0.01 * i * (t + 2) * (1 + i / 20.0)));
        json_t *m = json_pack("{s:f,s:f,s:{s:f,s:f,s:f},s:o,s:i}", "max_abs", 1e-6, "rel_norm2",
                              v_rel(t + 1, dm, seed), "ulp_row", "max", 10.0, "p99",
                              v_p99(t + 1, dm, seed), "mean", 0.5, "ulp_row_quantiles", q,
                              "nonfinite", 0);
        if (t >= 0) {
            json_t *h = json_array();
            for (int b = 0; b < 34; b++)
                json_array_append_new(h, json_integer(b < 6 + t ? (1000 >> b) * (t + 1) + 1 : 0));
            json_object_set_new(m, "drift_hist", h);
            json_object_set_new(m, "drift", json_pack("{s:f,s:f,s:f}", "max", 9.0, "p99", 3.0,
                                                      "mean", 1.0));
        } else {
            json_object_set_new(m, "drift", json_null());
        }
        json_array_append_new(res, json_pack("{s:s,s:s,s:o}", "transform", name, "engine",
                                             "f32-openblas", "metrics", m));
        if (t >= 0)
            json_array_append_new(res, json_pack("{s:s,s:s,s:f,s:n,s:{s:f}}", "transform", name,
                                                 "engine", "mpfr", "ce_residual", 1e-36,
                                                 "metrics", "flops", "extra_pct",
                                                 v_pct(t, tokens)));
    }
    json_t *r = json_pack("{s:s,s:O,s:o,s:b}", "cicheck_version", "0.1.0", "case", kase,
                          "results", res, "pass", 1);
    if (dit) {
        json_t *tok = json_pack("[i,i,i,i,i]", 16, 64, 256, 1024, 4096);
        json_t *pct = json_object();
        const char *keys[6] = {"online-dense", "online-fast", "per-sample-fold",
                               "branch-dense", "branch-fast", "static-fold"};
        for (int k = 0; k < 6; k++) {
            json_t *a = json_array();
            for (int i = 0; i < 5; i++) {
                double n = 16 << (2 * i);
                double v = k == 2 ? 4000.0 / n : k == 5 ? -40.0 / n : (6 - k) * 30.0 / (1 + n / 512);
                json_array_append_new(a, k == 4 && i == 0 ? json_null() : json_real(v));
            }
            json_object_set_new(pct, keys[k], a);
        }
        json_object_set_new(r, "flops_analytical",
                            json_pack("{s:o,s:o,s:{s:f,s:f}}", "tokens", tok, "extra_pct", pct,
                                      "crossover_tokens", "per_sample_fold_vs_online_dense",
                                      175.4, "per_sample_fold_vs_online_fast", 2189.6));
    }
    return r;
}

/* A sweep over axis (values xs) x seed (seeds). */
static json_t *make_sweep(const char *block, const trdef *tr, int ntr, const char *axis,
                          const double *xs, int nx, const int *seeds, int nseed)
{
    json_t *kase = make_case(block, tr, ntr);
    bool dit = strcmp(block, "dit") == 0;
    json_t *pts = json_array(), *agg = json_array();
    json_t *xv = json_array(), *sv = json_array();
    int idx = 0;
    for (int i = 0; i < nx; i++)
        json_array_append_new(xv, json_integer((json_int_t)xs[i]));
    for (int s = 0; s < nseed; s++)
        json_array_append_new(sv, json_integer(seeds[s]));
    for (int i = 0; i < nx; i++) {
        double dm = strcmp(axis, "d_model") == 0 ? xs[i] : 16;
        double tok = strcmp(axis, "tokens") == 0 ? xs[i] : 16;
        for (int s = 0; s < nseed; s++) {
            json_t *p = json_pack("{s:i,s:i,s:i,s:o}", "index", idx++, "exit_code", 0, "pass", 1,
                                  "params", json_pack("{s:I,s:i}", axis, (json_int_t)xs[i],
                                                      "seed", seeds[s]));
            json_object_set_new(p, "report", make_report(kase, tr, ntr, dm, seeds[s], tok, dit));
            json_array_append_new(pts, p);
        }
        for (int t = -1; t < ntr; t++) {
            const char *name = t < 0 ? "none" : tr[t].name;
            /* median over seeds of v(seed) is v at the middle seed for our forms */
            double lo = v_rel(t + 1, dm, seeds[0]), hi = v_rel(t + 1, dm, seeds[nseed - 1]);
            double plo = v_p99(t + 1, dm, seeds[0]), phi = v_p99(t + 1, dm, seeds[nseed - 1]);
            json_t *vals = json_pack("{s:o,s:o}", "rel_norm2", stat3((lo + hi) / 2, lo, hi),
                                     "ulp_row.p99", stat3((plo + phi) / 2, plo, phi));
            json_array_append_new(agg, json_pack("{s:{s:I},s:s,s:s,s:i,s:o}", "params", axis,
                                                 (json_int_t)xs[i], "transform", name, "engine",
                                                 "f32-openblas", "n", nseed, "values", vals));
            if (t < 0)
                continue;
            double prec = strcmp(axis, "mpfr_prec") == 0 ? xs[i] : 128;
            double ce = v_ce(t, prec), pc = v_pct(t, tok);
            json_array_append_new(
                agg, json_pack("{s:{s:I},s:s,s:s,s:i,s:{s:o,s:o}}", "params", axis,
                               (json_int_t)xs[i], "transform", name, "engine", "mpfr", "n", nseed,
                               "values", "ce_residual", stat3(ce, ce * 0.5, ce * 2), "extra_pct",
                               stat3(pc, pc - 1, pc + 1)));
        }
    }
    json_t *root = json_pack("{s:s,s:s,s:o,s:[s,s],s:{s:o,s:o},s:i,s:n,s:o,s:o,s:b}",
                             "cicheck_version", "0.1.0", "kind", "sweep", "case", kase, "axes",
                             axis, "seed", "axis_values", axis, xv, "seed", sv, "total_points",
                             idx, "shard", "points", pts, "aggregate", agg, "pass", 1);
    return root;
}

/* ---- checks ---- */

/* dir/file, as JSON or as text */
static void write_json(const char *dir, const char *file, json_t *j)
{
    char p[4200];
    snprintf(p, sizeof p, "%s/%s", dir, file);
    cic_test_write_json(p, j);
}

static void write_text(const char *dir, const char *file, const char *text)
{
    char p[4200];
    snprintf(p, sizeof p, "%s/%s", dir, file);
    cic_test_write_text(p, text);
}

static bool file_starts(const char *dir, const char *name, const char *ext, const char *magic,
                        size_t n, bool search)
{
    char p[4200];
    static char buf[1 << 16];
    snprintf(p, sizeof p, "%s/plots/%s.%s", dir, name, ext);
    FILE *f = fopen(p, "rb");
    if (!f)
        return false;
    size_t k = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[k] = '\0';
    if (search)
        return strstr(buf, magic) != NULL;
    return k >= n && memcmp(buf, magic, n) == 0;
}

static bool exists(const char *dir, const char *name, const char *ext)
{
    char p[4200];
    struct stat st;
    snprintf(p, sizeof p, "%s/plots/%s.%s", dir, name, ext);
    return stat(p, &st) == 0 && st.st_size > 0;
}

/* Width in pixels from a PNG's IHDR (bytes 16..19, big-endian), or -1. */
static long png_width(const char *dir, const char *name)
{
    char p[4200];
    unsigned char h[24];
    snprintf(p, sizeof p, "%s/plots/%s.png", dir, name);
    FILE *f = fopen(p, "rb");
    if (!f)
        return -1;
    size_t k = fread(h, 1, sizeof h, f);
    fclose(f);
    if (k != sizeof h)
        return -1;
    return (long)h[16] << 24 | (long)h[17] << 16 | (long)h[18] << 8 | (long)h[19];
}

/* The paper sizes: file suffix and PNG width at 300 dpi. */
static const char *const SUFFIX[2] = {"", "-wide"};
static const long PNG_W[2] = {1050, 2100};

/* expected: a bit per PLOTS entry */
static void check_files(const char *dir, unsigned expected, bool rendered)
{
    for (int i = 0; i < NPLOTS; i++) {
        bool want = expected & (1u << i);
        const char *nm = PLOTS[i];
        if (want != exists(dir, nm, "dat") || want != exists(dir, nm, "gp"))
            fail_msg("%s/plots/%s.dat/.gp: expected %s", dir, nm, want ? "present" : "absent");
        if (!rendered)
            continue;
        for (int z = 0; z < 2; z++) {
            char f[128];
            snprintf(f, sizeof f, "%s%s", nm, SUFFIX[z]);
            if (want != exists(dir, f, "png") || want != exists(dir, f, "svg") ||
                want != exists(dir, f, "pdf"))
                fail_msg("%s/plots/%s.png/svg/pdf: expected %s", dir, f,
                         want ? "present" : "absent");
            if (!want)
                continue;
            if (!file_starts(dir, f, "png", "\x89PNG\r\n\x1a\n", 8, false))
                fail_msg("%s.png: no PNG signature", f);
            if (png_width(dir, f) != PNG_W[z])
                fail_msg("%s.png: %ld px wide, expected %ld (%s in at 300 dpi)", f,
                         png_width(dir, f), PNG_W[z], z ? "7" : "3.5");
            if (!file_starts(dir, f, "svg", "<svg", 4, true))
                fail_msg("%s.svg: no <svg", f);
            if (!file_starts(dir, f, "pdf", "%PDF", 4, false))
                fail_msg("%s.pdf: does not start with %%PDF", f);
        }
    }
}

/* Rendering tests need gnuplot: skipped, visibly, without it. */
static void need_gnuplot(void)
{
    cic_test_need("gnuplot", "Debian's gnuplot-nox renders the plots");
}

/* Column col of the row whose first column is x, in the block opened by
 * "# transform: name" (name followed by the end of line or a space). */
static double dat_value(const char *dir, const char *plot, const char *name, double x, int col)
{
    char p[4200], line[4096];
    bool in = false;
    snprintf(p, sizeof p, "%s/plots/%s.dat", dir, plot);
    FILE *f = fopen(p, "r");
    if (!f)
        fail_msg("cannot open %s", p);
    size_t nl = strlen(name);
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, "# transform: ", 13) == 0) {
            const char *s = line + 13;
            in = strncmp(s, name, nl) == 0 && (s[nl] == '\n' || s[nl] == ' ' || !s[nl]);
            continue;
        }
        if (!in || line[0] == '#' || line[0] == '\n')
            continue;
        char *e, *s = line;
        double v[32];
        int n = 0;
        while (n < 32) {
            double t = strtod(s, &e);
            if (e == s)
                break;
            v[n++] = t;
            s = e;
        }
        if (n > col && v[0] == x) {
            fclose(f);
            return v[col];
        }
    }
    fclose(f);
    fail_msg("%s: no row x = %g for %s", p, x, name);
    return NAN;
}

static int plot(const char *dir, int *n)
{
    cic_diag d;
    memset(&d, 0, sizeof d);
    int rc = cic_plot_dir(dir, n, &d);
    if (rc != 0)
        print_message("cic_plot_dir: %s: %s\n", d.file, d.msg);
    return rc;
}

/* ---- what every script must say ---- */

/* The quoted text after key in s ("set xlabel '" -> its contents), or an
 * empty string; into out. */
static void quoted_after(const char *s, const char *key, char *out, size_t cap)
{
    out[0] = '\0';
    const char *p = strstr(s, key);
    if (!p)
        return;
    p += strlen(key);
    size_t n = 0;
    while (*p && *p != '\'' && *p != '\n' && n + 1 < cap)
        out[n++] = *p++;
    out[n] = '\0';
}

/* Okabe-Ito, black for "none", grey for curves no transform measures. */
static bool palette_colour(const char *hex)
{
    static const char *const OK[10] = {"#000000", "#0072B2", "#D55E00", "#009E73", "#CC79A7",
                                       "#E69F00", "#56B4E9", "#F0E442", "#8c8c8c", NULL};
    for (int i = 0; OK[i]; i++)
        if (strncmp(hex, OK[i], 7) == 0)
            return true;
    return false;
}

/* Each expected plot's script: six renderings (PNG, SVG, PDF at 3.5 in and
 * at 7 in, PDF text at full size), and in each rendering a title naming
 * the case and the engine, a y label for every panel, an x label, the
 * legend placed below the plot area, only palette colours. */
static void check_scripts(const char *dir, unsigned expected)
{
    for (int i = 0; i < NPLOTS; i++) {
        if (!(expected & (1u << i)))
            continue;
        char p[4200];
        snprintf(p, sizeof p, "%s/plots/%s.gp", dir, PLOTS[i]);
        char *text = cic_test_slurp(p, NULL);
        if (!strstr(text, "pdfcairo") || !strstr(text, "size 3.500in,") ||
            !strstr(text, "size 7.000in,") || !strstr(text, "fontscale 1 "))
            fail_msg("%s: no 3.5 in and 7 in PDF at full font size", p);
        int blocks = 0;
        for (char *b = strstr(text, "set output '"); b; blocks++) {
            char *next = strstr(b + 1, "set output '");
            char save = 0;
            if (next) {
                save = *next;
                *next = '\0';
            }
            char out[256], t[512], xl[512];
            quoted_after(b, "set output '", out, sizeof out);
            quoted_after(b, "set multiplot title '", t, sizeof t);
            if (!strstr(t, "synthetic") || (!strstr(t, "f32-openblas") && !strstr(t, "mpfr") &&
                                            !strstr(t, "low-precision engines")))
                fail_msg("%s, %s: the title '%s' does not name the case and the engine", p, out,
                         t);
            quoted_after(b, "set xlabel '", xl, sizeof xl);
            if (!xl[0])
                fail_msg("%s, %s: no x label", p, out);
            /* every panel: a y label set since the panel before */
            int panels = 0;
            const char *from = b;
            for (const char *q = strstr(b, "\nplot "); q; q = strstr(q + 1, "\nplot ")) {
                char seg[1 << 14];
                size_t len = (size_t)(q - from) < sizeof seg - 1 ? (size_t)(q - from)
                                                                 : sizeof seg - 1;
                memcpy(seg, from, len);
                seg[len] = '\0';
                char yl[512];
                quoted_after(seg, "set label 90 '", yl, sizeof yl);
                if (!yl[0] || !strstr(seg, "rotate by 90"))
                    fail_msg("%s, %s: panel %d has no y label", p, out, panels + 1);
                from = q + 1;
                panels++;
            }
            if (panels == 0)
                fail_msg("%s, %s: no plot command", p, out);
            if (!strstr(b, "set key at screen 0.5, screen 0.012 center bottom") &&
                !strstr(b, "screen 0.012 left bottom"))
                fail_msg("%s, %s: legend not placed below the plot area", p, out);
            for (const char *q = strstr(b, "set style line "); q;
                 q = strstr(q + 1, "set style line ")) {
                const char *c = strstr(q, "lc rgb '");
                const char *eol = strchr(q, '\n');
                if (!c || (eol && c > eol) || !palette_colour(c + 8))
                    fail_msg("%s, %s: a line style outside the palette: %.60s", p, out, q);
            }
            if (next)
                *next = save;
            b = next;
        }
        if (blocks != 6)
            fail_msg("%s: %d renderings, expected 6 (PNG, SVG, PDF at two sizes)", p, blocks);
        free(text);
    }
}

/* flops_vs_tokens: each transform's points in the colour of its strategy's
 * curve, one legend entry per strategy, and a y range that holds the data
 * (ymax: the largest value plotted) without flattening it. */
static void check_flops_script(const char *dir, double ymax)
{
    char p[4200];
    snprintf(p, sizeof p, "%s/plots/flops_vs_tokens.dat", dir);
    char *dat = cic_test_slurp(p, NULL);
    snprintf(p, sizeof p, "%s/plots/flops_vs_tokens.gp", dir);
    char *gp = cic_test_slurp(p, NULL);
    char *end = strstr(strstr(gp, "set output '") + 1, "set output '");
    assert_non_null(end);
    *end = '\0'; /* the first rendering only */

    /* analytical columns: "# columns: tokens[per sample]  online-dense[%] ..." */
    const char *cols = strstr(dat, "# columns: tokens[per sample]");
    assert_non_null(cols);
    char strat[8][32];
    int nstrat = 0;
    for (const char *q = cols + 29; *q && *q != '\n' && nstrat < 8;) {
        while (*q == ' ')
            q++;
        int n = 0;
        while (*q && *q != '[' && *q != '\n' && n < 31)
            strat[nstrat][n++] = *q++;
        strat[nstrat][n] = '\0';
        while (*q && *q != ' ' && *q != '\n')
            q++;
        if (n)
            nstrat++;
    }
    assert_int_equal(nstrat, 6);
    /* measured blocks: "# transform: NAME (STRATEGY)", index 1, 2, ... */
    int block = 0;
    for (const char *q = strstr(dat, "# transform: "); q; q = strstr(q + 1, "# transform: ")) {
        char name[64], st[64];
        if (sscanf(q, "# transform: %63s (%63[^)])", name, st) != 2) {
            block++;
            continue;
        }
        int col = -1;
        for (int k = 0; k < nstrat; k++)
            if (strcmp(strat[k], st) == 0)
                col = 2 + k;
        assert_true(col > 0);
        char want[160];
        snprintf(want, sizeof want, "index %d using 1:2:3:4 with yerrorbars ls ", block);
        const char *m = strstr(gp, want);
        if (!m)
            fail_msg("flops_vs_tokens.gp: no points for %s (index %d)", name, block);
        int ls_pts = atoi(m + strlen(want));
        snprintf(want, sizeof want, "index 0 using 1:%d with lines ls ", col);
        const char *l = strstr(gp, want);
        if (!l)
            fail_msg("flops_vs_tokens.gp: no curve for %s", st);
        int ls_line = atoi(l + strlen(want));
        if (ls_pts != ls_line)
            fail_msg("flops_vs_tokens: %s drawn in style %d, its curve %s in style %d", name,
                     ls_pts, st, ls_line);
        block++;
    }
    assert_true(block >= 2);
    /* legend: one entry per strategy, none twice */
    char titles[32][160];
    int nt = 0;
    for (const char *q = strstr(gp, " title '"); q; q = strstr(q + 1, " title '")) {
        if (q - gp >= 9 && strncmp(q - 9, "multiplot", 9) == 0)
            continue;
        quoted_after(q, " title '", titles[nt], sizeof titles[nt]);
        for (int k = 0; k < nt; k++)
            if (strcmp(titles[k], titles[nt]) == 0)
                fail_msg("flops_vs_tokens: legend entry '%s' twice", titles[nt]);
        if (++nt == 32)
            break;
    }
    if (nt != nstrat)
        fail_msg("flops_vs_tokens: %d legend entries for %d strategies", nt, nstrat);
    /* y range */
    const char *yr = strstr(gp, "set yrange [");
    assert_non_null(yr);
    double lo, hi;
    assert_int_equal(sscanf(yr, "set yrange [%lf:%lf]", &lo, &hi), 2);
    if (!(hi >= ymax && hi <= 3 * ymax && lo < 0))
        fail_msg("flops_vs_tokens: y range [%g, %g] for data up to %g", lo, hi, ymax);
    free(dat);
    free(gp);
}

static const trdef PRELN[2] = {{"fuse", "fuse-layernorm", false},
                               {"rotate-random", "rotate", false}};

static void test_sweep_d_model(void **state)
{
    (void)state;
    char dir[512];
    int n = -1;
    const double ds[3] = {16, 32, 64};
    const int seeds[2] = {1, 2};
    need_gnuplot();
    cic_test_tmp_subdir(dir, sizeof dir);
    json_t *j = make_sweep("preln", PRELN, 2, "d_model", ds, 3, seeds, 2);
    write_json(dir, "sweep.json", j);
    assert_int_equal(plot(dir, &n), 0);
    assert_int_equal(n, 3);
    check_files(dir, 1u << 0 | 1u << 1 | 1u << 5, true);
    check_scripts(dir, 1u << 0 | 1u << 1 | 1u << 5);

    /* .dat against the JSON: median rel_norm2 (column 1) and p99 max
     * (column 6) at d_model 32 of "fuse" (aggregate index: none, fuse, ...) */
    json_t *agg = json_object_get(j, "aggregate");
    size_t i;
    json_t *e;
    int found = 0;
    json_array_foreach(agg, i, e) {
        const char *t = json_string_value(json_object_get(e, "transform"));
        const char *en = json_string_value(json_object_get(e, "engine"));
        json_t *p = json_object_get(e, "params");
        if (strcmp(t, "fuse") || strcmp(en, "f32-openblas") ||
            json_integer_value(json_object_get(p, "d_model")) != 32)
            continue;
        json_t *v = json_object_get(e, "values");
        double med = json_real_value(json_object_get(json_object_get(v, "rel_norm2"), "median"));
        double pmx = json_real_value(json_object_get(json_object_get(v, "ulp_row.p99"), "max"));
        assert_true(dat_value(dir, "error_vs_d", "fuse", 32, 1) == med);
        assert_true(dat_value(dir, "error_vs_d", "fuse", 32, 6) == pmx);
        cic_assert_close(med, (v_rel(1, 32, 1) + v_rel(1, 32, 2)) / 2, 1e-15, 0);
        found++;
    }
    assert_int_equal(found, 1);
    /* "none" is plotted too; the CDF and drift come from the first point */
    assert_true(dat_value(dir, "error_vs_d", "none", 64, 1) ==
                (v_rel(0, 64, 1) + v_rel(0, 64, 2)) / 2);
    json_t *r0 = json_object_get(json_array_get(json_object_get(j, "points"), 0), "report");
    json_t *rr = json_array_get(json_object_get(r0, "results"), 3); /* rotate-random f32 */
    assert_string_equal(json_string_value(json_object_get(rr, "transform")), "rotate-random");
    json_t *m = json_object_get(rr, "metrics");
    assert_true(dat_value(dir, "ulp_cdf", "rotate-random", 0.5, 1) ==
                json_real_value(json_array_get(json_object_get(m, "ulp_row_quantiles"), 50)));
    /* drift_hist: one wide block; bin 3, column 3 is fuse, 4 rotate-random */
    assert_true(dat_value(dir, "drift_hist", "all", 3, 3) ==
                (double)((1000 >> 3) * 1 + 1));
    assert_true(dat_value(dir, "drift_hist", "all", 3, 4) ==
                (double)json_integer_value(json_array_get(json_object_get(m, "drift_hist"), 3)));
    json_decref(j);
}

static void test_sweep_prec(void **state)
{
    (void)state;
    char dir[512];
    int n = -1;
    const double ps[2] = {64, 128};
    const int seeds[1] = {5};
    need_gnuplot();
    cic_test_tmp_subdir(dir, sizeof dir);
    json_t *j = make_sweep("preln", PRELN, 2, "mpfr_prec", ps, 2, seeds, 1);
    write_json(dir, "sweep.json", j);
    assert_int_equal(plot(dir, &n), 0);
    assert_int_equal(n, 3);
    check_files(dir, 1u << 4 | 1u << 1 | 1u << 5, true);
    check_scripts(dir, 1u << 4 | 1u << 1 | 1u << 5);
    assert_true(dat_value(dir, "ce_vs_prec", "fuse", 64, 1) == v_ce(0, 64));
    assert_true(dat_value(dir, "ce_vs_prec", "rotate-random", 128, 3) == 2e-3);
    json_decref(j);
}

static void test_sweep_dit_tokens(void **state)
{
    (void)state;
    char dir[512];
    int n = -1;
    /* tokens 4 gives per-sample 430 %: above the 400 % where the y axis
     * used to be clipped */
    const double ts[3] = {4, 16, 64};
    const int seeds[2] = {1, 2};
    const trdef dit[4] = {{"online-dense", "online-unrotate", false},
                          {"online-fast", "online-unrotate", true},
                          {"per-sample", "per-sample-fold", false},
                          {"static", "static-fold", false}};
    need_gnuplot();
    cic_test_tmp_subdir(dir, sizeof dir);
    json_t *j = make_sweep("dit", dit, 4, "tokens", ts, 3, seeds, 2);
    write_json(dir, "sweep.json", j);
    assert_int_equal(plot(dir, &n), 0);
    assert_int_equal(n, 3);
    check_files(dir, 1u << 3 | 1u << 1 | 1u << 5, true);
    check_scripts(dir, 1u << 3 | 1u << 1 | 1u << 5);
    check_flops_script(dir, v_pct(2, 4));
    /* analytical: column 3 is per-sample-fold (tokens, online-dense,
     * online-fast, per-sample-fold, ...) */
    json_t *fa = json_object_get(
        json_object_get(json_array_get(json_object_get(j, "points"), 0), "report"),
        "flops_analytical");
    double want = json_real_value(
        json_array_get(json_object_get(json_object_get(fa, "extra_pct"), "per-sample-fold"), 1));
    assert_true(dat_value(dir, "flops_vs_tokens", "analytical", 64, 3) == want);
    /* a null entry stays missing (NaN) */
    assert_true(isnan(dat_value(dir, "flops_vs_tokens", "analytical", 16, 5)));
    /* measured median of per-sample at tokens 64 */
    assert_true(dat_value(dir, "flops_vs_tokens", "per-sample", 64, 1) == v_pct(2, 64));
    assert_true(dat_value(dir, "flops_vs_tokens", "static", 16, 3) == v_pct(3, 16) + 1);
    json_decref(j);
}

/* A single report.json: only the plots that need one point; a transform
 * name with a quote and an underscore must survive gnuplot quoting. */
static void test_single_report(void **state)
{
    (void)state;
    char dir[512];
    int n = -1;
    const trdef tr[2] = {{"it's_\"odd\"", "rotate", false}, {"fuse", "fuse-layernorm", false}};
    need_gnuplot();
    cic_test_tmp_subdir(dir, sizeof dir);
    json_t *kase = make_case("preln", tr, 2);
    json_t *r = make_report(kase, tr, 2, 16, 1, 16, false);
    json_decref(kase);
    write_json(dir, "report.json", r);
    assert_int_equal(plot(dir, &n), 0);
    assert_int_equal(n, 2);
    check_files(dir, 1u << 1 | 1u << 5, true);
    check_scripts(dir, 1u << 1 | 1u << 5);
    assert_true(dat_value(dir, "ulp_cdf", "it's_\"odd\"", 1, 1) ==
                0.01 * 100 * 2 * (1 + 100 / 20.0));
    /* the tail view: 1 - F at each percentile, 1/n at the maximum (n = 4
     * tokens x 2 samples x 16 outputs of the head readout) */
    assert_true(dat_value(dir, "ulp_cdf", "fuse", 0.5, 2) == 0.5);
    assert_true(dat_value(dir, "ulp_cdf", "fuse", 0.99, 2) == 1 - 0.99);
    assert_true(dat_value(dir, "ulp_cdf", "fuse", 1, 2) == 1.0 / 128);
    json_decref(r);
}

/* No input: -1 and a message naming both files. Missing gnuplot (empty
 * PATH): -1, a message saying so, and the .dat/.gp still written. */
static void test_errors(void **state)
{
    (void)state;
    char dir[512];
    int n = -1;
    cic_diag d;
    memset(&d, 0, sizeof d);
    cic_test_tmp_subdir(dir, sizeof dir);
    assert_int_equal(cic_plot_dir(dir, &n, &d), -1);
    assert_non_null(strstr(d.msg, "sweep.json"));
    assert_non_null(strstr(d.msg, "report.json"));
    assert_int_equal(n, 0);

    json_t *kase = make_case("preln", PRELN, 2);
    json_t *r = make_report(kase, PRELN, 2, 16, 1, 16, false);
    json_decref(kase);
    write_json(dir, "report.json", r);
    json_decref(r);
    char *old = getenv("PATH") ? strdup(getenv("PATH")) : NULL;
    setenv("PATH", "/nonexistent-cic", 1);
    memset(&d, 0, sizeof d);
    int rc = cic_plot_dir(dir, &n, &d);
    if (old) {
        setenv("PATH", old, 1);
        free(old);
    }
    assert_int_equal(rc, -1);
    assert_non_null(strstr(d.msg, "gnuplot not found"));
    check_files(dir, 1u << 1 | 1u << 5, false);

    /* unreadable JSON */
    write_text(dir, "sweep.json", "{\"kind\": \"sweep\", ");
    memset(&d, 0, sizeof d);
    assert_int_equal(cic_plot_dir(dir, &n, &d), -1);
    assert_non_null(strstr(d.msg, "JSON"));
}

/* ---- malformed input: exit 2 with the file and the key ---- */

/* cic_plot_dir refuses dir's input with a message naming file and key, and
 * `cicheck plot` exits 2 (when the binary is built). */
static void expect_refused(const char *dir, const char *file, const char *key)
{
    cic_diag d;
    int n = -1;
    memset(&d, 0, sizeof d);
    int rc = cic_plot_dir(dir, &n, &d);
    if (rc != -1)
        fail_msg("%s/%s: cic_plot_dir returned %d (%d plots), expected -1", dir, file, rc, n);
    size_t lf = strlen(d.file), ln = strlen(file);
    if (lf < ln || strcmp(d.file + lf - ln, file) != 0)
        fail_msg("%s/%s: the message names file '%s'", dir, file, d.file);
    if (!strstr(d.msg, key))
        fail_msg("%s/%s: the message does not name %s: %s", dir, file, key, d.msg);
    assert_int_equal(n, 0);
    const char *build = getenv("CIC_BUILD_ROOT");
    char bin[4200], cmd[9000];
    snprintf(bin, sizeof bin, "%s/cicheck", build ? build : ".");
    if (access(bin, X_OK) != 0) {
        print_message("no %s: exit status not checked\n", bin);
        return;
    }
    snprintf(cmd, sizeof cmd, "'%s' plot '%s' >/dev/null 2>&1", bin, dir);
    int st = system(cmd);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 2)
        fail_msg("cicheck plot %s (%s): exit status %d, expected 2", dir, key,
                 WIFEXITED(st) ? WEXITSTATUS(st) : -1);
}

static void test_malformed(void **state)
{
    (void)state;
    char dir[512], p[4200];
    json_t *kase = make_case("preln", PRELN, 2);

    /* not an object */
    cic_test_tmp_subdir(dir, sizeof dir);
    write_text(dir, "report.json", "[1,2]\n");
    expect_refused(dir, "report.json", "top level");

    /* results a string */
    json_t *r = make_report(kase, PRELN, 2, 16, 1, 16, false);
    json_object_set_new(r, "results", json_string("all fine"));
    write_json(dir, "report.json", r);
    expect_refused(dir, "report.json", "'results'");
    json_decref(r);

    /* every metrics null */
    r = make_report(kase, PRELN, 2, 16, 1, 16, false);
    size_t i;
    json_t *row;
    json_array_foreach(json_object_get(r, "results"), i, row)
        json_object_set_new(row, "metrics", json_null());
    write_json(dir, "report.json", r);
    expect_refused(dir, "report.json", "metrics");

    /* a key the figures read, of the wrong type */
    json_object_set_new(json_array_get(json_object_get(r, "results"), 0), "metrics",
                        json_pack("{s:s}", "ulp_row_quantiles", "many"));
    write_json(dir, "report.json", r);
    expect_refused(dir, "report.json", "results[0].metrics.ulp_row_quantiles");
    json_decref(r);

    /* the same forms as a sweep: the top level, and a point's report */
    snprintf(p, sizeof p, "%s/report.json", dir);
    unlink(p);
    write_text(dir, "sweep.json", "[1,2]\n");
    expect_refused(dir, "sweep.json", "top level");
    const double ds[2] = {16, 32};
    const int seeds[1] = {1};
    json_t *j = make_sweep("preln", PRELN, 2, "d_model", ds, 2, seeds, 1);
    json_t *pts = json_object_get(j, "points");
    json_object_set_new(json_object_get(json_array_get(pts, 0), "report"), "results",
                        json_string("x"));
    write_json(dir, "sweep.json", j);
    expect_refused(dir, "sweep.json", "points[0].report.results");
    json_array_foreach(pts, i, row)
        json_object_set_new(row, "report", json_null());
    write_json(dir, "sweep.json", j);
    expect_refused(dir, "sweep.json", "'points'");
    json_decref(j);
    json_decref(kase);
}

/* ---- low-precision engines: the "lowp" section ---- */

/* A hand-written report of a case with two low-precision engines: f32
 * rows with no figure of their own (no quantiles, no drift), one row per
 * engine and model with its SQNR (fold has no w4a4 row: NaN; rotate's bf16
 * output is exact: sqnr_db null), and the outlier statistics of three
 * linears' inputs and weights. The input with the highest kurtosis under
 * none is the second linear's, neither the first nor the last. */
static const trdef LOWP_TR[2] = {{"fold", "fold-rmsnorm-gamma", false},
                                 {"rotate", "rotate", false}};
static const char *const LOWP_ENG[2] = {"bf16", "w4a4"};
static const char *const LOWP_SITE[3] = {"layers.0.self_attn.q_proj.weight",
                                         "layers.0.mlp.down_proj.weight", "lm_head.weight"};
static const int LOWP_CHAN[3] = {4, 8, 4};

static const char *l_tr(int t) { return t ? LOWP_TR[t - 1].name : "none"; }
static bool l_missing(int t, int e) { return t == 1 && e == 1; }
static bool l_exact(int t, int e) { return t == 2 && e == 0; }
static double l_sqnr(int t, int e) { return 40.0 - 25 * e + 3.5 * t; }
static double l_kin(int t, int j)
{
    return t == 2 ? 2.5 + 0.1 * j : (j == 1 ? 40.0 : j == 2 ? 30.0 : 20.0) * (t ? 0.95 : 1);
}
static double l_kw(int t, int j) { return t == 2 && j == 2 ? NAN : 3 + j + 0.5 * t; }
static double l_cmax(int t, int j, int ch)
{
    return t == 2 ? 2 + 0.01 * ch : (ch % 3 == 0 ? 50 : 1) + 0.001 * ch + j;
}

static json_t *make_lowp_report(void)
{
    json_t *kase = make_case("rmsnorm", LOWP_TR, 2);
    json_t *res = json_array(), *outl = json_array();
    for (int t = 0; t < 3; t++) {
        json_array_append_new(res, json_pack("{s:s,s:s,s:{s:f}}", "transform", l_tr(t), "engine",
                                             "f32-openblas", "metrics", "rel_norm2", 1e-7));
        for (int e = 0; e < 2; e++) {
            if (l_missing(t, e))
                continue;
            json_t *row = json_pack("{s:s,s:s,s:{s:f}}", "transform", l_tr(t), "engine",
                                    LOWP_ENG[e], "metrics", "rel_norm2", 0.01);
            json_object_set_new(row, "sqnr_db",
                                l_exact(t, e) ? json_null() : json_real(l_sqnr(t, e)));
            json_array_append_new(res, row);
        }
        /* weights first, then inputs, as cicheck lists them */
        for (int w = 1; w >= 0; w--)
            for (int j = 0; j < 3; j++) {
                json_t *cm = json_array();
                for (int ch = 0; ch < LOWP_CHAN[j]; ch++)
                    json_array_append_new(cm, json_real(w ? 0.1 : l_cmax(t, j, ch)));
                double k = w ? l_kw(t, j) : l_kin(t, j);
                json_array_append_new(
                    outl, json_pack("{s:s,s:s,s:s,s:o,s:f,s:f,s:i,s:o}", "transform", l_tr(t),
                                    "tensor", LOWP_SITE[j], "of", w ? "weight" : "input",
                                    "kurtosis", isnan(k) ? json_null() : json_real(k),
                                    "max_over_rms", 3.0, "top_share", 0.1, "top_channels", 1,
                                    "chan_max", cm));
            }
    }
    json_t *eng = json_pack("[{s:s,s:s,s:s,s:s,s:s,s:i},{s:s,s:s,s:s,s:s,s:s,s:i}]", "name",
                            "bf16", "weights", "bf16", "activations", "bf16", "compute", "bf16",
                            "weights_from", "unrounded", "line", 20, "name", "w4a4", "weights",
                            "int4:channel", "activations", "int4:token", "compute", "float32",
                            "weights_from", "unrounded", "line", 24);
    return json_pack("{s:s,s:o,s:o,s:{s:o,s:o,s:[]},s:b}", "cicheck_version", "0.1.0", "case",
                     kase, "results", res, "lowp", "engines", eng, "outliers", outl,
                     "linear_errors", "pass", 1);
}

/* The numbers of the three .dat files against the report, and the scripts
 * (written without gnuplot: PATH hidden, so this runs everywhere). */
static void test_lowp_data(void **state)
{
    (void)state;
    char dir[512], p[4200];
    int n = -1;
    cic_diag d;
    cic_test_tmp_subdir(dir, sizeof dir);
    json_t *r = make_lowp_report();
    write_json(dir, "report.json", r);
    json_decref(r);
    char *old = strdup(getenv("PATH") ? getenv("PATH") : "/usr/bin:/bin");
    setenv("PATH", "/nonexistent-cic", 1);
    memset(&d, 0, sizeof d);
    int rc = cic_plot_dir(dir, &n, &d);
    setenv("PATH", old, 1);
    free(old);
    assert_int_equal(rc, -1);
    if (!strstr(d.msg, "gnuplot not found") || !strstr(d.msg, "3 plot(s)"))
        fail_msg("without gnuplot: %s", d.msg);
    check_files(dir, LOWP_PLOTS, false);
    check_scripts(dir, LOWP_PLOTS);

    /* lowp_sqnr: a block per transform, a row per engine: sqnr, exact */
    for (int t = 0; t < 3; t++)
        for (int e = 0; e < 2; e++) {
            double v = dat_value(dir, "lowp_sqnr", l_tr(t), e, 1);
            double x = dat_value(dir, "lowp_sqnr", l_tr(t), e, 2);
            if (l_missing(t, e) || l_exact(t, e)) {
                if (!isnan(v))
                    fail_msg("lowp_sqnr %s/%s: %g, expected NaN", l_tr(t), LOWP_ENG[e], v);
            } else if (v != l_sqnr(t, e)) {
                fail_msg("lowp_sqnr %s/%s: %.17g, expected %.17g", l_tr(t), LOWP_ENG[e], v,
                         l_sqnr(t, e));
            }
            if (x != (l_exact(t, e) ? 1 : 0))
                fail_msg("lowp_sqnr %s/%s: exact %g", l_tr(t), LOWP_ENG[e], x);
        }
    snprintf(p, sizeof p, "%s/plots/lowp_sqnr.gp", dir);
    char *gp = cic_test_slurp(p, NULL);
    /* "none" black (style 1), then each transform in its colour */
    for (int t = 0; t < 3; t++) {
        char want[128];
        snprintf(want, sizeof want, "index %d using ($1%s):2 with boxes ls %d title '%s'", t,
                 t == 0 ? "-0.266667" : t == 1 ? "+0" : "+0.266667", 1 + t, l_tr(t));
        if (!strstr(gp, want))
            fail_msg("lowp_sqnr.gp: no bars \"%s\"", want);
    }
    if (!strstr(gp, "MPFR truth") || !strstr(gp, "with labels"))
        fail_msg("lowp_sqnr.gp: the title does not say the truth is MPFR's, or no label for "
                 "the exact output");
    free(gp);

    /* lowp_kurtosis: sites in the report's order, input and weight */
    snprintf(p, sizeof p, "%s/plots/lowp_kurtosis.dat", dir);
    char *dat = cic_test_slurp(p, NULL);
    for (int j = 0; j < 3; j++) {
        char want[128];
        snprintf(want, sizeof want, "# site %d: %s (x label ", j, LOWP_SITE[j]);
        if (!strstr(dat, want))
            fail_msg("lowp_kurtosis.dat: no \"%s\"", want);
    }
    free(dat);
    for (int t = 0; t < 3; t++)
        for (int j = 0; j < 3; j++) {
            double ki = dat_value(dir, "lowp_kurtosis", l_tr(t), j, 1);
            double kw = dat_value(dir, "lowp_kurtosis", l_tr(t), j, 2);
            if (ki != l_kin(t, j))
                fail_msg("lowp_kurtosis %s site %d: input %.17g, expected %.17g", l_tr(t), j, ki,
                         l_kin(t, j));
            if (!(kw == l_kw(t, j) || (isnan(kw) && isnan(l_kw(t, j)))))
                fail_msg("lowp_kurtosis %s site %d: weight %.17g, expected %.17g", l_tr(t), j,
                         kw, l_kw(t, j));
        }

    /* lowp_chanmax: the second linear's input, named in .dat and title */
    snprintf(p, sizeof p, "%s/plots/lowp_chanmax.dat", dir);
    dat = cic_test_slurp(p, NULL);
    if (!strstr(dat, "of the input of layers.0.mlp.down_proj.weight"))
        fail_msg("lowp_chanmax.dat does not name the linear with the highest kurtosis");
    free(dat);
    snprintf(p, sizeof p, "%s/plots/lowp_chanmax.gp", dir);
    gp = cic_test_slurp(p, NULL);
    if (!strstr(gp, "down_proj.weight"))
        fail_msg("lowp_chanmax.gp: the title does not name the linear");
    free(gp);
    for (int t = 0; t < 3; t++)
        for (int ch = 0; ch < LOWP_CHAN[1]; ch++) {
            double v = dat_value(dir, "lowp_chanmax", l_tr(t), ch, 1);
            if (v != l_cmax(t, 1, ch))
                fail_msg("lowp_chanmax %s channel %d: %.17g, expected %.17g", l_tr(t), ch, v,
                         l_cmax(t, 1, ch));
        }
}

/* The three figures rendered, and nothing else drawn from this report. */
static void test_lowp_render(void **state)
{
    (void)state;
    char dir[512];
    int n = -1;
    need_gnuplot();
    cic_test_tmp_subdir(dir, sizeof dir);
    json_t *r = make_lowp_report();
    write_json(dir, "report.json", r);
    json_decref(r);
    assert_int_equal(plot(dir, &n), 0);
    assert_int_equal(n, 3);
    check_files(dir, LOWP_PLOTS, true);
    check_scripts(dir, LOWP_PLOTS);
}

/* A malformed "lowp" section, or a row's sqnr_db, is refused naming the
 * key, in a report and in a sweep point's report. */
static void test_lowp_malformed(void **state)
{
    (void)state;
    char dir[512], p[4200];
    cic_test_tmp_subdir(dir, sizeof dir);
    json_t *r = make_lowp_report();
    /* each part replaced and put back: held by a reference of its own */
    json_t *lowp = json_incref(json_object_get(r, "lowp"));
    json_t *out = json_object_get(lowp, "outliers");

    json_object_set_new(r, "lowp", json_string("yes"));
    write_json(dir, "report.json", r);
    expect_refused(dir, "report.json", "'lowp'");
    json_object_set_new(r, "lowp", lowp);

    json_t *eng = json_incref(json_object_get(lowp, "engines"));
    json_object_set_new(lowp, "engines", json_object());
    write_json(dir, "report.json", r);
    expect_refused(dir, "report.json", "'lowp.engines'");
    json_object_set_new(lowp, "engines", eng);

    json_t *e0 = json_array_get(eng, 0), *nm = json_incref(json_object_get(e0, "name"));
    json_object_set_new(e0, "name", json_integer(5));
    write_json(dir, "report.json", r);
    expect_refused(dir, "report.json", "'lowp.engines[0].name'");
    json_object_set_new(e0, "name", nm);

    json_t *o1 = json_array_get(out, 1);
    json_object_set_new(o1, "of", json_string("output"));
    write_json(dir, "report.json", r);
    expect_refused(dir, "report.json", "'lowp.outliers[1].of'");
    json_object_set_new(o1, "of", json_string("weight"));

    json_t *o2 = json_array_get(out, 2), *cm = json_incref(json_object_get(o2, "chan_max"));
    json_object_set_new(o2, "chan_max", json_string("wide"));
    write_json(dir, "report.json", r);
    expect_refused(dir, "report.json", "'lowp.outliers[2].chan_max'");
    json_array_set_new(cm, 1, json_string("x"));
    json_object_set(o2, "chan_max", cm);
    write_json(dir, "report.json", r);
    expect_refused(dir, "report.json", "'lowp.outliers[2].chan_max[1]'");
    json_array_set_new(cm, 1, json_real(0.1));
    json_decref(cm);

    json_object_set_new(o2, "kurtosis", json_string("high"));
    write_json(dir, "report.json", r);
    expect_refused(dir, "report.json", "'lowp.outliers[2].kurtosis'");
    json_object_set_new(o2, "kurtosis", json_real(3));

    json_t *row = json_array_get(json_object_get(r, "results"), 1);
    json_object_set_new(row, "sqnr_db", json_string("40 dB"));
    write_json(dir, "report.json", r);
    expect_refused(dir, "report.json", "'results[1].sqnr_db'");
    json_object_set_new(row, "sqnr_db", json_real(40));

    /* the repaired report plots again (all but gnuplot) */
    write_json(dir, "report.json", r);
    {
        cic_diag d;
        int n = -1;
        memset(&d, 0, sizeof d);
        char *old = strdup(getenv("PATH") ? getenv("PATH") : "/usr/bin:/bin");
        setenv("PATH", "/nonexistent-cic", 1);
        int rc = cic_plot_dir(dir, &n, &d);
        setenv("PATH", old, 1);
        free(old);
        if (rc != -1 || !strstr(d.msg, "gnuplot not found"))
            fail_msg("the repaired report: %s", d.msg);
    }

    /* in a sweep: the key path through the point */
    snprintf(p, sizeof p, "%s/report.json", dir);
    unlink(p);
    const double ds[2] = {16, 32};
    const int seeds[1] = {1};
    json_t *j = make_sweep("preln", PRELN, 2, "d_model", ds, 2, seeds, 1);
    json_t *rep = json_object_get(json_array_get(json_object_get(j, "points"), 1), "report");
    json_object_set_new(rep, "lowp", json_pack("{s:[],s:i}", "engines", "outliers", 7));
    write_json(dir, "sweep.json", j);
    expect_refused(dir, "sweep.json", "'points[1].report.lowp.outliers'");
    json_decref(j);
    json_decref(r);
}

/* ---- two runs drawing into one folder ---- */

/* A gnuplot in front of the real one that records where it runs and, once
 * the real one is done, removes plots/NAME.* of the figure it drew: what a
 * second run drawing the same figure into the same folder did in between
 * (it unlinked the stale files before rendering its own). Renderings made
 * in place are gone before they are checked; renderings made in a private
 * folder and renamed afterwards are not. */
static void test_race_private_folder(void **state)
{
    (void)state;
    char dir[512], bin[600], log[700], plots[700], real[4096], p[4200];
    need_gnuplot();
    FILE *w = popen("command -v gnuplot", "r");
    assert_non_null(w);
    assert_non_null(fgets(real, sizeof real, w));
    pclose(w);
    real[strcspn(real, "\n")] = '\0';

    cic_test_tmp_subdir(dir, sizeof dir);
    snprintf(bin, sizeof bin, "%s/bin", dir);
    assert_int_equal(mkdir(bin, 0755), 0);
    snprintf(log, sizeof log, "%s/gnuplot.log", dir);
    snprintf(plots, sizeof plots, "%s/plots", dir);
    snprintf(p, sizeof p, "%s/gnuplot", bin);
    cic_test_write_text(p, "#!/bin/sh\npwd -P >> \"$CIC_TEST_GP_LOG\"\n"
                           "\"$CIC_TEST_GP_REAL\" \"$@\"\nrc=$?\nn=\"$CIC_TEST_GP_STEAL/${1%.gp}\"\n"
                           "rm -f \"$n.png\" \"$n.svg\" \"$n.pdf\" \"$n-wide.png\" \"$n-wide.svg\" "
                           "\"$n-wide.pdf\"\nexit $rc\n");
    assert_int_equal(chmod(p, 0755), 0);

    json_t *kase = make_case("preln", PRELN, 2);
    json_t *r = make_report(kase, PRELN, 2, 16, 1, 16, false);
    write_json(dir, "report.json", r);
    json_decref(r);
    json_decref(kase);

    char *old = strdup(getenv("PATH") ? getenv("PATH") : "/usr/bin:/bin");
    char path[8192];
    snprintf(path, sizeof path, "%s:%s", bin, old);
    setenv("PATH", path, 1);
    setenv("CIC_TEST_GP_LOG", log, 1);
    setenv("CIC_TEST_GP_REAL", real, 1);
    setenv("CIC_TEST_GP_STEAL", plots, 1);
    int n = -1;
    int rc = plot(dir, &n);
    setenv("PATH", old, 1);
    free(old);
    unsetenv("CIC_TEST_GP_LOG");
    unsetenv("CIC_TEST_GP_REAL");
    unsetenv("CIC_TEST_GP_STEAL");

    assert_int_equal(rc, 0);
    assert_int_equal(n, 2);
    check_files(dir, 1u << 1 | 1u << 5, true);
    /* gnuplot ran twice, never in plots/ itself but in a private folder
     * inside it, which is gone afterwards */
    char real_plots[4096], line[4200];
    assert_non_null(realpath(plots, real_plots));
    FILE *f = fopen(log, "r");
    assert_non_null(f);
    int runs = 0;
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = '\0';
        size_t lp = strlen(real_plots);
        if (strcmp(line, real_plots) == 0 || strncmp(line, real_plots, lp) != 0 ||
            strncmp(line + lp, "/.render-", 9) != 0)
            fail_msg("gnuplot ran in %s, not in a private folder under %s", line, real_plots);
        runs++;
    }
    fclose(f);
    assert_int_equal(runs, 2);
    DIR *dp = opendir(plots);
    assert_non_null(dp);
    struct dirent *e;
    while ((e = readdir(dp)))
        if (strncmp(e->d_name, ".render-", 8) == 0)
            fail_msg("work folder %s/%s left behind", plots, e->d_name);
    closedir(dp);
}

/* Two processes plotting one folder at once: both succeed and
 * the files are whole. */
static void test_race_concurrent(void **state)
{
    (void)state;
    char dir[512];
    need_gnuplot();
    cic_test_tmp_subdir(dir, sizeof dir);
    json_t *kase = make_case("preln", PRELN, 2);
    json_t *r = make_report(kase, PRELN, 2, 16, 1, 16, false);
    write_json(dir, "report.json", r);
    json_decref(r);
    json_decref(kase);
    pid_t kid[2];
    for (int k = 0; k < 2; k++) {
        fflush(NULL);
        kid[k] = fork();
        assert_true(kid[k] >= 0);
        if (kid[k] == 0) {
            for (int it = 0; it < 1; it++) {
                cic_diag d;
                int n = 0;
                if (cic_plot_dir(dir, &n, &d) != 0 || n != 2) {
                    fprintf(stderr, "child %d: %s: %s\n", k, d.file, d.msg);
                    _exit(1);
                }
            }
            _exit(0);
        }
    }
    for (int k = 0; k < 2; k++) {
        int st = 0;
        assert_int_equal(waitpid(kid[k], &st, 0), kid[k]);
        if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
            fail_msg("concurrent plotting: process %d failed", k);
    }
    check_files(dir, 1u << 1 | 1u << 5, true);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sweep_d_model),   cmocka_unit_test(test_sweep_prec),
        cmocka_unit_test(test_sweep_dit_tokens), cmocka_unit_test(test_single_report),
        cmocka_unit_test(test_errors),          cmocka_unit_test(test_malformed),
        cmocka_unit_test(test_lowp_data),       cmocka_unit_test(test_lowp_render),
        cmocka_unit_test(test_lowp_malformed),
        cmocka_unit_test(test_race_private_folder), cmocka_unit_test(test_race_concurrent),
    };
    return cmocka_run_group_tests(tests, cic_test_tmp_setup, cic_test_tmp_teardown);
}
