/* SPDX-License-Identifier: MIT */
/* qfile_run.h: one fuzz input as a rotation file (q = "file:PATH": the
 * loader's src/case/load_qfile.c, the size and orthogonality checks of
 * cic_xform_check, and the rotation read at the transform's precision by
 * src/xform/qfile.c when the transform is applied). The input is written
 * as dir/q.safetensors and used by two cases (written once by
 * cic_fuzz_qfile_setup) on a seeded rmsnorm model of d_model 8 and 2 heads
 * at 64 bits: a rotation of the residual stream (R1, the file's only
 * tensor, 8 x 8) and of the heads (R2, its tensor "q", 4 x 4).
 *
 * The contract: the loader and the check return CIC_OK or CIC_EINPUT with
 * a message; a case that passes both is transformed (or refused with a
 * message), and the transformed weights are finite (an orthogonal Q keeps
 * them in range).
 *
 * Shared by tests/fuzz/fuzz_qfile.c and the replay of its saved inputs
 * (tests/test_fuzz_replay.c). */
#ifndef CIC_FUZZ_QFILE_RUN_H
#define CIC_FUZZ_QFILE_RUN_H

#include "fuzz_files.h"

#include "case/case.h"
#include "model/model.h"
#include "xform/xform.h"

#include <math.h>
#include <stdlib.h>

#define QF_MODEL "[model]\nblock = \"rmsnorm\"\nd_model = 8\nheads = 2\ntokens = 2\n" \
                 "samples = 1\nlayers = 1\nd_out = 4\n[engines]\nf32 = [\"openblas\"]\n"  \
                 "mpfr_prec = 64\n"

static const char *const qf_cases[2][2] = {
    {"r1.toml", "name = \"fuzz-qfile-r1\"\n" QF_MODEL
                "[[transforms]]\nname = \"r1\"\nkind = \"rotate\"\nq = \"file:q.safetensors\"\n"},
    {"r2.toml", "name = \"fuzz-qfile-r2\"\n" QF_MODEL
                "[[transforms]]\nname = \"r2\"\nkind = \"rotate-heads\"\n"
                "q = \"file:q.safetensors\"\nq_tensor = \"q\"\n"},
};

/* The case files into dir (which exists); 0 or -1. */
static int cic_fuzz_qfile_setup(const char *dir)
{
    char path[1200];
    int k;
    for (k = 0; k < 2; k++) {
        snprintf(path, sizeof path, "%.1000s/%s", dir, qf_cases[k][0]);
        if (ff_write_file(path, qf_cases[k][1], strlen(qf_cases[k][1])) != 0)
            return -1;
    }
    return 0;
}

static const char *qf_broken(const char *what, const char *which, const cic_diag *d)
{
    static char why[2600];
    snprintf(why, sizeof why, "%.300s: %.200s (diag '%.600s': '%.1100s')", which, what,
             d->file, d->msg);
    return why;
}

/* Case k against the file: loaded, checked, transformed. */
static const char *qf_case(const char *path)
{
    static cic_case c; /* about 60 KB: not on the stack */
    const char *broke = NULL;
    cic_model *m, *t;
    cic_diag d;
    int rc, id;
    size_t i;
    memset(&d, 0, sizeof d);
    rc = cic_case_load(&c, path, &d);
    if (rc == CIC_OK)
        rc = cic_xform_check(CIC_CASE_CHAIN(&c), &d);
    if (rc == CIC_EINPUT)
        return d.msg[0] && memchr(d.msg, '\0', sizeof d.msg) && d.file[0]
                   ? NULL
                   : qf_broken("refused without a message naming a file", path, &d);
    if (rc != CIC_OK)
        return qf_broken("a status neither CIC_OK nor CIC_EINPUT", path, &d);
    m = cic_model_create(&c.model, c.readout);
    if (!m)
        return qf_broken("the seeded model was not built", path, &d);
    memset(&d, 0, sizeof d);
    t = cic_xform_apply(m, &c.xf[0], c.mpfr_prec, &d);
    if (!t && !d.msg[0])
        broke = qf_broken("a checked rotation file was not applied, and no message says why",
                          path, &d);
    for (id = 0; t && !broke && id < t->n_t; id++)
        for (i = 0; t->t[id].f32 && i < (size_t)t->t[id].rows * (size_t)t->t[id].cols; i++)
            if (!isfinite(t->t[id].f32[i])) {
                broke = qf_broken("a transformed weight is not finite", path, &d);
                break;
            }
    ff_accepted += t != NULL;
    cic_model_destroy(t);
    cic_model_destroy(m);
    return broke;
}

/* Run one input in dir (set up by cic_fuzz_qfile_setup); NULL when the
 * contract held, else what broke. */
static const char *cic_fuzz_qfile(const uint8_t *data, size_t size, const char *dir)
{
    char path[1200], q[1200];
    const char *broke = NULL;
    int k;
    ff_accepted = 0;
    snprintf(q, sizeof q, "%.1000s/q.safetensors", dir);
    if (ff_write_file(q, data, size) != 0)
        abort();
    for (k = 0; k < 2 && !broke; k++) {
        snprintf(path, sizeof path, "%.1000s/%s", dir, qf_cases[k][0]);
        broke = qf_case(path);
    }
    unlink(q);
    return broke;
}

#endif
