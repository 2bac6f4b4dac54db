/* Damage detection around meta.lmdb's open (docs/decisions/0015
 * and store/FORMAT.md): the probe child (the structural check of meta_check.c,
 * then every value read through LMDB) and the marker an LMDB assertion at run
 * time leaves for the next open.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <keel/assert.h>
#include <keel/error.h>

#include "meta.h"
#include "meta_check.h"
#include "meta_probe.h"

#define MARKER_SUFFIX ".assert"

static void marker_path(char *out, size_t cap, const char *meta_path)
{
    snprintf(out, cap, "%s" MARKER_SUFFIX, meta_path);
}

static int fsync_parent(const char *path)
{
    char dir[4096];
    const char *slash = strrchr(path, '/');
    int fd;
    int rv;

    if (slash == NULL) {
        snprintf(dir, sizeof dir, ".");
    } else {
        snprintf(dir, sizeof dir, "%.*s", (int)(slash - path), path);
    }
    fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) {
        return -1;
    }
    rv = fsync(fd);
    close(fd);
    return rv;
}

/* The marker: the assertion text, fsynced with its directory, and an
 * operator-readable line on stderr. Never fails (a marker that cannot be
 * written is logged). */
static void marker_write(const char *meta_path, const char *text)
{
    char path[4096 + sizeof MARKER_SUFFIX];
    char line[STORE_META_MARKER_BYTES_MAX + 1];
    const char *err = NULL;
    char stamp[32];
    struct tm tm;
    time_t now = time(NULL);
    size_t n;
    int fd;

    ASSERT(meta_path != NULL && text != NULL);
    marker_path(path, sizeof path, meta_path);
    n = (size_t)snprintf(line, sizeof line, "%.*s\n",
                         STORE_META_MARKER_BYTES_MAX - 2, text);
    n = n < sizeof line ? n : sizeof line - 1;
    fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0 || write(fd, line, n) != (ssize_t)n || fsync(fd) != 0 ||
        fsync_parent(path) != 0) {
        err = strerror(errno);
    }
    if (fd >= 0) {
        close(fd);
    }
    gmtime_r(&now, &tm);
    strftime(stamp, sizeof stamp, "%Y-%m-%dT%H:%M:%SZ", &tm);
    fprintf(stderr,
            "%s ERROR [store] meta.lmdb is damaged where the start's check "
            "did not look: LMDB failed an assertion (%s). keeld exits "
            "(status %d); its next start moves %s to quarantine/ and starts "
            "a new incarnation%s%s%s\n",
            stamp, text, STORE_META_ASSERT_EXIT, meta_path,
            err != NULL ? " -- but the marker " : "", err != NULL ? path : "",
            err != NULL ? " could not be written: move meta.lmdb away by hand"
                        : "");
    if (err != NULL) {
        fprintf(stderr, "%s ERROR [store] %s: %s\n", stamp, path, err);
    }
    fflush(stderr);
}

bool store_meta_marker_read(const char *meta_path, char *out, size_t cap)
{
    char path[4096 + sizeof MARKER_SUFFIX];
    ssize_t n;
    int fd;

    ASSERT(out != NULL && cap > 0);
    marker_path(path, sizeof path, meta_path);
    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        int e = errno;
        /* Unreadable but there: it still counts. */
        snprintf(out, cap, "marker unreadable: %s", strerror(e));
        return e != ENOENT;
    }
    n = read(fd, out, cap - 1);
    close(fd);
    n = n < 0 ? 0 : n;
    while (n > 0 && (out[n - 1] == '\n' || out[n - 1] == 0)) {
        n--;
    }
    out[n] = 0;
    return true;
}

int store_meta_marker_move(const char *meta_path, const char *dst)
{
    char path[4096 + sizeof MARKER_SUFFIX];
    char to[4096 + sizeof MARKER_SUFFIX];

    marker_path(path, sizeof path, meta_path);
    marker_path(to, sizeof to, dst);
    if (rename(path, to) != 0 && errno != ENOENT) {
        return KEEL_EIO;
    }
    return 0;
}

/* Tests: false runs the probe without the structural check (the probe
 * of session 5), to show what only the check finds. */
static bool check_structure = true;

void store_meta_debug_check_structure(bool on)
{
    check_structure = on;
}

/* The child's side of probe_in_child: exits 0 (sound or unknown), 3 (LMDB
 * cannot open it: the open in the parent decides) or 5 (the structural
 * check failed, its reason written to fd); dies if a read faults. */
static void probe_child(const char *path, int (*read_all)(const char *), int fd)
{
    char err[KEEL_ERRMSG_MAX];

    /* Die of a fault, whatever handler the process installed (a handler
     * that returns or jumps would run on in the child). */
    (void)signal(SIGBUS, SIG_DFL);
    (void)signal(SIGSEGV, SIG_DFL);
    if (check_structure &&
        store_meta_check_file(path, NULL, err, sizeof err) == KEEL_ECORRUPT) {
        size_t n = strlen(err);
        _exit(write(fd, err, n) == (ssize_t)n ? 5 : 4);
    }
    _exit(read_all(path) == 3 ? 3 : 0);
}

/* LMDB 0.9 follows page numbers without bounding them by the file: one
 * damaged reference makes a read fault (SIGBUS) instead of failing, and
 * keeld died at every start (fault-suite finding F15). And it trusts page
 * headers, record counts and free-page lists on a write: a changed byte
 * no read reaches aborted keeld on an assertion at run time, or freed a
 * live page (docs/decisions/0015). So a child first checks every page
 * of the file (meta_check.c), then reads every value through LMDB
 * (read-only, no lock file). If it does not come back with 0 (sound) or 3
 * (could not open: the open here decides), it died of what it read (a
 * signal, or a sanitizer's report) or the check failed (its reason comes
 * through a pipe), and the file counts as corrupt. Returns 0 or
 * KEEL_ECORRUPT (reason set). */
static int probe_in_child(const char *path, int (*read_all)(const char *),
                          char *reason, size_t cap)
{
    char why[KEEL_ERRMSG_MAX];
    size_t got = 0;
    struct stat sb;
    int fds[2];
    int st;
    pid_t pid;

    ASSERT(path != NULL && reason != NULL);
    if (stat(path, &sb) != 0 || pipe(fds) != 0) {
        return 0; /* nothing to read yet, or no probe: the open decides */
    }
    pid = fork();
    if (pid == 0) {
        close(fds[0]);
        probe_child(path, read_all, fds[1]);
    }
    close(fds[1]);
    while (pid > 0 && got < sizeof why - 1) {
        ssize_t n = read(fds[0], why + got, sizeof why - 1 - got);
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n <= 0) {
            break;
        }
        got += (size_t)n;
    }
    why[got] = 0;
    close(fds[0]);
    if (pid < 0) {
        return 0;
    }
    while (waitpid(pid, &st, 0) < 0) {
        if (errno != EINTR) {
            return 0;
        }
    }
    if (WIFEXITED(st) && (WEXITSTATUS(st) == 0 || WEXITSTATUS(st) == 3)) {
        return 0;
    }
    if (WIFEXITED(st) && WEXITSTATUS(st) == 5) {
        store_fmt_str(reason, cap, "%s", why);
        return KEEL_ECORRUPT;
    }
    store_fmt_str(reason, cap,
                  "meta.lmdb makes LMDB fault when read (%s %d): a damaged "
                  "page reference",
                  WIFSIGNALED(st) ? "signal" : "exit",
                  WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st));
    return KEEL_ECORRUPT;
}

/* LMDB's assertion hook on the writable environment (its asserts are on
 * in Debian's build; mdb_assert_fail aborts once this returns). An
 * assertion means meta.lmdb is damaged where the open's check did not
 * look: keeld must not run on, nor die at every start. The marker makes
 * the next open reset the file (rule 3). Never returns. */
void store_meta_assert_hook(MDB_env *env, const char *msg)
{
    const char *path = NULL;

    if (mdb_env_get_path(env, &path) != 0 || path == NULL) {
        path = "meta.lmdb";
    }
    marker_write(path, msg);
    _exit(STORE_META_ASSERT_EXIT);
}

/* KEEL_ECORRUPT (reason set) if a run-time LMDB assertion left its
 * marker next to meta.lmdb (store_meta_assert_hook). */
static int marker_check(const char *path, char *reason, size_t cap)
{
    char what[STORE_META_MARKER_BYTES_MAX];

    if (!store_meta_marker_read(path, what, sizeof what)) {
        return 0;
    }
    store_fmt_str(reason, cap,
                  "meta.lmdb made LMDB fail an assertion at run time (%s): "
                  "a damaged page",
                  what);
    return KEEL_ECORRUPT;
}

int store_meta_probe(const char *path, int (*read_all)(const char *),
                     char *reason, size_t cap)
{
    int rv;

    ASSERT(path != NULL && read_all != NULL);
    rv = marker_check(path, reason, cap);
    return rv == 0 ? probe_in_child(path, read_all, reason, cap) : rv;
}
