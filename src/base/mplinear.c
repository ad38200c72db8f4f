/* SPDX-License-Identifier: MIT */
/* mplinear.c: the MPFR engine's linear op, cic_mp_linear_rows (mpvec.h),
 * and the kernel of its hot case: a block of up to NARROW_ROWS activation
 * rows at the working precision (64 or 128 bits: 1 or 2 limbs) against
 * float32 weight rows (24 significant bits at the top of one limb).
 *
 * The sums are the general kernel's (mpvec.c), exact integers in a fixed
 * point of unit 2^emin, only formed without carries. A weight's bits as an
 * integer b < 2^24, shifted left by r < 32, still fit one limb, so an x
 * limb times it is one multiply and lands below 2^119: a single 128-bit
 * addition into a bin of 32 bits of weight (bin j counts units of
 * 2^(emin + 32 j)), none rippling per term. A bin takes 2^8 such terms
 * before it could overflow; every NARROW_RUN terms the bins are normalised
 * (each keeps its low 32 bits, the rest goes to the next), and at the end
 * each pair of bins is one limb of the positive or negative sum, which
 * _cic_dot_rows_finish rounds as the general kernel does. The result is the
 * same correctly rounded value, bit for bit.
 *
 * The block's rows are copied once, interleaved (entry i of every row
 * together), with the exponent and sign in one word (8 e + 2 s); y's word
 * adds the bins' address, so that per term one addition gives the bin's
 * address, the shift and the sign lane. The sign lane counts negative
 * factors (0, 1 or 2: a sum, which needs no exclusive or; lanes 0 and 2
 * both hold positive products and are added at the end). Whatever the
 * hot case does not cover (other precisions, a span too wide for the
 * accumulator, NaN, Inf, all-zero rows) goes to cic_mp_dot_rows_packed and
 * cic_mp_dot, which decide exactly as before. */
#include "mpdot_impl.h"

#include "base.h"

#include <string.h>

#define NARROW_BITS 24 /* significant bits of a weight: float32 */
#define NARROW_RUN 256 /* terms between normalisations: 2^8 2^119 < 2^128 */
#define NARROW_LA 4    /* most x limbs the block takes */
#define NARROW_EXP ((int64_t)1 << 54) /* |exponent| bound, so that words fit */
#define NARROW_ROWS (2 * CIC_DOT_ROWS)  /* rows a block: 8 */
#define NARROW_LANES 32 /* a bin index: 3 lanes a row, padded to a power of 2 */
#define NARROW_SLOT (16 * NARROW_LANES) /* bytes a bin index: 512 */
#define NARROW_E (NARROW_SLOT / 32)     /* a word is NARROW_E e + 2 s: 16 e + 2 s */

/* Rows [i, i + nr) of x, interleaved: entry p of row t at p nr + t. */
typedef struct {
    int64_t *xe;   /* NARROW_E e + 2 s (e MPFR's exponent, s the sign); a zero as at emin */
    mp_limb_t *xl; /* la limbs an entry, MPFR's layout; a zero's are 0 */
    int nr, la;
    cic_mp_span sx[NARROW_ROWS];
} x_block;

/* Bins of every row: bin j of row t at b[j][3 t + q], q the number of
 * negative factors (q = 1: negative products, 0 and 2 positive ones; so q
 * is a sum, not an exclusive or). NARROW_SLOT-byte aligned. */
typedef struct {
    dot_u128 b[2 * DOT_ACC_LIMBS][NARROW_LANES];
} narrow_bins;

/* 0, or -1 (B empty) when the rows do not suit the hot case or memory
 * runs out. xp: the rows' packs, k entries each. */
static int block_init(x_block *B, const cic_mp_pack *xp, int nr, size_t k)
{
    size_t p;
    int t, la = xp[0].L;
    memset(B, 0, sizeof *B);
    for (t = 0; t < nr; t++) {
        const cic_mp_span *sp = &xp[t].span;
        if (!sp->usable || xp[t].L != la || la > NARROW_LA || sp->emin < -NARROW_EXP ||
            sp->emax > NARROW_EXP)
            return -1;
        B->sx[t] = *sp;
    }
    B->xe = cic_calloc(k * (size_t)nr, sizeof *B->xe);
    B->xl = cic_calloc(k * (size_t)nr, (size_t)la * sizeof *B->xl);
    if (!B->xe || !B->xl) {
        free(B->xe);
        free(B->xl);
        memset(B, 0, sizeof *B);
        return -1;
    }
    B->nr = nr;
    B->la = la;
    for (p = 0; p < k; p++)
        for (t = 0; t < nr; t++) {
            int64_t es = xp[t].es[p];
            size_t q = p * (size_t)nr + (size_t)t;
            if (PACK_IS_ZERO(es)) {
                B->xe[q] = NARROW_E * (int64_t)B->sx[t].emin; /* in range; adds 0 */
                continue;
            }
            B->xe[q] = NARROW_E * (es >> 1) + 2 * (es & 1);
            memcpy(B->xl + q * (size_t)la, xp[t].limbs + p * (size_t)la,
                   (size_t)la * sizeof *B->xl);
        }
    return 0;
}

static void block_clear(x_block *B)
{
    free(B->xe);
    free(B->xl);
    memset(B, 0, sizeof *B);
}

/* Terms [i0, i1) of nr rows of la limbs (constants where inlined). c takes
 * the exponent sum to d, the bit offset of a term's lowest limb (>= 40:
 * see _cic_dot_rows_setup's emin). With y's part the bins' address,
 * z = bins + 8 d + 2 q gives at once the bin's address (bins + 256 (d / 32)
 * + 16 q), the shift (d % 32) and the lane. */
DOT_INLINE void narrow_run(narrow_bins *bins, const x_block *B, const cic_mp_pack *y, int64_t c,
                           size_t i0, size_t i1, int nr, int la)
{
    const int64_t *xe = B->xe + i0 * (size_t)nr, *ye = y->es;
    const mp_limb_t *xl = B->xl + i0 * (size_t)nr * (size_t)la, *yl = y->limbs;
    uint64_t base = (uint64_t)(uintptr_t)bins->b;
    size_t i;
    int t, k;
    for (i = i0; i < i1; i++, xe += nr, xl += (size_t)nr * (size_t)la) {
        int64_t eb = ye[i];
        uint64_t yz;
        mp_limb_t b;
        if (PACK_IS_ZERO(eb))
            continue;
        yz = base + (uint64_t)(NARROW_E * ((eb >> 1) + c) + 2 * (eb & 1));
        b = yl[i] >> (GMP_NUMB_BITS - NARROW_BITS);
#pragma GCC unroll 8
        for (t = 0; t < nr; t++) {
            uint64_t z = (uint64_t)xe[t] + yz;
            mp_limb_t bs = b << (z / NARROW_E & 31);
            dot_u128 *bt = (dot_u128 *)(uintptr_t)((z & ~(uint64_t)(NARROW_SLOT - 1)) +
                                                   8 * (z & 6) + 48 * (uint64_t)t);
#pragma GCC unroll 4
            for (k = 0; k < la; k++) /* limb k: 64 k bits, 2 k bins up */
                bt[2 * NARROW_LANES * k] += (dot_u128)xl[t * la + k] * bs;
        }
    }
}

/* Every bin below 2^32 but the top ones, which hold what is left (under
 * 2^32 too: every partial sum is below 2^(32 nb)). */
static void narrow_carry(narrow_bins *bins, int nb, int lanes)
{
    int j, l;
    for (j = 0; j + 1 < nb; j++)
        for (l = 0; l < lanes; l++) {
            bins->b[j + 1][l] += bins->b[j][l] >> 32;
            bins->b[j][l] = (mp_limb_t)bins->b[j][l] & 0xffffffffu;
        }
}

/* Limb k of a lane once normalised: bins 2 k and 2 k + 1. */
static mp_limb_t bins_limb(const narrow_bins *bins, int k, int lane)
{
    return (mp_limb_t)bins->b[2 * k][lane] | (mp_limb_t)bins->b[2 * k + 1][lane] << 32;
}

DOT_INLINE void narrow_pass(narrow_bins *bins, const x_block *B, const cic_mp_pack *y, int64_t c,
                           int nb, int nr, int la)
{
    size_t i, end, n = y->n;
    for (i = 0; i < n; i = end) {
        end = n - i < NARROW_RUN ? n : i + NARROW_RUN;
        narrow_run(bins, B, y, c, i, end, nr, la);
        narrow_carry(bins, nb, 3 * nr);
    }
}

/* The rows of B against the weight row y, into r[t]: the mask of rows set,
 * or 0 (nothing set) unless y is narrow and the fast path takes every row
 * at a common unit. bins: scratch. */
static unsigned block_dot(mpfr_ptr *r, const x_block *B, const cic_mp_pack *y, mpfr_srcptr bias,
                          narrow_bins *bins)
{
    dot_acc acc[NARROW_ROWS];
    mpfr_exp_t u = 0, top = 0; /* the common unit; every row's bits below 2^top */
    int t, k, w, nr = B->nr, la = B->la, kb = _cic_dot_bias_limbs(bias);
    int64_t c;
    if (kb < 0 || !y->span.usable || y->L != 1 || y->prec > NARROW_BITS ||
        y->span.emin < -NARROW_EXP || y->span.emax > NARROW_EXP ||
        _cic_dot_rows_setup(acc, nr, B->sx, &y->span, bias, kb) != la)
        return 0;
    for (t = 0; t < nr; t++) {
        dot_acc *A = &acc[t];
        if (!A->on)
            return 0;
        if (t == 0 || A->emin < u)
            u = A->emin;
        if (t == 0 || A->emin + GMP_NUMB_BITS * A->w > top)
            top = A->emin + GMP_NUMB_BITS * A->w;
    }
    if (top - u > (mpfr_exp_t)GMP_NUMB_BITS * DOT_ACC_LIMBS)
        return 0;
    w = (int)((top - u + GMP_NUMB_BITS - 1) / GMP_NUMB_BITS);
    memset(bins->b, 0, 2 * (size_t)w * sizeof bins->b[0]);
    c = -(int64_t)u - NARROW_BITS - GMP_NUMB_BITS * (int64_t)la;
#define NARROW(R, L) narrow_pass(bins, B, y, c, 2 * w, (R), (L))
    switch (nr * 16 + (la <= 2 ? la : 0)) {
    case 8 * 16 + 1: NARROW(8, 1); break;
    case 8 * 16 + 2: NARROW(8, 2); break;
    case 7 * 16 + 1: NARROW(7, 1); break;
    case 6 * 16 + 1: NARROW(6, 1); break;
    case 5 * 16 + 1: NARROW(5, 1); break;
    case 4 * 16 + 1: NARROW(4, 1); break;
    case 4 * 16 + 2: NARROW(4, 2); break;
    case 3 * 16 + 1: NARROW(3, 1); break;
    case 2 * 16 + 1: NARROW(2, 1); break;
    case 1 * 16 + 1: NARROW(1, 1); break;
    default: NARROW(nr, la);
    }
#undef NARROW
    for (k = 0; k < 2 * w; k++) /* both positive lanes in one */
        for (t = 0; t < nr; t++)
            bins->b[k][3 * t] += bins->b[k][3 * t + 2];
    narrow_carry(bins, 2 * w, 3 * nr);
    for (t = 0; t < nr; t++) {
        dot_acc *A = &acc[t];
        CIC_ASSERT(bins->b[2 * w - 1][3 * t] >> 32 == 0 &&
                   bins->b[2 * w - 1][3 * t + 1] >> 32 == 0);
        A->emin = u;
        A->w = w;
        A->nz = 0;
        for (k = 0; k < w; k++) {
            A->pos[k] = bins_limb(bins, k, 3 * t);
            A->neg[k] = bins_limb(bins, k, 3 * t + 1);
            /* products only add, and a zero one is 0: a nonzero sum of
             * either sign means a nonzero product */
            A->nz += (A->pos[k] | A->neg[k]) != 0;
        }
    }
    return _cic_dot_rows_finish(r, acc, nr, bias, kb);
}

void cic_mp_linear_rows(mpfr_t *y, const mpfr_t *x, size_t m, const mpfr_t *w,
                        const cic_mp_pack *wp, const mpfr_t *b, size_t n, size_t k,
                        mpfr_t *wrow, cic_dot_scratch *s)
{
    /* NULL: no hot case */
    narrow_bins *bins = aligned_alloc(NARROW_SLOT, sizeof(narrow_bins));
    size_t i, j;
    int t, nr;
    for (i = 0; i < m; i += (size_t)nr) {
        const mpfr_t *xr[NARROW_ROWS];
        cic_mp_pack xp[NARROW_ROWS];
        const cic_mp_pack *xpp[NARROW_ROWS];
        mpfr_ptr yr[NARROW_ROWS];
        x_block B;
        bool packed = true, blk;
        memset(xp, 0, sizeof xp);
        nr = m - i < NARROW_ROWS ? (int)(m - i) : NARROW_ROWS;
        for (t = 0; t < nr; t++) {
            xr[t] = x + (i + (size_t)t) * k;
            /* out of memory: unpacked, every dot through cic_mp_dot */
            packed = cic_mp_pack_init(&xp[t], xr[t], k) == 0 && packed;
            xpp[t] = &xp[t];
        }
        blk = packed && bins && block_init(&B, xp, nr, k) == 0;
        for (j = 0; j < n; j++) {
            unsigned done = 0, fall = 0;
            mpfr_srcptr bj = b ? b[j] : NULL;
            for (t = 0; t < nr; t++)
                yr[t] = y[(i + (size_t)t) * n + j];
            if (blk)
                done = block_dot(yr, &B, &wp[j], bj, bins);
            for (t = 0; packed && !done && t < nr; t += CIC_DOT_ROWS) {
                int h = nr - t < CIC_DOT_ROWS ? nr - t : CIC_DOT_ROWS;
                fall |= cic_mp_dot_rows_packed(yr + t, xpp + t, h, &wp[j], bj) << t;
            }
            done |= fall;
            if (!w && done != (1u << nr) - 1) {
                size_t p; /* the row back out of its pack */
                for (p = 0; p < k; p++)
                    cic_mp_pack_get(wrow[p], &wp[j], p);
            }
            for (t = 0; t < nr; t++)
                if (!(done >> t & 1))
                    cic_mp_dot(yr[t], xr[t], 1, w ? w + j * k : (const mpfr_t *)wrow, 1, k, bj, s);
        }
        if (blk)
            block_clear(&B);
        for (t = 0; t < nr; t++)
            cic_mp_pack_clear(&xp[t]);
    }
    free(bins);
}
