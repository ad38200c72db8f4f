/* base.h: what every cicheck module shares: version, status codes, checked
 * allocation, assertions for programmer errors, and the diagnostic record that
 * carries "file:line:column: message" from the case loader to the CLI.
 * Nothing here knows about models or numerics. */
#ifndef CIC_BASE_H
#define CIC_BASE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define CIC_VERSION "0.1.0"

/* Exit codes of the CLI; also used as module status codes. */
enum cic_status {
    CIC_OK = 0,        /* all gates pass */
    CIC_EGATE = 1,     /* a gate or regression failed */
    CIC_EINPUT = 2,    /* bad input or usage */
    CIC_EINTERNAL = 3  /* resource failure (memory, I/O) */
};

/* Programmer errors (broken preconditions) stop with file:line. Bad input
 * never reaches these: it is reported through cic_diag. */
#define CIC_ASSERT(cond)                                                      \
    do {                                                                      \
        if (!(cond)) {                                                        \
            fprintf(stderr, "%s:%d: assertion failed: %s\n", __FILE__,        \
                    __LINE__, #cond);                                         \
            abort();                                                          \
        }                                                                     \
    } while (0)

/* A diagnostic for the user: where (file, line, column; 0 when unknown) and
 * what. The message is complete on its own ("unknown key 'dmodel'; allowed:
 * ...; did you mean 'd_model'?"). */
typedef struct {
    char file[512];
    int line;
    int column;
    char msg[1024];
} cic_diag;

void cic_diag_set(cic_diag *d, const char *file, int line, int column,
                  const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
/* "file:line:column: message" (or "file: message" when line is 0). */
void cic_diag_print(FILE *f, const cic_diag *d);

/* Allocation with the size product checked for overflow; NULL on failure or
 * overflow. Memory is zeroed. Free with free(). */
void *cic_calloc(size_t n, size_t size);
/* n * size, or SIZE_MAX when it overflows. */
size_t cic_mul_size(size_t n, size_t size);

/* Copy src into dst (size cap), always NUL-terminated. */
void cic_strlcpy(char *dst, const char *src, size_t cap);

#endif
