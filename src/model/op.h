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
 * This header needs nothing of the model (model.h includes it); the
 * checks and costs, which read an op's tensors, are inline functions of
 * op_rules.h, included by op.c and by what calls one of them directly. */
#ifndef CIC_OP_H
#define CIC_OP_H

#include "../kind/kind.h"

#include "../base/base.h"

#include <math.h>
#include <stdbool.h>
#include <stddef.h>

/* The graph the ops belong to (model.h). */
typedef struct cic_model_s cic_model;
typedef struct cic_op cic_op;

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
    int rot;         /* ROPE: the dims of each head rotated, from its start
                      * (even; the table's dim); 0: all. The rest pass as
                      * they are (GPT-J's rotary_dim) */
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

/* One activation call (kind/act.h). */
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
