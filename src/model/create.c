/* SPDX-License-Identifier: MIT */
/* create.c: building the original model of a case (graph + weights): the
 * block descriptor builds the graph with build.c's helpers, the weight
 * source (source.h: seeded or a checkpoint) gives the values.
 *
 * Every seeded weight is a pure function of (seed, tensor name): drawn from
 * the counter RNG with correctly rounded arithmetic and rounded once to
 * binary32, so the SHA-256 of the weights in reference/ holds on every
 * machine. */
#include "build.h"
#include "source.h"

cic_model *cic_model_create(const cic_model_cfg *cfg, enum cic_readout readout)
{
    return cic_model_create_progress(cfg, readout, NULL, NULL);
}

cic_model *cic_model_create_progress(const cic_model_cfg *cfg, enum cic_readout readout,
                                     const cic_model_progress *p, cic_diag *d)
{
    return cic_model_create_from(
        cfg, readout, cic_source_get(cfg->checkpoint[0] ? CIC_SOURCE_CHECKPOINT : CIC_SOURCE_SEED),
        p, d);
}

cic_model *cic_model_create_from(const cic_model_cfg *cfg, enum cic_readout readout,
                                 const struct cic_weight_source_s *src,
                                 const cic_model_progress *p, cic_diag *d)
{
    cic_model *m;
    cic_bld b;
    m = cic_calloc(1, sizeof *m);
    if (!m)
        return NULL;
    m->cfg = *cfg;
    m->rt = p ? p->rt : NULL; /* before the weights: the draw's threads */
    m->rows = cfg->tokens * cfg->samples;
    m->output = m->residual = -1;
    m->cond = -1;
    b.m = m;
    b.ok = 1;
    b.kv_heads = cic_block(cfg->block)->llama ? cic_cfg_kv_heads(cfg) : cfg->heads;
    /* every block reads its input X0 [R, d], drawn with std 1 */
    m->input = cic_model_tensor_add(m, "input", CIC_T_INPUT, m->rows, cfg->d_model);
    if (m->input < 0)
        goto fail;
    _cic_fill(m, m->input, 1.0);
    cic_block(cfg->block)->build(&b, (int)readout);
    if (!b.ok || src->fill(m, p, d) < 0)
        goto fail;
    _cic_apply_outliers(m);
    if (_cic_apply_massive(m) < 0)
        goto fail;
    return m;
fail:
    cic_model_destroy(m);
    return NULL;
}

