/* SPDX-License-Identifier: MIT */
/* load_qfile.c: q = "file:PATH" in [[transforms]] (rotate: R1, rotate-heads:
 * R2), an orthogonal matrix the user brings (SpinQuant's learned rotations
 * are shipped as tensors). PATH is relative to the case file's folder
 * (absolute paths as they are); the file is a safetensors file whose tensor
 * `q_tensor` (or its only tensor) is a square 2-D F64, F32, F16 or BF16
 * matrix. The loader checks the file and the tensor; the size against the
 * model and the orthogonality are cic_xform_check's (src/xform/xform.c),
 * which knows every sweep point. */
#include "case_int.h"

#include "../base/safetensors_read.h"

#include <stdio.h>
#include <string.h>

#define CIC_QFILE_PREFIX "file:"

int _cic_case_relpath(char *out, size_t cap, const char *case_path, const char *p)
{
    const char *slash = strrchr(case_path, '/');
    int n;
    if (p[0] == '/' || !slash)
        n = snprintf(out, cap, "%s", p);
    else
        n = snprintf(out, cap, "%.*s/%s", (int)(slash - case_path), case_path, p);
    return n < 0 || (size_t)n >= cap ? -1 : 0;
}

bool _cic_q_is_file(const char *s, size_t len)
{
    return len >= strlen(CIC_QFILE_PREFIX) && !memcmp(s, CIC_QFILE_PREFIX, strlen(CIC_QFILE_PREFIX));
}

/* The tensor of the file: q_tensor, or the only one. */
static const cic_stfile_tensor *pick(cic_case_ctx *x, const cic_stfile *f, cic_xform_spec *xf,
                                     int l, int col)
{
    const cic_stfile_tensor *t;
    if (xf->q_tensor[0]) {
        t = cic_stfile_find(f, xf->q_tensor);
        if (!t)
            _cic_fail(x, l, col, "'%s' has no tensor '%s' (q_tensor)", xf->q_file, xf->q_tensor);
        return t;
    }
    if (cic_stfile_count(f) != 1) {
        _cic_fail(x, l, col, "'%s' holds %d tensors; name the rotation with q_tensor",
                  xf->q_file, cic_stfile_count(f));
        return NULL;
    }
    t = cic_stfile_tensor_at(f, 0);
    cic_strlcpy(xf->q_tensor, t->name, sizeof xf->q_tensor);
    return t;
}

/* The kinds that take q = "file:PATH" (their descriptors' q kinds). */
static bool takes_file(const cic_xform_desc *k, unsigned q)
{
    return (k->keys & CIC_XKEY_Q) && (k->q_kinds >> q & 1u);
}

int _cic_xform_q_file(cic_case_ctx *x, const cic_case *c, const cic_case_tab *t,
                      cic_xform_spec *xf, const char *s, size_t len, int l, int col)
{
    char path[1024];
    cic_diag d;
    cic_stfile *f;
    const cic_stfile_tensor *q;
    size_t n = strlen(CIC_QFILE_PREFIX);
    int rc = CIC_EINPUT;
    char kinds[256];
    if (!takes_file(cic_xform_desc_of(xf->kind), CIC_Q_FILE))
        return _cic_fail(x, l, col, "q = \"file:...\" is only allowed for kind = %s; this "
                         "transform is \"%s\"",
                         _cic_xform_kinds(kinds, sizeof kinds, takes_file, CIC_Q_FILE,
                                          CIC_KINDS_QUOTED | CIC_KINDS_ALIAS, " and "),
                         CIC_XFORM_NAME[xf->kind]);
    if (len == n || len - n >= sizeof path)
        return _cic_fail(x, l, col, "q = \"file:PATH\" needs a path (a safetensors file, "
                         "relative to the case file's folder)");
    snprintf(path, sizeof path, "%.*s", (int)(len - n), s + n);
    if (_cic_case_relpath(xf->q_file, sizeof xf->q_file, c->path, path) < 0)
        return _cic_fail(x, l, col, "q = \"file:...\": the path is too long");
    xf->q = CIC_Q_FILE;
    if (_cic_get_str(x, t, "q_tensor", xf->q_tensor, sizeof xf->q_tensor, NULL, NULL) != CIC_OK)
        return CIC_EINPUT;
    memset(&d, 0, sizeof d);
    f = cic_stfile_create(xf->q_file, &d);
    if (!f)
        return _cic_fail(x, l, col, "q = \"file:%s\": %s", path, d.msg);
    q = pick(x, f, xf, l, col);
    if (q && (q->ndim != 2 || q->shape[0] != q->shape[1] || !cic_stfile_dtype_bits(q->dtype)))
        _cic_fail(x, l, col, "tensor '%s' of '%s' is %s with %d dimensions; a square 2-D "
                  "F64, F32, F16 or BF16 matrix is needed", q->name, xf->q_file,
                  CIC_STFILE_DTYPE_NAME[q->dtype], q->ndim);
    else if (q) {
        xf->q_file_bits = cic_stfile_dtype_bits(q->dtype);
        rc = CIC_OK;
    }
    cic_stfile_destroy(f);
    return rc;
}
