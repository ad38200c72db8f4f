/* SPDX-License-Identifier: MIT */
/* checkpoint.c: a Hugging Face checkpoint folder as a weight source
 * (checkpoint.h). */
#include "checkpoint_int.h"
#include "input_shape.h"

#include "../base/json_type.h"
#include "../base/rng.h"
#include "../base/safetensors_read.h"

#include <jansson.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdint.h>
#include <sys/mman.h>
#include <unistd.h>

/* ---- the weights ---- */

static int open_shard(cic_ckpt *k, const char *file, cic_diag *d)
{
    char path[1400];
    int i;
    for (i = 0; i < k->n_shard; i++)
        if (!strcmp(k->shard_name[i], file))
            return i;
    if (k->n_shard == CIC_CKPT_MAX_SHARDS || strlen(file) >= sizeof k->shard_name[0] ||
        strchr(file, '/')) {
        cic_diag_set(d, k->dir, 0, 0, "shard '%.200s': more than %d shards, a name of over "
                     "255 bytes, or a path outside the folder", file, CIC_CKPT_MAX_SHARDS);
        return -1;
    }
    snprintf(path, sizeof path, "%s/%s", k->dir, file);
    k->shard[k->n_shard] = cic_stfile_create(path, d);
    if (!k->shard[k->n_shard])
        return -1;
    cic_strlcpy(k->shard_name[k->n_shard], file, sizeof k->shard_name[0]);
    return k->n_shard++;
}

static int open_weights(cic_ckpt *k, cic_diag *d)
{
    char path[1200];
    json_t *idx;
    const char *name;
    json_t *v;
    k->shard = cic_calloc(CIC_CKPT_MAX_SHARDS, sizeof *k->shard);
    k->shard_name = cic_calloc(CIC_CKPT_MAX_SHARDS, sizeof *k->shard_name);
    if (!k->shard || !k->shard_name) {
        cic_diag_set(d, k->dir, 0, 0, "out of memory");
        return -1;
    }
    snprintf(path, sizeof path, "%s/model.safetensors.index.json", k->dir);
    if (access(path, F_OK) != 0) {
        snprintf(path, sizeof path, "%s/model.safetensors", k->dir);
        if (access(path, F_OK) != 0) {
            cic_diag_set(d, k->dir, 0, 0, "neither model.safetensors nor "
                         "model.safetensors.index.json is there");
            return -1;
        }
        return open_shard(k, "model.safetensors", d) < 0 ? -1 : 0;
    }
    idx = load_json(path, CIC_CKPT_MAX_INDEX, "the index (JSON)", d);
    if (!idx)
        return -1;
    k->weight_map = json_incref(json_object_get(idx, "weight_map"));
    json_decref(idx);
    if (!json_is_object(k->weight_map)) {
        cic_diag_set(d, path, 0, 0, "no \"weight_map\" object (tensor name -> shard file)");
        return -1;
    }
    json_object_foreach(k->weight_map, name, v) {
        if (!json_is_string(v)) {
            cic_diag_set(d, path, 0, 0, "weight_map['%.200s'] is not a file name", name);
            return -1;
        }
        if (open_shard(k, json_string_value(v), d) < 0)
            return -1;
    }
    return 0;
}

cic_ckpt *cic_ckpt_open(const char *dir, cic_diag *d)
{
    cic_ckpt *k = cic_calloc(1, sizeof *k);
    if (!k) {
        cic_diag_set(d, dir, 0, 0, "out of memory");
        return NULL;
    }
    if (strlen(dir) >= sizeof k->dir) {
        cic_diag_set(d, "", 0, 0, "checkpoint path too long");
        free(k);
        return NULL;
    }
    cic_strlcpy(k->dir, dir, sizeof k->dir);
    if (read_config(k, d) < 0 || open_weights(k, d) < 0 ||
        family_sizes(k, d) < 0) {
        cic_ckpt_close(k);
        return NULL;
    }
    return k;
}

void cic_ckpt_close(cic_ckpt *k)
{
    int i;
    if (!k)
        return;
    for (i = 0; i < k->n_shard; i++) {
        cic_stfile_destroy(k->shard[i]);
        free(k->used ? k->used[i] : NULL);
    }
    free(k->used);
    free(k->shard);
    free(k->shard_name);
    json_decref(k->config);
    json_decref(k->weight_map);
    free(k);
}

int cic_ckpt_layers(const cic_ckpt *k)
{
    return k->layers;
}

/* ---- the weight source ---- */

/* A NaN or Inf value v at flat index i of t: the error. -1. */
static int nonfinite(const cic_stfile_tensor *t, double v, uint64_t i, cic_diag *d)
{
    cic_diag_set(d, t->file, 0, 0, "tensor '%s': value %g at index %llu (flat); a checkpoint "
                 "with NaN or Inf weights is not run", t->name, v, (unsigned long long)i);
    return -1;
}

/* t's values into f (n of them), each exactly a float32 and finite. */
static int read_values(float *f, const cic_stfile_tensor *t, uint64_t n, cic_diag *d)
{
    enum { CHUNK = 4096 };
    double buf[CHUNK];
    uint64_t i0, i;
    for (i0 = 0; i0 < n; i0 += CHUNK) {
        uint64_t m = n - i0 < CHUNK ? n - i0 : CHUNK;
        if (cic_stfile_tensor_read_f64(buf, t, i0, m, d) < 0)
            return -1;
        for (i = 0; i < m; i++) {
            float v = (float)buf[i];
            if (!isfinite(buf[i]))
                return nonfinite(t, buf[i], i0 + i, d);
            if ((double)v != buf[i]) {
                cic_diag_set(d, t->file, 0, 0, "tensor '%s' (F64): value %.17g at index %llu "
                             "(flat) is not a float32; F64 weights are read only when every "
                             "value is one", t->name, buf[i], (unsigned long long)(i0 + i));
                return -1;
            }
            f[i0 + i] = v;
        }
    }
    return 0;
}

/* ---- the block input ([input]) ---- */

/* Row `row` of 2-D tensor t of width cols, as a tensor of its own (a view
 * into the same mapping) for read_values. */
static cic_stfile_tensor row_view(const cic_stfile_tensor *t, size_t row, int cols)
{
    cic_stfile_tensor r = *t;
    r.data = t->data + row * (size_t)cols * CIC_STFILE_DTYPE_SIZE[t->dtype];
    r.count = (uint64_t)cols;
    r.nbytes = (size_t)cols * CIC_STFILE_DTYPE_SIZE[t->dtype];
    return r;
}

/* The family's learned positions (OPT's embed_positions): row i (token
 * i % tokens of its sample) += row (i % tokens) + the family's offset (2 in
 * OPT's code), one float32 addition as PyTorch does it. */
static int add_positions(float *out, const cic_ckpt *k, size_t n, int tokens, int dm,
                         cic_diag *d)
{
    const char *name = k->fam->positions;
    const int off = k->fam->positions_offset;
    const cic_stfile_tensor *pe = NULL;
    float *row = cic_calloc((size_t)dm, sizeof *row);
    size_t i;
    int j, rows = 0, rc = -1;
    if (has_tensor(k, name)) {
        for (j = 0; j < k->n_shard && !pe; j++)
            if ((pe = cic_stfile_find(k->shard[j], name)))
                mark_used(k, j, pe);
        rows = pe && pe->ndim == 2 && pe->shape[0] <= INT_MAX ? (int)pe->shape[0] : 0;
    }
    if (!pe || rows < tokens + off || pe->ndim != 2 || pe->shape[1] != dm) {
        cic_diag_set(d, k->dir, 0, 0, "tensor '%s' missing or not [at least %d, %d] (the "
                     "positions of %d tokens, offset %d)", name, tokens + off, dm, tokens, off);
        goto done;
    }
    for (i = 0; i < n; i++) {
        cic_stfile_tensor pt = row_view(pe, (i % (size_t)tokens) + (size_t)off, dm);
        if (read_values(row, &pt, (uint64_t)dm, d) < 0)
            goto done;
        for (j = 0; j < dm; j++)
            out[i * dm + j] = out[i * dm + j] + row[j];
    }
    rc = 0;
done:
    free(row);
    return rc;
}

/* Row ids[i] of embed_tokens for each i < n into out (n rows of dm; a
 * family with learned positions, OPT, adds them, tokens per sample). */
static int embed_rows(float *out, const cic_ckpt *k, const int64_t *ids, size_t n, int dm,
                      int tokens, cic_diag *d)
{
    const char *embed = k->fam->embed;
    const cic_stfile_tensor *e;
    size_t i;
    if (!embed) {
        cic_diag_set(d, k->dir, 0, 0, "a timm ViT has no token embedding: its input is "
                     "hidden states ([input] kind = \"random\" or a file's \"input\")");
        return -1;
    }
    if (!(e = lookup(k, embed, k->vocab, dm, d)))
        return -1;
    for (i = 0; i < n; i++) {
        cic_stfile_tensor et;
        if (ids[i] < 0 || ids[i] >= k->vocab) {
            cic_diag_set(d, k->dir, 0, 0, "token id %lld at index %zu is outside the "
                         "vocabulary 0 .. %d", (long long)ids[i], i, k->vocab - 1);
            return -1;
        }
        et = row_view(e, (size_t)ids[i], dm);
        if (read_values(out + i * dm, &et, (uint64_t)dm, d) < 0)
            return -1;
    }
    return k->fam->positions ? add_positions(out, k, n, tokens, dm, d) : 0;
}

/* The input file's hidden states ("input") or token ids ("input_ids",
 * through embed_tokens: k needed), in any form input_shape.h allows that
 * agrees with the model's tokens and samples (rows are tokens, sample s
 * owning rows s * tokens .. in every form). */
static int input_from_file(cic_model *m, const cic_ckpt *k, cic_diag *d)
{
    cic_tensor *x = &m->t[m->input];
    const char *path = m->cfg.input_file;
    cic_stfile *f = cic_stfile_create(path, d);
    const cic_stfile_tensor *t;
    cic_input_shape s;
    size_t n = (size_t)x->rows;
    int tokens = m->cfg.tokens, samples = m->cfg.samples, rc = -1;
    if (!f)
        return -1;
    if (cic_input_shape_of(&s, f, path, d) < 0 ||
        cic_input_shape_fit(&tokens, &samples, &s, path, "tokens", "samples", d) < 0 ||
        cic_input_shape_check_width(&s, path, x->cols, d) < 0)
        goto done;
    CIC_ASSERT((int64_t)tokens * samples == x->rows);
    t = cic_stfile_find(f, s.name);
    if (!s.ids) {
        rc = read_values(x->f32, t, (uint64_t)x->rows * x->cols, d);
    } else if (!k) {
        cic_diag_set(d, path, 0, 0, "'input_ids' need a checkpoint's embed_tokens");
    } else {
        int64_t *ids = cic_calloc(n, sizeof *ids);
        if (!ids)
            cic_diag_set(d, path, 0, 0, "out of memory");
        else if (cic_stfile_tensor_read_i64(ids, t, 0, n, d) == 0)
            rc = embed_rows(x->f32, k, ids, n, x->cols, m->cfg.tokens, d);
        free(ids);
    }
done:
    cic_stfile_destroy(f);
    return rc;
}

int cic_input_fill(cic_model *m, const cic_ckpt *k, cic_diag *d)
{
    cic_tensor *x = &m->t[m->input];
    int rc = 0;
    if (m->cfg.input_kind == CIC_INPUT_RANDOM)
        return 0; /* the seeded generator's */
    if (m->cfg.input_kind == CIC_INPUT_TOKENS) {
        size_t i, n = (size_t)x->rows;
        uint64_t key = cic_rng_key(m->cfg.seed, "input.tokens");
        int64_t *ids = cic_calloc(n, sizeof *ids);
        if (!k || !ids) {
            free(ids);
            cic_diag_set(d, "", 0, 0, "kind = \"tokens\" needs a checkpoint's embed_tokens");
            return -1;
        }
        for (i = 0; i < n; i++)
            ids[i] = (int64_t)(cic_rng_u64(key, i) % (uint64_t)k->vocab);
        rc = embed_rows(x->f32, k, ids, n, x->cols, m->cfg.tokens, d);
        free(ids);
    } else {
        rc = input_from_file(m, k, d);
    }
    if (rc == 0)
        x->fill = CIC_FILL_NONE; /* not the seeded draw */
    return rc;
}

/* Tensor t as the F32 values of st where they lie in the mapping: no copy,
 * the pages read when an op reads them. Every value is checked first (NaN
 * and Inf are named), then the pages the check read are given back
 * (MADV_DONTNEED: a read-only file mapping reads them again from the
 * file). 1 when done, 0 when st cannot be used so (not F32, misaligned, a
 * big-endian host), -1 with d set. */
static int map_tensor(cic_tensor *t, const cic_stfile_tensor *st, cic_diag *d)
{
    const float *v = (const float *)(const void *)st->data;
    size_t n = (size_t)t->rows * t->cols, i;
    long pg = sysconf(_SC_PAGESIZE);
    if (st->dtype != CIC_STFILE_F32 || (uintptr_t)st->data % _Alignof(float) != 0 ||
        __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__ || st->count != (uint64_t)n)
        return 0;
    for (i = 0; i < n; i++)
        if (!isfinite(v[i]))
            return nonfinite(st, (double)v[i], (uint64_t)i, d);
    if (pg > 0) {
        uintptr_t a = ((uintptr_t)st->data + (uintptr_t)pg - 1) / (uintptr_t)pg * (uintptr_t)pg;
        uintptr_t b = ((uintptr_t)st->data + n * sizeof *v) / (uintptr_t)pg * (uintptr_t)pg;
        if (b > a)
            (void)madvise((void *)a, b - a, MADV_DONTNEED); /* advice: may be declined */
    }
    free(t->f32);
    t->f32 = (float *)(uintptr_t)v; /* read-only: f32_mapped tensors are never written */
    t->f32_mapped = true;
    return 1;
}

/* Model tensor t from its parts (a fused norm tensor absent: 1 or 0; a
 * zero part: 0). */
static int fill_tensor(cic_tensor *t, const cic_ckpt *k, const cic_model_cfg *cfg,
                       const ckpt_part *p, int np, cic_diag *d)
{
    size_t off = 0, i;
    int j;
    if (np == 1 && !p[0].zero && has_tensor(k, p[0].name)) {
        const cic_stfile_tensor *st = lookup(k, p[0].name, p[0].rows, p[0].cols, d);
        int rc = st ? map_tensor(t, st, d) : -1;
        if (rc != 0)
            return rc < 0 ? -1 : 0;
    }
    for (j = 0; j < np; j++) {
        size_t n = (size_t)p[j].rows * p[j].cols;
        const cic_stfile_tensor *st;
        int opt = optional_norm(cfg, p[j].name);
        if (p[j].zero || (opt >= 0 && !has_tensor(k, p[j].name))) {
            for (i = 0; i < n; i++)
                t->f32[off + i] = p[j].zero ? 0.0f : (float)opt;
        } else if (!(st = lookup(k, p[j].name, p[j].rows, p[j].cols, d)) ||
                   read_values(t->f32 + off, st, (uint64_t)n, d) < 0) {
            return -1;
        }
        off += n;
    }
    CIC_ASSERT(off == (size_t)t->rows * t->cols);
    return 0;
}

static void ckpt_close_any(void *k)
{
    cic_ckpt_close(k);
}

int cic_ckpt_fill(cic_model *m, const cic_model_progress *p, cic_diag *d)
{
    cic_ckpt *k = cic_ckpt_open(m->cfg.checkpoint, d);
    double total = 0, done = 0;
    ckpt_part parts[3];
    int id, np, rc = -1;
    if (!k)
        return -1;
    for (id = 0; id < m->n_t; id++)
        if (m->t[id].fill != CIC_FILL_NONE && id != m->input)
            total += (double)m->t[id].rows * m->t[id].cols;
    for (id = 0; id < m->n_t; id++) {
        cic_tensor *t = &m->t[id];
        if (t->fill == CIC_FILL_NONE ||
            (np = parts_of(parts, k, t->name, m->cfg.layer0, t->rows, t->cols)) == 0)
            continue; /* the input: [input]'s */
        if (fill_tensor(t, k, &m->cfg, parts, np, d) < 0)
            goto done;
        t->fill = CIC_FILL_NONE;
        done += (double)t->rows * t->cols;
        if (p && p->fn)
            p->fn(p->ctx, done, total);
    }
    rc = cic_input_fill(m, k, d);
done:
    for (id = 0; rc == 0 && id < m->n_t && !m->keep; id++)
        if (m->t[id].f32_mapped) { /* the model keeps the mapping its tensors point into */
            m->keep = k;
            m->keep_free = ckpt_close_any;
        }
    if (!m->keep)
        cic_ckpt_close(k);
    return rc;
}

/* ---- what a run reads, hashed (cic_ckpt_hash_read) ---- */

/* The tensors a run of cfg reads beyond those cic_ckpt_config looks up:
 * the embedding (and OPT's positions) when the input is token ids. */
static int mark_input(const cic_ckpt *k, const cic_model_cfg *cfg, cic_diag *d)
{
    bool ids = cfg->input_kind == CIC_INPUT_TOKENS;
    int j;
    if (cfg->input_kind == CIC_INPUT_FILE) { /* ids when no "input" but "input_ids" */
        cic_stfile *f = cic_stfile_create(cfg->input_file, d);
        if (!f)
            return -1;
        ids = !cic_stfile_find(f, "input") && cic_stfile_find(f, "input_ids");
        cic_stfile_destroy(f);
    }
    if (!ids || !k->fam->embed)
        return 0;
    if (!lookup(k, k->fam->embed, k->vocab, k->hidden, d))
        return -1;
    for (j = 0; k->fam->positions && j < k->n_shard; j++) {
        const cic_stfile_tensor *pe = cic_stfile_find(k->shard[j], k->fam->positions);
        if (pe)
            mark_used(k, j, pe);
    }
    return 0;
}

/* Shard i: its header, then the data of each tensor the run reads, in
 * the order of the file. */
static void hash_shard(cic_file_hash *h, const cic_ckpt *k, int i)
{
    cic_sha256 s;
    size_t len;
    const unsigned char *hdr = cic_stfile_header(k->shard[i], &len);
    int j;
    cic_sha256_init(&s);
    cic_sha256_update(&s, hdr, len);
    for (j = 0; j < cic_stfile_count(k->shard[i]); j++)
        if (k->used[i][j]) {
            const cic_stfile_tensor *t = cic_stfile_tensor_at(k->shard[i], j);
            cic_sha256_update(&s, t->data, t->nbytes);
        }
    cic_sha256_final_hex(&s, h->sha256);
    h->whole = false;
    h->id = cic_stfile_id(k->shard[i]);
}

int cic_ckpt_hash_read(cic_file_hash **out, int *n, const cic_model_cfg *cfg, cic_diag *d)
{
    cic_ckpt *k = cic_ckpt_open(cfg->checkpoint, d);
    cic_model_cfg c2 = *cfg;
    cic_file_hash *h = NULL;
    int i, m = 0, rc = -1;
    *out = NULL;
    *n = 0;
    if (!k)
        return -1;
    k->used = cic_calloc((size_t)k->n_shard, sizeof *k->used);
    for (i = 0; k->used && i < k->n_shard; i++)
        if (!(k->used[i] = cic_calloc((size_t)cic_stfile_count(k->shard[i]) + 1, 1)))
            break;
    if (!k->used || i < k->n_shard || !(h = cic_calloc((size_t)k->n_shard + 2, sizeof *h))) {
        cic_diag_set(d, k->dir, 0, 0, "out of memory");
        goto done;
    }
    if (cic_ckpt_config(k, &c2, cfg->layer0, d) != CIC_OK || mark_input(k, cfg, d) < 0)
        goto done;
    if (k->has_config) {
        snprintf(h[m].label, sizeof h[m].label, "checkpoint config.json");
        cic_strlcpy(h[m].path, k->cfg_path, sizeof h[m].path);
        h[m].whole = true;
        if (cic_sha256_file(h[m].sha256, &h[m].id, h[m].path, d) < 0)
            goto done;
        m++;
    }
    if (k->weight_map) {
        snprintf(h[m].label, sizeof h[m].label, "checkpoint model.safetensors.index.json");
        snprintf(h[m].path, sizeof h[m].path, "%s/model.safetensors.index.json", k->dir);
        h[m].whole = true;
        if (cic_sha256_file(h[m].sha256, &h[m].id, h[m].path, d) < 0)
            goto done;
        m++;
    }
    for (i = 0; i < k->n_shard; i++, m++) {
        snprintf(h[m].label, sizeof h[m].label, "checkpoint %s", k->shard_name[i]);
        snprintf(h[m].path, sizeof h[m].path, "%s/%s", k->dir, k->shard_name[i]);
        hash_shard(&h[m], k, i);
    }
    rc = 0;
done:
    cic_ckpt_close(k);
    if (rc == 0) {
        *out = h;
        *n = m;
    } else {
        free(h);
    }
    return rc;
}
