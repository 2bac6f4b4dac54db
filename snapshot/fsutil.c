/* File-system helpers over the store's struct fs seam: path text,
 * orphans (moved by store_quarantine_move, store/quarantine.c), and the
 * fatal-error path.
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

int snap_quarantine_orphan(const struct snap_config *cfg, const char *path,
                           const char *name, char *errmsg)
{
    struct fs *fs = snap__cfg_fs(cfg);
    int rv;

    ASSERT(path != NULL && name != NULL);
    if (name[0] == '\0' || strchr(name, '/') != NULL || name[0] == '.') {
        return keel_err(KEEL_EINVAL, errmsg, "orphan name '%s' invalid", name);
    }
    rv = fs->stat(fs, path, errmsg);
    if (rv != 0) {
        return rv;
    }
    /* Never unlink: an operator command removes orphans (docs/design.md §5). */
    bool moved;
    return store_quarantine_move(fs, cfg->data_dir, "orphans", path, name,
                                 &moved, errmsg);
}

struct fs *snap__cfg_fs(const struct snap_config *cfg)
{
    ASSERT(cfg != NULL && cfg->data_dir != NULL);
    return cfg->fs != NULL ? cfg->fs : store_fs_posix();
}

struct walk {
    int (*cb)(void *arg, const char *name);
    void *arg;
    size_t max;
    size_t n;
};

static int walk_cb(void *arg, const char *name)
{
    struct walk *w = arg;

    ASSERT(w != NULL);
    ASSERT(name != NULL);
    if (w->n >= w->max) {
        return KEEL_ELIMIT;
    }
    w->n++;
    return w->cb != NULL ? w->cb(w->arg, name) : 0;
}

int snap__readdir(struct fs *fs, const char *dir, size_t max,
                  int (*cb)(void *arg, const char *name), void *arg, size_t *n,
                  char *errmsg)
{
    struct walk w = {cb, arg, max, 0};

    ASSERT(fs != NULL && dir != NULL);
    int rv = fs->readdir(fs, dir, walk_cb, &w, errmsg);
    if (n != NULL) {
        *n = w.n;
    }
    return rv;
}

int snap_orphans_list(const struct snap_config *cfg,
                      int (*cb)(void *arg, const char *name), void *arg,
                      size_t *n, char *errmsg)
{
    struct fs *fs = snap__cfg_fs(cfg);
    char dir[SNAP_PATH_BYTES];

    ASSERT(n != NULL);
    snap__fmt(dir, sizeof dir, "%s/quarantine/orphans", cfg->data_dir);
    int rv = snap__readdir(fs, dir, SNAP_ORPHANS_MAX, cb, arg, n, errmsg);
    if (rv == KEEL_ENOENT) {
        rv = 0;
    }
    if (rv == KEEL_ELIMIT) {
        rv = keel_err(KEEL_ELIMIT, errmsg,
                      "more than %d orphans in quarantine/orphans",
                      SNAP_ORPHANS_MAX);
    }
    return rv;
}
