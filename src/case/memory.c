/* SPDX-License-Identifier: MIT */
/* memory.c: the memory a run of a case needs, estimated before anything is
 * allocated so a case too large is refused with a message rather than
 * killed: weights at mpfr_prec for the original, each transformed model held
 * at once and a scratch set, the activations of the widest layer and the
 * per-block truth. With the f64 verdict engine the MPFR truth and the
 * transforms' runs do not overlap, and the larger of the two stages counts
 * (cases/dit-xl2-full.toml: the transforms'). Sizes come from fuzzed files,
 * so every product saturates instead of wrapping. */
#include "case_int.h"

#include "../base/mpslice.h"

/* How transform i holds its weights, as its kind's descriptor says. */
static cic_xform_mem xform_mem(const cic_case *c, int i)
{
    const cic_xform_desc *k = cic_xform_desc_of(c->xf[i].kind);
    cic_xform_mem mm = {CIC_XLAZY_NONE, false};
    if (k->memory)
        k->memory(&mm, &c->xf[i]);
    return mm;
}

/* Whether transform i keeps its weights as recipes over float32 values
 * (model/lazy.h): a kind that makes recipes of the values (a fold of
 * RMSNorm gains) applied to the original, or one that rotates recipes (a
 * Hadamard rotation not through dgemm) applied to the original or to such
 * a fold. Its model then holds 8 bytes a weight (the float32 values it
 * started from, and the rounded ones) instead of MPFR values. */
static bool xform_lazy(const cic_case *c, int i)
{
    const cic_xform_spec *x = &c->xf[i];
    enum cic_xform_lazy lz = xform_mem(c, i).lazy;
    if (lz == CIC_XLAZY_NONE)
        return false;
    if (x->after < 0)
        return true;
    return lz == CIC_XLAZY_ROTATED && x->after < i &&
           xform_mem(c, x->after).lazy == CIC_XLAZY_VALUES && xform_lazy(c, x->after);
}

/* How transform i holds its weights: recipes (8 bytes a weight), doubles
 * (products through dgemm: 12 bytes, float32 and double) or MPFR values. */
enum xf_store { XF_LAZY, XF_DOUBLE, XF_EAGER };

static enum xf_store xform_store(const cic_case *c, int i)
{
    const cic_xform_spec *x = &c->xf[i];
    enum xf_store base = x->after >= 0 && x->after < i ? xform_store(c, x->after) : XF_LAZY;
    /* the kinds whose products through dgemm are kept as doubles (every
     * adaLN strategy too: xform/adaln.c, adaln_fold.c) */
    bool blas_kind = xform_mem(c, i).doubles;
    if (xform_lazy(c, i))
        return XF_LAZY;
    if (x->prec == CIC_TPREC_F64_BLAS && blas_kind && base != XF_EAGER)
        return XF_DOUBLE;
    return XF_EAGER;
}

/* Whether transform j's model (the original's for j = -1) is held after
 * transform i runs: a later transform is applied after it. */
static bool held_after(const cic_case *c, int j, int i, int n_xf)
{
    int k;
    for (k = i + 1; k < n_xf; k++)
        if (c->xf[k].after == j)
            return true;
    return false;
}

/* The transformed models a run holds at once (without --dump), at the
 * moment that holds the most: while transform i runs, its own and every
 * earlier one a later transform is applied after (the one it is applied
 * after is taken, its weights becoming the new model's, when nothing
 * later needs it; the original too). How many of them hold doubles (*dbl)
 * and MPFR values (*eager), and whether the original is held then
 * (*orig: a later transform is applied to it). */
static int xforms_live(const cic_case *c, int *eager, int *dbl, bool *orig)
{
    int i, j, best = 0, n_xf = c->n_xf < CIC_MAX_XFORMS ? c->n_xf : CIC_MAX_XFORMS;
    uint64_t best_w = 0;
    *eager = *dbl = 0;
    *orig = true;
    for (i = 0; i < n_xf; i++) {
        int n = 0, ne = 0, nd = 0;
        bool og = held_after(c, -1, i, n_xf);
        uint64_t w;
        for (j = 0; j <= i; j++) {
            if (j != i && !held_after(c, j, i, n_xf))
                continue;
            n++;
            ne += xform_store(c, j) == XF_EAGER;
            nd += xform_store(c, j) == XF_DOUBLE;
        }
        w = (uint64_t)(n - ne - nd) * 8 + (uint64_t)nd * 12 + (uint64_t)ne * 64 + (og ? 4 : 0);
        if (w >= best_w) {
            best_w = w;
            best = n;
            *eager = ne;
            *dbl = nd;
            *orig = og;
        }
    }
    return best;
}

int _cic_xforms_live(const cic_case *c)
{
    int eager, dbl;
    bool orig;
    return xforms_live(c, &eager, &dbl, &orig);
}

/* The largest order of a Q held as doubles (products through dgemm), 0
 * none: d_model for a rotation, the MLP width for the online-down one. */
static int double_q_order(const cic_case *c)
{
    int i, q = 0;
    for (i = 0; i < c->n_xf && i < CIC_MAX_XFORMS; i++) {
        /* a kind with a Q of the MLP width (online-down; branch-rotate
         * rotates the MLP's inside too) */
        int o = cic_xform_desc_of(c->xf[i].kind)->q_widths & CIC_XW_MLP ? c->model.d_mlp
                                                                        : c->model.d_model;
        if (xform_store(c, i) == XF_DOUBLE && o > q)
            q = o;
    }
    return q;
}

/* The MPFR runs' dgemm slices and products (base/mpslice.h), kept across
 * a run's linear ops and attentions: what the largest of them needs on the
 * run's R rows, within the budget. Shapes: qkv (3 d outputs), the MLP's
 * two linears and the head; attention's Q K^T and P V (both operands at
 * prec; at most N query rows a call). */
static uint64_t slice_scratch(const cic_model_cfg *m, uint64_t R, int prec)
{
    uint64_t d = _cic_u(m->d_model), f = _cic_u(m->d_mlp), dout = _cic_u(m->d_out), most = 0;
    uint64_t N = _cic_u(m->tokens), dh = m->heads > 0 ? d / _cic_u(m->heads) : d;
    const uint64_t shape[4][2] = {{_cic_sat_mul(3, d), d}, {f, d}, {d, f}, {dout, d}};
    uint64_t s;
    int i;
    for (i = 0; i < 4; i++) {
        s = cic_mp_slice_scratch(R, shape[i][0], shape[i][1], prec);
        most = s > most ? s : most;
    }
    s = cic_mp_slice_scratch_mp(N, N, dh, prec);
    most = s > most ? s : most;
    s = cic_mp_slice_scratch_mp(N, dh, N, prec);
    return s > most ? s : most;
}

/* Weights (element count) and activation bytes behind the estimate: the
 * original's float32 values, n_xf transformed models of which n_eager hold
 * MPFR values at mpfr_prec, the scratch of the MPFR runs (the largest
 * weight packed, or beside eager values the new values a transform makes,
 * and the linear ops' dgemm slices), and the activations. */
void _cic_memory_parts_m(const cic_model_cfg *m, const cic_mem_models *mm, int mpfr_prec,
                         uint64_t *weights, uint64_t *wbytes, uint64_t *abytes)
{
    int n_xf = mm->n_xf, n_eager = mm->n_eager, n_double = mm->n_double;
    uint64_t d = _cic_u(m->d_model), f = _cic_u(m->d_mlp);
    uint64_t L = _cic_u(m->layers), dout = _cic_u(m->d_out);
    uint64_t N = _cic_u(m->tokens);
    uint64_t R = _cic_sat_mul(N, _cic_u(m->samples));
    uint64_t layer, readout, W, prec = _cic_u(mpfr_prec), elem, hp, big, scratch;
    uint64_t width, xscratch, models, mp_acts, real_acts, depth, orig;

    /* Weight elements per layer and for the readout (block.c). */
    _cic_block_weights(m, &layer, &readout);
    W = _cic_sat_add(_cic_sat_mul(L, layer), readout);
    *weights = W;

    /* Bytes of a weight held as MPFR at mpfr_prec (16 bytes of header and
     * 2 * prec / 8 of limbs: room for a recheck at prec + 64), and of the
     * largest weight (MLP, qkv or head) packed at prec: 8 bytes a limb and
     * 8 of exponent. */
    hp = 16 + 2 * ((prec > 4096 ? 4096 : prec) / 8);
    big = _cic_sat_mul(d, f > 3 * d ? f : 3 * d);
    if (_cic_sat_mul(d, dout) > big)
        big = _cic_sat_mul(d, dout);
    scratch = mm->any_eager ? _cic_sat_mul(W, hp)
                          : _cic_sat_mul(big, 8 * (((prec > 4096 ? 4096 : prec) + 63) / 64) + 8);
    /* the truth's ball run: |W| of the largest weight as float for its
     * radii (mp_ball.c) */
    scratch = _cic_sat_add(scratch, _cic_sat_mul(big, 4));
    scratch = _cic_sat_add(scratch, slice_scratch(m, R, mpfr_prec));
    /* Other steps need their own scratch, not at the same time as the MPFR
     * runs': a product through dgemm (the weight in and out and Q as
     * doubles), an f64 engine run (the doubles of the weight it reads:
     * engine_f64.c makes one weight at a time). */
    xscratch = 0;
    if (n_double > 0) {
        uint64_t q2 = _cic_sat_mul(_cic_u(mm->q_order), _cic_u(mm->q_order));
        xscratch = _cic_sat_add(_cic_sat_mul(big, 16), _cic_sat_mul(q2, 8));
    }
    if (mm->f64_run && _cic_sat_mul(big, 8) > xscratch)
        xscratch = _cic_sat_mul(big, 8);
    /* the transformed models held at once, each with its stream's rotation
     * as doubles (d x d) */
    models = _cic_sat_add(
        _cic_sat_add(_cic_sat_mul(_cic_sat_mul(_cic_u(n_xf - n_eager - n_double), W), 8),
                     _cic_sat_mul(_cic_sat_mul(_cic_u(n_double), W), 12)),
        _cic_sat_add(_cic_sat_mul(_cic_sat_mul(_cic_u(n_eager), W), hp + 8),
                     _cic_sat_mul(_cic_u(n_xf), _cic_sat_mul(_cic_sat_mul(d, d), 8))));

    /* Activations: R rows, each as wide as the widest intermediate (qkv 3d,
     * the MLP m, one attention score row N, the head d_out), about 8 live
     * buffers of MPFR elements of ~48 bytes at 128 bits (32-byte struct +
     * limbs), and the ball run's radius (a double) beside each. */
    width = 3 * d;
    if (f > width)
        width = f;
    if (N > width)
        width = N;
    if (dout > width)
        width = dout;
    elem = 32 + ((prec > 4096 ? 4096 : prec) + 63) / 64 * 8 + 8;
    mp_acts = _cic_sat_mul(_cic_sat_mul(R, width), _cic_sat_mul(8, elem));
    /* attention's passes (engine_mpfr_attn.c): scores and probabilities,
     * at most 2 R d values, their outputs at most R d more, and views of a
     * head's queries and keys or values (mpfr_t copies, N d at most) */
    mp_acts = _cic_sat_add(mp_acts, _cic_sat_add(_cic_sat_mul(_cic_sat_mul(R, 3 * d), elem),
                                                 _cic_sat_mul(_cic_sat_mul(N, d), 64)));
    /* the truth of every block's output, kept as doubles with a radius per
     * row from the truth to the end (pipeline/depth.c) */
    depth = _cic_sat_mul(_cic_sat_mul(_cic_sat_add(L, 1), R), _cic_sat_mul(_cic_sat_add(d, 1), 8));
    /* what the allocator keeps beside the blocks in use while models are
     * made tensor by tensor: measured, a few percent of the weights' bytes */
    if (n_xf > 0)
        models = _cic_sat_add(models, _cic_sat_add(_cic_sat_mul(W, 4), models) / 32);
    /* the original's float32 weights beside the models (without
     * transforms, or while a later transform is applied to it; each
     * transformed model holds at least as many bytes, so the truth's stage
     * with the original alone is never the larger) */
    orig = n_xf == 0 || mm->orig_held ? _cic_sat_mul(W, 4) : 0;
    if (!mm->f64_run) { /* the MPFR verdict runs read the transformed models */
        *wbytes = _cic_sat_add(_cic_sat_add(orig, scratch > xscratch ? scratch : xscratch),
                               models);
        *abytes = _cic_sat_add(mp_acts, depth);
        return;
    }
    /* With the f64 verdict engine MPFR runs only in the truth, before any
     * transformed model is made; the transforms' runs are in double and
     * float (the engines' arenas: about 8 live buffers of doubles of the
     * widest intermediate). The larger of the two stages counts. */
    real_acts = _cic_sat_mul(_cic_sat_mul(R, width), 64);
    if (_cic_sat_add(_cic_sat_add(_cic_sat_add(orig, models), xscratch), real_acts) >=
        _cic_sat_add(_cic_sat_add(_cic_sat_mul(W, 4), scratch), mp_acts)) {
        *wbytes = _cic_sat_add(_cic_sat_add(orig, xscratch), models);
        *abytes = _cic_sat_add(real_acts, depth);
    } else {
        *wbytes = _cic_sat_add(_cic_sat_mul(W, 4), scratch);
        *abytes = _cic_sat_add(mp_acts, depth);
    }
}

static void mem_models(const cic_case *c, cic_mem_models *mm)
{
    int i;
    mm->n_xf = xforms_live(c, &mm->n_eager, &mm->n_double, &mm->orig_held);
    mm->q_order = double_q_order(c);
    for (i = 0, mm->any_eager = false; i < c->n_xf && i < CIC_MAX_XFORMS; i++)
        mm->any_eager = mm->any_eager || xform_store(c, i) == XF_EAGER;
    mm->f64_run = c->verdict_engine != CIC_VERDICT_ENGINE_MPFR;
}

static void _cic_memory_parts(const cic_case *c, uint64_t *weights, uint64_t *wbytes,
                              uint64_t *abytes)
{
    cic_mem_models mm;
    mem_models(c, &mm);
    _cic_memory_parts_m(&c->model, &mm, c->mpfr_prec, weights, wbytes, abytes);
}

uint64_t cic_case_memory_estimate(const cic_case *c)
{
    uint64_t w, wb, ab;
    if (!c)
        return 0;
    _cic_memory_parts(c, &w, &wb, &ab);
    return _cic_sat_add(wb, ab);
}

uint64_t cic_case_weight_count(const cic_case *c)
{
    uint64_t w, wb, ab;
    if (!c)
        return 0;
    _cic_memory_parts(c, &w, &wb, &ab);
    return w;
}


void cic_case_memory_explain(char *buf, size_t cap, const cic_case *c)
{
    uint64_t w, wb, ab;
    cic_mem_models mm;
    mem_models(c, &mm);
    _cic_memory_parts_m(&c->model, &mm, c->mpfr_prec, &w, &wb, &ab);
    snprintf(buf, cap,
             "weights %.1f GiB (%llu weights: float32 for %s%d transformed "
             "models held at once, %d of them also as MPFR numbers at mpfr_prec %d and %d as "
             "doubles, the rest made when read; and the scratch of the runs and products), "
             "activations %.1f GiB (%d tokens x %d samples)",
             (double)wb / (1u << 30), (unsigned long long)w,
             mm.n_xf == 0 || mm.orig_held ? "the original and " : "", mm.n_xf, mm.n_eager,
             c->mpfr_prec, mm.n_double, (double)ab / (1u << 30), c->model.tokens,
             c->model.samples);
}
