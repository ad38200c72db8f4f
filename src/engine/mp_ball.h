/* SPDX-License-Identifier: MIT */
/* mp_ball.h: rigorous error bounds for the MPFR engine (midpoint-radius
 * arithmetic, as in Arb). With a ball run every activation value the engine
 * computes (the midpoint, bit for bit what a plain run computes) carries a
 * radius in double, rounded up, such that the exact value of the model's
 * formula lies within radius of the midpoint. Weights and inputs are exact
 * (their values as stored). The radius of each op's outputs is bounded from
 * its inputs' balls and the op's own roundings:
 *   - dot products (linear layers, attention scores, P V): the correctly
 *     rounded result is within 2^-p of the exact sum of the midpoints, and
 *     the inputs' radii add sum |w| r (a float32 OpenBLAS product of |W| and
 *     the scaled radii, bounded by the summation error of any order), or
 *     for two balls sum |a| r_b + r_a (|b| + r_b);
 *   - softmax: the exact probabilities of balls of scores lie within
 *     exp(r_j + max r) of the midpoint's, and the engine's roundings of
 *     exp, sum and division are bounded analytically;
 *   - norms and activations (sqrt, division, exp, erf, tanh): Arb encloses
 *     the exact function of the input balls, and the radius is the distance
 *     from the engine's midpoint to that enclosure, bounded above;
 *   - adds, gates, modulation, centring and RoPE (its cos and sin enclosed
 *     by Arb): first-order bounds with every second-order term kept.
 * A ball whose radius is not finite proves nothing. Every op kind has its
 * ball rule (mp_ball_int.h; the op list, op.h, does not compile without
 * it); the ops a transform adds (FWHT, FOLD_*) name the rule that bounds
 * nothing: the run then reports why and no radius. */
#ifndef CIC_MP_BALL_H
#define CIC_MP_BALL_H

#include "../model/model.h"

#include <mpfr.h>
#include <stdbool.h>

typedef struct cic_ball cic_ball;

/* What a ball run gives back: the output's radii (the caller's array of
 * the output's size) and, when the run could not bound them, why; and what
 * the caller asks of it. */
typedef struct cic_ball_out {
    double *rad;
    bool failed;
    char why[160];
    /* out, when not NULL: the norm-wise bound of each output row (one per
     * row of the run: an upper bound of the 2-norm of exact - midpoints) */
    double *nrm;
    /* in: the elementwise radii alone, without the norm-wise bound (the
     * benchmark's comparison; the default carries both, docs/design.md) */
    bool elementwise;
    /* in (tests): the block input's values are not exact but balls: each
     * value within in_rad, each row within in_nrm in the 2-norm (both 0:
     * exact, the default) */
    double in_rad, in_nrm;
    /* out, when not NULL (n_layers entries, the caller's): the largest
     * radius / |midpoint| of each block's output (the tensor the last op of
     * layer L writes), over its nonzero midpoints; INFINITY when a value
     * of it has no finite radius (a block without ops: 0) */
    double *layer_rel;
    int n_layers;
} cic_ball_out;

/* The midpoints of tensor id (the engine's values), for the hooks. */
typedef const mpfr_t *(*cic_ball_mid_fn)(void *ctx, int id);

/* A ball run of m at prec over ns samples, its bounds split over threads
 * threads (the engine run's). NULL when memory runs out. */
cic_ball *cic_ball_create(const cic_model *m, mpfr_prec_t prec, int ns, int threads);
/* What the caller asks (o->elementwise, o->in_rad, o->in_nrm), before the
 * first op. 0, or -1 when memory runs out. */
int cic_ball_config(cic_ball *b, const cic_ball_out *o);
void cic_ball_destroy(cic_ball *b);

/* Before op o's kernel runs (its inputs intact): the bounds that need the
 * inputs' midpoints. After it: those that need the output's. 0, or -1 when
 * memory runs out; an op whose rule bounds nothing marks the ball failed
 * (0). */
int cic_ball_pre(cic_ball *b, const cic_op *o, cic_ball_mid_fn mid, void *ctx);
int cic_ball_post(cic_ball *b, const cic_op *o, const mpfr_t *y);
/* Tensor id is dead: its radii go. */
void cic_ball_drop(cic_ball *b, int id);
/* The result: the radii of tensor id into out (n values), or the failure. */
void cic_ball_result(const cic_ball *b, int id, size_t n, cic_ball_out *out);

/* Attention, inside the engine's head loop: per query row, the scores
 * (before the softmax) are handed over, then the probabilities once the
 * row's P V is done. scratch: cic_ball_attn_scratch doubles per thread. */
size_t cic_ball_attn_scratch(const cic_model *m);
void cic_ball_attn_scores(const cic_ball *b, double *scratch, const mpfr_t *p, int cnt);
void cic_ball_attn_row(const cic_ball *b, double *scratch, int s, int h, int i,
                       const mpfr_t *p, int cnt);

/* RoPE, after the engine built its cos/sin table cs (as real_rope_table:
 * cs[2 (pos half + i)] = cos, + 1 = sin) and before it rotates x. */
int cic_ball_rope(cic_ball *b, const cic_op *o, const mpfr_t *cs, const mpfr_t *x);

/* The radii of rows x cols values x after x - rowmean(x) as
 * cic_mpvec_center_rows computes it (x before the centring). */
void cic_ball_center_rows(double *rad, const mpfr_t *x, size_t rows, size_t cols,
                          mpfr_prec_t prec);

/* A value is proven when its whole ball rounds to one binary32 (RN).
 * Returns the count proven among n; ok[i] (may be NULL) says which, and
 * *maxrel the largest rad / |mid| over nonzero midpoints. */
size_t cic_ball_prove(const mpfr_t *mid, const double *rad, size_t n, unsigned char *ok,
                      double *maxrel);

/* The activations' rule by the mean value theorem (mp_ball_enc.c): the
 * table of upper bounds of |f'| of activation a over bins of width 2^-6
 * of [-16, 16), made on first use and kept for the process; NULL for ReLU
 * (its ball rule is exact) or when memory runs out. */
const double *_cic_ball_deriv_table(enum cic_act a);
/* An upper bound of |f'| over [lo, hi] from that table, or -1 when it has
 * none (the interval leaves [-16, 16), spans more than 8 bins or is not
 * one). */
double _cic_ball_deriv_up(const double *tab, double lo, double hi);
/* An upper bound of |y - f(m)|: the MPFR kernel's own roundings in its
 * value y of activation a (GELU, its tanh form, SiLU) at the exact m, |m|
 * < 16, y at prec >= 53 bits (mp_ball_own.c); -1 when it has none there
 * (other activations, precisions or arguments: Arb's enclosure of f(m)
 * then). */
double _cic_ball_act_own(enum cic_act a, mpfr_srcptr m, mpfr_srcptr y, mpfr_prec_t prec);
/* Whether it has one for a at m (from m and prec alone). */
bool _cic_ball_act_own_takes(enum cic_act a, mpfr_srcptr m, mpfr_prec_t prec);

#endif
