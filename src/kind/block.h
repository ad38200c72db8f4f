/* SPDX-License-Identifier: MIT */
/* block.h: the block kinds. Each is one descriptor in its own file
 * (src/model/block_<name>.c): its name in case files, what its norms are
 * (which decides the transforms that apply to it), its defaults, whether it
 * reads a conditioning vector per sample, its weight count for the memory
 * estimate, its graph builder and its closed-form FLOPs. The case loader, the model module and
 * the FLOP formulas read the descriptor; nothing else names a block kind.
 *
 * Adding a block kind: a line in CIC_BLOCK_LIST below (enum constant,
 * name), its file src/model/block_<name>.c defining
 * `const cic_block_desc cic_block_<name>`, and that file in meson.build. */
#ifndef CIC_BLOCK_H
#define CIC_BLOCK_H

#include <stdbool.h>
#include <stdint.h>

#define CIC_BLOCK_LIST(X) \
    X(PRELN, preln)       \
    X(RMSNORM, rmsnorm)   \
    X(DIT, dit)           \
    X(PARALLEL, parallel)

enum cic_block_kind {
#define CIC_BLOCK_ENUM_(e, n) CIC_BLOCK_##e,
    CIC_BLOCK_LIST(CIC_BLOCK_ENUM_)
#undef CIC_BLOCK_ENUM_
    CIC_BLOCK_COUNT
};

/* What a block's norms are: the invariance transforms apply by this. */
enum cic_norm_kind {
    CIC_NORM_LAYERNORM, /* LayerNorm with gain and bias: fuse-layernorm, rotate */
    CIC_NORM_RMSNORM,   /* RMSNorm with gain: fold-rmsnorm-gamma, rotate */
    CIC_NORM_ADALN,     /* affine-free LayerNorm modulated per sample (adaLN): the
                         * adaLN strategies */
    CIC_NORM_KIND_COUNT
};

struct cic_bld;
struct cic_model_cfg_s;

/* What the norms of a graph do: the original block's (from its norm kind,
 * cic_norm_of) or what is left after a chain of transforms. */
typedef struct {
    bool center; /* subtracts the mean (LayerNorm) */
    bool gain;   /* multiplies by g */
    bool bias;   /* adds b */
} cic_norm_state;

/* The original norms of a block with norms of kind k: LayerNorm with gain
 * and bias, RMSNorm with gain, or the affine-free LayerNorm of adaLN. */
static inline cic_norm_state cic_norm_of(enum cic_norm_kind k)
{
    cic_norm_state s = {k != CIC_NORM_RMSNORM, k != CIC_NORM_ADALN, k == CIC_NORM_LAYERNORM};
    return s;
}

/* Closed-form FLOPs of one layer, per site, and of the readout, for the
 * whole case (all samples). */
typedef struct {
    double norm1, attn, norm2, mlp, final;
} cic_block_flops;

typedef struct {
    const char *name;      /* as in case files: "preln" */
    enum cic_norm_kind norm;
    double eps;            /* default eps */
    int act;               /* default activation (enum cic_act) */
    bool cond;             /* reads a conditioning vector per sample: the keys
                            * d_cond and final_layer, the d_cond sweep axis */
    bool llama;            /* LLaMA attention: the keys rope, rope_theta and
                            * kv_heads (RoPE of q and k, grouped-query heads) */
    /* Weight values per layer and of the readout, saturating (the memory
     * estimate). */
    void (*weights)(const struct cic_model_cfg_s *m, uint64_t *layer, uint64_t *readout);
    /* The block's graph on b's model, whose input X0 exists (readout: the
     * case's [readout] kind, for blocks that have a choice). */
    void (*build)(struct cic_bld *b, int readout);
    /* The closed-form FLOPs of the block whose norms do ns (readout as in
     * build), written from the block equations, not from the graph, with
     * the op table's formulas (model/op.h: cic_op_flops_*), so that their
     * agreement with the engines' counters checks the graph. NULL for the
     * adaLN blocks (norm CIC_NORM_ADALN), whose original and strategies are
     * costed together by metric/flops_dit.c. */
    void (*flops)(cic_block_flops *f, const struct cic_model_cfg_s *m, int readout,
                  cic_norm_state ns);
} cic_block_desc;

/* A size as a count (0 for a negative one), a * b and a + b saturating at
 * UINT64_MAX: weight counts of any case, even one the loader refuses. */
static inline uint64_t cic_count(int v)
{
    return v > 0 ? (uint64_t)v : 0;
}
static inline uint64_t cic_sat_mul(uint64_t a, uint64_t b)
{
    return a != 0 && b > UINT64_MAX / a ? UINT64_MAX : a * b;
}
static inline uint64_t cic_sat_add(uint64_t a, uint64_t b)
{
    return a > UINT64_MAX - b ? UINT64_MAX : a + b;
}

#endif
