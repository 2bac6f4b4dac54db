/* Internals shared by the snapshot/ sources. */
#ifndef KEEL_SNAP_INTERNAL_H
#define KEEL_SNAP_INTERNAL_H

#include <keel/assert.h>
#include <keel/bytes.h>

#include "snap.h"

#define SNAP_PATH_BYTES STORE_PATH_BYTES_MAX

/* A snapshot this node holds a valid file of (index 0: none). */
struct snap_held {
    uint64_t index;
    uint64_t term;
};

/* The (index, term) pairs LMDB names (zero when none or unreadable). */
struct snap_named {
    uint64_t index;
    uint64_t term;
    uint64_t older_index;
    uint64_t older_term;
};
struct snap {
    struct fs *fs;
    void (*fatal_cb)(void *arg, const char *msg);
    void *fatal_arg;
    struct store *s;
    struct store_group *g;
    uint8_t gid[16];
    char data_dir[SNAP_PATH_BYTES];
    char dir[SNAP_PATH_BYTES]; /* <data>/groups/<hex>/snap */
    char hex[33];
    struct snap_held newest; /* valid files, newest first */
    struct snap_held older;
    /* What LMDB names (read at open, then kept in step with each record):
     * a worker thread never reads LMDB or the store's in-memory log. */
    struct snap_named named;
    bool must_not_lead;
    enum snap_crash_point crash;
};

/* The 96-byte block that opens both a snapshot file (its header) and a
 * transfer stream (its manifest), FORMAT.md: magic, version, block size,
 * group id, then SNAP__FIXED_WORDS u64 words at bytes 32..87 (index, term
 * and five fields of the format's own) and the XXH3-64 of bytes 0..87. One
 * codec for both (format.c); each caller names its own errors. */
#define SNAP__FIXED_BYTES 96u
#define SNAP__FIXED_WORDS 7u

/* What snap__fixed_decode found wrong first, in the order it checks. */
enum snap__fixed_bad {
    SNAP__FIXED_OK,
    SNAP__FIXED_MAGIC,
    SNAP__FIXED_SUM,
    SNAP__FIXED_VERSION,
    SNAP__FIXED_SIZE,
};

void snap__fixed_encode(const char magic[8], uint32_t version,
                        const uint8_t group[16],
                        const uint64_t w[SNAP__FIXED_WORDS],
                        uint8_t out[SNAP__FIXED_BYTES]);
/* Check b's magic, checksum, version and block size, then read its group
 * and its words through w (nothing written unless SNAP__FIXED_OK). */
enum snap__fixed_bad snap__fixed_decode(const uint8_t b[SNAP__FIXED_BYTES],
                                        const char magic[8], uint32_t version,
                                        uint8_t group[16],
                                        uint64_t *const w[SNAP__FIXED_WORDS]);

void snap__named(struct snap *sn, struct snap_named *out);
/* Tests: true (and the crash point cleared) if asked to die here. */
bool snap__crash_here(struct snap *sn, enum snap_crash_point point);

int snap_check_expect(const struct snap_header *h, const struct snap_expect *e,
                      char *errmsg);

/* Report an I/O error that must not be survived (docs/design.md §4), abort. */
__attribute__((noreturn)) void snap__fatal(struct snap *sn, const char *what,
                                           const char *errmsg);

/* fs helpers (fsutil.c). */
void snap__fmt(char *out, size_t cap, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* The file system cfg names (cfg->data_dir set), else the POSIX one. */
struct fs *snap__cfg_fs(const struct snap_config *cfg);
/* A bounded directory walk: cb (may be NULL) with each name of dir, at most
 * max of them; one more is KEEL_ELIMIT (errmsg not set: the caller says
 * what to move away). *n (may be NULL) counts the names handed over. */
int snap__readdir(struct fs *fs, const char *dir, size_t max,
                  int (*cb)(void *arg, const char *name), void *arg, size_t *n,
                  char *errmsg);

/* Write a snapshot file for (index, term) from a body reader: temp, write,
 * fsync, rename, directory fsync, stopping at sn->crash (KEEL_ECANCELED).
 * read_cb fills buf with the next n body bytes. */
typedef int (*snap_body_read_cb)(void *arg, uint64_t off, uint8_t *buf,
                                 size_t n, char *errmsg);
int snap__write_file(struct snap *sn, const struct snap_header *h,
                     snap_body_read_cb read_cb, void *arg, char *errmsg);
/* Record (index, term) in LMDB, update the held pair, delete the file the
 * record pushed out (the §5 keep-two rule). */
int snap__record(struct snap *sn, uint64_t index, uint64_t term, char *errmsg);
/* After store_replace_commit recorded (index, term) with the older kept
 * pair (older_index: the previous newest, or 0 when the new log does not
 * continue it): update the held pair and delete pushed-out files. */
void snap__adopt_replaced(struct snap *sn, uint64_t index, uint64_t term,
                          uint64_t older_index, uint64_t older_term);
/* Open a snapshot file and validate it against exp; on success *body is
 * malloc'ed (may be NULL when body_len is 0 and want_body is false). */
int snap__load_file(struct snap *sn, const char *path,
                    const struct snap_expect *exp, bool want_body,
                    uint8_t **body, size_t *body_len, char *errmsg);

#endif
