/* SPDX-License-Identifier: MIT */
/* xform_kind.h: the transform kinds, as data. Each kind is one descriptor
 * in its own file (src/xform/kind_<name>.c): its name in case files, its
 * family, the blocks (by norm kind) it applies to, the case keys and Q kinds
 * it takes, its default expectation, its known mistakes, and the functions
 * the other modules ask instead of naming the kind: its check against the
 * model, its rewrite, the FLOPs it adds, how its weights are held (the
 * memory estimate) and its fields in report.json. The case loader, the
 * FLOP formulas, the memory estimate, the report and the conclusion read the
 * descriptor; nothing outside the kind's file depends on which kind it is
 * (nor on the order of this list).
 *
 * Adding a transform kind: a line in CIC_XFORM_LIST below (enum constant,
 * name, descriptor), its file src/xform/kind_<name>.c defining
 * `const cic_xform_desc cic_xform_<name>` (its known mistakes included),
 * and that file in meson.build.
 *
 * Data only: this header includes base and the block types; the
 * descriptors' functions take the types of the modules above by pointer
 * (declared, not included). It declares no function: the table of
 * descriptors and what is asked of it are src/xform/kinds.h. */
#ifndef CIC_XFORM_KIND_H
#define CIC_XFORM_KIND_H

#include "../base/base.h"
#include "block.h"

#include <mpfr.h>
#include <stdbool.h>
#include <stddef.h>

/* The transform kinds: enum constant, name in case files, descriptor. */
#define CIC_XFORM_LIST(X)                                              \
    X(FUSE_LAYERNORM, "fuse-layernorm", cic_xform_fuse_layernorm)      \
    X(FOLD_RMSNORM_GAMMA, "fold-rmsnorm-gamma", cic_xform_fold_rmsnorm_gamma) \
    X(ROTATE, "rotate", cic_xform_rotate)                              \
    X(ROTATE_HEADS, "rotate-heads", cic_xform_rotate_heads)            \
    X(ONLINE_DOWN, "online-down", cic_xform_online_down)               \
    X(ONLINE_QK, "online-qk", cic_xform_online_qk)                     \
    X(STATIC_FOLD, "static-fold", cic_xform_static_fold)               \
    X(ONLINE_UNROTATE, "online-unrotate", cic_xform_online_unrotate)   \
    X(PER_SAMPLE_FOLD, "per-sample-fold", cic_xform_per_sample_fold)   \
    X(BRANCH_ROTATE, "branch-rotate", cic_xform_branch_rotate)         \
    X(SMOOTH_SCALE, "smooth-scale", cic_xform_smooth_scale)

enum cic_xform_kind {
#define CIC_XFORM_ENUM_(e, n, d) CIC_XFORM_##e,
    CIC_XFORM_LIST(CIC_XFORM_ENUM_)
#undef CIC_XFORM_ENUM_
    CIC_XFORM_COUNT
};

/* A transform's known mistake (cic_xform_spec.mistake): CIC_MISTAKE_NONE,
 * or the mistake's number within its kind, 1 + its index in the kind's
 * descriptor's `mistakes` (a kind file numbers its own from 1). Names are
 * per kind; two kinds may share one. */
#define CIC_MISTAKE_NONE 0
#define CIC_XFORM_MAX_MISTAKES 4

/* What a transform does to the model, for messages and for the code that
 * treats a family alike (the adaLN strategies build a new dit graph from
 * the original and are judged and concluded on together). */
enum cic_xform_family {
    CIC_XFAM_FOLD,     /* a norm's gain (and bias, mean) folded into weights */
    CIC_XFAM_ROTATION, /* an orthogonal Q fused into weights */
    CIC_XFAM_ONLINE,   /* a Q fused into weights and its inverse as an op at run time */
    CIC_XFAM_ADALN,    /* an adaLN strategy of a dit block */
    CIC_XFAM_COUNT
};

/* The case keys a kind takes beyond name, kind, precision and expect
 * (bits of cic_xform_desc.keys). */
enum {
    CIC_XKEY_Q = 1u << 0,           /* q (required), seed, hadamard_base, q_tensor */
    CIC_XKEY_STREAM = 1u << 1,      /* stream */
    CIC_XKEY_FAST = 1u << 2,        /* fast */
    CIC_XKEY_CALIBRATION = 1u << 3, /* calibration: exact on that sample only */
    CIC_XKEY_GROUP = 1u << 4,       /* group */
    CIC_XKEY_AFTER = 1u << 5,       /* after: applied on top of an earlier transform */
    CIC_XKEY_MISTAKE = 1u << 6      /* mistake: one of its `mistakes` */
};

/* The widths a kind builds its Q of (bits of cic_xform_desc.q_widths). */
enum {
    CIC_XW_MODEL = 1u << 0, /* d_model: the residual stream */
    CIC_XW_HEAD = 1u << 1,  /* d_model / heads: per head */
    CIC_XW_MLP = 1u << 2    /* d_mlp: the MLP's inside */
};

/* A numeric key of one kind (cic_xform_desc.params): its value, checked
 * to lo <= v <= hi, lands in cic_xform_spec.param[i] (def when absent). */
#define CIC_XFORM_MAX_PARAMS 4
typedef struct {
    const char *key;
    double lo, hi, def;
} cic_xform_param;

/* How a transformed model holds its weights (the memory estimate,
 * case/memory.c). Applied to the original model, a kind with lazy VALUES
 * keeps its weights as recipes over float32 values (a gain fold); ROTATED
 * keeps them as rotations of such recipes, on the original or on a VALUES
 * transform of it (model/lazy.h). */
enum cic_xform_lazy { CIC_XLAZY_NONE, CIC_XLAZY_VALUES, CIC_XLAZY_ROTATED };
typedef struct {
    enum cic_xform_lazy lazy;
    bool doubles; /* with precision f64-openblas its products kept as doubles */
} cic_xform_mem;

/* One field of a transform in report.json beyond the common ones. */
enum cic_xfield_type { CIC_XFIELD_STR, CIC_XFIELD_INT, CIC_XFIELD_BOOL, CIC_XFIELD_REAL };
typedef struct {
    const char *key;
    enum cic_xfield_type type;
    const char *s;
    long long i; /* INT; BOOL: 0 or 1 */
    double r;
} cic_xform_field;
#define CIC_XFORM_MAX_FIELDS 8

/* The FLOPs of a dit graph (metric/flops_dit.c), which an adaLN strategy
 * rewrites: shared costs it reads, per-layer parts (times L) and the
 * per-case ones it changes. Units: FLOPs of the whole case (all samples). */
typedef struct {
    double R, B;      /* rows (tokens x samples), samples */
    bool centered;    /* the stream is centered (else the Q is mean-preserving) */
    double nrm;       /* the norm of a rotated stream: RMS0 centered, LN0 else */
    double mdl;       /* a modulate */
    double head;      /* the final linear */
    double add;       /* a residual add */
    double mod;       /* per case: the modulation linears */
    double n1, attn, g1, n2, mlp, g2; /* per layer */
    double final;     /* the final layer */
} cic_dit_flops;

/* How an adaLN strategy rewrites the dit graph (xform/adaln_graph.c) and
 * fills its weights (xform/adaln.c): where the modulation goes and which
 * rotations run online. The two files read only these fields, so a
 * strategy made of these parts is one descriptor; a new part is new code
 * there. */
enum cic_adaln_fold {
    CIC_ADALN_FOLD_NONE,      /* MODULATE and GATE stay ops at run time */
    CIC_ADALN_FOLD_STATIC,    /* the calibration sample's modulation and Q folded once into
                               * every reader and writer: no modulation linears, SiLU,
                               * MODULATE or GATE left */
    CIC_ADALN_FOLD_PER_SAMPLE /* each sample's folded at run time: FOLD_IN ops replace a
                               * MODULATE, FOLD_OUT ops before the writer a GATE; reads rot.q */
};
typedef struct {
    enum cic_adaln_fold fold;
    bool unrotate; /* the stream rotated, unrotated online (x Q^T) before each MODULATE and
                    * rotated back (x Q, centered first on a centered stream) after each
                    * GATE: rot.q and rot.qT, or rot.signs when fast */
    bool branch;   /* the stream not rotated; each reader's and writer's input rotated
                    * online (x Q_in, blocks of the spec's group) and its weight W Q_in */
} cic_adaln_strategy;

struct cic_model_cfg_s;
struct cic_xform_spec_s;
struct cic_xf_ctx_s;
struct cic_model_s;

/* A chain of transforms on one model, what xform, metric and report take
 * instead of a whole case: the model's configuration, the transforms
 * (xf[i].after: the index of the one it applies on top of, or -1), the
 * readout kind (enum cic_readout) and the case file's path for messages. */
typedef struct {
    const struct cic_model_cfg_s *model;
    const struct cic_xform_spec_s *xf;
    int n;
    int readout;
    const char *path;
} cic_xform_chain;

typedef struct cic_xform_desc_s {
    const char *name;       /* as in case files; the same as CIC_XFORM_LIST's */
    const char *alias;      /* a short name for messages ("R1"), or NULL */
    enum cic_xform_family family;
    unsigned norms;         /* bits (1 << enum cic_norm_kind) of the blocks it applies to */
    unsigned keys;          /* CIC_XKEY_* */
    unsigned q_kinds;       /* with CIC_XKEY_Q: bits (1 << enum cic_qkind) of the q it takes */
    unsigned q_widths;      /* CIC_XW_*: the widths its Q is built of (0: no Q) */
    bool expect_broken;     /* the default expect (exact on its calibration sample only) */
    /* Its known mistakes (mistake = "..."), as in case files: mistakes[m - 1]
     * is mistake number m; NULL ends. */
    const char *mistakes[CIC_XFORM_MAX_MISTAKES];
    const char *refused_hint;      /* appended when its block refuses it, or NULL */
    cic_xform_param params[CIC_XFORM_MAX_PARAMS]; /* its own keys; key NULL ends */
    /* An adaLN strategy's rewrite (family CIC_XFAM_ADALN; zero for the
     * others): its build passes it to the shared code. */
    cic_adaln_strategy adaln;

    /* A rule between its keys the loader checks once they load: NULL, or
     * the key to point at with msg set. NULL: none. */
    const char *(*keys_check)(char *msg, size_t cap, const struct cic_xform_spec_s *x);
    /* Its checks against the model (sizes, Hadamard orders) that the
     * common ones (xform.c) do not make: CIC_OK or CIC_EINPUT with d at
     * the transform's line. NULL: none. */
    int (*check)(const cic_xform_chain *ch, const struct cic_xform_spec_s *x, cic_diag *d);
    /* The rewrite of the model in c (c->m, in place, at c->p bits): 0, or
     * -1 when memory runs out. NULL for a kind that builds a new graph. */
    int (*apply)(struct cic_xf_ctx_s *c, const struct cic_xform_spec_s *x);
    /* The new model from the original (the adaLN strategies), or NULL
     * with d set; own is orig itself when the build may take its values
     * (cic_model_clone_take: nothing reads them after), else NULL. NULL
     * for a kind that rewrites in place. */
    struct cic_model_s *(*build)(const struct cic_model_s *orig, struct cic_model_s *own,
                                 const struct cic_xform_spec_s *x, mpfr_prec_t engine_prec,
                                 cic_diag *d);
    /* What it leaves of the norms (fused gains and biases). NULL: all. */
    void (*norms_after)(cic_norm_state *s, const struct cic_xform_spec_s *x);
    /* The FLOPs its online ops add at run time, per site (enum cic_site
     * of model/op.h), on a block with norms (not adaLN). NULL: none. */
    void (*flops)(double *site, const struct cic_model_cfg_s *m, const struct cic_xform_spec_s *x);
    /* An adaLN strategy's rewrite of the dit graph's FLOPs. */
    void (*flops_dit)(cic_dit_flops *f, const struct cic_model_cfg_s *m,
                      const struct cic_xform_spec_s *x);
    /* How its model holds its weights. NULL: as MPFR numbers. */
    void (*memory)(cic_xform_mem *mm, const struct cic_xform_spec_s *x);
    /* Its fields in report.json after the common ones: how many set in f
     * (at most cap). NULL: none. */
    int (*report)(cic_xform_field *f, int cap, const struct cic_xform_spec_s *x);
} cic_xform_desc;

#endif
