/* SPDX-License-Identifier: MIT */
/* qmat.h: the orthogonal matrices that rotate the residual stream, computed
 * at a chosen precision in MPFR (DESIGN.md section 2).
 *
 * Matrices are row-major d x d arrays of mpfr_t at prec bits. prec 24 and 53
 * reproduce float32 and float64 arithmetic operation by operation (each MPFR
 * operation is correctly rounded, as IEEE arithmetic is), so one code path
 * serves the mpfr, f64 and f32 transform precisions. */
#ifndef CIC_QMAT_H
#define CIC_QMAT_H

#include <mpfr.h>

#include "../kind/kind.h"
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Haar-random orthogonal Q: Householder QR of a d x d Gaussian matrix (entries
 * from cic_rng, keyed by seed and "q.random"), Q = Q_qr diag(sign(diag R)).
 * Orthogonal to about the unit roundoff of prec. q must hold d*d values
 * initialised at prec. Returns 0, or -1 on allocation failure. */
int cic_q_random(mpfr_t *q, int d, uint64_t seed, mpfr_prec_t prec);

/* Randomized Hadamard H diag(s) / sqrt(d) with s_i = +-1 from the seed and
 * H = H_K (x) Sylvester(d / K): d = K * 2^k with K = 1 or a Paley order
 * (q + 1 for a prime power q = 3 mod 4, 2(q + 1) for q = 1 mod 4) or a
 * Williamson order (156 or 172), the smallest such K (the cheapest fast
 * transform). Returns
 * 0, or -1 when d has no construction here (see cic_q_hadamard_supported).
 * Same as cic_q_hadamard_k with K = 0. */
int cic_q_hadamard(mpfr_t *q, int d, uint64_t seed, mpfr_prec_t prec);
int cic_q_hadamard_supported(int d);
/* Writes into buf a sentence naming the nearest supported sizes below and
 * above d, for error messages. */
void cic_q_hadamard_suggest(char *buf, size_t cap, int d);

/* The same with the base order K forced (a case's hadamard_base): K = 0 is
 * the automatic choice above, bit for bit; K >= 1 must have a construction
 * here (1: Sylvester, a Paley order, a Williamson order) with d % K == 0
 * and d / K a power of two, so that d = 256 can be built as 1 x 256
 * (Sylvester, the automatic choice) or as 32 x 8 or 128 x 2 (Paley I over
 * GF(31), GF(127)): Hadamard matrices of the same order that are not
 * Sylvester's. The signs s come from the same stream whatever K, so two
 * bases with one seed differ in H only. -1 when (d, K) is not supported. */
int cic_q_hadamard_k(mpfr_t *q, int d, int K, uint64_t seed, mpfr_prec_t prec);
/* The same Q at 53 bits as doubles (d x d, row-major): for products
 * through dgemm at sizes where d^2 MPFR values take gigabytes. */
int cic_q_hadamard_k_f64(double *q, int d, int K, uint64_t seed);
/* The signs s_j of those Q (d values of +-1), for the transforms that apply
 * Q without forming it (model/lazy.h). Returns 0. */
int cic_q_hadamard_signs(signed char *s, int d, uint64_t seed);
/* Whether (d, K) is supported as above (K = 0: cic_q_hadamard_supported). */
int cic_q_hadamard_k_supported(int d, int K);
/* Writes into buf why (d, K) is not supported, K != 0 (K has no
 * construction here, or d is not K * 2^k), and the base orders d allows,
 * for error messages: "16 has no Hadamard construction here (...); the
 * base orders of 256 are 1, 4, 8, 32, 128 (or 0: automatic)". */
void cic_q_hadamard_k_explain(char *buf, size_t cap, int d, int K);

/* The base H_K of the Hadamard matrix of order w used by cic_q_hadamard (and
 * the engines' fast transform, which must apply the same matrix): *hk gets a
 * freshly allocated K x K row-major +-1 matrix (free() it), normalized so
 * that row 0 and column 0 are all +1, and *K its order (w = K * 2^k).
 * Returns 0, or -1 (w unsupported, allocation failure; then *hk = NULL). */
int cic_hadamard_base(signed char **hk, int *K, int w);
/* Just the order K of that base, or 0 when w is unsupported. */
int cic_hadamard_base_order(int w);
/* The base of cic_q_hadamard_k(., w, K, ...): K = 0 the automatic one (as
 * cic_hadamard_base), else the base of order K; the order is
 * cic_hadamard_base_order_k(w, K). 0, or -1 ((w, K) unsupported,
 * allocation failure; then *hk = NULL). */
int cic_hadamard_base_k(signed char **hk, int K, int w);
/* The base order cic_q_hadamard_k(., w, K, ...) uses: K when K >= 1 and
 * (w, K) is supported, the automatic order when K = 0, 0 when unsupported.
 * What a fast Hadamard op's hbase is set to. */
int cic_hadamard_base_order_k(int w, int K);

/* The randomized regular Hadamard R diag(s) / sqrt(d), d = 4^k (k >= 1),
 * R = (J - 2 I_4)^(x)k: R[i][j] = (-1)^(k - the base-4 digits where i and j
 * differ), every row and column summing to 2^k = sqrt(d), so a row of equal
 * values is spread evenly instead of into one channel (ConvRot). The signs
 * s are those of cic_q_hadamard with the same seed. 0, or -1 when d is not
 * 4^k. The fast transform (engine_real.h) applies R as P D_r Syl(d) D_c:
 * the helpers below give P (a swap of digits 1 and 2 in every base-4
 * digit, an involution), D_r (-1 per nonzero digit) and D_c (-1 per zero
 * digit). */
int cic_q_regular_hadamard(mpfr_t *q, int d, uint64_t seed, mpfr_prec_t prec);
static inline int cic_regular_sigma(int j)
{
    return (int)((((unsigned)j & 0x55555555u) << 1) | (((unsigned)j >> 1) & 0x55555555u));
}
static inline int cic_regular_nz(int j)
{
    return __builtin_popcount(((unsigned)j | ((unsigned)j >> 1)) & 0x55555555u);
}
/* -1 or +1: D_r[j], D_c[j] for order 4^k */
static inline int cic_regular_dr(int j)
{
    return (cic_regular_nz(j) & 1) ? -1 : 1;
}
static inline int cic_regular_dc(int j, int k)
{
    return ((k - cic_regular_nz(j)) & 1) ? -1 : 1;
}
/* The k of d = 4^k, or 0 when d is not a power of four above 1. */
static inline int cic_regular_order_k(int d)
{
    int k = 0;
    if (d < 4 || (d & (d - 1)) != 0)
        return 0;
    while ((1 << (2 * k)) < d)
        k++;
    return (1 << (2 * k)) == d ? k : 0;
}

/* A mean-preserving orthogonal Q (Q 1 = 1): for kind hadamard
 * Hn diag(1, +-1...) Hn (d a power of two), for random P diag(1, R) P with
 * R Haar of order d - 1 and P the reflection swapping e_0 and 1/sqrt(d),
 * for identity I. 0, or -1 (unsupported size, allocation failure). Same as
 * cic_q_mean_preserving_k with K = 0. */
int cic_q_mean_preserving(mpfr_t *q, int d, enum cic_qkind kind, uint64_t seed,
                          mpfr_prec_t prec);
/* The same with the Hadamard base order forced (kind hadamard; K is ignored
 * for the other kinds): K = 0 as above (d a power of two, Sylvester), K >= 1
 * with (d, K) supported as for cic_q_hadamard_k: Q = H^T D H / d with
 * H = H_K (x) Sylvester(d / K), which has Q 1 = 1 because row 0 of every
 * normalized H is all +1 (for K = 1, H is symmetric and this is the Q
 * above, bit for bit). */
int cic_q_mean_preserving_k(mpfr_t *q, int d, enum cic_qkind kind, int K, uint64_t seed,
                            mpfr_prec_t prec);

/* A rotation from a file (x->q_file, x->q_tensor; q = "file:PATH"): the
 * n x n tensor's values into q (initialised at prec; exact from doubles at
 * prec >= 53). order names n for messages ("d_model", "head_dim"). 0, or -1
 * with d set (the file, a tensor of another size). */
int cic_q_file(mpfr_t *q, int n, const char *order, const cic_xform_spec *x, mpfr_prec_t prec,
               cic_diag *d);
/* Its max |Q^T Q - I| into *orth: cic_q_orth_check's value with limit
 * CIC_Q_FILE_ORTH_MAX and budget CIC_Q_ORTH_BUDGET, so the same figure as
 * cic_q_orth_error at 64 bits on the values as doubles (or, where that
 * would cost more than the budget, a proven bound on the same side of
 * CIC_Q_FILE_ORTH_MAX). 0, or -1 with d set. */
int cic_q_file_check(double *orth, const cic_xform_spec *x, int n, const char *order,
                     cic_diag *d);
/* The largest max |Q^T Q - I| a file's rotation may have: a float32 matrix
 * orthogonal to its precision stays near 1e-6, a bf16 one near 1e-2; a
 * matrix further off is not a rotation. */
#define CIC_Q_FILE_ORTH_MAX 0.05

/* What cic_q_orth_check found. */
typedef struct {
    double value;        /* the figure (below) */
    bool exact;          /* value is cic_q_orth_error's figure, bit for bit */
    double lo, hi;       /* the double enclosure: lo <= max |Q^T Q - I| <= hi */
    size_t mpfr_entries; /* entries of Q^T Q formed in MPFR (0: none needed) */
} cic_q_orth;
/* MPFR products cic_q_file_check may spend on the exact figure once the
 * double enclosure has decided (about 4 s; d^3 / 2 is 34e9 at d = 4096). */
#define CIC_Q_ORTH_BUDGET ((size_t)1 << 26)
/* max |Q^T Q - I| of the d x d doubles q (row-major) against limit, cheaply:
 * Q^T Q in double (dsyrk) with a proven bound on each entry's error gives
 * the enclosure [lo, hi]; then the entries that may be the largest are
 * formed in MPFR as cic_q_orth_error does (exact, r->exact), when they
 * number at most budget / d or the enclosure does not decide whether the
 * figure is at most limit. Otherwise (decided, too many: a Q orthogonal to
 * double rounding at large d) value is hi when at most limit, else lo, and
 * exact is false: either way value <= limit exactly when
 * cic_q_orth_error's figure is. A NaN or Inf in q, or an overflow, takes
 * cic_q_orth_error on all of q. 0, or -1 when memory runs out. */
int cic_q_orth_check(cic_q_orth *r, const double *q, int d, double limit, size_t budget);

/* The identity (a control). */
void cic_q_identity(mpfr_t *q, int d);

/* max |Q^T Q - I| over all entries, computed at 2*prec bits, as a double. */
double cic_q_orth_error(const mpfr_t *q, int d, mpfr_prec_t prec);

#endif
