/* The catalogue of a node of one, rebuilt from its segment files
 * (store_config.sole_member; docs/decisions/0025, docs/faults.md F3).
 *
 * A reset meta.lmdb (rule 3, last part) forgets every catalogue entry, and
 * a segment the catalogue does not name is never part of the log: with
 * peers the node rejoins as a new incarnation and a leader sends it the
 * log again. A node that is the only member of its groups has nobody to
 * send it anything, and nobody else can hold a newer copy: its segment
 * files are the log. Each one names itself in a checksummed header (group,
 * base index, size, salt, the log's first index), which is all a
 * catalogue entry holds, so the entries are rebuilt from the headers in
 * one synced transaction before the recovery scan runs. A file whose
 * header does not verify stays uncatalogued (the scan quarantines it).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

struct found {
    struct store_group *g;
    struct store_meta_seg *segs;
    size_t n;
    char *errmsg;
};

/* The catalogue entry of one <base>.blk whose header verifies and names
 * this group and that base; false for anything else. */
static bool header_entry(struct store_group *g, const char *path, uint64_t base,
                         struct store_meta_seg *out)
{
    struct store *s = g->s;
    struct fs_file *f = NULL;
    uint8_t buf[STORE_SEG_HEADER_BYTES];
    struct store_seg_header h;
    char err[KEEL_ERRMSG_MAX];
    size_t got = 0;

    ASSERT(path != NULL);
    ASSERT(out != NULL);
    if (s->fs->open(s->fs, path, FS_RDONLY, &f, err) != 0) {
        return false;
    }
    int rv = s->fs->pread(s->fs, f, buf, sizeof buf, 0, &got, err);
    s->fs->close(s->fs, f);
    if (rv != 0 || got != sizeof buf ||
        store_fmt_seg_header_decode(buf, sizeof buf, &h) != 0 ||
        memcmp(h.group, g->id.b, sizeof h.group) != 0 || h.base_index != base ||
        h.size_bytes > STORE_SEGMENT_BYTES_MAX ||
        h.size_bytes < STORE_SEG_HEADER_BYTES + 8 || h.size_bytes % 8 != 0 ||
        (h.first_index != 0 && h.first_index != base)) {
        return false;
    }
    *out = (struct store_meta_seg){base, h.salt, h.size_bytes, h.first_index};
    return true;
}

static int found_cb(void *arg, const char *name)
{
    struct found *fd = arg;
    char path[STORE_PATH_BYTES_MAX];
    unsigned long long base;
    char tail[8];

    ASSERT(fd != NULL);
    ASSERT(fd->n <= STORE_SEGMENTS_PER_GROUP_MAX);
    if (sscanf(name, "%20llu%7s", &base, tail) != 2 ||
        strcmp(tail, ".blk") != 0 || base == 0) {
        return 0;
    }
    if (fd->n == STORE_SEGMENTS_PER_GROUP_MAX) {
        return keel_err(KEEL_ELIMIT, fd->errmsg,
                        "more than %u segment files in %s",
                        STORE_SEGMENTS_PER_GROUP_MAX, fd->g->dir);
    }
    store_fmt_str(path, sizeof path, "%s/%s", fd->g->dir, name);
    if (header_entry(fd->g, path, base, &fd->segs[fd->n])) {
        fd->n++;
    }
    return 0;
}

static int by_base(const void *a, const void *b)
{
    const struct store_meta_seg *x = a;
    const struct store_meta_seg *y = b;
    return x->base_index < y->base_index ? -1 : x->base_index > y->base_index;
}

int store__rebuild_catalogue(struct store_group *g, struct store_recovery *rep,
                             char *errmsg)
{
    struct store_meta_snap none = {0};
    struct found fd = {g, NULL, 0, errmsg};

    ASSERT(g->s->cfg.sole_member);
    ASSERT(!g->s->cfg.read_only);
    fd.segs = calloc(STORE_SEGMENTS_PER_GROUP_MAX, sizeof *fd.segs);
    if (fd.segs == NULL) {
        return keel_err(KEEL_ENOMEM, errmsg, "rebuild: out of memory");
    }
    int rv = g->s->fs->readdir(g->s->fs, g->dir, found_cb, &fd, errmsg);
    if (rv == 0 && fd.n > 0) {
        qsort(fd.segs, fd.n, sizeof *fd.segs, by_base);
        rv = store_meta_log_replace(g->s->meta, g->id.b, fd.segs, fd.n, &none,
                                    errmsg);
        if (rv != 0) {
            store__fatal(g->s, "rebuild the catalogue", errmsg);
        }
        rep->rebuilt_segments = (unsigned)fd.n;
        rep->rebuilt_from = fd.segs[0].base_index;
    }
    ASSERT(fd.n <= STORE_SEGMENTS_PER_GROUP_MAX);
    free(fd.segs);
    return rv;
}
