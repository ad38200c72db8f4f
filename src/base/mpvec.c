/* mpvec.c: MPFR vectors and the correctly rounded dot product (mpvec.h). */
#include "mpvec.h"

#include "base.h"

#include <math.h>
#include <string.h>

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

void cic_mp_dot(mpfr_ptr r, const mpfr_t *x, size_t incx, const mpfr_t *y,
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

mpfr_t *cic_mpvec_create(size_t n, mpfr_prec_t prec)
{
    size_t i;
    mpfr_t *v = cic_calloc(n ? n : 1, sizeof *v);
    if (!v)
        return NULL;
    for (i = 0; i < n; i++) {
        mpfr_init2(v[i], prec);
        mpfr_set_zero(v[i], 1);
    }
    return v;
}

void cic_mpvec_destroy(mpfr_t *v, size_t n)
{
    size_t i;
    if (!v)
        return;
    for (i = 0; i < n; i++)
        mpfr_clear(v[i]);
    free(v);
}

void cic_mpvec_set_f32(mpfr_t *v, const float *x, size_t n)
{
    size_t i;
    for (i = 0; i < n; i++)
        mpfr_set_flt(v[i], x[i], MPFR_RNDN);
}

float cic_mp_get_f32(mpfr_srcptr x)
{
    /* Round to 24 bits with binary32's exponent range (MPFR's emin -148,
     * emax 128) so that subnormals get their reduced precision in a single
     * rounding, as IEEE does. MPFR wants inputs inside the current exponent
     * range, so values outside it are settled first: exponent > 128 is an
     * overflow, and |x| < 2^-149 (exponent <= -149) rounds to 0 or to the
     * smallest subnormal. */
    mpfr_t t;
    mpfr_exp_t e, emin = mpfr_get_emin(), emax = mpfr_get_emax();
    mpfr_flags_t flags = mpfr_flags_save();
    float f;
    int inex;
    if (!mpfr_number_p(x) || mpfr_zero_p(x))
        return mpfr_get_flt(x, MPFR_RNDN);
    e = mpfr_get_exp(x);
    if (e > 128)
        return mpfr_signbit(x) ? -INFINITY : INFINITY;
    if (e <= -149) {
        /* |x| < 2^-149: above the midpoint 2^-150 it rounds up to 2^-149;
         * at the midpoint or below, to zero (0 is the even neighbour) */
        float tiny = 0x1p-149f;
        int up = e == -149 && mpfr_cmp_si_2exp(x, mpfr_signbit(x) ? -1 : 1, -150) != 0;
        f = up ? tiny : 0.0f;
        return mpfr_signbit(x) ? -f : f;
    }
    mpfr_init2(t, 24);
    mpfr_set_emin(-148);
    mpfr_set_emax(128);
    inex = mpfr_set(t, x, MPFR_RNDN);
    inex = mpfr_check_range(t, inex, MPFR_RNDN);
    mpfr_subnormalize(t, inex, MPFR_RNDN);
    mpfr_set_emin(emin);
    mpfr_set_emax(emax);
    f = mpfr_get_flt(t, MPFR_RNDN);
    mpfr_clear(t);
    mpfr_flags_restore(flags, MPFR_FLAGS_ALL);
    return f;
}

void cic_mpvec_get_f32(float *y, const mpfr_t *v, size_t n)
{
    size_t i;
    for (i = 0; i < n; i++)
        y[i] = cic_mp_get_f32(v[i]);
}
