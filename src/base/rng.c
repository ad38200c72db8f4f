/* rng.c: counter-based random numbers (rng.h). */
#include "rng.h"

#include "mpvec.h"

#include <string.h>

static uint64_t mix64(uint64_t z)
{
    z += 0x9e3779b97f4a7c15ULL;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

uint64_t cic_rng_key(uint64_t seed, const char *name)
{
    /* FNV-1a over the name, then mixed with the seed */
    uint64_t h = 0xcbf29ce484222325ULL;
    for (; *name; name++) {
        h ^= (unsigned char)*name;
        h *= 0x100000001b3ULL;
    }
    return mix64(h ^ mix64(seed));
}

uint64_t cic_rng_u64(uint64_t key, uint64_t i)
{
    return mix64(key ^ mix64(i + 0x632be59bd9b4e019ULL));
}

double cic_rng_uniform(uint64_t key, uint64_t i)
{
    /* (k + 0.5) / 2^53 for k in [0, 2^53): exact in double, inside (0,1) */
    uint64_t k = cic_rng_u64(key, i) >> 11;
    return ((double)k + 0.5) * 0x1p-53;
}

/* Both normals of pair `pair` at p bits: c = r cos(t), s = r sin(t). */
static void normal_pair(mpfr_ptr c, mpfr_ptr s, uint64_t key, uint64_t pair, mpfr_prec_t p)
{
    mpfr_t r, t;
    mpfr_inits2(p, r, t, (mpfr_ptr)0);
    /* r = sqrt(-2 ln u1) */
    mpfr_set_d(r, cic_rng_uniform(key, 2 * pair), MPFR_RNDN);
    mpfr_log(r, r, MPFR_RNDN);
    mpfr_mul_si(r, r, -2, MPFR_RNDN);
    mpfr_sqrt(r, r, MPFR_RNDN);
    /* angle 2 pi u2 */
    mpfr_const_pi(t, MPFR_RNDN);
    mpfr_mul_2ui(t, t, 1, MPFR_RNDN);
    mpfr_mul_d(t, t, cic_rng_uniform(key, 2 * pair + 1), MPFR_RNDN);
    mpfr_sin_cos(s, c, t, MPFR_RNDN);
    mpfr_mul(c, c, r, MPFR_RNDN);
    mpfr_mul(s, s, r, MPFR_RNDN);
    mpfr_clears(r, t, (mpfr_ptr)0);
}

void cic_rng_normal_mp(mpfr_ptr z, uint64_t key, uint64_t i)
{
    mpfr_t c, s;
    mpfr_prec_t p = mpfr_get_prec(z) + 32;
    mpfr_inits2(p, c, s, (mpfr_ptr)0);
    normal_pair(c, s, key, i / 2, p);
    mpfr_set(z, (i & 1) ? s : c, MPFR_RNDN);
    mpfr_clears(c, s, (mpfr_ptr)0);
}

float cic_rng_normal_f32(uint64_t key, uint64_t i)
{
    mpfr_t z;
    float f;
    mpfr_init2(z, 40);
    cic_rng_normal_mp(z, key, i);
    f = cic_mp_get_f32(z);
    mpfr_clear(z);
    return f;
}

void cic_rng_fill_f32(float *x, uint64_t n, uint64_t key, int dist, double std)
{
    uint64_t i;
    mpfr_t z, c, s, s3;
    mpfr_init2(z, 64);
    mpfr_inits2(64 + 32, c, s, (mpfr_ptr)0);
    mpfr_init2(s3, 64);
    mpfr_sqrt_ui(s3, 3, MPFR_RNDN);
    for (i = 0; i < n; i++) {
        if (dist == 0) {
            /* the same bits as cic_rng_normal_mp at 64 bits, one pair per
             * two values */
            if ((i & 1) == 0 || i == 0)
                normal_pair(c, s, key, i / 2, 64 + 32);
            mpfr_set(z, (i & 1) ? s : c, MPFR_RNDN);
        } else {
            /* sqrt(3) * (2u - 1): uniform with unit std */
            mpfr_set_d(z, cic_rng_uniform(key, i), MPFR_RNDN);
            mpfr_mul_2ui(z, z, 1, MPFR_RNDN);
            mpfr_sub_ui(z, z, 1, MPFR_RNDN);
            mpfr_mul(z, z, s3, MPFR_RNDN);
        }
        mpfr_mul_d(z, z, std, MPFR_RNDN);
        x[i] = cic_mp_get_f32(z);
    }
    mpfr_clears(z, c, s, s3, (mpfr_ptr)0);
}
