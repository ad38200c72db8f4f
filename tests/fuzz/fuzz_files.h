/* SPDX-License-Identifier: MIT */
/* fuzz_files.h: one fuzz input as a few named files, for the readers that
 * take a folder or several files (a checkpoint, a pair of case shards,
 * verify's arguments and files). The input is a preamble, then files, each
 * after a header line, the layout of `head a b`:
 *
 *     PREAMBLE
 *     ==> NAME <==
 *     CONTENT
 *     ==> NAME <==
 *     CONTENT
 *
 * A header begins the input or follows a newline; that newline separates
 * and belongs to neither side, so a binary file (a safetensors file that
 * must end where its data ends) keeps its exact bytes. NAME is one or two
 * components of [A-Za-z0-9_][A-Za-z0-9_.-]* separated by '/' (no '.',
 * '..' or absolute path: the files stay in the folder given), at most
 * FF_NAME_MAX bytes; an input with another name is not used (ff_parse
 * returns -1). A later file of a name replaces an earlier one.
 *
 * Shared by the fuzz targets in tests/fuzz/ and the replay of their saved
 * inputs (tests/test_fuzz_replay.c); libc alone. */
#ifndef CIC_FUZZ_FILES_H
#define CIC_FUZZ_FILES_H

#include <errno.h>
#include <ftw.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define FF_MAX_FILES 16

/* How many of the last input's runs were accepted all the way (a model
 * built, a rotation applied, shards merged, a verify run): set by each
 * target's run (tests/fuzz/<target>_run.h), so its tests can tell an
 * input the reader took from one it refused. */
static int ff_accepted __attribute__((unused));
#define FF_NAME_MAX 100

typedef struct {
    char name[FF_NAME_MAX + 1];
    const uint8_t *data; /* into the input */
    size_t len;
} ff_file;

typedef struct {
    const uint8_t *pre; /* the preamble, into the input */
    size_t pre_len;
    ff_file f[FF_MAX_FILES];
    int n;
} ff_input;

/* A header line at p (the input's [p, end)): the name into name and the
 * length of the line, newline included; 0 when p is not a header. */
static size_t ff_header(char *name, const uint8_t *p, const uint8_t *end)
{
    const uint8_t *q;
    size_t n;
    if (end - p < 10 || memcmp(p, "==> ", 4) != 0)
        return 0;
    for (q = p + 4; q + 5 <= end && q - p <= FF_NAME_MAX + 4; q++)
        if (memcmp(q, " <==\n", 5) == 0) {
            n = (size_t)(q - p - 4);
            memcpy(name, p + 4, n);
            name[n] = '\0';
            return (size_t)(q + 5 - p);
        }
    return 0;
}

/* name is one or two components of [A-Za-z0-9_][A-Za-z0-9_.-]*. */
static int ff_name_ok(const char *name)
{
    int parts = 0;
    const char *s = name;
    for (;;) {
        const char *c = s;
        if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') ||
              *c == '_'))
            return 0;
        for (c++; *c && *c != '/'; c++)
            if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') ||
                  (*c >= '0' && *c <= '9') || *c == '_' || *c == '.' || *c == '-'))
                return 0;
        if (++parts > 2)
            return 0;
        if (!*c)
            return 1;
        s = c + 1;
    }
}

/* data as a preamble and files; 0, or -1 when it is not one (a bad name,
 * too many files). */
static int ff_parse(ff_input *in, const uint8_t *data, size_t size)
{
    const uint8_t *end = data + size, *p = data, *body = NULL;
    char name[FF_NAME_MAX + 1];
    int cur = -1, k;
    memset(in, 0, sizeof *in);
    in->pre = data;
    in->pre_len = size;
    while (p < end) {
        size_t hl = (p == data || p[-1] == '\n') ? ff_header(name, p, end) : 0;
        if (!hl) {
            const uint8_t *nl = memchr(p, '\n', (size_t)(end - p));
            p = nl ? nl + 1 : end;
            continue;
        }
        /* the content before this header ends before its newline */
        if (cur < 0)
            in->pre_len = p == data ? 0 : (size_t)(p - 1 - data);
        else /* (a header right after a header: an empty file) */
            in->f[cur].len = p > body ? (size_t)(p - 1 - body) : 0;
        if (!ff_name_ok(name))
            return -1;
        for (cur = -1, k = 0; k < in->n; k++)
            if (!strcmp(in->f[k].name, name))
                cur = k;
        if (cur < 0) {
            if (in->n == FF_MAX_FILES)
                return -1;
            cur = in->n++;
            memcpy(in->f[cur].name, name, strlen(name) + 1);
        }
        body = p + hl;
        in->f[cur].data = body;
        in->f[cur].len = (size_t)(end - body);
        p = body;
    }
    return 0;
}

/* n bytes at p as the whole of path; 0 or -1. */
static int ff_write_file(const char *path, const void *p, size_t n)
{
    FILE *f = fopen(path, "wb");
    int rc;
    if (!f)
        return -1;
    rc = (n == 0 || fwrite(p, 1, n, f) == n) ? 0 : -1;
    return fclose(f) == 0 ? rc : -1;
}

/* The files of in under dir (which exists), their folders made; 0 or -1.
 * A name that is already a folder (a file and a folder of one name in
 * the input) is -1 too: the caller ignores such an input. */
static int ff_write(const ff_input *in, const char *dir)
{
    char path[1400];
    int k;
    for (k = 0; k < in->n; k++) {
        const char *slash = strchr(in->f[k].name, '/');
        if (slash) {
            snprintf(path, sizeof path, "%.1000s/%.*s", dir, (int)(slash - in->f[k].name),
                     in->f[k].name);
            if (mkdir(path, 0700) != 0 && errno != EEXIST)
                return -1;
        }
        snprintf(path, sizeof path, "%.1000s/%s", dir, in->f[k].name);
        if (ff_write_file(path, in->f[k].data, in->f[k].len) != 0)
            return -1;
    }
    return 0;
}

static int ff_rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)flag;
    (void)ftw;
    remove(path);
    return 0;
}

/* Remove path and everything below it (links not followed). */
static void ff_rm_rf(const char *path)
{
    nftw(path, ff_rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

/* A fresh, empty folder at path (what was there removed); 0 or -1. */
static int ff_fresh_dir(const char *path)
{
    ff_rm_rf(path);
    return mkdir(path, 0700);
}

#endif
