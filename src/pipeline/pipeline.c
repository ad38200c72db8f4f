/* SPDX-License-Identifier: MIT */
/* pipeline.c: one pipeline run from start to report (pipeline.h): the
 * memory guard, the stages in order, the overall pass, and the report's
 * ownership. The progress helpers the stages share are in progress.c,
 * the rows of results in rows.c. */
#include "pipeline_int.h"

#include "../base/mpvec.h"
#include "../base/safetensors_read.h"
#include "../metric/flops.h"
#include "../report/dump.h"
#include "../xform/xform.h"

#include <stdarg.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* The memory guard, before anything big is allocated. */
static int memory_guard(const cic_pipeline *p, cic_diag *d)
{
    double limit = p->o.max_memory, est = (double)cic_case_memory_estimate(p->c);
    if (limit <= 0) {
        long pages = sysconf(_SC_PHYS_PAGES), psz = sysconf(_SC_PAGESIZE);
        limit = pages > 0 && psz > 0 ? 0.5 * (double)pages * (double)psz : 8.0 * (1 << 30);
    }
    if (est <= limit)
        return CIC_OK;
    {
        char why[512];
        cic_case_memory_explain(why, sizeof why, p->c);
        cic_diag_set(d, p->c->path, 0, 0,
                     "case '%s' needs about %.1f MiB, more than the limit of %.1f MiB "
                     "(--max-memory): %s; shrink d_model, tokens, samples, layers or "
                     "mpfr_prec, or run fewer transforms, or raise --max-memory",
                     p->c->name, est / 1048576.0, limit / 1048576.0, why);
    }
    return CIC_EINPUT;
}

static int allocate(cic_pipeline *p, cic_diag *d)
{
    size_t rows_max = (size_t)(CIC_MATMUL_COUNT + p->c->n_xf * (CIC_MATMUL_COUNT + 1) +
                               (p->c->n_xf + 1) * p->c->n_lowp);
    p->prec = p->c->mpfr_prec;
    d->msg[0] = '\0';
    p->orig = _cic_pl_build_original(p, d);
    if (!p->orig && d->msg[0]) /* the checkpoint's values (checkpoint.h) */
        return CIC_EINPUT;
    if (!p->orig) {
        cic_diag_set(d, p->c->path, 0, 0, "out of memory building the model");
        return CIC_EINTERNAL;
    }
    p->rows = (size_t)p->orig->rows;
    p->cols = (size_t)cic_model_out_cols(p->orig);
    p->n = p->rows * p->cols;
    p->truth = cic_mpvec_create(p->n, p->prec);
    p->res = cic_calloc(rows_max, sizeof *p->res);
    p->gates = cic_calloc((size_t)(p->c->n_gates + 1) * rows_max, sizeof *p->gates);
    if (!p->truth || !p->res || !p->gates) {
        cic_diag_set(d, p->c->path, 0, 0, "out of memory");
        return CIC_EINTERNAL;
    }
    cic_model_weights_sha256(p->rep.weights_sha256, p->orig);
    return CIC_OK;
}

/* The truth, the "before" rows, the verdict reference, each transform. */
static int stages(cic_pipeline *p, cic_diag *d)
{
    int i;
    if (_cic_pl_lowp_check(p, d) != CIC_OK)
        return CIC_EINPUT;
    if (_cic_pl_truth(p) < 0) {
        cic_diag_set(d, p->c->path, 0, 0, "out of memory computing the truth");
        return CIC_EINTERNAL;
    }
    if (_cic_pl_truth_nonfinite(p, d))
        return CIC_EINPUT;
    if (_cic_pl_before(p) < 0) {
        cic_diag_set(d, p->c->path, 0, 0, "out of memory running the f32 engines");
        return CIC_EINTERNAL;
    }
    if (_cic_pl_verdict_ref(p) < 0) {
        cic_diag_set(d, p->c->path, 0, 0, "out of memory running the f64 engine");
        return CIC_EINTERNAL;
    }
    for (i = 0; i < p->c->n_xf; i++)
        if (_cic_pl_xform(p, i, d) < 0)
            return CIC_EINTERNAL;
    return CIC_OK;
}


/* The report: every row and gate, the overall pass. */
static void assemble(cic_pipeline *p)
{
    cic_report *rep = &p->rep;
    int i;
    rep->kase = p->c;
    rep->has_dit_flops = cic_dit_flops_table_fill(&rep->dit_flops, CIC_CASE_CHAIN(p->c));
    if (p->o.env)
        rep->env = *p->o.env;
    else
        cic_report_env_fill(&rep->env);
    rep->results = p->res;
    rep->n_results = p->n_res;
    rep->gates = p->gates;
    rep->n_gates = p->n_gates;
    rep->pass = rep->truth_certified;
    for (i = 0; i < p->n_res; i++)
        rep->pass = rep->pass && p->res[i].pass;
    for (i = 0; i < p->n_gates; i++)
        rep->pass = rep->pass && p->gates[i].pass;
}

/* After the rows: gates, hashes, the report, the baseline, the wall time.
 * CIC_OK, or the baseline comparison's error. */
static int score(cic_pipeline *p, cic_diag *d)
{
    int rc;
    _cic_pl_gates(p);
    _cic_pl_hashes(p);
    assemble(p);
    if ((rc = _cic_pl_compare(p, d)) != CIC_OK)
        return rc;
    p->rep.wall_seconds = _cic_pl_now() - p->t0;
    return CIC_OK;
}

/* The run's context: the caller's, or one of its own from the threads
 * option (no state is shared with other runs in the process). */
static void rt_setup(cic_pipeline *p)
{
    cic_rt_init(&p->rt_own, p->o.threads);
    p->rt = p->o.rt ? p->o.rt : &p->rt_own;
}

int cic_pipeline_check(const cic_case *c, bool dump, cic_diag *d)
{
    if (cic_xform_check(CIC_CASE_CHAIN(c), d) != CIC_OK || (dump && cic_dump_names_check(c, d) != CIC_OK))
        return CIC_EINPUT;
    return CIC_OK;
}

int cic_pipeline_run(cic_pipeline **out, const cic_case *c, const cic_pipeline_opts *o,
                     cic_diag *d)
{
    cic_pipeline *p = cic_calloc(1, sizeof *p);
    int rc;
    *out = p;
    if (!p) {
        cic_diag_set(d, c->path, 0, 0, "out of memory");
        return CIC_EINTERNAL;
    }
    p->o = *o;
    p->c = c;
    p->t0 = _cic_pl_now();
    rt_setup(p);
    cic_stfile_watch_begin();
    rc = cic_pipeline_check(c, false, d) != CIC_OK ? CIC_EINPUT : memory_guard(p, d);
    if (rc == CIC_OK && (rc = allocate(p, d)) == CIC_OK)
        rc = stages(p, d);
    /* a checkpoint (or q or input file) changed while it was read: its
     * values are not the ones checked, whatever was made of them */
    if (cic_stfile_check_unchanged(d) != 0)
        return CIC_EINTERNAL;
    if (rc != CIC_OK || (rc = score(p, d)) != CIC_OK)
        return rc;
    p->parts.n = p->n;
    p->parts.truth = p->truth;
    p->parts.ref = p->ref_own;
    p->parts.base_counted = p->base_counted;
    p->parts.truth_certified = p->rep.truth_certified;
    p->parts.truth_cert_diff = p->rep.truth_cert_diff;
    p->parts.proof = p->rep.proof;
    return p->rep.pass ? CIC_OK : CIC_EGATE;
}

const cic_pipeline_partials *cic_pipeline_partials_of(const cic_pipeline *p)
{
    return &p->parts;
}

void cic_pipeline_partials_free(cic_pipeline_partials *pp)
{
    size_t n = pp->n;
    int i, e;
    cic_mpvec_destroy(pp->truth, n);
    cic_mpvec_destroy(pp->ref, n);
    for (e = 0; e < CIC_MATMUL_COUNT; e++)
        free(pp->before[e]);
    for (i = 0; i < CIC_MAX_XFORMS; i++) {
        cic_mpvec_destroy(pp->yhp[i], n);
        cic_mpvec_destroy(pp->yrw[i], n);
        for (e = 0; e < CIC_MATMUL_COUNT; e++)
            free(pp->y[i][e]);
    }
    memset(pp, 0, sizeof *pp);
}

int cic_pipeline_replay(cic_pipeline **out, const cic_case *c, const cic_pipeline_opts *o,
                        cic_pipeline_partials *parts, cic_diag *d)
{
    cic_pipeline *p = cic_calloc(1, sizeof *p);
    int rc;
    *out = p;
    if (!p || c->n_lowp > 0) {
        if (p)
            cic_diag_set(d, c->path, 0, 0, "case '%s': a case with low-precision engines "
                         "cannot be scored from partials", c->name);
        else
            cic_diag_set(d, c->path, 0, 0, "out of memory");
        cic_pipeline_partials_free(parts);
        return p ? CIC_EINPUT : CIC_EINTERNAL;
    }
    p->o = *o;
    p->c = c;
    p->t0 = _cic_pl_now();
    rt_setup(p);
    if ((rc = allocate(p, d)) != CIC_OK) {
        cic_pipeline_partials_free(parts);
        return rc;
    }
    if (parts->n != p->n) {
        cic_diag_set(d, c->path, 0, 0, "case '%s': %zu values per output in the partials, "
                     "%zu in the case", c->name, parts->n, p->n);
        cic_pipeline_partials_free(parts);
        return CIC_EINPUT;
    }
    cic_mpvec_destroy(p->truth, p->n);
    p->parts = *parts;
    memset(parts, 0, sizeof *parts);
    p->truth = p->parts.truth;
    p->ref = p->ref_own = p->parts.ref;
    if (!p->ref)
        p->ref = p->truth;
    p->base_counted = p->parts.base_counted;
    _cic_pl_flops_formula(p, &p->base_analytical, -1);
    p->rep.truth_certified = p->parts.truth_certified;
    p->rep.truth_cert_diff = p->parts.truth_cert_diff;
    p->rep.proof = p->parts.proof;
    _cic_pl_stage(p, "scoring %s from its shards", c->name);
    if (_cic_pl_replay_rows(p, d) < 0)
        return CIC_EINTERNAL;
    if ((rc = score(p, d)) != CIC_OK)
        return rc;
    return p->rep.pass ? CIC_OK : CIC_EGATE;
}

const cic_report *cic_pipeline_report(const cic_pipeline *p)
{
    return &p->rep;
}

void cic_pipeline_take_report(cic_pipeline *p, cic_report *out)
{
    *out = p->rep;
    out->results = p->res;
    out->gates = p->gates;
    out->n_gates = p->gates ? p->n_gates : 0;
    p->res = NULL;
    p->gates = NULL;
    memset(&p->rep.lowp, 0, sizeof p->rep.lowp);
    p->rep.results = NULL;
    p->rep.gates = NULL;
    p->rep.regress = NULL;
    p->rep.n_results = p->rep.n_gates = p->rep.n_regress = 0;
}

void cic_pipeline_destroy(cic_pipeline *p)
{
    int i;
    if (!p)
        return;
    cic_rt_clear(&p->rt_own);
    for (i = 0; i < p->n_saved; i++) {
        free(p->saved[i].f32);
        cic_mpvec_destroy(p->saved[i].mp, p->n);
    }
    /* the before arrays are owned by saved[] */
    for (i = 0; i < CIC_MAX_XFORMS; i++)
        cic_model_destroy(p->xm[i]);
    cic_model_destroy(p->orig);
    cic_mpvec_destroy(p->truth, p->n);
    cic_mpvec_destroy(p->ref_own, p->n);
    cic_results_free(p->res, p->n_res);
    free(p->gates);
    free(p->rep.regress);
    cic_lowp_report_free(&p->rep.lowp);
    for (i = 0; i < CIC_MAX_XFORMS; i++)
        cic_mpvec_destroy(p->parts.yrw[i], p->n);
    _cic_pl_lin_ref_free(p);
    _cic_pl_acts_free(p);
    _cic_pl_depth_free(p);
    free(p);
}
