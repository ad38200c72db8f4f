/* plot.h: paper-ready plots of a run or a sweep (DESIGN.md section 6).
 *
 * cic_plot_dir reads DIR/sweep.json (or, when there is none, DIR/report.json:
 * a single run, and then only the plots that need one point) and writes under
 * DIR/plots/, for each plot NAME that the data allows:
 *   NAME.dat  whitespace columns, a commented header naming columns and units;
 *             several data sets are gnuplot index blocks (two blank lines
 *             apart), each opened by a "# transform: <name>" comment;
 *   NAME.gp   a standalone gnuplot script, run from inside plots/, that reads
 *             NAME.dat and writes NAME.png, NAME.svg and NAME.pdf in turn;
 * then runs `gnuplot NAME.gp` in plots/ (stdin /dev/null, DISPLAY removed)
 * and checks that the three files exist.
 *
 * Plots: error_vs_d, error_vs_depth (sweeps over d_model / layers), ulp_cdf,
 * drift_hist (first point), flops_vs_tokens (dit blocks), ce_vs_prec (sweeps
 * over mpfr_prec). Each transform keeps its colour and point type in every
 * plot: style 2 + its index in case.transforms; "none" is always black. */
#ifndef CIC_PLOT_H
#define CIC_PLOT_H

#include "../base/base.h"

/* Returns 0 with *n_written = plots made (0 is possible: nothing applies),
 * or -1 with d set: no sweep.json or report.json, unreadable JSON, a write
 * failure, gnuplot not found in PATH (the .dat and .gp files are written
 * first), or gnuplot failing (its exit status and the tail of its stderr).
 * *n_written counts the plots finished before an error. n_written may be
 * NULL. */
int cic_plot_dir(const char *dir, int *n_written, cic_diag *d);

#endif
