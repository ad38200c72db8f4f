/* SPDX-License-Identifier: MIT */
/* specnorm.h: proven upper bounds on the spectral norm ||W||_2 (the largest
 * singular value) of a weight matrix, for the norm-wise error bounds of the
 * ball runs: a linear y = x W moves an error e of x by at most ||W||_2 |e|.
 *
 * The bound is an upper bound of the norm of the matrix whose entries are
 * exactly the given values (MPFR numbers at any precision, float32 or
 * double as stored), never of a rounding of them: a bound that came out too
 * small would be a silent wrong answer in a proof. It is the smaller of two
 * bounds, each proven: the largest eigenvalue of the Gram matrix (dsyrk)
 * certified by a shifted Cholesky factorisation, or norms of its powers,
 * with every rounding bounded (the tight one, about 1 % above the norm),
 * and sqrt(||W||_1 ||W||_inf) (the cheap one).
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

/* The Gram bound's method: CIC_SPECNORM_CERT, the default, certifies a
 * shift a little above lambda_max(D^T D) by a Cholesky factorisation
 * (within about 1 % of the norm); where no shift is certified it falls back
 * to CIC_SPECNORM_LEVELS squarings: the norm of D^T D to the power 2^3 is
 * bounded by its Frobenius norm, so that bound of ||W||_2 is at most
 * n^(1/32) times the norm (n = min(rows, cols)), and much less when few
 * singular values are near the largest. */
#define CIC_SPECNORM_CERT (-1)
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

/* The two bounds apart, the Gram one by levels squarings (0 ..
 * CIC_SPECNORM_MAX_LEVELS) or CIC_SPECNORM_CERT (the default method), no
 * cache: tests and the benchmark. Each is >= ||W||_2. */
int cic_specnorm_d_detail(double *gram_bound, double *rowcol_bound, const double *w,
                          size_t rows, size_t cols, int levels);

/* ---- one weight, many column or row scalings ---- */

/* The Gram matrix of one side of a float32 weight W (rows x cols,
 * row-major), made once to bound ||W diag(d)||_2 (cols_side: the columns
 * scaled) or ||diag(d) W||_2 (the rows) for many d at O(side^2) each
 * instead of a new Gram matrix per d (docs/design.md, "Spectral norm
 * bounds", "Scaled weights"). NULL out of memory, or when the side asked
 * for is the longer one, or W holds a NaN, an infinity, only zeros or a
 * value whose scaled image is not exact: the caller then bounds W diag(d)
 * as a matrix of its own. */
typedef struct cic_specnorm_gram cic_specnorm_gram;
cic_specnorm_gram *cic_specnorm_gram_f(const float *w, size_t rows, size_t cols,
                                       bool cols_side);
/* *bound >= ||W diag(d)||_2 (or ||diag(d) W||_2) for the side's length of
 * d >= 0, and for every scaling t with |t_j| <= d_j; +INFINITY when d
 * holds a NaN, an infinity or a negative value. 0, or -1 out of memory
 * (*bound = +INFINITY). */
int cic_specnorm_gram_scaled(double *bound, const cic_specnorm_gram *g, const double *d);
void cic_specnorm_gram_destroy(cic_specnorm_gram *g);

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
