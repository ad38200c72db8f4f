/* SPDX-License-Identifier: MIT */
/* text.c: the text helpers of the report writers (text.h): one escaping
 * loop with a substitution per output language (XML for JUnit, Markdown for
 * the CI summary), UTF-8 validation, exact numbers, bounded name lookup. */
#include "text.h"
#include "report.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

size_t cic_utf8_len(const unsigned char *s, size_t n)
{
    unsigned c = s[0], cp;
    size_t len;

    if (c < 0x80)
        return 1;
    if (c >= 0xC2 && c <= 0xDF) {
        len = 2;
        cp = c & 0x1F;
    } else if (c >= 0xE0 && c <= 0xEF) {
        len = 3;
        cp = c & 0x0F;
    } else if (c >= 0xF0 && c <= 0xF4) {
        len = 4;
        cp = c & 0x07;
    } else {
        return 0;
    }
    if (len > n)
        return 0;
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xC0) != 0x80)
            return 0;
        cp = (cp << 6) | (s[i] & 0x3F);
    }
    if ((len == 3 && cp < 0x800) || (len == 4 && (cp < 0x10000 || cp > 0x10FFFF)))
        return 0;
    if ((cp >= 0xD800 && cp <= 0xDFFF) || cp == 0xFFFE || cp == 0xFFFF)
        return 0;
    return len;
}

void cic_fmt_num(char *buf, size_t cap, double v)
{
    if (isnan(v)) {
        snprintf(buf, cap, "nan");
        return;
    }
    if (isinf(v)) {
        snprintf(buf, cap, v > 0 ? "inf" : "-inf");
        return;
    }
    /* Start at the integer digits, so 80 reads "80", not "8e+01". */
    int p0 = 1;
    for (double a = fabs(v); a >= 10 && p0 < 17; a /= 10)
        p0++;
    for (int p = p0; p <= 17; p++) {
        snprintf(buf, cap, "%.*g", p, v);
        if (strtod(buf, NULL) == v)
            return;
    }
}

/* ---- escaping ---- */

/* What a language writes for the byte c < 0x80 instead of itself; NULL:
 * c itself. */
typedef const char *(*esc_sub)(unsigned c);

/* s (at most n bytes, may lack a NUL): ASCII through sub, valid UTF-8
 * sequences as they are, any other byte as '?'. */
static void esc(FILE *f, const char *s, size_t n, esc_sub sub)
{
    const unsigned char *u = (const unsigned char *)s;
    size_t i = 0;

    if (!s)
        return;
    n = strnlen(s, n);
    while (i < n) {
        const char *r = u[i] < 0x80 ? sub(u[i]) : NULL;
        size_t len;
        if (r) {
            fputs(r, f);
            i++;
            continue;
        }
        len = cic_utf8_len(u + i, n - i);
        if (len == 0) {
            fputc('?', f);
            i++;
            continue;
        }
        fwrite(u + i, 1, len, f);
        i += len;
    }
}

static const char *xml_sub(unsigned c)
{
    switch (c) {
    case '&': return "&amp;";
    case '<': return "&lt;";
    case '>': return "&gt;";
    case '"': return "&quot;";
    case '\'': return "&apos;";
    case '\t': return "&#9;";
    case '\n': return "&#10;";
    case '\r': return "&#13;";
    default: return c < 0x20 ? "?" : NULL;
    }
}

static const char *md_sub(unsigned c)
{
    switch (c) {
    case '\\': return "\\\\";
    case '`': return "\\`";
    case '*': return "\\*";
    case '_': return "\\_";
    case '[': return "\\[";
    case ']': return "\\]";
    case '|': return "\\|";
    case '~': return "\\~";
    case '&': return "&amp;";
    case '<': return "&lt;";
    case '>': return "&gt;";
    case '\t':
    case '\n':
    case '\r': return " ";
    default: return c < 0x20 || c == 0x7F ? "" : NULL;
    }
}

void cic_xml_esc(FILE *f, const char *s, size_t n)
{
    esc(f, s, n, xml_sub);
}

void cic_md_esc(FILE *f, const char *s, size_t n)
{
    esc(f, s, n, md_sub);
}

const char *cic_name_of(const char *const *names, int count, int i)
{
    if (!names || i < 0 || i >= count || !names[i])
        return "?";
    return names[i];
}

void cic_truth_words(char *buf, size_t cap, const cic_report *r)
{
    const cic_truth_proof *pf = &r->proof;
    char rel[32], precs[64] = "", diff[32];
    size_t len = 0;
    int i;
    for (i = 0; i < pf->n_precs && len < sizeof precs; i++)
        len += (size_t)snprintf(precs + len, sizeof precs - len, "%s%ld", i ? ", " : "",
                                pf->precs[i]);
    snprintf(rel, sizeof rel, "%.3g", pf->max_rel_radius);
    if (pf->proven)
        len = (size_t)snprintf(buf, cap,
                               "proven: %zu values, %zu at a higher precision; max relative "
                               "radius %s; %s bits",
                               pf->values, pf->escalated, rel, precs);
    else if (pf->why[0])
        len = (size_t)snprintf(buf, cap, "NOT proven: %s", pf->why);
    else
        len = (size_t)snprintf(buf, cap,
                               "NOT proven: %zu of %zu values straddle a binary32 rounding "
                               "boundary at %s bits",
                               pf->values - pf->first - pf->escalated, pf->values, precs);
    if (pf->rechecked && len < cap) {
        snprintf(diff, sizeof diff, "%.3g", r->truth_cert_diff);
        snprintf(buf + len, cap - len, "; recheck at +64 bits: max rel diff %s%s", diff,
                 r->truth_certified || !pf->proven ? "" : " (disagrees)");
    }
}
