/* SPDX-License-Identifier: MIT */
/* qfile.c: a rotation read from a file (q = "file:PATH", the loader's
 * src/case/load_qfile.c): the tensor as exact doubles rounded once to the
 * transform's precision, its size against the model and its orthogonality
 * against CIC_Q_FILE_ORTH_MAX. */
#include "qmat.h"

#include "../base/mpvec.h"
#include "../base/safetensors_read.h"

#include <stdlib.h>

int cic_q_file(mpfr_t *q, int n, const char *order, const cic_xform_spec *x, mpfr_prec_t prec,
               cic_diag *d)
{
    cic_stfile *f = cic_stfile_create(x->q_file, d);
    const cic_stfile_tensor *t = f ? cic_stfile_find(f, x->q_tensor) : NULL;
    double *v = NULL;
    size_t k, nn = (size_t)n * n;
    int rc = -1;
    (void)prec;
    if (!f)
        return -1;
    if (!t || t->ndim != 2 || t->shape[0] != n || t->shape[1] != n) {
        cic_diag_set(d, x->q_file, 0, 0, "tensor '%s' is not a %d x %d matrix (transform '%s' "
                     "needs the order %s)", x->q_tensor, n, n, x->name, order);
        goto done;
    }
    v = malloc(nn * sizeof *v);
    if (!v || cic_stfile_tensor_read_f64(v, t, 0, nn, d) < 0)
        goto done;
    for (k = 0; k < nn; k++)
        mpfr_set_d(q[k], v[k], MPFR_RNDN); /* exact at 53 bits and more */
    rc = 0;
done:
    free(v);
    cic_stfile_destroy(f);
    return rc;
}

int cic_q_file_check(double *orth, const cic_xform_spec *x, int n, const char *order,
                     cic_diag *d)
{
    mpfr_t *q = cic_mpvec_create((size_t)n * n, 64);
    int rc = -1;
    if (!q) {
        cic_diag_set(d, NULL, 0, 0, "out of memory");
        return -1;
    }
    if (cic_q_file(q, n, order, x, 64, d) == 0) {
        *orth = cic_q_orth_error((const mpfr_t *)q, n, 64);
        rc = 0;
    }
    cic_mpvec_destroy(q, (size_t)n * n);
    return rc;
}
