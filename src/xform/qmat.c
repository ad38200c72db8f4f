/* SPDX-License-Identifier: MIT */
/* qmat.c: the orthogonal matrices of the residual-stream rotation (qmat.h,
 * DESIGN.md section 2): Haar-random Q by Householder QR of a Gaussian matrix,
 * randomized Hadamard, the identity, and the orthogonality check.
 *
 * Everything runs in MPFR with every temporary at the caller's precision and
 * round-to-nearest, so prec 24 and 53 replay float32 and float64 code step by
 * step (except that inner products go through cic_mp_dot and are correctly
 * rounded, which is at least as accurate as any float loop). Sizes are the
 * model widths, d up to a few thousand; the QR costs about 4/3 d^3 MPFR
 * multiply-adds, a few seconds at d = 256 and prec 128. */
#include "qmat.h"

#include "base/base.h"
#include "base/mpvec.h"
#include "base/rng.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

/* Entries must carry exactly prec bits: cic_mp_dot's scratch is sized for it
 * and prec 24/53 must mean float/double storage. Checked on the first entry
 * only, since the whole array comes from one allocation in practice. */
static void _cic_q_check(const mpfr_t *q, int d, mpfr_prec_t prec)
{
    CIC_ASSERT(q != NULL);
    CIC_ASSERT(d >= 1);
    CIC_ASSERT(prec >= MPFR_PREC_MIN && prec <= MPFR_PREC_MAX / 2);
    CIC_ASSERT(mpfr_get_prec(q[0]) == prec);
    CIC_ASSERT(cic_mul_size((size_t)d, (size_t)d) != SIZE_MAX);
}

void cic_q_identity(mpfr_t *q, int d)
{
    int i, j;
    CIC_ASSERT(q != NULL && d >= 0);
    for (i = 0; i < d; i++)
        for (j = 0; j < d; j++)
            mpfr_set_si(q[(size_t)i * d + j], i == j, MPFR_RNDN);
}

/* ---- Haar-random Q ---------------------------------------------------- */

/* Householder QR in place, LAPACK dgeqr2 style. On return column k of a holds
 * the Householder vector v_k in rows k..d-1 (v_k[0] is not normalised to 1),
 * tau[k] = v_k^T v_k / 2 so that H_k = I - v_k v_k^T / tau[k], and rneg[k]
 * says whether R_kk < 0. When the part of column k below the diagonal is
 * already zero, H_k = I (tau[k] = 0) and R_kk is the diagonal entry itself,
 * so a 1 x 1 trailing block is never "reflected" through rounding noise. The
 * part of R above the diagonal is computed too (rows k, columns > k) but not
 * needed by the caller. */
static void _cic_q_householder_qr(mpfr_t *a, mpfr_t *tau, unsigned char *rneg,
                                  int d, mpfr_t *t, cic_dot_scratch *s)
{
    /* t[0]: norm, t[1]: w = v^T a_j, t[2]: f = w / tau, t[3]: f * v_i */
    size_t n = (size_t)d;
    size_t k, i, j;
    for (k = 0; k < n; k++) {
        mpfr_t *x = &a[k * n + k]; /* column k from the diagonal, stride n */
        size_t m = n - k;
        int below_zero = 1;
        for (i = 1; i < m; i++)
            if (!mpfr_zero_p(x[i * n])) {
                below_zero = 0;
                break;
            }
        if (below_zero) {
            mpfr_set_zero(tau[k], 1);
            rneg[k] = mpfr_sgn(x[0]) < 0;
            continue;
        }
        /* ||x|| (one rounding for the sum of squares, one for the root) */
        cic_mp_dot(t[0], x, n, x, n, m, NULL, s);
        mpfr_sqrt(t[0], t[0], MPFR_RNDN);
        /* alpha = -sign(x0) ||x|| (sign(+-0) = +1, as in dlarfg), and
         * v0 = x0 - alpha = x0 + sign(x0) ||x||: same signs, no cancellation.
         * R_kk = alpha, whose sign is the opposite of x0's. */
        if (mpfr_signbit(x[0])) {
            rneg[k] = 0;
            mpfr_sub(x[0], x[0], t[0], MPFR_RNDN);
        } else {
            rneg[k] = 1;
            mpfr_add(x[0], x[0], t[0], MPFR_RNDN);
        }
        /* tau = v^T v / 2 from the stored v itself, so H_k is the exact
         * reflection along the vector held (up to tau's one rounding) */
        cic_mp_dot(tau[k], x, n, x, n, m, NULL, s);
        mpfr_div_2ui(tau[k], tau[k], 1, MPFR_RNDN);
        /* a_j -= (v^T a_j / tau) v for the trailing columns */
        for (j = k + 1; j < n; j++) {
            mpfr_t *y = &a[k * n + j];
            cic_mp_dot(t[1], x, n, y, n, m, NULL, s);
            mpfr_div(t[2], t[1], tau[k], MPFR_RNDN);
            for (i = 0; i < m; i++) {
                /* two roundings, as float code without FMA contraction */
                mpfr_mul(t[3], t[2], x[i * n], MPFR_RNDN);
                mpfr_sub(y[i * n], y[i * n], t[3], MPFR_RNDN);
            }
        }
    }
}

/* q = H_0 H_1 ... H_{d-1} by backward accumulation (each H_k touches rows and
 * columns k..d-1 only, and those columns of the partial product are zero
 * outside rows k..d-1), then column k negated where R_kk < 0. */
static void _cic_q_householder_form(mpfr_t *q, const mpfr_t *a,
                                    const mpfr_t *tau,
                                    const unsigned char *rneg, int d,
                                    mpfr_t *t, cic_dot_scratch *s)
{
    size_t n = (size_t)d;
    size_t k, i, j;
    cic_q_identity(q, d);
    for (k = n; k-- > 0;) {
        const mpfr_t *v = &a[k * n + k];
        size_t m = n - k;
        if (mpfr_zero_p(tau[k]))
            continue;
        for (j = k; j < n; j++) {
            mpfr_t *y = &q[k * n + j];
            cic_mp_dot(t[1], v, n, y, n, m, NULL, s);
            mpfr_div(t[2], t[1], tau[k], MPFR_RNDN);
            for (i = 0; i < m; i++) {
                mpfr_mul(t[3], t[2], v[i * n], MPFR_RNDN);
                mpfr_sub(y[i * n], y[i * n], t[3], MPFR_RNDN);
            }
        }
    }
    /* Haar sign fix: Q diag(sign R_kk), exact */
    for (k = 0; k < n; k++)
        if (rneg[k])
            for (i = 0; i < n; i++)
                mpfr_neg(q[i * n + k], q[i * n + k], MPFR_RNDN);
}

int cic_q_random(mpfr_t *q, int d, uint64_t seed, mpfr_prec_t prec)
{
    size_t n, nn, i;
    uint64_t key;
    mpfr_t *a = NULL, *tau = NULL, *t = NULL;
    unsigned char *rneg = NULL;
    cic_dot_scratch s = { 0 }; /* clearing a zeroed scratch is a no-op */
    int rc = -1;

    _cic_q_check(q, d, prec);
    n = (size_t)d;
    nn = n * n;
    a = cic_mpvec_create(nn, prec);
    tau = cic_mpvec_create(n, prec);
    t = cic_mpvec_create(4, prec);
    rneg = cic_calloc(n, 1);
    if (!a || !tau || !t || !rneg)
        goto cleanup;
    if (cic_dot_scratch_init(&s, n, prec) != 0)
        goto cleanup;

    /* G[i][j] = normal number i*d + j of the "q.random" stream, rounded once
     * to prec (from prec + 32 bits): every precision samples the same G */
    key = cic_rng_key(seed, "q.random");
    for (i = 0; i < nn; i++)
        cic_rng_normal_mp(a[i], key, i);

    _cic_q_householder_qr(a, tau, rneg, d, t, &s);
    _cic_q_householder_form(q, a, tau, rneg, d, t, &s);
    rc = 0;

cleanup:
    if (rc != 0)
        cic_q_identity(q, d); /* a defined state, never half a Q */
    cic_dot_scratch_clear(&s);
    cic_mpvec_destroy(a, nn);
    cic_mpvec_destroy(tau, n);
    cic_mpvec_destroy(t, 4);
    free(rneg);
    return rc;
}

/* ---- randomized Hadamard ---------------------------------------------- */

/* A Hadamard matrix of order d = K * 2^k is built as the Kronecker product
 * H_K (x) Sylvester(2^k), with H_K a base matrix of order K from:
 *   K = 1: the 1 x 1 matrix (d a power of two, plain Sylvester);
 *   Paley I: K = q + 1, q a prime power = 3 mod 4;
 *   Paley II: K = 2 (q + 1), q a prime power = 1 mod 4;
 *   Williamson: K = 4n, n = 39 or 43 (K = 156, 172), from four symmetric
 *     circulants of order n given as data (cic_williamson below);
 * with the quadratic character of GF(q) computed here (GF(p^m) arithmetic
 * modulo an irreducible polynomial found by trial division). Of all the
 * splits of d the smallest K with a Sylvester or Paley base is taken (the
 * fast transform costs about d (log2 P + K)), and only when there is none
 * the smallest Williamson K (see _cic_hadamard_order). Every base is
 * normalized: row 0 and column 0 all +1, so Q[0][j] = s_j / sqrt(d). */

/* GF(q), q = p^m: element = integer 0..q-1 whose base-p digits are the
 * coefficients of a polynomial of degree < m; products are reduced modulo
 * the monic irreducible f (f[m] = 1). */
typedef struct {
    int p, m, q;
    int f[32];
} cic_gf;

/* p^m = q with p prime (m >= 1), or 0 when q is not a prime power. */
static int _cic_prime_power(int q, int *p, int *m)
{
    int r, e = 0;
    if (q < 2)
        return 0;
    for (r = 2; (long)r * r <= q; r++)
        if (q % r == 0)
            break;
    if ((long)r * r > q)
        r = q; /* q prime */
    while (q % r == 0) {
        q /= r;
        e++;
    }
    if (q != 1)
        return 0;
    *p = r;
    *m = e;
    return 1;
}

/* a mod g in place over GF(p) (g monic of degree k); a has degree < na. */
static void _cic_poly_mod(int *a, int na, const int *g, int k, int p)
{
    int i, j;
    for (i = na - 1; i >= k; i--) {
        int c = a[i];
        if (c == 0)
            continue;
        for (j = 0; j <= k; j++)
            a[i - k + j] = ((a[i - k + j] - c * g[j]) % p + p) % p;
    }
}

/* Some monic irreducible polynomial of degree m over GF(p): the first in
 * lexicographic order of the low coefficients with no monic factor of
 * degree 1 .. m/2 (trial division). */
static void _cic_gf_init(cic_gf *F, int p, int m)
{
    long cand, ncand = 1;
    int i;
    CIC_ASSERT(m >= 1 && m < 31);
    F->p = p;
    F->m = m;
    F->q = 1;
    for (i = 0; i < m; i++)
        F->q *= p;
    ncand = F->q;
    for (cand = 0; cand < ncand; cand++) {
        int k, ok = 1;
        long c = cand;
        for (i = 0; i < m; i++, c /= p)
            F->f[i] = (int)(c % p);
        F->f[m] = 1;
        if (m > 1 && F->f[0] == 0)
            continue; /* divisible by x */
        for (k = 1; ok && 2 * k <= m; k++) {
            long gi, ng = 1;
            for (i = 0; i < k; i++)
                ng *= p;
            for (gi = 0; ok && gi < ng; gi++) {
                int g[32], a[32];
                long t = gi;
                for (i = 0; i < k; i++, t /= p)
                    g[i] = (int)(t % p);
                g[k] = 1;
                memcpy(a, F->f, sizeof(int) * (size_t)(m + 1));
                _cic_poly_mod(a, m + 1, g, k, p);
                ok = 0;
                for (i = 0; i < k; i++)
                    if (a[i] != 0)
                        ok = 1;
            }
        }
        if (ok)
            return;
    }
    CIC_ASSERT(0 && "no irreducible polynomial"); /* one always exists */
}

static int _cic_gf_sub(const cic_gf *F, int a, int b)
{
    int r = 0, w = 1, i;
    for (i = 0; i < F->m; i++, w *= F->p) {
        int da = a % F->p, db = b % F->p;
        a /= F->p;
        b /= F->p;
        r += ((da - db + F->p) % F->p) * w;
    }
    return r;
}

static int _cic_gf_mul(const cic_gf *F, int a, int b)
{
    int da[32], db[32], c[64] = { 0 }, i, j, r = 0, w = 1;
    for (i = 0; i < F->m; i++) {
        da[i] = a % F->p;
        db[i] = b % F->p;
        a /= F->p;
        b /= F->p;
    }
    for (i = 0; i < F->m; i++)
        for (j = 0; j < F->m; j++)
            c[i + j] = (c[i + j] + da[i] * db[j]) % F->p;
    _cic_poly_mod(c, 2 * F->m - 1, F->f, F->m, F->p);
    for (i = 0; i < F->m; i++, w *= F->p)
        r += c[i] * w;
    return r;
}

/* chi[a] = quadratic character of element a of GF(q): 0, +1 or -1. NULL on
 * allocation failure. */
static signed char *_cic_gf_chi(int q)
{
    cic_gf F;
    int p, m, a;
    signed char *chi;
    if (!_cic_prime_power(q, &p, &m))
        return NULL;
    chi = cic_calloc((size_t)q, 1);
    if (!chi)
        return NULL;
    _cic_gf_init(&F, p, m);
    for (a = 1; a < q; a++)
        chi[a] = -1;
    for (a = 1; a < q; a++)
        chi[_cic_gf_mul(&F, a, a)] = 1;
    return chi;
}

/* Williamson quadruples: the first rows of four symmetric circulant +-1
 * matrices A, B, C, D of order n ('+' = +1, entry j of row i of A is
 * a[(j - i) mod n]) with A^2 + B^2 + C^2 + D^2 = 4n I, so that the
 * Williamson array
 *     [ A  B  C  D]
 *     [-B  A -D  C]
 *     [-C  D  A -B]
 *     [-D -C  B  A]
 * is a Hadamard matrix of order 4n (symmetric circulants commute and equal
 * their transposes, which is all the array needs). The signs are transcribed
 * from the table of SageMath's williamson_type_quadruples_smallcases
 * (src/sage/combinat/matrices/hadamard_matrix.py), which cites for n = 43
 * M. Hall, Combinatorial Theory, 2nd ed., Wiley 1983, and for n = 39
 * S. London, Constructing new Turyn type sequences, T-sequences and
 * Hadamard matrices, PhD thesis, University of Illinois at Chicago, 2013.
 * _cic_williamson_check verifies the defining property before any use. Only
 * orders no Paley base covers are listed: 4n - 1 and 2n - 1 are not prime
 * powers for n = 39 (155, 77) nor n = 43 (171, 85). */
enum { CIC_WILLIAMSON_MAXN = 43 };
static const struct {
    int n;
    const char *row[4]; /* A, B, C, D */
} cic_williamson[] = {
    { 39,
      { "+++--+-+-----+--++----++--+-----+-+--++",
        "+++--++-+---+-+--+----+--+-+---+-++--++",
        "++++---+--++----+-+--+-+----++--+---+++",
        "+---++-+-+-----+++-++-+++-----+-+-++---" } },
    { 43,
      { "++---++++-+--+--++--------++--+--+-++++---+",
        "+++-+-++--+-+-++++-+----+-++++-+-+--++-+-++",
        "++-++++++----+-+--++-++-++--+-+----++++++-+",
        "+---++--++++-+-+++-++--++-+++-+-++++--++---" } },
};
#define CIC_NWILLIAMSON (sizeof cic_williamson / sizeof cic_williamson[0])

/* The index into cic_williamson of order K = 4n, or -1. */
static int _cic_williamson_find(int K)
{
    size_t i;
    for (i = 0; i < CIC_NWILLIAMSON; i++)
        if (4 * cic_williamson[i].n == K)
            return (int)i;
    return -1;
}

/* Checks quadruple i, in integers: each row of length n, only '+' and '-',
 * symmetric (x[j] = x[n - j]), and the periodic autocorrelations of the four
 * rows summing to 0 at every shift s = 1 .. n-1. For circulants that sum is
 * entry (0, s) of A A^T + B B^T + C C^T + D D^T, so the check is exactly
 * A^2 + B^2 + C^2 + D^2 = 4n I. O(n^2); a failure means a corrupt table, a
 * programmer error. */
static void _cic_williamson_check(int i)
{
    int n = cic_williamson[i].n, x[4][CIC_WILLIAMSON_MAXN], r, j, s;
    CIC_ASSERT(n >= 1 && n <= CIC_WILLIAMSON_MAXN);
    for (r = 0; r < 4; r++) {
        const char *row = cic_williamson[i].row[r];
        CIC_ASSERT(strlen(row) == (size_t)n);
        for (j = 0; j < n; j++) {
            CIC_ASSERT(row[j] == '+' || row[j] == '-');
            x[r][j] = row[j] == '+' ? 1 : -1;
        }
        for (j = 1; j < n; j++)
            CIC_ASSERT(x[r][j] == x[r][n - j]);
    }
    for (s = 1; s < n; s++) {
        long paf = 0;
        for (r = 0; r < 4; r++)
            for (j = 0; j < n; j++)
                paf += x[r][j] * x[r][(j + s) % n];
        CIC_ASSERT(paf == 0);
    }
}

enum {
    CIC_HAD_NONE,
    CIC_HAD_SYLVESTER,
    CIC_HAD_PALEY1,
    CIC_HAD_PALEY2,
    CIC_HAD_WILLIAMSON
};

/* How a base of order K is built (K = 1, a Paley order or a Williamson
 * order, tried in that order), or NONE. */
static int _cic_hadamard_kind(int K)
{
    int p, m;
    if (K == 1)
        return CIC_HAD_SYLVESTER;
    if (K < 4 || K % 4 != 0)
        return CIC_HAD_NONE;
    if (_cic_prime_power(K - 1, &p, &m)) /* K - 1 = 3 mod 4 */
        return CIC_HAD_PALEY1;
    if (K % 8 == 4 && _cic_prime_power(K / 2 - 1, &p, &m)) /* K/2 - 1 = 1 mod 4 */
        return CIC_HAD_PALEY2;
    if (_cic_williamson_find(K) >= 0)
        return CIC_HAD_WILLIAMSON;
    return CIC_HAD_NONE;
}

/* The base order K of d = K * 2^k, or 0 when there is none: the smallest K
 * with a Sylvester or Paley base, or failing that the smallest Williamson K.
 * Deterministic, and the same K as before the Williamson bases existed for
 * every d supported then (their bits are pinned by reference baselines):
 * 312 = 156 * 2 and 344 = 172 * 2 are Paley I orders (311 prime, 343 = 7^3),
 * so every proper multiple of 156 or 172 keeps its Paley base, and the
 * Williamson bases serve d = 156 and d = 172 alone. */
static int _cic_hadamard_order(int d)
{
    int K0, K, pass;
    if (d < 1)
        return 0;
    K0 = d;
    while (K0 % 2 == 0)
        K0 /= 2;
    for (pass = 0; pass < 2; pass++)
        for (K = K0; K <= d; K *= 2) {
            int kind = _cic_hadamard_kind(K);
            if (kind != CIC_HAD_NONE && (kind == CIC_HAD_WILLIAMSON) == (pass == 1))
                return K;
            if (K > INT_MAX / 2)
                break;
        }
    return 0;
}

/* Multiply rows, then columns, by -1 so that row 0 and column 0 are +1. */
static void _cic_hadamard_normalize(signed char *h, int K)
{
    int i, j;
    for (i = 0; i < K; i++)
        if (h[(size_t)i * K] < 0)
            for (j = 0; j < K; j++)
                h[(size_t)i * K + j] = (signed char)-h[(size_t)i * K + j];
    for (j = 0; j < K; j++)
        if (h[j] < 0)
            for (i = 0; i < K; i++)
                h[(size_t)i * K + j] = (signed char)-h[(size_t)i * K + j];
}

/* The Williamson array of quadruple w (order K = 4n): block (bi, bj) is
 * sign[bi][bj] times circulant number bi ^ bj of A, B, C, D. */
static void _cic_williamson_fill(signed char *h, int w)
{
    static const signed char sign[4][4] = {
        { 1, 1, 1, 1 }, { -1, 1, -1, 1 }, { -1, 1, 1, -1 }, { -1, -1, 1, 1 }
    };
    int n = cic_williamson[w].n, K = 4 * n, bi, bj, r, c;
    _cic_williamson_check(w);
    for (bi = 0; bi < 4; bi++)
        for (bj = 0; bj < 4; bj++) {
            const char *x = cic_williamson[w].row[bi ^ bj];
            for (r = 0; r < n; r++)
                for (c = 0; c < n; c++) {
                    int v = x[(c - r + n) % n] == '+' ? 1 : -1;
                    h[(size_t)(bi * n + r) * K + bj * n + c] =
                        (signed char)(sign[bi][bj] * v);
                }
        }
}

/* Fills h (K x K) for a K with a construction; 0, or -1 on allocation
 * failure. Elements of GF(q) are numbered 0..q-1 as in cic_gf.
 *   Paley I (q = K - 1 = 3 mod 4): S = [[0, 1^T], [-1, Q]] with
 *     Q[a][b] = chi(a - b), skew; H = I + S.
 *   Paley II (q = K/2 - 1 = 1 mod 4): C = [[0, 1^T], [1, Q]], symmetric
 *     conference matrix; H = C (x) [[1, 1], [1, -1]] + I (x) [[1, -1],
 *     [-1, -1]].
 *   Williamson (K = 4n): the array of _cic_williamson_fill. */
static int _cic_hadamard_fill(signed char *h, int K)
{
    int kind = _cic_hadamard_kind(K), q, i, j;
    signed char *chi = NULL;
    cic_gf F;
    int p, m;
    CIC_ASSERT(kind != CIC_HAD_NONE);
    if (kind == CIC_HAD_SYLVESTER) {
        h[0] = 1;
        return 0;
    }
    if (kind == CIC_HAD_WILLIAMSON) {
        _cic_williamson_fill(h, _cic_williamson_find(K));
        _cic_hadamard_normalize(h, K);
        return 0;
    }
    q = kind == CIC_HAD_PALEY1 ? K - 1 : K / 2 - 1;
    chi = _cic_gf_chi(q);
    if (!chi)
        return -1;
    CIC_ASSERT(_cic_prime_power(q, &p, &m));
    _cic_gf_init(&F, p, m);
    if (kind == CIC_HAD_PALEY1) {
        for (i = 0; i < K; i++)
            for (j = 0; j < K; j++) {
                int s;
                if (i == j)
                    s = 1;
                else if (i == 0)
                    s = 1;
                else if (j == 0)
                    s = -1;
                else
                    s = chi[_cic_gf_sub(&F, i - 1, j - 1)];
                h[(size_t)i * K + j] = (signed char)s;
            }
    } else {
        int n = q + 1;
        for (i = 0; i < n; i++)
            for (j = 0; j < n; j++) {
                int c, a, b;
                if (i == j)
                    c = 0;
                else if (i == 0 || j == 0)
                    c = 1;
                else
                    c = chi[_cic_gf_sub(&F, i - 1, j - 1)];
                for (a = 0; a < 2; a++)
                    for (b = 0; b < 2; b++) {
                        int v = c != 0 ? c * ((a & b) ? -1 : 1)
                                       : ((a | b) ? -1 : 1);
                        h[(size_t)(2 * i + a) * K + 2 * j + b] = (signed char)v;
                    }
            }
    }
    free(chi);
    _cic_hadamard_normalize(h, K);
    return 0;
}

/* Whether w = K * 2^k for a base order K >= 1 built here. */
static int _cic_hadamard_fits(int w, int K)
{
    int P;
    if (w < 1 || K < 1 || w % K != 0 || _cic_hadamard_kind(K) == CIC_HAD_NONE)
        return 0;
    P = w / K;
    return (P & (P - 1)) == 0;
}

int cic_hadamard_base_order_k(int w, int K)
{
    if (K == 0)
        return _cic_hadamard_order(w);
    return _cic_hadamard_fits(w, K) ? K : 0;
}

int cic_hadamard_base_k(signed char **hk, int K, int w)
{
    int k = cic_hadamard_base_order_k(w, K);
    signed char *h;
    *hk = NULL;
    if (k == 0)
        return -1;
    h = cic_calloc((size_t)k * k, 1);
    if (!h)
        return -1;
    if (_cic_hadamard_fill(h, k) < 0) {
        free(h);
        return -1;
    }
    *hk = h;
    return 0;
}

int cic_hadamard_base(signed char **hk, int *K, int w)
{
    int rc = cic_hadamard_base_k(hk, 0, w);
    *K = rc == 0 ? _cic_hadamard_order(w) : 0;
    return rc;
}

int cic_hadamard_base_order(int w)
{
    return _cic_hadamard_order(w);
}

/* The sizes in words, for the suggestion sentence. */
static const char cic_hadamard_sizes_text[] =
    "K * 2^k with K = 1, a Paley order (q + 1 for a prime power q = 3 mod 4, "
    "2(q + 1) for q = 1 mod 4: 12, 20, 28, 36, 44, 52, 60, ...) or a "
    "Williamson order (156, 172)";

int cic_q_hadamard_supported(int d)
{
    return _cic_hadamard_order(d) != 0;
}

int cic_q_hadamard_k_supported(int d, int K)
{
    return cic_hadamard_base_order_k(d, K) != 0;
}

void cic_q_hadamard_k_explain(char *buf, size_t cap, int d, int K)
{
    char allowed[160];
    size_t n = 0;
    long long k0 = d, k;
    if (cap == 0)
        return;
    allowed[0] = '\0';
    /* the orders d allows: odd part of d times 2^j, each with a base */
    while (k0 > 0 && k0 % 2 == 0)
        k0 /= 2;
    for (k = k0; d >= 1 && k <= d; k *= 2)
        if (_cic_hadamard_fits(d, (int)k) && n < sizeof allowed) {
            int w = snprintf(allowed + n, sizeof allowed - n, "%s%lld", n ? ", " : "", k);
            n += w > 0 ? (size_t)w : 0;
        }
    if (K < 1 || _cic_hadamard_kind(K) == CIC_HAD_NONE)
        n = (size_t)snprintf(buf, cap,
                             "%d has no Hadamard construction here (1, a Paley order or a "
                             "Williamson order)", K);
    else
        n = (size_t)snprintf(buf, cap, "%d is not %d * 2^k", d, K);
    if (n >= cap)
        return;
    if (allowed[0])
        snprintf(buf + n, cap - n, "; the base orders of %d are %s (or 0: automatic)", d,
                 allowed);
    else
        snprintf(buf + n, cap - n, "; %d has no Hadamard base order here", d);
}

void cic_q_hadamard_suggest(char *buf, size_t cap, int d)
{
    /* nearest supported below and above d (0: none) */
    long long below = 0, above = 0, n;
    if (cap == 0)
        return;
    for (n = (long long)d - 1; n >= 1; n--)
        if (_cic_hadamard_order((int)n)) {
            below = n;
            break;
        }
    for (n = d < 1 ? 1 : (long long)d + 1; n <= INT_MAX; n++)
        if (_cic_hadamard_order((int)n)) {
            above = n;
            break;
        }
    if (cic_q_hadamard_supported(d))
        snprintf(buf, cap, "%d is a supported Hadamard size (%s)", d,
                 cic_hadamard_sizes_text);
    else if (below && above)
        snprintf(buf, cap,
                 "supported Hadamard sizes here are %s; nearest: %lld and %lld",
                 cic_hadamard_sizes_text, below, above);
    else
        snprintf(buf, cap, "supported Hadamard sizes here are %s; nearest: %lld",
                 cic_hadamard_sizes_text, below ? below : above);
}

/* Entry (i, j) of H = H_K (x) Sylvester(P), +-1: H_K[i/P][j/P] times
 * Sylvester(P)[i%P][j%P] = (-1)^popcount((i%P) & (j%P)). */
static int _cic_hadamard_entry(const signed char *hk, size_t K, size_t P, size_t i, size_t j)
{
    int h = hk[(i / P) * K + j / P];
    return __builtin_parityll((unsigned long long)((i % P) & (j % P))) ? -h : h;
}

int cic_q_hadamard(mpfr_t *q, int d, uint64_t seed, mpfr_prec_t prec)
{
    return cic_q_hadamard_k(q, d, 0, seed, prec);
}

int cic_q_hadamard_k(mpfr_t *q, int d, int Kreq, uint64_t seed, mpfr_prec_t prec)
{
    signed char *hk = NULL;
    mpfr_t r;
    size_t n, K, P, i, j;
    uint64_t key;

    if (!cic_q_hadamard_k_supported(d, Kreq))
        return -1;
    _cic_q_check(q, d, prec);
    if (cic_hadamard_base_k(&hk, Kreq, d) < 0) {
        cic_q_identity(q, d); /* a defined state */
        return -1;
    }
    n = (size_t)d;
    K = (size_t)cic_hadamard_base_order_k(d, Kreq);
    P = n / K;

    /* 1/sqrt(d) correctly rounded; exact when d is a power of 4 */
    mpfr_init2(r, prec);
    mpfr_set_ui(r, (unsigned long)d, MPFR_RNDN);
    mpfr_rec_sqrt(r, r, MPFR_RNDN);

    /* Q[i][j] = H[i][j] * s_j / sqrt(d). s_j = -1 when bit 0 of the j-th
     * word of the "q.hadamard.signs" stream is set (whatever K). */
    key = cic_rng_key(seed, "q.hadamard.signs");
    for (j = 0; j < n; j++) {
        int sj = (cic_rng_u64(key, j) & 1) ? -1 : 1;
        for (i = 0; i < n; i++) {
            int h = _cic_hadamard_entry(hk, K, P, i, j) * sj;
            /* negation is exact: every entry is +-r bit for bit */
            mpfr_set(q[i * n + j], r, MPFR_RNDN);
            if (h < 0)
                mpfr_neg(q[i * n + j], q[i * n + j], MPFR_RNDN);
        }
    }
    mpfr_clear(r);
    free(hk);
    return 0;
}

/* ---- orthogonality ---------------------------------------------------- */

double cic_q_orth_error(const mpfr_t *q, int d, mpfr_prec_t prec)
{
    /* (Q^T Q)_ij = column i . column j: prec-bit inputs, so the scratch is
     * sized for prec and the products are exact; the sum minus delta_ij is
     * rounded once to 2*prec, far below the error being measured. */
    size_t n, i, j;
    cic_dot_scratch s;
    mpfr_t e, minus_one;
    double worst = 0.0;
    int nan = 0;

    _cic_q_check(q, d, prec);
    n = (size_t)d;
    if (cic_dot_scratch_init(&s, n, prec) != 0)
        return INFINITY; /* cannot vouch for anything */
    mpfr_init2(e, 2 * prec);
    mpfr_init2(minus_one, 2);
    mpfr_set_si(minus_one, -1, MPFR_RNDN);
    for (i = 0; i < n; i++) {
        for (j = i; j < n; j++) {
            double v;
            cic_mp_dot(e, &q[i], n, &q[j], n, n, i == j ? minus_one : NULL,
                       &s);
            mpfr_abs(e, e, MPFR_RNDN);
            v = mpfr_get_d(e, MPFR_RNDU); /* never understate the error */
            if (isnan(v))
                nan = 1;
            else if (v > worst)
                worst = v;
        }
    }
    mpfr_clear(e);
    mpfr_clear(minus_one);
    cic_dot_scratch_clear(&s);
    return nan ? NAN : worst; /* a NaN entry fails every bound */
}

/* ---- mean-preserving rotations (Q 1 = 1) -------------------------------- */

/* With Q 1 = 1 (and so 1^T Q = 1^T), x Q has the same mean as x and
 * (x - mean) Q = x Q - mean: LayerNorm commutes with Q without centering
 * the stream (DESIGN.md section 2).
 *   hadamard: Q = H^T D H / d with H = H_K (x) Sylvester(d / K) and
 *     D = diag(1, s_1, ..., s_{d-1}): H 1 = d e_0 (row 0 of H is all +1,
 *     the other rows are orthogonal to it), so Q 1 = H^T e_0 = 1. For
 *     K = 1 (the only base when hadamard_base is not given, d a power of
 *     two) H is symmetric and Q = Hn D Hn, Hn = H / sqrt(d). Every entry
 *     is an integer over d, exact at any precision for d a power of two.
 *   random: Q = P diag(1, R) P, R Haar-random of order d-1 and P the
 *     Householder reflection that swaps e_0 and 1/sqrt(d). */

/* The hadamard case, K >= 1 with (d, K) supported: entry (i, j) =
 * sum_k H[k][i] s_k H[k][j] in integers (|sum| <= d), divided by d with
 * one rounding. s_0 = 1, s_k = -1 when bit 0 of word k of the
 * "q.mean_preserving.signs" stream is set. 0, or -1 on allocation
 * failure. */
static int _cic_q_mean_preserving_hadamard(mpfr_t *q, int d, int K, uint64_t seed)
{
    size_t n = (size_t)d, Kz = (size_t)K, P = n / Kz, i, j, k;
    uint64_t key = cic_rng_key(seed, "q.mean_preserving.signs");
    signed char *hk = NULL, *s = cic_calloc(n, 1);
    if (!s || cic_hadamard_base_k(&hk, K, d) < 0) {
        free(s);
        return -1;
    }
    for (k = 0; k < n; k++)
        s[k] = (signed char)(k == 0 ? 1 : ((cic_rng_u64(key, k) & 1) ? -1 : 1));
    for (i = 0; i < n; i++)
        for (j = 0; j < n; j++) {
            long acc = 0;
            for (k = 0; k < n; k++)
                acc += (long)_cic_hadamard_entry(hk, Kz, P, k, i) * s[k] *
                       _cic_hadamard_entry(hk, Kz, P, k, j);
            mpfr_set_si(q[i * n + j], acc, MPFR_RNDN);
            mpfr_div_ui(q[i * n + j], q[i * n + j], (unsigned long)d, MPFR_RNDN);
        }
    free(hk);
    free(s);
    return 0;
}

int cic_q_mean_preserving(mpfr_t *q, int d, enum cic_qkind kind, uint64_t seed,
                          mpfr_prec_t prec)
{
    return cic_q_mean_preserving_k(q, d, kind, 0, seed, prec);
}

int cic_q_mean_preserving_k(mpfr_t *q, int d, enum cic_qkind kind, int K, uint64_t seed,
                            mpfr_prec_t prec)
{
    size_t n = (size_t)d, i, j;
    int rc = -1;
    _cic_q_check(q, d, prec);
    /* a forced base must fit even where Q is trivial (d = 1) */
    if (kind == CIC_Q_HADAMARD && K != 0 && !cic_q_hadamard_k_supported(d, K))
        return -1;
    if (kind == CIC_Q_IDENTITY || d == 1) {
        cic_q_identity(q, d);
        return 0;
    }
    if (kind == CIC_Q_HADAMARD) {
        /* automatic: d a power of two, the Sylvester matrix itself */
        if (K == 0 && (d & (d - 1)) != 0)
            return -1;
        if (_cic_q_mean_preserving_hadamard(q, d, K == 0 ? 1 : K, seed) < 0) {
            cic_q_identity(q, d);
            return -1;
        }
        return 0;
    }
    {
        /* random: M = diag(1, R); Q = P M P, P = I - 2 v v^T / (v^T v),
         * v = e_0 - u, u = 1/sqrt(d): P = I - v v^T / (1 - u_0) since
         * v^T v = 2 - 2 u_0 */
        mpfr_t *r = cic_mpvec_create((n - 1) * (n - 1), prec);
        mpfr_t *pm = cic_mpvec_create(n * n, prec), *t = cic_mpvec_create(n * n, prec);
        mpfr_t u, v0, den, tmp;
        cic_dot_scratch s;
        bool sc = false;
        mpfr_inits2(prec, u, v0, den, tmp, (mpfr_ptr)0);
        if (!r || !pm || !t || cic_dot_scratch_init(&s, n, prec) < 0)
            goto done;
        sc = true;
        if (cic_q_random(r, d - 1, seed, prec) < 0)
            goto done;
        mpfr_set_ui(u, (unsigned long)d, MPFR_RNDN);
        mpfr_rec_sqrt(u, u, MPFR_RNDN);   /* u_i = 1/sqrt(d) */
        mpfr_ui_sub(v0, 1, u, MPFR_RNDN); /* v_0 = 1 - u; v_i = -u */
        mpfr_set(den, v0, MPFR_RNDN);     /* v^T v / 2 = 1 - u_0 */
        for (i = 0; i < n; i++)
            for (j = 0; j < n; j++) {
                mpfr_srcptr vi = i == 0 ? v0 : NULL, vj = j == 0 ? v0 : NULL;
                /* P_ij = delta_ij - v_i v_j / den */
                if (vi && vj)
                    mpfr_sqr(tmp, v0, MPFR_RNDN);
                else if (vi || vj) {
                    mpfr_mul(tmp, v0, u, MPFR_RNDN);
                    mpfr_neg(tmp, tmp, MPFR_RNDN);
                } else
                    mpfr_sqr(tmp, u, MPFR_RNDN);
                mpfr_div(tmp, tmp, den, MPFR_RNDN);
                mpfr_ui_sub(pm[i * n + j], i == j ? 1 : 0, tmp, MPFR_RNDN);
            }
        /* t = P diag(1, R): column 0 of P, then P[:, 1:] R */
        for (i = 0; i < n; i++) {
            mpfr_set(t[i * n], pm[i * n], MPFR_RNDN);
            for (j = 1; j < n; j++)
                cic_mp_dot(t[i * n + j], (const mpfr_t *)pm + i * n + 1, 1,
                           (const mpfr_t *)r + (j - 1), n - 1, n - 1, NULL, &s);
        }
        /* q = t P */
        for (i = 0; i < n; i++)
            for (j = 0; j < n; j++)
                cic_mp_dot(q[i * n + j], (const mpfr_t *)t + i * n, 1,
                           (const mpfr_t *)pm + j, n, n, NULL, &s);
        rc = 0;
    done:
        if (sc)
            cic_dot_scratch_clear(&s);
        mpfr_clears(u, v0, den, tmp, (mpfr_ptr)0);
        cic_mpvec_destroy(r, (n - 1) * (n - 1));
        cic_mpvec_destroy(pm, n * n);
        cic_mpvec_destroy(t, n * n);
        if (rc < 0)
            cic_q_identity(q, d);
        return rc;
    }
}
