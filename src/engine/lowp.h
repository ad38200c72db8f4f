/* SPDX-License-Identifier: MIT */
/* lowp.h: the pieces of the low-precision engines that the pipeline (its
 * dumps) and the tests use on their own: what a tensor is stored as in an
 * engine, and the integer linear with its int32 accumulation. */
#ifndef CIC_LOWP_H
#define CIC_LOWP_H

#include "../model/model.h"

#include <stdbool.h>
#include <stdint.h>

/* The linears whose weights and inputs an engine quantizes: those that read
 * or write the residual stream (every projection and MLP linear, and the
 * head). Online rotations and the adaLN modulation are not. */
bool cic_lowp_quantized(const cic_op *o);

/* Is tensor id the static weight of a quantized linear of m? */
bool cic_lowp_is_linear_weight(const cic_model *m, int id);

/* The values of m's weight or input tensor id as engine lp stores them:
 * a quantized linear's weight by lp's weights (a scale rule: codes, scale
 * per group, zero, tensor scale as cic_quant_matrix fills them; a plain
 * format: rounded), anything else rounded to lp's element format. The
 * source is the unrounded value, rounded once (lp->from unrounded and the
 * tensor has one), else the float32 value; a scale rule reads float32
 * values either way (its arithmetic is float32). deq gets rows * cols
 * floats; codes, scale, zero and tscale may be NULL (left alone for a plain
 * format). 0, or -1 with msg. */
int cic_lowp_tensor(float *deq, int16_t *codes, float *scale, int32_t *zero, float *tscale,
                    const cic_model *m, int id, const cic_lowp_spec *lp, char *msg,
                    size_t cap);

/* One operand of an integer linear: codes [rows, k] row-major, one scale
 * (and zero point, or NULL for symmetric) per group of g consecutive values
 * in row-major order (g = k per row, rows * k per tensor, or G). */
typedef struct {
    const int16_t *q;
    const float *s;
    const int32_t *z;
    long g;
} cic_lowp_int_operand;


/* y [R, n] = x [R, k] times w [n, k]^T as an integer kernel computes it:
 * over blocks of L = gcd(min(gx, k), min(gw, k)) columns in order, the
 * exact int32 sum acc of (qx - zx)(qw - zw), then in float32
 * y += ((float)acc * sx) * sw, starting from y = 0. The sums go through
 * dgemm on integer-valued doubles (exact: every partial sum is an integer
 * below 2^53), so the result is the integer kernel's for any summation
 * order. The caller keeps every |acc| below 2^31 (cic_lowp_acc_bound).
 * 0, or -1 when memory runs out. */
int cic_lowp_int_matmul(float *y, const cic_lowp_int_operand *x,
                        const cic_lowp_int_operand *w, int R, int n, int k);

/* The largest |acc| an integer linear of width k can reach with rules a
 * and w (as a double), to refuse what would overflow int32. */
double cic_lowp_acc_bound(const cic_quant *a, const cic_quant *w, int k);

#endif
