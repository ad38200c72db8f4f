/* test_plot.c: cic_plot_dir on synthetic sweep.json and report.json files.
 *
 * Each test writes a synthetic input into a mkdtemp folder, plots it, and
 * checks: the files of every plot that applies exist (and none of the plots
 * that do not), PNG/SVG/PDF start as those formats do, and numbers read back
 * from the .dat equal the JSON they came from. Rendering checks are skipped,
 * with a message, when gnuplot is not installed. */
#include "testutil.h"

#include "report/plot.h"

#include <jansson.h>
#include <stdbool.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *const PLOTS[6] = {"error_vs_d", "ulp_cdf", "error_vs_depth",
                                     "flops_vs_tokens", "ce_vs_prec", "drift_hist"};

static bool have_gnuplot(void)
{
    return system("command -v gnuplot >/dev/null 2>&1") == 0;
}

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
    return json_pack("{s:s,s:{s:s,s:i},s:{s:[s,s],s:i},s:o}", "name", "synthetic", "model",
                     "block", block, "d_model", 16, "engines", "f32", "openblas", "fixed-order",
                     "mpfr_prec", 128, "transforms", ts);
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

static void tmpdir(char *buf, size_t cap)
{
    const char *t = getenv("TMPDIR");
    snprintf(buf, cap, "%s/cic-plot-XXXXXX", t && *t ? t : "/tmp");
    assert_non_null(mkdtemp(buf));
}

static void write_json(const char *dir, const char *file, json_t *j)
{
    char p[4200];
    snprintf(p, sizeof p, "%s/%s", dir, file);
    assert_int_equal(json_dump_file(j, p, JSON_INDENT(1)), 0);
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

/* expected: a bit per PLOTS entry */
static void check_files(const char *dir, unsigned expected, bool rendered)
{
    for (int i = 0; i < 6; i++) {
        bool want = expected & (1u << i);
        const char *nm = PLOTS[i];
        if (want != exists(dir, nm, "dat") || want != exists(dir, nm, "gp"))
            fail_msg("%s/plots/%s.dat/.gp: expected %s", dir, nm, want ? "present" : "absent");
        if (!rendered) {
            if (want && i == 0)
                print_message("gnuplot not installed: skipping PNG/SVG/PDF checks\n");
            continue;
        }
        if (want != exists(dir, nm, "png") || want != exists(dir, nm, "svg") ||
            want != exists(dir, nm, "pdf"))
            fail_msg("%s/plots/%s.png/svg/pdf: expected %s", dir, nm, want ? "present" : "absent");
        if (!want)
            continue;
        if (!file_starts(dir, nm, "png", "\x89PNG\r\n\x1a\n", 8, false))
            fail_msg("%s.png: no PNG signature", nm);
        if (!file_starts(dir, nm, "svg", "<svg", 4, true))
            fail_msg("%s.svg: no <svg", nm);
        if (!file_starts(dir, nm, "pdf", "%PDF", 4, false))
            fail_msg("%s.pdf: does not start with %%PDF", nm);
    }
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

static const trdef PRELN[2] = {{"fuse", "fuse-layernorm", false},
                               {"rotate-random", "rotate", false}};

static void test_sweep_d_model(void **state)
{
    (void)state;
    char dir[512];
    int n = -1;
    const double ds[3] = {16, 32, 64};
    const int seeds[2] = {1, 2};
    tmpdir(dir, sizeof dir);
    json_t *j = make_sweep("preln", PRELN, 2, "d_model", ds, 3, seeds, 2);
    write_json(dir, "sweep.json", j);
    bool gp = have_gnuplot();
    int rc = plot(dir, &n);
    if (!gp) {
        assert_int_equal(rc, -1);
    } else {
        assert_int_equal(rc, 0);
        assert_int_equal(n, 3);
    }
    check_files(dir, 1u << 0 | 1u << 1 | 1u << 5, gp);

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
    tmpdir(dir, sizeof dir);
    json_t *j = make_sweep("preln", PRELN, 2, "mpfr_prec", ps, 2, seeds, 1);
    write_json(dir, "sweep.json", j);
    bool gp = have_gnuplot();
    int rc = plot(dir, &n);
    assert_int_equal(rc, gp ? 0 : -1);
    if (gp)
        assert_int_equal(n, 3);
    check_files(dir, 1u << 4 | 1u << 1 | 1u << 5, gp);
    assert_true(dat_value(dir, "ce_vs_prec", "fuse", 64, 1) == v_ce(0, 64));
    assert_true(dat_value(dir, "ce_vs_prec", "rotate-random", 128, 3) == 2e-3);
    json_decref(j);
}

static void test_sweep_dit_tokens(void **state)
{
    (void)state;
    char dir[512];
    int n = -1;
    const double ts[2] = {16, 64};
    const int seeds[2] = {1, 2};
    const trdef dit[4] = {{"online-dense", "online-unrotate", false},
                          {"online-fast", "online-unrotate", true},
                          {"per-sample", "per-sample-fold", false},
                          {"static", "static-fold", false}};
    tmpdir(dir, sizeof dir);
    json_t *j = make_sweep("dit", dit, 4, "tokens", ts, 2, seeds, 2);
    write_json(dir, "sweep.json", j);
    bool gp = have_gnuplot();
    int rc = plot(dir, &n);
    assert_int_equal(rc, gp ? 0 : -1);
    if (gp)
        assert_int_equal(n, 3);
    check_files(dir, 1u << 3 | 1u << 1 | 1u << 5, gp);
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
    tmpdir(dir, sizeof dir);
    json_t *kase = make_case("preln", tr, 2);
    json_t *r = make_report(kase, tr, 2, 16, 1, 16, false);
    json_decref(kase);
    write_json(dir, "report.json", r);
    bool gp = have_gnuplot();
    int rc = plot(dir, &n);
    assert_int_equal(rc, gp ? 0 : -1);
    if (gp)
        assert_int_equal(n, 2);
    check_files(dir, 1u << 1 | 1u << 5, gp);
    assert_true(dat_value(dir, "ulp_cdf", "it's_\"odd\"", 1, 1) ==
                0.01 * 100 * 2 * (1 + 100 / 20.0));
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
    tmpdir(dir, sizeof dir);
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
    char p[4200];
    snprintf(p, sizeof p, "%s/sweep.json", dir);
    FILE *f = fopen(p, "w");
    assert_non_null(f);
    fputs("{\"kind\": \"sweep\", ", f);
    fclose(f);
    memset(&d, 0, sizeof d);
    assert_int_equal(cic_plot_dir(dir, &n, &d), -1);
    assert_non_null(strstr(d.msg, "JSON"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sweep_d_model),   cmocka_unit_test(test_sweep_prec),
        cmocka_unit_test(test_sweep_dit_tokens), cmocka_unit_test(test_single_report),
        cmocka_unit_test(test_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
