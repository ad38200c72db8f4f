/* SPDX-License-Identifier: MIT */
/* bench_truth.c: part (5) of cicheck-bench, the cost of the truth of
 * cases/dit-xl2.toml's original block, in one run:
 *   before: a plain MPFR run at the case's mpfr_prec, then sample 0 again at
 *           mpfr_prec + 64 (the certificate the proof replaced, today's
 *           --recheck);
 *   proven: a ball run at mpfr_prec (engine/mp_ball.h), then the samples
 *           with values not proven again at twice the precision (the first
 *           step of the pipeline's Ziv loop; the count left is printed);
 *   and a ball run at 64 bits, for the share of values it proves.
 * Both sides use this build's kernels: the ratio is what the proof costs
 * against the certificate it replaced. The cost against today's code (the
 * code on which the proof was asked for) is part (6) of bench/run.sh.
 * The MPFR engine runs on every online core, as `cicheck run` does. */
#include "bench_int.h"

#include "base/mpvec.h"
#include "case/case.h"
#include "engine/engine.h"
#include "engine/mp_ball.h"
#include "model/model.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A run of samples s0 .. s0 + ns - 1 at prec; a ball run when rad. */
static double run(const cic_model *m, mpfr_prec_t prec, int s0, int ns, mpfr_t *y, double *rad)
{
    cic_run_opts o;
    cic_ball_out bo;
    double t0 = cic_bench_now();
    memset(&o, 0, sizeof o);
    memset(&bo, 0, sizeof bo);
    o.sample0 = s0;
    o.n_samples = ns;
    bo.rad = rad;
    o.ball = rad ? &bo : NULL;
    if (cic_engine_mpfr_run(y, m, prec, false, &o) < 0 || bo.failed) {
        fprintf(stderr, "cicheck-bench: the MPFR run failed%s%s\n", bo.failed ? ": " : "",
                bo.why);
        exit(2);
    }
    return cic_bench_now() - t0;
}

/* The proof: ball run at prec, then each sample with unproven values at
 * 2 prec. *first, *left: values proven at prec, and not at 2 prec. */
static double proven(const cic_model *m, mpfr_prec_t prec, size_t per, size_t *first,
                     size_t *left)
{
    int S = m->cfg.samples, s;
    size_t n = per * (size_t)S, i;
    mpfr_t *y = cic_mpvec_create(n, prec), *y2 = cic_mpvec_create(per, 2 * prec);
    double *rad = malloc(n * sizeof *rad), *rad2 = malloc(per * sizeof *rad2), rel, t;
    unsigned char *ok = malloc(n);
    if (!y || !y2 || !rad || !rad2 || !ok) {
        fprintf(stderr, "cicheck-bench: out of memory\n");
        exit(2);
    }
    t = run(m, prec, 0, S, y, rad);
    *first = cic_ball_prove((const mpfr_t *)y, rad, n, ok, &rel);
    *left = n - *first;
    for (s = 0; s < S; s++) {
        size_t miss = 0;
        for (i = 0; i < per; i++)
            miss += !ok[(size_t)s * per + i];
        if (!miss)
            continue;
        t += run(m, 2 * prec, s, 1, y2, rad2);
        for (i = 0; i < per; i++)
            if (!ok[(size_t)s * per + i] && cic_ball_prove(y2 + i, rad2 + i, 1, NULL, &rel) == 1)
                (*left)--;
    }
    cic_mpvec_destroy(y, n);
    cic_mpvec_destroy(y2, per);
    free(rad);
    free(rad2);
    free(ok);
    return t;
}

void cic_bench_truth(const char *path, int quick)
{
    cic_case c;
    cic_diag d;
    cic_model *m;
    size_t per, n, first, left, first64, left64;
    mpfr_t *y, *y2;
    double t_plain, t_cert, t_proof, t64;
    mpfr_prec_t p;
    printf("\n(5) the truth of %s's original block: before (a plain run at mpfr_prec, then\n"
           "    sample 0 at mpfr_prec + 64) against the proof (a ball run at mpfr_prec, then the\n"
           "    samples with unproven values at twice that)\n", path);
    if (cic_case_load(&c, path, &d) != CIC_OK) {
        printf("  skipped: %s: %s\n", path, d.msg);
        return;
    }
    if (quick)
        c.model.tokens = 32;
    p = c.mpfr_prec;
    m = cic_model_create(&c.model, c.readout);
    if (!m) {
        fprintf(stderr, "cicheck-bench: cic_model_create failed\n");
        exit(2);
    }
    per = (size_t)c.model.tokens * cic_model_out_cols(m);
    n = per * (size_t)c.model.samples;
    printf("  d_model %d, tokens %d, samples %d, mpfr_prec %ld, %d MPFR threads%s\n",
           c.model.d_model, c.model.tokens, c.model.samples, (long)p, cic_rt_mpfr_threads(m->rt),
           quick ? " (--quick: 32 tokens)" : "");
    y = cic_mpvec_create(n, p);
    y2 = cic_mpvec_create(per, p + 64);
    if (!y || !y2) {
        fprintf(stderr, "cicheck-bench: out of memory\n");
        exit(2);
    }
    t_plain = run(m, p, 0, c.model.samples, y, NULL);
    t_cert = run(m, p + 64, 0, 1, y2, NULL);
    t_proof = proven(m, p, per, &first, &left);
    t64 = proven(m, 64, per, &first64, &left64);
    printf("  before: plain run %.1f s + sample 0 at %ld bits %.1f s = %.1f s\n", t_plain,
           (long)p + 64, t_cert, t_plain + t_cert);
    printf("  proven at %ld bits: %.1f s (%zu of %zu values proven at %ld bits = %.4f; %zu "
           "left after %ld)\n", (long)p, t_proof, first, n, (long)p, (double)first / (double)n,
           left, (long)(2 * p));
    printf("  proven / before, both with this build's kernels: %.2f (the issue's target, a third\n"
           "    of today's code, is part (6) of bench/run.sh)\n", t_proof / (t_plain + t_cert));
    printf("  at 64 bits: %.1f s, %zu of %zu values proven at 64 bits = %.4f "
           "(%zu left after 128)\n", t64, first64, n, (double)first64 / (double)n, left64);
    cic_mpvec_destroy(y, n);
    cic_mpvec_destroy(y2, per);
    cic_model_destroy(m);
}
