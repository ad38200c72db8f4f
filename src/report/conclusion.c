/* SPDX-License-Identifier: MIT */
/* conclusion.c: the answer, in words, at the end of a dit run. The question
 * behind a dit case is whether its adaLN block can be rotated exactly at no
 * extra cost; the answer is read off the report: the verdict row of each
 * adaLN transform (overall and per sample), its counted FLOPs, and the
 * report's analytical table (its extra FLOPs at the table's sizes and the
 * crossover N*, as the pipeline computed them). No sentence is fixed: each one states what the
 * numbers say, including that nothing is exact, that everything is, or
 * that a verdict is not the one the case expects.
 *
 *   Conclusion: can this adaLN block be rotated exactly at no extra cost? ...
 *     exact on every sample (verdict equivalent in mpfr, B = 4): ...
 *     exact on some samples only: static-fold 'sf' on sample 0 only, ...
 *     cheapest exact: online-unrotate 'fast' (hadamard Q, fast, ...): ...
 *     cheaper but not exact: static-fold 'sf' (-2.24%)
 *     crossover N* (...): 175.4 with a dense Q, ...; this case's N = 32 ...
 *
 * Used by the terminal output (run.c) and the Markdown summary, which
 * escapes each line. */
#include "conclusion.h"
#include "text.h"

#include "../xform/kinds.h"

#include <math.h>
#include <string.h>

typedef struct {
    const cic_xform_spec *xs;
    const cic_result *row; /* the verdict row: has_verdict, no f32 metrics */
    bool exact;            /* equivalent overall and on every sample judged */
    int n_eq;              /* samples judged equivalent */
    bool unexpected;       /* a verdict the case does not expect */
} item;

/* A kind exact on its calibration sample only (static-fold): judged per
 * sample against that sample (its descriptor's calibration key). */
static bool calibrated(const cic_xform_spec *xs)
{
    return cic_xform_has_keys(xs->kind, CIC_XKEY_CALIBRATION);
}

/* Verdict and transform kind names, "?" out of range (text.h). */
static const char *vname(int v)
{
    return CIC_NAME_OF(CIC_VERDICT_NAME, CIC_VERDICT_COUNT, v);
}

static const char *kname(int k)
{
    return CIC_NAME_OF(CIC_XFORM_NAME, CIC_XFORM_COUNT, k);
}

static int name_len(const char *s)
{
    return (int)strnlen(s, CIC_NAME_MAX);
}

static void g3(FILE *f, double v)
{
    if (isnan(v))
        fputs("nan", f);
    else if (isinf(v))
        fputs(v > 0 ? "inf" : "-inf", f);
    else
        fprintf(f, "%.3g", v);
}

/* "kind 'name'" */
static void xf_name(FILE *f, const item *it)
{
    fprintf(f, "%s '%.*s'", kname(it->xs->kind), name_len(it->xs->name), it->xs->name);
}

/* What the verdict of sample s of it must be for the case's expectation
 * (as the run judges it): static-fold is equivalent on its calibration
 * sample and as expected elsewhere; the other kinds are judged overall. */
static bool sample_as_expected(const item *it, int s)
{
    enum cic_verdict want = it->xs->expect;
    if (!calibrated(it->xs))
        return true;
    if (it->row->per_sample[s].sample == it->xs->calibration)
        want = CIC_VERDICT_EQUIVALENT;
    return it->row->per_sample[s].verdict == want;
}

static int count_verdict(const cic_result *row, enum cic_verdict v)
{
    int n = 0;
    for (int s = 0; s < row->n_samples; s++)
        n += row->per_sample[s].verdict == v;
    return n;
}

/* The samples of row whose verdict is v (or, when mismatch, those of it
 * that are not as expected), as "0", "1-3" or "0, 2, 5-7". */
static void sample_list(FILE *f, const item *it, enum cic_verdict v, bool mismatch)
{
    const cic_result *row = it->row;
    bool first = true;
    int s = 0;
#define IN(k) (mismatch ? !sample_as_expected(it, (k)) : row->per_sample[(k)].verdict == v)
    while (s < row->n_samples) {
        int e;
        if (!IN(s)) {
            s++;
            continue;
        }
        e = s;
        while (e + 1 < row->n_samples && IN(e + 1) &&
               row->per_sample[e + 1].sample == row->per_sample[e].sample + 1)
            e++;
        fprintf(f, "%s%d", first ? "" : ", ", row->per_sample[s].sample);
        if (e > s)
            fprintf(f, "%s%d", e == s + 1 ? ", " : "-", row->per_sample[e].sample);
        first = false;
        s = e + 1;
    }
#undef IN
}

/* The items with sel[i], grouped by kind in order of first appearance:
 * "online-unrotate 'a', 'b'; per-sample-fold 'c'". */
static void list_by_kind(FILE *f, const item *it, int n, const bool *sel)
{
    bool done[CIC_MAX_XFORMS] = {false};
    bool first_group = true;
    for (int i = 0; i < n; i++) {
        bool first = true;
        if (!sel[i] || done[i])
            continue;
        fprintf(f, "%s%s ", first_group ? "" : "; ", kname(it[i].xs->kind));
        for (int j = i; j < n; j++) {
            if (!sel[j] || done[j] || it[j].xs->kind != it[i].xs->kind)
                continue;
            fprintf(f, "%s'%.*s'", first ? "" : ", ", name_len(it[j].xs->name), it[j].xs->name);
            done[j] = true;
            first = false;
        }
        first_group = false;
    }
}

/* One exact-on-some-samples transform: where it is exact, where not. */
static void partial_detail(FILE *f, const item *it)
{
    const cic_result *row = it->row;
    bool sf = calibrated(it->xs), cal_eq = false, other = false;
    int cal = it->xs->calibration;

    for (int s = 0; s < row->n_samples; s++)
        if (row->per_sample[s].sample == cal)
            cal_eq = row->per_sample[s].verdict == CIC_VERDICT_EQUIVALENT;
    xf_name(f, it);
    fprintf(f, " on sample%s ", it->n_eq == 1 ? "" : "s");
    sample_list(f, it, CIC_VERDICT_EQUIVALENT, false);
    if (sf && cal_eq && it->n_eq == 1)
        fputs(" only, its calibration sample", f);
    else if (sf)
        fprintf(f, " (%s its calibration sample %d)", cal_eq ? "with" : "not on", cal);
    fputs(" (", f);
    for (int v = 0; v < CIC_VERDICT_COUNT; v++) {
        int k;
        if (v == CIC_VERDICT_EQUIVALENT)
            continue;
        k = count_verdict(row, (enum cic_verdict)v);
        if (k == 0)
            continue;
        fprintf(f, "%s%s on sample%s ", other ? ", " : "", vname(v), k == 1 ? "" : "s");
        sample_list(f, it, (enum cic_verdict)v, false);
        other = true;
    }
    fprintf(f, "%s%s overall, ce_residual ", other ? "; " : "",
            vname(row->verdict));
    g3(f, row->ce_residual);
    fputc(')', f);
}

/* One unexpected verdict: overall, and for static-fold per sample. */
static void unexpected_detail(FILE *f, const item *it)
{
    const cic_result *row = it->row;
    bool sep = false;
    int cal = it->xs->calibration;

    xf_name(f, it);
    if (row->verdict != it->xs->expect) {
        fprintf(f, " is %s (ce_residual ", vname(row->verdict));
        g3(f, row->ce_residual);
        fprintf(f, ") where the case expects %s", vname(it->xs->expect));
        sep = true;
    }
    if (!calibrated(it->xs))
        return;
    for (int s = 0; s < row->n_samples; s++) {
        const cic_sample_ce *p = &row->per_sample[s];
        if (p->sample != cal || sample_as_expected(it, s))
            continue;
        fprintf(f, "%s is %s on its calibration sample %d (ce_residual ", sep ? "," : "",
                vname(p->verdict), cal);
        g3(f, p->ce_residual);
        fputc(')', f);
        sep = true;
    }
    {
        int k = 0;
        for (int s = 0; s < row->n_samples; s++)
            k += row->per_sample[s].sample != cal && !sample_as_expected(it, s);
        if (k == 0)
            return;
        fprintf(f, "%s is not %s on sample%s ", sep ? "," : "", vname(it->xs->expect),
                k == 1 ? "" : "s");
        /* the calibration sample is listed above when it is wrong */
        for (int s = 0, first = 1; s < row->n_samples; s++) {
            const cic_sample_ce *p = &row->per_sample[s];
            if (p->sample == cal || sample_as_expected(it, s))
                continue;
            fprintf(f, "%s%d (%s)", first ? "" : ", ", p->sample, vname(p->verdict));
            first = 0;
        }
    }
}

/* "(hadamard Q, fast, centered stream)" */
static void xf_how(FILE *f, const cic_xform_spec *xs)
{
    fprintf(f, "(%s Q", CIC_NAME_OF(CIC_Q_NAME, CIC_Q_COUNT, xs->q));
    if (xs->fast)
        fputs(", fast", f);
    if (cic_xform_has_keys(xs->kind, CIC_XKEY_STREAM) && (int)xs->stream >= 0 &&
        xs->stream < CIC_STREAM_COUNT)
        fprintf(f, ", %s stream", CIC_STREAM_NAME[xs->stream]);
    fputc(')', f);
}

static const char *relation(int n, double nstar)
{
    return n > nstar ? "above" : n < nstar ? "below" : "at";
}

/* The crossover line of the analytical table, with the case's N placed
 * against it. */
static void crossover(FILE *f, const cic_dit_flops_table *t)
{
    const cic_model_cfg *m = &t->cfg;
    double v[2] = {t->nstar_dense, t->nstar_fast};
    const char *how[2] = {"with a dense Q", "with the fast Hadamard"};
    const char *which[2] = {"dense", "fast"};
    int n_def = 0;

    /* N* compares these strategies of the table (flops.h) */
    fprintf(f, "  crossover N* (tokens per sample above which %s costs fewer FLOPs than %s): ",
            kname(CIC_DIT_STRATEGIES[2].kind), kname(CIC_DIT_STRATEGIES[0].kind));
    for (int k = 0; k < 2; k++) {
        if (k)
            fputs(", ", f);
        if (isnan(v[k]))
            fprintf(f, "n/a %s (no Hadamard matrix of order d = %d)", how[k], m->d_model);
        else if (isinf(v[k]))
            fprintf(f, "never %s", how[k]);
        else
            fprintf(f, "%.1f %s", v[k], how[k]);
        n_def += !isnan(v[k]);
    }
    if (n_def == 2 && !strcmp(relation(m->tokens, v[0]), relation(m->tokens, v[1])))
        fprintf(f, "; this case's N = %d is %s both\n", m->tokens, relation(m->tokens, v[0]));
    else if (n_def == 2)
        fprintf(f, "; this case's N = %d is %s the dense N* and %s the fast one\n", m->tokens,
                relation(m->tokens, v[0]), relation(m->tokens, v[1]));
    else if (n_def == 1) {
        int k = isnan(v[0]) ? 1 : 0;
        fprintf(f, "; this case's N = %d is %s the %s N*\n", m->tokens,
                relation(m->tokens, v[k]), which[k]);
    } else
        fputc('\n', f);
}

/* The adaLN transforms of a report that have a verdict row, and what the
 * conclusion counts of them. */
typedef struct {
    item it[CIC_MAX_XFORMS];
    int n, n_exact, n_part, n_none, n_unexp;
    const item *best; /* the cheapest exact one, NULL when none is exact */
    const item *sf_exact; /* a calibrated kind (static-fold) exact on every sample */
} summary;

/* The verdict row of transform xs: a row with a verdict and no f32 metrics. */
static const cic_result *verdict_row(const cic_report *r, const cic_xform_spec *xs)
{
    for (int k = 0; k < r->n_results; k++) {
        const cic_result *x = &r->results[k];
        if (x->has_verdict && !x->has_metrics && !strncmp(x->transform, xs->name, CIC_NAME_MAX))
            return x;
    }
    return NULL;
}

static void gather(summary *sm, const cic_report *r, const cic_xform_chain *ch)
{
    int best = -1;
    memset(sm, 0, sizeof *sm);
    for (int i = 0; i < ch->n && i < CIC_MAX_XFORMS; i++) {
        const cic_xform_spec *xs = &ch->xf[i];
        const cic_result *row;
        item *t;
        if (!cic_xform_is_adaln(xs->kind) || !(row = verdict_row(r, xs)))
            continue;
        t = &sm->it[sm->n++];
        t->xs = xs;
        t->row = row;
        t->n_eq = count_verdict(row, CIC_VERDICT_EQUIVALENT);
        t->exact = row->verdict == CIC_VERDICT_EQUIVALENT && t->n_eq == row->n_samples;
        t->unexpected = row->verdict != xs->expect;
        for (int s = 0; s < row->n_samples; s++)
            t->unexpected = t->unexpected || !sample_as_expected(t, s);
        sm->n_exact += t->exact;
        sm->n_part += !t->exact && t->n_eq > 0;
        sm->n_none += !t->exact && t->n_eq == 0;
        sm->n_unexp += t->unexpected;
        if (!sm->sf_exact && t->exact && calibrated(xs))
            sm->sf_exact = t;
        if (t->exact &&
            (best < 0 || row->flops.extra_total < sm->it[best].row->flops.extra_total))
            best = sm->n - 1;
    }
    sm->best = best >= 0 ? &sm->it[best] : NULL;
}

/* "Conclusion: ... Yes / No ..." */
static void answer_line(FILE *f, const summary *sm, const cic_model_cfg *m)
{
    const item *b = sm->best;
    double e;
    fputs("Conclusion: can this adaLN block be rotated exactly at no extra cost? ", f);
    if (!b && sm->n == 1) {
        fputs("No: the one strategy is not exact on every sample.\n", f);
        return;
    }
    if (!b) {
        fprintf(f, "No: none of the %d strategies is exact on every sample.\n", sm->n);
        return;
    }
    e = b->row->flops.extra_total;
    if (calibrated(b->xs) && m->samples == 1)
        fputs("Yes on this case's single sample: ", f);
    else
        fputs(e > 0 ? "Exactly, yes; at no extra cost, no: " : "Yes: ", f);
    fprintf(f, "%d of %d strateg%s %s exact on every sample, and %s ", sm->n_exact, sm->n,
            sm->n == 1 ? "y" : "ies", sm->n_exact == 1 ? "is" : "are",
            sm->n_exact == 1 ? "it" : "the cheapest of them");
    if (e > 0)
        fprintf(f, "adds %+.2f%% FLOPs at this size.\n", b->row->flops.extra_pct);
    else if (e == 0)
        fputs("adds no FLOPs at this size.\n", f);
    else
        fprintf(f, "needs %.2f%% fewer FLOPs at this size.\n", -b->row->flops.extra_pct);
}

/* "  exact on every sample (verdict equivalent in ENGINE, B = ...): ..." */
static void exact_line(FILE *f, const summary *sm, const cic_model_cfg *m)
{
    const cic_result *row0 = sm->it[0].row;
    bool sel[CIC_MAX_XFORMS];
    for (int i = 0; i < sm->n; i++)
        sel[i] = sm->it[i].exact;
    fprintf(f, "  %s on every sample (verdict %s in %.*s, B = %d",
            sm->n_exact == sm->n ? "every strategy is exact" : "exact",
            vname(CIC_VERDICT_EQUIVALENT), (int)strnlen(row0->engine, sizeof row0->engine),
            row0->engine, m->samples);
    if (row0->n_samples < m->samples)
        fprintf(f, ", per-sample verdicts of the first %d", row0->n_samples);
    fputs("): ", f);
    if (sm->n_exact)
        list_by_kind(f, sm->it, sm->n, sel);
    else
        fputs("none", f);
    if (sm->sf_exact && m->samples == 1)
        fprintf(f, " (%s: the calibration sample is the only sample)",
                kname(sm->sf_exact->xs->kind));
    fputc('\n', f);
}

/* "  exact on some samples only: ..." (0 lines when there is none). */
static int partial_line(FILE *f, const summary *sm)
{
    bool first = true;
    if (!sm->n_part)
        return 0;
    fputs("  exact on some samples only: ", f);
    for (int i = 0; i < sm->n; i++) {
        if (sm->it[i].exact || sm->it[i].n_eq == 0)
            continue;
        if (!first)
            fputs("; ", f);
        partial_detail(f, &sm->it[i]);
        first = false;
    }
    fputc('\n', f);
    return 1;
}

/* "  exact on no sample: ..." */
static int none_line(FILE *f, const summary *sm)
{
    bool first = true;
    if (!sm->n_none)
        return 0;
    fputs("  exact on no sample: ", f);
    for (int i = 0; i < sm->n; i++) {
        const item *t = &sm->it[i];
        if (t->exact || t->n_eq > 0)
            continue;
        fputs(first ? "" : "; ", f);
        xf_name(f, t);
        fprintf(f, " (%s, ce_residual ", vname(t->row->verdict));
        g3(f, t->row->ce_residual);
        fputc(')', f);
        first = false;
    }
    fputc('\n', f);
    return 1;
}

/* "  unexpected: ..." */
static int unexpected_line(FILE *f, const summary *sm)
{
    bool first = true;
    if (!sm->n_unexp)
        return 0;
    fputs("  unexpected: ", f);
    for (int i = 0; i < sm->n; i++) {
        if (!sm->it[i].unexpected)
            continue;
        fputs(first ? "" : "; ", f);
        unexpected_detail(f, &sm->it[i]);
        first = false;
    }
    fputc('\n', f);
    return 1;
}

/* "  cheapest exact: ..." with its counted figures and the exact ones as
 * cheap. */
static void cheapest_line(FILE *f, const summary *sm, const cic_model_cfg *m)
{
    const item *b = sm->best;
    const cic_flops *fl = &b->row->flops;
    bool first = true;
    fputs("  cheapest exact: ", f);
    xf_name(f, b);
    fputc(' ', f);
    xf_how(f, b->xs);
    fprintf(f, ": %+.2f%% FLOPs, %+.1f per token at this size (d = %d, N = %d, B = %d, L = %d)",
            fl->extra_pct, fl->extra_per_token, m->d_model, m->tokens, m->samples, m->layers);
    for (int i = 0; i < sm->n; i++) {
        const item *t = &sm->it[i];
        if (t == b || !t->exact || t->row->flops.extra_total != fl->extra_total)
            continue;
        fprintf(f, first ? "; as cheap: " : ", ");
        xf_name(f, t);
        first = false;
    }
    fputc('\n', f);
}

/* "  its extra FLOPs by the formulas at B = 1 and N = ...": the row of
 * transform xi of the analytical table. */
static void formula_line(FILE *f, const cic_dit_flops_table *t, int xi)
{
    fputs("  its extra FLOPs by the formulas at B = 1 and N = ", f);
    for (int k = 0; k < CIC_DIT_TABLE_N; k++)
        fprintf(f, "%s%d", k ? " / " : "", t->tokens[k]);
    fputs(": ", f);
    for (int k = 0; k < CIC_DIT_TABLE_N; k++) {
        double p = t->xf_pct[xi][k];
        fputs(k ? " / " : "", f);
        if (isnan(p))
            fputs("n/a", f);
        else
            fprintf(f, "%+.2f%%", p);
    }
    fputc('\n', f);
}

/* "  cheaper but not exact: ..." */
static int cheaper_line(FILE *f, const summary *sm)
{
    double best = sm->best->row->flops.extra_total;
    bool first = true;
    int n = 0;
    for (int i = 0; i < sm->n; i++)
        n += !sm->it[i].exact && sm->it[i].row->flops.extra_total < best;
    if (!n)
        return 0;
    fputs("  cheaper but not exact: ", f);
    for (int i = 0; i < sm->n; i++) {
        const item *t = &sm->it[i];
        if (t->exact || !(t->row->flops.extra_total < best))
            continue;
        fputs(first ? "" : "; ", f);
        xf_name(f, t);
        fprintf(f, " (%+.2f%%)", t->row->flops.extra_pct);
        first = false;
    }
    fputc('\n', f);
    return 1;
}

int cic_report_conclusion(FILE *f, const cic_report *r)
{
    summary sm;
    const cic_model_cfg *m;
    cic_xform_chain ch;
    int lines = 2;

    if (!f || !r || !r->kase || !r->results ||
        cic_block(r->kase->model.block)->norm != CIC_NORM_ADALN)
        return 0;
    ch = cic_case_chain(r->kase); /* the transforms and their model */
    m = ch.model;
    gather(&sm, r, &ch);
    if (sm.n == 0)
        return 0;
    answer_line(f, &sm, m);
    exact_line(f, &sm, m);
    lines += partial_line(f, &sm);
    lines += none_line(f, &sm);
    lines += unexpected_line(f, &sm);
    if (sm.best) {
        int xi = (int)(sm.best->xs - ch.xf); /* its row of the analytical table */
        cheapest_line(f, &sm, m);
        lines++;
        if (r->has_dit_flops && xi < r->dit_flops.n_xf) {
            formula_line(f, &r->dit_flops, xi);
            lines++;
        }
        lines += cheaper_line(f, &sm);
    }
    if (r->has_dit_flops) {
        crossover(f, &r->dit_flops);
        lines++;
    }
    if (!r->truth_certified) {
        char b[512];
        cic_truth_words(b, sizeof b, r);
        fprintf(f, "  the truth is not proven (%s): these verdicts are not confirmed\n", b);
        lines++;
    }
    return ferror(f) ? -1 : lines;
}
