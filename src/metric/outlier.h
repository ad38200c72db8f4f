/* SPDX-License-Identifier: MIT */
/* outlier.h: the outlier statistics of a matrix x [rows, cols] (row-major
 * float32: the activations [tokens, d] entering a linear, or a weight [out,
 * in]), the measures by which a rotation is judged to spread outliers.
 * Channels are columns: the input features, the dimension a rotation of the
 * residual stream mixes. Sums in double, in index order (deterministic).
 *
 *   kurtosis      Pearson's (not excess): m4 / m2^2 over all values, m_k
 *                 the k-th central moment; 3 for a Gaussian, 1 for +-1
 *   max_over_rms  max |x| / sqrt(mean x^2)
 *   top_share     the share of sum x^2 held by the top 1 % of channels
 *                 (ceil(cols / 100) columns, ranked by their sum of squares)
 *   chan_max      per column, max |x| (the channel max profile)
 *
 * A statistic with a zero denominator (an all-zero matrix, or no spread
 * for the kurtosis) is NaN, as is every statistic over a non-finite value;
 * callers report NaN as "undefined". */
#ifndef CIC_OUTLIER_H
#define CIC_OUTLIER_H

typedef struct {
    double kurtosis;
    double max_over_rms;
    double top_share;
    int top_channels; /* ceil(cols / 100) */
} cic_outlier;

/* The statistics of x; chan_max (cols values) may be NULL. 0, or -1 when
 * out of memory (o is then all NaN). */
int cic_outlier_stats(cic_outlier *o, const float *x, int rows, int cols, float *chan_max);

#endif
