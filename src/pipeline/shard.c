/* SPDX-License-Identifier: MIT */
/* shard.c: a single case split by samples (`cicheck run --shard K/N` on a
 * case without a [sweep] table): the split and the run of one shard; the
 * merge of the shards is shard_merge.c.
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
 * and the run is done (exit 0) once they are written. */
#include "shard_int.h"
#include "pipeline_int.h"

#include "../base/json_type.h"
#include "../base/mpvec.h"
#include "../case/case.h"
#include "../model/model.h"
#include "../xform/kinds.h"

#include <jansson.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* ---- the split ---- */

/* The first sample of shard k of n over s samples (k = n + 1: s). */
int _cic_shard_first_sample(long k, long n, int s)
{
    return (int)(((long long)(k - 1) * s) / n);
}

/* The case of shard k of n of c in *out: its samples, the first one's
 * index, a static-fold's calibration sample counted in the shard. CIC_OK,
 * or CIC_EINPUT with d saying why the case cannot be split so. */
static int shard_case(cic_case *out, const cic_case *c, long k, long n, cic_diag *d)
{
    int lo = _cic_shard_first_sample(k, n, c->model.samples);
    int hi = _cic_shard_first_sample(k + 1, n, c->model.samples);
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

/* MPFR values as fixed-size records (a script can cut a shard's arrays
 * by samples): the kind (0 zero, 1 regular, 2 infinity, 3 NaN) and sign
 * as int32 each, the exponent as int64, then the significand's limbs.
 * Read through a value of its own, then copied exactly. A regular value's
 * exponent must lie in MPFR's range: mpfr_custom_init_set takes it as
 * given, and one far outside (2^32) made the merge's later subtractions
 * run for minutes. */
static void io_mp(cic_shard_io *s, mpfr_t *v, bool write)
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

static void io_f32(cic_shard_io *s, float *v, bool write)
{
    if (s->ok)
        s->ok = (write ? fwrite(v, sizeof *v, s->n, s->f)
                       : fread(v + s->off, sizeof *v, s->n, s->f)) == s->n;
}

bool _cic_shard_verdict_f64(const cic_case *c)
{
    return c->verdict_engine == CIC_VERDICT_ENGINE_F64 ||
           c->verdict_engine == CIC_VERDICT_ENGINE_F64_BLAS;
}

bool _cic_shard_f32_on(const cic_case *c, int e)
{
    return e == CIC_MATMUL_OPENBLAS ? c->f32_openblas : c->f32_fixed;
}

size_t _cic_shard_bin_bytes(const cic_case *c, size_t n)
{
    size_t nl = (size_t)((c->mpfr_prec + mp_bits_per_limb - 1) / mp_bits_per_limb);
    size_t mp = 2 * sizeof(int32_t) + sizeof(int64_t) + nl * sizeof(mp_limb_t);
    size_t n_mp = 1 + (_cic_shard_verdict_f64(c) ? 1 : 0) + 2 * (size_t)c->n_xf;
    size_t n_f32 = 0, per;
    int e;
    for (e = 0; e < CIC_MATMUL_COUNT; e++)
        n_f32 += _cic_shard_f32_on(c, e) ? 1 + (size_t)c->n_xf : 0;
    per = n_mp * mp + n_f32 * sizeof(float); /* small: a few arrays of a few limbs */
    return cic_mul_size(n, per);
}

/* The order above. */
void _cic_shard_io_all(cic_shard_io *s, const cic_case *c, cic_pipeline_partials *pp,
                       bool write)
{
    int i, e;
    io_mp(s, pp->truth, write);
    if (_cic_shard_verdict_f64(c))
        io_mp(s, pp->ref, write);
    for (e = 0; e < CIC_MATMUL_COUNT; e++)
        if (_cic_shard_f32_on(c, e))
            io_f32(s, pp->before[e], write);
    for (i = 0; i < c->n_xf; i++) {
        io_mp(s, pp->yhp[i], write);
        io_mp(s, pp->yrw[i], write);
        for (e = 0; e < CIC_MATMUL_COUNT; e++)
            if (_cic_shard_f32_on(c, e))
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

static json_t *flops_json(const cic_case *c, const cic_pipeline_partials *pp)
{
    json_t *o = json_object(), *before = json_array(), *xfs = json_array();
    int i, e;
    json_object_set_new(o, "truth", fc_json(&pp->base_counted));
    for (e = 0; e < CIC_MATMUL_COUNT; e++)
        json_array_append_new(before, _cic_shard_f32_on(c, e) ? fc_json(&pp->before_fc[e])
                                                              : json_null());
    json_object_set_new(o, "before", before);
    for (i = 0; i < c->n_xf; i++) {
        json_t *x = json_object(), *eng = json_array();
        json_object_set_new(x, "verdict", fc_json(&pp->xf_counted[i]));
        for (e = 0; e < CIC_MATMUL_COUNT; e++)
            json_array_append_new(eng, _cic_shard_f32_on(c, e) ? fc_json(&pp->xf_fc[i][e])
                                                               : json_null());
        json_object_set_new(x, "f32", eng);
        json_array_append_new(xfs, x);
    }
    json_object_set_new(o, "transforms", xfs);
    return o;
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
    cic_shard_io s;
    int rc;
    if ((rc = cic_file_read(&src, &src_len, full->path, (size_t)CIC_CASE_MAX_FILE_BYTES,
                            "a case file (TOML)", d)) != CIC_OK)
        return rc;
    memset(&s, 0, sizeof s);
    s.f = open_memstream(&bin, &bin_len);
    s.n = pp->n;
    s.prec = sc->mpfr_prec;
    s.ok = s.f != NULL;
    _cic_shard_io_all(&s, sc, (cic_pipeline_partials *)pp, true);
    if (!s.f || fclose(s.f) != 0 || !s.ok) {
        free(src);
        free(bin);
        cic_diag_set(d, dir, 0, 0, "out of memory writing the shard's numbers");
        return CIC_EINTERNAL;
    }
    /* what the merge will read, no more */
    CIC_ASSERT(bin_len == _cic_shard_bin_bytes(sc, pp->n));
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

int cic_case_shard_plan(cic_case_shard *s, const cic_case *c, long k, long n, cic_diag *d)
{
    int rc;
    memset(s, 0, sizeof *s);
    s->t0 = _cic_pl_now();
    s->c = c;
    s->k = k;
    s->n = n;
    s->sc = malloc(sizeof *s->sc);
    if (!s->sc) {
        cic_diag_set(d, c->path, 0, 0, "out of memory");
        return CIC_EINTERNAL;
    }
    if ((rc = shard_case(s->sc, c, k, n, d)) != CIC_OK)
        return rc;
    /* what the merge checks the shards agree on: the bytes of every file read */
    return cic_files_read_hash(&s->fr, c, d);
}

int cic_case_shard_run(cic_case_shard *s, const char *out_dir, double max_memory, int threads,
                       cic_diag *d)
{
    cic_pipeline_opts o;
    cic_pipeline *pl = NULL;
    int rc;
    memset(&o, 0, sizeof o);
    o.max_memory = max_memory;
    o.threads = threads;
    o.no_baseline = true; /* the merge compares the whole case */
    o.keep_partials = true;
    rc = cic_pipeline_run(&pl, s->sc, &o, d);
    if ((rc == CIC_OK || rc == CIC_EGATE) && cic_files_read_unchanged(&s->fr, d) != CIC_OK)
        rc = CIC_EINTERNAL;
    if (rc == CIC_OK || rc == CIC_EGATE)
        rc = write_shard(out_dir, s->c, s->sc, s->k, s->n, cic_pipeline_partials_of(pl), &s->fr,
                         _cic_pl_now() - s->t0, d);
    cic_pipeline_destroy(pl);
    return rc;
}

void cic_case_shard_clear(cic_case_shard *s)
{
    cic_files_read_free(&s->fr);
    free(s->sc);
    s->sc = NULL;
}

bool cic_is_case_shard(const char *dir)
{
    char path[1300];
    struct stat st;
    snprintf(path, sizeof path, "%s/" SHARD_JSON, dir);
    return stat(path, &st) == 0;
}
