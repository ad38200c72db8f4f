/* run.h: `cicheck run`: load a case, build and transform the models, run the
 * engines, score, judge, and write the table, report.json and dumps. */
#ifndef CIC_RUN_H
#define CIC_RUN_H

#include "../report/baseline.h"
#include "../report/report.h"

#include <stdbool.h>

typedef struct {
    const char *out_dir;  /* NULL: reports/<case name> */
    const char *dump_dir; /* NULL: no dump */
    bool quiet;           /* no progress lines on stderr */
    int color;            /* -1 auto (TTY), 0 off, 1 on */
    bool quiet_tables;    /* no analytical FLOP table after the results */
    const char *baseline_dir; /* NULL: reference/ (compared when the file exists) */
    bool no_baseline;     /* skip the baseline comparison */
    cic_tolerance tol;    /* for the f32 metrics against the baseline */
} cic_run_args;

/* What one case run leaves for the summaries (JUnit, Markdown, bless). */
typedef struct {
    cic_case kase;
    cic_report rep;       /* rep.kase points at kase; its arrays are owned */
    char error[1200];     /* the message when the case could not run */
    int exit_code;
} cic_case_run;

void cic_case_run_free(cic_case_run *cr);

/* Run one case file; returns the exit code (0 pass, 1 a gate, expectation
 * or regression failed, 2 bad input, 3 resource failure). When out is not
 * NULL it receives the run (free with cic_case_run_free), also on failure. */
int cic_run_case(const char *path, const cic_run_args *a, cic_case_run **out);

#endif
