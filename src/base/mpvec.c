/* SPDX-License-Identifier: MIT */
/* mpvec.c: MPFR vectors and the correctly rounded dot product (mpvec.h). */
#include "mpvec.h"
#include "mpdot_impl.h"

#include "format.h"

#include "base.h"

#include <math.h>
#include <string.h>
#if defined(__x86_64__)
#include <x86intrin.h>
#endif

int cic_dot_scratch_init(cic_dot_scratch *s, size_t cap, mpfr_prec_t prec)
{
    size_t i;
    memset(s, 0, sizeof *s);
    if (cap == 0)
        cap = 1;
    s->prod = cic_calloc(cap, sizeof *s->prod);
    s->ptr = cic_calloc(cap + 1, sizeof *s->ptr); /* + a slot for a bias */
    if (!s->prod || !s->ptr) {
        free(s->prod);
        free(s->ptr);
        memset(s, 0, sizeof *s);
        return -1;
    }
    for (i = 0; i < cap; i++) {
        mpfr_init2(s->prod[i], 2 * prec);
        s->ptr[i] = s->prod[i];
    }
    s->cap = cap;
    s->prec = prec;
    return 0;
}

void cic_dot_scratch_clear(cic_dot_scratch *s)
{
    size_t i;
    if (!s->prod)
        return;
    for (i = 0; i < s->cap; i++)
        mpfr_clear(s->prod[i]);
    free(s->prod);
    free(s->ptr);
    memset(s, 0, sizeof *s);
}

/* The exact sum in integers. Every finite MPFR value is M * 2^(e - 64 L)
 * with M its L-limb significand, so a product x_i y_i is the (Lx + Ly)-limb
 * integer Mx My at the weight 2^(ex + ey - 64 (Lx + Ly)). Placed in a
 * fixed-point accumulator whose unit is the smallest such weight, the
 * products add exactly with integer carries; positive and negative terms go
 * to two accumulators (carries stay short), and their difference is rounded
 * once by mpfr_set_z_2exp. A correctly rounded result is unique, so this
 * returns the same bits as exact products plus mpfr_sum, at a fraction of
 * the cost (no MPFR call per term). It declines (returns -1) on NaN or Inf,
 * when every term is zero (signed-zero rules), on factors of over 2048 bits
 * together (DOT_MAX_LIMBS) or when the terms span more than the accumulator holds;
 * the caller then takes the MPFR path. */
/* *a += b + c (c a carry of 0 or 1); returns the carry out. */
DOT_INLINE mp_limb_t addc(mp_limb_t *a, mp_limb_t b, mp_limb_t c)
{
#if defined(__x86_64__) && GMP_NUMB_BITS == 64
    unsigned long long r;
    c = _addcarry_u64((unsigned char)c, *a, b, &r);
    *a = r;
    return c;
#else
    dot_u128 t = (dot_u128)*a + b + c;
    *a = (mp_limb_t)t;
    return (mp_limb_t)(t >> 64);
#endif
}

static int limbs_of(mpfr_srcptr v)
{
    return (int)((mpfr_get_prec(v) + GMP_NUMB_BITS - 1) / GMP_NUMB_BITS);
}

/* acc[off..] += p[0..np) << sh, carries rippling up; acc has room. np is a
 * constant where it is inlined, so the loops unroll. */
DOT_INLINE void acc_add(mp_limb_t *acc, int w, int off, const mp_limb_t *p, int np, unsigned sh)
{
    mp_limb_t q[DOT_MAX_LIMBS + 1], c = 0;
    int k;
    if (np < 1 || np > DOT_MAX_LIMBS)
        __builtin_unreachable(); /* callers check the limb counts */
    if (sh) {
        q[0] = p[0] << sh;
#pragma GCC unroll 8
        for (k = 1; k < np; k++)
            q[k] = (p[k] << sh) | (p[k - 1] >> (GMP_NUMB_BITS - sh));
        q[np] = p[np - 1] >> (GMP_NUMB_BITS - sh);
    } else {
#pragma GCC unroll 8
        for (k = 0; k < np; k++)
            q[k] = p[k];
        q[np] = 0;
    }
    acc += off;
#pragma GCC unroll 9
    for (k = 0; k <= np; k++)
        c = addc(&acc[k], q[k], c);
    for (k = np + 1; c && off + k < w; k++) {
        acc[k]++;
        c = acc[k] == 0;
    }
}

/* p[0..la+lb) = a[0..la) * b[0..lb). GMP's mpn_mul does this, but as a
 * call per term; inlined with constant la and lb (1 to 4 limbs) it is a few
 * multiply instructions. Wider factors (above 8 limbs together) take
 * mpn_mul, whose basecase is tuned assembly and the call a small part. */
DOT_INLINE void limbs_mul(mp_limb_t *p, const mp_limb_t *a, int la, const mp_limb_t *b, int lb)
{
    int i, j;
    if (la + lb > 8) {
        if (la >= lb)
            mpn_mul(p, a, la, b, lb);
        else
            mpn_mul(p, b, lb, a, la);
        return;
    }
#pragma GCC unroll 8
    for (i = 0; i < la + lb; i++)
        p[i] = 0;
#pragma GCC unroll 4
    for (j = 0; j < lb; j++) {
        mp_limb_t c = 0;
#pragma GCC unroll 4
        for (i = 0; i < la; i++) {
            dot_u128 t = (dot_u128)a[i] * b[j] + p[i + j] + c;
            p[i + j] = (mp_limb_t)t;
            c = (mp_limb_t)(t >> 64);
        }
        p[j + la] = c;
    }
}

void cic_mp_span_init(cic_mp_span *sp, const mpfr_t *x, size_t inc, size_t n)
{
    mpfr_prec_t p = 0;
    size_t i;
    bool any = false;
    memset(sp, 0, sizeof *sp);
    for (i = 0; i < n; i++) {
        mpfr_srcptr a = x[i * inc];
        mpfr_exp_t e;
        if (!mpfr_regular_p(a)) {
            if (!mpfr_number_p(a))
                return; /* NaN or Inf: MPFR's rules */
            continue;
        }
        e = mpfr_custom_get_exp(a);
        if (!any) {
            p = mpfr_get_prec(a);
            sp->emin = sp->emax = e;
            any = true;
        } else if (mpfr_get_prec(a) != p) {
            return; /* mixed precisions */
        }
        if (e < sp->emin)
            sp->emin = e;
        if (e > sp->emax)
            sp->emax = e;
    }
    sp->limbs = any ? (int)((p + GMP_NUMB_BITS - 1) / GMP_NUMB_BITS) : 0;
    sp->usable = any && sp->limbs < DOT_MAX_LIMBS;
}

/* Pass 2 for nr rows of la-limb x values against lb-limb y values (la, lb
 * constants where inlined): y[i] is read once for all rows. */
DOT_INLINE void rows_pass2(dot_acc *acc, int nr, const mpfr_t *const *x, size_t incx,
                           const mpfr_t *y, size_t incy, size_t n, int la, int lb)
{
    mp_limb_t p[DOT_MAX_LIMBS];
    size_t i;
    int t;
    for (i = 0; i < n; i++) {
        mpfr_srcptr b = y[i * incy];
        const mp_limb_t *bl;
        mpfr_exp_t eb;
        int sb;
        if (!mpfr_regular_p(b))
            continue;
        bl = mpfr_custom_get_significand(b);
        eb = mpfr_custom_get_exp(b);
        sb = mpfr_signbit(b) != 0;
        for (t = 0; t < nr; t++) {
            mpfr_srcptr a = x[t][i * incx];
            unsigned long s; /* >= 0: ebase is the least weight */
            dot_acc *A = &acc[t];
            if (!A->on || !mpfr_regular_p(a))
                continue;
            limbs_mul(p, mpfr_custom_get_significand(a), la, bl, lb);
            s = (unsigned long)(mpfr_custom_get_exp(a) + eb - A->ebase);
            acc_add((mpfr_signbit(a) != 0) != sb ? A->neg : A->pos, A->w,
                    (int)(s / GMP_NUMB_BITS), p, la + lb, (unsigned)(s % GMP_NUMB_BITS));
            A->nz++;
        }
    }
}

int _cic_dot_rows_setup(dot_acc *acc, int nr, const cic_mp_span *sx, const cic_mp_span *sy,
                      mpfr_srcptr bias, int kb)
{
    int t, la = 0, lb = sy->limbs;
    for (t = 0; t < nr; t++) {
        dot_acc *A = &acc[t];
        mpfr_exp_t emax;
        A->on = sx[t].usable && sx[t].limbs + lb <= DOT_MAX_LIMBS &&
                (la == 0 || sx[t].limbs == la);
        if (!A->on)
            continue;
        la = sx[t].limbs;
        /* bounds of every product's bits: [2^emin, 2^emax) */
        A->emin = sx[t].emin + sy->emin - GMP_NUMB_BITS * (la + lb);
        emax = sx[t].emax + sy->emax;
        if (kb) {
            mpfr_exp_t eb = mpfr_custom_get_exp(bias);
            if (eb - GMP_NUMB_BITS * kb < A->emin)
                A->emin = eb - GMP_NUMB_BITS * kb;
            if (eb > emax)
                emax = eb;
        }
        A->ebase = A->emin + GMP_NUMB_BITS * (la + lb);
        /* n < 2^63 terms below 2^emax sum below 2^(emax + 63): a spare limb */
        if (emax - A->emin > (mpfr_exp_t)GMP_NUMB_BITS * (DOT_ACC_LIMBS - 2)) {
            A->on = false;
            continue;
        }
        A->w = (int)((emax - A->emin) / GMP_NUMB_BITS) + 2;
        A->nz = 0;
        memset(A->pos, 0, (size_t)A->w * sizeof A->pos[0]);
        memset(A->neg, 0, (size_t)A->w * sizeof A->neg[0]);
    }
    return la;
}

unsigned _cic_dot_rows_finish(mpfr_ptr *r, dot_acc *acc, int nr, mpfr_srcptr bias, int kb)
{
    unsigned done = 0;
    int t;
    for (t = 0; t < nr; t++) {
        dot_acc *A = &acc[t];
        mp_limb_t *hi;
        mpz_t z;
        int sz, sign;
        if (!A->on || (A->nz == 0 && !kb))
            continue; /* declined, or only zero products: signed-zero rules */
        if (kb) {
            unsigned long s = (unsigned long)(mpfr_custom_get_exp(bias) - GMP_NUMB_BITS * kb -
                                              A->emin);
            acc_add(mpfr_signbit(bias) ? A->neg : A->pos, A->w, (int)(s / GMP_NUMB_BITS),
                    mpfr_custom_get_significand(bias), kb, (unsigned)(s % GMP_NUMB_BITS));
        }
        /* the difference, with its sign; an exact zero is +0 (RNDN) as in
         * mpfr_sum */
        sign = mpn_cmp(A->pos, A->neg, A->w);
        if (sign >= 0) {
            mpn_sub_n(A->pos, A->pos, A->neg, A->w);
            hi = A->pos;
        } else {
            mpn_sub_n(A->neg, A->neg, A->pos, A->w);
            hi = A->neg;
        }
        sz = A->w;
        while (sz > 0 && hi[sz - 1] == 0)
            sz--;
        if (sz == 0) {
            mpfr_set_zero(r[t], 1);
        } else {
            mpz_roinit_n(z, hi, sign >= 0 ? sz : -sz);
            mpfr_set_z_2exp(r[t], z, A->emin, MPFR_RNDN);
        }
        done |= 1u << t;
    }
    return done;
}

int _cic_dot_bias_limbs(mpfr_srcptr bias)
{
    if (!bias || mpfr_zero_p(bias))
        return 0;
    if (!mpfr_regular_p(bias) || limbs_of(bias) > DOT_MAX_LIMBS)
        return -1;
    return limbs_of(bias);
}

#define DOT_SWITCH(CALL)                                                       \
    switch (la * 64 + lb) { /* la, lb < 64 */                                  \
    case 1 * 64 + 1: CALL(1, 1); break;                                        \
    case 2 * 64 + 1: CALL(2, 1); break;                                        \
    case 1 * 64 + 2: CALL(1, 2); break;                                        \
    case 2 * 64 + 2: CALL(2, 2); break;                                        \
    case 3 * 64 + 1: CALL(3, 1); break; /* the truth's recheck, 192 bits */    \
    case 3 * 64 + 3: CALL(3, 3); break;                                        \
    case 4 * 64 + 1: CALL(4, 1); break;                                        \
    case 4 * 64 + 4: CALL(4, 4); break;                                        \
    default: CALL(la, lb);                                                     \
    }

unsigned cic_mp_dot_rows(mpfr_ptr *r, const mpfr_t *const *x, const cic_mp_span *sx, size_t incx,
                         int nr, const mpfr_t *y, size_t incy, const cic_mp_span *sy, size_t n,
                         mpfr_srcptr bias)
{
    dot_acc acc[CIC_DOT_ROWS];
    int la, lb = sy->limbs, kb = _cic_dot_bias_limbs(bias);
    CIC_ASSERT(nr >= 1 && nr <= CIC_DOT_ROWS);
    if (!sy->usable || kb < 0)
        return 0;
    la = _cic_dot_rows_setup(acc, nr, sx, sy, bias, kb);
    if (la == 0)
        return 0;
#define PASS2(A, B) rows_pass2(acc, nr, x, incx, y, incy, n, (A), (B))
    DOT_SWITCH(PASS2)
#undef PASS2
    return _cic_dot_rows_finish(r, acc, nr, bias, kb);
}

/* ---- packed vectors ---- */

int cic_mp_pack_init(cic_mp_pack *pk, const mpfr_t *x, size_t n)
{
    size_t i;
    int L;
    memset(pk, 0, sizeof *pk);
    cic_mp_span_init(&pk->span, x, 1, n);
    pk->n = n;
    if (!pk->span.usable || pk->span.limbs >= PACK_INIT_MAX_LIMBS) {
        pk->span.usable = false;
        return 0; /* nothing to pack: its dot products read the mpfr_t values */
    }
    L = pk->L = pk->span.limbs;
    for (i = 0; i < n && !pk->prec; i++)
        if (mpfr_regular_p(x[i]))
            pk->prec = mpfr_get_prec(x[i]);
    pk->limbs = cic_calloc(n * (size_t)L + 1, sizeof *pk->limbs);
    pk->es = cic_calloc(n + 1, sizeof *pk->es);
    if (!pk->limbs || !pk->es) {
        cic_mp_pack_clear(pk);
        return -1;
    }
    for (i = 0; i < n; i++) {
        mpfr_srcptr a = x[i];
        if (!mpfr_regular_p(a)) {
            pk->es[i] = mpfr_signbit(a) ? PACK_NZERO : PACK_ZERO;
            continue;
        }
        memcpy(pk->limbs + i * (size_t)L, mpfr_custom_get_significand(a),
               (size_t)L * sizeof *pk->limbs);
        pk->es[i] = 2 * (int64_t)mpfr_custom_get_exp(a) + (mpfr_signbit(a) != 0);
    }
    return 0;
}

void cic_mp_pack_clear(cic_mp_pack *pk)
{
    free(pk->limbs);
    free(pk->es);
    memset(pk, 0, sizeof *pk);
}

void cic_mp_pack_view(cic_mp_pack *v, const cic_mp_pack *pk, size_t off, size_t n)
{
    size_t i;
    bool any = false;
    CIC_ASSERT(off + n <= pk->n);
    *v = *pk;
    v->n = n;
    v->span.usable = false;
    if (!pk->limbs)
        return;
    v->limbs = pk->limbs + off * (size_t)pk->L;
    v->es = pk->es + off;
    if (pk->L >= DOT_MAX_LIMBS)
        return;
    for (i = 0; i < n; i++) {
        mpfr_exp_t e;
        if (PACK_IS_ZERO(v->es[i]))
            continue;
        e = (mpfr_exp_t)(v->es[i] >> 1); /* arithmetic shift: floor(es / 2) */
        if (!any)
            v->span.emin = v->span.emax = e;
        if (e < v->span.emin)
            v->span.emin = e;
        if (e > v->span.emax)
            v->span.emax = e;
        any = true;
    }
    v->span.limbs = pk->L;
    v->span.usable = any;
}

/* Pass 2 on packed vectors: contiguous limbs and exponents, no pointer
 * chasing through mpfr_t. */
DOT_INLINE void packed_pass2(dot_acc *acc, int nr, const cic_mp_pack *const *x,
                             const cic_mp_pack *y, int la, int lb)
{
    mp_limb_t p[DOT_MAX_LIMBS];
    size_t i, n = y->n;
    int t;
    for (i = 0; i < n; i++) {
        int64_t eb = y->es[i];
        const mp_limb_t *bl = y->limbs + i * (size_t)lb;
        if (PACK_IS_ZERO(eb))
            continue;
        for (t = 0; t < nr; t++) {
            dot_acc *A = &acc[t];
            int64_t ea;
            unsigned long s; /* >= 0: ebase is the least weight */
            if (!A->on) /* (an unusable pack has no storage) */
                continue;
            ea = x[t]->es[i];
            if (PACK_IS_ZERO(ea))
                continue;
            limbs_mul(p, x[t]->limbs + i * (size_t)la, la, bl, lb);
            s = (unsigned long)((ea >> 1) + (eb >> 1) - A->ebase);
            acc_add((ea ^ eb) & 1 ? A->neg : A->pos, A->w, (int)(s / GMP_NUMB_BITS), p,
                    la + lb, (unsigned)(s % GMP_NUMB_BITS));
            A->nz++;
        }
    }
}

unsigned cic_mp_dot_rows_packed(mpfr_ptr *r, const cic_mp_pack *const *x, int nr,
                                const cic_mp_pack *y, mpfr_srcptr bias)
{
    dot_acc acc[CIC_DOT_ROWS];
    cic_mp_span sx[CIC_DOT_ROWS];
    int t, la, lb = y->span.limbs, kb = _cic_dot_bias_limbs(bias);
    CIC_ASSERT(nr >= 1 && nr <= CIC_DOT_ROWS);
    if (!y->span.usable || kb < 0)
        return 0;
    for (t = 0; t < nr; t++) {
        CIC_ASSERT(x[t]->n == y->n);
        sx[t] = x[t]->span;
    }
    la = _cic_dot_rows_setup(acc, nr, sx, &y->span, bias, kb);
    if (la == 0)
        return 0;
#define PASS2(A, B) packed_pass2(acc, nr, x, y, (A), (B))
    DOT_SWITCH(PASS2)
#undef PASS2
    return _cic_dot_rows_finish(r, acc, nr, bias, kb);
}

cic_mp_pack *cic_mp_pack_row_views(const cic_mp_pack *all, size_t n, size_t k)
{
    cic_mp_pack *v = cic_calloc(n ? n : 1, sizeof *v);
    size_t j;
    for (j = 0; v && j < n; j++)
        cic_mp_pack_view(&v[j], all, j * k, k);
    return v;
}

int cic_mp_pack_rows(cic_mp_pack *all, cic_mp_pack **views, const mpfr_t *w, size_t n, size_t k)
{
    *views = NULL;
    if (cic_mp_pack_init(all, w, n * k) < 0)
        return -1;
    if (!(*views = cic_mp_pack_row_views(all, n, k))) {
        cic_mp_pack_clear(all);
        return -1;
    }
    return 0;
}

int cic_mp_pack_alloc(cic_mp_pack *pk, size_t n, mpfr_prec_t prec)
{
    size_t i;
    memset(pk, 0, sizeof *pk);
    pk->n = n;
    pk->prec = prec;
    pk->L = (int)((prec + GMP_NUMB_BITS - 1) / GMP_NUMB_BITS);
    pk->limbs = cic_calloc(n * (size_t)pk->L + 1, sizeof *pk->limbs);
    pk->es = cic_calloc(n + 1, sizeof *pk->es);
    if (!pk->limbs || !pk->es) {
        cic_mp_pack_clear(pk);
        return -1;
    }
    for (i = 0; i < n; i++)
        pk->es[i] = PACK_ZERO;
    return 0;
}

void cic_mp_pack_set(cic_mp_pack *pk, size_t i, mpfr_srcptr v)
{
    CIC_ASSERT(i < pk->n && mpfr_number_p(v));
    if (!mpfr_regular_p(v)) {
        pk->es[i] = mpfr_signbit(v) ? PACK_NZERO : PACK_ZERO;
        return;
    }
    CIC_ASSERT(mpfr_get_prec(v) == pk->prec);
    memcpy(pk->limbs + i * (size_t)pk->L, mpfr_custom_get_significand(v),
           (size_t)pk->L * sizeof *pk->limbs);
    pk->es[i] = 2 * (int64_t)mpfr_custom_get_exp(v) + (mpfr_signbit(v) != 0);
}

/* MPFR's form of a float at 24 bits: |v| = 0.1b... x 2^e (frexp's e), the
 * 24 significand bits at the top of one limb. A normal float's fields give
 * both directly (biased exponent b: e = b - 126, the significand with its
 * hidden bit); a subnormal goes through frexpf. */
void cic_mp_pack_set_f32(cic_mp_pack *pk, size_t i, float v)
{
    int e;
    float fr;
    uint32_t bits, b;
    CIC_ASSERT(i < pk->n && pk->prec == 24 && pk->L == 1 && isfinite(v));
    memcpy(&bits, &v, sizeof bits);
    b = bits >> 23 & 0xff;
    if (b != 0) {
        pk->limbs[i] = (mp_limb_t)((bits & 0x7fffff) | 0x800000) << (GMP_NUMB_BITS - 24);
        pk->es[i] = 2 * ((int64_t)b - 126) + (bits >> 31);
        return;
    }
    if (v == 0.0f) {
        pk->es[i] = signbit(v) ? PACK_NZERO : PACK_ZERO;
        return;
    }
    fr = frexpf(fabsf(v), &e);
    pk->limbs[i] = (mp_limb_t)(uint32_t)ldexpf(fr, 24) << (GMP_NUMB_BITS - 24);
    pk->es[i] = 2 * (int64_t)e + (signbit(v) != 0);
}

void cic_mp_pack_finish(cic_mp_pack *pk)
{
    cic_mp_pack all;
    cic_mp_pack_view(&all, pk, 0, pk->n);
    pk->span = all.span;
}

void cic_mp_pack_get(mpfr_ptr y, const cic_mp_pack *pk, size_t i)
{
    int64_t es = pk->es[i];
    CIC_ASSERT(i < pk->n && mpfr_get_prec(y) == pk->prec);
    if (PACK_IS_ZERO(es)) {
        mpfr_set_zero(y, es == PACK_NZERO ? -1 : 1);
        return;
    }
    /* through a custom number at the pack's precision: exact */
    {
        mpfr_t t;
        mpfr_custom_init_set(t, MPFR_REGULAR_KIND * ((es & 1) ? -1 : 1), es >> 1, pk->prec,
                             pk->limbs + i * (size_t)pk->L);
        mpfr_set(y, t, MPFR_RNDN);
    }
}

int cic_mp_pack_rows_f32(cic_mp_pack *all, cic_mp_pack **views, const float *w, size_t n,
                         size_t k)
{
    size_t j, nk = n * k;
    for (j = 0; j < nk; j++)
        if (!isfinite(w[j]))
            return 1;
    *views = NULL;
    if (cic_mp_pack_alloc(all, nk, 24) < 0)
        return -1;
    for (j = 0; j < nk; j++)
        cic_mp_pack_set_f32(all, j, w[j]);
    cic_mp_pack_finish(all);
    if (!(*views = cic_mp_pack_row_views(all, n, k))) {
        cic_mp_pack_clear(all);
        return -1;
    }
    return 0;
}

bool cic_mp_fwht_row(mpfr_t *v, int w, int K, const signed char *hk, bool transpose,
                     mpfr_t *acc, mpfr_t t0)
{
    int P = w / K, a, c, e, j, k, len, inex = 0;
    /* len < P: the pairs (k, k + len) never straddle two blocks */
    for (len = 1; len < P; len <<= 1)
        for (j = 0; j < w; j += 2 * len)
            for (k = j; k < j + len; k++) {
                inex |= mpfr_sub(t0, v[k], v[k + len], MPFR_RNDN);
                inex |= mpfr_add(v[k], v[k], v[k + len], MPFR_RNDN);
                mpfr_set(v[k + len], t0, MPFR_RNDN); /* (vectors share a limb block: no swap) */
            }
    for (e = 0; K > 1 && e < P; e++) {
        for (c = 0; c < K; c++) {
            mpfr_set(acc[c], v[e], MPFR_RNDN);
            for (a = 1; a < K; a++) {
                int h = transpose ? hk[(size_t)c * K + a] : hk[(size_t)a * K + c];
                mpfr_srcptr x = v[(size_t)a * P + e];
                inex |= h > 0 ? mpfr_add(acc[c], acc[c], x, MPFR_RNDN)
                              : mpfr_sub(acc[c], acc[c], x, MPFR_RNDN);
            }
        }
        for (c = 0; c < K; c++)
            mpfr_set(v[(size_t)c * P + e], acc[c], MPFR_RNDN);
    }
    return inex == 0;
}

int cic_mp_dot_fixed(mpfr_ptr r, const mpfr_t *x, size_t incx, const mpfr_t *y, size_t incy,
                     size_t n, mpfr_srcptr bias)
{
    cic_mp_span sx, sy;
    cic_mp_span_init(&sx, x, incx, n);
    cic_mp_span_init(&sy, y, incy, n);
    return cic_mp_dot_rows(&r, &x, &sx, incx, 1, y, incy, &sy, n, bias) ? 0 : -1;
}

void cic_mp_dot(mpfr_ptr r, const mpfr_t *x, size_t incx, const mpfr_t *y,
                size_t incy, size_t n, mpfr_srcptr bias, cic_dot_scratch *s)
{
    CIC_ASSERT(n <= s->cap);
    if (cic_mp_dot_fixed(r, x, incx, y, incy, n, bias) == 0)
        return;
    cic_mp_dot_mpfr(r, x, incx, y, incy, n, bias, s);
}

void cic_mp_dot_mpfr(mpfr_ptr r, const mpfr_t *x, size_t incx, const mpfr_t *y,
                     size_t incy, size_t n, mpfr_srcptr bias, cic_dot_scratch *s)
{
    size_t i, k = 0;
    CIC_ASSERT(n <= s->cap);
    for (i = 0; i < n; i++) {
        /* exact: both factors have <= prec bits, the product slot 2*prec */
        mpfr_mul(s->prod[k], x[i * incx], y[i * incy], MPFR_RNDN);
        k++;
    }
    if (bias) {
        /* the bias joins the same exact sum: still a single rounding */
        s->ptr[k] = (mpfr_ptr)bias;
        mpfr_sum(r, s->ptr, k + 1, MPFR_RNDN);
        s->ptr[k] = k < s->cap ? s->prod[k] : NULL;
        return;
    }
    mpfr_sum(r, s->ptr, k, MPFR_RNDN);
}

/* One allocation per vector: the n mpfr_t headers, then every significand
 * (MPFR's custom interface), instead of a malloc per value. At real model
 * sizes (tens of millions of values per copy of the weights) the per-value
 * mallocs, frees and page faults cost more than the arithmetic. Values of
 * such a vector must never be mpfr_clear'ed or mpfr_set_prec'ed one by one;
 * cic_mpvec_destroy frees the block. */
mpfr_t *cic_mpvec_create(size_t n, mpfr_prec_t prec)
{
    size_t i, sz = mpfr_custom_get_size(prec), head = (n ? n : 1) * sizeof(mpfr_t);
    char *mem, *sig;
    mpfr_t *v;
    if (n > (SIZE_MAX - head) / (sz ? sz : 1))
        return NULL;
    mem = cic_calloc(1, head + n * sz);
    if (!mem)
        return NULL;
    v = (mpfr_t *)(void *)mem;
    sig = mem + head; /* sizeof(mpfr_t) keeps limbs aligned */
    for (i = 0; i < n; i++) {
        mpfr_custom_init(sig + i * sz, prec);
        mpfr_custom_init_set(v[i], MPFR_ZERO_KIND, 0, prec, sig + i * sz);
    }
    return v;
}

void cic_mpvec_destroy(mpfr_t *v, size_t n)
{
    (void)n; /* one block, whatever its length */
    free(v);
}

int cic_mpvec_center_rows(mpfr_t *x, size_t rows, size_t cols, mpfr_prec_t prec)
{
    mpfr_ptr *ptr = cic_calloc(cols ? cols : 1, sizeof *ptr);
    mpfr_t mean;
    size_t i, j;
    if (!ptr)
        return -1;
    mpfr_init2(mean, prec);
    for (i = 0; i < rows; i++) {
        for (j = 0; j < cols; j++)
            ptr[j] = x[i * cols + j];
        mpfr_sum(mean, ptr, (unsigned long)cols, MPFR_RNDN);
        mpfr_div_ui(mean, mean, (unsigned long)cols, MPFR_RNDN);
        for (j = 0; j < cols; j++)
            mpfr_sub(x[i * cols + j], x[i * cols + j], mean, MPFR_RNDN);
    }
    mpfr_clear(mean);
    free(ptr);
    return 0;
}

void cic_mpvec_set_f32(mpfr_t *v, const float *x, size_t n)
{
    size_t i;
    for (i = 0; i < n; i++)
        mpfr_set_flt(v[i], x[i], MPFR_RNDN);
}

float cic_mp_get_f32(mpfr_srcptr x)
{
    /* one rounding to binary32, subnormals and overflow included
     * (format.c), then an exact conversion */
    mpfr_t t;
    float f;
    mpfr_init2(t, 24);
    cic_format_round(t, x, cic_format_get(CIC_FORMAT_FLOAT32));
    f = mpfr_get_flt(t, MPFR_RNDN);
    mpfr_clear(t);
    return f;
}

double cic_mp_get_d_f32(mpfr_srcptr x)
{
    double v = mpfr_get_d(x, MPFR_RNDN);
    float f = cic_mp_get_f32(x);
    /* A binary32 midpoint has 25 significant bits, so it is a double: a
     * value on one side of it rounds to double at most onto it, never past
     * it; one step back toward f is then on f's side again. */
    if (!isnan(v) && (float)v != f)
        v = nextafter(v, (double)f);
    CIC_ASSERT(isnan(v) || (float)v == f);
    return v;
}

void cic_mpvec_get_f32(float *y, const mpfr_t *v, size_t n)
{
    size_t i;
    for (i = 0; i < n; i++)
        y[i] = cic_mp_get_f32(v[i]);
}
