/* SPDX-License-Identifier: MIT */
/* input_shape.c: the block input of a file as saved ([batch, tokens, d]
 * hidden states, [batch, tokens] ids, ...) and the tokens and samples it
 * implies (input_shape.h). Header only: no tensor data is read here. */
#include "input_shape.h"

#include <limits.h>
#include <stdio.h>
#include <string.h>

/* What each dimension of a form is, for messages ("batch, tokens, d_model"). */
static const char *dims_meaning(const cic_input_shape *s)
{
    if (s->ids)
        return s->ndim == 2 ? "batch, tokens" : "tokens: one sample";
    return s->ndim == 3 ? "batch, tokens, d_model" : "rows, d_model";
}

/* "[2, 64, 512]" into buf. */
static void shape_str(char *buf, size_t cap, const int64_t *shape, int ndim)
{
    size_t k = 0;
    int i;
    buf[0] = '\0';
    for (i = 0; i < ndim && k < cap; i++)
        k += (size_t)snprintf(buf + k, cap - k, "%s%lld", i ? ", " : "[", (long long)shape[i]);
    if (k < cap)
        snprintf(buf + k, cap - k, "%s]", ndim ? "" : "[");
}

int cic_input_shape_of(cic_input_shape *s, const cic_stfile *f, const char *path,
                       cic_diag *d)
{
    const cic_stfile_tensor *t;
    char sh[160];
    int i, lo, hi;
    bool dt_ok;
    memset(s, 0, sizeof *s);
    if ((t = cic_stfile_find(f, "input")) != NULL) {
        s->name = "input";
        lo = 2, hi = 3;
        dt_ok = cic_stfile_dtype_is_float(t->dtype);
    } else if ((t = cic_stfile_find(f, "input_ids")) != NULL) {
        s->name = "input_ids";
        s->ids = true;
        lo = 1, hi = 2;
        dt_ok = t->dtype == CIC_STFILE_I32 || t->dtype == CIC_STFILE_I64;
    } else {
        cic_diag_set(d, path, 0, 0, "no tensor \"input\" (hidden states [batch, tokens, "
                     "d_model]) or \"input_ids\" (token ids [batch, tokens])");
        return -1;
    }
    shape_str(sh, sizeof sh, t->shape, t->ndim);
    if (!dt_ok || t->ndim < lo || t->ndim > hi) {
        cic_diag_set(d, path, 0, 0, "tensor \"%s\" is %s %s; allowed: %s", s->name,
                     CIC_STFILE_DTYPE_NAME[t->dtype], sh,
                     s->ids ? "I32 or I64 [batch, tokens] or [tokens] (one sample)"
                            : "a float (F32, BF16, F16, F64) [batch, tokens, d_model] or "
                              "[rows, d_model]");
        return -1;
    }
    s->ndim = t->ndim;
    cic_strlcpy(s->dtype, CIC_STFILE_DTYPE_NAME[t->dtype], sizeof s->dtype);
    for (i = 0; i < t->ndim; i++) {
        s->shape[i] = t->shape[i];
        if (t->shape[i] < 1 || t->shape[i] > INT_MAX) {
            cic_diag_set(d, path, 0, 0, "tensor \"%s\" is %s (%s): every dimension must be 1 "
                         ".. %d", s->name, sh, dims_meaning(s), INT_MAX);
            return -1;
        }
    }
    s->width = s->ids ? 0 : s->shape[s->ndim - 1];
    s->rows = s->ids ? (int64_t)t->count : (int64_t)(t->count / (uint64_t)s->width);
    if (s->rows > INT_MAX) {
        cic_diag_set(d, path, 0, 0, "tensor \"%s\" is %s (%s): %lld rows, more than %d",
                     s->name, sh, dims_meaning(s), (long long)s->rows, INT_MAX);
        return -1;
    }
    if (s->ndim == 3 || (s->ids && s->ndim == 2)) { /* batch first */
        s->samples = (int)s->shape[0];
        s->tokens = (int)s->shape[1];
    } else if (s->ids) {
        s->samples = 1;
        s->tokens = (int)s->shape[0];
    } /* else a 2-D "input": the tokens or samples given split its rows */
    return 0;
}

int cic_input_shape_read(cic_input_shape *s, const char *path, cic_diag *d)
{
    cic_stfile *f = cic_stfile_create(path, d);
    int rc;
    if (!f)
        return -1;
    rc = cic_input_shape_of(s, f, path, d);
    cic_stfile_destroy(f);
    return rc;
}

/* Rows of a 2-D "input" split by what was given (t, n: 0 when not); the
 * rule with neither given is one sample (input_shape.h). */
static int split_rows(int *tokens, int *samples, const cic_input_shape *s, const char *path,
                      const char *tl, const char *sl, const char *sh, cic_diag *d)
{
    int64_t r = s->rows;
    int t = *tokens, n = *samples;
    if (t && n && (int64_t)t * n != r) {
        cic_diag_set(d, path, 0, 0, "%s %d and %s %d make %lld rows, but the file's \"%s\" is "
                     "%s (rows, d_model): %lld rows", tl, t, sl, n, (long long)t * n, s->name,
                     sh, (long long)r);
        return -1;
    }
    if ((t && r % t) || (n && r % n)) {
        cic_diag_set(d, path, 0, 0, "%s %d, but the file's \"%s\" is %s (rows, d_model): %lld "
                     "rows are not a whole number of %s", t ? tl : sl, t ? t : n, s->name, sh,
                     (long long)r, t ? "samples of that many tokens" : "tokens per sample");
        return -1;
    }
    *tokens = t ? t : n ? (int)(r / n) : (int)r;
    *samples = (int)(r / *tokens);
    return 0;
}

int cic_input_shape_fit(int *tokens, int *samples, const cic_input_shape *s, const char *path,
                        const char *tok_label, const char *smp_label, cic_diag *d)
{
    char sh[160];
    shape_str(sh, sizeof sh, s->shape, s->ndim);
    if (!s->tokens)
        return split_rows(tokens, samples, s, path, tok_label, smp_label, sh, d);
    if (*tokens && *tokens != s->tokens) {
        cic_diag_set(d, path, 0, 0, "%s %d, but the file's \"%s\" is %s (%s): %d tokens",
                     tok_label, *tokens, s->name, sh, dims_meaning(s), s->tokens);
        return -1;
    }
    if (*samples && *samples != s->samples) {
        cic_diag_set(d, path, 0, 0, "%s %d, but the file's \"%s\" is %s (%s): %d sample%s",
                     smp_label, *samples, s->name, sh, dims_meaning(s), s->samples,
                     s->samples == 1 ? "" : "s");
        return -1;
    }
    *tokens = s->tokens;
    *samples = s->samples;
    return 0;
}

int cic_input_shape_check_width(const cic_input_shape *s, const char *path, int d_model,
                                cic_diag *d)
{
    char sh[160];
    if (s->ids || s->width == d_model)
        return 0;
    shape_str(sh, sizeof sh, s->shape, s->ndim);
    cic_diag_set(d, path, 0, 0, "tensor \"%s\" is %s (%s): its last dimension must be the "
                 "model's d_model, %d", s->name, sh, dims_meaning(s), d_model);
    return -1;
}

int cic_input_file_dims(int *tokens, int *samples, const char *path, cic_diag *d)
{
    cic_input_shape s;
    if (cic_input_shape_read(&s, path, d) < 0)
        return -1;
    return cic_input_shape_fit(tokens, samples, &s, path, "--tokens", "--samples", d);
}
