/* SPDX-License-Identifier: MIT */
/* block.c: what the case loader knows about each block kind (preln,
 * rmsnorm, dit), gathered in one place: the [model] keys only some blocks
 * have, the defaults that differ per block, the transform kinds a block
 * allows, and the weights a block holds for the memory estimate. Every
 * other file of src/case is the same for every block kind, so a block
 * descriptor (one per kind, registered in one table) can take over each
 * function here without the rest of the loader changing. */
#include "case_int.h"

/* Block-kind dependent: whether the block takes a conditioning input c
 * (its width d_cond; the keys d_cond and final_layer and the d_cond sweep
 * axis belong to such blocks). dit only. */
bool _cic_block_has_cond(enum cic_block_kind b)
{
    return b == CIC_BLOCK_DIT;
}

/* Block-kind dependent: the defaults of [model] that differ per block,
 * into m (m->block loaded, or preln when it did not load): eps and the
 * activation. */
void _cic_block_defaults(cic_model_cfg *m)
{
    m->eps = m->block == CIC_BLOCK_DIT ? 1e-6 : 1e-5;
    /* rmsnorm: the SwiGLU gate; dit: the reference code's tanh GELU. */
    m->act = m->block == CIC_BLOCK_RMSNORM ? CIC_ACT_SILU
             : m->block == CIC_BLOCK_DIT   ? CIC_ACT_GELU_TANH
                                           : CIC_ACT_GELU;
}

/* Block-kind dependent: the [model] keys only some blocks have (t is
 * [model]): d_cond and final_layer, refused on a block without a
 * conditioning input (when the block loaded) and read with their defaults
 * either way (d_cond = d_model, which must be loaded; final_layer true). */
void _cic_block_keys(cic_case_ctx *x, cic_case *c, const cic_case_tab *t)
{
    cic_model_cfg *m = &c->model;
    bool have;
    int l, col;

    if (x->block_ok && !_cic_block_has_cond(m->block)) {
        static const char *const dit_only[] = {"d_cond", "final_layer"};
        size_t i;
        for (i = 0; i < CIC_CASE_LEN(dit_only); i++)
            if (_cic_find(t, dit_only[i], &l, &col))
                _cic_fail(x, l, col,
                          "'%s' is only allowed for block = \"dit\" "
                          "(this model is \"%s\")",
                          dit_only[i], CIC_BLOCK_NAME[m->block]);
    }
    m->d_cond = m->d_model;
    _cic_get_intf(x, t, "d_cond", 1, CIC_CASE_MAX_DIM, &m->d_cond, &have, NULL);
    c->sweep.d_cond_default = !have;
    m->final_layer = true;
    _cic_get_bool(x, t, "final_layer", &m->final_layer);
}

/* Block-kind dependent: the transform kinds the block allows, for the
 * message on a [[transforms]] entry without 'kind'. */
const char *_cic_block_kind_hint(enum cic_block_kind b)
{
    return b == CIC_BLOCK_DIT ? " (on a dit block an adaLN strategy: "
                                "static-fold, online-unrotate, "
                                "per-sample-fold or branch-rotate)"
                              : " (fuse-layernorm, fold-rmsnorm-gamma or "
                                "rotate)";
}

/* Block-kind dependent: a transform kind against the block it is applied
 * to (the block loaded); the position is that of 'kind'. */
int _cic_check_kind_block(cic_case_ctx *x, const cic_case *c,
                          const cic_xform_spec *xf, int l, int col)
{
    bool adaln = _cic_is_adaln(xf->kind);
    if (adaln && c->model.block != CIC_BLOCK_DIT)
        return _cic_fail(x, l, col,
                         "kind = \"%s\" is an adaLN strategy and needs "
                         "block = \"dit\" (this model is \"%s\"); "
                         "allowed here: %s",
                         CIC_XFORM_NAME[xf->kind],
                         CIC_BLOCK_NAME[c->model.block],
                         c->model.block == CIC_BLOCK_PRELN
                             ? "fuse-layernorm, rotate"
                             : "fold-rmsnorm-gamma, rotate");
    if (!adaln && c->model.block == CIC_BLOCK_DIT)
        return _cic_fail(x, l, col,
                         "kind = \"%s\" does not apply to block = \"dit\" "
                         "(adaLN modulation does not commute with a "
                         "static rotation or fold); on a dit block use "
                         "an adaLN strategy: static-fold, "
                         "online-unrotate, per-sample-fold, branch-rotate",
                         CIC_XFORM_NAME[xf->kind]);
    if (xf->kind == CIC_XFORM_FUSE_LAYERNORM &&
        c->model.block != CIC_BLOCK_PRELN)
        return _cic_fail(x, l, col,
                         "kind = \"fuse-layernorm\" needs block = \"preln\" "
                         "(this model is \"%s\")%s",
                         CIC_BLOCK_NAME[c->model.block],
                         c->model.block == CIC_BLOCK_RMSNORM
                             ? "; RMSNorm models use fold-rmsnorm-gamma"
                             : "");
    if (xf->kind == CIC_XFORM_FOLD_RMSNORM_GAMMA &&
        c->model.block != CIC_BLOCK_RMSNORM)
        return _cic_fail(x, l, col,
                         "kind = \"fold-rmsnorm-gamma\" needs block = "
                         "\"rmsnorm\" (this model is \"%s\")%s",
                         CIC_BLOCK_NAME[c->model.block],
                         c->model.block == CIC_BLOCK_PRELN
                             ? "; LayerNorm models use fuse-layernorm"
                             : "");
    return CIC_OK;
}

/* Block-kind dependent: weight elements per layer and for the readout of
 * m, for the memory estimate (DESIGN.md section 1), saturating:
 * preln: qkv + proj 4d^2, fc1 + fc2 2dm, biases and two LN (g, b) ~9d + m;
 * rmsnorm: q, k, v, o 4d^2, gate/up/down 3dm, two gammas 2d;
 * dit: as preln without LN parameters, plus adaLN 6 d d_c + 6d. */
void _cic_block_weights(const cic_model_cfg *m, uint64_t *layer,
                        uint64_t *readout)
{
    uint64_t d = _cic_u(m->d_model), f = _cic_u(m->d_mlp);
    uint64_t dout = _cic_u(m->d_out), dc = _cic_u(m->d_cond);
    uint64_t dd = _cic_sat_mul(d, d), df = _cic_sat_mul(d, f);

    switch (m->block) {
    case CIC_BLOCK_RMSNORM:
        *layer = _cic_sat_add(_cic_sat_add(_cic_sat_mul(4, dd),
                                           _cic_sat_mul(3, df)),
                              _cic_sat_mul(2, d));
        *readout = _cic_sat_add(d, _cic_sat_mul(d, dout));
        break;
    case CIC_BLOCK_DIT:
        *layer = _cic_sat_add(_cic_sat_add(_cic_sat_mul(4, dd),
                                           _cic_sat_mul(2, df)),
                              _cic_sat_add(_cic_sat_mul(11, d), f));
        *layer = _cic_sat_add(*layer, _cic_sat_mul(6, _cic_sat_mul(d, dc)));
        /* final layer: adaLN 2 d d_c + 2d, linear d d_out + d_out */
        *readout = _cic_sat_add(_cic_sat_mul(2, _cic_sat_mul(d, dc)),
                                _cic_sat_add(_cic_sat_mul(2, d),
                                             _cic_sat_mul(d + 1, dout)));
        break;
    default:
        *layer = _cic_sat_add(_cic_sat_add(_cic_sat_mul(4, dd),
                                           _cic_sat_mul(2, df)),
                              _cic_sat_add(_cic_sat_mul(9, d), f));
        *readout = _cic_sat_add(_cic_sat_mul(2, d), _cic_sat_mul(d + 1, dout));
        break;
    }
}
