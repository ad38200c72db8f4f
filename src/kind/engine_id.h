/* SPDX-License-Identifier: MIT */
/* engine_id.h: the engines' identities and names, the one place they are
 * spelled (reports, case files' gates and [engines] f32, plots). Data
 * only, so that the case loader can name the engines without the engines. */
#ifndef CIC_ENGINE_ID_H
#define CIC_ENGINE_ID_H

/* The matmuls of the real engines; their names as in [engines] f32 of a
 * case file, CIC_MATMUL_NAME[mm]. */
enum cic_matmul { CIC_MATMUL_OPENBLAS, CIC_MATMUL_FIXED, CIC_MATMUL_COUNT };
#define CIC_MATMUL_OPENBLAS_NAME "openblas"
#define CIC_MATMUL_FIXED_NAME "fixed-order"
extern const char *const CIC_MATMUL_NAME[];

/* An engine's arithmetic. */
enum cic_engine_arith { CIC_ARITH_F32, CIC_ARITH_F64, CIC_ARITH_MPFR, CIC_ARITH_COUNT };

/* X(ENUM, name, arith, matmul): engine CIC_ENGINE_ENUM, its name in
 * reports, its arithmetic and (real engines) its matmul. The real engines
 * come in matmul order per arithmetic (cic_engine_real). */
#define CIC_ENGINES(X)                                                                   \
    X(F32_OPENBLAS, "f32-" CIC_MATMUL_OPENBLAS_NAME, CIC_ARITH_F32, CIC_MATMUL_OPENBLAS) \
    X(F32_FIXED, "f32-" CIC_MATMUL_FIXED_NAME, CIC_ARITH_F32, CIC_MATMUL_FIXED)          \
    X(F64_OPENBLAS, "f64-" CIC_MATMUL_OPENBLAS_NAME, CIC_ARITH_F64, CIC_MATMUL_OPENBLAS) \
    X(F64_FIXED, "f64-" CIC_MATMUL_FIXED_NAME, CIC_ARITH_F64, CIC_MATMUL_FIXED)          \
    X(MPFR, "mpfr", CIC_ARITH_MPFR, CIC_MATMUL_COUNT)

enum cic_engine_id {
#define CIC_ENGINE_ENUM_(E, name, arith, mm) CIC_ENGINE_##E,
    CIC_ENGINES(CIC_ENGINE_ENUM_)
#undef CIC_ENGINE_ENUM_
    CIC_ENGINE_COUNT
};

typedef struct {
    const char *name;            /* as in reports: "f32-openblas", "mpfr" */
    enum cic_engine_arith arith;
    enum cic_matmul mm;          /* CIC_MATMUL_COUNT for the MPFR engine */
} cic_engine_desc;

/* By enum cic_engine_id; CIC_ENGINE_NAME[e] is CIC_ENGINE_DESC[e].name. */
extern const cic_engine_desc CIC_ENGINE_DESC[];
extern const char *const CIC_ENGINE_NAME[];

/* The engine of arithmetic arith (CIC_ARITH_F32 or _F64) with matmul mm. */
static inline enum cic_engine_id cic_engine_real(enum cic_engine_arith arith,
                                                 enum cic_matmul mm)
{
    return (enum cic_engine_id)((arith == CIC_ARITH_F32 ? CIC_ENGINE_F32_OPENBLAS
                                                        : CIC_ENGINE_F64_OPENBLAS) + mm);
}

/* The engine named name (as in reports), or -1. */
int cic_engine_find(const char *name);

/* The f32 and f64 engines' names indexed by enum cic_matmul
 * (CIC_ENGINE_F32_NAME[mm]): views of CIC_ENGINE_NAME. */
#define CIC_ENGINE_F32_NAME (CIC_ENGINE_NAME + CIC_ENGINE_F32_OPENBLAS)
#define CIC_ENGINE_F64_NAME (CIC_ENGINE_NAME + CIC_ENGINE_F64_OPENBLAS)

#endif
