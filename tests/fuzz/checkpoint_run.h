/* SPDX-License-Identifier: MIT */
/* checkpoint_run.h: one fuzz input as a checkpoint folder, read the way a
 * case with [model] checkpoint reads it. The input's files
 * (tests/fuzz/fuzz_files.h: config.json, model.safetensors, an index and
 * its shards, an [input] file) are written into a fresh folder ck/ under
 * dir, with a case file ck/case.toml:
 *
 *     name = "fuzz-checkpoint"
 *     [model]
 *     checkpoint = "."
 *     tokens = 2          (unless the preamble sets tokens)
 *     samples = 1         (unless the preamble sets samples)
 *     PREAMBLE            (more keys and tables: layers = "1-1", [input])
 *
 * The case is loaded (the checkpoint opened, config.json read, every
 * tensor the layers need looked up) and, when it loads, the model is built
 * (the checkpoint opened again, the weights and the input filled). A
 * preamble with '/' or '\' is not used (every path the case names stays in
 * ck/), nor a case too big to build per input (more than CK_MAX_ROWS
 * tokens in all, or CK_MAX_BYTES by the case's memory estimate).
 *
 * The contract: the loader returns CIC_OK or CIC_EINPUT, a refusal with a
 * message naming a file; the model is built, or not with a message; a
 * built model has every tensor filled (none left for the seeded draw to
 * miss) and every weight and input finite (NaN and Inf are refused).
 *
 * Shared by tests/fuzz/fuzz_checkpoint.c and the replay of its saved inputs
 * (tests/test_fuzz_replay.c). */
#ifndef CIC_FUZZ_CHECKPOINT_RUN_H
#define CIC_FUZZ_CHECKPOINT_RUN_H

#include "fuzz_files.h"

#include "case/case.h"
#include "model/model.h"

#include <math.h>
#include <stdbool.h>
#include <stdlib.h>

#define CK_MAX_ROWS 64
#define CK_MAX_BYTES ((uint64_t)256 << 20)

/* What broke, into a static buffer; the return value of the run below. */
static const char *ck_broken(const char *what, const cic_diag *d)
{
    static char why[2600];
    snprintf(why, sizeof why, "%.200s (diag '%.600s': '%.1100s')", what, d->file, d->msg);
    return why;
}

/* Whether a line of the preamble sets key. */
static bool ck_sets(const ff_input *in, const char *key)
{
    const uint8_t *p = in->pre, *end = in->pre + in->pre_len;
    size_t n = strlen(key);
    while (p < end) {
        const uint8_t *nl = memchr(p, '\n', (size_t)(end - p));
        if ((size_t)(end - p) >= n && !memcmp(p, key, n))
            return true;
        p = nl ? nl + 1 : end;
    }
    return false;
}

/* A built model: every tensor filled, every weight and input finite. */
static const char *ck_check_model(const cic_model *m, const cic_diag *d)
{
    int id;
    size_t i;
    for (id = 0; id < m->n_t; id++) {
        const cic_tensor *t = &m->t[id];
        if (t->fill != CIC_FILL_NONE)
            return ck_broken("a tensor of the built model was left unfilled", d);
        if (t->role == CIC_T_ACT || !t->f32)
            continue;
        for (i = 0; i < (size_t)t->rows * (size_t)t->cols; i++)
            if (!isfinite(t->f32[i]))
                return ck_broken("a weight or input of the built model is not finite", d);
    }
    return NULL;
}

/* Run one input in folder dir (which exists); NULL when the contract held
 * or the input is not used, else what broke. */
static const char *cic_fuzz_checkpoint(const uint8_t *data, size_t size, const char *dir)
{
    static cic_case c; /* about 60 KB: not on the stack */
    char ck[1100], path[1200], head[160];
    const char *broke = NULL;
    ff_input in;
    cic_model *m;
    cic_diag d;
    size_t hl;
    char *text;
    int k, rc;
    memset(&d, 0, sizeof d);
    ff_accepted = 0;
    if (ff_parse(&in, data, size) < 0 || memchr(in.pre, '/', in.pre_len) ||
        memchr(in.pre, '\\', in.pre_len))
        return NULL;
    for (k = 0; k < in.n; k++)
        if (!strcmp(in.f[k].name, "case.toml"))
            return NULL;
    snprintf(ck, sizeof ck, "%.1000s/ck", dir);
    if (ff_fresh_dir(ck) != 0 || ff_write(&in, ck) != 0) {
        ff_rm_rf(ck);
        return NULL; /* a file and a folder of one name, say: not an input */
    }
    hl = (size_t)snprintf(head, sizeof head, "name = \"fuzz-checkpoint\"\n[model]\n"
                          "checkpoint = \".\"\n%s%s",
                          ck_sets(&in, "tokens") ? "" : "tokens = 2\n",
                          ck_sets(&in, "samples") ? "" : "samples = 1\n");
    text = malloc(hl + in.pre_len + 1);
    if (!text)
        abort();
    memcpy(text, head, hl);
    if (in.pre_len)
        memcpy(text + hl, in.pre, in.pre_len);
    snprintf(path, sizeof path, "%s/case.toml", ck);
    if (ff_write_file(path, text, hl + in.pre_len) != 0)
        abort();
    free(text);

    rc = cic_case_load(&c, path, &d);
    if (rc == CIC_EINPUT) {
        if (!d.msg[0] || !memchr(d.msg, '\0', sizeof d.msg) || !d.file[0])
            broke = ck_broken("the case was refused without a message naming a file", &d);
        goto done;
    }
    if (rc != CIC_OK) {
        broke = ck_broken("the loader's status is neither CIC_OK nor CIC_EINPUT", &d);
        goto done;
    }
    if ((int64_t)c.model.tokens * c.model.samples > CK_MAX_ROWS ||
        cic_case_memory_estimate(&c) > CK_MAX_BYTES)
        goto done; /* too big to build once per input */
    memset(&d, 0, sizeof d);
    m = cic_model_create_progress(&c.model, c.readout, NULL, &d);
    if (!m) {
        if (!d.msg[0])
            broke = ck_broken("the model was not built, and no message says why", &d);
        goto done;
    }
    broke = ck_check_model(m, &d);
    ff_accepted = 1;
    cic_model_destroy(m);
done:
    ff_rm_rf(ck);
    return broke;
}

#endif
