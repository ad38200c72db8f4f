/* SPDX-License-Identifier: MIT */
/* names.c: the name tables of kind.h, one spelling per enum value, as case
 * files and reports write them. Each entry is a designated initializer (so
 * the order of the enum cannot drift from the table's) and each table is
 * checked against its enum's _COUNT, so a name left out at the end is a
 * compile error; a hole in the middle is caught by test_case's
 * test_name_tables_complete (every entry set and distinct). */
#include "kind.h"

#include <assert.h>

const char *const CIC_BLOCK_NAME[] = {
#define CIC_BLOCK_NAME_(e, n) [CIC_BLOCK_##e] = #n,
    CIC_BLOCK_LIST(CIC_BLOCK_NAME_)
#undef CIC_BLOCK_NAME_
};
const char *const CIC_ACT_NAME[] = {
#define CIC_ACT_NAME_(e, name, flops) [CIC_ACT_##e] = name,
    CIC_ACT_LIST(CIC_ACT_NAME_)
#undef CIC_ACT_NAME_
};
const char *const CIC_DIST_NAME[] = {[CIC_DIST_NORMAL] = "normal", [CIC_DIST_UNIFORM] = "uniform"};
const char *const CIC_XFORM_NAME[] = {
#define CIC_XFORM_NAME_(e, n, d) [CIC_XFORM_##e] = n,
    CIC_XFORM_LIST(CIC_XFORM_NAME_)
#undef CIC_XFORM_NAME_
};
const char *const CIC_INPUT_NAME[] = {
    [CIC_INPUT_RANDOM] = "random", [CIC_INPUT_TOKENS] = "tokens", [CIC_INPUT_FILE] = "file"};
const char *const CIC_Q_NAME[] = {
    [CIC_Q_IDENTITY] = "identity", [CIC_Q_RANDOM] = "random",   [CIC_Q_HADAMARD] = "hadamard",
    [CIC_Q_REGULAR] = "regular-hadamard", [CIC_Q_FILE] = "file"};
const char *const CIC_TPREC_NAME[] = {
    [CIC_TPREC_MPFR] = "mpfr", [CIC_TPREC_F64] = "f64",           [CIC_TPREC_F32] = "f32",
    [CIC_TPREC_F64_BLAS] = "f64-openblas", [CIC_TPREC_BF16] = "bf16"};
const char *const CIC_VERDICT_NAME[] = {[CIC_VERDICT_EQUIVALENT] = "equivalent",
                                        [CIC_VERDICT_BROKEN] = "broken",
                                        [CIC_VERDICT_INCONCLUSIVE] = "inconclusive"};
const char *const CIC_READOUT_NAME[] = {[CIC_READOUT_HEAD] = "head", [CIC_READOUT_RESIDUAL] = "residual"};
const char *const CIC_ROPE_NAME[] = {
    [CIC_ROPE_NONE] = "none", [CIC_ROPE_HALF] = "half", [CIC_ROPE_INTERLEAVED] = "interleaved"};
const char *const CIC_STREAM_NAME[] = {[CIC_STREAM_CENTERED] = "centered",
                                       [CIC_STREAM_MEAN_PRESERVING] = "mean-preserving"};
const char *const CIC_VERDICT_ENGINE_NAME[] = {[CIC_VERDICT_ENGINE_MPFR] = "mpfr",
                                               [CIC_VERDICT_ENGINE_F64] = "f64",
                                               [CIC_VERDICT_ENGINE_F64_BLAS] = "f64-openblas"};
const char *const CIC_LOWP_FROM_NAME[] = {[CIC_LOWP_FROM_UNROUNDED] = "unrounded",
                                          [CIC_LOWP_FROM_FLOAT32] = "float32"};
const char *const CIC_AXIS_NAME[] = {
    [CIC_AXIS_D_MODEL] = "d_model",     [CIC_AXIS_TOKENS] = "tokens",
    [CIC_AXIS_LAYERS] = "layers",       [CIC_AXIS_SEED] = "seed",
    [CIC_AXIS_MPFR_PREC] = "mpfr_prec", [CIC_AXIS_OUTLIER_SCALE] = "outlier_scale",
    [CIC_AXIS_HEADS] = "heads",         [CIC_AXIS_SAMPLES] = "samples",
    [CIC_AXIS_D_COND] = "d_cond",       [CIC_AXIS_STD] = "std"};

#define CIC_CASE_LEN(a) (sizeof(a) / sizeof((a)[0]))
static_assert(CIC_CASE_LEN(CIC_BLOCK_NAME) == CIC_BLOCK_COUNT, "block names");
static_assert(CIC_CASE_LEN(CIC_ACT_NAME) == CIC_ACT_COUNT, "activation names");
static_assert(CIC_CASE_LEN(CIC_DIST_NAME) == CIC_DIST_COUNT, "dist names");
static_assert(CIC_CASE_LEN(CIC_ROPE_NAME) == CIC_ROPE_COUNT, "rope names");
static_assert(CIC_CASE_LEN(CIC_XFORM_NAME) == CIC_XFORM_COUNT, "xform names");
static_assert(CIC_CASE_LEN(CIC_Q_NAME) == CIC_Q_COUNT, "q names");
static_assert(CIC_CASE_LEN(CIC_INPUT_NAME) == CIC_INPUT_COUNT, "input names");
static_assert(CIC_CASE_LEN(CIC_TPREC_NAME) == CIC_TPREC_COUNT, "tprec names");
static_assert(CIC_CASE_LEN(CIC_VERDICT_NAME) == CIC_VERDICT_COUNT, "verdicts");
static_assert(CIC_CASE_LEN(CIC_READOUT_NAME) == CIC_READOUT_COUNT, "readouts");
static_assert(CIC_CASE_LEN(CIC_STREAM_NAME) == CIC_STREAM_COUNT, "streams");
static_assert(CIC_CASE_LEN(CIC_LOWP_FROM_NAME) == CIC_LOWP_FROM_COUNT, "lowp from names");
static_assert(CIC_CASE_LEN(CIC_VERDICT_ENGINE_NAME) == CIC_VERDICT_ENGINE_COUNT,
              "verdict engine names");
static_assert(CIC_CASE_LEN(CIC_AXIS_NAME) == CIC_AXIS_COUNT, "sweep axis names");
