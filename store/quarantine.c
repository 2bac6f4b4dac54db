/* Moving a file aside into <data>/quarantine (docs/design.md §5): the one
 * copy of the move for the store's damaged segments and for snapshot/'s
 * damaged files and orphans, over the struct fs seam. Never unlinks. */
#include <string.h>

#include "internal.h"

void store__parent_of(const char *path, char *out, size_t cap)
{
    const char *slash = strrchr(path, '/');
    size_t n = slash == NULL ? 0 : (size_t)(slash - path);

    ASSERT(cap > 1);
    ASSERT(out != NULL);
    if (n >= cap) {
        n = cap - 1;
    }
    memcpy(out, path, n);
    out[n] = '\0';
}

int store_mkdir_durable(struct fs *fs, const char *dir, char *errmsg)
{
    char parent[STORE_PATH_BYTES_MAX];

    ASSERT(fs != NULL);
    ASSERT(dir != NULL);
    int rv = fs->mkdir(fs, dir, errmsg);
    if (rv == KEEL_EEXIST) {
        return 0;
    }
    if (rv != 0) {
        return rv;
    }
    /* A new directory entry is durable only once its parent is synced. */
    store__parent_of(dir, parent, sizeof parent);
    return fs->fsync_dir(fs, parent, errmsg);
}

int store_quarantine_move(struct fs *fs, const char *data_dir, const char *sub,
                          const char *path, const char *name, bool *moved,
                          char *errmsg)
{
    char qdir[STORE_PATH_BYTES_MAX];
    char dst[STORE_PATH_BYTES_MAX];
    char src_dir[STORE_PATH_BYTES_MAX];

    ASSERT(fs != NULL && data_dir != NULL && sub != NULL);
    ASSERT(path != NULL && name != NULL && strchr(name, '/') == NULL);
    *moved = false;
    store_fmt_str(qdir, sizeof qdir, "%s/quarantine", data_dir);
    int rv = store_mkdir_durable(fs, qdir, errmsg);
    if (rv == 0 && sub[0] != '\0') {
        store_fmt_str(qdir, sizeof qdir, "%s/quarantine/%s", data_dir, sub);
        rv = store_mkdir_durable(fs, qdir, errmsg);
    }
    if (rv != 0) {
        return rv;
    }
    store_fmt_str(dst, sizeof dst, "%s/%s", qdir, name);
    for (unsigned i = 1; fs->stat(fs, dst, NULL) == 0; i++) {
        if (i >= STORE_DIR_ENTRIES_MAX) {
            return keel_err(KEEL_ELIMIT, errmsg,
                            "quarantine holds too many copies of %s: move "
                            "some away",
                            name);
        }
        store_fmt_str(dst, sizeof dst, "%s/%s.%u", qdir, name, i);
    }
    rv = fs->rename(fs, path, dst, errmsg);
    if (rv != 0) {
        return rv;
    }
    *moved = true;
    store__parent_of(path, src_dir, sizeof src_dir);
    rv = fs->fsync_dir(fs, qdir, errmsg);
    return rv == 0 ? fs->fsync_dir(fs, src_dir, errmsg) : rv;
}
