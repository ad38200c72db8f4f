/* SPDX-License-Identifier: MIT */
/* outputs.c: what a finished run leaves on disk: report.json and the
 * --dump folder, each below the folder the user named (links followed
 * there, the folders below it cicheck's own). A single run of the command
 * line and each point of a sweep write through here. */
#include "sweep.h"

#include <string.h>

/* Say "wrote ..." through the progress's stage, as the pipeline says its
 * stages. */
static void said(const cic_progress *pr, const char *what, const char *path)
{
    char line[1400];
    if (!pr || !pr->stage)
        return;
    snprintf(line, sizeof line, "%s%s", what, path);
    pr->stage(pr->ctx, line);
}

int cic_pipeline_write(const cic_pipeline *pl, const char *out_root, const char *out_dir,
                       const char *dump_root, const char *dump_dir, const cic_progress *pr,
                       cic_diag *d)
{
    char path[1300];
    if (out_dir) {
        snprintf(path, sizeof path, "%s/report.json", out_dir);
        if (cic_mkdir_under(out_root ? out_root : out_dir, out_dir, d) < 0 ||
            cic_report_json_write_file(cic_pipeline_report(pl), path, d) < 0)
            return -1;
        said(pr, "wrote ", path);
    }
    if (dump_dir) {
        if (cic_mkdir_under(dump_root ? dump_root : dump_dir, dump_dir, d) < 0 ||
            cic_pipeline_dump(pl, dump_dir, d) < 0)
            return -1;
        said(pr, "wrote dump to ", dump_dir);
    }
    return 0;
}
