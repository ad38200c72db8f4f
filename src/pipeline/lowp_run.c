/* SPDX-License-Identifier: MIT */
/* lowp_run.c: what a case with [[engines.lowp]] adds to a run. Per model
 * (the original, then each transform):
 *   - the outlier statistics of every quantized linear's input (tapped
 *     from the first enabled f32 engine's run) and weight, and for a dump
 *     (keep_models) a copy of each input;
 *   - the output of every quantized linear in the verdict run (MPFR with
 *     unrounded weights; for "none" the truth run), the reference of the
 *     per-linear errors;
 *   - one result row per low-precision engine: the block output's errors
 *     against the truth (ULPs in the element format, SQNR) and the error of
 *     each linear's output against its reference. */
#include "pipeline_int.h"

#include "../engine/lowp.h"

#include <math.h>
#include <string.h>

bool _cic_pl_lowp_on(const cic_pipeline *p)
{
    return p->c->n_lowp > 0;
}

/* Room for one more element of an array of cap elements of size sz. */
static void *grow(void *a, int n, int *cap, size_t sz)
{
    void *b;
    int c;
    if (n < *cap)
        return a;
    c = *cap ? 2 * *cap : 64;
    b = realloc(a, (size_t)c * sz);
    if (b)
        *cap = c;
    return b;
}

static int outlier_add(cic_pipeline *p, const char *xf, const char *tensor, bool weight,
                       const float *x, int rows, int cols)
{
    cic_lowp_report *l = &p->rep.lowp;
    cic_outlier_row *row, *a = grow(l->outliers, l->n_outliers, &l->cap_outliers, sizeof *a);
    if (!a)
        return -1;
    l->outliers = a;
    row = &a[l->n_outliers];
    memset(row, 0, sizeof *row);
    cic_strlcpy(row->transform, xf, sizeof row->transform);
    cic_strlcpy(row->tensor, tensor, sizeof row->tensor);
    row->weight = weight;
    row->n_chan = cols;
    row->chan_max = malloc((size_t)(cols ? cols : 1) * sizeof *row->chan_max);
    if (!row->chan_max || cic_outlier_stats(&row->o, x, rows, cols, row->chan_max) < 0) {
        free(row->chan_max);
        return -1;
    }
    l->n_outliers++;
    return 0;
}

/* A copy of a linear's input x [rows, cols] for the dump. */
static int act_keep(cic_pipeline *p, const char *xf, const char *tensor, const float *x,
                    int rows, int cols)
{
    size_t n = (size_t)rows * (size_t)cols;
    cic_pl_act *a = grow(p->acts, p->n_acts, &p->cap_acts, sizeof *a), *k;
    if (!a)
        return -1;
    p->acts = a;
    k = &a[p->n_acts];
    snprintf(k->name, sizeof k->name, "%s:%s", xf, tensor);
    k->rows = rows;
    k->cols = cols;
    k->x = malloc((n ? n : 1) * sizeof *k->x);
    if (!k->x)
        return -1;
    memcpy(k->x, x, n * sizeof *x);
    p->n_acts++;
    return 0;
}

void _cic_pl_acts_free(cic_pipeline *p)
{
    int i;
    for (i = 0; i < p->n_acts; i++)
        free(p->acts[i].x);
    free(p->acts);
    p->acts = NULL;
    p->n_acts = p->cap_acts = 0;
}

static void outlier_tap(void *ctx, int op, const float *x, const float *y, int rows)
{
    cic_pl_tap *t = ctx;
    const cic_op *o = &t->m->ops[op];
    const cic_tensor *w = &t->m->t[o->w];
    (void)y;
    if (outlier_add(t->p, t->xf, w->name, false, x, rows, w->cols) < 0 ||
        (t->p->o.keep_models && act_keep(t->p, t->xf, w->name, x, rows, w->cols) < 0))
        t->failed = 1;
}

int _cic_pl_outlier_begin(cic_pl_tap *t, cic_pipeline *p, const cic_model *m, const char *xf,
                          cic_run_opts *o)
{
    int i;
    memset(t, 0, sizeof *t);
    if (!_cic_pl_lowp_on(p))
        return 0;
    t->p = p;
    t->m = m;
    t->xf = xf;
    o->lin_tap = outlier_tap;
    o->tap_ctx = t;
    for (i = 0; i < m->n_ops; i++) {
        const cic_op *op = &m->ops[i];
        const cic_tensor *w = &m->t[op->w];
        if (cic_lowp_quantized(op) && w->role == CIC_T_WEIGHT &&
            outlier_add(p, xf, w->name, true, w->f32, w->rows, w->cols) < 0)
            return -1;
    }
    return 0;
}

int _cic_pl_outlier_end(cic_pl_tap *t)
{
    return t->failed ? -1 : 0;
}

void _cic_pl_lin_ref_free(cic_pipeline *p)
{
    int i;
    for (i = 0; p->lin_ref && i < p->n_lin_ref; i++)
        free(p->lin_ref[i]);
    free(p->lin_ref);
    p->lin_ref = NULL;
    p->n_lin_ref = 0;
}

/* A linear's output in the verdict run, kept as doubles (the references
 * are far more precise than any low-precision error). */
static void ref_tap(void *ctx, int op, const mpfr_t *y, int rows)
{
    cic_pipeline *p = ctx;
    const cic_model *m = p->lin_ref_model;
    size_t n = (size_t)rows * m->t[m->ops[op].out].cols, j;
    double *v = malloc((n ? n : 1) * sizeof *v);
    if (!v) {
        p->lin_ref_nomem = 1;
        return;
    }
    for (j = 0; j < n; j++)
        v[j] = mpfr_get_d(y[j], MPFR_RNDN);
    p->lin_ref[op] = v;
}

int _cic_pl_lin_ref_begin(cic_pipeline *p, const cic_model *m, cic_run_opts *o)
{
    _cic_pl_lin_ref_free(p);
    if (!_cic_pl_lowp_on(p))
        return 0;
    p->lin_ref = cic_calloc((size_t)m->n_ops, sizeof *p->lin_ref);
    if (!p->lin_ref)
        return -1;
    p->n_lin_ref = m->n_ops;
    p->lin_ref_model = m;
    p->lin_ref_nomem = 0;
    o->lin_tap_mp = ref_tap;
    o->tap_ctx = p;
    return 0;
}

/* A low-precision engine's linear output against its reference. */
static void err_tap(void *ctx, int op, const float *x, const float *y, int rows)
{
    cic_pl_tap *t = ctx;
    cic_pipeline *p = t->p;
    cic_lowp_report *l = &p->rep.lowp;
    const cic_op *o = &t->m->ops[op];
    const double *ref = p->lin_ref && op < p->n_lin_ref ? p->lin_ref[op] : NULL;
    size_t n = (size_t)rows * t->m->t[o->out].cols, j;
    double num = 0, den = 0;
    long bad = 0;
    cic_linear_err *e, *a;
    (void)x;
    if (!ref)
        return; /* no reference (an f64 verdict engine) */
    a = grow(l->lin, l->n_lin, &l->cap_lin, sizeof *a);
    if (!a) {
        t->failed = 1;
        return;
    }
    l->lin = a;
    for (j = 0; j < n; j++) {
        double dv = (double)y[j] - ref[j];
        if (!isfinite(y[j]) || !isfinite(ref[j])) {
            bad++; /* counted, never folded into the norms (DESIGN.md section 5) */
            continue;
        }
        num += dv * dv;
        den += ref[j] * ref[j];
    }
    e = &a[l->n_lin++];
    memset(e, 0, sizeof *e);
    cic_strlcpy(e->transform, t->xf, sizeof e->transform);
    cic_strlcpy(e->engine, t->engine, sizeof e->engine);
    cic_strlcpy(e->tensor, t->m->t[o->w].name, sizeof e->tensor);
    e->nonfinite = bad;
    e->rel_norm2 = bad ? INFINITY : den > 0 ? sqrt(num / den) : NAN;
    e->sqnr_db = -20.0 * log10(e->rel_norm2);
}

static int lowp_row(cic_pipeline *p, const char *xf, const cic_model *m, const cic_result *mx,
                    const cic_lowp_spec *lp, const cic_flop_count *analytical)
{
    enum cic_matmul mm = p->c->f32_openblas ? CIC_MATMUL_OPENBLAS : CIC_MATMUL_FIXED;
    float *y = cic_calloc(p->n, sizeof *y);
    cic_flop_count fc;
    cic_run_opts o;
    cic_pl_tap t;
    cic_result *x;
    char nm[128];
    if (!y)
        return -1;
    _cic_pl_stage(p, "transform %s: %s", xf, lp->name);
    snprintf(nm, sizeof nm, "%s:%s", lp->name, xf);
    _cic_pl_save_out(p, nm, y, NULL, -1);
    memset(&o, 0, sizeof o);
    memset(&fc, 0, sizeof fc);
    memset(&t, 0, sizeof t);
    t.p = p;
    t.m = m;
    t.xf = xf;
    t.engine = lp->name;
    o.flops = &fc;
    o.lin_tap = err_tap;
    o.tap_ctx = &t;
    if (_cic_pl_depth_begin(p, m, lp->elem, &o) < 0 || cic_engine_lowp_run(y, m, lp, mm, &o) < 0 ||
        t.failed || _cic_pl_map_out_f32(p, y, m) < 0)
        return -1;
    x = _cic_pl_new_result(p, xf, lp->name);
    if (mx) /* NULL: "none" */
        _cic_pl_copy_verdict(x, mx);
    x->lowp = true;
    x->has_metrics = true;
    cic_metric_error(&x->metrics, lp->elem, (const mpfr_t *)p->truth, y, p->rows, p->cols,
                     p->prec);
    if (p->n > 0 && x->metrics.nonfinite == p->n)
        x->pass = false;
    /* a NaN or Inf output is no signal at all: -Inf, never "exact" (the
     * rel_norm2 of such a row is NaN, which the old test read as 0) */
    x->sqnr_db = x->metrics.nonfinite > 0       ? -INFINITY
                 : x->metrics.rel_norm2 > 0     ? -20.0 * log10(x->metrics.rel_norm2)
                                                : INFINITY;
    _cic_pl_fill_flops(p, &x->flops, &fc, analytical, true);
    return _cic_pl_depth_end(p, x);
}

int _cic_pl_lowp_rows(cic_pipeline *p, const char *xf, const cic_model *m,
                      const cic_result *mx, const cic_flop_count *analytical)
{
    int e;
    if (p->lin_ref_nomem)
        return -1;
    for (e = 0; e < p->c->n_lowp; e++)
        if (lowp_row(p, xf, m, mx, &p->c->lowp[e], analytical) < 0)
            return -1;
    return 0;
}

/* One rule against one linear of width k: groups that divide k, int32
 * sums that cannot overflow. */
static int check_rule(cic_pipeline *p, const cic_lowp_spec *lp, const cic_quant *q,
                      const char *what, const char *text, const cic_tensor *w, int rows,
                      cic_diag *d)
{
    char msg[160];
    if (cic_quant_groups(q, rows, w->cols, msg, sizeof msg) < 0) {
        cic_diag_set(d, p->c->path, lp->line, 1,
                     "engine '%s': %s = \"%s\" does not fit the linear '%s' ([%d, %d]): %s",
                     lp->name, what, text, w->name, w->rows, w->cols, msg);
        return CIC_EINPUT;
    }
    return CIC_OK;
}

int _cic_pl_lowp_check(cic_pipeline *p, cic_diag *d)
{
    const cic_model *m = p->orig;
    int e, i;
    for (e = 0; e < p->c->n_lowp; e++) {
        const cic_lowp_spec *lp = &p->c->lowp[e];
        for (i = 0; i < m->n_ops; i++) {
            const cic_op *op = &m->ops[i];
            const cic_tensor *w = &m->t[op->w];
            if (!cic_lowp_quantized(op))
                continue;
            if ((lp->wq_on && check_rule(p, lp, &lp->wq, "weights", lp->weights, w, w->rows,
                                         d) != CIC_OK) ||
                (lp->aq_on && check_rule(p, lp, &lp->aq, "activations", lp->activations, w,
                                         m->rows, d) != CIC_OK))
                return CIC_EINPUT;
            if (lp->wq_on && lp->aq_on && cic_quant_is_int(&lp->wq) && cic_quant_is_int(&lp->aq) &&
                cic_lowp_acc_bound(&lp->aq, &lp->wq, w->cols) > 2147483647.0) {
                cic_diag_set(d, p->c->path, lp->line, 1,
                             "engine '%s': int32 sums over %d values of the linear '%s' "
                             "could overflow (at most %.0f); use groups (groupN)",
                             lp->name, w->cols, w->name,
                             cic_lowp_acc_bound(&lp->aq, &lp->wq, w->cols));
                return CIC_EINPUT;
            }
        }
    }
    return CIC_OK;
}
