/* SPDX-License-Identifier: MIT */
/* engine_mpfr_attn.c: the MPFR engine's attention: scores, softmax and P
 * V, each dot product correctly rounded, the ball run's hooks per query
 * row (mp_ball.h). The scores Q K^T and P V of each head go through the
 * exact dgemm slices (base/mpslice.h) where they take them (a DiT-XL/2
 * block's attention at 320 bits: 7.8 s before, 5.1 s with them); else head
 * by head over the threads, the dot products packed where the values
 * allow. The bits are the same either way. Kernel of the table
 * in engine_mpfr.c. */
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
                        const mpfr_t *ks, int cnt, mpws *w, mpfr_t *p)
{
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
                    const mpfr_t *vs, int cnt, mpws *w, const mpfr_t *p)
{
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
static void attn_softmax(mpfr_t *p, int cnt, mpws *w)
{
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

/* The first query, key and value of job (sample, head) in their tensors. */
static const mpfr_t *job_q(const attn_job *A, int job)
{
    return A->q + (size_t)(job / A->H) * A->N * A->lq + A->qc + job % A->H * A->dh;
}

static const mpfr_t *job_k(const attn_job *A, int job)
{
    return A->k + (size_t)(job / A->H) * A->N * A->lk + A->kc + job % A->H / A->grp * A->dh;
}

static const mpfr_t *job_v(const attn_job *A, int job)
{
    return A->v + (size_t)(job / A->H) * A->N * A->lv + A->vc + job % A->H / A->grp * A->dh;
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
        const mpfr_t *qs = job_q(A, job), *ks = job_k(A, job), *vs = job_v(A, job);
        bool packed = have && attn_pack_head(&P, A, ks, vs);
        for (i = 0; i < N; i++) {
            int cnt = A->causal ? i + 1 : N;
            attn_scores(A, &P, packed, qs + (size_t)i * A->lq, ks, cnt, w, w->p);
            if (A->ball)
                cic_ball_attn_scores(A->ball, w->bscr, (const mpfr_t *)w->p, cnt);
            attn_softmax(w->p, cnt, w);
            attn_pv(A, &P, packed, A->y + ((size_t)s * N + i) * d + h * dh, vs, cnt, w,
                    (const mpfr_t *)w->p);
            if (A->ball)
                cic_ball_attn_row(A->ball, w->bscr, s, h, i, (const mpfr_t *)w->p, cnt);
        }
    }
    if (have)
        attn_packs_clear(&P);
}

/* ---- scores and P V as matrix products (base/mpslice.h) ----
 *
 * A pass takes query rows [i0, i1) of a group of (sample, head) jobs: each
 * job's scores Q K^T in one cic_mp_linear_sliced call (every score the
 * exact dot product rounded once, the bits of cic_mp_dot), the scaling and
 * softmax row by row on the threads, P V in a second call, then the rows'
 * outputs and the ball run's hooks on the threads, each job's rows in
 * order on one thread as in attn_heads. A call the slices decline leaves
 * its job's rows to the packed dot products of attn_heads. Causal rows:
 * the keys up to the pass's last row are multiplied (a row reads only its
 * own), and P's entries past a row's count are +0, exact in every sum; an
 * output that is then zero, NaN or infinite is taken again over the row's
 * own count (which zero, and the NaN a masked value would bring, are the
 * dot product's call), so the bits are attn_heads' in every case. */
typedef struct {
    const attn_job *A;
    int i0, i1, nk;    /* query rows, keys multiplied */
    int j0;            /* the group's first job */
    mpfr_t *S, *P, *Y; /* per job: (i1 - i0) x nk scores, probabilities; (i1 - i0) x dh */
    bool *sok, *yok;   /* per job: its scores, its outputs came from the slices */
} attn_pass;

/* v[i cols + c] aliases (read only: struct copies, the limbs shared)
 * src[i ld + c] for i < rows, c < cols, or src[c ld + i] when tr. */
static void view_of(mpfr_t *v, const mpfr_t *src, size_t ld, int rows, int cols, bool tr)
{
    int i, c;
    for (i = 0; i < rows; i++)
        for (c = 0; c < cols; c++)
            v[(size_t)i * cols + c][0] =
                tr ? src[(size_t)c * ld + i][0] : src[(size_t)i * ld + c][0];
}

/* Scratch of the main thread's calls: views of a job's queries, keys or
 * values transposed, and weight packs that hold nothing (the slices read
 * the values). */
typedef struct {
    mpfr_t *x, *w;
    cic_mp_pack *ep;
} pass_views;

/* y (m x n) = x (m x k) w^T through the slices, w the n rows of k in
 * V->w (read from their values: V's packs hold nothing); whether they took
 * it (the run's thread only: the dgemm calls use OpenBLAS's threads). */
static bool sliced(mprun *r, mpfr_t *y, const mpfr_t *x, int m, pass_views *V, int n, int k)
{
    int j;
    for (j = 0; j < n; j++)
        V->ep[j].n = (size_t)k;
    return cic_mp_linear_sliced(y, x, (size_t)m, (const mpfr_t *)V->w, V->ep, NULL, (size_t)n,
                                (size_t)k, r->nt, r->m->rt, r->slice) == 0;
}

/* Phase 1, on the run's thread: every job's scores. */
static void pass_scores(mprun *r, attn_pass *T, int g, pass_views *V)
{
    const attn_job *A = T->A;
    int u, B = T->i1 - T->i0;
    for (u = 0; u < g; u++) {
        view_of(V->x, job_q(A, T->j0 + u) + (size_t)T->i0 * A->lq, (size_t)A->lq, B, A->dh,
                false);
        view_of(V->w, job_k(A, T->j0 + u), (size_t)A->lk, T->nk, A->dh, false);
        T->sok[u] = sliced(r, T->S + (size_t)u * B * T->nk, (const mpfr_t *)V->x, B, V, T->nk,
                           A->dh);
    }
}

/* Phase 3, on the run's thread: every job's P V. */
static void pass_pv(mprun *r, attn_pass *T, int g, pass_views *V)
{
    const attn_job *A = T->A;
    int u, B = T->i1 - T->i0;
    for (u = 0; u < g; u++) {
        view_of(V->w, job_v(A, T->j0 + u), (size_t)A->lv, A->dh, T->nk, true);
        T->yok[u] = sliced(r, T->Y + (size_t)u * B * A->dh,
                           (const mpfr_t *)T->P + (size_t)u * B * T->nk, B, V, A->dh, T->nk);
    }
}

/* The packs of a job whose call the slices declined, made on first need:
 * packed says whether its dot products may take them. */
typedef struct {
    attn_packs P;
    bool have, tried, packed;
    int job;
} lazy_packs;

static bool lazy_pack(lazy_packs *L, const attn_job *A, int job, mpws *w)
{
    if (!L->tried) {
        L->have = attn_packs_init(&L->P, A->N, A->dh, mpfr_get_prec(w->t0));
        L->tried = true;
        L->job = -1;
    }
    if (L->job != job)
        L->packed = L->have && attn_pack_head(&L->P, A, job_k(A, job), job_v(A, job));
    L->job = job;
    return L->packed;
}

static void lazy_clear(lazy_packs *L)
{
    if (L->have)
        attn_packs_clear(&L->P);
}

/* Phase 2, jobs [lo, hi) of the group on a thread: scaled scores (or the
 * packed dot products where the slices declined) and their softmax. */
static void pass_softmax(void *c, int lo, int hi, mpws *w)
{
    const attn_pass *T = c;
    const attn_job *A = T->A;
    int u, i, j, B = T->i1 - T->i0;
    lazy_packs L = {.tried = false};
    for (u = lo; u < hi; u++)
        for (i = T->i0; i < T->i1; i++) {
            int cnt = A->causal ? i + 1 : A->N, job = T->j0 + u;
            size_t at = ((size_t)u * B + (size_t)(i - T->i0)) * T->nk;
            mpfr_t *sr = T->S + at, *pr = T->P + at;
            if (T->sok[u]) {
                for (j = 0; j < cnt; j++)
                    mpfr_mul(sr[j], sr[j], A->scale, MPFR_RNDN);
            } else {
                bool packed = lazy_pack(&L, A, job, w);
                attn_scores(A, &L.P, packed, job_q(A, job) + (size_t)i * A->lq, job_k(A, job),
                            cnt, w, sr);
            }
            for (j = 0; j < cnt; j++)
                mpfr_set(pr[j], sr[j], MPFR_RNDN);
            attn_softmax(pr, cnt, w);
            for (j = cnt; j < T->nk; j++)
                mpfr_set_zero(pr[j], 1);
        }
    lazy_clear(&L);
}

/* Phase 4, jobs [lo, hi) on a thread: each row's outputs (from the
 * slices' products, or the packed dot products), then the ball's hooks. */
static void pass_out(void *c, int lo, int hi, mpws *w)
{
    const attn_pass *T = c;
    const attn_job *A = T->A;
    int u, i, cc, B = T->i1 - T->i0, dh = A->dh;
    lazy_packs L = {.tried = false};
    for (u = lo; u < hi; u++)
        for (i = T->i0; i < T->i1; i++) {
            int cnt = A->causal ? i + 1 : A->N, job = T->j0 + u, s = job / A->H, h = job % A->H;
            size_t at = ((size_t)u * B + (size_t)(i - T->i0)) * T->nk;
            const mpfr_t *sr = (const mpfr_t *)T->S + at, *pr = (const mpfr_t *)T->P + at;
            const mpfr_t *yr = (const mpfr_t *)T->Y + ((size_t)u * B + (size_t)(i - T->i0)) * dh;
            mpfr_t *yi = A->y + ((size_t)s * A->N + i) * A->d + h * dh;
            if (!T->yok[u]) {
                bool packed = lazy_pack(&L, A, job, w);
                attn_pv(A, &L.P, packed, yi, job_v(A, job), cnt, w, pr);
            } else
                for (cc = 0; cc < dh; cc++) {
                    mpfr_set(yi[cc], yr[cc], MPFR_RNDN);
                    if (A->causal && !mpfr_regular_p(yi[cc]))
                        cic_mp_dot(yi[cc], pr, 1, job_v(A, job) + cc, (size_t)A->lv,
                                   (size_t)cnt, NULL, &w->dot);
                }
            if (A->ball) {
                cic_ball_attn_scores(A->ball, w->bscr, sr, cnt);
                cic_ball_attn_row(A->ball, w->bscr, s, h, i, pr, cnt);
            }
        }
    lazy_clear(&L);
}

/* The passes' storage for G jobs of B query rows; false when memory runs
 * out (pass_free frees what was made). */
static bool pass_alloc(attn_pass *T, pass_views *V, const attn_job *A, mpfr_prec_t prec, int G,
                       int B)
{
    size_t N = (size_t)A->N, dh = (size_t)A->dh;
    memset(T, 0, sizeof *T);
    T->A = A;
    T->S = cic_mpvec_create((size_t)G * B * N, prec);
    T->P = cic_mpvec_create((size_t)G * B * N, prec);
    T->Y = cic_mpvec_create((size_t)G * B * dh, prec);
    T->sok = calloc((size_t)G, sizeof *T->sok);
    T->yok = calloc((size_t)G, sizeof *T->yok);
    V->x = malloc((size_t)B * dh * sizeof *V->x);
    V->w = malloc(N * dh * sizeof *V->w);
    V->ep = calloc(N > dh ? N : dh, sizeof *V->ep);
    return T->S && T->P && T->Y && T->sok && T->yok && V->x && V->w && V->ep;
}

static void pass_free(attn_pass *T, pass_views *V)
{
    cic_mpvec_destroy(T->S, 0); /* one block, whatever its length */
    cic_mpvec_destroy(T->P, 0);
    cic_mpvec_destroy(T->Y, 0);
    free(T->sok);
    free(T->yok);
    free(V->x);
    free(V->w);
    free(V->ep);
}

/* The op through passes; 0 when it ran them (every output set), 1 when the
 * slices declined the first job's scores or memory for the passes ran out
 * (nothing written: attn_heads takes the op). At most R d values of scores
 * and probabilities at once (R the op's rows, d its width: room the
 * activations' estimate leaves beside an attention, src/case/memory.c):
 * B query rows of G jobs a pass. */
static int attn_sliced(mprun *r, const attn_job *A, int jobs)
{
    size_t half = (size_t)r->rows * (size_t)A->d / 2, N = (size_t)A->N, rows, grp;
    pass_views V;
    attn_pass T;
    int B, G, g, rc = 1;
    rows = half / N;
    B = (int)(rows < 1 ? 1 : rows < N ? rows : N);
    grp = half / ((size_t)B * N);
    G = (int)(grp < 1 ? 1 : grp < (size_t)jobs ? grp : (size_t)jobs);
    if (!pass_alloc(&T, &V, A, r->prec, G, B))
        goto done;
    for (T.i0 = 0; T.i0 < A->N; T.i0 = T.i1) {
        T.i1 = T.i0 + B < A->N ? T.i0 + B : A->N;
        T.nk = A->causal ? T.i1 : A->N;
        for (T.j0 = 0; T.j0 < jobs; T.j0 += g) {
            g = jobs - T.j0 < G ? jobs - T.j0 : G;
            pass_scores(r, &T, g, &V);
            if (T.i0 == 0 && T.j0 == 0 && !T.sok[0])
                goto done;
            parallel(r, g, pass_softmax, &T);
            pass_pv(r, &T, g, &V);
            parallel(r, g, pass_out, &T);
        }
    }
    rc = 0;
done:
    pass_free(&T, &V);
    return rc;
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
    if (attn_sliced(r, &A, S * A.H) != 0)
        parallel(r, S * A.H, attn_heads, &A);
    return 0;
}
