/* The real file system behind struct fs: thin wrappers over POSIX calls that
 * translate errno at this boundary, as every I/O boundary does.
 */
#include <dirent.h>
#include <limits.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <keel/error.h>
#include <keel/limits.h>

#include "fs.h"

struct fs_file {
    int fd;
};

static int errno_to_keel(int e)
{
    switch (e) {
    case ENOENT:
        return KEEL_ENOENT;
    case EEXIST:
        return KEEL_EEXIST;
    case ENOSPC:
    case EDQUOT:
        return KEEL_ENOSPC;
    case ENOMEM:
        return KEEL_ENOMEM;
    case EACCES:
    case EPERM:
        return KEEL_EPERM;
    default:
        return KEEL_EIO;
    }
}

/* The error of a failed call named what (about path, or none when NULL):
 * code, or errno's own code when code is 0, with errno's text. */
static int os_err(int code, char *errmsg, const char *what, const char *path)
{
    int e = errno;

    code = code != 0 ? code : errno_to_keel(e);
    if (path == NULL) {
        return keel_err(code, errmsg, "%s: %s", what, strerror(e));
    }
    return keel_err(code, errmsg, "%s %s: %s", what, path, strerror(e));
}

static int posix_open(struct fs *fs, const char *path, int flags,
                      struct fs_file **out, char *errmsg)
{
    int oflags = O_RDWR | O_CLOEXEC;
    struct fs_file *f;
    int fd;

    ASSERT(fs != NULL);
    ASSERT(path != NULL);
    if ((flags & FS_RDONLY) != 0) {
        ASSERT((flags & FS_CREATE) == 0);
        oflags = O_RDONLY | O_CLOEXEC;
    }
    if ((flags & FS_CREATE) != 0) {
        oflags |= O_CREAT;
    }
    if ((flags & FS_EXCL) != 0) {
        oflags |= O_EXCL;
    }
    fd = open(path, oflags, 0644);
    if (fd < 0) {
        return os_err(0, errmsg, "open", path);
    }
    f = malloc(sizeof *f);
    if (f == NULL) {
        close(fd);
        return keel_err(KEEL_ENOMEM, errmsg, "open %s: out of memory", path);
    }
    f->fd = fd;
    *out = f;
    return 0;
}

static void posix_close(struct fs *fs, struct fs_file *f)
{
    ASSERT(fs != NULL);
    ASSERT(f != NULL);
    close(f->fd);
    free(f);
}

static int posix_pwritev(struct fs *fs, struct fs_file *f,
                         const struct iovec *iov, int iovcnt, uint64_t off,
                         char *errmsg)
{
    size_t want = 0;
    ssize_t n;

    ASSERT(fs != NULL);
    ASSERT(iovcnt > 0 && iovcnt <= IOV_MAX);
    for (int i = 0; i < iovcnt; i++) {
        want += iov[i].iov_len;
    }
    n = pwritev(f->fd, iov, iovcnt, (off_t)off);
    if (n < 0) {
        int e = errno;
        return keel_err(errno_to_keel(e), errmsg, "pwritev at %llu: %s",
                        (unsigned long long)off, strerror(e));
    }
    if ((size_t)n != want) {
        /* A short write means the device is full or failing; the store
         * treats it like any write error. */
        return keel_err(KEEL_EIO, errmsg, "short pwritev at %llu",
                        (unsigned long long)off);
    }
    return 0;
}

static int posix_pread(struct fs *fs, struct fs_file *f, void *buf, size_t len,
                       uint64_t off, size_t *got, char *errmsg)
{
    size_t done = 0;

    ASSERT(fs != NULL);
    ASSERT(buf != NULL || len == 0);
    while (done < len) {
        ssize_t n =
            pread(f->fd, (char *)buf + done, len - done, (off_t)(off + done));
        if (n < 0) {
            int e = errno;
            if (e == EINTR) {
                continue;
            }
            return keel_err(errno_to_keel(e), errmsg, "pread at %llu: %s",
                            (unsigned long long)off, strerror(e));
        }
        if (n == 0) {
            break;
        }
        done += (size_t)n;
    }
    *got = done;
    return 0;
}

static int posix_fdatasync(struct fs *fs, struct fs_file *f, char *errmsg)
{
    ASSERT(fs != NULL);
    ASSERT(f != NULL);
    return fdatasync(f->fd) == 0 ? 0
                                 : os_err(KEEL_EIO, errmsg, "fdatasync", NULL);
}

static int posix_fsync(struct fs *fs, struct fs_file *f, char *errmsg)
{
    ASSERT(fs != NULL);
    ASSERT(f != NULL);
    return fsync(f->fd) == 0 ? 0 : os_err(KEEL_EIO, errmsg, "fsync", NULL);
}

static int posix_size(struct fs *fs, struct fs_file *f, uint64_t *out,
                      char *errmsg)
{
    struct stat st;

    ASSERT(fs != NULL);
    ASSERT(out != NULL);
    if (fstat(f->fd, &st) != 0) {
        return os_err(0, errmsg, "fstat", NULL);
    }
    *out = (uint64_t)st.st_size;
    return 0;
}

static int posix_ftruncate(struct fs *fs, struct fs_file *f, uint64_t len,
                           char *errmsg)
{
    ASSERT(fs != NULL);
    ASSERT(f != NULL);
    return ftruncate(f->fd, (off_t)len) == 0
               ? 0
               : os_err(0, errmsg, "ftruncate", NULL);
}

static int posix_fsync_dir(struct fs *fs, const char *path, char *errmsg)
{
    int fd;
    int rv = 0;

    ASSERT(fs != NULL);
    ASSERT(path != NULL);
    fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) {
        return os_err(0, errmsg, "open dir", path);
    }
    if (fsync(fd) != 0) {
        rv = os_err(KEEL_EIO, errmsg, "fsync dir", path);
    }
    close(fd);
    return rv;
}

static int posix_rename(struct fs *fs, const char *from, const char *to,
                        char *errmsg)
{
    ASSERT(fs != NULL);
    ASSERT(from != NULL && to != NULL);
    return rename(from, to) == 0 ? 0 : os_err(0, errmsg, "rename", from);
}

static int posix_unlink(struct fs *fs, const char *path, char *errmsg)
{
    ASSERT(fs != NULL);
    ASSERT(path != NULL);
    return unlink(path) == 0 ? 0 : os_err(0, errmsg, "unlink", path);
}

static int posix_mkdir(struct fs *fs, const char *path, char *errmsg)
{
    ASSERT(fs != NULL);
    ASSERT(path != NULL);
    return mkdir(path, 0755) == 0 ? 0 : os_err(0, errmsg, "mkdir", path);
}

static int posix_readdir(struct fs *fs, const char *path, fs_readdir_cb cb,
                         void *arg, char *errmsg)
{
    DIR *d;
    struct dirent *de;
    int rv = 0;
    unsigned n = 0;

    ASSERT(fs != NULL);
    ASSERT(cb != NULL);
    d = opendir(path);
    if (d == NULL) {
        return os_err(0, errmsg, "opendir", path);
    }
    while ((de = readdir(d)) != NULL) {
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0) {
            continue;
        }
        if (++n > STORE_DIR_ENTRIES_MAX) {
            rv = keel_err(KEEL_ELIMIT, errmsg, "%s: too many entries", path);
            break;
        }
        rv = cb(arg, de->d_name);
        if (rv != 0) {
            break;
        }
    }
    closedir(d);
    return rv;
}

static int posix_stat(struct fs *fs, const char *path, char *errmsg)
{
    struct stat st;

    ASSERT(fs != NULL);
    ASSERT(path != NULL);
    return stat(path, &st) == 0 ? 0 : os_err(0, errmsg, "stat", path);
}

static struct fs posix_fs = {
    .impl = NULL,
    .open = posix_open,
    .close = posix_close,
    .pwritev = posix_pwritev,
    .pread = posix_pread,
    .fdatasync = posix_fdatasync,
    .fsync = posix_fsync,
    .size = posix_size,
    .ftruncate = posix_ftruncate,
    .fsync_dir = posix_fsync_dir,
    .rename = posix_rename,
    .unlink = posix_unlink,
    .mkdir = posix_mkdir,
    .readdir = posix_readdir,
    .stat = posix_stat,
};

struct fs *store_fs_posix(void)
{
    return &posix_fs;
}
