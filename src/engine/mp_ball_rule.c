/* SPDX-License-Identifier: MIT */
/* mp_ball_rule.c: the ball rules several op kinds share (mp_ball_int.h),
 * and the rules of the ops a transform adds (the fast Hadamard, the folds
 * per sample), which have no bound yet: a ball run through one proves
 * nothing and says why. */
#include "mp_ball_int.h"

int _cic_ball_pre_none(cic_ball *b, const cic_op *o, cic_ball_mid_fn mid, void *ctx)
{
    (void)b;
    (void)o;
    (void)mid;
    (void)ctx;
    return 0;
}

int _cic_ball_pre_unbounded(cic_ball *b, const cic_op *o, cic_ball_mid_fn mid, void *ctx)
{
    (void)o;
    (void)mid;
    (void)ctx;
    return fail(b, "an op a transform adds (the fast Hadamard, a fold per sample)");
}

int _cic_ball_post_none(cic_ball *b, const cic_op *o, const mpfr_t *y)
{
    (void)b;
    (void)o;
    (void)y;
    return 0;
}

/* After the kernel: each radius is the distance to the enclosure. */
typedef struct {
    cic_ball *b;
    const mpfr_t *y;
} enc_job;

static void enc_range(void *c, size_t lo, size_t hi)
{
    const enc_job *J = c;
    size_t j;
    for (j = lo; j < hi; j++)
        J->b->next[j] = dist_up(J->b->enc + j, J->y[j], (slong)J->b->prec);
}

int _cic_ball_post_enc(cic_ball *b, const cic_op *o, const mpfr_t *y)
{
    enc_job J = {b, y};
    (void)o;
    ball_parallel(b, b->n_enc, enc_range, &J);
    drop_enc(b);
    return 0;
}

const cic_ball_rule _cic_ball_rule_fwht = {.pre = _cic_ball_pre_unbounded,
                                           .post = _cic_ball_post_none};
const cic_ball_rule _cic_ball_rule_fold_in_w = {.pre = _cic_ball_pre_unbounded,
                                                .post = _cic_ball_post_none};
const cic_ball_rule _cic_ball_rule_fold_in_b = {.pre = _cic_ball_pre_unbounded,
                                                .post = _cic_ball_post_none};
const cic_ball_rule _cic_ball_rule_fold_out_w = {.pre = _cic_ball_pre_unbounded,
                                                 .post = _cic_ball_post_none};
const cic_ball_rule _cic_ball_rule_fold_out_b = {.pre = _cic_ball_pre_unbounded,
                                                 .post = _cic_ball_post_none};
