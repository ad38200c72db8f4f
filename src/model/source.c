/* SPDX-License-Identifier: MIT */
/* source.c: the weight sources (source.h). The seeded generator draws each
 * marked tensor with cic_rng_fill_f32 from the key of (seed, tensor name):
 * the draw of a tensor depends on nothing else, so drawing them in tensor
 * order at the end of a build gives the bits a draw during the build gave,
 * with the total known for the progress. */
#include "source.h"

#include "checkpoint.h"

#include "../base/rng.h"

#include <stdlib.h>
#include <string.h>

/* Draw tensor t of m from its stream. The block input and the condition
 * hold one slice per sample; a model that is a shard of a case (sample0 >
 * 0) takes the slices its samples have in the whole case, so it draws the
 * stream up to its last sample and keeps the tail. -1 without memory. */
static int _cic_draw(cic_model *m, int id)
{
    cic_tensor *t = &m->t[id];
    size_t n = (size_t)t->rows * (size_t)t->cols, skip = 0;
    uint64_t key = cic_rng_key(m->cfg.seed, t->name);
    float *all;
    if ((id == m->input || id == m->cond) && m->cfg.sample0 > 0)
        skip = (size_t)m->cfg.sample0 * (n / (size_t)m->cfg.samples);
    if (skip == 0) {
        cic_rng_fill_f32(t->f32, (uint64_t)n, key, (int)m->cfg.dist, t->fill_std,
                         cic_rt_matmul_threads(m->rt));
        return 0;
    }
    all = cic_calloc(skip + n, sizeof *all);
    if (!all)
        return -1;
    cic_rng_fill_f32(all, (uint64_t)(skip + n), key, (int)m->cfg.dist, t->fill_std,
                     cic_rt_matmul_threads(m->rt));
    memcpy(t->f32, all + skip, n * sizeof *all);
    free(all);
    return 0;
}

static int _cic_source_seed_fill(cic_model *m, const cic_model_progress *p, cic_diag *d)
{
    double total = 0, done = 0;
    int id;
    if (m->cfg.input_kind == CIC_INPUT_FILE && !m->cfg.checkpoint[0] &&
        m->t[m->input].fill != CIC_FILL_NONE && cic_input_fill(m, NULL, d) < 0)
        return -1; /* [input] file of hidden states for a seeded model */
    for (id = 0; id < m->n_t; id++)
        if (m->t[id].fill != CIC_FILL_NONE)
            total += (double)m->t[id].rows * (double)m->t[id].cols;
    for (id = 0; id < m->n_t; id++) {
        cic_tensor *t = &m->t[id];
        size_t i, n = (size_t)t->rows * (size_t)t->cols;
        if (t->fill == CIC_FILL_NONE)
            continue;
        if (_cic_draw(m, id) < 0)
            return -1; /* out of memory: d stays empty */
        if (t->fill == CIC_FILL_GAIN)
            for (i = 0; i < n; i++)
                t->f32[i] = 1.0f + t->f32[i]; /* one IEEE rounding: deterministic */
        t->fill = CIC_FILL_NONE;
        done += (double)n;
        if (p && p->fn)
            p->fn(p->ctx, done, total);
    }
    return 0;
}

/* The checkpoint's weights, then the seeded generator for the rest (the
 * block input). */
static int _cic_source_checkpoint_fill(cic_model *m, const cic_model_progress *p, cic_diag *d)
{
    if (cic_ckpt_fill(m, p, d) < 0)
        return -1;
    return _cic_source_seed_fill(m, NULL, d);
}

const cic_weight_source CIC_SOURCES[] = {
    [CIC_SOURCE_SEED] = {.name = "seed", .fill = _cic_source_seed_fill},
    [CIC_SOURCE_CHECKPOINT] = {.name = "checkpoint", .fill = _cic_source_checkpoint_fill},
};
_Static_assert(sizeof CIC_SOURCES / sizeof CIC_SOURCES[0] == CIC_SOURCE_COUNT,
               "one descriptor per weight source");

const cic_weight_source *cic_source_get(enum cic_source_id id)
{
    CIC_ASSERT((unsigned)id < CIC_SOURCE_COUNT);
    return &CIC_SOURCES[id];
}
