/* SPDX-License-Identifier: MIT */
/* kind.h: the vocabulary every layer shares, data only (no code below
 * the model calls up): the kind lists and their name tables (names.c), the
 * model configuration, the transform, gate, sweep and low-precision specs,
 * and cic_case, what a case file says. The case loader (src/case/case.h,
 * above the report layer) fills a cic_case from TOML and validates it;
 * everything downstream trusts a loaded case.
 *
 * Case file layout (TOML):
 *
 *   name = "layernorm"              # optional; default: file name stem
 *   [model]
 *   block = "preln"                 # a name in CIC_BLOCK_LIST (block.h)
 *   d_model = 64
 *   heads = 4                       # d_model % heads == 0
 *   mlp_ratio = 4                   # MLP width = mlp_ratio * d_model (integer result)
 *   tokens = 16                     # tokens per sample (N)
 *   samples = 2                     # B
 *   layers = 2                      # L
 *   eps = 1e-5
 *   causal = true
 *   activation = "gelu"             # a name in act.h (rmsnorm: the SwiGLU gate; default silu)
 *   d_out = 32                      # width of the head readout; default d_model
 *   d_cond = 64                     # dit only: width of the conditioning vector c
 *   final_layer = true              # dit only
 *   rope = "half"                   # rmsnorm only: none (default) | half (Hugging Face
 *                                   # rotate_half) | interleaved (Meta); d_model / heads even
 *   rope_theta = 10000.0            # rmsnorm only: RoPE base, > 0 (default 10000)
 *   kv_heads = 2                    # rmsnorm only: key/value heads (GQA), dividing heads;
 *                                   # default heads
 *   qkv_bias = true                 # rmsnorm only: biases on q, k and v (Qwen2); default false
 *   seed = 1
 *   [model.weights]
 *   dist = "normal"                 # normal | uniform
 *   std = 0.05
 *   outlier_channels = 2
 *   outlier_scale = 16.0
 *   massive_channels = 4            # 0 .. d_model: massive activations in the input
 *   massive_tokens = 1              # 1 .. tokens: the first tokens of each sample
 *   massive_scale = 300.0           # > 0, at most 1e6 (default 100)
 *   [engines]
 *   f32 = ["openblas", "fixed-order"]   # at least one
 *   mpfr_prec = 64                  # 64 .. 1024: where the proof starts
 *   verdict = "mpfr"                # mpfr | f64 | f64-openblas (default mpfr)
 *   [[engines.lowp]]                # up to CIC_MAX_LOWP low-precision engines
 *   name = "w4a4"                   # unique, [A-Za-z0-9_.-]+, not a built-in engine's
 *   weights = "int4:channel"        # required: float32 | bf16 | fp16 | a scale rule (quant.h)
 *   activations = "int4:token"      # float32 (default) | bf16 | fp16 | a scale rule
 *   compute = "float32"             # with a rule for activations: float32 | bf16 | fp16
 *   weights_from = "unrounded"      # unrounded (default) | float32
 *   [readout]
 *   kind = "head"                   # head | residual
 *   [[transforms]]
 *   name = "fuse"                   # unique, [A-Za-z0-9_.-]+, not "none"
 *   kind = "fuse-layernorm"         # fuse-layernorm | fold-rmsnorm-gamma | rotate | rotate-heads
 *                                   # | online-down | online-qk | smooth-scale
 *                                   # (the kinds: CIC_XFORM_LIST, xform_kind.h;
 *                                   # what each takes: its descriptor)
 *   after = "other-name"            # optional: applied on top of that earlier transform
 *   precision = "mpfr"              # mpfr | f64 | f32 | f64-openblas | bf16 (default mpfr)
 *   q = "random"                    # rotate only: identity | random | hadamard |
 *                                   # "file:PATH" (rotate, rotate-heads; q_tensor = NAME)
 *   seed = 7                        # rotate only (random, hadamard)
 *   hadamard_base = 32              # q = "hadamard" only: the base order K of
 *                                   # H = H_K (x) Sylvester(d / K); default 0 (automatic)
 *   alpha = 0.5                     # smooth-scale only: the migration strength, 0 .. 1
 *   mistake = "skip-mean-bake"      # optional known mistake, see below
 *   expect = "equivalent"           # equivalent | broken (default equivalent)
 *   [[gates]]
 *   transform = "rotate-random"     # a transform name, "none", or "*"
 *   engine = "f32-openblas"         # f32-openblas | f32-fixed-order | mpfr | "*"
 *   metric = "ulp_row.p99"          # see CIC_GATE_METRICS in load_gates.c
 *   max = 64.0
 *
 * Mistakes: "skip-mean-bake" (fuse-layernorm: no C baked into writers),
 * "skip-attn-out" (rotate: attn.proj / o_proj left unrotated),
 * "skip-out-proj" (rotate-heads: the values rotated, o_proj left as it was),
 * "skip-online" (online-down: the Hadamard fused into down_proj, no online op),
 * "before-rope" (online-qk: the Hadamard fused into q_proj and k_proj),
 * "per-query-head" (rotate-heads: a Q per query head, not per kv head),
 * "center-embeddings" (fold-rmsnorm-gamma: the block input is mean-centered,
 * wrong on an RMSNorm model), "skip-bias" (smooth-scale: the LayerNorm bias
 * not divided by the scales).
 *
 * hadamard_base (rotate and the adaLN kinds, only with q = "hadamard"; an
 * integer 0 .. 65536, default 0: the smallest base, as always) forces the
 * base order K of H = H_K (x) Sylvester(d / K): 1 (Sylvester), a Paley or a
 * Williamson order, with d_model / K (branch-rotate: d_mlp / K too) a power
 * of two, checked by cic_xform_check (xform.h); e.g. 32 or 128 at d_model =
 * 256 for a non-Sylvester matrix of the order Sylvester's would have.
 *
 * Required: [model] block, d_model, heads, tokens, samples, layers. Defaults
 * (as loaded): name = file stem; mlp_ratio 4; eps 1e-5 (dit 1e-6); causal
 * false; activation gelu (rmsnorm silu, dit gelu-tanh); d_out = d_model;
 * d_cond = d_model and final_layer true (read only for dit; d_cond and
 * final_layer in a non-dit file are errors); seed 0; dist normal; std 0.02;
 * outlier_channels 0; outlier_scale 1; [engines] f32 both, mpfr_prec 64;
 * readout head. Transforms: name, kind required; q required for rotate; q and
 * seed only for rotate (seed default 0); precision mpfr; mistake none; expect
 * equivalent. Gates: metric and max required; transform and engine default
 * "*"; max >= 0 (inf allowed), an f32 engine named must be enabled.
 * fuse-layernorm needs preln, fold-rmsnorm-gamma needs rmsnorm; mistakes:
 * skip-mean-bake with fuse-layernorm, skip-attn-out with rotate, skip-out-proj
 * with rotate-heads, skip-online with online-down, before-rope with online-qk
 * (q, seed and hadamard_base as for rotate; online-down and online-qk need
 * q = "hadamard"),
 * center-embeddings with fold-rmsnorm-gamma. Example files:
 * tests/fixtures/valid-preln.toml, tests/fixtures/valid-rmsnorm.toml.
 *
 * adaLN strategies (DESIGN.md section 3), block = "dit" only; on a dit block
 * they are the only kinds allowed (fuse-layernorm, fold-rmsnorm-gamma and
 * rotate are errors):
 *
 *   [[transforms]]
 *   name = "online"
 *   kind = "online-unrotate"        # static-fold | online-unrotate | per-sample-fold | branch-rotate
 *   q = "hadamard"                  # required: identity | random | hadamard
 *   seed = 3                        # as for rotate (default 0)
 *   hadamard_base = 0               # as for rotate; branch-rotate: for d_mlp too
 *   precision = "mpfr"              # as for every kind
 *   stream = "centered"             # centered (default) | mean-preserving; not for branch-rotate
 *   fast = true                     # online-unrotate, branch-rotate only (default false);
 *                                   # needs q = "hadamard"; online-unrotate: stream = "centered"
 *   calibration = 0                 # static-fold only: sample index, 0 <= calibration < samples
 *   group = 256                     # branch-rotate with fast = true: the fast Hadamard on
 *                                   # blocks of this width (group-wise, as ConvRot)
 *   expect = "equivalent"           # default broken for static-fold (exact only on its
 *                                   # calibration sample), equivalent for the others
 *
 * 'after' and 'mistake' are errors on adaLN kinds (they always start from
 * the original dit model). Every loaded transform has stream, fast and
 * calibration set (centered, false, 0 unless given). Example file:
 * tests/fixtures/valid-dit.toml. */
#ifndef CIC_KIND_H
#define CIC_KIND_H

#include "../base/base.h"
#include "../base/format.h"
#include "../base/quant.h"
#include "act.h"
#include "block.h"
#include "xform_kind.h"

#include <stdbool.h>
#include <stdint.h>

#define CIC_NAME_MAX 64
#define CIC_MAX_XFORMS 32
#define CIC_MAX_GATES 128

enum cic_dist { CIC_DIST_NORMAL, CIC_DIST_UNIFORM, CIC_DIST_COUNT };
/* CIC_Q_REGULAR: the randomized regular Hadamard of order 4^k (xform/qmat.h) */
enum cic_qkind { CIC_Q_IDENTITY, CIC_Q_RANDOM, CIC_Q_HADAMARD, CIC_Q_REGULAR, CIC_Q_FILE, CIC_Q_COUNT };
/* How a transform is computed: correctly rounded MPFR at the engine's
 * precision, at 53 or 24 bits (replaying double / float code), or in double
 * with the dense products by Q through OpenBLAS dgemm (large d: fast, but the
 * last bits depend on the BLAS kernel and threads, so the regression gate
 * does not pin its output hash). */
enum cic_tprec { CIC_TPREC_MPFR, CIC_TPREC_F64, CIC_TPREC_F32, CIC_TPREC_F64_BLAS, CIC_TPREC_BF16,
                  CIC_TPREC_COUNT };
enum cic_verdict {
    CIC_VERDICT_EQUIVALENT,
    CIC_VERDICT_BROKEN,
    CIC_VERDICT_INCONCLUSIVE,
    CIC_VERDICT_COUNT
};
enum cic_readout { CIC_READOUT_HEAD, CIC_READOUT_RESIDUAL, CIC_READOUT_COUNT };
/* Rotary position embedding of q and k (rmsnorm): none, Hugging Face
 * LLaMA's rotate_half layout (the two halves of a head paired), or the
 * interleaved pairs (x[2i], x[2i+1]) of Meta's original LLaMA code. */
enum cic_rope { CIC_ROPE_NONE, CIC_ROPE_HALF, CIC_ROPE_INTERLEAVED, CIC_ROPE_COUNT };
/* Which engine decides the exactness verdict: MPFR at mpfr_prec (the
 * transformed model with unrounded weights against the original), or the
 * f64 engine (fixed-order matmul, for model sizes where MPFR runs of every
 * transformed model are too slow; thresholds relative to double). */
enum cic_verdict_engine {
    CIC_VERDICT_ENGINE_MPFR,
    CIC_VERDICT_ENGINE_F64,       /* fixed-order matmul: the same bits everywhere */
    CIC_VERDICT_ENGINE_F64_BLAS,  /* OpenBLAS dgemm: for large models */
    CIC_VERDICT_ENGINE_COUNT
};
/* How a rotated dit stream keeps LayerNorm exact: a centered stream (C Q at
 * the writers, the norm becomes RMSNorm) or a mean-preserving Q (Q 1 = 1,
 * the norm stays LayerNorm). */
enum cic_stream { CIC_STREAM_CENTERED, CIC_STREAM_MEAN_PRESERVING, CIC_STREAM_COUNT };

/* Name tables, one name per value of their enum, in its order (the
 * spellings used in case files and reports). Declared without a size: each
 * is defined with the size its initializer gives and a static_assert that
 * this is the enum's _COUNT, so a missing name cannot be a silent NULL. */
extern const char *const CIC_BLOCK_NAME[];
extern const char *const CIC_ACT_NAME[];
extern const char *const CIC_DIST_NAME[];
extern const char *const CIC_XFORM_NAME[];
extern const char *const CIC_Q_NAME[];
extern const char *const CIC_TPREC_NAME[];
extern const char *const CIC_VERDICT_NAME[];
extern const char *const CIC_READOUT_NAME[];
extern const char *const CIC_ROPE_NAME[];
extern const char *const CIC_STREAM_NAME[];
extern const char *const CIC_VERDICT_ENGINE_NAME[];

/* [input] kind: seeded hidden states (with the optional massive
 * activations), seeded token ids through the checkpoint's embed_tokens, or
 * a file's hidden states ("input") or token ids ("input_ids"). */
enum cic_input_kind { CIC_INPUT_RANDOM, CIC_INPUT_TOKENS, CIC_INPUT_FILE, CIC_INPUT_COUNT };
extern const char *const CIC_INPUT_NAME[];

typedef struct cic_model_cfg_s {
    enum cic_block_kind block;
    int d_model;
    int heads;
    double mlp_ratio;
    int d_mlp; /* derived: mlp_ratio * d_model, checked to be an integer */
    int tokens;  /* N, per sample */
    int samples; /* B */
    int layers;  /* L */
    double eps;
    bool causal;
    enum cic_act act;
    int d_out;  /* head width */
    int d_cond; /* dit */
    bool final_layer; /* dit */
    uint64_t seed;
    enum cic_dist dist;
    double std;
    int outlier_channels;
    double outlier_scale;
    /* massive activations in the block input: the first massive_tokens
     * tokens of every sample carry massive_scale (times the input's std of
     * 1) in massive_channels seeded channels; 0 channels: none */
    int massive_channels;
    int massive_tokens;
    double massive_scale;
    /* rmsnorm only (LLaMA attention): RoPE of q and k with base rope_theta
     * (> 0; head_dim = d_model / heads even when rope is on), and kv_heads
     * key/value heads (dividing heads; query head h reads kv head
     * h / (heads / kv_heads)). Every other block: rope none, kv_heads =
     * heads. A kv_heads of 0 (a cfg not from the loader) means heads. */
    enum cic_rope rope;
    double rope_theta;
    /* rope on the first rotary_dim dims of each head only (even; a GPT-J
     * checkpoint's rotary_dim); 0: all of them (every case file) */
    int rotary_dim;
    int kv_heads;
    bool qkv_bias; /* rmsnorm only: biases on q_proj, k_proj, v_proj (Qwen2) */
    /* [model] checkpoint: the folder the weights come from ("" none: the
     * seeded generator), resolved against the case file's folder, and the
     * checkpoint's layer that is this model's layer 0 */
    char checkpoint[1024];
    int layer0;
    /* a rewritten checkpoint (cicheck verify): norm gains may be absent
     * (fused), then 1 */
    bool ckpt_fused;
    /* [input]: the block input (src/model/input.h) */
    enum cic_input_kind input_kind;
    char input_file[1024]; /* CIC_INPUT_FILE: resolved path */
    /* a shard of a case split by samples (--shard K/N): the index in the
     * whole case of this model's sample 0, so that its seeded inputs are
     * those samples' inputs in the whole case; 0 otherwise */
    int sample0;
} cic_model_cfg;

/* The key/value heads of m (heads when unset). */
static inline int cic_cfg_kv_heads(const cic_model_cfg *m)
{
    return m->kv_heads > 0 ? m->kv_heads : m->heads;
}

typedef struct cic_xform_spec_s {
    char name[CIC_NAME_MAX];
    enum cic_xform_kind kind;
    int after; /* index of an earlier transform in cic_case.xf, or -1 */
    enum cic_tprec prec;
    enum cic_qkind q;
    uint64_t q_seed;
    int hadamard_base;       /* q = hadamard: base order K forced, 0 automatic */
    /* q = "file:PATH" (rotate, rotate-heads): the matrix's file (the path as
     * resolved against the case file's folder), its tensor, and the
     * significand bits of its dtype (F64 53, F32 24, F16 11, BF16 8), which
     * bound the verdict's precision */
    char q_file[1024];
    char q_tensor[96];
    int q_file_bits;
    int mistake;             /* CIC_MISTAKE_NONE or its number within its kind */
    enum cic_verdict expect; /* EQUIVALENT or BROKEN */
    int line;                /* where the entry starts, for messages */
    /* adaLN strategies */
    enum cic_stream stream;  /* static-fold, online-unrotate, per-sample-fold */
    bool fast;               /* online-unrotate, branch-rotate: fast Hadamard */
    int group;               /* branch-rotate (fast): blocks of this width, 0 whole rows */
    int calibration;         /* static-fold: the sample whose c is folded */
    /* the kind's own keys (its descriptor's params), defaults when absent */
    double param[CIC_XFORM_MAX_PARAMS];
} cic_xform_spec;

typedef struct {
    char transform[CIC_NAME_MAX]; /* name, "none" or "*" */
    char engine[32];              /* "f32-openblas", "f32-fixed-order" or "*" */
    char metric[32];              /* one of CIC_GATE_METRICS */
    double max;
    int line;
} cic_gate_spec;

/* A sweep: lists of values for some model keys; the case runs once per
 * point of their cartesian product (DESIGN: sweeps). Axes in this order:
 * d_model, tokens, layers, seed, mpfr_prec, outlier_scale, heads, samples,
 * d_cond, std. An axis with no list has n = 0 (the case's own value). */
enum cic_sweep_axis {
    CIC_AXIS_D_MODEL,
    CIC_AXIS_TOKENS,
    CIC_AXIS_LAYERS,
    CIC_AXIS_SEED,
    CIC_AXIS_MPFR_PREC,
    CIC_AXIS_OUTLIER_SCALE,
    CIC_AXIS_HEADS,
    CIC_AXIS_SAMPLES,
    CIC_AXIS_D_COND,
    CIC_AXIS_STD,
    CIC_AXIS_COUNT
};
extern const char *const CIC_AXIS_NAME[];

#define CIC_SWEEP_MAX_VALUES 64
#define CIC_SWEEP_DEFAULT_MAX_POINTS 64

typedef struct {
    bool on;                 /* the case has a [sweep] table */
    int n[CIC_AXIS_COUNT];   /* values per axis (0: not swept) */
    double v[CIC_AXIS_COUNT][CIC_SWEEP_MAX_VALUES];
    int line[CIC_AXIS_COUNT];
    long points;             /* product of the non-empty n */
    long max_points;         /* guard (default CIC_SWEEP_DEFAULT_MAX_POINTS) */
    int table_line;
    /* Additions: columns of the lists and the table (for messages), and
     * whether d_out / d_cond were left to their default (= d_model), so a
     * point with another d_model gets its own default. */
    int col[CIC_AXIS_COUNT];
    int table_col;
    bool d_out_default;
    bool d_cond_default;
    bool kv_heads_default; /* kv_heads left out: = heads at every point */
} cic_sweep;

/* Upper bound the loader accepts for max_points (each point is a full run;
 * the loader validates every point). */
#define CIC_SWEEP_MAX_POINTS_LIMIT 100000

/* A low-precision engine ([[engines.lowp]]): what its weights are stored
 * in, what its activations are rounded or quantized to, and the element
 * format of every other op's output. */
#define CIC_MAX_LOWP 8
#define CIC_LOWP_NAME_MAX 32
enum cic_lowp_from { CIC_LOWP_FROM_UNROUNDED, CIC_LOWP_FROM_FLOAT32, CIC_LOWP_FROM_COUNT };
extern const char *const CIC_LOWP_FROM_NAME[];
typedef struct {
    char name[CIC_LOWP_NAME_MAX];
    int line;
    char weights[64], activations[64]; /* as written */
    /* weights: a scale rule (wq_on) or a plain format (wfmt) */
    bool wq_on;
    cic_quant wq;
    const cic_format *wfmt;
    /* activations at linear inputs: a scale rule (aq_on), else none */
    bool aq_on;
    cic_quant aq;
    /* the element format: every op's output is rounded to it (float32:
     * untouched) */
    const cic_format *elem;
    enum cic_lowp_from from;
} cic_lowp_spec;

typedef struct {
    char name[CIC_NAME_MAX];
    char path[1024];
    cic_model_cfg model;
    bool f32_openblas;
    bool f32_fixed;
    int mpfr_prec;
    enum cic_verdict_engine verdict_engine; /* [engines] verdict, default mpfr */
    enum cic_readout readout;
    cic_lowp_spec lowp[CIC_MAX_LOWP];
    int n_lowp;
    cic_xform_spec xf[CIC_MAX_XFORMS];
    int n_xf;
    cic_gate_spec gates[CIC_MAX_GATES];
    int n_gates;
    cic_sweep sweep;
} cic_case;

/* Metric names a gate may name (NULL-terminated): "max_abs", "rel_norm2",
 * "ulp_row.max", "ulp_row.p99", "ulp_row.mean", "ulp_elem.max",
 * "ulp_elem.p99", "ulp_elem.mean", "drift.max", "drift.p99", "drift.mean",
 * "ce_residual", "nonfinite". */
extern const char *const CIC_GATE_METRICS[];

/* Limits the loader enforces (beyond the memory estimate), so every size
 * product downstream fits comfortably in int64 and no size is cast from an
 * out-of-range TOML integer. */
#define CIC_MAX_SAMPLES 64                 /* samples (B) */
#define CIC_CASE_MAX_DIM 65536             /* d_model, d_out, d_cond */
#define CIC_CASE_MAX_MLP_RATIO 64          /* so d_mlp <= 2^22 */
#define CIC_CASE_MAX_TOKENS (1 << 20)      /* tokens per sample (N) */
#define CIC_CASE_MAX_ROWS (1 << 20)        /* tokens * samples */
#define CIC_CASE_MAX_LAYERS 1024           /* L */
#define CIC_CASE_MAX_FILE_BYTES (16 << 20) /* case file size */

/* The transform chain of c (xform_kind.h): what xform, metric and report
 * take of a case. Points into c. */
static inline cic_xform_chain cic_case_chain(const cic_case *c)
{
    cic_xform_chain ch = {&c->model, c->xf, c->n_xf, (int)c->readout, c->path};
    return ch;
}
/* The same as a pointer to a compound literal, for an argument: valid in
 * the enclosing block. */
#define CIC_CASE_CHAIN(c) (&(cic_xform_chain){&(c)->model, (c)->xf, (c)->n_xf, (int)(c)->readout, (c)->path})

#endif
