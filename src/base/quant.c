/* SPDX-License-Identifier: MIT */
/* quant.c: the scale rules of quant.h, in float32 arithmetic; the
 * roundings to fp8 and fp4 through cic_format_round_f. */
#include "quant.h"

#include "base.h"
#include "format.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CIC_QUANT_G_DEFAULT 128
#define CIC_QUANT_G_MAX (1 << 20)

static int qfail(char *msg, size_t cap, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int qfail(char *msg, size_t cap, const char *fmt, ...)
{
    va_list ap;
    if (msg && cap) {
        va_start(ap, fmt);
        vsnprintf(msg, cap, fmt, ap);
        va_end(ap);
    }
    return -1;
}

/* One ":"-separated option of an int or fp8 rule (q->scheme set). */
static int parse_option(cic_quant *q, const char *o, char *msg, size_t cap)
{
    const bool fp = q->scheme == CIC_QS_FLOAT;
    char *end;
    if (fp && !strcmp(o, "asym"))
        return qfail(msg, cap, "'asym' with %s: the fp8 rules are symmetric only (an fp8 "
                     "value carries its sign, its scale no zero point); allowed: tensor, "
                     "channel, token, group, groupN, sym, clipR", q->fmt->name);
    if (!strcmp(o, "tensor"))
        q->gran = CIC_QG_TENSOR;
    else if (!strcmp(o, "channel") || !strcmp(o, "token"))
        q->gran = CIC_QG_ROW;
    else if (!strcmp(o, "sym"))
        q->symmetric = true;
    else if (!strcmp(o, "asym"))
        q->symmetric = false;
    else if (!strncmp(o, "group", 5)) {
        long g = CIC_QUANT_G_DEFAULT;
        if (o[5]) {
            g = strtol(o + 5, &end, 10);
            if (*end || o[5] < '0' || o[5] > '9' || g < 1 || g > CIC_QUANT_G_MAX)
                return qfail(msg, cap, "bad group size in '%s': expected group or groupN with "
                             "N in 1..1048576", o);
        }
        q->gran = CIC_QG_GROUP;
        q->group = (int)g;
    } else if (!strncmp(o, "clip", 4)) {
        double c = strtod(o + 4, &end);
        if (!o[4] || *end || !(c > 0 && c <= 1) || o[4] == ' ')
            return qfail(msg, cap, "bad clipping ratio in '%s': expected clipR with R in "
                         "(0, 1]", o);
        q->clip = (float)c;
    } else {
        return qfail(msg, cap, "unknown option '%s'; allowed: tensor, channel, token, group, "
                     "groupN, sym, %sclipR", o, fp ? "" : "asym, ");
    }
    return 0;
}

int cic_quant_parse(cic_quant *q, const char *text, char *msg, size_t cap)
{
    char buf[128], *part, *save = NULL;
    memset(q, 0, sizeof *q);
    q->symmetric = true;
    q->gran = CIC_QG_ROW;
    q->group = CIC_QUANT_G_DEFAULT;
    q->clip = 1.0f;
    q->fmt = NULL;
    if (!text || strlen(text) >= sizeof buf)
        return qfail(msg, cap, "bad scale rule '%.60s'", text ? text : "(null)");
    if (!strcmp(text, "mxfp4") || !strcmp(text, "nvfp4")) {
        q->scheme = text[0] == 'm' ? CIC_QS_MXFP4 : CIC_QS_NVFP4;
        q->bits = 4;
        q->gran = CIC_QG_GROUP;
        q->group = text[0] == 'm' ? 32 : 16;
        return 0;
    }
    if (!strncmp(text, "mxfp4:", 6) || !strncmp(text, "nvfp4:", 6))
        return qfail(msg, cap, "'%s': mxfp4 and nvfp4 take no options (their blocks and scales "
                     "are fixed)", text);
    strcpy(buf, text);
    part = strtok_r(buf, ":", &save);
    if (part && (!strcmp(part, "int4") || !strcmp(part, "int8"))) {
        q->scheme = CIC_QS_INT;
        q->bits = part[3] - '0';
    } else if (part && (!strcmp(part, "fp8-e4m3") || !strcmp(part, "fp8-e5m2"))) {
        q->scheme = CIC_QS_FLOAT;
        q->bits = 8;
        q->fmt = cic_format_find(part);
    } else {
        return qfail(msg, cap, "unknown scale rule '%s'; allowed: int4, int8, fp8-e4m3, "
                     "fp8-e5m2 (with options after ':'), mxfp4, nvfp4", part ? part : "");
    }
    while ((part = strtok_r(NULL, ":", &save)))
        if (parse_option(q, part, msg, cap) < 0)
            return -1;
    if (text[strlen(text) - 1] == ':' || strstr(text, "::"))
        return qfail(msg, cap, "empty option in '%s'", text);
    return 0;
}

bool cic_quant_is_int(const cic_quant *q)
{
    return q->scheme == CIC_QS_INT;
}

long cic_quant_group_len(const cic_quant *q, int rows, int cols)
{
    if (q->gran == CIC_QG_TENSOR)
        return (long)rows * cols;
    return q->gran == CIC_QG_ROW ? cols : q->group;
}

long cic_quant_groups(const cic_quant *q, int rows, int cols, char *msg, size_t cap)
{
    long g = cic_quant_group_len(q, rows, cols);
    if (q->gran == CIC_QG_GROUP && cols % q->group != 0) {
        if (msg && cap)
            snprintf(msg, cap, "a group of %d values does not divide a row of %d", q->group,
                     cols);
        return -1;
    }
    return rows == 0 || cols == 0 ? 0 : (long)rows * cols / g;
}

/* x rounded to format f (saturating where f has no infinities): the
 * float32 rounding, bit for bit the MPFR one (test_format checks it). */
static float round_to(const cic_format *f, float x)
{
    return cic_format_round_f(f, x);
}

/* The bit pattern of a value v of f (E2M1, OCP FP8): the ordered integer
 * of |v| is the pattern of the exponent and significand fields (the field
 * of binade E is E - emin + 1, 0 for the subnormals), the sign in the top
 * bit, -0 included. */
static int16_t float_code(const cic_format *f, float v)
{
    int64_t k = cic_format_ordered(f, v);
    return (int16_t)((signbit(v) ? 1 << (f->bits - 1) : 0) | (k < 0 ? -k : k));
}

typedef struct {
    int16_t *codes;
    float *deq;
} qout;

static void put(const qout *o, size_t i, int16_t c, float d)
{
    if (o->codes)
        o->codes[i] = c;
    if (o->deq)
        o->deq[i] = d;
}

/* One int group of n values at x (stride 1), first index i0 of the outputs. */
static void int_group(const cic_quant *q, const float *x, size_t n, size_t i0, const qout *o,
                      float *scale, int32_t *zero)
{
    float lo = 0.0f, hi = 0.0f, s;
    int32_t z = 0, qmin, qmax;
    size_t i;
    for (i = 0; i < n; i++) {
        lo = fminf(lo, x[i]);
        hi = fmaxf(hi, x[i]);
    }
    if (q->symmetric) {
        qmax = (1 << (q->bits - 1)) - 1;
        qmin = -qmax - 1;
        s = q->clip * fmaxf(hi, -lo) / (float)qmax;
    } else {
        qmin = 0;
        qmax = (1 << q->bits) - 1;
        lo *= q->clip;
        hi *= q->clip;
        s = (hi - lo) / (float)qmax;
        if (s > 0)
            z = (int32_t)fminf(fmaxf(rintf(-lo / s), 0.0f), (float)qmax);
    }
    *scale = s;
    if (zero)
        *zero = z;
    for (i = 0; i < n; i++) {
        int32_t c = s > 0 ? (int32_t)fminf(fmaxf(rintf(x[i] / s) + (float)z, (float)qmin),
                                           (float)qmax)
                          : z;
        put(o, i0 + i, (int16_t)c, s > 0 ? (float)(c - z) * s : 0.0f);
    }
}

/* One fp8 group of n values at x, first index i0 of the outputs. */
static void fp8_group(const cic_quant *q, const float *x, size_t n, size_t i0, const qout *o,
                      float *scale)
{
    const cic_format *f = q->fmt;
    const float fmax = (float)cic_format_max(f); /* exact: 448 or 57344 */
    float amax = 0.0f, s;
    size_t i;
    for (i = 0; i < n; i++)
        amax = fmaxf(amax, fabsf(x[i])); /* NaN ignored */
    s = q->clip * amax / fmax;
    *scale = s;
    for (i = 0; i < n; i++) {
        float v = 0.0f;
        int16_t c;
        if (s > 0) {
            v = round_to(f, x[i] / s);
            /* comparisons, not fminf/fmaxf: a NaN stays NaN */
            if (v > fmax)
                v = fmax;
            else if (v < -fmax)
                v = -fmax;
        }
        c = isnan(v) ? (int16_t)((signbit(v) ? 0x80 : 0) | 0x7f) : float_code(f, v);
        put(o, i0 + i, c, v * s);
    }
}

/* One mxfp4 block. */
static void mx_block(const float *x, size_t n, size_t i0, const qout *o, float *scale)
{
    const cic_format *fp4 = cic_format_get(CIC_FORMAT_FP4_E2M1);
    float amax = 0.0f;
    int e = -127, k;
    size_t i;
    for (i = 0; i < n; i++)
        amax = fmaxf(amax, fabsf(x[i]));
    if (amax > 0) {
        frexpf(amax, &k); /* amax = m 2^k, m in [1/2, 1): floor(log2) = k - 1 */
        e = k - 1 - 2;
        e = e < -127 ? -127 : e > 127 ? 127 : e;
    }
    *scale = ldexpf(1.0f, e);
    for (i = 0; i < n; i++) {
        float v = round_to(fp4, ldexpf(x[i], -e)); /* exact scaling by 2^-e */
        put(o, i0 + i, float_code(fp4, v), ldexpf(v, e));
    }
}

/* One nvfp4 block under the tensor scale t. */
static void nv_block(const float *x, size_t n, size_t i0, const qout *o, float t, float *scale)
{
    const cic_format *fp4 = cic_format_get(CIC_FORMAT_FP4_E2M1);
    const cic_format *e4m3 = cic_format_get(CIC_FORMAT_FP8_E4M3);
    float amax = 0.0f, s, d;
    size_t i;
    for (i = 0; i < n; i++)
        amax = fmaxf(amax, fabsf(x[i]));
    s = round_to(e4m3, amax / 6.0f / t);
    *scale = s;
    d = s * t;
    for (i = 0; i < n; i++) {
        float v = s > 0 ? round_to(fp4, x[i] / d) : 0.0f;
        put(o, i0 + i, float_code(fp4, v), v * s * t);
    }
}

int cic_quant_matrix(const cic_quant *q, const float *x, int rows, int cols, int16_t *codes,
                     float *scale, int32_t *zero, float *tensor_scale, float *deq, char *msg,
                     size_t cap)
{
    long ng = cic_quant_groups(q, rows, cols, msg, cap), g;
    size_t n = (size_t)cic_quant_group_len(q, rows, cols), i, total = (size_t)rows * cols;
    qout o = {codes, deq};
    float t = 1.0f, sc, amax = 0.0f;
    int32_t zp = 0;
    if (ng < 0)
        return -1;
    if (q->scheme == CIC_QS_NVFP4) {
        for (i = 0; i < total; i++)
            amax = fmaxf(amax, fabsf(x[i]));
        t = amax > 0 ? amax / (448.0f * 6.0f) : 1.0f;
        if (tensor_scale)
            *tensor_scale = t;
    }
    for (g = 0; g < ng; g++) {
        size_t i0 = (size_t)g * n;
        if (q->scheme == CIC_QS_INT)
            int_group(q, x + i0, n, i0, &o, &sc, &zp);
        else if (q->scheme == CIC_QS_FLOAT)
            fp8_group(q, x + i0, n, i0, &o, &sc);
        else if (q->scheme == CIC_QS_MXFP4)
            mx_block(x + i0, n, i0, &o, &sc);
        else
            nv_block(x + i0, n, i0, &o, t, &sc);
        if (scale)
            scale[g] = sc;
        if (zero && q->scheme == CIC_QS_INT)
            zero[g] = q->symmetric ? 0 : zp;
    }
    return 0;
}
