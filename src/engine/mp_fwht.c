/* SPDX-License-Identifier: MIT */
/* mp_fwht.c: the fast Hadamard of one row in MPFR (mp_fwht.h). */
#include "mp_fwht.h"

#include "../xform/qmat.h"

/* t[j] := +-v[sigma(j)] (the sign D_r of sigma(j) when after, of j when
 * not), then back into v: exact (sets and negations). */
static void permute_signed(mpfr_t *v, mpfr_t *t, int w, bool sign_of_source)
{
    int j;
    for (j = 0; j < w; j++) {
        int s = cic_regular_sigma(j);
        mpfr_set(t[j], v[s], MPFR_RNDN);
        if (cic_regular_dr(sign_of_source ? s : j) < 0)
            mpfr_neg(t[j], t[j], MPFR_RNDN);
    }
    for (j = 0; j < w; j++)
        mpfr_set(v[j], t[j], MPFR_RNDN);
}

static void flip_dc(mpfr_t *v, int w, int k)
{
    int j;
    for (j = 0; j < w; j++)
        if (cic_regular_dc(j, k) < 0)
            mpfr_neg(v[j], v[j], MPFR_RNDN);
}

void cic_mp_fwht_regular_row(mpfr_t *v, int w, int k, bool transpose, mpfr_t *t, mpfr_t t0)
{
    if (!transpose)
        permute_signed(v, t, w, false);
    else
        flip_dc(v, w, k);
    cic_mp_fwht_row(v, w, 1, NULL, false, NULL, t0); /* the Sylvester part */
    if (!transpose)
        flip_dc(v, w, k);
    else
        permute_signed(v, t, w, true);
}
