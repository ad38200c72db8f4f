/* SPDX-License-Identifier: MIT */
/* merge_input.h: one fuzz input as a folder of shards, merged. The input
 * is one shard's sweep.json, or two separated by the first NUL byte (JSON
 * text cannot hold a raw NUL, so the split loses nothing); they are written
 * as <dir>/s1/sweep.json and <dir>/s2/sweep.json and merged into <dir>/out
 * with no plots. Everything written is removed again, so the folder can be
 * reused input after input. Shared by tests/fuzz/fuzz_merge.c and the
 * replay of its regressions in tests/test_merge.c. */
#ifndef CIC_TEST_MERGE_INPUT_H
#define CIC_TEST_MERGE_INPUT_H

#include "pipeline/sweep.h"

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int mi_write(const char *path, const void *p, size_t n)
{
    FILE *f = fopen(path, "wb");
    int rc;
    if (!f)
        return -1;
    rc = (n == 0 || fwrite(p, 1, n, f) == n) ? 0 : -1;
    return fclose(f) == 0 ? rc : -1;
}

/* Merge the shards in data into dir/out. Returns the merge's exit code;
 * *wrote tells whether dir/out/sweep.json was written. -1 when the shard
 * files themselves cannot be written (not the code under test). */
static int cic_fuzz_merge(const uint8_t *data, size_t size, const char *dir, bool *wrote,
                          cic_diag *d)
{
    char s[2][1100], f[2][1200], out[1100], res[1200];
    const char *dirs[2];
    const uint8_t *nul = memchr(data, 0, size);
    size_t len[2];
    int n = nul ? 2 : 1, k, rc;
    struct stat st;
    len[0] = nul ? (size_t)(nul - data) : size;
    len[1] = nul ? size - len[0] - 1 : 0;
    snprintf(out, sizeof out, "%.1000s/out", dir);
    snprintf(res, sizeof res, "%.1050s/sweep.json", out);
    for (k = 0; k < n; k++) {
        snprintf(s[k], sizeof s[k], "%.1000s/s%d", dir, k + 1);
        snprintf(f[k], sizeof f[k], "%.1050s/sweep.json", s[k]);
        dirs[k] = s[k];
        if ((mkdir(s[k], 0700) != 0 && errno != EEXIST) ||
            mi_write(f[k], k ? nul + 1 : data, len[k]) != 0)
            return -1;
    }
    rc = cic_sweep_merge(dirs, n, out, true, d);
    *wrote = stat(res, &st) == 0;
    unlink(res);
    rmdir(out);
    for (k = 0; k < n; k++) {
        unlink(f[k]);
        rmdir(s[k]);
    }
    return rc;
}

#endif
