/* The fault-injecting file system for tests (tests/unit/fs_fault.c): a
 * struct fs the store and snapshot unit tests open instead of the real one.
 *
 * An in-memory file system with a page-cache model: every file keeps its
 * durable bytes and its current bytes; fdatasync/fsync make a file's bytes
 * durable, fsync_dir makes a directory's entries durable. A power loss
 * replaces the current state with the durable one, optionally letting part
 * of the unsynced data through. Deterministic for a given seed.
 */
#ifndef KEEL_TESTS_FS_FAULT_H
#define KEEL_TESTS_FS_FAULT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "fs.h"

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
/* Number of fsync_dir calls so far. */
uint64_t fs_fault_dir_syncs(struct fs_fault *ff);

#endif
