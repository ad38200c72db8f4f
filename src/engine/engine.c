/* SPDX-License-Identifier: MIT */
/* engine.c: what the engines share outside their kernels: the engine table
 * (names as in reports, arithmetic, matmul; engine.h) and FLOP totals. */
#include "engine.h"

#include <assert.h>
#include <string.h>

const char *const CIC_MATMUL_NAME[] = {[CIC_MATMUL_OPENBLAS] = CIC_MATMUL_OPENBLAS_NAME,
                                       [CIC_MATMUL_FIXED] = CIC_MATMUL_FIXED_NAME};
static_assert(sizeof CIC_MATMUL_NAME / sizeof CIC_MATMUL_NAME[0] == CIC_MATMUL_COUNT,
              "one name per matmul");

const cic_engine_desc CIC_ENGINE_DESC[] = {
#define CIC_ENGINE_DESC_(E, name, arith, mm) [CIC_ENGINE_##E] = {name, arith, mm},
    CIC_ENGINES(CIC_ENGINE_DESC_)
#undef CIC_ENGINE_DESC_
};
static_assert(sizeof CIC_ENGINE_DESC / sizeof CIC_ENGINE_DESC[0] == CIC_ENGINE_COUNT,
              "engine table");

const char *const CIC_ENGINE_NAME[] = {
#define CIC_ENGINE_NAME_(E, name, arith, mm) [CIC_ENGINE_##E] = name,
    CIC_ENGINES(CIC_ENGINE_NAME_)
#undef CIC_ENGINE_NAME_
};
static_assert(sizeof CIC_ENGINE_NAME / sizeof CIC_ENGINE_NAME[0] == CIC_ENGINE_COUNT,
              "engine name table");

/* cic_engine_real and CIC_ENGINE_F32_NAME / _F64_NAME index by matmul. */
static_assert(CIC_ENGINE_F32_FIXED == CIC_ENGINE_F32_OPENBLAS + CIC_MATMUL_FIXED &&
                  CIC_ENGINE_F64_FIXED == CIC_ENGINE_F64_OPENBLAS + CIC_MATMUL_FIXED &&
                  CIC_MATMUL_OPENBLAS == 0 && CIC_MATMUL_COUNT == 2,
              "real engines in matmul order");

int cic_engine_find(const char *name)
{
    int e;
    for (e = 0; e < CIC_ENGINE_COUNT; e++)
        if (strcmp(CIC_ENGINE_DESC[e].name, name) == 0)
            return e;
    return -1;
}

double cic_flop_total(const cic_flop_count *fc)
{
    double s = 0;
    int i;
    for (i = 0; i < CIC_SITE_COUNT; i++)
        s += fc->site[i];
    return s;
}
