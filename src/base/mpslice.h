/* SPDX-License-Identifier: MIT */
/* mpslice.h: the MPFR engine's linear op through exact OpenBLAS dgemm
 * products of integer slices (an Ozaki-style split, mpslice.c): every
 * output the exact b + x W^T rounded once, the same bits as
 * cic_mp_linear_rows (mpvec.h), which stays the fallback and the
 * reference. Workload: the truth's large linear layers (hundreds of rows,
 * widths in the thousands), where it is several times faster. */
#ifndef CIC_MPSLICE_H
#define CIC_MPSLICE_H

#include "mpvec.h"
#include "rt.h"

#include <stddef.h>
#include <stdint.h>

/* The scratch one call holds at most (slices and products), bytes. */
#define CIC_SLICE_BUDGET ((size_t)128 << 20)

/* The mode (default AUTO) and the scratch bound (0: CIC_SLICE_BUDGET;
 * smaller ones force the blocks tests need) are a run's settings, in its
 * context (rt.h: slice_mode, slice_budget), read by each call.
 *
 * The counts of a context since it was made (or the last reset), for
 * tests, the benchmark and the report's truth: ops taken, outputs rounded
 * from slices, outputs the row kernel computed within ops taken, dgemm
 * calls, their multiply-adds (m n k each) and the wall time spent inside
 * them (the exact products' share of a truth). All 0 for NULL. */
typedef struct {
    uint64_t ops, sliced, kernel, gemms, gemm_fma, gemm_ns;
} cic_slice_stats;
void cic_mp_slice_stats(cic_slice_stats *s, const cic_rt *rt);
void cic_mp_slice_stats_reset(cic_rt *rt);

/* Scratch kept across calls, as a run keeps it across its linear ops:
 * the slices' and products' storage, grown to the largest need so far
 * (at most the budget), so that an op does not fault fresh pages in (a
 * page fault costs microseconds in a virtual machine). NULL when memory
 * runs out; destroy(NULL) is a no-op. */
typedef struct cic_slice_ws cic_slice_ws;
cic_slice_ws *cic_mp_slice_ws_create(void);
void cic_mp_slice_ws_destroy(cic_slice_ws *ws);
/* The bytes of slices and products ws holds now (0 for NULL): what the
 * memory estimate's cic_mp_slice_scratch bounds. */
size_t cic_mp_slice_ws_bytes(const cic_slice_ws *ws);

/* The linear op of cic_mp_linear_rows (same arguments: y[i*n + j] = b[j] +
 * sum_p x[i*k + p] w[j*k + p], wp the packed weight rows, w NULL when wp
 * holds every entry), each output correctly rounded to its precision
 * (RNDN). The dgemm calls run on OpenBLAS's own threads from the caller's
 * thread (never call this from inside worker threads); slicing and
 * rounding on `threads` threads, each output computed whole by one of
 * them, so the bits depend on neither count. Returns 0 with every y set,
 * or 1 when it took the op but could not finish (memory) or declined it
 * (not cheaper, or nothing it covers): y is then partly set, and the
 * caller runs the row kernel on every row. y may not alias x, w or b.
 * ws: the scratch to use (NULL: one for this call). rt: the run's context
 * (its mode and budget; the call adds to its counters), NULL the default. */
int cic_mp_linear_sliced(mpfr_t *y, const mpfr_t *x, size_t m, const mpfr_t *w,
                         const cic_mp_pack *wp, const mpfr_t *b, size_t n, size_t k, int threads,
                         cic_rt *rt, cic_slice_ws *ws);

/* The scratch bytes a call on m x k activations at prec bits and n x k
 * weights holds (the memory estimate's share, src/case/memory.c): the
 * default budget CIC_SLICE_BUDGET (a context's smaller one holds less), or
 * less when the op is small (its slices estimated from spans
 * of prec + 64 bits for x and 64 for the weights, 16 bits a slice),
 * rounded up to a huge page, and the per-row and per-thread records. At
 * every precision an upper bound of what the truth's rows take (x spread
 * over up to 64 binades, float32 weights): wider rows take more slices,
 * still within the budget. */
size_t cic_mp_slice_scratch(size_t m, size_t n, size_t k, long prec);
/* The same with both operands at prec bits (attention's Q K^T and P V,
 * engine_mpfr_attn.c): the weights' rows sliced as x's. */
size_t cic_mp_slice_scratch_mp(size_t m, size_t n, size_t k, long prec);

#endif
