/* SPDX-License-Identifier: MIT */
/* mpvec.h: MPFR vectors and the one dot-product kernel every high-precision
 * computation in cicheck goes through (transforms, the MPFR engine, metrics).
 *
 * A dot product is correctly rounded: the exact sum of the exact products,
 * rounded once. The fast path adds the products as integers in a fixed-point
 * accumulator (no MPFR call per term); the MPFR path forms every product
 * exactly at 2*prec bits and adds them with mpfr_sum, and is taken for NaN,
 * Inf, all-zero sums and extreme exponent spans. A correctly rounded result
 * is unique, so both give the same bits, whatever the order of the terms or
 * the split of work across threads. */
#ifndef CIC_MPVEC_H
#define CIC_MPVEC_H

#include <mpfr.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Scratch for dot products of length up to cap. Reuse it; it owns cap
 * products at 2*prec bits and the pointer array mpfr_sum wants. */
typedef struct {
    mpfr_t *prod;
    mpfr_ptr *ptr;
    size_t cap;
    mpfr_prec_t prec; /* the input precision it was sized for */
} cic_dot_scratch;

/* 0 on success, -1 when memory runs out (s is then cleared). */
int cic_dot_scratch_init(cic_dot_scratch *s, size_t cap, mpfr_prec_t prec);
void cic_dot_scratch_clear(cic_dot_scratch *s);

/* r = bias + sum_{i<n} x[i*incx] * y[i*incy], one rounding to r's precision
 * (RNDN). bias may be NULL. Every x, y and bias value must carry at most
 * s->prec bits (bias may carry up to 2*s->prec). n <= s->cap. r may alias
 * bias but not an element of x or y. */
void cic_mp_dot(mpfr_ptr r, const mpfr_t *x, size_t incx, const mpfr_t *y,
                size_t incy, size_t n, mpfr_srcptr bias, cic_dot_scratch *s);
/* What the fast path needs to know of a vector before its dot products: the
 * exponent range of its nonzero entries and their limb count (one precision
 * for all). Not usable when an entry is NaN or Inf, every entry is zero, or
 * precisions are mixed; dot products with it then take the MPFR path. */
typedef struct {
    mpfr_exp_t emin, emax;
    int limbs;
    bool usable;
} cic_mp_span;
void cic_mp_span_init(cic_mp_span *sp, const mpfr_t *x, size_t inc, size_t n);

/* Up to CIC_DOT_ROWS dot products sharing y, each y value read once:
 * r[t] = bias + sum_i x[t][i*incx] * y[i*incy] through the fast path, with
 * sx[t] and sy the spans of x[t] and y. Returns a bit mask of the rows it
 * set (bit t for r[t]); the others are untouched and need cic_mp_dot. The r
 * may not alias x, y or bias. */
#define CIC_DOT_ROWS 4
unsigned cic_mp_dot_rows(mpfr_ptr *r, const mpfr_t *const *x, const cic_mp_span *sx, size_t incx,
                         int nr, const mpfr_t *y, size_t incy, const cic_mp_span *sy, size_t n,
                         mpfr_srcptr bias);

/* A vector copied out of its mpfr_t values into contiguous limbs and
 * exponents, for the fast path's inner loop (no pointer chasing). All
 * nonzero entries share one precision; when the span is not usable nothing
 * is packed and dot products with it take the MPFR path. */
typedef struct {
    mp_limb_t *limbs; /* n * L limbs, entry i at limbs + i * L (MPFR's layout) */
    int64_t *es;      /* 2 * exponent + sign bit, INT64_MIN for a zero */
    size_t n;
    int L;
    mpfr_prec_t prec; /* of every nonzero entry (0: none) */
    cic_mp_span span;
} cic_mp_pack;
/* 0, or -1 when memory runs out (pk is then empty). */
int cic_mp_pack_init(cic_mp_pack *pk, const mpfr_t *x, size_t n);
void cic_mp_pack_clear(cic_mp_pack *pk);
/* v = entries [off, off + n) of pk, with their own span; v borrows pk's
 * storage (never clear a view). */
void cic_mp_pack_view(cic_mp_pack *v, const cic_mp_pack *pk, size_t off, size_t n);
/* cic_mp_dot_rows on packed vectors (all of y->n entries). */
unsigned cic_mp_dot_rows_packed(mpfr_ptr *r, const cic_mp_pack *const *x, int nr,
                                const cic_mp_pack *y, mpfr_srcptr bias);

/* Pack each of w's n rows of k values: one pack *all, and *views (n views
 * into it, free() it; clear *all). 0, or -1 when memory runs out. */
int cic_mp_pack_rows(cic_mp_pack *all, cic_mp_pack **views, const mpfr_t *w, size_t n, size_t k);
/* The views of those rows for a pack of n rows of k entries made otherwise
 * (free() them; NULL when memory runs out). */
cic_mp_pack *cic_mp_pack_row_views(const cic_mp_pack *all, size_t n, size_t k);

/* A pack filled entry by entry, for values that are never held as mpfr_t
 * (float32 weights, weights made on the fly): cic_mp_pack_alloc makes n
 * entries at prec, all +0; cic_mp_pack_set (v finite, at pk->prec) or
 * cic_mp_pack_set_f32 (pk->prec 24, v finite) sets entry i, and
 * cic_mp_pack_finish sets the span when all are set. Unlike
 * cic_mp_pack_init the storage is there even when the span is not usable,
 * so cic_mp_pack_get (y at pk->prec) reads any entry back, signed zeros
 * included, for the dot products the fast path declines. */
int cic_mp_pack_alloc(cic_mp_pack *pk, size_t n, mpfr_prec_t prec);
void cic_mp_pack_set(cic_mp_pack *pk, size_t i, mpfr_srcptr v);
void cic_mp_pack_set_f32(cic_mp_pack *pk, size_t i, float v);
void cic_mp_pack_finish(cic_mp_pack *pk);
void cic_mp_pack_get(mpfr_ptr y, const cic_mp_pack *pk, size_t i);
/* cic_mp_pack_rows on n rows of k float32 values: 0, -1 when memory runs
 * out, 1 when a value is NaN or Inf (nothing made: use the mpfr_t path). */
int cic_mp_pack_rows_f32(cic_mp_pack *all, cic_mp_pack **views, const float *w, size_t n,
                         size_t k);

/* A linear layer, row-major: y[i*n + j] = b[j] + sum_p x[i*k + p] w[j*k + p]
 * for rows i < m, each correctly rounded (src/base/mplinear.c). Rows go in
 * blocks of 8 against wp (w's rows packed by cic_mp_pack_rows), so each
 * weight is read once per block, without carries when the weights have at
 * most 24 bits, else through cic_mp_dot_rows_packed; declined dots take
 * cic_mp_dot with s (cap >= k). w may be
 * NULL when wp holds every entry (cic_mp_pack_alloc): a declined dot then
 * reads its row back from wp into wrow (k values at the pack's precision;
 * unused, and may be NULL, when w is given). b may be NULL; y may not alias x, w or b. */
void cic_mp_linear_rows(mpfr_t *y, const mpfr_t *x, size_t m, const mpfr_t *w,
                        const cic_mp_pack *wp, const mpfr_t *b, size_t n, size_t k,
                        mpfr_t *wrow, cic_dot_scratch *s);

/* The fast path alone: 0 with r set, or -1 (r untouched) where it declines:
 * NaN or Inf, every term zero, factors of over 2048 bits together, mixed
 * precisions within x or y, exponent ranges spanning over 3968 bits. */
int cic_mp_dot_fixed(mpfr_ptr r, const mpfr_t *x, size_t incx, const mpfr_t *y,
                     size_t incy, size_t n, mpfr_srcptr bias);
/* Row v of width w = K P times H = hk (x) Syl_P, in place: the butterflies
 * of length P on each block, then the blocks mixed by the base hk (K x K,
 * +-1; K = 1 none, hk and acc may be NULL), out block c = sum_a hk[a][c]
 * block a (transpose: hk[c][a]). Each addition correctly rounded at the
 * row's precision, in the order the real engines use (engine_real.h), so
 * that at 24 or 53 bits it is their float32 or float64 result bit for bit.
 * acc: K values, t0 one, at the row's precision. True when every addition
 * was exact (then v H holds exactly). */
bool cic_mp_fwht_row(mpfr_t *v, int w, int K, const signed char *hk, bool transpose,
                     mpfr_t *acc, mpfr_t t0);
/* Entry (i, j) of that H, +-1: hk[i / P][j / P] times Syl_P[i % P][j % P] =
 * (-1)^popcount((i % P) & (j % P)). */
static inline int cic_hadamard_kron_entry(const signed char *hk, size_t K, size_t P, size_t i,
                                          size_t j)
{
    int h = hk[(i / P) * K + j / P];
    return __builtin_parityll((unsigned long long)((i % P) & (j % P))) ? -h : h;
}

/* The same through exact MPFR products and mpfr_sum only (the reference the
 * fast path is tested against). */
void cic_mp_dot_mpfr(mpfr_ptr r, const mpfr_t *x, size_t incx, const mpfr_t *y,
                     size_t incy, size_t n, mpfr_srcptr bias, cic_dot_scratch *s);

/* A vector of n MPFR values at prec bits, set to +0; NULL on failure.
 * Destroy with the same n; destroy(NULL, n) is a no-op. */
mpfr_t *cic_mpvec_create(size_t n, mpfr_prec_t prec);
void cic_mpvec_destroy(mpfr_t *v, size_t n);

/* Exact conversions in and out of binary32 storage. set_f32 is exact when the
 * vector's precision is >= 24. get_f32 rounds to nearest with the binary32
 * exponent range (subnormals and overflow to Inf as IEEE does). */
void cic_mpvec_set_f32(mpfr_t *v, const float *x, size_t n);
/* Each of the rows of x (row-major, cols values) without its mean: the
 * mean as mpfr_sum / cols at prec, subtracted with one rounding. 0, or -1
 * when memory runs out (x untouched). */
int cic_mpvec_center_rows(mpfr_t *x, size_t rows, size_t cols, mpfr_prec_t prec);
float cic_mp_get_f32(mpfr_srcptr x);
void cic_mpvec_get_f32(float *y, const mpfr_t *v, size_t n);
/* x as a double that rounds to the same binary32 as x (cic_mp_get_f32):
 * x rounded to nearest double, except that a double landing on a binary32
 * tie (x within half a double ulp of a midpoint between two floats) is
 * moved one double ulp toward the side x lies on. What a dump stores, so a
 * reader's (float) of it gives the proven binary32. */
double cic_mp_get_d_f32(mpfr_srcptr x);

#endif
