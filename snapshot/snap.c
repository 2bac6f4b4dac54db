/* Loading at start (docs/design.md §5): validate the LMDB-named snapshots,
 * quarantine a bad one, choose the source to restore from, and report it.
 */
#include <stdlib.h>
#include <string.h>

#include <xxhash.h>

#include "internal.h"
#include "meta.h"

#define NAME_BYTES 64

struct names {
    char (*v)[NAME_BYTES];
    size_t n;
};

void snap__named(struct snap *sn, struct snap_named *out)
{
    struct store_meta_snap ms;

    ASSERT(sn != NULL);
    ASSERT(out != NULL);
    memset(out, 0, sizeof *out);
    /* TODO(store): a store_snapshot_get(g, ...) accessor would avoid
     * reaching into meta.c; a bad value reads as none (the store already
     * made the group amnesiac for it). */
    if (store_meta_snap_get(store_debug_meta(sn->s), sn->gid, &ms) == 0) {
        out->index = ms.index;
        out->term = ms.term;
        out->older_index = ms.older_index;
        out->older_term = ms.older_term;
    }
}

static int read_all(struct snap *sn, struct fs_file *f, uint8_t *buf,
                    uint64_t off, uint64_t len, char *errmsg)
{
    uint64_t done = 0;
    uint64_t steps = 0;

    ASSERT(sn != NULL);
    ASSERT(len <= SNAP_BODY_BYTES_MAX + SNAP_HEADER_BYTES);
    while (done < len) {
        ASSERT(++steps <= SNAP_BODY_BYTES_MAX / SNAP_IO_BYTES + 2);
        uint64_t left = len - done;
        size_t n = left < SNAP_IO_BYTES ? (size_t)left : SNAP_IO_BYTES;
        size_t got = 0;
        int rv =
            sn->fs->pread(sn->fs, f, buf + done, n, off + done, &got, errmsg);
        if (rv != 0) {
            return rv;
        }
        if (got < n) {
            return keel_err(KEEL_ETRUNCATED, errmsg, "snapshot file short");
        }
        done += n;
    }
    return 0;
}

/* Validate the body's XXH3-128 without keeping it: one reused buffer of
 * SNAP_IO_BYTES (checking the older snapshot must not cost its size in
 * memory). */
static int hash_stream(struct snap *sn, struct fs_file *f,
                       const struct snap_header *h, char *errmsg)
{
    uint8_t *buf = malloc(SNAP_IO_BYTES);
    XXH3_state_t *st = XXH3_createState();
    uint64_t off = 0;
    uint64_t steps = 0;
    int rv = 0;

    ASSERT(sn != NULL && f != NULL);
    ASSERT(h->body_bytes <= SNAP_BODY_BYTES_MAX);
    if (buf == NULL || st == NULL) {
        rv = keel_err(KEEL_ENOMEM, errmsg, "out of memory");
    } else {
        (void)XXH3_128bits_reset(st);
    }
    while (rv == 0 && off < h->body_bytes) {
        ASSERT(++steps <= SNAP_BODY_BYTES_MAX / SNAP_IO_BYTES + 1);
        uint64_t left = h->body_bytes - off;
        size_t n = left < SNAP_IO_BYTES ? (size_t)left : SNAP_IO_BYTES;
        rv = read_all(sn, f, buf, SNAP_HEADER_BYTES + off, n, errmsg);
        if (rv == 0) {
            (void)XXH3_128bits_update(st, buf, n);
        }
        off += n;
    }
    if (rv == 0) {
        XXH128_hash_t hh = XXH3_128bits_digest(st);
        if (hh.low64 != h->body_hash_low || hh.high64 != h->body_hash_high) {
            rv = keel_err(KEEL_ECORRUPT, errmsg,
                          "snapshot body checksum mismatch");
        }
    }
    XXH3_freeState(st);
    free(buf);
    return rv;
}

static int load_open(struct snap *sn, struct fs_file *f,
                     const struct snap_expect *exp, bool want_body,
                     uint8_t **body, size_t *body_len, char *errmsg)
{
    uint8_t hb[SNAP_HEADER_BYTES];
    struct snap_header h;
    uint64_t size = 0;
    uint8_t *b = NULL;
    int rv;

    ASSERT(body != NULL && body_len != NULL);
    ASSERT(exp != NULL);
    rv = sn->fs->size(sn->fs, f, &size, errmsg);
    rv = rv == 0 ? read_all(sn, f, hb, 0, size < sizeof hb ? size : sizeof hb,
                            errmsg)
                 : rv;
    rv = rv == 0
             ? snap_header_decode(hb,
                                  (size_t)(size < sizeof hb ? size : sizeof hb),
                                  &h, errmsg)
             : rv;
    rv = rv == 0 ? snap_check_expect(&h, exp, errmsg) : rv;
    if (rv == 0 && size != SNAP_HEADER_BYTES + h.body_bytes) {
        rv = keel_err(size < SNAP_HEADER_BYTES + h.body_bytes ? KEEL_ETRUNCATED
                                                              : KEEL_ECORRUPT,
                      errmsg, "snapshot file is %llu bytes, header says %llu",
                      (unsigned long long)size,
                      (unsigned long long)(SNAP_HEADER_BYTES + h.body_bytes));
    }
    if (rv != 0) {
        return rv;
    }
    if (!want_body) {
        *body = NULL;
        *body_len = (size_t)h.body_bytes;
        return hash_stream(sn, f, &h, errmsg);
    }
    b = malloc(h.body_bytes > 0 ? (size_t)h.body_bytes : 1);
    if (b == NULL) {
        return keel_err(KEEL_ENOMEM, errmsg, "out of memory");
    }
    rv = read_all(sn, f, b, SNAP_HEADER_BYTES, h.body_bytes, errmsg);
    XXH128_hash_t hh = XXH3_128bits(b, (size_t)h.body_bytes);
    if (rv == 0 &&
        (hh.low64 != h.body_hash_low || hh.high64 != h.body_hash_high)) {
        rv = keel_err(KEEL_ECORRUPT, errmsg, "snapshot body checksum mismatch");
    }
    if (rv != 0) {
        free(b);
        b = NULL;
    }
    *body = b;
    *body_len = rv == 0 ? (size_t)h.body_bytes : 0;
    return rv;
}

int snap__load_file(struct snap *sn, const char *path,
                    const struct snap_expect *exp, bool want_body,
                    uint8_t **body, size_t *body_len, char *errmsg)
{
    struct fs_file *f = NULL;
    int rv;

    ASSERT(sn != NULL && path != NULL);
    ASSERT(exp != NULL);
    *body = NULL;
    *body_len = 0;
    if (sn->fs->stat(sn->fs, path, NULL) != 0) {
        return keel_err(KEEL_ENOENT, errmsg,
                        "snapshot %llu named in LMDB has no file",
                        (unsigned long long)exp->index);
    }
    rv = sn->fs->open(sn->fs, path, FS_RDWR, &f, errmsg);
    if (rv != 0) {
        return rv;
    }
    rv = load_open(sn, f, exp, want_body, body, body_len, errmsg);
    sn->fs->close(sn->fs, f);
    return rv;
}

static int collect_cb(void *arg, const char *name)
{
    struct names *nm = arg;

    ASSERT(nm != NULL && nm->n < SNAP_DIR_ENTRIES_MAX);
    ASSERT(name != NULL);
    if (strlen(name) >= NAME_BYTES) {
        return 0; /* not ours: our names are short */
    }
    strcpy(nm->v[nm->n++], name);
    return 0;
}

/* The names in dir (a bounded walk: more than SNAP_DIR_ENTRIES_MAX is
 * KEEL_ELIMIT, said so); nm->v is the caller's to free, also on error. */
static int names_read(struct fs *fs, const char *dir, struct names *nm,
                      char *errmsg)
{
    nm->n = 0;
    nm->v = calloc(SNAP_DIR_ENTRIES_MAX, NAME_BYTES);
    if (nm->v == NULL) {
        return keel_err(KEEL_ENOMEM, errmsg, "out of memory");
    }
    int rv = snap__readdir(fs, dir, SNAP_DIR_ENTRIES_MAX, collect_cb, nm, NULL,
                           errmsg);
    if (rv == KEEL_ELIMIT) {
        rv = keel_err(KEEL_ELIMIT, errmsg,
                      "%s holds more than %d names: move stray files away", dir,
                      SNAP_DIR_ENTRIES_MAX);
    }
    return rv;
}

/* "<20 digits>.snap" -> index; 0 for any other name. */
static uint64_t parse_name(const char *name)
{
    uint64_t v = 0;

    ASSERT(name != NULL);
    ASSERT(strlen(name) < NAME_BYTES);
    if (strlen(name) != 25 || strcmp(name + 20, ".snap") != 0) {
        return 0;
    }
    for (unsigned i = 0; i < 20; i++) {
        if (name[i] < '0' || name[i] > '9' || v > (UINT64_MAX - 9) / 10) {
            return 0;
        }
        v = v * 10 + (uint64_t)(name[i] - '0');
    }
    return v;
}

static bool ends_with(const char *s, const char *suffix)
{
    size_t a = strlen(s);
    size_t b = strlen(suffix);

    ASSERT(s != NULL);
    ASSERT(suffix != NULL);
    return a >= b && strcmp(s + a - b, suffix) == 0;
}

static int quarantine_file(struct snap *sn, const char *path, uint64_t index,
                           char *errmsg)
{
    char qname[NAME_BYTES + 40];

    ASSERT(sn != NULL);
    ASSERT(index >= 1);
    snap__fmt(qname, sizeof qname, "snap-%s-%020llu.snap", sn->hex,
              (unsigned long long)index);
    bool moved;
    int rv = store_quarantine_move(sn->fs, sn->data_dir, "", path, qname,
                                   &moved, errmsg);
    if (rv != 0 && rv != KEEL_ENOENT) {
        snap__fatal(sn, "quarantine snapshot", errmsg);
    }
    return rv;
}

/* One name of the snap/ directory at open: temp files go, files older than
 * both named ones go (a deletion a crash interrupted), other unnamed files
 * move to quarantine (a snapshot LMDB does not name does not count). */
static int tidy_one(struct snap *sn, const char *name,
                    const struct snap_named *nm, struct snap_load_report *lr,
                    char *errmsg)
{
    char path[SNAP_PATH_BYTES];
    uint64_t idx = parse_name(name);

    ASSERT(nm != NULL && lr != NULL);
    ASSERT(name != NULL);
    snap__fmt(path, sizeof path, "%s/%s", sn->dir, name);
    if (ends_with(name, ".tmp")) {
        (void)sn->fs->unlink(sn->fs, path, NULL);
        return 0;
    }
    if (idx == 0 || idx == nm->index || idx == nm->older_index) {
        return 0;
    }
    if (nm->older_index != 0 && idx < nm->older_index) {
        lr->superseded++;
        (void)sn->fs->unlink(sn->fs, path, NULL);
        return 0;
    }
    lr->quarantined++;
    lr->unnamed++;
    return quarantine_file(sn, path, idx, errmsg);
}

static int tidy_dir(struct snap *sn, const struct snap_named *nm,
                    struct snap_load_report *lr, char *errmsg)
{
    struct names names = {NULL, 0};
    int rv;

    ASSERT(sn != NULL);
    ASSERT(lr != NULL);
    rv = names_read(sn->fs, sn->dir, &names, errmsg);
    for (size_t i = 0; rv == 0 && i < names.n; i++) {
        rv = tidy_one(sn, names.v[i], nm, lr, errmsg);
    }
    free(names.v);
    if (rv == 0) {
        rv = sn->fs->fsync_dir(sn->fs, sn->dir, errmsg);
    }
    return rv;
}

/* Validate the named snapshot (index, term); on failure quarantine its file
 * and record why. */
static int check_named(struct snap *sn, uint64_t index, uint64_t term,
                       bool want_body, struct snap_load_report *lr,
                       uint8_t **body, size_t *len, char *reason)
{
    struct snap_expect exp;
    char path[SNAP_PATH_BYTES];
    int rv;

    ASSERT(sn != NULL && lr != NULL);
    ASSERT(index >= 1);
    memcpy(exp.group, sn->gid, 16);
    exp.index = index;
    exp.term = term;
    snap_path(sn, index, path, sizeof path);
    rv = snap__load_file(sn, path, &exp, want_body, body, len, reason);
    if (rv == 0 || rv == KEEL_ENOMEM) {
        return rv;
    }
    if (rv != KEEL_ENOENT) {
        lr->quarantined++;
        int qrv = quarantine_file(sn, path, index, NULL);
        (void)qrv;
    }
    return rv;
}

/* Does the log continue from `from` (the snapshot index restored, 0 for
 * none) through `through` (the LMDB newest: state up to it must be
 * rebuilt)? §5: rebuild only from index 1 or right after a valid snapshot. */
static bool log_continues(const struct store_recovery *rep, uint64_t from,
                          uint64_t through)
{
    ASSERT(rep != NULL);
    ASSERT(from <= through || through == 0);
    if (rep->first_index > from + 1) {
        return false;
    }
    return rep->last_index >= through;
}

/* Choose the source (newest, else older + log, else log from 1, else
 * amnesia). */
static int choose(struct snap *sn, const struct store_recovery *rep,
                  const struct snap_named *nm, struct snap_load_report *lr,
                  char *errmsg)
{
    int rv;

    ASSERT(sn != NULL && rep != NULL);
    ASSERT(nm != NULL && lr != NULL);
    if (nm->index != 0) {
        rv = check_named(sn, nm->index, nm->term, true, lr, &lr->body,
                         &lr->body_len, lr->newest_reason);
        if (rv == KEEL_ENOMEM) {
            return keel_err(rv, errmsg, "out of memory loading snapshot");
        }
        if (rv == 0) {
            sn->newest = (struct snap_held){nm->index, nm->term};
            lr->source = SNAP_SOURCE_NEWEST;
            lr->index = nm->index;
            lr->term = nm->term;
        } else {
            lr->newest_bad = true;
            sn->must_not_lead = true;
        }
    }
    if (nm->older_index != 0) {
        bool want = lr->source != SNAP_SOURCE_NEWEST;
        uint8_t *b = NULL;
        size_t len = 0;
        rv = check_named(sn, nm->older_index, nm->older_term, want, lr, &b,
                         &len, lr->older_reason);
        if (rv == KEEL_ENOMEM) {
            return keel_err(rv, errmsg, "out of memory loading snapshot");
        }
        lr->older_bad = rv != 0;
        if (rv == 0) {
            sn->older = (struct snap_held){nm->older_index, nm->older_term};
        }
        if (rv == 0 && want && log_continues(rep, nm->older_index, nm->index)) {
            lr->source = SNAP_SOURCE_OLDER;
            lr->index = nm->older_index;
            lr->term = nm->older_term;
            lr->body = b;
            lr->body_len = len;
            b = NULL;
        }
        free(b);
    }
    if (sn->newest.index == 0 && sn->older.index != 0) {
        /* Held files stay ordered: a lone valid older one is the newest. */
        sn->newest = sn->older;
        sn->older = (struct snap_held){0, 0};
    }
    if (lr->index == 0) {
        lr->source = log_continues(rep, 0, nm->index) ? SNAP_SOURCE_LOG
                                                      : SNAP_SOURCE_AMNESIA;
    }
    return 0;
}

static int init_snap(struct snap *sn, const struct snap_config *cfg,
                     struct store *s, struct store_group *g, char *errmsg)
{
    char parent[SNAP_PATH_BYTES];

    ASSERT(s != NULL && g != NULL);
    sn->fs = snap__cfg_fs(cfg);
    sn->fatal_cb = cfg->fatal_cb;
    sn->fatal_arg = cfg->fatal_arg;
    sn->s = s;
    sn->g = g;
    memcpy(sn->gid, store_group_get_id(g)->b, 16);
    store_group_id_hex(store_group_get_id(g), sn->hex);
    if (strlen(cfg->data_dir) + 64 >= sizeof sn->data_dir) {
        return keel_err(KEEL_EINVAL, errmsg, "data directory path too long");
    }
    snap__fmt(sn->data_dir, sizeof sn->data_dir, "%s", cfg->data_dir);
    snap__fmt(parent, sizeof parent, "%s/groups/%s", cfg->data_dir, sn->hex);
    snap__fmt(sn->dir, sizeof sn->dir, "%s/snap", parent);
    /* No fsync on the loop thread: snap__write_file makes the entry
     * durable (store_group_dirs_sync) before the first snapshot in it. */
    int rv = sn->fs->mkdir(sn->fs, sn->dir, errmsg);
    if (rv == 0) {
        store_group_dir_made(g);
    }
    return rv == KEEL_EEXIST ? 0 : rv;
}

int snap_open(const struct snap_config *cfg, struct store *s,
              struct store_group *g, const struct store_recovery *rep,
              struct snap **out, struct snap_load_report *lr, char *errmsg)
{
    struct snap_named nm;
    struct snap *sn;
    int rv;

    ASSERT(out != NULL && lr != NULL);
    ASSERT(rep != NULL);
    memset(lr, 0, sizeof *lr);
    sn = calloc(1, sizeof *sn);
    if (sn == NULL) {
        return keel_err(KEEL_ENOMEM, errmsg, "out of memory");
    }
    rv = init_snap(sn, cfg, s, g, errmsg);
    if (rv == 0) {
        snap__named(sn, &nm);
        sn->named = nm;
        lr->named_index = nm.index;
        lr->named_term = nm.term;
        lr->named_older_index = nm.older_index;
        lr->named_older_term = nm.older_term;
        rv = tidy_dir(sn, &nm, lr, errmsg);
    }
    rv = rv == 0 ? choose(sn, rep, &nm, lr, errmsg) : rv;
    if (rv == 0 && lr->source == SNAP_SOURCE_AMNESIA && !rep->amnesia) {
        /* Recorded synced, so a crash keeps it (docs/design.md §4.7 R3);
         * the group restores by InstallSnapshot. */
        rv = store_amnesia_enter(g, rep->hard_term, 0, errmsg);
    }
    if (rv != 0) {
        snap_body_free(lr);
        free(sn);
        return rv;
    }
    lr->amnesia = rep->amnesia || lr->source == SNAP_SOURCE_AMNESIA;
    lr->must_not_lead = sn->must_not_lead;
    *out = sn;
    return 0;
}

void snap_close(struct snap *sn)
{
    if (sn == NULL) {
        return;
    }
    ASSERT(sn->older.index <= sn->newest.index);
    ASSERT(sn->g != NULL);
    free(sn);
}

void snap_body_free(struct snap_load_report *lr)
{
    ASSERT(lr != NULL);
    free(lr->body);
    lr->body = NULL;
    lr->body_len = 0;
    ASSERT(lr->body == NULL);
}

void snap_info(const struct snap *sn, struct snap_info *out)
{
    ASSERT(sn != NULL);
    ASSERT(out != NULL);
    out->newest_index = sn->newest.index;
    out->newest_term = sn->newest.term;
    out->older_index = sn->older.index;
    out->older_term = sn->older.term;
    out->must_not_lead = sn->must_not_lead;
}

int snap_read_held(struct snap *sn, uint64_t index, uint8_t **body, size_t *len,
                   char *errmsg)
{
    struct snap_expect exp;
    char path[SNAP_PATH_BYTES];

    ASSERT(sn != NULL);
    ASSERT(body != NULL && len != NULL);
    const struct snap_held *h =
        index == sn->older.index && index != 0 ? &sn->older : &sn->newest;
    if (h->index == 0 || (index != 0 && h->index != index)) {
        return keel_err(KEEL_ENOENT, errmsg, "no valid snapshot %llu held",
                        (unsigned long long)index);
    }
    memcpy(exp.group, sn->gid, 16);
    exp.index = h->index;
    exp.term = h->term;
    snap_path(sn, exp.index, path, sizeof path);
    return snap__load_file(sn, path, &exp, true, body, len, errmsg);
}

int snap_read_newest(struct snap *sn, uint8_t **body, size_t *len, char *errmsg)
{
    return snap_read_held(sn, 0, body, len, errmsg);
}

int snap_group_delete(const struct snap_config *cfg,
                      const struct store_group_id *id, char *errmsg)
{
    struct names names = {NULL, 0};
    char hex[33];
    char dir[SNAP_PATH_BYTES];
    char path[SNAP_PATH_BYTES];
    struct fs *fs = snap__cfg_fs(cfg);
    int rv;

    ASSERT(id != NULL);
    store_group_id_hex(id, hex);
    snap__fmt(dir, sizeof dir, "%s/groups/%s/snap", cfg->data_dir, hex);
    rv = names_read(fs, dir, &names, errmsg);
    for (size_t i = 0; rv == 0 && i < names.n; i++) {
        if (parse_name(names.v[i]) != 0 || ends_with(names.v[i], ".tmp")) {
            snap__fmt(path, sizeof path, "%s/%s", dir, names.v[i]);
            rv = fs->unlink(fs, path, errmsg);
        }
    }
    free(names.v);
    if (rv == KEEL_ENOENT && names.n == 0) {
        return 0; /* no snapshot directory: nothing to delete */
    }
    return rv == 0 ? fs->fsync_dir(fs, dir, errmsg) : rv;
}

void snap_report_describe(const struct snap_load_report *lr, char *out,
                          size_t cap)
{
    ASSERT(lr != NULL);
    ASSERT(out != NULL && cap > 0);
    unsigned long long n = lr->named_index;
    unsigned long long o = lr->named_older_index;
    int w = 0;

    out[0] = '\0';
    switch (lr->source) {
    case SNAP_SOURCE_LOG:
        w = snprintf(out, cap,
                     "no valid snapshot: state rebuilt from the "
                     "log from index 1");
        break;
    case SNAP_SOURCE_NEWEST:
        w = snprintf(out, cap, "restored from snapshot %llu (term %llu)",
                     (unsigned long long)lr->index,
                     (unsigned long long)lr->term);
        break;
    case SNAP_SOURCE_OLDER:
        w = snprintf(out, cap,
                     "newest snapshot %llu quarantined (%s); restored from "
                     "snapshot %llu plus the log; must not lead until a "
                     "newer snapshot is written",
                     n, lr->newest_reason, (unsigned long long)lr->index);
        break;
    case SNAP_SOURCE_AMNESIA:
        w = snprintf(out, cap,
                     "no usable snapshot (newest %llu%s%s, older %llu%s%s) "
                     "and the log does not continue one: amnesiac, awaiting "
                     "InstallSnapshot from the leader",
                     n, lr->newest_bad ? ": " : "", lr->newest_reason, o,
                     lr->older_bad ? ": " : "", lr->older_reason);
        break;
    }
    if (w >= 0 && (size_t)w < cap && lr->unnamed > 0) {
        (void)snprintf(out + w, cap - (size_t)w,
                       "; %u snapshot file(s) LMDB does not name quarantined",
                       lr->unnamed);
    }
}
