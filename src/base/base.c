/* SPDX-License-Identifier: MIT */
/* base.c: diagnostics and checked allocation (see base.h). */
#include "base.h"

#include <stdarg.h>
#include <stdint.h>
#include <sys/mman.h>
#include <string.h>

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
