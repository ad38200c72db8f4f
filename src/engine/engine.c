/* SPDX-License-Identifier: MIT */
/* engine.c: what the engines share outside their kernels: FLOP totals.
 * The engine table itself (names, arithmetic, matmul) is data of the kind
 * layer (src/kind/engines.c). */
#include "engine.h"

#include <assert.h>
#include <string.h>

double cic_flop_total(const cic_flop_count *fc)
{
    double s = 0;
    int i;
    for (i = 0; i < CIC_SITE_COUNT; i++)
        s += fc->site[i];
    return s;
}
