/* SPDX-License-Identifier: MIT */
/* verify_stream.c: cicheck verify layer by layer (verify_int.h). Per layer
 * the two checkpoints' weights of that layer are read into a model of one
 * layer each (the last with the head), the layer runs on the two streams,
 * is compared and dropped: memory holds one layer's weights of each model
 * and the streams (rows x d doubles per model, and per float engine two
 * float streams), whatever the depth. The cheapest engine that decides
 * the verdict decides it: f64 with its proven bound (verify_f64.c) when
 * the enclosure of ce lies on one side of the thresholds, MPFR at --mpfr-prec
 * on the same streams otherwise. */
#include "verify_int.h"

#include "../base/mpgemm.h"
#include "../base/mpvec.h"
#include "../engine/engine.h"
#include "../metric/metric.h"
#include "../xform/xform.h"

#include <math.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

const char *const CIC_VERIFY_BY_NAME[CIC_VERIFY_BY_COUNT] = {
    [CIC_VERIFY_BY_F64] = "f64", [CIC_VERIFY_BY_MPFR] = "mpfr"};

/* The residual stream after the layer, caught from the MPFR run. */
typedef struct {
    int id;         /* the model's residual (act.0.resid2, parallel: act.0.resid) */
    mpfr_t *resid;  /* rows x d at prec */
    int d;
} tap;

typedef struct {
    const cic_model *m;
    tap *t;
} tapctx;

static void on_op_m(void *ctx, int op, const mpfr_t *y, int rows)
{
    tapctx *c = ctx;
    size_t i, n = (size_t)rows * c->t->d;
    if (c->m->ops[op].out != c->t->id)
        return;
    for (i = 0; i < n; i++)
        mpfr_set(c->t->resid[i], y[i], MPFR_RNDN);
}

/* The streams between layers: per model the f64 midpoints, and per float
 * engine its own float32 stream. */
typedef struct {
    double *xa, *xb;
    float *fa[CIC_VERIFY_MAX_ENGINES], *fb[CIC_VERIFY_MAX_ENGINES];
    double *qd, *qabs; /* Q and |Q| as doubles (exact) */
    size_t n;          /* rows x d */
} streams;

static void streams_free(streams *s)
{
    int k;
    free(s->xa);
    free(s->xb);
    for (k = 0; k < CIC_VERIFY_MAX_ENGINES; k++) {
        free(s->fa[k]);
        free(s->fb[k]);
    }
    free(s->qd);
    free(s->qabs);
}

/* A model of layer l (from o->layer0) of one checkpoint: cfg's sizes, one
 * layer, the head when last; its input drawn (or read) only for the first
 * layer, the stream's after. NULL with d set, or NULL alone (memory). */
static cic_model *layer_model(const cic_vrun *w, bool trans, int l, bool last, cic_diag *d)
{
    cic_model_cfg c = trans ? w->cb : w->ca;
    cic_model_progress mp = {NULL, NULL, w->rt};
    cic_model *m;
    int i;
    c.layer0 = w->o->layer0 + l;
    c.layers = 1;
    if (l > 0) { /* the stream is the input: no draw, no file */
        c.input_kind = CIC_INPUT_RANDOM;
        c.input_file[0] = '\0';
    }
    d->msg[0] = '\0';
    m = cic_model_create_progress(&c, last ? CIC_READOUT_HEAD : CIC_READOUT_RESIDUAL, &mp, d);
    if (!m && !d->msg[0])
        cic_diag_set(d, trans ? w->o->trans : w->o->orig, 0, 0,
                     "out of memory building layer %d", c.layer0);
    for (i = 0; m && trans && w->o->ln_fused && i < m->n_ops; i++)
        if (m->ops[i].kind == CIC_OP_NORM)
            m->ops[i].center = false; /* RMSNorm: the stream is centred already */
    if (m && trans && cic_xform_add_online(m, w->o->online_down, w->o->online_qk) < 0) {
        cic_diag_set(d, w->o->trans, 0, 0, "the online ops asked for cannot be built (no "
                     "Hadamard matrix of the width %d or %d here)", m->cfg.d_mlp,
                     m->cfg.d_model / m->cfg.heads);
        cic_model_destroy(m);
        return NULL;
    }
    return m;
}

/* The rewrite's block input: the original's X (without its row means when
 * center) times Q at prec, then rounded to double: its stream. */
static int rotate_input(double *xb, cic_model *b, const cic_model *a, const mpfr_t *q,
                        bool center, mpfr_prec_t prec)
{
    int rows = a->t[a->input].rows, dm = a->t[a->input].cols;
    size_t n = (size_t)rows * dm, i;
    mpfr_t *x = cic_mpvec_create(n, center ? prec : 24), *y = cic_mpvec_create(n, prec);
    cic_dot_scratch s;
    int rc = -1;
    if (!x || !y || cic_dot_scratch_init(&s, (size_t)dm, prec) < 0)
        goto done;
    cic_mpvec_set_f32(x, a->t[a->input].f32, n);
    if (!center || cic_mpvec_center_rows(x, (size_t)rows, (size_t)dm, prec) == 0) {
        cic_mp_matmul(y, (const mpfr_t *)x, false, q, false, rows, dm, dm, false,
                      cic_rt_matmul_threads(b->rt), &s);
        for (i = 0; i < n; i++) {
            b->t[b->input].f32[i] = cic_mp_get_f32(y[i]); /* the float engines': X Q once */
            xb[i] = mpfr_get_d(y[i], MPFR_RNDN);
        }
        rc = 0;
    }
    cic_dot_scratch_clear(&s);
done:
    cic_mpvec_destroy(x, n);
    cic_mpvec_destroy(y, n);
    return rc;
}

/* The first layer's models give the streams their start. */
static int streams_init(streams *s, const cic_vrun *w, cic_model *a, cic_model *b, int n_eng)
{
    size_t i;
    int k, dm = a->cfg.d_model;
    s->n = (size_t)a->rows * dm;
    s->xa = cic_calloc(s->n, sizeof *s->xa);
    s->xb = cic_calloc(s->n, sizeof *s->xb);
    if (!s->xa || !s->xb)
        return -1;
    if (w->q) {
        s->qd = cic_calloc((size_t)dm * dm, sizeof *s->qd);
        s->qabs = cic_calloc((size_t)dm * dm, sizeof *s->qabs);
        if (!s->qd || !s->qabs)
            return -1;
        for (i = 0; i < (size_t)dm * dm; i++) {
            s->qd[i] = mpfr_get_d(w->q[i], MPFR_RNDN); /* exact: 53 bits */
            s->qabs[i] = fabs(s->qd[i]);
        }
    }
    for (i = 0; i < s->n; i++) {
        s->xa[i] = a->t[a->input].f32[i];
        s->xb[i] = b->t[b->input].f32[i];
    }
    if (w->q && w->hidden &&
        rotate_input(s->xb, b, a, w->q, w->o->ln_fused, w->o->prec) < 0)
        return -1;
    for (k = 0; k < n_eng; k++) {
        s->fa[k] = cic_calloc(s->n, sizeof *s->fa[k]);
        s->fb[k] = cic_calloc(s->n, sizeof *s->fb[k]);
        if (!s->fa[k] || !s->fb[k])
            return -1;
        memcpy(s->fa[k], a->t[a->input].f32, s->n * sizeof *s->fa[k]);
        memcpy(s->fb[k], b->t[b->input].f32, s->n * sizeof *s->fb[k]);
    }
    return 0;
}

/* The number of float engines (f32 ones, then the case's low-precision
 * ones), and engine k's name and matmul (-1: low-precision k - f32s). */
static int engine_count(const cic_case *c)
{
    return !c ? 1 : (c->f32_openblas ? 1 : 0) + (c->f32_fixed ? 1 : 0) + c->n_lowp;
}

static const char *engine_at(const cic_case *c, int k, int *mm, int *lp)
{
    bool use[2] = {!c || c->f32_openblas, c && c->f32_fixed};
    int j;
    *mm = *lp = -1;
    for (j = 0; j < 2; j++)
        if (use[j] && k-- == 0) {
            *mm = j;
            return CIC_ENGINE_F32_NAME[j];
        }
    *lp = k;
    return c->lowp[k].name;
}

/* Engine k on m with the input f (rows x d floats) into out. */
static int engine_run(const cic_case *c, int k, cic_model *m, const float *f, float *out,
                      size_t n)
{
    int mm, lp;
    memcpy(m->t[m->input].f32, f, n * sizeof *f);
    engine_at(c, k, &mm, &lp);
    if (mm >= 0)
        return cic_engine_f32_run(out, m, (enum cic_matmul)mm, NULL);
    return cic_engine_lowp_run(out, m, &c->lowp[lp],
                               c->f32_openblas ? CIC_MATMUL_OPENBLAS : CIC_MATMUL_FIXED, NULL);
}

/* Every float engine through layer l on its streams; at the head, the
 * logits against ya (the original's from the f64 streams). */
static int engines_layer(const cic_vrun *w, streams *s, cic_model *a, cic_model *b, bool last,
                         const double *ya, cic_verify_result *r)
{
    size_t n_out = (size_t)a->rows * cic_model_out_cols(a), i;
    float *out = cic_calloc(n_out > s->n ? n_out : s->n, sizeof *out);
    mpfr_t *y = last ? cic_mpvec_create(n_out, 53) : NULL;
    int k, mm, lp, rc = -1;
    if (!out || (last && !y))
        goto done;
    for (i = 0; last && i < n_out; i++)
        mpfr_set_d(y[i], ya[i], MPFR_RNDN);
    for (k = 0; k < r->n_eng; k++) {
        int ea = engine_run(w->ec, k, a, s->fa[k], out, s->n);
        if (last)
            r->eng_orig[k] = ea == 0 ? cic_metric_rel_diff_f32(out, (const mpfr_t *)y, n_out,
                                                               w->o->prec) : NAN;
        else if (ea == 0)
            memcpy(s->fa[k], out, s->n * sizeof *out);
        ea = engine_run(w->ec, k, b, s->fb[k], out, s->n);
        if (last)
            r->eng_trans[k] = ea == 0 ? cic_metric_rel_diff_f32(out, (const mpfr_t *)y, n_out,
                                                                w->o->prec) : NAN;
        else if (ea == 0)
            memcpy(s->fb[k], out, s->n * sizeof *out);
        if (last)
            cic_strlcpy(r->eng[k], engine_at(w->ec, k, &mm, &lp), sizeof r->eng[k]);
    }
    rc = 0;
done:
    free(out);
    cic_mpvec_destroy(y, n_out);
    return rc;
}

/* The model's input made the stream x (exact at 53 bits) for the MPFR
 * engine. */
static int set_input(cic_model *m, const double *x, size_t n)
{
    double *v = cic_calloc(n, sizeof *v);
    if (!v)
        return -1;
    memcpy(v, x, n * sizeof *v);
    cic_tensor_set_f64(&m->t[m->input], v, 53);
    return 0;
}

/* MPFR run of m on the stream x into out (the readout), the residual after
 * the layer into t. */
static int run_mp(mpfr_t *out, cic_model *m, const double *x, size_t n, mpfr_prec_t prec,
                  tap *t)
{
    cic_run_opts ro;
    tapctx c = {m, t};
    if (set_input(m, x, n) < 0)
        return -1;
    memset(&ro, 0, sizeof ro);
    ro.op_tap_mp = on_op_m;
    ro.tap_ctx = &c;
    return cic_engine_mpfr_run(out, m, prec, false, &ro);
}

/* One layer's verdicts in MPFR at p on the streams: the layer's ce (when
 * do_layer) and the head's (when last and do_head). When next is given
 * (the f64 run had no bound), the streams after the layer are MPFR's
 * rounded to double and next holds the original's logits (last). */
static int layer_mpfr(const cic_vrun *w, streams *s, cic_model *a, cic_model *b, int l,
                      bool last, bool do_layer, bool do_head, double *next,
                      cic_verify_result *r)
{
    mpfr_prec_t p = w->o->prec;
    int dm = a->cfg.d_model, rows = a->rows;
    size_t n_out = (size_t)rows * cic_model_out_cols(a);
    mpfr_t *ya = cic_mpvec_create(n_out, p), *yb = cic_mpvec_create(n_out, p);
    mpfr_t *tmp = cic_mpvec_create(s->n, p);
    tap ta = {a->residual, cic_mpvec_create(s->n, p), dm};
    tap tb = {b->residual, cic_mpvec_create(s->n, p), dm};
    cic_dot_scratch sc;
    size_t i;
    int rc = -1;
    CIC_ASSERT(ta.id >= 0 && tb.id >= 0);
    if (!ya || !yb || !tmp || !ta.resid || !tb.resid ||
        run_mp(ya, a, s->xa, s->n, p, &ta) != 0 || run_mp(yb, b, s->xb, s->n, p, &tb) != 0)
        goto done;
    for (i = 0; next && !last && i < s->n; i++) { /* before ta is centred */
        s->xa[i] = mpfr_get_d(ta.resid[i], MPFR_RNDN);
        s->xb[i] = mpfr_get_d(tb.resid[i], MPFR_RNDN);
    }
    if (do_layer) {
        if ((w->o->ln_fused &&
             cic_mpvec_center_rows(ta.resid, (size_t)rows, (size_t)dm, p) < 0) ||
            cic_dot_scratch_init(&sc, (size_t)dm, p) < 0)
            goto done;
        cic_mp_matmul(tmp, (const mpfr_t *)tb.resid, false, w->q, true, rows, dm, dm, false,
                      cic_rt_matmul_threads(a->rt), &sc);
        cic_dot_scratch_clear(&sc);
        r->ce[l] = cic_metric_rel_diff((const mpfr_t *)tmp, (const mpfr_t *)ta.resid, s->n, p);
        r->by[l] = CIC_VERIFY_BY_MPFR;
    }
    if (last && do_head) {
        r->head_ce = cic_metric_rel_diff((const mpfr_t *)yb, (const mpfr_t *)ya, n_out, p);
        r->head_by = CIC_VERIFY_BY_MPFR;
    }
    for (i = 0; next && last && i < n_out; i++)
        next[i] = mpfr_get_d(ya[i], MPFR_RNDN);
    rc = 0;
done:
    cic_mpvec_destroy(ya, n_out);
    cic_mpvec_destroy(yb, n_out);
    cic_mpvec_destroy(tmp, s->n);
    cic_mpvec_destroy(ta.resid, s->n);
    cic_mpvec_destroy(tb.resid, s->n);
    return rc;
}

/* ce's f64 enclosure decides when both its ends have the same verdict. */
static bool decide(double *ce, double *bound, double mid, double lo, double hi,
                   const cic_verify_result *r)
{
    *bound = fmax(hi - mid, mid - lo);
    *ce = mid;
    return cic_xform_verdict(lo, r->eq, r->br) == cic_xform_verdict(hi, r->eq, r->br);
}

/* The f64 enclosures of the layer's ce and (last) the head's, and which
 * of them they decide. -1 when memory runs out. */
static int f64_decide(const cic_vrun *w, const streams *s, const cic_vf64 *va,
                      const cic_vf64 *vb, int l, bool last, bool *need_layer, bool *need_head,
                      cic_verify_result *r)
{
    const cic_model *a = va->m, *b = vb->m;
    int ia = a->residual, ib = b->residual; /* the stream after the layer, any block */
    double mid, lo, hi;
    int e;
    if (r->have_q) {
        e = cic_vf64_ce(&mid, &lo, &hi, va->mid[ia], va->rad[ia], vb->mid[ib], vb->rad[ib],
                        s->qd, s->qabs, a->rows, a->cfg.d_model, w->o->ln_fused);
        if (e < 0)
            return -1;
        if (e == 0 && decide(&r->ce[l], &r->bound[l], mid, lo, hi, r)) {
            r->by[l] = CIC_VERIFY_BY_F64;
            *need_layer = false;
        }
    }
    if (last) {
        e = cic_vf64_ce(&mid, &lo, &hi, va->mid[a->output], va->rad[a->output],
                        vb->mid[b->output], vb->rad[b->output], NULL, NULL, a->rows,
                        cic_model_out_cols(a), false);
        if (e < 0)
            return -1;
        if (e == 0 && decide(&r->head_ce, &r->head_bound, mid, lo, hi, r)) {
            r->head_by = CIC_VERIFY_BY_F64;
            *need_head = false;
        }
    }
    return 0;
}

/* Layer l: f64 with its bound on both streams; MPFR where that does not
 * decide (or on every layer when an op has no f64 bound: then MPFR's
 * streams, rounded to double, go on); the float engines; the streams move
 * on. */
static int layer_run(const cic_vrun *w, streams *s, cic_model *a, cic_model *b, int l,
                     bool last, cic_verify_result *r)
{
    cic_vf64 va, vb;
    int ra, rb, rc = -1;
    bool need_layer = r->have_q, need_head = last, f64;
    size_t n_out = (size_t)a->rows * cic_model_out_cols(a);
    double *logits = NULL;
    r->bound[l] = r->head_bound = NAN;
    ra = cic_vf64_run(&va, a, s->xa);
    rb = ra == 0 ? cic_vf64_run(&vb, b, s->xb) : 1;
    if (ra < 0 || rb < 0)
        goto done;
    f64 = ra == 0 && rb == 0;
    if (!f64 && !r->f64_why[0])
        snprintf(r->f64_why, sizeof r->f64_why, "%s", ra ? va.why : vb.why);
    if (f64 && !w->o->mpfr_only && f64_decide(w, s, &va, &vb, l, last, &need_layer, &need_head, r) < 0)
        goto done;
    if (!f64 && !(logits = cic_calloc(n_out, sizeof *logits)))
        goto done;
    if ((need_layer || need_head || !f64) &&
        layer_mpfr(w, s, a, b, l, last, need_layer, need_head, f64 ? NULL : logits, r) < 0)
        goto done;
    if (r->have_q) {
        r->verdict[l] = cic_xform_verdict(r->ce[l], r->eq, r->br);
        if (r->verdict[l] != CIC_VERDICT_EQUIVALENT && r->first_bad < 0)
            r->first_bad = r->layer0 + l;
    }
    if (last)
        r->head_verdict = cic_xform_verdict(r->head_ce, r->eq, r->br);
    if (engines_layer(w, s, a, b, last, f64 ? va.mid[a->output] : logits, r) < 0)
        goto done;
    if (f64 && !last) {
        int ia = a->residual, ib = b->residual;
        memcpy(s->xa, va.mid[ia], s->n * sizeof *s->xa);
        memcpy(s->xb, vb.mid[ib], s->n * sizeof *s->xb);
    }
    rc = 0;
done:
    free(logits);
    cic_vf64_free(&va);
    if (ra == 0)
        cic_vf64_free(&vb);
    return rc;
}

int cic_verify_stream(const cic_vrun *w, cic_verify_result *r, cic_diag *d)
{
    streams s;
    cic_model *a = NULL, *b = NULL;
    int l, L = w->ca.layers, rc = -1;
    struct timespec t0, t1;
    memset(&s, 0, sizeof s);
    r->n_eng = engine_count(w->ec);
    for (l = 0; l < L; l++) {
        bool last = l == L - 1;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        if (!(a = layer_model(w, false, l, last, d)) || !(b = layer_model(w, true, l, last, d)))
            goto done;
        if (l == 0 && streams_init(&s, w, a, b, r->n_eng) < 0)
            goto done;
        if ((rc = layer_run(w, &s, a, b, l, last, r)) != 0)
            goto done;
        rc = -1;
        cic_model_destroy(a);
        cic_model_destroy(b);
        a = b = NULL;
        clock_gettime(CLOCK_MONOTONIC, &t1);
        r->sec[l] = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
    }
    rc = 0;
done:
    cic_model_destroy(a);
    cic_model_destroy(b);
    streams_free(&s);
    return rc;
}
