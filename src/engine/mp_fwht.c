/* SPDX-License-Identifier: MIT */
/* mp_fwht.c: the fast Hadamard of one row in MPFR (mp_fwht.h). */
#include "mp_fwht.h"

#include "../xform/qmat.h"

static void butterflies(mpfr_t *v, int w, int P, mpfr_t t0)
{
    int j, k, len;
    /* len < P: the pairs (k, k + len) never straddle two blocks */
    for (len = 1; len < P; len <<= 1)
        for (j = 0; j < w; j += 2 * len)
            for (k = j; k < j + len; k++) {
                mpfr_sub(t0, v[k], v[k + len], MPFR_RNDN);
                mpfr_add(v[k], v[k], v[k + len], MPFR_RNDN);
                mpfr_set(v[k + len], t0, MPFR_RNDN);
            }
}

void cic_mp_fwht_row(mpfr_t *v, int w, int K, const signed char *hk, bool transpose,
                     mpfr_t *acc, mpfr_t t0)
{
    int P = w / K, a, c, e;
    butterflies(v, w, P, t0);
    for (e = 0; K > 1 && e < P; e++) {
        for (c = 0; c < K; c++) {
            mpfr_set(acc[c], v[e], MPFR_RNDN);
            for (a = 1; a < K; a++) {
                int h = transpose ? hk[(size_t)c * K + a] : hk[(size_t)a * K + c];
                if (h > 0)
                    mpfr_add(acc[c], acc[c], v[(size_t)a * P + e], MPFR_RNDN);
                else
                    mpfr_sub(acc[c], acc[c], v[(size_t)a * P + e], MPFR_RNDN);
            }
        }
        for (c = 0; c < K; c++)
            mpfr_set(v[(size_t)c * P + e], acc[c], MPFR_RNDN);
    }
}

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
    butterflies(v, w, w, t0);
    if (!transpose)
        flip_dc(v, w, k);
    else
        permute_signed(v, t, w, true);
}
