/* SPDX-License-Identifier: MIT */
/* usage.h: the help texts (usage.c). */
#ifndef CIC_USAGE_H
#define CIC_USAGE_H

extern const char CIC_MAIN_USAGE[];
extern const char CIC_RUN_USAGE[];
extern const char CIC_MERGE_USAGE[];
extern const char CIC_PLOT_USAGE[];
extern const char CIC_BLESS_USAGE[];
extern const char CIC_FLOPS_USAGE[];
extern const char CIC_HASH_USAGE[];

#endif
