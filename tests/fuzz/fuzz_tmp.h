/* SPDX-License-Identifier: MIT */
/* fuzz_tmp.h: a private folder for a fuzz target's files, on tmpfs when
 * there is one (/dev/shm: the merge fsyncs what it writes), else TMPDIR or
 * /tmp; removed at exit when empty. */
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

#endif
