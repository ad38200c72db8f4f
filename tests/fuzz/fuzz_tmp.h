/* SPDX-License-Identifier: MIT */
/* fuzz_tmp.h: a private folder for a fuzz target's files, on tmpfs when
 * there is one (/dev/shm: the merge fsyncs what it writes), else TMPDIR or
 * /tmp; removed at exit when empty. And the real stderr, for a harness's
 * report of a broken contract: the noisy targets run with libFuzzer's
 * -close_fd_mask, which discards fd 2 after start-up. */
#ifndef CIC_FUZZ_TMP_H
#define CIC_FUZZ_TMP_H

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static char fuzz_dir[512];

static void fuzz_tmp_remove(void)
{
    rmdir(fuzz_dir);
}

static const char *fuzz_tmp_dir(const char *tag)
{
    const char *base = getenv("CIC_FUZZ_TMP");
    if (fuzz_dir[0])
        return fuzz_dir;
    if (!base || !base[0])
        base = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : getenv("TMPDIR");
    if (!base || !base[0])
        base = "/tmp";
    snprintf(fuzz_dir, sizeof fuzz_dir, "%s/cic-fuzz-%s.XXXXXX", base, tag);
    if (!mkdtemp(fuzz_dir)) {
        perror(fuzz_dir);
        abort();
    }
    atexit(fuzz_tmp_remove);
    return fuzz_dir;
}

static FILE *fuzz_err_file;

/* Before main, so before libFuzzer discards fd 2. */
__attribute__((constructor)) static void fuzz_err_init(void)
{
    int fd = dup(2);
    fuzz_err_file = fd >= 0 ? fdopen(fd, "w") : NULL;
}

__attribute__((unused)) static FILE *fuzz_err(void)
{
    return fuzz_err_file ? fuzz_err_file : stderr;
}

/* Report a broken contract (what) of target and stop: libFuzzer saves the
 * input as a crash. */
__attribute__((unused, noreturn)) static void fuzz_broken(const char *target, const char *what)
{
    fprintf(fuzz_err(), "fuzz_%s: contract broken: %s\n", target, what);
    fflush(fuzz_err());
    abort();
}

#endif
