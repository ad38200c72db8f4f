/* SPDX-License-Identifier: MIT */
/* test_lazy.c: weights made when read (model/lazy.h) against the eager
 * products the transforms compute (the fold's RN(w g), then W Q or Q^T W
 * with the dense Q of cic_q_hadamard_k through cic_mp_matmul), bit for bit
 * and sign of zero included, into MPFR values, into a pack and into
 * float32; over Sylvester, Paley and mixed bases, precisions below and
 * above the fold's 48 bits, rows whose sums are zero and rows whose span
 * makes the fast transform inexact (the fallback, counted). And packs of
 * float32 values against packs of the same values as MPFR numbers, with a
 * linear layer that reads its declined rows back from the pack. */
#include "testutil.h"

#include "base/mpgemm.h"
#include "base/mpvec.h"
#include "base/rng.h"
#include "model/lazy.h"
#include "xform/qmat.h"

#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

static void check_same(mpfr_srcptr got, mpfr_srcptr want, const char *what, int i)
{
    if (mpfr_equal_p(got, want) && mpfr_signbit(got) == mpfr_signbit(want))
        return;
    if (mpfr_zero_p(got) && mpfr_zero_p(want) && mpfr_signbit(got) == mpfr_signbit(want))
        return;
    mpfr_fprintf(stderr, "%s, entry %d: got %Ra, want %Ra\n", what, i, got, want);
    fail_msg("made value differs from the eager product (%s)", what);
}

/* rows x cols float32 values: row 0 all one value (every sum but one is
 * zero), row 1 spanning 2^100 .. 2^-149 (inexact at any working precision
 * the recipe uses: the fallback), row 2 zeros of both signs, the rest
 * random normals of std 0.05 with a few tiny ones. */
static float *planted(int rows, int cols, uint64_t key)
{
    float *w = calloc((size_t)rows * cols, sizeof *w);
    int i, j;
    assert_non_null(w);
    for (i = 0; i < rows; i++)
        for (j = 0; j < cols; j++) {
            size_t k = (size_t)i * cols + j;
            float r = (float)(0.05 * cic_rng_normal_f32(key, k));
            if (i == 0)
                w[k] = 0.375f;
            else if (i == 1)
                w[k] = j == 0 ? 0x1p100f : j == 1 ? 0x1p-149f : r;
            else if (i == 2)
                w[k] = (j & 1) ? -0.0f : 0.0f;
            else
                w[k] = j % 7 == 3 ? r * 1e-20f : r;
        }
    return w;
}

/* The eager values: RN_p(w g) (or w), then W Q (right) or Q^T W (left). */
static mpfr_t *eager(const float *w, const float *g, int rows, int cols, bool right, int d, int K,
                     uint64_t seed, mpfr_prec_t p)
{
    size_t n = (size_t)rows * cols, k;
    mpfr_t *v = cic_mpvec_create(n, p), *q = cic_mpvec_create((size_t)d * d, p);
    mpfr_t *out = cic_mpvec_create(n, p), a, b;
    cic_dot_scratch s;
    assert_true(v && q && out);
    assert_int_equal(cic_dot_scratch_init(&s, (size_t)d, p), 0);
    mpfr_inits2(24, a, b, (mpfr_ptr)0);
    for (k = 0; k < n; k++) {
        mpfr_set_flt(a, w[k], MPFR_RNDN);
        if (g) {
            mpfr_set_flt(b, g[k % (size_t)cols], MPFR_RNDN);
            mpfr_mul(v[k], a, b, MPFR_RNDN);
        } else {
            mpfr_set(v[k], a, MPFR_RNDN);
        }
    }
    assert_int_equal(cic_q_hadamard_k(q, d, K, seed, p), 0);
    if (right)
        cic_mp_matmul(out, (const mpfr_t *)v, false, (const mpfr_t *)q, false, rows, d, d, false,
                      0, &s);
    else
        cic_mp_matmul(out, (const mpfr_t *)q, true, (const mpfr_t *)v, false, d, cols, d, false,
                      0, &s);
    mpfr_clears(a, b, (mpfr_ptr)0);
    cic_dot_scratch_clear(&s);
    cic_mpvec_destroy(v, n);
    cic_mpvec_destroy(q, (size_t)d * d);
    return out;
}

/* The recipes made under a context of their own with threads threads,
 * whose fallback counter sees only their lines. */
static void one_shape(int d, int K, bool right, bool gain, mpfr_prec_t p, int threads)
{
    int rows = right ? 6 : d, cols = right ? d : 6, i;
    size_t n = (size_t)rows * cols;
    uint64_t seed = 7;
    float *w = planted(right ? rows : cols, right ? cols : rows, 41), *g = NULL, *f = NULL;
    signed char *hk = NULL, *sign = calloc((size_t)d, 1);
    mpfr_t *want, *got = cic_mpvec_create(n, p), y;
    cic_lazy *base, *z;
    cic_mp_pack pk;
    cic_rt rt;
    char what[96];
    assert_true(got && sign);
    cic_rt_init(&rt, 0);
    rt.matmul_threads = threads;
    if (!right) { /* the same planted lines as columns */
        float *t = calloc(n, sizeof *t);
        assert_non_null(t);
        for (i = 0; i < (int)n; i++)
            t[(size_t)(i % d) * cols + (size_t)(i / d)] = w[i];
        free(w);
        w = t;
    }
    if (gain) {
        g = calloc((size_t)cols, sizeof *g);
        assert_non_null(g);
        for (i = 0; i < cols; i++)
            g[i] = (float)(1.0 + 0.3 * cic_rng_normal_f32(43, (uint64_t)i));
    }
    want = eager(w, g, rows, cols, right, d, K, seed, p);
    assert_int_equal(cic_hadamard_base_k(&hk, K, d), 0);
    cic_q_hadamard_signs(sign, d, seed);
    {
        float *src = malloc(n * sizeof *src);
        assert_non_null(src);
        memcpy(src, w, n * sizeof *src);
        base = cic_lazy_values(src, rows, cols, g, gain ? p : 24, &rt);
        assert_non_null(base);
    }
    z = cic_lazy_rotate(base, right ? CIC_LAZY_RIGHT : CIC_LAZY_LEFT, d,
                        cic_hadamard_base_order_k(d, K), hk, sign, p);
    assert_non_null(z);
    cic_lazy_unref(base); /* z holds it */
    snprintf(what, sizeof what, "d %d K %d %s gain %d prec %d", d, K, right ? "W Q" : "Q^T W",
             gain, (int)p);

    assert_int_equal(cic_lazy_make(z, got), 0);
    for (i = 0; i < (int)n; i++)
        check_same(got[i], want[i], what, i);
    /* the planted line spanning 2^249 took the dot products */
    assert_true(cic_lazy_fallback_lines(&rt) > 0);

    assert_int_equal(cic_lazy_make_pack(z, &pk), 0);
    mpfr_init2(y, p);
    for (i = 0; i < (int)n; i++) {
        cic_mp_pack_get(y, &pk, (size_t)i);
        check_same(y, want[i], what, i);
    }
    mpfr_clear(y);
    cic_mp_pack_clear(&pk);

    f = malloc(n * sizeof *f);
    assert_non_null(f);
    assert_int_equal(cic_lazy_make_f32(z, f), 0);
    for (i = 0; i < (int)n; i++)
        assert_memory_equal(&f[i], &(float){ cic_mp_get_f32(want[i]) }, sizeof(float));

    cic_lazy_unref(z);
    cic_mpvec_destroy(want, n);
    cic_mpvec_destroy(got, n);
    free(w);
    free(g);
    free(f);
    free(hk);
    free(sign);
}

static void test_rotations_match_eager(void **state)
{
    static const struct {
        int d, K;
    } shapes[] = { { 16, 1 }, { 64, 1 }, { 20, 20 }, { 40, 20 }, { 24, 12 }, { 256, 32 } };
    static const mpfr_prec_t precs[] = { 40, 64, 128 };
    size_t a, b;
    (void)state;
    for (a = 0; a < sizeof shapes / sizeof shapes[0]; a++)
        for (b = 0; b < sizeof precs / sizeof precs[0]; b++) {
            one_shape(shapes[a].d, shapes[a].K, true, true, precs[b], 1 + (int)(a % 3));
            one_shape(shapes[a].d, shapes[a].K, false, b != 1, precs[b], 1 + (int)(a % 3));
        }
}

/* A VALUES recipe alone (the fold) is RN(w g) at its precision. */
static void test_fold_values(void **state)
{
    enum { R = 3, C = 5 };
    float *src = malloc(R * C * sizeof *src), g[C];
    mpfr_t *got = cic_mpvec_create(R * C, 30), a, b, want;
    cic_lazy *z;
    int i;
    (void)state;
    assert_true(src && got);
    for (i = 0; i < R * C; i++)
        src[i] = (float)cic_rng_normal_f32(5, (uint64_t)i);
    for (i = 0; i < C; i++)
        g[i] = (float)cic_rng_normal_f32(6, (uint64_t)i);
    mpfr_inits2(24, a, b, (mpfr_ptr)0);
    mpfr_init2(want, 30);
    z = cic_lazy_values(src, R, C, g, 30, NULL);
    assert_non_null(z);
    assert_int_equal(cic_lazy_make(z, got), 0);
    for (i = 0; i < R * C; i++) {
        mpfr_set_flt(a, src[i], MPFR_RNDN);
        mpfr_set_flt(b, g[i % C], MPFR_RNDN);
        mpfr_mul(want, a, b, MPFR_RNDN); /* 48 exact bits rounded to 30 */
        check_same(got[i], want, "fold", i);
    }
    cic_lazy_unref(z);
    mpfr_clears(a, b, want, (mpfr_ptr)0);
    cic_mpvec_destroy(got, R * C);
}

/* A fold's values as float32 and as doubles (cic_lazy_make_f32 / _f64):
 * the MPFR values rounded once, at 30 bits (through MPFR) and at 48, 53
 * and 128 (exact products, made in double), with and without a gain, over
 * signed zeros, subnormal and huge entries whose products leave float's
 * range (to zero, a subnormal, infinity). */
static void test_fold_f32_f64(void **state)
{
    enum { R = 4, C = 6 };
    static const mpfr_prec_t precs[] = {30, 48, 53, 128};
    static const float odd[] = {0.0f, -0.0f, 0x1p-140f, -0x1p-130f, 0x1.8p120f, -0x1.fffffep127f};
    float *src = malloc(R * C * sizeof *src), g[C], f[R * C];
    double dv[R * C];
    size_t k, i;
    int withg;
    (void)state;
    assert_non_null(src);
    for (k = 0; k < sizeof precs / sizeof precs[0]; k++)
        for (withg = 0; withg < 2; withg++) {
            mpfr_t *got = cic_mpvec_create(R * C, precs[k]);
            cic_lazy *z;
            float *own = malloc(R * C * sizeof *own);
            assert_true(got && own);
            for (i = 0; i < R * C; i++)
                own[i] = i < C ? odd[i] : cic_rng_normal_f32(7, (uint64_t)i);
            for (i = 0; i < C; i++)
                g[i] = i % 2 ? 0x1p-20f * (float)(i + 1) : 0x1.3p30f / (float)(i + 1);
            memcpy(src, own, R * C * sizeof *src);
            z = cic_lazy_values(own, R, C, withg ? g : NULL, precs[k], NULL);
            assert_non_null(z);
            assert_int_equal(cic_lazy_make(z, got), 0);
            assert_int_equal(cic_lazy_make_f32(z, f), 0);
            assert_int_equal(cic_lazy_make_f64(z, dv), 0);
            for (i = 0; i < R * C; i++) {
                float wf = cic_mp_get_f32(got[i]);
                double wd = mpfr_get_d(got[i], MPFR_RNDN);
                if (memcmp(&wf, &f[i], sizeof wf) || memcmp(&wd, &dv[i], sizeof wd))
                    fail_msg("prec %d gain %d entry %zu (%a x %a): f32 %a want %a, f64 %a want %a",
                             (int)precs[k], withg, i, (double)src[i], withg ? (double)g[i % C] : 1.0,
                             (double)f[i], (double)wf, dv[i], wd);
            }
            cic_lazy_unref(z);
            cic_mpvec_destroy(got, R * C);
        }
    free(src);
}

/* A pack of float32 values is the pack of the same values as 24-bit MPFR
 * numbers, limbs and exponents, signed zeros and subnormals included. */
static void test_pack_f32(void **state)
{
    /* 64 drawn and planted values, then every biased exponent 0 .. 254
     * with both signs and 8 significands each (the packing reads a normal
     * float's fields, a subnormal through frexpf) */
    enum { N = 64 + 255 * 16 };
    static float w[N];
    mpfr_t *v = cic_mpvec_create(N, 24), y;
    cic_mp_pack a, b;
    int i;
    (void)state;
    assert_non_null(v);
    for (i = 0; i < N; i++)
        w[i] = (float)cic_rng_normal_f32(9, (uint64_t)i) * (i % 5 == 0 ? 1e-40f : 1.0f);
    w[3] = -0.0f;
    w[4] = 0.0f;
    w[5] = 0x1p-149f;
    w[6] = -0x1.fffffep127f;
    for (i = 64; i < N; i++) {
        uint32_t bits = (uint32_t)(i & 1) << 31 | (uint32_t)((i - 64) / 16) << 23 |
                        (uint32_t)(cic_rng_u64(10, (uint64_t)i) & 0x7fffff);
        memcpy(&w[i], &bits, sizeof bits);
    }
    cic_mpvec_set_f32(v, w, N);
    assert_int_equal(cic_mp_pack_init(&a, (const mpfr_t *)v, N), 0);
    assert_int_equal(cic_mp_pack_alloc(&b, N, 24), 0);
    for (i = 0; i < N; i++)
        cic_mp_pack_set_f32(&b, (size_t)i, w[i]);
    cic_mp_pack_finish(&b);
    assert_int_equal(a.L, b.L);
    assert_true(a.span.usable && b.span.usable);
    assert_int_equal(a.span.emin, b.span.emin);
    assert_int_equal(a.span.emax, b.span.emax);
    mpfr_init2(y, 24);
    for (i = 0; i < N; i++) {
        assert_true(a.es[i] == b.es[i]);
        if (!mpfr_zero_p(v[i]))
            assert_true(a.limbs[i] == b.limbs[i]);
        cic_mp_pack_get(y, &b, (size_t)i);
        check_same(y, v[i], "pack_get", i);
    }
    mpfr_clear(y);
    cic_mp_pack_clear(&a);
    cic_mp_pack_clear(&b);
    cic_mpvec_destroy(v, N);
}

/* A linear layer over float32 weights packed without MPFR copies (w NULL)
 * gives the bits of the one with the copies, declined rows included (an
 * all-zero input row, a weight row of zeros, an exponent span the fast
 * path refuses). */
static void test_linear_from_pack(void **state)
{
    enum { M = 5, N = 7, K = 9 };
    float w[N * K];
    mpfr_t *x = cic_mpvec_create(M * K, 64), *wm = cic_mpvec_create(N * K, 24);
    mpfr_t *y1 = cic_mpvec_create(M * N, 64), *y2 = cic_mpvec_create(M * N, 64);
    mpfr_t *wrow = cic_mpvec_create(K, 24);
    cic_mp_pack all, *views, all2, *views2;
    cic_dot_scratch s;
    int i;
    (void)state;
    assert_true(x && wm && y1 && y2 && wrow);
    assert_int_equal(cic_dot_scratch_init(&s, K, 64), 0);
    for (i = 0; i < N * K; i++)
        w[i] = i / K == 2 ? 0.0f : (float)cic_rng_normal_f32(11, (uint64_t)i);
    w[K * 4] = 0x1p120f; /* row 4 spans 2^120 .. 2^-149 */
    w[K * 4 + 1] = 0x1p-149f;
    for (i = 0; i < M * K; i++) {
        if (i / K == 1)
            mpfr_set_zero(x[i], 1);
        else
            mpfr_set_d(x[i], cic_rng_normal_f32(12, (uint64_t)i), MPFR_RNDN);
    }
    mpfr_set_ui_2exp(x[3 * K], 1, 3000, MPFR_RNDN); /* row 3: a span over 3968 bits */
    mpfr_set_ui_2exp(x[3 * K + 1], 1, -1000, MPFR_RNDN);
    cic_mpvec_set_f32(wm, w, N * K);
    assert_int_equal(cic_mp_pack_rows(&all, &views, (const mpfr_t *)wm, N, K), 0);
    assert_int_equal(cic_mp_pack_rows_f32(&all2, &views2, w, N, K), 0);
    cic_mp_linear_rows(y1, (const mpfr_t *)x, M, (const mpfr_t *)wm, views, NULL, N, K, NULL, &s);
    cic_mp_linear_rows(y2, (const mpfr_t *)x, M, NULL, views2, NULL, N, K, wrow, &s);
    for (i = 0; i < M * N; i++)
        check_same(y2[i], y1[i], "linear from the pack", i);
    {
        cic_mp_pack none;
        cic_mp_pack *nv = NULL;
        w[0] = NAN; /* not packed: the caller takes the MPFR values' path */
        assert_int_equal(cic_mp_pack_rows_f32(&none, &nv, w, N, K), 1);
        assert_null(nv);
    }
    free(views);
    free(views2);
    cic_mp_pack_clear(&all);
    cic_mp_pack_clear(&all2);
    cic_dot_scratch_clear(&s);
    cic_mpvec_destroy(x, M * K);
    cic_mpvec_destroy(wm, N * K);
    cic_mpvec_destroy(y1, M * N);
    cic_mpvec_destroy(y2, M * N);
    cic_mpvec_destroy(wrow, K);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fold_values),
        cmocka_unit_test(test_fold_f32_f64),
        cmocka_unit_test(test_pack_f32),
        cmocka_unit_test(test_linear_from_pack),
        cmocka_unit_test(test_rotations_match_eager),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
