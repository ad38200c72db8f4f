/* SPDX-License-Identifier: MIT */
/* mpslice_int.h: what the two halves of the sliced linear op (mpslice.h)
 * share, internal to src/base: the rows, a thread's scratch and the op's
 * state. mpslice_plan.c scans the rows and plans the op (the split into
 * slices, the blocks, the cost test, the memory estimate); mpslice.c
 * slices, multiplies, rounds and drives the op. The method is described
 * at the top of mpslice.c. */
#ifndef CIC_MPSLICE_INT_H
#define CIC_MPSLICE_INT_H

#include "mpslice.h"
#include "mpdot_impl.h"

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

/* Bits of a row's integer (a wider row is declined): twice the highest
 * precision a proof escalates to (8192 bits), so that rows at any of them
 * are taken with exponents spread over thousands of binades. */
#define SPAN_MAX 16384
/* Bins of an output's exact sum: a product of two rows' integers (2
 * SPAN_MAX bits), a slice's rounding up on each side (2 x 52), the log2 k
 * < 32 bits of the sum and its sign: 2 SPAN_MAX / 64 + 8 limbs. An output
 * whose sum needs more (a bias far from its products) is the row
 * kernel's. */
#define ACC_LIMBS (2 * SPAN_MAX / 64 + 8)
/* The most limbs of a bias the bins take (more: the row kernel's). */
#define BIAS_LIMBS (SPAN_MAX / 64)


/* The cost model of the choice (ns, measured on bench part 1 and the
 * truth's shapes, OPENBLAS_CORETYPE=Haswell): a dgemm multiply-add per
 * BLAS thread, a slice entry written, an output rounded, a slice product
 * added into the bins. Only the choice depends on them, never a bit. */
#define NS_GEMM 0.05
#define NS_SLICE 3.0
#define NS_CELL 120.0
#define NS_TERM 3.0
#define NS_CALL 100000.0 /* a call: its threads, OpenBLAS's waking */
#define NS_SCAN 2.0 /* an entry scanned */
#define NS_DOT 5.0  /* a multiply-add of cic_mp_dot or the row kernel, roughly */
#define GAIN 0.8 /* taken when its estimate is below GAIN times the kernel's */

/* The most threads an op slices and rounds on (more are capped). */
#define SL_MAX_THREADS 64

/* Storage grows in whole huge pages (ws_room, mpslice.c). */
#define HUGE_PAGE ((size_t)2 << 20)

/* One row of x or of the weights. */
typedef struct {
    mpfr_exp_t lo;         /* every entry a multiple of 2^lo (its lowest set bit) */
    mpfr_exp_t emin, emax; /* MPFR exponents of its nonzero entries */
    long span;             /* |entry| / 2^lo < 2^span; -1: declined */
    mpfr_prec_t prec;      /* the largest precision of its entries */
    int ns;                /* slices (0: the row kernel takes the row) */
    size_t off;            /* its first slice row in its block's stack */
    /* weight rows: the bias b_j = +-bl 2^(be - 64 kb), kb limbs (0: none or zero) */
    const mp_limb_t *bl;
    mpfr_exp_t be;
    int kb;
    bool bneg;
} srow;

/* A thread's scratch: the bins (zero between outputs) and limbs of one
 * output; for the outputs the row kernel takes, a dot scratch and a
 * weight row read out of the pack (made when first needed). */
typedef struct {
    __int128 bins[ACC_LIMBS + 2];
    mp_limb_t limb[ACC_LIMBS + 2];
    cic_dot_scratch dot;
    mpfr_t *wrow;
    size_t wrow_j; /* the row in wrow (SIZE_MAX: none) */
    uint64_t sliced, kernel; /* outputs from slices, from the row kernel */
    bool ready;
} sl_ws;

struct cic_slice_ws {
    double *buf; /* A, B and C of the blocks, one after the other */
    size_t cap;  /* doubles */
};

typedef struct {
    mpfr_t *y;
    const mpfr_t *x, *w, *b;
    const cic_mp_pack *wp;
    size_t m, n, k;
    int nt, beta, gamma, logk;
    srow *xr, *wr;
    mpfr_prec_t px, pw;    /* the largest precisions of x and of w */
    size_t mx, nw;         /* block limits, in slice rows */
    double *A, *B, *C;     /* x slices, weight slices, their products (in ws) */
    cic_slice_ws *ws;
    cic_rt *rt;            /* the run's context: mode, budget, counters */
    size_t i0, i1, j0, j1; /* the current blocks of rows */
    size_t ma, nb;         /* and their slice rows */
    size_t *dr, ndr, *dc, ndc; /* declined x rows, declined weight rows */
    sl_ws *tws;            /* per thread */
    atomic_int failed;
} slice_op;

/* Share t of nt of [a, b). */
static inline void share(size_t a, size_t b, int t, int nt, size_t *lo, size_t *hi)
{
    *lo = a + (b - a) * (size_t)t / (size_t)nt;
    *hi = a + (b - a) * (size_t)(t + 1) / (size_t)nt;
}

static inline int limbs_of_prec(mpfr_prec_t p)
{
    return (int)((p + GMP_NUMB_BITS - 1) / GMP_NUMB_BITS);
}

/* The scratch bound in bytes: rt's budget, or CIC_SLICE_BUDGET. */
static inline size_t _cic_sl_budget(const cic_rt *rt)
{
    return rt && rt->slice_budget ? rt->slice_budget : CIC_SLICE_BUDGET;
}

/* Share t of nt of the rows of x and of the weights scanned into P->xr
 * and P->wr: each row's lowest bit, exponents, span and precision. */
void _cic_sl_scan_part(slice_op *P, int t, int nt);

/* The split, the slice counts, the declined rows, the blocks and the cost
 * test, once the rows are scanned. 0, or 1 to leave the op to the row
 * kernel. */
int _cic_sl_plan(slice_op *P);

/* Before any scan: whether the op could be taken at all and, in AUTO, be
 * cheaper even at one slice a row (tiny ops, a few rows, are not). */
bool _cic_sl_may_take(const mpfr_t *x, size_t m, const mpfr_t *w, const cic_mp_pack *wp,
                      size_t n, size_t k, int threads, const cic_rt *rt);

/* Rows from r0 while their slices fit lim (one row at least); their
 * offsets in the stack. *r1: the row after. Returns the slice rows. */
size_t _cic_sl_block_rows(srow *r, size_t r0, size_t n, size_t lim, size_t *r1);

#endif
