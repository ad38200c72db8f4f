/* SPDX-License-Identifier: MIT */
/* judge.c: what a pipeline run concludes from its numbers: which engine's
 * rows carry the verdict, the gates of the case on every row, the hashes of
 * the outputs that must not move (the truth, and each verdict run whose
 * bits are the same on every machine), the overall pass, and the comparison
 * with the accepted baseline. */
#include "pipeline_int.h"

#include "../model/model.h"

#include <string.h>

/* The exactness row's engine: "mpfr", or "f64" when the case asks for the
 * f64 engine to give the verdicts. */
const char *_cic_pl_verdict_label(const cic_pipeline *r)
{
    return CIC_VERDICT_ENGINE_NAME[r->c->verdict_engine];
}

/* Are the verdict engine's outputs for this transform the same bits on every
 * machine? Not when OpenBLAS computed the transform or the verdict run: its
 * kernels and thread counts move the last bits, so no hash is pinned. */
static bool reproducible(const cic_pipeline *r, const char *transform)
{
    int i;
    if (r->c->verdict_engine == CIC_VERDICT_ENGINE_F64_BLAS)
        return false;
    for (i = 0; i < r->c->n_xf; i++)
        if (!strcmp(r->c->xf[i].name, transform))
            break;
    /* the transform and every one it was applied after */
    for (; i >= 0 && i < r->c->n_xf; i = r->c->xf[i].after)
        if (r->c->xf[i].prec == CIC_TPREC_F64_BLAS)
            return false;
    return true;
}

/* Verdicts from the f64 engine (fixed order or OpenBLAS)? */
bool _cic_pl_verdict_f64(const cic_pipeline *r)
{
    return r->c->verdict_engine == CIC_VERDICT_ENGINE_F64 ||
           r->c->verdict_engine == CIC_VERDICT_ENGINE_F64_BLAS;
}

static bool name_match(const char *pat, const char *s)
{
    return strcmp(pat, "*") == 0 || strcmp(pat, s) == 0;
}

void _cic_pl_gates(cic_pipeline *r)
{
    int g, i;
    for (g = 0; g < r->c->n_gates; g++) {
        const cic_gate_spec *gs = &r->c->gates[g];
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

void _cic_pl_hashes(cic_pipeline *r)
{
    int i;
    mp_sha256(r->rep.truth_sha256, (const mpfr_t *)r->truth, r->n);
    /* each verdict run's output: the transform's math, bit for bit */
    for (i = 0; i < r->n_saved; i++) {
        const cic_pl_saved *s = &r->saved[i];
        cic_result *x;
        if (!s->mp || s->result < 0)
            continue;
        x = &r->res[s->result];
        if (reproducible(r, x->transform))
            mp_sha256(x->mpfr_sha256, (const mpfr_t *)s->mp, r->n);
    }
}

/* Compare with the baseline (reference/<case>.json, or in baseline_dir),
 * when there is one. CIC_OK, or CIC_EINPUT with d (a malformed baseline, or
 * something there that is not a regular file). */
int _cic_pl_compare(cic_pipeline *r, cic_diag *d)
{
    char bpath[1200], note[1400];
    int have;
    if (r->o.no_baseline)
        return CIC_OK;
    snprintf(bpath, sizeof bpath, "%s/%s.json", r->o.baseline_dir ? r->o.baseline_dir : "reference",
             r->c->name);
    /* never fopen to test: a FIFO would block the run */
    have = cic_baseline_probe(bpath, d);
    if (have < 0)
        return CIC_EINPUT;
    if (have > 0)
        return cic_baseline_compare(&r->rep, bpath, &r->o.tol, d) < 0 ? CIC_EINPUT : CIC_OK;
    if (r->o.baseline_dir && r->o.progress.warn) {
        snprintf(note, sizeof note, "%s: no baseline for case '%s' (cicheck bless to write one)",
                 bpath, r->c->name);
        r->o.progress.warn(r->o.progress.ctx, note);
    }
    return CIC_OK;
}
