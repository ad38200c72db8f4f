/* SPDX-License-Identifier: MIT */
/* verify_diag_mat.c: dense double matrices for verify's diagnosis
 * (verify_diag_int.h), and its findings (cic_vdiag_add). The rewrite rule of one layer's tensor is a few
 * products by Q (d x d) and diagonal or centring factors, formed in
 * double through dgemm: one layer's weights and Q at a time, O(d^2 k)
 * flops per tensor. Double is far finer than any storage judged (at most
 * F32's 24 bits beside the 53 of the products), so the rule's own
 * rounding does not move a verdict. */
#include "verify_diag_int.h"

#include "../base/mpvec.h"
#include "../xform/qmat.h"

#include <cblas.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

void cic_vmat_free(cic_vmat *m)
{
    free(m->v);
    m->v = NULL;
    m->r = m->c = 0;
}

int cic_vmat_init(cic_vmat *m, int r, int c)
{
    m->r = r;
    m->c = c;
    m->v = cic_calloc((size_t)r * (size_t)c + 1, sizeof *m->v);
    return m->v ? 0 : -1;
}

int cic_vmat_copy(cic_vmat *m, const cic_vmat *a)
{
    if (cic_vmat_init(m, a->r, a->c) < 0)
        return -1;
    memcpy(m->v, a->v, (size_t)a->r * a->c * sizeof *m->v);
    return 0;
}

int cic_vmat_tensor(cic_vmat *m, const cic_model *mod, int id, int r0, int n)
{
    const cic_tensor *t = &mod->t[id];
    size_t i, c = (size_t)t->cols, off = (size_t)r0 * c;
    CIC_ASSERT(t->f32 && r0 >= 0 && r0 + n <= t->rows);
    if (cic_vmat_init(m, n, t->cols) < 0)
        return -1;
    for (i = 0; i < (size_t)n * c; i++)
        m->v[i] = t->f32[off + i];
    return 0;
}

int cic_vmat_mul(cic_vmat *y, const cic_vmat *a, bool at, const cic_vmat *b, bool bt)
{
    int m = at ? a->c : a->r, k = at ? a->r : a->c, n = bt ? b->r : b->c;
    CIC_ASSERT(k == (bt ? b->c : b->r));
    if (cic_vmat_init(y, m, n) < 0)
        return -1;
    cblas_dgemm(CblasRowMajor, at ? CblasTrans : CblasNoTrans, bt ? CblasTrans : CblasNoTrans,
                m, n, k, 1.0, a->v, a->c, b->v, b->c, 0.0, y->v, n);
    return 0;
}

void cic_vmat_scale_cols(cic_vmat *a, const double *g, bool inv)
{
    int i, j;
    for (i = 0; i < a->r; i++)
        for (j = 0; j < a->c; j++)
            a->v[(size_t)i * a->c + j] = inv ? a->v[(size_t)i * a->c + j] / g[j]
                                             : a->v[(size_t)i * a->c + j] * g[j];
}

void cic_vmat_center_cols(cic_vmat *a)
{
    int i, j;
    for (j = 0; j < a->c; j++) {
        double s = 0;
        for (i = 0; i < a->r; i++)
            s += a->v[(size_t)i * a->c + j];
        for (i = 0; i < a->r; i++)
            a->v[(size_t)i * a->c + j] -= s / a->r;
    }
}

void cic_vmat_center_rows(cic_vmat *a)
{
    int i, j;
    for (i = 0; i < a->r; i++) {
        double s = 0, *row = a->v + (size_t)i * a->c;
        for (j = 0; j < a->c; j++)
            s += row[j];
        for (j = 0; j < a->c; j++)
            row[j] -= s / a->c;
    }
}

/* v (w values) := v H_w (transpose: v H_w^T), H_w = hk (x) Syl_P as
 * cic_hadamard_kron_entry says, unscaled: butterflies of length P on each
 * block, then the blocks mixed by hk. t: w values of scratch. */
static void fwht(double *v, int w, int K, const signed char *hk, bool transpose, double *t)
{
    int P = w / K, len, i, j, a, c;
    for (c = 0; c < K; c++)
        for (len = 1; len < P; len <<= 1)
            for (i = 0; i < P; i += len << 1)
                for (j = i; j < i + len; j++) {
                    double x = v[c * P + j], y = v[c * P + j + len];
                    v[c * P + j] = x + y;
                    v[c * P + j + len] = x - y;
                }
    if (K == 1)
        return;
    for (c = 0; c < K; c++)
        for (j = 0; j < P; j++) {
            double s = 0;
            for (a = 0; a < K; a++)
                s += (transpose ? hk[c * K + a] : hk[a * K + c]) * v[a * P + j];
            t[c * P + j] = s;
        }
    memcpy(v, t, (size_t)w * sizeof *v);
}

int cic_vmat_hadamard(cic_vmat *a, int w, bool cols)
{
    signed char *hk = NULL;
    int K = 0, i, j, b, n = cols ? a->r : a->c, lines = cols ? a->c : a->r;
    double *v = cic_calloc(2 * (size_t)w, sizeof *v), s = 1 / sqrt((double)w);
    if (!v || w <= 0 || n % w || cic_hadamard_base(&hk, &K, w) < 0) {
        free(v);
        return -1;
    }
    for (i = 0; i < lines; i++)
        for (b = 0; b < n; b += w) {
            /* a line of w: a row's columns b.., or a column's rows b.. */
            for (j = 0; j < w; j++)
                v[j] = cols ? a->v[(size_t)(b + j) * a->c + i] : a->v[(size_t)i * a->c + b + j];
            /* (H^T a) column = (column^T H)^T: the row transform of H itself */
            fwht(v, w, K, hk, false, v + w);
            for (j = 0; j < w; j++) {
                if (cols)
                    a->v[(size_t)(b + j) * a->c + i] = v[j] * s;
                else
                    a->v[(size_t)i * a->c + b + j] = v[j] * s;
            }
        }
    free(hk);
    free(v);
    return 0;
}

/* Seeded probe vectors: d x NPROBE values in [-1, 1) (xorshift; the same
 * every run, so a diagnosis repeats). */
void cic_vmat_probes(cic_vmat *z)
{
    uint64_t x = 0x9E3779B97F4A7C15u;
    size_t i;
    for (i = 0; i < (size_t)z->r * z->c; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        z->v[i] = (double)(x >> 11) * 0x1p-52 - 1;
    }
}

/* ||G(a) - G(b)||_F / ||G(b)||_F, G(m) the Gram matrix of m's probes. */
double cic_vmat_gram_dist(const cic_vmat *a, const cic_vmat *b, bool left)
{
    cic_vmat z, pa, pb;
    double s = 0, nb = 0, r = NAN;
    int i, j, k, p = 16;
    CIC_ASSERT(a->r == b->r && a->c == b->c);
    pa.v = pb.v = NULL;
    if (cic_vmat_init(&z, left ? a->c : a->r, p) < 0)
        return NAN;
    cic_vmat_probes(&z);
    if (cic_vmat_mul(&pa, a, !left, &z, false) < 0 || cic_vmat_mul(&pb, b, !left, &z, false) < 0)
        goto done;
    for (i = 0; i < p; i++)
        for (j = 0; j < p; j++) {
            double ga = 0, gb = 0;
            for (k = 0; k < pa.r; k++) {
                ga += pa.v[(size_t)k * p + i] * pa.v[(size_t)k * p + j];
                gb += pb.v[(size_t)k * p + i] * pb.v[(size_t)k * p + j];
            }
            s += (ga - gb) * (ga - gb);
            nb += gb * gb;
        }
    r = nb > 0 ? sqrt(s / nb) : (s > 0 ? INFINITY : 0);
done:
    cic_vmat_free(&z);
    cic_vmat_free(&pa);
    cic_vmat_free(&pb);
    return r;
}

double cic_vmat_norm(const cic_vmat *a)
{
    double s = 0;
    size_t i;
    for (i = 0; i < (size_t)a->r * a->c; i++)
        s += a->v[i] * a->v[i];
    return sqrt(s);
}

double cic_vmat_dist(const cic_vmat *a, const cic_vmat *b)
{
    double s = 0, nb;
    size_t i;
    CIC_ASSERT(a->r == b->r && a->c == b->c);
    for (i = 0; i < (size_t)a->r * a->c; i++)
        s += (a->v[i] - b->v[i]) * (a->v[i] - b->v[i]);
    nb = cic_vmat_norm(b);
    if (nb == 0)
        return s == 0 ? 0 : INFINITY;
    return sqrt(s) / nb;
}

void cic_vdiag_add(cic_vdiag *g, const char *tensor, const char *mistake, double dist,
                   double mdist, const char *fmt, ...)
{
    cic_vdiag_item *it;
    va_list ap;
    if (g->n >= CIC_VDIAG_MAX)
        return;
    it = &g->it[g->n++];
    cic_strlcpy(it->tensor, tensor ? tensor : "", sizeof it->tensor);
    it->mistake = mistake;
    it->distance = dist;
    it->mistake_distance = mdist;
    va_start(ap, fmt);
    vsnprintf(it->finding, sizeof it->finding, fmt, ap);
    va_end(ap);
}
