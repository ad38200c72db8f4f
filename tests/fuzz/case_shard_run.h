/* SPDX-License-Identifier: MIT */
/* case_shard_run.h: one fuzz input as the shards of a case split by
 * samples, merged (`cicheck merge`: cic_case_merge in src/cli/case_shard.c
 * on src/pipeline/shard_merge.c, reading case-shard.json and
 * case-shard.bin). The input's files
 * (tests/fuzz/fuzz_files.h) are named FOLDER/case-shard.json and
 * FOLDER/case-shard.bin; the folders, in the order they first appear (at
 * most CS_MAX), are the shards merged into dir/w/out, with no plots and no
 * baseline.
 *
 * A shard's header carries hashes of its own bytes, which a mutation
 * almost never keeps right; so that mutations reach the readers behind
 * them, a header whose case_sha256 or data_sha256 is "" gets the hash of
 * its case_source or of its .bin, and one whose data_bytes is -1 the .bin's
 * size (the seeds are stored so, and as written). A header the harness
 * cannot parse is written as it is.
 *
 * The contract: the exit code is 0 to 3; 2 and 3 come with a message (the
 * run's error) and 2 writes no report.json; 0 and 1 write report.json, a
 * JSON object.
 *
 * Shared by tests/fuzz/fuzz_case_shard.c and the replay of its saved inputs
 * (tests/test_fuzz_replay.c). */
#ifndef CIC_FUZZ_CASE_SHARD_RUN_H
#define CIC_FUZZ_CASE_SHARD_RUN_H

#include "fuzz_files.h"

#include "cli/run.h"
#include "model/model.h"
#include "pipeline/sweep.h"

#include <jansson.h>
#include <stdlib.h>

#define CS_MAX 4

/* The header of file k with its "" hashes and -1 size filled from the
 * input (bin: the shard's .bin, NULL none), written to path; 0 or -1. */
static int cs_write_header(const char *path, const ff_file *f, const ff_file *bin)
{
    json_t *root = json_loadb((const char *)f->data, f->len, 0, NULL), *v;
    char hex[65], *text;
    bool fixed = false;
    int rc;
    if (!json_is_object(root)) {
        json_decref(root);
        return ff_write_file(path, f->data, f->len);
    }
    v = json_object_get(root, "case_sha256");
    if (json_is_string(v) && !json_string_length(v)) {
        json_t *src = json_object_get(root, "case_source");
        cic_sha256_hex(hex, json_string_value(src) ? json_string_value(src) : "",
                       json_string_length(src));
        json_object_set_new(root, "case_sha256", json_string(hex));
        fixed = true;
    }
    v = json_object_get(root, "data_sha256");
    if (json_is_string(v) && !json_string_length(v)) {
        cic_sha256_hex(hex, bin ? (const void *)bin->data : "", bin ? bin->len : 0);
        json_object_set_new(root, "data_sha256", json_string(hex));
        fixed = true;
    }
    v = json_object_get(root, "data_bytes");
    if (json_is_integer(v) && json_integer_value(v) == -1) {
        json_object_set_new(root, "data_bytes", json_integer(bin ? (json_int_t)bin->len : 0));
        fixed = true;
    }
    if (!fixed) {
        json_decref(root);
        return ff_write_file(path, f->data, f->len);
    }
    text = json_dumps(root, JSON_INDENT(1) | JSON_REAL_PRECISION(17));
    json_decref(root);
    if (!text)
        return -1;
    rc = ff_write_file(path, text, strlen(text));
    free(text);
    return rc;
}

static const char *cs_broken(const char *what, int rc, const char *err)
{
    static char why[1500];
    snprintf(why, sizeof why, "%s (exit %d, error '%.1200s')", what, rc, err);
    return why;
}

/* Run one input in folder dir (which exists); NULL when the contract held
 * or the input is not used, else what broke. */
static const char *cic_fuzz_case_shard(const uint8_t *data, size_t size, const char *dir)
{
    char w[1100], path[1300], out[1200], folders[CS_MAX][FF_NAME_MAX + 1];
    char dirs_buf[CS_MAX][1300];
    const char *dirs[CS_MAX], *broke = NULL;
    cic_merge_args ma;
    cic_case_run *cr = NULL;
    struct stat st;
    ff_input in;
    int k, j, n = 0, rc;
    bool wrote;
    ff_accepted = 0;
    if (ff_parse(&in, data, size) < 0)
        return NULL;
    snprintf(w, sizeof w, "%.1000s/w", dir);
    if (ff_fresh_dir(w) != 0 || ff_write(&in, w) != 0)
        goto done; /* a file and a folder of one name, say: not an input */
    for (k = 0; k < in.n; k++) { /* the shard folders, in order */
        const char *slash = strchr(in.f[k].name, '/');
        size_t len = slash ? (size_t)(slash - in.f[k].name) : 0;
        for (j = 0; j < n && (strlen(folders[j]) != len ||
                              memcmp(folders[j], in.f[k].name, len)); j++)
            ;
        if (slash && j == n && n < CS_MAX) {
            memcpy(folders[n], in.f[k].name, len);
            folders[n++][len] = '\0';
        }
        if (slash && !strcmp(slash, "/case-shard.json")) {
            const ff_file *bin = NULL;
            for (j = 0; j < in.n; j++)
                if (!strncmp(in.f[j].name, in.f[k].name, len + 1) &&
                    !strcmp(in.f[j].name + len, "/case-shard.bin"))
                    bin = &in.f[j];
            snprintf(path, sizeof path, "%.1100s/%.100s", w, in.f[k].name);
            if (cs_write_header(path, &in.f[k], bin) != 0)
                goto done;
        }
    }
    if (n == 0)
        snprintf(folders[n++], sizeof folders[0], "s1"); /* not there: refused */
    for (k = 0; k < n; k++) {
        snprintf(dirs_buf[k], sizeof dirs_buf[k], "%.1100s/%.100s", w, folders[k]);
        dirs[k] = dirs_buf[k];
    }
    snprintf(out, sizeof out, "%s/out", w);
    memset(&ma, 0, sizeof ma);
    ma.out_dir = out;
    ma.no_plots = true;
    ma.no_baseline = true;
    ma.tol = CIC_TOLERANCE_DEFAULT;
    ma.color = 0;
    rc = cic_case_merge(dirs, n, &ma, &cr);
    ff_accepted = rc <= CIC_EGATE;
    snprintf(path, sizeof path, "%s/report.json", out);
    wrote = stat(path, &st) == 0;
    if (!cr)
        broke = cs_broken("no run record", rc, "");
    else if (rc < CIC_OK || rc > CIC_EINTERNAL)
        broke = cs_broken("an exit code outside 0 .. 3", rc, cr->error);
    else if (rc >= CIC_EINPUT && !cr->error[0])
        broke = cs_broken("refused without a message", rc, cr->error);
    else if (rc == CIC_EINPUT && wrote)
        broke = cs_broken("refused, yet report.json was written", rc, cr->error);
    else if (rc <= CIC_EGATE) {
        json_t *r = json_load_file(path, 0, NULL);
        if (!json_is_object(r))
            broke = cs_broken("merged, yet report.json is not a JSON object", rc, cr->error);
        json_decref(r);
    }
    cic_case_run_free(cr);
done:
    ff_rm_rf(w);
    return broke;
}

#endif
