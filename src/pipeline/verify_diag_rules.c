/* SPDX-License-Identifier: MIT */
/* verify_diag_rules.c: the rewrite rule of each tensor of a llama or OPT
 * layer, and the known mistakes each tensor can show (verify_diag_int.h).
 *
 * A family is a table of its layer's linears: reader (behind a norm) or
 * writer (into the residual stream), the norm a reader reads, and flags for
 * the online ops and R2. With Q the residual rotation, g and b the
 * original norm's gain and bias, g' and b' the rewrite's (1 and 0 when
 * fused away), C = I - 1 1^T / d the centring (OPT with fused LayerNorm
 * only) and H the plain Hadamard matrix of --online down_proj:hadamard:
 *   reader  W' = W diag(g) Q diag(1/g'),   bias c' = c + W b - W' b'
 *   writer  W' = Q^T C W (H),              bias b' = b C Q
 * (rows are outputs, as stored). v_proj and o_proj may also carry R2, one
 * orthogonal matrix per key/value head that verify does not know: for them
 * the per-head product o_h v_j (and each one's Gram matrix, which R2
 * leaves alone) is what is compared, on seeded probe vectors. Each mistake
 * is the tensor the catalogue's wrong rewrite stores (cases/known-breaks/);
 * the nearest one to the stored tensor names it.
 *
 * timm ViT and GPT-J with fused LayerNorm follow OPT's rules (center
 * true). To add a family whose rewrite follows the same rules: a vrule
 * table with its model and checkpoint names, a vtable, a function calling
 * diag_table, and its line in verify_diag.c's FAMILIES. */
#include "verify_diag_int.h"

#include <cblas.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

enum { F_QK = 1, F_V = 2, F_O = 4, F_DOWN = 8, F_ATTN_OUT = 16 };

typedef struct {
    const char *model; /* the model's tensor, after the layer prefix */
    int part, parts;   /* its rows part / parts (OPT's stacked q, k, v) */
    const char *hf;    /* the checkpoint's name, after the layer prefix */
    const char *bias;  /* the model's bias tensor, or NULL */
    const char *bias_hf;
    bool writer;
    const char *norm, *norm_hf; /* a reader's norm (model, checkpoint), no suffix */
    unsigned flags;
} vrule;

typedef struct {
    const char *prefix, *hf_prefix; /* "layers.0.", "model.layers.%d." */
    const vrule *t;
    int n;
    bool center;           /* LayerNorm fused: writers and embeddings centred */
    const char *unfused;   /* readers rotated with the norm left alone: its entry */
    const char *unfused_text;
    const char *embed_uncentred; /* the embeddings rotated but not centred (center) */
    const char *embed;     /* the token embedding's checkpoint name */
} vtable;

static const vrule LLAMA[] = {
    {"self_attn.q_proj.weight", 0, 1, "self_attn.q_proj.weight", NULL, NULL, false,
     "input_layernorm", "input_layernorm", F_QK},
    {"self_attn.k_proj.weight", 0, 1, "self_attn.k_proj.weight", NULL, NULL, false,
     "input_layernorm", "input_layernorm", F_QK},
    {"self_attn.v_proj.weight", 0, 1, "self_attn.v_proj.weight", NULL, NULL, false,
     "input_layernorm", "input_layernorm", F_V},
    {"self_attn.o_proj.weight", 0, 1, "self_attn.o_proj.weight", NULL, NULL, true, NULL, NULL,
     F_O | F_ATTN_OUT},
    {"mlp.gate_proj.weight", 0, 1, "mlp.gate_proj.weight", NULL, NULL, false,
     "post_attention_layernorm", "post_attention_layernorm", 0},
    {"mlp.up_proj.weight", 0, 1, "mlp.up_proj.weight", NULL, NULL, false,
     "post_attention_layernorm", "post_attention_layernorm", 0},
    {"mlp.down_proj.weight", 0, 1, "mlp.down_proj.weight", NULL, NULL, true, NULL, NULL, F_DOWN},
};

static const vrule OPT[] = {
    {"attn.qkv.weight", 0, 3, "self_attn.q_proj.weight", "attn.qkv.bias",
     "self_attn.q_proj.bias", false, "norm1", "self_attn_layer_norm", 0},
    {"attn.qkv.weight", 1, 3, "self_attn.k_proj.weight", "attn.qkv.bias",
     "self_attn.k_proj.bias", false, "norm1", "self_attn_layer_norm", 0},
    {"attn.qkv.weight", 2, 3, "self_attn.v_proj.weight", "attn.qkv.bias",
     "self_attn.v_proj.bias", false, "norm1", "self_attn_layer_norm", 0},
    {"attn.proj.weight", 0, 1, "self_attn.out_proj.weight", "attn.proj.bias",
     "self_attn.out_proj.bias", true, NULL, NULL, F_ATTN_OUT},
    {"mlp.fc1.weight", 0, 1, "fc1.weight", "mlp.fc1.bias", "fc1.bias", false, "norm2",
     "final_layer_norm", 0},
    {"mlp.fc2.weight", 0, 1, "fc2.weight", "mlp.fc2.bias", "fc2.bias", true, NULL, NULL,
     F_DOWN},
};

/* timm ViT (preln, the checkpoint's own names; q, k and v stacked in one
 * tensor, one reader of norm1) with fused LayerNorm. */
static const vrule VIT[] = {
    {"attn.qkv.weight", 0, 1, "attn.qkv.weight", "attn.qkv.bias", "attn.qkv.bias", false,
     "norm1", "norm1", 0},
    {"attn.proj.weight", 0, 1, "attn.proj.weight", "attn.proj.bias", "attn.proj.bias", true,
     NULL, NULL, F_ATTN_OUT},
    {"mlp.fc1.weight", 0, 1, "mlp.fc1.weight", "mlp.fc1.bias", "mlp.fc1.bias", false, "norm2",
     "norm2", 0},
    {"mlp.fc2.weight", 0, 1, "mlp.fc2.weight", "mlp.fc2.bias", "mlp.fc2.bias", true, NULL, NULL,
     F_DOWN},
};

/* GPT-J (the parallel block, Hugging Face names): one LayerNorm ln_1 read by
 * q, k, v and fc_in; q, k and v carry the fused norm's bias (zeros in the
 * original), out_proj has none. */
static const vrule GPTJ[] = {
    {"attn.q_proj.weight", 0, 1, "attn.q_proj.weight", "attn.q_proj.bias", "attn.q_proj.bias",
     false, "ln_1", "ln_1", F_QK},
    {"attn.k_proj.weight", 0, 1, "attn.k_proj.weight", "attn.k_proj.bias", "attn.k_proj.bias",
     false, "ln_1", "ln_1", F_QK},
    {"attn.v_proj.weight", 0, 1, "attn.v_proj.weight", "attn.v_proj.bias", "attn.v_proj.bias",
     false, "ln_1", "ln_1", F_V},
    {"attn.out_proj.weight", 0, 1, "attn.out_proj.weight", NULL, NULL, true, NULL, NULL,
     F_O | F_ATTN_OUT},
    {"mlp.fc_in.weight", 0, 1, "mlp.fc_in.weight", "mlp.fc_in.bias", "mlp.fc_in.bias", false,
     "ln_1", "ln_1", 0},
    {"mlp.fc_out.weight", 0, 1, "mlp.fc_out.weight", "mlp.fc_out.bias", "mlp.fc_out.bias", true,
     NULL, NULL, F_DOWN},
};

static const vtable T_LLAMA = {"layers.0.", "model.layers.%d.", LLAMA, 7, false,
                               "rmsnorm-gamma-after-rotation",
                               "Q applied, gain not folded", NULL,
                               "model.embed_tokens.weight"};
static const vtable T_OPT = {"blocks.0.", "model.decoder.layers.%d.", OPT, 6, true,
                             "rotate-without-fusion", "Q applied, LayerNorm not fused into it",
                             "skip-mean-bake", "model.decoder.embed_tokens.weight"};

static const vtable T_VIT = {"blocks.0.", "blocks.%d.", VIT, 4, true, "rotate-without-fusion",
                             "Q applied, LayerNorm not fused into it", "skip-mean-bake", NULL};
static const vtable T_GPTJ = {"transformer.h.0.", "transformer.h.%d.", GPTJ, 6, true,
                              "rotate-without-fusion", "Q applied, LayerNorm not fused into it",
                              "skip-mean-bake", "transformer.wte.weight"};

#define NPROBE 16

/* One tensor under judgement. */
typedef struct {
    cic_vmat wa, wb, rule; /* the original's, the rewrite's, the rule's */
    double dist;
    bool ok, done;         /* equals the rule; judged already (R2) */
    int sig;               /* without Q: 0 compared as it is, 1 rotated on the left
                            * (a writer), 2 on the right (a reader) */
    char name[200], shortn[48];
} vslot;

/* What one layer's diagnosis holds. */
typedef struct {
    cic_vdiag *g;
    const cic_vdiag_in *in;
    const vtable *tab;
    int d, wrong;          /* tensors that differ from the rule */
    bool known, spread;    /* one matches a known mistake; a no-single-tensor finding */
    bool noq;              /* no Q: the rules without it, compared as a rotation allows */
} vctx;

typedef struct {
    const char *text, *mistake;
    const char *other; /* the finding is about another tensor (a norm): its short name */
    char other_name[200];
    cic_vmat m;
} valt;

/* The model's tensor prefix + s, or -1. */
static int tid(const cic_model *m, const vtable *t, const char *s)
{
    char n[160];
    snprintf(n, sizeof n, "%s%s", t->prefix, s);
    return cic_model_tensor_find(m, n);
}

/* A norm's vector (suffix ".weight" or ".bias") as 1 x d, fill when absent. */
static int norm_vec(cic_vmat *v, const cic_model *m, const vtable *t, const char *norm,
                    const char *sfx, int d, double fill)
{
    char n[120];
    int id, j;
    snprintf(n, sizeof n, "%s%s", norm, sfx);
    if ((id = tid(m, t, n)) >= 0)
        return cic_vmat_tensor(v, m, id, 0, 1);
    if (cic_vmat_init(v, 1, d) < 0)
        return -1;
    for (j = 0; j < d; j++)
        v->v[j] = fill;
    return 0;
}

static bool all_equal(const cic_vmat *v, double x)
{
    size_t i;
    for (i = 0; i < (size_t)v->r * v->c; i++)
        if (v->v[i] != x)
            return false;
    return true;
}

/* A finding, once per (tensor, text). */
static void finding(vctx *c, const char *tensor, const char *mistake, double dist, double md,
                    const char *text)
{
    int i;
    for (i = 0; i < c->g->n; i++)
        if (!strcmp(c->g->it[i].tensor, tensor) && !strcmp(c->g->it[i].finding, text))
            return;
    cic_vdiag_add(c->g, tensor, mistake, dist, md, "%s", text);
}

/* The stored tensor's distance from m: as it is, or (no Q) through what a
 * rotation leaves alone. */
static double vdist(const vctx *c, const vslot *s, const cic_vmat *m)
{
    double x;
    if (!c->noq || !s->sig)
        return cic_vmat_dist(&s->wb, m);
    x = cic_vmat_gram_dist(&s->wb, m, s->sig == 1);
    return isnan(x) ? INFINITY : x;
}

/* The stored tensor s differs from the rule: the nearest alternative names
 * it when it equals it (within tol) or is much nearer than the rule. */
static void judge(vctx *c, const vslot *s, valt *alt, int n)
{
    int i, best = -1;
    double bd = INFINITY, tol = c->g->tol;
    char t[480];
    for (i = 0; i < n; i++) {
        /* without Q a missing rotation looks like the rule: not a candidate */
        bool blind = c->noq && strstr(alt[i].text, "not applied");
        double x = alt[i].m.v && !blind ? vdist(c, s, &alt[i].m) : INFINITY;
        if (x < bd) {
            bd = x;
            best = i;
        }
    }
    c->wrong++;
    if (best >= 0 && bd <= tol) {
        snprintf(t, sizeof t, "%s: %s", alt[best].other ? alt[best].other : s->shortn,
                 alt[best].text);
        c->known = true;
    } else if (best >= 0 && bd < 0.5 * s->dist) {
        snprintf(t, sizeof t, "%s: differs from the rule (relative distance %.3g); nearest "
                 "known mistake: %s (%.3g from it)", s->shortn, s->dist, alt[best].text, bd);
    } else {
        snprintf(t, sizeof t, "%s: differs from the rule (relative distance %.3g), like no "
                 "known mistake", s->shortn, s->dist);
        best = -1;
    }
    finding(c, best >= 0 && bd <= tol && alt[best].other ? alt[best].other_name : s->name,
            best >= 0 ? alt[best].mistake : NULL, s->dist, best >= 0 ? bd : NAN, t);
}

static void alts_free(valt *a, int n)
{
    int i;
    for (i = 0; i < n; i++)
        cic_vmat_free(&a[i].m);
}

static const cic_vmat *qmat(const vctx *c, cic_vmat *tmp)
{
    tmp->r = tmp->c = c->d;
    tmp->v = (double *)c->in->q;
    return tmp;
}

/* The checkpoint's name of layer tensor hf, and its short name (the part
 * before ".weight" or ".bias", after the last module: "o_proj"). */
static void names(char *name, size_t cap, char *shortn, size_t scap, const vctx *c,
                  const char *hf)
{
    const char *e = strrchr(hf, '.'), *b = e;
    int n = snprintf(name, cap, c->tab->hf_prefix, c->in->layer);
    snprintf(name + n, cap - (size_t)n, "%s", hf);
    while (b > hf && b[-1] != '.')
        b--;
    snprintf(shortn, scap, "%.*s%s", (int)(e - b), b, strcmp(e, ".bias") ? "" : " bias");
}

/* Rows part / parts of the model's tensor s of m (or its columns, for a
 * bias of one row). */
static int part_of(cic_vmat *v, const cic_model *m, const vtable *t, const char *s, int part,
                   int parts)
{
    int id = tid(m, t, s), n, j;
    cic_vmat all;
    CIC_ASSERT(id >= 0);
    if (m->t[id].rows > 1 || parts == 1) {
        n = m->t[id].rows / parts;
        return cic_vmat_tensor(v, m, id, part * n, n);
    }
    if (cic_vmat_tensor(&all, m, id, 0, 1) < 0)
        return -1;
    n = all.c / parts;
    if (cic_vmat_init(v, 1, n) < 0) {
        cic_vmat_free(&all);
        return -1;
    }
    for (j = 0; j < n; j++)
        v->v[j] = all.v[part * n + j];
    cic_vmat_free(&all);
    return 0;
}

/* y := Q^T a (left) or a Q. */
static int by_q(cic_vmat *y, const vctx *c, const cic_vmat *a, bool left)
{
    cic_vmat q;
    if (c->noq)
        return cic_vmat_copy(y, a); /* no Q: the rule up to a rotation */
    qmat(c, &q);
    return left ? cic_vmat_mul(y, &q, true, a, false) : cic_vmat_mul(y, a, false, &q, false);
}

/* A reader's rule W diag(g) Q diag(1/g') and its mistakes. ng: the norm's
 * gains and biases (original g, b; rewrite g', b'). */
static int reader_rule(vctx *c, vslot *s, const vrule *r, cic_vmat *ng, valt *alt, int *na)
{
    cic_vmat x;
    bool g1 = all_equal(&ng[0], 1), gb1 = all_equal(&ng[2], 1);
    int hd = c->d / c->in->w->ca.heads, k = 0;
    if (cic_vmat_copy(&x, &s->wa) < 0)
        return -1;
    cic_vmat_scale_cols(&x, ng[0].v, false);
    if (by_q(&s->rule, c, &x, false) < 0)
        goto oom;
    if (!gb1)
        cic_vmat_scale_cols(&s->rule, ng[2].v, true);
    if (!alt)
        goto done;
    alt[k] = (valt){"equals the original (Q not applied)", NULL, NULL, "", {0, 0, NULL}};
    if (cic_vmat_copy(&alt[k++].m, &s->wa) < 0)
        goto oom;
    if (!g1) {
        alt[k] = (valt){"gain folded, Q not applied", NULL, NULL, "", {0, 0, NULL}};
        if (cic_vmat_copy(&alt[k++].m, &x) < 0)
            goto oom;
    }
    alt[k] = (valt){c->tab->unfused_text, c->tab->unfused, NULL, "", {0, 0, NULL}};
    if (by_q(&alt[k++].m, c, &s->wa, false) < 0)
        goto oom;
    if (!gb1) {
        alt[k] = (valt){"gain kept in the norm although folded into its readers", NULL,
                        r->norm_hf, "", {0, 0, NULL}};
        char nm[160], sh[48];
        snprintf(nm, sizeof nm, "%s.weight", r->norm_hf);
        names(alt[k].other_name, sizeof alt[k].other_name, sh, sizeof sh, c, nm);
        if (by_q(&alt[k++].m, c, &x, false) < 0)
            goto oom;
    }
    if (r->flags & F_QK) {
        alt[k] = (valt){"R3's Hadamard fused into it, so it acts before RoPE (R3 runs online "
                        "after RoPE: --online qk:hadamard)", "r3-fused-before-rope", NULL, "",
                        {0, 0, NULL}};
        if (cic_vmat_copy(&alt[k].m, &s->rule) < 0 || cic_vmat_hadamard(&alt[k++].m, hd, true) < 0)
            cic_vmat_free(&alt[k - 1].m); /* no Hadamard of that width: not a candidate */
    }
done:
    *na = k;
    cic_vmat_free(&x);
    return 0;
oom:
    *na = k;
    cic_vmat_free(&x);
    return -1;
}

/* A writer's rule Q^T C W (H) and its mistakes. */
static int writer_rule(vctx *c, vslot *s, const vrule *r, valt *alt, int *na)
{
    const char *out = r->flags & F_ATTN_OUT ? "attn-out-not-rotated" : NULL;
    bool ctr = c->tab->center, h = (r->flags & F_DOWN) && c->in->w->o->online_down;
    int f = s->wa.c, k = 0;
    cic_vmat base, t;
    if (cic_vmat_copy(&base, &s->wa) < 0)
        return -1;
    if (ctr)
        cic_vmat_center_cols(&base);
    if (by_q(&s->rule, c, &base, true) < 0 || (h && cic_vmat_hadamard(&s->rule, f, false) < 0))
        goto oom;
    if (!alt)
        goto done;
    alt[k] = (valt){"equals the original (Q^T not applied)", out, NULL, "", {0, 0, NULL}};
    if (cic_vmat_copy(&alt[k++].m, &s->wa) < 0)
        goto oom;
    if (ctr) {
        alt[k] = (valt){"centred, Q^T not applied", out, NULL, "", {0, 0, NULL}};
        if (cic_vmat_copy(&alt[k++].m, &base) < 0)
            goto oom;
        alt[k] = (valt){"Q^T applied, not centred (the mean not baked into the writer)",
                        "skip-mean-bake", NULL, "", {0, 0, NULL}};
        if (by_q(&alt[k++].m, c, &s->wa, true) < 0 ||
            (h && cic_vmat_hadamard(&alt[k - 1].m, f, false) < 0))
            goto oom;
    }
    if (r->flags & F_DOWN) {
        alt[k] = (valt){h ? "Hadamard missing (the online Hadamard runs and nothing fused "
                            "undoes it)"
                          : "R4's Hadamard fused without the online Hadamard at run time "
                            "(--online down_proj:hadamard)",
                        "r4-without-online-hadamard", NULL, "", {0, 0, NULL}};
        if (by_q(&t, c, &base, true) < 0)
            goto oom;
        alt[k++].m = t;
        if (!h && cic_vmat_hadamard(&alt[k - 1].m, f, false) < 0)
            cic_vmat_free(&alt[k - 1].m);
    }
done:
    *na = k;
    cic_vmat_free(&base);
    return 0;
oom:
    *na = k;
    cic_vmat_free(&base);
    return -1;
}

/* A reader's norm: the original's gain and bias, the rewrite's (1 and 0
 * when absent; a zero gain, which no W' makes exact, read as fused). */
static int norms_of(const vctx *c, const vrule *r, cic_vmat *ng)
{
    int i;
    if (r->writer)
        return 0;
    if (norm_vec(&ng[0], c->in->a, c->tab, r->norm, ".weight", c->d, 1) < 0 ||
        norm_vec(&ng[1], c->in->a, c->tab, r->norm, ".bias", c->d, 0) < 0 ||
        norm_vec(&ng[2], c->in->b, c->tab, r->norm, ".weight", c->d, 1) < 0 ||
        norm_vec(&ng[3], c->in->b, c->tab, r->norm, ".bias", c->d, 0) < 0)
        return -1;
    for (i = 0; i < c->d; i++)
        if (ng[2].v[i] == 0)
            ng[2].v[i] = 1;
    return 0;
}

static void slot_free(vslot *s)
{
    cic_vmat_free(&s->wa);
    cic_vmat_free(&s->wb);
    cic_vmat_free(&s->rule);
}

/* A linear's bias (OPT): a reader's c + W b - W' b', a writer's b C Q. */
static int bias_check(vctx *c, const vrule *r, const vslot *w, cic_vmat *ng)
{
    vslot s;
    valt alt[3];
    cic_vmat t, u;
    int na = 0, rc = -1;
    memset(&s, 0, sizeof s);
    memset(alt, 0, sizeof alt);
    memset(&t, 0, sizeof t);
    memset(&u, 0, sizeof u);
    names(s.name, sizeof s.name, s.shortn, sizeof s.shortn, c, r->bias_hf);
    if (part_of(&s.wa, c->in->a, c->tab, r->bias, r->part, r->parts) < 0 ||
        part_of(&s.wb, c->in->b, c->tab, r->bias, r->part, r->parts) < 0)
        goto done;
    if (!r->writer) {
        if (cic_vmat_mul(&t, &ng[1], false, &w->wa, true) < 0 ||
            cic_vmat_mul(&u, &ng[3], false, &w->rule, true) < 0 || cic_vmat_copy(&s.rule, &s.wa) < 0)
            goto done;
        for (na = 0; na < s.rule.c; na++)
            s.rule.v[na] += t.v[na] - u.v[na];
        na = 0;
        alt[na] = (valt){"equals the original (the LayerNorm's bias not fused into it)",
                         c->tab->unfused, NULL, "", {0, 0, NULL}};
        if (cic_vmat_copy(&alt[na++].m, &s.wa) < 0)
            goto done;
    } else {
        if (cic_vmat_copy(&t, &s.wa) < 0)
            goto done;
        cic_vmat_center_rows(&t);
        if (by_q(&s.rule, c, &t, false) < 0)
            goto done;
        alt[na] = (valt){"equals the original (Q not applied)",
                         r->flags & F_ATTN_OUT ? "attn-out-not-rotated" : NULL, NULL, "",
                         {0, 0, NULL}};
        if (cic_vmat_copy(&alt[na++].m, &s.wa) < 0)
            goto done;
        alt[na] = (valt){"centred, Q not applied",
                         r->flags & F_ATTN_OUT ? "attn-out-not-rotated" : NULL, NULL, "",
                         {0, 0, NULL}};
        if (cic_vmat_copy(&alt[na++].m, &t) < 0)
            goto done;
        alt[na] = (valt){"Q applied, not centred (the mean not baked into the writer)",
                         "skip-mean-bake", NULL, "", {0, 0, NULL}};
        if (by_q(&alt[na++].m, c, &s.wa, false) < 0)
            goto done;
    }
    s.sig = r->writer ? 2 : 0;
    s.dist = vdist(c, &s, &s.rule);
    if (!(s.dist <= c->g->tol))
        judge(c, &s, alt, na);
    rc = 0;
done:
    alts_free(alt, na);
    cic_vmat_free(&t);
    cic_vmat_free(&u);
    slot_free(&s);
    return rc;
}

/* Slot s of rule r: both tensors, the rule, and (when it differs) the
 * mistakes judged now unless keep (v_proj and o_proj wait for R2). */
static int slot_run(vctx *c, vslot *s, const vrule *r, bool keep)
{
    cic_vmat ng[4];
    valt alt[8];
    int na = 0, i, rc = -1;
    memset(ng, 0, sizeof ng);
    memset(alt, 0, sizeof alt);
    names(s->name, sizeof s->name, s->shortn, sizeof s->shortn, c, r->hf);
    if (part_of(&s->wa, c->in->a, c->tab, r->model, r->part, r->parts) < 0 ||
        part_of(&s->wb, c->in->b, c->tab, r->model, r->part, r->parts) < 0 ||
        norms_of(c, r, ng) < 0)
        goto done;
    if (c->noq && !r->writer && !all_equal(&ng[2], 1)) {
        /* W diag(g) Q diag(1/g'): its Gram matrix depends on Q */
        char nm[160], sh[48], full[200], t[300];
        snprintf(nm, sizeof nm, "%s.weight", r->norm_hf);
        names(full, sizeof full, sh, sizeof sh, c, nm);
        snprintf(t, sizeof t, "%s: gain kept in the norm of a rotated rewrite (its readers, "
                 "W diag(g) Q diag(1/g') if exact, cannot be checked without Q)", sh);
        c->wrong += !c->g->n || strcmp(c->g->it[c->g->n - 1].finding, t);
        finding(c, full, NULL, NAN, NAN, t);
        rc = 0;
        goto done;
    }
    if ((r->writer ? writer_rule(c, s, r, NULL, &na) : reader_rule(c, s, r, ng, NULL, &na)) < 0)
        goto done;
    s->sig = r->writer ? 1 : 2;
    s->dist = vdist(c, s, &s->rule);
    s->ok = s->dist <= c->g->tol;
    if (!s->ok && !keep) {
        cic_vmat_free(&s->rule);
        if ((r->writer ? writer_rule(c, s, r, alt, &na) : reader_rule(c, s, r, ng, alt, &na)) < 0)
            goto done;
        judge(c, s, alt, na);
    }
    if (r->bias && bias_check(c, r, s, ng) < 0)
        goto done;
    rc = 0;
done:
    alts_free(alt, na);
    for (i = 0; i < 4; i++)
        cic_vmat_free(&ng[i]);
    return rc;
}

/* The mistakes of a slot kept for R2, judged now. */
static int slot_judge(vctx *c, vslot *s, const vrule *r)
{
    cic_vmat ng[4];
    valt alt[8];
    int na = 0, i, rc = -1;
    memset(ng, 0, sizeof ng);
    memset(alt, 0, sizeof alt);
    if (norms_of(c, r, ng) < 0)
        goto done;
    cic_vmat_free(&s->rule);
    if ((r->writer ? writer_rule(c, s, r, alt, &na) : reader_rule(c, s, r, ng, alt, &na)) < 0)
        goto done;
    judge(c, s, alt, na);
    rc = 0;
done:
    alts_free(alt, na);
    for (i = 0; i < 4; i++)
        cic_vmat_free(&ng[i]);
    return rc;
}

/* ---- R2: v_proj and o_proj per key/value head ---- */

/* ||A^T A - B^T B||_F / ||B^T B||_F for n x p blocks a, b (row stride ld):
 * equal when A = R B for an orthogonal R. */
static double gram_dist(const double *a, const double *b, int n, int p, int ld, bool rows)
{
    double s = 0, nb = 0;
    int i, j, k;
    for (i = 0; i < p; i++)
        for (j = 0; j < p; j++) {
            double ga = 0, gb = 0;
            for (k = 0; k < n; k++) {
                size_t ii = rows ? (size_t)i * ld + k : (size_t)k * ld + i;
                size_t jj = rows ? (size_t)j * ld + k : (size_t)k * ld + j;
                ga += a[ii] * a[jj];
                gb += b[ii] * b[jj];
            }
            s += (ga - gb) * (ga - gb);
            nb += gb * gb;
        }
    return nb > 0 ? sqrt(s / nb) : (s > 0 ? INFINITY : 0);
}

/* What the per-head checks found. */
typedef struct {
    bool v_rot, o_rot;  /* every head's block a rotation of the rule's */
    int bad, heads;     /* heads whose product o_h v_j differs */
    bool group_ok;      /* every key/value group has a head whose product agrees */
    char list[120];     /* the heads that differ */
} r2_found;

/* The probes through v (vz = V Z) and o (oz = Z^T O) of both, and per head
 * the products O_h (V_j Z). */
static int r2_measure(vctx *c, const vslot *sv, const vslot *so, r2_found *f)
{
    int H = c->in->w->ca.heads, kv = c->in->w->ca.kv_heads, hd = c->d / H, p = NPROBE, h, j;
    double tol = 8 * c->g->tol;
    cic_vmat z, vzb, vzr, ozb, ozr, pb, pr;
    int rc = -1, n = 0;
    memset(f, 0, sizeof *f);
    memset(&pb, 0, sizeof pb);
    memset(&pr, 0, sizeof pr);
    vzb.v = vzr.v = ozb.v = ozr.v = NULL;
    if (cic_vmat_init(&z, c->d, p) < 0)
        return -1;
    cic_vmat_probes(&z);
    if (cic_vmat_mul(&vzb, &sv->wb, false, &z, false) < 0 ||
        cic_vmat_mul(&vzr, &sv->rule, false, &z, false) < 0 ||
        cic_vmat_mul(&ozb, &z, true, &so->wb, false) < 0 ||
        cic_vmat_mul(&ozr, &z, true, &so->rule, false) < 0 || cic_vmat_init(&pb, c->d, p) < 0 ||
        cic_vmat_init(&pr, c->d, p) < 0)
        goto done;
    f->v_rot = f->o_rot = f->group_ok = true;
    f->heads = H;
    for (j = 0; j < kv; j++)
        f->v_rot &= gram_dist(vzb.v + (size_t)j * hd * p, vzr.v + (size_t)j * hd * p, hd, p, p,
                              false) <= tol;
    for (h = 0; h < H; h++)
        f->o_rot &= gram_dist(ozb.v + h * hd, ozr.v + h * hd, hd, p, c->d, true) <= tol;
    for (j = 0; j < kv; j++) {
        bool any = false;
        for (h = j * (H / kv); h < (j + 1) * (H / kv); h++) {
            cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, c->d, p, hd, 1.0,
                        so->wb.v + h * hd, c->d, vzb.v + (size_t)j * hd * p, p, 0.0, pb.v, p);
            cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, c->d, p, hd, 1.0,
                        so->rule.v + h * hd, c->d, vzr.v + (size_t)j * hd * p, p, 0.0, pr.v, p);
            if (cic_vmat_dist(&pb, &pr) <= tol) {
                any = true;
                continue;
            }
            f->bad++;
            if (n < (int)sizeof f->list - 8)
                n += snprintf(f->list + n, sizeof f->list - (size_t)n, "%s%d", n ? ", " : "", h);
        }
        f->group_ok &= any;
    }
    rc = 0;
done:
    cic_vmat_free(&z);
    cic_vmat_free(&vzb);
    cic_vmat_free(&vzr);
    cic_vmat_free(&ozb);
    cic_vmat_free(&ozr);
    cic_vmat_free(&pb);
    cic_vmat_free(&pr);
    return rc;
}

/* v_proj and o_proj, when one differs from its rule without R2: a
 * consistent R2 (every product agrees) is no mistake; the R2 mistakes are
 * named; anything else is left to the tensors' own alternatives. */
static int r2_check(vctx *c, vslot *sv, vslot *so)
{
    r2_found f;
    char t[480];
    if (r2_measure(c, sv, so, &f) < 0)
        return -1;
    if (f.bad == 0) { /* R2 per key/value head, as it should be */
        sv->done = so->done = true;
        return 0;
    }
    if (f.v_rot && !sv->ok && so->ok) {
        snprintf(t, sizeof t, "v_proj/o_proj: R2 applied to v_proj per key/value head, not to "
                 "o_proj's columns");
        finding(c, sv->name, "r2-values-without-o-proj", sv->dist, NAN, t);
    } else if (f.o_rot && sv->ok && !so->ok) {
        snprintf(t, sizeof t, "v_proj/o_proj: R2 applied to o_proj's columns per head, not to "
                 "v_proj");
        finding(c, so->name, "r2-values-without-o-proj", so->dist, NAN, t);
    } else if (f.v_rot && f.o_rot && f.group_ok && c->in->w->ca.kv_heads < f.heads) {
        snprintf(t, sizeof t, "v_proj/o_proj: R2 applied per query head: heads %s of %d "
                 "disagree with the values of their key/value head", f.list, f.heads);
        finding(c, so->name, "r2-per-query-head", so->dist, NAN, t);
    } else if (f.v_rot && f.o_rot) {
        snprintf(t, sizeof t, "no single tensor explains the break: v_proj and o_proj are each "
                 "rotated per head, by rotations that do not match (the product o_h v_j "
                 "differs from the original's in heads %s of %d)", f.list, f.heads);
        finding(c, "", NULL, NAN, NAN, t);
        c->spread = true;
    } else {
        return 0; /* not an R2 pattern: each tensor's own mistakes */
    }
    c->known |= !c->spread;
    c->wrong += !sv->ok + !so->ok;
    sv->done = so->done = true;
    return 0;
}

/* ---- the embeddings, when the first layer read token ids ---- */

/* The rewrite's embed_tokens against [C] E Q (llama: E Q; OPT fused: rows
 * centred, then Q). 0, or -1 when memory runs out; a checkpoint without
 * an embedding is passed over. */
static int embed_check(vctx *c)
{
    cic_diag d;
    cic_ckpt_storage st;
    vslot s;
    valt alt[3];
    cic_vmat t;
    int na = 0, rc = -1;
    memset(&d, 0, sizeof d);
    memset(&s, 0, sizeof s);
    memset(alt, 0, sizeof alt);
    memset(&t, 0, sizeof t);
    s.wa.v = cic_ckpt_embedding(c->in->ka, &s.wa.r, &s.wa.c, &st, &d);
    s.wb.v = s.wa.v ? cic_ckpt_embedding(c->in->kb, &s.wb.r, &s.wb.c, &st, &d) : NULL;
    if (!s.wa.v || !s.wb.v || s.wa.r != s.wb.r || s.wa.c != s.wb.c || s.wa.c != c->d) {
        rc = strstr(d.msg, "out of memory") ? -1 : 0;
        goto done;
    }
    snprintf(s.name, sizeof s.name, "%s", c->tab->embed);
    snprintf(s.shortn, sizeof s.shortn, "embed_tokens");
    if (cic_vmat_copy(&t, &s.wa) < 0)
        goto done;
    cic_vmat_center_rows(&t);
    if (by_q(&s.rule, c, c->tab->center ? &t : &s.wa, false) < 0)
        goto done;
    s.sig = 2;
    s.dist = vdist(c, &s, &s.rule);
    if (s.dist <= c->g->tol) {
        rc = 0;
        goto done;
    }
    alt[na] = (valt){"equals the original (Q not applied)", NULL, NULL, "", {0, 0, NULL}};
    if (cic_vmat_copy(&alt[na++].m, &s.wa) < 0)
        goto done;
    alt[na] = c->tab->center
                  ? (valt){"Q applied, not centred (the mean not baked into the embeddings)",
                           c->tab->embed_uncentred, NULL, "", {0, 0, NULL}}
                  : (valt){"mean-centred (RMSNorm model: nothing removes the mean it lost)",
                           "rmsnorm-centered-embeddings", NULL, "", {0, 0, NULL}};
    if (by_q(&alt[na++].m, c, c->tab->center ? &s.wa : &t, false) < 0)
        goto done;
    judge(c, &s, alt, na);
    rc = 0;
done:
    alts_free(alt, na);
    slot_free(&s);
    cic_vmat_free(&t);
    return rc;
}

/* ---- a family's layer ---- */

static int diag_table(cic_vdiag *g, const cic_vdiag_in *in, const vtable *tab)
{
    vctx c = {g, in, tab, in->w->ca.d_model, 0, false, false, in->q == NULL};
    vslot s[8], *sv = NULL, *so = NULL;
    int i, rc = -1;
    memset(s, 0, sizeof s);
    CIC_ASSERT(tab->n <= 8);
    for (i = 0; i < tab->n; i++) {
        bool keep = tab->t[i].flags & (F_V | F_O);
        if (c.noq && keep)
            continue; /* R2 rotates them by what Q alone does not show */
        if (slot_run(&c, &s[i], &tab->t[i], keep) < 0)
            goto done;
        if (tab->t[i].flags & F_V)
            sv = &s[i];
        if (tab->t[i].flags & F_O)
            so = &s[i];
        if (!keep)
            slot_free(&s[i]);
    }
    if (sv && so && (!sv->ok || !so->ok) && r2_check(&c, sv, so) < 0)
        goto done;
    for (i = 0; i < tab->n; i++)
        if (!c.noq && (tab->t[i].flags & (F_V | F_O)) && !s[i].ok && !s[i].done &&
            slot_judge(&c, &s[i], &tab->t[i]) < 0)
            goto done;
    if (in->layer == in->w->o->layer0 && !in->w->hidden && embed_check(&c) < 0)
        goto done;
    if (c.wrong == 0 && !c.noq)
        cic_vdiag_add(g, "", NULL, NAN, NAN, "no single tensor explains the break: every tensor "
                      "of layer %d equals the rule to its storage's rounding (do the options "
                      "match the rewrite: --online, --layernorm?)", in->layer);
    else if (c.wrong >= 2 && !c.known && !c.spread)
        cic_vdiag_add(g, "", NULL, NAN, NAN, "no single tensor explains the break: %d tensors "
                      "differ from the rule, none as a known mistake would", c.wrong);
    rc = c.wrong > 0;
done:
    for (i = 0; i < 8; i++)
        slot_free(&s[i]);
    return rc;
}

int cic_vdiag_rmsnorm(cic_vdiag *g, const cic_vdiag_in *in)
{
    return diag_table(g, in, &T_LLAMA);
}

int cic_vdiag_opt(cic_vdiag *g, const cic_vdiag_in *in)
{
    return diag_table(g, in, &T_OPT);
}

int cic_vdiag_vit(cic_vdiag *g, const cic_vdiag_in *in)
{
    return diag_table(g, in, &T_VIT);
}

int cic_vdiag_gptj(cic_vdiag *g, const cic_vdiag_in *in)
{
    return diag_table(g, in, &T_GPTJ);
}
