/* SPDX-License-Identifier: MIT */
/* verify_dit_out.c: what cicheck verify prints and writes for a DiT
 * (verify_dit.h): the run, the thresholds and what set them, per block
 * the verdict and the ce of each sample, the final layer's, the per-block
 * adaLN FLOPs of the rewrite against the original, and the diagnosis of
 * each broken block; report.json the same under "verify", each layer's
 * findings in its entry's "diagnosis". */
#include "verify_dit.h"

#include "../report/report.h"
#include "../xform/kinds.h"

#include <jansson.h>
#include <math.h>
#include <string.h>

/* The sites of a block whose FLOPs the adaLN strategy changes, in the
 * order cicheck run reports them. */
static const int ADALN_SITES[] = {CIC_SITE_MOD, CIC_SITE_NORM1, CIC_SITE_ATTN, CIC_SITE_GATE1,
                                  CIC_SITE_NORM2, CIC_SITE_MLP, CIC_SITE_GATE2};
#define N_SITES ((int)(sizeof ADALN_SITES / sizeof ADALN_SITES[0]))

static void print_flops(FILE *f, const cic_verify_dit_result *r)
{
    double a = 0, b = 0;
    int i;
    fprintf(f, "adaLN FLOPs per block (%d sample%s x %d tokens; d = %d, m = %d, d_cond = %d): "
            "%s against the original\n", r->samples, r->samples == 1 ? "" : "s", r->tokens, r->d, r->d_mlp, r->d_cond,
            CIC_XFORM_NAME[r->kind]);
    fprintf(f, "  %-11s %14s %14s %9s\n", "site", "original", "rewrite", "extra");
    for (i = 0; i < N_SITES; i++) {
        int s = ADALN_SITES[i];
        double o = r->flops_orig[s], w = r->flops_rw[s];
        a += o;
        b += w;
        fprintf(f, "  %-11s %14.0f %14.0f %+8.2f%%\n", CIC_SITE_NAME[s], o, w,
                o > 0 ? 100 * (w - o) / o : 0.0);
    }
    fprintf(f, "  %-11s %14.0f %14.0f %+8.2f%%\n", "block", a, b, 100 * (b - a) / a);
}

/* The samples of block i with verdict e, as text. */
static void samples_with(char *buf, size_t cap, const enum cic_verdict *v, int B, bool bad)
{
    int s;
    buf[0] = '\0';
    for (s = 0; s < B; s++)
        if ((v[s] != CIC_VERDICT_EQUIVALENT) == bad)
            snprintf(buf + strlen(buf), cap - strlen(buf), "%s%d", buf[0] ? ", " : "", s);
}

static void print_head(FILE *f, const cic_verify_opts *o, const cic_verify_dit_result *r)
{
    fprintf(f, "verify %s against %s: DiT, %d block%s from %d, %d tokens x %d sample%s, adaLN "
            "strategy %s\n", o->trans, o->orig, r->n_layers, r->n_layers == 1 ? "" : "s",
            r->layer0, r->tokens, r->samples, r->samples == 1 ? "" : "s",
            CIC_XFORM_NAME[r->kind]);
    fprintf(f, "conditions %s; hidden states %s", r->cond_file ? "from the input file (\"c\")"
                                                               : "seeded (one per sample)",
            r->hidden_file ? "from the input file" : "seeded");
    if (r->calib >= 0)
        fprintf(f, "; sample %d has the static fold's calibration condition adaln.c0", r->calib);
    else if (cic_xform_desc_of((enum cic_xform_kind)r->kind)->adaln.fold == CIC_ADALN_FOLD_STATIC)
        fprintf(f, "; no sample has the static fold's calibration condition adaln.c0");
    fprintf(f, "\n");
    if (o->q_file[0])
        fprintf(f, "residual stream x %sQ (Q of %s, %s, max |Q^T Q - I| %.3g), norms %s\n",
                r->centered ? "C " : "", o->q_file, r->q_dtype, r->q_orth,
                r->centered ? "RMS0" : "LN0");
    else
        fprintf(f, "residual stream not rotated; each linear's input rotated by the Hadamard "
                "matrix of its width\n");
    fprintf(f, "each block of the rewrite runs on the original's stream at that block, in "
            "double; the final layer end to end on the rewrite's own stream\n");
    fprintf(f, "stored at %d bits: equivalent up to %.3g, broken from %.3g\n", r->bits, r->eq,
            r->br);
    if (r->storage_q)
        fprintf(f, "  set by Q: tensor '%s' of %s is %s\n", r->storage.tensor, o->q_file,
                r->storage.dtype);
    else if (r->storage.tensor[0])
        fprintf(f, "  set by %s tensor '%s' of %s (%d tensor%s at %d bits)\n",
                r->storage.dtype, r->storage.tensor, o->trans, r->storage.count,
                r->storage.count == 1 ? "" : "s", r->storage.bits);
}

/* The first block (checkpoint numbering) not equivalent on the static
 * fold's calibration sample, -1 none. */
static int calib_first_bad(const cic_verify_dit_result *r)
{
    int i;
    for (i = 0; r->calib >= 0 && i < r->n_layers; i++)
        if (r->verdict[(size_t)i * r->samples + r->calib] != CIC_VERDICT_EQUIVALENT)
            return r->layer0 + i;
    return -1;
}

/* Whether blocks i and k (indices in the run) have the same findings and
 * the same samples broken: printed once for both. */
static bool same_findings(const cic_verify_dit_result *r, int i, int k)
{
    int a = r->layer0 + i, b = r->layer0 + k, ja = 0, jb = 0;
    if (r->block[i] != r->block[k] ||
        memcmp(r->verdict + (size_t)i * r->samples, r->verdict + (size_t)k * r->samples,
               (size_t)r->samples * sizeof *r->verdict))
        return false;
    for (;;) {
        while (ja < r->n_find && r->find[ja].layer != a)
            ja++;
        while (jb < r->n_find && r->find[jb].layer != b)
            jb++;
        if (ja == r->n_find || jb == r->n_find)
            return ja == r->n_find && jb == r->n_find;
        if (strcmp(r->find[ja].tensor, r->find[jb].tensor) ||
            strcmp(r->find[ja].finding, r->find[jb].finding))
            return false;
        ja++;
        jb++;
    }
}

/* The diagnosis of each broken block; blocks with the same findings (a
 * static fold judged on other conditions) together. */
static void print_findings(FILE *f, const cic_verify_dit_result *r)
{
    bool done[CIC_VERIFY_MAX_LAYERS] = {false};
    char buf[400], blocks[600];
    int i, k, j, n;
    for (i = 0; i < r->n_layers; i++) {
        int l = r->layer0 + i;
        if (done[i] || r->block[i] == CIC_VERDICT_EQUIVALENT)
            continue;
        snprintf(blocks, sizeof blocks, "%d", l);
        for (k = i + 1, n = 1; k < r->n_layers; k++)
            if (!done[k] && r->block[k] != CIC_VERDICT_EQUIVALENT && same_findings(r, i, k)) {
                done[k] = true;
                n++;
                snprintf(blocks + strlen(blocks), sizeof blocks - strlen(blocks), ", %d",
                         r->layer0 + k);
            }
        samples_with(buf, sizeof buf, r->verdict + (size_t)i * r->samples, r->samples, true);
        fprintf(f, "block%s %s %s %s on sample%s %s:\n", n > 1 ? "s" : "", blocks,
                n > 1 ? "are" : "is", CIC_VERDICT_NAME[r->block[i]], strchr(buf, ',') ? "s" : "",
                buf);
        for (j = 0; j < r->n_find; j++)
            if (r->find[j].layer == l)
                fprintf(f, "  %s%s%s\n", r->find[j].tensor, r->find[j].tensor[0] ? ": " : "",
                        r->find[j].finding);
    }
}

void cic_verify_dit_print(FILE *f, const cic_verify_opts *o, const cic_verify_dit_result *r)
{
    char buf[400];
    int i, s;
    print_head(f, o, r);
    fprintf(f, "block  verdict       ce per sample (0 .. %d)\n", r->samples - 1);
    for (i = 0; i < r->n_layers; i++) {
        const enum cic_verdict *v = r->verdict + (size_t)i * r->samples;
        samples_with(buf, sizeof buf, v, r->samples, true);
        fprintf(f, "%5d  %-12s ", r->layer0 + i, CIC_VERDICT_NAME[r->block[i]]);
        for (s = 0; s < r->samples; s++)
            fprintf(f, " %9.3g", r->ce[(size_t)i * r->samples + s]);
        if (r->block[i] != CIC_VERDICT_EQUIVALENT)
            fprintf(f, "   (sample%s %s)", strchr(buf, ',') ? "s" : "", buf);
        fprintf(f, "\n");
    }
    if (r->have_head) {
        bool bad = false;
        for (s = 0; s < r->samples; s++)
            bad |= r->head_verdict[s] != CIC_VERDICT_EQUIVALENT;
        fprintf(f, "final  %-12s ", bad ? CIC_VERDICT_NAME[CIC_VERDICT_BROKEN]
                                        : CIC_VERDICT_NAME[CIC_VERDICT_EQUIVALENT]);
        for (s = 0; s < r->samples; s++)
            fprintf(f, " %9.3g", r->head_ce[s]);
        fprintf(f, "   (the final layer's output, end to end)\n");
    }
    print_flops(f, r);
    print_findings(f, r);
    if (cic_verify_dit_findings(r, -1, NULL) > 0) {
        samples_with(buf, sizeof buf, r->head_verdict, r->samples, true);
        fprintf(f, "the final layer is broken on sample%s %s:\n", strchr(buf, ',') ? "s" : "",
                buf);
        for (i = 0; i < r->n_find; i++)
            if (r->find[i].layer == -1)
                fprintf(f, "  %s: %s\n", r->find[i].tensor, r->find[i].finding);
    }
    if (r->calib >= 0 && r->first_bad >= 0) {
        int c = calib_first_bad(r);
        if (c >= 0)
            fprintf(f, "on the calibration condition (sample %d): first block not equivalent: "
                    "%d\n", r->calib, c);
        else
            fprintf(f, "on the calibration condition (sample %d): every block equivalent\n",
                    r->calib);
    }
    if (r->first_bad >= 0)
        fprintf(f, "first block not equivalent: %d\n", r->first_bad);
    else if (r->have_head && r->head_bad)
        fprintf(f, "every block equivalent; the final layer is not\n");
    else
        fprintf(f, "every block%s equivalent on every sample\n",
                r->have_head ? " and the final layer" : "");
}

int cic_verify_dit_findings(const cic_verify_dit_result *r, int layer,
                            const cic_vdit_finding **first)
{
    int j, n = 0;
    if (first)
        *first = NULL;
    for (j = 0; j < r->n_find; j++)
        if (r->find[j].layer == layer) {
            if (first && !*first)
                *first = &r->find[j];
            n++;
        }
    return n;
}

/* The findings of layer (-1: the final layer) as report.json's
 * "diagnosis" array. */
static json_t *findings_json(const cic_verify_dit_result *r, int layer)
{
    json_t *dg = json_array();
    int j;
    for (j = 0; j < r->n_find; j++)
        if (r->find[j].layer == layer)
            json_array_append_new(dg, json_pack("{s:o,s:s}", "tensor", r->find[j].tensor[0]
                                                                   ? json_string(r->find[j].tensor)
                                                                   : json_null(),
                                                "finding", r->find[j].finding));
    return dg;
}

/* Layer i's entry: its verdict, per sample ce and verdict, its findings. */
static json_t *layer_json(const cic_verify_dit_result *r, int i)
{
    json_t *ce = json_array(), *vs = json_array(), *dg = findings_json(r, r->layer0 + i);
    int s, l = r->layer0 + i;
    for (s = 0; s < r->samples; s++) {
        json_array_append_new(ce, cic_json_num(r->ce[(size_t)i * r->samples + s]));
        json_array_append_new(vs, json_string(CIC_VERDICT_NAME[r->verdict[(size_t)i * r->samples
                                                                           + s]]));
    }
    return json_pack("{s:i,s:s,s:o,s:o,s:o}", "layer", l, "verdict",
                     CIC_VERDICT_NAME[r->block[i]], "ce_per_sample", ce, "verdict_per_sample",
                     vs, "diagnosis", dg);
}

static json_t *flops_json(const cic_verify_dit_result *r)
{
    json_t *o = json_object();
    int i;
    for (i = 0; i < N_SITES; i++) {
        int s = ADALN_SITES[i];
        json_object_set_new(o, CIC_SITE_NAME[s], json_pack("{s:f,s:f}", "original",
                                                           r->flops_orig[s], "rewrite",
                                                           r->flops_rw[s]));
    }
    return o;
}

int cic_verify_dit_write_json(const cic_verify_opts *o, const cic_verify_dit_result *r,
                              const char *path, cic_diag *d)
{
    json_t *root = json_object(), *v = json_object(), *layers = json_array(), *hd;
    int i, rc = -1;
    if (!root || !v || !layers)
        goto done;
    json_object_set_new(v, "family", json_string("dit"));
    json_object_set_new(v, "original", json_string(o->orig));
    json_object_set_new(v, "transformed", json_string(o->trans));
    json_object_set_new(v, "adaln", json_string(CIC_XFORM_NAME[r->kind]));
    json_object_set_new(v, "q", o->q_file[0] ? json_string(o->q_file) : json_null());
    json_object_set_new(v, "stream", json_string(!o->q_file[0] ? "not rotated"
                                                  : r->centered ? "centered" : "mean-preserving"));
    json_object_set_new(v, "tokens", json_integer(r->tokens));
    json_object_set_new(v, "samples", json_integer(r->samples));
    json_object_set_new(v, "conditions", json_string(r->cond_file ? "file" : "seeded"));
    json_object_set_new(v, "calibration_sample", r->calib >= 0 ? json_integer(r->calib)
                                                               : json_null());
    json_object_set_new(v, "first_layer_not_equivalent_on_calibration",
                        calib_first_bad(r) >= 0 ? json_integer(calib_first_bad(r))
                                                : json_null());
    json_object_set_new(v, "storage_bits", json_integer(r->bits));
    json_object_set_new(v, "thresholds", json_pack("{s:o,s:o,s:s}", "equivalent", cic_json_num(r->eq),
                                                   "broken", cic_json_num(r->br), "set_by",
                                                   r->storage.tensor));
    json_object_set_new(v, "engine", json_string("f64"));
    for (i = 0; i < r->n_layers; i++)
        json_array_append_new(layers, layer_json(r, i));
    json_object_set_new(v, "layers", layers);
    layers = NULL;
    json_object_set_new(v, "first_layer_not_equivalent",
                        r->first_bad >= 0 ? json_integer(r->first_bad) : json_null());
    hd = json_array();
    for (i = 0; r->have_head && i < r->samples; i++)
        json_array_append_new(hd, json_pack("{s:o,s:s}", "ce", cic_json_num(r->head_ce[i]), "verdict",
                                            CIC_VERDICT_NAME[r->head_verdict[i]]));
    json_object_set_new(v, "final_layer_per_sample", r->have_head ? hd : json_null());
    json_object_set_new(v, "final_layer_diagnosis", findings_json(r, -1));
    if (!r->have_head)
        json_decref(hd);
    json_object_set_new(v, "adaln_flops_per_block", flops_json(r));
    json_object_set_new(v, "wall_seconds", cic_json_num(r->seconds));
    json_object_set_new(root, "verify", v);
    v = NULL;
    rc = cic_json_write_atomic(root, path, d);
done:
    if (rc < 0 && !d->msg[0])
        cic_diag_set(d, path, 0, 0, "cannot write report.json: out of memory");
    json_decref(v);
    json_decref(layers);
    json_decref(root);
    return rc;
}

/* The Markdown summary into f: the verdict, the table per block and per
 * sample, the findings, then the terminal's whole output. */
static void write_md(FILE *f, const cic_verify_opts *o, const cic_verify_dit_result *r)
{
    int i, s;
    fprintf(f, "# cicheck verify: %s against %s (DiT, adaLN strategy %s)\n\n", o->trans, o->orig,
            CIC_XFORM_NAME[r->kind]);
    if (r->first_bad >= 0)
        fprintf(f, "**Not equivalent**: first block not equivalent: %d.\n\n", r->first_bad);
    else if (r->have_head && r->head_bad)
        fprintf(f, "**Not equivalent**: every block equivalent; the final layer is not.\n\n");
    else
        fprintf(f, "**Equivalent**: every block%s on every sample.\n\n",
                r->have_head ? " and the final layer" : "");
    fprintf(f, "| block | verdict |");
    for (s = 0; s < r->samples; s++)
        fprintf(f, " ce sample %d |", s);
    fprintf(f, "\n|---|---|");
    for (s = 0; s < r->samples; s++)
        fprintf(f, "---|");
    fprintf(f, "\n");
    for (i = 0; i < r->n_layers; i++) {
        fprintf(f, "| %d | %s |", r->layer0 + i, CIC_VERDICT_NAME[r->block[i]]);
        for (s = 0; s < r->samples; s++)
            fprintf(f, " %.3g |", r->ce[(size_t)i * r->samples + s]);
        fprintf(f, "\n");
    }
    fprintf(f, "\n## Diagnosis\n\n");
    if (!r->n_find)
        fprintf(f, "No finding.\n");
    for (i = 0; i < r->n_find; i++) {
        if (r->find[i].layer >= 0)
            fprintf(f, "- block %d, ", r->find[i].layer);
        else
            fprintf(f, "- the final layer, ");
        fprintf(f, "`%s`: ", r->find[i].tensor[0] ? r->find[i].tensor : "(the block)");
        fprintf(f, "%s\n", r->find[i].finding);
    }
    fprintf(f, "\n## Output\n\n```text\n");
    cic_verify_dit_print(f, o, r);
    fprintf(f, "```\n");
}

typedef struct {
    const cic_verify_opts *o;
    const cic_verify_dit_result *r;
} md_ctx;

static void write_md_ctx(FILE *f, const void *ctx)
{
    const md_ctx *c = ctx;
    write_md(f, c->o, c->r);
}

int cic_verify_dit_write_md(const cic_verify_opts *o, const cic_verify_dit_result *r,
                            const char *path, cic_diag *d)
{
    md_ctx c = {o, r};
    return cic_write_text_atomic(path, write_md_ctx, &c, d);
}
