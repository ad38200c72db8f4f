/* SPDX-License-Identifier: MIT */
/* fuzz_baseline.c: libFuzzer target for the baseline reader
 * (cic_baseline_compare in src/report/baseline.c). Each input is written as
 * a baseline file and compared with a real run: the shipped references
 * (reference/*.json, or CIC_FUZZ_REFERENCE) are rebuilt as runs once
 * (tests/fuzz/report_from_json.h), and the input is compared with the run
 * whose case name it carries (else the first). Besides the sanitizers (and
 * LeakSanitizer after every input), the contract of baseline.h is
 * asserted: 0 or -1; -1 carries a message naming the file and leaves the
 * run without checks; 0 gives at least the two hash checks, every check
 * NUL-terminated and of a known rule, and the run fails when a check does;
 * an input that is byte for byte a reference passes against its own run.
 *
 * Built and run by scripts/fuzz.sh baseline; seeds are reference/*.json.
 * Reproduce a saved input: build-fuzz/fuzz_baseline FILE. */
#include "fuzz_tmp.h"
#include "report_from_json.h"

#include "report/baseline.h"

#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_REFS 64

static struct {
    cic_report run;
    char name[CIC_NAME_MAX];
    char *text; /* the file, to spot an input that is it */
    size_t len;
} refs[MAX_REFS];
static int n_refs;
static char path[600];

static void fuzz_fail(const char *what, int rc, const cic_diag *d)
{
    fprintf(stderr, "fuzz_baseline: contract broken: %s (rc %d, diag '%s': '%s')\n", what, rc,
            d->file, d->msg);
    abort();
}

static const char *case_name(json_t *root)
{
    return json_string_value(json_object_get(json_object_get(root, "case"), "name"));
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    const char *dir = getenv("CIC_FUZZ_REFERENCE");
    DIR *dp;
    struct dirent *de;
    char p[1200];
    (void)argc;
    (void)argv;
    if (!dir || !dir[0])
        dir = "reference";
    dp = opendir(dir);
    if (!dp) {
        fprintf(stderr, "fuzz_baseline: cannot open %s (run from the source root or set "
                        "CIC_FUZZ_REFERENCE)\n", dir);
        abort();
    }
    while ((de = readdir(dp)) && n_refs < MAX_REFS) {
        size_t l = strlen(de->d_name);
        json_error_t je;
        json_t *root;
        FILE *f;
        long sz;
        if (l < 5 || strcmp(de->d_name + l - 5, ".json"))
            continue;
        snprintf(p, sizeof p, "%s/%s", dir, de->d_name);
        root = json_load_file(p, 0, &je);
        if (!root || cic_test_report_from_json(&refs[n_refs].run, root) != 0) {
            fprintf(stderr, "fuzz_baseline: %s: not a report\n", p);
            abort();
        }
        cic_strlcpy(refs[n_refs].name, case_name(root) ? case_name(root) : "",
                    sizeof refs[n_refs].name);
        json_decref(root);
        f = fopen(p, "rb");
        if (!f || fseek(f, 0, SEEK_END) != 0 || (sz = ftell(f)) < 0 || fseek(f, 0, SEEK_SET))
            abort();
        refs[n_refs].text = malloc((size_t)sz + 1);
        if (!refs[n_refs].text || fread(refs[n_refs].text, 1, (size_t)sz, f) != (size_t)sz)
            abort();
        refs[n_refs].len = (size_t)sz;
        fclose(f);
        n_refs++;
    }
    closedir(dp);
    if (n_refs == 0)
        abort();
    snprintf(path, sizeof path, "%s/baseline.json", fuzz_tmp_dir("baseline"));
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    cic_report r;
    cic_diag d;
    json_t *guess;
    const char *name;
    int pick = 0, k, rc, failed = 0;
    bool own;
    FILE *f = fopen(path, "wb");
    if (!f || (size && fwrite(data, 1, size, f) != size) || fclose(f) != 0)
        abort();
    /* which run: the one the input names */
    guess = json_loadb((const char *)data, size, 0, NULL);
    name = case_name(guess);
    for (k = 0; name && k < n_refs; k++)
        if (!strcmp(refs[k].name, name))
            pick = k;
    json_decref(guess);
    own = size == refs[pick].len && memcmp(data, refs[pick].text, size) == 0;

    r = refs[pick].run;
    memset(&d, 0, sizeof d);
    rc = cic_baseline_compare(&r, path, &CIC_TOLERANCE_DEFAULT, &d);
    if (rc == -1) {
        if (!d.msg[0] || !memchr(d.msg, '\0', sizeof d.msg))
            fuzz_fail("refused without a message", rc, &d);
        if (strcmp(d.file, path) != 0)
            fuzz_fail("the message does not name the baseline", rc, &d);
        if (r.regress || r.n_regress || r.has_baseline)
            fuzz_fail("a refused baseline left checks behind", rc, &d);
        if (own)
            fuzz_fail("a shipped reference was refused", rc, &d);
    } else if (rc == 0) {
        if (r.n_regress < 2 || !r.has_baseline)
            fuzz_fail("compared without the hash checks", rc, &d);
        for (k = 0; k < r.n_regress; k++) {
            const cic_regress_result *g = &r.regress[k];
            if ((int)g->rule < 0 || g->rule >= CIC_RULE_COUNT ||
                !memchr(g->transform, '\0', sizeof g->transform) ||
                !memchr(g->engine, '\0', sizeof g->engine) ||
                !memchr(g->metric, '\0', sizeof g->metric) ||
                !memchr(g->old_value, '\0', sizeof g->old_value) ||
                !memchr(g->new_value, '\0', sizeof g->new_value) ||
                !memchr(g->limit, '\0', sizeof g->limit))
                fuzz_fail("a check with a bad rule or an unterminated field", rc, &d);
            failed += !g->pass;
        }
        if (failed && r.pass)
            fuzz_fail("a check failed but the run passes", rc, &d);
        if (own && !r.pass)
            fuzz_fail("a shipped reference fails against its own run", rc, &d);
    } else {
        fuzz_fail("status neither 0 nor -1", rc, &d);
    }
    free(r.regress);
    unlink(path);
    return 0;
}
