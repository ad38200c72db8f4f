/* SPDX-License-Identifier: MIT */
/* verify.c: a rewritten checkpoint against its original, layer by layer
 * (verify.h). */
#include "verify_int.h"

#include "../base/mpgemm.h"
#include "../base/mpvec.h"
#include "../base/safetensors_read.h"
#include "../engine/engine.h"
#include "../metric/metric.h"
#include "../model/checkpoint.h"
#include "../model/input_shape.h"
#include "../model/source.h"
#include "../report/report.h"
#include "../xform/qmat.h"
#include "../xform/xform.h"

#include <jansson.h>
#include <math.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* One layer of both models (the case estimate of one layer with one
 * transformed model) and the streams (per model rows x d doubles, and two
 * float streams per engine), against half the machine's memory: the depth
 * does not count, the layers stream. */
static int memory_guard(const cic_verify_opts *o, const cic_model_cfg *cfg, cic_diag *d)
{
    static cic_case c;
    long pages = sysconf(_SC_PHYS_PAGES), psz = sysconf(_SC_PAGESIZE);
    double limit = pages > 0 && psz > 0 ? 0.5 * (double)pages * (double)psz : 8.0 * (1 << 30);
    double est, resid;
    char why[512];
    memset(&c, 0, sizeof c);
    c.model = *cfg;
    c.model.layers = 1;
    c.mpfr_prec = o->prec;
    c.n_xf = 1;
    c.xf[0].after = -1;
    /* a loaded model holds float32 values only: counted as one whose
     * weights are recipes (8 bytes a weight, an overestimate) */
    c.xf[0].kind = CIC_XFORM_FOLD_RMSNORM_GAMMA;
    resid = 2.0 * cfg->tokens * cfg->samples * cfg->d_model * (16.0 + 8 * (2 + CIC_MAX_LOWP));
    est = (double)cic_case_memory_estimate(&c) + resid;
    if (est <= limit)
        return CIC_OK;
    cic_case_memory_explain(why, sizeof why, &c);
    cic_diag_set(d, o->orig, 0, 0, "verify needs about %.1f MiB, more than half the machine's "
                 "memory (%.1f MiB): %s (one layer), and %.1f MiB of streams; give fewer "
                 "--tokens or --samples, or a lower --mpfr-prec", est / 1048576.0,
                 limit / 1048576.0, why, resid / 1048576.0);
    return CIC_EINPUT;
}

/* The layers asked for (--layers) against the checkpoint's: an error naming
 * both when they are not there, or more than one run compares. */
static int check_layers(const cic_verify_opts *o, const cic_ckpt *k, const char *dir,
                        cic_diag *d)
{
    int n = cic_ckpt_layers(k);
    int64_t last = o->layers ? (int64_t)o->layer0 + o->layers - 1 : (int64_t)n - 1;
    if (o->layer0 >= n || last >= n) {
        cic_diag_set(d, dir, 0, 0, "--layers asks for layers %d .. %lld; the checkpoint has %d "
                     "(num_hidden_layers; layers 0 .. %d)", o->layer0, (long long)last, n,
                     n - 1);
        return CIC_EINPUT;
    }
    if (last - o->layer0 + 1 > CIC_VERIFY_MAX_LAYERS) {
        cic_diag_set(d, dir, 0, 0, "%lld layers from layer %d: verify compares at most %d at "
                     "once; give --layers", (long long)(last - o->layer0 + 1), o->layer0,
                     CIC_VERIFY_MAX_LAYERS);
        return CIC_EINPUT;
    }
    return CIC_OK;
}

/* cfg of checkpoint k (layers from o) and its checks: a family verify
 * reads, and the original's sizes when cmp is given (a mismatch is an error
 * naming both). */
static int configure(const cic_verify_opts *o, const cic_ckpt *k, const char *dir, bool fused,
                     const cic_model_cfg *cmp, cic_model_cfg *cfg, cic_diag *d)
{
    memset(cfg, 0, sizeof *cfg);
    cfg->tokens = o->tokens;
    cfg->samples = o->samples;
    cfg->seed = o->seed;
    cfg->ckpt_fused = fused;
    cfg->massive_tokens = 1;
    cfg->input_kind = o->input_kind;
    cic_strlcpy(cfg->input_file, o->input_file, sizeof cfg->input_file);
    if (check_layers(o, k, dir, d) != CIC_OK)
        return CIC_EINPUT;
    cfg->layers = o->layers ? o->layers : cic_ckpt_layers(k) - o->layer0;
    if (cic_ckpt_config(k, cfg, o->layer0, d) != CIC_OK)
        return CIC_EINPUT;
    if (!cic_ckpt_verifiable(k)) {
        cic_diag_set(d, dir, 0, 0, "verify reads the llama family (llama, mistral, qwen2), "
                     "OPT, GPT-J and timm ViTs");
        return CIC_EINPUT;
    }
    if (o->ln_fused && cfg->block != CIC_BLOCK_PRELN && cfg->block != CIC_BLOCK_PARALLEL) {
        cic_diag_set(d, dir, 0, 0, "--layernorm fused is for OPT's LayerNorm (and GPT-J's, "
                     "timm ViTs'); this checkpoint has RMSNorm (its fused gains are read as 1 "
                     "anyway)");
        return CIC_EINPUT;
    }
    if (cmp && cmp->rotary_dim != cfg->rotary_dim) {
        cic_diag_set(d, dir, 0, 0, "rotary_dim %d here, %d in the original (0: the whole head)",
                     cfg->rotary_dim, cmp->rotary_dim);
        return CIC_EINPUT;
    }
    if (cmp && cmp->layers != cfg->layers) {
        cic_diag_set(d, dir, 0, 0, "%d layers from layer %d here, %d in the original: the "
                     "checkpoints must have the same layers (or give --layers)", cfg->layers,
                     o->layer0, cmp->layers);
        return CIC_EINPUT;
    }
    if (cmp && (cmp->d_model != cfg->d_model || cmp->heads != cfg->heads ||
                cmp->kv_heads != cfg->kv_heads || cmp->d_mlp != cfg->d_mlp ||
                cmp->d_out != cfg->d_out || cmp->rope_theta != cfg->rope_theta ||
                (float)cmp->eps != (float)cfg->eps)) {
        cic_diag_set(d, dir, 0, 0, "config.json differs from the original's: hidden_size %d "
                     "vs %d, heads %d vs %d, key/value heads %d vs %d, intermediate_size %d vs "
                     "%d, vocab_size %d vs %d, rope_theta %g vs %g, rms_norm_eps %g vs %g",
                     cfg->d_model, cmp->d_model, cfg->heads, cmp->heads, cfg->kv_heads,
                     cmp->kv_heads, cfg->d_mlp, cmp->d_mlp, cfg->d_out, cmp->d_out,
                     cfg->rope_theta, cmp->rope_theta, cfg->eps, cmp->eps);
        return CIC_EINPUT;
    }
    return CIC_OK;
}

/* Checkpoint dir opened and its cfg (layers from o) checked, against the
 * original's sizes when cmp is given; NULL with d set. */
static cic_ckpt *open_cfg(const cic_verify_opts *o, const char *dir, bool fused,
                          const cic_model_cfg *cmp, cic_model_cfg *cfg, cic_diag *d)
{
    cic_ckpt *k = cic_ckpt_open(dir, d);
    if (!k)
        return NULL;
    if (configure(o, k, dir, fused, cmp, cfg, d) != CIC_OK ||
        (!cmp && memory_guard(o, cfg, d) != CIC_OK)) { /* before anything big */
        cic_ckpt_close(k);
        return NULL;
    }
    return k;
}

/* A model's graph without values (the storage needs names and shapes). */
static int fill_none(cic_model *m, const cic_model_progress *p, cic_diag *d)
{
    int id;
    (void)p;
    (void)d;
    for (id = 0; id < m->n_t; id++)
        m->t[id].fill = CIC_FILL_NONE;
    return 0;
}

static const cic_weight_source NO_VALUES = {"none", fill_none};

/* s += t, as if one pass had noted t's tensors after s's. */
static void storage_merge(cic_ckpt_storage *s, const cic_ckpt_storage *t)
{
    if (!t->tensor[0])
        return;
    if (!s->tensor[0] || t->bits < s->bits)
        *s = *t;
    else if (t->bits == s->bits)
        s->count += t->count;
}

/* The storage of the tensors the rewrite reads over every layer (cfg) and
 * its head (the embedding too when embeds), one layer's graph at a time:
 * the same as one pass over the whole model's. 0, or -1 (memory). */
static int storage_of(cic_ckpt_storage *s, const cic_ckpt *k, const cic_model_cfg *cfg,
                      int layer0, bool embeds, cic_rt *rt)
{
    cic_model_cfg c = *cfg;
    cic_model_progress mp = {NULL, NULL, rt};
    cic_ckpt_storage t;
    cic_model *m;
    int l, L = cfg->layers;
    c.layers = 1;
    c.input_kind = CIC_INPUT_RANDOM;
    memset(s, 0, sizeof *s);
    s->bits = 53;
    if (L > 1 && !(m = cic_model_create_from(&c, CIC_READOUT_RESIDUAL, &NO_VALUES, &mp, NULL)))
        return -1;
    for (l = 0; l < L - 1; l++) {
        m->cfg.layer0 = layer0 + l;
        cic_ckpt_storage_used(&t, k, m, false);
        storage_merge(s, &t);
    }
    if (L > 1)
        cic_model_destroy(m);
    c.layer0 = layer0 + L - 1;
    if (!(m = cic_model_create_from(&c, CIC_READOUT_HEAD, &NO_VALUES, &mp, NULL)))
        return -1;
    cic_ckpt_storage_used(&t, k, m, embeds);
    storage_merge(s, &t);
    cic_model_destroy(m);
    return 0;
}

/* Q from the file (o->q_file, tensor o->q_tensor or its only one) at 53
 * bits, its orthogonality checked, its storage into *qs (an integer Q is
 * exact: it holds its values at 53 bits); NULL with d set. */
static mpfr_t *load_q(const cic_verify_opts *o, int n, double *orth, cic_ckpt_storage *qs,
                      cic_diag *d)
{
    cic_xform_spec x;
    cic_stfile *f = cic_stfile_create(o->q_file, d);
    const cic_stfile_tensor *t;
    mpfr_t *q = NULL;
    if (!f)
        return NULL;
    memset(&x, 0, sizeof x);
    cic_strlcpy(x.name, "--q", sizeof x.name);
    x.kind = CIC_XFORM_ROTATE;
    cic_strlcpy(x.q_file, o->q_file, sizeof x.q_file);
    cic_strlcpy(x.q_tensor, o->q_tensor, sizeof x.q_tensor);
    if (!x.q_tensor[0] && cic_stfile_count(f) == 1)
        cic_strlcpy(x.q_tensor, cic_stfile_tensor_at(f, 0)->name, sizeof x.q_tensor);
    t = cic_stfile_find(f, x.q_tensor);
    if (!t) {
        if (x.q_tensor[0])
            cic_diag_set(d, o->q_file, 0, 0, "no tensor '%s'", x.q_tensor);
        else
            cic_diag_set(d, o->q_file, 0, 0, "%d tensors: name the rotation with --q-tensor",
                         cic_stfile_count(f));
        cic_stfile_destroy(f);
        return NULL;
    }
    memset(qs, 0, sizeof *qs);
    qs->bits = cic_stfile_dtype_bits(t->dtype) ? cic_stfile_dtype_bits(t->dtype) : 53;
    qs->count = 1;
    cic_strlcpy(qs->tensor, t->name, sizeof qs->tensor);
    cic_strlcpy(qs->dtype, CIC_STFILE_DTYPE_NAME[t->dtype], sizeof qs->dtype);
    cic_stfile_destroy(f);
    if (cic_q_file_check(orth, &x, n, "d_model", d) < 0)
        return NULL;
    if (!(*orth <= CIC_Q_FILE_ORTH_MAX)) {
        cic_diag_set(d, o->q_file, 0, 0, "tensor '%s' is not orthogonal: max |Q^T Q - I| = "
                     "%.3g, above %g", x.q_tensor, *orth, CIC_Q_FILE_ORTH_MAX);
        return NULL;
    }
    q = cic_mpvec_create((size_t)n * n, 53);
    if (q && cic_q_file(q, n, "d_model", &x, 53, d) < 0) {
        cic_mpvec_destroy(q, (size_t)n * n);
        return NULL;
    }
    return q;
}

/* Whether the block input is hidden states (rotated by Q for the rewrite)
 * rather than token ids (each model embeds them itself). */
static bool hidden_input(const cic_verify_opts *o)
{
    cic_diag d;
    cic_stfile *f;
    bool ids;
    if (o->input_kind == CIC_INPUT_TOKENS)
        return false;
    if (o->input_kind != CIC_INPUT_FILE)
        return true;
    memset(&d, 0, sizeof d);
    f = cic_stfile_create(o->input_file, &d); /* read once already: it opens */
    ids = f && !cic_stfile_find(f, "input") && cic_stfile_find(f, "input_ids");
    cic_stfile_destroy(f);
    return !ids;
}

/* The thresholds of a rewrite stored as sb says (Q's storage qs, when
 * given, if it has fewer bits): a float32 transform's for 24, bf16's for 8
 * and 11, f64's for 53. */
static void thresholds(cic_verify_result *r, const cic_ckpt_storage *sb,
                       const cic_ckpt_storage *qs, mpfr_prec_t prec)
{
    cic_xform_spec x;
    r->storage_q = qs && qs->bits < sb->bits;
    r->storage = r->storage_q ? *qs : *sb;
    r->bits = r->storage.bits;
    memset(&x, 0, sizeof x);
    x.prec = r->bits >= 53 ? CIC_TPREC_F64 : r->bits >= 24 ? CIC_TPREC_F32 : CIC_TPREC_BF16;
    cic_xform_thresholds(&r->eq, &r->br, &x, prec);
}

/* The case file of --case (its [engines] only), or NULL with d set. */
static cic_case *engines_case(const cic_verify_opts *o, cic_diag *d)
{
    cic_case *c = cic_calloc(1, sizeof *c);
    if (!c) {
        cic_diag_set(d, o->case_file, 0, 0, "out of memory");
        return NULL;
    }
    if (cic_case_load(c, o->case_file, d) != CIC_OK) {
        free(c);
        return NULL;
    }
    if (c->sweep.on) {
        cic_diag_set(d, o->case_file, 0, 0, "--case: a sweep's engines are per point; give a "
                     "case without [sweep]");
        free(c);
        return NULL;
    }
    return c;
}

/* Without --q, a family with no token embedding (timm's ViT) is taken as
 * rewritten without a rotation (fused LayerNorms alone): Q = I, exact. */
static int identity_q(mpfr_t **q, int n, cic_verify_result *r)
{
    size_t i, nn = (size_t)n * n;
    if (!(*q = cic_mpvec_create(nn, 53)))
        return -1;
    for (i = 0; i < nn; i++)
        mpfr_set_ui((*q)[i], i % ((size_t)n + 1) == 0, MPFR_RNDN);
    r->q_src = CIC_VERIFY_Q_IDENTITY;
    r->q_orth = 0;
    return 0;
}

/* Q and the thresholds: Q from --q (its dtype may lower them), or recovered
 * from the embeddings at the rewrite's own thresholds; without either the
 * per-layer view is off, and seeded hidden states give way to seeded token
 * ids (a file of hidden states is refused: the rewrite's X Q needs Q). */
static int obtain_q(mpfr_t **q, cic_vrun *w, cic_verify_result *r, const cic_ckpt *kb,
                    cic_ckpt_storage *sb, cic_diag *d)
{
    const cic_verify_opts *o = w->o;
    cic_ckpt_storage qs;
    if (o->q_file[0]) {
        if (!(*q = load_q(o, w->ca.d_model, &r->q_orth, &qs, d)))
            return d->msg[0] ? CIC_EINPUT : CIC_EINTERNAL;
        r->q_src = CIC_VERIFY_Q_FILE;
        cic_strlcpy(r->q_dtype, qs.dtype, sizeof r->q_dtype);
        thresholds(r, sb, &qs, o->prec);
        return CIC_OK;
    }
    thresholds(r, sb, NULL, o->prec);
    if (!cic_ckpt_has_embedding(kb)) /* timm: nothing to recover Q from */
        return identity_q(q, w->ca.d_model, r) < 0 ? CIC_EINTERNAL : CIC_OK;
    if (cic_verify_q_recover(q, &r->qfit, o->orig, o->trans, &w->ca, o->ln_fused, r->eq,
                             cic_rt_matmul_threads(w->rt), d) < 0)
        return CIC_EINTERNAL;
    if (*q) {
        r->q_src = CIC_VERIFY_Q_RECOVERED;
        r->q_orth = r->qfit.orth_bound;
        return CIC_OK;
    }
    if (!w->hidden)
        return CIC_OK;
    if (o->input_kind == CIC_INPUT_FILE) {
        cic_diag_set(d, o->input_file, 0, 0, "hidden states ('input') need the residual "
                     "rotation Q (the rewrite runs on X Q): give --q, or token ids "
                     "('input_ids' or --input-kind tokens); Q was not recovered: %s",
                     r->qfit.why);
        return CIC_EINPUT;
    }
    /* both models' block input as seeded token ids, each through its own
     * embed_tokens, and the rewrite's storage now with its embedding */
    w->ca.input_kind = w->cb.input_kind = CIC_INPUT_TOKENS;
    if (storage_of(sb, kb, &w->cb, o->layer0, true, w->rt) < 0)
        return CIC_EINTERNAL;
    r->tokens_forced = true;
    w->hidden = false;
    thresholds(r, sb, NULL, o->prec); /* the embedding is read now */
    return CIC_OK;
}

int cic_verify_input_dims(cic_verify_opts *o, cic_diag *d)
{
    if (o->input_kind != CIC_INPUT_FILE) {
        o->tokens = o->tokens ? o->tokens : CIC_VERIFY_TOKENS;
        o->samples = o->samples ? o->samples : CIC_VERIFY_SAMPLES;
        return CIC_OK;
    }
    if (cic_input_file_dims(&o->tokens, &o->samples, o->input_file, d) < 0)
        return CIC_EINPUT;
    if (o->tokens > CIC_CASE_MAX_TOKENS || o->samples > CIC_MAX_SAMPLES ||
        (int64_t)o->tokens * o->samples > CIC_CASE_MAX_ROWS) {
        cic_diag_set(d, o->input_file, 0, 0, "%d tokens x %d samples: at most %d tokens, %d "
                     "samples and %d rows", o->tokens, o->samples, CIC_CASE_MAX_TOKENS,
                     CIC_MAX_SAMPLES, CIC_CASE_MAX_ROWS);
        return CIC_EINPUT;
    }
    return CIC_OK;
}

int cic_verify(const cic_verify_opts *o, cic_verify_result *r, cic_diag *d)
{
    cic_vrun w;
    cic_rt rt;
    cic_ckpt *ka = NULL, *kb = NULL;
    cic_ckpt_storage sb;
    cic_case *ec = NULL;
    mpfr_t *q = NULL;
    int rc = CIC_EINTERNAL;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    memset(&w, 0, sizeof w);
    cic_rt_init(&rt, o->threads); /* the models' context: they hold &rt */
    w.o = o;
    w.rt = &rt;
    CIC_ASSERT(o->tokens > 0 && o->samples > 0); /* cic_verify_input_dims */
    w.hidden = hidden_input(o);
    memset(r, 0, sizeof *r);
    r->first_bad = -1;
    if (o->tokens > CIC_CASE_MAX_TOKENS || o->samples > CIC_MAX_SAMPLES ||
        (int64_t)o->tokens * o->samples > CIC_CASE_MAX_ROWS) {
        cic_diag_set(d, o->orig, 0, 0, "--tokens %d x --samples %d: at most %d tokens, %d "
                     "samples and %d rows", o->tokens, o->samples, CIC_CASE_MAX_TOKENS,
                     CIC_MAX_SAMPLES, CIC_CASE_MAX_ROWS);
        return CIC_EINPUT;
    }
    if (o->case_file[0] && !(ec = engines_case(o, d)))
        return d->msg[0] ? CIC_EINPUT : CIC_EINTERNAL;
    w.ec = ec;
    cic_stfile_watch_begin(); /* ended at done (cic_stfile_check_unchanged) */
    ka = open_cfg(o, o->orig, false, NULL, &w.ca, d);
    kb = ka ? open_cfg(o, o->trans, true, &w.ca, &w.cb, d) : NULL;
    if (!ka || !kb) {
        rc = d->msg[0] ? CIC_EINPUT : CIC_EINTERNAL;
        goto done;
    }
    r->cfg = w.ca;
    r->layer0 = o->layer0;
    r->n_layers = w.ca.layers;
    if (storage_of(&sb, kb, &w.cb, o->layer0, !w.hidden, &rt) < 0)
        goto done;
    if ((rc = obtain_q(&q, &w, r, kb, &sb, d)) != CIC_OK)
        goto done;
    r->have_q = q != NULL;
    w.q = (const mpfr_t *)q;
    if (cic_verify_stream(&w, r, d) < 0) {
        rc = d->msg[0] ? CIC_EINPUT : CIC_EINTERNAL;
        goto done;
    }
    if (cic_verify_diagnose(&w, ka, kb, r, d) < 0) {
        rc = CIC_EINTERNAL;
        goto done;
    }
    rc = r->first_bad >= 0 || r->head_verdict != CIC_VERDICT_EQUIVALENT ? CIC_EGATE : CIC_OK;
done:
    if (cic_stfile_check_unchanged(d) != 0) /* a file changed while read: nothing holds */
        rc = CIC_EINTERNAL;
    cic_ckpt_close(ka);
    cic_ckpt_close(kb);
    cic_mpvec_destroy(q, (size_t)w.ca.d_model * w.ca.d_model);
    free(ec);
    cic_rt_clear(&rt);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    r->seconds = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
    return rc;
}

/* ---- report.json ---- */

static const char *const QSRC_NAME[] = {
    [CIC_VERIFY_Q_NONE] = "none", [CIC_VERIFY_Q_FILE] = "file", [CIC_VERIFY_Q_RECOVERED] = "recovered",
    [CIC_VERIFY_Q_IDENTITY] = "identity"};

/* What set the thresholds: the tensor, its dtype and file, and why. */
static json_t *storage_json(const cic_verify_opts *o, const cic_verify_result *r)
{
    const cic_ckpt_storage *s = &r->storage;
    return json_pack("{s:i,s:s,s:o,s:o,s:i,s:s}", "bits", s->bits, "dtype", s->dtype,
                     "tensor", s->tensor[0] ? cic_json_str(s->tensor) : json_null(), "file",
                     cic_json_str(r->storage_q ? o->q_file : o->trans), "tensors_with_these_bits",
                     s->count,
                     "why", r->storage_q ? "Q's dtype has fewer significand bits than every "
                                           "tensor the transformed model reads"
                                         : "the fewest significand bits among the tensors the "
                                           "transformed model reads (and Q's, if given)");
}

/* Without --q: what recovering Q from the embeddings found. */
static json_t *q_recovery_json(const cic_verify_result *r)
{
    const cic_verify_qfit *f = &r->qfit;
    if (r->q_src == CIC_VERIFY_Q_FILE || r->q_src == CIC_VERIFY_Q_IDENTITY)
        return json_null();
    return json_pack("{s:b,s:i,s:o,s:o,s:o}", "recovered", r->q_src == CIC_VERIFY_Q_RECOVERED,
                     "rows", f->rows, "fit_residual", cic_json_num(f->fit), "orth_bound",
                     cic_json_num(f->orth_bound), "why_not", f->why[0] ? cic_json_str(f->why)
                                                               : json_null());
}

int cic_verify_write_json(const cic_verify_opts *o, const cic_verify_result *r,
                          const char *path, cic_diag *d)
{
    json_t *root = json_object(), *v = json_object(), *layers = json_array();
    int l, rc = -1;
    if (!root || !v || !layers)
        goto done;
    json_object_set_new(v, "original", cic_json_str(o->orig));
    json_object_set_new(v, "transformed", cic_json_str(o->trans));
    json_object_set_new(v, "q", r->q_src == CIC_VERIFY_Q_FILE ? cic_json_str(o->q_file)
                                                                : json_null());
    json_object_set_new(v, "q_source", json_string(QSRC_NAME[r->q_src]));
    json_object_set_new(v, "q_orth_error", r->q_src == CIC_VERIFY_Q_FILE ? cic_json_num(r->q_orth)
                                                                         : json_null());
    json_object_set_new(v, "q_recovery", q_recovery_json(r));
    json_object_set_new(v, "online_down_proj", json_boolean(o->online_down));
    json_object_set_new(v, "online_qk", json_boolean(o->online_qk));
    json_object_set_new(v, "layernorm", json_string(o->ln_fused ? "fused" : "kept"));
    json_object_set_new(v, "tokens", json_integer(o->tokens));
    json_object_set_new(v, "samples", json_integer(o->samples));
    json_object_set_new(v, "seed", json_integer((json_int_t)o->seed));
    json_object_set_new(v, "mpfr_prec", json_integer(o->prec));
    json_object_set_new(v, "input", json_pack("{s:s,s:b}", "kind",
                                              CIC_INPUT_NAME[r->tokens_forced ? CIC_INPUT_TOKENS
                                                                          : o->input_kind],
                                              "token_ids_for_want_of_q", r->tokens_forced));
    json_object_set_new(v, "storage_bits", json_integer(r->bits));
    json_object_set_new(v, "thresholds", json_pack("{s:o,s:o,s:o}", "equivalent", cic_json_num(r->eq),
                                                   "broken", cic_json_num(r->br), "set_by",
                                                   storage_json(o, r)));
    for (l = 0; r->have_q && l < r->n_layers; l++)
        json_array_append_new(layers, json_pack("{s:i,s:o,s:s,s:s,s:o,s:o}", "layer",
                                                r->layer0 + l, "ce_residual", cic_json_num(r->ce[l]),
                                                "verdict", CIC_VERDICT_NAME[r->verdict[l]],
                                                "decided_by", CIC_VERIFY_BY_NAME[r->by[l]],
                                                "f64_bound", cic_json_num(r->bound[l]), "seconds",
                                                cic_json_num(r->sec[l])));
    cic_vdiag_json_set(v, layers, r->have_q, r->layer0, &r->diag); /* what is wrong */
    json_object_set_new(v, "layers", layers);
    layers = NULL;
    json_object_set_new(v, "first_layer_not_equivalent",
                        r->first_bad >= 0 ? json_integer(r->first_bad) : json_null());
    json_object_set_new(v, "head", json_pack("{s:o,s:s,s:s,s:o}", "ce", cic_json_num(r->head_ce),
                                             "verdict", CIC_VERDICT_NAME[r->head_verdict],
                                             "decided_by", CIC_VERIFY_BY_NAME[r->head_by],
                                             "f64_bound", cic_json_num(r->head_bound)));
    json_object_set_new(v, "engine", json_string(o->mpfr_only ? "mpfr" : "auto"));
    json_object_set_new(v, "f64_unbounded", r->f64_why[0] ? cic_json_str(r->f64_why) : json_null());
    json_object_set_new(v, "engines_reference", json_string("the original's logits from "
                                                            "the f64 streams"));
    json_object_set_new(v, "case", o->case_file[0] ? cic_json_str(o->case_file) : json_null());
    json_object_set_new(v, "engines", json_array());
    for (l = 0; l < r->n_eng; l++)
        json_array_append_new(json_object_get(v, "engines"),
                              json_pack("{s:s,s:o,s:o}", "engine", r->eng[l], "original",
                                        cic_json_num(r->eng_orig[l]), "transformed",
                                        cic_json_num(r->eng_trans[l])));
    json_object_set_new(v, "wall_seconds", cic_json_num(r->seconds));
    json_object_set_new(root, "verify", v);
    v = NULL;
    rc = cic_json_write_atomic(root, path, d);
done:
    if (rc < 0 && !d->msg[0])
        cic_diag_set(d, path, 0, 0, "cannot write report.json: out of memory");
    json_decref(v);
    json_decref(layers);
    json_decref(root);
    return rc;
}
