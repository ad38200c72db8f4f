/* SPDX-License-Identifier: MIT */
/* mpslice.c: the linear op y = b + x W^T of the MPFR engine through exact
 * dgemm products (an Ozaki-style split, mpslice.h): the same correctly
 * rounded outputs as cic_mp_linear_rows (mplinear.c), bit for bit, at a
 * fraction of its cost on the truth's shapes (hundreds of rows, widths in
 * the thousands, activations at 64 bits up to the 8192 a proof escalates
 * to, float32 weights).
 *
 * Row i of x is an integer vector X_i = x_i / 2^lo_i, lo_i the weight of
 * the lowest set bit of any of its entries, |X_ip| < 2^span_i. Its
 * magnitudes are cut into slices of beta bits (slice s: bits [beta s,
 * beta (s + 1)), with the entry's sign), each an integer of at most
 * 2^beta - 1, exact in a double; weight row j likewise, gamma bits a
 * slice. With k (2^beta - 1)(2^gamma - 1) < 2^53 every partial sum of a
 * dot product of two slices is an integer below 2^53, so dgemm returns the
 * exact X_s W_t^T in any order of summation, with any kernel and thread
 * count. A row has as many slices as its own span needs; the slices of a
 * block of x rows are stacked as the rows of one matrix, those of a block
 * of weight rows as another, and one dgemm forms every product an output
 * needs and no other. Output (i, j) is then
 *     b_j + sum_{s,t} 2^(lo_i + lo_j + beta s + gamma t) (X_s W_t^T)[i, j],
 * summed exactly in 128-bit bins (one per 64-bit limb), the bias added as
 * integer limbs, and rounded once (mpfr_set_z_2exp, RNDN). A correctly
 * rounded value is unique, so these are the row kernel's bits.
 *
 * What it leaves to the row kernel (cic_mp_linear_rows, cic_mp_dot), which
 * decides them exactly as before: rows holding NaN or Inf, all-zero rows
 * (signed-zero rules), rows spanning over SPAN_MAX bits, columns whose
 * bias is NaN, Inf or over BIAS_LIMBS limbs; outputs whose exact sum is
 * zero without a bias (signed zeros again), whose products could leave
 * MPFR's exponent range (there the MPFR path's products would overflow or
 * underflow), or whose bias lies too far from the products for the bins.
 * A whole op when its estimated cost is not below the row kernel's.
 *
 * beta and gamma are chosen per op to minimise the slice products (with
 * k = 1152 and float32 weights: about 21 + 21 bits, 2 weight slices, 4
 * to 5 x slices at 64 bits, 6 to 8 at 128 and about 45 at 1024). Weight
 * rows whose pack holds nothing (8 limbs or more, NaN, Inf or mixed
 * precisions in the matrix: cic_mp_pack_init) are read from their MPFR
 * values.
 *
 * Memory: x rows and weight rows go in blocks whose slices and products
 * fit the budget (CIC_SLICE_BUDGET), weight blocks outside, x blocks
 * inside; one operand stays whole where it can, so each is sliced once.
 * The storage is the caller's cic_slice_ws, kept across a run's ops, on
 * transparent huge pages. Threads: dgemm on OpenBLAS's threads from the
 * caller's; scanning, slicing, rounding and the fallbacks on up to the
 * caller's count of threads (as many as the work keeps busy), each output
 * whole on one of them, so the bits depend on neither count.
 *
 * The plan (scans, split, blocks, cost test) is in mpslice_plan.c; this
 * file slices, multiplies, rounds and drives an op. */
#include "mpslice_int.h"

#include "base.h"
#include "par.h"

#include <cblas.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

void cic_mp_slice_stats(cic_slice_stats *s, const cic_rt *rt)
{
    memset(s, 0, sizeof *s);
    if (!rt)
        return;
    s->ops = atomic_load(&rt->slice_ops);
    s->sliced = atomic_load(&rt->slice_sliced);
    s->kernel = atomic_load(&rt->slice_kernel);
    s->gemms = atomic_load(&rt->slice_gemms);
    s->gemm_fma = atomic_load(&rt->slice_gemm_fma);
    s->gemm_ns = atomic_load(&rt->slice_gemm_ns);
}

void cic_mp_slice_stats_reset(cic_rt *rt)
{
    if (!rt)
        return;
    atomic_store(&rt->slice_ops, 0);
    atomic_store(&rt->slice_sliced, 0);
    atomic_store(&rt->slice_kernel, 0);
    atomic_store(&rt->slice_gemms, 0);
    atomic_store(&rt->slice_gemm_fma, 0);
    atomic_store(&rt->slice_gemm_ns, 0);
}

/* ---- threads ---- */

typedef void (*sl_fn)(slice_op *P, int t, int nt);
typedef struct {
    slice_op *P;
    sl_fn fn;
} sl_job;

static void sl_share(void *a, int t, int nt)
{
    sl_job *j = a;
    j->fn(j->P, t, nt);
}

/* fn(P, t, nt) for t < nt, thread 0 the caller's (base/par.h): as many
 * threads (up to P->nt) as work (ns, estimated) keeps busy for THREAD_NS
 * each, since starting one costs tens of microseconds, more under load. */
#define THREAD_NS 100000.0
static void sl_parallel(slice_op *P, sl_fn fn, double work)
{
    sl_job job = {P, fn};
    cic_par_run(work / THREAD_NS + 1 < P->nt ? (int)(work / THREAD_NS) + 1 : P->nt, sl_share,
                &job);
}

/* ---- slices ---- */

/* Bits [pos, pos + width) of the L-limb integer M (0 outside its bits),
 * width <= 52. */
static uint64_t bits_at(const mp_limb_t *M, int L, long pos, int width)
{
    uint64_t mask = ((uint64_t)1 << width) - 1, v;
    long q;
    int r;
    if (pos <= -(long)width || pos >= (long)GMP_NUMB_BITS * L)
        return 0;
    if (pos < 0)
        return (M[0] << -pos) & mask;
    q = pos / GMP_NUMB_BITS;
    r = (int)(pos % GMP_NUMB_BITS);
    v = M[q] >> r;
    if (r && q + 1 < L)
        v |= M[q + 1] << (GMP_NUMB_BITS - r);
    return v & mask;
}

/* The slices of entry +-M 2^(e - 64 L) of row r, at d, d + ld, ...: slice
 * s is bits [bits s, bits (s + 1)) of |entry| / 2^lo, with the sign. */
static void slice_entry(double *d, size_t ld, const mp_limb_t *M, int L, mpfr_exp_t e, bool neg,
                        const srow *r, int bits)
{
    long o = (long)(e - (mpfr_exp_t)GMP_NUMB_BITS * L - r->lo); /* M's bit 0 in the integer */
    int s;
    for (s = 0; s < r->ns; s++) {
        double v = (double)bits_at(M, L, (long)bits * s - o, bits);
        d[(size_t)s * ld] = neg ? -v : v;
    }
}

static void slice_zero(double *d, size_t ld, int ns)
{
    int s;
    for (s = 0; s < ns; s++)
        d[(size_t)s * ld] = 0;
}

/* The slices of row r of MPFR values v (k of them) into a, k apart. */
static void slice_mp_row(double *a, const mpfr_t *v, size_t k, const srow *r, int bits)
{
    size_t p;
    for (p = 0; r->ns && p < k; p++) {
        if (!mpfr_regular_p(v[p]))
            slice_zero(a + p, k, r->ns);
        else
            slice_entry(a + p, k, mpfr_custom_get_significand(v[p]),
                        limbs_of_prec(mpfr_get_prec(v[p])), mpfr_custom_get_exp(v[p]),
                        mpfr_signbit(v[p]) != 0, r, bits);
    }
}

/* Share t of the current x block's rows into A. */
static void slice_x_part(slice_op *P, int t, int nt)
{
    size_t lo, hi, i, k = P->k;
    share(P->i0, P->i1, t, nt, &lo, &hi);
    for (i = lo; i < hi; i++)
        slice_mp_row(P->A + P->xr[i].off * k, P->x + i * k, k, &P->xr[i], P->beta);
}

/* Share t of the current weight block's rows into B: from their packs,
 * or from their MPFR values where the pack holds nothing (scan_w_row). */
static void slice_w_part(slice_op *P, int t, int nt)
{
    size_t lo, hi, j, p, k = P->k;
    share(P->j0, P->j1, t, nt, &lo, &hi);
    for (j = lo; j < hi; j++) {
        const srow *r = &P->wr[j];
        const cic_mp_pack *v = &P->wp[j];
        double *b = P->B + r->off * k;
        if (!v->limbs && P->w) {
            slice_mp_row(b, P->w + j * k, k, r, P->gamma);
            continue;
        }
        for (p = 0; r->ns && p < k; p++) {
            int64_t es = v->es[p];
            if (PACK_IS_ZERO(es))
                slice_zero(b + p, k, r->ns);
            else
                slice_entry(b + p, k, v->limbs + p * (size_t)v->L, v->L, (mpfr_exp_t)(es >> 1),
                            es & 1, r, P->gamma);
        }
    }
}

/* ---- one output: the exact sum, one rounding ---- */

/* bins += v 2^sh, |v| < 2^53: its two's complement split at limb sh / 64. */
static inline void add_term(__int128 *bins, long sh, int64_t v)
{
    unsigned __int128 w = (unsigned __int128)(__int128)v << (sh % GMP_NUMB_BITS);
    bins[sh / GMP_NUMB_BITS] += (__int128)(uint64_t)w;
    bins[sh / GMP_NUMB_BITS + 1] += (int64_t)(uint64_t)(w >> 64);
}

/* bins += the bias of weight row r at unit 2^unit (its unit at or above). */
static void add_bias(__int128 *bins, const srow *r, mpfr_exp_t unit)
{
    long sh = (long)(r->be - (mpfr_exp_t)GMP_NUMB_BITS * r->kb - unit);
    long q = sh / GMP_NUMB_BITS;
    int l, s = (int)(sh % GMP_NUMB_BITS);
    for (l = 0; l < r->kb; l++) {
        __int128 lo = (uint64_t)(r->bl[l] << s), hi = s ? (uint64_t)(r->bl[l] >> (64 - s)) : 0;
        bins[q + l] += r->bneg ? -lo : lo;
        bins[q + l + 1] += r->bneg ? -hi : hi;
    }
}

/* y = the bins' sum (w bins, the total below 2^(64 w - 1)) times
 * 2^unit, rounded once. 1 (y untouched) when it is zero and there is no
 * bias: which zero is MPFR's rule of signed zeros, the row kernel's call. */
static int bins_round(mpfr_ptr y, sl_ws *T, int w, mpfr_exp_t unit, bool bias)
{
    __int128 c = 0;
    mpz_t z;
    int q, sz;
    bool neg;
    for (q = 0; q < w; q++) {
        c += T->bins[q];
        T->bins[q] = 0; /* zero again for the next output */
        T->limb[q] = (mp_limb_t)(uint64_t)c;
        c >>= 64; /* arithmetic: the carry, signed */
    }
    CIC_ASSERT(c == 0 || c == -1);
    neg = c < 0;
    if (neg)
        mpn_neg(T->limb, T->limb, w);
    for (sz = w; sz > 0 && T->limb[sz - 1] == 0; sz--)
        ;
    if (sz == 0) {
        if (!bias)
            return 1;
        mpfr_set_zero(y, 1); /* products cancel the bias exactly: +0 as mpfr_sum */
        return 0;
    }
    mpz_roinit_n(z, T->limb, neg ? -sz : sz);
    mpfr_set_z_2exp(y, z, unit, MPFR_RNDN);
    return 0;
}

/* Output (i, j) from the products of its slices (c: C at its first x
 * slice row and first weight slice column, ldc apart). 0, or 1 when the
 * row kernel must take it (y untouched). */
static int cell_round(mpfr_ptr y, const double *c, size_t ldc, const srow *xi, const srow *wj,
                      const slice_op *P, sl_ws *T)
{
    mpfr_exp_t u = xi->lo + wj->lo, unit = u, top;
    long d0;
    int s, t, w;
    if (xi->emax + wj->emax > mpfr_get_emax() || xi->emin + wj->emin - 1 < mpfr_get_emin())
        return 1; /* a product the MPFR path would overflow or underflow */
    if (wj->kb && wj->be - (mpfr_exp_t)GMP_NUMB_BITS * wj->kb < u)
        unit = wj->be - (mpfr_exp_t)GMP_NUMB_BITS * wj->kb;
    d0 = (long)(u - unit);
    /* every term, partial sum and the total below 2^top */
    top = d0 + (mpfr_exp_t)P->beta * xi->ns + (mpfr_exp_t)P->gamma * wj->ns + P->logk + 1;
    if (wj->kb && wj->be - unit + 1 > top)
        top = wj->be - unit + 1;
    if (top + 1 > (mpfr_exp_t)GMP_NUMB_BITS * ACC_LIMBS)
        return 1;
    /* w limbs hold the total and a sign bit; a term's upper half may land
     * in bin w (-1 of a negative term's sign), so w + 1 bins */
    w = (int)((top + 1 + GMP_NUMB_BITS - 1) / GMP_NUMB_BITS);
    for (s = 0; s < xi->ns; s++) {
        const double *row = c + (size_t)s * ldc;
        long sh = d0 + (long)P->beta * s;
        for (t = 0; t < wj->ns; t++)
            if (row[t] != 0)
                add_term(T->bins, sh + (long)P->gamma * t, (int64_t)row[t]);
    }
    if (wj->kb)
        add_bias(T->bins, wj, unit);
    return bins_round(y, T, w + 1, unit, wj->kb != 0);
}

/* ---- what the row kernel takes ---- */

/* The thread's dot scratch (k values at the inputs' precision) and, when
 * the weights are only packed, a row to read them into. False when memory
 * runs out. */
static bool ws_ready(const slice_op *P, sl_ws *T)
{
    /* the rows' precisions (a row declined at a NaN may not show its own:
     * the first entries' too), for exact products in cic_mp_dot_mpfr */
    mpfr_prec_t p = P->px > P->pw ? P->px : P->pw, p0 = mpfr_get_prec(P->x[0]);
    mpfr_prec_t p1 = P->w ? mpfr_get_prec(P->w[0]) : P->wp[0].prec;
    p = p > p0 ? p : p0;
    p = p > p1 ? p : p1;
    if (T->ready)
        return true;
    if (cic_dot_scratch_init(&T->dot, P->k, p) < 0)
        return false;
    if (!P->w && !(T->wrow = cic_mpvec_create(P->k, P->wp[0].prec ? P->wp[0].prec : 24))) {
        cic_dot_scratch_clear(&T->dot);
        return false;
    }
    T->wrow_j = SIZE_MAX;
    T->ready = true;
    return true;
}

/* Weight row j as MPFR values: w's, or read back out of its pack. */
static const mpfr_t *w_row(const slice_op *P, sl_ws *T, size_t j)
{
    size_t p;
    if (P->w)
        return P->w + j * P->k;
    if (T->wrow_j != j)
        for (p = 0; p < P->k; p++)
            cic_mp_pack_get(T->wrow[p], &P->wp[j], p);
    T->wrow_j = j;
    return (const mpfr_t *)T->wrow;
}

/* Output (i, j) through cic_mp_dot, as the row kernel computes it. */
static void cell_kernel(slice_op *P, sl_ws *T, size_t i, size_t j)
{
    if (!ws_ready(P, T)) {
        atomic_store(&P->failed, 1);
        return;
    }
    cic_mp_dot(P->y[i * P->n + j], P->x + i * P->k, 1, w_row(P, T, j), 1, P->k,
               P->b ? P->b[j] : NULL, &T->dot);
    T->kernel++;
}

/* Share t of the current x block's rows against the current weight block. */
static void combine_part(slice_op *P, int t, int nt)
{
    sl_ws *T = &P->tws[t];
    size_t lo, hi, i, j, nb = P->nb;
    share(P->i0, P->i1, t, nt, &lo, &hi);
    for (i = lo; i < hi; i++) {
        const srow *xi = &P->xr[i];
        const double *c = P->C + xi->off * nb;
        for (j = P->j0; xi->ns && j < P->j1; j++) {
            const srow *wj = &P->wr[j];
            if (!wj->ns)
                continue;
            if (cell_round(P->y[i * P->n + j], c + wj->off, nb, xi, wj, P, T))
                cell_kernel(P, T, i, j);
            else
                T->sliced++;
        }
    }
}

/* Share t of the declined weight rows, against the x rows taken. */
static void declined_cols_part(slice_op *P, int t, int nt)
{
    size_t lo, hi, q, i;
    share(0, P->ndc, t, nt, &lo, &hi);
    for (q = lo; q < hi; q++)
        for (i = 0; i < P->m; i++)
            if (P->xr[i].ns)
                cell_kernel(P, &P->tws[t], i, P->dc[q]);
}

/* Share t of the declined x rows, against every weight row: the row
 * kernel, a run of consecutive rows at a time. */
static void declined_rows_part(slice_op *P, int t, int nt)
{
    sl_ws *T = &P->tws[t];
    size_t lo, hi, q, e;
    share(0, P->ndr, t, nt, &lo, &hi);
    if (lo == hi)
        return;
    if (!ws_ready(P, T)) {
        atomic_store(&P->failed, 1);
        return;
    }
    for (q = lo; q < hi; q = e) {
        size_t i = P->dr[q];
        for (e = q + 1; e < hi && P->dr[e] == P->dr[e - 1] + 1; e++)
            ;
        cic_mp_linear_rows(P->y + i * P->n, P->x + i * P->k, e - q, P->w, P->wp, P->b, P->n,
                           P->k, T->wrow, &T->dot);
        T->kernel += (e - q) * P->n;
    }
}

/* ---- the driver ---- */

/* The block's products, C = A B^T, counted and timed in the context. */
static void gemm_timed(slice_op *P)
{
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)P->ma, (int)P->nb, (int)P->k, 1.0,
                P->A, (int)P->k, P->B, (int)P->k, 0.0, P->C, (int)P->nb);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    CIC_RT_COUNT(P->rt, slice_gemms, 1);
    CIC_RT_COUNT(P->rt, slice_gemm_fma, (uint64_t)P->ma * P->nb * P->k);
    CIC_RT_COUNT(P->rt, slice_gemm_ns,
                 (int64_t)(t1.tv_sec - t0.tv_sec) * 1000000000 + (t1.tv_nsec - t0.tv_nsec));
}

/* Every block of weight rows against every block of x rows: slices, one
 * dgemm, the outputs. x is sliced once when it is one block. */
static void run_blocks(slice_op *P)
{
    size_t j0, j1, i0, i1, sliced = SIZE_MAX; /* the x block in A */
    for (j0 = 0; j0 < P->n && !atomic_load(&P->failed); j0 = j1) {
        P->nb = _cic_sl_block_rows(P->wr, j0, P->n, P->nw, &j1);
        if (!P->nb)
            continue;
        P->j0 = j0;
        P->j1 = j1;
        sl_parallel(P, slice_w_part, (double)P->nb * (double)P->k * NS_SLICE);
        for (i0 = 0; i0 < P->m && !atomic_load(&P->failed); i0 = i1) {
            P->ma = _cic_sl_block_rows(P->xr, i0, P->m, P->mx, &i1);
            if (!P->ma)
                continue;
            P->i0 = i0;
            P->i1 = i1;
            if (sliced != i0 || i0 != 0 || i1 != P->m)
                sl_parallel(P, slice_x_part, (double)P->ma * (double)P->k * NS_SLICE);
            sliced = i0;
            gemm_timed(P);
            sl_parallel(P, combine_part,
                        (double)(i1 - i0) * (double)(j1 - j0) * NS_CELL +
                            (double)P->ma * (double)P->nb * NS_TERM);
        }
    }
}

static void op_clear(slice_op *P)
{
    int t;
    for (t = 0; P->tws && t < P->nt; t++) {
        CIC_RT_COUNT(P->rt, slice_sliced, P->tws[t].sliced);
        CIC_RT_COUNT(P->rt, slice_kernel, P->tws[t].kernel);
        if (P->tws[t].ready) {
            cic_dot_scratch_clear(&P->tws[t].dot);
            cic_mpvec_destroy(P->tws[t].wrow, P->k);
        }
    }
    free(P->tws);
    free(P->xr);
    free(P->wr);
    free(P->dr);
    free(P->dc);
}

cic_slice_ws *cic_mp_slice_ws_create(void)
{
    return cic_calloc(1, sizeof(cic_slice_ws));
}

void cic_mp_slice_ws_destroy(cic_slice_ws *ws)
{
    if (!ws)
        return;
    free(ws->buf);
    free(ws);
}

size_t cic_mp_slice_ws_bytes(const cic_slice_ws *ws)
{
    return ws ? ws->cap * sizeof(double) : 0;
}

/* Room for need doubles in ws, grown when it holds less: 2 MiB aligned
 * and marked for transparent huge pages, since a 4 KiB page fault costs
 * 2 to 15 microseconds in a virtual machine (128 MiB of them took half a
 * second, huge pages a few milliseconds); HUGE_PAGE in mpslice_int.h. */
static bool ws_room(cic_slice_ws *ws, size_t need)
{
    size_t bytes;
    if (ws->cap >= need)
        return true;
    free(ws->buf);
    ws->buf = NULL;
    ws->cap = 0;
    if (need > (SIZE_MAX - HUGE_PAGE) / sizeof(double))
        return false;
    bytes = (need * sizeof(double) + HUGE_PAGE - 1) / HUGE_PAGE * HUGE_PAGE;
    if (!(ws->buf = aligned_alloc(HUGE_PAGE, bytes)))
        return false;
#ifdef MADV_HUGEPAGE
    (void)madvise(ws->buf, bytes, MADV_HUGEPAGE); /* a hint: without it, small pages */
#endif
    ws->cap = bytes / sizeof(double);
    return true;
}

/* The slices' and products' storage for the blocks chosen, in ws. */
static bool op_alloc_blocks(slice_op *P)
{
    size_t na = cic_mul_size(P->mx, P->k), nb = cic_mul_size(P->nw, P->k);
    size_t nc = cic_mul_size(P->mx, P->nw), need = na + nb + nc;
    cic_slice_ws *ws = P->ws;
    if (need < na || need < na + nb || !ws_room(ws, need))
        return false;
    P->A = ws->buf;
    P->B = P->A + na;
    P->C = P->B + nb;
    return true;
}

/* P for the op, its per-row and per-thread arrays made. False when
 * memory runs out (op_clear frees what was made). */
static bool op_start(slice_op *P, mpfr_t *y, const mpfr_t *x, size_t m, const mpfr_t *w,
                     const cic_mp_pack *wp, const mpfr_t *b, size_t n, size_t k, int threads,
                     cic_rt *rt)
{
    memset(P, 0, sizeof *P);
    P->y = y;
    P->x = x;
    P->w = w;
    P->b = b;
    P->wp = wp;
    P->m = m;
    P->n = n;
    P->k = k;
    P->nt = threads;
    P->rt = rt;
    P->xr = cic_calloc(m, sizeof *P->xr);
    P->wr = cic_calloc(n, sizeof *P->wr);
    P->dr = cic_calloc(m, sizeof *P->dr);
    P->dc = cic_calloc(n, sizeof *P->dc);
    P->tws = cic_calloc((size_t)threads, sizeof *P->tws);
    return P->xr && P->wr && P->dr && P->dc && P->tws;
}

int cic_mp_linear_sliced(mpfr_t *y, const mpfr_t *x, size_t m, const mpfr_t *w,
                         const cic_mp_pack *wp, const mpfr_t *b, size_t n, size_t k, int threads,
                         cic_rt *rt, cic_slice_ws *ws)
{
    cic_slice_ws own = {NULL, 0};
    slice_op P;
    int rc = 1;
    threads = threads < 1 ? 1 : threads > SL_MAX_THREADS ? SL_MAX_THREADS : threads;
    if (!_cic_sl_may_take(x, m, w, wp, n, k, threads, rt))
        return 1;
    if (!op_start(&P, y, x, m, w, wp, b, n, k, threads, rt))
        goto cleanup;
    P.ws = ws ? ws : &own;
    sl_parallel(&P, _cic_sl_scan_part, (double)(m + n) * (double)k * NS_SCAN);
    if (_cic_sl_plan(&P) || !op_alloc_blocks(&P))
        goto cleanup;
    run_blocks(&P);
    if (!atomic_load(&P.failed))
        sl_parallel(&P, declined_cols_part, (double)P.ndc * (double)m * (double)k * NS_DOT);
    if (!atomic_load(&P.failed))
        sl_parallel(&P, declined_rows_part, (double)P.ndr * (double)n * (double)k * NS_DOT);
    rc = atomic_load(&P.failed) ? 1 : 0;
    CIC_RT_COUNT(P.rt, slice_ops, rc == 0);
cleanup:
    op_clear(&P);
    free(own.buf);
    return rc;
}
