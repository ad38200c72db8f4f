/* SPDX-License-Identifier: MIT */
/* mp_ball_enc.c: the ball run's activations (GELU, its tanh form,
 * ReLU, SiLU, QuickGELU, GLU) and norms (LayerNorm, RMSNorm): Arb encloses
 * the exact function of the input balls before the kernel; mp_ball.c's
 * post hook measures the engine's midpoints against the enclosures. */
#include "mp_ball_int.h"

#include <arb_hypgeom.h>
#include <stdbool.h>

/* y = x (1 + t) / 2, the tail of both GELU forms (t scratch). */
static void gelu_tail(arb_t y, const arb_t x, arb_t t, slong prec)
{
    arb_add_ui(t, t, 1, prec);
    arb_mul(t, t, x, prec);
    arb_mul_2exp_si(y, t, -1);
}

/* The exact constants of an activation's formula (mp_act.c's decimals and
 * irrationals) as balls, made once per op and read by every thread:
 * 1 / sqrt 2 (GELU); 0.044715 and sqrt(2 / pi) (its tanh form); k of
 * x / (1 + exp(k x)): -1 (SiLU), -1.702 (QuickGELU). */
typedef struct {
    arb_t c0, c1;
} act_consts;

static void act_consts_init(act_consts *k, enum cic_act a, slong prec)
{
    arb_init(k->c0);
    arb_init(k->c1);
    switch (a) {
    case CIC_ACT_GELU:
        arb_rsqrt_ui(k->c0, 2, prec);
        break;
    case CIC_ACT_GELU_TANH:
        arb_set_str(k->c0, "0.044715", prec);
        arb_const_pi(k->c1, prec);
        arb_ui_div(k->c1, 2, k->c1, prec);
        arb_sqrt(k->c1, k->c1, prec);
        break;
    case CIC_ACT_SILU:
        arb_set_si(k->c0, -1);
        break;
    case CIC_ACT_QUICK_GELU:
        arb_set_str(k->c0, "-1.702", prec);
        break;
    default:
        break;
    }
}

static void act_consts_clear(act_consts *k)
{
    arb_clear(k->c0);
    arb_clear(k->c1);
}

/* y = [0, max x] where the ball x straddles 0 (ReLU) */
static void relu_ball(arb_t y, const arb_t x, slong prec)
{
    if (arb_is_positive(x)) {
        arb_set(y, x);
    } else if (arb_is_nonpositive(x)) {
        arb_zero(y);
    } else {
        arf_t lo, hi;
        arf_init(lo);
        arf_init(hi);
        arb_get_ubound_arf(hi, x, prec);
        arb_set_interval_arf(y, lo, hi, prec);
        arf_clear(lo);
        arf_clear(hi);
    }
}

/* The exact activation of the ball x, the formulas of mp_act.c with their
 * constants k (t scratch). */
static void act_ball(arb_t y, const arb_t x, enum cic_act a, arb_t t, const act_consts *k,
                     slong prec)
{
    switch (a) {
    case CIC_ACT_GELU: /* 0.5 x (1 + erf(x / sqrt 2)) */
        arb_mul(t, x, k->c0, prec);
        arb_hypgeom_erf(t, t, prec);
        gelu_tail(y, x, t, prec);
        break;
    case CIC_ACT_GELU_TANH: /* 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) */
        arb_mul(t, x, x, prec);
        arb_mul(t, t, x, prec);
        arb_mul(t, t, k->c0, prec);
        arb_add(t, t, x, prec);
        arb_mul(t, t, k->c1, prec);
        arb_tanh(t, t, prec);
        gelu_tail(y, x, t, prec);
        break;
    case CIC_ACT_RELU:
        relu_ball(y, x, prec);
        break;
    case CIC_ACT_SILU:       /* x / (1 + exp(-x)) */
    case CIC_ACT_QUICK_GELU: /* x / (1 + exp(-1.702 x)) */
        arb_mul(t, k->c0, x, prec);
        arb_exp(t, t, prec);
        arb_add_ui(t, t, 1, prec);
        arb_div(y, x, t, prec);
        break;
    default:
        CIC_ASSERT(0 && "activation without a ball formula");
    }
}

typedef struct {
    const mpfr_t *a, *g; /* g: the GLU's second factor, or NULL */
    const double *ra, *rg;
    arb_ptr e;
    enum cic_act act;
    const act_consts *k;
    slong prec;
} act_job;

static void act_range(void *c, size_t lo, size_t hi)
{
    const act_job *J = c;
    arb_t x, t;
    size_t j;
    arb_init(x);
    arb_init(t);
    for (j = lo; j < hi; j++) {
        ball_set(x, J->a[j], rad_at(J->ra, j));
        act_ball(J->e + j, x, J->act, t, J->k, J->prec);
        if (J->g) {
            ball_set(x, J->g[j], rad_at(J->rg, j));
            arb_mul(J->e + j, J->e + j, x, J->prec);
        }
    }
    arb_clear(x);
    arb_clear(t);
}

static int act_pre(cic_ball *b, const cic_op *o, cic_ball_mid_fn mid, void *ctx, bool glu)
{
    act_job J;
    act_consts k;
    size_t n = count(b, o->out);
    J.a = mid(ctx, o->in[0]);
    J.g = glu ? mid(ctx, o->in[1]) : NULL;
    J.ra = b->rad[o->in[0]];
    J.rg = glu ? b->rad[o->in[1]] : NULL;
    if (!J.a || (glu && !J.g) || !(J.e = enc_make(b, n)))
        return -1;
    J.act = o->act;
    J.prec = (slong)b->prec;
    act_consts_init(&k, o->act, J.prec);
    J.k = &k;
    ball_parallel(b, n, act_range, &J);
    act_consts_clear(&k);
    return 0;
}

/* LayerNorm / RMSNorm of each row's balls, as mp_norm computes it. */
typedef struct {
    const mpfr_t *x, *g, *bb;
    const double *rx, *rg, *rb;
    arb_ptr e;
    double eps;
    int d;
    bool center;
    slong prec;
} norm_job;

static void norm_row(const norm_job *J, arb_ptr row, size_t off, arb_t mean, arb_t var, arb_t t)
{
    int d = J->d, j;
    slong prec = J->prec;
    arb_zero(mean);
    for (j = 0; j < d; j++) {
        ball_set(row + j, J->x[off + j], rad_at(J->rx, off + j));
        if (J->center)
            arb_add(mean, mean, row + j, prec);
    }
    if (J->center) {
        arb_div_ui(mean, mean, (ulong)d, prec);
        for (j = 0; j < d; j++)
            arb_sub(row + j, row + j, mean, prec);
    }
    arb_dot(var, NULL, 0, row, 1, row, 1, d, prec);
    arb_div_ui(var, var, (ulong)d, prec);
    arb_set_d(t, J->eps);
    arb_add(var, var, t, prec);
    arb_rsqrt(var, var, prec);
    for (j = 0; j < d; j++) {
        arb_mul(row + j, row + j, var, prec);
        if (J->g) {
            ball_set(t, J->g[j], rad_at(J->rg, (size_t)j));
            arb_mul(row + j, row + j, t, prec);
        }
        if (J->bb) {
            ball_set(t, J->bb[j], rad_at(J->rb, (size_t)j));
            arb_add(row + j, row + j, t, prec);
        }
    }
}

static void norm_rows(void *c, size_t lo, size_t hi)
{
    const norm_job *J = c;
    arb_t mean, var, t;
    size_t i;
    arb_init(mean);
    arb_init(var);
    arb_init(t);
    for (i = lo; i < hi; i++)
        norm_row(J, J->e + i * J->d, i * J->d, mean, var, t);
    arb_clear(mean);
    arb_clear(var);
    arb_clear(t);
}

static int norm_pre(cic_ball *b, const cic_op *o, cic_ball_mid_fn mid, void *ctx)
{
    norm_job J;
    J.x = mid(ctx, o->in[0]);
    J.g = o->g >= 0 ? mid(ctx, o->g) : NULL;
    J.bb = o->b >= 0 ? mid(ctx, o->b) : NULL;
    J.rx = b->rad[o->in[0]];
    J.rg = o->g >= 0 ? b->rad[o->g] : NULL;
    J.rb = o->b >= 0 ? b->rad[o->b] : NULL;
    if (!J.x || (o->g >= 0 && !J.g) || (o->b >= 0 && !J.bb) ||
        !(J.e = enc_make(b, count(b, o->out))))
        return -1;
    J.d = b->m->t[o->in[0]].cols;
    J.eps = (double)o->eps;
    J.center = o->center;
    J.prec = (slong)b->prec;
    ball_parallel(b, (size_t)cic_model_run_rows(b->m, o->in[0], b->ns), norm_rows, &J);
    return 0;
}

/* ---- the rules ---- */

static int act_only_pre(cic_ball *b, const cic_op *o, cic_ball_mid_fn mid, void *ctx)
{
    return act_pre(b, o, mid, ctx, false);
}

static int glu_pre(cic_ball *b, const cic_op *o, cic_ball_mid_fn mid, void *ctx)
{
    return act_pre(b, o, mid, ctx, true);
}

const cic_ball_rule _cic_ball_rule_act = {.pre = act_only_pre, .post = _cic_ball_post_enc};
const cic_ball_rule _cic_ball_rule_glu = {.pre = glu_pre, .post = _cic_ball_post_enc};
const cic_ball_rule _cic_ball_rule_norm = {.pre = norm_pre, .post = _cic_ball_post_enc};
