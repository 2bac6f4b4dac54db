/* Group close and explicit deletion, and the hard-state read (store.h).
 * Deletion follows docs/design.md §4, §5: every LMDB key of the group goes in
 * one synced transaction first, then the files are unlinked, then the
 * directory is fsynced. A crash before the transaction leaves the whole
 * group; after it, files LMDB no longer names, which the next open of that
 * group id moves to quarantine/ — never a half group read as data loss.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/* Unlink g from the store's lists. Caller holds s->mu; g is idle. */
static void unlink_group(struct store *s, struct store_group *g)
{
    ASSERT(!g->busy && !g->queued);
    ASSERT(s->ngroups > 0);
    for (struct store_group **pp = &s->groups; *pp != NULL; pp = &(*pp)->next) {
        if (*pp == g) {
            *pp = g->next;
            s->ngroups--;
            break;
        }
    }
    if (g->ev_queued) {
        store__gq_unlink(s, STORE__Q_EVENT, g);
        g->ev_queued = false;
    }
}

void store_group_close(struct store_group *g)
{
    struct store *s = g->s;

    ASSERT(s != NULL);
    ASSERT(g->inflight == NULL || g->busy);
    pthread_mutex_lock(&s->mu);
    if (g->policy.policy == STORE_FSYNC_INTERVAL && !s->cfg.read_only) {
        /* What was written is synced, as at a clean store close. */
        store__op_push(g, store__op_new(OP_INTERVAL_SYNC));
    }
    g->interval_dirty = false;
    store__schedule(s, g);
    for (;;) {
        if (!g->busy && !g->queued && g->enospc) {
            store__ops_drop(
                g); /* out of space, closing: nothing more can be written */
        }
        if (g->pre_queued) {
            store__spare_unqueue(s, g); /* no spare for a closing group */
        }
        if (!g->busy && !g->queued && g->ops_head == NULL && !g->pre_running) {
            break;
        }
        store__wait_step(s);
    }
    unlink_group(s, g);
    pthread_mutex_unlock(&s->mu);
    store__group_free(s, g);
}

int store_hard_state_load(struct store_group *g, uint64_t *term, void *vote,
                          size_t *vote_len, char *errmsg)
{
    uint8_t buf[STORE_VOTE_BYTES_MAX];
    size_t len = 0;
    int rv;

    ASSERT(g != NULL && term != NULL);
    ASSERT(vote_len != NULL && (vote != NULL || *vote_len == 0));
    *term = 0;
    rv = store_meta_hs_get(g->s->meta, g->id.b, term, buf, &len);
    if (rv == KEEL_ENOENT) {
        *term = 0;
        *vote_len = 0;
        return 0;
    }
    if (rv != 0) {
        *term = 0;
        return keel_err(rv, errmsg,
                        "hard state of the group is unreadable in meta.lmdb: "
                        "restart the node (the store then quarantines it)");
    }
    if (len > *vote_len) {
        return keel_err(KEEL_ETOOBIG, errmsg,
                        "vote of %zu bytes does not fit %zu: pass a buffer "
                        "of STORE_VOTE_BYTES_MAX",
                        len, *vote_len);
    }
    memcpy(vote, buf, len);
    *vote_len = len;
    return 0;
}

/* Tests: one deletion step; false once the process "died" (see
 * store_debug_die_after). */
static bool delete_step(struct store *s)
{
    ASSERT(s != NULL);
    if (store__dead(s)) {
        return false;
    }
    if (s->die_after_armed) {
        if (s->die_after == 0) {
            store_debug_kill(s);
            return false;
        }
        s->die_after--;
    }
    ASSERT(!store__dead(s));
    return true;
}

struct del_names {
    uint64_t bases[STORE_DIR_ENTRIES_MAX];
    size_t n;
    bool spare;
    bool overflow;
};

static int del_name_cb(void *arg, const char *name)
{
    struct del_names *d = arg;
    unsigned long long base;
    char tail[8];

    ASSERT(d != NULL);
    ASSERT(name != NULL);
    if (strcmp(name, STORE_PREALLOC_NAME) == 0) {
        d->spare = true;
    } else if (sscanf(name, "%20llu%7s", &base, tail) == 2 &&
               strcmp(tail, ".blk") == 0 && base >= 1) {
        if (d->n == STORE_DIR_ENTRIES_MAX) {
            d->overflow = true;
            return 0;
        }
        d->bases[d->n++] = base;
    }
    return 0;
}

/* Unlink the files LMDB no longer names, then fsync the directory. */
static void unlink_files(struct store *s, const char *dir,
                         const struct del_names *d)
{
    char path[STORE_PATH_BYTES_MAX];
    char errmsg[KEEL_ERRMSG_MAX];
    int rv;

    ASSERT(d->n <= STORE_DIR_ENTRIES_MAX);
    ASSERT(dir != NULL);
    for (size_t i = 0; i <= d->n; i++) {
        if (i == d->n && !d->spare) {
            break;
        }
        if (i < d->n) {
            store_fmt_str(path, sizeof path, "%s/%020llu.blk", dir,
                          (unsigned long long)d->bases[i]);
        } else {
            store_fmt_str(path, sizeof path, "%s/%s", dir, STORE_PREALLOC_NAME);
        }
        if (!delete_step(s)) {
            return;
        }
        rv = s->fs->unlink(s->fs, path, errmsg);
        if (rv != 0 && rv != KEEL_ENOENT) {
            store__fatal(s, "unlink deleted group's segment", errmsg);
        }
    }
    if (!delete_step(s)) {
        return;
    }
    rv = s->fs->fsync_dir(s->fs, dir, errmsg);
    if (rv != 0) {
        store__fatal(s, "fsync deleted group's directory", errmsg);
    }
}

int store_group_delete(struct store *s, const struct store_group_id *id,
                       char *errmsg)
{
    char dir[STORE_PATH_BYTES_MAX];
    char hex[33];
    struct del_names *d;
    struct store_group *g;
    int rv;

    ASSERT(s != NULL);
    ASSERT(id != NULL);
    g = store__find_group(s, id);
    if (g != NULL) {
        store_group_close(g);
    }
    d = calloc(1, sizeof *d);
    if (d == NULL) {
        return keel_err(KEEL_ENOMEM, errmsg, "out of memory");
    }
    store_group_id_hex(id, hex);
    store_fmt_str(dir, sizeof dir, "%s/groups/%s/log", s->data_dir, hex);
    /* Names first: a directory that cannot be listed stops the deletion
     * before anything changed. */
    rv = s->fs->readdir(s->fs, dir, del_name_cb, d, errmsg);
    if (rv == KEEL_ENOENT) {
        rv = 0; /* never opened: only LMDB keys can exist */
    }
    if (rv == 0 && d->overflow) {
        rv = keel_err(KEEL_ELIMIT, errmsg,
                      "more than %d segment files in %s: remove them by hand",
                      STORE_DIR_ENTRIES_MAX, dir);
    }
    if (rv != 0 || !delete_step(s)) {
        free(d);
        return rv;
    }
    rv = store_meta_group_del(s->meta, id->b, errmsg);
    if (rv != 0) {
        store__fatal(s, "remove deleted group from meta.lmdb", errmsg);
    }
    unlink_files(s, dir, d);
    free(d);
    return 0;
}

/* The log moves to quarantine/ (never deleted, docs/design.md §4, §5): the
 * catalogue and the snapshot pair go first, in one synced LMDB
 * transaction, then the files. A crash between leaves files LMDB does not
 * name, which the next open quarantines anyway. The amnesia record (rule
 * 3), hard state and recover wait stay: term and vote never go back. */
int store_group_quarantine_log(struct store *s, const struct store_group_id *id,
                               char *errmsg)
{
    char dir[STORE_PATH_BYTES_MAX];
    char path[STORE_PATH_BYTES_MAX];
    char qname[STORE_PATH_BYTES_MAX];
    char hex[33];
    struct store_meta_amnesia a;
    struct del_names *d;
    int rv;

    ASSERT(s != NULL && id != NULL);
    ASSERT(!s->cfg.read_only);
    store_group_id_hex(id, hex);
    if (store__find_group(s, id) != NULL) {
        return keel_err(KEEL_EEXIST, errmsg, "group %s is open: close it first",
                        hex);
    }
    if (store_meta_amnesia_get(s->meta, id->b, &a) != 0) {
        /* Only a group that can never vote or lead on its own loses its
         * log: the record keeps it so across a restart. */
        return keel_err(KEEL_EINVAL, errmsg,
                        "group %s is not recorded amnesiac: its log stays",
                        hex);
    }
    d = calloc(1, sizeof *d);
    if (d == NULL) {
        return keel_err(KEEL_ENOMEM, errmsg, "out of memory");
    }
    store_fmt_str(dir, sizeof dir, "%s/groups/%s/log", s->data_dir, hex);
    rv = s->fs->readdir(s->fs, dir, del_name_cb, d, errmsg);
    rv = rv == KEEL_ENOENT ? 0 : rv;
    if (rv == 0 && d->overflow) {
        rv = keel_err(KEEL_ELIMIT, errmsg,
                      "more than %d segment files in %s: move them by hand",
                      STORE_DIR_ENTRIES_MAX, dir);
    }
    if (rv == 0) {
        const struct store_meta_snap none = {0, 0, 0, 0};
        rv = store_meta_log_replace(s->meta, id->b, NULL, 0, &none, errmsg);
        if (rv != 0) {
            store__fatal(s, "empty the quarantined log in meta.lmdb", errmsg);
        }
    }
    for (size_t i = 0; rv == 0 && i < d->n; i++) {
        store_fmt_str(path, sizeof path, "%s/%020llu.blk", dir,
                      (unsigned long long)d->bases[i]);
        store_fmt_str(qname, sizeof qname, "%s-%020llu.blk", hex,
                      (unsigned long long)d->bases[i]);
        rv = store__quarantine(s, path, qname, errmsg);
        rv = rv == KEEL_ENOENT ? 0 : rv;
    }
    free(d);
    return rv;
}

void store_debug_die_after(struct store *s, unsigned steps)
{
    ASSERT(s != NULL);
    s->die_after_armed = true;
    s->die_after = steps;
    ASSERT(s->die_after == steps);
}
