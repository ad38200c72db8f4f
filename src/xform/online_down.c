/* SPDX-License-Identifier: MIT */
/* online_down.c: the online Hadamard before the MLP's down projection
 * (QuaRot / SpinQuant R4, kind "online-down"). The MLP's hidden activations
 * (the SwiGLU product, the GELU output) cannot be rotated offline: nothing
 * before them is linear in the stream. So the block computes y = x Q online,
 * a fast randomized Hadamard (Q = H diag(s) / sqrt(m) of the MLP width m,
 * an FWHT op in the graph, counted in FLOPs), and the down projection takes
 * the transpose: W' = W Q, since (x Q)(W Q)^T = x W^T. Per layer l, Q from
 * the seed cic_rng_u64(cic_rng_key(seed, "online-down"), l) and the base
 * order (hadamard_base, or the cheapest). Known mistake "skip-online": Q
 * fused into the down projection without the online transform (QuaRot #4:
 * the model collapses), broken. */
#include "xform.h"

#include "../base/mpvec.h"
#include "../base/rng.h"
#include "qmat.h"
#include "xform_util.h"

#include <stdio.h>
#include <string.h>

typedef cic_xf_ctx ctx;

/* Insert op o before op i (SSA order kept: o writes a new tensor that only
 * op i, after it, reads). 0, or -1 when memory runs out. */
static int insert_op(cic_model *m, int i, const cic_op *o)
{
    if (cic_model_op_add(m, o) < 0)
        return -1;
    memmove(&m->ops[i + 1], &m->ops[i], (size_t)(m->n_ops - 1 - i) * sizeof *m->ops);
    m->ops[i] = *o;
    return 0;
}

/* The name of the MLP writer's weight without ".weight", plus suffix. */
static void derived_name(char *buf, size_t cap, const char *w, const char *suffix)
{
    size_t n = strlen(w);
    if (n > 7 && !strcmp(w + n - 7, ".weight"))
        n -= 7;
    snprintf(buf, cap, "%.*s%s", (int)(n < 80 ? n : 80), w, suffix);
}

/* The FWHT op and its signs before MLP writer op i (index in m->ops), the
 * writer then reading its output. */
static int add_online(cic_model *m, int i, const mpfr_t *q, int f, int K)
{
    cic_op o = cic_op_blank(CIC_OP_FWHT, CIC_SITE_MLP, m->ops[i].layer);
    int x = m->ops[i].in[0], s, y, j;
    char n[128];
    derived_name(n, sizeof n, m->t[m->ops[i].w].name, ".online_hadamard.signs");
    s = cic_model_tensor_add(m, n, CIC_T_WEIGHT, 1, f);
    derived_name(n, sizeof n, m->t[m->ops[i].w].name, ".online_hadamard");
    y = s < 0 ? -1 : cic_model_tensor_add(m, n, CIC_T_ACT, m->t[x].rows, f);
    if (y < 0)
        return -1;
    m->t[y].rows_kind = m->t[x].rows_kind;
    for (j = 0; j < f; j++) /* Q[0][j] = s_j / sqrt(f): row 0 of H is +1 */
        m->t[s].f32[j] = mpfr_signbit(q[j]) ? -1.0f : 1.0f;
    o.in[0] = x;
    o.g = s;
    o.hbase = K;
    o.out = y;
    if (insert_op(m, i, &o) < 0)
        return -1;
    m->ops[i + 1].in[0] = y;
    return 0;
}

int _cic_xf_online_down(ctx *c, const cic_xform_spec *x)
{
    cic_model *m = c->m;
    int f = m->cfg.d_mlp, i, rc = -1;
    int K = x->hadamard_base ? x->hadamard_base : cic_hadamard_base_order(f);
    mpfr_t *q = cic_mpvec_create((size_t)f * f, c->p);
    if (!q)
        return -1;
    for (i = 0; i < m->n_ops; i++) {
        cic_op *o = &m->ops[i];
        uint64_t seed;
        if (o->kind != CIC_OP_LINEAR || o->role != CIC_ROLE_WRITER || o->site != CIC_SITE_MLP)
            continue;
        seed = cic_rng_u64(cic_rng_key(x->q_seed, "online-down"), (uint64_t)o->layer);
        if (cic_q_hadamard_k(q, f, x->hadamard_base, seed, c->p) < 0 ||
            _cic_xf_rotate_right(c, o->w, (const mpfr_t *)q, f) < 0)
            goto cleanup;
        if (x->mistake != CIC_MISTAKE_SKIP_ONLINE) {
            if (add_online(m, i, (const mpfr_t *)q, f, K) < 0)
                goto cleanup;
            i++; /* the writer moved one place on */
        }
    }
    rc = 0;
cleanup:
    cic_mpvec_destroy(q, (size_t)f * f);
    return rc;
}
