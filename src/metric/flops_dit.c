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

/* Online rotation of R rows of width w as transform x builds it: the fast
 * randomized Hadamard (FWHT of base order K, from x's hadamard_base, 0
 * automatic; a width with no Hadamard construction counts as K = 1, see
 * cic_op_flops_fwht; the regular Hadamard's FWHT for q = regular-hadamard)
 * or a dense LINEAR without bias; with groups (branch-rotate's group = G)
 * the same on each block of G of every row. */
static double rot(double R, int w, const cic_xform_spec *x)
{
    int G = x->kind == CIC_XFORM_BRANCH_ROTATE && x->group > 0 ? x->group : w;
    int hb = x->q == CIC_Q_HADAMARD ? x->hadamard_base : 0;
    double Rb = R * (double)(w / G);
    if (x->fast && x->q == CIC_Q_REGULAR)
        return cic_op_flops_fwht_regular(Rb, G);
    if (x->fast)
        return cic_op_flops_fwht(Rb, G, cic_hadamard_base_order_k(G, hb));
    return lin(Rb, G, G, false);
}

/* Per-sample folds of a reader W [n out, d in] (FOLD_IN_W + FOLD_IN_B) and
 * of a writer W [d out, k in] (FOLD_OUT_W + FOLD_OUT_B), over B samples. */
static double fold_in(double B, double d, double n)
{
    return cic_op_flops_fold_in_w(B, n, d) + cic_op_flops_fold_in_b(B, n, d);
}

static double fold_out(double B, double d, double k, bool centered)
{
    return cic_op_flops_fold_out_w(B, d, k, centered) + cic_op_flops_fold_out_b(B, d, centered);
}

void cic_flops_dit(cic_flop_count *fc, const cic_model_cfg *cfg, const cic_xform_spec *x)
{
    double d = cfg->d_model, m = cfg->d_mlp, dc = cfg->d_cond, dout = cfg->d_out;
    double N = cfg->tokens, B = cfg->samples, R = N * B, H = cfg->heads;
    double dh = d / H, L = cfg->layers;
    bool fin = cfg->final_layer;
    enum cic_xform_kind k = x ? x->kind : CIC_XFORM_COUNT; /* COUNT: original */
    bool centered = x && x->stream == CIC_STREAM_CENTERED;
    /* per layer, original graph */
    double mod_layer = lin(B, dc, 6 * d, true);
    double mod_once = cic_op_flops_elementwise_act(CIC_ACT_SILU, B * dc) /* SiLU(c) */ +
                      (fin ? lin(B, dc, 2 * d, true) : 0);
    double ln0 = norm0(R, d, true), mdl = cic_op_flops_modulate(B, R, d);
    double attn = lin(R, d, 3 * d, true) + cic_op_flops_attn(B, H, N, dh, cfg->causal) +
                  lin(R, d, d, true);
    double mlp = lin(R, d, m, true) + cic_op_flops_elementwise_act(cfg->act, R * m) +
                 lin(R, m, d, true);
    double add = cic_op_flops_add(R * d), gate = cic_op_flops_gate(R, d) + add;
    double head = lin(R, d, dout, true);
    double n1 = ln0 + mdl, n2 = n1;
    double g1 = gate, g2 = gate;
    double final = ln0 + mdl + head;
    double mod = L * mod_layer + mod_once;
    /* the norm of a rotated stream: RMS0 when centered, LN0 when the Q is
     * mean-preserving */
    double nrm = norm0(R, d, !centered);

    memset(fc, 0, sizeof *fc);
    switch (k) {
    case CIC_XFORM_ONLINE_UNROTATE:
        n1 = n2 = nrm + rot(R, cfg->d_model, x) + mdl;
        final = nrm + rot(R, cfg->d_model, x) + mdl + head;
        g1 = g2 = cic_op_flops_gate(R, d) + (centered ? cic_op_flops_center(R, d) : 0) +
                  rot(R, cfg->d_model, x) + add;
        break;
    case CIC_XFORM_PER_SAMPLE_FOLD:
        n1 = nrm + fold_in(B, d, 3 * d);
        n2 = nrm + fold_in(B, d, m);
        final = nrm + fold_in(B, d, dout) + head;
        g1 = fold_out(B, d, d, centered) + add;
        g2 = fold_out(B, d, m, centered) + add;
        break;
    case CIC_XFORM_STATIC_FOLD:
        mod = 0;
        n1 = n2 = nrm;
        final = nrm + head;
        g1 = g2 = add;
        break;
    case CIC_XFORM_BRANCH_ROTATE:
        attn += rot(R, cfg->d_model, x) /* before qkv */ +
                rot(R, cfg->d_model, x) /* before proj */;
        mlp += rot(R, cfg->d_model, x) /* before fc1 */ + rot(R, cfg->d_mlp, x) /* before fc2 */;
        final += rot(R, cfg->d_model, x); /* before the final linear */
        break;
    default: /* the original graph */
        break;
    }
    fc->site[CIC_SITE_INPUT] = 0;
    fc->site[CIC_SITE_MOD] = mod;
    fc->site[CIC_SITE_NORM1] = L * n1;
    fc->site[CIC_SITE_ATTN] = L * attn;
    fc->site[CIC_SITE_GATE1] = L * g1;
    fc->site[CIC_SITE_NORM2] = L * n2;
    fc->site[CIC_SITE_MLP] = L * mlp;
    fc->site[CIC_SITE_GATE2] = L * g2;
    fc->site[CIC_SITE_FINAL] = fin ? final : 0;
}

/* Whether a rotation of kind, fast or not, with base order hb (0:
 * automatic) has its Hadamard matrices: d, and m for branch-rotate. */
static bool fast_fits(const cic_model_cfg *cfg, enum cic_xform_kind kind, bool fast, int hb)
{
    if (!fast)
        return true;
    if (!cic_q_hadamard_k_supported(cfg->d_model, hb))
        return false;
    return kind != CIC_XFORM_BRANCH_ROTATE || cic_q_hadamard_k_supported(cfg->d_mlp, hb);
}

/* Whether transform x's fast transforms have matrices (groups and regular
 * Hadamards as cic_xform_check allows them). */
static bool xform_fits(const cic_model_cfg *cfg, const cic_xform_spec *x)
{
    bool br = x->kind == CIC_XFORM_BRANCH_ROTATE;
    if (!x->fast || (br && x->group > 0))
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

bool cic_dit_flops_table_fill(cic_dit_flops_table *t, const cic_case *c)
{
    const cic_model_cfg *m = &c->model;
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
    t->n_xf = c->n_xf < CIC_MAX_XFORMS ? c->n_xf : CIC_MAX_XFORMS;
    for (j = 0; j < t->n_xf; j++) {
        for (k = 0; k < CIC_DIT_TABLE_N; k++)
            t->xf_pct[j][k] = xform_extra_pct(m, &c->xf[j], t->tokens[k]);
    }
    cic_flops_dit_crossover(&t->nstar_dense, &t->nstar_fast, m);
    return true;
}
