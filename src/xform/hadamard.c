/* SPDX-License-Identifier: MIT */
/* hadamard.c: the base matrices H_K of the Hadamard matrices of qmat.h
 * (Sylvester, Paley I and II over GF(q), Williamson), the orders they serve,
 * and the messages that name the supported sizes. qmat.c builds the
 * randomized Hadamard Q from them; the engines' fast transform reads the
 * same bases. Integer arithmetic only. */
#include "qmat.h"

#include "base/base.h"

#include <limits.h>
#include <stdio.h>
#include <string.h>
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

/* The base order K of d = K * 2^k, or 0 when there is none: the K with a
 * construction here (Sylvester, Paley, Williamson) whose fast transform
 * costs the fewest FLOPs. Per value of a row that is log2(d / K) butterfly
 * stages and K - 1 adds mixing the K blocks (cic_op_flops_fwht), and
 * doubling K saves one stage but adds K, so the smallest K with any
 * construction is the cheapest. d = 11008 = 172 * 64 thus gets the
 * Williamson base 172 (as QuaRot uses), not the Paley base 344 (1.96x the
 * FLOPs); 2560 = 20 * 128 keeps Paley II 20, cheaper
 * than QuaRot's 40. Before, a Williamson base served only d = 156 and 172
 * themselves; for every other supported d the choice is unchanged. */
static int _cic_hadamard_order(int d)
{
    int K;
    if (d < 1)
        return 0;
    K = d;
    while (K % 2 == 0)
        K /= 2;
    for (; K <= d; K *= 2) {
        if (_cic_hadamard_kind(K) != CIC_HAD_NONE)
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
