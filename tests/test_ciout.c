/* SPDX-License-Identifier: MIT */
/* test_ciout.c: the CI outputs (junit.c, markdown.c) read back the way CI
 * reads them. Reports are built by hand (no engine run): a case with
 * passing and failing gates, an unexpected verdict and failed baseline
 * rules, a clean case, and a case that could not run (NULL report with an
 * error). The JUnit file must be well-formed XML (xmllint --noout) and
 * valid against the common JUnit schema shape (xmllint --schema with the
 * XSD below), with tests=/failures= matching what was put in; names with
 * XML specials, control bytes and invalid UTF-8 must come out escaped. The
 * checker itself is shown able to fail: hand-written XML with a bare '&',
 * and a JUnit file with time="nan", are refused. Markdown: the case lines,
 * the failure table, and append mode keeping earlier text. The escaping
 * both share (text.c) is checked byte by byte. */
#include "testutil.h"

#include "report/report.h"
#include "report/text.h"

#include <string.h>

static int count_of(const char *hay, const char *needle)
{
    int n = 0;
    size_t l = strlen(needle);
    for (const char *p = strstr(hay, needle); p; p = strstr(p + l, needle))
        n++;
    return n;
}

/* Integer value of attribute attr in the start tag at tag (e.g. the text
 * from "<testsuite "), or -1. */
static int attr_int(const char *tag, const char *attr)
{
    char key[64];
    const char *end = strchr(tag, '>'), *p;
    snprintf(key, sizeof key, " %s=\"", attr);
    p = strstr(tag, key);
    if (!p || !end || p > end)
        return -1;
    return atoi(p + strlen(key));
}

/* 0 when xmllint accepts the file (well-formed; and valid if xsd). */
static int xmllint(const char *file, const char *xsd)
{
    char cmd[4096];
    int rc;
    if (xsd)
        snprintf(cmd, sizeof cmd, "xmllint --noout --schema '%s' '%s' 2>'%s/xmllint.err'", xsd,
                 file, cic_test_tmp);
    else
        snprintf(cmd, sizeof cmd, "xmllint --noout '%s' 2>'%s/xmllint.err'", file, cic_test_tmp);
    rc = system(cmd);
    if (rc != 0) {
        char err[1100];
        char *t = cic_test_slurp(cic_test_tmp_path(err, sizeof err, "xmllint.err"), NULL);
        fprintf(stderr, "xmllint (%d): %.2000s\n", rc, t);
        free(t);
    }
    return rc;
}

/* The common JUnit shape (Ant / Jenkins / GitLab): required counters,
 * decimal times, timestamp without zone, properties before testcases,
 * failure with message and type, system-out / system-err last. */
static const char *const JUNIT_XSD =
    "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
    "<xs:schema xmlns:xs=\"http://www.w3.org/2001/XMLSchema\" elementFormDefault=\"qualified\">\n"
    " <xs:simpleType name=\"ts\"><xs:restriction base=\"xs:dateTime\">\n"
    "  <xs:pattern value=\"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\"/>\n"
    " </xs:restriction></xs:simpleType>\n"
    " <xs:element name=\"testsuites\"><xs:complexType>\n"
    "  <xs:sequence><xs:element ref=\"testsuite\" minOccurs=\"0\" maxOccurs=\"unbounded\"/></xs:sequence>\n"
    "  <xs:attribute name=\"name\" type=\"xs:string\"/>\n"
    "  <xs:attribute name=\"tests\" type=\"xs:nonNegativeInteger\" use=\"required\"/>\n"
    "  <xs:attribute name=\"failures\" type=\"xs:nonNegativeInteger\" use=\"required\"/>\n"
    "  <xs:attribute name=\"errors\" type=\"xs:nonNegativeInteger\" use=\"required\"/>\n"
    "  <xs:attribute name=\"time\" type=\"xs:decimal\"/>\n"
    " </xs:complexType></xs:element>\n"
    " <xs:element name=\"testsuite\"><xs:complexType>\n"
    "  <xs:sequence>\n"
    "   <xs:element name=\"properties\" minOccurs=\"0\"><xs:complexType><xs:sequence>\n"
    "    <xs:element name=\"property\" minOccurs=\"0\" maxOccurs=\"unbounded\"><xs:complexType>\n"
    "     <xs:attribute name=\"name\" type=\"xs:string\" use=\"required\"/>\n"
    "     <xs:attribute name=\"value\" type=\"xs:string\" use=\"required\"/>\n"
    "    </xs:complexType></xs:element>\n"
    "   </xs:sequence></xs:complexType></xs:element>\n"
    "   <xs:element name=\"testcase\" minOccurs=\"0\" maxOccurs=\"unbounded\"><xs:complexType>\n"
    "    <xs:choice minOccurs=\"0\" maxOccurs=\"unbounded\">\n"
    "     <xs:element name=\"failure\"><xs:complexType><xs:simpleContent>\n"
    "      <xs:extension base=\"xs:string\">\n"
    "       <xs:attribute name=\"message\" type=\"xs:string\" use=\"required\"/>\n"
    "       <xs:attribute name=\"type\" type=\"xs:string\" use=\"required\"/>\n"
    "      </xs:extension></xs:simpleContent></xs:complexType></xs:element>\n"
    "    </xs:choice>\n"
    "    <xs:attribute name=\"name\" type=\"xs:string\" use=\"required\"/>\n"
    "    <xs:attribute name=\"classname\" type=\"xs:string\" use=\"required\"/>\n"
    "    <xs:attribute name=\"time\" type=\"xs:decimal\" use=\"required\"/>\n"
    "   </xs:complexType></xs:element>\n"
    "   <xs:element name=\"system-out\" type=\"xs:string\" minOccurs=\"0\"/>\n"
    "   <xs:element name=\"system-err\" type=\"xs:string\" minOccurs=\"0\"/>\n"
    "  </xs:sequence>\n"
    "  <xs:attribute name=\"name\" type=\"xs:string\" use=\"required\"/>\n"
    "  <xs:attribute name=\"id\" type=\"xs:int\"/>\n"
    "  <xs:attribute name=\"package\" type=\"xs:string\"/>\n"
    "  <xs:attribute name=\"hostname\" type=\"xs:string\"/>\n"
    "  <xs:attribute name=\"timestamp\" type=\"ts\"/>\n"
    "  <xs:attribute name=\"tests\" type=\"xs:nonNegativeInteger\" use=\"required\"/>\n"
    "  <xs:attribute name=\"failures\" type=\"xs:nonNegativeInteger\" use=\"required\"/>\n"
    "  <xs:attribute name=\"errors\" type=\"xs:nonNegativeInteger\" use=\"required\"/>\n"
    "  <xs:attribute name=\"skipped\" type=\"xs:nonNegativeInteger\"/>\n"
    "  <xs:attribute name=\"time\" type=\"xs:decimal\" use=\"required\"/>\n"
    " </xs:complexType></xs:element>\n"
    "</xs:schema>\n";

/* ---- hand-made reports ---- */

static cic_case g_case_a, g_case_b;
static cic_result g_res_a[3], g_res_b[2];
static cic_gate_result g_gate_a[3], g_gate_b[1];
static cic_regress_result g_reg_a[3];
static cic_report g_rep_a, g_rep_b;

#define NAME_A "la<&\"'>yer \xc3\xbcn\xc3\xaf"

static void set_row(cic_result *x, const char *xf, const char *eng, bool hv,
                    enum cic_verdict expect, enum cic_verdict got)
{
    memset(x, 0, sizeof *x);
    cic_strlcpy(x->transform, xf, sizeof x->transform);
    cic_strlcpy(x->engine, eng, sizeof x->engine);
    x->has_verdict = hv;
    x->expect = expect;
    x->verdict = got;
    x->ce_residual = got == CIC_VERDICT_BROKEN ? 0.5 : 1e-9;
    x->ce_threshold_equivalent = 1e-6;
    x->ce_threshold_broken = 1e-3;
    x->pass = !hv || expect == got;
}

static void set_gate(cic_gate_result *g, const char *xf, const char *eng, const char *metric,
                     double value, double limit, int line)
{
    memset(g, 0, sizeof *g);
    cic_strlcpy(g->transform, xf, sizeof g->transform);
    cic_strlcpy(g->engine, eng, sizeof g->engine);
    cic_strlcpy(g->metric, metric, sizeof g->metric);
    g->value = value;
    g->limit = limit;
    g->pass = value <= limit;
    g->line = line;
}

static void set_reg(cic_regress_result *g, enum cic_regress_rule rule, const char *xf,
                    const char *eng, const char *metric, const char *old, const char *nw,
                    const char *limit, bool pass)
{
    memset(g, 0, sizeof *g);
    g->rule = rule;
    cic_strlcpy(g->transform, xf, sizeof g->transform);
    cic_strlcpy(g->engine, eng, sizeof g->engine);
    cic_strlcpy(g->metric, metric, sizeof g->metric);
    cic_strlcpy(g->old_value, old, sizeof g->old_value);
    cic_strlcpy(g->new_value, nw, sizeof g->new_value);
    cic_strlcpy(g->limit, limit, sizeof g->limit);
    g->pass = pass;
}

/* Case A: 3 gates (2 fail), 2 verdict rows (1 fails), 3 baseline rules
 * (2 fail), truth proven: 9 tests, 5 failures.
 * Case B: 1 gate, 1 verdict row, no baseline, truth: 3 tests, 0 failures.
 * Case C: NULL report, input error: 1 test, 1 failure. */
static void build_reports(void)
{
    memset(&g_case_a, 0, sizeof g_case_a);
    memset(&g_case_b, 0, sizeof g_case_b);
    cic_strlcpy(g_case_a.name, NAME_A, sizeof g_case_a.name);
    cic_strlcpy(g_case_a.path, "cases/a&b.toml", sizeof g_case_a.path);
    cic_strlcpy(g_case_b.name, "rotate", sizeof g_case_b.name);
    cic_strlcpy(g_case_b.path, "cases/rotate.toml", sizeof g_case_b.path);

    set_row(&g_res_a[0], "none", "f32-openblas", false, 0, 0);
    set_row(&g_res_a[1], "fuse", "f32-openblas", true, CIC_VERDICT_EQUIVALENT,
            CIC_VERDICT_EQUIVALENT);
    set_row(&g_res_a[2], "fuse-bad", "f32-openblas", true, CIC_VERDICT_EQUIVALENT,
            CIC_VERDICT_BROKEN);
    set_gate(&g_gate_a[0], "fuse", "f32-openblas", "ulp_row.p99", 12.5, 64, 10);
    set_gate(&g_gate_a[1], "fuse-bad", "f32-openblas", "ulp_row.p99", 80, 64, 12);
    set_gate(&g_gate_a[2], "fuse-bad", "f32-fixed-order", "rel_norm2", NAN, INFINITY, 14);
    set_reg(&g_reg_a[0], CIC_RULE_WEIGHTS, "", "", "", "aaaa", "bbbb", "", false);
    set_reg(&g_reg_a[1], CIC_RULE_METRIC, "fuse", "f32-openblas", "max_abs", "1e-06", "3e-06",
            "2e-06", false);
    set_reg(&g_reg_a[2], CIC_RULE_VERDICT, "fuse", "f32-openblas", "", "equivalent",
            "equivalent", "", true);

    memset(&g_rep_a, 0, sizeof g_rep_a);
    g_rep_a.kase = &g_case_a;
    cic_strlcpy(g_rep_a.env.openblas_core, "Haswell", sizeof g_rep_a.env.openblas_core);
    g_rep_a.env.openblas_threads = 1;
    cic_strlcpy(g_rep_a.env.hostname, "ci-runner", sizeof g_rep_a.env.hostname);
    g_rep_a.results = g_res_a;
    g_rep_a.n_results = 3;
    g_rep_a.gates = g_gate_a;
    g_rep_a.n_gates = 3;
    g_rep_a.truth_certified = true;
    g_rep_a.proof.proven = true;
    cic_strlcpy(g_rep_a.weights_sha256, "0123abcd", sizeof g_rep_a.weights_sha256);
    g_rep_a.wall_seconds = 1.25;
    g_rep_a.pass = false;
    g_rep_a.has_baseline = true;
    cic_strlcpy(g_rep_a.baseline_path, "reference/a.json", sizeof g_rep_a.baseline_path);
    g_rep_a.regress = g_reg_a;
    g_rep_a.n_regress = 3;
    g_rep_a.exit_code = 1;

    set_row(&g_res_b[0], "none", "f32-openblas", false, 0, 0);
    set_row(&g_res_b[1], "rot", "f32-openblas", true, CIC_VERDICT_BROKEN, CIC_VERDICT_BROKEN);
    set_gate(&g_gate_b[0], "rot", "*", "max_abs", 0.001, INFINITY, 20);
    memset(&g_rep_b, 0, sizeof g_rep_b);
    g_rep_b.kase = &g_case_b;
    g_rep_b.results = g_res_b;
    g_rep_b.n_results = 2;
    g_rep_b.gates = g_gate_b;
    g_rep_b.n_gates = 1;
    g_rep_b.truth_certified = true;
    g_rep_b.proof.proven = true;
    g_rep_b.wall_seconds = NAN; /* time= must still be a decimal */
    g_rep_b.pass = true;
}

#define ERR_C "cases/bad.toml:3:1: unknown key 'd<model>' & \x01more\xff"

static const cic_report *g_reps[3];
static const char *const g_errs[3] = {NULL, NULL, ERR_C};

static void build_all(void)
{
    build_reports();
    g_reps[0] = &g_rep_a;
    g_reps[1] = &g_rep_b;
    g_reps[2] = NULL;
}

/* ---- JUnit ---- */

static void test_junit(void **state)
{
    char path[1100], xsd[1100];
    cic_diag d;
    char *x;
    const char *p;
    int suite_tests[3] = {9, 3, 1}, suite_fail[3] = {5, 0, 1}, k = 0;
    (void)state;

    build_all();
    cic_test_tmp_path(path, sizeof path, "junit.xml");
    memset(&d, 0, sizeof d);
    assert_int_equal(cic_junit_write(path, g_reps, g_errs, 3, &d), 0);
    x = cic_test_slurp(path, NULL);

    /* totals on <testsuites>, then each <testsuite> */
    p = strstr(x, "<testsuites ");
    assert_non_null(p);
    assert_int_equal(attr_int(p, "tests"), 13);
    assert_int_equal(attr_int(p, "failures"), 6);
    assert_int_equal(attr_int(p, "errors"), 0);
    for (p = strstr(x, "<testsuite "); p; p = strstr(p + 1, "<testsuite ")) {
        assert_true(k < 3);
        assert_int_equal(attr_int(p, "tests"), suite_tests[k]);
        assert_int_equal(attr_int(p, "failures"), suite_fail[k]);
        k++;
    }
    assert_int_equal(k, 3);
    assert_int_equal(count_of(x, "<testcase "), 13);
    assert_int_equal(count_of(x, "<failure "), 6);

    /* names: escaped, UTF-8 kept */
    assert_non_null(strstr(x, "name=\"la&lt;&amp;&quot;&apos;&gt;yer \xc3\xbcn\xc3\xaf\""));
    assert_null(strstr(x, "la<&"));
    assert_non_null(
        strstr(x, "classname=\"la&lt;&amp;&quot;&apos;&gt;yer \xc3\xbcn\xc3\xaf.fuse-bad.f32-openblas\""));
    /* testcases as specified */
    assert_non_null(strstr(x, "name=\"gate ulp_row.p99 &lt;= 64\""));
    assert_non_null(strstr(x, "name=\"gate max_abs &lt;= inf\""));
    assert_non_null(strstr(x, "name=\"verdict equivalent (expected equivalent)\""));
    assert_non_null(strstr(x, "name=\"verdict broken (expected equivalent)\""));
    assert_non_null(strstr(x, "name=\"verdict broken (expected broken)\""));
    assert_non_null(strstr(x, "name=\"baseline weights\""));
    assert_non_null(strstr(x, "name=\"baseline metric max_abs\""));
    assert_non_null(strstr(x, "message=\"old 1e-06, new 3e-06, limit 2e-06\""));
    assert_non_null(strstr(x, "message=\"old aaaa, new bbbb, limit equal to old\""));
    assert_int_equal(count_of(x, "name=\"truth proven\""), 2);
    assert_non_null(strstr(x, "message=\"rel_norm2 = nan, limit inf\""));
    assert_non_null(strstr(x, "message=\"ulp_row.p99 = 80, limit 64\""));
    /* the failed run: its error, escaped, control and bad bytes replaced */
    assert_non_null(strstr(x, "<testsuite name=\"case 3\""));
    assert_non_null(strstr(x, "name=\"run\""));
    assert_non_null(strstr(
        x, "message=\"cases/bad.toml:3:1: unknown key &apos;d&lt;model&gt;&apos; &amp; ?more?\""));
    /* properties */
    assert_non_null(strstr(x, "<property name=\"cicheck_version\" value=\"" CIC_VERSION "\"/>"));
    assert_non_null(strstr(x, "<property name=\"openblas_core\" value=\"Haswell\"/>"));
    assert_non_null(strstr(x, "<property name=\"openblas_threads\" value=\"1\"/>"));
    assert_non_null(strstr(x, "<property name=\"weights_sha256\" value=\"0123abcd\"/>"));
    /* a NaN wall time is still a decimal */
    assert_null(strstr(x, "time=\"nan"));
    for (const unsigned char *u = (const unsigned char *)x; *u; u++)
        assert_true(*u >= 0x20 || *u == '\n' || *u == '\t' || *u == '\r');

    free(x);

    /* no cases at all: still a document (validated in test_junit_xmllint) */
    assert_int_equal(cic_junit_write(path, NULL, NULL, 0, &d), 0);
    x = cic_test_slurp(path, NULL);
    p = strstr(x, "<testsuites ");
    assert_non_null(p);
    assert_int_equal(attr_int(p, "tests"), 0);
    free(x);
    (void)xsd;

    /* a folder that does not exist is made, as --out's is */
    memset(&d, 0, sizeof d);
    cic_test_tmp_path(path, sizeof path, "no/such/dir/junit.xml");
    assert_int_equal(cic_junit_write(path, g_reps, g_errs, 3, &d), 0);
    x = cic_test_slurp(path, NULL);
    assert_non_null(x);
    free(x);
    /* one under a regular file cannot be: -1 and a message naming it */
    cic_test_tmp_path(path, sizeof path, "no/such/dir/junit.xml/sub.xml");
    assert_int_equal(cic_junit_write(path, g_reps, g_errs, 3, &d), -1);
    assert_non_null(strstr(d.msg, "not a folder"));
}

/* The JUnit files of test_junit are well-formed and valid against the
 * schema, by xmllint (Debian's libxml2-utils; skipped without it). */
static void test_junit_xmllint(void **state)
{
    char path[1100], xsd[1100];
    cic_diag d;
    (void)state;
    cic_test_need("xmllint", "Debian's libxml2-utils validates the JUnit files");
    build_all();
    cic_test_tmp_path(path, sizeof path, "junit-lint.xml");
    cic_test_tmp_path(xsd, sizeof xsd, "junit.xsd");
    cic_test_write_text(xsd, JUNIT_XSD);
    memset(&d, 0, sizeof d);
    assert_int_equal(cic_junit_write(path, g_reps, g_errs, 3, &d), 0);
    assert_int_equal(xmllint(path, NULL), 0);
    assert_int_equal(xmllint(path, xsd), 0);
    assert_int_equal(cic_junit_write(path, NULL, NULL, 0, &d), 0);
    assert_int_equal(xmllint(path, xsd), 0);
}

/* The check can fail: a bare '&' is not XML, and time="nan" is not the
 * schema's decimal. */
static void test_xmllint_catches_faults(void **state)
{
    char bad[1100], xsd[1100];
    (void)state;
    cic_test_need("xmllint", "Debian's libxml2-utils, the checker shown able to fail");
    cic_test_tmp_path(bad, sizeof bad, "bad.xml");
    cic_test_write_text(bad, "<?xml version=\"1.0\"?>\n<testsuites name=\"cicheck\" tests=\"1\" "
                             "failures=\"0\" errors=\"0\"><testsuite name=\"a&b\" tests=\"1\" "
                             "failures=\"0\" errors=\"0\" time=\"0\"/></testsuites>\n");
    assert_int_not_equal(xmllint(bad, NULL), 0);

    cic_test_tmp_path(xsd, sizeof xsd, "junit.xsd");
    cic_test_write_text(xsd, JUNIT_XSD);
    cic_test_write_text(bad, "<?xml version=\"1.0\"?>\n<testsuites name=\"cicheck\" tests=\"1\" "
                             "failures=\"0\" errors=\"0\"><testsuite name=\"a\" tests=\"1\" "
                             "failures=\"0\" errors=\"0\" time=\"nan\"/></testsuites>\n");
    assert_int_equal(xmllint(bad, NULL), 0);
    assert_int_not_equal(xmllint(bad, xsd), 0);
}

static void test_rule_names(void **state)
{
    (void)state;
    assert_string_equal(CIC_RULE_NAME[CIC_RULE_WEIGHTS], "weights");
    assert_string_equal(CIC_RULE_NAME[CIC_RULE_MPFR], "mpfr-output");
    assert_string_equal(CIC_RULE_NAME[CIC_RULE_MISSING], "missing");
    for (int i = 0; i < CIC_RULE_COUNT; i++)
        assert_non_null(CIC_RULE_NAME[i]);
}

/* ---- Markdown ---- */

static void test_markdown(void **state)
{
    char path[1100];
    cic_diag d;
    char *m;
    (void)state;

    build_all();
    cic_test_tmp_path(path, sizeof path, "summary.md");
    memset(&d, 0, sizeof d);
    assert_int_equal(cic_markdown_write(path, g_reps, g_errs, 3, false, &d), 0);
    m = cic_test_slurp(path, NULL);
    assert_true(strncmp(m, "## cicheck\n", 11) == 0);
    /* case lines */
    assert_non_null(strstr(m, "- ❌ **la&lt;&amp;\"'&gt;yer \xc3\xbcn\xc3\xaf**: 3 rows, 3 gates "
                              "(2 failed), 3 regression checks (2 failed), wall 1.2s, "
                              "1 unexpected verdict\n"));
    assert_non_null(strstr(m, "- ✅ **rotate**: 2 rows, 1 gates (0 failed), 0 regression "
                              "checks (0 failed), wall nan\n"));
    assert_non_null(strstr(m, "- ❌ **case 3**: could not run (error): cases/bad.toml:3:1: "
                              "unknown key 'd&lt;model&gt;' &amp; more?\n"));
    /* the failure table */
    assert_non_null(strstr(m, "| case | transform | engine | check | old | new | limit |\n"
                              "|---|---|---|---|---|---|---|\n"));
    assert_non_null(strstr(m, "| fuse-bad | f32-openblas | gate ulp\\_row.p99 (line 12) | - | 80 | 64 |\n"));
    assert_non_null(strstr(m, "| fuse-bad | f32-fixed-order | gate rel\\_norm2 (line 14) | - | nan | inf |\n"));
    assert_non_null(strstr(m, "| - | - | baseline weights | aaaa | bbbb | equal |\n"));
    assert_non_null(strstr(m, "| fuse | f32-openblas | baseline metric max\\_abs | 1e-06 | 3e-06 | 2e-06 |\n"));
    assert_non_null(strstr(m, "| fuse-bad | f32-openblas | verdict (ce\\_residual 0.5) | expected equivalent | broken | - |\n"));
    assert_non_null(strstr(m, "| case 3 | - | - | run (error) | - |"));
    /* passing checks are not in the table */
    assert_null(strstr(m, "gate ulp\\_row.p99 (line 10)"));
    assert_null(strstr(m, "baseline verdict"));
    assert_int_equal(count_of(m, "\n| "), 7); /* header + 6 failures */
    free(m);

    /* replace: written again, still one summary */
    assert_int_equal(cic_markdown_write(path, g_reps, g_errs, 3, false, &d), 0);
    m = cic_test_slurp(path, NULL);
    assert_int_equal(count_of(m, "## cicheck"), 1);
    free(m);
}

static void test_markdown_append(void **state)
{
    char path[1100];
    cic_diag d;
    char *m;
    const cic_report *one[1];
    (void)state;

    build_all();
    cic_test_tmp_path(path, sizeof path, "step_summary.md");
    /* created when missing */
    one[0] = &g_rep_b;
    assert_int_equal(cic_markdown_write(path, one, NULL, 1, true, &d), 0);
    one[0] = &g_rep_a;
    assert_int_equal(cic_markdown_write(path, one, NULL, 1, true, &d), 0);
    m = cic_test_slurp(path, NULL);
    assert_int_equal(count_of(m, "## cicheck"), 2);
    assert_non_null(strstr(m, "**rotate**"));
    assert_non_null(strstr(m, "**la&lt;"));
    assert_true(strstr(m, "**rotate**") < strstr(m, "**la&lt;"));
    free(m);

    /* earlier text without a final newline stays apart from the heading */
    cic_test_write_text(path, "earlier step");
    assert_int_equal(cic_markdown_write(path, one, NULL, 1, true, &d), 0);
    m = cic_test_slurp(path, NULL);
    assert_true(strncmp(m, "earlier step\n", 13) == 0);
    assert_non_null(strstr(m, "\n## cicheck\n"));
    free(m);

    /* an unwritable place: -1 with a message */
    memset(&d, 0, sizeof d);
    cic_test_tmp_path(path, sizeof path, "no/such/dir/summary.md");
    assert_int_equal(cic_markdown_write(path, one, NULL, 1, true, &d), -1);
    assert_true(d.msg[0] != '\0');
}

/* The escaping both CI outputs use (text.c), byte by byte: every special
 * of each language, control bytes, DEL, valid UTF-8 of each length, the
 * invalid forms (overlong, surrogate, noncharacter, beyond U+10FFFF, cut
 * short), the length bound (also inside a sequence) and NULL. */
static char *esc_text(void (*esc)(FILE *, const char *, size_t), const char *s, size_t n)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    assert_non_null(f);
    esc(f, s, n);
    assert_int_equal(fclose(f), 0);
    return buf;
}

static void test_escape(void **state)
{
    static const struct {
        bool md;
        const char *in;
        size_t n;
        const char *want;
    } t[] = {
        {false, "a&b<c>d\"e'f", SIZE_MAX, "a&amp;b&lt;c&gt;d&quot;e&apos;f"},
        {false, "\t\n\r", SIZE_MAX, "&#9;&#10;&#13;"},
        {false, "\x01x\x1f\x7f", SIZE_MAX, "?x?\x7f"},
        {false, "\\`*_[]|~#", SIZE_MAX, "\\`*_[]|~#"},
        {false, "\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80", SIZE_MAX,
         "\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80"},
        {false, "\xc0\x80|\xed\xa0\x80|\xef\xbf\xbe|\xf4\x90\x80\x80|\xe2\x82", SIZE_MAX,
         "??|???|???|????|??"},
        {false, "abc&def", 4, "abc&amp;"},
        {false, "\xc3\xa9", 1, "?"},
        {true, "\\`*_[]|~", SIZE_MAX, "\\\\\\`\\*\\_\\[\\]\\|\\~"},
        {true, "&<>\"'#", SIZE_MAX, "&amp;&lt;&gt;\"'#"},
        {true, "a\tb\nc\rd", SIZE_MAX, "a b c d"},
        {true, "\x01x\x1f\x7fy", SIZE_MAX, "xy"},
        {true, "\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80", SIZE_MAX,
         "\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80"},
        {true, "\xc0\x80|\xed\xa0\x80|\xef\xbf\xbe|\xf4\x90\x80\x80|\xe2\x82", SIZE_MAX,
         "??\\|???\\|???\\|????\\|??"},
        {true, "a_b|c", 3, "a\\_b"},
    };
    (void)state;
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        char *got = esc_text(t[i].md ? cic_md_esc : cic_xml_esc, t[i].in, t[i].n);
        if (strcmp(got, t[i].want) != 0)
            fail_msg("%s escape of case %zu: got \"%s\", expected \"%s\"",
                     t[i].md ? "Markdown" : "XML", i, got, t[i].want);
        free(got);
    }
    for (int md = 0; md < 2; md++) {
        char *got = esc_text(md ? cic_md_esc : cic_xml_esc, NULL, SIZE_MAX);
        assert_string_equal(got, "");
        free(got);
    }
}

/* Names from a name table: in range its entry, otherwise (and for a
 * missing entry) "?". */
static void test_name_of(void **state)
{
    static const char *const names[3] = {"a", NULL, "c"};
    (void)state;
    assert_string_equal(CIC_NAME_OF(names, 3, 0), "a");
    assert_string_equal(CIC_NAME_OF(names, 3, 1), "?");
    assert_string_equal(CIC_NAME_OF(names, 3, 2), "c");
    assert_string_equal(CIC_NAME_OF(names, 3, 3), "?");
    assert_string_equal(CIC_NAME_OF(names, 3, -1), "?");
    assert_string_equal(cic_name_of(NULL, 3, 0), "?");
    assert_string_equal(CIC_NAME_OF(CIC_VERDICT_NAME, CIC_VERDICT_COUNT, CIC_VERDICT_BROKEN),
                        CIC_VERDICT_NAME[CIC_VERDICT_BROKEN]);
    assert_string_equal(CIC_NAME_OF(CIC_VERDICT_NAME, CIC_VERDICT_COUNT, CIC_VERDICT_COUNT), "?");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rule_names),
        cmocka_unit_test(test_escape),
        cmocka_unit_test(test_name_of),
        cmocka_unit_test_setup_teardown(test_junit, cic_test_tmp_setup, cic_test_tmp_teardown),
        cmocka_unit_test_setup_teardown(test_junit_xmllint, cic_test_tmp_setup, cic_test_tmp_teardown),
        cmocka_unit_test_setup_teardown(test_xmllint_catches_faults, cic_test_tmp_setup, cic_test_tmp_teardown),
        cmocka_unit_test_setup_teardown(test_markdown, cic_test_tmp_setup, cic_test_tmp_teardown),
        cmocka_unit_test_setup_teardown(test_markdown_append, cic_test_tmp_setup, cic_test_tmp_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
