/* SPDX-License-Identifier: MIT */
/* xform_util.h: value helpers shared by the transforms (xform.c, adaln.c).
 * Internal to src/xform. */
#ifndef CIC_XFORM_UTIL_H
#define CIC_XFORM_UTIL_H

#include "../base/mpvec.h"
#include "../base/mpgemm.h"
#include "../model/model.h"

/* Bits of the Q kinds a descriptor takes (cic_xform_desc.q_kinds). */
#define CIC_XQ(k) (1u << (k))
#define CIC_XQ_PLAIN (CIC_XQ(CIC_Q_IDENTITY) | CIC_XQ(CIC_Q_RANDOM) | CIC_XQ(CIC_Q_HADAMARD))

/* A field of report.json (cic_xform_desc.report). */
static inline cic_xform_field _cic_xf_field(const char *key, enum cic_xfield_type type,
                                            const char *s, long long i)
{
    cic_xform_field f = {key, type, s, i, 0};
    return f;
}

/* The adaLN strategies' report fields: stream and fast, and with
 * calibration the sample it folds; how many set in f. */
int _cic_xf_adaln_report(cic_xform_field *f, int cap, const cic_xform_spec *x, bool calibration);
/* The same without the calibration sample (every strategy but static-fold). */
int _cic_xf_adaln_report_plain(cic_xform_field *f, int cap, const cic_xform_spec *x);
/* What every adaLN strategy holds while it rewrites (the memory estimate):
 * its weights as they are made, no recipes, Q as doubles too. */
void _cic_xf_adaln_memory(cic_xform_mem *mm, const cic_xform_spec *x);

/* An online rotation of R rows of width w as an adaLN strategy x builds
 * it, in FLOPs: the fast transform (x->fast; regular with q =
 * regular-hadamard) or a dense product, on blocks of G (0: the whole
 * row). */
double _cic_xf_dit_rot(double R, int w, int G, const cic_xform_spec *x);

/* A Hadamard Q = (hk (x) Syl_{d/K}) diag(sign) / sqrt(d), applied without
 * forming it: the weights it rotates become recipes (model/lazy.h). */
typedef struct {
    int d, K;
    signed char *hk, *sign;
} cic_xf_hq;

typedef struct cic_xf_ctx_s {
    cic_model *m;
    mpfr_prec_t p;      /* output precision */
    cic_dot_scratch dot;
    int ok;
    bool blas;          /* dense products by Q through dgemm (f64-openblas) */
    const cic_xf_hq *hq; /* set while a rotation's Q is that Hadamard */
    /* with blas, while a rotation runs: its Q (qd_n x qd_n) as doubles, so
     * the products by it are doubles kept as doubles (model.h) */
    const double *qd;
    int qd_n;
    /* doubles a product through dgemm reads, reused from one weight to the
     * next (_cic_xf_rotate_f64; freed by _cic_xf_ctx_clear) */
    double *in;
    size_t in_n;
} cic_xf_ctx;

/* The op of m that writes tensor t, or -1. */
int _cic_xf_producer(const cic_model *m, int t);
/* The head width of m's attention ops (one for every layer), 0 without any. */
int _cic_xf_head_dim(const cic_model *m);
/* Current values of tensor id (hp, or exact f32 copies in *tmp to destroy). */
const mpfr_t *_cic_xf_vals(const cic_model *m, int id, mpfr_t **tmp);
/* Install v (ownership taken, p bits) as tensor id's values (f32 rounded). */
void _cic_xf_install(cic_model *m, int id, mpfr_t *v, mpfr_prec_t p);
/* A dot scratch wide and precise enough for every tensor of m. */
int _cic_xf_ctx_init(cic_xf_ctx *c, cic_model *m, mpfr_prec_t p);
/* Frees what the context holds (the scratches). */
void _cic_xf_ctx_clear(cic_xf_ctx *c);
/* Subtract the mean over dim 0 (columns of a [d, k] writer) or dim 1 (rows). */
int _cic_xf_center(cic_xf_ctx *c, int id, int dim);
/* The same at 53 bits in doubles: each of lines lines of n values (value
 * j of line l at t[l ls + j js]) less its mean as _cic_xf_center makes it
 * (the correctly rounded sum, divided by n, each once at 53 bits), the
 * subtraction in double, which rounds as MPFR's at 53 bits (exactly in
 * the subnormal range); lines split over threads. 0; 1 when a mean is not
 * a double (t is then partly centered: drop it); -1 when memory runs
 * out. */
int _cic_xf_center_f64(double *t, int lines, int n, size_t ls, size_t js, int threads);
/* _cic_xf_center(c, id, 1) so, when c->p is 53 and id's values are
 * doubles, the result held as doubles: 0, 1 (not done: take
 * _cic_xf_center), -1. */
int _cic_xf_center_rows_f64(cic_xf_ctx *c, int id);
/* Tensor id times Q (d x d doubles) through dgemm, the doubles kept:
 * right W Q (cols d), or left Q^T W (rows d). 0, or -1 (out of memory). */
int _cic_xf_rotate_f64(cic_xf_ctx *c, int id, bool left, const double *q, int d);
/* Tensor id [rows, d] times Q (d x d, row-major). */
int _cic_xf_rotate_right(cic_xf_ctx *c, int id, const mpfr_t *q, int d);
/* A writer's weight [d, k] (Q^T W) or its bias [1, d] (b Q): which one is
 * said, not guessed from the shape (at d = 1 a weight has one row too). */
int _cic_xf_rotate_writer(cic_xf_ctx *c, int id, bool bias, const mpfr_t *q, int d);

/* Fold every norm's gain (and with layernorm its bias and mean) into its
 * readers: the LayerNorms (layernorm) or the RMSNorms with a gain. With
 * bake_mean the mean is baked into every writer and the input (C), with
 * center_input the input alone is centered (a mistake on RMSNorm). 0, or
 * -1 when memory runs out. */
int _cic_xf_fuse_norms(cic_xf_ctx *c, bool layernorm, bool bake_mean, bool center_input);

/* R2, kind rotate-heads (rotate_heads.c): the value heads and the output
 * projection's columns. 0, or -1 when memory runs out. Its mistakes by
 * number (cic_xform_spec.mistake; their names in kind_rotate_heads.c). */
enum { CIC_ROTATE_HEADS_SKIP_OUT_PROJ = 1, CIC_ROTATE_HEADS_PER_QUERY_HEAD = 2 };
int _cic_xf_rotate_heads(cic_xf_ctx *c, const cic_xform_spec *x);

/* Rows r0 .. r0+dh-1 of a [rows, cols] tensor's values src into dst:
 * Q^T times that block (rotate_heads.c). */
void _cic_xf_rows_block(cic_xf_ctx *c, mpfr_t *dst, const mpfr_t *src, int cols, int r0,
                        const mpfr_t *q, int dh);
/* The values of tensor id as a fresh vector at c->p (NULL: out of memory). */
mpfr_t *_cic_xf_values_copy(cic_xf_ctx *c, int id);
/* R3, kind online-qk (online_down.c): per-head fast Hadamards of q and k
 * before attention. 0, or -1 when memory runs out. Its mistake by number
 * (its name in kind_online_qk.c). */
enum { CIC_ONLINE_QK_BEFORE_ROPE = 1 };
int _cic_xf_online_qk(cic_xf_ctx *c, const cic_xform_spec *x);

/* R4, kind online-down (online_down.c): an FWHT op before every MLP writer,
 * its transpose fused into the writer. 0, or -1 when memory runs out. Its
 * mistake by number (its name in kind_online_down.c). */
enum { CIC_ONLINE_DOWN_SKIP_ONLINE = 1 };
int _cic_xf_online_down(cic_xf_ctx *c, const cic_xform_spec *x);

/* fn(ctx, lo, hi) over contiguous ranges of [0, n), one per thread of
 * threads (a run's cic_rt_matmul_threads; <= 0: one per online core;
 * one range when work, about the elementary
 * operations in all, is below a million: a thread costs more). fn
 * returns 0, a positive code of its own, or -1 when memory runs out;
 * after every range ran this returns -1 if a range did, else the largest
 * code. For work whose every output is computed alone (the bits do not
 * depend on the split). */
int _cic_xf_par(int n, double work, int threads, int (*fn)(void *ctx, int lo, int hi),
                void *ctx);

/* A rotation's Q of order d: MPFR values at p or, with transform
 * precision f64-openblas, doubles (p = 53: the same values) and the MPFR
 * form made from them only when asked for (_cic_xf_aq_mp: NULL when
 * memory runs out; q keeps it). _cic_xf_aq_clear frees both. */
typedef struct {
    int d;
    mpfr_prec_t p;
    mpfr_t *mp;
    double *f64;
} cic_xf_aq;
const mpfr_t *_cic_xf_aq_mp(cic_xf_aq *q);
void _cic_xf_aq_clear(cic_xf_aq *q);

/* static-fold (adaln_fold.c): every reader and writer of orig's graph in
 * m folded with the calibration sample's modulation and Q (centered
 * writers on a centered stream). 0, or -1 when memory runs out. */
int _cic_xf_static_fold(cic_model *m, const cic_model *orig, const cic_xform_spec *x,
                        cic_xf_aq *q, bool center, mpfr_prec_t p);

/* The adaLN strategies (adaln.c): build strategy s's dit graph (its
 * descriptor's adaln) from the original dit model and fill its rotation,
 * folded and rotated weights; own: orig when its values may be taken (the
 * kinds' build). A strategy's build calls it with its s. */
cic_model *cic_adaln_apply(const cic_model *orig, cic_model *own, const cic_xform_spec *x,
                           const cic_adaln_strategy *s, mpfr_prec_t engine_prec, cic_diag *d);

#endif
