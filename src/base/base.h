/* SPDX-License-Identifier: MIT */
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

/* At most this many errors are kept in one diagnostic (the first, and
 * CIC_DIAG_MAX - 1 more); further ones are only counted. */
#define CIC_DIAG_MAX 20

/* A diagnostic for the user: where (file, line, column; 0 when unknown) and
 * what. The message is complete on its own ("unknown key 'dmodel'; allowed:
 * ...; did you mean 'd_model'?"). A checker that reports every error it finds
 * (the case loader) adds the later ones with cic_diag_add: they are kept as
 * ready-made lines in `more`. */
typedef struct {
    char file[512];
    int line;
    int column;
    char msg[1024];
    int n_more;      /* errors after the first (may exceed those kept) */
    char more[8192]; /* "file:line:column: message\n" per kept error */
} cic_diag;

/* Set the (first) error; forgets any earlier ones. */
void cic_diag_set(cic_diag *d, const char *file, int line, int column,
                  const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
/* Add one more error after the first (cic_diag_set when there is none yet:
 * d->msg empty). */
void cic_diag_add(cic_diag *d, const char *file, int line, int column,
                  const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
/* Errors held: 0 when d holds none, else 1 + n_more. */
int cic_diag_count(const cic_diag *d);
/* "file:line:column: message" (or "file: message" when line is 0), one line
 * per error, and how many more were found but not kept. */
void cic_diag_print(FILE *f, const cic_diag *d);

/* Allocation with the size product checked for overflow; NULL on failure or
 * overflow. Memory is zeroed. Free with free(). */
void *cic_calloc(size_t n, size_t size);
/* n * size, or SIZE_MAX when it overflows. */
size_t cic_mul_size(size_t n, size_t size);

/* Copy src into dst (size cap), always NUL-terminated. */
void cic_strlcpy(char *dst, const char *src, size_t cap);

#endif
