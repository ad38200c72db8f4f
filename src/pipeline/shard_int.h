/* SPDX-License-Identifier: MIT */
/* shard_int.h: what the run of a case shard (shard.c) and the merge of
 * case shards (shard_merge.c) share: the file names, the split, and the
 * layout of case-shard.bin (the arrays of cic_pipeline_partials in a
 * fixed order, MPFR values as fixed-size records of their limbs). */
#ifndef CIC_PIPELINE_SHARD_INT_H
#define CIC_PIPELINE_SHARD_INT_H

#include "sweep.h"

#include <stdio.h>

#define SHARD_JSON "case-shard.json"
#define SHARD_BIN "case-shard.bin"
#define SHARD_JSON_MAX ((size_t)1 << 24)

/* The first sample of shard k of n over s samples (k = n + 1: s). */
int _cic_shard_first_sample(long k, long n, int s);

/* Does the case have an f64 verdict reference (verdict = f64 or
 * f64-openblas), and is f32 engine e (a cic_matmul) on? These decide
 * which arrays case-shard.bin holds. */
bool _cic_shard_verdict_f64(const cic_case *c);
bool _cic_shard_f32_on(const cic_case *c, int e);

/* One pass over the arrays: n values of each, from off within each array
 * of the partials, at prec bits; ok turns false on a short read or write
 * or a malformed value and stays so. */
typedef struct {
    FILE *f;
    size_t off, n; /* the shard's values within each array, and how many */
    mpfr_prec_t prec;
    bool ok;
} cic_shard_io;

/* The bytes _cic_shard_io_all writes for n values of each array of c at
 * c's precision (SIZE_MAX when that overflows): what a shard's .bin must
 * hold, so no more is ever read. */
size_t _cic_shard_bin_bytes(const cic_case *c, size_t n);
/* Every array of pp in the order of case-shard.bin, written or read into
 * place. */
void _cic_shard_io_all(cic_shard_io *s, const cic_case *c, cic_pipeline_partials *pp,
                       bool write);

#endif
