/* SPDX-License-Identifier: MIT */
/* verify.h: cicheck verify ORIGINAL TRANSFORMED, a user's rewritten
 * checkpoint against its original, layer by layer (the llama family of
 * src/model/checkpoint.h, OPT, GPT-J, or a timm ViT on hidden states).
 *
 * Both checkpoints run on the same block input in MPFR: hidden states X
 * (seeded, or a file's "input"; the transformed model's is X Q when the
 * residual rotation Q is given), or token ids (seeded, or a file's
 * "input_ids") through each checkpoint's own embed_tokens, so a rewrite's
 * rotated embeddings E Q are checked too.
 * The transformed checkpoint is described by what the user's tool did: norm
 * gains absent (fused: read as 1) or kept, the residual rotation Q from a
 * file (--q) or none, and the online ops it needs at run time (R4 before
 * down_proj, R3 on q and k after RoPE: the plain Hadamard H / sqrt(w) of
 * cicheck's construction). Per layer, the residual stream after the layer,
 * of the transformed model mapped back (y Q^T) against the original's:
 * ce = ||y Q^T - x||_2 / ||x||_2 with a verdict whose thresholds follow the
 * precision the rewrite is stored in: the fewest significand bits among the
 * tensors the transformed model reads (its weights; its embedding when the
 * input is token ids) and Q (a float dtype; integers are exact), F32 as a
 * float32 transform, BF16 and F16 as a bf16 one, F64 as an f64 one; the
 * tensor that set them is reported. Without --q, Q is recovered from the
 * embeddings when they determine it (verify_q.c); otherwise only the head
 * readout (the logits, comparable as they are) is compared, on token ids
 * when the input would have been seeded hidden states (the rewrite's X Q
 * needs Q). Then the error of both models against the original's MPFR
 * truth in the f32 engine, or in the f32 and low-precision engines a case
 * file's [engines] name (--case). */
#ifndef CIC_VERIFY_H
#define CIC_VERIFY_H

#include "../base/base.h"
#include "../case/case.h"
#include "../model/checkpoint.h"
#include "verify_diag.h"

#include <mpfr.h>

#include <stdbool.h>
#include <stdint.h>

typedef struct {
    char orig[1024], trans[1024];
    char q_file[1024], q_tensor[256]; /* "" none; tensor "" the file's only one */
    bool online_down, online_qk;
    /* OPT, GPT-J, timm: the rewrite fused every LayerNorm's gain and bias into its
     * readers and runs it as RMSNorm on a centred stream (the writers'
     * outputs and the embeddings without their row mean), as QuaRot and
     * SliceGPT do: the transformed model's norms do not centre, and its
     * stream is compared with the original's without the row mean */
    bool ln_fused;
    bool ln_given;      /* --layernorm given (DiT: default fused, the centred stream) */
    /* DiT: the adaLN strategy the rewrite follows, an adaLN transform
     * kind's name ("" none; verify_dit.h) */
    char adaln[32];
    int tokens, samples;
    int layer0, layers; /* layers 0: every layer from layer0 */
    uint64_t seed;
    int prec;           /* MPFR bits */
    /* the block input: seeded hidden states (random), seeded token ids
     * through each model's own embed_tokens (tokens), or a file's hidden
     * states ("input") or token ids ("input_ids") */
    enum cic_input_kind input_kind;
    char input_file[1024];
    /* a case file whose [engines] name the f32 and low-precision engines
     * both models also run in ("" the f32 engine over OpenBLAS alone) */
    char case_file[1024];
    bool mpfr_only;     /* --engine mpfr: MPFR decides every verdict (no f64) */
    int threads;        /* MPFR threads (the bits do not depend on it); 0: one
                         * per online core */
} cic_verify_opts;

#define CIC_VERIFY_MAX_LAYERS CIC_CASE_MAX_LAYERS
#define CIC_VERIFY_MAX_ENGINES (2 + CIC_MAX_LOWP)

/* Where the per-layer view's Q came from. */
enum cic_verify_qsrc {
    CIC_VERIFY_Q_NONE,
    CIC_VERIFY_Q_FILE,
    CIC_VERIFY_Q_RECOVERED,
    CIC_VERIFY_Q_IDENTITY /* no --q, no token embedding (timm): no rotation */
};

/* Which engine decided a verdict: f64 with its proven bound (the enclosure
 * of the residual measure lies on one side of the thresholds), or MPFR at
 * --mpfr-prec (the enclosure straddles one, or an op has no f64 bound). */
enum cic_verify_by { CIC_VERIFY_BY_F64, CIC_VERIFY_BY_MPFR, CIC_VERIFY_BY_COUNT };
extern const char *const CIC_VERIFY_BY_NAME[CIC_VERIFY_BY_COUNT];

/* What recovering Q from the token embeddings found (verify_q.c). */
typedef struct {
    int rows, d;        /* the embeddings' rows (the vocabulary) and width */
    double fit;         /* ||E_A Q - E_B||_F / ||E_B||_F at the Q found (double) */
    double orth_bound;  /* proven: ||Q^T Q - I||_2 <= orth_bound (NaN: not computed) */
    char why[600];      /* when Q was not recovered: why ("" when it was) */
} cic_verify_qfit;

typedef struct {
    int layer0, n_layers;
    bool have_q;        /* the per-layer view runs: Q from --q or recovered */
    enum cic_verify_qsrc q_src;
    double q_orth;      /* --q: max |Q^T Q - I| of the file; recovered: qfit.orth_bound */
    char q_dtype[8];    /* --q: the tensor's dtype */
    cic_verify_qfit qfit; /* without --q: the recovery */
    /* without Q, seeded token ids replaced the seeded hidden states (the
     * rewrite's input X Q cannot be formed) */
    bool tokens_forced;
    int bits;           /* storage precision of the rewrite (see above) */
    /* what set bits: a tensor of the transformed checkpoint (storage_q
     * false) or Q's tensor in its file, with its dtype, and how many tensors
     * read have that many bits */
    cic_ckpt_storage storage;
    bool storage_q;
    double eq, br;      /* verdict thresholds */
    double ce[CIC_VERIFY_MAX_LAYERS];
    enum cic_verdict verdict[CIC_VERIFY_MAX_LAYERS];
    /* per layer: the engine that decided it, the f64 bound (ce of the f64
     * midpoints +- bound encloses the exact ce on the streams; NaN when
     * the f64 run has no bound) and the seconds the layer took */
    enum cic_verify_by by[CIC_VERIFY_MAX_LAYERS];
    double bound[CIC_VERIFY_MAX_LAYERS], sec[CIC_VERIFY_MAX_LAYERS];
    char f64_why[200];  /* why the f64 run has no bound ("" when it has) */
    int first_bad;      /* first layer (checkpoint numbering) not equivalent, -1 */
    double head_ce;
    enum cic_verdict head_verdict;
    enum cic_verify_by head_by;
    double head_bound;
    /* per engine (f32-openblas, f32-fixed-order, then the case's [[engines.lowp]]
     * by name): rel_norm2 of each model's logits against the original's truth */
    int n_eng;
    char eng[CIC_VERIFY_MAX_ENGINES][CIC_NAME_MAX + 8];
    double eng_orig[CIC_VERIFY_MAX_ENGINES], eng_trans[CIC_VERIFY_MAX_ENGINES];
    cic_model_cfg cfg;  /* the original's, as read */
    double seconds;
    cic_vdiag diag;     /* what is wrong with layer first_bad (verify_diag.h) */
} cic_verify_result;

/* The block input's sizes when neither the command line nor a file gives
 * them (seeded input). */
#define CIC_VERIFY_TOKENS 16
#define CIC_VERIFY_SAMPLES 2

/* o->tokens and o->samples (0: not given) before cic_verify: the input
 * file's when o has one (src/model/input_shape.h; a value given must agree
 * with its shape, and splits a 2-D "input"'s rows), else the defaults
 * above for those not given. CIC_OK, or CIC_EINPUT with d set. */
int cic_verify_input_dims(cic_verify_opts *o, cic_diag *d);

/* Run the check (o->tokens and o->samples set: cic_verify_input_dims). CIC_OK (every verdict equivalent), CIC_EFAIL (one is not),
 * CIC_EINPUT (bad input: d says why), CIC_EINTERNAL (out of memory). */
int cic_verify(const cic_verify_opts *o, cic_verify_result *r, cic_diag *d);

/* Q recovered from the token embeddings of checkpoints orig (E_A, its rows
 * without their mean when center) and trans (E_B): the least-squares Q of
 * E_A Q = E_B, kept only when the fit's relative residual is at most eq and
 * ||Q^T Q - I||_2 is proven at most eq / 8, so that the recovered Q uses
 * at most an eighth of the equivalence threshold eq and the thresholds stay
 * those of the storage. *q: d x d values at 53 bits (cic_mpvec_destroy), or
 * NULL with f->why set when the embeddings do not determine Q (fewer rows
 * than d, rank deficient, not a rotation, not orthogonal, unreadable, or
 * more than half the machine's memory for cfg's sizes: d_model and the
 * vocabulary d_out). threads: as for cic_verify_q_orth_bound. 0, or -1
 * when memory runs out (d set). */
int cic_verify_q_recover(mpfr_t **q, cic_verify_qfit *f, const char *orig, const char *trans,
                         const cic_model_cfg *cfg, bool center, double eq, int threads,
                         cic_diag *d);
/* The least-squares q (d x d, row-major) of ea q = eb (rows x d each,
 * row-major) through the normal equations in double with one step of
 * refinement, and the relative residual into *fit. 0; 1 with why set when
 * rows < d or ea is rank deficient (a Cholesky pivot below 2^-36 of the
 * largest diagonal of ea^T ea); -1 when memory runs out. */
int cic_verify_q_lsq(double *q, double *fit, const double *ea, const double *eb, int rows, int d,
                     char *why, size_t cap);
/* A proven upper bound on ||Q^T Q - I||_2 for the d x d doubles q (its
 * Frobenius norm bounded in MPFR: exact products, correctly rounded sums,
 * the rest rounded up); +Inf for a non-finite q or when memory runs out.
 * Q^T Q's rows are split over threads threads (0: one per online core). */
double cic_verify_q_orth_bound(const double *q, int d, int threads);

/* report.json of a verify run into path (atomically). 0, or -1 with d set. */
int cic_verify_write_json(const cic_verify_opts *o, const cic_verify_result *r,
                          const char *path, cic_diag *d);

/* report.md of a verify run into path (atomically): the verdicts, the
 * layer table and the diagnosis (verify_diag_md.c). 0, or -1 with d set. */
int cic_verify_write_md(const cic_verify_opts *o, const cic_verify_result *r, const char *path,
                        cic_diag *d);

#endif
