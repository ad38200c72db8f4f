/* SPDX-License-Identifier: MIT */
/* verify_dit_fwd.c: the forward passes cicheck verify runs for a DiT block
 * and its final layer (verify_dit_int.h), in double through dgemm: the
 * original as the DiT reference code computes it (docs/design.md section
 * 3, "dit"), and the rewrite as its adaLN strategy's parts say (section 7;
 * the storage in docs/reference/dit-rewrite.md). Rows are tokens, sample s
 * owning rows s N .. s N + N - 1. */
#include "verify_dit_int.h"

#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

const char *const VD_NAME[VD_NT] = {
    [VD_QKV_W] = "attn.qkv.weight",   [VD_QKV_B] = "attn.qkv.bias",
    [VD_PROJ_W] = "attn.proj.weight", [VD_PROJ_B] = "attn.proj.bias",
    [VD_FC1_W] = "mlp.fc1.weight",    [VD_FC1_B] = "mlp.fc1.bias",
    [VD_FC2_W] = "mlp.fc2.weight",    [VD_FC2_B] = "mlp.fc2.bias",
    [VD_ADA_W] = "adaLN_modulation.1.weight", [VD_ADA_B] = "adaLN_modulation.1.bias"};
const char *const VD_FNAME[VD_NF] = {
    [VD_LIN_W] = "final_layer.linear.weight", [VD_LIN_B] = "final_layer.linear.bias",
    [VD_FADA_W] = "final_layer.adaLN_modulation.1.weight",
    [VD_FADA_B] = "final_layer.adaLN_modulation.1.bias"};

/* y (rows x n) = x (rows x k) W^T (+ b), W n x k. */
static void linear(double *y, const double *x, const double *w, const double *b, int rows,
                   int k, int n)
{
    int i, j;
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, rows, n, k, 1.0, x, k, w, k, 0.0, y,
                n);
    for (i = 0; b && i < rows; i++)
        for (j = 0; j < n; j++)
            y[(size_t)i * n + j] += b[j];
}

/* y (rows x n) = x (rows x n) M, M n x n (M^T when trans). */
static void right(double *y, const double *x, const double *mat, bool trans, int rows, int n)
{
    cblas_dgemm(CblasRowMajor, CblasNoTrans, trans ? CblasTrans : CblasNoTrans, rows, n, n, 1.0,
                x, n, mat, n, 0.0, y, n);
}

/* Each row of x (rows x n) without its mean. */
static void center_rows(double *x, int rows, int n)
{
    int i, j;
    for (i = 0; i < rows; i++) {
        double mu = 0;
        for (j = 0; j < n; j++)
            mu += x[(size_t)i * n + j];
        mu /= n;
        for (j = 0; j < n; j++)
            x[(size_t)i * n + j] -= mu;
    }
}

/* LN0 (center) or RMS0 of each row, no gain, no bias. */
static void norm0(double *y, const double *x, int rows, int n, double eps, bool center)
{
    int i, j;
    memcpy(y, x, (size_t)rows * n * sizeof *y);
    if (center)
        center_rows(y, rows, n);
    for (i = 0; i < rows; i++) {
        double v = 0, r;
        for (j = 0; j < n; j++)
            v += y[(size_t)i * n + j] * y[(size_t)i * n + j];
        r = 1.0 / sqrt(v / n + eps);
        for (j = 0; j < n; j++)
            y[(size_t)i * n + j] *= r;
    }
}

void vd_modulation(double *mod, const double *cond, const double *w, const double *b,
                   int rows, int dc)
{
    int i, k;
    for (i = 0; i < rows; i++) {
        double s = b[i];
        for (k = 0; k < dc; k++)
            s += w[(size_t)i * dc + k] * (cond[k] / (1.0 + exp(-cond[k])));
        mod[i] = s;
    }
}

static double gelu_tanh(double x)
{
    return 0.5 * x * (1.0 + tanh(0.79788456080286536 * (x + 0.044715 * x * x * x)));
}

/* Non-causal attention of each sample and head: qkv (rows x 3d: q | k | v,
 * head i in columns i dh ..) into a (rows x d). */
static int attention(double *a, const double *qkv, const vd_ctx *c, int samples)
{
    int d = c->d, dh = d / c->h, N = c->N, s, hh, i, j, k;
    double *p = malloc((size_t)N * sizeof *p), sc = 1.0 / sqrt((double)dh);
    if (!p)
        return -1;
    for (s = 0; s < samples; s++)
        for (hh = 0; hh < c->h; hh++)
            for (i = 0; i < N; i++) {
                const double *q = qkv + ((size_t)s * N + i) * 3 * d + hh * dh;
                double mx = -INFINITY, sum = 0;
                for (j = 0; j < N; j++) {
                    const double *kk = qkv + ((size_t)s * N + j) * 3 * d + d + hh * dh;
                    double t = 0;
                    for (k = 0; k < dh; k++)
                        t += q[k] * kk[k];
                    p[j] = t * sc;
                    mx = p[j] > mx ? p[j] : mx;
                }
                for (j = 0; j < N; j++)
                    sum += (p[j] = exp(p[j] - mx));
                for (k = 0; k < dh; k++) {
                    double t = 0;
                    for (j = 0; j < N; j++)
                        t += p[j] * qkv[((size_t)s * N + j) * 3 * d + 2 * d + hh * dh + k];
                    a[((size_t)s * N + i) * d + hh * dh + k] = t / sum;
                }
            }
    free(p);
    return 0;
}

/* The weights of one branch as it runs: reader and writer, and the
 * rotations of their inputs (branch-rotate; NULL none). */
typedef struct {
    const double *rw, *rb, *ww, *wb;
    const double *rot_in, *rot_mid;
} branch_w;

/* out (rows x d) = branch site (1 attention, 2 MLP) of z (rows x d),
 * rows = samples N. */
static int branch(double *out, const double *z, const branch_w *w, int site, int samples,
                  const vd_ctx *c)
{
    int d = c->d, n = site == 1 ? 3 * d : c->m, mid = site == 1 ? d : c->m;
    int rows = samples * c->N;
    size_t i;
    double *zr = malloc((size_t)rows * (mid > d ? mid : d) * sizeof *zr);
    double *u = malloc((size_t)rows * n * sizeof *u), *a = malloc((size_t)rows * mid * sizeof *a);
    int rc = -1;
    if (!zr || !u || !a)
        goto done;
    if (w->rot_in)
        right(zr, z, w->rot_in, false, rows, d);
    linear(u, w->rot_in ? zr : z, w->rw, w->rb, rows, d, n);
    if (site == 1) {
        if (attention(a, u, c, samples) < 0)
            goto done;
    } else {
        for (i = 0; i < (size_t)rows * mid; i++)
            a[i] = gelu_tanh(u[i]);
    }
    if (w->rot_mid)
        right(zr, a, w->rot_mid, false, rows, mid);
    linear(out, w->rot_mid ? zr : a, w->ww, w->wb, rows, mid, d);
    rc = 0;
done:
    free(zr);
    free(u);
    free(a);
    return rc;
}

/* h * (1 + scale) + shift for sample s's rows of h (in place). */
static void modulate(double *h, const double *shift, const double *scale, int N, int d)
{
    int i, j;
    for (i = 0; i < N; i++)
        for (j = 0; j < d; j++)
            h[(size_t)i * d + j] = h[(size_t)i * d + j] * (1.0 + scale[j]) + shift[j];
}

/* The original block, or a rewrite whose modulation runs as ops (no fold):
 * rw selects the rewrite's parts (the unrotation, the branch rotations). */
static int block_mod(double *y, const double *x, const double *cond, const vd_block *b,
                     const vd_ctx *c, bool rw)
{
    int d = c->d, N = c->N, B = c->B, R = N * B, site, s, i, j;
    bool unrot = rw && c->st.unrotate, br = rw && c->st.branch;
    double *h = malloc((size_t)R * d * sizeof *h), *z = malloc((size_t)R * d * sizeof *z);
    double *o = malloc((size_t)R * d * sizeof *o), *mod = malloc((size_t)B * 6 * d * sizeof *mod);
    int rc = -1;
    if (!h || !z || !o || !mod)
        goto done;
    for (s = 0; s < B; s++)
        vd_modulation(mod + (size_t)s * 6 * d, cond + (size_t)s * c->dc, b->t[VD_ADA_W],
                      b->t[VD_ADA_B], 6 * d, c->dc);
    memcpy(y, x, (size_t)R * d * sizeof *y);
    for (site = 1; site <= 2; site++) {
        int wi = site == 1 ? VD_QKV_W : VD_FC1_W, k = (site - 1) * 3;
        branch_w w = {b->t[wi], b->t[wi + 1], b->t[wi + 2], b->t[wi + 3], NULL, NULL};
        if (br) {
            w.rot_in = c->hd;
            w.rot_mid = site == 1 ? c->hd : c->hm;
        }
        norm0(h, y, R, d, c->eps, !unrot || !c->centered);
        if (unrot)
            right(z, h, c->q, true, R, d); /* z = h Q^T */
        else
            memcpy(z, h, (size_t)R * d * sizeof *z);
        for (s = 0; s < B; s++) {
            const double *m = mod + (size_t)s * 6 * d + (size_t)k * d;
            modulate(z + (size_t)s * N * d, m, m + d, N, d);
        }
        if (branch(o, z, &w, site, B, c) < 0)
            goto done;
        for (s = 0; s < B; s++)
            for (i = 0; i < N; i++)
                for (j = 0; j < d; j++)
                    o[((size_t)s * N + i) * d + j] *= mod[(size_t)s * 6 * d + (k + 2) * d + j];
        if (unrot && c->centered)
            center_rows(o, R, d);
        if (unrot)
            right(h, o, c->q, false, R, d); /* (o C) Q */
        for (i = 0; i < R * d; i++)
            y[i] += unrot ? h[i] : o[i];
    }
    rc = 0;
done:
    free(h);
    free(z);
    free(o);
    free(mod);
    return rc;
}

int vd_block_orig(double *y, const double *x, const double *cond, const vd_block *b,
                  const vd_ctx *c)
{
    return block_mod(y, x, cond, b, c, false);
}

/* A reader folded for one modulation (shift, scale): W(c) = W diag(1 +
 * scale) Q ([n, d]), b(c) = b + W shift; Q NULL: identity. */
static void fold_in(double *fw, double *fb, const double *w, const double *b,
                    const double *shift, const double *scale, const double *q, int n, int d,
                    double *tmp)
{
    int j, k;
    for (j = 0; j < n; j++) {
        double s = b[j];
        for (k = 0; k < d; k++) {
            tmp[(size_t)j * d + k] = w[(size_t)j * d + k] * (1.0 + scale[k]);
            s += w[(size_t)j * d + k] * shift[k];
        }
        fb[j] = s;
    }
    if (q)
        cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, d, d, 1.0, tmp, d, q, d, 0.0,
                    fw, d);
    else
        memcpy(fw, tmp, (size_t)n * d * sizeof *fw);
}

/* A writer folded for one gate: W(c) = Q^T C diag(gate) W ([d, k]: each
 * column centred when centered), b(c) = Q^T C (gate * b). */
static void fold_out(double *fw, double *fb, const double *w, const double *b,
                     const double *gate, const vd_ctx *c, int k, double *tmp)
{
    int d = c->d, i, j;
    double *tb = tmp + (size_t)d * k;
    for (i = 0; i < d; i++) {
        for (j = 0; j < k; j++)
            tmp[(size_t)i * k + j] = gate[i] * w[(size_t)i * k + j];
        tb[i] = gate[i] * b[i];
    }
    if (c->centered) {
        for (j = 0; j < k; j++) {
            double mu = 0;
            for (i = 0; i < d; i++)
                mu += tmp[(size_t)i * k + j];
            for (i = 0; i < d; i++)
                tmp[(size_t)i * k + j] -= mu / d;
        }
        center_rows(tb, 1, d);
    }
    cblas_dgemm(CblasRowMajor, CblasTrans, CblasNoTrans, d, k, d, 1.0, c->q, d, tmp, k, 0.0, fw,
                k);
    cblas_dgemv(CblasRowMajor, CblasTrans, d, d, 1.0, c->q, d, tb, 1, 0.0, fb, 1);
}

/* The per-sample fold (fold-in before each reader, fold-out of each writer,
 * per sample at run time from the weights kept) or the static fold (the
 * stored weights are folded already; no modulation). */
static int block_fold(double *y, const double *s, const double *cond, const vd_block *b,
                      const vd_ctx *c)
{
    int d = c->d, m = c->m, N = c->N, B = c->B, R = N * B, site, smp, i;
    bool per = c->st.fold == CIC_ADALN_FOLD_PER_SAMPLE;
    size_t wmax = (size_t)(3 * d > m ? 3 * d : m) * (d + 1) + (size_t)d * (m + 1);
    double *h = malloc((size_t)R * d * sizeof *h), *o = malloc((size_t)R * d * sizeof *o);
    double *mod = malloc((size_t)6 * d * sizeof *mod), *fw = malloc(wmax * sizeof *fw);
    double *tmp = malloc(wmax * sizeof *tmp);
    int rc = -1;
    if (!h || !o || !mod || !fw || !tmp)
        goto done;
    memcpy(y, s, (size_t)R * d * sizeof *y);
    for (site = 1; site <= 2; site++) {
        int wi = site == 1 ? VD_QKV_W : VD_FC1_W, n = site == 1 ? 3 * d : m;
        int k = site == 1 ? d : m, mk = (site - 1) * 3;
        branch_w w = {b->t[wi], b->t[wi + 1], b->t[wi + 2], b->t[wi + 3], NULL, NULL};
        norm0(h, y, R, d, c->eps, !c->centered);
        for (smp = 0; smp < (per ? B : 1); smp++) {
            int ns = per ? 1 : B;
            size_t off = (size_t)smp * N * d;
            branch_w wf = w;
            if (per) {
                double *fwi = fw, *fbi = fwi + (size_t)n * d, *fwo = fbi + n,
                       *fbo = fwo + (size_t)d * k;
                vd_modulation(mod, cond + (size_t)smp * c->dc, b->t[VD_ADA_W], b->t[VD_ADA_B],
                              6 * d, c->dc);
                fold_in(fwi, fbi, w.rw, w.rb, mod + (size_t)mk * d, mod + (size_t)(mk + 1) * d,
                        c->q, n, d, tmp);
                fold_out(fwo, fbo, w.ww, w.wb, mod + (size_t)(mk + 2) * d, c, k, tmp);
                wf = (branch_w){fwi, fbi, fwo, fbo, NULL, NULL};
            }
            if (branch(o + off, h + off, &wf, site, ns, c) < 0)
                goto done;
        }
        for (i = 0; i < R * d; i++)
            y[i] += o[i];
    }
    rc = 0;
done:
    free(h);
    free(o);
    free(mod);
    free(fw);
    free(tmp);
    return rc;
}

int vd_block_rw(double *y, const double *s, const double *cond, const vd_block *b,
                const vd_ctx *c)
{
    if (c->st.fold == CIC_ADALN_FOLD_NONE)
        return block_mod(y, s, cond, b, c, true);
    return block_fold(y, s, cond, b, c);
}

/* The final layer: norm, the modulation (shift | scale) or its fold, the
 * linear. rw: the rewrite's parts. */
static int final(double *y, const double *x, const double *cond, const vd_block *f,
                 const vd_ctx *c, bool rw)
{
    int d = c->d, N = c->N, B = c->B, R = N * B, s, o = c->dout;
    bool rot = rw && c->q, folded = rw && c->st.fold != CIC_ADALN_FOLD_NONE;
    bool per = rw && c->st.fold == CIC_ADALN_FOLD_PER_SAMPLE;
    double *h = malloc((size_t)R * d * sizeof *h), *z = malloc((size_t)R * d * sizeof *z);
    double *mod = malloc((size_t)2 * d * sizeof *mod);
    double *fw = malloc(((size_t)o * d + o) * sizeof *fw), *tmp = malloc((size_t)o * d * sizeof *tmp);
    int rc = -1;
    if (!h || !z || !mod || !fw || !tmp)
        goto done;
    norm0(h, x, R, d, c->eps, !rot || !c->centered);
    if (rot && !folded)
        right(z, h, c->q, true, R, d); /* unrotate */
    else
        memcpy(z, h, (size_t)R * d * sizeof *z);
    for (s = 0; s < B; s++) {
        const double *zs = z + (size_t)s * N * d;
        if (folded && !per) {
            linear(y + (size_t)s * N * o, zs, f->t[VD_LIN_W], f->t[VD_LIN_B], N, d, o);
            continue;
        }
        vd_modulation(mod, cond + (size_t)s * c->dc, f->t[VD_FADA_W], f->t[VD_FADA_B], 2 * d,
                      c->dc);
        if (per) {
            fold_in(fw, fw + (size_t)o * d, f->t[VD_LIN_W], f->t[VD_LIN_B], mod, mod + d, c->q,
                    o, d, tmp);
            linear(y + (size_t)s * N * o, zs, fw, fw + (size_t)o * d, N, d, o);
            continue;
        }
        if (rw && c->st.branch) { /* modulate before the input's rotation */
            memcpy(h + (size_t)s * N * d, z + (size_t)s * N * d, (size_t)N * d * sizeof *h);
            modulate(h + (size_t)s * N * d, mod, mod + d, N, d);
            right(z + (size_t)s * N * d, h + (size_t)s * N * d, c->hd, false, N, d);
        } else {
            modulate(z + (size_t)s * N * d, mod, mod + d, N, d);
        }
        linear(y + (size_t)s * N * o, z + (size_t)s * N * d, f->t[VD_LIN_W], f->t[VD_LIN_B], N,
               d, o);
    }
    rc = 0;
done:
    free(h);
    free(z);
    free(mod);
    free(fw);
    free(tmp);
    return rc;
}

int vd_final_orig(double *y, const double *x, const double *cond, const vd_block *f,
                  const vd_ctx *c)
{
    return final(y, x, cond, f, c, false);
}

int vd_final_rw(double *y, const double *s, const double *cond, const vd_block *f,
                const vd_ctx *c)
{
    return final(y, s, cond, f, c, true);
}

int vd_rotate(double *s, const double *x, const vd_ctx *c)
{
    int R = c->N * c->B, d = c->d;
    double *t;
    if (!c->q || !c->centered) {
        if (c->q)
            right(s, x, c->q, false, R, d);
        else
            memcpy(s, x, (size_t)R * d * sizeof *s);
        return 0;
    }
    if (!(t = malloc((size_t)R * d * sizeof *t)))
        return -1;
    memcpy(t, x, (size_t)R * d * sizeof *t);
    center_rows(t, R, d);
    right(s, t, c->q, false, R, d);
    free(t);
    return 0;
}

void vd_unrotate(double *x, const double *s, const vd_ctx *c)
{
    int R = c->N * c->B, d = c->d;
    if (!c->q)
        memcpy(x, s, (size_t)R * d * sizeof *x);
    else
        right(x, s, c->q, true, R, d);
}
