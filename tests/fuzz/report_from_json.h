/* SPDX-License-Identifier: MIT */
/* report_from_json.h: the run side of a baseline comparison, rebuilt from a
 * trusted report.json (the files in reference/), so the baseline reader can
 * be tested and fuzzed against real rows without running the cases: the
 * hashes, and per row the transform, engine, verdict, MPFR hash, counted
 * FLOPs and the float32 figures that cic_baseline_compare reads (null, a
 * non-finite figure, becomes NaN). Lenient on purpose: it is only given the
 * shipped references. Shared by tests/test_baseline.c and
 * tests/fuzz/fuzz_baseline.c. */
#ifndef CIC_TEST_REPORT_FROM_JSON_H
#define CIC_TEST_REPORT_FROM_JSON_H

#include "report/report.h"

#include <jansson.h>
#include <math.h>
#include <string.h>

static double rfj_num(json_t *v)
{
    return json_is_number(v) ? json_number_value(v) : NAN;
}

static void rfj_stat(cic_stat3 *s, json_t *o)
{
    s->max = rfj_num(json_object_get(o, "max"));
    s->p99 = rfj_num(json_object_get(o, "p99"));
    s->mean = rfj_num(json_object_get(o, "mean"));
}

/* r from root; r->results is allocated (free it with free). 0, or -1 when
 * root is not a report at all. */
static int cic_test_report_from_json(cic_report *r, json_t *root)
{
    json_t *rows = json_object_get(root, "results"), *row;
    size_t i;
    memset(r, 0, sizeof *r);
    if (!json_is_array(rows))
        return -1;
    cic_strlcpy(r->weights_sha256, json_string_value(json_object_get(root, "weights_sha256"))
                ? json_string_value(json_object_get(root, "weights_sha256")) : "",
                sizeof r->weights_sha256);
    cic_strlcpy(r->truth_sha256, json_string_value(json_object_get(root, "truth_sha256"))
                ? json_string_value(json_object_get(root, "truth_sha256")) : "",
                sizeof r->truth_sha256);
    r->results = calloc(json_array_size(rows) + 1, sizeof *r->results);
    if (!r->results)
        return -1;
    json_array_foreach(rows, i, row) {
        cic_result *x = &r->results[r->n_results++];
        const char *s;
        json_t *m = json_object_get(row, "metrics"), *v;
        int k;
        s = json_string_value(json_object_get(row, "transform"));
        cic_strlcpy(x->transform, s ? s : "", sizeof x->transform);
        s = json_string_value(json_object_get(row, "engine"));
        cic_strlcpy(x->engine, s ? s : "", sizeof x->engine);
        s = json_string_value(json_object_get(row, "verdict"));
        for (k = 0; s && k < CIC_VERDICT_COUNT; k++)
            if (!strcmp(s, CIC_VERDICT_NAME[k])) {
                x->has_verdict = true;
                x->verdict = (enum cic_verdict)k;
            }
        s = json_string_value(json_object_get(row, "mpfr_sha256"));
        cic_strlcpy(x->mpfr_sha256, s ? s : "", sizeof x->mpfr_sha256);
        x->flops.transformed = rfj_num(json_object_get(json_object_get(row, "flops"),
                                                       "transformed"));
        if (json_is_object(m)) {
            x->has_metrics = true;
            x->metrics.max_abs = rfj_num(json_object_get(m, "max_abs"));
            x->metrics.rel_norm2 = rfj_num(json_object_get(m, "rel_norm2"));
            rfj_stat(&x->metrics.ulp_row, json_object_get(m, "ulp_row"));
            rfj_stat(&x->metrics.ulp_elem, json_object_get(m, "ulp_elem"));
            v = json_object_get(m, "drift");
            if (json_is_object(v)) {
                x->metrics.has_drift = 1;
                rfj_stat(&x->metrics.drift, v);
            }
            v = json_object_get(m, "nonfinite");
            x->metrics.nonfinite = json_is_integer(v) && json_integer_value(v) > 0
                                       ? (uint64_t)json_integer_value(v) : 0;
        }
        x->pass = true;
    }
    r->pass = true;
    return 0;
}

#endif
