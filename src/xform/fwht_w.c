/* SPDX-License-Identifier: MIT */
/* fwht_w.c: weights times a randomized Hadamard Q by the fast transform in
 * exact integers, rounded once as the dense product rounds (fwht_w.h).
 *
 * For a line v of width d (a row of W for W Q, a column for Q^T W):
 *   E = the lowest set bit over the nonzero v_i, so every v_i = z_i 2^E
 *   with z_i an integer of at most B = top - E bits (top: the highest
 *   exponent); u = z H in two's complement integers of L limbs, exact
 *   since |u_j| <= d 2^B < 2^(64 L - 1);
 *   out_j = s_j RN_p(r u_j) 2^E = RN_p(sum_i v_i Q[i][j]),
 * the scaling by 2^E and the sign exact. An exact zero sum is +0 unless
 * every product v_i Q[i][j] is -0 (IEEE's and mpfr_sum's rule), which for
 * an all-zero line is (t H)_j s_j = -d with t_i = -1 where v_i is -0. At
 * d = 4096 a line costs about 50 k limb adds instead of the dense 4096
 * dot products of length 4096. */
#include "fwht_w.h"

#include "../base/base.h"
#include "../base/mpvec.h"
#include "../base/par.h"

#include <gmp.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

/* Widest integers the transform takes: 64 limbs (4096 bits) per entry, so
 * a line may span about 4000 bits of exponent; wider lines (and NaN, Inf)
 * take the dense dot products. */
enum { FW_MAX_LIMBS = 64 };

static atomic_ulong fw_dense_lines;

unsigned long _cic_xf_fwht_dense_lines(void)
{
    return (unsigned long)atomic_load(&fw_dense_lines);
}

/* A thread's scratch: the line as integers (d entries of L limbs, L up to
 * FW_MAX_LIMBS), a temporary entry, the K mixing sums, Q's column for the
 * dense fallback and its dot scratch. */
typedef unsigned __int128 u128;

typedef struct {
    mp_limb_t *z, *tmp, *acc;
    u128 *w, *wacc; /* the line and the K sums while L <= 2 */
    mpfr_t *qcol;
    mpfr_t r;
    mpz_t big;
    cic_dot_scratch dot;
    int d, K, L;
    mpfr_exp_t e;
    bool ok;
} fws;

static void fws_clear(fws *s)
{
    if (s->ok) {
        mpfr_clear(s->r);
        mpz_clear(s->big);
        cic_dot_scratch_clear(&s->dot);
    }
    cic_mpvec_destroy(s->qcol, (size_t)s->d);
    free(s->z);
    free(s->tmp);
    free(s->acc);
    free(s->w);
    free(s->wacc);
    memset(s, 0, sizeof *s);
}

/* dp: the widest precision of the inputs and the output (the dot scratch's). */
static int fws_init(fws *s, const cic_xf_hq *h, mpfr_prec_t p, mpfr_prec_t dp)
{
    size_t d = (size_t)h->d;
    memset(s, 0, sizeof *s);
    s->d = h->d;
    s->K = h->K;
    s->z = cic_calloc(d * FW_MAX_LIMBS, sizeof *s->z);
    s->tmp = cic_calloc(FW_MAX_LIMBS, sizeof *s->tmp);
    s->acc = cic_calloc((size_t)h->K * FW_MAX_LIMBS, sizeof *s->acc);
    s->qcol = cic_mpvec_create(d, p);
    s->w = cic_calloc(d, sizeof *s->w);
    s->wacc = cic_calloc((size_t)h->K, sizeof *s->wacc);
    if (!s->z || !s->tmp || !s->acc || !s->qcol || !s->w || !s->wacc || cic_dot_scratch_init(&s->dot, d, dp) < 0) {
        fws_clear(s);
        return -1;
    }
    mpfr_init2(s->r, p);
    mpz_init(s->big);
    s->ok = true;
    /* Q's entries are +-r, r = 1/sqrt(d) correctly rounded (qmat.c) */
    mpfr_set_ui(s->r, (unsigned long)h->d, MPFR_RNDN);
    mpfr_rec_sqrt(s->r, s->r, MPFR_RNDN);
    return 0;
}

/* a, b := a + b, a - b on L-limb two's complement integers (wrapping, so
 * exact while the results fit). */
static void butterfly(mp_limb_t *a, mp_limb_t *b, mp_limb_t *t, int L)
{
    if (L == 1) {
        mp_limb_t x = a[0], y = b[0];
        a[0] = x + y;
        b[0] = x - y;
        return;
    }
    mpn_add_n(t, a, b, L);
    mpn_sub_n(b, a, b, L);
    memcpy(a, t, (size_t)L * sizeof *t);
}

/* fwht_int for L <= 2 on 128-bit words (wrapping adds: two's complement
 * mod 2^128, exact since |u_j| < 2^127): no call per add. */
static void fwht_u128(fws *s, const signed char *hk)
{
    int d = s->d, K = s->K, P = d / K, L = s->L, len, j, k, a, c, e;
    u128 *w = s->w;
    for (j = 0; j < d; j++) { /* sign-extended from L limbs */
        const mp_limb_t *z = s->z + (size_t)j * L;
        w[j] = L == 2 ? (u128)z[1] << 64 | z[0] : (u128)(__int128)(int64_t)z[0];
    }
    for (len = 1; len < P; len <<= 1)
        for (j = 0; j < d; j += 2 * len)
            for (k = j; k < j + len; k++) {
                u128 x = w[k], y = w[k + len];
                w[k] = x + y;
                w[k + len] = x - y;
            }
    for (e = 0; K > 1 && e < P; e++) {
        for (c = 0; c < K; c++) {
            u128 acc = w[e];
            for (a = 1; a < K; a++)
                acc = hk[(size_t)a * K + c] > 0 ? acc + w[(size_t)a * P + e]
                                                : acc - w[(size_t)a * P + e];
            s->wacc[c] = acc;
        }
        for (c = 0; c < K; c++)
            w[(size_t)c * P + e] = s->wacc[c];
    }
    for (j = 0; j < d; j++) {
        mp_limb_t *z = s->z + (size_t)j * L;
        z[0] = (mp_limb_t)w[j];
        if (L == 2)
            z[1] = (mp_limb_t)(w[j] >> 64);
    }
}

/* z := z H, H = hk (x) Syl_P: butterflies of lengths 1 .. P/2 inside each
 * block of P, then output block c = sum_a hk[a][c] block a (the order of
 * integer adds does not matter: they are exact). */
static void fwht_int(fws *s, const signed char *hk)
{
    int d = s->d, K = s->K, P = d / K, L = s->L, len, j, k, a, c, e;
    size_t Lz = (size_t)L;
    mp_limb_t *z = s->z;
    if (L <= 2 && GMP_NUMB_BITS == 64) {
        fwht_u128(s, hk);
        return;
    }
    for (len = 1; len < P; len <<= 1)
        for (j = 0; j < d; j += 2 * len)
            for (k = j; k < j + len; k++)
                butterfly(z + (size_t)k * Lz, z + (size_t)(k + len) * Lz, s->tmp, L);
    for (e = 0; K > 1 && e < P; e++) {
        for (c = 0; c < K; c++) {
            mp_limb_t *acc = s->acc + (size_t)c * Lz;
            memcpy(acc, z + (size_t)e * Lz, Lz * sizeof *acc);
            for (a = 1; a < K; a++) {
                const mp_limb_t *x = z + ((size_t)a * P + e) * Lz;
                if (hk[(size_t)a * K + c] > 0)
                    mpn_add_n(acc, acc, x, L);
                else
                    mpn_sub_n(acc, acc, x, L);
            }
        }
        for (c = 0; c < K; c++)
            memcpy(z + ((size_t)c * P + e) * Lz, s->acc + (size_t)c * Lz, Lz * sizeof *z);
    }
}

/* The line's scale: s->e = its lowest set bit, s->L the limbs u needs.
 * 1 when every entry is zero, 2 when the line needs the dense products
 * (NaN, Inf, too wide), else 0. */
static int line_scale(fws *s, const mpfr_t *v, size_t is)
{
    mpfr_exp_t lo = 0, hi = 0;
    bool any = false;
    int i, lg = 0;
    double bits;
    for (i = 0; i < s->d; i++) {
        mpfr_srcptr x = v[(size_t)i * is];
        mpfr_exp_t e;
        if (!mpfr_number_p(x))
            return 2;
        if (mpfr_zero_p(x))
            continue;
        e = mpfr_get_z_2exp(s->big, x);
        e += (mpfr_exp_t)mpz_scan1(s->big, 0); /* the lowest set bit */
        if (!any || e < lo)
            lo = e;
        if (!any || mpfr_get_exp(x) > hi)
            hi = mpfr_get_exp(x); /* |x| < 2^hi */
        any = true;
    }
    if (!any)
        return 1;
    while ((1L << lg) < s->d)
        lg++;
    /* |u_j| <= d 2^(hi - lo) - 1 < 2^(hi - lo + lg), plus a sign bit */
    bits = (double)hi - (double)lo + lg + 1;
    if (bits > 64.0 * FW_MAX_LIMBS)
        return 2;
    s->e = lo;
    s->L = (int)((bits + 63) / 64);
    return 0;
}

/* Entry i of the line as z_i = v_i 2^-e in L limbs, two's complement. */
static void pack_entry(fws *s, int i, mpfr_srcptr x)
{
    size_t L = (size_t)s->L, n;
    mp_limb_t *z = s->z + (size_t)i * L;
    mpfr_exp_t e;
    memset(z, 0, L * sizeof *z);
    if (mpfr_zero_p(x))
        return;
    e = mpfr_get_z_2exp(s->big, x);
    if (e >= s->e) /* exact either way: e + its trailing zeros >= s->e */
        mpz_mul_2exp(s->big, s->big, (mp_bitcnt_t)(e - s->e));
    else
        mpz_tdiv_q_2exp(s->big, s->big, (mp_bitcnt_t)(s->e - e));
    n = mpz_size(s->big);
    CIC_ASSERT(n <= L);
    memcpy(z, mpz_limbs_read(s->big), n * sizeof *z);
    if (mpz_sgn(s->big) < 0)
        mpn_neg(z, z, (mp_size_t)L);
}

/* out := s_j RN(r u_j) 2^e for u_j != 0 (z_j its L limbs); false for 0. */
static bool round_entry(fws *s, mpfr_ptr out, const mp_limb_t *z, int sj)
{
    mp_size_t n = s->L;
    bool neg = (z[n - 1] >> (GMP_NUMB_BITS - 1)) != 0;
    mpz_t u;
    if (neg)
        mpn_neg(s->tmp, z, n);
    else
        memcpy(s->tmp, z, (size_t)n * sizeof *z);
    while (n > 0 && s->tmp[n - 1] == 0)
        n--;
    if (n == 0)
        return false;
    mpfr_mul_z(out, s->r, mpz_roinit_n(u, s->tmp, neg ? -n : n), MPFR_RNDN);
    mpfr_mul_2si(out, out, s->e, MPFR_RNDN); /* exact */
    if (sj < 0)
        mpfr_neg(out, out, MPFR_RNDN);
    return true;
}

/* Output j of the line as the dense product forms it: the correctly
 * rounded dot product with Q's column j. */
static void by_column(fws *s, const cic_xf_hq *h, mpfr_ptr out, const mpfr_t *v, size_t is, int j)
{
    size_t P = (size_t)(h->d / h->K);
    int i;
    for (i = 0; i < h->d; i++) {
        mpfr_set(s->qcol[i], s->r, MPFR_RNDN);
        if (cic_hadamard_kron_entry(h->hk, (size_t)h->K, P, (size_t)i, (size_t)j) * h->sign[j] < 0)
            mpfr_neg(s->qcol[i], s->qcol[i], MPFR_RNDN);
    }
    cic_mp_dot(out, v, is, (const mpfr_t *)s->qcol, 1, (size_t)h->d, NULL, &s->dot);
}

/* An all-zero line: out_j = -0 when every product v_i Q[i][j] is -0,
 * that is (t H)_j s_j = -d for t_i = -1 where v_i is -0, +1 where +0. */
static void zero_line(fws *s, const cic_xf_hq *h, mpfr_t *out, size_t os, const mpfr_t *v,
                      size_t is)
{
    int i;
    s->L = 1;
    for (i = 0; i < s->d; i++)
        s->z[i] = mpfr_signbit(v[(size_t)i * is]) ? (mp_limb_t)-1 : 1;
    fwht_int(s, h->hk);
    for (i = 0; i < s->d; i++) {
        long u = (long)s->z[i] * h->sign[i];
        mpfr_set_zero(out[(size_t)i * os], u == -(long)s->d ? -1 : 1);
    }
}

/* One line: v (stride is) times Q into out (stride os). */
static void one_line(fws *s, const cic_xf_hq *h, mpfr_t *out, size_t os, const mpfr_t *v,
                     size_t is)
{
    int i, how = line_scale(s, v, is);
    if (how == 1) {
        zero_line(s, h, out, os, v, is);
        return;
    }
    if (how == 2) {
        atomic_fetch_add(&fw_dense_lines, 1);
        for (i = 0; i < s->d; i++)
            by_column(s, h, out[(size_t)i * os], v, is, i);
        return;
    }
    for (i = 0; i < s->d; i++)
        pack_entry(s, i, v[(size_t)i * is]);
    fwht_int(s, h->hk);
    for (i = 0; i < s->d; i++)
        if (!round_entry(s, out[(size_t)i * os], s->z + (size_t)i * s->L, h->sign[i]))
            mpfr_set_zero(out[(size_t)i * os], 1); /* products cancel: +0 (RNDN) */
}

typedef struct {
    mpfr_t *dst;
    const mpfr_t *src;
    size_t ls, is;
    const cic_xf_hq *h;
    mpfr_prec_t p, dp;
    int rc[CIC_PAR_MAX];
} fwjob;

/* Lines [lo, hi) (share t). */
static void lines(void *ctx, size_t lo, size_t hi, int t)
{
    fwjob *J = ctx;
    fws s;
    size_t l;
    if (fws_init(&s, J->h, J->p, J->dp) < 0) {
        J->rc[t] = -1;
        return;
    }
    for (l = lo; l < hi; l++)
        one_line(&s, J->h, J->dst + l * J->ls, J->is, J->src + l * J->ls, J->is);
    fws_clear(&s);
}

int _cic_xf_fwht_lines(mpfr_t *dst, const mpfr_t *src, size_t n, size_t ls, size_t is,
                       const cic_xf_hq *h, mpfr_prec_t p, int threads)
{
    fwjob J = {dst, src, ls, is, h, p, p, {0}};
    size_t l;
    int i, t, rc = 0;
    CIC_ASSERT(h->d >= 1 && h->K >= 1 && h->d % h->K == 0);
    for (l = 0; l < n; l++) /* the dot scratch of the dense fallback */
        for (i = 0; i < h->d; i++)
            if (mpfr_get_prec(src[l * ls + (size_t)i * is]) > J.dp)
                J.dp = mpfr_get_prec(src[l * ls + (size_t)i * is]);
    /* below about a million operations (an entry costs about 20) a
     * thread costs more than it saves */
    if ((double)n * h->d * 20.0 < 1e6)
        threads = 1;
    cic_par_ranges(n, threads > 0 ? threads : cic_rt_matmul_threads(NULL), lines, &J);
    for (t = 0; t < CIC_PAR_MAX; t++)
        rc = J.rc[t] < 0 ? -1 : rc;
    return rc;
}
