/* SPDX-License-Identifier: MIT */
/* fuzz_checkpoint.c: libFuzzer target for the checkpoint reader (a case's
 * [model] checkpoint: src/case/load_ckpt.c, src/model/checkpoint*.c and the
 * safetensors files under them). Each input is a folder of files
 * (tests/fuzz/fuzz_files.h) loaded as a case's checkpoint and built into
 * its model, the contract asserted (tests/fuzz/checkpoint_run.h), besides
 * the sanitizers (LeakSanitizer after every input).
 *
 * Built and run by scripts/fuzz.sh checkpoint; seeds are the checkpoint
 * folders tests/make_checkpoint.py writes (llama in F32, BF16, F16, F64,
 * sharded, tied; OPT; timm; DiT). Reproduce a saved input:
 * build-fuzz/fuzz_checkpoint FILE. */
#include "fuzz_tmp.h"
#include "checkpoint_run.h"

#include <stdint.h>
#include <stdlib.h>

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    fuzz_tmp_dir("checkpoint");
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *why = cic_fuzz_checkpoint(data, size, fuzz_tmp_dir("checkpoint"));
    if (why)
        fuzz_broken("checkpoint", why);
    return 0;
}
