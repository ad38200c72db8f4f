/* SPDX-License-Identifier: MIT */
/* safetensors_read.c: map a safetensors file and check every claim its
 * header makes before handing out a byte (safetensors_read.h).
 *
 * Order of the checks: the file is a regular file of at least 8 bytes; the
 * header length fits in it and under the cap; the header parses (jansson,
 * duplicate keys rejected, nesting capped by jansson's parser); it is an
 * object whose "__metadata__" holds strings and whose every other entry is
 * exactly {dtype, shape, data_offsets} with a known dtype, non-negative
 * integer dimensions and offsets; the shape's byte count equals the length
 * the offsets give; and, sorted by offset, the tensors tile the data from
 * its first byte to the end of the file with no gap and no overlap. Only
 * then are the tensors published. */
#include "safetensors_read.h"
#include "json_type.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* Designated initializers, unsized: each entry at its dtype; the header's
 * sized declaration and the asserts below catch a missing last entry,
 * test_safetensors every other. */
const char *const CIC_STFILE_DTYPE_NAME[] = {
    [CIC_STFILE_BOOL] = "BOOL", [CIC_STFILE_U8] = "U8", [CIC_STFILE_I8] = "I8",
    [CIC_STFILE_U16] = "U16", [CIC_STFILE_I16] = "I16", [CIC_STFILE_F16] = "F16",
    [CIC_STFILE_BF16] = "BF16", [CIC_STFILE_U32] = "U32", [CIC_STFILE_I32] = "I32",
    [CIC_STFILE_F32] = "F32", [CIC_STFILE_U64] = "U64", [CIC_STFILE_I64] = "I64",
    [CIC_STFILE_F64] = "F64",
};
const unsigned char CIC_STFILE_DTYPE_SIZE[] = {
    [CIC_STFILE_BOOL] = 1, [CIC_STFILE_U8] = 1, [CIC_STFILE_I8] = 1, [CIC_STFILE_U16] = 2,
    [CIC_STFILE_I16] = 2, [CIC_STFILE_F16] = 2, [CIC_STFILE_BF16] = 2, [CIC_STFILE_U32] = 4,
    [CIC_STFILE_I32] = 4, [CIC_STFILE_F32] = 4, [CIC_STFILE_U64] = 8, [CIC_STFILE_I64] = 8,
    [CIC_STFILE_F64] = 8,
};
_Static_assert(sizeof CIC_STFILE_DTYPE_NAME / sizeof CIC_STFILE_DTYPE_NAME[0] ==
                   CIC_STFILE_DTYPE_COUNT, "dtype name table");
_Static_assert(sizeof CIC_STFILE_DTYPE_SIZE / sizeof CIC_STFILE_DTYPE_SIZE[0] ==
                   CIC_STFILE_DTYPE_COUNT, "dtype size table");

struct cic_stfile {
    char *path;
    const unsigned char *map;  /* the whole file, PROT_READ */
    size_t size;
    cic_file_id id;            /* the file when it was mapped */
    int slot;                  /* in g_slot; -1: none */
    uint64_t hlen;             /* the header's JSON bytes */
    cic_stfile_tensor *t;      /* by offset */
    int n;
    const cic_stfile_tensor **by_name; /* into t, sorted by name */
    char **meta;               /* key, value, key, value, ... */
    int n_meta;
    char *names;               /* every tensor name, NUL-separated */
};

#define ST_ALLOWED_KEYS "dtype, shape, data_offsets"

/* ---- the files mapped now, and whether one changed under cicheck ----
 *
 * A checkpoint is mapped, never copied, and the model reads its weights
 * from the mapping when it needs them (src/model/checkpoint.c even gives
 * pages back, to be read again from the file). A file truncated meanwhile
 * makes the next read of a page past its new end a SIGBUS; a file
 * rewritten in place hands out other values than those checked. So every
 * mapping is registered with its file's identity at open: the SIGBUS
 * handler below turns a fault inside one of them into an error naming the
 * file (exit 3), and the identity is compared again when the file is
 * closed and when a run is about to judge its results
 * (cic_stfile_check_unchanged).
 *
 * The handler must be async-signal-safe: it reads a fixed table of ranges
 * (lock-free atomics; a slot's lo is published last and cleared first) and
 * calls write(2) and _exit(2) alone. A fault elsewhere goes to the handler
 * that was there before (a sanitizer's) or to the default action, so real
 * bugs still report. Faults are delivered to the thread that took them:
 * the engines' worker threads need nothing more. */

typedef struct {
    _Atomic uintptr_t lo, hi;  /* [lo, hi) of the mapping; lo 0: a free slot */
    const char *_Atomic path;  /* the cic_stfile's copy, alive while the slot is used */
} st_slot;

/* Process-wide on purpose (base/rt.h): the SIGBUS handler belongs to the
 * process and must find the mapping a fault hit whichever run made it. */
static st_slot g_slot[CIC_STFILE_MAX_MAPPED];
static const cic_stfile *g_owner[CIC_STFILE_MAX_MAPPED]; /* under g_lock */
static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static struct sigaction g_prev_bus;
/* the first file found changed when it was closed, since the last check
 * ("" none); under g_lock */
static char g_changed_file[1024], g_changed_msg[512];

static void put(const char *s)
{
    size_t n = 0;
    while (s[n])
        n++;
    while (n > 0) {
        ssize_t k = write(2, s, n);
        if (k <= 0)
            return;
        s += k;
        n -= (size_t)k;
    }
}

static void on_sigbus(int sig, siginfo_t *si, void *uc)
{
    uintptr_t a = (uintptr_t)si->si_addr;
    int i;
    for (i = 0; i < CIC_STFILE_MAX_MAPPED; i++) {
        uintptr_t lo = atomic_load_explicit(&g_slot[i].lo, memory_order_acquire);
        if (lo && a >= lo && a < atomic_load_explicit(&g_slot[i].hi, memory_order_relaxed)) {
            const char *path = atomic_load_explicit(&g_slot[i].path, memory_order_relaxed);
            put("cicheck: ");
            put(path ? path : "a mapped file");
            put(": changed while cicheck was reading it (truncated, or rewritten in place); "
                "nothing was judged or written\n");
            _exit(CIC_EINTERNAL);
        }
    }
    /* not ours: the handler before, or the default action (a core dump) */
    if (g_prev_bus.sa_flags & SA_SIGINFO) {
        g_prev_bus.sa_sigaction(sig, si, uc);
    } else if (g_prev_bus.sa_handler != SIG_DFL && g_prev_bus.sa_handler != SIG_IGN) {
        g_prev_bus.sa_handler(sig);
    } else {
        struct sigaction dfl;
        memset(&dfl, 0, sizeof dfl);
        dfl.sa_handler = SIG_DFL;
        sigemptyset(&dfl.sa_mask);
        sigaction(sig, &dfl, NULL);
        if (si->si_code <= 0)
            raise(sig); /* sent, not a fault: a fault repeats on return */
    }
}

static void install_handler(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_sigbus;
    sa.sa_flags = SA_SIGINFO | SA_RESTART;
    sigemptyset(&sa.sa_mask);
    if (sigaction(SIGBUS, &sa, &g_prev_bus) != 0)
        memset(&g_prev_bus, 0, sizeof g_prev_bus); /* none installed: faults stay fatal */
}

/* f's mapping into the table; 0, or -1 with d set when the table is full. */
static int slot_add(cic_stfile *f, cic_diag *d)
{
    int i;
    pthread_once(&g_once, install_handler);
    pthread_mutex_lock(&g_lock);
    for (i = 0; i < CIC_STFILE_MAX_MAPPED; i++)
        if (!atomic_load(&g_slot[i].lo)) {
            atomic_store(&g_slot[i].path, f->path);
            atomic_store(&g_slot[i].hi, (uintptr_t)f->map + f->size);
            atomic_store_explicit(&g_slot[i].lo, (uintptr_t)f->map, memory_order_release);
            g_owner[i] = f;
            f->slot = i;
            break;
        }
    pthread_mutex_unlock(&g_lock);
    if (i == CIC_STFILE_MAX_MAPPED) {
        cic_diag_set(d, f->path, 0, 0, "more than %d safetensors files mapped at once",
                     CIC_STFILE_MAX_MAPPED);
        return -1;
    }
    return 0;
}

/* Whether now is the file then was; when not, what happened to it into
 * msg. */
static bool id_same(const cic_file_id *then, const cic_file_id *now, char *msg, size_t cap)
{
    if (now->dev != then->dev || now->ino != then->ino)
        snprintf(msg, cap, "replaced by another file while cicheck was reading it");
    else if (now->size != then->size)
        snprintf(msg, cap, "changed while cicheck was reading it (%llu bytes, %llu when it was "
                 "opened)", (unsigned long long)now->size, (unsigned long long)then->size);
    else if (!cic_file_id_equal(now, then))
        snprintf(msg, cap, "changed while cicheck was reading it (rewritten in place: "
                 "modified after it was opened)");
    else
        return true;
    return false;
}

/* Whether the file at f->path is still the one mapped; when not, what
 * happened to it into msg. */
static bool same_file(const cic_stfile *f, char *msg, size_t cap)
{
    cic_file_id now;
    if (cic_file_id_get(&now, f->path) != 0) {
        snprintf(msg, cap, "removed or renamed while cicheck was reading it");
        return false;
    }
    return id_same(&f->id, &now, msg, cap);
}

/* The first change found since the last check, kept for it (under g_lock). */
static void remember_change(const char *path, const char *msg)
{
    if (g_changed_file[0])
        return;
    cic_strlcpy(g_changed_file, path, sizeof g_changed_file);
    cic_strlcpy(g_changed_msg, msg, sizeof g_changed_msg);
}

/* ---- the files a run has opened (cic_stfile_watch_begin) ----
 * A run opens a checkpoint more than once (verify: config, Q, layers); a
 * file cut or rewritten between two openings must not read as a file of
 * its own. Each path keeps its first identity; under g_lock. */
typedef struct {
    char *path;
    cic_file_id id;
} seen_file;
static seen_file *g_seen;
static size_t g_n_seen, g_cap_seen;
static bool g_watch;

static void seen_clear(void)
{
    size_t i;
    for (i = 0; i < g_n_seen; i++)
        free(g_seen[i].path);
    free(g_seen);
    g_seen = NULL;
    g_n_seen = g_cap_seen = 0;
}

void cic_stfile_watch_begin(void)
{
    pthread_mutex_lock(&g_lock);
    seen_clear();
    g_watch = true;
    pthread_mutex_unlock(&g_lock);
}

/* path, found as id, against its first opening in the watch: 0, or -1
 * with d set (and the change remembered) when it is another file now. A
 * path the table has no room for is not watched. */
static int seen_check(const char *path, const cic_file_id *id, cic_diag *d)
{
    char msg[sizeof g_changed_msg];
    size_t i, cap = g_cap_seen ? 2 * g_cap_seen : 16;
    seen_file *t;
    int rc = 0;
    pthread_mutex_lock(&g_lock);
    for (i = 0; g_watch && i < g_n_seen && strcmp(g_seen[i].path, path); i++)
        ;
    if (g_watch && i < g_n_seen && !id_same(&g_seen[i].id, id, msg, sizeof msg)) {
        remember_change(path, msg);
        cic_diag_set(d, path, 0, 0, "%s; nothing judged from it holds", msg);
        rc = -1;
    } else if (g_watch && i == g_n_seen) {
        if (g_n_seen == g_cap_seen && (t = realloc(g_seen, cap * sizeof *t)) != NULL) {
            g_seen = t;
            g_cap_seen = cap;
        }
        if (g_n_seen < g_cap_seen && (g_seen[g_n_seen].path = strdup(path)) != NULL)
            g_seen[g_n_seen++].id = *id;
    }
    pthread_mutex_unlock(&g_lock);
    return rc;
}

/* f leaves the table; its file is checked once more (remembered if it
 * changed, for the next cic_stfile_check_unchanged). */
static void slot_remove(cic_stfile *f)
{
    char msg[sizeof g_changed_msg];
    bool same;
    if (f->slot < 0)
        return;
    same = same_file(f, msg, sizeof msg);
    pthread_mutex_lock(&g_lock);
    atomic_store_explicit(&g_slot[f->slot].lo, 0, memory_order_release);
    atomic_store(&g_slot[f->slot].path, NULL);
    g_owner[f->slot] = NULL;
    if (!same)
        remember_change(f->path, msg);
    pthread_mutex_unlock(&g_lock);
    f->slot = -1;
}

static int find_dtype(const char *s)
{
    int k;
    for (k = 0; k < CIC_STFILE_DTYPE_COUNT; k++)
        if (!strcmp(s, CIC_STFILE_DTYPE_NAME[k]))
            return k;
    return -1;
}

/* A non-negative JSON integer. */
static bool json_count(const json_t *v, uint64_t *out)
{
    if (!json_is_integer(v) || json_integer_value(v) < 0)
        return false;
    *out = (uint64_t)json_integer_value(v);
    return true;
}

/* One tensor entry of the header into t (name and data pointer set by the
 * caller). 0, or -1 with d set. */
static int parse_entry(cic_stfile_tensor *t, const char *path, const char *name,
                       json_t *e, uint64_t data_len, uint64_t *begin, uint64_t *end,
                       cic_diag *d)
{
    json_t *dt, *shape, *offs, *v;
    const char *key;
    size_t i;
    int k;
    uint64_t count = 1, dim, nbytes;

    if (!json_is_object(e)) {
        cic_diag_set(d, path, 0, 0, "tensor '%s': entry is %s; an object {" ST_ALLOWED_KEYS
                     "} expected", name, cic_json_type_name(e));
        return -1;
    }
    json_object_foreach(e, key, v) {
        if (strcmp(key, "dtype") && strcmp(key, "shape") && strcmp(key, "data_offsets")) {
            cic_diag_set(d, path, 0, 0, "tensor '%s': unknown key '%s' (allowed: "
                         ST_ALLOWED_KEYS ")", name, key);
            return -1;
        }
    }
    dt = json_object_get(e, "dtype");
    shape = json_object_get(e, "shape");
    offs = json_object_get(e, "data_offsets");
    if (!dt || !shape || !offs) {
        cic_diag_set(d, path, 0, 0, "tensor '%s': no '%s'", name,
                     !dt ? "dtype" : !shape ? "shape" : "data_offsets");
        return -1;
    }
    if (!json_is_string(dt)) {
        cic_diag_set(d, path, 0, 0, "tensor '%s': dtype is %s; a string expected", name,
                     cic_json_type_name(dt));
        return -1;
    }
    k = find_dtype(json_string_value(dt));
    if (k < 0) {
        cic_diag_set(d, path, 0, 0, "tensor '%s': unsupported dtype '%s' (allowed: BOOL, U8, "
                     "I8, U16, I16, F16, BF16, U32, I32, F32, U64, I64, F64)", name,
                     json_string_value(dt));
        return -1;
    }
    t->dtype = (enum cic_stfile_dtype)k;
    if (!json_is_array(shape)) {
        cic_diag_set(d, path, 0, 0, "tensor '%s': shape is %s; an array of sizes expected",
                     name, cic_json_type_name(shape));
        return -1;
    }
    if (json_array_size(shape) > CIC_STFILE_MAX_DIM) {
        cic_diag_set(d, path, 0, 0, "tensor '%s': %zu dimensions; at most %d are read", name,
                     json_array_size(shape), CIC_STFILE_MAX_DIM);
        return -1;
    }
    t->ndim = (int)json_array_size(shape);
    json_array_foreach(shape, i, v) {
        if (!json_count(v, &dim)) {
            cic_diag_set(d, path, 0, 0, "tensor '%s': shape[%zu] is %s; a size >= 0 expected",
                         name, i, json_is_integer(v) ? "negative" : cic_json_type_name(v));
            return -1;
        }
        t->shape[i] = (int64_t)dim;
        /* a zero dimension makes the product 0 whatever follows */
        if (count != 0 && dim != 0 && count > UINT64_MAX / dim) {
            cic_diag_set(d, path, 0, 0, "tensor '%s': shape has more elements than 2^64",
                         name);
            return -1;
        }
        count *= dim;
    }
    if (!json_is_array(offs) || json_array_size(offs) != 2 ||
        !json_count(json_array_get(offs, 0), begin) ||
        !json_count(json_array_get(offs, 1), end)) {
        cic_diag_set(d, path, 0, 0, "tensor '%s': data_offsets must be [begin, end], two "
                     "integers >= 0", name);
        return -1;
    }
    if (*begin > *end) {
        cic_diag_set(d, path, 0, 0, "tensor '%s': data_offsets [%llu, %llu] end before they "
                     "begin", name, (unsigned long long)*begin, (unsigned long long)*end);
        return -1;
    }
    if (*end > data_len) {
        cic_diag_set(d, path, 0, 0, "tensor '%s': data_offsets [%llu, %llu] outside the data "
                     "(%llu bytes after the header)", name, (unsigned long long)*begin,
                     (unsigned long long)*end, (unsigned long long)data_len);
        return -1;
    }
    nbytes = count > UINT64_MAX / CIC_STFILE_DTYPE_SIZE[k] ? UINT64_MAX
                                                            : count * CIC_STFILE_DTYPE_SIZE[k];
    if (nbytes != *end - *begin) {
        char dims[CIC_STFILE_MAX_DIM * 22 + 3];
        size_t at = 0;
        dims[at++] = '[';
        dims[at] = '\0';
        for (i = 0; i < (size_t)t->ndim; i++)
            at += (size_t)snprintf(dims + at, sizeof dims - at, "%s%lld", i ? ", " : "",
                                   (long long)t->shape[i]);
        snprintf(dims + at, sizeof dims - at, "]");
        if (nbytes == UINT64_MAX)
            cic_diag_set(d, path, 0, 0, "tensor '%s': %s shape %s overflows a byte count, "
                         "data_offsets give %llu bytes", name, CIC_STFILE_DTYPE_NAME[k], dims,
                         (unsigned long long)(*end - *begin));
        else
            cic_diag_set(d, path, 0, 0, "tensor '%s': %s shape %s is %llu bytes, data_offsets "
                         "[%llu, %llu] give %llu", name, CIC_STFILE_DTYPE_NAME[k], dims,
                         (unsigned long long)nbytes, (unsigned long long)*begin,
                         (unsigned long long)*end, (unsigned long long)(*end - *begin));
        return -1;
    }
    t->count = count;
    t->nbytes = (size_t)nbytes; /* <= the file size */
    return 0;
}

static int cmp_offset(const void *a, const void *b)
{
    const cic_stfile_tensor *x = a, *y = b;
    uint64_t ex = x->offset + x->nbytes, ey = y->offset + y->nbytes;
    if (x->offset != y->offset)
        return x->offset < y->offset ? -1 : 1;
    if (ex != ey)
        return ex < ey ? -1 : 1;
    /* empty tensors at one offset: by name, so the order is the same
     * whatever order the header lists them in */
    return strcmp(x->name, y->name);
}

static int cmp_name(const void *a, const void *b)
{
    return strcmp((*(const cic_stfile_tensor *const *)a)->name,
                  (*(const cic_stfile_tensor *const *)b)->name);
}

/* Map path read-only, refusing anything but a regular file. */
static int map_file(cic_stfile *f, const char *path, cic_diag *d)
{
    /* no blocking on a FIFO, nothing but a regular file */
    int fd = cic_file_open(path, "a safetensors file", &f->id, d);
    void *p;
    if (fd < 0)
        return -1;
    if (seen_check(path, &f->id, d) < 0) {
        close(fd);
        return -1;
    }
    if (f->id.size < 8) {
        cic_diag_set(d, path, 0, 0, "%llu bytes: too short for a safetensors file (an 8-byte "
                     "header length, then the header)", (unsigned long long)f->id.size);
        close(fd);
        return -1;
    }
    if (f->id.size > SIZE_MAX) {
        cic_diag_set(d, path, 0, 0, "file too large to map");
        close(fd);
        return -1;
    }
    p = mmap(NULL, (size_t)f->id.size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (p == MAP_FAILED) {
        cic_diag_set(d, path, 0, 0, "cannot map: %s", strerror(errno));
        return -1;
    }
    f->map = p;
    f->size = (size_t)f->id.size;
    return slot_add(f, d);
}

static int parse_meta(cic_stfile *f, json_t *md, cic_diag *d)
{
    const char *key;
    json_t *v;
    size_t n = json_object_size(md);
    int i = 0;
    if (!json_is_object(md)) {
        cic_diag_set(d, f->path, 0, 0, "__metadata__ is %s; an object of strings expected",
                     cic_json_type_name(md));
        return -1;
    }
    f->meta = cic_calloc(2 * n + 1, sizeof *f->meta);
    if (!f->meta)
        goto oom;
    json_object_foreach(md, key, v) {
        if (!json_is_string(v)) {
            cic_diag_set(d, f->path, 0, 0, "__metadata__ '%s' is %s; metadata values must be "
                         "strings", key, cic_json_type_name(v));
            return -1;
        }
        f->meta[2 * i] = strdup(key);
        f->meta[2 * i + 1] = strdup(json_string_value(v));
        f->n_meta = ++i;
        if (!f->meta[2 * i - 2] || !f->meta[2 * i - 1])
            goto oom;
    }
    return 0;
oom:
    cic_diag_set(d, f->path, 0, 0, "out of memory");
    return -1;
}

/* The 8-byte little-endian header length, checked against the file. */
static int read_header_len(const cic_stfile *f, const char *path, uint64_t *hlen, cic_diag *d)
{
    int k;
    *hlen = 0;
    for (k = 0; k < 8; k++)
        *hlen |= (uint64_t)f->map[k] << (8 * k);
    if (*hlen == 0 || *hlen > CIC_STFILE_MAX_HEADER || *hlen > f->size - 8) {
        cic_diag_set(d, path, 0, 0, "header length %llu %s (file of %zu bytes)",
                     (unsigned long long)*hlen,
                     *hlen == 0 ? "is empty"
                     : *hlen > f->size - 8 ? "runs beyond the end of the file"
                                           : "is over the 100 MiB limit",
                     f->size);
        return -1;
    }
    return 0;
}

/* The JSON header: an object, duplicate names refused; jansson caps the
 * nesting depth of what it parses (2048) and says so. */
static json_t *parse_header(const cic_stfile *f, const char *path, uint64_t hlen, cic_diag *d)
{
    json_error_t je;
    json_t *hdr = json_loadb((const char *)f->map + 8, (size_t)hlen, JSON_REJECT_DUPLICATES, &je);
    if (!hdr) {
        cic_diag_set(d, path, je.line > 0 ? je.line : 0, je.column > 0 ? je.column : 0,
                     "header (%llu bytes of JSON after the length): %s",
                     (unsigned long long)hlen, je.text[0] ? je.text : "does not parse");
        return NULL;
    }
    if (!json_is_object(hdr)) {
        cic_diag_set(d, path, 0, 0, "header is %s; an object of tensors expected",
                     cic_json_type_name(hdr));
        json_decref(hdr);
        return NULL;
    }
    return hdr;
}

/* Every entry of the header: the metadata, and each tensor's dtype, shape
 * and offsets (begin[i], end[i] relative to the data). */
static int read_entries(cic_stfile *f, const char *path, json_t *hdr, uint64_t hlen,
                        uint64_t data_len, uint64_t *begin, uint64_t *end, cic_diag *d)
{
    const char *key;
    json_t *e;
    size_t pos = 0;
    json_object_foreach(hdr, key, e) {
        cic_stfile_tensor *t;
        size_t len = strlen(key);
        if (!strcmp(key, "__metadata__")) {
            if (parse_meta(f, e, d) != 0)
                return -1;
            continue;
        }
        if (len == 0) {
            cic_diag_set(d, path, 0, 0, "a tensor has an empty name");
            return -1;
        }
        t = &f->t[f->n];
        memcpy(f->names + pos, key, len + 1);
        t->name = f->names + pos;
        t->file = f->path;
        pos += len + 1;
        if (parse_entry(t, path, t->name, e, data_len, &begin[f->n], &end[f->n], d) != 0)
            return -1;
        t->offset = 8 + hlen + begin[f->n];
        f->n++;
    }
    return 0;
}

/* The data, tensor by tensor in offset order, must be covered exactly. */
static int check_tiling(cic_stfile *f, const char *path, uint64_t hlen, uint64_t data_len,
                        cic_diag *d)
{
    uint64_t at = 0;
    int i;
    qsort(f->t, (size_t)f->n, sizeof *f->t, cmp_offset);
    for (i = 0; i < f->n; i++) {
        uint64_t b = f->t[i].offset - 8 - hlen;
        if (b < at) {
            cic_diag_set(d, path, 0, 0, "tensor '%s' (data_offsets [%llu, %llu]) overlaps "
                         "tensor '%s' (ending at %llu)", f->t[i].name, (unsigned long long)b,
                         (unsigned long long)(b + f->t[i].nbytes), f->t[i - 1].name,
                         (unsigned long long)at);
            return -1;
        }
        if (b > at) {
            cic_diag_set(d, path, 0, 0, "bytes [%llu, %llu) of the data belong to no tensor "
                         "(before tensor '%s'); the data must be contiguous",
                         (unsigned long long)at, (unsigned long long)b, f->t[i].name);
            return -1;
        }
        at = b + f->t[i].nbytes;
        f->t[i].data = f->map + f->t[i].offset;
        f->by_name[i] = &f->t[i];
    }
    if (at != data_len) {
        cic_diag_set(d, path, 0, 0, "the tensors cover %llu bytes of data, the file holds "
                     "%llu after the header%s%s%s", (unsigned long long)at,
                     (unsigned long long)data_len, f->n ? " (last tensor '" : "",
                     f->n ? f->t[f->n - 1].name : "", f->n ? "')" : "");
        return -1;
    }
    qsort(f->by_name, (size_t)f->n, sizeof *f->by_name, cmp_name);
    return 0;
}

cic_stfile *cic_stfile_create(const char *path, cic_diag *d)
{
    cic_stfile *f = NULL;
    json_t *hdr = NULL, *e;
    uint64_t hlen = 0, data_len, *begin = NULL, *end = NULL;
    size_t nt = 0, names_len = 0;
    const char *key;

    if (!path || !path[0]) {
        cic_diag_set(d, "", 0, 0, "safetensors: empty file name");
        return NULL;
    }
    f = calloc(1, sizeof *f);
    if (f)
        f->slot = -1;
    if (!f || !(f->path = strdup(path)))
        goto oom;
    if (map_file(f, path, d) != 0 || read_header_len(f, path, &hlen, d) != 0 ||
        !(hdr = parse_header(f, path, hlen, d)))
        goto fail;
    data_len = f->size - 8 - hlen;
    f->hlen = hlen;
    json_object_foreach(hdr, key, e) {
        if (strcmp(key, "__metadata__") != 0) {
            nt++;
            names_len += strlen(key) + 1;
        }
    }
    if (nt > (size_t)INT32_MAX - 1)
        goto oom;
    f->t = cic_calloc(nt + 1, sizeof *f->t);
    f->by_name = cic_calloc(nt + 1, sizeof *f->by_name);
    f->names = malloc(names_len + 1);
    begin = cic_calloc(nt + 1, sizeof *begin);
    end = cic_calloc(nt + 1, sizeof *end);
    if (!f->t || !f->by_name || !f->names || !begin || !end)
        goto oom;
    if (read_entries(f, path, hdr, hlen, data_len, begin, end, d) != 0 ||
        check_tiling(f, path, hlen, data_len, d) != 0)
        goto fail;
    json_decref(hdr);
    free(begin);
    free(end);
    return f;
oom:
    cic_diag_set(d, path, 0, 0, "out of memory");
fail:
    json_decref(hdr);
    free(begin);
    free(end);
    cic_stfile_destroy(f);
    return NULL;
}

void cic_stfile_destroy(cic_stfile *f)
{
    int i;
    if (!f)
        return;
    slot_remove(f); /* before the unmapping: the range is not ours after it */
    if (f->map)
        munmap((void *)f->map, f->size);
    for (i = 0; f->meta && i < 2 * f->n_meta; i++)
        free(f->meta[i]);
    free(f->meta);
    free(f->t);
    free(f->by_name);
    free(f->names);
    free(f->path);
    free(f);
}

const unsigned char *cic_stfile_header(const cic_stfile *f, size_t *len)
{
    *len = (size_t)(8 + f->hlen);
    return f->map;
}

cic_file_id cic_stfile_id(const cic_stfile *f)
{
    return f->id;
}

int cic_stfile_count(const cic_stfile *f)
{
    return f->n;
}

const cic_stfile_tensor *cic_stfile_tensor_at(const cic_stfile *f, int i)
{
    CIC_ASSERT(i >= 0 && i < f->n);
    return &f->t[i];
}

const cic_stfile_tensor *cic_stfile_find(const cic_stfile *f, const char *name)
{
    int lo = 0, hi = f->n - 1;
    while (lo <= hi) {
        int mid = lo + (hi - lo) / 2, c = strcmp(name, f->by_name[mid]->name);
        if (c == 0)
            return f->by_name[mid];
        if (c < 0)
            hi = mid - 1;
        else
            lo = mid + 1;
    }
    return NULL;
}

int cic_stfile_meta_count(const cic_stfile *f)
{
    return f->n_meta;
}

void cic_stfile_meta_at(const char **key, const char **value, const cic_stfile *f, int i)
{
    CIC_ASSERT(i >= 0 && i < f->n_meta);
    *key = f->meta[2 * i];
    *value = f->meta[2 * i + 1];
}

const char *cic_stfile_meta_get(const cic_stfile *f, const char *key)
{
    int i;
    for (i = 0; i < f->n_meta; i++)
        if (!strcmp(f->meta[2 * i], key))
            return f->meta[2 * i + 1];
    return NULL;
}

/* ---- element access (little-endian bytes, whatever the host) ---- */

static uint64_t load_le(const unsigned char *p, int size)
{
    uint64_t v = 0;
    int k;
    for (k = 0; k < size; k++)
        v |= (uint64_t)p[k] << (8 * k);
    return v;
}

/* IEEE binary16 to double, exactly (subnormals, infinities, NaN). */
static double half_to_double(uint16_t h)
{
    int e = (h >> 10) & 0x1f;
    double m = h & 0x3ff, v;
    if (e == 0)
        v = ldexp(m, -24);
    else if (e == 31)
        v = m != 0 ? NAN : INFINITY;
    else
        v = ldexp(m + 1024.0, e - 25);
    return h & 0x8000 ? -v : v;
}

static int check_range(const cic_stfile_tensor *t, uint64_t first, uint64_t n, cic_diag *d)
{
    if (first > t->count || n > t->count - first) {
        cic_diag_set(d, t->file, 0, 0, "tensor '%s': elements [%llu, +%llu) outside its %llu",
                     t->name, (unsigned long long)first, (unsigned long long)n,
                     (unsigned long long)t->count);
        return -1;
    }
    return 0;
}

int cic_stfile_tensor_read_f64(double *out, const cic_stfile_tensor *t, uint64_t first,
                               uint64_t n, cic_diag *d)
{
    int size = CIC_STFILE_DTYPE_SIZE[t->dtype];
    uint64_t i;
    if (check_range(t, first, n, d) != 0)
        return -1;
    for (i = 0; i < n; i++) {
        uint64_t u = load_le(t->data + (first + i) * (uint64_t)size, size);
        switch (t->dtype) {
        case CIC_STFILE_F64: {
            double x;
            memcpy(&x, &u, 8);
            out[i] = x;
            break;
        }
        case CIC_STFILE_F32: {
            uint32_t w = (uint32_t)u;
            float x;
            memcpy(&x, &w, 4);
            out[i] = x;
            break;
        }
        case CIC_STFILE_BF16: {
            /* bfloat16 is the top half of a binary32 */
            uint32_t w = (uint32_t)u << 16;
            float x;
            memcpy(&x, &w, 4);
            out[i] = x;
            break;
        }
        case CIC_STFILE_F16: out[i] = half_to_double((uint16_t)u); break;
        case CIC_STFILE_I8: out[i] = (int8_t)u; break;
        case CIC_STFILE_I16: out[i] = (int16_t)u; break;
        case CIC_STFILE_I32: out[i] = (int32_t)u; break;
        case CIC_STFILE_I64: out[i] = (double)(int64_t)u; break;
        default: out[i] = (double)u; break; /* BOOL and unsigned */
        }
    }
    return 0;
}

bool cic_stfile_dtype_is_float(enum cic_stfile_dtype t)
{
    return t == CIC_STFILE_F16 || t == CIC_STFILE_BF16 || t == CIC_STFILE_F32 ||
           t == CIC_STFILE_F64;
}

int cic_stfile_tensor_read_i64(int64_t *out, const cic_stfile_tensor *t, uint64_t first,
                               uint64_t n, cic_diag *d)
{
    int size = CIC_STFILE_DTYPE_SIZE[t->dtype];
    uint64_t i;
    if (cic_stfile_dtype_is_float(t->dtype)) {
        cic_diag_set(d, t->file, 0, 0, "tensor '%s' is %s; an integer tensor expected",
                     t->name, CIC_STFILE_DTYPE_NAME[t->dtype]);
        return -1;
    }
    if (check_range(t, first, n, d) != 0)
        return -1;
    for (i = 0; i < n; i++) {
        uint64_t u = load_le(t->data + (first + i) * (uint64_t)size, size);
        switch (t->dtype) {
        case CIC_STFILE_I8: out[i] = (int8_t)u; break;
        case CIC_STFILE_I16: out[i] = (int16_t)u; break;
        case CIC_STFILE_I32: out[i] = (int32_t)u; break;
        case CIC_STFILE_I64: out[i] = (int64_t)u; break;
        default:
            if (u > (uint64_t)INT64_MAX) {
                cic_diag_set(d, t->file, 0, 0, "tensor '%s': element %llu is %llu, above "
                             "INT64_MAX", t->name, (unsigned long long)(first + i),
                             (unsigned long long)u);
                return -1;
            }
            out[i] = (int64_t)u;
        }
    }
    return 0;
}

int cic_stfile_dtype_bits(enum cic_stfile_dtype t)
{
    return t == CIC_STFILE_F64 ? 53 : t == CIC_STFILE_F32 ? 24 : t == CIC_STFILE_F16 ? 11
           : t == CIC_STFILE_BF16 ? 8 : 0;
}

int cic_stfile_check_unchanged(cic_diag *d)
{
    char msg[sizeof g_changed_msg];
    int i, rc = 0;
    pthread_mutex_lock(&g_lock);
    if (g_changed_file[0]) {
        cic_diag_set(d, g_changed_file, 0, 0, "%s; nothing judged from it holds", g_changed_msg);
        g_changed_file[0] = '\0';
        rc = -1;
    }
    for (i = 0; rc == 0 && i < CIC_STFILE_MAX_MAPPED; i++)
        if (g_owner[i] && !same_file(g_owner[i], msg, sizeof msg)) {
            cic_diag_set(d, g_owner[i]->path, 0, 0, "%s; nothing judged from it holds", msg);
            rc = -1;
        }
    seen_clear(); /* the run's watch ends */
    g_watch = false;
    pthread_mutex_unlock(&g_lock);
    return rc;
}
