/* SPDX-License-Identifier: MIT */
/* verify_dit_diag.c: what is wrong with a broken DiT block (verify_dit_int.h,
 * vd_diagnose). Each tensor the rewrite stores is compared with what its
 * strategy's rule makes of the original's (docs/reference/dit-rewrite.md):
 * a static fold's readers W diag(1 + scale(c0)) Q and biases b + W
 * shift(c0), its writers Q^T C diag(gate(c0)) W; branch-rotate's linears W
 * H; the other strategies keep every weight. A tensor off the rule is
 * matched against the known mistakes (not folded, Q or Q^T missing, the
 * mean not removed, the gate or the modulation not folded, the fold of
 * another sample's condition, Q folded into a weight the strategy keeps,
 * the Hadamard missing); relative Frobenius differences at most the
 * equivalence threshold count as equal. When every tensor keeps the rule,
 * the finding is about the block: a static fold judged on another
 * condition, or the online ops and the input. */
#include "verify_dit_int.h"

#include <cblas.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* ||a - e||_F / ||e||_F (||a||_F when e is zero). */
static double rel(const double *a, const double *e, size_t n)
{
    double num = 0, den = 0;
    size_t i;
    for (i = 0; i < n; i++) {
        num += (a[i] - e[i]) * (a[i] - e[i]);
        den += e[i] * e[i];
    }
    return den > 0 ? sqrt(num / den) : sqrt(num);
}

static void add(cic_verify_dit_result *r, int layer, const char *tensor, const char *fmt, ...)
{
    cic_vdit_finding *f;
    va_list ap;
    if (r->n_find >= CIC_VDIT_MAX_FINDINGS)
        return;
    f = &r->find[r->n_find++];
    f->layer = layer;
    cic_strlcpy(f->tensor, tensor, sizeof f->tensor);
    va_start(ap, fmt);
    vsnprintf(f->finding, sizeof f->finding, fmt, ap);
    va_end(ap);
}

/* A reader [n, k] as a static fold makes it: W diag(1 + scale) Q (scale
 * NULL: not folded; q NULL: not rotated). */
static void reader(double *out, const double *w, int n, int k, const double *scale,
                   const double *q, double *tmp)
{
    size_t i, j;
    for (i = 0; i < (size_t)n; i++)
        for (j = 0; j < (size_t)k; j++)
            tmp[i * k + j] = w[i * k + j] * (scale ? 1.0 + scale[j] : 1.0);
    if (q)
        cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, k, k, 1.0, tmp, k, q, k, 0.0,
                    out, k);
    else
        memcpy(out, tmp, (size_t)n * k * sizeof *out);
}

/* A reader's bias b + W shift (shift NULL: b). */
static void reader_b(double *out, const double *b, const double *w, int n, int k,
                     const double *shift)
{
    int i, j;
    for (i = 0; i < n; i++) {
        out[i] = b[i];
        for (j = 0; shift && j < k; j++)
            out[i] += w[(size_t)i * k + j] * shift[j];
    }
}

/* A writer [d, k] (a bias: k = 1) as a static fold makes it: Q^T C
 * diag(gate) W, each part optional (gate NULL, center false, q NULL). */
static void writer(double *out, const double *w, int d, int k, const double *gate, bool center,
                   const double *q, double *tmp)
{
    size_t i, j;
    for (i = 0; i < (size_t)d; i++)
        for (j = 0; j < (size_t)k; j++)
            tmp[i * k + j] = w[i * k + j] * (gate ? gate[i] : 1.0);
    for (j = 0; center && j < (size_t)k; j++) {
        double mu = 0;
        for (i = 0; i < (size_t)d; i++)
            mu += tmp[i * k + j];
        for (i = 0; i < (size_t)d; i++)
            tmp[i * k + j] -= mu / d;
    }
    if (q)
        cblas_dgemm(CblasRowMajor, CblasTrans, CblasNoTrans, d, k, d, 1.0, q, d, tmp, k, 0.0,
                    out, k);
    else
        memcpy(out, tmp, (size_t)d * k * sizeof *out);
}

/* The shape [n, k] of tensor i of a block (k 1 for a bias, n its length). */
static void shape(int *n, int *k, int i, const vd_ctx *c)
{
    static const int nn[VD_NT] = {-3, -3, 0, 0, -1, -1, 0, 0, -6, -6};
    static const int kk[VD_NT] = {0, 1, 0, 1, 0, 1, -1, 1, -2, 1};
    *n = nn[i] == -3 ? 3 * c->d : nn[i] == -1 ? c->m : nn[i] == -6 ? 6 * c->d : c->d;
    *k = kk[i] == 0 ? c->d : kk[i] == -1 ? c->m : kk[i] == -2 ? c->dc : 1;
}

/* What tensor i of a static fold is for the modulation mod (6 d) in
 * variant: 0 the rule, 1 not rotated, 2 modulation not folded (reader
 * scale, writer gate), 3 mean not removed. */
static void static_rule(double *out, int i, const vd_block *ob, const double *mod, int variant,
                        const vd_ctx *c, double *tmp)
{
    int n, k, site = i >= VD_FC1_W ? 1 : 0, d = c->d;
    const double *q = variant == 1 ? NULL : c->q, *m = mod + (size_t)site * 3 * d;
    shape(&n, &k, i, c);
    if (i == VD_QKV_W || i == VD_FC1_W)
        reader(out, ob->t[i], n, k, variant == 2 ? NULL : m + d, q, tmp);
    else if (i == VD_QKV_B || i == VD_FC1_B)
        reader_b(out, ob->t[i], ob->t[i - 1], n, d, variant == 2 ? NULL : m);
    else
        writer(out, ob->t[i], d, k, variant == 2 ? NULL : m + 2 * d,
               c->centered && variant != 3, q, tmp);
}

/* Whether a reader w' [n, d] is the original w times diag(t') Q for some
 * t' (a fold of another modulation): X = w' Q^T, t'_k the least-squares
 * ratio of column k of X to w's, and X within tol of w diag(t'). e: n x d
 * scratch. */
static bool other_scale(const double *wr, const double *w, const vd_ctx *c, int n, double tol,
                        double *e)
{
    int d = c->d, j, k;
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, d, d, 1.0, wr, d, c->q, d, 0.0, e,
                d);
    for (k = 0; k < d; k++) {
        double num = 0, den = 0, t;
        for (j = 0; j < n; j++) {
            num += w[(size_t)j * d + k] * e[(size_t)j * d + k];
            den += w[(size_t)j * d + k] * w[(size_t)j * d + k];
        }
        t = den > 0 ? num / den : 0;
        for (j = 0; j < n; j++)
            e[(size_t)j * d + k] -= t * w[(size_t)j * d + k];
    }
    {
        double num = 0, den = 0;
        size_t i;
        for (i = 0; i < (size_t)n * d; i++) {
            num += e[i] * e[i];
            den += wr[i] * wr[i];
        }
        return den > 0 && sqrt(num / den) <= tol;
    }
}

/* Which known mistake a static fold's tensor i (off the rule) is: its
 * finding into buf, or "" when none matches within tol. */
static void static_mistake(char *buf, size_t cap, int i, const vd_block *ob,
                           const vd_block *rb, const vd_ctx *c, const double *cond,
                           const double *c0, double tol, double *e, double *tmp)
{
    bool rd = i == VD_QKV_W || i == VD_QKV_B || i == VD_FC1_W || i == VD_FC1_B;
    bool bias = i == VD_QKV_B || i == VD_FC1_B || i == VD_PROJ_B || i == VD_FC2_B;
    double *mod = tmp + (size_t)(3 * c->d > c->m ? 3 * c->d : c->m) * (c->d > c->m ? c->d : c->m);
    int n, k, v, s;
    size_t sz;
    shape(&n, &k, i, c);
    sz = (size_t)n * k;
    buf[0] = '\0';
    if (rel(rb->t[i], ob->t[i], sz) <= tol) {
        snprintf(buf, cap, "equals the original (not folded)");
        return;
    }
    vd_modulation(mod, c0, ob->t[VD_ADA_W], ob->t[VD_ADA_B], 6 * c->d, c->dc);
    for (v = 1; v <= 3; v++) {
        if ((v == 1 && rd && bias) || (v == 3 && (rd || !c->centered)))
            continue; /* a reader's bias has no Q; a reader no C */
        static_rule(e, i, ob, mod, v, c, tmp);
        if (rel(rb->t[i], e, sz) > tol)
            continue;
        if (v == 1)
            snprintf(buf, cap, "Q%s not applied", rd ? "" : "^T");
        else if (v == 2)
            snprintf(buf, cap, "%s not folded", !rd ? "gate" : bias ? "shift" : "(1 + scale)");
        else
            snprintf(buf, cap, "mean not removed (C missing)");
        return;
    }
    for (s = 0; s < c->B; s++) {
        if (!memcmp(cond + (size_t)s * c->dc, c0, (size_t)c->dc * sizeof *c0))
            continue;
        vd_modulation(mod, cond + (size_t)s * c->dc, ob->t[VD_ADA_W], ob->t[VD_ADA_B], 6 * c->d,
                      c->dc);
        static_rule(e, i, ob, mod, 0, c, tmp);
        if (rel(rb->t[i], e, sz) <= tol) {
            snprintf(buf, cap, "folded for sample %d's condition, not for adaln.c0 (static fold "
                     "used for another condition)", s);
            return;
        }
    }
    if ((i == VD_QKV_W || i == VD_FC1_W) && other_scale(rb->t[i], ob->t[i], c, n, tol, e))
        snprintf(buf, cap, "folded with another (1 + scale) than adaln.c0's: for another "
                 "condition (static fold used for another condition)");
}

/* The rule for tensor i of the strategies that keep the weights (branch:
 * the linears times H of their input's width) into e; NULL when it is the
 * original itself. */
static const double *kept_rule(double *e, int i, const vd_block *ob, const vd_ctx *c)
{
    int n, k;
    const double *h;
    if (!c->st.branch || (i != VD_QKV_W && i != VD_PROJ_W && i != VD_FC1_W && i != VD_FC2_W))
        return ob->t[i];
    shape(&n, &k, i, c);
    h = i == VD_FC2_W ? c->hm : c->hd;
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, k, k, 1.0, ob->t[i], k, h, k, 0.0,
                e, k);
    return e;
}

/* One tensor off the rule of a strategy that keeps the weights: the
 * mistake into buf ("" none). */
static void kept_mistake(char *buf, size_t cap, int i, const vd_block *ob, const vd_block *rb,
                         const vd_ctx *c, const char *name, double tol, double *e)
{
    int n, k;
    shape(&n, &k, i, c);
    buf[0] = '\0';
    if (c->st.branch) {
        if (rel(rb->t[i], ob->t[i], (size_t)n * k) <= tol)
            snprintf(buf, cap, "equals the original (Hadamard not applied)");
        return;
    }
    if (!c->q || (i != VD_QKV_W && i != VD_FC1_W && i != VD_PROJ_W && i != VD_FC2_W))
        return;
    if (i == VD_QKV_W || i == VD_FC1_W)
        cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, k, k, 1.0, ob->t[i], k, c->q,
                    k, 0.0, e, k);
    else
        cblas_dgemm(CblasRowMajor, CblasTrans, CblasNoTrans, n, k, n, 1.0, c->q, n, ob->t[i], k,
                    0.0, e, k);
    if (rel(rb->t[i], e, (size_t)n * k) <= tol)
        snprintf(buf, cap, "Q%s folded into it, but %s keeps the original weights (Q applied "
                 "twice)", i == VD_QKV_W || i == VD_FC1_W ? "" : "^T", name);
}

/* The findings from index first on of block layer: when more than two
 * and all of one text, one finding for the block. */
static void collapse(cic_verify_dit_result *r, int first, int layer)
{
    int j, other = -1;
    bool same = true;
    if (r->n_find - first <= 2)
        return;
    for (j = first; j < r->n_find; j++) {
        same &= !strcmp(r->find[j].finding, r->find[first].finding);
        if (strstr(r->find[j].finding, "another condition"))
            other = other < 0 ? j : other;
        else if (!strstr(r->find[j].finding, "no known mistake"))
            other = -2; /* a mistake of its own: keep the list */
    }
    if (!same && other < 0)
        return;
    /* one text, or a fold for another condition that the rest follows
     * from: one finding for the block */
    if (!same)
        memmove(&r->find[first], &r->find[other], sizeof r->find[first]);
    snprintf(r->find[first].tensor, sizeof r->find[first].tensor, "blocks.%d.* (every linear "
             "and bias)", layer);
    r->n_find = first + 1;
}

/* The samples not in ok, as text ("1, 2"). */
static void list(char *buf, size_t cap, const bool *ok, int B, bool want)
{
    int s;
    buf[0] = '\0';
    for (s = 0; s < B; s++)
        if (ok[s] == want)
            snprintf(buf + strlen(buf), cap - strlen(buf), "%s%d", buf[0] ? ", " : "", s);
}

/* When every tensor keeps the rule: what the block's verdicts say. */
static void block_finding(cic_verify_dit_result *r, int layer, const vd_ctx *c, const bool *ok)
{
    char bad[200], good[200];
    list(bad, sizeof bad, ok, c->B, false);
    list(good, sizeof good, ok, c->B, true);
    if (c->st.fold == CIC_ADALN_FOLD_STATIC && r->calib >= 0 && ok[r->calib])
        add(r, layer, "adaln.c0", "every tensor is folded for adaln.c0 (sample %d's condition) "
            "and exact on it; broken on sample%s %s, whose conditions differ (static fold used "
            "for another condition)", r->calib, strchr(bad, ',') ? "s" : "", bad);
    else if (c->st.fold == CIC_ADALN_FOLD_STATIC && r->calib < 0)
        add(r, layer, "adaln.c0", "every tensor is folded for adaln.c0, and no sample has that "
            "condition (static fold used for another condition)");
    else
        add(r, layer, "", "every stored tensor is as the rule says; broken on sample%s %s%s%s: "
            "the online ops or the block input are at fault (no single tensor explains it)",
            strchr(bad, ',') ? "s" : "", bad, good[0] ? ", exact on " : "", good);
}

void vd_diagnose(cic_verify_dit_result *r, int layer, const vd_block *ob, const vd_block *rb,
                 const vd_ctx *c, const double *cond, const double *c0,
                 const bool *ok_sample)
{
    size_t big = (size_t)(3 * c->d > c->m ? 3 * c->d : c->m) * (c->d > c->m ? c->d : c->m);
    double *e = malloc((big > (size_t)6 * c->d * c->dc ? big : (size_t)6 * c->d * c->dc) *
                       sizeof *e);
    double *tmp = malloc((big + 6 * (size_t)c->d) * sizeof *tmp);
    bool stat = c->st.fold == CIC_ADALN_FOLD_STATIC;
    int i, n, k, before = r->n_find;
    char name[200], buf[240];
    if (!e || !tmp) {
        add(r, layer, "", "not diagnosed: out of memory");
        goto done;
    }
    for (i = 0; i < VD_NT; i++) {
        const double *rule;
        double dr;
        if (stat && (i == VD_ADA_W || i == VD_ADA_B))
            continue;
        shape(&n, &k, i, c);
        snprintf(name, sizeof name, "blocks.%d.%s", layer, VD_NAME[i]);
        if (stat) {
            double *mod = tmp + big;
            vd_modulation(mod, c0, ob->t[VD_ADA_W], ob->t[VD_ADA_B], 6 * c->d, c->dc);
            static_rule(e, i, ob, mod, 0, c, tmp);
            rule = e;
        } else {
            rule = kept_rule(e, i, ob, c);
        }
        if ((dr = rel(rb->t[i], rule, (size_t)n * k)) <= r->eq)
            continue;
        if (stat)
            static_mistake(buf, sizeof buf, i, ob, rb, c, cond, c0, r->eq, e, tmp);
        else
            kept_mistake(buf, sizeof buf, i, ob, rb, c, CIC_XFORM_NAME[r->kind], r->eq, e);
        if (buf[0])
            add(r, layer, name, "%s", buf);
        else
            add(r, layer, name, "differs from the rule by %.3g (relative); no known mistake "
                "explains it", dr);
    }
    if (r->n_find == before)
        block_finding(r, layer, c, ok_sample);
    else
        collapse(r, before, layer);
done:
    free(e);
    free(tmp);
}

/* The final layer's tensor got (n values) against rule, then against the
 * candidates cand[j] (NULL: skipped) named label[j]; a finding under
 * layer -1 when off the rule. */
static void judge(cic_verify_dit_result *r, const char *name, const double *got,
                  const double *rule, size_t n, const double *const *cand,
                  const char *const *label, int nc)
{
    double dr = rel(got, rule, n);
    int j;
    if (dr <= r->eq)
        return;
    for (j = 0; j < nc; j++)
        if (cand[j] && rel(got, cand[j], n) <= r->eq) {
            add(r, -1, name, "%s", label[j]);
            return;
        }
    add(r, -1, name, "differs from the rule by %.3g (relative); no known mistake explains it",
        dr);
}

void vd_diagnose_final(cic_verify_dit_result *r, const vd_block *of, const vd_block *rf,
                       const vd_ctx *c, const double *c0)
{
    int d = c->d, o = c->dout;
    size_t nw = (size_t)o * d;
    double *e = malloc(4 * nw * sizeof *e), *tmp = malloc((nw + 2 * (size_t)d + o) * sizeof *tmp);
    double *mod, *eb;
    if (!e || !tmp) {
        add(r, -1, "", "not diagnosed: out of memory");
        goto done;
    }
    mod = tmp + nw;
    eb = mod + 2 * d;
    if (c->st.fold == CIC_ADALN_FOLD_STATIC) {
        const double *cw[3] = {of->t[VD_LIN_W], e + nw, e + 2 * nw};
        const char *lw[3] = {"equals the original (not folded)", "Q not applied",
                             "(1 + scale) not folded"};
        const double *cb[1] = {of->t[VD_LIN_B]};
        const char *lb[1] = {"equals the original (shift not folded)"};
        vd_modulation(mod, c0, of->t[VD_FADA_W], of->t[VD_FADA_B], 2 * d, c->dc);
        reader(e, of->t[VD_LIN_W], o, d, mod + d, c->q, tmp);
        reader(e + nw, of->t[VD_LIN_W], o, d, mod + d, NULL, tmp);
        reader(e + 2 * nw, of->t[VD_LIN_W], o, d, NULL, c->q, tmp);
        reader_b(eb, of->t[VD_LIN_B], of->t[VD_LIN_W], o, d, mod);
        judge(r, VD_FNAME[VD_LIN_W], rf->t[VD_LIN_W], e, nw, cw, lw, 3);
        judge(r, VD_FNAME[VD_LIN_B], rf->t[VD_LIN_B], eb, (size_t)o, cb, lb, 1);
    } else {
        const double *cw[1] = {c->st.branch ? of->t[VD_LIN_W] : c->q ? e + nw : NULL};
        char kept[160];
        const char *lw[1] = {kept};
        const double *h = c->st.branch ? c->hd : c->q;
        int i;
        if (c->st.branch)
            snprintf(kept, sizeof kept, "equals the original (Hadamard not applied)");
        else
            snprintf(kept, sizeof kept, "Q folded into it, but %s keeps the original weights "
                     "(Q applied twice)", CIC_XFORM_NAME[r->kind]);
        cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, o, d, d, 1.0, of->t[VD_LIN_W], d,
                    h, d, 0.0, e + nw, d);
        judge(r, VD_FNAME[VD_LIN_W], rf->t[VD_LIN_W], c->st.branch ? e + nw : of->t[VD_LIN_W],
              nw, cw, lw, 1);
        for (i = VD_LIN_B; i < VD_NF; i++)
            judge(r, VD_FNAME[i], rf->t[i], of->t[i],
                  i == VD_LIN_B ? (size_t)o : i == VD_FADA_B ? 2 * (size_t)d
                                                             : 2 * (size_t)d * c->dc,
                  NULL, NULL, 0);
    }
done:
    free(e);
    free(tmp);
}
