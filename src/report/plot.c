/* SPDX-License-Identifier: MIT */
/* plot.c: cic_plot_dir (plot.h): reads sweep.json or report.json, checks
 * that it has the shape cicheck writes, and draws every figure the data
 * calls for into DIR/plots/.
 *
 * Input checks: a report is user-supplied input (it may be edited, cut
 * short, or not a cicheck file at all), so every key the figures read is
 * checked for its type first, and a file that gives nothing to draw is an
 * error rather than "0 plots": the message names the file and the key.
 *
 * Concurrency: two runs may draw into one plots/ folder at once (a sweep
 * and a `cicheck plot` of it, or two shards). Each call makes a private
 * work folder plots/.render-XXXXXX (mkdtemp), writes and renders there, and
 * renames each finished file into plots/ (plot_gp.c), so neither can delete
 * or overwrite a file the other is still checking, and a reader sees each
 * file either old or new, never half written. */
#include "plot_int.h"
#include "../base/json_type.h"

#include "baseline.h"
#include "report.h"

#include <errno.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- input checks ---- */

/* One report (all of report.json, or points[k].report of a sweep); pre is
 * the key path of the report inside the file ("" or "points[0].report."). */
static int check_report(const char *file, const char *pre, const json_t *rep, cic_diag *d)
{
    char key[256];
    size_t i;
    json_t *r;
    int with_metrics = 0;

    if (!json_is_object(rep)) {
        if (pre[0])
            cic_diag_set(d, file, 0, 0, "key '%.*s': must be an object (a cicheck report), "
                                        "found %s",
                         (int)strlen(pre) - 1, pre, cic_json_type_name(rep));
        else
            cic_diag_set(d, file, 0, 0, "the top level must be an object (a cicheck report), "
                                        "found %s",
                         cic_json_type_name(rep));
        return -1;
    }
    json_t *kase = json_object_get(rep, "case");
    if (!json_is_object(kase)) {
        cic_diag_set(d, file, 0, 0, "key '%scase': must be an object (the case that was run), "
                                    "found %s",
                     pre, cic_json_type_name(kase));
        return -1;
    }
    json_t *trs = json_object_get(kase, "transforms");
    if (trs && !json_is_array(trs)) {
        cic_diag_set(d, file, 0, 0, "key '%scase.transforms': must be an array, found %s", pre,
                     cic_json_type_name(trs));
        return -1;
    }
    json_array_foreach(trs, i, r) {
        json_t *nm = json_object_get(r, "name");
        if (!json_is_object(r) || !json_is_string(nm)) {
            cic_diag_set(d, file, 0, 0, "key '%scase.transforms[%zu]%s': must be %s, found %s",
                         pre, i, json_is_object(r) ? ".name" : "",
                         json_is_object(r) ? "a string" : "an object",
                         cic_json_type_name(json_is_object(r) ? nm : r));
            return -1;
        }
    }
    json_t *res = json_object_get(rep, "results");
    if (!json_is_array(res)) {
        cic_diag_set(d, file, 0, 0, "key '%sresults': must be an array of result rows, found %s",
                     pre, cic_json_type_name(res));
        return -1;
    }
    json_array_foreach(res, i, r) {
        static const char *const skeys[2] = {"transform", "engine"};
        if (!json_is_object(r)) {
            cic_diag_set(d, file, 0, 0, "key '%sresults[%zu]': must be an object, found %s", pre,
                         i, cic_json_type_name(r));
            return -1;
        }
        for (int k = 0; k < 2; k++) {
            json_t *v = json_object_get(r, skeys[k]);
            if (!json_is_string(v)) {
                cic_diag_set(d, file, 0, 0, "key '%sresults[%zu].%s': must be a string, found %s",
                             pre, i, skeys[k], cic_json_type_name(v));
                return -1;
            }
        }
        json_t *m = json_object_get(r, "metrics");
        if (m && !json_is_object(m) && !json_is_null(m)) {
            cic_diag_set(d, file, 0, 0, "key '%sresults[%zu].metrics': must be an object or "
                                        "null, found %s",
                         pre, i, cic_json_type_name(m));
            return -1;
        }
        static const char *const akeys[2] = {"ulp_row_quantiles", "drift_hist"};
        for (int k = 0; k < 2; k++) {
            json_t *a = json_object_get(m, akeys[k]);
            snprintf(key, sizeof key, "%sresults[%zu].metrics.%s", pre, i, akeys[k]);
            if (a && !json_is_null(a) && cic_plot_check_nums(file, key, a, d) != 0)
                return -1;
        }
        json_t *fl = json_object_get(r, "flops");
        if (fl && !json_is_object(fl) && !json_is_null(fl)) {
            cic_diag_set(d, file, 0, 0, "key '%sresults[%zu].flops': must be an object or null, "
                                        "found %s",
                         pre, i, cic_json_type_name(fl));
            return -1;
        }
        if (json_is_object(m) && json_object_size(m) > 0)
            with_metrics++;
    }
    if (with_metrics == 0) {
        cic_diag_set(d, file, 0, 0,
                     "key '%sresults': no row has metrics (%s): nothing to plot", pre,
                     json_array_size(res) ? "every 'metrics' is null or empty"
                                          : "the array is empty");
        return -1;
    }
    json_t *fa = json_object_get(rep, "flops_analytical");
    if (fa && !json_is_null(fa)) {
        json_t *pct = json_object_get(fa, "extra_pct");
        const char *k;
        json_t *a;
        if (!json_is_object(fa) || !json_is_object(pct)) {
            cic_diag_set(d, file, 0, 0, "key '%sflops_analytical%s': must be an object, found %s",
                         pre, json_is_object(fa) ? ".extra_pct" : "",
                         cic_json_type_name(json_is_object(fa) ? pct : fa));
            return -1;
        }
        snprintf(key, sizeof key, "%sflops_analytical.tokens", pre);
        if (cic_plot_check_nums(file, key, json_object_get(fa, "tokens"), d) != 0)
            return -1;
        json_object_foreach(pct, k, a) {
            snprintf(key, sizeof key, "%sflops_analytical.extra_pct.%s", pre, k);
            if (cic_plot_check_nums(file, key, a, d) != 0)
                return -1;
        }
    }
    return cic_plot_lowp_check(file, pre, rep, d);
}

/* sweep.json: the sweep's own keys, then the first point's report, whose
 * index is returned in *first (-1 with d set on error). */
static int check_sweep(const char *file, const json_t *root, int *first, cic_diag *d)
{
    size_t i;
    json_t *v;
    char pre[64];

    *first = -1;
    if (!json_is_object(root)) {
        cic_diag_set(d, file, 0, 0, "the top level must be an object (a cicheck sweep), found %s",
                     cic_json_type_name(root));
        return -1;
    }
    json_t *kase = json_object_get(root, "case");
    if (!json_is_object(kase)) {
        cic_diag_set(d, file, 0, 0, "key 'case': must be an object, found %s", cic_json_type_name(kase));
        return -1;
    }
    json_t *axes = json_object_get(root, "axes");
    if (!json_is_array(axes)) {
        cic_diag_set(d, file, 0, 0, "key 'axes': must be an array of axis names, found %s",
                     cic_json_type_name(axes));
        return -1;
    }
    json_t *vals = json_object_get(root, "axis_values");
    if (!json_is_object(vals)) {
        cic_diag_set(d, file, 0, 0, "key 'axis_values': must be an object, found %s",
                     cic_json_type_name(vals));
        return -1;
    }
    json_array_foreach(axes, i, v) {
        json_t *a = json_is_string(v) ? json_object_get(vals, json_string_value(v)) : NULL;
        if (!json_is_string(v)) {
            cic_diag_set(d, file, 0, 0, "key 'axes[%zu]': must be a string, found %s", i,
                         cic_json_type_name(v));
            return -1;
        }
        if (!json_is_array(a)) {
            cic_diag_set(d, file, 0, 0, "key 'axis_values.%s': must be an array, found %s",
                         json_string_value(v), cic_json_type_name(a));
            return -1;
        }
    }
    json_t *agg = json_object_get(root, "aggregate");
    if (!json_is_array(agg)) {
        cic_diag_set(d, file, 0, 0, "key 'aggregate': must be an array, found %s", cic_json_type_name(agg));
        return -1;
    }
    json_array_foreach(agg, i, v) {
        static const char *const keys[4] = {"transform", "engine", "params", "values"};
        if (!json_is_object(v)) {
            cic_diag_set(d, file, 0, 0, "key 'aggregate[%zu]': must be an object, found %s", i,
                         cic_json_type_name(v));
            return -1;
        }
        for (int k = 0; k < 4; k++) {
            json_t *e = json_object_get(v, keys[k]);
            bool ok = k < 2 ? json_is_string(e) : json_is_object(e);
            if (!ok) {
                cic_diag_set(d, file, 0, 0, "key 'aggregate[%zu].%s': must be %s, found %s", i,
                             keys[k], k < 2 ? "a string" : "an object", cic_json_type_name(e));
                return -1;
            }
        }
    }
    json_t *pts = json_object_get(root, "points");
    if (!json_is_array(pts) || json_array_size(pts) == 0) {
        cic_diag_set(d, file, 0, 0, "key 'points': must be a non-empty array, found %s",
                     json_is_array(pts) ? "an empty array" : cic_json_type_name(pts));
        return -1;
    }
    json_array_foreach(pts, i, v) {
        json_t *rep = json_object_get(v, "report");
        json_t *par = json_object_get(v, "params");
        if (!json_is_object(v) || !json_is_object(par)) {
            cic_diag_set(d, file, 0, 0, "key 'points[%zu]%s': must be an object, found %s", i,
                         json_is_object(v) ? ".params" : "", cic_json_type_name(json_is_object(v) ? par : v));
            return -1;
        }
        /* a point that failed has a null report */
        if (json_is_null(rep) || !rep)
            continue;
        snprintf(pre, sizeof pre, "points[%zu].report.", i);
        if (check_report(file, pre, rep, d) != 0)
            return -1;
        if (*first < 0)
            *first = (int)i;
    }
    if (*first < 0) {
        cic_diag_set(d, file, 0, 0,
                     "key 'points': no point has a report (every 'report' is null): nothing to "
                     "plot");
        return -1;
    }
    return 0;
}

/* never blocks on a FIFO, never reads without bound */
static json_t *load_json(const char *path, cic_diag *d)
{
    return cic_report_json_load(path, CIC_SWEEP_JSON_MAX, d);
}

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

/* ---- entry ---- */

/* dir's sweep.json (its first point standing for one run) or, failing
 * that, its report.json, checked, into c; path receives the file's name. */
static int load_input(cic_plot_ctx *c, const char *dir, char *path, size_t cap, cic_diag *d)
{
    snprintf(path, cap, "%s/sweep.json", dir);
    if (access(path, F_OK) == 0) {
        int first;
        c->root = load_json(path, d);
        if (!c->root || check_sweep(path, c->root, &first, d) != 0)
            return -1;
        c->sweep = true;
        json_t *pt = json_array_get(json_object_get(c->root, "points"), (size_t)first);
        c->first = json_object_get(pt, "report");
        c->first_params = json_object_get(pt, "params");
        c->aggregate = json_object_get(c->root, "aggregate");
        c->axes = json_object_get(c->root, "axes");
        c->axis_values = json_object_get(c->root, "axis_values");
        return 0;
    }
    snprintf(path, cap, "%s/report.json", dir);
    if (access(path, F_OK) != 0) {
        cic_diag_set(d, dir, 0, 0,
                     "nothing to plot: neither sweep.json nor report.json in this folder "
                     "(run `cicheck run` with --out %s first)",
                     dir);
        return -1;
    }
    c->root = load_json(path, d);
    if (!c->root || check_report(path, "", c->root, d) != 0)
        return -1;
    c->first = c->root;
    return 0;
}

/* The case's name and transforms, and the f32 engine to plot: f32-openblas
 * when the run has it, else the fixed-order engine. */
static void read_case(cic_plot_ctx *c)
{
    json_t *kase = json_object_get(c->root, "case"), *t, *r;
    size_t i;

    c->case_name = cic_plot_jstr(kase, "name");
    if (!c->case_name)
        c->case_name = cic_plot_jstr(json_object_get(c->first, "case"), "name");
    json_array_foreach(json_object_get(kase, "transforms"), i, t) {
        if (c->ntr >= CIC_PLOT_MAXTR)
            break;
        const char *nm = cic_plot_jstr(t, "name");
        if (!nm)
            continue;
        c->tr[c->ntr] = nm;
        c->kind[c->ntr] = cic_plot_jstr(t, "kind");
        c->fast[c->ntr] = json_is_true(json_object_get(t, "fast"));
        c->ntr++;
    }
    c->engine = CIC_PLOT_F32_FIXED;
    json_array_foreach(json_object_get(c->first, "results"), i, r) {
        if (cic_plot_streq(cic_plot_jstr(r, "engine"), CIC_PLOT_F32_BLAS))
            c->engine = CIC_PLOT_F32_BLAS;
    }
    json_array_foreach(c->aggregate, i, r) {
        if (cic_plot_streq(cic_plot_jstr(r, "engine"), CIC_PLOT_F32_BLAS))
            c->engine = CIC_PLOT_F32_BLAS;
    }
}

/* Every figure the data calls for, counted in *made; 0, or -1 with d set
 * (*made then counts those drawn before). */
static int draw_all(const cic_plot_ctx *c, int *made, cic_diag *d)
{
    int (*const single[])(const cic_plot_ctx *, cic_diag *) = {
        cic_plot_ulp_cdf,   cic_plot_flops,         cic_plot_ce_prec,     cic_plot_drift_hist,
        cic_plot_lowp_sqnr, cic_plot_lowp_kurtosis, cic_plot_lowp_chanmax,
        cic_plot_error_vs_block};
    int k;
    k = cic_plot_error_vs(c, "error_vs_d", "d_model", "hidden width d_model (channels)", d);
    if (k < 0)
        return -1;
    *made += k;
    k = cic_plot_error_vs(c, "error_vs_depth", "layers", "depth (layers)", d);
    if (k < 0)
        return -1;
    *made += k;
    for (size_t s = 0; s < sizeof single / sizeof single[0]; s++) {
        k = single[s](c, d);
        if (k < 0)
            return -1;
        *made += k;
    }
    return 0;
}

int cic_plot_dir(const char *dir, int *n_written, cic_diag *d)
{
    cic_plot_ctx c;
    char path[4200], plots[4200], work[4300];
    char gnuplot[4096];
    int made = 0, rc = -1;
    bool have_work = false;

    memset(&c, 0, sizeof c);
    if (n_written)
        *n_written = 0;
    if (!dir || !dir[0]) {
        cic_diag_set(d, "", 0, 0, "no folder given to plot");
        return -1;
    }
    /* plots/ is cicheck's own folder: a link planted there is refused
     * before anything is drawn */
    snprintf(plots, sizeof plots, "%s/plots", dir);
    if (cic_out_check(dir, plots, NULL, d) != 0)
        return -1;
    if (load_input(&c, dir, path, sizeof path, d) != 0)
        goto cleanup;
    c.src = path;
    read_case(&c);

    /* from here every failure is a lost result: -2 */
    rc = -2;
    if (cic_mkdir_under(dir, plots, d) != 0)
        goto cleanup;
    snprintf(work, sizeof work, "%s/.render-XXXXXX", plots);
    if (!mkdtemp(work)) {
        cic_diag_set(d, plots, 0, 0, "cannot make a work folder here: %s", strerror(errno));
        goto cleanup;
    }
    have_work = true;
    c.plots = plots;
    c.work = work;
    c.gnuplot = find_gnuplot(gnuplot, sizeof gnuplot) == 0 ? gnuplot : NULL;

    if (draw_all(&c, &made, d) != 0)
        goto cleanup;
    rc = -1;
    if (made == 0) {
        cic_diag_set(d, path, 0, 0,
                     "nothing to plot: no row of engine %s has 'metrics.ulp_row_quantiles' or "
                     "'metrics.drift_hist', and no figure applies to the swept axes",
                     c.engine);
        goto cleanup;
    }
    if (!c.gnuplot) {
        cic_diag_set(d, plots, 0, 0,
                     "gnuplot not found in PATH: install it (Debian: apt-get install "
                     "gnuplot-nox) to render the plots; the data (.dat) and scripts (.gp) for "
                     "%d plot(s) are written here, run `gnuplot NAME.gp` in this folder",
                     made);
        made = 0;
        goto cleanup;
    }
    rc = 0;
cleanup:
    /* every figure moved its files out or removed them */
    if (have_work && rmdir(work) != 0 && rc == 0) {
        cic_diag_set(d, work, 0, 0, "cannot remove the work folder: %s", strerror(errno));
        rc = -2;
    }
    if (n_written)
        *n_written = made;
    json_decref(c.root);
    return rc;
}
