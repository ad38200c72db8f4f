/* SPDX-License-Identifier: MIT */
/* conclusion.h: the answer, in words, at the end of a dit (adaLN) run:
 * can the block be rotated exactly, and at what extra cost? Every sentence
 * is generated from the report's own verdicts and FLOP counts and from its
 * analytical FLOP table (has_dit_flops, computed by src/metric/flops_dit.c). */
#ifndef CIC_CONCLUSION_H
#define CIC_CONCLUSION_H

#include "report.h"

#include <stdio.h>

/* The conclusion of a dit case as plain text lines to f: a first line
 * "Conclusion: ..." with the answer, then lines indented by two spaces:
 * the strategies exact on every sample, those exact on some samples only
 * (static-fold on its calibration sample), those exact on none, verdicts
 * the case did not expect, the cheapest exact strategy with its extra
 * FLOPs at this size and at the token counts of the analytical table
 * (B = 1), the strategies that are cheaper but not exact, and the
 * crossover N* (the table's lines are left out when the report has no
 * table). Transforms are named by kind and name. Writes nothing for
 * another block, a report without a case, or one without adaLN verdict
 * rows. Returns the number of lines written, -1 when f reports an error. */
int cic_report_conclusion(FILE *f, const cic_report *r);

#endif
