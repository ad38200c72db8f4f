/* SPDX-License-Identifier: MIT */
/* verify_dit_in.c: what cicheck verify reads for a DiT rewrite
 * (verify_dit_int.h): a block's and the final layer's tensors of either
 * folder (shapes and dtypes checked, the rewrite's storage noted), the
 * rotations (--q, or the Hadamard matrices of branch-rotate), and the block
 * input and the conditions, seeded or from the input file. */
#include "verify_dit_int.h"

#include "../base/rng.h"
#include "../model/checkpoint.h"
#include "../xform/qmat.h"

#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

/* The storage of tensor t (name) noted into s, as cic_ckpt_storage_used
 * notes it: the fewest significand bits, the first tensor with them, and
 * how many. */
static void note_storage(cic_ckpt_storage *s, const cic_stfile_tensor *t)
{
    int bits = cic_stfile_dtype_bits(t->dtype);
    if (!bits)
        return;
    if (!s->tensor[0] || bits < s->bits) {
        s->bits = bits;
        s->count = 1;
        cic_strlcpy(s->tensor, t->name, sizeof s->tensor);
        cic_strlcpy(s->dtype, CIC_STFILE_DTYPE_NAME[t->dtype], sizeof s->dtype);
    } else if (bits == s->bits) {
        s->count++;
    }
}

/* Tensor name of k (folder dir) as rows x cols doubles (rows 1: a vector
 * [cols], [1, cols] allowed), of a float dtype, every value finite, into a
 * fresh *out; its storage into s when s. 0, 1 when absent and optional
 * (*out NULL), -1 with d set. */
static int read_t(double **out, const cic_ckpt *k, const char *dir, const char *name, int rows,
                  int cols, bool optional, const char *why, cic_ckpt_storage *s, cic_diag *d)
{
    const cic_stfile_tensor *t = cic_ckpt_tensor(k, name);
    size_t n = (size_t)rows * cols, i;
    bool fits;
    *out = NULL;
    if (!t) {
        if (optional)
            return 1;
        if (rows == 1)
            cic_diag_set(d, dir, 0, 0, "no tensor '%s' [%d]%s", name, cols, why);
        else
            cic_diag_set(d, dir, 0, 0, "no tensor '%s' [%d, %d]%s", name, rows, cols, why);
        return -1;
    }
    fits = (t->ndim == 2 && t->shape[0] == rows && t->shape[1] == cols) ||
           (rows == 1 && t->ndim == 1 && t->shape[0] == cols);
    if (!fits || !cic_stfile_dtype_bits(t->dtype)) {
        char shp[96] = "";
        int j;
        for (j = 0; j < t->ndim; j++)
            snprintf(shp + strlen(shp), sizeof shp - strlen(shp), "%s%lld", j ? ", " : "",
                     (long long)t->shape[j]);
        if (rows == 1)
            cic_diag_set(d, dir, 0, 0, "tensor '%s' is %s [%s]; expected a float [%d]%s", name,
                         CIC_STFILE_DTYPE_NAME[t->dtype], shp, cols, why);
        else
            cic_diag_set(d, dir, 0, 0, "tensor '%s' is %s [%s]; expected a float [%d, %d]%s",
                         name, CIC_STFILE_DTYPE_NAME[t->dtype], shp, rows, cols, why);
        return -1;
    }
    if (!(*out = cic_calloc(n, sizeof **out)) || cic_stfile_tensor_read_f64(*out, t, 0, n, d) < 0) {
        if (!d->msg[0])
            cic_diag_set(d, dir, 0, 0, "out of memory reading '%s'", name);
        free(*out);
        *out = NULL;
        return -1;
    }
    for (i = 0; i < n; i++)
        if (!isfinite((*out)[i])) {
            cic_diag_set(d, dir, 0, 0, "tensor '%s': value %zu is %g", name, i, (*out)[i]);
            free(*out);
            *out = NULL;
            return -1;
        }
    if (s)
        note_storage(s, t);
    return 0;
}

void vd_block_free(vd_block *b)
{
    int i;
    for (i = 0; i < VD_NT; i++) {
        free(b->t[i]);
        b->t[i] = NULL;
    }
}

/* Block l's tensors (blocks.{l}.*) of k into b; the modulation only when
 * mod. why: what the strategy stores (for a missing tensor). 0, or -1. */
int vd_load_block(vd_block *b, vdit *v, bool rw, int l, cic_diag *d)
{
    const vd_ctx *c = &v->c;
    int rows[VD_NT] = {3 * c->d, 1, c->d, 1, c->m, 1, c->d, 1, 6 * c->d, 1};
    int cols[VD_NT] = {c->d, 3 * c->d, c->d, c->d, c->d, c->m, c->m, c->d, c->dc, 6 * c->d};
    bool mod = !rw || c->st.fold != CIC_ADALN_FOLD_STATIC;
    char name[200], why[160];
    int i;
    memset(b, 0, sizeof *b);
    snprintf(why, sizeof why, rw ? " (a rewrite by %s stores it: docs/reference/dit-rewrite.md)"
                                 : " (a DiT block)", CIC_XFORM_NAME[v->r->kind]);
    for (i = 0; i < VD_NT; i++) {
        if (!mod && (i == VD_ADA_W || i == VD_ADA_B))
            continue; /* a static fold has none; any left over are not read */
        snprintf(name, sizeof name, "blocks.%d.%s", l, VD_NAME[i]);
        if (read_t(&b->t[i], rw ? v->kb : v->ka, rw ? v->o->trans : v->o->orig, name, rows[i],
                   cols[i], false, why, NULL, d) < 0) {
            vd_block_free(b);
            return -1;
        }
    }
    return 0;
}

/* The final layer's tensors (the first VD_NF of b). */
int vd_load_final(vd_block *b, vdit *v, bool rw, cic_diag *d)
{
    const vd_ctx *c = &v->c;
    int rows[VD_NF] = {c->dout, 1, 2 * c->d, 1}, cols[VD_NF] = {c->d, c->dout, c->dc, 2 * c->d};
    bool mod = !rw || c->st.fold != CIC_ADALN_FOLD_STATIC;
    int i;
    memset(b, 0, sizeof *b);
    for (i = 0; i < VD_NF; i++) {
        if (!mod && (i == VD_FADA_W || i == VD_FADA_B))
            continue;
        if (read_t(&b->t[i], rw ? v->kb : v->ka, rw ? v->o->trans : v->o->orig, VD_FNAME[i],
                   rows[i], cols[i], false, " (the final layer)",
                   NULL, d) < 0) {
            vd_block_free(b);
            return -1;
        }
    }
    return 0;
}

void vd_storage(vdit *v)
{
    bool mod = v->c.st.fold != CIC_ADALN_FOLD_STATIC;
    const cic_stfile_tensor *t;
    char name[200];
    int l, i;
    memset(&v->sb, 0, sizeof v->sb);
    v->sb.bits = 53;
    for (l = v->r->layer0; l < v->r->layer0 + v->r->n_layers; l++)
        for (i = 0; i < VD_NT; i++) {
            snprintf(name, sizeof name, "blocks.%d.%s", l, VD_NAME[i]);
            if ((mod || (i != VD_ADA_W && i != VD_ADA_B)) && (t = cic_ckpt_tensor(v->kb, name)))
                note_storage(&v->sb, t);
        }
    for (i = 0; v->r->have_head && i < VD_NF; i++)
        if ((mod || (i != VD_FADA_W && i != VD_FADA_B)) &&
            (t = cic_ckpt_tensor(v->kb, VD_FNAME[i])))
            note_storage(&v->sb, t);
}

/* H / sqrt(w) of cicheck's construction (its base H_K (x) Sylvester, no
 * signs) as w x w doubles, or NULL with d set. */
static double *plain_hadamard(int w, const char *dir, cic_diag *d)
{
    signed char *hk = NULL;
    int K, n2, i, j;
    double *h, sc = 1.0 / sqrt((double)w);
    if (cic_hadamard_base(&hk, &K, w) < 0) {
        char buf[300];
        cic_q_hadamard_suggest(buf, sizeof buf, w);
        cic_diag_set(d, dir, 0, 0, "branch-rotate rotates each linear's input by the Hadamard "
                     "matrix of its width; %d has none here: %s", w, buf);
        return NULL;
    }
    n2 = w / K;
    if (!(h = cic_calloc((size_t)w * w, sizeof *h))) {
        free(hk);
        cic_diag_set(d, dir, 0, 0, "out of memory");
        return NULL;
    }
    for (i = 0; i < w; i++)
        for (j = 0; j < w; j++)
            h[(size_t)i * w + j] = hk[(i / n2) * K + j / n2] *
                                   (__builtin_popcount((unsigned)(i % n2 & j % n2)) & 1 ? -sc : sc);
    free(hk);
    return h;
}


/* Q from --q: tensor o->q_tensor of the file (or its only one), a float
 * [d, d], orthogonal to CIC_Q_FILE_ORTH_MAX (max |Q^T Q - I| in double);
 * its storage into v->qs. */
static int load_q(vdit *v, cic_diag *d)
{
    const cic_verify_opts *o = v->o;
    int n = v->c.d, i, j, rc = -1;
    cic_stfile *f = cic_stfile_create(o->q_file, d);
    const cic_stfile_tensor *t;
    double *g = NULL, orth = 0;
    if (!f)
        return -1;
    t = o->q_tensor[0] ? cic_stfile_find(f, o->q_tensor)
                       : cic_stfile_count(f) == 1 ? cic_stfile_tensor_at(f, 0) : NULL;
    if (!t) {
        if (o->q_tensor[0])
            cic_diag_set(d, o->q_file, 0, 0, "no tensor '%s'", o->q_tensor);
        else
            cic_diag_set(d, o->q_file, 0, 0, "%d tensors: name the rotation with --q-tensor",
                         cic_stfile_count(f));
        goto done;
    }
    if (t->ndim != 2 || t->shape[0] != n || t->shape[1] != n || !cic_stfile_dtype_bits(t->dtype)) {
        cic_diag_set(d, o->q_file, 0, 0, "tensor '%s' must be a float [%d, %d] (d_model %d)",
                     t->name, n, n, n);
        goto done;
    }
    if (!(v->q = cic_calloc((size_t)n * n, sizeof *v->q)) ||
        !(g = cic_calloc((size_t)n * n, sizeof *g)) ||
        cic_stfile_tensor_read_f64(v->q, t, 0, (uint64_t)n * n, d) < 0)
        goto done;
    note_storage(&v->qs, t);
    cblas_dgemm(CblasRowMajor, CblasTrans, CblasNoTrans, n, n, n, 1.0, v->q, n, v->q, n, 0.0, g,
                n);
    for (i = 0; i < n; i++)
        for (j = 0; j < n; j++) {
            double e = fabs(g[(size_t)i * n + j] - (i == j));
            orth = e > orth || isnan(e) ? e : orth;
        }
    v->r->q_orth = orth;
    cic_strlcpy(v->r->q_dtype, CIC_STFILE_DTYPE_NAME[t->dtype], sizeof v->r->q_dtype);
    if (!(orth <= CIC_Q_FILE_ORTH_MAX)) {
        cic_diag_set(d, o->q_file, 0, 0, "tensor '%s' is not orthogonal: max |Q^T Q - I| = "
                     "%.3g, above %g", t->name, orth, CIC_Q_FILE_ORTH_MAX);
        goto done;
    }
    v->c.q = v->q;
    rc = 0;
done:
    if (rc < 0 && !d->msg[0])
        cic_diag_set(d, o->q_file, 0, 0, "out of memory");
    free(g);
    cic_stfile_destroy(f);
    return rc;
}

int vd_load_rotations(vdit *v, cic_diag *d)
{
    const char *name = CIC_XFORM_NAME[v->r->kind];
    if (v->c.st.branch) {
        if (v->o->q_file[0]) {
            cic_diag_set(d, v->o->q_file, 0, 0, "--q: %s leaves the residual stream unrotated; "
                         "each linear's input is rotated by the Hadamard matrix of its width "
                         "(docs/reference/dit-rewrite.md)", name);
            return -1;
        }
        if (!(v->hd = plain_hadamard(v->c.d, v->o->trans, d)) ||
            !(v->hm = plain_hadamard(v->c.m, v->o->trans, d)))
            return -1;
        v->c.hd = v->hd;
        v->c.hm = v->hm;
        return 0;
    }
    if (!v->o->q_file[0]) {
        cic_diag_set(d, v->o->trans, 0, 0, "--adaln %s rotates the residual stream: give its "
                     "rotation with --q FILE (a safetensors [%d, %d] Q; the stream is x Q)",
                     name, v->c.d, v->c.d);
        return -1;
    }
    return load_q(v, d);
}

/* A seeded fill of n values (key (seed, name), normal, std 1, rounded to
 * binary32 as every seeded input) as doubles. */
static int seeded(double *out, size_t n, uint64_t seed, const char *name)
{
    float *f = cic_calloc(n, sizeof *f);
    size_t i;
    if (!f)
        return -1;
    cic_rng_fill_f32(f, n, cic_rng_key(seed, name), CIC_DIST_NORMAL, 1.0, 1);
    for (i = 0; i < n; i++)
        out[i] = f[i];
    free(f);
    return 0;
}

/* The shape of t as text ("[2, 8, 32]"). */
static void shape_text(char *buf, size_t cap, const cic_stfile_tensor *t)
{
    int j;
    snprintf(buf, cap, "[");
    for (j = 0; j < t->ndim; j++)
        snprintf(buf + strlen(buf), cap - strlen(buf), "%s%lld", j ? ", " : "",
                 (long long)t->shape[j]);
    snprintf(buf + strlen(buf), cap - strlen(buf), "]");
}

/* A --samples or --tokens given (> 0) that is not what the file holds: an
 * error naming both (the file's tensor and shape in name, shape). */
static bool given_disagrees(const vdit *v, int64_t B, int64_t N, const char *name,
                            const char *shape, cic_diag *d)
{
    const char *fn = v->o->input_file;
    if (v->o->samples > 0 && v->o->samples != B) {
        cic_diag_set(d, fn, 0, 0, "--samples %d, but the file's %s is %s: %lld samples",
                     v->o->samples, name, shape, (long long)B);
        return true;
    }
    if (v->o->tokens > 0 && v->o->tokens != N) {
        cic_diag_set(d, fn, 0, 0, "--tokens %d, but the file's %s is %s: %lld tokens",
                     v->o->tokens, name, shape, (long long)N);
        return true;
    }
    return false;
}

/* The sizes the input file gives: "input" [samples, tokens, d] or
 * [samples * tokens, d] and "c" [samples, d_cond], against each other;
 * *xi, *ci the tensors (NULL when absent). */
static int file_sizes(vdit *v, const cic_stfile *f, const cic_stfile_tensor **xi,
                      const cic_stfile_tensor **ci, cic_diag *d)
{
    const char *fn = v->o->input_file;
    char sx[96] = "", sc[96] = "";
    int64_t B = v->o->samples, N = v->o->tokens;
    *xi = cic_stfile_find(f, "input");
    *ci = cic_stfile_find(f, "c");
    if (*xi)
        shape_text(sx, sizeof sx, *xi);
    if (*ci)
        shape_text(sc, sizeof sc, *ci);
    if (!*xi && !*ci) {
        cic_diag_set(d, fn, 0, 0, "a DiT's input file holds \"input\" [samples, tokens, %d] "
                     "hidden states and/or \"c\" [samples, %d] conditions; it has neither",
                     v->c.d, v->c.dc);
        return -1;
    }
    if (*ci && ((*ci)->ndim != 2 || (*ci)->shape[1] != v->c.dc || (*ci)->shape[0] < 1)) {
        cic_diag_set(d, fn, 0, 0, "\"c\" is %s; the conditions must be [samples, d_cond] "
                     "= [samples, %d]", sc, v->c.dc);
        return -1;
    }
    if (*xi && !cic_stfile_dtype_is_float((*xi)->dtype)) {
        cic_diag_set(d, fn, 0, 0, "\"input\" is %s %s; hidden states are a float tensor (F32, "
                     "BF16, F16 or F64)", CIC_STFILE_DTYPE_NAME[(*xi)->dtype], sx);
        return -1;
    }
    if (*ci && !cic_stfile_dtype_is_float((*ci)->dtype)) {
        cic_diag_set(d, fn, 0, 0, "\"c\" is %s %s; the conditions are a float tensor (F32, "
                     "BF16, F16 or F64)", CIC_STFILE_DTYPE_NAME[(*ci)->dtype], sc);
        return -1;
    }
    if (*ci)
        B = (*ci)->shape[0];
    else if (B == 0 && !(*xi && (*xi)->ndim == 2 && N > 0))
        B = 1; /* a [rows, d] input with neither option: one sample (input_shape.h) */
    else if (B == 0 && (B = (*xi)->shape[0] / N) < 1)
        B = 1; /* --tokens splits the rows; what does not fit is named below */
    if (!*xi && N == 0)
        N = CIC_VERIFY_TOKENS; /* seeded hidden states beside the file's conditions */
    if (*xi && (*xi)->ndim == 3 && (*xi)->shape[2] == v->c.d) {
        if (*ci && (*xi)->shape[0] != B) {
            cic_diag_set(d, fn, 0, 0, "\"c\" %s has %lld conditions, \"input\" %s %lld samples: "
                         "one condition per sample", sc, (long long)B, sx,
                         (long long)(*xi)->shape[0]);
            return -1;
        }
        B = (*xi)->shape[0];
        N = (*xi)->shape[1];
    } else if (*xi && (*xi)->ndim == 2 && (*xi)->shape[1] == v->c.d) {
        if ((*xi)->shape[0] % B) {
            cic_diag_set(d, fn, 0, 0, "\"input\" %s has %lld rows, not a multiple of the %lld "
                         "samples (%s): give [samples, tokens, %d]", sx,
                         (long long)(*xi)->shape[0], (long long)B,
                         *ci ? "the rows of \"c\"" : "--samples", v->c.d);
            return -1;
        }
        N = (*xi)->shape[0] / B;
    } else if (*xi) {
        cic_diag_set(d, fn, 0, 0, "\"input\" is %s; hidden states are [samples, tokens, %d] "
                     "(or [samples * tokens, %d])", sx, v->c.d, v->c.d);
        return -1;
    }
    if (B > CIC_MAX_SAMPLES || N < 1 || N > CIC_CASE_MAX_TOKENS || B * N > CIC_CASE_MAX_ROWS) {
        cic_diag_set(d, fn, 0, 0, "%lld tokens x %lld samples: at most %d tokens, %d samples "
                     "and %d rows", (long long)N, (long long)B, CIC_CASE_MAX_TOKENS,
                     CIC_MAX_SAMPLES, CIC_CASE_MAX_ROWS);
        return -1;
    }
    if (given_disagrees(v, B, N, *xi ? "\"input\"" : "\"c\"", *xi ? sx : sc, d))
        return -1;
    v->c.B = (int)B;
    v->c.N = (int)N;
    return 0;
}

/* The conditions and the input: from the file where it has them, else
 * seeded. */
static int read_inputs(vdit *v, cic_diag *d)
{
    const cic_stfile_tensor *xi = NULL, *ci = NULL;
    cic_stfile *f = NULL;
    size_t R, i;
    int rc = -1;
    if (v->o->input_kind == CIC_INPUT_FILE) {
        if (!(f = cic_stfile_create(v->o->input_file, d)) || file_sizes(v, f, &xi, &ci, d) < 0)
            goto done;
    } else {
        v->c.B = v->o->samples;
        v->c.N = v->o->tokens;
    }
    R = (size_t)v->c.B * v->c.N;
    if (!(v->x = cic_calloc(R * v->c.d, sizeof *v->x)) ||
        !(v->cond = cic_calloc((size_t)v->c.B * v->c.dc, sizeof *v->cond)))
        goto done;
    if (xi ? cic_stfile_tensor_read_f64(v->x, xi, 0, R * v->c.d, d) < 0
           : seeded(v->x, R * v->c.d, v->o->seed, "input") < 0)
        goto done;
    if (ci ? cic_stfile_tensor_read_f64(v->cond, ci, 0, (size_t)v->c.B * v->c.dc, d) < 0
           : seeded(v->cond, (size_t)v->c.B * v->c.dc, v->o->seed, "cond") < 0)
        goto done;
    for (i = 0; i < R * v->c.d; i++)
        if (!isfinite(v->x[i])) {
            cic_diag_set(d, v->o->input_file, 0, 0, "\"input\": value %zu is not finite", i);
            goto done;
        }
    for (i = 0; i < (size_t)v->c.B * v->c.dc; i++)
        if (!isfinite(v->cond[i])) {
            cic_diag_set(d, v->o->input_file, 0, 0, "\"c\": value %zu is not finite", i);
            goto done;
        }
    v->r->cond_file = ci != NULL;
    v->r->hidden_file = xi != NULL;
    rc = 0;
done:
    if (rc < 0 && !d->msg[0])
        cic_diag_set(d, v->o->orig, 0, 0, "out of memory");
    cic_stfile_destroy(f);
    return rc;
}

int vd_load_inputs(vdit *v, cic_diag *d)
{
    int s, dc = v->c.dc;
    if (read_inputs(v, d) < 0)
        return -1;
    v->r->calib = -1;
    if (v->c.st.fold != CIC_ADALN_FOLD_STATIC)
        return 0;
    if (read_t(&v->c0, v->kb, v->o->trans, "adaln.c0", 1, dc, false,
               ": a static fold stores the condition it was folded for", NULL, d) < 0)
        return -1;
    if (!v->r->cond_file) /* seeded: sample 0 is the calibration condition */
        memcpy(v->cond, v->c0, (size_t)dc * sizeof *v->cond);
    for (s = 0; s < v->c.B && v->r->calib < 0; s++)
        if (!memcmp(v->cond + (size_t)s * dc, v->c0, (size_t)dc * sizeof *v->c0))
            v->r->calib = s;
    return 0;
}
