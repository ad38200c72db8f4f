/* SPDX-License-Identifier: MIT */
/* checkpoint_int.h: what checkpoint.c (the files, the values, the input)
 * and checkpoint_storage.c ask of the dispatcher, checkpoint_family.c:
 * which family a folder is and its sizes. The rest (the open checkpoint,
 * the family descriptor, the shared helpers) is in ckpt_family.h. Not part
 * of the library's interface. */
#ifndef CIC_CHECKPOINT_INT_H
#define CIC_CHECKPOINT_INT_H

#include "ckpt_family.h"

/* The families, one descriptor each (ckpt_<name>.c). */
enum {
    CIC_CKPT_LLAMA,
    CIC_CKPT_OPT,
    CIC_CKPT_TIMM,
    CIC_CKPT_DIT,
    CIC_CKPT_GPTJ,
    CIC_CKPT_FAMILY_COUNT
};
extern const cic_ckpt_family *const _cic_ckpt_families[CIC_CKPT_FAMILY_COUNT];
/* GPT-J's descriptor (ckpt_gptj.c; the others are in ckpt_family.h). */
extern const cic_ckpt_family _cic_ckpt_gptj;

/* The family that claims a config.json with model_type (NULL: none, or
 * not a string) and architecture (NULL: none, or not a string), or, both
 * NULL and bare, a folder without config.json; NULL when none does. */
const cic_ckpt_family *_cic_ckpt_family_find(const char *model_type, const char *architecture,
                                             bool bare);

#define read_config _cic_ckpt_read_config
#define family_sizes _cic_ckpt_family_sizes

/* config.json into k: its family, and what the family reads of it;
 * 0, or -1 with d set. */
int read_config(cic_ckpt *k, cic_diag *d);
/* What the family reads from the tensors (timm, DiT: the sizes), once
 * the shards are open; 0, or -1 with d set. */
int family_sizes(cic_ckpt *k, cic_diag *d);

#endif
