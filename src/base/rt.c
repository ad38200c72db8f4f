/* SPDX-License-Identifier: MIT */
/* rt.c: the runtime context's defaults and thread counts (rt.h). */
#include "rt.h"

#include <stdatomic.h>
#include <string.h>
#include <unistd.h>

void cic_rt_init(cic_rt *rt, int threads)
{
    memset(rt, 0, sizeof *rt); /* zero atomics: lock-free 64-bit counters */
    if (threads > 0)
        rt->mpfr_threads = rt->matmul_threads = threads;
}

/* n, or one per online core when n <= 0, within [1, most]. */
static int resolve(int n, int most)
{
    long v = n > 0 ? n : sysconf(_SC_NPROCESSORS_ONLN);
    return v < 1 ? 1 : v > most ? most : (int)v;
}

int cic_rt_mpfr_threads(const cic_rt *rt)
{
    return resolve(rt ? rt->mpfr_threads : 0, CIC_RT_MPFR_MAX_THREADS);
}

int cic_rt_matmul_threads(const cic_rt *rt)
{
    return resolve(rt ? rt->matmul_threads : 0, 64);
}
