/* SPDX-License-Identifier: MIT */
/* rng.h: the random numbers behind every weight, input and random Q. They
 * are a pure function of (seed, stream name, index): an integer hash
 * (splitmix64 finaliser) for the bits, and a Gaussian formed with correctly
 * rounded MPFR arithmetic, so the same case gives the same bits on every
 * machine, compiler and thread count. */
#ifndef CIC_RNG_H
#define CIC_RNG_H

#include <mpfr.h>
#include <stdint.h>

/* A stream key from a seed and a name such as "blocks.0.attn.qkv.weight". */
uint64_t cic_rng_key(uint64_t seed, const char *name);

/* The i-th 64 random bits of a stream. */
uint64_t cic_rng_u64(uint64_t key, uint64_t i);

/* The i-th uniform of a stream in (0, 1): 53 random bits, never 0 or 1. */
double cic_rng_uniform(uint64_t key, uint64_t i);

/* The i-th standard normal of a stream, rounded once to z's precision from a
 * Box-Muller value computed at prec(z) + 32 bits:
 * sqrt(-2 ln u1) * cos(2 pi u2) for even i, sin for odd i (pair i/2). */
void cic_rng_normal_mp(mpfr_ptr z, uint64_t key, uint64_t i);

/* The same computed at 40 bits and then rounded to binary32 (the weights are
 * binary32 values; two roundings, both deterministic). */
float cic_rng_normal_f32(uint64_t key, uint64_t i);

/* Fill x[0..n) with std * normal (dist 0) or std * sqrt(3) * (2u - 1)
 * (dist 1, uniform with that std), formed at 64 bits and rounded to
 * binary32. The bits are those of the MPFR definition (_cic_rng_fill_f32_mp);
 * most values are computed in double and proved to round the same way
 * (rng.c has the error bound), the rest in MPFR. Large fills are split over
 * up to threads threads (<= 0: one per online core; a run's
 * cic_rt_matmul_threads, rt.h); the bits do not depend on it. */
void cic_rng_fill_f32(float *x, uint64_t n, uint64_t key, int dist, double std, int threads);

/* For tests and benchmarks. _cic_rng_fill_f32_mp: the same fill, every value
 * through MPFR (the definition, and the speed before the double path).
 * _cic_rng_fill_f32_count: cic_rng_fill_f32, returning how many values took
 * the MPFR fallback (n when the whole fill did). */
void _cic_rng_fill_f32_mp(float *x, uint64_t n, uint64_t key, int dist, double std);
uint64_t _cic_rng_fill_f32_count(float *x, uint64_t n, uint64_t key, int dist, double std);

#endif
