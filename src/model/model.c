/* SPDX-License-Identifier: MIT */
/* model.c: the model container itself (model.h): tensors, ops, clones,
 * unrounded values, and the weights' SHA-256. The original models of a case
 * are built by create.c, from the block descriptors and the graph-building
 * helpers of build.c. */
#include "model.h"


#include "../base/mpvec.h"

#include "lazy.h"

#include <string.h>
#include <sys/mman.h>

/* The op and site names are in op.c, with the op table. */

/* ---- container ---- */

/* t's unrounded values (MPFR, a recipe or doubles) dropped. */
static void drop_unrounded(cic_tensor *t)
{
    cic_mpvec_destroy(t->hp, (size_t)t->rows * (size_t)t->cols);
    cic_lazy_unref(t->lazy);
    free(t->f64);
    t->hp = NULL;
    t->lazy = NULL;
    t->f64 = NULL;
}

static void tensor_free(cic_tensor *t)
{
    if (!t->f32_mapped)
        free(t->f32);
    t->f32_mapped = false;
    t->f32 = NULL;
    drop_unrounded(t);
}

void cic_model_destroy(cic_model *m)
{
    int i;
    if (!m)
        return;
    for (i = 0; i < m->n_t; i++)
        tensor_free(&m->t[i]);
    free(m->t);
    free(m->ops);
    if (m->out_q)
        cic_mpvec_destroy(m->out_q, (size_t)m->cfg.d_model * m->cfg.d_model);
    free(m->stream_q);
    if (m->keep_free)
        m->keep_free(m->keep); /* after the tensors that point into it */
    free(m);
}

#define HUGE_PAGE ((size_t)2 << 20)

void *cic_model_array_alloc(size_t n, size_t size, bool zero)
{
    size_t bytes = cic_mul_size(n ? n : 1, size), a;
    void *p = NULL;
    if (bytes == SIZE_MAX)
        return NULL;
    if (bytes < HUGE_PAGE)
        return zero ? calloc(1, bytes) : malloc(bytes);
    a = bytes / HUGE_PAGE * HUGE_PAGE + (bytes % HUGE_PAGE ? HUGE_PAGE : 0);
    if (posix_memalign(&p, HUGE_PAGE, a) != 0)
        return NULL;
#ifdef MADV_HUGEPAGE
    (void)madvise(p, a, MADV_HUGEPAGE);
#endif
    if (zero) /* a block of glibc's heap may be reused, not fresh */
        memset(p, 0, bytes);
    return p;
}

int cic_model_tensor_add(cic_model *m, const char *name,
                         enum cic_tensor_role role, int rows, int cols)
{
    cic_tensor *t;
    CIC_ASSERT(rows > 0 && cols > 0);
    if (m->n_t == m->cap_t) {
        int cap = m->cap_t ? 2 * m->cap_t : 64;
        cic_tensor *nt = realloc(m->t, (size_t)cap * sizeof *nt);
        if (!nt)
            return -1;
        m->t = nt;
        m->cap_t = cap;
    }
    t = &m->t[m->n_t];
    memset(t, 0, sizeof *t);
    cic_strlcpy(t->name, name, sizeof t->name);
    t->role = role;
    t->rows = rows;
    t->cols = cols;
    if (role != CIC_T_ACT) {
        t->f32 = cic_model_array_alloc((size_t)rows * (size_t)cols, sizeof *t->f32, true);
        if (!t->f32)
            return -1;
    }
    return m->n_t++;
}

int cic_model_op_add(cic_model *m, const cic_op *op)
{
    if (m->n_ops == m->cap_ops) {
        int cap = m->cap_ops ? 2 * m->cap_ops : 64;
        cic_op *no = realloc(m->ops, (size_t)cap * sizeof *no);
        if (!no)
            return -1;
        m->ops = no;
        m->cap_ops = cap;
    }
    m->ops[m->n_ops] = *op;
    return m->n_ops++;
}

int cic_model_tensor_find(const cic_model *m, const char *name)
{
    int i;
    for (i = 0; i < m->n_t; i++)
        if (strcmp(m->t[i].name, name) == 0)
            return i;
    return -1;
}

bool cic_tensor_has_hp(const cic_tensor *t)
{
    return t->hp || t->lazy || t->f64;
}

mpfr_prec_t cic_tensor_hp_prec(const cic_tensor *t)
{
    return t->lazy ? t->lazy->prec : t->hp || t->f64 ? t->hp_prec : 0;
}

const mpfr_t *cic_tensor_hp_make(const cic_tensor *t, mpfr_t **tmp)
{
    size_t n = (size_t)t->rows * (size_t)t->cols, i;
    *tmp = NULL;
    if (t->hp)
        return (const mpfr_t *)t->hp;
    if (!t->lazy && !t->f64)
        return NULL;
    *tmp = cic_mpvec_create(n, cic_tensor_hp_prec(t));
    if (*tmp && t->f64) {
        for (i = 0; i < n; i++) /* exact: each double carries <= hp_prec bits */
            mpfr_set_d((*tmp)[i], t->f64[i], MPFR_RNDN);
    } else if (*tmp && cic_lazy_make(t->lazy, *tmp) < 0) {
        cic_mpvec_destroy(*tmp, n);
        *tmp = NULL;
    }
    return (const mpfr_t *)*tmp;
}

void cic_tensor_f64_range(double *v, const cic_tensor *t, bool rounded, size_t lo, size_t hi)
{
    size_t i;
    CIC_ASSERT(rounded || !t->lazy);
    if (!rounded && t->f64) {
        memcpy(v, t->f64 + lo, (hi - lo) * sizeof *v);
    } else if (!rounded && t->hp) {
        for (i = lo; i < hi; i++)
            v[i - lo] = mpfr_get_d(t->hp[i], MPFR_RNDN);
    } else {
        for (i = lo; i < hi; i++)
            v[i - lo] = (double)t->f32[i];
    }
}

int cic_tensor_f64_get(double *v, const cic_tensor *t, bool rounded)
{
    if (!rounded && t->lazy)
        return cic_lazy_make_f64(t->lazy, v);
    cic_tensor_f64_range(v, t, rounded, 0, (size_t)t->rows * (size_t)t->cols);
    return 0;
}

double *cic_tensor_f64_create(const cic_tensor *t, bool rounded)
{
    double *v = cic_model_array_alloc((size_t)t->rows * (size_t)t->cols, sizeof *v, false);
    if (v && cic_tensor_f64_get(v, t, rounded) < 0) {
        free(v);
        return NULL;
    }
    return v;
}

void cic_tensor_set_f64(cic_tensor *t, double *v, mpfr_prec_t prec)
{
    size_t n = (size_t)t->rows * (size_t)t->cols, i;
    CIC_ASSERT(prec <= 53);
    drop_unrounded(t);
    t->f64 = v;
    t->hp_prec = prec;
    for (i = 0; i < n; i++) /* RN, as mpfr_get_flt: one rounding of an exact value */
        t->f32[i] = (float)v[i];
}

void cic_tensor_set_hp(cic_tensor *t, mpfr_t *v, mpfr_prec_t prec)
{
    drop_unrounded(t);
    t->hp = v;
    t->hp_prec = prec;
    cic_mpvec_get_f32(t->f32, (const mpfr_t *)v, (size_t)t->rows * (size_t)t->cols);
}

int cic_model_tensor_hp(cic_model *m, int id, mpfr_prec_t prec)
{
    cic_tensor *t = &m->t[id];
    size_t n = (size_t)t->rows * (size_t)t->cols;
    drop_unrounded(t);
    t->hp = cic_mpvec_create(n, prec);
    t->hp_prec = prec;
    return t->hp ? 0 : -1;
}

int cic_model_run_rows(const cic_model *m, int id, int n_samples)
{
    const cic_tensor *t = &m->t[id];
    if (t->role == CIC_T_WEIGHT)
        return t->rows;
    switch (t->rows_kind) {
    case CIC_ROWS_SAMPLES:
        return n_samples;
    case CIC_ROWS_SAMPLE_MATRIX:
        return n_samples * t->block_rows;
    default:
        return n_samples * m->cfg.tokens;
    }
}

int cic_model_out_cols(const cic_model *m)
{
    return m->t[m->output].cols;
}

/* A copy of m's graph and tensor shapes, without their values. */
static cic_model *clone_shell(const cic_model *m)
{
    cic_model *c = cic_calloc(1, sizeof *c);
    int i;
    if (!c)
        return NULL;
    *c = *m;
    c->t = cic_calloc((size_t)m->cap_t, sizeof *c->t);
    c->ops = cic_calloc((size_t)m->cap_ops, sizeof *c->ops);
    c->out_q = NULL;
    c->stream_q = NULL;
    c->keep = NULL;
    c->keep_free = NULL;
    if (!c->t || !c->ops) {
        free(c->t);
        free(c->ops);
        free(c);
        return NULL;
    }
    memcpy(c->ops, m->ops, (size_t)m->n_ops * sizeof *c->ops);
    for (i = 0; i < m->n_t; i++) {
        cic_tensor *d = &c->t[i];
        *d = m->t[i];
        d->f32 = NULL;
        d->hp = NULL;
        d->f64 = NULL;
        d->lazy = NULL;
        d->f32_mapped = false;
    }
    return c;
}

/* A copy of s's float32 values of its own (NULL when memory runs out). */
static float *f32_copy(const cic_tensor *s)
{
    size_t n = (size_t)s->rows * (size_t)s->cols;
    float *f = cic_model_array_alloc(n, sizeof *f, false);
    if (f)
        memcpy(f, s->f32, n * sizeof *f);
    return f;
}

/* Tensor s's values copied into d (its shell): 0, or -1 when memory runs
 * out. */
static int tensor_copy(cic_tensor *d, const cic_tensor *s)
{
    size_t n = (size_t)s->rows * (size_t)s->cols, k;
    d->lazy = cic_lazy_ref(s->lazy); /* shared: a recipe is never changed */
    if (s->f32 && !(d->f32 = f32_copy(s)))
        return -1;
    if (s->hp) {
        if (!(d->hp = cic_mpvec_create(n, s->hp_prec)))
            return -1;
        for (k = 0; k < n; k++)
            mpfr_set(d->hp[k], s->hp[k], MPFR_RNDN);
    }
    if (s->f64) {
        if (!(d->f64 = cic_model_array_alloc(n, sizeof *d->f64, false)))
            return -1;
        memcpy(d->f64, s->f64, n * sizeof *d->f64);
    }
    return 0;
}

cic_model *cic_model_clone(const cic_model *m)
{
    cic_model *c = clone_shell(m);
    size_t dd = (size_t)m->cfg.d_model * m->cfg.d_model, k;
    int i;
    if (!c)
        return NULL;
    /* every tensor of the clone is its own copy (none points into m's keep) */
    for (i = 0; i < m->n_t; i++)
        if (tensor_copy(&c->t[i], &m->t[i]) < 0)
            goto fail;
    if (m->out_q) {
        if (!(c->out_q = cic_mpvec_create(dd, m->out_q_prec)))
            goto fail;
        for (k = 0; k < dd; k++)
            mpfr_set(c->out_q[k], m->out_q[k], MPFR_RNDN);
    }
    if (m->stream_q) {
        if (!(c->stream_q = malloc(dd * sizeof *c->stream_q)))
            goto fail;
        memcpy(c->stream_q, m->stream_q, dd * sizeof *c->stream_q);
    }
    return c;
fail:
    cic_model_destroy(c);
    return NULL;
}

cic_model *cic_model_clone_take(cic_model *m)
{
    cic_model *c = clone_shell(m);
    int i;
    if (!c)
        return NULL;
    for (i = 0; i < m->n_t; i++) {
        cic_tensor *d = &c->t[i], *s = &m->t[i];
        if (s->f32_mapped) { /* read-only: the copy's own, to rewrite */
            if (!(d->f32 = f32_copy(s))) {
                cic_model_destroy(c);
                return NULL;
            }
        } else {
            d->f32 = s->f32;
            s->f32 = NULL;
        }
        d->hp = s->hp;
        d->f64 = s->f64;
        d->lazy = s->lazy;
        s->hp = NULL;
        s->f64 = NULL;
        s->lazy = NULL;
    }
    c->out_q = m->out_q;
    c->stream_q = m->stream_q;
    m->out_q = NULL;
    m->stream_q = NULL;
    return c;
}

/* ---- weights ---- */

/* n float32 values into s as little-endian bytes, a chunk at a time (one
 * call per value made hashing a 7B layer's 219 M weights take seconds). */
static void sha_f32_le(cic_sha256 *s, const float *v, size_t n)
{
    unsigned char le[4096 * 4];
    size_t k, i;
    for (k = 0; k < n; k += i) {
        for (i = 0; i < 4096 && k + i < n; i++) {
            uint32_t u;
            int j;
            memcpy(&u, &v[k + i], 4);
            for (j = 0; j < 4; j++)
                le[4 * i + j] = (unsigned char)(u >> (8 * j));
        }
        cic_sha256_update(s, le, 4 * i);
    }
}

void cic_model_weights_sha256(char hex[65], const cic_model *m)
{
    cic_sha256 s;
    unsigned char dig[32];
    int i;
    size_t k;
    cic_sha256_init(&s);
    for (i = 0; i < m->n_t; i++) {
        const cic_tensor *t = &m->t[i];
        uint32_t shape[2] = {(uint32_t)t->rows, (uint32_t)t->cols};
        if (t->role == CIC_T_ACT)
            continue;
        cic_sha256_update(&s, t->name, strlen(t->name) + 1);
        for (k = 0; k < 2; k++) {
            unsigned char le[4];
            int j;
            for (j = 0; j < 4; j++)
                le[j] = (unsigned char)(shape[k] >> (8 * j));
            cic_sha256_update(&s, le, 4);
        }
        sha_f32_le(&s, t->f32, (size_t)t->rows * (size_t)t->cols);
    }
    cic_sha256_final(&s, dig);
    for (i = 0; i < 32; i++)
        snprintf(hex + 2 * i, 3, "%02x", dig[i]);
}
