/* SPDX-License-Identifier: MIT */
/* mp_ball_enc.c: the ball run's activations (GELU, its tanh form,
 * ReLU, SiLU, QuickGELU, GLU) and norms (LayerNorm, RMSNorm): Arb encloses
 * the exact function of the input balls before the kernel; mp_ball.c's
 * post hook measures the engine's midpoints against the enclosures. */
#include "mp_ball_int.h"

#include <arb_hypgeom.h>
#include <math.h>
#include <pthread.h>
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

/* ---- derivative bounds: the ball rule by the mean value theorem ----
 *
 * For x in the input ball [m - r, m + r], |f(x) - f(m)| <= sup |f'| r over
 * the ball: the enclosure of f(m) at the run's precision (what the
 * norm-wise bound already makes, enc0) widened by an upper bound of
 * sup |f'| times r. That is one evaluation at full precision where the
 * ball and its midpoint took two. The bounds of |f'| come from a table per
 * activation: DER_BINS bins of width 2^-DER_SHIFT over [DER_LO, -DER_LO),
 * each entry an upper bound of |f'| over its closed bin, f' enclosed by Arb
 * at 64 bits on the bin as a ball through (value, derivative) pairs: the
 * chain rule on the same formula as act_ball. A ball outside the table,
 * or wider than DER_SPAN bins, takes the enclosure of act_ball (docs/design.md,
 * "Activations by the mean value theorem"). */

#define DER_LO (-16)
#define DER_SHIFT 6
#define DER_BINS (2 * 16 << DER_SHIFT)
#define DER_SPAN 8

/* A value and its derivative, both balls. */
typedef struct {
    arb_t v, d;
} jet;

static void jet_init(jet *x)
{
    arb_init(x->v);
    arb_init(x->d);
}

static void jet_clear(jet *x)
{
    arb_clear(x->v);
    arb_clear(x->d);
}

/* y = a b (y may be a or b) */
static void jet_mul(jet *y, const jet *a, const jet *b, slong prec)
{
    arb_t s, t;
    arb_init(s);
    arb_init(t);
    arb_mul(s, a->v, b->d, prec);
    arb_mul(t, a->d, b->v, prec);
    arb_add(y->d, s, t, prec);
    arb_mul(y->v, a->v, b->v, prec);
    arb_clear(s);
    arb_clear(t);
}

/* y = a c, c a constant */
static void jet_scale(jet *y, const jet *a, const arb_t c, slong prec)
{
    arb_mul(y->v, a->v, c, prec);
    arb_mul(y->d, a->d, c, prec);
}

/* y = f(a) for f = erf (f' = 2 exp(-a^2) / sqrt(pi)), tanh (1 - tanh^2)
 * or exp (exp) */
enum jet_fn { JET_ERF, JET_TANH, JET_EXP };

static void jet_apply(jet *y, const jet *a, enum jet_fn f, slong prec)
{
    arb_t fv, fd, t;
    arb_init(fv);
    arb_init(fd);
    arb_init(t);
    if (f == JET_ERF) {
        arb_hypgeom_erf(fv, a->v, prec);
        arb_mul(fd, a->v, a->v, prec);
        arb_neg(fd, fd);
        arb_exp(fd, fd, prec);
        arb_const_sqrt_pi(t, prec);
        arb_div(fd, fd, t, prec);
        arb_mul_2exp_si(fd, fd, 1);
    } else if (f == JET_TANH) {
        arb_tanh(fv, a->v, prec);
        arb_mul(fd, fv, fv, prec);
        arb_sub_ui(fd, fd, 1, prec);
        arb_neg(fd, fd);
    } else {
        arb_exp(fv, a->v, prec);
        arb_set(fd, fv);
    }
    arb_mul(y->d, a->d, fd, prec); /* the chain rule; y may be a */
    arb_set(y->v, fv);
    arb_clear(fv);
    arb_clear(fd);
    arb_clear(t);
}

/* y = x (1 + t) / 2 (t is overwritten), gelu_tail on jets */
static void jet_gelu_tail(jet *y, const jet *x, jet *t, slong prec)
{
    arb_add_ui(t->v, t->v, 1, prec);
    jet_mul(y, t, x, prec);
    arb_mul_2exp_si(y->v, y->v, -1);
    arb_mul_2exp_si(y->d, y->d, -1);
}

/* f and f' of activation a on x (act_ball's formulas; t, u scratch) */
static void act_jet(jet *y, const jet *x, enum cic_act a, jet *t, jet *u, const act_consts *k,
                    slong prec)
{
    switch (a) {
    case CIC_ACT_GELU:
        jet_scale(t, x, k->c0, prec);
        jet_apply(t, t, JET_ERF, prec);
        jet_gelu_tail(y, x, t, prec);
        break;
    case CIC_ACT_GELU_TANH:
        jet_mul(t, x, x, prec);
        jet_mul(t, t, x, prec);
        jet_scale(t, t, k->c0, prec);
        arb_add(t->v, t->v, x->v, prec);
        arb_add(t->d, t->d, x->d, prec);
        jet_scale(t, t, k->c1, prec);
        jet_apply(t, t, JET_TANH, prec);
        jet_gelu_tail(y, x, t, prec);
        break;
    default: /* SiLU, QuickGELU: x / (1 + exp(k x)) */
        jet_scale(t, x, k->c0, prec);
        jet_apply(t, t, JET_EXP, prec);
        arb_add_ui(t->v, t->v, 1, prec);
        /* (x / t)' = (x' t - x t') / t^2 */
        arb_mul(u->v, x->d, t->v, prec);
        arb_mul(u->d, x->v, t->d, prec);
        arb_sub(u->d, u->v, u->d, prec);
        arb_mul(u->v, t->v, t->v, prec);
        arb_div(y->d, u->d, u->v, prec);
        arb_div(y->v, x->v, t->v, prec);
        break;
    }
}

/* An upper bound of |f'| over [lo, hi] (exact doubles), +inf if Arb
 * gives none. */
static double deriv_up(enum cic_act a, double lo, double hi, const act_consts *k, slong prec)
{
    jet x, y, t, u;
    arf_t ub;
    double v;
    jet_init(&x);
    jet_init(&y);
    jet_init(&t);
    jet_init(&u);
    arf_init(ub);
    arb_set_d(x.v, lo / 2 + hi / 2);
    mag_set_d(arb_radref(x.v), hi / 2 - lo / 2);
    arb_one(x.d);
    act_jet(&y, &x, a, &t, &u, k, prec);
    arb_get_abs_ubound_arf(ub, y.d, prec);
    v = arf_get_d(ub, ARF_RND_UP);
    jet_clear(&x);
    jet_clear(&y);
    jet_clear(&t);
    jet_clear(&u);
    arf_clear(ub);
    return v >= 0 && v < INFINITY ? v : INFINITY;
}

static pthread_mutex_t der_lock = PTHREAD_MUTEX_INITIALIZER;
static double *der_table[CIC_ACT_COUNT];

const double *_cic_ball_deriv_table(enum cic_act a)
{
    double *t;
    act_consts k;
    int i;
    if (a < 0 || a >= CIC_ACT_COUNT || a == CIC_ACT_RELU)
        return NULL;
    pthread_mutex_lock(&der_lock);
    if (!der_table[a] && (t = malloc(DER_BINS * sizeof *t)) != NULL) {
        act_consts_init(&k, a, 64);
        for (i = 0; i < DER_BINS; i++)
            t[i] = deriv_up(a, DER_LO + ldexp(i, -DER_SHIFT), DER_LO + ldexp(i + 1, -DER_SHIFT),
                            &k, 64);
        act_consts_clear(&k);
        der_table[a] = t; /* kept for the process: DER_BINS doubles */
    }
    t = der_table[a];
    pthread_mutex_unlock(&der_lock);
    return t;
}

double _cic_ball_deriv_up(const double *tab, double lo, double hi)
{
    double x0, x1, L = 0;
    long i, i0, i1;
    if (!tab || !(lo >= DER_LO && hi < -DER_LO && lo <= hi))
        return -1;
    /* (lo - DER_LO) 2^DER_SHIFT is within 2^-42 of its computed value
     * (one rounding of a sum below 32, then an exact scaling); the bins of
     * [lo, hi] lie within the margin's */
    x0 = ldexp(lo - DER_LO, DER_SHIFT) - 0x1p-40;
    x1 = ldexp(hi - DER_LO, DER_SHIFT) + 0x1p-40;
    i0 = (long)floor(x0);
    i1 = (long)floor(x1);
    i0 = i0 < 0 ? 0 : i0;
    i1 = i1 >= DER_BINS ? DER_BINS - 1 : i1;
    if (i1 - i0 >= DER_SPAN)
        return -1;
    for (i = i0; i <= i1; i++)
        L = tab[i] > L ? tab[i] : L;
    return L < INFINITY ? L : -1;
}

/* The bound of |f'| over the ball m +- r from tab, or -1: none (the ball
 * leaves the table, is too wide, or its radius is not a number). */
static double ball_deriv_up(const double *tab, mpfr_srcptr m, double r)
{
    double lo, hi;
    if (!tab || !(r >= 0 && r < INFINITY) || !mpfr_number_p(m))
        return -1;
    lo = nextafter(mpfr_get_d(m, MPFR_RNDD) - r, -INFINITY);
    hi = nextafter(mpfr_get_d(m, MPFR_RNDU) + r, INFINITY);
    return _cic_ball_deriv_up(tab, lo, hi);
}

typedef struct {
    const mpfr_t *a, *g; /* g: the GLU's second factor, or NULL */
    const double *ra, *rg;
    arb_ptr e, e0; /* e0: of the midpoints alone, or NULL */
    const double *der; /* the derivative table, or NULL (act_ball on the ball) */
    double *lr; /* the values bounded a priori (cic_ball's act_lr), or NULL */
    atomic_size_t left; /* values own_range left to Arb */
    enum cic_act act;
    const act_consts *k;
    slong prec;
} act_job;

/* Value j by the mean value theorem: f of the midpoint (e0's value too),
 * widened by err >= sup |f'| r; then times the GLU's second factor (x, t
 * scratch). */
static void act_mvt(const act_job *J, size_t j, arb_t x, arb_t t, double err)
{
    arb_ptr e = J->e + j;
    mag_t m;
    ball_set(x, J->a[j], 0);
    act_ball(e, x, J->act, t, J->k, J->prec);
    if (J->e0) {
        arb_set(J->e0 + j, e);
        if (J->g) {
            ball_set(x, J->g[j], 0);
            arb_mul(J->e0 + j, J->e0 + j, x, J->prec);
        }
    }
    mag_init(m);
    mag_set_d(m, err);
    arb_add_error_mag(e, m);
    mag_clear(m);
    if (J->g) {
        ball_set(x, J->g[j], rad_at(J->rg, j));
        arb_mul(e, e, x, J->prec);
    }
}

/* The values whose kernel roundings post bounds a priori: lr[j] =
 * up(sup |f'| r), NaN for the others (left to act_range). */
static void own_range(void *c, size_t lo, size_t hi)
{
    act_job *J = c;
    size_t j, left = 0;
    for (j = lo; j < hi; j++) {
        double r = rad_at(J->ra, j), L = ball_deriv_up(J->der, J->a[j], r);
        bool own = L >= 0 && _cic_ball_act_own_takes(J->act, J->a[j], J->prec);
        J->lr[j] = own ? up(L * r) : NAN;
        left += !own;
    }
    atomic_fetch_add(&J->left, left);
}

static void act_range(void *c, size_t lo, size_t hi)
{
    const act_job *J = c;
    arb_t x, t;
    size_t j;
    arb_init(x);
    arb_init(t);
    for (j = lo; j < hi; j++) {
        double r, L;
        if (J->lr && !isnan(J->lr[j]))
            continue; /* post bounds it */
        r = rad_at(J->ra, j);
        L = ball_deriv_up(J->der, J->a[j], r);
        if (L >= 0) {
            act_mvt(J, j, x, t, up(L * r));
            continue;
        }
        ball_set(x, J->a[j], r);
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
    if (!J.a || (glu && !J.g))
        return -1;
    if (glu && b->nb && glu_coef(b, o, J.a, J.g) < 0)
        return -1;
    J.act = o->act;
    J.der = _cic_ball_deriv_table(o->act);
    J.prec = (slong)b->prec;
    free(b->act_lr);
    b->act_lr = NULL;
    drop_enc(b);
    J.lr = NULL;
    atomic_init(&J.left, n);
    if (!glu && (o->act == CIC_ACT_GELU || o->act == CIC_ACT_GELU_TANH || o->act == CIC_ACT_SILU)) {
        if (!(b->act_lr = malloc((n ? n : 1) * sizeof *b->act_lr)))
            return -1;
        b->act_in = J.a;
        J.lr = b->act_lr;
        atomic_init(&J.left, 0);
        ball_parallel(b, n, own_range, &J);
    }
    if (atomic_load(&J.left) == 0) /* every value bounded a priori: no enclosure */
        return 0;
    if (!(J.e = enc_make(b, n)))
        return -1;
    J.e0 = b->enc0;
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

/* An activation whose values pre bounded a priori: each radius is the
 * kernel's own roundings (mp_ball_own.c) plus up(sup |f'| r), or where pre
 * made an enclosure, the distance to it; the norm-wise candidate of each
 * row as enc_post's, the own roundings' 2-norm in place of rho. */
typedef struct {
    cic_ball *b;
    const mpfr_t *y;
    const cic_op *o;
    size_t cols;
} own_job;

static void own_rows(void *c, size_t lo, size_t hi)
{
    const own_job *J = c;
    cic_ball *b = J->b;
    size_t i, j;
    for (i = lo; i < hi; i++) {
        double s = 0;
        for (j = 0; j < J->cols; j++) {
            size_t k = i * J->cols + j;
            double d;
            if (!isnan(b->act_lr[k])) {
                d = _cic_ball_act_own(J->o->act, b->act_in[k], J->y[k], b->prec);
                d = d >= 0 ? d : INFINITY; /* pre checked m: not reached */
                b->next[k] = up(d + b->act_lr[k]);
            } else {
                b->next[k] = dist_up(b->enc + k, J->y[k], (slong)b->prec);
                d = b->enc0 ? dist_up(b->enc0 + k, J->y[k], (slong)b->prec) : 0;
            }
            s += d * d;
        }
        if (b->nb) /* enc0 made (for the values left to Arb) when nb */
            b->next_nrm[i] = up(up(CIC_ACT_LIP * nrm_at(b, J->o->in[0], i)) +
                                up(sqrt(bound_sum(s, J->cols))));
    }
}

static int act_post(cic_ball *b, const cic_op *o, const mpfr_t *y)
{
    own_job J = {b, y, o, (size_t)b->m->t[o->out].cols};
    if (!b->act_lr)
        return enc_post(b, o, y, ENC_ACT);
    ball_parallel(b, (size_t)cic_model_run_rows(b->m, o->out, b->ns), own_rows, &J);
    free(b->act_lr);
    b->act_lr = NULL;
    b->act_in = NULL;
    drop_enc(b);
    return 0;
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
