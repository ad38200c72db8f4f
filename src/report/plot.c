/* plot.c: gnuplot data, scripts and rendered figures from sweep.json (or a
 * single report.json), for papers: PNG for slides and pages, SVG, and a PDF
 * sized for one column (3.4 in wide). See plot.h for the files made.
 *
 * Everything is written as text first (.dat, .gp, atomically), so a reader
 * without gnuplot, or a reviewer, can re-run or restyle a figure by hand; the
 * script body is emitted once per terminal (pngcairo, svg, pdfcairo) so each
 * script stands alone without gnuplot macros or loops.
 *
 * Data choices: the f32 engine is f32-openblas when the run has it, else
 * f32-fixed-order. Sweep figures use the "aggregate" entries (median, min and
 * max over seeds); when axes other than the plotted one and seed vary, only
 * entries whose other parameters equal the first value of each such axis
 * are used (the .dat header says which). Single-point figures use the first
 * point's report. Numbers go to the .dat with %.17g, so they read back equal
 * to the JSON; JSON null becomes NaN, which the scripts mark as missing.
 *
 * Labels: transform names are user text, so they are quoted for gnuplot
 * (single quotes, ' doubled, control bytes dropped) and printed noenhanced
 * (an "_" would otherwise start a subscript). */
#include "plot.h"

#include "report.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <math.h>
#include <stdbool.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

#define MAXTR 64       /* transforms given their own style; more share the last */
#define MAXROWS 1024   /* points per data set */
#define NPAL 10

/* Colour-blind-safe first (Okabe-Ito), then tableau tones. Index 0 is "none". */
static const char *const PALETTE[NPAL] = {
    "#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00",
    "#56B4E9", "#8C564B", "#7F7F7F", "#BCBD22", "#17BECF",
};
static const int POINTS[7] = {5, 9, 13, 11, 4, 8, 12};

/* The analytical adaLN strategies (flops_analytical.extra_pct keys). */
#define NSTRAT 6
static const char *const STRAT[NSTRAT] = {
    "online-dense", "online-fast", "per-sample-fold", "branch-dense", "branch-fast",
    "static-fold",
};
static const char *const STRAT_COLOR[NSTRAT] = {
    "#0072B2", "#0072B2", "#D55E00", "#009E73", "#009E73", "#555555",
};
static const int STRAT_DT[NSTRAT] = {1, 2, 1, 1, 2, 4};

typedef struct {
    const char *dir;
    char plots[4096];
    json_t *root;        /* owned */
    bool sweep;
    json_t *first;       /* first point's report (borrowed) */
    json_t *aggregate;   /* NULL for a single report */
    json_t *axes, *axis_values;
    const char *engine;  /* f32 engine plotted */
    int ntr;
    const char *tr[MAXTR];
    const char *kind[MAXTR];
    bool fast[MAXTR];
} plot_ctx;

/* A growing text buffer (open_memstream). */
typedef struct {
    char *buf;
    size_t len;
    FILE *f;
} mbuf;

static int mbuf_open(mbuf *m)
{
    m->buf = NULL;
    m->len = 0;
    m->f = open_memstream(&m->buf, &m->len);
    return m->f ? 0 : -1;
}

static int mbuf_close(mbuf *m)
{
    int rc = 0;
    if (m->f && fclose(m->f) != 0)
        rc = -1;
    m->f = NULL;
    return rc;
}

static void mbuf_free(mbuf *m)
{
    if (m->f)
        fclose(m->f);
    free(m->buf);
    m->buf = NULL;
    m->f = NULL;
}

/* ---- JSON helpers ---- */

static double jnum(const json_t *v)
{
    return json_is_number(v) ? json_number_value(v) : NAN;
}

/* obj[k1][k2]... as a number (NaN when any step is missing or null). */
static double jget(const json_t *o, const char *k1, const char *k2, const char *k3)
{
    const json_t *v = json_is_object(o) ? json_object_get(o, k1) : NULL;
    if (k2)
        v = json_is_object(v) ? json_object_get(v, k2) : NULL;
    if (k3)
        v = json_is_object(v) ? json_object_get(v, k3) : NULL;
    return jnum(v);
}

static const char *jstr(const json_t *o, const char *k)
{
    const json_t *v = json_is_object(o) ? json_object_get(o, k) : NULL;
    return json_is_string(v) ? json_string_value(v) : NULL;
}

static bool streq(const char *a, const char *b)
{
    return a && b && strcmp(a, b) == 0;
}

/* Write s as a gnuplot single-quoted string. */
static void gp_quote(FILE *f, const char *s)
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
static void dat_name(FILE *f, const char *s)
{
    for (; s && *s; s++) {
        unsigned char ch = (unsigned char)*s;
        fputc(ch < 0x20 || ch == 0x7f ? '?' : ch, f);
    }
}

static void dat_num(FILE *f, double v)
{
    if (isfinite(v))
        fprintf(f, " %.17g", v);
    else
        fputs(" NaN", f);
}

static void gp_styles(FILE *g, const plot_ctx *c)
{
    /* LW and PS are set per terminal before the body (see figure_finish) */
    fputs("set style line 1 lc rgb '#000000' lw LW pt 7 ps PS\n", g);
    for (int i = 0; i < c->ntr; i++)
        fprintf(g, "set style line %d lc rgb '%s' lw LW pt %d ps PS\n", 2 + i,
                PALETTE[i % NPAL], POINTS[i % 7]);
}

/* ---- selecting data ---- */

/* The number of values of a swept axis (0 when not swept). */
static size_t axis_count(const plot_ctx *c, const char *axis)
{
    if (!c->sweep || !json_is_array(c->axes))
        return 0;
    size_t i;
    json_t *a;
    json_array_foreach(c->axes, i, a) {
        if (streq(json_string_value(a), axis)) {
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
static bool params_match(const plot_ctx *c, const json_t *params, const char *xaxis)
{
    size_t i;
    json_t *a;
    json_array_foreach(c->axes, i, a) {
        const char *name = json_string_value(a);
        if (!name || streq(name, xaxis) || streq(name, "seed"))
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

/* "# other axes fixed at: a = v, ..." */
static void dat_fixed(FILE *f, const plot_ctx *c, const char *xaxis)
{
    size_t i;
    json_t *a;
    bool any = false;
    json_array_foreach(c->axes, i, a) {
        const char *name = json_string_value(a);
        if (!name || streq(name, xaxis) || streq(name, "seed"))
            continue;
        json_t *vals = json_object_get(c->axis_values, name);
        json_t *first = json_is_array(vals) ? json_array_get(vals, 0) : NULL;
        char *t = first ? json_dumps(first, JSON_ENCODE_ANY) : NULL;
        fprintf(f, "%s", any ? ", " : "# other axes fixed at their first value: ");
        dat_name(f, name);
        fprintf(f, " = %s", t ? t : "?");
        free(t);
        any = true;
    }
    if (any)
        fputc('\n', f);
}

typedef struct {
    double x;
    double v[6];
    double n;
} row;

static int row_cmp(const void *a, const void *b)
{
    double x = ((const row *)a)->x, y = ((const row *)b)->x;
    return (x > y) - (x < y);
}

/* Aggregate rows of one transform and engine, against xaxis, with the median,
 * min and max of up to two metrics. Returns the row count. */
static int agg_rows(const plot_ctx *c, const char *tr, const char *engine, const char *xaxis,
                    const char *m1, const char *m2, row *out)
{
    size_t i;
    json_t *e;
    int n = 0;
    json_array_foreach(c->aggregate, i, e) {
        if (!streq(jstr(e, "transform"), tr) || !streq(jstr(e, "engine"), engine))
            continue;
        json_t *p = json_object_get(e, "params");
        double x = jnum(json_object_get(p, xaxis));
        if (!isfinite(x) || !params_match(c, p, xaxis))
            continue;
        json_t *vals = json_object_get(e, "values");
        row r;
        r.x = x;
        r.n = jnum(json_object_get(e, "n"));
        const char *ms[2] = {m1, m2};
        bool have = false;
        for (int k = 0; k < 2; k++) {
            for (int j = 0; j < 3; j++)
                r.v[3 * k + j] = NAN;
            if (!ms[k])
                continue;
            json_t *mv = json_object_get(vals, ms[k]);
            r.v[3 * k + 0] = jget(mv, "median", NULL, NULL);
            r.v[3 * k + 1] = jget(mv, "min", NULL, NULL);
            r.v[3 * k + 2] = jget(mv, "max", NULL, NULL);
            if (json_is_object(mv))
                have = true;
        }
        if (!have || n >= MAXROWS)
            continue;
        out[n++] = r;
    }
    qsort(out, (size_t)n, sizeof *out, row_cmp);
    return n;
}

/* The row of the first report for (transform, engine). */
static json_t *first_row(const plot_ctx *c, const char *tr, const char *engine)
{
    size_t i;
    json_t *r;
    json_array_foreach(json_object_get(c->first, "results"), i, r) {
        if (streq(jstr(r, "transform"), tr) && streq(jstr(r, "engine"), engine))
            return r;
    }
    return NULL;
}

/* Transform names in plotting order: "none", then case.transforms. */
static const char *order_name(const plot_ctx *c, int k)
{
    return k == 0 ? "none" : c->tr[k - 1];
}

/* ---- one figure: data, script, rendering ---- */

typedef struct {
    const char *name;
    mbuf dat;
    mbuf body;        /* the terminal-independent part of the script */
    int key_n;        /* legend entries below the plot ... */
    int key_len;      /* ... and the longest, in characters: the canvas grows
                       * by the legend rows, which depend on the terminal */
    double height;    /* canvas height factor (1 = 700 px / 2.4 in / 500 px) */
} figure;

static int find_gnuplot(char *out, size_t cap)
{
    const char *path = getenv("PATH");
    if (!path || !*path)
        return -1;
    const char *p = path;
    while (*p) {
        const char *e = strchr(p, ':');
        size_t n = e ? (size_t)(e - p) : strlen(p);
        if (n > 0 && n + 10 < cap) {
            memcpy(out, p, n);
            memcpy(out + n, "/gnuplot", 9);
            if (access(out, X_OK) == 0)
                return 0;
        }
        if (!e)
            break;
        p = e + 1;
    }
    return -1;
}

/* Run gnuplot NAME.gp inside plots/; 0, or -1 with d set (exit status and
 * the last part of stderr). */
static int run_gnuplot(const char *gnuplot, const char *plots, const char *gp, cic_diag *d)
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
        cic_diag_set(d, plots, 0, 0, "out of memory");
        return -1;
    }
    for (size_t i = 0, j = 0; i < nenv; i++)
        if (strncmp(environ[i], "DISPLAY=", 8) != 0 && strncmp(environ[i], "GNUTERM=", 8) != 0)
            envp[j++] = environ[i];

    if (pipe(fds) != 0) {
        cic_diag_set(d, plots, 0, 0, "pipe: %s", strerror(errno));
        free(envp);
        return -1;
    }
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        cic_diag_set(d, plots, 0, 0, "fork: %s", strerror(errno));
        close(fds[0]);
        close(fds[1]);
        free(envp);
        return -1;
    }
    if (pid == 0) {
        int nul = open("/dev/null", O_RDWR);
        if (nul < 0 || chdir(plots) != 0)
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
            cic_diag_set(d, plots, 0, 0, "waitpid: %s", strerror(errno));
            return -1;
        }
    }
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
        return 0;
    while (tlen > 0 && (tail[tlen - 1] == '\n' || tail[tlen - 1] == ' '))
        tail[--tlen] = '\0';
    if (WIFEXITED(status))
        cic_diag_set(d, plots, 0, 0, "gnuplot %s failed (exit status %d): %s", gp,
                     WEXITSTATUS(status), tlen ? tail : "(no stderr)");
    else
        cic_diag_set(d, plots, 0, 0, "gnuplot %s killed by signal %d: %s", gp,
                     WIFSIGNALED(status) ? WTERMSIG(status) : 0, tlen ? tail : "(no stderr)");
    return -1;
}

/* Legend columns for entries of at most maxlen characters on a line of
 * width characters (an entry takes its text plus about 9 characters of line
 * sample and gap); at most 3. */
static int key_cols(int maxlen, int width)
{
    int cols = width / (maxlen + 9);
    return cols < 1 ? 1 : cols > 3 ? 3 : cols;
}

static const char *const EXT[3] = {"png", "svg", "pdf"};

/* Write NAME.dat and NAME.gp; render when gnuplot is given. */
static int figure_finish(const plot_ctx *c, figure *fg, const char *gnuplot, cic_diag *d)
{
    char path[4200];
    mbuf gp;
    int rc = -1;
    double h = fg->height > 0 ? fg->height : 1.0;

    if (mbuf_close(&fg->dat) != 0 || mbuf_close(&fg->body) != 0 || mbuf_open(&gp) != 0) {
        cic_diag_set(d, c->plots, 0, 0, "out of memory building plot %s", fg->name);
        return -1;
    }
    fprintf(gp.f,
            "# %s.gp: written by cicheck %s; run from this folder: gnuplot %s.gp\n"
            "# Reads %s.dat, writes %s.png, %s.svg and %s.pdf.\n",
            fg->name, CIC_VERSION, fg->name, fg->name, fg->name, fg->name, fg->name);
    fputs("set encoding utf8\n", gp.f);
    /* Characters per line at each terminal's size and font: legend columns
     * and rows (KC, KR in the script) follow, and the canvas grows by the
     * rows so the plot area keeps its size at single-column width. */
    static const int WIDTH[3] = {90, 85, 50};
    int rows[3], cols[3];
    for (int t = 0; t < 3; t++) {
        cols[t] = key_cols(fg->key_len, WIDTH[t]);
        rows[t] = (fg->key_n + cols[t] - 1) / cols[t];
    }
    /* gnuplot's cairo terminals guess text about 40 % wider than it is, so
     * legend columns would spill off the canvas: shrink each by that */
    int kw = 1 - (4 * fg->key_len) / 10;
    const char *term[3];
    char tbuf[3][240];
    snprintf(tbuf[0], sizeof tbuf[0],
             "set terminal pngcairo enhanced size 1000,%d font ',16' "
             "background rgb 'white'\nLW = 2.5; PS = 1.4; KC = %d; KR = %d; KW = %d",
             (int)(700 * h) + 26 * rows[0], cols[0], rows[0] > 0 ? rows[0] : 1, kw);
    snprintf(tbuf[1], sizeof tbuf[1],
             "set terminal svg enhanced size 700,%d font ',12' "
             "background rgb 'white'\nLW = 1.5; PS = 0.9; KC = %d; KR = %d; KW = %d",
             (int)(500 * h) + 17 * rows[1], cols[1], rows[1] > 0 ? rows[1] : 1, kw);
    snprintf(tbuf[2], sizeof tbuf[2],
             "set terminal pdfcairo enhanced size 3.4in,%.2fin font ',8'\n"
             "LW = 2; PS = 0.45; KC = %d; KR = %d; KW = %d",
             2.4 * h + 0.125 * rows[2], cols[2], rows[2] > 0 ? rows[2] : 1, kw);
    for (int t = 0; t < 3; t++)
        term[t] = tbuf[t];
    for (int t = 0; t < 3; t++) {
        fprintf(gp.f, "\n%s\nset output '%s.%s'\n", term[t], fg->name, EXT[t]);
        fwrite(fg->body.buf, 1, fg->body.len, gp.f);
        fputs("unset output\n", gp.f);
    }
    if (mbuf_close(&gp) != 0) {
        cic_diag_set(d, c->plots, 0, 0, "out of memory building plot %s", fg->name);
        goto cleanup;
    }
    snprintf(path, sizeof path, "%s/%s.dat", c->plots, fg->name);
    if (cic_write_atomic(path, fg->dat.buf, fg->dat.len, d) != 0)
        goto cleanup;
    snprintf(path, sizeof path, "%s/%s.gp", c->plots, fg->name);
    if (cic_write_atomic(path, gp.buf, gp.len, d) != 0)
        goto cleanup;
    if (gnuplot) {
        char gpname[300];
        for (int t = 0; t < 3; t++) {
            snprintf(path, sizeof path, "%s/%s.%s", c->plots, fg->name, EXT[t]);
            unlink(path); /* a stale figure must not pass the check below */
        }
        snprintf(gpname, sizeof gpname, "%s.gp", fg->name);
        if (run_gnuplot(gnuplot, c->plots, gpname, d) != 0)
            goto cleanup;
        for (int t = 0; t < 3; t++) {
            struct stat st;
            snprintf(path, sizeof path, "%s/%s.%s", c->plots, fg->name, EXT[t]);
            if (stat(path, &st) != 0 || st.st_size == 0) {
                cic_diag_set(d, path, 0, 0, "gnuplot %s.gp exited 0 but wrote no %s.%s",
                             fg->name, fg->name, EXT[t]);
                goto cleanup;
            }
        }
    }
    rc = 0;
cleanup:
    mbuf_free(&gp);
    return rc;
}

static int figure_open(figure *fg, const char *name, cic_diag *d, const char *where)
{
    memset(fg, 0, sizeof *fg);
    fg->name = name;
    if (mbuf_open(&fg->dat) != 0 || mbuf_open(&fg->body) != 0) {
        mbuf_free(&fg->dat);
        cic_diag_set(d, where, 0, 0, "out of memory");
        return -1;
    }
    return 0;
}

static void figure_free(figure *fg)
{
    mbuf_free(&fg->dat);
    mbuf_free(&fg->body);
}

/* Tics at the axis values (log axes get too few labels otherwise). */
static void gp_xtics_values(FILE *g, const double *x, int n)
{
    fputs("set xtics (", g);
    for (int i = 0; i < n; i++)
        fprintf(g, "%s%.17g", i ? ", " : "", x[i]);
    fputs(")\n", g);
}

/* A log y axis over [lo, hi] (the positive data, error bars included):
 * whole decades when the data spans many, else the range itself with tics at
 * 1, 2, 5 x 10^k (gnuplot labels only decades on a log axis, so a narrow
 * range would have no labels at all). */
static void gp_log_yaxis(FILE *g, double lo, double hi)
{
    static const double M125[3] = {1, 2, 5};
    char buf[1024];
    int n = 0;

    if (!(hi > 0) || !isfinite(lo)) {
        fputs("set yrange [1e-12:1]\nset format y '10^{%L}'\nset ytics autofreq\n", g);
        return;
    }
    if (hi / lo >= 30) {
        fputs("set autoscale y\nset format y '10^{%L}'\nset ytics autofreq\n", g);
        return;
    }
    double a = lo / 1.15, b = hi * 1.15;
    int kmin = (int)floor(log10(a)), kmax = (int)ceil(log10(b));
    /* 1-2-5 unless that gives fewer than 3 tics, then 1..9 */
    for (int pass = 0; pass < 2; pass++) {
        size_t len = 0;
        n = 0;
        buf[0] = '\0';
        for (int k = kmin; k <= kmax; k++) {
            for (int m = 0; m < (pass == 0 ? 3 : 9); m++) {
                double t = (pass == 0 ? M125[m] : m + 1) * pow(10, k);
                if (t < a || t > b || len + 40 > sizeof buf)
                    continue;
                len += (size_t)snprintf(buf + len, sizeof buf - len, "%s%.6g", n ? ", " : "", t);
                n++;
            }
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
                size_t len = 0;
                n = 0;
                buf[0] = '\0';
                for (double t = ceil(a / st) * st; t <= b && len + 40 < sizeof buf; t += st)
                    len += (size_t)snprintf(buf + len, sizeof buf - len, "%s%.6g", n++ ? ", " : "",
                                            t);
                break;
            }
        }
    }
    fprintf(g, "set yrange [%.6g:%.6g]\nset format y '%%h'\nset ytics (%s)\n", a, b, buf);
}

/* ---- 1 and 3: error against d_model or layers ---- */

static int plot_error_vs(const plot_ctx *c, const char *name, const char *xaxis,
                         const char *xlabel, const char *gnuplot, cic_diag *d)
{
    figure fg;
    row *rows = NULL;
    int rc = -1, nblocks = 0, maxlen = 4;
    int styles[MAXTR + 1];
    double lo[2] = {INFINITY, INFINITY}, hi[2] = {0, 0};
    double xs[MAXROWS];
    int nx = 0;

    if (axis_count(c, xaxis) < 2 || !c->aggregate)
        return 0;
    rows = cic_calloc(MAXROWS, sizeof *rows);
    if (!rows || figure_open(&fg, name, d, c->plots) != 0) {
        free(rows);
        if (!rows)
            cic_diag_set(d, c->plots, 0, 0, "out of memory");
        return -1;
    }
    FILE *f = fg.dat.f;
    fprintf(f, "# %s: f32 error against %s, engine %s; median, min and max over seeds\n", name,
            xaxis, c->engine);
    dat_fixed(f, c, xaxis);
    fprintf(f,
            "# units: rel_norm2 = ||y - x||_2 / ||x||_2 (dimensionless); ulp_row_p99 in ULP of "
            "the row's largest |x| (row-scaled)\n"
            "# columns: %s  rel_norm2_median  rel_norm2_min  rel_norm2_max  ulp_row_p99_median[ULP]"
            "  ulp_row_p99_min[ULP]  ulp_row_p99_max[ULP]  n_seeds\n",
            xaxis);
    for (int k = 0; k <= c->ntr; k++) {
        const char *tr = order_name(c, k);
        int n = agg_rows(c, tr, c->engine, xaxis, "rel_norm2", "ulp_row.p99", rows);
        if (n == 0)
            continue;
        if (nblocks)
            fputs("\n\n", f);
        fputs("# transform: ", f);
        dat_name(f, tr);
        fputc('\n', f);
        for (int i = 0; i < n; i++) {
            fprintf(f, "%.17g", rows[i].x);
            for (int j = 0; j < 6; j++)
                dat_num(f, rows[i].v[j]);
            dat_num(f, rows[i].n);
            fputc('\n', f);
            for (int j = 0; j < 6; j++) {
                double v = rows[i].v[j];
                if (v > 0 && isfinite(v)) {
                    lo[j / 3] = fmin(lo[j / 3], v);
                    hi[j / 3] = fmax(hi[j / 3], v);
                }
            }
            bool seen = false;
            for (int j = 0; j < nx; j++)
                seen |= xs[j] == rows[i].x;
            if (!seen && nx < MAXROWS)
                xs[nx++] = rows[i].x;
        }
        styles[nblocks++] = k == 0 ? 1 : 1 + k;
        if ((int)strlen(tr) > maxlen)
            maxlen = (int)strlen(tr);
    }
    if (nblocks == 0) {
        figure_free(&fg);
        free(rows);
        return 0;
    }
    {
        /* sort the tic values (insertion sort; a handful of values) */
        for (int i = 1; i < nx; i++)
            for (int j = i; j > 0 && xs[j - 1] > xs[j]; j--) {
                double t = xs[j];
                xs[j] = xs[j - 1];
                xs[j - 1] = t;
            }
    }
    fg.key_n = nblocks;
    fg.key_len = maxlen;
    fg.height = 1.0;
    FILE *g = fg.body.f;
    fputs("reset\nset datafile missing 'NaN'\n", g);
    gp_styles(g, c);
    bool logx = nx > 0 && xs[nx - 1] / xs[0] >= 4;
    fprintf(g, "set multiplot\nset logscale y\n%s", logx ? "set logscale x 2\n" : "");
    gp_xtics_values(g, xs, nx);
    fprintf(g,
            "set offsets graph 0.04, graph 0.04, 0, 0\n"
            "set grid xtics ytics lc rgb '#dddddd'\n"
            "set tmargin 1.5\nset bmargin KR + 4.5\n"
            "set xlabel %s noenhanced\nset key off\n",
            xlabel[0] == '\'' ? xlabel : "''");
    static const char *const ylab[2] = {"'relative error ||y - x||_2 / ||x||_2'",
                                        "'p99 error, ULP (row-scaled)'"};
    for (int p = 0; p < 2; p++) {
        fprintf(g, "set lmargin at screen %s\nset rmargin at screen %s\n",
                p == 0 ? "0.16" : "0.65", p == 0 ? "0.49" : "0.97");
        fprintf(g, "set ylabel %s offset 1,0\n", ylab[p]);
        gp_log_yaxis(g, lo[p], hi[p]);
        if (p == 1)
            fputs("set key at screen 0.5, screen 0.01 center bottom vertical "
                  "maxrows KR Left reverse samplen 2.5 width KW\n",
                  g);
        fputs("plot ", g);
        for (int b = 0; b < nblocks; b++) {
            const char *tr = order_name(c, styles[b] == 1 ? 0 : styles[b] - 1);
            fprintf(g, "%s'%s.dat' index %d using 1:%d:%d:%d with yerrorlines ls %d title ",
                    b ? ", \\\n     " : "", name, b, p ? 5 : 2, p ? 6 : 3, p ? 7 : 4,
                    styles[b]);
            gp_quote(g, tr);
            fputs(" noenhanced", g);
        }
        fputc('\n', g);
    }
    fputs("unset multiplot\n", g);
    rc = figure_finish(c, &fg, gnuplot, d) == 0 ? 1 : -1;
    figure_free(&fg);
    free(rows);
    return rc;
}

/* ---- 2: CDF of ulp_row ---- */

static int plot_ulp_cdf(const plot_ctx *c, const char *gnuplot, cic_diag *d)
{
    figure fg;
    int nblocks = 0, maxlen = 4, rc;
    int styles[MAXTR + 1];

    if (!c->first)
        return 0;
    if (figure_open(&fg, "ulp_cdf", d, c->plots) != 0)
        return -1;
    FILE *f = fg.dat.f;
    fprintf(f,
            "# ulp_cdf: distribution of the row-scaled error ulp_row over the elements of the "
            "output, engine %s, %s\n"
            "# from ulp_row_quantiles: the q-th percentile is at fraction q/100\n"
            "# columns: fraction[0..1]  ulp_row[ULP of the row's largest |x|]\n",
            c->engine, c->sweep ? "first point of the sweep" : "single run");
    for (int k = 0; k <= c->ntr; k++) {
        const char *tr = order_name(c, k);
        json_t *r = first_row(c, tr, c->engine);
        json_t *q = json_object_get(json_object_get(r, "metrics"), "ulp_row_quantiles");
        if (!json_is_array(q) || json_array_size(q) < 2)
            continue;
        size_t nq = json_array_size(q);
        if (nblocks)
            fputs("\n\n", f);
        fputs("# transform: ", f);
        dat_name(f, tr);
        fputc('\n', f);
        for (size_t i = 0; i < nq; i++) {
            fprintf(f, "%.17g", (double)i / (double)(nq - 1));
            dat_num(f, jnum(json_array_get(q, i)));
            fputc('\n', f);
        }
        styles[nblocks++] = k == 0 ? 1 : 1 + k;
        if ((int)strlen(tr) > maxlen)
            maxlen = (int)strlen(tr);
    }
    if (nblocks == 0) {
        figure_free(&fg);
        return 0;
    }
    fg.key_n = nblocks;
    fg.key_len = maxlen;
    FILE *g = fg.body.f;
    fputs("reset\nset datafile missing 'NaN'\n", g);
    gp_styles(g, c);
    fprintf(g,
            "set logscale x\nset format x '10^{%%L}'\nset yrange [0:1]\n"
            "set grid xtics ytics lc rgb '#dddddd'\n"
            "set xlabel 'ULP (row-scaled): |y - x| / ulp(max_{row} |x|)'\n"
            "set ylabel 'fraction of elements  P(ULP <= x)'\n"
            "set bmargin %s + 4.5\nset key at screen 0.5, screen 0.01 center bottom vertical maxrows KR Left reverse samplen 2.5 width KW\n"
            "plot ",
            "KR");
    for (int b = 0; b < nblocks; b++) {
        const char *tr = order_name(c, styles[b] == 1 ? 0 : styles[b] - 1);
        fprintf(g, "%s'ulp_cdf.dat' index %d using 2:1 with lines ls %d title ",
                b ? ", \\\n     " : "", b, styles[b]);
        gp_quote(g, tr);
        fputs(" noenhanced", g);
    }
    fputc('\n', g);
    rc = figure_finish(c, &fg, gnuplot, d) == 0 ? 1 : -1;
    figure_free(&fg);
    return rc;
}

/* ---- 4: extra FLOPs against tokens per sample ---- */

static const char *kind_label(const plot_ctx *c, int i)
{
    const char *k = c->kind[i];
    bool fast = c->fast[i];
    if (streq(k, "online-unrotate"))
        return fast ? "online fast" : "online";
    if (streq(k, "branch-rotate"))
        return fast ? "branch fast" : "branch";
    if (streq(k, "per-sample-fold"))
        return "per-sample";
    if (streq(k, "static-fold"))
        return "static";
    return k ? k : "?";
}

static int plot_flops(const plot_ctx *c, const char *gnuplot, cic_diag *d)
{
    figure fg;
    json_t *fa = json_object_get(c->first, "flops_analytical");
    json_t *tok = json_object_get(fa, "tokens");
    json_t *pct = json_object_get(fa, "extra_pct");
    const char *block = NULL;
    row *rows = NULL;
    int rc = -1, nstrat = 0, nmeas = 0, maxlen = 10;
    int scol[NSTRAT];
    int mstyle[MAXTR];
    double ymax = 100, ymin = -10, datamax = -INFINITY;

    block = jstr(json_object_get(json_object_get(c->root, "case"), "model"), "block");
    if (!streq(block, "dit") || !json_is_array(tok) || json_array_size(tok) == 0 ||
        !json_is_object(pct))
        return 0;
    rows = cic_calloc(MAXROWS, sizeof *rows);
    if (!rows || figure_open(&fg, "flops_vs_tokens", d, c->plots) != 0) {
        if (!rows)
            cic_diag_set(d, c->plots, 0, 0, "out of memory");
        free(rows);
        return -1;
    }
    FILE *f = fg.dat.f;
    double nstar = jget(fa, "crossover_tokens", "per_sample_fold_vs_online_dense", NULL);
    double nstar_fast = jget(fa, "crossover_tokens", "per_sample_fold_vs_online_fast", NULL);
    fprintf(f,
            "# flops_vs_tokens: extra FLOPs of each adaLN strategy as %% of the untransformed "
            "block, against tokens per sample N\n"
            "# crossover N* per_sample_fold_vs_online_dense =");
    dat_num(f, nstar);
    fputs("\n# crossover N* per_sample_fold_vs_online_fast =", f);
    dat_num(f, nstar_fast);
    fputs("\n# index 0: analytical (closed-form, from the first point's flops_analytical)\n"
          "# columns: tokens[per sample]",
          f);
    for (int s = 0; s < NSTRAT; s++) {
        json_t *a = json_object_get(pct, STRAT[s]);
        scol[s] = json_is_array(a) ? 2 + nstrat++ : 0;
        if (scol[s])
            fprintf(f, "  %s[%%]", STRAT[s]);
    }
    fputs("\n# transform: analytical\n", f);
    for (size_t i = 0; i < json_array_size(tok); i++) {
        fprintf(f, "%.17g", jnum(json_array_get(tok, i)));
        for (int s = 0; s < NSTRAT; s++) {
            if (!scol[s])
                continue;
            double v = jnum(json_array_get(json_object_get(pct, STRAT[s]), i));
            dat_num(f, v);
            if (isfinite(v) && v > datamax)
                datamax = v;
        }
        fputc('\n', f);
    }
    /* measured: mpfr rows of every dit transform, when tokens is swept */
    if (axis_count(c, "tokens") >= 2 && c->aggregate) {
        for (int i = 0; i < c->ntr; i++) {
            int n = agg_rows(c, c->tr[i], "mpfr", "tokens", "extra_pct", NULL, rows);
            if (n == 0)
                continue;
            if (nmeas == 0) {
                fputs("\n\n# index 1..: measured (counted in the engine), aggregate mpfr rows;"
                      " median, min, max over seeds\n",
                      f);
                dat_fixed(f, c, "tokens");
                fputs("# columns: tokens[per sample]  extra_pct_median[%]  extra_pct_min[%]  "
                      "extra_pct_max[%]\n",
                      f);
            } else {
                fputs("\n\n", f);
            }
            fputs("# transform: ", f);
            dat_name(f, c->tr[i]);
            fputs(" (", f);
            dat_name(f, kind_label(c, i));
            fputs(")\n", f);
            for (int r = 0; r < n; r++) {
                fprintf(f, "%.17g", rows[r].x);
                dat_num(f, rows[r].v[0]);
                dat_num(f, rows[r].v[1]);
                dat_num(f, rows[r].v[2]);
                fputc('\n', f);
                if (isfinite(rows[r].v[2]) && rows[r].v[2] > datamax)
                    datamax = rows[r].v[2];
            }
            mstyle[nmeas++] = i;
            int len = (int)(strlen(c->tr[i]) + strlen(kind_label(c, i)) + 3);
            if (len > maxlen)
                maxlen = len;
        }
    }
    /* Linear y: the story is where the curves cross and which stay near 0;
     * a log axis would hide the sign (fusion can save FLOPs). Clip at 400 %
     * so folding at tiny N does not flatten everything else. */
    if (datamax > ymax)
        ymax = datamax * 1.05;
    bool clipped = ymax > 400;
    if (clipped)
        ymax = 400;
    fg.key_n = nstrat + nmeas;
    fg.key_len = maxlen;
    fg.height = 1.1;
    FILE *g = fg.body.f;
    fputs("reset\nset datafile missing 'NaN'\n", g);
    gp_styles(g, c);
    for (int s = 0; s < NSTRAT; s++)
        fprintf(g, "set style line %d lc rgb '%s' lw LW dt %d\n", 80 + s, STRAT_COLOR[s],
                STRAT_DT[s]);
    fprintf(g,
            "set logscale x 2\nset format x '2^{%%L}'\n"
            "set yrange [%g:%g]\nset grid xtics ytics lc rgb '#dddddd'\n"
            "set xlabel 'tokens per sample N'\n"
            "set ylabel 'extra FLOPs (%% of block, linear%s)'\n"
            "set xzeroaxis lt 1 lc rgb '#888888' lw 1\n"
            "set bmargin %s + 5.5\nset key at screen 0.5, screen 0.01 center bottom vertical maxrows KR Left reverse samplen 2.5 width KW "
            "title 'lines: closed form;  points: counted (median, min-max over seeds)'\n",
            ymin, ymax, clipped ? ", clipped at 400" : "", "KR");
    if (isfinite(nstar) && nstar > 0) {
        fprintf(g,
                "set arrow 1 from %.17g, graph 0 to %.17g, graph 1 nohead dt 3 lw 1.5 "
                "lc rgb '#000000'\n"
                "set label 1 sprintf('N* = %%.0f', %.17g) at %.17g, graph 0.93 left "
                "offset 0.5,0 front\n",
                nstar, nstar, nstar, nstar);
    }
    fputs("plot ", g);
    int b = 0;
    for (int s = 0; s < NSTRAT; s++) {
        if (!scol[s])
            continue;
        fprintf(g, "%s'flops_vs_tokens.dat' index 0 using 1:%d with lines ls %d title '%s' "
                   "noenhanced",
                b++ ? ", \\\n     " : "", scol[s], 80 + s, STRAT[s]);
    }
    for (int m = 0; m < nmeas; m++) {
        int i = mstyle[m];
        fprintf(g, "%s'flops_vs_tokens.dat' index %d using 1:2:3:4 with yerrorbars ls %d "
                   "title ",
                b++ ? ", \\\n     " : "", 1 + m, 2 + i);
        char lab[512];
        snprintf(lab, sizeof lab, "%s (%s)", c->tr[i], kind_label(c, i));
        gp_quote(g, lab);
        fputs(" noenhanced", g);
    }
    fputc('\n', g);
    rc = figure_finish(c, &fg, gnuplot, d) == 0 ? 1 : -1;
    figure_free(&fg);
    free(rows);
    return rc;
}

/* ---- 5: exactness residual against MPFR precision ---- */

static int plot_ce_prec(const plot_ctx *c, const char *gnuplot, cic_diag *d)
{
    figure fg;
    row *rows = NULL;
    int rc = -1, nblocks = 0, maxlen = 10;
    int styles[MAXTR];
    double xmin = INFINITY, xmax = -INFINITY, ylo = INFINITY, yhi = 0;

    if (axis_count(c, "mpfr_prec") < 2 || !c->aggregate)
        return 0;
    rows = cic_calloc(MAXROWS, sizeof *rows);
    if (!rows || figure_open(&fg, "ce_vs_prec", d, c->plots) != 0) {
        if (!rows)
            cic_diag_set(d, c->plots, 0, 0, "out of memory");
        free(rows);
        return -1;
    }
    FILE *f = fg.dat.f;
    fputs("# ce_vs_prec: computational-equivalence residual (relative MPFR-transformed vs "
          "MPFR-original difference) against the MPFR precision; aggregate mpfr rows, median, "
          "min and max over seeds\n",
          f);
    dat_fixed(f, c, "mpfr_prec");
    fputs("# columns: mpfr_prec[bits]  ce_residual_median[-]  ce_residual_min[-]  "
          "ce_residual_max[-]\n",
          f);
    for (int i = 0; i < c->ntr; i++) {
        int n = agg_rows(c, c->tr[i], "mpfr", "mpfr_prec", "ce_residual", NULL, rows);
        if (n == 0)
            continue;
        if (nblocks)
            fputs("\n\n", f);
        fputs("# transform: ", f);
        dat_name(f, c->tr[i]);
        fputc('\n', f);
        for (int r = 0; r < n; r++) {
            fprintf(f, "%.17g", rows[r].x);
            dat_num(f, rows[r].v[0]);
            dat_num(f, rows[r].v[1]);
            dat_num(f, rows[r].v[2]);
            fputc('\n', f);
            if (rows[r].x < xmin)
                xmin = rows[r].x;
            if (rows[r].x > xmax)
                xmax = rows[r].x;
            for (int j = 0; j < 3; j++)
                if (rows[r].v[j] > 0 && isfinite(rows[r].v[j])) {
                    ylo = fmin(ylo, rows[r].v[j]);
                    yhi = fmax(yhi, rows[r].v[j]);
                }
        }
        styles[nblocks++] = i;
        if ((int)strlen(c->tr[i]) > maxlen)
            maxlen = (int)strlen(c->tr[i]);
    }
    if (nblocks == 0) {
        figure_free(&fg);
        free(rows);
        return 0;
    }
    fg.key_n = nblocks + 1;
    fg.key_len = maxlen;
    FILE *g = fg.body.f;
    fputs("reset\nset datafile missing 'NaN'\n", g);
    gp_styles(g, c);
    double pad = (xmax - xmin) * 0.05 + 1;
    /* the y range holds the data and the reference line, with room so the
     * flat lines of broken transforms do not sit on the frame */
    ylo = fmin(ylo, ldexp(1, -(int)fmin(xmax + pad, 1000)));
    yhi = fmax(yhi, ldexp(1, -(int)fmax(xmin - pad, -1000)));
    char yr[128];
    snprintf(yr, sizeof yr, "set yrange [%.3g:%.3g]\n", ylo / 100, yhi * 100);
    fprintf(g,
            "set logscale y\nset format y '10^{%%L}'\nset mytics 1\nset xrange [%g:%g]\nset samples 200\n"
            "set grid xtics ytics lc rgb '#dddddd'\n"
            "set xlabel 'MPFR precision (bits)'\n"
            "set ylabel 'exactness residual ||T(x) - x|| / ||x||'\n"
            "set bmargin %s + 4.5\nset key at screen 0.5, screen 0.01 center bottom vertical maxrows KR Left reverse samplen 2.5 width KW\n"
            "set style line 99 lc rgb '#000000' lw LW dt 2\n%s"
            "plot 2**(-x) with lines ls 99 title '2^{-prec} (equivalent)'",
            xmin - pad, xmax + pad, "KR", yr);
    for (int b = 0; b < nblocks; b++) {
        fprintf(g, ", \\\n     'ce_vs_prec.dat' index %d using 1:2:3:4 with yerrorlines ls %d "
                   "title ",
                b, 2 + styles[b]);
        gp_quote(g, c->tr[styles[b]]);
        fputs(" noenhanced", g);
    }
    fputc('\n', g);
    rc = figure_finish(c, &fg, gnuplot, d) == 0 ? 1 : -1;
    figure_free(&fg);
    free(rows);
    return rc;
}

/* ---- 6: histogram of the ULP drift ---- */

static int plot_drift_hist(const plot_ctx *c, const char *gnuplot, cic_diag *d)
{
    figure fg;
    json_t *h[MAXTR];
    int idx[MAXTR];
    int n = 0, nbins = 0, maxlen = 4, rc;

    if (!c->first)
        return 0;
    for (int i = 0; i < c->ntr && n < MAXTR; i++) {
        json_t *r = first_row(c, c->tr[i], c->engine);
        json_t *a = json_object_get(json_object_get(r, "metrics"), "drift_hist");
        if (!json_is_array(a) || json_array_size(a) == 0)
            continue;
        h[n] = a;
        idx[n++] = i;
        for (size_t b = 0; b < json_array_size(a); b++)
            if (jnum(json_array_get(a, b)) > 0 && (int)b + 1 > nbins)
                nbins = (int)b + 1;
        if ((int)strlen(c->tr[i]) > maxlen)
            maxlen = (int)strlen(c->tr[i]);
    }
    if (n == 0)
        return 0;
    if (nbins < 2)
        nbins = 2;
    if (figure_open(&fg, "drift_hist", d, c->plots) != 0)
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
        dat_name(f, c->tr[idx[k]]);
        fputs("[count]", f);
    }
    fputs("\n# transform: all (one count column per transform, in the order above)\n", f);
    for (int b = 0; b < nbins; b++) {
        double lo = b == 0 ? 0 : ldexp(1, b - 1), hi = b == 0 ? 1 : ldexp(1, b);
        fprintf(f, "%d %.17g %.17g", b, lo, hi);
        for (int k = 0; k < n; k++)
            dat_num(f, jnum(json_array_get(h[k], (size_t)b)));
        fputc('\n', f);
    }
    fg.key_n = n;
    fg.key_len = maxlen;
    FILE *g = fg.body.f;
    fputs("reset\nset datafile missing 'NaN'\n", g);
    gp_styles(g, c);
    fprintf(g,
            "set logscale y\nset format y '10^{%%L}'\nset xrange [-0.5:%g]\nset yrange [0.5:*]\n"
            "set grid ytics lc rgb '#dddddd'\n"
            "set xlabel 'ULP drift, before vs after (bin = [lo, 2 lo))'\n"
            "set ylabel 'count (output elements)'\n"
            "set bmargin %s + 6\nset key at screen 0.5, screen 0.01 center bottom vertical maxrows KR Left reverse samplen 2.5 width KW + 3\n",
            nbins - 0.5, "KR");
    fputs("set xtics (", g);
    int step = nbins > 16 ? 2 : 1;
    for (int b = 0; b < nbins; b += (b < 4 ? 1 : step)) {
        if (b > 0)
            fputs(", ", g);
        if (b == 0)
            fputs("'0' 0", g);
        else if (b == 1)
            fputs("'1' 1", g);
        else if (b <= 4)
            fprintf(g, "'%d-%d' %d", 1 << (b - 1), (1 << b) - 1, b);
        else
            fprintf(g, "'2^{%d}' %d", b - 1, b);
    }
    fputs(")\n", g);
    if (nbins > 10)
        fputs("set xtics rotate by -45\n", g);
    /* bars side by side within a bin, one colour per transform */
    double w = 0.8 / n;
    fprintf(g, "set style fill solid 0.85 noborder\nset boxwidth %.6g absolute\n", w);
    fputs("plot ", g);
    for (int k = 0; k < n; k++) {
        fprintf(g,
                "%s'drift_hist.dat' using ($1 - 0.4 + %.6g):($%d > 0 ? $%d : NaN) with boxes "
                "ls %d title ",
                k ? ", \\\n     " : "", w * (k + 0.5), 4 + k, 4 + k, 2 + idx[k]);
        gp_quote(g, c->tr[idx[k]]);
        fputs(" noenhanced", g);
    }
    fputc('\n', g);
    rc = figure_finish(c, &fg, gnuplot, d) == 0 ? 1 : -1;
    figure_free(&fg);
    return rc;
}

/* ---- entry ---- */

static json_t *load_json(const char *path, cic_diag *d)
{
    json_error_t e;
    json_t *j = json_load_file(path, 0, &e);
    if (!j)
        cic_diag_set(d, path, e.line, e.column, "cannot read JSON: %s", e.text);
    return j;
}

int cic_plot_dir(const char *dir, int *n_written, cic_diag *d)
{
    plot_ctx c;
    char path[4200];
    char gnuplot[4096];
    bool have_gp;
    int made = 0, rc = -1;

    memset(&c, 0, sizeof c);
    if (n_written)
        *n_written = 0;
    if (!dir || !dir[0]) {
        cic_diag_set(d, "", 0, 0, "no folder given to plot");
        return -1;
    }
    c.dir = dir;
    snprintf(path, sizeof path, "%s/sweep.json", dir);
    if (access(path, F_OK) == 0) {
        c.root = load_json(path, d);
        if (!c.root)
            return -1;
        c.sweep = true;
        json_t *pts = json_object_get(c.root, "points");
        c.first = json_object_get(json_array_get(pts, 0), "report");
        c.aggregate = json_object_get(c.root, "aggregate");
        if (!json_is_array(c.aggregate))
            c.aggregate = NULL;
        c.axes = json_object_get(c.root, "axes");
        c.axis_values = json_object_get(c.root, "axis_values");
        if (!json_is_array(c.axes) || !json_is_object(c.axis_values)) {
            c.axes = NULL;
            c.aggregate = NULL;
        }
    } else {
        snprintf(path, sizeof path, "%s/report.json", dir);
        if (access(path, F_OK) != 0) {
            cic_diag_set(d, dir, 0, 0,
                         "nothing to plot: neither sweep.json nor report.json in this folder "
                         "(run `cicheck run` with --out %s first)",
                         dir);
            return -1;
        }
        c.root = load_json(path, d);
        if (!c.root)
            return -1;
        c.first = c.root;
    }
    if (!json_is_object(c.first))
        c.first = NULL;

    json_t *kase = json_object_get(c.root, "case");
    if (!kase && c.first)
        kase = json_object_get(c.first, "case");
    size_t i;
    json_t *t;
    json_array_foreach(json_object_get(kase, "transforms"), i, t) {
        if (c.ntr >= MAXTR)
            break;
        const char *nm = jstr(t, "name");
        if (!nm)
            continue;
        c.tr[c.ntr] = nm;
        c.kind[c.ntr] = jstr(t, "kind");
        c.fast[c.ntr] = json_is_true(json_object_get(t, "fast"));
        c.ntr++;
    }
    /* f32-openblas when the run has it, else the fixed-order engine */
    c.engine = "f32-fixed-order";
    {
        json_t *r;
        json_array_foreach(json_object_get(c.first, "results"), i, r) {
            if (streq(jstr(r, "engine"), "f32-openblas"))
                c.engine = "f32-openblas";
        }
        json_array_foreach(c.aggregate, i, r) {
            if (streq(jstr(r, "engine"), "f32-openblas"))
                c.engine = "f32-openblas";
        }
    }

    snprintf(c.plots, sizeof c.plots, "%s/plots", dir);
    if (cic_mkdir_p(c.plots, d) != 0)
        goto cleanup;
    have_gp = find_gnuplot(gnuplot, sizeof gnuplot) == 0;

    int (*const single[])(const plot_ctx *, const char *, cic_diag *) = {
        plot_ulp_cdf, plot_flops, plot_ce_prec, plot_drift_hist};
    int k;
    k = plot_error_vs(&c, "error_vs_d", "d_model", "'d_model (hidden width)'",
                      have_gp ? gnuplot : NULL, d);
    if (k < 0)
        goto cleanup;
    made += k;
    k = plot_error_vs(&c, "error_vs_depth", "layers", "'layers (blocks in depth)'",
                      have_gp ? gnuplot : NULL, d);
    if (k < 0)
        goto cleanup;
    made += k;
    for (size_t s = 0; s < sizeof single / sizeof single[0]; s++) {
        k = single[s](&c, have_gp ? gnuplot : NULL, d);
        if (k < 0)
            goto cleanup;
        made += k;
    }
    if (!have_gp) {
        cic_diag_set(d, c.plots, 0, 0,
                     "gnuplot not found in PATH: install it (Debian: apt-get install "
                     "gnuplot-nox) to render the plots; the data (.dat) and scripts (.gp) for "
                     "%d plot(s) are written here, run `gnuplot NAME.gp` in this folder",
                     made);
        made = 0;
        goto cleanup;
    }
    rc = 0;
cleanup:
    if (n_written)
        *n_written = made;
    json_decref(c.root);
    return rc;
}
