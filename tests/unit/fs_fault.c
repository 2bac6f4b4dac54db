/* A fault-injecting, in-memory struct fs for tests (see fs_fault.h).
 *
 * Model: each file keeps its current bytes (what reads see, the page cache)
 * and its durable bytes (what survives a power loss). fdatasync and fsync
 * copy current to durable. Directory entries are durable only after
 * fsync_dir of their directory. A power loss keeps durable state plus,
 * depending on the cut, a prefix of the last unsynced write (torn write:
 * only the bytes that write covered, so bytes it rewrote with their old value
 * stay old, docs/design.md §4) or a random subset of dirty 4 KiB pages
 * (writeback reordering). All randomness comes from the seed.
 */
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include <keel/error.h>
#include <keel/limits.h>

#include "fs_fault.h"

#define FAULT_WRITES_MAX 4096
#define FAULT_NODES_MAX (4 * STORE_DIR_ENTRIES_MAX)
#define FAULT_PAGE 4096u
#define FAULT_SECTOR 512u

struct fwrite {
    uint64_t off;
    uint64_t len;
};

struct node {
    char *cur; /* current name, NULL once unlinked */
    char *dur; /* durable name, NULL if the entry is not durable */
    bool is_dir;
    bool dead; /* lost in a power loss or deleted by a fault */
    uint8_t *data;
    uint64_t len;
    uint8_t *ddata;
    uint64_t dlen;
    struct fwrite wr[FAULT_WRITES_MAX];
    size_t nwr;
};

struct fs_fault {
    struct fs fs;
    pthread_mutex_t mu;
    struct node **nodes;
    size_t n;
    size_t cap;
    uint64_t rng;
    bool fail_next_sync;
    bool enospc;
    bool hold;   /* fdatasync blocks until released or power loss */
    bool frozen; /* after a power loss: the dead process's I/O is ignored */
    unsigned held;
    pthread_cond_t cv;
    uint64_t syncs;
    uint64_t dir_syncs;
};

struct fs_file {
    struct fs_fault *ff;
    struct node *node;
};

static uint64_t rng_next(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static bool parent_is(const char *path, const char *dir)
{
    size_t dl = strlen(dir);
    const char *slash = strrchr(path, '/');

    if (slash == NULL) {
        return false;
    }
    return (size_t)(slash - path) == dl && strncmp(path, dir, dl) == 0;
}

static struct node *find_cur(struct fs_fault *ff, const char *path)
{
    ASSERT(ff != NULL);
    ASSERT(path != NULL);
    for (size_t i = 0; i < ff->n; i++) {
        struct node *nd = ff->nodes[i];
        if (!nd->dead && nd->cur != NULL && strcmp(nd->cur, path) == 0) {
            return nd;
        }
    }
    return NULL;
}

static int grow(uint8_t **buf, uint64_t *len, uint64_t want)
{
    uint8_t *p;

    ASSERT(buf != NULL);
    ASSERT(len != NULL);
    if (want <= *len) {
        return 0;
    }
    p = realloc(*buf, want);
    if (p == NULL) {
        return KEEL_ENOMEM;
    }
    memset(p + *len, 0, want - *len);
    *buf = p;
    *len = want;
    return 0;
}

static struct node *node_new(struct fs_fault *ff, const char *path, bool is_dir)
{
    struct node *nd;

    ASSERT(ff != NULL);
    ASSERT(ff->n <= FAULT_NODES_MAX);
    if (ff->n == ff->cap) {
        size_t cap = ff->cap == 0 ? 64 : ff->cap * 2;
        struct node **p = realloc(ff->nodes, cap * sizeof *p);
        if (p == NULL) {
            return NULL;
        }
        ff->nodes = p;
        ff->cap = cap;
    }
    nd = calloc(1, sizeof *nd);
    if (nd == NULL) {
        return NULL;
    }
    nd->cur = strdup(path);
    if (nd->cur == NULL) {
        free(nd);
        return NULL;
    }
    nd->is_dir = is_dir;
    ff->nodes[ff->n++] = nd;
    return nd;
}

static int ff_open(struct fs *fs, const char *path, int flags,
                   struct fs_file **out, char *errmsg)
{
    struct fs_fault *ff = fs->impl;
    struct node *nd;
    struct fs_file *f;
    int rv = 0;

    ASSERT(ff != NULL);
    ASSERT(out != NULL);
    pthread_mutex_lock(&ff->mu);
    nd = find_cur(ff, path);
    if (nd != NULL && (flags & FS_EXCL) != 0) {
        rv = keel_err(KEEL_EEXIST, errmsg, "open %s: exists", path);
        goto out;
    }
    if (nd == NULL && (flags & FS_CREATE) == 0) {
        rv = keel_err(KEEL_ENOENT, errmsg, "open %s: missing", path);
        goto out;
    }
    if (nd == NULL) {
        nd = node_new(ff, path, false);
        if (nd != NULL && ff->frozen) {
            nd->dead = true; /* created by the dead process: never seen */
        }
    }
    f = nd == NULL ? NULL : malloc(sizeof *f);
    if (f == NULL) {
        rv = keel_err(KEEL_ENOMEM, errmsg, "open %s: out of memory", path);
        goto out;
    }
    f->ff = ff;
    f->node = nd;
    *out = f;
out:
    pthread_mutex_unlock(&ff->mu);
    return rv;
}

static void ff_close(struct fs *fs, struct fs_file *f)
{
    ASSERT(fs != NULL);
    ASSERT(f != NULL);
    free(f);
}

static void note_write(struct node *nd, uint64_t off, uint64_t len)
{
    ASSERT(nd != NULL);
    ASSERT(nd->nwr <= FAULT_WRITES_MAX);
    if (nd->nwr == FAULT_WRITES_MAX) {
        /* Coalesce: the oldest writes become one range; tearing only ever
         * uses the last write, so this loses no fault coverage. */
        uint64_t lo = nd->wr[0].off;
        uint64_t hi = nd->wr[0].off + nd->wr[0].len;
        for (size_t i = 1; i < nd->nwr - 1; i++) {
            uint64_t e = nd->wr[i].off + nd->wr[i].len;
            lo = nd->wr[i].off < lo ? nd->wr[i].off : lo;
            hi = e > hi ? e : hi;
        }
        nd->wr[0].off = lo;
        nd->wr[0].len = hi - lo;
        nd->wr[1] = nd->wr[nd->nwr - 1];
        nd->nwr = 2;
    }
    nd->wr[nd->nwr].off = off;
    nd->wr[nd->nwr].len = len;
    nd->nwr++;
}

static int ff_pwritev(struct fs *fs, struct fs_file *f, const struct iovec *iov,
                      int iovcnt, uint64_t off, char *errmsg)
{
    struct fs_fault *ff = fs->impl;
    struct node *nd = f->node;
    uint64_t total = 0;
    uint64_t pos = off;
    int rv;

    ASSERT(iovcnt > 0);
    ASSERT(!nd->is_dir);
    for (int i = 0; i < iovcnt; i++) {
        total += iov[i].iov_len;
    }
    pthread_mutex_lock(&ff->mu);
    if (ff->frozen) {
        pthread_mutex_unlock(&ff->mu);
        return 0;
    }
    if (ff->enospc && off + total > nd->len) {
        pthread_mutex_unlock(&ff->mu);
        return keel_err(KEEL_ENOSPC, errmsg, "pwritev: injected ENOSPC");
    }
    rv = grow(&nd->data, &nd->len, off + total);
    if (rv != 0) {
        pthread_mutex_unlock(&ff->mu);
        return keel_err(rv, errmsg, "pwritev: out of memory");
    }
    for (int i = 0; i < iovcnt; i++) {
        memcpy(nd->data + pos, iov[i].iov_base, iov[i].iov_len);
        pos += iov[i].iov_len;
    }
    if (total > 0) {
        note_write(nd, off, total);
    }
    pthread_mutex_unlock(&ff->mu);
    return 0;
}

static int ff_pread(struct fs *fs, struct fs_file *f, void *buf, size_t len,
                    uint64_t off, size_t *got, char *errmsg)
{
    struct fs_fault *ff = fs->impl;
    struct node *nd = f->node;
    size_t n = 0;

    ASSERT(got != NULL);
    ASSERT(buf != NULL || len == 0);
    (void)errmsg;
    pthread_mutex_lock(&ff->mu);
    if (off < nd->len) {
        n = (size_t)(nd->len - off) < len ? (size_t)(nd->len - off) : len;
        memcpy(buf, nd->data + off, n);
    }
    pthread_mutex_unlock(&ff->mu);
    *got = n;
    return 0;
}

static int ff_sync(struct fs *fs, struct fs_file *f, char *errmsg)
{
    struct fs_fault *ff = fs->impl;
    struct node *nd = f->node;
    uint8_t *p;

    ASSERT(ff != NULL);
    ASSERT(nd != NULL);
    pthread_mutex_lock(&ff->mu);
    while (ff->hold && !ff->frozen) {
        ff->held++;
        pthread_cond_broadcast(&ff->cv);
        pthread_cond_wait(&ff->cv, &ff->mu);
        ff->held--;
    }
    if (ff->frozen) {
        pthread_mutex_unlock(&ff->mu);
        return 0;
    }
    ff->syncs++;
    if (ff->fail_next_sync) {
        /* Like Linux after a failed writeback: report EIO once. The pages
         * stay unsynced here; the store must not retry. */
        ff->fail_next_sync = false;
        pthread_mutex_unlock(&ff->mu);
        return keel_err(KEEL_EIO, errmsg, "fdatasync: injected EIO");
    }
    p = realloc(nd->ddata, nd->len == 0 ? 1 : nd->len);
    if (p == NULL) {
        pthread_mutex_unlock(&ff->mu);
        return keel_err(KEEL_ENOMEM, errmsg, "fdatasync: out of memory");
    }
    memcpy(p, nd->data, nd->len);
    nd->ddata = p;
    nd->dlen = nd->len;
    nd->nwr = 0;
    pthread_mutex_unlock(&ff->mu);
    return 0;
}

static int ff_size(struct fs *fs, struct fs_file *f, uint64_t *out,
                   char *errmsg)
{
    struct fs_fault *ff = fs->impl;

    ASSERT(out != NULL);
    ASSERT(f != NULL);
    (void)errmsg;
    pthread_mutex_lock(&ff->mu);
    *out = f->node->len;
    pthread_mutex_unlock(&ff->mu);
    return 0;
}

static int ff_ftruncate(struct fs *fs, struct fs_file *f, uint64_t len,
                        char *errmsg)
{
    struct fs_fault *ff = fs->impl;
    struct node *nd = f->node;
    int rv = 0;

    ASSERT(ff != NULL);
    ASSERT(nd != NULL);
    pthread_mutex_lock(&ff->mu);
    if (ff->frozen) {
        len = nd->len;
    }
    if (len > nd->len) {
        rv = grow(&nd->data, &nd->len, len);
    } else {
        nd->len = len;
    }
    pthread_mutex_unlock(&ff->mu);
    return rv == 0 ? 0 : keel_err(rv, errmsg, "ftruncate: out of memory");
}

static int ff_fsync_dir(struct fs *fs, const char *path, char *errmsg)
{
    struct fs_fault *ff = fs->impl;

    ASSERT(ff != NULL);
    ASSERT(path != NULL);
    (void)errmsg;
    pthread_mutex_lock(&ff->mu);
    ff->syncs++;
    ff->dir_syncs++;
    for (size_t i = 0; !ff->frozen && i < ff->n; i++) {
        struct node *nd = ff->nodes[i];
        if (nd->dead) {
            continue;
        }
        if (nd->cur != NULL && parent_is(nd->cur, path)) {
            char *d = strdup(nd->cur);
            if (d != NULL) {
                free(nd->dur);
                nd->dur = d;
            }
        } else if (nd->dur != NULL && parent_is(nd->dur, path)) {
            free(nd->dur);
            nd->dur = NULL;
        }
    }
    pthread_mutex_unlock(&ff->mu);
    return 0;
}

static int ff_rename(struct fs *fs, const char *from, const char *to,
                     char *errmsg)
{
    struct fs_fault *ff = fs->impl;
    struct node *nd;
    struct node *old;
    char *t;

    ASSERT(from != NULL);
    ASSERT(to != NULL);
    pthread_mutex_lock(&ff->mu);
    if (ff->frozen) {
        pthread_mutex_unlock(&ff->mu);
        return 0;
    }
    nd = find_cur(ff, from);
    t = strdup(to);
    if (nd == NULL || t == NULL) {
        pthread_mutex_unlock(&ff->mu);
        free(t);
        return keel_err(nd == NULL ? KEEL_ENOENT : KEEL_ENOMEM, errmsg,
                        "rename %s failed", from);
    }
    old = find_cur(ff, to);
    if (old != NULL) {
        free(old->cur);
        old->cur = NULL;
    }
    free(nd->cur);
    nd->cur = t;
    pthread_mutex_unlock(&ff->mu);
    return 0;
}

static int ff_unlink(struct fs *fs, const char *path, char *errmsg)
{
    struct fs_fault *ff = fs->impl;
    struct node *nd;

    ASSERT(ff != NULL);
    ASSERT(path != NULL);
    pthread_mutex_lock(&ff->mu);
    nd = ff->frozen ? NULL : find_cur(ff, path);
    if (nd != NULL) {
        free(nd->cur);
        nd->cur = NULL;
    }
    if (ff->frozen) {
        pthread_mutex_unlock(&ff->mu);
        return 0;
    }
    pthread_mutex_unlock(&ff->mu);
    if (nd == NULL) {
        return keel_err(KEEL_ENOENT, errmsg, "unlink %s: missing", path);
    }
    return 0;
}

static int ff_mkdir(struct fs *fs, const char *path, char *errmsg)
{
    struct fs_fault *ff = fs->impl;
    int rv = 0;

    ASSERT(ff != NULL);
    ASSERT(path != NULL);
    pthread_mutex_lock(&ff->mu);
    if (ff->frozen) {
        rv = 0;
    } else if (find_cur(ff, path) != NULL) {
        rv = keel_err(KEEL_EEXIST, errmsg, "mkdir %s: exists", path);
    } else if (node_new(ff, path, true) == NULL) {
        rv = keel_err(KEEL_ENOMEM, errmsg, "mkdir %s: out of memory", path);
    }
    pthread_mutex_unlock(&ff->mu);
    return rv;
}

static int ff_readdir(struct fs *fs, const char *path, fs_readdir_cb cb,
                      void *arg, char *errmsg)
{
    struct fs_fault *ff = fs->impl;
    char **names = NULL;
    size_t n = 0;
    int rv = 0;

    ASSERT(ff != NULL);
    ASSERT(cb != NULL);
    pthread_mutex_lock(&ff->mu);
    if (find_cur(ff, path) == NULL) {
        pthread_mutex_unlock(&ff->mu);
        return keel_err(KEEL_ENOENT, errmsg, "opendir %s: missing", path);
    }
    names = calloc(ff->n + 1, sizeof *names);
    for (size_t i = 0; names != NULL && i < ff->n; i++) {
        struct node *nd = ff->nodes[i];
        if (!nd->dead && nd->cur != NULL && parent_is(nd->cur, path)) {
            names[n++] = strdup(strrchr(nd->cur, '/') + 1);
        }
    }
    pthread_mutex_unlock(&ff->mu);
    if (names == NULL) {
        return keel_err(KEEL_ENOMEM, errmsg, "readdir: out of memory");
    }
    /* The callback runs unlocked: it may call back into this fs. */
    for (size_t i = 0; i < n; i++) {
        if (rv == 0 && names[i] != NULL) {
            rv = cb(arg, names[i]);
        }
        free(names[i]);
    }
    free(names);
    return rv;
}

static int ff_stat(struct fs *fs, const char *path, char *errmsg)
{
    struct fs_fault *ff = fs->impl;
    bool found;

    ASSERT(ff != NULL);
    ASSERT(path != NULL);
    pthread_mutex_lock(&ff->mu);
    found = find_cur(ff, path) != NULL;
    pthread_mutex_unlock(&ff->mu);
    return found ? 0 : keel_err(KEEL_ENOENT, errmsg, "%s: missing", path);
}

int fs_fault_init(uint64_t seed, struct fs_fault **out)
{
    struct fs_fault *ff = calloc(1, sizeof *ff);

    ASSERT(out != NULL);
    if (ff == NULL) {
        return KEEL_ENOMEM;
    }
    pthread_mutex_init(&ff->mu, NULL);
    pthread_cond_init(&ff->cv, NULL);
    ff->rng = seed;
    ff->fs = (struct fs){
        .impl = ff,
        .open = ff_open,
        .close = ff_close,
        .pwritev = ff_pwritev,
        .pread = ff_pread,
        .fdatasync = ff_sync,
        .fsync = ff_sync,
        .size = ff_size,
        .ftruncate = ff_ftruncate,
        .fsync_dir = ff_fsync_dir,
        .rename = ff_rename,
        .unlink = ff_unlink,
        .mkdir = ff_mkdir,
        .readdir = ff_readdir,
        .stat = ff_stat,
    };
    *out = ff;
    ASSERT(ff->fs.impl == ff);
    return 0;
}

void fs_fault_close(struct fs_fault *ff)
{
    if (ff == NULL) {
        return;
    }
    for (size_t i = 0; i < ff->n; i++) {
        free(ff->nodes[i]->cur);
        free(ff->nodes[i]->dur);
        free(ff->nodes[i]->data);
        free(ff->nodes[i]->ddata);
        free(ff->nodes[i]);
    }
    free(ff->nodes);
    pthread_cond_destroy(&ff->cv);
    pthread_mutex_destroy(&ff->mu);
    free(ff);
}

struct fs *fs_fault_fs(struct fs_fault *ff)
{
    ASSERT(ff != NULL);
    ASSERT(ff->fs.impl == ff);
    return &ff->fs;
}

/* Copy current bytes [lo, hi) over the surviving image. */
static void let_through(struct node *nd, uint8_t **img, uint64_t *ilen,
                        uint64_t lo, uint64_t hi)
{
    ASSERT(lo <= hi);
    ASSERT(hi <= nd->len);
    if (lo == hi || grow(img, ilen, hi) != 0) {
        return;
    }
    memcpy(*img + lo, nd->data + lo, hi - lo);
}

static void cut_file(struct fs_fault *ff, struct node *nd,
                     enum fs_fault_cut cut)
{
    uint8_t *img = NULL;
    uint64_t ilen = 0;
    uint64_t pseed = rng_next(&ff->rng);

    ASSERT(nd != NULL);
    ASSERT(!nd->is_dir);
    if (grow(&img, &ilen, nd->dlen) == 0 && nd->dlen > 0) {
        memcpy(img, nd->ddata, nd->dlen);
    }
    if (nd->nwr > 0 && (cut == FS_CUT_TEAR_SECTOR || cut == FS_CUT_TEAR_BYTE)) {
        struct fwrite w = nd->wr[nd->nwr - 1];
        uint64_t keep = rng_next(&ff->rng) % (w.len + 1);
        if (cut == FS_CUT_TEAR_SECTOR) {
            uint64_t end = (w.off + keep) / FAULT_SECTOR * FAULT_SECTOR;
            keep = end > w.off ? end - w.off : 0;
        }
        let_through(nd, &img, &ilen, w.off, w.off + keep);
    }
    for (size_t i = 0; cut == FS_CUT_REORDER && i < nd->nwr; i++) {
        uint64_t p0 = nd->wr[i].off / FAULT_PAGE;
        uint64_t p1 =
            (nd->wr[i].off + nd->wr[i].len + FAULT_PAGE - 1) / FAULT_PAGE;
        for (uint64_t p = p0; p < p1; p++) {
            uint64_t h = p ^ pseed;
            uint64_t hi = (p + 1) * FAULT_PAGE;
            if ((rng_next(&h) & 1) == 0) {
                continue;
            }
            let_through(nd, &img, &ilen, p * FAULT_PAGE,
                        hi < nd->len ? hi : nd->len);
        }
    }
    free(nd->data);
    nd->data = img;
    nd->len = ilen;
    nd->nwr = 0;
    /* What reached the medium is durable now. */
    uint8_t *d = realloc(nd->ddata, ilen == 0 ? 1 : ilen);
    if (d != NULL) {
        if (ilen > 0) {
            memcpy(d, img, ilen);
        }
        nd->ddata = d;
        nd->dlen = ilen;
    }
}

static bool dir_survives(struct fs_fault *ff, const char *path)
{
    const char *slash = strrchr(path, '/');
    bool known = false;

    ASSERT(ff != NULL);
    if (slash == NULL) {
        return true;
    }
    for (size_t i = 0; i < ff->n; i++) {
        struct node *nd = ff->nodes[i];
        size_t pl = (size_t)(slash - path);
        if (nd->is_dir && nd->dur != NULL && strlen(nd->dur) == pl &&
            strncmp(nd->dur, path, pl) == 0) {
            return !nd->dead;
        }
        if (nd->is_dir && nd->cur != NULL && strlen(nd->cur) == pl &&
            strncmp(nd->cur, path, pl) == 0) {
            known = true;
        }
    }
    /* A parent the fault fs never created (the test's base directory) is
     * the durable root. */
    return !known;
}

void fs_fault_power_loss(struct fs_fault *ff, enum fs_fault_cut cut)
{
    ASSERT(ff != NULL);
    ASSERT(cut <= FS_CUT_REORDER);
    pthread_mutex_lock(&ff->mu);
    /* The process is dead from here on: held syncs return without
     * effect and its later I/O is ignored until fs_fault_thaw. */
    ff->frozen = true;
    ff->hold = false;
    pthread_cond_broadcast(&ff->cv);
    for (size_t i = 0; i < ff->n; i++) {
        struct node *nd = ff->nodes[i];
        if (nd->dead) {
            continue;
        }
        if (nd->dur == NULL) {
            nd->dead = true;
            continue;
        }
        free(nd->cur);
        nd->cur = strdup(nd->dur);
        if (!nd->is_dir) {
            cut_file(ff, nd, cut);
        }
    }
    /* Entries inside a directory whose own entry was lost go with it; a
     * few passes cover nested directories. */
    for (int pass = 0; pass < 8; pass++) {
        for (size_t i = 0; i < ff->n; i++) {
            struct node *nd = ff->nodes[i];
            if (!nd->dead && !dir_survives(ff, nd->dur)) {
                nd->dead = true;
            }
        }
    }
    pthread_mutex_unlock(&ff->mu);
}

static struct node *find_any(struct fs_fault *ff, const char *path)
{
    struct node *nd = find_cur(ff, path);

    ASSERT(ff != NULL);
    ASSERT(path != NULL);
    for (size_t i = 0; nd == NULL && i < ff->n; i++) {
        struct node *c = ff->nodes[i];
        if (!c->dead && c->dur != NULL && strcmp(c->dur, path) == 0) {
            nd = c;
        }
    }
    return nd;
}

int fs_fault_flip_bit(struct fs_fault *ff, const char *path, uint64_t off,
                      unsigned bit)
{
    struct node *nd;
    int rv = KEEL_ENOENT;

    ASSERT(ff != NULL);
    ASSERT(bit < 8);
    pthread_mutex_lock(&ff->mu);
    nd = find_any(ff, path);
    if (nd != NULL) {
        rv = KEEL_EINVAL;
        if (off < nd->dlen) {
            nd->ddata[off] ^= (uint8_t)(1u << bit);
            rv = 0;
        }
        if (off < nd->len) {
            nd->data[off] ^= (uint8_t)(1u << bit);
            rv = 0;
        }
    }
    pthread_mutex_unlock(&ff->mu);
    return rv;
}

int fs_fault_truncate(struct fs_fault *ff, const char *path, uint64_t len)
{
    struct node *nd;

    ASSERT(ff != NULL);
    ASSERT(path != NULL);
    pthread_mutex_lock(&ff->mu);
    nd = find_any(ff, path);
    if (nd != NULL) {
        nd->dlen = nd->dlen < len ? nd->dlen : len;
        nd->len = nd->len < len ? nd->len : len;
        nd->nwr = 0;
    }
    pthread_mutex_unlock(&ff->mu);
    return nd == NULL ? KEEL_ENOENT : 0;
}

int fs_fault_delete(struct fs_fault *ff, const char *path)
{
    struct node *nd;

    ASSERT(ff != NULL);
    ASSERT(path != NULL);
    pthread_mutex_lock(&ff->mu);
    nd = find_any(ff, path);
    if (nd != NULL) {
        nd->dead = true;
    }
    pthread_mutex_unlock(&ff->mu);
    return nd == NULL ? KEEL_ENOENT : 0;
}

int fs_fault_peek(struct fs_fault *ff, const char *path, uint64_t off,
                  void *buf, size_t len, size_t *got)
{
    struct node *nd;

    ASSERT(ff != NULL);
    ASSERT(got != NULL);
    pthread_mutex_lock(&ff->mu);
    nd = find_any(ff, path);
    *got = 0;
    if (nd != NULL && off < nd->dlen) {
        size_t n =
            (size_t)(nd->dlen - off) < len ? (size_t)(nd->dlen - off) : len;
        memcpy(buf, nd->ddata + off, n);
        *got = n;
    }
    pthread_mutex_unlock(&ff->mu);
    return nd == NULL ? KEEL_ENOENT : 0;
}

void fs_fault_fail_next_fdatasync(struct fs_fault *ff)
{
    ASSERT(ff != NULL);
    pthread_mutex_lock(&ff->mu);
    ff->fail_next_sync = true;
    ASSERT(ff->fail_next_sync);
    pthread_mutex_unlock(&ff->mu);
}

static uint64_t counter(struct fs_fault *ff, const uint64_t *v)
{
    uint64_t n;

    ASSERT(ff != NULL);
    pthread_mutex_lock(&ff->mu);
    n = *v;
    pthread_mutex_unlock(&ff->mu);
    return n;
}

uint64_t fs_fault_syncs(struct fs_fault *ff)
{
    return counter(ff, &ff->syncs);
}

uint64_t fs_fault_dir_syncs(struct fs_fault *ff)
{
    return counter(ff, &ff->dir_syncs);
}

void fs_fault_thaw(struct fs_fault *ff)
{
    ASSERT(ff != NULL);
    pthread_mutex_lock(&ff->mu);
    ff->frozen = false;
    pthread_mutex_unlock(&ff->mu);
    ASSERT(!ff->hold);
}

void fs_fault_hold_syncs(struct fs_fault *ff, bool on)
{
    ASSERT(ff != NULL);
    pthread_mutex_lock(&ff->mu);
    ff->hold = on;
    pthread_cond_broadcast(&ff->cv);
    pthread_mutex_unlock(&ff->mu);
    ASSERT(ff->hold == on || !on);
}

unsigned fs_fault_held(struct fs_fault *ff)
{
    unsigned n;

    ASSERT(ff != NULL);
    pthread_mutex_lock(&ff->mu);
    n = ff->held;
    pthread_mutex_unlock(&ff->mu);
    return n;
}

void fs_fault_enospc(struct fs_fault *ff, bool on)
{
    ASSERT(ff != NULL);
    pthread_mutex_lock(&ff->mu);
    ff->enospc = on;
    pthread_mutex_unlock(&ff->mu);
    ASSERT(ff->enospc == on || true);
}
