/* SPDX-License-Identifier: MIT */
/* outfile.c: how cicheck writes its files and makes its folders, for every
 * writer: report.json, the dumps, sweep.json, a shard's files, verify's
 * report, the plots' folder, the baselines and the CI files.
 *
 * Two kinds of path, because an output folder may be shared with someone
 * who can plant things in it (a CI workspace, /tmp):
 *  - what the user names is taken as named: --out DIR, --dump DIR and
 *    --baseline DIR may be (or pass through) symbolic links; --junit FILE,
 *    --markdown FILE and $GITHUB_STEP_SUMMARY follow a link to its target
 *    and write a FIFO or character device in place (the *_user calls);
 *  - what cicheck makes inside those folders is its own: a file
 *    (report.json, a dump file, sweep.json, case-shard.*, verify's
 *    report.json, <case name>.json of bless) is written to a temporary made
 *    beside its name as given (mkstemp: O_EXCL, never in the folder a link
 *    points to) and renamed over the entry, so a link, FIFO or device
 *    planted there is replaced, never followed or written through; a folder
 *    (a case's folder in a run of several, points/ and points/N of a sweep,
 *    plots/, the dump's) must be a real folder: a link there is refused
 *    with its path (cic_mkdir_under). A folder where a file goes is refused.
 *
 * cic_out_check tells the same before any work, so a command refuses a path
 * it cannot write (exit 2) instead of losing the result of a long run. The
 * checks use lstat right before each use; they are not proof against a
 * link swapped in between (that would need the *at calls on folder
 * descriptors): what is planted while a command runs and found when it
 * writes is a lost result (exit 3). */
#include "report.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define LINK_REFUSED                                                           \
    "is a symbolic link where cicheck makes a folder of its own; refusing to " \
    "write through it (remove the link)"

/* ---- folders ---- */

int cic_mkdir_p(const char *dir, cic_diag *d)
{
    char buf[4096];
    size_t n;
    struct stat st;

    if (!dir || !dir[0]) {
        cic_diag_set(d, "", 0, 0, "empty output directory name");
        return -1;
    }
    n = strlen(dir);
    if (n >= sizeof buf) {
        cic_diag_set(d, dir, 0, 0, "output directory name too long (%zu bytes)", n);
        return -1;
    }
    memcpy(buf, dir, n + 1);
    /* Create each prefix in turn; an existing directory is fine, anything
     * else in the way is an error naming the exact prefix. */
    for (size_t i = 1; i <= n; i++) {
        if (buf[i] != '/' && buf[i] != '\0')
            continue;
        if (buf[i - 1] == '/')
            continue; /* "a//b" */
        char save = buf[i];
        buf[i] = '\0';
        if (mkdir(buf, 0777) != 0) {
            int e = errno;
            if (e != EEXIST) {
                cic_diag_set(d, buf, 0, 0, "cannot create directory: %s", strerror(e));
                return -1;
            }
            if (stat(buf, &st) != 0 || !S_ISDIR(st.st_mode)) {
                cic_diag_set(d, buf, 0, 0, "exists and is not a directory");
                return -1;
            }
        }
        buf[i] = save;
    }
    return 0;
}

/* strlen(root), after checking that dir is root or root followed by '/'
 * and more (every caller builds dir from root: a programmer's error
 * otherwise). */
static size_t under_len(const char *root, const char *dir)
{
    size_t rl = strlen(root);
    CIC_ASSERT(strncmp(dir, root, rl) == 0 && (dir[rl] == '\0' || dir[rl] == '/'));
    return rl;
}

/* One component of cicheck's own below a root (lstat: a link is not
 * followed): 1 when it is a real folder, 0 when missing, -1 with d set. */
static int owned_component(const char *path, cic_diag *d)
{
    struct stat st;
    if (lstat(path, &st) != 0) {
        if (errno == ENOENT)
            return 0;
        cic_diag_set(d, path, 0, 0, "cannot use this folder: %s", strerror(errno));
        return -1;
    }
    if (S_ISLNK(st.st_mode)) {
        cic_diag_set(d, path, 0, 0, LINK_REFUSED);
        return -1;
    }
    if (!S_ISDIR(st.st_mode)) {
        cic_diag_set(d, path, 0, 0, "exists and is not a folder");
        return -1;
    }
    return 1;
}

int cic_mkdir_under(const char *root, const char *dir, cic_diag *d)
{
    char buf[4096];
    size_t rl, n;

    if (cic_mkdir_p(root, d) != 0)
        return -1;
    if (!dir || !strcmp(dir, root))
        return 0;
    rl = under_len(root, dir);
    n = strlen(dir);
    if (n >= sizeof buf) {
        cic_diag_set(d, dir, 0, 0, "output directory name too long (%zu bytes)", n);
        return -1;
    }
    memcpy(buf, dir, n + 1);
    for (size_t i = rl + 1; i <= n; i++) {
        if ((buf[i] != '/' && buf[i] != '\0') || buf[i - 1] == '/')
            continue;
        char save = buf[i];
        buf[i] = '\0';
        if (mkdir(buf, 0777) != 0 && errno != EEXIST) {
            cic_diag_set(d, buf, 0, 0, "cannot create directory: %s", strerror(errno));
            return -1;
        }
        /* made now or found: a real folder either way, never a link */
        int r = owned_component(buf, d);
        if (r == 0)
            cic_diag_set(d, buf, 0, 0, "cannot create directory: removed as it was made");
        if (r != 1)
            return -1;
        buf[i] = save;
    }
    return 0;
}

/* Walk buf's components (links within its first rl bytes, the root's,
 * followed; the rest are cicheck's own): each that exists must be a folder.
 * *have receives the length of the longest existing prefix (0: none).
 * 1 when all exist, 0 when some are still to be made, -1 with d set. */
static int walk_existing(char *buf, size_t rl, size_t *have, cic_diag *d)
{
    size_t n = strlen(buf);
    struct stat st;

    *have = 0;
    for (size_t i = 1; i <= n; i++) {
        if ((buf[i] != '/' && buf[i] != '\0') || buf[i - 1] == '/')
            continue;
        char save = buf[i];
        int r;
        buf[i] = '\0';
        if (i > rl) {
            r = owned_component(buf, d);
        } else if (stat(buf, &st) != 0) {
            r = errno == ENOENT ? 0 : -1;
            if (r < 0)
                cic_diag_set(d, buf, 0, 0, "cannot use this folder: %s", strerror(errno));
        } else if (!S_ISDIR(st.st_mode)) {
            cic_diag_set(d, buf, 0, 0, "exists and is not a folder");
            r = -1;
        } else {
            r = 1;
        }
        buf[i] = save;
        if (r <= 0)
            return r; /* missing: this and what follows are made when written */
        *have = i;
    }
    return 1;
}

int cic_out_check(const char *root, const char *dir, const char *file, cic_diag *d)
{
    char buf[4096];
    size_t rl, have;
    struct stat st;
    int all;

    if (!root || !root[0]) {
        cic_diag_set(d, "", 0, 0, "empty output folder name");
        return -1;
    }
    if (!dir)
        dir = root;
    rl = under_len(root, dir);
    if (strlen(dir) + (file ? strlen(file) + 1 : 0) >= sizeof buf) {
        cic_diag_set(d, dir, 0, 0, "output path too long");
        return -1;
    }
    cic_strlcpy(buf, dir, sizeof buf);
    if ((all = walk_existing(buf, rl, &have, d)) < 0)
        return -1;
    /* where the first missing folder would be made, or dir itself */
    if (have == 0)
        cic_strlcpy(buf, dir[0] == '/' ? "/" : ".", sizeof buf);
    else
        buf[have] = '\0';
    if (access(buf, W_OK | X_OK) != 0) {
        cic_diag_set(d, buf, 0, 0, "cannot write in this folder: %s", strerror(errno));
        return -1;
    }
    if (!file || !all)
        return 0;
    snprintf(buf, sizeof buf, "%s/%s", dir, file);
    if (lstat(buf, &st) == 0 && S_ISDIR(st.st_mode)) {
        cic_diag_set(d, buf, 0, 0, "is a folder where cicheck writes a file (remove or "
                     "rename it)");
        return -1;
    }
    return 0;
}

/* ---- files ---- */

int cic_atomic_check(const char *path, cic_diag *d)
{
    struct stat st;
    if (!path || !path[0]) {
        cic_diag_set(d, "", 0, 0, "empty output file name");
        return -1;
    }
    /* lstat: whatever is at the name (a link, a FIFO, a device) is
     * replaced by the rename; only a folder cannot be */
    if (lstat(path, &st) == 0 && S_ISDIR(st.st_mode)) {
        cic_diag_set(d, path, 0, 0, "is a folder where cicheck writes a file (remove or "
                     "rename it)");
        return -1;
    }
    return 0;
}

/* The folder path name would be written in (the link's target's for a
 * link) into dir; 0, or -1 when the name does not fit. */
static int user_dir(char *dir, size_t cap, const char *path)
{
    char *real = realpath(path, NULL);
    const char *p = real ? real : path, *slash = strrchr(p, '/');
    int n;
    if (!slash)
        n = snprintf(dir, cap, ".");
    else
        n = snprintf(dir, cap, "%.*s", slash == p ? 1 : (int)(slash - p), p);
    free(real);
    return n < 0 || (size_t)n >= cap ? -1 : 0;
}

/* The folder the temporary of a user's file goes in: an existing, writable
 * folder, or one still to be made (as --out's is: `--out reports/ci
 * --junit reports/ci/junit.xml` names a folder the run makes) whose
 * nearest existing ancestor is a writable folder. */
static int user_parent_check(const char *path, cic_diag *d)
{
    char dir[4096];
    struct stat st;
    size_t n;

    if (user_dir(dir, sizeof dir, path) != 0) {
        cic_diag_set(d, path, 0, 0, "output file name too long");
        return -1;
    }
    while (stat(dir, &st) != 0) {
        if (errno != ENOENT) {
            cic_diag_set(d, path, 0, 0, "cannot write a file here: %s: %s", dir,
                         strerror(errno));
            return -1;
        }
        n = strlen(dir); /* up one level: the last name and its slashes */
        while (n > 1 && dir[n - 1] == '/')
            dir[--n] = '\0';
        while (n > 0 && dir[n - 1] != '/')
            dir[--n] = '\0';
        while (n > 1 && dir[n - 1] == '/')
            dir[--n] = '\0';
        if (n == 0)
            cic_strlcpy(dir, ".", sizeof dir);
    }
    if (!S_ISDIR(st.st_mode)) {
        cic_diag_set(d, path, 0, 0, "cannot write a file here: %s is not a folder", dir);
        return -1;
    }
    if (access(dir, W_OK | X_OK) != 0) {
        cic_diag_set(d, path, 0, 0, "cannot write a file in %s: %s", dir, strerror(errno));
        return -1;
    }
    return 0;
}

int cic_atomic_check_user(const char *path, cic_diag *d)
{
    struct stat st;
    if (!path || !path[0]) {
        cic_diag_set(d, "", 0, 0, "empty output file name");
        return -1;
    }
    if (stat(path, &st) != 0 || S_ISREG(st.st_mode))
        return user_parent_check(path, d); /* new (a dangling link: replaced) or a file */
    if (S_ISCHR(st.st_mode) || S_ISFIFO(st.st_mode))
        return 0;
    cic_diag_set(d, path, 0, 0, "cannot write a report here: it is %s",
                 S_ISDIR(st.st_mode)    ? "a directory (give a file name)"
                 : S_ISBLK(st.st_mode)  ? "a block device"
                 : S_ISSOCK(st.st_mode) ? "a socket"
                                        : "not a regular file");
    return -1;
}

/* A device or FIFO the user named: written through, nothing renamed over
 * it. */
static int atomic_open_in_place(cic_atomic *a, cic_diag *d)
{
    a->f = fopen(a->path, "wb");
    if (!a->f) {
        cic_diag_set(d, a->path, 0, 0, "cannot open for writing: %s", strerror(errno));
        return -1;
    }
    a->in_place = 1;
    return 0;
}

/* The temporary beside a->path, in its own folder (rename is atomic only
 * within one file system); hidden, so a glob for *.json skips it. */
static int atomic_open_tmp(cic_atomic *a, cic_diag *d)
{
    const char *path = a->path, *slash = strrchr(path, '/');
    size_t dlen = slash ? (size_t)(slash - path) + 1 : 0;
    int fd, n;

    n = snprintf(a->tmp, sizeof a->tmp, "%.*s.%s.XXXXXX", (int)dlen, path,
                 slash ? slash + 1 : path);
    if (n < 0 || (size_t)n >= sizeof a->tmp) {
        cic_diag_set(d, path, 0, 0, "output file name too long");
        a->tmp[0] = '\0';
        return -1;
    }
    fd = mkstemp(a->tmp); /* O_CREAT | O_EXCL: nothing planted is opened */
    if (fd < 0) {
        cic_diag_set(d, path, 0, 0, "cannot create temporary file %s: %s", a->tmp,
                     strerror(errno));
        a->tmp[0] = '\0';
        return -1;
    }
    /* mkstemp makes 0600; a report is for others to read. */
    (void)fchmod(fd, 0644);
    a->f = fdopen(fd, "wb");
    if (!a->f) {
        cic_diag_set(d, path, 0, 0, "cannot open temporary file: %s", strerror(errno));
        close(fd);
        unlink(a->tmp);
        a->tmp[0] = '\0';
        return -1;
    }
    return 0;
}

static int atomic_open(cic_atomic *a, const char *path, bool user, cic_diag *d)
{
    struct stat st;

    CIC_ASSERT(a != NULL);
    memset(a, 0, sizeof *a);
    if ((user ? cic_atomic_check_user(path, d) : cic_atomic_check(path, d)) != 0)
        return -1;
    if (strlen(path) >= sizeof a->path) {
        cic_diag_set(d, path, 0, 0, "output file name too long");
        return -1;
    }
    cic_strlcpy(a->path, path, sizeof a->path);
    if (user && stat(path, &st) == 0 && !S_ISREG(st.st_mode))
        return atomic_open_in_place(a, d);
    if (user && lstat(path, &st) == 0 && S_ISLNK(st.st_mode)) {
        /* the user's link: replace its target, keep the link */
        char *real = realpath(path, NULL);
        if (real && strlen(real) < sizeof a->path)
            cic_strlcpy(a->path, real, sizeof a->path);
        free(real);
    }
    if (user) { /* the user's file's folder, when missing, is made as --out's is */
        char dir[4096];
        if (user_dir(dir, sizeof dir, a->path) != 0) {
            cic_diag_set(d, a->path, 0, 0, "output file name too long");
            return -1;
        }
        if (cic_mkdir_p(dir, d) != 0)
            return -1;
    }
    return atomic_open_tmp(a, d);
}

int cic_atomic_open(cic_atomic *a, const char *path, cic_diag *d)
{
    return atomic_open(a, path, false, d);
}

int cic_atomic_open_user(cic_atomic *a, const char *path, cic_diag *d)
{
    return atomic_open(a, path, true, d);
}

void cic_atomic_abort(cic_atomic *a)
{
    if (!a)
        return;
    if (a->f)
        fclose(a->f);
    a->f = NULL;
    if (a->tmp[0] && !a->in_place) /* never unlink the device itself */
        unlink(a->tmp);
    a->tmp[0] = '\0';
}

/* Make a rename in path's folder durable; best effort (some file systems
 * refuse fsync on a directory, and the data is already safe). */
static void sync_parent(const char *path)
{
    char dir[4096];
    const char *slash = strrchr(path, '/');
    int dfd;
    if (slash) {
        size_t n = (size_t)(slash - path);
        if (n == 0)
            n = 1; /* "/file" */
        memcpy(dir, path, n);
        dir[n] = '\0';
    } else {
        cic_strlcpy(dir, ".", sizeof dir);
    }
    dfd = open(dir, O_RDONLY | O_DIRECTORY);
    if (dfd >= 0) {
        (void)fsync(dfd);
        close(dfd);
    }
}

int cic_atomic_commit(cic_atomic *a, cic_diag *d)
{
    FILE *f;

    CIC_ASSERT(a != NULL);
    if (!a->f) {
        cic_diag_set(d, a->path, 0, 0, "no open temporary file");
        return -1;
    }
    if (ferror(a->f)) {
        cic_diag_set(d, a->path, 0, 0, "write to %s failed", a->in_place ? a->path : a->tmp);
        goto fail;
    }
    if (fflush(a->f) != 0) {
        cic_diag_set(d, a->path, 0, 0, "write to %s failed: %s",
                     a->in_place ? a->path : a->tmp, strerror(errno));
        goto fail;
    }
    if (a->in_place) {
        f = a->f;
        a->f = NULL;
        if (fclose(f) != 0) {
            cic_diag_set(d, a->path, 0, 0, "write failed: %s", strerror(errno));
            return -1;
        }
        return 0;
    }
    if (fsync(fileno(a->f)) != 0) {
        cic_diag_set(d, a->path, 0, 0, "fsync of %s failed: %s", a->tmp, strerror(errno));
        goto fail;
    }
    f = a->f;
    a->f = NULL;
    if (fclose(f) != 0) {
        cic_diag_set(d, a->path, 0, 0, "close of %s failed: %s", a->tmp, strerror(errno));
        goto fail;
    }
    /* rename replaces the entry itself: a link there is not followed */
    if (rename(a->tmp, a->path) != 0) {
        cic_diag_set(d, a->path, 0, 0, "cannot rename %s over it: %s", a->tmp,
                     strerror(errno));
        goto fail;
    }
    a->tmp[0] = '\0';
    sync_parent(a->path);
    return 0;

fail:
    cic_atomic_abort(a);
    return -1;
}

static int write_atomic(const char *path, const void *buf, size_t len, bool user, cic_diag *d)
{
    cic_atomic a;

    if (len > 0 && !buf) {
        cic_diag_set(d, path ? path : "", 0, 0, "no data to write");
        return -1;
    }
    if (atomic_open(&a, path, user, d) != 0)
        return -1;
    if (len > 0 && fwrite(buf, 1, len, a.f) != len) {
        cic_diag_set(d, path, 0, 0, "write to %s failed: %s", a.in_place ? path : a.tmp,
                     strerror(errno));
        cic_atomic_abort(&a);
        return -1;
    }
    return cic_atomic_commit(&a, d);
}

int cic_write_atomic(const char *path, const void *buf, size_t len, cic_diag *d)
{
    return write_atomic(path, buf, len, false, d);
}

int cic_write_atomic_user(const char *path, const void *buf, size_t len, cic_diag *d)
{
    return write_atomic(path, buf, len, true, d);
}

int cic_write_text_atomic(const char *path, void (*write)(FILE *f, const void *ctx),
                          const void *ctx, cic_diag *d)
{
    const char *base = strrchr(path, '/');
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    int rc;
    base = base ? base + 1 : path;
    if (!f) {
        cic_diag_set(d, path, 0, 0, "cannot write %s: out of memory", base);
        return -1;
    }
    write(f, ctx);
    if (fclose(f) != 0 || !text) {
        free(text);
        cic_diag_set(d, path, 0, 0, "cannot write %s: out of memory", base);
        return -1;
    }
    rc = cic_write_atomic(path, text, len, d);
    free(text);
    return rc;
}
