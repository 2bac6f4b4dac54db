/* Quarantined logs as recover candidates (store.h store_qlog_*,
 * docs/decisions/0031-recover-reads-quarantined-logs.md). A log moved to
 * <data>/quarantine/ by store_group_quarantine_log (or later segments the
 * scan moved there) is read back only as a verified run: segment headers
 * of this group, every record's checksum, consecutive indexes,
 * non-decreasing terms and the hash chain across segments, from index 1
 * (docs/design.md §5 S4: state is rebuilt only from index 1 without a
 * snapshot). The run ends at the first record that fails any check.
 * Restoring writes that run through the InstallSnapshot replacement
 * (store/replace.c) and never moves or deletes the quarantined files. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

#define QLOG_FILES_MAX STORE_DIR_ENTRIES_MAX

struct qfile {
    char name[96];
    uint64_t base;
    uint64_t salt;
    uint64_t size;
    bool used; /* walked (or unreadable) already */
};

struct qlist {
    char hex[33];
    struct qfile *f;
    size_t n, cap;
    bool overflow;
    bool nomem;
};

/* <hex>-<20 digits>.blk, maybe ".N" when quarantine held a copy. */
static int list_cb(void *arg, const char *name)
{
    struct qlist *l = arg;
    unsigned long long base = 0;
    char tail[16];
    size_t hl = strlen(l->hex);
    if (strncmp(name, l->hex, hl) != 0 || name[hl] != '-' ||
        strlen(name) >= sizeof l->f[0].name ||
        sscanf(name + hl + 1, "%20llu%15s", &base, tail) != 2 ||
        strncmp(tail, ".blk", 4) != 0 || (tail[4] != '\0' && tail[4] != '.') ||
        base == 0) {
        return 0;
    }
    if (l->n == QLOG_FILES_MAX) {
        l->overflow = true;
        return 0;
    }
    if (l->n == l->cap) {
        size_t cap = l->cap == 0 ? 64 : 2 * l->cap;
        struct qfile *f = realloc(l->f, cap * sizeof *f);
        if (f == NULL) {
            l->nomem = true;
            return KEEL_ENOMEM;
        }
        l->f = f;
        l->cap = cap;
    }
    memset(&l->f[l->n], 0, sizeof l->f[l->n]);
    snprintf(l->f[l->n].name, sizeof l->f[l->n].name, "%s", name);
    l->f[l->n].base = base;
    l->n++;
    return 0;
}

void store_qlog_dir(const struct store *s, char *out, size_t cap)
{
    store_fmt_str(out, cap, "%s/quarantine", s->data_dir);
}

/* The whole file; its header must name this group. */
static int read_file(struct store *s, const char *dir, struct qfile *q,
                     const uint8_t gid[16], uint8_t **buf, size_t *len,
                     char *errmsg)
{
    char path[STORE_PATH_BYTES_MAX];
    struct fs_file *f = NULL;
    uint64_t size = 0;
    size_t got = 0;
    struct store_seg_header h;
    *buf = NULL;
    store_fmt_str(path, sizeof path, "%s/%s", dir, q->name);
    int rv = s->fs->open(s->fs, path, FS_RDONLY, &f, errmsg);
    rv = rv == 0 ? s->fs->size(s->fs, f, &size, errmsg) : rv;
    if (rv == 0 &&
        (size < STORE_SEG_HEADER_BYTES || size > STORE_SEGMENT_BYTES_MAX)) {
        rv = keel_err(KEEL_ECORRUPT, errmsg, "%s: %llu bytes is no segment",
                      q->name, (unsigned long long)size);
    }
    uint8_t *b = rv == 0 ? malloc((size_t)size) : NULL;
    if (rv == 0 && b == NULL) {
        rv = keel_err(KEEL_ENOMEM, errmsg, "out of memory reading %s", q->name);
    }
    rv =
        rv == 0 ? s->fs->pread(s->fs, f, b, (size_t)size, 0, &got, errmsg) : rv;
    if (f != NULL) {
        s->fs->close(s->fs, f);
    }
    if (rv == 0 && (store_fmt_seg_header_decode(b, got, &h) != 0 ||
                    memcmp(h.group, gid, 16) != 0 || h.base_index != q->base)) {
        rv = keel_err(KEEL_ECORRUPT, errmsg,
                      "%s: its header does not verify or names another "
                      "group or base",
                      q->name);
    }
    if (rv != 0) {
        free(b);
        return rv;
    }
    q->salt = h.salt;
    q->size = got;
    *buf = b;
    *len = got;
    return 0;
}

struct chain {
    uint64_t next; /* next index expected */
    uint64_t prev; /* checksum of the record before it */
    uint64_t last_term;
    uint64_t keep; /* restore: emit records through keep */
    struct store_replace *rp;
};

/* Walk one file's records from its header; false when the run ends in it
 * (why says where). */
static bool walk_file(const struct qfile *q, const uint8_t *b, size_t len,
                      struct chain *c, struct store_qlog *out, int *rv,
                      char *errmsg)
{
    uint64_t off = STORE_SEG_HEADER_BYTES;
    /* Bounded by the file: every record advances off by its size. */
    while (off + 8 <= len) {
        struct store_fmt_rec r;
        struct store_fmt_marker m;
        if (keel_get_le64(b + off) == 0) {
            off += 8; /* zeroed (the tail, or a truncation) */
            continue;
        }
        if (store_fmt_marker_decode(b + off, len - off, q->salt, &m) == 0) {
            off += STORE_MARKER_BYTES; /* a batch's end, mid-segment */
            continue;
        }
        int d = store_fmt_rec_decode(b + off, len - off, q->salt, &r);
        if (d == KEEL_ENOENT) {
            snprintf(out->why, sizeof out->why,
                     "unreadable bytes at offset %llu of %s (index %llu "
                     "expected)",
                     (unsigned long long)off, q->name,
                     (unsigned long long)c->next);
            return false;
        }
        const char *bad = d != 0 ? "is cut short or fails its checksum"
                          : r.index != c->next ? "is out of order"
                          : r.term < c->last_term || r.term == 0
                              ? "goes back in term"
                          : c->next > 1 && r.prev_checksum != c->prev
                              ? "breaks the hash chain"
                              : NULL;
        if (bad != NULL) {
            snprintf(out->why, sizeof out->why,
                     "the record for index %llu in %s %s",
                     (unsigned long long)c->next, q->name, bad);
            return false;
        }
        if (c->rp != NULL && r.index <= c->keep) {
            struct store_record rec = {r.index, r.term, r.type,
                                       r.flags, r.len,  r.payload};
            *rv = store_replace_append(c->rp, &rec, 1, errmsg);
            if (*rv != 0) {
                return false;
            }
        }
        c->next++;
        c->prev = r.checksum;
        c->last_term = r.term;
        off += store_fmt_rec_bytes(r.len);
    }
    return true;
}

/* The verified run from index 1 (out), appending it to c->rp if set. */
static int by_base(const void *a, const void *b)
{
    const struct qfile *x = a, *y = b;
    if (x->base != y->base) {
        return x->base < y->base ? -1 : 1;
    }
    return strcmp(x->name, y->name);
}

/* The first file not walked yet whose base is index (sorted list). */
static struct qfile *file_at(struct qlist *l, uint64_t index)
{
    size_t lo = 0, hi = l->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (l->f[mid].base < index) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    for (size_t i = lo; i < l->n && l->f[i].base == index; i++) {
        if (!l->f[i].used) {
            return &l->f[i];
        }
    }
    return NULL;
}

/* The verified run from index 1 (out), appending it to c->rp if set. */
static int walk(struct store *s, const struct store_group_id *id,
                struct chain *c, struct store_qlog *out, char *errmsg)
{
    char dir[STORE_PATH_BYTES_MAX];
    struct qlist l;
    memset(&l, 0, sizeof l);
    memset(out, 0, sizeof *out);
    store_group_id_hex(id, l.hex);
    store_qlog_dir(s, dir, sizeof dir);
    int rv = s->fs->readdir(s->fs, dir, list_cb, &l, errmsg);
    if (rv == KEEL_ENOENT) {
        free(l.f);
        return 0; /* nothing was ever quarantined */
    }
    if (l.nomem) {
        free(l.f);
        return keel_err(KEEL_ENOMEM, errmsg, "out of memory listing %s", dir);
    }
    if (l.n > 0) {
        qsort(l.f, l.n, sizeof *l.f, by_base);
    }
    out->files = (uint32_t)l.n;
    c->next = 1;
    c->prev = 0;
    c->last_term = 0;
    snprintf(out->why, sizeof out->why,
             "no segment of the group starts at index 1 (docs/design.md S4)");
    /* Each step walks one file (marked used): at most l.n steps. */
    for (size_t step = 0; rv == 0 && step < l.n; step++) {
        uint8_t *b = NULL;
        size_t len = 0;
        char err[KEEL_ERRMSG_MAX];
        struct qfile *q = file_at(&l, c->next);
        if (q == NULL) {
            break; /* why says what ended the run */
        }
        q->used = true;
        if (read_file(s, dir, q, id->b, &b, &len, err) != 0) {
            snprintf(out->why, sizeof out->why, "%.190s", err);
            continue; /* another copy of that base may continue */
        }
        uint64_t before = c->next;
        bool on = walk_file(q, b, len, c, out, &rv, errmsg);
        free(b);
        out->last_index = c->next - 1;
        out->last_term = c->last_term;
        if (c->next == before) {
            continue; /* nothing of it continues the run: another copy? */
        }
        if (!on) {
            break;
        }
        snprintf(out->why, sizeof out->why,
                 "no quarantined segment continues the run after index %llu",
                 (unsigned long long)out->last_index);
    }
    if (rv == 0 && l.overflow) {
        rv = keel_err(KEEL_ELIMIT, errmsg,
                      "more than %d files of the group in %s: move some by "
                      "hand",
                      QLOG_FILES_MAX, dir);
    }
    free(l.f);
    return rv;
}

int store_qlog_survey(struct store *s, const struct store_group_id *id,
                      struct store_qlog *out, char *errmsg)
{
    ASSERT(s != NULL && id != NULL && out != NULL);
    struct chain c = {.rp = NULL};
    return walk(s, id, &c, out, errmsg);
}

int store_qlog_restore(struct store_group *g, uint64_t keep,
                       struct store_qlog *out, char *errmsg)
{
    ASSERT(g != NULL && out != NULL);
    ASSERT(!g->s->cfg.read_only);
    if (keep == 0) {
        return keel_err(KEEL_EINVAL, errmsg, "nothing to restore (keep 0)");
    }
    struct chain c = {.keep = keep};
    int rv = store_replace_begin(g, 1, &c.rp, errmsg);
    if (rv != 0) {
        return rv;
    }
    rv = walk(g->s, &g->id, &c, out, errmsg);
    if (rv == 0 && out->last_index < keep) {
        rv = keel_err(KEEL_ECORRUPT, errmsg,
                      "the quarantined log verifies only through %llu, not "
                      "%llu (%s): survey again",
                      (unsigned long long)out->last_index,
                      (unsigned long long)keep, out->why);
    }
    rv = rv == 0 ? store_replace_sync(c.rp, errmsg) : rv;
    rv = rv == 0 ? store_replace_commit(c.rp, 0, 0, errmsg) : rv;
    if (rv != 0) {
        store_replace_abort(c.rp);
    }
    return rv;
}
