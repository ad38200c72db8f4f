/* SPDX-License-Identifier: MIT */
/* bench_util.c: what the parts of cicheck-bench share (bench_int.h): the
 * repetition count, the clock, allocation that exits on failure, a small
 * deterministic RNG (splitmix64, one stream for the whole run) and the
 * machine's load. Calls none of the parts. */
#include "bench_int.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

int cic_bench_reps = 3;

double cic_bench_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

void *cic_bench_xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (!p) {
        fprintf(stderr, "cicheck-bench: out of memory (%zu bytes)\n", n);
        exit(2);
    }
    return p;
}

/* ---- a small deterministic RNG (splitmix64) ---- */
static uint64_t g_rng = 0x9e3779b97f4a7c15ull;

uint64_t cic_bench_rng_u64(void)
{
    uint64_t z = (g_rng += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

double cic_bench_rng_unit(void) /* [0, 1) */
{
    return (double)(cic_bench_rng_u64() >> 11) * 0x1p-53;
}

float cic_bench_normal_f(double sd)
{
    double u = cic_bench_rng_unit(), v = cic_bench_rng_unit();
    if (u < 1e-300)
        u = 1e-300;
    return (float)(sd * sqrt(-2.0 * log(u)) * cos(6.283185307179586 * v));
}

double cic_bench_loadavg(void)
{
    double l = -1;
    FILE *f = fopen("/proc/loadavg", "r");
    if (f) {
        if (fscanf(f, "%lf", &l) != 1)
            l = -1;
        fclose(f);
    }
    return l;
}
