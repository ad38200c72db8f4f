/* SPDX-License-Identifier: MIT */
/* blasenv.c: OpenBLAS's idle-thread timeout, set before the library loads
 * (blasenv.h). */
#include "blasenv.h"

#include <stdlib.h>
#include <unistd.h>

#define CIC_BLAS_TIMEOUT "20"

void cic_blas_env_reexec(char **argv)
{
    if (getenv("OPENBLAS_THREAD_TIMEOUT") || getenv("GOTO_THREAD_TIMEOUT") || !argv || !argv[0])
        return;
    if (setenv("OPENBLAS_THREAD_TIMEOUT", CIC_BLAS_TIMEOUT, 1) != 0)
        return;
    /* the running binary itself, whatever argv[0] and PATH say */
    execv("/proc/self/exe", argv);
}
