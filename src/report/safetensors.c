/* SPDX-License-Identifier: MIT */
/* safetensors.c: the --dump format (DESIGN.md section 6), so anyone can load
 * the weights, inputs, outputs and truth of a case into PyTorch or NumPy
 * (safetensors.safe_open / numpy.frombuffer) and re-run the same block.
 *
 * Layout: u64 little-endian N; N bytes of UTF-8 JSON
 *   {"__metadata__": {k: v, ...},
 *    "<name>": {"dtype": "F32"|"F64", "shape": [..], "data_offsets": [b, e]}, ...}
 * padded with spaces so N is a multiple of 8 (the data then starts 8-byte
 * aligned, which safetensors readers expect for zero-copy); then the tensor
 * bytes, contiguous, in the order given, offsets relative to the data start.
 * The data is streamed into the temporary file (a dump can hold every weight
 * of every transform), never gathered into one buffer. */
#include "report.h"

#include <errno.h>
#include <jansson.h>
#include <string.h>

static const char *const CIC_DTYPE_NAME[CIC_DT_COUNT] = {"F32", "F64"};
static const size_t CIC_DTYPE_SIZE[CIC_DT_COUNT] = {4, 8};
_Static_assert(sizeof CIC_DTYPE_NAME / sizeof CIC_DTYPE_NAME[0] == CIC_DT_COUNT,
               "dtype name table");

static int host_is_little_endian(void)
{
    const uint16_t one = 1;
    unsigned char b;
    memcpy(&b, &one, 1);
    return b == 1;
}

/* Tensor bytes in little-endian order. On a big-endian host elements are
 * byte-swapped through a small buffer (the file format is little-endian). */
static int write_le(FILE *f, const void *data, size_t bytes, size_t esize)
{
    const unsigned char *p = data;
    unsigned char buf[4096];

    if (bytes == 0)
        return 0;
    if (host_is_little_endian())
        return fwrite(p, 1, bytes, f) == bytes ? 0 : -1;
    while (bytes > 0) {
        size_t chunk = bytes < sizeof buf ? bytes : sizeof buf;
        chunk -= chunk % esize;
        for (size_t i = 0; i < chunk; i += esize)
            for (size_t j = 0; j < esize; j++)
                buf[i + j] = p[i + esize - 1 - j];
        if (fwrite(buf, 1, chunk, f) != chunk)
            return -1;
        p += chunk;
        bytes -= chunk;
    }
    return 0;
}

int cic_safetensors_write(const char *path, const cic_st_tensor *t, int n,
                          const char *const *meta, cic_diag *d)
{
    json_t *hdr = NULL, *md = NULL;
    char *text = NULL;
    size_t *nbytes = NULL;
    size_t hlen, padded, off = 0;
    unsigned char lenbuf[8];
    cic_atomic a = {0};
    bool opened = false;
    int rc = -1;
    const char *where = path ? path : "";

    if (!path || !path[0]) {
        cic_diag_set(d, "", 0, 0, "safetensors: empty file name");
        goto cleanup;
    }
    if (n < 0 || (n > 0 && !t)) {
        cic_diag_set(d, where, 0, 0, "safetensors: invalid tensor list (n = %d)", n);
        goto cleanup;
    }
    nbytes = cic_calloc((size_t)n, sizeof *nbytes);
    hdr = json_object();
    md = json_object();
    if (!nbytes || !hdr || !md)
        goto oom;

    for (int i = 0; meta && meta[i] && meta[i + 1]; i += 2) {
        json_t *v = json_string(meta[i + 1]);
        if (!v || json_object_set_new(md, meta[i], v) != 0) {
            cic_diag_set(d, where, 0, 0,
                         "safetensors: metadata '%s' is not a valid UTF-8 string pair",
                         meta[i]);
            goto cleanup;
        }
    }
    if (json_object_set(hdr, "__metadata__", md) != 0)
        goto oom;

    /* Shapes and sizes are checked before a byte is written. */
    for (int i = 0; i < n; i++) {
        const cic_st_tensor *x = &t[i];
        json_t *o, *shape;
        bool bad;
        size_t count = 1;

        if (!x->name || !x->name[0]) {
            cic_diag_set(d, where, 0, 0, "safetensors: tensor %d has no name", i);
            goto cleanup;
        }
        if (strcmp(x->name, "__metadata__") == 0) {
            cic_diag_set(d, where, 0, 0, "safetensors: tensor %d: name '__metadata__' is reserved", i);
            goto cleanup;
        }
        if (json_object_get(hdr, x->name)) {
            cic_diag_set(d, where, 0, 0, "safetensors: duplicate tensor name '%s'", x->name);
            goto cleanup;
        }
        if ((int)x->dtype < 0 || x->dtype >= CIC_DT_COUNT) {
            cic_diag_set(d, where, 0, 0, "safetensors: tensor '%s': unknown dtype %d",
                         x->name, (int)x->dtype);
            goto cleanup;
        }
        if (x->ndim < 1 || x->ndim > 4) {
            cic_diag_set(d, where, 0, 0,
                         "safetensors: tensor '%s': ndim %d outside 1..4", x->name, x->ndim);
            goto cleanup;
        }
        for (int k = 0; k < x->ndim; k++) {
            if (x->shape[k] < 0) {
                cic_diag_set(d, where, 0, 0,
                             "safetensors: tensor '%s': negative dimension %lld at axis %d",
                             x->name, (long long)x->shape[k], k);
                goto cleanup;
            }
            if ((uint64_t)x->shape[k] > SIZE_MAX ||
                (count = cic_mul_size(count, (size_t)x->shape[k])) == SIZE_MAX) {
                cic_diag_set(d, where, 0, 0, "safetensors: tensor '%s': size overflows",
                             x->name);
                goto cleanup;
            }
        }
        nbytes[i] = cic_mul_size(count, CIC_DTYPE_SIZE[x->dtype]);
        if (nbytes[i] == SIZE_MAX || off > SIZE_MAX - nbytes[i] ||
            off + nbytes[i] > (size_t)INT64_MAX) {
            cic_diag_set(d, where, 0, 0, "safetensors: tensor '%s': size overflows", x->name);
            goto cleanup;
        }
        if (nbytes[i] > 0 && !x->data) {
            cic_diag_set(d, where, 0, 0, "safetensors: tensor '%s' has no data", x->name);
            goto cleanup;
        }

        shape = json_array();
        bad = shape == NULL;
        for (int k = 0; !bad && k < x->ndim; k++)
            bad = json_array_append_new(shape, json_integer((json_int_t)x->shape[k])) != 0;
        if (bad) {
            json_decref(shape);
            goto oom;
        }
        /* "o" steals shape, also when json_pack fails */
        o = json_pack("{s:s, s:o, s:[I, I]}", "dtype", CIC_DTYPE_NAME[x->dtype],
                      "shape", shape, "data_offsets", (json_int_t)off,
                      (json_int_t)(off + nbytes[i]));
        if (!o)
            goto oom;
        if (json_object_set_new(hdr, x->name, o) != 0) {
            cic_diag_set(d, where, 0, 0,
                         "safetensors: tensor name '%s' is not valid UTF-8", x->name);
            goto cleanup;
        }
        off += nbytes[i];
    }

    text = json_dumps(hdr, JSON_COMPACT | JSON_PRESERVE_ORDER);
    if (!text)
        goto oom;
    hlen = strlen(text);
    padded = (hlen + 7) / 8 * 8;
    for (int k = 0; k < 8; k++)
        lenbuf[k] = (unsigned char)((uint64_t)padded >> (8 * k));

    if (cic_atomic_open(&a, path, d) != 0)
        goto cleanup;
    opened = true;
    if (fwrite(lenbuf, 1, 8, a.f) != 8 || fwrite(text, 1, hlen, a.f) != hlen)
        goto write_error;
    for (size_t k = hlen; k < padded; k++)
        if (fputc(' ', a.f) == EOF)
            goto write_error;
    for (int i = 0; i < n; i++)
        if (write_le(a.f, t[i].data, nbytes[i], CIC_DTYPE_SIZE[t[i].dtype]) != 0)
            goto write_error;
    opened = false;
    rc = cic_atomic_commit(&a, d);
    goto cleanup;

write_error:
    cic_diag_set(d, where, 0, 0, "safetensors: write to %s failed: %s", a.tmp,
                 strerror(errno));
    goto cleanup;
oom:
    cic_diag_set(d, where, 0, 0, "safetensors: out of memory");
cleanup:
    if (opened)
        cic_atomic_abort(&a);
    free(text);
    free(nbytes);
    json_decref(md);
    json_decref(hdr);
    return rc;
}
