/* SPDX-License-Identifier: MIT */
/* lowp_int.c: the integer linear of the low-precision engines (lowp.h) and
 * the checks that keep it inside int32. An integer kernel multiplies int8
 * or int4 codes, sums each block of columns that shares one scale of each
 * operand exactly in int32, converts the sum to float32 and scales it; the
 * emulation gets the exact sums from dgemm on the codes as doubles (every
 * product and partial sum is an integer far below 2^53, so no order of
 * summation rounds) and then does the float32 steps one by one. */
#include "lowp.h"

#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

static long gcd_l(long a, long b)
{
    while (b) {
        long t = a % b;
        a = b;
        b = t;
    }
    return a;
}

/* Columns per block: the largest run of columns inside one group of each
 * operand (groups divide k, or span whole rows). */
static long block_len(long gx, long gw, int k)
{
    return gcd_l(gx < k ? gx : k, gw < k ? gw : k);
}

/* Block b of operand o ([rows, k]) as integer-valued doubles q - z. */
static void block_codes(double *d, const cic_lowp_int_operand *o, int rows, int k, long L,
                        long b)
{
    int i;
    long c;
    for (i = 0; i < rows; i++)
        for (c = 0; c < L; c++) {
            long flat = (long)i * k + b * L + c;
            int32_t z = o->z ? o->z[flat / o->g] : 0;
            d[(size_t)i * L + c] = (double)(o->q[flat] - z);
        }
}

int cic_lowp_int_matmul(float *y, const cic_lowp_int_operand *x,
                        const cic_lowp_int_operand *w, int R, int n, int k)
{
    long L = block_len(x->g, w->g, k), nb = k / L, b;
    double *a = malloc((size_t)R * L * sizeof *a), *bw = malloc((size_t)n * L * sizeof *bw);
    double *acc = malloc((size_t)R * n * sizeof *acc);
    int i, j;
    if (!a || !bw || !acc) {
        free(a);
        free(bw);
        free(acc);
        return -1;
    }
    for (i = 0; i < R * n; i++)
        y[i] = 0.0f;
    for (b = 0; b < nb; b++) {
        block_codes(a, x, R, k, L, b);
        block_codes(bw, w, n, k, L, b);
        cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, R, n, (int)L, 1.0, a, (int)L, bw,
                    (int)L, 0.0, acc, n);
        for (i = 0; i < R; i++) {
            float sx = x->s[((long)i * k + b * L) / x->g];
            for (j = 0; j < n; j++) {
                double s = acc[(size_t)i * n + j];
                float sw = w->s[((long)j * k + b * L) / w->g];
                CIC_ASSERT(fabs(s) <= 2147483647.0); /* cic_lowp_acc_bound */
                y[(size_t)i * n + j] += ((float)(int32_t)s * sx) * sw;
            }
        }
    }
    free(a);
    free(bw);
    free(acc);
    return 0;
}

/* The largest |q - z| of an int rule. */
static double code_max(const cic_quant *q)
{
    return q->symmetric ? ldexp(1.0, q->bits - 1) : ldexp(1.0, q->bits) - 1;
}

double cic_lowp_acc_bound(const cic_quant *a, const cic_quant *w, int k)
{
    long L = block_len(a->gran == CIC_QG_GROUP ? a->group : k,
                       w->gran == CIC_QG_GROUP ? w->group : k, k);
    return (double)L * code_max(a) * code_max(w);
}
