/* SPDX-License-Identifier: MIT */
/* fuzz_input.c: libFuzzer target for a case's [input] file
 * (src/case/load_input.c, cic_input_fill in src/model/checkpoint.c). Each
 * input is written as a safetensors file and read as the hidden states or
 * token ids of a seeded model and of a tiny checkpoint's. Besides the
 * sanitizers (LeakSanitizer after every input), the contract of
 * tests/fuzz/input_run.h is asserted.
 *
 * Built and run by scripts/fuzz.sh input; seeds are files of hidden states
 * and token ids in every dtype, written by NumPy. Reproduce a saved input:
 * build-fuzz/fuzz_input FILE. */
#include "fuzz_tmp.h"
#include "input_run.h"

#include <stdint.h>
#include <stdlib.h>

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    if (cic_fuzz_input_setup(fuzz_tmp_dir("input")) != 0)
        fuzz_broken("input", "cannot write the fixtures");
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *why = cic_fuzz_input(data, size, fuzz_tmp_dir("input"));
    if (why)
        fuzz_broken("input", why);
    return 0;
}
