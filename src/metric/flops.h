/* flops.h: closed-form FLOP counts of a block, per site, derived from the
 * case alone (DESIGN.md section 3). The engines count the same work as they
 * run it; the report shows both and whether they agree exactly. */
#ifndef CIC_FLOPS_H
#define CIC_FLOPS_H

#include "../engine/engine.h"

/* What the norms of the graph still do after a chain of transforms. */
typedef struct {
    bool center; /* subtracts the mean (LayerNorm) */
    bool gain;   /* multiplies by g */
    bool bias;   /* adds b */
} cic_norm_state;

/* The norms of the original block of cfg. */
cic_norm_state cic_flops_norm_original(const cic_model_cfg *cfg);

/* The norms after transform i of the case and the transforms it builds on
 * (i = -1: the original). */
cic_norm_state cic_flops_norm_after(const cic_case *c, int i);

/* Analytical FLOPs of the whole case (all samples), per site. */
void cic_flops_analytical(cic_flop_count *fc, const cic_model_cfg *cfg,
                          enum cic_readout readout, cic_norm_state ns);

#endif
