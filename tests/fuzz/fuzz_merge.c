/* SPDX-License-Identifier: MIT */
/* fuzz_merge.c: libFuzzer target for `cicheck merge` (cic_sweep_merge in
 * src/pipeline/merge.c). Each input becomes one or two shard folders
 * (tests/fuzz/merge_input.h: two sweep.json texts split at the first NUL)
 * merged with no plots. Besides the sanitizers (and LeakSanitizer after
 * every input), the merge's contract is asserted: the exit code is 0..3; a
 * merge that wrote no sweep.json returned 2 or 3 with a message, naming a
 * shard's sweep.json when a shard was refused; a merge that wrote one
 * returned what its points say (0, or the worst point code).
 *
 * Built and run by scripts/fuzz.sh merge; seeds are the shards of a real
 * sweep. Reproduce a saved input: build-fuzz/fuzz_merge FILE. */
#include "fuzz_tmp.h"
#include "merge_input.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void fuzz_fail(const char *what, int rc, const cic_diag *d)
{
    fprintf(stderr, "fuzz_merge: contract broken: %s (rc %d, diag '%s': '%s')\n", what, rc,
            d->file, d->msg);
    abort();
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    /* "merged ... / wrote ..." on every input would drown libFuzzer's lines */
    if (!freopen("/dev/null", "w", stdout))
        abort();
    fuzz_tmp_dir("merge");
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    cic_diag d;
    bool wrote = false;
    int rc;
    memset(&d, 0, sizeof d);
    rc = cic_fuzz_merge(data, size, fuzz_tmp_dir("merge"), &wrote, &d);
    if (rc == -1) {
        fprintf(stderr, "fuzz_merge: cannot write the shard files in %s\n", fuzz_dir);
        abort();
    }
    if (rc < CIC_OK || rc > CIC_EINTERNAL)
        fuzz_fail("exit code outside 0..3", rc, &d);
    if (!wrote) {
        if (rc != CIC_EINPUT && rc != CIC_EINTERNAL)
            fuzz_fail("no sweep.json written, yet not an error", rc, &d);
        if (!d.msg[0] || !memchr(d.msg, '\0', sizeof d.msg))
            fuzz_fail("refused without a message", rc, &d);
        if (rc == CIC_EINPUT && d.file[0] && !strstr(d.file, "/s1/sweep.json") &&
            !strstr(d.file, "/s2/sweep.json"))
            fuzz_fail("a refusal that names no shard", rc, &d);
    } else if (d.msg[0] && rc == CIC_EINPUT) {
        fuzz_fail("wrote a merged sweep.json and refused", rc, &d);
    }
    return 0;
}
