/* SPDX-License-Identifier: MIT */
/* flops_dit.c: closed-form FLOP formulas of the dit (adaLN) block and its
 * rotation strategies (flops.h, DESIGN.md section 3). Derived from the
 * adaLN spec's op list only, never from the graph builder, each op costed
 * by the op table's formula (model/op.h), so that agreement with the
 * engines' counters checks which ops the graph has and how many.
 *
 * Notation: d = d_model, m = d_mlp, dc = d_cond, N tokens per sample, B
 * samples, R = B N rows, H heads, dh = d / H, L layers, dout head width.
 * Costs: multiply-add 2; add, sub, mul, div, sqrt, compare, each
 * exp/erf/tanh call 1. Every count is an integer below 2^53 for the sizes a
 * case allows at the table's sizes, so doubles hold them exactly. */
#include "flops.h"

#include "../xform/kinds.h"
#include "../xform/qmat.h"

#include <math.h>
#include <string.h>

const cic_dit_strategy CIC_DIT_STRATEGIES[CIC_DIT_STRATEGY_COUNT] = {
    {"online-dense", CIC_XFORM_ONLINE_UNROTATE, CIC_STREAM_CENTERED, false},
    {"online-fast", CIC_XFORM_ONLINE_UNROTATE, CIC_STREAM_CENTERED, true},
    {"per-sample-fold", CIC_XFORM_PER_SAMPLE_FOLD, CIC_STREAM_CENTERED, false},
    {"branch-dense", CIC_XFORM_BRANCH_ROTATE, CIC_STREAM_CENTERED, false},
    {"branch-fast", CIC_XFORM_BRANCH_ROTATE, CIC_STREAM_CENTERED, true},
    {"static-fold", CIC_XFORM_STATIC_FOLD, CIC_STREAM_CENTERED, false},
};

/* LINEAR: R rows, in k, out n, optional bias. */
static double lin(double R, double k, double n, bool bias)
{
    return cic_op_flops_linear(R, k, n, bias);
}

/* NORM over R rows of width d, no gain, no bias: LN0 (center) or RMS0. */
static double norm0(double R, double d, bool center)
{
    return cic_op_flops_norm(R, d, center, false, false);
}

void cic_flops_dit(cic_flop_count *fc, const cic_model_cfg *cfg, const cic_xform_spec *x)
{
    double d = cfg->d_model, m = cfg->d_mlp, dc = cfg->d_cond, dout = cfg->d_out;
    double N = cfg->tokens, B = cfg->samples, R = N * B, H = cfg->heads;
    double dh = d / H, L = cfg->layers;
    bool fin = cfg->final_layer;
    bool centered = x && x->stream == CIC_STREAM_CENTERED;
    /* per layer, original graph */
    double mod_layer = lin(B, dc, 6 * d, true);
    double mod_once = cic_op_flops_elementwise_act(CIC_ACT_SILU, B * dc) /* SiLU(c) */ +
                      (fin ? lin(B, dc, 2 * d, true) : 0);
    double ln0 = norm0(R, d, true), mdl = cic_op_flops_modulate(B, R, d);
    double add = cic_op_flops_add(R * d), gate = cic_op_flops_gate(R, d) + add;
    cic_dit_flops f;
    f.R = R;
    f.B = B;
    f.centered = centered;
    /* the norm of a rotated stream: RMS0 when centered, LN0 when the Q is
     * mean-preserving */
    f.nrm = norm0(R, d, !centered);
    f.mdl = mdl;
    f.head = lin(R, d, dout, true);
    f.add = add;
    f.attn = lin(R, d, 3 * d, true) + cic_op_flops_attn(B, H, N, dh, cfg->causal) +
             lin(R, d, d, true);
    f.mlp = lin(R, d, m, true) + cic_op_flops_elementwise_act(cfg->act, R * m) +
            lin(R, m, d, true);
    f.n1 = f.n2 = ln0 + mdl;
    f.g1 = f.g2 = gate;
    f.final = ln0 + mdl + f.head;
    f.mod = L * mod_layer + mod_once;
    /* the strategy's rewrite of the original graph's costs */
    if (x && cic_xform_desc_of(x->kind)->flops_dit)
        cic_xform_desc_of(x->kind)->flops_dit(&f, cfg, x);

    memset(fc, 0, sizeof *fc);
    fc->site[CIC_SITE_INPUT] = 0;
    fc->site[CIC_SITE_MOD] = f.mod;
    fc->site[CIC_SITE_NORM1] = L * f.n1;
    fc->site[CIC_SITE_ATTN] = L * f.attn;
    fc->site[CIC_SITE_GATE1] = L * f.g1;
    fc->site[CIC_SITE_NORM2] = L * f.n2;
    fc->site[CIC_SITE_MLP] = L * f.mlp;
    fc->site[CIC_SITE_GATE2] = L * f.g2;
    fc->site[CIC_SITE_FINAL] = fin ? f.final : 0;
}

/* Whether kind rotates the MLP width too (its descriptor's Q widths). */
static bool rotates_mlp(enum cic_xform_kind kind)
{
    return (cic_xform_desc_of(kind)->q_widths & CIC_XW_MLP) != 0;
}

/* Whether a rotation of kind, fast or not, with base order hb (0:
 * automatic) has its Hadamard matrices: d, and m for a kind that rotates
 * the MLP width (branch-rotate). */
static bool fast_fits(const cic_model_cfg *cfg, enum cic_xform_kind kind, bool fast, int hb)
{
    if (!fast)
        return true;
    if (!cic_q_hadamard_k_supported(cfg->d_model, hb))
        return false;
    return !rotates_mlp(kind) || cic_q_hadamard_k_supported(cfg->d_mlp, hb);
}

/* Whether transform x's fast transforms have matrices (groups and regular
 * Hadamards as cic_xform_check allows them). */
static bool xform_fits(const cic_model_cfg *cfg, const cic_xform_spec *x)
{
    bool br = rotates_mlp(x->kind);
    if (!x->fast || x->group > 0)
        return true;
    if (x->q == CIC_Q_REGULAR)
        return cic_regular_order_k(cfg->d_model) && (!br || cic_regular_order_k(cfg->d_mlp));
    return fast_fits(cfg, x->kind, true, x->q == CIC_Q_HADAMARD ? x->hadamard_base : 0);
}

bool cic_dit_strategy_applies(const cic_model_cfg *cfg, const cic_dit_strategy *s)
{
    return fast_fits(cfg, s->kind, s->fast, 0);
}

/* The spec a strategy stands for (a Hadamard Q, automatic base). */
static cic_xform_spec strategy_spec(const cic_dit_strategy *s)
{
    cic_xform_spec x;
    memset(&x, 0, sizeof x);
    x.kind = s->kind;
    x.stream = s->stream;
    x.fast = s->fast;
    x.q = CIC_Q_HADAMARD;
    x.after = -1;
    return x;
}

static double total(const cic_model_cfg *cfg, const cic_xform_spec *x)
{
    cic_flop_count fc;
    cic_flops_dit(&fc, cfg, x);
    return cic_flop_total(&fc);
}

/* Extra FLOPs of x over the original graph, B = 1, N = tokens. */
static double extra_x(const cic_model_cfg *cfg, const cic_xform_spec *x, int tokens,
                      double *base)
{
    cic_model_cfg c = *cfg;
    double b;
    c.samples = 1;
    c.tokens = tokens;
    b = total(&c, NULL);
    if (base)
        *base = b;
    return total(&c, x) - b;
}

static double extra(const cic_model_cfg *cfg, const cic_dit_strategy *s, int tokens,
                    double *base)
{
    cic_xform_spec x = strategy_spec(s);
    return extra_x(cfg, &x, tokens, base);
}

double cic_flops_dit_extra_pct(const cic_model_cfg *cfg, const cic_dit_strategy *s,
                               int tokens)
{
    double base, e;
    if (!cic_dit_strategy_applies(cfg, s))
        return NAN;
    e = extra(cfg, s, tokens, &base);
    return 100 * e / base;
}

/* The same for a transform x of the case, with its own hadamard_base (the
 * strategies of the table have the automatic one). */
static double xform_extra_pct(const cic_model_cfg *cfg, const cic_xform_spec *x, int tokens)
{
    double base, e;
    if (!xform_fits(cfg, x))
        return NAN;
    e = extra_x(cfg, x, tokens, &base);
    return 100 * e / base;
}

/* With B = 1 every extra is affine in N (attention, the only N^2 term, is the
 * same in every strategy and cancels): extra(N) = c0 + N e. Two evaluations
 * give c0 and e exactly (integers). */
static void affine(const cic_model_cfg *cfg, const cic_dit_strategy *s, double *c0,
                   double *e)
{
    double x1 = extra(cfg, s, 1, NULL), x2 = extra(cfg, s, 2, NULL);
    *e = x2 - x1;
    *c0 = x1 - *e;
}

static double nstar(const cic_model_cfg *cfg, const cic_dit_strategy *online)
{
    double F, ef, co, eo;
    affine(cfg, &CIC_DIT_STRATEGIES[2], &F, &ef);
    affine(cfg, online, &co, &eo);
    /* co is 0 for online-unrotate (no per-sample work); kept for exactness */
    F -= co;
    if (eo - ef <= 0)
        return F <= 0 ? 0 : INFINITY;
    return F / (eo - ef);
}

int cic_flops_dit_crossover(double *nstar_dense, double *nstar_fast,
                            const cic_model_cfg *cfg)
{
    *nstar_dense = nstar(cfg, &CIC_DIT_STRATEGIES[0]);
    *nstar_fast = cic_dit_strategy_applies(cfg, &CIC_DIT_STRATEGIES[1])
                      ? nstar(cfg, &CIC_DIT_STRATEGIES[1])
                      : NAN;
    return 0;
}

const int CIC_DIT_TABLE_TOKENS[CIC_DIT_TABLE_N] = {16, 64, 256, 1024, 4096, 16384, 65536};

bool cic_dit_flops_table_fill(cic_dit_flops_table *t, const cic_xform_chain *ch)
{
    const cic_model_cfg *m = ch->model;
    int j, k;

    memset(t, 0, sizeof *t);
    if (cic_block(m->block)->norm != CIC_NORM_ADALN)
        return false;
    t->cfg = *m;
    memcpy(t->tokens, CIC_DIT_TABLE_TOKENS, sizeof t->tokens);
    for (j = 0; j < CIC_DIT_STRATEGY_COUNT; j++) {
        t->label[j] = CIC_DIT_STRATEGIES[j].label;
        for (k = 0; k < CIC_DIT_TABLE_N; k++)
            t->pct[j][k] = cic_flops_dit_extra_pct(m, &CIC_DIT_STRATEGIES[j], t->tokens[k]);
    }
    t->n_xf = ch->n < CIC_MAX_XFORMS ? ch->n : CIC_MAX_XFORMS;
    for (j = 0; j < t->n_xf; j++) {
        for (k = 0; k < CIC_DIT_TABLE_N; k++)
            t->xf_pct[j][k] = xform_extra_pct(m, &ch->xf[j], t->tokens[k]);
    }
    cic_flops_dit_crossover(&t->nstar_dense, &t->nstar_fast, m);
    return true;
}
