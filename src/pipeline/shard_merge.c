/* SPDX-License-Identifier: MIT */
/* shard_merge.c: the merge of a case's sample shards (`cicheck merge` on
 * the folders of `cicheck run --shard K/N` on a case without a [sweep]
 * table; shard.c writes them).
 *
 * The merge checks every shard (the same case, this cicheck version, the
 * same bytes of every file read, each shard once, none missing, the
 * samples each must hold, the .bin as described and of the size its case
 * implies), lays the arrays end to end in sample order and scores the
 * whole case from them (cic_pipeline_replay): the same code on the same
 * numbers, so report.json is the unsharded run's but for the timing.
 * O(total): one pass per shard, the case loaded once. */
#include "shard_int.h"

#include "../base/json_type.h"
#include "../base/mpvec.h"
#include "../case/case.h"

#include <jansson.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* ---- FLOPs in the header ---- */

/* Add the site counts of a (a JSON array) to fc; false when a is not an
 * array of CIC_SITE_COUNT non-negative numbers. */
static bool fc_add(cic_flop_count *fc, const json_t *a)
{
    int i;
    if (!json_is_array(a) || json_array_size(a) != CIC_SITE_COUNT)
        return false;
    for (i = 0; i < CIC_SITE_COUNT; i++) {
        json_t *v = json_array_get(a, (size_t)i);
        if (!json_is_number(v) || !(json_number_value(v) >= 0))
            return false;
        fc->site[i] += json_number_value(v);
    }
    return true;
}

/* The merged FLOPs: every shard's added to pp. False on a malformed entry. */
static bool flops_add(cic_pipeline_partials *pp, const cic_case *c, const json_t *o)
{
    json_t *before = json_object_get(o, "before"), *xfs = json_object_get(o, "transforms");
    bool ok = fc_add(&pp->base_counted, json_object_get(o, "truth")) &&
              json_array_size(before) == CIC_MATMUL_COUNT &&
              json_array_size(xfs) == (size_t)c->n_xf;
    int i, e;
    for (e = 0; ok && e < CIC_MATMUL_COUNT; e++)
        ok = !_cic_shard_f32_on(c, e) ||
             fc_add(&pp->before_fc[e], json_array_get(before, (size_t)e));
    for (i = 0; ok && i < c->n_xf; i++) {
        json_t *x = json_array_get(xfs, (size_t)i), *eng = json_object_get(x, "f32");
        ok = fc_add(&pp->xf_counted[i], json_object_get(x, "verdict")) &&
             json_array_size(eng) == CIC_MATMUL_COUNT;
        for (e = 0; ok && e < CIC_MATMUL_COUNT; e++)
            ok = !_cic_shard_f32_on(c, e) ||
                 fc_add(&pp->xf_fc[i][e], json_array_get(eng, (size_t)e));
    }
    return ok;
}

/* ---- the merge ---- */

typedef struct {
    cic_case *c;             /* the whole case, from the first shard */
    char sha[65];            /* its file's SHA-256 */
    long count;              /* N */
    size_t per;              /* values per sample in each array */
    const char **seen;       /* shard index -> its case-shard.json (NULL: not yet) */
    cic_pipeline_partials pp;
    bool have_sample0;
    bool sample0_certified; /* its truth held, its recheck included */
    cic_env env;            /* the environment of the shard holding sample 0,
                             * which the merged report records */
    double wall;
    json_t *files;          /* the first shard's files_read (NULL: none) */
    const char *files_of;   /* its case-shard.json */
} cmerge;

static json_int_t int_of(const json_t *o, const char *key, bool *ok);

/* Precision p into the sorted union (the case's own stays first). */
static bool prec_add(cic_truth_proof *pf, long p)
{
    int i, j;
    for (i = 0; i < pf->n_precs; i++)
        if (pf->precs[i] == p)
            return true;
    if (pf->n_precs == CIC_PROOF_MAX_PRECS)
        return false;
    for (i = pf->n_precs; i > 1 && pf->precs[i - 1] > p; i--)
        ;
    for (j = pf->n_precs; j > i; j--)
        pf->precs[j] = pf->precs[j - 1];
    pf->precs[i] = p;
    pf->n_precs++;
    return true;
}

/* The fields of the truth's proof, combined over the shards: the one place
 * where per-truth figures meet. Counts are summed, the largest relative
 * radius is the maximum, the precisions their union, proven all of them;
 * the --recheck of sample 0 comes from the shard that holds it. A shard
 * whose proof does not add up is refused. */
static int truth_fields_add(cmerge *m, const json_t *r, int sample0, const char *path,
                            cic_diag *d)
{
    const json_t *pj = json_object_get(r, "truth_proof");
    const json_t *precs = json_object_get(pj, "precisions"), *why = json_object_get(pj, "why");
    const json_t *rel = json_object_get(pj, "max_rel_radius");
    json_int_t samples = json_integer_value(json_object_get(json_object_get(r, "shard"), "samples"));
    cic_truth_proof *pf = &m->pp.proof;
    bool inf = json_is_string(rel) && !strcmp(json_string_value(rel), "inf");
    bool ok = json_is_object(pj) && json_is_array(precs) && json_is_string(why) &&
              json_is_boolean(json_object_get(pj, "proven")) && json_array_size(precs) >= 1 &&
              (json_is_number(rel) || inf);
    json_int_t v = 0, f = 0, e = 0;
    size_t i;
    if (ok) {
        v = int_of(pj, "values", &ok);
        f = int_of(pj, "first", &ok);
        e = int_of(pj, "escalated", &ok);
    }
    ok = ok && v >= 0 && f >= 0 && e >= 0 && f + e <= v &&
         json_is_true(json_object_get(pj, "proven")) == (f + e == v) &&
         (size_t)v == (size_t)m->per * (size_t)samples;
    for (i = 0; ok && i < json_array_size(precs); i++) {
        const json_t *p = json_array_get(precs, i);
        ok = json_is_integer(p) && json_integer_value(p) >= 64 && json_integer_value(p) <= 8192 &&
             (i > 0 || json_integer_value(p) == m->c->mpfr_prec) &&
             prec_add(pf, (long)json_integer_value(p));
    }
    if (!ok) {
        cic_diag_set(d, path, 0, 0,
                     "truth_proof is not a proof of the shard's values (its counts, "
                     "precisions or types do not add up)");
        return CIC_EINPUT;
    }
    if (pf->values == 0)
        pf->proven = true;
    pf->values += (size_t)v;
    pf->first += (size_t)f;
    pf->escalated += (size_t)e;
    pf->proven = pf->proven && f + e == v;
    {
        double x = json_is_number(rel) ? json_number_value(rel) : INFINITY;
        pf->max_rel_radius = x > pf->max_rel_radius ? x : pf->max_rel_radius;
    }
    if (!pf->why[0])
        cic_strlcpy(pf->why, json_string_value(why), sizeof pf->why);
    if (sample0 == 0) {
        const json_t *cd = json_object_get(r, "truth_cert_diff");
        if (!cic_report_env_parse(json_object_get(r, "environment"), &m->env)) {
            cic_diag_set(d, path, 0, 0, "environment is not the object report.json's "
                         "environment is (mpfr, gmp, openblas, openblas_core, "
                         "openblas_threads, openblas_thread_timeout, compiler, hostname)");
            return CIC_EINPUT;
        }
        pf->rechecked = json_is_true(json_object_get(pj, "rechecked"));
        m->sample0_certified = json_is_true(json_object_get(r, "truth_certified"));
        m->pp.truth_cert_diff = json_is_number(cd) ? json_number_value(cd) : NAN;
        m->have_sample0 = true;
    }
    return CIC_OK;
}

static json_int_t int_of(const json_t *o, const char *key, bool *ok)
{
    json_t *v = json_object_get(o, key);
    *ok = *ok && json_is_integer(v);
    return json_is_integer(v) ? json_integer_value(v) : 0;
}

/* The whole case from the first shard's embedded file, and the arrays. */
static int merge_first(cmerge *m, const char *path, const json_t *r, cic_diag *d)
{
    json_t *src = json_object_get(r, "case_source"), *file = json_object_get(r, "case_file");
    cic_diag cd;
    if (!json_is_string(file) || strlen(json_string_value(src)) != json_string_length(src) ||
        cic_case_load_string(m->c, json_string_value(src), json_string_value(file), &cd) !=
            CIC_OK) {
        cic_diag_set(d, path, 0, 0, "the embedded case does not load%s%s",
                     json_is_string(file) ? ": " : " (no case_file)",
                     json_is_string(file) ? cd.msg : "");
        return CIC_EINPUT;
    }
    if (m->c->sweep.on) {
        cic_diag_set(d, path, 0, 0, "the embedded case has a [sweep] table");
        return CIC_EINPUT;
    }
    cic_strlcpy(m->sha, json_string_value(json_object_get(r, "case_sha256")), sizeof m->sha);
    return CIC_OK;
}

static int alloc_arrays(cmerge *m, cic_diag *d)
{
    const cic_case *c = m->c;
    size_t n = m->per * (size_t)c->model.samples;
    bool ok;
    int i, e;
    cic_pipeline_partials *pp = &m->pp;
    pp->n = n;
    pp->truth = cic_mpvec_create(n, c->mpfr_prec);
    ok = pp->truth != NULL;
    if (_cic_shard_verdict_f64(c))
        ok = ok && (pp->ref = cic_mpvec_create(n, c->mpfr_prec)) != NULL;
    for (e = 0; e < CIC_MATMUL_COUNT; e++)
        if (_cic_shard_f32_on(c, e))
            ok = ok && (pp->before[e] = cic_calloc(n, sizeof(float))) != NULL;
    for (i = 0; i < c->n_xf; i++) {
        ok = ok && (pp->yhp[i] = cic_mpvec_create(n, c->mpfr_prec)) != NULL &&
             (pp->yrw[i] = cic_mpvec_create(n, c->mpfr_prec)) != NULL;
        for (e = 0; e < CIC_MATMUL_COUNT; e++)
            if (_cic_shard_f32_on(c, e))
                ok = ok && (pp->y[i][e] = cic_calloc(n, sizeof(float))) != NULL;
    }
    if (!ok)
        cic_diag_set(d, c->path, 0, 0, "merge: out of memory for %zu values per output", n);
    return ok ? CIC_OK : CIC_EINTERNAL;
}

/* Shard header r (read from path) against the first shard's, and its place. */
static int check_shard(cmerge *m, int k, const char *path, const json_t *r, long *index,
                       int *sample0, int *samples, cic_diag *d)
{
    const char *kind = json_string_value(json_object_get(r, "kind"));
    const char *ver = json_string_value(json_object_get(r, "cicheck_version"));
    const char *sha = json_string_value(json_object_get(r, "case_sha256"));
    json_t *src = json_object_get(r, "case_source"), *sh = json_object_get(r, "shard");
    char hex[65];
    bool ok = true;
    long count;
    int ns;
    if (!kind || strcmp(kind, "case-shard") != 0) {
        cic_diag_set(d, path, 0, 0, "not a case shard (no \"kind\": \"case-shard\")");
        return CIC_EINPUT;
    }
    if (!ver || strcmp(ver, CIC_VERSION) != 0) {
        cic_diag_set(d, path, 0, 0, "refusing to merge: written by cicheck %.40s, this is %s",
                     ver ? ver : "(no version)", CIC_VERSION);
        return CIC_EINPUT;
    }
    if (!sha || !json_is_string(src)) {
        cic_diag_set(d, path, 0, 0, "no case_sha256 or case_source");
        return CIC_EINPUT;
    }
    cic_sha256_hex(hex, json_string_value(src), json_string_length(src));
    if (strcmp(hex, sha) != 0) {
        cic_diag_set(d, path, 0, 0, "case_source does not hash to case_sha256: the shard was "
                     "edited");
        return CIC_EINPUT;
    }
    if (k == 0 && merge_first(m, path, r, d) != CIC_OK)
        return CIC_EINPUT;
    if (strcmp(sha, m->sha) != 0) {
        cic_diag_set(d, path, 0, 0, "refusing to merge: a shard of another case file "
                     "(case_sha256 %.16s..., the first shard's %.16s...)", sha, m->sha);
        return CIC_EINPUT;
    }
    *index = (long)int_of(sh, "index", &ok);
    count = (long)int_of(sh, "count", &ok);
    *sample0 = (int)int_of(sh, "sample0", &ok);
    *samples = (int)int_of(sh, "samples", &ok);
    if (!ok || count < 1 || count > m->c->model.samples || *index < 1 || *index > count) {
        cic_diag_set(d, path, 0, 0, "shard is not K/N with 1 <= K <= N <= %d (the samples)",
                     m->c->model.samples);
        return CIC_EINPUT;
    }
    if (k == 0)
        m->count = count;
    if (count != m->count) {
        cic_diag_set(d, path, 0, 0, "refusing to merge: shard count %ld, the first shard's %ld",
                     count, m->count);
        return CIC_EINPUT;
    }
    ns = m->c->model.samples;
    if (*sample0 != _cic_shard_first_sample(*index, count, ns) ||
        *sample0 + *samples != _cic_shard_first_sample(*index + 1, count, ns)) {
        cic_diag_set(d, path, 0, 0, "shard %ld/%ld holds samples %d to %d, not the ones that "
                     "shard runs", *index, count, *sample0, *sample0 + *samples - 1);
        return CIC_EINPUT;
    }
    return CIC_OK;
}

/* Every figure is scored against the truth, and a shard's run refuses a
 * truth that is not a number before it writes anything; so one here was
 * not written by a run. */
static int truth_numbers(const cmerge *m, const char *path, int sample0, int samples,
                         cic_diag *d)
{
    size_t i, n = (size_t)samples * m->per, off = (size_t)sample0 * m->per;
    for (i = 0; i < n; i++)
        if (!mpfr_number_p(m->pp.truth[off + i])) {
            cic_diag_set(d, path, 0, 0, "truth value %zu of sample %d is %s: a shard's run "
                         "never writes a truth that is not a number (edited file?)",
                         i % m->per, sample0 + (int)(i / m->per),
                         mpfr_nan_p(m->pp.truth[off + i]) ? "NaN" : "infinite");
            return CIC_EINPUT;
        }
    return CIC_OK;
}

/* The shard's numbers into place: the .bin's size and hash as its header
 * says, every value where its samples go, nothing left over. */
static int read_bin(cmerge *m, const char *dir, const char *jpath, const json_t *r,
                    int sample0, int samples, cic_diag *d)
{
    char path[1300], hex[65];
    const char *want = json_string_value(json_object_get(r, "data_sha256"));
    json_t *bytes = json_object_get(r, "data_bytes");
    size_t len = 0, want_len = _cic_shard_bin_bytes(m->c, (size_t)samples * m->per);
    char *bin;
    cic_shard_io s;
    int rc;
    snprintf(path, sizeof path, "%s/" SHARD_BIN, dir);
    if (want_len == SIZE_MAX || !json_is_integer(bytes) ||
        json_integer_value(bytes) != (json_int_t)want_len) {
        cic_diag_set(d, jpath, 0, 0, "data_bytes is not the %zu bytes the numbers of %d "
                     "samples of case '%s' at %ld bits take", want_len, samples, m->c->name,
                     (long)m->c->mpfr_prec);
        return CIC_EINPUT;
    }
    /* never more than that read: a FIFO or a device (a link to /dev/zero)
     * is refused, a longer file too */
    if ((rc = cic_file_read(&bin, &len, path, want_len, "the shard's numbers (case-shard.bin)",
                            d)) != CIC_OK)
        return rc;
    cic_sha256_hex(hex, bin, len);
    if (!json_is_integer(bytes) || (json_int_t)len != json_integer_value(bytes) || !want ||
        strcmp(hex, want) != 0) {
        cic_diag_set(d, path, 0, 0, "%zu bytes that do not hash to data_sha256 of %s (truncated "
                     "or edited)", len, jpath);
        free(bin);
        return CIC_EINPUT;
    }
    memset(&s, 0, sizeof s);
    s.f = fmemopen(bin, len ? len : 1, "rb");
    s.off = (size_t)sample0 * m->per;
    s.n = (size_t)samples * m->per;
    s.prec = m->c->mpfr_prec;
    s.ok = s.f != NULL;
    _cic_shard_io_all(&s, m->c, &m->pp, false);
    if (s.ok && len > 0)
        s.ok = (size_t)ftell(s.f) == len;
    if (s.f)
        fclose(s.f);
    free(bin);
    if (!s.ok) {
        cic_diag_set(d, path, 0, 0, "not the numbers of %d samples of case '%s' at %ld bits",
                     samples, m->c->name, (long)m->c->mpfr_prec);
        return CIC_EINPUT;
    }
    return truth_numbers(m, path, sample0, samples, d);
}

/* Shard k (folder dir): checked, its numbers and FLOPs added. */
static int merge_shard(cmerge *m, int k, const char *dir, char *jpath, size_t jlen,
                       cic_diag *d)
{
    json_t *r;
    json_t *vals;
    long index;
    int sample0, samples, rc;
    snprintf(jpath, jlen, "%s/" SHARD_JSON, dir);
    if (!(r = cic_report_json_load(jpath, SHARD_JSON_MAX, d)))
        return CIC_EINPUT;
    rc = check_shard(m, k, jpath, r, &index, &sample0, &samples, d);
    if (rc == CIC_OK && k == 0) {
        m->files = json_incref(json_object_get(r, "files_read"));
        m->files_of = jpath;
    }
    /* the same bytes of every file read: q files, input files */
    if (rc == CIC_OK)
        rc = cic_files_read_compare(m->files, m->files_of, json_object_get(r, "files_read"),
                                    jpath, d);
    if (rc == CIC_OK && k == 0) {
        vals = json_object_get(r, "values");
        if (!json_is_integer(vals) || json_integer_value(vals) <= 0 ||
            json_integer_value(vals) % samples != 0) {
            cic_diag_set(d, jpath, 0, 0, "values is not a positive multiple of the samples");
            rc = CIC_EINPUT;
        } else {
            m->per = (size_t)(json_integer_value(vals) / samples);
            m->seen = cic_calloc((size_t)m->count + 1, sizeof *m->seen);
            rc = m->seen ? alloc_arrays(m, d) : CIC_EINTERNAL;
        }
    }
    vals = json_object_get(r, "values");
    if (rc == CIC_OK && (!json_is_integer(vals) ||
                         (size_t)json_integer_value(vals) != m->per * (size_t)samples)) {
        cic_diag_set(d, jpath, 0, 0, "values is not %zu per sample as in the first shard",
                     m->per);
        rc = CIC_EINPUT;
    }
    if (rc == CIC_OK && m->seen[index]) {
        cic_diag_set(d, jpath, 0, 0, "refusing to merge: shard %ld/%ld given twice (also %s)",
                     index, m->count, m->seen[index]);
        rc = CIC_EINPUT;
    }
    if (rc == CIC_OK && !flops_add(&m->pp, m->c, json_object_get(r, "flops"))) {
        cic_diag_set(d, jpath, 0, 0, "flops is not the FLOPs of the case's runs");
        rc = CIC_EINPUT;
    }
    if (rc == CIC_OK)
        rc = read_bin(m, dir, jpath, r, sample0, samples, d);
    if (rc == CIC_OK) {
        m->seen[index] = jpath;
        rc = truth_fields_add(m, r, sample0, jpath, d);
        m->wall += json_number_value(json_object_get(r, "wall_seconds"));
    }
    json_decref(r);
    return rc;
}


/* Every shard given and merged: none missing, sample 0's among them. */
static int merge_all(cmerge *m, const char *const *dirs, int n, char (*paths)[1300],
                     const char *out_dir, cic_diag *d)
{
    long i;
    int k, rc = cic_merge_check_out(dirs, n, out_dir, d);
    for (k = 0; rc == CIC_OK && k < n; k++)
        rc = merge_shard(m, k, dirs[k], paths[k], sizeof paths[k], d);
    for (i = 1; rc == CIC_OK && i <= m->count; i++)
        if (!m->seen[i]) {
            cic_diag_set(d, "", 0, 0, "refusing to merge: shard %ld/%ld of case '%s' is "
                         "missing (give all %ld shard folders)", i, m->count, m->c->name,
                         m->count);
            rc = CIC_EINPUT;
        }
    if (rc == CIC_OK && !m->have_sample0) {
        cic_diag_set(d, "", 0, 0, "merge: no shard holds sample 0");
        rc = CIC_EINPUT;
    }
    return rc;
}

int cic_case_merge_load(cic_case_merged *out, const char *const *dirs, int n,
                        const char *out_dir, const cic_pipeline_opts *o, cic_diag *d)
{
    char (*paths)[1300] = cic_calloc((size_t)n + 1, sizeof *paths);
    cic_pipeline_opts po = *o;
    cmerge m;
    int rc;
    memset(&m, 0, sizeof m);
    memset(out, 0, sizeof *out);
    m.c = malloc(sizeof *m.c);
    if (!paths || !m.c) {
        cic_diag_set(d, "", 0, 0, "merge: out of memory");
        free(paths);
        free(m.c);
        return CIC_EINTERNAL;
    }
    rc = merge_all(&m, dirs, n, paths, out_dir, d);
    /* every shard proven, and the recheck of sample 0 (if asked) agreed */
    m.pp.truth_certified = m.pp.proof.proven && m.sample0_certified;
    if (rc == CIC_OK) {
        po.env = &m.env; /* copied into the report */
        out->kase = m.c;
        out->count = m.count;
        out->wall_seconds = m.wall;
        m.c = NULL;
        rc = cic_pipeline_replay(&out->pl, out->kase, &po, &m.pp, d);
    } else {
        cic_pipeline_partials_free(&m.pp);
    }
    json_decref(m.files);
    free(m.seen);
    free(m.c);
    free(paths);
    return rc;
}

void cic_case_merged_clear(cic_case_merged *m)
{
    cic_pipeline_destroy(m->pl);
    free(m->kase);
    memset(m, 0, sizeof *m);
}
