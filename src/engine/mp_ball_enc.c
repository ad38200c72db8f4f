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
    arb_ptr e, e0; /* e0: of the midpoints alone, or NULL */
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
        if (!J->e0)
            continue;
        ball_set(x, J->a[j], 0);
        act_ball(J->e0 + j, x, J->act, t, J->k, J->prec);
        if (J->g) {
            ball_set(x, J->g[j], 0);
            arb_mul(J->e0 + j, J->e0 + j, x, J->prec);
        }
    }
    arb_clear(x);
    arb_clear(t);
}

/* GLU, y = act(a) b: per row, aux[2 i] = L max (|b| + r_b) multiplies
 * the row's e of a, aux[2 i + 1] = max |a| (>= max |act(a)|) that of b. */
static int glu_coef(cic_ball *b, const cic_op *o, const mpfr_t *a, const mpfr_t *g)
{
    size_t rows = (size_t)cic_model_run_rows(b->m, o->out, b->ns), i, j;
    size_t cols = (size_t)b->m->t[o->out].cols;
    const double *rg = b->rad[o->in[1]];
    free(b->aux);
    if (!(b->aux = malloc(2 * (rows ? rows : 1) * sizeof(double))))
        return -1;
    for (i = 0; i < rows; i++) {
        double mb = 0, ma = 0;
        for (j = 0; j < cols; j++) {
            size_t k = i * cols + j;
            double vb = up(absup(g[k]) + rad_at(rg, k)), va = absup(a[k]);
            mb = vb > mb ? vb : mb;
            ma = va > ma ? va : ma;
        }
        b->aux[2 * i] = up(CIC_ACT_LIP * mb);
        b->aux[2 * i + 1] = ma;
    }
    return 0;
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
    J.e0 = b->enc0;
    if (glu && b->nb && glu_coef(b, o, J.a, J.g) < 0)
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
    double *linv; /* per row: sup 1 / sqrt(var + eps) over the row's box, or NULL */
    double eps;
    int d;
    bool center;
    slong prec;
} norm_job;

/* An upper bound of the ball x (INFINITY when it has none). */
static double arb_up(const arb_t x, slong prec)
{
    arf_t ub;
    double v;
    arf_init(ub);
    arb_get_ubound_arf(ub, x, prec);
    v = arf_get_d(ub, ARF_RND_UP);
    arf_clear(ub);
    return v >= 0 && v < INFINITY ? v : INFINITY;
}

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
    if (J->linv)
        J->linv[off / (size_t)d] = arb_up(var, prec);
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
    size_t rows, j;
    double G;
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
    J.linv = NULL;
    rows = (size_t)cic_model_run_rows(b->m, o->in[0], b->ns);
    if (b->nb) {
        free(b->aux);
        if (!(b->aux = malloc((rows ? rows : 1) * sizeof(double))))
            return -1;
        J.linv = b->aux;
    }
    ball_parallel(b, rows, norm_rows, &J);
    if (!b->nb)
        return 0;
    /* the gain's largest magnitude scales the Lipschitz constant; a gain
     * or bias that is not exact leaves the norm-wise candidate out */
    G = J.rg || J.rb ? INFINITY : 0;
    for (j = 0; J.g && j < (size_t)J.d; j++)
        G = absup(J.g[j]) > G ? absup(J.g[j]) : G;
    if (!J.g)
        G = G > 1 ? G : 1;
    for (j = 0; j < rows; j++)
        b->aux[j] = up(G * b->aux[j]);
    /* the same rows of the midpoints alone: the kernel's own roundings */
    J.rx = J.rg = J.rb = NULL;
    J.e = b->enc0;
    J.linv = NULL;
    ball_parallel(b, rows, norm_rows, &J);
    return 0;
}

/* ---- the rules ---- */

enum enc_kind { ENC_ACT, ENC_GLU, ENC_NORM };

/* After the kernel: the norm-wise candidate of each row (the Lipschitz
 * constant over the ball times the input's e, plus the 2-norm of the
 * kernel's own roundings against the function of the midpoints), then the
 * radii against the enclosures. */
static int enc_post(cic_ball *b, const cic_op *o, const mpfr_t *y, enum enc_kind k)
{
    size_t rows = (size_t)cic_model_run_rows(b->m, o->out, b->ns), i;
    double *rho;
    if (b->nb && b->enc0) {
        if (!(rho = malloc((rows ? rows : 1) * sizeof *rho)))
            return -1;
        _cic_nb_rho(b, y, rows, (size_t)b->m->t[o->out].cols, rho);
        for (i = 0; i < rows; i++) {
            double ea = nrm_at(b, o->in[0], i), c;
            if (k == ENC_ACT)
                c = up(CIC_ACT_LIP * ea);
            else if (k == ENC_GLU)
                c = up(b->aux[2 * i] * ea + b->aux[2 * i + 1] * nrm_at(b, o->in[1], i));
            else
                c = up(b->aux[i] * ea);
            b->next_nrm[i] = up(c + rho[i]);
        }
        free(rho);
    }
    return _cic_ball_post_enc(b, o, y);
}

static int act_post(cic_ball *b, const cic_op *o, const mpfr_t *y)
{
    return enc_post(b, o, y, ENC_ACT);
}

static int glu_post(cic_ball *b, const cic_op *o, const mpfr_t *y)
{
    return enc_post(b, o, y, ENC_GLU);
}

static int norm_post(cic_ball *b, const cic_op *o, const mpfr_t *y)
{
    return enc_post(b, o, y, ENC_NORM);
}

static int act_only_pre(cic_ball *b, const cic_op *o, cic_ball_mid_fn mid, void *ctx)
{
    return act_pre(b, o, mid, ctx, false);
}

static int glu_pre(cic_ball *b, const cic_op *o, cic_ball_mid_fn mid, void *ctx)
{
    return act_pre(b, o, mid, ctx, true);
}

const cic_ball_rule _cic_ball_rule_act = {.pre = act_only_pre, .post = act_post};
const cic_ball_rule _cic_ball_rule_glu = {.pre = glu_pre, .post = glu_post};
const cic_ball_rule _cic_ball_rule_norm = {.pre = norm_pre, .post = norm_post};
