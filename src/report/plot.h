/* SPDX-License-Identifier: MIT */
/* plot.h: paper-ready plots of a run or a sweep (DESIGN.md section 6).
 *
 * cic_plot_dir reads DIR/sweep.json (or, when there is none, DIR/report.json:
 * a single run, and then only the plots that need one point) and writes under
 * DIR/plots/, for each plot NAME that the data allows:
 *   NAME.dat   whitespace columns, a commented header naming columns and
 *              units; several data sets are gnuplot index blocks (two blank
 *              lines apart), each opened by a "# transform: <name>" comment;
 *   NAME.gp    a standalone gnuplot script, run from inside plots/, that
 *              reads NAME.dat and writes the six renderings below;
 *   NAME.png, NAME.svg, NAME.pdf                 one column: 3.5 in wide,
 *                                                7 pt text;
 *   NAME-wide.png, NAME-wide.svg, NAME-wide.pdf  two columns: 7 in wide,
 *                                                8 pt text;
 * (PNG at 300 dpi). Every figure has a title line (case, engine, and for a
 * figure of one point of a sweep, which point), axis labels with units, the
 * legend below the plot area, and says what its error bars are.
 *
 * Plots: error_vs_d, error_vs_depth (sweeps over d_model / layers: relative
 * error and p99 ULP, median and min-max over seeds), ulp_cdf (CDF of
 * ulp_row and its tail 1 - F on a log axis), drift_hist (first point),
 * flops_vs_tokens (dit blocks: closed-form curves, counted points, the
 * crossover N*), ce_vs_prec (sweeps over mpfr_prec); for a report with a
 * "lowp" section (low-precision engines; of a sweep, the first point's):
 * lowp_sqnr (block output SQNR against the MPFR truth, a group of bars per
 * engine), lowp_kurtosis (kurtosis of each quantized linear's input and
 * weight), lowp_chanmax (per-channel max |x| of one linear's input, the
 * one with the highest kurtosis under "none"). Each transform keeps its
 * colour (Okabe-Ito, colour-blind safe) and point type in every plot, by
 * its index in case.transforms; "none" is always black.
 *
 * Files are made in a private folder DIR/plots/.render-XXXXXX and renamed
 * into DIR/plots/ one by one when complete, so concurrent calls on one
 * folder do not disturb each other; the private folder is removed. */
#ifndef CIC_PLOT_H
#define CIC_PLOT_H

#include "../base/base.h"

/* Returns 0 with *n_written = plots made (at least 1); -1 with d set
 * (d->file the file and the message the key at fault where there is one)
 * when the folder cannot be plotted: no sweep.json or report.json,
 * unreadable JSON, a file that is not shaped as cicheck writes it (the top
 * level not an object, `results` not an array, a key of the wrong type,
 * `lowp`'s included, no row with metrics, no point with a report), nothing
 * in it to plot, DIR/plots a symbolic link or not a folder, DIR not
 * writable, or gnuplot not found in PATH (the .dat and .gp files are
 * written first); -2 with d set when drawing failed once the input was
 * read: a write that failed (a full disk, a file size limit), gnuplot
 * failing (its exit status and the tail of its stderr) or writing nothing:
 * a lost result (exit 3 where -1 is exit 2). *n_written counts the plots
 * finished before an error (0 when gnuplot is missing). n_written may be
 * NULL. DIR/plots is cicheck's own folder: a link there is refused, never
 * followed, and each finished file is renamed over whatever entry has its
 * name. */
int cic_plot_dir(const char *dir, int *n_written, cic_diag *d);

#endif
