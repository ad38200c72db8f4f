/* SPDX-License-Identifier: MIT */
/* rng_fill.c: a check of cic_rng_fill_f32's double path (not a test; built
 * with -Dbench=true). Three modes:
 *
 *   rng_fill time [N]     ns per value of the MPFR definition
 *                         (_cic_rng_fill_f32_mp, the fill before the double
 *                         path) and of cic_rng_fill_f32, dist 0 and 1, best
 *                         of 3, wall and CPU time, and the share of values that took the
 *                         fallback;
 *   rng_fill compare [N]  N values (default 50M) per dist compared bit for
 *                         bit with the MPFR definition, in chunks of 2^20
 *                         with a fresh stream key per chunk and std cycling
 *                         through 1, 0.02, 1/sqrt(1152), 3.7, -0.5, 1e-30,
 *                         1e30 and a random std in [2^-20, 2^20); prints
 *                         mismatches (exit 1 if any) and fallbacks;
 *   rng_fill rate [N]     N values (default 50M) per dist and std through
 *                         cic_rng_fill_f32 alone: the fallback rate at the
 *                         stds the models use.
 *
 * Built with the benchmark (-Dbench=true, e.g. by bench/run.sh):
 *   build-bench/bench/rng_fill compare 50000000 */
#include "base/rng.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* wall clock, and this process's CPU time (the machine may be shared) */
static double now(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int time_mode(uint64_t n)
{
    float *x = malloc(n * sizeof *x);
    int dist, rep, slow;
    if (!x)
        return 2;
    for (dist = 0; dist <= 1; dist++)
        for (slow = 1; slow >= 0; slow--) {
            double best = 1e30, bestc = 1e30;
            uint64_t fb = 0;
            for (rep = 0; rep < 3; rep++) {
                uint64_t key = cic_rng_key((uint64_t)rep, "blocks.0.mlp.fc1.weight");
                double t0 = now(CLOCK_MONOTONIC), c0 = now(CLOCK_PROCESS_CPUTIME_ID), t, c;
                if (slow)
                    _cic_rng_fill_f32_mp(x, n, key, dist, 0.02);
                else
                    fb += _cic_rng_fill_f32_count(x, n, key, dist, 0.02);
                t = now(CLOCK_MONOTONIC) - t0;
                c = now(CLOCK_PROCESS_CPUTIME_ID) - c0;
                best = t < best ? t : best;
                bestc = c < bestc ? c : bestc;
            }
            printf("dist %d %-18s %8.1f ns/value wall %8.1f cpu", dist,
                   slow ? "MPFR (before)" : "cic_rng_fill_f32", 1e9 * best / (double)n,
                   1e9 * bestc / (double)n);
            if (!slow)
                printf("  fallback %llu / %llu", (unsigned long long)fb,
                       (unsigned long long)(3 * n));
            printf("\n");
        }
    free(x);
    return 0;
}

static int compare_mode(uint64_t n)
{
    enum { CHUNK = 1 << 20 };
    static const double stds[] = {1.0, 0.02, 0.029462782549439476 /* 1/sqrt(1152) */,
                                  3.7, -0.5, 1e-30, 1e30, 0.0 /* random */};
    const int nstd = (int)(sizeof stds / sizeof stds[0]);
    float *a = malloc(CHUNK * sizeof *a), *b = malloc(CHUNK * sizeof *b);
    uint64_t mism = 0, fb = 0, done, chunk = 0;
    int dist;
    if (!a || !b)
        return 2;
    for (dist = 0; dist <= 1; dist++) {
        uint64_t dm = 0, dfb = 0;
        for (done = 0; done < n; done += CHUNK, chunk++) {
            uint64_t m = n - done < CHUNK ? n - done : CHUNK, i;
            uint64_t key = cic_rng_key(chunk, "compare");
            double std = stds[chunk % (uint64_t)nstd];
            if (std == 0.0) /* random in [2^-20, 2^20) */
                std = ldexp(cic_rng_uniform(key, UINT64_MAX), (int)(cic_rng_u64(key, 0) % 40) - 20);
            dfb += _cic_rng_fill_f32_count(a, m, key, dist, std);
            _cic_rng_fill_f32_mp(b, m, key, dist, std);
            for (i = 0; i < m; i++)
                if (memcmp(&a[i], &b[i], sizeof a[i]) != 0) {
                    if (dm < 10)
                        printf("MISMATCH dist %d chunk %llu std %a i %llu: %a vs mpfr %a\n",
                               dist, (unsigned long long)chunk, std, (unsigned long long)i,
                               (double)a[i], (double)b[i]);
                    dm++;
                }
        }
        printf("dist %d: %llu values, %llu mismatches, %llu fallbacks (%.2e)\n", dist,
               (unsigned long long)n, (unsigned long long)dm, (unsigned long long)dfb,
               (double)dfb / (double)n);
        fflush(stdout);
        mism += dm;
        fb += dfb;
    }
    free(a);
    free(b);
    return mism != 0;
}

static int rate_mode(uint64_t n)
{
    enum { CHUNK = 1 << 20 };
    static const double stds[] = {1.0, 0.02, 0.029462782549439476, 3.7};
    float *a = malloc(CHUNK * sizeof *a);
    int dist;
    size_t k;
    if (!a)
        return 2;
    for (dist = 0; dist <= 1; dist++)
        for (k = 0; k < sizeof stds / sizeof stds[0]; k++) {
            uint64_t fb = 0, done, chunk = 0;
            for (done = 0; done < n; done += CHUNK, chunk++) {
                uint64_t m = n - done < CHUNK ? n - done : CHUNK;
                fb += _cic_rng_fill_f32_count(a, m, cic_rng_key(chunk, "rate"), dist, stds[k]);
            }
            printf("dist %d std %-10g %llu values, %llu fallbacks (%.2e)\n", dist, stds[k],
                   (unsigned long long)n, (unsigned long long)fb, (double)fb / (double)n);
        }
    free(a);
    return 0;
}

int main(int argc, char **argv)
{
    uint64_t n;
    if (argc < 2 || (strcmp(argv[1], "time") != 0 && strcmp(argv[1], "compare") != 0 &&
                     strcmp(argv[1], "rate") != 0)) {
        fprintf(stderr, "usage: rng_fill time|compare|rate [N]\n");
        return 2;
    }
    n = argc > 2 ? strtoull(argv[2], NULL, 10) : (argv[1][0] == 't' ? 200000 : 50000000);
    if (argv[1][0] == 't')
        return time_mode(n);
    return argv[1][0] == 'c' ? compare_mode(n) : rate_mode(n);
}
