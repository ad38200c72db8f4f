/* SPDX-License-Identifier: MIT */
/* files_read.c: the files a shard's run reads and the SHA-256 of what it
 * reads of each (sweep.h), so that `cicheck merge` refuses shards that read
 * different bytes: sample shards of one case file made with different
 * rotation files merged to PASS, since the case file (all a shard
 * recorded) names a file, not its contents.
 *
 * The files: each transform's q file (q = "file:..."), the [input] file,
 * and a [model] checkpoint's config.json, index and .safetensors shards.
 * Whole files are hashed, except a checkpoint's shards, of which the
 * header and the tensors the run reads are (cic_ckpt_hash_read: a run on
 * one layer of a 140 GB model reads a few GB of it, and SHA-256 here goes
 * at about 4 s a GiB). The JSON key of each hash says which it is:
 * "sha256_whole_file" or "sha256_header_and_tensors_read". Each file's
 * identity is recorded when it is hashed and compared when the run is
 * done: a file changed in between was not the one hashed (exit 3). */
#include "sweep.h"

#include "../base/json_type.h"
#include "../model/checkpoint.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#define KEY_WHOLE "sha256_whole_file"
#define KEY_PART "sha256_header_and_tensors_read"

/* Room for one more entry in fr. */
static cic_file_hash *add(cic_files_read *fr, cic_diag *d)
{
    cic_file_hash *h = realloc(fr->h, (size_t)(fr->n + 1) * sizeof *h);
    if (!h) {
        cic_diag_set(d, "", 0, 0, "out of memory");
        return NULL;
    }
    fr->h = h;
    memset(&h[fr->n], 0, sizeof *h);
    return &h[fr->n];
}

/* The whole file path as entry label. */
static int add_whole(cic_files_read *fr, const char *label, const char *path, cic_diag *d)
{
    cic_file_hash *h = add(fr, d);
    if (!h)
        return CIC_EINTERNAL;
    cic_strlcpy(h->label, label, sizeof h->label);
    cic_strlcpy(h->path, path, sizeof h->path);
    h->whole = true;
    if (cic_sha256_file(h->sha256, &h->id, path, d) < 0)
        return CIC_EINPUT;
    fr->n++;
    return CIC_OK;
}

int cic_files_read_hash(cic_files_read *fr, const cic_case *c, cic_diag *d)
{
    char label[320];
    int i, rc = CIC_OK;
    memset(fr, 0, sizeof *fr);
    for (i = 0; rc == CIC_OK && i < c->n_xf; i++)
        if (c->xf[i].q == CIC_Q_FILE) {
            snprintf(label, sizeof label, "q file of transform '%.200s'", c->xf[i].name);
            rc = add_whole(fr, label, c->xf[i].q_file, d);
        }
    if (rc == CIC_OK && c->model.input_kind == CIC_INPUT_FILE)
        rc = add_whole(fr, "[input] file", c->model.input_file, d);
    if (rc == CIC_OK && c->model.checkpoint[0]) {
        cic_file_hash *h;
        int n, k;
        if (cic_ckpt_hash_read(&h, &n, &c->model, d) < 0) {
            rc = CIC_EINPUT;
        } else {
            for (k = 0; rc == CIC_OK && k < n; k++) {
                cic_file_hash *e = add(fr, d);
                if (!e) {
                    rc = CIC_EINTERNAL;
                } else {
                    *e = h[k];
                    fr->n++;
                }
            }
            free(h);
        }
    }
    if (rc != CIC_OK)
        cic_files_read_free(fr);
    return rc;
}

void cic_files_read_free(cic_files_read *fr)
{
    free(fr->h);
    memset(fr, 0, sizeof *fr);
}

json_t *cic_files_read_json(const cic_files_read *fr)
{
    json_t *a = json_array();
    int i;
    for (i = 0; a && i < fr->n; i++)
        json_array_append_new(a, json_pack("{s:s,s:s,s:s}", "file", fr->h[i].label, "path",
                                           fr->h[i].path,
                                           fr->h[i].whole ? KEY_WHOLE : KEY_PART,
                                           fr->h[i].sha256));
    return a;
}

int cic_files_read_unchanged(const cic_files_read *fr, cic_diag *d)
{
    cic_file_id now;
    int i;
    for (i = 0; i < fr->n; i++)
        if (cic_file_id_get(&now, fr->h[i].path) != 0 || !cic_file_id_equal(&now, &fr->h[i].id)) {
            cic_diag_set(d, fr->h[i].path, 0, 0, "changed while cicheck was reading it (the %s "
                         "hashed for the shard is not the one the run read)", fr->h[i].label);
            return CIC_EINTERNAL;
        }
    return CIC_OK;
}

/* Entry e of a files_read array: its label, its hash and the key it is
 * under; false when e is not {file, path, one sha256 key of 64 digits}. */
static bool entry(const json_t *e, const char **label, const char **hash, const char **key)
{
    const json_t *w = json_object_get(e, KEY_WHOLE), *p = json_object_get(e, KEY_PART);
    *label = json_string_value(json_object_get(e, "file"));
    *key = w ? KEY_WHOLE : KEY_PART;
    *hash = json_string_value(w ? w : p);
    return json_is_object(e) && *label && json_is_string(json_object_get(e, "path")) &&
           (!w != !p) && *hash && strlen(*hash) == 64 &&
           strspn(*hash, "0123456789abcdef") == 64 && json_object_size(e) == 3;
}

/* The entry of array a labelled label, or NULL. */
static const json_t *find(const json_t *a, const char *label)
{
    const char *l, *h, *k;
    size_t i;
    for (i = 0; i < json_array_size(a); i++)
        if (entry(json_array_get(a, i), &l, &h, &k) && !strcmp(l, label))
            return json_array_get(a, i);
    return NULL;
}

/* Every entry of a well formed, with a label of its own. */
static bool well_formed(const json_t *a, const char *path, cic_diag *d)
{
    const char *l, *h, *k;
    size_t i;
    if (!json_is_array(a)) {
        cic_diag_set(d, path, 0, 0, "files_read is %s; an array of {file, path, %s or %s} "
                     "expected", cic_json_type_name(a), KEY_WHOLE, KEY_PART);
        return false;
    }
    for (i = 0; i < json_array_size(a); i++)
        if (!entry(json_array_get(a, i), &l, &h, &k) || find(a, l) != json_array_get(a, i)) {
            cic_diag_set(d, path, 0, 0, "files_read[%zu] is not {file, path, %s or %s (64 hex "
                         "digits)} of a file of its own", i, KEY_WHOLE, KEY_PART);
            return false;
        }
    return true;
}

/* Every file of a read by b with the same hash; d names the file and both. */
static int one_way(const json_t *a, const char *pa, const json_t *b, const char *pb,
                   cic_diag *d)
{
    const char *l, *ha, *ka, *lb, *hb, *kb;
    size_t i;
    for (i = 0; i < json_array_size(a); i++) {
        const json_t *e = json_array_get(a, i), *f;
        entry(e, &l, &ha, &ka);
        if (!(f = find(b, l))) {
            cic_diag_set(d, pb, 0, 0, "refusing to merge: the %s (%s) was read by %s, not by "
                         "this shard", l, json_string_value(json_object_get(e, "path")), pa);
            return CIC_EINPUT;
        }
        entry(f, &lb, &hb, &kb);
        if (strcmp(ka, kb) != 0 || strcmp(ha, hb) != 0) {
            cic_diag_set(d, pb, 0, 0, "refusing to merge: the %s differs between the shards: "
                         "%s %.16s... here (%s), %s %.16s... in %s (%s)", l, kb, hb,
                         json_string_value(json_object_get(f, "path")), ka, ha, pa,
                         json_string_value(json_object_get(e, "path")));
            return CIC_EINPUT;
        }
    }
    return CIC_OK;
}

/* A file b read that first did not; CIC_OK when none. */
static int only_in(const json_t *first, const char *pfirst, const json_t *b, const char *pb,
                   cic_diag *d)
{
    const char *l, *h, *k;
    size_t i;
    for (i = 0; i < json_array_size(b); i++)
        if (entry(json_array_get(b, i), &l, &h, &k) && !find(first, l)) {
            cic_diag_set(d, pb, 0, 0, "refusing to merge: this shard read the %s (%s), %s did "
                         "not", l, json_string_value(json_object_get(json_array_get(b, i),
                                                                     "path")), pfirst);
            return CIC_EINPUT;
        }
    return CIC_OK;
}

int cic_files_read_compare(const json_t *first, const char *pfirst, const json_t *b,
                           const char *pb, cic_diag *d)
{
    json_t *none = json_array(); /* no files_read: a shard that read no file */
    int rc = CIC_EINPUT;
    first = first ? first : none;
    b = b ? b : none;
    if (none && well_formed(first, pfirst, d) && well_formed(b, pb, d) &&
        (rc = one_way(first, pfirst, b, pb, d)) == CIC_OK)
        rc = only_in(first, pfirst, b, pb, d);
    json_decref(none);
    return rc;
}
