/* SPDX-License-Identifier: MIT */
/* depth.c: error against depth (DESIGN.md section 13, "Per block"). Every
 * row with metrics gets one entry per block: that block's output (the
 * residual stream after it) against the truth of that tensor, and for a
 * head readout one more, the readout itself. The truth's block outputs come
 * from the truth's ball run through a tensor tap (engine.h), kept as
 * doubles with the largest radius of each row; each engine run taps the
 * same tensors of its model, maps each back to the original basis in double
 * (times Q^T, Q the model's stream rotation, then without its row mean for
 * a LayerNorm stream) and scores it at once, so no block output outlives
 * the op that made it. The tensor the case reads out takes the row's own
 * figures (its truth proven, escalated where needed). Workload: up to a
 * DiT-XL/2 of 28 blocks, 512 rows of 1152: 130 MB of truth as doubles. */
#include "pipeline_int.h"

#include "../base/mpgemm.h"

#include <math.h>
#include <string.h>

struct cic_pl_depth {
    int n;           /* entries: the layers, and one for a head readout */
    int layers;
    int readout;     /* the entry of the tensor the case reads out */
    bool center;     /* a LayerNorm stream: compared without its row mean */
    size_t rows, d;
    char (*name)[96];
    double **x;      /* per block its truth, rows x d; NULL for the readout */
    double **rad;    /* per block the largest radius of each row */
    /* the run being tapped */
    const cic_model *m;
    const cic_format *fmt;
    mpfr_prec_t prec;
    int *block_of;   /* the run's model: tensor id -> block, -1 */
    unsigned char *want;
    cic_block_entry *e; /* the run's entries, until a row takes them */
    cic_tensor_tap tap;
    size_t row0;     /* a rerun of one sample (Ziv): its first row */
    bool failed;
};

/* The output of every block of m (the last op of each layer writes it)
 * into id[layers]: -1 where that is not a [tokens, d] activation. */
static void block_ids(const cic_model *m, int layers, int *id)
{
    int i, l;
    for (l = 0; l < layers; l++)
        id[l] = -1;
    for (i = 0; i < m->n_ops; i++)
        if (m->ops[i].layer >= 0 && m->ops[i].layer < layers)
            id[m->ops[i].layer] = m->ops[i].out;
    for (l = 0; l < layers; l++) {
        const cic_tensor *t = id[l] >= 0 ? &m->t[id[l]] : NULL;
        if (t && (t->role != CIC_T_ACT || t->rows_kind != CIC_ROWS_TOKENS ||
                  t->cols != m->cfg.d_model))
            id[l] = -1;
    }
}

static void run_clear(cic_pl_depth *z)
{
    free(z->block_of);
    free(z->want);
    free(z->e);
    z->block_of = NULL;
    z->want = NULL;
    z->e = NULL;
    z->m = NULL;
}

void _cic_pl_depth_free(cic_pipeline *p)
{
    cic_pl_depth *z = p->depth;
    int b;
    if (!z)
        return;
    run_clear(z);
    for (b = 0; b < z->n; b++) {
        free(z->x ? z->x[b] : NULL);
        free(z->rad ? z->rad[b] : NULL);
    }
    free(z->x);
    free(z->rad);
    free(z->name);
    free(z);
    p->depth = NULL;
}

/* The tap's tables for a run of m: block_of and want for every block
 * output of m whose truth is kept. 0, or -1 when memory runs out. */
static int run_tables(cic_pl_depth *z, const cic_model *m, const int *id)
{
    int b;
    z->block_of = malloc((size_t)m->n_t * sizeof *z->block_of);
    z->want = cic_calloc((size_t)m->n_t, 1);
    if (!z->block_of || !z->want)
        return -1;
    for (b = 0; b < m->n_t; b++)
        z->block_of[b] = -1;
    for (b = 0; b < z->layers; b++)
        if (id[b] >= 0 && b != z->readout) {
            z->block_of[id[b]] = b;
            z->want[id[b]] = 1;
        }
    z->m = m;
    z->tap.want = z->want;
    z->tap.ctx = z;
    return 0;
}

/* Row r of a block's truth as doubles, centred for a LayerNorm stream; the
 * row's radius: the ball's largest (twice it after centring: each value
 * and the mean move), plus the double roundings of the values and of the
 * centring, (d + 4) 2^-52 of the row's largest |x|. */
static double truth_row(double *x, const mpfr_t *y, const double *rad, size_t d, bool center)
{
    double rmax = 0, xmax = 0, mean = 0;
    size_t j;
    for (j = 0; j < d; j++) {
        x[j] = mpfr_get_d(y[j], MPFR_RNDN);
        rmax = !rad ? INFINITY : rad[j] > rmax || isnan(rad[j]) ? rad[j] : rmax;
        mean += x[j];
    }
    mean /= (double)d;
    for (j = 0; j < d && center; j++)
        x[j] -= mean;
    for (j = 0; j < d; j++)
        xmax = fabs(x[j]) > xmax ? fabs(x[j]) : xmax;
    return (center ? 2 * rmax : rmax) + (double)(d + 4) * 0x1p-52 * xmax;
}

static void truth_tap(void *ctx, int id, const mpfr_t *y, const double *rad, int rows)
{
    cic_pl_depth *z = ctx;
    int b = z->block_of[id];
    size_t r;
    CIC_ASSERT(b >= 0 && (size_t)rows == z->rows);
    z->x[b] = malloc(z->rows * z->d * sizeof **z->x);
    z->rad[b] = malloc(z->rows * sizeof **z->rad);
    if (!z->x[b] || !z->rad[b]) {
        z->failed = true;
        return;
    }
    for (r = 0; r < z->rows; r++)
        z->rad[b][r] = truth_row(z->x[b] + r * z->d, y + r * z->d, rad ? rad + r * z->d : NULL,
                                 z->d, z->center);
}

/* A rerun of one sample at a higher precision (Ziv's escalation): each
 * row of it replaces the first run's where its radius is smaller. */
static void truth_tap_sample(void *ctx, int id, const mpfr_t *y, const double *rad, int rows)
{
    cic_pl_depth *z = ctx;
    int b = z->block_of[id];
    double *x = malloc(z->d * sizeof *x);
    size_t r;
    CIC_ASSERT(b >= 0 && z->row0 + (size_t)rows <= z->rows);
    if (!x || !z->x[b] || !z->rad[b]) {
        free(x);
        return; /* the first run kept nothing here: nothing to sharpen */
    }
    for (r = 0; r < (size_t)rows; r++) {
        size_t q = z->row0 + r;
        double w = truth_row(x, y + r * z->d, rad ? rad + r * z->d : NULL, z->d, z->center);
        if (w < z->rad[b][q]) {
            memcpy(z->x[b] + q * z->d, x, z->d * sizeof *x);
            z->rad[b][q] = w;
        }
    }
    free(x);
}

int _cic_pl_depth_truth_sample(cic_pipeline *p, cic_run_opts *o, int s)
{
    const cic_model *m = p->orig;
    cic_pl_depth *z = p->depth;
    int *id, rc;
    if (!z)
        return 0;
    if (!(id = malloc((size_t)z->layers * sizeof *id)))
        return -1;
    block_ids(m, z->layers, id);
    rc = run_tables(z, m, id);
    free(id);
    if (rc < 0)
        return -1;
    z->row0 = (size_t)s * (size_t)m->cfg.tokens;
    z->tap.mp = truth_tap_sample;
    o->tensor_tap = &z->tap;
    return 0;
}

int _cic_pl_depth_truth(cic_pipeline *p, cic_run_opts *o)
{
    const cic_model *m = p->orig;
    int L = m->cfg.layers, n = L + (m->output != m->residual), *id, b;
    cic_pl_depth *z = p->depth = cic_calloc(1, sizeof *z);
    if (!z)
        return -1;
    z->n = n;
    z->layers = L;
    z->readout = n - 1;
    z->center = cic_block(m->cfg.block)->norm != CIC_NORM_RMSNORM;
    z->rows = (size_t)m->rows;
    z->d = (size_t)m->cfg.d_model;
    z->name = cic_calloc((size_t)n, sizeof *z->name);
    z->x = cic_calloc((size_t)n, sizeof *z->x);
    z->rad = cic_calloc((size_t)n, sizeof *z->rad);
    id = malloc((size_t)L * sizeof *id);
    if (!z->name || !z->x || !z->rad || !id) {
        free(id);
        return -1;
    }
    block_ids(m, L, id);
    for (b = 0; b < n; b++) {
        int t = b < L ? id[b] : m->output;
        cic_strlcpy(z->name[b], t >= 0 ? m->t[t].name : "?", sizeof z->name[b]);
    }
    b = run_tables(z, m, id);
    free(id);
    if (b < 0)
        return -1;
    z->tap.mp = truth_tap;
    o->tensor_tap = &z->tap;
    return 0;
}

/* Whether the truth is sharp enough for e's figures: its radius moves
 * none of them by more than a sixteenth (an output with a NaN or Inf has
 * figures that no radius changes). */
static void judge_entry(cic_block_entry *e, mpfr_prec_t prec)
{
    const cic_block_metrics *m = &e->m;
    e->has = m->nonfinite > 0 || (m->rad_abs <= m->max_abs / 16 &&
                                  m->rad_rel <= m->rel_norm2 / 16 &&
                                  m->rad_ulp <= m->ulp_p99 / 16);
    if (!e->has)
        snprintf(e->why, sizeof e->why,
                 "the truth of this block is known to +-%.3g (%.3g relative, %.3g ulp) at "
                 "%ld bits: too wide for its errors; raise mpfr_prec",
                 m->rad_abs, m->rad_rel, m->rad_ulp, (long)prec);
}

/* An engine's block output y (rows x d, the model's basis) mapped back
 * (times Q^T, then centred) and scored against the block's truth. */
static void engine_tap(void *ctx, int id, const float *y, int rows)
{
    cic_pl_depth *z = ctx;
    int b = z->block_of[id];
    size_t n = z->rows * z->d, i, r, j;
    const double *q = z->m->stream_q;
    double *v = malloc(n * sizeof *v), *w = q ? malloc(n * sizeof *w) : NULL;
    CIC_ASSERT(b >= 0 && (size_t)rows == z->rows);
    if (!v || (q && !w)) {
        z->failed = true;
        goto done;
    }
    for (i = 0; i < n; i++)
        v[i] = y[i];
    if (q) { /* x = x' Q^T, the stream being x' = x Q */
        cic_gemm_f64(w, v, false, q, true, (int)z->rows, (int)z->d, (int)z->d);
        memcpy(v, w, n * sizeof *v);
    }
    for (r = 0; r < z->rows && z->center; r++) {
        double mean = 0, *row = v + r * z->d;
        for (j = 0; j < z->d; j++)
            mean += row[j];
        mean /= (double)z->d;
        for (j = 0; j < z->d; j++)
            row[j] -= mean;
    }
    if (cic_metric_block(&z->e[b].m, z->fmt, z->x[b], z->rad[b], v, z->rows, z->d) < 0)
        z->failed = true;
    else
        judge_entry(&z->e[b], z->prec);
done:
    free(v);
    free(w);
}

/* Entry b's place and the reason it has no figures until scored. */
static void entry_init(cic_pl_depth *z, int b, int id)
{
    cic_block_entry *e = &z->e[b];
    e->block = b;
    cic_strlcpy(e->tensor, z->name[b], sizeof e->tensor);
    e->readout = b == z->readout;
    e->head = b >= z->layers;
    if (e->readout)
        return;
    if (!z->x[b])
        snprintf(e->why, sizeof e->why, "no truth was kept for block %d", b);
    else if (id < 0)
        snprintf(e->why, sizeof e->why,
                 "the transformed graph has no [tokens, d] output of block %d to map back", b);
}

int _cic_pl_depth_begin(cic_pipeline *p, const cic_model *m, const cic_format *fmt,
                        cic_run_opts *o)
{
    cic_pl_depth *z = p->depth;
    int *id, b;
    if (!z)
        return 0;
    run_clear(z);
    z->failed = false;
    z->fmt = fmt;
    z->prec = p->prec;
    z->e = cic_calloc((size_t)z->n, sizeof *z->e);
    id = malloc((size_t)z->layers * sizeof *id);
    if (!z->e || !id) {
        free(id);
        return -1;
    }
    block_ids(m, z->layers, id);
    for (b = 0; b < z->n; b++)
        entry_init(z, b, b < z->layers ? id[b] : m->output);
    for (b = 0; b < z->layers; b++)
        if (!z->x[b])
            id[b] = -1; /* nothing to score it against */
    b = run_tables(z, m, id);
    free(id);
    if (b < 0)
        return -1;
    z->tap.mp = NULL;
    z->tap.f32 = engine_tap;
    o->tensor_tap = &z->tap;
    return 0;
}

int _cic_pl_depth_end(cic_pipeline *p, cic_result *x)
{
    cic_pl_depth *z = p->depth;
    cic_block_entry *e;
    if (!z || !z->e)
        return 0;
    if (z->failed)
        return -1;
    e = &z->e[z->readout];
    memset(&e->m, 0, sizeof e->m);
    e->m.max_abs = x->metrics.max_abs;
    e->m.rel_norm2 = x->metrics.rel_norm2;
    e->m.ulp_p99 = x->metrics.ulp_row.p99;
    e->m.nonfinite = x->metrics.nonfinite;
    e->has = true;
    x->per_block = z->e;
    x->n_per_block = z->n;
    z->e = NULL;
    run_clear(z);
    return 0;
}

int _cic_pl_depth_truth_end(cic_pipeline *p)
{
    cic_pl_depth *z = p->depth;
    if (!z)
        return 0;
    run_clear(z);
    return z->failed ? -1 : 0;
}
