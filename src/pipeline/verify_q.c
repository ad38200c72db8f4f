/* SPDX-License-Identifier: MIT */
/* verify_q.c: the residual rotation Q of a rewrite recovered from the two
 * checkpoints' token embeddings, for cicheck verify without --q (verify.h).
 *
 * A rewrite that rotates the residual stream stores E_B = E_A Q (rounded to
 * its storage). With at least d rows of full rank, Q is the least-squares
 * solution of E_A Q = E_B: found in double through the normal equations
 * (OpenBLAS, one step of refinement), then checked rather than trusted.
 * ||Q^T Q - I||_2 is bounded in MPFR with every rounding accounted for, for
 * the Q that is then used (its doubles, exactly), so a Q that only looks
 * orthogonal in double cannot pass. Work: about rows d^2 flops in double
 * and d^3 exact products in MPFR (seconds at d = 1024, hours at 4096). */
#include "verify.h"

#include "../base/mpgemm.h"
#include "../base/mpvec.h"
#include "../model/checkpoint.h"

#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* Rows of E handled at once for the residual (bounds its buffer). */
#define RESID_ROWS 1024

/* g (d x d, its upper triangle, row-major) := U with g = U^T U, in place.
 * -1 (k the failing pivot) when a pivot is not above tiny: E is rank
 * deficient, or so close to it that Q is not determined. */
static int cholesky_upper(double *g, int d, double tiny, int *k)
{
    int i, j, p;
    for (i = 0; i < d; i++) {
        double piv = g[(size_t)i * d + i];
        for (p = 0; p < i; p++)
            piv -= g[(size_t)p * d + i] * g[(size_t)p * d + i];
        if (!(piv > tiny)) {
            *k = i;
            return -1;
        }
        piv = sqrt(piv);
        g[(size_t)i * d + i] = piv;
        for (j = i + 1; j < d; j++) {
            double v = g[(size_t)i * d + j];
            for (p = 0; p < i; p++)
                v -= g[(size_t)p * d + i] * g[(size_t)p * d + j];
            g[(size_t)i * d + j] = v / piv;
        }
    }
    return 0;
}

/* x (d x d) := (U^T U)^-1 x. */
static void solve(const double *u, double *x, int d)
{
    cblas_dtrsm(CblasRowMajor, CblasLeft, CblasUpper, CblasTrans, CblasNonUnit, d, d, 1.0, u, d,
                x, d);
    cblas_dtrsm(CblasRowMajor, CblasLeft, CblasUpper, CblasNoTrans, CblasNonUnit, d, d, 1.0, u,
                d, x, d);
}

/* R = E_B - E_A q by blocks of rows: rhs := E_A^T R when rhs is given, and
 * ||R||_F^2 into *r2. 0, or -1 when memory runs out. */
static int residual(double *rhs, double *r2, const double *ea, const double *eb, const double *q,
                    int rows, int d)
{
    double *r = cic_calloc((size_t)RESID_ROWS * d, sizeof *r);
    int i0;
    size_t j;
    if (!r)
        return -1;
    *r2 = 0.0;
    for (i0 = 0; i0 < rows; i0 += RESID_ROWS) {
        int nr = rows - i0 < RESID_ROWS ? rows - i0 : RESID_ROWS;
        const double *a = ea + (size_t)i0 * d;
        memcpy(r, eb + (size_t)i0 * d, (size_t)nr * d * sizeof *r);
        cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, nr, d, d, -1.0, a, d, q, d, 1.0,
                    r, d);
        for (j = 0; j < (size_t)nr * d; j++)
            *r2 += r[j] * r[j];
        if (rhs)
            cblas_dgemm(CblasRowMajor, CblasTrans, CblasNoTrans, d, d, nr, 1.0, a, d, r, d,
                        i0 == 0 ? 0.0 : 1.0, rhs, d);
    }
    free(r);
    return 0;
}

int cic_verify_q_lsq(double *q, double *fit, const double *ea, const double *eb, int rows, int d,
                     char *why, size_t cap)
{
    size_t dd = (size_t)d * d, i;
    double *g = cic_calloc(dd, sizeof *g), *c = cic_calloc(dd, sizeof *c), gmax = 0, r2, b2 = 0;
    int k = 0, rc = -1;
    if (!g || !c)
        goto done;
    if (rows < d) {
        snprintf(why, cap, "%d embedding rows, fewer than d = %d: they do not determine Q",
                 rows, d);
        rc = 1;
        goto done;
    }
    cblas_dsyrk(CblasRowMajor, CblasUpper, CblasTrans, d, rows, 1.0, ea, d, 0.0, g, d);
    for (i = 0; i < (size_t)d; i++)
        gmax = fmax(gmax, g[i * d + i]);
    /* a pivot below 2^-36 of the largest diagonal: E_A's condition number is
     * above about 2^18, or E_A is rank deficient and rounding left a trace */
    if (cholesky_upper(g, d, ldexp(gmax, -36), &k) < 0) {
        snprintf(why, cap, "the original's embeddings are rank deficient (pivot %d of %d is "
                 "zero to 2^-36 of the largest): they do not determine Q", k, d);
        rc = 1;
        goto done;
    }
    cblas_dgemm(CblasRowMajor, CblasTrans, CblasNoTrans, d, d, rows, 1.0, ea, d, eb, d, 0.0, q,
                d);
    solve(g, q, d);
    /* one step of refinement: the normal equations square the condition */
    if (residual(c, &r2, ea, eb, q, rows, d) < 0)
        goto done;
    solve(g, c, d);
    for (i = 0; i < dd; i++)
        q[i] += c[i];
    if (residual(NULL, &r2, ea, eb, q, rows, d) < 0)
        goto done;
    for (i = 0; i < (size_t)rows * d; i++)
        b2 += eb[i] * eb[i];
    *fit = b2 > 0 ? sqrt(r2 / b2) : sqrt(r2);
    rc = 0;
done:
    free(g);
    free(c);
    return rc;
}

double cic_verify_q_orth_bound(const double *q, int d, int threads)
{
    /* S = Q^T Q with every entry the correctly rounded (to P bits) exact dot
     * product of the 53-bit values, so |S_ij - exact| <= 2^(1-P) |S_ij|;
     * then ||Q^T Q - I||_F <= sqrt(sum (|S_ij - delta_ij| + that)^2) with
     * every step rounded up (away from zero for the difference) */
    enum { P = 128 };
    size_t dd = (size_t)d * d, i;
    mpfr_t *qm = cic_mpvec_create(dd, 53), *s = cic_mpvec_create(dd, P);
    mpfr_t t, e, sum;
    cic_dot_scratch sc;
    double b = INFINITY;
    for (i = 0; i < dd; i++)
        if (!isfinite(q[i]))
            goto done;
    if (!qm || !s || cic_dot_scratch_init(&sc, (size_t)d, 53) < 0)
        goto done;
    for (i = 0; i < dd; i++)
        mpfr_set_d(qm[i], q[i], MPFR_RNDN); /* exact */
    cic_mp_matmul(s, (const mpfr_t *)qm, true, (const mpfr_t *)qm, false, d, d, d, false, threads,
                  &sc);
    cic_dot_scratch_clear(&sc);
    mpfr_inits2(64, t, e, sum, (mpfr_ptr)0);
    mpfr_set_zero(sum, 1);
    for (i = 0; i < dd; i++) {
        mpfr_sub_ui(t, s[i], i % ((size_t)d + 1) == 0 ? 1 : 0, MPFR_RNDA);
        mpfr_abs(t, t, MPFR_RNDU);
        mpfr_abs(e, s[i], MPFR_RNDU);
        mpfr_mul_2si(e, e, 1 - P, MPFR_RNDU);
        mpfr_add(t, t, e, MPFR_RNDU);
        mpfr_sqr(t, t, MPFR_RNDU);
        mpfr_add(sum, sum, t, MPFR_RNDU);
    }
    mpfr_sqrt(sum, sum, MPFR_RNDU);
    b = mpfr_get_d(sum, MPFR_RNDU);
    mpfr_clears(t, e, sum, (mpfr_ptr)0);
done:
    cic_mpvec_destroy(qm, dd);
    cic_mpvec_destroy(s, dd);
    return isnan(b) ? INFINITY : b;
}

/* The embedding of checkpoint dir, or NULL with why set (a read error is a
 * reason not to recover Q, not an error: the check goes on without it). */
static double *embedding(const char *dir, int *rows, int *cols, char *why, size_t cap,
                         bool *oom)
{
    cic_diag d;
    cic_ckpt_storage s;
    cic_ckpt *k;
    double *e = NULL;
    memset(&d, 0, sizeof d);
    if ((k = cic_ckpt_open(dir, &d)) != NULL)
        e = cic_ckpt_embedding(k, rows, cols, &s, &d);
    cic_ckpt_close(k);
    if (!e) {
        *oom = strstr(d.msg, "out of memory") != NULL;
        snprintf(why, cap, "%.250s: %.340s", d.file[0] ? d.file : dir, d.msg);
    }
    return e;
}

/* Whether recovering Q from rows x d embeddings would take more than half
 * the machine's memory (why set then): the two embeddings and a block of
 * residual rows as doubles, three d x d doubles, and in MPFR Q, Q^T Q and
 * the two copies cic_mp_matmul packs (53 bits but Q^T Q's 128, each value
 * with its struct). */
static bool too_big(int rows, int d, char *why, size_t cap)
{
    long pages = sysconf(_SC_PHYS_PAGES), psz = sysconf(_SC_PAGESIZE);
    double limit = pages > 0 && psz > 0 ? 0.5 * (double)pages * (double)psz : 8.0 * (1 << 30);
    double dd = (double)d * d;
    double need = 8.0 * (2.0 * rows * d + (double)RESID_ROWS * d + 3.0 * dd) +
                  dd * (4.0 * sizeof(mpfr_t) + 3 * 8.0 + 16.0);
    if (need <= limit)
        return false;
    snprintf(why, cap, "recovering Q from [%d, %d] embeddings needs about %.0f MiB, more than "
             "half the machine's memory (%.0f MiB): give --q", rows, d, need / 1048576.0,
             limit / 1048576.0);
    return true;
}

int cic_verify_q_recover(mpfr_t **q, cic_verify_qfit *f, const char *orig, const char *trans,
                         const cic_model_cfg *cfg, bool center, double eq, int threads,
                         cic_diag *d)
{
    double *ea = NULL, *eb = NULL, *qd = NULL;
    int ra = 0, ca = 0, rb = 0, cb = 0, rc = -1, r, j;
    bool oom = false;
    size_t i;
    memset(f, 0, sizeof *f);
    *q = NULL;
    f->orth_bound = f->fit = NAN;
    if (too_big(cfg->d_out, cfg->d_model, f->why, sizeof f->why))
        return 0;
    ea = embedding(orig, &ra, &ca, f->why, sizeof f->why, &oom);
    if (ea)
        eb = embedding(trans, &rb, &cb, f->why, sizeof f->why, &oom);
    if (!ea || !eb) {
        rc = oom ? -1 : 0;
        goto done;
    }
    f->rows = ra;
    f->d = ca;
    if (ra != rb || ca != cb) {
        snprintf(f->why, sizeof f->why, "the embeddings differ in shape ([%d, %d] and [%d, %d])",
                 ra, ca, rb, cb);
        rc = 0;
        goto done;
    }
    for (r = 0; center && r < ra; r++) { /* the rewrite's stream has no row mean */
        double m = 0;
        for (j = 0; j < ca; j++)
            m += ea[(size_t)r * ca + j];
        for (j = 0; j < ca; j++)
            ea[(size_t)r * ca + j] -= m / ca;
    }
    if (!(qd = cic_calloc((size_t)ca * ca, sizeof *qd)))
        goto done;
    rc = cic_verify_q_lsq(qd, &f->fit, ea, eb, ra, ca, f->why, sizeof f->why);
    if (rc > 0 && center) {
        size_t n = strlen(f->why);
        snprintf(f->why + n, sizeof f->why - n, " (--layernorm fused: the original's rows "
                 "without their mean span at most d - 1 dimensions)");
    }
    if (rc != 0) {
        rc = rc > 0 ? 0 : -1;
        goto done;
    }
    if (!(f->fit <= eq)) {
        snprintf(f->why, sizeof f->why, "the embeddings are not a rotation of the original's: "
                 "||E_A Q - E_B||_F / ||E_B||_F = %.3g at the best Q, above %.3g (the "
                 "equivalence threshold)", f->fit, eq);
        goto done;
    }
    f->orth_bound = cic_verify_q_orth_bound(qd, ca, threads);
    if (!(f->orth_bound <= eq / 8)) {
        snprintf(f->why, sizeof f->why, "the Q that fits the embeddings is not orthogonal to "
                 "within an eighth of the equivalence threshold: ||Q^T Q - I||_2 <= %.3g "
                 "proven, %.3g needed", f->orth_bound, eq / 8);
        goto done;
    }
    if (!(*q = cic_mpvec_create((size_t)ca * ca, 53))) {
        rc = -1;
        goto done;
    }
    for (i = 0; i < (size_t)ca * ca; i++)
        mpfr_set_d((*q)[i], qd[i], MPFR_RNDN); /* exact */
done:
    if (rc < 0)
        cic_diag_set(d, trans, 0, 0, "out of memory recovering Q from the embeddings");
    free(ea);
    free(eb);
    free(qd);
    return rc < 0 ? -1 : 0;
}
