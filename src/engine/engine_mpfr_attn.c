/* SPDX-License-Identifier: MIT */
/* engine_mpfr_attn.c: the MPFR engine's attention, head by head over the
 * threads: scores, softmax and P V, each dot product correctly rounded
 * (packed where the values allow), the ball run's hooks per query row
 * (mp_ball.h). Kernel of the table in engine_mpfr.c. */
#include "engine_mpfr_int.h"

#include <string.h>

typedef struct {
    const mpfr_t *q, *k, *v;
    mpfr_t *y;
    int N, d, H, dh, lq, lk, lv, qc, kc, vc;
    int grp;  /* query heads per key/value head */
    bool causal;
    mpfr_srcptr scale;
    const cic_ball *ball;
} attn_job;

/* A head's keys (N rows of dh) and values transposed (dh rows of N),
 * packed once per job, and the packed query row and probabilities: the
 * dot products go through cic_mp_dot_rows_packed, four at a time, each
 * key, value and query limb read from contiguous memory. A dot product the
 * packed path declines takes cic_mp_dot on the mpfr_t values, as the head
 * did before; both are correctly rounded, so the bits are the same. */
typedef struct {
    cic_mp_pack k, vt, q, p; /* k: N dh entries, vt: dh N, q: dh, p: N */
    cic_mp_pack *krow, *vrow;
    bool ok;
} attn_packs;

static void attn_packs_clear(attn_packs *P)
{
    cic_mp_pack_clear(&P->k);
    cic_mp_pack_clear(&P->vt);
    cic_mp_pack_clear(&P->q);
    cic_mp_pack_clear(&P->p);
    free(P->krow);
    free(P->vrow);
    memset(P, 0, sizeof *P);
}

static bool attn_packs_init(attn_packs *P, int N, int dh, mpfr_prec_t prec)
{
    memset(P, 0, sizeof *P);
    P->ok = cic_mp_pack_alloc(&P->k, (size_t)N * dh, prec) == 0 &&
            cic_mp_pack_alloc(&P->vt, (size_t)dh * N, prec) == 0 &&
            cic_mp_pack_alloc(&P->q, (size_t)dh, prec) == 0 &&
            cic_mp_pack_alloc(&P->p, (size_t)N, prec) == 0 &&
            (P->krow = cic_mp_pack_row_views(&P->k, (size_t)N, (size_t)dh)) != NULL;
    if (!P->ok)
        attn_packs_clear(P);
    return P->ok;
}

/* Entries of a pack from strided mpfr_t values; false (the packed path is
 * not for them) when one is NaN or Inf or not at the pack's precision. */
static bool pack_strided(cic_mp_pack *pk, size_t off, const mpfr_t *x, size_t inc, size_t n)
{
    size_t i;
    for (i = 0; i < n; i++) {
        if (!mpfr_number_p(x[i * inc]) || mpfr_get_prec(x[i * inc]) != pk->prec)
            return false;
        cic_mp_pack_set(pk, off + i, x[i * inc]);
    }
    return true;
}

/* The head's keys and values into P (row views and spans made); false when
 * a value is not finite: the head then takes cic_mp_dot throughout. */
static bool attn_pack_head(attn_packs *P, const attn_job *A, const mpfr_t *ks, const mpfr_t *vs)
{
    int N = A->N, dh = A->dh, j, c;
    cic_mp_pack view;
    free(P->vrow);
    P->vrow = NULL;
    for (j = 0; j < N; j++)
        if (!pack_strided(&P->k, (size_t)j * dh, ks + (size_t)j * A->lk, 1, (size_t)dh))
            return false;
    for (c = 0; c < dh; c++)
        if (!pack_strided(&P->vt, (size_t)c * N, vs + c, (size_t)A->lv, (size_t)N))
            return false;
    cic_mp_pack_finish(&P->k);
    cic_mp_pack_finish(&P->vt);
    for (j = 0; j < N; j++) { /* the row views' spans, the keys now set */
        cic_mp_pack_view(&view, &P->k, (size_t)j * dh, (size_t)dh);
        P->krow[j] = view;
    }
    P->vrow = cic_mp_pack_row_views(&P->vt, (size_t)dh, (size_t)N);
    return P->vrow != NULL;
}

/* r[t] = x[t] . y for t < nr (<= CIC_DOT_ROWS): the rows the packed path
 * declines are left for the caller (the returned mask lacks them). */
static unsigned packed_dots(mpfr_ptr *r, const cic_mp_pack *const *x, int nr,
                            const cic_mp_pack *y, bool usable)
{
    return usable ? cic_mp_dot_rows_packed(r, x, nr, y, NULL) : 0;
}

/* Scores of query row qi against keys 0 .. cnt-1, scaled: p[j] =
 * RN(RN(q . k_j) scale). */
static void attn_scores(const attn_job *A, attn_packs *P, bool packed, const mpfr_t *qi,
                        const mpfr_t *ks, int cnt, mpws *w)
{
    mpfr_t *p = w->p;
    bool qok = packed && pack_strided(&P->q, 0, qi, 1, (size_t)A->dh);
    int j, t, nr;
    if (qok)
        cic_mp_pack_finish(&P->q);
    for (j = 0; j < cnt; j += nr) {
        mpfr_ptr r[CIC_DOT_ROWS];
        const cic_mp_pack *x[CIC_DOT_ROWS];
        unsigned done;
        nr = cnt - j < CIC_DOT_ROWS ? cnt - j : CIC_DOT_ROWS;
        for (t = 0; t < nr; t++) {
            r[t] = p[j + t];
            x[t] = &P->krow[j + t];
        }
        done = packed_dots(r, x, nr, &P->q, qok);
        for (t = 0; t < nr; t++) {
            if (!(done >> t & 1u))
                cic_mp_dot(p[j + t], qi, 1, ks + (size_t)(j + t) * A->lk, 1, (size_t)A->dh,
                           NULL, &w->dot);
            mpfr_mul(p[j + t], p[j + t], A->scale, MPFR_RNDN);
        }
    }
}

/* y_i = P_i V over the first cnt values (row views cut to cnt for causal
 * rows). */
static void attn_pv(const attn_job *A, attn_packs *P, bool packed, mpfr_t *yi,
                    const mpfr_t *vs, int cnt, mpws *w)
{
    const mpfr_t *p = (const mpfr_t *)w->p;
    bool pok = packed && pack_strided(&P->p, 0, p, 1, (size_t)cnt);
    cic_mp_pack prow;
    int cc, t, nr;
    if (pok) {
        cic_mp_pack_view(&prow, &P->p, 0, (size_t)cnt);
        pok = prow.span.usable;
    }
    for (cc = 0; cc < A->dh; cc += nr) {
        mpfr_ptr r[CIC_DOT_ROWS];
        cic_mp_pack vv[CIC_DOT_ROWS];
        const cic_mp_pack *x[CIC_DOT_ROWS];
        unsigned done;
        nr = A->dh - cc < CIC_DOT_ROWS ? A->dh - cc : CIC_DOT_ROWS;
        for (t = 0; t < nr; t++) {
            r[t] = yi[cc + t];
            x[t] = NULL;
            if (!pok)
                continue; /* a head whose keys or values are not all finite has no
                           * packed rows (P->vrow is NULL): cic_mp_dot below */
            if (cnt == A->N)
                vv[t] = P->vrow[cc + t];
            else
                cic_mp_pack_view(&vv[t], &P->vt, (size_t)(cc + t) * A->N, (size_t)cnt);
            x[t] = &vv[t];
        }
        done = packed_dots(r, x, nr, &prow, pok);
        for (t = 0; t < nr; t++)
            if (!(done >> t & 1u))
                cic_mp_dot(yi[cc + t], p, 1, vs + cc + t, (size_t)A->lv, (size_t)cnt, NULL,
                           &w->dot);
    }
}

/* Softmax of p[0 .. cnt) in place: exp(p_j - max), each divided by their
 * correctly rounded sum. */
static void attn_softmax(int cnt, mpws *w)
{
    mpfr_t *p = w->p;
    mpfr_ptr mx = w->t0;
    int j;
    mpfr_set(mx, p[0], MPFR_RNDN);
    for (j = 1; j < cnt; j++)
        if (mpfr_greater_p(p[j], mx))
            mpfr_set(mx, p[j], MPFR_RNDN);
    for (j = 0; j < cnt; j++) {
        mpfr_sub(p[j], p[j], mx, MPFR_RNDN);
        cic_mp_exp(p[j], p[j], &w->fn);
        w->ptr[j] = p[j];
    }
    mpfr_sum(w->t1, w->ptr, (unsigned long)cnt, MPFR_RNDN);
    for (j = 0; j < cnt; j++)
        mpfr_div(p[j], p[j], w->t1, MPFR_RNDN);
}

/* Jobs are (sample, head) pairs; head h reads key/value head h / grp. */
static void attn_heads(void *c, int lo, int hi, mpws *w)
{
    const attn_job *A = c;
    int job, i, N = A->N, dh = A->dh, d = A->d;
    attn_packs P;
    bool have = attn_packs_init(&P, N, dh, mpfr_get_prec(w->t0));
    for (job = lo; job < hi; job++) {
        int s = job / A->H, h = job % A->H;
        const mpfr_t *qs = A->q + (size_t)s * N * A->lq + A->qc + h * dh;
        const mpfr_t *ks = A->k + (size_t)s * N * A->lk + A->kc + h / A->grp * dh;
        const mpfr_t *vs = A->v + (size_t)s * N * A->lv + A->vc + h / A->grp * dh;
        bool packed = have && attn_pack_head(&P, A, ks, vs);
        for (i = 0; i < N; i++) {
            int cnt = A->causal ? i + 1 : N;
            attn_scores(A, &P, packed, qs + (size_t)i * A->lq, ks, cnt, w);
            if (A->ball)
                cic_ball_attn_scores(A->ball, w->bscr, (const mpfr_t *)w->p, cnt);
            attn_softmax(cnt, w);
            attn_pv(A, &P, packed, A->y + ((size_t)s * N + i) * d + h * dh, vs, cnt, w);
            if (A->ball)
                cic_ball_attn_row(A->ball, w->bscr, s, h, i, (const mpfr_t *)w->p, cnt);
        }
    }
    if (have)
        attn_packs_clear(&P);
}

int _cic_mpk_attn(mprun *r, const cic_op *o, mpfr_t *y)
{
    const cic_model *m = r->m;
    attn_job A;
    int N = m->cfg.tokens, S = r->rows / N;
    A.q = wsrc(r, o->in[0]);
    A.k = wsrc(r, o->in[1]);
    A.v = wsrc(r, o->in[2]);
    if (!A.q || !A.k || !A.v)
        return -1;
    A.y = y;
    A.N = N;
    A.d = m->t[o->out].cols;
    A.H = o->heads;
    A.dh = A.d / A.H;
    A.grp = A.H / o->kv_heads;
    A.lq = m->t[o->in[0]].cols;
    A.lk = m->t[o->in[1]].cols;
    A.lv = m->t[o->in[2]].cols;
    A.qc = o->in_col[0];
    A.kc = o->in_col[1];
    A.vc = o->in_col[2];
    A.causal = o->causal;
    mpfr_set_ui(r->c_scale, (unsigned long)A.dh, MPFR_RNDN);
    mpfr_rec_sqrt(r->c_scale, r->c_scale, MPFR_RNDN);
    A.scale = r->c_scale;
    A.ball = r->ball;
    parallel(r, S * A.H, attn_heads, &A);
    return 0;
}
