/* SPDX-License-Identifier: MIT */
/* text.h: text helpers shared by the writers of src/report (junit.c,
 * markdown.c, conclusion.c, table.c): escaping for XML and Markdown, UTF-8
 * validation, exact numbers, names from the enum name tables. Internal to
 * src/report. */
#ifndef CIC_TEXT_H
#define CIC_TEXT_H

#include <stddef.h>
#include <stdio.h>

/* Length of the valid UTF-8 sequence at s (1..4), or 0 when it is not one
 * (overlong forms, surrogates, U+FFFE/U+FFFF and beyond U+10FFFF are not). */
size_t cic_utf8_len(const unsigned char *s, size_t n);

/* s (at most n bytes, may lack a NUL; n = SIZE_MAX: up to the NUL; NULL
 * writes nothing) escaped for an XML 1.0 attribute value or element
 * content: & < > " ' as entities; tab, newline and CR as character
 * references (kept through attribute normalisation); other bytes below 0x20
 * and invalid UTF-8 as '?'. */
void cic_xml_esc(FILE *f, const char *s, size_t n);

/* s (as for cic_xml_esc) as inert Markdown text, safe in a table cell:
 * \ ` * _ [ ] | ~ backslash-escaped, & < > as entities, tab, newline and CR
 * as a space, other control bytes dropped, invalid UTF-8 as '?'. */
void cic_md_esc(FILE *f, const char *s, size_t n);

/* The shortest %g text that reads back to v; "nan", "inf", "-inf"
 * otherwise. */
void cic_fmt_num(char *buf, size_t cap, double v);

/* names[i] of an enum's name table of count entries; "?" when i is out of
 * range or has no name (a value from a hand-built or damaged report). */
const char *cic_name_of(const char *const *names, int count, int i);
/* The same for the name table NAMES of an enum whose _COUNT is COUNT
 * (CIC_NAME_OF(CIC_VERDICT_NAME, CIC_VERDICT_COUNT, v)). */
#define CIC_NAME_OF(names, count, i) cic_name_of((names), (int)(count), (int)(i))

#endif
