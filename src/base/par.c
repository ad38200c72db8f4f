/* SPDX-License-Identifier: MIT */
/* par.c: shares of work on threads (par.h). */
#include "par.h"

#include <flint/flint.h>
#include <mpfr.h>
#include <pthread.h>
#include <stdbool.h>

typedef struct {
    void (*fn)(void *ctx, int t, int nt);
    void *ctx;
    int t, nt;
} share;

static void *share_thread(void *a)
{
    share *s = a;
    s->fn(s->ctx, s->t, s->nt);
    mpfr_free_cache2(MPFR_FREE_LOCAL_CACHE);
    flint_cleanup();
    return NULL;
}

void cic_par_run(int nt, void (*fn)(void *ctx, int t, int nt), void *ctx)
{
    share sh[CIC_PAR_MAX];
    pthread_t th[CIC_PAR_MAX];
    bool started[CIC_PAR_MAX] = {false};
    int t;
    nt = nt < 1 ? 1 : nt > CIC_PAR_MAX ? CIC_PAR_MAX : nt;
    for (t = 0; t < nt; t++) {
        sh[t] = (share){fn, ctx, t, nt};
        started[t] = t > 0 && pthread_create(&th[t], NULL, share_thread, &sh[t]) == 0;
    }
    fn(ctx, 0, nt);
    for (t = 1; t < nt; t++) {
        if (started[t])
            pthread_join(th[t], NULL);
        else
            fn(ctx, t, nt); /* no thread: its share here */
    }
}

typedef struct {
    size_t n;
    void (*fn)(void *ctx, size_t lo, size_t hi, int t);
    void *ctx;
} ranges;

static void range_share(void *a, int t, int nt)
{
    const ranges *r = a;
    r->fn(r->ctx, r->n * (size_t)t / (size_t)nt, r->n * (size_t)(t + 1) / (size_t)nt, t);
}

void cic_par_ranges(size_t n, int nt, void (*fn)(void *ctx, size_t lo, size_t hi, int t),
                    void *ctx)
{
    ranges r = {n, fn, ctx};
    if (nt > CIC_PAR_MAX)
        nt = CIC_PAR_MAX;
    if ((size_t)(nt > 0 ? nt : 1) > n)
        nt = (int)n;
    if (nt <= 1) {
        fn(ctx, 0, n, 0);
        return;
    }
    cic_par_run(nt, range_share, &r);
}
