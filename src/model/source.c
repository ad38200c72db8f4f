/* SPDX-License-Identifier: MIT */
/* source.c: the weight sources (source.h). The seeded generator draws each
 * marked tensor with cic_rng_fill_f32 from the key of (seed, tensor name):
 * the draw of a tensor depends on nothing else, so drawing them in tensor
 * order at the end of a build gives the bits a draw during the build gave,
 * with the total known for the progress. */
#include "source.h"

#include "checkpoint.h"

#include "../base/rng.h"

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
        cic_rng_fill_f32(t->f32, (uint64_t)n, cic_rng_key(m->cfg.seed, t->name),
                         (int)m->cfg.dist, t->fill_std);
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
    {"seed", _cic_source_seed_fill},
    {"checkpoint", _cic_source_checkpoint_fill},
};
_Static_assert(sizeof CIC_SOURCES / sizeof CIC_SOURCES[0] == CIC_SOURCE_COUNT,
               "one descriptor per weight source");

const cic_weight_source *cic_source_get(enum cic_source_id id)
{
    CIC_ASSERT((unsigned)id < CIC_SOURCE_COUNT);
    return &CIC_SOURCES[id];
}
