/* SPDX-License-Identifier: MIT */
/* outlier.c: the outlier statistics (outlier.h). */
#include "outlier.h"

#include "../base/base.h"

#include <math.h>
#include <stdlib.h>

static int desc(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? 1 : x > y ? -1 : 0;
}

/* The moments: mean, then the central m2 and m4, the raw mean square and
 * max |x|. */
static void moments(const float *x, size_t n, double *m2, double *m4, double *ms, double *amax)
{
    double mean = 0, s2 = 0, s4 = 0, sq = 0, a = 0;
    size_t i;
    for (i = 0; i < n; i++)
        mean += x[i];
    mean /= (double)n;
    for (i = 0; i < n; i++) {
        double d = x[i] - mean, v = x[i];
        s2 += d * d;
        s4 += d * d * d * d;
        sq += v * v;
        a = isnan(v) || fabs(v) > a ? fabs(v) : a;
    }
    *m2 = s2 / (double)n;
    *m4 = s4 / (double)n;
    *ms = sq / (double)n;
    *amax = a;
}

int cic_outlier_stats(cic_outlier *o, const float *x, int rows, int cols, float *chan_max)
{
    size_t n = (size_t)rows * (size_t)cols, i;
    double m2, m4, ms, amax, total = 0, top = 0, *col;
    int j, k;
    o->kurtosis = o->max_over_rms = o->top_share = NAN;
    o->top_channels = cols > 0 ? (cols + 99) / 100 : 0;
    if (rows <= 0 || cols <= 0)
        return 0;
    col = cic_calloc((size_t)cols, sizeof *col);
    if (!col)
        return -1;
    moments(x, n, &m2, &m4, &ms, &amax);
    for (j = 0; j < cols; j++) {
        float cm = 0;
        for (i = 0; i < (size_t)rows; i++) {
            float v = x[i * (size_t)cols + (size_t)j];
            col[j] += (double)v * v;
            cm = isnan(v) || fabsf(v) > cm ? fabsf(v) : cm;
        }
        if (chan_max)
            chan_max[j] = cm;
        total += col[j];
    }
    if (isfinite(total) && isfinite(m4)) {
        qsort(col, (size_t)cols, sizeof *col, desc);
        for (k = 0; k < o->top_channels; k++)
            top += col[k];
        if (m2 > 0)
            o->kurtosis = m4 / (m2 * m2);
        if (ms > 0)
            o->max_over_rms = amax / sqrt(ms);
        if (total > 0)
            o->top_share = top / total;
    }
    free(col);
    return 0;
}
