/* SPDX-License-Identifier: MIT */
/* safetensors.c: the --dump format (DESIGN.md section 6), so anyone can load
 * the weights, inputs, outputs and truth of a case into PyTorch or NumPy
 * (safetensors.safe_open / numpy.frombuffer) and re-run the same block.
 *
 * Layout: u64 little-endian N; N bytes of UTF-8 JSON
 *   {"__metadata__": {k: v, ...},
 *    "<name>": {"dtype": "F32"|"F64"|"I8"|"I32", "shape": [..], "data_offsets": [b, e]},
 *    ...}
 * padded with spaces so N is a multiple of 8 (the data then starts 8-byte
 * aligned, which safetensors readers expect for zero-copy); then the tensor
 * bytes, contiguous, in the order given, offsets relative to the data start.
 * The data is streamed into the temporary file (a dump can hold every weight
 * of every transform), never gathered into one buffer. */
#include "report.h"

#include <errno.h>
#include <jansson.h>
#include <string.h>

static const char *const CIC_DTYPE_NAME[] = {
    [CIC_DT_F32] = "F32", [CIC_DT_F64] = "F64", [CIC_DT_I8] = "I8", [CIC_DT_I32] = "I32"};
static const size_t CIC_DTYPE_SIZE[] = {
    [CIC_DT_F32] = 4, [CIC_DT_F64] = 8, [CIC_DT_I8] = 1, [CIC_DT_I32] = 4};
_Static_assert(sizeof CIC_DTYPE_NAME / sizeof CIC_DTYPE_NAME[0] == CIC_DT_COUNT,
               "dtype name table");
_Static_assert(sizeof CIC_DTYPE_SIZE / sizeof CIC_DTYPE_SIZE[0] == CIC_DT_COUNT,
               "dtype size table");

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

static int oom(const char *where, cic_diag *d)
{
    cic_diag_set(d, where, 0, 0, "safetensors: out of memory");
    return -1;
}

/* The "__metadata__" object from the key, value list meta (may be NULL). */
static int metadata(json_t *hdr, const char *const *meta, const char *where, cic_diag *d)
{
    json_t *md = json_object();
    if (!md)
        return oom(where, d);
    for (int i = 0; meta && meta[i] && meta[i + 1]; i += 2) {
        json_t *v = json_string(meta[i + 1]);
        if (!v || json_object_set_new(md, meta[i], v) != 0) {
            cic_diag_set(d, where, 0, 0,
                         "safetensors: metadata '%s' is not a valid UTF-8 string pair",
                         meta[i]);
            json_decref(md);
            return -1;
        }
    }
    if (json_object_set_new(hdr, "__metadata__", md) != 0)
        return oom(where, d);
    return 0;
}

/* Tensor i checked before a byte is written: a name that is neither empty,
 * reserved nor taken (hdr holds the earlier ones), a known dtype, 1..4
 * dimensions, none negative, a byte size *nbytes that fits beside the off
 * bytes before it, and data when there are bytes. */
static int tensor_check(const cic_st_tensor *x, int i, const json_t *hdr, size_t off,
                        size_t *nbytes, const char *where, cic_diag *d)
{
    size_t count = 1;
    if (!x->name || !x->name[0]) {
        cic_diag_set(d, where, 0, 0, "safetensors: tensor %d has no name", i);
        return -1;
    }
    if (strcmp(x->name, "__metadata__") == 0) {
        cic_diag_set(d, where, 0, 0, "safetensors: tensor %d: name '__metadata__' is reserved", i);
        return -1;
    }
    if (json_object_get(hdr, x->name)) {
        cic_diag_set(d, where, 0, 0, "safetensors: duplicate tensor name '%s'", x->name);
        return -1;
    }
    if ((int)x->dtype < 0 || x->dtype >= CIC_DT_COUNT) {
        cic_diag_set(d, where, 0, 0, "safetensors: tensor '%s': unknown dtype %d", x->name,
                     (int)x->dtype);
        return -1;
    }
    if (x->ndim < 1 || x->ndim > 4) {
        cic_diag_set(d, where, 0, 0, "safetensors: tensor '%s': ndim %d outside 1..4", x->name,
                     x->ndim);
        return -1;
    }
    for (int k = 0; k < x->ndim; k++) {
        if (x->shape[k] < 0) {
            cic_diag_set(d, where, 0, 0,
                         "safetensors: tensor '%s': negative dimension %lld at axis %d",
                         x->name, (long long)x->shape[k], k);
            return -1;
        }
        if ((uint64_t)x->shape[k] > SIZE_MAX ||
            (count = cic_mul_size(count, (size_t)x->shape[k])) == SIZE_MAX) {
            cic_diag_set(d, where, 0, 0, "safetensors: tensor '%s': size overflows", x->name);
            return -1;
        }
    }
    *nbytes = cic_mul_size(count, CIC_DTYPE_SIZE[x->dtype]);
    if (*nbytes == SIZE_MAX || off > SIZE_MAX - *nbytes || off + *nbytes > (size_t)INT64_MAX) {
        cic_diag_set(d, where, 0, 0, "safetensors: tensor '%s': size overflows", x->name);
        return -1;
    }
    if (*nbytes > 0 && !x->data) {
        cic_diag_set(d, where, 0, 0, "safetensors: tensor '%s' has no data", x->name);
        return -1;
    }
    return 0;
}

/* The header entry of a checked tensor: dtype, shape, data_offsets [off,
 * off + nbytes]. */
static int tensor_entry(json_t *hdr, const cic_st_tensor *x, size_t off, size_t nbytes,
                        const char *where, cic_diag *d)
{
    json_t *o, *shape = json_array();
    bool bad = shape == NULL;
    for (int k = 0; !bad && k < x->ndim; k++)
        bad = json_array_append_new(shape, json_integer((json_int_t)x->shape[k])) != 0;
    if (bad) {
        json_decref(shape);
        return oom(where, d);
    }
    /* "o" steals shape, also when json_pack fails */
    o = json_pack("{s:s, s:o, s:[I, I]}", "dtype", CIC_DTYPE_NAME[x->dtype], "shape", shape,
                  "data_offsets", (json_int_t)off, (json_int_t)(off + nbytes));
    if (!o)
        return oom(where, d);
    if (json_object_set_new(hdr, x->name, o) != 0) {
        cic_diag_set(d, where, 0, 0, "safetensors: tensor name '%s' is not valid UTF-8",
                     x->name);
        return -1;
    }
    return 0;
}

/* The JSON header of the n tensors (compact, in the order given), with the
 * byte size of each in nbytes; NULL with d set when one is refused. */
static char *header_text(const cic_st_tensor *t, int n, const char *const *meta,
                         size_t *nbytes, const char *where, cic_diag *d)
{
    json_t *hdr = json_object();
    char *text = NULL;
    size_t off = 0;

    if (!hdr) {
        oom(where, d);
        return NULL;
    }
    if (metadata(hdr, meta, where, d) != 0)
        goto cleanup;
    for (int i = 0; i < n; i++) {
        if (tensor_check(&t[i], i, hdr, off, &nbytes[i], where, d) != 0 ||
            tensor_entry(hdr, &t[i], off, nbytes[i], where, d) != 0)
            goto cleanup;
        off += nbytes[i];
    }
    text = json_dumps(hdr, JSON_COMPACT | JSON_PRESERVE_ORDER);
    if (!text)
        oom(where, d);
cleanup:
    json_decref(hdr);
    return text;
}

/* The file: header length, header padded with spaces to a multiple of 8,
 * then every tensor's bytes, atomically. */
static int write_file(const char *path, const char *text, const cic_st_tensor *t, int n,
                      const size_t *nbytes, const char *where, cic_diag *d)
{
    size_t hlen = strlen(text), padded = (hlen + 7) / 8 * 8;
    unsigned char lenbuf[8];
    cic_atomic a = {0};

    for (int k = 0; k < 8; k++)
        lenbuf[k] = (unsigned char)((uint64_t)padded >> (8 * k));
    if (cic_atomic_open(&a, path, d) != 0)
        return -1;
    if (fwrite(lenbuf, 1, 8, a.f) != 8 || fwrite(text, 1, hlen, a.f) != hlen)
        goto write_error;
    for (size_t k = hlen; k < padded; k++)
        if (fputc(' ', a.f) == EOF)
            goto write_error;
    for (int i = 0; i < n; i++)
        if (write_le(a.f, t[i].data, nbytes[i], CIC_DTYPE_SIZE[t[i].dtype]) != 0)
            goto write_error;
    return cic_atomic_commit(&a, d);

write_error:
    cic_diag_set(d, where, 0, 0, "safetensors: write to %s failed: %s", a.tmp,
                 strerror(errno));
    cic_atomic_abort(&a);
    return -1;
}

int cic_safetensors_write(const char *path, const cic_st_tensor *t, int n,
                          const char *const *meta, cic_diag *d)
{
    const char *where = path ? path : "";
    size_t *nbytes;
    char *text;
    int rc;

    if (!path || !path[0]) {
        cic_diag_set(d, "", 0, 0, "safetensors: empty file name");
        return -1;
    }
    if (n < 0 || (n > 0 && !t)) {
        cic_diag_set(d, where, 0, 0, "safetensors: invalid tensor list (n = %d)", n);
        return -1;
    }
    nbytes = cic_calloc((size_t)n, sizeof *nbytes);
    if (!nbytes)
        return oom(where, d);
    text = header_text(t, n, meta, nbytes, where, d);
    rc = text ? write_file(path, text, t, n, nbytes, where, d) : -1;
    free(text);
    free(nbytes);
    return rc;
}
