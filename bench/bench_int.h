/* SPDX-License-Identifier: MIT */
/* bench_int.h: the parts of cicheck-bench in files of their own. */
#ifndef CIC_BENCH_INT_H
#define CIC_BENCH_INT_H

#include <stddef.h>
#include <stdint.h>

/* Shared by the parts (bench_util.c): timings are the best of this many
 * runs (--reps, default 3); seconds on the monotonic clock; malloc that
 * exits with a message on failure; the run's one RNG stream (splitmix64):
 * 64 bits, a double in [0, 1), a normal float of std sd; the 1-minute load
 * average (-1 unknown). */
extern int cic_bench_reps;
double cic_bench_now(void);
void *cic_bench_xmalloc(size_t n);
uint64_t cic_bench_rng_u64(void);
double cic_bench_rng_unit(void);
float cic_bench_normal_f(double sd);
double cic_bench_loadavg(void);

/* (1) the MPFR dot kernel and the linear op (bench_lin.c). */
void cic_bench_part1(int quick);
void cic_bench_part1_op(int quick);

/* (5) the truth of the case at path, before and proven (bench_truth.c). */
void cic_bench_truth(const char *path, int quick);

/* (7) the growth of the truth's bound with depth, the block of the case at
 * path at 1 to 3 layers (bench_depth.c). */
void cic_bench_depth(const char *path, int quick);

#endif
