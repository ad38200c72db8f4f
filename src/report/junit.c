/* SPDX-License-Identifier: MIT */
/* junit.c: JUnit XML for CI test reporters (GitHub, GitLab, Jenkins), and
 * the regression rule names shared with baseline.c and markdown.c.
 *
 * Layout (the shape the common JUnit schema and the reporters expect):
 *
 *   <testsuites name="cicheck" tests= failures= errors= time=>
 *     <testsuite name="<case>" id= package= hostname= timestamp= tests=
 *                failures= errors= skipped= time=>
 *       <properties> cicheck_version, openblas_core, openblas_threads,
 *                    weights_sha256 (and the other versions) </properties>
 *       <testcase classname="<case>.<transform>.<engine>" name="<what>" time="0">
 *         <failure message="..." type="...">details</failure>
 *       </testcase> ...
 *       <system-out/> <system-err/>
 *     </testsuite> ...
 *   </testsuites>
 *
 * Testcases per case: one per gate result ("gate ulp_row.p99 <= 64"), one
 * per row with a verdict ("verdict equivalent (expected equivalent)"), one
 * per baseline rule ("baseline metric ulp_row.p99", failing with "old X,
 * new Y, limit Z"), and "truth certified". Case-wide checks have the case
 * name alone as classname. A case that could not run is one failed testcase
 * "run" carrying its error (type input-error for exit code 2,
 * internal-error for 3). Every failure is a <failure>; errors= is 0 (the
 * run's own errors are failures of the "run" testcase).
 *
 * Text is escaped for XML 1.0 (cic_xml_esc, text.c): & < > " ' as
 * entities; tab, newline and CR as character references (kept through
 * attribute normalisation); other bytes below 0x20, invalid UTF-8 and
 * U+FFFE/U+FFFF become '?'. Numbers in
 * names and messages are the shortest text that reads back to the same
 * double; non-finite ones are "nan", "inf", "-inf". time= attributes are
 * decimals as the schema requires: a non-finite or negative wall time is 0.
 *
 * The document is built in memory and written atomically; the file is the
 * user's (--junit FILE): a link is followed, a FIFO written in place. */
#include "report.h"
#include "text.h"

#include <assert.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* Designated initializers: each name at its rule; a rule left out at the
 * end fails the length check below, one left out in the middle is a NULL
 * that test_ciout's rule-name check catches. */
const char *const CIC_RULE_NAME[] = {
    [CIC_RULE_WEIGHTS] = "weights", [CIC_RULE_TRUTH] = "truth",   [CIC_RULE_MPFR] = "mpfr-output",
    [CIC_RULE_VERDICT] = "verdict", [CIC_RULE_FLOPS] = "flops",   [CIC_RULE_METRIC] = "metric",
    [CIC_RULE_MISSING] = "missing"};
static_assert(sizeof CIC_RULE_NAME / sizeof CIC_RULE_NAME[0] == CIC_RULE_COUNT,
              "one name per regression rule");

/* ---- text ---- */

/* A time= value: xs:decimal, never negative, never nan. */
static void fmt_time(char *buf, size_t cap, double v)
{
    if (!isfinite(v) || v < 0 || v > 1e12)
        v = 0;
    snprintf(buf, cap, "%.3f", v);
}

/* classname: case, case.transform or case.transform.engine. */
static void classname(FILE *f, const char *kase, size_t kcap, const char *xf, size_t xcap,
                      const char *eng, size_t ecap)
{
    fputs(" classname=\"", f);
    cic_xml_esc(f, kase, kcap);
    if (xf && strnlen(xf, xcap) > 0) {
        fputc('.', f);
        cic_xml_esc(f, xf, xcap);
        if (eng && strnlen(eng, ecap) > 0) {
            fputc('.', f);
            cic_xml_esc(f, eng, ecap);
        }
    }
    fputc('"', f);
}

static void failure(FILE *f, const char *type, const char *msg, const char *detail)
{
    fputs("      <failure message=\"", f);
    cic_xml_esc(f, msg, SIZE_MAX);
    fputs("\" type=\"", f);
    cic_xml_esc(f, type, SIZE_MAX);
    fputs("\">", f);
    cic_xml_esc(f, detail && detail[0] ? detail : msg, SIZE_MAX);
    fputs("</failure>\n", f);
}

/* ---- counting ---- */

typedef struct {
    int tests, failures;
} counts;

static bool can_run(const cic_report *r)
{
    return r && r->kase;
}

/* A case that could not run: no report or no case, or exit code 2 / 3. */
static bool run_failed(const cic_report *r)
{
    return !can_run(r) || r->exit_code >= CIC_EINPUT;
}

static counts count_case(const cic_report *r)
{
    counts c = {0, 0};

    if (run_failed(r)) {
        c.tests++;
        c.failures++;
    }
    if (!can_run(r))
        return c;
    for (int i = 0; r->gates && i < r->n_gates; i++) {
        c.tests++;
        c.failures += !r->gates[i].pass;
    }
    for (int i = 0; r->results && i < r->n_results; i++) {
        if (!r->results[i].has_verdict)
            continue;
        c.tests++;
        c.failures += r->results[i].verdict != r->results[i].expect;
    }
    for (int i = 0; r->regress && i < r->n_regress; i++) {
        c.tests++;
        c.failures += !r->regress[i].pass;
    }
    c.tests++;
    c.failures += !r->truth_certified;
    return c;
}

/* ---- one case ---- */

/* The case's name in the suite and the classnames: its own, "case N" when
 * there is none. Not to be copied (s may point into buf). */
typedef struct {
    char buf[CIC_NAME_MAX + 32];
    const char *s;
    size_t cap;
} case_label;

static void case_label_init(case_label *k, int idx, const cic_report *r)
{
    if (can_run(r) && strnlen(r->kase->name, sizeof r->kase->name) > 0) {
        k->s = r->kase->name;
        k->cap = sizeof r->kase->name;
        return;
    }
    snprintf(k->buf, sizeof k->buf, "case %d", idx + 1);
    k->s = k->buf;
    k->cap = sizeof k->buf;
}

/* "    <testcase classname=..." up to the name attribute. */
static void testcase_open(FILE *f, const case_label *k, const char *xf, size_t xcap,
                          const char *eng, size_t ecap)
{
    fputs("    <testcase", f);
    classname(f, k->s, k->cap, xf, xcap, eng, ecap);
}

/* <testsuite ...> with its counts, then the properties: the versions and
 * fingerprints a failure is read against. */
static void suite_open(FILE *f, int idx, const cic_report *r, const case_label *k,
                       const char *stamp)
{
    counts c = count_case(r);
    char tm[64];

    fmt_time(tm, sizeof tm, r ? r->wall_seconds : 0);
    fprintf(f, "  <testsuite name=\"");
    cic_xml_esc(f, k->s, k->cap);
    fprintf(f, "\" id=\"%d\" package=\"cicheck\" hostname=\"", idx);
    if (r && strnlen(r->env.hostname, sizeof r->env.hostname) > 0)
        cic_xml_esc(f, r->env.hostname, sizeof r->env.hostname);
    else
        fputs("localhost", f);
    fprintf(f, "\" timestamp=\"%s\" tests=\"%d\" failures=\"%d\" errors=\"0\" skipped=\"0\""
               " time=\"%s\">\n",
            stamp, c.tests, c.failures, tm);

    fputs("    <properties>\n", f);
    fprintf(f, "      <property name=\"cicheck_version\" value=\"%s\"/>\n", CIC_VERSION);
    if (r) {
        const cic_env *e = &r->env;
#define PROP(key, field)                                                      \
    do {                                                                      \
        fputs("      <property name=\"" key "\" value=\"", f);                \
        cic_xml_esc(f, field, sizeof field);                                  \
        fputs("\"/>\n", f);                                                   \
    } while (0)
        PROP("openblas_core", e->openblas_core);
        fprintf(f, "      <property name=\"openblas_threads\" value=\"%d\"/>\n",
                e->openblas_threads);
        PROP("weights_sha256", r->weights_sha256);
        PROP("truth_sha256", r->truth_sha256);
        PROP("openblas", e->openblas);
        PROP("mpfr", e->mpfr);
        PROP("gmp", e->gmp);
        PROP("compiler", e->compiler);
        if (can_run(r))
            PROP("case_path", r->kase->path);
        if (r->has_baseline)
            PROP("baseline", r->baseline_path);
#undef PROP
        fprintf(f, "      <property name=\"exit_code\" value=\"%d\"/>\n", r->exit_code);
    }
    fputs("    </properties>\n", f);
}

/* The run itself, when it failed: input-error (exit 2), internal-error (3). */
static void run_testcase(FILE *f, const cic_report *r, const case_label *k, const char *err)
{
    const char *type = "error";
    if (r && r->exit_code == CIC_EINPUT)
        type = "input-error";
    else if (r && r->exit_code == CIC_EINTERNAL)
        type = "internal-error";
    testcase_open(f, k, NULL, 0, NULL, 0);
    fputs(" name=\"run\" time=\"0\">\n", f);
    failure(f, type, err && err[0] ? err : "the case could not run", NULL);
    fputs("    </testcase>\n", f);
}

/* "gate METRIC <= LIMIT"; a failure names the case line. */
static void gate_testcase(FILE *f, const cic_report *r, const case_label *k,
                          const cic_gate_result *g)
{
    char a[64], b[64], msg[512], det[1024];
    cic_fmt_num(a, sizeof a, g->value);
    cic_fmt_num(b, sizeof b, g->limit);
    testcase_open(f, k, g->transform, sizeof g->transform, g->engine, sizeof g->engine);
    fputs(" name=\"gate ", f);
    cic_xml_esc(f, g->metric, sizeof g->metric);
    fprintf(f, " &lt;= %s\" time=\"0\"", b);
    if (g->pass) {
        fputs("/>\n", f);
        return;
    }
    fputs(">\n", f);
    snprintf(msg, sizeof msg, "%.*s = %s, limit %s",
             (int)strnlen(g->metric, sizeof g->metric), g->metric, a, b);
    snprintf(det, sizeof det, "%.*s:%d: gate %.*s <= %s on %.*s / %.*s: value %s",
             (int)strnlen(r->kase->path, sizeof r->kase->path), r->kase->path, g->line,
             (int)strnlen(g->metric, sizeof g->metric), g->metric, b,
             (int)strnlen(g->transform, sizeof g->transform), g->transform,
             (int)strnlen(g->engine, sizeof g->engine), g->engine, a);
    failure(f, "gate", msg, det);
    fputs("    </testcase>\n", f);
}

/* "verdict V (expected E)" of a row with a verdict; a failure gives the
 * ce_residual against the thresholds. */
static void verdict_testcase(FILE *f, const case_label *k, const cic_result *x)
{
    const char *got = CIC_NAME_OF(CIC_VERDICT_NAME, CIC_VERDICT_COUNT, x->verdict);
    const char *want = CIC_NAME_OF(CIC_VERDICT_NAME, CIC_VERDICT_COUNT, x->expect);
    char a[64], msg[256], det[512], lo[64], hi[64];
    testcase_open(f, k, x->transform, sizeof x->transform, x->engine, sizeof x->engine);
    fprintf(f, " name=\"verdict %s (expected %s)\" time=\"0\"", got, want);
    if (x->verdict == x->expect) {
        fputs("/>\n", f);
        return;
    }
    fputs(">\n", f);
    cic_fmt_num(a, sizeof a, x->ce_residual);
    cic_fmt_num(lo, sizeof lo, x->ce_threshold_equivalent);
    cic_fmt_num(hi, sizeof hi, x->ce_threshold_broken);
    snprintf(msg, sizeof msg, "verdict %s, expected %s", got, want);
    snprintf(det, sizeof det,
             "verdict %s, expected %s: ce_residual %s (equivalent below %s, broken "
             "above %s)",
             got, want, a, lo, hi);
    failure(f, "verdict", msg, det);
    fputs("    </testcase>\n", f);
}

/* "baseline RULE [METRIC]"; a failure gives old, new and the limit. */
static void baseline_testcase(FILE *f, const case_label *k, const cic_regress_result *g)
{
    size_t ml = strnlen(g->metric, sizeof g->metric), ll = strnlen(g->limit, sizeof g->limit);
    char msg[400];
    testcase_open(f, k, g->transform, sizeof g->transform, g->engine, sizeof g->engine);
    fprintf(f, " name=\"baseline %s", CIC_NAME_OF(CIC_RULE_NAME, CIC_RULE_COUNT, g->rule));
    if (ml) {
        fputc(' ', f);
        cic_xml_esc(f, g->metric, sizeof g->metric);
    }
    fputs("\" time=\"0\"", f);
    if (g->pass) {
        fputs("/>\n", f);
        return;
    }
    fputs(">\n", f);
    snprintf(msg, sizeof msg, "old %.*s, new %.*s, limit %.*s",
             (int)strnlen(g->old_value, sizeof g->old_value), g->old_value,
             (int)strnlen(g->new_value, sizeof g->new_value), g->new_value,
             ll ? (int)ll : (int)strlen("equal to old"), ll ? g->limit : "equal to old");
    failure(f, "regression", msg, NULL);
    fputs("    </testcase>\n", f);
}

/* "truth proven": every truth value's ball rounds to one binary32 (and
 * --recheck's recomputation agreed). */
static void truth_testcase(FILE *f, const cic_report *r, const case_label *k)
{
    char msg[512];
    testcase_open(f, k, NULL, 0, NULL, 0);
    fputs(" name=\"truth proven\" time=\"0\"", f);
    if (r->truth_certified) {
        fputs("/>\n", f);
        return;
    }
    fputs(">\n", f);
    cic_truth_words(msg, sizeof msg, r);
    failure(f, "truth", msg, NULL);
    fputs("    </testcase>\n", f);
}

static void write_case(FILE *f, int idx, const cic_report *r, const char *err,
                       const char *stamp)
{
    case_label k;

    case_label_init(&k, idx, r);
    suite_open(f, idx, r, &k, stamp);
    if (run_failed(r))
        run_testcase(f, r, &k, err);
    if (can_run(r)) {
        for (int i = 0; r->gates && i < r->n_gates; i++)
            gate_testcase(f, r, &k, &r->gates[i]);
        for (int i = 0; r->results && i < r->n_results; i++)
            if (r->results[i].has_verdict)
                verdict_testcase(f, &k, &r->results[i]);
        for (int i = 0; r->regress && i < r->n_regress; i++)
            baseline_testcase(f, &k, &r->regress[i]);
        truth_testcase(f, r, &k);
    }
    fputs("    <system-out/>\n    <system-err/>\n  </testsuite>\n", f);
}

/* ---- the document ---- */

int cic_junit_write(const char *path, const cic_report *const *r, const char *const *errors,
                    int n, cic_diag *d)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f;
    int tests = 0, fails = 0, rc;
    double wall = 0;
    char stamp[32], tm[64];
    time_t now = time(NULL);
    struct tm utc;

    if (!path || !path[0]) {
        cic_diag_set(d, "", 0, 0, "empty JUnit output file name");
        return -1;
    }
    if (n < 0 || (n > 0 && !r)) {
        cic_diag_set(d, path, 0, 0, "no reports to write");
        return -1;
    }
    /* The common schema: xs:dateTime without a time zone; UTC. */
    if (gmtime_r(&now, &utc))
        strftime(stamp, sizeof stamp, "%Y-%m-%dT%H:%M:%S", &utc);
    else
        cic_strlcpy(stamp, "1970-01-01T00:00:00", sizeof stamp);

    for (int i = 0; i < n; i++) {
        counts c = count_case(r[i]);
        tests += c.tests;
        fails += c.failures;
        if (r[i] && isfinite(r[i]->wall_seconds) && r[i]->wall_seconds > 0)
            wall += r[i]->wall_seconds;
    }
    fmt_time(tm, sizeof tm, wall);

    f = open_memstream(&buf, &len);
    if (!f) {
        cic_diag_set(d, path, 0, 0, "cannot build JUnit XML: %s", strerror(errno));
        return -1;
    }
    fputs("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n", f);
    fprintf(f, "<testsuites name=\"cicheck\" tests=\"%d\" failures=\"%d\" errors=\"0\" time=\"%s\">\n",
            tests, fails, tm);
    for (int i = 0; i < n; i++)
        write_case(f, i, r[i], errors ? errors[i] : NULL, stamp);
    fputs("</testsuites>\n", f);
    {
        int bad = ferror(f);
        bad |= fclose(f) != 0;
        if (bad || !buf) {
            cic_diag_set(d, path, 0, 0, "cannot build JUnit XML: out of memory");
            free(buf);
            return -1;
        }
    }
    rc = cic_write_atomic_user(path, buf, len, d);
    free(buf);
    return rc;
}
