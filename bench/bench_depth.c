/* SPDX-License-Identifier: MIT */
/* bench_depth.c: part (7) of cicheck-bench, how the truth's error bound
 * grows with depth: the block of a case (cases/dit-xl2.toml's), one sample
 * of 16 tokens, at 1, 2 and 3 layers, one ball run each at 128 bits
 * (engine/mp_ball.h). For each depth the largest relative bound of the
 * output:
 *   elementwise: max rad / |mid| over the values (nonzero midpoints), the
 *                radii of the elementwise balls alone;
 *   norm-wise:   max ||exact - mid||_2 bound / ||mid||_2 over the output's
 *                rows, when the ball run gives that bound (the field nrm of
 *                cic_ball_out; this build has it when meson found it,
 *                CIC_BENCH_BALL_NRM), else "n/a".
 * The growth in bits per block is the least-squares slope of log2 of each
 * against depth. A bound that grows g bits a block costs about g bits of
 * precision a block: the precision a deep model's truth needs. Then the
 * spectral norm bounds of the one-layer model's weights by the default
 * method and by the squarings: time and bound of each. */
#include "bench_int.h"

#include "base/mpvec.h"
#include "base/specnorm.h"
#include "case/case.h"
#include "engine/engine.h"
#include "engine/mp_ball.h"
#include "model/model.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DEPTH_PREC 128
#define DEPTH_MAX 3
#define DEPTH_TOKENS 16

/* Largest relative bounds of one run; NAN where the run gives none. */
typedef struct {
    double elem, nrm;
    double secs;
} depth_fig;

/* max over rows of bound / ||row||_2 (rows with a nonzero norm). */
static double rel_rows(const mpfr_t *y, const double *nrm, size_t rows, size_t cols)
{
    double most = 0;
    size_t r, j;
    for (r = 0; r < rows; r++) {
        double s = 0;
        for (j = 0; j < cols; j++) {
            double v = mpfr_get_d(y[r * cols + j], MPFR_RNDN);
            s += v * v;
        }
        if (s > 0 && nrm[r] / sqrt(s) > most)
            most = nrm[r] / sqrt(s);
    }
    return most;
}

/* One ball run of m at DEPTH_PREC; elementwise: the elementwise radii
 * alone (when the build can ask for it), and the norm-wise bound too when
 * not. 0, or -1 with the reason printed. */
static int ball_run(const cic_model *m, bool elementwise, depth_fig *f)
{
    size_t rows = (size_t)m->cfg.samples * (size_t)m->cfg.tokens;
    size_t cols = (size_t)cic_model_out_cols(m), n = rows * cols;
    mpfr_t *y = cic_mpvec_create(n, DEPTH_PREC);
    double *rad = malloc(n * sizeof *rad), *nrm = malloc(rows * sizeof *nrm), rel = NAN;
    cic_run_opts o;
    cic_ball_out bo;
    double t0 = cic_bench_now();
    int rc = -1;
    if (!y || !rad || !nrm) {
        fprintf(stderr, "cicheck-bench: out of memory\n");
        exit(2);
    }
    memset(&o, 0, sizeof o);
    memset(&bo, 0, sizeof bo);
    bo.rad = rad;
#if CIC_BENCH_BALL_ELEMENTWISE
    bo.elementwise = elementwise;
#endif
#if CIC_BENCH_BALL_NRM
    if (!elementwise)
        bo.nrm = nrm;
#endif
    o.ball = &bo;
    if (cic_engine_mpfr_run(y, m, DEPTH_PREC, false, &o) < 0 || bo.failed) {
        printf("  the ball run failed%s%s\n", bo.failed ? ": " : "", bo.why);
    } else {
        f->secs += cic_bench_now() - t0;
        if (elementwise) {
            cic_ball_prove((const mpfr_t *)y, rad, n, NULL, &rel);
            f->elem = rel;
        } else {
            f->nrm = rel_rows((const mpfr_t *)y, nrm, rows, cols);
        }
        rc = 0;
    }
    cic_mpvec_destroy(y, n);
    free(rad);
    free(nrm);
    return rc;
}

/* Least-squares slope of log2 v[i] against depth i + 1; NAN unless every
 * v[i] is positive and finite. */
static double slope_bits(const double *v, int n)
{
    double sx = 0, sy = 0, sxx = 0, sxy = 0;
    int i;
    for (i = 0; i < n; i++) {
        double x = i + 1, yv;
        if (!(v[i] > 0) || !isfinite(v[i]))
            return NAN;
        yv = log2(v[i]);
        sx += x;
        sy += yv;
        sxx += x * x;
        sxy += x * yv;
    }
    return (n * sxy - sx * sy) / (n * sxx - sx * sx);
}

static void fmt_fig(char *b, size_t cap, double v, const char *f)
{
    if (isnan(v))
        snprintf(b, cap, "n/a");
    else
        snprintf(b, cap, f, v);
}

/* The spectral norm bounds of the block's float32 weights (they set the
 * norm-wise bound's growth): the default method (the certificate) against
 * CIC_SPECNORM_LEVELS squarings, the time and the bound of each, one run
 * each, no cache. */
static void spectral_norms(const cic_model *m)
{
    int i;
    printf("  spectral norm bounds of its weights (s and bound: certificate, then %d squarings):\n",
           CIC_SPECNORM_LEVELS);
    for (i = 0; i < m->n_t; i++) {
        const cic_tensor *t = &m->t[i];
        size_t nk = (size_t)t->rows * (size_t)t->cols, j;
        double *w, g1, g2, r, t0, t1, t2;
        if (t->role != CIC_T_WEIGHT || !t->f32 || t->rows < 64 || t->cols < 64 ||
            !(w = malloc(nk * sizeof *w)))
            continue;
        for (j = 0; j < nk; j++)
            w[j] = t->f32[j];
        t0 = cic_bench_now();
        cic_specnorm_d_detail(&g1, &r, w, (size_t)t->rows, (size_t)t->cols, CIC_SPECNORM_CERT);
        t1 = cic_bench_now();
        cic_specnorm_d_detail(&g2, &r, w, (size_t)t->rows, (size_t)t->cols, CIC_SPECNORM_LEVELS);
        t2 = cic_bench_now();
        printf("    %-22s %5d x %-5d %6.3f s %.6g   %6.3f s %.6g\n", t->name, t->rows, t->cols,
               t1 - t0, g1, t2 - t1, g2);
        free(w);
    }
}

void cic_bench_depth(const char *path, int quick)
{
    cic_case c;
    cic_diag d;
    depth_fig fig[DEPTH_MAX];
    double e[DEPTH_MAX], nr[DEPTH_MAX];
    char b1[32], b2[32];
    int l, n = quick ? 2 : DEPTH_MAX;
    printf("\n(7) the truth's bound against depth: %s's block, 1 sample of %d tokens, 1 to %d\n"
           "    layers, ball runs at %d bits: the largest relative bound of the output,\n"
           "    elementwise (max rad / |value|) and norm-wise (max bound / ||row||_2), and\n"
           "    the growth in bits per block (least-squares slope of log2 against depth)\n",
           path, DEPTH_TOKENS, n, DEPTH_PREC);
    if (cic_case_load(&c, path, &d) != CIC_OK) {
        printf("  skipped: %s: %s\n", path, d.msg);
        return;
    }
    c.model.tokens = DEPTH_TOKENS;
    c.model.samples = 1;
    printf("  %6s %14s %14s %10s\n", "layers", "elementwise", "norm-wise", "seconds");
    for (l = 0; l < n; l++) {
        cic_model *m;
        memset(&fig[l], 0, sizeof fig[l]);
        fig[l].elem = fig[l].nrm = NAN;
        c.model.layers = l + 1;
        m = cic_model_create(&c.model, c.readout);
        if (!m) {
            fprintf(stderr, "cicheck-bench: cic_model_create failed\n");
            exit(2);
        }
        ball_run(m, true, &fig[l]);
        if (CIC_BENCH_BALL_NRM)
            ball_run(m, false, &fig[l]);
        cic_model_destroy(m);
        e[l] = fig[l].elem;
        nr[l] = fig[l].nrm;
        fmt_fig(b1, sizeof b1, e[l], "%.3e");
        fmt_fig(b2, sizeof b2, nr[l], "%.3e");
        printf("  %6d %14s %14s %10.1f\n", l + 1, b1, b2, fig[l].secs);
    }
    fmt_fig(b1, sizeof b1, slope_bits(e, n), "%.1f");
    fmt_fig(b2, sizeof b2, slope_bits(nr, n), "%.1f");
    /* one line for bench/run.sh to read (its summary and part (7)'s
     * projection): keep its words */
    printf("  bits per block: elementwise %s, norm-wise %s\n", b1, b2);
    fmt_fig(b1, sizeof b1, e[0], "%.6g");
    fmt_fig(b2, sizeof b2, nr[0], "%.6g");
    printf("  at 1 layer: elementwise %s, norm-wise %s\n", b1, b2);
    if (!CIC_BENCH_BALL_NRM)
        printf("  (this build's ball run gives no norm-wise bound: cic_ball_out has no nrm)\n");
    c.model.layers = 1;
    {
        cic_model *m = cic_model_create(&c.model, c.readout);
        if (m)
            spectral_norms(m);
        cic_model_destroy(m);
    }
}
