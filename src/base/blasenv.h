/* SPDX-License-Identifier: MIT */
/* blasenv.h: OpenBLAS's idle-thread timeout for cicheck's programs.
 *
 * After every threaded call OpenBLAS's worker threads spin, calling
 * sched_yield, for 2^28 cycles (about a tenth of a second) before they
 * sleep. Between gemm calls the engines run their own threads (the MPFR
 * engine's rows and rounding, its ball bounds, the real engines' softmax
 * and norms), and a spinning worker takes the core they want; in a
 * virtual machine each yield is also a costly system call (cases/adaln.toml
 * spent a third of its time in them). OpenBLAS reads the timeout
 * (OPENBLAS_THREAD_TIMEOUT, 2^n cycles, n in 4 .. 30) from the
 * environment as the library loads, before main, so a program sets it and
 * runs itself once more. n = 20 (about half a millisecond) keeps the
 * workers awake across back-to-back gemm calls. Results do not change:
 * only when idle workers sleep. cicheck does it for the commands that run
 * engines (run, bless, verify); the others start once. */
#ifndef CIC_BLASENV_H
#define CIC_BLASENV_H

/* First thing in main: unless OPENBLAS_THREAD_TIMEOUT or
 * GOTO_THREAD_TIMEOUT is set (a user's choice is kept), set
 * OPENBLAS_THREAD_TIMEOUT=20 and exec this program again with argv. Returns
 * only when nothing was to be done or the exec failed (the run then goes on
 * with OpenBLAS's default, the variable set for child processes). */
void cic_blas_env_reexec(char **argv);

/* The timeout OpenBLAS read as this process loaded: the variable's value
 * in the environment the process started with (NULL: unset, the library's
 * default of 2^28 cycles). Without a call of cic_blas_env_reexec (cicheck
 * as a library), the environment's value now. */
const char *cic_blas_env_timeout(void);

#endif
