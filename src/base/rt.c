/* SPDX-License-Identifier: MIT */
/* rt.c: the runtime context's defaults and thread counts (rt.h). */
#include "rt.h"

#include "specnorm.h"

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

void cic_rt_clear(cic_rt *rt)
{
    if (rt)
        cic_specnorm_cache_destroy(atomic_exchange(&rt->specnorm, NULL));
}

cic_specnorm_cache *cic_rt_specnorm(cic_rt *rt)
{
    cic_specnorm_cache *c, *none = NULL;
    if (!rt)
        return NULL;
    if ((c = atomic_load(&rt->specnorm)))
        return c;
    if (!(c = cic_specnorm_cache_create()))
        return NULL;
    if (!atomic_compare_exchange_strong(&rt->specnorm, &none, c)) {
        cic_specnorm_cache_destroy(c); /* another thread's came first */
        return none;
    }
    return c;
}
