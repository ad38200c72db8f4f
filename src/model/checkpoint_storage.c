/* SPDX-License-Identifier: MIT */
/* checkpoint_storage.c: what cicheck verify asks of a checkpoint beyond its
 * weights (checkpoint.h): the storage precision of the tensors a model
 * actually reads (not of every tensor in the folder: an unused F16 tensor
 * must not loosen a verdict), and the token embedding as doubles, from
 * which a rewrite's rotation Q can be recovered. */
#include "checkpoint_int.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* The tensor called hf as lookup finds it (the index's shard, or the one
 * file), without a shape check; NULL when absent. */
static const cic_stfile_tensor *find(const cic_ckpt *k, const char *hf)
{
    json_t *f;
    int i;
    if (!k->weight_map)
        return cic_stfile_find(k->shard[0], hf);
    f = json_object_get(k->weight_map, hf);
    for (i = 0; f && i < k->n_shard; i++)
        if (!strcmp(k->shard_name[i], json_string_value(f)))
            return cic_stfile_find(k->shard[i], hf);
    return NULL;
}

/* Count tensor t into s: fewer bits than so far replace the one named. */
static void note(cic_ckpt_storage *s, const cic_stfile_tensor *t)
{
    int b = cic_stfile_dtype_bits(t->dtype);
    if (!b)
        return; /* an integer or BOOL tensor holds exact values */
    if (b < s->bits || !s->tensor[0]) {
        s->bits = b;
        s->count = 1;
        cic_strlcpy(s->tensor, t->name, sizeof s->tensor);
        cic_strlcpy(s->dtype, CIC_STFILE_DTYPE_NAME[t->dtype], sizeof s->dtype);
    } else if (b == s->bits) {
        s->count++;
    }
}

static void storage_init(cic_ckpt_storage *s)
{
    memset(s, 0, sizeof *s);
    s->bits = 53;
}

void cic_ckpt_storage_used(cic_ckpt_storage *s, const cic_ckpt *k, const cic_model *m,
                           bool embeds)
{
    const cic_stfile_tensor *t;
    ckpt_part p[3];
    int id, j, np;
    storage_init(s);
    for (id = 0; id < m->n_t; id++) {
        if (m->t[id].role != CIC_T_WEIGHT)
            continue;
        np = parts_of(p, k, m->t[id].name, m->cfg.layer0, m->t[id].rows, m->t[id].cols);
        for (j = 0; j < np; j++) /* absent (a fused norm) or zero: exact 1 or 0 */
            if (!p[j].zero && (t = find(k, p[j].name)) != NULL)
                note(s, t);
    }
    if (embeds && k->fam->embed && (t = find(k, k->fam->embed)) != NULL)
        note(s, t);
    if (embeds && k->fam->positions && (t = find(k, k->fam->positions)) != NULL)
        note(s, t);
}

double *cic_ckpt_embedding(const cic_ckpt *k, int *rows, int *cols, cic_ckpt_storage *s,
                           cic_diag *d)
{
    const cic_stfile_tensor *t;
    double *e;
    size_t n, i;
    if (!k->fam->embed) {
        cic_diag_set(d, k->dir, 0, 0, "this checkpoint has no token embedding");
        return NULL;
    }
    if (!(t = lookup(k, k->fam->embed, k->vocab, k->hidden, d)))
        return NULL;
    n = (size_t)k->vocab * (size_t)k->hidden;
    e = cic_calloc(n ? n : 1, sizeof *e);
    if (!e) {
        cic_diag_set(d, k->dir, 0, 0, "out of memory reading '%s' (%d x %d)", k->fam->embed,
                     k->vocab, k->hidden);
        return NULL;
    }
    if (cic_stfile_tensor_read_f64(e, t, 0, n, d) < 0) {
        free(e);
        return NULL;
    }
    for (i = 0; i < n; i++)
        if (!isfinite(e[i])) {
            cic_diag_set(d, t->file, 0, 0, "tensor '%s': value %g at index %zu (flat); a "
                         "checkpoint with NaN or Inf weights is not run", t->name, e[i], i);
            free(e);
            return NULL;
        }
    storage_init(s);
    note(s, t);
    *rows = k->vocab;
    *cols = k->hidden;
    return e;
}
