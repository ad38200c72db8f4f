/* SPDX-License-Identifier: MIT */
/* specnorm.h: proven upper bounds on the spectral norm ||W||_2 (the largest
 * singular value) of a weight matrix, for the norm-wise error bounds of the
 * ball runs: a linear y = x W moves an error e of x by at most ||W||_2 |e|.
 *
 * The bound is an upper bound of the norm of the matrix whose entries are
 * exactly the given values (MPFR numbers at any precision, float32 or
 * double as stored), never of a rounding of them: a bound that came out too
 * small would be a silent wrong answer in a proof. It is the smaller of two
 * bounds, each proven: norms of powers of the Gram matrix through dsyrk
 * with every rounding bounded (the tight one, about 1 % to 10 % above the
 * norm at the default depth), and sqrt(||W||_1 ||W||_inf) (the cheap one).
 * docs/design.md section 10, "Spectral norm bounds", derives every constant.
 *
 * A bound is computed once per weight: a cache, owned by the caller (one per
 * session or run, never process-wide), keeps each matrix's bound under the
 * SHA-256 of what the bound was computed from (shape, the double images of
 * the entries, their scale and how many were rounded), which determines the
 * bound; the bound holds for every matrix with that key. */
#ifndef CIC_SPECNORM_H
#define CIC_SPECNORM_H

#include <mpfr.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Squarings of the Gram matrix by default: the norm of D^T D to the power
 * 2^3 is bounded by its Frobenius norm, so the bound of ||W||_2 is at most
 * n^(1/32) times the norm (n = min(rows, cols)), and much less when few
 * singular values are near the largest. */
#define CIC_SPECNORM_LEVELS 3
/* Most squarings cic_specnorm_d_detail takes. */
#define CIC_SPECNORM_MAX_LEVELS 8

typedef struct cic_specnorm_cache cic_specnorm_cache;

/* *bound >= ||W||_2 for the rows x cols matrix W (row-major) of exactly
 * these values; rows or cols 0: 0. +INFINITY when nothing can be proven: a
 * NaN or an infinite entry, or a norm beyond double's range. threads: the
 * conversion of MPFR values (<= 1: the calling thread); the products take
 * OpenBLAS's own threads. cache NULL: no cache. Returns 0, or -1 out of
 * memory (or a size whose bytes overflow) with *bound = +INFINITY. */
int cic_specnorm_mp(double *bound, const mpfr_t *w, size_t rows, size_t cols, int threads,
                    cic_specnorm_cache *cache);
int cic_specnorm_f(double *bound, const float *w, size_t rows, size_t cols,
                   cic_specnorm_cache *cache);
int cic_specnorm_d(double *bound, const double *w, size_t rows, size_t cols,
                   cic_specnorm_cache *cache);

/* The two bounds apart, with levels squarings (0 .. CIC_SPECNORM_MAX_LEVELS)
 * for the Gram one, no cache: tests and the benchmark. Each is >= ||W||_2. */
int cic_specnorm_d_detail(double *gram_bound, double *rowcol_bound, const double *w,
                          size_t rows, size_t cols, int levels);

/* ---- the cache (thread-safe: a mutex) ---- */
/* NULL out of memory; destroy(NULL) is a no-op. */
cic_specnorm_cache *cic_specnorm_cache_create(void);
void cic_specnorm_cache_destroy(cic_specnorm_cache *c);
/* true and *bound set when key is held (counts a hit, else a miss). */
bool cic_specnorm_cache_lookup(cic_specnorm_cache *c, const unsigned char key[32],
                               double *bound);
/* Keep bound under key (a key already held keeps its first bound: both
 * are proven). 0, or -1 out of memory. */
int cic_specnorm_cache_insert(cic_specnorm_cache *c, const unsigned char key[32], double bound);
/* Hits, misses and entries so far (tests, the benchmark). */
void cic_specnorm_cache_stats(cic_specnorm_cache *c, uint64_t *hits, uint64_t *misses,
                              size_t *entries);

#endif
