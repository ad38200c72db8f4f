/* SPDX-License-Identifier: MIT */
/* kinds.c: the descriptor table of the transform kinds, built from
 * CIC_XFORM_LIST (src/kind/xform_kind.h) with designated initializers, so
 * the table follows the list whatever its order; each descriptor lives in
 * its kind's file (kind_<name>.c). */
#include "../kind/xform_kind.h"

#include <assert.h>

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
static_assert(CIC_MISTAKE_COUNT <= 64, "mistakes are bits of an unsigned long long");

const cic_xform_desc *cic_xform_desc_of(enum cic_xform_kind k)
{
    CIC_ASSERT((unsigned)k < CIC_XFORM_COUNT && "transform kind");
    return cic_xform_table[k];
}
