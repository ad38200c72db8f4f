/* SPDX-License-Identifier: MIT */
/* run.c: one `cicheck run` of one case file.
 *
 * Order of work: load and check the case; build the original model; compute
 * the MPFR truth and certify it on one sample at prec + 64 bits; run each
 * f32 engine on the original (the "before" figures); then per transform
 * build the model, run it in MPFR with the unrounded weights (the verdict),
 * in MPFR with the rounded weights (the decomposition) and in every f32
 * engine (the errors and the drift); check expectations and gates; print the
 * table, write report.json atomically, and dump when asked. */
#include "run.h"

#include "../base/mpvec.h"
#include "../case/case.h"
#include "../engine/engine.h"
#include "../metric/flops.h"
#include "../metric/metric.h"
#include "../model/model.h"
#include "../report/conclusion.h"
#include "../report/dump.h"
#include "../report/report.h"
#include "../xform/xform.h"

#include <math.h>
#include <stdarg.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

typedef struct {
    char name[128];
    float *f32;     /* rows x cols, or NULL */
    mpfr_t *mp;     /* rows x cols at prec, or NULL */
} saved_out;

typedef struct {
    const cic_run_args *a;
    cic_case c;
    mpfr_prec_t prec;
    cic_model *orig;
    cic_model *xm[CIC_MAX_XFORMS];
    size_t rows, cols, n;
    mpfr_t *truth;
    mpfr_t *ref;      /* what ce compares with: truth, or the original in f64 */
    mpfr_t *ref_own;  /* ref when it is not the truth */
    float *before[CIC_MATMUL_COUNT];
    cic_flop_count base_counted, base_analytical;
    cic_result *res;
    int n_res;
    cic_gate_result *gates;
    int n_gates;
    saved_out saved[2 + CIC_MAX_XFORMS * (CIC_MATMUL_COUNT + 1)];
    int n_saved;
    double t0;
} run;

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void progress(run *r, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void progress(run *r, const char *fmt, ...)
{
    va_list ap;
    if (r->a->quiet)
        return;
    fprintf(stderr, "[%s %6.1fs] ", r->c.name, now() - r->t0);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
}

/* ---- progress bar (MPFR work on a terminal) ---- */

/* State of one MPFR run's bar: drawn on stderr when it is a TTY, once the
 * run has taken a second, with the share of the run's FLOPs done and an ETA
 * from the rate so far. Elsewhere the stage lines are all the progress. */
typedef struct {
    run *r;
    const char *label;
    double total, t0;
    bool drawn;
} bar;

static void bar_tick(void *ctx, double done)
{
    bar *b = ctx;
    double el = now() - b->t0, f = b->total > 0 ? done / b->total : 0;
    int i, w = 30, fill;
    if (el < 1.0 || f <= 0)
        return;
    if (f > 1)
        f = 1;
    fill = (int)(f * w);
    fprintf(stderr, "\r[%s] %-28.28s [", b->r->c.name, b->label);
    for (i = 0; i < w; i++)
        fputc(i < fill ? '#' : '-', stderr);
    fprintf(stderr, "] %3.0f%% ETA %4.0fs ", 100 * f, el / f - el);
    fflush(stderr);
    b->drawn = true;
}

/* Hook the bar into o when stderr is a terminal and progress is wanted. */
static void bar_start(bar *b, run *r, const char *label, double total, cic_run_opts *o)
{
    b->r = r;
    b->label = label;
    b->total = total;
    b->t0 = now();
    b->drawn = false;
    if (!r->a->quiet && isatty(fileno(stderr))) {
        o->progress = bar_tick;
        o->progress_ctx = b;
    }
}

static void bar_end(bar *b)
{
    if (b->drawn)
        fputc('\n', stderr);
}

/* The weights drawn so far (model progress) on the same bar. */
static void bar_weights(void *ctx, double done, double total)
{
    bar *b = ctx;
    b->total = total;
    bar_tick(b, done);
}

/* The original model, with a stage line and, on a terminal, a bar while its
 * weights are drawn (seconds at d = 1152, more at d = 4096). */
static cic_model *build_original(run *r)
{
    bar b;
    cic_run_opts o;
    cic_model_progress p = {NULL, NULL};
    cic_model *m;
    memset(&o, 0, sizeof o);
    progress(r, "weights: drawing about %.3g values from seed %llu",
             (double)cic_case_weight_count(&r->c), (unsigned long long)r->c.model.seed);
    bar_start(&b, r, "weights", 0, &o);
    if (o.progress) {
        p.fn = bar_weights;
        p.ctx = &b;
    }
    m = cic_model_create_progress(&r->c.model, r->c.readout, &p);
    bar_end(&b);
    return m;
}

/* ---- readout map ---- */

/* dst = map(src) for model m: the residual readout in the original basis,
 * y Q^T then centered (when the model says so); a plain copy for the head
 * readout. All at prec bits; src values may have any precision <= prec. */
static int map_out(run *r, mpfr_t *dst, const mpfr_t *src, const cic_model *m)
{
    size_t i, j, rows = r->rows, cols = r->cols;
    mpfr_prec_t sp = r->prec;
    const mpfr_t *q = (const mpfr_t *)m->out_q;
    if (q && m->out_q_prec > sp)
        sp = m->out_q_prec;
    if (q) {
        cic_dot_scratch s;
        mpfr_t *row = cic_mpvec_create(cols, r->prec);
        if (!row || cic_dot_scratch_init(&s, cols, sp) < 0) {
            cic_mpvec_destroy(row, cols);
            return -1;
        }
        for (i = 0; i < rows; i++) {
            for (j = 0; j < cols; j++) /* (y Q^T)_j = sum_k y_k Q[j,k] */
                cic_mp_dot(row[j], src + i * cols, 1, q + j * cols, 1,
                           cols, NULL, &s);
            for (j = 0; j < cols; j++)
                mpfr_set(dst[i * cols + j], row[j], MPFR_RNDN);
        }
        cic_dot_scratch_clear(&s);
        cic_mpvec_destroy(row, cols);
    } else if (dst != src) {
        for (i = 0; i < rows * cols; i++)
            mpfr_set(dst[i], src[i], MPFR_RNDN);
    }
    if (m->center_out) {
        mpfr_ptr *ptr = cic_calloc(cols, sizeof *ptr);
        mpfr_t mean;
        if (!ptr)
            return -1;
        mpfr_init2(mean, r->prec);
        for (i = 0; i < rows; i++) {
            for (j = 0; j < cols; j++)
                ptr[j] = dst[i * cols + j];
            mpfr_sum(mean, ptr, cols, MPFR_RNDN);
            mpfr_div_ui(mean, mean, cols, MPFR_RNDN);
            for (j = 0; j < cols; j++)
                mpfr_sub(dst[i * cols + j], dst[i * cols + j], mean, MPFR_RNDN);
        }
        mpfr_clear(mean);
        free(ptr);
    }
    return 0;
}

static bool needs_map(const cic_model *m)
{
    return m->out_q != NULL || m->center_out;
}

/* Map a float output in place (mapped in MPFR, rounded once back to
 * binary32: the scored value carries at most half an ULP of that rounding). */
static int map_out_f32(run *r, float *y, const cic_model *m)
{
    mpfr_t *v;
    int rc;
    if (!needs_map(m))
        return 0;
    v = cic_mpvec_create(r->n, r->prec);
    if (!v)
        return -1;
    cic_mpvec_set_f32(v, y, r->n);
    rc = map_out(r, v, (const mpfr_t *)v, m);
    if (rc == 0)
        cic_mpvec_get_f32(y, (const mpfr_t *)v, r->n);
    cic_mpvec_destroy(v, r->n);
    return rc;
}

/* ---- results ---- */

static cic_result *new_result(run *r, const char *xf, const char *engine)
{
    cic_result *x = &r->res[r->n_res++];
    memset(x, 0, sizeof *x);
    cic_strlcpy(x->transform, xf, sizeof x->transform);
    cic_strlcpy(x->engine, engine, sizeof x->engine);
    x->pass = true;
    return x;
}

static void save_out(run *r, const char *name, float *f, mpfr_t *mp)
{
    saved_out *s = &r->saved[r->n_saved++];
    cic_strlcpy(s->name, name, sizeof s->name);
    s->f32 = f;
    s->mp = mp;
}

static bool sites_equal(const cic_flop_count *a, const cic_flop_count *b)
{
    int i;
    for (i = 0; i < CIC_SITE_COUNT; i++)
        if (a->site[i] != b->site[i])
            return false;
    return true;
}

static void fill_flops(run *r, cic_flops *f, const cic_flop_count *counted,
                       const cic_flop_count *analytical, bool engines_agree)
{
    int i;
    double R = (double)r->rows, B = r->c.model.samples;
    memset(f, 0, sizeof *f);
    f->baseline = cic_flop_total(&r->base_counted);
    f->transformed = cic_flop_total(counted);
    f->analytical_baseline = cic_flop_total(&r->base_analytical);
    f->analytical_transformed = cic_flop_total(analytical);
    f->extra_total = f->transformed - f->baseline;
    f->extra_per_token = f->extra_total / R;
    f->extra_per_sample = f->extra_total / B;
    f->extra_pct = f->baseline > 0 ? 100.0 * f->extra_total / f->baseline : 0;
    f->counted_matches_analytical = engines_agree &&
        sites_equal(counted, analytical) &&
        sites_equal(&r->base_counted, &r->base_analytical);
    for (i = 0; i < CIC_SITE_COUNT && i < CIC_MAX_SITES; i++) {
        cic_strlcpy(f->sites[i].name, CIC_SITE_NAME[i], sizeof f->sites[i].name);
        f->sites[i].analytical = analytical->site[i] - r->base_analytical.site[i];
        f->sites[i].counted = counted->site[i] - r->base_counted.site[i];
    }
    f->n_sites = i;
}


static bool name_match(const char *pat, const char *s)
{
    return strcmp(pat, "*") == 0 || strcmp(pat, s) == 0;
}

static void eval_gates(run *r)
{
    int g, i;
    for (g = 0; g < r->c.n_gates; g++) {
        const cic_gate_spec *gs = &r->c.gates[g];
        for (i = 0; i < r->n_res; i++) {
            cic_result *x = &r->res[i];
            double v;
            cic_gate_result *gr;
            if (!name_match(gs->transform, x->transform) || !name_match(gs->engine, x->engine))
                continue;
            if (!cic_result_metric(x, gs->metric, &v))
                continue;
            gr = &r->gates[r->n_gates++];
            memset(gr, 0, sizeof *gr);
            cic_strlcpy(gr->transform, x->transform, sizeof gr->transform);
            cic_strlcpy(gr->engine, x->engine, sizeof gr->engine);
            cic_strlcpy(gr->metric, gs->metric, sizeof gr->metric);
            gr->limit = gs->max;
            gr->value = v;
            gr->line = gs->line;
            /* NaN never passes a gate */
            gr->pass = v <= gs->max;
            if (!gr->pass)
                x->pass = false;
        }
    }
}

/* A row whose every output is NaN or Inf has nothing to score: it fails
 * whatever its gates say (its figures are NaN or +Inf already). */
static void score_f32(run *r, cic_result *x, const float *y)
{
    cic_metric_error(&x->metrics, (const mpfr_t *)r->truth, y, r->rows, r->cols, r->prec);
    if (r->n > 0 && x->metrics.nonfinite == r->n)
        x->pass = false;
}

/* ---- stages ---- */

/* Closed-form FLOPs of the original model (i = -1) or of transform i. */
static void flops_formula(const run *r, cic_flop_count *fc, int i)
{
    if (r->c.model.block == CIC_BLOCK_DIT)
        cic_flops_dit(fc, &r->c.model, i >= 0 ? &r->c.xf[i] : NULL);
    else
        cic_flops_analytical(fc, &r->c.model, r->c.readout,
                             i >= 0 ? cic_flops_norm_after(&r->c, i)
                                    : cic_flops_norm_original(&r->c.model));
}

static int stage_truth(run *r, cic_report *rep)
{
    cic_run_opts o;
    mpfr_t *cert = NULL;
    size_t per = (size_t)r->c.model.tokens * r->cols, i;
    bar cb;
    double maxrel = 0;
    bool same = true;
    bar b;
    memset(&o, 0, sizeof o);
    o.flops = &r->base_counted;
    progress(r, "truth: original model in MPFR at %ld bits", (long)r->prec);
    flops_formula(r, &r->base_analytical, -1);
    bar_start(&b, r, "truth", cic_flop_total(&r->base_analytical), &o);
    if (cic_engine_mpfr_run(r->truth, r->orig, r->prec, false, &o) < 0)
        return -1;
    bar_end(&b);
    if (map_out(r, r->truth, (const mpfr_t *)r->truth, r->orig) < 0)
        return -1;
    /* certify on sample 0 at prec + 64 */
    progress(r, "certify: sample 0 at %ld bits", (long)r->prec + 64);
    cert = cic_mpvec_create(per, r->prec + 64);
    if (!cert)
        return -1;
    memset(&o, 0, sizeof o);
    o.n_samples = 1;
    bar_start(&cb, r, "certify", cic_flop_total(&r->base_analytical) / r->c.model.samples, &o);
    if (cic_engine_mpfr_run(cert, r->orig, r->prec + 64, false, &o) < 0) {
        cic_mpvec_destroy(cert, per);
        return -1;
    }
    if (needs_map(r->orig)) {
        /* the map works on the run's rows; apply it to this sample's rows */
        size_t keep = r->rows;
        r->rows = (size_t)r->c.model.tokens;
        if (map_out(r, cert, (const mpfr_t *)cert, r->orig) < 0) {
            r->rows = keep;
            cic_mpvec_destroy(cert, per);
            return -1;
        }
        r->rows = keep;
    }
    {
        mpfr_t diff;
        mpfr_init2(diff, r->prec + 64);
        for (i = 0; i < per; i++) {
            if (cic_mp_get_f32(cert[i]) != cic_mp_get_f32(r->truth[i]))
                same = false;
            mpfr_sub(diff, cert[i], r->truth[i], MPFR_RNDN);
            if (!mpfr_zero_p(cert[i])) {
                double rel;
                mpfr_div(diff, diff, cert[i], MPFR_RNDN);
                rel = fabs(mpfr_get_d(diff, MPFR_RNDU));
                if (rel > maxrel)
                    maxrel = rel;
            }
        }
        mpfr_clear(diff);
    }
    cic_mpvec_destroy(cert, per);
    bar_end(&cb);
    rep->truth_cert_diff = maxrel;
    /* a handful of roundings at prec bits each: far below 2^(16 - prec) */
    rep->truth_certified = same && maxrel <= ldexp(1.0, 16 - (int)r->prec);
    return 0;
}

/* Every figure is scored against the truth, so it must be a number. The
 * loader's limits keep the weights finite; should the model still overflow
 * MPFR's exponent range, the case is refused here with where it happened. */
static bool truth_nonfinite(const run *r, cic_diag *d)
{
    size_t i, bad = 0, first = 0;
    for (i = 0; i < r->n; i++)
        if (!mpfr_number_p(r->truth[i]) && bad++ == 0)
            first = i;
    if (bad == 0)
        return false;
    cic_diag_set(d, r->c.path, 0, 0,
                 "case '%s': %zu of the %zu truth values are not numbers (the first at "
                 "row %zu, column %zu): the model overflows even in MPFR, so no error "
                 "can be scored; lower std or outlier_scale in [model.weights]",
                 r->c.name, bad, r->n, first / r->cols, first % r->cols);
    return true;
}

static bool engine_on(const cic_case *c, int e)
{
    return e == CIC_MATMUL_OPENBLAS ? c->f32_openblas : c->f32_fixed;
}

static int stage_before(run *r)
{
    int e;
    for (e = 0; e < CIC_MATMUL_COUNT; e++) {
        cic_result *x;
        cic_run_opts o;
        cic_flop_count fc;
        char nm[128];
        if (!engine_on(&r->c, e))
            continue;
        progress(r, "before: %s", CIC_ENGINE_F32_NAME[e]);
        r->before[e] = cic_calloc(r->n, sizeof(float));
        if (!r->before[e])
            return -1;
        memset(&o, 0, sizeof o);
        memset(&fc, 0, sizeof fc);
        o.flops = &fc;
        if (cic_engine_f32_run(r->before[e], r->orig, (enum cic_matmul)e, &o) < 0 ||
            map_out_f32(r, r->before[e], r->orig) < 0)
            return -1;
        x = new_result(r, "none", CIC_ENGINE_F32_NAME[e]);
        x->has_metrics = true;
        score_f32(r, x, r->before[e]);
        fill_flops(r, &x->flops, &fc, &r->base_analytical, sites_equal(&fc, &r->base_counted));
        x->n_samples = 0;
        snprintf(nm, sizeof nm, "%s:none", CIC_ENGINE_F32_NAME[e]);
        save_out(r, nm, r->before[e], NULL);
    }
    return 0;
}

/* The exactness row's engine: "mpfr", or "f64" when the case asks for the
 * f64 engine to give the verdicts. */
static const char *verdict_label(const run *r)
{
    return CIC_VERDICT_ENGINE_NAME[r->c.verdict_engine];
}

/* Are the verdict engine's outputs for this transform the same bits on every
 * machine? Not when OpenBLAS computed the transform or the verdict run: its
 * kernels and thread counts move the last bits, so no hash is pinned. */
static bool reproducible(const run *r, const char *transform)
{
    int i;
    if (r->c.verdict_engine == CIC_VERDICT_ENGINE_F64_BLAS)
        return false;
    for (i = 0; i < r->c.n_xf; i++)
        if (!strcmp(r->c.xf[i].name, transform))
            break;
    /* the transform and every one it was applied after */
    for (; i >= 0 && i < r->c.n_xf; i = r->c.xf[i].after)
        if (r->c.xf[i].prec == CIC_TPREC_F64_BLAS)
            return false;
    return true;
}

/* Verdicts from the f64 engine (fixed order or OpenBLAS)? */
static bool verdict_f64(const run *r)
{
    return r->c.verdict_engine == CIC_VERDICT_ENGINE_F64 ||
           r->c.verdict_engine == CIC_VERDICT_ENGINE_F64_BLAS;
}

/* Run m in the f64 engine (fixed-order matmul, the same bits on every CPU;
 * or dgemm for verdict = "f64-openblas") into out (exact conversion of the
 * doubles), then map the readout. */
static int run_f64(run *r, mpfr_t *out, const cic_model *m, bool rounded,
                   cic_flop_count *fc)
{
    double *y = cic_calloc(r->n, sizeof *y);
    cic_run_opts o;
    size_t k;
    int rc;
    if (!y)
        return -1;
    memset(&o, 0, sizeof o);
    o.flops = fc;
    rc = cic_engine_f64_run(y, m,
                            r->c.verdict_engine == CIC_VERDICT_ENGINE_F64_BLAS ? CIC_MATMUL_OPENBLAS
                                                                               : CIC_MATMUL_FIXED,
                            rounded, &o);
    if (rc == 0) {
        for (k = 0; k < r->n; k++)
            mpfr_set_d(out[k], y[k], MPFR_RNDN);
        rc = map_out(r, out, (const mpfr_t *)out, m);
    }
    free(y);
    return rc;
}

static int stage_xform(run *r, int i, cic_diag *d)
{
    const cic_xform_spec *xs = &r->c.xf[i];
    const cic_model *base = xs->after >= 0 ? r->xm[xs->after] : r->orig;
    cic_model *m;
    mpfr_t *yhp = NULL, *yrw = NULL;
    cic_flop_count counted, analytical;
    double eq, br, ce, w_err;
    cic_result *mx;
    cic_run_opts o;
    int e, s, rc = -1;
    size_t per = (size_t)r->c.model.tokens * r->cols;
    char nm[128];

    progress(r, "transform %s: building (%s, %s precision)", xs->name,
             CIC_XFORM_NAME[xs->kind], CIC_TPREC_NAME[xs->prec]);
    m = r->xm[i] = cic_xform_apply(base, xs, r->prec, d);
    if (!m)
        return -1;
    yhp = cic_mpvec_create(r->n, r->prec);
    yrw = cic_mpvec_create(r->n, r->prec);
    if (!yhp || !yrw)
        goto cleanup;
    flops_formula(r, &analytical, i);
    memset(&counted, 0, sizeof counted);
    memset(&o, 0, sizeof o);
    o.flops = &counted;
    if (verdict_f64(r)) {
        cic_flop_count scratch;
        memset(&scratch, 0, sizeof scratch);
        progress(r, "transform %s: f64, unrounded weights", xs->name);
        if (run_f64(r, yhp, m, false, &counted) < 0)
            goto cleanup;
        progress(r, "transform %s: f64, float32 weights", xs->name);
        if (run_f64(r, yrw, m, true, &scratch) < 0)
            goto cleanup;
    } else {
        bar b;
        double total;
        total = cic_flop_total(&analytical);
        progress(r, "transform %s: MPFR, unrounded weights", xs->name);
        bar_start(&b, r, xs->name, total, &o);
        if (cic_engine_mpfr_run(yhp, m, r->prec, false, &o) < 0 ||
            map_out(r, yhp, (const mpfr_t *)yhp, m) < 0)
            goto cleanup;
        bar_end(&b);
        progress(r, "transform %s: MPFR, float32 weights", xs->name);
        memset(&o, 0, sizeof o);
        bar_start(&b, r, xs->name, total, &o);
        if (cic_engine_mpfr_run(yrw, m, r->prec, true, &o) < 0 ||
            map_out(r, yrw, (const mpfr_t *)yrw, m) < 0)
            goto cleanup;
        bar_end(&b);
    }
    /* the verdict compares like with like: MPFR with the MPFR truth, or f64
     * with the original model in f64 */
    ce = cic_metric_rel_diff((const mpfr_t *)yhp, (const mpfr_t *)r->ref, r->n, r->prec);
    w_err = cic_metric_rel_diff((const mpfr_t *)yrw, (const mpfr_t *)r->ref, r->n, r->prec);
    cic_xform_thresholds(&eq, &br, xs, r->prec);
    if (verdict_f64(r) && eq < 0x1p-30)
        eq = 0x1p-30; /* double rounding of both runs: near 1e-15, far below */

    mx = new_result(r, xs->name, verdict_label(r));
    mx->has_verdict = true;
    mx->expect = xs->expect;
    mx->ce_residual = ce;
    mx->ce_threshold_equivalent = eq;
    mx->ce_threshold_broken = br;
    mx->verdict = cic_xform_verdict(ce, eq, br);
    mx->pass = mx->verdict == mx->expect;
    mx->n_samples = r->c.model.samples < CIC_MAX_SAMPLES ? r->c.model.samples : CIC_MAX_SAMPLES;
    for (s = 0; s < mx->n_samples; s++) {
        enum cic_verdict want = xs->expect;
        mx->per_sample[s].sample = s;
        mx->per_sample[s].ce_residual = cic_metric_rel_diff(
            (const mpfr_t *)yhp + (size_t)s * per, (const mpfr_t *)r->ref + (size_t)s * per,
            per, r->prec);
        mx->per_sample[s].verdict = cic_xform_verdict(mx->per_sample[s].ce_residual, eq, br);
        /* static-fold is exact on its calibration sample only: there it
         * must be equivalent, elsewhere as expected (broken by default) */
        if (xs->kind == CIC_XFORM_STATIC_FOLD && s == xs->calibration)
            want = CIC_VERDICT_EQUIVALENT;
        if (xs->kind == CIC_XFORM_STATIC_FOLD && mx->per_sample[s].verdict != want)
            mx->pass = false;
    }
    fill_flops(r, &mx->flops, &counted, &analytical, true);

    for (e = 0; e < CIC_MATMUL_COUNT; e++) {
        cic_result *x;
        cic_flop_count fc;
        float *y;
        if (!engine_on(&r->c, e))
            continue;
        progress(r, "transform %s: %s", xs->name, CIC_ENGINE_F32_NAME[e]);
        y = cic_calloc(r->n, sizeof *y);
        if (!y)
            goto cleanup;
        snprintf(nm, sizeof nm, "%s:%s", CIC_ENGINE_F32_NAME[e], xs->name);
        save_out(r, nm, y, NULL);
        memset(&o, 0, sizeof o);
        memset(&fc, 0, sizeof fc);
        o.flops = &fc;
        if (cic_engine_f32_run(y, m, (enum cic_matmul)e, &o) < 0 || map_out_f32(r, y, m) < 0)
            goto cleanup;
        x = new_result(r, xs->name, CIC_ENGINE_F32_NAME[e]);
        x->has_verdict = true;
        x->expect = mx->expect;
        x->verdict = mx->verdict;
        x->ce_residual = ce;
        x->ce_threshold_equivalent = eq;
        x->ce_threshold_broken = br;
        x->pass = mx->pass;
        x->n_samples = mx->n_samples;
        memcpy(x->per_sample, mx->per_sample, sizeof x->per_sample);
        x->has_metrics = true;
        score_f32(r, x, y);
        cic_metric_drift(&x->metrics.drift, r->before[e], y, r->n);
        cic_metric_drift_hist(x->metrics.drift_hist, r->before[e], y, r->n);
        x->metrics.has_drift = 1;
        {
            const cic_result *b = NULL;
            int k;
            for (k = 0; k < r->n_res; k++)
                if (!strcmp(r->res[k].transform, "none") &&
                    !strcmp(r->res[k].engine, CIC_ENGINE_F32_NAME[e]))
                    b = &r->res[k];
            if (b) {
                x->metrics.ulp_row_delta_p99 = x->metrics.ulp_row.p99 - b->metrics.ulp_row.p99;
                x->metrics.ulp_row_delta_max = x->metrics.ulp_row.max - b->metrics.ulp_row.max;
            }
        }
        x->metrics.decomp_weights = w_err;
        x->metrics.decomp_arith = cic_metric_rel_diff_f32(y, (const mpfr_t *)yrw, r->n, r->prec);
        x->metrics.has_decomp = 1;
        fill_flops(r, &x->flops, &fc, &analytical, sites_equal(&fc, &counted));
    }
    snprintf(nm, sizeof nm, "%s:%s", verdict_label(r), xs->name);
    save_out(r, nm, NULL, yhp);
    yhp = NULL;
    rc = 0;
    {
        /* keep the transformed model only for a later 'after' or the dump:
         * at real model sizes one copy of the weights is gigabytes */
        int j;
        bool keep = r->a->dump_dir != NULL;
        for (j = i + 1; j < r->c.n_xf; j++)
            keep = keep || r->c.xf[j].after == i;
        if (!keep) {
            cic_model_destroy(r->xm[i]);
            r->xm[i] = NULL;
        }
    }
cleanup:
    cic_mpvec_destroy(yhp, r->n);
    cic_mpvec_destroy(yrw, r->n);
    if (rc < 0 && !d->msg[0])
        cic_diag_set(d, r->c.path, 0, 0, "transform '%s': out of memory", xs->name);
    return rc;
}

/* ---- dump ---- */

static int write_dump(run *r, cic_diag *d)
{
    const char *dir = r->a->dump_dir;
    char path[2048], file[2 * CIC_NAME_MAX];
    const char *meta[] = {"case", r->c.name, "cicheck_version", CIC_VERSION, NULL};
    cic_st_tensor *t;
    double *f64 = NULL;
    int i, n = 0, rc = -1;
    if (cic_mkdir_p(dir, d) < 0)
        return -1;
    cic_dump_file_name(file, sizeof file, &r->c, -1, false);
    snprintf(path, sizeof path, "%s/%s", dir, file);
    if (cic_dump_model(path, r->orig, meta, false, d) < 0)
        return -1;
    for (i = 0; i < r->c.n_xf; i++) {
        const cic_xform_spec *x = &r->c.xf[i];
        char seed[32], prec[32], calib[32];
        const char *mt[] = {"case", r->c.name, "transform", x->name,
                            "stream", CIC_STREAM_NAME[x->stream],
                            "fast", x->fast ? "true" : "false",
                            "calibration", calib,
                            "kind", CIC_XFORM_NAME[x->kind],
                            "after", x->after >= 0 ? r->c.xf[x->after].name : "none",
                            "precision", CIC_TPREC_NAME[x->prec],
                            "q", CIC_Q_NAME[x->q], "q_seed", seed,
                            "mistake", CIC_MISTAKE_NAME[x->mistake],
                            "expect", CIC_VERDICT_NAME[x->expect],
                            "mpfr_prec", prec, NULL};
        snprintf(seed, sizeof seed, "%llu", (unsigned long long)x->q_seed);
        snprintf(prec, sizeof prec, "%d", r->c.mpfr_prec);
        snprintf(calib, sizeof calib, "%d", x->calibration);
        if (!r->xm[i])
            continue;
        cic_dump_file_name(file, sizeof file, &r->c, i, false);
        snprintf(path, sizeof path, "%s/%s", dir, file);
        if (cic_dump_model(path, r->xm[i], mt, false, d) < 0)
            return -1;
        cic_dump_file_name(file, sizeof file, &r->c, i, true);
        snprintf(path, sizeof path, "%s/%s", dir, file);
        if (cic_dump_model(path, r->xm[i], mt, true, d) < 0)
            return -1;
    }
    /* outputs: truth and every MPFR output as f64, f32 outputs as they are */
    t = cic_calloc((size_t)r->n_saved + 1, sizeof *t);
    f64 = cic_calloc(cic_mul_size(r->n, (size_t)r->n_saved + 1), sizeof *f64);
    if (!t || !f64) {
        cic_diag_set(d, dir, 0, 0, "out of memory writing the dump");
        goto cleanup;
    }
    {
        size_t k, slot = 0;
        for (k = 0; k < r->n; k++)
            f64[k] = mpfr_get_d(r->truth[k], MPFR_RNDN);
        t[n].name = "truth";
        t[n].dtype = CIC_DT_F64;
        t[n].ndim = 2;
        t[n].shape[0] = (int64_t)r->rows;
        t[n].shape[1] = (int64_t)r->cols;
        t[n].data = f64;
        n++;
        for (i = 0; i < r->n_saved; i++) {
            saved_out *s = &r->saved[i];
            t[n].name = s->name;
            t[n].ndim = 2;
            t[n].shape[0] = (int64_t)r->rows;
            t[n].shape[1] = (int64_t)r->cols;
            if (s->f32) {
                t[n].dtype = CIC_DT_F32;
                t[n].data = s->f32;
            } else {
                double *p = f64 + (++slot) * r->n;
                for (k = 0; k < r->n; k++)
                    p[k] = mpfr_get_d(s->mp[k], MPFR_RNDN);
                t[n].dtype = CIC_DT_F64;
                t[n].data = p;
            }
            n++;
        }
    }
    cic_dump_file_name(file, sizeof file, &r->c, -2, false);
    snprintf(path, sizeof path, "%s/%s", dir, file);
    rc = cic_safetensors_write(path, t, n, meta, d);
cleanup:
    free(t);
    free(f64);
    return rc;
}

/* ---- the run ---- */

void cic_case_run_free(cic_case_run *cr)
{
    if (!cr)
        return;
    free(cr->rep.results);
    free(cr->rep.gates);
    free(cr->rep.regress);
    free(cr);
}

/* SHA-256 of n MPFR values: each as its exact hexadecimal significand and
 * exponent (mpfr_get_str with base 16 and 0 digits is exact and canonical). */
static void mp_sha256(char hex[65], const mpfr_t *v, size_t n)
{
    cic_sha256 s;
    unsigned char dig[32];
    size_t i;
    cic_sha256_init(&s);
    for (i = 0; i < n; i++) {
        mpfr_exp_t e;
        char buf[32];
        char *str = mpfr_get_str(NULL, &e, 16, 0, v[i], MPFR_RNDN);
        if (str) {
            cic_sha256_update(&s, str, strlen(str));
            mpfr_free_str(str);
        }
        snprintf(buf, sizeof buf, "p%ld;", (long)e);
        cic_sha256_update(&s, buf, strlen(buf));
    }
    cic_sha256_final(&s, dig);
    for (i = 0; i < 32; i++)
        snprintf(hex + 2 * i, 3, "%02x", dig[i]);
}

int cic_run_case(const char *path, const cic_run_args *a, cic_case_run **out)
{
    run *r = cic_calloc(1, sizeof *r);
    cic_case_run *cr = cic_calloc(1, sizeof *cr);
    cic_diag d;
    cic_report rep;
    int rc = CIC_EINTERNAL, i, color;
    char outdir[1200];
    memset(&d, 0, sizeof d);
    memset(&rep, 0, sizeof rep);
    if (!r || !cr) {
        free(r);
        free(cr);
        fprintf(stderr, "cicheck: out of memory\n");
        if (out)
            *out = NULL;
        return CIC_EINTERNAL;
    }
    r->a = a;
    r->t0 = now();
    if (a->preloaded)
        r->c = *a->preloaded;
    else if (cic_case_load(&r->c, path, &d) != CIC_OK) {
        cic_diag_print(stderr, &d);
        rc = CIC_EINPUT;
        goto cleanup;
    }
    if (cic_xform_check(&r->c, &d) != CIC_OK ||
        (a->dump_dir && cic_dump_names_check(&r->c, &d) != CIC_OK)) {
        cic_diag_print(stderr, &d);
        rc = CIC_EINPUT;
        goto cleanup;
    }
    /* dit: the analytical FLOP table, which every writer of the report formats */
    rep.has_dit_flops = cic_dit_flops_table_fill(&rep.dit_flops, &r->c);
    if (!r->c.sweep.on || a->preloaded) {
        /* the memory guard, before anything big is allocated */
        double limit = a->max_memory;
        double est = (double)cic_case_memory_estimate(&r->c);
        if (limit <= 0) {
            long pages = sysconf(_SC_PHYS_PAGES), psz = sysconf(_SC_PAGESIZE);
            limit = pages > 0 && psz > 0 ? 0.5 * (double)pages * (double)psz : 8.0 * (1 << 30);
        }
        if (est > limit) {
            cic_diag_set(&d, r->c.path, 0, 0,
                         "case '%s' needs about %.1f MiB, more than the limit of %.1f MiB "
                         "(--max-memory); shrink d_model, tokens, samples, layers or "
                         "mpfr_prec, or run fewer transforms", r->c.name, est / 1048576.0,
                         limit / 1048576.0);
            cic_diag_print(stderr, &d);
            rc = CIC_EINPUT;
            goto cleanup;
        }
    }
    if (a->shard && !a->preloaded && !r->c.sweep.on) {
        cic_diag_set(&d, r->c.path, 0, 0,
                     "--shard splits the points of a sweep, and case '%s' has no [sweep] table",
                     r->c.name);
        cic_diag_print(stderr, &d);
        rc = CIC_EINPUT;
        goto cleanup;
    }
    if (r->c.sweep.on && !a->preloaded) {
        /* a sweep: its points are cases of their own */
        char sdir[1200];
        if (a->out_dir)
            cic_strlcpy(sdir, a->out_dir, sizeof sdir);
        else
            snprintf(sdir, sizeof sdir, "reports/%s", r->c.name);
        cic_strlcpy(cr->kase.name, r->c.name, sizeof cr->kase.name);
        rc = cic_run_sweep(&r->c, a, sdir);
        if (rc == CIC_EINPUT || rc == CIC_EINTERNAL)
            snprintf(d.msg, sizeof d.msg, "sweep %s failed (exit %d)", r->c.name, rc);
        cic_strlcpy(d.file, path, sizeof d.file);
        /* for the summaries: one check standing for the sweep's points (their
         * details are in <out>/sweep.json) */
        r->gates = cic_calloc(1, sizeof *r->gates);
        if (r->gates) {
            cic_strlcpy(r->gates[0].transform, "*", sizeof r->gates[0].transform);
            cic_strlcpy(r->gates[0].engine, "*", sizeof r->gates[0].engine);
            cic_strlcpy(r->gates[0].metric, "sweep points", sizeof r->gates[0].metric);
            r->gates[0].value = rc;
            r->gates[0].limit = 0;
            r->gates[0].pass = rc == CIC_OK;
            rep.n_gates = 1;
        }
        rep.truth_certified = true;
        rep.pass = rc == CIC_OK;
        goto cleanup;
    }
    cic_strlcpy(cr->kase.name, r->c.name, sizeof cr->kase.name);
    r->prec = r->c.mpfr_prec;
    r->orig = build_original(r);
    if (!r->orig) {
        cic_diag_set(&d, path, 0, 0, "out of memory building the model");
        goto fail;
    }
    r->rows = (size_t)r->orig->rows;
    r->cols = (size_t)cic_model_out_cols(r->orig);
    r->n = r->rows * r->cols;
    r->truth = cic_mpvec_create(r->n, r->prec);
    r->res = cic_calloc((size_t)(CIC_MATMUL_COUNT + r->c.n_xf * (CIC_MATMUL_COUNT + 1)),
                        sizeof *r->res);
    r->gates = cic_calloc((size_t)(r->c.n_gates + 1) *
                              (size_t)(CIC_MATMUL_COUNT + r->c.n_xf * (CIC_MATMUL_COUNT + 1)),
                          sizeof *r->gates);
    if (!r->truth || !r->res || !r->gates) {
        cic_diag_set(&d, path, 0, 0, "out of memory");
        goto fail;
    }
    cic_model_weights_sha256(rep.weights_sha256, r->orig);
    if (stage_truth(r, &rep) < 0) {
        cic_diag_set(&d, path, 0, 0, "out of memory computing the truth");
        goto fail;
    }
    if (truth_nonfinite(r, &d)) {
        cic_diag_print(stderr, &d);
        rc = CIC_EINPUT;
        goto cleanup;
    }
    if (stage_before(r) < 0) {
        cic_diag_set(&d, path, 0, 0, "out of memory running the f32 engines");
        goto fail;
    }
    r->ref = r->truth;
    if (verdict_f64(r)) {
        cic_flop_count fc;
        memset(&fc, 0, sizeof fc);
        progress(r, "verdict reference: original model in f64");
        r->ref_own = cic_mpvec_create(r->n, r->prec);
        if (!r->ref_own || run_f64(r, r->ref_own, r->orig, false, &fc) < 0) {
            cic_diag_set(&d, path, 0, 0, "out of memory running the f64 engine");
            goto fail;
        }
        r->ref = r->ref_own;
    }
    for (i = 0; i < r->c.n_xf; i++)
        if (stage_xform(r, i, &d) < 0)
            goto fail;
    eval_gates(r);
    mp_sha256(rep.truth_sha256, (const mpfr_t *)r->truth, r->n);
    for (i = 0; i < r->n_saved; i++) {
        /* each mpfr row's output: the transform's math, bit for bit */
        int k;
        if (!r->saved[i].mp)
            continue;
        for (k = 0; k < r->n_res; k++)
            if (!strcmp(r->res[k].engine, verdict_label(r)) &&
                !strcmp(r->saved[i].name + strlen(verdict_label(r)) + 1, r->res[k].transform) &&
                reproducible(r, r->res[k].transform))
                mp_sha256(r->res[k].mpfr_sha256, (const mpfr_t *)r->saved[i].mp, r->n);
    }

    rep.kase = &r->c;
    cic_report_env_fill(&rep.env);
    rep.results = r->res;
    rep.n_results = r->n_res;
    rep.gates = r->gates;
    rep.n_gates = r->n_gates;
    rep.pass = rep.truth_certified;
    for (i = 0; i < r->n_res; i++)
        rep.pass = rep.pass && r->res[i].pass;
    for (i = 0; i < r->n_gates; i++)
        rep.pass = rep.pass && r->gates[i].pass;
    if (!a->no_baseline) {
        char bpath[1200];
        int have;
        snprintf(bpath, sizeof bpath, "%s/%s.json", a->baseline_dir ? a->baseline_dir : "reference",
                 r->c.name);
        /* never fopen to test: a FIFO would block the run */
        have = cic_baseline_probe(bpath, &d);
        if (have < 0) {
            cic_diag_print(stderr, &d);
            rc = CIC_EINPUT;
            goto cleanup;
        }
        if (have > 0) {
            if (cic_baseline_compare(&rep, bpath, &a->tol, &d) < 0) {
                cic_diag_print(stderr, &d);
                rc = CIC_EINPUT;
                goto cleanup;
            }
        } else if (a->baseline_dir) {
            fprintf(stderr, "cicheck: %s: no baseline for case '%s' (cicheck bless to write one)\n",
                    bpath, r->c.name);
        }
    }
    rep.wall_seconds = now() - r->t0;

    color = a->color >= 0 ? a->color : isatty(fileno(stdout));
    if (!a->compact)
        cic_report_table(stdout, &rep, color != 0);
    if (rep.has_baseline && !a->compact) {
        int nf = 0;
        for (i = 0; i < rep.n_regress; i++) {
            const cic_regress_result *g = &rep.regress[i];
            if (g->pass)
                continue;
            nf++;
            printf("FAIL regression %s / %s / %s / %s: old %s, new %s%s%s (%s)\n", r->c.name,
                   g->transform[0] ? g->transform : "-", g->engine[0] ? g->engine : "-",
                   g->metric, g->old_value, g->new_value, g->limit[0] ? ", limit " : "",
                   g->limit, CIC_RULE_NAME[g->rule]);
        }
        printf("baseline %s: %d checks, %d failed\n", rep.baseline_path, rep.n_regress, nf);
    }
    for (i = 0; i < r->n_res && !a->compact; i++) {
        const cic_result *x = &r->res[i];
        int s;
        if (!x->has_verdict || strcmp(x->engine, verdict_label(r)) != 0)
            continue;
        if (x->verdict != x->expect)
            printf("FAIL expectation %s: verdict %s, expected %s (ce_residual %.3g)\n",
                   x->transform, CIC_VERDICT_NAME[x->verdict], CIC_VERDICT_NAME[x->expect],
                   x->ce_residual);
        else if (!x->pass)
            for (s = 0; s < x->n_samples; s++)
                printf("  %s sample %d: ce_residual %.3g, %s\n", x->transform, s,
                       x->per_sample[s].ce_residual,
                       CIC_VERDICT_NAME[x->per_sample[s].verdict]);
    }
    if (r->c.model.block == CIC_BLOCK_DIT && !a->quiet_tables && !a->compact) {
        printf("\nAnalytical ");
        cic_report_dit_flops_table(stdout, &rep.dit_flops);
    }
    if (!rep.truth_certified)
        printf("FAIL truth not certified: sample 0 at %ld bits differs by %.3g\n",
               (long)r->prec + 64, rep.truth_cert_diff);
    /* the answer in words, last: what the verdicts and FLOPs above say */
    if (r->c.model.block == CIC_BLOCK_DIT && !a->compact) {
        putchar('\n');
        cic_report_conclusion(stdout, &rep);
    }

    if (a->out_dir)
        cic_strlcpy(outdir, a->out_dir, sizeof outdir);
    else
        snprintf(outdir, sizeof outdir, "reports/%s", r->c.name);
    if (!a->no_report) {
        if (cic_report_json_write(&rep, outdir, &d) < 0)
            goto fail;
        progress(r, "wrote %s/report.json", outdir);
    }
    if (a->dump_dir) {
        if (write_dump(r, &d) < 0)
            goto fail;
        progress(r, "wrote dump to %s", a->dump_dir);
    }
    rc = rep.pass ? CIC_OK : CIC_EGATE;
    goto cleanup;
fail:
    cic_diag_print(stderr, &d);
    rc = CIC_EINTERNAL;
cleanup:
    if (rc == CIC_EINPUT || rc == CIC_EINTERNAL) {
        if (d.line > 0)
            snprintf(cr->error, sizeof cr->error, "%.500s:%d:%d: %.600s", d.file, d.line,
                     d.column > 0 ? d.column : 1, d.msg);
        else
            snprintf(cr->error, sizeof cr->error, "%.500s: %.600s", d.file[0] ? d.file : path,
                     d.msg);
        if (cic_diag_count(&d) > 1) {
            size_t used = strlen(cr->error);
            snprintf(cr->error + used, sizeof cr->error - used, " (and %d more error%s)",
                     d.n_more, d.n_more == 1 ? "" : "s");
        }
        free(rep.regress);
    } else {
        /* hand the results to the summaries */
        cr->kase = r->c;
        cr->rep = rep;
        cr->rep.kase = &cr->kase;
        cr->rep.results = r->res;
        cr->rep.gates = r->gates;
        cr->rep.n_gates = r->gates ? cr->rep.n_gates : 0;
        r->res = NULL;
        r->gates = NULL;
    }
    cr->exit_code = rc;
    cr->rep.exit_code = rc;
    if (out)
        *out = cr;
    else
        cic_case_run_free(cr);
    for (i = 0; i < r->n_saved; i++) {
        free(r->saved[i].f32);
        cic_mpvec_destroy(r->saved[i].mp, r->n);
    }
    /* the before arrays are owned by saved[] */
    for (i = 0; i < CIC_MAX_XFORMS; i++)
        cic_model_destroy(r->xm[i]);
    cic_model_destroy(r->orig);
    cic_mpvec_destroy(r->truth, r->n);
    cic_mpvec_destroy(r->ref_own, r->n);
    free(r->res);
    free(r->gates);
    free(r);
    return rc;
}
