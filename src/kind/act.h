/* SPDX-License-Identifier: MIT */
/* act.h: the activation functions, one line each in CIC_ACT_LIST: the enum
 * constant, the name in case files and reports, and the FLOPs of one call
 * (the op table's convention, model/op.h: every arithmetic op, compare and
 * libm call 1).
 *
 * Adding an activation: a line here, and its formula in act1 of
 * src/engine/engine_real.h (the f32 and f64 engines) and in cic_mp_act of
 * src/engine/mp_act.c (the MPFR engine, correctly rounded calls). */
#ifndef CIC_ACT_H
#define CIC_ACT_H

#define CIC_ACT_LIST(X)                                                         \
    X(GELU, "gelu", 5)           /* mul, erf, add, mul, mul */                  \
    X(GELU_TANH, "gelu-tanh", 9) /* x*x*x (2), mul, add, mul, tanh, add, mul, mul */ \
    X(RELU, "relu", 1)           /* compare */                                  \
    X(SILU, "silu", 3)           /* exp, add, div */                            \
    X(QUICK_GELU, "quick-gelu", 4) /* mul, exp, add, div */

enum cic_act {
#define CIC_ACT_ENUM_(e, name, flops) CIC_ACT_##e,
    CIC_ACT_LIST(CIC_ACT_ENUM_)
#undef CIC_ACT_ENUM_
    CIC_ACT_COUNT
};

#endif
