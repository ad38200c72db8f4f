/* SPDX-License-Identifier: MIT */
/* stages.c: the engine runs of a pipeline and the rows of results they
 * give: each f32 engine on the original model (the "before" figures); per
 * transform its model, its runs in the verdict engine (MPFR at mpfr_prec, or
 * the f64 engine) with unrounded and with float32-rounded weights, the
 * verdict of its exactness residual (per sample too: static-fold is exact on
 * its calibration sample only), and every f32 engine's errors, drift and
 * decomposition against the truth. The rows themselves (a new row, its
 * FLOPs, its f32 scores) are made by rows.c. */
#include "pipeline_int.h"

#include "../base/mpvec.h"
#include "../metric/flops.h"
#include "../metric/metric.h"
#include "../xform/qmat.h"
#include "../xform/xform.h"

#include <string.h>

/* The f32 engine whose run gives the outlier statistics: the first
 * enabled. */
static bool tap_engine(const cic_case *c, int e)
{
    return e == CIC_MATMUL_OPENBLAS ? c->f32_openblas : !c->f32_openblas;
}

/* Engine e's "before" row from its output r->before[e] and the FLOPs fc
 * its run counted. */
static cic_result *before_row(cic_pipeline *r, int e, const cic_flop_count *fc)
{
    cic_result *x = _cic_pl_new_result(r, "none", CIC_ENGINE_F32_NAME[e]);
    char nm[128];
    x->has_metrics = true;
    _cic_pl_score_f32(r, x, r->before[e]);
    _cic_pl_fill_flops(r, &x->flops, fc, &r->base_analytical, _cic_pl_sites_equal(fc, &r->base_counted));
    x->n_samples = 0;
    snprintf(nm, sizeof nm, "%s:none", CIC_ENGINE_F32_NAME[e]);
    _cic_pl_save_out(r, nm, r->before[e], NULL, -1);
    r->parts.before[e] = r->before[e];
    r->parts.before_fc[e] = *fc;
    return x;
}

int _cic_pl_before(cic_pipeline *r)
{
    int e;
    for (e = 0; e < CIC_MATMUL_COUNT; e++) {
        cic_run_opts o;
        cic_flop_count fc;
        cic_pl_tap t;
        if (!_cic_pl_engine_on(r->c, e))
            continue;
        _cic_pl_stage(r, "before: %s", CIC_ENGINE_F32_NAME[e]);
        r->before[e] = cic_calloc(r->n, sizeof(float));
        if (!r->before[e])
            return -1;
        memset(&o, 0, sizeof o);
        memset(&fc, 0, sizeof fc);
        memset(&t, 0, sizeof t);
        o.flops = &fc;
        if ((tap_engine(r->c, e) && _cic_pl_outlier_begin(&t, r, r->orig, "none", &o) < 0) ||
            _cic_pl_depth_begin(r, r->orig, cic_format_get(CIC_FORMAT_FLOAT32), &o) < 0 ||
            cic_engine_f32_run(r->before[e], r->orig, (enum cic_matmul)e, &o) < 0 ||
            _cic_pl_outlier_end(&t) < 0 || _cic_pl_map_out_f32(r, r->before[e], r->orig) < 0) {
            free(r->before[e]); /* not yet saved */
            r->before[e] = NULL;
            return -1;
        }
        if (_cic_pl_depth_end(r, before_row(r, e, &fc)) < 0)
            return -1;
    }
    if (_cic_pl_lowp_rows(r, "none", r->orig, NULL, &r->base_analytical) < 0)
        return -1;
    _cic_pl_lin_ref_free(r);
    return 0;
}

/* Run m in the f64 engine (fixed-order matmul, the same bits on every CPU;
 * or dgemm for verdict = "f64-openblas") into out (exact conversion of the
 * doubles), then map the readout. */
static int run_f64(cic_pipeline *r, mpfr_t *out, const cic_model *m, bool rounded,
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
                            r->c->verdict_engine == CIC_VERDICT_ENGINE_F64_BLAS ? CIC_MATMUL_OPENBLAS
                                                                               : CIC_MATMUL_FIXED,
                            rounded, &o);
    if (rc == 0) {
        for (k = 0; k < r->n; k++)
            mpfr_set_d(out[k], y[k], MPFR_RNDN);
        rc = _cic_pl_map_out(r, out, (const mpfr_t *)out, m);
    }
    free(y);
    return rc;
}

/* The transformed model's two verdict-engine runs: unrounded weights (yhp,
 * the verdict) and float32-rounded (yrw, the decomposition); counted gets
 * the first run's FLOPs. */
static int verdict_runs(cic_pipeline *r, const cic_xform_spec *xs, const cic_model *m,
                        mpfr_t *yhp, mpfr_t *yrw, cic_flop_count *counted,
                        const cic_flop_count *analytical)
{
    cic_run_opts o;
    cic_pl_work b;
    double total = cic_flop_total(analytical);
    memset(&o, 0, sizeof o);
    o.flops = counted;
    if (_cic_pl_verdict_f64(r)) {
        cic_flop_count scratch;
        memset(&scratch, 0, sizeof scratch);
        _cic_pl_stage(r, "transform %s: f64, unrounded weights", xs->name);
        if (run_f64(r, yhp, m, false, counted) < 0)
            return -1;
        _cic_pl_stage(r, "transform %s: f64, float32 weights", xs->name);
        return run_f64(r, yrw, m, true, &scratch);
    }
    _cic_pl_stage(r, "transform %s: MPFR, unrounded weights", xs->name);
    _cic_pl_work_begin(&b, r, xs->name, total, &o);
    if (_cic_pl_lin_ref_begin(r, m, &o) < 0 || cic_engine_mpfr_run(yhp, m, r->prec, false, &o) < 0 ||
        _cic_pl_map_out(r, yhp, (const mpfr_t *)yhp, m) < 0)
        return -1;
    _cic_pl_work_end(&b);
    _cic_pl_stage(r, "transform %s: MPFR, float32 weights", xs->name);
    memset(&o, 0, sizeof o);
    _cic_pl_work_begin(&b, r, xs->name, total, &o);
    if (cic_engine_mpfr_run(yrw, m, r->prec, true, &o) < 0 ||
        _cic_pl_map_out(r, yrw, (const mpfr_t *)yrw, m) < 0)
        return -1;
    _cic_pl_work_end(&b);
    return 0;
}

/* The exactness row: ce_residual against the reference (like with like:
 * MPFR with the MPFR truth, f64 with the original in f64), the verdict by
 * the transform precision's thresholds, and per sample. */
static cic_result *verdict_row(cic_pipeline *r, const cic_xform_spec *xs, const mpfr_t *yhp)
{
    size_t per = (size_t)r->c->model.tokens * r->cols;
    double eq, br, ce = cic_metric_rel_diff(yhp, (const mpfr_t *)r->ref, r->n, r->prec);
    cic_result *mx;
    int s;
    /* a kind exact on its calibration sample only (static-fold) */
    bool calibrated = cic_xform_has_keys(xs->kind, CIC_XKEY_CALIBRATION);
    cic_xform_thresholds(&eq, &br, xs, r->prec);
    if (_cic_pl_verdict_f64(r) && eq < 0x1p-30)
        eq = 0x1p-30; /* double rounding of both runs: near 1e-15, far below */
    mx = _cic_pl_new_result(r, xs->name, _cic_pl_verdict_label(r));
    mx->has_verdict = true;
    mx->expect = xs->expect;
    mx->ce_residual = ce;
    mx->ce_threshold_equivalent = eq;
    mx->ce_threshold_broken = br;
    mx->verdict = cic_xform_verdict(ce, eq, br);
    mx->pass = mx->verdict == mx->expect;
    mx->n_samples = r->c->model.samples < CIC_MAX_SAMPLES ? r->c->model.samples : CIC_MAX_SAMPLES;
    for (s = 0; s < mx->n_samples; s++) {
        enum cic_verdict want = xs->expect;
        mx->per_sample[s].sample = s;
        mx->per_sample[s].ce_residual = cic_metric_rel_diff(
            yhp + (size_t)s * per, (const mpfr_t *)r->ref + (size_t)s * per, per, r->prec);
        mx->per_sample[s].verdict = cic_xform_verdict(mx->per_sample[s].ce_residual, eq, br);
        /* static-fold is exact on its calibration sample only: there it
         * must be equivalent, elsewhere as expected (broken by default) */
        if (calibrated && s == xs->calibration)
            want = CIC_VERDICT_EQUIVALENT;
        if (calibrated && mx->per_sample[s].verdict != want)
            mx->pass = false;
    }
    return mx;
}

/* Engine e's row for transform xs from its output y and the FLOPs fc its
 * run counted: the verdict copied from mx, then the errors against the
 * truth, the drift from the engine's "before" output, and the
 * decomposition (w_err from the rounded-weights run yrw). */
static cic_result *f32_scores(cic_pipeline *r, const cic_xform_spec *xs, int e, const cic_result *mx,
                       double w_err, const mpfr_t *yrw, const float *y, const cic_flop_count *fc,
                       const cic_flop_count *counted, const cic_flop_count *analytical)
{
    const cic_format *f32 = cic_format_get(CIC_FORMAT_FLOAT32);
    const cic_result *b = NULL;
    cic_result *x;
    int k;
    x = _cic_pl_new_result(r, xs->name, CIC_ENGINE_F32_NAME[e]);
    _cic_pl_copy_verdict(x, mx);
    x->has_metrics = true;
    _cic_pl_score_f32(r, x, y);
    cic_metric_drift(&x->metrics.drift, f32, r->before[e], y, r->n);
    cic_metric_drift_hist(x->metrics.drift_hist, f32, r->before[e], y, r->n);
    x->metrics.has_drift = 1;
    for (k = 0; k < r->n_res; k++)
        if (!strcmp(r->res[k].transform, "none") &&
            !strcmp(r->res[k].engine, CIC_ENGINE_F32_NAME[e]))
            b = &r->res[k];
    if (b) {
        x->metrics.ulp_row_delta_p99 = x->metrics.ulp_row.p99 - b->metrics.ulp_row.p99;
        x->metrics.ulp_row_delta_max = x->metrics.ulp_row.max - b->metrics.ulp_row.max;
    }
    x->metrics.decomp_weights = w_err;
    x->metrics.decomp_arith = cic_metric_rel_diff_f32(y, yrw, r->n, r->prec);
    x->metrics.has_decomp = 1;
    _cic_pl_fill_flops(r, &x->flops, fc, analytical, _cic_pl_sites_equal(fc, counted));
    return x;
}

/* Run engine e on transform i's model m and score its row. */
static int f32_row(cic_pipeline *r, int i, const cic_model *m, int e, const cic_result *mx,
                   double w_err, const mpfr_t *yrw, const cic_flop_count *counted,
                   const cic_flop_count *analytical)
{
    const cic_xform_spec *xs = &r->c->xf[i];
    cic_flop_count fc;
    cic_run_opts o;
    cic_pl_tap t;
    char nm[128];
    float *y;
    _cic_pl_stage(r, "transform %s: %s", xs->name, CIC_ENGINE_F32_NAME[e]);
    y = cic_calloc(r->n, sizeof *y);
    if (!y)
        return -1;
    snprintf(nm, sizeof nm, "%s:%s", CIC_ENGINE_F32_NAME[e], xs->name);
    _cic_pl_save_out(r, nm, y, NULL, -1);
    memset(&o, 0, sizeof o);
    memset(&fc, 0, sizeof fc);
    memset(&t, 0, sizeof t);
    o.flops = &fc;
    if ((tap_engine(r->c, e) && _cic_pl_outlier_begin(&t, r, m, xs->name, &o) < 0) ||
        _cic_pl_depth_begin(r, m, cic_format_get(CIC_FORMAT_FLOAT32), &o) < 0 ||
        cic_engine_f32_run(y, m, (enum cic_matmul)e, &o) < 0 || _cic_pl_outlier_end(&t) < 0 ||
        _cic_pl_map_out_f32(r, y, m) < 0 ||
        _cic_pl_depth_end(r, f32_scores(r, xs, e, mx, w_err, yrw, y, &fc, counted, analytical)) < 0)
        return -1;
    r->parts.y[i][e] = y;
    r->parts.xf_fc[i][e] = fc;
    return 0;
}

/* Transform i's exactness row from its verdict runs yhp and yrw (counted:
 * the FLOPs of the first), with the Q file's check; *w_err the weights'
 * share of the error. */
static cic_result *xform_verdict(cic_pipeline *r, int i, const mpfr_t *yhp, const mpfr_t *yrw,
                                 const cic_flop_count *counted, const cic_flop_count *analytical,
                                 double *w_err, cic_diag *d)
{
    const cic_xform_spec *xs = &r->c->xf[i];
    cic_result *mx;
    *w_err = cic_metric_rel_diff(yrw, (const mpfr_t *)r->ref, r->n, r->prec);
    mx = verdict_row(r, xs, yhp);
    if (xs->q == CIC_Q_FILE) {
        int qn = cic_xform_file_q_order(&r->c->model, xs);
        mx->has_q_orth = cic_q_file_check(&mx->q_orth_error, xs, qn,
                                          cic_xform_file_q_order_name(xs), d) == 0;
        if (mx->has_q_orth)
            _cic_pl_stage(r, "transform %s: Q '%s' of %s, max |Q^T Q - I| = %.3g", xs->name,
                          xs->q_tensor, xs->q_file, mx->q_orth_error);
    }
    _cic_pl_fill_flops(r, &mx->flops, counted, analytical, true);
    r->parts.xf_counted[i] = *counted;
    return mx;
}

/* Whether transform i's model (the original's for i = -1) is needed after
 * transform `from` is built: by a transform after `from` that is applied
 * after i, or for the dump. Every other use of the original (the truth,
 * the "before" rows, the verdict reference) comes before the transforms. */
static bool model_needed(const cic_pipeline *r, int i, int from)
{
    int j;
    bool keep = r->o.keep_models;
    for (j = from + 1; j < r->c->n_xf; j++)
        keep = keep || r->c->xf[j].after == i;
    return keep;
}

/* Keep transform i's model only for a later 'after' or the dump: at real
 * model sizes one copy of the weights is gigabytes. */
static void release_model(cic_pipeline *r, int i)
{
    if (!model_needed(r, i, i)) {
        cic_model_destroy(r->xm[i]);
        r->xm[i] = NULL;
    }
}

/* Transform i's model, built from its base: the model it is applied after
 * (the original too) is taken when nothing later needs it, its weights
 * becoming the new model's (no copy: at a DiT-XL/2's size one copy of the
 * float32 weights is 2.7 GB), else copied. */
static cic_model *build_model(cic_pipeline *r, int i, cic_diag *d)
{
    const cic_xform_spec *xs = &r->c->xf[i];
    cic_model **slot = xs->after >= 0 ? &r->xm[xs->after] : &r->orig, *base = *slot;
    if (model_needed(r, xs->after, i))
        return cic_xform_apply(base, xs, r->prec, d);
    *slot = NULL;
    return cic_xform_apply_take(base, xs, r->prec, d);
}

int _cic_pl_xform(cic_pipeline *r, int i, cic_diag *d)
{
    const cic_xform_spec *xs = &r->c->xf[i];
    cic_model *m;
    mpfr_t *yhp = NULL, *yrw = NULL;
    cic_flop_count counted, analytical;
    cic_result *mx;
    double w_err;
    int e, mx_index, rc = -1;
    char nm[128];

    _cic_pl_stage(r, "transform %s: building (%s, %s precision)", xs->name,
                  CIC_XFORM_NAME[xs->kind], CIC_TPREC_NAME[xs->prec]);
    m = r->xm[i] = build_model(r, i, d);
    if (!m)
        return -1;
    yhp = cic_mpvec_create(r->n, r->prec);
    yrw = cic_mpvec_create(r->n, r->prec);
    if (!yhp || !yrw)
        goto cleanup;
    _cic_pl_flops_formula(r, &analytical, i);
    memset(&counted, 0, sizeof counted);
    if (verdict_runs(r, xs, m, yhp, yrw, &counted, &analytical) < 0)
        goto cleanup;
    mx = xform_verdict(r, i, (const mpfr_t *)yhp, (const mpfr_t *)yrw, &counted, &analytical,
                       &w_err, d);
    mx_index = (int)(mx - r->res);
    for (e = 0; e < CIC_MATMUL_COUNT; e++)
        if (_cic_pl_engine_on(r->c, e) &&
            f32_row(r, i, m, e, mx, w_err, (const mpfr_t *)yrw, &counted, &analytical) < 0)
            goto cleanup;
    if (_cic_pl_lowp_rows(r, xs->name, m, mx, &analytical) < 0)
        goto cleanup;
    _cic_pl_lin_ref_free(r);
    snprintf(nm, sizeof nm, "%s:%s", _cic_pl_verdict_label(r), xs->name);
    _cic_pl_save_out(r, nm, NULL, yhp, mx_index);
    r->parts.yhp[i] = yhp;
    yhp = NULL;
    if (r->o.keep_partials) {
        r->parts.yrw[i] = yrw;
        yrw = NULL;
    }
    rc = 0;
    release_model(r, i);
cleanup:
    cic_mpvec_destroy(yhp, r->n);
    cic_mpvec_destroy(yrw, r->n);
    if (rc < 0 && !d->msg[0])
        cic_diag_set(d, r->c->path, 0, 0, "transform '%s': out of memory", xs->name);
    return rc;
}

/* The rows _cic_pl_before and _cic_pl_xform give, in their order, from
 * the numbers in r->parts instead of engine runs; the arrays pass to r
 * (saved[], parts.yrw). */
int _cic_pl_replay_rows(cic_pipeline *r, cic_diag *d)
{
    cic_pipeline_partials *pp = &r->parts;
    int i, e;
    for (e = 0; e < CIC_MATMUL_COUNT; e++)
        if (_cic_pl_engine_on(r->c, e)) {
            r->before[e] = pp->before[e];
            pp->before[e] = NULL; /* saved[] owns it from here */
            before_row(r, e, &pp->before_fc[e]);
        }
    for (i = 0; i < r->c->n_xf; i++) {
        const cic_xform_spec *xs = &r->c->xf[i];
        cic_flop_count analytical, counted = pp->xf_counted[i];
        cic_result *mx;
        double w_err;
        char nm[128];
        int mx_index;
        _cic_pl_flops_formula(r, &analytical, i);
        mx = xform_verdict(r, i, (const mpfr_t *)pp->yhp[i], (const mpfr_t *)pp->yrw[i],
                           &counted, &analytical, &w_err, d);
        mx_index = (int)(mx - r->res);
        for (e = 0; e < CIC_MATMUL_COUNT; e++) {
            float *y = pp->y[i][e];
            if (!_cic_pl_engine_on(r->c, e))
                continue;
            snprintf(nm, sizeof nm, "%s:%s", CIC_ENGINE_F32_NAME[e], xs->name);
            _cic_pl_save_out(r, nm, y, NULL, -1);
            f32_scores(r, xs, e, mx, w_err, (const mpfr_t *)pp->yrw[i], y, &pp->xf_fc[i][e],
                       &counted, &analytical);
        }
        snprintf(nm, sizeof nm, "%s:%s", _cic_pl_verdict_label(r), xs->name);
        _cic_pl_save_out(r, nm, NULL, pp->yhp[i], mx_index);
    }
    return 0;
}

/* What ce compares with: the truth, or with verdicts from the f64 engine
 * the original model in f64 (like with like). */
int _cic_pl_verdict_ref(cic_pipeline *r)
{
    cic_flop_count fc;
    r->ref = r->truth;
    if (!_cic_pl_verdict_f64(r))
        return 0;
    memset(&fc, 0, sizeof fc);
    _cic_pl_stage(r, "verdict reference: original model in f64");
    r->ref_own = cic_mpvec_create(r->n, r->prec);
    if (!r->ref_own || run_f64(r, r->ref_own, r->orig, false, &fc) < 0)
        return -1;
    r->ref = r->ref_own;
    return 0;
}
