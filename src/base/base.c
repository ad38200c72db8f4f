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
}

void cic_diag_print(FILE *f, const cic_diag *d)
{
    if (d->line > 0)
        fprintf(f, "%s:%d:%d: %s\n", d->file, d->line,
                d->column > 0 ? d->column : 1, d->msg);
    else if (d->file[0])
        fprintf(f, "%s: %s\n", d->file, d->msg);
    else
        fprintf(f, "cicheck: %s\n", d->msg);
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
