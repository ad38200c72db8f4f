/* SPDX-License-Identifier: MIT */
/* sweep_int.h: what the sweep files share (sweep.c writes and reads the
 * sweep.json document, sweep_run.c runs the points, merge.c merges
 * shards): the job and the parts of sweep.json that follow from the case
 * alone, which a merge recomputes to check a shard against. */
#ifndef CIC_PIPELINE_SWEEP_INT_H
#define CIC_PIPELINE_SWEEP_INT_H

#include "sweep.h"

#include <jansson.h>

struct cic_sweep_job {
    const cic_case *c;       /* the sweep's case; NULL for a merge */
    cic_sweep_opts o;        /* its strings are the caller's */
    long k, n;               /* shard K/N; 1/1 when not sharded */
    bool sharded;
    cic_files_read fr;       /* a shard's: hashed at begin, checked at finish */
    json_t *root;            /* sweep.json */
    json_t *points;          /* the points run, until cic_sweep_finish */
    long total, ran, passed;
    int worst;
};

/* A new job writing into out_dir (out_root: the part the user named);
 * NULL when memory runs out. */
cic_sweep_job *_cic_sweep_job_new(const char *out_dir, const char *out_root);

/* {"d_model": 32, "seed": 2, ...}: the values of point i, axes in case
 * order. */
json_t *_cic_sweep_point_params(const cic_sweep *s, long i);
/* The aggregate over seeds of points (sweep.json's "aggregate"). */
json_t *_cic_sweep_aggregate(json_t *points);
/* The "case" object report.json gives c (NULL: out of memory). */
json_t *_cic_sweep_case_object(const cic_case *c);
/* Everything of sweep.json that follows from the case alone: the case as
 * parsed, its file's SHA-256 and bytes (case_source, so a merge can
 * recompute all of this), the axes and their values, the point count. */
json_t *_cic_sweep_header(const cic_case *c, const char *sha, const char *src, size_t len);

#endif
