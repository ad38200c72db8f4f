/* SPDX-License-Identifier: MIT */
/* fuzz_case.c: libFuzzer target for the case loader (src/case on top of the
 * toml++ wrapper). Each input is handed to cic_case_load_string as a
 * NUL-terminated string (so text after an embedded NUL is not seen; the file
 * loader passes the full length, and the regression test in test_case.c runs
 * both). Besides the sanitizers' own checks, the loader's contract from
 * case.h is asserted: the status is CIC_OK or CIC_EINPUT, an error carries a
 * message, a position and the path, and an accepted case fits the memory
 * limit and has a NUL-terminated name.
 *
 * Built and run by scripts/fuzz.sh (clang -fsanitize=fuzzer,address,undefined).
 * Reproduce a saved input: build-fuzz/fuzz_case FILE. */
#include "case/case.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FUZZ_PATH "fuzz.toml"

/* Large (about 60 KB): static, not on the stack; libFuzzer runs inputs one
 * at a time in this process. */
static cic_case fuzz_c;

static void fuzz_fail(const char *what, int rc, const cic_diag *d)
{
    fprintf(stderr, "fuzz_case: contract broken: %s (rc %d, diag %s:%d:%d: %s)\n",
            what, rc, d->file, d->line, d->column, d->msg);
    abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text;
    cic_diag d;
    int rc;

    text = malloc(size + 1);
    if (!text)
        return 0;
    memcpy(text, data, size);
    text[size] = '\0';
    memset(&d, 0, sizeof d);

    rc = cic_case_load_string(&fuzz_c, text, FUZZ_PATH, &d);
    if (rc == CIC_EINPUT) {
        if (d.msg[0] == '\0')
            fuzz_fail("CIC_EINPUT without a message", rc, &d);
        if (d.line < 1 || d.column < 0)
            fuzz_fail("CIC_EINPUT without a line", rc, &d);
        if (strcmp(d.file, FUZZ_PATH) != 0)
            fuzz_fail("diag does not name the path", rc, &d);
        if (memchr(d.msg, '\0', sizeof d.msg) == NULL)
            fuzz_fail("diag message not NUL-terminated", rc, &d);
    } else if (rc == CIC_OK) {
        if (memchr(fuzz_c.name, '\0', sizeof fuzz_c.name) == NULL)
            fuzz_fail("case name not NUL-terminated", rc, &d);
        if (fuzz_c.n_xf < 0 || fuzz_c.n_xf > CIC_MAX_XFORMS ||
            fuzz_c.n_gates < 0 || fuzz_c.n_gates > CIC_MAX_GATES)
            fuzz_fail("transform or gate count out of range", rc, &d);
    } else {
        fuzz_fail("status is neither CIC_OK nor CIC_EINPUT", rc, &d);
    }
    free(text);
    return 0;
}
