/* SPDX-License-Identifier: MIT */
/* mp_ball_int.h: what the files of the ball run share (internal to
 * src/engine): the ball's state, the safe arithmetic on radii (up,
 * bound_sum, absup; the argument is in mp_ball.c's opening comment), the
 * thread split, the enclosures in Arb, and the ball rule of every op
 * kind, defined with its family: mp_ball_enc.c (activations, norms: Arb
 * enclosures; mp_ball_own.c: the activation kernel's own roundings bounded
 * a priori), mp_ball_elem.c (add, gate, modulation, centring, RoPE:
 * first-order bounds), mp_ball_lin.c (linear layers), mp_ball_attn.c
 * (attention), mp_ball_rule.c (the shared rules, and the ops a transform
 * adds, which have no bound). mp_ball.c holds the ball's life, the rule
 * table and the walk's hooks; the rule files call only this header and
 * mp_ball_rule.c, never mp_ball.c. */
#ifndef CIC_MP_BALL_INT_H
#define CIC_MP_BALL_INT_H

#include "mp_ball.h"

#include "engine.h"

#include "../base/base.h"
#include "../base/par.h"

#include <arb.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#include <math.h>
#include <stdio.h>

typedef struct {
    const double *aq, *ak, *av, *rq, *rk, *rv;
    /* the norm-wise bound: q's, k's and v's e per row (NULL: exact), and
     * the output's per (row, head) (NULL: not carried) */
    const double *eq, *ek, *ev;
    double *eo;
    /* the bound across heads (mp_ball_attn.c, cross_heads): per (row, key)
     * the largest over heads of ||q|| w and of |P*|, per row the largest a
     * and K, as the bits of nonnegative doubles (order-free maxima); per
     * (row, head) the head's own part. NULL: not carried. */
    _Atomic uint64_t *qw, *pm, *am, *km;
    _Atomic uint64_t *sm; /* per row: the largest over heads of sum_j (p + rp) */
    double *er;
    /* the spectral candidate (mp_ball_attn.c, spec_heads): per (row, key)
     * the largest over heads of ||q|| ||X0|| Pu and of ||q|| (||m'|| Pu +
     * w2), per row the largest beta and K0, per (row, head) the own part;
     * per (sample, kv head) ||X0|| and ||K0|| (bounds of the centred
     * values' and keys' spectral norms), their centres m0, mk0 (dh each)
     * and ||mk0||. NULL: not carried. */
    _Atomic uint64_t *qx, *qm, *am2, *km2;
    double *er2, *snx, *snk, *m0, *mk0, *nmk0;
    double *sk, *sv; /* k's and v's midpoints in double (RN; sv may be sk) */
    double *ry;
    double c; /* 1 / sqrt(dh), rounded up */
    int N, d, H, dh, lq, lk, lv, qc, kc, vc, grp;
} ball_attn;

/* A linear layer beside a diagonal map (mp_ball_lin.c, "pairs"): the last
 * modulate or gate output (kind 'd': y* - y^ = diag(t) (x* - x^) + rest,
 * |t_j| <= D[s, j] for sample s) and the last linear output (kind 'l': z*
 * - z^ = W (x* - x^) + own). ex: the input's e per row; rest: the 2-norm
 * of the rest (or own) per row. id -1: none. */
typedef struct {
    int id, w, n;
    double *D, *ex, *rest;
} ball_pair;

struct cic_ball {
    const cic_model *m;
    mpfr_prec_t prec;
    double u;
    int ns;
    int nt;        /* threads, the engine run's (cic_ball_create) */
    double **rad;  /* per tensor id; NULL: exact (weights, inputs) */
    double **absv; /* per tensor id: |midpoints| rounded up (attention) */
    double *next;  /* the radii of the op being run, installed by post */
    arb_ptr enc;   /* enclosures made before the op, compared after */
    size_t n_enc;
    ball_attn at;
    /* The norm-wise bound (mp_ball_norm.c): per tensor id and run row, an
     * upper bound of the 2-norm of (exact row - midpoint row); NULL: exact.
     * nb: carried (off: the elementwise radii alone, for comparison). */
    bool nb;
    double **nrm;
    double *next_nrm; /* the op's candidate per output row (INFINITY: none) */
    arb_ptr enc0;     /* enclosures of the function of the midpoints alone */
    double *aux;      /* per row or (row, head): what pre hands to post */
    double *layer_rel; /* cic_ball_out's, or NULL */
    int n_layers;
    int *layer_last;   /* per layer: the index of its last op */
    struct cic_specnorm_cache *sn_own; /* the spectral norms' cache when the
                                        * model has no context (m->rt) */
    ball_pair dg, ln; /* the pairs (ball_pair) */
    /* the Gram matrix of the last weight a pair scaled, for the other
     * samples' scalings (specnorm.h: cic_specnorm_gram); NULL: none */
    struct cic_specnorm_gram *gram;
    int gram_w;
    bool gram_cols, gram_tried; /* tried: gram is (w, cols)'s, NULL or not */
    /* an activation's values bounded a priori (mp_ball_own.c): per value
     * up(sup |f'| r), NaN where Arb encloses it instead; and the inputs'
     * midpoints. NULL: none (mp_ball_enc.c, from pre to post) */
    double *act_lr;
    const mpfr_t *act_in;
    bool failed;
    char why[160];
};

static inline double up(double x)
{
    return x * (1.0 + 0x1p-50) + 0x1p-1060;
}

/* A computed sum s of n nonnegative terms (each a product of at most three
 * factors and a sum of two, correctly rounded in double), in any order:
 * the exact sum is below s (1 + gamma) with gamma = (n + 2) 2^-51 >= the
 * gamma_n of n u / (1 - n u) for n u <= 1/100, plus what underflow lost. */
static inline double bound_sum(double s, size_t n)
{
    return up(s * (1.0 + (double)(n + 2) * 0x1p-51) + (double)n * 0x1p-1060);
}

static inline double absup(mpfr_srcptr x)
{
    return fabs(mpfr_get_d(x, MPFR_RNDA));
}

static inline double rad_at(const double *r, size_t i)
{
    return r ? r[i] : 0.0;
}

static inline size_t count(const cic_ball *b, int id)
{
    return (size_t)cic_model_run_rows(b->m, id, b->ns) * (size_t)b->m->t[id].cols;
}

/* The norm-wise bound of row `row` of tensor id (0: exact). */
static inline double nrm_at(const cic_ball *b, int id, size_t row)
{
    return b->nrm[id] ? b->nrm[id][row] : 0.0;
}

/* sqrt(sum of the squares of n nonnegative values v[0], v[step], ...),
 * bounded above. */
static inline double norm2_up(const double *v, size_t n, size_t step)
{
    double s = 0;
    size_t i;
    for (i = 0; i < n; i++)
        s += v[i * step] * v[i * step];
    return up(sqrt(bound_sum(s, n)));
}

/* The Lipschitz constant of every activation (GELU in both forms, SiLU,
 * QuickGELU, ReLU): sup |f'| <= 1.15, derived in docs/design.md and
 * checked over a partition in Arb by tests/test_ball_norm.c; and |f(x)| <=
 * |x| for all of them. */
#define CIC_ACT_LIP 1.15

static inline int fail(cic_ball *b, const char *what)
{
    if (!b->failed)
        snprintf(b->why, sizeof b->why, "%s has no error bound", what);
    b->failed = true;
    return 0;
}

/* ---- threads ---- */

/* fn(ctx, lo, hi) over [0, n) in contiguous ranges, one per thread of the
 * MPFR engine run b belongs to (b->nt, at most 16; the caller is one;
 * base/par.h). Each value's bound is computed whole by one thread from its
 * own inputs, so the radii are the same bits for any thread count. */
typedef void (*ball_range_fn)(void *ctx, size_t lo, size_t hi);
typedef struct {
    ball_range_fn fn;
    void *ctx;
} ball_range;

static inline void ball_range_run(void *a, size_t lo, size_t hi, int t)
{
    ball_range *j = a;
    (void)t;
    j->fn(j->ctx, lo, hi);
}

static inline void ball_parallel(const cic_ball *b, size_t n, ball_range_fn fn, void *ctx)
{
    ball_range j = {fn, ctx};
    cic_par_ranges(n, b->nt > 16 ? 16 : b->nt, ball_range_run, &j);
}

static inline void drop_enc(cic_ball *b)
{
    if (b->enc)
        _arb_vec_clear(b->enc, (slong)b->n_enc);
    if (b->enc0)
        _arb_vec_clear(b->enc0, (slong)b->n_enc);
    b->enc = b->enc0 = NULL;
    b->n_enc = 0;
}

/* x = [m +- r] (m exact; the radius rounded up by mag_set_d) */
static inline void ball_set(arb_t x, mpfr_srcptr m, double r)
{
    arf_set_mpfr(arb_midref(x), m);
    mag_set_d(arb_radref(x), r);
}

/* An upper bound of |y - e| for every point e of the enclosure. */
static inline double dist_up(const arb_t e, mpfr_srcptr y, slong prec)
{
    arb_t t;
    arf_t yf, ub;
    double d;
    arb_init(t);
    arf_init(yf);
    arf_init(ub);
    arf_set_mpfr(yf, y);
    arb_sub_arf(t, e, yf, prec);
    arb_get_abs_ubound_arf(ub, t, prec);
    d = arf_get_d(ub, ARF_RND_UP);
    arb_clear(t);
    arf_clear(yf);
    arf_clear(ub);
    return isfinite(d) ? d : INFINITY;
}

/* The op's enclosures (n values); with the norm-wise bound on, a second
 * set for the function of the midpoints alone (enc0). */
static inline arb_ptr enc_make(cic_ball *b, size_t n)
{
    drop_enc(b);
    b->enc = _arb_vec_init((slong)n);
    if (b->nb)
        b->enc0 = _arb_vec_init((slong)n);
    b->n_enc = n;
    return b->enc;
}

/* ---- the ball rules ---- */

/* An op kind's ball rule: pre runs before its kernel (the inputs' midpoints
 * at hand through mid), post after it (the output's midpoints y); both
 * write the radii of the op's output into b->next (zeroed, its size).
 * 0, or -1 when memory runs out; a rule that cannot bound an op marks the
 * ball failed (fail) and returns 0. Work done inside the kernel (RoPE's
 * table, attention's rows: mp_ball.h) is the kernel's call. */
typedef struct {
    int (*pre)(cic_ball *b, const cic_op *o, cic_ball_mid_fn mid, void *ctx);
    int (*post)(cic_ball *b, const cic_op *o, const mpfr_t *y);
} cic_ball_rule;

/* Rules ops share (mp_ball_rule.c): nothing to do, no bound known (the
 * ball fails, the run says why), and post: the radii are the distances
 * from the output to the enclosures pre made (b->enc, n_enc). */
int _cic_ball_pre_none(cic_ball *b, const cic_op *o, cic_ball_mid_fn mid, void *ctx);
int _cic_ball_pre_unbounded(cic_ball *b, const cic_op *o, cic_ball_mid_fn mid, void *ctx);
int _cic_ball_post_none(cic_ball *b, const cic_op *o, const mpfr_t *y);
int _cic_ball_post_enc(cic_ball *b, const cic_op *o, const mpfr_t *y);

/* The norm-wise bound (mp_ball_norm.c): settle op o's output (its e per
 * row, the radii cut to it) after its rule; and the 2-norm per row of the
 * distances from y to the enclosures of the function of the midpoints
 * (b->enc0), the op's own roundings, into rho. 0, or -1 out of memory. */
int _cic_nb_finish(cic_ball *b, const cic_op *o);
int _cic_nb_rho(const cic_ball *b, const mpfr_t *y, size_t rows, size_t cols, double *rho);

/* The pairs (mp_ball_lin.c): p holds rows rows and, when nD > 0, nD
 * scale bounds, for tensor id (-1 when memory runs out); freed by
 * _cic_ball_pair_free. _cic_ball_scaled_sigma: into sg[s] for each
 * sample s, a proven upper bound of ||W diag(D_s)||_2 (cols) or ||diag(D_s)
 * W||_2 (!cols) for weight w and the bounds D (b->ns rows of one per
 * column, or row, of W), INFINITY when there is none: one spectral norm
 * per sample (a shard of some samples bounds them as the whole run). */
int _cic_ball_pair_set(ball_pair *p, int id, size_t rows, size_t nD);
void _cic_ball_pair_free(ball_pair *p);
void _cic_ball_scaled_sigma(cic_ball *b, int w, const double *D, bool cols, double *sg);

/* A pair's candidate against the op's own (cand): sp e_x + f ||rest|| +
 * own, sp the pair's spectral norm (INFINITY: none), f the other op's
 * factor (sigma_W, or the gate's largest D); the smaller of the two. */
static inline double _cic_ball_pair_cand(double cand, double sp, double ex, double f,
                                         double rest, double own)
{
    double pc;
    if (!(sp < INFINITY))
        return cand;
    pc = up(up(up(sp * ex) + up(f * rest)) + own);
    return pc < cand ? pc : cand;
}

/* One rule per op kind of CIC_OPS (op.h), each defined with its family;
 * mp_ball.c's table names _cic_ball_rule_<op> for every op kind. Listed
 * here by hand, not generated from CIC_OPS, so that an op kind added
 * without its rule is a compile error (an undeclared name in the table),
 * not a silent hole that would leave every truth unproven. */
extern const cic_ball_rule _cic_ball_rule_linear;     /* mp_ball_lin.c */
extern const cic_ball_rule _cic_ball_rule_norm;       /* mp_ball_enc.c */
extern const cic_ball_rule _cic_ball_rule_attn;       /* mp_ball_attn.c */
extern const cic_ball_rule _cic_ball_rule_act;        /* mp_ball_enc.c */
extern const cic_ball_rule _cic_ball_rule_glu;        /* mp_ball_enc.c */
extern const cic_ball_rule _cic_ball_rule_add;        /* mp_ball_elem.c */
extern const cic_ball_rule _cic_ball_rule_modulate;   /* mp_ball_elem.c */
extern const cic_ball_rule _cic_ball_rule_gate;       /* mp_ball_elem.c */
extern const cic_ball_rule _cic_ball_rule_center;     /* mp_ball_elem.c */
extern const cic_ball_rule _cic_ball_rule_fwht;       /* mp_ball_rule.c */
extern const cic_ball_rule _cic_ball_rule_fold_in_w;  /* mp_ball_rule.c */
extern const cic_ball_rule _cic_ball_rule_fold_in_b;  /* mp_ball_rule.c */
extern const cic_ball_rule _cic_ball_rule_fold_out_w; /* mp_ball_rule.c */
extern const cic_ball_rule _cic_ball_rule_fold_out_b; /* mp_ball_rule.c */
extern const cic_ball_rule _cic_ball_rule_rope;       /* mp_ball_elem.c */

#endif
