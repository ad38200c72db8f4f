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
#include "xform_util.h"

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

/* ---- randomized Hadamard (the bases: hadamard.c; the entries of
 * H_K (x) Sylvester(P): cic_hadamard_kron_entry, base/mpvec.h) ------------ */

/* s_j = -1 when bit 0 of the j-th word of the "q.hadamard.signs" stream
 * is set (whatever K). */
static int hadamard_sign(uint64_t key, size_t j)
{
    return (cic_rng_u64(key, j) & 1) ? -1 : 1;
}

int cic_q_hadamard_signs(signed char *s, int d, uint64_t seed)
{
    uint64_t key = cic_rng_key(seed, "q.hadamard.signs");
    int j;
    for (j = 0; j < d; j++)
        s[j] = (signed char)hadamard_sign(key, (size_t)j);
    return 0;
}

int cic_q_hadamard(mpfr_t *q, int d, uint64_t seed, mpfr_prec_t prec)
{
    return cic_q_hadamard_k(q, d, 0, seed, prec);
}

/* The entries of a Hadamard Q being filled: H = hk (x) Syl(2^lg) (order
 * K 2^lg = n), signs s, every entry +-r (MPFR) or +-rd (doubles). */
typedef struct {
    mpfr_t *q;
    double *qd;
    const signed char *hk, *s;
    size_t n, K;
    unsigned lg;
    mpfr_srcptr r;
    double rd;
} hfill;

/* Rows [lo, hi) of Q. */
static int hadamard_rows(void *p, int lo, int hi)
{
    const hfill *F = p;
    size_t n = F->n, pm = ((size_t)1 << F->lg) - 1, i, j;
    for (i = (size_t)lo; i < (size_t)hi; i++)
        for (j = 0; j < n; j++) {
            /* cic_hadamard_kron_entry(hk, K, P, i, j) with shifts and
             * masks for its divisions (121 M entries at d = 11008) */
            int h = F->hk[(i >> F->lg) * F->K + (j >> F->lg)] * F->s[j];
            if (__builtin_parityll((unsigned long long)(i & j & pm)))
                h = -h;
            if (!F->q) {
                F->qd[i * n + j] = h < 0 ? -F->rd : F->rd;
                continue;
            }
            /* negation is exact: every entry is +-r bit for bit */
            mpfr_set(F->q[i * n + j], F->r, MPFR_RNDN);
            if (h < 0)
                mpfr_neg(F->q[i * n + j], F->q[i * n + j], MPFR_RNDN);
        }
    return 0;
}

/* Q[i][j] = H[i][j] s_j / sqrt(d) into q (MPFR at prec) or, q NULL, qd
 * (doubles: prec 53, the same values); rows split over threads (each
 * entry is set alone). */
static int hadamard_fill(mpfr_t *q, double *qd, int d, int Kreq, uint64_t seed, mpfr_prec_t prec)
{
    signed char *hk = NULL, *s = NULL;
    mpfr_t r;
    hfill F;
    size_t P;

    if (!cic_q_hadamard_k_supported(d, Kreq))
        return -1;
    if (q)
        _cic_q_check(q, d, prec);
    if (cic_hadamard_base_k(&hk, Kreq, d) < 0 || !(s = cic_calloc((size_t)d, 1))) {
        if (q)
            cic_q_identity(q, d); /* a defined state */
        free(hk);
        return -1;
    }
    cic_q_hadamard_signs(s, d, seed);
    F.q = q;
    F.qd = qd;
    F.hk = hk;
    F.s = s;
    F.n = (size_t)d;
    F.K = (size_t)cic_hadamard_base_order_k(d, Kreq);
    P = F.n / F.K;
    CIC_ASSERT((P & (P - 1)) == 0);
    F.lg = (unsigned)__builtin_ctzll((unsigned long long)P);

    /* 1/sqrt(d) correctly rounded; exact when d is a power of 4 */
    mpfr_init2(r, prec);
    mpfr_set_ui(r, (unsigned long)d, MPFR_RNDN);
    mpfr_rec_sqrt(r, r, MPFR_RNDN);
    F.r = r;
    F.rd = mpfr_get_d(r, MPFR_RNDN);
    /* Q builders are pure functions of (d, seed, prec), also called with
     * no run at hand: the rows over one share per online core (the bits
     * do not depend on it) */
    (void)_cic_xf_par(d, (double)d * d, 0, hadamard_rows, &F);
    mpfr_clear(r);
    free(hk);
    free(s);
    return 0;
}

int cic_q_hadamard_k(mpfr_t *q, int d, int Kreq, uint64_t seed, mpfr_prec_t prec)
{
    return hadamard_fill(q, NULL, d, Kreq, seed, prec);
}

int cic_q_hadamard_k_f64(double *q, int d, int Kreq, uint64_t seed)
{
    return hadamard_fill(NULL, q, d, Kreq, seed, 53);
}

int cic_q_regular_hadamard(mpfr_t *q, int d, uint64_t seed, mpfr_prec_t prec)
{
    int k = cic_regular_order_k(d), i, j;
    uint64_t key;
    mpfr_t r;
    if (k == 0)
        return -1;
    _cic_q_check(q, d, prec);
    mpfr_init2(r, prec);
    mpfr_set_ui(r, (unsigned long)d, MPFR_RNDN);
    mpfr_rec_sqrt(r, r, MPFR_RNDN); /* 2^-k: exact */
    key = cic_rng_key(seed, "q.hadamard.signs");
    for (j = 0; j < d; j++) {
        int sj = (cic_rng_u64(key, (uint64_t)j) & 1) ? -1 : 1;
        for (i = 0; i < d; i++) {
            int h = (((k - cic_regular_nz(i ^ j)) & 1) ? -1 : 1) * sj;
            mpfr_ptr e = q[(size_t)i * d + j];
            mpfr_set(e, r, MPFR_RNDN);
            if (h < 0)
                mpfr_neg(e, e, MPFR_RNDN);
        }
    }
    mpfr_clear(r);
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
                acc += (long)cic_hadamard_kron_entry(hk, Kz, P, k, i) * s[k] *
                       cic_hadamard_kron_entry(hk, Kz, P, k, j);
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
