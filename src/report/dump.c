/* dump.c: model weights to safetensors for --dump (dump.h). */
#include "dump.h"

#include <string.h>

int cic_dump_model(const char *path, const cic_model *m, const char *const *meta,
                   cic_diag *d)
{
    cic_st_tensor *t = cic_calloc((size_t)m->n_t, sizeof *t);
    const char *kv[64];
    char buf[16][64];
    int n = 0, i, k = 0, rc;
    bool any_center = false;
    if (!t) {
        cic_diag_set(d, path, 0, 0, "out of memory");
        return -1;
    }
    for (i = 0; i < m->n_t; i++) {
        const cic_tensor *s = &m->t[i];
        if (s->role == CIC_T_ACT)
            continue;
        t[n].name = s->name;
        t[n].dtype = CIC_DT_F32;
        t[n].data = s->f32;
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
    KV("eps", "%.9g", (double)(float)m->cfg.eps);
    KV("causal", "%s", m->cfg.causal ? "true" : "false");
    KV("activation", "%s", CIC_ACT_NAME[m->cfg.act]);
    KV("readout", "%s", m->output == m->residual ? "residual" : "head");
    KV("norm.center", "%s", any_center ? "true" : "false");
#undef KV
    for (i = 0; meta && meta[2 * i] && k < 30; i++, k++) {
        kv[2 * k] = meta[2 * i];
        kv[2 * k + 1] = meta[2 * i + 1];
    }
    kv[2 * k] = NULL;
    rc = cic_safetensors_write(path, t, n, kv, d);
    free(t);
    return rc;
}
