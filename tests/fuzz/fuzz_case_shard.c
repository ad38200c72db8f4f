/* SPDX-License-Identifier: MIT */
/* fuzz_case_shard.c: libFuzzer target for `cicheck merge` of a case's
 * sample shards (case-shard.json and case-shard.bin: src/pipeline/shard_merge.c).
 * Each input is one or more shard folders (tests/fuzz/fuzz_files.h) merged
 * with no plots and no baseline. Besides the sanitizers (LeakSanitizer
 * after every input), the contract of tests/fuzz/case_shard_run.h is
 * asserted.
 *
 * Built and run by scripts/fuzz.sh case_shard; seeds are the shards of a
 * real `cicheck run --shard` (1/2 with 2/2, and 1/1). Reproduce a saved
 * input: build-fuzz/fuzz_case_shard FILE. */
#include "fuzz_tmp.h"
#include "case_shard_run.h"

#include <stdint.h>
#include <stdlib.h>

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    fuzz_tmp_dir("case_shard");
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *why = cic_fuzz_case_shard(data, size, fuzz_tmp_dir("case_shard"));
    if (why)
        fuzz_broken("case_shard", why);
    return 0;
}
