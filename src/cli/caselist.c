/* SPDX-License-Identifier: MIT */
/* caselist.c: the case files of one `cicheck run` or `cicheck bless`: the
 * list (folders expanded to their *.toml), each case's folders in a run of
 * several, and the checks made before any case runs: every output path a
 * case writes can be written (cic_run_check_outputs), and no two cases
 * write the same files.
 *
 * Where a case of a run of several writes: --out DIR/<file stem> and
 * --dump DIR/<file stem>; without --out, reports/<case name>; bless also
 * writes DIR/<case name>.json (--baseline, default reference/). Two files
 * with one stem (under --out or --dump) or one case name (without --out, or
 * blessed) would overwrite each other's results and still count as two
 * passes, so they are refused, naming both, and so is a file given twice. */
#include "run.h"

#include <dirent.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* ---- the list ---- */

int cic_strlist_push(cic_strlist *l, const char *s)
{
    if (l->n == l->cap) {
        int cap = l->cap ? 2 * l->cap : 32;
        char **nv = realloc(l->v, (size_t)cap * sizeof *nv);
        if (!nv)
            return -1;
        l->v = nv;
        l->cap = cap;
    }
    l->v[l->n] = strdup(s);
    return l->v[l->n] ? (l->n++, 0) : -1;
}

void cic_strlist_free(cic_strlist *l)
{
    int i;
    for (i = 0; i < l->n; i++)
        free(l->v[i]);
    free(l->v);
    memset(l, 0, sizeof *l);
}

static int cmpstr(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* A large case (a whole model: minutes to hours, gigabytes) is named
 * *-full.toml and runs only when named: a folder's run, the regression
 * gate over cases/ among them, leaves it out. */
static bool large_case(const char *name, size_t n)
{
    return n >= 10 && !strcmp(name + n - 10, "-full.toml");
}

/* Add path; a folder adds its *.toml files first (not the large ones),
 * then its subfolders', each sorted. */
static int expand(cic_strlist *l, const char *path, int depth)
{
    struct stat st;
    DIR *dir;
    struct dirent *e;
    cic_strlist files = {0}, dirs = {0};
    int i, rc = 0;
    if (stat(path, &st) != 0 || !S_ISDIR(st.st_mode))
        return cic_strlist_push(l, path); /* a missing file is reported by the loader */
    if (depth > 16 || !(dir = opendir(path)))
        return cic_strlist_push(l, path);
    while ((e = readdir(dir))) {
        char full[4096];
        size_t n = strlen(e->d_name);
        struct stat s2;
        if (e->d_name[0] == '.')
            continue;
        snprintf(full, sizeof full, "%s/%s", path, e->d_name);
        if (stat(full, &s2) != 0)
            continue;
        if (S_ISDIR(s2.st_mode)) {
            if (cic_strlist_push(&dirs, full) < 0)
                rc = -1;
        } else if (n > 5 && !strcmp(e->d_name + n - 5, ".toml") && !large_case(e->d_name, n)) {
            if (cic_strlist_push(&files, full) < 0)
                rc = -1;
        }
    }
    closedir(dir);
    if (files.n > 1)
        qsort(files.v, (size_t)files.n, sizeof *files.v, cmpstr);
    if (dirs.n > 1)
        qsort(dirs.v, (size_t)dirs.n, sizeof *dirs.v, cmpstr);
    for (i = 0; i < files.n && rc == 0; i++)
        rc = cic_strlist_push(l, files.v[i]);
    for (i = 0; i < dirs.n && rc == 0; i++)
        rc = expand(l, dirs.v[i], depth + 1);
    cic_strlist_free(&files);
    cic_strlist_free(&dirs);
    return rc;
}

int cic_case_list_add(cic_strlist *l, const char *path)
{
    return expand(l, path, 0);
}

/* ---- each case's folders ---- */

/* The stem of a case path: "cases/adaln.toml" -> "adaln". */
static void stem(char *buf, size_t cap, const char *path)
{
    const char *b = strrchr(path, '/'), *dot;
    b = b ? b + 1 : path;
    dot = strrchr(b, '.');
    snprintf(buf, cap, "%.*s", dot ? (int)(dot - b) : (int)strlen(b), b);
}

void cic_case_args(cic_run_args *one, const cic_run_args *a, const cic_strlist *cases, int i,
                   char *out, char *dump)
{
    char st[256];
    *one = *a;
    if (cases->n < 2)
        return;
    stem(st, sizeof st, cases->v[i]);
    if (a->out_dir) {
        snprintf(out, CIC_CASE_DIR_MAX, "%s/%s", a->out_dir, st);
        one->out_dir = out;
        one->out_root = a->out_dir;
    }
    if (a->dump_dir) {
        snprintf(dump, CIC_CASE_DIR_MAX, "%s/%s", a->dump_dir, st);
        one->dump_dir = dump;
        one->dump_root = a->dump_dir;
    }
}

/* ---- before anything runs ---- */

/* What tells two case files' outputs apart. */
typedef struct {
    char stem[256];          /* names its folder under --out and --dump */
    char name[CIC_NAME_MAX]; /* names reports/<name> and the baseline; "" when
                              * the case does not load (its run says why) */
    struct stat st;
    bool have_st;
} case_id;

/* Cases i < j that would write the same files: the message and exit 2. */
static int same_outputs(const cic_strlist *cases, const cic_run_args *a, bool bless,
                        const case_id *ids, int i, int j)
{
    const char *p = cases->v[i], *q = cases->v[j];
    const case_id *x = &ids[i], *y = &ids[j];
    if (x->have_st && y->have_st && x->st.st_dev == y->st.st_dev &&
        x->st.st_ino == y->st.st_ino) {
        fprintf(stderr, "cicheck: %s is given twice%s%s%s: its runs would write the same "
                "files\n", q, strcmp(p, q) ? " (also as " : "", strcmp(p, q) ? p : "",
                strcmp(p, q) ? ")" : "");
        return CIC_EINPUT;
    }
    if ((a->out_dir || a->dump_dir) && !strcmp(x->stem, y->stem)) {
        fprintf(stderr, "cicheck: %s and %s would both write %s/%s (a folder per file name): "
                "rename one, or run them separately\n", p, q,
                a->out_dir ? a->out_dir : a->dump_dir, x->stem);
        return CIC_EINPUT;
    }
    if (x->name[0] && !strcmp(x->name, y->name) && (!a->out_dir || bless)) {
        if (!a->out_dir)
            fprintf(stderr, "cicheck: %s and %s are both case '%s': both would write "
                    "reports/%s (give --out, or rename one)\n", p, q, x->name, x->name);
        else
            fprintf(stderr, "cicheck: %s and %s are both case '%s': both would be blessed as "
                    "%s/%s.json (rename one)\n", p, q, x->name,
                    a->baseline_dir ? a->baseline_dir : "reference", x->name);
        return CIC_EINPUT;
    }
    return CIC_OK;
}

/* Case i's id and the check of its outputs (k: room to load it). */
static int case_outputs(const cic_strlist *cases, const cic_run_args *a, bool bless, int i,
                        case_id *id, cic_case *k)
{
    const char *path = cases->v[i];
    cic_run_args one;
    char out[CIC_CASE_DIR_MAX], dump[CIC_CASE_DIR_MAX], file[CIC_NAME_MAX + 8];
    cic_diag d;
    stem(id->stem, sizeof id->stem, path);
    id->have_st = stat(path, &id->st) == 0;
    /* "x/..toml" would be --out itself's parent, "x/.toml" --out itself */
    if (cases->n > 1 && (a->out_dir || a->dump_dir) && (!id->stem[0] || id->stem[0] == '.')) {
        fprintf(stderr, "cicheck: %s: its file name gives the folder name '%s' under %s (a "
                "folder per file name may not be empty or start with '.'): rename it\n",
                path, id->stem, a->out_dir ? "--out" : "--dump");
        return CIC_EINPUT;
    }
    if (cic_case_load(k, path, &d) != CIC_OK)
        return CIC_OK; /* its run says why */
    cic_strlcpy(id->name, k->name, sizeof id->name);
    cic_case_args(&one, a, cases, i, out, dump);
    if (cic_run_check_outputs(k, &one, &d) != CIC_OK) {
        fprintf(stderr, "cicheck: %s: cannot write its outputs: ", path);
        cic_diag_print(stderr, &d);
        return CIC_EINPUT;
    }
    snprintf(file, sizeof file, "%s.json", k->name);
    if (bless && cic_out_check(a->baseline_dir ? a->baseline_dir : "reference", NULL, file,
                               &d) != 0) {
        fprintf(stderr, "cicheck: %s: cannot bless it: ", path);
        cic_diag_print(stderr, &d);
        return CIC_EINPUT;
    }
    return CIC_OK;
}

int cic_case_list_check(const cic_strlist *cases, const cic_run_args *a, bool bless)
{
    case_id *ids = cic_calloc((size_t)cases->n, sizeof *ids);
    cic_case *k = malloc(sizeof *k);
    int i, j, rc = CIC_OK;
    if (!ids || !k) {
        fprintf(stderr, "cicheck: out of memory\n");
        rc = CIC_EINTERNAL;
    }
    for (i = 0; rc == CIC_OK && i < cases->n; i++)
        rc = case_outputs(cases, a, bless, i, &ids[i], k);
    for (i = 0; rc == CIC_OK && i < cases->n; i++)
        for (j = i + 1; rc == CIC_OK && j < cases->n; j++)
            rc = same_outputs(cases, a, bless, ids, i, j);
    free(ids);
    free(k);
    return rc;
}
