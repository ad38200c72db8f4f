/* SPDX-License-Identifier: MIT */
/* model.h: the graph both engines run, and the weights it carries.
 *
 * A model is a list of tensors and a list of ops in execution order (SSA: an
 * op writes a fresh tensor). Weights and inputs hold float32 values (what the
 * f32 engines use) and, after a transform computed at higher precision, the
 * unrounded values too (what the MPFR verdict uses). Layouts follow PyTorch:
 * a linear weight is [out, in] and y = x W^T + b; activations are row-major
 * with rows = tokens, all samples stacked (sample s owns rows s*N .. s*N+N-1).
 *
 * Ops carry a flop "site" so that costs can be split per place in the block,
 * and linear ops carry a role (reads the residual stream through a norm,
 * writes into it, or neither) so transforms find the weights to rewrite
 * without knowing the block kind. New block kinds (dit) add ops and sites;
 * the engines and transforms need no rewrite. */
#ifndef CIC_MODEL_H
#define CIC_MODEL_H

#include "../base/rt.h"
#include "../base/sha256.h"
#include "../kind/kind.h"

#include <mpfr.h>
#include <stdbool.h>

/* The ops of a graph (their kinds, sites, shape checks and FLOP formulas)
 * are in op.h. */
#include "op.h"

/* The descriptor of block kind k (blocks.c, from CIC_BLOCK_LIST of
 * src/kind/block.h, one descriptor per file block_<name>.c). */
const cic_block_desc *cic_block(enum cic_block_kind k);

enum cic_tensor_role { CIC_T_WEIGHT, CIC_T_INPUT, CIC_T_ACT };

/* What the rows of an activation or input tensor are: tokens (R = B N rows),
 * samples (B rows: conditioning, modulation), or a matrix per sample (B
 * blocks of block_rows rows: weights folded per sample). */
enum cic_rows { CIC_ROWS_TOKENS, CIC_ROWS_SAMPLES, CIC_ROWS_SAMPLE_MATRIX };

typedef struct {
    char name[96];
    enum cic_tensor_role role;
    int rows, cols;
    enum cic_rows rows_kind;
    int block_rows;  /* CIC_ROWS_SAMPLE_MATRIX: rows per sample */
    float *f32;      /* weights and inputs: rows*cols values; NULL for ACT */
    bool f32_mapped; /* f32 points into a checkpoint's read-only mapping (the
                      * model's keep): never written, not freed */
    mpfr_t *hp;      /* unrounded values at hp_prec, or NULL: f32 is exact */
    mpfr_prec_t hp_prec;
    /* or the unrounded values as doubles (hp_prec <= 53, each value exact
     * at hp_prec; hp and lazy NULL): what products through dgemm give
     * (transform precision f64-openblas), at 8 bytes a value */
    double *f64;
    /* or the unrounded values as a recipe, made when read (lazy.h; then hp
     * is NULL and f32 holds them rounded): cic_tensor_hp_make */
    struct cic_lazy *lazy;
    /* While the model is built: values still to be drawn (CIC_FILL_*), with
     * this std. Every builder draws its weights at the end, in tensor order
     * (each tensor's values depend on the seed and its name only, so the
     * order does not change a bit), which is what lets a long build report
     * its progress against a known total. */
    unsigned char fill;
    double fill_std;
} cic_tensor;

enum { CIC_FILL_NONE, CIC_FILL_DRAW, CIC_FILL_GAIN };

typedef struct cic_model_s {
    cic_model_cfg cfg;
    int rows;        /* tokens * samples */
    cic_tensor *t;
    int n_t, cap_t;
    cic_op *ops;
    int n_ops, cap_ops;
    int input;       /* tensor id of the block input X0 [rows, d] */
    int cond;        /* dit: tensor id of the conditioning c [samples, d_cond]; -1 */
    int output;      /* tensor id of the readout */
    int residual;    /* tensor id of the last residual stream */
    /* Residual readout: the map back to the original basis, applied in MPFR
     * to every engine's output: y Q^T, then centered when center_out. Set
     * only when the readout is the residual stream. */
    mpfr_t *out_q;   /* d x d at out_q_prec, NULL = identity */
    mpfr_prec_t out_q_prec;
    bool center_out;
    /* The rotation of the residual stream as doubles (d x d, row-major;
     * NULL = identity), whatever the readout: each block's output of the
     * transformed model is the original's times it (pipeline/depth.c maps
     * the per-block errors back with it). Set by the rotations. */
    double *stream_q;
    /* What the model's mapped tensors point into (an open checkpoint),
     * released by keep_free when the model is destroyed; NULL none. */
    void *keep;
    void (*keep_free)(void *keep);
    /* The runtime context of the run the model belongs to (base/rt.h:
     * threads, the slice path, counters), read by whatever builds,
     * transforms or runs it; clones and transformed models keep it. NULL:
     * the default. Not owned: it outlives the model. */
    cic_rt *rt;
} cic_model;

/* Progress of a build: fn is called after each tensor's values are drawn,
 * with the values drawn so far and the total (seconds of work at d = 1152,
 * much more at d = 4096); fn may be NULL. */
typedef struct {
    void (*fn)(void *ctx, double done, double total);
    void *ctx;
    cic_rt *rt; /* the context the model gets (cic_model.rt; may be NULL) */
} cic_model_progress;

/* Build the original model of a case: graph and weights (a pure function of
 * the case's seed and the tensor names). NULL on allocation failure.
 * cic_model_create_progress reports the drawing of the weights to p (may be
 * NULL). */
cic_model *cic_model_create(const cic_model_cfg *cfg, enum cic_readout readout);
cic_model *cic_model_create_progress(const cic_model_cfg *cfg, enum cic_readout readout,
                                     const cic_model_progress *p, cic_diag *d);
/* The same with the weight values from src (source.h; for the two above
 * the checkpoint when cfg->checkpoint is set, else the seeded generator).
 * NULL with d set (d may be NULL) when the source fails, NULL alone when
 * memory runs out. */
struct cic_weight_source_s;
cic_model *cic_model_create_from(const cic_model_cfg *cfg, enum cic_readout readout,
                                 const struct cic_weight_source_s *src,
                                 const cic_model_progress *p, cic_diag *d);
void cic_model_destroy(cic_model *m);
/* A deep copy (weights, hp values and the readout map). */
cic_model *cic_model_clone(const cic_model *m);
/* The same copy with m's values moved into it instead (weights, hp values,
 * recipes, the readout map; a weight mapped from a checkpoint is copied,
 * as the copy's to rewrite): m keeps its graph, its tensors' shapes and
 * its mapped weights, and is then only read for those or destroyed. NULL
 * when memory runs out (m is then only fit to be destroyed). */
cic_model *cic_model_clone_take(cic_model *m);

/* Append a tensor / op; ids returned, -1 on allocation failure. For WEIGHT
 * and INPUT tensors the f32 storage is allocated (zeroed). */
int cic_model_tensor_add(cic_model *m, const char *name,
                         enum cic_tensor_role role, int rows, int cols);
int cic_model_op_add(cic_model *m, const cic_op *op);
int cic_model_tensor_find(const cic_model *m, const char *name);
/* Give tensor id high-precision storage at prec (values +0); 0 or -1. */
int cic_model_tensor_hp(cic_model *m, int id, mpfr_prec_t prec);

/* Whether tensor t carries unrounded values (hp or a recipe), their
 * precision, and the values themselves: t->hp, or a recipe's made into
 * *tmp (the caller destroys it, rows * cols values); NULL when memory runs
 * out or t has none. */
bool cic_tensor_has_hp(const cic_tensor *t);
mpfr_prec_t cic_tensor_hp_prec(const cic_tensor *t);
const mpfr_t *cic_tensor_hp_make(const cic_tensor *t, mpfr_t **tmp);
/* All rows * cols values of t as doubles, in a fresh array (the caller
 * frees it): the unrounded values (hp, a recipe's, the doubles) each
 * rounded once to double, or the float32 ones when t has none or rounded
 * is set. NULL when memory runs out. */
double *cic_tensor_f64_create(const cic_tensor *t, bool rounded);
/* The same into v (rows * cols doubles): 0, or -1 when memory runs out. */
int cic_tensor_f64_get(double *v, const cic_tensor *t, bool rounded);
/* The same for the values lo .. hi - 1 (row-major index) into v[0 ..
 * hi - lo - 1], for a tensor without a recipe or with rounded set (a
 * recipe makes whole lines: cic_lazy_make_f64). */
void cic_tensor_f64_range(double *v, const cic_tensor *t, bool rounded, size_t lo, size_t hi);
/* Install v (rows * cols doubles, ownership taken) as tensor id's unrounded
 * values at prec <= 53 (each exact at prec), replacing hp or a recipe; f32
 * gets them rounded to binary32. */
void cic_tensor_set_f64(cic_tensor *t, double *v, mpfr_prec_t prec);
/* The same with MPFR values v at prec (ownership taken). */
void cic_tensor_set_hp(cic_tensor *t, mpfr_t *v, mpfr_prec_t prec);

/* A large array of n values of size bytes (a tensor's values, a product,
 * Q), zeroed when zero is set; free() frees it. From 2 MiB on it is
 * aligned for transparent huge pages (a hint: without them it works the
 * same): where a 4 KiB page fault costs about 10 us (a VM; copying a 7B
 * layer's 876 MB of weights took 2.5 s, nearly all in faults), a 2 MiB
 * one zeroes its page in about 100 us. NULL when memory runs out or the
 * size overflows. */
void *cic_model_array_alloc(size_t n, size_t size, bool zero);

/* Rows of tensor id in a run over n_samples samples. */
int cic_model_run_rows(const cic_model *m, int id, int n_samples);

/* Output shape of the readout. */
int cic_model_out_cols(const cic_model *m);

/* SHA-256 (hex) over every WEIGHT and INPUT tensor: name, shape and f32
 * bytes (little-endian), in tensor order. */
void cic_model_weights_sha256(char hex[65], const cic_model *m);

/* SHA-256: src/base/sha256.h (included above). */

#endif

