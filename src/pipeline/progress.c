/* SPDX-License-Identifier: MIT */
/* progress.c: the progress helpers every stage of a pipeline shares: the
 * clock, the stage lines and the per-stage work meter (pipeline_int.h).
 * They call nothing of the pipeline's other files. */
#include "pipeline_int.h"

#include <stdarg.h>
#include <string.h>
#include <time.h>

double _cic_pl_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

void _cic_pl_stage(cic_pipeline *p, const char *fmt, ...)
{
    char text[512];
    va_list ap;
    if (!p->o.progress.stage)
        return;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    p->o.progress.stage(p->o.progress.ctx, text);
}

/* The engines' per-op callback: done FLOPs of the stage's total. */
static void work_tick(void *ctx, double done)
{
    cic_pl_work *w = ctx;
    w->p->o.progress.work(w->p->o.progress.ctx, w->label, done, w->total);
}

void _cic_pl_work_begin(cic_pl_work *w, cic_pipeline *p, const char *label, double total,
                        cic_run_opts *o)
{
    w->p = p;
    w->label = label;
    w->total = total;
    if (p->o.progress.work) {
        o->progress = work_tick;
        o->progress_ctx = w;
    }
}

void _cic_pl_work_end(cic_pl_work *w)
{
    if (w->p->o.progress.work_end)
        w->p->o.progress.work_end(w->p->o.progress.ctx);
}

