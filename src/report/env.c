/* SPDX-License-Identifier: MIT */
/* env.c: what the numbers depend on besides the case file. OpenBLAS results
 * change with the kernel it picked (OPENBLAS_CORETYPE) and its thread count,
 * and MPFR/GMP/compiler versions change nothing in principle but everything
 * when a bug is chased, so each report records them (DESIGN.md sections 4
 * and 6). Called once per run; cheap. */
#include "report.h"

#include "../base/blasenv.h"

#include <cblas.h>
#include <gmp.h>
#include <mpfr.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void cic_report_env_fill(cic_env *env)
{
    const char *s;

    CIC_ASSERT(env != NULL);
    memset(env, 0, sizeof *env);

    cic_strlcpy(env->mpfr, mpfr_get_version(), sizeof env->mpfr);
    cic_strlcpy(env->gmp, gmp_version, sizeof env->gmp);

    /* openblas_get_config() has a trailing space in some builds. */
    s = openblas_get_config();
    cic_strlcpy(env->openblas, s ? s : "unknown", sizeof env->openblas);
    for (size_t n = strlen(env->openblas); n > 0 && env->openblas[n - 1] == ' ';)
        env->openblas[--n] = '\0';
    s = openblas_get_corename();
    cic_strlcpy(env->openblas_core, s ? s : "unknown", sizeof env->openblas_core);
    env->openblas_threads = openblas_get_num_threads();
    /* idle workers' spin before they sleep (2^n cycles; base/blasenv.h):
     * timing only, but timings are reported */
    s = cic_blas_env_timeout();
    cic_strlcpy(env->openblas_timeout, s ? s : "default", sizeof env->openblas_timeout);

#if defined(__clang__)
    snprintf(env->compiler, sizeof env->compiler, "clang %s", __clang_version__);
#elif defined(__GNUC__)
    snprintf(env->compiler, sizeof env->compiler, "gcc %s", __VERSION__);
#elif defined(__VERSION__)
    snprintf(env->compiler, sizeof env->compiler, "%s", __VERSION__);
#else
    cic_strlcpy(env->compiler, "unknown", sizeof env->compiler);
#endif

    /* gethostname may not NUL-terminate on truncation. */
    if (gethostname(env->hostname, sizeof env->hostname - 1) != 0)
        cic_strlcpy(env->hostname, "unknown", sizeof env->hostname);
    env->hostname[sizeof env->hostname - 1] = '\0';
}
