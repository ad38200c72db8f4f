/* SPDX-License-Identifier: MIT */
/* bench_int.h: the parts of cicheck-bench in files of their own. */
#ifndef CIC_BENCH_INT_H
#define CIC_BENCH_INT_H

/* Seconds on the monotonic clock (bench.c). */
double cic_bench_now(void);

/* (5) the truth of the case at path, before and proven (bench_truth.c). */
void cic_bench_truth(const char *path, int quick);

#endif
