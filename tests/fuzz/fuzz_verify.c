/* SPDX-License-Identifier: MIT */
/* fuzz_verify.c: libFuzzer target for `cicheck verify`: its arguments
 * (src/cli/verify.c) and the checks of src/pipeline/verify.c on its files.
 * Each input is a command line and files (tests/fuzz/fuzz_files.h) run
 * against two tiny checkpoints. Besides the sanitizers (LeakSanitizer after
 * every input), the contract of tests/fuzz/verify_run.h is asserted.
 *
 * Built and run by scripts/fuzz.sh verify; seeds are command lines over the
 * fixtures and real rewrites written by tests/make_checkpoint.py.
 * Reproduce a saved input: build-fuzz/fuzz_verify FILE. */
#include "fuzz_tmp.h"
#include "verify_run.h"

#include <stdint.h>
#include <stdlib.h>

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    if (cic_fuzz_verify_setup(fuzz_tmp_dir("verify")) != 0)
        fuzz_broken("verify", "cannot write the fixtures");
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *why = cic_fuzz_verify(data, size, fuzz_tmp_dir("verify"));
    if (why)
        fuzz_broken("verify", why);
    return 0;
}
