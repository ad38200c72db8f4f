/* SPDX-License-Identifier: MIT */
/* base.h: what every cicheck module shares: version, status codes, checked
 * allocation, assertions for programmer errors, and the diagnostic record that
 * carries "file:line:column: message" from the case loader to the CLI.
 * Nothing here knows about models or numerics. */
#ifndef CIC_BASE_H
#define CIC_BASE_H

#include <stdbool.h>
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

/* ---- the files a user names ----
 * Every file cicheck reads is opened by cic_file_open: without blocking
 * (O_NONBLOCK: a FIFO opens at once, no writer needed), and only when it
 * is a regular file (a FIFO, a device such as a link to /dev/zero, a
 * folder or a socket is refused, saying which). What is read is bounded
 * by the size the format allows (cic_file_read's max). */

/* A file as far as a later check needs to know it is the same, unchanged:
 * device, inode, size in bytes, modification time (seconds, nanoseconds). */
typedef struct {
    uint64_t dev, ino, size;
    int64_t mtime_s;
    long mtime_ns;
} cic_file_id;

/* "a FIFO", "a folder", "a character device", ... for a st_mode. */
const char *cic_file_kind(unsigned mode);
/* Open path read-only; what says what it should be, for the message ("a
 * case file", "JSON"). The descriptor (close it), its identity in *id
 * when id is not NULL; -1 with d set when it cannot be opened or is not a
 * regular file ("is a FIFO, not a regular file; a case file expected"). */
int cic_file_open(const char *path, const char *what, cic_file_id *id, cic_diag *d);
/* The identity of the file at path now (following links); 0, or -1 with
 * errno set. */
int cic_file_id_get(cic_file_id *id, const char *path);
/* Same device, inode, size and modification time. */
bool cic_file_id_equal(const cic_file_id *a, const cic_file_id *b);
/* The whole of regular file path into *out (NUL-terminated; free() it),
 * its length in *len, never more than max bytes read. CIC_OK; CIC_EINPUT
 * with d set when it cannot be opened, is not a regular file or holds more
 * than max bytes ("over the N bytes WHAT may have"); CIC_EINTERNAL with d
 * set when reading fails or memory runs out. *out is NULL on error. */
/* read(2) of up to n bytes from fd (path: for the message), again after
 * EINTR: the bytes read, 0 at the end, -1 with d set. */
long cic_file_read_some(int fd, void *buf, size_t n, const char *path, cic_diag *d);
int cic_file_read(char **out, size_t *len, const char *path, size_t max, const char *what,
                  cic_diag *d);

#endif
