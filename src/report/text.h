/* SPDX-License-Identifier: MIT */
/* text.h: text helpers shared by the CI outputs (junit.c, markdown.c).
 * Internal to src/report. */
#ifndef CIC_TEXT_H
#define CIC_TEXT_H

#include <stddef.h>

/* Length of the valid UTF-8 sequence at s (1..4), or 0 when it is not one
 * (overlong forms, surrogates, U+FFFE/U+FFFF and beyond U+10FFFF are not). */
size_t cic_utf8_len(const unsigned char *s, size_t n);

/* The shortest %g text that reads back to v; "nan", "inf", "-inf"
 * otherwise. */
void cic_fmt_num(char *buf, size_t cap, double v);

#endif
