/* SPDX-License-Identifier: MIT */
/* dump.c: model weights to safetensors for --dump (dump.h): as the f32 and
 * MPFR engines read them, and as each low-precision engine stores them
 * (dequantized values, codes and scales); the dump's file names. */
#include "dump.h"

#include "../base/mpvec.h"
#include "../xform/qmat.h"

#include "../engine/lowp.h"

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

/* The bases of m's fast Hadamards that are not Sylvester's, as tensors
 * "hadamard.base.<w>" [K, K] (+-1 as float32) for the block width w of the
 * ops (the whole row, or the op's group), so a re-run can build H_K (x)
 * Sylvester(w / K) whatever K's construction. Appends to t from *n (room
 * for CIC_DUMP_MAX_BASES more); the values go to vals[] (freed by the
 * caller). 0, or -1 when memory runs out. */
#define CIC_DUMP_MAX_BASES 8
static int hadamard_bases(cic_st_tensor *t, int *n, float **vals, char names[][32],
                          const cic_model *m)
{
    int i, j, nb = 0, seen[CIC_DUMP_MAX_BASES];
    for (i = 0; i < m->n_ops && nb < CIC_DUMP_MAX_BASES; i++) {
        const cic_op *o = &m->ops[i];
        int w = o->group > 0 ? o->group : (o->in[0] >= 0 ? m->t[o->in[0]].cols : 0), K = o->hbase;
        signed char *hk = NULL;
        bool dup = false;
        if (o->kind != CIC_OP_FWHT || K <= 1)
            continue;
        for (j = 0; j < nb; j++)
            dup = dup || seen[j] == w;
        if (dup)
            continue;
        if (cic_hadamard_base_k(&hk, K, w) < 0)
            return -1;
        vals[nb] = malloc((size_t)K * K * sizeof **vals);
        if (!vals[nb]) {
            free(hk);
            return -1;
        }
        for (j = 0; j < K * K; j++)
            vals[nb][j] = hk[j];
        free(hk);
        snprintf(names[nb], sizeof names[nb], "hadamard.base.%d", w);
        t[*n].name = names[nb];
        t[*n].dtype = CIC_DT_F32;
        t[*n].ndim = 2;
        t[*n].shape[0] = t[*n].shape[1] = K;
        t[*n].data = vals[nb];
        (*n)++;
        seen[nb++] = w;
    }
    return 0;
}


int cic_dump_model(const char *path, const cic_model *m, const char *const *meta,
                   bool unrounded, cic_diag *d)
{
    cic_st_tensor *t = cic_calloc((size_t)m->n_t + 1 + CIC_DUMP_MAX_BASES, sizeof *t);
    float *bases[CIC_DUMP_MAX_BASES] = {NULL};
    char base_names[CIC_DUMP_MAX_BASES][32];
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
        if (s->role == CIC_T_ACT || !referenced(m, i))
            continue;
        t[n].name = s->name;
        t[n].dtype = CIC_DT_F32;
        t[n].data = s->f32;
        if (unrounded) {
            if (!(f64[i] = cic_tensor_f64_create(s, false))) {
                cic_diag_set(d, path, 0, 0, "out of memory");
                rc = -1;
                goto cleanup;
            }
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
    if (hadamard_bases(t, &n, bases, base_names, m) < 0) {
        cic_diag_set(d, path, 0, 0, "out of memory");
        rc = -1;
        goto cleanup;
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
    if (cic_block(m->cfg.block)->llama) { /* LLaMA attention: RoPE and GQA */
        KV("rope", "%s", CIC_ROPE_NAME[m->cfg.rope]);
        KV("rope_theta", "%.17g", m->cfg.rope_theta); /* round-trips the double */
        KV("kv_heads", "%d", cic_cfg_kv_heads(&m->cfg));
    }
#undef KV
    for (i = 0; meta && meta[2 * i] && k < 46; i++, k++) {
        kv[2 * k] = meta[2 * i];
        kv[2 * k + 1] = meta[2 * i + 1];
    }
    kv[2 * k] = NULL;
    rc = cic_safetensors_write(path, t, n, kv, d);
cleanup:
    for (i = 0; i < CIC_DUMP_MAX_BASES; i++)
        free(bases[i]);
    for (i = 0; i <= m->n_t; i++)
        free(f64[i]);
    free(f64);
    free(t);
    return rc;
}

/* A low-precision engine's file: the tensors and the buffers they point
 * into (every buffer and extra name is owned, freed by lowp_file_free). */
typedef struct {
    cic_st_tensor *t;
    int n;
    void **own;
    int n_own;
} lowp_file;

static void *lowp_own(lowp_file *f, void *p)
{
    if (p)
        f->own[f->n_own++] = p;
    return p;
}

static void lowp_file_free(lowp_file *f)
{
    int i;
    for (i = 0; f->own && i < f->n_own; i++)
        free(f->own[i]);
    free(f->own);
    free(f->t);
}

/* Append tensor name (NULL: base + suffix, an owned copy) [s0] or [s0, s1]
 * (s1 < 0: 1-D). 0, or -1 when memory runs out. */
static int lowp_put(lowp_file *f, const char *name, const char *base, const char *suffix,
                    cic_dtype dt, int64_t s0, int64_t s1, const void *data)
{
    cic_st_tensor *x = &f->t[f->n];
    if (!name) {
        size_t len = strlen(base) + strlen(suffix) + 1;
        char *nm = lowp_own(f, malloc(len));
        if (!nm)
            return -1;
        snprintf(nm, len, "%s%s", base, suffix);
        name = nm;
    }
    x->name = name;
    x->dtype = dt;
    x->ndim = s1 < 0 ? 1 : 2;
    x->shape[0] = s0;
    x->shape[1] = s1 < 0 ? 0 : s1;
    x->data = data;
    f->n++;
    return 0;
}

/* Tensor id of m as lp stores it: the dequantized values under its name;
 * for a quantized linear's weight under a scale rule also its codes (one
 * int8 per value: the code's 8-bit pattern, so 0..255 reads as -128..127
 * past 127), scales, zero points (asymmetric int rules) and tensor scale
 * (nvfp4). */
static int lowp_tensor(lowp_file *f, const cic_model *m, int id, const cic_lowp_spec *lp,
                       const char *path, cic_diag *d)
{
    const cic_tensor *s = &m->t[id];
    size_t n = (size_t)s->rows * (size_t)s->cols, j;
    bool rule = lp->wq_on && cic_lowp_is_linear_weight(m, id);
    bool asym = rule && lp->wq.scheme == CIC_QS_INT && !lp->wq.symmetric;
    bool nv = rule && lp->wq.scheme == CIC_QS_NVFP4;
    long ng = 0;
    float *deq, *scale = NULL, *tscale = NULL;
    int16_t *codes = NULL;
    int32_t *zero = NULL;
    int8_t *c8 = NULL;
    char msg[160];
    bool vec = s->rows == 1 && s->role == CIC_T_WEIGHT;
    if (rule && (ng = cic_quant_groups(&lp->wq, s->rows, s->cols, msg, sizeof msg)) < 0) {
        cic_diag_set(d, path, 0, 0, "engine '%s': tensor '%s': %s", lp->name, s->name, msg);
        return -1;
    }
    deq = lowp_own(f, malloc((n ? n : 1) * sizeof *deq));
    if (rule) {
        codes = malloc((n ? n : 1) * sizeof *codes); /* scratch: freed below */
        c8 = lowp_own(f, malloc(n ? n : 1));
        scale = lowp_own(f, malloc((size_t)(ng ? ng : 1) * sizeof *scale));
        zero = asym ? lowp_own(f, malloc((size_t)(ng ? ng : 1) * sizeof *zero)) : NULL;
        tscale = nv ? lowp_own(f, malloc(sizeof *tscale)) : NULL;
    }
    if (!deq || (rule && (!codes || !c8 || !scale || (asym && !zero) || (nv && !tscale)))) {
        free(codes);
        cic_diag_set(d, path, 0, 0, "out of memory");
        return -1;
    }
    if (cic_lowp_tensor(deq, codes, scale, zero, tscale, m, id, lp, msg, sizeof msg) < 0) {
        free(codes);
        cic_diag_set(d, path, 0, 0, "engine '%s': tensor '%s': %s", lp->name, s->name, msg);
        return -1;
    }
    for (j = 0; rule && j < n; j++) {
        int c = codes[j];
        CIC_ASSERT(c >= -128 && c <= 255); /* int4/int8 codes, fp8 and fp4 patterns */
        c &= 0xff;
        c8[j] = (int8_t)(c >= 128 ? c - 256 : c);
    }
    free(codes);
    if (lowp_put(f, s->name, NULL, NULL, CIC_DT_F32, vec ? s->cols : s->rows,
                 vec ? -1 : s->cols, deq) < 0 ||
        (rule && (lowp_put(f, NULL, s->name, ".qcodes", CIC_DT_I8, s->rows, s->cols, c8) < 0 ||
                  lowp_put(f, NULL, s->name, ".qscale", CIC_DT_F32, ng, -1, scale) < 0)) ||
        (asym && lowp_put(f, NULL, s->name, ".qzero", CIC_DT_I32, ng, -1, zero) < 0) ||
        (nv && lowp_put(f, NULL, s->name, ".qtensor_scale", CIC_DT_F32, 1, -1, tscale) < 0)) {
        cic_diag_set(d, path, 0, 0, "out of memory");
        return -1;
    }
    return 0;
}

int cic_dump_lowp_model(const char *path, const cic_model *m, const cic_lowp_spec *lp,
                        const char *const *meta, cic_diag *d)
{
    lowp_file f = {0};
    const char **kv = NULL;
    char *lin = NULL;
    size_t len = 1, pos = 0;
    int i, k = 0, n_meta = 0, rc = -1;
    for (i = 0; meta && meta[2 * i] && meta[2 * i + 1]; i++)
        n_meta++;
    for (i = 0; i < m->n_t; i++)
        if (cic_lowp_is_linear_weight(m, i))
            len += strlen(m->t[i].name) + 1;
    /* at most five tensors per tensor, a name for four of them */
    f.t = cic_calloc((size_t)m->n_t + 1, 5 * sizeof *f.t);
    f.own = cic_calloc((size_t)m->n_t + 1, 10 * sizeof *f.own);
    kv = cic_calloc((size_t)n_meta + 8, 2 * sizeof *kv);
    lin = cic_calloc(len, 1);
    if (!f.t || !f.own || !kv || !lin) {
        cic_diag_set(d, path, 0, 0, "out of memory");
        goto cleanup;
    }
    for (i = 0; i < m->n_t; i++) {
        if (m->t[i].role == CIC_T_ACT || !referenced(m, i))
            continue;
        if (lowp_tensor(&f, m, i, lp, path, d) < 0)
            goto cleanup;
        if (cic_lowp_is_linear_weight(m, i))
            pos += (size_t)snprintf(lin + pos, len - pos, "%s%s", pos ? "," : "", m->t[i].name);
    }
    for (i = 0; i < n_meta; i++) {
        kv[k++] = meta[2 * i];
        kv[k++] = meta[2 * i + 1];
    }
    kv[k++] = "engine";
    kv[k++] = lp->name;
    kv[k++] = "weights";
    kv[k++] = lp->weights;
    kv[k++] = "activations";
    kv[k++] = lp->activations;
    kv[k++] = "compute";
    kv[k++] = lp->elem->name;
    kv[k++] = "weights_from";
    kv[k++] = CIC_LOWP_FROM_NAME[lp->from];
    /* which tensors the weights rule or format applies to (the rest is
     * stored in the compute format) */
    kv[k++] = "linear_weights";
    kv[k++] = lin;
    kv[k] = NULL;
    rc = cic_safetensors_write(path, f.t, f.n, kv, d);
cleanup:
    lowp_file_free(&f);
    free(kv);
    free(lin);
    return rc;
}

void cic_dump_file_name(char *buf, size_t cap, const cic_case *c, int i, bool f64)
{
    const char *stem = i == -1 ? "original" : i == -2 ? "outputs" : i == -3 ? "activations"
                                                                            : c->xf[i].name;
    snprintf(buf, cap, "%s%s.safetensors", stem, f64 ? ".f64" : "");
}

void cic_dump_lowp_file_name(char *buf, size_t cap, const cic_case *c, int i, int e)
{
    snprintf(buf, cap, "%s.%s.safetensors", i < 0 ? "none" : c->xf[i].name, c->lowp[e].name);
}

/* File k of c's dump (k < dump_files(c)) into buf, who writes it into who
 * and the case file line that names it (0: none): the original, the
 * outputs, the activations (with [[engines.lowp]]), each transform's two,
 * then each model's (none, the transforms) file per low-precision engine. */
static int dump_files(const cic_case *c)
{
    return 2 + (c->n_lowp > 0) + 2 * c->n_xf + (c->n_xf + 1) * c->n_lowp;
}

static int dump_file(char *buf, size_t cap, char *who, size_t wcap, const cic_case *c, int k)
{
    int fixed = 2 + (c->n_lowp > 0), i, e;
    if (k < fixed) {
        cic_dump_file_name(buf, cap, c, -1 - k, false);
        snprintf(who, wcap, "the %s file", k == 0 ? "original model's" : k == 1 ? "outputs"
                                                                                : "activations");
        return 0;
    }
    k -= fixed;
    if (k < 2 * c->n_xf) {
        i = k / 2;
        cic_dump_file_name(buf, cap, c, i, k % 2);
        snprintf(who, wcap, "transform '%s'%s", c->xf[i].name, k % 2 ? " (float64 copy)" : "");
        return c->xf[i].line;
    }
    k -= 2 * c->n_xf;
    i = k / c->n_lowp - 1;
    e = k % c->n_lowp;
    cic_dump_lowp_file_name(buf, cap, c, i, e);
    snprintf(who, wcap, "engine '%s' on %s%s%s", c->lowp[e].name, i < 0 ? "" : "transform '",
             i < 0 ? "the original model" : c->xf[i].name, i < 0 ? "" : "'");
    return c->lowp[e].line;
}

int cic_dump_names_check(const cic_case *c, cic_diag *d)
{
    char a[2 * CIC_NAME_MAX + 32], b[sizeof a], wa[3 * CIC_NAME_MAX], wb[sizeof wa];
    int n = dump_files(c), i, j;
    for (i = 0; i < n; i++) {
        int la = dump_file(a, sizeof a, wa, sizeof wa, c, i);
        for (j = i + 1; j < n; j++) {
            int lb = dump_file(b, sizeof b, wb, sizeof wb, c, j);
            if (strcmp(a, b) != 0)
                continue;
            cic_diag_set(d, c->path, la ? la : lb, 1,
                         "--dump: %s and %s would both write %s; rename one of them", wa, wb,
                         a);
            return CIC_EINPUT;
        }
    }
    return CIC_OK;
}
