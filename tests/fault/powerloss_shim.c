/* libkeel_powerloss.so: an LD_PRELOAD shim that lets a power loss be
 * applied to a kill -9'ed process's files afterwards (docs/faults.md).
 *
 * For every file under $KEEL_PL_DIR it keeps an undo journal in
 * $KEEL_PL_JOURNAL: before each write, the bytes it overwrites and the old
 * file size; after each successful fdatasync/fsync, a sync record (a write
 * through an O_SYNC/O_DSYNC descriptor is synced at once); for directory
 * entries, records of create, rename, unlink (the unlinked inode is kept
 * through a hard link in the journal's graveyard), mkdir, and of each
 * directory fsync. tools/faults-powerloss then undoes, per file, every
 * write after its last sync (or a random subset of its 4 KiB pages) and
 * every name operation no later directory fsync made durable. The page
 * cache survives kill -9 in reality; this is what lets the shim's journal
 * (plain write(), no fsync) survive too.
 *
 * A grave lives only while its unlink is not durable: the directory fsync
 * of its parent that covers the 'U' record unlinks it at once (the tool
 * restores only unlinks no later directory fsync covers, by the same
 * rule: the fsync began after the record, on the record's parent path), so a
 * long run under the shim holds only the not yet durable unlinks, not every
 * file keeld ever removed (a 30-minute soak filled the disk with 31-35 GB of
 * them per node). Those are bounded too: $KEEL_PL_GRAVE_MAX bytes (default 1
 * GiB, allocated blocks); an unlink past the bound keeps no grave, journals an
 * empty one (a power loss then leaves that file removed: its unlink reached the
 * disk, one of the two outcomes a real power loss allows) and the shim says so
 * on stderr once.
 *
 * $KEEL_PL_BOOT_ID, when set, replaces /proc/sys/kernel/random/boot_id for
 * the process: after a modelled power loss the tool writes a new id there,
 * as an OS crash does (docs/design.md §4.7 R4).
 *
 * A test helper, not part of keeld. Record layout (little-endian):
 *   'W' path off len old_size n_old old[n_old]   before a write
 *   'S' path size upto                            file synced
 *   'D' path upto                                 directory fsynced
 *   'C' path                                      new file created
 *   'R' from to                                   rename
 *   'U' path grave                                unlink (inode kept)
 *   'M' path                                      mkdir
 *   'T' path old_size new_size n_old old[n_old]   ftruncate
 *   PL_BEGIN                                      a process started
 * where a path is u32 length + bytes and numbers are u64; upto is the
 * journal offset when the sync began: it covers only records before it
 * (a write racing with a sync on another thread is not covered).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <unistd.h>

#define PL_FDS_MAX 4096
#define PL_OLD_MAX (64u << 20) /* old bytes saved per record */
#define PL_GRAVE_MAX_DEFAULT (1ull << 30)

/* An unlink no directory fsync has made durable yet: its grave, the
 * directory it left and the journal offset of its 'U' record. */
struct pl_grave {
    char *grave;
    char *parent;
    uint64_t at;
    uint64_t bytes;
    struct pl_grave *next;
};

/* Begins each process's records (tools/faults-powerloss BEGIN). */
#define PL_BEGIN                                                               \
    "B\x8f"                                                                    \
    "KEEL-PL-BEGIN\xa7"

struct pl_fd {
    char *path; /* tracked file or directory, NULL: not tracked */
    bool sync;  /* O_SYNC / O_DSYNC: every write is durable at once */
    bool dir;
};

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static struct pl_fd fds[PL_FDS_MAX];
static char root[PATH_MAX];
static size_t root_len;
static int jfd = -1;
static unsigned long graves;
static struct pl_grave *pending; /* newest first */
static uint64_t pending_bytes;
static uint64_t grave_max = PL_GRAVE_MAX_DEFAULT;
static bool grave_max_said;
static int (*real_open)(const char *, int, ...);
static int (*real_open64)(const char *, int, ...);
static ssize_t (*real_pwrite)(int, const void *, size_t, off_t);
static ssize_t (*real_pwrite64)(int, const void *, size_t, off_t);
static ssize_t (*real_pwritev64)(int, const struct iovec *, int, off_t);
static ssize_t (*real_write)(int, const void *, size_t);
static ssize_t (*real_writev)(int, const struct iovec *, int);
static int (*real_fdatasync)(int);
static int (*real_fsync)(int);
static int (*real_ftruncate)(int, off_t);
static int (*real_ftruncate64)(int, off_t);
static int (*real_close)(int);
static int (*real_rename)(const char *, const char *);
static int (*real_unlink)(const char *);
static int (*real_mkdir)(const char *, mode_t);

static void put(const void *p, size_t n);

__attribute__((constructor)) static void pl_init(void)
{
    if (real_open != NULL) {
        return;
    }
    real_open = dlsym(RTLD_NEXT, "open");
    real_open64 = dlsym(RTLD_NEXT, "open64");
    real_pwrite = dlsym(RTLD_NEXT, "pwrite");
    real_pwrite64 = dlsym(RTLD_NEXT, "pwrite64");
    real_pwritev64 = dlsym(RTLD_NEXT, "pwritev64");
    real_write = dlsym(RTLD_NEXT, "write");
    real_writev = dlsym(RTLD_NEXT, "writev");
    real_fdatasync = dlsym(RTLD_NEXT, "fdatasync");
    real_fsync = dlsym(RTLD_NEXT, "fsync");
    real_ftruncate = dlsym(RTLD_NEXT, "ftruncate");
    real_ftruncate64 = dlsym(RTLD_NEXT, "ftruncate64");
    real_close = dlsym(RTLD_NEXT, "close");
    real_rename = dlsym(RTLD_NEXT, "rename");
    real_unlink = dlsym(RTLD_NEXT, "unlink");
    real_mkdir = dlsym(RTLD_NEXT, "mkdir");
    const char *dir = getenv("KEEL_PL_DIR");
    const char *j = getenv("KEEL_PL_JOURNAL");
    if (dir == NULL || j == NULL || realpath(dir, root) == NULL) {
        return;
    }
    root_len = strlen(root);
    const char *gm = getenv("KEEL_PL_GRAVE_MAX");
    if (gm != NULL && *gm != '\0') {
        grave_max = strtoull(gm, NULL, 10);
    }
    jfd = real_open(j, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (jfd >= 0) {
        /* A record of the previous process a kill -9 cut between its
         * writes ends here: the tool reads each part by itself. */
        static const char begin[] = PL_BEGIN;
        put(begin, sizeof begin - 1);
    }
}

/* Absolute form of path if it lies under the root (malloc'ed), else NULL.
 * Paths are made absolute lexically (the store uses absolute paths). */
static char *tracked(const char *path)
{
    char buf[PATH_MAX];
    if (jfd < 0 || path == NULL) {
        return NULL;
    }
    if (path[0] != '/') {
        if (getcwd(buf, sizeof buf) == NULL ||
            strlen(buf) + strlen(path) + 2 > sizeof buf) {
            return NULL;
        }
        strcat(buf, "/");
        strcat(buf, path);
    } else if (strlen(path) < sizeof buf) {
        strcpy(buf, path);
    } else {
        return NULL;
    }
    if (strncmp(buf, root, root_len) != 0 ||
        (buf[root_len] != '/' && buf[root_len] != '\0')) {
        return NULL;
    }
    return strdup(buf);
}

static void put(const void *p, size_t n)
{
    const char *c = p;
    while (n > 0) {
        ssize_t w = real_write(jfd, c, n);
        if (w <= 0) {
            return;
        }
        c += w;
        n -= (size_t)w;
    }
}

static void put_path(const char *p)
{
    uint32_t n = (uint32_t)strlen(p);
    put(&n, 4);
    put(p, n);
}

static void put64(uint64_t v)
{
    put(&v, 8);
}

static uint64_t size_of(int fd)
{
    struct stat st;
    return fstat(fd, &st) == 0 ? (uint64_t)st.st_size : 0;
}

/* Journal a write of len bytes at off (caller holds mu). */
static void note_write(int fd, uint64_t off, uint64_t len)
{
    uint64_t old = size_of(fd);
    uint64_t n = off < old ? (old - off < len ? old - off : len) : 0;
    char *buf = n > 0 && n <= PL_OLD_MAX ? malloc(n) : NULL;
    n = buf != NULL ? n : 0;
    if (n > 0 && pread(fd, buf, n, (off_t)off) != (ssize_t)n) {
        n = 0;
    }
    put("W", 1);
    put_path(fds[fd].path);
    put64(off);
    put64(len);
    put64(old);
    put64(n);
    put(buf, n);
    free(buf);
}

static uint64_t journal_end(void)
{
    off_t e = lseek(jfd, 0, SEEK_END);
    return e > 0 ? (uint64_t)e : 0;
}

/* A directory fsync that began at journal offset upto made every unlink
 * from it journalled before upto durable: the tool never restores those,
 * so their graves go now (caller holds mu). */
static void drop_durable_graves(const char *dir, uint64_t upto)
{
    struct pl_grave **pp = &pending;
    while (*pp != NULL) {
        struct pl_grave *g = *pp;
        /* The tool's rule exactly: the directory's journalled path is the
         * parent of the unlinked path. */
        if (g->at < upto && strcmp(dir, g->parent) == 0) {
            *pp = g->next;
            real_unlink(g->grave);
            pending_bytes -= g->bytes;
            free(g->grave);
            free(g->parent);
            free(g);
        } else {
            pp = &g->next;
        }
    }
}

static void note_sync(int fd, uint64_t upto)
{
    put(fds[fd].dir ? "D" : "S", 1);
    put_path(fds[fd].path);
    if (!fds[fd].dir) {
        put64(size_of(fd));
    }
    put64(upto);
    if (fds[fd].dir) {
        drop_durable_graves(fds[fd].path, upto);
    }
}

static bool is_tracked(int fd)
{
    pl_init();
    return fd >= 0 && fd < PL_FDS_MAX && fds[fd].path != NULL;
}

static int do_open(int (*real)(const char *, int, ...), const char *path,
                   int flags, mode_t mode)
{
    pl_init();
    char *abs = tracked(path);
    struct stat st;
    bool existed = abs != NULL && stat(abs, &st) == 0;
    const char *bid = getenv("KEEL_PL_BOOT_ID");
    if (bid != NULL && strcmp(path, "/proc/sys/kernel/random/boot_id") == 0) {
        path = bid;
    }
    int fd = real(path, flags, mode);
    if (fd < 0 || abs == NULL || fd >= PL_FDS_MAX) {
        free(abs);
        return fd;
    }
    pthread_mutex_lock(&mu);
    free(fds[fd].path);
    fds[fd].path = abs;
    fds[fd].sync = (flags & (O_SYNC | O_DSYNC)) != 0;
    fds[fd].dir = fstat(fd, &st) == 0 && S_ISDIR(st.st_mode);
    if (!existed && (flags & O_CREAT) != 0) {
        put("C", 1);
        put_path(abs);
    }
    pthread_mutex_unlock(&mu);
    return fd;
}

int open(const char *path, int flags, ...)
{
    pl_init();
    mode_t mode = 0;
    if ((flags & O_CREAT) != 0) {
        va_list ap;
        va_start(ap, flags);
        mode = (mode_t)va_arg(ap, int);
        va_end(ap);
    }
    return do_open(real_open, path, flags, mode);
}

int open64(const char *path, int flags, ...)
{
    pl_init();
    mode_t mode = 0;
    if ((flags & O_CREAT) != 0) {
        va_list ap;
        va_start(ap, flags);
        mode = (mode_t)va_arg(ap, int);
        va_end(ap);
    }
    return do_open(real_open64 != NULL ? real_open64 : real_open, path, flags,
                   mode);
}

int close(int fd)
{
    pl_init();
    if (fd >= 0 && fd < PL_FDS_MAX) {
        pthread_mutex_lock(&mu);
        free(fds[fd].path);
        fds[fd].path = NULL;
        pthread_mutex_unlock(&mu);
    }
    return real_close(fd);
}

/* A write of len bytes at off: journal, write, then (O_SYNC fd) sync. */
#define PL_WRITE(fd, off, len, call)                                           \
    do {                                                                       \
        if (!is_tracked(fd)) {                                                 \
            return call;                                                       \
        }                                                                      \
        pthread_mutex_lock(&mu);                                               \
        note_write(fd, (uint64_t)(off), (uint64_t)(len));                      \
        ssize_t pl_w = call;                                                   \
        if (pl_w >= 0 && fds[fd].sync) {                                       \
            note_sync(fd, journal_end());                                      \
        }                                                                      \
        pthread_mutex_unlock(&mu);                                             \
        return pl_w;                                                           \
    } while (0)

static size_t iov_len(const struct iovec *iov, int n)
{
    size_t t = 0;
    for (int i = 0; i < n; i++) {
        t += iov[i].iov_len;
    }
    return t;
}

ssize_t pwrite(int fd, const void *b, size_t n, off_t off)
{
    PL_WRITE(fd, off, n, real_pwrite(fd, b, n, off));
}

ssize_t pwrite64(int fd, const void *b, size_t n, off_t off)
{
    PL_WRITE(fd, off, n, real_pwrite64(fd, b, n, off));
}

ssize_t pwritev64(int fd, const struct iovec *iov, int cnt, off_t off)
{
    PL_WRITE(fd, off, iov_len(iov, cnt), real_pwritev64(fd, iov, cnt, off));
}

ssize_t pwritev(int fd, const struct iovec *iov, int cnt, off_t off)
{
    PL_WRITE(fd, off, iov_len(iov, cnt), real_pwritev64(fd, iov, cnt, off));
}

ssize_t write(int fd, const void *b, size_t n)
{
    PL_WRITE(fd, lseek(fd, 0, SEEK_CUR), n, real_write(fd, b, n));
}

ssize_t writev(int fd, const struct iovec *iov, int cnt)
{
    PL_WRITE(fd, lseek(fd, 0, SEEK_CUR), iov_len(iov, cnt),
             real_writev(fd, iov, cnt));
}

static int do_sync(int fd, int (*real)(int))
{
    uint64_t upto = 0;
    bool t = is_tracked(fd);
    if (t) {
        pthread_mutex_lock(&mu);
        upto = journal_end();
        pthread_mutex_unlock(&mu);
    }
    int rv = real(fd);
    if (rv == 0 && t && is_tracked(fd)) {
        pthread_mutex_lock(&mu);
        note_sync(fd, upto);
        pthread_mutex_unlock(&mu);
    }
    return rv;
}

int fdatasync(int fd)
{
    return do_sync(fd, real_fdatasync);
}

int fsync(int fd)
{
    return do_sync(fd, real_fsync);
}

static int do_truncate(int fd, off_t len, int (*real)(int, off_t))
{
    if (!is_tracked(fd)) {
        return real(fd, len);
    }
    pthread_mutex_lock(&mu);
    uint64_t old = size_of(fd);
    uint64_t n = (uint64_t)len < old ? old - (uint64_t)len : 0;
    char *buf = n > 0 && n <= PL_OLD_MAX ? malloc(n) : NULL;
    n = buf != NULL && pread(fd, buf, n, len) == (ssize_t)n ? n : 0;
    put("T", 1);
    put_path(fds[fd].path);
    put64(old);
    put64((uint64_t)len);
    put64(n);
    put(buf, n);
    free(buf);
    int rv = real(fd, len);
    pthread_mutex_unlock(&mu);
    return rv;
}

int ftruncate(int fd, off_t len)
{
    return do_truncate(fd, len, real_ftruncate);
}

int ftruncate64(int fd, off_t len)
{
    return do_truncate(
        fd, len, real_ftruncate64 != NULL ? real_ftruncate64 : real_ftruncate);
}

int rename(const char *from, const char *to)
{
    pl_init();
    char *a = tracked(from);
    char *b = tracked(to);
    int rv = real_rename(from, to);
    if (rv == 0 && (a != NULL || b != NULL)) {
        pthread_mutex_lock(&mu);
        put("R", 1);
        put_path(a != NULL ? a : from);
        put_path(b != NULL ? b : to);
        pthread_mutex_unlock(&mu);
    }
    free(a);
    free(b);
    return rv;
}

/* Room for a grave of the file at path under the bound? Says once when
 * not, with what to do (caller holds mu). */
static bool grave_room(const char *path, uint64_t *bytes)
{
    struct stat st;
    *bytes = stat(path, &st) == 0 ? (uint64_t)st.st_blocks * 512 : 0;
    if (pending_bytes + *bytes <= grave_max) {
        return true;
    }
    if (!grave_max_said) {
        grave_max_said = true;
        fprintf(stderr,
                "powerloss shim: the graveyard holds %llu bytes of unlinks "
                "no directory fsync made durable, KEEL_PL_GRAVE_MAX is %llu: "
                "later unlinks past it keep no grave (a power loss leaves "
                "those files removed); raise KEEL_PL_GRAVE_MAX or make the "
                "unlinks durable sooner\n",
                (unsigned long long)pending_bytes,
                (unsigned long long)grave_max);
    }
    return false;
}

static void grave_keep(const char *grave, const char *path, uint64_t at,
                       uint64_t bytes)
{
    struct pl_grave *g = calloc(1, sizeof *g);
    const char *slash = strrchr(path, '/');
    if (g == NULL || slash == NULL) {
        free(g);
        return; /* kept on disk; the tool removes it with the journal */
    }
    g->grave = strdup(grave);
    g->parent = strndup(path, slash == path ? 1 : (size_t)(slash - path));
    g->at = at;
    g->bytes = bytes;
    g->next = pending;
    pending = g;
    pending_bytes += bytes;
}

/* The inode stays reachable through a link in the graveyard, so the tool
 * can bring an unlink back that no directory fsync made durable. */
int unlink(const char *path)
{
    pl_init();
    char *a = tracked(path);
    char grave[PATH_MAX];
    const char *j = getenv("KEEL_PL_JOURNAL");
    uint64_t bytes = 0;
    if (a == NULL || j == NULL) {
        free(a);
        return real_unlink(path);
    }
    pthread_mutex_lock(&mu);
    snprintf(grave, sizeof grave, "%s.grave.%d.%lu", j, (int)getpid(),
             graves++);
    bool kept = grave_room(path, &bytes) && link(path, grave) == 0;
    int rv = real_unlink(path);
    if (rv == 0) {
        uint64_t at = journal_end();
        put("U", 1);
        put_path(a);
        put_path(kept ? grave : "");
        if (kept) {
            grave_keep(grave, a, at, bytes);
        }
    } else if (kept) {
        real_unlink(grave);
    }
    pthread_mutex_unlock(&mu);
    free(a);
    return rv;
}

int mkdir(const char *path, mode_t mode)
{
    pl_init();
    char *a = tracked(path);
    int rv = real_mkdir(path, mode);
    if (rv == 0 && a != NULL) {
        pthread_mutex_lock(&mu);
        put("M", 1);
        put_path(a);
        pthread_mutex_unlock(&mu);
    }
    free(a);
    return rv;
}
