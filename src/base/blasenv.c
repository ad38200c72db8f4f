/* SPDX-License-Identifier: MIT */
/* blasenv.c: OpenBLAS's idle-thread timeout, set before the library loads
 * (blasenv.h). */
#include "blasenv.h"

#include <stdbool.h>
#include <stdlib.h>
#include <unistd.h>

#define CIC_BLAS_TIMEOUT "20"

/* Process-wide on purpose (base/rt.h): OpenBLAS reads its environment once
 * per process, so what this records is the process's, not a run's. */
static bool g_seen;         /* cic_blas_env_reexec ran in this process */
static const char *g_start; /* the timeout in the environment it started with */

static const char *env_timeout(void)
{
    const char *v = getenv("OPENBLAS_THREAD_TIMEOUT");
    return v ? v : getenv("GOTO_THREAD_TIMEOUT");
}

void cic_blas_env_reexec(char **argv)
{
    g_seen = true;
    g_start = env_timeout();
    if (g_start || !argv || !argv[0])
        return;
    if (setenv("OPENBLAS_THREAD_TIMEOUT", CIC_BLAS_TIMEOUT, 1) != 0)
        return;
    /* the running binary itself, whatever argv[0] and PATH say */
    execv("/proc/self/exe", argv);
}

const char *cic_blas_env_timeout(void)
{
    return g_seen ? g_start : env_timeout();
}
