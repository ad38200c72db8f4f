/* SPDX-License-Identifier: MIT */
/* rows.c: the rows of results a pipeline's stages make (pipeline_int.h):
 * a new row, its saved output, its FLOPs, its f32 scores and the verdict a
 * row shares with its MPFR row. Called by the stages, the low-precision
 * runs and the truth; calls none of them. */
#include "pipeline_int.h"

#include "../base/mpvec.h"
#include "../metric/flops.h"
#include "../metric/metric.h"

#include <string.h>

cic_result *_cic_pl_new_result(cic_pipeline *r, const char *xf, const char *engine)
{
    cic_result *x = &r->res[r->n_res++];
    memset(x, 0, sizeof *x);
    cic_strlcpy(x->transform, xf, sizeof x->transform);
    cic_strlcpy(x->engine, engine, sizeof x->engine);
    x->pass = true;
    return x;
}

void _cic_pl_save_out(cic_pipeline *r, const char *name, float *f, mpfr_t *mp, int result)
{
    cic_pl_saved *s = &r->saved[r->n_saved++];
    cic_strlcpy(s->name, name, sizeof s->name);
    s->f32 = f;
    s->mp = mp;
    s->result = result;
}

bool _cic_pl_sites_equal(const cic_flop_count *a, const cic_flop_count *b)
{
    int i;
    for (i = 0; i < CIC_SITE_COUNT; i++)
        if (a->site[i] != b->site[i])
            return false;
    return true;
}

void _cic_pl_fill_flops(cic_pipeline *r, cic_flops *f, const cic_flop_count *counted,
                       const cic_flop_count *analytical, bool engines_agree)
{
    int i;
    double R = (double)r->rows, B = r->c->model.samples;
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
        _cic_pl_sites_equal(counted, analytical) &&
        _cic_pl_sites_equal(&r->base_counted, &r->base_analytical);
    for (i = 0; i < CIC_SITE_COUNT && i < CIC_MAX_SITES; i++) {
        cic_strlcpy(f->sites[i].name, CIC_SITE_NAME[i], sizeof f->sites[i].name);
        f->sites[i].analytical = analytical->site[i] - r->base_analytical.site[i];
        f->sites[i].counted = counted->site[i] - r->base_counted.site[i];
    }
    f->n_sites = i;
}


/* A row whose every output is NaN or Inf has nothing to score: it fails
 * whatever its gates say (its figures are NaN or +Inf already). */
void _cic_pl_score_f32(cic_pipeline *r, cic_result *x, const float *y)
{
    cic_metric_error(&x->metrics, cic_format_get(CIC_FORMAT_FLOAT32), (const mpfr_t *)r->truth, y,
                     r->rows, r->cols, r->prec);
    if (r->n > 0 && x->metrics.nonfinite == r->n)
        x->pass = false;
}

void _cic_pl_copy_verdict(cic_result *x, const cic_result *mx)
{
    x->has_verdict = true;
    x->expect = mx->expect;
    x->verdict = mx->verdict;
    x->ce_residual = mx->ce_residual;
    x->ce_threshold_equivalent = mx->ce_threshold_equivalent;
    x->ce_threshold_broken = mx->ce_threshold_broken;
    x->pass = mx->pass;
    x->n_samples = mx->n_samples;
    memcpy(x->per_sample, mx->per_sample, sizeof x->per_sample);
}

bool _cic_pl_engine_on(const cic_case *c, int e)
{
    return e == CIC_MATMUL_OPENBLAS ? c->f32_openblas : c->f32_fixed;
}

