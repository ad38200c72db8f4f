/* SPDX-License-Identifier: MIT */
/* diag.c: the loader's messages. Errors are collected in the context (the
 * first CIC_DIAG_MAX kept, all counted) and handed to the caller's cic_diag
 * in file order; strings from the file are escaped before they reach a
 * message, and a bad name gets the closest allowed spelling (optimal string
 * alignment distance, or the longest shared prefix). */
#include "case_int.h"

#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* Report an error and return CIC_EINPUT. A position the parser did not
 * know (0) becomes 1:1 so every message keeps the file:line:column form. */
int _cic_fail(cic_case_ctx *x, int line, int col, const char *fmt, ...)
{
    char buf[sizeof x->d->msg];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (line <= 0) {
        line = 1;
        col = 1;
    }
    if (x->n_err < CIC_DIAG_MAX) {
        cic_case_err *e = &x->err[x->n_err];
        e->line = line;
        e->col = col > 0 ? col : 1;
        memcpy(e->msg, buf, sizeof e->msg);
    }
    x->n_err++;
    return CIC_EINPUT;
}

/* Hand the errors to the caller's diagnostic in file order (line, then
 * column; a stable sort keeps the order of errors at one position). */
void _cic_flush(cic_case_ctx *x)
{
    int i, j, kept = x->n_err < CIC_DIAG_MAX ? x->n_err : CIC_DIAG_MAX;
    int order[CIC_DIAG_MAX];
    for (i = 0; i < kept; i++) {
        const cic_case_err *e = &x->err[i];
        for (j = i; j > 0; j--) {
            const cic_case_err *p = &x->err[order[j - 1]];
            if (p->line < e->line || (p->line == e->line && p->col <= e->col))
                break;
            order[j] = order[j - 1];
        }
        order[j] = i;
    }
    for (i = 0; i < kept; i++) {
        const cic_case_err *e = &x->err[order[i]];
        if (i == 0)
            cic_diag_set(x->d, x->file, e->line, e->col, "%s", e->msg);
        else
            cic_diag_add(x->d, x->file, e->line, e->col, "%s", e->msg);
    }
    if (x->d && kept > 0)
        x->d->n_more = x->n_err - 1; /* also those not kept */
}

/* CIC_EINPUT when errors were reported since `since` (x->n_err then). */
int _cic_status(const cic_case_ctx *x, int since)
{
    return x->n_err > since ? CIC_EINPUT : CIC_OK;
}

/* Escape s[0 .. len) for a message: printable ASCII kept, ' and \ escaped,
 * anything else as \xNN; long strings cut with "...". */
const char *_cic_quote(char *buf, size_t cap, const char *s, size_t len)
{
    static const char hex[] = "0123456789abcdef";
    size_t o = 0, i;
    CIC_ASSERT(cap >= 8);
    for (i = 0; i < len; i++) {
        unsigned char ch = (unsigned char)s[i];
        if (o + 8 >= cap) {
            memcpy(buf + o, "...", 3);
            o += 3;
            break;
        }
        if (ch == '\'' || ch == '\\') {
            buf[o++] = '\\';
            buf[o++] = (char)ch;
        } else if (ch >= 0x20 && ch < 0x7f) {
            buf[o++] = (char)ch;
        } else {
            buf[o++] = '\\';
            buf[o++] = 'x';
            buf[o++] = hex[ch >> 4];
            buf[o++] = hex[ch & 15];
        }
    }
    buf[o] = '\0';
    return buf;
}

/* Optimal string alignment distance (Levenshtein plus adjacent
 * transpositions), for "did you mean". Strings longer than 64 bytes get a
 * large distance: no suggestion, and no quadratic work on fuzzed input. */
static int _cic_edit_distance(const char *a, size_t la, const char *b)
{
    enum { MAXL = 64 };
    int d[MAXL + 1][MAXL + 1];
    size_t lb = strlen(b), i, j;
    if (la > MAXL || lb > MAXL)
        return INT_MAX;
    for (i = 0; i <= la; i++)
        d[i][0] = (int)i;
    for (j = 0; j <= lb; j++)
        d[0][j] = (int)j;
    for (i = 1; i <= la; i++) {
        for (j = 1; j <= lb; j++) {
            int cost = a[i - 1] == b[j - 1] ? 0 : 1;
            int v = d[i - 1][j] + 1;
            if (d[i][j - 1] + 1 < v)
                v = d[i][j - 1] + 1;
            if (d[i - 1][j - 1] + cost < v)
                v = d[i - 1][j - 1] + cost;
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] &&
                d[i - 2][j - 2] + 1 < v)
                v = d[i - 2][j - 2] + 1;
            d[i][j] = v;
        }
    }
    return d[la][lb];
}

/* The closest name to s[0 .. len), if close enough to be a likely typo
 * (distance <= max(2, len(name) / 3)), else NULL. */
const char *_cic_closest(const char *s, size_t len,
                         const char *const *names, size_t n)
{
    const char *best = NULL;
    int bestd = INT_MAX;
    size_t i;
    for (i = 0; i < n; i++) {
        int dist;
        if (!names[i])
            continue;
        dist = _cic_edit_distance(s, len, names[i]);
        if (dist < bestd) {
            bestd = dist;
            best = names[i];
        }
    }
    if (best) {
        int lim = (int)(strlen(best) / 3);
        if (lim < 2)
            lim = 2;
        if (bestd > lim)
            best = NULL;
    }
    if (!best) {
        /* No near spelling: fall back to the longest shared prefix of at
         * least 3 bytes ("prenorm" -> "preln", "rotation" -> "rotate"). */
        size_t bestp = 2;
        for (i = 0; i < n; i++) {
            size_t p = 0;
            if (!names[i])
                continue;
            while (p < len && names[i][p] && names[i][p] == s[p])
                p++;
            if (p > bestp) {
                bestp = p;
                best = names[i];
            }
        }
    }
    return best;
}

/* "a, b, c" into buf. */
const char *_cic_join(char *buf, size_t cap, const char *const *names,
                      size_t n)
{
    size_t o = 0, i;
    buf[0] = '\0';
    for (i = 0; i < n && o < cap; i++) {
        int k = snprintf(buf + o, cap - o, "%s%s", i ? ", " : "", names[i]);
        if (k < 0)
            break;
        o += (size_t)k;
    }
    return buf;
}

/* "; did you mean 'x'?" or "". */
const char *_cic_hint(char *buf, size_t cap, const char *s, size_t len,
                      const char *const *names, size_t n)
{
    const char *c = _cic_closest(s, len, names, n);
    if (c)
        snprintf(buf, cap, "; did you mean '%s'?", c);
    else
        buf[0] = '\0';
    return buf;
}
