/* SPDX-License-Identifier: MIT */
/* op.h: the op table, one entry per kind of op a graph holds. Each op kind
 * has
 *   - its place in CIC_OPS (enum constant, name, the inputs its output may
 *     overwrite);
 *   - its shape check, cic_op_check_<op>: what every engine's kernel
 *     assumes about the op's tensors (which slots are set, roles, widths,
 *     rows). cic_model_check (op.c) runs it for every op of a graph before
 *     an engine walks it, so the kernels trust their input;
 *   - its FLOP formula: cic_op_flops_<op> in terms of sizes (what the
 *     closed forms of src/metric add up from the block equations), and
 *     cic_op_cost_<op>, the same formula on the op's tensors for the rows of
 *     a run (what the engines book at the op's site);
 *   - one kernel per engine, with the same prototype in each engine: the
 *     f32/f64 template src/engine/engine_real.h (real_<op>) and the MPFR
 *     reference (_cic_mpk_<op>, declared in src/engine/engine_mpfr_int.h,
 *     defined in engine_mpfr_lin.c, _attn.c or _elem.c);
 *   - its ball rule, _cic_ball_rule_<op> (src/engine/mp_ball_int.h): how a
 *     ball run bounds the error of the op's outputs, so that the MPFR truth
 *     is proven. Required (the rule table does not compile without it): a
 *     run through an op the ball cannot bound proves no truth. An op that
 *     needs no work before or after its kernel names the shared rules
 *     (_cic_ball_pre_none, _cic_ball_post_none); one that cannot be
 *     bounded yet names _cic_ball_pre_unbounded, and a ball run through
 *     it says so.
 * Adding an op kind: a line in CIC_OPS, its check, formula and cost below,
 * its two kernels and its ball rule (the MPFR kernel and the rule declared
 * by hand in their internal headers, defined with their family). Every
 * table (names, descriptors, kernels, ball rules) is built from CIC_OPS
 * with designated initializers [CIC_OP_<ENUM>], so a missing function or
 * rule is a compile error.
 *
 * FLOP convention (engine.h): a multiply-add is 2 FLOPs; add, sub, mul,
 * div, sqrt, compare and each exp/erf/tanh call 1; the cos and sin of
 * RoPE are a precomputed table (cic_op_flops_rope). Every count is an
 * integer, exact in a double for the sizes a case allows (below 2^53).
 *
 * Included at the end of model.h (the graph types come first); include
 * model.h. */
#ifndef CIC_OP_H
#define CIC_OP_H

#include "model.h"

#include "../base/base.h"

#include <math.h>
#include <stdbool.h>
#include <stddef.h>

/* X(ENUM, fn, name, alias): op kind CIC_OP_ENUM, functions *_fn, its name
 * in messages and dumps, and alias: the output may be written over in[0 ..
 * alias-1] (the same shape; every kernel reads each value there before it
 * writes the output value at its place). Rows R of a run: tokens of its
 * samples; a "mod" tensor holds one row per sample (dit) and in_col[] picks
 * a chunk of d columns (shift, scale or gate) out of it. */
#define CIC_OPS(X)                                                              \
    X(LINEAR, linear, "linear", 0)         /* out[R,n] = in[R,k] W^T (+ b)     */ \
    X(NORM, norm, "norm", 1)               /* LayerNorm / RMSNorm (g, b)       */ \
    X(ATTN, attn, "attn", 0)               /* heads from q, k, v column views  */ \
    X(ACT, act, "act", 1)                  /* out = act(in)                    */ \
    X(GLU, glu, "glu", 2)                  /* out = act(in[0]) * in[1]         */ \
    X(ADD, add, "add", 2)                  /* out = in[0] + in[1]              */ \
    X(MODULATE, modulate, "modulate", 1)   /* in[0] (1 + scale) + shift        */ \
    X(GATE, gate, "gate", 1)               /* out = gate * in[0]               */ \
    X(CENTER, center, "center", 1)         /* out = in[0] - rowmean(in[0])     */ \
    X(FWHT, fwht, "fwht", 1)               /* out = in[0] Q, or Q^T            */ \
    X(FOLD_IN_W, fold_in_w, "fold-in-w", 0)    /* W diag(1 + scale) Q, per sample */ \
    X(FOLD_IN_B, fold_in_b, "fold-in-b", 0)    /* b + W shift, per sample         */ \
    X(FOLD_OUT_W, fold_out_w, "fold-out-w", 0) /* Q^T C diag(gate) W, per sample  */ \
    X(FOLD_OUT_B, fold_out_b, "fold-out-b", 0) /* Q^T C (gate * b), per sample    */ \
    X(ROPE, rope, "rope", 1)               /* rotary position embedding        */

enum cic_op_kind {
#define CIC_OP_ENUM_(E, fn, name, alias) CIC_OP_##E,
    CIC_OPS(CIC_OP_ENUM_)
#undef CIC_OP_ENUM_
    CIC_OP_COUNT
};
extern const char *const CIC_OP_NAME[];

/* Where an op's FLOPs are booked. */
enum cic_site {
    CIC_SITE_INPUT,  /* work on the block input (online transforms) */
    CIC_SITE_MOD,    /* dit: SiLU(c) and the adaLN modulation linears */
    CIC_SITE_NORM1,  /* norm before attention (+ dit modulate, unrotate, fold-in) */
    CIC_SITE_ATTN,   /* qkv, attention, output projection */
    CIC_SITE_GATE1,  /* dit: gate, rotate back, fold-out, residual add */
    CIC_SITE_NORM2,
    CIC_SITE_MLP,
    CIC_SITE_GATE2,
    CIC_SITE_FINAL,  /* final norm (+ modulate) and head */
    CIC_SITE_COUNT
};
extern const char *const CIC_SITE_NAME[];

enum cic_lin_role { CIC_ROLE_OTHER, CIC_ROLE_READER, CIC_ROLE_WRITER };

/* One op. Tensor ids are -1 when absent; which slots an op kind uses is
 * its check's first line. */
struct cic_op {
    enum cic_op_kind kind;
    enum cic_site site;
    int out;
    int in[3];
    int in_col[3];   /* ATTN: first column of q, k, v inside in[i]; MODULATE:
                      * shift, scale; GATE and FOLD_*: the chunk */
    int w, b, g;     /* LINEAR: w, b; NORM: g (weight), b (bias); FWHT: g the
                      * +-1 signs; FOLD_*: w, b, g = Q */
    enum cic_lin_role role;
    int layer;       /* block index, -1 outside blocks */
    bool center;     /* NORM: subtract the mean (LayerNorm); FOLD_OUT_*: C */
    float eps;       /* NORM: the binary32 eps both engines use */
    enum cic_act act;
    int heads;       /* ATTN: query heads; ROPE: heads in in[0] (head_dim =
                      * its columns / heads) */
    int kv_heads;    /* ATTN: key/value heads, dividing heads (query head h
                      * reads kv head h / (heads / kv_heads)) */
    bool causal;     /* ATTN */
    enum cic_rope rope;  /* ROPE: the layout (half or interleaved) */
    double theta;    /* ROPE: the base; positions are tokens 0 .. N-1 of
                      * each sample */
    bool transpose;  /* FWHT: Q^T */
    bool regular;    /* FWHT: the regular Hadamard (J - 2 I)^(x)k of order
                      * 4^k instead of H_K (x) Sylvester (see real_fwht) */
    int group;       /* FWHT and LINEAR: 0, or the width G of the blocks of a
                      * row the transform applies to one by one (a
                      * block-diagonal rotation; per head, or group-wise;
                      * a LINEAR's weight is then the one [G, G] block) */
    int hbase;       /* FWHT: the order K of the Hadamard base, width K 2^k
                      * (set by the transform that builds the op, from
                      * xform/qmat.h; K = 1 for powers of two) */
};

/* An op of kind at site and layer with no tensors yet (every id -1, every
 * flag off): what builders and rewrites fill in. */
cic_op cic_op_blank(enum cic_op_kind kind, enum cic_site site, int layer);

/* ---- the check of a graph ---- */

/* cic_model_check: 0 when every tensor and op of m is what the engines
 * assume (ids in range, SSA order: each activation written once, by an
 * earlier op than its readers; each op's shape check), else
 * CIC_GRAPH_REFUSED with msg naming the first offending op or tensor and
 * why ("op 7 (linear, layer 0, site attn, output 'act.0.qkv'): weight
 * 'blocks.0.attn.qkv.weight' is 48 x 8, expected n x 16"), or
 * CIC_GRAPH_NOMEM. msg may be NULL (cap 0). */
enum { CIC_GRAPH_OK = 0, CIC_GRAPH_NOMEM = -1, CIC_GRAPH_REFUSED = -2 };
int cic_model_check(const cic_model *m, char *msg, size_t cap);

/* The op under check and where its message goes. */
typedef struct {
    const cic_model *m;
    const cic_op *o;
    int index;   /* of o in m->ops */
    char *msg;
    size_t cap;
} cic_op_check;

/* Helpers of the shape checks (op.c). Each returns 0 when the condition
 * holds, else -1 after writing the message (prefixed with the op). */
int cic_op_refuse(const cic_op_check *c, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Slots of an op, for cic_op_slots. */
enum { CIC_SLOT_IN0 = 1, CIC_SLOT_IN1 = 2, CIC_SLOT_IN2 = 4, CIC_SLOT_W = 8,
       CIC_SLOT_B = 16, CIC_SLOT_G = 32 };
/* Every slot outside used is -1. */
int cic_op_slots(const cic_op_check *c, unsigned used);
/* Tensor id is present and an activation or block input (rows: kind rows,
 * or any when rows < 0) with cols columns (any when cols < 0). */
int cic_op_need_act(const cic_op_check *c, int id, const char *what, int rows, int cols);
/* Tensor id is present and a weight of rows x cols (any when < 0). */
int cic_op_need_weight(const cic_op_check *c, int id, const char *what, int rows, int cols);
/* Tensor id has the rows (kind and rows per sample) of tensor like; and,
 * need_like, its columns too. */
int cic_op_need_rows(const cic_op_check *c, int id, const char *what, int like);
int cic_op_need_like(const cic_op_check *c, int id, const char *what, int like);
/* Columns col .. col + width - 1 of tensor id exist. */
int cic_op_need_view(const cic_op_check *c, int id, const char *what, int col, int width);

/* ---- FLOP formulas (sizes as doubles: R rows, widths, samples) ---- */

/* R rows through a linear from k to n columns: a multiply-add per weight
 * and row, plus one add per output for the bias. */
static inline double cic_op_flops_linear(double R, double k, double n, bool bias)
{
    return 2 * R * n * k + (bias ? R * n : 0);
}

/* R rows of width d: [center: d adds, div, d subs] d muls + d adds (the
 * squares), div, add eps, sqrt, div, d muls (scale), [d muls g], [d adds b]. */
static inline double cic_op_flops_norm(double R, double d, bool center, bool gain, bool bias)
{
    return R * ((center ? 2 * d + 1 : 0) + 3 * d + 4 + (gain ? d : 0) + (bias ? d : 0));
}

/* B samples, H heads of width dh, N tokens: the full N x N score and P V
 * products (masked entries are zeros there), the scaling of every score,
 * and compare, sub, exp, add, div per visible key. */
static inline double cic_op_flops_attn(double B, double H, double N, double dh, bool causal)
{
    double visible = causal ? N * (N + 1) / 2 : N * N;
    return B * H * (4 * N * N * dh + N * N + 5 * visible);
}

/* One activation call (case/act.h). */
static inline double cic_op_flops_act(enum cic_act a)
{
    static const double flops[] = {
#define CIC_ACT_FLOPS_(e, name, f) [CIC_ACT_##e] = f,
        CIC_ACT_LIST(CIC_ACT_FLOPS_)
#undef CIC_ACT_FLOPS_
    };
    CIC_ASSERT((unsigned)a < CIC_ACT_COUNT && "activation kind");
    return flops[a];
}

/* n values: act, or act and a mul (GLU), or an add. */
static inline double cic_op_flops_elementwise_act(enum cic_act a, double n)
{
    return cic_op_flops_act(a) * n;
}
static inline double cic_op_flops_glu(enum cic_act a, double n)
{
    return (cic_op_flops_act(a) + 1) * n;
}
static inline double cic_op_flops_add(double n)
{
    return n;
}

/* 1 + scale once per sample (B d), then h (1 + scale) + shift per row. */
static inline double cic_op_flops_modulate(double B, double R, double d)
{
    return B * d + 2 * R * d;
}

static inline double cic_op_flops_gate(double R, double d)
{
    return R * d;
}

/* Per row: d adds, div, d subs. */
static inline double cic_op_flops_center(double R, double d)
{
    return R * (2 * d + 1);
}

/* log2 P, exact for powers of two (a real number otherwise). */
static inline double _cic_op_lg2(double P)
{
    int k = 0;
    if (P < 1 || P != floor(P) || ((long long)P & ((long long)P - 1)) != 0)
        return log2(P);
    while ((double)(1LL << k) < P)
        k++;
    return k;
}

/* Fast randomized Hadamard on R rows of width w = K P (K the order of the
 * Hadamard base, 1 for powers of two): K butterfly passes of length P
 * (P log2 P each), K - 1 adds/subs for each of the w block-mixing outputs,
 * signs and scale (2w). K <= 0 (no construction for w) counts as K = 1
 * with log2 w a real number: a closed form only, no such op runs. */
static inline double cic_op_flops_fwht(double R, int w, int K)
{
    double ww = w, k = K > 0 ? K : 1, P = ww / k;
    return R * (k * P * _cic_op_lg2(P) + P * k * (k - 1) + 2 * ww);
}

/* The regular Hadamard of order w = 4^k (op.regular): the Sylvester
 * transform of order w between a digit permutation and two sign passes
 * (engine_real.h), 2w more than cic_op_flops_fwht with K = 1. */
static inline double cic_op_flops_fwht_regular(double R, int w)
{
    return cic_op_flops_fwht(R, w, 1) + 2 * R * w;
}

/* Whether w = 4^k, k >= 1: the orders of the regular Hadamard matrices
 * (J - 2 I_4)^(x)k, row and column sums 2^k = sqrt(w). */
static inline bool cic_op_pow4(int w)
{
    return w >= 4 && (w & (w - 1)) == 0 && (__builtin_ctz((unsigned)w) % 2) == 0;
}

/* Per-sample folds over B samples (xform/fold.h gives the operations).
 * in_w [n, d]: 1 + scale (d), W diag (n d), times Q (2 n d^2). */
static inline double cic_op_flops_fold_in_w(double B, double n, double d)
{
    return B * (d + n * d + 2 * n * d * d);
}
/* in_b [n]: b + W shift, a dot of length d and the bias per output. */
static inline double cic_op_flops_fold_in_b(double B, double n, double d)
{
    return B * (n * (2 * d + 1));
}
/* out_w [d, k]: diag(gate) W (d k), [center each column], Q^T (2 d^2 k). */
static inline double cic_op_flops_fold_out_w(double B, double d, double k, bool center)
{
    return B * (d * k + (center ? (2 * d + 1) * k : 0) + 2 * d * d * k);
}
/* out_b [d]: gate * b (d), [center], Q^T (2 d^2). */
static inline double cic_op_flops_fold_out_b(double B, double d, bool center)
{
    return B * (d + (center ? 2 * d + 1 : 0) + 2 * d * d);
}

/* RoPE on R rows of width w (pairs of a head rotated by the angle of the
 * row's position): per pair (a, b) -> (a c - b s, a s + b c) 4 muls and 2
 * adds/subs, 3 per value. cos and sin depend on the position and the
 * frequency only, not on the data: they count as a precomputed table of N
 * head_dim / 2 pairs, not counted, like the constant 1 / sqrt(dh) of the
 * attention (Hugging Face recomputes the table every forward; the engines
 * once per op). */
static inline double cic_op_flops_rope(double R, double w)
{
    return 3 * R * w;
}

/* ---- per op: shape check and cost on the graph ----
 * cost_<op>(m, o, ns): the FLOPs of o in a run over ns samples. */

static inline int _cic_op_rows(const cic_model *m, int id, int ns)
{
    return cic_model_run_rows(m, id, ns);
}

/* LINEAR: in[0] [R, k] -> out [R, n]. W is a weight [n, k], or folded per
 * sample (an activation of n rows per sample); the bias, optional, [1, n]
 * or one row per sample. */
/* LINEAR with group G: a weight [G, G] on every block of G of the input's
 * rows (a block-diagonal matrix), no bias, the output like the input. */
static inline int _cic_op_check_linear_group(const cic_op_check *c, const cic_tensor *w)
{
    const cic_op *o = c->o;
    int cols = c->m->t[o->in[0]].cols, G = o->group;
    if (G < 0 || cols % G != 0 || o->b >= 0 || w->role == CIC_T_ACT)
        return cic_op_refuse(c, "blocks of %d values do not divide the width %d, or the "
                                "block-diagonal weight '%s' has a bias or is per sample",
                             G, cols, w->name);
    if (cic_op_need_weight(c, o->w, "weight", G, G))
        return -1;
    return cic_op_need_like(c, o->out, "output", o->in[0]);
}

static inline int cic_op_check_linear(const cic_op_check *c)
{
    const cic_model *m = c->m;
    const cic_op *o = c->o;
    const cic_tensor *w;
    int n;
    if (cic_op_slots(c, CIC_SLOT_IN0 | CIC_SLOT_W | CIC_SLOT_B) ||
        cic_op_need_act(c, o->in[0], "input", -1, -1) ||
        cic_op_need_rows(c, o->out, "output", o->in[0]))
        return -1;
    if (o->w < 0)
        return cic_op_refuse(c, "weight missing");
    w = &m->t[o->w];
    if (w->role == CIC_T_ACT && w->rows_kind != CIC_ROWS_SAMPLE_MATRIX)
        return cic_op_refuse(c, "weight '%s' is an activation but not one matrix per sample",
                             w->name);
    if (w->role != CIC_T_ACT && cic_op_need_weight(c, o->w, "weight", -1, -1))
        return -1;
    n = w->role == CIC_T_ACT ? w->block_rows : w->rows;
    if (o->group != 0)
        return _cic_op_check_linear_group(c, w);
    if (w->cols != m->t[o->in[0]].cols)
        return cic_op_refuse(c, "weight '%s' has %d columns, the input '%s' %d", w->name,
                             w->cols, m->t[o->in[0]].name, m->t[o->in[0]].cols);
    if (m->t[o->out].cols != n)
        return cic_op_refuse(c, "the output has %d columns, the weight '%s' %d rows",
                             m->t[o->out].cols, w->name, n);
    if (o->b < 0)
        return 0;
    if (m->t[o->b].role == CIC_T_ACT)
        return cic_op_need_act(c, o->b, "bias", CIC_ROWS_SAMPLES, n);
    return cic_op_need_weight(c, o->b, "bias", 1, n);
}

static inline double cic_op_cost_linear(const cic_model *m, const cic_op *o, int ns)
{
    const cic_tensor *w = &m->t[o->w];
    int n = w->role == CIC_T_ACT ? w->block_rows : w->rows;
    double R = _cic_op_rows(m, o->in[0], ns);
    if (o->group > 0) /* the [G, G] block on each block of a row */
        R *= m->t[o->in[0]].cols / o->group;
    return cic_op_flops_linear(R, w->cols, n, o->b >= 0);
}

/* NORM: in[0] [R, d] -> out like it; gain and bias optional weights [1, d]. */
static inline int cic_op_check_norm(const cic_op_check *c)
{
    const cic_op *o = c->o;
    int d;
    if (cic_op_slots(c, CIC_SLOT_IN0 | CIC_SLOT_G | CIC_SLOT_B) ||
        cic_op_need_act(c, o->in[0], "input", -1, -1) ||
        cic_op_need_like(c, o->out, "output", o->in[0]))
        return -1;
    d = c->m->t[o->in[0]].cols;
    return (o->g >= 0 && cic_op_need_weight(c, o->g, "gain", 1, d)) ||
           (o->b >= 0 && cic_op_need_weight(c, o->b, "bias", 1, d)) ? -1 : 0;
}

static inline double cic_op_cost_norm(const cic_model *m, const cic_op *o, int ns)
{
    return cic_op_flops_norm(_cic_op_rows(m, o->in[0], ns), m->t[o->in[0]].cols, o->center,
                             o->g >= 0, o->b >= 0);
}

/* ATTN: q a column view of width d (from in_col[0]), k and v of width
 * kv_heads d / heads (grouped-query attention; d when kv_heads = heads), of
 * token-row tensors; out [R, d], heads dividing d, kv_heads dividing
 * heads. */
static inline int cic_op_check_attn(const cic_op_check *c)
{
    const cic_op *o = c->o;
    static const char *const qkv[3] = {"q input", "k input", "v input"};
    int k, d, w;
    if (cic_op_slots(c, CIC_SLOT_IN0 | CIC_SLOT_IN1 | CIC_SLOT_IN2) ||
        cic_op_need_act(c, o->out, "output", CIC_ROWS_TOKENS, -1))
        return -1;
    d = c->m->t[o->out].cols;
    if (o->heads < 1 || d % o->heads != 0)
        return cic_op_refuse(c, "%d heads do not divide the width %d", o->heads, d);
    if (o->kv_heads < 1 || o->heads % o->kv_heads != 0)
        return cic_op_refuse(c, "%d key/value heads do not divide the %d heads", o->kv_heads,
                             o->heads);
    for (k = 0; k < 3; k++) {
        w = k == 0 ? d : d / o->heads * o->kv_heads;
        if (cic_op_need_act(c, o->in[k], qkv[k], CIC_ROWS_TOKENS, -1) ||
            cic_op_need_view(c, o->in[k], qkv[k], o->in_col[k], w))
            return -1;
    }
    return 0;
}

static inline double cic_op_cost_attn(const cic_model *m, const cic_op *o, int ns)
{
    int d = m->t[o->out].cols;
    return cic_op_flops_attn(ns, o->heads, m->cfg.tokens, d / o->heads, o->causal);
}

/* ACT, GLU, ADD: elementwise over inputs shaped like the output. */
static inline int _cic_op_check_act_kind(const cic_op_check *c)
{
    if ((unsigned)c->o->act >= CIC_ACT_COUNT)
        return cic_op_refuse(c, "activation kind %d unknown", (int)c->o->act);
    return 0;
}

static inline int cic_op_check_act(const cic_op_check *c)
{
    const cic_op *o = c->o;
    return cic_op_slots(c, CIC_SLOT_IN0) || cic_op_need_act(c, o->in[0], "input", -1, -1) ||
           cic_op_need_like(c, o->out, "output", o->in[0]) || _cic_op_check_act_kind(c) ? -1 : 0;
}

static inline double _cic_op_count_out(const cic_model *m, const cic_op *o, int ns)
{
    return (double)_cic_op_rows(m, o->out, ns) * m->t[o->out].cols;
}

static inline double cic_op_cost_act(const cic_model *m, const cic_op *o, int ns)
{
    return cic_op_flops_elementwise_act(o->act, _cic_op_count_out(m, o, ns));
}

static inline int _cic_op_check_binary(const cic_op_check *c)
{
    const cic_op *o = c->o;
    return cic_op_slots(c, CIC_SLOT_IN0 | CIC_SLOT_IN1) ||
           cic_op_need_act(c, o->in[0], "first input", -1, -1) ||
           cic_op_need_act(c, o->in[1], "second input", -1, -1) ||
           cic_op_need_like(c, o->out, "output", o->in[0]) ||
           cic_op_need_like(c, o->in[1], "second input", o->in[0]) ? -1 : 0;
}

static inline int cic_op_check_glu(const cic_op_check *c)
{
    return _cic_op_check_binary(c) || _cic_op_check_act_kind(c) ? -1 : 0;
}

static inline double cic_op_cost_glu(const cic_model *m, const cic_op *o, int ns)
{
    return cic_op_flops_glu(o->act, _cic_op_count_out(m, o, ns));
}

static inline int cic_op_check_add(const cic_op_check *c)
{
    return _cic_op_check_binary(c);
}

static inline double cic_op_cost_add(const cic_model *m, const cic_op *o, int ns)
{
    return cic_op_flops_add(_cic_op_count_out(m, o, ns));
}

/* MODULATE, GATE: x [R, d] with token rows, in[1] the per-sample mod
 * tensor; out like x. */
static inline int _cic_op_check_mod(const cic_op_check *c, int n_chunks)
{
    const cic_op *o = c->o;
    static const char *const chunk[2] = {"mod input (in_col[0])", "mod input (in_col[1])"};
    int k, d;
    if (cic_op_slots(c, CIC_SLOT_IN0 | CIC_SLOT_IN1) ||
        cic_op_need_act(c, o->in[0], "input", CIC_ROWS_TOKENS, -1) ||
        cic_op_need_like(c, o->out, "output", o->in[0]) ||
        cic_op_need_act(c, o->in[1], "mod input", CIC_ROWS_SAMPLES, -1))
        return -1;
    d = c->m->t[o->in[0]].cols;
    for (k = 0; k < n_chunks; k++)
        if (cic_op_need_view(c, o->in[1], chunk[k], o->in_col[k], d))
            return -1;
    return 0;
}

static inline int cic_op_check_modulate(const cic_op_check *c)
{
    return _cic_op_check_mod(c, 2);
}

static inline double cic_op_cost_modulate(const cic_model *m, const cic_op *o, int ns)
{
    return cic_op_flops_modulate(ns, _cic_op_rows(m, o->in[0], ns), m->t[o->in[0]].cols);
}

static inline int cic_op_check_gate(const cic_op_check *c)
{
    return _cic_op_check_mod(c, 1);
}

static inline double cic_op_cost_gate(const cic_model *m, const cic_op *o, int ns)
{
    return cic_op_flops_gate(_cic_op_rows(m, o->in[0], ns), m->t[o->in[0]].cols);
}

static inline int cic_op_check_center(const cic_op_check *c)
{
    const cic_op *o = c->o;
    return cic_op_slots(c, CIC_SLOT_IN0) || cic_op_need_act(c, o->in[0], "input", -1, -1) ||
           cic_op_need_like(c, o->out, "output", o->in[0]) ? -1 : 0;
}

static inline double cic_op_cost_center(const cic_model *m, const cic_op *o, int ns)
{
    return cic_op_flops_center(_cic_op_rows(m, o->in[0], ns), m->t[o->in[0]].cols);
}

/* FWHT: in[0] [R, w] with a Hadamard construction for w, signs g [1, w]. */
static inline int cic_op_check_fwht(const cic_op_check *c)
{
    const cic_op *o = c->o;
    int w;
    if (cic_op_slots(c, CIC_SLOT_IN0 | CIC_SLOT_G) ||
        cic_op_need_act(c, o->in[0], "input", -1, -1) ||
        cic_op_need_like(c, o->out, "output", o->in[0]))
        return -1;
    w = c->m->t[o->in[0]].cols;
    if (o->group < 0 || (o->group > 0 && w % o->group != 0))
        return cic_op_refuse(c, "blocks of %d values do not divide the width %d", o->group, w);
    if (o->group > 0)
        w = o->group;
    if (o->regular) {
        if (!cic_op_pow4(w))
            return cic_op_refuse(c, "no regular Hadamard matrix of order %d here (4^k only)", w);
        return cic_op_need_weight(c, o->g, "signs", 1, w);
    }
    if (o->hbase <= 0)
        return cic_op_refuse(c, "no Hadamard matrix of order %d (no base order)", w);
    if (w % o->hbase != 0 || ((w / o->hbase) & (w / o->hbase - 1)) != 0)
        return cic_op_refuse(c, "width %d is not K 2^k for the Hadamard base order K = %d", w,
                             o->hbase);
    return cic_op_need_weight(c, o->g, "signs", 1, w);
}

static inline double cic_op_cost_fwht(const cic_model *m, const cic_op *o, int ns)
{
    int w = m->t[o->in[0]].cols, g = o->group > 0 ? o->group : w;
    if (o->regular)
        return cic_op_flops_fwht_regular(_cic_op_rows(m, o->in[0], ns) * (double)(w / g), g);
    return cic_op_flops_fwht(_cic_op_rows(m, o->in[0], ns) * (double)(w / g), g, o->hbase);
}

/* FOLD_*: in[0] the per-sample mod tensor, its chunk in_col[0] of d =
 * d_model columns; Q = g [d, d]. */
static inline int _cic_op_check_fold(const cic_op_check *c, unsigned slots)
{
    const cic_op *o = c->o;
    int d = c->m->cfg.d_model;
    if (cic_op_slots(c, slots) ||
        cic_op_need_act(c, o->in[0], "mod input", CIC_ROWS_SAMPLES, -1) ||
        cic_op_need_view(c, o->in[0], "mod input", o->in_col[0], d))
        return -1;
    return (slots & CIC_SLOT_G) && cic_op_need_weight(c, o->g, "rotation", d, d) ? -1 : 0;
}

/* The output: one matrix of rows x cols per sample, or one row per sample
 * (rows 0). */
static inline int _cic_op_check_fold_out(const cic_op_check *c, int rows, int cols)
{
    const cic_tensor *t;
    if (cic_op_need_act(c, c->o->out, "output",
                        rows ? CIC_ROWS_SAMPLE_MATRIX : CIC_ROWS_SAMPLES, cols))
        return -1;
    t = &c->m->t[c->o->out];
    if (rows && t->block_rows != rows)
        return cic_op_refuse(c, "the output has %d rows per sample, expected %d",
                             t->block_rows, rows);
    return 0;
}

/* FOLD_IN_W: W [n, d] -> [n, d] per sample. */
static inline int cic_op_check_fold_in_w(const cic_op_check *c)
{
    int d = c->m->cfg.d_model;
    if (_cic_op_check_fold(c, CIC_SLOT_IN0 | CIC_SLOT_W | CIC_SLOT_G) ||
        cic_op_need_weight(c, c->o->w, "weight", -1, d))
        return -1;
    return _cic_op_check_fold_out(c, c->m->t[c->o->w].rows, d);
}

static inline double cic_op_cost_fold_in_w(const cic_model *m, const cic_op *o, int ns)
{
    return cic_op_flops_fold_in_w(ns, m->t[o->w].rows, m->cfg.d_model);
}

/* FOLD_IN_B: W [n, d], bias optional [1, n] -> [n] per sample. */
static inline int cic_op_check_fold_in_b(const cic_op_check *c)
{
    int d = c->m->cfg.d_model, n;
    if (_cic_op_check_fold(c, CIC_SLOT_IN0 | CIC_SLOT_W | CIC_SLOT_B) ||
        cic_op_need_weight(c, c->o->w, "weight", -1, d))
        return -1;
    n = c->m->t[c->o->w].rows;
    if (c->o->b >= 0 && cic_op_need_weight(c, c->o->b, "bias", 1, n))
        return -1;
    return _cic_op_check_fold_out(c, 0, n);
}

static inline double cic_op_cost_fold_in_b(const cic_model *m, const cic_op *o, int ns)
{
    return cic_op_flops_fold_in_b(ns, m->t[o->w].rows, m->cfg.d_model);
}

/* FOLD_OUT_W: W [d, k] -> [d, k] per sample. */
static inline int cic_op_check_fold_out_w(const cic_op_check *c)
{
    int d = c->m->cfg.d_model;
    if (_cic_op_check_fold(c, CIC_SLOT_IN0 | CIC_SLOT_W | CIC_SLOT_G) ||
        cic_op_need_weight(c, c->o->w, "weight", d, -1))
        return -1;
    return _cic_op_check_fold_out(c, d, c->m->t[c->o->w].cols);
}

static inline double cic_op_cost_fold_out_w(const cic_model *m, const cic_op *o, int ns)
{
    return cic_op_flops_fold_out_w(ns, m->cfg.d_model, m->t[o->w].cols, o->center);
}

/* FOLD_OUT_B: bias [1, d] -> [d] per sample. */
static inline int cic_op_check_fold_out_b(const cic_op_check *c)
{
    int d = c->m->cfg.d_model;
    if (_cic_op_check_fold(c, CIC_SLOT_IN0 | CIC_SLOT_B | CIC_SLOT_G) ||
        cic_op_need_weight(c, c->o->b, "bias", 1, d))
        return -1;
    return _cic_op_check_fold_out(c, 0, d);
}

static inline double cic_op_cost_fold_out_b(const cic_model *m, const cic_op *o, int ns)
{
    return cic_op_flops_fold_out_b(ns, m->cfg.d_model, o->center);
}

/* ROPE: in[0] [R, w] with token rows, heads dividing w into heads of an
 * even head_dim; out like in[0]. */
static inline int cic_op_check_rope(const cic_op_check *c)
{
    const cic_op *o = c->o;
    int w;
    if (cic_op_slots(c, CIC_SLOT_IN0) ||
        cic_op_need_act(c, o->in[0], "input", CIC_ROWS_TOKENS, -1) ||
        cic_op_need_like(c, o->out, "output", o->in[0]))
        return -1;
    w = c->m->t[o->in[0]].cols;
    if (o->heads < 1 || w % o->heads != 0 || (w / o->heads) % 2 != 0)
        return cic_op_refuse(c, "%d heads do not split the width %d into heads of an even size",
                             o->heads, w);
    if (o->rope != CIC_ROPE_HALF && o->rope != CIC_ROPE_INTERLEAVED)
        return cic_op_refuse(c, "rope layout %d is neither half nor interleaved", (int)o->rope);
    if (!(o->theta > 0) || !isfinite(o->theta) || !((float)o->theta > 0))
        return cic_op_refuse(c, "rope base %g is not a positive binary32 value", o->theta);
    return 0;
}

static inline double cic_op_cost_rope(const cic_model *m, const cic_op *o, int ns)
{
    return cic_op_flops_rope(_cic_op_rows(m, o->in[0], ns), m->t[o->in[0]].cols);
}

/* ---- the table ---- */

typedef struct {
    const char *name;
    int alias;   /* the output may be written over in[0 .. alias-1] */
    int (*check)(const cic_op_check *c);
    double (*cost)(const cic_model *m, const cic_op *o, int ns);
} cic_op_desc;

extern const cic_op_desc CIC_OP_DESC[];

/* The FLOPs o does in a run over ns samples (o passed cic_model_check). */
static inline double cic_op_cost(const cic_model *m, const cic_op *o, int ns)
{
    return CIC_OP_DESC[o->kind].cost(m, o, ns);
}

#endif
