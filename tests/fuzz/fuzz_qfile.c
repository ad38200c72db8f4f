/* SPDX-License-Identifier: MIT */
/* fuzz_qfile.c: libFuzzer target for rotation files (q = "file:PATH":
 * src/case/load_qfile.c, src/xform/qfile.c). Each input is written as a
 * safetensors file and used as the R1 and the R2 of a tiny case, checked
 * and applied. Besides the sanitizers (LeakSanitizer after every input),
 * the contract of tests/fuzz/qfile_run.h is asserted.
 *
 * Built and run by scripts/fuzz.sh qfile; seeds are orthogonal matrices of
 * orders 8 and 4 in every float dtype, written by NumPy. Reproduce a saved
 * input: build-fuzz/fuzz_qfile FILE. */
#include "fuzz_tmp.h"
#include "qfile_run.h"

#include <stdint.h>
#include <stdlib.h>

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    if (cic_fuzz_qfile_setup(fuzz_tmp_dir("qfile")) != 0)
        fuzz_broken("qfile", "cannot write the fixtures");
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *why = cic_fuzz_qfile(data, size, fuzz_tmp_dir("qfile"));
    if (why)
        fuzz_broken("qfile", why);
    return 0;
}
