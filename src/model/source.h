/* SPDX-License-Identifier: MIT */
/* source.h: where a model's weight values come from. One descriptor per
 * source, in one table (source.c). A block builder makes the graph and marks
 * each weight and input that needs values (with how the seeded generator
 * draws it: a normal or uniform draw of some std, or a norm gain around 1);
 * the source then gives every marked tensor its values, in tensor order, and
 * reports its progress. Today's source is the seeded generator (values a
 * pure function of the case's seed and the tensor's name); the checkpoint
 * reader (checkpoint.h, a case's [model] checkpoint) gives the weights and
 * leaves the block input to the seeded generator. */
#ifndef CIC_SOURCE_H
#define CIC_SOURCE_H

#include "model.h"

enum cic_source_id { CIC_SOURCE_SEED, CIC_SOURCE_CHECKPOINT, CIC_SOURCE_COUNT };

typedef struct cic_weight_source_s {
    const char *name; /* "seed", "checkpoint" */
    /* Give every marked tensor of m its values (and clear the marks);
     * p may be NULL. 0, or -1 when the values cannot be had (then d says
     * why; d may be NULL). */
    int (*fill)(cic_model *m, const cic_model_progress *p, cic_diag *d);
} cic_weight_source;

extern const cic_weight_source CIC_SOURCES[];

const cic_weight_source *cic_source_get(enum cic_source_id id);

#endif
