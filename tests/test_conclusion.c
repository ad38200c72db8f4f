/* SPDX-License-Identifier: MIT */
/* test_conclusion.c: the words at the end of a dit run
 * (src/report/conclusion.c) on hand-built reports, one per situation the
 * conclusion has to tell apart: the usual answer (exact strategies cost
 * extra, static-fold exact only on its calibration sample and cheaper);
 * no strategy exact; every strategy exact, static-fold included, on a
 * single sample; a strategy that broke unexpectedly; the cheapest exact
 * strategy costing more than an inexact one or not; ties; a width with no
 * fast Hadamard; a truth not proven; other blocks (nothing said); the
 * Markdown summary; the formula and crossover lines printed from the
 * report's analytical table (values planted in it come out). FLOPs of the
 * hand-built rows come from the formulas (cic_flops_dit), and every
 * expected figure is recomputed here from the same inputs, never written
 * down. A randomized test checks the cheapest
 * exact strategy and the counts against a brute-force choice. */
#include "testutil.h"

#include "metric/flops.h"
#include "report/conclusion.h"
#include "report/report.h"

#include <string.h>
#include <time.h>

typedef struct {
    cic_case c;
    cic_result res[2 * CIC_MAX_XFORMS];
    cic_report r;
    char *text;
} fixture;

static void fx_init(fixture *fx, int d, int samples, int tokens)
{
    cic_model_cfg *m = &fx->c.model;
    memset(fx, 0, sizeof *fx);
    snprintf(fx->c.name, sizeof fx->c.name, "dit_case");
    m->block = CIC_BLOCK_DIT;
    m->d_model = d;
    m->heads = 4;
    m->mlp_ratio = 4;
    m->d_mlp = 4 * d;
    m->tokens = tokens;
    m->samples = samples;
    m->layers = 2;
    m->d_cond = d;
    m->d_out = d / 2;
    m->final_layer = true;
    m->act = CIC_ACT_GELU_TANH;
    fx->r.kase = &fx->c;
    fx->r.results = fx->res;
    fx->r.truth_certified = true;
    fx->r.proof.proven = true;
}

/* A transform and its verdict row; FLOPs from the formulas at the case's
 * size; every sample gets the overall verdict, except a static-fold's
 * calibration sample, which is equivalent. Before it goes an f32 row (with
 * metrics) that contradicts it and that the conclusion must ignore. */
static cic_result *fx_add(fixture *fx, const char *name, enum cic_xform_kind kind,
                          enum cic_qkind q, bool fast, enum cic_verdict verdict)
{
    cic_xform_spec *xs = &fx->c.xf[fx->c.n_xf++];
    cic_result *y = &fx->res[fx->r.n_results++], *x = &fx->res[fx->r.n_results++];
    cic_flop_count o, t;
    double R = (double)fx->c.model.tokens * fx->c.model.samples;

    memset(xs, 0, sizeof *xs);
    snprintf(xs->name, sizeof xs->name, "%s", name);
    xs->kind = kind;
    xs->q = q;
    xs->fast = fast;
    xs->after = -1;
    xs->expect = kind == CIC_XFORM_STATIC_FOLD ? CIC_VERDICT_BROKEN : CIC_VERDICT_EQUIVALENT;

    memset(x, 0, sizeof *x);
    snprintf(x->transform, sizeof x->transform, "%s", name);
    snprintf(x->engine, sizeof x->engine, "mpfr");
    x->has_verdict = true;
    x->expect = xs->expect;
    x->verdict = verdict;
    x->ce_residual = verdict == CIC_VERDICT_EQUIVALENT ? 1e-38 : 0.5;
    x->n_samples = fx->c.model.samples;
    for (int s = 0; s < x->n_samples; s++) {
        x->per_sample[s].sample = s;
        x->per_sample[s].verdict = verdict;
        x->per_sample[s].ce_residual = x->ce_residual;
        if (kind == CIC_XFORM_STATIC_FOLD && s == xs->calibration) {
            x->per_sample[s].verdict = CIC_VERDICT_EQUIVALENT;
            x->per_sample[s].ce_residual = 1e-38;
        }
    }
    cic_flops_dit(&o, &fx->c.model, NULL);
    cic_flops_dit(&t, &fx->c.model, xs);
    x->flops.baseline = cic_flop_total(&o);
    x->flops.transformed = cic_flop_total(&t);
    x->flops.extra_total = x->flops.transformed - x->flops.baseline;
    x->flops.extra_per_token = x->flops.extra_total / R;
    x->flops.extra_per_sample = x->flops.extra_total / fx->c.model.samples;
    x->flops.extra_pct = 100 * x->flops.extra_total / x->flops.baseline;
    x->pass = x->verdict == x->expect;

    *y = *x;
    snprintf(y->engine, sizeof y->engine, "f32-openblas");
    y->has_metrics = true;
    /* an f32 row that claims otherwise: the verdict row decides */
    y->verdict = verdict == CIC_VERDICT_EQUIVALENT ? CIC_VERDICT_BROKEN : CIC_VERDICT_EQUIVALENT;
    return x;
}

/* Sets the extra FLOPs of a row by hand (percent of its baseline). */
static void fx_extra(cic_result *x, double pct)
{
    x->flops.extra_total = pct / 100 * x->flops.baseline;
    x->flops.extra_pct = pct;
}

/* The analytical table of the case as it stands, as the pipeline fills it. */
static void fx_table(fixture *fx)
{
    fx->r.has_dit_flops = cic_dit_flops_table_fill(&fx->r.dit_flops, CIC_CASE_CHAIN(&fx->c));
}

/* The conclusion of the report as it stands (its table as it is). */
static int fx_say_as_is(fixture *fx)
{
    size_t len = 0;
    FILE *f;
    int n;
    free(fx->text);
    fx->text = NULL;
    f = open_memstream(&fx->text, &len);
    assert_non_null(f);
    n = cic_report_conclusion(f, &fx->r);
    assert_int_equal(fclose(f), 0);
    return n;
}

/* The conclusion after the pipeline's table of the case as it stands. */
static int fx_say(fixture *fx)
{
    fx_table(fx);
    return fx_say_as_is(fx);
}

static void fx_clear(fixture *fx)
{
    free(fx->text);
    fx->text = NULL;
}

/* The line of text that starts with prefix (after its indent), copied into
 * buf; NULL when there is none. */
static const char *line_of(const char *text, const char *prefix, char *buf, size_t cap)
{
    const char *p = text;
    while (p && *p) {
        const char *e = strchr(p, '\n'), *q = p;
        size_t n = e ? (size_t)(e - p) : strlen(p);
        while (*q == ' ')
            q++;
        if (!strncmp(q, prefix, strlen(prefix))) {
            snprintf(buf, cap, "%.*s", (int)(n - (size_t)(q - p)), q);
            return buf;
        }
        p = e ? e + 1 : NULL;
    }
    return NULL;
}

#define HAS(hay, needle)                                                          \
    do {                                                                          \
        if (!(hay) || !strstr((hay), (needle)))                                   \
            fail_msg("expected \"%s\" in:\n%s", (needle), (hay) ? (hay) : "(none)"); \
    } while (0)
#define HASNT(hay, needle)                                                        \
    do {                                                                          \
        if ((hay) && strstr((hay), (needle)))                                     \
            fail_msg("did not expect \"%s\" in:\n%s", (needle), (hay));           \
    } while (0)

static const char *LINE(fixture *fx, const char *prefix)
{
    static char buf[8][4096];
    static int k;
    k = (k + 1) % 8;
    return line_of(fx->text, prefix, buf[k], sizeof buf[k]);
}

static void fmt(char *buf, size_t cap, const char *f, double v)
{
    snprintf(buf, cap, f, v);
}

/* The crossover line must carry cic_flops_dit_crossover's values and the
 * case's N placed against them. */
static void check_crossover(fixture *fx)
{
    double nd, nf;
    char want[128];
    const char *l = LINE(fx, "crossover N*");
    const cic_model_cfg *m = &fx->c.model;
    cic_flops_dit_crossover(&nd, &nf, m);
    if (isfinite(nd)) {
        fmt(want, sizeof want, "%.1f with a dense Q", nd);
        HAS(l, want);
    }
    if (isfinite(nf)) {
        fmt(want, sizeof want, "%.1f with the fast Hadamard", nf);
        HAS(l, want);
    }
    if (isnan(nf)) {
        snprintf(want, sizeof want, "n/a with the fast Hadamard (no Hadamard matrix of order d = %d)",
                 m->d_model);
        HAS(l, want);
    }
    if (!isnan(nf) && (m->tokens < nd) == (m->tokens < nf) && m->tokens != nd && m->tokens != nf) {
        snprintf(want, sizeof want, "N = %d is %s both", m->tokens,
                 m->tokens < nd ? "below" : "above");
        HAS(l, want);
    }
}

/* The cheapest line names x with its own figures, and the next line its
 * extra at the table's sizes by the formulas. */
static void check_cheapest(fixture *fx, const cic_result *x, const cic_xform_spec *xs)
{
    char want[512];
    const char *l = LINE(fx, "cheapest exact:"), *a = LINE(fx, "its extra FLOPs");
    cic_dit_strategy s = {xs->name, xs->kind, xs->stream, xs->fast};
    snprintf(want, sizeof want, "cheapest exact: %s '%s' (", CIC_XFORM_NAME[xs->kind], xs->name);
    HAS(l, want);
    snprintf(want, sizeof want, ": %+.2f%% FLOPs, %+.1f per token at this size (d = %d, N = %d, B = %d",
             x->flops.extra_pct, x->flops.extra_per_token, fx->c.model.d_model,
             fx->c.model.tokens, fx->c.model.samples);
    HAS(l, want);
    for (int k = 0; k < CIC_DIT_TABLE_N; k++) {
        double p = cic_flops_dit_extra_pct(&fx->c.model, &s, CIC_DIT_TABLE_TOKENS[k]);
        snprintf(want, sizeof want, "%d", CIC_DIT_TABLE_TOKENS[k]);
        HAS(a, want);
        fmt(want, sizeof want, "%+.2f%%", p);
        HAS(a, want);
    }
}

/* The situation of cases/adaln.toml: online, per-sample and branch exact,
 * static-fold exact on its calibration sample only and cheaper. */
static void test_usual(void **state)
{
    fixture fx;
    cic_result *sf, *fast, *br;
    char want[256];
    (void)state;
    fx_init(&fx, 64, 4, 32);
    sf = fx_add(&fx, "sf", CIC_XFORM_STATIC_FOLD, CIC_Q_RANDOM, false, CIC_VERDICT_BROKEN);
    fx_add(&fx, "on-dense", CIC_XFORM_ONLINE_UNROTATE, CIC_Q_RANDOM, false, CIC_VERDICT_EQUIVALENT);
    fast = fx_add(&fx, "on-fast", CIC_XFORM_ONLINE_UNROTATE, CIC_Q_HADAMARD, true,
                  CIC_VERDICT_EQUIVALENT);
    fx_add(&fx, "psf", CIC_XFORM_PER_SAMPLE_FOLD, CIC_Q_RANDOM, false, CIC_VERDICT_EQUIVALENT);
    br = fx_add(&fx, "br-fast", CIC_XFORM_BRANCH_ROTATE, CIC_Q_HADAMARD, true,
                CIC_VERDICT_EQUIVALENT);
    /* the formulas say what this test relies on */
    assert_true(sf->flops.extra_total < 0);
    assert_true(fast->flops.extra_total > 0);

    assert_int_equal(fx_say(&fx), 7);
    snprintf(want, sizeof want,
             "Exactly, yes; at no extra cost, no: 4 of 5 strategies are exact on every "
             "sample, and the cheapest of them adds %+.2f%% FLOPs at this size.",
             fast->flops.extra_pct);
    HAS(LINE(&fx, "Conclusion:"), want);
    HAS(LINE(&fx, "exact on every sample"),
        "(verdict equivalent in mpfr, B = 4): online-unrotate 'on-dense', 'on-fast'; "
        "per-sample-fold 'psf'; branch-rotate 'br-fast'");
    HASNT(LINE(&fx, "exact on every sample"), "'sf'");
    HAS(LINE(&fx, "exact on some samples only:"),
        "static-fold 'sf' on sample 0 only, its calibration sample (broken on samples 1-3;");
    assert_null(LINE(&fx, "exact on no sample"));
    assert_null(LINE(&fx, "unexpected"));
    check_cheapest(&fx, fast, &fx.c.xf[2]);
    HAS(LINE(&fx, "cheapest exact:"), "(hadamard Q, fast, centered stream)");
    snprintf(want, sizeof want, "cheaper but not exact: static-fold 'sf' (%+.2f%%)",
             sf->flops.extra_pct);
    HAS(LINE(&fx, "cheaper but not exact:"), want);
    check_crossover(&fx);
    assert_null(LINE(&fx, "the truth is not proven"));

    /* the f32 rows disagree on purpose: the conclusion read the verdict rows */
    HASNT(fx.text, "f32-openblas");

    /* another calibration sample: the words follow */
    fx.c.xf[0].calibration = 2;
    for (int s = 0; s < 4; s++)
        sf->per_sample[s].verdict = s == 2 ? CIC_VERDICT_EQUIVALENT : CIC_VERDICT_BROKEN;
    fx_say(&fx);
    HAS(LINE(&fx, "exact on some samples only:"),
        "static-fold 'sf' on sample 2 only, its calibration sample (broken on samples 0, 1, 3;");
    /* exact on another sample too, then not on its calibration sample */
    sf->per_sample[0].verdict = CIC_VERDICT_EQUIVALENT;
    fx_say(&fx);
    HAS(LINE(&fx, "exact on some samples only:"),
        "static-fold 'sf' on samples 0, 2 (with its calibration sample 2) (broken on samples 1, 3;");
    HAS(LINE(&fx, "unexpected:"), "static-fold 'sf' is not broken on sample 0 (equivalent)");
    sf->per_sample[2].verdict = CIC_VERDICT_BROKEN;
    fx_say(&fx);
    HAS(LINE(&fx, "exact on some samples only:"),
        "static-fold 'sf' on sample 0 (not on its calibration sample 2) (broken on samples 1-3;");
    HAS(LINE(&fx, "unexpected:"), "static-fold 'sf' is broken on its calibration sample 2 "
                                  "(ce_residual 0.5), is not broken on sample 0 (equivalent)");
    sf->per_sample[0].verdict = CIC_VERDICT_BROKEN;
    sf->per_sample[2].verdict = CIC_VERDICT_EQUIVALENT;

    /* the fast online strategy gone: the cheapest is another one, with its
     * own figures */
    fx.c.xf[2].kind = CIC_XFORM_FUSE_LAYERNORM; /* not an adaLN kind: left out */
    fx_say(&fx);
    HAS(LINE(&fx, "Conclusion:"), "3 of 4 strategies are exact");
    check_cheapest(&fx, br, &fx.c.xf[4]);
    HASNT(fx.text, "on-fast");
    fx_clear(&fx);
}

/* Only static-folds and an online strategy that broke: nothing exact. */
static void test_none_exact(void **state)
{
    fixture fx;
    cic_result *x;
    (void)state;
    fx_init(&fx, 64, 3, 16);
    fx_add(&fx, "sf0", CIC_XFORM_STATIC_FOLD, CIC_Q_RANDOM, false, CIC_VERDICT_BROKEN);
    x = fx_add(&fx, "sf1", CIC_XFORM_STATIC_FOLD, CIC_Q_HADAMARD, false, CIC_VERDICT_BROKEN);
    fx.c.xf[1].calibration = 1;
    for (int s = 0; s < 3; s++)
        x->per_sample[s].verdict = s == 1 ? CIC_VERDICT_EQUIVALENT : CIC_VERDICT_BROKEN;
    fx_add(&fx, "on", CIC_XFORM_ONLINE_UNROTATE, CIC_Q_RANDOM, false, CIC_VERDICT_BROKEN);

    assert_int_equal(fx_say(&fx), 6);
    HAS(LINE(&fx, "Conclusion:"), "No: none of the 3 strategies is exact on every sample.");
    HAS(LINE(&fx, "exact on every sample"), "): none");
    HAS(LINE(&fx, "exact on some samples only:"),
        "static-fold 'sf0' on sample 0 only, its calibration sample (broken on samples 1, 2;");
    HAS(LINE(&fx, "exact on some samples only:"),
        "static-fold 'sf1' on sample 1 only, its calibration sample (broken on samples 0, 2;");
    HAS(LINE(&fx, "exact on no sample:"), "online-unrotate 'on' (broken, ce_residual 0.5)");
    HAS(LINE(&fx, "unexpected:"),
        "online-unrotate 'on' is broken (ce_residual 0.5) where the case expects equivalent");
    assert_null(LINE(&fx, "cheapest exact"));
    assert_null(LINE(&fx, "cheaper but not exact"));
    check_crossover(&fx);

    /* one strategy only */
    fx.c.n_xf = 1;
    fx_say(&fx);
    HAS(LINE(&fx, "Conclusion:"), "No: the one strategy is not exact on every sample.");
    fx_clear(&fx);
}

/* samples = 1: static-fold is exact too (on its only sample), and the
 * cheapest exact strategy saves FLOPs. */
static void test_single_sample(void **state)
{
    fixture fx;
    cic_result *sf;
    char want[256];
    (void)state;
    fx_init(&fx, 64, 1, 32);
    sf = fx_add(&fx, "sf", CIC_XFORM_STATIC_FOLD, CIC_Q_RANDOM, false, CIC_VERDICT_EQUIVALENT);
    fx.c.xf[0].expect = sf->expect = CIC_VERDICT_EQUIVALENT;
    fx_add(&fx, "on-fast", CIC_XFORM_ONLINE_UNROTATE, CIC_Q_HADAMARD, true, CIC_VERDICT_EQUIVALENT);
    fx_add(&fx, "psf", CIC_XFORM_PER_SAMPLE_FOLD, CIC_Q_RANDOM, false, CIC_VERDICT_EQUIVALENT);

    fx_say(&fx);
    snprintf(want, sizeof want,
             "Yes on this case's single sample: 3 of 3 strategies are exact on every sample, "
             "and the cheapest of them needs %.2f%% fewer FLOPs at this size.",
             -sf->flops.extra_pct);
    HAS(LINE(&fx, "Conclusion:"), want);
    HAS(LINE(&fx, "every strategy is exact on every sample"),
        "(verdict equivalent in mpfr, B = 1): static-fold 'sf'; online-unrotate 'on-fast'; "
        "per-sample-fold 'psf' (static-fold: the calibration sample is the only sample)");
    check_cheapest(&fx, sf, &fx.c.xf[0]);
    assert_null(LINE(&fx, "exact on some samples only"));
    assert_null(LINE(&fx, "cheaper but not exact"));
    assert_null(LINE(&fx, "unexpected"));

    /* with the loader's default expect (broken), the equivalent verdict is
     * unexpected and said so */
    fx.c.xf[0].expect = sf->expect = CIC_VERDICT_BROKEN;
    fx_say(&fx);
    HAS(LINE(&fx, "unexpected:"), "static-fold 'sf' is equivalent (ce_residual 1e-38) where the "
                                  "case expects broken");

    /* static-fold not counted as exact: the answer changes sign */
    sf->verdict = sf->per_sample[0].verdict = CIC_VERDICT_BROKEN;
    fx_say(&fx);
    HAS(LINE(&fx, "Conclusion:"), "Exactly, yes; at no extra cost, no: 2 of 3 strategies");
    HAS(LINE(&fx, "exact on no sample:"), "static-fold 'sf' (broken");
    HAS(LINE(&fx, "unexpected:"), "static-fold 'sf' is broken on its calibration sample 0");
    fx_clear(&fx);
}

/* An exact strategy breaks unexpectedly: it leaves the exact list, the
 * cheapest exact is the next one, and the line of surprises names it. */
static void test_unexpected_break(void **state)
{
    fixture fx;
    cic_result *fast, *br;
    (void)state;
    fx_init(&fx, 64, 2, 32);
    fast = fx_add(&fx, "on-fast", CIC_XFORM_ONLINE_UNROTATE, CIC_Q_HADAMARD, true,
                  CIC_VERDICT_EQUIVALENT);
    br = fx_add(&fx, "br-fast", CIC_XFORM_BRANCH_ROTATE, CIC_Q_HADAMARD, true, CIC_VERDICT_EQUIVALENT);
    fx_say(&fx);
    check_cheapest(&fx, fast, &fx.c.xf[0]);
    assert_null(LINE(&fx, "unexpected"));

    fast->verdict = CIC_VERDICT_BROKEN;
    fast->ce_residual = 0.25;
    for (int s = 0; s < 2; s++)
        fast->per_sample[s].verdict = CIC_VERDICT_BROKEN;
    fx_say(&fx);
    HAS(LINE(&fx, "Conclusion:"), "1 of 2 strategies is exact on every sample, and it adds");
    HAS(LINE(&fx, "unexpected:"),
        "online-unrotate 'on-fast' is broken (ce_residual 0.25) where the case expects equivalent");
    HAS(LINE(&fx, "exact on no sample:"), "online-unrotate 'on-fast' (broken, ce_residual 0.25)");
    check_cheapest(&fx, br, &fx.c.xf[1]);
    /* broken and cheaper than the cheapest exact one */
    HAS(LINE(&fx, "cheaper but not exact:"), "online-unrotate 'on-fast'");

    /* equivalent overall but inconclusive on one sample: exact on some
     * samples only */
    fast->verdict = CIC_VERDICT_EQUIVALENT;
    fast->per_sample[0].verdict = CIC_VERDICT_EQUIVALENT;
    fast->per_sample[1].verdict = CIC_VERDICT_INCONCLUSIVE;
    fx_say(&fx);
    HAS(LINE(&fx, "exact on some samples only:"),
        "online-unrotate 'on-fast' on sample 0 (inconclusive on sample 1; equivalent overall");
    fx_clear(&fx);
}

/* Whether an inexact strategy is cheaper than the cheapest exact one is
 * read from the FLOPs, and ties are named. */
static void test_costs(void **state)
{
    fixture fx;
    cic_result *sf, *a, *b;
    (void)state;
    fx_init(&fx, 64, 4, 32);
    sf = fx_add(&fx, "sf", CIC_XFORM_STATIC_FOLD, CIC_Q_RANDOM, false, CIC_VERDICT_BROKEN);
    a = fx_add(&fx, "on-random", CIC_XFORM_ONLINE_UNROTATE, CIC_Q_RANDOM, false,
               CIC_VERDICT_EQUIVALENT);
    b = fx_add(&fx, "on-hadamard", CIC_XFORM_ONLINE_UNROTATE, CIC_Q_HADAMARD, false,
               CIC_VERDICT_EQUIVALENT);
    assert_true(a->flops.extra_total == b->flops.extra_total);
    fx_say(&fx);
    check_cheapest(&fx, a, &fx.c.xf[1]);
    HAS(LINE(&fx, "cheapest exact:"), "; as cheap: online-unrotate 'on-hadamard'");
    HAS(LINE(&fx, "cheaper but not exact:"), "static-fold 'sf'");

    /* the inexact one made dearer than the exact ones: no such line */
    fx_extra(sf, a->flops.extra_pct + 1);
    fx_say(&fx);
    assert_null(LINE(&fx, "cheaper but not exact"));

    /* an exact strategy at no extra cost, and one that saves */
    fx_extra(b, 0);
    fx_say(&fx);
    HAS(LINE(&fx, "Conclusion:"), "Yes: 2 of 3 strategies are exact on every sample, and the "
                                  "cheapest of them adds no FLOPs at this size.");
    check_cheapest(&fx, b, &fx.c.xf[2]);
    HASNT(LINE(&fx, "cheapest exact:"), "as cheap");
    fx_extra(a, -1.5);
    fx_say(&fx);
    HAS(LINE(&fx, "Conclusion:"), "Yes: 2 of 3 strategies are exact on every sample, and the "
                                  "cheapest of them needs 1.50% fewer FLOPs at this size.");
    fx_clear(&fx);
}

/* A width with no Hadamard construction: the fast crossover is n/a, and
 * the case's N is placed against the dense one only; a large N is above. */
static void test_crossover(void **state)
{
    fixture fx;
    double nd, nf;
    char want[128];
    (void)state;
    fx_init(&fx, 36 * 8 + 4, 2, 32); /* 292 = 4 * 73: no construction */
    fx_add(&fx, "on", CIC_XFORM_ONLINE_UNROTATE, CIC_Q_RANDOM, false, CIC_VERDICT_EQUIVALENT);
    cic_flops_dit_crossover(&nd, &nf, &fx.c.model);
    assert_true(isnan(nf) && isfinite(nd));
    fx_say(&fx);
    check_crossover(&fx);
    snprintf(want, sizeof want, "N = 32 is %s the dense N*", 32 < nd ? "below" : "above");
    HAS(LINE(&fx, "crossover N*"), want);

    fx_clear(&fx);
    fx_init(&fx, 64, 1, 1 << 20);
    fx_add(&fx, "on", CIC_XFORM_ONLINE_UNROTATE, CIC_Q_RANDOM, false, CIC_VERDICT_EQUIVALENT);
    fx_say(&fx);
    check_crossover(&fx);
    HAS(LINE(&fx, "crossover N*"), "is above both");
    fx_clear(&fx);
}

static void test_nothing_to_say(void **state)
{
    fixture fx;
    cic_result *x;
    (void)state;
    fx_init(&fx, 64, 2, 8);
    /* no transforms */
    assert_int_equal(fx_say(&fx), 0);
    assert_string_equal(fx.text, "");
    x = fx_add(&fx, "on", CIC_XFORM_ONLINE_UNROTATE, CIC_Q_RANDOM, false, CIC_VERDICT_EQUIVALENT);
    assert_true(fx_say(&fx) > 0);
    /* another block */
    fx.c.model.block = CIC_BLOCK_PRELN;
    assert_int_equal(fx_say(&fx), 0);
    assert_string_equal(fx.text, "");
    fx.c.model.block = CIC_BLOCK_DIT;
    /* no verdict row for the transform */
    x->has_verdict = false;
    assert_int_equal(fx_say(&fx), 0);
    x->has_verdict = true;
    /* no case */
    fx.r.kase = NULL;
    assert_int_equal(fx_say(&fx), 0);
    assert_int_equal(cic_report_conclusion(NULL, &fx.r), 0);
    fx.r.kase = &fx.c;
    /* a truth not proven is said, with why */
    fx.r.truth_certified = false;
    fx.r.proof.proven = false;
    cic_strlcpy(fx.r.proof.why, "an op a transform adds has no error bound",
                sizeof fx.r.proof.why);
    fx_say(&fx);
    HAS(LINE(&fx, "the truth is not proven"), "(NOT proven: an op a transform adds has no error bound)");
    fx_clear(&fx);
}

/* Random verdicts and costs: the cheapest exact strategy named is the
 * brute-force one, the counts are right. */
static void test_random(void **state)
{
    unsigned seed = (unsigned)time(NULL);
    int iters = 200 * cic_test_multiplier();
    (void)state;
    srand(seed);
    for (int it = 0; it < iters; it++) {
        fixture fx;
        int n = 1 + rand() % 8, n_exact = 0, best = -1;
        char want[256];
        fx_init(&fx, 64, 1 + rand() % 4, 8 << (rand() % 6));
        for (int i = 0; i < n; i++) {
            static const enum cic_xform_kind kinds[] = {
                CIC_XFORM_STATIC_FOLD, CIC_XFORM_ONLINE_UNROTATE, CIC_XFORM_PER_SAMPLE_FOLD,
                CIC_XFORM_BRANCH_ROTATE};
            char name[16];
            bool eq = rand() % 2;
            cic_result *x;
            snprintf(name, sizeof name, "t%d", i);
            x = fx_add(&fx, name, kinds[rand() % 4], CIC_Q_RANDOM, false,
                       eq ? CIC_VERDICT_EQUIVALENT : CIC_VERDICT_BROKEN);
            fx_extra(x, (rand() % 2001 - 1000) / 10.0);
        }
        for (int i = 0; i < n; i++) {
            const cic_result *x = &fx.res[2 * i + 1];
            bool exact = x->verdict == CIC_VERDICT_EQUIVALENT;
            for (int s = 0; s < x->n_samples; s++)
                exact = exact && x->per_sample[s].verdict == CIC_VERDICT_EQUIVALENT;
            n_exact += exact;
            if (exact &&
                (best < 0 || x->flops.extra_total < fx.res[2 * best + 1].flops.extra_total))
                best = i;
        }
        fx_say(&fx);
        if (best < 0) {
            if (LINE(&fx, "cheapest exact"))
                fail_msg("seed %u iteration %d: no exact strategy, yet:\n%s", seed, it, fx.text);
        } else {
            snprintf(want, sizeof want, "%d of %d strateg%s %s exact", n_exact, n,
                     n == 1 ? "y" : "ies", n_exact == 1 ? "is" : "are");
            if (!strstr(fx.text, want))
                fail_msg("seed %u iteration %d: expected \"%s\" in:\n%s", seed, it, want, fx.text);
            snprintf(want, sizeof want, "cheapest exact: %s 't%d' ",
                     CIC_XFORM_NAME[fx.c.xf[best].kind], best);
            if (!strstr(fx.text, want))
                fail_msg("seed %u iteration %d: expected \"%s\" in:\n%s", seed, it, want, fx.text);
        }
        fx_clear(&fx);
    }
}

/* The Markdown summary ends with the conclusion, escaped, as a list. */
static void test_markdown(void **state)
{
    fixture fx;
    const cic_report *rp[1];
    char path[1100], *buf, *p;
    cic_diag d;
    (void)state;
    fx_init(&fx, 64, 4, 32);
    fx_add(&fx, "sf", CIC_XFORM_STATIC_FOLD, CIC_Q_RANDOM, false, CIC_VERDICT_BROKEN);
    fx_add(&fx, "on_fast", CIC_XFORM_ONLINE_UNROTATE, CIC_Q_HADAMARD, true, CIC_VERDICT_EQUIVALENT);
    fx.r.pass = true;
    fx_table(&fx);
    rp[0] = &fx.r;
    cic_test_tmp_path(path, sizeof path, "conclusion.md");
    assert_int_equal(cic_markdown_write(path, rp, NULL, 1, false, &d), 0);
    buf = cic_test_slurp(path, NULL);
    HAS(buf, "\n**dit\\_case**: Conclusion: can this adaLN block be rotated exactly");
    HAS(buf, "\n- exact on every sample (verdict equivalent in mpfr, B = 4): online-unrotate "
             "'on\\_fast'\n");
    HAS(buf, "\n- cheapest exact: online-unrotate 'on\\_fast' (hadamard Q, fast, centered stream)");
    HAS(buf, "\n- crossover N\\* (");
    /* the conclusion is last: after the crossover line only the end */
    p = strstr(buf, "\n- crossover N\\*");
    p = strchr(p + 1, '\n');
    assert_non_null(p);
    assert_string_equal(p, "\n\n");
    free(buf);
    fx_clear(&fx);
}

/* The conclusion prints the report's analytical table, not the formulas:
 * values planted in the table come out in the formula and crossover
 * lines (and in the Markdown summary); without a table those two lines are
 * left out and the others stay. */
static void test_from_table(void **state)
{
    fixture fx;
    cic_dit_flops_table *t = &fx.r.dit_flops;
    const cic_report *rp[1] = {&fx.r};
    char path[1100], *buf;
    size_t blen;
    cic_diag d;
    int n;
    (void)state;
    fx_init(&fx, 64, 4, 32);
    fx_add(&fx, "sf", CIC_XFORM_STATIC_FOLD, CIC_Q_RANDOM, false, CIC_VERDICT_BROKEN);
    fx_add(&fx, "on-fast", CIC_XFORM_ONLINE_UNROTATE, CIC_Q_HADAMARD, true,
           CIC_VERDICT_EQUIVALENT);
    n = fx_say(&fx);
    assert_true(fx.r.has_dit_flops);
    t->tokens[6] = 77777;
    t->xf_pct[1][3] = 55.55;   /* on-fast, the cheapest exact, at tokens[3] */
    t->xf_pct[1][4] = NAN;
    t->xf_pct[0][3] = -99.0;   /* sf: not the cheapest exact, not printed */
    t->nstar_dense = 12.5;
    t->nstar_fast = INFINITY;
    t->cfg.tokens = 20;
    assert_int_equal(fx_say_as_is(&fx), n);
    HAS(LINE(&fx, "its extra FLOPs by the formulas"),
        "N = 16 / 64 / 256 / 1024 / 4096 / 16384 / 77777: ");
    HAS(LINE(&fx, "its extra FLOPs by the formulas"), " / +55.55% / n/a / ");
    HASNT(fx.text, "-99.00%");
    HAS(LINE(&fx, "crossover N*"), ": 12.5 with a dense Q, never with the fast Hadamard; this "
                                   "case's N = 20 is above the dense N*");
    /* the Markdown summary, which repeats the conclusion */
    cic_test_tmp_path(path, sizeof path, "table.md");
    assert_int_equal(cic_markdown_write(path, rp, NULL, 1, false, &d), 0);
    buf = cic_test_slurp(path, &blen);
    assert_true(blen > 0);
    HAS(buf, "\n- its extra FLOPs by the formulas at B = 1 and N = 16 / 64 / 256 / 1024 / 4096 "
             "/ 16384 / 77777: ");
    HAS(buf, "\n- crossover N\\* (tokens per sample above which per-sample-fold costs fewer "
             "FLOPs than online-unrotate): 12.5 with a dense Q");
    free(buf);

    /* no table: the lines from it go, the others stay */
    fx.r.has_dit_flops = false;
    assert_int_equal(fx_say_as_is(&fx), n - 2);
    assert_null(LINE(&fx, "its extra FLOPs"));
    assert_null(LINE(&fx, "crossover N*"));
    HAS(LINE(&fx, "cheapest exact:"), "online-unrotate 'on-fast'");
    HAS(LINE(&fx, "Conclusion:"), "1 of 2 strategies is exact on every sample, and it adds");
    fx_clear(&fx);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_usual),
        cmocka_unit_test(test_none_exact),
        cmocka_unit_test(test_single_sample),
        cmocka_unit_test(test_unexpected_break),
        cmocka_unit_test(test_costs),
        cmocka_unit_test(test_crossover),
        cmocka_unit_test(test_nothing_to_say),
        cmocka_unit_test(test_random),
        cmocka_unit_test(test_markdown),
        cmocka_unit_test(test_from_table),
    };
    return cmocka_run_group_tests(tests, cic_test_tmp_setup, cic_test_tmp_teardown);
}
