/* SPDX-License-Identifier: MIT */
/* mpslice_plan.c: the plan of a sliced linear op (mpslice.c has the
 * method): each row of x and of the weights scanned for its lowest set
 * bit, its exponents and its span; the slice widths beta and gamma that
 * minimise the products dgemm forms; the blocks of rows that fit the
 * scratch budget; and the cost test that leaves an op to the row kernel
 * when the slices would not be cheaper. Also the scratch an op holds, for
 * the memory estimate. Nothing here changes a bit of an output: the plan
 * only decides which path computes it. */
#include "mpslice_int.h"

#include <cblas.h>
#include <limits.h>
#include <math.h>

/* ---- rows ---- */

/* Entry |v| = M 2^(e - 64 L) (MPFR's form: L limbs, the top bit set) joins
 * row r: its exponent and its lowest set bit. */
static void row_add(srow *r, bool first, const mp_limb_t *M, int L, mpfr_exp_t e)
{
    int q = 0;
    mpfr_exp_t lo;
    while (M[q] == 0)
        q++;
    lo = e - (mpfr_exp_t)GMP_NUMB_BITS * (L - q) + __builtin_ctzl(M[q]);
    if (first || lo < r->lo)
        r->lo = lo;
    if (first || e < r->emin)
        r->emin = e;
    if (first || e > r->emax)
        r->emax = e;
}

/* The span once every entry is in; declined when there is none or the
 * span is too wide. */
static void row_finish(srow *r, bool any)
{
    r->span = any && r->emax - r->lo <= SPAN_MAX ? (long)(r->emax - r->lo) : -1;
}

/* A row of MPFR values: a row of x, or of weights that have no pack. */
static void scan_mp_row(srow *r, const mpfr_t *x, size_t k)
{
    size_t p;
    bool any = false;
    for (p = 0; p < k; p++) {
        mpfr_srcptr a = x[p];
        mpfr_prec_t pa = mpfr_get_prec(a);
        if (!mpfr_regular_p(a)) {
            if (mpfr_number_p(a))
                continue;
            any = false; /* NaN or Inf: MPFR's rules */
            break;
        }
        row_add(r, !any, mpfr_custom_get_significand(a), limbs_of_prec(pa),
                mpfr_custom_get_exp(a));
        r->prec = pa > r->prec ? pa : r->prec;
        any = true;
    }
    row_finish(r, any);
}

/* Weight row j from its pack view or, when the pack holds nothing (the
 * weights at 8 limbs or more, or NaN, Inf or mixed precisions among them:
 * cic_mp_pack_init), from its MPFR values w (NULL: none, declined); and
 * its bias. */
static void scan_w_row(srow *r, const cic_mp_pack *v, const mpfr_t *w, mpfr_srcptr bias)
{
    size_t p;
    bool any = false;
    if (!v->limbs && w) {
        scan_mp_row(r, w, v->n);
    } else {
        for (p = 0; v->limbs && p < v->n; p++) {
            int64_t es = v->es[p];
            if (PACK_IS_ZERO(es))
                continue;
            row_add(r, !any, v->limbs + p * (size_t)v->L, v->L, (mpfr_exp_t)(es >> 1));
            any = true;
        }
        r->prec = v->prec;
        row_finish(r, any);
    }
    if (!bias || mpfr_zero_p(bias))
        return;
    if (!mpfr_regular_p(bias) || limbs_of_prec(mpfr_get_prec(bias)) > BIAS_LIMBS) {
        r->span = -1; /* the row kernel applies MPFR's rules */
        return;
    }
    r->kb = limbs_of_prec(mpfr_get_prec(bias));
    r->bl = mpfr_custom_get_significand(bias);
    r->be = mpfr_custom_get_exp(bias);
    r->bneg = mpfr_signbit(bias) != 0;
}

void _cic_sl_scan_part(slice_op *P, int t, int nt)
{
    size_t lo, hi, i;
    share(0, P->m, t, nt, &lo, &hi);
    for (i = lo; i < hi; i++)
        scan_mp_row(&P->xr[i], P->x + i * P->k, P->k);
    share(0, P->n, t, nt, &lo, &hi);
    for (i = lo; i < hi; i++)
        scan_w_row(&P->wr[i], &P->wp[i], P->w ? P->w + i * P->k : NULL,
                   P->b ? P->b[i] : NULL);
}

/* ---- the split and the blocks ---- */

/* Whether k (2^beta - 1)(2^gamma - 1) < 2^53: every partial sum of a dot
 * product of slices is then an integer below 2^53, exact in a double. */
static bool exact_fits(size_t k, int beta, int gamma)
{
    unsigned __int128 a, c;
    if (beta < 1 || gamma < 1 || beta + gamma > 60 || k > ((size_t)1 << 31))
        return false;
    a = ((unsigned __int128)1 << beta) - 1;
    c = ((unsigned __int128)1 << gamma) - 1;
    return (unsigned __int128)k * a * c < (unsigned __int128)1 << 53;
}

/* Slices of the rows taken, at bits a slice. */
static size_t slices_at(const srow *r, size_t n, int bits)
{
    size_t i, tot = 0;
    for (i = 0; i < n; i++)
        if (r[i].span >= 0)
            tot += r[i].span ? (size_t)((r[i].span + bits - 1) / bits) : 1;
    return tot;
}

/* beta and gamma that minimise the products dgemm forms (x's slices times
 * the weights'), within exact_fits. False when none fits. */
static bool choose_split(slice_op *P)
{
    double best = -1;
    int beta, gamma;
    for (beta = 1; beta <= 52; beta++) {
        double c;
        for (gamma = 52; gamma >= 1 && !exact_fits(P->k, beta, gamma); gamma--)
            ;
        if (gamma < 1)
            continue;
        c = (double)slices_at(P->xr, P->m, beta) * (double)slices_at(P->wr, P->n, gamma);
        if (best < 0 || c < best) {
            best = c;
            P->beta = beta;
            P->gamma = gamma;
        }
    }
    return best >= 0;
}

/* Each taken row's slice count at bits a slice; the declined rows listed
 * in *list (*cnt of them). Returns the most slices of a row. */
static int set_slices(srow *r, size_t n, int bits, size_t *list, size_t *cnt)
{
    size_t i;
    int most = 0;
    *cnt = 0;
    for (i = 0; i < n; i++) {
        r[i].ns = r[i].span < 0 ? 0 : r[i].span ? (int)((r[i].span + bits - 1) / bits) : 1;
        if (!r[i].ns)
            list[(*cnt)++] = i;
        most = r[i].ns > most ? r[i].ns : most;
    }
    return most;
}

/* Slice rows of x (tx) and of the weights (tw) per block, within the
 * budget: slices of both and their products, 8 bytes each. Both whole
 * when they fit; else x whole, or the weights whole, when the other still
 * gets blocks of BLOCK_MIN slice rows (each operand is then sliced once,
 * and dgemm is efficient from about that size); else square blocks (x
 * sliced again for each weight block); else the first of these whose
 * blocks hold the widest rows. False when none does. */
#define BLOCK_MIN 256.0
static bool choose_blocks(slice_op *P, size_t tx, size_t tw, int mostx, int mostw)
{
    double B = (double)_cic_sl_budget(P->rt) / 8, k = (double)P->k, X = (double)tx, W = (double)tw;
    double mx[3], nw[3], sq = sqrt(k * k + B) - k; /* square: 2 k M + M^2 = B */
    int c, pass;
    if (X * k + W * k + X * W <= B) {
        P->mx = tx;
        P->nw = tw;
        return true;
    }
    mx[0] = X, nw[0] = (B - X * k) / (k + X);
    mx[1] = (B - W * k) / (k + W), nw[1] = W;
    mx[2] = sq < X ? sq : X, nw[2] = sq < W ? sq : W;
    for (pass = 0; pass < 2; pass++)
        for (c = 0; c < 3; c++) {
            bool fits = mx[c] >= mostx && nw[c] >= mostw;
            bool big = (mx[c] >= X || mx[c] >= BLOCK_MIN) && (nw[c] >= W || nw[c] >= BLOCK_MIN);
            if (fits && (big || pass)) {
                P->mx = (size_t)mx[c];
                P->nw = (size_t)nw[c];
                return true;
            }
        }
    return false;
}

size_t _cic_sl_block_rows(srow *r, size_t r0, size_t n, size_t lim, size_t *r1)
{
    size_t i, tot = 0;
    for (i = r0; i < n; i++) {
        if (!r[i].ns)
            continue;
        if (tot && tot + (size_t)r[i].ns > lim)
            break;
        r[i].off = tot;
        tot += (size_t)r[i].ns;
    }
    *r1 = i;
    return tot;
}

/* ns per multiply-add of the row kernel on one thread (bench part 1 and
 * its rows at 256 to 2048 bits): the carry-free case (float32 weights, x
 * up to 4 limbs: mplinear.c), the general fixed-point one (both factors
 * within DOT_MAX_LIMBS), and above it exact mpfr_mul products added by
 * mpfr_sum (cic_mp_dot_mpfr), some ten times dearer. */
static double kernel_ns(mpfr_prec_t px, mpfr_prec_t pw)
{
    int la = limbs_of_prec(px), lw = limbs_of_prec(pw);
    if (pw <= 24 && la <= 4)
        return 1.4 + 0.25 * la;
    if (la < DOT_MAX_LIMBS && la + lw <= DOT_MAX_LIMBS)
        return 2.6 + 1.5 * la * lw;
    return 30.0 + 3.0 * la + (double)la * lw;
}

/* Whether this path is estimated cheaper than the row kernel on the rows
 * it takes (mo x rows, no weight rows; tx and tw slice rows), x sliced
 * xpass times. */
static bool worth_it(const slice_op *P, size_t mo, size_t no, size_t tx, size_t tw, size_t xpass)
{
    double k = (double)P->k, nt = P->nt, nb = openblas_get_num_threads();
    double cells = (double)mo * (double)no, prods = (double)tx * (double)tw;
    double old = cells * k * kernel_ns(P->px, P->pw) / nt;
    double now = NS_CALL + prods * k * NS_GEMM / (nb < 1 ? 1 : nb) +
                 ((double)tx * (double)xpass + (double)tw) * k * NS_SLICE / nt +
                 (cells * NS_CELL + prods * NS_TERM) / nt;
    return now < GAIN * old;
}

/* The smallest c with 2^c >= k. */
static int ceil_log2(size_t k)
{
    int c = 0;
    while (((size_t)1 << c) < k)
        c++;
    return c;
}

int _cic_sl_plan(slice_op *P)
{
    size_t i, tx, tw, xpass;
    int mostx, mostw;
    for (i = 0; i < P->m; i++)
        P->px = P->xr[i].prec > P->px ? P->xr[i].prec : P->px;
    for (i = 0; i < P->n; i++)
        P->pw = P->wr[i].prec > P->pw ? P->wr[i].prec : P->pw;
    P->logk = ceil_log2(P->k);
    if (!choose_split(P))
        return 1;
    mostx = set_slices(P->xr, P->m, P->beta, P->dr, &P->ndr);
    mostw = set_slices(P->wr, P->n, P->gamma, P->dc, &P->ndc);
    if (P->ndr == P->m || P->ndc == P->n)
        return 1;
    tx = slices_at(P->xr, P->m, P->beta);
    tw = slices_at(P->wr, P->n, P->gamma);
    if (!choose_blocks(P, tx, tw, mostx, mostw))
        return 1;
    xpass = P->mx >= tx ? 1 : (tw + P->nw - 1) / P->nw; /* x sliced once per weight block */
    if ((P->rt ? P->rt->slice_mode : CIC_SLICE_AUTO) == CIC_SLICE_AUTO &&
        !worth_it(P, P->m - P->ndr, P->n - P->ndc, tx, tw, xpass))
        return 1;
    return 0;
}

bool _cic_sl_may_take(const mpfr_t *x, size_t m, const mpfr_t *w, const cic_mp_pack *wp,
                      size_t n, size_t k, int threads, const cic_rt *rt)
{
    double cells, nb = openblas_get_num_threads(), nt = threads;
    enum cic_slice_mode mode = rt ? rt->slice_mode : CIC_SLICE_AUTO;
    if (mode == CIC_SLICE_NEVER || !m || !n || !k || k > INT_MAX / 2 || m > INT_MAX / 64 ||
        n > INT_MAX / 64 || (!w && !wp[0].limbs))
        return false;
    if (mode == CIC_SLICE_ALWAYS)
        return true;
    cells = (double)m * (double)n;
    return NS_CALL + cells * (double)k * NS_GEMM / (nb < 1 ? 1 : nb) +
               ((double)(m + n) * (double)k * NS_SLICE + cells * NS_CELL) / nt <
           GAIN * cells * (double)k *
               kernel_ns(mpfr_get_prec(x[0]), w ? mpfr_get_prec(w[0]) : wp[0].prec) / nt;
}

/* The scratch of a call: slices as the truth's rows have them, spans of
 * prec + 64 bits for x (and for the weights when mp_w: both operands at
 * prec) and 64 bits for float32 weights (over 40 binades), 16 bits a
 * slice. */
static size_t slice_scratch(size_t m, size_t n, size_t k, long prec, bool mp_w)
{
    double sx = ceil((double)(prec + 64) / 16), X = (double)m * sx;
    double W = (double)n * (mp_w ? sx : 4);
    double need = 8 * (X * (double)k + W * (double)k + X * W), B = (double)CIC_SLICE_BUDGET;
    double rows = ((double)m + (double)n) * (double)(sizeof(srow) + sizeof(size_t)) +
                  (double)SL_MAX_THREADS * (double)sizeof(sl_ws); /* and the threads' bins */
    double all = (need < B ? need : B) + (double)HUGE_PAGE + rows; /* whole huge pages */
    return all < 0x1p63 ? (size_t)all : SIZE_MAX; /* sizes from fuzzed cases saturate */
}

size_t cic_mp_slice_scratch(size_t m, size_t n, size_t k, long prec)
{
    return slice_scratch(m, n, k, prec, false);
}

size_t cic_mp_slice_scratch_mp(size_t m, size_t n, size_t k, long prec)
{
    return slice_scratch(m, n, k, prec, true);
}
