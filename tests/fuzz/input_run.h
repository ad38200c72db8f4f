/* SPDX-License-Identifier: MIT */
/* input_run.h: one fuzz input as a case's [input] file (src/case/load_input.c
 * checks it when the case loads, cic_input_fill in src/model/checkpoint.c
 * reads it when the model is built): "input", hidden states [samples *
 * tokens, d_model], or "input_ids", token ids [samples, tokens] through a
 * checkpoint's embed_tokens. The input is written as dir/in.safetensors and
 * read by two cases (2 tokens, 2 samples, 1 layer): a seeded rmsnorm
 * model of d_model 8, and the tiny checkpoint of tiny_ckpt.h (dir/fix,
 * written once by cic_fuzz_input_setup).
 *
 * The contract: the loader returns CIC_OK or CIC_EINPUT with a message; a
 * case that loads builds its model, or not with a message; a built model's
 * input is the file's: each hidden state bit for bit the stored value (a
 * float32, finite), or each row the embedding row of its token id.
 *
 * Shared by tests/fuzz/fuzz_input.c and the replay of its saved inputs
 * (tests/test_fuzz_replay.c). */
#ifndef CIC_FUZZ_INPUT_RUN_H
#define CIC_FUZZ_INPUT_RUN_H

#include "fuzz_files.h"
#include "tiny_ckpt.h"

#include "base/safetensors_read.h"
#include "case/case.h"
#include "model/model.h"

#include <math.h>
#include <stdlib.h>

static const char *const in_cases[2][2] = {
    {"seeded.toml", "name = \"fuzz-input-seeded\"\n[model]\nblock = \"rmsnorm\"\nd_model = 8\n"
                    "heads = 2\ntokens = 2\nsamples = 2\nlayers = 1\nd_out = 4\n"
                    "[input]\nfile = \"in.safetensors\"\n"},
    {"ckpt.toml", "name = \"fuzz-input-ckpt\"\n[model]\ncheckpoint = \"fix\"\ntokens = 2\n"
                  "samples = 2\nlayers = 1\n[input]\nfile = \"in.safetensors\"\n"},
};

/* The case files and the checkpoint into dir (which exists); 0 or -1. */
static int cic_fuzz_input_setup(const char *dir)
{
    char path[1200];
    cic_diag d;
    int k;
    memset(&d, 0, sizeof d);
    snprintf(path, sizeof path, "%.1000s/fix", dir);
    if (cic_fuzz_tiny_ckpt(path, false, &d) != 0)
        return -1;
    for (k = 0; k < 2; k++) {
        snprintf(path, sizeof path, "%.1000s/%s", dir, in_cases[k][0]);
        if (ff_write_file(path, in_cases[k][1], strlen(in_cases[k][1])) != 0)
            return -1;
    }
    return 0;
}

static const char *in_broken(const char *what, const char *which, const cic_diag *d)
{
    static char why[2600];
    snprintf(why, sizeof why, "%.300s: %.200s (diag '%.600s': '%.1100s')", which, what,
             d->file, d->msg);
    return why;
}

static bool in_same(float a, float b)
{
    return memcmp(&a, &b, sizeof a) == 0;
}

/* The built model's input against the file at path (which it read). */
static const char *in_check_values(const cic_model *m, const char *path, const char *which)
{
    const cic_tensor *x = &m->t[m->input];
    size_t n = (size_t)x->rows * (size_t)x->cols, i;
    const char *broke = NULL;
    const cic_stfile_tensor *t;
    cic_diag d;
    cic_stfile *f;
    memset(&d, 0, sizeof d);
    f = cic_stfile_create(path, &d);
    if (!f)
        return in_broken("the file the model read does not open", which, &d);
    if ((t = cic_stfile_find(f, "input")) != NULL) {
        double v;
        for (i = 0; !broke && i < n; i++)
            if (t->count != n || cic_stfile_tensor_read_f64(&v, t, i, 1, &d) != 0 ||
                !isfinite(v) || !in_same(x->f32[i], (float)v) || (double)(float)v != v)
                broke = in_broken("a hidden state is not the file's value", which, &d);
    } else if ((t = cic_stfile_find(f, "input_ids")) != NULL) {
        int64_t id;
        size_t rows = (size_t)x->rows, j;
        for (i = 0; !broke && i < rows; i++) {
            if (t->count != rows || x->cols != TINY_D ||
                cic_stfile_tensor_read_i64(&id, t, i, 1, &d) != 0 || id < 0 ||
                id >= TINY_VOCAB) {
                broke = in_broken("a token id was embedded that is not in the file or the "
                                  "vocabulary", which, &d);
                break;
            }
            for (j = 0; j < TINY_D; j++)
                if (!in_same(x->f32[i * TINY_D + j],
                             tiny_value("model.embed_tokens.weight", (size_t)id * TINY_D + j)))
                    broke = in_broken("an input row is not the embedding of its token id", which,
                                      &d);
        }
    } else {
        broke = in_broken("a model was built from a file with neither 'input' nor 'input_ids'",
                          which, &d);
    }
    cic_stfile_destroy(f);
    return broke;
}

/* Run one input in dir (set up by cic_fuzz_input_setup); NULL when the
 * contract held, else what broke. */
static const char *cic_fuzz_input(const uint8_t *data, size_t size, const char *dir)
{
    static cic_case c; /* about 60 KB: not on the stack */
    char path[1200], in[1200];
    const char *broke = NULL;
    cic_model *m;
    cic_diag d;
    int k, rc;
    ff_accepted = 0;
    snprintf(in, sizeof in, "%.1000s/in.safetensors", dir);
    if (ff_write_file(in, data, size) != 0)
        abort();
    for (k = 0; k < 2 && !broke; k++) {
        snprintf(path, sizeof path, "%.1000s/%s", dir, in_cases[k][0]);
        memset(&d, 0, sizeof d);
        rc = cic_case_load(&c, path, &d);
        if (rc == CIC_EINPUT) {
            if (!d.msg[0] || !memchr(d.msg, '\0', sizeof d.msg) || !d.file[0])
                broke = in_broken("refused without a message naming a file", path, &d);
            continue;
        }
        if (rc != CIC_OK) {
            broke = in_broken("the loader's status is neither CIC_OK nor CIC_EINPUT", path, &d);
            break;
        }
        memset(&d, 0, sizeof d);
        m = cic_model_create_progress(&c.model, c.readout, NULL, &d);
        if (!m) {
            if (!d.msg[0])
                broke = in_broken("the model was not built, and no message says why", path, &d);
            continue;
        }
        broke = in_check_values(m, in, path);
        ff_accepted++;
        cic_model_destroy(m);
    }
    unlink(in);
    return broke;
}

#endif
