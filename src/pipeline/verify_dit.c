/* SPDX-License-Identifier: MIT */
/* verify_dit.c: cicheck verify for DiT checkpoints (verify_dit.h): the
 * checks of the two folders and the options, then block by block both
 * models on the original's stream, judged per sample; the final layer end
 * to end; a broken block diagnosed (verify_dit_diag.c). What the rewrite
 * must store is docs/reference/dit-rewrite.md; the reading is
 * verify_dit_in.c, the arithmetic verify_dit_fwd.c. */
#include "verify_dit_int.h"

#include "../engine/engine.h"
#include "../metric/flops.h"
#include "../model/checkpoint.h"
#include "../xform/kinds.h"
#include "../xform/xform.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

int cic_verify_dit_strategy(const char *name, char *allowed, size_t cap)
{
    int k;
    allowed[0] = '\0';
    for (k = 0; k < CIC_XFORM_COUNT; k++) {
        const cic_xform_desc *x = cic_xform_desc_of((enum cic_xform_kind)k);
        if (x->family != CIC_XFAM_ADALN)
            continue;
        if (!strcmp(name, x->name))
            return k;
        snprintf(allowed + strlen(allowed), cap - strlen(allowed), "%s%s",
                 allowed[0] ? ", " : "", x->name);
    }
    return -1;
}

bool cic_verify_dit_is(const char *dir)
{
    cic_diag d;
    cic_ckpt *k;
    bool dit;
    char path[1100];
    json_t *j;
    /* a config.json with a model_type is a language model's: not opened
     * twice (its shards may be many) */
    snprintf(path, sizeof path, "%s/config.json", dir);
    if ((j = json_load_file(path, JSON_DECODE_ANY, NULL)) != NULL) {
        bool lm = json_is_object(j) && json_object_get(j, "model_type");
        json_decref(j);
        if (lm)
            return false;
    }
    memset(&d, 0, sizeof d);
    if (!(k = cic_ckpt_open(dir, &d)))
        return false;
    dit = !strcmp(cic_ckpt_family_name(k), "dit");
    cic_ckpt_close(k);
    return dit;
}

void cic_verify_dit_result_clear(cic_verify_dit_result *r)
{
    free(r->ce);
    free(r->verdict);
    r->ce = NULL;
    r->verdict = NULL;
}

/* The options that are not for a DiT, and the strategy. */
static int check_opts(const cic_verify_opts *o, cic_verify_dit_result *r, cic_diag *d)
{
    char allowed[200];
    const char *no = o->online_down || o->online_qk ? "--online (the adaLN strategy says "
                                                      "which ops run online)"
                     : o->case_file[0]              ? "--case (a DiT runs in double only)"
                     : o->mpfr_only                 ? "--engine mpfr (a DiT runs in double)"
                     : o->input_kind == CIC_INPUT_TOKENS ? "--input-kind tokens (a DiT reads "
                                                           "hidden states)"
                                                         : NULL;
    r->kind = cic_verify_dit_strategy(o->adaln, allowed, sizeof allowed);
    if (r->kind < 0) {
        if (o->adaln[0])
            cic_diag_set(d, o->trans, 0, 0, "--adaln '%s': allowed %s", o->adaln, allowed);
        else
            cic_diag_set(d, o->trans, 0, 0, "a DiT rewrite needs --adaln STRATEGY, how it "
                         "treats the adaLN modulation (%s; docs/reference/dit-rewrite.md)",
                         allowed);
        return CIC_EINPUT;
    }
    if (no) {
        cic_diag_set(d, o->trans, 0, 0, "not for a DiT: %s", no);
        return CIC_EINPUT;
    }
    return CIC_OK;
}

/* Folder dir opened as a DiT checkpoint; NULL with d set. */
static cic_ckpt *open_dit(const char *dir, cic_diag *d)
{
    cic_ckpt *k = cic_ckpt_open(dir, d);
    if (k && strcmp(cic_ckpt_family_name(k), "dit")) {
        cic_diag_set(d, dir, 0, 0, "--adaln is for DiT checkpoints; this is a %s checkpoint",
                     cic_ckpt_family_name(k));
        cic_ckpt_close(k);
        return NULL;
    }
    return k;
}

/* The original's sizes (its every tensor checked), the range of blocks and
 * the rewrite's blocks against them. */
static int sizes(vdit *v, cic_diag *d)
{
    const cic_verify_opts *o = v->o;
    cic_model_cfg cfg;
    int n = cic_ckpt_layers(v->ka), nb = cic_ckpt_layers(v->kb);
    int64_t last = o->layers ? (int64_t)o->layer0 + o->layers - 1 : (int64_t)n - 1;
    if (o->layer0 >= n || last >= n) {
        cic_diag_set(d, o->orig, 0, 0, "--layers asks for blocks %d .. %lld; the checkpoint "
                     "has %d (blocks 0 .. %d)", o->layer0, (long long)last, n, n - 1);
        return -1;
    }
    if (nb != n) {
        cic_diag_set(d, o->trans, 0, 0, "%d blocks here, %d in the original (%s): the "
                     "checkpoints must have the same blocks", nb, n, o->orig);
        return -1;
    }
    memset(&cfg, 0, sizeof cfg);
    cfg.tokens = o->tokens;
    cfg.samples = o->samples;
    cfg.layers = n; /* every block: the stream runs through those before layer0 */
    if (cic_ckpt_config(v->ka, &cfg, 0, d) != CIC_OK)
        return -1;
    v->c.d = cfg.d_model;
    v->c.h = cfg.heads;
    v->c.m = cfg.d_mlp;
    v->c.dc = cfg.d_cond;
    v->c.dout = cfg.d_out;
    v->c.eps = (float)cfg.eps;
    v->r->layer0 = o->layer0;
    v->r->n_layers = (int)(last - o->layer0 + 1);
    v->r->have_head = last == n - 1;
    return 0;
}

/* The thresholds of the rewrite's storage and Q's (verify.h). */
static void thresholds(vdit *v)
{
    cic_verify_dit_result *r = v->r;
    cic_xform_spec x;
    r->storage_q = v->qs.tensor[0] && v->qs.bits < v->sb.bits;
    r->storage = r->storage_q ? v->qs : v->sb;
    r->bits = r->storage.bits;
    memset(&x, 0, sizeof x);
    x.prec = r->bits >= 53 ? CIC_TPREC_F64 : r->bits >= 24 ? CIC_TPREC_F32 : CIC_TPREC_BF16;
    cic_xform_thresholds(&r->eq, &r->br, &x, v->o->prec);
}

/* Per sample s of ya (the original's, B N x w) and yb (the rewrite's,
 * mapped back): ce[s] = ||yb - ya||_2 / ||ya||_2 over its rows, ya's rows
 * without their mean when center. */
static void ce_per_sample(double *ce, const double *ya, const double *yb, const vd_ctx *c,
                          int w, bool center)
{
    int s, i, j;
    for (s = 0; s < c->B; s++) {
        double num = 0, den = 0;
        for (i = s * c->N; i < (s + 1) * c->N; i++) {
            double mu = 0;
            for (j = 0; center && j < w; j++)
                mu += ya[(size_t)i * w + j];
            mu = center ? mu / w : 0;
            for (j = 0; j < w; j++) {
                double a = ya[(size_t)i * w + j] - mu, e = yb[(size_t)i * w + j] - a;
                num += e * e;
                den += a * a;
            }
        }
        ce[s] = den > 0 ? sqrt(num / den) : num > 0 ? INFINITY : 0;
    }
}

/* The per-block FLOPs of both (cic_flops_dit: one layer, no final layer,
 * the run's samples and tokens), per site. */
static void flops(vdit *v)
{
    cic_model_cfg cfg;
    cic_xform_spec x;
    cic_flop_count a, b;
    int s;
    memset(&cfg, 0, sizeof cfg);
    cfg.block = CIC_BLOCK_DIT;
    cfg.d_model = v->c.d;
    cfg.heads = v->c.h;
    cfg.d_mlp = v->c.m;
    cfg.d_cond = v->c.dc;
    cfg.d_out = v->c.dout;
    cfg.tokens = v->c.N;
    cfg.samples = v->c.B;
    cfg.layers = 1;
    cfg.act = CIC_ACT_GELU_TANH;
    memset(&x, 0, sizeof x);
    x.kind = (enum cic_xform_kind)v->r->kind;
    x.stream = v->c.centered ? CIC_STREAM_CENTERED : CIC_STREAM_MEAN_PRESERVING;
    x.q = CIC_Q_HADAMARD;
    x.after = -1;
    cic_flops_dit(&a, &cfg, NULL);
    cic_flops_dit(&b, &cfg, &x);
    for (s = 0; s < CIC_SITE_COUNT; s++) {
        v->r->flops_orig[s] = a.site[s];
        v->r->flops_rw[s] = b.site[s];
    }
}

/* How bad a verdict is: equivalent < inconclusive < broken. */
static int rank(enum cic_verdict v)
{
    return v == CIC_VERDICT_EQUIVALENT ? 0 : v == CIC_VERDICT_INCONCLUSIVE ? 1 : 2;
}

/* Scratch of a run: R x d streams and one R x max(d, dout). */
typedef struct {
    double *x, *sc, *ya, *yb, *t;
} bufs;

/* Block l (checkpoint numbering; i its index in the run): both models on
 * the original's stream x (the rewrite's rotated), judged per sample; the
 * rewrite's own stream sc on; x becomes the original's next. */
static int one_block(vdit *v, int l, int i, bufs *b, cic_diag *d)
{
    cic_verify_dit_result *r = v->r;
    const vd_ctx *c = &v->c;
    size_t n = (size_t)c->N * c->B * c->d;
    vd_block ob, rb;
    bool ok[CIC_MAX_SAMPLES];
    int s, rc = -1;
    memset(&rb, 0, sizeof rb);
    if (vd_load_block(&ob, v, false, l, d) < 0)
        return -1;
    if (vd_load_block(&rb, v, true, l, d) < 0 || vd_block_orig(b->ya, b->x, v->cond, &ob, c) < 0 ||
        vd_rotate(b->t, b->x, c) < 0 || vd_block_rw(b->yb, b->t, v->cond, &rb, c) < 0)
        goto done;
    vd_unrotate(b->t, b->yb, c);
    ce_per_sample(r->ce + (size_t)i * c->B, b->ya, b->t, c, c->d, c->q && c->centered);
    r->block[i] = CIC_VERDICT_EQUIVALENT;
    for (s = 0; s < c->B; s++) {
        enum cic_verdict e = cic_xform_verdict(r->ce[(size_t)i * c->B + s], r->eq, r->br);
        r->verdict[(size_t)i * c->B + s] = e;
        ok[s] = e == CIC_VERDICT_EQUIVALENT;
        if (rank(e) > rank(r->block[i]))
            r->block[i] = e;
    }
    if (r->block[i] != CIC_VERDICT_EQUIVALENT) {
        if (r->first_bad < 0)
            r->first_bad = l;
        vd_diagnose(r, l, &ob, &rb, c, v->cond, v->c0, ok);
    }
    if (r->have_head) { /* the rewrite's own stream, for the final layer */
        if (vd_block_rw(b->yb, b->sc, v->cond, &rb, c) < 0)
            goto done;
        memcpy(b->sc, b->yb, n * sizeof *b->sc);
    }
    memcpy(b->x, b->ya, n * sizeof *b->x);
    rc = 0;
done:
    vd_block_free(&ob);
    vd_block_free(&rb);
    if (rc < 0 && !d->msg[0])
        cic_diag_set(d, v->o->orig, 0, 0, "out of memory at block %d", l);
    return rc;
}

/* The final layer of both, each on its own stream. */
static int head(vdit *v, bufs *b, cic_diag *d)
{
    cic_verify_dit_result *r = v->r;
    const vd_ctx *c = &v->c;
    vd_block of, rf;
    int s, rc = -1;
    memset(&rf, 0, sizeof rf);
    if (vd_load_final(&of, v, false, d) < 0)
        return -1;
    if (vd_load_final(&rf, v, true, d) < 0 || vd_final_orig(b->ya, b->x, v->cond, &of, c) < 0 ||
        vd_final_rw(b->yb, b->sc, v->cond, &rf, c) < 0)
        goto done;
    ce_per_sample(r->head_ce, b->ya, b->yb, c, c->dout, false);
    for (s = 0; s < c->B; s++) {
        r->head_verdict[s] = cic_xform_verdict(r->head_ce[s], r->eq, r->br);
        r->head_bad |= r->head_verdict[s] != CIC_VERDICT_EQUIVALENT;
    }
    if (r->head_bad)
        vd_diagnose_final(r, &of, &rf, c, v->c0);
    rc = 0;
done:
    vd_block_free(&of);
    vd_block_free(&rf);
    if (rc < 0 && !d->msg[0])
        cic_diag_set(d, v->o->orig, 0, 0, "out of memory at the final layer");
    return rc;
}

/* The original's stream through the blocks before the run's first. */
static int lead_in(vdit *v, bufs *b, cic_diag *d)
{
    size_t n = (size_t)v->c.N * v->c.B * v->c.d;
    vd_block ob;
    int l;
    for (l = 0; l < v->r->layer0; l++) {
        if (vd_load_block(&ob, v, false, l, d) < 0)
            return -1;
        if (vd_block_orig(b->ya, b->x, v->cond, &ob, &v->c) < 0) {
            vd_block_free(&ob);
            cic_diag_set(d, v->o->orig, 0, 0, "out of memory at block %d", l);
            return -1;
        }
        vd_block_free(&ob);
        memcpy(b->x, b->ya, n * sizeof *b->x);
    }
    return 0;
}

/* Every block of the run, then the final layer. */
static int run(vdit *v, cic_diag *d)
{
    const vd_ctx *c = &v->c;
    size_t R = (size_t)c->N * c->B, w = (size_t)(c->dout > c->d ? c->dout : c->d);
    bufs b = {cic_calloc(R * c->d, sizeof(double)), cic_calloc(R * c->d, sizeof(double)),
              cic_calloc(R * w, sizeof(double)), cic_calloc(R * w, sizeof(double)),
              cic_calloc(R * c->d, sizeof(double))};
    int i, rc = -1;
    v->r->ce = cic_calloc((size_t)v->r->n_layers * c->B, sizeof *v->r->ce);
    v->r->verdict = cic_calloc((size_t)v->r->n_layers * c->B, sizeof *v->r->verdict);
    if (!b.x || !b.sc || !b.ya || !b.yb || !b.t || !v->r->ce || !v->r->verdict) {
        cic_diag_set(d, v->o->orig, 0, 0, "out of memory");
        goto done;
    }
    memcpy(b.x, v->x, R * c->d * sizeof *b.x);
    if (lead_in(v, &b, d) < 0 || vd_rotate(b.sc, b.x, c) < 0)
        goto done;
    for (i = 0; i < v->r->n_layers; i++)
        if (one_block(v, v->r->layer0 + i, i, &b, d) < 0)
            goto done;
    rc = v->r->have_head ? head(v, &b, d) : 0;
done:
    free(b.x);
    free(b.sc);
    free(b.ya);
    free(b.yb);
    free(b.t);
    return rc;
}

int cic_verify_dit(const cic_verify_opts *o, cic_verify_dit_result *r, cic_diag *d)
{
    vdit v;
    int rc = CIC_EINPUT;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    memset(r, 0, sizeof *r);
    memset(&v, 0, sizeof v);
    r->first_bad = -1;
    r->calib = -1;
    v.o = o;
    v.r = r;
    cic_stfile_watch_begin(); /* ended at done (cic_stfile_check_unchanged) */
    if (check_opts(o, r, d) != CIC_OK || !(v.ka = open_dit(o->orig, d)) ||
        !(v.kb = open_dit(o->trans, d)) || sizes(&v, d) < 0)
        goto done;
    v.c.st = cic_xform_desc_of((enum cic_xform_kind)r->kind)->adaln;
    v.c.centered = o->ln_given ? o->ln_fused : true;
    r->centered = v.c.centered;
    if (vd_load_rotations(&v, d) < 0 || vd_load_inputs(&v, d) < 0)
        goto done;
    r->d = v.c.d;
    r->heads = v.c.h;
    r->d_mlp = v.c.m;
    r->d_cond = v.c.dc;
    r->d_out = v.c.dout;
    r->tokens = v.c.N;
    r->samples = v.c.B;
    vd_storage(&v);
    thresholds(&v);
    flops(&v);
    if (run(&v, d) < 0) /* a tensor's shape or value, or memory */
        goto done;
    rc = r->first_bad >= 0 || r->head_bad ? CIC_EGATE : CIC_OK;
done:
    if (rc == CIC_EINPUT && (!d->msg[0] || strstr(d->msg, "out of memory")))
        rc = CIC_EINTERNAL;
    if (cic_stfile_check_unchanged(d) != 0)
        rc = CIC_EINTERNAL;
    cic_ckpt_close(v.ka);
    cic_ckpt_close(v.kb);
    free(v.q);
    free(v.hd);
    free(v.hm);
    free(v.x);
    free(v.cond);
    free(v.c0);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    r->seconds = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
    return rc;
}
