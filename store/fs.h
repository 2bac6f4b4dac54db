/* The file-I/O seam: every byte the store puts on disk goes through a
 * struct fs, so tests can swap the real POSIX implementation for one that
 * models a page cache and loses, tears or flips bytes on demand
 * (tests/unit/fs_fault.c; SQLite tests crashes through a VFS the same way).
 * LMDB does its own I/O and is not routed here.
 *
 * All functions return 0 or a negative KEEL_E* code and fill errmsg
 * (KEEL_ERRMSG_MAX bytes, may be NULL). Only these implementations read
 * errno.
 */
#ifndef KEEL_STORE_FS_H
#define KEEL_STORE_FS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#include <keel/assert.h>

struct fs_file;

enum fs_open_flags {
    FS_RDWR = 0,
    FS_CREATE = 1 << 0, /* create if missing */
    FS_EXCL = 1 << 1,   /* with FS_CREATE: fail with KEEL_EEXIST if present */
    FS_RDONLY = 1 << 2, /* open for reading only (a read-only store) */
};

/* Called once per directory entry name (never "." or ".."); a non-zero
 * return stops the listing and is returned by readdir. */
typedef int (*fs_readdir_cb)(void *arg, const char *name);

struct fs {
    void *impl;
    int (*open)(struct fs *fs, const char *path, int flags,
                struct fs_file **out, char *errmsg);
    void (*close)(struct fs *fs, struct fs_file *f);
    /* Writes every byte or fails; a short write is an error. */
    int (*pwritev)(struct fs *fs, struct fs_file *f, const struct iovec *iov,
                   int iovcnt, uint64_t off, char *errmsg);
    /* Reads up to len bytes; *got < len only at end of file. */
    int (*pread)(struct fs *fs, struct fs_file *f, void *buf, size_t len,
                 uint64_t off, size_t *got, char *errmsg);
    int (*fdatasync)(struct fs *fs, struct fs_file *f, char *errmsg);
    int (*fsync)(struct fs *fs, struct fs_file *f, char *errmsg);
    int (*size)(struct fs *fs, struct fs_file *f, uint64_t *out, char *errmsg);
    int (*ftruncate)(struct fs *fs, struct fs_file *f, uint64_t len,
                     char *errmsg);
    /* Makes the entries of directory path durable. */
    int (*fsync_dir)(struct fs *fs, const char *path, char *errmsg);
    int (*rename)(struct fs *fs, const char *from, const char *to,
                  char *errmsg);
    int (*unlink)(struct fs *fs, const char *path, char *errmsg);
    /* KEEL_EEXIST when it already exists. */
    int (*mkdir)(struct fs *fs, const char *path, char *errmsg);
    /* KEEL_ENOENT when path is missing. */
    int (*readdir)(struct fs *fs, const char *path, fs_readdir_cb cb, void *arg,
                   char *errmsg);
    /* 0 when present, KEEL_ENOENT when missing. */
    int (*stat)(struct fs *fs, const char *path, char *errmsg);
};

/* The real file system (store/fs_posix.c). Static, never freed. */
struct fs *store_fs_posix(void);

#endif
