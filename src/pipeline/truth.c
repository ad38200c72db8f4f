/* SPDX-License-Identifier: MIT */
/* truth.c: the original model and its MPFR truth, the yardstick of every
 * float32 figure, proven: the truth at mpfr_prec bits carries a rigorous
 * radius per value (a ball run, engine/mp_ball.h), and a value is proven
 * when its whole ball rounds to one binary32. Samples with values that are
 * not proven are recomputed at twice the precision until they are (Ziv's
 * strategy). --recheck also recomputes sample 0 at mpfr_prec + 64 bits, the
 * check that came before the proof. */
#include "pipeline_int.h"

#include "../base/mpslice.h"
#include "../base/mpvec.h"
#include "../engine/mp_ball.h"
#include "../metric/flops.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
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
    cic_model_progress mp = {NULL, NULL, r->rt};
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
    cic_flops_case(fc, CIC_CASE_CHAIN(r->c), i);
}

/* A ball run (mp_ball.h) of samples s0 .. s0 + ns - 1 at prec: midpoints
 * and radii of the readout, after the readout map (the centring of a
 * residual readout; y Q^T has no bound, the original has none). why gets
 * the reason when no bound could be made (radii infinite then). rad NULL:
 * a plain run, the midpoints alone. */
/* Blocks a guess reads (cic_ball_out.layer_rel); deeper models guess
 * nothing. */
#define CIC_GUESS_LAYERS 256

/* From the relative radii of the blocks' outputs lr[0 .. L-1] (infinite
 * past where the bound broke down): the last finite one, grown at the
 * blocks' mean rate (bits a block) over the blocks left and one more for
 * what follows the last block; the largest over the runs in
 * r->rel_guess. */
static void guess_rel(cic_pipeline *r, const double *lr, int L)
{
    int k = -1, j;
    double g, est;
    for (j = 0; j < L && isfinite(lr[j]) && lr[j] > 0; j++)
        k = j;
    if (k < 1 || k == L - 1)
        return;
    g = (log2(lr[k]) - log2(lr[0])) / k;
    est = log2(lr[k]) + (g > 0 ? g : 0) * (L - k);
    r->rel_guess = est > r->rel_guess ? est : r->rel_guess;
}

static int ball_run(cic_pipeline *r, int s0, int ns, mpfr_prec_t prec, mpfr_t *mid, double *rad,
                    cic_run_opts *o, char *why, size_t why_len)
{
    cic_ball_out bo;
    size_t n = (size_t)ns * r->c->model.tokens * r->cols, i;
    double lr[CIC_GUESS_LAYERS];
    memset(&bo, 0, sizeof bo);
    bo.rad = rad;
    bo.layer_rel = lr;
    bo.n_layers = r->orig->cfg.layers < CIC_GUESS_LAYERS ? r->orig->cfg.layers : 0;
    o->sample0 = s0;
    o->n_samples = ns;
    o->ball = rad ? &bo : NULL;
    if (cic_engine_mpfr_run(mid, r->orig, prec, false, o) < 0)
        return -1;
    if (bo.failed && !why[0])
        snprintf(why, why_len, "%s", bo.why);
    if (rad && bo.n_layers > 1)
        guess_rel(r, lr, bo.n_layers);
    if (_cic_pl_needs_map(r->orig)) {
        /* the map works on the run's rows; apply it to these rows */
        size_t keep = r->rows;
        int rc;
        if (rad && r->orig->out_q) {
            for (i = 0; i < n; i++)
                rad[i] = INFINITY;
            if (!why[0])
                snprintf(why, why_len, "the readout map y Q^T has no error bound");
        } else if (rad) {
            cic_ball_center_rows(rad, (const mpfr_t *)mid, n / r->cols, r->cols, r->prec);
        }
        r->rows = n / r->cols;
        rc = _cic_pl_map_out(r, mid, (const mpfr_t *)mid, r->orig);
        r->rows = keep;
        if (rc < 0)
            return -1;
    }
    return 0;
}

/* v = w rounded to v's precision, still rounding to the binary32 f that
 * w's ball proved (a rounding onto a binary32 tie could move it). */
static void keep_value(mpfr_ptr v, mpfr_srcptr w, float f)
{
    int k;
    mpfr_set(v, w, MPFR_RNDN);
    for (k = 0; k < 4 && cic_mp_get_f32(v) != f; k++) {
        if (mpfr_cmp_d(v, (double)f) < 0)
            mpfr_nextabove(v);
        else
            mpfr_nextbelow(v);
    }
    if (cic_mp_get_f32(v) != f)
        mpfr_set_flt(v, f, MPFR_RNDN);
}

/* The largest rad / |mid| of the values proven (the radius the report
 * gives: of the values kept). */
static double kept_rel(const mpfr_t *mid, const double *rad, const unsigned char *ok, size_t n)
{
    double w = 0;
    size_t i;
    for (i = 0; i < n; i++)
        if (ok[i] && !mpfr_zero_p(mid[i])) {
            double rel = rad[i] / fabs(mpfr_get_d(mid[i], MPFR_RNDZ));
            w = rel > w ? rel : w;
        }
    return w;
}

/* The largest rad / |mid| of the values not proven (infinite for a zero
 * midpoint), the measure of the bits the next precision must add. */
static double worst_rel(const mpfr_t *mid, const double *rad, const unsigned char *ok, size_t n)
{
    double w = 0;
    size_t i;
    for (i = 0; i < n; i++)
        if (!ok[i]) {
            double a = fabs(mpfr_get_d(mid[i], MPFR_RNDZ)), rel = a > 0 ? rad[i] / a : INFINITY;
            w = rel > w || isnan(rel) ? rel : w;
        }
    return w;
}

/* The next precision after p: the radii scale with 2^-p, so one whose
 * relative radius rel must fall 32 bits below a binary32's 2^-24 needs
 * p + log2(rel) + 56 bits; at least one limb more than p, a multiple
 * of 64 (whole limbs). When the radius says nothing (infinite: the bound broke down
 * inside the model), the blocks' radii extrapolated to the output (guess,
 * log2) stand in for it, up to four times p, which is what it takes
 * without them. Only the precision tried depends on this: a value is
 * proven or not at it as at any other. */
static mpfr_prec_t next_prec(mpfr_prec_t p, double rel, double guess)
{
    double want = isfinite(rel) && rel > 0 ? (double)p + log2(rel) + 56
                  : isfinite(guess)        ? fmin((double)p + guess + 56, 4.0 * (double)p)
                                           : 4.0 * (double)p;
    mpfr_prec_t q = p + 64;
    if (want > (double)q)
        q = want > 8192 ? 8192 : (mpfr_prec_t)ceil(want);
    return (q + 63) / 64 * 64;
}

/* Ziv's strategy: the samples that hold unproven values are recomputed at
 * a higher precision (next_prec), then again, until every value is proven
 * or the precisions run out; a value proven there takes that midpoint. */
static int escalate(cic_pipeline *r, unsigned char *ok, size_t *left, double *maxrel, double worst)
{
    cic_truth_proof *pf = &r->rep.proof;
    size_t per = (size_t)r->c->model.tokens * r->cols, i;
    mpfr_prec_t p2 = r->prec;
    int s;
    while (*left > 0 && pf->n_precs < CIC_PROOF_MAX_PRECS) {
        mpfr_t *tmp;
        double *rad2, next_worst = 0;
        p2 = next_prec(p2, worst, r->rel_guess);
        r->rel_guess = -INFINITY;
        tmp = cic_mpvec_create(per, p2);
        rad2 = malloc(per * sizeof *rad2);
        if (!tmp || !rad2) {
            cic_mpvec_destroy(tmp, per);
            free(rad2);
            return -1;
        }
        _cic_pl_stage(r, "truth: %zu value%s not proven; their samples at %ld bits", *left,
                      *left == 1 ? "" : "s", (long)p2);
        pf->precs[pf->n_precs++] = (long)p2;
        for (s = 0; s < r->c->model.samples && *left > 0; s++) {
            size_t base = (size_t)s * per;
            cic_run_opts o;
            for (i = 0; i < per && ok[base + i]; i++)
                ;
            if (i == per)
                continue;
            memset(&o, 0, sizeof o);
            if (_cic_pl_depth_truth_sample(r, &o, s) < 0 ||
                ball_run(r, s, 1, p2, tmp, rad2, &o, pf->why, sizeof pf->why) < 0 ||
                _cic_pl_depth_truth_end(r) < 0) {
                cic_mpvec_destroy(tmp, per);
                free(rad2);
                return -1;
            }
            for (i = 0; i < per; i++) {
                double rel;
                if (ok[base + i])
                    continue;
                if (cic_ball_prove(tmp + i, rad2 + i, 1, NULL, &rel) != 1) {
                    next_worst = rel > next_worst || isnan(rel) ? rel : next_worst;
                    if (mpfr_zero_p(tmp[i]))
                        next_worst = INFINITY;
                    continue;
                }
                keep_value(r->truth[base + i], tmp[i], cic_mp_get_f32(tmp[i]));
                ok[base + i] = 1;
                pf->escalated++;
                (*left)--;
                rel += ldexp(1.0, -(int)r->prec); /* the rounding to prec */
                *maxrel = rel > *maxrel ? rel : *maxrel;
            }
        }
        cic_mpvec_destroy(tmp, per);
        free(rad2);
        worst = next_worst;
    }
    if (*left > 0) /* the values not proven count with their last radius */
        *maxrel = worst > *maxrel || isnan(worst) ? worst : *maxrel;
    return 0;
}

/* --recheck: sample 0 again at prec + 64; every value must round to the
 * same binary32 and agree to 2^(16 - prec) relatively (a handful of
 * roundings at prec bits each lie far below). */
static int recheck(cic_pipeline *r)
{
    size_t per = (size_t)r->c->model.tokens * r->cols, i;
    mpfr_t *cert = cic_mpvec_create(per, r->prec + 64);
    double maxrel = 0;
    char why[160] = "";
    cic_run_opts o;
    cic_pl_work cb;
    bool same = true;
    mpfr_t diff;
    if (!cert)
        return -1;
    _cic_pl_stage(r, "recheck: sample 0 at %ld bits", (long)r->prec + 64);
    memset(&o, 0, sizeof o);
    _cic_pl_work_begin(&cb, r, "recheck", cic_flop_total(&r->base_analytical) / r->c->model.samples,
                       &o);
    if (ball_run(r, 0, 1, r->prec + 64, cert, NULL, &o, why, sizeof why) < 0) {
        cic_mpvec_destroy(cert, per);
        return -1;
    }
    _cic_pl_work_end(&cb);
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
    cic_mpvec_destroy(cert, per);
    r->rep.truth_cert_diff = maxrel;
    r->rep.proof.rechecked = true;
    if (!same || maxrel > ldexp(1.0, 16 - (int)r->prec))
        r->rep.truth_certified = false;
    return 0;
}

int _cic_pl_truth(cic_pipeline *r)
{
    cic_truth_proof *pf = &r->rep.proof;
    unsigned char *ok = malloc(r->n ? r->n : 1);
    double *rad = malloc((r->n ? r->n : 1) * sizeof *rad), maxrel;
    size_t left;
    cic_run_opts o;
    cic_pl_work b;
    cic_slice_stats s0, s1;
    double t0 = _cic_pl_now();
    int rc = -1;
    cic_mp_slice_stats(&s0, r->rt);
    r->rel_guess = -INFINITY;
    memset(pf, 0, sizeof *pf);
    r->rep.truth_cert_diff = NAN;
    if (!ok || !rad)
        goto done;
    memset(&o, 0, sizeof o);
    o.flops = &r->base_counted;
    _cic_pl_stage(r, "truth: original model in MPFR at %ld bits, with error bounds", (long)r->prec);
    _cic_pl_flops_formula(r, &r->base_analytical, -1);
    _cic_pl_work_begin(&b, r, "truth", cic_flop_total(&r->base_analytical), &o);
    if (_cic_pl_lin_ref_begin(r, r->orig, &o) < 0 || _cic_pl_depth_truth(r, &o) < 0 ||
        ball_run(r, 0, r->c->model.samples, r->prec, r->truth, rad, &o, pf->why,
                 sizeof pf->why) < 0 || _cic_pl_depth_truth_end(r) < 0)
        goto done;
    _cic_pl_work_end(&b);
    pf->values = r->n;
    pf->precs[pf->n_precs++] = (long)r->prec;
    pf->first = cic_ball_prove((const mpfr_t *)r->truth, rad, r->n, ok, &maxrel);
    left = r->n - pf->first;
    maxrel = kept_rel((const mpfr_t *)r->truth, rad, ok, r->n);
    if (!pf->why[0] &&
        escalate(r, ok, &left, &maxrel, worst_rel((const mpfr_t *)r->truth, rad, ok, r->n)) < 0)
        goto done;
    pf->max_rel_radius = maxrel;
    pf->proven = left == 0;
    /* where its time went: the exact products are its floor as computed */
    cic_mp_slice_stats(&s1, r->rt);
    _cic_pl_stage(r, "truth: %.1f s, of which its exact dgemm products %.2f s (%.1f GFLOP in %llu calls)",
                  _cic_pl_now() - t0, 1e-9 * (double)(s1.gemm_ns - s0.gemm_ns),
                  2e-9 * (double)(s1.gemm_fma - s0.gemm_fma),
                  (unsigned long long)(s1.gemms - s0.gemms));
    r->rep.truth_certified = pf->proven;
    rc = r->o.recheck ? recheck(r) : 0;
done:
    free(ok);
    free(rad);
    return rc;
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


