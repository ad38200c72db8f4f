/* SPDX-License-Identifier: MIT */
/* test_ball_norm.c: the norm-wise bound of the ball runs (engine/mp_ball.h,
 * docs/design.md "The norm-wise bound"), against brute force.
 *   - The Lipschitz constant of every activation: |f'| <= CIC_ACT_LIP
 *     (1.15) over [-64, 64], proven by Arb on 2^15 subintervals (the tails
 *     are design.md's), and |f(x)| <= |x| there.
 *   - The table of |f'| bounds behind the activations' rule by the mean
 *     value theorem (mp_ball_enc.c): on random intervals of [-16, 16),
 *     from a bin's width down to 2^-60, never below |f'| at random points
 *     of the interval and its ends (the formulas above at 200 bits); none
 *     outside the table or wider than its span. The rule itself meets
 *     brute force below, in every block with an activation.
 *   - Perturbations inside the input ball: blocks of every kind whose input
 *     is a ball (each value within in_rad, each row within in_nrm in the
 *     2-norm), and thousands of points drawn inside it, each run at 300
 *     bits: every output stays within its value's radius and every output
 *     row within its norm-wise bound; the count of trials is printed.
 *   - Near-worst points (the Jacobian by finite differences, then a
 *     projected power iteration per output row) through one block of
 *     every kind, through attention alone (grouped heads, causal rows,
 *     diffuse and peaked) and through a DiT branch's modulate, linear and
 *     gate alone: none leaves its bounds, and how close each comes is
 *     printed.
 *   - The bound binds: on a deeper model the radii with it are smaller than
 *     the elementwise radii alone, and never larger.
 *   - Planted pathologies (a row whose sigma is near 0 under LayerNorm, a
 *     saturating softmax, a weight of huge spectral norm): whatever the run
 *     proves is the 300-bit run's binary32, value by value. */
#include "testutil.h"

#include "base/base.h"
#include "base/mpvec.h"
#include "base/rng.h"
#include "base/rt.h"
#include "engine/engine.h"
#include "engine/mp_act.h"
#include "engine/mp_ball.h"
#include "model/model.h"
#include "model/op.h"

#include <arb.h>
#include <arb_hypgeom.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LIP 1.15 /* CIC_ACT_LIP (src/engine/mp_ball_int.h) */

/* ---- the activations' derivatives, in Arb ---- */

/* f'(x) of each activation over the ball x (t, s scratch). */
static void act_deriv(arb_t y, const arb_t x, enum cic_act a, slong prec)
{
    arb_t t, s, k;
    arb_init(t);
    arb_init(s);
    arb_init(k);
    switch (a) {
    case CIC_ACT_GELU: /* Phi(x) + x phi(x) */
        arb_rsqrt_ui(k, 2, prec);
        arb_mul(t, x, k, prec);
        arb_hypgeom_erf(t, t, prec);
        arb_add_ui(t, t, 1, prec);
        arb_mul_2exp_si(t, t, -1);
        arb_mul(s, x, x, prec);
        arb_mul_2exp_si(s, s, -1);
        arb_neg(s, s);
        arb_exp(s, s, prec);
        arb_const_pi(k, prec);
        arb_mul_2exp_si(k, k, 1);
        arb_rsqrt(k, k, prec);
        arb_mul(s, s, k, prec);
        arb_mul(s, s, x, prec);
        arb_add(y, t, s, prec);
        break;
    case CIC_ACT_GELU_TANH: { /* (1 + T)/2 + x (1 - T^2) k (1 + 3 a x^2) / 2 */
        arb_t a3, T;
        arb_init(a3);
        arb_init(T);
        arb_set_str(a3, "0.044715", prec);
        arb_const_pi(k, prec);
        arb_ui_div(k, 2, k, prec);
        arb_sqrt(k, k, prec);
        arb_mul(t, x, x, prec);
        arb_mul(s, t, x, prec);
        arb_mul(s, s, a3, prec);
        arb_add(s, s, x, prec);
        arb_mul(s, s, k, prec);
        arb_tanh(T, s, prec);
        arb_mul(s, T, T, prec);
        arb_sub_ui(s, s, 1, prec);
        arb_neg(s, s); /* 1 - T^2 */
        arb_mul_ui(t, t, 3, prec);
        arb_mul(t, t, a3, prec);
        arb_add_ui(t, t, 1, prec);
        arb_mul(s, s, t, prec);
        arb_mul(s, s, k, prec);
        arb_mul(s, s, x, prec);
        arb_add_ui(T, T, 1, prec);
        arb_add(y, T, s, prec);
        arb_mul_2exp_si(y, y, -1);
        arb_clear(a3);
        arb_clear(T);
        break;
    }
    case CIC_ACT_SILU:
    case CIC_ACT_QUICK_GELU: { /* sigma(b x) (1 + b x (1 - sigma(b x))) */
        arb_set_str(k, a == CIC_ACT_SILU ? "1" : "1.702", prec);
        arb_mul(t, k, x, prec);
        arb_neg(s, t);
        arb_exp(s, s, prec);
        arb_add_ui(s, s, 1, prec);
        arb_inv(s, s, prec); /* sigma */
        arb_sub_ui(k, s, 1, prec);
        arb_neg(k, k);
        arb_mul(k, k, t, prec);
        arb_add_ui(k, k, 1, prec);
        arb_mul(y, s, k, prec);
        break;
    }
    default: /* ReLU: 0 or 1 */
        arb_set_ui(y, 1);
        break;
    }
    arb_clear(t);
    arb_clear(s);
    arb_clear(k);
}

static void test_act_lipschitz(void **state)
{
    int a, i, n = 1 << 15;
    slong prec = 80;
    arb_t x, y;
    arf_t ub;
    (void)state;
    arb_init(x);
    arb_init(y);
    arf_init(ub);
    for (a = 0; a < CIC_ACT_COUNT; a++) {
        double worst = 0;
        for (i = 0; i < n; i++) {
            /* [-64 + 128 i / n, -64 + 128 (i + 1) / n] */
            double lo = -64.0 + 128.0 * i / n, hi = -64.0 + 128.0 * (i + 1) / n, w;
            arb_set_d(x, (lo + hi) / 2);
            mag_set_d(arb_radref(x), (hi - lo) / 2);
            act_deriv(y, x, (enum cic_act)a, prec);
            arb_get_abs_ubound_arf(ub, y, prec);
            w = arf_get_d(ub, ARF_RND_UP);
            if (!(w <= LIP))
                fail_msg("%s: |f'| up to %.6f on [%g, %g]", CIC_ACT_NAME[a], w, lo, hi);
            worst = w > worst ? w : worst;
        }
        printf("# %s: sup |f'| over [-64, 64] <= %.6f (Arb, %d subintervals)\n",
               CIC_ACT_NAME[a], worst, n);
    }
    arb_clear(x);
    arb_clear(y);
    arf_clear(ub);
}

/* f'(x) for a point, by the same formula, against a central difference of
 * the engine's own activation at 200 bits: the derivative the proof uses
 * is the derivative of the function the engine computes. */
static void test_act_deriv_table(void **state)
{
    int a, i, j, checks = 0, n = 4000 * cic_test_multiplier();
    arb_t x, y;
    arf_t lb;
    uint64_t ctr = 0;
    (void)state;
    arb_init(x);
    arb_init(y);
    arf_init(lb);
    assert_null(_cic_ball_deriv_table(CIC_ACT_RELU));
    for (a = 0; a < CIC_ACT_COUNT; a++) {
        const double *tab = _cic_ball_deriv_table((enum cic_act)a);
        double worst = INFINITY;
        if (a == CIC_ACT_RELU)
            continue;
        assert_non_null(tab);
        assert_ptr_equal(tab, _cic_ball_deriv_table((enum cic_act)a)); /* made once */
        /* none where the table ends or the interval is too wide */
        assert_true(_cic_ball_deriv_up(tab, -16.5, -15.9) < 0);
        assert_true(_cic_ball_deriv_up(tab, 15.9, 16) < 0);
        assert_true(_cic_ball_deriv_up(tab, 0, 0.25) < 0);
        assert_true(_cic_ball_deriv_up(tab, NAN, 0) < 0);
        assert_true(_cic_ball_deriv_up(tab, 1, 0.5) < 0);
        for (i = 0; i < n; i++) {
            /* widths 2^-6 .. 2^-60; every tenth interval ends on a bin edge */
            double w = ldexp(1, -6 - (int)(cic_rng_u64(77, ctr++) % 55));
            double lo = -16 + 32 * cic_rng_uniform(77, ctr++), hi, L;
            if (i % 10 == 0)
                lo = ldexp(floor(ldexp(lo, 6)), -6) - (i % 20 ? 0 : w);
            hi = lo + w;
            if (!(lo >= -16 && hi < 16))
                continue;
            L = _cic_ball_deriv_up(tab, lo, hi);
            if (L < 0)
                fail_msg("%s: no bound on [%.17g, %.17g]", CIC_ACT_NAME[a], lo, hi);
            for (j = 0; j < 6; j++) {
                double p = j == 0 ? lo : j == 1 ? hi : lo + (hi - lo) * cic_rng_uniform(77, ctr++), v;
                arb_set_d(x, p < lo ? lo : p > hi ? hi : p);
                act_deriv(y, x, (enum cic_act)a, 200);
                arb_get_abs_lbound_arf(lb, y, 200);
                v = arf_get_d(lb, ARF_RND_DOWN);
                if (!(L >= v))
                    fail_msg("%s: |f'(%.17g)| >= %.17g above the bound %.17g of [%.17g, %.17g]",
                             CIC_ACT_NAME[a], p, v, L, lo, hi);
                worst = fmin(worst, L - v);
                checks++;
            }
        }
        print_message("%s: |f'| bounds held at every point; closest margin %.3g\n",
                      CIC_ACT_NAME[a], worst);
    }
    print_message("derivative table: %d points checked\n", checks);
    assert_true(checks > 4 * 6 * n * 9 / 10); /* nearly every interval drawn lies inside */
    arb_clear(x);
    arb_clear(y);
    arf_clear(lb);
}

/* The a priori bound of the kernel's own roundings (mp_ball_own.c) by
 * brute force: for GELU, its tanh form and SiLU at 53 to 256 bits, m drawn
 * over [2^-60, 16) in magnitude (uniform, log-uniform, near +-16 and near
 * the integers) with both signs, the engine's y = cic_mp_act(m) at prec
 * against the same formula at 420 bits, whose own distance to f(m) is
 * below 2^-400 (1 + |m|) (a handful of roundings at 2^-420 times factors
 * below 2^8 on |m| < 16): that distance plus the margin must be within the
 * bound at every point. The largest ratio is printed and must exceed 1/2
 * for each activation, so a bound half as large would fail here. Planted:
 * no bound at |m| >= 16, below 53 bits, for other activations, or for a y
 * of another precision; 0 exactly at m = 0. */
static void test_act_own(void **state)
{
    static const enum cic_act acts[] = {CIC_ACT_GELU, CIC_ACT_GELU_TANH, CIC_ACT_SILU};
    static const mpfr_prec_t precs[] = {53, 64, 113, 128, 200, 256};
    int n = 1500 * cic_test_multiplier(), checks = 0, ai, pi, i;
    uint64_t ctr = 0;
    cic_mp_fn_ws fw;
    mpfr_t m, y, t, ref, tr, d;
    (void)state;
    cic_mp_fn_ws_init(&fw);
    mpfr_inits2(420, m, ref, tr, d, (mpfr_ptr)0);
    mpfr_init2(y, 53);
    mpfr_init2(t, 53);
    for (ai = 0; ai < 3; ai++) {
        enum cic_act a = acts[ai];
        cic_mp_act_consts kr;
        double worst = 0;
        cic_mp_act_consts_init(&kr, a, 420);
        for (pi = 0; pi < 6; pi++) {
            mpfr_prec_t p = precs[pi];
            cic_mp_act_consts k;
            cic_mp_act_consts_init(&k, a, p);
            mpfr_set_prec(y, p);
            mpfr_set_prec(t, p);
            for (i = 0; i < n; i++) {
                double mag, e, r0 = cic_rng_uniform(91, ctr), r1;
                uint64_t b0 = cic_rng_u64(91, ctr + 1);
                int kind = i % 4;
                ctr += 2;
                r1 = (double)(b0 >> 11) * 0x1p-53;
                if (kind == 0)
                    mag = 16 * r0;
                else if (kind == 1)
                    mag = ldexp(1 + r0, -(int)(b0 % 61));
                else if (kind == 2)
                    mag = 16 - ldexp(r0, -(int)(b0 % 40));
                else
                    mag = (double)(1 + b0 % 15) + ldexp(r1 - 0.5, -20);
                if (!(mag >= 0x1p-60 && mag < 16))
                    continue;
                /* m at prec bits, the engine's input precision */
                mpfr_set_prec(m, p);
                mpfr_set_d(m, (cic_rng_u64(91, ctr++) & 1) ? -mag : mag, MPFR_RNDN);
                if (p > 53) { /* more bits than a double holds */
                    mpfr_set_prec(d, p);
                    mpfr_set_d(d, cic_rng_uniform(91, ctr++), MPFR_RNDN);
                    mpfr_mul_2si(d, d, (long)mpfr_get_exp(m) - 60, MPFR_RNDN);
                    mpfr_add(m, m, d, MPFR_RNDN);
                    mpfr_set_prec(d, 420);
                }
                if (mpfr_cmpabs_ui(m, 16) >= 0)
                    continue;
                cic_mp_act(a, y, m, t, &k, &fw);
                e = _cic_ball_act_own(a, m, y, p);
                if (!(e >= 0))
                    fail_msg("%s at %ld bits: no bound at m = %.17g", CIC_ACT_NAME[a], (long)p,
                             mpfr_get_d(m, MPFR_RNDN));
                mpfr_set_prec(tr, 420);
                cic_mp_act(a, ref, m, tr, &kr, &fw);
                mpfr_sub(d, y, ref, MPFR_RNDA);
                mpfr_abs(d, d, MPFR_RNDA);
                /* plus the reference's own distance to f(m) */
                mpfr_set_d(tr, ldexp(1 + fabs(mpfr_get_d(m, MPFR_RNDA)), -400), MPFR_RNDU);
                mpfr_add(d, d, tr, MPFR_RNDU);
                if (mpfr_cmp_d(d, e) > 0)
                    fail_msg("%s at %ld bits, m = %.17g: |y - f(m)| up to %.6g above the bound "
                             "%.6g",
                             CIC_ACT_NAME[a], (long)p, mpfr_get_d(m, MPFR_RNDN),
                             mpfr_get_d(d, MPFR_RNDU), e);
                if (e > 0)
                    worst = fmax(worst, mpfr_get_d(d, MPFR_RNDU) / e);
                checks++;
            }
            cic_mp_act_consts_clear(&k);
        }
        cic_mp_act_consts_clear(&kr);
        print_message("%s: own roundings within the a priori bound at every point; largest "
                      "error / bound %.3f\n",
                      CIC_ACT_NAME[a], worst);
        assert_true(worst > 0.5);
    }
    print_message("a priori bounds: %d points checked\n", checks);
    assert_true(checks > 3 * 6 * n * 9 / 10);
    /* planted */
    mpfr_set_prec(m, 128);
    mpfr_set_prec(y, 128);
    mpfr_set_ui(m, 16, MPFR_RNDN);
    assert_false(_cic_ball_act_own_takes(CIC_ACT_GELU, m, 128));
    mpfr_set_d(m, 1.5, MPFR_RNDN);
    assert_true(_cic_ball_act_own_takes(CIC_ACT_GELU, m, 128));
    assert_false(_cic_ball_act_own_takes(CIC_ACT_GELU, m, 52));
    assert_false(_cic_ball_act_own_takes(CIC_ACT_QUICK_GELU, m, 128));
    assert_false(_cic_ball_act_own_takes(CIC_ACT_RELU, m, 128));
    assert_true(_cic_ball_act_own(CIC_ACT_GELU, m, y, 256) < 0); /* y not at prec */
    mpfr_set_zero(m, 1);
    mpfr_set_zero(y, 1);
    assert_true(_cic_ball_act_own(CIC_ACT_GELU_TANH, m, y, 128) == 0);
    mpfr_clears(m, y, t, ref, tr, d, (mpfr_ptr)0);
    cic_mp_fn_ws_clear(&fw);
}

static void test_act_deriv_formula(void **state)
{
    int a, i;
    slong prec = 200;
    arb_t x, y;
    mpfr_t f1, f2, xx, t;
    cic_mp_act_consts k;
    cic_mp_fn_ws fn;
    (void)state;
    arb_init(x);
    arb_init(y);
    mpfr_inits2(200, f1, f2, xx, t, (mpfr_ptr)0);
    cic_mp_fn_ws_init(&fn);
    for (a = 0; a < CIC_ACT_COUNT; a++) {
        if (a == CIC_ACT_RELU)
            continue;
        cic_mp_act_consts_init(&k, (enum cic_act)a, 200);
        for (i = 0; i < 41; i++) {
            double x0 = -10.0 + 0.5 * i + 0.01, h = 1e-20, fd, dv;
            mpfr_set_d(xx, x0, MPFR_RNDN);
            mpfr_add_d(xx, xx, h, MPFR_RNDN);
            cic_mp_act((enum cic_act)a, f1, xx, t, &k, &fn);
            mpfr_set_d(xx, x0, MPFR_RNDN);
            mpfr_sub_d(xx, xx, h, MPFR_RNDN);
            cic_mp_act((enum cic_act)a, f2, xx, t, &k, &fn);
            mpfr_sub(f1, f1, f2, MPFR_RNDN);
            fd = mpfr_get_d(f1, MPFR_RNDN) / (2 * h);
            arb_set_d(x, x0);
            act_deriv(y, x, (enum cic_act)a, prec);
            dv = arf_get_d(arb_midref(y), ARF_RND_NEAR);
            if (fabs(fd - dv) > 1e-12)
                fail_msg("%s at %g: derivative %.15g, difference quotient %.15g",
                         CIC_ACT_NAME[a], x0, dv, fd);
        }
        cic_mp_act_consts_clear(&k);
    }
    cic_mp_fn_ws_clear(&fn);
    mpfr_clears(f1, f2, xx, t, (mpfr_ptr)0);
    arb_clear(x);
    arb_clear(y);
}

/* ---- perturbations inside the input ball ---- */

static cic_model_cfg cfg_of(enum cic_block_kind block, int layers, int d, uint64_t seed)
{
    cic_model_cfg c;
    memset(&c, 0, sizeof c);
    c.block = block;
    c.d_model = d;
    c.heads = 2;
    c.mlp_ratio = 4;
    c.d_mlp = 4 * d;
    c.tokens = 5;
    c.samples = 2;
    c.layers = layers;
    c.eps = 1e-5;
    c.act = CIC_ACT_GELU;
    c.d_out = 7;
    c.seed = seed;
    c.dist = CIC_DIST_NORMAL;
    c.std = 0.2;
    if (block == CIC_BLOCK_DIT) {
        c.d_cond = 6;
        c.final_layer = false;
        c.eps = 1e-6;
    }
    if (block == CIC_BLOCK_RMSNORM) {
        c.rope = CIC_ROPE_HALF;
        c.rope_theta = 10000;
        c.kv_heads = 1;
        c.causal = true;
        c.act = CIC_ACT_SILU;
    }
    if (block == CIC_BLOCK_PARALLEL)
        c.act = CIC_ACT_GELU_TANH;
    return c;
}

typedef struct {
    mpfr_t *mid;
    double *rad, *nrm;
    size_t n, rows, cols;
} ball_res;

static double g_layer_rel[16]; /* the last ball_run's per-block relative radii */

static void ball_run(const cic_model *m, mpfr_prec_t prec, double in_rad, double in_nrm,
                     bool elementwise, ball_res *r)
{
    cic_run_opts o;
    cic_ball_out bo;
    r->cols = (size_t)cic_model_out_cols(m);
    r->rows = (size_t)m->cfg.tokens * (size_t)m->cfg.samples;
    r->n = r->rows * r->cols;
    r->mid = cic_mpvec_create(r->n, prec);
    r->rad = malloc(r->n * sizeof *r->rad);
    r->nrm = malloc(r->rows * sizeof *r->nrm);
    assert_true(r->mid && r->rad && r->nrm);
    memset(&o, 0, sizeof o);
    memset(&bo, 0, sizeof bo);
    bo.rad = r->rad;
    bo.nrm = r->nrm;
    bo.elementwise = elementwise;
    bo.in_rad = in_rad;
    bo.in_nrm = in_nrm;
    bo.layer_rel = g_layer_rel;
    bo.n_layers = m->cfg.layers < 16 ? m->cfg.layers : 16;
    o.ball = &bo;
    assert_int_equal(cic_engine_mpfr_run(r->mid, m, prec, false, &o), 0);
    if (bo.failed)
        fail_msg("ball failed: %s", bo.why);
}

static void ball_res_clear(ball_res *r)
{
    cic_mpvec_destroy(r->mid, r->n);
    free(r->rad);
    free(r->nrm);
}

/* A point of the input ball of m: each value within rad of the float32
 * midpoint, each row within nrm in the 2-norm; kind 0: uniform in the box,
 * then cut to the norm; 1: a corner of the box cut to the norm; 2: all of
 * the norm on one value. Written into x (hp at 300 bits). */
static void draw_point(mpfr_t *x, const float *mid, int rows, int d, double rad, double nrm,
                       int kind, uint64_t *s)
{
    double *v = malloc((size_t)d * sizeof *v);
    int i, j;
    assert_non_null(v);
    for (i = 0; i < rows; i++) {
        double n2 = 0, f;
        for (j = 0; j < d; j++) {
            double u = (double)(cic_test_rand(s) >> 11) * 0x1p-53 * 2 - 1;
            v[j] = kind == 0 ? u * rad : kind == 1 ? (u < 0 ? -rad : rad) : 0;
            n2 += v[j] * v[j];
        }
        if (kind == 2)
            v[cic_test_pick(s, d)] = (cic_test_rand(s) & 1 ? 1 : -1) * (rad < nrm ? rad : nrm);
        f = sqrt(n2) > nrm ? nrm / sqrt(n2) * (1 - 0x1p-40) : 1;
        for (j = 0; j < d; j++) {
            mpfr_set_flt(x[(size_t)i * d + j], mid[(size_t)i * d + j], MPFR_RNDN);
            mpfr_add_d(x[(size_t)i * d + j], x[(size_t)i * d + j], v[j] * f, MPFR_RNDN);
        }
    }
    free(v);
}

/* Trials points of the input ball through m at 300 bits, against the ball
 * r of m's run: every value inside its radius, every row inside its
 * norm-wise bound. Returns the largest ratio of an error to its bound. */
static double trials_inside(const cic_model *m, const ball_res *r, double rad, double nrm,
                            int trials, uint64_t seed, const char *what)
{
    cic_model *p = cic_model_clone(m);
    mpfr_t *ex = cic_mpvec_create(r->n, 300), d, acc;
    int id, t, rows;
    size_t i, j;
    double worst = 0, wrow = 0;
    uint64_t s = seed;
    assert_true(p && ex);
    id = p->input;
    rows = p->t[id].rows;
    assert_int_equal(cic_model_tensor_hp(p, id, 300), 0);
    mpfr_inits2(600, d, acc, (mpfr_ptr)0);
    for (t = 0; t < trials; t++) {
        draw_point(p->t[id].hp, m->t[id].f32, rows, p->t[id].cols, rad, nrm, t % 3, &s);
        assert_int_equal(cic_engine_mpfr_run(ex, p, 300, false, NULL), 0);
        for (i = 0; i < r->rows; i++) {
            mpfr_set_zero(acc, 1);
            for (j = 0; j < r->cols; j++) {
                size_t k = i * r->cols + j;
                double e;
                mpfr_sub(d, ex[k], r->mid[k], MPFR_RNDN);
                e = fabs(mpfr_get_d(d, MPFR_RNDU));
                if (!(e <= r->rad[k]))
                    fail_msg("%s: trial %d, value %zu: error %.4g above its radius %.4g", what,
                             t, k, e, r->rad[k]);
                worst = e / r->rad[k] > worst ? e / r->rad[k] : worst;
                mpfr_sqr(d, d, MPFR_RNDN);
                mpfr_add(acc, acc, d, MPFR_RNDN);
            }
            mpfr_sqrt(acc, acc, MPFR_RNDU);
            if (mpfr_get_d(acc, MPFR_RNDU) / r->nrm[i] > wrow)
                wrow = mpfr_get_d(acc, MPFR_RNDU) / r->nrm[i];
            if (!(mpfr_cmp_d(acc, r->nrm[i]) <= 0))
                fail_msg("%s: trial %d, row %zu: 2-norm error %.4g above its bound %.4g", what,
                         t, i, mpfr_get_d(acc, MPFR_RNDU), r->nrm[i]);
        }
    }
    mpfr_clears(d, acc, (mpfr_ptr)0);
    cic_mpvec_destroy(ex, r->n);
    cic_model_destroy(p);
    printf("# %s: largest 2-norm error of a row / its norm-wise bound %.3g\n", what, wrow);
    return worst;
}

static void test_perturb(void **state)
{
    static const enum cic_block_kind blocks[] = {CIC_BLOCK_PRELN, CIC_BLOCK_RMSNORM,
                                                 CIC_BLOCK_DIT, CIC_BLOCK_PARALLEL};
    int b, total = 0, per = 50 * cic_test_multiplier();
    (void)state;
    for (b = 0; b < 4; b++) {
        cic_model_cfg c = cfg_of(blocks[b], 2, 16, 101 + (uint64_t)b);
        cic_model *m = cic_model_create(&c, CIC_READOUT_RESIDUAL);
        double rad = 0x1p-30, nrm = rad * 4 / 3, worst;
        ball_res r;
        char what[96];
        int e;
        assert_non_null(m);
        for (e = 0; e < 2; e++) {
            snprintf(what, sizeof what, "%s (%s)", CIC_BLOCK_NAME[c.block],
                     e ? "elementwise" : "norm-wise");
            ball_run(m, 64, rad, e ? INFINITY : nrm, e == 1, &r);
            worst = trials_inside(m, &r, rad, nrm, per, 7 + (uint64_t)(b * 2 + e), what);
            total += per;
            printf("# %s: %d points inside the input ball, largest error / radius %.3g\n", what,
                   per, worst);
            ball_res_clear(&r);
        }
        cic_model_destroy(m);
    }
    printf("# %d points in all, each a 300-bit run, none outside its bounds\n", total);
}

/* The input's values of m at 300 bits plus delta (NULL: none), then the
 * run: out (n values at 300 bits). */
static void run_at(cic_model *p, const float *mid, const double *delta, size_t nin, mpfr_t *out)
{
    size_t k;
    for (k = 0; k < nin; k++) {
        mpfr_set_flt(p->t[p->input].hp[k], mid[k], MPFR_RNDN);
        if (delta)
            mpfr_add_d(p->t[p->input].hp[k], p->t[p->input].hp[k], delta[k], MPFR_RNDN);
    }
    assert_int_equal(cic_engine_mpfr_run(out, p, 300, false, NULL), 0);
}

/* J (n x nin) of m's output at its input, by finite differences of step
 * h at 300 bits (p: m's clone with 300-bit inputs; f0, f1: scratch). */
static void jacobian(cic_model *p, const float *mid, size_t nin, size_t n, double *J,
                     mpfr_t *f0, mpfr_t *f1, double *dl)
{
    double h = 0x1p-40;
    size_t k, q, j;
    mpfr_t dd;
    mpfr_init2(dd, 600);
    run_at(p, mid, NULL, nin, f0);
    for (k = 0; k < nin; k++) {
        for (q = 0; q < nin; q++)
            dl[q] = q == k ? h : 0;
        run_at(p, mid, dl, nin, f1);
        for (j = 0; j < n; j++) {
            mpfr_sub(dd, f1[j], f0[j], MPFR_RNDN);
            J[j * nin + k] = mpfr_get_d(dd, MPFR_RNDN) / h;
        }
    }
    mpfr_clear(dd);
}

/* A point of the ball that pushes output row i (cols values, rows Ji of J)
 * about as far as any: a projected power iteration on Ji^T Ji, each input
 * row (d values) scaled to the ball's 2-norm nrm and each value cut to
 * rad. Into dl (g: scratch). */
static void worst_point(const double *Ji, size_t cols, size_t nin, int d, double rad, double nrm,
                        double *dl, double *g, uint64_t *s)
{
    size_t q, j, k;
    int it;
    for (q = 0; q < nin; q++)
        dl[q] = (double)(cic_test_rand(s) >> 11) * 0x1p-53 - 0.5;
    for (it = 0; it < 40; it++) {
        for (q = 0; q < nin; q++)
            g[q] = 0;
        for (j = 0; j < cols; j++) {
            double t = 0;
            for (q = 0; q < nin; q++)
                t += Ji[j * nin + q] * dl[q];
            for (q = 0; q < nin; q++)
                g[q] += Ji[j * nin + q] * t;
        }
        for (k = 0; k < nin / (size_t)d; k++) {
            double nn = 0;
            for (q = 0; q < (size_t)d; q++)
                nn += g[k * d + q] * g[k * d + q];
            nn = sqrt(nn);
            for (q = 0; q < (size_t)d; q++) {
                double v = nn > 0 ? g[k * d + q] / nn * nrm * (1 - 0x1p-20) : 0;
                dl[k * d + q] = fabs(v) > rad ? copysign(rad * (1 - 0x1p-20), v) : v;
            }
        }
    }
}

/* Near-worst points of the input ball, one per output row i (jacobian,
 * worst_point). Every output of each point's 300-bit run must lie inside
 * its radius and every row inside its bound; returns the largest ratio of
 * row i's error to its bound. */
static double adversarial(const cic_model *m, const ball_res *r, double rad, double nrm,
                          const char *what)
{
    cic_model *p = cic_model_clone(m);
    int id = p->input, d;
    size_t nin, n = r->n, i, j, q;
    mpfr_t *f0 = cic_mpvec_create(n, 300), *f1 = cic_mpvec_create(n, 300), dd, acc;
    double *J, *dl, *g, worst = 0;
    uint64_t s = 4242;
    assert_true(p && f0 && f1);
    d = p->t[id].cols;
    nin = (size_t)p->t[id].rows * d;
    J = malloc(n * nin * sizeof *J);
    dl = malloc(nin * sizeof *dl);
    g = malloc(nin * sizeof *g);
    assert_true(J && dl && g);
    assert_int_equal(cic_model_tensor_hp(p, id, 300), 0);
    mpfr_inits2(600, dd, acc, (mpfr_ptr)0);
    jacobian(p, m->t[id].f32, nin, n, J, f0, f1, dl);
    for (i = 0; i < r->rows; i++) {
        worst_point(J + i * r->cols * nin, r->cols, nin, d, rad, nrm, dl, g, &s);
        run_at(p, m->t[id].f32, dl, nin, f1);
        for (q = 0; q < r->rows; q++) {
            double e2;
            mpfr_set_zero(acc, 1);
            for (j = 0; j < r->cols; j++) {
                size_t t = q * r->cols + j;
                mpfr_sub(dd, f1[t], r->mid[t], MPFR_RNDN);
                if (!(fabs(mpfr_get_d(dd, MPFR_RNDU)) <= r->rad[t]))
                    fail_msg("%s: point for row %zu, value %zu: error %.4g above its radius %.4g",
                             what, i, t, fabs(mpfr_get_d(dd, MPFR_RNDU)), r->rad[t]);
                mpfr_sqr(dd, dd, MPFR_RNDN);
                mpfr_add(acc, acc, dd, MPFR_RNDN);
            }
            mpfr_sqrt(acc, acc, MPFR_RNDU);
            e2 = mpfr_get_d(acc, MPFR_RNDU);
            if (!(e2 <= r->nrm[q]))
                fail_msg("%s: point for row %zu, row %zu: 2-norm error %.4g above its bound %.4g",
                         what, i, q, e2, r->nrm[q]);
            if (q == i && e2 / r->nrm[q] > worst)
                worst = e2 / r->nrm[q];
        }
    }
    mpfr_clears(dd, acc, (mpfr_ptr)0);
    cic_mpvec_destroy(f0, n);
    cic_mpvec_destroy(f1, n);
    free(J);
    free(dl);
    free(g);
    cic_model_destroy(p);
    return worst;
}

/* Near-worst points (adversarial) for one block of every kind, with
 * diffuse (std 0.2) and peaked (std 1.5) attention: none leaves its
 * bounds, and the largest ratio of a row's error to its bound is printed
 * (how much the bound leaves on the table). */
static void test_adversarial(void **state)
{
    static const enum cic_block_kind blocks[] = {CIC_BLOCK_PRELN, CIC_BLOCK_RMSNORM,
                                                 CIC_BLOCK_DIT, CIC_BLOCK_PARALLEL};
    static const double stds[] = {0.2, 1.5, 0.2};
    int b, t, points = 0, w;
    size_t i;
    (void)state;
    for (b = 0; b < 4; b++)
        for (t = 0; t < (blocks[b] == CIC_BLOCK_DIT ? 3 : 2); t++) {
            cic_model_cfg c = cfg_of(blocks[b], 1, 8, 201 + (uint64_t)(b * 2 + t));
            cic_model *m;
            double rad = 0x1p-30, nrm = rad * 2, worst;
            ball_res r;
            char what[96];
            c.tokens = 3;
            c.std = stds[t];
            m = cic_model_create(&c, CIC_READOUT_RESIDUAL);
            assert_non_null(m);
            /* the third: adaLN weights times 12, so scales and gates of
             * order 1 to 3 (the branch, not the residual, sets the error) */
            for (w = 0; t == 2 && w < m->n_t; w++)
                if (m->t[w].role == CIC_T_WEIGHT && strstr(m->t[w].name, "adaLN"))
                    for (i = 0; i < (size_t)m->t[w].rows * m->t[w].cols; i++)
                        m->t[w].f32[i] *= 12.0f;
            snprintf(what, sizeof what, "%s, std %.1f%s", CIC_BLOCK_NAME[c.block], stds[t],
                     t == 2 ? ", adaLN weights x 12" : "");
            ball_run(m, 64, rad, nrm, false, &r);
            worst = adversarial(m, &r, rad, nrm, what);
            points += (int)r.rows;
            printf("# %s: near-worst points of the input ball, largest row error / its "
                   "norm-wise bound %.3g\n",
                   what, worst);
            ball_res_clear(&r);
            cic_model_destroy(m);
        }
    printf("# %d near-worst points, each a 300-bit run, none outside its bounds\n", points);
}

/* Near-worst points through op-level model m (adversarial, an input ball
 * of radius 2^-30 and row norm 2^-29), its ratio printed; m destroyed. */
static void adversarial_op(cic_model *m, const char *what)
{
    double rad = 0x1p-30, nrm = rad * 2, worst;
    ball_res r;
    ball_run(m, 64, rad, nrm, false, &r);
    worst = adversarial(m, &r, rad, nrm, what);
    printf("# %s: near-worst points, largest row error / its norm-wise bound %.3g\n", what,
           worst);
    ball_res_clear(&r);
    cic_model_destroy(m);
}

/* A model of one attention op reading its q, k and v from the input (T x
 * 3d values uniform in [-a, a]): the attention's candidates alone. */
static cic_model *attn_model(int T, int d, int H, int kv, bool causal, double a, uint64_t seed)
{
    cic_model *m = cic_test_attn_model(cfg_of(CIC_BLOCK_PRELN, 1, d, seed), 1, T, d, H, kv, causal);
    int i;
    for (i = 0; i < T * 3 * d; i++)
        m->t[m->input].f32[i] =
            (float)(a * (2 * (double)(cic_test_rand(&seed) >> 11) * 0x1p-53 - 1));
    return m;
}

/* The attention's own candidates against near-worst points: diffuse and
 * peaked probabilities, grouped key/value heads, causal rows. */
static void test_adversarial_attn(void **state)
{
    static const struct {
        int H, kv;
        bool causal;
        double a;
    } cs[] = {{2, 2, false, 0.5}, {2, 2, false, 3}, {4, 2, true, 1}, {4, 1, false, 0.2}};
    int t;
    (void)state;
    for (t = 0; t < 4; t++) {
        char what[96];
        snprintf(what, sizeof what, "attention, %d heads, %d kv, %s, entries in +-%.1f",
                 cs[t].H, cs[t].kv, cs[t].causal ? "causal" : "not causal", cs[t].a);
        adversarial_op(attn_model(5, 8, cs[t].H, cs[t].kv, cs[t].causal, cs[t].a, 301 + t), what);
    }
}

/* A model of a DiT branch's pairs alone: h = x (1 + scale) + shift, z = h
 * W^T, y = gate z, with shift, scale and gate a sample's row of the
 * conditioning input (2 samples of T tokens; x uniform in [-1, 1], W of
 * std 0.3, shift, scale and gate uniform in [-a, a]). */
static cic_model *pair_model(int T, int d, double a, uint64_t seed)
{
    cic_model *m = cic_calloc(1, sizeof *m);
    cic_op o = cic_op_blank(CIC_OP_MODULATE, CIC_SITE_ATTN, 0);
    int i, w, h, z, y;
    assert_non_null(m);
    m->cfg = cfg_of(CIC_BLOCK_DIT, 1, d, seed);
    m->cfg.tokens = T;
    m->cfg.samples = 2;
    m->rows = 2 * T;
    m->input = cic_model_tensor_add(m, "x", CIC_T_INPUT, 2 * T, d);
    m->cond = cic_model_tensor_add(m, "mod", CIC_T_INPUT, 2, 3 * d);
    w = cic_model_tensor_add(m, "w", CIC_T_WEIGHT, d, d);
    h = cic_model_tensor_add(m, "h", CIC_T_ACT, 2 * T, d);
    z = cic_model_tensor_add(m, "z", CIC_T_ACT, 2 * T, d);
    y = cic_model_tensor_add(m, "y", CIC_T_ACT, 2 * T, d);
    assert_true(m->input >= 0 && m->cond >= 0 && w >= 0 && h >= 0 && z >= 0 && y >= 0);
    m->t[m->cond].rows_kind = CIC_ROWS_SAMPLES;
    for (i = 0; i < 2 * T * d; i++)
        m->t[m->input].f32[i] = (float)(2 * (double)(cic_test_rand(&seed) >> 11) * 0x1p-53 - 1);
    for (i = 0; i < 6 * d; i++)
        m->t[m->cond].f32[i] =
            (float)(a * (2 * (double)(cic_test_rand(&seed) >> 11) * 0x1p-53 - 1));
    for (i = 0; i < d * d; i++)
        m->t[w].f32[i] = (float)(0.6 * ((double)(cic_test_rand(&seed) >> 11) * 0x1p-53 - 0.5));
    o.in[0] = m->input;
    o.in[1] = m->cond;
    o.in_col[0] = 0; /* shift */
    o.in_col[1] = d; /* scale */
    o.out = h;
    assert_true(cic_model_op_add(m, &o) >= 0);
    o = cic_op_blank(CIC_OP_LINEAR, CIC_SITE_ATTN, 0);
    o.in[0] = h;
    o.w = w;
    o.out = z;
    assert_true(cic_model_op_add(m, &o) >= 0);
    o = cic_op_blank(CIC_OP_GATE, CIC_SITE_ATTN, 0);
    o.in[0] = z;
    o.in[1] = m->cond;
    o.in_col[0] = 2 * d; /* gate */
    o.out = y;
    assert_true(cic_model_op_add(m, &o) >= 0);
    m->output = m->residual = y;
    return m;
}

/* The modulation, the pairs (modulate then linear, linear then gate) and
 * the gate against near-worst points, with scales and gates of up to 0.5,
 * 2 and 6 in magnitude (negative scales shrink their channels). */
static void test_adversarial_pairs(void **state)
{
    static const double as[] = {0.5, 2, 6};
    int t;
    (void)state;
    for (t = 0; t < 3; t++) {
        char what[96];
        snprintf(what, sizeof what, "modulate, linear, gate, modulation in +-%.1f", as[t]);
        adversarial_op(pair_model(3, 8, as[t], 401 + (uint64_t)t), what);
    }
}

/* The norm-wise bound binds where the elementwise radii grow: a deeper
 * model's radii are never larger with it and, at its output, smaller. */
static void test_binds(void **state)
{
    static const enum cic_block_kind blocks[] = {CIC_BLOCK_PRELN, CIC_BLOCK_RMSNORM,
                                                 CIC_BLOCK_DIT, CIC_BLOCK_PARALLEL};
    int b;
    (void)state;
    for (b = 0; b < 4; b++) {
        cic_model_cfg c = cfg_of(blocks[b], 6, 48, 31 + (uint64_t)b);
        cic_model *m;
        ball_res nb, el;
        double mn = 0, me = 0;
        size_t i;
        c.std = 0.08;
        m = cic_model_create(&c, CIC_READOUT_RESIDUAL);
        assert_non_null(m);
        double gn, ge;
        ball_run(m, 64, 0, 0, false, &nb);
        gn = log2(g_layer_rel[4] / g_layer_rel[1]) / 3;
        ball_run(m, 64, 0, 0, true, &el);
        ge = log2(g_layer_rel[4] / g_layer_rel[1]) / 3;
        printf("# %s at d 48: growth of the largest relative radius from block 2 to 5: %.1f "
               "bits a block with the norm-wise bound, %.1f without\n",
               CIC_BLOCK_NAME[c.block], gn, ge);
        if (!(gn < ge))
            fail_msg("%s: the norm-wise bound grows as fast as the elementwise radii",
                     CIC_BLOCK_NAME[c.block]);
        for (i = 0; i < nb.n; i++) {
            assert_int_equal(mpfr_cmp(nb.mid[i], el.mid[i]), 0);
            if (nb.rad[i] > el.rad[i])
                fail_msg("%s: value %zu: radius %.4g above the elementwise %.4g",
                         CIC_BLOCK_NAME[c.block], i, nb.rad[i], el.rad[i]);
            mn = nb.rad[i] > mn ? nb.rad[i] : mn;
            me = el.rad[i] > me ? el.rad[i] : me;
        }
        printf("# %s, 6 blocks at d 48: largest radius %.3g with the norm-wise bound, %.3g "
               "without (%.1f bits)\n",
               CIC_BLOCK_NAME[c.block], mn, me, log2(me / mn));
        if (!(mn < me / 4))
            fail_msg("%s: the norm-wise bound does not bind (%.4g against %.4g)",
                     CIC_BLOCK_NAME[c.block], mn, me);
        ball_res_clear(&nb);
        ball_res_clear(&el);
        cic_model_destroy(m);
    }
}

/* The linear's candidate is tight: an input error along the weight's top
 * right singular vector comes out within 15 % of the row's bound (the
 * spectral norm bound's own slack), never above it. */
static void test_linear_tight(void **state)
{
    int d = 16, T = 3, i, j, it, w, y;
    double v[16], t[16], nv, e = 0x1p-20;
    uint64_t rs = 99;
    cic_model *m = cic_calloc(1, sizeof *m), *p;
    cic_op o = cic_op_blank(CIC_OP_LINEAR, CIC_SITE_INPUT, -1);
    ball_res r;
    mpfr_t *ex, dd, acc;
    (void)state;
    assert_non_null(m);
    m->cfg = cfg_of(CIC_BLOCK_PRELN, 1, d, 1);
    m->cfg.tokens = T;
    m->cfg.samples = 1;
    m->rows = T;
    m->cond = -1;
    m->input = cic_model_tensor_add(m, "input", CIC_T_INPUT, T, d);
    w = cic_model_tensor_add(m, "w", CIC_T_WEIGHT, d, d);
    y = cic_model_tensor_add(m, "y", CIC_T_ACT, T, d);
    assert_true(m->input >= 0 && w >= 0 && y >= 0);
    for (i = 0; i < d * d; i++)
        m->t[w].f32[i] = (float)((double)(cic_test_rand(&rs) >> 11) * 0x1p-53 - 0.5);
    for (i = 0; i < T * d; i++)
        m->t[m->input].f32[i] = (float)((double)(cic_test_rand(&rs) >> 11) * 0x1p-53);
    o.in[0] = m->input;
    o.w = w;
    o.out = y;
    assert_true(cic_model_op_add(m, &o) >= 0);
    m->output = m->residual = y;
    /* the top right singular vector by power iteration on W^T W */
    for (j = 0; j < d; j++)
        v[j] = 1.0 + j;
    for (it = 0; it < 500; it++) {
        for (i = 0; i < d; i++)
            for (t[i] = 0, j = 0; j < d; j++)
                t[i] += m->t[w].f32[i * d + j] * v[j];
        for (nv = 0, j = 0; j < d; j++) {
            for (v[j] = 0, i = 0; i < d; i++)
                v[j] += m->t[w].f32[i * d + j] * t[i];
            nv += v[j] * v[j];
        }
        for (j = 0; j < d; j++)
            v[j] /= sqrt(nv);
    }
    ball_run(m, 64, e, e, false, &r);
    p = cic_model_clone(m);
    ex = cic_mpvec_create(r.n, 300);
    assert_true(p && ex);
    assert_int_equal(cic_model_tensor_hp(p, p->input, 300), 0);
    for (i = 0; i < T * d; i++) {
        mpfr_set_flt(p->t[p->input].hp[i], m->t[m->input].f32[i], MPFR_RNDN);
        mpfr_add_d(p->t[p->input].hp[i], p->t[p->input].hp[i], e * v[i % d] * (1 - 0x1p-30),
                   MPFR_RNDN);
    }
    assert_int_equal(cic_engine_mpfr_run(ex, p, 300, false, NULL), 0);
    mpfr_inits2(600, dd, acc, (mpfr_ptr)0);
    for (i = 0; i < T; i++) {
        double ratio;
        mpfr_set_zero(acc, 1);
        for (j = 0; j < d; j++) {
            mpfr_sub(dd, ex[i * d + j], r.mid[i * d + j], MPFR_RNDN);
            mpfr_sqr(dd, dd, MPFR_RNDN);
            mpfr_add(acc, acc, dd, MPFR_RNDN);
        }
        mpfr_sqrt(acc, acc, MPFR_RNDN);
        ratio = mpfr_get_d(acc, MPFR_RNDN) / r.nrm[i];
        printf("# linear, row %d: error along the top singular vector / the row's bound = %.4f\n",
               i, ratio);
        if (!(ratio <= 1 && ratio > 0.85))
            fail_msg("row %d: error / bound %.4f outside (0.85, 1]", i, ratio);
    }
    mpfr_clears(dd, acc, (mpfr_ptr)0);
    cic_mpvec_destroy(ex, r.n);
    ball_res_clear(&r);
    cic_model_destroy(p);
    cic_model_destroy(m);
}

/* The radii and the norm-wise bounds are the same bits for any thread
 * count (the maxima across heads are order-free). */
static void test_threads(void **state)
{
    static const enum cic_block_kind blocks[] = {CIC_BLOCK_RMSNORM, CIC_BLOCK_DIT};
    int b;
    (void)state;
    for (b = 0; b < 2; b++) {
        cic_model_cfg c = cfg_of(blocks[b], 3, 32, 77 + (uint64_t)b);
        cic_model *m = cic_model_create(&c, CIC_READOUT_RESIDUAL);
        cic_rt r1, r3;
        ball_res a, z;
        assert_non_null(m);
        cic_rt_init(&r1, 1);
        cic_rt_init(&r3, 3);
        m->rt = &r1;
        ball_run(m, 64, 0, 0, false, &a);
        m->rt = &r3;
        ball_run(m, 64, 0, 0, false, &z);
        assert_memory_equal(a.rad, z.rad, a.n * sizeof *a.rad);
        assert_memory_equal(a.nrm, z.nrm, a.rows * sizeof *a.nrm);
        m->rt = NULL;
        cic_rt_clear(&r1);
        cic_rt_clear(&r3);
        ball_res_clear(&a);
        ball_res_clear(&z);
        cic_model_destroy(m);
    }
}

/* ---- planted pathologies ---- */

/* Every value m's 64-bit ball proves is the 300-bit run's binary32; the
 * count proven is returned. */
static size_t proven_right(const cic_model *m, const char *what)
{
    ball_res r;
    mpfr_t *ex;
    unsigned char *ok;
    size_t i, proven;
    double rel;
    ball_run(m, 64, 0, 0, false, &r);
    ex = cic_mpvec_create(r.n, 300);
    ok = malloc(r.n);
    assert_true(ex && ok);
    assert_int_equal(cic_engine_mpfr_run(ex, m, 300, false, NULL), 0);
    proven = cic_ball_prove((const mpfr_t *)r.mid, r.rad, r.n, ok, &rel);
    for (i = 0; i < r.n; i++)
        if (ok[i] && cic_test_f32_bits(cic_mp_get_f32(r.mid[i])) !=
                         cic_test_f32_bits(cic_mp_get_f32(ex[i])))
            fail_msg("%s: value %zu proven to the wrong binary32", what, i);
    printf("# %s: %zu of %zu values proven at 64 bits, every one right\n", what, proven, r.n);
    cic_mpvec_destroy(ex, r.n);
    free(ok);
    ball_res_clear(&r);
    return proven;
}

static void test_pathologies(void **state)
{
    cic_model_cfg c;
    cic_model *m;
    int i, j, w;
    size_t n;
    (void)state;
    /* sigma near 0: sample 0's rows nearly constant, eps tiny */
    c = cfg_of(CIC_BLOCK_PRELN, 2, 16, 5);
    c.eps = 1e-30f;
    m = cic_model_create(&c, CIC_READOUT_RESIDUAL);
    assert_non_null(m);
    for (i = 0; i < c.tokens; i++)
        for (j = 0; j < c.d_model; j++)
            m->t[m->input].f32[i * c.d_model + j] = 1.0f + (j == i ? 0x1p-22f : 0);
    n = proven_right(m, "LayerNorm of rows with sigma near 0");
    /* and an input ball that holds a constant row: that row's LayerNorm has
     * no bound (sigma reaches 0 in the ball), so none of its values may be
     * proven */
    {
        ball_res r;
        double rel;
        unsigned char *ok = malloc((size_t)c.d_model);
        assert_non_null(ok);
        ball_run(m, 64, 0x1p-20, INFINITY, false, &r);
        if (cic_ball_prove((const mpfr_t *)r.mid, r.rad, (size_t)c.d_model, ok, &rel) != 0)
            fail_msg("a row whose input ball holds a constant row has proven values");
        printf("# a constant row inside the input ball: 0 of its %d values proven\n", c.d_model);
        free(ok);
        ball_res_clear(&r);
    }
    (void)n;
    cic_model_destroy(m);
    /* a saturating softmax: weights of std 4 */
    c = cfg_of(CIC_BLOCK_RMSNORM, 2, 16, 6);
    c.std = 4;
    m = cic_model_create(&c, CIC_READOUT_RESIDUAL);
    assert_non_null(m);
    (void)proven_right(m, "saturating softmax");
    cic_model_destroy(m);
    /* a weight of huge spectral norm: every linear weight times 2^40 */
    c = cfg_of(CIC_BLOCK_PRELN, 2, 16, 7);
    m = cic_model_create(&c, CIC_READOUT_RESIDUAL);
    assert_non_null(m);
    for (w = 0; w < m->n_t; w++)
        if (m->t[w].role == CIC_T_WEIGHT && m->t[w].rows > 1 && strstr(m->t[w].name, "fc1"))
            for (i = 0; i < m->t[w].rows * m->t[w].cols; i++)
                m->t[w].f32[i] *= 0x1p40f;
    (void)proven_right(m, "weights of spectral norm near 2^40");
    cic_model_destroy(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_act_lipschitz),
        cmocka_unit_test(test_act_deriv_formula),
        cmocka_unit_test(test_act_deriv_table),
        cmocka_unit_test(test_act_own),
        cmocka_unit_test(test_perturb),
        cmocka_unit_test(test_adversarial),
        cmocka_unit_test(test_adversarial_attn),
        cmocka_unit_test(test_adversarial_pairs),
        cmocka_unit_test(test_binds),
        cmocka_unit_test(test_linear_tight),
        cmocka_unit_test(test_threads),
        cmocka_unit_test(test_pathologies),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
