/* SPDX-License-Identifier: MIT */
/* names.c: the name tables of case.h, one spelling per enum value, as case
 * files and reports write them. Each table is defined with the size of its
 * initializer and checked against its enum's _COUNT, so a name left out is
 * a compile error, not a NULL read at run time. */
#include "case_int.h"

#include <assert.h>

const char *const CIC_BLOCK_NAME[] = {
#define CIC_BLOCK_NAME_(e, n) #n,
    CIC_BLOCK_LIST(CIC_BLOCK_NAME_)
#undef CIC_BLOCK_NAME_
};
const char *const CIC_ACT_NAME[] = {
#define CIC_ACT_NAME_(e, name, flops) name,
    CIC_ACT_LIST(CIC_ACT_NAME_)
#undef CIC_ACT_NAME_
};
const char *const CIC_DIST_NAME[] = {"normal", "uniform"};
const char *const CIC_XFORM_NAME[] = {
#define CIC_XFORM_NAME_(e, n, d) [CIC_XFORM_##e] = n,
    CIC_XFORM_LIST(CIC_XFORM_NAME_)
#undef CIC_XFORM_NAME_
};
const char *const CIC_INPUT_NAME[] = {"random", "tokens", "file"};
const char *const CIC_Q_NAME[] = {"identity", "random", "hadamard", "regular-hadamard",
                                   "file"};
const char *const CIC_TPREC_NAME[] = {"mpfr", "f64", "f32", "f64-openblas", "bf16"};
const char *const CIC_MISTAKE_NAME[] = {
#define CIC_MISTAKE_NAME_(e, n) [CIC_MISTAKE_##e] = n,
    CIC_MISTAKE_LIST(CIC_MISTAKE_NAME_)
#undef CIC_MISTAKE_NAME_
};
const char *const CIC_VERDICT_NAME[] = {
    "equivalent", "broken", "inconclusive"};
const char *const CIC_READOUT_NAME[] = {"head", "residual"};
const char *const CIC_ROPE_NAME[] = {"none", "half", "interleaved"};
const char *const CIC_STREAM_NAME[] = {"centered", "mean-preserving"};
const char *const CIC_VERDICT_ENGINE_NAME[] = {"mpfr", "f64",
                                               "f64-openblas"};
const char *const CIC_LOWP_FROM_NAME[] = {"unrounded", "float32"};
const char *const CIC_AXIS_NAME[] = {
    "d_model", "tokens",  "layers", "seed",   "mpfr_prec", "outlier_scale",
    "heads",   "samples", "d_cond", "std"};

#define CIC_CASE_LEN(a) (sizeof(a) / sizeof((a)[0]))
static_assert(CIC_CASE_LEN(CIC_BLOCK_NAME) == CIC_BLOCK_COUNT, "block names");
static_assert(CIC_CASE_LEN(CIC_ACT_NAME) == CIC_ACT_COUNT, "activation names");
static_assert(CIC_CASE_LEN(CIC_DIST_NAME) == CIC_DIST_COUNT, "dist names");
static_assert(CIC_CASE_LEN(CIC_ROPE_NAME) == CIC_ROPE_COUNT, "rope names");
static_assert(CIC_CASE_LEN(CIC_XFORM_NAME) == CIC_XFORM_COUNT, "xform names");
static_assert(CIC_CASE_LEN(CIC_Q_NAME) == CIC_Q_COUNT, "q names");
static_assert(CIC_CASE_LEN(CIC_INPUT_NAME) == CIC_INPUT_COUNT, "input names");
static_assert(CIC_CASE_LEN(CIC_TPREC_NAME) == CIC_TPREC_COUNT, "tprec names");
static_assert(CIC_CASE_LEN(CIC_MISTAKE_NAME) == CIC_MISTAKE_COUNT, "mistakes");
static_assert(CIC_CASE_LEN(CIC_VERDICT_NAME) == CIC_VERDICT_COUNT, "verdicts");
static_assert(CIC_CASE_LEN(CIC_READOUT_NAME) == CIC_READOUT_COUNT, "readouts");
static_assert(CIC_CASE_LEN(CIC_STREAM_NAME) == CIC_STREAM_COUNT, "streams");
static_assert(CIC_CASE_LEN(CIC_LOWP_FROM_NAME) == CIC_LOWP_FROM_COUNT, "lowp from names");
static_assert(CIC_CASE_LEN(CIC_VERDICT_ENGINE_NAME) == CIC_VERDICT_ENGINE_COUNT,
              "verdict engine names");
static_assert(CIC_CASE_LEN(CIC_AXIS_NAME) == CIC_AXIS_COUNT, "sweep axis names");
