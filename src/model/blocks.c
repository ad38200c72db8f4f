/* SPDX-License-Identifier: MIT */
/* blocks.c: the table of block kinds, one descriptor per entry of
 * CIC_BLOCK_LIST (src/kind/block.h), each defined in its own file. */
#include "build.h"

#define CIC_BLOCK_EXTERN_(e, n) extern const cic_block_desc cic_block_##n;
CIC_BLOCK_LIST(CIC_BLOCK_EXTERN_)
#undef CIC_BLOCK_EXTERN_

static const cic_block_desc *const CIC_BLOCKS[] = {
#define CIC_BLOCK_ENTRY_(e, n) [CIC_BLOCK_##e] = &cic_block_##n,
    CIC_BLOCK_LIST(CIC_BLOCK_ENTRY_)
#undef CIC_BLOCK_ENTRY_
};
_Static_assert(sizeof CIC_BLOCKS / sizeof CIC_BLOCKS[0] == CIC_BLOCK_COUNT,
               "one descriptor per block kind");

const cic_block_desc *cic_block(enum cic_block_kind k)
{
    CIC_ASSERT((unsigned)k < CIC_BLOCK_COUNT);
    return CIC_BLOCKS[k];
}
