/* SPDX-License-Identifier: MIT */
/* test_api_sessions.c: the public API (include/cicheck/cicheck.h) with two sessions
 * running at once in one process, each on a thread of its own and with
 * settings of its own (MPFR threads 1 and 2; every linear op through the
 * slices, or none): each run's exit code, rows (verdicts, residuals, every
 * figure, bit for bit) and report.json (hashes of the weights, the truth
 * and every MPFR output; figures; FLOPs) are those of the same case run
 * alone, and each session's counters (base/rt.h) are those of its own runs
 * only. A session reading the other's settings would show in its slice
 * counters, and a shared counter in the totals. */
#include "testutil.h"

#include "api/session_int.h"

#include <jansson.h>
#include <pthread.h>

#define RUNS 3 /* runs of each session at once, so that they overlap */

/* Two small cases: a pre-LN block with LayerNorm fusion and a random
 * rotation after it, and an rmsnorm block with the gain fold and a
 * Hadamard rotation (weights made on the fly). */
static const char *const CASES[2] = {
    "name = \"api-preln\"\n[model]\nblock = \"preln\"\nd_model = 32\nheads = 4\ntokens = 8\n"
    "samples = 2\nlayers = 2\nd_out = 8\nseed = 11\n[engines]\nf32 = [\"openblas\", "
    "\"fixed-order\"]\n[[transforms]]\nname = \"fuse\"\nkind = \"fuse-layernorm\"\n"
    "[[transforms]]\nname = \"rotate\"\nkind = \"rotate\"\nafter = \"fuse\"\nq = \"random\"\n"
    "seed = 3\n",
    "name = \"api-rms\"\n[model]\nblock = \"rmsnorm\"\nd_model = 32\nheads = 4\ntokens = 8\n"
    "samples = 2\nlayers = 2\nseed = 5\n[engines]\nf32 = [\"fixed-order\"]\n"
    "[[transforms]]\nname = \"fold\"\nkind = \"fold-rmsnorm-gamma\"\n"
    "[[transforms]]\nname = \"rotate\"\nkind = \"rotate\"\nafter = \"fold\"\n"
    "q = \"hadamard\"\nseed = 4\n",
};

/* A session's settings. */
typedef struct {
    int threads;
    enum cic_slice_mode slice;
} setting;

static const setting SETTINGS[2] = {{1, CIC_SLICE_ALWAYS}, {2, CIC_SLICE_NEVER}};

static const char *const METRICS[] = {
    "max_abs", "rel_norm2", "ulp_row.max", "ulp_row.p99", "ulp_row.mean", "ulp_elem.max",
    "ulp_elem.p99", "ulp_elem.mean", "drift.max", "drift.p99", "drift.mean", "nonfinite",
    "ce_residual"};
enum { N_METRICS = sizeof METRICS / sizeof METRICS[0] };

/* What a run gave, kept to compare. */
typedef struct {
    int rc, n_rows;
    char transform[16][32], engine[16][32], verdict[16][16];
    double ce[16];
    int has[16][N_METRICS];
    double metric[16][N_METRICS];
    json_t *report; /* report.json less what differs between runs */
} outcome;

/* Counters of a session's context. */
typedef struct {
    uint64_t ops, sliced, kernel, gemms, lazy;
} counts;

static counts counts_of(cic_session *s)
{
    cic_rt *rt = _cic_session_rt(s);
    counts c = {atomic_load(&rt->slice_ops), atomic_load(&rt->slice_sliced),
                atomic_load(&rt->slice_kernel), atomic_load(&rt->slice_gemms),
                atomic_load(&rt->lazy_fallback)};
    return c;
}

/* The report in dir, without the environment and the wall time (they
 * differ between runs by design); NULL when it cannot be read. */
static json_t *report_read(const char *dir)
{
    char path[1200];
    json_error_t e;
    json_t *j;
    snprintf(path, sizeof path, "%s/report.json", dir);
    j = json_load_file(path, 0, &e);
    if (j) {
        json_object_del(j, "environment");
        json_object_del(j, "wall_seconds");
    }
    return j;
}

static void outcome_take(outcome *o, cic_session *s, int rc, const char *dir)
{
    int i, k;
    memset(o, 0, sizeof *o);
    o->rc = rc;
    o->n_rows = cic_session_result_count(s);
    for (i = 0; i < o->n_rows && i < 16; i++) {
        const cic_row *r = cic_session_result(s, i);
        const char *v = cic_row_verdict(r);
        snprintf(o->transform[i], sizeof o->transform[i], "%s", cic_row_transform(r));
        snprintf(o->engine[i], sizeof o->engine[i], "%s", cic_row_engine(r));
        snprintf(o->verdict[i], sizeof o->verdict[i], "%s", v ? v : "-");
        o->ce[i] = cic_row_ce_residual(r);
        for (k = 0; k < N_METRICS; k++)
            o->has[i][k] = cic_row_metric(r, METRICS[k], &o->metric[i][k]) == CIC_EXIT_PASS;
    }
    o->report = report_read(dir);
}

/* got equals want: the same rows, figures bit for bit, the same report. */
static const char *outcome_diff(const outcome *got, const outcome *want)
{
    int i, k;
    if (got->rc != want->rc)
        return "exit code";
    if (got->n_rows != want->n_rows || got->n_rows < 1 || got->n_rows > 16)
        return "row count";
    for (i = 0; i < got->n_rows; i++) {
        if (strcmp(got->transform[i], want->transform[i]) ||
            strcmp(got->engine[i], want->engine[i]))
            return "row order";
        if (strcmp(got->verdict[i], want->verdict[i]))
            return "verdict";
        if (memcmp(&got->ce[i], &want->ce[i], sizeof got->ce[i]))
            return "ce_residual";
        for (k = 0; k < N_METRICS; k++)
            if (got->has[i][k] != want->has[i][k] ||
                (got->has[i][k] &&
                 memcmp(&got->metric[i][k], &want->metric[i][k], sizeof(double))))
                return METRICS[k];
    }
    if (!got->report || !want->report)
        return "report.json missing";
    if (!json_equal(got->report, want->report))
        return "report.json (hashes, figures or FLOPs)";
    return NULL;
}

/* One session: case c under setting st, runs runs, each outcome into
 * out[], the counters into *cnt; out dirs under dir. Waits at bar (when
 * given) before its first run, so two threads start together. */
typedef struct {
    int c;
    setting st;
    int runs;
    char dir[1024];
    pthread_barrier_t *bar;
    outcome out[RUNS];
    counts cnt;
    char err[256];
} job;

static void *session_job(void *arg)
{
    job *j = arg;
    cic_session *s = cic_session_create();
    int r;
    if (!s || cic_session_load_string(s, CASES[j->c], "api.toml") != CIC_EXIT_PASS ||
        cic_session_set_threads(s, j->st.threads) != CIC_EXIT_PASS ||
        cic_session_set_out_dir(s, j->dir) != CIC_EXIT_PASS) {
        snprintf(j->err, sizeof j->err, "setup: %s", s ? cic_session_error(s) : "no session");
        if (j->bar)
            pthread_barrier_wait(j->bar);
        cic_session_destroy(s);
        return NULL;
    }
    _cic_session_rt(s)->slice_mode = j->st.slice;
    if (j->bar)
        pthread_barrier_wait(j->bar);
    for (r = 0; r < j->runs; r++)
        outcome_take(&j->out[r], s, cic_session_run(s), j->dir);
    j->cnt = counts_of(s);
    cic_session_destroy(s);
    return NULL;
}

static void job_init(job *j, int c, setting st, int runs, const char *root, const char *tag)
{
    memset(j, 0, sizeof *j);
    j->c = c;
    j->st = st;
    j->runs = runs;
    snprintf(j->dir, sizeof j->dir, "%s/%s%d", root, tag, c);
}

static void job_free(job *j)
{
    int r;
    for (r = 0; r < j->runs; r++)
        json_decref(j->out[r].report);
}

static void test_two_sessions_at_once(void **state)
{
    char root[] = "/tmp/cic-test-api-XXXXXX";
    job alone[2], other[2], conc[2];
    pthread_t th[2];
    pthread_barrier_t bar;
    int i, r;
    (void)state;
    assert_non_null(mkdtemp(root));
    /* each case alone under its setting, and under the other setting (the
     * bits depend on neither) */
    for (i = 0; i < 2; i++) {
        const char *why;
        job_init(&alone[i], i, SETTINGS[i], 1, root, "alone");
        session_job(&alone[i]);
        if (alone[i].err[0])
            fail_msg("case %d alone: %s", i, alone[i].err);
        job_init(&other[i], i, SETTINGS[1 - i], 1, root, "other");
        session_job(&other[i]);
        if (other[i].err[0])
            fail_msg("case %d, other setting: %s", i, other[i].err);
        if ((why = outcome_diff(&other[i].out[0], &alone[i].out[0])))
            fail_msg("case %d: threads %d slices %d against threads %d slices %d: %s differs",
                     i, SETTINGS[1 - i].threads, SETTINGS[1 - i].slice, SETTINGS[i].threads,
                     SETTINGS[i].slice, why);
    }
    /* the slice settings took: every linear op through the slices in the
     * first, none in the second */
    if (alone[0].cnt.ops == 0 || alone[0].cnt.gemms == 0 || alone[0].cnt.sliced == 0)
        fail_msg("slices ALWAYS: %llu ops, %llu dgemm calls, %llu outputs",
                 (unsigned long long)alone[0].cnt.ops, (unsigned long long)alone[0].cnt.gemms,
                 (unsigned long long)alone[0].cnt.sliced);
    if (alone[1].cnt.ops || alone[1].cnt.gemms || alone[1].cnt.sliced || alone[1].cnt.kernel)
        fail_msg("slices NEVER: %llu ops counted", (unsigned long long)alone[1].cnt.ops);

    /* both at once, RUNS runs each */
    assert_int_equal(pthread_barrier_init(&bar, NULL, 2), 0);
    for (i = 0; i < 2; i++) {
        job_init(&conc[i], i, SETTINGS[i], RUNS, root, "conc");
        conc[i].bar = &bar;
        assert_int_equal(pthread_create(&th[i], NULL, session_job, &conc[i]), 0);
    }
    for (i = 0; i < 2; i++)
        assert_int_equal(pthread_join(th[i], NULL), 0);
    pthread_barrier_destroy(&bar);
    for (i = 0; i < 2; i++) {
        const counts *a = &alone[i].cnt, *c = &conc[i].cnt;
        if (conc[i].err[0])
            fail_msg("case %d at once: %s", i, conc[i].err);
        for (r = 0; r < RUNS; r++) {
            const char *why = outcome_diff(&conc[i].out[r], &alone[i].out[0]);
            if (why)
                fail_msg("case %d, run %d at once with the other session: %s differs from "
                         "the run alone", i, r, why);
        }
        /* a session counts its own runs, nothing of the other's */
        if (c->ops != RUNS * a->ops || c->sliced != RUNS * a->sliced ||
            c->kernel != RUNS * a->kernel || c->gemms != RUNS * a->gemms ||
            c->lazy != RUNS * a->lazy)
            fail_msg("case %d: counters at once (ops %llu, outputs %llu, kernel %llu, gemms "
                     "%llu, lazy %llu) are not %d times those alone (%llu, %llu, %llu, %llu, "
                     "%llu)", i, (unsigned long long)c->ops, (unsigned long long)c->sliced,
                     (unsigned long long)c->kernel, (unsigned long long)c->gemms,
                     (unsigned long long)c->lazy, RUNS, (unsigned long long)a->ops,
                     (unsigned long long)a->sliced, (unsigned long long)a->kernel,
                     (unsigned long long)a->gemms, (unsigned long long)a->lazy);
    }
    for (i = 0; i < 2; i++) {
        job_free(&alone[i]);
        job_free(&other[i]);
        job_free(&conc[i]);
    }
    cic_test_rm_rf(root);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_two_sessions_at_once),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
