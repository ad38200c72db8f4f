/* SPDX-License-Identifier: MIT */
/* dump.c: model weights to safetensors for --dump (dump.h). */
#include "dump.h"

#include <string.h>

/* Is tensor id read by an op (or the block input)? A fusion leaves the old
 * norm gains in the tensor table but no op reads them: they are not part of
 * the transformed model and must not be dumped as if they were. */
static bool referenced(const cic_model *m, int id)
{
    int i, k;
    if (id == m->input)
        return true;
    for (i = 0; i < m->n_ops; i++) {
        const cic_op *o = &m->ops[i];
        if (o->w == id || o->b == id || o->g == id)
            return true;
        for (k = 0; k < 3; k++)
            if (o->in[k] == id)
                return true;
    }
    return false;
}

int cic_dump_model(const char *path, const cic_model *m, const char *const *meta,
                   bool unrounded, cic_diag *d)
{
    cic_st_tensor *t = cic_calloc((size_t)m->n_t + 1, sizeof *t);
    double **f64 = cic_calloc((size_t)m->n_t + 1, sizeof *f64);
    const char *kv[96];
    char buf[20][64];
    int n = 0, i, k = 0, rc = 0;
    bool any_center = false;
    if (!t || !f64) {
        free(t);
        free(f64);
        cic_diag_set(d, path, 0, 0, "out of memory");
        return -1;
    }
    for (i = 0; i < m->n_t; i++) {
        const cic_tensor *s = &m->t[i];
        size_t cnt = (size_t)s->rows * (size_t)s->cols, j;
        if (s->role == CIC_T_ACT || !referenced(m, i))
            continue;
        t[n].name = s->name;
        t[n].dtype = CIC_DT_F32;
        t[n].data = s->f32;
        if (unrounded) {
            /* the values the MPFR verdict used, rounded once to double */
            f64[i] = cic_calloc(cnt, sizeof **f64);
            if (!f64[i]) {
                cic_diag_set(d, path, 0, 0, "out of memory");
                rc = -1;
                goto cleanup;
            }
            for (j = 0; j < cnt; j++)
                f64[i][j] = s->hp ? mpfr_get_d(s->hp[j], MPFR_RNDN) : (double)s->f32[j];
            t[n].dtype = CIC_DT_F64;
            t[n].data = f64[i];
        }
        if (s->rows == 1 && s->role == CIC_T_WEIGHT) {
            t[n].ndim = 1;
            t[n].shape[0] = s->cols;
        } else {
            t[n].ndim = 2;
            t[n].shape[0] = s->rows;
            t[n].shape[1] = s->cols;
        }
        n++;
    }
    if (m->out_q) {
        /* the residual readout's map back to the original basis */
        size_t dd = (size_t)m->cfg.d_model * m->cfg.d_model, j;
        f64[m->n_t] = cic_calloc(dd, sizeof **f64);
        if (!f64[m->n_t]) {
            cic_diag_set(d, path, 0, 0, "out of memory");
            rc = -1;
            goto cleanup;
        }
        for (j = 0; j < dd; j++)
            f64[m->n_t][j] = mpfr_get_d(m->out_q[j], MPFR_RNDN);
        t[n].name = "readout.q";
        t[n].dtype = CIC_DT_F64;
        t[n].ndim = 2;
        t[n].shape[0] = t[n].shape[1] = m->cfg.d_model;
        t[n].data = f64[m->n_t];
        n++;
    }
    for (i = 0; i < m->n_ops; i++)
        if (m->ops[i].kind == CIC_OP_NORM && m->ops[i].center)
            any_center = true;
#define KV(key, ...)                                                     \
    do {                                                                 \
        snprintf(buf[k], sizeof buf[k], __VA_ARGS__);                    \
        kv[2 * k] = key;                                                 \
        kv[2 * k + 1] = buf[k];                                          \
        k++;                                                             \
    } while (0)
    KV("block", "%s", CIC_BLOCK_NAME[m->cfg.block]);
    KV("d_model", "%d", m->cfg.d_model);
    KV("heads", "%d", m->cfg.heads);
    KV("tokens", "%d", m->cfg.tokens);
    KV("samples", "%d", m->cfg.samples);
    KV("layers", "%d", m->cfg.layers);
    KV("d_mlp", "%d", m->cfg.d_mlp);
    KV("eps", "%a", (double)(float)m->cfg.eps); /* exact: hex float */
    KV("causal", "%s", m->cfg.causal ? "true" : "false");
    KV("activation", "%s", CIC_ACT_NAME[m->cfg.act]);
    KV("readout", "%s", m->output == m->residual ? "residual" : "head");
    KV("norm.center", "%s", any_center ? "true" : "false");
    KV("readout.center", "%s", m->center_out ? "true" : "false");
    KV("d_out", "%d", m->t[m->output].cols);
    KV("dtype", "%s", unrounded ? "unrounded weights as float64" : "float32");
#undef KV
    for (i = 0; meta && meta[2 * i] && k < 46; i++, k++) {
        kv[2 * k] = meta[2 * i];
        kv[2 * k + 1] = meta[2 * i + 1];
    }
    kv[2 * k] = NULL;
    rc = cic_safetensors_write(path, t, n, kv, d);
cleanup:
    for (i = 0; i <= m->n_t; i++)
        free(f64[i]);
    free(f64);
    free(t);
    return rc;
}

void cic_dump_file_name(char *buf, size_t cap, const cic_case *c, int i, bool f64)
{
    const char *stem = i == -1 ? "original" : i == -2 ? "outputs" : c->xf[i].name;
    snprintf(buf, cap, "%s%s.safetensors", stem, f64 ? ".f64" : "");
}

int cic_dump_names_check(const cic_case *c, cic_diag *d)
{
    /* every file: the original, the outputs, each transform's two */
    char a[2 * CIC_NAME_MAX], b[2 * CIC_NAME_MAX];
    int n = 2 + 2 * c->n_xf, i, j;
    for (i = 0; i < n; i++) {
        int ti = i < 2 ? -1 - i : (i - 2) / 2;
        cic_dump_file_name(a, sizeof a, c, ti, i >= 2 && (i - 2) % 2);
        for (j = i + 1; j < n; j++) {
            int tj = j < 2 ? -1 - j : (j - 2) / 2;
            cic_dump_file_name(b, sizeof b, c, tj, j >= 2 && (j - 2) % 2);
            if (strcmp(a, b) != 0)
                continue;
            cic_diag_set(d, c->path, ti >= 0 ? c->xf[ti].line : 0, 1,
                         "--dump: %s%s%s and transform '%s' would both write %s; "
                         "rename one of them",
                         ti >= 0 ? "transform '" : "the ", ti >= 0 ? c->xf[ti].name : a,
                         ti >= 0 ? "'" : " file", c->xf[tj].name, a);
            return CIC_EINPUT;
        }
    }
    return CIC_OK;
}
