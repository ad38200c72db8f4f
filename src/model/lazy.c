/* SPDX-License-Identifier: MIT */
/* lazy.c: weights made when they are read (lazy.h). */
#include "lazy.h"

#include "../base/base.h"
#include "../base/par.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

unsigned long cic_lazy_fallback_lines(const cic_rt *rt)
{
    return rt ? (unsigned long)atomic_load(&rt->lazy_fallback) : 0;
}

cic_lazy *cic_lazy_values(float *src, int rows, int cols, const float *gain,
                          mpfr_prec_t prec, cic_rt *rt)
{
    cic_lazy *z = cic_calloc(1, sizeof *z);
    if (!z || (gain && !(z->gain = cic_calloc((size_t)cols, sizeof *z->gain)))) {
        free(z);
        return NULL;
    }
    if (gain)
        memcpy(z->gain, gain, (size_t)cols * sizeof *gain);
    z->refs = 1;
    z->rows = rows;
    z->cols = cols;
    z->prec = prec;
    z->side = CIC_LAZY_VALUES;
    z->src = src;
    z->rt = rt;
    return z;
}

cic_lazy *cic_lazy_rotate(cic_lazy *base, enum cic_lazy_side side, int d, int K,
                          const signed char *hk, const signed char *sign, mpfr_prec_t prec)
{
    cic_lazy *z = cic_calloc(1, sizeof *z);
    CIC_ASSERT(base->side == CIC_LAZY_VALUES && side != CIC_LAZY_VALUES);
    CIC_ASSERT(d == (side == CIC_LAZY_RIGHT ? base->cols : base->rows) && K >= 1 && d % K == 0);
    if (!z || !(z->hk = cic_calloc((size_t)K * K, 1)) || !(z->sign = cic_calloc((size_t)d, 1))) {
        if (z)
            free(z->hk);
        free(z);
        return NULL;
    }
    memcpy(z->hk, hk, (size_t)K * K);
    memcpy(z->sign, sign, (size_t)d);
    z->refs = 1;
    z->rows = base->rows;
    z->cols = base->cols;
    z->prec = prec;
    z->side = side;
    z->base = cic_lazy_ref(base);
    z->rt = base->rt;
    z->d = d;
    z->K = K;
    return z;
}

cic_lazy *cic_lazy_ref(cic_lazy *z)
{
    if (z)
        z->refs++;
    return z;
}

void cic_lazy_unref(cic_lazy *z)
{
    if (!z || --z->refs > 0)
        return;
    cic_lazy_unref(z->base);
    free(z->src);
    free(z->gain);
    free(z->hk);
    free(z->sign);
    free(z);
}

/* ---- making the values, a line at a time ---- */

/* Where a made value goes: entry idx of the tensor is res. */
typedef struct {
    void (*put)(void *dst, size_t idx, mpfr_srcptr res);
    void *dst;
} sink;

/* A thread's scratch: the line at the working precision (v), as it was
 * (v0, the base's precision), the results, the base mixing and the
 * fallback's column of Q. */
typedef struct {
    mpfr_t *v, *v0, *res, *acc, *qcol;
    mpfr_t t0, r, w24, g24;
    cic_dot_scratch dot;
    int n, K;
    bool ok;
} lws;

static void lws_clear(lws *s)
{
    if (s->ok) {
        mpfr_clears(s->t0, s->r, s->w24, s->g24, (mpfr_ptr)0);
        cic_dot_scratch_clear(&s->dot);
    }
    cic_mpvec_destroy(s->v, (size_t)s->n);
    cic_mpvec_destroy(s->v0, (size_t)s->n);
    cic_mpvec_destroy(s->res, (size_t)s->n);
    cic_mpvec_destroy(s->qcol, (size_t)s->n);
    cic_mpvec_destroy(s->acc, (size_t)s->K);
    memset(s, 0, sizeof *s);
}

static int lws_init(lws *s, const cic_lazy *z)
{
    bool rot = z->side != CIC_LAZY_VALUES;
    mpfr_prec_t bp = rot ? z->base->prec : z->prec, pw = (bp > 24 ? bp : 24) + 128;
    int n = rot ? z->d : z->cols;
    memset(s, 0, sizeof *s);
    s->n = n;
    s->K = rot ? z->K : 1;
    s->res = cic_mpvec_create((size_t)n, z->prec);
    if (!s->res)
        return -1;
    if (rot) {
        s->v = cic_mpvec_create((size_t)n, pw);
        s->v0 = cic_mpvec_create((size_t)n, bp);
        s->qcol = cic_mpvec_create((size_t)n, z->prec);
        s->acc = cic_mpvec_create((size_t)s->K, pw);
        if (!s->v || !s->v0 || !s->qcol || !s->acc ||
            cic_dot_scratch_init(&s->dot, (size_t)n, bp > z->prec ? bp : z->prec) < 0) {
            lws_clear(s);
            return -1;
        }
    } else if (cic_dot_scratch_init(&s->dot, 1, z->prec) < 0) {
        lws_clear(s);
        return -1;
    }
    mpfr_init2(s->t0, pw);
    mpfr_init2(s->r, z->prec);
    mpfr_inits2(24, s->w24, s->g24, (mpfr_ptr)0);
    s->ok = true;
    /* Q's entries are +-r, r = 1/sqrt(d) correctly rounded (qmat.c) */
    mpfr_set_ui(s->r, (unsigned long)(rot ? z->d : 1), MPFR_RNDN);
    mpfr_rec_sqrt(s->r, s->r, MPFR_RNDN);
    return 0;
}

/* Entry (i, j) of a VALUES recipe, rounded into y. */
static void value_at(const cic_lazy *z, int i, int j, mpfr_ptr y, lws *s)
{
    mpfr_set_flt(s->w24, z->src[(size_t)i * z->cols + j], MPFR_RNDN);
    if (z->gain) {
        mpfr_set_flt(s->g24, z->gain[j], MPFR_RNDN);
        mpfr_mul(y, s->w24, s->g24, MPFR_RNDN);
    } else {
        mpfr_set(y, s->w24, MPFR_RNDN);
    }
}

/* Output j of a rotated line as the correctly rounded dot product of the
 * line (s->v0) with Q's column j. */
static void by_column(const cic_lazy *z, int j, lws *s)
{
    int i;
    for (i = 0; i < z->d; i++) {
        mpfr_set(s->qcol[i], s->r, MPFR_RNDN);
        if (cic_hadamard_kron_entry(z->hk, (size_t)z->K, (size_t)(z->d / z->K), (size_t)i,
                                    (size_t)j) * z->sign[j] < 0)
            mpfr_neg(s->qcol[i], s->qcol[i], MPFR_RNDN);
    }
    cic_mp_dot(s->res[j], (const mpfr_t *)s->v0, 1, (const mpfr_t *)s->qcol, 1, (size_t)z->d,
               NULL, &s->dot);
}

/* Line l of a rotation into s->res: row l of the base (RIGHT) or its
 * column l (LEFT), times Q. */
static void rotated_line(const cic_lazy *z, int l, lws *s)
{
    int i, j, d = z->d;
    bool exact;
    for (i = 0; i < d; i++) {
        if (z->side == CIC_LAZY_RIGHT)
            value_at(z->base, l, i, s->v0[i], s);
        else
            value_at(z->base, i, l, s->v0[i], s);
        mpfr_set(s->v[i], s->v0[i], MPFR_RNDN); /* exact: pw > the base's precision */
    }
    exact = cic_mp_fwht_row(s->v, d, z->K, z->hk, false, s->acc, s->t0);
    if (!exact)
        CIC_RT_COUNT(z->rt, lazy_fallback, 1);
    for (j = 0; j < d; j++) {
        if (!exact || mpfr_zero_p(s->v[j])) {
            by_column(z, j, s); /* the sign of a zero sum is the dot product's */
            continue;
        }
        mpfr_mul(s->res[j], s->v[j], s->r, MPFR_RNDN);
        if (z->sign[j] < 0)
            mpfr_neg(s->res[j], s->res[j], MPFR_RNDN);
    }
}

typedef struct {
    const cic_lazy *z;
    sink out;
    int rc[CIC_PAR_MAX];
} ljob;

/* Lines [lo, hi) of a walk (share t). */
static void lines(void *p, size_t lo, size_t hi, int t)
{
    ljob *J = p;
    const cic_lazy *z = J->z;
    lws s;
    int l, e;
    J->rc[t] = -1;
    if (lws_init(&s, z) < 0)
        return;
    for (l = (int)lo; l < (int)hi; l++) {
        if (z->side == CIC_LAZY_VALUES) {
            for (e = 0; e < z->cols; e++)
                value_at(z, l, e, s.res[e], &s);
            for (e = 0; e < z->cols; e++)
                J->out.put(J->out.dst, (size_t)l * z->cols + e, s.res[e]);
            continue;
        }
        rotated_line(z, l, &s);
        for (e = 0; e < z->d; e++)
            J->out.put(J->out.dst,
                       z->side == CIC_LAZY_RIGHT ? (size_t)l * z->cols + e
                                                 : (size_t)e * z->cols + l,
                       s.res[e]);
    }
    lws_clear(&s);
    J->rc[t] = 0;
}

static int walk(const cic_lazy *z, sink out)
{
    ljob J = {z, out, {0}};
    int n = z->side == CIC_LAZY_LEFT ? z->cols : z->rows, t, rc = 0;
    cic_par_ranges(n > 0 ? (size_t)n : 0, cic_rt_matmul_threads(z->rt), lines, &J);
    for (t = 0; t < CIC_PAR_MAX; t++)
        rc = J.rc[t] < 0 ? -1 : rc;
    return rc;
}

static void put_mpfr(void *dst, size_t idx, mpfr_srcptr res)
{
    mpfr_set(((mpfr_t *)dst)[idx], res, MPFR_RNDN);
}

static void put_pack(void *dst, size_t idx, mpfr_srcptr res)
{
    cic_mp_pack_set(dst, idx, res);
}

static void put_f32(void *dst, size_t idx, mpfr_srcptr res)
{
    ((float *)dst)[idx] = cic_mp_get_f32(res);
}

static void put_f64(void *dst, size_t idx, mpfr_srcptr res)
{
    ((double *)dst)[idx] = mpfr_get_d(res, MPFR_RNDN);
}

int cic_lazy_make(const cic_lazy *z, mpfr_t *out)
{
    return walk(z, (sink){ put_mpfr, out });
}

int cic_lazy_make_pack(const cic_lazy *z, cic_mp_pack *pk)
{
    if (cic_mp_pack_alloc(pk, (size_t)z->rows * z->cols, z->prec) < 0)
        return -1;
    if (walk(z, (sink){ put_pack, pk }) < 0) {
        cic_mp_pack_clear(pk);
        return -1;
    }
    cic_mp_pack_finish(pk);
    return 0;
}

/* A VALUES recipe at 48 bits or more holds exact products of two floats
 * (24 + 24 significant bits, exponents within double's range): each value
 * is (double)w * (double)g, exactly, so it needs no MPFR; into f32 (its
 * one rounding to binary32, as cic_mp_get_f32 gives) or f64. */
static bool values_exact(const cic_lazy *z)
{
    return z->side == CIC_LAZY_VALUES && z->prec >= 48;
}

typedef struct {
    const cic_lazy *z;
    float *f32;
    double *f64;
} djob;

/* Rows [lo, hi) of values_direct. */
static void direct_rows(void *p, size_t lo, size_t hi, int t)
{
    const djob *J = p;
    const cic_lazy *z = J->z;
    size_t c = (size_t)z->cols, i, j;
    (void)t;
    for (i = lo; i < hi; i++)
        for (j = 0; j < c; j++) {
            double v = z->gain ? (double)z->src[i * c + j] * (double)z->gain[j]
                               : (double)z->src[i * c + j];
            if (J->f32)
                J->f32[i * c + j] = (float)v;
            else
                J->f64[i * c + j] = v;
        }
}

/* Rows split over the recipe's cic_rt_matmul_threads (a 7B layer's 200 M values take
 * seconds on one): each value is computed alone, so the bits are those of
 * one thread. */
static void values_direct(const cic_lazy *z, float *f32, double *f64)
{
    djob J = {z, f32, f64};
    int n = z->rows;
    /* below a million values a thread costs more than it saves */
    cic_par_ranges(n > 0 ? (size_t)n : 0,
                   (double)n * z->cols < 1e6 ? 1 : cic_rt_matmul_threads(z->rt), direct_rows,
                   &J);
}

int cic_lazy_make_f32(const cic_lazy *z, float *out)
{
    if (values_exact(z)) {
        values_direct(z, out, NULL);
        return 0;
    }
    return walk(z, (sink){ put_f32, out });
}

int cic_lazy_make_f64(const cic_lazy *z, double *out)
{
    if (values_exact(z)) {
        values_direct(z, NULL, out);
        return 0;
    }
    return walk(z, (sink){ put_f64, out });
}
