/* SPDX-License-Identifier: MIT */
/* case_shard.c: a single case split by samples (`cicheck run --shard K/N`
 * on a case without a [sweep] table) and the merge of its shards.
 *
 * Attention never crosses a sample and every other op works per token or
 * per sample, so the samples of a case can run apart. Shard K of N runs
 * the contiguous samples [floor((K-1) S / N), floor(K S / N)) of the S
 * samples: a model of those samples alone whose seeded inputs are theirs
 * in the whole case (cic_model_cfg.sample0). More shards than samples is
 * refused, as is a case the split cannot reproduce: low-precision engines
 * (their per-linear figures need the whole run), a [model] checkpoint or
 * an [input] file, and a static-fold whose calibration sample lies in
 * another shard. A shard scores nothing: it writes the numbers the report
 * is made of (pipeline.h, cic_pipeline_partials) for its samples,
 *   case-shard.bin   the truth, the verdict reference, every engine output
 *                    and each MPFR run with float32 weights, in a fixed
 *                    order (MPFR values in MPFR's portable binary format,
 *                    floats in this machine's byte order);
 *   case-shard.json  the case file (its bytes and SHA-256), the SHA-256 of
 *                    every file the run read (files_read: q files; see
 *                    files_read.c), the shard, the
 *                    FLOPs each engine run counted, the truth certificate
 *                    (sample 0's, meaningful in the shard that holds it),
 *                    the wall time, the environment (report.json's; the
 *                    merged report records that of sample 0's shard), and
 *                    the size and SHA-256 of the .bin;
 * and exits 0 once they are written. The merge checks every shard (the
 * same case, this cicheck version, the same bytes of every file read, each
 * shard once, none missing, the samples each must hold, the .bin as
 * described and of the size its case implies), lays the arrays end to
 * end in sample order and scores the whole case from them
 * (cic_pipeline_replay): the same code on the same numbers, so report.json
 * is the unsharded run's but for the timing. O(total): one pass per shard,
 * the case loaded once. */
#include "run.h"

#include "../base/json_type.h"
#include "../base/mpvec.h"
#include "../model/model.h"
#include "../pipeline/pipeline.h"
#include "../report/baseline.h"

#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#define SHARD_JSON "case-shard.json"
#define SHARD_BIN "case-shard.bin"
#define SHARD_JSON_MAX ((size_t)1 << 24)


/* ---- the split ---- */

/* "K/N" with 1 <= K <= N <= 10^6; false otherwise. */
static bool parse_kn(const char *s, long *k, long *n)
{
    char *end;
    *k = strtol(s, &end, 10);
    if (*end != '/')
        return false;
    *n = strtol(end + 1, &end, 10);
    return *end == '\0' && *n >= 1 && *n <= 1000000 && *k >= 1 && *k <= *n;
}

/* The first sample of shard k of n over s samples (k = n + 1: s). */
static int first_sample(long k, long n, int s)
{
    return (int)(((long long)(k - 1) * s) / n);
}

/* The case of shard k of n of c in *out: its samples, the first one's
 * index, a static-fold's calibration sample counted in the shard. CIC_OK,
 * or CIC_EINPUT with d saying why the case cannot be split so. */
static int shard_case(cic_case *out, const cic_case *c, long k, long n, cic_diag *d)
{
    int lo = first_sample(k, n, c->model.samples), hi = first_sample(k + 1, n, c->model.samples);
    int i;
    const char *why = NULL;
    if (n > c->model.samples) {
        cic_diag_set(d, c->path, 0, 0, "--shard %ld/%ld: case '%s' has %d sample%s, so at most "
                     "%d shards (a shard runs whole samples)", k, n, c->name, c->model.samples,
                     c->model.samples == 1 ? "" : "s", c->model.samples);
        return CIC_EINPUT;
    }
    if (c->n_lowp > 0)
        why = "it has low-precision engines, whose per-linear figures need the whole run";
    else if (c->model.checkpoint[0])
        why = "its weights come from a [model] checkpoint";
    else if (c->model.input_kind == CIC_INPUT_FILE)
        why = "its input comes from an [input] file";
    if (why) {
        cic_diag_set(d, c->path, 0, 0, "--shard: case '%s' cannot be split by samples: %s",
                     c->name, why);
        return CIC_EINPUT;
    }
    *out = *c;
    out->model.samples = hi - lo;
    out->model.sample0 = lo;
    for (i = 0; i < c->n_xf; i++) {
        cic_xform_spec *xf = &out->xf[i];
        if (!cic_xform_has_keys(xf->kind, CIC_XKEY_CALIBRATION))
            continue;
        if (xf->calibration < lo || xf->calibration >= hi) {
            cic_diag_set(d, c->path, 0, 0, "--shard %ld/%ld: transform '%s' (%s) bakes "
                         "in sample %d, which this shard (samples %d to %d) does not hold",
                         k, n, xf->name, CIC_XFORM_NAME[xf->kind], xf->calibration, lo, hi - 1);
            return CIC_EINPUT;
        }
        xf->calibration -= lo;
    }
    return CIC_OK;
}

/* ---- the arrays, in their order ----
 *
 * truth; the f64 verdict reference (verdict = f64 or f64-openblas); each
 * enabled f32 engine's output on the original; per transform its verdict
 * run, its run with float32 weights, each enabled f32 engine's output. */

typedef struct {
    FILE *f;
    size_t off, n; /* the shard's values within each array, and how many */
    mpfr_prec_t prec;
    bool ok;
} io;

/* MPFR values as fixed-size records (a script can cut a shard's arrays
 * by samples): the kind (0 zero, 1 regular, 2 infinity, 3 NaN) and sign
 * as int32 each, the exponent as int64, then the significand's limbs.
 * Read through a value of its own, then copied exactly. A regular value's
 * exponent must lie in MPFR's range: mpfr_custom_init_set takes it as
 * given, and one far outside (2^32) made the merge's later subtractions
 * run for minutes. */
static void io_mp(io *s, mpfr_t *v, bool write)
{
    size_t i, nl = (size_t)((s->prec + mp_bits_per_limb - 1) / mp_bits_per_limb);
    mp_limb_t *limbs = cic_calloc(nl, sizeof *limbs);
    int32_t head[2];
    int64_t ex;
    mpfr_t t;
    s->ok = s->ok && limbs;
    for (i = 0; s->ok && i < s->n; i++) {
        mpfr_ptr x = v[s->off + i];
        if (write) {
            head[0] = mpfr_zero_p(x) ? 0 : mpfr_regular_p(x) ? 1 : mpfr_inf_p(x) ? 2 : 3;
            head[1] = mpfr_signbit(x) ? -1 : 1;
            ex = head[0] == 1 ? (int64_t)mpfr_get_exp(x) : 0;
            memset(limbs, 0, nl * sizeof *limbs);
            if (head[0] == 1)
                memcpy(limbs, mpfr_custom_get_significand(x), nl * sizeof *limbs);
            s->ok = fwrite(head, sizeof head, 1, s->f) == 1 && fwrite(&ex, sizeof ex, 1, s->f) == 1 &&
                    fwrite(limbs, sizeof *limbs, nl, s->f) == nl;
            continue;
        }
        s->ok = fread(head, sizeof head, 1, s->f) == 1 && fread(&ex, sizeof ex, 1, s->f) == 1 &&
                fread(limbs, sizeof *limbs, nl, s->f) == nl && head[0] >= 0 && head[0] <= 3 &&
                (head[1] == 1 || head[1] == -1) &&
                (head[0] != 1 || (((limbs[nl - 1] >> (mp_bits_per_limb - 1)) & 1) &&
                                  ex >= mpfr_get_emin() && ex <= mpfr_get_emax()));
        if (!s->ok)
            break;
        if (head[0] == 1) {
            mpfr_custom_init_set(t, MPFR_REGULAR_KIND * head[1], (mpfr_exp_t)ex, s->prec, limbs);
            s->ok = mpfr_set(x, t, MPFR_RNDN) == 0;
        } else if (head[0] == 0) {
            mpfr_set_zero(x, head[1]);
        } else if (head[0] == 2) {
            mpfr_set_inf(x, head[1]);
        } else {
            mpfr_set_nan(x);
        }
    }
    free(limbs);
}

static void io_f32(io *s, float *v, bool write)
{
    if (s->ok)
        s->ok = (write ? fwrite(v, sizeof *v, s->n, s->f)
                       : fread(v + s->off, sizeof *v, s->n, s->f)) == s->n;
}

static bool verdict_f64(const cic_case *c)
{
    return c->verdict_engine == CIC_VERDICT_ENGINE_F64 ||
           c->verdict_engine == CIC_VERDICT_ENGINE_F64_BLAS;
}

static bool f32_on(const cic_case *c, int e)
{
    return e == CIC_MATMUL_OPENBLAS ? c->f32_openblas : c->f32_fixed;
}

/* The bytes io_all writes for n values of each array of c at c's
 * precision (SIZE_MAX when that overflows): what a shard's .bin must hold,
 * so no more is ever read. */
static size_t bin_bytes(const cic_case *c, size_t n)
{
    size_t nl = (size_t)((c->mpfr_prec + mp_bits_per_limb - 1) / mp_bits_per_limb);
    size_t mp = 2 * sizeof(int32_t) + sizeof(int64_t) + nl * sizeof(mp_limb_t);
    size_t n_mp = 1 + (verdict_f64(c) ? 1 : 0) + 2 * (size_t)c->n_xf, n_f32 = 0, per;
    int e;
    for (e = 0; e < CIC_MATMUL_COUNT; e++)
        n_f32 += f32_on(c, e) ? 1 + (size_t)c->n_xf : 0;
    per = n_mp * mp + n_f32 * sizeof(float); /* small: a few arrays of a few limbs */
    return cic_mul_size(n, per);
}

/* Every array of pp in the order above, written or read into place. */
static void io_all(io *s, const cic_case *c, cic_pipeline_partials *pp, bool write)
{
    int i, e;
    io_mp(s, pp->truth, write);
    if (verdict_f64(c))
        io_mp(s, pp->ref, write);
    for (e = 0; e < CIC_MATMUL_COUNT; e++)
        if (f32_on(c, e))
            io_f32(s, pp->before[e], write);
    for (i = 0; i < c->n_xf; i++) {
        io_mp(s, pp->yhp[i], write);
        io_mp(s, pp->yrw[i], write);
        for (e = 0; e < CIC_MATMUL_COUNT; e++)
            if (f32_on(c, e))
                io_f32(s, pp->y[i][e], write);
    }
}

/* ---- FLOPs in the header ---- */

static json_t *fc_json(const cic_flop_count *fc)
{
    json_t *a = json_array();
    int i;
    for (i = 0; i < CIC_SITE_COUNT; i++)
        json_array_append_new(a, json_real(fc->site[i]));
    return a;
}

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

static json_t *flops_json(const cic_case *c, const cic_pipeline_partials *pp)
{
    json_t *o = json_object(), *before = json_array(), *xfs = json_array();
    int i, e;
    json_object_set_new(o, "truth", fc_json(&pp->base_counted));
    for (e = 0; e < CIC_MATMUL_COUNT; e++)
        json_array_append_new(before, f32_on(c, e) ? fc_json(&pp->before_fc[e]) : json_null());
    json_object_set_new(o, "before", before);
    for (i = 0; i < c->n_xf; i++) {
        json_t *x = json_object(), *eng = json_array();
        json_object_set_new(x, "verdict", fc_json(&pp->xf_counted[i]));
        for (e = 0; e < CIC_MATMUL_COUNT; e++)
            json_array_append_new(eng, f32_on(c, e) ? fc_json(&pp->xf_fc[i][e]) : json_null());
        json_object_set_new(x, "f32", eng);
        json_array_append_new(xfs, x);
    }
    json_object_set_new(o, "transforms", xfs);
    return o;
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
        ok = !f32_on(c, e) || fc_add(&pp->before_fc[e], json_array_get(before, (size_t)e));
    for (i = 0; ok && i < c->n_xf; i++) {
        json_t *x = json_array_get(xfs, (size_t)i), *eng = json_object_get(x, "f32");
        ok = fc_add(&pp->xf_counted[i], json_object_get(x, "verdict")) &&
             json_array_size(eng) == CIC_MATMUL_COUNT;
        for (e = 0; ok && e < CIC_MATMUL_COUNT; e++)
            ok = !f32_on(c, e) || fc_add(&pp->xf_fc[i][e], json_array_get(eng, (size_t)e));
    }
    return ok;
}

/* ---- a shard's run ---- */

/* The shard's proof of its truth (report.h), for the merge. */
static json_t *proof_json(const cic_truth_proof *pf)
{
    json_t *o = json_object(), *precs = json_array();
    int i;
    json_object_set_new(o, "proven", json_boolean(pf->proven));
    json_object_set_new(o, "values", json_integer((json_int_t)pf->values));
    json_object_set_new(o, "first", json_integer((json_int_t)pf->first));
    json_object_set_new(o, "escalated", json_integer((json_int_t)pf->escalated));
    json_object_set_new(o, "max_rel_radius", isfinite(pf->max_rel_radius)
                                                 ? json_real(pf->max_rel_radius)
                                                 : json_string("inf"));
    for (i = 0; i < pf->n_precs; i++)
        json_array_append_new(precs, json_integer(pf->precs[i]));
    json_object_set_new(o, "precisions", precs);
    json_object_set_new(o, "why", json_string(pf->why));
    json_object_set_new(o, "rechecked", json_boolean(pf->rechecked));
    return o;
}

/* case-shard.bin and case-shard.json of a finished shard run into dir. */
static int write_shard(const char *dir, const cic_case *full, const cic_case *sc, long k, long n,
                       const cic_pipeline_partials *pp, const cic_files_read *fr, double wall,
                       cic_diag *d)
{
    char path[1300], sha[65], bsha[65], *src, *bin = NULL, *text;
    size_t src_len = 0, bin_len = 0;
    json_t *root, *sh;
    cic_env env;
    io s;
    int rc;
    if ((rc = cic_file_read(&src, &src_len, full->path, (size_t)CIC_CASE_MAX_FILE_BYTES,
                            "a case file (TOML)", d)) != CIC_OK)
        return rc;
    memset(&s, 0, sizeof s);
    s.f = open_memstream(&bin, &bin_len);
    s.n = pp->n;
    s.prec = sc->mpfr_prec;
    s.ok = s.f != NULL;
    io_all(&s, sc, (cic_pipeline_partials *)pp, true);
    if (!s.f || fclose(s.f) != 0 || !s.ok) {
        free(src);
        free(bin);
        cic_diag_set(d, dir, 0, 0, "out of memory writing the shard's numbers");
        return CIC_EINTERNAL;
    }
    CIC_ASSERT(bin_len == bin_bytes(sc, pp->n)); /* what the merge will read, no more */
    cic_sha256_hex(sha, src, src_len);
    cic_sha256_hex(bsha, bin, bin_len);
    root = json_object();
    json_object_set_new(root, "cicheck_version", json_string(CIC_VERSION));
    json_object_set_new(root, "kind", json_string("case-shard"));
    json_object_set_new(root, "case_name", json_string(full->name));
    json_object_set_new(root, "case_file", json_string(full->path));
    json_object_set_new(root, "case_sha256", json_string(sha));
    json_object_set_new(root, "case_source", json_stringn(src, src_len));
    json_object_set_new(root, "files_read", cic_files_read_json(fr));
    sh = json_object();
    json_object_set_new(sh, "index", json_integer(k));
    json_object_set_new(sh, "count", json_integer(n));
    json_object_set_new(sh, "sample0", json_integer(sc->model.sample0));
    json_object_set_new(sh, "samples", json_integer(sc->model.samples));
    json_object_set_new(root, "shard", sh);
    json_object_set_new(root, "values", json_integer((json_int_t)pp->n));
    json_object_set_new(root, "truth_certified", json_boolean(pp->truth_certified));
    json_object_set_new(root, "truth_cert_diff", pp->proof.rechecked
                                                     ? json_real(pp->truth_cert_diff)
                                                     : json_null());
    json_object_set_new(root, "truth_proof", proof_json(&pp->proof));
    json_object_set_new(root, "flops", flops_json(sc, pp));
    json_object_set_new(root, "wall_seconds", json_real(wall));
    cic_report_env_fill(&env);
    json_object_set_new(root, "environment", cic_report_env_json(&env));
    json_object_set_new(root, "data_bytes", json_integer((json_int_t)bin_len));
    json_object_set_new(root, "data_sha256", json_string(bsha));
    free(src);
    text = json_dumps(root, JSON_INDENT(1) | JSON_REAL_PRECISION(17));
    json_decref(root);
    rc = CIC_EINTERNAL;
    if (text && cic_mkdir_p(dir, d) == 0) {
        snprintf(path, sizeof path, "%s/" SHARD_BIN, dir);
        if (cic_write_atomic(path, bin, bin_len, d) == 0) {
            snprintf(path, sizeof path, "%s/" SHARD_JSON, dir);
            if (cic_write_atomic(path, text, strlen(text), d) == 0)
                rc = CIC_OK;
        }
    } else if (!text) {
        cic_diag_set(d, dir, 0, 0, "out of memory");
    }
    free(text);
    free(bin);
    return rc;
}

int cic_run_case_shard(const cic_case *c, const cic_run_args *a, cic_diag *d)
{
    cic_case *sc = malloc(sizeof *sc);
    cic_pipeline_opts o;
    cic_pipeline *pl = NULL;
    cic_files_read fr;
    char dir[1200];
    long k, n;
    double t0 = cic_cli_now();
    int rc;
    if (!sc) {
        cic_diag_set(d, c->path, 0, 0, "out of memory");
        return CIC_EINTERNAL;
    }
    if (!parse_kn(a->shard, &k, &n)) {
        cic_diag_set(d, c->path, 0, 0, "--shard takes K/N with 1 <= K <= N (got '%s')", a->shard);
        free(sc);
        return CIC_EINPUT;
    }
    if (a->dump_dir) {
        cic_diag_set(d, c->path, 0, 0, "--shard and --dump: dump the whole case unsharded");
        free(sc);
        return CIC_EINPUT;
    }
    if ((rc = shard_case(sc, c, k, n, d)) != CIC_OK) {
        free(sc);
        return rc;
    }
    if (a->out_dir)
        cic_strlcpy(dir, a->out_dir, sizeof dir);
    else
        snprintf(dir, sizeof dir, "reports/%s", c->name);
    memset(&o, 0, sizeof o);
    o.max_memory = a->max_memory;
    o.threads = a->threads;
    o.no_baseline = true; /* the merge compares the whole case */
    o.keep_partials = true;
    /* what the merge checks the shards agree on: the bytes of every file read */
    if ((rc = cic_files_read_hash(&fr, c, d)) != CIC_OK) {
        free(sc);
        return rc;
    }
    printf("case %s: shard %ld/%ld runs samples %d to %d of %d\n", c->name, k, n,
           sc->model.sample0, sc->model.sample0 + sc->model.samples - 1, c->model.samples);
    rc = cic_pipeline_run(&pl, sc, &o, d);
    if ((rc == CIC_OK || rc == CIC_EGATE) && cic_files_read_unchanged(&fr, d) != CIC_OK)
        rc = CIC_EINTERNAL;
    if (rc == CIC_OK || rc == CIC_EGATE) {
        rc = write_shard(dir, c, sc, k, n, cic_pipeline_partials_of(pl), &fr,
                         cic_cli_now() - t0, d);
        if (rc == CIC_OK)
            printf("wrote %s/" SHARD_JSON " and " SHARD_BIN " (merge the %ld shards with "
                   "'cicheck merge')\n", dir, n);
    }
    cic_pipeline_destroy(pl);
    cic_files_read_free(&fr);
    free(sc);
    return rc;
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
    if (verdict_f64(c))
        ok = ok && (pp->ref = cic_mpvec_create(n, c->mpfr_prec)) != NULL;
    for (e = 0; e < CIC_MATMUL_COUNT; e++)
        if (f32_on(c, e))
            ok = ok && (pp->before[e] = cic_calloc(n, sizeof(float))) != NULL;
    for (i = 0; i < c->n_xf; i++) {
        ok = ok && (pp->yhp[i] = cic_mpvec_create(n, c->mpfr_prec)) != NULL &&
             (pp->yrw[i] = cic_mpvec_create(n, c->mpfr_prec)) != NULL;
        for (e = 0; e < CIC_MATMUL_COUNT; e++)
            if (f32_on(c, e))
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
    if (*sample0 != first_sample(*index, count, m->c->model.samples) ||
        *sample0 + *samples != first_sample(*index + 1, count, m->c->model.samples)) {
        cic_diag_set(d, path, 0, 0, "shard %ld/%ld holds samples %d to %d, not the ones that "
                     "shard runs", *index, count, *sample0, *sample0 + *samples - 1);
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
    size_t len = 0, want_len = bin_bytes(m->c, (size_t)samples * m->per);
    char *bin;
    io s;
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
    io_all(&s, m->c, &m->pp, false);
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
    return CIC_OK;
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

bool cic_is_case_shard(const char *dir)
{
    char path[1300];
    struct stat st;
    snprintf(path, sizeof path, "%s/" SHARD_JSON, dir);
    return stat(path, &st) == 0;
}

/* The merged report: scored, printed and written like a run's. */
static int merge_report(cmerge *m, const cic_merge_args *ma, cic_case_run *cr, cic_diag *d)
{
    cic_pipeline_opts o;
    cic_pipeline *pl = NULL;
    cic_run_args pa;
    int rc;
    memset(&o, 0, sizeof o);
    o.no_baseline = ma->no_baseline;
    o.baseline_dir = ma->baseline_dir;
    o.tol = ma->tol;
    o.env = &m->env;
    cr->kase = *m->c;
    rc = cic_pipeline_replay(&pl, &cr->kase, &o, &m->pp, d);
    if (rc == CIC_OK || rc == CIC_EGATE) {
        memset(&pa, 0, sizeof pa);
        pa.color = ma->color;
        printf("merged %ld shard%s of case %s: %d samples (%.1f s in the shards)\n", m->count,
               m->count == 1 ? "" : "s", m->c->name, m->c->model.samples, m->wall);
        cic_run_print(&pa, cic_pipeline_report(pl), &cr->kase);
        if (cic_report_json_write(cic_pipeline_report(pl), ma->out_dir, d) < 0) {
            rc = CIC_EINTERNAL;
        } else {
            printf("wrote %s/report.json\n", ma->out_dir);
            cic_pipeline_take_report(pl, &cr->rep);
            cr->rep.kase = &cr->kase;
        }
    }
    cic_pipeline_destroy(pl);
    return rc;
}

int cic_case_merge(const char *const *dirs, int n, const cic_merge_args *ma, cic_case_run **out)
{
    cic_case_run *cr = cic_calloc(1, sizeof *cr);
    char (*paths)[1300] = cic_calloc((size_t)n + 1, sizeof *paths);
    cmerge m;
    cic_diag d;
    long i;
    int k, rc = CIC_OK;
    memset(&m, 0, sizeof m);
    memset(&d, 0, sizeof d);
    *out = cr;
    m.c = malloc(sizeof *m.c);
    if (!cr || !paths || !m.c) {
        fprintf(stderr, "cicheck: merge: out of memory\n");
        free(paths);
        free(m.c);
        return CIC_EINTERNAL;
    }
    rc = cic_merge_check_out(dirs, n, ma->out_dir, &d);
    for (k = 0; rc == CIC_OK && k < n; k++)
        rc = merge_shard(&m, k, dirs[k], paths[k], sizeof paths[k], &d);
    for (i = 1; rc == CIC_OK && i <= m.count; i++)
        if (!m.seen[i]) {
            cic_diag_set(&d, "", 0, 0, "refusing to merge: shard %ld/%ld of case '%s' is "
                         "missing (give all %ld shard folders)", i, m.count, m.c->name, m.count);
            rc = CIC_EINPUT;
        }
    if (rc == CIC_OK && !m.have_sample0) {
        cic_diag_set(&d, "", 0, 0, "merge: no shard holds sample 0");
        rc = CIC_EINPUT;
    }
    /* every shard proven, and the recheck of sample 0 (if asked) agreed */
    m.pp.truth_certified = m.pp.proof.proven && m.sample0_certified;
    if (rc == CIC_OK)
        rc = merge_report(&m, ma, cr, &d);
    else
        cic_pipeline_partials_free(&m.pp);
    if (rc >= CIC_EINPUT) {
        cic_diag_print(stderr, &d);
        snprintf(cr->error, sizeof cr->error, "%.500s: %.600s", d.file[0] ? d.file : "merge",
                 d.msg);
    }
    cr->exit_code = cr->rep.exit_code = rc;
    json_decref(m.files);
    free(m.seen);
    free(m.c);
    free(paths);
    return rc;
}
