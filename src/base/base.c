/* SPDX-License-Identifier: MIT */
/* base.c: diagnostics, checked allocation and the reading of the files a
 * user names (see base.h). */
#include "base.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <string.h>
#include <unistd.h>

void cic_diag_set(cic_diag *d, const char *file, int line, int column,
                  const char *fmt, ...)
{
    va_list ap;
    if (!d)
        return;
    cic_strlcpy(d->file, file ? file : "", sizeof d->file);
    d->line = line;
    d->column = column;
    va_start(ap, fmt);
    vsnprintf(d->msg, sizeof d->msg, fmt, ap);
    va_end(ap);
    d->n_more = 0;
    d->more[0] = '\0';
}

/* One diagnostic line, as cic_diag_print writes it. */
static int _cic_diag_line(char *buf, size_t cap, const char *file, int line,
                          int column, const char *msg)
{
    if (line > 0)
        return snprintf(buf, cap, "%s:%d:%d: %s\n", file, line, column > 0 ? column : 1,
                        msg);
    if (file[0])
        return snprintf(buf, cap, "%s: %s\n", file, msg);
    return snprintf(buf, cap, "cicheck: %s\n", msg);
}

void cic_diag_add(cic_diag *d, const char *file, int line, int column,
                  const char *fmt, ...)
{
    char msg[sizeof d->msg], one[sizeof d->msg + sizeof d->file + 32];
    size_t used;
    int k;
    va_list ap;
    if (!d)
        return;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (d->msg[0] == '\0') {
        cic_diag_set(d, file, line, column, "%s", msg);
        return;
    }
    d->n_more++;
    if (d->n_more >= CIC_DIAG_MAX)
        return; /* counted, not kept */
    used = strlen(d->more);
    k = _cic_diag_line(one, sizeof one, file ? file : "", line, column, msg);
    if (k > 0 && used + (size_t)k < sizeof d->more)
        memcpy(d->more + used, one, (size_t)k + 1);
    /* else no room: counted, not kept (cic_diag_print says how many) */
}

int cic_diag_count(const cic_diag *d)
{
    return d && d->msg[0] ? 1 + d->n_more : 0;
}

void cic_diag_print(FILE *f, const cic_diag *d)
{
    char one[sizeof d->msg + sizeof d->file + 32];
    int kept;
    _cic_diag_line(one, sizeof one, d->file, d->line, d->column, d->msg);
    fputs(one, f);
    if (d->n_more <= 0)
        return;
    fputs(d->more, f);
    kept = 0;
    for (const char *p = d->more; *p; p++)
        kept += *p == '\n';
    if (d->n_more > kept)
        fprintf(f, "%s: ... and %d more error%s\n", d->file[0] ? d->file : "cicheck",
                d->n_more - kept, d->n_more - kept == 1 ? "" : "s");
}

size_t cic_mul_size(size_t n, size_t size)
{
    if (size != 0 && n > SIZE_MAX / size)
        return SIZE_MAX;
    return n * size;
}

void *cic_calloc(size_t n, size_t size)
{
    size_t bytes = cic_mul_size(n, size);
    void *p;
    if (bytes == SIZE_MAX)
        return NULL;
    if (n == 0 || size == 0)
        return calloc(1, 1);
    p = calloc(n, size);
    if (p && bytes >= ((size_t)8 << 20)) {
        /* Big blocks (weights and activations of real-size models, GBs in
         * all): ask for transparent huge pages, so first touches fault once
         * per 2 MiB rather than once per 4 KiB; page faults cost more than
         * the arithmetic otherwise. Advice only: failure changes nothing. */
        uintptr_t a = ((uintptr_t)p + 4095) & ~(uintptr_t)4095;
        uintptr_t e = ((uintptr_t)p + bytes) & ~(uintptr_t)4095;
        if (e > a)
            (void)madvise((void *)a, e - a, MADV_HUGEPAGE);
    }
    return p;
}

void cic_strlcpy(char *dst, const char *src, size_t cap)
{
    size_t n;
    if (cap == 0)
        return;
    n = strlen(src);
    if (n >= cap)
        n = cap - 1;
    memcpy(dst, src, n);
    dst[n] = '\0';
}

/* ---- the files a user names ---- */

const char *cic_file_kind(unsigned mode)
{
    mode_t m = (mode_t)mode;
    return S_ISREG(m) ? "a regular file" : S_ISDIR(m) ? "a folder" : S_ISFIFO(m) ? "a FIFO"
         : S_ISCHR(m) ? "a character device" : S_ISBLK(m) ? "a block device"
         : S_ISSOCK(m) ? "a socket" : "not a regular file";
}

static void id_of(cic_file_id *id, const struct stat *st)
{
    id->dev = (uint64_t)st->st_dev;
    id->ino = (uint64_t)st->st_ino;
    id->size = st->st_size > 0 ? (uint64_t)st->st_size : 0;
    id->mtime_s = (int64_t)st->st_mtim.tv_sec;
    id->mtime_ns = st->st_mtim.tv_nsec;
}

int cic_file_open(const char *path, const char *what, cic_file_id *id, cic_diag *d)
{
    struct stat st;
    int fd;
    if (!path || !path[0]) {
        cic_diag_set(d, "", 0, 0, "empty file name; %s expected", what);
        return -1;
    }
    /* O_NONBLOCK: opening a FIFO returns at once instead of waiting for a
     * writer (and fstat then refuses it); no effect on a regular file */
    fd = open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    if (fd < 0) {
        cic_diag_set(d, path, 0, 0, "cannot open: %s", strerror(errno));
        return -1;
    }
    if (fstat(fd, &st) != 0) {
        cic_diag_set(d, path, 0, 0, "cannot stat: %s", strerror(errno));
        close(fd);
        return -1;
    }
    if (!S_ISREG(st.st_mode)) {
        cic_diag_set(d, path, 0, 0, "is %s, not a regular file; %s expected",
                     cic_file_kind((unsigned)st.st_mode), what);
        close(fd);
        return -1;
    }
    if (id)
        id_of(id, &st);
    return fd;
}

int cic_file_id_get(cic_file_id *id, const char *path)
{
    struct stat st;
    if (stat(path, &st) != 0)
        return -1;
    id_of(id, &st);
    return 0;
}

bool cic_file_id_equal(const cic_file_id *a, const cic_file_id *b)
{
    return a->dev == b->dev && a->ino == b->ino && a->size == b->size &&
           a->mtime_s == b->mtime_s && a->mtime_ns == b->mtime_ns;
}

long cic_file_read_some(int fd, void *buf, size_t n, const char *path, cic_diag *d)
{
    for (;;) {
        ssize_t k = read(fd, buf, n);
        if (k >= 0)
            return (long)k;
        if (errno != EINTR) {
            cic_diag_set(d, path, 0, 0, "cannot read: %s", strerror(errno));
            return -1;
        }
    }
}

int cic_file_read(char **out, size_t *len, const char *path, size_t max, const char *what,
                  cic_diag *d)
{
    cic_file_id id;
    char *buf = NULL, *nb;
    size_t n = 0, cap;
    int fd, rc = CIC_EINTERNAL;
    *out = NULL;
    *len = 0;
    if (max > SIZE_MAX / 2)
        max = SIZE_MAX / 2; /* room for the probe byte and the NUL */
    if ((fd = cic_file_open(path, what, &id, d)) < 0)
        return CIC_EINPUT;
    if (id.size > (uint64_t)max) { /* known too large: nothing read */
        cic_diag_set(d, path, 0, 0, "%llu bytes, over the %zu bytes %s may have",
                     (unsigned long long)id.size, max, what);
        close(fd);
        return CIC_EINPUT;
    }
    /* the size seen and one byte more, to see the end (or that it grew);
     * a file of /proc says 0 bytes and is read to its end all the same */
    cap = (size_t)id.size + 1;
    if (cap < 4096)
        cap = max < 4095 ? max + 1 : 4096;
    for (;;) {
        long k;
        if (!buf || n == cap) {
            if (buf && cap > max) { /* max + 1 bytes read: it grew, or says 0 */
                cic_diag_set(d, path, 0, 0, "more than %zu bytes, over the %zu bytes %s may "
                             "have", max, max, what);
                rc = CIC_EINPUT;
                goto done;
            }
            if (buf)
                cap = cap > max / 2 ? max + 1 : 2 * cap;
            if (!(nb = realloc(buf, cap + 1))) {
                cic_diag_set(d, path, 0, 0, "out of memory reading %zu bytes", cap);
                goto done;
            }
            buf = nb;
        }
        if ((k = cic_file_read_some(fd, buf + n, cap - n, path, d)) < 0)
            goto done;
        if (k == 0)
            break;
        n += (size_t)k;
    }
    buf[n] = '\0';
    *out = buf;
    *len = n;
    buf = NULL;
    rc = CIC_OK;
done:
    free(buf);
    close(fd);
    return rc;
}
