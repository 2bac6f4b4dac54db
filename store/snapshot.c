/* The snapshot (index, term) pair LMDB records for a group (docs/design.md §5):
 * read back for the driver, the snapshot module and the vote extent. */
#include <string.h>

#include "internal.h"

int store_snapshot_get(struct store_group *g, struct store_snapshot_pair *out,
                       char *errmsg)
{
    struct store_meta_snap sn;
    int rv;

    ASSERT(g != NULL);
    ASSERT(out != NULL);
    memset(out, 0, sizeof *out);
    memset(&sn, 0, sizeof sn);
    /* LMDB is the record (a file it does not name does not count), so read
     * it rather than the group's cached copy: a worker may be recording. */
    rv = store_meta_snap_get(g->s->meta, g->id.b, &sn);
    if (rv == KEEL_ENOENT) {
        return 0;
    }
    if (rv != 0) {
        return keel_err(rv, errmsg,
                        "the snapshot record of the group is unreadable: "
                        "restart the node (its meta.lmdb value is checked "
                        "on open)");
    }
    /* The pair is written by store_snapshot_record only: newest first. */
    if (sn.older_index > sn.index || (sn.index != 0 && sn.term == 0)) {
        return keel_err(KEEL_ECORRUPT, errmsg,
                        "snapshot record %llu/%llu names an older snapshot "
                        "above the newest",
                        (unsigned long long)sn.index,
                        (unsigned long long)sn.older_index);
    }
    *out = (struct store_snapshot_pair){.index = sn.index,
                                        .term = sn.term,
                                        .older_index = sn.older_index,
                                        .older_term = sn.older_term};
    ASSERT(out->older_index <= out->index);
    return 0;
}
