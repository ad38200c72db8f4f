/* run.h: `cicheck run`: load a case, build and transform the models, run the
 * engines, score, judge, and write the table, report.json and dumps. */
#ifndef CIC_RUN_H
#define CIC_RUN_H

#include <stdbool.h>

typedef struct {
    const char *out_dir;  /* NULL: reports/<case name> */
    const char *dump_dir; /* NULL: no dump */
    bool quiet;           /* no progress lines on stderr */
    int color;            /* -1 auto (TTY), 0 off, 1 on */
    bool quiet_tables;    /* no analytical FLOP table after the results */
} cic_run_args;

/* Run one case file; returns the exit code (0 pass, 1 a gate or expectation
 * failed, 2 bad input, 3 resource failure). */
int cic_run_case(const char *path, const cic_run_args *a);

#endif
