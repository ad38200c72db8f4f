/* SPDX-License-Identifier: MIT */
/* truth.c: the original model and its MPFR truth, the yardstick of every
 * float32 figure: the truth at mpfr_prec bits, certified by recomputing
 * sample 0 at mpfr_prec + 64 bits (every value must round to the same
 * binary32 and agree to 2^(16 - prec) relatively: a handful of roundings at
 * prec bits each lie far below). */
#include "pipeline_int.h"

#include "../base/mpvec.h"
#include "../metric/flops.h"

#include <math.h>
#include <string.h>

/* The original model, with a stage line and progress while its weights are
 * drawn (seconds at d = 1152, more at d = 4096). */
static void weights_work(void *ctx, double done, double total)
{
    cic_pl_work *w = ctx;
    w->total = total;
    if (w->p->o.progress.work)
        w->p->o.progress.work(w->p->o.progress.ctx, w->label, done, total);
}

cic_model *_cic_pl_build_original(cic_pipeline *r, cic_diag *d)
{
    cic_pl_work w = {r, "weights", 0};
    cic_model_progress mp = {NULL, NULL};
    cic_model *m;
    if (r->c->model.checkpoint[0])
        _cic_pl_stage(r, "weights: reading about %.3g values from %s (layers %d .. %d)",
                      (double)cic_case_weight_count(r->c), r->c->model.checkpoint,
                      r->c->model.layer0, r->c->model.layer0 + r->c->model.layers - 1);
    else
        _cic_pl_stage(r, "weights: drawing about %.3g values from seed %llu",
                      (double)cic_case_weight_count(r->c), (unsigned long long)r->c->model.seed);
    if (r->o.progress.work) {
        mp.fn = weights_work;
        mp.ctx = &w;
    }
    m = cic_model_create_progress(&r->c->model, r->c->readout, &mp, d);
    _cic_pl_work_end(&w);
    return m;
}

void _cic_pl_flops_formula(const cic_pipeline *r, cic_flop_count *fc, int i)
{
    cic_flops_case(fc, r->c, i);
}

int _cic_pl_truth(cic_pipeline *r)
{
    cic_run_opts o;
    mpfr_t *cert = NULL;
    size_t per = (size_t)r->c->model.tokens * r->cols, i;
    cic_pl_work cb;
    double maxrel = 0;
    bool same = true;
    cic_pl_work b;
    memset(&o, 0, sizeof o);
    o.flops = &r->base_counted;
    _cic_pl_stage(r, "truth: original model in MPFR at %ld bits", (long)r->prec);
    _cic_pl_flops_formula(r, &r->base_analytical, -1);
    _cic_pl_work_begin(&b, r, "truth", cic_flop_total(&r->base_analytical), &o);
    if (_cic_pl_lin_ref_begin(r, r->orig, &o) < 0 ||
        cic_engine_mpfr_run(r->truth, r->orig, r->prec, false, &o) < 0)
        return -1;
    _cic_pl_work_end(&b);
    if (_cic_pl_map_out(r, r->truth, (const mpfr_t *)r->truth, r->orig) < 0)
        return -1;
    /* certify on sample 0 at prec + 64 */
    _cic_pl_stage(r, "certify: sample 0 at %ld bits", (long)r->prec + 64);
    cert = cic_mpvec_create(per, r->prec + 64);
    if (!cert)
        return -1;
    memset(&o, 0, sizeof o);
    o.n_samples = 1;
    _cic_pl_work_begin(&cb, r, "certify", cic_flop_total(&r->base_analytical) / r->c->model.samples, &o);
    if (cic_engine_mpfr_run(cert, r->orig, r->prec + 64, false, &o) < 0) {
        cic_mpvec_destroy(cert, per);
        return -1;
    }
    if (_cic_pl_needs_map(r->orig)) {
        /* the map works on the run's rows; apply it to this sample's rows */
        size_t keep = r->rows;
        r->rows = (size_t)r->c->model.tokens;
        if (_cic_pl_map_out(r, cert, (const mpfr_t *)cert, r->orig) < 0) {
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
    _cic_pl_work_end(&cb);
    r->rep.truth_cert_diff = maxrel;
    /* a handful of roundings at prec bits each: far below 2^(16 - prec) */
    r->rep.truth_certified = same && maxrel <= ldexp(1.0, 16 - (int)r->prec);
    return 0;
}

/* Every figure is scored against the truth, so it must be a number. The
 * loader's limits keep the weights finite; should the model still overflow
 * MPFR's exponent range, the case is refused here with where it happened. */
bool _cic_pl_truth_nonfinite(const cic_pipeline *r, cic_diag *d)
{
    size_t i, bad = 0, first = 0;
    for (i = 0; i < r->n; i++)
        if (!mpfr_number_p(r->truth[i]) && bad++ == 0)
            first = i;
    if (bad == 0)
        return false;
    cic_diag_set(d, r->c->path, 0, 0,
                 "case '%s': %zu of the %zu truth values are not numbers (the first at "
                 "row %zu, column %zu): the model overflows even in MPFR, so no error "
                 "can be scored; lower std or outlier_scale in [model.weights]",
                 r->c->name, bad, r->n, first / r->cols, first % r->cols);
    return true;
}


