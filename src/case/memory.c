/* SPDX-License-Identifier: MIT */
/* memory.c: the memory a run of a case needs, estimated before anything is
 * allocated so a case too large is refused with a message rather than
 * killed: weights at mpfr_prec for the original, each transformed model held
 * at once and a scratch set, and the activations of the widest layer. Sizes
 * come from fuzzed files, so every product saturates instead of wrapping. */
#include "case_int.h"

/* Transformed models a run holds at once (without --dump): the one being
 * run and every earlier one that a later transform is applied after. */
int _cic_xforms_live(const cic_case *c)
{
    int i, j, n = c->n_xf > 0 ? 1 : 0;
    for (i = 0; i < c->n_xf && i < CIC_MAX_XFORMS; i++)
        for (j = i + 1; j < c->n_xf && j < CIC_MAX_XFORMS; j++)
            if (c->xf[j].after == i) {
                n++;
                break;
            }
    return n;
}

/* Weights (element count) and activation bytes behind the estimate. */
void _cic_memory_parts_m(const cic_model_cfg *m, int n_xf,
                         int mpfr_prec, uint64_t *weights,
                         uint64_t *wbytes, uint64_t *abytes)
{
    uint64_t d = _cic_u(m->d_model), f = _cic_u(m->d_mlp);
    uint64_t L = _cic_u(m->layers), dout = _cic_u(m->d_out);
    uint64_t N = _cic_u(m->tokens);
    uint64_t R = _cic_sat_mul(N, _cic_u(m->samples));
    uint64_t layer, readout, W, prec = _cic_u(mpfr_prec), copies, elem;
    uint64_t width;

    /* Weight elements per layer and for the readout (block.c). */
    _cic_block_weights(m, &layer, &readout);
    W = _cic_sat_add(_cic_sat_mul(L, layer), readout);

    /* Bytes per weight: f32 copy + rounded copy (8), and an MPFR value at
     * mpfr_prec plus its prec + 64 recheck (16 bytes of header + 2 * prec / 8
     * bytes of limbs). One set for the original, one per transformed model
     * held at once (n_xf here), one scratch: n_xf + 2 sets. */
    copies = _cic_u(n_xf) + 2;
    *weights = W;
    *wbytes = _cic_sat_mul(_cic_sat_mul(copies, W),
                           16 + 2 * ((prec > 4096 ? 4096 : prec) / 8) + 8);

    /* Activations: R rows, each as wide as the widest intermediate (qkv 3d,
     * the MLP m, one attention score row N, the head d_out), about 8 live
     * buffers of MPFR elements of ~48 bytes at 128 bits (32-byte struct +
     * limbs). */
    width = 3 * d;
    if (f > width)
        width = f;
    if (N > width)
        width = N;
    if (dout > width)
        width = dout;
    elem = 32 + ((prec > 4096 ? 4096 : prec) + 63) / 64 * 8;
    *abytes = _cic_sat_mul(_cic_sat_mul(R, width), _cic_sat_mul(8, elem));
}

static void _cic_memory_parts(const cic_case *c, uint64_t *weights,
                              uint64_t *wbytes, uint64_t *abytes)
{
    _cic_memory_parts_m(&c->model, _cic_xforms_live(c), c->mpfr_prec, weights, wbytes,
                        abytes);
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
    int n_xf = _cic_xforms_live(c);
    _cic_memory_parts_m(&c->model, n_xf, c->mpfr_prec, &w, &wb, &ab);
    snprintf(buf, cap,
             "weights %.1f GiB (%llu weights in %d copies: the original, %d transformed "
             "models held at once and a scratch set, at mpfr_prec %d), activations %.1f GiB "
             "(%d tokens x %d samples)",
             (double)wb / (1u << 30), (unsigned long long)w, n_xf + 2, n_xf, c->mpfr_prec,
             (double)ab / (1u << 30), c->model.tokens, c->model.samples);
}
