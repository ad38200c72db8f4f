/* SPDX-License-Identifier: MIT */
/* safetensors_read.h: a strict reader of safetensors files, for loading
 * checkpoints and the --dump folders written by cic_safetensors_write
 * (src/report/safetensors.c). Independent of models: it only knows the
 * container.
 *
 * The format: a u64 little-endian header length N; N bytes of UTF-8 JSON,
 * an object mapping each tensor name to {"dtype", "shape", "data_offsets"}
 * plus an optional "__metadata__" object of string values; then the data,
 * row-major and little-endian, offsets relative to the first byte after the
 * header. The file is mapped read-only and tensor data is handed out as
 * pointers into the mapping, never copied.
 *
 * Everything a hostile file can get wrong is an error naming the file and,
 * where there is one, the tensor: a header length beyond the file (or above
 * CIC_STFILE_MAX_HEADER), JSON that does not parse (line and column) or is
 * nested deeper than jansson's parser allows (2048 levels), duplicate
 * names, unknown dtypes or keys, a shape whose byte count is not the
 * length its data_offsets give, offsets outside the data, tensors that
 * overlap, leave a gap or do not reach the end of the file (the data must
 * be covered exactly, in some order), and metadata values that are not
 * strings. A file that is not a regular file (FIFO, device, folder) is
 * refused before it is read, so it cannot block. */
#ifndef CIC_SAFETENSORS_READ_H
#define CIC_SAFETENSORS_READ_H

#include "base.h"

#include <stdbool.h>
#include <stdint.h>

/* The element types of the format that have a fixed byte size (the 8-bit
 * float types are not read). */
enum cic_stfile_dtype {
    CIC_STFILE_BOOL,
    CIC_STFILE_U8,
    CIC_STFILE_I8,
    CIC_STFILE_U16,
    CIC_STFILE_I16,
    CIC_STFILE_F16,
    CIC_STFILE_BF16,
    CIC_STFILE_U32,
    CIC_STFILE_I32,
    CIC_STFILE_F32,
    CIC_STFILE_U64,
    CIC_STFILE_I64,
    CIC_STFILE_F64,
    CIC_STFILE_DTYPE_COUNT
};
/* "BOOL", "U8", ..., as the header spells them */
extern const char *const CIC_STFILE_DTYPE_NAME[CIC_STFILE_DTYPE_COUNT];
/* bytes per element */
extern const unsigned char CIC_STFILE_DTYPE_SIZE[CIC_STFILE_DTYPE_COUNT];

/* Whether t holds floating-point values (F16, BF16, F32, F64). */
bool cic_stfile_dtype_is_float(enum cic_stfile_dtype t);
/* The significand bits of a float dtype (F64 53, F32 24, F16 11, BF16 8);
 * 0 for the integer and BOOL types. */
int cic_stfile_dtype_bits(enum cic_stfile_dtype t);

#define CIC_STFILE_MAX_DIM 8
/* Files mapped at once, at most: two checkpoints of CIC_CKPT_MAX_SHARDS
 * (verify) and the q and input files beside them. */
#define CIC_STFILE_MAX_MAPPED 12288
/* The header length the reference implementation accepts at most (bytes). */
#define CIC_STFILE_MAX_HEADER ((uint64_t)100 << 20)

typedef struct {
    const char *name;             /* NUL-terminated; owned by the file */
    const char *file;             /* the path it was read from (for messages) */
    enum cic_stfile_dtype dtype;
    int ndim;                     /* 0: a scalar */
    int64_t shape[CIC_STFILE_MAX_DIM];
    uint64_t count;               /* elements: the product of shape */
    const unsigned char *data;    /* nbytes little-endian bytes in the mapping;
                                     aligned to the element size only when the
                                     file put it there (use the readers below
                                     for portable access) */
    size_t nbytes;                /* count * element size */
    uint64_t offset;              /* of data, from the start of the file */
} cic_stfile_tensor;

typedef struct cic_stfile cic_stfile;

/* Map path and check it completely (see the top of this file). NULL on any
 * error, with d set (d->file is path; d->line and d->column are set for a
 * JSON syntax error in the header). */
cic_stfile *cic_stfile_create(const char *path, cic_diag *d);
/* Unmap and free; NULL is a no-op. Tensor pointers die with f. The file is
 * compared with what it was when mapped; a change is remembered for the
 * next cic_stfile_check_unchanged. */
void cic_stfile_destroy(cic_stfile *f);

/* Whether the files cicheck read are those it opened: every file mapped
 * now, by device, inode, size and modification time (ns) against what they
 * were when mapped, and every one closed since the last call (checked when
 * it was closed). 0, or -1 with d naming the first that changed ("changed
 * while cicheck was reading it (...)"), which is then forgotten. A run calls
 * it before it judges its results: a checkpoint rewritten in place hands
 * out other values than those checked when it was opened.
 *
 * The first file mapped also installs a SIGBUS handler: a fault inside a
 * mapping (the file was truncated under it) prints "cicheck: FILE: changed
 * while cicheck was reading it ..." and exits 3 at once (nothing is judged
 * or written); any other SIGBUS goes to the handler installed before, or to
 * the default action. */
int cic_stfile_check_unchanged(cic_diag *d);
/* A run begins: from now until its cic_stfile_check_unchanged (which ends
 * the watch), each path keeps the identity of the first file mapped from
 * it, and a later mapping that finds another file there (cut, rewritten
 * or replaced since, between two of the run's openings) fails with d
 * naming it ("changed while cicheck was reading it (...)"), the change
 * remembered for check_unchanged, so the run exits 3 rather than reading
 * the new file as a file of its own. Outside a watch a path may hold a
 * new file each time it is opened. */
void cic_stfile_watch_begin(void);

/* The header as stored: its 8-byte length and its JSON (*len bytes from
 * the start of the mapping). */
const unsigned char *cic_stfile_header(const cic_stfile *f, size_t *len);
/* The file as it was when it was mapped. */
cic_file_id cic_stfile_id(const cic_stfile *f);

/* Tensors in the order of their data in the file (empty tensors that share
 * an offset by name). */
int cic_stfile_count(const cic_stfile *f);
const cic_stfile_tensor *cic_stfile_tensor_at(const cic_stfile *f, int i);
/* By name; NULL when there is none. */
const cic_stfile_tensor *cic_stfile_find(const cic_stfile *f, const char *name);

/* __metadata__ entries, in the order of the header. */
int cic_stfile_meta_count(const cic_stfile *f);
void cic_stfile_meta_at(const char **key, const char **value, const cic_stfile *f, int i);
/* The value of key, or NULL. */
const char *cic_stfile_meta_get(const cic_stfile *f, const char *key);

/* Elements [first, first + n) of t as doubles (F64, F32, BF16 and F16
 * exactly; integer and BOOL values converted, exactly below 2^53). 0, or -1
 * with d set when the range is outside the tensor. */
int cic_stfile_tensor_read_f64(double *out, const cic_stfile_tensor *t, uint64_t first,
                               uint64_t n, cic_diag *d);
/* Elements [first, first + n) of an integer or BOOL tensor (a token id
 * list) as int64. 0, or -1 with d set for a float dtype, a range outside the
 * tensor, or a U64 value above INT64_MAX. */
int cic_stfile_tensor_read_i64(int64_t *out, const cic_stfile_tensor *t, uint64_t first,
                               uint64_t n, cic_diag *d);

#endif
