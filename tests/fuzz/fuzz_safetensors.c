/* SPDX-License-Identifier: MIT */
/* fuzz_safetensors.c: libFuzzer target for the safetensors reader
 * (src/base/safetensors_read.c). Each input is written as a file and
 * opened. Besides the sanitizers (and LeakSanitizer after every input), the
 * contract of safetensors_read.h is asserted: a refusal carries a message
 * naming the file; an accepted file's tensors lie inside it, tile the data
 * after the header exactly in the order given, have nbytes = count * size,
 * are found by name, and every element reads; and an accepted file of
 * F32/F64 tensors of 1 to 4 dimensions, rewritten by the project's writer
 * (cic_safetensors_write), reads back with the same names, shapes, bytes
 * and metadata.
 *
 * Built and run by scripts/fuzz.sh safetensors; seeds are the files of a
 * --dump. Reproduce a saved input: build-fuzz/fuzz_safetensors FILE. */
#include "fuzz_tmp.h"

#include "base/safetensors_read.h"
#include "report/report.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char path[600], path2[600];

static void fuzz_fail(const char *what, const cic_diag *d)
{
    fprintf(stderr, "fuzz_safetensors: contract broken: %s (diag '%s': '%s')\n", what,
            d->file, d->msg);
    abort();
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    snprintf(path, sizeof path, "%s/in.safetensors", fuzz_tmp_dir("safetensors"));
    snprintf(path2, sizeof path2, "%s/rewritten.safetensors", fuzz_tmp_dir("safetensors"));
    return 0;
}

/* Rewrite f with the writer and read it back: the same content. */
static void roundtrip(const cic_stfile *f)
{
    int n = cic_stfile_count(f), nm = cic_stfile_meta_count(f), i, k;
    cic_st_tensor *t = calloc((size_t)n + 1, sizeof *t);
    const char **meta = calloc(2 * (size_t)nm + 1, sizeof *meta);
    cic_stfile *g;
    cic_diag d;
    if (!t || !meta)
        abort();
    for (i = 0; i < n; i++) {
        const cic_stfile_tensor *x = cic_stfile_tensor_at(f, i);
        if ((x->dtype != CIC_STFILE_F32 && x->dtype != CIC_STFILE_F64) || x->ndim < 1 ||
            x->ndim > 4)
            goto done; /* what the writer does not write */
        t[i].name = x->name;
        t[i].dtype = x->dtype == CIC_STFILE_F32 ? CIC_DT_F32 : CIC_DT_F64;
        t[i].ndim = x->ndim;
        for (k = 0; k < x->ndim; k++)
            t[i].shape[k] = x->shape[k];
        t[i].data = x->data; /* little-endian bytes: this host's order here */
    }
    for (i = 0; i < nm; i++)
        cic_stfile_meta_at(&meta[2 * i], &meta[2 * i + 1], f, i);
    memset(&d, 0, sizeof d);
    if (cic_safetensors_write(path2, t, n, meta, &d) != 0)
        fuzz_fail("the writer refused what the reader accepted", &d);
    g = cic_stfile_create(path2, &d);
    if (!g)
        fuzz_fail("the reader refused what the writer wrote", &d);
    if (cic_stfile_count(g) != n || cic_stfile_meta_count(g) != nm)
        fuzz_fail("the rewritten file has other tensors or metadata", &d);
    for (i = 0; i < n; i++) {
        const cic_stfile_tensor *x = cic_stfile_tensor_at(f, i), *y = cic_stfile_tensor_at(g, i);
        if (strcmp(x->name, y->name) || x->dtype != y->dtype || x->ndim != y->ndim ||
            x->nbytes != y->nbytes || memcmp(x->shape, y->shape, sizeof x->shape) ||
            (x->nbytes && memcmp(x->data, y->data, x->nbytes)))
            fuzz_fail("a rewritten tensor differs", &d);
    }
    for (i = 0; i < nm; i++) {
        const char *v = cic_stfile_meta_get(g, meta[2 * i]);
        if (!v || strcmp(v, meta[2 * i + 1]))
            fuzz_fail("rewritten metadata differs", &d);
    }
    cic_stfile_destroy(g);
    unlink(path2);
done:
    free(t);
    free(meta);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    cic_diag d;
    cic_stfile *f;
    FILE *fp = fopen(path, "wb");
    int i, n;
    uint64_t at, hlen;
    if (!fp || (size && fwrite(data, 1, size, fp) != size) || fclose(fp) != 0)
        abort();
    memset(&d, 0, sizeof d);
    f = cic_stfile_create(path, &d);
    if (!f) {
        if (!d.msg[0] || !memchr(d.msg, '\0', sizeof d.msg))
            fuzz_fail("refused without a message", &d);
        if (strcmp(d.file, path) != 0)
            fuzz_fail("the message does not name the file", &d);
        unlink(path);
        return 0;
    }
    n = cic_stfile_count(f);
    for (i = 0, hlen = 0; i < 8; i++)
        hlen |= (uint64_t)data[i] << (8 * i);
    at = size;
    for (i = n - 1; i >= 0; i--) {
        /* walking back from the end of the file: each tensor ends where the
         * next begins */
        const cic_stfile_tensor *x = cic_stfile_tensor_at(f, i);
        double v;
        if (x->offset + x->nbytes != at || x->offset > size)
            fuzz_fail("tensors do not tile the data", &d);
        if (x->nbytes != x->count * CIC_STFILE_DTYPE_SIZE[x->dtype])
            fuzz_fail("nbytes is not count * size", &d);
        if (cic_stfile_find(f, x->name) != x)
            fuzz_fail("a tensor is not found by its name", &d);
        if (x->count &&
            (cic_stfile_tensor_read_f64(&v, x, 0, 1, &d) != 0 ||
             cic_stfile_tensor_read_f64(&v, x, x->count - 1, 1, &d) != 0))
            fuzz_fail("an element does not read", &d);
        if (cic_stfile_tensor_read_f64(&v, x, x->count, 1, &d) == 0)
            fuzz_fail("an element past the end reads", &d);
        at = x->offset;
    }
    if (at != 8 + hlen)
        fuzz_fail("the data does not start right after the header", &d);
    for (i = 0; i < cic_stfile_meta_count(f); i++) {
        const char *k, *v;
        cic_stfile_meta_at(&k, &v, f, i);
        if (cic_stfile_meta_get(f, k) != v)
            fuzz_fail("metadata not found by its key", &d);
    }
    roundtrip(f);
    cic_stfile_destroy(f);
    unlink(path);
    return 0;
}
