/* SPDX-License-Identifier: MIT */
/* verify_diag_md.c: the diagnosis of cicheck verify as report.json's
 * "diagnosis" (verify_diag.h), and the Markdown summary of a verify run
 * (report.md beside report.json: the verdicts, the layer table and the
 * diagnosis), written atomically. Paths and findings are escaped so they
 * cannot break a table (cic_md_esc). */
#include "verify.h"

#include "../report/report.h"
#include "../report/text.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

json_t *cic_vdiag_json(const cic_vdiag *g)
{
    json_t *a = json_array();
    int i;
    for (i = 0; a && i < g->n; i++) {
        const cic_vdiag_item *it = &g->it[i];
        json_array_append_new(a, json_pack("{s:o,s:o,s:o,s:o,s:o}", "tensor",
                                           it->tensor[0] ? cic_json_str(it->tensor) : json_null(),
                                           "finding", cic_json_str(it->finding), "mistake",
                                           it->mistake ? json_string(it->mistake)
                                                       : json_null(),
                                           "distance", cic_json_num(it->distance),
                                           "mistake_distance", cic_json_num(it->mistake_distance)));
    }
    return a;
}

void cic_vdiag_json_set(json_t *v, json_t *layers, bool have_q, int layer0, const cic_vdiag *g)
{
    json_t *e = g->layer >= layer0 ? json_array_get(layers, (size_t)(g->layer - layer0)) : NULL;
    if (have_q && e) { /* the first broken layer's entry */
        json_object_set_new(e, "diagnosis", cic_vdiag_json(g));
        json_object_set_new(e, "diagnosis_note", cic_json_str(g->note));
        json_object_set_new(e, "diagnosis_tolerance", cic_json_num(g->tol));
    } else if (!have_q && g->note[0]) { /* no per-layer view: the diagnosis stands alone */
        json_object_set_new(v, "diagnosis_without_q",
                            json_pack("{s:o,s:o,s:o,s:o}", "layer", g->layer >= 0
                                      ? json_integer(g->layer) : json_null(), "note",
                                      cic_json_str(g->note), "tolerance", cic_json_num(g->tol), "diagnosis",
                                      cic_vdiag_json(g)));
    }
}

static void esc(FILE *f, const char *s)
{
    cic_md_esc(f, s, strlen(s));
}

/* The diagnosis as a Markdown list. */
static void md_diag(FILE *f, const cic_vdiag *g)
{
    int i;
    fprintf(f, "\n## What is wrong with layer %d\n\n", g->layer);
    esc(f, g->note);
    fputs("\n\n", f);
    if (!g->n)
        fputs("No finding.\n", f);
    for (i = 0; i < g->n; i++) {
        const cic_vdiag_item *it = &g->it[i];
        fputs("- ", f);
        esc(f, it->finding);
        if (it->mistake) {
            fputs(" (known mistake `", f);
            esc(f, it->mistake);
            fputs("`)", f);
        }
        if (it->tensor[0]) {
            fputs(": ", f);
            esc(f, it->tensor);
        }
        if (isfinite(it->distance))
            fprintf(f, ", relative distance from the rule %.3g", it->distance);
        fputs("\n", f);
    }
}

static void md_body(FILE *f, const cic_verify_opts *o, const cic_verify_result *r)
{
    int l;
    fputs("# cicheck verify\n\n", f);
    fputs("- original: ", f);
    esc(f, o->orig);
    fputs("\n- transformed: ", f);
    esc(f, o->trans);
    fprintf(f, "\n- layers %d .. %d, %d tokens x %d samples\n", r->layer0,
            r->layer0 + r->n_layers - 1, o->tokens, o->samples);
    fprintf(f, "- stored at %d bits: equivalent up to %.3g, broken from %.3g\n", r->bits, r->eq,
            r->br);
    if (r->first_bad >= 0)
        fprintf(f, "- **first layer not equivalent: %d (%s)**\n", r->first_bad,
                CIC_VERDICT_NAME[r->verdict[r->first_bad - r->layer0]]);
    else if (r->head_verdict != CIC_VERDICT_EQUIVALENT)
        fprintf(f, "- **the head readout is %s**\n", CIC_VERDICT_NAME[r->head_verdict]);
    else
        fprintf(f, "- every layer%s equivalent\n", r->have_q ? " and the head" : " (head readout)");
    fputs("\n| layer | ce_residual | verdict | decided by |\n|---:|---:|---|---|\n", f);
    for (l = 0; r->have_q && l < r->n_layers; l++)
        fprintf(f, "| %d | %.3g | %s | %s |\n", r->layer0 + l, r->ce[l],
                CIC_VERDICT_NAME[r->verdict[l]], CIC_VERIFY_BY_NAME[r->by[l]]);
    fprintf(f, "| head | %.3g | %s | %s |\n", r->head_ce, CIC_VERDICT_NAME[r->head_verdict],
            CIC_VERIFY_BY_NAME[r->head_by]);
    if (r->diag.layer >= 0)
        md_diag(f, &r->diag);
}

typedef struct {
    const cic_verify_opts *o;
    const cic_verify_result *r;
} md_ctx;

static void md_body_ctx(FILE *f, const void *ctx)
{
    const md_ctx *c = ctx;
    md_body(f, c->o, c->r);
}

int cic_verify_write_md(const cic_verify_opts *o, const cic_verify_result *r, const char *path,
                        cic_diag *d)
{
    md_ctx c = {o, r};
    return cic_write_text_atomic(path, md_body_ctx, &c, d);
}
