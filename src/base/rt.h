/* SPDX-License-Identifier: MIT */
/* rt.h: the runtime context of one run: how many threads its MPFR work
 * takes, which path its linear ops take, and what it counted. One is made
 * per pipeline run (from its options) or per API session and passed down
 * by pointer to what reads it: the models the run builds carry it
 * (cic_model.rt), and with them the engine runs, their ball proofs, the
 * transforms and the weights made on the fly; the base routines take it
 * (or its thread count) as an argument. Nothing here is process-wide, so
 * two runs in one process, on two threads, do not see each other's
 * settings or counters.
 *
 * What stays process-wide, on purpose: OpenBLAS's own thread pool and its
 * idle-thread timeout (blasenv.c: one library per process, its
 * environment read once when it loads), and the safetensors mappings with
 * their SIGBUS handler (safetensors_read.c: a signal handler belongs to
 * the process, so the registry of mapped files it looks up does too; it
 * is locked). One consequence: a file found changed after it was closed
 * is reported to the next run that checks, which with sessions at once
 * may be another session's.
 *
 * No setting changes a bit of any output: thread counts split work whose
 * every output is computed whole by one thread, and the slice path gives
 * the row kernel's bits (mpslice.h). */
#ifndef CIC_RT_H
#define CIC_RT_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* When cic_mp_linear_sliced takes an op: AUTO when its cost estimate is
 * below the row kernel's, ALWAYS whenever it can (tests: every shape goes
 * through the slices), NEVER (the row kernel only). */
enum cic_slice_mode { CIC_SLICE_AUTO, CIC_SLICE_ALWAYS, CIC_SLICE_NEVER };

/* The MPFR engine's most threads (its per-thread scratch is a fixed
 * array). */
#define CIC_RT_MPFR_MAX_THREADS 16

/* All zero is the default context (cic_rt_init). A NULL context is read
 * as the default and counts nothing. Settings are fixed while a run uses
 * the context; the counters are atomic (a run's threads add to them). */
typedef struct cic_rt {
    int mpfr_threads;   /* the MPFR engine and its ball runs; <= 0: one per
                         * online core; at most CIC_RT_MPFR_MAX_THREADS */
    int matmul_threads; /* MPFR matrix products (cic_mp_matmul), the
                         * transforms' per-line work, weights made on the
                         * fly (model/lazy.h), the seeded draw; <= 0: one
                         * per online core; at most 64 */
    enum cic_slice_mode slice_mode;
    size_t slice_budget; /* the slices' scratch bound, bytes; 0:
                          * CIC_SLICE_BUDGET (smaller: the blocks tests need) */
    /* tests: adaLN's rotation products with Q as MPFR numbers instead of
     * doubles through dgemm (the same bits: src/xform/adaln.c) */
    bool adaln_q_mpfr;
    /* counters since the context was made or reset, for tests and the
     * benchmark: sliced ops taken, their outputs rounded from slices and
     * computed by the row kernel, dgemm calls with their multiply-adds and
     * wall nanoseconds; lines of weights made on the fly that took the dot
     * products (model/lazy.h) */
    _Atomic uint64_t slice_ops, slice_sliced, slice_kernel, slice_gemms;
    _Atomic uint64_t slice_gemm_fma, slice_gemm_ns;
    _Atomic uint64_t lazy_fallback;
    /* the bounds of the weights' spectral norms the ball runs have proven
     * (base/specnorm.h), kept across the run's ball runs (Ziv's reruns,
     * sweep points): made when first asked for, freed by cic_rt_clear */
    struct cic_specnorm_cache *_Atomic specnorm;
} cic_rt;

/* The default context; threads > 0 sets both thread counts to it (the
 * command line's --threads, the API's cic_session_set_threads). */
void cic_rt_init(cic_rt *rt, int threads);

/* Free what the context made (the spectral norm cache); it is then as
 * cic_rt_init left it, but for its settings and counters. NULL: no-op. */
void cic_rt_clear(cic_rt *rt);
/* The context's spectral norm cache, made on first use (thread-safe);
 * NULL when rt is NULL or memory runs out. */
struct cic_specnorm_cache *cic_rt_specnorm(cic_rt *rt);

/* The thread counts a context gives, resolved (rt NULL: the default). */
int cic_rt_mpfr_threads(const cic_rt *rt);
int cic_rt_matmul_threads(const cic_rt *rt);

/* Add n to a counter of rt (no-op when rt is NULL). */
#define CIC_RT_COUNT(rt, counter, n)                                                            \
    do {                                                                                       \
        if (rt)                                                                                \
            atomic_fetch_add(&(rt)->counter, (uint64_t)(n));                                   \
    } while (0)

#endif
