/* SPDX-License-Identifier: MIT */
/* quant.h: the scale rules of the integer, fp8 and block number formats: how a
 * float32 matrix [rows, cols] (row-major; a weight [out, in] or the
 * activations [tokens, d] entering a linear) becomes codes and scales, and
 * what it dequantizes to. All arithmetic is float32 with round to nearest
 * even, as the PyTorch reference quantizers compute it.
 *
 * int<b> (b = 4 or 8), one scale per group of values: the whole tensor, one
 * row ("channel": an output row of a weight, a token of an activation), or
 * G consecutive values of a row (G divides cols; 128 by default).
 *   symmetric:  r = clip * max|x|, s = r / (2^(b-1) - 1),
 *               q = clamp(rint(x / s), -2^(b-1), 2^(b-1) - 1), x' = q s;
 *   asymmetric: lo = clip * min(min x, 0), hi = clip * max(max x, 0),
 *               s = (hi - lo) / (2^b - 1), z = clamp(rint(-lo / s), 0, 2^b - 1),
 *               q = clamp(rint(x / s) + z, 0, 2^b - 1), x' = (q - z) s.
 *   A group whose scale is 0 (all its values 0) has codes 0 and x' = 0.
 * fp8-e4m3, fp8-e5m2 (the FP8 recipe of dynamic scaling): one float32 scale
 *   per group, the groups as for int, symmetric only:
 *   s = clip * max|x| / fmax (fmax the format's largest finite value, 448
 *   or 57344), v = x / s rounded once to the format (ties to even) and
 *   clamped to +-fmax, x' = v s. E4M3 saturates by itself; E5M2 has
 *   infinities, reached only past fmax, which clipping allows and the
 *   clamp keeps finite. A group whose scale is 0 has codes 0 and x' = 0; a
 *   NaN value stays NaN.
 * mxfp4 (OCP Microscaling v1.0): blocks of 32 values of a row share a scale
 *   2^e, e = floor(log2 max|x|) - 2 (2: the largest exponent of FP4 E2M1),
 *   clamped to E8M0's [-127, 127] (-127 for an all-zero block); each value
 *   is x / 2^e rounded to fp4-e2m1 with saturation to +-6; x' = v 2^e.
 * nvfp4: blocks of 16 values with an fp8-e4m3 scale under one float32
 *   scale per tensor, t = max|x| / (448 * 6) (1 for an all-zero tensor):
 *   s = e4m3(max|block| / 6 / t) (saturating), each value
 *   v = fp4(x / (s t)) with saturation, x' = (v s) t; a block whose s is 0
 *   has codes 0. (The per-tensor scale as torchao's NVFP4 recipe uses it.)
 * Codes: the integer q (int formats); the 8-bit OCP FP8 pattern as 0..255,
 * sign in bit 7, then the exponent and significand fields (fp8; a NaN is
 * S.1111111, NaN in both formats); the 4-bit E2M1 pattern, sign in bit 3
 * (mxfp4, nvfp4). */
#ifndef CIC_QUANT_H
#define CIC_QUANT_H

#include "format.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum cic_qscheme { CIC_QS_INT, CIC_QS_MXFP4, CIC_QS_NVFP4, CIC_QS_FLOAT };
enum cic_qgran { CIC_QG_TENSOR, CIC_QG_ROW, CIC_QG_GROUP };

typedef struct {
    enum cic_qscheme scheme;
    int bits;              /* int: 4 or 8; fp8: 8; fp4 block formats: 4 */
    bool symmetric;        /* int (fp8: always) */
    enum cic_qgran gran;   /* int, fp8; the block formats: GROUP */
    int group;             /* GROUP: values per scale along a row */
    float clip;            /* int, fp8: the ratio of the range kept, in (0, 1] */
    const cic_format *fmt; /* fp8: the element format; NULL otherwise */
} cic_quant;

/* Parse a scale rule: "int4", "int8:tensor", "int4:channel:asym" ("token"
 * is "channel"), "int4:group:sym", "int4:group64:clip0.9", "fp8-e4m3",
 * "fp8-e4m3:tensor", "fp8-e5m2:group32:clip0.9", "mxfp4", "nvfp4".
 * Defaults: channel, symmetric, clip 1, G = 128. 0, or -1 with a message
 * naming the part and what is allowed. */
int cic_quant_parse(cic_quant *q, const char *text, char *msg, size_t cap);

/* q is an integer rule (int4, int8: codes q with a zero point when
 * asymmetric), not a floating-point one. */
bool cic_quant_is_int(const cic_quant *q);

/* Values per scale group of a [rows, cols] matrix under q: rows * cols
 * (tensor), cols (channel / token) or the group size. */
long cic_quant_group_len(const cic_quant *q, int rows, int cols);

/* The scale groups of a [rows, cols] matrix (row-major over the groups),
 * or -1 (msg) when the group does not divide cols. */
long cic_quant_groups(const cic_quant *q, int rows, int cols, char *msg, size_t cap);

/* Quantize x [rows, cols]: codes (one per value), scale (one per group),
 * zero (asymmetric int: one per group), tensor_scale (nvfp4), deq (the
 * dequantized values). Every output may be NULL. 0, or -1 (msg) when the
 * group does not divide cols. */
int cic_quant_matrix(const cic_quant *q, const float *x, int rows, int cols, int16_t *codes,
                     float *scale, int32_t *zero, float *tensor_scale, float *deq, char *msg,
                     size_t cap);

#endif
