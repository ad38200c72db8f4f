/* SPDX-License-Identifier: MIT */
/* rng.c: counter-based random numbers (rng.h). Every weight of a model
 * comes from cic_rng_fill_f32, so a 23M-weight model draws 23M values: the
 * fill computes each value in double with libm and proves, value by value,
 * that it rounds to the same binary32 as the MPFR definition (fill_mp);
 * the few values it cannot prove go through MPFR. */
#include "rng.h"

#include "mpvec.h"
#include "par.h"
#include "rt.h"

#include <fenv.h>
#include <float.h>
#include <math.h>
#include <stdbool.h>
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

/* The definition of the fill, value i: for dist 0 v is the pair's c (even
 * i) or s (odd i) at 96 bits, rounded to 64 bits; for dist 1, sqrt(3)
 * (2u - 1) at 64 bits (v unused). Times std at 64 bits (z has 64 bits),
 * rounded once to binary32. s3 is sqrt(3) at 64 bits. */
static float mp_value_f32(mpfr_ptr z, mpfr_srcptr v, mpfr_srcptr s3, uint64_t key,
                          uint64_t i, int dist, double std)
{
    if (dist == 0) {
        mpfr_set(z, v, MPFR_RNDN);
    } else {
        /* sqrt(3) * (2u - 1): uniform with unit std */
        mpfr_set_d(z, cic_rng_uniform(key, i), MPFR_RNDN);
        mpfr_mul_2ui(z, z, 1, MPFR_RNDN);
        mpfr_sub_ui(z, z, 1, MPFR_RNDN);
        mpfr_mul(z, z, s3, MPFR_RNDN);
    }
    mpfr_mul_d(z, z, std, MPFR_RNDN);
    return cic_mp_get_f32(z);
}

/* The fill in MPFR, value by value: cic_rng_fill_f32 must give these bits
 * exactly. */
static void fill_mp(float *x, uint64_t i0, uint64_t n, uint64_t key, int dist, double std)
{
    uint64_t i;
    mpfr_t z, c, s, s3;
    mpfr_init2(z, 64);
    mpfr_inits2(64 + 32, c, s, (mpfr_ptr)0);
    mpfr_init2(s3, 64);
    mpfr_sqrt_ui(s3, 3, MPFR_RNDN);
    for (i = i0; i < n; i++) {
        /* the same bits as cic_rng_normal_mp at 64 bits, one pair per two
         * values */
        if (dist == 0 && ((i & 1) == 0 || i == i0))
            normal_pair(c, s, key, i / 2, 64 + 32);
        x[i] = mp_value_f32(z, (i & 1) ? s : c, s3, key, i, dist, std);
    }
    mpfr_clears(z, c, s, s3, (mpfr_ptr)0);
}

void _cic_rng_fill_f32_mp(float *x, uint64_t n, uint64_t key, int dist, double std)
{
    fill_mp(x, 0, n, key, dist, std);
}

/* Fast path: proof of equality with fill_mp.
 *
 * Let v be the value fill_mp rounds to binary32 (its 64-bit z after the
 * multiplication by std) and y the double computed here. If |y - v| <= b
 * and y lies more than b away from both binary32 rounding boundaries around
 * it (the midpoints to its neighbours, where ties could go either way),
 * then v lies strictly between the same two midpoints, so RN32(v) = RN32(y).
 * 2^-100 <= |y| <= 2^100 keeps both far from the subnormal and overflow
 * ranges, where cic_mp_get_f32 rounds to fewer bits or to infinity.
 *
 * Error limits used (u = 2^-53, double round to nearest; no FMA contraction,
 * -ffp-contract=off): + - * / sqrt and the double -> float conversion are
 * correctly rounded (relative error <= u); glibc log, sin, cos, sincos: the
 * glibc manual lists <= 1 ulp on x86_64, assumed <= 2 ulp here, i.e.
 * relative error <= 2^-51 (|cos|, |sin| <= 1: absolute error <= 2^-51).
 * MPFR at p bits is correctly rounded: relative error <= 2^-p.
 *
 * dist 0, the cos value (sin the same, |sin'| <= 1). r = sqrt(-2 ln u1)
 * and R = r |std| in exact reals; a = 2 pi u2.
 *   MPFR: r96 = r (1 + 1.5 2^-96), t96 = a + 2^-92 (two roundings of
 *   2 pi u2 < 8), so c96 = cos a + 2^-91 absolute, c96 r96 = r cos a +
 *   r 2^-90; two 64-bit roundings (to z, then z std): |v - std r cos a| <=
 *   R (2^-90 + 2.01 2^-64) <= R 2^-62.9.
 *   double: log: relative 2^-51, halved by sqrt, plus sqrt's own 2^-53:
 *   rd = r (1 + e_r), |e_r| <= 1.51 2^-52. The angle td = RN(RN(2 pi) u2):
 *   |RN(2 pi) - 2 pi| <= 2^-51 (ulp 2^-50 in [4, 8)) times u2 < 1, and the
 *   product's rounding <= 2^-51, so |td - a| <= 2^-50; cos is 1-Lipschitz,
 *   so cd = cos_libm(td) = cos a + e_c, |e_c| <= 2^-50 + 2^-51 = 1.5 2^-50
 *   ABSOLUTE. Near the zeros of cos this is a large relative error, so the
 *   whole bound is kept absolute, in units of R. rd cd = r cos a +
 *   r (e_r cos a + e_c + e_r e_c), within r 1.9 2^-50; the two products
 *   rd cd and (rd cd) std add relative 2^-52 of |y| <= 1.0001 R.
 *   |y - std r cos a| <= R 2.2 2^-50, so |y - v| <= R 2.2 2^-50 < R 2^-48.8.
 *   Used: b = rd |std| 2^-44 >= R 2^-44.01: a factor 28 over the bound.
 * dist 1. w = 2u - 1 is exact in double (Sterbenz for u >= 1/2; below, u =
 *   (k + 1/2) 2^-53 exactly, so 1 - 2u is an integer times 2^-53 under
 *   2^53) and is the real MPFR starts from. MPFR: v = RN64(RN64(w RN64(sqrt 3)) std),
 *   within relative 3.01 2^-64 of w sqrt(3) std. double: y = RN(RN(w s3) std)
 *   with s3 = RN(sqrt 3): within relative 3.01 2^-53. |y - v| <=
 *   |y| 3.03 2^-53 < |y| 2^-51.4. Used: b = |y| 2^-46, a factor 42.
 *
 * Anything else (std zero, tiny, huge or not finite; a rounding mode other
 * than to nearest; excess precision) goes to fill_mp. */
#define FAST_B_NORMAL 0x1p-44
#define FAST_B_UNIFORM 0x1p-46

/* RN32(y) in *f when every real within b of y rounds to it, else 0. */
static int f32_proved(float *f, double y, double b)
{
    double a = fabs(y), lo, hi;
    float g, gl, gh;
    uint32_t u;
    if (!(a >= 0x1p-100 && a <= 0x1p100)) /* also NaN */
        return 0;
    g = (float)a;
    /* g is a normal binary32 with normal neighbours: step the bits */
    memcpy(&u, &g, sizeof u);
    u--;
    memcpy(&gl, &u, sizeof u);
    u += 2;
    memcpy(&gh, &u, sizeof u);
    /* midpoints, exact in double (25 bits); a - lo, hi - a exact (Sterbenz) */
    lo = 0.5 * ((double)g + (double)gl);
    hi = 0.5 * ((double)g + (double)gh);
    if (!(a - lo > b && hi - a > b))
        return 0;
    *f = y < 0 ? -g : g; /* RN is symmetric */
    return 1;
}

/* Values [i0, n) of the fill into x[i0 ..] (i0 even); how many took the
 * MPFR fallback. */
static uint64_t fill_range(float *x, uint64_t i0, uint64_t n, uint64_t key, int dist, double std)
{
    const double two_pi = 2 * 3.14159265358979323846; /* RN(pi) doubled: RN(2 pi) */
    double as = fabs(std), s3 = sqrt(3.0);
    uint64_t i, slow = 0;
    mpfr_t z, c, s, s3m;
    if (FLT_EVAL_METHOD != 0 || !(as >= 0x1p-300 && as <= 0x1p300) ||
        fegetround() != FE_TONEAREST) {
        fill_mp(x, i0, n, key, dist, std);
        return n - i0;
    }
    mpfr_init2(z, 64);
    mpfr_inits2(64 + 32, c, s, (mpfr_ptr)0);
    mpfr_init2(s3m, 64);
    mpfr_sqrt_ui(s3m, 3, MPFR_RNDN);
    if (dist == 0) {
        for (i = i0; i < n; i += 2) {
            double r = sqrt(-2.0 * log(cic_rng_uniform(key, i)));
            double t = two_pi * cic_rng_uniform(key, i + 1), sn, cs;
            double b = r * as * FAST_B_NORMAL;
            int ok[2] = {0, 1};
            uint64_t j;
            sincos(t, &sn, &cs);
            ok[0] = f32_proved(&x[i], r * cs * std, b);
            if (i + 1 < n)
                ok[1] = f32_proved(&x[i + 1], r * sn * std, b);
            if (ok[0] && ok[1])
                continue;
            /* the MPFR pair, once, for the unproved value(s) */
            normal_pair(c, s, key, i / 2, 64 + 32);
            for (j = 0; j < 2 && i + j < n; j++)
                if (!ok[j]) {
                    x[i + j] = mp_value_f32(z, j ? s : c, s3m, key, i + j, dist, std);
                    slow++;
                }
        }
    } else {
        for (i = i0; i < n; i++) {
            double w = 2.0 * cic_rng_uniform(key, i) - 1.0;
            double y = w * s3 * std;
            if (f32_proved(&x[i], y, fabs(y) * FAST_B_UNIFORM))
                continue;
            x[i] = mp_value_f32(z, c, s3m, key, i, dist, std); /* c unused */
            slow++;
        }
    }
    mpfr_clears(z, c, s, s3m, (mpfr_ptr)0);
    return slow;
}

uint64_t _cic_rng_fill_f32_count(float *x, uint64_t n, uint64_t key, int dist, double std)
{
    return fill_range(x, 0, n, key, dist, std);
}

/* A fill cut into slices (base/par.h): slice t of nt holds the values
 * [i0, i1), i0 = floor(n t / nt) rounded down to even, the last ending at
 * n. */
typedef struct {
    float *x;
    uint64_t n, key;
    int dist;
    double std;
} fill_job;

static void fill_share(void *a, int t, int nt)
{
    const fill_job *f = a;
    uint64_t i0 = (f->n * (uint64_t)t / (uint64_t)nt) & ~(uint64_t)1;
    uint64_t i1 = t + 1 == nt ? f->n : (f->n * (uint64_t)(t + 1) / (uint64_t)nt) & ~(uint64_t)1;
    (void)fill_range(f->x, i0, i1, f->key, f->dist, f->std);
}

#define FILL_MAX_THREADS 16
#define FILL_MIN_SLICE ((uint64_t)1 << 16) /* values a thread is worth (ms of work) */

/* Each value depends on (key, i) alone, so slices of the fill (cut at even
 * i: a normal pair stays whole) go to up to threads threads (<= 0: one per
 * online core) and give the same bits as one thread. */
void cic_rng_fill_f32(float *x, uint64_t n, uint64_t key, int dist, double std, int threads)
{
    fill_job f = {x, n, key, dist, std};
    int T = threads > 0 ? threads : cic_rt_matmul_threads(NULL);
    if (T > FILL_MAX_THREADS)
        T = FILL_MAX_THREADS;
    if ((uint64_t)T > n / FILL_MIN_SLICE)
        T = (int)(n / FILL_MIN_SLICE);
    if (T < 2) {
        (void)fill_range(x, 0, n, key, dist, std);
        return;
    }
    cic_par_run(T, fill_share, &f);
}
