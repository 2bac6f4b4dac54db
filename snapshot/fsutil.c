/* File-system helpers over the store's struct fs seam: directories,
 * quarantine moves, orphans, and the fatal-error path.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "internal.h"

void snap__fatal(struct snap *sn, const char *what, const char *errmsg)
{
    char msg[KEEL_ERRMSG_MAX + 128];

    ASSERT(sn != NULL);
    ASSERT(what != NULL);
    snprintf(msg, sizeof msg, "snapshot: %s failed: %s", what,
             errmsg != NULL ? errmsg : "?");
    if (sn->fatal_cb != NULL) {
        sn->fatal_cb(sn->fatal_arg, msg);
    }
    abort();
}

void snap__fmt(char *out, size_t cap, const char *fmt, ...)
{
    va_list ap;

    ASSERT(out != NULL);
    ASSERT(cap > 0);
    va_start(ap, fmt);
    int n = vsnprintf(out, cap, fmt, ap);
    va_end(ap);
    /* Paths are bounded by STORE_PATH_BYTES_MAX; a longer one is a
     * programmer error (the data directory was checked at store open). */
    ASSERT(n >= 0 && (size_t)n < cap);
}

void snap__parent(const char *path, char *out, size_t cap)
{
    const char *slash = strrchr(path, '/');
    size_t n = slash == NULL ? 0 : (size_t)(slash - path);

    ASSERT(cap > 1);
    ASSERT(n < cap);
    memcpy(out, path, n);
    out[n] = '\0';
}

int snap__mkdir(struct fs *fs, const char *dir, char *errmsg)
{
    char parent[SNAP_PATH_BYTES];
    int rv;

    ASSERT(fs != NULL);
    ASSERT(dir != NULL);
    rv = fs->mkdir(fs, dir, errmsg);
    if (rv == KEEL_EEXIST) {
        return 0;
    }
    if (rv != 0) {
        return rv;
    }
    /* A new directory entry is durable only once its parent is synced. */
    snap__parent(dir, parent, sizeof parent);
    return fs->fsync_dir(fs, parent, errmsg);
}

int snap__move_to(struct fs *fs, const char *data_dir, const char *sub,
                  const char *path, const char *name, char *errmsg)
{
    char qdir[SNAP_PATH_BYTES];
    char dst[SNAP_PATH_BYTES];
    char src_dir[SNAP_PATH_BYTES];
    unsigned i = 0;
    int rv;

    ASSERT(fs != NULL && data_dir != NULL && sub != NULL);
    ASSERT(path != NULL && name != NULL && strchr(name, '/') == NULL);
    snap__fmt(qdir, sizeof qdir, "%s/quarantine", data_dir);
    rv = snap__mkdir(fs, qdir, errmsg);
    if (rv == 0 && sub[0] != '\0') {
        snap__fmt(qdir, sizeof qdir, "%s/quarantine/%s", data_dir, sub);
        rv = snap__mkdir(fs, qdir, errmsg);
    }
    if (rv != 0) {
        return rv;
    }
    snap__fmt(dst, sizeof dst, "%s/%s", qdir, name);
    while (fs->stat(fs, dst, NULL) == 0) {
        if (++i >= SNAP_DIR_ENTRIES_MAX) {
            return keel_err(KEEL_ELIMIT, errmsg,
                            "quarantine holds too many copies of %s: move "
                            "some away",
                            name);
        }
        snap__fmt(dst, sizeof dst, "%s/%s.%u", qdir, name, i);
    }
    rv = fs->rename(fs, path, dst, errmsg);
    if (rv != 0) {
        return rv;
    }
    snap__parent(path, src_dir, sizeof src_dir);
    rv = fs->fsync_dir(fs, qdir, errmsg);
    return rv == 0 ? fs->fsync_dir(fs, src_dir, errmsg) : rv;
}

int snap_quarantine_orphan(const struct snap_config *cfg, const char *path,
                           const char *name, char *errmsg)
{
    struct fs *fs;
    int rv;

    ASSERT(cfg != NULL && cfg->data_dir != NULL);
    ASSERT(path != NULL && name != NULL);
    if (name[0] == '\0' || strchr(name, '/') != NULL || name[0] == '.') {
        return keel_err(KEEL_EINVAL, errmsg, "orphan name '%s' invalid", name);
    }
    fs = cfg->fs != NULL ? cfg->fs : store_fs_posix();
    rv = fs->stat(fs, path, errmsg);
    if (rv != 0) {
        return rv;
    }
    /* Never unlink: an operator command removes orphans (docs/design.md §5). */
    return snap__move_to(fs, cfg->data_dir, "orphans", path, name, errmsg);
}

struct list_ctx {
    int (*cb)(void *arg, const char *name);
    void *arg;
    size_t n;
};

static int list_cb(void *arg, const char *name)
{
    struct list_ctx *c = arg;

    ASSERT(c != NULL);
    ASSERT(name != NULL);
    if (c->n >= SNAP_ORPHANS_MAX) {
        return KEEL_ELIMIT;
    }
    c->n++;
    return c->cb != NULL ? c->cb(c->arg, name) : 0;
}

int snap_orphans_list(const struct snap_config *cfg,
                      int (*cb)(void *arg, const char *name), void *arg,
                      size_t *n, char *errmsg)
{
    struct list_ctx c = {cb, arg, 0};
    char dir[SNAP_PATH_BYTES];
    struct fs *fs;
    int rv;

    ASSERT(cfg != NULL && cfg->data_dir != NULL);
    ASSERT(n != NULL);
    fs = cfg->fs != NULL ? cfg->fs : store_fs_posix();
    snap__fmt(dir, sizeof dir, "%s/quarantine/orphans", cfg->data_dir);
    rv = fs->readdir(fs, dir, list_cb, &c, errmsg);
    if (rv == KEEL_ENOENT) {
        rv = 0;
    }
    if (rv == KEEL_ELIMIT) {
        rv = keel_err(KEEL_ELIMIT, errmsg,
                      "more than %d orphans in quarantine/orphans",
                      SNAP_ORPHANS_MAX);
    }
    *n = c.n;
    return rv;
}
