/* SPDX-License-Identifier: MIT */
/* par.h: work split over threads the way every parallel step of cicheck
 * splits it: a fixed number of shares, share 0 on the calling thread and
 * each other one on a thread of its own, started once per call. A share
 * whose thread cannot be started runs on the caller after its own, so a
 * call always finishes its work. Each output is computed whole inside one
 * share, so results do not depend on the thread count or on which thread
 * ran a share. Worker threads free MPFR's and Arb's per-thread caches
 * (constants such as log 2 and pi) before they end, or those would leak. */
#ifndef CIC_PAR_H
#define CIC_PAR_H

#include <stddef.h>

/* At most this many shares (more are run as this many). */
#define CIC_PAR_MAX 64

/* fn(ctx, t, nt) for every share t < nt (nt < 1 runs one share). */
void cic_par_run(int nt, void (*fn)(void *ctx, int t, int nt), void *ctx);

/* fn(ctx, lo, hi, t) over [0, n) cut into min(nt, n) contiguous ranges,
 * range t = [n t / nt, n (t + 1) / nt); with n = 0 or nt <= 1, one call
 * fn(ctx, 0, n, 0). */
void cic_par_ranges(size_t n, int nt, void (*fn)(void *ctx, size_t lo, size_t hi, int t),
                    void *ctx);

#endif
