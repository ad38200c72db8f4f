/* SPDX-License-Identifier: MIT */
/* kinds.h: the table of transform descriptors (kinds.c, built from
 * CIC_XFORM_LIST of src/kind/xform_kind.h, one descriptor per file
 * kind_<name>.c) and what the layers above ask of it. */
#ifndef CIC_XFORM_KINDS_H
#define CIC_XFORM_KINDS_H

#include "../kind/kind.h"

#include <stdbool.h>

/* The descriptor of kind k (src/xform/kinds.c). */
const cic_xform_desc *cic_xform_desc_of(enum cic_xform_kind k);

/* The name of x's mistake: "none", its kind's name for it, or "unknown"
 * for a number its kind does not have (src/xform/kinds.c). */
const char *cic_xform_mistake_name(const struct cic_xform_spec_s *x);

/* The number of kind k's mistake called name (CIC_MISTAKE_NONE for
 * "none"), or -1 when kind k has none of that name. */
int cic_xform_mistake_find(enum cic_xform_kind k, const char *name);

/* Whether kind k takes the key bits key (CIC_XKEY_*), all of them. */
bool cic_xform_has_keys(enum cic_xform_kind k, unsigned key);

/* Whether kind k is an adaLN strategy (a dit block's). */
bool cic_xform_is_adaln(enum cic_xform_kind k);

/* Whether kind k applies to a block with norms of kind n. */
bool cic_xform_applies(enum cic_xform_kind k, enum cic_norm_kind n);

#endif
