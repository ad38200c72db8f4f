/* SPDX-License-Identifier: MIT */
/* kinds.c: the descriptor table of the transform kinds, built from
 * CIC_XFORM_LIST (src/kind/xform_kind.h) with designated initializers, so
 * the table follows the list whatever its order; each descriptor lives in
 * its kind's file (kind_<name>.c); and the names of the kinds' mistakes. */
#include "kinds.h"

#include <assert.h>
#include <string.h>

#define CIC_XFORM_DECL_(e, n, d) extern const cic_xform_desc d;
CIC_XFORM_LIST(CIC_XFORM_DECL_)
#undef CIC_XFORM_DECL_

static const cic_xform_desc *const cic_xform_table[] = {
#define CIC_XFORM_ENTRY_(e, n, d) [CIC_XFORM_##e] = &d,
    CIC_XFORM_LIST(CIC_XFORM_ENTRY_)
#undef CIC_XFORM_ENTRY_
};
static_assert(sizeof cic_xform_table / sizeof cic_xform_table[0] == CIC_XFORM_COUNT,
              "one descriptor per transform kind");

const cic_xform_desc *cic_xform_desc_of(enum cic_xform_kind k)
{
    CIC_ASSERT((unsigned)k < CIC_XFORM_COUNT && "transform kind");
    return cic_xform_table[k];
}

const char *cic_xform_mistake_name(const cic_xform_spec *x)
{
    const cic_xform_desc *k = cic_xform_desc_of(x->kind);
    if (x->mistake == CIC_MISTAKE_NONE)
        return "none";
    if (x->mistake < 0 || x->mistake > CIC_XFORM_MAX_MISTAKES || !k->mistakes[x->mistake - 1])
        return "unknown";
    return k->mistakes[x->mistake - 1];
}

int cic_xform_mistake_find(enum cic_xform_kind k, const char *name)
{
    const cic_xform_desc *d = cic_xform_desc_of(k);
    int m;
    if (strcmp(name, "none") == 0)
        return CIC_MISTAKE_NONE;
    for (m = 0; m < CIC_XFORM_MAX_MISTAKES && d->mistakes[m]; m++)
        if (strcmp(d->mistakes[m], name) == 0)
            return m + 1;
    return -1;
}

bool cic_xform_has_keys(enum cic_xform_kind k, unsigned key)
{
    return (cic_xform_desc_of(k)->keys & key) == key;
}

bool cic_xform_is_adaln(enum cic_xform_kind k)
{
    return cic_xform_desc_of(k)->family == CIC_XFAM_ADALN;
}

bool cic_xform_applies(enum cic_xform_kind k, enum cic_norm_kind n)
{
    return (cic_xform_desc_of(k)->norms >> n) & 1u;
}
