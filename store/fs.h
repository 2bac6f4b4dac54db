/* The file-I/O seam: every byte the store puts on disk goes through a
 * struct fs, so tests can swap the real POSIX implementation for one that
 * models a page cache and loses, tears or flips bytes on demand (as SQLite
 * tests crashes through a VFS). LMDB does its own I/O and is not routed here.
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
struct fs *fs_posix(void);

/* ---- fault-injecting implementation (store/fs_fault.c), tests only ----
 *
 * An in-memory file system with a page-cache model: every file keeps its
 * durable bytes and its current bytes; fdatasync/fsync make a file's bytes
 * durable, fsync_dir makes a directory's entries durable. A power loss
 * replaces the current state with the durable one, optionally letting part
 * of the unsynced data through. Deterministic for a given seed.
 */
struct fs_fault;

enum fs_fault_cut {
    FS_CUT_DROP = 0,    /* everything unsynced is lost */
    FS_CUT_TEAR_SECTOR, /* plus a prefix of the last unsynced write, cut at a
                           512-byte boundary of the file */
    FS_CUT_TEAR_BYTE,   /* plus a prefix of the last unsynced write, cut at
                           any byte */
    FS_CUT_REORDER,     /* a random subset of unsynced 4 KiB pages persists */
};

int fs_fault_init(uint64_t seed, struct fs_fault **out);
void fs_fault_close(struct fs_fault *ff);
struct fs *fs_fault_fs(struct fs_fault *ff);

/* Power loss: unsynced writes and directory entries are lost per cut. The
 * store using this fs must be closed first. */
void fs_fault_power_loss(struct fs_fault *ff, enum fs_fault_cut cut);
/* Media faults on the durable (and current) bytes. */
int fs_fault_flip_bit(struct fs_fault *ff, const char *path, uint64_t off,
                      unsigned bit);
int fs_fault_truncate(struct fs_fault *ff, const char *path, uint64_t len);
int fs_fault_delete(struct fs_fault *ff, const char *path);
/* Read durable bytes for assertions; *got tells how many exist. */
int fs_fault_peek(struct fs_fault *ff, const char *path, uint64_t off,
                  void *buf, size_t len, size_t *got);
/* The next fdatasync (any file) fails with KEEL_EIO. */
void fs_fault_fail_next_fdatasync(struct fs_fault *ff);
/* While on, fdatasync/fsync on files block (a sync "in progress"); a power
 * loss releases them without effect. fs_fault_held counts blocked syncs. */
void fs_fault_hold_syncs(struct fs_fault *ff, bool on);
unsigned fs_fault_held(struct fs_fault *ff);
/* After fs_fault_power_loss all mutating I/O is ignored (the process is
 * dead) until thaw; close the dead store first, then thaw, then reopen. */
void fs_fault_thaw(struct fs_fault *ff);
/* While on, writes that extend a file fail with KEEL_ENOSPC. */
void fs_fault_enospc(struct fs_fault *ff, bool on);
/* Number of fdatasync + fsync calls on files so far. */
uint64_t fs_fault_syncs(struct fs_fault *ff);

#endif
