/* SPDX-License-Identifier: MIT */
/* markdown.c: the summary a CI page shows (GitHub's job summary, a GitLab
 * MR note): a "## cicheck" heading, one line per case, then a table of
 * every failure with the old value, the new value and the limit.
 *
 *   ## cicheck
 *
 *   - ✅ **layernorm**: 7 rows, 4 gates (0 failed), 9 regression checks (0 failed), wall 1.2s
 *   - ❌ **rotate**: 7 rows, 4 gates (1 failed), 0 regression checks (0 failed), wall 3.4s
 *   - ❌ **case 3**: could not run (input error): cases/x.toml:3:1: unknown key 'dmodel'
 *
 *   | case | transform | engine | check | old | new | limit |
 *   |---|---|---|---|---|---|---|
 *   | rotate | rotate-random | f32-openblas | gate ulp_row.p99 (line 31) | - | 80.5 | 64 |
 *
 * A case line adds ", N unexpected verdicts" and ", truth not certified"
 * only when they happen; those failures are in the table too (old: the
 * expected verdict; new: the verdict found). The table is left out when
 * nothing failed.
 *
 * Text from the case (names, paths, messages) is escaped so it cannot
 * break the table or turn into markup (cic_md_esc, text.c): \ ` * _ [ ] | ~
 * backslash-escaped, & < > as entities, tab/newline/CR as a space, other
 * control bytes dropped, invalid UTF-8 as '?'. Non-finite numbers read nan / inf.
 *
 * append (GITHUB_STEP_SUMMARY semantics): the text is added at the end of
 * path, created if missing, in one write; otherwise path is replaced
 * atomically. path is the user's: a link is followed, a FIFO or device
 * written in place. */
#include "conclusion.h"
#include "report.h"
#include "text.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static bool can_run(const cic_report *r)
{
    return r && r->kase;
}

static bool run_failed(const cic_report *r)
{
    return !can_run(r) || r->exit_code >= CIC_EINPUT;
}

static const char *run_kind(const cic_report *r)
{
    if (r && r->exit_code == CIC_EINPUT)
        return "input error";
    if (r && r->exit_code == CIC_EINTERNAL)
        return "internal error";
    return "error";
}

/* The case name as written (bounded, escaped), "case N" when there is none. */
static void case_name(FILE *f, int idx, const cic_report *r)
{
    if (can_run(r) && strnlen(r->kase->name, sizeof r->kase->name) > 0)
        cic_md_esc(f, r->kase->name, sizeof r->kase->name);
    else
        fprintf(f, "case %d", idx + 1);
}

/* "| case | transform | engine | " */
static void row_start(FILE *f, int idx, const cic_report *r, const char *xf, size_t xcap,
                      const char *eng, size_t ecap)
{
    fputs("| ", f);
    case_name(f, idx, r);
    fputs(" | ", f);
    if (xf && strnlen(xf, xcap))
        cic_md_esc(f, xf, xcap);
    else
        fputc('-', f);
    fputs(" | ", f);
    if (eng && strnlen(eng, ecap))
        cic_md_esc(f, eng, ecap);
    else
        fputc('-', f);
    fputs(" | ", f);
}

/* "old | new | limit |\n", each escaped, "-" when empty. */
static void row_end(FILE *f, const char *old, size_t ocap, const char *nw, size_t ncap,
                    const char *lim, size_t lcap)
{
    const char *v[3] = {old, nw, lim};
    size_t c[3] = {ocap, ncap, lcap};
    for (int k = 0; k < 3; k++) {
        fputs(" | ", f);
        if (v[k] && strnlen(v[k], c[k]))
            cic_md_esc(f, v[k], c[k]);
        else
            fputc('-', f);
    }
    fputs(" |\n", f);
}

static void case_line(FILE *f, int idx, const cic_report *r, const char *err)
{
    int gf = 0, rf = 0, vf = 0;
    char w[64];

    if (!can_run(r)) {
        fputs("- ❌ **", f);
        case_name(f, idx, r);
        fprintf(f, "**: could not run (%s): ", run_kind(r));
        cic_md_esc(f, err && err[0] ? err : "no report", SIZE_MAX);
        fputc('\n', f);
        return;
    }
    for (int i = 0; r->gates && i < r->n_gates; i++)
        gf += !r->gates[i].pass;
    for (int i = 0; r->regress && i < r->n_regress; i++)
        rf += !r->regress[i].pass;
    for (int i = 0; r->results && i < r->n_results; i++)
        vf += r->results[i].has_verdict && r->results[i].verdict != r->results[i].expect;

    if (isfinite(r->wall_seconds))
        snprintf(w, sizeof w, "%.1fs", r->wall_seconds);
    else
        cic_fmt_num(w, sizeof w, r->wall_seconds); /* "wall nan", no unit */

    bool ok = r->pass && !run_failed(r) && gf == 0 && rf == 0 && vf == 0 && r->truth_certified;
    fprintf(f, "- %s **", ok ? "✅" : "❌");
    case_name(f, idx, r);
    fprintf(f, "**: %d rows, %d gates (%d failed), %d regression checks (%d failed), wall %s",
            r->results ? r->n_results : 0, r->gates ? r->n_gates : 0, gf,
            r->regress ? r->n_regress : 0, rf, w);
    if (vf)
        fprintf(f, ", %d unexpected verdict%s", vf, vf == 1 ? "" : "s");
    if (!r->truth_certified)
        fputs(", truth not proven", f);
    if (run_failed(r)) {
        fprintf(f, ", could not finish (%s): ", run_kind(r));
        cic_md_esc(f, err && err[0] ? err : "no message", SIZE_MAX);
    }
    fputc('\n', f);
}

/* The failure rows of one case; returns how many. header: print the table
 * head before the first row (*header cleared then). */
static int failure_rows(FILE *f, int idx, const cic_report *r, const char *err, bool *header)
{
    int n = 0;
    char a[64], b[96], chk[128];

#define HEAD()                                                                \
    do {                                                                      \
        if (*header) {                                                        \
            fputs("\n| case | transform | engine | check | old | new | limit |\n" \
                  "|---|---|---|---|---|---|---|\n",                          \
                  f);                                                         \
            *header = false;                                                  \
        }                                                                     \
        n++;                                                                  \
    } while (0)

    if (run_failed(r)) {
        HEAD();
        row_start(f, idx, r, NULL, 0, NULL, 0);
        fprintf(f, "run (%s)", run_kind(r));
        const char *m = err && err[0] ? err : "could not run";
        row_end(f, NULL, 0, m, strlen(m), NULL, 0);
    }
    if (!can_run(r))
        return n;

    for (int i = 0; r->gates && i < r->n_gates; i++) {
        const cic_gate_result *g = &r->gates[i];
        if (g->pass)
            continue;
        HEAD();
        row_start(f, idx, r, g->transform, sizeof g->transform, g->engine, sizeof g->engine);
        fputs("gate ", f);
        cic_md_esc(f, g->metric, sizeof g->metric);
        if (g->line > 0)
            fprintf(f, " (line %d)", g->line);
        cic_fmt_num(a, sizeof a, g->value);
        cic_fmt_num(b, sizeof b, g->limit);
        row_end(f, NULL, 0, a, sizeof a, b, sizeof b);
    }
    for (int i = 0; r->results && i < r->n_results; i++) {
        const cic_result *x = &r->results[i];
        if (!x->has_verdict || x->verdict == x->expect)
            continue;
        HEAD();
        row_start(f, idx, r, x->transform, sizeof x->transform, x->engine, sizeof x->engine);
        cic_fmt_num(a, sizeof a, x->ce_residual);
        snprintf(chk, sizeof chk, "verdict (ce_residual %s)", a);
        cic_md_esc(f, chk, SIZE_MAX);
        snprintf(a, sizeof a, "expected %s", CIC_NAME_OF(CIC_VERDICT_NAME, CIC_VERDICT_COUNT, x->expect));
        row_end(f, a, sizeof a, CIC_NAME_OF(CIC_VERDICT_NAME, CIC_VERDICT_COUNT, x->verdict), 32, NULL, 0);
    }
    for (int i = 0; r->regress && i < r->n_regress; i++) {
        const cic_regress_result *g = &r->regress[i];
        if (g->pass)
            continue;
        HEAD();
        row_start(f, idx, r, g->transform, sizeof g->transform, g->engine, sizeof g->engine);
        fprintf(f, "baseline %s", CIC_NAME_OF(CIC_RULE_NAME, CIC_RULE_COUNT, g->rule));
        if (strnlen(g->metric, sizeof g->metric)) {
            fputc(' ', f);
            cic_md_esc(f, g->metric, sizeof g->metric);
        }
        row_end(f, g->old_value, sizeof g->old_value, g->new_value, sizeof g->new_value,
                strnlen(g->limit, sizeof g->limit) ? g->limit : "equal", sizeof g->limit);
    }
    if (!r->truth_certified) {
        HEAD();
        row_start(f, idx, r, NULL, 0, NULL, 0);
        fputs("truth proven", f);
        cic_truth_words(b, sizeof b, r);
        row_end(f, NULL, 0, b, sizeof b, NULL, 0);
    }
#undef HEAD
    return n;
}

/* The conclusion of a dit case (conclusion.h), last: "**name**: " and its
 * first line, then its other lines as a list, each escaped. 0, or -1 when
 * memory runs out. */
static int conclusion(FILE *f, int idx, const cic_report *r)
{
    char *buf = NULL, *p, *e;
    size_t len = 0;
    FILE *m = open_memstream(&buf, &len);
    int n;

    if (!m)
        return -1;
    n = cic_report_conclusion(m, r);
    if (fclose(m) != 0 || n < 0 || !buf) {
        free(buf);
        return -1;
    }
    for (p = buf; n > 0 && *p; p = *e ? e + 1 : e) {
        bool first = p == buf;
        e = strchr(p, '\n');
        if (!e)
            e = p + strlen(p);
        if (first) {
            fputs("\n**", f);
            case_name(f, idx, r);
            fputs("**: ", f);
        } else {
            while (*p == ' ')
                p++;
            fputs("- ", f);
        }
        cic_md_esc(f, p, (size_t)(e - p));
        fputs(first ? "\n\n" : "\n", f);
    }
    free(buf);
    return 0;
}

int cic_markdown_write(const char *path, const cic_report *const *r,
                       const char *const *errors, int n, bool append, cic_diag *d)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f;
    bool header = true;
    int rc, bad;
    struct stat st;

    if (!path || !path[0]) {
        cic_diag_set(d, "", 0, 0, "empty Markdown output file name");
        return -1;
    }
    if (n < 0 || (n > 0 && !r)) {
        cic_diag_set(d, path, 0, 0, "no reports to write");
        return -1;
    }

    f = open_memstream(&buf, &len);
    if (!f) {
        cic_diag_set(d, path, 0, 0, "cannot build the Markdown summary: %s", strerror(errno));
        return -1;
    }
    fputs("## cicheck\n\n", f);
    if (n == 0)
        fputs("No cases were run.\n", f);
    for (int i = 0; i < n; i++)
        case_line(f, i, r[i], errors ? errors[i] : NULL);
    for (int i = 0; i < n; i++)
        failure_rows(f, i, r[i], errors ? errors[i] : NULL, &header);
    for (int i = 0; i < n; i++)
        if (!run_failed(r[i]) && conclusion(f, i, r[i]) < 0)
            fputs("\n(conclusion lost: out of memory)\n", f);
    fputc('\n', f);
    bad = ferror(f);
    bad |= fclose(f) != 0;
    if (bad || !buf) {
        cic_diag_set(d, path, 0, 0, "cannot build the Markdown summary: out of memory");
        free(buf);
        return -1;
    }

    if (!append) {
        rc = cic_write_atomic_user(path, buf, len, d);
        free(buf);
        return rc;
    }

    rc = 0;
    f = fopen(path, "a");
    if (!f) {
        cic_diag_set(d, path, 0, 0, "cannot open for appending: %s", strerror(errno));
        free(buf);
        return -1;
    }
    /* Earlier text may lack its final newline: a blank line keeps the
     * heading a heading. */
    if (fstat(fileno(f), &st) == 0 && st.st_size > 0)
        fputc('\n', f);
    if (fwrite(buf, 1, len, f) != len || fflush(f) != 0) {
        cic_diag_set(d, path, 0, 0, "append failed: %s", strerror(errno));
        rc = -1;
    }
    if (fclose(f) != 0 && rc == 0) {
        cic_diag_set(d, path, 0, 0, "close failed: %s", strerror(errno));
        rc = -1;
    }
    free(buf);
    return rc;
}
