/* SPDX-License-Identifier: MIT */
/* dump_run.c: the --dump folder of a pipeline run (report/dump.h; the layout
 * in docs/reference/dump.md): the original model and every transformed one
 * (float32, and each transform's unrounded values as float64), and
 * outputs.safetensors with the truth and every MPFR output as float64, the
 * truth's binary32 as float32 and the f32 outputs as they are. With
 * [[engines.lowp]] also each model as each low-precision engine stores it
 * and activations.safetensors, the f32 engine's input of every quantized
 * linear. */
#include "pipeline_int.h"

#include "../base/mpvec.h"
#include "../report/dump.h"
#include "../xform/kinds.h"

#include <string.h>

/* Every model (none, then each transform) as each low-precision engine
 * stores it, then the inputs the outlier tap kept. */
static int dump_lowp(const cic_pipeline *r, const char *dir, cic_diag *d)
{
    char path[2048], file[2 * CIC_NAME_MAX + 32];
    cic_st_tensor *t;
    int i, e, rc;
    for (i = -1; i < r->c->n_xf; i++) {
        const cic_model *m = i < 0 ? r->orig : r->xm[i];
        const char *mt[] = {"case", r->c->name, "cicheck_version", CIC_VERSION,
                            "transform", i < 0 ? "none" : r->c->xf[i].name, NULL};
        if (!m)
            continue;
        for (e = 0; e < r->c->n_lowp; e++) {
            cic_dump_lowp_file_name(file, sizeof file, r->c, i, e);
            snprintf(path, sizeof path, "%s/%s", dir, file);
            if (cic_dump_lowp_model(path, m, &r->c->lowp[e], mt, d) < 0)
                return -1;
        }
    }
    t = cic_calloc((size_t)r->n_acts + 1, sizeof *t);
    if (!t) {
        cic_diag_set(d, dir, 0, 0, "out of memory writing the dump");
        return -1;
    }
    for (i = 0; i < r->n_acts; i++) {
        t[i].name = r->acts[i].name;
        t[i].dtype = CIC_DT_F32;
        t[i].ndim = 2;
        t[i].shape[0] = r->acts[i].rows;
        t[i].shape[1] = r->acts[i].cols;
        t[i].data = r->acts[i].x;
    }
    {
        /* the f32 engine the tap ran in (stages.c: the first enabled) */
        const char *eng = r->c->f32_openblas ? CIC_ENGINE_F32_NAME[CIC_MATMUL_OPENBLAS]
                          : r->c->f32_fixed  ? CIC_ENGINE_F32_NAME[CIC_MATMUL_FIXED]
                                             : "none";
        const char *meta[] = {"case", r->c->name, "cicheck_version", CIC_VERSION, "engine", eng,
                              NULL};
        cic_dump_file_name(file, sizeof file, r->c, -3, false);
        snprintf(path, sizeof path, "%s/%s", dir, file);
        rc = cic_safetensors_write(path, t, r->n_acts, meta, d);
    }
    free(t);
    return rc;
}

int cic_pipeline_dump(const cic_pipeline *r, const char *dir, cic_diag *d)
{
    char path[2048], file[2 * CIC_NAME_MAX];
    const char *meta[] = {"case", r->c->name, "cicheck_version", CIC_VERSION, NULL};
    cic_st_tensor *t;
    double *f64 = NULL;
    float *t32 = NULL;
    int i, n = 0, rc = -1;
    if (cic_mkdir_p(dir, d) < 0)
        return -1;
    cic_dump_file_name(file, sizeof file, r->c, -1, false);
    snprintf(path, sizeof path, "%s/%s", dir, file);
    if (cic_dump_model(path, r->orig, meta, false, d) < 0)
        return -1;
    for (i = 0; i < r->c->n_xf; i++) {
        const cic_xform_spec *x = &r->c->xf[i];
        char seed[32], prec[32], calib[32], hbase[32], qbits[16];
        const char *mt[] = {"case", r->c->name, "transform", x->name,
                            "hadamard_base", hbase, "q_file_bits", qbits,
                            "stream", CIC_STREAM_NAME[x->stream],
                            "fast", x->fast ? "true" : "false",
                            "calibration", calib,
                            "kind", CIC_XFORM_NAME[x->kind],
                            "after", x->after >= 0 ? r->c->xf[x->after].name : "none",
                            "precision", CIC_TPREC_NAME[x->prec],
                            "q", CIC_Q_NAME[x->q], "q_seed", seed,
                            "mistake", cic_xform_mistake_name(x),
                            "expect", CIC_VERDICT_NAME[x->expect],
                            "mpfr_prec", prec, NULL};
        snprintf(seed, sizeof seed, "%llu", (unsigned long long)x->q_seed);
        snprintf(prec, sizeof prec, "%d", r->c->mpfr_prec);
        snprintf(hbase, sizeof hbase, "%d", x->hadamard_base);
        snprintf(qbits, sizeof qbits, "%d", x->q == CIC_Q_FILE ? x->q_file_bits : 0);
        snprintf(calib, sizeof calib, "%d", x->calibration);
        if (!r->xm[i])
            continue;
        cic_dump_file_name(file, sizeof file, r->c, i, false);
        snprintf(path, sizeof path, "%s/%s", dir, file);
        if (cic_dump_model(path, r->xm[i], mt, false, d) < 0)
            return -1;
        cic_dump_file_name(file, sizeof file, r->c, i, true);
        snprintf(path, sizeof path, "%s/%s", dir, file);
        if (cic_dump_model(path, r->xm[i], mt, true, d) < 0)
            return -1;
    }
    /* outputs: truth and every MPFR output as f64, f32 outputs as they are.
     * A double on a binary32 tie is moved one ulp to the side the value lies
     * on (cic_mp_get_d_f32): the proof nudged the truth off such ties, and a
     * reader's (float) of the dumped double must give the proven binary32.
     * "truth.f32" is that binary32 (the proven float32, when proven). */
    t = cic_calloc((size_t)r->n_saved + 2, sizeof *t);
    f64 = cic_calloc(cic_mul_size(r->n, (size_t)r->n_saved + 1), sizeof *f64);
    t32 = cic_calloc(r->n ? r->n : 1, sizeof *t32);
    if (!t || !f64 || !t32) {
        cic_diag_set(d, dir, 0, 0, "out of memory writing the dump");
        goto cleanup;
    }
    {
        size_t k, slot = 0;
        for (k = 0; k < r->n; k++)
            f64[k] = cic_mp_get_d_f32(r->truth[k]);
        cic_mpvec_get_f32(t32, (const mpfr_t *)r->truth, r->n);
        for (k = 0; k < 2; k++) {
            t[n].name = k == 0 ? "truth" : "truth.f32";
            t[n].dtype = k == 0 ? CIC_DT_F64 : CIC_DT_F32;
            t[n].ndim = 2;
            t[n].shape[0] = (int64_t)r->rows;
            t[n].shape[1] = (int64_t)r->cols;
            t[n].data = k == 0 ? (const void *)f64 : (const void *)t32;
            n++;
        }
        for (i = 0; i < r->n_saved; i++) {
            const cic_pl_saved *s = &r->saved[i];
            t[n].name = s->name;
            t[n].ndim = 2;
            t[n].shape[0] = (int64_t)r->rows;
            t[n].shape[1] = (int64_t)r->cols;
            if (s->f32) {
                t[n].dtype = CIC_DT_F32;
                t[n].data = s->f32;
            } else {
                double *p = f64 + (++slot) * r->n;
                for (k = 0; k < r->n; k++)
                    p[k] = cic_mp_get_d_f32(s->mp[k]);
                t[n].dtype = CIC_DT_F64;
                t[n].data = p;
            }
            n++;
        }
    }
    cic_dump_file_name(file, sizeof file, r->c, -2, false);
    snprintf(path, sizeof path, "%s/%s", dir, file);
    rc = cic_safetensors_write(path, t, n, meta, d);
    if (rc == 0 && r->c->n_lowp > 0)
        rc = dump_lowp(r, dir, d);
cleanup:
    free(t);
    free(f64);
    free(t32);
    return rc;
}
